"""``controlplane autoscaler``: the autoscaler against any API server.

    controlplane autoscaler --kubeconfig PATH [--instance-types FILE] [--latency-scale X] [--metrics-address HOST:PORT]

Only argparse is imported here: the autoscaler's modules load when the command runs.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from ..gcsettings import settle_heap
from ..metricsserver import AddressInUse, listen, serving
from ..metricsserver import add_argument as add_metrics_argument

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("autoscaler", help="run the Karpenter-like autoscaler against an API server",
                       description="Provision nodes for unschedulable pods and consolidate them (karpenter.sh/v1 "
                                   "NodePools and NodeClaims), as a client of an API server. Installs the "
                                   "karpenter.sh CRDs if missing. Run the node simulator too (controlplane "
                                   "nodes) so that the launched nodes run their pods.")
    p.add_argument("--kubeconfig", type=Path, required=True, help="the kubeconfig of the server to use")
    p.add_argument("--instance-types", type=Path, default=None, metavar="FILE",
                   help="an instance-type catalog (YAML/JSON) replacing the built-in one")
    p.add_argument("--latency-scale", type=float, default=1.0, metavar="X",
                   help="multiply every instance type's launch latency by X (default: %(default)s)")
    p.add_argument("--batch-idle", type=float, default=1.0, metavar="SECONDS",
                   help="close a batch of pending pods after this long without a new one (default: %(default)s)")
    p.add_argument("--batch-max", type=float, default=10.0, metavar="SECONDS",
                   help="close a batch at the latest this long after it opened (default: %(default)s)")
    add_metrics_argument(p, 8080, "Karpenter's controller")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=_run)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import asyncio

    from ..logsetup import configure as configure_logging

    configure_logging(args.log_level)
    if args.latency_scale < 0 or args.batch_idle <= 0 or args.batch_max < args.batch_idle:
        print("controlplane autoscaler: error: need --latency-scale >= 0 and 0 < --batch-idle <= --batch-max",
              file=sys.stderr)
        return 2
    try:
        sock = listen("controlplane autoscaler", args.metrics_address)
    except AddressInUse as e:
        print(e, file=sys.stderr)
        return 1
    before = signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops it as a Ctrl-C does: cleanly, exit 0
    try:
        return asyncio.run(_main(args, sock))
    except KeyboardInterrupt:
        return 0
    finally:
        if before is not None:  # the caller's own, where it is one (tests run it in process)
            signal.signal(signal.SIGTERM, before)
        if sock is not None:
            sock.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


async def _main(args: argparse.Namespace, metrics_socket: socket.socket | None) -> int:
    import httpx

    from ..client import ApiError, Client, KubeconfigError
    from ..metrics import AUTOSCALER_METRICS, component_registry
    from .catalog import Catalog, load
    from .controller import Autoscaler

    try:
        catalog = load(args.instance_types) if args.instance_types else Catalog.default()
    except (OSError, ValueError) as e:
        print(f"controlplane autoscaler: error: {e}", file=sys.stderr)
        return 1
    settle_heap()  # a long-running process: the collector's settings of gcsettings
    try:
        client = Client.from_kubeconfig(args.kubeconfig).as_agent("karpenter")
    except KubeconfigError as e:
        print(f"controlplane autoscaler: error: {e}", file=sys.stderr)
        return 1
    try:
        autoscaler = Autoscaler(client, catalog, latency_scale=args.latency_scale, batch_idle=args.batch_idle,
                                batch_max=args.batch_max)
        async with serving("controlplane autoscaler", metrics_socket, component_registry(AUTOSCALER_METRICS),
                           autoscaler.synced.is_set):
            await autoscaler.run()
    except ApiError as e:
        print(f"controlplane autoscaler: error: {e}", file=sys.stderr)
        return 1
    except httpx.TransportError as e:  # its start installs the CRDs: a server it cannot reach ends it there
        print(f"controlplane autoscaler: error: {e}", file=sys.stderr)
        return 1
    finally:
        await client.aclose()
    return 0
