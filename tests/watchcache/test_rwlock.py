"""The cache's lock: readers share it, the writer excludes them, a waiting writer
holds new readers back, cancellation leaves it consistent, waits are measured."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.watchcache.rwlock import RWLock

pytestmark = pytest.mark.asyncio


async def test_readers_share_and_a_waiting_writer_blocks_new_readers() -> None:
    writer_waits: list[float] = []
    lock = RWLock(observe_writer=writer_waits.append)
    order: list[str] = []
    await lock.acquire_read()
    await lock.acquire_read()  # shared, no wait
    writer = asyncio.create_task(lock.acquire_write())
    await asyncio.sleep(0)
    late_reader = asyncio.create_task(lock.acquire_read())
    await asyncio.sleep(0.01)
    assert not writer.done() and not late_reader.done()
    lock.release_read()
    lock.release_read()
    await writer
    order.append("writer")
    assert not late_reader.done()  # the writer holds it
    lock.release_write()
    await late_reader
    order.append("reader")
    lock.release_read()
    assert order == ["writer", "reader"]
    assert writer_waits and writer_waits[0] >= 0.009


async def test_a_cancelled_waiter_leaves_the_lock_usable() -> None:
    lock = RWLock()
    await lock.acquire_read()
    writer = asyncio.create_task(lock.acquire_write())
    await asyncio.sleep(0)
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    await asyncio.wait_for(lock.acquire_read(), 1)  # not held back by a writer that left
    lock.release_read()
    lock.release_read()
    await asyncio.wait_for(lock.acquire_write(), 1)
    lock.release_write()
