"""Watcher fan-out (``watchcache.watchers``): a batch offered to the watchers that see
every event at once, with what each would have had from one offer an event."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from controlplane.registry.attrs import Filter
from controlplane.watchcache.entry import CacheEvent, entry_of
from controlplane.watchcache.watchers import Watcher, WatcherIndex

pytestmark = pytest.mark.asyncio


def _event(kind: str, name: str, revision: int, labels: dict[str, str] | None = None,
           prev: CacheEvent | None = None) -> CacheEvent:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "ns", "labels": labels or {},
                                        "resourceVersion": str(revision)}}
    raw = orjson.dumps(obj)
    entry = entry_of("pods", f"/registry/pods/ns/{name}".encode(), revision, raw, obj)
    return CacheEvent(kind, entry, prev.obj if prev is not None else None, 0.0)


class _CountedWakeup(asyncio.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def _watcher(index: WatcherIndex, labels: str | None = None, start: int = 0, capacity: int = 100) -> Watcher:
    w = Watcher(Filter.parse("pods", labels, None, None), start, capacity)
    w.wakeup = _CountedWakeup()
    index.add(w)
    return w


def _seen(w: Watcher) -> list[tuple[str, int]]:
    return [(kind, ev.revision) for ev, kind in w.buffer]


async def test_a_batch_reaches_every_unfiltered_watcher_whole_with_one_wake_up() -> None:
    index = WatcherIndex("pods")
    informers = [_watcher(index) for _ in range(3)]
    late = _watcher(index, start=11)  # watching from revision 11: only the events after it
    a = _event("ADDED", "a", 10)
    batch = [a, _event("MODIFIED", "a", 11, prev=a), _event("ADDED", "b", 12)]
    index.dispatch_all(batch)
    for w in informers:
        assert _seen(w) == [("ADDED", 10), ("MODIFIED", 11), ("ADDED", 12)]
        assert isinstance(w.wakeup, _CountedWakeup) and w.wakeup.sets == 1
    assert _seen(late) == [("ADDED", 12)]


async def test_a_selector_watcher_sees_a_batch_as_its_selector_does() -> None:
    index = WatcherIndex("pods")
    web = _watcher(index, labels="app=web")
    a = _event("ADDED", "a", 10, {"app": "web"})
    moved = _event("MODIFIED", "a", 11, {"app": "db"}, prev=a)  # leaves the selector
    b = _event("ADDED", "b", 12, {"app": "db"})
    joined = _event("MODIFIED", "b", 13, {"app": "web"}, prev=b)  # enters it
    index.dispatch_all([a, moved, b, joined])
    assert _seen(web) == [("ADDED", 10), ("DELETED", 11), ("ADDED", 13)]


async def test_a_batch_that_overflows_a_buffer_closes_the_watcher_as_one_offer_an_event_did() -> None:
    index = WatcherIndex("pods")
    full = _watcher(index, capacity=3)
    room = _watcher(index, capacity=4)
    index.dispatch_all([_event("ADDED", f"p{i}", 10 + i) for i in range(4)])
    assert full.closed and "behind" in full.reason and not full.buffer
    assert not room.closed and len(room.buffer) == 4
    assert len(index) == 1  # the closed one left the index
