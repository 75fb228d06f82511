"""``controlplane bench dra --api``: DRA end to end, through the API of a real server.

The same cluster as the allocator benchmark (``scheduler.dra.benchdata``: nodes
with 8 partitionable GPUs, each the whole device, two 3g and seven 1g
partitions on shared counters; three DeviceClasses with CEL selectors; claim
templates for a whole GPU, a 3g or a 1g partition), created through the API of
a ``controlplane serve`` in its own process, plain HTTP, its scheduler and
resourceclaim controller inside it. Then pods, each with one claim from a
template (10% whole GPUs, 20% 3g, 70% 1g), are created by ``--connections``
clients; a watch on pods sees each binding commit.

Per pod the server does what kube-apiserver, kube-controller-manager and
kube-scheduler do: the pod's create, its claim created from the template (and
the pod's ``resourceClaimStatuses``), the allocation written into the claim's
status with the pod in ``reservedFor``, the binding, the ``Scheduled`` event.

Reported: pods/s (pods bound over the time from the first create to the last
binding), p50/p99 create-to-bound, the create rate, and
``double_allocations``: ``check_invariants`` over every claim the server
holds at the end (no device in two claims, no shared counter over its total;
0 is the requirement), and ``nodes_over_allocatable`` (the pods' cpu and
memory against their nodes'). Exit 1 if either is not 0 or pods were left
unbound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..scheduler.dra.benchdata import create_gpu_cluster, gpu_cluster, gpu_pod, template_mix
from ..scheduler.dra.invariants import check_invariants
from . import help_text
from . import scheduler as sched_bench
from .scheduler import _free_port, _http, _p, _send_all, start_server, stop_all, watch_bindings

__all__ = ["run"]


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": "dra", "metric": metric, "value": round(value, 3), "unit": unit, **extra}), flush=True)


async def _run(args: argparse.Namespace, port: int) -> dict[str, Any]:
    from controlplane.client import Client, resource_path

    c = Client(f"http://127.0.0.1:{port}", timeout=300.0)
    try:
        data = gpu_cluster(nodes=args.nodes, gpus_per_node=args.gpus)
        t0 = time.perf_counter()
        await create_gpu_cluster(c, data, concurrency=args.connections)  # classes, templates, nodes, slices
        setup = time.perf_counter() - t0
        await asyncio.sleep(1.0)  # the scheduler's informers take the slices in
        pods_path = "/api/v1/namespaces/default/pods"
        rv = (await c.list(pods_path, limit=1))["metadata"]["resourceVersion"]
        created: dict[str, float] = {}
        bound: dict[str, float] = {}
        done = asyncio.Event()

        watcher = asyncio.create_task(watch_bindings(c, pods_path, rv, args.pods, bound, done))
        await asyncio.sleep(0.2)
        mix = template_mix(args.pods)
        bodies = [_http("POST", pods_path, gpu_pod(f"pod-{i}", "default", mix[i], cpu="100m"))
                  for i in range(args.pods)]

        def started(i: int) -> None:
            created[f"pod-{i}"] = time.perf_counter()

        t_create = time.perf_counter()
        await _send_all(port, args.pods, args.connections, lambda i: (bodies[i],), started)
        create_secs = time.perf_counter() - t_create
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), args.timeout)
        watcher.cancel()
        end = max(bound.values(), default=time.perf_counter())
        claims = (await c.list(resource_path("resource.k8s.io", "v1", "resourceclaims")))["items"]
        pods = (await c.list(pods_path))["items"]
        nodes = (await c.list("/api/v1/nodes"))["items"]
        over = sched_bench.check_invariants(pods, nodes, 0)["nodes_over_allocatable"]
        return {"over": over, "setup": setup, "create_secs": create_secs, "sched_secs": end - t_create,
                "bound": len(bound),
                "lat": [bound[n] - created[n] for n in bound if n in created], "claims": claims,
                "violations": check_invariants(data.slices, claims)}
    finally:
        await c.aclose()


def run(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="controlplane bench dra --api", description=help_text(__doc__, first=True))
    ap.add_argument("--api", action="store_true", help="this mode: end to end through a server's API (given to "
                                                        "choose it; without it, the allocator alone)")
    ap.add_argument("--nodes", type=int, default=1000, help="nodes, each publishing its GPUs in ResourceSlices "
                                                            "(default: %(default)s)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node (default: %(default)s)")
    ap.add_argument("--pods", type=int, default=20000, help="pods, one claim each (default: %(default)s)")
    ap.add_argument("--connections", type=int, default=32, help="concurrent creating clients")
    ap.add_argument("--components-process", action="store_true",
                    help="serve --components-process: scheduler and claim controller in a process of their own")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up waiting for bindings after this")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cp-bench-dra-"))
    procs: list[Any] = []
    port = _free_port()
    try:
        # (no TaintNodesByCondition, as bench/scheduler.py's server)
        procs.append(start_server(work, port, ["--disable-admission-plugins", "TaintNodesByCondition",
                                               *(["--components-process"] if args.components_process else [])]))
        r = asyncio.run(_run(args, port))
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)
    shape = {"nodes": args.nodes, "gpus_per_node": args.gpus, "pods": args.pods, "mode": "api",
             "scheduler": "components-process" if args.components_process else "serve"}
    allocated = sum(1 for cl in r["claims"] if (cl.get("status") or {}).get("allocation"))
    emit("dra_pods_scheduled_per_s", r["bound"] / r["sched_secs"] if r["sched_secs"] > 0 else 0.0, "1/s",
         bound=r["bound"], **shape)
    emit("create_to_bound_p50", _p(r["lat"], 0.5) * 1000, "ms", **shape)
    emit("create_to_bound_p99", _p(r["lat"], 0.99) * 1000, "ms", **shape)
    emit("pod_creates_per_s", args.pods / r["create_secs"], "1/s", connections=args.connections, **shape)
    emit("setup_seconds", r["setup"], "s", note="classes, templates, nodes with status, slices", **shape)
    emit("claims_allocated", allocated, "claims", claims=len(r["claims"]), **shape)
    emit("double_allocations", len(r["violations"]), "violations", **shape)
    emit("nodes_over_allocatable", r["over"], "nodes", **shape)
    emit("pods_unbound", args.pods - r["bound"], "pods", **shape)
    return 1 if r["violations"] or r["over"] or r["bound"] < args.pods else 0
