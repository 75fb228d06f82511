"""kube-apiserver's system namespaces controller (upstream's
``pkg/controlplane/controller/systemnamespaces``): ``kube-system``, ``kube-public``,
``kube-node-lease`` and ``default`` exist.

The API server makes them at start (``KubeApi.bootstrap``), and refuses to delete
``default``, ``kube-system`` and ``kube-public`` (NamespaceLifecycle's immortal
namespaces); ``kube-node-lease`` may be deleted (``kubectl delete namespace --all`` does),
which stops every kubelet's heartbeat. Every ``interval`` seconds (60, as upstream's) each
of them that does not exist is created again, with nothing but its name; one being deleted
still exists, and comes back at the first sync after it is gone. A create that fails is
logged and the next sync tries again, as upstream's ``wait.Until``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from controlplane.client import ApiError, Client, resource_path

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["INTERVAL", "SYSTEM_NAMESPACES", "SystemNamespacesController", "start"]

log = logging.getLogger(__name__)

INTERVAL = 60.0  # seconds between syncs, as upstream's
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")  # upstream's order
NAMESPACES = resource_path("", "v1", "namespaces")


class SystemNamespacesController:
    def __init__(self, client: Client, namespaces: Sequence[str] = SYSTEM_NAMESPACES,
                 interval: float = INTERVAL) -> None:
        self.client = client
        self.namespaces = tuple(namespaces)
        self.interval = interval

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.sync()

    async def sync(self) -> None:
        for name in self.namespaces:
            try:
                await self._ensure(name)
            except Exception:  # (a timeout under load, ...): the next sync tries again
                log.exception("system namespaces controller: unable to create required namespace %s", name)

    async def _ensure(self, name: str) -> None:
        try:
            await self.client.get(f"{NAMESPACES}/{name}")
            return
        except ApiError as e:
            if e.code != 404:
                raise
        log.info("system namespaces controller: creating namespace %s", name)
        try:
            await self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiError as e:
            if e.code != 409:  # (created meanwhile)
                raise


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await SystemNamespacesController(client).run()
