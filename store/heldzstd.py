"""zstd calls that keep the GIL, for small values on the event loop.

python-zstandard releases the GIL around every call, which is right for a worker
thread and wrong for the event loop: a 3 µs decompression hands the GIL to any
other thread that wants it (then the store's writer; still the worker threads
that unpack list pages and train dictionaries), and the loop then waits for it
back until that thread blocks or its switch interval ends. py-spy measured that
wait: the watch cache's pack and unpack were a tenth of the API server's loop
time in ``bench dra --api`` (20,000 pods), about fifteen times their own cost.

Here libzstd (the system's ``libzstd.so.1``; Debian's dpkg depends on it) is
called through ``ctypes.PyDLL``, which does not release the GIL: the call is
over before anything else runs. The frames are the standard format, so what
one side writes the other reads. Where the library cannot be loaded the
python-zstandard objects stand in, with the same methods::

    d = zstandard.train_dictionary(65536, samples)
    c = compressor(d.as_bytes(), level=1)      # content size in the frame, no checksum, no dict id
    x = decompressor(d.as_bytes())
    assert x.decompress(c.compress(raw)) == raw

Each call holds the GIL from start to end, so one context per object is safe
from any thread; the output goes through a scratch buffer per thread (a thread
switch may come between the call and the copy out of it).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Protocol, cast

import zstandard as zstd

__all__ = ["Compress", "Decompress", "available", "compressor", "decompressor"]


class Compress(Protocol):
    def compress(self, data: bytes) -> bytes: ...


class Decompress(Protocol):
    def decompress(self, data: bytes) -> bytes: ...


_V = ctypes.c_void_p
_S = ctypes.c_size_t
# ZSTD_cParameter values (zstd.h, stable API)
_C_CONTENT_SIZE_FLAG = 200
_C_CHECKSUM_FLAG = 201
_C_DICT_ID_FLAG = 202
_CONTENTSIZE_ERROR = 2**64 - 2  # ZSTD_CONTENTSIZE_ERROR; UNKNOWN is 2**64 - 1
# An error is a negative code as a size_t (ZSTD_isError: above -ZSTD_error_maxCode,
# about 120): told apart here without another foreign call.
_FIRST_ERROR = 2**64 - 1024
_DST_SIZE_TOO_SMALL = 2**64 - 70  # -ZSTD_error_dstSize_tooSmall


# Linux's soname, which the dynamic loader finds as it does for any program linked to it. Only
# where it is not found (another system) is ``ctypes.util.find_library`` asked: its imports and
# the ``ldconfig -p`` it runs were a third of this module's import, which every process that
# opens a store pays, each store's applier process among them (``store.lmdb.applier``).
_SONAME = "libzstd.so.1"


def _open() -> ctypes.PyDLL | None:
    try:
        return ctypes.PyDLL(_SONAME)
    except OSError:
        pass
    from ctypes.util import find_library

    name = find_library("zstd")
    if name is None:
        return None
    try:
        return ctypes.PyDLL(name)
    except OSError:
        return None


def _load() -> ctypes.PyDLL | None:
    lib = _open()
    if lib is None:
        return None
    try:
        if lib.ZSTD_versionNumber() < 10400:  # the advanced parameters are stable since 1.4.0
            return None
        for fn, res, args in (
            ("ZSTD_createDDict", _V, [ctypes.c_char_p, _S]),
            ("ZSTD_createDCtx", _V, []),
            ("ZSTD_decompress_usingDDict", _S, [_V, _V, _S, ctypes.c_char_p, _S, _V]),
            ("ZSTD_getFrameContentSize", ctypes.c_ulonglong, [ctypes.c_char_p, _S]),
            ("ZSTD_createCDict", _V, [ctypes.c_char_p, _S, ctypes.c_int]),
            ("ZSTD_createCCtx", _V, []),
            ("ZSTD_CCtx_setParameter", _S, [_V, ctypes.c_int, ctypes.c_int]),
            ("ZSTD_CCtx_refCDict", _S, [_V, _V]),
            ("ZSTD_compress2", _S, [_V, _V, _S, ctypes.c_char_p, _S]),
            ("ZSTD_compressBound", _S, [_S]),
            ("ZSTD_isError", ctypes.c_uint, [_S]),
            ("ZSTD_getErrorName", ctypes.c_char_p, [_S]),
        ):
            f = getattr(lib, fn)
            f.restype, f.argtypes = res, args
        return lib
    except (OSError, AttributeError):
        return None


_lib = _load()
_local = threading.local()


def available() -> bool:
    """Whether calls keep the GIL (libzstd was loaded), or python-zstandard stands in."""
    return _lib is not None


def _scratch(size: int) -> ctypes.Array[ctypes.c_char]:
    buf: ctypes.Array[ctypes.c_char] | None = getattr(_local, "buf", None)
    if buf is None or len(buf) < size:
        buf = _local.buf = ctypes.create_string_buffer(max(size, 64 * 1024))
    return buf


def _check(lib: ctypes.PyDLL, code: int) -> int:
    if code >= _FIRST_ERROR and lib.ZSTD_isError(code):
        raise zstd.ZstdError(lib.ZSTD_getErrorName(code).decode())
    return code


def _bound(n: int) -> int:
    """ZSTD_COMPRESSBOUND (zstd.h), without a foreign call."""
    return n + (n >> 8) + (((128 << 10) - n) >> 11 if n < (128 << 10) else 0)


class _HeldDecompressor:
    __slots__ = ("_dctx", "_ddict", "_dict")

    def __init__(self, lib: ctypes.PyDLL, dictionary: bytes) -> None:
        self._dict = dictionary  # the DDict copies it, but keep it alive anyway
        self._ddict = lib.ZSTD_createDDict(dictionary, len(dictionary))
        self._dctx = lib.ZSTD_createDCtx()
        if not self._ddict or not self._dctx:
            raise MemoryError("libzstd could not create a decompression context")

    def decompress(self, data: bytes) -> bytes:
        lib = _lib
        assert lib is not None
        buf = _scratch(0)  # most values fit the scratch buffer as it is: no size asked first
        n = lib.ZSTD_decompress_usingDDict(self._dctx, buf, len(buf), data, len(data), self._ddict)
        if n == _DST_SIZE_TOO_SMALL:
            size = lib.ZSTD_getFrameContentSize(data, len(data))
            if size >= _CONTENTSIZE_ERROR:
                raise zstd.ZstdError("a frame without its content size, or not a zstd frame")
            buf = _scratch(size)
            n = lib.ZSTD_decompress_usingDDict(self._dctx, buf, size, data, len(data), self._ddict)
        return cast(bytes, buf[:_check(lib, n)])  # (a c_char array's slice is bytes)


class _HeldCompressor:
    __slots__ = ("_cctx", "_cdict", "_dict")

    def __init__(self, lib: ctypes.PyDLL, dictionary: bytes, level: int) -> None:
        self._dict = dictionary
        self._cdict = lib.ZSTD_createCDict(dictionary, len(dictionary), level)
        self._cctx = lib.ZSTD_createCCtx()
        if not self._cdict or not self._cctx:
            raise MemoryError("libzstd could not create a compression context")
        for param, value in ((_C_CONTENT_SIZE_FLAG, 1), (_C_CHECKSUM_FLAG, 0), (_C_DICT_ID_FLAG, 0)):
            _check(lib, lib.ZSTD_CCtx_setParameter(self._cctx, param, value))
        _check(lib, lib.ZSTD_CCtx_refCDict(self._cctx, self._cdict))

    def compress(self, data: bytes) -> bytes:
        lib = _lib
        assert lib is not None
        cap = _bound(len(data))
        buf = _scratch(cap)
        n = _check(lib, lib.ZSTD_compress2(self._cctx, buf, cap, data, len(data)))
        return cast(bytes, buf[:n])


# Contexts are never freed: one per trained dictionary, and dictionaries live as long
# as the process (a cache's slots are never reused).


def decompressor(dictionary: bytes) -> Decompress:
    """Decompresses frames written with ``dictionary`` (its full bytes, as
    ``ZstdCompressionDict.as_bytes()``), keeping the GIL where it can."""
    if _lib is not None:
        return _HeldDecompressor(_lib, dictionary)
    return zstd.ZstdDecompressor(dict_data=zstd.ZstdCompressionDict(dictionary))


def compressor(dictionary: bytes, level: int) -> Compress:
    """Compresses with ``dictionary`` at ``level``: frames with their content size, no
    checksum and no dictionary id, keeping the GIL where it can."""
    if _lib is not None:
        return _HeldCompressor(_lib, dictionary, level)
    return zstd.ZstdCompressor(level=level, dict_data=zstd.ZstdCompressionDict(dictionary), write_checksum=False,
                               write_content_size=True, write_dict_id=False)
