"""PreBind of a PodGroup's claim (KEP-5729), driven through the manager: a member binds only with
the allocation it was filtered and reserved against, and every member waits for the binding
conditions of the shared claim's devices (KEP-5007), as upstream's PreBind waits for all of a pod's claims."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from controlplane.scheduler.dra.manager import BindingFailed, DraManager, PodClaims

from .helpers import DRIVER, claim, device, manager_with, pod, request, slice_
from .test_manager import CLASS, FakeClient, conditions_device, path_of

GROUP = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "g", "namespace": "default", "uid": "uid-g"},
         "spec": {"resourceClaims": [{"name": "shared", "resourceClaimName": "shared"}]}}
FOR_GROUP = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "uid-g"}


def member(name: str) -> dict[str, Any]:
    p = pod(name, "shared")  # its entry matches the group's exactly
    p["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    return p


def two_nodes(**dev: Any) -> tuple[DraManager, FakeClient]:
    """One device on each of n1 and n2, the group's claim not allocated yet."""
    m = manager_with(slice_("s1", "n1", [device("d0", **dev)]), slice_("s2", "n2", [device("d0", **dev)]), CLASS)
    m.podgroups = lambda: {"default/g": GROUP}
    c = claim("shared", request("r", "gpu"))
    m.on_claim(c)
    return m, FakeClient({path_of("shared"): copy.deepcopy(c)})


def scheduled(m: DraManager, p: dict[str, Any], node: str) -> PodClaims:
    """A member's scheduling cycle up to Reserve on ``node``."""
    pc = m.pre_filter(p)
    assert pc is not None
    assert m.filter(pc, node, {}) is None
    assert m.reserve(pc, node, {}) is None
    return pc


def stored(client: FakeClient) -> dict[str, Any]:
    return client.objects[path_of("shared")]


def pool_of(client: FakeClient) -> str:
    [result] = stored(client)["status"]["allocation"]["devices"]["results"]
    return str(result["pool"])


async def test_a_member_is_not_bound_with_an_allocation_made_after_its_cycle_on_another_node() -> None:
    m, client = two_nodes()
    a, b, c = member("a"), member("b"), member("c")
    pa = scheduled(m, a, "n1")  # a allocates the group's claim on n1 (in memory)
    pb = scheduled(m, b, "n1")  # b's cycle sees it: b is for n1
    assert pb.to_allocate == [] and m.filter(pb, "n2", {}) is not None
    m.unreserve(pa)  # a's cycle fails after Reserve (a Permit, another plugin's Reserve...)
    pc = m.pre_filter(c)
    assert pc is not None and pc.to_allocate == [0]  # the claim is free again: c allocates it on n2
    assert m.reserve(pc, "n2", {}) is None
    with pytest.raises(BindingFailed, match="allocated to other devices or nodes"):
        await m.pre_bind(client, pb, b, "n1")
    assert "allocation" not in (stored(client).get("status") or {})  # b wrote nothing
    assert pb.written == []
    await m.pre_bind(client, pc, c, "n2")  # c's own allocation is intact
    assert pool_of(client) == "n2" and stored(client)["status"]["reservedFor"] == [FOR_GROUP]


async def test_a_member_is_not_bound_when_the_written_allocation_moved_to_another_node() -> None:
    m, client = two_nodes()
    a, b = member("a"), member("b")
    pa = scheduled(m, a, "n1")
    await m.pre_bind(client, pa, a, "n1")
    assert pool_of(client) == "n1"
    pb = scheduled(m, b, "n1")  # b is filtered against the written allocation, on n1
    # Meanwhile the claim is freed and allocated again on n2 for the group (another member).
    moved = copy.deepcopy(stored(client))
    moved["metadata"]["resourceVersion"] = str(int(moved["metadata"]["resourceVersion"]) + 1)
    moved["status"]["allocation"]["devices"]["results"][0]["pool"] = "n2"
    moved["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = ["n2"]
    client.objects[path_of("shared")] = moved
    m.on_claim(moved)
    with pytest.raises(BindingFailed, match="allocated to other devices or nodes"):
        await m.pre_bind(client, pb, b, "n1")
    assert stored(client) == moved  # untouched


async def test_a_sibling_may_write_the_groups_allocation_before_the_member_that_reserved_it() -> None:
    m, client = two_nodes()
    a, b = member("a"), member("b")
    pa = scheduled(m, a, "n1")
    pb = scheduled(m, b, "n1")
    await m.pre_bind(client, pb, b, "n1")  # b's PreBind first: it writes a's Reserve's allocation
    assert pool_of(client) == "n1" and stored(client)["status"]["reservedFor"] == [FOR_GROUP]
    await m.pre_bind(client, pa, a, "n1")  # the same allocation: a binds too, nothing more written
    assert [w for w in client.writes if w[0] == "PUT"] == [("PUT", path_of("shared") + "/status")]


async def both_waiting(m: DraManager, client: FakeClient) -> tuple[asyncio.Task[None], asyncio.Task[None]]:
    a, b = member("a"), member("b")
    pa = scheduled(m, a, "n1")
    pb = scheduled(m, b, "n1")
    ta = asyncio.create_task(m.pre_bind(client, pa, a, "n1"))
    await asyncio.sleep(0.05)
    tb = asyncio.create_task(m.pre_bind(client, pb, b, "n1"))  # after a wrote the allocation
    await asyncio.sleep(0.05)
    assert stored(client)["status"]["reservedFor"] == [FOR_GROUP]
    assert not ta.done() and not tb.done()  # both wait for the device's binding conditions
    return ta, tb


def set_condition(m: DraManager, client: FakeClient, cond: str) -> None:
    obj = copy.deepcopy(stored(client))
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    obj["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "d0",
                                 "conditions": [{"type": cond, "status": "True"}]}]
    client.objects[path_of("shared")] = obj
    m.on_claim(obj)  # what the claim informer delivers


async def test_every_member_waits_for_the_shared_devices_binding_conditions() -> None:
    m, client = two_nodes(**conditions_device())
    ta, tb = await both_waiting(m, client)
    set_condition(m, client, "dra.example.com/attached")
    await asyncio.wait_for(asyncio.gather(ta, tb), 2)
    assert pool_of(client) == "n1" and stored(client)["status"]["reservedFor"] == [FOR_GROUP]


async def test_a_binding_failure_fails_every_member_and_frees_the_groups_claim() -> None:
    m, client = two_nodes(**conditions_device())
    ta, tb = await both_waiting(m, client)
    set_condition(m, client, "dra.example.com/failed")
    for t in (ta, tb):
        with pytest.raises(BindingFailed, match=r"^claim shared binding failed: reason=, message=\"\"$"):
            await asyncio.wait_for(t, 2)
    status = stored(client)["status"]
    assert "allocation" not in status and "reservedFor" not in status  # freed with the last member
    assert m.state.claims() == {}  # the device is free again
