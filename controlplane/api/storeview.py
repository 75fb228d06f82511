"""``StoreView``: a ``Store`` that a request sees over the real one (a dry run's, a converted
type's, a CRD converting by webhook: ``KubeApi.store``). A view changes what is written or read;
what it does not change goes to the real store as it is: watches (whose readers convert what
they serve), compaction and revisions. Closing a view leaves the real store open: the view
lives for one request, the store for the server. Counts go to the real store too: no view
changes which keys exist."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from store import Store
from store.interface import Event

__all__ = ["StoreView"]


class StoreView:
    def __init__(self, real: Store) -> None:
        self._real = real

    async def count(self, start: bytes, end: bytes, revision: int = 0) -> tuple[int, int]:
        return await self._real.count(start, end, revision)

    def watch(self, start: bytes, end: bytes, start_revision: int = 0,
              prev_kv: bool = False) -> AsyncIterator[Sequence[Event]]:
        return self._real.watch(start, end, start_revision, prev_kv)

    async def compact(self, revision: int) -> None:
        await self._real.compact(revision)

    async def revision(self) -> int:
        return await self._real.revision()

    async def compacted_revision(self) -> int:
        return await self._real.compacted_revision()

    async def close(self) -> None:
        return None
