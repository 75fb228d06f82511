"""client-go's work queue, for controllers: keys, not events; and the loop that runs them.

A key added while it waits is queued once; a key is never handed to two
workers at once; a key added while a worker holds it is handed out again
once that worker is ``done`` with it. A controller's sync reads the current
state for the key, so merged additions lose nothing. A key added for later
(``add_after``) waits once, for the soonest time it was asked for, as client-go's
delaying queue: a sync that asks again each time it runs piles up no timers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = ["CONFLICT_RETRY_SECONDS", "RETRY_FIRST", "RETRY_MAX", "NotDone", "WorkQueue", "run_controller"]

log = logging.getLogger(__name__)


class NotDone(Exception):
    """A handler's answer that its key is not done for an expected reason (the message says
    which): handled again after a growing delay, as any failure, but logged without a
    traceback, as client-go's controllers log a sync's error."""


class WorkQueue:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}  # key -> its failed handlings in a row (only failing keys)
        self._waiting: dict[str, asyncio.TimerHandle] = {}  # key -> the timer that adds it (add_after)

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed, unless it already waits to be
        added sooner (client-go's ``AddAfter``): one timer a key, the soonest."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        waiting = self._waiting.get(key)
        if waiting is not None:
            if waiting.when() <= loop.time() + delay:
                return
            waiting.cancel()
        self._waiting[key] = loop.call_later(delay, self._due, key)

    def _due(self, key: str) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def add_after_failure(self, key: str) -> float:
        """Add ``key`` again after a delay that doubles with each failure in a row, as
        client-go's rate-limited requeue (``AddRateLimited``): from ``RETRY_FIRST`` to
        ``RETRY_MAX`` seconds. Returns the delay."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay: float = min(RETRY_FIRST * 2 ** n, RETRY_MAX)
        asyncio.get_running_loop().call_later(delay, self.add, key)
        return delay

    def forget(self, key: str) -> None:
        """``key`` was handled: its next failure starts from the shortest delay again."""
        if self._failures:
            self._failures.pop(key, None)

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
RETRY_FIRST = 0.1  # a failed key's first retry (client-go's default limiter starts at 5 ms, per item)
RETRY_MAX = 60.0   # and its longest wait (client-go's: 1,000 s)


async def run_controller(name: str, informers: Sequence[Any], queue: WorkQueue,
                         handle: Callable[[str], Awaitable[None]], workers: int,
                         on_synced: Callable[[], None] | None = None) -> None:
    """A controller's life: run its informers, wait until each has listed, then let
    ``workers`` tasks take keys from ``queue`` and ``handle`` them, until cancelled.

    A conflict (409) means a newer object is on its way to the informers: the key
    is handled again a little later, not at once (an in-process 409 never yields to
    the loop, so an immediate retry would spin on the same stale version with the
    informers starved). A 404 is an object gone meanwhile. Any other error (a 500,
    a client timeout under load) is logged and the key handled again after a delay
    that doubles with each failure in a row (``WorkQueue.add_after_failure``), as
    client-go's controllers requeue: a controller whose object gets no further
    event (a node already marked unhealthy) must not wait for one."""
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
            queue.forget(key)
        except asyncio.CancelledError:
            raise
        except NotDone as e:
            log.info("%s: %s: %s; again in %.1f s", name, key, e, queue.add_after_failure(key))
        except ApiError as e:
            if e.code == 409:
                asyncio.get_running_loop().call_later(CONFLICT_RETRY_SECONDS, queue.add, key)
            elif e.code != 404:
                log.warning("%s: %s: %s; again in %.1f s", name, key, e, queue.add_after_failure(key))
        except Exception:
            log.exception("%s: %s; again in %.1f s", name, key, queue.add_after_failure(key))
        finally:
            queue.done(key)
