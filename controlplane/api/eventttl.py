"""Events expire: kube-apiserver's ``--event-ttl`` (1 hour).

Upstream's Event storage gives every write of an Event (a create, an update, a patch)
an etcd lease of ``--event-ttl`` seconds (``TTLFunc`` in
``pkg/registry/core/event/storage``), so an Event not written again for that long
is deleted by etcd itself: the Events the kubelets, the scheduler and the
controllers record (several per pod) never pile up. This store has no leases;
``EventExpiry`` plays them. It learns every write of the store from the watch
caches' feed (``observe``, as the garbage collector does, whichever process
wrote) and deletes an Event's key ``ttl`` seconds after the last write it saw of
it, if that write is still the key's latest (a delete conditioned on its revision:
a write meanwhile starts the key's time again). Its watchers see the delete as
any other. Each server process expires on its own; the conditional deletes make
the later ones a no-op, as one lease expires once.

Unlike a lease, the time is not kept in the store: an Event stored before the
server started (or written while its feed restarted) is given the whole ``ttl``
from then, so it may live up to twice as long across a restart.

The TTL is the same for every Event, so the order of the writes is the order of
the deadlines: one deque, appended at each write and popped from the front,
holds at most one entry per Event write of the last ``ttl`` seconds, and the loop
sleeps until the front's deadline (not on a polling tick: an idle server does not
wake for it).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

import store
from store.interface import Event, EventRun, EventType, prefix_end

__all__ = ["DEFAULT_EVENT_TTL", "EVENTS_PREFIX", "EventExpiry"]

log = logging.getLogger(__name__)

DEFAULT_EVENT_TTL = 3600.0  # kube-apiserver's --event-ttl
# core/v1 Events, and events.k8s.io/v1's, which are stored as them
EVENTS_PREFIX = b"/registry/events/"


class EventExpiry:
    """Deletes each Event ``ttl`` seconds after its last write (``run`` until cancelled)."""

    def __init__(self, s: Callable[[], store.Store | None], ttl: float = DEFAULT_EVENT_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = s
        self.ttl = ttl
        self._clock = clock
        # key -> revision of its latest write seen here; only keys of live Events
        self._latest: dict[bytes, int] = {}
        # (deadline, key, revision) in deadline order: a key's older writes stay until their
        # deadline, when their revision no longer matches _latest and they are dropped
        self._due: collections.deque[tuple[float, bytes, int]] = collections.deque()
        self._wake = asyncio.Event()
        self.expired = 0  # deletes this process made (tests, logs)

    def __len__(self) -> int:
        """The Events this process would expire."""
        return len(self._latest)

    def observe(self, events: Sequence[Event]) -> None:
        """A batch of store events, whoever wrote them: each Event's write starts its time."""
        if type(events) is EventRun:  # a bulk request's rewrites: Leases, Nodes' statuses, never Events
            return
        deadline = 0.0
        for ev in events:
            kv = ev.kv
            if not kv.key.startswith(EVENTS_PREFIX):
                continue
            if ev.type is EventType.DELETE:
                self._latest.pop(kv.key, None)
                continue
            if not deadline:
                deadline = self._clock() + self.ttl
            self._note(kv.key, kv.mod_revision, deadline)

    def _note(self, key: bytes, revision: int, deadline: float) -> None:
        self._latest[key] = revision
        if not self._due:
            self._wake.set()
        self._due.append((deadline, key, revision))

    async def seed(self) -> None:
        """The Events stored already, each given the whole ``ttl`` from now (a write seen
        meanwhile is newer, and kept). Also after the feed restarted (``restarted``)."""
        s = self._store()
        if s is None:
            return
        kvs, _, _ = await s.range(EVENTS_PREFIX, prefix_end(EVENTS_PREFIX))
        deadline = self._clock() + self.ttl
        for kv in kvs:
            if self._latest.get(kv.key, 0) < kv.mod_revision:
                self._note(kv.key, kv.mod_revision, deadline)

    def restarted(self) -> None:
        """The feed restarted, its events between unseen: the Events stored now are read again
        (by ``run``, which owns the store calls)."""
        self._reseed = True
        self._wake.set()

    _reseed = False

    async def run(self) -> None:
        """Expire what is due, then sleep until the next deadline or a first write."""
        await self.seed()
        while True:
            if self._reseed:
                self._reseed = False
                try:
                    await self.seed()
                except store.StoreError as e:
                    log.warning("event expiry: the Events stored could not be read again: %s", e)
            await self.expire_due()
            if self._due:
                delay = self._due[0][0] - self._clock()
                if delay > 0:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), delay)
            else:
                self._wake.clear()
                await self._wake.wait()

    async def expire_due(self) -> int:
        """Delete the Events whose time is up; returns how many this call deleted."""
        now, due, latest = self._clock(), self._due, self._latest
        deleted = 0
        while due and due[0][0] <= now:
            _, key, revision = due.popleft()
            if latest.get(key) != revision:
                continue  # written again (a later entry is queued) or deleted since
            s = self._store()
            if s is None:
                return deleted
            try:
                await s.delete(key, expected_revision=revision)
            except (store.NotFound, store.Conflict):
                pass  # deleted or written meanwhile (by a client, or another server's expiry)
            except store.StoreError as e:
                log.warning("event expiry: could not delete %s: %s", key.decode(errors="replace"), e)
                due.appendleft((now + 1.0, key, revision))  # (again in a second, not in a busy loop)
                return deleted
            else:
                deleted += 1
                self.expired += 1
            if latest.get(key) == revision:  # (a write seen while the delete waited is newer: kept)
                del latest[key]
        return deleted
