"""KEP-5729 over a real socket: a PodGroup's claim from a template is created once for the group,
shared by its pods (one device per group, the group on that device's node), reserved for the
PodGroup, and freed and deleted once the PodGroup is gone. The objects are dra-example-driver's
``podgroup-resourceclaimtemplate`` example's, in scheduling.k8s.io/v1beta1."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
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


async def test_a_pods_own_claim_is_made_once_its_podgroup_without_claims_arrives(tmp_path: Path) -> None:
    """A member's claims wait until its PodGroup is known (are they the group's?); a PodGroup
    with no claims of its own must still release them: the pod created first gets its own."""
    from controlplane.api.app import create_app
    from controlplane.config import Config
    from controlplane.scheduler.dra.claims import ClaimController

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        await c.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default"), {
            "metadata": {"name": "t"},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}}}})
        task = asyncio.create_task(ClaimController(c).run())
        try:
            await c.create("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {
                "schedulingGroup": {"podGroupName": "g"},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "c", "image": "busybox"}]}})
            await asyncio.sleep(0.3)  # the controller has seen the pod, and waits for its group
            await c.create(resource_path("scheduling.k8s.io", "v1beta1", "podgroups", "default"), {
                "metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
            async with asyncio.timeout(10):
                while not ((await c.get("/api/v1/namespaces/default/pods/p")).get("status") or {}).get(
                        "resourceClaimStatuses"):
                    await asyncio.sleep(0.05)
            claims = (await c.list(resource_path("resource.k8s.io", "v1", "resourceclaims", "default")))["items"]
            assert [cl["metadata"]["ownerReferences"][0]["kind"] for cl in claims] == ["Pod"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
