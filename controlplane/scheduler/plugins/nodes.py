"""Plugins about the node alone: NodeName, NodeUnschedulable, TaintToleration, NodeAffinity,
and SchedulingGates (PreEnqueue)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...selectormatch import match_node_selector_terms, node_matches_pod_selectors, tolerates, untolerated_taint
from ..framework import MAX_NODE_SCORE, ActionType, ClusterEvent, Code, CycleState, Handle, Status
from ..nodeinfo import NodeInfo, PodInfo

__all__ = ["NodeAffinity", "NodeName", "NodeUnschedulable", "SchedulingGates", "TaintToleration"]


class SchedulingGates:
    """PreEnqueue: a pod with ``spec.schedulingGates`` never enters activeQ."""

    def name(self) -> str:
        return "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.gated:
            return None
        gates = [g.get("name", "") for g in pod.obj.get("spec", {}).get("schedulingGates") or ()]
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"waiting for scheduling gates: [{' '.join(gates)}]", plugin="SchedulingGates")

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("pods", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]


class NodeName:
    ERR = "node(s) didn't match the requested node name"

    def name(self) -> str:
        return "NodeName"

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        want = pod.obj.get("spec", {}).get("nodeName")
        if not want:
            state.skip_filter.add("NodeName")
            return Status(Code.SKIP)
        state.restrict_nodes((want,))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        want = pod.obj.get("spec", {}).get("nodeName")
        if want and want != node.name:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR, plugin="NodeName")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("nodes", ActionType.ADD)]


_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class NodeUnschedulable:
    ERR = "node(s) were unschedulable"

    def name(self) -> str:
        return "NodeUnschedulable"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.unschedulable and not tolerates(pod.tolerations, _UNSCHEDULABLE_TAINT):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR, plugin="NodeUnschedulable")
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_TAINT)]


def _taint_text(t: Mapping[str, Any]) -> str:
    return f"{{{t.get('key', '')}: {t.get('value', '')}}}"


class TaintToleration:
    """Filter: NoSchedule/NoExecute taints must be tolerated. Score: fewer untolerated
    PreferNoSchedule taints is better (normalized, reversed)."""

    def name(self) -> str:
        return "TaintToleration"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        t = untolerated_taint(node.taints, pod.tolerations) if node.taints else None
        if t is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node(s) had untolerated taint {_taint_text(t)}",
                          plugin="TaintToleration")
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        if getattr(nodes, "untainted", False) or not any(n.taints for n in nodes):
            return Status(Code.SKIP)  # every node would score the same
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if not node.taints:
            return 0
        prefer = [t for t in pod.tolerations if not t.get("effect") or t.get("effect") == "PreferNoSchedule"]
        return sum(1 for t in node.taints if t.get("effect") == "PreferNoSchedule" and not tolerates(prefer, t))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        top = max(scores, default=0)
        for i, s in enumerate(scores):
            scores[i] = MAX_NODE_SCORE if top == 0 else MAX_NODE_SCORE - s * MAX_NODE_SCORE // top

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_TAINT)]


def _named_nodes(affinity: Mapping[str, Any] | None) -> set[str] | None:
    """The nodes required node affinity names outright: when every term has a
    ``matchFields`` requirement ``metadata.name In [...]``, the union of those names
    (what a DaemonSet's pods carry); None when some term may match other nodes."""
    na = (affinity or {}).get("nodeAffinity") or {}
    terms = ((na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        named = [f for f in term.get("matchFields") or () if f.get("key") == "metadata.name"
                 and f.get("operator") == "In"]
        if not named:
            return None
        within = set(named[0].get("values") or ())
        for f in named[1:]:
            within &= set(f.get("values") or ())
        names |= within
    return names


class NodeAffinity:
    """Filter: ``nodeSelector`` and required node affinity. Score: the summed weights of
    the preferred terms a node matches, normalized to 0..100."""

    ERR = "node(s) didn't match Pod's node affinity/selector"

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> NodeAffinity:
        return cls()

    def name(self) -> str:
        return "NodeAffinity"

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        if not pod.node_selector and not (pod.affinity and pod.affinity.get("nodeAffinity")):
            state.skip_filter.add("NodeAffinity")
            return Status(Code.SKIP)
        names = _named_nodes(pod.affinity)
        if names is not None:  # upstream's PreFilterResult: a DaemonSet pod looks at its one node only
            state.restrict_nodes(names)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node_matches_pod_selectors(pod.node_selector, pod.affinity, node.labels, node.name):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR, plugin="NodeAffinity")

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        na = pod.affinity.get("nodeAffinity") if pod.affinity else None
        prefs = (na or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if not prefs:
            state.skip_score.add("NodeAffinity")
            return Status(Code.SKIP)
        state.write("NodeAffinity/prefs", prefs)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        total = 0
        for p in state.read("NodeAffinity/prefs"):
            if match_node_selector_terms([p.get("preference") or {}], node.labels, node.name):
                total += int(p.get("weight", 0))
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        top = max(scores, default=0)
        if top > 0:
            for i, s in enumerate(scores):
                scores[i] = s * MAX_NODE_SCORE // top

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]
