"""The EndpointSlice and Endpoints controllers of kube-controller-manager: each Service with
a selector gets the addresses of the pods it selects.

For a Service (not ``ExternalName``, with a ``selector``), the pods of its namespace
that match, have an IP and have not ended are its endpoints: ready when the pod's
``Ready`` condition is true (always, with ``publishNotReadyAddresses``), terminating
once it is being deleted. Each service port's ``targetPort`` is resolved per pod (a
name looks up the pod's container ports; a pod without it is not an endpoint of that
port set), and pods are grouped by the port numbers they resolve to, as upstream.

- EndpointSlices (discovery.k8s.io/v1), ``<service>-<random>``, at most 100
  endpoints each, labelled ``kubernetes.io/service-name`` and
  ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``,
  owned by the Service: addresses, ``conditions`` (ready, serving,
  terminating), ``nodeName`` and its node's ``zone``, ``hostname`` (a pod whose
  ``subdomain`` is the Service), ``targetRef``; ``service.kubernetes.io/headless`` on a
  headless Service's slices and Endpoints; the slices a sync does not need are
  deleted, those it needs are updated only if they differ.
- Endpoints (v1), named after the Service: ``subsets`` of ``addresses`` and
  ``notReadyAddresses`` (terminating pods left out, sorted by IP) with their ports,
  labelled ``endpoints.kubernetes.io/managed-by: endpoint-controller`` (as upstream's
  since 1.33: the API server then looks for no warnings in its addresses).

A pod change (IP, readiness, labels, deletion) requeues the Services of its
namespace whose selector matches it before or after; pods are indexed only for
namespaces that have such Services. A deleted Service's slices and Endpoints are
deleted with it.

A sync compares against the slices the informer holds, so one that ran before the
informer showed this controller's last slice writes would create a second slice of the
same endpoints (or touch one it deleted): as upstream's ``EndpointSliceTracker``, the
versions written are remembered per Service and a sync waits until the informer holds
them (their events bring the Service back; after ``EXPECTATIONS_TIMEOUT`` a write the
informer never showed, lost to a relist, is forgotten).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, held_in, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.identities import service_account_user
from controlplane.registry.corevalidation import ENDPOINTS_CONTROLLER, ENDPOINTS_MANAGED_BY
from controlplane.selectormatch import match_label_selector

from .ownership import EXPECTATIONS_TIMEOUT, key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["MANAGED_BY", "MAX_ENDPOINTS_PER_SLICE", "SERVICE_NAME", "EndpointsController", "start"]

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS_PER_SLICE = 100
SLICES = resource_path("discovery.k8s.io", "v1", "endpointslices")
HEADLESS = "service.kubernetes.io/headless"
ZONE = "topology.kubernetes.io/zone"

Obj = dict[str, Any]


def _version(obj: Mapping[str, Any]) -> int:
    try:
        return int(meta_of(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _relevant(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod its services' endpoints depend on."""
    meta, status = meta_of(pod), pod.get("status") or {}
    return (meta.get("labels"), status.get("podIP"), _ready(pod), bool(meta.get("deletionTimestamp")),
            status.get("phase"), (pod.get("spec") or {}).get("nodeName"))


def _selects(service: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    selector = (service.get("spec") or {}).get("selector")
    return bool(selector) and match_label_selector({"matchLabels": selector}, meta_of(pod).get("labels") or {})


# a Service port as a pod resolves it: (name, number, protocol, appProtocol or "")
Port = tuple[str, int, str, str]


def _slice_port(port: Port) -> Obj:
    """An EndpointSlice's port: its name always (a pointer upstream, "" for an unnamed port)."""
    name, number, protocol, app_protocol = port
    return {"name": name, "port": number, "protocol": protocol,
            **({"appProtocol": app_protocol} if app_protocol else {})}


def _endpoints_port(port: Port) -> Obj:
    """An Endpoints subset's port: an empty name is left out, as Go's ``omitempty`` writes it."""
    name, number, protocol, app_protocol = port
    return {**({"name": name} if name else {}), "port": number, "protocol": protocol,
            **({"appProtocol": app_protocol} if app_protocol else {})}


def _port_number(port: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in (pod.get("spec") or {}).get("containers") or ():
        for p in c.get("ports") or ():
            if p.get("name") == target and p.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return int(p.get("containerPort", 0))
    return None


def _hostname(pod: Mapping[str, Any], svc: Mapping[str, Any]) -> str | None:
    """A pod's hostname when its subdomain is the Service (upstream: the DNS name of a
    StatefulSet's pod behind its headless Service)."""
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain") == meta_of(svc).get("name"):
        return str(spec["hostname"])
    return None


class EndpointsController:
    # the EndpointSlice controller and the Endpoints controller, each turned off on its own by
    # ``serve --controllers`` (``start``)
    writes_slices = writes_endpoints = True

    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.endpoints_client = client.as_identity(service_account_user("endpoint-controller"))
        self.workers = workers
        self.queue = WorkQueue()
        self.services = client.informer(resource_path("", "v1", "services"), on_add=self._service_changed,
                                        on_update=lambda _old, new: self._service_changed(new),
                                        on_delete=self._service_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)
        self.slices = client.informer(SLICES, on_add=self._slice_seen,
                                      on_update=lambda _old, new: self._slice_seen(new),
                                      on_delete=self._slice_deleted)
        self.nodes = client.informer("/api/v1/nodes")  # (the endpoints' zones)
        # the Endpoints as they are (upstream's endpointsLister): a sync compares against them, and
        # one deleted by someone else is written again
        self.endpoints = client.informer(resource_path("", "v1", "endpoints"), on_delete=self._endpoints_deleted)
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> keys of its services with selectors
        self._pods_in: dict[str, dict[str, Obj]] = {}  # namespace with such services -> its pods
        # service key -> the keys of the pods its selector selects, kept with each pod event: a
        # sync walks its own pods, not its namespace's (a node outage marking 6,000 pods not
        # ready walked 6,000 pods a sync: most of the outage's CPU)
        self._selected: dict[str, set[str]] = {}
        # service key -> (when, {slice name: the resourceVersion this controller wrote, None for a
        # delete}): its writes the slice informer may not show yet (upstream's EndpointSliceTracker)
        self._written: dict[str, tuple[float, dict[str, int | None]]] = {}
        self._stale: set[str] = set()  # services whose sync waits for the informer to show those

    # -- events
    def _service_changed(self, svc: Obj) -> None:
        namespace = meta_of(svc).get("namespace", "")
        if (svc.get("spec") or {}).get("selector"):
            self._by_namespace.setdefault(namespace, set()).add(key_of(svc))
            if namespace not in self._pods_in:
                self._pods_in[namespace] = {key_of(p): p for p in held_in(self.pods.items, namespace)}
            self._selected[key_of(svc)] = {k for k, p in self._pods_in[namespace].items() if _selects(svc, p)}
        else:
            self._selected.pop(key_of(svc), None)
        self.queue.add(key_of(svc))

    def _service_deleted(self, svc: Obj) -> None:
        namespace = meta_of(svc).get("namespace", "")
        keys = self._by_namespace.get(namespace)
        self._selected.pop(key_of(svc), None)
        if keys is not None:
            keys.discard(key_of(svc))
            if not keys:
                del self._by_namespace[namespace]
                self._pods_in.pop(namespace, None)
        self.queue.add("deleted:" + key_of(svc))
        self._written.pop(key_of(svc), None)
        self._stale.discard(key_of(svc))

    def _slice_seen(self, es: Obj) -> None:
        service = (meta_of(es).get("labels") or {}).get(SERVICE_NAME)
        if service:
            key = f"{meta_of(es).get('namespace', '')}/{service}"
            if key in self._stale:
                self.queue.add(key)

    def _slice_deleted(self, es: Obj) -> None:
        service = (meta_of(es).get("labels") or {}).get(SERVICE_NAME)
        if service and (meta_of(es).get("labels") or {}).get(MANAGED_BY) == CONTROLLER:
            key = f"{meta_of(es).get('namespace', '')}/{service}"
            entry = self._written.get(key)
            if entry is not None:  # a write of it is seen, and gone since (deleted by someone else)
                entry[1].pop(str(meta_of(es).get("name", "")), None)
            self.queue.add(key)

    def _endpoints_deleted(self, endpoints: Obj) -> None:
        key = key_of(endpoints)
        if key in self.services.items:
            self.queue.add(key)

    def _pod_added(self, pod: Obj) -> None:
        pods = self._pods_in.get(meta_of(pod).get("namespace", ""))
        if pods is not None:
            pods[key_of(pod)] = pod
            self._requeue(pod, pod)

    def _pod_deleted(self, pod: Obj) -> None:
        pods = self._pods_in.get(meta_of(pod).get("namespace", ""))
        if pods is not None and pods.pop(key_of(pod), None) is not None:
            self._requeue(pod, pod, gone=True)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        pods = self._pods_in.get(meta_of(new).get("namespace", ""))
        if pods is not None:
            pods[key_of(new)] = new
            if _relevant(old) != _relevant(new):
                self._requeue(old, new)

    def _requeue(self, old: Obj, new: Obj, gone: bool = False) -> None:
        """Queue the services that select the pod, before or after, and keep their sets of
        selected pods."""
        keys = self._by_namespace.get(meta_of(new).get("namespace", ""))
        if not keys:
            return
        pod_key = key_of(new)
        for key in list(keys):
            svc = self.services.items.get(key)
            if svc is None:
                keys.discard(key)
                continue
            selects = _selects(svc, new)
            selected = self._selected.setdefault(key, set())
            if selects and not gone:
                selected.add(pod_key)
            else:
                selected.discard(pod_key)
            if selects or (old is not new and _selects(svc, old)):
                self.queue.add(key)

    # -- running
    async def run(self) -> None:
        await run_controller("endpointslice controller",
                             (self.services, self.pods, self.slices, self.nodes, self.endpoints),
                             self.queue, self.sync, self.workers)

    def _endpoints(self, svc: Obj) -> dict[tuple[Port, ...], list[Obj]]:
        """The service's pods, grouped by the ports they resolve to."""
        meta, spec = meta_of(svc), svc.get("spec") or {}
        namespace = meta.get("namespace", "")
        groups: dict[tuple[Port, ...], list[Obj]] = {}
        pods_in = self._pods_in.get(namespace, {})
        for pod_key in self._selected.get(key_of(svc), ()):
            pod = pods_in.get(pod_key)
            if pod is None:
                continue
            status = pod.get("status") or {}
            if not status.get("podIP") or not _selects(svc, pod) or status.get("phase") in ("Succeeded", "Failed"):
                continue
            ports = []
            for p in spec.get("ports") or ():
                number = _port_number(p, pod)
                if number is not None:
                    ports.append((str(p.get("name") or ""), number, str(p.get("protocol") or "TCP"),
                                  str(p.get("appProtocol") or "")))
            groups.setdefault(tuple(ports), []).append(pod)
        for pods in groups.values():
            pods.sort(key=lambda p: meta_of(p).get("name", ""))
        return groups

    async def sync(self, key: str) -> None:
        if key.startswith("deleted:"):
            await self._forget(key[len("deleted:"):])
            return
        svc = self.services.items.get(key)
        if svc is None:
            return
        spec = svc.get("spec") or {}
        if spec.get("type") == "ExternalName" or not spec.get("selector"):
            return  # a Service without a selector: its endpoints are written by someone else
        groups = self._endpoints(svc)
        publish = bool(spec.get("publishNotReadyAddresses"))
        if self.writes_slices:
            if self._unseen_writes(key):
                return  # the slices' events bring it back
            await self._write_slices(svc, groups, publish)
        if self.writes_endpoints:
            await self._write_endpoints(svc, groups, publish)

    def _unseen_writes(self, key: str) -> bool:
        """Whether the slice informer does not show this controller's last writes for the
        Service ``key`` yet; if so the Service is marked to be queued by the slices' events."""
        self._stale.discard(key)
        entry = self._written.get(key)
        if entry is None:
            return False
        when, written = entry
        held = self.slices.items
        for name, version in list(written.items()):
            es = held.get(f"{key.partition('/')[0]}/{name}")
            if (es is None) if version is None else (es is not None and _version(es) >= version):
                del written[name]
        waited = time.monotonic() - when
        if not written or waited > EXPECTATIONS_TIMEOUT:
            del self._written[key]
            return False
        self._stale.add(key)
        self.queue.add_after(key, EXPECTATIONS_TIMEOUT - waited + 0.1)  # should no event come
        return True

    def _wrote(self, key: str, name: str, version: int | None) -> None:
        entry = self._written.get(key)
        if entry is None:
            self._written[key] = (time.monotonic(), {name: version})
        else:
            entry[1][name] = version

    async def _write_slices(self, svc: Obj, groups: Mapping[tuple[Port, ...], list[Obj]],
                            publish: bool) -> None:
        meta, spec = meta_of(svc), svc.get("spec") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        owner = {"apiVersion": "v1", "kind": "Service", "name": name, "uid": meta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}
        wanted: list[Obj] = []
        for ports, pods in sorted(groups.items()):
            for start in range(0, len(pods), MAX_ENDPOINTS_PER_SLICE):
                chunk = pods[start:start + MAX_ENDPOINTS_PER_SLICE]
                wanted.append({
                    "addressType": "IPv4",
                    "ports": [_slice_port(port) for port in ports],
                    "endpoints": [self._endpoint(p, svc, publish) for p in chunk]})
        if not wanted:
            # upstream keeps an empty one, its lists nil (null, as the server reads them back)
            wanted.append({"addressType": "IPv4", "ports": None, "endpoints": None})
        mine = sorted((es for es in self.slices.items.values()
                       if meta_of(es).get("namespace") == namespace
                       and (meta_of(es).get("labels") or {}).get(SERVICE_NAME) == name
                       and (meta_of(es).get("labels") or {}).get(MANAGED_BY) == CONTROLLER),
                      key=lambda es: meta_of(es).get("name", ""))
        path = resource_path("discovery.k8s.io", "v1", "endpointslices", namespace)
        labels = {**(meta.get("labels") or {}), SERVICE_NAME: name, MANAGED_BY: CONTROLLER}
        if spec.get("clusterIP") in (None, "", "None"):
            labels[HEADLESS] = ""  # as upstream's slices and Endpoints of a headless Service
        else:
            labels.pop(HEADLESS, None)
        for i, body in enumerate(wanted):
            if i < len(mine):
                have = mine[i]
                if all(have.get(k) == v for k, v in body.items()) and (meta_of(have).get("labels") or {}) == labels:
                    continue
                written = await self.client.update(f"{path}/{meta_of(have)['name']}", {
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {**meta_of(have), "labels": labels}, **body})
            else:
                written = await self.client.create(path, {
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"generateName": f"{name}-", "labels": labels, "ownerReferences": [owner]}, **body})
            self._wrote(key_of(svc), str(meta_of(written).get("name", "")), _version(written))
        for extra in mine[len(wanted):]:
            try:
                await self.client.delete(f"{path}/{meta_of(extra)['name']}")
            except ApiError as e:
                if e.code != 404:
                    raise
            self._wrote(key_of(svc), str(meta_of(extra).get("name", "")), None)

    async def _forget(self, key: str) -> None:
        """A deleted Service: its slices (owned by it) and its Endpoints go too."""
        namespace, _, name = key.partition("/")
        if key in self.services.items:
            return  # created again meanwhile
        targets = [resource_path("discovery.k8s.io", "v1", "endpointslices", namespace, meta_of(es)["name"])
                   for es in list(self.slices.items.values())
                   if meta_of(es).get("namespace") == namespace
                   and (meta_of(es).get("labels") or {}).get(SERVICE_NAME) == name
                   and (meta_of(es).get("labels") or {}).get(MANAGED_BY) == CONTROLLER] \
            if self.writes_slices else []
        if self.writes_endpoints:
            targets.append(resource_path("", "v1", "endpoints", namespace, name))
        for path in targets:
            try:  # the Endpoints as the endpoints controller: the EndpointSlice one's role may not
                writer = self.endpoints_client if path.startswith("/api/v1/") else self.client
                await writer.delete(path)
            except ApiError as e:
                if e.code != 404:
                    raise

    def _endpoint(self, pod: Obj, svc: Obj, publish: bool) -> Obj:
        pmeta, status = meta_of(pod), pod.get("status") or {}
        terminating = bool(pmeta.get("deletionTimestamp"))
        ready = _ready(pod)
        endpoint: Obj = {"addresses": [status["podIP"]],
                         "conditions": {"ready": publish or (ready and not terminating), "serving": ready,
                                        "terminating": terminating}}
        hostname = _hostname(pod, svc)
        if hostname:
            endpoint["hostname"] = hostname
        endpoint["targetRef"] = {"kind": "Pod", "namespace": pmeta.get("namespace"), "name": pmeta.get("name"),
                                 "uid": pmeta.get("uid")}
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            endpoint["nodeName"] = node
            zone = (meta_of(self.nodes.items.get(node) or {}).get("labels") or {}).get(ZONE)
            if zone:
                endpoint["zone"] = zone
        return endpoint

    async def _write_endpoints(self, svc: Obj, groups: Mapping[tuple[Port, ...], list[Obj]],
                               publish: bool) -> None:
        meta = meta_of(svc)
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        subsets = []
        for ports, pods in sorted(groups.items()):
            ready: list[Obj] = []
            not_ready: list[Obj] = []
            for pod in pods:
                pmeta = meta_of(pod)
                if pmeta.get("deletionTimestamp") and not publish:
                    continue
                address = {"ip": (pod.get("status") or {})["podIP"]}
                hostname = _hostname(pod, svc)
                if hostname:
                    address["hostname"] = hostname
                address["targetRef"] = {"kind": "Pod", "namespace": namespace, "name": pmeta.get("name"),
                                        "uid": pmeta.get("uid")}
                if (pod.get("spec") or {}).get("nodeName"):
                    address["nodeName"] = pod["spec"]["nodeName"]
                (ready if publish or _ready(pod) else not_ready).append(address)
            if not ready and not not_ready:
                continue
            for addresses in (ready, not_ready):  # sorted by IP, as upstream's RepackSubsets
                addresses.sort(key=lambda a: (a["ip"], a["targetRef"]["uid"] or ""))
            subset: Obj = {"ports": [_endpoints_port(port) for port in ports]}
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            subsets.append(subset)
        path = resource_path("", "v1", "endpoints", namespace, name)
        labels = dict(meta.get("labels") or {})
        labels[ENDPOINTS_MANAGED_BY] = ENDPOINTS_CONTROLLER
        if (svc.get("spec") or {}).get("clusterIP") in (None, "", "None"):
            labels[HEADLESS] = ""
        else:
            labels.pop(HEADLESS, None)
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": name, "namespace": namespace, "labels": labels}}
        if subsets:
            body["subsets"] = subsets  # (omitempty: none is no field)
        # from the informer, not a read: a stale copy's version is a conflict, handled again later
        have = self.endpoints.items.get(f"{namespace}/{name}")
        if have is not None:
            if (have.get("subsets") or []) == subsets and (meta_of(have).get("labels") or {}) == labels:
                return
            body["metadata"]["resourceVersion"] = meta_of(have).get("resourceVersion")
        # (as the endpoints controller's service account: this component plays both)
        await self.endpoints_client.update(path, body)  # creates it if missing (Endpoints allow create on update)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``): the parts ``--controllers``
    turns on."""
    controller = EndpointsController(client)
    controller.writes_slices = config.controller_enabled("endpointslice-controller")
    controller.writes_endpoints = config.controller_enabled("endpoints-controller")
    await controller.run()
