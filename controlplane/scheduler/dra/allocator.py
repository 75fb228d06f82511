"""Allocate a pod's ResourceClaims on one node (upstream's structured allocator, KEP-4381).

Given the pools serving the node (``Inventory``), what is in use
(``AllocatedState``) and the DeviceClasses, ``Allocator.allocate`` finds
devices for every request of every claim, or says why it cannot:

- a request is ``exactly`` one device class with selectors, ``allocationMode``
  ``ExactCount`` (``count``, default 1) or ``All``, optionally ``capacity.requests``
  and ``adminAccess``; or ``firstAvailable``, sub-requests tried in order;
- a device is a candidate when its pool is complete and valid, it serves the
  node, every selector of its class and of the request matches (CEL, cached
  per device), and its NoSchedule/NoExecute taints are tolerated;
- it is free when no other claim holds it, its counters fit in what its
  pool's counter sets have left (partitionable devices: a GPU and its
  partitions share counters, so they are never both allocated beyond them),
  and, for a device that allows multiple allocations, the capacity the request
  consumes (rounded by the capacity's ``requestPolicy``) fits in what is left;
- ``matchAttribute``/``distinctAttribute`` constraints hold across the claim.

The search is upstream's: first fit in pool/slice/device order, backtracking,
combinations not permutations within a request. A step budget bounds it.
``Plan`` is the answer before it is written: ``entries`` for the
``AllocatedState`` and ``results(node)`` for ``status.allocation``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import orjson

from ...quantity import QuantityError, format_quantity, parse_quantity
from .capacity import consumed_capacity
from .cel import CelError, DeviceEnv, Selectors
from .inventory import Device, Inventory, Pool, PoolID, device_serves_node
from .nodeselector import node_name_selector
from .state import AllocatedState, Entry

__all__ = ["AllocationError", "Allocator", "Plan", "Unsatisfiable", "claim_signature"]

MAX_STEPS = 20_000
ALLOCATION_RESULTS_MAX = 32  # resourceapi.AllocationResultsMaxSize


class AllocationError(Exception):
    """The claims cannot be allocated anywhere as they stand (a missing class, a bad selector)."""


class Unsatisfiable(Exception):
    """Not on this node: too few free devices, counters or capacity."""


@dataclass(slots=True)
class _Alt:
    """One way to satisfy a request: the request itself or one of its ``firstAvailable`` entries."""

    claim: int
    request: str  # name for the result: "req" or "req/sub"
    base: str  # the top-level request's name (what constraints refer to)
    class_name: str
    class_obj: Mapping[str, Any]
    selectors: tuple[str, ...]  # class selectors then request selectors
    all_devices: bool
    count: int
    admin: bool
    tolerations: tuple[Mapping[str, Any], ...]
    capacity: dict[str, Fraction] | None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.selectors, repr(self.tolerations))


@dataclass(slots=True)
class _Pick:
    alt: _Alt
    device: Device
    consumed: dict[str, Fraction] | None  # for shared devices
    pool: Pool


@dataclass(slots=True)
class Plan:
    """A found allocation, per claim, not yet written."""

    claims: list[Mapping[str, Any]]
    picks: list[list[_Pick]]
    node_local: list[bool]
    share_ids: list[list[str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.share_ids = [[str(uuid.uuid4()) if p.consumed is not None else None for p in ps] for ps in self.picks]

    def entries(self, i: int) -> list[Entry]:
        return [Entry(p.device.id, sid, tuple(sorted((p.consumed or {}).items())), p.alt.admin)
                for p, sid in zip(self.picks[i], self.share_ids[i], strict=True)]

    def devices(self) -> list[str]:
        return [str(p.device.id) for ps in self.picks for p in ps]

    def allocation(self, i: int, node_name: str, now: datetime | None = None) -> dict[str, Any]:
        """``status.allocation`` for claim ``i``."""
        results: list[dict[str, Any]] = []
        for p, sid in zip(self.picks[i], self.share_ids[i], strict=True):
            d = p.device
            r: dict[str, Any] = {"request": p.alt.request, "driver": d.id.driver, "pool": d.id.pool,
                                 "device": d.id.device}
            if p.alt.admin:
                r["adminAccess"] = True
            if p.alt.tolerations:
                r["tolerations"] = [dict(t) for t in p.alt.tolerations]
            if d.binding_conditions:
                r["bindingConditions"] = list(d.binding_conditions)
                r["bindingFailureConditions"] = list(d.binding_failure_conditions)
            if sid is not None:
                r["shareID"] = sid
                r["consumedCapacity"] = {k: format_quantity(v) for k, v in (p.consumed or {}).items()}
            results.append(r)
        out: dict[str, Any] = {"devices": {"results": results}}
        config = _configs(self.claims[i], self.picks[i])
        if config:
            out["devices"]["config"] = config
        if self.node_local[i]:
            out["nodeSelector"] = node_name_selector(node_name)
        else:
            selectors = [p.device.node_selector for p in self.picks[i] if p.device.node_selector]
            if selectors:
                out["nodeSelector"] = dict(selectors[0])
        out["allocationTimestamp"] = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return out


def _configs(claim: Mapping[str, Any], picks: list[_Pick]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: dict[str, list[str]] = {}
    for p in picks:
        cls = p.alt.class_obj
        name = cls.get("metadata", {}).get("name", "")
        if name in seen:
            if p.alt.request not in seen[name]:
                seen[name].append(p.alt.request)
            continue
        seen[name] = [p.alt.request]
        for c in (cls.get("spec") or {}).get("config") or []:
            rest = {k: v for k, v in c.items() if k != "requests"}
            out.append({"source": "FromClass", "requests": seen[name], **rest})
    for c in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        entry = {"source": "FromClaim", **c}
        out.append(entry)
    return out


def claim_signature(claims: Sequence[Mapping[str, Any]]) -> str:
    """Equal for claims whose specs are equal: pods from one template share Filter answers."""
    return "|".join(orjson.dumps((c.get("spec") or {}), option=orjson.OPT_SORT_KEYS).decode() for c in claims)


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if op == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _attribute(device: Device, name: str) -> Any:
    attrs = device.spec.get("attributes") or {}
    if name in attrs:
        return attrs[name]
    domain, _, ident = name.partition("/")
    if domain == device.id.driver and ident in attrs:
        return attrs[ident]
    return None


class Allocator:
    """Allocations against one inventory and state; selector results cached per device."""

    def __init__(self, inventory: Inventory, state: AllocatedState,
                 classes: Callable[[str], Mapping[str, Any] | None], selectors: Selectors | None = None,
                 cache: bool = True) -> None:
        self.cache = cache  # False: no candidate or selector-result caches (the benchmark's naive peer)
        self.inventory = inventory
        self.state = state
        self.classes = classes
        self.selectors = selectors or Selectors()
        self._candidates: dict[tuple[str, Any], tuple[int, list[tuple[Pool, Device]]]] = {}
        # Selector results by (selectors, device fingerprint): a selector sees only the driver,
        # attributes and capacity, so identical devices on a thousand nodes are evaluated once.
        self._matches: dict[tuple[tuple[str, ...], bytes], bool] = {}

    # -- requests

    def _alts(self, claim_index: int, claim: Mapping[str, Any]) -> list[list[_Alt]]:
        cname = claim.get("metadata", {}).get("name", "")
        out: list[list[_Alt]] = []
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = req.get("name", "")
            if req.get("exactly"):
                out.append([self._alt(claim_index, cname, name, name, req["exactly"], True)])
            elif req.get("firstAvailable"):
                out.append([self._alt(claim_index, cname, f"{name}/{sub.get('name', '')}", name, sub, False)
                            for sub in req["firstAvailable"]])
            else:
                raise AllocationError(f"claim {cname}, request {name}: neither exactly nor firstAvailable")
        return out

    def _alt(self, ci: int, cname: str, rname: str, base: str, spec: Mapping[str, Any], top: bool) -> _Alt:
        class_name = spec.get("deviceClassName", "")
        cls = self.classes(class_name)
        if cls is None:
            raise AllocationError(f"request {rname}: device class {class_name} does not exist")
        exprs: list[str] = []
        for where, sels in (("class " + class_name, (cls.get("spec") or {}).get("selectors") or []),
                            ("claim " + cname, spec.get("selectors") or [])):
            for i, s in enumerate(sels):
                expr = (s.get("cel") or {}).get("expression")
                if not expr:
                    raise AllocationError(f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)")
                try:
                    self.selectors.get(expr)
                except CelError as e:
                    raise AllocationError(f"{where}: selector #{i}: {e}") from None
                exprs.append(expr)
        mode = spec.get("allocationMode") or "ExactCount"
        if mode not in ("ExactCount", "All"):
            raise AllocationError(f"claim {cname}, request {rname}: unsupported count mode {mode}")
        caps = (spec.get("capacity") or {}).get("requests")
        capacity = None
        if caps:
            try:
                capacity = {k: parse_quantity(v) for k, v in caps.items()}
            except QuantityError as e:
                raise AllocationError(f"claim {cname}, request {rname}: {e}") from None
        count = int(spec.get("count", 1)) if mode == "ExactCount" else 0
        if count > ALLOCATION_RESULTS_MAX:
            raise AllocationError(f"claim {cname}: number of requested devices {count} exceeds the claim limit of "
                                  f"{ALLOCATION_RESULTS_MAX}")
        return _Alt(ci, rname, base, class_name, cls, tuple(exprs), mode == "All", count,
                    bool(spec.get("adminAccess")) if top else False, tuple(spec.get("tolerations") or ()),
                    capacity)

    def validate(self, claims: Sequence[Mapping[str, Any]]) -> None:
        """Raise ``AllocationError`` for what fails on every node: a missing class, a bad selector or count."""
        for i, claim in enumerate(claims):
            self._alts(i, claim)

    # -- candidates

    def candidates(self, alt: _Alt, node_name: str, labels: Mapping[str, str]) -> list[tuple[Pool, Device]]:
        """Devices on this node that ``alt`` may use, whatever is in use (cached per inventory version)."""
        key = (node_name, alt.key)
        cached = self._candidates.get(key) if self.cache else None
        if cached is not None and cached[0] == self.inventory.version:
            return cached[1]
        out: list[tuple[Pool, Device]] = []
        compiled = [self.selectors.get(e) for e in alt.selectors]
        for pool in self.inventory.pools_for_node(node_name, labels):
            if pool.invalid or not pool.complete:
                continue
            for d in pool.devices:
                if not device_serves_node(d, node_name, labels):
                    continue
                mk = (alt.selectors, d.fingerprint)
                ok = self._matches.get(mk) if self.cache else None
                if ok is None:
                    try:
                        env = d.env if self.cache else DeviceEnv(d.id.driver, d.spec)
                        ok = all(c.matches(env) for c in compiled)
                    except CelError as e:
                        raise AllocationError(f"class {alt.class_name}: device {d.id}: {e}") from None
                    self._matches[mk] = ok
                if not ok:
                    continue
                if any(t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(alt.tolerations, t)
                       for t in d.taints):
                    continue
                out.append((pool, d))
        self._candidates[key] = (self.inventory.version, out)
        return out

    # -- search

    def allocate(self, node_name: str, labels: Mapping[str, str], claims: Sequence[Mapping[str, Any]]) -> Plan:
        """Devices for every request of ``claims`` on this node; raises ``Unsatisfiable`` or ``AllocationError``."""
        reqs: list[list[_Alt]] = []
        constraints: list[list[tuple[str, str, frozenset[str]]]] = []
        for i, claim in enumerate(claims):
            reqs.extend(self._alts(i, claim))
            cons = []
            for c in ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []:
                names = frozenset(c.get("requests") or ())
                if c.get("matchAttribute"):
                    cons.append(("match", c["matchAttribute"], names))
                elif c.get("distinctAttribute"):
                    cons.append(("distinct", c["distinctAttribute"], names))
                else:
                    raise AllocationError(f"claim {claim.get('metadata', {}).get('name', '')}: empty constraint")
            constraints.append(cons)
        search = _Search(self, node_name, labels, reqs, constraints, len(claims))
        if not search.solve(0):
            raise Unsatisfiable(search.reason or "cannot allocate all claims")
        picks: list[list[_Pick]] = [[] for _ in claims]
        for p in search.chosen:
            picks[p.alt.claim].append(p)
        for i, ps in enumerate(picks):
            if len(ps) > ALLOCATION_RESULTS_MAX:
                raise Unsatisfiable(f"claim {claims[i].get('metadata', {}).get('name', '')}: too many devices")
        node_local = [any(p.device.node_name or p.device.binds_to_node for p in ps) for ps in picks]
        return Plan(list(claims), picks, node_local)


class _Search:
    def __init__(self, a: Allocator, node_name: str, labels: Mapping[str, str], reqs: list[list[_Alt]],
                 constraints: list[list[tuple[str, str, frozenset[str]]]], nclaims: int) -> None:
        self.a = a
        self.state = a.state
        self.node_name = node_name
        self.labels = labels
        self.reqs = reqs
        self.constraints = constraints
        self.chosen: list[_Pick] = []
        self.pending_exclusive: set[Any] = set()
        self.pending_shared: dict[Any, dict[str, Fraction]] = {}
        self.pending_shares: dict[Any, int] = {}
        self.pending_counters: dict[PoolID, dict[tuple[str, str], int]] = {}
        self.steps = 0
        self.reason = ""

    def solve(self, i: int) -> bool:
        if i == len(self.reqs):
            return True
        for alt in self.reqs[i]:
            cands = self.a.candidates(alt, self.node_name, self.labels)
            if alt.all_devices:
                if not cands:
                    self.reason = self.reason or f"no devices for request {alt.request}"
                    continue
                taken = 0
                for pool, d in cands:
                    if not self._take(alt, pool, d):
                        break
                    taken += 1
                if taken == len(cands) and self.solve(i + 1):
                    return True
                for _ in range(taken):
                    self._undo()
            elif self._pick(alt, alt.count, 0, i, cands):
                return True
        return False

    def _pick(self, alt: _Alt, remaining: int, start: int, i: int, cands: list[tuple[Pool, Device]]) -> bool:
        if remaining == 0:
            return self.solve(i + 1)
        for j in range(start, len(cands) - remaining + 1):
            self.steps += 1
            if self.steps > MAX_STEPS:
                self.reason = "allocation search exceeded its step budget"
                return False
            pool, d = cands[j]
            if not self._take(alt, pool, d):
                continue
            if self._pick(alt, remaining - 1, j + 1, i, cands):
                return True
            self._undo()
        if not self.reason:
            self.reason = f"cannot allocate all claims: request {alt.request} needs {alt.count} device(s)"
        return False

    def _take(self, alt: _Alt, pool: Pool, d: Device) -> bool:
        did = d.id
        st = self.state
        consumed: dict[str, Fraction] | None = None
        if alt.admin:
            if any(p.device is d and p.alt.claim == alt.claim for p in self.chosen):
                return False
        elif d.allow_multiple:
            if did in self.pending_exclusive or st.exclusive(did):
                return False
            consumed = consumed_capacity(d, alt.capacity)
            if consumed is None:
                return False
            used = st.shared_capacity(did)
            pend = self.pending_shared.get(did, {})
            for k, v in consumed.items():
                if used.get(k, 0) + pend.get(k, 0) + v > d.capacity[k].value:
                    return False
            first_use = not st.in_use(did) and did not in self.pending_shares
            if first_use and d.consumes and not self._counters_fit(pool, d):
                return False
        else:
            if did in self.pending_exclusive or did in self.pending_shared or st.in_use(did):
                return False
            if alt.capacity is not None:
                want = consumed_capacity(d, alt.capacity)
                if want is None or any(v > d.capacity[k].value for k, v in want.items()):
                    return False
            if d.consumes and not self._counters_fit(pool, d):
                return False
        if not self._constraints_ok(alt, d):
            return False
        # Commit to the pending state.
        if not alt.admin:
            if consumed is not None:
                first = did not in self.pending_shares and not st.in_use(did)
                pend = self.pending_shared.setdefault(did, {})
                for k, v in consumed.items():
                    pend[k] = pend.get(k, Fraction(0)) + v
                self.pending_shares[did] = self.pending_shares.get(did, 0) + 1
                if first and d.consumes:
                    self._add_counters(pool, d, +1)
            else:
                self.pending_exclusive.add(did)
                if d.consumes:
                    self._add_counters(pool, d, +1)
        self.chosen.append(_Pick(alt, d, consumed, pool))
        return True

    def _undo(self) -> None:
        p = self.chosen.pop()
        if p.alt.admin:
            return
        did = p.device.id
        if p.consumed is not None:
            pend = self.pending_shared[did]
            for k, v in p.consumed.items():
                pend[k] -= v
            self.pending_shares[did] -= 1
            if self.pending_shares[did] == 0:
                del self.pending_shares[did]
                del self.pending_shared[did]
                if p.device.consumes and not self.state.in_use(did):
                    self._add_counters(p.pool, p.device, -1)
        else:
            self.pending_exclusive.discard(did)
            if p.device.consumes:
                self._add_counters(p.pool, p.device, -1)

    def _counters_fit(self, pool: Pool, d: Device) -> bool:
        used = self.state.consumed_counters(pool.id)
        pend = self.pending_counters.get(pool.id, {})
        for cs, counters in d.consumes:
            have = pool.counter_sets.get(cs)
            if have is None:
                return False
            for c, v in counters:
                if c not in have or used.get((cs, c), 0) + pend.get((cs, c), 0) + v > have[c]:
                    return False
        return True

    def _add_counters(self, pool: Pool, d: Device, sign: int) -> None:
        pend = self.pending_counters.setdefault(pool.id, {})
        for cs, counters in d.consumes:
            for c, v in counters:
                pend[(cs, c)] = pend.get((cs, c), 0) + sign * v

    def _constraints_ok(self, alt: _Alt, d: Device) -> bool:
        for kind, attr, names in self.constraints[alt.claim]:
            if names and alt.base not in names and alt.request not in names:
                continue
            value = _attribute(d, attr)
            if value is None:
                return False
            for p in self.chosen:
                if p.alt.claim != alt.claim or (names and p.alt.base not in names and p.alt.request not in names):
                    continue
                other = _attribute(p.device, attr)
                if kind == "match" and other != value:
                    return False
                if kind == "distinct" and other == value:
                    return False
        return True
