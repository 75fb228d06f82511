"""What a pod whose claims cannot be satisfied is told, in upstream's words: the
DynamicResources plugin's reasons (one for every node that cannot hold the devices, so
they fold into one count), and preemption's answer after them, also after a PreFilter
rejection (the scheduler, in process over the API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.client import resource_path
from tests.scheduler.helpers import node
from tests.scheduler.inprocess import Cluster, running

from .helpers import DRIVER, device, device_class, request, slice_

R = ("resource.k8s.io", "v1")


def named_claim(name: str, cls: str, count: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [request("gpu", cls, count=count)]}}}


def claim_pod(name: str, claim_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]}}


async def scheduled_condition(cluster: Cluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def failed() -> bool:
        pod = await cluster.get(name)
        for cond in pod.get("status", {}).get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                found.update(cond)
                return True
        return False

    await cluster.until(failed)
    return found


async def test_too_few_devices_and_a_missing_class_are_reported_as_upstream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        c = cluster.c
        await cluster.nodes(node("n1"), node("n2"))
        await c.create(resource_path(*R, "deviceclasses"), device_class("gpu", f'device.driver == "{DRIVER}"'))
        for n in ("n1", "n2"):
            await c.create(resource_path(*R, "resourceslices"), slice_(f"{n}-gpus", n, [device("gpu-0")]))
        claims = resource_path(*R, "resourceclaims", "default")
        await c.create(claims, named_claim("two", "gpu", count=2))
        await c.create(claims, named_claim("classless", "nope"))
        await cluster.pods(claim_pod("greedy", "two"), claim_pod("classless", "classless"))

        greedy = await scheduled_condition(cluster, "greedy")
        # each node says the same (not how many devices it lacks), and evicting pods frees no
        # device: UnschedulableAndUnresolvable, so preemption finds nothing to try
        assert greedy["reason"] == "Unschedulable"
        assert greedy["message"] == ("0/2 nodes are available: 2 cannot allocate all claims. preemption: "
                                     "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
        classless = await scheduled_condition(cluster, "classless")
        # a PreFilter rejection: its message once, then preemption's over every node
        assert classless["message"] == ("0/2 nodes are available: request gpu: device class nope does not exist. "
                                        "preemption: 0/2 nodes are available: 2 Preemption is not helpful "
                                        "for scheduling.")
