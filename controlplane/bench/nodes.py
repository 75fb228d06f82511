"""``controlplane bench nodes``: simulated nodes' heartbeats and pod startup, with the
API server, its LMDB store and the node simulator in one process (as ``controlplane
serve --nodes N`` runs them).

1. ``--nodes`` nodes are created (with their Leases) through the in-process client;
2. for ``--heartbeat-seconds`` only heartbeats run: the lease renew lag (due ->
   written) p50/p99/max and the process CPU per second of wall time, less the
   same measure with no nodes (``cpu_idle``), is the server's (and simulator's)
   cost of the heartbeats; measured with renewals sent in bulk (``LeaseRenewal``,
   ``api/leaserenewals.py``), then, as the peer, with a PUT per Lease (``--renewals``);
3. pods bound to the nodes (``spec.nodeName`` set, no scheduler) are created at
   ``--pod-rate`` per second for ``--pod-seconds``; each pod's startup latency is
   from its create call to a watch event showing it Running (image cached, the
   default fast stages; the kubelet's pod events only with ``--pod-events``);
4. with ``--hold-seconds``, the heartbeats are measured again for that long with
   those pods held Running (issue 6: a million pods on 100,000 nodes), and the
   process's resident memory.

Prints JSON lines like every benchmark; exits 1 if a pod's create failed or a pod was not
seen Running within ``RUNNING_WAIT`` seconds of the last create (``errors``, ``not_running``).
Other processes share this machine's two cores: expect noise, compare medians of several runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from . import help_text

BENCH = "nodes"
RUNNING_WAIT = 30.0  # seconds after the last create for every pod to be seen Running


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 4), "unit": unit, **extra}),
          flush=True)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _cpu_per_second(seconds: float) -> float:
    c0, t0 = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    return (time.process_time() - c0) / (time.monotonic() - t0)


def _helpers_cpu() -> float:
    """CPU seconds of this process's children: the store's applier and syncer (LMDB's
    helper processes), whose work the process's own CPU time leaves out."""
    from .nodes_api import _cpu_of

    pid = os.getpid()
    try:
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return 0.0
    return sum(_cpu_of(c) for c in children)


async def run(args: argparse.Namespace) -> int:
    """The steps; the exit code (1: pods whose create failed or that did not run)."""
    from ..api.app import create_app
    from ..client import Client, resource_path
    from ..config import Config
    from ..nodes.config import SimConfig
    from ..nodes.simulator import NodeSimulator

    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp:
        app = create_app(Config(data_dir=Path(tmp) / "data", tls=False, log_level="warning"))
        async with app.router.lifespan_context(app), Client.in_process(app.state.front) as own:
            # the simulator shares the components' client, as ``serve --nodes N`` runs it: one
            # informer of nodes and one of pods (one parsed copy of each) for it, the scheduler and
            # the controllers. (Until 2026-12-02 it had a client of its own, and so a second copy.)
            client = app.state.server.components_client or own
            # the first seconds after start are the components' start (informers listing, the
            # scheduler and controllers syncing): 0.09 cores against 0.013 after, which made the
            # heartbeats' share come out below zero (reported 0) at 10,000 nodes. Measured once
            # that is over.
            await _cpu_per_second(3.0)
            idle = await _cpu_per_second(min(3.0, args.heartbeat_seconds))
            emit("cpu_idle", idle, "cores", note="the server alone, no nodes, after 3 s of start")
            sim = NodeSimulator(client, SimConfig(count=args.nodes, renew_interval=args.renew_interval,
                                                  job_seconds=3600.0, write_concurrency=args.concurrency,
                                                  pod_events=args.pod_events, node_events=args.node_events,
                                                  csi_nodes=args.csi_nodes))
            t0, cpu0 = time.monotonic(), time.process_time() + _helpers_cpu()
            task = asyncio.create_task(sim.run())
            await sim.ready()
            created = time.monotonic() - t0
            emit("nodes_created", args.nodes, "nodes", seconds=round(created, 2),
                 per_second=round(args.nodes / created, 1))
            # leases and node status are still being written: wait for the backlog to drain,
            # then a whole interval, so the measure sees the steady state
            deadline = time.monotonic() + max(60.0, args.nodes / 50)
            node_events = sim.node_events.recorder if sim.node_events is not None else None
            while (sim.pending_writes() > 10 or (node_events is not None and node_events.pending)) \
                    and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            setup = time.monotonic() - t0
            emit("setup_backlog_drained", setup, "s", pending=sim.pending_writes())
            spent = time.process_time() + _helpers_cpu() - cpu0 - idle * setup
            emit("cpu_per_node", spent / max(1, args.nodes) * 1000, "ms", csi_nodes=args.csi_nodes,
                 node_events=args.node_events,
                 note="process CPU (and the store's helpers') from the simulator's start to the drained backlog, "
                      "less cpu_idle: the Node, its Lease, its status, its CSINode and their watch events, and "
                      "with --node-events the kubelet's events about the node (written by then)")
            if node_events is not None:
                emit("node_events_dropped", node_events.dropped, "events", nodes=args.nodes,
                     note="kubelet node events not written: past NODE_EVENTS_PENDING queued")
            await asyncio.sleep(args.renew_interval + args.settle_seconds)
            bulk = sim.bulk_renewals
            modes = ([True] if bulk else []) + ([False] if args.renewals == "both" or not bulk else [])
            if args.renewals == "put":
                modes = [False]
            cpu = idle
            for i, bulk_mode in enumerate(modes):
                sim.bulk_renewals = bulk_mode
                if i:
                    await asyncio.sleep(args.renew_interval / 2)  # the other mode's last writes settle
                cpu = await _heartbeats(sim, args, idle, "LeaseRenewal" if bulk_mode else "PUT")
            sim.bulk_renewals = bulk

            if args.pod_rate > 0 and args.pod_seconds > 0:
                c0, w0 = time.process_time(), time.monotonic()
                backlog = asyncio.create_task(_cache_backlog(app.state.server.caches))
                pods, failed = await _pods(client, resource_path, args)
                events = await _events_written(sim)
                backlog.cancel()
                most, reread = await backlog
                mem = _memory_kib()
                emit("watch_cache_backlog_max", most, "events", reread=reread,
                     note="the most events one cache had queued, sampled each second while the pods were "
                          "created; reread: events caches read back from the store instead (past 100,000)")
                emit("rss_after_pods", mem.get("VmRSS", 0) / 1024, "MiB", pods=pods, nodes=args.nodes)
                if pods:
                    # less what the heartbeats and the idle server cost meanwhile
                    spent = time.process_time() - c0 - cpu * (time.monotonic() - w0)
                    emit("cpu_per_pod", max(0.0, spent) / pods * 1e3, "ms", pod_events=args.pod_events,
                         note="create, watch events, simulator, Running status write, the bench's watch, "
                              "and with --pod-events the kubelet's events (written by then)")
                if events is not None:
                    emit("kubelet_events_dropped", events, "events", pods=pods,
                         note="pod events not written: past 1,000 queued (as client-go's broadcaster)")
                if args.hold_seconds > 0:
                    await _held(sim, args, idle, pods)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return 1 if failed else 0


def _memory_kib() -> dict[str, int]:
    """This process's resident memory now (VmRSS) and at its peak (VmHWM), in KiB."""
    out = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5]] = int(line.split()[1])
    return out


async def _held(sim: Any, args: argparse.Namespace, idle: float, pods: int) -> None:
    """Step 4 (``--hold-seconds``): the heartbeats again, with the pods of step 3 held Running."""
    await asyncio.sleep(args.renew_interval)  # the last pods' writes settle
    await _heartbeats(sim, args, idle, "LeaseRenewal", seconds=args.hold_seconds, pods_held=pods)
    mem = _memory_kib()
    emit("rss_with_pods_held", mem.get("VmRSS", 0) / 1024, "MiB", peak=round(mem.get("VmHWM", 0) / 1024),
         pods_held=pods, nodes=args.nodes, note="this process: the API server, its watch cache, the components")


async def _cache_backlog(caches: Any) -> tuple[int, int]:
    """Until cancelled: the most events any watch cache had queued (sampled each second), and
    the events the caches read back from the store meanwhile (``ResourceCache._read_gap``)."""
    reread0 = sum(c.reread for c in caches.caches())
    most = 0
    try:
        while True:
            most = max([most, *(c.queued for c in caches.caches())])
            await asyncio.sleep(1.0)
    except asyncio.CancelledError:
        return most, sum(c.reread for c in caches.caches()) - reread0


async def _heartbeats(sim: Any, args: argparse.Namespace, idle: float, mode: str, seconds: float | None = None,
                      **extra: Any) -> float:
    """Measure heartbeats alone for ``seconds`` (``--heartbeat-seconds``), renewals sent as ``mode``
    (``LeaseRenewal``: in bulk; ``PUT``: one update per Lease); the process CPU per second.
    ``extra`` goes into each figure (``pods_held``: step 4)."""
    seconds = args.heartbeat_seconds if seconds is None else seconds
    sim.record_lags = True
    sim.lease_lags.clear()
    renewals0 = sim.lease_renewals
    helpers0, wall0 = _helpers_cpu(), time.monotonic()
    cpu: float = await _cpu_per_second(seconds)
    helpers = (_helpers_cpu() - helpers0) / (time.monotonic() - wall0)
    sim.record_lags = False
    lags = list(sim.lease_lags)
    rate = (sim.lease_renewals - renewals0) / seconds
    emit("lease_renewals_per_second", rate, "1/s", nodes=args.nodes, interval=args.renew_interval, mode=mode,
         **extra)
    emit("lease_renew_lag_p50", _pct(lags, 0.5), "s", mode=mode, **extra)
    emit("lease_renew_lag_p99", _pct(lags, 0.99), "s", target=2.0, mode=mode, **extra)
    emit("lease_renew_lag_max", max(lags, default=float("nan")), "s", mode=mode, **extra)
    emit("heartbeat_cpu", max(0.0, cpu - idle), "cores", target=0.15, total=round(cpu, 3), nodes=args.nodes,
         mode=mode, store_helpers=round(helpers, 3), **extra,
         note="process CPU per wall second while only heartbeats run, less cpu_idle; store_helpers: the "
              "LMDB applier's and syncer's processes besides")
    if rate:
        # the target: 100,000 nodes' renewals (10,000/s at 10 s) in 0.15 cores
        emit("heartbeat_cpu_per_renewal", max(0.0, cpu - idle) / rate * 1e6, "us", mode=mode, target=15.0,
             with_store_helpers=round((max(0.0, cpu - idle) + helpers) / rate * 1e6, 1), **extra)
    return cpu


async def watch_running(client: Any, pods: str, rv: str, sent: dict[str, float], latencies: list[float],
                        total: int, done: asyncio.Event) -> None:
    """Each pod of ``sent`` (name -> when its create was sent) seen Running adds its startup
    latency to ``latencies``; ``done`` is set at ``total``."""
    async for ev in client.watch(pods, resource_version=rv):
        obj = ev.object
        name = obj.get("metadata", {}).get("name")
        if name in sent and obj.get("status", {}).get("phase") == "Running":
            latencies.append(time.monotonic() - sent.pop(name))
            if len(latencies) >= total:
                done.set()
                return


async def _events_written(sim: Any, timeout: float = 30.0) -> int | None:
    """Until the kubelet's pod events queued are written (their CPU then counts with the pods');
    how many were dropped. None without pod events."""
    if sim.pod_events is None:
        return None
    recorder = sim.pod_events.recorder
    deadline = time.monotonic() + timeout
    while recorder.pending and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    return int(recorder.dropped)


async def _pods(client: Any, resource_path: Any, args: argparse.Namespace) -> tuple[int, int]:
    """Create pods at the rate asked for and time each from its create call to a watch event showing
    it Running (the in-process client's creates go straight into the app: what a client in another
    process would cost the server, about); (pods seen Running, pods whose create failed or not)."""
    pods = resource_path("", "v1", "pods", "default")
    sent: dict[str, float] = {}
    latencies: list[float] = []
    total = int(args.pod_rate * args.pod_seconds)
    done = asyncio.Event()
    listed = await client.list(pods, limit=1)

    watcher = asyncio.create_task(watch_running(client, pods, listed["metadata"]["resourceVersion"], sent,
                                                latencies, total, done))
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod"}
    errors = 0
    inflight: set[asyncio.Task[Any]] = set()

    async def create(i: int) -> None:
        nonlocal errors
        name = f"bench-{i}"
        b: dict[str, Any] = {**body, "metadata": {"name": name},
                             "spec": {**spec, "nodeName": f"sim-node-{i % args.nodes}"}}
        sent[name] = time.monotonic()
        try:
            await client.create(pods, b)
        except Exception:
            errors += 1
            sent.pop(name, None)

    t0 = time.monotonic()
    for i in range(total):
        due = t0 + i / args.pod_rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        t = asyncio.create_task(create(i))
        inflight.add(t)
        t.add_done_callback(inflight.discard)
    sent_seconds = time.monotonic() - t0
    await asyncio.gather(*inflight)
    with contextlib.suppress(TimeoutError):  # the p99 then reports the pods that made it
        await asyncio.wait_for(done.wait(), timeout=RUNNING_WAIT)
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    emit("pod_create_rate", total / sent_seconds, "1/s", target=args.pod_rate, errors=errors,
         pod_events=args.pod_events)
    emit("pod_startup_p50", _pct(latencies, 0.5), "s", pods=len(latencies))
    emit("pod_startup_p99", _pct(latencies, 0.99), "s", target=1.0, pods=len(latencies),
         not_running=total - errors - len(latencies))
    if latencies:
        emit("pod_startup_mean", statistics.fmean(latencies), "s")
    return len(latencies), total - len(latencies)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="controlplane bench nodes", description=help_text(__doc__, first=True))
    parser.add_argument("--nodes", type=int, default=10_000, help="simulated nodes (default: %(default)s)")
    parser.add_argument("--renew-interval", type=float, default=10.0,
                        help="seconds (in process only: serve's simulator renews every 10 s; default: %(default)s)")
    parser.add_argument("--heartbeat-seconds", type=float, default=12.0,
                        help="how long to measure heartbeats alone (default: %(default)s)")
    parser.add_argument("--settle-seconds", type=float, default=0.0,
                        help="wait this long more before measuring the heartbeats (300: past every node's first "
                             "periodic status report, due 150-300 s after it joined and written the whole way, "
                             "where later ones are spliced: the steady state; default: %(default)s)")
    parser.add_argument("--pod-rate", type=float, default=1000.0, help="pod creates per second (default: %(default)s)")
    parser.add_argument("--pod-seconds", type=float, default=5.0, help="how long to create pods (default: %(default)s)")
    parser.add_argument("--hold-seconds", type=float, default=0.0,
                        help="then measure the heartbeats again for this long, with the pods held Running "
                             "(in process only; default: %(default)s, not measured)")
    parser.add_argument("--renewals", choices=("both", "bulk", "put"), default="both",
                        help="measure heartbeats as LeaseRenewals (bulk), as a PUT per Lease, or both, bulk "
                             "first (put in process only; default: %(default)s)")
    parser.add_argument("--components-process", action="store_true",
                        help="serve --nodes N --components-process: the simulator in a process of its own, over "
                             "HTTP, and the pods created over HTTP (bench/nodes_api.py)")
    parser.add_argument("--concurrency", type=int, default=64, help="simulator writes in flight (default: %(default)s)")
    parser.add_argument("--pod-events", action="store_true",
                        help="the simulated kubelets record their Events about the pods' containers, as serve "
                             "does by default (three a pod here: Pulled, Created, Started); off by default, as "
                             "serve --no-pod-events, so that the figures compare with those before them")
    parser.add_argument("--node-events", action="store_true",
                        help="the simulated kubelets record their Events about their nodes, as serve does by "
                             "default (six a node at registration: Starting, three conditions, "
                             "NodeAllocatableEnforced, NodeReady); off by default, as serve --no-node-events, so "
                             "that the figures compare with those before them")
    parser.add_argument("--csi-nodes", action="store_true",
                        help="the simulated kubelets register a CSINode with each Node, as serve's do by default "
                             "(about 0.3 ms of CPU and 7 KB of memory a node more at 2,000 nodes); off by default, "
                             "so that the figures compare with those before them")
    args = parser.parse_args(argv)
    if args.components_process:
        # the simulator is serve's there, which renews every 10 s in bulk and takes no such options:
        # the figures would be computed for an interval or a mode that did not run
        for given, option in ((args.renew_interval != 10.0, "--renew-interval"),
                              (args.hold_seconds > 0, "--hold-seconds"), (args.renewals == "put", "--renewals put")):
            if given:
                parser.error(f"{option} is for the simulator in this process; with --components-process the "
                             "simulator is serve's (its Leases renewed every 10 s, in bulk)")
    logging.basicConfig(level=logging.WARNING)
    if args.components_process:
        from .nodes_api import run as run_components_process

        return run_components_process(args)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    return asyncio.run(run(args))
