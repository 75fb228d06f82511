"""One resource's watch cache: the objects under one store prefix, kept current
from the store's event stream alone.

Roles and the lock (``RWLock``, writer-preferring):

- The *applier* is the only writer. It loads the prefix at its start revision
  (``run``, one task), then applies the feed's batches in revision order, each
  under the write lock, and fans the events out to watchers outside the lock:
  in ``feed`` itself while nothing is queued or being applied and the lock is
  free (``_apply_now``), else from the queue, in ``run``.
- *Readers* take the read lock only to capture a state: in lazy mode an O(1)
  ``CowSortedMap.snapshot()`` (or a retained one), walked after release; in
  copy mode (``--watch-cache-snapshot copy``, the naive baseline) a copy of
  every entry, made under the lock, as upstream did before its fix.

Fields and what protects them:

- ``_map``, ``window``, ``revision``, ``_retained``: written by the applier
  under the write lock; read under the read lock.
- ``revision``: every store event with a revision up to it, under ``prefix``,
  has been applied (so a snapshot taken under the lock is the state at it).
- ``watchers``: registration happens under the read lock together with the
  snapshot or window read it starts from; a watcher takes only events after
  its ``start_revision``, so the fan-out after release neither skips nor
  repeats an event.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import store
from store import Event, EventRun, EventType

from ..metrics import WATCH_CACHE_LOCK_WAIT, WATCH_CACHE_REREAD_EVENTS
from ..registry.attrs import Attrs, Filter, field_names
from .cowmap import CowSortedMap, View
from .entry import BODY, KEY, REVISION, CacheEvent, Entry, build_entry, entry_json, entry_of, restamped
from .packing import PACKED, Packer, json_size
from .rwlock import RWLock
from .valueindex import ValueIndex
from .watchers import Watcher, WatcherIndex
from .window import EventWindow

__all__ = ["INDEXED_LIST_FIELD", "CacheConfig", "ResourceCache", "Snapshot", "SnapshotMode"]

log = logging.getLogger(__name__)

SnapshotMode = Literal["lazy", "copy"]

# the field whose values a cache of a type that has it indexes its current keys by
# (``valueindex``): a kubelet's LIST of its node's pods reads its keys, not every pod
INDEXED_LIST_FIELD = "spec.nodeName"


@dataclass(frozen=True, slots=True)
class CacheConfig:
    mode: SnapshotMode = "lazy"
    # the event window (see window.py)
    window_events: int = 100_000
    window_bytes: int = 256 << 20
    window_seconds: float = 300.0
    # lazy mode: snapshots kept for lists at a recent revision (KEP-4988), one at the
    # end of an applied chunk at most every retain_interval; a revision between two
    # is their older one plus the window's events up to it (an OverlaySnapshot), so
    # none older than the window's start is kept (upstream drops a snapshot with its
    # event). retained_bytes bounds what they keep alive: the versions, leaves and
    # top levels replaced since each was taken (``_retain``)
    retained_snapshots: int = 1_000
    retained_bytes: int = 64 << 20
    retained_seconds: float = 75.0
    retain_interval: float = 0.05
    # snapshots a paginated list's continue token refers to, kept for its next pages
    pinned_snapshots: int = 64
    pinned_seconds: float = 300.0
    watcher_buffer: int = 1_000
    walk_chunk: int = 50              # entries a walk handles between yields to the event loop
    initial_chunk: int = 500          # initial events (sendInitialEvents) handed to a watch's stream at a time
    load_chunk: int = 500             # keys the initial load reads from the store per range call
    apply_chunk: int = 64             # events applied under one hold of the write lock
    apply_budget: float = 0.005       # seconds the applier runs before it yields to the loop
    fresh_timeout: float = 3.0        # a consistent read waits this long, then falls back to the store
    # events a loaded cache may have queued; past it the feed's batches are not queued
    # but read again from the store's log when the applier reaches them (``_read_gap``)
    feed_backlog: int = 100_000
    pack_after: int = 1_000           # objects seen before the resource's entries are compressed (0: never)


class Snapshot(Protocol):
    """A state of the cache at ``revision``, walkable without any lock."""

    revision: int

    def get(self, key: bytes) -> Entry | None: ...

    def items(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, Entry]]: ...

    def count(self, start: bytes, end: bytes) -> int: ...


class LazySnapshot:
    __slots__ = ("revision", "view")

    def __init__(self, view: View[Entry], revision: int) -> None:
        self.view = view
        self.revision = revision

    def get(self, key: bytes) -> Entry | None:
        return self.view.get(key)

    def items(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, Entry]]:
        return self.view.items(start, end)

    def count(self, start: bytes, end: bytes) -> int:
        return self.view.count(start, end)


class OverlaySnapshot:
    """A retained snapshot plus the changes of the events after it, up to ``revision``."""

    __slots__ = ("base", "changes", "revision")

    def __init__(self, base: Snapshot, changes: dict[bytes, Entry | None], revision: int) -> None:
        self.base = base
        self.changes = changes  # key -> its entry at ``revision``, None if deleted by then
        self.revision = revision

    def get(self, key: bytes) -> Entry | None:
        if key in self.changes:
            return self.changes[key]
        return self.base.get(key)

    def count(self, start: bytes, end: bytes) -> int:
        n = self.base.count(start, end)
        for key, entry in self.changes.items():
            if start <= key < end:
                n += (entry is not None) - (self.base.get(key) is not None)
        return n

    def items(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, Entry]]:
        changed = sorted(k for k in self.changes if start <= k < end)
        i = 0
        for key, entry in self.base.items(start, end):
            while i < len(changed) and changed[i] < key:
                got = self.changes[changed[i]]
                if got is not None:
                    yield changed[i], got
                i += 1
            if i < len(changed) and changed[i] == key:
                got = self.changes[key]
                if got is not None:
                    yield key, got
                i += 1
                continue
            yield key, entry
        for key in changed[i:]:
            got = self.changes[key]
            if got is not None:
                yield key, got


class CopySnapshot:
    """The naive baseline: every entry copied (under the lock) into a list."""

    __slots__ = ("entries", "keys", "revision")

    def __init__(self, keys: list[bytes], entries: list[Entry], revision: int) -> None:
        self.keys = keys
        self.entries = entries
        self.revision = revision

    def get(self, key: bytes) -> Entry | None:
        i = bisect_right(self.keys, key) - 1
        return self.entries[i] if i >= 0 and self.keys[i] == key else None

    def count(self, start: bytes, end: bytes) -> int:
        return max(bisect_left(self.keys, end) - bisect_left(self.keys, start), 0)

    def items(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, Entry]]:
        i = bisect_right(self.keys, start) - 1
        if i < 0 or self.keys[i] < start:
            i += 1
        for j in range(i, len(self.keys)):
            if self.keys[j] >= end:
                return
            yield self.keys[j], self.entries[j]


# versions written here and not yet applied: ten seconds of writes at the most this
# process makes (10,000 lease renewals a second besides its other writes; a lease's entry
# is about 600 bytes, a pod's, packed, about 1.5 KB); past it the oldest are decoded again,
# at several times the cost, so a cache that fell behind by more (a long collection at
# 100,000 nodes) fell further behind
PRIMED_MAX = 100_000
# The served JSON of the versions this process wrote last, kept unpacked up to this many
# bytes per resource: the next write to the same object (a status patch, a binding) starts
# from it without decompressing. zstd releases the GIL, and on the event loop a call that
# does waits for the GIL again behind any other thread running Python (the store's
# writer): a 5 µs decompression measured 60-75 µs on average there, up to 37 ms.
RECENT_JSON_BYTES = 16 << 20
# Each cache's generations start in a range of their own, so a cache that replaces a
# failed one of the same resource never repeats a generation the old one had: the
# API's memos keyed by generation (PriorityClasses, Namespaces) would take it for
# "nothing changed". 2**48 changes per cache are never reached.
_GENERATION_RANGE = 1 << 48
# how many entries the average object size is estimated from, and how long an estimate
# stands (upstream refreshes its per-resource storage stats about once a minute)
SIZE_SAMPLE, SIZE_PERIOD = 64, 60.0
_caches_made = itertools.count()

class FeedClock:
    """How far the feed (``feed.WatchCaches``) has handed out the store's events, shared by
    its caches: every event up to ``revision`` has been given to its cache. The feed gives
    a batch only to the caches it has events for, and to those in ``waiting`` (a reader
    waits for them to reach a revision: ``wait_fresh``); a cache with nothing queued is
    then at the clock's revision without being told (``ResourceCache.revision``). Telling
    every cache of every batch cost a call per cache per batch: 70 calls, 10 us a write at
    64 writes in flight, growing with every custom resource served."""

    __slots__ = ("revision", "waiting")

    def __init__(self, revision: int = 0) -> None:
        self.revision = revision
        self.waiting: set[ResourceCache] = set()


# (events under this prefix, the feed's revision after them, receipt time)
Batch = tuple[Sequence[Event], int, float]
_GAP: Batch = ([], -1, 0.0)  # queued in place of the batches a cache behind its writers reads from the store


class ResourceCache:
    def __init__(self, prefix: bytes, plural: str, config: CacheConfig, start_revision: int,
                 clock: FeedClock | None = None, fields_key: str | None = None) -> None:
        self.prefix = prefix
        self.plural = plural
        # what its entries' selectable fields are (``ResourceType.fields_key``): the plural
        # but for a custom resource, whose fields its CRD says
        self.fields_key = fields_key or plural
        self.config = config
        self.start_revision = start_revision  # the revision the initial list is read at
        self._revision = 0                    # 0 until loaded; see ``revision``
        self._clock = clock if clock is not None else FeedClock()
        # grows whenever the map changes (a load, applied events); unique to this cache
        self.generation = next(_caches_made) * _GENERATION_RANGE
        self._moved: asyncio.Future[None] | None = None  # ``moved()``'s, done when generation next grows
        self.ready = asyncio.Event()
        self.failed: BaseException | None = None
        wait = WATCH_CACHE_LOCK_WAIT
        self.lock = RWLock(wait.labels(resource=plural, role="reader").observe,
                           wait.labels(resource=plural, role="writer").observe)
        self.watchers = WatcherIndex(self.fields_key)
        self.window = EventWindow(start_revision, config.window_events, config.window_bytes,
                                  config.window_seconds)
        self._map: CowSortedMap[Entry] = CowSortedMap()
        names = field_names(self.fields_key)
        # the map's keys by INDEXED_LIST_FIELD, changed with the map under the write lock
        self.index = ValueIndex(names.index(INDEXED_LIST_FIELD)) if INDEXED_LIST_FIELD in names else None
        self.packer = Packer(config.pack_after)  # entries' bodies, compressed once the resource is large
        self._queue: asyncio.Queue[Batch] = asyncio.Queue()
        self.queued = 0  # events in _queue
        # Past config.feed_backlog queued events the feed's batches are not queued: the
        # applier reads them from the store when it gets there (``_read_gap``). _fed: the
        # feed's revision after the last batch queued; _gap: [that revision, the feed's
        # revision now, the newest event of this prefix not queued]; _skip_through: events
        # up to it were read from the store, and the feed's copies are dropped.
        self._fed = start_revision
        self._gap: list[int] | None = None
        self._skip_through = 0
        self.reread = 0  # events read back from the store so (controlplane_watch_cache_reread_events_total)
        # (revision, snapshot, taken at): lazy mode's per-event snapshots, oldest first
        self._retained: deque[tuple[int, LazySnapshot, float]] = deque()
        # what each retained snapshot alone keeps alive, in bytes (estimated), and their sum
        self._retained_costs: deque[int] = deque()
        self._retained_bytes = 0
        self._retained_at = (0, 0)  # (generation, window.added_bytes) at the newest one
        self._pinned: OrderedDict[int, tuple[Snapshot, float]] = OrderedDict()
        self._last_retained = 0.0
        self._busy = False  # the applier has taken a batch it has not finished applying
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        # revision -> entry (whose key is its KEY: a revision names one write of one key):
        # versions this process wrote and already serialised (``prime``); the applier takes
        # them instead of decoding the store's bytes again.
        # Oldest first, and an OrderedDict: a dict whose front was emptied by the applier's
        # pops makes ``next(iter(...))`` walk every hole to the oldest entry left (5x the
        # cost of a prime, measured, once the applier lags and every prime ages one out)
        self._primed: OrderedDict[int, Entry] = OrderedDict()
        # key -> the newest revision of it in _primed: while the applier is behind, the
        # next write to the object starts from it (``latest_json``), not from a version
        # the store has already replaced (a sure conflict, and a read to recover from it)
        self._primed_newest: dict[bytes, int] = {}
        # key -> (revision, served JSON) of versions written here, newest last (``latest_json``)
        self._recent: OrderedDict[bytes, tuple[int, bytes]] = OrderedDict()
        self._recent_bytes = 0
        self._object_size = (0, -SIZE_PERIOD)  # (estimate, when made): see ``object_size``

    def __len__(self) -> int:
        return len(self._map)

    def object_size(self) -> int:
        """The average size of the cached objects' JSON (0: none cached), as API Priority and
        Fairness sizes a LIST by (upstream's ``EstimatedAverageObjectSizeBytes``): estimated from
        ``SIZE_SAMPLE`` entries spread over the map, again at most every ``SIZE_PERIOD``
        seconds, each read from its packed frame's header (no decompression)."""
        size, made = self._object_size
        now = time.monotonic()
        if size and now - made < SIZE_PERIOD:  # (an empty cache's 0 is not kept: it fills)
            return size
        sample = self._map.live().sample(SIZE_SAMPLE)
        size = sum(json_size(entry[BODY]) for entry in sample) // len(sample) if sample else 0
        self._object_size = (size, now)
        return size

    @property
    def revision(self) -> int:
        """Every store event under ``prefix`` up to this revision has been applied, so a
        snapshot taken now is the state at it (0 until loaded). The newest of this cache's
        own (its events', and the batches it was given) and, while nothing given to it waits
        to be applied, the feed's (``FeedClock``): the feed gives a cache only the batches
        with its events, so the state at the feed's revision is the applied one."""
        own, fed = self._revision, self._clock.revision
        if fed > own and not self._busy and self._gap is None and self.failed is None \
                and self.ready.is_set() and self._queue.empty():
            return fed
        return own

    # -- the writer ---------------------------------------------------------------
    def feed(self, events: Sequence[Event], revision: int, received: float) -> None:
        """Apply or queue a batch from the store's watch (called by the feed, in revision order).

        While nothing of this cache is pending, a batch is applied here, as much of it
        as one ``apply_budget`` allows (``_apply_now``), and only the rest is queued;
        a batch with no event of this cache only moves the revision. Either spares
        the events a task switch, a turn of the loop, per cache per batch."""
        if self._skip_through:
            if events and events[0].kv.mod_revision <= self._skip_through:
                events = [ev for ev in events if ev.kv.mod_revision > self._skip_through]
            if revision >= self._skip_through:
                self._skip_through = 0
        gap = self._gap
        if gap is not None:
            gap[1] = revision
            if events:
                gap[2] = events[-1].kv.mod_revision
            return
        if not events and not self._busy and self._queue.empty() and self.ready.is_set():
            self._revision = max(self._revision, revision)
            self._fed = revision
            self._resolve_waiters()
            return
        if events and self.queued + len(events) > self.config.feed_backlog and self.ready.is_set():
            # Without this a cache behind its writers (a saturated core, a long collection)
            # queued every event, about 1 KB each: at 100,000 nodes, ten seconds of writes
            # (117,000) at 172,000 pods, 1.4 million after the loop had stalled for a minute.
            # Read again, they cost a store read and a decode each instead of memory.
            # (every event of this prefix up to the clock's revision was given to it before)
            self._gap = [max(self._fed, self._clock.revision), revision, events[-1].kv.mod_revision]
            self._queue.put_nowait(_GAP)
            return
        self._fed = revision
        if not self._busy and self._queue.empty() and self.ready.is_set() and self.failed is None:
            try:
                applied = self._apply_now(events, revision, received)
            except Exception as e:  # as the applier's task would have: this cache is done
                log.exception("watch cache of %s failed to apply a batch", self.plural)
                self.close(f"the watch cache failed to apply a batch: {e!r}")
                return
            if applied == len(events):
                return
            events = events[applied:]
        self.queued += len(events)
        self._queue.put_nowait((events, revision, received))

    async def run(self, st: store.Store) -> None:
        """Load the prefix at ``start_revision``, then apply batches until cancelled."""
        try:
            await self._load(st)
        except BaseException as e:
            self.failed = e
            self.ready.set()
            self._resolve_waiters(fail=True)
            raise
        while True:
            batch = await self._queue.get()
            self._busy = True
            try:
                if batch is _GAP:
                    await self._read_gap(st)
                else:
                    events, revision, received = batch
                    self.queued -= len(events)
                    await self.apply(events, revision, received)
            finally:
                self._busy = self._queue.qsize() > 0
                if not self._busy and self._waiters:  # (drained: now at the feed's clock)
                    self._resolve_waiters()

    async def _read_gap(self, st: store.Store) -> None:
        """Apply, from the store's log, the events of this prefix the feed did not queue
        (``feed``), then take the feed's batches again. Done once every event the feed
        passed over is applied: the store may have given newer ones too, which the
        feed's later batches then skip. A gap the store no longer has (compacted) fails
        the cache: its watchers end and resume, and the next read builds it anew."""
        gap = self._gap
        assert gap is not None
        applied = gap[0]
        watch = st.watch(self.prefix, store.prefix_end(self.prefix), gap[0] + 1)
        reread = WATCH_CACHE_REREAD_EVENTS.labels(resource=self.plural)
        try:
            while applied < gap[2]:
                events = await anext(watch)
                if events:
                    applied = events[-1].kv.mod_revision
                    self.reread += len(events)
                    reread.inc(len(events))
                    await self.apply(events, applied, time.perf_counter())
        except BaseException as e:
            if not isinstance(e, asyncio.CancelledError):
                self.close(f"the watch cache could not read its backlog from the store: {e}")
            raise
        finally:
            close = getattr(watch, "aclose", None)  # both stores' watches have it; the protocol does not say
            if close is not None:
                await close()
        # no await since the check: the feed has passed over nothing newer than ``applied``
        self._gap = None
        self._fed = max(gap[1], applied)
        self._skip_through = applied if applied > gap[1] else 0
        if self._fed > self._revision:
            self._revision = self._fed
            self._resolve_waiters()

    async def _load(self, st: store.Store) -> None:
        end = store.prefix_end(self.prefix)
        start = self.prefix
        loaded: list[tuple[bytes, Entry]] = []
        while True:
            kvs, _, more = await st.range(start, end, revision=self.start_revision, limit=self.config.load_chunk)
            pack = self.packer.pack
            loaded.extend((kv.key, build_entry(self.fields_key, kv.key, kv.value, kv.mod_revision, pack)) for kv in kvs)
            if not more or not kvs:
                break
            start = kvs[-1].key + b"\x00"
            await asyncio.sleep(0)
        await self.load(loaded)

    async def load(self, entries: list[tuple[bytes, Entry]]) -> None:
        """Install the state at ``start_revision`` (keys strictly increasing) and start
        serving: ``run`` does it from the store; benchmarks call it directly."""
        await self.lock.acquire_write()
        try:
            self._map.load_sorted(entries)
            if self.index is not None:
                self.index.load(entries)
            self.generation += 1
            self._tell_moved()
            self._revision = self.start_revision
            self._retain(self.start_revision)
        finally:
            self.lock.release_write()
        self.ready.set()
        self._resolve_waiters()

    def moved(self) -> asyncio.Future[None]:
        """A future done once ``generation`` next grows: for a follower that would otherwise
        poll it (flow control's configuration). Shared by everyone who asks before then:
        wait on it with ``asyncio.wait``, which leaves it as it is, never cancel it. A
        cache that fails is replaced by a new one and never resolves it: wait with a
        timeout."""
        if self._moved is None:
            self._moved = asyncio.get_running_loop().create_future()
        return self._moved

    def _tell_moved(self) -> None:
        moved, self._moved = self._moved, None
        if moved is not None and not moved.done():
            moved.set_result(None)

    async def apply(self, events: Sequence[Event], revision: int, received: float) -> None:
        """Apply a batch, in chunks of ``apply_chunk`` events: each chunk's entries are
        built (parsed, stamped, serialised) before the write lock is taken, applied
        under it, then fanned out. The loop gets a turn once ``apply_budget`` has
        been spent: a turn per chunk would starve the applier behind many readers'
        walks, none would block the loop for a whole backlog."""
        chunk = self.config.apply_chunk
        turn = time.perf_counter()
        for i in range(0, len(events), chunk):
            if i and time.perf_counter() - turn > self.config.apply_budget:
                await asyncio.sleep(0)
                turn = time.perf_counter()
            part = events[i:i + chunk]
            built, changes = self._build(part, received)
            await self.lock.acquire_write()
            self._apply_locked(part, built, changes)
        self._advance(revision)

    def _apply_now(self, events: Sequence[Event], revision: int, received: float) -> int:
        """``apply`` in the feed's own turn of the loop, for as much of ``events`` as
        ``apply_budget`` allows while the write lock is free; the number applied.

        Queued, a batch waited for the applier's task to be woken, a turn of the loop;
        and the watchers' tasks, woken by the fan-out, for another. With the loop busy
        (a turn of a saturated server is tens of milliseconds), each turn was a share of
        every event's delivery: applied here, the watchers see it one turn after the
        store's commit rather than two. Called only with nothing queued and nothing
        being applied, so the order is the store's."""
        chunk = self.config.apply_chunk
        turn = time.perf_counter()
        done = 0
        while done < len(events):
            if done and time.perf_counter() - turn > self.config.apply_budget:
                return done
            part = events[done:done + chunk]
            built, changes = self._build(part, received)
            if not self.lock.try_acquire_write():  # a reader holds it (copy mode): the applier waits
                return done
            self._apply_locked(part, built, changes)
            done += len(part)
        self._advance(revision)
        return done

    def _apply_locked(self, part: Sequence[Event], built: list[CacheEvent],
                      changes: list[tuple[bytes, Entry | None]]) -> None:
        """One chunk, built, into the map under the write lock (held on entry, released
        here), then fanned out to the watchers."""
        try:
            self._map.apply_many(changes)
            if self.index is not None:
                self.index.apply(built)
            primed = self._primed
            if primed:
                # the map has these versions now (no await since: nobody saw the gap)
                pop, newest = primed.pop, self._primed_newest
                for key, entry in changes:
                    if entry is not None and pop(entry[REVISION], None) is not None \
                            and newest.get(key) == entry[REVISION]:
                        del newest[key]
            self.window.extend(built)
            self.generation += len(built)
            if self._moved is not None:
                self._tell_moved()
            self._revision = max(self._revision, part[-1].kv.mod_revision)
            if built and time.perf_counter() - self._last_retained >= self.config.retain_interval:
                self._retain(self._revision)
        finally:
            self.lock.release_write()
        self.watchers.dispatch_all(built)
        self._resolve_waiters()

    def _advance(self, revision: int) -> None:
        if revision > self._revision:  # progress beyond this resource's own events
            self._revision = revision
            self._resolve_waiters()

    def prime(self, key: bytes, revision: int, raw: bytes, obj: dict[str, Any]) -> None:
        """This process wrote ``obj`` at ``revision`` and serialised it as ``raw`` (the
        served JSON): when the store's event for it arrives, use that, not a new
        decode and encode. The event still comes only from the store, in order; a
        version whose event never comes here (another cache took its prefix) ages out."""
        if revision <= self._revision:
            return  # already applied
        self._prime_entry(key, revision, raw, entry_of(self.fields_key, key, revision, raw, obj, self.packer.pack))

    def prime_attrs(self, written: list[tuple[bytes, int, bytes, Attrs]]) -> None:
        """As ``prime``, for versions (key, revision, served JSON, attrs) whose labels and
        selectable fields are known to be ``attrs`` (made by a change no filter reads from
        a version that had them): no parse. One loop for a request's writes (``_prime_entry``
        of each). The served JSON is ``with_resource_version``'s, a join at its exact size:
        kept as it is (``Packer.pack_exact``).

        The entries are left to the collector to untrack: an exact tuple whose items are
        untracked (bytes, an int, and attrs a collection has already untracked: they are
        the previous version's) is untracked by the first young collection that meets it,
        and ``untracked`` (a ctypes call, about as dear as the rest of a prime) would be
        paid once a renewal, 10,000 times a second at 100,000 nodes."""
        pack, applied = self.packer.pack_exact, self._revision  # (the served JSON of a splice: a join)
        primed, newest = self._primed, self._primed_newest
        for key, revision, raw, attrs in written:
            if revision <= applied:
                continue  # already applied
            entry = (key, revision, pack(raw), attrs)
            primed[revision] = entry
            if newest.get(key, 0) < revision:
                newest[key] = revision
            if entry[BODY][0] == PACKED:
                self._remember(key, revision, raw)
        while len(primed) > PRIMED_MAX:
            self._forget_primed(primed.popitem(last=False)[1])

    def _prime_entry(self, key: bytes, revision: int, raw: bytes, entry: Entry) -> None:
        primed, newest = self._primed, self._primed_newest
        primed[revision] = entry
        if newest.get(key, 0) < revision:
            newest[key] = revision
        if len(primed) > PRIMED_MAX:
            self._forget_primed(primed.popitem(last=False)[1])
        if entry[BODY][0] == PACKED:
            self._remember(key, revision, raw)

    def _forget_primed(self, entry: Entry) -> None:
        """``entry`` has aged out of ``_primed``."""
        key = entry[KEY]
        if self._primed_newest.get(key) == entry[REVISION]:
            del self._primed_newest[key]

    def _remember(self, key: bytes, revision: int, raw: bytes) -> None:
        recent = self._recent
        old = recent.pop(key, None)
        if old is not None:
            self._recent_bytes -= len(old[1])
        recent[key] = (revision, raw)
        self._recent_bytes += len(raw)
        while self._recent_bytes > RECENT_JSON_BYTES:
            self._recent_bytes -= len(recent.popitem(last=False)[1][1])

    def _build(self, events: Sequence[Event],
               received: float) -> tuple[list[CacheEvent], list[tuple[bytes, Entry | None]]]:
        """The cache events of ``events``, and the map's changes for them (an entry, or
        None to delete), without the lock: the applier is the map's only writer, so
        reading it here sees exactly the state these events follow."""
        if type(events) is EventRun:
            return self._build_run(events, received)
        overlay: dict[bytes, Entry | None] = {}  # earlier events of this chunk, by key
        out: list[CacheEvent] = []
        changes: list[tuple[bytes, Entry | None]] = []
        pack = self.packer.pack
        for ev in events:
            key = ev.kv.key
            prev = overlay[key] if key in overlay else self._map.get(key)
            if ev.type is EventType.DELETE:
                overlay[key] = None
                if prev is not None:
                    out.append(CacheEvent("DELETED", restamped(prev, ev.kv.mod_revision, pack), prev,
                                          ev.committed or received))
                    changes.append((key, None))
                continue
            # (left in _primed until applied: latest_json serves it until the map has it)
            entry = self._primed.get(ev.kv.mod_revision) if self._primed else None
            if entry is None or entry[KEY] != key:
                entry = build_entry(self.fields_key, key, ev.kv.value, ev.kv.mod_revision, pack)
            overlay[key] = entry
            out.append(CacheEvent("ADDED" if prev is None else "MODIFIED", entry, prev, ev.committed or received))
            changes.append((key, entry))
        return out, changes

    def _build_run(self, run: EventRun,
                   received: float) -> tuple[list[CacheEvent], list[tuple[bytes, Entry | None]]]:
        """``_build`` of a run of updates, from its arrays (no store ``Event`` made)."""
        overlay: dict[bytes, Entry] = {}  # earlier events of this chunk, by key
        out: list[CacheEvent] = []
        changes: list[tuple[bytes, Entry | None]] = []
        pack, plural, current, primed = self.packer.pack, self.fields_key, self._map.get, self._primed
        received = run.committed or received
        for key, value, revision in zip(run.keys, run.values, range(run.first, run.last + 1), strict=True):
            prev = overlay[key] if key in overlay else current(key)
            # (left in _primed until applied: latest_json serves it until the map has it)
            entry = primed.get(revision) if primed else None
            if entry is None or entry[KEY] != key:
                entry = build_entry(plural, key, value, revision, pack)
            overlay[key] = entry
            out.append(CacheEvent("ADDED" if prev is None else "MODIFIED", entry, prev, received))
            changes.append((key, entry))
        return out, changes

    def _retain(self, revision: int) -> None:
        """Keep the state after ``revision`` (lazy mode), within the count, age and memory
        bounds, and none older than the window's start (``snapshot_at`` could not replay
        from it).

        What a snapshot alone keeps alive is what the writes after it replaced, until the
        next snapshot: the versions (about the window's bytes for those events), a copy of
        each leaf they touched, and the top level. At 10,000 renewals a second the old
        per-snapshot guess (a top level and one leaf) let 1,000 snapshots, one every
        50 ms, keep 50 s of Leases: 955,000 versions of 100,000 Leases were alive, where
        the window holds 10 s."""
        if self.config.retained_snapshots <= 0 or self.config.mode != "lazy":
            return
        now = time.perf_counter()
        self._last_retained = now
        view = self._map.snapshot()
        writes = self.generation - self._retained_at[0]
        added = self.window.added_bytes - self._retained_at[1]
        self._retained_at = (self.generation, self.window.added_bytes)
        if self._retained_costs and writes > 0:
            leaves = view.leaf_count()
            leaf_bytes = 176 + 16 * len(view) // max(leaves, 1)  # two tuples of the leaf's keys and entries
            span = 16 * leaves + min(writes, leaves) * leaf_bytes + added
            self._retained_costs[-1] += span
            self._retained_bytes += span
        self._retained.append((revision, LazySnapshot(view, revision), now))
        self._retained_costs.append(0)
        retained, config = self._retained, self.config
        oldest = now - config.retained_seconds
        while len(retained) > 1 and (len(retained) > config.retained_snapshots
                                     or self._retained_bytes > config.retained_bytes
                                     or retained[0][2] < oldest or retained[0][0] < self.window.start):
            retained.popleft()
            self._retained_bytes -= self._retained_costs.popleft()

    def compacted(self, revision: int) -> None:
        """Forget the retained and pinned snapshots from before ``revision``, the store's
        compaction point, as upstream's cacher drops its snapshots below etcd's: a list at
        such a revision (``Exact``, a continue token) then goes to the store, which answers
        410, whichever server compacted. The events of the window stay: a watch from there
        is still served, as upstream's. Runs on the loop between two of the applier's steps,
        as ``_retain`` does."""
        retained = self._retained
        while retained and retained[0][0] < revision and retained[0][0] != self.revision:
            retained.popleft()
            self._retained_bytes -= self._retained_costs.popleft()
        for old in [r for r in self._pinned if r < revision]:
            del self._pinned[old]

    # -- freshness ------------------------------------------------------------------
    async def wait_fresh(self, revision: int, timeout: float | None = None) -> bool:
        """Wait until the cache has applied everything up to ``revision``; False on timeout."""
        if self.revision >= revision and self.ready.is_set():
            return self.failed is None
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((revision, fut))
        self._clock.waiting.add(self)  # (the feed gives it every batch until then)
        try:
            async with asyncio.timeout(self.config.fresh_timeout if timeout is None else timeout):  # (see reads.py)
                await fut
        except TimeoutError:
            return False
        return self.failed is None

    def _resolve_waiters(self, fail: bool = False) -> None:
        if not self._waiters:
            return
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for rev, fut in self._waiters:
            if fut.done():
                continue
            if fail or (self.revision >= rev and self.ready.is_set()):
                fut.set_result(None)
            else:
                keep.append((rev, fut))
        self._waiters = keep
        if not keep:
            self._clock.waiting.discard(self)

    # -- readers ------------------------------------------------------------------
    def get(self, key: bytes) -> Entry | None:
        """The current entry of ``key``: one synchronous lookup, so it cannot see a
        half-applied chunk and needs neither the lock nor a snapshot."""
        return self._map.get(key)

    def latest_json(self, key: bytes) -> tuple[bytes, int] | None:
        """The newest version of ``key`` known here as served JSON, and its revision, for
        a write to start from: the current entry (as ``get``), or a newer version this
        process wrote that the applier has not reached yet. Either may have been replaced
        in the store since: the write expects the revision and reads again on conflict."""
        entry = self._map.get(key)
        newest = self._primed_newest.get(key) if self._primed_newest else None
        if newest is not None and (entry is None or newest > entry[REVISION]):
            primed = self._primed.get(newest)
            if primed is not None and primed[KEY] == key:
                entry = primed
        if entry is None:
            return None
        revision = entry[REVISION]
        recent = self._recent.get(key)
        if recent is not None and recent[0] == revision:
            return recent[1], revision
        return entry_json(entry), revision

    async def snapshot(self) -> Snapshot:
        """The current state. Lazy: O(1) under the lock. Copy: O(N) under the lock."""
        if self.config.mode == "copy":
            async with self.lock.read():
                return await self._unsafe_copy()
        await self.lock.acquire_read()
        try:
            return self._unsafe_snapshot()
        finally:
            self.lock.release_read()

    async def snapshot_with_keys(self, value: str) -> tuple[Snapshot, list[bytes]]:
        """The current state and, read in the same critical section, the keys of its
        entries whose INDEXED_LIST_FIELD is ``value`` (the cache must have the index)."""
        assert self.index is not None
        async with self.lock.read():
            snap = await self._unsafe_copy() if self.config.mode == "copy" else self._unsafe_snapshot()
            return snap, self.index.keys(value)

    def _unsafe_snapshot(self) -> LazySnapshot:
        revision = self.revision
        if self._retained and self._retained[-1][0] == revision:
            return self._retained[-1][1]
        return LazySnapshot(self._map.snapshot(), revision)

    async def _unsafe_copy(self) -> CopySnapshot:
        """Copy every entry, yielding to the loop as it goes; the read lock is held
        throughout, so the state cannot change under the copy (and the writer waits)."""
        live = self._map.live()
        keys: list[bytes] = []
        entries: list[Entry] = []
        chunk = self.config.walk_chunk
        for key, entry in live.items():
            keys.append(key)
            entries.append(entry)
            if len(keys) % chunk == 0:
                await asyncio.sleep(0)
        return CopySnapshot(keys, entries, self.revision)

    async def snapshot_at(self, revision: int) -> Snapshot | None:
        """The state at exactly ``revision`` if this cache still has it (``revision``
        must not be ahead of the cache: wait first)."""
        pinned = self._pinned.get(revision)
        if pinned is not None:
            return pinned[0]
        if revision == self.revision:
            return await self.snapshot()
        if not self._retained or revision < self._retained[0][0] or revision > self.revision:
            return None
        i = bisect_right(self._retained, revision, key=lambda r: r[0]) - 1
        base_revision, base, _ = self._retained[i]
        if base_revision == revision:
            return base
        later = self.window.since(base_revision)
        if later is None:
            return None
        changes: dict[bytes, Entry | None] = {}
        for ev in later:
            if ev.revision > revision:
                break
            changes[ev.obj[KEY]] = None if ev.type == "DELETED" else ev.obj
        return OverlaySnapshot(base, changes, revision)

    def pin(self, snap: Snapshot) -> None:
        """Keep ``snap`` for the next pages of a paginated list."""
        now = time.perf_counter()
        self._pinned[snap.revision] = (snap, now)
        self._pinned.move_to_end(snap.revision)
        while self._pinned:
            rev, (_, taken) = next(iter(self._pinned.items()))
            if len(self._pinned) <= self.config.pinned_snapshots and now - taken <= self.config.pinned_seconds:
                break
            del self._pinned[rev]

    async def watch_with_state(self, match: Filter) -> tuple[Snapshot, Watcher]:
        """A snapshot and a watcher registered for the events after it, atomically."""
        w = Watcher(match, 0, self.config.watcher_buffer)
        w.initial = True  # until its stream has sent the snapshot (CacheWatch)
        async with self.lock.read():
            snap = await self._unsafe_copy() if self.config.mode == "copy" else self._unsafe_snapshot()
            w.start_revision = snap.revision
            self.watchers.add(w)
        return snap, w

    async def watch_from(self, revision: int, match: Filter) -> tuple[list[CacheEvent], Watcher] | None:
        """The window's events after ``revision`` and a watcher for the later ones,
        or None if the window no longer reaches back to ``revision``."""
        await self.lock.acquire_read()
        try:
            # (a revision the cache has not reached yet: only the events after it)
            w = Watcher(match, max(revision, self.revision), self.config.watcher_buffer)
            # a hinted watcher is handed only the events of its value when the backlog is long
            backlog = self.window.since(revision, w.hint_at, w.hint[1]) if w.hint is not None \
                else self.window.since(revision)
            if backlog is None:
                return None
            self.watchers.add(w)
            return backlog, w
        finally:
            self.lock.release_read()

    def close(self, reason: str) -> None:
        if self.failed is None:
            self.failed = RuntimeError(reason)
        self.watchers.close_all(reason)
        self._resolve_waiters(fail=True)
