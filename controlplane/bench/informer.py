"""``controlplane bench informer``: what a pod held by an informer costs, in memory and
CPU, with its common parts shared (``client/sharing.py``) and without (only
managedFields dropped, the peer).

Each measurement is a fresh process that parses ``--pods`` podgen pods from
JSON (realistic templates, sizes and per-pod randomness), passes each through
the transform and keeps them all, as an informer's ``items`` does; it reports
its resident memory grown per pod and the parse-and-transform time per pod.
The two modes alternate ``--repeat`` times; the medians are printed, one JSON
line per metric and mode, then their ratio.

    controlplane bench informer [--pods 20000] [--repeat 3]
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

BENCH = "informer"
MODES = ("stripped", "shared")


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 2), "unit": unit, **extra}),
          flush=True)


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def measure(mode: str, count: int) -> dict[str, float]:
    """In this process: hold ``count`` pods the ``mode`` way."""
    import orjson

    from controlplane.client.informer import strip_managed_fields
    from controlplane.client.sharing import PodSharer
    from controlplane.podgen import PodGenerator

    gen = PodGenerator(seed=1)
    raws = [gen.pod_json() for _ in range(count)]
    transform = PodSharer() if mode == "shared" else strip_managed_fields
    gc.collect()
    before = _rss_kib()
    held = {}
    started = time.perf_counter()
    for i, raw in enumerate(raws):
        held[i] = transform(orjson.loads(raw))
    elapsed = time.perf_counter() - started
    gc.collect()
    grown = _rss_kib() - before
    return {"kib_per_pod": grown / count, "us_per_pod": elapsed / count * 1e6, "held": float(len(held))}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench informer", description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a single measurement, in this process
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.pods)))
        return 0
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    for _ in range(args.repeat):
        for mode in MODES:
            out = subprocess.run([sys.executable, "-m", "controlplane", "bench", BENCH, "--one", mode,
                                  "--pods", str(args.pods)], capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    medians = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("kib_per_pod", "us_per_pod")}
               for m in MODES}
    for mode in MODES:
        emit("memory_per_pod", medians[mode]["kib_per_pod"], "KiB", mode=mode, pods=args.pods, runs=args.repeat)
        emit("parse_and_hold_per_pod", medians[mode]["us_per_pod"], "us", mode=mode, pods=args.pods,
             runs=args.repeat)
    emit("memory_ratio", medians["shared"]["kib_per_pod"] / medians["stripped"]["kib_per_pod"], "x",
         pods=args.pods)
    return 0
