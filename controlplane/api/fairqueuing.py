"""One priority level's seats and queues: shuffle sharding, fair queuing, rejection.

Our own take on upstream's ``fairqueuing/queueset`` (``queueset.go``) and
``shufflesharding`` packages, on one event loop (no locks):

- A request asks for ``seats`` (its width). It runs at once when the level has that
  many seats free and no request waits; otherwise it waits in a queue. A request wider
  than the whole level runs only when nothing else does (upstream's rule, so it is not
  starved forever).
- ``Reject`` levels (no queues) answer ``concurrency-limit`` when the seats are taken.
- ``Queue`` levels deal each flow (the FlowSchema's name and the request's distinguisher,
  hashed) a hand of ``hand_size`` queues out of ``queues`` (shuffle sharding) and put the
  request in the hand's shortest queue (by the seats waiting and running there); a queue
  already holding ``queue_length_limit`` requests answers ``queue-full``.
- Seats freed go to the head of the queue that has had the least service (seat-seconds,
  charged at dispatch by the level's mean service time and corrected at the end; a queue
  that had nobody waiting joins at the least of those that have; among equals, the oldest
  head), so a flow that floods its queues does not starve the others; a head that does not
  fit waits for seats (no request overtakes it).
- A request that waits longer than its wait limit leaves its queue (``time-out``); one
  whose client goes away, too (``cancelled``).
- The level's seat demand (seats in use plus seats waiting) is integrated over time
  (``Integrator``, upstream's ``fairqueuing/integrator.go``): its high watermark, mean and
  deviation over each adjustment period are what borrowing between levels reads
  (``api/flowcontrol.py``). ``set_limit`` moves the level's limit (its current
  concurrency limit) and dispatches what then fits.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import math
import time
from collections import deque

__all__ = ["DemandStats", "DroppedRequests", "Integrator", "Peak", "QueueSet", "Ticket", "deal", "flow_hash"]

_HANDS_KEPT = 65536  # flows whose hands are kept (all dealt anew when full)
MIN_SERVICE = 0.001  # seconds: the least service a request is charged (so instant ones count too)


def flow_hash(schema: str, distinguisher: str) -> int:
    """A flow's 64-bit identity: the first 8 bytes, little-endian, of the SHA-256 of the schema's
    name, a NUL and the distinguisher (upstream's ``hashFlowID``)."""
    digest = hashlib.sha256(schema.encode() + b"\x00" + distinguisher.encode()).digest()
    return int.from_bytes(digest[:8], "little")


def deal(value: int, deck: int, hand: int) -> list[int]:
    """``hand`` distinct queue indexes out of ``deck``, drawn by ``value`` read as a number of
    mixed radix (deck, deck-1, ...): the i-th digit picks among the cards not dealt yet."""
    dealt: list[int] = []  # sorted
    cards: list[int] = []
    for i in range(min(hand, deck)):
        value, pick = divmod(value, deck - i)
        for card in dealt:  # the pick-th card not dealt yet
            if card <= pick:
                pick += 1
            else:
                break
        bisect.insort(dealt, pick)
        cards.append(pick)
    return cards


class DemandStats:
    """What an ``Integrator`` saw over one period: its length (s), time-weighted mean and
    standard deviation, and the highest value."""

    __slots__ = ("average", "deviation", "duration", "high")

    def __init__(self, duration: float, average: float, deviation: float, high: float) -> None:
        self.duration, self.average, self.deviation, self.high = duration, average, deviation, high


class Integrator:
    """A value's moments over time (upstream's ``Integrator``): ``add`` or ``set`` it as it
    changes; ``reset`` ends the period and gives its ``DemandStats``. Cheap enough for every
    request: a clock read and a few additions; nothing happens between changes."""

    __slots__ = ("high", "ix", "ixx", "last", "start", "x")

    def __init__(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.x = 0.0
        self.high = 0.0
        self.ix = 0.0  # the integral of x dt over the period so far
        self.ixx = 0.0  # the integral of x*x dt
        self.start = now
        self.last = now  # when x last changed (or was read)

    def add(self, delta: float) -> None:
        now = time.monotonic()
        x = self.x
        dt = now - self.last
        self.ix += x * dt
        self.ixx += x * x * dt
        self.last = now
        x += delta
        self.x = x
        if x > self.high:
            self.high = x

    def set(self, value: float) -> None:
        self.add(value - self.x)

    def reset(self, now: float | None = None) -> DemandStats:
        """The period's statistics; a new period starts now, at the present value."""
        now = time.monotonic() if now is None else now
        x = self.x
        dt = max(now - self.last, 0.0)
        ix, ixx = self.ix + x * dt, self.ixx + x * x * dt
        duration = max(now - self.start, 0.0)
        if duration > 0:
            average = ix / duration
            variance = ixx / duration - average * average
            deviation = math.sqrt(variance) if variance > 0 else 0.0
        else:
            average = deviation = math.nan
        stats = DemandStats(duration, average, deviation, self.high)
        self.ix = self.ixx = 0.0
        self.start = self.last = now
        self.high = x
        return stats


class Peak:
    """A value's highest over a period, without its moments (no clock read): the exempt
    level's seat demand, on the hot path of every exempt request. Its ``reset`` gives a
    period of no length: the highest only (upstream's exempt limit reads no more)."""

    __slots__ = ("high", "x")

    def __init__(self) -> None:
        self.x = 0
        self.high = 0

    def add(self, delta: int) -> None:
        x = self.x + delta
        self.x = x
        if x > self.high:
            self.high = x

    def reset(self, now: float | None = None) -> DemandStats:
        stats = DemandStats(0.0, math.nan, math.nan, float(self.high))
        self.high = self.x
        return stats


class _Queue:
    __slots__ = ("running", "running_seats", "served", "tickets", "waiting_seats")

    def __init__(self) -> None:
        self.tickets: deque[Ticket] = deque()
        self.waiting_seats = 0
        self.running = 0
        self.running_seats = 0
        self.served = 0.0  # seat-seconds of service, in the level's virtual time


class Ticket:
    """A request's place at a level: ``granted`` is set once it may run."""

    __slots__ = ("about", "arrived", "charged", "granted", "queue", "seats", "started")

    def __init__(self, seats: int, queue: _Queue | None, arrived: int = 0) -> None:
        self.seats = seats
        self.queue = queue
        self.arrived = arrived  # the level's count of arrivals: among queues served alike, the oldest head first
        self.granted: asyncio.Future[None] | None = None
        self.started = 0.0
        self.charged = 0.0  # the service charged at dispatch, corrected at the end
        self.about: object = None  # the caller's description of a waiting request (the debug dump's)


class QueueSet:
    """A limited priority level's concurrency (``limit`` seats) and queues."""

    def __init__(self, limit: int, queues: int = 0, hand_size: int = 0, queue_length_limit: int = 0) -> None:
        self.limit = limit
        self.seats_in_use = 0
        self.running = 0  # requests
        self.waiting = 0  # requests
        self.seats_waiting = 0
        self.demand = Integrator()  # seats in use + seats waiting, over time (for borrowing)
        self._queues: list[_Queue] = []
        self.hand_size = hand_size
        self.queue_length_limit = queue_length_limit
        self._mean = MIN_SERVICE  # the level's mean service time (s), for the charge at dispatch
        self._arrivals = 0
        self._orphans: deque[Ticket] = deque()  # those waiting when the level stopped queuing
        self._hands: dict[int, tuple[_Queue, ...]] = {}  # flow -> its queues, dealt once per configuration
        self.configure(limit, queues, hand_size, queue_length_limit)

    def configure(self, limit: int, queues: int, hand_size: int, queue_length_limit: int) -> None:
        """A new configuration: the waiting requests keep their order; with another number of
        queues they are spread over the new queues as they arrived (by their old queue's index)."""
        self.limit, self.hand_size, self.queue_length_limit = limit, hand_size, queue_length_limit
        self._hands = {}
        if queues != len(self._queues):
            old = self._queues
            self._queues = [_Queue() for _ in range(queues)]
            for i, q in enumerate(old):
                if not self._queues:
                    for t in q.tickets:  # now a Reject level: those waiting are let run as seats free
                        self._orphans.append(t)
                    continue
                into = self._queues[i % queues]
                into.tickets.extend(q.tickets)
                into.waiting_seats += q.waiting_seats
                for t in q.tickets:
                    t.queue = into
        self._dispatch()

    def set_limit(self, limit: int) -> None:
        """A new current concurrency limit (borrowing moved it): what now fits runs."""
        self.limit = limit
        if self.waiting:
            self._dispatch()

    @property
    def queues(self) -> int:
        return len(self._queues)

    @property
    def mean(self) -> float:
        """The level's mean service time (s)."""
        return self._mean

    def dump(self) -> list[tuple[int, int, int, float, int]]:
        """Each queue's (waiting requests, running requests, seats in use, service had, seats
        waiting): the debug endpoints'."""
        return [(len(q.tickets), q.running, q.running_seats, q.served, q.waiting_seats) for q in self._queues]

    def waiting_tickets(self) -> list[list[Ticket]]:
        """Each queue's waiting requests, in order (the debug dump's)."""
        return [list(q.tickets) for q in self._queues]

    def fits(self, seats: int) -> bool:
        if seats > self.limit:
            return self.running == 0
        return self.seats_in_use + seats <= self.limit

    def start(self, seats: int, flow: int) -> Ticket | str:
        """A ticket (its ``granted`` None if it runs now, else a future to await), or the reason
        the request is rejected: ``concurrency-limit`` or ``queue-full``."""
        if not self._queues:
            if not self.fits(seats):
                return "concurrency-limit"
            ticket = Ticket(seats, None)
            self._run(ticket)
            self.demand.add(seats)
            return ticket
        hand = self._hands.get(flow)
        if hand is None:
            if len(self._hands) >= _HANDS_KEPT:
                self._hands.clear()
            hand = self._hands[flow] = tuple(self._queues[i] for i in deal(flow, len(self._queues), self.hand_size))
        queue = hand[0]
        least = queue.waiting_seats + queue.running_seats
        for q in hand:
            if q.waiting_seats + q.running_seats < least:
                queue, least = q, q.waiting_seats + q.running_seats
        if self.waiting == 0 and self.fits(seats):  # (the common case: no wait)
            ticket = Ticket(seats, queue)
            self._run(ticket)
            self.demand.add(seats)
            return ticket
        if len(queue.tickets) >= self.queue_length_limit:
            return "queue-full"
        if not queue.tickets:  # a queue that had none waiting starts level with those that have
            busy = [q.served for q in self._queues if q.tickets]
            if busy:
                queue.served = max(queue.served, min(busy))
        self._arrivals += 1
        ticket = Ticket(seats, queue, self._arrivals)
        ticket.granted = asyncio.get_running_loop().create_future()
        queue.tickets.append(ticket)
        queue.waiting_seats += seats
        self.waiting += 1
        self.seats_waiting += seats
        self.demand.add(seats)
        self._dispatch()
        return ticket

    def _run(self, ticket: Ticket) -> None:
        self.seats_in_use += ticket.seats
        self.running += 1
        ticket.started = time.perf_counter()
        q = ticket.queue
        if q is not None:
            q.running += 1
            q.running_seats += ticket.seats
            ticket.charged = ticket.seats * self._mean
            q.served += ticket.charged

    def _dispatch(self) -> None:
        while self._orphans and self.fits(self._orphans[0].seats):
            self._grant(self._orphans.popleft())
        while self.waiting:
            queue = min((q for q in self._queues if q.tickets), key=lambda q: (q.served, q.tickets[0].arrived))
            head = queue.tickets[0]
            if not self.fits(head.seats):
                return
            queue.tickets.popleft()
            queue.waiting_seats -= head.seats
            self._grant(head)

    def _grant(self, ticket: Ticket) -> None:
        self.waiting -= 1
        self.seats_waiting -= ticket.seats
        self._run(ticket)
        if ticket.granted is not None and not ticket.granted.done():
            ticket.granted.set_result(None)

    def withdraw(self, ticket: Ticket) -> None:
        """A waiting request leaves (its wait timed out, or its client went away)."""
        q = ticket.queue
        if q is not None and ticket in q.tickets:
            q.tickets.remove(ticket)
            q.waiting_seats -= ticket.seats
        elif ticket in self._orphans:
            self._orphans.remove(ticket)
        else:
            return
        self.waiting -= 1
        self.seats_waiting -= ticket.seats
        self.demand.add(-ticket.seats)
        self._dispatch()

    def finish(self, ticket: Ticket) -> None:
        """A running request is done: its seats go to those waiting."""
        self.seats_in_use -= ticket.seats
        self.running -= 1
        self.demand.add(-ticket.seats)
        took = max(time.perf_counter() - ticket.started, MIN_SERVICE)
        self._mean += (took - self._mean) * 0.05
        q = ticket.queue
        if q is not None:
            q.running -= 1
            q.running_seats -= ticket.seats
            q.served += ticket.seats * took - ticket.charged
        if self.waiting:
            self._dispatch()


class DroppedRequests:
    """The ``Retry-After`` a level's rejections suggest, as upstream's dropped-requests tracker
    computes it: 1 s at first; doubled (to 32 s at most, and at most once per its own value in
    seconds) when the rejections of the last ``retry-after`` seconds number at least three times
    it; one less when they number fewer than it. Reconsidered when a rejection comes in a new
    second."""

    MAX = 32

    def __init__(self) -> None:
        self.retry_after = 1
        self._second = 0
        self._count = 0
        self._history: deque[tuple[int, int]] = deque()  # (second, rejections)
        self._raised_at = 0

    def record(self, now: float | None = None) -> None:
        second = int(time.time() if now is None else now)
        if second == self._second:
            self._count += 1
            return
        if self._count:
            self._history.append((self._second, self._count))
        while self._history and second - self._history[0][0] > self.MAX:
            self._history.popleft()
        self._second, self._count = second, 1
        recent = sum(n for s, n in self._history if second - s <= self.retry_after and s < second)
        if second - self._raised_at >= self.retry_after and recent >= 3 * self.retry_after:
            self.retry_after = min(self.retry_after * 2, self.MAX)
            self._raised_at = second
        elif recent < self.retry_after and self.retry_after > 1:
            self.retry_after -= 1
