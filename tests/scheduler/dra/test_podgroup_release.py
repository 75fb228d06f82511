"""A gang's devices over a real socket (KEP-5729 with the PodGroup protection controller): a
PodGroup deleted under running pods keeps its claim (its protection finalizer holds it) until
its pods are gone, then the claim is freed and the next gang gets the device; a NoExecute
DeviceTaintRule on a device reserved for a PodGroup evicts the group's pods."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.controllers.podgroupprotection import FINALIZER
from controlplane.scheduler.dra.benchdata import create_gpu_cluster, gpu_cluster
from tests.scheduler.dra.test_e2e import eventually
from tests.scheduler.dra.test_podgroup_claims import member, podgroup
from tests.test_cli import Serve, start_serve

R = ("resource.k8s.io", "v1")
S = ("scheduling.k8s.io", "v1beta1")
PODS = resource_path("", "v1", "pods", "default")
CLAIMS = resource_path(*R, "resourceclaims", "default")
GROUPS = resource_path(*S, "podgroups", "default")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("dra-podgroup-release"), scheduler=True)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


async def _gang(c: Client, group: str) -> None:
    await c.create(GROUPS, podgroup(group))
    for i in range(2):
        await c.create(PODS, member(f"{group}-{i}", group))


async def _bound(c: Client, group: str) -> list[dict[str, Any]] | None:
    pods = [p for p in (await c.list(PODS))["items"] if p["spec"].get("schedulingGroup", {}).get("podGroupName")
            == group]
    return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None


async def _group_claim(c: Client, group: str) -> dict[str, Any]:
    [st] = (await c.get(f"{GROUPS}/{group}"))["status"]["resourceClaimStatuses"]
    return await c.get(f"{CLAIMS}/{st['resourceClaimName']}")


async def test_a_deleted_podgroup_keeps_its_device_until_its_pods_end_then_the_next_gang_gets_it(
        served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        await create_gpu_cluster(c, gpu_cluster(nodes=1, gpus_per_node=1, node_prefix="gpu-node-r"))
        await _gang(c, "first")
        await eventually(lambda: _bound(c, "first"), timeout=30)
        assert (await c.get(f"{GROUPS}/first"))["metadata"]["finalizers"] == [FINALIZER]
        claim = await _group_claim(c, "first")
        await _gang(c, "second")  # one GPU only: it waits for the first gang's

        await c.delete(f"{GROUPS}/first")
        await asyncio.sleep(2)  # the controllers' time to act, were they to act wrongly
        held = await c.get(f"{GROUPS}/first")
        assert held["metadata"].get("deletionTimestamp") and held["metadata"]["finalizers"] == [FINALIZER]
        still = await c.get(f"{CLAIMS}/{claim['metadata']['name']}")
        assert still["status"]["reservedFor"][0]["name"] == "first" and still["status"].get("allocation")
        assert await _bound(c, "second") is None

        for i in range(2):
            await c.delete(f"{PODS}/first-{i}", gracePeriodSeconds=0)

        async def first_gone() -> bool:
            for path in (f"{GROUPS}/first", f"{CLAIMS}/{claim['metadata']['name']}"):
                try:
                    await c.get(path)
                    return False
                except ApiError as e:
                    if e.code != 404:
                        raise
            return True

        await eventually(first_gone, timeout=30)
        await eventually(lambda: _bound(c, "second"), timeout=30)
        result = (await _group_claim(c, "second"))["status"]["allocation"]["devices"]["results"][0]
        first = claim["status"]["allocation"]["devices"]["results"][0]
        assert (result["pool"], result["device"]) == (first["pool"], first["device"])  # the same GPU


async def test_a_noexecute_rule_evicts_the_pods_of_the_group_its_device_is_reserved_for(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        if await _bound(c, "second") is None:  # alone: a gang of its own
            await create_gpu_cluster(c, gpu_cluster(nodes=1, gpus_per_node=1, node_prefix="gpu-node-r"))
            await _gang(c, "second")
        pods = await eventually(lambda: _bound(c, "second"), timeout=30)
        claim = await _group_claim(c, "second")
        assert claim["status"]["reservedFor"][0]["resource"] == "podgroups"  # not the pods
        result = claim["status"]["allocation"]["devices"]["results"][0]
        await c.create(resource_path(*R, "devicetaintrules"), {
            "metadata": {"name": "drain-gang-gpu"},
            "spec": {"deviceSelector": {"driver": result["driver"], "pool": result["pool"],
                                        "device": result["device"]},
                     "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}})
        uids = {p["metadata"]["uid"] for p in pods}

        async def evicted() -> bool:
            left = [p for p in (await c.list(PODS))["items"] if p["metadata"]["uid"] in uids
                    and not p["metadata"].get("deletionTimestamp")]
            return not left

        await eventually(evicted, timeout=30)
        events = (await c.list(resource_path("", "v1", "events", "default")))["items"]
        marked = {e["involvedObject"]["name"] for e in events if e["reason"] == "DeviceTaintManagerEviction"}
        assert {p["metadata"]["name"] for p in pods} <= marked
