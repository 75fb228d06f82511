"""``controlplane nodes``: the node simulator against any API server.

    controlplane nodes --kubeconfig PATH --count N [--stages FILE | --enable-crds Stage] [--instance-type T] ...
                       [--metrics-address HOST:PORT]
    controlplane nodes --kubeconfig PATH --fail NODE [--mode unreachable|not-ready]
    controlplane nodes --kubeconfig PATH --recover NODE

Only argparse is imported here: the simulator's modules load when the command runs.
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

__all__ = ["add_parser", "enable_crds"]

# KWOK's --enable-crds values (its CRDs besides Stage serve exec, logs, port-forward, usage, metrics)
KWOK_CRDS = ("Stage", "Attach", "ClusterAttach", "Exec", "ClusterExec", "PortForward", "ClusterPortForward",
             "Logs", "ClusterLogs", "ResourceUsage", "ClusterResourceUsage", "Metric")
SUPPORTED_CRDS = ("Stage",)
FAKE_SELECTOR = "kwok.x-k8s.io/node=fake"  # (config.FAKE_SELECTOR, without importing the simulator's modules)


def go_bool(text: str) -> bool:
    """A Go flag's boolean (``--manage-all-nodes=false``), as strconv.ParseBool reads it."""
    from ..cli import _go_bool

    return _go_bool(text)


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """KWOK's flags choosing the nodes a simulator plays (``serve`` and ``controlplane nodes``)."""
    p.add_argument("--manage-nodes-with-label-selector", default="", metavar="SELECTOR",
                   help="as KWOK's: play only the fake nodes whose labels match (its key=value terms are "
                        "given to the nodes it creates), so that two simulators on one server take "
                        "their own nodes (default: every node annotated kwok.x-k8s.io/node: fake)")
    p.add_argument("--manage-nodes-with-annotation-selector", default=None, metavar="SELECTOR",
                   help="as KWOK's: the nodes that are fake, by their annotations (its key=value terms are "
                        f"given to the nodes it creates; \"\" for every node; default: {FAKE_SELECTOR}, "
                        "kwokctl's)")
    p.add_argument("--manage-all-nodes", type=go_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="as KWOK's: play the kubelet of every node, whatever its labels and annotations "
                        "(not with the selectors; default: false)")


def selection(args: argparse.Namespace) -> dict[str, Any]:
    """``SimConfig``'s fields from ``add_selection_arguments``'; ValueError where KWOK refuses them."""
    annotations = args.manage_nodes_with_annotation_selector
    if args.manage_all_nodes and (args.manage_nodes_with_label_selector or annotations is not None):
        raise ValueError("--manage-all-nodes conflicts with --manage-nodes-with-label-selector and "
                         "--manage-nodes-with-annotation-selector (as KWOK's)")
    return {"node_selector": args.manage_nodes_with_label_selector, "manage_all_nodes": args.manage_all_nodes,
            "node_annotation_selector": FAKE_SELECTOR if annotations is None else annotations}


def leases(args: argparse.Namespace) -> dict[str, Any]:
    """``SimConfig``'s lease fields: KWOK's --node-lease-duration-seconds sets the duration and,
    unless --renew-interval says otherwise, renewals every quarter of it (the kubelet's rule, which
    KWOK's lease controller follows); KWOK's 0 (no Leases, nodes kept by a heartbeat stage) is
    refused by name: the simulated kubelets always hold one."""
    duration = args.node_lease_duration_seconds
    if duration <= 0:
        raise ValueError(f"--node-lease-duration-seconds {duration}: nodes without Leases (KWOK's 0) are not "
                         "supported here; the simulated kubelets always renew one (give a duration, 40 by default)")
    interval = args.renew_interval if args.renew_interval is not None else duration / 4
    if interval <= 0:
        raise ValueError("--renew-interval must be above 0")
    return {"lease_duration_seconds": duration, "renew_interval": interval}


def enable_crds(values: list[str] | None, stage_files: object) -> tuple[str, ...]:
    """``--enable-crds`` as KWOK reads it (repeated, or comma-separated), checked: only ``Stage``
    is served here, and not with stage files (KWOK refuses Stages both in its --config and from
    the API). A ValueError says what is wrong."""
    out: list[str] = []
    for value in values or ():
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            if name not in SUPPORTED_CRDS:
                what = "is not supported here" if name in KWOK_CRDS else "is not one of KWOK's CRDs"
                raise ValueError(f"--enable-crds: {name} {what} (supported: {', '.join(SUPPORTED_CRDS)})")
            if name not in out:
                out.append(name)
    if "Stage" in out and stage_files:
        raise ValueError("--stages and --enable-crds Stage cannot be used together: with Stage the stages "
                         "are the Stage objects in the API server (kubectl apply -f FILE puts a file's there)")
    return tuple(out)


def add_parser(sub: Any) -> None:
    from ..cli import _fraction  # (controlplane.cli calls this, loaded by then)

    p = sub.add_parser("nodes", help="simulate nodes (KWOK-like) against an API server",
                       description="Simulate nodes and the pods bound to them, as a client of an API server: "
                                   "create --count nodes and manage every node annotated kwok.x-k8s.io/node=fake. "
                                   "With --fail/--recover, inject a node failure and exit.")
    p.add_argument("--kubeconfig", type=Path, required=True, help="the kubeconfig of the server to use")
    p.add_argument("--count", type=int, default=0, help="nodes to create at start (default: %(default)s)")
    p.add_argument("--stages", type=Path, action="append", default=None, metavar="FILE",
                   help="KWOK Stage YAML (multi-document) replacing the built-in stages; repeat it for "
                        "several files, as KWOK's --config; a directory is read as a kustomization (its "
                        "resources), as KWOK's --config reads one")
    p.add_argument("--enable-crds", action="append", default=None, metavar="CRD",
                   help="as KWOK's: Stage takes the stages from the Stage objects (kwok.x-k8s.io/v1alpha1) "
                        "stored in the API server, following their changes, and installs their CRD if it "
                        "is absent (repeat it or separate with commas; only Stage is supported)")
    p.add_argument("--instance-type", default=None,
                   help="the created nodes' type (default: cpu-large, or the first of an --instance-types "
                        "catalog without it)")
    p.add_argument("--instance-types", type=Path, default=None, metavar="FILE",
                   help="an instance-type catalog (YAML/JSON) replacing the built-in one")
    p.add_argument("--name-prefix", default="sim-node-", help="(default: %(default)s)")
    add_selection_arguments(p)
    p.add_argument("--renew-interval", type=float, default=None, metavar="SECONDS",
                   help="lease renewal interval (default: a quarter of --node-lease-duration-seconds, 10.0)")
    p.add_argument("--node-lease-duration-seconds", type=int, default=40, metavar="N",
                   help="as KWOK's (and the kubelet's): the Leases' leaseDurationSeconds, renewed every quarter of "
                        "it (default: %(default)s, kwokctl's; 0, KWOK's nodes without Leases, is not supported)")
    p.add_argument("--put-leases", action="store_true",
                   help="renew each Lease with a PUT, as a kubelet does, even where the server serves "
                        "LeaseRenewals (this emulator's bulk renewals, used by default where served)")
    p.add_argument("--no-pod-events", dest="pod_events", action="store_false",
                   help="record no kubelet Events about pods' containers (Pulling, Pulled, Created, Started, "
                        "Killing), three or more writes a pod fewer (default: recorded, as a kubelet does)")
    p.add_argument("--no-node-events", dest="node_events", action="store_false",
                   help="record no kubelet Events about the nodes (Starting, NodeHasSufficientMemory, NodeReady, "
                        "NodeNotSchedulable, ...), six writes a node fewer at registration (default: recorded, "
                        "as a kubelet does)")
    p.add_argument("--no-csi-nodes", dest="csi_nodes", action="store_false",
                   help="register no CSINode (storage.k8s.io/v1) with each node (default: registered, owned by "
                        "the Node and deleted with it, as a kubelet does)")
    p.add_argument("--job-seconds", type=float, default=1.0,
                   help="how long restartPolicy Never/OnFailure pods run with the built-in stages "
                        "(default: %(default)s)")
    p.add_argument("--job-failure-rate", type=_fraction, default=0.0, metavar="P",
                   help="with the built-in stages, each run of a Job's pod fails with probability P, exiting "
                        "--job-failure-exit-code; pods say their own with sim.controlplane.dev/ annotations "
                        "(docs/nodes.md#containers-that-fail; default: %(default)s)")
    p.add_argument("--job-failure-exit-code", type=int, default=1, metavar="N",
                   help="the exit code of those failures (default: %(default)s)")
    # until 2026-12-03 the simulator marked its failed nodes Unknown itself, after this long; the
    # server's node lifecycle controller does it now (serve --node-monitor-grace-period)
    p.add_argument("--node-monitor-grace-period", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--fail", metavar="NODE", help="inject a failure into NODE and exit")
    p.add_argument("--mode", choices=("unreachable", "not-ready"), default="unreachable",
                   help="the failure --fail injects (default: %(default)s)")
    p.add_argument("--recover", metavar="NODE", help="clear NODE's injected failure and exit")
    add_metrics_argument(p, 10247, "KWOK's controller")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=_run)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import asyncio

    from ..logsetup import configure as configure_logging

    configure_logging(args.log_level)
    if args.count < 0:
        print("controlplane nodes: error: --count must be >= 0", file=sys.stderr)
        return 2
    try:
        args.enable_crds = enable_crds(args.enable_crds, args.stages)
        args.selection = selection(args)
        args.leases = leases(args)
    except ValueError as e:
        print(f"controlplane nodes: error: {e}", file=sys.stderr)
        return 2
    try:  # (--fail and --recover only write and exit: no metrics)
        sock = None if args.fail or args.recover else listen("controlplane nodes", args.metrics_address)
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


def _say_what_it_plays(server: str, args: argparse.Namespace, names: list[str]) -> None:
    """One line at the start, once the simulator knows the names of the nodes it creates (those
    nodes it does not play hold passed over): it prints nothing else while all goes well."""
    import logging

    count = len(names)
    made = f"creating {count} node{'s' if count > 1 else ''} ({_span(args.name_prefix, names)}), " if count else ""
    which = (f" labelled {args.manage_nodes_with_label_selector}" if args.manage_nodes_with_label_selector else "")
    annotations = args.manage_nodes_with_annotation_selector
    nodes = ("every node" if args.manage_all_nodes or annotations == "" else
             "every node annotated kwok.x-k8s.io/node: fake" if annotations is None else
             f"every node annotated {annotations}")
    logging.getLogger("controlplane.nodes").info(
        "controlplane nodes: against %s: %splaying the kubelet of %s%s; Ctrl-C stops it", server, made, nodes, which)


def _span(prefix: str, names: list[str]) -> str:
    """Node names ``{prefix}{index}`` as the start line gives them: ``sim-node-0..sim-node-4``
    for a run of consecutive indexes, else each of up to four, or the first and the last."""
    first, last = names[0], names[-1]
    start = int(first[len(prefix):])
    if names == [f"{prefix}{i}" for i in range(start, start + len(names))]:
        return first if len(names) == 1 else f"{first}..{last}"
    return ", ".join(names) if len(names) <= 4 else f"{first}, ..., {last}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


async def _main(args: argparse.Namespace, metrics_socket: socket.socket | None) -> int:
    import asyncio

    from ..client import ApiError, Client, KubeconfigError
    from ..metrics import NODES_METRICS, component_registry

    settle_heap()  # a long-running process: the collector's settings of gcsettings
    if args.node_monitor_grace_period is not None:
        print("controlplane nodes: --node-monitor-grace-period is ignored: the server's node lifecycle "
              "controller turns a silent node Unknown (controlplane serve --node-monitor-grace-period)",
              file=sys.stderr)
    try:
        client = Client.from_kubeconfig(args.kubeconfig).as_agent("kubelet")
    except KubeconfigError as e:
        print(f"controlplane nodes: error: {e}", file=sys.stderr)
        return 1
    try:
        if args.fail or args.recover:
            from .failures import clear_failure, inject_failure

            try:
                if args.fail:
                    await inject_failure(client, args.fail, args.mode)
                else:
                    await clear_failure(client, args.recover)
            except ApiError as e:
                print(f"controlplane nodes: error: {e}", file=sys.stderr)
                return 1
            return 0
        from .config import SimConfig
        from .instancetypes import DEFAULT_CATALOG, created_node_type, load_catalog
        from .simulator import NodeSimulator
        from .stages import StageError, load_stages, read_stage_files

        try:
            stages = load_stages(read_stage_files(args.stages)) if args.stages else None
            catalog = load_catalog(args.instance_types) if args.instance_types else DEFAULT_CATALOG
            sim = NodeSimulator(client, SimConfig(
                count=args.count, stages=stages, stages_from_api="Stage" in args.enable_crds,
                instance_type=args.instance_type or created_node_type(catalog), catalog=catalog,
                name_prefix=args.name_prefix, **args.leases, job_seconds=args.job_seconds,
                lease_renewals=not args.put_leases, **args.selection,
                pod_events=args.pod_events, node_events=args.node_events, csi_nodes=args.csi_nodes,
                job_failure_rate=args.job_failure_rate, job_failure_exit_code=args.job_failure_exit_code))
        except (OSError, ValueError, StageError) as e:
            print(f"controlplane nodes: error: {e}", file=sys.stderr)
            return 1
        server = str(client.http.base_url).rstrip("/")

        async def say_what_it_plays() -> None:
            _say_what_it_plays(server, args, await sim.named())

        saying = asyncio.create_task(say_what_it_plays())
        try:
            async with serving("controlplane nodes", metrics_socket, component_registry(NODES_METRICS),
                               sim.synced):
                await sim.run()
        finally:
            saying.cancel()
        return 0
    finally:
        await client.aclose()
