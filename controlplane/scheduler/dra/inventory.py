"""What the ResourceSlices publish: pools of devices, their counters and capacity.

Slices are grouped into pools by ``(driver, spec.pool.name)``. A pool is
*complete* when it holds ``resourceSliceCount`` slices of its highest
``generation``; slices of older generations are ignored (upstream's rule while
a driver republishes). Partitionable devices (KEP-4815) consume counters from a
counter set of their pool (``sharedCounters``, published in the same or
another slice of the pool); consumable capacity (KEP-5075) is per device.

``Inventory`` is fed the slice objects as an informer sees them
(``upsert``/``remove``) and answers which pools serve a node::

    inv = Inventory()
    inv.upsert(slice_obj)
    for pool in inv.pools_for_node("node-1", {"rack": "r1"}): ...

Its ``version`` grows with every change; the per-node pool lists are cached
against it.

DeviceTaintRules (``rule_set``/``rule_remove``) put their taint on every device their
selector picks, as if its slice listed it (upstream's resourceslice tracker): a device's
``taints`` are its slice's, then the rules' in name order. Rules are few; a rule's event
marks stale only the pools it can select (its driver's and pool's, or all when it names
neither) and they are parsed again with it, so a cluster without rules pays nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import orjson

from ...quantity import QuantityError, nanos, parse_quantity
from .cel import DeviceEnv
from .nodeselector import node_selector_matches

__all__ = ["Capacity", "Device", "DeviceID", "Inventory", "Pool", "PoolID"]


class PoolID(NamedTuple):
    driver: str
    pool: str


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Capacity:
    """One entry of ``device.capacity``: its total and how requests are rounded (``requestPolicy``)."""

    value: Fraction
    default: Fraction | None = None
    valid_min: Fraction | None = None
    valid_max: Fraction | None = None
    valid_step: Fraction | None = None
    valid_values: tuple[Fraction, ...] | None = None

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> Capacity:
        policy = spec.get("requestPolicy") or {}
        rng = policy.get("validRange") or None
        values = policy.get("validValues")

        def q(v: Any) -> Fraction | None:
            return None if v is None else parse_quantity(v)

        return cls(
            value=parse_quantity(spec.get("value", 0)),
            default=q(policy.get("default")),
            valid_min=q(rng.get("min")) if rng else None,
            valid_max=q(rng.get("max")) if rng else None,
            valid_step=q(rng.get("step")) if rng else None,
            valid_values=tuple(parse_quantity(v) for v in values) if values else None,
        )


@dataclass(eq=False, slots=True)
class Device:
    """A device of a slice, parsed once; ``matches`` caches selector results by selector key."""

    id: DeviceID
    spec: Mapping[str, Any]
    order: int  # position in the pool: the allocator's first-fit order
    node_name: str | None  # the node this device is local to, if any
    node_selector: Mapping[str, Any] | None
    capacity: dict[str, Capacity]
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # (counterSet, ((counter, nanos), ...))
    allow_multiple: bool
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    binds_to_node: bool
    taints: tuple[Mapping[str, Any], ...]
    _env: DeviceEnv | None = None
    _fingerprint: bytes | None = None

    @property
    def fingerprint(self) -> bytes:
        """What a selector can see of the device: equal devices (on other nodes) share selector results."""
        if self._fingerprint is None:
            self._fingerprint = orjson.dumps(
                (self.id.driver, self.spec.get("attributes"), self.spec.get("capacity"),
                 bool(self.spec.get("allowMultipleAllocations"))), option=orjson.OPT_SORT_KEYS)
        return self._fingerprint

    @property
    def env(self) -> DeviceEnv:
        if self._env is None:
            self._env = DeviceEnv(self.id.driver, self.spec)
        return self._env


@dataclass(eq=False, slots=True)
class Pool:
    id: PoolID
    generation: int
    slice_count: int
    slices: dict[str, Mapping[str, Any]]  # name -> slice object, highest generation only
    devices: list[Device]
    counter_sets: dict[str, dict[str, int]]  # counter set -> counter -> nanos
    invalid: str = ""  # why the pool cannot be used (duplicate devices, unknown counter set...)
    by_name: dict[str, Device] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.slices) >= self.slice_count

    def device(self, name: str) -> Device | None:
        return self.by_name.get(name)


_CAPACITIES: dict[bytes, dict[str, Capacity]] = {}


def _capacities(spec: Mapping[str, Any] | None) -> dict[str, Capacity]:
    """Parsed ``device.capacity``; shared by identical devices (the same model on a thousand nodes).
    The result is read-only."""
    if not spec:
        return {}
    key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
    got = _CAPACITIES.get(key)
    if got is None:
        if len(_CAPACITIES) > 10_000:
            _CAPACITIES.clear()
        got = _CAPACITIES[key] = {k: Capacity.parse(v) for k, v in spec.items()}
    return got


def _slice_target(spec: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any] | None, bool]:
    return spec.get("nodeName") or None, spec.get("nodeSelector") or None, bool(spec.get("allNodes"))


def _rule_taints(rules: list[Mapping[str, Any]], device: str) -> tuple[Mapping[str, Any], ...]:
    """The taints of the rules (already known to select the device's pool) that select ``device``."""
    taints = []
    for rule in rules:
        wanted = rule["spec"]["deviceSelector"].get("device")
        if wanted is None or wanted == device:
            taints.append(rule["spec"]["taint"])
    return tuple(taints)


def _build_pool(pid: PoolID, slices: dict[str, Mapping[str, Any]],
                rules: list[Mapping[str, Any]] | None = None) -> Pool:
    current = _current(slices)
    generation = _generation(next(iter(current.values())))
    count = max(int((s["spec"].get("pool") or {}).get("resourceSliceCount", 1)) for s in current.values())
    pool = Pool(pid, generation, count, current, [], {})
    seen: set[str] = set()
    try:
        for name in sorted(current):
            for cs in current[name]["spec"].get("sharedCounters") or []:
                pool.counter_sets[cs["name"]] = {k: nanos(v.get("value", 0))
                                                 for k, v in (cs.get("counters") or {}).items()}
        order = 0
        for name in sorted(current):
            spec = current[name]["spec"]
            s_node, s_sel, _ = _slice_target(spec)
            per_device = bool(spec.get("perDeviceNodeSelection"))
            for d in spec.get("devices") or []:
                dname = d["name"]
                if dname in seen:
                    pool.invalid = f"duplicate device name {dname}"
                consumes = []
                for cc in d.get("consumesCounters") or []:
                    cs_name = cc.get("counterSet", "")
                    counters = tuple((k, nanos(v.get("value", 0))) for k, v in (cc.get("counters") or {}).items())
                    consumes.append((cs_name, counters))
                seen.add(dname)
                pool.devices.append(Device(
                    id=DeviceID(pid.driver, pid.pool, dname), spec=d, order=order,
                    node_name=(d.get("nodeName") or None) if per_device else s_node,
                    node_selector=(d.get("nodeSelector") or None) if per_device else s_sel,
                    capacity=_capacities(d.get("capacity")),
                    consumes=tuple(consumes),
                    allow_multiple=bool(d.get("allowMultipleAllocations")),
                    binding_conditions=tuple(d.get("bindingConditions") or ()),
                    binding_failure_conditions=tuple(d.get("bindingFailureConditions") or ()),
                    binds_to_node=bool(d.get("bindsToNode")),
                    taints=tuple(d.get("taints") or ()) + _rule_taints(rules, dname) if rules
                    else tuple(d.get("taints") or ()),
                ))
                order += 1
    except (QuantityError, KeyError, TypeError, ValueError, AttributeError) as e:
        pool.invalid = f"invalid slice content: {e}"
    pool.by_name = {d.id.device: d for d in pool.devices}
    if not pool.invalid and pool.complete:
        for dev in pool.devices:
            for cs_name, _ in dev.consumes:
                if cs_name not in pool.counter_sets:
                    pool.invalid = f"device {dev.id.device} consumes unknown counter set {cs_name}"
    return pool


class Inventory:
    """Pools built from ResourceSlices; which of them serve a node.

    A slice event only notes which nodes its pool serves and marks the pool
    stale; the pool is parsed when first asked for (``pool``), so an informer's
    initial list of thousands of slices costs little, and a pool published as
    several slices is parsed once.
    """

    def __init__(self) -> None:
        self._slices: dict[PoolID, dict[str, Mapping[str, Any]]] = {}
        self._slice_pool: dict[str, PoolID] = {}
        self._pools: dict[PoolID, Pool] = {}
        self._stale: set[PoolID] = set()
        self._by_node: dict[str, set[PoolID]] = {}  # pools with a slice for exactly this node
        self._pool_nodes: dict[PoolID, set[str]] = {}  # the reverse of _by_node
        self._shared: set[PoolID] = set()  # pools with selector or all-nodes slices
        self._node_cache: dict[str, tuple[int, list[Pool]]] = {}
        # The node of a pool whose slices are all for one node (None: a pool shared by several).
        self.pool_node: dict[PoolID, str | None] = {}
        self._rules: dict[str, Mapping[str, Any]] = {}  # DeviceTaintRules that select devices, by name
        self.version = 0

    def rule_set(self, rule: Mapping[str, Any]) -> None:
        """A DeviceTaintRule added or changed: its taint on the devices it selects (one
        without a selector selects none)."""
        name = rule["metadata"]["name"]
        old = self._rules.pop(name, None)
        spec = rule.get("spec") or {}
        if isinstance(spec.get("deviceSelector"), dict) and isinstance(spec.get("taint"), dict):
            self._rules[name] = rule
        if old is not None and (old.get("spec") or {}) == spec:
            return
        for r in (old, self._rules.get(name)):
            if r is not None:
                self._rule_changed(r)

    def rule_remove(self, rule: Mapping[str, Any]) -> None:
        old = self._rules.pop(rule["metadata"]["name"], None)
        if old is not None:
            self._rule_changed(old)

    def _rule_changed(self, rule: Mapping[str, Any]) -> None:
        """The pools a rule may select are parsed again when next asked for."""
        selector = rule["spec"]["deviceSelector"]
        driver, pool = selector.get("driver"), selector.get("pool")
        self.version += 1
        for pid in self._slices:
            if (driver is None or pid.driver == driver) and (pool is None or pid.pool == pool):
                self._stale.add(pid)

    def _rules_for(self, pid: PoolID) -> list[Mapping[str, Any]]:
        """The rules that may select devices of the pool, in name order."""
        found = []
        for name in sorted(self._rules):
            selector = self._rules[name]["spec"]["deviceSelector"]
            if selector.get("driver") in (None, pid.driver) and selector.get("pool") in (None, pid.pool):
                found.append(self._rules[name])
        return found

    def upsert(self, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        pid = PoolID(spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
        old = self._slice_pool.get(name)
        if old is not None and old != pid:
            self._drop(name, old)
            self._changed(old)
        self._slice_pool[name] = pid
        self._slices.setdefault(pid, {})[name] = obj
        self._changed(pid)

    def remove(self, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        pid = self._slice_pool.pop(name, None)
        if pid is not None:
            self._drop(name, pid)
            self._changed(pid)

    def _drop(self, name: str, pid: PoolID) -> None:
        slices = self._slices.get(pid)
        if slices is not None:
            slices.pop(name, None)

    def _changed(self, pid: PoolID) -> None:
        self.version += 1
        for old_node in self._pool_nodes.pop(pid, ()):
            pools = self._by_node.get(old_node)
            if pools is not None:
                pools.discard(pid)
                if not pools:
                    del self._by_node[old_node]
        self._shared.discard(pid)
        self._pools.pop(pid, None)
        slices = self._slices.get(pid)
        if not slices:
            self._slices.pop(pid, None)
            self._stale.discard(pid)
            self.pool_node.pop(pid, None)
            return
        self._stale.add(pid)
        targets: set[str | None] = set()
        for s in _current(slices).values():
            node, _sel, _all = _slice_target(s["spec"])
            targets.add(node)
            if node:
                self._by_node.setdefault(node, set()).add(pid)
                self._pool_nodes.setdefault(pid, set()).add(node)
            elif s["spec"].get("devices") or s["spec"].get("perDeviceNodeSelection"):
                self._shared.add(pid)
        self.pool_node[pid] = targets.pop() if len(targets) == 1 else None

    def pool(self, pid: PoolID) -> Pool | None:
        """The pool, parsed now if its slices changed since it last was."""
        if pid in self._stale:
            self._stale.discard(pid)
            slices = self._slices.get(pid)
            if slices:
                self._pools[pid] = _build_pool(pid, slices, self._rules_for(pid) if self._rules else None)
        return self._pools.get(pid)

    @property
    def pools(self) -> dict[PoolID, Pool]:
        """Every pool, parsed (for checks and tests; the scheduler asks per node)."""
        for pid in list(self._stale):
            self.pool(pid)
        return self._pools

    def pools_for_node(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """Pools with at least one device that can be used on this node, in a stable order."""
        cached = self._node_cache.get(node_name)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        found: dict[PoolID, Pool] = {}
        for pid in self._by_node.get(node_name, ()):
            pool = self.pool(pid)
            if pool is not None:
                found[pid] = pool
        for pid in self._shared:
            pool = self.pool(pid)
            if pool is not None and any(device_serves_node(d, node_name, labels) for d in pool.devices):
                found[pid] = pool
        pools = [found[p] for p in sorted(found)]
        self._node_cache[node_name] = (self.version, pools)
        return pools

    def device(self, did: DeviceID) -> Device | None:
        pool = self.pool(PoolID(did.driver, did.pool))
        return pool.device(did.device) if pool is not None else None

    def devices(self) -> Iterator[Device]:
        for pool in self.pools.values():
            yield from pool.devices


def _generation(s: Mapping[str, Any]) -> int:
    return int((s["spec"].get("pool") or {}).get("generation", 0))


def _current(slices: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The slices of the pool's highest generation (older ones are being replaced)."""
    generation = max(_generation(s) for s in slices.values())
    return {n: s for n, s in slices.items() if _generation(s) == generation}


def device_serves_node(d: Device, node_name: str, labels: Mapping[str, str]) -> bool:
    if d.node_name:
        return d.node_name == node_name
    if d.node_selector:
        return node_selector_matches(d.node_selector, node_name, labels)
    return True  # allNodes

