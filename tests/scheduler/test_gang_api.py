"""Gang scheduling as a user of upstream meets it through the API: what the server refuses
in a PodGroup or Workload (1.37's declarative validation of scheduling.k8s.io/v1beta1), a
gated member's ``SchedulingGated`` condition, and the Permit timeout (upstream's 5 minutes,
its ``rejected due to timeout ...`` message)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.client import ApiError
from controlplane.registry.podgroups import prepare_podgroup, prepare_scheduling_workload
from controlplane.scheduler.plugins.gangscheduling import GangScheduling
from controlplane.scheduler.scheduler import Scheduler

from .helpers import node, pod, podgroup
from .inprocess import running

NS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"


def _fields(causes: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in causes]


def test_a_podgroup_is_validated_as_upstream() -> None:
    def pg(policy: Any, **spec: Any) -> dict[str, Any]:
        return {"spec": {"schedulingPolicy": policy, **spec}}

    assert prepare_podgroup(pg({"gang": {"minCount": 2}}), None) == []
    assert prepare_podgroup(pg({"basic": {}}), None) == []
    assert _fields(prepare_podgroup(pg({"gang": {"minCount": 0}}), None)) == [
        ("spec.schedulingPolicy.gang.minCount", "Invalid value: 0: must be greater than or equal to 1")]
    assert _fields(prepare_podgroup(pg({}), None)) == [
        ("spec.schedulingPolicy", 'Invalid value: "": must specify one of: `basic`, `gang`')]
    assert _fields(prepare_podgroup(pg({"basic": {}, "gang": {"minCount": 1}}), None)) == [
        ("spec.schedulingPolicy", 'Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`')]
    two = {"topology": [{"key": "rack"}, {"key": "zone"}]}
    assert _fields(prepare_podgroup(pg({"basic": {}}, schedulingConstraints=two), None)) == [
        ("spec.schedulingConstraints.topology", "Too many: 2: must have at most 1 item")]
    bad = {"topology": [{"key": "no spaces"}]}
    assert [f for f, _ in _fields(prepare_podgroup(pg({"basic": {}}, schedulingConstraints=bad), None))] == [
        "spec.schedulingConstraints.topology[0].key"]

    # updates: minCount may change; the policy's kind, the Workload reference and the
    # topology may not
    old = pg({"gang": {"minCount": 3}}, schedulingConstraints={"topology": [{"key": "rack"}]})
    assert prepare_podgroup(pg({"gang": {"minCount": 2}}, schedulingConstraints={"topology": [{"key": "rack"}]}),
                            old) == []
    assert _fields(prepare_podgroup(pg({"basic": {}}, schedulingConstraints={"topology": [{"key": "rack"}]}),
                                    old)) == [
        ("spec.schedulingPolicy.basic", "Forbidden: field is immutable"),
        ("spec.schedulingPolicy.gang", "Forbidden: field cannot be cleared once set")]
    moved = pg({"gang": {"minCount": 3}}, schedulingConstraints={"topology": [{"key": "zone"}]},
               workloadRef={"workloadName": "w", "templateName": "t"})
    assert _fields(prepare_podgroup(moved, old)) == [
        ("spec.workloadRef", "Forbidden: field is immutable"),
        ("spec.schedulingConstraints", "Forbidden: field is immutable")]


def test_a_workload_is_validated_as_upstream() -> None:
    def wl(*templates: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"podGroupTemplates": list(templates)}}

    workers = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
    assert prepare_scheduling_workload(wl(workers), None) == []
    assert _fields(prepare_scheduling_workload(wl(), None)) == [
        ("spec", 'Invalid value: "": must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`')]
    assert _fields(prepare_scheduling_workload(
        wl({"name": "w", "schedulingPolicy": {"gang": {"minCount": 0}}}), None)) == [
        ("spec.podGroupTemplates[0].schedulingPolicy.gang.minCount",
         "Invalid value: 0: must be greater than or equal to 1")]
    # a template's minCount may change; templates may not come or go
    assert prepare_scheduling_workload(wl({**workers, "schedulingPolicy": {"gang": {"minCount": 4}}}),
                                       wl(workers)) == []
    driver = {"name": "driver", "schedulingPolicy": {"basic": {}}}
    assert _fields(prepare_scheduling_workload(wl(workers, driver), wl(workers))) == [
        ("spec.podGroupTemplates", "Forbidden: may not add items")]


async def test_the_server_refuses_an_invalid_podgroup_and_gates_a_gated_pod(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        with pytest.raises(ApiError) as e:
            await cluster.c.create(f"{NS}/podgroups", podgroup("zero", 0))
        assert e.value.code == 422
        await cluster.c.create(f"{NS}/podgroups", podgroup("g", 2))
        with pytest.raises(ApiError) as e:
            await cluster.c.patch(f"{NS}/podgroups/g", {"spec": {"schedulingPolicy": {"gang": None, "basic": {}}}},
                                  patch_type="merge")
        assert e.value.code == 422
        await cluster.c.patch(f"{NS}/podgroups/g", {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}},
                              patch_type="merge")

        # a pod created with scheduling gates says so (the pod strategy's PrepareForCreate)
        await cluster.pods(pod("held", schedulingGates=[{"name": "example.com/hold"}]))
        cond = next(c for c in (await cluster.get("held"))["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")


def test_members_wait_at_permit_for_five_minutes_by_default() -> None:
    assert GangScheduling.build(None, {}).manager.timeout == 300  # type: ignore[arg-type]
    assert GangScheduling.build(None, {"timeoutSeconds": 30}).manager.timeout == 30  # type: ignore[arg-type]


async def test_a_gang_member_waiting_at_permit_times_out_as_upstream_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def configure(s: Scheduler) -> None:
        s.fwk.get("GangScheduling").manager.timeout = 0.4  # type: ignore[union-attr]

    async with running(tmp_path, monkeypatch, configure) as cluster:
        await cluster.nodes(node("n1"))
        await cluster.c.create(f"{NS}/podgroups", podgroup("g", 2))
        # the second member is gated: it counts towards minCount but never reaches Permit
        await cluster.pods(pod("w0", group="g"), pod("w1", group="g", schedulingGates=[{"name": "hold"}]))

        async def message() -> str:
            for c in (await cluster.get("w0"))["status"].get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False":
                    return str(c["message"])
            return ""

        await cluster.until(message)
        assert await message() == "rejected due to timeout after waiting 400ms at plugin GangScheduling"
        assert (await cluster.placement())["w0"] is None


async def test_the_scheduler_keeps_a_podgroups_other_conditions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await cluster.nodes(node("n1"))
        await cluster.c.create(f"{NS}/podgroups", podgroup("g", 2))
        other = {"type": "example.com/Ready", "status": "True", "reason": "Set", "message": "by a controller",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
        await cluster.c.patch(f"{NS}/podgroups/g/status", {"status": {"conditions": [other]}}, patch_type="merge")
        await cluster.pods(pod("w0", group="g"), pod("w1", group="g"))
        await cluster.bound("w0", "w1")

        async def conditions() -> dict[str, str]:
            pg = await cluster.c.get(f"{NS}/podgroups/g")
            return {c["type"]: c["status"] for c in (pg.get("status") or {}).get("conditions") or ()}

        async def written() -> bool:
            return "PodGroupInitiallyScheduled" in await conditions()

        await cluster.until(written)
        assert await conditions() == {"example.com/Ready": "True", "PodGroupInitiallyScheduled": "True"}
