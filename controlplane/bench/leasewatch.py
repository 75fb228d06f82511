"""``controlplane bench lease-watch``: what one watcher of the node Leases costs the
process that serves it and runs it, per renewal (the node lifecycle controller's Lease
informer, ``controllers/nodelifecycle.py``).

A server in this process (no components) holds ``--leases`` Leases; they are renewed
``--rounds`` times as the node simulator renews them, in LeaseRenewals of 2,000
(``api/leaserenewals.py``), with, side by side in one run:

- ``none``: no watcher (the renewals alone);
- ``raw``: a watch whose bytes are counted, not parsed (the server's delivery);
- ``parse``: the client's watch, each event parsed;
- ``controller``: the node lifecycle controller's Lease informer and its handler.

Each prints the process CPU per renewal, until every event has arrived; the LMDB
store's applier and syncer processes are left out (the same in every mode). Compare
medians of several runs: other processes share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from . import help_text

BENCH = "lease-watch"
MODES = ("none", "raw", "parse", "controller")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
RENEWALS = "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals"
BATCH = 2000


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _measure(mode: str, leases: int, rounds: int) -> float:
    """Process CPU seconds per renewal with a watcher of kind ``mode``."""
    from ..api.app import create_app
    from ..client import Client
    from ..client.transport import open_stream
    from ..config import Config
    from ..controllers.nodelifecycle import NodeLifecycleController

    with tempfile.TemporaryDirectory(prefix="bench-lease-watch-") as tmp:
        app = create_app(Config(data_dir=Path(tmp) / "data", tls=False, scheduler=False, log_level="warning"))
        async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client:
            names = [f"node-{i}" for i in range(leases)]
            for name in names:
                await client.create(LEASES, {"metadata": {"name": name}, "spec": {
                    "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _micro_time()}})
            seen = [0]

            async def raw() -> None:
                _, _, body = await open_stream(app.state.front, "GET", LEASES.encode(), b"watch=true",
                                               [(b"accept", b"application/json")], b"")
                async for chunk in body:
                    seen[0] += chunk.count(b"\n")

            async def parse() -> None:
                async for _ in client.watch(LEASES):
                    seen[0] += 1

            def controller() -> Any:
                c = NodeLifecycleController(client)
                handle = c._lease_changed

                def counted(lease: dict[str, Any]) -> None:
                    seen[0] += 1
                    handle(lease)
                c.leases.on_add, c.leases.on_update = counted, lambda _old, new: counted(new)
                return c.leases.run()

            runs = {"raw": raw, "parse": parse, "controller": controller}
            task = asyncio.ensure_future(runs[mode]()) if mode in runs else None
            await asyncio.sleep(1.0)  # the watch started (the informer's list delivered)
            before = seen[0]
            c0, t0 = time.process_time(), time.monotonic()
            for _ in range(rounds):
                for i in range(0, leases, BATCH):
                    await client.create(RENEWALS, {
                        "apiVersion": "nodes.controlplane.dev/v1alpha1", "kind": "LeaseRenewal",
                        "metadata": {"namespace": "kube-node-lease"},
                        "spec": {"renewTime": _micro_time(), "leases": names[i:i + BATCH]}})
            while task is not None and seen[0] - before < leases * rounds and time.monotonic() - t0 < 120:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            cpu = time.process_time() - c0
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            if task is not None and seen[0] - before < leases * rounds:
                raise RuntimeError(f"{mode}: {seen[0] - before} of {leases * rounds} events arrived")
            return cpu / (leases * rounds)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="controlplane bench lease-watch", description=help_text(__doc__, first=True))
    parser.add_argument("--leases", type=int, default=10_000, help="(default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10, help="renewals of every Lease (default: %(default)s)")
    parser.add_argument("--modes", default=",".join(MODES), help="(default: %(default)s)")
    args = parser.parse_args(argv)
    if args.leases < 1 or args.rounds < 1:
        parser.error("--leases and --rounds must be at least 1")
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes: {sorted(unknown)} (choose from {', '.join(MODES)})")
    logging.basicConfig(level=logging.WARNING)
    base = None
    for mode in modes:
        per = asyncio.run(_measure(mode, args.leases, args.rounds))
        if mode == "none":
            base = per
        extra = {} if base is None or mode == "none" else {"over_none_us": round((per - base) * 1e6, 2)}
        print(json.dumps({"bench": BENCH, "metric": "cpu_per_renewal", "value": round(per * 1e6, 2), "unit": "us",
                          "mode": mode, "leases": args.leases, "rounds": args.rounds, **extra}), flush=True)
    return 0
