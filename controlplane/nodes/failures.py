"""Failure injection through the API, for any simulator (in the server or standalone).

The simulator managing node ``name`` reacts to the annotation
``nodes.controlplane.io/failure`` on the Node:

    await inject_failure(client, "sim-node-3")                # kubelet gone: lease stops, Ready -> Unknown
    await inject_failure(client, "sim-node-3", "not-ready")   # kubelet up, reports Ready=False
    await clear_failure(client, "sim-node-3")                 # back to Ready, taints removed

``controlplane nodes --kubeconfig K --fail NAME [--mode M]`` / ``--recover NAME`` do the same.
"""

from __future__ import annotations

from ..client import Client, resource_path
from .config import FAILURE_ANNOTATION

__all__ = ["FAILURE_MODES", "clear_failure", "inject_failure"]

FAILURE_MODES = ("unreachable", "not-ready")


async def inject_failure(client: Client, node: str, mode: str = "unreachable") -> None:
    if mode not in FAILURE_MODES:
        raise ValueError(f"failure mode {mode!r} is not one of {FAILURE_MODES}")
    await client.patch(resource_path("", "v1", "nodes", name=node),
                       {"metadata": {"annotations": {FAILURE_ANNOTATION: mode}}}, patch_type="merge")


async def clear_failure(client: Client, node: str) -> None:
    await client.patch(resource_path("", "v1", "nodes", name=node),
                       {"metadata": {"annotations": {FAILURE_ANNOTATION: None}}}, patch_type="merge")
