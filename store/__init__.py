"""An etcd-shaped MVCC store: the embedded LMDB engine, or a real etcd cluster.

    >>> s = store.open("lmdb://.controlplane/data")      # or "etcd://127.0.0.1:2379"
    >>> rev = await s.create(b"/registry/pods/default/web", b"{...}")

The contract is ``store.interface`` (read it first); the errors are
``store.errors``; values are compressed by ``store.codec`` on every backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import (
    Compacted,
    Conflict,
    CorruptStore,
    FutureRevision,
    InvalidRequest,
    KeyExists,
    NotFound,
    OutcomeUnknown,
    StorageFull,
    StoreError,
    Unavailable,
    ValueTooLarge,
)

if TYPE_CHECKING:
    from .interface import (
        MAX_KEY_BYTES,
        MAX_VALUE_BYTES,
        Event,
        EventRun,
        EventType,
        KeyValue,
        Store,
        prefix_end,
        update_many,
    )

# The contract's names are imported on first use: ``store.interface`` imports asyncio, and
# the LMDB engine's applier process (``python -m store.lmdb.applier``, started with every
# store) has no use for it: importing it cost each start about 80 ms of CPU.
_FROM_INTERFACE = frozenset({"MAX_KEY_BYTES", "MAX_VALUE_BYTES", "Event", "EventRun", "EventType", "KeyValue",
                             "Store", "prefix_end", "update_many"})


def __getattr__(name: str) -> Any:
    if name not in _FROM_INTERFACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".interface", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "Compacted",
    "Conflict",
    "CorruptStore",
    "Event",
    "EventRun",
    "EventType",
    "FutureRevision",
    "InvalidRequest",
    "KeyExists",
    "KeyValue",
    "NotFound",
    "OutcomeUnknown",
    "StorageFull",
    "Store",
    "StoreError",
    "Unavailable",
    "ValueTooLarge",
    "open",
    "prefix_end",
    "update_many",
]


def open(url: str, **options: object) -> Store:  # noqa: A001 - the name DESIGN.md fixes
    """Open a store by URL: ``lmdb://PATH`` (relative or absolute) or
    ``etcd://HOST:PORT[,HOST:PORT...]``. ``options`` go to the backend."""
    scheme, _, rest = url.partition("://")
    if scheme == "lmdb" and rest:
        from .lmdb import LmdbStore

        return LmdbStore(rest, **options)  # type: ignore[arg-type]
    if scheme == "etcd" and rest:
        from .etcd import EtcdStore

        endpoints = [e.strip() for e in urlsplit(url).netloc.split(",") if e.strip()]
        return EtcdStore(endpoints, **options)  # type: ignore[arg-type]
    raise ValueError(f"unsupported store URL {url!r}: use lmdb://PATH or etcd://HOST:PORT[,...]")
