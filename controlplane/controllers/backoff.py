"""A per-key exponential backoff, as client-go's ``flowcontrol.Backoff`` (without jitter).

Each key holds its current delay and when it last moved on. ``next`` starts a key at the
initial delay, or doubles it up to the maximum; a key is in backoff while less than its
delay has passed since then. A key untouched for twice the maximum is stable again: its
next step starts over, and it is forgotten (``next`` sweeps such keys at most once a
minute, as upstream's controllers call ``GC``). Times are the caller's (``time.monotonic``),
so a test can pass its own::

    b = Backoff(1.0, 900.0)
    b.next("k", 0.0)                 # delay 1 s
    b.in_backoff("k", 0.5)           # True (0.5 s left: b.remaining("k", 0.5))
    b.next("k", 1.5)                 # delay 2 s
"""

from __future__ import annotations

__all__ = ["Backoff"]

_GC_INTERVAL = 60.0


class Backoff:
    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (delay, when it last moved on)
        self._swept = 0.0

    def _stable(self, last: float, now: float) -> bool:
        return now - last > 2 * self.maximum

    def in_backoff(self, key: str, now: float) -> bool:
        """Upstream's IsInBackOffSinceUpdate: less than the key's delay has passed since its last step."""
        return self.remaining(key, now) > 0

    def remaining(self, key: str, now: float) -> float:
        """How long the key stays in backoff (0 when it is not)."""
        entry = self._entries.get(key)
        if entry is None or self._stable(entry[1], now):
            return 0.0
        delay, last = entry
        return max(delay - (now - last), 0.0)

    def next(self, key: str, now: float) -> None:
        """One step: the initial delay for a new or stable key, else twice the last, at most the maximum."""
        entry = self._entries.get(key)
        if entry is None or self._stable(entry[1], now):
            delay = self.initial
        else:
            delay = min(entry[0] * 2, self.maximum)
        self._entries[key] = (delay, now)
        if now - self._swept > _GC_INTERVAL:
            self._swept = now
            for k in [k for k, (_, last) in self._entries.items() if self._stable(last, now)]:
                del self._entries[k]
