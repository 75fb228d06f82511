"""Random object UIDs (RFC 4122 version 4, as ``str(uuid.uuid4())``) and the random
suffixes of ``generateName``, drawn from a pool of random bytes.

A suffix is drawn from apimachinery's ``util/rand`` alphabet, as upstream's name
generator draws it: no vowels, no 0, 1 or 3, so it never spells a word. Tools that
find a pod's workload by its name (``<replicaset>-<5 of these>``) rely on it.

``uuid.uuid4()`` reads ``os.urandom(16)`` per call (a system call that also
releases the GIL, letting the store's threads in mid-request) and builds a
``UUID`` object only to format it: a few microseconds of every create. Here
one ``os.urandom`` call serves 256 UIDs; the bytes are as random (the same
source), only read in larger pieces.

    >>> len(new_uid()), new_uid()[14]
    (36, '4')
"""

from __future__ import annotations

import os
import threading

__all__ = ["SUFFIX_ALPHABET", "new_uid", "random_suffix"]

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UNBIASED = 256 - 256 % len(SUFFIX_ALPHABET)  # bytes at or above it are redrawn: every character equally likely

_POOL_SIZE = 4096  # bytes read from os.urandom at a time: 256 UIDs

_lock = threading.Lock()  # the bootstrap and the request handlers may run on different threads
_pool = b""
_taken = 0


def _random_bytes(n: int) -> bytes:
    """``n`` (at most ``_POOL_SIZE``) fresh random bytes: never handed out twice."""
    global _pool, _taken
    with _lock:
        if _taken + n > len(_pool):
            _pool, _taken = os.urandom(_POOL_SIZE), 0
        start = _taken
        _taken += n
        return _pool[start:_taken]


def _forget_pool() -> None:
    """In a forked child: the parent's unused bytes are the parent's (else both would
    hand out the same UIDs)."""
    global _pool, _taken, _lock
    _lock = threading.Lock()
    _pool, _taken = b"", 0


os.register_at_fork(after_in_child=_forget_pool)


def new_uid() -> str:
    """A random (version 4, RFC 4122 variant) UUID in its canonical form, exactly as
    ``str(uuid.uuid4())`` formats one."""
    h = _random_bytes(16).hex()
    # byte 6's high nibble is the version (4), byte 8's two top bits the RFC 4122 variant (10)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}  # a nibble with its top bits made 10


# a random byte's character: bytes at or above _UNBIASED have none (they are drawn again)
_CHAR_OF = bytes(ord(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)]) if b < _UNBIASED else 0 for b in range(256))


def random_suffix(length: int) -> str:
    """``length`` (at most 64) random characters of ``SUFFIX_ALPHABET``, each equally likely."""
    out = b""
    while len(out) < length:
        out += _random_bytes(length - len(out) + 1).translate(_CHAR_OF).replace(b"\0", b"")
    return out[:length].decode()
