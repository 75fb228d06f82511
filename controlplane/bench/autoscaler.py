"""``controlplane bench autoscaler``: scale GPU capacity from zero, then consolidate it away.

Everything runs in this process, as in ``controlplane serve --autoscaler``: the
API server (LMDB store in a temporary directory), its scheduler, the node
simulator and the autoscaler, the last three as in-process API clients. The
catalog is the built-in one with every launch latency multiplied by
``--latency-scale`` (so that a run takes seconds, not minutes).

1. **Scale from zero**: ``--pods`` pods, each asking for one GPU (the
   ``nvidia.com/gpu`` extended resource, or with ``--dra`` a ResourceClaim from a
   template, which needs the scheduler's DRA plugin), are created at once with
   no node in the cluster. Reported: when the first NodeClaim was created
   (batching and simulation), when the first and when every NodeClaim's node
   was registered, when every GPU node's ResourceSlice was published, when
   every pod was bound, and when every pod was Running; the target is the GPU
   types' launch latency + 5 s, counted from the pods' creation (and, beside
   it, from when all were pending: unschedulable).
2. **Consolidation**: all the pods are deleted; reported: when the last node
   was gone, counted from when the last delete returned (target
   ``consolidateAfter`` + 5 s; ``from_first_delete`` beside it), and the most
   NodeClaims ever being deleted at once against what the budget allows
   (sampled every 20 ms).

``--components-process`` runs ``controlplane serve --autoscaler --components-process``
instead, in processes of its own: the API server in one, the scheduler, the node
simulator and the autoscaler in the process it forks (a core each, as a user
would run them for speed), the catalog's latencies scaled through an
``--instance-types`` file. The benchmark then watches the cluster over the
socket (pods, nodes, NodeClaims, ResourceSlices) into the autoscaler's own
``ClusterState`` to take the same marks. The autoscaler runs with its default
disruption interval there (1 s; 0.5 s in process).

Exit 1 if an invariant is broken or a phase did not end within ``--timeout``: a pod
left not Running, a node holding more GPU pods than it has GPUs, more NodeClaims
deleted at once than the budget allows, a NodeClaim left after consolidation (with
``--alone``: the devices never published). The targets (``ok``) are not invariants.

Numbers are noisy on a shared two-core machine: run a few times, quote medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from . import help_text

BENCH = "autoscaler"


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 3), "unit": unit, **extra}), flush=True)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(q * len(s)) - 1)]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="controlplane bench autoscaler", description=help_text(__doc__, first=True))
    p.add_argument("--pods", type=int, default=1000, help="pending GPU pods (default: %(default)s)")
    p.add_argument("--latency-scale", type=float, default=0.1,
                   help="multiply the catalog's launch latencies (default: %(default)s)")
    p.add_argument("--consolidate-after", type=int, default=5, metavar="SECONDS", help="(default: %(default)s)")
    p.add_argument("--budget", default="10%", help="the NodePool's disruption budget (default: %(default)s)")
    p.add_argument("--dra", action="store_true", help="ask for GPUs through ResourceClaims (needs DRA scheduling)")
    p.add_argument("--instance-types", default="gpu-8x-a100,gpu-8x-h100", metavar="A,B",
                   help="the NodePool's allowed instance types, as a training pool would (empty: any; "
                        "default: %(default)s)")
    p.add_argument("--alone", action="store_true",
                   help="the autoscaler alone: no scheduler and no node simulator; the benchmark marks the pods "
                        "unschedulable itself and the scale-up ends when the nodes and devices are there (no pod "
                        "runs; no consolidation phase)")
    p.add_argument("--components-process", action="store_true",
                   help="serve --autoscaler --components-process in processes of their own, watched over the "
                        "socket (the API server on one core, the components on the other)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up on a phase after this (default: %(default)s)")
    args = p.parse_args(argv)
    if args.components_process and (args.alone or args.dra):
        p.error("--components-process runs the whole loop with the built-in catalog's GPUs (no --alone, no --dra)")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.components_process:
        return _run_components_process(args)
    return asyncio.run(_run(args))


def _scaled_catalog(scale: float) -> tuple[Any, ...]:
    from ..nodes.instancetypes import DEFAULT_CATALOG

    return tuple(dataclasses.replace(t, launch_latency_seconds=t.launch_latency_seconds * scale)
                 for t in DEFAULT_CATALOG)


def _catalog_entry(t: Any) -> dict[str, Any]:
    """An instance type as an ``--instance-types`` file lists it (``InstanceType.from_dict``)."""
    return {"name": t.name, "cpu": t.cpu, "memory": t.memory, "pods": t.pods, "price": t.price,
            "launchLatencySeconds": t.launch_latency_seconds, "registryBandwidthMBps": t.registry_bandwidth_mbps,
            "unpackMBps": t.unpack_mbps, "unpackWorkers": t.unpack_workers,
            "extendedResources": dict(t.extended_resources), "arch": t.arch, "os": t.os,
            "capacityType": t.capacity_type,
            "gpus": [{"model": g.model, "memory": g.memory, "count": g.count, "driver": g.driver,
                      "attributes": dict(g.attributes)} for g in t.gpus]}


def _run_components_process(args: argparse.Namespace) -> int:
    import shutil

    from .scheduler import _free_port, start_server, stop_all

    types = _scaled_catalog(args.latency_scale)
    gpu_latency = max(t.launch_latency_seconds for t in types if t.gpus)
    work = Path(tempfile.mkdtemp(prefix="cp-bench-autoscaler-"))
    catalog = work / "instance-types.json"
    catalog.write_text(json.dumps([_catalog_entry(t) for t in types]))
    port = _free_port()
    procs = []
    try:
        procs.append(start_server(work, port, ["--autoscaler", "--components-process",
                                               "--instance-types", str(catalog)]))
        return asyncio.run(_watch_over_socket(args, port, gpu_latency))
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


async def _watch_over_socket(args: argparse.Namespace, port: int, gpu_latency: float) -> int:
    from ..autoscaler.crds import GROUP, NODECLAIMS, NODEPOOLS, VERSION
    from ..autoscaler.state import ClusterState
    from ..client import ApiError, Client, Informer, resource_path

    pods_path = resource_path("", "v1", "pods", "default")
    async with Client(f"http://127.0.0.1:{port}") as client:
        deadline = time.monotonic() + 60
        while True:  # the autoscaler installs the karpenter.sh CRDs when it starts
            try:
                await client.list(resource_path(GROUP, VERSION, NODEPOOLS), limit=1)
                break
            except ApiError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        st = ClusterState()
        times = _PodTimes()

        def pod_added(pod: dict[str, Any]) -> None:
            st.pod_added(pod)
            times.seen(pod)

        def pod_updated(old: dict[str, Any], new: dict[str, Any]) -> None:
            st.pod_updated(old, new)
            times.seen(new)

        informers = [
            Informer(client, pods_path, on_add=pod_added, on_update=pod_updated, on_delete=st.pod_deleted),
            Informer(client, resource_path("", "v1", "nodes"), on_add=st.node_added, on_update=st.node_updated,
                     on_delete=st.node_deleted),
            Informer(client, resource_path(GROUP, VERSION, NODECLAIMS), on_add=lambda c: st.nodeclaim_set(None, c),
                     on_update=st.nodeclaim_set, on_delete=st.nodeclaim_deleted),
            Informer(client, resource_path("resource.k8s.io", "v1", "resourceslices"), on_add=st.slice_set,
                     on_update=lambda o, n: st.slice_set(n), on_delete=st.slice_deleted),
        ]
        tasks = [asyncio.create_task(i.run()) for i in informers]
        try:
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 30)
            return await _phases(args, client, st, times, gpu_latency, pods_path)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _run(args: argparse.Namespace) -> int:
    from ..api.app import create_app
    from ..autoscaler.catalog import Catalog
    from ..autoscaler.controller import Autoscaler
    from ..client import Client, Informer, resource_path
    from ..config import Config
    from ..nodes.config import SimConfig
    from ..nodes.simulator import NodeSimulator

    types = _scaled_catalog(args.latency_scale)
    gpu_latency = max(t.launch_latency_seconds for t in types if t.gpus)
    pods_path = resource_path("", "v1", "pods", "default")
    with tempfile.TemporaryDirectory(prefix="bench-autoscaler-") as tmp:
        app = create_app(Config(data_dir=Path(tmp) / "data", tls=False, log_level="warning",
                                scheduler=not args.alone))
        async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client:
            scaler = Autoscaler(client, Catalog.of(types), disruption_interval=0.5)
            sim = NodeSimulator(client, SimConfig(catalog=types, instance_type="cpu-small"))
            times = _PodTimes()
            watcher = Informer(client, pods_path, on_add=times.seen, on_update=lambda o, n: times.seen(n))
            runs = (scaler.run(), watcher.run()) if args.alone else (scaler.run(), sim.run(), watcher.run())
            tasks = [asyncio.create_task(c) for c in runs]
            try:
                await asyncio.wait_for(scaler.synced.wait(), 30)
                await watcher.synced.wait()
                return await _phases(args, client, scaler.state, times, gpu_latency, pods_path)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


class _PodTimes:
    """When each pod was first seen, and first seen Running (by name)."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}

    def seen(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        self.created.setdefault(name, time.monotonic())
        if (pod.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(name, time.monotonic())


async def _phases(args: argparse.Namespace, client: Any, st: Any, times: _PodTimes, gpu_latency: float,
                  pods_path: str) -> int:
    """The two phases; ``st`` is a ``ClusterState`` kept by informers (the autoscaler's own, in process)."""
    running, created = times.running, times.created
    from ..autoscaler.budgets import allowed
    from ..client import resource_path

    requirements = []
    if args.instance_types:
        requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                         "values": args.instance_types.split(",")}]
    await client.create(resource_path("karpenter.sh", "v1", "nodepools"), {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                                        "name": "default"}, "requirements": requirements}},
                 "disruption": {"consolidateAfter": f"{args.consolidate_after}s",
                                "budgets": [{"nodes": args.budget}]}}})
    if args.dra:
        await client.create(resource_path("resource.k8s.io", "v1", "deviceclasses"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}})
        await client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}})

    def pod(i: int) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                "resources": resources}], "terminationGracePeriodSeconds": 0}
        if args.dra:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        else:
            resources["limits"] = {"nvidia.com/gpu": "1"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gpu-{i}", "namespace": "default"},
                "spec": spec}

    # -- scale from zero ---------------------------------------------------------------------------
    sem = asyncio.Semaphore(64)

    async def create(i: int) -> None:
        async with sem:
            await client.create(pods_path, pod(i))

    t0 = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(args.pods)))
    emit("pods_created_seconds", time.monotonic() - t0, "s", pods=args.pods)
    if args.alone:
        async def mark(i: int) -> None:
            async with sem:
                await client.patch(f"{pods_path}/gpu-{i}/status", {"status": {"conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/0 nodes are available", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})

        await asyncio.gather(*(mark(i) for i in range(args.pods)))
        emit("pods_marked_unschedulable_seconds", time.monotonic() - t0, "s", pods=args.pods)
    marks: dict[str, float] = {}
    deadline = t0 + args.timeout

    def take_marks(now: float) -> None:
        """The phases' first moments seen by this poll (and by a last one after the loop: all
        Running may come within one 20 ms poll of all bound, which would leave that mark out)."""
        if "all_pending" not in marks and len(st.provisionable) >= args.pods:
            marks["all_pending"] = now
        claims = list(st.nodeclaims.values())
        if claims and "first_nodeclaim" not in marks:
            marks["first_nodeclaim"] = now
        ready = [c for c in claims if (c.get("status") or {}).get("nodeName") in st.nodes]
        gpus = sum(int(((c.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu", "0")) for c in ready)
        # every pod has a GPU on a registered node (and no NodeClaim is still launching)
        enough = bool(claims) and len(ready) == len(claims) and gpus >= args.pods
        if ready and "first_node_registered" not in marks:
            marks["first_node_registered"] = now
        if enough and "nodes_registered" not in marks:
            marks["nodes_registered"] = now
        nodes_of = {(c.get("status") or {}).get("nodeName") or "" for c in ready}
        if enough and all(st.slices_of(n) for n in nodes_of) and "devices_published" not in marks:
            marks["devices_published"] = now
        if ("all_bound" not in marks and len(st.pods) >= args.pods
                and all((p.get("spec") or {}).get("nodeName") for p in st.pods.values())):
            marks["all_bound"] = now

    while (len(running) < args.pods and time.monotonic() < deadline
           and not (args.alone and "devices_published" in marks)):
        take_marks(time.monotonic())
        await asyncio.sleep(0.02)
    done = time.monotonic()
    take_marks(done)
    target = gpu_latency + 5.0
    pending_at = marks.get("all_pending")
    since_pending = round(done - pending_at, 3) if pending_at is not None else None
    for name in ("all_pending", "first_nodeclaim", "first_node_registered", "nodes_registered",
                 "devices_published", "all_bound"):
        if name in marks:
            emit(f"{name}_seconds", marks[name] - t0, "s")
    nodes = len(st.nodeclaims)
    by_type: dict[str, int] = {}
    for c in st.nodeclaims.values():
        t = ((c.get("metadata") or {}).get("labels") or {}).get("node.kubernetes.io/instance-type", "?")
        by_type[t] = by_type.get(t, 0) + 1
    if args.alone:
        emit("scale_from_zero_alone_seconds", done - t0, "s", pods=args.pods, nodes=nodes, instance_types=by_type,
             launch_latency=round(gpu_latency, 3), target=target, from_all_pending=since_pending,
             ok="devices_published" in marks and done - t0 <= target)
        return 0 if "devices_published" in marks else 1
    emit("scale_from_zero_seconds", done - t0, "s", pods=args.pods, running=len(running), nodes=nodes,
         instance_types=by_type, launch_latency=round(gpu_latency, 3), target=target,
         from_all_pending=since_pending, ok=len(running) == args.pods and done - t0 <= target)
    per_node: dict[str, int] = {}
    for p in st.pods.values():
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
    over = 0
    for node, n in per_node.items():
        gpus = ((st.nodes.get(node) or {}).get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", "0")
        over += n > int(gpus)
    emit("gpu_overcommitted_nodes", over, "nodes", most_pods_on_a_node=max(per_node.values(), default=0))
    startup = [running[n] - created[n] for n in running if n in created]
    emit("pod_startup_p50_seconds", _quantile(startup, 0.5), "s")
    emit("pod_startup_p99_seconds", _quantile(startup, 0.99), "s")
    if len(running) < args.pods or over:
        return 1

    # -- consolidation ------------------------------------------------------------------------------------
    await asyncio.sleep(0.5)
    t1 = time.monotonic()
    await asyncio.gather(*(_delete(client, f"{pods_path}/gpu-{i}", sem) for i in range(args.pods)))
    t2 = time.monotonic()
    emit("pods_deleted_seconds", t2 - t1, "s", pods=args.pods)
    most, violations = 0, 0
    total = nodes
    deadline = t1 + args.consolidate_after + args.timeout
    while (st.nodeclaims or st.nodes) and time.monotonic() < deadline:
        deleting = sum(1 for c in st.nodeclaims.values() if (c.get("metadata") or {}).get("deletionTimestamp"))
        most = max(most, deleting)
        if deleting > allowed([{"nodes": args.budget}], total, "Empty"):
            violations += 1
        await asyncio.sleep(0.02)
    gone = time.monotonic()
    # the target counts from when the pods are deleted (the last delete returned)
    emit("consolidation_seconds", gone - t2, "s", nodes=total, consolidate_after=args.consolidate_after,
         target=args.consolidate_after + 5, left=len(st.nodeclaims), from_first_delete=round(gone - t1, 3),
         ok=not st.nodeclaims and gone - t2 <= args.consolidate_after + 5)
    emit("consolidation_most_deleting_at_once", most, "nodeclaims", budget=args.budget,
         allowed=allowed([{"nodes": args.budget}], total, "Empty"), violations=violations)
    return 1 if violations or st.nodeclaims else 0


async def _delete(client: Any, path: str, sem: asyncio.Semaphore) -> None:
    from ..client import ApiError

    async with sem:
        with contextlib.suppress(ApiError):  # already gone (evicted, say)
            await client.delete(path, gracePeriodSeconds=0)
