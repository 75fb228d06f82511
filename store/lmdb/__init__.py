"""The embedded backend: MVCC on LMDB (``lmdb://PATH``). See ``engine`` and ``layout``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import LmdbStore

__all__ = ["LmdbStore"]


def __getattr__(name: str) -> Any:
    # imported on first use: the applier process (``python -m store.lmdb.applier``) imports
    # this package and has no use for the engine (nor the asyncio it imports)
    if name != "LmdbStore":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .engine import LmdbStore

    globals()[name] = LmdbStore
    return LmdbStore
