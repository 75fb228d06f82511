"""The whole scheduler against a real API app in process (no socket): informers in, bindings out.

Each test runs the app's lifespan with the scheduler as its in-process component,
then talks to the API as any client would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client
from controlplane.scheduler.framework import ActionType, ClusterEvent, Code, CycleState, Status, WatchedResource
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.plugins import DEFAULT_PROFILE, PluginConfig, default_registry
from controlplane.scheduler.scheduler import Scheduler

from .helpers import create_node, node, pod, podgroup

PODS = "/api/v1/namespaces/default/pods"
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups"


class Cluster:
    def __init__(self, client: Client, sched: Scheduler) -> None:
        self.c = client
        self.sched = sched

    async def nodes(self, *objs: dict[str, Any]) -> None:
        for o in objs:
            await create_node(self.c, o)

    async def pods(self, *objs: dict[str, Any]) -> None:
        for o in objs:
            o = {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "uid"}}
            await self.c.create(PODS, o)

    async def get(self, name: str) -> dict[str, Any]:
        return await self.c.get(f"{PODS}/{name}")

    async def placement(self) -> dict[str, str | None]:
        items = (await self.c.list(PODS))["items"]
        return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items}

    async def until(self, check: Callable[[], Any], timeout: float = 10.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            got = check()
            if asyncio.iscoroutine(got):
                got = await got
            if got:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.05)

    async def bound(self, *names: str, timeout: float = 10.0) -> dict[str, str | None]:
        async def all_bound() -> bool:
            where = await self.placement()
            return all(where.get(n) for n in names)

        await self.until(all_bound, timeout)
        return await self.placement()

    async def settle(self, seconds: float = 0.5) -> None:
        await asyncio.sleep(seconds)


async def _conditions(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    got = await cluster.get(name)
    return list((got.get("status") or {}).get("conditions") or [])


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    from .inprocess import running  # (it imports this module's Cluster)

    def configure(s: Scheduler) -> None:
        s.fwk.get("GangScheduling").manager.timeout = 2.0  # type: ignore[union-attr]

    async with running(tmp_path, monkeypatch, configure) as c:
        yield c


async def test_pod_scheduled_false_says_the_generation_it_was_decided_on(cluster: Cluster) -> None:
    """The scheduler's PodScheduled=False carries the pod's generation (KEP-5067), and is
    written again when only that moves: a pending pod's spec change, same message."""
    await cluster.nodes(node("small", cpu="1"))
    await cluster.pods(pod("big", cpu="2"))

    async def unschedulable(generation: int) -> dict[str, Any] | None:
        return next((c for c in await _conditions(cluster, "big") if c["type"] == "PodScheduled"
                     and c["status"] == "False" and c.get("observedGeneration") == generation), None)

    await cluster.until(lambda: unschedulable(1))
    first = await unschedulable(1)
    changed = await cluster.c.patch(f"{PODS}/big", {"spec": {"activeDeadlineSeconds": 300}})
    assert changed["metadata"]["generation"] == 2
    await cluster.until(lambda: unschedulable(2))
    again = await unschedulable(2)
    assert first is not None and again is not None and again["message"] == first["message"]


async def test_pods_are_bound_within_node_capacity(cluster: Cluster) -> None:
    await cluster.nodes(node("n1", cpu="1"), node("n2", cpu="1"))
    await cluster.pods(*(pod(f"p{i}", cpu="400m") for i in range(5)))
    where = await cluster.bound("p0", "p1", "p2", "p3")
    await cluster.settle()
    where = await cluster.placement()
    per_node: dict[str, int] = {}
    for n in where.values():
        if n:
            per_node[n] = per_node.get(n, 0) + 1
    assert per_node == {"n1": 2, "n2": 2}  # 2 x 400m fit in 1 cpu, 3 do not
    unbound = [p for p, n in where.items() if not n]
    assert len(unbound) == 1
    await cluster.until(lambda: _conditions(cluster, unbound[0]))  # written in the background
    stuck = await cluster.get(unbound[0])
    cond = next(c for c in stuck["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")

    async def events_written() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
        reasons = {e["reason"] for e in items}
        return items if {"FailedScheduling", "Scheduled"} <= reasons else []

    await cluster.until(events_written)
    events = await events_written()
    failed = [e for e in events if e["reason"] == "FailedScheduling"]
    assert failed and failed[0]["involvedObject"]["name"] == unbound[0] and failed[0]["type"] == "Warning"
    assert failed[0]["action"] == "Scheduling"
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    # written through events.k8s.io/v1, as kube-scheduler's: no legacy timestamps or count, and
    # the source an empty struct (Go writes it so)
    assert scheduled and scheduled[0]["action"] == "Binding"
    assert scheduled[0]["reportingComponent"] == "default-scheduler"
    assert scheduled[0]["eventTime"] and "count" not in scheduled[0]  # (its legacy times null, as Go writes them)
    assert scheduled[0]["firstTimestamp"] is None and scheduled[0]["lastTimestamp"] is None
    assert scheduled[0]["source"] == {}


async def test_an_unschedulable_pod_is_retried_when_a_node_is_added(cluster: Cluster) -> None:
    await cluster.nodes(node("small", cpu="1"))
    await cluster.pods(pod("big", cpu="2"))
    await cluster.until(lambda: cluster.sched.queue.where("default/big") == "unschedulable")
    await cluster.nodes(node("tainted", cpu="4", taints=[{"key": "k", "effect": "NoSchedule"}]))
    await cluster.settle(1.5)
    assert (await cluster.placement())["big"] is None
    await cluster.nodes(node("large", cpu="4"))
    where = await cluster.bound("big")
    assert where["big"] == "large"


async def test_scheduling_gates_and_node_selector(cluster: Cluster) -> None:
    await cluster.nodes(node("a", labels={"disk": "ssd"}), node("b"))
    await cluster.pods(pod("gated", schedulingGates=[{"name": "example.com/hold"}], nodeSelector={"disk": "ssd"}))
    await cluster.settle()
    assert (await cluster.placement())["gated"] is None
    await cluster.c.patch(f"{PODS}/gated", {"spec": {"schedulingGates": None}}, patch_type="merge")
    where = await cluster.bound("gated")
    assert where["gated"] == "a"


async def test_priority_class_orders_and_preemption_evicts_lower_priority(cluster: Cluster) -> None:
    for name, value in (("high", 1000), ("low1", 1), ("low2", 2)):
        await cluster.c.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value})
    await cluster.nodes(node("only", cpu="1"))
    await cluster.pods(pod("low1", cpu="400m", priorityClassName="low1"),
                       pod("low2", cpu="400m", priorityClassName="low2"))
    await cluster.bound("low1", "low2")
    # a bound pod's PodInfo keeps of its object only what names it: the informer holds the pod
    low1 = await cluster.get("low1")
    await cluster.until(lambda: "default/low1" in cluster.sched.cache.nodes["only"].pods)
    held = cluster.sched.cache.nodes["only"].pods["default/low1"]
    assert held.obj["metadata"]["uid"] == low1["metadata"]["uid"] and "spec" not in held.obj
    assert held.labels == low1["metadata"].get("labels", {}) and held.priority == 1
    await cluster.pods(pod("vip", cpu="500m", priorityClassName="high"))

    async def terminating() -> bool:
        got = await cluster.get("low1")
        return bool(got["metadata"].get("deletionTimestamp"))

    # The victim is deleted gracefully, as upstream does; no kubelet runs here to finish it,
    # so the test confirms the deletion as one would (grace period 0).
    await cluster.until(terminating)
    assert (await cluster.placement())["vip"] is None  # its room is not free until the victim is gone
    # the victim learns why it goes before it is deleted, as upstream's preemption writes it
    disruption = [c for c in await _conditions(cluster, "low1") if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in disruption] == [
        ("True", "PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")]
    assert disruption[0]["observedGeneration"] == 1  # the victim's, as preemption saw it (its deletion made 2)
    # the victim's Event names it, from what its PodInfo kept
    async def preempted() -> list[dict[str, Any]]:
        events = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
        return [e for e in events if e.get("reason") == "Preempted"]

    await cluster.until(preempted)
    event = (await preempted())[0]
    involved, related = event["involvedObject"], event["related"]
    assert (involved["kind"], involved["name"], involved["uid"]) == ("Pod", "low1", low1["metadata"]["uid"])
    assert (related["kind"], related["name"], event["action"]) == ("Pod", "vip", "Preempting")  # the preemptor
    await cluster.c.delete(f"{PODS}/low1", gracePeriodSeconds=0)
    where = await cluster.bound("vip", timeout=15)
    assert where["vip"] == "only"
    # the lowest-priority pod was enough to make room, and only it was evicted
    assert "low1" not in where and where["low2"] == "only"


async def test_gang_larger_than_capacity_binds_nothing_until_capacity_is_added(cluster: Cluster) -> None:
    await cluster.nodes(node("n1", cpu="2"), node("n2", cpu="2"))
    await cluster.c.create(PODGROUPS, podgroup("train", 6))
    await cluster.pods(*(pod(f"w{i}", cpu="1", group="train") for i in range(6)))
    await cluster.until(lambda: all(cluster.sched.queue.where(f"default/w{i}") == "unschedulable"
                                    for i in range(6)))
    await cluster.settle(0.5)
    assert all(n is None for n in (await cluster.placement()).values())  # none bound
    assert not cluster.sched.cache.assumed  # and nothing held
    assert sum(n.requested.get("cpu", 0) for n in cluster.sched.cache.nodes.values()) == 0
    async def pg_condition() -> dict[str, Any]:
        pg = await cluster.c.get(f"{PODGROUPS}/train")
        return dict(((pg.get("status") or {}).get("conditions") or [{}])[0])

    await cluster.until(pg_condition)
    cond = await pg_condition()
    assert cond["type"] == "PodGroupInitiallyScheduled" and cond["status"] == "False" \
        and cond["reason"] == "Unschedulable"
    await cluster.nodes(node("n3", cpu="2"))
    where = await cluster.bound(*(f"w{i}" for i in range(6)), timeout=20)
    assert sorted(where.values()) == ["n1", "n1", "n2", "n2", "n3", "n3"]  # type: ignore[type-var]

    async def scheduled() -> bool:
        pg = await cluster.c.get(f"{PODGROUPS}/train")
        cond = pg["status"]["conditions"][0]
        return bool(cond["type"] == "PodGroupInitiallyScheduled" and cond["status"] == "True")

    await cluster.until(scheduled)


async def test_a_gang_short_of_min_count_says_upstreams_words(cluster: Cluster) -> None:
    # 4 of 6 members fit; the fifth finds no node, leaving 4 placed and 1 to try: upstream's
    # pod group cycle stops there (gangscheduling.go PlacementFeasible, schedule_one_podgroup.go)
    await cluster.nodes(node("n1", cpu="2"), node("n2", cpu="2"))
    await cluster.c.create(PODGROUPS, podgroup("train", 6))
    names = [f"w{i}" for i in range(6)]
    await cluster.pods(*(pod(n, cpu="1", group="train") for n in names))
    words = "minCount (6) cannot be satisfied: 4 scheduled, 1 remaining"

    async def messages() -> list[str]:
        out = []
        for n in names:
            conds = (await cluster.get(n))["status"].get("conditions") or ()
            out += [str(c["message"]) for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"]
        return sorted(out)

    await cluster.until(lambda: _all_six(messages))
    got = await messages()
    assert got.count(f"pod group is unschedulable, {words}") == 4  # the placed members
    assert got.count(words) == 1  # the member not tried
    (own,) = [m for m in got if m.startswith("0/2 nodes are available")]  # the failing member's own
    pg = await cluster.c.get(f"{PODGROUPS}/train")
    (cond,) = pg["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodGroupInitiallyScheduled", "False", "Unschedulable", words)
    events = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
    notes = {e.get("message") or e.get("note") for e in events if e["reason"] == "FailedScheduling"}
    assert {f"pod group is unschedulable, {words}", words, own} <= notes


async def _all_six(messages: Any) -> bool:
    return len(await messages()) == 6


async def test_gang_waits_for_its_podgroup_and_min_count(cluster: Cluster) -> None:
    await cluster.nodes(node("n1", cpu="8"))
    await cluster.pods(pod("a", group="g"), pod("b", group="g"))
    await cluster.settle()
    assert cluster.sched.queue.where("default/a") == "unschedulable"
    await cluster.c.create(PODGROUPS, podgroup("g", 3))
    await cluster.settle()
    assert all(n is None for n in (await cluster.placement()).values())
    await cluster.pods(pod("c", group="g"))
    await cluster.bound("a", "b", "c")


async def test_gang_timeout_releases_reservations(cluster: Cluster) -> None:
    await cluster.nodes(node("n1", cpu="8"))
    await cluster.c.create(PODGROUPS, podgroup("g", 3))
    # three members exist (quorum observed), but one is held by a scheduling gate
    await cluster.pods(pod("a", group="g"), pod("b", group="g"),
                       pod("c", group="g", schedulingGates=[{"name": "hold"}]))
    await cluster.until(lambda: len(list(cluster.sched.waiting_pods())) == 2)
    assert cluster.sched.cache.nodes["n1"].requested.get("cpu") == 200  # reserved while waiting
    await cluster.until(lambda: not list(cluster.sched.waiting_pods()), timeout=5)  # timeout is 2 s here
    assert cluster.sched.cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert all(n is None for n in (await cluster.placement()).values())
    await cluster.c.patch(f"{PODS}/c", {"spec": {"schedulingGates": None}}, patch_type="merge")
    await cluster.bound("a", "b", "c", timeout=20)


async def test_gang_with_topology_lands_in_one_rack(cluster: Cluster) -> None:
    racks = {"r0": "1", "r1": "2", "r2": "2"}
    for r, cpu in racks.items():
        await cluster.nodes(*(node(f"{r}-{i}", cpu=cpu, labels={"rack": r}) for i in range(2)))
    await cluster.c.create(PODGROUPS, podgroup("g", 4, topology="rack"))
    await cluster.pods(*(pod(f"m{i}", cpu="1", group="g") for i in range(4)))
    where = await cluster.bound(*(f"m{i}" for i in range(4)))
    racks_used = {str(n).split("-")[0] for n in where.values()}
    assert len(racks_used) == 1 and racks_used != {"r0"}


async def test_a_member_deleted_while_waiting_leaves_the_queue_and_frees_its_node(cluster: Cluster) -> None:
    await cluster.nodes(node("n1", cpu="8"))
    await cluster.c.create(PODGROUPS, podgroup("g", 3))
    await cluster.pods(pod("a", group="g"), pod("b", group="g"),
                       pod("c", group="g", schedulingGates=[{"name": "hold"}]))
    await cluster.until(lambda: len(list(cluster.sched.waiting_pods())) == 2)
    await cluster.c.delete(f"{PODS}/a")
    await cluster.until(lambda: cluster.sched.queue.where("default/a") is None)
    await cluster.until(lambda: not list(cluster.sched.waiting_pods()))
    assert cluster.sched.cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert "default/a" not in cluster.sched.queue.unschedulable


class WaitsForConfigMap:
    """A plugin of the kind DRA is: it reads a resource the core does not watch (here
    ConfigMaps) through the framework's informer, and is requeued by its events."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.seen: list[str] = []
        handle.add_event_handler("configmaps", lambda o: self.seen.append(o["metadata"]["name"]),
                                 lambda a, b: None, lambda o: None)

    def name(self) -> str:
        return "WaitsForConfigMap"

    def resources_to_watch(self) -> list[WatchedResource]:
        return [WatchedResource("", "v1", "configmaps")]

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        if f"{pod.namespace}/go" in self.handle.lister("configmaps"):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for configmap go", plugin=self.name())

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("configmaps", ActionType.ADD)]


async def test_a_plugin_watches_its_own_resources_through_the_framework(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from .inprocess import running  # (it imports this module's Cluster)

    def make(client: Client) -> Scheduler:
        registry = default_registry()
        registry.register("WaitsForConfigMap", lambda h, a: WaitsForConfigMap(h))
        return Scheduler(client, registry=registry, profile=(*DEFAULT_PROFILE, PluginConfig("WaitsForConfigMap")))

    async with running(tmp_path, monkeypatch, make=make) as cluster:
        await cluster.nodes(node("n1"))
        await cluster.pods(pod("p"))
        await cluster.until(lambda: cluster.sched.queue.where("default/p") == "unschedulable")

        async def condition() -> str:
            got = await cluster.get("p")
            conds = got["status"].get("conditions") or [{}]
            return str(conds[0].get("message", ""))

        await cluster.until(condition)  # written in the background after the verdict
        assert "waiting for configmap go" in await condition()
        await cluster.c.create("/api/v1/namespaces/default/configmaps",
                               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "go"}})
        await cluster.bound("p")
        plugin = cluster.sched.fwk.get("WaitsForConfigMap")
        assert isinstance(plugin, WaitsForConfigMap) and plugin.seen == ["go"]


async def _unschedulable_members(cluster: Cluster, names: list[str]) -> bool:
    """Every named pod carries PodScheduled=False (Unschedulable) and has a FailedScheduling event."""
    for n in names:
        conds = await _conditions(cluster, n)
        if not any(c["type"] == "PodScheduled" and c["status"] == "False" and c["reason"] == "Unschedulable"
                   for c in conds):
            return False
    events = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
    failed = {e["involvedObject"]["name"] for e in events if e["reason"] == "FailedScheduling"}
    return set(names) <= failed


@pytest.mark.parametrize("topology", [None, "rack"])
async def test_every_member_of_a_failed_gang_is_marked_unschedulable(cluster: Cluster, topology: str | None) -> None:
    # Each node holds one 20-cpu member: the gang of 6 cannot be placed, in any rack or at all.
    await cluster.nodes(*(node(f"n{i}", cpu="32", labels={"rack": f"r{i // 2}"}) for i in range(4)))
    await cluster.c.create(PODGROUPS, podgroup("train", 6, topology=topology))
    names = [f"w-{i}" for i in range(6)]
    await cluster.pods(*(pod(n, cpu="20", group="train") for n in names))
    # the autoscaler provisions for pods so marked: a silent sibling would be left out
    await cluster.until(lambda: _unschedulable_members(cluster, names))
    assert all(n is None for n in (await cluster.placement()).values())



async def _pod_scheduled(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return next((c for c in await _conditions(cluster, name) if c["type"] == "PodScheduled"), None)


async def _failed_scheduling(cluster: Cluster) -> dict[str, set[str]]:
    events = (await cluster.c.list("/api/v1/namespaces/default/events"))["items"]
    out: dict[str, set[str]] = {}
    for e in events:
        if e["reason"] == "FailedScheduling":
            out.setdefault(e["involvedObject"]["name"], set()).add(e.get("message") or e.get("note") or "")
    return out


async def test_a_gang_larger_than_min_count_is_placed_without_the_member_that_fits_nowhere(cluster: Cluster) -> None:
    # minCount 2 of 3 members; the node holds a and c, never b, whichever is tried first.
    # Upstream's pod group cycle (schedule_one_podgroup.go) goes on past b and places the group
    # with a and c; b fails alone with its own FitError and stays pending, retried later.
    # (The PodGroup comes last: PreEnqueue holds the three until then, so one attempt takes all.)
    await cluster.nodes(node("n1", cpu="2"))
    await cluster.pods(pod("a", cpu="1", group="g"), pod("b", cpu="3", group="g"), pod("c", cpu="1", group="g"))
    await cluster.settle(0.2)
    await cluster.c.create(PODGROUPS, podgroup("g", 2))
    where = await cluster.bound("a", "c")
    await cluster.until(lambda: cluster.sched.queue.where("default/b") == "unschedulable")
    await cluster.until(lambda: _pod_scheduled(cluster, "b"))
    assert where == {"a": "n1", "b": None, "c": "n1"}
    own = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
           "1 Preemption is not helpful for scheduling.")  # (b's 3 cpu exceed the node's 2)
    cond = await _pod_scheduled(cluster, "b")
    assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", own)
    for name in ("a", "c"):  # placed members hear nothing of b's failure
        cond = await _pod_scheduled(cluster, name)
        assert cond is None or cond["status"] == "True"

    async def pg_condition() -> dict[str, Any]:
        pg = await cluster.c.get(f"{PODGROUPS}/g")
        return dict(((pg.get("status") or {}).get("conditions") or [{}])[0])

    await cluster.until(lambda: _cond_status(pg_condition, "True"))
    cond = await pg_condition()
    assert (cond["type"], cond["reason"], cond.get("message", "")) == ("PodGroupInitiallyScheduled", "Scheduled", "")
    assert await _failed_scheduling(cluster) == {"b": {own}}
    assert not cluster.sched.cache.assumed or set(cluster.sched.cache.assumed) <= {"default/a", "default/c"}
    # b is retried alone when a node that holds it comes, and binds (the group's quorum is met)
    await cluster.nodes(node("n2", cpu="4"))
    assert (await cluster.bound("b"))["b"] == "n2"


async def test_a_gang_larger_than_min_count_fails_once_min_count_cannot_be_met(cluster: Cluster) -> None:
    # minCount 2 of 3 members; the node holds one. The first tried is placed, the second fails
    # alone (the first and the third can still make 2), the third fails: 1 scheduled, 0
    # remaining, and the group's attempt fails in upstream's words.
    await cluster.nodes(node("n1", cpu="1"))
    await cluster.pods(*(pod(n, cpu="1", group="g") for n in ("a", "b", "c")))
    await cluster.settle(0.2)
    await cluster.c.create(PODGROUPS, podgroup("g", 2))
    words = "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    own = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
           "1 No preemption victims found for incoming pod.")

    async def messages() -> dict[str, str]:
        out = {}
        for n in ("a", "b", "c"):
            cond = await _pod_scheduled(cluster, n)
            if cond is not None and cond["status"] == "False":
                out[n] = str(cond["message"])
        return out

    await cluster.until(lambda: _count(messages, 3))
    got = await messages()
    assert sorted(got.values()) == sorted([own, own, f"pod group is unschedulable, {words}"])
    events = await _failed_scheduling(cluster)
    assert events == {n: {m} for n, m in got.items()}  # one attempt, each member's own report
    assert all(n is None for n in (await cluster.placement()).values())
    assert not cluster.sched.cache.assumed
    pg = await cluster.c.get(f"{PODGROUPS}/g")
    (cond,) = pg["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodGroupInitiallyScheduled", "False", "Unschedulable", words)


async def _cond_status(get: Any, status: str) -> bool:
    return bool((await get()).get("status") == status)


async def _count(get: Any, n: int) -> bool:
    return len(await get()) == n


async def test_an_error_of_the_schedulers_own_is_reported_as_scheduler_error(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # upstream's handleSchedulingFailure: PodScheduled=False with reason SchedulerError for an
    # error status (a binding the API refused), Unschedulable only when plugins rejected the pod
    real_bind = Scheduler._bind
    failures = [Status(Code.ERROR, "binding rejected: boom")]

    async def bind_once_badly(self: Scheduler, state: CycleState, p: PodInfo, node_name: str) -> Status | None:
        if failures:
            return failures.pop()
        return await real_bind(self, state, p, node_name)

    monkeypatch.setattr(Scheduler, "_bind", bind_once_badly)
    await cluster.nodes(node("n1"))
    await cluster.pods(pod("p"))

    async def errored() -> dict[str, Any] | None:
        return next((c for c in await _conditions(cluster, "p") if c["type"] == "PodScheduled"
                     and c["status"] == "False"), None)

    await cluster.until(errored)
    got = await errored()
    assert got is not None and (got["reason"], got["message"]) == ("SchedulerError", "binding rejected: boom")
    await cluster.bound("p")  # retried after its backoff
