"""Graceful deletion of pods, as kube-apiserver: a bound, unfinished pod gets a
deletionTimestamp (now + grace) and stays until deleted with grace 0."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config

PODS = resource_path("", "v1", "pods", "default")


def pod(name: str, node: str | None = "node-1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}
    if node:
        body["spec"]["nodeName"] = node
    return body


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app: FastAPI = create_app(Config(data_dir=tmp_path / "data", tls=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


async def exists(client: Client, name: str) -> bool:
    try:
        await client.get(f"{PODS}/{name}")
        return True
    except ApiError as e:
        if e.code != 404:
            raise
        return False


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


async def test_bound_pod_waits_its_grace_then_grace_zero_deletes(client: Client) -> None:
    await client.create(PODS, pod("a"))
    marked = await client.delete(f"{PODS}/a")
    meta = marked["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30
    assert abs(_ts(meta["deletionTimestamp"]) - (time.time() + 30)) < 2
    assert await exists(client, "a")
    # a status write while terminating does not delete it (its grace is not over)
    await client.patch(f"{PODS}/a/status", {"status": {"phase": "Running"}})
    assert await exists(client, "a")
    # deleting again with the same or a longer grace changes nothing
    again = await client.delete(f"{PODS}/a", {"gracePeriodSeconds": 60})
    assert again["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    # a shorter one moves the deadline
    shorter = await client.delete(f"{PODS}/a", gracePeriodSeconds=10)
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 10
    assert abs(_ts(shorter["metadata"]["deletionTimestamp"]) - (time.time() + 10)) < 2
    await client.delete(f"{PODS}/a", {"gracePeriodSeconds": 0})
    assert not await exists(client, "a")


@pytest.mark.parametrize(("body", "why"), [
    (pod("u", node=None), "not bound to a node"),
    (pod("g", terminationGracePeriodSeconds=0), "terminationGracePeriodSeconds 0"),
])
async def test_pods_without_grace_are_deleted_at_once(client: Client, body: dict[str, Any], why: str) -> None:
    name = body["metadata"]["name"]
    await client.create(PODS, body)
    await client.delete(f"{PODS}/{name}")
    assert not await exists(client, name), why


async def test_finished_pods_are_deleted_at_once(client: Client) -> None:
    await client.create(PODS, pod("done"))
    await client.patch(f"{PODS}/done/status", {"status": {"phase": "Succeeded"}})
    await client.delete(f"{PODS}/done")
    assert not await exists(client, "done")


async def test_finalizers_hold_a_pod_past_its_grace(client: Client) -> None:
    body = pod("f")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await client.create(PODS, body)
    await client.delete(f"{PODS}/f", gracePeriodSeconds=0)
    got = await client.get(f"{PODS}/f")
    assert got["metadata"]["deletionTimestamp"] and got["metadata"]["deletionGracePeriodSeconds"] == 0
    await client.patch(f"{PODS}/f", {"metadata": {"finalizers": None}})
    assert not await exists(client, "f")


async def test_bad_grace_period_is_a_400_and_a_negative_one_is_a_second(client: Client) -> None:
    await client.create(PODS, pod("b"))
    with pytest.raises(ApiError) as e:
        await client.delete(f"{PODS}/b", {"gracePeriodSeconds": "soon"})
    assert e.value.code == 400
    with pytest.raises(ApiError) as e:
        await client.delete(f"{PODS}/b", gracePeriodSeconds="soon")
    assert e.value.code == 400
    # upstream's BeforeDelete: a negative grace period is taken as 1 s
    await client.delete(f"{PODS}/b", gracePeriodSeconds="-1")
    assert (await client.get(f"{PODS}/b"))["metadata"]["deletionGracePeriodSeconds"] == 1


async def test_deleting_a_namespace_does_not_wait_for_its_pods_grace(client: Client) -> None:
    nss = resource_path("", "v1", "namespaces")
    await client.create(nss, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "short"}})
    await client.create(resource_path("", "v1", "pods", "short"), pod("x"))
    await client.delete(f"{nss}/short")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            await client.get(f"{nss}/short")
        except ApiError as e:
            if e.code != 404:
                raise
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the namespace is still there")


async def test_a_patch_removing_the_last_finalizer_beside_another_write_is_retried(client: Client) -> None:
    """A kubelet's status write lands between the patch's read and its delete: the patch is
    tried again on the newer version, as kube-apiserver's patches are, not refused with 409."""
    for attempt in range(5):
        name = f"race-{attempt}"
        body = pod(name)
        body["metadata"]["finalizers"] = ["example.com/hold"]
        await client.create(PODS, body)
        await client.delete(f"{PODS}/{name}", gracePeriodSeconds=0)
        await asyncio.gather(
            client.patch(f"{PODS}/{name}/status", {"status": {"phase": "Failed"}}),
            client.patch(f"{PODS}/{name}", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/hold"]}},
                         patch_type="strategic"))
        assert not await exists(client, name)
