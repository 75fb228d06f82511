"""client-go's work queue, for controllers: keys, not events.

A key added while it waits is queued once; a key is never handed to two
workers at once; a key added while a worker holds it is handed out again
once that worker is ``done`` with it. A controller's sync reads the current
state for the key, so merged additions lose nothing.
"""

from __future__ import annotations

import asyncio

__all__ = ["WorkQueue"]


class WorkQueue:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    async def get(self) -> str:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def empty(self) -> bool:
        return not self._dirty and not self._processing
