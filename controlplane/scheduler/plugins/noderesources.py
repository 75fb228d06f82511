"""NodeResourcesFit: does the node have room for the pod's requests; how full would it be.
NodeResourcesBalancedAllocation: would the node's resources be used evenly.

The pod's requests are summed once, when it enters the scheduler
(``PodInfo.req_items``), not per cycle or node; Filter compares them to ``allocatable - requested``; Score is
LeastAllocated (spread, the default) or MostAllocated (bin-pack) over the
configured resources (default cpu and memory, weight 1 each; extended resources
such as ``nvidia.com/gpu`` may be listed too).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..columns import FeasibleNodes, NodeColumns
from ..framework import MAX_NODE_SCORE, ActionType, ClusterEvent, Code, CycleState, Handle, Status
from ..nodeinfo import NodeInfo, PodInfo

__all__ = ["NodeResourcesBalancedAllocation", "NodeResourcesFit", "balanced_score", "fit_status", "insufficient"]

NAME = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
# resources upstream's resource allocation scorers read from the node's own fields; any
# other (an extended resource, hugepages) is scored only when the pod requests it
_NATIVE = ("cpu", "memory", "ephemeral-storage")


def insufficient(pod: PodInfo, node: NodeInfo, dra_backed: Callable[[str], bool] | None = None) -> list[str]:
    """The upstream reasons ``pod`` does not fit ``node`` by resources ([] if it fits).
    ``dra_backed``: whether a DeviceClass backs an extended resource (left to DRA on a
    node that has none of it)."""
    alloc, req = node.allocatable, node.requested
    out = []
    for name, amount in pod.requests.items():
        have = alloc.get(name, 0)
        if have - req.get(name, 0) < amount and not (have == 0 and dra_backed is not None and dra_backed(name)):
            out.append("Too many pods" if name == "pods" else f"Insufficient {name}")
    return out


def fit_status(pod: PodInfo, node: NodeInfo, dra_backed: Callable[[str], bool] | None = None) -> Status | None:
    """NodeResourcesFit's verdict on ``node``: None if the pod fits, else its reasons,
    UNSCHEDULABLE_AND_UNRESOLVABLE when the pod requests more of a resource than the node
    has allocatable at all (it would not fit there empty: evicting cannot help), as
    upstream's ``InsufficientResource.Unresolvable``; "Too many pods" stays resolvable."""
    reasons = insufficient(pod, node, dra_backed)
    if not reasons:
        return None
    alloc = node.allocatable
    beyond = any(name != "pods" and amount > alloc.get(name, 0) and f"Insufficient {name}" in reasons
                 for name, amount in pod.req_items)
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if beyond else Code.UNSCHEDULABLE, *reasons, plugin=NAME)


def _pod_left_node(pod: PodInfo, old: Any, new: Any) -> bool:
    return True


class NodeResourcesFit:
    def __init__(self, strategy: str = "LeastAllocated", resources: list[Mapping[str, Any]] | None = None) -> None:
        if strategy not in ("LeastAllocated", "MostAllocated"):
            raise ValueError(f"unknown scoring strategy {strategy!r}")
        self.most = strategy == "MostAllocated"
        res = resources or [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        self.resources = [(str(r["name"]), int(r.get("weight", 1))) for r in res]
        self.default = [n for n, _ in self.resources] == ["cpu", "memory"] and all(w == 1 for _, w in self.resources)
        self.handle: Handle | None = None

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> NodeResourcesFit:
        strategy = args.get("scoringStrategy") or {}
        fit = cls(strategy.get("type", "LeastAllocated"), strategy.get("resources"))
        fit.handle = handle
        return fit

    def name(self) -> str:
        return NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        # The pod's requests were summed once, when the pod entered the scheduler (PodInfo.req_items):
        # upstream computes them in PreFilter, once per cycle; here not even that is repeated.
        alloc, req = node.allocatable, node.requested
        for name, amount in pod.req_items:
            if alloc.get(name, 0) - req.get(name, 0) < amount:
                return fit_status(pod, node, self.dra_backed)
        return None

    def dra_backed(self, resource: str) -> bool:
        """Is ``resource`` an extended resource a DeviceClass backs (KEP-5004)? Then a node
        offering none of it is left to DynamicResources, as upstream's fit check skips it."""
        profile = getattr(self.handle, "profile", None)  # (a test's handle may have none)
        manager = getattr(profile().get("DynamicResources"), "manager", None) if profile is not None else None
        if manager is not None:
            return manager.extended_names.class_for(resource) is not None
        # a profile without the DRA plugin (the autoscaler's judgement of its nodes): the handle's say
        backed = getattr(self.handle, "dra_backed", None)
        return bool(backed(resource)) if backed is not None else False

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        alloc = node.allocatable
        if self.default:
            cap_c = alloc.get("cpu", 0)
            cap_m = alloc.get("memory", 0)
            used_c = node.nonzero_cpu + pod.nonzero_cpu
            used_m = node.nonzero_mem + pod.nonzero_mem
            if self.most:
                sc = used_c * MAX_NODE_SCORE // cap_c if cap_c and used_c <= cap_c else 0
                sm = used_m * MAX_NODE_SCORE // cap_m if cap_m and used_m <= cap_m else 0
            else:
                sc = (cap_c - used_c) * MAX_NODE_SCORE // cap_c if cap_c and used_c <= cap_c else 0
                sm = (cap_m - used_m) * MAX_NODE_SCORE // cap_m if cap_m and used_m <= cap_m else 0
            return (sc + sm) // 2
        total = weights = 0
        for name, weight in self.resources:
            cap = alloc.get(name, 0)
            if name == "cpu":
                used = node.nonzero_cpu + pod.nonzero_cpu
            elif name == "memory":
                used = node.nonzero_mem + pod.nonzero_mem
            else:
                want = pod.requests.get(name, 0)
                if not want:
                    continue  # upstream skips an extended resource the pod does not request
                used = node.requested.get(name, 0) + want
            if not cap or used > cap:
                s = 0
            elif self.most:
                s = used * MAX_NODE_SCORE // cap
            else:
                s = (cap - used) * MAX_NODE_SCORE // cap
            total += s * weight
            weights += weight
        return total // weights if weights else 0

    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """``score`` of each node; over the cache's columns (the feasible rows of a cycle that
        took them) as one array operation for the default resources."""
        if self.default and isinstance(nodes, FeasibleNodes):
            columns: NodeColumns | None = getattr(nodes.nodes, "columns", None)
            if columns is not None:
                columns.refresh()
                return cast(list[int], columns.allocated_scores(nodes.rows, pod.nonzero_cpu, pod.nonzero_mem,
                                                                self.most).tolist())
        return [self.score(state, pod, n) for n in nodes]

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
            ClusterEvent("pods", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        ]


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """Upstream's ``balancedResourceScorer``: ``(1 - std) * 100`` truncated, where ``std`` is the
    standard deviation of each resource's ``requested / allocatable`` (capped at 1), over the
    resources with an allocatable; for two of them ``|f1 - f2| / 2``. Floats as Go's float64::

        >>> balanced_score([1000, 2 * 2**30], [4000, 8 * 2**30]), balanced_score([3000, 2**30], [4000, 8 * 2**30])
        (100, 68)
    """
    fractions = []
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        f = float(req) / float(alloc)
        fractions.append(1.0 if f > 1 else f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


class NodeResourcesBalancedAllocation:
    """Upstream's NodeResourcesBalancedAllocation (score weight 1): favours the nodes whose
    resources (args ``resources``, default cpu and memory) would be used in the most even
    proportions with the pod on them (``balanced_score``). It reads what pods request, not
    the non-zero defaults: a node's requested plus the pod's own requests, over its
    allocatable; a resource the node has none of is left out, and so is an extended resource
    the pod does not request. A pod requesting none of the resources (best effort) is not
    scored at all (PreScore's SKIP, as upstream's since 1.33: else such pods would pile onto
    one node). For cpu and memory over the cache's columns, ``score_all`` is one array
    operation (``NodeColumns.balanced_scores``)."""

    def __init__(self, resources: list[Mapping[str, Any]] | None = None) -> None:
        res = resources or [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        self.resources = [str(r["name"]) for r in res]
        self.default = self.resources == ["cpu", "memory"]

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> NodeResourcesBalancedAllocation:
        return cls(args.get("resources"))

    def name(self) -> str:
        return BALANCED

    def _pod_requests(self, pod: PodInfo) -> list[int]:
        return [pod.requests.get(r, 0) for r in self.resources]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        wants = self._pod_requests(pod)
        if not any(wants):
            return Status(Code.SKIP)
        state.write(BALANCED, wants)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        wants = state.get(BALANCED)
        if wants is None:
            wants = self._pod_requests(pod)
        alloc, req = node.allocatable, node.requested
        requested, allocatable = [], []
        for name, want in zip(self.resources, wants, strict=True):
            if name not in _NATIVE and (not want or name not in alloc or name == "pods"):
                continue  # as upstream: (0, 0), left out (``pods`` is no scalar resource: never scored)
            cap = alloc.get(name, 0)
            if not cap:
                continue
            allocatable.append(cap)
            requested.append(req.get(name, 0) + want)
        return balanced_score(requested, allocatable)

    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """``score`` of each node; over the cache's columns for cpu and memory."""
        if self.default and isinstance(nodes, FeasibleNodes):
            columns: NodeColumns | None = getattr(nodes.nodes, "columns", None)
            if columns is not None:
                columns.refresh()
                return cast(list[int], columns.balanced_scores(nodes.rows, pod.req_cpu, pod.req_mem).tolist())
        return [self.score(state, pod, n) for n in nodes]
