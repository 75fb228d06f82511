"""Group commit: how writes become durable, on the event loop and the syncer process.

Callers on the event loop hand ``Op``s to ``Writer.submit`` (or an ``Updates``, many
updates as one request with one future, to ``submit_many``). While fewer than
``IN_FLIGHT`` batches wait for the syncer, the next turn of the loop (``_flush``)
takes what was submitted as one batch, compresses its values (``_compress``), checks each op against the
latest state and, holding the WAL lock (shared by every process on the store),
appends one record per mutation to the write-ahead log; then it asks the syncer
process (``store.lmdb.syncer``: why a process) to fdatasync it. Beyond that, what is
submitted waits, and goes as the next batch once the syncer answers, so batches
grow with load without a timer. On the answer (``_synced``) the
WAL head is published, the next batch goes out, and this one is handed to
``deliver``, which applies it to the index, publishes the events and answers the
callers. The applier process (``store.lmdb.applier``) then moves WAL records into
LMDB; until it has, readers find a record in ``pending``.

No thread of this process takes part: a thread that gives up the GIL for a
system call waits for the busy loop to give it back (the syncer's docstring).

The latest state the writer checks against is, in order: this batch's own
changes (``staged``), changes committed but not yet applied to the index
(``_overlay``, which also absorbs records other processes appended to the WAL,
read under the WAL lock), then the shared ``KeyIndex`` (read-only here).

Compaction points are rare: they go straight to LMDB in a synced transaction,
on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import lmdb

from ..codec import Codec, default_prefix
from ..errors import Compacted, Conflict, FutureRevision, KeyExists, NotFound, StorageFull, StoreError
from . import layout as L
from . import syncer, wal
from .index import Entry, KeyIndex, is_live
from .recent import RecentValues

log = logging.getLogger(__name__)

CREATE, UPDATE, DELETE, COMPACT, UPDATES = range(5)  # CREATE, UPDATE and UPDATES carry values
IN_FLIGHT = 2  # batches appended and not yet answered by the syncer (1 and 4 measured no better)


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

    def writes(self) -> int:
        return 1

    def payload_bytes(self) -> int:
        return len(self.frame or b"") + len(self.key)


class Updates:
    """Many updates as one request to the writer (``LmdbStore.update_many``): each is its
    own mutation with its own revision, record and event, as an ``Op`` of kind UPDATE
    would be, but they are compressed, staged and answered as arrays, with one future
    for them all. ``results`` holds, in order, the revision each took or the
    ``StoreError`` it failed with; ``error`` fails them all (the batch failed)."""

    __slots__ = ("error", "expected", "frames", "future", "keys", "results", "values")
    kind = UPDATES

    def __init__(self, keys: list[bytes], values: list[bytes], expected: list[int], future: Any) -> None:
        self.keys = keys
        self.values = values
        self.expected = expected
        self.future = future
        self.frames: list[bytes] = []
        self.results: list[int | StoreError] = []
        self.error: BaseException | None = None

    @property
    def result(self) -> list[int | StoreError]:
        return self.results

    def writes(self) -> int:
        return len(self.keys)

    def payload_bytes(self) -> int:
        return sum(map(len, self.frames)) + sum(map(len, self.keys))


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
    is_run: ClassVar[bool] = False  # (an ``UpdateRun``'s is True)

    @property
    def last(self) -> int:
        """Its revision (as an ``UpdateRun``'s last)."""
        return self.revision


class UpdateRun:
    """The committed updates of one ``Updates``, as arrays: what a ``Change`` each would say,
    without an object each. ``keys[i]`` took revision ``first + i`` (consecutive: a refused
    update takes none) with ``values[i]``; ``entries[i]`` is its key's index entry
    (revision, create_revision, version), the one tuple the writer's overlay and the
    ``KeyIndex`` share; ``prevs[i]`` its key's previous record. The overlay, the index and
    the recent values take a run as a whole (``dict.update``); what needs a ``Change``
    each (a watcher of some keys, or with prev_kv) asks ``changes``."""

    __slots__ = ("entries", "first", "keys", "prevs", "values")
    kind = L.PUT
    is_run = True

    def __init__(self, first: int, keys: list[bytes], values: list[bytes], entries: list[Entry],
                 prevs: list[int]) -> None:
        self.first = first
        self.keys = keys
        self.values = values
        self.entries = entries
        self.prevs = prevs

    @property
    def revision(self) -> int:
        """The first revision (as a ``Change``'s: where the run starts)."""
        return self.first

    @property
    def last(self) -> int:
        return self.first + len(self.keys) - 1

    def after(self, revision: int) -> UpdateRun:
        """The updates past ``revision`` (the run must reach beyond it)."""
        i = max(revision + 1 - self.first, 0)
        return UpdateRun(self.first + i, self.keys[i:], self.values[i:], self.entries[i:], self.prevs[i:])

    def changes(self) -> list[Change]:
        put = L.PUT
        return [Change(rev, put, key, created, version, prev, value)
                for key, value, (rev, created, version), prev
                in zip(self.keys, self.values, self.entries, self.prevs, strict=True)]


class PendingRecords:
    """Records in the WAL and not yet in LMDB, by revision, oldest first: the
    writer adds its batches, readers get them, and the loop trims what the
    applier has moved into LMDB. Adding and trimming take the lock (a trim walks
    from the oldest, which an insertion from a reader's thread would break);
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
    ops: list[Op | Updates]
    changes: list[Change | UpdateRun]  # in revision order
    first_revision: int       # first revision this batch took (0 when it took none)
    last_revision: int        # the store's revision after the batch
    records: list[tuple[int, bytes]] = field(default_factory=list)
    wal_position: tuple[int, int, int] | None = None  # (segment, start, end) of its records
    sync_seq: int = 0           # the syncer's sequence that makes it durable (0: nothing to sync)
    started: float = 0.0        # time.perf_counter() when the writer took it
    commit_seconds: float = 0.0  # from started to answered (durable, or failed)
    committed: float = 0.0      # time.perf_counter() once durable (the syncer answered)


def end_child(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Close a child's stdin, which tells the store's children (syncer, applier) to
    finish and exit; kill it if it has not within ``timeout`` seconds."""
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _SyncProcess:
    """The loop's end of the syncer process (``store.lmdb.syncer``: why a process):
    requests written to its stdin, replies read from its stdout when the loop's
    selector has them. Requests not yet answered are kept, and sent again to a new
    syncer if this one dies."""

    def __init__(self, wal_dir: str, loop: asyncio.AbstractEventLoop,
                 synced: Callable[[int, int], None]) -> None:
        self._wal_dir = wal_dir
        self._loop = loop
        self._synced = synced          # synced(sequence, errno): every request up to it answered
        self._asked: dict[int, int] = {}  # sequence -> segment, not yet answered
        self._unread = b""
        self._proc: subprocess.Popen[bytes] | None = None
        self._closing = False
        self._spawn()

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "syncer.py")

    def _spawn(self) -> None:
        proc = subprocess.Popen([sys.executable, "-S", self.script, self._wal_dir],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        self._loop.add_reader(proc.stdout.fileno(), self._readable)
        self._proc = proc
        self._unread = b""
        for seq, segment in self._asked.items():
            self._send(seq, segment)

    def ask(self, seq: int, segment: int) -> None:
        self._asked[seq] = segment
        self._send(seq, segment)

    def _send(self, seq: int, segment: int) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        # 16 bytes: never partial. If it died, its stdout's EOF comes next and a new one gets this request.
        with contextlib.suppress(OSError):
            os.write(self._proc.stdin.fileno(), syncer.REQUEST.pack(seq, segment))

    def _readable(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            data = os.read(proc.stdout.fileno(), 1 << 12)
        except BlockingIOError:
            return
        if not data:
            self._died()
            return
        self._unread += data
        whole = len(self._unread) - len(self._unread) % syncer.REPLY.size
        replies = [syncer.REPLY.unpack_from(self._unread, i) for i in range(0, whole, syncer.REPLY.size)]
        self._unread = self._unread[whole:]
        for seq, failed in replies:
            for done in [s for s in self._asked if s <= seq]:
                del self._asked[done]
            self._synced(seq, failed)

    def _died(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        self._loop.remove_reader(proc.stdout.fileno())
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        self._proc = None
        if self._closing:
            return
        log.warning("the store's syncer exited with %s; starting another", proc.returncode)
        try:
            self._spawn()
        except OSError as e:
            log.error("could not start the store's syncer: %s", e)
            for seq in sorted(self._asked):
                self._synced(seq, e.errno or errno.EIO)
            self._asked.clear()

    def close(self) -> None:
        """Close its stdin: it exits, and its stdout's EOF ends our side."""
        self._closing = True
        proc = self._proc
        if proc is None:
            return
        assert proc.stdout is not None
        self._loop.remove_reader(proc.stdout.fileno())
        end_child(proc, 10)
        proc.stdout.close()
        self._proc = None


class Writer:
    def __init__(self, env: lmdb.Environment, dbs: dict[bytes, Any], codec: Codec, index: KeyIndex,
                 recent: RecentValues,
                 deliver: Callable[[Batch], None], grow_map: Callable[[], None],
                 txn: Callable[..., AbstractContextManager[lmdb.Transaction]],
                 wal_dir: str, pending: PendingRecords, loop: asyncio.AbstractEventLoop, *,
                 max_batch: int = 4096) -> None:
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
        self._loop = loop
        self._queue: list[Op | Updates] = []  # submitted, for the next batch
        self._flush_scheduled = False
        # Appended to the WAL and not yet durable, in order. At most IN_FLIGHT: while a
        # sync runs the next batch is appended and asked for (the syncer answers both
        # with one fdatasync if it arrives in time); more waits for an answer.
        self._unanswered: collections.deque[Batch] = collections.deque()
        self._sync_seq = 0
        self._rev = index.revision            # last revision known committed (by anyone)
        self._overlay: dict[bytes, Entry] = {}
        # (last revision, the key or the run of keys) of the overlay's entries, oldest first
        self._overlay_order: collections.deque[tuple[int, bytes | UpdateRun]] = collections.deque()
        self._wal_dir = wal_dir
        self._wal_lock = wal.WalLock(wal_dir)
        self._wal_reader = wal.WalReader(wal_dir)      # the writer's view of the WAL's end
        self._wal_writer = wal.WalWriter(wal_dir)
        self._wal_head = wal.WalHead(wal_dir)
        self._wal_reader.seek(index.revision + 1)
        self._pending = pending
        self._broken: StoreError | None = None
        self._syncer = _SyncProcess(wal_dir, loop, self._synced)

    def submit(self, op: Op) -> None:
        self._queue.append(op)
        if not self._flush_scheduled and len(self._unanswered) < IN_FLIGHT:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def submit_many(self, ops: list[Op | Updates]) -> None:
        self._queue += ops
        if not self._flush_scheduled and len(self._unanswered) < IN_FLIGHT:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    async def stop(self) -> None:
        """Commit what was submitted, wait until it is answered, then end the syncer."""
        while self._queue or self._unanswered:
            if len(self._unanswered) < IN_FLIGHT:
                self._flush()
            await asyncio.sleep(0.001)
        self._syncer.close()
        self._wal_reader.close()
        self._wal_writer.close()
        self._wal_head.close()
        self._wal_lock.close()

    def _compress(self, ops: list[Op | Updates]) -> None:
        """Compress the batch's values with their prefix's dictionary, one zstd call per
        dictionary (on the loop: no other thread of ours wants the GIL it releases). A prefix with no
        dictionary yet goes PLAIN, and the applier compresses it; the applier also turns
        updates into deltas against their previous version."""
        codec = self._codec
        groups: dict[int, list[Op]] = {}
        for op in ops:
            if op.kind != CREATE and op.kind != UPDATE:
                if op.kind == UPDATES:
                    assert isinstance(op, Updates)
                    self._compress_updates(op)
                continue
            assert isinstance(op, Op)
            dict_id = codec.active_dictionary(codec.prefix_of(op.key))
            if dict_id is None or len(op.value) < codec.config.min_compress:
                op.frame = b"\x00" + op.value
            else:
                groups.setdefault(dict_id, []).append(op)
        for dict_id, group in groups.items():
            for op, frame in zip(group, codec.encode_many(dict_id, [op.value for op in group]), strict=True):
                op.frame = frame if len(frame) <= len(op.value) else b"\x00" + op.value

    def _compress_updates(self, op: Updates) -> None:
        """``_compress`` for an ``Updates``: its values, in one zstd call per dictionary. Its
        keys are usually of one prefix (one request's objects): with the default prefixes a
        key that starts with the previous key's prefix has that prefix, and is not split."""
        codec = self._codec
        prefix_of, active, small = codec.prefix_of, codec.active_dictionary, codec.config.min_compress
        same_prefix = prefix_of is default_prefix
        values = op.values
        prefix = prefix_of(op.keys[0])
        if same_prefix and all(map(bytes.startswith, op.keys, itertools.repeat(prefix))):
            # one prefix, one dictionary (a request's objects): whole arrays, no loop of our own
            dict_id = active(prefix)
            if dict_id is None:
                op.frames = [b"\x00" + value for value in values]
                return
            if min(map(len, values)) >= small:
                op.frames = [frame if len(frame) <= len(value) else b"\x00" + value
                             for frame, value in zip(codec.encode_many(dict_id, values), values, strict=True)]
                return
        frames: list[bytes] = [b""] * len(values)
        groups: dict[int, list[int]] = {}
        prefix, dict_id = b"", None
        for i, key in enumerate(op.keys):
            if not (same_prefix and prefix and key.startswith(prefix)):
                prefix = prefix_of(key)
                dict_id = active(prefix)
            value = values[i]
            if dict_id is None or len(value) < small:
                frames[i] = b"\x00" + value
            else:
                group = groups.get(dict_id)
                if group is None:
                    groups[dict_id] = [i]
                else:
                    group.append(i)
        for dict_id, group in groups.items():
            for i, frame in zip(group, codec.encode_many(dict_id, [values[i] for i in group]), strict=True):
                frames[i] = frame if len(frame) <= len(values[i]) else b"\x00" + values[i]
        op.frames = frames

    # -- group commit, on the loop ----------------------------------------------
    def _flush(self) -> None:
        """Commit what was submitted as one batch: appended to the WAL here, made
        durable by the syncer. With IN_FLIGHT batches unanswered, what is submitted
        waits for an answer and then goes as the next batch (group commit: the batch
        grows with the load, with no timer)."""
        self._flush_scheduled = False
        if len(self._unanswered) >= IN_FLIGHT or not self._queue:
            return
        ops, self._queue = self._take()
        try:
            if self._broken is not None:
                raise self._broken
            batch = self._commit(ops)
        except BaseException as e:  # fail the batch, never the loop
            if e is not self._broken:
                log.exception("store writer failed a batch")
            err = e if isinstance(e, StoreError) else StoreError(f"store write failed: {e!r}")
            for op in ops:
                op.error = err
            batch = Batch(ops, [], 0, self._rev)
        if batch.wal_position is not None:
            self._sync_seq += 1
            batch.sync_seq = self._sync_seq
            self._unanswered.append(batch)
            self._syncer.ask(self._sync_seq, batch.wal_position[0])
        elif self._unanswered:  # nothing written (refused, or failed): answered in turn
            batch.sync_seq = self._sync_seq
            self._unanswered.append(batch)
        else:  # answered after the batches _synced is answering, if it called us
            batch.commit_seconds = time.perf_counter() - batch.started if batch.started else 0.0
            self._loop.call_soon(self._deliver, batch)
        if self._queue and len(self._unanswered) < IN_FLIGHT and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _take(self) -> tuple[list[Op | Updates], list[Op | Updates]]:
        """The next batch, up to ``max_batch`` writes (an ``Updates`` counts each of its
        updates; a batch holds one op at least), and what is left."""
        queue, room = self._queue, self._max_batch
        for n, op in enumerate(queue):
            room -= 1 if op.kind != UPDATES else len(op.keys)  # type: ignore[union-attr]
            if room < 0:
                n = max(n, 1)
                return queue[:n], queue[n:]
        return queue, []

    def _synced(self, seq: int, failed: int) -> None:
        """The syncer's answer: every batch up to ``seq`` is durable (or, with ``failed``,
        cannot be made so: this store then refuses writes until it is reopened). The
        next batch is sent before these are answered, so its sync overlaps their answers."""
        now = time.perf_counter()
        if failed and self._broken is None:
            self._broken = StoreError(f"fdatasync of the write-ahead log failed ({os.strerror(failed)}); "
                                      "the store refuses writes until it is reopened")
            log.error("%s", self._broken)
        done: list[Batch] = []
        unanswered = self._unanswered
        while unanswered and unanswered[0].sync_seq <= seq:
            done.append(unanswered.popleft())
        durable = 0
        failed = failed or self._broken is not None  # nothing after a failed sync is durable
        for b in done:
            b.commit_seconds = now - b.started if b.started else 0.0
            if failed:
                for op in b.ops:
                    op.error = self._broken
                b.changes = []
            elif b.changes:
                b.committed = now
                durable = b.last_revision
        if durable:
            # readers (and the applier) see records only once they are durable; the loop
            # applies them in this same callback (deliver, below), before any catch-up
            with self._wal_lock:
                self._wal_head.publish(durable)
        self._flush()
        for b in done:
            self._deliver(b)

    def _commit(self, ops: list[Op | Updates]) -> Batch:
        for op in ops:
            op.error = None
        t0 = time.perf_counter()
        self._compress(ops)
        with self._wal_lock:
            self._absorb_foreign()
            if any(op.kind == COMPACT for op in ops):
                self._commit_meta([op for op in ops if isinstance(op, Op) and op.kind == COMPACT])
            batch = self._stage(ops)
            if batch.records:
                data = wal.encode_many(batch.records)
                self._wal_writer.attach(self._wal_reader)
                try:
                    seg, start, end = self._wal_writer.append(batch.first_revision, data)
                    batch.wal_position = (seg, start, end)
                except OSError as e:
                    self._wal_writer.close()  # reattach at the end of what is whole, next time
                    if e.errno == 28:
                        raise StorageFull(f"disk full ({e}); nothing of this batch was written") from e
                    raise StoreError(f"write-ahead log: {e}") from e
                self._wal_reader.skip_to(seg, end, batch.last_revision + 1)
                self._pending.add_many(batch.records)
        batch.started = t0
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
        wanted = sum(op.payload_bytes() + L.HEADER_SIZE * op.writes() for op in ops) + (1 << 20)
        return st.f_bavail * st.f_frsize < wanted

    def _after_commit(self, batch: Batch) -> None:
        self._rev = batch.last_revision
        overlay, order = self._overlay, self._overlay_order
        for ch in batch.changes:
            if type(ch) is UpdateRun:
                overlay.update(zip(ch.keys, ch.entries, strict=True))
                order.append((ch.last, ch))
            else:
                assert isinstance(ch, Change)
                overlay[ch.key] = (ch.revision, ch.create_revision, ch.version)
                order.append((ch.revision, ch.key))
        self._recent.put_changes(batch.changes)

    def _trim_overlay(self) -> None:
        applied = self._index.revision
        order, overlay = self._overlay_order, self._overlay
        while order and order[0][0] <= applied:
            rev, key = order.popleft()
            if type(key) is UpdateRun:
                get = overlay.get
                for k, entry in zip(key.keys, key.entries, strict=True):
                    e = get(k)
                    if e is not None and e[0] == entry[0]:
                        del overlay[k]
                continue
            e = overlay.get(key)  # type: ignore[arg-type]
            if e is not None and e[0] == rev:
                del overlay[key]  # type: ignore[arg-type]

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

    def _stage(self, ops: list[Op | Updates]) -> Batch:
        """Check each op against the latest state and build its record (no I/O)."""
        cur_rev = self._rev
        rev = cur_rev
        records: list[tuple[int, bytes]] = []
        first = rev + 1
        staged: dict[bytes, Entry] = {}
        changes: list[Change | UpdateRun] = []
        # the latest entry: this batch's, else the overlay's, else the index's (an entry is a
        # non-empty tuple: ``or`` takes the first found)
        in_staged, in_overlay, in_index = staged.get, self._overlay.get, self._index.entries.get
        for op in ops:
            kind = op.kind
            if kind == UPDATES:
                assert isinstance(op, Updates)
                rev = self._stage_updates(op, rev, staged, records, changes)
                continue
            assert isinstance(op, Op)
            if kind == COMPACT:  # done by _commit_meta
                continue
            key = op.key
            latest = in_staged(key) or in_overlay(key) or in_index(key)
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

    def _stage_updates(self, op: Updates, rev: int, staged: dict[bytes, Entry], records: list[tuple[int, bytes]],
                       changes: list[Change | UpdateRun]) -> int:
        """``_stage`` of an ``Updates``: each update checked and recorded as an UPDATE op
        would be, in one loop, and its changes kept as one ``UpdateRun``; returns the
        revision after them."""
        in_staged, in_overlay, in_index = staged.get, self._overlay.get, self._index.entries.get
        header, put = L.HEADER.pack, L.PUT
        results: list[int | StoreError] = []
        keys: list[bytes] = []
        values: list[bytes] = []
        entries: list[Entry] = []
        prevs: list[int] = []
        first = rev + 1
        for key, value, frame, expected in zip(op.keys, op.values, op.frames, op.expected, strict=True):
            latest = in_staged(key) or in_overlay(key) or in_index(key)
            if latest is None or not latest[1]:  # (not is_live)
                results.append(NotFound(key))
                continue
            prev, created = latest[0], latest[1]
            if expected and expected != prev:
                results.append(Conflict(key, expected, prev))
                continue
            rev += 1
            version = latest[2] + 1
            records.append((rev, header(put, 0, created, version, prev, len(key)) + key + frame))
            staged[key] = entry = (rev, created, version)
            keys.append(key)
            values.append(value)
            entries.append(entry)
            prevs.append(prev)
            results.append(rev)
        op.results = results
        if keys:
            changes.append(UpdateRun(first, keys, values, entries, prevs))
        return rev

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
