"""Each in-tree plugin alone, on NodeInfos in memory (no server, no loop)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework import Code, CycleState, num_feasible_nodes_to_find
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo, parse_quantity, pod_requests
from controlplane.scheduler.plugins.noderesources import NodeResourcesFit
from controlplane.scheduler.plugins.nodes import (
    NodeAffinity,
    NodeName,
    NodeUnschedulable,
    SchedulingGates,
    TaintToleration,
)
from controlplane.scheduler.plugins.podplacement import InterPodAffinity, PodTopologySpread
from controlplane.scheduler.profile import FitError

from .fakes import FakeHandle, build
from .helpers import node, pod


def ni(obj: dict[str, Any]) -> NodeInfo:
    return NodeInfo(obj["metadata"]["name"], obj)


# --------------------------------------------------------------------------- quantities and requests

def test_quantities_parse_as_kubernetes_does() -> None:
    assert parse_quantity("100m") * 1000 == 100
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1.5") == parse_quantity("1500m")
    with pytest.raises(ValueError, match="quantities must match"):
        parse_quantity("1 cpu")


def test_pod_requests_sum_containers_take_the_max_of_init_containers_and_add_overhead() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "100m"}}}, {"resources": {"limits": {"cpu": "200m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                           {"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}],
        "overhead": {"cpu": "10m"},
    }
    req = pod_requests(spec)
    # containers 300m + sidecar 50m = 350m < init 1000m; + overhead 10m
    assert req["cpu"] == 1010
    assert req["memory"] == 2**30


# --------------------------------------------------------------------------- NodeResourcesFit

def test_node_resources_fit_reports_each_insufficient_resource_and_too_many_pods() -> None:
    plugin = NodeResourcesFit()
    n = ni(node("n", cpu="1", memory="1Gi", pods=1, extra={"nvidia.com/gpu": "1"}))
    n.add_pod(PodInfo(pod("a", cpu="600m", memory="100Mi")))
    p = PodInfo(pod("b", cpu="500m", memory="1Gi", extra={"nvidia.com/gpu": "2"}))
    state = CycleState()
    s = plugin.filter(state, p, n)
    # 2 gpus where the node has 1 at all: evicting cannot help (upstream's Unresolvable)
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert set(s.reasons) == {"Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu",
                              "Too many pods"}
    # within the node's allocatable, only taken: resolvable, by preemption
    s = plugin.filter(state, PodInfo(pod("d", cpu="500m", memory="1Gi", extra={"nvidia.com/gpu": "1"})), n)
    assert s is not None and s.code == Code.UNSCHEDULABLE
    assert set(s.reasons) == {"Insufficient cpu", "Insufficient memory", "Too many pods"}
    small = PodInfo(pod("c", cpu="100m", memory="100Mi"))
    state = CycleState()
    assert plugin.filter(state, small, ni(node("m", cpu="1"))) is None


def test_extended_resource_missing_from_node_does_not_fit() -> None:
    plugin = NodeResourcesFit()
    p = PodInfo(pod("g", extra={"nvidia.com/gpu": "1"}))
    state = CycleState()
    s = plugin.filter(state, p, ni(node("cpu-only")))
    assert s is not None and s.reasons == ("Insufficient nvidia.com/gpu",)
    assert plugin.filter(state, p, ni(node("gpu", extra={"nvidia.com/gpu": "8"}))) is None


def test_ephemeral_storage_fits_or_is_insufficient() -> None:
    """Ephemeral storage is requested by containers (a limit stands in for a missing
    request, init containers count at their peak) and checked against the node's
    allocatable, in bytes, as any resource: a node that declares none has none."""
    plugin = NodeResourcesFit()
    n = ni(node("n", extra={"ephemeral-storage": "10Gi"}))
    n.add_pod(PodInfo(pod("scratch", extra={"ephemeral-storage": "6Gi"})))
    assert n.requested["ephemeral-storage"] == 6 * 2**30
    fits = PodInfo(pod("fits", extra={"ephemeral-storage": "4Gi"}))
    assert plugin.filter(CycleState(), fits, n) is None
    too_big = PodInfo(pod("too-big", extra={"ephemeral-storage": "5Gi"}))
    s = plugin.filter(CycleState(), too_big, n)
    assert s is not None and s.code == Code.UNSCHEDULABLE and s.reasons == ("Insufficient ephemeral-storage",)
    limited = pod("limited")
    limited["spec"]["containers"][0]["resources"]["limits"] = {"ephemeral-storage": "4294967297"}  # 4Gi + 1
    init = pod("init")
    init["spec"]["initContainers"] = [{"name": "unpack", "image": "x",
                                       "resources": {"requests": {"ephemeral-storage": "5G"}}}]  # 5e9 > 4Gi
    for obj in (limited, init):
        s = plugin.filter(CycleState(), PodInfo(obj), n)
        assert s is not None and s.reasons == ("Insufficient ephemeral-storage",), obj["metadata"]["name"]
    s = plugin.filter(CycleState(), fits, ni(node("undeclared")))
    assert s is not None and s.reasons == ("Insufficient ephemeral-storage",)

    # through the whole profile: the node with room is chosen, and when none has, the
    # FitError counts the reason as upstream's
    h, profile = build([node("small", extra={"ephemeral-storage": "1Gi"}),
                        node("large", extra={"ephemeral-storage": "100Gi"})])
    chosen, error = profile.place(CycleState(), PodInfo(pod("p", extra={"ephemeral-storage": "20Gi"})),
                                  list(h.nodes().values()))
    assert error is None and chosen is not None and chosen.name == "large"
    chosen, error = profile.place(CycleState(), PodInfo(pod("q", extra={"ephemeral-storage": "200Gi"})),
                                  list(h.nodes().values()))
    assert chosen is None and error is not None
    assert error.message() == "0/2 nodes are available: 2 Insufficient ephemeral-storage."


def test_least_allocated_prefers_the_emptier_node_and_most_allocated_the_fuller() -> None:
    empty, busy = ni(node("empty")), ni(node("busy"))
    busy.add_pod(PodInfo(pod("x", cpu="3", memory="6Gi")))
    p = PodInfo(pod("p", cpu="500m", memory="1Gi"))
    least, most = NodeResourcesFit("LeastAllocated"), NodeResourcesFit("MostAllocated")
    st = CycleState()
    assert least.score(st, p, empty) > least.score(st, p, busy)
    assert most.score(st, p, busy) > most.score(st, p, empty)


def test_scoring_extended_resources_bin_packs_gpus() -> None:
    plugin = NodeResourcesFit("MostAllocated", [{"name": "nvidia.com/gpu", "weight": 1}])
    a = ni(node("a", extra={"nvidia.com/gpu": "8"}))
    b = ni(node("b", extra={"nvidia.com/gpu": "8"}))
    b.add_pod(PodInfo(pod("x", extra={"nvidia.com/gpu": "6"})))
    p = PodInfo(pod("p", extra={"nvidia.com/gpu": "2"}))
    assert plugin.score(CycleState(), p, b) == 100
    assert plugin.score(CycleState(), p, a) == 25


# --------------------------------------------------------------------------- node plugins

def test_node_name() -> None:
    plugin = NodeName()
    p = PodInfo(pod("p", node_name="n1"))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None and st.node_names == {"n1"}
    s = plugin.filter(st, p, ni(node("n2")))
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert plugin.filter(st, p, ni(node("n1"))) is None


def test_node_unschedulable_unless_tolerated() -> None:
    plugin = NodeUnschedulable()
    cordoned = ni(node("c", unschedulable=True))
    s = plugin.filter(CycleState(), PodInfo(pod("p")), cordoned)
    assert s is not None and s.reasons == ("node(s) were unschedulable",)
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert plugin.filter(CycleState(), PodInfo(pod("q", tolerations=tol)), cordoned) is None


def test_taint_toleration_filter_and_score() -> None:
    plugin = TaintToleration()
    tainted = ni(node("t", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]))
    s = plugin.filter(CycleState(), PodInfo(pod("p")), tainted)
    assert s is not None and s.reasons == ("node(s) had untolerated taint {gpu: true}",)
    assert s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    ok = PodInfo(pod("q", tolerations=[{"key": "gpu", "operator": "Equal", "value": "true"}]))
    assert plugin.filter(CycleState(), ok, tainted) is None
    wild = PodInfo(pod("w", tolerations=[{"operator": "Exists"}]))
    assert plugin.filter(CycleState(), wild, tainted) is None
    soft = ni(node("s", taints=[{"key": "spot", "effect": "PreferNoSchedule"}]))
    clean = ni(node("c"))
    scores = [plugin.score(CycleState(), ok, soft), plugin.score(CycleState(), ok, clean)]
    plugin.normalize_scores(CycleState(), ok, scores)
    assert scores == [0, 100]


def test_node_affinity_selector_required_and_preferred() -> None:
    plugin = NodeAffinity()
    a = ni(node("a", labels={"zone": "z1", "disk": "ssd", "gen": "5"}))
    b = ni(node("b", labels={"zone": "z2", "gen": "3"}))
    p = PodInfo(pod("p", nodeSelector={"zone": "z1"}))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    assert plugin.filter(st, p, a) is None
    s = plugin.filter(st, p, b)
    assert s is not None and s.reasons == ("node(s) didn't match Pod's node affinity/selector",)
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}],
    }}
    q = PodInfo(pod("q", affinity=affinity))
    st = CycleState()
    plugin.pre_filter(st, q)
    assert plugin.filter(st, q, a) is None and plugin.filter(st, q, b) is None  # by label, and by field
    assert plugin.filter(st, q, ni(node("c", labels={"gen": "2"}))) is not None
    assert plugin.pre_score(st, q, [a, b]) is None
    scores = [plugin.score(st, q, a), plugin.score(st, q, b)]
    plugin.normalize_scores(st, q, scores)
    assert scores == [100, 0]
    st = CycleState()
    assert plugin.pre_filter(st, PodInfo(pod("plain"))) is not None  # SKIP
    assert "NodeAffinity" in st.skip_filter


def test_scheduling_gates_hold_at_pre_enqueue() -> None:
    plugin = SchedulingGates()
    s = plugin.pre_enqueue(PodInfo(pod("p", schedulingGates=[{"name": "example.com/wait"}])))
    assert s is not None and "example.com/wait" in s.message
    assert plugin.pre_enqueue(PodInfo(pod("q"))) is None


# --------------------------------------------------------------------------- pod placement plugins

def _spread_setup() -> tuple[FakeHandle, PodTopologySpread]:
    h = FakeHandle([node("a1", labels={"zone": "a"}), node("a2", labels={"zone": "a"}),
                    node("b1", labels={"zone": "b"}), node("nolabel")])
    h.bind_pod(pod("w1", labels={"app": "web"}), "a1")
    h.bind_pod(pod("w2", labels={"app": "web"}), "a2")
    return h, PodTopologySpread(h.nodes)


def test_pod_topology_spread_filters_by_skew_and_missing_label() -> None:
    h, plugin = _spread_setup()
    c = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    p = PodInfo(pod("w3", labels={"app": "web"}, topologySpreadConstraints=[c]))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    nodes = h.nodes()
    s = plugin.filter(st, p, nodes["a1"])  # zone a: 2 + 1 - 0 = 3 > 1
    assert s is not None and s.reasons == ("node(s) didn't match pod topology spread constraints",)
    assert plugin.filter(st, p, nodes["b1"]) is None
    s = plugin.filter(st, p, nodes["nolabel"])
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert plugin.pre_filter(CycleState(), PodInfo(pod("x"))) is not None  # no constraints: SKIP


def test_pod_topology_spread_scores_schedule_anyway() -> None:
    h, plugin = _spread_setup()
    c = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    p = PodInfo(pod("w3", labels={"app": "web"}, topologySpreadConstraints=[c]))
    st = CycleState()
    nodes = [h.nodes()["a1"], h.nodes()["b1"]]
    assert plugin.pre_score(st, p, nodes) is None
    scores = [plugin.score(st, p, n) for n in nodes]
    plugin.normalize_scores(st, p, scores)
    assert scores == [0, 100]


def test_inter_pod_affinity_required_affinity_and_anti_affinity() -> None:
    h = FakeHandle([node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})])
    h.bind_pod(pod("db", labels={"app": "db"}), "a")
    plugin = InterPodAffinity(h.nodes)
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    near = PodInfo(pod("near", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}))
    st = CycleState()
    assert plugin.pre_filter(st, near) is None
    assert plugin.filter(st, near, h.nodes()["a"]) is None
    s = plugin.filter(st, near, h.nodes()["b"])
    assert s is not None and s.reasons == ("node(s) didn't match pod affinity rules",)
    far = PodInfo(pod("far", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}))
    st = CycleState()
    plugin.pre_filter(st, far)
    s = plugin.filter(st, far, h.nodes()["a"])
    assert s is not None and s.reasons == ("node(s) didn't match pod anti-affinity rules",)
    assert plugin.filter(st, far, h.nodes()["b"]) is None


def test_inter_pod_affinity_first_pod_may_match_itself_and_existing_anti_affinity_is_symmetric() -> None:
    h = FakeHandle([node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})])
    plugin = InterPodAffinity(h.nodes)
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
    first = PodInfo(pod("w1", labels={"app": "web"},
                        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}))
    st = CycleState()
    assert plugin.pre_filter(st, first) is None
    assert plugin.filter(st, first, h.nodes()["a"]) is None  # nothing matches anywhere: itself counts
    lonely = {"labelSelector": {"matchLabels": {"app": "batch"}}, "topologyKey": "zone"}
    h.bind_pod(pod("hermit", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                            [lonely]}}), "a")
    batch = PodInfo(pod("job", labels={"app": "batch"}))
    st = CycleState()
    assert plugin.pre_filter(st, batch) is None
    s = plugin.filter(st, batch, h.nodes()["a"])
    assert s is not None and s.reasons == ("node(s) didn't satisfy existing pods anti-affinity rules",)
    assert plugin.filter(st, batch, h.nodes()["b"]) is None


# --------------------------------------------------------------------------- the profile

def test_percentage_of_nodes_to_score_as_upstream() -> None:
    assert num_feasible_nodes_to_find(50) == 50
    assert num_feasible_nodes_to_find(1000) == 420  # 50 - 8 = 42 %
    assert num_feasible_nodes_to_find(5000) == 500
    assert num_feasible_nodes_to_find(100_000) == 5000
    assert num_feasible_nodes_to_find(5000, percentage=1) == 100  # never fewer than 100
    assert num_feasible_nodes_to_find(5000, percentage=100) == 5000


def test_filtering_stops_after_enough_feasible_nodes_and_rotates_its_start() -> None:
    _, profile = build([node(f"n{i}") for i in range(1000)])
    p = PodInfo(pod("p"))
    st = CycleState()
    assert profile.run_pre_filter(st, p) is None
    feasible, failed = profile.find_feasible(st, p, [NodeInfo(f"n{i}", node(f"n{i}")) for i in range(1000)])
    assert len(feasible) == 420 and not failed
    assert profile._next_start == 420


def test_fit_error_message_counts_reasons_as_upstream() -> None:
    h, profile = build([node("small", cpu="1"), node("tainted", taints=[{"key": "k", "effect": "NoSchedule"}]),
                        node("big", cpu="1", memory="1Gi")])
    chosen, err = profile.place(CycleState(), PodInfo(pod("p", cpu="2", memory="2Gi")), list(h.nodes().values()))
    assert chosen is None and err is not None
    # upstream sorts the "count reason" strings
    assert err.message() == ("0/3 nodes are available: 1 Insufficient memory, "
                             "1 node(s) had untolerated taint {k: }, 2 Insufficient cpu.")
    assert err.rejectors() == {"TaintToleration", "NodeResourcesFit"}
    assert isinstance(err, FitError)


def test_feasible_nodes_for_hypothetical_nodes() -> None:
    """The autoscaler's question: which of these (maybe not yet existing) nodes could the pod go on?"""
    _, profile = build([])
    templates = [NodeInfo("small", node("small", cpu="1")), NodeInfo("large", node("large", cpu="16")),
                 NodeInfo("gpu", node("gpu", cpu="16", extra={"nvidia.com/gpu": "8"}))]
    ok, why = profile.feasible_nodes(PodInfo(pod("p", cpu="4")), templates)
    assert [n.name for n in ok] == ["large", "gpu"]
    assert why["small"].reasons == ("Insufficient cpu",)
    ok, _ = profile.feasible_nodes(PodInfo(pod("g", cpu="1", extra={"nvidia.com/gpu": "1"})), templates)
    assert [n.name for n in ok] == ["gpu"]


def test_the_unrolled_resource_check_gives_the_plugins_verdicts() -> None:
    import random

    rnd = random.Random(5)
    objs = []
    for i in range(90):
        taints = [{"key": "k", "effect": rnd.choice(["NoSchedule", "PreferNoSchedule"])}] if i % 7 == 0 else None
        objs.append(node(f"n{i}", cpu=rnd.choice(["1", "2", "4"]), memory=rnd.choice(["1Gi", "4Gi"]),
                         pods=rnd.choice([1, 3, 110]), taints=taints, unschedulable=i % 11 == 0,
                         extra={"nvidia.com/gpu": "2"} if i % 3 == 0 else None))
    h, profile = build(objs)
    for i, n in enumerate(h.nodes().values()):
        for j in range(rnd.randrange(3)):
            n.add_pod(PodInfo(pod(f"x{i}-{j}", cpu=rnd.choice(["100m", "900m"]), memory="512Mi")))
    shapes = [pod("a", cpu="500m"), pod("b", cpu=None, memory=None), pod("c", cpu="1", extra={"nvidia.com/gpu": "1"}),
              pod("d", memory="3Gi", tolerations=[{"operator": "Exists"}]),
              pod("e", cpu="64"), pod("f", cpu="100m", extra={"nvidia.com/gpu": "3"})]  # fit nowhere
    nodes = list(h.nodes().values())
    for obj in shapes:
        p = PodInfo(obj)
        st = CycleState()
        assert profile.run_pre_filter(st, p) is None
        filters = profile.filters_for(st)
        fast_ok, fast_failed = profile._find_feasible_resources(st, p, nodes, filters)
        profile._next_start = 0
        slow_ok, slow_failed = profile.find_feasible(st, p, nodes)
        profile._next_start = 0
        assert [n.name for n in fast_ok] == [n.name for n in slow_ok]
        if not slow_ok:  # the reasons are the FitError's: reported in full when nothing fits
            assert {k: v.reasons for k, v in fast_failed.items()} == {k: v.reasons for k, v in slow_failed.items()}
            assert len(fast_failed) == len(nodes)
            continue
        plain = [n for n in slow_ok if not n.taints]
        assert profile.run_pre_score(st, p, plain) is None
        assert profile._only_default_fit_scores(st)  # no taint among them: TaintToleration skips
        balanced = "NodeResourcesBalancedAllocation" not in st.skip_score  # skipped for "b", best effort
        assert balanced == (obj is not shapes[1])
        assert profile._least_or_most_allocated(p, plain, balanced) == profile.score_nodes(st, p, plain)


def test_feasible_nodes_from_api_objects_for_the_autoscaler() -> None:
    from controlplane.scheduler.feasibility import feasible_nodes

    nodes = [node("busy", cpu="2"), node("template-large", cpu="8"),
             node("template-gpu", cpu="8", extra={"nvidia.com/gpu": "4"}),
             node("tainted", cpu="8", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])]
    fits, why = feasible_nodes(pod("p", cpu="1500m"), nodes, pods_on={"busy": [pod("running", cpu="1")]})
    assert fits == ["template-large", "template-gpu"]
    assert why == {"busy": ["Insufficient cpu"], "tainted": ["node(s) had untolerated taint {dedicated: x}"]}
    fits, _ = feasible_nodes(pod("g", extra={"nvidia.com/gpu": "1"}), nodes)
    assert fits == ["template-gpu"]


def test_preemption_picks_the_node_with_the_least_important_victims_and_reprieves_the_rest() -> None:
    from controlplane.scheduler.plugins.preemption import select_victims

    h, profile = build([node("a", cpu="2"), node("b", cpu="2"), node("c", cpu="2")])
    h.bind_pod(pod("a-low", cpu="1", priority=1), "a")
    h.bind_pod(pod("a-mid", cpu="1", priority=50), "a")
    h.bind_pod(pod("b-low1", cpu="1", priority=5), "b")
    h.bind_pod(pod("b-low2", cpu="1", priority=5), "b")
    h.bind_pod(pod("c-high", cpu="2", priority=1000), "c")
    vip = PodInfo(pod("vip", cpu="1", priority=100))
    st = CycleState()
    assert profile.run_pre_filter(st, vip) is None
    nodes = list(h.nodes().values())
    _, failed = profile.find_feasible(st, vip, nodes, sample=False)
    assert set(failed) == {"a", "b", "c"}
    chosen = select_victims(profile, st, vip, nodes, failed)
    assert chosen is not None
    target, victims = chosen
    # on a, evicting a-low (priority 1) is enough; on b one of two priority-5 pods; c has nothing lower
    assert target.name == "a" and [v.name for v in victims] == ["a-low"]
    failed["a"] = failed["a"].__class__(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "taint", plugin="TaintToleration")
    chosen = select_victims(profile, st, vip, nodes, failed)
    assert chosen is not None and chosen[0].name == "b" and len(chosen[1]) == 1


# --------------------------------------------------------------------------- VolumeBinding

class _VolumeListers(FakeHandle):
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        super().__init__(nodes)
        self.listed: dict[str, dict[str, Any]] = {"persistentvolumeclaims": {}, "persistentvolumes": {},
                                                  "storageclasses": {}}

    def lister(self, resource: str) -> dict[str, Any]:
        return self.listed.get(resource, {})


def test_volume_binding_holds_a_pod_whose_bound_claim_names_a_volume_not_seen_yet() -> None:
    """The claim's Bound event reached the scheduler before its volume's (two informers): the
    pod is not placed blind to the volume's node affinity, every node fails as upstream's
    checkBoundClaims says, and the volume's arrival (an event the plugin registers) lets it go
    where the volume is."""
    from controlplane.scheduler.framework import ActionType
    from controlplane.scheduler.plugins.volumebinding import NODE_CONFLICT, PV_NOT_EXIST, VolumeBinding

    h = _VolumeListers([node("a"), node("b")])
    plugin = VolumeBinding(h)
    h.listed["persistentvolumeclaims"]["default/data"] = {
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "local-disk", "storageClassName": ""}, "status": {"phase": "Bound"}}
    p = PodInfo(pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]))
    state = CycleState()
    assert plugin.pre_filter(state, p) is None
    for name in ("a", "b"):
        s = plugin.filter(state, p, h.nodes()[name])
        assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and s.message == PV_NOT_EXIST
    assert any(e.resource == "persistentvolumes" and e.actions & ActionType.ADD for e in plugin.events_to_register())

    h.listed["persistentvolumes"]["local-disk"] = {"metadata": {"name": "local-disk"}, "spec": {"nodeAffinity": {
        "required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b"]}]}]}}}}
    state = CycleState()
    assert plugin.pre_filter(state, p) is None
    s = plugin.filter(state, p, h.nodes()["a"])
    assert s is not None and s.message == NODE_CONFLICT
    assert plugin.filter(state, p, h.nodes()["b"]) is None
    # a bound volume without node affinity: nothing to filter
    h.listed["persistentvolumes"]["local-disk"]["spec"] = {}
    state = CycleState()
    s = plugin.pre_filter(state, p)
    assert s is not None and s.code == Code.SKIP
