"""KEP-5729 over a real socket: a PodGroup's claim from a template is created once for the group,
shared by its pods (one device per group, the group on that device's node), reserved for the
PodGroup, and freed and deleted once the PodGroup is gone. The objects are dra-example-driver's
``podgroup-resourceclaimtemplate`` example's, in scheduling.k8s.io/v1beta1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.client import Client, resource_path
from controlplane.scheduler.dra.benchdata import create_gpu_cluster, gpu_cluster, gpu_pod
from controlplane.scheduler.dra.claims import POD_CLAIM_NAME
from tests.scheduler.dra.test_e2e import eventually
from tests.test_cli import Serve, start_serve

R = ("resource.k8s.io", "v1")
S = ("scheduling.k8s.io", "v1beta1")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("dra-podgroup"), scheduler=True)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def podgroup(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "whole-gpu"}]}}


def member(name: str, group: str) -> dict[str, Any]:
    pod = gpu_pod(name, "default", "whole-gpu")  # its claim matches the group's exactly: name and template
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


async def test_podgroup_claim_is_shared_by_its_pods_and_reserved_for_the_group(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        # Two nodes with one whole GPU each: four pods with a claim each could not all run.
        await create_gpu_cluster(c, gpu_cluster(nodes=2, gpus_per_node=1, node_prefix="gpu-node-g"))
        pods = resource_path("", "v1", "pods", "default")
        claims = resource_path(*R, "resourceclaims", "default")
        groups = resource_path(*S, "podgroups", "default")
        for g in ("group-1", "group-2"):
            await c.create(groups, podgroup(g))
            for i in range(2):
                await c.create(pods, member(f"{g}-{i}", g))

        async def all_bound() -> list[dict[str, Any]] | None:
            items = (await c.list(pods))["items"]
            mine = [p for p in items if p["metadata"]["name"].startswith("group-")]
            return mine if len(mine) == 4 and all(p["spec"].get("nodeName") for p in mine) else None

        bound = {p["metadata"]["name"]: p for p in await eventually(all_bound, timeout=30)}
        all_claims = {cl["metadata"]["name"]: cl for cl in (await c.list(claims))["items"]}
        assert len(all_claims) == 2  # one per group, none per pod
        devices = set()
        for g in ("group-1", "group-2"):
            pg = await c.get(f"{groups}/{g}")
            [st] = pg["status"]["resourceClaimStatuses"]
            assert st["name"] == "gpu" and st["resourceClaimName"].startswith(f"{g}-gpu-")
            claim = all_claims[st["resourceClaimName"]]
            meta = claim["metadata"]
            assert meta["annotations"][POD_CLAIM_NAME] == "gpu"
            assert meta["ownerReferences"] == [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                                "name": g, "uid": pg["metadata"]["uid"], "controller": True,
                                                "blockOwnerDeletion": True}]
            assert claim["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                                       "name": g, "uid": pg["metadata"]["uid"]}]
            [result] = claim["status"]["allocation"]["devices"]["results"]
            devices.add((result["pool"], result["device"]))
            nodes = set()
            for i in range(2):
                p = bound[f"{g}-{i}"]
                assert p["status"]["resourceClaimStatuses"] == [{"name": "gpu",
                                                                 "resourceClaimName": st["resourceClaimName"]}]
                nodes.add(p["spec"]["nodeName"])
            assert len(nodes) == 1  # the group's device is node-local: the group is on its node
        assert len(devices) == 2  # each group its own GPU

        # The group is done: its pods finish, the PodGroup is deleted; the claim is freed and deleted.
        for g in ("group-1", "group-2"):
            for i in range(2):
                await c.delete(f"{pods}/{g}-{i}", gracePeriodSeconds=0)
            await c.delete(f"{groups}/{g}")

        async def no_claims() -> bool:
            return not (await c.list(claims))["items"]

        await eventually(no_claims, timeout=30)
