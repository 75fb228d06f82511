"""Group commit: the threads that make writes durable.

Callers on the event loop hand ``Op``s to ``Writer.submit``. The writer thread
takes what is submitted, compresses the values (``_compress``), checks each op
against the latest state and, holding the WAL lock (shared by every process on
the store), appends one record per mutation to the write-ahead log. The syncer
thread fdatasyncs it and only then hands the batch back to the loop
(``deliver``), which applies it to the index, publishes the events and answers
the callers; the writer goes on with the next batch meanwhile, and batches grow
with load. The applier process (``store.lmdb.applier``) then moves WAL records
into LMDB; until it has, readers find a record in ``pending``.

The latest state the writer checks against is, in order: this batch's own
changes (``staged``), changes committed but not yet applied to the index
(``_overlay``, which also absorbs records other processes appended to the WAL,
read under the WAL lock), then the shared ``KeyIndex`` (read-only here).

Compaction points are rare: they go straight to LMDB in a synced transaction
of the writer thread.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import lmdb

from ..codec import Codec
from ..errors import Compacted, Conflict, FutureRevision, KeyExists, NotFound, StorageFull, StoreError
from . import layout as L
from . import wal
from .index import Entry, KeyIndex, is_live
from .recent import RecentValues

log = logging.getLogger(__name__)
Item = TypeVar("Item")

CREATE, UPDATE, DELETE, COMPACT = range(4)  # CREATE and UPDATE carry values


class Op:
    """One request to the writer; the loop resolves ``future`` once it is committed."""

    __slots__ = ("kind", "key", "value", "expected", "future", "frame", "result", "error")

    def __init__(self, kind: int, key: bytes, value: bytes, expected: int, future: Any) -> None:
        self.kind = kind
        self.key = key
        self.value = value
        self.expected = expected
        self.future = future
        self.frame: bytes | None = None
        self.result = 0
        self.error: BaseException | None = None


@dataclass(slots=True)
class Change:
    """A committed mutation, as the loop applies and publishes it."""

    revision: int
    kind: int                 # layout.PUT or layout.DELETE
    key: bytes
    create_revision: int
    version: int
    prev_revision: int
    value: bytes | None       # raw value of a PUT when the writer had it (always, for local writes)
    frame: bytes | None = None  # the stored frame, when ``value`` is not known (records read back)
    committed: float = 0.0    # time.perf_counter() when it became durable, when this process wrote it


class PendingRecords:
    """Records in the WAL and not yet in LMDB, by revision, oldest first: the
    writer thread adds its batches, the loop reads them and trims what the
    applier has moved into LMDB. Adding and trimming take the lock (a trim walks
    from the oldest, which an insertion from the other thread would break);
    ``get`` is one dict lookup and needs none."""

    def __init__(self) -> None:
        self._records: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def get(self, revision: int) -> bytes | None:
        return self._records.get(revision)

    def add(self, revision: int, record: bytes) -> None:
        with self._lock:
            self._records[revision] = record

    def add_many(self, records: list[tuple[int, bytes]]) -> None:
        with self._lock:
            for revision, record in records:
                self._records[revision] = record

    def trim(self, applied: int) -> None:
        """Forget the records up to ``applied``."""
        records = self._records
        with self._lock:
            while records:
                revision = next(iter(records))
                if revision > applied:
                    return
                records.popitem(last=False)


@dataclass(slots=True)
class Batch:
    ops: list[Op]
    changes: list[Change]
    first_revision: int       # first revision this batch took (0 when it took none)
    last_revision: int        # the store's revision after the batch
    records: list[tuple[int, bytes]] = field(default_factory=list)
    wal_position: tuple[int, int, int] | None = None  # (segment, start, end) of its records
    sync_fd: int | None = None  # the WAL descriptor to fdatasync before it is answered
    commit_seconds: float = 0.0
    committed: float = 0.0      # time.perf_counter() once durable (the syncer's fdatasync returned)


class _Mailbox(Generic[Item]):
    """A FIFO between threads that wakes its one consumer only when it sleeps:
    setting a ``threading.Event`` costs a lock round trip, too much per op."""

    def __init__(self) -> None:
        self._items: collections.deque[Item] = collections.deque()
        self._wake = threading.Event()
        self._idle = False  # the consumer sleeps, or is about to (see take)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Item) -> None:
        self._items.append(item)
        # Already set (an earlier put of this burst; the consumer has not run since):
        # the consumer has a clear() still to do, after which it takes every item
        # appended before now, this one included. Setting again would only cost the
        # Event's lock and a notify, once per op while the consumer waits for the GIL.
        if self._idle and not self._wake.is_set():
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def take(self, limit: int, timeout: float) -> list[Item]:
        """Up to ``limit`` items, waiting up to ``timeout`` for the first one."""
        items = self._items
        if not items and timeout > 0:
            self._idle = True
            if not items:  # re-check: put() saw _idle False and did not wake us
                self._wake.wait(timeout)
            self._wake.clear()
            self._idle = False
        out: list[Item] = []
        while items and len(out) < limit:
            out.append(items.popleft())
        return out


class Writer:
    def __init__(self, env: lmdb.Environment, dbs: dict[bytes, Any], codec: Codec, index: KeyIndex,
                 recent: RecentValues,
                 deliver: Callable[[Batch], None], grow_map: Callable[[], None],
                 txn: Callable[..., AbstractContextManager[lmdb.Transaction]],
                 wal_dir: str, pending: PendingRecords, *,
                 max_batch: int = 4096, commit_delay: float = 0.001) -> None:
        self._env = env
        self._meta = dbs[L.DB_META]
        self._log = dbs[L.DB_LOG]
        self._index = index
        self._codec = codec
        self._recent = recent
        self._deliver = deliver
        self._grow_map = grow_map
        self._txn = txn  # txn(write=False): a transaction that a map resize waits for
        self._max_batch = max_batch
        self._last_batch = 1
        self._commit_delay = commit_delay
        self._encoded: _Mailbox[Op] = _Mailbox()   # submitted, to be committed by the writer thread
        self._stopping = False
        self._rev = index.revision            # last revision known committed (by anyone)
        self._overlay: dict[bytes, Entry] = {}
        self._overlay_order: collections.deque[tuple[int, bytes]] = collections.deque()
        self._wal_dir = wal_dir
        self._wal_lock = wal.WalLock(wal_dir)
        self._wal_reader = wal.WalReader(wal_dir)      # the writer's view of the WAL's end
        self._wal_writer = wal.WalWriter(wal_dir)
        self._wal_head = wal.WalHead(wal_dir)
        # The syncer's own descriptor of the lock file: flock belongs to an open file, so
        # sharing the writer's would let the syncer's unlock release the writer's lock.
        self._head_lock = wal.WalLock(wal_dir)
        self._wal_reader.seek(index.revision + 1)
        self._pending = pending
        self._synced: _Mailbox[Batch] = _Mailbox()   # appended, to be fdatasync'd and answered
        # (first revision, last revision, commit time) of this process's durable batches, appended
        # by the syncer before the WAL head shows them: a reader that catches up through the WAL
        # before the loop has the batch (LmdbStore._catch_up) still learns when ours committed
        self.recent_commits: collections.deque[tuple[int, int, float]] = collections.deque(maxlen=1024)
        self._writer_done = False
        self._broken: StoreError | None = None
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._syncer = threading.Thread(target=self._run_syncer, name="store-syncer", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._syncer.start()

    def submit(self, op: Op) -> None:
        self._encoded.put(op)

    def stop(self) -> None:
        """Commit what was submitted, then end both threads."""
        self._stopping = True
        self._encoded.wake()
        self._thread.join()
        self._writer_done = True
        self._synced.wake()
        self._syncer.join()
        self._wal_reader.close()
        self._wal_writer.close()
        self._wal_head.close()
        self._head_lock.close()
        self._wal_lock.close()

    def _compress(self, ops: list[Op]) -> None:
        """Compress the batch's values with their prefix's dictionary, one zstd call per
        dictionary, the GIL released meanwhile (the event loop runs on). A prefix with no
        dictionary yet goes PLAIN, and the applier compresses it; the applier also turns
        updates into deltas against their previous version."""
        codec = self._codec
        groups: dict[int, list[Op]] = {}
        for op in ops:
            if op.kind > UPDATE:
                continue
            dict_id = codec.active_dictionary(codec.prefix_of(op.key))
            if dict_id is None or len(op.value) < codec.config.min_compress:
                op.frame = b"\x00" + op.value
            else:
                groups.setdefault(dict_id, []).append(op)
        for dict_id, group in groups.items():
            for op, frame in zip(group, codec.encode_many(dict_id, [op.value for op in group]), strict=True):
                op.frame = frame if len(frame) <= len(op.value) else b"\x00" + op.value

    # -- the threads --------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self._encoded and self._stopping:
                return
            ops = self._encoded.take(self._max_batch, 0.5)
            if not ops:
                continue
            ops += self._gather_more(len(ops))
            self._last_batch = len(ops)
            try:
                if self._broken is not None:
                    raise self._broken
                batch = self._commit(ops)
            except BaseException as e:  # never let the thread die: fail the batch instead
                if e is not self._broken:
                    log.exception("store writer failed a batch")
                err = e if isinstance(e, StoreError) else StoreError(f"store write failed: {e!r}")
                for op in ops:
                    op.error = err
                batch = Batch(ops, [], 0, self._rev)
            self._synced.put(batch)  # answered in order, once durable

    def _run_syncer(self) -> None:
        """fdatasync what the writer appended, then hand the batches back, in order.
        The writer goes on with the next batch meanwhile (its pwrite and our fdatasync
        overlap). A failed fdatasync cannot be retried safely (the kernel may have
        dropped the dirty pages): this store then refuses every write until reopened."""
        while True:
            batches = self._synced.take(1 << 30, 0.5)
            if not batches:
                if self._writer_done and not self._synced:
                    return
                continue
            fds = [b.sync_fd for b in batches if b.sync_fd is not None]
            try:
                if fds:
                    wal.sync(fds)
            except OSError as e:
                self._broken = StoreError(f"fdatasync of the write-ahead log failed ({e}); the store "
                                          "refuses writes until it is reopened")
                log.error("%s", self._broken)
                for b in batches:
                    for op in b.ops:
                        op.error = self._broken
                    b.changes = []
            else:
                now = time.perf_counter()
                for b in batches:
                    b.committed = now
                    if b.changes:
                        self.recent_commits.append((b.first_revision, b.last_revision, now))
                durable = max((b.last_revision for b in batches if b.changes), default=0)
                if durable:
                    # readers (and the applier) see records only once they are durable
                    with self._head_lock:
                        self._wal_head.publish(durable)
            for b in batches:
                self._deliver(b)

    def _gather_more(self, have: int) -> list[Op]:
        """Wait briefly for a batch about the size of the last one (PostgreSQL's
        commit_delay, made adaptive). Under a steady load of N concurrent writers,
        their next writes arrive while the loop answers the previous batch; committing
        the first few alone would cost a whole fsync and split the writers in two
        smaller, slower batches for good."""
        want = min(self._max_batch, int(self._last_batch * 0.75))
        more: list[Op] = []
        if have >= want:
            return more
        deadline = time.perf_counter() + self._commit_delay
        while have + len(more) < want and time.perf_counter() < deadline:
            time.sleep(0.0001)
            more += self._encoded.take(self._max_batch - have - len(more), 0)
        return more

    def _commit(self, ops: list[Op]) -> Batch:
        for op in ops:
            op.error = None
        self._compress(ops)
        t0 = time.perf_counter()
        with self._wal_lock:
            self._absorb_foreign()
            if any(op.kind >= COMPACT for op in ops):
                self._commit_meta([op for op in ops if op.kind >= COMPACT])
            batch = self._stage(ops)
            if batch.records:
                data = b"".join([wal.encode(rev, rec) for rev, rec in batch.records])
                self._wal_writer.attach(self._wal_reader)
                try:
                    seg, start, end, batch.sync_fd = self._wal_writer.append(batch.first_revision, data)
                    batch.wal_position = (seg, start, end)
                except OSError as e:
                    self._wal_writer.close()  # reattach at the end of what is whole, next time
                    if e.errno == 28:
                        raise StorageFull(f"disk full ({e}); nothing of this batch was written") from e
                    raise StoreError(f"write-ahead log: {e}") from e
                self._wal_reader.skip_to(seg, end, batch.last_revision + 1)
                self._pending.add_many(batch.records)
        batch.commit_seconds = time.perf_counter() - t0
        self._after_commit(batch)
        return batch

    def _commit_meta(self, ops: list[Op]) -> None:
        """Compaction points: straight to LMDB, synced."""
        while True:
            try:
                with self._txn(write=True) as txn:
                    for op in ops:
                        self._validate_compact(txn, op, self._rev)
                return
            except lmdb.MapFullError:
                self._grow_map()
            except lmdb.Error as e:
                err = StorageFull(f"disk full: {e}") if self._disk_full(e, ops) else StoreError(f"LMDB error: {e}")
                for op in ops:
                    op.error = err
                return

    def _disk_full(self, e: lmdb.Error, ops: list[Op]) -> bool:
        """LMDB reports a short write on a full disk as EIO: look at the free space too."""
        if "No space left" in str(e) or getattr(e, "errno", None) == 28:
            return True
        try:
            st = os.statvfs(self._env.path())
        except OSError:
            return False
        wanted = sum(len(op.frame or b"") + len(op.key) + L.HEADER_SIZE for op in ops) + (1 << 20)
        return st.f_bavail * st.f_frsize < wanted

    def _after_commit(self, batch: Batch) -> None:
        self._rev = batch.last_revision
        recent = self._recent
        for ch in batch.changes:
            entry = (ch.revision, ch.create_revision, ch.version)
            self._overlay[ch.key] = entry
            self._overlay_order.append((ch.revision, ch.key))
            if ch.value is not None:
                recent.put(ch.key, ch.revision, ch.version, ch.value)
            else:
                recent.discard(ch.key)

    def _trim_overlay(self) -> None:
        applied = self._index.revision
        order = self._overlay_order
        while order and order[0][0] <= applied:
            rev, key = order.popleft()
            e = self._overlay.get(key)
            if e is not None and e[0] == rev:
                del self._overlay[key]

    def _absorb(self, rev: int, record: bytes | memoryview) -> None:
        kind, _f, create, version, _p, _kl = L.HEADER.unpack_from(record)
        key = L.record_key(record)
        self._overlay[key] = (rev, create, version) if kind == L.PUT else (rev, 0, 0)
        self._overlay_order.append((rev, key))
        self._recent.discard(key)
        self._rev = rev

    def _absorb_foreign(self) -> None:
        """Records other processes appended since our last batch join the overlay
        (caller holds the WAL lock, so the WAL's end stands still)."""
        self._trim_overlay()
        for rev, payload in self._wal_reader.read():
            if rev > self._rev:
                self._absorb(rev, payload)
                self._pending.add(rev, payload)
        head = self._wal_head.read()
        if head <= self._rev:
            return
        # The head (durable records, of any process) is past what we read: their segment
        # was applied to LMDB and deleted before we got there. Take them from LMDB.
        with self._txn() as txn:
            applied = L.u64(txn.get(L.META_REV, db=self._meta))
            if applied > self._rev:
                cur = txn.cursor(db=self._log)
                if cur.set_range(L.rev_key(self._rev + 1)):
                    for k, v in cur:
                        self._absorb(L.u64(k), v)
                self._rev = max(self._rev, applied)
                self._wal_reader.seek(self._rev + 1)
                for rev, payload in self._wal_reader.read():
                    if rev > self._rev:
                        self._absorb(rev, payload)
                        self._pending.add(rev, payload)

    def _latest(self, staged: dict[bytes, Entry], key: bytes) -> Entry | None:
        e = staged.get(key)
        if e is None:
            e = self._overlay.get(key)
            if e is None:
                e = self._index.entries.get(key)
        return e

    def _stage(self, ops: list[Op]) -> Batch:
        """Check each op against the latest state and build its record (no I/O)."""
        cur_rev = self._rev
        rev = cur_rev
        records: list[tuple[int, bytes]] = []
        first = rev + 1
        staged: dict[bytes, Entry] = {}
        changes: list[Change] = []
        for op in ops:
            kind = op.kind
            if kind >= COMPACT:  # done by _commit_meta
                continue
            key = op.key
            latest = self._latest(staged, key)
            live = is_live(latest)
            if kind == CREATE:
                if live:
                    op.error = KeyExists(key)
                    continue
                rev += 1
                prev = latest[0] if latest is not None else 0
                rec = L.encode_record(L.PUT, rev, 1, prev, key, op.frame or b"")
                staged[key] = (rev, rev, 1)
                ch = Change(rev, L.PUT, key, rev, 1, prev, op.value)
            else:
                if not live:
                    op.error = NotFound(key)
                    continue
                assert latest is not None
                if op.expected and op.expected != latest[0]:
                    op.error = Conflict(key, op.expected, latest[0])
                    continue
                rev += 1
                prev = latest[0]
                if kind == UPDATE:
                    version = latest[2] + 1
                    rec = L.encode_record(L.PUT, latest[1], version, prev, key, op.frame or b"")
                    staged[key] = (rev, latest[1], version)
                    ch = Change(rev, L.PUT, key, latest[1], version, prev, op.value)
                else:
                    rec = L.encode_record(L.DELETE, 0, 0, prev, key, b"")
                    staged[key] = (rev, 0, 0)
                    ch = Change(rev, L.DELETE, key, 0, 0, prev, None)
            records.append((rev, rec))
            op.result = rev
            changes.append(ch)
        return Batch(ops, changes, first if rev >= first else 0, rev, records=records)

    def _validate_compact(self, txn: lmdb.Transaction, op: Op, current: int) -> None:
        target = op.expected
        done = L.u64(txn.get(L.META_COMPACT, db=self._meta))
        if target <= done:
            op.error = Compacted(target, done)
        elif target > current:
            op.error = FutureRevision(target, current)
        else:
            txn.put(L.META_COMPACT, L.U64.pack(target), db=self._meta)
            op.result = target
