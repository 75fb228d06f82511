"""The servicecidrs controller of kube-controller-manager: every ServiceCIDR holds the
``networking.k8s.io/service-cidr-finalizer`` and a ``Ready`` condition, and one being
deleted keeps its finalizer while an allocated cluster IP would be left outside every range.

- A ServiceCIDR not being deleted gets the finalizer, then ``Ready=True`` ("Kubernetes
  Service CIDR is ready"); the default one, ``kubernetes``, is written so by the API server
  at start (``KubeApi._default_service_cidr``), and made again when deleted by the API
  server's default ServiceCIDR controller (``controllers/defaultservicecidr.py``).
- One being deleted whose CIDRs each lie in another ServiceCIDR's loses its finalizer at
  once. Otherwise the allocator's IPAddresses (labelled ``managed-by: ipallocator.k8s.io``)
  are listed: while one lies in this ServiceCIDR and in no other, the condition is
  ``Ready=False``, reason ``Terminating``, and the check comes again after ``recheck``
  seconds (upstream re-checks on every IPAddress event; a poll while something is
  terminating spares every Service's write an event here); when none does, the finalizer
  goes and the object with it. The API server stops giving new IPs from a ServiceCIDR
  being deleted (``api/allocations.py``), so the set only shrinks.

The finalizer goes no sooner than ``grace`` seconds after the deletion began, as
upstream's (10 s there): an API server's allocator learns of the deletion from its watch
cache, and a Service's write that read the ranges just before could still take an IP
from it. Here the caches lag by milliseconds, and 2 s is plenty.
"""

from __future__ import annotations

import ipaddress
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.servicecidrs import FINALIZER, MANAGED_BY_LABEL, Network

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["ServiceCIDRsController", "start"]

log = logging.getLogger(__name__)

SERVICE_CIDRS = resource_path("networking.k8s.io", "v1", "servicecidrs")
IP_ADDRESSES = resource_path("networking.k8s.io", "v1", "ipaddresses")
ALLOCATED = f"{MANAGED_BY_LABEL}=ipallocator.k8s.io"
READY = "Kubernetes Service CIDR is ready"
BLOCKED = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
RECHECK = 1.0  # seconds between checks of a ServiceCIDR whose deletion an IP holds up
GRACE = 2.0  # seconds from a deletion's start before the finalizer may go (the module docstring)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _since(timestamp: str) -> float:
    """Seconds since an RFC 3339 time (0 for one that does not parse)."""
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (datetime.now(UTC) - then).total_seconds()


def _cidrs(sc: dict[str, Any]) -> list[Network]:
    found = []
    for cidr in (sc.get("spec") or {}).get("cidrs") or ():
        try:
            found.append(ipaddress.ip_network(str(cidr)))
        except ValueError:
            continue
    return found


def _ready(sc: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (sc.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return None


class ServiceCIDRsController:
    def __init__(self, client: Client, recheck: float = RECHECK, grace: float = GRACE) -> None:
        self.client = client
        self.recheck = recheck
        self.grace = grace
        self.queue = WorkQueue()
        self.cidrs = client.informer(SERVICE_CIDRS, on_add=self._changed,
                                     on_update=lambda _old, new: self._changed(new), on_delete=self._deleted)

    def _changed(self, sc: dict[str, Any]) -> None:
        self.queue.add(str(meta_of(sc).get("name", "")))

    def _deleted(self, _sc: dict[str, Any]) -> None:
        """A range gone: the ServiceCIDRs being deleted are checked again (it may have held
        their IPs too; then they must keep them now)."""
        for name, sc in self.cidrs.items.items():
            if meta_of(sc).get("deletionTimestamp"):
                self.queue.add(name)

    async def run(self) -> None:
        await run_controller("servicecidrs controller", (self.cidrs,), self.queue, self.sync, 1)

    async def sync(self, name: str) -> None:
        sc = self.cidrs.items.get(name)
        if sc is None:
            return
        meta = meta_of(sc)
        finalizers = list(meta.get("finalizers") or ())
        if meta.get("deletionTimestamp"):
            if FINALIZER not in finalizers:
                return
            if await self._holds_ips(name, sc):
                self.queue.add_after(name, self.recheck)
                await self._set_ready(sc, "False", "Terminating", BLOCKED)
                return
            wait = self.grace - _since(str(meta["deletionTimestamp"]))
            if wait > 0:
                self.queue.add_after(name, wait)
                return
            await self._write(name, sc, finalizers=[f for f in finalizers if f != FINALIZER])
            return
        if FINALIZER not in finalizers:
            await self._write(name, sc, finalizers=[*finalizers, FINALIZER])
            return  # (its update comes back as an event: the condition then)
        condition = _ready(sc)
        if condition is None or condition.get("status") != "True":
            await self._set_ready(sc, "True", "", READY)

    async def _holds_ips(self, name: str, sc: dict[str, Any]) -> bool:
        """Whether an allocated IP lies in this ServiceCIDR and in no other (upstream's
        canDeleteCIDR)."""
        own = _cidrs(sc)
        others = [n for other, o in self.cidrs.items.items() if other != name for n in _cidrs(o)]
        if own and all(any(n.version == o.version and n.subnet_of(o) for o in others)  # type: ignore[arg-type]
                       for n in own):
            return False  # every range lies in another's: its IPs stay in one
        listed = await self.client.list(IP_ADDRESSES, labelSelector=ALLOCATED)
        for item in listed.get("items") or ():
            try:
                address = ipaddress.ip_address(str(meta_of(item).get("name")))
            except ValueError:
                continue
            if any(address in n for n in own) and not any(address in n for n in others):
                return True
        return False

    async def _set_ready(self, sc: dict[str, Any], status: str, reason: str, message: str) -> None:
        condition = _ready(sc)
        if condition is not None and (condition.get("status"), condition.get("reason"), condition.get("message")) == \
                (status, reason, message):
            return
        conditions = [c for c in (sc.get("status") or {}).get("conditions") or () if c is not condition]
        conditions.append({"type": "Ready", "status": status, "lastTransitionTime": _now(), "reason": reason,
                           "message": message})
        meta = meta_of(sc)
        await self.client.update(f"{SERVICE_CIDRS}/{meta.get('name')}/status",
                                 {**sc, "status": {**(sc.get("status") or {}), "conditions": conditions}})

    async def _write(self, name: str, sc: dict[str, Any], finalizers: list[str]) -> None:
        try:
            await self.client.patch(f"{SERVICE_CIDRS}/{name}", {"metadata": {
                "resourceVersion": meta_of(sc).get("resourceVersion"), "finalizers": finalizers or None}})
        except ApiError as e:
            if e.code != 404:
                raise


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await ServiceCIDRsController(client).run()
