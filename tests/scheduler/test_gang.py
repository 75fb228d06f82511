"""The gang's domain logic alone (GangManager), and the GangScheduling plugin's topology choice."""

from __future__ import annotations

from controlplane.scheduler.framework import Code, CycleState
from controlplane.scheduler.gang import GangManager, Policy, policy_of
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.plugins.gangscheduling import GangScheduling, placements_to_score

from .fakes import FakeHandle, build
from .helpers import node, pod, podgroup


def test_policy_inline_or_from_the_workload_template() -> None:
    assert policy_of(podgroup("pg", 8, topology="rack"), {}) == Policy(True, 8, "rack")
    wl = {"metadata": {"name": "train", "namespace": "default"},
          "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}},
                                         {"name": "ps", "schedulingPolicy": {"basic": {}}}]}}
    ref = podgroup("pg", workload=("train", "workers"))
    assert policy_of(ref, {}) is None  # the Workload is not there yet
    assert policy_of(ref, {"default/train": wl}) == Policy(True, 4, "")
    assert policy_of(podgroup("p2", workload=("train", "ps")), {"default/train": wl}) == Policy(False, 1, "")


def test_policy_from_the_earlier_template_reference_shape() -> None:
    wl = {"metadata": {"name": "train", "namespace": "default"},
          "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}},
                                         {"name": "ps", "schedulingPolicy": {"basic": {}}}]}}
    earlier = podgroup("pg", workload=("train", "workers"), earlier_ref=True)
    assert "workloadRef" not in earlier["spec"]
    assert policy_of(earlier, {"default/train": wl}) == Policy(True, 4, "")
    # both present: 1.37's workloadRef decides
    both = podgroup("pg", workload=("train", "ps"))
    both["spec"]["podGroupTemplateRef"] = earlier["spec"]["podGroupTemplateRef"]
    assert policy_of(both, {"default/train": wl}) == Policy(False, 1, "")


def test_pre_enqueue_waits_for_the_podgroup_and_min_count_members() -> None:
    m = GangManager()
    # upstream's words (gangscheduling.go, PreEnqueue)
    assert m.pre_enqueue("default/pg") == 'waiting for pod\'s pod group "pg" to appear in scheduling queue'
    m.set_podgroup(podgroup("pg", 3))
    m.observe_pod("default/pg", "default/a", None)
    m.observe_pod("default/pg", "default/b", None)
    assert m.pre_enqueue("default/pg") == "waiting for minCount pods from a gang to appear in scheduling queue"
    m.observe_pod("default/pg", "default/c", None)
    assert m.pre_enqueue("default/pg") is None


def test_quorum_allows_every_waiting_member_at_once() -> None:
    m = GangManager(timeout=30)
    m.set_podgroup(podgroup("pg", 3))
    assert m.permit("default/pg", "default/a", "n1", now=0) == (False, [])
    assert m.permit("default/pg", "default/b", "n2", now=1) == (False, [])
    allowed, siblings = m.permit("default/pg", "default/c", "n3", now=2)
    assert allowed and sorted(siblings) == ["default/a", "default/b"]
    assert m.groups["default/pg"].bound == {"default/a", "default/b", "default/c"}
    # a latecomer of an already-placed gang goes straight through
    assert m.permit("default/pg", "default/d", "n4", now=3) == (True, [])


def test_a_failure_rejects_all_waiting_members_and_forgets_the_domain() -> None:
    m = GangManager()
    m.set_podgroup(podgroup("pg", 3, topology="rack"))
    m.set_domain("default/pg", "r1", frozenset({"n1"}))
    m.permit("default/pg", "default/a", "n1", now=0)
    m.permit("default/pg", "default/b", "n1", now=0)
    assert sorted(m.fail("default/pg")) == ["default/a", "default/b"]
    g = m.groups["default/pg"]
    assert not g.waiting and g.domain is None
    assert m.fail("default/pg") == []


def test_timeout_expires_waiting_members() -> None:
    m = GangManager(timeout=10)
    m.set_podgroup(podgroup("pg", 2))
    m.permit("default/pg", "default/a", "n1", now=100)
    assert m.expired(now=105) == []
    assert m.expired(now=111) == [("default/pg", ["default/a"])]


def test_basic_policy_has_no_quorum() -> None:
    m = GangManager()
    pg = podgroup("pg")
    pg["spec"]["schedulingPolicy"] = {"basic": {}}
    m.set_podgroup(pg)
    assert m.pre_enqueue("default/pg") is None
    assert m.permit("default/pg", "default/a", "n1", now=0) == (True, [])


def _racks() -> list[dict[str, object]]:
    out = []
    for r, cpu in (("r0", "1"), ("r1", "4"), ("r2", "4")):
        for i in range(2):
            out.append(node(f"{r}-n{i}", cpu=cpu, labels={"rack": r}))
    return out


def test_topology_places_the_gang_in_one_domain_with_room() -> None:
    h, profile = build(_racks())
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("pg", 4, topology="rack"))
    members = [PodInfo(pod(f"m{i}", cpu="1", group="pg")) for i in range(4)]
    for m in members:
        gang.manager.observe_pod(m.group_key, m.key, None)
    h.bind_pod(pod("busy", cpu="3"), "r2-n0")  # r2 now has 1 + 4 = 5 cpu free; r1 has 8; r0 only 2
    st = CycleState()
    assert gang.pre_filter(st, members[0]) is not None  # SKIP: it restricts, it has no Filter
    g = gang.manager.groups["default/pg"]
    assert g.domain in ("r1", "r2")
    assert st.node_names == {f"{g.domain}-n0", f"{g.domain}-n1"}
    # placements are scored MostAllocated (upstream's NodeResourcesFit placement score, whatever
    # the per-pod strategy): r2 would be 7/8 cpu full, r1 4/8, so the gang packs into r2
    assert g.domain == "r2"


def test_topology_scores_every_feasible_domain_of_a_small_cluster() -> None:
    # Ten racks of two 4-cpu nodes; the gang of 4 x 1 cpu fits in all but r0. The fullest rack
    # that holds it is r7 (4 of 8 cpu used; 8 of 8 with the gang). In a 20-node cluster every
    # rack is scored (100%), so r7 wins wherever the rotation starts.
    nodes = [node(f"r{r}-n{i}", cpu="4", labels={"rack": f"r{r}"}) for r in range(10) for i in range(2)]
    for start in range(3):
        h, profile = build(nodes)
        gang = profile.get("GangScheduling")
        assert isinstance(gang, GangScheduling)
        gang._rotation = start
        h.bind_pod(pod("full", cpu="4"), "r0-n0")
        h.bind_pod(pod("full2", cpu="1"), "r0-n1")  # r0: 3 cpu free, too little
        h.bind_pod(pod("half", cpu="2"), "r3-n0")  # r3: 6/8 once the gang is in
        h.bind_pod(pod("most", cpu="4"), "r7-n1")  # r7: 8/8 once the gang is in: the best
        gang.manager.set_podgroup(podgroup("pg", 4, topology="rack"))
        members = [PodInfo(pod(f"m{i}", cpu="1", group="pg")) for i in range(4)]
        for m in members:
            gang.manager.observe_pod(m.group_key, m.key, None)
        gang.pre_filter(CycleState(), members[0])
        assert gang.manager.groups["default/pg"].domain == "r7"


def test_placements_to_score_as_upstream() -> None:
    assert placements_to_score(3, 6) == 3  # tiny clusters: every placement
    assert placements_to_score(50, 5000) == 5  # 10% at 5,000 nodes
    assert placements_to_score(1000, 100_000) == 50  # never under 5%
    assert placements_to_score(50, 2500) == 28  # 55% halfway
    assert placements_to_score(7, 100_000) == 1  # at least one
    assert placements_to_score(50, 5000, percentage=40) == 20  # PercentageOfPlacementsToScore set


def test_topology_without_a_domain_with_room_rejects_the_gang() -> None:
    _h, profile = build(_racks())
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("pg", 10, topology="rack"))
    members = [PodInfo(pod(f"m{i}", cpu="1", group="pg")) for i in range(10)]
    for m in members:
        gang.manager.observe_pod(m.group_key, m.key, None)
    s = gang.pre_filter(CycleState(), members[0])
    assert s is not None and s.code == Code.UNSCHEDULABLE
    assert "no rack domain has room for the 10 pods" in s.message


def test_topology_needs_room_for_min_count_members_and_prefers_more() -> None:
    # KEP-5732's phase 2: a placement is feasible when minCount members fit (not all of
    # them); PodGroupPodsCount then prefers the placement holding more. Six members of 1 cpu,
    # minCount 2: r0 has room for 2 and r1 for 3 (the fuller rack is r0), no rack for 6.
    nodes = [node("r0-n0", cpu="2", labels={"rack": "r0"}), node("r1-n0", cpu="3", labels={"rack": "r1"})]
    for start in range(2):
        _h, profile = build(nodes)
        gang = profile.get("GangScheduling")
        assert isinstance(gang, GangScheduling)
        gang._rotation = start
        gang.manager.set_podgroup(podgroup("pg", 2, topology="rack"))
        members = [PodInfo(pod(f"m{i}", cpu="1", group="pg")) for i in range(6)]
        for m in members:
            gang.manager.observe_pod(m.group_key, m.key, None)
        assert gang.pre_filter(CycleState(), members[0]) is not None  # SKIP: the domain restricts
        assert gang.manager.groups["default/pg"].domain == "r1"
    # minCount 4: neither rack holds 4
    _h, profile = build(nodes)
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("pg", 4, topology="rack"))
    for m in members:
        gang.manager.observe_pod(m.group_key, m.key, None)
    s = gang.pre_filter(CycleState(), members[0])
    assert s is not None and s.code == Code.UNSCHEDULABLE
    assert "no rack domain has room for the 4 pods" in s.message



def _gang(min_count: int, members: tuple[str, ...] = ("a", "b", "c")) -> tuple[FakeHandle, GangScheduling]:
    """The harness and GangScheduling of a one-node profile, PodGroup ``pg`` of ``min_count``
    set and ``members`` observed."""
    h, profile = build([node("n1", cpu="8")])
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("pg", min_count))
    for name in members:
        gang.manager.observe_pod("default/pg", f"default/{name}", None)
    return h, gang

def _condition(gang: GangScheduling, key: str = "default/pg") -> dict[str, object]:
    pg = gang.manager.groups[key].podgroup
    assert pg is not None
    (cond,) = pg["status"]["conditions"]
    return dict(cond)


def test_initially_scheduled_is_written_and_never_reverts_to_false() -> None:
    h, profile = build([node("n1", cpu="8")])
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    gang.manager.set_podgroup(podgroup("pg", 2))
    a, b = (PodInfo(pod(n, group="pg")) for n in ("a", "b"))
    gang.on_member_failed(a, "0/1 nodes are available: 1 Insufficient cpu.")
    cond = _condition(gang)
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodGroupInitiallyScheduled", "False", "Unschedulable")
    assert gang.permit(CycleState(), a, "n1")[0] is not None  # waits for b
    assert gang.permit(CycleState(), b, "n1")[0] is None  # the quorum
    cond = _condition(gang)
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodGroupInitiallyScheduled", "True", "Scheduled")
    assert cond["message"] == ""  # upstream's success status carries no message
    writes = len(h.spawned)
    # members evicted and retried later fail: the condition stays True, nothing is written
    gang.manager.forget_pod("default/pg", "default/a")
    gang.on_member_failed(a, "0/1 nodes are available: 1 Insufficient cpu.")
    assert _condition(gang)["status"] == "True" and len(h.spawned) == writes


def test_a_restarted_scheduler_keeps_the_stored_initially_scheduled_condition() -> None:
    h, profile = build([node("n1", cpu="8")])
    gang = profile.get("GangScheduling")
    assert isinstance(gang, GangScheduling)
    stored = podgroup("pg", 2)
    stored["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
                                        "reason": "Scheduled", "message": ""}]}
    gang.manager.set_podgroup(stored)
    gang.on_member_failed(PodInfo(pod("a", group="pg")), "0/1 nodes are available: 1 Insufficient cpu.")
    assert _condition(gang)["status"] == "True" and not h.spawned
    # the PodGroup deleted and created again under its name starts afresh
    gang.manager.remove_podgroup("default/pg")
    gang.manager.set_podgroup(podgroup("pg", 2))
    gang.on_member_failed(PodInfo(pod("a", group="pg")), "0/1 nodes are available: 1 Insufficient cpu.")
    assert _condition(gang)["status"] == "False" and len(h.spawned) == 1


def test_a_new_failure_message_rewrites_the_false_condition() -> None:
    # upstream's updatePodGroupCondition writes whenever apimeta.SetStatusCondition changes
    # the condition: a new message with the same reason is written, the same one is not
    h, gang = _gang(2, ("a", "b"))
    a, b = (PodInfo(pod(n, group="pg")) for n in ("a", "b"))
    gang.on_member_failed(a, "0/1 nodes are available: 1 Insufficient cpu.")
    first = _condition(gang)
    assert first["message"] == "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    assert len(h.spawned) == 1
    gang.on_member_failed(a, "0/1 nodes are available: 1 Insufficient cpu.")
    assert len(h.spawned) == 1
    assert gang.permit(CycleState(), b, "n1")[0] is not None  # b placed, waiting for a
    gang.on_member_failed(a, "0/1 nodes are available: 1 Insufficient cpu.")
    cond = _condition(gang)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining")
    assert cond["lastTransitionTime"] == first["lastTransitionTime"] and len(h.spawned) == 2
    assert h.rejected == [("default/b", "pod group is unschedulable, " + str(cond["message"]))]


def test_a_member_fails_alone_while_the_others_can_still_make_min_count() -> None:
    # upstream's pod group cycle goes on past a member that finds no node (schedule_one_podgroup.go)
    # while PlacementFeasible still allows minCount: the member's failure is its own
    h, gang = _gang(2)
    a, b, c = (PodInfo(pod(n, group="pg")) for n in ("a", "b", "c"))
    assert gang.permit(CycleState(), a, "n1")[0] is not None  # a waits
    assert gang.on_member_failed(b, "0/1 nodes are available: 1 Insufficient cpu.") is None
    assert not h.rejected and not h.spawned  # a still waits; no condition yet
    assert gang.manager.groups["default/pg"].failed == {"default/b"}
    assert gang.permit(CycleState(), c, "n1")[0] is None  # c completes the quorum without b
    assert h.allowed == ["default/a"] and not gang.manager.groups["default/pg"].failed
    assert _condition(gang)["status"] == "True"
    # b retried later: the group is placed, its failure stays its own
    assert gang.on_member_failed(b, "0/1 nodes are available: 1 Insufficient cpu.") is None

    # the scheduler says which members are still to try in the attempt: none left, b's failure
    # leaves a alone short of minCount
    h, gang = _gang(2)
    assert gang.permit(CycleState(), a, "n1")[0] is not None
    words = gang.on_member_failed(b, "0/1 nodes are available: 1 Insufficient cpu.", untried=[])
    assert words == "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    assert h.rejected == [("default/a", f"pod group is unschedulable, {words}")]
    assert _condition(gang)["message"] == words


def test_the_first_member_failing_tells_the_others_min_count_cannot_be_met() -> None:
    _h, gang = _gang(3)
    sibling = gang.on_member_failed(PodInfo(pod("a", group="pg")), "0/1 nodes are available: 1 Insufficient cpu.")
    assert sibling == "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"
    assert _condition(gang)["message"] == sibling
    # an error of the scheduler's own keeps its words (upstream: SchedulerError, the error)
    gang.manager.remove_podgroup("default/pg")
    gang.manager.set_podgroup(podgroup("pg", 3))
    for name in ("a", "b", "c"):
        gang.manager.observe_pod("default/pg", f"default/{name}", None)
    sibling = gang.on_member_failed(PodInfo(pod("a", group="pg")), "boom", error=True)
    assert sibling == 'rejected with the rest of PodGroup "pg": boom'
    assert (_condition(gang)["reason"], _condition(gang)["message"]) == ("SchedulerError", "boom")
