"""Writes the kubeconfig that lets kubectl and client libraries talk to ``serve``.

The shape is kubectl's (``clientcmd/api/v1``)::

    apiVersion: v1
    kind: Config
    clusters: [{name: controlplane, cluster: {server: https://127.0.0.1:6443,
                                              certificate-authority-data: <CA, base64>}}]
    users: [{name: admin, user: {token: ...}}]
    contexts: [{name: controlplane, context: {cluster: controlplane, user: admin}}]
    current-context: controlplane
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from .files import write_private

__all__ = ["kubeconfig", "write_kubeconfig"]


def kubeconfig(server: str, token: str, user: str = "admin", name: str = "controlplane",
               ca_pem: bytes | None = None) -> dict[str, Any]:
    """The kubeconfig document for one cluster, one token user and a current context joining them;
    with ``ca_pem``, the CA that signed the server's certificate."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server: str, token: str, user: str = "admin", name: str = "controlplane",
                     ca_pem: bytes | None = None) -> None:
    """Write the kubeconfig to ``path`` (mode 0600, atomically; parent directories are created)."""
    doc = kubeconfig(server, token, user=user, name=name, ca_pem=ca_pem)
    write_private(path, yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).encode())
