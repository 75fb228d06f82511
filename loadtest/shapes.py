"""Load shapes as tables of stages.

A stage holds a user count for a while; the count is reached at ``spawn_rate``
users per second. A table is a plain tuple of stages, so a shape reads as the
traffic it makes::

    >>> table = spike(users=100, duration=60)
    >>> [(s.until, s.users) for s in table]
    [(20.0, 20), (30.0, 100), (60.0, 20)]
    >>> users_at(table, 25.0)
    (100, 80.0)

``until`` is the end of the stage in seconds since the start of the run. The
Locust side (``loadtest.locustfiles.scenario``) wraps a table in a
``LoadTestShape``; the harness reads the same table to name the phase it shows.
This module imports nothing from Locust.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SHAPES", "Stage", "phase_at", "ramp", "soak", "spike", "steady", "total_duration", "users_at"]


@dataclass(frozen=True, slots=True)
class Stage:
    until: float        # seconds since the start at which this stage ends
    users: int          # users to hold during the stage
    spawn_rate: float   # users started (or stopped) per second on the way there
    name: str = ""      # shown as the run's phase


Table = tuple[Stage, ...]


def _rate(users: int, seconds: float) -> float:
    """The spawn rate that reaches ``users`` in ``seconds`` (at least 1/s)."""
    return max(1.0, users / max(seconds, 0.001))


def steady(users: int, duration: float, warmup: float = 0.0) -> Table:
    """All users at once (or within ``warmup`` seconds), held to the end."""
    return (Stage(float(duration), users, _rate(users, warmup or 1.0), "steady"),)


def ramp(users: int, duration: float, steps: int = 4) -> Table:
    """Users grow in ``steps`` equal steps over the first 3/4 of the run; the
    last quarter holds the peak, where the latency at full load is read."""
    climb = duration * 0.75
    stages = []
    for i in range(1, steps + 1):
        n = max(1, round(users * i / steps))
        stages.append(Stage(climb * i / steps, n, _rate(users // steps or 1, climb / steps / 4), f"ramp {i}/{steps}"))
    stages.append(Stage(float(duration), users, _rate(users, 1.0), "peak"))
    return tuple(stages)


def spike(users: int, duration: float, base_fraction: float = 0.2) -> Table:
    """A base load (a fifth of ``users``), a spike to all of them for the
    middle sixth of the run, then the base again: does the server recover?"""
    base = max(1, round(users * base_fraction))
    t1, t2 = duration / 3, duration / 2
    return (
        Stage(t1, base, _rate(base, 1.0), "base"),
        Stage(t2, users, _rate(users - base, 1.0), "spike"),
        Stage(float(duration), base, _rate(users, 1.0), "recovery"),
    )


def soak(users: int, duration: float) -> Table:
    """A gentle ramp (a tenth of the run) to a long steady plateau: leaks and
    slow growth in latency show over time, not under peaks."""
    warm = duration / 10
    return (
        Stage(warm, users, _rate(users, warm), "warm-up"),
        Stage(float(duration), users, _rate(users, 1.0), "soak"),
    )


SHAPES = {"steady": steady, "ramp": ramp, "spike": spike, "soak": soak}


def users_at(table: Table, elapsed: float) -> tuple[int, float] | None:
    """The (users, spawn_rate) to hold at ``elapsed`` seconds; None once the table ends."""
    for stage in table:
        if elapsed < stage.until:
            return stage.users, stage.spawn_rate
    return None


def phase_at(table: Table, elapsed: float) -> str:
    for stage in table:
        if elapsed < stage.until:
            return stage.name
    return "done"


def total_duration(table: Table) -> float:
    return table[-1].until if table else 0.0
