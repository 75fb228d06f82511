"""Writes the kubeconfig that lets kubectl and client libraries talk to ``serve``.

The shape is kubectl's (``clientcmd/api/v1``)::

    apiVersion: v1
    kind: Config
    clusters: [{name: controlplane, cluster: {server: http://127.0.0.1:6443}}]
    users: [{name: admin, user: {token: ...}}]
    contexts: [{name: controlplane, context: {cluster: controlplane, user: admin}}]
    current-context: controlplane
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .files import write_private

__all__ = ["kubeconfig", "write_kubeconfig"]


def kubeconfig(server: str, token: str, user: str = "admin", name: str = "controlplane") -> dict[str, Any]:
    """The kubeconfig document for one cluster, one token user and a current context joining them."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server: str, token: str, user: str = "admin", name: str = "controlplane") -> None:
    """Write the kubeconfig to ``path`` (mode 0600, atomically; parent directories are created)."""
    doc = kubeconfig(server, token, user=user, name=name)
    write_private(path, yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).encode())
