"""GangScheduling: the framework adapter over ``scheduler.gang.GangManager``.

- PreEnqueue: hold members until their PodGroup (and Workload) exist and
  ``minCount`` members have been observed.
- PreFilter: with a topology constraint, choose the group's domain (first
  member) and restrict every member's nodes to it.
- Permit: wait for the quorum; the member completing it allows its siblings.
- A member that finds no node fails alone while the others can still reach
  ``minCount`` (``on_member_failed``); else the group's attempt fails.
- Unreserve: a member's reservation released fails the group's attempt:
  every waiting sibling is rejected.

The group's ``PodGroupInitiallyScheduled`` condition (``podgroups/status``):
``True``/``Scheduled`` when the quorum binds, ``False``/``Unschedulable`` (or
``SchedulerError``) when an attempt fails, but never ``False`` once ``True``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...metrics import PODGROUP_SCHEDULE_ATTEMPTS
from ..framework import ActionType, ClusterEvent, Code, CycleState, Handle, MemberCapacityPlugin, Status
from ..gang import INITIALLY_SCHEDULED, GangManager
from ..nodeinfo import NodeInfo, PodInfo

if TYPE_CHECKING:
    from ..profile import Profile

__all__ = ["GROUP_UNSCHEDULABLE", "GangScheduling", "min_count_unsatisfiable", "placement_score", "placements_to_score",
           "rejected_with_group"]

NAME = "GangScheduling"
CONDITION = INITIALLY_SCHEDULED
# How long members wait at Permit for the quorum: upstream's fixed permitTimeoutDuration (5 minutes)
PERMIT_TIMEOUT = 300.0
log = logging.getLogger("controlplane.scheduler")


# upstream's errPodGroupUnschedulable (schedule_one_podgroup.go): a member that was placed in
# a group that could not be, says it before the group's reason
GROUP_UNSCHEDULABLE = "pod group is unschedulable"


def rejected_with_group(group: str, message: str) -> str:
    """What a member hears when its group's attempt fails, whichever member failed it
    (said once: a message that already says so is kept as it is). A placed member of a gang
    whose ``minCount`` cannot be met any more hears upstream's ``pod group is unschedulable,
    <the group's reason>``; its unplaced siblings hear the group's reason alone, as upstream
    gives the pods its cycle did not reach the group's status."""
    if message.startswith(GROUP_UNSCHEDULABLE + ", "):
        return message[len(GROUP_UNSCHEDULABLE) + 2:]
    prefix = f'rejected with the rest of PodGroup "{group}": '
    return message if message.startswith(prefix) else prefix + message


def min_count_unsatisfiable(min_count: int, scheduled: int, remaining: int) -> str:
    """Upstream's words (gangscheduling.go, PlacementFeasible) when the gang's placed members
    and those still to try cannot reach ``minCount``."""
    return f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"


def placements_to_score(placements: int, nodes: int, percentage: int = 0) -> int:
    """How many feasible placements are scored before the best is taken, as upstream's
    PercentageOfPlacementsToScore (KEP-5732, beta): ``percentage`` when set, else adaptive
    to the nodes the placements hold, from 100% for a tiny cluster down to 10% at 5,000
    nodes, never under 5%; at least one.

    >>> placements_to_score(50, 5000), placements_to_score(3, 6), placements_to_score(200, 100000)
    (5, 3, 10)
    """
    if percentage <= 0:
        percentage = max(5, 100 - 90 * nodes // 5000)
    return max(1, -(-placements * min(percentage, 100) // 100))


def placement_score(nodes: list[NodeInfo], pod: PodInfo, count: int) -> int:
    """NodeResourcesFit's score of a placement (0-100): MostAllocated over the placement's
    nodes taken together, cpu and memory weighted alike, with ``count`` pods like ``pod``
    added; higher is fuller, so gangs pack rather than spread (upstream always scores
    placements MostAllocated, whatever the per-pod scoring strategy)."""
    alloc_cpu = sum(n.alloc_cpu for n in nodes)
    alloc_mem = sum(n.alloc_mem for n in nodes)
    used_cpu = sum(n.requested.get("cpu", 0) for n in nodes) + count * pod.requests.get("cpu", 0)
    used_mem = sum(n.requested.get("memory", 0) for n in nodes) + count * pod.requests.get("memory", 0)
    scores = [used * 100 // alloc for used, alloc in ((used_cpu, alloc_cpu), (used_mem, alloc_mem)) if alloc]
    return sum(min(s, 100) for s in scores) // len(scores) if scores else 0


def _same_group(pod: PodInfo, old: Any, new: Any) -> bool:
    obj = new if new is not None else old
    if not isinstance(obj, dict):
        return True
    group = ((obj.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    ns = (obj.get("metadata") or {}).get("namespace")
    return bool(group) and group == pod.group and ns == pod.namespace


def _podgroup_of(pod: PodInfo, old: Any, new: Any) -> bool:
    obj = new if new is not None else old
    if not isinstance(obj, dict):
        return True
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Workload" or "podGroupTemplates" in (obj.get("spec") or {}):
        return meta.get("namespace") == pod.namespace
    return meta.get("namespace") == pod.namespace and meta.get("name") == pod.group


class GangScheduling:
    def __init__(self, handle: Handle, timeout: float = PERMIT_TIMEOUT, clock: Any = time.monotonic,
                 percentage_of_placements_to_score: int = 0) -> None:
        self.handle = handle
        self.percentage = percentage_of_placements_to_score
        self.manager = GangManager(timeout)
        self.clock = clock
        self._rotation = 0
        self._domain_cache: dict[str, tuple[int, dict[str, list[NodeInfo]], list[str]]] = {}

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> GangScheduling:
        return cls(handle, float(args.get("timeoutSeconds", PERMIT_TIMEOUT)),
                   percentage_of_placements_to_score=int(args.get("percentageOfPlacementsToScore", 0)))

    def name(self) -> str:
        return NAME

    # ---------------------------------------------------------------- extension points

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.group:
            return None
        why = self.manager.pre_enqueue(pod.group_key)
        return None if why is None else Status(Code.PENDING, why, plugin=NAME)

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        if not pod.group or state.get("GangScheduling/choosing"):
            return Status(Code.SKIP)
        g = self.manager.groups.get(pod.group_key)
        if g is None or g.policy is None or not g.policy.topology_key:
            return Status(Code.SKIP)
        if g.domain is None:
            s = self._choose_domain(pod)
            if s is not None:
                return s
        state.restrict_nodes(g.domain_nodes)
        return Status(Code.SKIP)  # the restriction is the whole of it; no Filter to run

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        if not pod.group:
            return None, 0.0
        now = self.clock()
        allowed, siblings = self.manager.permit(pod.group_key, pod.key, node_name, now)
        if allowed:
            for key in siblings:
                self.handle.allow(key, NAME)
            g = self.manager.groups[pod.group_key]
            if g.policy is not None and g.policy.gang and (siblings or g.policy.min_count == 1):
                PODGROUP_SCHEDULE_ATTEMPTS.labels(result="scheduled").inc()
                # upstream's message is the group result's, empty on success (schedule_one_podgroup.go)
                self._report(pod.group_key, "True", "Scheduled", "")
            return None, 0.0
        g = self.manager.groups[pod.group_key]
        return Status(Code.WAIT, "waiting for the gang's quorum", plugin=NAME), max(0.0, g.deadline - now)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        if not pod.group:
            return
        self.manager.unreserved(pod.group_key, pod.key)
        self._fail_group(pod, f'pod "{pod.name}" of the group was not scheduled', count=False)

    def in_gang(self, pod: PodInfo) -> bool:
        """Is ``pod`` a member of a group with the ``gang`` policy (all or nothing)? Members
        of ``basic`` groups are scheduled, and fail, one by one."""
        g = self.manager.groups.get(pod.group_key) if pod.group else None
        return g is not None and g.policy is not None and g.policy.gang

    def on_member_failed(self, pod: PodInfo, message: str, error: bool = False,
                         untried: Iterable[str] | None = None) -> str | None:
        """The scheduler's hook: a member's cycle failed before Reserve (no node fits, or
        an ``error`` of the scheduler's own). Returns what the group's unplaced members hear,
        or None when the failure is the member's alone. ``untried``: the members still to
        be tried in this attempt (the scheduler's queue knows them); by default every
        member neither placed nor failed.

        As upstream's pod group cycle (schedule_one_podgroup.go) goes on past a member that
        finds no node, while the placed members and those still to try can reach
        ``minCount`` (GangScheduling's PlacementFeasible) the member fails alone: its own
        message, its siblings untouched, the group's condition left to the attempt's end.
        Once they cannot, the words are upstream's: the PodGroup's condition and the
        unplaced members get ``minCount (m) cannot be satisfied: s scheduled, r
        remaining``, the placed (waiting) members ``pod group is unschedulable, `` before
        it, and the failing member keeps its own message. An error stops the attempt."""
        if not error and self.in_gang(pod):
            g = self.manager.groups[pod.group_key]
            assert g.policy is not None
            placed = g.bound | set(g.waiting)
            others = g.members if untried is None else set(untried)
            remaining = len(others - placed - g.failed - {pod.key})
            if len(placed) + remaining >= g.policy.min_count:
                self.manager.failed_alone(pod.group_key, pod.key)
                return None
            words = min_count_unsatisfiable(g.policy.min_count, len(placed), remaining)
            self._fail_group(pod, f"{GROUP_UNSCHEDULABLE}, {words}", count=True, condition_message=words)
            return words
        if pod.group:
            self._fail_group(pod, message, count=True, reason="SchedulerError" if error else "Unschedulable")
        return rejected_with_group(pod.group, message)

    def _fail_group(self, pod: PodInfo, message: str, count: bool, reason: str = "Unschedulable",
                    condition_message: str | None = None) -> None:
        if not self.in_gang(pod):
            return
        rejected = self.manager.fail(pod.group_key)
        for key in rejected:
            self.handle.reject(key, NAME, message if message.startswith(GROUP_UNSCHEDULABLE + ", ")
                               else rejected_with_group(pod.group, message))
        if count or rejected:
            PODGROUP_SCHEDULE_ATTEMPTS.labels(result="unschedulable").inc()
            self._report(pod.group_key, "False", reason, message if condition_message is None else condition_message)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("pods", ActionType.ADD, _same_group),
            ClusterEvent("pods", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
            ClusterEvent("podgroups", ActionType.ADD | ActionType.UPDATE, _podgroup_of),
            ClusterEvent("workloads", ActionType.ADD | ActionType.UPDATE, _podgroup_of),
            ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE),
        ]

    # ---------------------------------------------------------------- topology

    def _choose_domain(self, pod: PodInfo) -> Status | None:
        """Pick the group's domain as upstream's topology-aware scheduling (KEP-5732) picks a
        placement: each value of the topology label is a candidate; one is feasible when the
        members the group still requires fit in it (a gang's ``minCount`` less those bound, a
        basic group's one: KEP-5732's phase 2), by the Filter plugins and this member's
        requests and by the devices each member's claims take (``MemberCapacityPlugin``);
        the feasible ones are scored until ``placements_to_score`` of them are found (walking
        from a start that rotates across groups), and the highest score wins. The score is
        upstream's two default placement scorers, weighted alike: NodeResourcesFit's,
        MostAllocated over the domain's cpu and memory once the members that fit are in it
        (gangs pack into the fullest domain that holds them), and PodGroupPodsCount's, the
        group's members bound or fitting there, 0-100 against the candidate holding most."""
        g = self.manager.groups[pod.group_key]
        assert g.policy is not None
        key = g.policy.topology_key
        need = max(1, len(g.members) - len(g.bound))  # the members to place, as many as fit
        required = max(1, g.policy.min_count - len(g.bound)) if g.policy.gang else 1
        profile: Profile = self.handle.profile()
        domains, names = self._domains(key)
        if not domains:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"no node has the topology label {key}", plugin=NAME)
        self._rotation = (self._rotation + 1) % len(names)
        names = names[self._rotation:] + names[:self._rotation]
        probe = CycleState()
        probe.write("GangScheduling/choosing", True)
        if profile.run_pre_filter(probe, pod) is not None:
            return Status(Code.UNSCHEDULABLE, f"no {key} domain can hold the pods of PodGroup \"{pod.group}\"",
                          plugin=NAME)
        filters = profile.filters_for(probe)
        wanted = placements_to_score(len(names), sum(len(d) for d in domains.values()), self.percentage)
        candidates: list[tuple[str, int, int]] = []  # (domain, placement score, members that fit)
        reqs = [(r, a) for r, a in pod.requests.items() if a > 0]  # "pods": 1 among them
        # plugins whose resources the members take one after another (DRA's devices): a
        # node with room for 40 pods by cpu but 2 free GPUs holds 2 members needing a GPU each
        counted = [p for p in filters if isinstance(p, MemberCapacityPlugin)]
        for name in names:
            slots = 0
            held: list[str] = []
            try:
                for ni in domains[name]:
                    if profile.run_filters(filters, probe, pod, ni) is not None:
                        continue
                    fit = min((ni.allocatable.get(r, 0) - ni.requested.get(r, 0)) // a for r, a in reqs)
                    for p in counted:
                        if fit > 0:
                            fit = p.member_capacity(probe, pod, ni, min(fit, need - slots), held)
                    if fit > 0:
                        slots += fit
                    if slots >= need:
                        break
            finally:
                for p in counted:
                    p.release_capacity(held)
            if slots < required:
                continue
            fits = min(slots, need)
            candidates.append((name, placement_score(domains[name], pod, fits), fits))
            if len(candidates) >= wanted:
                break
        if not candidates:
            return Status(Code.UNSCHEDULABLE,
                          f"no {key} domain has room for the {required} pods of PodGroup \"{pod.group}\"",
                          plugin=NAME)
        most = len(g.bound) + max(fits for _, _, fits in candidates)
        best = max(candidates, key=lambda c: (c[1] + (len(g.bound) + c[2]) * 100 // most, c[1], c[0]))[0]
        self.manager.set_domain(pod.group_key, best, frozenset(n.name for n in domains[best]))
        return None

    def _domains(self, key: str) -> tuple[dict[str, list[NodeInfo]], list[str]]:
        """Nodes by value of label ``key``, and the values sorted; kept while the nodes do not
        change (``NodeMap.version``; a plain mapping is grouped afresh each time)."""
        nodes = self.handle.nodes()
        version = getattr(nodes, "version", None)
        hit = self._domain_cache.get(key)
        if hit is not None and version is not None and hit[0] == version:
            return hit[1], hit[2]
        domains: dict[str, list[NodeInfo]] = {}
        for ni in nodes.values():
            v = ni.labels.get(key)
            if v is not None:
                domains.setdefault(v, []).append(ni)
        names = sorted(domains)
        if version is not None:
            self._domain_cache[key] = (version, domains, names)
        return domains, names

    # ---------------------------------------------------------------- status

    def _report(self, group_key: str, status: str, reason: str, message: str) -> None:
        """Write the group's condition when it changes. ``True`` is terminal: once written
        (or found on the stored PodGroup, after a restart) no ``False`` follows it."""
        g = self.manager.groups.get(group_key)
        if g is None or g.podgroup is None:
            return
        if status == "True":
            g.initially_scheduled = True
        elif g.initially_scheduled:
            return
        conditions = list((g.podgroup.get("status") or {}).get("conditions") or ())
        prior = next((c for c in conditions if c.get("type") == CONDITION), None)
        generation = (g.podgroup.get("metadata") or {}).get("generation")
        # written when anything changes, as apimeta.SetStatusCondition reports: the status, the
        # reason, the message (a new failure's words) or the generation observed
        if prior is not None and (prior.get("status"), prior.get("reason"), prior.get("message") or "",
                                  prior.get("observedGeneration") or 0) == (status, reason, message, generation or 0):
            return
        ns, _, name = group_key.partition("/")
        cond = {"type": CONDITION, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))}
        if prior is not None and prior.get("status") == status and prior.get("lastTransitionTime"):
            cond["lastTransitionTime"] = prior["lastTransitionTime"]  # as apimeta.SetStatusCondition
        if generation:  # a PodGroup has none upstream (its strategy sets none): Go omits the 0
            cond["observedGeneration"] = generation
        # the group's other conditions (DisruptionTarget, a controller's own) are kept
        conditions = [cond if c is prior else c for c in conditions] if prior is not None else [*conditions, cond]
        g.podgroup = {**g.podgroup, "status": {**(g.podgroup.get("status") or {}), "conditions": conditions}}
        self.handle.spawn(self._write_status(ns, name, cond))

    async def _write_status(self, ns: str, name: str, cond: dict[str, Any]) -> None:
        from ...client import ApiError, resource_path

        path = resource_path("scheduling.k8s.io", "v1beta1", "podgroups", ns, name, "status")
        try:
            # strategic: merged into the stored list by type (a merge patch would replace the list)
            await self.handle.client.patch(path, {"status": {"conditions": [cond]}}, patch_type="strategic")
        except (TimeoutError, ApiError, OSError) as e:
            log.warning("podgroup %s/%s: status not written: %s", ns, name, e)
