"""What a 1.37 kubelet reports of the resources a pod was allocated, in its status.

Upstream's kubelet (``convertStatusToAPIStatus``, ``pkg/kubelet/kubelet_pods.go``) writes,
for every pod, whether or not it has pod-level resources:

- each started container's ``allocatedResources``: its requests (InPlacePodVerticalScaling,
  GA; the gate that held it back, InPlacePodVerticalScalingAllocatedStatus, is gone since
  1.36), beside its ``resources`` (written by ``native.py``);
- the pod's ``allocatedResources``: its requests as ``PodRequests`` has them (the containers'
  aggregate, sidecars and init containers counted as the scheduler counts them, the pod-level
  requests in its place where they name a resource, plus the overhead), and the pod's
  ``resources`` (``convertToAPIPodLevelResourcesStatus``), both under
  InPlacePodLevelResourcesVerticalScaling (beta and on since 1.36).

The pod's ``resources`` of a running pod are its pod-level resources as written, with cpu and
memory as the pod's cgroup has them (simulated: as allocated): the cpu request the pod's
requests (above the 2m of the minimum cpu shares), the memory request the pod level's plus
the overhead or else the pod's requests', and a cpu or memory limit where the cgroup has one
(the pod level limits it, or every container and init container does), the pod's limits'
(``PodLimits``); a pod without requests reports ``resources: {}``, as the kubelet's non-nil
empty requirements. (A pod not running reports its ``PodRequests`` and ``PodLimits`` whole:
the simulated kubelet writes no status before a pod runs, and its last, at the pod's end,
is still written of a running pod.)

Quantities are written as ``Quantity.String`` writes a sum: a lone value as it is (the API
server stored it canonical), a sum in its first value's format.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..podlevel import pod_level
from ..quantity import QuantityError, parse_quantity
from ..registry.podresources import Sums, aggregate, parse_sums, quantity_text

__all__ = ["pod_allocation"]

Obj = dict[str, Any]
_MIN_SHARES_CPU = Fraction(2, 1000)  # cm.MinShares: 2 shares, read back as 2m
_COMPUTE = ("cpu", "memory")


_MEMO: dict[Any, Obj] = {}
_MEMO_MAX = 4096


def pod_allocation(spec: Obj) -> Obj:
    """The running pod's ``resources`` and (when it requests anything) ``allocatedResources``,
    as its kubelet reports them (the module's docstring). Not to be changed: a pod's whose
    resources are those of one before it (a workload's pods) is the same dict."""
    if not spec.get("initContainers") and not spec.get("overhead") and "resources" not in spec:
        containers: list[Any] = spec.get("containers") or []
        if len(containers) == 1 and isinstance(containers[0], dict):  # (nearly every pod: no sums)
            return _one_container(containers[0])
    try:
        key = _key(spec)
    except TypeError:  # something unhashable where a quantity belongs (validation refuses it)
        return _allocation(spec)
    got = _MEMO.get(key)
    if got is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        got = _MEMO[key] = _allocation(spec)
    return got


def _key(spec: Obj) -> Any:
    """What of ``spec`` its allocation is made of, hashable (a TypeError where it cannot be)."""
    parts: list[Any] = []
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            resources = c.get("resources") if isinstance(c, dict) else None
            if isinstance(resources, dict):
                parts.append((key, c.get("restartPolicy"), _items(resources.get("requests")),
                              _items(resources.get("limits"))))
            else:
                parts.append((key, c.get("restartPolicy") if isinstance(c, dict) else None))
    level = spec.get("resources")
    level_key = tuple((k, _items(v)) for k, v in level.items()) if isinstance(level, dict) else level
    hash(level_key)
    return tuple(parts), _items(spec.get("overhead")), level_key


def _items(named: Any) -> Any:
    return tuple(named.items()) if isinstance(named, dict) else named


def _allocation(spec: Obj) -> Obj:
    overhead = parse_sums(spec.get("overhead"))
    requests = _with_pod_level(aggregate(spec, "requests"), pod_level(spec, "requests"))
    _add(requests, overhead)
    limits = _with_pod_level(aggregate(spec, "limits"), pod_level(spec, "limits"))
    for name, (value, _) in overhead.items():  # the overhead of what is limited (PodLimits)
        held = limits.get(name)
        if held is not None and held[0]:
            limits[name] = (held[0] + value, held[1])
    out: Obj = {"resources": _running(spec, requests, limits, overhead)}
    if requests:
        out["allocatedResources"] = _texts(requests)
    return out


def _one_container(c: Obj) -> Obj:
    """A pod of one container, no init container, overhead or pod-level resources: its
    container's requests and limits are the pod's."""
    resources = c.get("resources")
    requests = resources.get("requests") if isinstance(resources, dict) else None
    limits = resources.get("limits") if isinstance(resources, dict) else None
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    reported_requests = {}
    cpu, memory = requests.get("cpu"), requests.get("memory")
    if cpu is not None and _above_min_shares(cpu):
        reported_requests["cpu"] = cpu
    if memory is not None:
        reported_requests["memory"] = memory
    reported_limits = {k: v for k, v in limits.items() if k in _COMPUTE and _nonzero(v)} if limits else {}
    reported = _requirements(reported_requests, reported_limits)
    out: Obj = {"resources": reported}
    if requests:
        out["allocatedResources"] = dict(requests)
    return out


def _running(spec: Obj, requests: Sums, limits: Sums, overhead: Sums) -> Obj:
    level = _mapping(spec.get("resources"))
    reported = {k: v for k, v in level.items() if k not in ("requests", "limits")}
    level_requests, level_limits = _mapping(level.get("requests")), _mapping(level.get("limits"))
    out_requests, out_limits = dict(level_requests), dict(level_limits)
    cpu = requests.get("cpu")
    if cpu is not None and cpu[0] > _MIN_SHARES_CPU:
        out_requests["cpu"] = quantity_text(*cpu)
    if "memory" in level_requests:  # cgroups hold no memory request: the pod level's, and the overhead
        asked = parse_sums({"memory": level_requests["memory"]}).get("memory")
        extra = overhead.get("memory")
        if asked is not None and extra is not None:
            out_requests["memory"] = quantity_text(asked[0] + extra[0], asked[1])
    elif "memory" in requests:
        out_requests["memory"] = quantity_text(*requests["memory"])
    level_limited = bool(pod_level(spec, "limits"))
    every = [c for key in ("containers", "initContainers") for c in spec.get(key) or ()]
    for name in _COMPUTE:
        held = limits.get(name)
        if level_limited:
            declared = held is not None and bool(held[0])
        else:
            declared = all(name in (own := parse_sums(_limits_of(c))) and own[name][0] for c in every)
        if declared and held is not None:
            out_limits[name] = quantity_text(*held)
    return _requirements(out_requests, out_limits, reported)


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _limits_of(c: Any) -> Any:
    resources = c.get("resources") if isinstance(c, dict) else None
    return resources.get("limits") if isinstance(resources, dict) else None


def _requirements(requests: Obj, limits: Obj, rest: Obj | None = None) -> Obj:
    """Requirements as the API writes them: an empty list of either left out."""
    out = dict(rest or {})
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def _with_pod_level(sums: Sums, level: Obj) -> Sums:
    """``sums`` with the pod-level quantities in place of the containers' (PodRequests, PodLimits)."""
    if level:
        sums.update(parse_sums(level))
    return sums


def _add(total: Sums, more: Sums) -> None:
    for name, (value, binary) in more.items():
        held = total.get(name)
        total[name] = (held[0] + value, held[1]) if held is not None else (value, binary)


def _texts(sums: Sums) -> Obj:
    return {name: quantity_text(value, binary) for name, (value, binary) in sums.items()}


def _above_min_shares(value: Any) -> bool:
    try:
        return parse_quantity(value) > _MIN_SHARES_CPU
    except QuantityError:
        return False


def _nonzero(value: Any) -> bool:
    try:
        return parse_quantity(value) != 0
    except QuantityError:
        return False
