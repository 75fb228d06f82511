"""``LmdbStore``: the embedded MVCC store (see ``store.interface`` for the rules).

Threads and what they own:

- the event loop thread: the ``KeyIndex`` (sole mutator), every read
  transaction, watchers, and the callers' futures;
- the writer and applier threads (``store.lmdb.writer``): every write.

A write is durable once it is in the write-ahead log (``store.lmdb.wal``); the
applier moves it into LMDB soon after. A record is read from ``_pending``
(this process's map of records not yet in LMDB) or from LMDB.

Several processes may open the same path. The WAL lock serialises their
writers; each process learns of the others' writes by reading the WAL past its
index's revision, before every read (so reads are linearizable) and, while
anyone watches, every ``poll_interval`` while another open of the store exists
(``wal.Openers``), every ``alone_poll_interval`` while none does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import lmdb

from ..codec import DELTA, ZSTD_DICT, Codec, UnknownDictionary
from ..errors import (
    Compacted,
    CorruptStore,
    FutureRevision,
    InvalidRequest,
    StorageFull,
    StoreError,
    ValueTooLarge,
)
from ..interface import MAX_KEY_BYTES, MAX_VALUE_BYTES, Event, EventRun, EventType, KeyValue
from . import counts, wal
from . import layout as L
from .index import KeyIndex
from .recent import RecentValues
from .writer import (
    COMPACT,
    CREATE,
    DELETE,
    UPDATE,
    Batch,
    Change,
    Op,
    PendingRecords,
    UpdateRun,
    Updates,
    Writer,
    end_child,
)

log = logging.getLogger(__name__)

_OUR_FILES = {"data.mdb", "lock.mdb", "wal"}
_RANGE_CHUNK = 1000      # keys read per read transaction before yielding to the loop
_COUNT_CHUNK = 10_000    # keys a count from a kept step walks at a time
_COUNT_YIELD = 10        # steps (counts.STEP keys each) a count walks between yields to the loop
_REPLAY_CHUNK = 2000     # log records scanned per watch replay step
_WATCH_BUFFER = 100_000  # live events a watcher may hold before it falls back to replay


class _MapGate:
    """Readers share, a map resize excludes: LMDB resizes only with no transaction open."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._resizing = False
        self._mine = threading.local()  # this thread's shares: it must not wait for itself

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._resizing and not getattr(self._mine, "n", 0):
                self._cond.wait()
            self._readers += 1
        self._mine.n = getattr(self._mine, "n", 0) + 1
        try:
            yield
        finally:
            self._mine.n -= 1
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    def exclusive(self, fn: Callable[[], None]) -> None:
        if getattr(self._mine, "n", 0):
            # a nested read met a resize: waiting for our own transaction would never end
            raise StoreError("the store's map was resized during a read; retry")
        with self._cond:
            self._resizing = True
            try:
                while self._readers:
                    self._cond.wait()
                fn()
            finally:
                self._resizing = False
                self._cond.notify_all()


class _Watcher:
    """One ``watch()``: replays the log until it has caught up with the index, then
    takes live events from ``publish``. Falls back to replay if it lags too far."""

    def __init__(self, store: LmdbStore, start: bytes, end: bytes, start_revision: int, prev_kv: bool) -> None:
        self.store = store
        self.start = start
        self.end = end
        self.prev_kv = prev_kv
        self.next_rev = start_revision  # first revision not yet considered for the consumer
        self.synced = False
        # what ``push`` was handed and the consumer has not taken, oldest first, and its events
        self.buffer: list[Sequence[Event]] = []
        self.buffered = 0
        self.wakeup = asyncio.Event()
        self.closed = False
        self.registered = False

    def matches(self, key: bytes) -> bool:
        if self.end == b"":
            return key == self.start
        return key >= self.start and (self.end == b"\x00" or key < self.end)

    def push(self, events: Sequence[Event]) -> None:
        """A committed batch's events for this watcher (or a part of them), in revision order."""
        if not self.synced:  # overflowed earlier: the replay will cover these
            return
        self.buffer.append(events)
        self.buffered += len(events)
        if self.buffered > _WATCH_BUFFER:
            self.next_rev = self.buffer[0][0].kv.mod_revision
            self.drop_buffer()
            self.synced = False
        self.wakeup.set()

    def drop_buffer(self) -> None:
        self.buffer = []
        self.buffered = 0

    def take(self) -> Sequence[Event]:
        """What was pushed and not yet taken: lists joined into one, but an ``EventRun``
        alone (its events are not made here: the consumer may read its arrays)."""
        buffer = self.buffer
        if len(buffer) == 1 or any(type(events) is not list for events in buffer):
            events = buffer.pop(0)
            self.buffered -= len(events)
            return events
        self.drop_buffer()
        return [event for events in buffer for event in events]

    def __aiter__(self) -> _Watcher:
        return self

    async def __anext__(self) -> Sequence[Event]:
        try:
            return await self._next()
        except BaseException:
            self.closed = True
            self.store._watchers.discard(self)
            raise

    async def _next(self) -> Sequence[Event]:
        store = self.store
        if not self.registered:
            store._start()
            if self.next_rev == 0:
                store._catch_up()
                self.next_rev = store._index.revision + 1
            store._watchers.add(self)
            store._ensure_poller()
            self.registered = True
        while True:
            if self.closed:
                raise StopAsyncIteration
            if self.buffer:
                self.next_rev = store._index.revision + 1  # (the rest of the buffer is after it)
                return self.take()
            if not self.synced:
                events = store._replay(self)
                if events:
                    return events
                if not self.synced:
                    await asyncio.sleep(0)
                continue
            self.wakeup.clear()
            await self.wakeup.wait()

    async def aclose(self) -> None:
        self.closed = True
        self.store._watchers.discard(self)
        self.wakeup.set()


class LmdbStore:
    """The embedded store. ``LmdbStore(path)`` opens or creates ``path`` (a directory)."""

    def __init__(self, path: str, *, codec: Codec | None = None, map_size: int = 1 << 34,
                 history_deltas: bool = True, auto_compact_interval: float = 300.0,
                 poll_interval: float = 0.005, alone_poll_interval: float = 0.1, create: bool = True,
                 keyframe_every: int = 8, recent_values: int = 16_384) -> None:
        self.path = os.path.abspath(path)
        self.codec = codec or Codec()
        self.poll_interval = poll_interval
        self.alone_poll_interval = alone_poll_interval
        self.auto_compact_interval = auto_compact_interval
        self.commit_observer: Callable[[int, float], None] | None = None
        self.stats = {"batches": 0, "ops": 0, "map_resizes": 0}
        self._map_size = map_size
        self._history_deltas = history_deltas
        self._keyframe_every = keyframe_every
        self._recent = RecentValues(recent_values)
        self._counts = counts.CountMemo()
        self._gate = _MapGate()
        self._env, self._dbs = self._open_env(create)
        self._wal_dir = os.path.join(self.path, "wal")
        # revision -> record, until LMDB holds it; in revision order, trimmed from the front
        self._pending = PendingRecords()
        self._applier: subprocess.Popen[bytes] | None = None
        self._trimmed_at = 0.0
        self._dict_count = 0
        try:
            os.makedirs(self._wal_dir, exist_ok=True)
            self._recover()
            self._index = self._load()
        except BaseException:
            self._env.close()
            raise
        self._wal_head = wal.WalHead(self._wal_dir)
        self._openers = wal.Openers(self._wal_dir)
        self._wal_reader = wal.WalReader(self._wal_dir)  # the loop's: other processes' writes
        self._wal_reader.seek(self._index.revision + 1)
        self._watchers: set[_Watcher] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: Writer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._poller: asyncio.Task[None] | None = None
        self._closed = False
        self._env_closed = False

    # -- opening --------------------------------------------------------------
    def _open_env(self, create: bool) -> tuple[lmdb.Environment, dict[bytes, Any]]:
        path = self.path
        if os.path.exists(path) and not os.path.isdir(path):
            raise CorruptStore(f"{path} is a file, not a store directory; refusing to touch it")
        if os.path.isdir(path):
            foreign = sorted(set(os.listdir(path)) - _OUR_FILES)
            if foreign:
                raise CorruptStore(f"{path} holds files that are not this store's ({', '.join(foreign[:5])}); "
                                   "refusing to touch it")
        elif create:
            os.makedirs(path, exist_ok=True)
        # An empty data.mdb is another process's LMDB open creating it (serve --workers N,
        # starting together on a new directory): LMDB writes its meta pages under its lock,
        # which lmdb.open below waits for, so it is a new store, not a foreign file.
        data = os.path.join(path, "data.mdb")
        fresh = not os.path.exists(data) or os.path.getsize(data) == 0
        if not fresh:
            with open(os.path.join(path, "data.mdb"), "rb") as f:
                head = f.read(32)
            # LMDB's meta page: MDB_MAGIC (0xBEEFC0DE, little endian) at offset 16
            if len(head) < 20 or head[16:20] != b"\xde\xc0\xef\xbe":
                raise CorruptStore(f"{path}/data.mdb is not an LMDB file; refusing to touch it")
        try:
            env = lmdb.open(path, map_size=self._map_size, max_dbs=8, max_readers=1024,
                            subdir=True, sync=True, metasync=True, readahead=False, lock=True,
                            create=create)
        except lmdb.Error as e:
            raise CorruptStore(f"cannot open {path} as a store: {e}") from e
        try:
            env.reader_check()  # free slots of readers that died (kill -9)
            if not fresh:
                with env.begin() as txn:
                    names = {k for k, _ in txn.cursor()}
                if names and not names <= {L.DB_META, L.DB_LOG, L.DB_DICTS}:
                    raise CorruptStore(f"{path} is an LMDB database of something else; refusing to touch it")
            dbs = {name: env.open_db(name) for name in (L.DB_META, L.DB_LOG, L.DB_DICTS)}
            with env.begin(write=True) as txn:
                fmt = txn.get(L.META_FORMAT, db=dbs[L.DB_META])
                if fmt is None:
                    if txn.stat(dbs[L.DB_LOG])["entries"]:
                        raise CorruptStore(f"{path} has a log but no format marker; refusing to touch it")
                    txn.put(L.META_FORMAT, L.MAGIC + L.U32.pack(L.LAYOUT_VERSION), db=dbs[L.DB_META])
                    txn.put(L.META_REV, L.U64.pack(L.FIRST_REVISION), db=dbs[L.DB_META])
                    txn.put(L.META_COMPACT, L.U64.pack(0), db=dbs[L.DB_META])
                    txn.put(L.META_COMPACTED, L.U64.pack(0), db=dbs[L.DB_META])
                elif not fmt.startswith(L.MAGIC):
                    raise CorruptStore(f"{path} has an unknown format marker; refusing to touch it")
                elif L.U32.unpack_from(fmt, len(L.MAGIC))[0] != L.LAYOUT_VERSION:
                    raise CorruptStore(f"{path} has layout version {L.U32.unpack_from(fmt, len(L.MAGIC))[0]}, "
                                       f"this build reads {L.LAYOUT_VERSION}")
        except BaseException:
            env.close()
            raise
        return env, dbs

    def _recover(self) -> None:
        """Move whatever the WAL holds beyond LMDB into LMDB (a crash may have left some),
        and cut a torn record off its end. Under the WAL lock: no writer is mid-batch."""
        lock = wal.WalLock(self._wal_dir)
        try:
            from .applier import Applier  # here: ``python -m store.lmdb.applier`` must not find it imported

            with lock:
                applier = Applier(self.path, history_deltas=self._history_deltas,
                                  keyframe_every=self._keyframe_every, env=self._env, dbs=self._dbs)
                try:
                    while applier.apply_once():
                        pass
                    wal.truncate_torn_tail(self._wal_dir, applier.reader)
                    with self._env.begin() as txn:
                        applied = L.u64(txn.get(L.META_REV, db=self._dbs[L.DB_META]))
                    wal.delete_applied(self._wal_dir, applied)
                    head = wal.WalHead(self._wal_dir)
                    head.publish(applied)  # everything is in LMDB now; under the lock, so it only grows
                    head.close()
                finally:
                    applier.close()
        except lmdb.Error as e:
            st = os.statvfs(self.path)
            if st.f_bavail * st.f_frsize < (16 << 20):
                raise StorageFull(f"cannot replay the write-ahead log into {self.path}: the disk is full "
                                  f"({e}); nothing is lost: free space and open the store again") from e
            raise StoreError(f"cannot replay the write-ahead log into {self.path}: {e}") from e
        finally:
            lock.close()

    def _load(self) -> KeyIndex:
        """Rebuild the index from the log and load the compression dictionaries."""
        meta, logdb = self._dbs[L.DB_META], self._dbs[L.DB_LOG]
        entries: dict[bytes, tuple[int, int, int]] = {}
        hdr = L.HEADER.unpack_from
        with self._env.begin(buffers=True) as txn:
            rev = L.u64(txn.get(L.META_REV, db=meta))
            for k, v in txn.cursor(db=logdb):
                kind, _f, create, version, _p, klen = hdr(v)
                r = L.u64(k)
                key = bytes(v[L.HEADER_SIZE:L.HEADER_SIZE + klen])
                entries[key] = (r, create, version) if kind == L.PUT else (r, 0, 0)
            self._load_dictionaries(txn)
        return KeyIndex(rev, entries)

    def _start(self) -> None:
        """Start the writer (and its syncer process) and background tasks on the running loop (first use)."""
        if self._closed:
            raise StoreError("store is closed")
        if self._writer is not None:
            return
        self._loop = asyncio.get_running_loop()
        loop = self._loop
        self._writer = Writer(self._env, self._dbs, self.codec, self._index, self._recent, self._on_commit,
                              self._grow_map, self._txn, self._wal_dir, self._pending, loop)
        self._start_applier()
        if self.auto_compact_interval > 0:
            self._tasks.append(loop.create_task(self._auto_compact()))

    def _start_applier(self) -> None:
        """The process that moves the WAL into LMDB (``store.lmdb.applier``: why a process)."""
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._applier = subprocess.Popen([sys.executable, "-m", "store.lmdb.applier", self.path,
                                          str(self._map_size), "1" if self._history_deltas else "0",
                                          str(self._keyframe_every)],
                                         stdin=subprocess.PIPE, env=env)

    def _stop_applier(self) -> None:
        """Close its input: it makes a last pass and exits."""
        p = self._applier
        if p is None:
            return
        self._applier = None
        end_child(p, 60)

    def _trim_pending(self, applied: int) -> None:
        self._pending.trim(applied)

    # -- transactions ---------------------------------------------------------
    @contextlib.contextmanager
    def _read(self) -> Iterator[lmdb.Transaction]:
        for _attempt in range(3):
            with self._gate.reading():
                try:
                    txn = self._env.begin()
                except lmdb.MapResizedError:
                    pass  # another process grew the map: adopt its size (below), then read
                else:
                    try:
                        yield txn
                        return
                    finally:
                        txn.abort()
            self._gate.exclusive(lambda: self._env.set_mapsize(0))
        raise StoreError("could not begin a read transaction: the map keeps being resized")

    @contextlib.contextmanager
    def _txn(self, write: bool = False) -> Iterator[lmdb.Transaction]:
        """A transaction a map resize waits for; a write one commits if the body returns."""
        for _attempt in range(3):
            with self._gate.reading():
                try:
                    txn = self._env.begin(write=write)
                except lmdb.MapResizedError:
                    pass
                else:
                    try:
                        yield txn
                    except BaseException:
                        txn.abort()
                        raise
                    if write:
                        txn.commit()
                    else:
                        txn.abort()
                    return
            self._gate.exclusive(lambda: self._env.set_mapsize(0))
        raise StoreError("could not begin a transaction: the map keeps being resized")

    def _grow_map(self) -> None:
        """Called by the writer on MapFullError: double the map (the file grows lazily)."""
        def grow() -> None:
            self._map_size = max(self._map_size * 2, self._env.info()["map_size"] * 2)
            self._env.set_mapsize(self._map_size)
        self._gate.exclusive(grow)
        self.stats["map_resizes"] += 1
        log.info("store map grown to %d bytes", self._map_size)

    def _meta(self, txn: lmdb.Transaction, key: bytes) -> int:
        return int(L.u64(txn.get(key, db=self._dbs[L.DB_META])))

    # -- applying commits (loop thread) ---------------------------------------
    def _on_commit(self, batch: Batch) -> None:
        if self._env_closed:  # batches finished while closing: just answer their callers
            self._answer(batch.ops)
            return
        # The callers first, the watchers after: each only wakes at the loop's next turn, in
        # the order woken, and a writer's task that runs before the watch cache's feed
        # hands its serialised object to the cache (``prime``), which then spares a decode.
        # Nothing runs before this callback has applied the batch to the index.
        self._answer(batch.ops)
        index = self._index
        if batch.changes:
            first = batch.changes[0].revision
            if first > index.revision + 1:
                self._catch_up(first - 1)
            applied = index.revision
            fresh = [c if c.revision > applied else c.after(applied)  # type: ignore[union-attr]
                     for c in batch.changes if c.last > applied]
            if fresh:
                self._apply(fresh, fresh[-1].last, batch.committed)
            reader, pos = self._wal_reader, batch.wal_position
            if pos is not None and reader.next_revision == first:
                reader.skip_to(pos[0], pos[2], batch.last_revision + 1)  # no need to read our own back
        if batch.ops:
            writes = sum([op.writes() for op in batch.ops])
            self.stats["batches"] += 1
            self.stats["ops"] += writes
            if self.commit_observer is not None:
                self.commit_observer(writes, batch.commit_seconds)
        now = time.monotonic()
        if now - self._trimmed_at > 0.05:
            self._trimmed_at = now
            if self._applier is not None and self._applier.poll() is not None and not self._closed:
                log.warning("the store's applier exited with %s; starting another", self._applier.returncode)
                self._start_applier()
            with self._read() as txn:
                self._trim_pending(self._meta(txn, L.META_REV))
                if txn.stat(self._dbs[L.DB_DICTS])["entries"] != self._dict_count:
                    self._load_dictionaries(txn)

    def _load_dictionaries(self, txn: lmdb.Transaction) -> None:
        """Take up dictionaries the applier trained: new values are compressed with them."""
        n = 0
        for k, v in txn.cursor(db=self._dbs[L.DB_DICTS]):
            n += 1
            dict_id = L.U32.unpack(k)[0]
            if not self.codec.has_dictionary(dict_id):
                prefix, data = L.decode_dict(v)
                self.codec.add_dictionary(dict_id, prefix, data)
        self._dict_count = n

    @staticmethod
    def _answer(ops: list[Op | Updates]) -> None:
        for op in ops:
            fut = op.future
            if fut.done():  # the caller was cancelled; the write happened all the same
                continue
            if op.error is None:
                fut.set_result(op.result)
            else:
                fut.set_exception(op.error)

    def _apply(self, changes: Sequence[Change | UpdateRun], revision: int, committed: float = 0.0) -> None:
        index = self._index
        index.put_changes(changes)
        index.revision = revision
        if self._watchers:
            self._publish(changes, committed)

    def _catch_up(self, upto: int = 0) -> None:
        """Apply what other processes wrote since the index's revision (up to ``upto``
        when given): from LMDB what is applied there, then from the WAL."""
        index = self._index
        if self._wal_head.read() <= index.revision:
            return  # nothing new, from anyone: no LMDB or WAL access
        changes: list[Change] = []
        last = index.revision

        # Every record read here is another process's: ours are applied (_on_commit) in the
        # same callback that publishes the WAL head showing them (Writer._synced), so no
        # catch-up runs in between. Their commit time is not known here (0.0).
        def add(rev: int, buf: bytes | memoryview) -> None:
            nonlocal last
            r = L.decode_record(buf)
            if r.kind == L.PUT:
                changes.append(Change(rev, L.PUT, r.key, r.create_revision, r.version, r.prev_revision,
                                      None, frame=r.frame))
            else:
                changes.append(Change(rev, L.DELETE, r.key, 0, 0, r.prev_revision, None))
            last = rev

        with self._read() as txn:
            applied = self._meta(txn, L.META_REV)
            self._trim_pending(applied)
            if self._meta(txn, L.META_COMPACTED) > last:
                # Compaction removed records we never saw (deletes among them): the log no
                # longer replays our gap. Rebuild the index from it, and send watchers
                # that were following back to the log, where they find their start compacted.
                self._rebuild_index(txn)
                for w in self._watchers:
                    w.synced = False
                    w.drop_buffer()
                return
            if applied > last:  # applied by another process, and perhaps gone from the WAL
                cur = txn.cursor(db=self._dbs[L.DB_LOG])
                if cur.set_range(L.rev_key(last + 1)):
                    for k, v in cur:
                        rev = L.u64(k)
                        if rev > applied or (upto and rev > upto):
                            break
                        add(rev, v)
            reader = self._wal_reader
            if reader.next_revision > last + 1:  # ahead of us (cannot happen): reposition
                reader.seek(last + 1)
            elif reader.next_revision <= last:
                # Behind what LMDB gave us (the applier can overtake the delivery of our own
                # batches): read forward to the index's revision, not LMDB's (``upto`` may have
                # stopped short of it: a reader left ahead of the index would have to seek
                # back, which reads its segment from the start); seek only if the segment went.
                for _skipped in reader.read(last - reader.next_revision + 1):
                    pass
                if reader.next_revision <= last:
                    reader.seek(last + 1)
            # only what the head says is durable; our own batches come through _on_commit
            durable = self._wal_head.read()
            limit = min(upto or durable, durable) - reader.next_revision + 1
            for rev, payload in reader.read(max(limit, 0)):
                if rev <= last:
                    continue
                if rev > applied:
                    self._pending.add(rev, payload)
                add(rev, payload)
            if changes:
                self._resolve_frames(txn, changes)
        if changes:
            self._apply(changes, last)

    def _rebuild_index(self, txn: lmdb.Transaction) -> None:
        entries: dict[bytes, tuple[int, int, int]] = {}
        hdr = L.HEADER.unpack_from
        for k, v in txn.cursor(db=self._dbs[L.DB_LOG]):
            kind, _f, create, version, _p, klen = hdr(v)
            entries[bytes(v[L.HEADER_SIZE:L.HEADER_SIZE + klen])] = (
                (L.u64(k), create, version) if kind == L.PUT else (L.u64(k), 0, 0))
        fresh = KeyIndex(self._meta(txn, L.META_REV), entries)
        index = self._index  # the same object: the writer holds a reference to it
        index.entries, index._sorted, index._unsorted, index._removed = (
            fresh.entries, fresh._sorted, fresh._unsorted, fresh._removed)
        index.revision = fresh.revision
        self._wal_reader.seek(index.revision + 1)

    def _resolve_frames(self, txn: lmdb.Transaction, changes: list[Change]) -> None:
        memo: dict[bytes, tuple[int, bytes]] = {}
        for c in changes:
            if c.kind == L.PUT and c.value is None and c.frame is not None and self._watchers:
                c.value = self._value_at(txn, c.revision, c.frame, c.key, memo)

    def _publish(self, pieces: Sequence[Change | UpdateRun], committed: float = 0.0) -> None:
        watchers = [w for w in self._watchers if w.synced]
        if not watchers:
            return
        all_events: list[Sequence[Event]] | None = None  # every change's event, for every watcher of every key
        changes: list[Change] | None = None    # the runs as a Change each, made once for the other watchers
        made: list[Event | None] = []
        # every key, from before this batch (a watch cache's feed): every event, made in one pass
        every = [w.end == b"\x00" and w.start <= b"\x00" and not w.prev_kv and pieces[0].revision >= w.next_rev
                 for w in watchers]
        for w, takes_all in zip(watchers, every, strict=True):
            if takes_all:
                if all_events is None:
                    all_events = self._events(pieces, committed)
                for events in all_events:
                    w.push(events)
                continue
            mine: list[Event] = []
            first, start, end, prev_kv = w.next_rev, w.start, w.end, w.prev_kv
            if changes is None:
                changes = self._changes(pieces, [w for w, takes_all in zip(watchers, every, strict=True)
                                                 if not takes_all])
                made = [None] * len(changes)
            for i, c in enumerate(changes):
                key = c.key
                if c.revision < first or (key != start if end == b"" else (
                        key < start or (end != b"\x00" and key >= end))):  # (_Watcher.matches)
                    continue
                if prev_kv and c.prev_revision:
                    mine.append(self._event(c, self._prev_kv(c), c.committed or committed))
                    continue
                event = made[i]
                if event is None:
                    event = made[i] = self._event(c, None, c.committed or committed)
                mine.append(event)
            if mine:
                w.push(mine)

    @staticmethod
    def _changes(pieces: Sequence[Change | UpdateRun], watchers: list[_Watcher]) -> list[Change]:
        """A ``Change`` each, for watchers of some keys: a run's made only if some watcher's
        range reaches between its least and greatest key (a run is a request's objects of
        one resource; a watcher of another resource's prefix has none of them)."""
        changes: list[Change] = []
        for piece in pieces:
            if isinstance(piece, UpdateRun):
                least, most = min(piece.keys), max(piece.keys)
                if any(least <= w.start <= most if w.end == b"" else (
                        most >= w.start and (w.end == b"\x00" or least < w.end)) for w in watchers):
                    changes += piece.changes()
            else:
                changes.append(piece)
        return changes

    def _events(self, pieces: Sequence[Change | UpdateRun], committed: float) -> list[Sequence[Event]]:
        """The event of each change, without prev_kv (``_event`` of each, in one loop), in
        lists; a run's as an ``EventRun`` (its arrays, no event made)."""
        put, delete, kv_of, event_of = EventType.PUT, EventType.DELETE, KeyValue, Event
        out: list[Sequence[Event]] = []
        made: list[Event] = []
        for c in pieces:
            if type(c) is UpdateRun:
                if made:
                    out.append(made)
                    made = []
                out.append(EventRun(c.first, c.keys, c.values, c.entries, committed))
                continue
            assert isinstance(c, Change)
            if c.kind == L.PUT and c.value is not None:
                made.append(event_of(put, kv_of(c.key, c.value, c.create_revision, c.revision, c.version), None,
                                     c.committed or committed))
            elif c.kind == L.PUT:
                made.append(self._event(c, None, c.committed or committed))
            else:
                made.append(event_of(delete, kv_of(c.key, b"", 0, c.revision, 0), None, c.committed or committed))
        if made:
            out.append(made)
        return out

    def _event(self, c: Change, prev: KeyValue | None, committed: float = 0.0) -> Event:
        if c.kind == L.PUT:
            value = c.value
            if value is None:
                with self._read() as txn:
                    value = self._value_at(txn, c.revision, c.frame, c.key)
                c.value = value
            return Event(EventType.PUT, KeyValue(c.key, value, c.create_revision, c.revision, c.version), prev,
                         committed)
        return Event(EventType.DELETE, KeyValue(c.key, b"", 0, c.revision, 0), prev, committed)

    def _prev_kv(self, c: Change, txn: lmdb.Transaction | None = None) -> KeyValue | None:
        if txn is None:
            with self._read() as own:
                return self._prev_kv(c, own)
        # the caller's transaction: no nested read (see _MapGate)
        buf = self._record_buf(txn, c.prev_revision)
        if buf is None:
            return None
        r = L.decode_record(buf)
        if r.kind != L.PUT:
            return None
        value = self._value_at(txn, c.prev_revision, r.frame, r.key)
        return KeyValue(r.key, value, r.create_revision, c.prev_revision, r.version)

    # -- decoding -------------------------------------------------------------
    def _decode(self, txn: lmdb.Transaction, frame: bytes) -> bytes:
        try:
            return self.codec.decode(frame)
        except UnknownDictionary as e:  # trained by another process after we opened
            buf = txn.get(L.U32.pack(e.dict_id), db=self._dbs[L.DB_DICTS])
            if buf is None:
                raise CorruptStore(f"value refers to compression dictionary {e.dict_id}, which is missing") from e
            prefix, data = L.decode_dict(buf)
            self.codec.add_dictionary(e.dict_id, prefix, data, activate=False)
            return self.codec.decode(frame)

    def _value_at(self, txn: lmdb.Transaction, revision: int, frame: bytes | None = None,
                  key: bytes | None = None, memo: dict[bytes, tuple[int, bytes]] | None = None) -> bytes:
        """The raw value of the PUT record at ``revision`` (its frame given, or read).

        A DELTA frame needs the key's previous version first: walk back through
        ``prev_revision`` to a full frame, a recently written value, or one in
        ``memo`` (the replay of a watch keeps each key's last value there)."""
        if frame is None:
            frame = self._record(txn, revision).frame
        deltas: list[bytes] = []
        rev = revision
        value: bytes | None = None
        while True:
            if key is not None:
                value = self._recent.value_at(key, rev)
                if value is None and memo is not None:
                    m = memo.get(key)
                    value = m[1] if m is not None and m[0] == rev else None
                if value is not None:
                    break
            if not frame or frame[0] != DELTA:
                value = self._decode(txn, frame) if frame else b""
                break
            deltas.append(frame)
            rev = self._record(txn, rev).prev_revision
            buf = self._record_buf(txn, rev)
            if buf is None:
                raise CorruptStore(f"revision {revision} is a delta against {rev}, which is missing")
            frame = L.decode_record(buf).frame
        for d in reversed(deltas):
            value = self.codec.decode_delta(d, value)
        if memo is not None and key is not None:
            memo[key] = (revision, value)
        return value

    def _record_buf(self, txn: lmdb.Transaction, revision: int) -> bytes | memoryview | None:
        """The record at ``revision``: not yet applied (``_pending``), or in LMDB. The
        applier may move it between the two looks: then a fresh transaction sees it."""
        buf: bytes | memoryview | None = self._pending.get(revision)
        if buf is None:
            buf = txn.get(L.rev_key(revision), db=self._dbs[L.DB_LOG])
            if buf is None and revision > self._meta(txn, L.META_REV):
                with self._read() as fresh:
                    buf = fresh.get(L.rev_key(revision), db=self._dbs[L.DB_LOG])
        return buf

    def _records(self, txn: lmdb.Transaction, first: int, last: int) -> Iterator[tuple[int, bytes | memoryview]]:
        """Records ``first..last`` in order: LMDB's (a cursor), then those not applied yet."""
        applied = self._meta(txn, L.META_REV)
        rev = first
        if first <= min(applied, last):
            cur = txn.cursor(db=self._dbs[L.DB_LOG])
            if cur.set_range(L.rev_key(first)):
                for k, v in cur:
                    rev = L.u64(k)
                    if rev > min(applied, last):
                        break
                    yield rev, v
            rev = min(applied, last) + 1
        while rev <= last:
            buf = self._record_buf(txn, rev)
            if buf is None:
                raise CorruptStore(f"the record of revision {rev} is missing")
            yield rev, buf
            rev += 1

    def _record(self, txn: lmdb.Transaction, revision: int) -> L.Record:
        buf = self._record_buf(txn, revision)
        if buf is None:
            raise CorruptStore(f"the record of revision {revision} is missing")
        return L.decode_record(buf)

    def _locate(self, txn: lmdb.Transaction, key: bytes, revision: int) -> tuple[int, L.Record] | None:
        """The PUT record of ``key`` visible at ``revision`` (the index's latest, or back
        through prev links), or None if the key did not exist then."""
        found = self._visible(txn, key, revision)
        return None if found is None else (found[0], L.decode_record(found[1]))

    def _visible(self, txn: lmdb.Transaction, key: bytes,
                 revision: int) -> tuple[int, bytes | memoryview] | None:
        """``_locate``'s record undecoded: its revision and bytes (a walk back reads headers only)."""
        e = self._index.entries.get(key)
        if e is None:
            return None
        rev = e[0]
        if rev <= revision:
            if e[1] == 0:
                return None
            buf = self._record_buf(txn, rev)
        else:
            buf = self._record_buf(txn, rev)
            while True:
                if buf is None:
                    return None
                prev = L.HEADER.unpack_from(buf)[4]
                if not prev:
                    return None
                buf = self._record_buf(txn, prev)
                rev = prev
                if rev <= revision:
                    break
        if buf is None or buf[0] != L.PUT:
            return None
        return rev, buf

    def _version_at(self, txn: lmdb.Transaction, key: bytes, revision: int) -> KeyValue | None:
        """``key`` as it was at ``revision``."""
        found = self._locate(txn, key, revision)
        if found is None:
            return None
        rev, r = found
        return KeyValue(key, self._value_at(txn, rev, r.frame, key), r.create_revision, rev, r.version)

    def _decode_many(self, txn: lmdb.Transaction, found: list[tuple[int, L.Record]]) -> list[bytes]:
        """The values of many records: frames compressed with one dictionary are
        decompressed together in one zstd call; the rest one by one."""
        values: list[bytes | None] = [None] * len(found)
        by_dict: dict[int, list[int]] = {}
        for i, (rev, r) in enumerate(found):
            frame = r.frame
            if frame and frame[0] == ZSTD_DICT and self._recent.value_at(r.key, rev) is None:
                dict_id = L.U32.unpack_from(frame, 1)[0]
                by_dict.setdefault(dict_id, []).append(i)
            else:
                values[i] = self._value_at(txn, rev, frame, r.key)
        for dict_id, idx in by_dict.items():
            if len(idx) < 8:
                for i in idx:
                    values[i] = self._value_at(txn, found[i][0], found[i][1].frame, found[i][1].key)
                continue
            try:
                out = self.codec.decode_many(dict_id, [found[i][1].frame for i in idx])
            except UnknownDictionary:
                out = [self._value_at(txn, found[i][0], found[i][1].frame, found[i][1].key) for i in idx]
            for i, v in zip(idx, out, strict=True):
                values[i] = v
        return values  # type: ignore[return-value]

    def _check_revision(self, txn: lmdb.Transaction, revision: int) -> int:
        current = self._index.revision
        if revision == 0:
            return current
        if revision > current:
            raise FutureRevision(revision, current)
        compact = self._meta(txn, L.META_COMPACT)
        if revision < compact:
            raise Compacted(revision, compact)
        return revision

    # -- the Store interface ----------------------------------------------------
    def _submit(self, kind: int, key: bytes, value: bytes, expected: int) -> asyncio.Future[int]:
        self._start()
        loop = self._loop
        assert loop is not None and self._writer is not None
        fut: asyncio.Future[int] = loop.create_future()
        self._writer.submit(Op(kind, key, value, expected, fut))
        return fut

    @staticmethod
    def _check_key(key: object) -> bytes:
        if not isinstance(key, bytes):
            if not isinstance(key, (bytearray, memoryview)):
                raise InvalidRequest(f"key must be bytes, not {type(key).__name__}")
            key = bytes(key)
        if not key or len(key) > MAX_KEY_BYTES:
            raise InvalidRequest(f"key must be 1 to {MAX_KEY_BYTES} bytes, got {len(key)}")
        return key

    @staticmethod
    def _check_value(value: object) -> bytes:
        if not isinstance(value, bytes):
            if not isinstance(value, (bytearray, memoryview)):
                raise InvalidRequest(f"value must be bytes, not {type(value).__name__}")
            value = bytes(value)
        if len(value) > MAX_VALUE_BYTES:
            raise ValueTooLarge(len(value), MAX_VALUE_BYTES)
        return value

    async def create(self, key: bytes, value: bytes) -> int:
        return await self._submit(CREATE, self._check_key(key), self._check_value(value), 0)

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        return await self._submit(UPDATE, self._check_key(key), self._check_value(value), expected_revision)

    async def update_many(self, items: Sequence[tuple[bytes, bytes, int]]) -> list[int | StoreError]:
        """``store.update_many``: the updates handed to the writer as one ``Updates`` (one
        request, one future; each update still its own mutation, record and event), so
        they share its commit. An item whose key or value is refused fails alone, as the
        interface says."""
        self._start()
        assert self._loop is not None and self._writer is not None
        keys: list[bytes] = []
        values: list[bytes] = []
        expected: list[int] = []
        refused: dict[int, StoreError] = {}
        for i, (k, v, e) in enumerate(items):
            if not (type(k) is bytes and 0 < len(k) <= MAX_KEY_BYTES and type(v) is bytes
                    and len(v) <= MAX_VALUE_BYTES):
                try:
                    k, v = self._check_key(k), self._check_value(v)
                except StoreError as error:
                    refused[i] = error
                    continue
            keys.append(k)
            values.append(v)
            expected.append(e)
        answers: list[int | StoreError] = []
        if keys:
            op = Updates(keys, values, expected, self._loop.create_future())
            self._writer.submit_many([op])
            try:
                answers = await op.future
            except StoreError as failed:
                answers = [failed] * len(keys)
        for i in sorted(refused):
            answers.insert(i, refused[i])
        return answers

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        return await self._submit(DELETE, self._check_key(key), b"", expected_revision)

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        key = self._check_key(key)
        self._start()
        self._catch_up()
        with self._read() as txn:
            rev = self._check_revision(txn, revision)
            return self._version_at(txn, key, rev)

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        if end == b"":
            kv = await self.get(start, revision)
            return ([kv] if kv else []), (revision or self._index.revision), False
        self._start()
        self._catch_up()
        with self._read() as txn:
            rev = self._check_revision(txn, revision)
        out: list[KeyValue] = []
        resume = start
        while True:
            # The key list may change between chunks (we yield to the loop): resume after the
            # last key seen. Versions are read at ``rev``, so later writes do not show.
            keys = self._index.range_keys(resume, end, _RANGE_CHUNK)
            if not keys:
                return out, rev, False
            with self._read() as txn:
                compact = self._meta(txn, L.META_COMPACT)
                if rev < compact:  # compacted while we were reading
                    raise Compacted(rev, compact)
                found: list[tuple[int, L.Record]] = []
                more = False
                for key in keys:
                    f = self._locate(txn, key, rev)
                    if f is None:
                        continue
                    if limit and len(out) + len(found) >= limit:
                        more = True
                        break
                    found.append(f)
                for (mod, r), value in zip(found, self._decode_many(txn, found), strict=True):
                    out.append(KeyValue(r.key, value, r.create_revision, mod, r.version))
                if more:
                    return out, rev, True
            if len(keys) < _RANGE_CHUNK:
                return out, rev, False
            resume = keys[-1] + b"\x00"
            await asyncio.sleep(0)

    async def count(self, start: bytes, end: bytes, revision: int = 0) -> tuple[int, int]:
        """See ``Store.count``: from the key index, which knows each key's latest record;
        only a key changed since ``revision`` (and not in a life begun by then) has its
        history walked back in the log, record headers only. No value is read. A range
        counted at a revision is remembered by steps (``store.lmdb.counts``): the counts
        of the rest of a paginated list, page after page, walk a step each."""
        if end == b"":
            start = self._check_key(start)
        self._start()
        self._catch_up()
        with self._read() as txn:
            rev = self._check_revision(txn, revision)
        if end == b"":
            with self._read() as txn:
                return int(self._visible(txn, start, rev) is not None), rev
        kept = self._counts.get(rev, end, start)
        if kept is not None:
            upto, n = kept.split(start)
            resume: bytes | None = start
            while resume is not None:  # from start to the next step kept: a step of keys, or little more
                live, resume = self._count_step(resume, upto or end, rev, _COUNT_CHUNK)
                n += live
                if resume is not None:
                    await asyncio.sleep(0)
        else:
            starts: list[bytes] = []
            lives: list[int] = []
            resume = start
            while resume is not None:
                starts.append(resume)
                live, resume = self._count_step(resume, end, rev, counts.STEP)
                lives.append(live)
                if len(starts) % _COUNT_YIELD == 0:
                    await asyncio.sleep(0)
            n = self._counts.put(rev, end, starts, lives).after[0]
        with self._read() as txn:
            compact = self._meta(txn, L.META_COMPACT)
            if rev < compact:  # compacted while we were counting: the log walks may have missed records
                raise Compacted(rev, compact)
        return n, rev

    def _count_step(self, start: bytes, end: bytes, revision: int, limit: int) -> tuple[int, bytes | None]:
        """The keys live at ``revision`` among the first ``limit`` in ``[start, end)``, and where
        the next step begins (None: at ``end``)."""
        live, unsure, resume = self._index.count_at(start, end, revision, limit)
        if unsure:
            with self._read() as txn:
                live += sum(1 for key in unsure if self._visible(txn, key, revision) is not None)
        return live, resume

    def watch(self, start: bytes, end: bytes, start_revision: int = 0,
              prev_kv: bool = False) -> AsyncIterator[Sequence[Event]]:
        return _Watcher(self, start, end, start_revision, prev_kv)

    def _replay(self, w: _Watcher) -> list[Event]:
        """One step of a watcher's catch-up from the log; marks it synced when done."""
        self._catch_up()
        index = self._index
        events: list[Event] = []
        with self._read() as txn:
            compact = self._meta(txn, L.META_COMPACT)
            if w.next_rev < compact:
                raise Compacted(w.next_rev, compact)
            target = index.revision
            scanned = 0
            memo: dict[bytes, tuple[int, bytes]] = {}
            last = w.next_rev - 1
            for rev, v in self._records(txn, w.next_rev, target):
                last = rev
                scanned += 1
                key = L.record_key(v)
                if w.matches(key):
                    r = L.decode_record(v)
                    if r.kind == L.PUT:
                        c = Change(rev, L.PUT, key, r.create_revision, r.version, r.prev_revision,
                                   self._value_at(txn, rev, r.frame, key, memo))
                    else:
                        c = Change(rev, L.DELETE, key, 0, 0, r.prev_revision, None)
                    events.append(self._event(c, self._prev_kv(c, txn) if w.prev_kv and c.prev_revision else None))
                if scanned >= _REPLAY_CHUNK:
                    break
            if scanned < _REPLAY_CHUNK:
                last = max(target, w.next_rev - 1)  # a watch may start beyond the store's revision
        w.next_rev = last + 1
        if w.next_rev > index.revision:
            w.synced = True
        return events

    async def compact(self, revision: int) -> None:
        await self._submit(COMPACT, b"", b"", revision)

    async def revision(self) -> int:
        self._start()
        self._catch_up()
        return self._index.revision

    async def compacted_revision(self) -> int:
        with self._read() as txn:
            return self._meta(txn, L.META_COMPACT)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = self._tasks + ([self._poller] if self._poller else [])
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for w in list(self._watchers):
            await w.aclose()
        if self._writer is not None:
            await self._writer.stop()
            await asyncio.to_thread(self._stop_applier)
        self._env_closed = True
        self._wal_reader.close()
        self._wal_head.close()
        self._openers.close()
        self._env.close()

    async def wait_applied(self, timeout: float = 60.0) -> None:
        """Wait until LMDB holds every write this process has seen (the applier caught up)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._read() as txn:
                if self._meta(txn, L.META_REV) >= self._index.revision:
                    return
            if time.monotonic() > deadline:
                raise StoreError("the applier did not catch up in time")
            await asyncio.sleep(0.02)

    def dictionary_prefixes(self) -> list[bytes]:
        """The key prefixes that have a trained compression dictionary in the store."""
        with self._read() as txn:
            return sorted({L.decode_dict(v)[0] for _, v in txn.cursor(db=self._dbs[L.DB_DICTS])})

    def usage(self, scan: bool = False) -> dict[str, int]:
        """What the store holds on disk: log records (in LMDB, and in the WAL not yet
        applied), the data file's size, and with ``scan`` the bytes of LMDB's records."""
        with self._read() as txn:
            applied = self._meta(txn, L.META_REV)
            out = {"records": int(txn.stat(self._dbs[L.DB_LOG])["entries"])
                   + max(0, self._index.revision - applied),
                   "unapplied": max(0, self._index.revision - applied),
                   "keys": len(self._index.entries),
                   "file_bytes": os.path.getsize(os.path.join(self.path, "data.mdb")),
                   "used_bytes": (self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"],
                   "wal_bytes": sum(os.path.getsize(p) for _, p in wal.segment_names(self._wal_dir))}
            if scan:
                out["record_bytes"] = sum(len(v) for _, v in txn.cursor(db=self._dbs[L.DB_LOG]))
        return out

    # -- background -------------------------------------------------------------
    def _ensure_poller(self) -> None:
        if (self._poller is None or self._poller.done()) and self._loop is not None:
            self._poller = self._loop.create_task(self._poll_foreign())

    async def _poll_foreign(self) -> None:
        """Watchers learn of other processes' commits within ``poll_interval``, or while
        no other open of the store exists, of the first one's within ``alone_poll_interval``.
        Runs only while someone watches: readers catch up by themselves.

        Alone is the common case (one ``serve``), and a timer 200 times a second was most
        of an idle server's CPU: each wake-up costs about 0.2 ms here."""
        while self._watchers and not self._closed:
            await asyncio.sleep(self.poll_interval if self._openers.others() else self.alone_poll_interval)
            try:
                self._catch_up()
            except Exception:  # keep polling; a failed read is retried next tick
                log.exception("reading other processes' commits failed")

    async def _auto_compact(self) -> None:
        """As kube-apiserver: every interval, compact to the revision seen one interval ago."""
        previous = 0
        while True:
            await asyncio.sleep(self.auto_compact_interval)
            current = await self.revision()
            if previous:
                with contextlib.suppress(Compacted, FutureRevision):
                    await self.compact(previous)
            previous = current
            self._index.drop_tombstones_below(await self.compacted_revision())

