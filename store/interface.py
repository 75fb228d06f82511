"""The store's contract: an etcd-shaped, asynchronous, multi-version key-value store.

Every implementation (``store.lmdb``, ``store.etcd``) obeys these rules, and
``tests/store/test_contract.py`` checks them against each:

Revisions
    The store has one revision counter. A new store is at revision 1; every
    successful mutation (create, update, delete) takes the next revision, and
    the store's revision is then that number. Revisions only grow, survive
    restarts and are never reused. A read "at revision R" sees the state right
    after the mutation that took R. ``revision=0`` means "the current revision".

Keys and values
    Keys are non-empty ``bytes``, at most ``MAX_KEY_BYTES``; values are
    ``bytes`` of at most ``MAX_VALUE_BYTES`` (etcd's default request limit),
    empty values included. Values round-trip byte for byte; compression is the
    store's business (``store.codec``) and invisible here.

Per-key fields (``KeyValue``)
    ``create_revision``: the revision of the create that began this key's
    current life; ``mod_revision``: the revision of its last mutation;
    ``version``: 1 at create, +1 per update. A delete ends the life; a later
    create starts a new one at version 1.

Durability
    A mutation returns only once it is durable: fsync'd to disk (LMDB) or
    acknowledged by a quorum (etcd). Concurrent mutations may share one
    commit (group commit); each caller still waits for its own.

Compaction
    ``compact(R)`` forgets every version superseded at or before R. Afterwards
    a read at a revision below R, or a watch starting below R, raises
    ``Compacted``; reads at R or later are unaffected.

Watch
    ``watch(start, end, start_revision)`` yields, in revision order and with no
    gap and no duplicate, every event on keys in ``[start, end)`` with a
    revision ``>= start_revision`` (``0``: from the next revision on),
    replaying retained history first and then following live mutations,
    including those made by other processes or API servers sharing the store.
    Events are delivered in sequences (one may hold several revisions): lists, or
    runs of updates as arrays (``EventRun``: the LMDB store's for a watch of every
    key; an ``Event`` each when iterated).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload, runtime_checkable

from .errors import StoreError

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "Event",
    "EventRun",
    "EventType",
    "KeyValue",
    "Store",
    "prefix_end",
    "update_many",
]

# etcd's default --max-request-bytes is 1.5 MiB; kube-apiserver relies on it.
MAX_VALUE_BYTES = 1536 * 1024
# LMDB's compile-time key limit is 511 bytes; Kubernetes keys stay far below.
MAX_KEY_BYTES = 511


# KeyValue and Event are not changed once made, by contract: frozen, each would cost
# 0.7 µs to make instead of 0.15 (its __init__ sets every field through
# object.__setattr__), and the store makes one of each for every write it publishes.
@dataclass(slots=True)
class KeyValue:
    """One version of one key (never changed once made)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(slots=True)
class Event:
    """A mutation, as a watcher sees it (never changed once made).

    For PUT, ``kv`` is the key's new version (``kv.version == 1`` for a create).
    For DELETE, ``kv`` carries the key, ``mod_revision`` is the delete's
    revision and the other fields are zero, as in etcd. ``prev_kv`` is the
    version the event replaced, when the watch asked for it and it is retained.
    """

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None
    # time.perf_counter() when this process's store made the revision durable,
    # for latency from commit (the watch cache's delivery metric); 0.0 when not
    # known here (another process's write, the etcd backend)
    committed: float = 0.0

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


class EventRun(Sequence[Event]):
    """PUT events of consecutive revisions, as arrays: a run of updates committed together
    (``update_many``), as a backend may deliver it to a watch of every key. A sequence of
    ``Event``s like any list of them, each made when asked for (and not kept); a reader
    that knows the type reads the arrays and makes none.

    ``keys[i]`` was put at revision ``first + i`` with ``values[i]``; ``entries[i]`` is
    ``(mod_revision, create_revision, version)`` of that version; no ``prev_kv``; every
    event's ``committed`` is ``committed``.
    """

    __slots__ = ("committed", "entries", "first", "keys", "values")

    def __init__(self, first: int, keys: list[bytes], values: list[bytes], entries: list[tuple[int, int, int]],
                 committed: float = 0.0) -> None:
        self.first = first
        self.keys = keys
        self.values = values
        self.entries = entries
        self.committed = committed

    @property
    def last(self) -> int:
        """The revision of the last event."""
        return self.first + len(self.keys) - 1

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> EventRun: ...

    def __getitem__(self, i: int | slice) -> Event | EventRun:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self.keys))
            if step != 1:
                raise ValueError("an EventRun is sliced with step 1 only")
            stop = max(start, stop)
            return EventRun(self.first + start, self.keys[start:stop], self.values[start:stop],
                            self.entries[start:stop], self.committed)
        key, (mod, create, version) = self.keys[i], self.entries[i]
        return Event(EventType.PUT, KeyValue(key, self.values[i], create, mod, version), None, self.committed)

    def __iter__(self) -> Iterator[Event]:
        put, committed = EventType.PUT, self.committed
        for key, value, (mod, create, version) in zip(self.keys, self.values, self.entries, strict=True):
            yield Event(put, KeyValue(key, value, create, mod, version), None, committed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventRun(revisions {self.first}..{self.last})"


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key that starts with ``prefix``.

    >>> prefix_end(b"/registry/pods/")
    b'/registry/pods0'
    """
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\x00"  # every key: etcd's convention for "no upper bound"


@runtime_checkable
class Store(Protocol):
    """The interface every backend implements (see the module docstring for the rules)."""

    async def create(self, key: bytes, value: bytes) -> int:
        """Create ``key``; return the new revision. Raises ``KeyExists`` if it exists."""

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        """Replace ``key``'s value if its ``mod_revision`` is ``expected_revision``
        (``0``: unconditionally). Raises ``NotFound`` or ``Conflict``."""

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        """Delete ``key`` (if its ``mod_revision`` is ``expected_revision``, unless 0);
        return the delete's revision. Raises ``NotFound`` or ``Conflict``."""

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        """The version of ``key`` visible at ``revision``, or None.
        Raises ``Compacted`` below the compaction point, ``FutureRevision`` above the store's."""

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        """Keys in ``[start, end)`` at ``revision``, in key order, at most ``limit`` (0: all).

        Returns ``(kvs, revision, more)``: the revision read at (the current one
        when 0 was asked) and whether keys beyond ``limit`` remain. ``end=b""``
        reads ``start`` alone; ``end=b"\\x00"`` reads every key from ``start`` on.
        To page, call again with ``start = last.key + b"\\x00"`` and the returned revision.
        """

    async def count(self, start: bytes, end: bytes, revision: int = 0) -> tuple[int, int]:
        """How many keys ``range(start, end, revision)`` would return (etcd's ``count_only``
        range), without reading their values: ``(count, revision)``, the revision as
        ``range`` returns it. The same range conventions and revision errors as ``range``.
        After a page of ``range``, ``count(last.key + b"\\x00", end, revision)`` is how
        many keys the next pages hold."""

    def watch(self, start: bytes, end: bytes, start_revision: int = 0,
              prev_kv: bool = False) -> AsyncIterator[Sequence[Event]]:
        """Events on ``[start, end)`` from ``start_revision`` on (see the module docstring),
        each step a list of them or an ``EventRun``.
        Raises ``Compacted`` (on first iteration) when ``start_revision`` is compacted."""

    async def compact(self, revision: int) -> None:
        """Forget versions superseded at or before ``revision``.
        Raises ``Compacted`` if already compacted past it, ``FutureRevision`` if ahead."""

    async def revision(self) -> int:
        """The current revision (of the last durable mutation, by any process)."""

    async def compacted_revision(self) -> int:
        """The revision of the last compaction (0 if none)."""

    async def close(self) -> None:
        """Stop background work, end watches and release the files or connections."""


async def update_many(s: Store, items: Sequence[tuple[bytes, bytes, int]]) -> list[int | StoreError]:
    """Each ``(key, value, expected_revision)`` as ``s.update`` does it, all submitted at
    once: the revision each took, or the ``StoreError`` it raised, in order. Each is its
    own mutation with its own revision (not one transaction: one may fail alone); a
    backend that groups commits (LMDB) commits them together. Other errors propagate."""
    batch = getattr(s, "update_many", None)
    if batch is not None:
        return await batch(items)  # type: ignore[no-any-return]
    done = await asyncio.gather(*(s.update(k, v, e) for k, v, e in items), return_exceptions=True)
    for r in done:
        if isinstance(r, BaseException) and not isinstance(r, StoreError):
            raise r
    return done  # type: ignore[return-value]

