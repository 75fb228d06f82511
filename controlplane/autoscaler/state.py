"""The cluster as the autoscaler sees it, kept by its informers' handlers.

Indexes that every batch and every disruption pass would otherwise rebuild:
the pods bound to each node (those that would need a new home, and those
terminating there), the pods waiting for capacity (``provisionable``), the
NodeClaim of each node, and when each node last saw a pod come or go
(Karpenter's ``lastPodEventTime``, what ``consolidateAfter`` counts from).
Handlers are synchronous and cheap (they run on the informers' tasks);
``on_provisionable`` lets the batcher hear of a new pending pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..registry.disruption import covers
from .catalog import Catalog
from .devices import DeviceTaintRules, TypeDevices, held_by_pool, real_node
from .labels import DISRUPTED_TAINT, DO_NOT_DISRUPT, INSTANCE_TYPE, NODEPOOL
from .provisioner import choose, daemon_requests
from .requirements import Requirements
from .resources import Resources, add, parse_resources
from .simulation import DeviceClasses, PodDemand, SimNode, claim_refs, demand, node_devices, total_requests

__all__ = ["ClusterState", "Simulated", "is_provisionable", "is_reschedulable", "key"]

Obj = dict[str, Any]


def key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _owned_by_daemonset(pod: Obj) -> bool:
    return any(o.get("kind") == "DaemonSet" and o.get("controller")
               for o in (pod.get("metadata") or {}).get("ownerReferences") or ())


def is_provisionable(pod: Obj) -> bool:
    """Karpenter's test: not bound, not nominated for preemption, not going away,
    and marked unschedulable by the scheduler (PodScheduled False, reason Unschedulable)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or status.get("nominatedNodeName") or _terminal(pod):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp") or _owned_by_daemonset(pod):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in status.get("conditions") or ())


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_reschedulable(pod: Obj) -> bool:
    """A pod that must find a place elsewhere if its node goes: not terminal, not
    terminating, not a DaemonSet's (it goes with the node)."""
    return not (_terminal(pod) or (pod.get("metadata") or {}).get("deletionTimestamp") or _owned_by_daemonset(pod))


class ClusterState:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pods: dict[str, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        self.nodepools: dict[str, Obj] = {}
        self.nodeclaims: dict[str, Obj] = {}
        self.slices: dict[str, Obj] = {}
        self.claims: dict[str, Obj] = {}       # resource claims, namespace/name
        self.templates: dict[str, Obj] = {}    # resource claim templates, namespace/name
        self.podgroups: dict[str, Obj] = {}    # scheduling.k8s.io PodGroups, namespace/name
        self.workloads: dict[str, Obj] = {}    # and Workloads (a PodGroup may take its policy from one)
        self.pdbs: dict[str, Obj] = {}         # PodDisruptionBudgets, namespace/name (they block disruption)
        self.daemonsets: dict[str, Obj] = {}   # namespace/name: their pods take room on every new node
        self.device_classes = DeviceClasses()
        self.taint_rules = DeviceTaintRules()  # their taints are on the devices they select, as the scheduler's
        self.pods_on: dict[str, set[str]] = {}      # node name -> keys of pods bound to it (is_reschedulable)
        # node name -> keys of the other pods bound to it and not finished (terminating, or a DaemonSet's):
        # they need no new home, but hold their requests there until gone, as in Karpenter's cluster state
        self.held_on: dict[str, set[str]] = {}
        # node name -> keys of pods bound to it and terminating: the node must outlive them (drain waits)
        self.terminating_on: dict[str, set[str]] = {}
        self.provisionable: set[str] = set()
        self.last_pod_event: dict[str, float] = {}  # node name -> clock()
        self.claim_of: dict[str, str] = {}          # node name -> its NodeClaim's name
        self.slices_on: dict[str, set[str]] = {}    # node name -> its ResourceSlices
        # node (or NodeClaim) name -> (when, pods) the provisioner meant for it: not disrupted meanwhile
        self.nominations: dict[str, tuple[float, set[str]]] = {}
        self.generation = 0  # grows with every change of a pod, node or NodeClaim
        self.on_provisionable: Callable[[], None] = lambda: None
        self.on_pod_change: Callable[[Obj | None, Obj | None], None] = lambda old, new: None
        self.on_nodeclaim_change: Callable[[Obj | None, Obj | None], None] = lambda old, new: None

    # -- pods -----------------------------------------------------------------------------------
    def pod_added(self, pod: Obj) -> None:
        self._pod(None, pod)

    def pod_updated(self, old: Obj, new: Obj) -> None:
        self._pod(old, new)

    def pod_deleted(self, pod: Obj) -> None:
        self._pod(pod, None)

    def _pod(self, old: Obj | None, new: Obj | None) -> None:
        self.generation += 1
        k = key(new if new is not None else old or {})
        old_node = (old.get("spec") or {}).get("nodeName") if old else None
        new_node = (new.get("spec") or {}).get("nodeName") if new else None
        old_here = old is not None and old_node and is_reschedulable(old)
        new_here = new is not None and new_node and is_reschedulable(new)
        if old_here and (old_node != new_node or not new_here):
            self.pods_on.get(old_node or "", set()).discard(k)
            self.last_pod_event[old_node or ""] = self.clock()
        if new_here and (old_node != new_node or not old_here):
            self.pods_on.setdefault(new_node or "", set()).add(k)
            self.last_pod_event[new_node or ""] = self.clock()
        old_held = old_node if old is not None and old_node and not old_here and not _terminal(old) else None
        new_held = new_node if new is not None and new_node and not new_here and not _terminal(new) else None
        if old_held and old_held != new_held:
            self.held_on.get(old_held, set()).discard(k)
        if new_held:
            self.held_on.setdefault(new_held, set()).add(k)
        old_going = old_node if old is not None and _terminating(old) else None
        new_going = new_node if new is not None and _terminating(new) else None
        if old_going and old_going != new_going:
            self.terminating_on.get(old_going, set()).discard(k)
        if new_going:
            self.terminating_on.setdefault(new_going, set()).add(k)
        if new is None:
            self.pods.pop(k, None)
            self.provisionable.discard(k)
        else:
            self.pods[k] = new
            if is_provisionable(new):
                if k not in self.provisionable:
                    self.provisionable.add(k)
                    self.on_provisionable()
            else:
                self.provisionable.discard(k)
        self.on_pod_change(old, new)

    def pods_of(self, node: str) -> Iterator[Obj]:
        for k in self.pods_on.get(node, ()):
            pod = self.pods.get(k)
            if pod is not None:
                yield pod

    def moving_pods_of(self, node: str) -> list[Obj]:
        """The pods of ``node``, being disrupted, that will need a new home now (Karpenter's
        ``CurrentlyReschedulablePods``): reschedulable, not annotated ``karpenter.sh/do-not-disrupt``,
        not covered by a budget that blocks every eviction (``maxUnavailable: 0``,
        ``minAvailable: 100%``). Capacity launched for the others would wait, empty, for ever."""
        out = []
        for p in self.pods_of(node):
            if not is_reschedulable(p) or ((p.get("metadata") or {}).get("annotations") or {}).get(
                    DO_NOT_DISRUPT) == "true":
                continue
            if any(_fully_blocking(b) and covers(b, p) for b in self.pdbs.values()):
                continue
            out.append(p)
        return out

    def held_pods_of(self, node: str) -> Iterator[Obj]:
        """The pods bound to ``node`` that need no new home but still take their room
        there: terminating ones (until their kubelet removes them) and DaemonSets'."""
        for k in self.held_on.get(node, ()):
            pod = self.pods.get(k)
            if pod is not None:
                yield pod

    def terminating_pods_of(self, node: str) -> Iterator[Obj]:
        """The pods bound to ``node`` that are terminating (its kubelet still has to remove them)."""
        for k in self.terminating_on.get(node, ()):
            pod = self.pods.get(k)
            if pod is not None:
                yield pod

    # -- nodes, NodePools, NodeClaims ---------------------------------------------------------------
    def node_added(self, node: Obj) -> None:
        self.generation += 1
        name = key(node)
        self.nodes[name] = node
        self.last_pod_event.setdefault(name, self.clock())

    def node_updated(self, old: Obj, new: Obj) -> None:
        if (old.get("spec"), (old.get("metadata") or {}).get("labels")) != (
                new.get("spec"), (new.get("metadata") or {}).get("labels")):
            self.generation += 1
        self.nodes[key(new)] = new

    def node_deleted(self, node: Obj) -> None:
        self.generation += 1
        name = key(node)
        self.nodes.pop(name, None)
        self.last_pod_event.pop(name, None)

    def nodeclaim_set(self, old: Obj | None, new: Obj) -> None:
        self.generation += 1
        self.nodeclaims[key(new)] = new
        node = (new.get("status") or {}).get("nodeName")
        if node:
            self.claim_of[node] = key(new)
        self.on_nodeclaim_change(old, new)

    def nodeclaim_deleted(self, claim: Obj) -> None:
        self.generation += 1
        self.nodeclaims.pop(key(claim), None)
        self.nominations.pop(key(claim), None)
        node = (claim.get("status") or {}).get("nodeName")
        if node and self.claim_of.get(node) == key(claim):
            del self.claim_of[node]
        self.on_nodeclaim_change(claim, None)

    def claims_of_pool(self, pool: str) -> list[Obj]:
        return [c for c in self.nodeclaims.values() if ((c.get("metadata") or {}).get("labels") or {}).get(NODEPOOL)
                == pool]

    NOMINATION_SECONDS = 20.0  # Karpenter's nomination window

    def nominate(self, node: str, pods: Iterable[str]) -> None:
        self.nominations[node] = (self.clock(), set(pods))

    def nominated(self, node: str) -> bool:
        """Whether pods the provisioner meant for ``node`` are still waiting (for a while)."""
        entry = self.nominations.get(node)
        if entry is None:
            return False
        when, pods = entry
        if self.clock() - when > self.NOMINATION_SECONDS or not (pods & self.provisionable):
            del self.nominations[node]
            return False
        return True

    def nodeclaim_of_node(self, node: str) -> Obj | None:
        name = self.claim_of.get(node)
        return self.nodeclaims.get(name) if name is not None else None

    def slices_of(self, node: str) -> list[Obj]:
        return [self.slices[k] for k in self.slices_on.get(node, ()) if k in self.slices]

    def slice_set(self, obj: Obj) -> None:
        k = key(obj)
        old = self.slices.get(k)
        if old is not None:
            self.slices_on.get((old.get("spec") or {}).get("nodeName") or "", set()).discard(k)
        self.slices[k] = obj
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            self.slices_on.setdefault(node, set()).add(k)

    def slice_deleted(self, obj: Obj) -> None:
        k = key(obj)
        self.slices.pop(k, None)
        self.slices_on.get((obj.get("spec") or {}).get("nodeName") or "", set()).discard(k)


class Simulated:
    """Builds the simulation's view of the cluster from a ``ClusterState``:
    pods' demands (cached by resourceVersion) and the nodes pods can go to."""

    def __init__(self, state: ClusterState, catalog: Catalog) -> None:
        self.state = state
        self.catalog = catalog
        self.devices = TypeDevices(state.device_classes, state.taint_rules)
        # pod key -> (its resourceVersion, the DeviceClasses' version, the claims and templates it was
        # made from, its demand)
        self._demands: dict[str, tuple[str, int, tuple[Obj | None, ...], PodDemand]] = {}
        self._capacities: dict[str, tuple[str, Resources]] = {}

    def demand(self, pod: Obj) -> PodDemand:
        k = key(pod)
        rv = (pod.get("metadata") or {}).get("resourceVersion", "")
        classes = self.state.device_classes.version  # a class created or changed changes what claims need
        # and a claim or template created, changed or deleted: a pod waiting for it may go now
        refs = claim_refs(pod, self.state.claims, self.state.templates, self.state.podgroups)
        cached = self._demands.get(k)
        if (cached is not None and cached[0] == rv and cached[1] == classes and len(cached[2]) == len(refs)
                and all(a is b for a, b in zip(cached[2], refs, strict=True))):
            return cached[3]
        d = demand(pod, self.state.claims, self.state.templates, self.state.device_classes, self.state.slices_of,
                   self.state.podgroups)
        self._demands[k] = (rv, classes, refs, d)
        return d

    def forget(self, pod_key: str) -> None:
        self._demands.pop(pod_key, None)

    def claim_capacity(self, claim: Obj) -> Resources:
        """A NodeClaim's capacity: its status once launched, else what it will launch."""
        k = key(claim)
        rv = (claim.get("metadata") or {}).get("resourceVersion", "")
        cached = self._capacities.get(k)
        if cached is not None and cached[0] == rv:
            return cached[1]
        capacity = parse_resources((claim.get("status") or {}).get("capacity"))
        if capacity:
            capacity["nodes"] = 1000
        else:
            chosen = choose(self.catalog, claim)
            capacity = dict(chosen[0].allocatable) if chosen is not None else {"nodes": 1000}
        if len(self._capacities) > 4 * len(self.state.nodeclaims) + 100:
            self._capacities.clear()
        self._capacities[k] = (rv, capacity)
        return capacity

    def usage(self, pool: str) -> Resources:
        """The capacity of a NodePool's NodeClaims (what its limits bound)."""
        return add(*(self.claim_capacity(c) for c in self.state.claims_of_pool(pool)))

    def nodes(self, exclude: Iterable[str] = (), overhead: Mapping[str, Resources] | None = None) -> list[SimNode]:
        """Every node a pod could be placed on: real nodes that take pods (not
        deleting, not cordoned, not tainted for disruption; a NodePool's, with
        ``overhead``, less what its DaemonSets' pods not bound there yet will take),
        and NodeClaims still launching (what their instance type will have, less
        ``overhead``: what the DaemonSets' pods will take on their NodePool's nodes). A node
        with ResourceSlices, and a NodeClaim, has its devices for the allocator (``devices``),
        tainted by the DeviceTaintRules: a real node's less what the claims allocated there hold."""
        skip = set(exclude)
        st = self.state
        out: list[SimNode] = []
        allocated = held_by_pool(c for c in st.claims.values() if (c.get("status") or {}).get("allocation")) \
            if st.slices else {}
        for name, node in st.nodes.items():
            if name in skip or _closed(node):
                continue
            labels = (node.get("metadata") or {}).get("labels") or {}
            allocatable = add(parse_resources((node.get("status") or {}).get("allocatable")),
                              node_devices(st.slices_of(name)))
            pods = list(st.pods_of(name))
            # what the scheduler counts: every bound pod not finished, terminating and DaemonSet pods too
            held = list(st.held_pods_of(name))
            requested = total_requests(self.demand(p) for p in (*pods, *held))
            pool = labels.get(NODEPOOL)
            if overhead and pool in overhead and st.daemonsets:
                # a NodePool's node: its DaemonSets' pods not there yet (a node just registered) keep their
                # room, as Karpenter's ExistingNode (their requests less the DaemonSet pods it has, not below 0)
                requested = add(requested, self._daemons_missing(node, held))
            claim = st.nodeclaim_of_node(name)
            slices = st.slices_of(name)
            out.append(SimNode(name, Requirements.from_labels(labels), list((node.get("spec") or {}).get("taints")
                                                                            or ()),
                               allocatable, requested, node=node, pods=pods, slices=slices,
                               nodepool=labels.get(NODEPOOL), claim=key(claim) if claim else None,
                               devices=real_node(name, slices, allocated, st.device_classes, st.taint_rules)
                               if slices else None))
        for name, claim in st.nodeclaims.items():
            meta = claim.get("metadata") or {}
            status = claim.get("status") or {}
            if name in skip or meta.get("deletionTimestamp") or (status.get("nodeName") in st.nodes):
                continue
            if any(c.get("type") == "Launched" and c.get("status") == "False" for c in status.get("conditions") or ()):
                continue
            option = self.catalog.get((meta.get("labels") or {}).get(INSTANCE_TYPE, ""))
            if option is None:
                chosen = choose(self.catalog, claim)
                if chosen is None:
                    continue
                option = chosen[0]
            labels = Requirements.parse((claim.get("spec") or {}).get("requirements")).intersect(
                Requirements.from_labels(meta.get("labels")))
            pool = (meta.get("labels") or {}).get(NODEPOOL)
            out.append(SimNode(name, labels, list((claim.get("spec") or {}).get("taints") or ()),
                               dict(option.allocatable), dict((overhead or {}).get(pool or "", {})), nodepool=pool,
                               claim=name, devices=self.devices.of(option)))
        return out

    def _daemons_missing(self, node: Obj, held: Iterable[Obj]) -> Resources:
        """What the DaemonSets whose pods would run on ``node`` request, less what their pods bound
        to it take (each resource at least 0). Lifecycle taints (``node.kubernetes.io/``) do not
        keep them off: the DaemonSet controller gives its pods their tolerations."""
        labels = Requirements.from_labels((node.get("metadata") or {}).get("labels"))
        taints = [t for t in (node.get("spec") or {}).get("taints") or ()
                  if not str(t.get("key", "")).startswith("node.kubernetes.io/")]
        wanted = daemon_requests(self.state.daemonsets.values(), labels, taints)
        there = add(*(self.demand(p).requests for p in held if _owned_by_daemonset(p)))
        return {k: v - there.get(k, 0) for k, v in wanted.items() if v > there.get(k, 0)}


def _fully_blocking(pdb: Obj) -> bool:
    spec = pdb.get("spec") or {}
    return spec.get("maxUnavailable") == 0 or spec.get("minAvailable") == "100%"


def _closed(node: Obj) -> bool:
    if (node.get("metadata") or {}).get("deletionTimestamp") or (node.get("spec") or {}).get("unschedulable"):
        return True
    return any(t.get("key") == DISRUPTED_TAINT["key"] for t in (node.get("spec") or {}).get("taints") or ())
