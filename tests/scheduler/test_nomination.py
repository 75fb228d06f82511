"""Preemption's nomination through the API, in process: the preemptor's
``status.nominatedNodeName`` is written (as upstream), and the room it preempted for is
held while its victims terminate: pods of lower or equal priority do not take it (nor
preempt for it), a pod of higher priority may."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import node, pod
from .inprocess import Cluster, running

PODS = "/api/v1/namespaces/default/pods"


async def _priority_classes(cluster: Cluster, **values: int) -> None:
    for name, value in values.items():
        await cluster.c.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value})


async def _nominated(cluster: Cluster, name: str) -> str:
    return str((await cluster.get(name))["status"].get("nominatedNodeName") or "")


async def _failed_message(cluster: Cluster, name: str) -> str:
    for c in (await cluster.get(name))["status"].get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c["message"])
    return ""


async def _events(cluster: Cluster, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
    return [e for e in items if e["reason"] == reason]


async def test_the_nominated_node_is_written_and_its_room_held_for_the_preemptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await _priority_classes(cluster, low=1, mid=50, small=60, vip=100)
        await cluster.nodes(node("only", cpu="5"))
        await cluster.pods(pod("low", cpu="3", priorityClassName="low"),
                           pod("small", cpu="1", priorityClassName="small"))
        await cluster.bound("low", "small")
        await cluster.pods(pod("vip", cpu="4", priorityClassName="vip"))

        async def nominated() -> bool:
            return await _nominated(cluster, "vip") == "only"

        await cluster.until(nominated)  # written to the pod through the API
        low = await cluster.get("low")
        assert low["metadata"].get("deletionTimestamp")  # the victim terminates (no kubelet finishes it)
        assert [e["involvedObject"]["name"] for e in await _events(cluster, "Preempted")] == ["low"]  # not small
        assert (await cluster.placement())["vip"] is None

        # While the victim terminates, its room is the preemptor's. A pod of lower priority
        # that would fit in the cpu left free does not: the preemptor is counted there ...
        await cluster.pods(pod("mid", cpu="1", priorityClassName="mid"),
                           pod("peer", cpu="2", priorityClassName="vip"))

        async def told(name: str) -> bool:
            return (await _failed_message(cluster, name)).startswith("0/1 nodes are available: 1 Insufficient cpu.")

        await cluster.until(lambda: told("mid"))
        await cluster.until(lambda: told("peer"))
        # ... and neither it nor a pod of equal priority preempts for that room: with the
        # preemptor counted (as upstream's dry run counts nominated pods), evicting what is
        # there makes no room for them
        for name in ("mid", "peer"):
            assert await _failed_message(cluster, name) == (
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                "1 Insufficient cpu.")
            assert await _nominated(cluster, name) == ""
        assert {n: set(pods) for n, pods in cluster.sched.nominated.items()} == {"only": {"default/vip"}}
        where = await cluster.placement()
        assert where["mid"] is None and where["peer"] is None

        # the victim goes: the preemptor takes its room, the others still do not fit
        await cluster.c.delete(f"{PODS}/low", gracePeriodSeconds=0)
        assert (await cluster.bound("vip"))["vip"] == "only"
        await cluster.settle(0.3)
        where = await cluster.placement()
        assert where["mid"] is None and where["peer"] is None
        assert not cluster.sched.nominated


async def test_a_nomination_no_preemption_can_honour_any_more_is_cleared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As upstream: a later attempt whose preemption finds no candidate clears the pod's
    # nominatedNodeName (PostFilter's ModeOverride to no node), in memory and on the pod.
    async with running(tmp_path, monkeypatch) as cluster:
        await _priority_classes(cluster, low=1, vip=100, boss=200)
        await cluster.nodes(node("only", cpu="5"))
        await cluster.pods(pod("low", cpu="3", priorityClassName="low"))
        await cluster.bound("low")
        await cluster.pods(pod("vip", cpu="4", priorityClassName="vip"))

        async def nominated(name: str) -> bool:
            return await _nominated(cluster, name) == "only"

        await cluster.until(lambda: nominated("vip"))
        # a pod above vip takes the whole node: it preempts the victim and vip's room is its
        await cluster.pods(pod("boss", cpu="5", priorityClassName="boss"))
        await cluster.until(lambda: nominated("boss"))
        await cluster.c.delete(f"{PODS}/low", gracePeriodSeconds=0)
        assert (await cluster.bound("boss"))["boss"] == "only"

        async def cleared() -> bool:
            return await _nominated(cluster, "vip") == ""

        await cluster.until(cleared)
        assert not cluster.sched.nominated
        assert (await cluster.placement())["vip"] is None
        assert (await _failed_message(cluster, "vip")).startswith("0/1 nodes are available: 1 Insufficient cpu.")
