"""The store's exceptions.

Every error a store raises on purpose derives from ``StoreError``::

    StoreError
    ├── KeyExists          create of a key that exists               (HTTP 409 AlreadyExists)
    ├── NotFound           update or delete of a key that does not   (HTTP 404 NotFound)
    ├── Conflict           expected_revision is not the key's        (HTTP 409 Conflict)
    ├── Compacted          revision below the compaction point       (HTTP 410 Gone)
    ├── FutureRevision     revision above the store's                (HTTP 504 Timeout, as kube)
    ├── InvalidRequest     key or value outside the limits           (HTTP 400 / 413)
    │   └── ValueTooLarge  value above MAX_VALUE_BYTES               (HTTP 413)
    ├── StorageFull        the disk is full; nothing was written     (HTTP 500)
    ├── CorruptStore       the data path holds something that is not this store's
    └── Unavailable        the backend cannot be reached (etcd down, no quorum)   (HTTP 503)
        └── OutcomeUnknown a write sent but not answered: it may have been applied (HTTP 504 Timeout)
"""

from __future__ import annotations

__all__ = [
    "Compacted",
    "Conflict",
    "CorruptStore",
    "FutureRevision",
    "InvalidRequest",
    "KeyExists",
    "NotFound",
    "OutcomeUnknown",
    "StorageFull",
    "StoreError",
    "Unavailable",
    "ValueTooLarge",
]


class StoreError(Exception):
    """Base class of the store's errors."""


class KeyExists(StoreError):
    def __init__(self, key: bytes) -> None:
        super().__init__(f"key already exists: {key!r}")
        self.key = key


class NotFound(StoreError):
    def __init__(self, key: bytes) -> None:
        super().__init__(f"key not found: {key!r}")
        self.key = key


class Conflict(StoreError):
    """The key's ``mod_revision`` is not the expected one; ``actual`` holds it."""

    def __init__(self, key: bytes, expected: int, actual: int) -> None:
        super().__init__(f"revision conflict on {key!r}: expected {expected}, found {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class Compacted(StoreError):
    """The revision asked for is older than the compaction point ``compacted``."""

    def __init__(self, revision: int, compacted: int) -> None:
        super().__init__(f"revision {revision} has been compacted (compacted up to {compacted})")
        self.revision = revision
        self.compacted = compacted


class FutureRevision(StoreError):
    def __init__(self, revision: int, current: int) -> None:
        super().__init__(f"revision {revision} is ahead of the store (at {current})")
        self.revision = revision
        self.current = current


class InvalidRequest(StoreError):
    """A key or value the store refuses (empty or oversized key, oversized value)."""


class ValueTooLarge(InvalidRequest):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"value of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class StorageFull(StoreError):
    """The disk (or the store's quota) is full. The failed mutation wrote nothing."""


class CorruptStore(StoreError):
    """The data path holds a file that is not this store's, or a damaged one. It was not touched."""


class Unavailable(StoreError):
    """The backend did not answer (connection refused, timeout, no quorum)."""


class OutcomeUnknown(Unavailable):
    """A write reached the backend, which did not answer in time (the connection broke or timed
    out after the request went, or etcd said "request timed out"): it may have been applied, or
    may still be. The caller cannot tell until it reads the key again."""
