"""LimitRanger admission: a new pod or claim gets its namespace's LimitRange defaults, and
is refused (403) outside its minimums, maximums and limit/request ratios.

As upstream's plugin, for each LimitRange of the namespace:

- ``Container`` items: a container without a limit (request) of a resource gets the
  item's ``default`` (``defaultRequest``); the pod is annotated
  ``kubernetes.io/limit-ranger`` with what was set. Then each container's request
  must be at least ``min``, its limit at most ``max``, and limit/request at most
  ``maxLimitRequestRatio``;
- ``Pod`` items: the same bounds over the pod's requests and limits: its containers' sum, its
  init containers counted as the scheduler counts them (a sidecar added, a plain one at
  least), and its pod-level cpu and memory (PodLevelResources) in place of that sum where
  it names them, as upstream's ``podRequests``/``podLimits``;
- ``PersistentVolumeClaim`` items: the claim's storage request within ``min`` and ``max``.

Defaults are applied in mutating admission (``admit``) and the bounds checked in validating
admission (``validate``), as upstream's ``Admit`` and ``Validate``, at create and at a resize (``pods/resize``,
the only pod update that changes resources, which upstream's plugin takes too; the
annotation is not written then: the resize strategy keeps only the resources); a claim's
bounds at its every update too (its resize; and as upstream, any update of a claim outside
a range made since). The namespace's
ranges are memoised per watch-cache generation, as the quotas; a namespace the cache
shows none in is read once consistently and remembered for 30 s (upstream's live
lookup), so a LimitRange just created already applies.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

from ..quantity import QuantityError, format_quantity, parse_quantity
from ..registry.types import ResourceType
from .converting import unconverted
from .errors import ApiError
from .namespaced import NamespacedObjects

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["LimitRanger"]

Obj = dict[str, Any]
ANNOTATION = "kubernetes.io/limit-ranger"


def _q(value: Any) -> Fraction | None:
    if isinstance(value, Fraction):  # a pod's sum, added up already
        return value
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _terminating(old: Obj | None) -> bool:
    """Whether an update's stored object is being deleted (upstream's LimitRanger ignores it)."""
    return old is not None and bool((old.get("metadata") or {}).get("deletionTimestamp"))


def _bounds(item: Obj, what: str, requests: dict[str, Any], limits: dict[str, Any], claim: bool = False) -> list[str]:
    """Upstream's messages for ``requests``/``limits`` (of a container, a pod or a claim) outside
    ``item`` (its minConstraint, maxConstraint and limitRequestRatioConstraint; for a ``claim``,
    minConstraint without limits and maxRequestConstraint, as PersistentVolumeClaimValidateLimitFunc)."""
    problems = []
    for name, low in (item.get("min") or {}).items():
        have, limit, floor = _q(requests.get(name)), _q(limits.get(name)), _q(low) or 0
        if have is None:
            problems.append(f"minimum {name} usage per {what} is {low}.  No request is specified")
        elif have < floor:
            problems.append(f"minimum {name} usage per {what} is {low}, but request is {format_quantity(have)}")
        elif limit is not None and limit < floor:
            problems.append(f"minimum {name} usage per {what} is {low}, but limit is {format_quantity(limit)}")
    for name, high in (item.get("max") or {}).items():
        have, request, ceiling = _q(limits.get(name)), _q(requests.get(name)), _q(high) or 0
        if claim:  # maxRequestConstraint: a claim has no limits, its request is held to the maximum
            if request is None:
                problems.append(f"maximum {name} usage per {what} is {high}.  No request is specified")
            elif request > ceiling:
                problems.append(f"maximum {name} usage per {what} is {high}, but request is {format_quantity(request)}")
        elif have is None:
            problems.append(f"maximum {name} usage per {what} is {high}.  No limit is specified")
        elif have > ceiling:
            problems.append(f"maximum {name} usage per {what} is {high}, but limit is {format_quantity(have)}")
        elif request is not None and request > ceiling:
            problems.append(f"maximum {name} usage per {what} is {high}, but request is {format_quantity(request)}")
    for name, ratio in () if claim else (item.get("maxLimitRequestRatio") or {}).items():
        limit, request = _q(limits.get(name)), _q(requests.get(name))
        if not request:
            problems.append(f"{name} max limit to request ratio per {what} is {ratio}, but no request is specified "
                            "or request is 0")
        elif not limit:
            problems.append(f"{name} max limit to request ratio per {what} is {ratio}, but no limit is specified "
                            "or limit is 0")
        elif limit / request > (_q(ratio) or 0):
            problems.append(f"{name} max limit to request ratio per {what} is {ratio}, but provided ratio is "
                            f"{float(limit / request):.6f}")
    return problems


def _outside(rtype: ResourceType, spec: Obj, items: list[Obj]) -> list[str]:
    """How a pod's or a claim's resources fall outside the limits ``items`` of one LimitRange."""
    problems: list[str] = []
    if rtype.plural == "persistentvolumeclaims":
        storage = ((spec.get("resources") or {}).get("requests") or {})
        for item in items:
            if item.get("type") == "PersistentVolumeClaim":
                problems += _bounds(item, "PersistentVolumeClaim", storage, {}, claim=True)
        return problems
    containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    for item in items:
        if item.get("type") == "Container":
            for c in containers:
                res = c.get("resources") or {}
                problems += _bounds(item, "Container", res.get("requests") or {}, res.get("limits") or {})
        elif item.get("type") == "Pod":
            problems += _bounds(item, "Pod", _pod_total(spec, "requests"), _pod_total(spec, "limits"))
    return problems


# the resources LimitRanger takes from the pod level (its own isSupportedPodLevelResource:
# cpu and memory, not hugepages, which the scheduler and the quota take too)
_POD_LEVEL = ("cpu", "memory")


def _pod_total(spec: Obj, kind: str) -> dict[str, Any]:
    """The pod's ``kind`` (``requests`` or ``limits``) as upstream's plugin works them out for
    ``Pod`` limits (its ``podRequests``/``podLimits``, the spec's only): the containers' sum
    (a resource any of them names), sidecars (restartable init containers) added, at least
    each plain init container's beside the sidecars started before it; then the pod-level
    cpu and memory (PodLevelResources) in place of that sum where the pod level names them."""
    total: dict[str, Any] = {}
    for c in spec.get("containers") or ():
        _add(total, _of(c, kind))
    sidecars: dict[str, Any] = {}
    peak: dict[str, Any] = {}
    for c in spec.get("initContainers") or ():
        one = _of(c, kind)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            _add(total, one)
            _add(sidecars, one)
            one = sidecars
        else:
            one = dict(one)
            _add(one, sidecars)
        _max(peak, one)
    _max(total, peak)
    level = spec.get("resources")
    named = level.get(kind) if isinstance(level, dict) else None
    if isinstance(named, dict):
        for name in _POD_LEVEL:
            if name in named:
                total[name] = named[name]
    return total


def _of(container: Any, kind: str) -> dict[str, Fraction]:
    named = ((container.get("resources") or {}).get(kind) or {}) if isinstance(container, dict) else {}
    return {k: v for k, v in ((k, _q(v)) for k, v in named.items()) if v is not None}


def _add(total: dict[str, Any], more: dict[str, Any]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max(total: dict[str, Any], more: dict[str, Any]) -> None:
    for name, value in more.items():
        if name not in total or value > total[name]:
            total[name] = value


def _aggregate(problems: list[str]) -> str:
    """As Go's ``utilerrors.NewAggregate(...).Error()``: each message once, several in brackets."""
    unique = list(dict.fromkeys(problems))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


LIVE_LOOKUP_SECONDS = 30.0  # upstream's liveTTL
LIVE_LOOKUP_MAX = 4096  # namespaces remembered


class LimitRanger:
    def __init__(self, kube: KubeApi, ranges: ResourceType) -> None:
        self.ranges = NamespacedObjects(kube, ranges)
        self._kube, self._type = kube, ranges
        # namespace -> (until when, the ranges a live read found): as upstream's liveLookupCache
        self._live: OrderedDict[str, tuple[float, list[Obj]]] = OrderedDict()

    async def _ranges_of(self, namespace: str) -> list[Obj]:
        """The namespace's ranges from the watch cache; when it has none, one consistent read,
        remembered for ``LIVE_LOOKUP_SECONDS`` (upstream's live lookup): a pod created just
        after its namespace's LimitRange, before the cache has it, still gets its defaults."""
        ranges = await self.ranges.of(namespace)
        if ranges:
            return ranges
        now = time.monotonic()
        live = self._live.get(namespace)
        if live is not None and live[0] > now:
            return live[1]
        with unconverted():
            listed = await self._kube._list(self._type, namespace, {})  # no resourceVersion: consistent
        found = [orjson.loads(raw) for raw in listed.items]
        self._live[namespace] = (now + LIVE_LOOKUP_SECONDS, found)
        self._live.move_to_end(namespace)
        if len(self._live) > LIVE_LOOKUP_MAX:
            self._live.popitem(last=False)
        return found

    async def admit(self, rtype: ResourceType, namespace: str | None, obj: Obj, annotate: bool = True,
                    old: Obj | None = None) -> None:
        """Mutating admission: default a pod's resources from the namespace's ranges.
        ``annotate``: say what was defaulted in the pod's annotation (not on a resize, whose
        strategy keeps nothing of the write but the containers' resources); ``old``: an
        update's stored object (one being deleted is left alone, as upstream's)."""
        if rtype.group or rtype.plural != "pods" or not namespace or _terminating(old):
            return
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
        ranges = await self._ranges_of(namespace) if spec is not None else []
        if not ranges or spec is None:
            return
        items = [i for r in ranges for i in ((r.get("spec") or {}).get("limits") or ()) if isinstance(i, dict)]
        self._default(obj, spec, items, annotate)

    async def validate(self, rtype: ResourceType, namespace: str | None, obj: Obj, old: Obj | None = None) -> None:
        """Validating admission: a 403 when ``obj`` (a pod or claim, as the mutating admission
        left it: the policies' and webhooks' changes included) is outside the namespace's ranges.
        Upstream's plugin checks the bounds in its ``Validate``, after every mutating plugin,
        policy and webhook; a bound checked as the defaults are set refused a pod a mutating
        policy would bring within it, and let through one it took out. An update of an object
        being deleted (``old`` has a deletionTimestamp) is not checked, as upstream's
        ``runLimitFunc`` skips it: a terminating claim outside a range made since must still
        have its finalizers taken off one at a time."""
        if rtype.group or rtype.plural not in ("pods", "persistentvolumeclaims") or not namespace \
                or _terminating(old):
            return
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
        ranges = await self._ranges_of(namespace) if spec is not None else []
        if not ranges or spec is None:
            return
        for r in ranges:  # upstream's Validate stops at the first range the object is outside of
            limits = [i for i in ((r.get("spec") or {}).get("limits") or ()) if isinstance(i, dict)]
            problems = _outside(rtype, spec, limits)
            if problems:
                name = (obj.get("metadata") or {}).get("name") or ""
                raise ApiError(403, "Forbidden", f'{rtype.plural} "{name}" is forbidden: {_aggregate(problems)}',
                               {"name": name, "kind": rtype.plural})

    @staticmethod
    def _default(pod: Obj, spec: Obj, items: list[Obj], annotate: bool) -> None:
        set_limits: dict[str, list[str]] = {}
        set_requests: dict[str, list[str]] = {}
        for item in items:
            if item.get("type") != "Container":
                continue
            for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
                if not isinstance(c, dict):
                    continue
                resources = c.setdefault("resources", {})
                for kind, defaults, record in (("limits", item.get("default"), set_limits),
                                               ("requests", item.get("defaultRequest"), set_requests)):
                    values = resources.setdefault(kind, {})
                    for name, value in (defaults or {}).items():
                        if name not in values:
                            values[name] = value
                            record.setdefault(str(c.get("name", "")), []).append(name)
                for kind in ("limits", "requests"):
                    if not resources.get(kind):
                        resources.pop(kind, None)
        if annotate and (set_limits or set_requests):
            parts = [f"{', '.join(names)} request for {'init ' if _is_init(spec, c) else ''}container {c}"
                     for c, names in set_requests.items()]
            parts += [f"{', '.join(names)} limit for {'init ' if _is_init(spec, c) else ''}container {c}"
                      for c, names in set_limits.items()]
            meta = pod.setdefault("metadata", {})
            meta.setdefault("annotations", {})[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(parts)


def _is_init(spec: Obj, name: str) -> bool:
    return any(isinstance(c, dict) and c.get("name") == name for c in spec.get("initContainers") or ())
