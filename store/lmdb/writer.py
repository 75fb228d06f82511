"""Group commit: one thread owns every LMDB write transaction of this process.

Callers on the event loop hand ``Op``s to ``Writer.submit``; the writer thread
takes everything queued, compresses the values (outside the GIL, on the second
core), checks each op against the latest state, appends one log record per
mutation in a single write transaction and commits it with one fsync. Only
then does it hand the batch back to the loop (``deliver``), which applies it to
the index, publishes the events and answers the callers. While one batch is
being fsync'd, the next one gathers in the queue, so batches grow with load.

The latest state the writer checks against is, in order: this batch's own
changes (``staged``), changes committed but not yet applied to the index
(``_overlay``, which also absorbs records other processes appended, read inside
the write transaction), then the shared ``KeyIndex`` (read-only here).

Two threads: the encoder compresses values as they are submitted (zstd releases
the GIL, so this runs beside the event loop), the writer commits. An update is
compressed as a delta against the key's previous version (``RecentValues``, or
read back from the log); if another write to the same key overtook it, the
writer falls back to a full frame.

LMDB binds a write transaction to the thread that began it, which is one more
reason every write goes through this thread.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lmdb

from ..codec import DELTA, Codec
from ..errors import Compacted, Conflict, FutureRevision, KeyExists, NotFound, StorageFull, StoreError
from . import layout as L
from .index import Entry, KeyIndex, is_live
from .recent import Recent, RecentValues

log = logging.getLogger(__name__)

CREATE, UPDATE, DELETE, COMPACT, DICT = range(5)  # CREATE and UPDATE carry values


class Op:
    """One request to the writer; the loop resolves ``future`` once it is committed."""

    __slots__ = ("kind", "key", "value", "expected", "future", "frame", "base", "result", "error")

    def __init__(self, kind: int, key: bytes, value: bytes, expected: int, future: Any) -> None:
        self.kind = kind
        self.key = key
        self.value = value
        self.expected = expected
        self.future = future
        self.frame: bytes | None = None
        self.base = 0  # the revision ``frame`` is a delta against (0: a full frame)
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


@dataclass(slots=True)
class Batch:
    ops: list[Op]
    changes: list[Change]
    first_revision: int       # first revision this batch took (0 when it took none)
    last_revision: int        # the store's revision after the batch
    dropped_tombstones: list[tuple[bytes, int]] = field(default_factory=list)
    commit_seconds: float = 0.0


class _Mailbox:
    """A FIFO between threads that wakes its one consumer only when it sleeps:
    setting a ``threading.Event`` costs a lock round trip, too much per op."""

    def __init__(self) -> None:
        self._items: collections.deque[Op] = collections.deque()
        self._wake = threading.Event()
        self._idle = False  # the consumer sleeps, or is about to (see take)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, op: Op) -> None:
        self._items.append(op)
        if self._idle:
            self._wake.set()

    def put_all(self, ops: list[Op]) -> None:
        self._items.extend(ops)
        if self._idle:
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def take(self, limit: int, timeout: float) -> list[Op]:
        """Up to ``limit`` items, waiting up to ``timeout`` for the first one."""
        items = self._items
        if not items and timeout > 0:
            self._idle = True
            if not items:  # re-check: put() saw _idle False and did not wake us
                self._wake.wait(timeout)
            self._wake.clear()
            self._idle = False
        out: list[Op] = []
        while items and len(out) < limit:
            out.append(items.popleft())
        return out


class Writer:
    def __init__(self, env: lmdb.Environment, dbs: dict[bytes, Any], codec: Codec, index: KeyIndex,
                 recent: RecentValues, load_latest: Callable[[bytes], Recent | None],
                 value_at: Callable[[Any, int, bytes], bytes],
                 deliver: Callable[[Batch], None], grow_map: Callable[[], None], *,
                 history_deltas: bool = True, keyframe_every: int = 8, max_batch: int = 4096,
                 compact_chunk: int = 20_000, commit_delay: float = 0.001) -> None:
        self._env = env
        self._meta = dbs[L.DB_META]
        self._log = dbs[L.DB_LOG]
        self._dicts = dbs[L.DB_DICTS]
        self._codec = codec
        self._index = index
        self._recent = recent
        self._load_latest = load_latest    # a key's latest PUT, read from the log (encoder thread)
        self._value_at = value_at          # (txn, revision, frame) -> raw value
        self._deliver = deliver
        self._grow_map = grow_map
        self._history_deltas = history_deltas
        self._keyframe_every = keyframe_every
        self._max_batch = max_batch
        self._compact_chunk = compact_chunk
        self._last_batch = 1
        self._commit_delay = commit_delay
        self._inbox = _Mailbox()     # submitted, to be compressed by the encoder thread
        self._encoded = _Mailbox()   # compressed, to be committed by the writer thread
        self._stopping = False
        self._rev = index.revision            # last revision known committed (by anyone)
        self._overlay: dict[bytes, Entry] = {}
        self._overlay_order: collections.deque[tuple[int, bytes]] = collections.deque()
        self._compaction_pending = True       # check once at start: a crash may have left work
        self._compaction_kept: dict[bytes, int] = {}  # this pass: key -> the revision it keeps
        self._compaction_target = 0
        self._encoder_done = False
        self._encoder = threading.Thread(target=self._run_encoder, name="store-encoder", daemon=True)
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)

    def start(self) -> None:
        self._encoder.start()
        self._thread.start()

    def submit(self, op: Op) -> None:
        self._inbox.put(op)

    def stop(self) -> None:
        """Commit what was submitted, then end both threads."""
        self._stopping = True
        self._inbox.wake()
        self._encoder.join()
        self._encoded.wake()
        self._thread.join()

    # -- the threads --------------------------------------------------------
    def _run_encoder(self) -> None:
        """Compress values as they arrive (zstd releases the GIL), ahead of their commit."""
        codec = self._codec
        while True:
            ops = self._inbox.take(256, 0.5)
            if not ops:
                if self._stopping and not self._inbox:
                    self._encoder_done = True
                    self._encoded.wake()
                    return
                continue
            for op in ops:
                if op.kind == CREATE:
                    op.frame = codec.encode(op.key, op.value)
                    codec.observe(op.key, op.value)
                elif op.kind == UPDATE:
                    self._encode_update(op)
                    codec.observe(op.key, op.value)
            self._encoded.put_all(ops)  # together: a trickle would make many small commits

    def _encode_update(self, op: Op) -> None:
        if self._history_deltas:
            prev = self._recent.get(op.key)
            if prev is None:
                try:
                    prev = self._load_latest(op.key)
                except Exception:  # unreadable for now: a full frame is always correct
                    prev = None
            if prev is not None and not L.is_keyframe(prev[1] + 1, self._keyframe_every):
                delta = self._codec.encode_delta(op.value, prev[2])
                if delta is not None:
                    op.frame, op.base = delta, prev[0]
                    return
        op.frame = self._codec.encode(op.key, op.value)

    def _run(self) -> None:
        while True:
            if not self._encoded:
                if self._encoder_done and not self._encoded:
                    return
                if self._compaction_pending:
                    self._compact_step()
                    continue
            ops = self._encoded.take(self._max_batch, 0.5)
            if not ops:
                continue
            ops += self._gather_more(len(ops))
            self._last_batch = len(ops)
            try:
                batch = self._commit(ops)
            except BaseException as e:  # never let the thread die: fail the batch instead
                log.exception("store writer failed a batch")
                err = e if isinstance(e, StoreError) else StoreError(f"store write failed: {e!r}")
                for op in ops:
                    op.error = err
                batch = Batch(ops, [], 0, self._rev)
            self._deliver(batch)

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
        while True:
            for op in ops:
                op.error = None
            t0 = time.perf_counter()
            txn = self._env.begin(write=True)
            try:
                batch = self._write(txn, ops)
                txn.commit()
            except lmdb.MapFullError:
                txn.abort()
                self._grow_map()
                continue
            except lmdb.Error as e:
                txn.abort()
                if self._disk_full(e, ops):
                    raise StorageFull(f"disk full ({e}); nothing of this batch was written") from e
                raise StoreError(f"LMDB error: {e}") from e
            except BaseException:
                txn.abort()
                raise
            batch.commit_seconds = time.perf_counter() - t0
            self._after_commit(batch)
            return batch

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
        for op in batch.ops:
            if op.kind == DICT and op.error is None:
                self._codec.add_dictionary(op.result, op.key, op.value)
            elif op.kind == COMPACT and op.error is None:
                self._compaction_pending = True

    def _trim_overlay(self) -> None:
        applied = self._index.revision
        order = self._overlay_order
        while order and order[0][0] <= applied:
            rev, key = order.popleft()
            e = self._overlay.get(key)
            if e is not None and e[0] == rev:
                del self._overlay[key]

    def _absorb_foreign(self, txn: lmdb.Transaction, first: int, last: int) -> None:
        """Records other processes appended since our last commit become part of the overlay."""
        cur = txn.cursor(db=self._log)
        if cur.set_range(L.rev_key(first)):
            for k, v in cur:
                rev = L.u64(k)
                if rev > last:
                    break
                kind, _f, create, version, _p, _kl = L.HEADER.unpack_from(v)
                key = L.record_key(v)
                self._overlay[key] = (rev, create, version) if kind == L.PUT else (rev, 0, 0)
                self._overlay_order.append((rev, key))
                self._recent.discard(key)

    def _latest(self, staged: dict[bytes, Entry], key: bytes) -> Entry | None:
        e = staged.get(key)
        if e is None:
            e = self._overlay.get(key)
            if e is None:
                e = self._index.entries.get(key)
        return e

    def _write(self, txn: lmdb.Transaction, ops: list[Op]) -> Batch:
        meta, logdb = self._meta, self._log
        cur_rev = L.u64(txn.get(L.META_REV, db=meta))
        self._trim_overlay()
        if cur_rev != self._rev:
            self._absorb_foreign(txn, self._rev + 1, cur_rev)
            self._rev = cur_rev
        rev = cur_rev
        first = rev + 1
        staged: dict[bytes, Entry] = {}
        changes: list[Change] = []
        for op in ops:
            kind = op.kind
            if kind == DICT:
                c = txn.cursor(db=self._dicts)
                op.result = L.U32.unpack(c.key())[0] + 1 if c.last() else 1
                txn.put(L.U32.pack(op.result), L.encode_dict(op.key, op.value), db=self._dicts)
                continue
            if kind == COMPACT:
                self._validate_compact(txn, op, rev)
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
                    if op.base and (op.base != prev or L.is_keyframe(version, self._keyframe_every)):
                        op.frame, op.base = self._codec.encode(key, op.value), 0  # overtaken: full frame
                    rec = L.encode_record(L.PUT, latest[1], version, prev, key, op.frame or b"")
                    staged[key] = (rev, latest[1], version)
                    ch = Change(rev, L.PUT, key, latest[1], version, prev, op.value)
                else:
                    rec = L.encode_record(L.DELETE, 0, 0, prev, key, b"")
                    staged[key] = (rev, 0, 0)
                    ch = Change(rev, L.DELETE, key, 0, 0, prev, None)
            txn.put(L.rev_key(rev), rec, db=logdb, append=True)
            op.result = rev
            changes.append(ch)
        if rev != cur_rev:
            txn.put(L.META_REV, L.U64.pack(rev), db=meta)
        return Batch(ops, changes, first if rev >= first else 0, rev)

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

    # -- compaction ---------------------------------------------------------
    def _kept_revision(self, txn: lmdb.Transaction, key: bytes, target: int) -> int:
        """The revision of ``key``'s record that a read at ``target`` sees (0: none):
        compaction keeps it and drops everything of the key before it."""
        latest = self._latest({}, key)
        if latest is None:
            return 0
        rev = latest[0]
        while rev > target:
            buf = txn.get(L.rev_key(rev), db=self._log)
            if buf is None:
                return 0
            rev = L.HEADER.unpack_from(buf)[4]
        return rev

    def _compact_step(self) -> None:
        """Remove up to ``compact_chunk`` superseded records below the compaction point,
        in its own short transaction so client writes wait at most one chunk.

        Before the first record of a key is dropped, the record the key keeps is
        rewritten as a full frame when it is a delta: after the pass, no kept
        record depends on a dropped one."""
        tombstones: list[tuple[bytes, int]] = []
        try:
            with self._env.begin(write=True) as txn:
                target = L.u64(txn.get(L.META_COMPACT, db=self._meta))
                done = L.u64(txn.get(L.META_COMPACTED, db=self._meta))
                if done >= target:
                    self._compaction_pending = False
                    self._compaction_kept = {}
                    return
                cur_rev = L.u64(txn.get(L.META_REV, db=self._meta))
                self._trim_overlay()
                if cur_rev != self._rev:
                    self._absorb_foreign(txn, self._rev + 1, cur_rev)
                    self._rev = cur_rev
                if target != self._compaction_target:
                    self._compaction_kept, self._compaction_target = {}, target
                kept = self._compaction_kept
                cur = txn.cursor(db=self._log)
                last = done
                n = 0
                positioned = cur.set_range(L.rev_key(done + 1))
                while positioned and n < self._compact_chunk:
                    rev = L.u64(cur.key())
                    if rev > target:
                        break
                    v = cur.value()
                    kind = v[0]
                    key = L.record_key(v)
                    keep = kept.get(key)
                    if keep is None:
                        keep = kept[key] = self._kept_revision(txn, key, target)
                        self._materialize(txn, keep)
                    last = rev
                    n += 1
                    # A tombstone at the compaction point itself stays: watches may start there.
                    if rev < keep or (rev == keep and kind == L.DELETE and rev < target):
                        if rev == keep and self._latest({}, key) == (rev, 0, 0):
                            tombstones.append((key, rev))
                        cur.delete()
                        positioned = cur.key() != b""
                    else:
                        positioned = cur.next()
                if not positioned or n < self._compact_chunk:
                    last = target
                txn.put(L.META_COMPACTED, L.U64.pack(last), db=self._meta)
        except lmdb.MapFullError:
            self._grow_map()
            return
        except lmdb.Error:
            log.exception("compaction step failed; will retry")
            time.sleep(0.1)
            return
        if tombstones:
            self._deliver(Batch([], [], 0, self._rev, dropped_tombstones=tombstones))

    def _materialize(self, txn: lmdb.Transaction, revision: int) -> None:
        """Rewrite the PUT at ``revision`` as a full frame if it is a delta."""
        if not revision:
            return
        buf = txn.get(L.rev_key(revision), db=self._log)
        if buf is None or buf[0] != L.PUT:
            return
        rec = L.decode_record(buf)
        if rec.frame and rec.frame[0] == DELTA:
            value = self._value_at(txn, revision, rec.frame)
            txn.put(L.rev_key(revision), L.with_frame(buf, self._codec.encode(rec.key, value)), db=self._log)
