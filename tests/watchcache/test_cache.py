"""The watch cache over a real LMDB store, in process: lists equal the store's
range at their revision under concurrent writes, pages come from one snapshot,
watches resume from the window or the store (410 once compacted), filtered
watchers see selector transitions, slow watchers are cut off alone, and
consistent reads fall back to the store when the cache cannot catch up."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

import store
from controlplane.api import reads as api_reads
from controlplane.api.errors import ApiError
from controlplane.api.reads import (
    ListOptions,
    StoreReads,
    WatchItem,
    WatchOptions,
    WatchStream,
    encode_continue,
    list_options,
)
from controlplane.metrics import WATCH_CACHE_FALLBACKS
from controlplane.registry import ResourceType
from controlplane.registry.attrs import Filter
from controlplane.registry.types import BUILTIN
from controlplane.watchcache import CacheConfig, CacheReads, WatchCaches
from controlplane.watchcache import entry as entry_module
from controlplane.watchcache import window as window_module
from controlplane.watchcache.reads import CacheWatch
from controlplane.watchcache.watchers import Watcher

pytestmark = pytest.mark.asyncio

PODS = next(t for t in BUILTIN if t.plural == "pods")


def watcher_of(stream: WatchStream) -> Watcher:
    assert isinstance(stream, CacheWatch)
    return stream._watcher


def pod(name: str, node: str = "", labels: dict[str, str] | None = None, ns: str = "ns", pad: int = 0) -> bytes:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                           "spec": {"nodeName": node}, "status": {"phase": "Pending"}}
    if labels:
        obj["metadata"]["labels"] = labels
    if pad:  # an annotation of ``pad`` bytes: a body the cache packs (packing.MIN_PACKED)
        obj["metadata"]["annotations"] = {"pad": "x" * pad}
    return orjson.dumps(obj)


def everything(rtype: ResourceType = PODS, ns: str | None = None, labels: str | None = None,
               fields: str | None = None) -> Filter:
    return Filter.parse(rtype.plural, labels, fields, ns)


class Env:
    def __init__(self, st: store.Store, caches: WatchCaches) -> None:
        self.store = st
        self.caches = caches
        self.reads = CacheReads(caches, StoreReads(lambda: st))

    async def put(self, name: str, **kw: Any) -> int:
        key = PODS.key(kw.get("ns", "ns"), name)
        try:
            return await self.store.create(key, pod(name, **kw))
        except store.KeyExists:
            return await self.store.update(key, pod(name, **kw), 0)


@pytest.fixture(params=["lazy", "copy"])
async def env(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    st = store.open(f"lmdb://{tmp_path}/store")
    caches = WatchCaches(st, CacheConfig(mode=request.param, walk_chunk=7, initial_chunk=7, load_chunk=7,
                                         window_events=50, watcher_buffer=64, fresh_timeout=1.0,
                                         pack_after=20))  # entries are compressed after the first 20
    await caches.start()
    try:
        yield Env(st, caches)
    finally:
        await caches.stop()
        await st.close()


def names(items: list[bytes]) -> list[str]:
    return [orjson.loads(i)["metadata"]["name"] for i in items]


async def collect(stream: Any, n: int, timeout: float = 5.0) -> list[WatchItem]:
    out: list[WatchItem] = []
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.extend(await stream.__anext__())
    return out


async def test_consistent_list_sees_every_acknowledged_write(env: Env) -> None:
    for i in range(30):
        await env.put(f"p{i:02d}")
        listed = await env.reads.list(PODS, "ns", ListOptions(everything()))
        assert len(listed.items) == i + 1  # read-your-writes with no resourceVersion
        assert listed.revision == await env.store.revision()
        got = await env.reads.get(PODS, "ns", f"p{i:02d}")
        assert got is not None and orjson.loads(got)["metadata"]["resourceVersion"] == str(listed.revision)


async def test_lists_at_a_revision_equal_the_store_range_under_concurrent_writes(env: Env) -> None:
    rnd = random.Random(4)
    for i in range(40):
        await env.put(f"p{i:02d}", node=f"n{i % 3}")
    stop = asyncio.Event()

    async def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            name = f"p{rnd.randrange(50):02d}"
            if rnd.random() < 0.2:
                with contextlib.suppress(store.NotFound):
                    await env.store.delete(PODS.key("ns", name))
            else:
                await env.put(name, node=f"n{n % 3}")

    task = asyncio.create_task(writer())
    try:
        checked = 0
        for _ in range(25):
            listed = await env.reads.list(PODS, None, ListOptions(everything()))
            kvs, _, _ = await env.store.range(PODS.prefix(), store.prefix_end(PODS.prefix()),
                                              revision=listed.revision)
            expected = [orjson.loads(kv.value)["metadata"]["name"] for kv in kvs]
            assert names(listed.items) == expected
            assert [orjson.loads(i)["metadata"]["resourceVersion"] for i in listed.items] == \
                [str(kv.mod_revision) for kv in kvs]
            # and exactly at a recent past revision (a retained snapshot in lazy mode, the store in copy mode)
            past = listed.revision - 2
            exact = await env.reads.list(PODS, None, ListOptions(everything(), resource_version=str(past),
                                                                 match="Exact"))
            kvs, _, _ = await env.store.range(PODS.prefix(), store.prefix_end(PODS.prefix()), revision=past)
            assert exact.revision == past
            assert names(exact.items) == [orjson.loads(kv.value)["metadata"]["name"] for kv in kvs]
            checked += 1
            await asyncio.sleep(0.005)
        assert checked == 25
    finally:
        stop.set()
        await task


async def test_pages_of_one_list_come_from_one_snapshot(env: Env) -> None:
    for i in range(45):
        await env.put(f"p{i:02d}")
    first = await env.reads.list(PODS, "ns", ListOptions(everything(), limit=10))
    assert first.next_start is not None
    seen = names(first.items)
    # writes between pages: deletes, updates and creates, none of which the pages may show
    await env.store.delete(PODS.key("ns", "p30"))
    await env.put("p05", labels={"changed": "yes"})
    await env.put("p99")
    nxt = first
    while nxt.next_start is not None:
        nxt = await env.reads.list(PODS, "ns", ListOptions(everything(), limit=10, start=nxt.next_start,
                                                           continue_revision=first.revision))
        assert nxt.revision == first.revision
        seen += names(nxt.items)
        # what remained after the previous page, at the list's revision (upstream's remainingItemCount)
        assert nxt.remaining == (None if nxt.next_start is None else 45 - len(seen))
    assert seen == [f"p{i:02d}" for i in range(45)]
    assert first.remaining == 35


async def test_a_list_with_a_selector_pages_by_matches(env: Env) -> None:
    for i in range(30):
        await env.put(f"p{i:02d}", node="a" if i % 3 == 0 else "b")
    page = await env.reads.list(PODS, None, ListOptions(everything(fields="spec.nodeName=a"), limit=4))
    assert names(page.items) == ["p00", "p03", "p06", "p09"]
    assert page.next_start is not None
    assert page.remaining is None  # not counted when a selector filters, as upstream


async def test_a_node_selected_list_reads_the_index_and_equals_the_store_under_concurrent_writes(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubelet's LIST (``spec.nodeName=n1``, the current state) reads its node's keys from
    the cache's index (``valueindex``), not every entry: under writes that bind, move and
    delete pods in two namespaces it equals the store's range at the list's revision, with
    a label selector too and in one namespace; a page limit leaves a continue key."""
    from controlplane.watchcache import reads as reads_module

    walked: list[int] = []
    walk = reads_module._walk

    async def counted(*args: Any, **kw: Any) -> Any:
        walked.append(1)
        return await walk(*args, **kw)

    monkeypatch.setattr(reads_module, "_walk", counted)
    rnd = random.Random(11)
    nodes = ["", "n1", "n2", "n3"]
    for i in range(40):
        await env.put(f"p{i:02d}", node=nodes[i % 4], ns=("ns", "other")[i % 2])
    stop = asyncio.Event()

    async def writer() -> None:
        while not stop.is_set():
            name, ns = f"p{rnd.randrange(50):02d}", rnd.choice(("ns", "other"))
            if rnd.random() < 0.2:
                with contextlib.suppress(store.NotFound):
                    await env.store.delete(PODS.key(ns, name))
            else:
                await env.put(name, node=rnd.choice(nodes), ns=ns,
                              labels={"tier": rnd.choice(("web", "db"))})

    task = asyncio.create_task(writer())
    try:
        for n in range(30):
            node, ns = f"n{1 + n % 3}", (None, "ns")[n % 2]
            labels = "tier=web" if n % 3 == 0 else None
            listed = await env.reads.list(PODS, ns, ListOptions(everything(fields=f"spec.nodeName={node}",
                                                                           labels=labels)))
            kvs, _, _ = await env.store.range(PODS.prefix(ns), store.prefix_end(PODS.prefix(ns)),
                                              revision=listed.revision)
            objs = [orjson.loads(kv.value) for kv in kvs]
            expected = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs
                        if o["spec"]["nodeName"] == node
                        and (labels is None or (o["metadata"].get("labels") or {}).get("tier") == "web")]
            assert [(orjson.loads(i)["metadata"]["namespace"], orjson.loads(i)["metadata"]["name"])
                    for i in listed.items] == expected
            await asyncio.sleep(0.003)
    finally:
        stop.set()
        await task
    assert not walked
    page = await env.reads.list(PODS, None, ListOptions(everything(fields="spec.nodeName=n1"), limit=2))
    assert len(page.items) == 2 and page.next_start is not None and not walked
    await env.reads.list(PODS, None, ListOptions(everything(fields="spec.nodeName=")))  # unbound: walked
    assert walked


async def test_watch_resumes_from_the_window_with_no_gap_or_duplicate(env: Env) -> None:
    start = await env.put("a")
    for i in range(5):
        await env.put(f"b{i}")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(start)))
    try:
        got = await collect(stream, 5)
        assert [(i.type, orjson.loads(i.raw)["metadata"]["name"]) for i in got] == \
            [("ADDED", f"b{i}") for i in range(5)]
        await env.put("a")
        await env.store.delete(PODS.key("ns", "b0"))
        got = await collect(stream, 2)
        assert [i.type for i in got] == ["MODIFIED", "DELETED"]
        deleted = orjson.loads(got[1].raw)
        assert deleted["metadata"]["name"] == "b0"
        assert deleted["metadata"]["resourceVersion"] == str(await env.store.revision())
    finally:
        await stream.aclose()


async def test_a_resumed_watch_delivers_its_backlog_before_live_events_and_bookmarks(env: Env) -> None:
    """A node's watch resumed from an old revision: its one backlog event lies past
    several walk chunks (7 here) of other nodes' pods. It must come before the live
    event that follows, and no bookmark may come first: a bookmark's revision would
    let a client that reconnects skip the backlog event (the kubelets of the
    ``million`` load test lost bound pods that way)."""
    await env.reads.list(PODS, None, ListOptions(everything()))  # the cache exists: its window has the events
    start = await env.put("seed")
    for i in range(20):
        await env.put(f"other{i}", node="elsewhere")
    backlog_rev = await env.put("mine", node="n1")
    await env.reads.list(PODS, None, ListOptions(everything()))  # the cache has caught up: all 21 are backlog
    options = WatchOptions(everything(fields="spec.nodeName=n1"), resource_version=str(start), bookmarks=True)
    stream = await env.reads.watch(PODS, None, options)
    assert isinstance(stream, CacheWatch)
    try:
        live_rev = await env.put("mine", node="n1")
        got = await collect(stream, 2)
        assert [(i.type, orjson.loads(i.raw)["metadata"]["resourceVersion"]) for i in got] == \
            [("ADDED", str(backlog_rev)), ("MODIFIED", str(live_rev))]
    finally:
        await stream.aclose()


@pytest.mark.parametrize("indexed", [False, True], ids=["walked", "indexed"])
async def test_a_resumed_node_watch_sees_its_pods_come_and_go_in_the_backlog(
        env: Env, indexed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubelet's resumed watch skips the backlog by its index hint (``Watcher.seen``,
    or the window's index by node for a long backlog): what it is handed is what
    the same watch would have seen live, a pod that arrives, moves away, comes back
    and is deleted included, and another node's pods and a second selector term are
    not taken for its own."""
    if indexed:
        monkeypatch.setattr(window_module, "INDEX_FROM", 0)
    await env.reads.list(PODS, None, ListOptions(everything()))  # the cache exists: its window has the events
    start = await env.put("seed")
    await env.put("p1", node="n7")
    await env.put("other", node="n8")
    await env.put("p1", node="n8")                      # leaves n7
    await env.put("p1", node="n7")                      # comes back
    await env.put("db", node="n7", labels={"app": "db"})
    await env.store.delete(PODS.key("ns", "p1"))
    await env.reads.list(PODS, None, ListOptions(everything()))  # the cache has caught up
    expected = {("spec.nodeName=n7", None): ["ADDED p1", "DELETED p1", "ADDED p1", "ADDED db", "DELETED p1"],
                ("spec.nodeName=n8", None): ["ADDED other", "ADDED p1", "DELETED p1"],
                ("spec.nodeName=n7", "app!=db"): ["ADDED p1", "DELETED p1", "ADDED p1", "DELETED p1"]}
    for (fields, labels), want in expected.items():
        stream = await env.reads.watch(PODS, None, WatchOptions(everything(fields=fields, labels=labels),
                                                                resource_version=str(start)))
        assert watcher_of(stream).hint == ("spec.nodeName", fields.rpartition("=")[2])
        try:
            got = await collect(stream, len(want))
            assert [f"{i.type} {orjson.loads(i.raw)['metadata']['name']}" for i in got] == want
        finally:
            await stream.aclose()
    caches_indexes = [c.window._indexes for c in env.caches._caches.values()]
    assert any(caches_indexes) == indexed


async def test_watch_older_than_the_window_uses_the_store_then_410_once_compacted(env: Env) -> None:
    first = await env.put("a")
    for i in range(80):  # more than the window's 50 events
        await env.put(f"b{i % 10}")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(first)))
    try:
        got = await collect(stream, 80)
        assert len(got) == 80 and got[0].type == "ADDED"
    finally:
        await stream.aclose()
    await env.store.compact(first + 40)
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(first)))
    try:
        got = await collect(stream, 1)
        assert got[0].type == "ERROR"
        assert orjson.loads(got[0].raw)["code"] == 410
    finally:
        await stream.aclose()


async def test_a_list_at_a_compacted_revision_is_410_in_upstreams_words(env: Env) -> None:
    first = await env.put("a")
    for i in range(80):  # past the window and the snapshots the cache keeps of it
        await env.put(f"b{i % 10}")
    await env.store.compact(first + 40)
    for options in (ListOptions(everything(), resource_version=str(first), match="Exact"),
                    ListOptions(everything(), limit=5, resource_version=str(first))):
        with pytest.raises(ApiError) as err:
            await env.reads.fallback.list(PODS, "ns", options)
        assert (err.value.code, err.value.reason) == (410, "Expired")
        assert err.value.message == "The resourceVersion for the provided list is too old."
        assert err.value.list_meta is None  # (no continue token offered: there was none)


async def test_initial_events_then_bookmark_then_live(env: Env) -> None:
    for i in range(20):
        await env.put(f"p{i:02d}")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version="0",
                                                            send_initial_events=True, bookmarks=True))
    try:
        got = await collect(stream, 21)
        assert [i.type for i in got] == ["ADDED"] * 20 + ["BOOKMARK"]
        end = orjson.loads(got[-1].raw)["metadata"]
        assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
        rev = await env.put("p00")
        live = await collect(stream, 1)
        assert live[0].type == "MODIFIED"
        assert orjson.loads(live[0].raw)["metadata"]["resourceVersion"] == str(rev)
    finally:
        await stream.aclose()


async def test_a_watch_with_bookmarks_arms_one_timer_a_bookmark_not_one_a_wake_up(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events keep an informer's watch waking; its bookmark timer is armed once and kept
    (a timeout made around every wait cost a timer each), and a bookmark still comes when
    the watch falls idle, at the cache's revision, once everything before it was sent."""
    # long enough that no put of the ten is slower on a loaded machine (at 0.3 s one was, and
    # the watch's first item was a bookmark), short enough to wait out once at the end
    monkeypatch.setattr(api_reads, "BOOKMARK_SECONDS", 2.0)
    rev = await env.put("seed")
    loop = asyncio.get_running_loop()
    timers: list[float] = []
    call_at = loop.call_at

    def counted(when: float, *args: Any, **kw: Any) -> asyncio.TimerHandle:
        timers.append(when - loop.time())  # (``collect``'s timeouts are 5 s, others' at once)
        return call_at(when, *args, **kw)

    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev), bookmarks=True))
    try:
        monkeypatch.setattr(loop, "call_at", counted)
        for i in range(10):
            # the watch waits first (an event applied at once would be there before it looked)
            waiting = asyncio.create_task(collect(stream, 1))
            await asyncio.sleep(0)
            last = await env.put(f"p{i}")
            assert [i.type for i in await waiting] == ["ADDED"]
        bookmark_timers = [delay for delay in timers if 1.0 < delay <= 2.0]
        assert len(bookmark_timers) == 1  # armed at the first wait, not once a wait
        got = await collect(stream, 1)
        assert [i.type for i in got] == ["BOOKMARK"]
        assert int(orjson.loads(got[0].raw)["metadata"]["resourceVersion"]) >= last
    finally:
        await stream.aclose()


async def test_a_watch_that_did_not_ask_gets_no_bookmark(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_reads, "BOOKMARK_SECONDS", 0.05)
    rev = await env.put("seed")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    try:
        await asyncio.sleep(0.3)
        after = await env.put("p")
        got = await collect(stream, 1)
        assert [(i.type, orjson.loads(i.raw)["metadata"]["resourceVersion"]) for i in got] == [("ADDED", str(after))]
    finally:
        await stream.aclose()


async def test_selector_transitions_are_added_and_deleted(env: Env) -> None:
    rev = await env.put("x", labels={"app": "web"})
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(labels="app=web"), resource_version=str(rev)))
    try:
        await env.put("x", labels={"app": "db"})      # leaves the selector
        await env.put("x", labels={"app": "web"})     # enters it again
        await env.put("x", labels={"app": "web"})     # changes inside it
        await env.put("y", labels={"app": "db"})      # never matches
        await env.store.delete(PODS.key("ns", "x"))
        got = await collect(stream, 4)
        assert [i.type for i in got] == ["DELETED", "ADDED", "MODIFIED", "DELETED"]
    finally:
        await stream.aclose()


async def test_initial_events_end_without_a_bookmark_unless_asked(env: Env) -> None:
    """As upstream's cacher (setInitialEventsEndBookmarkIfRequested): the
    ``k8s.io/initial-events-end`` bookmark only with allowWatchBookmarks."""
    for i in range(3):
        await env.put(f"p{i:02d}")
    for reads in (env.reads, env.reads.fallback):
        stream = await reads.watch(PODS, "ns", WatchOptions(everything(), resource_version="0",
                                                            send_initial_events=True))
        try:
            got = await collect(stream, 3)
            rev = await env.put("p00")
            got += await collect(stream, 1)
            assert [i.type for i in got] == ["ADDED"] * 3 + ["MODIFIED"]
            assert orjson.loads(got[-1].raw)["metadata"]["resourceVersion"] == str(rev)
        finally:
            await stream.aclose()


async def test_an_object_leaving_the_selector_is_deleted_as_it_was(env: Env) -> None:
    """As upstream's cacheWatcher: the DELETED of an object leaving the selector carries
    its previous version, at the event's resourceVersion (from the window, live, and
    from the store)."""
    rev = await env.put("x", labels={"app": "web"}, node="n1")
    live = await env.reads.watch(PODS, "ns", WatchOptions(everything(labels="app=web"), resource_version=str(rev)))
    try:
        left = await env.put("x", labels={"app": "db"}, node="n2")
        streams = [live, await env.reads.watch(PODS, "ns", WatchOptions(everything(labels="app=web"),
                                                                         resource_version=str(rev))),
                   await env.reads.fallback.watch(PODS, "ns", WatchOptions(everything(labels="app=web"),
                                                                            resource_version=str(rev)))]
        for stream in streams:
            got = await collect(stream, 1)
            assert got[0].type == "DELETED"
            obj = orjson.loads(got[0].raw)
            assert obj["metadata"]["labels"] == {"app": "web"} and obj["spec"]["nodeName"] == "n1"
            assert obj["metadata"]["resourceVersion"] == str(left)
    finally:
        for stream in streams:
            await stream.aclose()


async def test_a_watch_from_a_revision_not_reached_yet_waits_for_it(env: Env) -> None:
    """A watch from N the cache has not reached is not refused (upstream's cacher serves
    it): the events after N; a WatchList from N is an ERROR event (504), not an answer."""
    rev = await env.put("a")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev + 2)))
    try:
        for name in ("b", "c", "d", "e"):
            await env.put(name)
        got = await collect(stream, 2)
        assert [orjson.loads(i.raw)["metadata"]["name"] for i in got] == ["d", "e"]
    finally:
        await stream.aclose()
    far = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev + 1000),
                                                         send_initial_events=True, bookmarks=True))
    got = await collect(far, 1)
    status = orjson.loads(got[0].raw)
    assert got[0].type == "ERROR" and status["code"] == 504
    assert status["message"].startswith("Timeout: Too large resource version: ")
    assert status["details"]["retryAfterSeconds"] == 1
    with pytest.raises(StopAsyncIteration):
        await far.__anext__()


async def test_node_watchers_get_only_their_pods_and_are_indexed(env: Env) -> None:
    rev = await env.put("seed")
    streams = [await env.reads.watch(PODS, None, WatchOptions(everything(fields=f"spec.nodeName=n{i}"),
                                                              resource_version=str(rev)))
               for i in range(50)]
    cache = env.caches.cache_for(PODS)
    assert len(cache.watchers._unhinted) == 0 and len(cache.watchers) == 50
    try:
        await env.put("p1", node="n7")
        await env.put("p1", node="n8")   # moves: n7 sees it leave, n8 sees it arrive
        got7 = await collect(streams[7], 2)
        got8 = await collect(streams[8], 1)
        assert [i.type for i in got7] == ["ADDED", "DELETED"]
        assert [i.type for i in got8] == ["ADDED"]
        for i, s in enumerate(streams):
            if i not in (7, 8):
                assert not watcher_of(s).buffer
    finally:
        for s in streams:
            await s.aclose()
    assert len(cache.watchers) == 0


async def test_a_slow_watcher_is_closed_and_the_others_keep_up(env: Env) -> None:
    rev = await env.put("seed")
    slow = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    fast = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    received: list[WatchItem] = []

    async def consume() -> None:
        async for items in fast:
            received.extend(items)
            if len(received) >= 100:
                return

    consumer = asyncio.create_task(consume())
    for i in range(100):  # the buffer holds 64
        await env.put(f"p{i}")
    await asyncio.wait_for(consumer, 5)
    assert len(received) == 100
    assert watcher_of(slow).closed and "behind" in watcher_of(slow).reason
    with pytest.raises(StopAsyncIteration):
        await slow.__anext__()
    # it resumes from the last revision it had (none here), from the window, with nothing lost
    again = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev + 60)))
    try:
        got = await collect(again, 40)
        assert [orjson.loads(i.raw)["metadata"]["name"] for i in got] == [f"p{i}" for i in range(60, 100)]
    finally:
        await again.aclose()
        await fast.aclose()


async def test_live_events_are_written_through_in_order_while_the_stream_waits_and_can_write(env: Env) -> None:
    """With a synchronous writer (the server's own HTTP protocol), a stream parked on its
    watcher has live events written in the turn that offers them, not handed to its task; while
    the writer cannot write (a backed-up connection) they go through the task as before; either
    way every event once, in order."""
    rev = await env.put("seed")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    assert isinstance(stream, CacheWatch)
    writable = [True]
    written: list[tuple[str, str]] = []  # (how, name)
    offered_in: list[asyncio.Task[Any] | None] = []

    def write(items: list[WatchItem]) -> None:
        offered_in.append(asyncio.current_task())
        written.extend(("now", orjson.loads(i.raw)["metadata"]["name"]) for i in items)

    stream.write_through(lambda: writable[0], write)

    async def pump() -> None:
        async for items in stream:
            written.extend(("task", orjson.loads(i.raw)["metadata"]["name"]) for i in items)

    pumping = asyncio.create_task(pump())
    try:
        await asyncio.sleep(0.05)  # parked on its watcher
        for i in range(5):
            await env.put(f"a{i}")
        async with asyncio.timeout(5):
            while len(written) < 5:
                await asyncio.sleep(0.01)
        assert written == [("now", f"a{i}") for i in range(5)]
        assert pumping not in offered_in  # never the stream's own task
        writable[0] = False
        for i in range(3):
            await env.put(f"b{i}")
        async with asyncio.timeout(5):
            while len(written) < 8:
                await asyncio.sleep(0.01)
        writable[0] = True
        for i in range(2):
            await env.put(f"c{i}")
        async with asyncio.timeout(5):
            while len(written) < 10:
                await asyncio.sleep(0.01)
        assert written == [("now", f"a{i}") for i in range(5)] + [("task", f"b{i}") for i in range(3)] + \
            [("now", f"c{i}") for i in range(2)]
    finally:
        pumping.cancel()
        await asyncio.gather(pumping, return_exceptions=True)
        await stream.aclose()
    assert watcher_of(stream).sink is None


async def test_a_watch_whose_write_through_fails_ends_alone(env: Env) -> None:
    """A writer that raises in the fan-out's turn ends its own watch (the client resumes), not the
    fan-out: the other watchers get the event."""
    rev = await env.put("seed")
    broken = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    other = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    assert isinstance(broken, CacheWatch)

    def write(items: list[WatchItem]) -> None:
        raise OSError("connection reset")

    broken.write_through(lambda: True, write)
    parked = asyncio.create_task(broken.__anext__())
    try:
        await asyncio.sleep(0.05)
        await env.put("after")
        assert names([i.raw for i in await collect(other, 1)]) == ["after"]
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(parked, 5)
        assert "could not be written" in watcher_of(broken).reason
    finally:
        parked.cancel()
        await broken.aclose()
        await other.aclose()


async def test_consistent_read_falls_back_to_the_store_when_the_cache_lags(env: Env) -> None:
    await env.put("a")
    cache = env.caches.cache_for(PODS)
    await cache.wait_fresh(await env.store.revision())
    assert env.caches._feed is not None
    env.caches._feed.cancel()  # the cache hears nothing more
    await asyncio.sleep(0)
    await env.put("b")
    before = WATCH_CACHE_FALLBACKS.labels(resource="pods", reason="list")._value.get()
    listed = await env.reads.list(PODS, "ns", ListOptions(everything()))
    assert names(listed.items) == ["a", "b"]
    assert WATCH_CACHE_FALLBACKS.labels(resource="pods", reason="list")._value.get() == before + 1
    # resourceVersion=0 takes what the cache has, at once
    assert names((await env.reads.list(PODS, "ns", ListOptions(everything(), resource_version="0"))).items) == ["a"]
    # a revision the cache has not reached: 504 after the wait, as upstream
    with pytest.raises(ApiError) as err:
        await env.reads.list(PODS, "ns", ListOptions(everything(), resource_version=str(cache.revision + 1),
                                                     match="NotOlderThan"))
    assert err.value.code == 504


async def test_caches_are_made_on_demand_for_new_types(env: Env) -> None:
    widgets = ResourceType("example.com", "v1", "Widget", "widgets", True, storage_group="example.com")
    key = widgets.key("ns", "w1")
    await env.store.create(key, orjson.dumps({"kind": "Widget", "metadata": {"name": "w1", "namespace": "ns"}}))
    listed = await env.reads.list(widgets, "ns", ListOptions(Filter.parse("widgets", None, None, "ns")))
    assert names(listed.items) == ["w1"]
    await env.store.create(widgets.key("ns", "w2"), orjson.dumps({"metadata": {"name": "w2", "namespace": "ns"}}))
    listed = await env.reads.list(widgets, "ns", ListOptions(Filter.parse("widgets", None, None, "ns")))
    assert names(listed.items) == ["w1", "w2"]


async def test_a_cache_with_no_events_of_its_own_is_at_the_feeds_revision_without_being_fed(env: Env) -> None:
    """The feed gives a batch only to the caches it has events for (and those a reader
    waits on): an idle cache is at the feed's clock all the same, so a consistent LIST
    of configmaps after pod writes is at the pods' revision, and costs no call a batch."""
    cms = next(t for t in BUILTIN if t.plural == "configmaps")
    pods, other = env.caches.cache_for(PODS), env.caches.cache_for(cms)
    await pods.ready.wait()
    await other.ready.wait()
    fed: list[str] = []
    for cache in (pods, other):
        def counting(events: Any, revision: int, received: float, cache: Any = cache,
                     feed: Any = cache.feed) -> None:
            fed.append(cache.plural)
            feed(events, revision, received)
        cache.feed = counting  # type: ignore[method-assign]
    written = [await env.put(f"p{i}") for i in range(5)]
    assert await pods.wait_fresh(written[-1], timeout=5)
    assert set(fed) == {"pods"}  # the configmaps cache was never called
    assert other.revision == pods.revision == written[-1]
    listed = await env.reads.list(cms, "ns", ListOptions(Filter.parse("configmaps", None, None, "ns")))
    assert listed.items == [] and listed.revision == written[-1]


async def test_a_read_waiting_on_an_idle_cache_is_woken_by_the_feed(env: Env) -> None:
    """A wait for a revision the feed has not reached: the waiting cache is given the
    batches from then on, with or without its events, and wakes when one reaches it."""
    cms = next(t for t in BUILTIN if t.plural == "configmaps")
    other = env.caches.cache_for(cms)
    await other.ready.wait()
    target = await env.store.revision() + 3
    waiting = asyncio.create_task(other.wait_fresh(target, timeout=5))
    await asyncio.sleep(0)
    assert other in env.caches.clock.waiting
    for i in range(3):
        await env.put(f"w{i}")
    assert await waiting
    assert other.revision >= target and other not in env.caches.clock.waiting


async def test_a_wait_on_a_cache_behind_its_feed_ends_when_it_drains(tmp_path: Path) -> None:
    """The pods cache holds queued batches (its applier waits for a reader's lock) when a
    read asks for the feed's revision, reached by another resource's write: once drained
    the cache is at the feed's clock, and the wait ends with no later batch to bring it."""
    st = store.open(f"lmdb://{tmp_path}/store")
    caches = WatchCaches(st, CacheConfig(mode="copy"))
    await caches.start()
    env = Env(st, caches)
    cms = next(t for t in BUILTIN if t.plural == "configmaps")
    try:
        cache, other = caches.cache_for(PODS), caches.cache_for(cms)
        await cache.ready.wait()
        await other.ready.wait()
        await cache.lock.acquire_read()
        for i in range(3):
            await env.put(f"p{i}")
        cm = await st.create(cms.key("ns", "c"), orjson.dumps({"metadata": {"name": "c", "namespace": "ns"}}))
        assert await other.wait_fresh(cm, timeout=5)
        assert cache.revision < cm  # held: its batches are queued
        waiting = asyncio.create_task(cache.wait_fresh(cm, timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        cache.lock.release_read()
        assert await waiting
        assert cache.revision == cm
    finally:
        await caches.stop()
        await st.close()


async def test_the_pages_of_a_list_the_store_served_are_served_while_the_cache_is_behind(env: Env) -> None:
    """A cache held behind its writers (a starved server): the first page comes from the
    store at its revision, and so do the next ones at the token's revision, not 504 (as
    upstream's cacher delegates a list at a revision it does not have to etcd); a list
    at an exact revision past the store's is still 504."""
    for i in range(5):
        await env.put(f"p{i}")
    cache = env.caches.cache_for(PODS)
    await cache.wait_fresh(await env.store.revision())
    await cache.lock.acquire_read()  # its applier waits: what it is sent queues
    try:
        for i in range(5, 9):
            await env.put(f"p{i}")
        assert cache.revision < await env.store.revision()
        pages: list[list[str]] = []
        listed = await env.reads.list(PODS, "ns", ListOptions(everything(), limit=3))  # (after fresh_timeout)
        pages.append(names(listed.items))
        while listed.next_start is not None:
            listed = await env.reads.list(PODS, "ns", ListOptions(everything(), limit=3, start=listed.next_start,
                                                                  continue_revision=listed.revision))
            pages.append(names(listed.items))
        assert pages == [["p0", "p1", "p2"], ["p3", "p4", "p5"], ["p6", "p7", "p8"]]
        assert cache.revision < listed.revision  # all three pages while it was behind
        past = await env.store.revision() + 100
        with pytest.raises(ApiError) as e:
            await env.reads.list(PODS, "ns", ListOptions(everything(), resource_version=str(past), match="Exact"))
        assert e.value.code == 504 and "Too large resource version" in e.value.message
    finally:
        cache.lock.release_read()


async def test_exact_lists_between_retained_snapshots_replay_the_window(tmp_path: Path) -> None:
    st = store.open(f"lmdb://{tmp_path}/store")
    caches = WatchCaches(st, CacheConfig(retain_interval=3600.0))  # only the initial snapshot is retained
    await caches.start()
    env = Env(st, caches)
    try:
        rnd = random.Random(7)
        revisions = []
        for n in range(120):
            name = f"p{rnd.randrange(30):02d}"
            if rnd.random() < 0.25:
                with contextlib.suppress(store.NotFound):
                    revisions.append(await st.delete(PODS.key("ns", name)))
            else:
                revisions.append(await env.put(name, node=str(n)))
        await caches.cache_for(PODS).wait_fresh(revisions[-1])
        for rev in revisions[::7]:
            listed = await env.reads.list(PODS, None, ListOptions(everything(), resource_version=str(rev),
                                                                  match="Exact"))
            kvs, _, _ = await st.range(PODS.prefix(), store.prefix_end(PODS.prefix()), revision=rev)
            assert listed.revision == rev
            assert [(orjson.loads(i)["metadata"]["name"], orjson.loads(i)["spec"]["nodeName"]) for i in listed.items] \
                == [(orjson.loads(kv.value)["metadata"]["name"], orjson.loads(kv.value)["spec"]["nodeName"])
                    for kv in kvs]
    finally:
        await caches.stop()
        await st.close()


@pytest.mark.parametrize(("window_events", "retained_bytes", "span"), [(40, 1 << 30, 40), (1_000, 20_000, 20)])
async def test_retained_snapshots_stay_within_the_window_and_their_memory_bound(
        tmp_path: Path, window_events: int, retained_bytes: int, span: int) -> None:
    """A snapshot is retained after every event here (retain_interval 0): 200 of them
    unbounded. None is kept from before the window's start, and what they keep alive
    (each write since: about 1 KB here) stays within retained_bytes. An exact list still
    answers at every revision: from the cache within the window, from the store before."""
    st = store.open(f"lmdb://{tmp_path}/store")
    caches = WatchCaches(st, CacheConfig(retain_interval=0.0, window_events=window_events,
                                         retained_bytes=retained_bytes, apply_chunk=1))
    await caches.start()
    env = Env(st, caches)
    try:
        cache = caches.cache_for(PODS)
        await cache.ready.wait()
        revisions = [await env.put(f"p{n % 20:02d}", node=f"n{n}", pad=300) for n in range(200)]
        await cache.wait_fresh(revisions[-1])
        retained = list(cache._retained)
        assert retained[0][0] >= cache.window.start
        assert cache._retained_bytes <= retained_bytes
        assert sum(cache._retained_costs) == cache._retained_bytes
        assert 1 < len(retained) <= span + 1
        assert retained[-1][0] - retained[0][0] <= span
        for rev in revisions[::9]:
            listed = await env.reads.list(PODS, None, ListOptions(everything(), resource_version=str(rev),
                                                                  match="Exact"))
            kvs, _, _ = await st.range(PODS.prefix(), store.prefix_end(PODS.prefix()), revision=rev)
            assert listed.revision == rev
            assert [orjson.loads(i)["spec"]["nodeName"] for i in listed.items] \
                == [orjson.loads(kv.value)["spec"]["nodeName"] for kv in kvs]
    finally:
        await caches.stop()
        await st.close()


async def test_a_cache_behind_its_writers_reads_its_backlog_from_the_store(tmp_path: Path) -> None:
    """With the applier held (a reader holds the lock it needs), the pods cache queues at
    most feed_backlog events; the feed passes over the rest for it, and the applier reads
    them from the store's log when it gets there. Meanwhile another resource's cache keeps
    up. Released, the pods cache has every write, in order, once, and a watcher sees each
    event once, while writes go on."""
    st = store.open(f"lmdb://{tmp_path}/store")
    caches = WatchCaches(st, CacheConfig(feed_backlog=20))
    await caches.start()
    env = Env(st, caches)
    cms = next(t for t in BUILTIN if t.plural == "configmaps")
    try:
        cache, other = caches.cache_for(PODS), caches.cache_for(cms)
        await cache.ready.wait()
        await other.ready.wait()
        stream = await env.reads.watch(PODS, None, WatchOptions(everything(), resource_version=str(cache.revision)))
        await cache.lock.acquire_read()
        revisions = []
        most = 0
        for n in range(150):
            revisions.append(await env.put(f"p{n % 40:02d}", node=f"n{n}"))
            most = max(most, cache.queued)
        cm = await st.create(cms.key("ns", "c"), orjson.dumps({"metadata": {"name": "c", "namespace": "ns"}}))
        assert await other.wait_fresh(cm, timeout=5)  # the other cache is not held back
        assert most <= 20
        assert cache.revision < revisions[0]
        cache.lock.release_read()
        more = asyncio.gather(*[env.put(f"q{n}", node="late") for n in range(30)])
        assert await cache.wait_fresh(revisions[-1], timeout=10)
        revisions += sorted(await more)
        assert await cache.wait_fresh(revisions[-1], timeout=10)
        seen = [int(orjson.loads(item.raw)["metadata"]["resourceVersion"])
                for item in await collect(stream, len(revisions), timeout=10)]
        assert seen == revisions
        listed = await env.reads.list(PODS, None, ListOptions(everything()))
        kvs, _, _ = await st.range(PODS.prefix(), store.prefix_end(PODS.prefix()))
        assert [orjson.loads(i)["spec"]["nodeName"] for i in listed.items] \
            == [orjson.loads(kv.value)["spec"]["nodeName"] for kv in kvs]
        assert cache.queued == 0 and cache._gap is None
        assert cache.reread >= 150 - 20
    finally:
        await caches.stop()
        await st.close()


async def test_a_batch_fed_while_nothing_is_pending_reaches_the_watchers_in_the_feeds_turn(tmp_path: Path) -> None:
    """No task switch (a turn of the loop) between the feed and the watchers while the cache
    is idle: the events are in a watcher's buffer when ``feed`` returns. What one apply
    budget does not cover, and any batch while the write lock is taken or a batch is
    queued, goes to the applier's task: the watcher gets every event once, in order."""
    from controlplane.watchcache.cache import ResourceCache
    st = store.open(f"lmdb://{tmp_path}/store")
    try:
        cache = ResourceCache(PODS.prefix(), "pods", CacheConfig(apply_chunk=4, apply_budget=0.0),
                              await st.revision())
        task = asyncio.create_task(cache.run(st))
        await cache.ready.wait()
        resumed = await cache.watch_from(cache.revision, everything())
        assert resumed is not None
        w = resumed[1]
        watcher_stream = st.watch(b"\x00", b"\x00", cache.revision + 1)
        revisions = [await st.create(PODS.key("ns", f"p{n}"), pod(f"p{n}")) for n in range(12)]
        events: list[store.Event] = []
        while len(events) < 12:
            events += await anext(watcher_stream)

        def seen() -> list[int]:
            return [ev.revision for ev, _ in w.buffer]

        cache.feed(events[:1], revisions[0], time.perf_counter())
        assert seen() == revisions[:1] and cache.revision == revisions[0] and cache.queued == 0
        cache.feed(events[1:9], revisions[8], time.perf_counter())  # one chunk now (the budget is 0)
        assert seen() == revisions[:5] and cache.queued == 4
        cache.feed(events[9:10], revisions[9], time.perf_counter())  # behind the queued: queued
        assert seen() == revisions[:5] and cache.queued == 5
        assert await cache.wait_fresh(revisions[9], timeout=5)
        assert seen() == revisions[:10] and cache.queued == 0
        await cache.lock.acquire_read()  # the lock taken (a copy-mode reader): queued
        cache.feed(events[10:], revisions[11], time.perf_counter())
        assert seen() == revisions[:10] and cache.queued == 2
        cache.lock.release_read()
        assert await cache.wait_fresh(revisions[11], timeout=5)
        assert seen() == revisions
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await watcher_stream.aclose()  # type: ignore[attr-defined]
    finally:
        await st.close()


async def test_a_backlog_read_from_the_store_past_the_feed_is_not_applied_twice(tmp_path: Path) -> None:
    """The feed's batches, handed over here by hand, lag the store: reading its gap, the
    cache gets events the feed has not delivered yet; the feed's copies of those are then
    dropped, and what follows them applied."""
    from controlplane.watchcache.cache import ResourceCache
    st = store.open(f"lmdb://{tmp_path}/store")
    try:
        cache = ResourceCache(PODS.prefix(), "pods", CacheConfig(feed_backlog=5), await st.revision())
        task = asyncio.create_task(cache.run(st))
        await cache.ready.wait()
        watcher_stream = st.watch(b"\x00", b"\x00", cache.revision + 1)
        revisions = [await st.create(PODS.key("ns", f"p{n}"), pod(f"p{n}", node="a")) for n in range(12)]
        events: list[store.Event] = []
        while len(events) < 12:
            events += await anext(watcher_stream)
        await cache.lock.acquire_read()
        for ev in events[:8]:  # 5 queued, then a gap from the 6th on
            cache.feed([ev], ev.kv.mod_revision, time.perf_counter())
        assert cache.queued == 5 and cache._gap == [revisions[4], revisions[7], revisions[7]]
        cache.lock.release_read()
        assert await cache.wait_fresh(revisions[-1], timeout=5)  # the gap read reached the store's newest
        assert cache._skip_through == revisions[-1]
        for ev in events[8:]:
            cache.feed([ev], ev.kv.mod_revision, time.perf_counter())
        last = await st.update(PODS.key("ns", "p0"), pod("p0", node="b"), 0)
        tail: Sequence[store.Event] = []
        while not tail:
            tail = await anext(watcher_stream)
        cache.feed(tail, last, time.perf_counter())
        assert await cache.wait_fresh(last, timeout=5)
        assert [ev.revision for ev in cache.window.since(revisions[0] - 1) or []] == [*revisions, last]
        snap = await cache.snapshot()
        assert [(k, e[1]) for k, e in snap.items(b"", b"\xff")] == sorted(
            [(PODS.key("ns", f"p{n}"), revisions[n]) for n in range(1, 12)] + [(PODS.key("ns", "p0"), last)])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await watcher_stream.aclose()  # type: ignore[attr-defined]
    finally:
        await st.close()


async def test_a_watch_list_is_not_cut_off_by_writes_during_its_initial_walk(env: Env) -> None:
    for i in range(70):
        await env.put(f"p{i:02d}")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version="0",
                                                            send_initial_events=True, bookmarks=True))
    try:
        first = await stream.__anext__()  # the walk has begun (7 entries a chunk)
        for i in range(100):  # more than the watcher's buffer of 64 arrive meanwhile
            await env.put(f"q{i:02d}")
        rest = await collect(stream, 70 + 1 + 100 - len(first))
        got = first + rest
        assert [i.type for i in got] == ["ADDED"] * 70 + ["BOOKMARK"] + ["ADDED"] * 100
        assert not watcher_of(stream).closed
    finally:
        await stream.aclose()


async def test_a_watch_resumes_across_a_cache_rebuild_with_no_gap_or_duplicate(env: Env) -> None:
    rev = await env.put("a")
    stream = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=str(rev)))
    await env.put("b")
    await env.put("c")
    got = await collect(stream, 2)
    last = orjson.loads(got[-1].raw)["metadata"]["resourceVersion"]
    env.caches._drop_all("a rebuild, as after the feed failed")  # what the feed does on an error
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()  # the watch ends; the client resumes from ``last``
    await stream.aclose()
    await env.put("d")
    await env.store.delete(PODS.key("ns", "b"))
    resumed = await env.reads.watch(PODS, "ns", WatchOptions(everything(), resource_version=last))
    try:
        got = await collect(resumed, 2)
        assert [(i.type, orjson.loads(i.raw)["metadata"]["name"]) for i in got] == [("ADDED", "d"), ("DELETED", "b")]
        await env.put("e")  # and live events follow (the store's watch: the new window starts after last)
        got = await collect(resumed, 1)
        assert orjson.loads(got[0].raw)["metadata"]["name"] == "e"
    finally:
        await resumed.aclose()


async def test_a_primed_version_is_served_as_the_writer_made_it(env: Env) -> None:
    await env.put("warm")  # the cache is loaded and following
    await env.reads.get(PODS, "ns", "warm")
    key = PODS.key("ns", "primed")
    raw = pod("primed", labels={"team": "a"})
    rev = await env.store.create(key, raw)
    obj = orjson.loads(raw)
    served = b'{"the":"writer\'s own bytes"}'  # what the writer would send; any bytes, to tell them apart
    env.reads.prime(PODS, key, rev, served, obj)
    assert await env.reads.get(PODS, "ns", "primed") == served
    listed = await env.reads.list(PODS, "ns", ListOptions(everything(labels="team=a")))
    assert listed.items == [served]  # filters use the attrs of the primed object
    # a version written elsewhere (not primed) is decoded from the store's bytes as usual
    rev2 = await env.put("primed", labels={"team": "b"})
    got = await env.reads.get(PODS, "ns", "primed")
    assert got is not None and orjson.loads(got)["metadata"]["resourceVersion"] == str(rev2)


async def test_a_write_starts_from_a_version_written_here_before_the_applier_reaches_it(env: Env) -> None:
    """While the applier is behind (here: the write lock held), the next write to an object
    this process wrote starts from that version, not from the one it replaced (a sure
    conflict); once applied, the map's entry is the same version, and nothing is left over."""
    await env.put("lease")
    await env.reads.get(PODS, "ns", "lease")
    cache = env.caches.cache_for(PODS)
    key = PODS.key("ns", "lease")
    before = env.reads.latest(PODS, key)
    assert before is not None
    await cache.lock.acquire_write()
    try:
        raw = pod("lease", labels={"renewed": "1"})
        rev = await env.store.update(key, raw, before[1])
        obj = orjson.loads(raw)
        obj["metadata"]["resourceVersion"] = str(rev)
        served = orjson.dumps(obj)
        env.reads.prime(PODS, key, rev, served, obj)
        await asyncio.sleep(0.05)  # the store's event is queued or built, not applied
        assert cache.get(key)[1] == before[1]  # type: ignore[index]
        assert env.reads.latest(PODS, key) == (served, rev)
    finally:
        cache.lock.release_write()
    assert await cache.wait_fresh(rev, timeout=5)
    assert cache.get(key)[1] == rev  # type: ignore[index]
    assert env.reads.latest(PODS, key) == (served, rev)
    assert not cache._primed and not cache._primed_newest


async def test_a_write_starts_from_the_json_this_process_wrote_without_unpacking(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        await env.put(f"w{i:02d}", pad=1200)
    cache = env.caches.cache_for(PODS)
    for _ in range(500):
        if cache.packer.trained:
            break
        await asyncio.sleep(0.01)
    assert cache.packer.trained
    key = PODS.key("ns", "hot")
    raw = pod("hot", pad=1200)
    rev = await env.store.create(key, raw)
    obj = orjson.loads(raw)
    obj["metadata"]["resourceVersion"] = str(rev)
    served = orjson.dumps(obj)
    env.reads.prime(PODS, key, rev, served, obj)
    assert await env.reads.get(PODS, "ns", "hot") == served  # applied, its entry packed
    unpacked: list[bytes] = []
    real = entry_module.unpack  # type: ignore[attr-defined]  # (entry's import of packing.unpack)

    def counting_unpack(body: bytes) -> bytes:
        unpacked.append(body)
        return bytes(real(body))

    monkeypatch.setattr(entry_module, "unpack", counting_unpack)
    assert env.reads.latest(PODS, key) == (served, rev)
    assert unpacked == []
    # a version written elsewhere is unpacked from the cache, never the stale one kept here
    rev2 = await env.put("hot", labels={"v": "2"}, pad=1200)
    await env.reads.get(PODS, "ns", "hot", resource_version=str(rev2))
    unpacked.clear()
    hit = env.reads.latest(PODS, key)
    assert hit is not None and hit[1] == rev2 and orjson.loads(hit[0])["metadata"]["labels"] == {"v": "2"}
    assert len(unpacked) == 1
    await env.store.delete(key)
    assert await env.reads.get(PODS, "ns", "hot") is None  # a consistent read: the deletion is applied
    assert env.reads.latest(PODS, key) is None


async def test_packed_entries_serve_the_same_json(env: Env) -> None:
    for i in range(60):
        await env.put(f"p{i:02d}", labels={"n": str(i)}, pad=1200)
    cache = env.caches.cache_for(PODS)
    for _ in range(500):
        if cache.packer.trained:
            break
        await asyncio.sleep(0.01)
    assert cache.packer.trained
    watch = await env.reads.watch(PODS, None, WatchOptions(everything(), send_initial_events=True,
                                                            bookmarks=True))
    for i in range(60, 79):
        await env.put(f"p{i:02d}", labels={"n": str(i)}, pad=1200)
    await env.put("p79", labels={"n": "79"})  # small: kept as JSON, dictionary or not
    listed = await env.reads.list(PODS, None, ListOptions(everything()))  # (a consistent read: the cache is fresh)
    bodies = {e[0]: e[2] for _, e in (await cache.snapshot()).items(PODS.prefix(), b"\xff")}
    assert any(b[0] == 0xFD for b in bodies.values())
    assert bodies[PODS.key("ns", "p79")][:1] == b"{"
    kvs, _, _ = await env.store.range(PODS.prefix(), store.prefix_end(PODS.prefix()))
    assert [orjson.loads(i) for i in listed.items] == [
        {**orjson.loads(kv.value), "metadata": {**orjson.loads(kv.value)["metadata"],
                                                 "resourceVersion": str(kv.mod_revision)}} for kv in kvs]
    got = await env.reads.get(PODS, "ns", "p79")
    assert got is not None and orjson.loads(got)["metadata"]["labels"] == {"n": "79"}
    items = await collect(watch, 81)  # 60 initial, a bookmark, 20 live
    assert [orjson.loads(i.raw)["metadata"]["name"] for i in items if i.type == "ADDED"] == \
        [f"p{i:02d}" for i in range(80)]


async def test_caches_never_share_a_generation() -> None:
    # a cache replacing a failed one starts past every generation the old one had, so
    # memos keyed by generation (the API's PriorityClasses, Namespaces) cannot take the
    # new cache's state for the old one's
    from controlplane.watchcache.cache import ResourceCache

    old = ResourceCache(b"/registry/namespaces/", "namespaces", CacheConfig(), 1)
    new = ResourceCache(b"/registry/namespaces/", "namespaces", CacheConfig(), 1)
    old.generation += 1_000_000  # what a long-lived cache reaches
    assert new.generation > old.generation


async def test_an_expired_continue_token_is_410_with_a_token_to_go_on_at_the_latest_revision(env: Env) -> None:
    first = await env.put("a")
    for i in range(80):  # more than the window's 50 events
        await env.put(f"b{i % 10}")
    await env.store.compact(first + 40)
    expired = encode_continue(PODS.key("ns", "b"), PODS.prefix("ns"), first)
    with pytest.raises(ApiError) as e:
        await env.reads.list(PODS, "ns", list_options(PODS, "ns", {"limit": "3", "continue": expired}))
    status = e.value.status()
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith("The provided continue parameter is too old to display a consistent list "
                                        "result. You can start a new list without the continue parameter, or use "
                                        "the continue token in this response to retrieve the remainder")
    # the fresh token goes on from the same key, at the latest revision, with consistent tokens after it
    listed = await env.reads.list(PODS, "ns", list_options(PODS, "ns", {"limit": "3",
                                                                          "continue": status["metadata"]["continue"]}))
    assert names(listed.items) == ["b0", "b1", "b2"]
    assert listed.revision == await env.store.revision() and listed.continue_token is not None
    rest = await env.reads.list(PODS, "ns", list_options(PODS, "ns", {"continue": listed.continue_token}))
    assert names(rest.items) == [f"b{i}" for i in range(3, 10)]


async def test_versions_primed_with_their_attrs_are_applied_as_primed_and_leave_the_collectors_sight(
        env: Env) -> None:
    """``prime_attrs`` (a bulk request's splices) keeps each version by its revision until the
    applier takes it; its entry is not untracked one by one: the first young collection
    does it, its attrs being the previous version's (already out of the collector's sight)."""
    import gc

    names_ = [f"p{i}" for i in range(5)]
    for name in names_:
        await env.put(name, labels={"team": "a"})
    cache = env.caches.cache_for(PODS)
    keys = [PODS.key("ns", name) for name in names_]
    assert await cache.wait_fresh(await env.store.revision(), timeout=5)
    before = [cache.get(key) for key in keys]
    gc.collect()
    answers = await store.update_many(env.store, [(key, pod(name, labels={"team": "a"}), entry[1])  # type: ignore[index]
                                                  for key, name, entry in zip(keys, names_, before, strict=True)])
    results = [rev for rev in answers if isinstance(rev, int)]
    assert len(results) == len(keys)
    served = [b'{"primed":%d}' % rev for rev in results]  # any bytes: to tell the primed ones apart
    env.reads.prime_attrs(PODS, [(key, rev, raw, entry[3])  # type: ignore[index]
                                 for key, rev, raw, entry in zip(keys, results, served, before, strict=True)])
    assert await cache.wait_fresh(max(results), timeout=5)
    entries = [cache.get(key) for key in keys]
    assert [e[1] for e in entries] == results and [e[2] for e in entries] == served  # type: ignore[index]
    assert not cache._primed and not cache._primed_newest
    gc.collect()  # (the young collection that meets them; they may have been promoted since)
    assert not any(gc.is_tracked(e) for e in entries)


async def test_the_average_object_size_is_estimated_from_a_sample(env: Env) -> None:
    """What API Priority and Fairness sizes a LIST by: the cached objects' JSON on average,
    packed ones read from their frames (entries are packed after the first 20 here), kept
    for a minute; an empty cache's 0 is not kept."""
    cache = env.caches.cache_for(PODS)
    await cache.ready.wait()
    assert cache.object_size() == 0
    for i in range(60):
        await env.put(f"p{i:02d}", pad=2000)
    await env.reads.list(PODS, "ns", ListOptions(everything()))  # (a consistent read: the cache has them all)
    listed = await env.reads.list(PODS, "ns", ListOptions(everything()))
    sizes = [len(item) for item in listed.items]
    size = cache.object_size()
    assert min(sizes) - 40 <= size <= max(sizes)  # (the served JSON carries its resourceVersion too)
    await env.put("big", pad=50_000)
    assert cache.object_size() == size  # the estimate stands for SIZE_PERIOD
