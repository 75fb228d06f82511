"""client-go's work queue, for controllers: keys, not events; and the loop that runs them.

A key added while it waits is queued once; a key is never handed to two
workers at once; a key added while a worker holds it is handed out again
once that worker is ``done`` with it. A controller's sync reads the current
state for the key, so merged additions lose nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = ["CONFLICT_RETRY_SECONDS", "WorkQueue", "run_controller"]

log = logging.getLogger(__name__)


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


CONFLICT_RETRY_SECONDS = 0.05


async def run_controller(name: str, informers: Sequence[Any], queue: WorkQueue,
                         handle: Callable[[str], Awaitable[None]], workers: int,
                         on_synced: Callable[[], None] | None = None) -> None:
    """A controller's life: run its informers, wait until each has listed, then let
    ``workers`` tasks take keys from ``queue`` and ``handle`` them, until cancelled.

    A conflict (409) means a newer object is on its way to the informers: the key
    is handled again a little later, not at once (an in-process 409 never yields to
    the loop, so an immediate retry would spin on the same stale version with the
    informers starved). A 404 is an object gone meanwhile; any other error is
    logged, and the key waits for its next event."""
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        for i in informers:
            await i.synced.wait()
        if on_synced is not None:
            on_synced()
        await asyncio.gather(*(_work(name, queue, handle) for _ in range(workers)))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _work(name: str, queue: WorkQueue, handle: Callable[[str], Awaitable[None]]) -> None:
    from .client import ApiError

    while True:
        key = await queue.get()
        try:
            await handle(key)
        except asyncio.CancelledError:
            raise
        except ApiError as e:
            if e.code == 409:
                asyncio.get_running_loop().call_later(CONFLICT_RETRY_SECONDS, queue.add, key)
            elif e.code != 404:
                log.warning("%s: %s: %s", name, key, e)
        except Exception:
            log.exception("%s: %s", name, key)
        finally:
            queue.done(key)
