"""The event window: the recent events of one resource, for resuming watches.

Invariant: every event with ``revision > start`` that the cache applied is in
the window, in revision order. A watch from revision R can resume from the
window exactly when ``R >= start``; older, the history is gone (410, or the
store's own history). The window is bounded by count, by the bytes its events
keep alive and by age; evicting the oldest event moves ``start`` up to it.
"""

from __future__ import annotations

import time
from bisect import bisect_right

from .entry import CacheEvent

__all__ = ["LINES_KEPT", "EventWindow"]

LINES_KEPT = 2_048


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
        events = self._events
        while len(events) - self._head > 0:
            oldest = events[self._head]
            if (len(events) - self._head <= self.max_events and self._bytes <= self.max_bytes
                    and now - oldest.received <= self.max_seconds):
                break
            self._head += 1
            self._bytes -= oldest.size
            self.start = oldest.revision
        if self._head > 1024 and self._head * 2 > len(events):
            del events[:self._head]
            self._head = 0

    def since(self, revision: int) -> list[CacheEvent] | None:
        """The events after ``revision``, or None if the window no longer covers it."""
        self._evict(time.perf_counter())
        if revision < self.start:
            return None
        i = bisect_right(self._events, revision, lo=self._head, key=lambda e: e.revision)
        return self._events[i:]
