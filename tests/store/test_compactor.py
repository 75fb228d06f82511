"""The compactor: servers on one store take turns, one compaction an interval, one interval behind."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import pytest

import store
from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from store.compactor import COMPACT_REV_KEY, compact_turn
from store.etcd import EtcdStore
from tests.etcd_server import EtcdServer


async def test_two_servers_take_turns_and_compact_to_the_previous_tick(kv: store.Store, prefix: bytes) -> None:
    # first ticks: one server makes the turn key (or both learn it); nothing is compacted
    before = await kv.compacted_revision()
    a = await compact_turn(kv, 0, 0)
    b = await compact_turn(kv, 0, 0)
    turn_key = await kv.get(COMPACT_REV_KEY)
    assert turn_key is not None and a[0] == b[0] == turn_key.version
    assert await kv.compacted_revision() == before

    key = prefix + b"k"
    first = await kv.create(key, b"0")
    # a's second tick: its turn; it compacts to what it saw at its first tick, no further
    a = await compact_turn(kv, *a)
    assert a[0] == turn_key.version + 1
    b = await compact_turn(kv, *b)  # b's tick after a's: not its turn, it learns the key's version
    assert b[0] == a[0]
    compacted = await kv.compacted_revision()
    assert compacted < first
    kept = await kv.get(key, revision=first)
    assert kept is not None and kept.value == b"0"

    rev = first
    for i in range(1, 4):
        rev = await kv.update(key, str(i).encode(), rev)
    # b's next tick is its turn: it compacts to the revision of its last tick, a's after it does nothing
    seen_by_b = b[1]
    b = await compact_turn(kv, *b)
    a = await compact_turn(kv, *a)
    assert await kv.compacted_revision() == seen_by_b
    assert first < seen_by_b < rev
    with pytest.raises(store.Compacted):
        await kv.get(key, revision=first)
    got = await kv.get(key, revision=rev)
    assert got is not None and got.value == b"3"


async def test_the_server_compacts_on_its_interval_and_an_old_watch_gets_410(tmp_path: Path) -> None:
    """A watch from before the watch cache's window is served from the store's history
    until the compactor (every 0.2 s here) has dropped it: then 410 Gone."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, compaction_interval=0.2))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        path = "/api/v1/namespaces/default/configmaps"
        await c.create(path, {"metadata": {"name": "a"}, "data": {"k": "0"}})
        s = app.state.server.store
        # writes across several ticks: the second tick compacts to the first's. A watch from
        # resourceVersion 1 starts at revision 2, so only a compaction past 2 (not a first tick
        # that came before all but the server's first start-up write) makes it 410
        for i in range(1, 100):
            await c.patch(f"{path}/a", {"data": {"k": str(i)}})
            await asyncio.sleep(0.05)
            if await s.compacted_revision() > 2:
                break
        assert 2 < await s.compacted_revision() < await s.revision()  # a tick behind, never all of it

        async def watch_from_the_start() -> None:
            async for _ in c.watch(path, resource_version="1"):
                pass

        with pytest.raises(ApiError) as e:
            await asyncio.wait_for(watch_from_the_start(), 10)
        assert e.value.code == 410


async def test_snapshots_from_before_another_servers_compaction_are_410(tmp_path: Path,
                                                                       etcd_server: EtcdServer) -> None:
    """A replica over etcd learns the compaction point at each of its compactor's ticks,
    whichever replica compacted, and drops its watch caches' snapshots from before it, as
    upstream's cacher does: a continue token or an ``Exact`` list at such a revision, served
    from a snapshot until then, becomes 410 (the store's answer), as on every replica. A watch
    from there is still served from the event window, as upstream's."""
    app = create_app(Config(data_dir=tmp_path / "data", store=etcd_server.url, tls=False, scheduler=False,
                            compaction_interval=0.2))
    other = EtcdStore([etcd_server.endpoint])  # another replica's compactor
    path = f"/api/v1/namespaces/ns-{uuid.uuid4().hex[:8]}/configmaps"
    try:
        async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
            await c.create("/api/v1/namespaces", {"metadata": {"name": path.split("/")[4]}})
            for i in range(4):
                await c.create(path, {"metadata": {"name": f"c{i}"}})
            first = await c.list(path, limit=2)
            rv, token = first["metadata"]["resourceVersion"], first["metadata"]["continue"]
            await c.create(path, {"metadata": {"name": "later"}})
            assert len((await c.list(path, limit=2, **{"continue": token}))["items"]) == 2  # a pinned snapshot
            assert len((await c.list(path, resourceVersion=rv, resourceVersionMatch="Exact"))["items"]) == 4
            with contextlib.suppress(store.Compacted):
                await other.compact(await other.revision())
            deadline = asyncio.get_running_loop().time() + 10
            gone: ApiError | None = None
            while gone is None:
                try:
                    await c.list(path, limit=2, **{"continue": token})
                except ApiError as e:
                    gone = e
                assert asyncio.get_running_loop().time() < deadline, "a compacted snapshot is still served"
                await asyncio.sleep(0.1)
            assert gone.code == 410, gone
            with pytest.raises(ApiError) as exact:
                await c.list(path, resourceVersion=rv, resourceVersionMatch="Exact")
            assert exact.value.code == 410
            async for ev in c.watch(path, resource_version=rv):
                assert ev.type == "ADDED" and ev.object["metadata"]["name"] == "later"
                break
    finally:
        await other.close()
