"""The ``controlplane`` command (also ``python -m controlplane``).

    controlplane serve [--host H] [--port P] [--data-dir D] [--store URL] ...
    controlplane scheduler --kubeconfig PATH [--metrics-address HOST:PORT]
    controlplane bench NAME [ARGS...]
    controlplane nodes --kubeconfig PATH --count N [--stages FILE]

Option names are fixed by DESIGN.md. Heavy modules (uvicorn, FastAPI, the
store, a benchmark's own) are imported inside the subcommand that needs them:
the server must be listening within a second of the command starting.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import logging
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ADMISSION_WEBHOOK_MODES, AUTHORIZATION_MODES, HTTP_PROTOCOLS, LOG_LEVELS, SNAPSHOT_MODES
from .controllermanager import DEFAULT as DEFAULT_CONTROLLERS
from .controllermanager import DISABLED_BY_DEFAULT
from .controllermanager import KNOWN as KNOWN_CONTROLLERS
from .controllermanager import parse_list as parse_controllers
from .metricsserver import add_argument as add_metrics_argument

if TYPE_CHECKING:
    from .config import AuditLog, Config
    from .identities import Identities

__all__ = ["build_parser", "main"]

STORE_SCHEMES = ("lmdb://", "etcd://")


_GO_DURATION = re.compile(r"((\d+(\.\d*)?|\.\d+)(h|ms|m|s))+\Z")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(text: str) -> float:
    """Seconds, from a number of seconds or a Go duration (``5m``, ``1m30s``, ``500ms``): finite,
    not negative (a period of ``nan`` or ``-1`` is nothing a timer can wait)."""
    try:
        seconds = float(text)
    except ValueError:
        if not _GO_DURATION.match(text):
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, or as 5m, 90s, 1h)") from None
        return sum(float(n) * _GO_UNITS[unit] for n, _, unit in re.findall(r"(\d+(\.\d*)?|\.\d+)(h|ms|m|s)", text))
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, or as 5m, 90s, 1h)")
    return seconds


def _period(text: str) -> float:
    """A duration that a loop waits between its rounds: more than zero (zero would spin it)."""
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"not a period: {text!r} (more than zero: seconds, or as 5m, 90s, 1h)")
    return seconds


_DNS_LABEL = re.compile(r"(\*|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\Z")


def _tls_sans(text: str) -> list[str]:
    """``--tls-san``'s names: IP addresses, or DNS names (lowercase labels; a wildcard first label)."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no name in {text!r}")
    for name in names:
        try:
            ipaddress.ip_address(name)
            continue
        except ValueError:
            pass
        labels = name.split(".")
        if (len(name) > 253 or not all(_DNS_LABEL.match(label) for label in labels)
                or "*" in labels[1:]):
            raise argparse.ArgumentTypeError(f"{name!r} is neither an IP address nor a DNS name")
    return names


def _fraction(text: str) -> float:
    """A probability: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"not a probability from 0 to 1: {text!r}")
    return value


_GO_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
             **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


def _go_bool(text: str) -> bool:
    """A Go flag's boolean (``--flag=false``), as strconv.ParseBool reads it."""
    if text not in _GO_BOOLS:
        raise argparse.ArgumentTypeError(f"not a boolean: {text!r} (true or false)")
    return _GO_BOOLS[text]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="controlplane",
        description="A high-throughput emulator of the Kubernetes control plane.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the API server", description="Run the API server.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=6443, help="port to listen on (default: %(default)s)")
    serve.add_argument("--data-dir", type=Path, default=Path(".controlplane/data"),
                       help="where the embedded store keeps its files (default: %(default)s)")
    serve.add_argument("--store", metavar="URL", default="",
                       help="lmdb://PATH or etcd://HOST:PORT[,HOST:PORT...] (default: lmdb://DATA_DIR)")
    serve.add_argument("--kubeconfig-out", metavar="PATH", type=Path, default=Path(".controlplane/kubeconfig"),
                       help="where to write a kubeconfig for the admin user (default: %(default)s)")
    serve.add_argument("--token-auth-file", metavar="CSV", type=Path, default=None,
                       help='static tokens, kube-apiserver format: token,user,uid,"group1,group2" '
                            "(default: generate an admin token into tokens.csv beside DATA_DIR)")
    serve.add_argument("--tls-cert-file", metavar="PEM", type=Path, default=None,
                       help="the serving certificate, with its chain (default: one signed by a CA generated "
                            "into pki/ beside DATA_DIR)")
    serve.add_argument("--tls-private-key-file", metavar="PEM", type=Path, default=None,
                       help="the key of --tls-cert-file")
    serve.add_argument("--tls-san", metavar="NAMES", dest="tls_sans", action="extend", default=[],
                       type=_tls_sans,
                       help="more DNS names or IP addresses the generated serving certificate covers, "
                            "comma-separated or repeated, as k3s's flag: the names other machines or "
                            "containers reach this server by (replicas sharing pki/ should be given the same)")
    serve.add_argument("--client-ca-file", metavar="PEM", type=Path, default=None,
                       help="authenticate a client certificate this CA signed as its subject's CN, in the "
                            "groups of its O entries, as kube-apiserver's flag (default: the generated CA, which "
                            "issues approved CertificateSigningRequests, as kubeadm's; none with --tls-cert-file "
                            "or --http-protocol uvicorn)")
    serve.add_argument("--no-tls", dest="tls", action="store_false",
                       help="serve plain HTTP (clients then send no credentials: requests are anonymous)")
    serve.add_argument("--authorization-mode", default="AlwaysAllow", metavar="MODES",
                       help="the authorizers, in order, comma-separated, of: " + ", ".join(AUTHORIZATION_MODES)
                            + " (kubeadm's: Node,RBAC; RBAC without Node denies the kubelets, as upstream: the "
                              "simulated nodes then write as KWOK's controller; default: %(default)s)")
    serve.add_argument("--admission-webhooks", choices=ADMISSION_WEBHOOK_MODES, default="reachable",
                       help="which admission and CRD conversion webhooks are called: reachable (those with a "
                            "url, or a Service of type ExternalName or without a selector whose endpoints a user "
                            "wrote; webhooks of Services backed by simulated pods are left out, a CRD's objects "
                            "then converted as with the None strategy), all (every one, as kube-apiserver: an "
                            "unreachable one's failurePolicy applies, a conversion fails) or off "
                            "(default: %(default)s)")
    serve.add_argument("--admission-control-config-file", metavar="YAML", type=Path, default=None,
                       help="kube-apiserver's AdmissionConfiguration file; its PodSecurity plugin's "
                            "PodSecurityConfiguration (defaults, exemptions) is read, other plugins' entries "
                            "ignored (default: privileged for enforce, audit and warn, no exemptions)")
    serve.add_argument("--disable-admission-plugins", metavar="LIST", default=(),
                       type=lambda v: tuple(p.strip() for p in v.split(",") if p.strip()),
                       help="as kube-apiserver's, of the admission plugins on by default: only "
                            "TaintNodesByCondition (new Nodes tainted node.kubernetes.io/not-ready:NoSchedule until "
                            "the node lifecycle controller finds them Ready), which a server whose nodes no such "
                            "controller watches (--no-scheduler, an external scheduler) may turn off, as upstream's "
                            "integration tests do (default: none)")
    serve.add_argument("--nodes", type=int, default=0, metavar="N",
                       help="simulated nodes to create at start (default: %(default)s)")
    serve.add_argument("--autoscaler", action="store_true",
                       help="run the Karpenter-like autoscaler and the node simulator (default: the autoscaler runs "
                            "only if a karpenter.sh NodePool is stored when the server starts)")
    serve.add_argument("--instance-types", type=Path, default=None, metavar="FILE",
                       help="an instance-type catalog (YAML/JSON) replacing the built-in one")
    serve.add_argument("--stages", type=Path, action="append", default=[], metavar="FILE",
                       help="KWOK Stage YAML replacing the simulated nodes' built-in stages; repeat it for several "
                            "files, as KWOK's --config (as controlplane nodes --stages); a directory is read as "
                            "KWOK reads one, as a kustomization (its resources), e.g. KWOK's kustomize/stage/fast")
    serve.add_argument("--enable-crds", action="append", default=[], metavar="CRD",
                       help="as KWOK's (and controlplane nodes'): Stage runs the node simulator with the stages "
                            "of the Stage objects (kwok.x-k8s.io/v1alpha1) stored in this server, following their "
                            "changes, and installs their CRD (only Stage is supported)")
    from .nodes.cli import add_selection_arguments

    add_selection_arguments(serve)  # KWOK's --manage-nodes-with-{label,annotation}-selector, --manage-all-nodes
    serve.add_argument("--no-pod-events", dest="pod_events", action="store_false",
                       help="the simulated nodes' kubelets record no Events about pods' containers (Pulling, "
                            "Pulled, Created, Started, Killing), three or more writes a pod fewer (default: "
                            "they do, as a kubelet, and kubectl describe pod shows them)")
    serve.add_argument("--no-node-events", dest="node_events", action="store_false",
                       help="the simulated nodes' kubelets record no Events about their nodes (Starting, "
                            "NodeHasSufficientMemory, NodeReady, NodeNotSchedulable, ...), six writes a node "
                            "fewer at registration (default: they do, as a kubelet, and kubectl describe node "
                            "shows them)")
    failures = serve.add_argument_group(
        "simulated container failures", "the built-in stages' failure model (docs/nodes.md#containers-that-fail); "
                                        "a pod says its own with sim.controlplane.dev/ annotations")
    failures.add_argument("--job-failure-rate", type=_fraction, default=0.0, metavar="P",
                          help="each run of a Job's pod fails with probability P (default: %(default)s)")
    failures.add_argument("--job-failure-exit-code", type=int, default=1, metavar="N",
                          help="the exit code of those failures (default: %(default)s)")
    failures.add_argument("--crash-loop-backoff", type=_duration, default=10.0, metavar="DURATION",
                          help="the kubelet's first back-off before restarting a failed container, doubling with "
                               "each restart (upstream's constant: for tests; default: 10s)")
    failures.add_argument("--crash-loop-max-backoff", type=_duration, default=300.0, metavar="DURATION",
                          help="the longest such back-off (upstream's constant; default: 5m)")
    serve.add_argument("--no-csi-nodes", dest="csi_nodes", action="store_false",
                       help="the simulated nodes' kubelets register no CSINode (storage.k8s.io/v1) with their "
                            "Node, a create and a stored object a node fewer (default: they do, as a kubelet)")
    serve.add_argument("--volume-provisioners", default="*", metavar="LIST",
                       help="the external provisioners the simulated one provisions volumes for, comma-separated "
                            "('*': every one), besides the CSI drivers a CSIDriver object registers; a claim of "
                            "any other class stays Pending, as where nothing runs its provisioner (default: '*', "
                            "as a cluster runs the provisioners of its classes; '' for only those of a CSIDriver)")
    serve.add_argument("--no-scheduler", dest="scheduler", action="store_false",
                       help="do not run the built-in scheduler, nor the controllers (workloads, Jobs, the node "
                            "lifecycle and taint eviction controllers, ...): only the API server, the node simulator "
                            "and the autoscaler if asked for, and the clusterrole aggregation controller")
    serve.add_argument("--controllers", action="append", type=parse_controllers, metavar="LIST",
                       help="as kube-controller-manager's: the controllers to run, '*' for every one on by "
                            "default, 'foo' to turn on the one named foo, '-foo' to turn it off; the first entry "
                            "naming a controller decides; repeated, the lists are joined (default: *). Names of "
                            "upstream controllers this server does not have are accepted and ignored. Only "
                            "kube-controller-manager's controllers read it, not the scheduler, the simulated "
                            "nodes, the autoscaler nor the API server's own (--no-scheduler still turns all off). "
                            "All controllers: " + ", ".join(KNOWN_CONTROLLERS) + ". Disabled-by-default "
                            "controllers: " + ", ".join(sorted(DISABLED_BY_DEFAULT)))
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="API server processes sharing the port (SO_REUSEPORT) over one store, each with its own "
                            "watch cache; the components run in the first (default: %(default)s)")
    serve.add_argument("--components-process", action="store_true",
                       help="run the scheduler, the node simulator and the controllers in a process of their own, "
                            "a client of this server over its socket, instead of inside it: they get a core of "
                            "their own (this server's /metrics shows theirs, read from that process)")
    serve.add_argument("--watch-cache-snapshot", choices=SNAPSHOT_MODES, default="lazy",
                       help="lazy (copy-on-write) or copy (the naive baseline) (default: %(default)s)")
    serve.add_argument("--http-protocol", choices=HTTP_PROTOCOLS, default="controlplane",
                       help="the HTTP/1.1 implementation on the connections: this project's (one write per "
                            "response) or uvicorn's httptools protocol, the benchmarks' peer (default: %(default)s)")
    serve.add_argument("--max-requests-inflight", type=int, default=400, metavar="N",
                       help="as kube-apiserver's: with API Priority and Fairness, this plus "
                            "--max-mutating-requests-inflight is each server process's concurrency limit, shared "
                            "by the priority levels; without it, the reads served at a time (0: no limit) "
                            "(default: %(default)s)")
    serve.add_argument("--max-mutating-requests-inflight", type=int, default=200, metavar="N",
                       help="as kube-apiserver's: see --max-requests-inflight; without API Priority and Fairness, "
                            "the writes served at a time (0: no limit) (default: %(default)s)")
    serve.add_argument("--enable-priority-and-fairness", type=_go_bool, nargs="?", const=True, default=True,
                       metavar="BOOL",
                       help="classify, queue and reject requests by the FlowSchemas and PriorityLevelConfigurations "
                            "(API Priority and Fairness); =false for the max-in-flight limits instead "
                            "(default: true)")
    serve.add_argument("--etcd-compaction-interval", type=_duration, default=300.0, metavar="DURATION",
                       help="how often the store's history is compacted, as kube-apiserver's flag: seconds or a "
                            "Go duration (5m, 90s); what is older than one to two intervals then answers 410 "
                            "Gone; 0 never compacts (default: 5m)")
    serve.add_argument("--event-ttl", type=_duration, default=3600.0, metavar="DURATION",
                       help="how long an Event is kept after its last write, as kube-apiserver's flag: seconds or "
                            "a Go duration (1h, 90m); 0 keeps Events for ever (default: 1h)")
    lifecycle = serve.add_argument_group(
        "node lifecycle controller", "kube-controller-manager's flags of the same names (docs/nodes.md)")
    lifecycle.add_argument("--node-monitor-period", type=_period, default=5.0, metavar="DURATION",
                           help="how often every node's health is checked (default: 5s)")
    lifecycle.add_argument("--node-monitor-grace-period", type=_duration, default=50.0, metavar="DURATION",
                           help="a node whose Lease and status have not moved for this long turns Ready Unknown "
                                "(default: 50s)")
    lifecycle.add_argument("--node-startup-grace-period", type=_duration, default=60.0, metavar="DURATION",
                           help="the same, from its creation, for a node that never posted a Ready condition "
                                "(default: 1m)")
    lifecycle.add_argument("--node-eviction-rate", type=float, default=0.1, metavar="QPS",
                           help="nodes a second given the not-ready/unreachable NoExecute taint, per zone "
                                "(default: %(default)s)")
    lifecycle.add_argument("--secondary-node-eviction-rate", type=float, default=0.01, metavar="QPS",
                           help="the same in a zone whose unhealthy share reaches --unhealthy-zone-threshold; 0 in "
                                "a zone of at most --large-cluster-size-threshold nodes (default: %(default)s)")
    lifecycle.add_argument("--unhealthy-zone-threshold", type=float, default=0.55, metavar="FRACTION",
                           help="(default: %(default)s)")
    lifecycle.add_argument("--large-cluster-size-threshold", type=int, default=50, metavar="N",
                           help="(default: %(default)s)")
    jobs = serve.add_argument_group(
        "Job controller", "upstream's constants, not flags of kube-controller-manager's: for tests "
                          "(docs/operations.md)")
    jobs.add_argument("--job-pod-failure-backoff", type=_duration, default=10.0, metavar="DURATION",
                      help="the delay before a Job's failed pod is replaced, doubling with each consecutive "
                           "failure (default: 10s)")
    jobs.add_argument("--job-pod-failure-max-backoff", type=_duration, default=360.0, metavar="DURATION",
                      help="the longest such delay (default: 6m)")
    serve.add_argument("--terminated-pod-gc-threshold", type=int, default=12_500, metavar="N",
                       help="finished pods (Succeeded or Failed) kept before the pod garbage collector deletes "
                            "the oldest, as kube-controller-manager's flag; 0 or less: never (default: %(default)s)")
    serve.add_argument("--horizontal-pod-autoscaler-sync-period", type=_period, default=15.0, metavar="DURATION",
                       help="how often each HorizontalPodAutoscaler is reconciled, and how long a new or changed "
                            "one waits for its first reconcile, as kube-controller-manager's flag (default: 15s)")
    serve.add_argument("--horizontal-pod-autoscaler-cpu-initialization-period", type=_duration, default=300.0,
                       metavar="DURATION",
                       help="how long after a pod's start its CPU counts for an autoscaler only once the pod has "
                            "been ready for a whole metric window (15 s), as kube-controller-manager's flag "
                            "(default: 5m)")
    accounts = serve.add_argument_group("service account tokens", "as kube-apiserver's flags of the same names")
    accounts.add_argument("--service-account-issuer", action="append", default=[], metavar="ISSUER",
                          help="the iss of the tokens issued; repeat it to accept tokens of earlier issuers too "
                               "(default: https://kubernetes.default.svc.cluster.local)")
    accounts.add_argument("--service-account-signing-key-file", type=Path, default=None, metavar="PEM",
                          help="the RSA or ECDSA private key that signs the tokens (default: pki/sa.key beside "
                               "DATA_DIR, generated once)")
    accounts.add_argument("--service-account-key-file", action="append", type=Path, default=[], metavar="PEM",
                          help="public keys (or private keys, certificates) that verify tokens; repeat it for "
                               "several files (default: the signing key; with the generated key, they verify "
                               "besides it, e.g. the key it replaced)")
    accounts.add_argument("--service-account-jwks-uri", default="", metavar="URL",
                          help="the jwks_uri of /.well-known/openid-configuration (default: this server's "
                               "/openid/v1/jwks)")
    accounts.add_argument("--api-audiences", action="append", default=[], metavar="AUDIENCES",
                          help="the audiences of the API, comma-separated: a token for none of them is refused, "
                               "TokenRequests default to them (default: the issuers)")
    accounts.add_argument("--service-account-max-token-expiration", type=_duration, default=0.0,
                          metavar="DURATION",
                          help="the longest a TokenRequest's token is valid: a longer one is shortened to it, "
                               "with a warning (1h to 2^32 s, as 24h; default: no limit)")
    accounts.add_argument("--service-account-extend-token-expiration", type=_go_bool, nargs="?", const=True,
                          default=True, metavar="BOOL",
                          help="a pod-bound token asked for 3607 s (kubelet's) is valid a year, warned about "
                               "after the 3607 s, whatever the maximum (default: true; =false to turn it off)")
    audit = serve.add_argument_group("audit logging", "as kube-apiserver's flags of the same names "
                                                      "(docs/operations.md); on with a policy file and a path")
    audit.add_argument("--audit-policy-file", type=Path, default=None, metavar="YAML",
                       help="the audit.k8s.io/v1 Policy deciding each request's audit level")
    audit.add_argument("--audit-log-path", default="", metavar="PATH",
                       help="the file audit events are appended to, one a line; '-' means standard out")
    audit.add_argument("--audit-log-format", default="json", metavar="FORMAT",
                       help='json (the audit.k8s.io/v1 Event) or legacy (a 1-line text) (default: %(default)s)')
    audit.add_argument("--audit-log-mode", default="blocking", metavar="MODE",
                       help="blocking (written by the event loop itself, before it next waits for the network) "
                            "or batch (queued and written by a background thread) (default: %(default)s)")
    audit.add_argument("--audit-log-maxage", type=int, default=0, metavar="DAYS",
                       help="the maximum number of days to retain old audit log files based on the timestamp "
                            "encoded in their filename (default: no limit)")
    audit.add_argument("--audit-log-maxbackup", type=int, default=0, metavar="N",
                       help="the maximum number of old audit log files to retain (default: all)")
    audit.add_argument("--audit-log-maxsize", type=int, default=0, metavar="MB",
                       help="the maximum size in megabytes of the audit log file before it gets rotated "
                            "(default: 100)")
    audit.add_argument("--audit-log-compress", type=_go_bool, nargs="?", const=True, default=False,
                       metavar="BOOL", help="rotated log files are gzipped (default: false)")
    audit.add_argument("--audit-log-batch-buffer-size", type=int, default=10000, metavar="N",
                       help="events queued in batch mode before new ones are dropped (default: %(default)s)")
    for backend in ("log", "webhook"):
        audit.add_argument(f"--audit-{backend}-truncate-enabled", type=_go_bool, nargs="?", const=True,
                           default=False, metavar="BOOL",
                           help="events larger than the max event size lose their request and response objects "
                                "(annotated audit.k8s.io/truncated), or are dropped (default: false)")
        audit.add_argument(f"--audit-{backend}-truncate-max-event-size", type=int, default=102400, metavar="BYTES",
                           help="(default: %(default)s)")
        audit.add_argument(f"--audit-{backend}-truncate-max-batch-size", type=int, default=10485760,
                           metavar="BYTES", help="(default: %(default)s)")
    audit.add_argument("--audit-webhook-config-file", type=Path, default=None, metavar="KUBECONFIG",
                       help="a kubeconfig naming the webhook the events are POSTed to, as EventLists")
    audit.add_argument("--audit-webhook-mode", default="batch", metavar="MODE",
                       help="batch (queued, sent in batches by a background task), blocking (each event sent "
                            "while its request waits) or blocking-strict (as blocking, and a request whose "
                            "RequestReceived event cannot be sent fails) (default: %(default)s)")
    audit.add_argument("--audit-webhook-batch-buffer-size", type=int, default=10000, metavar="N",
                       help="events queued before new ones are dropped (default: %(default)s)")
    audit.add_argument("--audit-webhook-batch-max-size", type=int, default=400, metavar="N",
                       help="events a batch (default: %(default)s)")
    audit.add_argument("--audit-webhook-batch-max-wait", type=_duration, default=30.0, metavar="DURATION",
                       help="how long an event waits for its batch to fill (default: 30s)")
    audit.add_argument("--audit-webhook-batch-throttle-enable", type=_go_bool, nargs="?", const=True,
                       default=True, metavar="BOOL", help="(default: true)")
    audit.add_argument("--audit-webhook-batch-throttle-qps", type=float, default=10.0, metavar="QPS",
                       help="batches a second (default: %(default)s)")
    audit.add_argument("--audit-webhook-batch-throttle-burst", type=int, default=15, metavar="N",
                       help="(default: %(default)s)")
    audit.add_argument("--audit-webhook-initial-backoff", type=_duration, default=10.0, metavar="DURATION",
                       help="the wait before a failed batch is sent again (default: 10s)")
    audit.add_argument("--audit-webhook-version", default="audit.k8s.io/v1", metavar="GROUP/VERSION",
                       help="(default: %(default)s)")
    serve.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="(default: %(default)s)")
    serve.set_defaults(func=_serve)

    sched = sub.add_parser("scheduler", help="run the scheduler against a server",
                           description="Run the scheduler alone against any server speaking the Kubernetes API.")
    sched.add_argument("--kubeconfig", metavar="PATH", type=Path, required=True,
                       help="the server and credentials (its current context)")
    sched.add_argument("--scheduler-name", default="default-scheduler",
                       help="schedule the pods whose spec.schedulerName is this (default: %(default)s)")
    sched.add_argument("--percentage-of-nodes-to-score", type=int, default=0, metavar="P",
                       help="as kube-scheduler's percentageOfNodesToScore; 0 is adaptive (default: %(default)s)")
    add_metrics_argument(sched, 10259, "kube-scheduler")
    sched.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="(default: %(default)s)")
    sched.set_defaults(func=_scheduler)

    from .nodes.cli import add_parser as add_nodes_parser  # argparse only: cheap

    add_nodes_parser(sub)

    from .autoscaler.cli import add_parser as add_autoscaler_parser  # argparse only: cheap

    add_autoscaler_parser(sub)

    from .bench import BENCHMARKS  # a dict of strings: cheap

    bench = sub.add_parser(
        "bench", help="run a benchmark", usage="%(prog)s [-h] NAME [ARGS ...]",
        description="Run a benchmark; it prints one JSON object per line. "
                    f"Benchmarks: {', '.join(sorted(BENCHMARKS))}. "
                    "Arguments after NAME go to the benchmark (try: controlplane bench NAME --help).",
    )
    bench.add_argument("name", metavar="NAME", nargs="?", help=f"one of: {', '.join(sorted(BENCHMARKS))}")
    bench.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    bench.set_defaults(func=_bench, parser=bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a respawned worker is started with
    rc: int = args.func(parser, args)
    return rc


# --------------------------------------------------------------------------- serve

def _checked_selector(parser: argparse.ArgumentParser, selector: str) -> str:
    from .registry.selectors import SelectorError, parse_label_selector

    try:
        parse_label_selector(selector)
    except SelectorError as e:
        parser.error(f"--manage-nodes-with-label-selector: {e}")
    return selector


def _checked_selection(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """``Config``'s node selection from KWOK's flags (``nodes/cli.py``), each selector parsed."""
    from .nodes.cli import selection
    from .registry.selectors import SelectorError, parse_label_selector

    try:
        chosen = selection(args)
    except ValueError as e:
        parser.error(str(e))
    try:
        parse_label_selector(chosen["node_annotation_selector"])
    except SelectorError as e:
        parser.error(f"--manage-nodes-with-annotation-selector: {e}")
    return {"manage_nodes_selector": _checked_selector(parser, chosen["node_selector"]),
            "manage_nodes_annotation_selector": chosen["node_annotation_selector"],
            "manage_all_nodes": chosen["manage_all_nodes"]}


def _checked_stages(parser: argparse.ArgumentParser, files: list[Path]) -> tuple[Path, ...]:
    """``--stages`` files, read once here so that a missing file or a stage the simulator
    cannot run stops ``serve`` at once, not its node simulator later in the background."""
    if files:
        from .nodes.stages import StageError, load_stages, read_stage_files

        try:
            load_stages(read_stage_files(files))
        except (OSError, StageError) as e:
            parser.error(f"--stages: {e}")
    return tuple(files)


def _checked_instance_types(parser: argparse.ArgumentParser, path: Path | None) -> Path | None:
    """An ``--instance-types`` catalog, read once here as ``_checked_stages`` reads its files: the
    autoscaler and the node simulator load it in the background, where a file they cannot read
    had left the server running without them, and without a word."""
    if path is not None:
        import yaml

        from .autoscaler.catalog import load

        try:
            load(path)
        except (OSError, ValueError, yaml.YAMLError) as e:
            parser.error(f"--instance-types: {e}")
    return path


def _checked_crds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, ...]:
    from .nodes.cli import enable_crds

    try:
        return enable_crds(args.enable_crds, args.stages)
    except ValueError as e:
        parser.error(str(e))


def _config_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Config:
    from .config import Config, JobBackoff, NodeLifecycle

    if args.store and not args.store.startswith(STORE_SCHEMES):
        parser.error(f"argument --store: {args.store!r} is neither lmdb://PATH nor etcd://HOST:PORT[,...]")
    if args.admission_control_config_file is not None:
        from .api.podsecurity import load_configuration

        try:
            load_configuration(args.admission_control_config_file)
        except ValueError as e:
            parser.error(f"argument --admission-control-config-file: {e}")
    audit = _checked_audit(parser, args)
    try:
        return Config(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            store=args.store,
            kubeconfig_out=args.kubeconfig_out,
            token_auth_file=args.token_auth_file,
            tls=args.tls,
            tls_cert_file=args.tls_cert_file,
            tls_private_key_file=args.tls_private_key_file,
            tls_sans=tuple(args.tls_sans),
            client_ca_file=args.client_ca_file,
            authorization_mode=args.authorization_mode,
            admission_webhooks=args.admission_webhooks,
            admission_control_config_file=args.admission_control_config_file,
            disable_admission_plugins=args.disable_admission_plugins,
            nodes=args.nodes,
            scheduler=args.scheduler,
            controllers=DEFAULT_CONTROLLERS if args.controllers is None else sum(args.controllers, ()),
            autoscaler=args.autoscaler,
            instance_types=_checked_instance_types(parser, args.instance_types),
            stages=_checked_stages(parser, args.stages),
            enable_crds=_checked_crds(parser, args),
            **_checked_selection(parser, args),
            pod_events=args.pod_events,
            node_events=args.node_events,
            csi_nodes=args.csi_nodes,
            volume_provisioners=tuple(name for name in args.volume_provisioners.split(",") if name),
            job_failure_rate=args.job_failure_rate,
            job_failure_exit_code=args.job_failure_exit_code,
            crash_backoff=args.crash_loop_backoff,
            crash_backoff_max=args.crash_loop_max_backoff,
            terminated_pod_gc_threshold=args.terminated_pod_gc_threshold,
            hpa_sync_period=args.horizontal_pod_autoscaler_sync_period,
            hpa_cpu_initialization_period=args.horizontal_pod_autoscaler_cpu_initialization_period,
            watch_cache_snapshot=args.watch_cache_snapshot,
            log_level=args.log_level,
            workers=args.workers,
            components_process=args.components_process,
            http_protocol=args.http_protocol,
            compaction_interval=args.etcd_compaction_interval,
            event_ttl=args.event_ttl,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            enable_priority_and_fairness=args.enable_priority_and_fairness,
            service_account_issuers=tuple(args.service_account_issuer),
            service_account_signing_key_file=args.service_account_signing_key_file,
            service_account_key_files=tuple(args.service_account_key_file),
            service_account_jwks_uri=args.service_account_jwks_uri,
            api_audiences=tuple(a.strip() for given in args.api_audiences for a in given.split(",") if a.strip()),
            service_account_max_token_expiration=args.service_account_max_token_expiration,
            service_account_extend_token_expiration=args.service_account_extend_token_expiration,
            node_lifecycle=NodeLifecycle(
                monitor_period=args.node_monitor_period,
                monitor_grace_period=args.node_monitor_grace_period,
                startup_grace_period=args.node_startup_grace_period,
                eviction_rate=args.node_eviction_rate,
                secondary_eviction_rate=args.secondary_node_eviction_rate,
                unhealthy_zone_threshold=args.unhealthy_zone_threshold,
                large_cluster_size_threshold=args.large_cluster_size_threshold),
            job_backoff=JobBackoff(base=args.job_pod_failure_backoff, cap=args.job_pod_failure_max_backoff),
            audit=audit,
        )
    except ValueError as e:
        parser.error(str(e))


def _checked_audit(parser: argparse.ArgumentParser, args: argparse.Namespace) -> AuditLog:
    """The audit flags, the policy file read once here so that a bad one stops ``serve`` at once."""
    from .api.audit import PolicyError, load_policy
    from .api.auditlog import LogOptions
    from .api.auditwebhook import Truncation, WebhookOptions
    from .client.client import KubeconfigError, kubeconfig_target
    from .config import AuditLog

    truncate: dict[str, tuple[int, int] | None] = {}
    try:
        for backend in ("log", "webhook"):
            sizes = (getattr(args, f"audit_{backend}_truncate_max_event_size"),
                     getattr(args, f"audit_{backend}_truncate_max_batch_size"))
            truncate[backend] = sizes if getattr(args, f"audit_{backend}_truncate_enabled") else None
            Truncation(*sizes)
        LogOptions(args.audit_log_path, args.audit_log_format, args.audit_log_mode, args.audit_log_maxage,
                   args.audit_log_maxbackup, args.audit_log_maxsize, args.audit_log_compress,
                   args.audit_log_batch_buffer_size)
        webhook = WebhookOptions(args.audit_webhook_config_file or Path(), args.audit_webhook_mode,
                                 args.audit_webhook_batch_buffer_size, args.audit_webhook_batch_max_size,
                                 args.audit_webhook_batch_max_wait, args.audit_webhook_batch_throttle_enable,
                                 args.audit_webhook_batch_throttle_qps, args.audit_webhook_batch_throttle_burst,
                                 args.audit_webhook_initial_backoff, args.audit_webhook_version)
        if args.audit_webhook_config_file is not None:
            kubeconfig_target(args.audit_webhook_config_file)
    except (ValueError, KubeconfigError) as e:
        parser.error(str(e) if not isinstance(e, KubeconfigError) else f"argument --audit-webhook-config-file: {e}")
    if args.audit_policy_file is not None:
        try:
            load_policy(args.audit_policy_file)
        except PolicyError as e:
            parser.error(f"argument --audit-policy-file: {e}")
    return AuditLog(args.audit_policy_file, args.audit_log_path, args.audit_log_format, args.audit_log_mode,
                    args.audit_log_maxage, args.audit_log_maxbackup, args.audit_log_maxsize,
                    args.audit_log_compress, args.audit_log_batch_buffer_size, truncate["log"],
                    args.audit_webhook_config_file, webhook.mode, webhook.buffer_size, webhook.max_size,
                    webhook.max_wait, webhook.throttle_enable, webhook.throttle_qps, webhook.throttle_burst,
                    webhook.initial_backoff, webhook.version, truncate["webhook"])


@dataclass(frozen=True, slots=True)
class Tls:
    cert_file: Path
    key_file: Path
    ca_pem: bytes  # what the kubeconfig tells clients to trust
    client_ca_file: Path | None = None  # --client-ca-file: asked for, not required, in the handshake


def prepare_tls(config: Config) -> Tls | None:
    """The certificate to serve with: ``--tls-cert-file``, or one from the generated
    PKI (``controlplane.pki``); None with ``--no-tls``. A given certificate file is
    also what the kubeconfig trusts, so it should hold its chain up to its CA. Client
    certificates are those ``--client-ca-file`` signed, else, with the generated PKI and
    this server's HTTP protocol (uvicorn's cannot pass them on), those its CA signed."""
    if not config.tls:
        return None
    client_ca = config.client_ca_file
    if client_ca is not None:
        _check_client_ca(client_ca)
    if config.tls_cert_file is not None and config.tls_private_key_file is not None:
        return Tls(config.tls_cert_file, config.tls_private_key_file, config.tls_cert_file.read_bytes(), client_ca)
    from .pki import ensure_serving_pki

    pki = ensure_serving_pki(config.pki_dir, config.host, config.tls_sans)
    if client_ca is None and config.http_protocol == "controlplane":
        # the generated CA is the cluster's, as kubeadm's and kind's ca.crt: kube-apiserver's
        # --client-ca-file and kube-controller-manager's --cluster-signing-cert-file, so the
        # certificate a CertificateSigningRequest is issued (controllers/certificates.py) authenticates
        client_ca = pki.ca_file
    return Tls(pki.cert_file, pki.key_file, pki.ca_file.read_bytes(), client_ca)


def _check_client_ca(path: Path) -> None:
    """Refuse a ``--client-ca-file`` that holds no CA certificate before serving, not at
    the first handshake (uvicorn loads it only then, with a traceback)."""
    import ssl

    try:
        ssl.create_default_context().load_verify_locations(cafile=str(path))
    except ssl.SSLError as e:
        raise ValueError(f"--client-ca-file {path} holds no PEM certificate ({e.reason or e})") from None
    except OSError as e:
        raise ValueError(f"cannot read --client-ca-file {path}: {e.strerror or e}") from None


def prepare_credentials(config: Config, ca_pem: bytes | None = None) -> tuple[Config, str]:
    """Make sure there is a token file and, for its admin, a kubeconfig.

    Without ``--token-auth-file``: reuse the admin of ``config.generated_token_file``
    if it has one (so kubeconfigs from earlier runs keep working), else add a
    new one to it. With it: use its first ``system:masters`` user, if any.
    Returns the config with ``token_auth_file`` set to the file in force, and
    the line to tell the user.
    """
    import dataclasses

    from .kubeconfig import write_kubeconfig
    from .tokens import TokenEntry, ensure_generated_admin, find_admin, read_token_file

    # warned here, once at start, as kube-apiserver warns when it reads the file
    warn = logging.getLogger("controlplane.tokens").warning
    admin: TokenEntry | None
    if config.token_auth_file is None:
        path = config.generated_token_file
        admin = ensure_generated_admin(path, warn)
        config = dataclasses.replace(config, token_auth_file=path)
    else:
        path = config.token_auth_file
        admin = find_admin(read_token_file(path, warn))
        if admin is None:
            # still the "serving" line a script waits for, saying why there is no kubeconfig
            return config, (f"controlplane: serving {config.server_url}; {path} has no user in group "
                            f"system:masters, so no kubeconfig was written to {config.kubeconfig_out}")
    write_kubeconfig(config.kubeconfig_out, config.server_url, admin.token, user=admin.user, ca_pem=ca_pem)
    kubeconfig = config.kubeconfig_out.resolve()
    return config, (f"controlplane: serving {config.server_url}; kubeconfig for user {admin.user!r} "
                    f"written to {kubeconfig}; use it with: export KUBECONFIG={kubeconfig}")


def prepare_service_account_keys(config: Config) -> None:
    """Read the service account key files, or make the generated key, before serving: a bad
    file is refused at start (``jws.KeyFileError``), as kube-apiserver refuses it, and the
    ``--workers`` find the key made. The HMAC secret of an earlier version, still verifying the
    tokens it signed, is named in the log."""
    from .api.tokenrequest import ServiceAccountKeys

    keys = ServiceAccountKeys(config.service_account_signing_key_file, config.service_account_key_files,
                              generated_in=config.pki_dir)
    keys.load()
    for warning in config.service_account_expiration_warnings():
        logging.getLogger("controlplane.api.tokenrequest").warning("%s", warning)
    legacy = keys.legacy_secret()
    if legacy is not None:
        logging.getLogger("controlplane.pki").warning(
            "service account tokens signed HS256 by an earlier version are still accepted until they expire: "
            "delete %s to refuse them", legacy[0])


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:

    config = _config_from_args(parser, args)
    from .logsetup import configure as configure_logging

    configure_logging(config.log_level)
    respawned = os.environ.pop(WORKER_PORT_ENV, None)
    if respawned is not None:
        return _respawned_worker(config, int(respawned))
    components_port = os.environ.pop(COMPONENTS_PORT_ENV, None)
    if components_port is not None:  # started again by the first process: it wrote the kubeconfig
        return _components_worker(config, int(components_port), None)
    from .tokens import TokenFileError

    # Listen before the heavy imports: a client that connects while FastAPI
    # and the store load waits in the backlog instead of being refused, and a
    # port in use fails here, before any file is written.
    try:
        sock = listen(config.host, config.port, reuse_port=config.workers > 1)
    except OSError as e:
        print(f"controlplane serve: error: cannot listen on {config.host}:{config.port}: {e}", file=sys.stderr)
        return 1
    try:
        tls = prepare_tls(config)
        config, message = prepare_credentials(config, tls.ca_pem if tls else None)
        prepare_service_account_keys(config)
    except (OSError, ValueError, TokenFileError) as e:
        print(f"controlplane serve: error: {e}", file=sys.stderr)
        return 1
    if config.store_url.startswith("lmdb://"):
        Path(config.store_url.removeprefix("lmdb://")).parent.mkdir(parents=True, exist_ok=True)

    import uvicorn

    from .api.app import create_app

    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal
    # to the handler it found installed, which by default kills the process
    # (exit -15). A server that drained and closed its store has succeeded:
    # install no-op handlers for uvicorn to restore, so we exit 0 as
    # kube-apiserver does.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _ignore_signal)
    workers: list[int] = []
    port = sock.getsockname()[1]  # the one chosen, if --port 0
    if config.components_process and config.kubeconfig_out.exists():
        from . import componentsmetrics
        from .components import enabled

        if enabled(config):  # before any fork: every process of the port shows the child's metrics
            componentsmetrics.announce()
    if config.workers > 1:
        for _ in range(config.workers - 1):
            pid = os.fork()  # before any thread or loop exists
            if pid == 0:
                return _serve_worker(config, port, tls, create_app, uvicorn, sock)
            workers.append(pid)
    components: list[int] = []
    if config.components_process and not config.kubeconfig_out.exists():
        # its credentials are the kubeconfig's; without an admin token none was written
        print("controlplane serve: no kubeconfig to connect with: the components run inside the server",
              file=sys.stderr, flush=True)
        config = dataclasses.replace(config, components_process=False)
    if config.components_process:
        from .components import enabled

        if enabled(config):
            pid = os.fork()
            if pid == 0:
                return _components_worker(config, port, sock)
            components.append(pid)
        config = dataclasses.replace(config, components=False)
    children = dict.fromkeys(workers, WORKER) | dict.fromkeys(components, COMPONENTS)
    supervisor = _ChildSupervisor(children, port, args.argv) if children else None
    server = _uvicorn(uvicorn, create_app(config), config, tls)
    _say_when_serving(server, message)
    if supervisor is not None:
        exiting = server.handle_exit

        def handle_exit(sig: int, frame: Any) -> None:
            supervisor.terminate_all()
            exiting(sig, frame)

        server.handle_exit = handle_exit
        supervisor.start()
    try:
        server.run(sockets=[sock])  # a failed startup raises SystemExit(3)
    finally:
        if supervisor is not None:
            _stop_workers(supervisor.stop())
    return 0


WORKER_PORT_ENV = "CONTROLPLANE_WORKER_PORT"  # set for a worker started again: the port it joins
COMPONENTS_PORT_ENV = "CONTROLPLANE_COMPONENTS_PORT"  # set for the components started again: the port they reach
RESTARTS_PER_MINUTE = 5
WORKER, COMPONENTS = "worker", "components process"
_RESPAWN_ENV = {WORKER: WORKER_PORT_ENV, COMPONENTS: COMPONENTS_PORT_ENV}


class _ChildSupervisor(threading.Thread):
    """Starts a ``--workers`` process or the ``--components-process`` child again when one dies
    (killed, out of memory), so the port keeps its N servers and the scheduler, the node
    simulator and the controllers keep running. The first ones are forked before any thread
    exists; a replacement cannot be (this process has threads by then), so it is a fresh
    ``controlplane serve`` with the same arguments, told by its environment what it is to be:
    a server joining the port's SO_REUSEPORT group (``WORKER_PORT_ENV``) or the components,
    clients of the port (``COMPONENTS_PORT_ENV``). Children that keep dying are given up on
    after ``RESTARTS_PER_MINUTE`` restarts in a minute, all roles counted."""

    def __init__(self, forked: dict[int, str], port: int, argv: list[str]) -> None:
        super().__init__(name="child-supervisor", daemon=True)
        self.forked = dict(forked)  # pid -> role (WORKER or COMPONENTS)
        self.spawned: list[tuple[subprocess.Popen[bytes], str]] = []
        self.port = port
        self.argv = argv
        self.stopping = threading.Event()
        self.restarts: list[float] = []
        self.log = logging.getLogger("controlplane.serve")

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            for pid, role in list(self.forked.items()):
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done, status = pid, 0
                if done:
                    del self.forked[pid]
                    self._replace(pid, role, os.waitstatus_to_exitcode(status) if status else 0)
            for proc, role in list(self.spawned):
                if proc.poll() is not None:
                    self.spawned.remove((proc, role))
                    self._replace(proc.pid, role, proc.returncode)

    def _replace(self, pid: int, role: str, status: int) -> None:
        if self.stopping.is_set():
            return
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < 60] + [now]
        if len(self.restarts) > RESTARTS_PER_MINUTE:
            self.log.error("%s %d exited (%s); children keep dying, not starting another", role, pid, status)
            return
        self.log.warning("%s %d exited (%s); starting another", role, pid, status)
        self.spawned.append((subprocess.Popen([sys.executable, "-m", "controlplane", *self.argv],
                                              env={**os.environ, _RESPAWN_ENV[role]: str(self.port)},
                                              stdin=subprocess.DEVNULL), role))

    def terminate_all(self) -> None:
        """SIGTERM every child at once, for good, as this process starts its own shutdown: the
        components' watches would hold it, and the workers drain beside it instead of after
        it. Safe in a signal handler."""
        self.stopping.set()
        # copies first: the supervising thread may be changing both
        for pid in list(self.forked) + [proc.pid for proc, _ in list(self.spawned)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def stop(self) -> list[int]:
        """Stop replacing children; the pids of the forked ones alive, to be stopped."""
        self.stopping.set()
        self.join()
        for proc, _ in self.spawned:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc, _ in self.spawned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(GRACEFUL_SHUTDOWN_SECONDS + 10)
        return list(self.forked)


def _respawned_worker(config: Config, port: int) -> int:
    """A ``--workers`` process started again by the first one (``_WorkerSupervisor``): as the
    forked ones, a server joining the port's SO_REUSEPORT group, no components; it reads the
    state the first one prepared (PKI, token file) and writes nothing of it."""
    _die_with_parent()
    if config.token_auth_file is None:
        config = dataclasses.replace(config, token_auth_file=config.generated_token_file)
    tls = prepare_tls(config)
    import uvicorn

    from .api.app import create_app

    sock = listen(config.host, port, reuse_port=True)
    config = dataclasses.replace(config, port=port, components=False, workers=1)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _ignore_signal)
    _uvicorn(uvicorn, create_app(config), config, tls).run(sockets=[sock])
    return 0


def _http_protocol(config: Config) -> Any:
    if config.http_protocol == "uvicorn":
        return "httptools"
    from .api.http1 import ServerProtocol

    return ServerProtocol


def _uvicorn(uvicorn: Any, app: Any, config: Config, tls: Tls | None) -> Any:
    server = _server(uvicorn, app, config, tls)
    _SERVERS.append(server)
    _STARTUP_FAILURE.state = app.state.server
    errors = logging.getLogger("uvicorn.error")
    if _STARTUP_FAILURE not in errors.filters:
        errors.addFilter(_STARTUP_FAILURE)
    if _STOP_REQUESTED:  # asked to stop while the app was made: it starts and stops at once
        server.should_exit = True
    return server


def _say_when_serving(server: Any, message: str) -> None:
    """Print ``message`` (the "serving" line) once ``server`` accepts requests: after
    uvicorn's startup, which runs the lifespan (the store opened, the watch caches loaded)
    and then makes the listeners. Printed before, a script that waits for the line would
    connect too soon, or see it and then the store's error; a failed start prints none."""
    startup = server.startup

    async def startup_then_say(sockets: list[socket.socket] | None = None) -> None:
        await startup(sockets=sockets)  # a failed startup exits here
        if not server.should_exit:
            print(message, flush=True)

    server.startup = startup_then_say


def _server(uvicorn: Any, app: Any, config: Config, tls: Tls | None) -> Any:
    import ssl  # uvicorn's import has paid for it

    return uvicorn.Server(uvicorn.Config(
        app.state.front,
        host=config.host,
        port=config.port,
        loop="uvloop",
        http=_http_protocol(config),
        lifespan="on",
        log_level=config.log_level,
        access_log=config.log_level == "debug",
        server_header=False,
        proxy_headers=False,  # no proxy in front; kube-apiserver does not trust X-Forwarded-* either
        backlog=LISTEN_BACKLOG,
        # uvicorn closes an idle keep-alive connection after 5 s; Go clients (kubectl,
        # client-go) keep idle connections for 90 s and would meet closed ones
        timeout_keep_alive=90,
        # the requests still running when the server stops: cut off past this, unanswered
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        ssl_certfile=str(tls.cert_file) if tls else None,
        ssl_keyfile=str(tls.key_file) if tls else None,
        # kube-apiserver asks for a client certificate and verifies one that comes, but takes
        # a connection without one (its requests authenticate with tokens, or not at all)
        **({"ssl_ca_certs": str(tls.client_ca_file), "ssl_cert_reqs": ssl.CERT_OPTIONAL}
           if tls and tls.client_ca_file else {}),
    ))


def _serve_worker(config: Config, port: int, tls: Tls | None, create_app: Any, uvicorn: Any,
                  inherited: socket.socket) -> int:
    """An extra API server process (``--workers``): its own socket in the port's
    SO_REUSEPORT group (the kernel spreads connections over the group), its own
    store handle and watch cache, no components (they run once, in the first)."""
    _die_with_parent()
    inherited.close()  # connections the kernel hashes to the first process's socket are its to accept
    sock = listen(config.host, port, reuse_port=True)
    config = dataclasses.replace(config, port=port, components=False, forked_worker=True)
    try:
        _uvicorn(uvicorn, create_app(config), config, tls).run(sockets=[sock])
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    os._exit(0)


def _components_worker(config: Config, port: int, inherited: socket.socket | None) -> int:
    """``serve --components-process``: the components (components.py) as clients of the
    server over its socket, with the kubeconfig's credentials, once it answers. Forked at
    start (``inherited``: the listening socket, not ours to accept on), or started again
    by the first process when it died (``_ChildSupervisor``)."""
    _die_with_parent()
    if inherited is not None:
        inherited.close()
    import asyncio
    import logging

    from . import componentsmetrics
    from .client import ApiError, Client
    from .components import enabled, start
    from .gcsettings import settle_heap
    from .identities import CONTROLLER_MANAGER
    from .leaderelection import identity, run_elected

    log = logging.getLogger("controlplane.components")
    config = dataclasses.replace(config, port=port)

    async def run() -> None:
        settle_heap()
        # as the components in the server's process: kube-controller-manager's identity for the
        # informers and the leader election, each component its own (identities.py), with the key
        # the servers derive from the token file's admin
        identities = _identities(config)
        client = Client.from_kubeconfig(config.kubeconfig_out, server=config.server_url,
                                        token=identities.token(CONTROLLER_MANAGER) if identities else None)
        client.with_identities(identities.token if identities else None)
        try:
            while True:  # the server listens already; it answers once its store and caches are up
                try:
                    await client.get("/version")
                    break
                except (OSError, httpx.TransportError, ApiError):
                    await asyncio.sleep(0.1)

            def start_components() -> list[asyncio.Task[None]]:
                return start(client, config, enabled(config), " (components process)")

            # under a Lease, as in the server's process (leaderelection.py); their metrics are
            # read by the server's /metrics (componentsmetrics.py)
            async with componentsmetrics.serving():
                await run_elected(client, start_components, identity(config.host, config.port))
        finally:
            await client.aclose()

    import httpx
    import uvloop

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops us (SIGTERM) when it is done

    async def main() -> None:
        task = asyncio.create_task(run())
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        uvloop.run(main())
    except BaseException:
        log.exception("the components process failed")
        os._exit(1)
    os._exit(0)


def _identities(config: Config) -> Identities | None:
    """The built-in components' identities (identities.py) keyed as the servers key them: from the
    token file's admin; None when it cannot be read (the kubeconfig's credentials are used then)."""
    from .identities import Identities, admin_tokens, identity_key
    from .tokens import TokenFileError, read_token_file

    try:
        key = identity_key(admin_tokens(read_token_file(config.token_auth_file or config.generated_token_file)))
    except (OSError, TokenFileError) as e:
        logging.getLogger("controlplane.components").warning("the components act as the kubeconfig's user: %s", e)
        return None
    return Identities(key) if key is not None else None


def _die_with_parent() -> None:
    """SIGTERM this process when the one that forked it dies (Linux ``PR_SET_PDEATHSIG``)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop_workers(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACEFUL_SHUTDOWN_SECONDS + 10
    for pid in pids:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.05)


LISTEN_BACKLOG = 2048
# How long a stop waits for the requests already running (watches end at once: http1.py's
# ServerProtocol.shutdown): a write's answer under load, or after an admission webhook's
# wait, can take seconds, and one cut off is left unanswered, its outcome unknown to its
# client. kube-apiserver waits up to 60 s; most of what runs here ends within milliseconds.
GRACEFUL_SHUTDOWN_SECONDS = 10


def listen(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv4 or IPv6, as the host resolves) and listening;
    ``reuse_port``: in an SO_REUSEPORT group, which other processes' sockets may join."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    return socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG, reuse_port=reuse_port)


# The uvicorn servers this process made. A SIGINT/SIGTERM that comes before uvicorn has put
# its own handlers in (while the app is made, the store opened: a worker started again is
# stopped then if the server stops at once) must not be lost: the server is told to exit.
_SERVERS: list[Any] = []


class _StartupFailure(logging.Filter):
    """A start that failed for a reason the operator is to fix (``ServerState.startup_error``,
    a store that cannot be opened) is said in one line, as the other start-up errors are,
    in place of uvicorn's log of the lifespan's traceback; uvicorn still exits 3."""

    state: Any = None  # the ServerState of the server this process runs
    said = False

    def filter(self, record: logging.LogRecord) -> bool:
        why = getattr(self.state, "startup_error", None)
        if why is None:
            return True
        if record.levelno >= logging.ERROR and not self.said:
            print(f"controlplane serve: error: {why}", file=sys.stderr, flush=True)
            self.said = True
        return record.levelno < logging.ERROR  # the traceback and "Application startup failed"


_STARTUP_FAILURE = _StartupFailure()
_STOP_REQUESTED: list[int] = []  # the signals that came before a server was made


def _ignore_signal(signum: int, frame: object) -> None:
    """The handler uvicorn restores after a graceful shutdown and re-raises the signal to: a
    no-op then, so that a drained server exits 0. Before uvicorn runs, it stops the server
    made so far at its start (``_uvicorn``) or as soon as it is made."""
    _STOP_REQUESTED.append(signum)
    for server in _SERVERS:
        if not server.started:
            server.handle_exit(signum, frame)


# --------------------------------------------------------------------------- bench

def _scheduler(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .scheduler.scheduler import main as scheduler_main

    return scheduler_main(args.kubeconfig, scheduler_name=args.scheduler_name,
                          percentage=args.percentage_of_nodes_to_score, log_level=args.log_level,
                          metrics_address=args.metrics_address)


def _bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .bench import BENCHMARKS, BenchmarkUnavailable, UnknownBenchmark, resolve

    if args.name is None:
        args.parser.error(f"a benchmark NAME is required (choose from: {', '.join(sorted(BENCHMARKS))})")
    try:
        entry = resolve(args.name)
    except UnknownBenchmark as e:
        args.parser.error(str(e))  # exits 2
    except BenchmarkUnavailable as e:
        print(f"controlplane bench: error: {e}", file=sys.stderr)
        return 1
    return entry(list(args.args))
