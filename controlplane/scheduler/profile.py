"""A profile: the instantiated plugins of each extension point, and the pure parts of a cycle.

``Profile`` runs PreFilter, Filter (with upstream's sampling), PreScore and
Score over NodeInfos. It does no I/O and needs no running scheduler, which is
what ``feasible_nodes`` (for the autoscaler) and the gang's topology choice
build on::

    profile = Profile.build(handle)            # the default plugins
    ok, why = profile.feasible_nodes(PodInfo(pod), [NodeInfo("n1", node)])
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from .columns import FeasibleNodes, Ints, NodeColumns
from .framework import (
    MAX_NODE_SCORE,
    BatchScorer,
    BindPlugin,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    Registry,
    ReservePlugin,
    RowsFilterPlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
    WatchesResources,
    num_feasible_nodes_to_find,
)
from .nodeinfo import NodeInfo, PodInfo
from .plugins import PluginConfig, default_profile, default_registry
from .plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit, fit_status
from .plugins.nodes import NodeUnschedulable, TaintToleration

# Filter plugins that pass every node that has no taints and is not cordoned (see ``place``).
_PLAIN_NODE_NOOP = (NodeUnschedulable, TaintToleration)
# From how many nodes the columns (numpy) path pays off over the per-node loop.
_COLUMNS_FROM = 256

__all__ = ["NO_NODES_AVAILABLE", "FitError", "Profile"]

# upstream's ErrNoNodesAvailable: a cluster without a node fails every pod with it, before
# PreFilter and without preemption (the first thing `kubectl describe pod` shows on a new cluster)
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass
class FitError:
    """Why no node fits: node name -> Status, over the ``num_nodes`` considered."""

    num_nodes: int
    statuses: dict[str, Status] = field(default_factory=dict)
    pre_filter: Status | None = None

    def rejectors(self) -> set[str]:
        if self.pre_filter is not None:
            return {self.pre_filter.plugin}
        return {s.plugin for s in self.statuses.values()}

    def message(self) -> str:
        """Upstream's ``FitError.Error()``: "0/5 nodes are available: 2 Insufficient cpu, 3 ...";
        with no node at all, its ``ErrNoNodesAvailable``."""
        if self.num_nodes == 0 and self.pre_filter is None:
            return NO_NODES_AVAILABLE
        if self.pre_filter is not None:
            return f"0/{self.num_nodes} nodes are available: {self.pre_filter.message}."
        counts: dict[str, int] = {}
        for s in self.statuses.values():
            for r in s.reasons:
                counts[r] = counts.get(r, 0) + 1
        parts = sorted(f"{n} {r}" for r, n in counts.items())
        return f"0/{self.num_nodes} nodes are available: {', '.join(parts)}."


def _restricted(nodes: Sequence[NodeInfo], names: Set[str]) -> list[NodeInfo]:
    """The nodes named (a PreFilter's restriction, a gang's domain), in ``nodes``' order:
    looked up by name when ``nodes`` is the cache's order and the names are few (a
    domain of 100 among 5,000 nodes), as upstream takes PreFilterResult's nodes from
    its snapshot, instead of a walk over every node."""
    columns: NodeColumns | None = getattr(nodes, "columns", None)
    if columns is not None and len(names) * 8 < len(nodes):
        row = columns.row
        return [nodes[i] for i in sorted(r for r in map(row.get, names) if r is not None)]
    return [n for n in nodes if n.name in names]


class Profile:
    def __init__(self, plugins: Sequence[tuple[Plugin, int]], percentage: int = 0) -> None:
        self.plugins = [p for p, _ in plugins]
        self.percentage = percentage
        self.pre_enqueue = [p for p in self.plugins if isinstance(p, PreEnqueuePlugin)]
        self.pre_filter = [p for p in self.plugins if isinstance(p, PreFilterPlugin)]
        self.filter = [p for p in self.plugins if isinstance(p, FilterPlugin)]
        self.post_filter = [p for p in self.plugins if isinstance(p, PostFilterPlugin)]
        self.pre_score = [p for p in self.plugins if isinstance(p, PreScorePlugin)]
        self.score = [(p, w) for p, w in plugins if isinstance(p, ScorePlugin) and w > 0]
        self.reserve = [p for p in self.plugins if isinstance(p, ReservePlugin)]
        self.permit = [p for p in self.plugins if isinstance(p, PermitPlugin)]
        self.pre_bind = [p for p in self.plugins if isinstance(p, PreBindPlugin)]
        self.bind = [p for p in self.plugins if isinstance(p, BindPlugin)]
        self.events = {p.name(): p.events_to_register() for p in self.plugins if isinstance(p, EnqueueExtensions)}
        self.watches = [w for p in self.plugins if isinstance(p, WatchesResources) for w in p.resources_to_watch()]
        # The optional interfaces, found once: a runtime Protocol check walks the protocol's
        # members on every call (~10 µs; it was 4% of a DRA scheduling cycle).
        self._rows_filters = {id(p) for p in self.filter if isinstance(p, RowsFilterPlugin)}
        self._normalizers = {id(p) for p, _ in self.score if isinstance(p, ScoreNormalizer)}
        self._batch_scorers = {id(p) for p, _ in self.score if isinstance(p, BatchScorer)}
        self._next_start = 0
        self._rand = random.Random(0)
        fit = self.get("NodeResourcesFit")
        self._fit = fit if isinstance(fit, NodeResourcesFit) else None
        self._fit_weight = next((w for p, w in self.score if p is fit), 0)
        # NodeResourcesBalancedAllocation over cpu and memory: the columns (and the unrolled
        # loop) score it beside NodeResourcesFit, so a pod with requests stays on them
        bal = next((p for p, _ in self.score if isinstance(p, NodeResourcesBalancedAllocation) and p.default), None)
        self._balanced = bal
        self._balanced_weight = next((w for p, w in self.score if p is bal), 0)

    @classmethod
    def build(cls, handle: Handle, registry: Registry | None = None, config: Sequence[PluginConfig] | None = None,
              percentage: int = 0) -> Profile:
        registry = registry or default_registry()
        config = config if config is not None else default_profile(registry)
        return cls([(registry.build(c.name, handle, c.args), c.weight) for c in config], percentage)

    def get(self, name: str) -> Plugin | None:
        return next((p for p in self.plugins if p.name() == name), None)

    # ---------------------------------------------------------------- the scheduling cycle's pure part

    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        for p in self.pre_filter:
            s = p.pre_filter(state, pod)
            if s is None:
                continue
            name = p.name()
            if s.code == Code.SKIP:
                state.skip_filter.add(name)
                continue
            s.plugin = s.plugin or name
            return s
        return None

    def filters_for(self, state: CycleState) -> list[FilterPlugin]:
        skip = state.skip_filter
        return [p for p in self.filter if p.name() not in skip] if skip else list(self.filter)

    @staticmethod
    def run_filters(filters: Sequence[FilterPlugin], state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for p in filters:
            s = p.filter(state, pod, node)
            if s is not None:
                return s
        return None

    def find_feasible(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                      extra: Mapping[str, Sequence[PodInfo]] | None = None,
                      sample: bool = True) -> tuple[list[NodeInfo], dict[str, Status]]:
        """Filter ``nodes`` (after PreFilter ran on ``state``), starting where the last
        cycle stopped and stopping after ``num_feasible_nodes_to_find`` feasible ones
        (``sample=False``: all). ``extra``: node name -> pods to count as if on it
        (nominated pods of at least the pod's priority, as upstream)."""
        filters = self.filters_for(state)
        n = len(nodes)
        if not n:
            return [], {}
        want = num_feasible_nodes_to_find(n, self.percentage) if sample else n
        feasible: list[NodeInfo] = []
        failed: dict[str, Status] = {}
        start = self._next_start % n
        processed = 0
        for i in range(n):
            node = nodes[(start + i) % n]
            processed += 1
            if extra and node.name in extra:
                view = node.clone()
                for other in extra[node.name]:
                    view.add_pod(other)
                s = self.run_filters(filters, state, pod, view)
            else:
                s = None
                for p in filters:
                    s = p.filter(state, pod, node)
                    if s is not None:
                        break
            if s is None:
                feasible.append(node)
                if len(feasible) >= want:
                    break
            else:
                s.plugin = s.plugin or "?"
                failed[node.name] = s
        if sample:
            self._next_start = (start + processed) % n
        return feasible, failed

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        for p in self.pre_score:
            s = p.pre_score(state, pod, nodes)
            if s is None:
                continue
            if s.code == Code.SKIP:
                state.skip_score.add(p.name())
                continue
            return s
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted total score per node (same order as ``nodes``)."""
        totals = np.zeros(len(nodes), dtype=np.int64)
        skip = state.skip_score
        for p, weight in self.score:
            if skip and p.name() in skip:
                continue
            if id(p) in self._batch_scorers:
                scores = cast(BatchScorer, p).score_all(state, pod, nodes)
            else:
                scores = [p.score(state, pod, node) for node in nodes]
            if id(p) in self._normalizers:
                cast(ScoreNormalizer, p).normalize_scores(state, pod, scores)
            totals += np.clip(np.asarray(scores, dtype=np.int64), 0, MAX_NODE_SCORE) * weight
        out: list[int] = totals.tolist()
        return out

    def select_host(self, nodes: Sequence[NodeInfo], scores: list[int]) -> NodeInfo:
        """The best-scoring node; ties broken at random (as upstream)."""
        best = max(scores)
        ties = [i for i, s in enumerate(scores) if s == best]
        return nodes[ties[0] if len(ties) == 1 else ties[self._rand.randrange(len(ties))]]

    def place(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
              extra: Mapping[str, Sequence[PodInfo]] | None = None) -> tuple[NodeInfo | None, FitError | None]:
        """PreFilter, Filter, PreScore, Score over ``nodes``: the chosen node or why none fits
        (with no node at all, none runs: upstream's ``ErrNoNodesAvailable``)."""
        if not nodes:
            return None, FitError(0)
        s = self.run_pre_filter(state, pod)
        if s is not None:
            return None, FitError(len(nodes), pre_filter=s)
        if state.node_names is not None:
            nodes = _restricted(nodes, state.node_names)
        filters = self.filters_for(state)
        # Filters other than NodeResourcesFit and those that pass a plain node (no taints, not
        # cordoned): the columns path runs them on the nodes whose resources fit, in order.
        after = [f for f in filters if not (type(f) in _PLAIN_NODE_NOOP or f is self._fit)]
        fast = extra is None and self._fit is not None and not after
        rows: Ints | None = None
        columns: NodeColumns | None = None
        feasible: Sequence[NodeInfo]
        failed: dict[str, Status] = {}
        if extra is None and self._fit is not None:
            columns = getattr(nodes, "columns", None)
            if columns is not None and not pod.req_other and len(nodes) >= _COLUMNS_FROM:
                rows = self._find_feasible_columns(columns, state, pod, nodes, filters, after)
            if rows is not None and columns is not None:
                if not len(rows):  # why each node failed, for the FitError: the per-node path
                    rows = None
                else:
                    untainted = not columns.not_plain or bool(columns.plain[rows].all())
                    feasible = FeasibleNodes(nodes, rows, untainted)
        if rows is None:
            if fast:
                feasible, failed = self._find_feasible_resources(state, pod, nodes, filters)
            else:
                feasible, failed = self.find_feasible(state, pod, nodes, extra)
        if not feasible:
            return None, FitError(len(nodes), failed)
        if len(feasible) == 1:
            return feasible[0], None
        self.run_pre_score(state, pod, feasible)
        if (fast or rows is not None) and self._only_default_fit_scores(state):
            balanced = self._balanced is not None and self._balanced.name() not in state.skip_score
            if rows is not None and columns is not None:
                assert self._fit is not None
                vscores = columns.allocated_scores(rows, pod.nonzero_cpu, pod.nonzero_mem, self._fit.most)
                if balanced:  # alone, NodeResourcesFit's weight (> 0) does not change which node is best
                    vscores = vscores * self._fit_weight + self._balanced_weight * columns.balanced_scores(
                        rows, pod.req_cpu, pod.req_mem)
                best = np.flatnonzero(vscores == vscores.max())
                pick = int(best[0]) if len(best) == 1 else int(best[self._rand.randrange(len(best))])
                return feasible[pick], None
            scores = self._least_or_most_allocated(pod, feasible, balanced)
        else:
            scores = self.score_nodes(state, pod, feasible)
        return self.select_host(feasible, scores), None

    # ---------------------------------------------------------------- the common case, unrolled
    #
    # Most pods at scale request resources and nothing else. When the Filter plugins left
    # after PreFilter are NodeResourcesFit and plugins that cannot reject a node without
    # taints that is not cordoned (NodeUnschedulable, TaintToleration), the loop below
    # checks requests inline for such nodes, and runs the plugins for the others: the same
    # verdicts as ``find_feasible``, without three calls per node. Likewise scoring when
    # NodeResourcesFit (cpu and memory, weight 1) is the only scorer left after PreScore.

    def _find_feasible_resources(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                                 filters: list[FilterPlugin]) -> tuple[list[NodeInfo], dict[str, Status]]:
        """The feasible nodes, and why each node failed when none is (the FitError's
        reasons; with feasible nodes, the failures are not all reported)."""
        n = len(nodes)
        if not n:
            return [], {}
        want = num_feasible_nodes_to_find(n, self.percentage)
        start = self._next_start % n
        cpu, mem, other = pod.req_cpu, pod.req_mem, pod.req_other
        # one extended resource (a GPU pod's nvidia.com/gpu): checked without a generator
        one_other = other[0] if len(other) == 1 else None
        feasible: list[NodeInfo] = []
        failed: dict[str, Status] = {}
        short: list[NodeInfo] = []  # nodes without room: their Status is only needed if none fits
        processed = 0
        for node in itertools.chain(itertools.islice(nodes, start, None), itertools.islice(nodes, 0, start)):
            processed += 1
            if node.unschedulable or node.taints:
                s = self.run_filters(filters, state, pod, node)
                if s is None:
                    feasible.append(node)
                    if len(feasible) >= want:
                        break
                else:
                    failed[node.name] = s
                continue
            # as NodeResourcesFit.filter: a resource the pod does not request is not checked
            if (cpu and node.free_cpu < cpu) or (mem and node.free_mem < mem) or node.free_pods < 1:
                short.append(node)
                continue
            if one_other is not None:
                k, v = one_other
                if node.allocatable.get(k, 0) - node.requested.get(k, 0) < v:
                    short.append(node)
                    continue
            elif other and any(node.allocatable.get(k, 0) - node.requested.get(k, 0) < v for k, v in other):
                short.append(node)
                continue
            feasible.append(node)
            if len(feasible) >= want:
                break
        self._next_start = (start + processed) % n
        if not feasible:
            for node in short:
                fit = fit_status(pod, node)
                if fit is not None:
                    failed[node.name] = fit
        return feasible, failed

    def _find_feasible_columns(self, columns: NodeColumns, state: CycleState, pod: PodInfo,
                               nodes: Sequence[NodeInfo], filters: list[FilterPlugin],
                               after: Sequence[FilterPlugin] = ()) -> Ints | None:
        """``_find_feasible_resources`` over ``columns``: the rows of the feasible nodes, in
        the order the per-node walk would find them, or None where that walk must run
        (more tainted or cordoned nodes than it is worth running the plugins on apart).
        ``after``: the other Filter plugins (DynamicResources...), run in the walk's order
        on the plain nodes whose resources fit, until enough are feasible; a tainted or
        cordoned node goes through every plugin, as in the walk."""
        columns.refresh()
        n = columns.size
        want = num_feasible_nodes_to_find(n, self.percentage)
        special: dict[int, bool] = {}
        if columns.not_plain:
            if columns.not_plain > want:
                return None
            for i in np.flatnonzero(~columns.plain[:n]).tolist():
                special[i] = self.run_filters(filters, state, pod, nodes[i]) is None
        start = self._next_start % n
        cpu, mem = pod.req_cpu, pod.req_mem
        found: list[Ints] = []
        count = 0
        processed = n
        for a, b in columns.windows(start, max(2 * want, 1024)):
            ok = columns.fits(a, b, cpu, mem)
            for i, fits in special.items():
                if a <= i < b:
                    ok[i - a] = fits
            hit = np.flatnonzero(ok)
            if after:
                hit = self._run_after(after, state, pod, nodes, hit, a, special, want - count)
            if count + len(hit) >= want:
                hit = hit[: want - count]
                found.append(hit + a)
                processed = (int(hit[-1]) + a - start) % n + 1
                break
            found.append(hit + a)
            count += len(hit)
        self._next_start = (start + processed) % n
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    def _run_after(self, after: Sequence[FilterPlugin], state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                   hit: Ints, base: int, special: Mapping[int, bool], wanted: int) -> Ints:
        """The offsets in ``hit`` (rows ``base + offset``) that ``after`` passes, stopping
        once ``wanted`` are found (the walk stops there too)."""
        if len(after) == 1 and not special and id(after[0]) in self._rows_filters:
            return cast(RowsFilterPlugin, after[0]).filter_rows(state, pod, nodes, hit + base, wanted) - base
        keep: list[int] = []
        for j in hit.tolist():
            i = base + j
            if i in special or all(f.filter(state, pod, nodes[i]) is None for f in after):
                keep.append(j)
                if len(keep) >= wanted:
                    break
        return np.asarray(keep, dtype=np.int64)

    def _only_default_fit_scores(self, state: CycleState) -> bool:
        """Are the scorers left after PreScore NodeResourcesFit (cpu and memory, weight 1 each)
        and, at most, NodeResourcesBalancedAllocation over cpu and memory?"""
        skip = state.skip_score
        fit = self._fit
        if fit is None or not fit.default or not self._fit_weight or fit.name() in skip:
            return False
        return all(p is fit or p is self._balanced or p.name() in skip for p, _ in self.score)

    def _least_or_most_allocated(self, pod: PodInfo, nodes: Sequence[NodeInfo], balanced: bool = False) -> list[int]:
        """The weighted scores of NodeResourcesFit and (``balanced``) of
        NodeResourcesBalancedAllocation, node by node: ``NodeColumns.allocated_scores`` and
        ``balanced_scores`` unrolled, with the same arithmetic."""
        assert self._fit is not None
        weight = self._fit_weight
        bweight = self._balanced_weight
        pc, pm = pod.nonzero_cpu, pod.nonzero_mem
        rc, rm = pod.req_cpu, pod.req_mem
        out = []
        most = self._fit.most
        for node in nodes:
            cap_c = node.alloc_cpu
            cap_m = node.alloc_mem
            used_c = node.nonzero_cpu + pc
            used_m = node.nonzero_mem + pm
            if most:
                sc = used_c * MAX_NODE_SCORE // cap_c if cap_c and used_c <= cap_c else 0
                sm = used_m * MAX_NODE_SCORE // cap_m if cap_m and used_m <= cap_m else 0
            else:
                sc = (cap_c - used_c) * MAX_NODE_SCORE // cap_c if cap_c and used_c <= cap_c else 0
                sm = (cap_m - used_m) * MAX_NODE_SCORE // cap_m if cap_m and used_m <= cap_m else 0
            total = (sc + sm) // 2 * weight
            if balanced:
                std = 0.0
                if cap_c > 0 and cap_m > 0:
                    fc = min(float(cap_c - node.free_cpu + rc) / float(cap_c), 1.0)
                    fm = min(float(cap_m - node.free_mem + rm) / float(cap_m), 1.0)
                    std = abs((fc - fm) / 2)
                total += int((1 - std) * float(MAX_NODE_SCORE)) * bweight
            out.append(total)
        return out

    def feasible_nodes(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[list[NodeInfo], dict[str, Status]]:
        """Which of ``nodes`` (real or hypothetical NodeInfos) could ``pod`` go on, by the
        PreFilter and Filter plugins, every node considered (no sampling). For the
        autoscaler: ``NodeInfo("template", node_dict)`` is a node that does not exist yet.
        A PreFilter rejection is reported under the key ``""``."""
        state = CycleState()
        s = self.run_pre_filter(state, pod)
        if s is not None:
            return [], {"": s}
        if state.node_names is not None:
            nodes = _restricted(nodes, state.node_names)
        return self.find_feasible(state, pod, nodes, sample=False)
