"""DefaultPreemption's PostFilter on a FakeHandle: who may preempt, the message when nobody
can be evicted, and the writes (DisruptionTarget, then the delete) when somebody can."""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.framework import CycleState, PostFilterResult, Status
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.plugins.gangscheduling import GangScheduling
from controlplane.scheduler.plugins.preemption import DefaultPreemption
from controlplane.scheduler.profile import Profile

from .fakes import FakeHandle, build
from .helpers import node, pod, podgroup


class Writes:
    """Stands for the client and the Writer: records the calls, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def patch(self, path: str, body: dict[str, Any], patch_type: str = "merge") -> dict[str, Any]:
        self.calls.append(("patch", path, (body, patch_type)))
        return {}

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append(("delete", path, body))
        return {}


def _preemption(h: FakeHandle, profile: Profile) -> tuple[DefaultPreemption, Writes]:
    plugin = profile.get("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    h.client = h.writer = Writes()
    return plugin, h.writer


async def _post_filter(h: FakeHandle, profile: Profile, plugin: DefaultPreemption,
                       preemptor: PodInfo) -> tuple[PostFilterResult | None, Status | None]:
    state = CycleState()
    assert profile.run_pre_filter(state, preemptor) is None
    _, failed = profile.find_feasible(state, preemptor, list(h.nodes().values()), sample=False)
    return await plugin.post_filter(state, preemptor, failed)


async def test_members_of_basic_groups_preempt_members_of_gangs_do_not() -> None:
    h, profile = build([node("only", cpu="1")])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(pod("low", cpu="1", priority=1), "only")
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    basic = podgroup("serving")
    basic["spec"]["schedulingPolicy"] = {"basic": {}}
    gang.manager.set_podgroup(basic)
    gang.manager.set_podgroup(podgroup("train", 1))
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="1", priority=100,
                                                                        group="serving")))
    assert status is None and result is not None and result.nominated_node == "only"
    assert [c[0] for c in writes.calls] == ["patch", "delete"]
    writes.calls.clear()
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("w", cpu="1", priority=100, group="train")))
    assert result is None and status is not None and status.message == "preemption is not attempted for gang members"
    assert not writes.calls


async def test_the_message_tells_nodes_preemption_cannot_help_from_nodes_without_victims() -> None:
    h, profile = build([
        node("tainted", cpu="1", labels={"zone": "a"}, taints=[{"key": "dedicated", "value": "x",
                                                                 "effect": "NoSchedule"}]),
        node("cordoned", cpu="1", labels={"zone": "a"}, unschedulable=True),
        node("other-zone", cpu="4", labels={"zone": "b"}),
        node("important", cpu="2", labels={"zone": "a"}),
        node("small", cpu="2", labels={"zone": "a"}),
    ])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(pod("high", cpu="2", priority=1000), "important")  # nothing of lower priority to evict
    h.bind_pod(pod("low", cpu="1", priority=1), "small")  # with low gone, the 1 cpu left is too little for 2
    h.bind_pod(pod("kept", cpu="1", priority=1000), "small")
    h.bind_pod(pod("zone-b", cpu="4", priority=1), "other-zone")  # would do, but the selector says zone a
    vip = PodInfo(pod("vip", cpu="2", priority=100, nodeSelector={"zone": "a"}))
    result, status = await _post_filter(h, profile, plugin, vip)
    # no candidate: the result clears any nomination the pod had (upstream's ModeOverride to "")
    assert result is not None and result.nominated_node == "" and status is not None
    assert status.message == ("0/5 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for "
                              "incoming pod, 3 Preemption is not helpful for scheduling.")
    assert not writes.calls


async def test_victims_get_the_disruption_target_condition_before_they_are_deleted() -> None:
    h, profile = build([node("only", cpu="2")])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(pod("low1", cpu="1", priority=1), "only")
    h.bind_pod(pod("low2", cpu="1", priority=2), "only")
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="2", priority=100)))
    assert status is None and result is not None and result.nominated_node == "only"
    for victim in ("low1", "low2"):
        mine = [c for c in writes.calls if c[1].startswith(f"/api/v1/namespaces/default/pods/{victim}")]
        assert [(kind, path.rsplit("/", 1)[-1]) for kind, path, _ in mine] == [("patch", "status"), ("delete", victim)]
        body, patch_type = mine[0][2]
        (cond,) = body["status"]["conditions"]
        assert patch_type == "strategic"
        assert {k: cond[k] for k in ("type", "status", "reason", "message")} == {
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": "default-scheduler: preempting to accommodate a higher priority pod"}
        assert mine[1][2]["preconditions"] == {"uid": f"uid-{victim}"}
    assert [r for r, _ in h.events] == ["Preempted", "Preempted"]


def test_the_dry_run_counts_pods_nominated_to_the_node() -> None:
    """A pod nominated to a node with at least the preemptor's priority keeps its room
    there (upstream's RunFilterPluginsWithNominatedPods): evicting the pods of lower
    priority does not make room for a second pod of that priority, and a pod that would
    fit beside the nominated one takes only the victims it needs."""
    from controlplane.scheduler.plugins.preemption import find_candidate

    h, profile = build([node("only", cpu="5")])
    h.bind_pod(pod("low", cpu="3", priority=1), "only")
    h.bind_pod(pod("small", cpu="1", priority=60), "only")
    nominated = {"only": [PodInfo(pod("vip", cpu="4", priority=100))]}
    nodes = list(h.nodes().values())

    def dry_run(preemptor: PodInfo) -> tuple[list[str] | None, str]:
        state = CycleState()
        assert profile.run_pre_filter(state, preemptor) is None
        _, failed = profile.find_feasible(state, preemptor, nodes, extra=nominated, sample=False)
        chosen, why_not = find_candidate(profile, state, preemptor, nodes, failed, nominated)
        return (None if chosen is None else sorted(v.name for v in chosen[1])), \
            ", ".join(s.message for s in why_not.values())

    # without the nomination low's 3 cpu would do; with it, even low and small gone leave 1
    assert dry_run(PodInfo(pod("peer", cpu="2", priority=100))) == (None, "Insufficient cpu")
    assert dry_run(PodInfo(pod("mid", cpu="1", priority=50))) == (None, "Insufficient cpu")  # small is not lower
    # 1 cpu fits beside the nominated pod once both lower pods go
    assert dry_run(PodInfo(pod("one", cpu="1", priority=100))) == (["low", "small"], "")
    # a nominated pod of lower priority than the preemptor is no obstacle (the caller leaves it out)
    state = CycleState()
    top = PodInfo(pod("top", cpu="4", priority=1000))
    assert profile.run_pre_filter(state, top) is None
    _, failed = profile.find_feasible(state, top, nodes, sample=False)
    chosen, _ = find_candidate(profile, state, top, nodes, failed, None)
    assert chosen is not None and [v.name for v in chosen[1]] == ["low"]


def _pdb(name: str, labels: dict[str, str], allowed: int, namespace: str = "default",
         disrupted: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted or {}}}


async def test_preemption_prefers_the_node_whose_victims_violate_no_disruption_budget() -> None:
    """As upstream's pickOneNodeForPreemption, the fewest PodDisruptionBudget violations
    decide first: two victims that no budget protects beat one a budget protects."""
    h, profile = build([node("guarded", cpu="2"), node("loose", cpu="2")])
    h.bind_pod(pod("db", cpu="2", priority=1, labels={"app": "db"}), "guarded")
    h.bind_pod(pod("batch1", cpu="1", priority=1, labels={"app": "batch"}), "loose")
    h.bind_pod(pod("batch2", cpu="1", priority=1, labels={"app": "batch"}), "loose")
    budgets = {"default/db": _pdb("db", {"app": "db"}, 0)}
    h.lister = lambda resource: budgets if resource == "poddisruptionbudgets" else {}  # type: ignore[method-assign]
    plugin, writes = _preemption(h, profile)
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="2", priority=100)))
    assert status is None and result is not None and result.nominated_node == "loose"
    assert sorted(p.rsplit("/", 1)[-1] for kind, p, _ in writes.calls if kind == "delete") == ["batch1", "batch2"]
    # a budget with room for the disruption is no violation: fewer victims win again
    budgets["default/db"] = _pdb("db", {"app": "db"}, 1)
    writes.calls.clear()
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip2", cpu="2", priority=100)))
    assert status is None and result is not None and result.nominated_node == "guarded"


def test_victims_a_budget_protects_are_reprieved_first() -> None:
    """On one node, upstream's selectVictimsOnNode puts back the budget-violating pods
    before the others (each group highest priority first): with room for one of two
    equal pods, the protected one stays, whatever its age or priority. A pod already in
    a budget's disruptedPods counts against no budget; budgets of other namespaces, or
    with an empty selector, protect nothing."""
    from controlplane.scheduler.plugins.preemption import find_candidate

    h, profile = build([node("only", cpu="2")])
    h.bind_pod(pod("old", cpu="1", priority=5), "only")  # more important: reprieved first without budgets
    h.bind_pod(pod("kept", cpu="1", priority=1, labels={"app": "kept"}), "only")
    nodes = list(h.nodes().values())

    def victims(pdbs: list[dict[str, Any]]) -> list[str]:
        state = CycleState()
        vip = PodInfo(pod("vip", cpu="1", priority=100))
        assert profile.run_pre_filter(state, vip) is None
        _, failed = profile.find_feasible(state, vip, nodes, sample=False)
        chosen, _ = find_candidate(profile, state, vip, nodes, failed, pdbs=pdbs)
        assert chosen is not None
        return sorted(v.name for v in chosen[1])

    assert victims([]) == ["kept"]
    assert victims([_pdb("kept", {"app": "kept"}, 0)]) == ["old"]
    assert victims([_pdb("kept", {"app": "kept"}, 0, disrupted={"kept": "2026-01-01T00:00:00Z"})]) == ["kept"]
    assert victims([_pdb("kept", {"app": "kept"}, 0, namespace="other")]) == ["kept"]
    empty = _pdb("all", {}, 0)
    assert victims([empty]) == ["kept"]


async def test_a_request_beyond_a_nodes_allocatable_is_no_case_for_preemption() -> None:
    """As upstream's NodeResourcesFit, a node whose allocatable is less than the request
    (the pod would not fit there empty) rejects it UNSCHEDULABLE_AND_UNRESOLVABLE: the
    message is the same, but preemption calls the node not helpful, not victimless."""
    h, profile = build([node("small", cpu="2"), node("busy", cpu="8")])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(pod("low", cpu="2", priority=1), "small")
    h.bind_pod(pod("high", cpu="8", priority=1000), "busy")
    _, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="4", priority=100)))
    assert status is not None and not writes.calls
    assert status.message == ("0/2 nodes are available: 1 No preemption victims found for incoming pod, "
                              "1 Preemption is not helpful for scheduling.")
    state = CycleState()
    vip = PodInfo(pod("vip", cpu="4", priority=100))
    assert profile.run_pre_filter(state, vip) is None
    _, failed = profile.find_feasible(state, vip, list(h.nodes().values()), sample=False)
    assert {n: (s.code.name, s.message) for n, s in failed.items()} == {
        "small": ("UNSCHEDULABLE_AND_UNRESOLVABLE", "Insufficient cpu"),
        "busy": ("UNSCHEDULABLE", "Insufficient cpu")}


async def test_a_gang_member_that_preemption_cannot_help_is_told_so_as_any_pod() -> None:
    """A gang member does not preempt; but when no node is a candidate anyway, its
    message is upstream's dry-run answer, as any pod's, not the gang's own refusal."""
    h, profile = build([node("tainted", cpu="1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                        node("full", cpu="1")])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(pod("peer", cpu="1", priority=100), "full")  # not of lower priority: no victim
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("train", 1))
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("w", cpu="1", priority=100, group="train")))
    assert status is not None and status.message == (
        "0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.")
    assert result is not None and result.nominated_node == ""
    assert not writes.calls



def _started(obj: dict[str, Any], at: str) -> dict[str, Any]:
    obj["status"]["startTime"] = at
    return obj


async def test_ties_go_to_the_node_whose_victims_started_last() -> None:
    """Upstream's last criterion: with equal budgets, priorities and counts, the node
    whose highest-priority victims' earliest start is the latest wins, so the pods that
    have run longest are spared."""
    h, profile = build([node("a", cpu="1"), node("b", cpu="1")])
    plugin, writes = _preemption(h, profile)
    h.bind_pod(_started(pod("old", cpu="1", priority=1), "2026-01-01T00:00:00Z"), "a")
    h.bind_pod(_started(pod("new", cpu="1", priority=1), "2026-06-01T00:00:00Z"), "b")
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="1", priority=100)))
    assert status is None and result is not None and result.nominated_node == "b"
    assert [p.rsplit("/", 1)[-1] for kind, p, _ in writes.calls if kind == "delete"] == ["new"]


def test_on_a_node_the_pod_that_started_first_is_put_back_first() -> None:
    """``MoreImportantPod``: of equal priority, the pod that started earlier is the more
    important, whatever order the scheduler learnt of them in."""
    from controlplane.scheduler.plugins.preemption import find_candidate

    h, profile = build([node("only", cpu="2")])
    h.bind_pod(_started(pod("young", cpu="1", priority=1), "2026-06-01T00:00:00Z"), "only")
    h.bind_pod(_started(pod("elder", cpu="1", priority=1), "2026-01-01T00:00:00Z"), "only")
    nodes = list(h.nodes().values())
    state = CycleState()
    vip = PodInfo(pod("vip", cpu="1", priority=100))
    assert profile.run_pre_filter(state, vip) is None
    _, failed = profile.find_feasible(state, vip, nodes, sample=False)
    chosen, _ = find_candidate(profile, state, vip, nodes, failed)
    assert chosen is not None and [v.name for v in chosen[1]] == ["young"]


async def test_fewer_victims_win_over_more_of_negative_priority() -> None:
    """Upstream raises each victim's priority by 2^31 before summing: two victims, one of
    negative priority, weigh more than one of the same highest priority."""
    h, profile = build([node("two", cpu="2"), node("one", cpu="2")])
    plugin, _ = _preemption(h, profile)
    h.bind_pod(pod("a", cpu="1", priority=5), "two")
    h.bind_pod(pod("b", cpu="1", priority=-10), "two")
    h.bind_pod(pod("c", cpu="2", priority=5), "one")
    result, status = await _post_filter(h, profile, plugin, PodInfo(pod("vip", cpu="2", priority=100)))
    assert status is None and result is not None and result.nominated_node == "one"


async def test_a_pod_waits_for_the_victims_terminating_on_its_nominated_node() -> None:
    """Upstream's PodEligibleToPreemptOthers: a pod nominated to a node where a pod of
    lower priority is terminating by preemption does not preempt again (it keeps its
    nomination), unless the node now rejects it UNSCHEDULABLE_AND_UNRESOLVABLE."""
    h, profile = build([node("only", cpu="1"), node("other", cpu="1")])
    plugin, writes = _preemption(h, profile)
    victim = pod("low", cpu="1", priority=1)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]
    h.bind_pod(victim, "only")
    h.bind_pod(pod("low2", cpu="1", priority=1), "other")
    vip = pod("vip", cpu="1", priority=100)
    vip["status"]["nominatedNodeName"] = "only"
    result, status = await _post_filter(h, profile, plugin, PodInfo(vip))
    assert result is None and status is not None
    assert status.message == "not eligible due to a terminating pod on the nominated node."
    assert not writes.calls
    # a pod terminating for another reason is no such wait
    victim["status"]["conditions"] = []
    h.bind_pod(victim, "only")
    result, status = await _post_filter(h, profile, plugin, PodInfo(vip))
    assert status is None and result is not None and result.nominated_node in ("only", "other")
