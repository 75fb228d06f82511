"""The APIServices of custom resources and every APIService's availability, as kube-apiserver's
crdregistration and APIService availability controllers keep them (``registry/apiservices.py``).

- A served version of a CustomResourceDefinition has a local APIService
  ``<version>.<group>`` labelled ``automanaged: "true"``, created when the version is
  served and removed when no CRD serves it any more (nor a built-in type: those are
  registered at start, ``api/autoregister.py``).
- A local APIService is ``Available`` (reason ``Local``). One naming a Service is not:
  this server proxies to no aggregated API server, so it is ``ServiceNotFound`` while the
  Service does not exist, ``ServicePortError`` while the (ClusterIP) Service has no such
  port, and ``FailedDiscoveryCheck`` otherwise; checked again when the Service changes (the
  Services' informer, shared with the EndpointSlice controller), as upstream's controller.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controlplane.client import Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.apiservices import AUTOMANAGED, local_apiservice
from controlplane.registry.types import BUILTIN

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["APIServiceController", "available_condition", "start"]

Obj = dict[str, Any]
APISERVICES = resource_path("apiregistration.k8s.io", "v1", "apiservices")
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
SERVICES = resource_path("", "v1", "services")
CUSTOM_KEY = "\x00custom"  # the queue's key for "the CRDs changed": never an APIService's name
_BUILTIN_GROUP_VERSIONS = frozenset((t.group, t.version) for t in BUILTIN)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _automanaged(svc: Obj) -> bool:
    """Whether ``svc`` is a custom resource's, kept by this controller (not one registered at start)."""
    return (meta_of(svc).get("labels") or {}).get(AUTOMANAGED) == "true"


def served_custom_versions(crds: list[Obj]) -> set[tuple[str, str]]:
    """The (group, version)s the CRDs serve, but for those of built-in types."""
    served = set()
    for crd in crds:
        spec = crd.get("spec") or {}
        group = spec.get("group")
        for version in spec.get("versions") or ():
            if isinstance(version, dict) and version.get("served") and group:
                served.add((str(group), str(version.get("name"))))
    return served - _BUILTIN_GROUP_VERSIONS


def available_condition(svc: Obj, service: Obj | None) -> Obj:
    """The ``Available`` condition an APIService has here (without its transition time): True
    for a local one; for one naming a Service (``service``: that Service, None when it does
    not exist), the first of upstream's checks that fails, the discovery check at the latest."""
    spec = svc.get("spec") or {}
    ref = spec.get("service")
    if not isinstance(ref, dict):
        return {"type": "Available", "status": "True", "reason": "Local",
                "message": "Local APIServices are always available"}
    namespace, name, port = ref.get("namespace") or "", ref.get("name") or "", ref.get("port", 443)
    if service is None:
        return {"type": "Available", "status": "False", "reason": "ServiceNotFound",
                "message": f'service/{name} in "{namespace}" is not present'}
    service_spec = service.get("spec") or {}
    if (service_spec.get("type") or "ClusterIP") == "ClusterIP" and not any(
            isinstance(p, dict) and p.get("port") == port for p in service_spec.get("ports") or ()):
        return {"type": "Available", "status": "False", "reason": "ServicePortError",
                "message": f'service/{name} in "{namespace}" is not listening on port {port}'}
    host = service_spec.get("clusterIP") or f"{name}.{namespace}.svc"
    path = f"/api/{spec.get('version')}" if not spec.get("group") else f"/apis/{spec['group']}/{spec.get('version')}"
    return {"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck",
            "message": f"failing or missing response from https://{host}:{port}{path}: this server does not proxy "
                       "to aggregated API servers"}


class APIServiceController:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.crds = client.informer(CRDS, on_add=self._crds_changed, on_update=lambda _o, _n: self._crds_changed(),
                                    on_delete=self._crds_changed)
        self.services = client.informer(APISERVICES, on_add=self._changed, on_update=lambda _o, new: self._changed(new),
                                        on_delete=self._deleted)
        self.backends = client.informer(SERVICES, on_add=self._backend_changed,
                                        on_update=lambda _old, new: self._backend_changed(new),
                                        on_delete=self._backend_changed)

    def _crds_changed(self, _crd: Obj | None = None) -> None:
        self.queue.add(CUSTOM_KEY)

    def _changed(self, svc: Obj) -> None:
        self.queue.add(meta_of(svc).get("name") or "")

    def _backend_changed(self, service: Obj) -> None:
        """The APIServices naming ``service`` checked again (a few APIServices name one)."""
        meta = meta_of(service)
        for name, svc in self.services.items.items():
            ref = (svc.get("spec") or {}).get("service")
            if isinstance(ref, dict) and ref.get("namespace") == meta.get("namespace") \
                    and ref.get("name") == meta.get("name"):
                self.queue.add(name)

    def _deleted(self, svc: Obj) -> None:
        if _automanaged(svc):
            self.queue.add(CUSTOM_KEY)  # a custom resource's, deleted by hand: put back

    async def run(self) -> None:
        await run_controller("apiservice controller", (self.crds, self.services, self.backends), self.queue,
                             self.sync, 1,
                             on_synced=lambda: self.queue.add(CUSTOM_KEY))

    async def sync(self, key: str) -> None:
        if key == CUSTOM_KEY:
            await self.sync_custom()
        else:
            await self.sync_available(key)

    async def sync_custom(self) -> None:
        """The local APIServices of the CRDs' served versions, no more, no fewer."""
        wanted = {f"{v}.{g}": local_apiservice(g, v, "true")
                  for g, v in served_custom_versions(list(self.crds.items.values()))}
        held = self.services.items
        for name, svc in wanted.items():
            current = held.get(name)
            if current is None:
                await self.client.create(APISERVICES, svc)
            elif _automanaged(current) and current.get("spec") != svc["spec"]:
                await self.client.patch(f"{APISERVICES}/{name}", {
                    "metadata": {"resourceVersion": meta_of(current).get("resourceVersion")}, "spec": svc["spec"]})
        for name, current in list(held.items()):
            if name not in wanted and _automanaged(current):
                await self.client.delete(f"{APISERVICES}/{name}")

    async def sync_available(self, name: str) -> None:
        svc = self.services.items.get(name)
        if svc is None:
            return
        ref = (svc.get("spec") or {}).get("service")
        service = self.backends.items.get(f"{ref.get('namespace')}/{ref.get('name')}") \
            if isinstance(ref, dict) else None
        condition = available_condition(svc, service)
        held_status = svc.get("status")
        status: Obj = held_status if isinstance(held_status, dict) else {}
        conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
        old = next((c for c in conditions if c.get("type") == "Available"), None)
        if old is not None and all(old.get(k) == v for k, v in condition.items()):
            return
        condition["lastTransitionTime"] = old["lastTransitionTime"] \
            if old is not None and old.get("status") == condition["status"] and old.get("lastTransitionTime") \
            else _now()
        kept = [c for c in conditions if c.get("type") != "Available"]
        await self.client.update(f"{APISERVICES}/{name}/status", {
            **svc, "status": {**status, "conditions": [*kept, condition]}})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await APIServiceController(client).run()
