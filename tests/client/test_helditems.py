"""client/helditems.py: an informer's objects, the newest parsed, the others packed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.client import Client, Informer, held_in, resource_path
from controlplane.client.helditems import PackedItems
from controlplane.config import Config
from controlplane.podgen import PodGenerator
from controlplane.watchcache.packing import Packer
from tests.client.test_client import _until

PODS = resource_path("", "v1", "pods", "default")


def obj(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i}", "namespace": "default", "resourceVersion": str(i)}, "spec": {"n": i}}


def test_only_the_newest_are_held_parsed_and_the_others_read_back_equal() -> None:
    items = PackedItems(hot=3)
    held = {f"default/p{i}": obj(i) for i in range(10)}
    for k, v in held.items():
        items[k] = v
    assert len(items) == 10 and items.packed == 7
    assert list(items) == list(held)  # the order written, without parsing anything
    assert items.unpacked == 0
    assert items["default/p9"] is held["default/p9"]  # hot: the object itself
    back = items["default/p0"]
    assert back == held["default/p0"] and back is not held["default/p0"]  # packed: parsed again
    assert items.unpacked == 1
    assert dict(items.items()) == held
    assert items.get("default/nope") is None and "default/nope" not in items
    with pytest.raises(KeyError):
        items["default/nope"]


def test_a_write_makes_an_object_hot_and_a_key_is_held_once() -> None:
    items = PackedItems(hot=2)
    for i in range(5):
        items[f"k{i}"] = obj(i)
    items["k0"] = obj(100)  # packed before: now hot, and k2 is packed in its place
    assert items.packed == 3 and len(items) == 5
    assert items["k0"]["spec"] == {"n": 100}
    assert list(items) == ["k1", "k2", "k3", "k4", "k0"]
    del items["k1"]  # packed
    del items["k0"]  # hot
    assert len(items) == 3 and "k1" not in items and "k0" not in items
    with pytest.raises(KeyError):
        del items["k1"]
    items["k1"] = obj(1)
    assert sorted(items) == ["k1", "k2", "k3", "k4"] and items.packed == 2


def test_a_namespace_walk_parses_that_namespace_only() -> None:
    items = PackedItems(hot=1)
    for ns in ("a", "b", "ab"):
        for i in range(3):
            items[f"{ns}/p{i}"] = {"metadata": {"namespace": ns, "name": f"p{i}"}}
    got = held_in(items, "a")
    assert [o["metadata"]["name"] for o in got] == ["p0", "p1", "p2"]
    assert all(o["metadata"]["namespace"] == "a" for o in got)
    assert items.unpacked == 3  # not the other namespaces' six (one of them hot)
    assert held_in({"a/x": {"n": 1}, "b/y": {"n": 2}}, "b") == [{"n": 2}]  # a plain dict too


def test_pods_are_packed_small_once_the_dictionary_is_trained() -> None:
    gen = PodGenerator(seed=4)
    pods = [gen.pod() for _ in range(600)]
    items = PackedItems(hot=10, packer=Packer(train_after=200))  # trained on the first 200 packed
    for p in pods[:210]:
        items[p["metadata"]["name"]] = p
    deadline = time.monotonic() + 30
    while not items._packer.trained:  # trained on a thread
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for p in pods[210:]:
        items[p["metadata"]["name"]] = p
    late = [items._cold[p["metadata"]["name"]] for p in pods[300:580]]
    raw = sum(len(orjson.dumps(p)) for p in pods[300:580])
    assert sum(map(len, late)) * 4 < raw  # a quarter of the JSON at most
    for p in pods[300:580:17]:
        assert items[p["metadata"]["name"]] == p


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app: FastAPI = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"v": "1"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def test_an_informer_with_packed_items_hands_on_what_a_plain_one_does(client: Client) -> None:
    """Updates and deletes of packed pods, and a relist, reach the handlers with the
    objects they would get from an informer holding everything parsed."""
    for i in range(6):
        await client.create(PODS, pod(f"p{i}"))
    events: list[tuple[str, Any, Any]] = []
    inf = Informer(client, PODS, items_factory=lambda: PackedItems(hot=2),
                   on_add=lambda o: events.append(("add", o["metadata"]["name"], None)),
                   on_update=lambda a, b: events.append(("update", a["metadata"]["labels"], b["metadata"]["labels"])),
                   on_delete=lambda o: events.append(("delete", o["metadata"]["name"], None)))
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert isinstance(inf.items, PackedItems) and inf.items.packed == 4
        assert [e[1] for e in events] == [f"p{i}" for i in range(6)]  # the list's order
        events.clear()
        await client.patch(f"{PODS}/p0", {"metadata": {"labels": {"v": "2"}}})  # packed
        await client.delete(f"{PODS}/p1")  # packed
        await _until(lambda: len(events) == 2)
        assert events[0] == ("update", {"v": "1"}, {"v": "2"})
        assert events[1][:2] == ("delete", "p1")
        assert "default/p1" not in inf.items and inf.items["default/p0"]["metadata"]["labels"] == {"v": "2"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # changes while it is away: the next run lists again and reports the difference
    events.clear()
    await client.patch(f"{PODS}/p2", {"metadata": {"labels": {"v": "3"}}})
    await client.delete(f"{PODS}/p3")
    await client.create(PODS, pod("p9"))
    task = asyncio.create_task(inf.run())
    try:
        await _until(lambda: inf.relists == 1 and len(events) == 3)
        assert sorted(map(str, events)) == sorted(map(str, [
            ("update", {"v": "1"}, {"v": "3"}), ("delete", "p3", None), ("add", "p9", None)]))
        assert sorted(inf.items) == sorted(f"default/p{i}" for i in (0, 2, 4, 5, 9))
        assert inf.items.packed == 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_shared_pod_informer_holds_its_pods_packed(client: Client) -> None:
    handle = client.informer(PODS)
    assert isinstance(handle.items, PackedItems)
    assert not isinstance(client.informer(resource_path("", "v1", "configmaps", "default")).items, PackedItems)


def test_bench_informer_measures_the_packed_mode() -> None:
    from controlplane.bench.informer import measure

    got = measure("packed", 300)
    assert got["held"] == 300 and got["us_per_read"] > 0 and got["us_per_pod"] > 0
