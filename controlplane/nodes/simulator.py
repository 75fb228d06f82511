"""The node simulator: kubelets as an API client.

``NodeSimulator(client, config)`` watches Nodes and Pods and writes back only
through the API. It manages every Node annotated ``kwok.x-k8s.io/node: fake``
(it creates ``config.count`` of them at start; others may create more), and
the pods bound to them:

- **heartbeats**: each node's Lease in ``kube-node-lease`` is renewed every
  ``renew_interval`` (10 s), and its status posted every
  ``status_report_frequency`` (5 min), as a kubelet with leases does. Nodes
  are seated over the interval by a hash of their name (``rota``), so 100,000
  nodes are 10,000 renewals a second in even batches, not 100,000 at once;
  other timers (status reports, stages, failure grace periods) share one timing wheel
  (``wheel``). A batch's renewals go as one or a few LeaseRenewals
  (this emulator's bulk renewal, ``controlplane/api/leaserenewals.py``) when
  the server serves them, as a PUT of each Lease otherwise;
- **registration**: the nodes it creates are created with their status, as a kubelet
  registers its node (``registration_status``: capacity, addresses and, where it owns the
  nodes' status, conditions Ready and the rest), so that no pod is turned away for want of
  them; with each node it adopts, its CSINode (``csi_nodes``: named after
  the node, owned by it, no drivers), as a kubelet's CSI node-info manager creates it;
  the Lease and the CSINode of a deleted node are deleted (the garbage collector's part);
- **pods and nodes**: on every change of a pod on a managed node (or of the
  node), its stages (``stages``, KWOK's format) are evaluated: one that
  matches is drawn by weight and runs after its delay (the draw being the
  stage already pending, its delay runs on; at most one stage is pending per
  object, and it runs only if it still matches when its time comes). A
  stage's status is written as a strategic merge patch, as KWOK does for
  Pods and Nodes (``status.conditions`` merge by ``type``; the built-in
  stages, which write whole lists, as a cheaper JSON merge patch). Before the first
  stage of a new pod its images are pulled (``images``); with the built-in
  stages the pod waits in ``ContainerCreating`` meanwhile, with a user's
  stage file it just waits (the file's stages own the pod's status: a status
  of ours could make a later stage of theirs match first); pod IPs come from
  the node's ``spec.podCIDR`` (``ipam``);
- **pod events** (``config.pod_events``, on unless ``--no-pod-events``): with the
  built-in stages, the kubelet's Events about each pod's containers (``events``:
  image pulls, created, started, stopping when a running pod is deleted), written apart
  from the other writes, ``EVENT_CONCURRENCY`` at a time, and dropped beyond a
  thousand unwritten, as client-go's broadcaster drops them (a user's stages
  say their own, ``next.event``);
- **node events** (``config.node_events``, on unless ``--no-node-events``): with the
  built-in stages, the kubelet's Events about its node (``events.NodeEvents``):
  ``Starting``, the pressure conditions, ``NodeAllocatableEnforced`` as it adopts a
  node, ``NodeReady``/``NodeNotReady`` as the Ready condition it reports turns, and
  ``NodeSchedulable``/``NodeNotSchedulable`` as it sees a cordon come and go (not while
  it is down); on the same lane as the pod events, up to ``NODE_EVENTS_PENDING`` unwritten;
- **stages from the API** (``config.stages_from_api``, KWOK's ``--enable-crds
  Stage``): the stages are the Stage objects stored in the server (their CRD,
  ``crds``, installed if absent), as a user's stage file's: none until there
  are some (nodes and pods are then left alone, but for the nodes' Leases), a
  new set in force as they change (``_stage_seen``), and each simulated object
  with no stage pending drawn again from it (``_sweep``);
- **failures** (``fail_node``/``recover_node``, or the annotation
  ``nodes.controlplane.io/failure`` through the API): what a failing kubelet does.
  ``unreachable``: it stops (no lease renewal, no status, no stages); ``not-ready``:
  it reports ``Ready=False``. What follows is the controllers'
  (``controllers/nodelifecycle.py``, ``controllers/tainteviction.py``), as for any
  node: its conditions Unknown once its Lease has stood still for the grace period,
  the taints, the evictions.

Per node the state is one ``_Node`` (slots: a few ints and strings, a pod IP
pool, an image table); per pod a ``_Pod`` while it has a timer or an IP.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from ..client import ApiError, Client, resource_path
from ..gcsettings import untracked
from ..identities import node_user
from ..metrics import LEASE_RENEW_LAG, LEASE_RENEWALS, POD_START_SECONDS, STAGE_TRANSITIONS
from ..registry.selectors import parse_label_selector
from . import ephemeral, goyaml
from .allocated import pod_allocation
from .config import FAILURE_ANNOTATION, FAKE_NODE_ANNOTATION, FAKE_SELECTOR, SimConfig
from .crds import STAGES
from .events import KubeletEvents, NodeEvents, container_paths
from .failures import FAILURE_MODES
from .gotemplate import GoNumber, TemplateError, _go_type, go_format, json_marshal, json_marshal_string
from .images import Image, ImageCatalog, NodeImages, Pull, PullModel
from .instancetypes import InstanceType, catalog_by_name
from .ipam import CidrAllocator, IPExhausted, PodIPs, node_cidr_mask
from .native import NATIVE
from .observed import generation_of, observe_patch, stamped
from .podfailure import (
    Exit,
    JobFailures,
    Target,
    all_running,
    completed,
    crashed,
    exited,
    initializing,
    may_fail,
    one_backing_off,
    one_exited,
    one_restarted,
    planned_exit,
    restarted,
    restarts,
    run_of,
    state_of,
    target_of,
    target_status,
    waiting_in_backoff,
)
from .probes import next_change, probed, starting
from .refs import Ref, env_error, has_env_refs, has_volume_refs, volume_errors
from .resize import resize_decision, resize_patch, settled_patch, wants_resize
from .rota import HeartbeatRota
from .stages import Stage, StageError, StageSet, default_stages, stage_from_object
from .wheel import TimingWheel

__all__ = ["NodeSimulator", "VERSION"]

log = logging.getLogger(__name__)

VERSION = "v1.37.0-controlplane"
LEASE_NAMESPACE = "kube-node-lease"
# renewals in bulk, where the server is this emulator's (``controlplane/api/leaserenewals.py``)
RENEWALS_GROUP, RENEWALS_VERSION, RENEWALS_PLURAL = "nodes.controlplane.dev", "v1alpha1", "leaserenewals"
REPORTS_PLURAL = "nodestatusreports"  # NodeStatusReport: node status reports in bulk (api/nodereports.py)
KUBELET_PORT = 10250
CSI_NODES = ("storage.k8s.io", "v1", "csinodes")
# the in-tree volume plugins whose CSI migration is on, which the kubelet lists on its CSINode
# (the scheduler's volume limits read it); all of them GA and on in 1.34
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
MIGRATED_PLUGINS = ("kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,"
                    "kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume")

_NODE_CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
)


# a node's stage_written while its stage's status write is in flight: every version seen is older
_STAGE_WRITING = 1 << 63


def _resource_version(obj: dict[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _node_conditions() -> list[dict[str, str]]:
    """KWOK's ``NodeConditions``: those a healthy kubelet reports."""
    return [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in _NODE_CONDITIONS]


def _version() -> str:
    return VERSION


def _kubelet_port() -> int:
    return KUBELET_PORT


def _server_side(e: Exception) -> bool:
    """Whether a failed write may succeed if made again: the server's failure (a 5xx, a 429), or
    no answer (a timeout, the connection refused), as KWOK's ``shouldRetry``. A 4xx says the
    write itself is wrong (a stage whose template renders what the API refuses: 422, 400; 403)
    and is not made again; the object's next change draws its next stage."""
    return not isinstance(e, ApiError) or e.code >= 500 or e.code == 429


def _refused(kind: str, name: str, stage: str, e: ApiError) -> None:
    """A stage's write the server refused (4xx, not 404), which is not tried again: a warning,
    as KWOK logs ``failed to apply stage``; a 409 (the object replaced or changed under a
    precondition) is an ordinary race, whose new version the stages take up anyway."""
    if e.code == 409:
        log.debug("%s %s, stage %s: %s", kind, name, stage, e)
    else:
        log.warning("%s %s, stage %s: the server refused its write, not tried again until the %s changes: %s",
                    kind, name, stage, kind, e)


def _stage_failed(kind: str, name: str, stage: Stage, e: StageError) -> None:
    """A stage whose status template failed (to render, or rendered what is not a status): logged
    and counted, not tried again until the object changes, as KWOK logs ``failed to apply stage``
    and does not retry it. Its steps before the status (the event, the finalizers) stay done."""
    STAGE_TRANSITIONS.labels(stage=stage.name, result="error").inc()
    log.warning("%s %s, stage %s: %s", kind, name, stage.name, e)


def stage_retry_delay(retries: int, rng: random.Random) -> float:
    """Seconds before a stage whose write failed for the server's sake is run again, its
    ``retries``-th time: KWOK's ``backoffDelayByStep`` over its ``defaultBackoff`` (a second,
    doubling with each retry, at most 32 minutes, plus up to a fifth more at random), so that a
    server refusing with 429s or 503s under load is not sent each failed stage every second."""
    return min(STAGE_RETRY_BASE * 2.0 ** min(retries, 32), STAGE_RETRY_CAP) * (1.0 + 0.2 * rng.random())


STAGE_RETRY_BASE, STAGE_RETRY_CAP = 1.0, 32 * 60.0
# the steps of a stage's ``next``, in KWOK's order (its ``StageSpec`` conversion makes a ``next`` these
# steps, and ``lifecycle.doStageSteps`` runs them so): the event, the finalizers (a patch of their own),
# the status (its template rendered only then), the delete. A step that fails ends the stage there: a
# status template that fails to render leaves the event sent and the finalizers changed, and no delete
STEP_EVENT, STEP_FINALIZERS, STEP_STATUS, STEP_DELETE = range(4)
HEARTBEAT, POD = 0, 1  # write priorities (``_write``); the rest is 2
RETRY_AFTER = 1.0  # seconds before a one-off write that failed (a 5xx, 429, a timeout) is made again

# the kubelet's pod events are written apart, at most this many at once, so that they never hold
# the writers the heartbeats and pods' status need (as the scheduler's event lane, scheduler/writer.py)
EVENT_CONCURRENCY = 16
IMAGE_PULL = "(image pull)"  # a pod's pending "stage" while its images are pulled
# a pod's pending "stage" while its containers run towards a planned exit, and while they wait
# out their crash-loop back-off (``podfailure``: the built-in stages' failure model)
CONTAINER_EXIT, BACK_OFF = "(container exit)", "(back-off)"
# and, with one container failing (``podfailure.Target``): the kubelet starting a pod whose init
# container fails, its next sync after the container exited (restarted at once or backing off), and the
# other containers completing (restartPolicy Never/OnFailure, as the built-in pod-complete stage)
INIT_START, RESTART, COMPLETE = "(init start)", "(restart)", "(complete)"
# a running pod's pending "stage" while a container waits on its startup or readiness probe (``probes``)
PROBE = "(probe)"
FAILURE_STEPS = frozenset((CONTAINER_EXIT, BACK_OFF, INIT_START, RESTART, COMPLETE))  # (one hashed lookup)
# with Stages from the API, the objects are evaluated against a new set once the Stages have
# not changed for this long (``kubectl apply -f`` of a stage file is one request a Stage)
SWEEP_QUIET = 0.1
# one empty set for every _Pod: CPython makes a new frozenset() each call, tracked by the GC
_NO_EPHEMERAL: frozenset[str] = frozenset()


def _name_span(names: list[str]) -> str:
    """A few node names as a log line names them: all of up to four, else the first and the last."""
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, ..., {names[-1]}"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339_nano() -> str:
    """KWOK's ``Now`` (and ``StartTime``): Go's ``time.Now().Format(time.RFC3339Nano)``, to the
    nanosecond, the fraction's trailing zeros dropped (none when it is whole). A metav1.Time
    field given it keeps the second (``registry.validation``), as kube-apiserver's does."""
    ns = time.time_ns()
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{text}.{fraction:09d}".rstrip("0") + "Z" if fraction else text + "Z"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _quote(v: Any) -> str:
    """KWOK's ``Quote``: Go's ``json.Marshal`` of ``v``, quoted again unless it is a string's
    (``1`` is ``"1"``, ``1.0`` too; nothing, a missing field, is ``null``: ``"null"``; what JSON
    cannot write, NaN, as ``fmt.Sprint`` prints it: ``"NaN"``)."""
    if isinstance(v, str) and not isinstance(v, GoNumber):
        return json_marshal_string(v)
    try:
        text = json_marshal(v)
    except ValueError:
        text = go_format(v)
    return orjson.dumps(text).decode()


def _yaml(v: Any, *indent: Any) -> str:
    """KWOK's ``YAML``: ``sigs.k8s.io/yaml.Marshal`` of ``v`` (``goyaml.marshal``: Go's JSON of it
    written as go-yaml v2 writes it, ending in a line break), and given one indent ``n`` above
    0, a line break and ``2n`` spaces put before every line and after the last (``YAML . 1``
    of ``{a: 1}`` is ``"\\n  a: 1\\n  "``); more indents than one are ignored, as KWOK's."""
    for n in indent:
        if type(n) is not int:
            raise TemplateError(f"wrong type for value; expected int; got {_go_type(n)}")
    try:
        text = goyaml.marshal(v)
    except ValueError as e:
        raise TemplateError(str(e)) from None
    if len(indent) == 1 and indent[0] > 0:
        text = ("\n" + text).replace("\n", "\n" + "  " * indent[0])
    return text


async def _done() -> None:
    """A write with nothing left to do (one tried again after its node went)."""


class _Node:
    __slots__ = ("cidr", "failed", "failure_gen", "images", "ip", "itype", "lease_ready", "manual", "name", "offset",
                 "pod_ips", "ready", "renewing", "retries", "since", "stage", "stage_gen", "stage_written", "uid",
                 "unschedulable")

    def __init__(self, name: str, ip: str, cidr: str, itype: InstanceType, images: NodeImages, offset: float) -> None:
        self.name = name
        self.uid = ""  # the Node's, for its Lease's ownerReference
        # its Lease exists (created, or found): until then its creation is queued and
        # renewing it would only find it missing (at 100,000 nodes set up at once, a
        # renewal each that fails and creates it ahead of the queue)
        self.lease_ready = False
        # a renewal of its Lease is queued or in flight: the next falls due only after it
        # answers, as the kubelet's one renew loop (two at once would conflict, and behind
        # a backlog they would pile up, a round each interval, and feed it)
        self.renewing = False
        self.ip = ip
        self.cidr = cidr
        self.itype = itype
        self.images = images
        self.pod_ips = PodIPs(cidr)
        self.offset = offset  # where in each renew interval its heartbeat falls
        self.failed = ""  # "" | "unreachable" | "not-ready"
        self.failure_gen = 0
        self.manual = False  # failed by a call, not by the annotation: the annotation's absence does not recover it
        self.since = now_rfc3339()  # Ready's lastTransitionTime
        self.stage: str | None = None  # the node stage whose timer (or write) is pending
        self.stage_gen = 0  # bumps cancel it
        # the resourceVersion of its last stage's status write (_STAGE_WRITING while that is in
        # flight): a version of the Node older than it is from before the write, and draws no
        # stage (it would draw the stage just played again, and write the same status twice)
        self.stage_written = 0
        self.retries = 0  # its stage writes failed for the server's sake since one went through (back-off)
        # (with node events) the status of its Ready condition last seen ("" for none), and
        # whether its kubelet last saw it cordoned (a kubelet starts thinking it is not)
        self.ready = ""
        self.unschedulable = False


class _Pod:
    __slots__ = ("backoff", "backoff_at", "deletion_grace", "deletion_seen", "ephemeral", "ephemeral_pulls", "exit",
                 "exit_run", "exit_target", "finished", "gen", "ip", "node", "pulled_at", "retries", "seen", "stage",
                 "started", "stopping", "uid", "wrote_creating")

    def __init__(self, uid: str, node: str, seen: float) -> None:
        self.uid = uid
        self.node = node
        self.seen = seen
        self.gen = 0  # bumps cancel the pending timer
        self.stage: str | None = None  # the stage whose timer is pending
        self.retries = 0  # its stage writes failed for the server's sake since one went through (back-off)
        self.ip: str | None = None
        # terminal (Succeeded or Failed): its sandbox is gone and ``ip`` back in the node's pool,
        # though the pod's status keeps showing it, as a kubelet's CNI DEL leaves it
        self.finished = False
        self.pulled_at: float | None = None  # when its images are (will be) on the node
        self.wrote_creating = False
        self.started = False
        self.stopping = False  # its graceful deletion seen (its containers' Killing events recorded)
        # when this kubelet saw the pod's deletion begin (monotonic; a dead one sees nothing), from
        # which it counts the grace period, as the kubelet does (the deletionTimestamp has whole
        # seconds: up to one early); 0.0 for a pod already being deleted when first seen (after a
        # restart of the simulator), whose grace period ends at its deletionTimestamp; None while
        # not deleted
        self.deletion_seen: float | None = None
        self.deletion_grace: int | None = None  # its deletionGracePeriodSeconds then
        self.ephemeral: frozenset[str] = _NO_EPHEMERAL  # ephemeral containers whose status is written
        # the ephemeral containers whose image is being pulled: when each pull began, the image, the pull
        self.ephemeral_pulls: dict[str, tuple[float, Image, Pull]] | None = None
        # its containers' crash-loop back-off (``podfailure``): seconds (0: no entry yet) and when
        # it was last stepped (monotonic), as the kubelet's flowcontrol.Backoff keeps it per container
        self.backoff = 0.0
        self.backoff_at = 0.0
        self.exit: Exit | None = None  # how the pending CONTAINER_EXIT ends the run
        self.exit_run = 0  # which run (restart count) it ends
        self.exit_target = False  # it is one container's (``fail-container``), not every regular container's


def _terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _unreadied(pod: dict[str, Any]) -> bool:
    """Whether ``pod`` runs with its containers ready and its readiness gates True but its
    Ready condition False: turned so by someone other than its kubelet (the node lifecycle
    controller's MarkPodsNotReady), which the kubelet, computing Ready from those, undoes. (A
    gate False keeps Ready False, as the kubelet's.)"""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get("Ready") != "False" or conditions.get("ContainersReady") != "True":
        return False
    gates = (pod.get("spec") or {}).get("readinessGates") or ()
    return all(conditions.get(g.get("conditionType")) == "True" for g in gates if isinstance(g, dict))


class NodeSimulator:
    def __init__(self, client: Client, config: SimConfig | None = None) -> None:
        self.client = client
        # whether a kubelet's writes go as its node (_kubelet): not where RBAC authorizes them without
        # the Node authorizer (serve's Config.kubelet_identities), which would deny them
        self.kubelet_identities = True
        self.config = config = config or SimConfig()
        self.rng = random.Random(config.seed)
        # KWOK's --enable-crds Stage: the stages are the Stage objects stored in the API server,
        # none until they are listed (``_stage_seen``); else a stage file's, or the built-in ones
        self.stages_from_api = config.stages_from_api
        if self.stages_from_api and config.stages is not None:
            raise ValueError("the stages come from the Stage objects in the API server (--enable-crds Stage) "
                             "or from stage files (--stages), not both")
        stages = [] if self.stages_from_api else config.stages if config.stages is not None \
            else default_stages(config.job_seconds)
        # with the built-in stages the simulator writes a status of its own while images pull
        self.builtin_stages = config.stages is None and not self.stages_from_api
        self._readying: set[str] = set()  # pods whose Ready condition is being put back (_ready_again)
        # a user's stage file is applied as KWOK applies it (a strategic merge: conditions merge by
        # type); the built-in stages write whole condition lists, where a merge patch gives the same
        # object for less of the server's CPU (about 0.1 ms a status write)
        self.status_patch = "merge" if self.builtin_stages else "strategic"
        # the failure model of the built-in stages (``podfailure``): pods' annotations, and this rate for
        # Job pods; a user's stages say their own failures, as KWOK's chaos stages do
        self.job_failures = JobFailures(config.job_failure_rate, config.job_failure_exit_code)
        self.pod_stages = StageSet(stages, "Pod", self.rng)
        self.node_stages = StageSet(stages, "Node", self.rng)
        # a user's node stages own the node's status, as in KWOK (whose heartbeat is a stage): the
        # simulator's own status report would undo theirs (a chaos ``node-not-ready``'s Ready=False).
        # Stages from the API own it whatever they are, none included (they may come any time)
        self.status_reports = self.builtin_stages or (not self.stages_from_api and not self.node_stages.stages)
        # Stage name -> (resourceVersion, stage): the last version of each Stage object that parsed
        self._stage_objects: dict[str, tuple[str, Stage]] = {}
        self._stages_changed = 0.0  # when the set from the API last changed (monotonic)
        self._sweeper: asyncio.Task[None] | None = None
        self.stage_informer = client.informer(STAGES, on_add=self._stage_seen,
                                              on_update=lambda _old, new: self._stage_seen(new),
                                              on_delete=self._stage_gone) if self.stages_from_api else None
        self.selector = parse_label_selector(config.node_selector)  # SelectorError (a ValueError) if bad
        # the labels its own nodes get so that the selector takes them: its key=value terms
        self.selector_labels = {r.key: next(iter(r.values)) for r in self.selector.requirements
                                if r.op in ("=", "in") and len(r.values) == 1}
        if config.count and not self.selector.matches({**self.selector_labels, **config.extra_labels}):
            raise ValueError(f"--manage-nodes-with-label-selector {config.node_selector!r} would not take the "
                             "nodes this simulator creates: give it key=value terms only")
        if config.manage_all_nodes and (config.node_selector or config.node_annotation_selector != FAKE_SELECTOR):
            raise ValueError("--manage-all-nodes cannot be used with --manage-nodes-with-label-selector or "
                             "--manage-nodes-with-annotation-selector (as KWOK's: they conflict)")
        # which nodes are fake, by their annotations (KWOK's --manage-nodes-with-annotation-selector);
        # the default, KWOK's convention, is read as one lookup
        self.annotation_selector = parse_label_selector(config.node_annotation_selector)
        self._fake_by_convention = config.node_annotation_selector == FAKE_SELECTOR
        self.selector_annotations = {r.key: next(iter(r.values)) for r in self.annotation_selector.requirements
                                     if r.op in ("=", "in") and len(r.values) == 1}
        if config.count and not config.manage_all_nodes and not self.annotation_selector.matches(
                {FAKE_NODE_ANNOTATION: "fake", **self.selector_annotations}):
            raise ValueError(f"--manage-nodes-with-annotation-selector {config.node_annotation_selector!r} would not "
                             "take the nodes this simulator creates: give it key=value terms only")
        self.catalog = catalog_by_name(config.catalog)
        if config.instance_type not in self.catalog:
            raise ValueError(f"instance type {config.instance_type!r} is not in the catalog")
        self._unknown_types: set[str] = set()  # node types not in the catalog, each warned of once
        self.image_catalog = config.image_catalog or ImageCatalog()
        mask = node_cidr_mask(config.cluster_cidr, max(config.count, 256))
        self.cidrs = CidrAllocator(config.cluster_cidr, mask)
        self._node_net = ipaddress.ip_network(config.node_network)
        self._node_ips: set[int] = set()
        # one per instance type, shared by its nodes (it is the same numbers for each)
        self._pull_models: dict[tuple[float, float, int], PullModel] = {}
        self._next_node_ip = 1
        self.nodes: dict[str, _Node] = {}
        self.pods: dict[str, _Pod] = {}  # "ns/name" -> state
        self.pods_by_node: dict[str, set[str]] = {}
        self.started = time.monotonic()
        self.start_time = now_rfc3339_nano()  # KWOK's ``StartTime`` in status templates
        self.wheel: TimingWheel[tuple[Any, ...]] = TimingWheel(config.tick, max(64, int(config.renew_interval /
                                                                                      config.tick) + 1),
                                                               time.monotonic())
        # the node's place in the renew interval: one of its batches (``heartbeat_batch`` apart)
        batches = max(1, round(config.renew_interval / max(config.heartbeat_batch, config.tick)))
        self.rota = HeartbeatRota(config.renew_interval, batches, self.started)
        # (priority, sequence, job): heartbeats first (their lag is what the node lifecycle
        # controller sees), then pods' stages, then the rest (node set-up, status reports)
        self._writes: asyncio.PriorityQueue[tuple[int, int, Callable[[], Awaitable[None]]]] = asyncio.PriorityQueue()
        self._seq = 0
        self._ready = asyncio.Event()
        # the names of the nodes it creates (``own_node_names``), once the node informer has listed
        self.node_names: list[str] | None = None
        self._named = asyncio.Event()
        # the nodes it is registering (``create_nodes``) and has yet to adopt: a first registration,
        # whose conditions, new, its kubelet records events about (``_adopt``)
        self._registering: set[str] = set()
        self.node_informer = client.informer(resource_path("", "v1", "nodes"), on_add=self._node_seen,
                                             on_update=lambda _old, new: self._node_seen(new),
                                             on_delete=self._node_gone)
        # the components' shared pod informer (one parsed copy of each pod per process; a
        # field-selected informer of its own held a second copy of every bound pod)
        self.pod_informer = client.informer(resource_path("", "v1", "pods"), on_add=self._pod_seen,
                                            on_update=lambda _old, new: self._pod_seen(new),
                                            on_delete=self._pod_gone)
        # with the built-in stages, the Secrets and ConfigMaps a kubelet needs before it starts a pod
        # (``refs``): a pod one of whose is missing waits, in ``_blocked`` (key -> what it said last,
        # what it waits for) and, by what it waits for, ``_awaiting``; their writes look at it again. (The
        # ConfigMaps' informer is the root CA publisher's too: in one process, listed once.)
        self.secret_informer = self.configmap_informer = None
        if self.builtin_stages:
            self.secret_informer = client.informer(
                resource_path("", "v1", "secrets"), on_add=lambda o: self._ref_written("secret", o),
                on_update=lambda _old, new: self._ref_written("secret", new))
            self.configmap_informer = client.informer(
                resource_path("", "v1", "configmaps"), on_add=lambda o: self._ref_written("configmap", o),
                on_update=lambda _old, new: self._ref_written("configmap", new))
        self._blocked: dict[str, tuple[tuple[str, ...], frozenset[Ref]]] = {}
        self._awaiting: dict[Ref, set[str]] = {}
        self._refs_synced = not self.builtin_stages
        self._parked: set[str] = set()  # pods seen before the informers above had listed: looked at once they have
        self._tasks: list[asyncio.Task[Any]] = []
        self.lease_renewals = 0
        self._recorder: Any = None  # the Events of stages' ``next.event`` (controllers.events.Recorder)
        # a stage whose write failed for the server's sake is tried again from the step that failed, as
        # KWOK's (its job keeps the step index): ("pod", key) or ("node", name) -> (the retry's generation,
        # that step); kept for those retries only
        self._stage_resume: dict[tuple[str, str], tuple[int, int]] = {}
        # the kubelet's Events about pods' containers, written on a lane of their own; with the built-in
        # stages only: a user's stages own the pods' lifecycle, and say its events (``next.event``), as KWOK's
        self._event_writes: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self.pod_events = KubeletEvents(client, self._event_writes.put_nowait, as_node=self._kubelet) \
            if config.pod_events and self.builtin_stages else None
        # the kubelet's Events about its node, on the same lane; likewise with the built-in stages only
        # (a user's node stages own the node's status, as KWOK's, which records none of these)
        self.node_events = NodeEvents(client, self._event_writes.put_nowait, as_node=self._kubelet) \
            if config.node_events and self.builtin_stages else None
        # a new pod's image lookups ("ns/name" -> when, and each container's path, image and pull),
        # until its images are on the node and their Pulled events recorded (with pod_events only)
        self._pulls: dict[str, tuple[float, list[tuple[str, str, Image, Pull]]]] = {}
        # whether renewals go as LeaseRenewals: known once the server's discovery is read
        self.bulk_renewals = False
        # whether a healthy node's periodic status report goes as NodeStatusReports (likewise)
        self.bulk_reports = False
        self._due_reports: list[str] = []  # healthy nodes whose status report fell due this tick
        self._due_leases: list[tuple[float, list[str]]] = []  # (due, names) of the batches due by this tick
        self.lease_lags: list[float] = []  # kept only while ``record_lags`` (the benchmark)
        self.record_lags = False

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until cancelled: create the configured nodes, then simulate."""
        if self.stage_informer is not None:
            from .crds import install

            await install(self.client)
        self._tasks = [asyncio.create_task(self.node_informer.run(), name="nodes-informer"),
                       asyncio.create_task(self.pod_informer.run(), name="pods-informer")]
        if self.stage_informer is not None:
            self._tasks.append(asyncio.create_task(self.stage_informer.run(), name="stages-informer"))
        if self.secret_informer is not None and self.configmap_informer is not None:
            self._tasks += [asyncio.create_task(self.secret_informer.run(), name="secrets-informer"),
                            asyncio.create_task(self.configmap_informer.run(), name="configmaps-informer")]
        self._tasks += [asyncio.create_task(self._writer(), name=f"nodes-writer-{i}")
                        for i in range(self.config.write_concurrency)]
        if self.pod_events is not None or self.node_events is not None:
            self._tasks += [asyncio.create_task(self._event_writer(), name=f"nodes-event-writer-{i}")
                            for i in range(EVENT_CONCURRENCY)]
        try:
            await self.node_informer.synced.wait()
            await self.pod_informer.synced.wait()
            if self.secret_informer is not None:
                # not waited for: a simulator whose credentials cannot read them still runs the pods
                # that need none (those that do wait, parked, and a warning says why)
                self._tasks.append(asyncio.create_task(self._refs_listed(), name="refs-synced"))
            if self.stage_informer is not None:
                await self.stage_informer.synced.wait()
                if not self._stage_objects:
                    log.info("node simulator: no Stage in the API server yet: nodes and pods wait for one")
            await self._ensure_namespace(LEASE_NAMESPACE)
            served = await self._served_bulk()
            self.bulk_renewals = self.config.lease_renewals and RENEWALS_PLURAL in served
            self.bulk_reports = self.config.bulk_status_reports and REPORTS_PLURAL in served
            names = self.node_names = self.own_node_names(self.config.count)
            self._named.set()
            while True:
                await self.create_nodes(names)
                # the watch has yet to bring some; a name another simulator took between the list and our create
                # (ours answered 409) is passed over as those it held before
                while not all(n in self.nodes or self._taken(n) for n in names):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                if all(n in self.nodes for n in names):
                    break
                names = self.node_names = self.own_node_names(self.config.count)
            self._ready.set()
            await self._tick_loop()
        finally:
            if self._sweeper is not None:
                self._tasks.append(self._sweeper)
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def pending_writes(self) -> int:
        """API writes queued and not yet started."""
        return self._writes.qsize()

    def synced(self) -> bool:
        """Whether the informers have listed what they watch (``controlplane nodes``' /readyz)."""
        return self.node_informer.synced.is_set() and self.pod_informer.synced.is_set() and (
            self.stage_informer is None or self.stage_informer.synced.is_set())

    async def named(self) -> list[str]:
        """The names of the nodes it creates, once it knows them: ``{prefix}0``.. but for those
        that nodes it does not play hold (``own_node_names``). (Another simulator may yet take
        one before its create: ``node_names`` then changes, with a warning.)"""
        await self._named.wait()
        assert self.node_names is not None
        return self.node_names

    async def ready(self) -> None:
        """Until the configured nodes exist and are adopted (their leases may still be on the way)."""
        await self._ready.wait()

    async def _tick_loop(self) -> None:
        while True:
            now = time.monotonic()
            due = self.wheel.next_due()
            if due > now:
                await asyncio.sleep(due - now)
                now = time.monotonic()
            for item in self.wheel.advance(now):
                self._fire(item, now)
            self._due_leases.extend(self.rota.advance(now))
            if self._due_leases:
                self._renew_due()
            if self._due_reports:
                names, self._due_reports = self._due_reports, []
                self._write(lambda names=names: self._report_many(names))  # type: ignore[misc]

    def _fire(self, item: tuple[Any, ...], now: float) -> None:
        kind = item[0]
        if kind == "status":
            _, name = item
            node = self.nodes.get(name)
            if node is None:
                return
            self.wheel.schedule(now + self.config.status_report_frequency, ("status", name))
            if node.failed:
                return
            if self.bulk_reports:
                self._due_reports.append(name)
            else:
                self._write(lambda: self._post_status(name))
        elif kind == "pod":
            _, key, gen = item
            st = self.pods.get(key)
            if st is not None and st.gen == gen:
                self._write(lambda: self._run_stage(key, gen), POD)
        elif kind == "ephemeral":
            _, key, uid = item
            self._ephemeral_pulled(key, uid)
        elif kind == "node-stage":
            _, name, gen = item
            node = self.nodes.get(name)
            if node is not None and node.stage_gen == gen:
                self._write(lambda: self._apply_node_stage(name, gen))

    def _write(self, job: Callable[[], Awaitable[None]], priority: int = 2, retry: bool = False) -> None:
        """Queue ``job``. ``retry``: a one-off write (no timer or event is sure to make it again)
        that fails for the server's sake (a 5xx, a 429, no answer in time) is queued again
        ``RETRY_AFTER`` seconds later, as the stages are; it must read what it writes afresh."""
        self._seq += 1
        self._writes.put_nowait((priority, self._seq, self._retrying(job, priority) if retry else job))

    def _retrying(self, job: Callable[[], Awaitable[None]], priority: int) -> Callable[[], Awaitable[None]]:
        async def attempt() -> None:
            try:
                await job()
            except (ApiError, httpx.TransportError, OSError) as e:
                if _server_side(e):
                    asyncio.get_running_loop().call_later(RETRY_AFTER, self._write, job, priority, True)
                raise
        return attempt

    async def _writer(self) -> None:
        while True:
            _, _, job = await self._writes.get()
            await self._run_write(job)

    async def _event_writer(self) -> None:
        while True:
            await self._run_write(await self._event_writes.get())

    async def _run_write(self, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except ApiError as e:
            log.debug("simulator write failed: %s", e)
        except (httpx.TransportError, OSError) as e:  # a server too busy to answer in time, or gone
            log.warning("simulator write failed: %r", e)
        except Exception:
            log.exception("simulator write failed")

    # ------------------------------------------------------------------ stages from the API

    def _stage_seen(self, obj: dict[str, Any]) -> None:
        """A Stage object added or changed (``--enable-crds Stage``): its stage replaces its last
        version in the set in force. One that cannot be run (a field or function not supported
        here, a resourceRef other than v1 Pod or Node) is logged, and its last version that could
        stays in force (none if it never could)."""
        meta = obj.get("metadata") or {}
        name, version = str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")
        try:
            stage = stage_from_object(obj)
        except StageError as e:
            kept = "its previous version stays in force" if name in self._stage_objects else "it is not used"
            log.warning("Stage %s (resourceVersion %s) cannot be run: %s; %s", name, version, e, kept)
            return
        self._stage_objects[name] = (version, stage)
        self._use_stages()

    def _stage_gone(self, obj: dict[str, Any]) -> None:
        if self._stage_objects.pop(str((obj.get("metadata") or {}).get("name") or ""), None) is not None:
            self._use_stages()

    def _use_stages(self) -> None:
        """Put the Stage objects' stages in force (by name: a list's order) and, once the Stages have
        been quiet for ``SWEEP_QUIET``, evaluate the objects against them (``_sweep``)."""
        stages = [stage for _, (_, stage) in sorted(self._stage_objects.items())]
        self.pod_stages = StageSet(stages, "Pod", self.rng)
        self.node_stages = StageSet(stages, "Node", self.rng)
        log.info("node simulator: stages in force: %s", ", ".join(s.name for s in stages) or "none")
        self._stages_changed = time.monotonic()
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_when_quiet(), name="stages-sweep")

    async def _sweep_when_quiet(self) -> None:
        while True:
            wait = self._stages_changed + SWEEP_QUIET - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            started = time.monotonic()
            await self._sweep()
            if self._stages_changed < started:
                return

    async def _sweep(self) -> None:
        """Draw the next stage, from the set now in force, of every simulated node and pod that has
        none pending, or whose pending stage is no longer in force (its Stage deleted). A pending
        stage still in force keeps its timer; when it fires, it runs as its Stage is then if that
        still matches (``StageSet.pending``), as always. So pods bound before there were Stages
        start once there are, and deleting a Stage stops what it had pending."""
        names = {s.name for s in self.node_stages.stages}
        for name in list(self.nodes):
            node, obj = self.nodes.get(name), self.node_informer.items.get(name)
            if node is not None and obj is not None and not node.failed and node.stage not in names:
                self._schedule_node_stage(node, obj)
        for i, key in enumerate(list(self.pods)):
            if i % 500 == 0:
                await asyncio.sleep(0)  # a turn for the rest (100,000 pods: a few seconds)
                names = {s.name for s in self.pod_stages.stages}
            st = self.pods.get(key)
            if st is None or st.stage == IMAGE_PULL or st.stage in names:
                continue
            pod = self.pod_informer.items.get(key)
            if pod is not None:
                self._pod_seen(pod)

    # ------------------------------------------------------------------ nodes

    def _pull_model(self, itype: InstanceType) -> PullModel:
        key = (itype.registry_bandwidth_mbps, itype.unpack_mbps, itype.unpack_workers)
        model = self._pull_models.get(key)
        if model is None:
            model = self._pull_models[key] = PullModel(bandwidth_mbps=key[0], unpack_mbps=key[1],
                                                       unpack_workers=key[2])
        return model

    def _allocate_node_ip(self) -> str:
        """A node address no node holds: the next one after the last given, past the network's
        end back to its start (those of deleted nodes are given again, ``_release_node_ip``)."""
        end = self._node_net.num_addresses - 1  # (offsets 1 .. end - 1: not the network's nor its broadcast)
        if len(self._node_ips) >= end - 1:
            raise IPExhausted(f"no node address left in {self._node_net}")
        while True:
            if self._next_node_ip >= end:
                self._next_node_ip = 1
            if self._next_node_ip not in self._node_ips:
                break
            self._next_node_ip += 1
        offset = self._next_node_ip
        self._node_ips.add(offset)
        return str(self._node_net.network_address + offset)

    def _release_node_ip(self, ip: str) -> None:
        with contextlib.suppress(ValueError):
            self._node_ips.discard(int(ipaddress.ip_address(ip)) - int(self._node_net.network_address))

    def node_manifest(self, name: str, index: int, itype: InstanceType | None = None) -> dict[str, Any]:
        """A Node as this simulator creates it (the autoscaler creates its own, annotated the same way)."""
        itype = itype or self.catalog[self.config.instance_type]
        zone = f"zone-{chr(ord('a') + index % max(1, self.config.zones))}"
        rack = f"{zone}-rack-{(index // max(1, self.config.zones)) % max(1, self.config.racks_per_zone)}"
        # a kubelet registers its node with the deprecated beta OS and arch labels beside the GA
        # ones (upstream's initialNode: kubeletapis.LabelOS, LabelArch), which old node selectors name
        labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
                  "topology.kubernetes.io/region": "region-1", "topology.controlplane.io/rack": rack,
                  "type": "kwok", "beta.kubernetes.io/arch": itype.arch, "beta.kubernetes.io/os": itype.os,
                  **itype.labels(), **self.config.extra_labels, **self.selector_labels}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0",
                                             **self.selector_annotations}},
                "spec": {"providerID": f"controlplane://{name}"}}

    def _plays(self, obj: dict[str, Any]) -> bool:
        """Whether this simulator is the kubelet of the Node ``obj``: a fake node (by its annotations)
        its label selector matches; any node with ``manage_all_nodes``."""
        if self.config.manage_all_nodes:
            return True
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        fake = annotations.get(FAKE_NODE_ANNOTATION) == "fake" if self._fake_by_convention \
            else self.annotation_selector.matches(annotations)
        return fake and (not self.selector.requirements or self.selector.matches(meta.get("labels")))

    def _taken(self, name: str) -> bool:
        """Whether a node this simulator does not play holds the name ``name``."""
        node = self.node_informer.items.get(name)
        return node is not None and not self._plays(node)

    def own_node_names(self, count: int) -> list[str]:
        """The names of the ``count`` nodes this simulator is to have: ``{prefix}0``, ``{prefix}1``, ..., passing
        over a name a node it does not play holds (another simulator's, under another
        ``--manage-nodes-with-label-selector``, or a real node's), so that it gets ``count`` nodes of its
        own and waits for none it will never adopt. Asked once the node informer has listed."""
        names: list[str] = []
        taken: list[str] = []
        i = 0
        while len(names) < count:
            name = f"{self.config.name_prefix}{i}"
            (taken if self._taken(name) else names).append(name)
            i += 1
        if taken:
            log.warning("node simulator: %d node name%s (%s) taken by nodes it does not play: its %d nodes are %s",
                        len(taken), "s" if len(taken) > 1 else "", _name_span(taken), count, _name_span(names))
        return names

    def registration_status(self, name: str, itype: InstanceType, ip: str) -> dict[str, Any]:
        """The status a kubelet registers its Node with (upstream's ``initialNode`` ends with
        ``setNodeStatus``, and the registry keeps a Node's status on create): the machine's capacity
        and allocatable, addresses and images, and, where the simulator owns the node's status
        (``status_reports``: the built-in stages, or a stage file without node stages), its
        conditions (Ready and the pressure ones), ``daemonEndpoints`` and ``nodeInfo``, as the
        built-in ``node-initialize`` writes them, which then has nothing to do (its selector wants a
        node not Ready). Where a user's node stages own the status (a file's, Stage objects) the
        conditions and the rest are left to their ``node-initialize``, given the same values it was
        given before (``_apply_node_stage``): as the Nodes of KWOK's documentation, created with
        their capacity and no conditions."""
        capacity = itype.capacity()
        status: dict[str, Any] = {"capacity": capacity, "allocatable": dict(capacity),
                                  "addresses": [{"type": "InternalIP", "address": ip},
                                                {"type": "Hostname", "address": name}]}
        if self.config.preloaded_images:
            status["images"] = [{"names": [i], "sizeBytes": 700_000} for i in self.config.preloaded_images]
        if not self.status_reports:
            return status
        # a machine's system UUID, stable across registrations (the kubelet reads it from the firmware)
        status["nodeInfo"] = {"systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"controlplane://{name}"))}
        body = {"metadata": {"name": name, "labels": {"kubernetes.io/arch": itype.arch}}, "status": status}
        funcs = {"Now": now_rfc3339, "Version": _version, "NodePort": _kubelet_port, "NodeConditions": _node_conditions,
                 "NodeIP": lambda: ip, "NodeName": lambda: name}
        return {**status, **NATIVE["node-initialize"](body, funcs)}

    async def create_nodes(self, names: list[str]) -> None:
        """Create the nodes ``names`` (``{prefix}{index}``; those that exist are left alone), in
        parallel, each with its status (``registration_status``), as a kubelet registers its node."""
        path = resource_path("", "v1", "nodes")
        sem = asyncio.Semaphore(self.config.write_concurrency)
        prefix = self.config.name_prefix

        async def one(name: str) -> None:
            if name in self.node_informer.items:
                return
            itype = self.catalog[self.config.instance_type]
            body = self.node_manifest(name, int(name[len(prefix):]), itype)
            cidr = self.cidrs.allocate()  # the node IPAM controller's part, done up front: one write less
            body["spec"].update(podCIDR=cidr, podCIDRs=[cidr])
            try:
                ip = self._allocate_node_ip()
            except IPExhausted:
                self.cidrs.release(cidr)
                raise
            body["status"] = self.registration_status(name, itype, ip)
            self._registering.add(name)
            async with sem:
                try:
                    await self._kubelet(name).create(path, body)  # a kubelet registers its node
                except ApiError as e:
                    self._registering.discard(name)
                    self.cidrs.release(cidr)
                    held = self.nodes.get(name)
                    if held is None or held.ip != ip:  # (not the address a node of that name was adopted with)
                        self._release_node_ip(ip)
                    if e.code != 409:
                        raise

        await asyncio.gather(*(one(name) for name in names))

    def _node_seen(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if not self._plays(obj):
            if name in self.nodes:
                self._node_gone(obj)
            return
        node = self.nodes.get(name)
        if node is None:
            node = self._adopt(obj)
            if node is None:
                return
        failure = (meta.get("annotations") or {}).get(FAILURE_ANNOTATION, "")
        if failure in FAILURE_MODES and node.failed != failure:
            self.fail_node(name, failure, manual=False)
        elif not failure and node.failed and not node.manual:
            self.recover_node(name)
        if self.node_events is not None:
            self._node_transitions(node, obj)
        if not node.failed:
            self._schedule_node_stage(node, obj)

    def _node_transitions(self, node: _Node, obj: dict[str, Any]) -> None:
        """The kubelet's events about what changed on its node: the Ready condition it reported
        turned (``NodeReady``; ``NodeNotReady`` when it reports not-ready), a cordon it saw come
        or go. A kubelet that is down reports nothing and sees nothing until it is back."""
        conditions = (obj.get("status") or {}).get("conditions") or ()
        ready = next((str(c.get("status", "")) for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"),
                     "")
        previous, node.ready = node.ready, ready
        if node.failed == "unreachable" or self.node_events is None:
            return
        if ready != previous:
            if ready == "True" and not node.failed:
                self.node_events.ready(node.name, True)
            elif ready == "False" and node.failed == "not-ready":
                self.node_events.ready(node.name, False)
        unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        if unschedulable != node.unschedulable:
            node.unschedulable = unschedulable
            self.node_events.schedulable(node.name, unschedulable)

    def _schedule_node_stage(self, node: _Node, obj: dict[str, Any]) -> None:
        """Draw the node's next stage and set its timer, as for pods: the draw being the
        stage already pending, its delay runs on; another (or none) replaces it. A version of
        the Node from before the last stage's write (an event the informer delivers before
        that write's own) draws nothing: its write's event, or a later one, will
        (``_apply_node_stage`` draws from the informer's version once the write answers). As
        KWOK's stage controller skips a version it has already queued a stage for."""
        if _resource_version(obj) < node.stage_written:
            return
        stage = self.node_stages.select(obj)
        if stage is not None and stage.name == node.stage:
            return
        node.stage_gen += 1
        node.stage = stage.name if stage is not None else None
        if stage is None:
            return
        name, gen = node.name, node.stage_gen
        delay = stage.delay.seconds(obj, datetime.now(UTC), self.rng) if stage.delay else 0.0
        if delay <= 0:
            self._write(lambda: self._apply_node_stage(name, gen))
        else:
            self.wheel.schedule(time.monotonic() + delay, ("node-stage", name, gen))

    def _adopt(self, obj: dict[str, Any]) -> _Node | None:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        name = meta["name"]
        itype = self._instance_type(name, meta.get("labels") or {})
        cidr = spec.get("podCIDR")
        patch_spec = False
        try:
            if cidr:
                self.cidrs.occupy(cidr)
            else:
                cidr = self.cidrs.allocate()
                patch_spec = True
            ip = next((a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"),
                      None)
            if ip:
                try:
                    offset = int(ipaddress.ip_address(ip)) - int(self._node_net.network_address)
                    if 0 < offset < self._node_net.num_addresses:
                        self._node_ips.add(offset)
                except ValueError:
                    pass
            else:
                ip = self._allocate_node_ip()
        except IPExhausted as e:
            log.error("cannot adopt node %s: %s", name, e)
            return None
        model = self._pull_model(itype)
        images = NodeImages(model, serialize=self.config.serialize_image_pulls)
        for image in self.config.preloaded_images:
            images.preload(image)
        node = _Node(name, ip, cidr, itype, images, self.rota.offset(name))
        node.uid = meta.get("uid", "")
        ready = next((c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "Ready"),
                     None)
        if ready is not None and ready.get("status") == "True" and isinstance(ready.get("lastTransitionTime"), str):
            node.since = ready["lastTransitionTime"]  # kept by its status reports, as a kubelet keeps it
        registered = name in self._registering  # by this simulator: its conditions are new
        self._registering.discard(name)
        if self.node_events is not None:
            # (a node that has its conditions and that it did not register: a kubelet restarted,
            # which finds them set)
            fresh = registered or ready is None
            node.ready = "" if fresh else str((ready or {}).get("status") or "")
            self.node_events.starting(name, conditions=fresh)
        # out of the cyclic GC's sight, as the watch cache's entries (gcsettings.untracked):
        # three objects a node that hold nothing leading back to them
        for part in (node, node.pod_ips, images):
            untracked(part)
        self.nodes[name] = node
        if patch_spec:  # the node IPAM controller's part
            self._write(lambda: self._patch_pod_cidr(name, cidr), retry=True)
        self._write(lambda: self._ensure_lease(name, meta.get("uid")) if self._still(name, node) else _done(),
                    retry=True)
        if self.config.csi_nodes:
            self._write(lambda: self._ensure_csi_node(name, meta.get("uid")) if self._still(name, node) else _done(),
                        retry=True)
        self.rota.add(name)  # renewed each time its batch comes round
        now = time.monotonic()
        if self.status_reports:
            self.wheel.schedule(now + self.config.status_report_frequency * (0.5 + self.rng.random() / 2),
                                ("status", name))
        for key in list(self.pods_by_node.get(name, ())):  # pods seen before their node
            pod = self.pod_informer.items.get(key)
            if pod is not None:
                self._pod_seen(pod)
        return node

    def _instance_type(self, name: str, labels: dict[str, str]) -> InstanceType:
        """The type a node's ``node.kubernetes.io/instance-type`` label names, or the simulator's
        own (``--instance-type``) for a node without one or of a type not in its catalog. The
        latter is warned of once per type: such a node's image pulls are the default type's, and
        so is its capacity unless the Node carries its own (the autoscaler's nodes do)."""
        wanted = labels.get("node.kubernetes.io/instance-type", "")
        itype = self.catalog.get(wanted)
        if itype is not None:
            return itype
        if wanted and wanted not in self._unknown_types:
            self._unknown_types.add(wanted)
            log.warning("node %s: instance type %r is not in the simulator's catalog; its nodes pull images as "
                        "a %s and, unless their Node has its status.capacity, have its capacity (give the "
                        "simulator the catalog that has the type: --instance-types FILE)", name, wanted,
                        self.config.instance_type)
        return self.catalog[self.config.instance_type]

    def _node_gone(self, obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        node = self.nodes.pop(name, None)
        if node is not None:
            self._stage_resume.pop(("node", name), None)
            self.rota.discard(name)
            self.cidrs.release(node.cidr)
            self._release_node_ip(node.ip)  # (as its pod CIDR: a node made later may have it)
            if node.uid:  # the garbage collector's part: the Lease (and CSINode) is owned by the Node
                self._write(lambda: self._delete_owned(
                    resource_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE, name), node.uid),
                    retry=True)
                if self.config.csi_nodes:
                    self._write(lambda: self._delete_owned(resource_path(*CSI_NODES, name=name), node.uid),
                                retry=True)

    async def _delete_owned(self, path: str, owner: str) -> None:
        """Delete the object at ``path`` of a deleted Node, if that Node owned it (not one of the
        same name since)."""
        try:
            obj = await self.client.get(path)
            if not any(r.get("uid") == owner for r in obj["metadata"].get("ownerReferences") or []):
                return
            await self.client.delete(path, {"preconditions": {"uid": obj["metadata"]["uid"]}})
        except ApiError as e:
            if e.code not in (404, 409):
                raise

    def _still(self, name: str, node: _Node) -> bool:
        """Whether ``node`` is still the simulator's node ``name`` (for a write tried again)."""
        return self.nodes.get(name) is node

    async def _patch_pod_cidr(self, name: str, cidr: str) -> None:
        node = self.nodes.get(name)
        if node is None or node.cidr != cidr:
            return  # gone since, or another node of that name (a write tried again)
        await self.client.patch(resource_path("", "v1", "nodes", name=name),
                                {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}, patch_type="merge")

    def _lease_body(self, name: str, uid: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": LEASE_NAMESPACE}
        if uid:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": name, "leaseDurationSeconds": self.config.lease_duration_seconds,
                         "renewTime": _micro_time()}}

    async def _ensure_lease(self, name: str, uid: str | None) -> None:
        try:
            await self._kubelet(name).create(resource_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE),
                                             self._lease_body(name, uid))
        except ApiError as e:
            if e.code != 409:
                raise
        node = self.nodes.get(name)
        if node is not None:
            node.lease_ready = True

    async def _ensure_csi_node(self, name: str, uid: str | None, again: bool = True) -> None:
        """The node's CSINode, as the kubelet's CSI node-info manager creates it at registration.
        One that exists is left as it is (this simulator's, from an earlier run), unless it is a
        former Node's of that name whose deletion this one's creation overtook: that one goes
        (the garbage collector's part), and the node's own is created."""
        meta: dict[str, Any] = {"name": name, "annotations": {MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS}}
        if uid:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]
        path = resource_path(*CSI_NODES)
        try:
            await self._kubelet(name).create(path, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                                    "metadata": meta, "spec": {"drivers": []}})
        except ApiError as e:
            if e.code != 409:
                raise
            try:
                held = (await self.client.get(f"{path}/{name}"))["metadata"]
            except ApiError as gone:  # deleted since (the garbage collector's, its owner gone): made again
                if gone.code != 404 or not again:
                    raise
                await self._ensure_csi_node(name, uid, again=False)
                return
            owners = [r.get("uid") for r in held.get("ownerReferences") or [] if r.get("kind") == "Node"]
            if uid and again and owners and uid not in owners:
                await self._delete_owned(f"{path}/{name}", owners[0])
                await self._ensure_csi_node(name, uid, again=False)

    async def _served_bulk(self) -> set[str]:
        """The bulk resources of this emulator the server serves (none: another API server,
        where each Lease is PUT and each status patched)."""
        try:
            listed = await self.client.get(f"/apis/{RENEWALS_GROUP}/{RENEWALS_VERSION}")
        except ApiError:
            return set()
        return {r.get("name") for r in listed.get("resources") or []}

    def _renew_due(self) -> None:
        """Queue the renewals of the batches due by this tick: LeaseRenewals of up to
        ``renewals_per_request`` Leases when the server serves them, else a PUT each.
        A node whose last renewal is still unanswered sits this one out (the kubelet's
        one renew loop), as does one whose kubelet is down or whose Lease is on its way."""
        batches, self._due_leases = self._due_leases, []
        nodes = self.nodes
        for at, names in batches:
            due = [name for name in names if (node := nodes.get(name)) is not None and node.lease_ready
                   and not node.renewing and node.failed != "unreachable"]
            for name in due:
                nodes[name].renewing = True
            if not self.bulk_renewals:
                for name in due:
                    self._write(lambda name=name, at=at: self._renewals(at, [name], False), HEARTBEAT)  # type: ignore[misc]
                continue
            size = max(1, self.config.renewals_per_request)
            for start in range(0, len(due), size):
                chunk = due[start:start + size]
                self._write(lambda at=at, chunk=chunk: self._renewals(at, chunk, True), HEARTBEAT)  # type: ignore[misc]

    async def _renewals(self, at: float, names: list[str], bulk: bool) -> None:
        """Renew ``names``, due at ``at`` (a LeaseRenewal, or a PUT each); then their next
        renewals may fall due."""
        try:
            if bulk:
                await self._renew_many(at, names)
            else:
                for name in names:
                    await self._renew(name, at)
        finally:
            for name in names:
                node = self.nodes.get(name)
                if node is not None:
                    node.renewing = False

    async def _renew_many(self, at: float, names: list[str]) -> None:
        names = [name for name in names if (node := self.nodes.get(name)) is not None and node.failed != "unreachable"]
        if not names:
            return
        body = {"apiVersion": f"{RENEWALS_GROUP}/{RENEWALS_VERSION}", "kind": "LeaseRenewal",
                "metadata": {"namespace": LEASE_NAMESPACE},
                "spec": {"renewTime": _micro_time(), "leases": names}}
        try:
            answer = await self.client.create(resource_path(RENEWALS_GROUP, RENEWALS_VERSION, RENEWALS_PLURAL,
                                                            LEASE_NAMESPACE), body)
        except ApiError as e:
            if e.code not in (404, 405):
                raise
            self.bulk_renewals = False  # no longer served (the server was replaced): PUTs from now on
            for name in names:
                await self._renew(name, at)
            return
        status = answer.get("status") or {}
        missing, conflicts = set(status.get("notFound") or ()), set(status.get("conflicts") or ())
        lag = max(0.0, time.monotonic() - at)
        renewed = len(names) - len(missing) - len(conflicts)
        LEASE_RENEWALS.labels(result="ok").inc(renewed)
        self._renewed(lag, renewed)
        if not missing and not conflicts:
            return
        for name in names:
            if name in missing:  # deleted by someone: created again, as the kubelet does
                LEASE_RENEWALS.labels(result="error").inc()
                node = self.nodes.get(name)
                if node is not None:
                    try:
                        await self._ensure_lease(name, node.uid)
                    except ApiError as e:
                        # (its namespace deleted with it, say, until the API server's system
                        # namespaces controller makes it again): the kubelet's lease controller
                        # keeps trying, so the next renewal finds it missing and creates it then
                        log.debug("node %s: lease not created again: %s", name, e.message)
            elif name in conflicts:
                await self._renew(name, at)

    async def _report_many(self, names: list[str]) -> None:
        """Post the periodic status of healthy nodes as NodeStatusReports: each node's
        conditions re-timed as its status patch would; a node another writer kept changing
        (or whose kubelet failed meanwhile) is patched on its own."""
        names = [name for name in names if (node := self.nodes.get(name)) is not None and not node.failed]
        reported = [{"type": t, "status": st, "reason": reason, "message": message}
                    for t, st, reason, message in _NODE_CONDITIONS]
        for start in range(0, len(names), self.config.renewals_per_request):
            chunk = names[start:start + self.config.renewals_per_request]
            body = {"apiVersion": f"{RENEWALS_GROUP}/{RENEWALS_VERSION}", "kind": "NodeStatusReport",
                    "spec": {"heartbeatTime": now_rfc3339(), "conditions": reported, "nodes": chunk}}
            try:
                answer = await self.client.create(resource_path(RENEWALS_GROUP, RENEWALS_VERSION, REPORTS_PLURAL),
                                                  body)
            except ApiError as e:
                if e.code not in (404, 405):
                    raise
                self.bulk_reports = False  # no longer served (the server was replaced): a patch each from now on
                for name in chunk:
                    await self._post_status(name)
                continue
            for name in (answer.get("status") or {}).get("conflicts") or ():
                await self._post_status(name)

    def _renewed(self, lag: float, count: int = 1) -> None:
        """``count`` Leases renewed ``lag`` seconds after they fell due."""
        self.lease_renewals += count
        if self.record_lags:
            self.lease_lags.extend([lag] * count)
        for _ in range(count):
            LEASE_RENEW_LAG.observe(lag)

    async def _renew(self, name: str, due: float) -> None:
        node = self.nodes.get(name)
        if node is None or node.failed == "unreachable":
            return
        path = resource_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE, name)
        body = self._lease_body(name, node.uid)
        try:
            # An update without a resourceVersion is unconditional: the kubelet owns its lease.
            await self._kubelet(name).update(path, body)
            LEASE_RENEWALS.labels(result="ok").inc()
        except ApiError as e:
            LEASE_RENEWALS.labels(result="error").inc()
            if e.code == 404:
                await self._ensure_lease(name, node.uid)
            else:
                raise
        self._renewed(max(0.0, time.monotonic() - due))

    def _conditions(self, node: _Node, heartbeat: str) -> list[dict[str, Any]]:
        out = []
        for ctype, status, reason, message in _NODE_CONDITIONS:
            if node.failed == "not-ready" and ctype == "Ready":
                status, reason, message = "False", "KubeletNotReady", "container runtime is down (simulated)"
            out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                        "lastHeartbeatTime": heartbeat, "lastTransitionTime": node.since})
        return out

    async def _post_status(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None or node.failed == "unreachable":
            return
        await self._kubelet(name).patch(resource_path("", "v1", "nodes", name=name, subresource="status"),
                                        {"status": {"conditions": self._conditions(node, now_rfc3339())}},
                                        patch_type="merge")

    def _template_funcs(self, node: _Node | None, pod: dict[str, Any] | None = None) -> dict[str, Callable[..., Any]]:
        """KWOK's template functions; ``NodeIP``/``NodeName`` are the node's, ``PodIP``
        the pod's (allocated on first use) when rendering a pod's stage. ``NodeIPsWith`` and
        ``PodIPsWith`` (KWOK's dual-stack forms, v0.8's fast ``pod-ready``) give lists: a node
        and a pod have one address here, none for a node that is not simulated."""
        def node_ip_with(node_name: Any) -> str:
            n = self.nodes.get(str(node_name))
            return n.ip if n is not None else ""

        def node_ips_with(node_name: Any) -> list[str]:
            ip = node_ip_with(node_name)
            return [ip] if ip else []

        def pod_ips_with(*args: Any) -> list[str]:
            ip = self._pod_ip_with(*args)
            return [ip] if ip else []

        def pod_ip() -> str:
            if pod is None or node is None:
                return ""
            meta = pod.get("metadata") or {}
            return self._pod_ip_with(node.name, bool((pod.get("spec") or {}).get("hostNetwork")), meta.get("uid"),
                                     meta.get("name"), meta.get("namespace"))

        return {
            "Now": now_rfc3339_nano,
            "Quote": _quote,
            "YAML": _yaml,
            "Version": _version,
            "NodeIP": lambda: node.ip if node else "",
            "NodeName": lambda: node.name if node else "",
            "NodePort": _kubelet_port,
            "NodeIPWith": node_ip_with,
            "NodeIPsWith": node_ips_with,
            "PodIP": pod_ip,
            "PodIPWith": self._pod_ip_with,
            "PodIPsWith": pod_ips_with,
            "PodAllocation": pod_allocation,
            "StartTime": lambda: self.start_time,
            "NodeConditions": _node_conditions,
        }

    async def _apply_node_stage(self, name: str, gen: int) -> None:
        node = self.nodes.get(name)
        if node is None or node.stage_gen != gen or node.stage is None:
            return
        pending, node.stage = node.stage, None
        obj = self.node_informer.items.get(name)
        if obj is None or node.failed:
            return
        stage = self.node_stages.pending(pending, obj)
        if stage is None:  # no longer matches: draw again
            self._schedule_node_stage(node, obj)
            return
        obj = dict(obj)
        status = dict(obj.get("status") or {})
        # what the instance type says, unless someone set it (the autoscaler's nodes come with their capacity):
        # the one of capacity and allocatable the Node has stands for both
        own = status.get("capacity") or status.get("allocatable") or node.itype.capacity()
        status["capacity"] = status.get("capacity") or own
        status["allocatable"] = status.get("allocatable") or own
        if not status.get("addresses"):
            status["addresses"] = [{"type": "InternalIP", "address": node.ip},
                                   {"type": "Hostname", "address": name}]
        if not status.get("images"):
            status["images"] = [{"names": [i], "sizeBytes": 700_000} for i in self.config.preloaded_images]
        obj["status"] = status
        path = resource_path("", "v1", "nodes", name=name)
        step = self._resume_at("node", name, gen)
        try:  # the steps in KWOK's order (STEP_EVENT)
            if step == STEP_EVENT:
                self._stage_event(stage, obj)
                step = STEP_FINALIZERS
            # the finalizers' and the status's writes: the Node's versions before they answer draw nothing
            written, node.stage_written = node.stage_written, _STAGE_WRITING
            wrote, failed = 0, None
            try:
                if step == STEP_FINALIZERS:
                    answer = await self._stage_finalizers(stage, obj, path)
                    wrote = 0 if answer is None else _resource_version(answer)
                    step = STEP_STATUS
                if step == STEP_STATUS:
                    rendered = stage.next.render_status(obj, self._template_funcs(node))
                    if rendered is not None:
                        for k in ("capacity", "allocatable", "addresses", "images"):
                            if k in status and k not in rendered:
                                rendered[k] = status[k]
                        answer = await self._kubelet(name).patch(path + "/status", {"status": rendered},
                                                                 patch_type=self.status_patch)
                        wrote = _resource_version(answer)
                    step = STEP_DELETE
            except StageError as e:
                failed = e
            finally:
                if node.stage_written == _STAGE_WRITING:  # (else a newer write of it has answered since)
                    node.stage_written = written
            self._node_stage_wrote(node, wrote)
            if failed is not None:
                _stage_failed("node", name, stage, failed)
                return
            await self._stage_delete(stage, obj, path)
        except (ApiError, httpx.TransportError, OSError) as e:
            STAGE_TRANSITIONS.labels(stage=stage.name, result="error").inc()
            if isinstance(e, ApiError) and e.code == 404:
                return
            if not _server_side(e):
                assert isinstance(e, ApiError)
                _refused("node", name, stage.name, e)
                return
            # as a pod's: no event of the node may come to draw it again (node-initialize failed:
            # the node would stay NotReady), so the stage is tried again after KWOK's back-off, from
            # the step that failed
            if node.stage is None:
                node.stage_gen += 1
                node.stage = stage.name
                self._stage_resume[("node", name)] = (node.stage_gen, step)
                self.wheel.schedule(time.monotonic() + stage_retry_delay(node.retries, self.rng),
                                    ("node-stage", name, node.stage_gen))
                node.retries += 1
            raise
        node.retries = 0
        STAGE_TRANSITIONS.labels(stage=stage.name, result="ok").inc()

    def _node_stage_wrote(self, node: _Node, wrote: int) -> None:
        """A node stage's writes have answered, ``wrote`` the resourceVersion of the last (0: none):
        the versions before it draw nothing, and the events that came while they were in flight drew
        nothing: the informer's version, if it is that write's or newer, draws now (an older one's
        event waits)."""
        if not wrote:
            return
        node.stage_written = max(node.stage_written, wrote)
        current = self.node_informer.items.get(node.name)
        if current is not None and not node.failed and node.stage is None:
            self._schedule_node_stage(node, current)

    # ------------------------------------------------------------------ failures

    def fail_node(self, name: str, mode: str = "unreachable", manual: bool = True) -> None:
        """Make node ``name``'s kubelet fail: ``unreachable`` (lease and status stop: the node
        lifecycle controller turns its conditions Unknown after its grace period) or
        ``not-ready`` (it reports Ready=False). That controller taints it for that,
        ``unreachable``/``not-ready:NoExecute``, and the taint eviction controller evicts its pods."""
        if mode not in FAILURE_MODES:
            raise ValueError(f"failure mode {mode!r} is not one of {FAILURE_MODES}")
        node = self.nodes[name]
        node.failed = mode
        node.manual = manual
        node.failure_gen += 1
        node.since = now_rfc3339()
        node.stage, node.stage_gen = None, node.stage_gen + 1  # nor its node's stages
        for key in self.pods_by_node.get(name, ()):  # a dead kubelet advances no pod
            st = self.pods.get(key)
            if st is not None:
                st.gen += 1
                st.stage = None
        if mode == "not-ready":
            self._write(lambda: self._post_status(name))

    def recover_node(self, name: str) -> None:
        """Bring node ``name`` back: its kubelet posts Ready (the node lifecycle controller then
        takes the taints off), renews its lease and runs its pods again."""
        node = self.nodes[name]
        if not node.failed:
            return
        node.failed = ""
        node.failure_gen += 1
        node.since = now_rfc3339()

        async def recover() -> None:
            await self._post_status(name)
            # what it missed while down, a cordon say, from its view of the node: the post
            # above changes nothing to see when it falls in the second of the last one
            obj = self.node_informer.items.get(name)
            if obj is not None and name in self.nodes:
                self._node_transitions(self.nodes[name], obj)
            await self._renew(name, time.monotonic())
            for key in list(self.pods_by_node.get(name, ())):
                pod = self.pod_informer.items.get(key)
                if pod is not None:
                    self._pod_seen(pod)  # (its Ready condition put back, if it was taken)

        self._write(recover)

    async def _ready_again_now(self, key: str) -> None:
        """``_ready_again`` for the pod ``key`` as the informer shows it now."""
        pod = self.pod_informer.items.get(key)
        if pod is None:
            self._readying.discard(key)
            return
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None or node.failed:  # (its recovery looks again)
            self._readying.discard(key)
            return
        await self._ready_again(pod)

    async def _ready_again(self, pod: dict[str, Any]) -> None:
        """A running pod whose Ready condition someone else turned False while the kubelet was
        away (the node lifecycle controller's MarkPodsNotReady) is Ready again, as the kubelet's
        status manager puts back the status it holds (with the built-in stages, whose status
        this is; a user's stages own theirs): at its recovery, and on any later event showing
        it so (a MarkPodsNotReady still under way at the recovery)."""
        meta = pod.get("metadata") or {}
        self._readying.discard(f"{meta.get('namespace')}/{meta.get('name')}")
        if not _unreadied(pod):
            return
        generation = generation_of(pod)
        ready = stamped({"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}, generation)
        status: dict[str, Any] = {"conditions": [ready]}
        if generation is not None:
            status["observedGeneration"] = generation
        try:
            await self._kubelet((pod.get("spec") or {}).get("nodeName") or "").patch(
                resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name"), "status"),
                {"metadata": {"uid": meta.get("uid")}, "status": status}, patch_type="strategic")
        except ApiError as e:
            if e.code not in (404, 409):
                raise

    # ------------------------------------------------------------------ pods

    def _pod_ip_with(self, node_name: Any, host_network: Any = False, uid: Any = "", name: Any = "",
                     namespace: Any = "") -> str:
        node = self.nodes.get(str(node_name))
        if node is None:
            return ""
        if host_network is True:
            return node.ip
        st = self.pods.get(f"{namespace}/{name}")
        if st is not None and (st.ip or st.finished):
            return st.ip or ""  # (a finished pod gets no address: it has no sandbox)
        ip = node.pod_ips.allocate()
        if st is not None:
            st.ip = ip
        return ip

    def _pod_seen(self, pod: dict[str, Any]) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        node_name = spec.get("nodeName")
        if not node_name:
            return
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self.pods_by_node.setdefault(node_name, set()).add(key)
        node = self.nodes.get(node_name)
        if node is None:
            return
        st = self.pods.get(key)
        uid = meta.get("uid", "")
        if st is None or st.uid != uid:
            if st is not None:
                self._pulls.pop(key, None)
                self._release(st)
            st = self.pods[key] = untracked(_Pod(uid, node_name, time.monotonic()))  # (as its node's)
            if meta.get("deletionTimestamp"):
                st.deletion_seen = 0.0
                st.deletion_grace = meta.get("deletionGracePeriodSeconds")
            ip = (pod.get("status") or {}).get("podIP")
            if ip and not spec.get("hostNetwork") and (_terminal(pod) or node.pod_ips.occupy(ip)):
                st.ip = ip
                st.started = True
                st.finished = _terminal(pod)
        if node.failed:  # a dead kubelet advances no pod; evictions are the taint eviction controller's
            return
        if not st.finished and _terminal(pod):
            # the kubelet tears a finished pod's sandbox down, and CNI DEL frees its address for
            # the node's next pods (a Job's finished pods would otherwise fill the pod CIDR)
            st.finished = True
            if st.ip:
                node.pod_ips.release(st.ip)
        if self.builtin_stages and key not in self._readying and _unreadied(pod):
            self._readying.add(key)
            self._write(lambda: self._ready_again_now(key), POD, retry=True)
        if meta.get("deletionTimestamp"):
            self._deletion_seen(st, meta)
        if self.pod_events is not None and not st.stopping and (pod.get("metadata") or {}).get("deletionTimestamp"):
            st.stopping = True
            self._pulls.pop(key, None)
            if st.started and not st.finished and not _terminal(pod):
                self.pod_events.stopping(pod, node.name)
        if self.secret_informer is not None and not st.started and st.pulled_at is None \
                and has_volume_refs(pod) and self._volumes_wait(key, st, node, pod):
            return  # its volumes first, as the kubelet's volume manager, before any image is pulled
        if not self._images_ready(key, st, node, pod):
            return
        if self.secret_informer is not None and not st.started and self._env_waits(key, st, node, pod):
            return  # a container's environment, as the kubelet makes it once the image is there
        wrote = self._start_ephemeral(key, st, node, pod)
        if not self._resize(key, node.name, pod) and not wrote and self.builtin_stages:
            self._observe(key, pod)
        if self.builtin_stages and may_fail(pod, self.job_failures) and self._failing(key, st, pod):
            return
        if self.builtin_stages and self._probing(key, st, pod):
            return
        stage = self.pod_stages.select(pod)
        if stage is None:
            st.stage = None
            st.gen += 1
            return
        if st.stage == stage.name:
            return  # already pending: its delay runs on
        st.gen += 1
        st.stage = stage.name
        delay = stage.delay.seconds(pod, datetime.now(UTC), self.rng) if stage.delay else 0.0
        if self.builtin_stages and stage.delay and st.deletion_seen:
            delay = max(delay, self._grace_left(st, meta))
        if delay <= 0:
            gen = st.gen
            self._write(lambda: self._run_stage(key, gen), POD)
        else:
            self.wheel.schedule(time.monotonic() + delay, ("pod", key, st.gen))

    @staticmethod
    def _deletion_seen(st: _Pod, meta: dict[str, Any]) -> None:
        """Note a deleted pod's grace period as its kubelet takes it: from the first event that
        shows the deletion, and again from a later one that shortens it (a second DELETE with a
        shorter ``gracePeriodSeconds``: kube-apiserver moves the deletionTimestamp earlier and
        the kubelet kills the pod again with the shorter period), whose pending stage is then
        scheduled anew (its delay, KWOK's, runs to the new deletionTimestamp)."""
        grace = meta.get("deletionGracePeriodSeconds")
        if st.deletion_seen is None:
            st.deletion_seen, st.deletion_grace = time.monotonic(), grace
        elif isinstance(grace, int) and isinstance(st.deletion_grace, int) and grace < st.deletion_grace:
            if st.deletion_seen:  # (0.0: seen already deleted, timed by its deletionTimestamp)
                st.deletion_seen = time.monotonic()
            st.deletion_grace = grace
            st.stage = None  # (its timer's generation is passed over)

    @staticmethod
    def _grace_left(st: _Pod, meta: dict[str, Any]) -> float:
        """Seconds left of the grace period of a pod whose deletion this kubelet saw begin,
        counted from then, as the kubelet counts ``deletionGracePeriodSeconds`` from when it
        starts to kill the pod. The built-in stages that wait for a deleted pod (``pod-delete``,
        ``pod-terminate``) wait at least that long; their delay, KWOK's (and a user stage
        file's), runs until the ``deletionTimestamp``, whose whole seconds may end it up to a
        second early."""
        grace = meta.get("deletionGracePeriodSeconds")
        if not isinstance(grace, int) or st.deletion_seen is None:
            return 0.0
        return st.deletion_seen + grace - time.monotonic()

    def _start_ephemeral(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> bool:
        """A running pod's new ephemeral containers (``kubectl debug``), as a kubelet starts
        them: each one's image pulled (``Pulling``, ``Pulled``; the container waiting in
        ``ContainerCreating`` meanwhile), then created and started (``Created``, ``Started``,
        ``state.running``), its status as ``ephemeral`` writes a kubelet's. The pulls under way
        are ``st.ephemeral_pulls``; a timer (``ephemeral``) looks again when one is done. Whether
        a status write was queued (it reports the pod's generation, which the containers stepped)."""
        added = [c for c in pod["spec"].get("ephemeralContainers") or () if isinstance(c, dict)]
        if not added or (pod.get("status") or {}).get("phase") != "Running" \
                or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        if all(c.get("name") in st.ephemeral for c in added):
            return False
        reported = [s for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or ()
                    if isinstance(s, dict)]
        states = {s.get("name"): s.get("state") or {} for s in reported}
        now = time.monotonic()
        pulls = st.ephemeral_pulls if st.ephemeral_pulls is not None else {}
        changed: dict[str, dict[str, Any]] = {}
        for c in added:
            name = str(c.get("name"))
            if name in st.ephemeral:
                continue
            if name not in pulls and ("running" in states.get(name, ()) or "terminated" in states.get(name, ())):
                st.ephemeral |= {name}  # started before this simulator ran
                continue
            path = f"spec.ephemeralContainers{{{name}}}"
            if name not in pulls:
                image = self.image_catalog.lookup(str(c.get("image", "")))
                pull = node.images.pull(image, str(c.get("imagePullPolicy") or "IfNotPresent"), now)
                pulls[name] = (now, image, pull)
                if self.pod_events is not None:
                    self.pod_events.pull_started(pod, node.name, path, str(c.get("image", "")), pull)
                if pull.ready is not None and pull.ready > now + self.config.tick:
                    self.wheel.schedule(pull.ready, ("ephemeral", key, st.uid))
            since, image, pull = pulls[name]
            if pull.ready is not None and pull.ready <= now + self.config.tick:
                del pulls[name]
                st.ephemeral |= {name}
                changed[name] = ephemeral.running(c, now_rfc3339())
                if self.pod_events is not None:
                    self.pod_events.pull_done(pod, node.name, path, str(c.get("image", "")), image, pull, now - since)
                    self.pod_events.container_started(pod, node.name, path)
                continue
            reason = "ErrImageNeverPull" if pull.ready is None else \
                "PodInitializing" if pod["spec"].get("initContainers") else "ContainerCreating"
            if (states.get(name) or {}).get("waiting", {}).get("reason") != reason:
                changed[name] = ephemeral.waiting(c, reason)
        st.ephemeral_pulls = pulls or None
        if not changed:
            return False
        uid = st.uid
        self._write(lambda: self._write_ephemeral(key, uid, changed), POD, retry=True)
        return True

    async def _write_ephemeral(self, key: str, uid: str, changed: dict[str, dict[str, Any]]) -> None:
        """The ephemeral containers' statuses ``changed`` written onto the pod's statuses as the
        informer shows them now (so a write tried again after a failure keeps what others wrote
        since), with its observed generation. A change overtaken meanwhile is left out: a waiting
        one whose container has started since, a running one the pod already reports.

        The informer's version is the write's precondition (its resourceVersion), as a kubelet's
        status manager never writes a status older than one it wrote: two of these writes in flight
        at once (a container's waiting status, then its running one once the pull is done) may be
        answered in either order, and the waiting one answered last would otherwise say for good
        that a running container waits (no event would make it written again). The one a newer
        version overtook is refused (409): a waiting status is left to that version's event, which
        looks again; a running one is made again, from the informer then."""
        pod, st = self.pod_informer.items.get(key), self.pods.get(key)
        if pod is None or st is None or st.uid != uid or (pod.get("metadata") or {}).get("uid") != uid:
            return
        reported = [s for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or ()
                    if isinstance(s, dict)]
        states = {s.get("name"): s.get("state") or {} for s in reported}
        fresh = {name: status for name, status in changed.items()
                 if not ("running" in states.get(name, ()) or "terminated" in states.get(name, ()))
                 and ("running" in (status.get("state") or {}) or name not in st.ephemeral)}
        if not fresh:
            return
        body: dict[str, Any] = {"ephemeralContainerStatuses": ephemeral.ephemeral_statuses(reported, fresh)}
        observed = observe_patch(pod)  # (the containers added made a new generation)
        if observed is not None:
            body.update(observed["status"])
        ns, name = key.split("/", 1)
        precondition = {"uid": uid, "resourceVersion": (pod.get("metadata") or {}).get("resourceVersion")}
        if not await self._patch_quietly(resource_path("", "v1", "pods", ns, name, "status"),
                                         {"metadata": precondition, "status": body}, "strategic") \
                and any("running" in (status.get("state") or {}) for status in fresh.values()) and key in self.pods:
            asyncio.get_running_loop().call_later(RETRY_AFTER, self._write,
                                                  lambda: self._write_ephemeral(key, uid, changed), POD, True)

    def _ephemeral_pulled(self, key: str, uid: str) -> None:
        """An ephemeral container's image pull is done: the pod looked at again."""
        st, pod = self.pods.get(key), self.pod_informer.items.get(key)
        if st is None or st.uid != uid or pod is None or (node := self.nodes.get(st.node)) is None or node.failed:
            return
        self._start_ephemeral(key, st, node, pod)

    def _resize(self, key: str, node_name: str, pod: dict[str, Any]) -> bool:
        """A running pod's in-place resize (``resize``): actuated if the node has room, else
        Pending (Infeasible or Deferred); once actuated, its InProgress condition removed.
        The write decides again from the pod as it is then (its resourceVersion is the patch's
        precondition), and is tried again if it fails for the server's sake.
        Whether a write was queued."""
        patch, settled = self._resize_patch(node_name, key, pod)
        if patch is None:
            return False
        self._write(lambda: self._write_resize(key, node_name), POD, retry=True)
        if settled:
            self._retry_deferred(node_name)
        return True

    def _resize_patch(self, node_name: str, key: str, pod: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
        """The status patch ``pod``'s resize needs now (None if none), and whether it settles a
        resize done (a shrink among them: the node's Deferred ones may fit now)."""
        generation = (pod.get("metadata") or {}).get("generation")
        if not isinstance(generation, int) or generation <= 1:
            return None, False  # never resized (most pods: one look at a number)
        if not wants_resize(pod):
            patch = settled_patch(pod)
            return patch, patch is not None
        allocatable = ((self.node_informer.items.get(node_name) or {}).get("status") or {}).get("allocatable")
        if not allocatable:
            return None, False  # the node's status not seen yet: decided when the pod is seen again
        others = (self.pod_informer.items.get(k) for k in self.pods_by_node.get(node_name, ()) if k != key)
        reason, message = resize_decision(pod, allocatable, (p for p in others
                                                                  if p is not None and not _terminal(p)))
        return resize_patch(pod, reason, message, now_rfc3339()), False

    async def _write_resize(self, key: str, node_name: str) -> None:
        pod = self.pod_informer.items.get(key)
        if pod is None or (pod.get("spec") or {}).get("nodeName") != node_name:
            return
        patch, _ = self._resize_patch(node_name, key, pod)
        if patch is not None:
            ns, name = key.split("/", 1)
            await self._patch_quietly(resource_path("", "v1", "pods", ns, name, "status"), patch)

    def _observe(self, key: str, pod: dict[str, Any]) -> None:
        """A running pod whose spec changed (a new generation) with nothing else to write: its
        status says the kubelet saw it (``observed.observe_patch``), as a kubelet's next sync
        does; the write reads the pod afresh, and is tried again if it fails for the server's
        sake. (Most pods: one look at two numbers.)"""
        if observe_patch(pod) is not None:
            self._write(lambda: self._write_observed(key), POD, retry=True)

    async def _write_observed(self, key: str) -> None:
        pod = self.pod_informer.items.get(key)
        patch = None if pod is None else observe_patch(pod)
        if patch is not None:
            ns, name = key.split("/", 1)
            await self._patch_quietly(resource_path("", "v1", "pods", ns, name, "status"), patch, "strategic")

    def _retry_deferred(self, node_name: str) -> None:
        """A pod left ``node_name``, or a resize on it is done: its Deferred resizes are decided
        again, as a kubelet retries them when resources may have been freed."""
        for key in list(self.pods_by_node.get(node_name, ())):
            pod = self.pod_informer.items.get(key)
            if pod is not None and any(c.get("reason") == "Deferred" for c in (pod.get("status") or {}).get(
                    "conditions") or () if isinstance(c, dict) and c.get("type") == "PodResizePending"):
                self._resize(key, node_name, pod)

    async def _patch_quietly(self, path: str, body: dict[str, Any], patch_type: str = "merge") -> bool:
        """Whether the patch was made: False if the object is gone (404) or changed under the
        patch's precondition (409: its next event decides again)."""
        try:
            await self.client.patch(path, body, patch_type=patch_type)
        except ApiError as e:
            if e.code not in (404, 409):
                raise
            return False
        return True

    def _images_ready(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> bool:
        """Before a new pod's first stage its images must be on the node: start the pulls
        (once), write ``ContainerCreating`` while they run, come back when they are done."""
        if st.started or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return True
        now = time.monotonic()
        if st.pulled_at is None:
            ready = now
            pulls = []
            for path, c in container_paths(pod):
                image = self.image_catalog.lookup(str(c.get("image", "")))
                pull = node.images.pull(image, str(c.get("imagePullPolicy") or "IfNotPresent"), now)
                ready = max(ready, float("inf") if pull.ready is None else pull.ready)  # Never: stays waiting
                if self.pod_events is not None:
                    self.pod_events.pull_started(pod, node.name, path, str(c.get("image", "")), pull)
                    pulls.append((path, str(c.get("image", "")), image, pull))
            st.pulled_at = ready
            if pulls:
                self._pulls[key] = (now, pulls)
        if st.pulled_at <= now + self.config.tick:
            self._pulled(key, node.name, pod, now)
            return True
        if st.stage == IMAGE_PULL:
            return False  # its timer is set
        if not st.wrote_creating and self.builtin_stages:
            st.wrote_creating = True
            self._write(lambda: self._write_creating(key, st.uid, st.pulled_at == float("inf")), POD)
        if st.pulled_at != float("inf"):
            st.gen += 1
            st.stage = IMAGE_PULL
            self.wheel.schedule(st.pulled_at, ("pod", key, st.gen))
        return False

    async def _refs_listed(self) -> None:
        """Once the Secrets and ConfigMaps are listed, the pods seen before look at them."""
        assert self.secret_informer is not None and self.configmap_informer is not None
        await self.secret_informer.synced.wait()
        await self.configmap_informer.synced.wait()
        self._refs_synced = True
        parked, self._parked = self._parked, set()
        for key in parked:
            if (pod := self.pod_informer.items.get(key)) is not None:
                self._pod_seen(pod)

    def _ref_written(self, kind: str, obj: dict[str, Any]) -> None:
        """A Secret or ConfigMap created or changed: the pods waiting for it looked at again."""
        meta = obj.get("metadata") or {}
        keys = self._awaiting.get((kind, f"{meta.get('namespace')}/{meta.get('name')}"))
        for key in list(keys or ()):
            pod = self.pod_informer.items.get(key)
            if pod is not None:
                self._pod_seen(pod)

    def _says(self, key: str) -> tuple[str, ...] | None:
        """What the waiting pod ``key`` said last (None: it does not wait)."""
        blocked = self._blocked.get(key)
        return None if blocked is None else blocked[0]

    def _block(self, key: str, said: tuple[str, ...], waits: set[Ref]) -> None:
        """``key`` waits for ``waits``, saying ``said``."""
        self._unblock(key)
        self._blocked[key] = (said, frozenset(waits))
        for ref in waits:
            self._awaiting.setdefault(ref, set()).add(key)

    def _unblock(self, key: str) -> None:
        blocked = self._blocked.pop(key, None)
        if blocked is None:
            return
        for ref in blocked[1]:
            keys = self._awaiting.get(ref)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._awaiting[ref]

    def _volumes_wait(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> bool:
        """Whether a Secret or ConfigMap volume of the new pod cannot be set up yet: it stays
        ``ContainerCreating``, with a ``FailedMount`` for each such volume (``refs``)."""
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        if not self._refs_synced:
            self._parked.add(key)
            return True
        assert self.secret_informer is not None and self.configmap_informer is not None
        failed = volume_errors(pod, self.secret_informer.items, self.configmap_informer.items)
        if not failed:
            self._unblock(key)
            return False
        said = tuple(m for m, _ in failed)
        if self._says(key) == said:
            return True
        self._block(key, said, set().union(*(w for _, w in failed)))
        if self.pod_events is not None:
            for message in said:
                self.pod_events.failed_mount(pod, node.name, message)
        if not st.wrote_creating:
            st.wrote_creating = True
            self._write(lambda: self._write_creating(key, st.uid, False), POD)
        return True

    def _env_waits(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> bool:
        """Whether a container of the new pod, its images pulled, cannot have its environment
        made yet: the first init container that cannot, else every regular one that cannot,
        waits in ``CreateContainerConfigError`` (``refs``), its ``Failed`` event recorded."""
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        spec = pod.get("spec") or {}
        if not any(has_env_refs(c) for c in spec.get("containers") or () if isinstance(c, dict)) and not any(
                has_env_refs(c) for c in spec.get("initContainers") or () if isinstance(c, dict)):
            return False
        if not self._refs_synced:
            self._parked.add(key)
            return True
        assert self.secret_informer is not None and self.configmap_informer is not None
        ns = str((pod.get("metadata") or {}).get("namespace") or "")
        failing: dict[str, str] = {}
        waits: set[Ref] = set()
        for path, c in container_paths(pod):
            if failing and path.startswith("spec.containers") and next(iter(failing)).startswith("spec.init"):
                break  # an init container that cannot start: the regular ones are not tried
            error = env_error(c, ns, self.secret_informer.items, self.configmap_informer.items) \
                if has_env_refs(c) else None
            if error is not None:
                failing[path] = error[0]
                waits.add(error[1])
                if path.startswith("spec.init"):
                    break
        if not failing:
            self._unblock(key)
            return False
        said = tuple(f"{p}: {m}" for p, m in failing.items())
        if self._says(key) == said:
            return True
        self._block(key, said, waits)
        st.gen += 1  # (a stage drawn before is no longer due)
        st.stage = None
        if self.pod_events is not None:
            for path, message in failing.items():
                self.pod_events.config_error(pod, node.name, path, message)
        self._write(lambda: self._write_creating(key, st.uid, False, failing, said), POD, retry=True)
        return True

    def _pulled(self, key: str, node: str, pod: dict[str, Any], now: float) -> None:
        """A new pod's images are on the node: its containers' Pulled events."""
        looked_up = self._pulls.pop(key, None)
        if looked_up is None or self.pod_events is None:
            return
        since, pulls = looked_up
        for path, requested, image, pull in pulls:
            self.pod_events.pull_done(pod, node, path, requested, image, pull, now - since)

    async def _write_creating(self, key: str, uid: str, never: bool, failing: dict[str, str] | None = None,
                              said: tuple[str, ...] = ()) -> None:
        """The new pod's status while it waits: its containers ``ContainerCreating`` (or
        ``ErrImageNeverPull``); ``failing``: those at these paths in ``CreateContainerConfigError``
        with the message (written only while the pod still says ``said``)."""
        pod = self.pod_informer.items.get(key)
        if pod is None or pod["metadata"].get("uid") != uid:
            return
        if failing is not None and self._says(key) != said:
            return  # overtaken: it says something else now, or starts
        now = now_rfc3339()
        reason = "ErrImageNeverPull" if never else "ContainerCreating"
        failing = failing or {}
        init_failing = any(p.startswith("spec.initContainers") for p in failing)

        def waiting(field: str, c: dict[str, Any], otherwise: str) -> dict[str, Any]:
            message = failing.get(f"spec.{field}{{{c.get('name', '')}}}")
            state = {"reason": "CreateContainerConfigError", "message": message} if message is not None \
                else {"reason": otherwise}
            return {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False,
                    "started": False, "restartCount": 0, "state": {"waiting": state}}

        def running(c: dict[str, Any]) -> dict[str, Any]:
            # a regular container beside one that cannot be created: the kubelet starts it (as
            # pod-ready's statuses say it, its probes passing at once)
            if f"spec.containers{{{c.get('name', '')}}}" in failing:
                return waiting("containers", c, reason)
            return {"name": c.get("name"), "image": c.get("image"), "imageID": f"{c.get('image')}@sha256:simulated",
                    "containerID": f"containerd://{c.get('name')}", "ready": True, "started": True,
                    "restartCount": 0, "state": {"running": {"startedAt": now}}}

        statuses = [waiting("containers", c, "PodInitializing" if init_failing else reason) if not failing
                    or init_failing else running(c) for c in pod["spec"].get("containers") or []]
        node = self.nodes.get(pod["spec"].get("nodeName", ""))
        generation = generation_of(pod)
        inits = [c for c in pod["spec"].get("initContainers") or [] if isinstance(c, dict)]
        initialized: dict[str, Any] = {"type": "Initialized", "status": "True", "lastTransitionTime": now}
        if init_failing:
            names = " ".join(str(c.get("name", "")) for c in inits)
            initialized = {"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized",
                           "message": f"containers with incomplete status: [{names}]", "lastTransitionTime": now}
        status: dict[str, Any] = {
            "phase": "Pending", "startTime": now, "containerStatuses": statuses,
            "conditions": [stamped(c, generation) for c in (
                {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": now},
                initialized,
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
                 "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            )],
        }
        if init_failing:
            status["initContainerStatuses"] = [waiting("initContainers", c, "PodInitializing") for c in inits]
        if generation is not None:
            status["observedGeneration"] = generation
        if node is not None:
            status["hostIP"] = node.ip
            status["hostIPs"] = [{"ip": node.ip}]
        ns, name = key.split("/", 1)
        await self._kubelet(pod["spec"].get("nodeName") or "").patch(
            resource_path("", "v1", "pods", ns, name, "status"), {"status": status}, patch_type="merge")

    async def _run_stage(self, key: str, gen: int) -> None:
        st = self.pods.get(key)
        pod = self.pod_informer.items.get(key)
        if st is None or pod is None or st.gen != gen or pod["metadata"].get("uid") != st.uid:
            return
        node = self.nodes.get(st.node)
        if node is None or node.failed:
            return
        if st.stage == IMAGE_PULL:  # the pull is done: on to the stages
            st.stage = None
            self._pod_seen(pod)
            return
        if st.stage == PROBE:
            await self._probe_step(key, st, node, pod)
            return
        if st.stage in FAILURE_STEPS:
            target = target_of(pod) if st.stage != CONTAINER_EXIT or st.exit_target else None
            if target is not None:
                await self._one_step(key, st, node, pod, target)
            elif st.stage in (CONTAINER_EXIT, BACK_OFF):
                await self._container_exit(key, st, node, pod)
            else:  # its annotation gone meanwhile
                st.stage = None
                self._pod_seen(pod)
            return
        stage = self.pod_stages.pending(st.stage, pod) if st.stage is not None else None
        if stage is None:  # no longer matches: draw again
            st.stage = None
            self._pod_seen(pod)
            return
        st.stage = None
        ns, name = key.split("/", 1)
        path = resource_path("", "v1", "pods", ns, name)
        step = self._resume_at("pod", key, gen)
        try:  # the steps in KWOK's order (STEP_EVENT)
            if step == STEP_EVENT:
                self._stage_event(stage, pod)
                step = STEP_FINALIZERS
            if step == STEP_FINALIZERS:
                await self._stage_finalizers(stage, pod, path)
                step = STEP_STATUS
            if step == STEP_STATUS:
                rendered = stage.next.render_status(pod, self._template_funcs(node, pod))
                if rendered is not None and self.builtin_stages and stage.name == "pod-ready" \
                        and not may_fail(pod, self.job_failures):
                    rendered = starting(pod, rendered)  # its containers as their probes leave them at the start
                if rendered is not None:
                    await self._kubelet(node.name).patch(path + "/status", {"status": rendered},
                                                         patch_type=self.status_patch)
                    if not st.started and rendered.get("phase") == "Running":
                        st.started = True
                        POD_START_SECONDS.observe(time.monotonic() - st.seen)
                        if self.pod_events is not None:
                            self.pod_events.started(pod, node.name)
                step = STEP_DELETE
            await self._stage_delete(stage, pod, path)
        except StageError as e:
            _stage_failed("pod", key, stage, e)
            return
        except (ApiError, httpx.TransportError, OSError) as e:
            STAGE_TRANSITIONS.labels(stage=stage.name, result="error").inc()
            if isinstance(e, ApiError) and e.code == 404:
                return
            if not _server_side(e):
                assert isinstance(e, ApiError)
                _refused("pod", key, stage.name, e)
                return
            # (a 500, or a server too busy to answer in time) the informer may deliver the pod
            # again, or not: the stage is tried again after KWOK's back-off either way, from the
            # step that failed (the event is not sent twice)
            st.gen += 1
            self._stage_resume[("pod", key)] = (st.gen, step)
            self.wheel.schedule(time.monotonic() + stage_retry_delay(st.retries, self.rng), ("pod", key, st.gen))
            st.retries += 1
            st.stage = stage.name
            raise
        st.retries = 0
        STAGE_TRANSITIONS.labels(stage=stage.name, result="ok").inc()

    def _failing(self, key: str, st: _Pod, pod: dict[str, Any]) -> bool:
        """Whether the failure model (``podfailure``) takes the running pod's next step: its
        containers' planned exit, or the end of their back-off, set to fire (or already pending)."""
        target = target_of(pod)
        if target is not None:
            return self._one_failing(key, st, pod, target)
        if (pod.get("metadata") or {}).get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
            return False
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        if waiting_in_backoff(pod):
            if st.stage != BACK_OFF:
                st.gen += 1
                st.stage = BACK_OFF
                self.wheel.schedule(time.monotonic() + (st.backoff or self.config.crash_backoff), ("pod", key, st.gen))
            return True
        if not all_running(pod):
            return False
        run = run_of(pod)
        if st.stage == CONTAINER_EXIT and st.exit_run == run:
            return True  # its run goes on towards its planned exit
        ending = planned_exit(pod, run, self.job_failures, self.config.job_seconds, self.config.seed)
        if ending is None:
            if run == 0 or policy == "Always":
                return False  # as without the model: the built-in stages complete it, or it runs on
            # a restarted batch pod's successful run: its exit says its restarts, which pod-complete's would not
            ending = Exit(0, "Completed", self.config.job_seconds)
        st.gen += 1
        st.stage, st.exit, st.exit_run, st.exit_target = CONTAINER_EXIT, ending, run, False
        self.wheel.schedule(time.monotonic() + ending.after, ("pod", key, st.gen))
        return True

    def _probing(self, key: str, st: _Pod, pod: dict[str, Any]) -> bool:
        """Whether a container of the running pod waits on its startup or readiness probe
        (``probes``): the kubelet's next write about it set to fire when its time comes."""
        if may_fail(pod, self.job_failures):
            return False  # the failure model's containers are ready at once
        after = next_change(pod, datetime.now(UTC))
        return after is not None and self._pending(key, st, PROBE, after)

    async def _probe_step(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> None:
        """The containers whose probes have passed by now started and ready, as the kubelet writes
        them; the pod's next event brings the rest back to ``_probing``."""
        st.stage = None
        status = probed(pod, datetime.now(UTC))
        if status is None:
            self._pod_seen(pod)
            return
        await self._write_failure_status(key, node, pod, status)  # (a merge patch at the pod's uid)

    def _pending(self, key: str, st: _Pod, step: str, after: float) -> bool:
        """``step`` of the failure model set to fire ``after`` seconds on (unless already pending)."""
        if st.stage != step:
            st.gen += 1
            st.stage = step
            if after <= 0:
                gen = st.gen
                self._write(lambda: self._run_stage(key, gen), POD)
            else:
                self.wheel.schedule(time.monotonic() + after, ("pod", key, st.gen))
        return True

    def _one_failing(self, key: str, st: _Pod, pod: dict[str, Any], target: Target) -> bool:
        """``_failing`` when ``fail-container`` names the one container that fails: an init
        container (the pod waits in ``Pending``), a sidecar or a regular container (the others run
        on). Whether the model takes the pod's next step."""
        status = pod.get("status") or {}
        phase = status.get("phase")
        if (pod.get("metadata") or {}).get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
            return False
        if target.init and not status.get("podIP"):
            return self._pending(key, st, INIT_START, 0)  # instead of pod-ready: the init container runs
        if phase != ("Pending" if target.init else "Running"):
            return False
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        current = target_status(pod, target)
        state = state_of(current)
        if state == "waiting" and (current["state"]["waiting"] or {}).get("reason") == "CrashLoopBackOff":
            return self._pending(key, st, BACK_OFF, st.backoff or self.config.crash_backoff)
        if state == "terminated":
            if restarts(target, policy, int(current["state"]["terminated"].get("exitCode") or 0)):
                # the kubelet's next sync restarts it: upstream's relist a second on (a tenth of the
                # back-off's start), the exit reported meanwhile (kubectl's Error, Init:Error)
                return self._pending(key, st, RESTART, min(1.0, self.config.crash_backoff / 10))
            # the others complete as the built-in pod-complete stage completes a pod (none is
            # restarted: a regular container exited, the pod's policy Never or OnFailure)
            return target.init or self._pending(key, st, COMPLETE, self.config.job_seconds)
        if state != "running":
            return False
        run = int(current.get("restartCount") or 0)
        if st.stage == CONTAINER_EXIT and st.exit_run == run and st.exit_target:
            return True  # its run goes on towards its planned exit
        if st.stage == COMPLETE:
            return True
        ending = planned_exit(pod, run, self.job_failures, self.config.job_seconds, self.config.seed)
        if ending is None:
            if target.init:  # an init container's run that does not fail completes
                ending = Exit(0, "Completed", self.config.job_seconds)
            elif policy == "Always":
                return False  # it runs on, as without the model
            else:
                return self._pending(key, st, COMPLETE, self.config.job_seconds)
        st.gen += 1
        st.stage, st.exit, st.exit_run, st.exit_target = CONTAINER_EXIT, ending, run, True
        self.wheel.schedule(time.monotonic() + ending.after, ("pod", key, st.gen))
        return True

    async def _one_step(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any], target: Target) -> None:
        """A pending step of one container's failure whose time has come: the status the kubelet writes then."""
        pending, st.stage = st.stage, None
        now, at = now_rfc3339(), time.monotonic()
        current = target_status(pod, target)
        state = state_of(current)
        path = f"spec.{'initContainers' if target.init or target.sidecar else 'containers'}{{{target.name}}}"
        events: list[Callable[[KubeletEvents], None]] = []  # recorded once the status is written
        starts: list[str] = []  # the containers started then (their paths)
        if pending == INIT_START:
            if (pod.get("status") or {}).get("podIP"):
                self._pod_seen(pod)
                return
            status = initializing(pod, NATIVE["pod-ready"](pod, self._template_funcs(node, pod)), target, now)
            for container_path, _ in container_paths(pod):  # the init containers up to it started
                if container_path.startswith("spec.initContainers"):
                    starts.append(container_path)
                if container_path == path:
                    break
        elif pending == BACK_OFF:
            if ((current.get("state") or {}).get("waiting") or {}).get("reason") != "CrashLoopBackOff":
                self._pod_seen(pod)
                return
            # the kubelet's flowcontrol.Backoff.Next as it starts the container again: doubled, capped
            st.backoff, st.backoff_at = min(2 * st.backoff, self.config.crash_backoff_max), at
            status = one_restarted(pod, target, now)
            events.append(lambda e: e.restarted(pod, node.name, path))
        elif pending == RESTART:
            if state != "terminated":
                self._pod_seen(pod)
                return
            if st.backoff and at - st.backoff_at <= 2 * self.config.crash_backoff_max:
                status = one_backing_off(pod, target, st.backoff, now)
                events.append(lambda e: e.backing_off(pod, node.name, path))
            else:  # no back-off yet, or its entry expired (a run of 10 min): restarted at once, back-off reset
                st.backoff, st.backoff_at = self.config.crash_backoff, at
                status = one_restarted(pod, target, now)
                events.append(lambda e: e.restarted(pod, node.name, path))
        elif pending == COMPLETE:
            if (pod.get("status") or {}).get("phase") != "Running":
                self._pod_seen(pod)
                return
            status = completed(pod, NATIVE["pod-complete"](pod, {"Now": lambda: now}))
        else:
            ending = st.exit
            if ending is None or state != "running" or int(current.get("restartCount") or 0) != st.exit_run:
                self._pod_seen(pod)  # (a run seen late)
                return
            status = one_exited(pod, target, ending, now)
            if status.get("phase") == "Running" and target.init:  # initialized: the others start
                after = False
                for container_path, _ in container_paths(pod):
                    if after:
                        starts.append(container_path)
                    after = after or container_path == path
        if not await self._write_failure_status(key, node, pod, status):
            return
        if status.get("phase") == "Running" and not st.started:
            st.started = True
            POD_START_SECONDS.observe(time.monotonic() - st.seen)
        if self.pod_events is not None:
            for record in events:
                record(self.pod_events)
            for started in starts:
                self.pod_events.container_started(pod, node.name, started)

    async def _container_exit(self, key: str, st: _Pod, node: _Node, pod: dict[str, Any]) -> None:
        """A pending CONTAINER_EXIT or BACK_OFF whose time has come: the status the kubelet writes then."""
        pending, st.stage = st.stage, None
        now, at = now_rfc3339(), time.monotonic()
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        if pending == BACK_OFF:
            if not waiting_in_backoff(pod):
                self._pod_seen(pod)
                return
            # the kubelet's flowcontrol.Backoff.Next as it starts the container again: doubled, capped
            st.backoff, st.backoff_at = min(2 * st.backoff, self.config.crash_backoff_max), at
            status = restarted(pod, now)
        else:
            ending = st.exit
            if ending is None or not all_running(pod) or run_of(pod) != st.exit_run:  # (a run seen late)
                self._pod_seen(pod)
                return
            if policy == "Never" or (policy == "OnFailure" and ending.code == 0):
                status = exited(pod, ending, now)
            elif st.backoff and at - st.backoff_at <= 2 * self.config.crash_backoff_max:
                status = crashed(pod, ending, now, st.backoff)  # in back-off since this exit
                if self.pod_events is not None:
                    self.pod_events.backing_off(pod, node.name)
            else:  # no back-off yet, or its entry expired (a run of 10 min): restarted at once, back-off reset
                st.backoff, st.backoff_at = self.config.crash_backoff, at
                status = crashed(pod, ending, now, None)
        if not await self._write_failure_status(key, node, pod, status):
            return
        again = pending == BACK_OFF or ("phase" not in status and "conditions" not in status)
        if self.pod_events is not None and again:
            self.pod_events.restarted(pod, node.name)

    def _stage_event(self, stage: Stage, obj: dict[str, Any]) -> None:
        """A stage's ``next.event``: recorded as KWOK's recorder does, in the background and best effort."""
        event = stage.next.event
        if event is None:
            return
        if self._recorder is None:
            from ..controllers.events import Recorder

            self._recorder = Recorder(self.client, "kwok_controller")
        self._recorder.record(stage.kind, obj, event.get("reason", ""), event.get("message", ""),
                              event.get("type") or "Normal")

    async def _stage_finalizers(self, stage: Stage, obj: dict[str, Any], path: str) -> dict[str, Any] | None:
        """A stage's ``next.finalizers``: a patch of its own of the object (not its status), as KWOK's
        controller sends it; the answer, or None if they are as the stage wants them already."""
        current = list((obj.get("metadata") or {}).get("finalizers") or [])
        finalizers = stage.next.finalizers(current)
        if finalizers is None or finalizers == current:
            return None
        answer: dict[str, Any] = await self.client.patch(path, {"metadata": {"finalizers": finalizers or None}},
                                                         patch_type="merge")
        return answer

    async def _stage_delete(self, stage: Stage, obj: dict[str, Any], path: str) -> None:
        """A stage's ``next.delete``: as the kubelet does once the containers are gone, no further
        grace (a Node's stage: KWOK's controller's delete)."""
        if not stage.next.delete:
            return
        try:
            deleter = self._kubelet((obj.get("spec") or {}).get("nodeName") or "") if stage.kind == "Pod" \
                else self.client
            await deleter.delete(path, {"gracePeriodSeconds": 0,
                                        "preconditions": {"uid": (obj.get("metadata") or {}).get("uid")}},
                                 gracePeriodSeconds="0")
        except ApiError as e:
            if e.code != 404:
                raise

    def _resume_at(self, kind: str, key: str, gen: int) -> int:
        """The step a stage run as generation ``gen`` starts at: the one that failed, for the retry
        of a stage whose write failed for the server's sake; else the first (the event)."""
        resume = self._stage_resume.pop((kind, key), None)
        return resume[1] if resume is not None and resume[0] == gen else STEP_EVENT

    def _pod_gone(self, pod: dict[str, Any]) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        keys = self.pods_by_node.get(spec.get("nodeName") or "")
        if keys is not None:
            keys.discard(key)
        st = self.pods.get(key)
        if st is not None and st.uid == meta.get("uid"):
            del self.pods[key]
            self._stage_resume.pop(("pod", key), None)
            self._pulls.pop(key, None)
            self._unblock(key)
            self._parked.discard(key)
            node = self.nodes.get(st.node)
            if self.pod_events is not None and st.started and not (st.stopping or st.finished or _terminal(pod)) \
                    and node is not None and not node.failed:
                # deleted at once (a force delete): the kubelet still stops its containers
                self.pod_events.stopping(pod, node.name)
            self._release(st)
        if keys:
            self._retry_deferred(spec.get("nodeName") or "")

    def _release(self, st: _Pod) -> None:
        st.gen += 1
        if st.ip and not st.finished:  # (a finished pod's is back in the pool already)
            node = self.nodes.get(st.node)
            if node is not None:
                node.pod_ips.release(st.ip)
            st.ip = None

    # ------------------------------------------------------------------ helpers

    async def _write_failure_status(self, key: str, node: _Node, pod: dict[str, Any], status: dict[str, Any]) -> bool:
        """A failure model's status of ``pod`` (its uid as a precondition), as its kubelet writes
        it; False if the pod is gone or changed meanwhile (its next event decides again)."""
        ns, name = key.split("/", 1)
        try:
            await self._kubelet(node.name).patch(resource_path("", "v1", "pods", ns, name, "status"),
                                                 {"metadata": {"uid": (pod.get("metadata") or {}).get("uid")},
                                                  "status": status}, patch_type="merge")
        except ApiError as e:
            if e.code not in (404, 409):
                raise
            return False
        return True

    def _kubelet(self, node: str) -> Client:
        """The client as ``node``'s kubelet (``system:node:<node>``, identities.py), for what a
        kubelet sends about its own node: its Node, Lease and CSINode, its pods' status and their
        final delete; the rest (the bulk renewals and reports, the stages' finalizers and events,
        failures) goes as KWOK's controller. A view per request (a MAC and a shallow copy, a few
        microseconds), not one held per node."""
        return self.client.as_identity(node_user(node)) if node and self.kubelet_identities else self.client

    async def _ensure_namespace(self, name: str) -> None:
        try:
            await self.client.create(resource_path("", "v1", "namespaces"),
                                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiError as e:
            if e.code != 409:
                raise
