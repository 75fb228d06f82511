"""The pod garbage collector (controllers/podgc.py): pods of a node that no longer
exists are failed and deleted after the quarantine, as upstream's gcOrphaned; finished
pods past the threshold are deleted, evicted and oldest first, as its gcTerminated."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.controllers.podgc import PodGCController
from controlplane.metrics import PODGC_DELETES
from tests.controllers.helpers import until

PODS = resource_path("", "v1", "pods", "default")
NODES = resource_path("", "v1", "nodes")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def pod(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]}}


async def gone(client: Client, name: str) -> bool:
    try:
        await client.get(f"{PODS}/{name}")
        return False
    except ApiError as e:
        return e.code == 404


async def all_gone(client: Client, *names: str) -> bool:
    return all([await gone(client, n) for n in names])


async def any_gone(client: Client, *names: str) -> bool:
    return any([await gone(client, n) for n in names])


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@contextlib.asynccontextmanager
async def running(gc: PodGCController) -> AsyncIterator[PodGCController]:
    """``gc`` running for the block."""
    task = asyncio.create_task(gc.run())
    try:
        yield gc
    finally:
        await stop(task)


@contextlib.asynccontextmanager
async def recording(client: Client) -> AsyncIterator[list[dict[str, Any]]]:
    """Every version of the namespace's pods written from the block's start, in order."""
    seen: list[dict[str, Any]] = []
    rv = (await client.list(PODS))["metadata"]["resourceVersion"]

    async def record() -> None:
        async for event in client.watch(PODS, resource_version=rv):
            seen.append(event.object)

    watcher = asyncio.create_task(record())
    try:
        yield seen
    finally:
        await stop(watcher)


async def test_pods_of_a_deleted_node_are_failed_and_deleted_after_the_quarantine(client: Client) -> None:
    for n in ("n1", "n2"):
        await client.create(NODES, node(n))
    await client.create(PODS, pod("web", "n1"))
    await client.create(PODS, pod("kept", "n2"))
    await client.patch(f"{PODS}/web/status", {"status": {"phase": "Running"}})
    # a pod bound to a node that never existed is an orphan too, and a finished one is deleted as it is
    await client.create(PODS, pod("stray", "nowhere"))
    await client.create(PODS, pod("done", "nowhere"))
    await client.patch(f"{PODS}/done/status", {"status": {"phase": "Succeeded"}})
    # watch web's last status: Failed with DisruptionTarget, then deleted
    async with running(PodGCController(client, quarantine=0.5)), recording(client) as seen:
        await client.delete(f"{NODES}/n1")
        started = time.monotonic()
        await until(lambda: all_gone(client, "web", "stray", "done"), 10, "orphans not collected")
        assert time.monotonic() - started >= 0.4  # not before the quarantine
        assert not await gone(client, "kept")  # its node exists
        failed = [p for p in seen if p["metadata"]["name"] == "web" and p["status"].get("phase") == "Failed"]
        assert failed, "web was not marked Failed before its deletion"
        [target] = [c for c in failed[0]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "DeletionByPodGC", "PodGC: node no longer exists")
        assert target["observedGeneration"] == failed[0]["metadata"]["generation"]  # KEP-5067
        assert not any(p["metadata"]["name"] == "done" and p["status"].get("phase") == "Failed" for p in seen)


async def test_a_node_back_within_the_quarantine_keeps_its_pods(client: Client) -> None:
    await client.create(NODES, node("n1"))
    await client.create(PODS, pod("web", "n1"))
    async with running(PodGCController(client, quarantine=0.5)):
        await asyncio.sleep(0.1)
        await client.delete(f"{NODES}/n1")
        await client.create(NODES, node("n1"))
        await asyncio.sleep(1.0)
        assert not await gone(client, "web")


async def finish(client: Client, name: str, phase: str, reason: str | None = None) -> None:
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    await client.patch(f"{PODS}/{name}/status", {"status": status})


async def finished(client: Client, *names: str) -> None:
    """Pods on n1 that succeeded."""
    for name in names:
        await client.create(PODS, pod(name, "n1"))
        await finish(client, name, "Succeeded")


async def test_finished_pods_past_the_threshold_go_evicted_first_then_oldest(client: Client) -> None:
    await client.create(NODES, node("n1"))
    await client.create(PODS, pod("z-oldest", "n1"))
    await asyncio.sleep(1.05)  # creationTimestamp has whole seconds: z-oldest is older by one
    for name in ("a", "b", "c", "d"):
        await client.create(PODS, pod(name, "n1"))
    await finish(client, "z-oldest", "Succeeded")
    await finish(client, "a", "Succeeded")
    await finish(client, "b", "Failed")
    await finish(client, "c", "Failed", "Evicted")  # the newest of the finished, but evicted
    # d runs: 4 finished, threshold 2, so 2 go: the evicted c, then the oldest, z-oldest
    before = PODGC_DELETES.labels("default", "terminated")._value.get()
    async with running(PodGCController(client, terminated_threshold=2, check_period=0.1)) as gc:
        await until(lambda: all_gone(client, "c", "z-oldest"), 10, "finished pods past the threshold not collected")
        await asyncio.sleep(0.4)  # later sweeps leave the rest alone: 2 finished, not more than the threshold
        assert [await gone(client, n) for n in ("a", "b", "d")] == [False, False, False]
        assert set(gc.terminated) == {("default", "a"), ("default", "b")}
        assert PODGC_DELETES.labels("default", "terminated")._value.get() - before == 2
        # one more finishes: the oldest of those left by name (a and b share a second) goes
        await finish(client, "d", "Succeeded")
        await until(lambda: gone(client, "a"), 10, "the third finished pod did not take the oldest out")
        assert not await gone(client, "b") and not await gone(client, "d")


async def test_a_threshold_of_zero_keeps_every_finished_pod(client: Client) -> None:
    await client.create(NODES, node("n1"))
    await finished(client, "a", "b")
    async with running(PodGCController(client, terminated_threshold=0, check_period=0.05)) as gc:
        await asyncio.sleep(0.5)
        assert not await gone(client, "a") and not await gone(client, "b")
        assert gc.terminated == {}  # not even counted


async def test_a_finished_pod_recreated_under_the_name_of_one_swept_stays_counted(client: Client) -> None:
    """The sweep deletes with the uid it saw; when a pod of that name but another uid is there by
    then (a StatefulSet's replacement, finished in turn), the delete fails its precondition (409)
    and the replacement, which the informer has put in the set, must stay in it."""
    await client.create(NODES, node("n1"))
    created = await client.create(PODS, pod("s-0", "n1"))
    await finish(client, "s-0", "Failed")
    gc = PodGCController(client, terminated_threshold=1)
    now = (await client.get(f"{PODS}/s-0"))
    gc._pod_seen(now)  # the informer's view: the pod there now, finished
    assert gc.terminated[("default", "s-0")][3] == created["metadata"]["uid"]
    await gc._delete_terminated("default", "s-0", "uid-of-an-earlier-s-0")
    assert not await gone(client, "s-0")
    assert ("default", "s-0") in gc.terminated


async def test_the_first_terminated_sweep_runs_once_the_pods_are_listed(client: Client) -> None:
    """As upstream's gc loop, the first sweep does not wait a period: a restarted
    controller facing finished pods past the threshold deletes them at once."""
    await client.create(NODES, node("n1"))
    await finished(client, "a", "b", "c")
    async with running(PodGCController(client, terminated_threshold=2, check_period=3600.0)):
        await until(lambda: any_gone(client, "a", "b", "c"), 10, "no sweep before the first period ended")
        assert [await gone(client, n) for n in ("a", "b", "c")].count(True) == 1


async def test_terminating_pods_of_an_out_of_service_node_are_failed_and_deleted(client: Client) -> None:
    # upstream's gcTerminating (non-graceful node shutdown): the node is not Ready and tainted
    # out-of-service NoExecute; its terminating pods, which no kubelet will finish, are force deleted
    for n in ("dead", "ready", "untainted"):
        await client.create(NODES, node(n))
    await client.patch(f"{NODES}/dead/status", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    await client.patch(f"{NODES}/untainted/status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    await client.patch(f"{NODES}/ready/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    for name, n in (("stuck", "dead"), ("alive", "dead"), ("on-ready", "ready"), ("on-untainted", "untainted")):
        await client.create(PODS, pod(name, n))
        await client.patch(f"{PODS}/{name}/status", {"status": {"phase": "Running"}})
        if name != "alive":
            await client.delete(f"{PODS}/{name}")  # graceful: bound, so it stays terminating
    out_of_service = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
    for n in ("dead", "ready"):
        await client.patch(f"{NODES}/{n}", {"spec": {"taints": [out_of_service]}})
    before = PODGC_DELETES.labels("default", "out-of-service")._value.get()
    async with running(PodGCController(client, terminated_threshold=0, check_period=0.1)), \
            recording(client) as seen:
        await until(lambda: gone(client, "stuck"), 10, "the terminating pod was not collected")
        await asyncio.sleep(0.3)  # a few more sweeps
        # not terminating, on a Ready node, on a node without the taint: kept
        for name in ("alive", "on-ready", "on-untainted"):
            assert not await gone(client, name), name
        assert any(p["metadata"]["name"] == "stuck" and p["status"].get("phase") == "Failed" for p in seen)
        assert PODGC_DELETES.labels("default", "out-of-service")._value.get() == before + 1


async def test_unscheduled_terminating_pods_are_failed_and_deleted(client: Client) -> None:
    # upstream's gcUnscheduledTerminating: a pod deleted before it was scheduled, a finalizer
    # holding it (a Job's tracking one), is ended by no kubelet: failed, for its owner to see
    for name, node_name in (("held", ""), ("bound", "somewhere"), ("waiting", "")):
        body = pod(name, node_name)
        body["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        if not node_name:
            del body["spec"]["nodeName"]
        await client.create(PODS, body)
        if name != "waiting":
            await client.delete(f"{PODS}/{name}")
    before = PODGC_DELETES.labels("default", "unscheduled")._value.get()
    async with running(PodGCController(client, terminated_threshold=0, check_period=0.1)):
        async def failed() -> bool:
            return bool((await client.get(f"{PODS}/held"))["status"].get("phase") == "Failed")

        await until(failed, 10, "the unscheduled terminating pod was not failed")
        await asyncio.sleep(0.3)  # a few more sweeps
        for name in ("bound", "waiting"):  # bound to a node (its kubelet's), or not being deleted: kept as they are
            assert (await client.get(f"{PODS}/{name}"))["status"].get("phase") != "Failed", name
        assert PODGC_DELETES.labels("default", "unscheduled")._value.get() == before + 1
        await client.patch(f"{PODS}/held", {"metadata": {"finalizers": None}})  # its owner lets it go
        assert await gone(client, "held")
