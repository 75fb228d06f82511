"""How many pods match a label selector, per node and per topology domain, kept as pods come and go.

PodTopologySpread asks, every cycle, how many pods of the incoming pod's namespace
match a selector on each node and in each domain of a topology key. Walking every
pod of every node for that costs O(pods) a cycle, a million at the scale this
project aims at. Instead the cache keeps, for each (namespace, selector) asked
about, an index of the count per node: built by one walk over the pods the first
time it is asked for (the cache's: over the pods of its namespace, which it keeps
by namespace), then updated by the cache on every pod it adds or removes.
Only the indexes of the pod's namespace that could match it are tested: each is
filed under one of its selector's equalities (``app=web``), found by the pod's
own labels, so a pod of a namespace that has none costs one dict lookup, and
one of a namespace with a thousand Deployments' indexes tests a few. The counts per domain of a topology key (a zone)
follow from the per-node counts and the nodes' labels; they are kept too, once
asked for, and moved when a node's labels change. An index unused for ``ttl``
seconds is dropped::

    counts = cache.nodes.pod_counts
    c = counts.get("default", selector_of({"matchLabels": {"app": "web"}}))
    c.nodes.get("n1", 0)                                  # matching pods on n1
    counts.domains(c, "topology.kubernetes.io/zone").get("z1", 0)

A pod counts as upstream's ``countPodsMatchSelector`` counts it: in the namespace,
on the node (bound or assumed), not terminating, its labels matching.

A selector is a sorted tuple of requirements ``(key, operator, values)``, ANDed;
equality is ``In`` with one value, and ``()`` matches every pod::

    >>> selector_of({"matchLabels": {"app": "web"}, "matchExpressions": [
    ...     {"key": "tier", "operator": "NotIn", "values": ["b", "a"]}]})
    (('app', 'In', ('web',)), ('tier', 'NotIn', ('a', 'b')))
    >>> selector_of(None) is None   # a constraint without labelSelector matches nothing
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .nodeinfo import NodeInfo, PodInfo

__all__ = ["PodCounts", "Requirement", "Selector", "SelectorCount", "matches", "selector_from_set", "selector_of"]

Requirement = tuple[str, str, tuple[str, ...]]
Selector = tuple[Requirement, ...]

# An index unused this long is dropped (seconds).
DEFAULT_TTL = 600.0


def selector_of(label_selector: Mapping[str, Any] | None) -> Selector | None:
    """A metav1.LabelSelector as a ``Selector``; None for None, which matches nothing."""
    if label_selector is None:
        return None
    reqs: set[Requirement] = {(k, "In", (str(v),)) for k, v in (label_selector.get("matchLabels") or {}).items()}
    for e in label_selector.get("matchExpressions") or ():
        reqs.add((e.get("key", ""), e.get("operator", ""), tuple(sorted(e.get("values") or ()))))
    return tuple(sorted(reqs))


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """A map selector (a Service's, a ReplicationController's) as a ``Selector``."""
    return tuple(sorted((k, "In", (v,)) for k, v in labels.items()))


def _requirement_matches(labels: Mapping[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values  # (an absent key is not in them)
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # validation rejects any other operator


def matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    return all(_requirement_matches(labels, k, op, vs) for k, op, vs in selector)


def _matcher(selector: Selector) -> Callable[[Mapping[str, str]], bool]:
    """``matches`` for one selector, with the common shape (equalities only) unrolled."""
    if all(op == "In" and len(vs) == 1 for _, op, vs in selector):
        pairs = tuple((k, vs[0]) for k, _, vs in selector)
        if len(pairs) == 1:
            (key, value), = pairs
            return lambda labels: labels.get(key) == value
        return lambda labels: all(labels.get(k) == v for k, v in pairs)
    return lambda labels: matches(selector, labels)


class SelectorCount:
    """One index: the pods of ``namespace`` matching ``selector``, counted per node
    (``nodes``: only nodes with at least one) and per domain of each topology key
    asked about (``domains``: key -> value -> count; nodes without the key are not in it)."""

    __slots__ = ("domains", "match", "namespace", "nodes", "pair", "selector", "used")

    def __init__(self, namespace: str, selector: Selector) -> None:
        self.namespace = namespace
        self.selector = selector
        self.match = _matcher(selector)
        # the equality it is filed under (a pod without that label cannot match); the last
        # in sorted order, which for a ReplicaSet's selector is its pod-template-hash
        equal = [(k, vs[0]) for k, op, vs in selector if op == "In" and len(vs) == 1]
        self.pair: tuple[str, str] | None = equal[-1] if equal else None
        self.nodes: dict[str, int] = {}
        self.domains: dict[str, dict[str, int]] = {}
        self.used = 0.0

    def add(self, node: NodeInfo, delta: int) -> None:
        name = node.name
        n = self.nodes.get(name, 0) + delta
        if n > 0:
            self.nodes[name] = n
        else:
            self.nodes.pop(name, None)
        if self.domains:
            labels = node.labels
            for key, counts in self.domains.items():
                value = labels.get(key)
                if value is not None:
                    _bump(counts, value, delta)

    def __repr__(self) -> str:
        return f"SelectorCount({self.namespace}, {self.selector}, {len(self.nodes)} nodes)"


def _bump(counts: dict[str, int], value: str, delta: int) -> None:
    n = counts.get(value, 0) + delta
    if n > 0:
        counts[value] = n
    else:
        counts.pop(value, None)


class PodCounts:
    """The indexes of one cache (see the module docstring). The cache calls ``pod_added``,
    ``pod_removed``, ``node_removed`` and ``node_relabeled`` on each change of its nodes;
    over a plain mapping of NodeInfos (no cache), a fresh ``PodCounts`` is a walk per
    ``get``, which is what a caller without a cache pays anyway."""

    def __init__(self, nodes: Mapping[str, NodeInfo], ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.monotonic, *, tracked: bool = False) -> None:
        self._nodes = nodes
        # tracked (the cache's, told of every pod from the start): namespace -> pod key ->
        # node name of its pods (terminating ones too), so that an index is built from its namespace's
        # pods, not from every pod (a thousand, not a million, for one of the million
        # run's ReplicaSets); about 40 bytes a pod. Untracked: a build walks every node.
        self._in_ns: dict[str, dict[str, str]] | None = {} if tracked else None
        self._by_ns: dict[str, dict[Selector, SelectorCount]] = {}
        # namespace -> equality -> the indexes filed under it (None: those without an equality)
        self._filed: dict[str, dict[tuple[str, str] | None, list[SelectorCount]]] = {}
        self.ttl = ttl
        self._clock = clock
        self._swept = clock()

    @property
    def active(self) -> bool:
        """Is any index kept? (if not, the cache's changes cost nothing here)"""
        return bool(self._by_ns)

    def __len__(self) -> int:
        return sum(len(d) for d in self._by_ns.values())

    def indexes(self) -> Iterable[SelectorCount]:
        for d in self._by_ns.values():
            yield from d.values()

    def get(self, namespace: str, selector: Selector) -> SelectorCount:
        """The index of (namespace, selector), built now if there is none."""
        now = self._clock()
        if now - self._swept > self.ttl / 2:
            self._sweep(now)
        in_ns = self._by_ns.get(namespace)
        c = in_ns.get(selector) if in_ns is not None else None
        if c is None:
            c = self._build(namespace, selector)
            self._by_ns.setdefault(namespace, {})[selector] = c
            self._filed.setdefault(namespace, {}).setdefault(c.pair, []).append(c)
        c.used = now
        return c

    def pods_of(self, namespace: str) -> list[tuple[PodInfo, NodeInfo]] | None:
        """The pods of ``namespace`` (terminating ones too) and their nodes, from the cache's
        record of them; None without one (untracked: the caller walks the nodes)."""
        if self._in_ns is None:
            return None
        nodes = self._nodes
        out = []
        for key, name in self._in_ns.get(namespace, {}).items():
            ni = nodes.get(name)
            if ni is None:
                continue
            p = ni.pods.get(key)
            if p is not None:
                out.append((p, ni))
        return out

    def domains(self, c: SelectorCount, key: str) -> dict[str, int]:
        """Topology value of ``key`` -> matching pods on the nodes that have that value."""
        counts = c.domains.get(key)
        if counts is None:
            counts = {}
            nodes = self._nodes
            for name, n in c.nodes.items():
                ni = nodes.get(name)
                value = ni.labels.get(key) if ni is not None else None
                if value is not None:
                    counts[value] = counts.get(value, 0) + n
            c.domains[key] = counts
        return counts

    def _build(self, namespace: str, selector: Selector) -> SelectorCount:
        c = SelectorCount(namespace, selector)
        match = c.match
        counts = c.nodes
        if self._in_ns is not None:
            nodes = self._nodes
            for key, name in self._in_ns.get(namespace, {}).items():
                ni = nodes.get(name)
                p = ni.pods.get(key) if ni is not None else None
                if p is not None and not p.terminating and match(p.labels):
                    counts[name] = counts.get(name, 0) + 1
            return c
        for ni in self._nodes.values():
            if not ni.pods:
                continue
            n = 0
            for p in ni.pods.values():
                if p.namespace == namespace and not p.terminating and match(p.labels):
                    n += 1
            if n:
                counts[ni.name] = n
        return c

    def _sweep(self, now: float) -> None:
        self._swept = now
        for ns, in_ns in list(self._by_ns.items()):
            filed = self._filed[ns]
            for sel, c in list(in_ns.items()):
                if now - c.used > self.ttl:
                    del in_ns[sel]
                    same = filed[c.pair]
                    same.remove(c)
                    if not same:
                        del filed[c.pair]
            if not in_ns:
                del self._by_ns[ns]
                del self._filed[ns]

    # ---------------------------------------------------------------- the cache's changes

    def pod_added(self, pod: PodInfo, node: NodeInfo) -> None:
        if self._in_ns is not None:  # terminating ones too (InterPodAffinity counts them; a build skips them)
            in_ns = self._in_ns.get(pod.namespace)
            if in_ns is None:
                in_ns = self._in_ns[pod.namespace] = {}
            in_ns[pod.key] = node.name
        if pod.terminating:
            return
        filed = self._filed.get(pod.namespace)
        if filed is not None:
            self._count(filed, pod.labels, node, 1)

    def pod_removed(self, pod: PodInfo, node: NodeInfo) -> None:
        """``pod``: the PodInfo that was added (its labels then), not a newer one."""
        if self._in_ns is not None:
            self._forget(pod, node.name)
        if pod.terminating:
            return
        filed = self._filed.get(pod.namespace)
        if filed is not None:
            self._count(filed, pod.labels, node, -1)

    def _forget(self, pod: PodInfo, node: str) -> None:
        assert self._in_ns is not None
        in_ns = self._in_ns.get(pod.namespace)
        if in_ns is not None and in_ns.get(pod.key) == node:
            del in_ns[pod.key]
            if not in_ns:
                del self._in_ns[pod.namespace]

    @staticmethod
    def _count(filed: Mapping[tuple[str, str] | None, list[SelectorCount]], labels: Mapping[str, str],
               node: NodeInfo, delta: int) -> None:
        for c in filed.get(None, ()):
            if c.match(labels):
                c.add(node, delta)
        for pair in labels.items():
            for c in filed.get(pair, ()):
                if c.match(labels):
                    c.add(node, delta)

    def node_removed(self, node: NodeInfo) -> None:
        """The node left the cache (its pods are no longer counted)."""
        if self._in_ns is not None:
            for p in node.pods.values():
                self._forget(p, node.name)
        if not self._by_ns:
            return
        name = node.name
        for c in self.indexes():
            n = c.nodes.get(name)
            if n:
                c.add(node, -n)

    def node_relabeled(self, node: NodeInfo, old: Mapping[str, str]) -> None:
        """``node``'s labels changed from ``old``: its pods move between domains."""
        if not self._by_ns:
            return
        new = node.labels
        for c in self.indexes():
            n = c.nodes.get(node.name)
            if not n:
                continue
            for key, counts in c.domains.items():
                before, after = old.get(key), new.get(key)
                if before == after:
                    continue
                if before is not None:
                    _bump(counts, before, -n)
                if after is not None:
                    _bump(counts, after, n)
