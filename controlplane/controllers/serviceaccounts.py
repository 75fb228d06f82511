"""The service account controller of kube-controller-manager: every active namespace holds
a ServiceAccount ``default``, put back when it is deleted.

The API server writes each new namespace's ``default`` itself, before it answers the
namespace's create (``KubeApi._default_service_account``), so pods created right after a
namespace find it (ServiceAccount admission refuses a pod whose ServiceAccount is missing,
api/serviceaccount.py). This controller keeps it there afterwards, as upstream's does: one
deleted (``kubectl delete sa default``) comes back at once, and none is made in a namespace
that is terminating."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["NAME", "ServiceAccountsController", "start"]

log = logging.getLogger(__name__)

NAME = "default"
NAMESPACES = resource_path("", "v1", "namespaces")
SERVICE_ACCOUNTS = resource_path("", "v1", "serviceaccounts")


class ServiceAccountsController:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.namespaces = client.informer(NAMESPACES, on_add=self._namespace,
                                          on_update=lambda _old, new: self._namespace(new))
        self.accounts = client.informer(SERVICE_ACCOUNTS, on_delete=self._account)

    def _namespace(self, ns: dict[str, Any]) -> None:
        self.queue.add(str(meta_of(ns).get("name", "")))

    def _account(self, sa: dict[str, Any]) -> None:
        meta = meta_of(sa)
        if meta.get("name") == NAME:
            self.queue.add(str(meta.get("namespace", "")))

    async def run(self) -> None:
        await run_controller("service account controller", (self.namespaces, self.accounts), self.queue,
                             self.sync, 1)

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.items.get(namespace)
        if ns is None or meta_of(ns).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == \
                "Terminating":
            return
        if f"{namespace}/{NAME}" in self.accounts.items:
            return
        try:
            await self.client.create(resource_path("", "v1", "serviceaccounts", namespace),
                                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME}})
        except ApiError as e:
            if e.code not in (403, 404, 409):  # terminating or gone meanwhile; there already
                raise


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await ServiceAccountsController(client).run()
