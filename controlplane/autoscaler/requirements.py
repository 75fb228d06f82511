"""Node selector requirements as sets of allowed values, and their intersection.

A requirement on one label key is the set of values it allows: ``In`` a finite
set, ``NotIn`` and ``Exists`` the complement of one, ``DoesNotExist`` the empty
set, ``Gt``/``Lt`` bounds on an integer value. Karpenter narrows a NodeClaim
this way: the NodePool's template requirements, intersected with each pod's
node selector and required node affinity, intersected with what an instance
type and its offerings (zone, capacity type) can be::

    >>> pool = Requirements.parse([{"key": "zone", "operator": "In", "values": ["a", "b"]}])
    >>> pod = Requirements.parse([{"key": "zone", "operator": "NotIn", "values": ["a"]}])
    >>> pool.compatible(pod), sorted(pool.intersect(pod)["zone"].values)
    (True, ['b'])
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Requirement", "Requirements", "pod_requirement_terms", "tolerates"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    # complement: the allowed values are everything except ``values`` (NotIn, Exists, Gt, Lt)
    complement: bool
    values: frozenset[str]
    gt: int | None = None
    lt: int | None = None
    # whether a node without the label satisfies it (NotIn, DoesNotExist)
    allows_absent: bool = False
    # Karpenter's ``minValues``: a NodeClaim's instance types must offer at least this many
    # distinct values of the key (flexibility, e.g. for spot); the larger wins when intersected
    min_values: int | None = None

    @classmethod
    def parse(cls, key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None,
              ) -> Requirement:
        r = cls._parse(key, operator, values)
        return r if min_values is None else dataclasses.replace(r, min_values=int(min_values))

    @classmethod
    def _parse(cls, key: str, operator: str, values: Iterable[str]) -> Requirement:
        vals = frozenset(str(v) for v in values)
        if operator == "In":
            return cls(key, False, vals)
        if operator == "NotIn":
            return cls(key, True, vals, allows_absent=True)
        if operator == "Exists":
            return cls(key, True, frozenset())
        if operator == "DoesNotExist":
            return cls(key, False, frozenset(), allows_absent=True)
        if operator in ("Gt", "Lt", "Gte", "Lte"):
            if len(vals) != 1:
                raise ValueError(f"{operator} on {key} needs exactly one integer value")
            (n,) = vals
            bound = int(n)  # Gte n is Gt n-1, Lte n is Lt n+1: the values are integers
            if operator in ("Gt", "Gte"):
                return cls(key, True, frozenset(), gt=bound - (operator == "Gte"))
            return cls(key, True, frozenset(), lt=bound + (operator == "Lte"))
        raise ValueError(f"unknown operator {operator!r} on {key} (one of {', '.join(OPERATORS)})")

    def _in_bounds(self, value: str) -> bool:
        if self.gt is None and self.lt is None:
            return True
        try:
            n = int(value)
        except ValueError:
            return False
        return (self.gt is None or n > self.gt) and (self.lt is None or n < self.lt)

    def allows(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values and self._in_bounds(value)

    def intersect(self, other: Requirement) -> Requirement:
        gt = max((b for b in (self.gt, other.gt) if b is not None), default=None)
        lt = min((b for b in (self.lt, other.lt) if b is not None), default=None)
        absent = self.allows_absent and other.allows_absent
        least = max((m for m in (self.min_values, other.min_values) if m is not None), default=None)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gt, lt, absent, least)
        if self.complement:
            finite = other.values - self.values
        elif other.complement:
            finite = self.values - other.values
        else:
            finite = self.values & other.values
        r = Requirement(self.key, False, frozenset(), gt, lt, absent)
        return Requirement(self.key, False, frozenset(v for v in finite if r._in_bounds(v)), gt, lt, absent, least)

    def any(self) -> bool:
        """Whether some value satisfies it."""
        if not self.complement:
            return bool(self.values)
        return self.gt is None or self.lt is None or self.lt - self.gt > 1

    def single(self) -> str | None:
        """The one value it allows, if exactly one."""
        if not self.complement and len(self.values) == 1:
            return next(iter(self.values))
        return None

    def any_value(self) -> str | None:
        """A value a node's label can take to satisfy it (Karpenter's ``Requirement.Any``): one of
        ``In``'s values (the least), a random integer within the bounds and not excluded for the
        complement ones (``Exists``, ``NotIn``, ``Gt``, ``Lt``); None for ``DoesNotExist`` or if none."""
        if not self.complement:
            values = sorted(self.values)
            return values[0] if values else None
        low = self.gt + 1 if self.gt is not None else 0
        high = self.lt if self.lt is not None else 2**63 - 1
        for _ in range(100):
            if high <= low:
                return None
            value = str(random.randrange(low, high))
            if value not in self.values:
                return value
        return next((str(n) for n in range(low, min(high, low + len(self.values) + 1))
                     if str(n) not in self.values), None)

    def describe(self) -> str:
        """It as Karpenter's messages print a requirement (``Requirement.String``)::

            topology.kubernetes.io/zone NotIn [zone-c]
            karpenter.kwok.sh/instance-cpu Exists >2 minValues 3
        """
        if self.complement and self.values:
            op = "NotIn"
        elif self.complement:
            op = "Exists"
        else:
            op = "In" if self.values else "DoesNotExist"
        text = f"{self.key} {op}"
        if op in ("In", "NotIn"):
            values = sorted(self.values)
            if len(values) > 5:
                values = [*values[:5], f"and {len(values) - 5} others"]
            text += f" [{' '.join(values)}]"
        if self.gt is not None:
            text += f" >{self.gt}"
        if self.lt is not None:
            text += f" <{self.lt}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text

    def exprs(self) -> list[dict[str, Any]]:
        """It as node selector requirements: several when one cannot say it (``NotIn`` and bounds);
        ``minValues`` on the first."""
        out = self._exprs()
        if self.min_values is not None:
            out[0]["minValues"] = self.min_values
        return out

    def _exprs(self) -> list[dict[str, Any]]:
        if not self.complement:
            return [self.to_api()]
        out: list[dict[str, Any]] = []
        if self.values:
            out.append({"key": self.key, "operator": "NotIn", "values": sorted(self.values)})
            if not self.allows_absent and self.gt is None and self.lt is None:
                out.append({"key": self.key, "operator": "Exists"})
        if self.gt is not None:
            out.append(self._gt_api())
        if self.lt is not None:
            out.append({"key": self.key, "operator": "Lt", "values": [str(self.lt)]})
        return out or [{"key": self.key, "operator": "Exists"}]

    def _gt_api(self) -> dict[str, Any]:
        """The lower bound: ``Gte 0`` for ``Gt -1`` (what ``Gte 0`` parses to), as the CRDs refuse a
        negative value; no label value is a negative integer, so both say "an integer"."""
        if self.gt is not None and self.gt < 0:
            return {"key": self.key, "operator": "Gte", "values": ["0"]}
        return {"key": self.key, "operator": "Gt", "values": [str(self.gt)]}

    def to_api(self) -> dict[str, Any]:
        if self.gt is not None:
            return self._gt_api()
        if self.lt is not None:
            return {"key": self.key, "operator": "Lt", "values": [str(self.lt)]}
        if self.complement:
            if self.values:
                return {"key": self.key, "operator": "NotIn", "values": sorted(self.values)}
            return {"key": self.key, "operator": "Exists"}
        if not self.values:
            return {"key": self.key, "operator": "DoesNotExist"}
        return {"key": self.key, "operator": "In", "values": sorted(self.values)}


class Requirements(Mapping[str, Requirement]):
    """Requirements by key (at most one per key: several on a key are intersected)."""

    __slots__ = ("_by_key",)

    def __init__(self, items: Iterable[Requirement] = ()) -> None:
        self._by_key: dict[str, Requirement] = {}
        for r in items:
            old = self._by_key.get(r.key)
            self._by_key[r.key] = r if old is None else old.intersect(r)

    @classmethod
    def parse(cls, exprs: Iterable[Mapping[str, Any]] | None) -> Requirements:
        return cls(Requirement.parse(e["key"], e.get("operator", "In"), e.get("values") or (), e.get("minValues"))
                   for e in exprs or ())

    @classmethod
    def from_labels(cls, labels: Mapping[str, str] | None) -> Requirements:
        return cls(Requirement(k, False, frozenset((v,))) for k, v in (labels or {}).items())

    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __repr__(self) -> str:
        return f"Requirements({[r.to_api() for r in self._by_key.values()]})"

    def intersect(self, other: Requirements) -> Requirements:
        return Requirements([*self._by_key.values(), *other._by_key.values()])

    def compatible(self, other: Requirements) -> bool:
        """Whether a node can satisfy both: every key both constrain has a common
        value, and a key only ``other`` constrains is one a node may lack."""
        for key, theirs in other._by_key.items():
            mine = self._by_key.get(key)
            if mine is None:
                if not theirs.allows_absent and theirs.any():
                    return False
            elif not mine.intersect(theirs).any() and not (mine.allows_absent and theirs.allows_absent):
                return False
        return True

    def intersects(self, other: Requirements) -> bool:
        """Whether every key both constrain has a common value (a key only one
        side constrains is no conflict: e.g. a NodePool's label and an instance
        type's zones)."""
        for key, theirs in other._by_key.items():
            mine = self._by_key.get(key)
            if mine is not None and not mine.intersect(theirs).any() and not (
                    mine.allows_absent and theirs.allows_absent):
                return False
        return True

    def conflict(self, other: Requirements) -> str | None:
        """Why ``intersects(other)`` is false, in Karpenter's words (``key K, <other's> not in
        <these>``); None if it is true."""
        for key, theirs in other._by_key.items():
            mine = self._by_key.get(key)
            if mine is not None and not mine.intersect(theirs).any() and not (
                    mine.allows_absent and theirs.allows_absent):
                return f"key {key}, {theirs.describe()} not in {mine.describe()}"
        return None

    def describe(self) -> str:
        """These requirements as Karpenter's messages print them: each ``describe``d, sorted."""
        return ", ".join(sorted(r.describe() for r in self._by_key.values()))

    def undefined(self, other: Requirements, allowed: Callable[[str], bool]) -> str | None:
        """The first key ``other`` needs a value of (not ``NotIn``/``DoesNotExist``) that these
        requirements do not define and ``allowed`` does not excuse, as Karpenter's
        ``Compatible``: a custom label a NodePool never names has no known values."""
        for key, theirs in other._by_key.items():
            if key not in self._by_key and not allowed(key) and not theirs.allows_absent:
                return key
        return None

    def labels(self) -> dict[str, str]:
        """The labels these requirements pin to one value."""
        out: dict[str, str] = {}
        for key, r in self._by_key.items():
            v = r.single()
            if v is not None:
                out[key] = v
        return out

    def to_api(self) -> list[dict[str, Any]]:
        return [e for r in self._by_key.values() for e in r.exprs()]


def pod_requirement_terms(pod: Mapping[str, Any]) -> list[Requirements]:
    """The alternatives (ORed node selector terms) a node must satisfy one of for
    the pod: ``nodeSelector`` ANDed with each term of the required node affinity."""
    spec = pod.get("spec") or {}
    base = Requirements.from_labels(spec.get("nodeSelector"))
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return [base]
    return [base.intersect(Requirements.parse(t.get("matchExpressions"))) for t in terms]


def tolerates(tolerations: Iterable[Mapping[str, Any]] | None, taint: Mapping[str, Any]) -> bool:
    """Whether one of the tolerations tolerates the taint (as the scheduler's TaintToleration)."""
    for t in tolerations or ():
        effect = t.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = t.get("key") or ""
        if key and key != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False
