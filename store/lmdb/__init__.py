"""The embedded backend: MVCC on LMDB (``lmdb://PATH``). See ``engine`` and ``layout``."""

from .engine import LmdbStore

__all__ = ["LmdbStore"]
