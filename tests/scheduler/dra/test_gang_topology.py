"""A gang with a topology constraint whose members need devices: the domain chosen for the
group must hold every member's devices, not only its cpu and memory, as upstream's
topology-aware workload scheduling (KEP-5732) evaluates a placement by placing every member,
DynamicResources' allocations included.

Before, a domain counted as many members as its nodes' cpu allowed, and each node passed
DynamicResources' Filter for one member: a rack with one free GPU was chosen for three
members needing a GPU each, the third failed, and the group waited parked (up to five
minutes) while another rack had room for all three."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.client import resource_path

from ..helpers import node, pod, podgroup
from ..inprocess import running
from .helpers import DRIVER, claim, device, device_class, request, slice_

R = ("resource.k8s.io", "v1")


def member(name: str) -> dict[str, Any]:
    p = pod(name, group="g")
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return p


async def test_a_gangs_domain_holds_every_members_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        # rack-b is the fuller rack (MostAllocated placement score) but has one GPU; rack-a has three
        await cluster.nodes(node("a", cpu="64", labels={"rack": "rack-a"}),
                            node("b", cpu="2", labels={"rack": "rack-b"}))
        c = cluster.c
        await c.create(resource_path(*R, "deviceclasses"), device_class("gpu", f"device.driver == '{DRIVER}'"))
        await c.create(resource_path(*R, "resourceslices"),
                       slice_("a-gpus", "a", [device(f"gpu-{i}") for i in range(3)]))
        await c.create(resource_path(*R, "resourceslices"), slice_("b-gpus", "b", [device("gpu-0")]))
        for i in range(3):
            body = claim(f"w{i}-gpu", request("gpu", "gpu"))
            for k in ("uid", "resourceVersion"):
                del body["metadata"][k]
            await c.create(resource_path(*R, "resourceclaims", "default"), body)
        await c.create("/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups",
                       podgroup("g", 3, topology="rack"))
        await cluster.pods(*(member(f"w{i}") for i in range(3)))

        assert await cluster.bound("w0", "w1", "w2", timeout=10) == {"w0": "a", "w1": "a", "w2": "a"}
        devices = set()
        for i in range(3):
            got = await c.get(resource_path(*R, "resourceclaims", "default", f"w{i}-gpu"))
            [result] = got["status"]["allocation"]["devices"]["results"]
            devices.add((result["pool"], result["device"]))
        assert devices == {("a", "gpu-0"), ("a", "gpu-1"), ("a", "gpu-2")}
        # counting the members' devices held nothing once the domain was chosen
        dra = cluster.sched.fwk.get("DynamicResources")
        assert not [k for k in dra.manager.state.claims() if k.startswith("\0")]  # type: ignore[union-attr]
