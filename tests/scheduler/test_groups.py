"""PodGroups through the API, in process: a Workload's template referenced by a PodGroup
(``podGroupTemplateRef``, the issue's shape) makes a gang that binds all at once; a
``basic`` group's members are scheduled, and fail, one by one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import node, pod, podgroup
from .inprocess import Cluster, running

NS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"


async def _podgroup_conditions(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    pg = await cluster.c.get(f"{NS}/podgroups/{name}")
    return list((pg.get("status") or {}).get("conditions") or [])


async def _failed(cluster: Cluster, name: str) -> str:
    for c in (await cluster.get(name))["status"].get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c["message"])
    return ""


async def test_a_podgroup_made_from_a_workload_template_is_bound_as_a_gang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await cluster.nodes(node("n1", cpu="2"), node("n2", cpu="2"))
        await cluster.c.create(f"{NS}/workloads", {
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "train"},
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}},
                                           {"name": "driver", "schedulingPolicy": {"basic": {}}}]}})
        group = podgroup("train-workers", workload=("train", "workers"), earlier_ref=True)
        group["spec"]["schedulingPolicy"] = {"gang": {"minCount": 3}}  # required by the API: copied from the template
        created = await cluster.c.create(f"{NS}/podgroups", group)
        assert created["spec"]["podGroupTemplateRef"] == {
            "workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}

        # two members of three: held, nothing reserved or bound
        await cluster.pods(pod("w0", cpu="1", group="train-workers"), pod("w1", cpu="1", group="train-workers"))
        await cluster.until(lambda: all(cluster.sched.queue.where(f"default/w{i}") == "unschedulable"
                                        for i in range(2)))
        await cluster.settle(0.3)
        assert all(n is None for n in (await cluster.placement()).values())
        assert not cluster.sched.cache.assumed
        assert cluster.sched.gang is not None
        state = cluster.sched.gang.manager.groups["default/train-workers"]
        assert state.policy is not None and state.policy.gang and state.policy.min_count == 3

        # the third: the gang binds, across both nodes, and the group says so
        await cluster.pods(pod("w2", cpu="1", group="train-workers"))
        where = await cluster.bound("w0", "w1", "w2")
        assert sorted(str(n) for n in where.values()) in (["n1", "n1", "n2"], ["n1", "n2", "n2"])

        async def scheduled() -> bool:
            return any(c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "True"
                       for c in await _podgroup_conditions(cluster, "train-workers"))

        await cluster.until(scheduled)


async def test_the_members_of_a_basic_group_are_scheduled_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await cluster.nodes(node("n1", cpu="2"))
        await cluster.pods(pod("s0", cpu="1", group="serving"), pod("s1", cpu="1", group="serving"),
                           pod("huge", cpu="64", group="serving"))
        await cluster.settle(0.3)
        assert all(n is None for n in (await cluster.placement()).values())  # held until the PodGroup exists
        group = podgroup("serving")
        group["spec"]["schedulingPolicy"] = {"basic": {}}
        await cluster.c.create(f"{NS}/podgroups", group)

        # no quorum: those that fit are bound, although a member can never be placed ...
        where = await cluster.bound("s0", "s1")
        assert where["s0"] == where["s1"] == "n1" and where["huge"] is None

        async def told() -> str:
            return await _failed(cluster, "huge")

        await cluster.until(told)
        # ... whose failure is its own: not the group's, nor reported on its siblings
        assert await _failed(cluster, "huge") == "0/1 nodes are available: 1 Insufficient cpu. preemption: " \
            "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        assert await _failed(cluster, "s0") == "" and await _failed(cluster, "s1") == ""
        assert cluster.sched.queue.where("default/huge") == "unschedulable"
        assert not await _podgroup_conditions(cluster, "serving")  # PodGroupInitiallyScheduled is a gang's
