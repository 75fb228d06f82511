"""The DRA invariant: no device allocated twice, none beyond its counters or capacity.

``check_invariants(slices, claims)`` looks only at API objects (what a test or a
benchmark lists after a run) and returns what is wrong, one line per problem::

    assert check_invariants(slices, claims) == []
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ...quantity import NANO, format_quantity
from .inventory import DeviceID, Inventory, PoolID
from .state import entries_of

__all__ = ["check_invariants"]


def check_invariants(slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]) -> list[str]:
    inv = Inventory()
    for s in slices:
        inv.upsert(s)
    problems: list[str] = []
    holders: dict[DeviceID, list[str]] = {}
    shares: dict[DeviceID, list[str]] = {}
    capacity: dict[DeviceID, dict[str, Fraction]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        for e in entries_of(claim):
            if e.admin:
                continue
            dev = inv.device(e.device)
            if dev is None:
                problems.append(f"claim {key}: device {e.device} is not published by any slice")
                continue
            if e.share_id is None:
                holders.setdefault(e.device, []).append(key)
            else:
                if not dev.allow_multiple:
                    problems.append(f"claim {key}: shared allocation of {e.device}, which does not allow multiple")
                shares.setdefault(e.device, []).append(key)
                caps = capacity.setdefault(e.device, {})
                for k, v in e.consumed:
                    caps[k] = caps.get(k, Fraction(0)) + v
    for did, keys in holders.items():
        if len(keys) > 1 or did in shares:
            problems.append(f"device {did} allocated more than once: {sorted(keys + shares.get(did, []))}")
    for did, caps in capacity.items():
        dev = inv.device(did)
        assert dev is not None
        for k, used in caps.items():
            cap = dev.capacity.get(k)
            if cap is None:
                problems.append(f"device {did}: consumed capacity {k} it does not publish")
            elif used > cap.value:
                problems.append(f"device {did}: capacity {k} consumed {format_quantity(used)} > "
                                f"{format_quantity(cap.value)}")
    used_counters: dict[PoolID, dict[tuple[str, str], int]] = {}
    for did in set(holders) | set(shares):
        dev = inv.device(did)
        assert dev is not None
        totals = used_counters.setdefault(PoolID(did.driver, did.pool), {})
        for cs, counters in dev.consumes:
            for c, n in counters:
                totals[(cs, c)] = totals.get((cs, c), 0) + n
    for pid, totals in used_counters.items():
        pool = inv.pool(pid)
        assert pool is not None
        for (cs, c), total in sorted(totals.items()):
            have = pool.counter_sets.get(cs, {}).get(c)
            if have is None:
                problems.append(f"pool {pid.driver}/{pid.pool}: counter {cs}/{c} does not exist")
            elif total > have:
                problems.append(f"pool {pid.driver}/{pid.pool}: counter {cs}/{c} consumed "
                                f"{format_quantity(Fraction(total, NANO))} > {format_quantity(Fraction(have, NANO))}")
    return problems
