"""``controlplane bench nodes --components-process``: simulated nodes' heartbeats and pod
startup with the node simulator in a process of its own, as ``controlplane serve
--nodes N --components-process`` runs it (the server's components, the simulator
among them, as clients over HTTP in the process serve forks; no scheduler: the pods
name their node).

1. ``serve`` creates ``--nodes`` nodes at start; the benchmark waits until every
   node and its Lease exist, then one more renew interval;
2. for ``--heartbeat-seconds`` only heartbeats run: the CPU of both processes
   (from ``/proc``), and the server's alone (the target: serve and its store's
   applier and syncer processes), less ``cpu_idle`` (the same processes with
   ``--nodes 0``, measured first), per renewal; then the age of every Lease's ``renewTime`` (the
   interval plus the renew lag: the simulator's own lag histogram is in the other
   process);
3. pods naming a node are created at ``--pod-rate`` per second for
   ``--pod-seconds`` over keep-alive connections of a bare asyncio client (httpx's
   per-request cost would make this process the bottleneck); each pod's startup
   is from its create request's send to a watch event showing it Running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from . import nodes as in_process
from .nodes import _pct, emit, watch_running
from .scheduler import _free_port, _http, start_server, stop_all

__all__ = ["run"]

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    return 0.0


def _is_components(pid: int) -> bool:
    """Whether a child of serve is its components process (serve forked again), not one
    of the store's helpers (``store.lmdb`` applier and syncer: the server's own work)."""
    with contextlib.suppress(OSError):
        return b"controlplane" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _cpu_parts(pid: int) -> tuple[float, float, float]:
    """User and system CPU of serve's own process (``pid``), of its store's helper
    processes (the LMDB applier and syncer) and of its components process, those still
    running."""
    children = []
    with contextlib.suppress(OSError):
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    components = [c for c in children if _is_components(c)]
    helpers = sum(_cpu_of(c) for c in children if c not in components)
    return _cpu_of(pid), helpers, sum(_cpu_of(c) for c in components)


def _cpu_split(pid: int) -> tuple[float, float]:
    """The server's CPU (serve's process and its store's helpers) and the components process's."""
    own, helpers, components = _cpu_parts(pid)
    return own + helpers, components


async def _cpu_per_second(pid: int, seconds: float) -> tuple[float, float, float]:
    """CPU per wall second over ``seconds``: serve's process, its store's helpers, the components process."""
    c0, t0 = _cpu_parts(pid), time.monotonic()
    await asyncio.sleep(seconds)
    c1, wall = _cpu_parts(pid), time.monotonic() - t0
    return (c1[0] - c0[0]) / wall, (c1[1] - c0[1]) / wall, (c1[2] - c0[2]) / wall


async def _wait_nodes(c: Any, count: int, timeout: float) -> float:
    """Seconds until ``count`` nodes and their Leases exist."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        nodes = (await c.list("/api/v1/nodes", limit=1))["metadata"].get("remainingItemCount", -1) + 1
        leases = (await c.list("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", limit=1))[
            "metadata"].get("remainingItemCount", -1) + 1
        if nodes >= count and leases >= count:
            return time.monotonic() - t0
        await asyncio.sleep(1.0)
    raise TimeoutError(f"{count} nodes and leases not there after {timeout} s")


async def _lease_ages(c: Any) -> list[float]:
    """Seconds since each node Lease's renewTime, read in pages."""
    from datetime import datetime

    ages: list[float] = []
    token = ""
    while True:
        page = await c.list("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", limit=5000,
                            **({"continue": token} if token else {}))
        now = time.time()
        for lease in page["items"]:
            renewed = (lease.get("spec") or {}).get("renewTime")
            if renewed:
                ages.append(now - datetime.fromisoformat(renewed.replace("Z", "+00:00")).timestamp())
        token = page["metadata"].get("continue") or ""
        if not token:
            return ages


async def _pods(c: Any, port: int, args: argparse.Namespace) -> tuple[float, list[float], int, int]:
    """Create the pods at the asked rate; (the create rate, startup latencies, pods not Running,
    creates that failed)."""
    from .api import _Conn

    pods = "/api/v1/namespaces/default/pods"
    total = int(args.pod_rate * args.pod_seconds)
    sent: dict[str, float] = {}
    latencies: list[float] = []
    done = asyncio.Event()
    rv = (await c.list(pods, limit=1))["metadata"]["resourceVersion"]

    watcher = asyncio.create_task(watch_running(c, pods, rv, sent, latencies, total, done))
    await asyncio.sleep(0.2)
    bodies = [_http("POST", pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"bench-{i}"},
                                   "spec": {"nodeName": f"sim-node-{i % args.nodes}", "containers": [
                                       {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
              for i in range(total)]
    it = iter(range(total))
    t0 = time.monotonic()
    errors = 0

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = _Conn(reader, writer)
        try:
            for i in it:
                delay = t0 + i / args.pod_rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent[f"bench-{i}"] = time.monotonic()
                if await conn.request(bodies[i]) >= 300:
                    errors += 1
                    sent.pop(f"bench-{i}", None)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    rate = total / (time.monotonic() - t0)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=in_process.RUNNING_WAIT)
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    emit("pod_create_rate", rate, "1/s", target=args.pod_rate, errors=errors, mode="components-process")
    return rate, latencies, total - errors - len(latencies), errors


async def _measure(args: argparse.Namespace, port: int, pid: int, idle: tuple[float, float, float]) -> int:
    """The steps; pods whose create failed or that were not seen Running."""
    from controlplane.client import Client

    c = Client(f"http://127.0.0.1:{port}", timeout=120.0)
    failed = 0
    try:
        waited = await _wait_nodes(c, args.nodes, timeout=max(120.0, args.nodes / 20))
        emit("nodes_ready", waited, "s", nodes=args.nodes, mode="components-process")
        # the nodes' first status posts and stages done (and with --settle-seconds 300 their first
        # periodic status reports, each written the whole way: the later ones are spliced)
        await asyncio.sleep(2 * args.renew_interval + args.settle_seconds)
        own_cpu, helpers_cpu, components_cpu = await _cpu_per_second(pid, args.heartbeat_seconds)
        server_cpu = own_cpu + helpers_cpu
        cpu = server_cpu + components_cpu
        rate = args.nodes / args.renew_interval
        emit("heartbeat_cpu", max(0.0, cpu - sum(idle)), "cores", total=round(cpu, 3), nodes=args.nodes,
             mode="components-process", note="every process's CPU per wall second, heartbeats only, less cpu_idle")
        emit("heartbeat_cpu_per_renewal", max(0.0, cpu - sum(idle)) / rate * 1e6, "us",
             mode="components-process", note="every process")
        # the target is the server's: 100,000 nodes' renewals (10,000/s) in 0.15 of a core
        emit("heartbeat_server_cpu", max(0.0, server_cpu - idle[0] - idle[1]), "cores", target=0.15,
             nodes=args.nodes, mode="components-process", api_process=round(max(0.0, own_cpu - idle[0]), 4),
             store_helpers=round(max(0.0, helpers_cpu - idle[1]), 4),
             note="the API server: its process and its store's applier and syncer, less their idle CPU")
        emit("heartbeat_server_cpu_per_renewal", max(0.0, server_cpu - idle[0] - idle[1]) / rate * 1e6, "us",
             target=15.0, mode="components-process",
             api_process=round(max(0.0, own_cpu - idle[0]) / rate * 1e6, 1),
             store_helpers=round(max(0.0, helpers_cpu - idle[1]) / rate * 1e6, 1))
        ages = await _lease_ages(c)
        # a renewal due every interval and late by its lag: a Lease is at most interval + lag old
        emit("lease_age_p99", _pct(ages, 0.99), "s", target=args.renew_interval + 2.0, leases=len(ages),
             mode="components-process", note="now - renewTime over every Lease: the interval plus the renew lag")
        emit("lease_age_max", max(ages, default=float("nan")), "s", mode="components-process")
        if args.pod_rate > 0 and args.pod_seconds > 0:
            (s0, c0), w0 = _cpu_split(pid), time.monotonic()
            _, latencies, left, errors = await _pods(c, port, args)
            failed = left + errors
            (s1, c1), wall = _cpu_split(pid), time.monotonic() - w0
            if latencies:  # less what the heartbeats and the idle processes cost meanwhile
                per_pod = (s1 - s0 + c1 - c0 - cpu * wall) / len(latencies) * 1e3
                emit("cpu_per_pod", max(0.0, per_pod), "ms", mode="components-process",
                     server_cores=round((s1 - s0) / wall, 3), components_cores=round((c1 - c0) / wall, 3),
                     note="both processes: create, watch events, simulator, Running status write")
            emit("pod_startup_p50", _pct(latencies, 0.5), "s", pods=len(latencies), mode="components-process")
            emit("pod_startup_p99", _pct(latencies, 0.99), "s", target=1.0, pods=len(latencies), not_running=left,
                 mode="components-process")
    finally:
        await c.aclose()
    return failed


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-nodes-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port = _free_port()
        base = ["--no-scheduler", "--components-process", *([] if args.pod_events else ["--no-pod-events"]),
                *([] if args.node_events else ["--no-node-events"]),
                *([] if args.csi_nodes else ["--no-csi-nodes"])]
        for d in ("idle", "run"):
            (work / d).mkdir()
        idle_server = start_server(work / "idle", port, [*base, "--nodes", "0"])
        procs.append(idle_server)
        time.sleep(5.0)  # its start-up done
        idle = asyncio.run(_cpu_per_second(idle_server.pid, min(3.0, args.heartbeat_seconds)))
        emit("cpu_idle", sum(idle), "cores", api_process=round(idle[0], 4), store_helpers=round(idle[1], 4),
             note="every process, no nodes", mode="components-process")
        stop_all(procs)
        procs.clear()
        server = start_server(work / "run", port, [*base, "--nodes", str(args.nodes)])
        procs.append(server)
        return 1 if asyncio.run(_measure(args, port, server.pid, idle)) else 0
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)
