"""``dryRun=All``: a write request runs every step (decoding, defaulting, validation,
preconditions, conflicts) and answers as it would, but nothing is stored.

The handlers do not know about it: while a dry-run request is handled,
``KubeApi.store`` is a ``DryRunStore`` over the real one (``DRY_RUN`` is set
for the request's context). Its writes check what the real write would check
(the key exists or not, the expected revision) and raise the same errors, then
return without writing. Reads go to the real store.
"""

from __future__ import annotations

from contextvars import ContextVar

from store import Conflict, KeyExists, NotFound, Store
from store.interface import KeyValue

from .errors import ApiError
from .storeview import StoreView

__all__ = ["DRY_RUN", "DryRunStore"]

DRY_RUN: ContextVar[bool] = ContextVar("controlplane_dry_run", default=False)


class DryRunStore(StoreView):
    """A ``Store`` whose writes are checked but not made."""

    def __init__(self, real: Store) -> None:
        super().__init__(real)

    async def create(self, key: bytes, value: bytes) -> int:
        """0: nothing was written, so the object has no version (upstream's
        ``DryRunnableStorage.Create`` answers the object as prepared, with no
        resourceVersion; ``KubeApi._written`` serves it so)."""
        if await self._real.get(key) is not None:
            raise KeyExists(key)
        return 0

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        current = await self._real.get(key)
        if current is None:
            raise NotFound(key)
        if expected_revision and current.mod_revision != expected_revision:
            raise Conflict(key, expected_revision, current.mod_revision)
        return current.mod_revision

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        current = await self._real.get(key)
        if current is None:
            raise NotFound(key)
        if expected_revision and current.mod_revision != expected_revision:
            raise Conflict(key, expected_revision, current.mod_revision)
        return current.mod_revision

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        return await self._real.get(key, revision)

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        return await self._real.range(start, end, revision, limit)

    async def compact(self, revision: int) -> None:
        raise ApiError.bad_request("compaction is not a dry-run operation")
