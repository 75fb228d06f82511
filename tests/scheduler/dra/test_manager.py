"""The plugin's state: reservations that hold devices across cycles, PreBind and binding conditions."""

from __future__ import annotations

import asyncio
import copy
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from controlplane.client import ApiError
from controlplane.scheduler.dra.manager import FINALIZER, BindingFailed, DraManager

from .helpers import DRIVER, claim, device, device_class, manager_with, pod, request, slice_

CLASS = device_class("gpu", f'device.driver == "{DRIVER}"')


class FakeClient:
    """Stores what PUT/PATCH write, as the API would (resourceVersion bumped)."""

    def __init__(self, objects: dict[str, dict[str, Any]], fail_status: bool = False) -> None:
        self.objects = objects  # path -> object
        self.writes: list[tuple[str, str]] = []
        self.fail_status = fail_status

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion", "1")) + 1)
        return obj

    async def update(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.fail_status:
            raise ApiError(409, "Conflict", "the object has been modified")
        base = path.removesuffix("/status")
        self.writes.append(("PUT", path))
        self.objects[base] = self._bump({**self.objects[base], "status": body.get("status")})
        return self.objects[base]

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("PATCH", path))
        obj = copy.deepcopy(self.objects[path])
        obj["metadata"]["finalizers"] = body["metadata"]["finalizers"]
        self.objects[path] = self._bump(obj)
        return self.objects[path]


def path_of(name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}"


def one_device_manager(**dev: Any) -> DraManager:
    return manager_with(slice_("s1", "n1", [device("d0", **dev)]), CLASS)


def test_a_reservation_holds_the_device_until_unreserved() -> None:
    m = one_device_manager()
    m.on_claim(claim("a", request("r", "gpu")))
    m.on_claim(claim("b", request("r", "gpu")))
    pa, pb = m.pre_filter(pod("pa", "a")), m.pre_filter(pod("pb", "b"))
    assert pa is not None and pb is not None
    assert m.filter(pa, "n1", {}) is None and m.filter(pb, "n1", {}) is None  # both fit before any reserve
    assert m.reserve(pa, "n1", {}) is None
    assert m.filter(pb, "n1", {}) is not None
    assert m.reserve(pb, "n1", {}) is not None  # a reserve re-checks: no double allocation
    m.unreserve(pa)
    m.unreserve(pa)  # idempotent
    assert m.filter(pb, "n1", {}) is None and m.reserve(pb, "n1", {}) is None


def test_an_allocated_claim_only_fits_its_node() -> None:
    m = manager_with(slice_("s1", "n1", [device("d0")]), slice_("s2", "n2", [device("d0")]), CLASS)
    m.on_claim(claim("a", request("r", "gpu")))
    pc = m.pre_filter(pod("pa", "a"))
    assert pc is not None and m.reserve(pc, "n2", {}) is None
    assert pc.reserved is not None
    allocated = claim("a", request("r", "gpu"), allocation=pc.reserved[1].allocation(0, "n2"))
    terms = allocated["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == ["n2"]
    m.on_claim(allocated)
    shared = m.pre_filter(pod("other", "a"))
    assert shared is not None and shared.to_allocate == []
    assert m.filter(shared, "n1", {}) is not None and m.filter(shared, "n2", {}) is None


async def test_pre_bind_writes_finalizer_allocation_and_reserved_for() -> None:
    m = one_device_manager()
    c = claim("a", request("r", "gpu"))
    m.on_claim(c)
    client = FakeClient({path_of("a"): copy.deepcopy(c)})
    p = pod("pa", "a")
    pc = m.pre_filter(p)
    assert pc is not None and m.reserve(pc, "n1", {}) is None
    await m.pre_bind(client, pc, p, "n1")
    stored = client.objects[path_of("a")]
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "pa", "uid": "uid-pa"}]
    assert stored["status"]["allocation"]["devices"]["results"] == [
        {"request": "r", "driver": DRIVER, "pool": "n1", "device": "d0"}]
    assert client.writes == [("PATCH", path_of("a")), ("PUT", path_of("a") + "/status")]
    assert m.state.committed("default/a") is not None and not m.state.is_assumed("default/a")


def conditions_device(**extra: Any) -> Any:
    return dict(bindingConditions=["dra.example.com/attached"],
                bindingFailureConditions=["dra.example.com/failed"], bindsToNode=True, **extra)


async def bind_with_conditions(m: DraManager, set_status: str | None) -> tuple[FakeClient, asyncio.Task[None]]:
    c = claim("a", request("r", "gpu"))
    m.on_claim(c)
    client = FakeClient({path_of("a"): copy.deepcopy(c)})
    p = pod("pa", "a")
    pc = m.pre_filter(p)
    assert pc is not None and m.reserve(pc, "n1", {}) is None
    task = asyncio.create_task(m.pre_bind(client, pc, p, "n1"))
    await asyncio.sleep(0.05)
    assert not task.done()  # waiting for the device's conditions
    if set_status is not None:
        stored = copy.deepcopy(client.objects[path_of("a")])
        result = stored["status"]["allocation"]["devices"]["results"][0]
        assert result["bindingConditions"] == ["dra.example.com/attached"]
        cond = "dra.example.com/attached" if set_status == "ok" else "dra.example.com/failed"
        stored["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "d0",
                                        "conditions": [{"type": cond, "status": "True"}]}]
        client.objects[path_of("a")] = stored
        m.on_claim(stored)  # what the claim informer delivers
    return client, task


async def test_binding_conditions_met() -> None:
    m = one_device_manager(**conditions_device())
    client, task = await bind_with_conditions(m, "ok")
    await asyncio.wait_for(task, 2)
    assert client.objects[path_of("a")]["status"]["allocation"]


async def test_binding_failure_condition_releases_the_allocation() -> None:
    m = one_device_manager(**conditions_device())
    client, task = await bind_with_conditions(m, "fail")
    with pytest.raises(BindingFailed, match=r"^claim a binding failed: reason=, message=\"\"$"):
        await asyncio.wait_for(task, 2)
    stored = client.objects[path_of("a")]
    assert "allocation" not in stored["status"] and "reservedFor" not in stored["status"]
    assert m.state.claims() == {}  # the device is free again


async def test_binding_timeout_releases_the_allocation() -> None:
    m = one_device_manager(**conditions_device())
    m.binding_timeout = 0.2
    client, task = await bind_with_conditions(m, None)
    with pytest.raises(BindingFailed, match=r"^device binding timeout$"):
        await asyncio.wait_for(task, 2)
    assert "allocation" not in client.objects[path_of("a")]["status"]
    assert m.state.claims() == {}


async def test_a_failed_write_releases_the_reservation() -> None:
    m = one_device_manager()
    c = claim("a", request("r", "gpu"), )
    c["metadata"]["finalizers"] = [FINALIZER]
    m.on_claim(c)
    client = FakeClient({path_of("a"): copy.deepcopy(c)}, fail_status=True)
    p = pod("pa", "a")
    pc = m.pre_filter(p)
    assert pc is not None and m.reserve(pc, "n1", {}) is None
    with pytest.raises(BindingFailed, match=r"writing resourceclaim status"):
        await m.pre_bind(client, pc, p, "n1")
    assert m.state.claims() == {}


def test_an_older_claim_event_does_not_free_devices_prebind_recorded() -> None:
    """The informer may deliver the claim's earlier versions after PreBind recorded the written one."""
    m = one_device_manager()
    old = claim("a", request("r", "gpu"))
    old["metadata"]["resourceVersion"] = "5"
    m.on_claim(old)
    pc = m.pre_filter(pod("pa", "a"))
    assert pc is not None and m.reserve(pc, "n1", {}) is None and pc.reserved is not None
    written = copy.deepcopy(old)
    written["metadata"]["resourceVersion"] = "7"
    written["status"] = {"allocation": pc.reserved[1].allocation(0, "n1")}
    m.on_claim(written)
    stale = copy.deepcopy(old)
    stale["metadata"]["resourceVersion"] = "6"  # e.g. the finalizer's patch
    m.on_claim(stale)
    m.on_claim(claim("b", request("r", "gpu")))
    other = m.pre_filter(pod("pb", "b"))
    assert other is not None and m.filter(other, "n1", {}) is not None


class _Rows(list[Any]):
    """Nodes as the scheduler's walk has them: a sequence with ``columns`` (their rows)."""

    def __init__(self, nodes: list[Any]) -> None:
        super().__init__(nodes)
        self.columns = SimpleNamespace(row={n.name: i for i, n in enumerate(nodes)}, size=len(nodes), removals=0)


@pytest.mark.parametrize("over_columns", [False, True], ids=["per-node", "columns"])
def test_filter_rows_gives_filter_s_verdicts_node_by_node(over_columns: bool) -> None:
    """The batch form the scheduler's walk uses: the same nodes pass as with ``filter``, in
    order, the first ``wanted``; a reservation or an allocation in between is seen by both."""
    slices = [slice_(f"s{i}", f"n{i}", [device("d0")] if i % 3 else []) for i in range(9)]
    m = manager_with(*slices, CLASS)
    plain = [SimpleNamespace(name=f"n{i}", labels={}) for i in range(9)]
    nodes = _Rows(plain) if over_columns else plain
    rows = np.arange(9, dtype=np.int64)

    def by_filter(pc: Any) -> list[int]:
        return [i for i in range(9) if m.filter(pc, f"n{i}", {}) is None]

    def batch(pc: Any, wanted: int = 99, at: int = 0) -> list[int]:
        out: list[int] = m.filter_rows(pc, nodes, rows[at:], wanted).tolist()
        return out

    for name in ("a", "b"):
        m.on_claim(claim(name, request("r", "gpu")))
    pa, pb = m.pre_filter(pod("pa", "a")), m.pre_filter(pod("pb", "b"))
    assert pa is not None and pb is not None
    assert batch(pa, wanted=2) == [1, 2]  # (the rows past the second pass are left unasked)
    assert batch(pa) == by_filter(pa) == [1, 2, 4, 5, 7, 8]
    assert batch(pa, at=3) == [4, 5, 7, 8]
    assert batch(pb) == [1, 2, 4, 5, 7, 8]
    assert m.reserve(pa, "n4", {}) is None  # n4's one device is held: pb no longer fits there
    assert batch(pb) == by_filter(pb) == [1, 2, 5, 7, 8]
    m.unreserve(pa)
    assert batch(pb) == by_filter(pb) == [1, 2, 4, 5, 7, 8]
    assert m.reserve(pa, "n4", {}) is None and pa.reserved is not None
    m.on_claim(claim("a", request("r", "gpu"), allocation=pa.reserved[1].allocation(0, "n4")))
    allocated = m.pre_filter(pod("pa", "a"))  # its claim allocated: only its node fits
    assert allocated is not None and not allocated.to_allocate
    assert batch(allocated) == by_filter(allocated) == [4]
    assert batch(pb) == by_filter(pb) == [1, 2, 5, 7, 8]


def test_row_verdicts_are_forgotten_when_rows_move_or_slices_change() -> None:
    slices = [slice_(f"s{i}", f"n{i}", [device("d0")] if i < 3 else []) for i in range(4)]
    m = manager_with(*slices, CLASS)
    nodes = _Rows([SimpleNamespace(name=f"n{i}", labels={}) for i in range(4)])
    m.on_claim(claim("a", request("r", "gpu")))
    pa = m.pre_filter(pod("pa", "a"))
    assert pa is not None
    rows = np.arange(4, dtype=np.int64)
    assert m.filter_rows(pa, nodes, rows, 99).tolist() == [0, 1, 2]
    # n0 leaves; n3 (no device) moves into its row, as NodeColumns.remove moves the last row
    nodes[0], nodes.columns.row = nodes[3], {"n3": 0, "n1": 1, "n2": 2}
    del nodes[3]
    nodes.columns.size, nodes.columns.removals = 3, 1
    assert m.filter_rows(pa, nodes, rows[:3], 99).tolist() == [1, 2]
    m.on_slice(slice_("s3", "n3", [device("d0")]))  # n3 gets a device
    assert m.filter_rows(pa, nodes, rows[:3], 99).tolist() == [0, 1, 2]
