"""The scheduler's bound on binding cycles writing at once (``bind_concurrency``), over a real
socket: a pod whose PreBind waits for a controller (VolumeBinding waiting for its claims to
be bound) gives its place up meanwhile, so pods waiting for claims that never bind, more of
them than there are places, do not hold up an ordinary pod's binding (upstream runs each
binding cycle in a goroutine of its own, with no shared bound)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client
from controlplane.scheduler.plugins.volumebinding import SELECTED_NODE
from controlplane.scheduler.scheduler import Scheduler
from tests.test_cli import Serve, running, start_serve

from .helpers import create_node, node, pod

PODS = "/api/v1/namespaces/default/pods"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
SLOTS = 2
STUCK = 3  # pods whose claims never bind: more than the slots


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("bindslots"))) as s:  # its own scheduler off
        yield s


@contextlib.asynccontextmanager
async def scheduling(kubeconfig: Path) -> AsyncIterator[tuple[Client, Scheduler]]:
    client = Client.from_kubeconfig(kubeconfig)
    sched = Scheduler(client, bind_concurrency=SLOTS)
    task = asyncio.create_task(sched.run())
    try:
        yield client, sched
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.05)


async def test_pods_waiting_for_their_claims_hold_no_bind_slot(served: Serve) -> None:
    async with scheduling(served.kubeconfig) as (c, sched):
        await create_node(c, node("n1"))
        # no provisioner and no volume: the claims wait for their first consumer, then for ever
        await c.create("/apis/storage.k8s.io/v1/storageclasses", {
            "metadata": {"name": "never"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"})
        for i in range(STUCK):
            await c.create(PVCS, {"metadata": {"name": f"data-{i}"}, "spec": {
                "storageClassName": "never", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}})
            await c.create(PODS, pod(f"stuck-{i}", volumes=[
                {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{i}"}}]))

        async def all_waiting() -> bool:  # each PreBind has named the node on its claim
            claims = (await c.list(PVCS))["items"]
            return sum(1 for cl in claims if (cl["metadata"].get("annotations") or {}).get(SELECTED_NODE)) == STUCK

        await until(all_waiting)  # (the third waited for a slot until the first two timed out, 600 s)
        await c.create(PODS, pod("plain"))

        async def plain_bound() -> bool:
            return bool((await c.get(f"{PODS}/plain"))["spec"].get("nodeName"))

        await until(plain_bound, timeout=5.0)
        stuck = [(await c.get(f"{PODS}/stuck-{i}"))["spec"].get("nodeName") for i in range(STUCK)]
        assert stuck == [None] * STUCK  # still waiting for their claims
        assert sched._binds._value == SLOTS  # every place free: the waits hold none
