"""The scheduling queue's ordering, backoff and requeue rules, on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.scheduler.framework import ActionType, ClusterEvent, Code, Status
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.plugins.nodes import SchedulingGates
from controlplane.scheduler.queue import SchedulingQueue

from .helpers import pod


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(**kw: Any) -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    events = {
        "NodeResourcesFit": [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                             ClusterEvent("pods", ActionType.DELETE)],
        "TaintToleration": [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_TAINT)],
        "SchedulingGates": [ClusterEvent("pods", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)],
    }
    q = SchedulingQueue(pre_enqueue=[SchedulingGates()], events=events, clock=clock, **kw)
    return q, clock


def unschedulable(plugin: str) -> Status:
    return Status(Code.UNSCHEDULABLE, "no", plugin=plugin)


def test_active_queue_pops_by_priority_then_age() -> None:
    q, clock = make()
    q.add(PodInfo(pod("low-old", priority=0)))
    clock.t += 1
    q.add(PodInfo(pod("high", priority=100)))
    clock.t += 1
    q.add(PodInfo(pod("low-new", priority=0)))
    order = [q.pop_nowait() for _ in range(3)]
    assert [p.name for p in order if p] == ["high", "low-old", "low-new"]
    assert q.pop_nowait() is None


def test_backoff_starts_at_one_second_and_doubles_to_ten() -> None:
    q, _clock = make()
    p = PodInfo(pod("p"))
    durations = []
    for attempts in range(1, 7):
        p.attempts = attempts
        durations.append(q.backoff_duration(p))
    assert durations == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_error_goes_to_backoff_then_back_to_active() -> None:
    q, clock = make()
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    q.requeue_error(p)
    assert q.where(p.key) == "backoff"
    assert q.pop_nowait() is None
    clock.t += 1.01
    again = q.pop_nowait()
    assert again is not None and again.key == p.key and again.attempts == 2


def test_unschedulable_pods_wait_for_an_event_their_rejector_registered() -> None:
    q, clock = make()
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    q.add_unschedulable(p, unschedulable("NodeResourcesFit"), q.scheduling_cycle, {"NodeResourcesFit"})
    assert q.where(p.key) == "unschedulable"
    assert q.on_event("nodes", ActionType.UPDATE_NODE_TAINT) == 0  # cannot help a pod short of cpu
    assert q.on_event("pods", ActionType.ADD) == 0
    assert q.where(p.key) == "unschedulable"
    assert q.on_event("nodes", ActionType.ADD) == 1
    assert q.where(p.key) == "backoff"  # still within its 1 s backoff
    clock.t += 1.5
    assert q.pop_nowait() is not None


def test_an_idle_scheduler_takes_pods_from_backoff_before_their_backoff_ends() -> None:
    """SchedulerPopFromBackoffQ (KEP-5142): with activeQ empty, the pod whose backoff
    ends first is popped at once; while activeQ has pods, backoff holds."""
    q, clock = make()
    for name in ("early", "late"):
        q.add(PodInfo(pod(name)))
        p = q.pop_nowait()
        assert p is not None
        q.add_unschedulable(p, unschedulable("NodeResourcesFit"), q.scheduling_cycle, {"NodeResourcesFit"})
        clock.t += 0.1
    assert q.on_event("nodes", ActionType.ADD) == 2
    assert q.where("default/early") == q.where("default/late") == "backoff"
    q.add(PodInfo(pod("fresh")))
    popped = q.pop_nowait()
    assert popped is not None and popped.name == "fresh"  # activeQ first
    first = q.pop_nowait()
    second = q.pop_nowait()
    assert first is not None and second is not None
    assert [first.name, second.name] == ["early", "late"]  # earliest backoff expiry first
    assert first.attempts == 2
    assert q.pop_nowait() is None


def test_pods_backing_off_after_an_error_wait_out_their_backoff() -> None:
    q, clock = make()
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    q.requeue_error(p)
    assert q.pop_nowait() is None  # not popped early, although activeQ is empty
    clock.t += 1.01
    assert q.pop_nowait() is not None


def test_an_event_during_the_cycle_sends_the_pod_to_backoff_not_to_the_unschedulable_pool() -> None:
    q, _clock = make()
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    cycle = q.scheduling_cycle
    q.on_event("nodes", ActionType.ADD)  # arrives while p is being scheduled
    q.add_unschedulable(p, unschedulable("NodeResourcesFit"), cycle, {"NodeResourcesFit"})
    assert q.where(p.key) == "backoff"


def test_an_event_during_the_cycle_that_cannot_help_the_pod_still_parks_it() -> None:
    """Only an in-flight event one of the rejecting plugins registered for sends the pod
    to backoff (upstream replays them through the QueueingHints): a pod bound elsewhere
    cannot help a pod short of cpu, so an idle scheduler does not retry it at once."""
    q, _clock = make()
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    cycle = q.scheduling_cycle
    q.on_event("pods", ActionType.ADD)  # another pod bound while p was being scheduled
    q.on_event("nodes", ActionType.UPDATE_NODE_TAINT)
    q.add_unschedulable(p, unschedulable("NodeResourcesFit"), cycle, {"NodeResourcesFit"})
    assert q.where(p.key) == "unschedulable"
    assert q.pop_nowait() is None


def test_scheduling_gates_hold_the_pod_until_removed() -> None:
    q, _clock = make()
    gated = pod("g", schedulingGates=[{"name": "wait"}])
    q.add(PodInfo(gated))
    assert q.where("default/g") == "unschedulable"
    assert q.pop_nowait() is None
    q.on_event("nodes", ActionType.ADD)
    assert q.where("default/g") == "unschedulable"
    ungated = pod("g")
    q.add(PodInfo(ungated))  # the informer's update
    assert q.where("default/g") == "active"
    assert q.pop_nowait() is not None


def test_pods_parked_too_long_are_retried_anyway() -> None:
    q, clock = make(max_unschedulable_seconds=60)
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    q.add_unschedulable(p, unschedulable("NodeResourcesFit"), q.scheduling_cycle, {"NodeResourcesFit"})
    clock.t += 61
    assert q.pop_nowait() is not None  # the periodic flush ran (backoff long over)


def test_an_idle_queue_looks_for_pods_parked_too_long_every_30_seconds() -> None:
    # upstream's flushUnschedulablePodsLeftover runs every 30 s: a pod parked 5 minutes is retried
    # within 5 min 30 s, the scheduler idle or not (a shorter limit is looked at more often)
    for limit, wait in ((300.0, 30.0), (60.0, 15.0)):
        q, _ = make(max_unschedulable_seconds=limit)
        assert q._idle_wait() is None
        q.add(PodInfo(pod("p")))
        p = q.pop_nowait()
        assert p is not None
        q.add_unschedulable(p, unschedulable("NodeResourcesFit"), q.scheduling_cycle, {"NodeResourcesFit"})
        assert q._idle_wait() == wait


def test_gang_siblings_pop_together_and_park_together() -> None:
    q, clock = make()
    q.add(PodInfo(pod("g1", group="pg")))
    clock.t += 1
    q.add(PodInfo(pod("other", priority=5)))
    clock.t += 1
    q.add(PodInfo(pod("g2", group="pg")))
    first = q.pop_nowait()
    assert first is not None and first.name == "other"
    names = [q.pop_nowait().name, q.pop_nowait().name]  # type: ignore[union-attr]
    assert names == ["g1", "g2"]
    q2, _ = make()
    for i in range(3):
        q2.add(PodInfo(pod(f"m{i}", group="pg")))
    m = q2.pop_nowait()
    assert m is not None
    parked = q2.park_group("default/pg", "GangScheduling")
    assert sorted(p.name for p in parked) == ["m1", "m2"]  # the popped member is the caller's to report
    assert q2.pop_nowait() is None
    q2.activate(["default/m1", "default/m2"])
    assert q2.pop_nowait() is not None


def test_a_gangs_members_are_tried_in_upstreams_member_order() -> None:
    # upstream's pod group cycle tries a group's pods in PodGroupMemberPodsOrderingFunc's order:
    # higher priority, then more attempts, then the earlier queue timestamp, then the name; the
    # pod activeQ pops is one of them, not necessarily the first (queue order would put "old" first)
    q, clock = make()
    q.add(PodInfo(pod("old", group="pg")))
    clock.t += 1
    q.add(PodInfo(pod("tried", group="pg")))
    clock.t += 1
    q.add(PodInfo(pod("b-same-time", group="pg")))
    q.add(PodInfo(pod("a-same-time", group="pg")))
    clock.t += 1
    q.add(PodInfo(pod("high", group="pg", priority=10)))
    q.add(PodInfo(pod("loner", priority=100)))
    q.pods["default/tried"].attempts = 2  # tried before (as after a failed attempt of the group)
    order = [p.name for p in iter(q.pop_nowait, None)]
    assert order == ["loner", "high", "tried", "old", "a-same-time", "b-same-time"]
    # the same with members in backoff and parked after the group's earlier attempt: one order
    q, clock = make()
    for name, priority in (("m-low", 0), ("m-mid", 5), ("m-top", 9)):
        q.add(PodInfo(pod(name, group="pg", priority=priority)))
        clock.t += 1
    first = q.pop_nowait()
    assert first is not None and first.name == "m-top"
    parked = q.park_group("default/pg", "GangScheduling")
    q.add_unschedulable(first, unschedulable("GangScheduling"), q.scheduling_cycle, {"GangScheduling"})
    assert sorted(p.name for p in parked) == ["m-low", "m-mid"]
    q.activate(["default/m-low"])  # one member back in activeQ, its siblings come along
    assert [p.name for p in iter(q.pop_nowait, None)] == ["m-top", "m-mid", "m-low"]


def test_a_hint_narrows_which_events_requeue() -> None:
    clock = Clock()
    events = {"Picky": [ClusterEvent("pods", ActionType.ADD, lambda pod, old, new: new.get("wanted") is True)]}
    q = SchedulingQueue(events=events, clock=clock)
    q.add(PodInfo(pod("p")))
    p = q.pop_nowait()
    assert p is not None
    q.add_unschedulable(p, Status(Code.PENDING, "waiting", plugin="Picky"), q.scheduling_cycle, {"Picky"})
    assert q.on_event("pods", ActionType.ADD, None, {"wanted": False}) == 0
    assert q.on_event("pods", ActionType.ADD, None, {"wanted": True}) == 1
    assert q.where(p.key) == "active"  # PENDING skips backoff


def test_events_that_name_their_pods_reach_only_those() -> None:
    clock = Clock()
    asked: list[str] = []

    def hint(pod: PodInfo, old: Any, new: Any) -> bool:
        asked.append(pod.name)
        return True

    def targets(old: Any, new: Any) -> list[str] | None:
        named: list[str] | None = new.get("for")  # None: any pod
        return named

    events = {"Owned": [ClusterEvent("resourceclaims", ActionType.ADD, hint, targets)]}
    q = SchedulingQueue(events=events, clock=clock)
    for name in ("a", "b", "c"):
        q.add(PodInfo(pod(name)))
    parked = {}
    for _ in range(3):
        p = q.pop_nowait()
        assert p is not None
        parked[p.name] = p
        rejector = "Owned" if p.name != "c" else "Unregistered"  # c: a plugin with no events
        q.add_unschedulable(p, Status(Code.PENDING, "waiting", plugin=rejector), q.scheduling_cycle, {rejector})
    # names a's uid: a moves, b is not even asked; c (its rejector registered nothing) moves on anything
    assert q.on_event("resourceclaims", ActionType.ADD, None, {"for": [parked["a"].uid, "no-such-uid"]}) == 2
    assert asked == ["a"]
    assert {q.where(k) for k in (parked["a"].key, parked["c"].key)} == {"active"}
    assert q.where(parked["b"].key) == "unschedulable"
    # an event that names nobody asks every parked pod
    assert q.on_event("resourceclaims", ActionType.ADD, None, {}) == 1
    assert asked == ["a", "b"]
    assert not q.unschedulable and not q.unschedulable.by_uid and not q.unschedulable.any_event


def test_an_event_asks_only_the_pods_of_plugins_registered_for_it() -> None:
    """A pod event (as every binding is) concerns the pods rejected by plugins that
    registered pod events; pods waiting on a claim are not walked, nor their hints asked."""
    asked: list[str] = []

    def claim_hint(pod: PodInfo, old: Any, new: Any) -> bool:
        asked.append(pod.name)
        return True

    events = {"Claims": [ClusterEvent("resourceclaims", ActionType.ADD, claim_hint)],
              "Spread": [ClusterEvent("pods", ActionType.ADD)]}
    q = SchedulingQueue(events=events, clock=Clock())
    for name in ("w1", "w2", "s1"):
        q.add(PodInfo(pod(name)))
    keys = {}
    for _ in range(3):
        p = q.pop_nowait()
        assert p is not None
        keys[p.name] = p.key
        rejector = "Spread" if p.name.startswith("s") else "Claims"
        q.add_unschedulable(p, Status(Code.UNSCHEDULABLE, "no", plugin=rejector), q.scheduling_cycle, {rejector})
    assert set(q.unschedulable.by_rejector) == {"Claims", "Spread"}
    assert q.on_event("nodes", ActionType.ADD, None, {}) == 0  # nobody registered node events
    assert q.on_event("pods", ActionType.ADD, None, {}) == 1
    assert q.where(keys["s1"]) != "unschedulable" and asked == []
    assert list(q.unschedulable.by_rejector) == ["Claims"]
    assert q.on_event("resourceclaims", ActionType.ADD, None, {}) == 2
    assert sorted(asked) == ["w1", "w2"]
    assert not q.unschedulable.by_rejector


async def test_a_pop_cancelled_as_a_pod_arrives_stays_cancelled() -> None:
    """Python 3.11's wait_for returned the awaited event's result when the task was cancelled in
    the same tick, losing the cancellation: a scheduler stopping as a pod arrived took the pod
    and ran on. The pop now ends cancelled, the pod still queued."""
    q, _clock = make()
    parked = PodInfo(pod("parked"))  # an unschedulable pod: the pop waits with a timeout
    q.add(parked)
    assert q.pop_nowait() is parked
    q.add_unschedulable(parked, unschedulable("NodeResourcesFit"), q.scheduling_cycle, {"NodeResourcesFit"})
    task = asyncio.create_task(q.pop())
    await asyncio.sleep(0.01)  # waiting on the queue's wakeup
    q.add(PodInfo(pod("p")))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (got := q.pop_nowait()) is not None and got.name == "p"
