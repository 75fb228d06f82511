"""Extended resources backed by DRA (KEP-5004): the names a DeviceClass backs, the
requests made of a pod's containers, and the scheduler (in process over the API)
allocating them through a claim of its own where the node has no device plugin for
them, and leaving them to the node's allocatable where it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.client import resource_path
from controlplane.scheduler.dra.extended import (
    ANNOTATION,
    ExtendedNames,
    ExtendedRequest,
    extended_requests,
    request_mappings,
)
from tests.scheduler.helpers import node
from tests.scheduler.inprocess import running

from .helpers import DRIVER, device, slice_

R = ("resource.k8s.io", "v1")


def gpu_class(name: str = "gpu", resource: str | None = "example.com/gpu", created: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if resource:
        spec["extendedResourceName"] = resource
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": spec}


def gpu_pod(name: str, resource: str = "example.com/gpu", count: str = "1", on: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [
        {"name": "sidecar", "image": "x"},
        {"name": "main", "image": "x", "resources": {"limits": {"cpu": "1", resource: count}}}]}
    if on:
        spec["nodeSelector"] = {"kubernetes.io/hostname": on}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_class_backs_its_explicit_name_and_its_implicit_one_the_newest_class_wins() -> None:
    names = ExtendedNames()
    names.update([gpu_class("old", created="2026-01-01T00:00:00Z"), gpu_class("new", created="2026-02-01T00:00:00Z"),
                  gpu_class("plain", resource=None)])
    assert names.class_for("example.com/gpu") == "new"
    assert names.class_for("deviceclass.resource.kubernetes.io/plain") == "plain"
    assert names.class_for("deviceclass.resource.kubernetes.io/missing") is None
    assert names.class_for("nvidia.com/gpu") is None


def test_requests_are_named_by_container_and_sorted_resource_as_upstream() -> None:
    names = ExtendedNames()
    names.update([gpu_class()])
    pod = gpu_pod("p")
    pod["spec"]["initContainers"] = [{"name": "init", "image": "x"}]
    # containers counted after the init containers; example.com/gpu sorts after cpu: index 1
    [req] = extended_requests(pod, names)
    assert req == ExtendedRequest("main", "example.com/gpu", "container-2-request-1", "gpu", 1)
    assert request_mappings([req]) == [{"containerName": "main", "resourceName": "example.com/gpu",
                                        "requestName": "container-2-request-1"}]
    assert extended_requests(gpu_pod("q", resource="example.com/other"), names) == []


async def test_a_node_without_the_resource_gets_a_claim_made_for_the_pod_one_with_it_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        c = cluster.c
        # n1 has a device plugin for example.com/gpu (allocatable), n2 a DRA driver's devices
        await cluster.nodes(node("n1", extra={"example.com/gpu": "1"}), node("n2"))
        await c.create(resource_path(*R, "deviceclasses"), gpu_class())
        await c.create(resource_path(*R, "resourceslices"), slice_("n2-gpus", "n2", [device("gpu-0")]))
        await cluster.pods(gpu_pod("plugin", on="n1"), gpu_pod("dra", on="n2"), gpu_pod("more", on="n2"))
        assert (await cluster.bound("plugin", "dra"))["dra"] == "n2"
        claims = (await c.list(resource_path(*R, "resourceclaims", "default")))["items"]
        [claim] = claims  # none for the pod on the device plugin's node
        dra = await cluster.get("dra")
        meta = claim["metadata"]
        assert meta["name"].startswith("dra-extended-resources-") and meta["annotations"] == {ANNOTATION: "true"}
        assert [(r["kind"], r["uid"], r["controller"]) for r in meta["ownerReferences"]] == \
            [("Pod", dra["metadata"]["uid"], True)]
        assert claim["spec"]["devices"]["requests"][0]["name"] == "container-1-request-1"
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["device"], result["request"]) == ("gpu-0", "container-1-request-1")
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "dra", "uid": dra["metadata"]["uid"]}]
        assert dra["status"]["extendedResourceClaimStatus"] == {
            "resourceClaimName": meta["name"],
            "requestMappings": [{"containerName": "main", "resourceName": "example.com/gpu",
                                 "requestName": "container-1-request-1"}]}
        # the one device is taken: the next pod waits, in the plugin's words (no Insufficient example.com/gpu)
        more = await cluster.get("more")
        await cluster.until(lambda: _failed(cluster, "more"))
        more = await cluster.get("more")
        [cond] = [x for x in more["status"]["conditions"] if x["type"] == "PodScheduled"]
        assert cond["message"].startswith("0/2 nodes are available: 1 cannot allocate all claims, "
                                          "1 node(s) didn't match Pod's node affinity/selector.")


async def _failed(cluster: Any, name: str) -> bool:
    pod = await cluster.get(name)
    return any(x["type"] == "PodScheduled" and x["status"] == "False"
               for x in pod.get("status", {}).get("conditions") or [])
