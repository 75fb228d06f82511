"""The applier: a process that compresses WAL records into LMDB, then compacts.

``python -m store.lmdb.applier PATH [MAP_SIZE [DELTAS KEYFRAME_EVERY]]`` runs beside a process that has the store
open (``LmdbStore`` starts one) and ends when its standard input closes, that
is when its parent closes the store or dies, after a last pass.

Values reach the WAL uncompressed (a PLAIN frame): compression is the costliest
part of a write, and here it runs on the second core instead of the server's
event loop. The applier encodes each value with its key prefix's trained
dictionary, or, for an update, as a delta against the key's previous version
(unless the version is a keyframe, or its full frame is under ``DELTA_MIN_FRAME``); it samples values and trains the
dictionaries, which it stores in LMDB for every process to decode with.

Why a process: py-lmdb releases the GIL around every get and put, and zstd
would hold it. A thread doing thousands of puts beside a busy event loop waits
for the GIL after each one (600 puts took 1.7 s instead of 3 ms, measured),
and makes the loop hand it over as often. In its own process the applier has
its own GIL.

Compaction (``compact``/``compacted`` in ``meta``): for each key written in the
window since the last compaction, the record a read at the target sees is kept
(rewritten as a full frame if it was a delta) and everything of the key before
it is deleted; a tombstone is deleted too unless it is at the target itself,
where watches may start.
"""

from __future__ import annotations

import collections
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import lmdb

from ..codec import DELTA, PLAIN, Codec, UnknownDictionary, default_prefix
from . import layout as L
from . import wal

T = TypeVar("T")

APPLY_BATCH = 50_000     # records per LMDB transaction
# An update is written as a delta only when its dictionary-compressed frame is at least
# this long. A delta builds a zstd context around the previous version, about 40 us; a
# small value (a Lease: about 45 bytes with its prefix's dictionary, from 780) would
# save some 25 bytes for it, and at 100,000 nodes the applier spent a core on renewals.
DELTA_MIN_FRAME = 256
COMPACT_KEYS = 10_000    # keys per compaction transaction
RETRY_SECONDS = 0.5      # between passes that fail (a full disk)
RETRY_SAID_EVERY = 60.0  # how often a failure that lasts is said again


class Applier:
    """``env``/``dbs`` given: work on the caller's environment (recovery at open);
    otherwise open ``path`` (the process)."""

    def __init__(self, path: str, map_size: int = 1 << 34, *, history_deltas: bool = True,
                 keyframe_every: int = 8, env: lmdb.Environment | None = None,
                 dbs: dict[bytes, Any] | None = None) -> None:
        self.path = path
        self._own_env = env is None
        if env is None:
            env = lmdb.open(path, map_size=map_size, max_dbs=8, max_readers=1024, subdir=True,
                            sync=True, metasync=True, readahead=False, lock=True, create=False)
        self.env = env
        self.meta = dbs[L.DB_META] if dbs else env.open_db(L.DB_META, create=False)
        self.log = dbs[L.DB_LOG] if dbs else env.open_db(L.DB_LOG, create=False)
        self.dicts = dbs[L.DB_DICTS] if dbs else env.open_db(L.DB_DICTS, create=False)
        self.wal_dir = os.path.join(path, "wal")
        self.reader = wal.WalReader(self.wal_dir)
        self.head = wal.WalHead(self.wal_dir)
        self.recovering = env is not None  # at open, under the WAL lock: apply all that is whole
        self.codec = Codec()
        self.history_deltas = history_deltas
        self.keyframe_every = keyframe_every
        # key -> (revision, raw value) of recently applied PUTs: an update's delta base
        self._recent: collections.OrderedDict[bytes, tuple[int, bytes]] = collections.OrderedDict()
        self._recent_max = 50_000
        # a key prefix whose values teach the codec nothing more (``Codec.wants_samples``
        # False: its dictionary is trained for good), so its keys need not be asked about
        self._taught = b""
        self._load_dicts()

    def close(self) -> None:
        self.reader.close()
        self.head.close()
        if self._own_env:
            self.env.close()

    def _load_dicts(self) -> None:
        with self._begin(write=False) as txn:
            for k, v in txn.cursor(db=self.dicts):
                prefix, data = L.decode_dict(v)
                dict_id = L.U32.unpack(k)[0]
                if not self.codec.has_dictionary(dict_id):
                    self.codec.add_dictionary(dict_id, prefix, data)

    def _begin(self, write: bool) -> lmdb.Transaction[bytes]:
        """A transaction, after adopting the map size if another process grew it."""
        while True:
            try:
                txn: lmdb.Transaction[bytes] = self.env.begin(write=write)
                return txn
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    def _write(self) -> lmdb.Transaction[bytes]:
        return self._begin(write=True)

    def _grow(self) -> None:
        self.env.set_mapsize(self.env.info()["map_size"] * 2)

    def _transact(self, body: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``body`` in a write transaction and commit; on a full map, grow it and
        run ``body`` again from the start."""
        while True:
            txn = self._write()
            try:
                result = body(txn)
                txn.commit()
                return result
            except lmdb.MapFullError:
                txn.abort()
                self._grow()
            except BaseException:
                txn.abort()
                raise

    # -- WAL -> LMDB ----------------------------------------------------------
    def apply_once(self) -> bool:
        """Move up to APPLY_BATCH records into LMDB, compressed. True if some moved."""
        while True:
            txn = self._write()
            recent_before = len(self._recent)
            try:
                applied = L.u64(txn.get(L.META_REV, db=self.meta))
                if self.reader.next_revision != applied + 1:
                    self.reader.seek(applied + 1)
                # only records the head says are durable (a batch is published after its fdatasync)
                limit = APPLY_BATCH if self.recovering else min(APPLY_BATCH, self.head.read() - applied)
                rev_key, encode = L.rev_key, self._encode
                records = [(rev_key(rev), encode(txn, rev, payload)) for rev, payload in self.reader.read(limit)]
                if not records:
                    txn.abort()
                    return False
                # one call for them all: a put each released and took the GIL again
                _consumed, added = txn.cursor(db=self.log).putmulti(records, append=True)
                if added != len(records):
                    raise lmdb.Error(f"{len(records) - added} records of the WAL were already in LMDB "
                                     f"after revision {applied}")
                last = L.u64(records[-1][0])
                txn.put(L.META_REV, L.U64.pack(last), db=self.meta)
                txn.commit()
            except lmdb.MapFullError:
                txn.abort()
                self.reader.next_revision = 0
                self._grow()
                continue
            except BaseException:
                txn.abort()
                self.reader.next_revision = 0
                if len(self._recent) != recent_before:
                    self._recent.clear()  # it may hold values of records that were not applied
                raise
            wal.delete_applied(self.wal_dir, last)
            self._train()
            return True

    def _encode(self, txn: lmdb.Transaction, rev: int, payload: bytes) -> bytes:
        """The record as LMDB keeps it: an update as a delta against its previous
        version, a PLAIN value compressed, anything else as the writer compressed it."""
        kind, _flags, _create, version, _prev, klen = L.HEADER.unpack_from(payload)
        at = L.HEADER_SIZE + klen  # the frame's first byte
        if kind != L.PUT:
            self._recent.pop(payload[L.HEADER_SIZE:at], None)
            return payload
        if len(payload) == at or payload[at] == DELTA:
            return payload  # replayed after a crash: already in its final form
        # decided from the header and the frame's tag: most records (updates already
        # compressed by the writer, no delta due) go as they are, neither decoded nor copied
        plain = payload[at] == PLAIN
        codec = self.codec
        delta_wanted = (self.history_deltas and version > 1 and not L.is_keyframe(version, self.keyframe_every)
                        and (plain or len(payload) - at >= DELTA_MIN_FRAME))
        if not (plain or delta_wanted):
            key = payload[L.HEADER_SIZE:at]
            taught = bool(self._taught) and key.startswith(self._taught)
            if not taught and not codec.wants_samples(key):
                taught = True
                if codec.prefix_of is default_prefix:
                    self._taught = default_prefix(key)
            if taught:
                self._recent.pop(key, None)  # compressed already, no delta due: nothing to do
                return payload
        rec = L.decode_record(payload)
        value = rec.frame[1:] if plain else self._decode(txn, rec.frame)
        frame = None
        if delta_wanted and plain:  # the full frame first: its size says whether a delta is worth its cost
            frame = codec.encode(rec.key, value)
            delta_wanted = len(frame) >= DELTA_MIN_FRAME
        if delta_wanted:
            base = self._recent.get(rec.key)
            prev = base[1] if base is not None and base[0] == rec.prev_revision else None
            if prev is None:
                try:
                    prev = self._value_at(txn, rec.prev_revision)
                except (lmdb.Error, ValueError):
                    prev = None
            if prev is not None:
                delta = codec.encode_delta(value, prev)
                if delta is not None and len(delta) < len(frame if frame is not None else rec.frame):
                    frame = delta
        if frame is None:
            frame = codec.encode(rec.key, value) if plain else rec.frame
        codec.observe(rec.key, value)
        recent = self._recent
        recent[rec.key] = (rev, value)
        recent.move_to_end(rec.key)
        if len(recent) > self._recent_max:
            recent.popitem(last=False)
        return L.with_frame(payload, frame)

    def _train(self) -> None:
        """Train and store the dictionaries that are due (values seen so far are samples)."""
        for prefix in self.codec.training_due():
            data = self.codec.train(prefix)
            if data is None:
                continue
            def store_dict(txn: lmdb.Transaction, prefix: bytes = prefix, data: bytes = data) -> int:
                c = txn.cursor(db=self.dicts)
                dict_id = L.U32.unpack(c.key())[0] + 1 if c.last() else 1
                txn.put(L.U32.pack(dict_id), L.encode_dict(prefix, data), db=self.dicts)
                return dict_id
            self.codec.add_dictionary(self._transact(store_dict), prefix, data)

    # -- compaction -------------------------------------------------------------
    def _decode(self, txn: lmdb.Transaction, frame: bytes) -> bytes:
        try:
            return self.codec.decode(frame)
        except UnknownDictionary:
            self._load_dicts()
            return self.codec.decode(frame)

    def _value_at(self, txn: lmdb.Transaction, revision: int) -> bytes:
        deltas: list[bytes] = []
        rev = revision
        while True:
            buf = txn.get(L.rev_key(rev), db=self.log)
            if buf is None:
                raise lmdb.Error(f"revision {revision} needs {rev}, which is missing")
            rec = L.decode_record(buf)
            if rec.frame and rec.frame[0] == DELTA:
                deltas.append(rec.frame)
                rev = rec.prev_revision
                continue
            value: bytes = self._decode(txn, rec.frame) if rec.frame else b""
            break
        for d in reversed(deltas):
            value = self.codec.decode_delta(d, value)
        return value

    def compact_once(self) -> bool:
        """Run the pending compaction, COMPACT_KEYS keys per transaction. True if it ran."""
        with self._begin(write=False) as txn:
            target = L.u64(txn.get(L.META_COMPACT, db=self.meta))
            done = L.u64(txn.get(L.META_COMPACTED, db=self.meta))
            applied = L.u64(txn.get(L.META_REV, db=self.meta))
            if done >= target or applied < target:
                return False
            kept: dict[bytes, int] = {}  # key -> its last record in (done, target]
            cur = txn.cursor(db=self.log)
            if cur.set_range(L.rev_key(done + 1)):
                for k, v in cur:
                    rev = L.u64(k)
                    if rev > target:
                        break
                    kept[L.record_key(v)] = rev
        revs = list(kept.values())
        for i in range(0, len(revs), COMPACT_KEYS):
            def chunk(txn: lmdb.Transaction, part: list[int] = revs[i:i + COMPACT_KEYS]) -> None:
                for rev in part:
                    self._compact_key(txn, rev, done, target)
            self._transact(chunk)

        def finish(txn: lmdb.Transaction) -> None:
            if L.u64(txn.get(L.META_COMPACTED, db=self.meta)) < target:
                txn.put(L.META_COMPACTED, L.U64.pack(target), db=self.meta)
        self._transact(finish)
        return True

    def _compact_key(self, txn: lmdb.Transaction, kept: int, done: int, target: int) -> None:
        buf = txn.get(L.rev_key(kept), db=self.log)
        if buf is None:  # an earlier, interrupted pass got here first
            return
        rec = L.decode_record(buf)
        if rec.kind == L.PUT and rec.frame and rec.frame[0] == DELTA:  # before its base goes
            full = self.codec.encode(rec.key, self._value_at(txn, kept))
            txn.put(L.rev_key(kept), L.with_frame(buf, full), db=self.log)
        prev = rec.prev_revision
        while prev:
            old = txn.get(L.rev_key(prev), db=self.log)
            if old is None:
                break
            older = L.HEADER.unpack_from(old)[4]
            txn.delete(L.rev_key(prev), db=self.log)
            if prev <= done:  # the record the last compaction kept: nothing older is left
                break
            prev = older
        if rec.kind == L.DELETE and kept < target:
            txn.delete(L.rev_key(kept), db=self.log)

    # -- the process ------------------------------------------------------------
    def run(self, interval: float = 0.02, idle_interval: float = 0.2) -> None:
        """Apply and compact until the owner's pipe closes: every ``interval`` while
        there is work, backing off (doubling) to ``idle_interval`` while there is none.
        An idle pass still takes LMDB's write lock, and a wake-up costs about 0.2 ms of
        CPU here: at 50 a second, most of an idle server's helper processes' CPU. Nothing
        waits on the backoff: a write is durable in the WAL, and readable from the
        server's pending records, before the applier moves it."""
        closing = threading.Event()

        def watch_stdin() -> None:
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except (OSError, ValueError):
                pass
            closing.set()
        threading.Thread(target=watch_stdin, daemon=True).start()
        # One applier works at a time: every server process over this store starts one,
        # and two would take turns, each finding its reader behind LMDB and seeking it
        # again (reading its segment from the start) on every batch. The others wait
        # here; the lock is released when its holder exits, however it exits.
        lock = os.open(os.path.join(self.wal_dir, "applier.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if closing.wait(0.2):
                    return
        wait = interval
        failing, said_at = "", 0.0  # the error retried, and when it was last said
        while True:
            stopping = closing.is_set()
            try:
                worked = False
                while self.apply_once():
                    worked = True
                worked = self.compact_once() or worked
            except Exception as e:  # a full disk, say: the WAL keeps everything; retry
                if stopping:
                    return  # the next open replays what is left
                # said once, and again each minute it lasts (it was twice a second, on a disk
                # that is full: where the log goes, often)
                now = time.monotonic()
                if str(e) != failing or now - said_at >= RETRY_SAID_EVERY:
                    print(f"store applier: {e}; retrying every {RETRY_SECONDS} s", file=sys.stderr, flush=True)
                    failing, said_at = str(e), now
                closing.wait(RETRY_SECONDS)
                continue
            if failing:
                print("store applier: applying again", file=sys.stderr, flush=True)
                failing = ""
            if stopping:
                return
            wait = interval if worked else min(wait * 2, idle_interval)
            closing.wait(wait)


def main(argv: list[str] | None = None) -> int:
    # a Ctrl-C on the terminal reaches the whole process group, as does a SIGTERM to the group
    # (systemd's stop): the server that owns this process stops it (its pipe closes); the
    # signal itself must not kill it mid-batch, nor have the stopping server start another
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    args = sys.argv[1:] if argv is None else argv
    applier = Applier(args[0], int(args[1]) if len(args) > 1 else 1 << 34,
                      history_deltas=(args[2] != "0") if len(args) > 2 else True,
                      keyframe_every=int(args[3]) if len(args) > 3 else 8)
    try:
        applier.run()
    finally:
        applier.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
