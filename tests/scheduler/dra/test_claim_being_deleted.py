"""A pod naming a ResourceClaim that is being deleted waits at PreEnqueue, as upstream's
DynamicResources (``foreachPodResourceClaim``, called from PreEnqueue): no scheduling attempt,
so no ``FailedScheduling`` event and no ``PodScheduled=False`` condition, until a claim of that
name it can use exists; then it is scheduled.

Before, the check ran in PreFilter only: each attempt wrote a FailedScheduling event
(``resourceclaim "c" is being deleted``) and the condition, which upstream never writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.client import resource_path

from ..helpers import node, pod
from ..inprocess import running
from .helpers import DRIVER, claim, device, device_class, request, slice_

R = ("resource.k8s.io", "v1")


async def test_a_pod_waits_quietly_while_its_claim_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        c = cluster.c
        claims = resource_path(*R, "resourceclaims", "default")
        await cluster.nodes(node("n1"))
        await c.create(resource_path(*R, "deviceclasses"), device_class("gpu", f"device.driver == '{DRIVER}'"))
        await c.create(resource_path(*R, "resourceslices"), slice_("n1-gpus", "n1", [device("gpu-0")]))
        body = claim("c", request("gpu", "gpu"))
        for k in ("uid", "resourceVersion"):
            del body["metadata"][k]
        await c.create(claims, {**body, "metadata": {**body["metadata"], "finalizers": ["example.com/hold"]}})
        await c.delete(f"{claims}/c")  # held by its finalizer: being deleted
        p = pod("p")
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
        await cluster.pods(p)
        await cluster.settle(1.0)
        got = await cluster.get("p")
        assert not got["spec"].get("nodeName")
        assert not [x for x in (got.get("status") or {}).get("conditions") or () if x["type"] == "PodScheduled"]
        events = (await c.list("/api/v1/namespaces/default/events"))["items"]
        assert not [e for e in events if e["reason"] == "FailedScheduling"]

        # the old claim goes, a new one of that name comes: the pod is tried and bound
        await c.patch(f"{claims}/c", {"metadata": {"finalizers": None}}, patch_type="merge")
        await c.create(claims, body)
        assert (await cluster.bound("p", timeout=5))["p"] == "n1"
