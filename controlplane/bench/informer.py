"""``controlplane bench informer``: what a pod (or a node) held by an informer costs, in
memory and CPU, with its common parts shared (``client/sharing.py``) and without (only
managedFields dropped, the peer).

Each measurement is a fresh process that parses ``--pods`` podgen pods from
JSON (realistic templates, sizes and per-pod randomness), passes each through
the transform and keeps them all, as an informer's ``items`` does; it reports
its resident memory grown per pod and the parse-and-transform time per pod.
With ``--kind nodes`` the objects are Nodes as the node simulator writes them
(``_simulated_nodes``: a few hundred from a real simulator, each copied with its
own name, uid, addresses, CIDR, machine ids and heartbeat times).
The two modes alternate ``--repeat`` times; the medians are printed, one JSON
line per metric and mode, then their ratio.

With ``--kind pods`` a third mode, ``packed``, holds them shared in the pod informers'
``PackedItems`` (``client/helditems.py``): all but the newest 20,000 packed; it
also reports what reading one of the oldest costs (parsed again).

    controlplane bench informer [--pods 20000] [--kind pods|nodes] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from . import help_text

BENCH = "informer"
MODES = ("stripped", "shared", "packed")  # packed: shared, then all but the newest packed (pods only)


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 2), "unit": unit, **extra}),
          flush=True)


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _simulated_nodes(count: int, distinct: int = 300) -> list[bytes]:
    """``count`` Nodes' JSON as the simulator writes them (see the module docstring)."""
    import asyncio
    import tempfile
    from pathlib import Path

    import orjson

    from controlplane.api.app import create_app
    from controlplane.client import Client, resource_path
    from controlplane.config import Config
    from controlplane.nodes.config import SimConfig
    from controlplane.nodes.simulator import NodeSimulator

    async def listed() -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="bench-informer-") as tmp:
            app = create_app(Config(data_dir=Path(tmp) / "data", tls=False, scheduler=False, log_level="warning"))
            async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client:
                sim = NodeSimulator(client, SimConfig(count=min(count, distinct)))
                task = asyncio.create_task(sim.run())
                await sim.ready()
                while sim.pending_writes():  # noqa: ASYNC110 - the nodes' status posts
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.0)
                items: list[dict[str, Any]] = (await client.list(resource_path("", "v1", "nodes")))["items"]
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return items

    base = asyncio.run(listed())
    out = []
    for i in range(count):
        node = orjson.loads(orjson.dumps(base[i % len(base)]))
        if i >= len(base):  # a copy: what is each node's own made its own again
            name = f"copy-{i}"
            node["metadata"].update(name=name, uid=f"{i:08x}-0000-4000-8000-{i:012x}")
            node["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = name
            info = node["status"]["nodeInfo"]
            info.update(machineID=f"{i:032x}", systemUUID=f"{i:08x}-1111-4000-8000-{i:012x}",
                        bootID=f"{i:08x}-2222-4000-8000-{i:012x}")
            cidr = f"10.{i >> 8 & 255}.{i & 255}.0/24"
            node["spec"].update(podCIDR=cidr, podCIDRs=[cidr])
            ip = f"172.{16 + (i >> 16 & 15)}.{i >> 8 & 255}.{i & 255}"
            node["status"]["addresses"] = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]
            beat = f"2026-12-02T01:{i // 60 % 60:02d}:{i % 60:02d}Z"
            for c in node["status"].get("conditions") or ():
                c["lastHeartbeatTime"] = beat
        out.append(orjson.dumps(node))
    return out


def measure(mode: str, count: int, kind: str = "pods") -> dict[str, float]:
    """In this process: hold ``count`` pods (or nodes) the ``mode`` way."""
    import orjson

    from controlplane.client.helditems import PackedItems
    from controlplane.client.informer import strip_managed_fields
    from controlplane.client.sharing import NodeSharer, PodSharer
    from controlplane.podgen import PodGenerator

    if kind == "nodes":
        raws = _simulated_nodes(count)
        transform: Any = NodeSharer() if mode == "shared" else strip_managed_fields
    else:
        gen = PodGenerator(seed=1)
        raws = [gen.pod_json() for _ in range(count)]
        transform = PodSharer() if mode in ("shared", "packed") else strip_managed_fields
    gc.collect()
    before = _rss_kib()
    held: Any = PackedItems() if mode == "packed" else {}
    started = time.perf_counter()
    for i, raw in enumerate(raws):
        held[str(i)] = transform(orjson.loads(raw))
    elapsed = time.perf_counter() - started
    gc.collect()
    grown = _rss_kib() - before
    # a read of the oldest objects (packed ones, in that mode: parsed again)
    keys = [str(i) for i in range(min(count, 2000))]
    started = time.perf_counter()
    for k in keys:
        held.get(k)
    read = (time.perf_counter() - started) / len(keys) * 1e6
    return {"kib_per_pod": grown / count, "us_per_pod": elapsed / count * 1e6, "us_per_read": read,
            "held": float(len(held))}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench informer", description=help_text(__doc__, first=True))
    p.add_argument("--pods", type=int, default=20_000, help="how many objects (pods or nodes)")
    p.add_argument("--kind", choices=("pods", "nodes"), default="pods",
                   help="what the informer holds (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a single measurement, in this process
    args = p.parse_args(argv)
    if args.pods < 1 or args.repeat < 1:
        p.error("--pods and --repeat must be at least 1")
    if args.one:
        print(json.dumps(measure(args.one, args.pods, args.kind)))
        return 0
    modes = MODES if args.kind == "pods" else MODES[:2]  # an informer's nodes are not packed
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(args.repeat):
        for mode in modes:
            out = subprocess.run([sys.executable, "-m", "controlplane", "bench", BENCH, "--one", mode,
                                  "--pods", str(args.pods), "--kind", args.kind],
                                 capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    medians = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("kib_per_pod", "us_per_pod", "us_per_read")}
               for m in modes}
    one = args.kind[:-1]  # pod, node
    for mode in modes:
        emit(f"memory_per_{one}", medians[mode]["kib_per_pod"], "KiB", mode=mode, count=args.pods, runs=args.repeat)
        emit(f"parse_and_hold_per_{one}", medians[mode]["us_per_pod"], "us", mode=mode, count=args.pods,
             runs=args.repeat)
        emit(f"read_per_{one}", medians[mode]["us_per_read"], "us", mode=mode, count=args.pods, runs=args.repeat)
    emit("memory_ratio", medians["shared"]["kib_per_pod"] / medians["stripped"]["kib_per_pod"], "x",
         kind=args.kind, count=args.pods)
    if "packed" in medians:
        emit("memory_ratio_packed", medians["packed"]["kib_per_pod"] / medians["stripped"]["kib_per_pod"], "x",
             kind=args.kind, count=args.pods)
    return 0
