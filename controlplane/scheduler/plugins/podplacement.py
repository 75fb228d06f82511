"""Plugins that look at other pods: PodTopologySpread and InterPodAffinity.

Both count, once per cycle in PreFilter, the pods that match the incoming pod's
selectors per topology domain (a node label's value), then Filter is a dict
lookup per node. Pods without such constraints SKIP both at no cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..framework import MAX_NODE_SCORE, ActionType, ClusterEvent, Code, CycleState, Status
from ..nodeinfo import NodeInfo, PodInfo
from .selectors import match_label_selector, node_matches_pod_selectors

__all__ = ["InterPodAffinity", "PodTopologySpread"]

NodesFn = Callable[[], Mapping[str, NodeInfo]]


class _Spread:
    __slots__ = ("counts", "key", "max_skew", "min_domains", "selector")

    def __init__(self, c: Mapping[str, Any]) -> None:
        self.key: str = c.get("topologyKey", "")
        self.max_skew = int(c.get("maxSkew", 1))
        self.min_domains = int(c.get("minDomains") or 1)
        self.selector: Mapping[str, Any] | None = c.get("labelSelector")
        self.counts: dict[str, int] = {}


class PodTopologySpread:
    """``topologySpreadConstraints``: DoNotSchedule ones filter (skew = matching pods in
    the node's domain + 1 - the smallest domain's count, at most ``maxSkew``); ScheduleAnyway
    ones score (fewer matching pods in the domain is better). Domains are the values of
    ``topologyKey`` over nodes that pass the pod's node selector and affinity."""

    ERR = "node(s) didn't match pod topology spread constraints"
    ERR_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

    def __init__(self, nodes: NodesFn) -> None:
        self._nodes = nodes

    def name(self) -> str:
        return "PodTopologySpread"

    def _count(self, pod: PodInfo, constraints: Sequence[Mapping[str, Any]]) -> list[_Spread]:
        spreads = [_Spread(c) for c in constraints]
        for ni in self._nodes().values():
            if not node_matches_pod_selectors(pod.node_selector, pod.affinity, ni.labels, ni.name):
                continue
            for s in spreads:
                value = ni.labels.get(s.key)
                if value is None:
                    continue
                n = 0
                for other in ni.pods.values():
                    if other.namespace == pod.namespace and match_label_selector(s.selector, other.labels):
                        n += 1
                s.counts[value] = s.counts.get(value, 0) + n
        return spreads

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        hard = [c for c in pod.spread if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]
        if not hard:
            return Status(Code.SKIP)
        state.write("PodTopologySpread", self._count(pod, hard))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for s in state.read("PodTopologySpread"):
            value = node.labels.get(s.key)
            if value is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_LABEL, plugin=self.name())
            self_match = 1 if match_label_selector(s.selector, pod.labels) else 0
            lowest = min(s.counts.values(), default=0)
            if len(s.counts) < s.min_domains:
                lowest = 0
            if s.counts.get(value, 0) + self_match - lowest > s.max_skew:
                return Status(Code.UNSCHEDULABLE, self.ERR, plugin=self.name())
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        soft = [c for c in pod.spread if c.get("whenUnsatisfiable") == "ScheduleAnyway"]
        if not soft:
            return Status(Code.SKIP)
        state.write("PodTopologySpread/soft", self._count(pod, soft))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return sum(s.counts.get(node.labels.get(s.key, ""), 0) for s in state.read("PodTopologySpread/soft"))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        top, low = max(scores, default=0), min(scores, default=0)
        for i, s in enumerate(scores):
            scores[i] = MAX_NODE_SCORE if top == low else (top - s) * MAX_NODE_SCORE // (top - low)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("pods", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL),
            ClusterEvent("nodes", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL),
        ]


def _term_namespaces(term: Mapping[str, Any], pod_namespace: str) -> tuple[str, ...] | None:
    """The namespaces a term applies to; None: all (``namespaceSelector: {}``)."""
    if term.get("namespaceSelector") is not None and not term.get("namespaces"):
        sel = term["namespaceSelector"]
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            return None
    return tuple(term.get("namespaces") or (pod_namespace,))


def _term_matches(term: Mapping[str, Any], namespaces: tuple[str, ...] | None, other: PodInfo) -> bool:
    if namespaces is not None and other.namespace not in namespaces:
        return False
    return match_label_selector(term.get("labelSelector"), other.labels)


class InterPodAffinity:
    """Required pod affinity and anti-affinity, and the symmetry rule: an incoming pod
    may not land in a domain where an existing pod's required anti-affinity matches it.

    PreFilter walks the cluster's pods once and records the (topologyKey, value)
    domains that hold matches; Filter checks the node's labels against them.
    """

    ERR_AFFINITY = "node(s) didn't match pod affinity rules"
    ERR_ANTI = "node(s) didn't match pod anti-affinity rules"
    ERR_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"

    def __init__(self, nodes: NodesFn) -> None:
        self._nodes = nodes

    def name(self) -> str:
        return "InterPodAffinity"

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        aff = pod.affinity.get("podAffinity") if pod.affinity else None
        anti = pod.affinity.get("podAntiAffinity") if pod.affinity else None
        req_aff = (aff or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        req_anti = (anti or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        nodes = self._nodes()
        # The cache counts the pods with (anti-)affinity terms (NodeMap); a plain mapping is scanned.
        counted = getattr(nodes, "with_affinity", None)
        any_existing_anti = bool(counted) if counted is not None else any(
            ni.with_affinity for ni in nodes.values())
        if not req_aff and not req_anti and not any_existing_anti:
            return Status(Code.SKIP)
        aff_terms = [(t, _term_namespaces(t, pod.namespace)) for t in req_aff]
        anti_terms = [(t, _term_namespaces(t, pod.namespace)) for t in req_anti]
        aff_domains: list[set[str]] = [set() for _ in aff_terms]
        anti_domains: list[set[str]] = [set() for _ in anti_terms]
        existing: set[tuple[str, str]] = set()  # (key, value) domains an existing pod's anti-affinity forbids
        for ni in nodes.values():
            if not ni.pods:
                continue
            for other in ni.pods.values():
                if other.key == pod.key:
                    continue
                for i, (t, ns) in enumerate(aff_terms):
                    v = ni.labels.get(t.get("topologyKey", ""))
                    if v is not None and _term_matches(t, ns, other):
                        aff_domains[i].add(v)
                for i, (t, ns) in enumerate(anti_terms):
                    v = ni.labels.get(t.get("topologyKey", ""))
                    if v is not None and _term_matches(t, ns, other):
                        anti_domains[i].add(v)
                if ni.with_affinity:
                    o_anti = (other.affinity.get("podAntiAffinity") or {}) if other.affinity else {}
                    for t in o_anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
                        key = t.get("topologyKey", "")
                        v = ni.labels.get(key)
                        if v is not None and _term_matches(t, _term_namespaces(t, other.namespace), pod):
                            existing.add((key, v))
        # Upstream: if nothing in the cluster matches and the pod matches its own terms, it may go anywhere.
        self_ok = all(not d for d in aff_domains) and all(_term_matches(t, ns, pod) for t, ns in aff_terms)
        state.write("InterPodAffinity", (aff_terms, aff_domains, anti_terms, anti_domains, existing, self_ok))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        aff_terms, aff_domains, anti_terms, anti_domains, existing, self_ok = state.read("InterPodAffinity")
        labels = node.labels
        for key, value in existing:
            if labels.get(key) == value:
                return Status(Code.UNSCHEDULABLE, self.ERR_EXISTING, plugin=self.name())
        for (t, _), domains in zip(anti_terms, anti_domains, strict=True):
            v = labels.get(t.get("topologyKey", ""))
            if v is not None and v in domains:
                return Status(Code.UNSCHEDULABLE, self.ERR_ANTI, plugin=self.name())
        if aff_terms and not self_ok:
            for (t, _), domains in zip(aff_terms, aff_domains, strict=True):
                v = labels.get(t.get("topologyKey", ""))
                if v is None or v not in domains:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_AFFINITY, plugin=self.name())
        elif aff_terms:
            for t, _ in aff_terms:
                if t.get("topologyKey", "") not in labels:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_AFFINITY, plugin=self.name())
        return None

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("pods", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL),
            ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
        ]
