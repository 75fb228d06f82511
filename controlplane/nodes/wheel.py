"""A hashed timing wheel: many timers, one tick.

The simulator keeps a timer per node (its next lease renewal) and per pod (its
next stage). An asyncio handle each would be a heap entry and an object per
timer; here a timer is an entry in a slot list, and one task wakes every
``tick`` seconds to take the due slot whole, so the cost of a tick is the
work it hands out, not the number of timers waiting.

    wheel = TimingWheel(tick=0.1, slots=128)
    wheel.schedule(when=clock() + 2.5, item=("renew", "node-1"))
    for item in wheel.advance(clock()): ...

An item scheduled more than a revolution ahead waits in its slot with the
number of revolutions left (``rounds``); ``advance`` decrements them.
Cancelling is lazy: callers keep a generation number in their item and
ignore stale ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["TimingWheel"]

T = TypeVar("T")


class TimingWheel(Generic[T]):
    def __init__(self, tick: float, slots: int, start: float) -> None:
        if tick <= 0 or slots <= 0:
            raise ValueError("tick and slots must be positive")
        self.tick = tick
        # slots[i]: [rounds_left, item] entries due when ``_cursor`` reaches i
        self._slots: list[list[tuple[int, T]]] = [[] for _ in range(slots)]
        self._cursor = 0  # the next slot to fire
        self._start = start
        self._ticks = 0  # ticks fired; the next is due at start + ticks * tick (no float drift)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def schedule(self, when: float, item: T) -> None:
        """Fire ``item`` at the first tick at or after ``when`` (at the next tick if it is past)."""
        ticks = max(0, math.ceil((when - self.next_due()) / self.tick - 1e-9))
        n = len(self._slots)
        rounds, offset = divmod(ticks, n)
        self._slots[(self._cursor + offset) % n].append((rounds, item))
        self._count += 1

    def next_due(self) -> float:
        """When the next tick is due."""
        return self._start + self._ticks * self.tick

    def advance(self, now: float) -> Iterator[T]:
        """The items of every tick due by ``now``, in time order."""
        n = len(self._slots)
        while self.next_due() <= now + 1e-9:
            slot = self._slots[self._cursor]
            if slot:
                keep: list[tuple[int, T]] = []
                for rounds, item in slot:
                    if rounds:
                        keep.append((rounds - 1, item))
                    else:
                        self._count -= 1
                        yield item
                self._slots[self._cursor] = keep
            self._cursor = (self._cursor + 1) % n
            self._ticks += 1
