"""The feed of a server's watch caches (watchcache/feed.py): its restart after its watch failed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import store
from controlplane.watchcache import WatchCaches


class FailingOnce:
    """A store whose first watch fails as one compacted past its start does."""

    def __init__(self, st: store.Store) -> None:
        self._store = st
        self.watches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def watch(self, start: bytes, end: bytes, start_revision: int) -> AsyncIterator[Sequence[store.Event]]:
        self.watches += 1
        if self.watches == 1:
            raise store.Compacted(start_revision, start_revision + 1)
        async for events in self._store.watch(start, end, start_revision):
            yield events


async def test_a_restart_is_told_to_on_restart_and_the_feed_goes_on(tmp_path: Path) -> None:
    st = store.open(f"lmdb://{tmp_path}/store")
    failing = FailingOnce(st)
    caches = WatchCaches(failing)  # type: ignore[arg-type]
    restarts: list[int] = []
    caches.on_restart.append(lambda: restarts.append(caches.revision))
    observed: list[bytes] = []
    caches.observers.append(lambda events: observed.extend(ev.kv.key for ev in events))
    try:
        revision = await st.create(b"/registry/configmaps/a/before", b"{}")
        await caches.start()
        async with asyncio.timeout(5):
            while not restarts:
                await asyncio.sleep(0.01)
        assert restarts == [revision]  # (the store's revision, read again)
        await st.create(b"/registry/configmaps/a/after", b"{}")
        async with asyncio.timeout(5):
            while not observed:
                await asyncio.sleep(0.01)
        assert observed == [b"/registry/configmaps/a/after"] and failing.watches == 2
    finally:
        await caches.stop()
        await st.close()
