"""The node lifecycle controller of kube-controller-manager: a node's health from its Lease
and its status, and the taints that say a node is unhealthy, on every node, whoever wrote its
status. As upstream's ``nodelifecycle`` controller, with kube-controller-manager's flags
(``config.NodeLifecycle``, ``serve --node-monitor-grace-period`` and the rest).

**Health** (upstream's ``monitorNodeHealth``, every ``--node-monitor-period``). A node is
heard from when its Lease ``kube-node-lease/<node>`` is renewed (its ``spec.renewTime``
changes) or its Ready condition's ``lastHeartbeatTime`` moves; a node is first heard from when
this controller first sees it, or, if it never posted a Ready condition and has no Lease, at its
creation. A node not heard from for ``--node-monitor-grace-period`` (50 s;
``--node-startup-grace-period``, 60 s, without a Ready condition) has its Ready,
MemoryPressure, DiskPressure and PIDPressure conditions set Unknown: ``NodeStatusUnknown``,
"Kubelet stopped posting node status." (a missing one ``NodeStatusNeverUpdated``, "Kubelet
never posted node status.", its ``lastHeartbeatTime`` the node's creation), each other
``lastHeartbeatTime`` kept, NetworkUnavailable left alone. That write turning Ready from True
records the event ``NodeNotReady`` ("Node n status is now: NodeNotReady").

**Registration.** A node this controller sees for the first time (each one it finds when it
starts, too) gets the Normal event ``RegisteredNode`` ("Node n event: Registered Node n in
Controller"); a deleted one ``RemovingNode`` ("Node n event: Removing Node n from Controller"),
as upstream's pass records them (``RecordNodeEvent``). This controller's events name the node as
upstream's reference does: ``apiVersion: v1``, its name and uid, no resourceVersion (the
kubelet's name it by its name for a uid: ``kubectl describe node`` searches both).

**Taints**, from ``status.conditions`` and ``spec.unschedulable``:

- TaintNodesByCondition's ``NoSchedule`` taints, at once: ``not-ready`` (Ready False),
  ``unreachable`` (Ready Unknown), ``memory-pressure``, ``disk-pressure``, ``pid-pressure``,
  ``network-unavailable`` (their condition True), ``unschedulable`` (a cordon);
- Ready ``False``: ``node.kubernetes.io/not-ready:NoExecute``; Ready ``Unknown``:
  ``node.kubernetes.io/unreachable:NoExecute``; Ready ``True``: neither. Swapping one for the
  other and taking them off are done at once; a node that has neither gets its first through
  its zone's queue, at the zone's rate (below). A node without a Ready condition keeps whatever
  NoExecute taints it has (upstream's health pass skips it).

A taint added gets ``timeAdded``; the other taints of the node are kept as they are, and one of
these keys that is still wanted is left alone. The write is a merge patch of ``spec.taints`` at
the resourceVersion the informer holds (409: again, shortly).

**Zones** (``handleDisruption``). Nodes are grouped by ``topology.kubernetes.io/region`` and
``zone`` (one zone for nodes without them; ``node.kubernetes.io/exclude-disruption`` nodes are
not counted). On each pass a zone with no Ready node is in full disruption; one with more than 2
nodes not Ready, at least ``--unhealthy-zone-threshold`` (0.55) of it, in partial disruption;
else normal. The rate at which a zone's nodes get their first NoExecute taint is
``--node-eviction-rate`` (0.1 nodes a second, a burst of 1) when it is normal or fully
disrupted, ``--secondary-node-eviction-rate`` (0.01) when partially disrupted, 0 then if the
zone has at most ``--large-cluster-size-threshold`` (50) nodes. When every zone is fully
disrupted (the control plane, not the nodes, is the likelier fault) no taint is added and the
NoExecute ones are taken off every node; when a zone recovers, every node is given a fresh
grace period.

The pods leave through the taint eviction controller (``tainteviction.py``): the
DefaultTolerationSeconds admission gives every pod 300 s of both NoExecute taints.

When the health pass turns a node's Ready from True, its pods' Ready condition goes False
(upstream's ``MarkPodsNotReady``: each pod's ``status.conditions`` Ready ``False``, its
``lastTransitionTime`` now, reason and message kept, and the Warning event ``NodeNotReady``
"Node is not ready" on the pod); the pods are listed by ``spec.nodeName`` (the watch cache's
index), on a queue and workers of their own, and a node whose pods could not all be written is
tried again while it is not Ready. The kubelet puts Ready back when it returns. A pod bound
later to a node whose Ready condition is not True (upstream's ``processPod``: a pod added, or
given its ``spec.nodeName``) is marked in the same way; a pod bound to a Ready node costs its
event a dictionary lookup.

Costs: a Lease event is the client's parse and a comparison (the Lease is held as its name,
version and renewTime: about 0.6 KB). A Node event looks at its conditions (five) and taints
(usually none). A pass walks the nodes' due times, a float each (a node found Unknown is due
again only once heard from).
"""

from __future__ import annotations

import asyncio
import calendar
import datetime
import logging
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, Informer, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.config import NodeLifecycle
from controlplane.metrics import NODES_HEALTH_PASS, UNHEALTHY_NODES, ZONE_EVICTIONS, ZONE_HEALTH, ZONE_SIZE

from .events import Recorder
from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["CONDITION_TAINTS", "NodeLifecycleController", "TokenBucket", "lifecycle_taints", "start", "tainted",
           "unknown_conditions", "zone_key", "zone_state"]

log = logging.getLogger(__name__)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"

# TaintNodesByCondition: a condition's (type, status) -> the key of its NoSchedule taint
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
# the taints this controller owns: the NoSchedule ones always, the NoExecute ones where Ready is known
_NO_SCHEDULE_OWNED = frozenset({*((k, NO_SCHEDULE) for k in CONDITION_TAINTS.values()), (UNSCHEDULABLE, NO_SCHEDULE)})
_NO_EXECUTE_OWNED = frozenset({(NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE)})
_NO_EXECUTE_BY_READY = {"False": (NOT_READY, NO_EXECUTE), "Unknown": (UNREACHABLE, NO_EXECUTE)}
_NONE: frozenset[tuple[str, str]] = frozenset()
REASON_NOT_READY = "NodeNotReady"
# upstream's events when the controller first sees a node (on its first pass after a restart too:
# it knows no node then) and when one is deleted
REASON_REGISTERED, REASON_REMOVING = "RegisteredNode", "RemovingNode"
_POD_KEY = "pod:"  # the pod queue's keys of single pods (the others are node names)


def lifecycle_taints(node: Mapping[str, Any]) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]],
                                                       frozenset[tuple[str, str]]]:
    """``(wanted, held, owned)``: the (key, effect) of the lifecycle taints the node should
    have, of those it has, and of the taints this controller decides on it (the NoExecute
    ones only where the node has a Ready condition)."""
    status = node.get("status")
    wanted: list[tuple[str, str]] = []
    ready = None
    for c in (status.get("conditions") if status else None) or ():
        ctype, cstatus = c.get("type"), c.get("status")
        key = CONDITION_TAINTS.get((ctype, cstatus))
        if key is not None:
            wanted.append((key, NO_SCHEDULE))
        if ctype == "Ready":
            ready = cstatus
    spec = node.get("spec")
    if spec and spec.get("unschedulable"):
        wanted.append((UNSCHEDULABLE, NO_SCHEDULE))
    owned = _NO_SCHEDULE_OWNED
    if ready is not None:
        owned = _NO_SCHEDULE_OWNED | _NO_EXECUTE_OWNED
        no_execute = _NO_EXECUTE_BY_READY.get(ready)
        if no_execute is not None:
            wanted.append(no_execute)
    taints = spec.get("taints") if spec else None
    held = frozenset(p for t in taints if (p := (t.get("key"), t.get("effect"))) in owned) if taints else _NONE
    return (frozenset(wanted) if wanted else _NONE), held, owned


def tainted(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The node's taints with its lifecycle ones as its conditions want them, or None when
    they are right."""
    return _rewritten(node, *lifecycle_taints(node))


def _rewritten(node: Mapping[str, Any], wanted: frozenset[tuple[str, str]], held: frozenset[tuple[str, str]],
               owned: frozenset[tuple[str, str]]) -> list[dict[str, Any]] | None:
    """The node's taints with ``wanted`` of the ``owned`` lifecycle ones, or None when that is
    what it has: the others kept, the lifecycle ones wanted and held kept, the missing ones
    added (``timeAdded`` now), the ones no longer wanted dropped."""
    if wanted == held:
        return None
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for t in (node.get("spec") or {}).get("taints") or ():
        pair = (t.get("key"), t.get("effect"))
        if pair not in owned or pair in wanted:
            out.append(t)
    # in a fixed order: the NoSchedule ones, then the NoExecute one
    for key, effect in sorted(wanted - held, key=lambda p: (p[1] != NO_SCHEDULE, p[0])):
        out.append({"key": key, "effect": effect, "timeAdded": now})
    return out


LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")
# the conditions a node's silence turns Unknown (NetworkUnavailable is the network's, not the kubelet's)
HEALTH_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
TAINTER_PERIOD = 0.1  # how often the zones' queues are tried (upstream's nodeEvictionPeriod)
INITIAL, NORMAL, PARTIAL_DISRUPTION, FULL_DISRUPTION = "Initial", "Normal", "PartialDisruption", "FullDisruption"
_NO_READY: Any = object()  # the heartbeat of a node without a Ready condition
_UNSEEN: Any = object()


def zone_key(node: Mapping[str, Any]) -> str:
    """The node's zone, as upstream's ``GetZoneKey``: region and zone (the GA labels, else the
    beta ones), "" for a node with neither."""
    labels = meta_of(node).get("labels") or {}
    zone = labels.get("topology.kubernetes.io/zone", labels.get("failure-domain.beta.kubernetes.io/zone", ""))
    region = labels.get("topology.kubernetes.io/region", labels.get("failure-domain.beta.kubernetes.io/region", ""))
    return f"{region}:\x00:{zone}" if region or zone else ""


def zone_state(ready: int, not_ready: int, threshold: float) -> str:
    """A zone's state from its nodes (upstream's ``ComputeZoneState``)."""
    if ready == 0 and not_ready > 0:
        return FULL_DISRUPTION
    if not_ready > 2 and not_ready / (not_ready + ready) >= threshold:
        return PARTIAL_DISRUPTION
    return NORMAL


def _ready(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = node.get("status")
    for c in (status.get("conditions") if status else None) or ():
        if c.get("type") == "Ready":
            return c  # type: ignore[no-any-return]
    return None


def unknown_conditions(node: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The conditions the health pass writes on a node not heard from for its grace period (a
    strategic merge patch, by ``type``: each ``lastHeartbeatTime`` stays), or None when its
    Ready condition is Unknown already (upstream writes only when Ready changes)."""
    have = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or ()}
    ready = have.get("Ready")
    if ready is not None and ready.get("status") == "Unknown":
        return None
    out: list[dict[str, Any]] = []
    for ctype in HEALTH_CONDITIONS:
        c = have.get(ctype)
        if c is None:
            out.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                        "message": "Kubelet never posted node status.",
                        "lastHeartbeatTime": meta_of(node).get("creationTimestamp"), "lastTransitionTime": now})
        elif c.get("status") != "Unknown":
            out.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.", "lastTransitionTime": now})
    return out


class TokenBucket:
    """client-go's token bucket limiter with a burst of 1, full when made; a rate of 0 never
    accepts (its ``NewFakeNeverRateLimiter``)."""

    __slots__ = ("last", "qps", "tokens")

    def __init__(self, qps: float, now: float) -> None:
        self.qps = qps
        self.tokens = 1.0
        self.last = now

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        self.tokens = min(1.0, self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class _ZoneTainter:
    """A zone's nodes waiting for their first NoExecute taint, in order, and the rate they get
    it at (upstream's ``RateLimitedTimedQueue``)."""

    __slots__ = ("limiter", "waiting")

    def __init__(self, qps: float, now: float) -> None:
        self.waiting: dict[str, None] = {}
        self.limiter = TokenBucket(qps, now)

    def swap(self, qps: float, now: float) -> None:
        """A new rate (upstream's ``SwapLimiter``): a new full bucket, drained at once if the
        old one was empty."""
        if qps == self.limiter.qps:
            return
        new = TokenBucket(qps, now)
        if qps > 0 and not self.limiter.try_accept(now):
            new.try_accept(now)
        self.limiter = new


def _renewal(lease: dict[str, Any]) -> dict[str, Any]:
    """What is held of a Lease: its name, version and renewTime (one namespace: the name is
    its key)."""
    meta = lease.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")},
            "renewTime": (lease.get("spec") or {}).get("renewTime")}


def _later(new: str, old: str | None) -> bool:
    """Whether MicroTime ``new`` is after ``old`` (upstream: a Lease counts as renewed only
    when its renewTime moves forward). RFC 3339 strings of one width compare as strings."""
    if old is None:
        return True
    if len(new) == len(old):
        return new > old
    try:
        return datetime.datetime.fromisoformat(new) > datetime.datetime.fromisoformat(old)
    except ValueError:
        return new != old


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _node_ref(node: Mapping[str, Any]) -> dict[str, Any]:
    """The node as upstream's ``RecordNodeEvent`` and ``RecordNodeStatusChange`` refer to it:
    ``apiVersion: v1``, its name and uid (no resourceVersion)."""
    meta = meta_of(node)
    return {"apiVersion": "v1", "metadata": {"name": meta.get("name", ""), "uid": meta.get("uid", "")}}


def _epoch(timestamp: Any) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(str(timestamp), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


class NodeLifecycleController:
    def __init__(self, client: Client, settings: NodeLifecycle | None = None, workers: int = 8,
                 pod_workers: int = 4) -> None:
        self.client = client
        self.settings = settings or NodeLifecycle()
        # as upstream: 8 workers for the nodes' writes, 4 apart for their pods' (MarkPodsNotReady),
        # so a zone's worth of pod writes never holds up another node's taints
        self.workers = workers
        self.pod_workers = pod_workers
        self.queue = WorkQueue()
        self.pod_queue = WorkQueue()  # nodes turned Unknown from Ready whose pods are to be marked
        self.events = Recorder(client, "node-controller")
        self.nodes = client.informer("/api/v1/nodes", on_add=self._node_changed,
                                     on_update=lambda _old, new: self._node_changed(new),
                                     on_delete=self._node_deleted)
        self.leases = Informer(client.for_informers(), LEASES, on_add=self._lease_changed,
                               on_update=lambda _old, new: self._lease_changed(new),
                               on_delete=self._lease_deleted, transform=_renewal)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_bound,
                                    on_update=lambda old, new: self._pod_bound(new, old))
        # health, by node name: when it is overdue (monotonic), its Ready condition's
        # lastHeartbeatTime last seen (_NO_READY without one), its Lease's renewTime last seen
        self.due: dict[str, float] = {}
        self.heartbeats: dict[str, Any] = {}
        self.renewals: dict[str, Any] = {}
        # zones: each counted node's (zone, Ready True); each zone's [nodes, Ready ones]; states
        self.counted: dict[str, tuple[str, bool]] = {}
        self.zone_counts: dict[str, list[int]] = {}
        self.zone_states: dict[str, str] = {}
        self.tainters: dict[str, _ZoneTainter] = {}
        # set while a zone's queue may hold a node: the drain loop sleeps on it while none does
        self.tainters_waiting = asyncio.Event()
        self.all_disrupted = False
        # nodes this controller turned Unknown from Ready, with the Ready heartbeat it saw then,
        # until their pods are marked (a later heartbeat: the kubelet is back, nothing to mark)
        self.unheard: dict[str, Any] = {}

    # ------------------------------------------------------------------ events

    def _grace(self, name: str) -> float:
        s = self.settings
        return s.startup_grace_period if self.heartbeats.get(name) is _NO_READY else s.monitor_grace_period

    def _node_changed(self, node: dict[str, Any]) -> None:
        meta = meta_of(node)
        name = str(meta.get("name", ""))
        ready = _ready(node)
        heartbeat = ready.get("lastHeartbeatTime") if ready is not None else _NO_READY
        seen = self.heartbeats.get(name, _UNSEEN)
        self.heartbeats[name] = heartbeat
        if seen is _UNSEEN:
            self.events.record("Node", _node_ref(node), REASON_REGISTERED,
                               f"Node {name} event: Registered Node {name} in Controller")
        if seen is _UNSEEN and ready is None and name not in self.renewals:
            created = _epoch(meta.get("creationTimestamp"))
            since = 0.0 if created is None else max(0.0, time.time() - created)
            self.due[name] = time.monotonic() - since + self.settings.startup_grace_period
        elif seen is _UNSEEN or heartbeat != seen:
            self.due[name] = time.monotonic() + self._grace(name)
        elif self.due.get(name) == math.inf and (ready is None or ready.get("status") != "Unknown"):
            # set back from Unknown without a heartbeat (a client's patch): still not heard
            # from, so overdue at once, as upstream's pass finds it
            self.due[name] = time.monotonic()
        self._count(name, node, ready)
        wanted, held, _ = lifecycle_taints(node)
        if wanted != held or (self.all_disrupted and held & _NO_EXECUTE_OWNED):
            self.queue.add(name)

    def _node_deleted(self, node: dict[str, Any]) -> None:
        name = str(meta_of(node).get("name", ""))
        self.due.pop(name, None)
        if self.heartbeats.pop(name, _UNSEEN) is not _UNSEEN:
            self.events.record("Node", _node_ref(node), REASON_REMOVING,
                               f"Node {name} event: Removing Node {name} from Controller")
        self.unheard.pop(name, None)
        self._uncount(name)
        tainter = self.tainters.get(zone_key(node))
        if tainter is not None:
            tainter.waiting.pop(name, None)

    def _lease_changed(self, lease: dict[str, Any]) -> None:
        name = lease["metadata"]["name"]
        renewed = lease["renewTime"]
        if isinstance(renewed, str) and _later(renewed, self.renewals.get(name)):
            self.renewals[name] = renewed
            if name in self.heartbeats:
                self.due[name] = time.monotonic() + self._grace(name)

    def _pod_bound(self, pod: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        """Upstream's ``podUpdated``: a pod added or bound (its ``spec.nodeName`` new) is looked
        at by a pod worker unless its node is known and Ready."""
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (old is not None and (old.get("spec") or {}).get("nodeName") == node_name):
            return
        node = self.nodes.items.get(node_name)
        if node is not None and (ready := _ready(node)) is not None and ready.get("status") == "True":
            return
        self.pod_queue.add(_POD_KEY + key_of(pod))

    def _lease_deleted(self, lease: dict[str, Any]) -> None:
        self.renewals.pop(lease["metadata"]["name"], None)

    def _count(self, name: str, node: Mapping[str, Any], ready: Mapping[str, Any] | None) -> None:
        """Keep the zones' counts (nodes, Ready ones) in step with the node."""
        labels = meta_of(node).get("labels") or {}
        now = None if EXCLUDE_DISRUPTION in labels else (zone_key(node), ready is not None and
                                                            ready.get("status") == "True")
        before = self.counted.get(name)
        if now == before:
            return
        self._uncount(name)
        if now is not None:
            self.counted[name] = now
            counts = self.zone_counts.setdefault(now[0], [0, 0])
            counts[0] += 1
            counts[1] += now[1]

    def _uncount(self, name: str) -> None:
        before = self.counted.pop(name, None)
        if before is not None:
            counts = self.zone_counts[before[0]]
            counts[0] -= 1
            counts[1] -= before[1]
            if not counts[0]:
                del self.zone_counts[before[0]]

    # ------------------------------------------------------------------ the health pass

    def monitor_pass(self, now: float | None = None) -> None:
        """Queue the nodes overdue whose Ready condition is not Unknown yet, then set the zones'
        states and rates. A node found Unknown is not looked at again (its due time is
        infinite) until it is heard from: a pass during an outage stays a float a node."""
        now = time.monotonic() if now is None else now
        items = self.nodes.items
        quiet = []
        for name, due in self.due.items():
            if due < now:
                node = items.get(name)
                if node is None:
                    continue
                if (ready := _ready(node)) is None or ready.get("status") != "Unknown":
                    self.queue.add(name)
                else:
                    quiet.append(name)
        for name in quiet:
            self.due[name] = math.inf
        self._handle_disruption(now)

    def _qps(self, state: str, size: int) -> float:
        s = self.settings
        if self.all_disrupted:
            return 0.0
        if state == PARTIAL_DISRUPTION:
            return s.secondary_eviction_rate if size > s.large_cluster_size_threshold else 0.0
        return s.eviction_rate

    def _handle_disruption(self, now: float) -> None:
        threshold = self.settings.unhealthy_zone_threshold
        states = {zone: zone_state(ready, total - ready, threshold)
                  for zone, (total, ready) in self.zone_counts.items()}
        for zone, (size, healthy) in self.zone_counts.items():  # upstream's zone gauges, a pass at a time
            ZONE_SIZE.labels(zone).set(size)
            ZONE_HEALTH.labels(zone).set(100 * healthy / size)
            UNHEALTHY_NODES.labels(zone).set(size - healthy)
        everywhere = bool(states) and all(s == FULL_DISRUPTION for s in states.values())
        entering, leaving = everywhere and not self.all_disrupted, self.all_disrupted and not everywhere
        self.all_disrupted = everywhere
        if entering:
            log.warning("node lifecycle controller: no node is Ready; taking the NoExecute taints off and "
                        "evicting nothing until one is")
            for name, node in self.nodes.items.items():
                if lifecycle_taints(node)[1] & _NO_EXECUTE_OWNED:
                    self.queue.add(name)
        if leaving:
            log.info("node lifecycle controller: some nodes are Ready; every node has a new grace period")
            for name in self.due:
                self.due[name] = now + self._grace(name)
            for name, node in self.nodes.items.items():
                if (ready := _ready(node)) is not None and ready.get("status") != "True":
                    self.queue.add(name)  # to be queued for its taint again
        for zone, state in states.items():
            if entering or leaving or self.zone_states.get(zone, INITIAL) != state:
                tainter = self.tainters.get(zone)
                if tainter is not None:
                    tainter.swap(self._qps(state, self.zone_counts[zone][0]), now)
        self.zone_states = states

    def _tainter(self, zone: str) -> _ZoneTainter:
        tainter = self.tainters.get(zone)
        if tainter is None:
            counts = self.zone_counts.get(zone)
            tainter = self.tainters[zone] = _ZoneTainter(
                self._qps(self.zone_states.get(zone, NORMAL), counts[0] if counts else 0), time.monotonic())
        return tainter

    # ------------------------------------------------------------------ writes

    async def sync(self, name: str) -> None:
        node = self.nodes.items.get(name)
        if node is None:
            return
        due = self.due.get(name)
        if due is not None and due < time.monotonic():
            conditions = unknown_conditions(node, _rfc3339(time.time()))
            if conditions is not None:
                await self.client.patch(resource_path("", "v1", "nodes", name=name, subresource="status"),
                                        {"metadata": {"resourceVersion": meta_of(node).get("resourceVersion")},
                                         "status": {"conditions": conditions}}, patch_type="strategic")
                ready = _ready(node)
                if ready is not None and ready.get("status") == "True":
                    self.events.record("Node", _node_ref(node), REASON_NOT_READY,
                                       f"Node {name} status is now: {REASON_NOT_READY}")
                    self.unheard[name] = ready.get("lastHeartbeatTime")
                    self.pod_queue.add(name)
                return  # its taints follow from the update this makes
        await self._write_fresh(name, node, first_no_execute=False)

    async def mark_pods_not_ready(self, name: str) -> None:
        """Upstream's ``MarkPodsNotReady`` for the pods on node ``name``, while the node is not
        Ready (a retry after the kubelet came back would undo its work: upstream retries only
        then too); raises (the node is then handled again, later) if one could not be written.
        A key ``pod:<namespace>/<name>`` is one pod bound since (``process_pod``)."""
        if name.startswith(_POD_KEY):
            await self.process_pod(name[len(_POD_KEY):])
            return
        node = self.nodes.items.get(name)
        ready = _ready(node) if node is not None else None
        if name not in self.unheard or ready is None or (
                ready.get("status") == "True" and ready.get("lastHeartbeatTime") != self.unheard[name]):
            self.unheard.pop(name, None)  # gone, or Ready again since (the informer may not show
            return                        # this controller's Unknown yet: then the heartbeat is the same)
        pods = await self.client.list(resource_path("", "v1", "pods"), fieldSelector=f"spec.nodeName={name}")
        now = _rfc3339(time.time())
        failed: Exception | None = None
        for pod in pods.get("items") or ():
            try:
                await self._mark_pod_not_ready(pod, now)
            except ApiError as e:
                if e.code != 404:
                    failed = e
        if failed is not None:
            raise failed
        self.unheard.pop(name, None)

    async def process_pod(self, key: str) -> None:
        """Upstream's ``processPod``: the pod ``key`` (namespace/name), bound since this
        controller last looked, is marked not Ready if its node's Ready condition is not True."""
        pod = self.pods.items.get(key)
        if pod is None:
            return
        node = self.nodes.items.get((pod.get("spec") or {}).get("nodeName") or "")
        ready = _ready(node) if node is not None else None
        if ready is None or ready.get("status") == "True":
            return  # gone, never reported, or Ready again: nothing to mark
        await self._mark_pod_not_ready(pod, _rfc3339(time.time()))

    async def _mark_pod_not_ready(self, pod: dict[str, Any], now: str) -> None:
        """Set ``pod``'s Ready condition False (at the version read: 409 when it moved since) and
        record ``NodeNotReady`` on it; a pod without a Ready condition, or not Ready, is left."""
        ready = _ready(pod)
        if ready is None or ready.get("status") == "False":
            return
        meta = meta_of(pod)
        await self.client.patch(
            resource_path("", "v1", "pods", str(meta.get("namespace")), str(meta.get("name")), "status"),
            {"metadata": {"resourceVersion": meta.get("resourceVersion")},
             "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}]}},
            patch_type="strategic")
        self.events.record("Pod", pod, REASON_NOT_READY, "Node is not ready", "Warning")

    async def _write_taints(self, node: dict[str, Any], first_no_execute: bool) -> None:
        """Write the node's lifecycle taints as they should be, but a first NoExecute one only
        with ``first_no_execute`` (from its zone's queue); without, the node joins that queue."""
        name = str(meta_of(node).get("name", ""))
        wanted, held, owned = lifecycle_taints(node)
        no_execute = wanted & _NO_EXECUTE_OWNED
        if self.all_disrupted:
            wanted -= no_execute
        elif no_execute and not (held & _NO_EXECUTE_OWNED) and not first_no_execute:
            self._tainter(zone_key(node)).waiting[name] = None
            self.tainters_waiting.set()
            wanted -= no_execute
        if not no_execute:
            tainter = self.tainters.get(zone_key(node))
            if tainter is not None:
                tainter.waiting.pop(name, None)
        taints = _rewritten(node, wanted, held, owned)
        if taints is None:
            return
        await self.client.patch(resource_path("", "v1", "nodes", name=name),
                                {"metadata": {"resourceVersion": meta_of(node).get("resourceVersion")},
                                 "spec": {"taints": taints or None}}, patch_type="merge")

    async def _drain_tainters(self) -> None:
        """Give the nodes waiting in each zone's queue their first NoExecute taint, at the zone's
        rate; a write that fails is tried again at the queue's end. While every queue is
        empty it waits for a node to join one, not a timer (an idle server's wake-ups)."""
        waiting = self.tainters_waiting
        while True:
            if not any(t.waiting for t in self.tainters.values()):
                waiting.clear()
                await waiting.wait()
            await asyncio.sleep(TAINTER_PERIOD)
            try:
                await self._drain_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: logged, and the queues are still drained
                log.exception("node lifecycle controller: tainting pass")

    async def _drain_once(self) -> None:
        """One pass over the zones' queues: each gives as many nodes as its tokens allow."""
        for tainter in list(self.tainters.values()):
            while tainter.waiting and tainter.limiter.try_accept(time.monotonic()):
                name = next(iter(tainter.waiting))
                del tainter.waiting[name]
                node = self.nodes.items.get(name)
                if node is None:
                    continue
                try:
                    await self._write_fresh(name, node, first_no_execute=True)
                    ZONE_EVICTIONS.labels(zone_key(node)).inc()
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # a timeout, a server error: at the queue's end, with a token
                    log.info("node lifecycle controller: tainting node %s: %s; again later", name, e)
                    tainter.waiting[name] = None
                    break

    async def _write_fresh(self, name: str, node: dict[str, Any], first_no_execute: bool) -> None:
        """``_write_taints``, a conflict tried again on a fresh read, up to 5 times, as upstream's
        ``AddOrUpdateTaintOnNode``/``RemoveTaintOffNode``: the informer's copy is often behind a
        write just made (this controller's NoSchedule taint before a queue's NoExecute one, the
        kubelet's status reports as a node recovers: retried from the informer, 2.3 conflicts
        a recovering node). A first NoExecute taint keeps the one token its queue gave."""
        for attempt in range(5):
            try:
                await self._write_taints(node, first_no_execute=first_no_execute)
                return
            except ApiError as e:
                if e.code != 409 or attempt == 4:
                    raise
            node = await self.client.get(resource_path("", "v1", "nodes", name=name))

    async def _monitor(self) -> None:
        while True:
            started = time.perf_counter()
            try:
                self.monitor_pass()
                NODES_HEALTH_PASS.observe(time.perf_counter() - started)
            except Exception:  # a bug: logged, and the next pass is still made
                log.exception("node lifecycle controller: health pass")
            await asyncio.sleep(self.settings.monitor_period)

    async def run(self) -> None:
        background: list[asyncio.Task[None]] = []

        def synced() -> None:
            background.append(asyncio.create_task(self._monitor()))
            background.append(asyncio.create_task(self._drain_tainters()))
            background.append(asyncio.create_task(run_controller(
                "node lifecycle controller (pods)", (), self.pod_queue, self.mark_pods_not_ready, self.pod_workers)))

        try:
            await run_controller("node lifecycle controller", (self.nodes, self.leases, self.pods), self.queue,
                                 self.sync, self.workers, on_synced=synced)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await NodeLifecycleController(client, config.node_lifecycle).run()
