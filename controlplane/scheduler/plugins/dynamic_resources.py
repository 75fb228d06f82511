"""DynamicResources: the DRA plugin, a thin adapter over ``controlplane.scheduler.dra``.

PreEnqueue holds a pod until its claims exist (the resourceclaim controller
creates those from templates). PreFilter finds the pod's ResourceClaims (``spec.resourceClaims``; generated
ones through ``status.resourceClaimStatuses`` or their owner reference) and
checks what fails everywhere (a missing class, a bad selector). Filter asks
whether the node's devices can satisfy the unallocated claims (and whether
allocated ones are usable there). Score prefers the nodes where a
``firstAvailable`` request gets an earlier alternative (KEP-4816; skipped, by
PreScore, for pods whose claims list none). Reserve holds the devices in memory so that
the next cycles see them taken; Unreserve lets them go (and undoes what PreBind
wrote). PreBind writes ``status.allocation`` and ``reservedFor`` through the
API and waits for binding conditions. DeviceTaintRules are watched beside the
slices: their taints are on the devices they select (``dra.inventory``), and a rule's
change requeues the pods with claims. The domain logic, and its tests, are in
``dra.manager`` and below.

Arguments (``PluginConfig("DynamicResources", args=...)``): ``bindingTimeout``,
seconds PreBind waits for binding conditions (default 600, upstream's 10 minutes).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..columns import Ints
from ..dra.groups import group_name
from ..dra.manager import BindingFailed, DraManager, PodClaims, Unschedulable, pod_claim_names
from ..framework import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Registry,
    Status,
    WatchedResource,
    waiting_outside_the_bind_bound,
)
from ..nodeinfo import NodeInfo, PodInfo

__all__ = ["NAME", "DynamicResources", "register"]

NAME = "DynamicResources"
GROUP, VERSION = "resource.k8s.io", "v1"


def _claim_may_help(pod: PodInfo, old: Any, new: Any) -> bool:
    """A claim event helps a pod it belongs to, or frees devices (deallocated or deleted while allocated).

    The queue asks this for every parked pod on every claim event: the cheap tests come first."""
    if old is not None and (old.get("status") or {}).get("allocation") and \
            (new is None or not (new.get("status") or {}).get("allocation")):
        return True
    meta = (new if new is not None else old).get("metadata") or {}
    if meta.get("namespace") != pod.namespace:
        return False
    refs = meta.get("ownerReferences")
    if refs:  # generated for a pod (it concerns that pod only) or for its PodGroup (KEP-5729)
        return any(ref.get("uid") == pod.uid
                   or (ref.get("kind") == "PodGroup" and ref.get("name") == group_name(pod.obj)) for ref in refs)
    return meta.get("name") in {n for _, n in pod_claim_names(pod.obj) if n}


def _claim_targets(old: Any, new: Any) -> Collection[str] | None:
    """The pods a claim event can help, as ``_claim_may_help`` decides: a claim generated
    for a pod (owner references) concerns that pod only, unless it freed devices."""
    if old is not None and (old.get("status") or {}).get("allocation") and \
            (new is None or not (new.get("status") or {}).get("allocation")):
        return None  # devices freed: any pod may fit now
    refs = ((new if new is not None else old).get("metadata") or {}).get("ownerReferences")
    if not refs or any(ref.get("kind") == "PodGroup" for ref in refs):
        return None  # a claim by name, or a group's: any pod naming it
    return [str(ref.get("uid")) for ref in refs if ref.get("uid")]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize


def _prioritized(claims: Sequence[Mapping[str, Any]]) -> bool:
    """Does a request of these claims list alternatives (``firstAvailable``)?"""
    return any(req.get("firstAvailable") for c in claims
               for req in ((c.get("spec") or {}).get("devices") or {}).get("requests") or ())


def subrequest_score(claims: Sequence[Mapping[str, Any]], allocated: Sequence[set[str]]) -> int:
    """Upstream's ``computeScore`` (KEP-4816): for each ``firstAvailable`` entry an
    allocation uses, ``8 - its index``, summed over the claims' requests, so a node where
    the preferred alternatives fit scores higher.

    >>> c = {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [{"name": "big"}, {"name": "any"}]}]}}}
    >>> subrequest_score([c], [{"gpu/big"}]), subrequest_score([c], [{"gpu/any"}])
    (8, 7)
    """
    score = 0
    for claim, used in zip(claims, allocated, strict=True):
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            for i, sub in enumerate(req.get("firstAvailable") or ()):
                if f"{req.get('name', '')}/{sub.get('name', '')}" in used:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def _uses_claims(pod: PodInfo, old: Any, new: Any) -> bool:
    return bool((pod.obj.get("spec") or {}).get("resourceClaims"))


class DynamicResources:
    def __init__(self, handle: Handle, binding_timeout: float = 600.0) -> None:
        self.handle = handle
        self.manager = DraManager(binding_timeout)
        self.manager.podgroups = lambda: handle.lister("podgroups")
        self._recorded: Any = None  # the last claim the queue's hint recorded (``_claim_may_help``)
        m = self.manager
        handle.add_event_handler("resourceslices", m.on_slice, lambda _o, n: m.on_slice(n), m.on_slice_delete)
        handle.add_event_handler("devicetaintrules", m.on_rule, lambda _o, n: m.on_rule(n), m.on_rule_delete)
        handle.add_event_handler("deviceclasses", m.on_class, lambda _o, n: m.on_class(n), m.on_class_delete)
        handle.add_event_handler("resourceclaims", m.on_claim, lambda _o, n: m.on_claim(n), m.on_claim_delete)
        handle.add_event_handler("nodes", lambda _n: None, self._node_updated, lambda _n: None)

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> DynamicResources:
        return cls(handle, float(args.get("bindingTimeout", 600.0)))

    def name(self) -> str:
        return NAME

    def resources_to_watch(self) -> list[WatchedResource]:
        return [WatchedResource(GROUP, VERSION, "resourceslices", namespaced=False),
                WatchedResource(GROUP, VERSION, "devicetaintrules", namespaced=False),
                WatchedResource(GROUP, VERSION, "deviceclasses", namespaced=False),
                WatchedResource(GROUP, VERSION, "resourceclaims")]

    def events_to_register(self) -> list[ClusterEvent]:
        changed = ActionType.ADD | ActionType.UPDATE | ActionType.DELETE
        # a node added or labelled into a slice's nodeSelector may now be served (upstream's
        # nodeActionType: Add | UpdateNodeLabel | UpdateNodeTaint)
        nodes = ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
        return [ClusterEvent("nodes", nodes),
                ClusterEvent("resourceclaims", changed, self._claim_may_help, _claim_targets),
                ClusterEvent("resourceslices", changed, _uses_claims),
                # a rule's taint removed or changed may free a device (upstream's DeviceTaintRule events)
                ClusterEvent("devicetaintrules", changed, _uses_claims),
                ClusterEvent("deviceclasses", ActionType.ADD | ActionType.UPDATE, _uses_claims)]

    def _node_updated(self, old: Any, new: Any) -> None:
        # Which devices serve a node through a selector (a slice's nodeSelector) depends on its
        # labels, and what the manager keeps per node (its pools, candidates, Filter answers and
        # verdicts) holds for one inventory version: a relabelled node has them computed anew.
        if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
            self.manager.inventory.version += 1

    def _claim_may_help(self, pod: PodInfo, old: Any, new: Any) -> bool:
        # The queue hears of a claim before this plugin's handler does, and re-runs PreEnqueue
        # (which looks the claim up here) at once for the pods it moves: record the claim first.
        if new is not None and new is not self._recorded:  # once per event, not per parked pod
            self._recorded = new
            if self.manager.claims.get(_key(new)) is not new:
                self.manager.on_claim(new)
        return _claim_may_help(pod, old, new)

    # -- scheduling cycle

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Keep a pod out of activeQ until its claims exist, are not being deleted and are its
        own (no attempt, no FailedScheduling: upstream's PreEnqueue)."""
        if not (pod.obj.get("spec") or {}).get("resourceClaims"):
            return None
        reason = self.manager.missing_claim(pod.obj)
        return None if reason is None else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, plugin=NAME)

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        try:
            pc = self.manager.pre_filter(pod.obj)
        except Unschedulable as e:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(e), plugin=NAME)
        if pc is None:
            return Status(Code.SKIP, plugin=NAME)
        state.write(NAME, pc)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        # UNSCHEDULABLE_AND_UNRESOLVABLE, as upstream's: evicting pods frees no device here
        # (its preemption does not look at claims), so preemption passes these nodes over
        pc = _for_node(state.read(NAME), node)
        reason = None if pc is None else self.manager.filter(pc, node.name, node.labels)
        return None if reason is None else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, plugin=NAME)

    def filter_rows(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], rows: Ints,
                    wanted: int) -> Ints:
        pc: PodClaims = state.read(NAME)
        if pc.extended is None:
            return self.manager.filter_rows(pc, nodes, rows, wanted)
        keep: list[int] = []  # which claims a node is asked for depends on its allocatable: node by node
        for i in rows.tolist():
            if self.filter(state, pod, nodes[i]) is None:
                keep.append(i)
                if len(keep) >= wanted:
                    break
        return np.asarray(keep, dtype=np.int64)

    def member_capacity(self, state: CycleState, pod: PodInfo, node: NodeInfo, limit: int,
                        held: list[str]) -> int:
        """How many of ``pod``'s gang the node's devices hold (``DraManager.copies``): its
        siblings come from the same templates, so each takes devices like its own claims'."""
        pc = state.get(NAME)
        if pc is None:
            return limit
        pc = _for_node(pc, node)
        return limit if pc is None else self.manager.copies(pc, node.name, node.labels, limit, held)

    def release_capacity(self, held: list[str]) -> None:
        self.manager.release_copies(held)

    # -- scoring: the prioritized list's alternatives (upstream's Score, NormalizeScore)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        pc: PodClaims | None = state.get(NAME)
        if pc is None or not _prioritized(pc.claims):
            return Status(Code.SKIP, plugin=NAME)  # every node alike: the common cycle's scorers stay alone
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        pc = _for_node(state.read(NAME), node)
        if pc is None:
            return 0
        used = self.manager.subrequests(pc, node.name, node.labels)
        return 0 if used is None else subrequest_score(pc.claims, used)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Upstream's ``DefaultNormalizeScore(MaxNodeScore, false, ...)``: ``score * 100 / max``."""
        most = max(scores, default=0)
        if most > 0:
            scores[:] = [s * MAX_NODE_SCORE // most for s in scores]

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        pc: PodClaims | None = state.get(NAME)
        if pc is None:
            return None
        node = self.handle.nodes().get(node_name)
        if pc.extended is not None and node is not None:
            chosen = _for_node(pc, node)
            if chosen is not pc:  # the node's device plugin serves the extended resources
                state.write(NAME, chosen)
                if chosen is None:
                    return None
                pc = chosen
        reason = self.manager.reserve(pc, node_name, node.labels if node is not None else {})
        return None if reason is None else Status(Code.UNSCHEDULABLE, reason, plugin=NAME)

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        pc: PodClaims | None = state.get(NAME)
        if pc is None:
            return
        if pc.written:  # PreBind wrote before a later step failed: take it back
            self.handle.spawn(self.manager.release(self.handle.client, pc, pod.obj))
        else:
            self.manager.unreserve(pc)

    # -- binding cycle

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        pc: PodClaims | None = state.get(NAME)
        if pc is None:
            return None
        try:
            # upstream's PreBind records this before it polls the claims' device conditions
            await self.manager.pre_bind(self.handle.client, pc, pod.obj, node_name,
                                        waiting_outside_the_bind_bound(state),
                                        lambda: self.handle.record_event(
                                            pod.obj, "BindingConditionsPending",
                                            f"waiting for binding conditions for device on node {node_name}",
                                            "Normal", action="Scheduling"))
        except BindingFailed as e:  # worded as upstream's RunPreBindPlugins wraps a plugin's error
            return Status(Code.UNSCHEDULABLE, f'running PreBind plugin "{NAME}": {e}', plugin=NAME)
        return None


def _for_node(pc: PodClaims, node: NodeInfo) -> PodClaims | None:
    """The claims to allocate on ``node``: without the extended resources' claim where the
    node offers every one of them itself (a device plugin's allocatable), as upstream asks
    DRA only for what the node lacks (a node offering some of them is asked for all here)."""
    if pc.extended is None or not all(node.allocatable.get(r.resource, 0) > 0 for r in pc.extended_requests):
        return pc
    return pc.device_plugin


def register(registry: Registry) -> None:
    """Called by ``plugins.default_registry()`` when this module is present."""
    registry.register(NAME, DynamicResources.build)
