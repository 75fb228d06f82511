"""The property the cache exists for: in lazy mode the writer never waits for a
reader's walk (a snapshot is taken under the lock in O(1) and walked outside
it), while in copy mode it waits for the whole copy; and a snapshot never sees
a later write."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from controlplane.watchcache.cache import CacheConfig, ResourceCache, SnapshotMode
from controlplane.watchcache.entry import build_entry, entry_json
from store import Event, EventType, KeyValue

pytestmark = pytest.mark.asyncio

PREFIX = b"/registry/pods/"


def key(i: int) -> bytes:
    return PREFIX + b"ns/p%04d" % i


def value(i: int, phase: str) -> bytes:
    return orjson.dumps({"metadata": {"name": f"p{i:04d}", "namespace": "ns"}, "status": {"phase": phase}})


async def loaded(mode: SnapshotMode, n: int = 2000) -> ResourceCache:
    cache = ResourceCache(PREFIX, "pods", CacheConfig(mode=mode, walk_chunk=50), 100)
    await cache.load([(key(i), build_entry("pods", key(i), value(i, "Pending"), 50)) for i in range(n)])
    return cache


def update(i: int, revision: int) -> list[Event]:
    return [Event(EventType.PUT, KeyValue(key(i), value(i, "Running"), 50, revision, 2))]


async def test_lazy_the_writer_does_not_wait_for_a_walk_and_the_walk_sees_its_snapshot() -> None:
    cache = await loaded("lazy")
    snap = await cache.snapshot()
    phases = []

    async def walk() -> None:
        for n, (_, entry) in enumerate(snap.items(PREFIX, b"/registry/pods0"), 1):
            phases.append(orjson.loads(entry_json(entry))["status"]["phase"])
            if n % 50 == 0:
                await asyncio.sleep(0.001)

    walker = asyncio.create_task(walk())
    await asyncio.sleep(0.005)  # the walk is under way
    for r in range(101, 111):
        await cache.apply(update(1999 - (r - 101), r), r, time.perf_counter())
    assert not walker.done()  # ten writes went in while the walk was still running
    await walker
    assert phases == ["Pending"] * 2000  # none of them shows in the snapshot
    assert cache.revision == 110
    fresh = await cache.snapshot()
    assert orjson.loads(entry_json(fresh.get(key(1999))))["status"]["phase"] == "Running"  # type: ignore[arg-type]


async def test_copy_the_writer_waits_for_the_whole_copy() -> None:
    cache = await loaded("copy")
    copying = asyncio.create_task(cache.snapshot())
    await asyncio.sleep(0)  # the copy holds the read lock and yields every 50 entries
    assert cache.lock.readers == 1
    writer = asyncio.create_task(cache.apply(update(0, 101), 101, time.perf_counter()))
    for _ in range(5):  # a few turns of the loop: the copy needs 40
        await asyncio.sleep(0)
    assert not writer.done() and not copying.done()
    snap = await copying
    await writer
    assert snap.revision == 100
    assert orjson.loads(entry_json(snap.get(key(0))))["status"]["phase"] == "Pending"  # type: ignore[arg-type]
    assert cache.revision == 101
