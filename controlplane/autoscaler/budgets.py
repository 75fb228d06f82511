"""Disruption budgets (``spec.disruption.budgets``): how many of a NodePool's
nodes may be disrupted at once, as Karpenter computes it.

Each active budget allows ``nodes`` of them: a count, or a percentage of the
NodePool's nodes rounded up (as a PodDisruptionBudget's maxUnavailable). A
budget with a ``schedule`` (cron, UTC) is active for ``duration`` after each
time the schedule fires; one without is always active. A budget with
``reasons`` applies only to those (Empty, Underutilized, Drifted). The most
restrictive active budget wins; nodes already being disrupted count against it::

    >>> allowed([{"nodes": "10%"}], nodes=25, reason="Empty")
    3
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .nodepool import parse_duration

__all__ = ["Cron", "active", "allowed"]

UNBOUNDED = 2**31 - 1

_ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}  # noqa: SIM905
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}  # noqa: SIM905
_NAMES: tuple[dict[str, int], ...] = ({}, {}, {}, _MONTHS, _DAYS)


class Cron:
    """A standard five-field cron schedule (minute hour day-of-month month day-of-week)."""

    def __init__(self, spec: str) -> None:
        text = _ALIASES.get(spec.strip(), spec.strip())
        fields = text.split()
        if len(fields) != 5:
            raise ValueError(f"a cron schedule has five fields, not {len(fields)}: {spec!r}")
        self.sets = [self._field(f, lo, hi, names) for f, (lo, hi), names in zip(fields, _RANGES, _NAMES, strict=True)]
        self.dom_any, self.dow_any = fields[2] == "*", fields[4] == "*"

    @staticmethod
    def _field(text: str, lo: int, hi: int, names: Mapping[str, int]) -> frozenset[int]:
        out: set[int] = set()
        for part in text.lower().split(","):
            rng, _, step_s = part.partition("/")
            step = int(step_s) if step_s else 1
            if rng in ("*", "?"):
                a, b = lo, hi
            else:
                first, _, last = rng.partition("-")
                a = names[first] if first in names else int(first)
                b = (names[last] if last in names else int(last)) if last else (hi if step_s else a)
            if hi == 6 and b == 7:
                b = 6
                out.add(0)  # 7 is Sunday too
            if not (lo <= a <= hi and lo <= b <= hi) or step < 1:
                raise ValueError(f"cron field {text!r} is outside {lo}-{hi}")
            out.update(range(a, b + 1, step))
        return frozenset(out)

    def matches(self, t: datetime) -> bool:
        minute, hour, dom, month, dow = self.sets
        if t.minute not in minute or t.hour not in hour or t.month not in month:
            return False
        dom_ok, dow_ok = t.day in dom, (t.isoweekday() % 7) in dow
        if self.dom_any or self.dow_any:  # cron: when both are restricted, either may match
            return dom_ok and dow_ok
        return dom_ok or dow_ok


def active(budget: Mapping[str, Any], now: datetime | None = None) -> bool:
    schedule, duration = budget.get("schedule"), budget.get("duration")
    if not schedule and not duration:
        return True
    now = (now or datetime.now(UTC)).astimezone(UTC)
    window = parse_duration(duration) or 0.0
    cron = Cron(str(schedule))
    # as Karpenter's IsActive: the schedule's next hit after ``now - duration`` is not after now;
    # a hit at 09:00 with a 10m duration is active from 09:00:00 until 09:10:00, exclusive
    start = now - timedelta(seconds=window)
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)  # the first whole minute after it
    while t <= now:
        if cron.matches(t):
            return True
        t += timedelta(minutes=1)
    return False


def _value(nodes: str, total: int) -> int:
    text = str(nodes).strip()
    if text.endswith("%"):
        return math.ceil(total * int(text[:-1]) / 100)
    return int(text)


def allowed(budgets: Iterable[Mapping[str, Any]], nodes: int, reason: str, now: datetime | None = None) -> int:
    """How many of ``nodes`` may be disrupted for ``reason`` now (before subtracting
    those already being disrupted). A budget that cannot be read allows none."""
    result = UNBOUNDED
    for b in budgets:
        reasons = b.get("reasons")
        if reasons and reason not in reasons:
            continue
        try:
            if not active(b, now):
                continue
            result = min(result, _value(b.get("nodes", "10%"), nodes))
        except (ValueError, KeyError):
            return 0  # fail closed, as Karpenter
    return result
