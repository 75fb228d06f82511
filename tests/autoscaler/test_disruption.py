"""Which nodes the disruption pass picks, over a cluster state built by hand. Pure."""

from __future__ import annotations

from typing import Any

from controlplane.autoscaler.disruption import Disruption
from controlplane.autoscaler.nodepool import HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION
from controlplane.autoscaler.provisioner import Provisioner
from controlplane.autoscaler.state import ClusterState, Simulated
from tests.autoscaler.test_provisioner import CATALOG, pool
from tests.autoscaler.test_state import bound, node


def claim(name: str, type_: str = "small", *, node_name: str = "", **meta: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if node_name:
        status = {"nodeName": node_name, "capacity": {"cpu": "2", "memory": "8Gi", "pods": "20"},
                  "conditions": [{"type": "Initialized", "status": "True"}]}
    return {"metadata": {"name": name, "resourceVersion": "1", **meta,
                         "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": type_}},
            "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": [type_]}]},
            "status": status}


def pool_node(name: str) -> dict[str, Any]:
    n = node(name)
    n["metadata"]["labels"]["karpenter.sh/nodepool"] = "default"
    return n


def test_a_replacement_in_flight_is_no_room_for_another_nodes_pods() -> None:
    """As Karpenter's SimulateScheduling: the pods of a node being replaced (or deleted) are
    scheduled before a candidate's, so the replacement launched for them is not free room
    that an underutilized node's pods could be moved onto."""
    now = [0.0]
    st = ClusterState(clock=lambda: now[0])
    for n in ("n1", "n2"):
        st.node_added(pool_node(n))
        st.nodeclaim_set(None, claim(n, node_name=n))
        for i in range(2):
            st.pod_added(bound(f"{n}-p{i}", "900m", n))
    # n1 drifted: its replacement r1 (a small node, room for n1's two pods) is launching
    st.nodeclaim_set(None, claim("r1"))
    now[0] = 100.0
    sim = Simulated(st, CATALOG)
    disruption = Disruption(st, sim, Provisioner(CATALOG), clock=lambda: now[0])
    pools = {"default": pool(disruption={"consolidateAfter": "1s", "budgets": [{"nodes": "100%"}]})}
    assert disruption.decide(pools, busy={"n1": "default"}) == []

    # the same with n1 being deleted instead (its pods not evicted yet): its pods need r1 too
    deleting = claim("n1", node_name="n1", deletionTimestamp="2026-01-01T00:00:00Z")
    st.nodeclaim_set(st.nodeclaims["n1"], deleting)
    assert disruption.decide(pools, busy={}) == []

    # nothing leaving: r1 is free, and n2's pods move onto it (n2 deleted)
    st.nodeclaim_deleted(deleting)
    st.node_deleted(st.nodes["n1"])
    now[0] += 10  # (a candidate whose pods had nowhere to go is simulated again a few seconds later)
    [decision] = disruption.decide(pools, busy={})
    assert (decision.claim, decision.reason, decision.replacements) == ("n2", "Underutilized", [])


def test_a_percentage_budget_counts_initialized_nodes_only() -> None:
    """As Karpenter's BuildDisruptionBudgetMapping: a replacement still launching is not in the
    budget's total (10% of 10 nodes is 1, not 10% of 11 rounded up to 2), and a node that is not
    Ready uses the budget as one being disrupted does."""
    now = [0.0]
    st = ClusterState(clock=lambda: now[0])
    stale = {HASH_ANNOTATION: "old", HASH_VERSION_ANNOTATION: HASH_VERSION}  # all drifted
    for i in range(10):
        st.node_added(pool_node(f"n{i}"))
        st.nodeclaim_set(None, claim(f"n{i}", node_name=f"n{i}", annotations=stale))
    sim = Simulated(st, CATALOG)
    disruption = Disruption(st, sim, Provisioner(CATALOG), clock=lambda: now[0])
    pools = {"default": pool(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "10%"}]})}
    [first] = disruption.decide(pools, busy={})
    assert first.reason == "Drifted"
    # n0 being replaced, its replacement launching: no second one yet
    st.nodeclaim_set(None, claim("r0"))
    assert disruption.decide(pools, busy={"n0": "default"}) == []
    # once n0 is gone and r0 initialized, one more; but not while a node is not Ready
    st.nodeclaim_deleted(st.nodeclaims["n0"])
    st.node_deleted(st.nodes["n0"])
    st.node_added(pool_node("r0"))
    st.nodeclaim_set(st.nodeclaims["r0"], claim("r0", node_name="r0"))
    sick = pool_node("n1")
    sick["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    st.node_updated(st.nodes["n1"], sick)
    assert disruption.decide(pools, busy={}) == []
    st.node_updated(sick, pool_node("n1"))
    assert len(disruption.decide(pools, busy={})) == 1


def _four_nodes(costly: dict[str, Any] | None) -> tuple[ClusterState, list[float]]:
    """Four small nodes of one NodePool, each with a 900m pod; those of n1-n3 annotated
    do-not-disrupt (so n4 is the only candidate), n4's with ``costly`` in its spec."""
    now = [0.0]
    st = ClusterState(clock=lambda: now[0])
    for n in ("n1", "n2", "n3", "n4"):
        st.node_added(pool_node(n))
        st.nodeclaim_set(None, claim(n, node_name=n))
        p = bound(f"{n}-p", "900m", n, annotations={} if n == "n4" else {"karpenter.sh/do-not-disrupt": "true"})
        p["spec"].update(costly or {} if n == "n4" else {})
        st.pod_added(p)
    now[0] = 100.0
    return st, now


def test_balanced_consolidation_takes_a_move_only_if_it_saves_enough_for_its_disruption() -> None:
    """Karpenter's Balanced policy (k=2): a move's share of the NodePool's cost saved over its
    share of the NodePool's disruption cost (1 a node, plus each pod's eviction cost) must be
    at least 1/2. Deleting n4 saves a quarter of the cost; with a pod of default cost it causes
    a quarter of the disruption (2 of 8): score 1, taken. With a pod of the highest priority
    (eviction cost 10) it causes 11 of 17: score 0.39, left, where WhenEmptyOrUnderutilized
    takes it."""
    budgets = {"consolidateAfter": "1s", "budgets": [{"nodes": "100%"}]}
    st, now = _four_nodes(None)
    disruption = Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])
    [decision] = disruption.decide({"default": pool(disruption={**budgets, "consolidationPolicy": "Balanced"})}, {})
    assert (decision.claim, decision.reason, decision.replacements) == ("n4", "Underutilized", [])
    assert decision.approved == "score 1.00 >= threshold 0.50 (k: 2, savings 25.0%, disruption 25.0%)"

    st, now = _four_nodes({"priority": 1_000_000_000})
    disruption = Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])
    assert disruption.decide({"default": pool(disruption={**budgets, "consolidationPolicy": "Balanced"})}, {}) == []
    [decision] = disruption.decide({"default": pool(disruption=budgets)}, {})  # WhenEmptyOrUnderutilized
    assert (decision.claim, decision.approved) == ("n4", "")


def test_a_node_whose_pods_cost_nothing_to_evict_is_empty() -> None:
    """As Karpenter's Candidate.IsEmpty (v1.14): a node whose pods all have an eviction cost of
    0 or less (pod-deletion-cost at most -2^27) is Empty, for WhenEmpty NodePools too."""
    st, now = _four_nodes(None)
    free = st.pods["default/n4-p"]
    free = {**free, "metadata": {**free["metadata"], "resourceVersion": "2",
                                 "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-134217728"}}}
    st.pod_updated(st.pods["default/n4-p"], free)
    now[0] += 100.0
    disruption = Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])
    [decision] = disruption.decide({"default": pool(disruption={
        "consolidateAfter": "1s", "consolidationPolicy": "WhenEmpty", "budgets": [{"nodes": "100%"}]})}, {})
    assert (decision.claim, decision.reason) == ("n4", "Empty")


def test_consolidation_says_why_it_leaves_a_node() -> None:
    """Karpenter's Unconsolidatable reasons: consolidation disabled, a WhenEmpty NodePool's node
    not empty (both whatever consolidateAfter), and, after simulating a move of the node's pods,
    no cheaper replacement, or pods that would not schedule."""
    st, now = _four_nodes(None)
    disruption = Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])
    budgets = [{"nodes": "100%"}]
    assert disruption.decide({"default": pool(disruption={"consolidateAfter": "Never", "budgets": budgets})}, {}) == []
    assert [(c["metadata"]["name"], why) for c, _, why in disruption.unconsolidatable] == [
        ("n4", 'NodePool "default" has consolidation disabled')]
    assert disruption.decide({"default": pool(disruption={
        "consolidateAfter": "1h", "consolidationPolicy": "WhenEmpty", "budgets": budgets})}, {}) == []
    assert [(c["metadata"]["name"], why) for c, _, why in disruption.unconsolidatable] == [
        ("n4", 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty')]

    # one small node, its pod alone: a new small node would cost as much
    now = [0.0]
    st = ClusterState(clock=lambda: now[0])
    st.node_added(pool_node("n1"))
    st.nodeclaim_set(None, claim("n1", node_name="n1"))
    st.pod_added(bound("p", "900m", "n1"))
    now[0] = 100.0
    disruption = Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])
    assert disruption.decide({"default": pool(disruption={"consolidateAfter": "1s", "budgets": budgets})}, {}) == []
    assert [why for _, _, why in disruption.unconsolidatable] == ["Can't replace with a cheaper node"]
    # a pod needing a label no NodePool gives a node (its node has it): it would not schedule elsewhere
    picky = bound("picky", "900m", "n1")
    picky["spec"]["nodeSelector"] = {"example.com/disk": "ssd"}
    st.pod_added(picky)
    now[0] += 10
    assert disruption.decide({"default": pool(disruption={"consolidateAfter": "1s", "budgets": budgets})}, {}) == []
    [(_, _, why)] = disruption.unconsolidatable
    assert why.startswith("Not all pods would schedule, default/picky => ") and why.endswith(" "), why


def _one_medium_node(capacity_type: str) -> tuple[list[float], ClusterState, dict[str, Any], Disruption]:
    """A NodePool's one medium node of ``capacity_type``, running a 900m pod, 100 s after it
    came: its clock, its state, its NodeClaim and the disruption that judges it."""
    now = [0.0]
    st = ClusterState(clock=lambda: now[0])
    st.node_added(pool_node("n1"))
    node_claim = claim("n1", "medium", node_name="n1")
    node_claim["metadata"]["labels"]["karpenter.sh/capacity-type"] = capacity_type
    st.nodeclaim_set(None, node_claim)
    st.pod_added(bound("p", "900m", "n1"))
    now[0] = 100.0
    return now, st, node_claim, Disruption(st, Simulated(st, CATALOG), Provisioner(CATALOG), clock=lambda: now[0])


def test_a_spot_node_is_not_replaced_by_a_spot_node() -> None:
    """Karpenter's SpotToSpotConsolidation feature gate is off by default: a spot node is not
    replaced by consolidation with a node that may be spot, however cheaper ("SpotToSpotConsolidation
    is disabled, can't replace a spot node with a spot node"); an on-demand node may be."""
    now, st, spot, disruption = _one_medium_node("spot")
    both = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]
    budgets = {"consolidateAfter": "1s", "budgets": [{"nodes": "100%"}]}
    assert disruption.decide({"default": pool(requirements=both, disruption=budgets)}, {}) == []
    assert [why for _, _, why in disruption.unconsolidatable] == [
        "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"]
    # an on-demand node of the NodePool is replaced: by the cheapest, a small spot node
    on_demand = claim("n1", "medium", node_name="n1")
    on_demand["metadata"]["labels"]["karpenter.sh/capacity-type"] = "on-demand"
    st.nodeclaim_set(spot, on_demand)
    now[0] += 10  # (a candidate whose move was refused is simulated again a few seconds later)
    [decision] = disruption.decide({"default": pool(requirements=both, disruption=budgets)}, {})
    assert (decision.claim, decision.reason) == ("n1", "Underutilized")
    assert [(c.launch[0].name, c.launch[1].capacity_type) for c in decision.replacements] == [("small", "spot")]


def test_a_nodepool_change_has_a_refused_node_simulated_again() -> None:
    """A candidate whose move was refused is not simulated again while nothing changes (but every
    5 minutes, as Karpenter's ConsolidationState); a change of its NodePool (here, allowing a
    cheaper type) is a change, as Karpenter's NodePool informer marks the cluster unconsolidated."""
    now, _, _, disruption = _one_medium_node("on-demand")
    budgets = {"consolidateAfter": "1s", "budgets": [{"nodes": "100%"}]}
    only = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["medium", "large"]}]
    before = pool(requirements=only, disruption=budgets)
    assert disruption.decide({"default": before}, {}) == []
    assert [why for _, _, why in disruption.unconsolidatable] == ["Can't replace with a cheaper node"]
    now[0] += 60
    assert disruption.decide({"default": before}, {}) == []  # nothing changed: not simulated again
    assert disruption.unconsolidatable == []
    now[0] += 300  # ... but for Karpenter's revalidation, every 5 minutes
    assert disruption.decide({"default": before}, {}) == []
    assert [why for _, _, why in disruption.unconsolidatable] == ["Can't replace with a cheaper node"]
    after = pool(requirements=[{**only[0], "values": ["small", "medium", "large"]}], disruption=budgets)
    after.obj["metadata"]["generation"] = 2
    [decision] = disruption.decide({"default": after}, {})
    assert [c.launch[0].name for c in decision.replacements] == ["small"]
