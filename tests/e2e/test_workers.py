"""``serve --workers 2``: two API server processes on one port and one store.

Every request here opens its own connection, so the kernel's SO_REUSEPORT
hashing spreads them over both processes. What a client must not be able to
tell: a write made through one process is read back through the other, a watch
opened on one sees the writes made through both, and the components (the
scheduler) run once. On SIGTERM both processes exit. A worker, or the
``--components-process`` child, that dies is started again by the first process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from pathlib import Path

from controlplane.client import Client, resource_path
from tests.test_cli import Serve, start_serve

CONFIGMAPS = resource_path("", "v1", "configmaps", "default")
NODE_MONITOR = ("--node-monitor-period", "0.2s")  # kube-controller-manager's flag (5 s by default)


def _server_children(pid: int) -> list[int]:
    """The API server processes it started (not the store's applier processes), by any of its
    threads (a replacement worker is started by the supervising thread)."""
    out = []
    kids = [c for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    for child in kids:
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"serve" in cmdline:
            out.append(int(child))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return bool(stat) and stat.split(") ", 1)[1][:1] != "Z"


async def _fresh(kubeconfig: Path) -> Client:
    return Client.from_kubeconfig(kubeconfig)  # its own connection pool: a new connection


async def _exercise(kubeconfig: Path) -> None:
    # read-your-writes across processes: each create and each read on a new connection
    for i in range(30):
        async with await _fresh(kubeconfig) as c:
            await c.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"},
                                        "data": {"i": str(i)}})
        async with await _fresh(kubeconfig) as c:
            got = await c.get(f"{CONFIGMAPS}/c{i}")
            assert got["data"] == {"i": str(i)}
    async with await _fresh(kubeconfig) as c:
        listed = await c.list(CONFIGMAPS)
        ours = sorted(o["metadata"]["name"] for o in listed["items"] if o["metadata"]["name"] != "kube-root-ca.crt")
        assert ours == sorted(f"c{i}" for i in range(30))  # (the root CA publisher's is there too)

    # both processes answer: each reports its own start time in /metrics (within 40 connections)
    starts = set()
    for _ in range(40):
        async with await _fresh(kubeconfig) as c:
            text = (await c.http.get("/metrics")).text
        m = re.search(r"^process_start_time_seconds (\S+)$", text, re.M)
        assert m is not None
        starts.add(m.group(1))
        if len(starts) == 2:
            break
    assert len(starts) == 2, starts

    # a service account token issued by one process authenticates through both, which serve one key set
    async with await _fresh(kubeconfig) as c:
        await c.create(resource_path("", "v1", "serviceaccounts", "default"), {"metadata": {"name": "bot"}})
        token = (await c.create(resource_path("", "v1", "serviceaccounts", "default", "bot") + "/token",
                                {"spec": {}}))["status"]["token"]
    key_sets = set()
    for _ in range(20):
        async with await _fresh(kubeconfig) as c:
            who = await c.http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                    headers={"Authorization": f"Bearer {token}"},
                                    json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            assert who.status_code == 201, who.text
            assert who.json()["status"]["userInfo"]["username"] == "system:serviceaccount:default:bot"
            key_sets.add((await c.http.get("/openid/v1/jwks")).text)
    assert len(key_sets) == 1

    # a watch on one process sees what is written through either
    async with await _fresh(kubeconfig) as w:
        rv = (await w.list(CONFIGMAPS, limit=1))["metadata"]["resourceVersion"]
        seen: set[str] = set()

        async def watch() -> None:
            async for ev in w.watch(CONFIGMAPS, resource_version=rv):
                if ev.type == "ADDED":
                    seen.add(ev.object["metadata"]["name"])
                    if len(seen) == 20:
                        return

        task = asyncio.create_task(watch())
        for i in range(20):
            async with await _fresh(kubeconfig) as c:
                await c.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"w{i}"}})
        await asyncio.wait_for(task, 30)
    assert seen == {f"w{i}" for i in range(20)}

    # the scheduler runs in one process only: the pod is bound once, with one Scheduled event
    async with await _fresh(kubeconfig) as c:
        await _a_pod_is_scheduled(c)
        await asyncio.sleep(1.0)  # a second scheduler, if there were one, would have tried by now
        events = await c.list(resource_path("", "v1", "events", "default"),
                              fieldSelector="involvedObject.name=p")
        assert [e["reason"] for e in events["items"]] == ["Scheduled"]


async def _a_pod_is_scheduled(c: Client) -> None:
    """Pod ``p`` is bound to node ``n1``, both made here, by the components' scheduler (once
    the node lifecycle controller took off the not-ready taint the node was created with: the
    pod is scheduled at its first try). The servers check their nodes every 0.2 s
    (``NODE_MONITOR``), not 5: the taint comes off at once."""
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    await c.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await c.patch("/api/v1/nodes/n1/status", {"status": {"capacity": alloc, "allocatable": alloc}})
    deadline = time.monotonic() + 30
    while (await c.get("/api/v1/nodes/n1"))["spec"].get("taints"):
        assert time.monotonic() < deadline, "the node kept its not-ready taint"
        await asyncio.sleep(0.1)
    await c.create(resource_path("", "v1", "pods", "default"), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    deadline = time.monotonic() + 30
    while not (await c.get(resource_path("", "v1", "pods", "default", "p")))["spec"].get("nodeName"):
        assert time.monotonic() < deadline, "the pod was not scheduled"
        await asyncio.sleep(0.1)


def _all_gone(pids: list[int]) -> None:
    """The workers exit with the first process (within 10 s)."""
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


async def _stop_with_watches_open(s: Serve) -> int:
    """SIGTERM to the first process while eight watches (over both processes) hold their
    graceful shutdowns for the 2 s grace period; its exit code."""
    clients = [await _fresh(s.kubeconfig) for _ in range(8)]

    async def hold(c: Client) -> None:
        with contextlib.suppress(Exception):  # the server ends them as it stops
            async for _ in c.watch(CONFIGMAPS):
                pass

    watches = [asyncio.create_task(hold(c)) for c in clients]
    try:
        await asyncio.sleep(0.5)  # open by now
        return await asyncio.to_thread(s.stop)
    finally:
        for task in watches:
            task.cancel()
        for c in clients:
            await c.aclose()


def test_two_workers_share_the_port_and_the_store(tmp_path: Path) -> None:
    s = start_serve(tmp_path, extra=["--workers", "2", *NODE_MONITOR], scheduler=True)
    children: list[int] = []
    code = None
    try:
        s.wait_ready()
        children = _server_children(s.proc.pid)
        assert len(children) == 1
        asyncio.run(_exercise(s.kubeconfig))
        code = asyncio.run(_stop_with_watches_open(s))
    finally:
        if s.proc.poll() is None:
            code = s.stop()
    assert code == 0, s.output()
    _all_gone(children)
    # the worker was told to stop with the first process, not after it had finished (which
    # took one grace period per process, watches holding each)
    out = s.output()
    assert out[:out.index(f"Finished server process [{s.proc.pid}]")].count("Shutting down") == 2, out


def test_a_worker_that_dies_is_replaced(tmp_path: Path) -> None:
    s = start_serve(tmp_path, extra=["--workers", "2"])
    children: list[int] = []
    try:
        s.wait_ready()
        first = _server_children(s.proc.pid)
        assert len(first) == 1
        os.kill(first[0], 9)
        deadline = time.monotonic() + 30
        while True:  # the first process starts another, which joins the port once its store is open
            children = [c for c in _server_children(s.proc.pid) if _alive(c)]
            if children and children != first:
                break
            assert time.monotonic() < deadline, s.output()
            time.sleep(0.1)
        assert "worker" in s.output() and "starting another" in s.output()
        asyncio.run(_exercise_briefly(s.kubeconfig))
    finally:
        code = s.stop()
    assert code == 0, s.output()
    _all_gone(children)


async def _exercise_briefly(kubeconfig: Path) -> None:
    """Writes and reads over fresh connections, spread over both processes, all answered."""
    for i in range(20):
        async with Client.from_kubeconfig(kubeconfig) as c:
            await c.create(CONFIGMAPS, {"metadata": {"name": f"after-{i}"}, "data": {}})
    async with Client.from_kubeconfig(kubeconfig) as c:
        names = {cm["metadata"]["name"] for cm in (await c.list(CONFIGMAPS))["items"]}
    assert {f"after-{i}" for i in range(20)} <= names


def test_a_components_process_that_dies_is_replaced(tmp_path: Path) -> None:
    """``--components-process`` killed: the first process starts the components again (the
    scheduler binds a pod created after), where they were gone for good, /readyz still ok."""
    s = start_serve(tmp_path, extra=["--components-process", *NODE_MONITOR], scheduler=True)
    children: list[int] = []
    try:
        s.wait_ready()
        first = _server_children(s.proc.pid)
        assert len(first) == 1
        os.kill(first[0], 9)
        deadline = time.monotonic() + 30
        while True:
            children = [c for c in _server_children(s.proc.pid) if _alive(c)]
            if children and children != first:
                break
            assert time.monotonic() < deadline, s.output()
            time.sleep(0.1)
        assert "components process" in s.output() and "starting another" in s.output()

        async def scheduled() -> None:
            async with await _fresh(s.kubeconfig) as c:
                await _a_pod_is_scheduled(c)

        asyncio.run(scheduled())
    finally:
        code = s.stop()
    assert code == 0, s.output()
    _all_gone(children)
