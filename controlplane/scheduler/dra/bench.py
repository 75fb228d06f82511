"""``controlplane bench dra``: the DRA allocator alone, as the scheduler drives it.

1,000 nodes with 8 partitionable GPUs each (``benchdata``: per GPU the whole
device, two 3g and seven 1g partitions on shared counters: 80,000 devices),
three device classes with CEL selectors, pods claiming a whole GPU (10%), a 3g
(20%) or a 1g partition (70%). No API server, no event loop: what is measured
is the plugin's domain logic for each pod as a scheduling cycle runs it:
PreFilter, Filter over nodes (from a rotating start, until
``num_feasible_nodes_to_find`` nodes fit, as kube-scheduler samples), Reserve
on the first feasible node, and the allocation written back as the claim
informer would deliver it.

Prints ``allocations_per_second`` (with ``peer``/``ratio``: the same with every
cache off and each CEL expression compiled on every use, on ``--peer-pods``
pods, since it is that much slower), ``allocations_per_cpu_second`` (the same
per second of the process's CPU time, steadier on a shared machine),
``filter_calls_per_pod``,
``filter_cache_hit_ratio``, ``load_seconds`` (the slice events into the
inventory; pools are parsed on first use, so that cost is in the allocation
figures) and
``invariant_violations`` (``check_invariants`` over all claims at the end: 0).

``--api``: the same cluster and pods end to end, through a server's API
(``controlplane.bench.dra_api``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from ...bench import help_text
from ..framework import num_feasible_nodes_to_find
from .benchdata import gpu_cluster, template_mix
from .invariants import check_invariants
from .manager import DraManager

__all__ = ["main", "run"]


def _emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": "dra", "metric": metric, "value": round(value, 4), "unit": unit, **extra}), flush=True)


def run(nodes: int, gpus: int, pods: int, cache: bool = True, seed: int = 1) -> dict[str, Any]:
    data = gpu_cluster(nodes=nodes, gpus_per_node=gpus)
    m = DraManager(cache=cache)
    t0 = time.perf_counter()
    for s in data.slices:
        m.on_slice(s)
    for c in data.classes:
        m.on_class(c)
    load = time.perf_counter() - t0
    templates = {t["metadata"]["name"]: t["spec"]["spec"] for t in data.templates}
    names = [n["metadata"]["name"] for n in data.nodes]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in data.nodes}
    want = num_feasible_nodes_to_find(len(names))
    start = 0
    placed = unschedulable = filters = 0
    claims: list[dict[str, Any]] = []
    t0, c0 = time.perf_counter(), time.process_time()
    for i, template in enumerate(template_mix(pods, seed)):
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"pod-{i}-gpu-x", "namespace": "default", "uid": f"c{i}"},
                 "spec": templates[template]}
        m.on_claim(claim)
        pod = {"metadata": {"name": f"pod-{i}", "namespace": "default", "uid": f"p{i}"},
               "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]}}
        pc = m.pre_filter(pod)
        assert pc is not None
        feasible: list[str] = []
        for k in range(len(names)):
            node = names[(start + k) % len(names)]
            filters += 1
            if m.filter(pc, node, labels[node]) is None:
                feasible.append(node)
                if len(feasible) >= want:
                    break
        start = (start + k + 1) % len(names)
        if not feasible or m.reserve(pc, feasible[0], labels[feasible[0]]) is not None:
            unschedulable += 1
            continue
        assert pc.reserved is not None
        done = {**claim, "status": {"allocation": pc.reserved[1].allocation(0, feasible[0]),
                                    "reservedFor": [{"resource": "pods", "name": f"pod-{i}", "uid": f"p{i}"}]}}
        m.on_claim(done)
        claims.append(done)
        placed += 1
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"rate": placed / elapsed if elapsed else 0.0, "cpu_rate": placed / cpu if cpu else 0.0,
            "placed": placed, "unschedulable": unschedulable,
            "filters_per_pod": filters / max(pods, 1), "hit_ratio": m.filter_cache_hits / max(m.filter_calls, 1),
            "load": load, "violations": len(check_invariants(data.slices, claims)),
            "compilations": m.selectors.compilations}


def main(argv: list[str]) -> int:
    if "--api" in argv:  # end to end, through a server's API (controlplane.bench.dra_api)
        from controlplane.bench.dra_api import run as run_api

        return run_api(argv)
    ap = argparse.ArgumentParser(prog="controlplane bench dra", description=help_text(__doc__, first=True))
    ap.add_argument("--api", action="store_true",
                    help="end to end instead: the same cluster and pods through a server's API "
                         "(options: controlplane bench dra --api --help)")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node (default: %(default)s)")
    ap.add_argument("--pods", type=int, default=20000, help="pods to place (default: %(default)s)")
    ap.add_argument("--peer-pods", type=int, default=3, help="pods for the uncached peer (about 10 s each); 0 skips it")
    ap.add_argument("--repeat", type=int, default=1, help="runs of the cached allocator; the median is printed")
    args = ap.parse_args(argv)
    runs = [run(args.nodes, args.gpus, args.pods) for _ in range(max(args.repeat, 1))]
    rate = statistics.median(r["rate"] for r in runs)
    cpu_rate = statistics.median(r["cpu_rate"] for r in runs)
    best = runs[0]
    common = {"nodes": args.nodes, "gpus_per_node": args.gpus, "pods": args.pods, "runs": len(runs)}
    extra: dict[str, Any] = {}
    if args.peer_pods > 0:
        peer = run(args.nodes, args.gpus, args.peer_pods, cache=False)
        extra = {"peer": round(peer["rate"], 4), "ratio": round(rate / peer["rate"], 1) if peer["rate"] else None,
                 "peer_pods": args.peer_pods, "peer_mode": "no caches, CEL compiled per use"}
    _emit("allocations_per_second", rate, "allocations/s", placed=best["placed"],
          unschedulable=best["unschedulable"], **common, **extra)
    # Per second of this process's CPU: what the machine's other load does not distort.
    _emit("allocations_per_cpu_second", cpu_rate, "allocations/s", **common)
    _emit("filter_calls_per_pod", best["filters_per_pod"], "calls", **common)
    _emit("filter_cache_hit_ratio", best["hit_ratio"], "ratio", **common)
    _emit("load_seconds", best["load"], "s", **common)
    _emit("cel_compilations", best["compilations"], "compilations", **common)
    _emit("invariant_violations", max(r["violations"] for r in runs), "violations", **common)
    return 0 if all(r["violations"] == 0 for r in runs) else 1
