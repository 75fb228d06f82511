"""Plugins that look at other pods: PodTopologySpread and InterPodAffinity.

PodTopologySpread reads the matching pods per node from the cache's counts
(``podcounts.py``), kept as pods come and go, so its PreFilter and PreScore walk
nodes, never pods; InterPodAffinity counts, once per cycle in PreFilter, the pods
that match the incoming pod's terms per topology domain. Filter is then a dict
lookup per node. Pods without such constraints SKIP both at no cost (for
PodTopologySpread's scoring: and that no Service or controller selects, see below).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...selectormatch import match_label_selector, node_matches_pod_selectors, untolerated_taint
from ..framework import MAX_NODE_SCORE, ActionType, ClusterEvent, Code, CycleState, Handle, Status, WatchedResource
from ..nodeinfo import NodeInfo, PodInfo
from ..podcounts import PodCounts, Selector, SelectorCount, matches, selector_of
from .defaultselector import DefaultSelectors

__all__ = ["HOSTNAME", "SYSTEM_DEFAULT_CONSTRAINTS", "ZONE", "InterPodAffinity", "PodTopologySpread",
           "constraint_selector"]

NodesFn = Callable[[], Mapping[str, NodeInfo]]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# Upstream's ``systemDefaultConstraints``: what a pod without constraints of its own is
# scored by (defaultingType System), its pods counted with ``DefaultSelectors.for_pod``.
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
)


def _honors_affinity(c: Mapping[str, Any]) -> bool:
    """``nodeAffinityPolicy`` (default Honor): are only the nodes that pass the pod's node
    selector and required node affinity counted (Honor), or every node (Ignore)?"""
    return c.get("nodeAffinityPolicy") != "Ignore"


def _honors_taints(c: Mapping[str, Any]) -> bool:
    """``nodeTaintsPolicy`` (default Ignore): are nodes whose NoSchedule/NoExecute taints the pod
    does not tolerate left out (Honor), or counted (Ignore)?"""
    return c.get("nodeTaintsPolicy") == "Honor"


def constraint_selector(c: Mapping[str, Any], labels: Mapping[str, str]) -> Selector | None:
    """The selector a constraint counts pods with: its ``labelSelector`` and, for each key of its
    ``matchLabelKeys`` the pod's labels hold, ``key In (value)``, as upstream's
    ``filterTopologySpreadConstraints`` merges them (still, though the API server merges them at
    the pod's creation since 1.34: a pod stored before has them unmerged; merged twice, a
    requirement is the same requirement). None (no ``labelSelector``) stays None::

        >>> constraint_selector({"labelSelector": {"matchLabels": {"app": "web"}},
        ...                      "matchLabelKeys": ["pod-template-hash"]}, {"pod-template-hash": "5d4f"})
        (('app', 'In', ('web',)), ('pod-template-hash', 'In', ('5d4f',)))
    """
    sel = selector_of(c.get("labelSelector"))
    keys = c.get("matchLabelKeys")
    if sel is None or not keys:
        return sel
    merged = set(sel)
    merged.update((k, "In", (labels[k],)) for k in keys if k in labels)
    return tuple(sorted(merged)) if len(merged) != len(sel) else sel


def _tainted_off(pod: PodInfo, node: NodeInfo) -> bool:
    return bool(node.taints) and untolerated_taint(node.taints, pod.tolerations) is not None


class _Spread:
    """A DoNotSchedule constraint and, after PreFilter, its matching pods per domain."""

    __slots__ = ("counts", "honor_affinity", "honor_taints", "key", "lowest", "max_skew", "min_domains", "selector")

    def __init__(self, c: Mapping[str, Any], selector: Selector | None) -> None:
        self.key: str = c.get("topologyKey", "")
        self.max_skew = int(c.get("maxSkew", 1))
        self.min_domains = int(c.get("minDomains") or 1)
        self.selector = selector  # None: matches nothing
        self.honor_affinity = _honors_affinity(c)
        self.honor_taints = _honors_taints(c)
        self.counts: dict[str, int] = {}
        self.lowest = 0  # the smallest domain's count (0 with fewer domains than minDomains)


class _Soft:
    """A ScheduleAnyway constraint as PreScore leaves it for Score."""

    __slots__ = ("domains", "hostname", "key", "max_skew", "per_node", "weight")

    def __init__(self, key: str, max_skew: int, size: int, per_node: Mapping[str, int],
                 domains: Mapping[str, int]) -> None:
        self.key = key
        self.hostname = key == HOSTNAME  # counted per node, as upstream
        self.max_skew = max_skew
        # upstream's topologyNormalizingWeight: a domain's count weighs more when there are
        # more domains, so a key with few (zones) does not drown one with many (hosts)
        self.weight = math.log(size + 2)
        self.per_node = per_node
        self.domains = domains


def _has_node_constraints(pod: PodInfo) -> bool:
    na = pod.affinity.get("nodeAffinity") if pod.affinity else None
    return bool(pod.node_selector) or bool(na and na.get("requiredDuringSchedulingIgnoredDuringExecution"))


class PodTopologySpread:
    """``topologySpreadConstraints``: DoNotSchedule ones filter (skew = matching pods in
    the node's domain + 1 - the smallest domain's count, at most ``maxSkew``); ScheduleAnyway
    ones score, as upstream's PreScore, Score and NormalizeScore: a node's score is, over
    the constraints whose key it has, ``count * log(domains + 2) + maxSkew - 1`` (``count``:
    matching pods in its domain; for ``kubernetes.io/hostname``, on the node), then
    ``100 * (max + min - score) / max``. Domains are the values of ``topologyKey`` over
    the nodes that, for the pod's own constraints, have every constraint's key (the others
    score 0) and that the constraint's node inclusion policies admit: with
    ``nodeAffinityPolicy: Honor`` (the default) those passing the pod's node selector and
    required affinity, with ``Ignore`` all; with ``nodeTaintsPolicy: Honor`` only those
    without a NoSchedule/NoExecute taint the pod does not tolerate, with ``Ignore`` (the
    default) tainted ones too. A constraint's selector is its ``labelSelector`` with its
    ``matchLabelKeys`` merged in (``constraint_selector``).

    A pod without constraints of its own is scored by the default constraints
    (``SYSTEM_DEFAULT_CONSTRAINTS``: hostname maxSkew 3, zone maxSkew 5; nodes without a
    zone label still spread by hostname), counting the pods that match the selectors of
    the Services selecting it and of its ReplicaSet, StatefulSet or ReplicationController
    (``DefaultSelectors``); none of those, no default constraints. Plugin args as
    upstream's PodTopologySpreadArgs: ``defaultingType`` ``System`` (the default) or
    ``List`` with ``defaultConstraints``, whose DoNotSchedule ones filter as a pod's own do."""

    ERR = "node(s) didn't match pod topology spread constraints"
    ERR_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

    def __init__(self, nodes: NodesFn, defaults: Sequence[Mapping[str, Any]] = (),
                 selectors: DefaultSelectors | None = None, system_defaulted: bool = False) -> None:
        self._nodes = nodes
        self._defaults = tuple(c for c in defaults if c.get("whenUnsatisfiable") == "ScheduleAnyway")
        # (List defaulting only: the system defaults are all ScheduleAnyway) filtering, as upstream's
        # PreFilter builds the default constraints for DoNotSchedule too
        self._hard_defaults = tuple(c for c in defaults
                                    if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule")
        self._selectors = selectors
        self._system_defaulted = system_defaulted

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> PodTopologySpread:
        kind = args.get("defaultingType", "System")
        if kind == "System":
            defaults, system = SYSTEM_DEFAULT_CONSTRAINTS, True
        elif kind == "List":
            defaults, system = tuple(args.get("defaultConstraints") or ()), False
        else:
            raise ValueError(f"PodTopologySpread: defaultingType {kind!r} is neither System nor List")
        selectors = None
        if defaults:
            selectors = DefaultSelectors()
            selectors.watch(handle)
        return cls(handle.nodes, defaults, selectors, system)

    def name(self) -> str:
        return "PodTopologySpread"

    def resources_to_watch(self) -> list[WatchedResource]:
        return list(DefaultSelectors.RESOURCES) if self._selectors is not None else []

    def _counts(self) -> tuple[Mapping[str, NodeInfo], PodCounts]:
        nodes = self._nodes()
        counts = getattr(nodes, "pod_counts", None)  # the cache's; without a cache, a walk per selector
        return nodes, counts if counts is not None else PodCounts(nodes)

    def _count(self, pod: PodInfo, constraints: Sequence[Mapping[str, Any]],
               selectors: Sequence[Selector | None]) -> list[_Spread]:
        """Upstream's PreFilter: over the nodes with every constraint's key, each constraint
        counts those its node inclusion policies admit (a domain with no matching pod is a
        domain, at 0)."""
        nodes, counts = self._counts()
        spreads = [_Spread(c, sel) for c, sel in zip(constraints, selectors, strict=True)]
        pairs = [(s, _index(counts, pod.namespace, s.selector)) for s in spreads]
        keys = [s.key for s in spreads]
        check_affinity = _has_node_constraints(pod) and any(s.honor_affinity for s in spreads)
        check_taints = any(s.honor_taints for s in spreads)
        for ni in nodes.values():
            labels = ni.labels
            if any(k not in labels for k in keys):  # a node counts only with every constraint's key
                continue
            off_affinity = check_affinity and not node_matches_pod_selectors(
                pod.node_selector, pod.affinity, labels, ni.name)
            off_taints = check_taints and _tainted_off(pod, ni)
            for s, index in pairs:
                if (off_affinity and s.honor_affinity) or (off_taints and s.honor_taints):
                    continue
                value = labels[s.key]
                s.counts[value] = s.counts.get(value, 0) + (index.nodes.get(ni.name, 0) if index else 0)
        for s in spreads:
            s.lowest = 0 if len(s.counts) < s.min_domains else min(s.counts.values(), default=0)
        return spreads

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        if pod.spread:
            hard: Sequence[Mapping[str, Any]] = [
                c for c in pod.spread if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]
            selectors = [constraint_selector(c, pod.labels) for c in hard]
        else:  # the default constraints' DoNotSchedule ones (List defaulting), as upstream's PreFilter
            sel = self._selectors.for_pod(pod) if self._selectors is not None and self._hard_defaults else None
            if sel is None:
                return Status(Code.SKIP)
            hard = self._hard_defaults
            selectors = [sel] * len(hard)
        if not hard:
            return Status(Code.SKIP)
        state.write("PodTopologySpread", self._count(pod, hard, selectors))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for s in state.read("PodTopologySpread"):
            value = node.labels.get(s.key)
            if value is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_LABEL, plugin=self.name())
            self_match = 1 if s.selector is not None and matches(s.selector, pod.labels) else 0
            if s.counts.get(value, 0) + self_match - s.lowest > s.max_skew:
                return Status(Code.UNSCHEDULABLE, self.ERR, plugin=self.name())
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        if pod.spread:
            constraints: Sequence[Mapping[str, Any]] = [
                c for c in pod.spread if c.get("whenUnsatisfiable") == "ScheduleAnyway"]
            selectors = [constraint_selector(c, pod.labels) for c in constraints]
            require_all = True
        else:
            sel = self._selectors.for_pod(pod) if self._selectors is not None and self._defaults else None
            if sel is None:
                return Status(Code.SKIP)
            constraints = self._defaults
            selectors = [sel] * len(constraints)
            # system defaults: a node without a zone label still spreads by hostname
            require_all = not self._system_defaulted
        if not constraints:
            return Status(Code.SKIP)
        all_nodes, counts = self._counts()
        if not all_nodes:
            return Status(Code.SKIP)
        keys = [c.get("topologyKey", "") for c in constraints]
        ignored: set[str] = set()
        if require_all:
            ignored = {n.name for n in nodes if any(k not in n.labels for k in keys)}
        restricted = _has_node_constraints(pod)
        soft = []
        for c, key, sel in zip(constraints, keys, selectors, strict=True):
            index = _index(counts, pod.namespace, sel)
            max_skew = int(c.get("maxSkew", 1))
            if key == HOSTNAME:
                soft.append(_Soft(key, max_skew, len(nodes) - len(ignored), index.nodes if index else {}, {}))
                continue
            size = len({n.labels.get(key, "") for n in nodes if n.name not in ignored} if ignored
                       else {n.labels.get(key, "") for n in nodes})
            affinity = restricted and _honors_affinity(c)
            taints = _honors_taints(c)
            if index is None:
                domains: Mapping[str, int] = {}
            elif not affinity and not taints and (not require_all or all(k == key for k in keys)):
                domains = counts.domains(index, key)  # kept by the cache
            else:
                domains = _domains_of(index, all_nodes, pod, key, keys if require_all else (), affinity, taints)
            soft.append(_Soft(key, max_skew, size, {}, domains))
        state.write("PodTopologySpread/soft", (soft, ignored))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """Not normalized: higher is worse; -1 for a node PreScore ignores (no key of a constraint)."""
        return self.score_all(state, pod, (node,))[0]

    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        soft, ignored = state.read("PodTopologySpread/soft")
        if not ignored and len(soft) == 2 and soft[0].hostname and not soft[1].hostname:
            return _score_host_and_zone(soft[0], soft[1], nodes)  # the system defaults' shape
        out = []
        for node in nodes:
            name = node.name
            if ignored and name in ignored:
                out.append(-1)
                continue
            labels = node.labels
            total = 0.0
            for s in soft:
                value = labels.get(s.key)
                if value is None:
                    continue
                n = s.per_node.get(name, 0) if s.hostname else s.domains.get(value, 0)
                total += n * s.weight + s.max_skew - 1
            out.append(int(total + 0.5))  # Go's math.Round (half away from zero; total >= 0)
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """``100 * (max + min - s) / max`` over the nodes not ignored (-1), which get 0."""
        raw = np.asarray(scores, dtype=np.int64)
        valid = raw >= 0
        if not valid.any():
            scores[:] = [0] * len(scores)
            return
        top, low = max(int(raw.max()), 0), int(raw[valid].min())
        out = MAX_NODE_SCORE * (top + low - raw) // top if top else np.full_like(raw, MAX_NODE_SCORE)
        scores[:] = np.where(valid, out, 0).tolist()

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("pods", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL),
            # (taints: a constraint with nodeTaintsPolicy Honor counts a node once it is untainted)
            ClusterEvent("nodes", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                         | ActionType.UPDATE_NODE_TAINT),
        ]


def _score_host_and_zone(host: _Soft, zone: _Soft, nodes: Sequence[NodeInfo]) -> list[int]:
    """``score_all`` of a hostname and a zone constraint, no node ignored: the same sums,
    unrolled (this runs for every feasible node of every pod of a ReplicaSet)."""
    per_node, hw, hb = host.per_node, host.weight, host.max_skew - 1
    domains, key, zw, zb = zone.domains, zone.key, zone.weight, zone.max_skew - 1
    out = []
    for node in nodes:
        labels = node.labels
        total = per_node.get(node.name, 0) * hw + hb if HOSTNAME in labels else 0.0
        value = labels.get(key)
        if value is not None:
            total += domains.get(value, 0) * zw + zb
        out.append(int(total + 0.5))
    return out


def _index(counts: PodCounts, namespace: str, selector: Selector | None) -> SelectorCount | None:
    """The counts of ``selector`` in ``namespace``; None for a selector whose pods count 0: none
    (``labelSelector`` absent) or an empty one (``{}``): upstream's ``countPodsMatchSelector``
    counts no pod for an empty selector, though the pod itself still matches it."""
    return counts.get(namespace, selector) if selector else None


def _domains_of(index: SelectorCount, nodes: Mapping[str, NodeInfo], pod: PodInfo, key: str,
                required: Sequence[str], affinity: bool, taints: bool) -> dict[str, int]:
    """Matching pods per value of ``key``, over the nodes with such pods that have every key of
    ``required`` and, with ``affinity``, pass ``pod``'s node selector and affinity, with
    ``taints``, have no taint it does not tolerate (the constraint's node inclusion
    policies): a walk over the nodes that hold matching pods (not all nodes, not their pods)."""
    out: dict[str, int] = {}
    for name, n in index.nodes.items():
        ni = nodes.get(name)
        if ni is None:
            continue
        labels = ni.labels
        value = labels.get(key)
        if value is None or any(k not in labels for k in required):
            continue
        if affinity and not node_matches_pod_selectors(pod.node_selector, pod.affinity, labels, name):
            continue
        if taints and _tainted_off(pod, ni):
            continue
        out[value] = out.get(value, 0) + n
    return out


NamespaceLabels = Callable[[str], Mapping[str, str]]


def _no_namespace_labels(name: str) -> Mapping[str, str]:
    return {}


class _Term:
    """A PodAffinityTerm of ``owner`` (a pod), parsed as upstream's ``AffinityTerm``: the
    namespaces it names (the owner's own when it names none and has no
    ``namespaceSelector``), its ``namespaceSelector`` (None selects no namespace, ``{}``
    every one), its ``labelSelector`` (None matches no pod) and, for a preferred term, its
    weight::

        >>> t = _Term({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}, "shop")
        >>> t.namespaces, t.ns_selector, t.key
        (frozenset({'shop'}), None, 'zone')
    """

    __slots__ = ("key", "namespaces", "ns_selector", "selector", "weight")

    def __init__(self, term: Mapping[str, Any], owner_namespace: str, weight: int = 0) -> None:
        names = term.get("namespaces") or ()
        self.ns_selector: Mapping[str, Any] | None = term.get("namespaceSelector")
        self.namespaces = frozenset(names) if names or self.ns_selector is not None else frozenset((owner_namespace,))
        self.selector: Mapping[str, Any] | None = term.get("labelSelector")
        self.key: str = term.get("topologyKey", "")
        self.weight = weight

    def matches(self, other: PodInfo, ns_labels: NamespaceLabels) -> bool:
        """Does ``other`` match, in its namespace (``ns_labels(name)``: a namespace's labels)?"""
        if other.namespace not in self.namespaces and (
                self.ns_selector is None or not match_label_selector(self.ns_selector, ns_labels(other.namespace))):
            return False
        return match_label_selector(self.selector, other.labels)


def _terms(pod: PodInfo, kind: str, when: str) -> list[_Term]:
    """``pod``'s ``podAffinity``/``podAntiAffinity`` (``kind``) terms, ``required`` or ``preferred`` (``when``)."""
    section = pod.affinity.get(kind) if pod.affinity else None
    if not section:
        return []
    if when == "required":
        return [_Term(t, pod.namespace) for t in section.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
    return [_Term(w.get("podAffinityTerm") or {}, pod.namespace, int(w.get("weight") or 0))
            for w in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]


def _has_terms(pod: PodInfo) -> bool:
    return bool(pod.affinity and (pod.affinity.get("podAffinity") or pod.affinity.get("podAntiAffinity")))


class InterPodAffinity:
    """Pod affinity and anti-affinity, as upstream's InterPodAffinity.

    Filter: required terms, and the symmetry rule: an incoming pod may not land in a
    domain where an existing pod's required anti-affinity matches it. PreFilter walks the
    cluster's pods once and records the (topologyKey, value) domains that hold matches;
    Filter checks the node's labels against them.

    Score (upstream's PreScore, Score and NormalizeScore): over the domains of each
    ``topologyKey``, the sum of the weights of the incoming pod's preferred
    ``podAffinity`` terms matched by an existing pod there, minus those of its preferred
    ``podAntiAffinity`` terms; plus, for each existing pod there, ``hardPodAffinityWeight``
    (default 1) for each of its required ``podAffinity`` terms and the weight of each of its
    preferred ``podAffinity`` terms the incoming pod matches, minus those of its preferred
    ``podAntiAffinity`` terms. A node scores the sum over its labels' domains; then
    ``100 * (score - min) / (max - min)`` over the feasible nodes (0 for all when equal).
    A pod without preferred terms looks only at the nodes holding pods with terms (the
    cache's ``affinity_nodes``); when no pod anywhere has terms, or nothing matches, the
    plugin sits the cycle out (SKIP), as upstream's. Args as upstream's
    ``InterPodAffinityArgs``: ``hardPodAffinityWeight`` (0..100, default 1) and
    ``ignorePreferredTermsOfExistingPods`` (default false).

    A term's ``namespaceSelector`` is matched against the labels of the namespaces the
    scheduler watches (``resources_to_watch``); without them (no informer: the
    autoscaler's ``feasible_nodes``), only ``{}`` selects, every namespace.
    """

    ERR_AFFINITY = "node(s) didn't match pod affinity rules"
    ERR_ANTI = "node(s) didn't match pod anti-affinity rules"
    ERR_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"

    def __init__(self, nodes: NodesFn, hard_weight: int = 1, ignore_existing_preferred: bool = False,
                 namespaces: Callable[[], Mapping[str, Any]] | None = None) -> None:
        if not 0 <= hard_weight <= 100:
            raise ValueError(f"InterPodAffinity: hardPodAffinityWeight {hard_weight} is not in 0..100")
        self._nodes = nodes
        self.hard_weight = hard_weight
        self.ignore_existing_preferred = ignore_existing_preferred
        self._namespaces = namespaces

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> InterPodAffinity:
        weight = args.get("hardPodAffinityWeight")
        return cls(handle.nodes, 1 if weight is None else int(weight),
                   bool(args.get("ignorePreferredTermsOfExistingPods")), lambda: handle.lister("namespaces"))

    def name(self) -> str:
        return "InterPodAffinity"

    def resources_to_watch(self) -> list[WatchedResource]:
        return [WatchedResource("", "v1", "namespaces", namespaced=False)] if self._namespaces is not None else []

    def _namespace_labels(self) -> NamespaceLabels:
        """A namespace's labels by name, each looked up once per cycle."""
        if self._namespaces is None:
            return _no_namespace_labels
        objs = self._namespaces()
        if not objs:
            return _no_namespace_labels
        seen: dict[str, Mapping[str, str]] = {}

        def labels(name: str) -> Mapping[str, str]:
            hit = seen.get(name)
            if hit is None:
                obj = objs.get(name)
                hit = seen[name] = ((obj.get("metadata") or {}).get("labels") or {}) if obj else {}
            return hit

        return labels

    def _with_terms(self, nodes: Mapping[str, NodeInfo]) -> list[NodeInfo]:
        """The nodes holding pods with (anti-)affinity terms: the cache's index, or a scan."""
        index = getattr(nodes, "affinity_nodes", None)
        if index is not None:
            return [nodes[n] for n in index if n in nodes]
        return [ni for ni in nodes.values() if ni.with_affinity]

    @staticmethod
    def _candidates(nodes: Mapping[str, NodeInfo], terms: Sequence[_Term]) -> Iterator[tuple[PodInfo, NodeInfo]]:
        """The pods ``terms`` could match, with their nodes: when no term has a
        ``namespaceSelector``, those of the namespaces the terms name (the cache keeps its
        pods by namespace); else, or without a cache, every pod."""
        counts = getattr(nodes, "pod_counts", None)
        if counts is not None and all(t.ns_selector is None for t in terms):
            found: list[tuple[PodInfo, NodeInfo]] = []
            for ns in sorted(set().union(*(t.namespaces for t in terms))):
                pods = counts.pods_of(ns)
                if pods is None:
                    break
                found.extend(pods)
            else:
                yield from found
                return
        for ni in nodes.values():
            for p in ni.pods.values():
                yield p, ni

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        aff_terms = _terms(pod, "podAffinity", "required")
        anti_terms = _terms(pod, "podAntiAffinity", "required")
        nodes = self._nodes()
        # The cache counts the pods with (anti-)affinity terms (NodeMap); a plain mapping is scanned.
        counted = getattr(nodes, "with_affinity", None)
        any_existing = bool(counted) if counted is not None else any(ni.with_affinity for ni in nodes.values())
        if not aff_terms and not anti_terms and not any_existing:
            return Status(Code.SKIP)
        ns_labels = self._namespace_labels()
        aff_domains: list[set[str]] = [set() for _ in aff_terms]
        anti_domains: list[set[str]] = [set() for _ in anti_terms]
        if aff_terms or anti_terms:
            for other, ni in self._candidates(nodes, aff_terms + anti_terms):
                if other.key == pod.key:
                    continue
                labels = ni.labels
                for i, t in enumerate(aff_terms):
                    v = labels.get(t.key)
                    if v is not None and t.matches(other, ns_labels):
                        aff_domains[i].add(v)
                for i, t in enumerate(anti_terms):
                    v = labels.get(t.key)
                    if v is not None and t.matches(other, ns_labels):
                        anti_domains[i].add(v)
        existing: set[tuple[str, str]] = set()  # (key, value) domains an existing pod's anti-affinity forbids
        if any_existing:  # only the nodes holding pods with terms
            own_ns = ns_labels(pod.namespace)

            def incoming_ns(_: str) -> Mapping[str, str]:
                return own_ns

            for ni in self._with_terms(nodes):
                labels = ni.labels
                for other in ni.pods.values():
                    if other.key == pod.key or not other.affinity.get("podAntiAffinity"):
                        continue
                    for t in _terms(other, "podAntiAffinity", "required"):
                        v = labels.get(t.key)
                        if v is not None and t.matches(pod, incoming_ns):
                            existing.add((t.key, v))
        # Upstream: if nothing in the cluster matches and the pod matches its own terms, it may go anywhere.
        self_ok = all(not d for d in aff_domains) and all(t.matches(pod, ns_labels) for t in aff_terms)
        state.write("InterPodAffinity", (aff_terms, aff_domains, anti_terms, anti_domains, existing, self_ok))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        aff_terms, aff_domains, anti_terms, anti_domains, existing, self_ok = state.read("InterPodAffinity")
        labels = node.labels
        for key, value in existing:
            if labels.get(key) == value:
                return Status(Code.UNSCHEDULABLE, self.ERR_EXISTING, plugin=self.name())
        for t, domains in zip(anti_terms, anti_domains, strict=True):
            v = labels.get(t.key)
            if v is not None and v in domains:
                return Status(Code.UNSCHEDULABLE, self.ERR_ANTI, plugin=self.name())
        if aff_terms and not self_ok:
            for t, domains in zip(aff_terms, aff_domains, strict=True):
                v = labels.get(t.key)
                if v is None or v not in domains:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_AFFINITY, plugin=self.name())
        elif aff_terms:
            for t in aff_terms:
                if t.key not in labels:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.ERR_AFFINITY, plugin=self.name())
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        pref_aff = _terms(pod, "podAffinity", "preferred")
        pref_anti = _terms(pod, "podAntiAffinity", "preferred")
        own = bool(pref_aff or pref_anti)
        if not own and self.ignore_existing_preferred:
            return Status(Code.SKIP)
        all_nodes = self._nodes()
        counted = getattr(all_nodes, "with_affinity", None)
        existing = counted is None or bool(counted)  # may an existing pod have terms?
        if not own and not existing:  # no pod anywhere has terms: nothing to score
            return Status(Code.SKIP)
        ns_labels = self._namespace_labels()
        topology: dict[str, dict[str, int]] = {}  # key -> value -> score, upstream's topologyScore

        def add(key: str, value: str, delta: int) -> None:
            per = topology.get(key)
            if per is None:
                per = topology[key] = {}
            per[value] = per.get(value, 0) + delta

        if own:  # the incoming pod's terms, over the pods they could match
            for other, ni in self._candidates(all_nodes, pref_aff + pref_anti):
                labels = ni.labels
                if not labels or other.key == pod.key:
                    continue
                for t in pref_aff:
                    v = labels.get(t.key)
                    if v is not None and t.matches(other, ns_labels):
                        add(t.key, v, t.weight)
                for t in pref_anti:
                    v = labels.get(t.key)
                    if v is not None and t.matches(other, ns_labels):
                        add(t.key, v, -t.weight)
        if existing:  # the existing pods' terms, over the nodes holding pods with terms
            own_ns = ns_labels(pod.namespace)

            def incoming_ns(_: str) -> Mapping[str, str]:
                return own_ns

            hard = self.hard_weight
            for ni in self._with_terms(all_nodes):
                labels = ni.labels
                if not labels:
                    continue
                for other in ni.pods.values():
                    if other.key == pod.key or not _has_terms(other):
                        continue
                    if hard > 0:
                        for t in _terms(other, "podAffinity", "required"):
                            v = labels.get(t.key)
                            if v is not None and t.matches(pod, incoming_ns):
                                add(t.key, v, hard)
                    for t in _terms(other, "podAffinity", "preferred"):
                        v = labels.get(t.key)
                        if v is not None and t.matches(pod, incoming_ns):
                            add(t.key, v, t.weight)
                    for t in _terms(other, "podAntiAffinity", "preferred"):
                        v = labels.get(t.key)
                        if v is not None and t.matches(pod, incoming_ns):
                            add(t.key, v, -t.weight)
        if not topology:
            return Status(Code.SKIP)
        state.write("InterPodAffinity/score", topology)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """Not normalized: the sum over the node's domains (negative where anti-affinity weighs more)."""
        return self.score_all(state, pod, (node,))[0]

    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        topology: dict[str, dict[str, int]] = state.read("InterPodAffinity/score")
        out = []
        for node in nodes:
            labels = node.labels
            total = 0
            for key, per in topology.items():
                v = labels.get(key)
                if v is not None:
                    total += per.get(v, 0)
            out.append(total)
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """``100 * (s - min) / (max - min)``, truncated as upstream's ``int64(float64)``; 0 for all when equal."""
        if not scores:
            return
        low, top = min(scores), max(scores)
        diff = top - low
        if diff <= 0:
            scores[:] = [0] * len(scores)
            return
        fdiff = float(diff)
        scores[:] = [int(float(MAX_NODE_SCORE) * (float(s - low) / fdiff)) for s in scores]

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("pods", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL),
            ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
        ]
