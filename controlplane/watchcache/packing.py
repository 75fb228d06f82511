"""The cache's objects, kept compressed: zstd with a dictionary per resource.

A realistic pod is 4.4 KB of JSON; a million of them as plain bytes would hold
4.4 GB, and orjson's output bytes keep their growth slack (a 5 KB document
occupies 8 KB). Once a resource's cache has seen ``train_after`` objects, a
dictionary is trained on them in a thread and every entry made after it is
packed: about 450 bytes per pod, a tenth (docs/benchmarks.md).

The price is a decompression per object served (a few microseconds; a watch
event is unpacked once and shared by every watcher). Small caches (most
resources) never train and keep their JSON, copied to its exact size.

A packed body is ``PACKED``, the dictionary's slot (2 bytes, little-endian),
then a zstd frame with its content size. JSON always starts with ``{``, so
``unpack`` tells them apart by the first byte::

    >>> unpack(b'{"kind":"Pod"}')
    b'{"kind":"Pod"}'
"""

from __future__ import annotations

import logging
import struct
import threading
from typing import Final

import zstandard as zstd

from store import heldzstd

__all__ = ["PACKED", "Packer", "any_packed", "json_size", "unpack", "unpack_many"]

log = logging.getLogger(__name__)

PACKED: Final = 0xFD
# Bodies shorter than this stay JSON even once a dictionary is trained: a Lease
# renewed every 10 s would otherwise pay a compression per write and a
# decompression per read and update (~60 µs of a ~740 µs renewal) to save about
# 300 bytes; pods, at 1.5-5 KB, are packed.
MIN_PACKED: Final = 1024
_SLOT = struct.Struct("<BH")  # PACKED, dictionary slot

# slot -> decompressor; slots are never reused, so a body stays readable for the
# life of the process whichever cache or snapshot holds it. These keep the GIL
# (``store.heldzstd``): they serve the event loop, one small body at a time.
_DECOMPRESSORS: list[heldzstd.Decompress] = []
_SLOTS_LOCK = threading.Lock()


def unpack(body: bytes) -> bytes:
    """The JSON of an entry's body, packed or not."""
    if body[0] != PACKED:
        return body
    return _DECOMPRESSORS[body[1] | body[2] << 8].decompress(body[3:])


def json_size(body: bytes) -> int:
    """The size of an entry's JSON without unpacking it: a packed body's frame says it."""
    if body[0] != PACKED:
        return len(body)
    size = zstd.frame_content_size(body[3:])
    return size if size >= 0 else len(body)


def any_packed(bodies: list[bytes]) -> bool:
    return any(b[0] == PACKED for b in bodies)


# A python-zstandard decompressor may be used by one thread at a time, and releases the
# GIL, which is what a worker wants: threads other than the event loop's
# (``unpack_many`` on a worker) have their own, made from the same dictionaries.
_DICTIONARIES: list[zstd.ZstdCompressionDict] = []
_local = threading.local()


def unpack_many(bodies: list[bytes]) -> list[bytes]:
    """The JSON of many bodies, for a thread other than the event loop's: zstd
    releases the GIL while it decompresses, so a large page unpacked here leaves
    the loop free (``await asyncio.to_thread(unpack_many, bodies)``)."""
    mine: list[zstd.ZstdDecompressor] | None = getattr(_local, "decompressors", None)
    if mine is None:
        mine = _local.decompressors = []
    while len(mine) < len(_DICTIONARIES):
        mine.append(zstd.ZstdDecompressor(dict_data=_DICTIONARIES[len(mine)]))
    out = []
    for body in bodies:
        if body[0] != PACKED:
            out.append(body)
        else:
            out.append(mine[body[1] | body[2] << 8].decompress(memoryview(body)[3:]))
    return out


def _new_slot(dictionary: zstd.ZstdCompressionDict) -> int:
    with _SLOTS_LOCK:
        _DECOMPRESSORS.append(heldzstd.decompressor(dictionary.as_bytes()))
        _DICTIONARIES.append(dictionary)
        slot = len(_DECOMPRESSORS) - 1
    if slot > 0xFFFF:
        raise OverflowError("more than 65,536 trained dictionaries")
    return slot


class Packer:
    """Packs one resource's entry bodies, once it has seen enough of them to train on.

    Not thread-safe: the cache's applier (one task) and the API's writers (the
    event loop) call ``pack``; only the training runs on a thread of its own."""

    def __init__(self, train_after: int = 1000, dict_size: int = 64 * 1024, level: int = 1) -> None:
        self.train_after = train_after
        self.dict_size = dict_size
        self.level = level
        self._samples: list[bytes] | None = [] if train_after > 0 else None
        self._compressor: heldzstd.Compress | None = None
        self._head = b""

    @property
    def trained(self) -> bool:
        return self._compressor is not None

    def pack(self, raw: bytes) -> bytes:
        compressor = self._compressor
        if compressor is not None and len(raw) >= MIN_PACKED:
            return self._head + compressor.compress(raw)
        body = bytes(memoryview(raw))  # exact size: drop the serialiser's slack
        if self._samples is not None:
            self._sample(body)
        return body

    def pack_exact(self, raw: bytes) -> bytes:
        """``pack`` of bytes made at their exact size (by a join or a concatenation, not by
        a serialiser, whose output keeps its growth slack): kept as they are, not copied.
        The bulk writes' spliced versions (``prime_attrs``), 10,000 a second at 100,000
        nodes, where the copy was 4% of a renewal."""
        compressor = self._compressor
        if compressor is not None and len(raw) >= MIN_PACKED:
            return self._head + compressor.compress(raw)
        if self._samples is not None:
            self._sample(raw)
        return raw

    def _sample(self, body: bytes) -> None:
        """Keep ``body`` to train the dictionary on; train once there are enough."""
        samples = self._samples
        assert samples is not None
        samples.append(body)
        if len(samples) >= self.train_after:
            self._samples = None
            threading.Thread(target=self._train, args=(samples,), name="packer-train", daemon=True).start()

    def _train(self, samples: list[bytes]) -> None:
        try:
            dictionary = zstd.train_dictionary(self.dict_size, list[bytes | bytearray | memoryview](samples),
                                               level=self.level)
        except zstd.ZstdError as e:  # too few or too alike samples: stay unpacked
            log.info("no dictionary trained (%s); entries stay unpacked", e)
            return
        head = _SLOT.pack(PACKED, _new_slot(dictionary))
        compressor = heldzstd.compressor(dictionary.as_bytes(), self.level)
        self._head = head
        self._compressor = compressor  # last: pack() reads it first, then the head
