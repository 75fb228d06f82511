"""A pod's pod-level ``spec.resources`` (KEP-2837, PodLevelResources: beta and on since 1.34):
its defaults at create and what it may not say, as kube-apiserver 1.37 has them.

Defaults (``default_pod_level_resources``, upstream's ``SetDefaults_Pod``, so a Pod's only,
after its containers' requests were defaulted from their limits), only for a pod that
already says something at pod level, in upstream's order:

1. hugepages limits: a ``hugepages-<size>`` the containers limit and the pod level neither
   limits nor requests is limited at the containers' aggregate (``defaultHugePagePodLimits``);
2. requests, when the pod level has limits: a cpu or memory the containers request is
   requested at their aggregate, any other resource the pod level limits at its limit
   (``defaultPodRequests``);
3. limits, when the pod level has requests and no limits: a cpu or memory every container
   limits is limited at the containers' aggregate (``defaultPodLimits``).

Validation (``pod_resources_causes``, upstream's ``validatePodResources``, wherever a pod spec
is checked: a Pod's create, update and resize, a workload's template), in upstream's words:
not on a Windows pod; no ``claims``; only cpu, memory and ``hugepages-<size>``, not negative,
each request within its limit (a hugepages request equal to it, and limited); hugepages only
beside cpu or memory; each pod-level request at least the containers' aggregate request
(``validatePodResourceConsistency``), a hugepages limit at least their aggregate limit, and no
container's limit above the pod level's.

The containers' aggregate is upstream's ``AggregateContainerRequests`` (and ``...Limits``):
the containers' sum with the sidecars', at least each plain init container's beside the
sidecars started before it. A sum is written in the format of the first quantity of it,
as ``resource.Quantity.Add`` keeps it (``"100Mi"`` and ``"200Mi"`` make ``"300Mi"``,
``"500m"`` and ``"1"`` make ``"1500m"``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from ..podlevel import HUGEPAGES_PREFIX, SUPPORTED_NAMES, is_pod_level_resource, pod_level
from ..quantity import QuantityError, binary_quantity, canonical_quantity, parse_quantity
from .causes import forbidden, invalid, not_supported, required

__all__ = ["Sums", "aggregate", "default_pod_level_resources", "hugepage_divisible", "parse_sums",
           "pod_resources_causes", "quantity_text"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]
# a resource's sum, and whether the first quantity of it was written in a binary format
Sums = dict[str, tuple[Fraction, bool]]

_BINARY_SUFFIX = re.compile(r"[0-9.]+[KMGTPE]i\Z")
_QOS = ("cpu", "memory")


def hugepage_divisible(name: str, value: Any) -> bool:
    """``IsHugePageResourceValueDivisible`` of a ``hugepages-<size>`` quantity: the page size
    parses, is above zero and whole (to the milli), and divides the quantity rounded up to a
    whole number (``Quantity.Value()``), so ``hugepages-2Mi: 1.5`` is not a multiple, ``0`` is."""
    try:
        page, amount = parse_quantity(name[len(HUGEPAGES_PREFIX):]), parse_quantity(value)
    except QuantityError:
        return False
    if page <= 0 or math.ceil(page * 1000) % 1000:
        return False
    return math.ceil(amount) % math.ceil(page) == 0


# -- the containers' aggregate ----------------------------------------------------------------
def _amount(value: Any) -> tuple[Fraction, bool] | None:
    try:
        return parse_quantity(value), isinstance(value, str) and _BINARY_SUFFIX.match(value.strip()) is not None
    except (QuantityError, TypeError):
        return None


def _of(container: Any, kind: str) -> Sums:
    resources = container.get("resources") if isinstance(container, dict) else None
    return parse_sums(resources.get(kind) if isinstance(resources, dict) else None)


def parse_sums(named: Any) -> Sums:
    """The quantities of the resource list ``named``, parsed (those that do not parse left out)."""
    out: Sums = {}
    for name, value in (named.items() if isinstance(named, dict) else ()):
        parsed = _amount(value)
        if parsed is not None:
            out[name] = parsed
    return out


def _add(total: Sums, more: Sums) -> None:
    for name, (value, binary) in more.items():
        held = total.get(name)
        total[name] = (held[0] + value, held[1]) if held is not None else (value, binary)


def _max(total: Sums, more: Sums) -> None:
    for name, (value, binary) in more.items():
        held = total.get(name)
        if held is None or value > held[0]:
            total[name] = (value, binary)


def aggregate(spec: Obj, kind: str) -> Sums:
    """The containers' aggregate ``kind`` (requests or limits) of the pod ``spec``."""
    total: Sums = {}
    for c in spec.get("containers") or ():
        _add(total, _of(c, kind))
    sidecars: Sums = {}
    init_peak: Sums = {}
    for c in spec.get("initContainers") or ():
        one = _of(c, kind)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            _add(total, one)
            _add(sidecars, one)
            one = dict(sidecars)
        else:
            _add(one, sidecars)
        _max(init_peak, one)
    _max(total, init_peak)
    return total


def quantity_text(value: Fraction, binary: bool) -> str:
    """``value`` as ``Quantity.String`` writes it in the binary or decimal format."""
    if binary and value.denominator == 1:
        return binary_quantity(value.numerator)
    nanos = -((-value.numerator * 10**9) // value.denominator)
    return canonical_quantity(f"{nanos}n")


def _shown(value: Any) -> str:
    """A quantity of the body as upstream prints it back (its canonical text)."""
    try:
        return canonical_quantity(value) if isinstance(value, str) else str(value)
    except QuantityError:
        return str(value)


# -- defaults ---------------------------------------------------------------------------------
def _overcommittable(name: str) -> bool:
    """``IsOvercommitAllowed``: a native resource (no domain, or ``kubernetes.io/``) but hugepages."""
    native = "/" not in name or name.startswith("kubernetes.io/")
    return native and not name.startswith(HUGEPAGES_PREFIX)


def default_pod_level_resources(spec: Obj) -> None:
    """Fill in the pod-level requests and limits a Pod's create leaves out (the module's
    docstring); a pod without pod-level resources is left alone."""
    resources = spec.get("resources")
    if not resources or not isinstance(resources, dict):
        return
    requests, limits = resources.get("requests"), resources.get("limits")
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    if not requests and not limits:
        return
    container_limits = aggregate(spec, "limits")
    for name, (value, binary) in container_limits.items():  # defaultHugePagePodLimits
        if name.startswith(HUGEPAGES_PREFIX) and name not in requests and name not in limits:
            limits[name] = quantity_text(value, binary)
    if limits:
        resources["limits"] = limits
        for name, (value, binary) in aggregate(spec, "requests").items():  # defaultPodRequests
            if name not in requests and is_pod_level_resource(name) and _overcommittable(name):
                requests[name] = quantity_text(value, binary)
        for name, value in limits.items():
            if name not in requests and is_pod_level_resource(name):
                requests[name] = value
        if requests:
            resources["requests"] = requests
        return
    if not pod_level(spec, "requests"):
        return
    for name, (value, binary) in container_limits.items():  # defaultPodLimits
        if is_pod_level_resource(name) and _overcommittable(name) and _all_limit(spec, name):
            limits[name] = quantity_text(value, binary)
    if limits:
        resources["limits"] = limits


def _all_limit(spec: Obj, name: str) -> bool:
    """Whether every container (init containers too) limits ``name``."""
    return all(name in _of(c, "limits") for key in ("containers", "initContainers") for c in spec.get(key) or ())


# -- validation -------------------------------------------------------------------------------
def pod_resources_causes(spec: Obj, path: str) -> Causes:
    """The causes of a 422 in the pod-level resources of the pod spec at ``path``."""
    resources = spec.get("resources")
    if resources is None:
        return []
    at = f"{path}.resources"
    os = spec.get("os")
    if isinstance(os, dict) and os.get("name") == "windows":
        return [forbidden(at, "may not be set for a windows pod")]
    if not isinstance(resources, dict):
        return []
    causes: Causes = []
    if resources.get("claims") is not None:
        causes.append(forbidden(f"{at}.claims", "claims may not be set for Resources at pod-level"))
    causes += _requirements(resources, at)
    causes += _consistency(spec, resources, at)
    return causes


def _requirements(resources: Obj, at: str) -> Causes:
    """``validateResourceRequirements`` with ``validatePodResourceName``."""
    causes: Causes = []
    requests, limits = resources.get("requests"), resources.get("limits")
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    for name, value in limits.items():
        causes += _name_and_quantity(name, value, f"{at}.limits[{name}]")
    for name, value in requests.items():
        causes += _name_and_quantity(name, value, f"{at}.requests[{name}]")
        limit = limits.get(name)
        if limit is None:
            if not _overcommittable(name):
                causes.append(required(f"{at}.limits", "Limit must be set for non overcommitable resources"))
            continue
        request_value, limit_value = _amount(value), _amount(limit)
        if request_value is None or limit_value is None or request_value[0] == limit_value[0]:
            continue
        if not _overcommittable(name):
            causes.append(invalid(f"{at}.requests", _shown(value), f"must be equal to {name} limit of {_shown(limit)}"))
        elif request_value[0] > limit_value[0]:
            causes.append(invalid(f"{at}.requests", _shown(value),
                                  f"must be less than or equal to {name} limit of {_shown(limit)}"))
    named = [*limits, *requests]
    if any(n.startswith(HUGEPAGES_PREFIX) for n in named) and not any(n in _QOS for n in named):
        causes.append(forbidden(at, "HugePages require cpu or memory"))
    return causes


def _name_and_quantity(name: str, value: Any, field: str) -> Causes:
    """``validatePodResourceName`` and ``ValidateResourceQuantityValue`` of one entry."""
    from .podvalidation import label_key_problems
    from .quota import is_standard_resource_name

    problems = label_key_problems(name)
    if problems:
        return [invalid(field, name, p) for p in problems]
    if "/" not in name and not is_standard_resource_name(name):
        return [invalid(field, name, "must be a standard resource type or fully qualified")]
    causes: Causes = []
    if not is_pod_level_resource(name):
        causes.append(not_supported(field, name, SUPPORTED_NAMES))
    parsed = _amount(value)
    if parsed is not None and parsed[0] < 0:
        causes.append(invalid(field, _shown(value), "must be greater than or equal to 0"))
    elif parsed is not None and name.startswith(HUGEPAGES_PREFIX) and not hugepage_divisible(name, value):
        causes.append(invalid(field, _shown(value), f"{_shown(value)} is not positive integer multiple of {name}"))
    return causes


def _consistency(spec: Obj, resources: Obj, at: str) -> Causes:
    """``validatePodResourceConsistency``: the pod level against the containers."""
    causes: Causes = []
    requests, limits = resources.get("requests"), resources.get("limits")
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    if requests:
        for name, (value, binary) in aggregate(spec, "requests").items():
            pod_value = _amount(requests[name]) if name in requests else None
            if pod_value is not None and value > pod_value[0]:
                causes.append(invalid(f"{at}.requests[{name}]", _shown(requests[name]),
                                      f"must be greater than or equal to aggregate container requests of "
                                      f"{quantity_text(value, binary)}"))
    if not limits:
        return causes
    for name, (value, binary) in aggregate(spec, "limits").items():
        pod_value = _amount(limits[name]) if name.startswith(HUGEPAGES_PREFIX) and name in limits else None
        if pod_value is not None and value > pod_value[0]:
            causes.append(invalid(f"{at}.limits[{name}]", _shown(limits[name]),
                                  f"must be greater than or equal to aggregate container limits of "
                                  f"{quantity_text(value, binary)}"))
    for i, c in enumerate(spec.get("containers") or ()):
        for name, (value, _) in _of(c, "limits").items():
            pod_value = _amount(limits[name]) if name in limits else None
            if pod_value is not None and value > pod_value[0]:
                shown = _shown(((c.get("resources") or {}).get("limits") or {}).get(name))
                causes.append(invalid(f"{at}.containers[{i}][{name}].limits", shown,
                                      f"must be less than or equal to pod limits of {_shown(limits[name])}"))
    return causes
