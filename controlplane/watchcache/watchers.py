"""Watcher fan-out: who gets an event, at a cost that does not grow with the
watchers that do not want it.

A watcher whose filter pins an indexed field to a value (``Filter.index_hint``:
a kubelet's ``spec.nodeName=node-7``, a single object's ``metadata.name``, a
namespace) is filed under that (field, value); the others are "unhinted" and
see every event. An event is offered to the unhinted watchers and to those
filed under its old or new version's values, so 10,000 kubelets cost an event
two dictionary lookups, not 10,000 filter evaluations.

Each watcher has a bounded buffer. One that falls ``capacity`` events behind is
closed at once (its buffer dropped): the client resumes from the last revision
it received, from the event window, and the others never wait for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from ..registry.attrs import INDEXED_FIELDS, Filter, field_names
from .entry import ATTRS, CacheEvent

__all__ = ["INITIAL_SLACK", "Watcher", "WatcherIndex"]

INITIAL_SLACK = 16


class Watcher:
    __slots__ = ("_on_close", "buffer", "capacity", "closed", "filter", "hint", "hint_at", "initial", "reason",
                 "sink", "start_revision", "wakeup")

    def __init__(self, match: Filter, start_revision: int, capacity: int) -> None:
        self.filter = match
        self.hint = match.index_hint()
        self.hint_at = match.position_of(self.hint) if self.hint is not None else -1
        self.start_revision = start_revision  # only events after it are this watcher's
        self.capacity = capacity
        self.buffer: deque[tuple[CacheEvent, str]] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.reason = ""
        # while its stream is still sending the initial state, a watcher may hold
        # INITIAL_SLACK times its capacity: the events of a long initial walk
        self.initial = False
        self._on_close: Callable[[Watcher], None] | None = None
        # set by the watch's stream while it waits with everything before written: it takes the
        # buffer now, in the offer's turn of the loop, and says whether it did (else: wakeup)
        self.sink: Callable[[], bool] | None = None

    def kind(self, ev: CacheEvent) -> str | None:
        """The event's type as this watcher sees it, or None if it is not interested."""
        f = self.filter
        if f.everything:
            return ev.type
        if ev.type == "DELETED":
            return "DELETED" if f.matches(ev.obj[ATTRS]) else None
        now = f.matches(ev.obj[ATTRS])
        was = ev.prev is not None and f.matches(ev.prev[ATTRS])
        if now:
            return "MODIFIED" if was else "ADDED"
        return "DELETED" if was else None  # leaving the selector

    def seen(self, events: list[CacheEvent]) -> list[tuple[CacheEvent, str]]:
        """The events of ``events`` this watcher sees, with their types as it sees them.
        With a hint, the others are skipped by one comparison each (an old or new
        version without the hinted value cannot match), not a filter evaluation: a
        kubelet resuming its watch walks the whole cluster's backlog."""
        if self.hint is not None:
            at, value = self.hint_at, self.hint[1]
            events = [ev for ev in events if ev.obj[3][1][at] == value  # 3: ATTRS
                      or ((prev := ev.prev) is not None and prev[3][1][at] == value)]
        return [(ev, kind) for ev in events if (kind := self.kind(ev)) is not None]

    def offer(self, ev: CacheEvent) -> None:
        if self.closed or ev.revision <= self.start_revision:
            return
        kind = self.kind(ev)
        if kind is None:
            return
        if len(self.buffer) >= (self.capacity * INITIAL_SLACK if self.initial else self.capacity):
            self.close("the watcher fell too far behind")
            return
        self.buffer.append((ev, kind))
        self._wake()

    def offer_many(self, events: list[CacheEvent], everything: list[tuple[CacheEvent, str]]) -> None:
        """``offer`` each of ``events`` (in revision order), with one capacity check and one
        wake-up for them all; ``everything`` is them paired with their own types, what a
        watcher without a filter sees, made once for all such watchers of the batch."""
        if self.closed:
            return
        start = self.start_revision
        if self.filter.everything:
            new = everything if events[0].revision > start else [p for p in everything if p[0].revision > start]
        else:
            new = [(ev, kind) for ev in events if ev.revision > start and (kind := self.kind(ev)) is not None]
        if not new:
            return
        # as one offer an event: the watcher is closed once an event finds its buffer full
        if len(self.buffer) + len(new) > (self.capacity * INITIAL_SLACK if self.initial else self.capacity):
            self.close("the watcher fell too far behind")
            return
        self.buffer.extend(new)
        self._wake()

    def _wake(self) -> None:
        """The buffer to its stream: written now by the sink if it can, else at the stream task's
        next turn (a turn of a saturated loop is tens of milliseconds, every event's share)."""
        sink = self.sink
        if sink is None or not sink():
            self.wakeup.set()

    def close(self, reason: str = "") -> None:
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        self.buffer.clear()
        self.wakeup.set()
        if self._on_close is not None:
            self._on_close(self)


class WatcherIndex:
    def __init__(self, plural: str) -> None:
        names = field_names(plural)
        # the indexed fields this type has, with their place in an entry's attrs
        self._positions = [(f, names.index(f)) for f in INDEXED_FIELDS if f in names]
        self._unhinted: set[Watcher] = set()
        self._hinted: dict[tuple[str, str], set[Watcher]] = {}
        self._fields: dict[str, int] = {}  # indexed field -> hinted watchers on it

    def __len__(self) -> int:
        return len(self._unhinted) + sum(self._fields.values())

    def interested(self, namespace: str, name: str) -> int:
        """The watchers a write of an object ``name`` in ``namespace`` may wake, as upstream's
        WatchTracker counts them for a write's cost: those of every object (the unhinted: no
        namespace, name or node pinned; those of other field selectors too), those of its
        namespace, of its name, and of pods without a node. Create has no name yet (upstream's
        count neither)."""
        hinted = self._hinted
        n = len(self._unhinted)
        if namespace:
            n += len(hinted.get(("metadata.namespace", namespace), ()))
        if name:
            n += len(hinted.get(("metadata.name", name), ()))
        return n + len(hinted.get(("spec.nodeName", ""), ()))

    def add(self, w: Watcher) -> None:
        w._on_close = self.remove
        if w.hint is None:
            self._unhinted.add(w)
            return
        self._hinted.setdefault(w.hint, set()).add(w)
        self._fields[w.hint[0]] = self._fields.get(w.hint[0], 0) + 1

    def remove(self, w: Watcher) -> None:
        if w.hint is None:
            self._unhinted.discard(w)
            return
        bucket = self._hinted.get(w.hint)
        if bucket is None or w not in bucket:
            return
        bucket.discard(w)
        if not bucket:
            del self._hinted[w.hint]
        self._fields[w.hint[0]] -= 1
        if not self._fields[w.hint[0]]:
            del self._fields[w.hint[0]]

    def dispatch_all(self, events: list[CacheEvent]) -> None:
        """``dispatch`` each of ``events``, in order (nothing to do without watchers): each
        unhinted watcher is offered them all at once (``Watcher.offer_many``: a hundred
        informers of every pod cost a batch a hundred offers, not a hundred an event)."""
        if not events:
            return
        if self._unhinted:
            everything = [(ev, ev.type) for ev in events]
            for w in tuple(self._unhinted):
                w.offer_many(events, everything)
        if self._fields:
            for ev in events:
                self._dispatch_hinted(ev)

    def _dispatch_hinted(self, ev: CacheEvent) -> None:
        """Offer ``ev`` to the watchers filed under its new or old version's values."""
        new = ev.obj[ATTRS][1]
        old = ev.prev[ATTRS][1] if ev.prev is not None else None
        for field, pos in self._positions:
            if field not in self._fields:
                continue
            value = new[pos]
            bucket = self._hinted.get((field, value))
            if bucket:
                for w in tuple(bucket):
                    w.offer(ev)
            if old is not None:
                before = old[pos]
                if before != value:
                    bucket = self._hinted.get((field, before))
                    if bucket:
                        for w in tuple(bucket):
                            w.offer(ev)

    def close_all(self, reason: str) -> None:
        for w in [*self._unhinted, *(w for b in self._hinted.values() for w in b)]:
            w.close(reason)
