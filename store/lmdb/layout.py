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

``log``: one record per revision; key: u64 BE revision, so appends are in key order::

    offset size
    0      1    kind            1 = PUT, 2 = DELETE
    1      1    flags           reserved, 0
    2      8    create_revision u64 BE (0 for DELETE)
    10     4    version         u32 BE (0 for DELETE)
    14     8    prev_revision   u64 BE  the key's previous record (any kind), 0 if none
    22     8    next_revision   u64 BE  the key's next record, 0 while this is the latest
    30     2    key length      u16 BE
    32     n    key
    32+n   ...  value frame     ``store.codec`` frame (empty for DELETE)

    ``next_revision`` is the one field rewritten after the append: when a key is
    updated or deleted, its previous record learns its successor (compaction needs
    it), and a superseded PUT's frame may be rewritten as a DELTA against the new
    value (history costs tens of bytes per version instead of hundreds).

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
HEADER = struct.Struct(">BBQIQQH")
HEADER_SIZE = HEADER.size  # 32
NEXT_OFFSET = 22

FIRST_REVISION = 1  # a new store is at revision 1, like etcd; the first write takes 2


class Record(NamedTuple):
    kind: int
    create_revision: int
    version: int
    prev_revision: int
    next_revision: int
    key: bytes
    frame: bytes


def rev_key(revision: int) -> bytes:
    return U64.pack(revision)


def encode_record(kind: int, create_revision: int, version: int, prev_revision: int,
                  key: bytes, frame: bytes, next_revision: int = 0) -> bytes:
    return HEADER.pack(kind, 0, create_revision, version, prev_revision, next_revision, len(key)) + key + frame


def decode_record(buf: bytes | memoryview) -> Record:
    kind, _flags, create, version, prev, nxt, klen = HEADER.unpack_from(buf)
    key = bytes(buf[HEADER_SIZE:HEADER_SIZE + klen])
    return Record(kind, create, version, prev, nxt, key, bytes(buf[HEADER_SIZE + klen:]))


def record_key(buf: bytes | memoryview) -> bytes:
    (klen,) = U16.unpack_from(buf, HEADER_SIZE - 2)
    return bytes(buf[HEADER_SIZE:HEADER_SIZE + klen])


def with_next(buf: bytes | memoryview, next_revision: int, frame: bytes | None = None) -> bytes:
    """The record with its ``next_revision`` set (and its frame replaced, if given)."""
    b = bytearray(buf)
    U64.pack_into(b, NEXT_OFFSET, next_revision)
    if frame is not None:
        (klen,) = U16.unpack_from(b, HEADER_SIZE - 2)
        del b[HEADER_SIZE + klen:]
        b += frame
    return bytes(b)


def encode_dict(prefix: bytes, data: bytes) -> bytes:
    return U16.pack(len(prefix)) + prefix + data


def decode_dict(buf: bytes | memoryview) -> tuple[bytes, bytes]:
    (plen,) = U16.unpack_from(buf)
    return bytes(buf[2:2 + plen]), bytes(buf[2 + plen:])
