"""Cron schedules (registry/cron.py), as robfig/cron's standard parser reads them for CronJobs."""

from __future__ import annotations

import datetime as dt

import pytest

from controlplane.registry.cron import CronError, parse

T = dt.datetime(2026, 12, 1, 1, 20)  # a Tuesday


@pytest.mark.parametrize(("schedule", "after", "expected"), [
    ("*/5 * * * *", T, dt.datetime(2026, 12, 1, 1, 25)),
    ("*/5 * * * *", dt.datetime(2026, 12, 1, 1, 25, 30), dt.datetime(2026, 12, 1, 1, 30)),  # strictly after
    ("0 3 * * mon-fri", T, dt.datetime(2026, 12, 1, 3, 0)),
    ("0 3 * * sat,sun", T, dt.datetime(2026, 12, 5, 3, 0)),
    ("@hourly", T, dt.datetime(2026, 12, 1, 2, 0)),
    ("@daily", T, dt.datetime(2026, 12, 2, 0, 0)),
    ("@weekly", T, dt.datetime(2026, 12, 6, 0, 0)),
    ("@monthly", T, dt.datetime(2027, 1, 1, 0, 0)),
    ("@yearly", T, dt.datetime(2027, 1, 1, 0, 0)),
    ("30 2 15 * 0", T, dt.datetime(2026, 12, 6, 2, 30)),  # both days restricted: the 15th OR a Sunday
    ("30 2 15 * *", T, dt.datetime(2026, 12, 15, 2, 30)),
    ("0 0 29 feb *", T, dt.datetime(2028, 2, 29, 0, 0)),
    ("15,45 */2 * * *", T, dt.datetime(2026, 12, 1, 2, 15)),
    ("10-20/5 1 * * *", T, dt.datetime(2026, 12, 2, 1, 10)),
    ("5/20 * * * ?", T, dt.datetime(2026, 12, 1, 1, 25)),  # N/step: N to the end
    ("0 0 * JAN *", T, dt.datetime(2027, 1, 1, 0, 0)),
])
def test_next_times(schedule: str, after: dt.datetime, expected: dt.datetime) -> None:
    assert parse(schedule).next_after(after) == expected


def test_a_schedule_that_never_fires_has_no_next_time() -> None:
    assert parse("0 0 30 2 *").next_after(T) is None


@pytest.mark.parametrize("schedule", ["", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
                                      "* * * 13 *", "* * * * 7", "*/0 * * * *", "5-1 * * * *", "@often",
                                      "x * * * *", "1,,2 * * * *"])
def test_bad_schedules(schedule: str) -> None:
    with pytest.raises(CronError):
        parse(schedule)
