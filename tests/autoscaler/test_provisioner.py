"""The provisioning simulation: cheapest fit, packing, limits, DRA devices, requirements. Pure."""

from __future__ import annotations

from typing import Any

from controlplane.autoscaler.catalog import Catalog
from controlplane.autoscaler.nodepool import NodePoolView
from controlplane.autoscaler.provisioner import Provisioner, choose, daemon_overhead, one_domain
from controlplane.autoscaler.requirements import Requirements
from controlplane.autoscaler.simulation import DeviceClasses, PodDemand, SimNode, demand, resource_fit
from controlplane.nodes.instancetypes import GpuDevice, InstanceType

CATALOG = Catalog.of([
    InstanceType("small", cpu="2", memory="8Gi", pods=20, price=0.1),
    InstanceType("medium", cpu="8", memory="32Gi", pods=50, price=0.4),
    InstanceType("large", cpu="32", memory="128Gi", pods=110, price=1.6),
    InstanceType("gpu-1", cpu="8", memory="32Gi", price=1.0, extended_resources={"nvidia.com/gpu": "1"},
                 gpus=(GpuDevice("L4", "24Gi", 1),)),
    InstanceType("gpu-8", cpu="96", memory="768Gi", price=10.0, extended_resources={"nvidia.com/gpu": "8"},
                 gpus=(GpuDevice("A100", "80Gi", 8),)),
])
CLASSES = DeviceClasses({"gpu": {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [
    {"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}}})
TEMPLATES = {"default/one-gpu": {"metadata": {"name": "one-gpu", "namespace": "default"}, "spec": {"spec": {
    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}}


def pool(name: str = "default", **spec: Any) -> NodePoolView:
    template_spec = {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                     "requirements": spec.pop("requirements", []), **spec.pop("template", {})}
    return NodePoolView.parse({"metadata": {"name": name, "uid": "u"},
                               "spec": {"template": {"spec": template_spec}, **spec}})


def pod(name: str, cpu: str = "1", *, gpus: int = 0, dra: bool = False, **spec: Any) -> dict:
    resources: dict = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    body: dict = {"containers": [{"name": "c", "image": "i", "resources": resources}], **spec}
    if dra:
        body["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return {"metadata": {"name": name, "namespace": "default"}, "spec": body}


def demands(*pods: dict) -> list:
    return [demand(p, {}, TEMPLATES, CLASSES) for p in pods]


def launched(plan: Any) -> list[str]:
    return sorted(c.launch[0].name for c in plan.claims)


def test_one_small_pod_gets_the_cheapest_type_that_fits() -> None:
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [pool()])
    assert launched(plan) == ["small"]
    offering = plan.claims[0].launch[1]
    assert offering.capacity_type == "on-demand" and offering.price == 0.1


def test_pods_are_packed_while_that_is_no_dearer() -> None:
    # a small node holds two 1-cpu pods; a third would need a medium (0.4 > 0.1 + 0.1): a new small one
    plan = Provisioner(CATALOG).plan(demands(*(pod(f"p{i}", "1") for i in range(10))), [], [pool()])
    assert launched(plan) == ["small"] * 5
    assert [len(c.pods) for c in plan.claims] == [2] * 5
    # 40 pods of 0.75 cpu: medium (8 cpu, 0.4) holds 10 for the price of 4 smalls holding 2 each (0.4)
    plan = Provisioner(CATALOG).plan(demands(*(pod(f"q{i}", "750m") for i in range(40))), [], [pool()])
    cost = sum(c.launch[1].price for c in plan.claims)
    assert cost <= 40 / 2 * 0.1 + 1e-9


def test_a_pod_too_big_for_every_type_is_unschedulable() -> None:
    plan = Provisioner(CATALOG).plan(demands(pod("huge", "200")), [], [pool()])
    assert plan.claims == [] and list(plan.unschedulable) == ["default/huge"]


def test_limits_bound_the_capacity_launched() -> None:
    p = pool(limits={"cpu": "8"})
    plan = Provisioner(CATALOG).plan(demands(*(pod(f"p{i}", "1") for i in range(12))), [], [p])
    cpu = sum(c.launch[0].allocatable["cpu"] for c in plan.claims)
    assert cpu <= 8000
    assert len(plan.unschedulable) == 12 - sum(len(c.pods) for c in plan.claims) > 0


def test_limits_count_what_the_nodepool_already_has() -> None:
    p = pool(limits={"cpu": "10"})
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [p], usage={"default": {"cpu": 9000}})
    assert plan.claims == [] and "default/a" in plan.unschedulable


def test_node_limit() -> None:
    p = pool(limits={"nodes": "1"})
    plan = Provisioner(CATALOG).plan(demands(pod("a", "60"), pod("b", "60")), [], [p])
    assert len(plan.claims) == 1 and len(plan.unschedulable) == 1


def test_gpu_pods_by_extended_resource_go_to_gpu_types() -> None:
    plan = Provisioner(CATALOG).plan(demands(pod("g", "1", gpus=1)), [], [pool()])
    assert launched(plan) == ["gpu-1"]


def test_dra_claims_count_devices_of_the_class_driver() -> None:
    d = demands(pod("g", "1", dra=True))[0]
    assert d.requests["devices/gpu.nvidia.com"] == 1000
    plan = Provisioner(CATALOG).plan([d], [], [pool()])
    assert launched(plan) == ["gpu-1"]


def test_gpu_pods_go_where_gpus_are_cheapest() -> None:
    # eight 1-GPU nodes (8.0) are cheaper than one 8-GPU node (10.0)
    plan = Provisioner(CATALOG).plan(demands(*(pod(f"g{i}", "1", dra=True) for i in range(9))), [], [pool()])
    assert launched(plan) == ["gpu-1"] * 9
    # pods of 40 cpu and a GPU fit only the 8-GPU type: two share one
    plan = Provisioner(CATALOG).plan(demands(*(pod(f"h{i}", "40", dra=True) for i in range(3))), [], [pool()])
    assert launched(plan) == ["gpu-8", "gpu-8"] and sorted(len(c.pods) for c in plan.claims) == [1, 2]


def test_an_allocated_claim_needs_no_new_device() -> None:
    p = pod("g", "1")
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    claims = {"default/mine": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com"}}]}}, "status": {"allocation": {"devices": {"results": []}}}}}
    assert "devices/gpu.nvidia.com" not in demand(p, claims, {}, CLASSES).requests


def test_existing_capacity_is_used_first() -> None:
    existing = SimNode("n1", Requirements.from_labels({"karpenter.sh/nodepool": "default"}), [],
                       {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 10_000})
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1"), pod("b", "1"), pod("c", "3")), [existing], [pool()])
    # largest first: c (3 cpu) and one 1-cpu pod fill n1's 4 cpu; the other needs a new (small) node
    assert len(plan.existing) == 2 and plan.existing["default/c"] == "n1"
    assert launched(plan) == ["small"] and len(plan.claims[0].pods) == 1
    assert existing.requested["cpu"] == 4000


def test_spot_is_chosen_only_where_the_nodepool_allows_it() -> None:
    spot_ok = pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                                  "values": ["spot", "on-demand"]}])
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [spot_ok])
    assert plan.claims[0].launch[1].capacity_type == "spot"
    wants_spot = pod("b", "1", nodeSelector={"karpenter.sh/capacity-type": "spot"})
    plan = Provisioner(CATALOG).plan(demands(wants_spot), [], [pool()])  # on-demand only by default
    assert plan.claims == [] and plan.unschedulable


def test_zone_and_instance_type_requirements_narrow_the_choice() -> None:
    p = pool(requirements=[{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]},
                           {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["small"]}])
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [p])
    option, offering = plan.claims[0].launch
    assert option.name == "medium" and offering.zone == "zone-b"
    reqs = plan.claims[0].claim_requirements()
    assert reqs["topology.kubernetes.io/zone"].values == {"zone-b"}
    assert "small" not in reqs["node.kubernetes.io/instance-type"].values


def test_the_kwok_providers_instance_labels_narrow_the_choice() -> None:
    # Karpenter's KWOK provider labels each instance type karpenter.kwok.sh/instance-cpu, -memory,
    # -family and -size: a NodePool's Gt on the cpu count, or a pod's selector, holds
    gt4 = pool(requirements=[{"key": "karpenter.kwok.sh/instance-cpu", "operator": "Gt", "values": ["4"]}])
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [gt4])
    assert launched(plan) == ["medium"]
    assert "small" not in plan.claims[0].claim_requirements()["node.kubernetes.io/instance-type"].values
    big = pod("b", "1", nodeSelector={"karpenter.kwok.sh/instance-memory": "128Gi"})
    assert launched(Provisioner(CATALOG).plan(demands(big), [], [pool()])) == ["large"]
    # the family: the name up to a '.' or '-' (gpu-1: gpu), else its first letter (medium: m)
    family = pod("c", "1", nodeSelector={"karpenter.kwok.sh/instance-family": "gpu"})
    assert launched(Provisioner(CATALOG).plan(demands(family), [], [pool()])) == ["gpu-1"]
    family = pod("d", "1", nodeSelector={"karpenter.kwok.sh/instance-family": "m"})
    assert launched(Provisioner(CATALOG).plan(demands(family), [], [pool()])) == ["medium"]


def test_pod_affinity_terms_are_alternatives() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-c"]}]},
    ]}}}
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1", affinity=affinity)), [], [pool()])
    assert plan.claims[0].launch[1].zone == "zone-c"  # no arm64 type: the second term


def test_taints_need_tolerations_and_weight_orders_nodepools() -> None:
    gpu_pool = pool("gpu", weight=50, template={"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]})
    plain = pool("plain")
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [gpu_pool, plain])
    assert plan.claims[0].pool.name == "plain"
    tolerant = pod("b", "1", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    plan = Provisioner(CATALOG).plan(demands(tolerant), [], [plain, gpu_pool])
    assert plan.claims[0].pool.name == "gpu"


def test_the_launcher_buys_the_cheapest_type_the_claim_allows() -> None:
    plan = Provisioner(CATALOG).plan(demands(pod("p", "3")), [], [pool()])
    c = plan.claims[0]
    assert "small" not in c.claim_requirements()["node.kubernetes.io/instance-type"].values
    claim = {"spec": {"requirements": c.claim_requirements().to_api(),
                      "resources": {"requests": {"cpu": "3", "memory": "1Gi", "pods": "1"}}}}
    chosen = choose(CATALOG, claim)
    assert chosen is not None and chosen[0].name == c.launch[0].name == "medium"


def test_identical_pods_cost_a_constant_number_of_fit_checks_each() -> None:
    """Pods alike are simulated once per node they could open: the fit checks grow
    with the pods, not with pods times the nodes already planned (which made a
    thousand-pod batch take seconds)."""
    checks = 0

    def counting_fit(pod: PodDemand, node: SimNode) -> bool:  # the names of the Fits protocol
        nonlocal checks
        checks += 1
        return resource_fit(pod, node)

    for count in (10, 1000):
        checks = 0
        many = demands(*(pod(f"g{i}", "1", dra=True) for i in range(count)))
        plan = Provisioner(CATALOG, fits=counting_fit).plan(many, [], [pool()])
        assert sum(len(c.pods) for c in plan.claims) == count and len(plan.claims) == count
        assert checks <= 2 * count + 2 * len(CATALOG)


RACK = "topology.controlplane.io/rack"
ZONE = "topology.kubernetes.io/zone"


def pinned(claim: Any) -> tuple[str | None, str | None]:
    reqs = claim.claim_requirements()
    return (reqs[ZONE].single() if ZONE in reqs else None, reqs[RACK].single() if RACK in reqs else None)


def test_a_gang_with_a_rack_constraint_gets_its_new_nodes_in_one_rack() -> None:
    # 20 cpu each: one pod per large node; the gang's three share a rack, the loner is left alone
    gang = demands(*(pod(f"t{i}", "20") for i in range(3)))
    alone = demands(pod("alone", "20"))
    plan = Provisioner(CATALOG).plan(gang + alone, [], [pool()])
    one_domain(plan, {d.key: ("default/train", RACK) for d in gang}, [])
    domains = {pinned(c) for c in plan.claims if c.pods[0].key != "default/alone"}
    assert len(domains) == 1
    (zone, rack), = domains
    assert zone is not None and rack is not None and rack.startswith(f"{zone}-rack-")
    assert all(c.launch[1].zone == zone for c in plan.claims if c.pods[0].key != "default/alone")
    assert [pinned(c) for c in plan.claims if c.pods[0].key == "default/alone"] == [(None, None)]
    # the same group gets the same rack in a later batch; a zone constraint pins only the zone
    again = Provisioner(CATALOG).plan(demands(pod("t3", "20")), [], [pool()])
    one_domain(again, {"default/t3": ("default/train", RACK)}, [])
    assert pinned(again.claims[0]) == (zone, rack)
    by_zone = Provisioner(CATALOG).plan(demands(pod("z", "20")), [], [pool()])
    one_domain(by_zone, {"default/z": ("default/other", ZONE)}, [])
    assert pinned(by_zone.claims[0])[1] is None and pinned(by_zone.claims[0])[0] is not None


def test_a_gang_partly_on_existing_nodes_gets_the_rest_in_their_rack() -> None:
    n1 = SimNode("n1", Requirements.from_labels({ZONE: "zone-b", RACK: "zone-b-rack-5"}), [],
                 {"cpu": 32000, "memory": 128 * 2**30 * 1000, "pods": 110_000})
    gang = demands(*(pod(f"t{i}", "20") for i in range(3)))
    plan = Provisioner(CATALOG).plan(gang, [n1], [pool()])
    assert len(plan.existing) == 1 and len(plan.claims) == 2
    one_domain(plan, {d.key: ("default/train", RACK) for d in gang}, [n1])
    assert [pinned(c) for c in plan.claims] == [("zone-b", "zone-b-rack-5")] * 2
    # new nodes that cannot join n1's rack (their NodePool allows only zone-a) still share one of their own
    elsewhere = pool(requirements=[{"key": ZONE, "operator": "In", "values": ["zone-a"]}])
    n1.requested = {}
    plan = Provisioner(CATALOG).plan(gang, [n1], [elsewhere])
    one_domain(plan, {d.key: ("default/train", RACK) for d in gang}, [n1])
    domains = {pinned(c) for c in plan.claims}
    assert len(domains) == 1 and str(next(iter(domains))[1]).startswith("zone-a-rack-")


IT = "node.kubernetes.io/instance-type"


def test_min_values_keep_a_nodeclaim_flexible_or_the_pod_unschedulable() -> None:
    """Karpenter's minValues: the instance types a NodeClaim names must offer that many values of
    the key. A 1-cpu pod fits all five types: the claim names them and launches the cheapest. A
    30-cpu pod fits only large and gpu-8: with minValues 3 no node can open for it."""
    flexible = pool(requirements=[{"key": IT, "operator": "Exists", "minValues": 3}])
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [flexible])
    assert launched(plan) == ["small"]
    reqs = plan.claims[0].claim_requirements()
    assert len(reqs[IT].values) == 5 and reqs[IT].min_values == 3
    assert {"key": IT, "operator": "In", "values": sorted(reqs[IT].values), "minValues": 3} in reqs.to_api()
    plan = Provisioner(CATALOG).plan(demands(pod("big", "30")), [], [flexible])
    assert plan.claims == []
    assert plan.unschedulable == {"default/big": f"minValues requirement is not met for label(s) ({IT})"}
    # the same pod without the minValues gets its node
    plan = Provisioner(CATALOG).plan(demands(pod("big", "30")), [], [pool()])
    assert launched(plan) == ["large"]


def test_a_pod_does_not_join_a_node_that_would_lose_its_min_values() -> None:
    """Three 1-cpu pods: without minValues the third joins the first two (a 4-cpu type at 0.12
    is cheaper than a second 2-cpu node at 0.1 more); with minValues 4 it would narrow the node
    to three types, so it opens a node of its own, which can still name all four."""
    catalog = Catalog.of([InstanceType("a2", cpu="2", memory="8Gi", price=0.1),
                          InstanceType("b4", cpu="4", memory="16Gi", price=0.12),
                          InstanceType("c4", cpu="4", memory="16Gi", price=0.15),
                          InstanceType("d8", cpu="8", memory="32Gi", price=0.3)])
    pods = demands(pod("a", "1"), pod("b", "1"), pod("c", "1"))
    plan = Provisioner(catalog).plan(pods, [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [3] and launched(plan) == ["b4"]
    four = pool(requirements=[{"key": IT, "operator": "Exists", "minValues": 4}])
    plan = Provisioner(catalog).plan(demands(pod("a", "1"), pod("b", "1"), pod("c", "1")), [], [four])
    assert [len(c.pods) for c in plan.claims] == [2, 1] and launched(plan) == ["a2", "a2"]
    assert not plan.unschedulable


def test_min_values_survive_intersection_and_are_parsed_from_the_api() -> None:
    a = Requirements.parse([{"key": IT, "operator": "In", "values": ["x", "y", "z"], "minValues": 2}])
    b = Requirements.parse([{"key": IT, "operator": "NotIn", "values": ["z"]}])
    assert a.intersect(b)[IT].min_values == 2 and b.intersect(a)[IT].min_values == 2
    c = Requirements.parse([{"key": IT, "operator": "Exists", "minValues": 3}])
    assert a.intersect(c)[IT].min_values == 3


def test_a_label_no_nodepool_defines_has_no_known_values() -> None:
    """Karpenter's Compatible: a pod requiring a label that is neither well-known nor named by the
    NodePool (requirements or template labels) gets no node from it; NotIn and DoesNotExist need none."""
    team = pod("a", "1", nodeSelector={"example.com/team": "a"})
    plan = Provisioner(CATALOG).plan(demands(team), [], [pool()])
    assert launched(plan) == [] and plan.unschedulable == {
        "default/a": 'incompatible with nodepool "default", daemonset overhead={}, incompatible requirements, '
                     'label "example.com/team" does not have known values'}
    worker = pod("w", "1", nodeSelector={"node-role.kubernetes.io/worker": ""})
    assert launched(Provisioner(CATALOG).plan(demands(worker), [], [pool()])) == []
    # defined by the NodePool's requirements, or its template labels: provisioned
    exists = [{"key": "example.com/team", "operator": "Exists"}]
    assert launched(Provisioner(CATALOG).plan(demands(team), [], [pool(requirements=exists)])) == ["small"]
    labelled = NodePoolView.parse({"metadata": {"name": "labelled", "uid": "u"}, "spec": {"template": {
        "metadata": {"labels": {"example.com/team": "a"}},
        "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}}}})
    assert launched(Provisioner(CATALOG).plan(demands(team), [], [labelled])) == ["small"]
    # well-known labels (and the provider's rack) need no definition; a NotIn needs none either
    zone = pod("z", "1", nodeSelector={"topology.kubernetes.io/zone": "zone-a", "topology.controlplane.io/rack":
                                       "zone-a-rack-0"})
    assert launched(Provisioner(CATALOG).plan(demands(zone), [], [pool()])) == ["small"]
    not_gpu = pod("n", "1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/gpu", "operator": "NotIn",
                                                     "values": ["yes"]}]}]}}})
    assert launched(Provisioner(CATALOG).plan(demands(not_gpu), [], [pool()])) == ["small"]
    # the providers' own labels are well-known to them (KWOK's instance-family, AWS's generation...)
    family = pod("f", "1", nodeSelector={"karpenter.kwok.sh/instance-family": "s"})
    assert launched(Provisioner(CATALOG).plan(demands(family), [], [pool()])) == ["small"]
    # a pod joining a node another pod opened is held to the same rule
    both = Provisioner(CATALOG).plan(demands(pod("first", "500m"), team), [], [pool()])
    assert launched(both) == ["small"] and "default/a" in both.unschedulable


def test_daemonset_overhead_is_held_on_new_nodes() -> None:
    """Karpenter's daemonset overhead: a new node must hold the pods of the DaemonSets that would
    run on it beside the pods it is launched for; DaemonSets whose template does not tolerate the
    NodePool's taints, or whose node requirements it cannot meet, do not count."""
    def ds(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}], **spec}}}}

    gpu_pool = pool("gpu", template={"taints": [{"key": "gpu", "effect": "NoSchedule"}]})
    daemonsets = [ds("agent", "1"), ds("gpu-agent", "500m", tolerations=[{"key": "gpu", "operator": "Exists"}]),
                  ds("arm-only", "4", nodeSelector={"kubernetes.io/arch": "arm64"}),
                  ds("labelled", "4", nodeSelector={"example.com/team": "x"})]
    amd64 = pool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    overhead = daemon_overhead(daemonsets, [amd64, gpu_pool])
    # the agents (a toleration does not keep a pod off untainted nodes); not the arm64 nor the labelled one
    assert overhead["default"]["cpu"] == 1500 and overhead["default"]["pods"] == 2000
    assert overhead["gpu"]["cpu"] == 500  # only the DaemonSet tolerating its taint
    alone = Provisioner(CATALOG).plan(demands(pod("a", "500m")), [], [amd64])
    assert launched(alone) == ["small"]  # 2 CPUs hold the pod alone...
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1"), pod("b", "500m")), [], [amd64], overhead=overhead)
    assert launched(plan) == ["medium"]  # ...not with the agents' beside it
    assert plan.claims[0].requested["cpu"] == 3000 and plan.claims[0].requested["pods"] == 4000
    assert daemon_overhead([], [pool()]) == {}


ZONE = "topology.kubernetes.io/zone"


def test_a_pod_no_nodepool_takes_is_told_each_nodepools_reason() -> None:
    """As Karpenter's FailedScheduling message: each NodePool tried, heaviest first, says why it
    refused the pod, in Karpenter's words ("; " between them), which users grep their events for."""
    gpu = pool("gpu", weight=10, template={"taints": [{"key": "nvidia.com/gpu", "value": "true",
                                                       "effect": "NoSchedule"}]})
    zonal = pool("zonal", requirements=[{"key": ZONE, "operator": "NotIn", "values": ["zone-c"]}])
    plan = Provisioner(CATALOG).plan(demands(pod("zc", "1", nodeSelector={ZONE: "zone-c"})), [], [zonal, gpu])
    assert plan.unschedulable == {"default/zc": (
        'incompatible with nodepool "gpu", daemonset overhead={}, '
        "did not tolerate taint (taint=nvidia.com/gpu=true:NoSchedule); "
        'incompatible with nodepool "zonal", daemonset overhead={}, incompatible requirements, '
        f"key {ZONE}, {ZONE} In [zone-c] not in {ZONE} NotIn [zone-c]")}


def test_a_pod_beyond_a_nodepools_limits_or_every_type_is_told_so() -> None:
    capped = pool("capped", limits={"cpu": "4"})
    plan = Provisioner(CATALOG).plan(demands(pod("six", "6")), [], [capped])
    assert plan.unschedulable == {"default/six": 'all available instance types exceed limits for nodepool "capped"'}
    one = pool("one", limits={"nodes": "1"})
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1")), [], [one], usage={"one": {"nodes": 1000}})
    assert plan.unschedulable == {"default/a": 'node limits have been exhausted for nodepool "one"'}
    # no type is that large: the requirements and the requests it was judged on are named
    plan = Provisioner(CATALOG).plan(demands(pod("huge", "1000")), [], [pool()], overhead={"default": {"cpu": 500}})
    why = plan.unschedulable["default/huge"]
    assert why.startswith('incompatible with nodepool "default", daemonset overhead={"cpu":"500m"}, '
                          "no instance type has enough resources, requirements=karpenter.sh/capacity-type In "
                          "[on-demand], karpenter.sh/nodepool In [default], resources=")
    assert '"cpu":"1000500m"' in why
    # an arm64 pod, where every type is amd64, and too large: both said
    arm = pod("arm", "1000", nodeSelector={"kubernetes.io/arch": "arm64"})
    why = Provisioner(CATALOG).plan(demands(arm), [], [pool()]).unschedulable["default/arm"]
    assert "no instance type met the scheduling requirements or had enough resources, requirements=" in why


def _spread(name: str, app: str = "web", skew: int = 1, **spec: Any) -> dict:
    p = pod(name, "1", topologySpreadConstraints=[{
        "maxSkew": skew, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}}}], **spec)
    p["metadata"]["labels"] = {"app": app}
    return p


def zones(plan: Any) -> list[str]:
    return sorted(c.launch[1].zone for c in plan.claims)


def test_new_nodes_spread_pods_over_zones_as_their_constraints_ask() -> None:
    """As Karpenter's topology: a pod with a zone topologySpreadConstraint (DoNotSchedule) goes
    to a new node pinned to the zone with the fewest matching pods among those its NodePools
    offer, so three replicas get nodes in three zones, not three in the cheapest one."""
    plan = Provisioner(CATALOG).plan(demands(*(_spread(f"w{i}") for i in range(3))), [], [pool()])
    assert zones(plan) == ["zone-a", "zone-b", "zone-c"]
    assert all(c.requirements[ZONE].single() for c in plan.claims)  # pinned: the launch keeps the zone
    # a NodePool that leaves zone-c out: four replicas, two a zone
    two = pool(requirements=[{"key": ZONE, "operator": "NotIn", "values": ["zone-c"]}])
    plan = Provisioner(CATALOG).plan(demands(*(_spread(f"w{i}") for i in range(4))), [], [two])
    assert sorted(c.launch[1].zone for c in plan.claims for _ in c.pods) == ["zone-a"] * 2 + ["zone-b"] * 2
    # the pods already running count: one in zone-a, so the next goes elsewhere
    node = SimNode("n-a", Requirements.from_labels({ZONE: "zone-a"}), [], {"cpu": 0, "memory": 0, "pods": 0},
                   pods=[_spread("old")])
    plan = Provisioner(CATALOG).plan(demands(_spread("new")), [node], [pool()])
    assert zones(plan) in (["zone-b"], ["zone-c"])
    # other apps' pods, and pods without the constraint, are not held to it
    plan = Provisioner(CATALOG).plan(demands(pod("a", "1"), pod("b", "1"), pod("c", "1")), [], [pool()])
    assert set(zones(plan)) == {"zone-a"}
    plan = Provisioner(CATALOG).plan(demands(_spread("w0"), _spread("x0", app="other")), [], [pool()])
    assert zones(plan) == ["zone-a"]  # each the first of its app: both in the cheapest zone, on one node
    huge = _spread("huge")
    huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000"
    why = Provisioner(CATALOG).plan(demands(huge), [], [pool()]).unschedulable["default/huge"]
    assert why.startswith('incompatible with nodepool "default"') and "no instance type has enough resources" in why


HOSTNAME = "kubernetes.io/hostname"


def test_pods_that_must_not_share_a_node_get_new_nodes_of_their_own() -> None:
    """As Karpenter's: a required pod anti-affinity on the hostname, or a hostname spread of
    maxSkew 1 (DoNotSchedule), keeps matching pods off one new node, so three replicas get three
    nodes at once (not one node the scheduler can put only one of them on)."""
    def anti(name: str) -> dict:
        p = pod(name, "500m", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}]}})
        p["metadata"]["labels"] = {"app": "db"}
        return p

    def spread(name: str, skew: int) -> dict:
        p = pod(name, "500m", topologySpreadConstraints=[{"maxSkew": skew, "topologyKey": HOSTNAME,
                                                           "whenUnsatisfiable": "DoNotSchedule",
                                                           "labelSelector": {"matchLabels": {"app": "web"}}}])
        p["metadata"]["labels"] = {"app": "web"}
        return p

    plan = Provisioner(CATALOG).plan(demands(*(anti(f"db{i}") for i in range(3))), [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [1, 1, 1]
    plan = Provisioner(CATALOG).plan(demands(*(spread(f"w{i}", 1) for i in range(3))), [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [1, 1, 1]
    plan = Provisioner(CATALOG).plan(demands(*(spread(f"w{i}", 2) for i in range(4))), [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [2, 2]
    # others may join them: the rule is the matching pods'; a pod alike but for its labels is not
    # kept off by the node that keeps a matching one off
    db, cache = pod("db", "500m"), pod("cache", "500m")
    db["metadata"]["labels"], cache["metadata"]["labels"] = {"app": "db"}, {"app": "cache"}
    plan = Provisioner(CATALOG).plan(demands(anti("x"), db, cache), [], [pool()])
    assert [sorted(p.obj["metadata"]["name"] for p in c.pods) for c in plan.claims] == [["cache", "x"], ["db"]]


def test_a_node_whose_pods_are_not_bound_yet_counts_those_the_plan_puts_there() -> None:
    """A NodeClaim's node registered but its pods not bound yet (as Karpenter's node not
    initialized): the scheduler's plugins see it empty, but the plan's earlier pods are there
    as Karpenter's topology records them, so a second replica that must not share a node with
    the first gets a new node in this batch, not a nomination the scheduler will refuse."""
    def anti(name: str) -> dict:
        p = pod(name, "500m", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}]}})
        p["metadata"]["labels"] = {"app": "db"}
        return p

    def spread(name: str) -> dict:
        p = pod(name, "500m", topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": HOSTNAME,
                                                           "whenUnsatisfiable": "DoNotSchedule",
                                                           "labelSelector": {"matchLabels": {"app": "web"}}}])
        p["metadata"]["labels"] = {"app": "web"}
        return p

    def registered() -> SimNode:
        return SimNode("n1", Requirements.from_labels({ZONE: "zone-a", HOSTNAME: "n1"}), [],
                       {"cpu": 8000, "memory": 32 * 2**30 * 1000, "pods": 50_000},
                       node={"metadata": {"name": "n1"}},
                       claim="default-x")

    for make in (anti, spread):
        node = registered()
        plan = Provisioner(CATALOG).plan(demands(*(make(f"p{i}") for i in range(3))), [node], [pool()])
        assert len(plan.existing) == 1 and set(plan.existing.values()) == {"n1"}, make
        assert [len(c.pods) for c in plan.claims] == [1, 1], make
    # a pod bound there already is the plugins' to judge (here, resource_fit's): alone it keeps nothing off
    node = registered()
    node.pods.append(anti("bound"))
    plan = Provisioner(CATALOG).plan(demands(pod("other", "500m")), [node], [pool()])
    assert plan.existing == {"default/other": "n1"}


CAPACITY_TYPE = "karpenter.sh/capacity-type"


def _spread_on(name: str, key: str, *, when: str = "DoNotSchedule", labels: dict | None = None, **extra: Any) -> dict:
    p = pod(name, "1", topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
                                                   "labelSelector": {"matchLabels": {"app": "web"}}, **extra}])
    p["metadata"]["labels"] = {"app": "web", **(labels or {})}
    return p


def _spreading(key: str, n: int, pools: list, existing: list | None = None, **kw: Any) -> Any:
    return Provisioner(CATALOG).plan(demands(*(_spread_on(f"w{i}", key, **kw) for i in range(n))), existing or [],
                                     pools)


def test_new_nodes_spread_pods_over_any_key_with_known_values() -> None:
    """As Karpenter's domain groups: a spread on the capacity type, this provider's racks, or
    a label a NodePool's requirements give values pins each new node to one value, the
    emptiest, where the zone alone put them all on one node."""
    both = pool(requirements=[{"key": CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}])
    plan = _spreading(CAPACITY_TYPE, 2, [both])
    assert sorted(c.launch[1].capacity_type for c in plan.claims) == ["on-demand", "spot"]
    plan = _spreading(RACK, 3, [pool()])
    racks = [c.requirements[RACK].single() for c in plan.claims]
    assert len(set(racks)) == 3 and all(racks)
    assert all(c.launch[1].zone == c.requirements[RACK].single().rsplit("-rack-", 1)[0] for c in plan.claims)
    custom = pool(requirements=[{"key": "example.com/rack", "operator": "In", "values": ["r1", "r2"]}])
    plan = _spreading("example.com/rack", 4, [custom])
    assert sorted(c.requirements["example.com/rack"].single() for c in plan.claims for _ in c.pods) == \
        ["r1", "r1", "r2", "r2"]
    assert not plan.unschedulable


def test_schedule_anyway_is_held_to_until_the_pod_fits_nowhere() -> None:
    """As Karpenter's preferences: a ScheduleAnyway spread is kept as a DoNotSchedule one is,
    and dropped only for a pod no node can then hold."""
    plan = _spreading(ZONE, 3, [pool()], when="ScheduleAnyway")
    assert zones(plan) == ["zone-a", "zone-b", "zone-c"]
    # zone-a holds one already, zone-b has a full node and no NodePool: only zone-b keeps the skew
    only_a = pool(requirements=[{"key": ZONE, "operator": "In", "values": ["zone-a"]}])

    def existing() -> list:
        full = {"cpu": 0, "memory": 0, "pods": 0}
        return [SimNode("n-a", Requirements.from_labels({ZONE: "zone-a"}), [], dict(full), pods=[_spread("old")]),
                SimNode("n-b", Requirements.from_labels({ZONE: "zone-b"}), [], dict(full))]

    plan = _spreading(ZONE, 1, [only_a], existing())
    why = plan.unschedulable["default/w0"]  # the NodePool's reason for the one zone it could go to
    assert not plan.claims and why.startswith('incompatible with nodepool "default"') and "In [zone-b]" in why
    plan = _spreading(ZONE, 1, [only_a], existing(), when="ScheduleAnyway")
    assert zones(plan) == ["zone-a"] and not plan.unschedulable


def test_min_domains_and_match_label_keys() -> None:
    """minDomains above the domains there are makes the global minimum 0 (KEP-3022), so each
    zone takes maxSkew pods; matchLabelKeys count only the pods of the pod's own revision, on
    the hostname too."""
    assert len(_spreading(ZONE, 4, [pool()]).unschedulable) == 0
    plan = _spreading(ZONE, 4, [pool()], minDomains=5)
    assert zones(plan) == ["zone-a", "zone-b", "zone-c"] and len(plan.unschedulable) == 1
    revisions = [_spread_on(f"w{i}", HOSTNAME, labels={"pod-template-hash": f"h{i}"},
                            matchLabelKeys=["pod-template-hash"]) for i in range(2)]
    plan = Provisioner(CATALOG).plan(demands(*revisions), [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [2]
    assert [len(c.pods) for c in _spreading(HOSTNAME, 2, [pool()]).claims] == [1, 1]


def test_node_inclusion_policies_choose_the_domains_counted() -> None:
    """nodeAffinityPolicy Honor (the default) counts only the zones the pod's node affinity
    can have a node in; Ignore counts them all. nodeTaintsPolicy Ignore (the default) counts
    the zones of a NodePool whose taints the pod does not tolerate; Honor does not."""
    team = pool("team", requirements=[{"key": ZONE, "operator": "In", "values": ["zone-a"]},
                                      {"key": "example.com/team", "operator": "In", "values": ["x"]}])
    other = pool("other", requirements=[{"key": ZONE, "operator": "In", "values": ["zone-b", "zone-c"]}])

    def on_team(policy: str) -> Any:
        pods = [_spread_on(f"w{i}", ZONE, nodeAffinityPolicy=policy) for i in range(2)]
        for p in pods:
            p["spec"]["nodeSelector"] = {"example.com/team": "x"}
        return Provisioner(CATALOG).plan(demands(*pods), [], [team, other])

    assert not on_team("Honor").unschedulable and set(zones(on_team("Honor"))) == {"zone-a"}
    assert len(on_team("Ignore").unschedulable) == 1
    plain = pool("plain", requirements=[{"key": ZONE, "operator": "In", "values": ["zone-a"]}])
    tainted = pool("tainted", requirements=[{"key": ZONE, "operator": "In", "values": ["zone-b"]}],
                   template={"taints": [{"key": "gpu", "effect": "NoSchedule"}]})
    assert len(_spreading(ZONE, 2, [plain, tainted]).unschedulable) == 1
    plan = _spreading(ZONE, 2, [plain, tainted], nodeTaintsPolicy="Honor")
    assert not plan.unschedulable and set(zones(plan)) == {"zone-a"}


def _with(name: str, cpu: str, key: str, app: str = "web", wants: str = "cache") -> dict:
    p = pod(name, cpu, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"app": wants}}}]}})
    p["metadata"]["labels"] = {"app": app}
    return p


def _labelled(name: str, cpu: str, app: str) -> dict:
    p = pod(name, cpu)
    p["metadata"]["labels"] = {"app": app}
    return p


def test_required_pod_affinity_brings_pods_to_the_new_nodes_of_theirs() -> None:
    """As Karpenter's topology: a pod that must be with pods of a label goes, by hostname, to a
    node holding one (a new node of this plan, placed later in the batch, included), whatever
    it costs; by zone, to a zone holding one. The first of pods that must be with each other
    goes anywhere; a pod whose pods are nowhere, nowhere."""
    # web (larger, placed first) must share cache's node: one node grown to hold both, not two
    plan = Provisioner(CATALOG).plan(demands(_with("web", "1500m", HOSTNAME), _labelled("cache", "1", "cache")),
                                     [], [pool()])
    assert [sorted(p.key for p in c.pods) for c in plan.claims] == [["default/cache", "default/web"]]
    assert not plan.unschedulable
    # a NodeClaim still launching with the cache pod on it (placed again this batch), a free node before it
    free = SimNode("free", Requirements.from_labels({ZONE: "zone-a"}), [], {"cpu": 8000, "memory": 32 * 2**30 * 1000,
                                                                             "pods": 50_000})
    launching = SimNode("claim-x", Requirements.from_labels({ZONE: "zone-b"}), [],
                        {"cpu": 2000, "memory": 8 * 2**30 * 1000, "pods": 20_000}, claim="claim-x")
    cache = _labelled("cache", "1", "cache")
    cache["spec"]["nodeSelector"] = {ZONE: "zone-b"}
    plan = Provisioner(CATALOG).plan(demands(cache, _with("web", "500m", HOSTNAME)), [free, launching], [pool()])
    assert plan.existing == {"default/cache": "claim-x", "default/web": "claim-x"}
    # by zone: the cache pod runs in zone-b (on a full node); web's new node goes there, not to cheaper zone-a
    full = SimNode("n-b", Requirements.from_labels({ZONE: "zone-b"}), [], {"cpu": 0, "memory": 0, "pods": 0},
                   pods=[_labelled("cache", "1", "cache")])
    plan = Provisioner(CATALOG).plan(demands(_with("web", "1", ZONE)), [full], [pool()])
    assert zones(plan) == ["zone-b"] and plan.claims[0].requirements[ZONE].single() == "zone-b"
    # pods that must be with each other: the first anywhere, the rest with it (one node, not three)
    plan = Provisioner(CATALOG).plan(demands(*(_with(f"db{i}", "1500m", HOSTNAME, "db", "db") for i in range(3))),
                                     [], [pool()])
    assert [len(c.pods) for c in plan.claims] == [3]
    # by zone, their new nodes are pinned to the first's zone
    plan = Provisioner(CATALOG).plan(demands(*(_with(f"db{i}", "1500m", ZONE, "db", "db") for i in range(2))),
                                     [], [pool()])
    assert len({c.requirements[ZONE].single() for c in plan.claims}) == 1 and not plan.unschedulable
    assert all(c.requirements[ZONE].single() for c in plan.claims)
    # its pods' node cannot take it (too small a type for both, here): it is told so
    tiny = pool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}])
    plan = Provisioner(CATALOG).plan(demands(_labelled("cache", "1500m", "cache"), _with("web", "1", HOSTNAME)),
                                     [], [tiny])
    assert len(plan.claims) == 1 and "no node holding the pods it must be with" in plan.unschedulable["default/web"]
    # nothing to be with: nothing launched
    plan = Provisioner(CATALOG).plan(demands(_with("web", "1", HOSTNAME)), [], [pool()])
    assert not plan.claims and "affinity" in plan.unschedulable["default/web"]


def test_a_rack_and_a_zone_a_pod_is_held_to_agree() -> None:
    """A rack lies in one zone: a pod that must be in the cache pod's rack and would rather
    spread by zone gets new nodes in that rack's zone (the spread relaxed once only that zone
    is left and full), never a node of another zone named after the rack."""
    full = SimNode("n-r", Requirements.from_labels({ZONE: "zone-b", RACK: "zone-b-rack-1"}), [],
                   {"cpu": 0, "memory": 0, "pods": 0}, pods=[_labelled("cache", "1", "cache")])
    webs = []
    for i in range(3):
        w = _with(f"web{i}", "1500m", RACK)
        w["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                   "whenUnsatisfiable": "ScheduleAnyway",
                                                   "labelSelector": {"matchLabels": {"app": "web"}}}]
        webs.append(w)
    plan = Provisioner(CATALOG).plan(demands(*webs), [full], [pool()])
    assert not plan.unschedulable and len(plan.claims) == 3
    assert {(c.requirements[ZONE].single(), c.requirements[RACK].single()) for c in plan.claims} == \
        {("zone-b", "zone-b-rack-1")}
    assert zones(plan) == ["zone-b"] * 3


def test_required_pod_anti_affinity_on_a_zone_keeps_new_nodes_out_of_its_pods_zones() -> None:
    """As Karpenter's topology: a pod that must not be in a zone with pods its anti-affinity term
    selects goes to a new node pinned to a zone holding none (on the existing nodes, or on this
    plan's new nodes), so replicas "one per zone" get a node in each zone and the fourth none."""
    def apart(name: str) -> dict:
        p = pod(name, "500m", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}]}})
        p["metadata"]["labels"] = {"app": "db"}
        return p

    plan = Provisioner(CATALOG).plan(demands(*(apart(f"db{i}") for i in range(4))), [], [pool()])
    assert zones(plan) == ["zone-a", "zone-b", "zone-c"] and len(plan.unschedulable) == 1
    assert all(c.requirements[ZONE].single() for c in plan.claims)
    assert "anti-affinity" in next(iter(plan.unschedulable.values()))
    # a db pod running in zone-a (on a full node): the new one goes elsewhere
    full = SimNode("n-a", Requirements.from_labels({ZONE: "zone-a"}), [], {"cpu": 0, "memory": 0, "pods": 0},
                   pods=[apart("old")])
    plan = Provisioner(CATALOG).plan(demands(apart("new")), [full], [pool()])
    assert zones(plan) in (["zone-b"], ["zone-c"])


def test_a_pods_anti_affinity_on_a_zone_keeps_the_pods_it_selects_out_of_its_zone() -> None:
    """As Karpenter's inverse anti-affinity: a pod whose term keeps web pods out of its zone
    (running, or placed by this plan) keeps a web pod's new node out of that zone too, though
    the web pod has no rule of its own."""
    def guard(name: str) -> dict:
        p = pod(name, "1500m", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}]}})
        p["metadata"]["labels"] = {"app": "guard"}
        return p

    full = SimNode("n-a", Requirements.from_labels({ZONE: "zone-a"}), [], {"cpu": 0, "memory": 0, "pods": 0},
                   pods=[guard("old")])
    plan = Provisioner(CATALOG).plan(demands(_labelled("web", "1", "web")), [full], [pool()])
    assert zones(plan) in (["zone-b"], ["zone-c"]) and plan.claims[0].requirements[ZONE].single()
    # placed first in this plan (larger), on a node pinned to the cheapest zone: the web pod goes elsewhere
    plan = Provisioner(CATALOG).plan(demands(guard("g"), _labelled("web", "1", "web")), [], [pool()])
    by_app = {p.obj["metadata"]["labels"]["app"]: c.launch[1].zone for c in plan.claims for p in c.pods}
    assert by_app["guard"] != by_app["web"] and not plan.unschedulable
