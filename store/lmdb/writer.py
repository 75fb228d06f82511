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

log = logging.getLogger(__name__)

CREATE, UPDATE, DELETE, COMPACT, DICT = range(5)


class Op:
    """One request to the writer. ``done`` is called on the event loop thread."""

    __slots__ = ("kind", "key", "value", "expected", "done", "frame", "result", "error")

    def __init__(self, kind: int, key: bytes, value: bytes, expected: int,
                 done: Callable[[Op], None]) -> None:
        self.kind = kind
        self.key = key
        self.value = value
        self.expected = expected
        self.done = done
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
    prev_value: bytes | None = None
    frame: bytes | None = None  # the stored frame, when ``value`` is not known (records read back)


@dataclass(slots=True)
class Batch:
    ops: list[Op]
    changes: list[Change]
    first_revision: int       # first revision this batch took (0 when it took none)
    last_revision: int        # the store's revision after the batch
    dropped_tombstones: list[tuple[bytes, int]] = field(default_factory=list)
    commit_seconds: float = 0.0


class Writer:
    def __init__(self, env: lmdb.Environment, dbs: dict[bytes, Any], codec: Codec, index: KeyIndex,
                 deliver: Callable[[Batch], None], grow_map: Callable[[], None], *,
                 history_deltas: bool = True, keyframe_every: int = 16, max_batch: int = 4096,
                 compact_chunk: int = 20_000) -> None:
        self._env = env
        self._meta = dbs[L.DB_META]
        self._log = dbs[L.DB_LOG]
        self._dicts = dbs[L.DB_DICTS]
        self._codec = codec
        self._index = index
        self._deliver = deliver
        self._grow_map = grow_map
        self._history_deltas = history_deltas
        self._keyframe_every = keyframe_every
        self._max_batch = max_batch
        self._compact_chunk = compact_chunk
        self._queue: collections.deque[Op] = collections.deque()
        self._wake = threading.Event()
        self._idle = False  # True while the thread sleeps or is about to (see _run)
        self._stopping = False
        self._rev = index.revision            # last revision known committed (by anyone)
        self._overlay: dict[bytes, Entry] = {}
        self._overlay_order: collections.deque[tuple[int, bytes]] = collections.deque()
        self._compaction_pending = True       # check once at start: a crash may have left work
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, op: Op) -> None:
        self._queue.append(op)
        if self._idle:  # setting a threading.Event costs a lock round trip: only when asleep
            self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    # -- the thread ---------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                if self._compaction_pending:
                    self._compact_step()
                    continue
                self._idle = True
                if not self._queue:  # re-check: submit() saw _idle False and did not wake us
                    self._wake.wait(0.5)
                self._wake.clear()
                self._idle = False
                continue
            ops = []
            while self._queue and len(ops) < self._max_batch:
                ops.append(self._queue.popleft())
            try:
                batch = self._commit(ops)
            except BaseException as e:  # never let the thread die: fail the batch instead
                log.exception("store writer failed a batch")
                err = e if isinstance(e, StoreError) else StoreError(f"store write failed: {e!r}")
                for op in ops:
                    op.error = err
                batch = Batch(ops, [], 0, self._rev)
            self._deliver(batch)

    def _encode(self, ops: list[Op]) -> None:
        codec = self._codec
        for op in ops:
            if op.kind in (CREATE, UPDATE) and op.frame is None:
                op.frame = codec.encode(op.key, op.value)
                codec.observe(op.key, op.value)

    def _commit(self, ops: list[Op]) -> Batch:
        self._encode(ops)
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
        for ch in batch.changes:
            entry = (ch.revision, ch.create_revision, ch.version)
            self._overlay[ch.key] = entry
            self._overlay_order.append((ch.revision, ch.key))
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
                rev = L.U64.unpack(k)[0]
                if rev > last:
                    break
                kind, _f, create, version, _p, _n, _kl = L.HEADER.unpack_from(v)
                key = L.record_key(v)
                self._overlay[key] = (rev, create, version) if kind == L.PUT else (rev, 0, 0)
                self._overlay_order.append((rev, key))

    def _latest(self, staged: dict[bytes, Entry], key: bytes) -> Entry | None:
        e = staged.get(key)
        if e is None:
            e = self._overlay.get(key)
            if e is None:
                e = self._index.entries.get(key)
        return e

    def _write(self, txn: lmdb.Transaction, ops: list[Op]) -> Batch:
        meta, logdb = self._meta, self._log
        cur_rev = L.U64.unpack(txn.get(L.META_REV, db=meta))[0]
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
                    rec = L.encode_record(L.PUT, latest[1], version, prev, key, op.frame or b"")
                    staged[key] = (rev, latest[1], version)
                    ch = Change(rev, L.PUT, key, latest[1], version, prev, op.value)
                else:
                    rec = L.encode_record(L.DELETE, 0, 0, prev, key, b"")
                    staged[key] = (rev, 0, 0)
                    ch = Change(rev, L.DELETE, key, 0, 0, prev, None)
            if prev:
                self._link_previous(txn, prev, rev, ch)
            txn.put(L.rev_key(rev), rec, db=logdb, append=True)
            op.result = rev
            changes.append(ch)
        if rev != cur_rev:
            txn.put(L.META_REV, L.U64.pack(rev), db=meta)
        return Batch(ops, changes, first if rev >= first else 0, rev)

    def _link_previous(self, txn: lmdb.Transaction, prev: int, rev: int, ch: Change) -> None:
        """Point the key's previous record at its successor, and shrink it to a delta
        against the new value when it is a PUT superseded by a PUT."""
        pk = L.rev_key(prev)
        buf = txn.get(pk, db=self._log)
        if buf is None:  # compacted away (a tombstone): nothing to link
            return
        frame = None
        if ch.kind == L.PUT and buf[0] == L.PUT and ch.value is not None:
            old = L.decode_record(buf)
            if old.frame and old.frame[0] != DELTA:
                try:
                    ch.prev_value = self._codec.decode(old.frame)
                except Exception:  # an unknown dictionary: leave the record as it is
                    ch.prev_value = None
                if (ch.prev_value is not None and self._history_deltas
                        and old.version % self._keyframe_every != 0):
                    delta = self._codec.encode_delta(ch.prev_value, ch.value)
                    if delta is not None and len(delta) < len(old.frame):
                        frame = delta
        txn.put(pk, L.with_next(buf, rev, frame), db=self._log)

    def _validate_compact(self, txn: lmdb.Transaction, op: Op, current: int) -> None:
        target = op.expected
        done = L.U64.unpack(txn.get(L.META_COMPACT, db=self._meta))[0]
        if target <= done:
            op.error = Compacted(target, done)
        elif target > current:
            op.error = FutureRevision(target, current)
        else:
            txn.put(L.META_COMPACT, L.U64.pack(target), db=self._meta)
            op.result = target

    # -- compaction ---------------------------------------------------------
    def _compact_step(self) -> None:
        """Remove up to ``compact_chunk`` superseded records below the compaction point,
        in its own short transaction so client writes wait at most one chunk."""
        tombstones: list[tuple[bytes, int]] = []
        try:
            with self._env.begin(write=True) as txn:
                target = L.U64.unpack(txn.get(L.META_COMPACT, db=self._meta))[0]
                done = L.U64.unpack(txn.get(L.META_COMPACTED, db=self._meta))[0]
                if done >= target:
                    self._compaction_pending = False
                    return
                cur = txn.cursor(db=self._log)
                last = done
                n = 0
                positioned = cur.set_range(L.rev_key(done + 1))
                while positioned and n < self._compact_chunk:
                    rev = L.U64.unpack(cur.key())[0]
                    if rev > target:
                        break
                    v = cur.value()
                    kind, _f, _c, _v, _p, nxt, _kl = L.HEADER.unpack_from(v)
                    last = rev
                    n += 1
                    # A record at the compaction point itself stays: watches may start there.
                    if (kind == L.DELETE and rev < target) or (nxt != 0 and nxt <= target):
                        if kind == L.DELETE and nxt == 0:
                            tombstones.append((L.record_key(v), rev))
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
