"""Value compression: zstd with a trained dictionary per key prefix.

Kubernetes objects of one kind are alike (field names, defaults, images,
labels), and each is too small for a compressor to learn that on its own, so
DEFLATE or plain zstd save little. A dictionary trained on a few thousand
stored values of the same prefix (``/registry/pods/``, ``/registry/nodes/``,
...) lets each value refer to what all the others share.

Frame layout (the first byte names the encoding)::

    0x00 PLAIN      | raw bytes                      tiny or incompressible values
    0x01 ZSTD       | zstd frame                     no dictionary for the prefix yet
    0x02 ZSTD_DICT  | dict id: u32 BE | zstd frame   the prefix's dictionary, by id
    0x03 DELTA      | zstd frame                     a history version, compressed with
                                                     the key's next version as the
                                                     dictionary (see ``encode_delta``)

Dictionaries are never deleted, so a value written under an old dictionary
stays readable after retraining. They live inside the backend (LMDB table or
etcd keys) and are loaded by id on demand, so every process and every
API server replica reads what any other wrote.

A thread that releases the GIL for each 10 µs compression of a small value
waits for it to come back after each one (a convoy behind a busy event loop:
200 batches of 64 took 92 s instead of 0.14 s, measured), so the LMDB writer
compresses a whole batch in one call (``encode_many``); a batch too small to pay
for that call is compressed a value at a time without releasing the GIL
(``heldzstd``). zstd contexts are per thread.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import zstandard as zstd

from . import heldzstd

__all__ = [
    "PLAIN",
    "ZSTD",
    "ZSTD_DICT",
    "DELTA",
    "Codec",
    "CodecConfig",
    "UnknownDictionary",
    "default_prefix",
]

PLAIN = 0x00
ZSTD = 0x01
ZSTD_DICT = 0x02
DELTA = 0x03

_DICT_ID = struct.Struct(">I")
# encode_many compresses fewer values than this one at a time, keeping the GIL
# (heldzstd): a multi_compress_to_buffer call costs about 17 µs before its first value
# (20 µs for one 400-byte value, against 3.3 µs held; the two are even at about 16 values,
# of 400 bytes or of 4 KB), and the group commit's batches are that small whenever the
# store is not busy
HELD_BELOW = 16


class UnknownDictionary(Exception):
    """A frame names a dictionary this process has not loaded (another process trained it)."""

    def __init__(self, dict_id: int) -> None:
        super().__init__(f"unknown compression dictionary {dict_id}")
        self.dict_id = dict_id


def default_prefix(key: bytes) -> bytes:
    """The dictionary prefix of a key: its first two path segments.

    >>> default_prefix(b"/registry/pods/default/web-0")
    b'/registry/pods/'
    >>> default_prefix(b"/registry/example.com/widgets/ns/w")
    b'/registry/example.com/'
    """
    first = key.find(b"/", 1)
    if first < 0:
        return b""
    second = key.find(b"/", first + 1)
    return key[: second + 1] if second >= 0 else key[: first + 1]


@dataclass(frozen=True)
class CodecConfig:
    level: int = 1
    dict_size: int = 64 * 1024
    min_compress: int = 64          # values shorter than this are stored plain
    train_after: int = 1000         # samples of a prefix before its first dictionary
    retrain_after: int = 10_000     # values of a prefix seen before one retraining
    max_samples: int = 2000         # reservoir size per prefix
    min_sample: int = 128           # values shorter than this teach little


class _Samples:
    __slots__ = ("seen", "values", "trained_at")

    def __init__(self) -> None:
        self.seen = 0
        self.values: list[bytes] = []
        self.trained_at = 0  # ``seen`` when the last dictionary was trained (0: never)


class Codec:
    """Encodes values into frames and back. Pure computation: persistence of
    dictionaries is the backend's (``add_dictionary`` / ``training_due``)."""

    def __init__(self, config: CodecConfig | None = None,
                 prefix_of: Callable[[bytes], bytes] = default_prefix) -> None:
        self.config = config or CodecConfig()
        self.prefix_of = prefix_of
        self._dicts: dict[int, zstd.ZstdCompressionDict] = {}   # for decompression
        self._cdicts: dict[int, zstd.ZstdCompressionDict] = {}  # for compression (precomputed)
        self._dict_bytes: dict[int, bytes] = {}
        self._held_cctx: dict[int, heldzstd.Compress] = {}    # for small batches (``encode_many``)
        self._active: dict[bytes, int] = {}        # prefix -> dictionary id used for new values
        self._samples: dict[bytes, _Samples] = {}
        self._local = threading.local()
        self._lock = threading.Lock()               # guards _samples, _active, _dicts
        self._rng = random.Random(0)

    # -- dictionaries -------------------------------------------------------
    def add_dictionary(self, dict_id: int, prefix: bytes, data: bytes, activate: bool = True) -> None:
        """Make a stored dictionary known; with ``activate`` new values of ``prefix`` use it
        (when several are activated, the highest id wins, so every process agrees)."""
        d = zstd.ZstdCompressionDict(data, dict_type=zstd.DICT_TYPE_FULLDICT)
        cd = zstd.ZstdCompressionDict(data, dict_type=zstd.DICT_TYPE_FULLDICT)
        cd.precompute_compress(level=self.config.level)
        with self._lock:
            self._dicts[dict_id] = d
            self._cdicts[dict_id] = cd
            self._dict_bytes[dict_id] = data
            if activate and dict_id >= self._active.get(prefix, -1):
                self._active[prefix] = dict_id

    def has_dictionary(self, dict_id: int) -> bool:
        return dict_id in self._dicts

    def active_dictionary(self, prefix: bytes) -> int | None:
        return self._active.get(prefix)

    def observe(self, key: bytes, value: bytes) -> None:
        """Offer a written value as a training sample (reservoir sampling per prefix)."""
        if len(value) < self.config.min_sample:
            return
        prefix = self.prefix_of(key)
        s = self._samples.get(prefix)
        if s is None:
            with self._lock:
                s = self._samples.setdefault(prefix, _Samples())
        s.seen += 1
        if len(s.values) < self.config.max_samples:
            s.values.append(value)
        else:
            i = self._rng.randrange(s.seen)
            if i < self.config.max_samples:
                s.values[i] = value

    def wants_samples(self, key: bytes) -> bool:
        """Whether values of ``key``'s prefix still teach anything (no dictionary yet,
        or the one retraining still to come): if not, callers need not decode them."""
        s = self._samples.get(self.prefix_of(key))
        return s is None or s.trained_at < self.config.retrain_after

    def training_due(self) -> list[bytes]:
        """Prefixes that should get a (new) dictionary now."""
        due = []
        cfg = self.config
        for prefix, s in list(self._samples.items()):
            if s.trained_at == 0 and prefix in self._active:
                s.trained_at = s.seen  # another process already trained this prefix
            if (s.trained_at == 0 and s.seen >= cfg.train_after) or 0 < s.trained_at < cfg.retrain_after <= s.seen:
                due.append(prefix)
        return due

    def train(self, prefix: bytes) -> bytes | None:
        """Train a dictionary on the samples of ``prefix`` (CPU-heavy: call it in a thread).
        Returns the dictionary's bytes, or None when the samples teach nothing."""
        s = self._samples.get(prefix)
        if s is None:
            return None
        samples: list[bytes | bytearray | memoryview] = list(s.values)
        s.trained_at = max(s.seen, 1)
        if len(samples) < 8:
            return None
        try:
            # fastCover with fixed parameters: a tenth of the time of zstd's parameter search
            # (0.1 s instead of 1 s for 1,000 pods) for a dictionary as good on pods
            d = zstd.train_dictionary(self.config.dict_size, samples, level=self.config.level,
                                      k=2048, d=8, f=20, accel=2)
        except zstd.ZstdError:
            return None
        return d.as_bytes()

    # -- frames -------------------------------------------------------------
    def _cctx(self, dict_id: int | None) -> zstd.ZstdCompressor:
        cache = self._local.__dict__.setdefault("c", {})
        c = cache.get(dict_id)
        if c is None:
            if dict_id is None:
                c = zstd.ZstdCompressor(level=self.config.level, write_checksum=False)
            else:
                c = zstd.ZstdCompressor(level=self.config.level, dict_data=self._cdicts[dict_id],
                                        write_checksum=False, write_dict_id=False)
            cache[dict_id] = c
        return cast(zstd.ZstdCompressor, c)

    def _held(self, dict_id: int) -> heldzstd.Compress:
        """A compressor with dictionary ``dict_id`` that keeps the GIL (``heldzstd``: one per
        dictionary serves every thread), for batches too small for ``multi_compress_to_buffer``."""
        held = self._held_cctx.get(dict_id)
        if held is None:
            held = self._held_cctx[dict_id] = heldzstd.compressor(self._dict_bytes[dict_id], self.config.level)
        return held

    def _dctx(self, dict_id: int | None) -> zstd.ZstdDecompressor:
        cache = self._local.__dict__.setdefault("d", {})
        d = cache.get(dict_id)
        if d is None:
            if dict_id is not None and dict_id not in self._dicts:
                raise UnknownDictionary(dict_id)
            d = zstd.ZstdDecompressor(dict_data=self._dicts[dict_id]) if dict_id is not None \
                else zstd.ZstdDecompressor()
            cache[dict_id] = d
        return cast(zstd.ZstdDecompressor, d)

    def encode(self, key: bytes, value: bytes) -> bytes:
        """The frame to store for ``value`` under ``key``."""
        if len(value) < self.config.min_compress:
            return b"\x00" + value
        dict_id = self._active.get(self.prefix_of(key))
        if dict_id is None:
            frame = b"\x01" + self._cctx(None).compress(value)
        else:
            frame = b"\x02" + _DICT_ID.pack(dict_id) + self._cctx(dict_id).compress(value)
        if len(frame) >= len(value) + 1:
            return b"\x00" + value
        return frame

    def encode_many(self, dict_id: int, values: list[bytes]) -> list[bytes]:
        """ZSTD_DICT frames for ``values`` with dictionary ``dict_id``: from ``HELD_BELOW`` values
        on, in one C call that releases the GIL once (per-value calls that release it would
        each queue for it again); fewer, a value at a time with the GIL kept."""
        head = b"\x02" + _DICT_ID.pack(dict_id)
        if len(values) < HELD_BELOW:
            held = self._held(dict_id)
            return [head + held.compress(value) for value in values]
        out = self._cctx(dict_id).multi_compress_to_buffer(list[bytes | bytearray | memoryview](values), threads=0)
        return [head + out[i].tobytes() for i in range(len(values))]

    def decode(self, frame: bytes | memoryview) -> bytes:
        """The value a frame holds. Raises ``UnknownDictionary`` for a dictionary not
        loaded yet, and ``ValueError`` for a DELTA frame (use ``decode_delta``)."""
        kind = frame[0]
        if kind == PLAIN:
            return bytes(frame[1:])
        if kind == ZSTD_DICT:
            (dict_id,) = _DICT_ID.unpack_from(frame, 1)
            return self._dctx(dict_id).decompress(frame[5:])
        if kind == ZSTD:
            return self._dctx(None).decompress(frame[1:])
        if kind == DELTA:
            raise ValueError("a DELTA frame needs its reference value: use decode_delta")
        raise ValueError(f"unknown frame kind 0x{kind:02x}")

    def decode_many(self, dict_id: int, frames: list[bytes]) -> list[bytes]:
        """The values of ZSTD_DICT frames that all use ``dict_id``, in one zstd call."""
        if dict_id not in self._dicts:
            raise UnknownDictionary(dict_id)
        bodies: list[bytes | bytearray | memoryview] = [memoryview(f)[5:] for f in frames]
        out = self._dctx(dict_id).multi_decompress_to_buffer(bodies, threads=0)
        return [out[i].tobytes() for i in range(len(frames))]

    @staticmethod
    def frame_dict_id(frame: bytes | memoryview) -> int | None:
        return _DICT_ID.unpack_from(frame, 1)[0] if frame[0] == ZSTD_DICT else None

    # -- history deltas -----------------------------------------------------
    def encode_delta(self, value: bytes, reference: bytes) -> bytes | None:
        """A DELTA frame for ``value`` given ``reference`` (the key's next version),
        or None when a delta would not be smaller than ``full`` encoding would be.

        A status update changes a few dozen bytes of a 4 KB pod: compressed against
        the newer version, the older one costs tens of bytes instead of hundreds.
        """
        if len(value) < self.config.min_compress or len(reference) < 16:
            return None
        rd = zstd.ZstdCompressionDict(reference, dict_type=zstd.DICT_TYPE_RAWCONTENT)
        c = zstd.ZstdCompressor(level=self.config.level, dict_data=rd, write_checksum=False, write_dict_id=False)
        return b"\x03" + c.compress(value)

    @staticmethod
    def decode_delta(frame: bytes | memoryview, reference: bytes) -> bytes:
        rd = zstd.ZstdCompressionDict(reference, dict_type=zstd.DICT_TYPE_RAWCONTENT)
        return zstd.ZstdDecompressor(dict_data=rd).decompress(frame[1:])
