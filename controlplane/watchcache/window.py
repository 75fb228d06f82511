"""The event window: the recent events of one resource, for resuming watches.

Invariant: every event with ``revision > start`` that the cache applied is in
the window, in revision order. A watch from revision R can resume from the
window exactly when ``R >= start``; older, the history is gone (410, or the
store's own history). The window is bounded by count, by the bytes its events
keep alive and by age; evicting the oldest event moves ``start`` up to it.

A watcher pinned to one value of an indexed field (a kubelet's
``spec.nodeName``) resuming over a long backlog asks only for the events whose
new or old version has that value there (``since(..., at=, value=)``). The
first such ask over ``INDEX_FROM`` events or more indexes the window by that
attrs position (value -> its events, in revision order); from then on every
event added is filed too. Invariant: a position's index holds, for each value,
every event in the window whose new or old version has the value there, in
revision order (and maybe evicted ones, before ``start``, until the next
compaction trims them).
"""

from __future__ import annotations

import time
from bisect import bisect_right

from .entry import ATTRS, CacheEvent

__all__ = ["INDEX_FROM", "LINES_KEPT", "EventWindow"]

LINES_KEPT = 2_048

# A hinted resume over fewer events walks them (one comparison each, Watcher.seen):
# an index pays for itself only once backlogs this long are asked for.
INDEX_FROM = 4_096

Index = dict[str, list[CacheEvent]]


def _file(index: Index, at: int, events: list[CacheEvent] | tuple[CacheEvent, ...]) -> None:
    """File ``events`` (in revision order) under their new and old versions' values at ``at``."""
    for ev in events:
        value = ev.obj[ATTRS][1][at]
        bucket = index.get(value)
        if bucket is None:
            index[value] = [ev]
        else:
            bucket.append(ev)
        prev = ev.prev
        if prev is not None and (before := prev[ATTRS][1][at]) != value:
            bucket = index.get(before)
            if bucket is None:
                index[before] = [ev]
            else:
                bucket.append(ev)


def _revision(ev: CacheEvent) -> int:
    return ev.revision


class EventWindow:
    def __init__(self, start: int, max_events: int = 100_000, max_bytes: int = 256 << 20,
                 max_seconds: float = 300.0) -> None:
        self.start = start
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self._events: list[CacheEvent] = []
        self._head = 0      # _events[:_head] are evicted (compacted away now and then)
        self._bytes = 0
        self.added_bytes = 0  # the sizes of every event ever added: what a span of writes kept alive
        self._indexes: dict[int, Index] = {}  # attrs position -> its index (see the module's doc)

    def __len__(self) -> int:
        return len(self._events) - self._head

    @property
    def bytes(self) -> int:
        return self._bytes

    def append(self, event: CacheEvent) -> None:
        self.extend((event,))

    def extend(self, added: tuple[CacheEvent, ...] | list[CacheEvent]) -> None:
        """Add events newer than every event here, in revision order; then evict what is
        past the bounds (once for them all)."""
        events = self._events
        events.extend(added)
        for at, index in self._indexes.items():
            _file(index, at, added)
        size = sum([event.size for event in added])
        self._bytes += size
        self.added_bytes += size
        # Only the newest LINES_KEPT events keep their watch lines (CacheEvent.item): live
        # watchers drain within a few events; a window of 100,000 pods' lines was ~500 MB.
        # These are the events that the ones added pushed out of the newest LINES_KEPT.
        end = len(events) - LINES_KEPT
        for i in range(max(self._head, end - len(added)), end):
            events[i].forget_lines()
        self._evict(time.perf_counter())

    def _evict(self, now: float) -> None:
        events, head = self._events, self._head
        over = len(events) - head - self.max_events
        if over > 0:  # the count bound in one step: a full window evicts as many as it took in
            gone = events[head:head + over]
            self._bytes -= sum([event.size for event in gone])
            head += over
            self.start = gone[-1].revision
        while len(events) - head > 0:  # then the bytes and age bounds (the count now holds)
            oldest = events[head]
            if self._bytes <= self.max_bytes and now - oldest.received <= self.max_seconds:
                break
            head += 1
            self._bytes -= oldest.size
            self.start = oldest.revision
        self._head = head
        if self._head > 1024 and self._head * 2 > len(events):
            del events[:self._head]
            self._head = 0
            self._trim_indexes()

    def _trim_indexes(self) -> None:
        """Drop the evicted events from the indexes, and the values left with none."""
        start = self.start
        for index in self._indexes.values():
            for value, bucket in list(index.items()):
                if bucket[-1].revision <= start:
                    del index[value]
                elif bucket[0].revision <= start:
                    del bucket[:bisect_right(bucket, start, key=_revision)]

    def since(self, revision: int, at: int = -1, value: str = "") -> list[CacheEvent] | None:
        """The events after ``revision``, or None if the window no longer covers it.
        With ``at`` (an attrs position), only those whose new or old version has
        ``value`` there, from the position's index when the backlog is long (a
        short one is returned whole: the caller's filter picks)."""
        self._evict(time.perf_counter())
        if revision < self.start:
            return None
        i = bisect_right(self._events, revision, lo=self._head, key=_revision)
        if at < 0 or (at not in self._indexes and len(self._events) - i < INDEX_FROM):
            return self._events[i:]
        index = self._indexes.get(at)
        if index is None:
            index = self._indexes[at] = {}
            _file(index, at, self._events[self._head:])
        bucket = index.get(value)
        if not bucket:
            return []
        return bucket[bisect_right(bucket, revision, key=_revision):]
