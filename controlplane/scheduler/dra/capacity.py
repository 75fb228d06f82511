"""Consumable capacity (KEP-5075): how much of a device's capacity a request takes.

For each capacity the device publishes, the amount consumed is:

- the request's amount for it, rounded by the capacity's ``requestPolicy``:
  up to ``validRange.min``, then up to the next ``min + n*step``; or up to the
  smallest of ``validValues`` that is not below it;
- without a request for it, the policy's ``default``, else the whole capacity.

The request fails the policy when the rounded amount passes ``validRange.max``
or every one of ``validValues``. A request naming a capacity the device does
not publish does not fit that device. Names match as upstream: an unqualified
name means the driver's domain, in either spelling::

    consumed = consumed_capacity(device, {"memory": parse_quantity("3Gi")})   # None: does not fit
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from .inventory import Capacity, Device

__all__ = ["consumed_capacity", "resolve_name", "round_request"]


def round_request(requested: Fraction | None, cap: Capacity) -> Fraction | None:
    """The amount consumed for ``requested`` under ``cap``'s policy; None if the policy refuses it."""
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if cap.valid_min is not None:
        amount = max(requested, cap.valid_min)
        if cap.valid_step is not None and cap.valid_step > 0:
            steps = -(-(amount - cap.valid_min) // cap.valid_step)  # ceiling
            amount = cap.valid_min + steps * cap.valid_step
        if cap.valid_max is not None and amount > cap.valid_max:
            return None
        return amount
    if cap.valid_values is not None:
        for v in cap.valid_values:
            if v >= requested:
                return v
        return None
    return requested


def resolve_name(name: str, driver: str, capacity: Mapping[str, Capacity]) -> str | None:
    """The key in ``capacity`` a requested capacity ``name`` refers to, or None."""
    if name in capacity:
        return name
    domain, sep, ident = name.partition("/")
    if sep:
        return ident if domain == driver and ident in capacity else None
    qualified = f"{driver}/{name}"
    return qualified if qualified in capacity else None


def consumed_capacity(device: Device, requests: Mapping[str, Fraction] | None) -> dict[str, Fraction] | None:
    """What allocating ``device`` for a request with these capacity ``requests`` consumes, by the
    device's own capacity names; None when a request names an unknown capacity or breaks a policy."""
    resolved: dict[str, Fraction] = {}
    for name, amount in (requests or {}).items():
        key = resolve_name(name, device.id.driver, device.capacity)
        if key is None or key in resolved:
            return None
        resolved[key] = amount
    consumed: dict[str, Fraction] = {}
    for key, cap in device.capacity.items():
        rounded = round_request(resolved.get(key), cap)
        if rounded is None or rounded < 0:
            return None
        consumed[key] = rounded
    return consumed
