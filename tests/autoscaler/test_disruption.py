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
