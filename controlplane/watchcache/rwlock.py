"""The cache's lock: many readers or one writer, writer-preferring, for asyncio
tasks, with the wait of every acquisition measured.

Like Go's ``sync.RWMutex`` (which upstream's watch cache uses): once the writer
waits, new readers queue behind it, so a stream of readers cannot starve it.
Acquiring an uncontended lock does not suspend the task, so in lazy mode, where
a reader holds the lock only for an O(1) snapshot, it costs a few attribute
updates. The copy mode holds the read lock across its O(N) copy (yielding to
the event loop as it goes), which is what makes the writer wait there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

__all__ = ["RWLock"]

Observe = Callable[[float], None]


class RWLock:
    def __init__(self, observe_reader: Observe | None = None, observe_writer: Observe | None = None) -> None:
        # Invariants: _writing implies _readers == 0; a queued waiter's future is not done.
        self._readers = 0
        self._writing = False
        self._waiting_writers: deque[asyncio.Future[None]] = deque()
        self._waiting_readers: deque[asyncio.Future[None]] = deque()
        self._observe_reader = observe_reader
        self._observe_writer = observe_writer

    @property
    def readers(self) -> int:
        return self._readers

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        await self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        await self.acquire_write()
        try:
            yield
        finally:
            self.release_write()

    async def acquire_read(self) -> float:
        """Returns the seconds waited."""
        start = time.perf_counter()
        if not self._writing and not self._waiting_writers:
            self._readers += 1
        else:
            fut = asyncio.get_running_loop().create_future()
            self._waiting_readers.append(fut)
            try:
                await fut  # granted by _wake, which counted us in _readers
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self.release_read()
                else:
                    self._waiting_readers.remove(fut)
                raise
        waited = time.perf_counter() - start
        if self._observe_reader is not None:
            self._observe_reader(waited)
        return waited

    def release_read(self) -> None:
        self._readers -= 1
        if self._readers == 0:
            self._wake()

    async def acquire_write(self) -> float:
        """Returns the seconds waited."""
        start = time.perf_counter()
        if not self._writing and self._readers == 0 and not self._waiting_writers:
            self._writing = True
        else:
            fut = asyncio.get_running_loop().create_future()
            self._waiting_writers.append(fut)
            try:
                await fut  # granted by _wake, which set _writing
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self.release_write()
                else:
                    self._waiting_writers.remove(fut)
                    self._wake()
                raise
        waited = time.perf_counter() - start
        if self._observe_writer is not None:
            self._observe_writer(waited)
        return waited

    def try_acquire_write(self) -> bool:
        """The write lock now if it is free and no writer waits for it (counted as a
        wait of 0), else False: for a writer that must not suspend."""
        if self._writing or self._readers or self._waiting_writers:
            return False
        self._writing = True
        if self._observe_writer is not None:
            self._observe_writer(0.0)
        return True

    def release_write(self) -> None:
        self._writing = False
        self._wake()

    def _wake(self) -> None:
        """Hand the free lock on: to the first waiting writer, else to every waiting reader."""
        if self._writing or self._readers:
            return
        if self._waiting_writers:
            self._writing = True
            self._waiting_writers.popleft().set_result(None)
            return
        while self._waiting_readers:
            self._readers += 1
            self._waiting_readers.popleft().set_result(None)
