"""The DynamicResources plugin as the framework calls it (a fake handle, no server)."""

from __future__ import annotations

from controlplane.scheduler.framework import ActionType, Code, CycleState
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.plugins import default_profile, default_registry
from controlplane.scheduler.plugins.dynamic_resources import NAME, DynamicResources
from controlplane.scheduler.queue import SchedulingQueue
from tests.scheduler.fakes import FakeHandle

from .helpers import DRIVER, claim, device, device_class, request, slice_


def template_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}}


def generated_claim(pod_name: str) -> dict:
    c = claim(f"{pod_name}-gpu-abcde", request("r", "gpu"))
    c["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    c["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                                         "uid": f"uid-{pod_name}", "controller": True}]
    return c


def plugin() -> tuple[FakeHandle, DynamicResources]:
    h = FakeHandle([{"metadata": {"name": "n1", "labels": {}}, "status": {"allocatable": {"pods": "10"}}}])
    p = DynamicResources(h, binding_timeout=1.0)
    p.manager.on_slice(slice_("s1", "n1", [device("d0")]))
    p.manager.on_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    return h, p


def test_registered_in_the_default_profile() -> None:
    reg = default_registry()
    assert NAME in reg.factories
    names = [pc.name for pc in default_profile(reg)]
    assert names.index(NAME) == names.index("NodeResourcesFit") + 1


def test_pre_enqueue_holds_a_pod_until_its_claim_is_created_and_the_claim_event_releases_it() -> None:
    _, p = plugin()
    pod = PodInfo(template_pod("p1"))
    s = p.pre_enqueue(pod)
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "to be created" in s.message
    q = SchedulingQueue(pre_enqueue=[p], events={NAME: p.events_to_register()})
    q.add(pod)
    assert q.where(pod.key) == "unschedulable"
    # The claim controller's claim arrives: the queue asks the hint before the plugin's handler runs.
    assert q.on_event("resourceclaims", ActionType.ADD, None, generated_claim("p1")) == 1
    assert q.where(pod.key) == "active"
    # Another pod's claim does not move it.
    other = PodInfo(template_pod("p2"))
    q.add(other)
    assert q.on_event("resourceclaims", ActionType.ADD, None, generated_claim("p3")) == 0


def test_filter_reserve_and_unreserve_through_the_framework_interface() -> None:
    h, p = plugin()
    p.manager.on_claim(generated_claim("p1"))
    p.manager.on_claim(generated_claim("p2"))
    node = h.nodes()["n1"]
    s1, s2 = CycleState(), CycleState()
    pod1, pod2 = PodInfo(template_pod("p1")), PodInfo(template_pod("p2"))
    assert p.pre_filter(s1, pod1) is None and p.pre_filter(s2, pod2) is None
    assert p.filter(s1, pod1, node) is None
    assert p.reserve(s1, pod1, "n1") is None
    rejected = p.filter(s2, pod2, node)
    assert rejected is not None and rejected.plugin == NAME
    assert (rejected.code, rejected.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cannot allocate all claims")
    p.unreserve(s1, pod1, "n1")
    assert p.filter(s2, pod2, node) is None
    # A pod without claims: PreFilter skips the plugin.
    plain = PodInfo({"metadata": {"name": "x", "namespace": "default"}, "spec": {"containers": []}})
    skip = p.pre_filter(CycleState(), plain)
    assert skip is not None and skip.code == Code.SKIP
