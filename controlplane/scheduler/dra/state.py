"""Which devices are in use: by allocated claims (from their status) and by assumed ones.

An allocation result with a ``shareID`` is one share of a device that allows
multiple allocations: it adds its ``consumedCapacity`` to the device's total.
Any other result (except ``adminAccess`` ones, which never block others) holds
the device exclusively. A device in use, exclusively or by at least one share,
consumes its ``consumesCounters`` from its pool's counter sets once.

Claims come from two places, keyed by ``namespace/name``:

- ``set_claim``: what the API says (an informer's add/update/delete); a claim
  seen allocated there supersedes an assumed entry for it;
- ``assume``/``forget``: what the scheduler reserved in memory and has not yet
  seen written back, so that two scheduling cycles never hand out one device.

Every change bumps the version of each pool it touches (``pool_version``), which
is what the plugin's per-node caches are keyed by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...quantity import QuantityError, parse_quantity
from .inventory import DeviceID, Inventory, PoolID

__all__ = ["AllocatedState", "Entry", "entries_of"]


@dataclass(frozen=True, slots=True)
class Entry:
    device: DeviceID
    share_id: str | None = None
    consumed: tuple[tuple[str, Fraction], ...] = ()
    admin: bool = False


def entries_of(claim: Mapping[str, Any]) -> list[Entry]:
    """The device entries of a claim's ``status.allocation`` (empty when not allocated)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    out: list[Entry] = []
    for r in (alloc.get("devices") or {}).get("results") or []:
        try:
            consumed = tuple((k, parse_quantity(v)) for k, v in (r.get("consumedCapacity") or {}).items())
        except QuantityError:
            consumed = ()
        out.append(Entry(DeviceID(r.get("driver", ""), r.get("pool", ""), r.get("device", "")),
                         r.get("shareID") or None, consumed, bool(r.get("adminAccess"))))
    return out


class AllocatedState:
    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._committed: dict[str, list[Entry]] = {}
        self._assumed: dict[str, list[Entry]] = {}
        self._exclusive: dict[DeviceID, int] = {}
        self._shares: dict[DeviceID, int] = {}
        self._shared_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self._in_use_by_pool: dict[PoolID, dict[str, int]] = {}
        self._pool_versions: dict[PoolID, int] = {}
        self._counter_cache: dict[PoolID, tuple[int, int, dict[tuple[str, str], int]]] = {}
        # Generations for the per-node caches: a change in a node-local pool bumps its node's,
        # a change in a pool shared by several nodes bumps ``shared_generation``.
        self.node_generation: dict[str, int] = {}
        self.shared_generation = 0
        # Nodes whose generation moved since the manager last looked (its row verdicts).
        self.changed_nodes: set[str] = set()

    # -- changes

    def set_claim(self, key: str, entries: list[Entry]) -> None:
        """The claim as the API has it now (``[]`` when unallocated or deleted).

        What changes nothing in use bumps no generation: the API confirming what was
        assumed (PreBind's own write, then the informer's event of it), or an update of
        the claim that leaves its allocation as it was. Each bump sends the node's
        verdicts to be computed again, and a pod's allocation came back three times."""
        old = self._committed.get(key)
        if entries and key not in self._assumed and old == entries:
            return
        if entries and not old and self._assumed.get(key) == entries:
            self._committed[key] = self._assumed.pop(key)
            return
        self._committed.pop(key, None)
        if old:
            self._apply(old, -1)
        assumed = self._assumed.pop(key, None) if entries else None
        if assumed:
            self._apply(assumed, -1)
        if entries:
            self._committed[key] = entries
            self._apply(entries, +1)

    def assume(self, key: str, entries: list[Entry]) -> None:
        """Hold ``entries`` for claim ``key`` until ``forget`` or until the API shows the claim allocated."""
        self.forget(key)
        self._assumed[key] = entries
        self._apply(entries, +1)

    def forget(self, key: str) -> None:
        old = self._assumed.pop(key, None)
        if old:
            self._apply(old, -1)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def committed(self, key: str) -> list[Entry] | None:
        return self._committed.get(key)

    def _apply(self, entries: Iterable[Entry], sign: int) -> None:
        for e in entries:
            if e.admin:
                continue
            did = e.device
            pid = PoolID(did.driver, did.pool)
            self._pool_versions[pid] = self._pool_versions.get(pid, 0) + 1
            node = self.inventory.pool_node.get(pid)
            if node is None:
                self.shared_generation += 1
            else:
                self.node_generation[node] = self.node_generation.get(node, 0) + 1
                self.changed_nodes.add(node)
            in_use = self._in_use_by_pool.setdefault(pid, {})
            in_use[did.device] = in_use.get(did.device, 0) + sign
            if in_use[did.device] <= 0:
                del in_use[did.device]
            if e.share_id is None:
                n = self._exclusive.get(did, 0) + sign
                if n > 0:
                    self._exclusive[did] = n
                else:
                    self._exclusive.pop(did, None)
            else:
                n = self._shares.get(did, 0) + sign
                caps = self._shared_capacity.setdefault(did, {})
                for k, v in e.consumed:
                    caps[k] = caps.get(k, Fraction(0)) + sign * v
                if n > 0:
                    self._shares[did] = n
                else:
                    self._shares.pop(did, None)
                    self._shared_capacity.pop(did, None)

    # -- questions

    def pool_version(self, pid: PoolID) -> int:
        return self._pool_versions.get(pid, 0)

    def exclusive(self, did: DeviceID) -> bool:
        return did in self._exclusive

    def shares(self, did: DeviceID) -> int:
        return self._shares.get(did, 0)

    def in_use(self, did: DeviceID) -> bool:
        return did in self._exclusive or did in self._shares

    def shared_capacity(self, did: DeviceID) -> Mapping[str, Fraction]:
        return self._shared_capacity.get(did) or {}

    def consumed_counters(self, pid: PoolID) -> dict[tuple[str, str], int]:
        """Counters consumed in pool ``pid`` by devices in use: ``(counterSet, counter) -> nanos``."""
        key = (self.pool_version(pid), self.inventory.version)
        cached = self._counter_cache.get(pid)
        if cached is not None and (cached[0], cached[1]) == key:
            return cached[2]
        totals: dict[tuple[str, str], int] = {}
        pool = self.inventory.pool(pid)
        if pool is not None:
            for name in self._in_use_by_pool.get(pid, ()):
                dev = pool.device(name)
                if dev is None:
                    continue
                for cs, counters in dev.consumes:
                    for c, v in counters:
                        totals[(cs, c)] = totals.get((cs, c), 0) + v
        self._counter_cache[pid] = (key[0], key[1], totals)
        return totals

    def claims(self) -> dict[str, list[Entry]]:
        """Committed and assumed claims (for checks and tests)."""
        return {**self._committed, **self._assumed}
