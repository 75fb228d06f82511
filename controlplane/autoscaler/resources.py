"""Resource quantities as exact integers: every amount in milli-units.

Kubernetes quantities (``"500m"``, ``"64Gi"``, ``"2"``, ``"1e3"``) are parsed
to thousandths of the base unit, so CPU, memory, pods and ``nvidia.com/gpu``
add and compare without rounding::

    >>> parse_quantity("500m"), parse_quantity("1Ki"), parse_quantity("2")
    (500, 1024000, 2000)
    >>> add({"cpu": 500}, {"cpu": 1500, "memory": 1000})
    {'cpu': 2000, 'memory': 1000}
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ..podlevel import pod_level

__all__ = ["Resources", "add", "fits", "format_quantity", "parse_quantity", "parse_resources", "pod_requests",
           "subtract"]

Resources = dict[str, int]  # resource name -> amount in milli-units

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
            "E": Decimal(10**18)}
_QUANTITY = re.compile(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)\Z")


def parse_quantity(value: Any) -> int:
    """A quantity (string or number) in milli-units, rounded up as the API rounds
    requests; raises ``ValueError`` for what is not a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return math.ceil(Decimal(str(value)) * 1000)
    m = _QUANTITY.match(str(value).strip())
    if m is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = m.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {value!r}") from None
    scale = Decimal(_BINARY[suffix]) if suffix in _BINARY else _DECIMAL[suffix]
    return math.ceil(amount * scale * 1000)


def format_quantity(name: str, milli: int) -> str:
    """The canonical string of an amount: CPU in cores or millicores, memory in
    Ki/Mi/Gi when exact, everything else as a plain number."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if name in ("memory", "ephemeral-storage") and whole:
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


def parse_resources(values: Mapping[str, Any] | None) -> Resources:
    out: Resources = {}
    for name, value in (values or {}).items():
        out[name] = parse_quantity(value)
    return out


def add(*many: Mapping[str, int]) -> Resources:
    out: Resources = {}
    for r in many:
        for name, amount in r.items():
            out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Whether every requested amount is within what is available (a resource
    the node does not have at all counts as 0)."""
    return all(amount <= 0 or amount <= available.get(name, 0) for name, amount in requests.items())


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    requests = parse_resources(resources.get("requests"))
    # a limit without a request defaults the request (API defaulting does this too)
    for name, value in (resources.get("limits") or {}).items():
        requests.setdefault(name, parse_quantity(value))
    return requests


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What a pod asks a node for, as the scheduler computes it: the sum of its
    containers (and restartable init containers), or the largest init container
    if that is more (its pod-level request instead, for each resource its pod-level
    requests name: ``podlevel``), plus its overhead; and one ``pods`` slot."""
    spec = pod.get("spec") or {}
    total = add(*(_container_requests(c) for c in spec.get("containers") or ()))
    sidecars: Resources = {}
    init_max: Resources = {}
    for c in spec.get("initContainers") or ():
        r = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, r)
            continue
        for name, amount in add(r, sidecars).items():
            init_max[name] = max(init_max.get(name, 0), amount)
    total = add(total, sidecars)
    for name, amount in init_max.items():
        total[name] = max(total.get(name, 0), amount)
    total.update(parse_resources(pod_level(spec, "requests")))
    total = add(total, parse_resources(spec.get("overhead")))
    total["pods"] = total.get("pods", 0) + 1000
    return total


def total(pods: Iterable[Mapping[str, Any]]) -> Resources:
    return add(*(pod_requests(p) for p in pods))
