"""The cluster state's view of existing nodes: what their pods take. Pure."""

from __future__ import annotations

from typing import Any

from controlplane.autoscaler.schedfit import SchedulerFits
from controlplane.autoscaler.state import ClusterState, Simulated
from tests.autoscaler.test_provisioner import CATALOG, pod


def node(name: str, cpu: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "20"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def bound(name: str, cpu: str, node_name: str, rv: str = "1", **meta: Any) -> dict[str, Any]:
    p = pod(name, cpu, nodeName=node_name)
    p["metadata"].update(resourceVersion=rv, **meta)
    p["status"] = {"phase": "Running"}
    return p


def test_terminating_and_daemonset_pods_take_their_room_until_gone() -> None:
    """As Karpenter's cluster state (and the scheduler): every bound pod not finished counts
    on its node, terminating ones and DaemonSets' too; only the others need a new home."""
    st = ClusterState()
    st.node_added(node("n1"))
    running = bound("web", "500m", "n1")
    going = bound("old", "1", "n1", deletionTimestamp="2026-01-01T00:00:00Z")
    daemon = bound("agent", "250m", "n1", ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": True}])
    done = bound("job", "2", "n1")
    done["status"] = {"phase": "Succeeded"}
    for p in (running, going, daemon, done):
        st.pod_added(p)
    sim = Simulated(st, CATALOG)
    [n1] = sim.nodes()
    assert n1.requested["cpu"] == 1750
    assert [p["metadata"]["name"] for p in n1.pods] == ["web"]

    # the scheduler's filters see the same: a 1-CPU pod does not fit beside them
    fits = SchedulerFits(None, st)  # type: ignore[arg-type]
    fits.refresh()
    pending = sim.demand(pod("new", "250m"))
    assert fits(pending, n1)
    assert not fits(sim.demand(pod("big", "500m")), n1)

    # the terminating pod gone: its room is free
    st.pod_deleted(going)
    [n1] = sim.nodes()
    assert n1.requested["cpu"] == 750
    fits.refresh()
    assert fits(sim.demand(pod("big", "500m")), n1)

    # a pod that starts terminating moves from the movable pods to the held ones
    leaving = bound("web", "500m", "n1", rv="2", deletionTimestamp="2026-01-01T00:00:00Z")
    st.pod_updated(running, leaving)
    [n1] = sim.nodes()
    assert n1.requested["cpu"] == 750 and n1.pods == []
    st.pod_deleted(leaving)
    st.pod_deleted(daemon)
    assert sim.nodes()[0].requested.get("cpu", 0) == 0 and not st.held_on["n1"]


def test_a_nodepool_node_keeps_room_for_its_daemonset_pods_not_there_yet() -> None:
    """As Karpenter's ExistingNode: a node just registered, before its DaemonSet pods are bound,
    keeps the room they will take (the DaemonSets' requests less their pods there, not below 0);
    the new node's overhead must not vanish the moment its Node appears."""
    from controlplane.autoscaler.provisioner import Provisioner, daemon_overhead
    from tests.autoscaler.test_provisioner import demands, launched, pool

    def ds(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}], **spec}}}}

    st = ClusterState()
    registered = node("n1", cpu="2")
    registered["metadata"]["labels"]["karpenter.sh/nodepool"] = "default"
    st.node_added(registered)
    st.daemonsets["kube-system/agent"] = ds("agent", "500m")
    # one whose pods cannot land on n1 (its nodeSelector asks a label n1 does not have) keeps no room
    st.daemonsets["kube-system/arm"] = ds("arm", "1", nodeSelector={"kubernetes.io/arch": "arm64"})
    overhead = daemon_overhead(st.daemonsets.values(), [pool()])
    sim = Simulated(st, CATALOG)
    [n1] = sim.nodes(overhead=overhead)
    assert n1.requested["cpu"] == 500
    # the pod it was launched for and one more: the second no longer takes the agent's room
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1500m"), pod("b", "500m")), [n1], [pool()],
                                     overhead=overhead)
    assert launched(plan) == ["small"] and [p.key for p in plan.claims[0].pods] == ["default/b"]

    # the agent's pod bound there: counted once, as a pod of the node
    st.pod_added(bound("agent-n1", "500m", "n1", ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": True}]))
    [n1] = sim.nodes(overhead=overhead)
    assert n1.requested["cpu"] == 500
    # a node of no NodePool, or no DaemonSets: as before
    assert sim.nodes()[0].requested["cpu"] == 500


def test_the_pods_a_disrupted_node_moves_now_are_karpenters_currently_reschedulable_ones() -> None:
    """Capacity is simulated (and launched) only for the pods that will be evicted: not one annotated
    karpenter.sh/do-not-disrupt, nor one a budget blocks for good (maxUnavailable 0, minAvailable
    100%); one whose budget allows no disruption just now still counts (it will be evicted)."""
    st = ClusterState()
    st.node_added(node("n1"))
    st.pod_added(bound("free", "100m", "n1"))
    st.pod_added(bound("stay", "100m", "n1", annotations={"karpenter.sh/do-not-disrupt": "true"}))
    st.pod_added(bound("web", "100m", "n1", labels={"app": "web"}))
    st.pod_added(bound("db", "100m", "n1", labels={"app": "db"}))
    st.pod_added(bound("gone", "100m", "n1", deletionTimestamp="2026-01-01T00:00:00Z"))

    def pdb(name: str, app_name: str, **spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": app_name}}, **spec}, "status": {"disruptionsAllowed": 0}}

    st.pdbs["default/web"] = pdb("web", "web", maxUnavailable=0)
    st.pdbs["default/db"] = pdb("db", "db", minAvailable=1)
    assert sorted(p["metadata"]["name"] for p in st.moving_pods_of("n1")) == ["db", "free"]
    st.pdbs["default/web"] = pdb("web", "web", minAvailable="100%")
    assert sorted(p["metadata"]["name"] for p in st.moving_pods_of("n1")) == ["db", "free"]
    st.pdbs["default/web"] = pdb("web", "web", maxUnavailable=1)
    assert sorted(p["metadata"]["name"] for p in st.moving_pods_of("n1")) == ["db", "free", "web"]


def test_a_node_with_a_free_device_holds_a_pod_asking_the_extended_resource_its_class_backs() -> None:
    """KEP-5004: the scheduler's filters, as the autoscaler runs them, leave example.com/fpga to
    DRA on a node without it, so an existing node with a free FPGA is found, not a new one."""
    st = ClusterState()
    st.node_added(node("n1"))
    st.device_classes.add({"metadata": {"name": "fpga"}, "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "fpga.example.com"'}}],
        "extendedResourceName": "example.com/fpga"}})
    st.slice_set({"metadata": {"name": "n1-fpga", "resourceVersion": "1"},
                  "spec": {"driver": "fpga.example.com", "nodeName": "n1", "pool": {"name": "n1"},
                           "devices": [{"name": "fpga-0"}]}})
    sim = Simulated(st, CATALOG)
    [n1] = sim.nodes()
    fits = SchedulerFits(None, st)  # type: ignore[arg-type]
    fits.refresh()
    wants = pod("fpga-user", "250m")
    wants["spec"]["containers"][0]["resources"]["limits"] = {"example.com/fpga": "1"}
    assert fits(sim.demand(wants), n1)
    greedy = pod("greedy", "250m")
    greedy["spec"]["containers"][0]["resources"]["limits"] = {"example.com/fpga": "2"}
    assert not fits(sim.demand(greedy), n1)  # one device only


def test_a_new_nodepool_node_s_ephemeral_taints_are_not_held_against_it() -> None:
    """As Karpenter's ``StateNode.Taints()``: until a NodePool's node is initialized, the taints
    every starting node carries (kube-apiserver gives each new Node ``not-ready:NoSchedule``)
    do not keep pods off it, for the simulation nor for the scheduler's filters; other taints
    do, and so do all of them on an initialized node or one no NodePool made."""
    from controlplane.autoscaler.state import as_considered, considered_taints

    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    dedicated = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    new = node("n1")
    new["metadata"]["labels"]["karpenter.sh/nodepool"] = "default"
    new["spec"]["taints"] = [not_ready, dedicated]
    assert considered_taints(new) == [dedicated]
    assert as_considered(new)["spec"]["taints"] == [dedicated] and new["spec"]["taints"] == [not_ready, dedicated]
    initialized = {**new, "metadata": {**new["metadata"], "labels": {**new["metadata"]["labels"],
                                                                     "karpenter.sh/initialized": "true"}}}
    assert considered_taints(initialized) == [not_ready, dedicated] and as_considered(initialized) is initialized
    foreign = node("n2")
    foreign["spec"]["taints"] = [not_ready]
    assert considered_taints(foreign) == [not_ready]

    new["spec"]["taints"] = [not_ready]
    st = ClusterState()
    st.node_added(new)
    fits = SchedulerFits(None, st)  # type: ignore[arg-type]
    sim = Simulated(st, CATALOG)
    fits.refresh()
    [existing] = [n for n in sim.nodes() if n.name == "n1"]
    assert existing.taints == [] and fits(sim.demand(pod("p", "100m")), existing)
