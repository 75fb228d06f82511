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
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import time
from collections import deque

__all__ = ["DroppedRequests", "QueueSet", "Ticket", "deal", "flow_hash"]

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

    __slots__ = ("arrived", "charged", "granted", "queue", "seats", "started")

    def __init__(self, seats: int, queue: _Queue | None, arrived: int = 0) -> None:
        self.seats = seats
        self.queue = queue
        self.arrived = arrived  # the level's count of arrivals: among queues served alike, the oldest head first
        self.granted: asyncio.Future[None] | None = None
        self.started = 0.0
        self.charged = 0.0  # the service charged at dispatch, corrected at the end


class QueueSet:
    """A limited priority level's concurrency (``limit`` seats) and queues."""

    def __init__(self, limit: int, queues: int = 0, hand_size: int = 0, queue_length_limit: int = 0) -> None:
        self.limit = limit
        self.seats_in_use = 0
        self.running = 0  # requests
        self.waiting = 0  # requests
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
        self._dispatch()

    def finish(self, ticket: Ticket) -> None:
        """A running request is done: its seats go to those waiting."""
        self.seats_in_use -= ticket.seats
        self.running -= 1
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
