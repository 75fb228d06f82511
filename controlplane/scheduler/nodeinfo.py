"""What the scheduler knows of a pod (``PodInfo``) and of a node (``NodeInfo``).

Both are parsed once from the API object: a pod's requests are summed when the
pod enters the scheduler, not per node or per cycle (and again when a resize moves
them: a resized pod's follow its kubelet's report too, ``resize_state``); a pod with
pod-level requests (PodLevelResources) requests those of the resources they name
(``podlevel``), whatever its containers ask; a node's ``requested``
totals change incrementally as pods are added to it or removed (``add_pod``,
``remove_pod``). Resources are plain ints in one unit each: cpu in millicores,
memory and ephemeral-storage in bytes, everything else (``pods``,
``nvidia.com/gpu``) as a count.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ..gcsettings import untrack_json, untracked
from ..podlevel import is_pod_level_resource, pod_level

__all__ = ["DEFAULT_MILLI_CPU_REQUEST", "DEFAULT_MEMORY_REQUEST", "NodeInfo", "PodInfo", "parse_quantity",
           "pod_requests", "reported_pod_level", "resize_state", "resource_amount"]

# What a pod that requests nothing counts as when spreading (upstream's non-zero defaults).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_SUFFIX: dict[str, int | Decimal] = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")
_cache: dict[str, Decimal] = {}


def parse_quantity(q: str | int | float) -> Decimal:
    """A Kubernetes quantity as a Decimal: ``"1500m"`` -> 1.5, ``"1Gi"`` -> 1073741824.

    >>> parse_quantity("250m"), parse_quantity("2Ki")
    (Decimal('0.250'), Decimal('2048'))
    """
    if isinstance(q, int | float):
        return Decimal(str(q))
    hit = _cache.get(q)
    if hit is not None:
        return hit
    m = _QUANTITY.match(q.strip())
    if m is None:
        raise ValueError(f"quantities must match the regular expression, not {q!r}")
    try:
        value = Decimal(m.group(1)) * _SUFFIX[m.group(2)]
    except InvalidOperation as e:
        raise ValueError(f"invalid quantity {q!r}") from e
    if len(_cache) < 4096:
        _cache[q] = value
    return value


def resource_amount(name: str, q: str | int | float) -> int:
    """A quantity in the scheduler's unit for ``name`` (millicores for cpu, rounded up)."""
    v = parse_quantity(q)
    if name == "cpu":
        v = v * 1000
    i = int(v)
    return i + 1 if v > i else i


def _add_into(total: dict[str, int], res: Any) -> None:
    if not isinstance(res, dict):
        return
    for k, v in res.items():
        try:
            amt = resource_amount(k, v)
        except (ValueError, TypeError):
            continue
        if amt:
            total[k] = total.get(k, 0) + amt


# a container's requests as its kubelet reports them (status ``resources``), by name,
# whether the pod's resize is Infeasible, and the pod-level requests its kubelet reports
# (``status.resources``, None without): what a resized pod's requests are made of
ResizeState = tuple[dict[Any, Any], bool, dict[str, Any] | None]


def resize_state(obj: dict[str, Any]) -> ResizeState | None:
    """What a pod's requests follow besides its spec while a resize is not done: None for a
    pod never resized (generation 1: status and spec agree, so the spec alone is read)."""
    generation = (obj.get("metadata") or {}).get("generation")
    status = obj.get("status")
    if not isinstance(generation, int) or generation <= 1 or not isinstance(status, dict):
        return None
    reported: dict[Any, Any] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            res = cs.get("resources") if isinstance(cs, dict) else None
            if isinstance(res, dict):
                reported[cs.get("name")] = res.get("requests") or {}
    if not reported:
        return None
    infeasible = any(c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
                     for c in status.get("conditions") or () if isinstance(c, dict))
    return reported, infeasible, reported_pod_level(status)


def reported_pod_level(status: dict[str, Any]) -> dict[str, Any] | None:
    """The pod-level requests a kubelet reports the pod runs with (``status.resources``,
    InPlacePodLevelResourcesVerticalScaling), None when it reports none."""
    resources = status.get("resources")
    requests = resources.get("requests") if isinstance(resources, dict) else None
    return requests if isinstance(requests, dict) else None


def _spec_requests(c: dict[str, Any]) -> Any:
    res = c.get("resources") or {}
    req = res.get("requests")
    lim = res.get("limits")
    if lim and isinstance(lim, dict):
        req = {**lim, **(req or {})}
    return req


def _container_requests(c: dict[str, Any], resize: ResizeState | None) -> dict[str, int]:
    """A container's requests (its limits stand in for missing ones); while a resize is
    pending or in progress the larger of the spec's and the reported, each resource, but
    the reported alone for an Infeasible one (upstream's determineContainerReqs)."""
    one: dict[str, int] = {}
    _add_into(one, _spec_requests(c))
    actual = resize[0].get(c.get("name")) if resize is not None else None
    if actual is not None:
        reported: dict[str, int] = {}
        _add_into(reported, actual)
        if resize is not None and resize[1]:
            return {**{k: v for k, v in one.items() if k not in ("cpu", "memory")}, **reported}
        for k, v in reported.items():
            if v > one.get(k, 0):
                one[k] = v
    return one


def pod_requests(spec: dict[str, Any], resize: ResizeState | None = None) -> dict[str, int]:
    """The pod's effective requests, as upstream's ``resource.PodRequests``: the sum
    over containers (a container's limits stand in for missing requests), at least
    each init container's, plus sidecars (restartable init containers); the pod-level
    request instead of that sum for each resource the pod-level requests name; plus the
    overhead. With ``resize`` (``resize_state``) a resized container's as
    ``_container_requests``, and the pod level's as ``_pod_level_requests``.

    >>> pod_requests({"resources": {"requests": {"cpu": "2"}},
    ...               "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]})
    {'cpu': 2000, 'memory': 1073741824}
    """
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        if resize is None:  # (every pod but a resized one: summed in place)
            _add_into(total, _spec_requests(c))
            continue
        for k, v in _container_requests(c, resize).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        one = _container_requests(c, resize)
        if c.get("restartPolicy") == "Always":
            for k, v in one.items():
                sidecars[k] = sidecars.get(k, 0) + v
            one = dict(sidecars)  # while it starts, the sidecars so far run
        else:
            for k in sidecars:  # an init container runs beside the sidecars started before it
                one[k] = one.get(k, 0) + sidecars[k]
        for k, v in one.items():
            if v > init_peak.get(k, 0):
                init_peak[k] = v
    for k, v in sidecars.items():
        total[k] = total.get(k, 0) + v
    for k, v in init_peak.items():
        if v > total.get(k, 0):
            total[k] = v
    if "resources" in spec:  # (pod-level resources: most pods have none)
        total.update(_pod_level_requests(spec, resize))
        for k in [k for k, v in total.items() if not v]:
            del total[k]  # a pod-level request of 0 requests none of it
    _add_into(total, spec.get("overhead"))
    return total


def _pod_level_requests(spec: dict[str, Any], resize: ResizeState | None) -> dict[str, int]:
    """The pod-level requests, in the scheduler's units (none without pod-level requests);
    while a resize of them is not done, the larger of the spec's and the reported, each
    resource, but the reported alone for an Infeasible one (upstream's
    effectivePodLevelResources)."""
    amounts = _amounts(pod_level(spec, "requests"))
    reported = resize[2] if resize is not None and amounts else None
    if reported is None or resize is None:
        return amounts
    actual = _amounts({k: v for k, v in reported.items() if isinstance(k, str) and is_pod_level_resource(k)})
    if resize[1]:
        return actual
    for k, v in actual.items():
        if v > amounts.get(k, 0):
            amounts[k] = v
    return amounts


def _amounts(res: dict[str, Any]) -> dict[str, int]:
    """Each quantity of ``res`` in the scheduler's unit, zeros kept (one that does not parse,
    which the validation refuses, left out)."""
    out: dict[str, int] = {}
    for k, v in res.items():
        try:
            out[k] = resource_amount(k, v)
        except (ValueError, TypeError):
            continue
    return out


class PodInfo:
    """A pod as the scheduler sees it, parsed once. ``obj`` is the API object (not mutated),
    until the pod is bound: then only what names it (``keep_only_identity``)."""

    __slots__ = (
        "affinity", "attempts", "gated", "group", "initial_attempt", "key", "labels", "name", "namespace",
        "node_name", "node_selector", "nominated_node", "nonzero_cpu", "nonzero_mem", "obj", "priority",
        "req_cpu", "req_items", "req_mem", "req_other", "requests", "resource_version", "spread", "terminating",
        "timestamp", "tolerations", "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        self.obj = obj
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or ""
        self.resource_version: str = meta.get("resourceVersion") or ""
        self.labels: dict[str, str] = meta.get("labels") or {}
        # deleted, waiting out its grace period: not counted by PodTopologySpread (as upstream)
        self.terminating = bool(meta.get("deletionTimestamp"))
        self.priority: int = int(spec.get("priority") or 0)
        self.node_name: str = spec.get("nodeName") or ""
        self.node_selector: dict[str, str] = spec.get("nodeSelector") or {}
        self.affinity: dict[str, Any] = spec.get("affinity") or {}
        # () when absent, not []: an empty list is one more object per pod the cyclic GC walks
        self.tolerations: Sequence[dict[str, Any]] = spec.get("tolerations") or ()
        self.spread: Sequence[dict[str, Any]] = spec.get("topologySpreadConstraints") or ()
        self.gated = bool(spec.get("schedulingGates"))
        group = spec.get("schedulingGroup") or {}
        self.group: str = group.get("podGroupName") or "" if isinstance(group, dict) else ""
        self.nominated_node: str = (obj.get("status") or {}).get("nominatedNodeName") or ""
        self.requests = pod_requests(spec, resize_state(obj))
        self.requests["pods"] = 1
        self.req_items = tuple(self.requests.items())  # what Filter walks, once per node
        # the same, split for the unrolled check of ``Profile.place``
        self.req_cpu = self.requests.get("cpu", 0)
        self.req_mem = self.requests.get("memory", 0)
        self.req_other = tuple((k, v) for k, v in self.req_items if k not in ("cpu", "memory", "pods"))
        self.nonzero_cpu = self.requests.get("cpu") or DEFAULT_MILLI_CPU_REQUEST
        self.nonzero_mem = self.requests.get("memory") or DEFAULT_MEMORY_REQUEST
        # queue bookkeeping
        self.timestamp = time.monotonic()  # when it (re)entered activeQ: the "age" tie-break
        self.initial_attempt = self.timestamp  # first seen: the e2e latency's start (kept across updates)
        self.attempts = 0
        # out of the cyclic GC's sight (gcsettings.untracked): nothing it holds leads back to it,
        # and a bound pod's is held for the pod's life, a million of them at a million pods
        untracked(self)

    def keep_only_identity(self) -> None:
        """Drop the API object but what names the pod (kind, name, namespace, uid,
        resourceVersion: what an Event about it needs, as preemption's for its victims) and its
        generation (what preemption's ``DisruptionTarget`` says it observed; a dict of five
        keys is no larger than one of four).

        For a bound pod the cache holds for its life: the informer holds the whole pod,
        and this one, parsed when it was bound, was a second copy of every running pod.
        What the plugins read of a bound pod (labels, requests, namespace, priority) is
        in the fields above, which keep their parts of the object."""
        meta = self.obj.get("metadata") or {}
        identity = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "generation")
                                 if k in meta}}
        untrack_json(identity)
        self.obj = identity

    @property
    def group_key(self) -> str:
        return f"{self.namespace}/{self.group}" if self.group else ""

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


def _parse_taints(spec: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    # a tuple: what the cyclic GC stops tracking (a list, even empty, it walks at every full collection)
    return tuple([t for t in spec.get("taints") or () if isinstance(t, dict)])


class NodeInfo:
    """A node and the pods on it (bound or assumed), with the totals they request.

    ``requested``: the sum of the pods' requests (what NodeResourcesFit compares
    to ``allocatable``); ``nonzero_cpu``/``nonzero_mem``: the same with the
    non-zero defaults, for scoring. ``generation`` grows on every change.
    """

    __slots__ = (
        "alloc_cpu", "alloc_mem", "allocatable", "free_cpu", "free_mem", "free_pods", "generation", "labels", "name",
        "node", "nonzero_cpu", "nonzero_mem", "pods", "requested", "taints", "unschedulable", "watcher",
        "with_affinity",
    )

    def __init__(self, name: str, node: dict[str, Any] | None = None) -> None:
        self.name = name
        self.pods: dict[str, PodInfo] = {}
        self.requested: dict[str, int] = {}
        self.nonzero_cpu = 0
        self.nonzero_mem = 0
        self.generation = 0
        self.with_affinity = 0  # pods here with (anti-)affinity terms: InterPodAffinity's shortcut
        self.node: dict[str, Any] = {}
        self.labels: dict[str, str] = {}
        self.taints: tuple[dict[str, Any], ...] = ()
        self.unschedulable = False
        self.allocatable: dict[str, int] = {}
        # allocatable and allocatable - requested of cpu, memory and pods as plain attributes:
        # what the unrolled check of ``Profile.place`` reads (kept by _refresh_free)
        self.alloc_cpu = self.alloc_mem = 0
        self.free_cpu = self.free_mem = self.free_pods = 0
        # the set this node adds itself to on every change: its cache's NodeColumns.dirty
        # (None for nodes outside a cache, such as clones and the autoscaler's templates)
        self.watcher: set[NodeInfo] | None = None
        if node is not None:
            self.set_node(node)

    def _refresh_free(self) -> None:
        alloc, req = self.allocatable, self.requested
        self.alloc_cpu = alloc.get("cpu", 0)
        self.alloc_mem = alloc.get("memory", 0)
        self.free_cpu = self.alloc_cpu - req.get("cpu", 0)
        self.free_mem = self.alloc_mem - req.get("memory", 0)
        self.free_pods = alloc.get("pods", 0) - req.get("pods", 0)

    def set_node(self, node: dict[str, Any]) -> None:
        self.node = node
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        self.labels = meta.get("labels") or {}
        self.taints = _parse_taints(spec)
        self.unschedulable = bool(spec.get("unschedulable"))
        alloc: dict[str, int] = {}
        status = node.get("status") or {}
        _add_into(alloc, status.get("allocatable") or status.get("capacity") or {})
        self.allocatable = alloc
        self._refresh_free()
        self.generation += 1
        if self.watcher is not None:
            self.watcher.add(self)

    def add_pod(self, pod: PodInfo) -> None:
        old = self.pods.get(pod.key)
        if old is not None:
            self.remove_pod(old)
        self.pods[pod.key] = pod
        req = self.requested
        for k, v in pod.requests.items():
            req[k] = req.get(k, 0) + v
        self.nonzero_cpu += pod.nonzero_cpu
        self.nonzero_mem += pod.nonzero_mem
        self.free_cpu -= pod.req_cpu
        self.free_mem -= pod.req_mem
        self.free_pods -= 1
        if pod.affinity.get("podAffinity") or pod.affinity.get("podAntiAffinity"):
            self.with_affinity += 1
        self.generation += 1
        if self.watcher is not None:
            self.watcher.add(self)

    def remove_pod(self, pod: PodInfo) -> bool:
        held = self.pods.pop(pod.key, None)
        if held is None:
            return False
        req = self.requested
        for k, v in held.requests.items():
            req[k] = req.get(k, 0) - v
        self.nonzero_cpu -= held.nonzero_cpu
        self.nonzero_mem -= held.nonzero_mem
        self.free_cpu += held.req_cpu
        self.free_mem += held.req_mem
        self.free_pods += 1
        if held.affinity.get("podAffinity") or held.affinity.get("podAntiAffinity"):
            self.with_affinity -= 1
        self.generation += 1
        if self.watcher is not None:
            self.watcher.add(self)
        return True

    def clone(self) -> NodeInfo:
        """A copy whose pods and totals can change without touching this one (preemption's what-if)."""
        c = NodeInfo(self.name)
        c.node, c.labels, c.taints = self.node, self.labels, self.taints
        c.unschedulable, c.allocatable = self.unschedulable, self.allocatable
        c.pods = dict(self.pods)
        c.requested = dict(self.requested)
        c.nonzero_cpu, c.nonzero_mem = self.nonzero_cpu, self.nonzero_mem
        c.with_affinity = self.with_affinity
        c._refresh_free()
        return c

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
