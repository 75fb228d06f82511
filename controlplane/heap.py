"""Free memory of the C heap handed back to the system, now and then.

glibc's malloc keeps what a process frees for its next allocations, and gives the top of its
heap back only past a trim threshold. A long-running server's heap fragments: freeing a large
block (a big LIST's response) raises glibc's dynamic mmap threshold to that block's size, and
from then on blocks below it that live long (uvloop's 256 KiB TLS read buffer of each
connection) come from the heap among short-lived ones. A soak (docs/operations.md, "Soak")
found the serving process's RSS growing a few MB a minute while Python's own memory and the
blocks in use held still: the heap's free part grew. ``malloc_trim(0)`` gives the free pages
of every arena back (``madvise``), keeping the blocks in use where they are. Pinning the
thresholds instead was measured and not adopted (every large block then a mapping of its own:
a 3.8 MB LIST took 70% longer).

The server calls ``release_free_heap`` after each compaction of the store (every 5 minutes by
default, ``--etcd-compaction-interval``), off the event loop: a trim walks the heap (about
9 ms for 62 MiB) and holds each arena's lock meanwhile; Python's small objects do not come
from those arenas (pymalloc), so the loop mostly runs on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

__all__ = ["release_free_heap"]

log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on a C library without it (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_heap() -> float | None:
    """Give the C heap's free pages back to the system (``malloc_trim(0)``; a CDLL call: the
    GIL is released meanwhile, so a thread may run it). Returns the seconds it took, or None
    where the C library has no ``malloc_trim``."""
    if _TRIM is None:
        return None
    started = time.perf_counter()
    _TRIM(0)
    took = time.perf_counter() - started
    log.debug("heap trimmed in %.1f ms", took * 1e3)
    return took
