"""``CacheReads``: the API's ``Reads`` served from the watch caches.

Consistency (KEP-2340): a read with no resourceVersion asks the store for its
current revision and waits until the cache has applied it; after
``CacheConfig.fresh_timeout`` it is served by the store instead, and counted
(``controlplane_watch_cache_fallbacks_total``). A list at an
exact past revision is served from a retained snapshot (KEP-4988) when the
cache has one, else by the store (which answers 410 once compacted); so is one at
a revision the cache has not reached within ``EXACT_WAIT`` (a continue token of a
page the store served, or another process's), 504 only past the store's revision.
The pages of one paginated list come from the snapshot the first page was read from.
A watch resumes from the event window, or from the store's history when the
window no longer reaches back (410 once that is compacted too).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

import store

from ..api.errors import ApiError
from ..api.reads import (
    ErrorWatch,
    Listed,
    ListOptions,
    StoreReads,
    WatchItem,
    WatchOptions,
    WatchStream,
    bookmark_object,
    too_large_resource_version,
    unselective,
)
from ..metrics import WATCH_CACHE_FALLBACKS, WATCH_EVENT_DELIVERY, observe_many
from ..registry import ResourceType
from ..registry.attrs import Attrs, Filter
from .cache import INDEXED_LIST_FIELD, ResourceCache, Snapshot
from .entry import ATTRS, BODY, CacheEvent, Entry, entry_json
from .feed import WatchCaches
from .packing import any_packed, unpack, unpack_many
from .watchers import Watcher

__all__ = ["CacheReads"]

log = logging.getLogger(__name__)


# How long a list at an exact revision (a continue token's, or resourceVersionMatch=Exact)
# waits for a cache that has not reached it before the store serves it: a token of another
# server process's page is reached in milliseconds; a cache far behind (one reading its
# backlog from the store: cache.py) would not reach it in a fresh_timeout either.
EXACT_WAIT = 0.25


class _Fallback(Exception):
    """The cache cannot serve this read; the store will."""


class CacheReads:
    def __init__(self, caches: WatchCaches, fallback: StoreReads) -> None:
        self.caches = caches
        self.fallback = fallback

    async def _fresh(self, cache: ResourceCache, resource_version: str, why: str) -> None:
        """Wait as the resourceVersion asks: unset, for the store's current revision
        (else ``_Fallback``); "0", for the cache to be loaded; N, to reach N (else 504)."""
        if resource_version == "":
            target = await self.caches.store.revision()
            if not await cache.wait_fresh(target):
                WATCH_CACHE_FALLBACKS.labels(resource=cache.plural, reason=why).inc()
                raise _Fallback
            return
        target = max(int(resource_version), 1) if resource_version != "0" else 1
        if not await cache.wait_fresh(target):
            if cache.failed is not None or not cache.ready.is_set():
                WATCH_CACHE_FALLBACKS.labels(resource=cache.plural, reason="not-ready").inc()
                raise _Fallback
            raise too_large_resource_version(target, cache.revision)

    def prime(self, rtype: ResourceType, key: bytes, revision: int, raw: bytes, obj: dict[str, Any]) -> None:
        self.caches.cache_for(rtype).prime(key, revision, raw, obj)

    def prime_attrs(self, rtype: ResourceType, written: list[tuple[bytes, int, bytes, Attrs]]) -> None:
        self.caches.cache_for(rtype).prime_attrs(written)

    def latest(self, rtype: ResourceType, key: bytes) -> tuple[bytes, int] | None:
        cache = self.caches.cache_for(rtype)
        if not cache.ready.is_set() or cache.failed is not None:
            return None
        return cache.latest_json(key)

    def generation(self, rtype: ResourceType) -> int | None:
        cache = self.caches.cache_for(rtype)
        if not cache.ready.is_set() or cache.failed is not None:
            return None
        return cache.generation

    async def get(self, rtype: ResourceType, namespace: str | None, name: str,
                  resource_version: str = "") -> bytes | None:
        cache = self.caches.cache_for(rtype)
        try:
            await self._fresh(cache, resource_version, "get")
        except _Fallback:
            return await self.fallback.get(rtype, namespace, name, resource_version)
        entry = cache.get(rtype.key(namespace, name))
        return None if entry is None else entry_json(entry)

    async def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> Listed:
        cache = self.caches.cache_for(rtype)
        value = _indexed_value(cache, options)
        keys: list[bytes] | None = None
        try:
            if value:
                await self._fresh(cache, options.resource_version, "list")
                snap, keys = await cache.snapshot_with_keys(value)
            else:
                snap = await self._list_snapshot(cache, options)
        except _Fallback:
            return await self.fallback.list(rtype, namespace, options)
        prefix = rtype.prefix(namespace)
        start = options.start if options.start is not None else prefix
        end = store.prefix_end(prefix)
        if keys is not None:
            items, next_start = await _pick(snap, keys, start, end, options.filter, options.limit,
                                            cache.config.walk_chunk)
        else:
            items, next_start = await _walk(snap, start, end, options.filter, options.limit,
                                            cache.config.walk_chunk)
        remaining = None
        if next_start is not None:
            cache.pin(snap)
            if unselective(options.filter, namespace):
                remaining = snap.count(next_start, end)
        return Listed(items, snap.revision, next_start, remaining, prefix)

    async def _list_snapshot(self, cache: ResourceCache, options: ListOptions) -> Snapshot:
        if options.continue_revision or options.exact:
            revision = options.continue_revision or options.revision
            if not await cache.wait_fresh(revision, min(cache.config.fresh_timeout, EXACT_WAIT)):
                # a revision the cache has not reached: a token of a page the store served while
                # the cache was behind, or another server process's; the store serves it (as
                # upstream's cacher delegates such lists to etcd), or says 504 past its own
                WATCH_CACHE_FALLBACKS.labels(resource=cache.plural, reason="behind").inc()
                raise _Fallback
            snap = await cache.snapshot_at(revision)
            if snap is None:  # older than what the cache keeps: the store has it, or says 410
                WATCH_CACHE_FALLBACKS.labels(resource=cache.plural, reason="past-revision").inc()
                raise _Fallback
            return snap
        await self._fresh(cache, options.resource_version, "list")
        return await cache.snapshot()

    async def watch(self, rtype: ResourceType, namespace: str | None, options: WatchOptions) -> WatchStream:
        cache = self.caches.cache_for(rtype)
        try:
            if options.initial_events:
                try:
                    await self._fresh(cache, options.resource_version, "watch")
                except ApiError as e:  # a revision not reached: an ERROR event, as upstream's cacher
                    return ErrorWatch(e)
                snap, watcher = await cache.watch_with_state(options.filter)
                return CacheWatch(cache, rtype, namespace, options, watcher, snap, [])
            # from N: the events after N, however far the cache has got (upstream's cacher neither
            # waits for N nor refuses it: a client that read N from another server watches on)
            await self._fresh(cache, "0" if options.revision else options.resource_version, "watch")
            # rv unset (with sendInitialEvents=false): from the consistent revision just reached
            resumed = await cache.watch_from(options.revision or cache.revision, options.filter)
        except _Fallback:
            return await self.fallback.watch(rtype, namespace, options)
        if resumed is None:  # older than the window: the store's history, or its 410
            WATCH_CACHE_FALLBACKS.labels(resource=cache.plural, reason="window").inc()
            return await self.fallback.watch(rtype, namespace, options)
        backlog, watcher = resumed
        return CacheWatch(cache, rtype, namespace, options, watcher, None, backlog)


def _indexed_value(cache: ResourceCache, options: ListOptions) -> str:
    """The INDEXED_LIST_FIELD value a list of the current state pins (``spec.nodeName=node-7``)
    when the cache indexes it, else "" (walk): a page of a paginated list, or a list at
    an exact revision, reads its snapshot's entries instead."""
    if cache.index is None or options.continue_revision or options.exact:
        return ""
    for name, equal, value in options.filter.terms:
        if name == INDEXED_LIST_FIELD and equal and value:
            return value
    return ""


async def _pick(snap: Snapshot, keys: list[bytes], start: bytes, end: bytes, match: Filter,
                limit: int, chunk: int) -> tuple[list[bytes], bytes | None]:
    """``_walk`` over ``keys`` (sorted, from the snapshot's index) rather than every entry;
    yields to the event loop every ``chunk`` keys (a node of 50,000 pods)."""
    bodies: list[bytes] = []
    for seen, key in enumerate(keys[bisect_left(keys, start):], 1):
        if key >= end:
            break
        if seen % chunk == 0:
            await asyncio.sleep(0)
        entry = snap.get(key)
        if entry is None or not match.matches(entry[ATTRS]):
            continue
        if limit and len(bodies) >= limit:
            return await unpacked(bodies), key
        bodies.append(entry[BODY])
    return await unpacked(bodies), None


# Bodies unpacked on a worker thread rather than on the loop, from this many up:
# zstd releases the GIL, so the loop serves others (and the second core unpacks)
# while a large page is decompressed; below it the thread hop costs more than it frees.
OFFLOAD_BODIES = 64


# A watcher with an index hint skips another object's event by one comparison
# (``Watcher.seen``), not a filter evaluation: it walks this many walk chunks of
# its backlog between turns of the loop.
HINTED_CHUNKS = 16


async def unpacked(bodies: list[bytes]) -> list[bytes]:
    """The JSON of entries' bodies (``packing``), off the loop when there are many."""
    if len(bodies) >= OFFLOAD_BODIES and any_packed(bodies):
        return await asyncio.to_thread(unpack_many, bodies)
    return [unpack(b) for b in bodies]


async def _walk(snap: Snapshot, start: bytes, end: bytes, match: Filter, limit: int,
                chunk: int) -> tuple[list[bytes], bytes | None]:
    """Up to ``limit`` (0: all) matching objects from ``start``, and the next page's
    first key if more keys remain; yields to the event loop every ``chunk`` entries."""
    bodies: list[bytes] = []
    everything = match.everything
    for seen, (key, entry) in enumerate(snap.items(start, end), 1):
        if limit and len(bodies) >= limit:
            return await unpacked(bodies), key
        if everything or match.matches(entry[ATTRS]):
            bodies.append(entry[BODY])
        if seen % chunk == 0:
            await asyncio.sleep(0)
    return await unpacked(bodies), None


class CacheWatch:
    """One watch served by a cache: the initial state (walked from a snapshot, in
    chunks), the window's backlog, then live events from the watcher's buffer."""

    def __init__(self, cache: ResourceCache, rtype: ResourceType, namespace: str | None, options: WatchOptions,
                 watcher: Watcher, snap: Snapshot | None, backlog: list[CacheEvent]) -> None:
        self._cache = cache
        self._rtype = rtype
        self._options = options
        self._watcher = watcher
        self._initial: Iterator[tuple[bytes, Entry]] | None = None
        self._initial_revision = 0
        if snap is not None:
            prefix = rtype.prefix(namespace)
            self._initial = snap.items(prefix, store.prefix_end(prefix))
            self._initial_revision = snap.revision
        self._backlog = backlog
        self._backlog_at = 0  # the first backlog event not yet handed to the stream
        self._delivery = WATCH_EVENT_DELIVERY.labels(resource=cache.plural)
        self._next_bookmark = options.next_bookmark(time.monotonic())
        # the live wait's bookmark timer (``_arm_bookmark``), armed while the watch waits for
        # events with a bookmark to come, and whether it has fired since
        self._bookmark_timer: asyncio.TimerHandle | None = None
        self._bookmark_due = False
        # the stream's synchronous writer (``write_through``), if it has one
        self._can_write: Callable[[], bool] | None = None
        self._write: Callable[[list[WatchItem]], None] | None = None

    def write_through(self, can_write: Callable[[], bool], write: Callable[[list[WatchItem]], None]) -> None:
        """Have live events written by ``write`` in the turn of the loop that offers them to the
        watcher, whenever this stream waits with everything before them written and
        ``can_write`` says ``write`` would be done at once (the connection not backed up).

        Otherwise an event waited for this stream's task to be woken, the next turn of the loop:
        with the loop saturated (the ``million`` run's API server), a turn is tens to hundreds of
        milliseconds, and it was a share of every event's delivery. Order holds: the watcher's
        sink is set only while the task waits with an empty buffer, and unset when it wakes."""
        self._can_write, self._write = can_write, write

    def __aiter__(self) -> CacheWatch:
        return self

    async def __anext__(self) -> list[WatchItem]:
        if self._initial is not None:
            return await self._initial_chunk()
        # Invariant: the backlog is delivered whole, in order, before any live event or
        # bookmark. A bookmark's revision tells the client it has seen everything up to
        # it, so one sent past undelivered backlog would make a resumed watch skip it.
        chunk = self._cache.config.walk_chunk
        if self._watcher.hint is not None:
            chunk *= HINTED_CHUNKS
        while self._backlog_at < len(self._backlog):
            events = self._backlog[self._backlog_at:self._backlog_at + chunk]
            self._backlog_at += chunk
            out = [ev.item(kind) for ev, kind in self._watcher.seen(events)]
            if out:
                return out
            await asyncio.sleep(0)  # a chunk none of which this watcher sees: let the loop breathe
        w = self._watcher
        while True:
            if w.buffer:
                return self._drain()
            if w.closed:
                self._disarm()
                raise StopAsyncIteration
            if self._bookmark_due or (self._bookmark_timer is None and self._options.bookmarks
                                      and self._next_bookmark <= time.monotonic()):
                self._bookmark_due = False
                self._bookmark_timer = None
                self._next_bookmark = self._options.next_bookmark(time.monotonic())
                if self._cache.revision >= self._options.revision:  # else a watch from a revision not reached
                    # the buffer is empty, so every event up to the cache's revision has reached us
                    return [WatchItem.of("BOOKMARK", bookmark_object(self._rtype, self._cache.revision))]
            w.wakeup.clear()
            if self._bookmark_timer is None and self._options.bookmarks and self._next_bookmark != math.inf:
                self._arm_bookmark()
            if self._write is not None:
                w.sink = self._write_now
            try:
                await w.wakeup.wait()
            finally:
                w.sink = None

    def _arm_bookmark(self) -> None:
        """One timer a bookmark, not one a wait: an informer's watch wakes for every batch
        of events, and a timeout made and cancelled around each wait cost about a tenth of
        its delivery (a ``Timeout``, a timer handle and its cancellation a wake-up)."""
        loop = asyncio.get_running_loop()
        delay = self._next_bookmark - time.monotonic()
        self._bookmark_timer = loop.call_at(loop.time() + max(delay, 0.0), self._bookmark_fired)

    def _bookmark_fired(self) -> None:
        self._bookmark_due = True  # the loop's timers may fire a little early: taken as due, as before
        self._watcher.wakeup.set()

    async def _initial_chunk(self) -> list[WatchItem]:
        """The next ``initial_chunk`` entries of the initial state, walked in chunks
        of ``walk_chunk`` between turns of the loop, unpacked together."""
        assert self._initial is not None
        bodies: list[bytes] = []
        match = self._options.filter
        everything = match.everything
        chunk, size = self._cache.config.walk_chunk, self._cache.config.initial_chunk
        for n, (_, entry) in enumerate(self._initial, 1):
            if everything or match.matches(entry[ATTRS]):
                bodies.append(entry[BODY])
            if n >= size:
                # the next call goes on from here, after the caller has written these
                return [WatchItem.of("ADDED", raw) for raw in await unpacked(bodies)]
            if n % chunk == 0:
                await asyncio.sleep(0)
        out = [WatchItem.of("ADDED", raw) for raw in await unpacked(bodies)]
        self._initial = None
        self._watcher.initial = False
        if self._options.send_initial_events and self._options.bookmarks:  # only to a client that asks, as upstream
            out.append(WatchItem.of("BOOKMARK", bookmark_object(self._rtype, self._initial_revision, True)))
        return out

    def _write_now(self) -> bool:
        """The watcher's sink (``write_through``): its buffer written now, if it can be."""
        assert self._can_write is not None and self._write is not None
        if not self._can_write():
            return False
        try:
            self._write(self._drain())
        except Exception as e:  # this watch's failure is not the fan-out's: it ends, the client watches again
            log.warning("watch of %s: writing its events failed (%r); the watch ends", self._cache.plural, e)
            self._watcher.close("the watch's events could not be written")
        return True

    def _drain(self) -> list[WatchItem]:
        buffer = self._watcher.buffer
        now = time.perf_counter()
        out = [ev.item(kind) for ev, kind in buffer]
        delays = [now - ev.received for ev, _ in buffer]
        buffer.clear()  # no await since the walk: nothing was added meanwhile
        observe_many(self._delivery, delays)
        return out

    def _disarm(self) -> None:
        if self._bookmark_timer is not None:
            self._bookmark_timer.cancel()
            self._bookmark_timer = None

    async def aclose(self) -> None:
        self._disarm()
        self._watcher.close()
