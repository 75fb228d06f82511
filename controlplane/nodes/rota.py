"""The heartbeat rota: when each node's Lease falls due, with nothing allocated per renewal.

A kubelet renews its Lease every ``interval``. The simulator cuts the interval
into ``slots`` equal parts and seats each node in one of them, by a hash of its
name, so 100,000 nodes are 10,000 renewals a second in even batches. Each time
a part comes round, its seats are due together, at one time:

    rota = HeartbeatRota(interval=10.0, slots=20, start=clock())
    rota.add("node-1")                   # its slot; renewed at start + slot * 0.5 + k * 10
    for due, names in rota.advance(clock()): ...

A timer per node on the timing wheel (``wheel``) cost three tuples a renewal
(its entry, its item, the due pair), each kept alive for seconds: at 10,000
renewals a second the cyclic collector's young generations walked 30,000
objects a second for them. Here the seats are fixed; a due slot is one list.

Invariant: a node is seated in at most one slot, the one ``slot_of`` gives;
``advance`` yields each slot time up to ``now`` at most once, in time order,
and every slot at most once a call: a loop that stalled for part of an interval
gets the slot times it overslept, each with its own due time (so the lag it
measures includes the stall); one that stalled longer (or started late, after
the nodes' set-up) gets each slot once, at its time in the last interval, as a
kubelet whose renew loop stalled renews once, not once per interval missed.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = ["HeartbeatRota"]


class HeartbeatRota:
    def __init__(self, interval: float, slots: int, start: float) -> None:
        if interval <= 0 or slots <= 0:
            raise ValueError("interval and slots must be positive")
        self.interval = interval
        self.slots = slots
        self._start = start
        # _seats[i]: the names in slot i (a dict for O(1) removal, in seating order)
        self._seats: list[dict[str, None]] = [{} for _ in range(slots)]
        self._fired = 0  # slot times handed out; the next is due at start + fired * interval / slots

    def __len__(self) -> int:
        return sum(len(s) for s in self._seats)

    def __contains__(self, name: str) -> bool:
        return name in self._seats[self.slot_of(name)]

    def slot_of(self, name: str) -> int:
        return zlib.crc32(name.encode()) % self.slots

    def offset(self, name: str) -> float:
        """Where in each interval ``name``'s renewals fall, in seconds from the interval's start."""
        return self.slot_of(name) * self.interval / self.slots

    def add(self, name: str) -> None:
        self._seats[self.slot_of(name)][name] = None

    def discard(self, name: str) -> None:
        self._seats[self.slot_of(name)].pop(name, None)

    def next_due(self) -> float:
        return self._start + self._fired * self.interval / self.slots

    def advance(self, now: float) -> Iterator[tuple[float, list[str]]]:
        """``(due, names)`` for each slot time due by ``now`` whose slot has anyone seated."""
        slots = self.slots
        behind = int((now + 1e-9 - self.next_due()) * slots / self.interval) + 1  # slot times due
        if behind > slots:
            self._fired += behind - slots
        while (due := self.next_due()) <= now + 1e-9:
            seats = self._seats[self._fired % slots]
            self._fired += 1
            if seats:
                yield due, list(seats)
