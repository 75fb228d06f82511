"""DRA devices in the simulation: a node of an instance type is launched only for claims the
scheduler's allocator can satisfy with the devices it will publish; a claim whose DeviceClass
does not exist launches nothing until the class exists. Pure."""

from __future__ import annotations

from typing import Any

from controlplane.autoscaler.catalog import Catalog, resource_slices
from controlplane.autoscaler.devices import DeviceClasses, TypeDevices
from controlplane.autoscaler.provisioner import Provisioner
from controlplane.autoscaler.simulation import PodDemand, demand, resource_fit
from controlplane.autoscaler.state import ClusterState, Simulated
from controlplane.scheduler.dra import Allocator
from tests.autoscaler.test_provisioner import launched, pool
from tests.autoscaler.test_state import node

CATALOG = Catalog.default()  # gpu-1x-l4 (0.98) < gpu-4x-l4 < gpu-8x-a100 (32.77) < gpu-8x-h100 (98.32)
NVIDIA = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")}}]}}
H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
AT_LEAST_40GI = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def gpu_pod(name: str, *selectors: str, count: int = 1, cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    """A pod with a claim (by name) of ``count`` devices of ``cls`` matching ``selectors``."""
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}, "_claim": {
        "metadata": {"name": f"{name}-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": cls, "count": count,
            "selectors": [{"cel": {"expression": s}} for s in selectors]}}]}}}}


def demands(classes: DeviceClasses, *pods: dict[str, Any]) -> list[PodDemand]:
    claims = {f"default/{p['_claim']['metadata']['name']}": p["_claim"] for p in pods}
    return [demand(p, claims, {}, classes) for p in pods]


def plan(classes: DeviceClasses, *pods: dict[str, Any]) -> Any:
    return Provisioner(CATALOG, devices=TypeDevices(classes)).plan(demands(classes, *pods), [], [pool()])


def test_a_claim_for_a_gpu_model_gets_the_type_whose_devices_match_not_the_cheapest_gpu_type() -> None:
    classes = DeviceClasses({"gpu": NVIDIA})
    assert launched(plan(classes, gpu_pod("any"))) == ["gpu-1x-l4"]
    assert launched(plan(classes, gpu_pod("h", H100))) == ["gpu-8x-h100"]
    # 24Gi L4s are too small: the cheapest type with 80Gi GPUs
    assert launched(plan(classes, gpu_pod("big", AT_LEAST_40GI))) == ["gpu-8x-a100"]
    # a request's own count, on the matching type's devices: 2 L4s are a gpu-4x-l4, not two gpu-1x-l4
    assert launched(plan(classes, gpu_pod("two", 'device.attributes["gpu.nvidia.com"].model == "L4"', count=2))) \
        == ["gpu-4x-l4"]


def test_pods_with_selective_claims_pack_only_onto_devices_that_match() -> None:
    classes = DeviceClasses({"gpu": NVIDIA})
    p = plan(classes, *(gpu_pod(f"h{i}", H100) for i in range(9)))
    assert launched(p) == ["gpu-8x-h100"] * 2 and sorted(len(c.pods) for c in p.claims) == [1, 8]


def test_a_claim_no_type_can_satisfy_launches_nothing() -> None:
    classes = DeviceClasses({"gpu": NVIDIA})
    p = plan(classes, gpu_pod("b200", 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'))
    assert p.claims == [] and p.unschedulable["default/b200"].startswith(
        'incompatible with nodepool "default", daemonset overhead={}, '
        "no instance type has devices that satisfy the pod's resource claims, requirements=")
    # nine H100s on one node: no type has them
    p = plan(classes, gpu_pod("nine", H100, count=9))
    assert p.claims == [] and list(p.unschedulable) == ["default/nine"]


def test_a_class_selecting_other_devices_launches_nothing() -> None:
    mig = {"metadata": {"name": "mig.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'")}}]}}
    classes = DeviceClasses({"mig": mig})
    p = plan(classes, gpu_pod("m", cls="mig.nvidia.com"))
    assert p.claims == [] and list(p.unschedulable) == ["default/m"]


def test_a_missing_device_class_launches_nothing_until_it_exists() -> None:
    classes = DeviceClasses()
    pods = [gpu_pod("g")]
    p = plan(classes, *pods)
    # the scheduler's PreFilter words, for the FailedScheduling event
    assert p.claims == [] and p.unschedulable == {
        "default/g": "request gpu: device class gpu.nvidia.com does not exist"}
    version = classes.version
    classes.add(NVIDIA)
    assert classes.version > version
    assert launched(plan(classes, *pods)) == ["gpu-1x-l4"]
    classes.remove(NVIDIA)
    assert list(plan(classes, *pods).unschedulable) == ["default/g"] and "gpu.nvidia.com" not in classes.drivers


def test_a_node_of_a_type_answers_once_per_claim_shape(monkeypatch: Any) -> None:
    classes = DeviceClasses({"gpu": NVIDIA})
    devices = TypeDevices(classes)
    node = devices.of(CATALOG.get("gpu-8x-h100"))  # type: ignore[arg-type]
    calls: list[tuple[Any, ...]] = []
    allocate = Allocator.allocate

    def counted(*args: Any) -> Any:
        calls.append(args)
        return allocate(*args)

    monkeypatch.setattr(Allocator, "allocate", counted)
    pods = demands(classes, *(gpu_pod(f"h{i}", H100) for i in range(3)))
    assert node.fits(pods[:2]) and node.fits(pods[1:]) and len(calls) == 1
    classes.add(NVIDIA)  # a class changed: answered again
    assert node.fits(pods[:2]) and len(calls) == 2


def test_a_launching_nodeclaim_holds_only_claims_its_types_devices_satisfy() -> None:
    st = ClusterState()
    st.nodeclaim_set(None, {"metadata": {"name": "l4", "resourceVersion": "1", "labels": {
        "node.kubernetes.io/instance-type": "gpu-1x-l4", "karpenter.sh/nodepool": "default"}}, "spec": {}})
    sim = Simulated(st, CATALOG)
    h100, anyone = gpu_pod("h", H100), gpu_pod("any")
    for p in (h100, anyone):
        st.claims[f"default/{p['_claim']['metadata']['name']}"] = p["_claim"]
    # the class is not there yet: no node holds either; its creation is seen by the cached demands
    assert sim.demand(anyone).unschedulable == "request gpu: device class gpu.nvidia.com does not exist"
    st.device_classes.add(NVIDIA)
    [launching] = sim.nodes()
    assert sim.demand(anyone).unschedulable is None
    assert not resource_fit(sim.demand(h100), launching)
    assert resource_fit(sim.demand(anyone), launching)


def _state_with_an_l4_node() -> ClusterState:
    """A cluster of one real node, n1, publishing one free L4 (the gpu-1x-l4 type's slice)."""
    st = ClusterState()
    st.device_classes.add(NVIDIA)
    st.node_added(node("n1", cpu="8"))
    [l4_slice] = resource_slices("n1", CATALOG.get("gpu-1x-l4").type)  # type: ignore[union-attr]
    st.slice_set({**l4_slice, "metadata": {**l4_slice["metadata"], "resourceVersion": "1"}})
    return st


def test_a_real_node_holds_only_claims_its_free_devices_satisfy() -> None:
    """A node with a free L4: a pod asking an H100 is not nominated there (a node is launched for
    it), one asking any GPU is; once a claim holds the L4, neither fits."""
    st = _state_with_an_l4_node()
    sim = Simulated(st, CATALOG)
    h100, anyone = gpu_pod("h", H100), gpu_pod("any")
    for p in (h100, anyone):
        st.claims[f"default/{p['_claim']['metadata']['name']}"] = p["_claim"]
    [n1] = sim.nodes()
    assert not resource_fit(sim.demand(h100), n1) and resource_fit(sim.demand(anyone), n1)
    both = Provisioner(CATALOG, devices=sim.devices).plan([sim.demand(h100), sim.demand(anyone)], sim.nodes(),
                                                          [pool()])
    assert both.existing == {"default/any": "n1"} and launched(both) == ["gpu-8x-h100"]
    st.claims["default/other"] = {"metadata": {"name": "other", "namespace": "default"}, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}}}}
    [n1] = sim.nodes()
    assert not resource_fit(sim.demand(anyone), n1)


def test_a_class_naming_no_driver_is_judged_by_the_allocator_alone() -> None:
    """A class selecting by attribute only, or selecting nothing, has no driver to count its
    devices by: the allocator alone finds the type whose devices match (it was counted against
    a driver named after the class, which no node has, and nothing was launched)."""
    by_product = {"metadata": {"name": "h100"}, "spec": {"selectors": [{"cel": {"expression": H100}}]}}
    any_device = {"metadata": {"name": "any"}, "spec": {}}
    classes = DeviceClasses({"h100": by_product, "any": any_device})
    assert launched(plan(classes, gpu_pod("h", cls="h100"))) == ["gpu-8x-h100"]
    assert launched(plan(classes, gpu_pod("a", cls="any"))) == ["gpu-1x-l4"]
    assert launched(plan(classes, *(gpu_pod(f"h{i}", cls="h100") for i in range(9)))) == ["gpu-8x-h100"] * 2
    assert classes.driver("h100") is None and classes.driver("any") is None
    # a real node publishing no device holds none of its claims
    st = ClusterState()
    st.device_classes.add(any_device)
    st.node_added(node("n1", cpu="8"))
    p = gpu_pod("a", cls="any")
    st.claims["default/a-gpu"] = p["_claim"]
    [n1] = Simulated(st, CATALOG).nodes()
    assert n1.devices is None and not resource_fit(Simulated(st, CATALOG).demand(p), n1)


def extended_pod(name: str, resource: str, count: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                  "limits": {resource: str(count)}}}]}}


def test_an_extended_resource_a_selective_class_backs_gets_the_type_whose_devices_match() -> None:
    """KEP-5004: ``example.com/h100`` of a class selecting H100s is allocated through the claim the
    scheduler makes for it, by its allocator: it launched the cheapest type with a device of the
    class's driver (an L4), where the scheduler finds no H100 and the pod stays pending."""
    h100: dict[str, Any] = {"metadata": {"name": "h100"}, "spec": {
        "extendedResourceName": "example.com/h100", "selectors": [
            {"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}, {"cel": {"expression": H100}}]}}
    classes = DeviceClasses({"h100": h100})
    provisioner = Provisioner(CATALOG, devices=TypeDevices(classes))
    for resource, count, types in (("example.com/h100", 1, ["gpu-8x-h100"]),
                                   ("deviceclass.resource.kubernetes.io/h100", 2, ["gpu-8x-h100"]),
                                   ("example.com/h100", 9, [])):
        d = demand(extended_pod("p", resource, count), {}, {}, classes)
        assert launched(provisioner.plan([d], [], [pool()])) == types
        assert resource not in d.requests and d.requests["devices/gpu.nvidia.com"] == count * 1000
        assert [c["metadata"]["name"] for c in d.claims] == ["p-extended-resources"]
    # without a selector naming the driver: the allocator alone
    classes = DeviceClasses({"h100": {**h100, "spec": {**h100["spec"], "selectors": [{"cel": {"expression": H100}}]}}})
    d = demand(extended_pod("p", "example.com/h100"), {}, {}, classes)
    assert d.uncounted and "devices/gpu.nvidia.com" not in d.requests
    assert launched(Provisioner(CATALOG, devices=TypeDevices(classes)).plan([d], [], [pool()])) == ["gpu-8x-h100"]


TEMPLATE = {"metadata": {"name": "one-gpu", "namespace": "default"}, "spec": {"spec": {"devices": {"requests": [
    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def test_a_pod_whose_claim_is_not_made_and_cannot_be_launches_nothing_until_it_can() -> None:
    """As the scheduler, which waits for a pod's claims to exist: a template that does not exist
    (the resourceclaim controller makes nothing from it) or a named claim that does not exist
    launches nothing (the pod was simulated without claims: a node without GPUs was launched);
    the cached demand sees the template or the claim when it comes. A template whose claim is not
    made yet is simulated from the template."""
    st = ClusterState()
    st.device_classes.add(NVIDIA)
    sim = Simulated(st, CATALOG)
    from_template = {"metadata": {"name": "t", "namespace": "default", "resourceVersion": "1"}, "spec": {
        "containers": [{"name": "c", "image": "i"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}
    named = gpu_pod("n")
    provisioner = Provisioner(CATALOG, devices=sim.devices)
    p = provisioner.plan([sim.demand(from_template), sim.demand(named)], [], [pool()])
    assert p.claims == [] and p.unschedulable == {
        "default/t": 'waiting for resource claim "gpu" to be created from its template',
        "default/n": 'resourceclaim "n-gpu" not found'}
    st.templates["default/one-gpu"] = TEMPLATE
    st.claims["default/n-gpu"] = named["_claim"]
    p = provisioner.plan([sim.demand(from_template), sim.demand(named)], [], [pool()])
    assert p.unschedulable == {} and launched(p) == ["gpu-1x-l4"] * 2


def shared_pod(name: str, claim: str, cpu: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}


def claim_of(name: str, *selectors: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": gpu_pod(name, *selectors)["_claim"]["spec"],
            **({"status": status} if status else {})}


def test_a_claim_several_pods_share_is_allocated_once_where_they_all_go() -> None:
    """Pods naming one claim: the first takes its devices, the others follow it to that node
    and ask for none (each asked for its own: three pods sharing an L4 launched a gpu-4x-l4,
    and an H100 shared by nine, two gpu-8x-h100)."""
    classes = DeviceClasses({"gpu": NVIDIA})
    claims = {"default/l4": claim_of("l4"), "default/h": claim_of("h", H100)}

    def planned(*pods: dict[str, Any]) -> Any:
        return Provisioner(CATALOG, devices=TypeDevices(classes)).plan(
            [demand(p, claims, {}, classes) for p in pods], [], [pool()])

    p = planned(*(shared_pod(f"p{i}", "l4") for i in range(3)))
    assert launched(p) == ["gpu-1x-l4"] and len(p.claims[0].pods) == 3 and p.unschedulable == {}
    p = planned(*(shared_pod(f"p{i}", "h", cpu="1") for i in range(9)))
    assert launched(p) == ["gpu-8x-h100"] and len(p.claims[0].pods) == 9
    # a node large enough for all of them: the claim's node grows, no second node takes some
    p = planned(*(shared_pod(f"p{i}", "l4", cpu="6") for i in range(3)))
    assert len(p.claims) == 1 and len(p.claims[0].pods) == 3 and p.unschedulable == {}


def group_pod(name: str, group: str, template: str = "gpu-t", claim: str | None = None) -> dict[str, Any]:
    """A pod of PodGroup ``group`` whose claim ``gpu`` is made from ``template`` (the group's,
    if the group lists the same entry); ``claim``: the claim its status names."""
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}, "spec": {
            "schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}
    if claim:
        pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    return pod


def test_a_podgroups_claim_is_allocated_once_for_its_pods_made_or_not() -> None:
    """KEP-5729: the pods of a PodGroup whose claim matches the group's share the claim made
    for the group. Simulated once, before it is made (from the template) and after (the
    group's status names it before the pods' do): four pods sharing an H100 launched four
    gpu-8x-h100 worth of devices when each counted its own. A pod whose entry is not the
    group's keeps a claim of its own."""
    classes = DeviceClasses({"gpu": NVIDIA})
    templates = {"default/gpu-t": {"metadata": {"name": "gpu-t", "namespace": "default"},
                                   "spec": {"spec": claim_of("t", H100)["spec"]}},
                 "default/own-t": {"metadata": {"name": "own-t", "namespace": "default"},
                                   "spec": {"spec": claim_of("t", H100)["spec"]}}}
    group: dict[str, Any] = {"metadata": {"name": "g", "namespace": "default"}, "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]}}
    made = {"default/g-gpu-x1": {**claim_of("g-gpu-x1", H100)}}

    def planned(podgroup: dict[str, Any], claims: dict[str, Any], *pods: dict[str, Any]) -> Any:
        return Provisioner(CATALOG, devices=TypeDevices(classes)).plan(
            [demand(p, claims, templates, classes, podgroups={"default/g": podgroup}) for p in pods], [], [pool()])

    members = [group_pod(f"m{i}", "g") for i in range(4)]
    p = planned(group, {}, *members)  # not made yet
    assert launched(p) == ["gpu-8x-h100"] and len(p.claims[0].pods) == 4 and p.unschedulable == {}
    assert [d.requests.get("devices/gpu.nvidia.com") for d in p.claims[0].pods].count(1000) == 1
    made_group = {**group, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "g-gpu-x1"}]}}
    p = planned(made_group, made, *members[:2], *(group_pod(f"m{i}", "g", claim="g-gpu-x1") for i in (2, 3)))
    assert launched(p) == ["gpu-8x-h100"] and len(p.claims[0].pods) == 4
    # without its PodGroup (not served, or not seen yet), each pod's claim is its own, as before
    p = Provisioner(CATALOG, devices=TypeDevices(classes)).plan(
        [demand(m, {}, templates, classes) for m in members], [], [pool()])
    assert sum(len(c.pods) for c in p.claims) == 4 and \
        all(d.requests.get("devices/gpu.nvidia.com") == 1000 for c in p.claims for d in c.pods)
    # a pod of the group whose entry is not the group's asks for its own device beside the group's
    p = planned(group, {}, *members[:2], group_pod("own", "g", template="own-t"))
    asked = sorted(d.requests.get("devices/gpu.nvidia.com", 0) for c in p.claims for d in c.pods)
    assert asked == [0, 1000, 1000] and p.unschedulable == {}


def l4_node_n1() -> ClusterState:
    """A cluster of one node, n1, publishing a gpu-1x-l4's device, and the NVIDIA class."""
    st = ClusterState()
    st.device_classes.add(NVIDIA)
    st.node_added(node("n1", cpu="4"))
    [l4] = resource_slices("n1", CATALOG.get("gpu-1x-l4").type)  # type: ignore[union-attr]
    st.slice_set({**l4, "metadata": {**l4["metadata"], "resourceVersion": "1"}})
    return st


# a claim's status: allocated n1's device
ALLOCATED_ON_N1 = {"allocation": {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}


def test_a_podgroups_claim_counts_once_on_the_node_its_running_pods_share() -> None:
    """Two running pods of a PodGroup on n1 sharing the group's claim, allocated there: n1's
    device is taken once (it was counted twice, so n1 looked over-full to consolidation)."""
    st = l4_node_n1()
    st.podgroups["default/g"] = {"metadata": {"name": "g", "namespace": "default"}, "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]}, "status": {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "g-gpu-x1"}]}}
    st.claims["default/g-gpu-x1"] = claim_of("g-gpu-x1", status=ALLOCATED_ON_N1)
    for name in ("r1", "r2"):
        running = group_pod(name, "g", claim="g-gpu-x1")
        running["spec"]["nodeName"] = "n1"
        running["status"]["phase"] = "Running"
        st.pod_added(running)
    [n1] = Simulated(st, CATALOG).nodes()
    assert n1.requested["devices/gpu.nvidia.com"] == 1000 and n1.requested["cpu"] == 2000


def test_a_pod_whose_shared_claim_is_allocated_goes_only_where_its_devices_are() -> None:
    """A pending pod naming a claim allocated on n1 (for a pod running there) goes to n1 or
    nowhere: nothing is launched for it; and on n1 the claim counts once."""
    st = l4_node_n1()
    st.claims["default/l4"] = claim_of("l4", status=ALLOCATED_ON_N1)
    for name in ("r1", "r2"):
        running = shared_pod(name, "l4", cpu="1")
        running["spec"]["nodeName"] = "n1"
        running["status"] = {"phase": "Running"}
        st.pod_added(running)
    sim = Simulated(st, CATALOG)
    [n1] = sim.nodes()
    assert n1.requested["devices/gpu.nvidia.com"] == 1000 and n1.requested["cpu"] == 2000
    provisioner = Provisioner(CATALOG, devices=sim.devices)
    fits = provisioner.plan([sim.demand(shared_pod("small", "l4", cpu="1"))], sim.nodes(), [pool()])
    assert fits.existing == {"default/small": "n1"} and fits.claims == []
    too_big = provisioner.plan([sim.demand(shared_pod("big", "l4", cpu="4"))], sim.nodes(), [pool()])
    assert too_big.claims == [] and list(too_big.unschedulable) == ["default/big"]


def taint_rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    """A DeviceTaintRule tainting the devices ``selector`` (driver, pool, device) picks."""
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": {
        "deviceSelector": selector, "taint": {"key": "example.com/broken", "value": "yes", "effect": effect}}}


def tolerating(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with its claim's request tolerating the rules' taint."""
    pod["_claim"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "example.com/broken", "operator": "Exists"}]
    return pod


def test_a_device_a_rule_taints_on_a_real_node_is_not_free_for_claims_that_do_not_tolerate_it() -> None:
    """As the scheduler, which puts a DeviceTaintRule's taint on the devices it selects: the L4
    of n1 tainted NoSchedule by a rule holds no claim that does not tolerate it, and a node is
    launched for such a claim (it was counted free: the pod was meant for n1, where the scheduler
    refused it, and nothing was launched). A claim tolerating the taint, or a rule whose effect is
    None, still goes to n1; the rule deleted, the L4 is free again."""
    st = _state_with_an_l4_node()
    sim = Simulated(st, CATALOG)
    anyone, patient = gpu_pod("any"), tolerating(gpu_pod("patient"))
    for p in (anyone, patient):
        st.claims[f"default/{p['_claim']['metadata']['name']}"] = p["_claim"]
    rule = taint_rule("n1-broken", driver="gpu.nvidia.com", pool="n1")
    st.taint_rules.set(rule)
    [n1] = sim.nodes()
    assert not resource_fit(sim.demand(anyone), n1) and resource_fit(sim.demand(patient), n1)
    planned = Provisioner(CATALOG, devices=sim.devices).plan([sim.demand(anyone)], sim.nodes(), [pool()])
    assert planned.existing == {} and launched(planned) == ["gpu-1x-l4"]  # n1's pool only: a new node's L4 is untainted
    st.taint_rules.set(taint_rule("n1-broken", effect="None", driver="gpu.nvidia.com", pool="n1"))
    [n1] = sim.nodes()
    assert resource_fit(sim.demand(anyone), n1)
    st.taint_rules.remove(rule)
    [n1] = sim.nodes()
    assert resource_fit(sim.demand(anyone), n1)


def test_a_rule_selecting_a_driver_taints_the_devices_of_nodes_not_launched_yet() -> None:
    """A rule tainting ``gpu-0`` of every device of the driver: a gpu-1x-l4 (its one L4 is
    gpu-0) holds no claim for a GPU, so the cheapest type with an untainted L4 is launched
    (a gpu-1x-l4 was, where the scheduler found no device); the rule's spec changed to another
    device, or the rule deleted, the cached answers of the type's node are dropped. A change of
    the rule's status alone keeps them."""
    st = ClusterState()
    st.device_classes.add(NVIDIA)
    sim = Simulated(st, CATALOG)
    anyone = gpu_pod("any")
    st.claims["default/any-gpu"] = anyone["_claim"]
    provisioner = Provisioner(CATALOG, devices=sim.devices)

    def planned() -> list[str]:
        return launched(provisioner.plan([sim.demand(anyone)], [], [pool()]))

    assert planned() == ["gpu-1x-l4"]
    rule = taint_rule("first-gpus", driver="gpu.nvidia.com", device="gpu-0")
    assert st.taint_rules.set(rule)
    assert planned() == ["gpu-4x-l4"]
    version = st.taint_rules.version
    assert not st.taint_rules.set({**rule, "status": {"conditions": [{"type": "EvictionInProgress"}]}})
    assert st.taint_rules.version == version and planned() == ["gpu-4x-l4"]
    st.taint_rules.set(taint_rule("first-gpus", driver="gpu.nvidia.com", device="gpu-7"))
    assert planned() == ["gpu-1x-l4"]
    st.taint_rules.set(rule)
    assert planned() == ["gpu-4x-l4"]
    st.taint_rules.remove(rule)
    assert planned() == ["gpu-1x-l4"]
