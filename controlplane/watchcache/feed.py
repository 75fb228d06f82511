"""The caches of one server, fed by one watch on the whole store.

One watch over every key, rather than one per resource, because a cache must
know how far the store has gone even when its own resource did not change: a
consistent read waits until the cache's revision reaches the store's, and a
pod cache that only heard of pod events would wait for the next pod write.
Each batch from the store is split by prefix and given, with the batch's last
revision, to the caches it has events for and to those a reader waits on; then
the shared ``FeedClock`` moves to that revision, and every cache with nothing
left to apply is at it (``ResourceCache.revision``).

Caches are made on demand (``cache_for``), for built-in and custom resources
alike: a new cache is registered at the feed's current revision, starts
receiving batches at once, and loads its prefix at that revision before it
applies them. If the feed's watch fails (its revision compacted away, the
store gone), every cache is dropped (their watchers end, and resume) and the
feed restarts from the store's current revision.

``observers`` are told of every batch, whatever its keys, before the caches are:
the garbage collector notes the owner references every server process writes.
``on_restart`` are told when the feed restarts, having missed the events between:
the garbage collector scans the store again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from itertools import repeat

import store

from ..registry import ResourceType
from .cache import CacheConfig, FeedClock, ResourceCache

__all__ = ["WatchCaches"]

log = logging.getLogger(__name__)


class WatchCaches:
    def __init__(self, st: store.Store, config: CacheConfig | None = None) -> None:
        self.store = st
        self.config = config or CacheConfig()
        self.clock = FeedClock()  # every store event up to its revision has been given to its cache
        self._caches: dict[bytes, ResourceCache] = {}
        self._tasks: dict[bytes, asyncio.Task[None]] = {}
        self._feed: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        # told of every batch of store events, before its caches (the garbage collector's index)
        self.observers: list[Callable[[Sequence[store.Event]], None]] = []
        # told when the feed restarts from the store's current revision (the events between lost)
        self.on_restart: list[Callable[[], None]] = []

    @property
    def revision(self) -> int:
        return self.clock.revision

    @revision.setter
    def revision(self, revision: int) -> None:
        self.clock.revision = revision

    async def start(self) -> None:
        self.revision = await self.store.revision()
        self._feed = asyncio.create_task(self._run(), name="watch-cache-feed")
        self._started.set()

    async def stop(self) -> None:
        tasks = [t for t in (self._feed, *self._tasks.values()) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._drop_all("the server is shutting down")

    def compacted(self, revision: int) -> None:
        """The store's history before ``revision`` is gone (see ``ResourceCache.compacted``)."""
        for cache in self._caches.values():
            cache.compacted(revision)

    def caches(self) -> list[ResourceCache]:
        return list(self._caches.values())

    def cached(self, rtype: ResourceType) -> ResourceCache | None:
        """The type's cache if it has one (none is made)."""
        return self._caches.get(rtype.prefix())

    def cache_for(self, rtype: ResourceType) -> ResourceCache:
        prefix = rtype.prefix()
        cache = self._caches.get(prefix)
        # a CRD that changed its selectable fields changed its types' fields_key: the
        # entries' fields are made again (upstream's storage of the CRD is made anew, its
        # watches ended, as forgetting this cache ends them)
        if cache is not None and cache.failed is None and cache.fields_key == rtype.fields_key:
            return cache
        if cache is not None:
            self._forget(prefix)
        cache = ResourceCache(prefix, rtype.plural, self.config, self.revision, self.clock, rtype.fields_key)
        self._caches[prefix] = cache
        task = asyncio.create_task(cache.run(self.store), name=f"watch-cache-{rtype.plural}")
        task.add_done_callback(functools.partial(self._ended, prefix))
        self._tasks[prefix] = task
        return cache

    def _ended(self, prefix: bytes, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("watch cache of %s failed: %r", prefix.decode(errors="replace"), task.exception())

    def _forget(self, prefix: bytes) -> None:
        cache = self._caches.pop(prefix, None)
        task = self._tasks.pop(prefix, None)
        if task is not None:
            task.cancel()
        if cache is not None:
            cache.close("the watch cache was rebuilt")

    def _drop_all(self, reason: str) -> None:
        for prefix in list(self._caches):
            cache = self._caches[prefix]
            self._forget(prefix)
            cache.close(reason)

    def _route(self) -> Callable[[bytes], ResourceCache | None]:
        caches = self._caches

        def route(key: bytes) -> ResourceCache | None:
            # /registry/<plural>/... (built-in) or /registry/<group>/<plural>/... (custom)
            parts = key.split(b"/", 4)
            if len(parts) < 4:
                return None
            cache = caches.get(b"/".join(parts[:3]) + b"/")
            if cache is None and len(parts) == 5:
                cache = caches.get(b"/".join(parts[:4]) + b"/")
            return cache
        return route

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async for events in self.store.watch(b"\x00", b"\x00", self.revision + 1):
                    self._dispatch(events)
                    backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as e:  # compacted past us, or the store failed: rebuild
                log.warning("watch cache feed restarts in %.1f s after %r", backoff, e)
                self._drop_all(f"the watch cache is rebuilding after: {e}")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                with contextlib.suppress(store.StoreError):
                    self.revision = await self.store.revision()
                for restarted in self.on_restart:
                    restarted()
            else:
                return  # the store closed its watches: it is shutting down

    def _dispatch(self, events: Sequence[store.Event]) -> None:
        if not events:
            return
        for observe in self.observers:
            observe(events)
        received = time.perf_counter()
        route = self._route()
        waiting = self.clock.waiting
        if type(events) is store.EventRun:
            # a run of updates (a bulk request's): to its cache whole, its events not made
            # here, when every key is under that cache's prefix (else as any list, below)
            keys = events.keys
            cache = route(keys[0])
            if cache is not None and all(map(bytes.startswith, keys, repeat(cache.prefix))):
                revision = events.last
                cache.feed(events, revision, received)
                for each in list(waiting) if waiting else ():
                    if each is not cache:
                        each.feed([], revision, received)
                self.clock.revision = revision
                return
        by_cache: dict[ResourceCache, list[store.Event]] = {}
        # a batch comes in runs of one resource (a request's writes): the run's cache is
        # routed once, and its next keys only checked against its prefix
        prefix, bucket = b"", None
        for ev in events:
            key = ev.kv.key
            if bucket is None or not key.startswith(prefix):
                cache = route(key)
                if cache is None:
                    bucket = None
                    continue
                prefix, bucket = cache.prefix, by_cache.get(cache)
                if bucket is None:
                    bucket = by_cache[cache] = []
            bucket.append(ev)
        revision = events[-1].kv.mod_revision
        for cache, bucket in by_cache.items():
            cache.feed(bucket, revision, received)
        for cache in list(waiting) if waiting else ():  # (a fan-out may end a wait)
            if cache not in by_cache:
                cache.feed([], revision, received)
        # last: a cache is at the clock's revision once it has applied what it was given
        self.clock.revision = revision
