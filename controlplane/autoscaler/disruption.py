"""Which nodes to disrupt now, and how: Karpenter's disruption methods in its
order, each within the NodePool's budgets.

1. **Drifted**: the NodeClaim's ``karpenter.sh/nodepool-hash`` differs from its
   NodePool's template hash, or its labels no longer satisfy the NodePool's
   requirements (or lack a label a requirement added since needs). Replaced:
   its pods are simulated onto the other nodes, and whatever does not fit gets
   new NodeClaims, launched (and Initialized) before the old one is deleted.
2. **Empty**: no pod that would need a new home (or only pods whose eviction cost,
   Karpenter's ``EvictionCost``, is not positive), and ``consolidateAfter`` since
   the node's last pod event. Deleted.
3. **Underutilized** (``consolidationPolicy: WhenEmptyOrUnderutilized`` or
   ``Balanced``): its pods all fit on the other nodes (deleted), or on one new
   node cheaper than it (replaced). ``Balanced`` (Karpenter's, k=2) takes the move
   only if the share of the NodePool's cost it saves is at least half the share
   of the NodePool's disruption cost it causes (``balanced_score``).

A node whose pods or itself carry ``karpenter.sh/do-not-disrupt: "true"``, or
with a pod whose PodDisruptionBudget allows no disruption, is never a candidate
(but for drift of a NodeClaim with a ``terminationGracePeriod``); ``blocked``
says which and why, for the events. Budgets count the NodePool's initialized
NodeClaims; those being deleted or replaced, or whose node is not Ready, already
use the budget. Decisions are made on one simulation per pass, so two deletions
never count on the same free room.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..registry.disruption import covers, healthy
from .budgets import allowed
from .labels import CAPACITY_TYPE, DO_NOT_DISRUPT
from .nodepool import HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION, NodePoolView
from .provisioner import NewClaim, Provisioner, daemon_overhead
from .requirements import Requirements
from .resources import Resources
from .simulation import SimNode
from .state import ClusterState, Simulated, is_reschedulable, key

__all__ = ["BALANCED_K", "REASONS", "Decision", "Disruption", "balanced_score", "drift_reason", "eviction_cost"]

REASONS = ("Drifted", "Empty", "Underutilized")
RECHECK_SECONDS = 5.0  # a node whose pods could not move is simulated again after this, or on no change sooner
# ... and after this even if nothing changed (Karpenter's ConsolidationState: at least every 5 minutes)
REVALIDATE_SECONDS = 300.0
BALANCED_K = 2  # Karpenter's BalancedK: a Balanced move is taken when its score is at least 1/k
NODE_DISRUPTION_COST = 1.0  # Karpenter's PerNodeBaseDisruptionCost: draining a node costs this, whatever its pods
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

Obj = dict[str, Any]


@dataclass(slots=True)
class Decision:
    claim: str
    node: str
    pool: str
    reason: str
    replacements: list[NewClaim] = field(default_factory=list)  # empty: just delete
    # a Balanced consolidation's score, in Karpenter's ConsolidationApproved words; empty for the others
    approved: str = ""


def eviction_cost(pod: Obj) -> float:
    """Karpenter's ``EvictionCost``: 1, plus the pod's ``controller.kubernetes.io/pod-deletion-cost``
    over 2^27, plus its priority over 2^25, within [-10, 10].

    >>> eviction_cost({"metadata": {"annotations": {POD_DELETION_COST: "-268435456"}}, "spec": {}})
    -1.0
    """
    cost = 1.0
    deletion = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_DELETION_COST)
    if deletion is not None:
        with contextlib.suppress(ValueError):  # (Karpenter logs it and goes on)
            cost += float(deletion) / 2 ** 27
    priority = (pod.get("spec") or {}).get("priority")
    if isinstance(priority, int):
        cost += priority / 2 ** 25
    return min(10.0, max(-10.0, cost))


def _disruption_cost(pods: Sequence[Obj]) -> float:
    """Karpenter's ``RescheduleDisruptionCost`` of a node whose reschedulable pods are ``pods``."""
    return NODE_DISRUPTION_COST + sum(max(0.0, eviction_cost(p)) for p in pods)


def balanced_score(savings: float, disruption: float, pool_cost: float, pool_disruption: float) -> float:
    """Karpenter's Balanced score of a move: the share of its NodePool's cost it saves over the
    share of its NodePool's disruption cost it causes (0 when it saves nothing).

    >>> balanced_score(0.1, 2.0, 0.4, 8.0)  # a quarter of the cost for a quarter of the disruption
    1.0
    """
    if pool_cost <= 0 or pool_disruption <= 0:
        return 0.0
    saved, disrupted = savings / pool_cost, disruption / pool_disruption
    if saved <= 0:
        return 0.0
    return saved / disrupted if disrupted else float("inf")


def drift_reason(claim: Obj, pool: NodePoolView) -> str | None:
    """Why ``claim`` has drifted from ``pool``, or None."""
    meta = claim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(HASH_VERSION_ANNOTATION) == HASH_VERSION and annotations.get(HASH_ANNOTATION) != pool.hash:
        return "NodePoolDrifted"
    labels = Requirements.from_labels(meta.get("labels"))
    for k, req in pool.requirements.items():
        if k in labels and not labels[k].intersect(req).any():
            return "RequirementsDrifted"
    # a template requirement the label must meet (In, Exists, Gt, Lt; not NotIn, DoesNotExist) that
    # the NodeClaim has no label for: added to the NodePool since it launched (Karpenter's
    # Compatible: "does not have known values"). One its own requirements named already is this
    # provider leaving a label out, not drift.
    template = ((pool.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    launched_with: Requirements | None = None
    for k, req in Requirements.parse(template.get("requirements")).items():
        if k in labels or req.allows_absent:
            continue
        if launched_with is None:
            launched_with = Requirements.parse((claim.get("spec") or {}).get("requirements"))
        if k not in launched_with:
            return "RequirementsDrifted"
    return None


def _spot_to_spot(claim: Obj, replacement: NewClaim) -> bool:
    """Whether replacing spot NodeClaim ``claim`` by ``replacement`` would be spot to spot: the
    replacement's requirements allow spot (Karpenter's check, before any price)."""
    if ((claim.get("metadata") or {}).get("labels") or {}).get(CAPACITY_TYPE) != "spot":
        return False
    reqs = replacement.requirements
    return CAPACITY_TYPE not in reqs or reqs[CAPACITY_TYPE].allows("spot")


def _annotated(obj: Obj) -> bool:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"


def _ready(claim: Obj) -> bool:
    return any(c.get("type") == "Initialized" and c.get("status") == "True"
               for c in (claim.get("status") or {}).get("conditions") or ())


def _node_ready(node: Obj | None) -> bool:
    return node is not None and any(c.get("type") == "Ready" and c.get("status") == "True"
                                    for c in (node.get("status") or {}).get("conditions") or ())


class Disruption:
    def __init__(self, state: ClusterState, sim: Simulated, provisioner: Provisioner,
                 clock: Callable[[], float]) -> None:
        self.state = state
        self.sim = sim
        self.provisioner = provisioner
        self.clock = clock
        # claim -> (state generation, clock, NodePools' generations) when its pods last had nowhere to go
        self._unmovable: dict[str, tuple[int, float, object]] = {}
        self._pools_version: object = ()  # the NodePools' names and generations, this pass
        self._existing: list[SimNode] | None = None
        self._usage_cache: dict[str, Resources] = {}
        self._overhead: dict[str, Resources] = {}  # each NodePool's DaemonSet pods' requests, this pass
        self._busy: Mapping[str, str] = {}  # the NodeClaims being replaced, this pass
        self._totals: dict[str, tuple[float, float]] = {}  # each NodePool's cost and disruption cost, this pass
        # (claim, node, why) of the last pass's candidates that something kept from disruption
        self.blocked: list[tuple[Obj, Obj, str]] = []
        # (NodePool, reason) of the last pass whose budgets allow no disruption for that reason
        self.pools_blocked: list[tuple[NodePoolView, str]] = []
        # (claim, node, why) of the last pass's candidates that consolidation left, in Karpenter's
        # Unconsolidatable words
        self.unconsolidatable: list[tuple[Obj, Obj, str]] = []

    def decide(self, pools: Mapping[str, NodePoolView], busy: Mapping[str, str],
               now: datetime | None = None) -> list[Decision]:
        """The disruptions to start now. ``busy`` maps the NodeClaims already being
        replaced to their NodePool (they count against budgets)."""
        st = self.state
        decisions: list[Decision] = []
        excluded: set[str] = set()
        self._existing = None
        self._busy = busy
        self._usage_cache = {}
        self._totals = {}
        self._overhead = daemon_overhead(st.daemonsets.values(), pools.values())
        self.blocked = []
        self.pools_blocked = []
        self.unconsolidatable = []
        self._unmovable = {k: v for k, v in self._unmovable.items() if k in st.nodeclaims}
        # a NodePool's spec is part of what a refused move was judged on (Karpenter marks the
        # cluster unconsolidated when a NodePool changes)
        self._pools_version = tuple(sorted((name, (p.obj.get("metadata") or {}).get("generation"))
                                           for name, p in pools.items()))
        for pool in sorted(pools.values(), key=lambda p: p.name):
            claims = st.claims_of_pool(pool.name)
            # as Karpenter's BuildDisruptionBudgetMapping: the budget's total is the NodePool's
            # initialized nodes (a replacement still launching would round a percentage up), and
            # those being disrupted or not Ready use it. A NodeClaim being terminated stays a node
            # of its cluster state until it is gone, so it counts in both (left out, the total
            # shrank as nodes went and 125 empty nodes left 3 at a time, not 13)
            counted = [c for c in claims if _ready(c)]
            disrupting = sum(1 for c in counted if (c.get("metadata") or {}).get("deletionTimestamp")
                             or key(c) in busy or not _node_ready(st.nodes.get((c.get("status") or {})
                                                                                .get("nodeName") or "")))
            if counted:  # as Karpenter's BuildDisruptionBudgetMapping: said of a NodePool with nodes
                self.pools_blocked.extend((pool, reason) for reason in REASONS
                                          if allowed(pool.budgets, len(counted), reason, now) == 0)
            # (claim, node, why its pods block a graceful disruption, or None)
            candidates: list[tuple[Obj, Obj, str | None]] = []
            for c in claims:
                node_name = (c.get("status") or {}).get("nodeName")
                node = st.nodes.get(node_name or "")
                if (node is None or not _ready(c) or (c.get("metadata") or {}).get("deletionTimestamp")
                        or key(c) in busy or st.nominated(key(node))):
                    continue
                if _annotated(node):
                    self.blocked.append((c, node, f'Disruption is blocked through the "{DO_NOT_DISRUPT}" annotation'))
                    continue
                pods_block = self._pods_block(node)
                candidates.append((c, node, pods_block))
                if pool.replicas is None and pods_block is None:
                    why = self._never_consolidated(pool, node)
                    if why:
                        self.unconsolidatable.append((c, node, why))
            if not candidates:
                continue
            for reason in REASONS:
                if pool.replicas is not None and reason != "Drifted":
                    continue  # a static NodePool's nodes are never consolidated
                budget = allowed(pool.budgets, len(counted), reason, now) - disrupting
                if budget <= 0:
                    continue
                for claim, node, pods_block in candidates:
                    if budget <= 0:
                        break
                    if key(claim) in excluded:
                        continue
                    # drift is an eventual disruption: a NodeClaim with a terminationGracePeriod is
                    # drained within it whatever its pods' budgets and annotations say (Karpenter's
                    # EventualDisruptionClass); the others are graceful and leave such nodes alone
                    if pods_block is not None and not (
                            reason == "Drifted" and (claim.get("spec") or {}).get("terminationGracePeriod")):
                        if reason != "Drifted" or drift_reason(claim, pool) is not None:
                            self.blocked.append((claim, node, pods_block))
                        continue
                    decision = self._consider(reason, claim, node, pool, pools, excluded)
                    if decision is None:
                        continue
                    decisions.append(decision)
                    excluded.add(key(claim))
                    budget -= 1
                    disrupting += 1
        return decisions

    def _with_pending(self, nodes: list[SimNode]) -> list[SimNode]:
        """``nodes`` less those being disrupted, with the pending pods and the pods of the nodes
        being disrupted (replaced, or deleted) placed first: room they will take is no room to
        move into. As Karpenter's ``SimulateScheduling``: a replacement in flight is kept for
        the pods of the node it replaces, not counted as free."""
        st = self.state
        leaving = {name for name, c in st.nodeclaims.items()
                   if name in self._busy or (c.get("metadata") or {}).get("deletionTimestamp")}
        nodes = [n for n in nodes if n.claim not in leaving]
        pending = [self.sim.demand(st.pods[k]) for k in st.provisionable if k in st.pods]
        for name in leaving:
            node = (st.nodeclaims[name].get("status") or {}).get("nodeName")
            if node:
                pending += [self.sim.demand(p) for p in st.moving_pods_of(node)]
        if pending:
            self.provisioner.plan(pending, nodes, [])
        return nodes

    def _pods_block(self, node: Obj) -> str | None:
        """Why the pods of ``node`` keep it from a graceful disruption (Karpenter's
        ``ValidatePodsDisruptable``): one annotated ``karpenter.sh/do-not-disrupt: "true"``, or
        one its PodDisruptionBudget lets none be evicted from (no disruption allowed now; or
        several budgets, which the eviction API refuses). None if nothing blocks."""
        pdbs: dict[str, list[Obj]] | None = None  # by namespace, made if a pod needs it
        for p in self.state.pods_of(key(node)):
            if not is_reschedulable(p):
                continue
            if ((p.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
                return f'Pod has "{DO_NOT_DISRUPT}" annotation (Pod={key(p)})'
            if pdbs is None:
                pdbs = {}
                for b in self.state.pdbs.values():
                    pdbs.setdefault((b.get("metadata") or {}).get("namespace") or "", []).append(b)
            matching = [b for b in pdbs.get((p.get("metadata") or {}).get("namespace") or "", ()) if covers(b, p)]
            if len(matching) > 1:
                return f"Eviction does not support multiple PDBs (PodDisruptionBudget(s)={sorted(map(key, matching))})"
            for b in matching:
                if ((b.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                        and not healthy(p)):
                    continue  # an unhealthy pod the budget lets go anyway
                if int((b.get("status") or {}).get("disruptionsAllowed") or 0) <= 0:
                    return f"Pdb prevents pod evictions (PodDisruptionBudget=[{key(b)}])"
        return None

    def _never_consolidated(self, pool: NodePoolView, node: Obj) -> str | None:
        """Why consolidation leaves ``node`` whatever its pods, as Karpenter's ShouldDisrupt says
        it (before consolidateAfter has passed): consolidation disabled (``consolidateAfter:
        Never``), or a WhenEmpty NodePool's node that is not empty."""
        if pool.consolidate_after is None:
            return f'NodePool "{pool.name}" has consolidation disabled'
        if pool.consolidation_policy == "WhenEmpty" and any(
                eviction_cost(p) > 0 for p in self.state.pods_of(key(node)) if is_reschedulable(p)):
            return f'NodePool "{pool.name}" has consolidation policy WhenEmpty, but node is not empty'
        return None

    def consolidatable(self, node: str, pool: NodePoolView) -> bool:
        """Whether ``consolidateAfter`` has passed since the node's last pod event."""
        if pool.consolidate_after is None:
            return False
        last = self.state.last_pod_event.get(node, self.clock())
        return self.clock() - last >= pool.consolidate_after

    def _consider(self, reason: str, claim: Obj, node: Obj, pool: NodePoolView, pools: Mapping[str, NodePoolView],
                  excluded: set[str]) -> Decision | None:
        node_name = key(node)
        pods = [p for p in self.state.pods_of(node_name) if is_reschedulable(p)]
        if reason == "Drifted":
            if drift_reason(claim, pool) is None:
                return None
            if pool.replicas is not None:
                # a static NodePool's node is replaced by one of its own, whatever its pods need
                replacement = self.provisioner.static_claim(pool, self._overhead.get(pool.name))
                return Decision(key(claim), node_name, pool.name, reason, [replacement]) if replacement else None
            # replacements come from the NodePools Karpenter's provisioner takes: dynamic and Ready
            return self._move(reason, claim, node_name, pool, pods, excluded,
                              [p for p in pools.values() if p.replicas is None and not p.invalid], cheaper_than=None)
        if not self.consolidatable(node_name, pool):
            return None
        # as Karpenter's Candidate.IsEmpty: no pod whose eviction costs anything (pods that declared
        # themselves free to go, by a very low deletion cost or priority, do not keep a node)
        empty = all(eviction_cost(p) <= 0 for p in pods)
        if reason == "Empty":
            if not empty:
                return None
            return Decision(key(claim), node_name, pool.name, reason)
        if pool.consolidation_policy not in ("WhenEmptyOrUnderutilized", "Balanced") or empty:
            return None
        if self.state.provisionable:
            return None  # capacity is being added: moving pods now would only race it
        if pool.consolidation_policy == "Balanced" and not self._may_pass(claim, pool, pods):
            return None
        return self._move(reason, claim, node_name, pool, pods, excluded, [] if pool.invalid else [pool],
                          cheaper_than=self._price(claim))

    def _price(self, claim: Obj) -> float:
        labels = (claim.get("metadata") or {}).get("labels") or {}
        option = self.provisioner.catalog.get(labels.get("node.kubernetes.io/instance-type", ""))
        if option is None:
            return 0.0
        for o in option.offerings:
            if o.zone == labels.get("topology.kubernetes.io/zone") and \
                    o.capacity_type == labels.get("karpenter.sh/capacity-type"):
                return o.price
        return min((o.price for o in option.offerings), default=0.0)

    def _move(self, reason: str, claim: Obj, node_name: str, pool: NodePoolView, pods: Sequence[Obj],
              excluded: set[str], pools: list[NodePoolView],
              cheaper_than: float | None) -> Decision | None:
        """Where ``pods`` would go without the node: onto the others (delete it), or,
        for what does not fit, onto new nodes (replace it) — for consolidation only
        one, and only if cheaper."""
        failed = self._unmovable.get(key(claim))
        if failed is not None and failed[2] == self._pools_version and self.clock() - failed[1] < REVALIDATE_SECONDS \
                and (failed[0] == self.state.generation or self.clock() - failed[1] < RECHECK_SECONDS):
            return None  # its pods had nowhere to go, and nothing (or not much time) has changed since
        if self._existing is None:
            self._existing = self._with_pending(self.sim.nodes(overhead=self._overhead))
        existing = self._existing
        demands = [self.sim.demand(p) for p in pods]
        gone = excluded | {node_name, key(claim)}
        others = [n for n in existing if n.name not in gone and n.claim not in gone]
        trial = [SimNode(n.name, n.labels, n.taints, n.allocatable, dict(n.requested), n.node, list(n.pods),
                         n.slices, n.nodepool, n.claim, devices=n.devices, claimed=list(n.claimed),
                         placed=n.placed) for n in others]
        plan = self.provisioner.plan(demands, trial, pools, self._usage(pools), self._overhead)
        # why consolidation refuses the move, in Karpenter's words (its computeConsolidation's order)
        why: str | None = None
        if plan.unschedulable:
            # (Karpenter's NonPendingPodSchedulingErrors, through pretty.Sentence)
            errors = sorted(plan.unschedulable.items())
            why = "Not all pods would schedule, " + "".join(f"{k} => {e} " for k, e in errors[:5])
            if len(errors) > 5:
                why += f" and {len(errors) - 5} other(s)"
        elif cheaper_than is not None and len(plan.claims) > 1:
            why = f"Can't remove without creating {len(plan.claims)} candidates"
        elif cheaper_than is not None and plan.claims and _spot_to_spot(claim, plan.claims[0]):
            # Karpenter's SpotToSpotConsolidation feature gate, off by default: a spot node is
            # deleted by consolidation, never replaced by one that may be spot
            why = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
        elif cheaper_than is not None and plan.claims and plan.claims[0].launch[1].price >= cheaper_than:
            why = "Can't replace with a cheaper node"
        if why is not None:
            self._unmovable[key(claim)] = (self.state.generation, self.clock(), self._pools_version)
            node = self.state.nodes.get(node_name)
            if cheaper_than is not None and node is not None:
                self.unconsolidatable.append((claim, node, why))
            return None
        approved = ""
        if cheaper_than is not None and pool.consolidation_policy == "Balanced":
            savings = cheaper_than - sum(c.launch[1].price for c in plan.claims)
            pool_cost, pool_disruption = self._pool_totals(pool)
            disruption = _disruption_cost(pods)
            score = balanced_score(savings, disruption, pool_cost, pool_disruption)
            if score < 1 / BALANCED_K:
                return None  # (not cached as unmovable: a change of policy takes it at once)
            approved = (f"score {score:.2f} >= threshold {1 / BALANCED_K:.2f} (k: {BALANCED_K}, savings "
                        f"{100 * savings / pool_cost:.1f}%, disruption {100 * disruption / pool_disruption:.1f}%)")
        # commit: the pods' new homes are taken for the rest of this pass
        by_name = {n.name: n for n in trial}
        for n in others:
            n.requested = by_name[n.name].requested
            n.claimed = by_name[n.name].claimed
        return Decision(key(claim), node_name, pool.name, reason, plan.claims, approved)

    def _may_pass(self, claim: Obj, pool: NodePoolView, pods: Sequence[Obj]) -> bool:
        """Whether deleting ``claim``'s node outright, the best a move of it can save, would pass
        the Balanced threshold: if not, no move of it is simulated (Karpenter's CanPassThreshold)."""
        pool_cost, pool_disruption = self._pool_totals(pool)
        return balanced_score(self._price(claim), _disruption_cost(pods), pool_cost,
                              pool_disruption) >= 1 / BALANCED_K

    def _pool_totals(self, pool: NodePoolView) -> tuple[float, float]:
        """The NodePool's cost (its NodeClaims' prices) and disruption cost (each NodeClaim's, its
        node's reschedulable pods'), the denominators of Karpenter's Balanced score: taken once a
        pass, as Karpenter snapshots them once a cycle."""
        if pool.name in self._totals:
            return self._totals[pool.name]
        cost = disruption = 0.0
        for c in self.state.claims_of_pool(pool.name):
            cost += self._price(c)
            node = (c.get("status") or {}).get("nodeName") or ""
            disruption += _disruption_cost([p for p in self.state.pods_of(node) if is_reschedulable(p)]
                                           if node else ())
        self._totals[pool.name] = (cost, disruption)
        return cost, disruption

    def _usage(self, pools: Sequence[NodePoolView]) -> dict[str, Resources]:
        for p in pools:
            if p.name not in self._usage_cache:
                self._usage_cache[p.name] = self.sim.usage(p.name)
        return {p.name: self._usage_cache[p.name] for p in pools}
