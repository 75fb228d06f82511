"""Cron schedules as a CronJob's ``spec.schedule`` takes them (upstream parses them with
robfig/cron's standard parser): five fields, minute hour day-of-month month day-of-week,
each ``*``, ``?`` (as ``*``), a value, a range ``a-b``, a step ``*/n`` or ``a-b/n`` or
``a/n``, or a comma list of those; month and day names (``jan``, ``mon``; Sunday is
0, and 7 is refused as robfig refuses it); and the descriptors ``@yearly``/``@annually``, ``@monthly``,
``@weekly``, ``@daily``/``@midnight``, ``@hourly``. When both day fields are
restricted, a day matching either is a match (cron's rule); a field is
unrestricted when it is ``*`` or ``?`` (with no step above 1).

Times are naive wall-clock minutes in the schedule's zone; the caller converts.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

__all__ = ["CronError", "Schedule", "parse"]

_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# field: (low, high, names)
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _DAYS))
_LIMIT_YEARS = 5  # a schedule that never fires (Feb 30) is reported rather than searched forever


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # the day-of-month field is *
    any_weekday: bool  # the day-of-week field is *

    def _day_matches(self, d: datetime.date) -> bool:
        if d.month not in self.months:
            return False
        dom, dow = d.day in self.days, (d.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next_after(self, t: datetime.datetime) -> datetime.datetime | None:
        """The first scheduled minute strictly after ``t`` (seconds dropped), or None."""
        t = t.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        day = t.date()
        end = day + datetime.timedelta(days=366 * _LIMIT_YEARS)
        first = True
        while day <= end:
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    if first and hour < t.hour:
                        continue
                    for minute in sorted(self.minutes):
                        if first and hour == t.hour and minute < t.minute:
                            continue
                        return datetime.datetime.combine(day, datetime.time(hour, minute), tzinfo=t.tzinfo)
            day += datetime.timedelta(days=1)
            first = False
        return None


def _field(text: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False

    def number(s: str) -> int:
        s = s.lower()
        if s in names:
            return names[s]
        if not s.isdigit():
            raise CronError(f"{s!r} is not a number")
        return int(s)

    for part in text.split(","):
        if not part:
            raise CronError("an empty list element")
        base, _, step_text = part.partition("/")
        step = number(step_text) if step_text else 1
        if step < 1:
            raise CronError(f"step {step} is below 1")
        if base in ("*", "?"):
            start, stop = low, high
            star = star or step == 1
        elif "-" in base:
            a, _, b = base.partition("-")
            start, stop = number(a), number(b)
        else:
            start = number(base)
            stop = high if step_text else start
        if not low <= start <= high or not low <= stop <= high or start > stop:
            raise CronError(f"{part!r} is outside {low}-{high}")
        values.update(range(start, stop + 1, step))
    return frozenset(values), star


def parse(text: str) -> Schedule:
    spec = text.strip()
    spec = _DESCRIPTORS.get(spec.lower(), spec)
    if spec.startswith("@"):
        raise CronError(f"unrecognized descriptor: {text}")
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {text}")
    parsed = [_field(f, low, high, names) for f, (low, high, names) in zip(fields, _FIELDS, strict=True)]
    weekdays = parsed[4][0]
    return Schedule(parsed[0][0], parsed[1][0], parsed[2][0], parsed[3][0], weekdays,
                    any_day=parsed[2][1], any_weekday=parsed[4][1])
