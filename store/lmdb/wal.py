"""The write-ahead log: what makes a write durable before LMDB holds it.

An LMDB commit with sync costs an fdatasync of scattered pages plus a
synchronous meta-page write (about 1.5 ms here); appending a batch to a
preallocated file and calling fdatasync costs about 0.3 ms. So a batch is
acknowledged once it is in the WAL, and the applier moves WAL records into
LMDB in large, synced transactions a few times a second (as etcd's WAL sits in
front of its bbolt backend). Readers find a record in LMDB or, until it is
applied, in the process's ``pending`` map (filled by the writer and by tailing
the WAL, so records written by other processes are seen too).

Files, in ``<store>/wal/``::

    <first revision, 20 digits>.wal   segments, preallocated, written append-only;
                                      1 MiB at first, doubling up to 64 MiB, so a
                                      store that writes little holds little
    lock                              flock'ed by the writer of any process while it
                                      assigns revisions and appends
    head                              the last revision appended (``WalHead``)
    openers                           read-locked by every open store (``Openers``)

A segment is a sequence of records, then zeros::

    u32 BE  payload length (0: end of the written part)
    u32 BE  crc32 of revision and payload
    u64 BE  revision
    ...     payload: a ``layout`` log record

Revisions are consecutive across segments. A new segment starts when a batch
does not fit; it is named after its first revision, so a reader at the end of
one segment knows the next one's name. A crash can leave a torn record at the
end of the last segment: recovery (at open, under the lock) truncates the
segment after the last whole record. Segments whose records are all in LMDB are
deleted by the applier.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import mmap
import os
import struct
import zlib
from collections.abc import Iterator

HEADER = struct.Struct(">IIQ")
_REVISION = struct.Struct(">Q")
SEGMENT_BYTES = 64 << 20  # the largest a segment is preallocated to
FIRST_SEGMENT_BYTES = 1 << 20  # a store's first; each next one twice the last, up to SEGMENT_BYTES
_NAME = "{:020d}.wal"
# bytes a reader reads ahead: FIRST_READ_AHEAD at first, doubling up to READ_AHEAD (a
# batch of a few thousand records in a few preads)
FIRST_READ_AHEAD = 4096
READ_AHEAD = 1 << 20


def _crc(rev_and_payload: bytes | memoryview) -> int:
    return zlib.crc32(rev_and_payload) & 0xFFFFFFFF


def encode(revision: int, payload: bytes) -> bytes:
    body = struct.pack(">Q", revision) + payload
    return struct.pack(">II", len(payload), _crc(body)) + body


def encode_many(records: list[tuple[int, bytes]]) -> bytes:
    """``encode`` of each ``(revision, payload)``, joined: a batch's records as appended."""
    parts: list[bytes] = []
    add, pack, rev_of, crc32 = parts.append, HEADER.pack, _REVISION.pack, zlib.crc32
    for revision, payload in records:
        add(pack(len(payload), crc32(payload, crc32(rev_of(revision))) & 0xFFFFFFFF, revision))
        add(payload)
    return b"".join(parts)


def segment_names(directory: str) -> list[tuple[int, str]]:
    """(first revision, path) of every segment, in order."""
    out = []
    for name in os.listdir(directory):
        if name.endswith(".wal") and name[:-4].isdigit():
            out.append((int(name[:-4]), os.path.join(directory, name)))
    out.sort()
    return out


class WalHead:
    """The WAL's last revision, in a small file every process maps (``wal/head``).

    The writer of any process sets it, holding the WAL lock, right after appending;
    a reader compares it with what it has seen and looks at LMDB and the WAL only
    when it moved. Reading a mapped u64 takes no system call, so the common case
    of a read (nothing new from other processes) costs no GIL hand-off either.
    Two copies guard against a torn read: a value counts when both agree."""

    SIZE = 4096

    def __init__(self, directory: str) -> None:
        path = os.path.join(directory, "head")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < self.SIZE:
                os.ftruncate(fd, self.SIZE)
            self._map = mmap.mmap(fd, self.SIZE)
        finally:
            os.close(fd)

    UNKNOWN = 1 << 62  # torn (a writer died between the two copies): readers must look

    def read(self) -> int:
        for _attempt in range(100):
            a, b = struct.unpack_from(">QQ", self._map, 0)
            if a == b:
                return int(a)
        return self.UNKNOWN

    def publish(self, revision: int) -> None:
        """Raise the head to ``revision``. Call it holding the WAL lock: it must only grow."""
        a, b = struct.unpack_from(">QQ", self._map, 0)
        if a != b or revision > a:
            value = max(revision, a, b)  # a torn head is repaired upwards: too high only costs a look
            struct.pack_into(">Q", self._map, 0, value)
            struct.pack_into(">Q", self._map, 8, value)

    def close(self) -> None:
        self._map.close()


class WalLock:
    """The cross-process writer lock (flock on ``wal/lock``).

    flock belongs to an open file, not to a thread: two threads sharing one
    ``WalLock`` share the lock, and either's unlock releases it. Each thread
    that takes the lock opens its own."""

    def __init__(self, directory: str) -> None:
        self._fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> WalLock:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


class Openers:
    """Whether anyone else has the store open: every open holds a read lock on byte 0 of
    ``wal/openers``, and ``others()`` asks the kernel whether a write lock there would
    conflict with one (``F_OFD_GETLK``: one system call, nothing taken).

    Open file description locks (Linux 3.15 on) belong to the open, not to the process:
    two stores one process opened see each other, and a process's death releases its
    lock. Without them (another platform), ``others()`` is always True."""

    _FLOCK = struct.Struct("hhqqi4x")  # struct flock: type, whence, start, len, pid

    def __init__(self, directory: str) -> None:
        self._fd = os.open(os.path.join(directory, "openers"), os.O_RDWR | os.O_CREAT, 0o644)
        self._held = hasattr(fcntl, "F_OFD_SETLK")
        if self._held:
            try:
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, self._FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 1, 0))
            except OSError:  # a file system without them
                self._held = False

    def others(self) -> bool:
        if not self._held:
            return True
        answer = fcntl.fcntl(self._fd, fcntl.F_OFD_GETLK, self._FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
        return bool(self._FLOCK.unpack(answer)[0] != fcntl.F_UNLCK)

    def close(self) -> None:
        os.close(self._fd)


class WalReader:
    """Reads whole records in revision order, from any revision on, following
    segments as they are added; stops (for now) at zeros or a torn record."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._first = 0        # first revision of the open segment
        self._offset = 0
        self.next_revision = 0  # the revision the next record must have

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def position(self) -> tuple[int, int]:
        return self._first, self._offset

    def skip_to(self, first: int, offset: int, next_revision: int) -> None:
        """Jump over records the caller already has (its own batch, which ends in segment
        ``first`` at ``offset``); the caller knows nothing before it is missing."""
        if self._fd is None or self._first != first:
            self.close()
            try:
                self._fd = os.open(os.path.join(self.directory, _NAME.format(first)), os.O_RDONLY)
            except FileNotFoundError:  # applied and deleted already: wait for what comes next
                self._first, self._offset, self.next_revision = 0, 0, next_revision
                return
        self._first, self._offset, self.next_revision = first, offset, next_revision

    def seek(self, revision: int) -> bool:
        """Position at ``revision``. False if no segment holds it (yet, or any more);
        the reader then waits at the end of what exists."""
        if self._fd is not None and self._first <= self.next_revision <= revision:
            # ahead of where it stands: read on from here, not from the segment's start
            while self.next_revision < revision:
                if not any(True for _ in self.read(revision - self.next_revision)):
                    break
            if self.next_revision == revision:
                return True
        self.close()
        segments = [s for s in segment_names(self.directory) if s[0] <= revision]
        if not segments:
            self._first, self._offset, self.next_revision = 0, 0, revision
            return False
        first, path = segments[-1]
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self._first, self._offset, self.next_revision = 0, 0, revision
            return False
        self._first, self._offset, self.next_revision = first, 0, first
        while self.next_revision < revision:
            if not any(True for _ in self.read(revision - self.next_revision)):
                break
        return self.next_revision == revision

    def _open_next(self) -> bool:
        if self._fd is not None and self._first == self.next_revision:
            return False  # already in the segment that starts here (created, not yet written)
        path = os.path.join(self.directory, _NAME.format(self.next_revision))
        if not os.access(path, os.F_OK):  # the usual answer, and an exception costs more
            return False
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        self.close()
        self._fd, self._first, self._offset = fd, self.next_revision, 0
        return True

    def read(self, limit: int = 1 << 30) -> Iterator[tuple[int, bytes]]:
        """The records after the current position, at most ``limit``.

        Records are taken from chunks read ahead: one ``pread`` for many records, not
        two a record. The first chunk is small (most reads find nothing new, or a few
        records), each next one twice the last, up to READ_AHEAD. A chunk is parsed only
        within this call: the file grows past it meanwhile, and what it held beyond the
        last whole record (zeros, a record half copied in) is read again next time."""
        if limit <= 0 or (self._fd is None and not self._open_next()):
            return
        n = 0
        data, at = b"", self._offset  # the chunk, and the file offset it starts at
        ahead = FIRST_READ_AHEAD // 2
        while n < limit:
            assert self._fd is not None
            pos = self._offset - at
            if pos + HEADER.size > len(data):
                ahead = min(2 * ahead, READ_AHEAD)
                data, at, pos = self._chunk(ahead), self._offset, 0
            if len(data) < pos + HEADER.size or data[pos:pos + 4] == b"\x00\x00\x00\x00":
                if self._open_next():
                    data, at = b"", 0
                    continue
                return
            length, crc, _ = HEADER.unpack_from(data, pos)
            end = pos + HEADER.size + length
            if end > len(data):  # beyond the chunk: the next one starts at this record
                ahead = min(2 * ahead, READ_AHEAD)
                data, at, pos = self._chunk(max(ahead, HEADER.size + length)), self._offset, 0
                end = HEADER.size + length
            # The revision is taken from the bytes the crc covers: a header may have been read
            # while the record was still being copied in (a reader ahead of the durable mark:
            # recovery), its revision bytes not there yet.
            body = memoryview(data)[pos + 8:end]
            if len(body) < 8 + length or _crc(body) != crc:
                # torn, or not yet whole when the chunk was read: read it alone once more
                whole = os.pread(self._fd, HEADER.size + length, self._offset)
                if len(whole) < HEADER.size + length or HEADER.unpack_from(whole)[0] != length \
                        or _crc(whole[8:]) != HEADER.unpack_from(whole)[1]:
                    # torn or not yet fully written; a later read may find it whole
                    if self._open_next():  # abandoned (its writer died): the log went on in a new segment
                        data, at = b"", 0
                        continue
                    return
                data, at, pos, end = whole, self._offset, 0, len(whole)
            rev = _REVISION.unpack_from(data, pos + 8)[0]
            if rev != self.next_revision:
                raise RuntimeError(f"WAL revision {rev} where {self.next_revision} was expected")
            self._offset += HEADER.size + length
            self.next_revision = rev + 1
            n += 1
            yield rev, data[pos + HEADER.size:end]

    def _chunk(self, size: int) -> bytes:
        """``size`` bytes of the segment from the current offset (fewer at its end)."""
        assert self._fd is not None
        return os.pread(self._fd, size, self._offset)


class WalWriter:
    """Appends batches (the caller holds the ``WalLock``), and makes them durable."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._first = 0
        self._offset = 0
        self._capacity = 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def attach(self, reader: WalReader) -> None:
        """Append where ``reader`` (which has read every whole record) stopped."""
        first, offset = reader.position()
        if self._fd is not None and (first, offset) == (self._first, self._offset):
            return
        self.close()
        if reader._fd is None:  # no segment yet
            self._first, self._offset = reader.next_revision, 0
            return
        self._fd = os.open(os.path.join(self.directory, _NAME.format(first)), os.O_WRONLY)
        self._first, self._offset = first, offset
        self._capacity = os.fstat(self._fd).st_size

    def append(self, first_revision: int, data: bytes) -> tuple[int, int, int]:
        """Write ``data`` (encoded records from ``first_revision`` on), not yet durable
        (the syncer process makes it so). Returns (segment, start offset, end offset)."""
        if self._fd is None or self._offset + len(data) > self._capacity:
            self._new_segment(first_revision, len(data))
        assert self._fd is not None
        start = self._offset
        written = os.pwrite(self._fd, data, start)
        if written != len(data):
            raise OSError(28, f"short write to the write-ahead log ({written} of {len(data)} bytes)")
        self._offset = start + len(data)
        return self._first, start, self._offset


    def _new_segment(self, first_revision: int, need: int) -> None:
        self.close()
        path = os.path.join(self.directory, _NAME.format(first_revision))
        # preallocated: an fdatasync then need not journal a growing file size, and a
        # full disk shows here, before anything is written. Small when space is short.
        st = os.statvfs(self.directory)
        grown = min(SEGMENT_BYTES, max(FIRST_SEGMENT_BYTES, 2 * self._capacity))
        size = max(min(grown, st.f_bavail * st.f_frsize // 4), 256 << 10, need + 4096)
        # O_EXCL: a segment of that name means another writer got there first, and we
        # must not write into it (our view of the log's end is stale: the batch fails)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            os.remove(path)
            raise
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the new name is durable too
        finally:
            os.close(dfd)
        self._fd, self._first, self._offset, self._capacity = fd, first_revision, 0, size


def truncate_torn_tail(directory: str, reader: WalReader) -> None:
    """After recovery has read every whole record: cut what follows the last one
    (a torn write), so a reader never stops there again. Caller holds the lock."""
    first, offset = reader.position()
    if reader._fd is None:
        return
    head = os.pread(reader._fd, HEADER.size, offset)
    if len(head) == HEADER.size and head[:4] != b"\x00\x00\x00\x00":
        path = os.path.join(directory, _NAME.format(first))
        with open(path, "r+b") as f:
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
    # a later, empty segment may exist (created, never written): it stays valid


def delete_applied(directory: str, applied: int) -> None:
    """Delete segments all of whose records are at or below ``applied`` (never the last)."""
    for (_first, path), (next_first, _) in itertools.pairwise(segment_names(directory)):
        if next_first - 1 <= applied:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
