"""A pod's demand: which allocated DRA claims count, and where. Pure."""

from __future__ import annotations

from typing import Any

from controlplane.autoscaler.provisioner import Provisioner
from controlplane.autoscaler.requirements import Requirements
from controlplane.autoscaler.simulation import DeviceClasses, SimNode, demand, node_devices
from tests.autoscaler.test_provisioner import CATALOG, CLASSES, TEMPLATES, pod, pool

GPU = "devices/gpu.nvidia.com"
SPEC: dict[str, Any] = {"devices": {"requests": [
    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}


def node_slice(node: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node},
                     "devices": [{"name": "gpu-0"}]}}


SLICES = {"n1": [node_slice("n1")], "n2": [node_slice("n2")]}


def claim(name: str, pool_name: str, selector: dict[str, Any] | None) -> dict[str, Any]:
    allocation: dict[str, Any] = {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool_name, "device": "gpu-0"}]}}
    if selector is not None:
        allocation["nodeSelector"] = selector
    return {"metadata": {"name": name, "namespace": "default"}, "spec": SPEC, "status": {"allocation": allocation}}


def by_name(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def with_claim(name: str, claim_name: str, node: str = "") -> dict[str, Any]:
    p = pod(name, "1", resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}])
    if node:
        p["spec"]["nodeName"] = node
    return p


def slices_of(node: str) -> list[dict[str, Any]]:
    return SLICES.get(node, [])


def devices(p: dict[str, Any], claims: dict[str, Any]) -> int:
    return demand(p, claims, TEMPLATES, CLASSES, slices_of).requests.get(GPU, 0) // 1000


def test_allocated_claims_count_on_the_node_that_holds_their_devices() -> None:
    claims = {
        "default/local": claim("local", "n1", by_name("n1")),
        "default/from-slice": claim("from-slice", "n1", None),  # no selector: told by the pool's slices
        "default/network": claim("network", "fabric", None),  # an allNodes pool: not the node's
        "default/racked": claim("racked", "rack-pool", {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.controlplane.io/rack", "operator": "In", "values": ["zone-a-rack-0"]}]}]}),
    }
    # bound to n1: what its devices there take is counted (the node's room; needed again if it moves)
    assert devices(with_claim("a", "local", node="n1"), claims) == 1
    assert devices(with_claim("b", "from-slice", node="n1"), claims) == 1
    # devices not tied to the node go with the pod: nothing new, wherever it runs
    assert devices(with_claim("c", "network", node="n1"), claims) == 0
    assert devices(with_claim("d", "racked", node="n1"), claims) == 0
    # devices allocated on another node are not this node's
    assert devices(with_claim("e", "local", node="n2"), claims) == 0
    # pending: an allocated claim needs nothing new; an unallocated one does
    assert devices(with_claim("f", "local"), claims) == 0
    unallocated = {"default/free": {"metadata": {"name": "free", "namespace": "default"}, "spec": SPEC}}
    assert devices(with_claim("g", "free"), unallocated) == 1


def test_a_pod_moved_off_its_node_needs_its_devices_again() -> None:
    # n1 and n2 each have one GPU, each taken by a running pod's claim; n1 is being removed
    claims = {f"default/c{i}": claim(f"c{i}", f"n{i}", by_name(f"n{i}")) for i in (1, 2)}
    running = {n: with_claim(f"p-{n}", f"c{n[-1]}", node=n) for n in ("n1", "n2")}
    n2 = SimNode("n2", Requirements.from_labels({"node.kubernetes.io/instance-type": "gpu-1"}), [],
                 {"cpu": 8000, "memory": 32 * 2**30 * 1000, "pods": 110_000, **node_devices(SLICES["n2"])},
                 demand(running["n2"], claims, TEMPLATES, CLASSES, slices_of).requests)
    moved = demand(running["n1"], claims, TEMPLATES, CLASSES, slices_of)
    plan = Provisioner(CATALOG).plan([moved], [n2], [pool()])
    # n2's only GPU is taken: the pod needs a new GPU node, not n2's spare CPU
    assert plan.existing == {} and [c.launch[0].name for c in plan.claims] == ["gpu-1"]


def test_an_extended_resource_a_class_backs_is_asked_as_devices_of_its_driver() -> None:
    """KEP-5004: the scheduler gives ``example.com/fpga`` (a class's extendedResourceName) and
    ``deviceclass.resource.kubernetes.io/<class>`` as DRA devices, so the simulation asks a node
    for devices; a bound pod without the scheduler's claim got a device plugin's resource."""
    classes = DeviceClasses({"fpga": {"metadata": {"name": "fpga"}, "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "fpga.example.com"'}}],
        "extendedResourceName": "example.com/fpga"}}})
    p = pod("p", "1")
    p["spec"]["containers"][0]["resources"]["limits"] = {"example.com/fpga": "2"}
    got = demand(p, {}, {}, classes).requests
    assert got.get("devices/fpga.example.com") == 2000 and "example.com/fpga" not in got
    p["spec"]["containers"][0]["resources"]["limits"] = {"deviceclass.resource.kubernetes.io/fpga": "1"}
    assert demand(p, {}, {}, classes).requests.get("devices/fpga.example.com") == 1000
    p["spec"]["containers"][0]["resources"]["limits"] = {"example.com/fpga": "1"}
    p["spec"]["nodeName"] = "n1"
    assert demand(p, {}, {}, classes).requests.get("example.com/fpga") == 1000
