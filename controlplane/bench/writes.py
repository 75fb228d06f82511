"""``controlplane bench writes``: CPU per write through the API, by kind of write.

Every target of the scheduler, the node simulator and the load tests is bound
by what one write costs the API server: request handling, validation,
managedFields, the store and the watch cache. This measures it without a
socket, with the in-process client the components use (``Client.in_process``),
so the figure is the server's work and nothing else: CPU seconds of the
process (``time.process_time``, the store's threads included) over the writes
of one kind, ``--concurrency`` in flight, divided by their number.

The writes, in order, each over ``--count`` objects: pod create, pod binding
(``pods/binding``), Event create, Lease update (PUT, as a kubelet renews),
pod status merge patch (the node simulator's Running), pod status strategic
patch (the scheduler's ``PodScheduled`` condition), each with its ``observedGeneration``
as they write it since KEP-5067, node status merge patch;
then Lease renewals in bulk (``LeaseRenewal``, as the node simulator sends a
batch: ``RENEWAL_BATCH`` Leases a request, or all of them if fewer, round ``--renewal-leases`` Leases), per
Lease renewed; last, a
kubelet's periodic node status report on nodes of realistic size, as a merge
patch of each node and as ``NodeStatusReport`` requests naming them all, per
node; last of all, the bound pods' deletes (``gracePeriodSeconds: 0``, as a
kubelet's final delete of a pod it has stopped).

``--audit-policy-file`` audits the writes (``api/audit.py``) to a log in the bench's
temporary directory: the difference to a run without it is what auditing costs a write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from . import help_text

BENCH = "writes"
T = "2026-11-30T10:00:00Z"
RENEWAL_BATCH = 2000  # Leases a LeaseRenewal names (the simulator's renewals_per_request)


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 1), "unit": unit, **extra}),
          flush=True)


def _pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"app": "bench"}},
            "spec": {"schedulerName": "none", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def _running(i: int) -> dict[str, Any]:
    """The node simulator's Running, its generation observed (KEP-5067, as a 1.34 kubelet)."""
    return {"status": {
        "observedGeneration": 1, "phase": "Running", "podIP": f"10.0.{i // 250}.{i % 250}", "hostIP": "10.1.0.1",
        "startTime": T,
        "conditions": [{"type": c, "status": "True", "observedGeneration": 1, "lastTransitionTime": T,
                        "lastProbeTime": None} for c in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "sha256:0",
                               "containerID": "containerd://0", "ready": True, "started": True,
                               "restartCount": 0, "state": {"running": {"startedAt": T}}}]}}


def _lease(i: int, k: int) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": f"n{i}", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": f"n{i}", "leaseDurationSeconds": 40,
                     "renewTime": f"2026-11-30T10:00:{k % 60:02d}.{i:06d}Z"}}


async def _each(count: int, concurrency: int, write: Callable[[int], Awaitable[Any]]) -> float:
    """CPU µs per call of ``write(i)`` for i < count, ``concurrency`` at a time."""
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            await write(i)

    started = time.process_time()
    await asyncio.gather(*(one(i) for i in range(count)))
    return 1e6 * (time.process_time() - started) / count


async def _run(args: argparse.Namespace) -> None:
    from ..api.app import create_app
    from ..client import Client
    from ..config import AuditLog, Config

    n, conc = args.count, args.concurrency
    nodes = min(n, 500)  # node status patches: one per node (concurrent patches of one object conflict)
    with tempfile.TemporaryDirectory(prefix="bench-writes-") as tmp:
        audit = AuditLog() if args.audit_policy_file is None else \
            AuditLog(args.audit_policy_file, args.audit_log_path or str(Path(tmp) / "audit.log"),
                     mode=args.audit_log_mode)
        app = create_app(Config(data_dir=Path(tmp) / "data", tls=False, log_level="warning", scheduler=False,
                                audit=audit))
        async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
            for j in range(nodes):
                await c.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{j}"}})
            for i in range(200):  # warm up: caches, imports, the store's first commits
                await c.create("/api/v1/namespaces/default/pods", _pod(n + i))
            pods = "/api/v1/namespaces/default/pods"
            leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
            for i in range(min(n, 500)):
                await c.create(leases, _lease(i, 0))
            shape = {"count": n, "concurrency": conc}
            emit("pod_create_cpu", await _each(n, conc, lambda i: c.create(pods, _pod(i))), "us", **shape)
            emit("binding_cpu", await _each(n, conc, lambda i: c.create(f"{pods}/p{i}/binding", {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"p{i}"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": f"n{i % nodes}"}})), "us", **shape)
            emit("event_create_cpu", await _each(n, conc, lambda i: c.create("/api/v1/namespaces/default/events", {
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"p{i}.0", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": f"p{i}", "namespace": "default"},
                "reason": "Scheduled", "message": f"Successfully assigned default/p{i}", "type": "Normal"})),
                "us", **shape)
            emit("lease_update_cpu", await _each(n, conc, lambda k: c.update(
                f"{leases}/n{k % min(n, 500)}", _lease(k % min(n, 500), k // 500 + 1))), "us", **shape)
            emit("pod_status_merge_patch_cpu", await _each(n, conc, lambda i: c.patch(
                f"{pods}/p{i}/status", _running(i), patch_type="merge")), "us", **shape)
            emit("pod_status_strategic_patch_cpu", await _each(n, conc, lambda i: c.patch(
                f"{pods}/p{i}/status", {"status": {"conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "observedGeneration": 1,
                    "message": f"0/{i} nodes are available", "lastProbeTime": None, "lastTransitionTime": T}]}},
                patch_type="strategic")), "us", **shape)
            emit("node_status_merge_patch_cpu", await _each(nodes, conc, lambda j: c.patch(
                f"/api/v1/nodes/n{j}/status", {"status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready",
                    "lastHeartbeatTime": T, "lastTransitionTime": T}]}}, patch_type="merge")),
                "us", count=nodes, concurrency=conc)
            held = args.renewal_leases
            batch = min(held, RENEWAL_BATCH)  # fewer Leases than a simulator's request: all in one
            emit("lease_renewal_cpu", await _bulk_renewals(c, n, held), "us", leases=held, batch=batch,
                 renewals=_renewal_rounds(n, held) * held,
                 note=f"per Lease renewed, LeaseRenewals of {batch} Leases at a time, round all the Leases")
            patched, reported = await _node_status_reports(c, args.report_nodes)
            emit("node_status_report_patch_cpu", patched, "us", nodes=args.report_nodes, rounds=REPORT_ROUNDS,
                 note="per node, a kubelet's periodic status report as a merge patch of its 5 conditions")
            emit("node_status_report_cpu", reported, "us", nodes=args.report_nodes, rounds=REPORT_ROUNDS,
                 patch_over_report=round(patched / reported, 1),
                 note="per node, the same reports as NodeStatusReports of all the nodes")
            emit("pod_delete_cpu", await _each(n, conc, lambda i: c.delete(f"{pods}/p{i}", {"gracePeriodSeconds": 0})),
                 "us", **shape)


def _renewal_rounds(n: int, leases: int) -> int:
    """Rounds over ``leases`` Leases for about ``10 * n`` renewals: at least two."""
    return max(2, 10 * n // leases)


async def _bulk_renewals(c: Any, n: int, leases: int) -> float:
    """CPU µs per Lease renewed by LeaseRenewals naming ``RENEWAL_BATCH`` Leases each, round
    ``leases`` Leases (at 100,000 nodes the server holds 100,000, each renewed every 10 s),
    after a first round that is not counted (it learns the renewal plans)."""
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    renewals = "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals"
    names = [f"r{i}" for i in range(leases)]
    batches = [names[i:i + RENEWAL_BATCH] for i in range(0, leases, RENEWAL_BATCH)]
    await _each(leases, 256, lambda i: c.create(path, {**_lease(i, 0), "metadata": {
        "name": names[i], "namespace": "kube-node-lease"}}))
    sent = 0

    async def renew(batch: list[str]) -> None:
        nonlocal sent
        sent += 1  # a new renewTime each request: every Lease changes
        answer = await c.create(renewals, {"apiVersion": "nodes.controlplane.dev/v1alpha1", "kind": "LeaseRenewal",
                                           "spec": {"renewTime": f"2026-11-30T{10 + sent // 3600 % 10:02d}:"
                                                                 f"{sent // 60 % 60:02d}:{sent % 60:02d}.000000Z",
                                                    "leases": batch}})
        assert answer["status"]["renewed"] == len(batch), answer["status"]

    for batch in batches:
        await renew(batch)
    rounds = _renewal_rounds(n, leases)
    started = time.process_time()
    for _ in range(rounds):
        for batch in batches:
            await renew(batch)
    return 1e6 * (time.process_time() - started) / (rounds * leases)


REPORT_NODES, REPORT_ROUNDS = 1000, 3  # the nodes' default, and the rounds counted
_CONDITIONS = (("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
               ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
               ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
               ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
               ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"))


def _conditions(heartbeat: str) -> list[dict[str, str]]:
    return [{"type": t, "status": st, "reason": r, "message": m, "lastHeartbeatTime": heartbeat,
             "lastTransitionTime": T} for t, st, r, m in _CONDITIONS]


def _node(name: str) -> dict[str, Any]:
    """A Node as a simulated kubelet registers it (labels, capacity, addresses, images: about 3 KB)."""
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "cpu-large", "topology.kubernetes.io/zone": "zone-a"}},
        "spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]},
        "status": {"capacity": resources, "allocatable": resources, "conditions": _conditions(T),
                   "addresses": [{"type": "InternalIP", "address": "172.16.0.1"},
                                 {"type": "Hostname", "address": name}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                   "nodeInfo": {"kubeletVersion": "v1.37.0", "containerRuntimeVersion": "containerd://2.2.0",
                                "operatingSystem": "linux", "architecture": "amd64", "osImage": "controlplane"},
                   "images": [{"names": [f"registry.k8s.io/image-{i}:1.0"], "sizeBytes": 10_000_000 * (i + 1)}
                              for i in range(10)]}}


async def _node_status_reports(c: Any, report_nodes: int) -> tuple[float, float]:
    """CPU µs per node of a periodic status report (its conditions re-timed): as a merge
    patch of each node, and as NodeStatusReports naming every node. Two rounds each first,
    not counted: the reports' first two are made the whole way (the first moves the
    heartbeats from the node's create entry of managedFields to its status entry, the
    second learns the plans), as a simulated node's first reports after registering."""
    reports = "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports"
    for name in (f"{prefix}{i}" for prefix in ("p", "r") for i in range(report_nodes)):
        await c.create("/api/v1/nodes", _node(name), fieldManager="kubelet")

    def beat(k: int) -> str:
        return f"2026-11-30T10:{k + 1:02d}:00Z"

    async def patch_all(k: int) -> None:
        await _each(report_nodes, 64, lambda i: c.patch(f"/api/v1/nodes/p{i}/status", {"status": {
            "conditions": _conditions(beat(k))}}, patch_type="merge", fieldManager="kubelet"))

    async def report_all(k: int) -> None:
        names = [f"r{i}" for i in range(report_nodes)]
        reported = [{"type": t, "status": st, "reason": r, "message": m} for t, st, r, m in _CONDITIONS]
        answer = await c.create(reports, {"spec": {"heartbeatTime": beat(k), "conditions": reported,
                                                   "nodes": names}}, fieldManager="kubelet")
        assert answer["status"] == {"reported": report_nodes}, answer["status"]

    out = []
    for each in (patch_all, report_all):
        await each(0)
        await each(1)
        started = time.process_time()
        for k in range(2, REPORT_ROUNDS + 2):
            await each(k)
        out.append(1e6 * (time.process_time() - started) / (REPORT_ROUNDS * report_nodes))
    return out[0], out[1]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench writes", description=help_text(__doc__, first=True))
    p.add_argument("--count", type=int, default=3000, help="writes of each kind (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=64, help="writes in flight (default: %(default)s)")
    p.add_argument("--renewal-leases", type=int, default=RENEWAL_BATCH,
                   help="Leases the bulk renewals go round, %(default)s at a time (fewer: all in one request; "
                        "100000: as many as 100,000 nodes hold; default: %(default)s)")
    p.add_argument("--report-nodes", type=int, default=REPORT_NODES,
                   help="nodes each kind of periodic node status report goes round (default: %(default)s)")
    p.add_argument("--audit-policy-file", type=Path, default=None, metavar="YAML",
                   help="audit the writes by this policy (what auditing costs a write; default: no auditing)")
    p.add_argument("--audit-log-path", default="", metavar="PATH",
                   help="where the audit events go (default: a file in the bench's temporary directory)")
    p.add_argument("--audit-log-mode", choices=("blocking", "batch"), default="blocking",
                   help="(default: %(default)s)")
    args = p.parse_args(argv)
    if args.renewal_leases < 1:
        p.error(f"--renewal-leases {args.renewal_leases}: at least 1")
    if args.count < 1 or args.concurrency < 1 or args.report_nodes < 1:
        p.error("--count, --concurrency and --report-nodes must be at least 1")
    asyncio.run(_run(args))
    return 0
