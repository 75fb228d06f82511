"""What the LMDB environment holds, byte by byte.

One environment (a directory with ``data.mdb`` and ``lock.mdb``), three named
tables. Like etcd's bbolt backend, the only table keyed by user keys lives in
memory (``store.lmdb.index``) and is rebuilt from the log at open: every write
appends at the end of the log, so a commit dirties a handful of pages instead
of one random page per key, and fsync stays cheap.

``meta``: small values, ASCII keys::

    b"format"     MAGIC | u32 BE layout version          refuses foreign files at open
    b"rev"        u64 BE   the store's revision (last committed mutation)
    b"compact"    u64 BE   compaction point: reads below it raise Compacted
    b"compacted"  u64 BE   how far physical compaction has removed history (<= compact)

``log``: one record per revision; key: u64 BE revision, so every write is an
append at the end of the table (records are never rewritten, only compacted)::

    offset size
    0      1    kind            1 = PUT, 2 = DELETE
    1      1    flags           reserved, 0
    2      8    create_revision u64 BE (0 for DELETE)
    10     4    version         u32 BE (0 for DELETE)
    14     8    prev_revision   u64 BE  the key's previous record (any kind), 0 if none
    22     2    key length      u16 BE
    24     n    key
    24+n   ...  value frame     ``store.codec`` frame (empty for DELETE)

    A PUT's frame is a DELTA against the key's previous version (``prev_revision``)
    unless its version is a keyframe (1, 1+K, 1+2K, ...; ``keyframe_every`` = K):
    a status update then costs tens of bytes instead of hundreds, and reading any
    version decodes at most K-1 deltas. Compaction rewrites the version it keeps
    of each key as a full frame before dropping its predecessors.

``dicts``: compression dictionaries; key: u32 BE id::

    u16 BE prefix length | prefix | zstd dictionary bytes
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = b"controlplane-store\x00"
LAYOUT_VERSION = 1

DB_META = b"meta"
DB_LOG = b"log"
DB_DICTS = b"dicts"

META_FORMAT = b"format"
META_REV = b"rev"
META_COMPACT = b"compact"
META_COMPACTED = b"compacted"

PUT = 1
DELETE = 2

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
U16 = struct.Struct(">H")
HEADER = struct.Struct(">BBQIQH")
HEADER_SIZE = HEADER.size  # 24

FIRST_REVISION = 1  # a new store is at revision 1, like etcd; the first write takes 2


class Record(NamedTuple):
    kind: int
    create_revision: int
    version: int
    prev_revision: int
    key: bytes
    frame: bytes


def u64(buf: bytes | memoryview | None) -> int:
    """A u64 BE field that must exist (meta values, revision keys)."""
    if buf is None:
        from ..errors import CorruptStore

        raise CorruptStore("a required store field is missing")
    return int(U64.unpack(buf)[0])


def rev_key(revision: int) -> bytes:
    return U64.pack(revision)


def encode_record(kind: int, create_revision: int, version: int, prev_revision: int,
                  key: bytes, frame: bytes) -> bytes:
    return HEADER.pack(kind, 0, create_revision, version, prev_revision, len(key)) + key + frame


def decode_record(buf: bytes | memoryview) -> Record:
    kind, _flags, create, version, prev, klen = HEADER.unpack_from(buf)
    key = bytes(buf[HEADER_SIZE:HEADER_SIZE + klen])
    return Record(kind, create, version, prev, key, bytes(buf[HEADER_SIZE + klen:]))


def record_key(buf: bytes | memoryview) -> bytes:
    (klen,) = U16.unpack_from(buf, HEADER_SIZE - 2)
    return bytes(buf[HEADER_SIZE:HEADER_SIZE + klen])


def with_frame(buf: bytes | memoryview, frame: bytes) -> bytes:
    """The record with its value frame replaced (compaction materialises deltas)."""
    (klen,) = U16.unpack_from(buf, HEADER_SIZE - 2)
    return bytes(buf[:HEADER_SIZE + klen]) + frame


def is_keyframe(version: int, every: int) -> bool:
    return (version - 1) % every == 0


def encode_dict(prefix: bytes, data: bytes) -> bytes:
    return U16.pack(len(prefix)) + prefix + data


def decode_dict(buf: bytes | memoryview) -> tuple[bytes, bytes]:
    (plen,) = U16.unpack_from(buf)
    return bytes(buf[2:2 + plen]), bytes(buf[2 + plen:])
