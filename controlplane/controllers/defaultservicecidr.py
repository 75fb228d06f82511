"""kube-apiserver's default ServiceCIDR controller (upstream's
``pkg/controlplane/controller/defaultservicecidr``): the ServiceCIDR ``kubernetes`` of the
server's service range (``--service-cluster-ip-range``, ``SERVICE_CIDR`` here) exists and
is Ready, as the ``kubernetes`` Service exists.

Every ``interval`` seconds (10, as upstream's, its endpoint reconciler's interval) one
sync, polled rather than driven by events (upstream's informer only caches the object):

- absent (deleted, and its finalizer gone): created again, its spec only (CIDRs in the
  server's order, the first one its default family), then its status synced as below;
  kube-controller-manager's servicecidrs controller gives it its finalizer;
- present, its status synced: not while it is being deleted (the servicecidrs
  controller's), nor while its CIDRs differ from the server's (upstream reports that
  once, as a ``KubernetesDefaultServiceCIDRInconsistent`` event, and changes nothing;
  here it is logged); ``Ready=True`` ("Kubernetes default Service CIDR is ready",
  reason "") applied to its status when it has no Ready condition or an Unknown one; a
  ``False`` one left for an administrator to look at.

The first sync is the API server's own, at start (``KubeApi._default_service_cidr``,
which writes the object as this controller and kube-controller-manager leave it); the
single- to dual-stack upgrade upstream's sync also makes has no use here (one family).
A sync that fails is logged and the next one tries again, as upstream's ``wait.Until``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.servicecidrs import DEFAULT_NAME
from controlplane.registry.strategies import SERVICE_CIDR

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["INTERVAL", "DefaultServiceCIDRController", "start"]

log = logging.getLogger(__name__)

SERVICE_CIDRS = resource_path("networking.k8s.io", "v1", "servicecidrs")
INTERVAL = 10.0  # seconds between syncs, as upstream's
FIELD_MANAGER = "kubernetes-service-cidr-controller"  # upstream's controllerName
READY_MESSAGE = "Kubernetes default Service CIDR is ready"


class DefaultServiceCIDRController:
    def __init__(self, client: Client, cidrs: list[str], interval: float = INTERVAL) -> None:
        self.client = client
        self.cidrs = cidrs  # order matters: the first is the default family
        self.interval = interval
        self.reported_mismatch = False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sync()
            except Exception:  # (a timeout under load, ...): the next sync tries again
                log.exception("default ServiceCIDR controller: sync failed")

    async def sync(self) -> None:
        try:
            service_cidr = await self.client.get(f"{SERVICE_CIDRS}/{DEFAULT_NAME}")
        except ApiError as e:
            if e.code != 404:
                raise
            log.info("creating the default ServiceCIDR with CIDRs %s", self.cidrs)
            try:
                service_cidr = await self.client.create(SERVICE_CIDRS, {
                    "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                    "metadata": {"name": DEFAULT_NAME}, "spec": {"cidrs": list(self.cidrs)}})
            except ApiError as e:
                if e.code != 409:  # (created meanwhile: the next sync sees it)
                    raise
                return
        await self.sync_status(service_cidr)

    async def sync_status(self, service_cidr: dict[str, Any]) -> None:
        if meta_of(service_cidr).get("deletionTimestamp"):
            return
        if (service_cidr.get("spec") or {}).get("cidrs") != self.cidrs:
            if not self.reported_mismatch:
                log.warning("the default ServiceCIDR %s does not match the server's service range %s",
                            (service_cidr.get("spec") or {}).get("cidrs"), self.cidrs)
                self.reported_mismatch = True
            return
        conditions = (service_cidr.get("status") or {}).get("conditions") or ()
        ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
        if ready is not None and ready.get("status") in ("True", "False"):
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await self.client.patch(f"{SERVICE_CIDRS}/{DEFAULT_NAME}/status", {
            "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": DEFAULT_NAME},
            "status": {"conditions": [{"type": "Ready", "status": "True", "message": READY_MESSAGE,
                                       "lastTransitionTime": now}]}},
            patch_type="apply", fieldManager=FIELD_MANAGER, force=True)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await DefaultServiceCIDRController(client, [str(SERVICE_CIDR)]).run()
