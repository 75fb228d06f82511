"""Over a real socket: `controlplane serve` runs the scheduler and the resourceclaim controller; a pod
with a claim template gets a claim, the claim gets devices, the pod gets bound; its end releases them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.scheduler.dra.benchdata import (
    cluster_invariants,
    create_gpu_cluster,
    gpu_cluster,
    gpu_node,
    gpu_pod,
)
from controlplane.scheduler.dra.claims import POD_CLAIM_NAME
from controlplane.scheduler.dra.manager import FINALIZER
from tests.test_cli import Serve, start_serve

R = ("resource.k8s.io", "v1")
NODE = "gpu-node-e0"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("dra"), scheduler=True)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def _gpu_node(c: Client, node: str) -> None:
    """Node ``node`` with one GPU's worth of status, once the node lifecycle controller took off
    the not-ready taint its create gave it (TaintNodesByCondition): pods kept off it then are
    kept off by what the test does, not by the taint."""
    await c.create(resource_path("", "v1", "nodes"), gpu_node(node, 1))

    async def untainted() -> bool:
        return not (await c.get(resource_path("", "v1", "nodes", name=node)))["spec"].get("taints")

    await eventually(untainted)
    await c.patch(resource_path("", "v1", "nodes", name=node, subresource="status"),
                  {"status": gpu_node(node, 1)["status"]})


async def setup_cluster(c: Client) -> None:
    await create_gpu_cluster(c, gpu_cluster(nodes=1, gpus_per_node=1, node_prefix="gpu-node-e"))


async def test_pod_with_claim_template_is_bound_with_devices_and_released_when_deleted(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        await setup_cluster(c)
        pods = resource_path("", "v1", "pods", "default")
        claims = resource_path(*R, "resourceclaims", "default")
        await c.create(pods, gpu_pod("trainer", "default", "mig-3g"))

        async def bound() -> dict[str, Any] | None:
            p = await c.get(f"{pods}/trainer")
            return p if p["spec"].get("nodeName") else None

        pod = await eventually(bound)
        assert pod["spec"]["nodeName"] == NODE
        [status] = pod["status"]["resourceClaimStatuses"]
        assert status["name"] == "gpu" and status["resourceClaimName"].startswith("trainer-gpu-")
        claim = await c.get(f"{claims}/{status['resourceClaimName']}")
        meta = claim["metadata"]
        assert len(meta["name"]) == len("trainer-gpu-") + 5
        assert meta["annotations"][POD_CLAIM_NAME] == "gpu"
        assert meta["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        assert meta["ownerReferences"][0]["controller"] is True
        assert FINALIZER in meta["finalizers"]
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.example.com" and result["device"].startswith("gpu-0-3g-")
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer",
                                                   "uid": pod["metadata"]["uid"]}]
        terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == [NODE]

        # Two more 3g pods: the GPU has room for two 3g partitions only (80Gi), so the third waits.
        await c.create(pods, gpu_pod("second", "default", "mig-3g"))
        await c.create(pods, gpu_pod("third", "default", "mig-3g"))

        async def placed(name: str) -> bool:
            return bool((await c.get(f"{pods}/{name}"))["spec"].get("nodeName"))

        await eventually(lambda: placed("second"))
        await asyncio.sleep(1.0)
        assert not await placed("third")
        assert await cluster_invariants(c) == []

        # The first pod ends: its claim is released and deleted, and the third pod fits.
        await c.delete(f"{pods}/trainer", gracePeriodSeconds=0)  # no kubelet here to finish a graceful delete

        async def claim_gone() -> bool:
            try:
                await c.get(f"{claims}/{status['resourceClaimName']}")
            except ApiError as e:
                return e.code == 404
            return False

        await eventually(claim_gone)
        await eventually(lambda: placed("third"))
        assert len((await c.list(claims))["items"]) == 2
        assert await cluster_invariants(c) == []


async def test_claim_of_a_finished_pod_is_released(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        pods = resource_path("", "v1", "pods", "default")
        claims = resource_path(*R, "resourceclaims", "default")
        # The first test left two 3g partitions in use, which take all of the GPU's memory.
        for name in ("second", "third"):
            await c.delete(f"{pods}/{name}", gracePeriodSeconds=0)

        async def no_claims() -> bool:
            return not (await c.list(claims))["items"]

        await eventually(no_claims)
        # A claim by name (not from a template) stays, but loses its allocation when its pod is done.
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "shared-1g", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "mig-1g.gpu.example.com"}}]}}}
        await c.create(claims, claim)
        pod = gpu_pod("batch", "default", "mig-1g")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared-1g"}]
        await c.create(pods, pod)

        async def allocated() -> dict[str, Any] | None:
            got = await c.get(f"{claims}/shared-1g")
            return got if (got.get("status") or {}).get("allocation") else None

        await eventually(allocated)
        p = await c.get(f"{pods}/batch")
        p["status"] = {**(p.get("status") or {}), "phase": "Succeeded"}
        await c.update(f"{pods}/batch/status", p)

        async def released() -> dict[str, Any] | None:
            got = await c.get(f"{claims}/shared-1g")
            st = got.get("status") or {}
            done = not st.get("allocation") and not st.get("reservedFor")
            # Then the finalizer goes, in a second write.
            return got if done and FINALIZER not in (got["metadata"].get("finalizers") or []) else None

        got = await eventually(released)
        assert got["metadata"]["name"] == "shared-1g"  # a claim by name is not deleted
        # an empty reservedFor is left out, as kube-apiserver's omitempty leaves it: kubectl
        # shows `status: {}`
        assert got.get("status") in (None, {})


async def test_binding_conditions_hold_the_pod_until_the_device_is_ready(served: Serve) -> None:
    """A device with bindingConditions: PreBind waits for them on the claim's status.devices."""
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        node = "fabric-node"
        await _gpu_node(c, node)
        await c.create(resource_path(*R, "deviceclasses"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fabric"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fabric.example.com"'}}]}})
        await c.create(resource_path(*R, "resourceslices"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric-slice"},
            "spec": {"driver": "fabric.example.com", "nodeName": node,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "link-0", "bindsToNode": True,
                                  "bindingConditions": ["example.com/attached"],
                                  "bindingFailureConditions": ["example.com/attach-failed"]}]}})
        claims = resource_path(*R, "resourceclaims", "default")
        pods = resource_path("", "v1", "pods", "default")
        await c.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                "metadata": {"name": "link", "namespace": "default"},
                                "spec": {"devices": {"requests": [{"name": "l", "exactly": {
                                    "deviceClassName": "fabric"}}]}}})
        pod = gpu_pod("attached", "default", "unused")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "link"}]
        await c.create(pods, pod)

        async def allocated() -> dict[str, Any] | None:
            got = await c.get(f"{claims}/link")
            return got if (got.get("status") or {}).get("allocation") else None

        claim = await eventually(allocated)
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert result["bindingConditions"] == ["example.com/attached"]
        await asyncio.sleep(0.5)
        assert not (await c.get(f"{pods}/attached"))["spec"].get("nodeName")  # still waiting in PreBind
        # The driver reports the device attached.
        claim["status"]["devices"] = [{"driver": "fabric.example.com", "pool": "fabric", "device": "link-0",
                                       "conditions": [{"type": "example.com/attached", "status": "True",
                                                       "reason": "Attached", "message": "",
                                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]
        await c.update(f"{claims}/link/status", claim)

        async def bound() -> bool:
            return bool((await c.get(f"{pods}/attached"))["spec"].get("nodeName") == node)

        await eventually(bound)


async def test_an_extended_resource_backed_by_a_class_gets_a_claim_deleted_with_its_pod(served: Serve) -> None:
    """KEP-5004: ``limits: {example.com/fpga: 1}`` on a node without that resource is a device of
    the class naming it, through a claim the scheduler makes; the pod's deletion takes the claim."""
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        node = "fpga-node"
        await _gpu_node(c, node)
        await c.create(resource_path(*R, "deviceclasses"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fpga"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fpga.example.com"'}}],
                     "extendedResourceName": "example.com/fpga"}})
        await c.create(resource_path(*R, "resourceslices"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fpga-node-fpgas"},
            "spec": {"driver": "fpga.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "fpga-0"}]}})
        pods = resource_path("", "v1", "pods", "default")
        claims = resource_path(*R, "resourceclaims", "default")
        await c.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fpga-user"},
                              "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [
                                  {"name": "c", "image": "x", "resources": {"limits": {"example.com/fpga": "1"}}}]}})

        async def bound() -> dict[str, Any] | None:
            p = await c.get(f"{pods}/fpga-user")
            return p if p["spec"].get("nodeName") and p["status"].get("extendedResourceClaimStatus") else None

        pod = await eventually(bound)
        name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        claim = await c.get(f"{claims}/{name}")
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["device"]) == ("fpga.example.com", "fpga-0")
        assert FINALIZER in claim["metadata"]["finalizers"]
        await c.delete(f"{pods}/fpga-user", gracePeriodSeconds=0)

        async def claim_gone() -> bool:
            try:
                await c.get(f"{claims}/{name}")
            except ApiError as e:
                return e.code == 404
            return False

        await eventually(claim_gone)


async def test_a_device_taint_rule_keeps_pods_off_its_devices_and_evicts_them(served: Serve) -> None:
    """A NoSchedule DeviceTaintRule on a node's only device keeps a pod pending; gone, the pod is
    bound; a NoExecute one then evicts it (DisruptionTarget, deletion) as upstream's controller."""
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        node, driver = "taint-node", "taint.example.com"
        await _gpu_node(c, node)
        await c.create(resource_path(*R, "deviceclasses"), {
            "metadata": {"name": "taintable"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
        await c.create(resource_path(*R, "resourceslices"), {"metadata": {"name": "taint-slice"}, "spec": {
            "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "dev-0"}]}})
        rules = resource_path(*R, "devicetaintrules")
        taint = {"key": "example.com/maintenance", "effect": "NoSchedule"}
        await c.create(rules, {"metadata": {"name": "hold"}, "spec": {"deviceSelector": {"driver": driver},
                                                                      "taint": taint}})
        claims = resource_path(*R, "resourceclaims", "default")
        pods = resource_path("", "v1", "pods", "default")
        await c.create(claims, {"metadata": {"name": "taintable"}, "spec": {"devices": {"requests": [
            {"name": "d", "exactly": {"deviceClassName": "taintable"}}]}}})
        pod = gpu_pod("held", "default", "unused")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "taintable"}]
        await c.create(pods, pod)

        async def refused() -> bool:
            conditions = (await c.get(f"{pods}/held")).get("status", {}).get("conditions") or []
            return any(x["type"] == "PodScheduled" and x["status"] == "False" for x in conditions)

        await eventually(refused)
        assert not (await c.get(f"{pods}/held"))["spec"].get("nodeName")
        await c.delete(f"{rules}/hold")

        async def bound() -> bool:
            return bool((await c.get(f"{pods}/held"))["spec"].get("nodeName") == node)

        await eventually(bound)
        await c.create(rules, {"metadata": {"name": "evict"}, "spec": {
            "deviceSelector": {"driver": driver, "device": "dev-0"}, "taint": {**taint, "effect": "NoExecute"}}})

        async def evicted() -> dict[str, Any] | None:
            got = await c.get(f"{pods}/held")
            return got if got["metadata"].get("deletionTimestamp") else None

        got = await eventually(evicted)
        assert any(x["type"] == "DisruptionTarget" and x["reason"] == "DeletionByDeviceTaintManager"
                   for x in got["status"]["conditions"])
        await c.delete(f"{pods}/held", gracePeriodSeconds=0)  # no kubelet here to finish a graceful delete
        await c.delete(f"{rules}/evict")
