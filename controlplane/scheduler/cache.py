"""The scheduler's cache: nodes, the pods on them, and assumed pods.

A pod is *assumed* when the scheduling cycle reserves a node for it: it counts
against that node at once, before its binding is written, so the next cycle
(which does not wait for the binding) sees the room taken. When the binding's
watch event arrives the pod is *confirmed* (``add_pod`` of a bound pod that was
assumed on the same node changes nothing); when binding fails it is
``forget``-ten. Pods bound to nodes the cache does not know yet are kept aside
and counted when the node arrives.

``order`` lists the nodes in a stable order for the round-robin start of each
cycle's sampling (upstream's ``nextStartNodeIndex``); ``order.columns`` holds
their free resources as arrays in the same order (``columns.py``).

``counts`` (also ``nodes.pod_counts``, where PodTopologySpread finds it) counts the
pods matching the selectors asked about per node (``podcounts.py``): every pod the
cache adds to a node or removes from one goes through it.
"""

from __future__ import annotations

from typing import Any

from .columns import NodeOrder
from .nodeinfo import NodeInfo, PodInfo
from .podcounts import PodCounts

__all__ = ["Cache"]


class NodeMap(dict[str, NodeInfo]):
    """The cache's nodes by name, and how many of their pods carry pod (anti-)affinity
    terms (``with_affinity``), so InterPodAffinity skips its walk when none do, and which
    nodes hold such pods (``affinity_nodes``, kept by a cache; None outside one), so the
    walk for a pod without terms of its own visits those nodes only (upstream's
    ``HavePodsWithAffinityList``).
    ``version`` grows whenever a node is added, changed or removed (not when pods move):
    what is derived from the nodes alone (a gang's topology domains) is kept until it grows."""

    with_affinity = 0
    version = 0
    pod_counts: PodCounts | None = None  # the cache's (a NodeMap outside a cache has none)
    affinity_nodes: set[str] | None = None


def _has_terms(pod: PodInfo) -> bool:
    return bool(pod.affinity and (pod.affinity.get("podAffinity") or pod.affinity.get("podAntiAffinity")))


class Cache:
    def __init__(self) -> None:
        self.nodes = NodeMap()
        self.order = NodeOrder()
        self._index: dict[str, int] = {}
        self.pod_node: dict[str, str] = {}  # pod key -> node name, bound and assumed
        self.assumed: set[str] = set()
        self._orphans: dict[str, dict[str, PodInfo]] = {}  # node name -> pods bound there before the node arrived
        self.counts = PodCounts(self.nodes, tracked=True)
        self.nodes.pod_counts = self.counts
        self.nodes.affinity_nodes = set()

    def _affinity_moved(self, pod: PodInfo, ni: NodeInfo, delta: int) -> None:
        """``pod`` came to ``ni`` (+1) or left it (-1): if it carries pod (anti-)affinity terms, the
        count of such pods and the index of the nodes holding them follow (``ni`` counted it)."""
        if not _has_terms(pod):
            return
        self.nodes.with_affinity += delta
        index = self.nodes.affinity_nodes
        assert index is not None
        if ni.with_affinity > 0:
            index.add(ni.name)
        else:
            index.discard(ni.name)

    # ---------------------------------------------------------------- nodes

    def add_or_update_node(self, node: dict[str, Any]) -> NodeInfo:
        name = str((node.get("metadata") or {}).get("name"))
        self.nodes.version += 1
        ni = self.nodes.get(name)
        if ni is None:
            ni = NodeInfo(name, node)
            self.nodes[name] = ni
            self._index[name] = len(self.order)
            self.order.append(ni)
            self.order.columns.append(ni)
            for pod in self._orphans.pop(name, {}).values():
                ni.add_pod(pod)
                self._affinity_moved(pod, ni, 1)
                self.counts.pod_added(pod, ni)
        else:
            old = ni.labels
            ni.set_node(node)
            if self.counts.active and ni.labels != old:
                self.counts.node_relabeled(ni, old)
        return ni

    def remove_node(self, name: str) -> None:
        ni = self.nodes.pop(name, None)
        if ni is None:
            return
        self.nodes.version += 1
        i = self._index.pop(name)
        self.order.columns.remove(ni, self.order[-1])
        last = self.order.pop()
        if last is not ni:  # swap-remove keeps removal O(1)
            self.order[i] = last
            self._index[last.name] = i
        self.counts.node_removed(ni)
        if ni.pods:
            self._orphans[name] = dict(ni.pods)
            self.nodes.with_affinity -= ni.with_affinity
        assert self.nodes.affinity_nodes is not None
        self.nodes.affinity_nodes.discard(name)

    # ---------------------------------------------------------------- pods

    def add_pod(self, pod: PodInfo) -> None:
        """A pod bound to ``pod.node_name`` (from a watch event)."""
        node = pod.node_name
        prev = self.pod_node.get(pod.key)
        if prev is not None and prev != node:
            self._remove_from(prev, pod.key)
        self.assumed.discard(pod.key)
        self.pod_node[pod.key] = node
        ni = self.nodes.get(node)
        if ni is None:
            self._orphans.setdefault(node, {})[pod.key] = pod
        else:
            self._remove_from(node, pod.key)  # an update of a pod already here
            ni.add_pod(pod)
            self._affinity_moved(pod, ni, 1)
            self.counts.pod_added(pod, ni)

    def remove_pod(self, key: str) -> None:
        node = self.pod_node.pop(key, None)
        self.assumed.discard(key)
        if node is not None:
            self._remove_from(node, key)

    def _remove_from(self, node: str, key: str) -> None:
        ni = self.nodes.get(node)
        if ni is not None:
            held = ni.pods.get(key)
            if held is not None:
                ni.remove_pod(held)
                self._affinity_moved(held, ni, -1)
                self.counts.pod_removed(held, ni)
        else:
            orphans = self._orphans.get(node)
            if orphans is not None:
                orphans.pop(key, None)

    def assume(self, pod: PodInfo, node: str) -> None:
        """Count ``pod`` on ``node`` before its binding is written."""
        self.assumed.add(pod.key)
        self.pod_node[pod.key] = node
        ni = self.nodes[node]
        ni.add_pod(pod)
        self._affinity_moved(pod, ni, 1)
        self.counts.pod_added(pod, ni)

    def forget(self, pod: PodInfo) -> None:
        """Undo ``assume`` (binding failed, or a reservation was released)."""
        if pod.key in self.assumed:
            self.remove_pod(pod.key)

    def is_assumed(self, key: str) -> bool:
        return key in self.assumed

    def node_of(self, key: str) -> str | None:
        return self.pod_node.get(key)
