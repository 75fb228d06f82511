"""``controlplane bench scheduler``: pods scheduled per second and create-to-bound latency.

Mirrors kube-scheduler's scheduler_perf SchedulingBasic: ``--nodes`` nodes
(4 cpu, 32 GiB, 110 pods each) and ``--pods`` pods (100m cpu, 500 MiB), all
created through the API of a ``controlplane serve`` in its own process, plain
HTTP, its scheduler inside it (``--components-process``: in the process
``serve --components-process`` forks for its components; ``--external-scheduler``:
``controlplane scheduler`` in a third process). Pods are created by ``--connections``
concurrent clients while the scheduler runs; a watch on pods sees each binding
commit. Reported: pods/s (pods bound / from the first create to the last
binding), p50/p99 create-to-bound, the create rate (the ceiling the API puts on
the first figure), and the invariant check: no node holds more than its
allocatable (and with ``--gang-size``, no gang partly bound nor spread over
racks). Exit 1 if an invariant is broken or pods were left unbound.

``--gang-size K --racks R``: nodes labelled ``rack=r0..`` in R racks; pods in
PodGroups of K (minCount K) with ``schedulingConstraints.topology: [{key: rack}]``.

``--replication-controllers K``: pods owned by K ReplicationControllers (which exist;
no controller of them runs in this server, so none adds or deletes pods) on nodes in
3 zones: PodTopologySpread's default constraints apply to every pod, as to a
Deployment's. Reported too: the most replicas of one controller on a node.

``--dra``: the DRA workload (``bench dra --api``, ``controlplane/bench/dra_api.py``):
pods claiming whole GPUs or partitions on nodes of partitionable GPUs, checked for
double allocation.

On two shared cores the numbers are noisy: quote medians of a few runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from . import help_text

BENCH = "scheduler"


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 3), "unit": unit, **extra}), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _node(i: int, racks: int, zones: int = 0) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": f"node-{i}"}
    if racks:
        labels["rack"] = f"r{i % racks}"
    if zones:
        labels["topology.kubernetes.io/zone"] = f"zone-{i % zones}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": labels},
            "status": {"capacity": alloc, "allocatable": alloc}}


def _pod(i: int, group: str | None, owners: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": {
        "requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    meta: dict[str, Any] = {"name": f"pod-{i}", "namespace": "default", "labels": {"app": "bench"}}
    if owners:  # owned by ReplicationController rc-j (uid owners[j]): the spread defaults apply
        j = i % len(owners)
        meta["labels"] = {"app": f"rc-{j}"}
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ReplicationController", "name": f"rc-{j}",
                                    "uid": owners[j], "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _replication_controller(j: int, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": f"rc-{j}", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"app": f"rc-{j}"},
                     "template": {"metadata": {"labels": {"app": f"rc-{j}"}}, "spec": {"containers": [
                         {"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}}


def _http(method: str, path: str, body: Any, content_type: str = "application/json") -> bytes:
    data = orjson.dumps(body)
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n")
    return head.encode() + data


async def _send_all(port: int, n: int, limit: int, requests: Any, on_start: Any = None) -> None:
    """Send ``requests(i)`` (a list of raw HTTP/1.1 requests, in order) for i in 0..n-1 over
    ``limit`` keep-alive connections: a bare asyncio client, as httpx's per-request cost
    would make the load generator the bottleneck on two cores."""
    from .api import _Conn

    it = iter(range(n))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = _Conn(reader, writer)
        try:
            for i in it:
                if on_start is not None:
                    on_start(i)
                for req in requests(i):
                    status = await conn.request(req)
                    if status >= 300:
                        raise RuntimeError(f"HTTP {status} for {req[:80]!r}")
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(limit)))


async def watch_bindings(c: Any, path: str, rv: str, want: int, bound: dict[str, float],
                         done: asyncio.Event) -> None:
    """Record in ``bound`` when each pod under ``path`` is first seen with a node (its
    binding's commit, as a watch from ``rv`` delivers it); set ``done`` at ``want`` pods."""
    async for ev in c.watch(path, resource_version=rv):
        obj = ev.object
        name = obj.get("metadata", {}).get("name")
        if ev.type == "MODIFIED" and obj.get("spec", {}).get("nodeName") and name not in bound:
            bound[name] = time.perf_counter()
            if len(bound) >= want:
                done.set()
                return


def _start_profiler(out: str, pid: int) -> subprocess.Popen[bytes]:
    """py-spy sampling the server until SIGINT: raw collapsed stacks of whichever thread holds the
    GIL (what the process spends its CPU on; a thread waiting for the GIL is not counted). Its
    standard error is a pipe, read by ``_stop_profiler`` (a few lines: it counts its sampling
    errors rather than printing each)."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(spy if spy.exists() else "py-spy"), "record", "--pid", str(pid), "--rate", "100",
                             "--gil", "--format", "raw", "--output", out, "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop_profiler(spy: subprocess.Popen[bytes], out: str) -> None:
    """Stop py-spy (it writes its file on SIGINT); a file it left empty or did not write is said
    on stderr, with py-spy's last word: a phase over before it attached, or a pid it may not trace."""
    spy.send_signal(signal.SIGINT)
    _, said = spy.communicate(timeout=60)
    path = Path(out)
    if path.is_file() and path.stat().st_size:
        return
    last = next((line.strip() for line in reversed((said or b"").decode(errors="replace").splitlines())
                 if line.strip()), "")
    print(f"controlplane bench scheduler: --profile {out}: py-spy recorded nothing (exit {spy.returncode}"
          f"{': ' + last if last else ''}); the pods' phase may have ended before it attached", file=sys.stderr)


async def _run(args: argparse.Namespace, port: int, server_pid: int) -> dict[str, Any]:
    from controlplane.client import Client

    c = Client(f"http://127.0.0.1:{port}", timeout=120.0)
    try:
        t0 = time.perf_counter()

        def node_requests(i: int) -> list[bytes]:
            n = _node(i, args.racks, 3 if args.replication_controllers else 0)
            return [_http("POST", "/api/v1/nodes", {k: v for k, v in n.items() if k != "status"}),
                    _http("PATCH", f"/api/v1/nodes/node-{i}/status", {"status": n["status"]},
                          "application/merge-patch+json")]

        await _send_all(port, args.nodes, args.connections, node_requests)
        node_secs = time.perf_counter() - t0
        groups: list[str] = []
        if args.gang_size:
            groups = [f"gang-{g}" for g in range((args.pods + args.gang_size - 1) // args.gang_size)]

            def group_requests(g: int) -> list[bytes]:
                return [_http("POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups", {
                    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": groups[g], "namespace": "default"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": args.gang_size}},
                             "schedulingConstraints": {"topology": [{"key": "rack"}]}}})]

            await _send_all(port, len(groups), args.connections, group_requests)
        owners: list[str] = []
        for j in range(args.replication_controllers):
            made = await c.create("/api/v1/namespaces/default/replicationcontrollers",
                                  _replication_controller(j, args.pods // args.replication_controllers))
            owners.append(made["metadata"]["uid"])
        listed = await c.list("/api/v1/namespaces/default/pods", limit=1)
        rv = listed["metadata"]["resourceVersion"]
        created: dict[str, float] = {}
        bound: dict[str, float] = {}
        done = asyncio.Event()

        watcher = asyncio.create_task(watch_bindings(c, "/api/v1/namespaces/default/pods", rv, args.pods, bound,
                                                     done))
        await asyncio.sleep(0.2)  # the watch is open before the first create
        t_create = time.perf_counter()

        bodies = [_http("POST", "/api/v1/namespaces/default/pods",
                        _pod(i, groups[i // args.gang_size] if args.gang_size else None, owners))
                  for i in range(args.pods)]

        def started(i: int) -> None:
            created[f"pod-{i}"] = time.perf_counter()

        spy = _start_profiler(args.profile, server_pid) if args.profile else None
        await _send_all(port, args.pods, args.connections, lambda i: (bodies[i],), started)
        create_secs = time.perf_counter() - t_create
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), args.timeout)
        watcher.cancel()
        if spy is not None:  # the pods' phase only
            _stop_profiler(spy, args.profile)
        end = max(bound.values(), default=time.perf_counter())
        lat = [bound[n] - created[n] for n in bound if n in created]
        pods = (await c.list("/api/v1/namespaces/default/pods"))["items"]
        nodes = (await c.list("/api/v1/nodes"))["items"]
        return {"node_secs": node_secs, "create_secs": create_secs, "sched_secs": end - t_create,
                "bound": len(bound), "lat": lat, "pods": pods, "nodes": nodes}
    finally:
        await c.aclose()


def check_invariants(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], gang_size: int) -> dict[str, int]:
    """Nodes over allocatable; gangs partly bound; gangs spread over several racks."""
    from controlplane.scheduler.nodeinfo import pod_requests, resource_amount

    alloc = {n["metadata"]["name"]: {k: resource_amount(k, v) for k, v in (n.get("status") or {}).get(
        "allocatable", {}).items()} for n in nodes}
    rack = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get("rack") for n in nodes}
    used: dict[str, dict[str, int]] = {}
    groups: dict[str, list[str | None]] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        g = (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if g:
            groups.setdefault(g, []).append(node)
        if not node:
            continue
        u = used.setdefault(node, {})
        req = pod_requests(p["spec"])
        req["pods"] = 1
        for k, v in req.items():
            u[k] = u.get(k, 0) + v
    over = sum(1 for n, u in used.items() if any(v > alloc.get(n, {}).get(k, 0) for k, v in u.items()))
    partial = sum(1 for members in groups.values() if any(members) and not all(members))
    spread = sum(1 for members in groups.values() if len({rack.get(m) for m in members if m}) > 1)
    return {"nodes_over_allocatable": over, "partial_gangs": partial, "gangs_across_racks": spread,
            "gangs_bound": sum(1 for m in groups.values() if m and all(m))}


def start_server(work: Path, port: int, extra: list[str]) -> subprocess.Popen[bytes]:
    """``controlplane serve --no-tls`` on ``port`` with its state in ``work``, once ready."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "controlplane", "serve", "--port", str(port), "--data-dir", str(work / "data"),
         "--kubeconfig-out", str(work / "kubeconfig"), "--log-level", "warning", "--no-tls", *extra],
        cwd=work, stdout=subprocess.DEVNULL)
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the server did not become ready")
        time.sleep(0.1)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="cp-bench-sched-"))
    procs: list[subprocess.Popen[bytes]] = []
    port = _free_port()
    try:
        # as scheduler_perf's API server: no TaintNodesByCondition, whose taint the node lifecycle
        # controller would take off each node (a write a node, none of the scheduler's work)
        extra = ["--disable-admission-plugins", "TaintNodesByCondition"]
        if args.external_scheduler:
            extra.append("--no-scheduler")
        if args.components_process:
            extra.append("--components-process")
        extra += ["--http-protocol", args.http_protocol]
        procs.append(start_server(work, port, extra))

        if args.external_scheduler:  # it watches from the start, as it would in a cluster
            # (no metrics endpoint, nor its loop-lag timer: measured as before it had them)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "controlplane", "scheduler", "--kubeconfig", str(work / "kubeconfig"),
                 "--log-level", "warning", "--metrics-address", "off"], cwd=work, stdout=subprocess.DEVNULL))
        r = asyncio.run(_run(args, port, procs[0].pid))
        inv = check_invariants(r["pods"], r["nodes"], args.gang_size)
        where = "external" if args.external_scheduler else "components-process" if args.components_process else "serve"
        shape = {"nodes": args.nodes, "pods": args.pods, "scheduler": where, "http_protocol": args.http_protocol}
        if args.replication_controllers:
            shape["replication_controllers"] = args.replication_controllers
        if args.gang_size:
            shape.update(gang_size=args.gang_size, racks=args.racks)
        rate = r["bound"] / r["sched_secs"] if r["sched_secs"] > 0 else 0.0
        emit("pods_scheduled_per_s", rate, "1/s", bound=r["bound"], **shape)
        emit("create_to_bound_p50", _p(r["lat"], 0.5) * 1000, "ms", **shape)
        emit("create_to_bound_p99", _p(r["lat"], 0.99) * 1000, "ms", **shape)
        emit("pod_creates_per_s", args.pods / r["create_secs"], "1/s", connections=args.connections, **shape)
        emit("nodes_over_allocatable", inv["nodes_over_allocatable"], "nodes", **shape)
        emit("pods_unbound", args.pods - r["bound"], "pods", **shape)
        if args.replication_controllers:
            per = Counter(((p["metadata"].get("labels") or {}).get("app"), p["spec"].get("nodeName"))
                          for p in r["pods"] if p["spec"].get("nodeName"))
            emit("most_replicas_of_one_controller_on_a_node", max(per.values(), default=0), "pods", **shape)
        if args.gang_size:
            emit("partial_gangs", inv["partial_gangs"], "gangs", **shape)
            emit("gangs_across_racks", inv["gangs_across_racks"], "gangs", **shape)
            emit("gangs_bound", inv["gangs_bound"], "gangs", **shape)
        bad = inv["nodes_over_allocatable"] or inv["partial_gangs"] or inv["gangs_across_racks"]
        return 1 if bad or r["bound"] < args.pods else 0
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench scheduler", description=help_text(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # the sizes' defaults, and --quick's: a size given on the command line wins over both
    p.add_argument("--nodes", type=int, help="(default: 5,000; --quick: 500)")
    p.add_argument("--pods", type=int, help="(default: 10,000; --quick: 1,000)")
    p.add_argument("--gang-size", type=int, default=0, help="pods per PodGroup (0: no gangs)")
    p.add_argument("--racks", type=int, default=50, help="with --gang-size: racks (topology domains)")
    p.add_argument("--connections", type=int, default=32, help="concurrent creating clients")
    p.add_argument("--replication-controllers", type=int, default=0, metavar="K",
                   help="pods owned by K ReplicationControllers, nodes in 3 zones: PodTopologySpread's default "
                        "constraints apply (0: bare pods)")
    p.add_argument("--external-scheduler", action="store_true",
                   help="run 'controlplane scheduler' in its own process (serve --no-scheduler)")
    p.add_argument("--components-process", action="store_true",
                   help="serve --components-process: the scheduler in the process serve forks for its components")
    p.add_argument("--timeout", type=float, default=300.0, help="give up waiting for bindings after this")
    p.add_argument("--quick", action="store_true", help="500 nodes, 1,000 pods, unless --nodes or --pods say otherwise")
    p.add_argument("--http-protocol", choices=("controlplane", "uvicorn"), default="controlplane",
                   help="serve --http-protocol (default: %(default)s)")
    p.add_argument("--profile", metavar="FILE",
                   help="py-spy the server while the pods are created and scheduled (raw collapsed stacks to FILE)")
    p.add_argument("--dra", action="store_true",
                   help="issue 5's DRA workload instead: 'bench dra --api' (1,000 nodes x 8 partitionable GPUs, "
                        "20,000 pods unless --nodes/--pods say otherwise)")
    args = p.parse_args(argv)
    if args.dra:
        from . import dra_api

        nodes = ["--nodes", str(args.nodes)] if args.nodes is not None else []  # else the DRA workload's own
        pods = ["--pods", str(args.pods)] if args.pods is not None else []
        where = ["--components-process"] if args.components_process else []
        return dra_api.run(["--api", *nodes, *pods, *where, "--connections", str(args.connections),
                            "--timeout", str(max(args.timeout, 600.0))])
    if args.nodes is None:
        args.nodes = 500 if args.quick else 5000
    if args.pods is None:
        args.pods = 1000 if args.quick else 10_000
    if not args.gang_size:
        args.racks = 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
