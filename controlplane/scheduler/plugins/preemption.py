"""DefaultPreemption (PostFilter): make room for a pod by evicting lower-priority pods.

For each node the pod was rejected from with UNSCHEDULABLE (not
UNSCHEDULABLE_AND_UNRESOLVABLE: evicting cannot fix a taint, a selector, or a
request beyond the node's allocatable),
remove every pod of lower priority, check the pod then passes the Filter
plugins, and put victims back while it still passes: first those whose eviction
would violate a PodDisruptionBudget, then the others, each group highest priority
first (upstream's ``filterPodsWithPDBViolation``): what remains are the victims.
Pods nominated to the node with at least the pod's priority count there
throughout, as upstream's ``RunFilterPluginsWithNominatedPods``: their room is
not the pod's to take. Among candidate nodes pick, as upstream, the one with the
fewest victims a budget protects, then whose highest-priority victim is lowest,
then the smallest sum of victim priorities, then the fewest victims, then whose
victims started last (``_rank``). Each victim
gets the ``DisruptionTarget`` condition (``PreemptionByScheduler``), then is deleted through the API, and the
pod's ``status.nominatedNodeName`` is set; the pod itself is retried when the
deletions arrive (pod DELETE events).

Members of a ``gang`` PodGroup do not preempt (evicting for one member does not
place the gang); members of a ``basic`` one do, as any pod.

When no node is a candidate the message says why per node, as upstream's::

    0/13 nodes are available: 1 No preemption victims found for incoming pod,
    12 Preemption is not helpful for scheduling.

"not helpful": the node's rejection was UNSCHEDULABLE_AND_UNRESOLVABLE; "no
victims": nothing of lower priority runs there; otherwise the reason the pod
still does not fit with every lower-priority pod gone ("Insufficient cpu").

``select_victims`` is the pure part (tested alone); ``post_filter`` adds the writes.
"""

from __future__ import annotations

import asyncio
import calendar
import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from ...podgeneration import observing
from ...selectormatch import match_label_selector
from ..framework import Code, CycleState, Handle, PostFilterResult, Status, WatchedResource
from ..nodeinfo import NodeInfo, PodInfo
from .gangscheduling import GangScheduling

if TYPE_CHECKING:
    from ..profile import Profile

__all__ = ["NO_VICTIMS", "NOT_HELPFUL", "DefaultPreemption", "find_candidate", "select_victims", "split_by_budgets"]

NAME = "DefaultPreemption"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
log = logging.getLogger("controlplane.scheduler")

Candidate = tuple[NodeInfo, list[PodInfo]]


_MAX_INT32 = 2**31 - 1


@functools.lru_cache(maxsize=8192)
def _epoch(at: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(at[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def start_time(p: PodInfo) -> float:
    """The pod's ``status.startTime`` (epoch seconds); a pod not started yet counts as
    starting now, after every started one, as upstream's ``GetPodStartTime``. (Parsed
    once per distinct time: the dry run sorts the pods of every candidate node.)"""
    at = (p.obj.get("status") or {}).get("startTime")
    t = _epoch(at) if isinstance(at, str) else None
    return time.time() if t is None else t


def _more_important_first(p: PodInfo) -> tuple[int, float]:
    """Upstream's ``MoreImportantPod`` as a sort key: higher priority, then started earlier."""
    return -p.priority, start_time(p)


def _rank(victims: Sequence[PodInfo], violations: int) -> tuple[int, int, int, int, float]:
    """Upstream's ``pickOneNodeForPreemption`` criteria, least first: the fewest budget
    violations, the lowest highest victim priority, the smallest sum of victim priorities
    each raised by 2^31 (so that fewer victims win, even over more of negative priority), the fewest
    victims, then the latest earliest start among the highest-priority victims."""
    top = max(v.priority for v in victims)
    earliest = min(start_time(v) for v in victims if v.priority == top)
    return (violations, top, sum(v.priority + _MAX_INT32 + 1 for v in victims), len(victims), -earliest)


def split_by_budgets(pods: Sequence[PodInfo], pdbs: Iterable[Mapping[str, Any]],
                     ) -> tuple[list[PodInfo], list[PodInfo]]:
    """``pods`` (order kept) parted into those whose eviction, in that order, would
    take a PodDisruptionBudget below zero disruptions allowed, and the others, as
    upstream's ``filterPodsWithPDBViolation``: each budget of the pod's namespace whose
    (non-empty) selector matches it spends one of its ``status.disruptionsAllowed``,
    unless the pod is already among its ``disruptedPods``."""
    budgets: list[tuple[str | None, Mapping[str, Any], Mapping[str, Any]]] = []
    allowed: list[int] = []
    for b in pdbs:
        meta, spec, status = b.get("metadata") or {}, b.get("spec") or {}, b.get("status") or {}
        sel = spec.get("selector")
        if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
            continue  # a nil or empty selector matches nothing here
        budgets.append((meta.get("namespace"), sel, status.get("disruptedPods") or {}))
        allowed.append(int(status.get("disruptionsAllowed") or 0))
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for p in pods:
        violated = False
        if p.labels:
            for i, (namespace, sel, disrupted) in enumerate(budgets):
                if namespace != p.namespace or p.name in disrupted or not match_label_selector(sel, p.labels):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else others).append(p)
    return violating, others


def _victims_on(profile: Profile, state: CycleState, pod: PodInfo, node: NodeInfo,
                nominated: Sequence[PodInfo] = (), pdbs: Sequence[Mapping[str, Any]] = (),
                ) -> tuple[list[PodInfo], int] | Status:
    """The pods to evict from ``node`` for ``pod`` to fit and how many of them a budget
    protects, or why there are none. ``nominated``: the pods nominated to ``node`` that
    ``pod`` must leave room for."""
    lower = [p for p in node.pods.values() if p.priority < pod.priority]
    if not lower:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS, plugin=NAME)
    view = node.clone()
    for p in lower:
        view.remove_pod(p)
    for p in nominated:
        view.add_pod(p)
    filters = profile.filters_for(state)
    s = profile.run_filters(filters, state, pod, view)
    if s is not None:
        return s  # it does not fit even with every lower-priority pod gone
    victims = []
    violations = 0
    # try to keep the most important, those a budget protects first
    violating, others = split_by_budgets(sorted(lower, key=_more_important_first), pdbs)
    for group, protected in ((violating, True), (others, False)):
        for p in group:
            view.add_pod(p)
            if profile.run_filters(filters, state, pod, view) is not None:
                view.remove_pod(p)
                victims.append(p)
                violations += protected
    if not victims:
        return Status(Code.ERROR, f'expected at least one victim pod on node "{node.name}"', plugin=NAME)
    return victims, violations


def find_candidate(profile: Profile, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                   statuses: Mapping[str, Status], nominated: Mapping[str, Sequence[PodInfo]] | None = None,
                   pdbs: Sequence[Mapping[str, Any]] = ()) -> tuple[Candidate | None, dict[str, Status]]:
    """The node to nominate and the pods to evict there (None if preemption cannot help),
    and why each node of ``statuses`` that is no candidate is not (upstream's dry run).
    ``nominated``: node name -> pods nominated there of at least ``pod``'s priority;
    ``pdbs``: the PodDisruptionBudgets."""
    best: tuple[tuple[int, int, int, int, float], NodeInfo, list[PodInfo]] | None = None
    why_not: dict[str, Status] = {}
    by_name = {n.name: n for n in nodes}
    for name, s in statuses.items():
        node = by_name.get(name)
        if node is None or s.code != Code.UNSCHEDULABLE:
            why_not[name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL, plugin=NAME)
            continue
        found = _victims_on(profile, state, pod, node, (nominated or {}).get(name, ()), pdbs)
        if isinstance(found, Status):
            why_not[name] = found
            continue
        victims, violations = found
        rank = _rank(victims, violations)
        if best is None or rank < best[0]:
            best = (rank, node, victims)
    return (None if best is None else (best[1], best[2])), why_not


def select_victims(profile: Profile, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                   statuses: Mapping[str, Status]) -> Candidate | None:
    """The node to nominate and the pods to evict there, or None if preemption cannot help."""
    return find_candidate(profile, state, pod, nodes, statuses)[0]


def _preempted(p: PodInfo) -> bool:
    """Is ``p`` being deleted by a scheduler's preemption (its ``DisruptionTarget``
    condition says so), as upstream's ``podTerminatingByPreemption``?"""
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == "PreemptionByScheduler"
               for c in (p.obj.get("status") or {}).get("conditions") or ())


class DefaultPreemption:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> DefaultPreemption:
        return cls(handle)

    def name(self) -> str:
        return NAME

    def resources_to_watch(self) -> list[WatchedResource]:
        return [WatchedResource("policy", "v1", "poddisruptionbudgets")]

    async def post_filter(self, state: CycleState, pod: PodInfo,
                          statuses: Mapping[str, Status]) -> tuple[PostFilterResult | None, Status | None]:
        policy = (pod.obj.get("spec") or {}).get("preemptionPolicy")
        if policy == "Never":
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "not eligible due to preemptionPolicy=Never.",
                                plugin=NAME)
        nodes = self.handle.nodes()
        if self._awaits_victims(pod, nodes, statuses):
            # its nomination stands: the victims' deletions will retry it
            return None, Status(Code.UNSCHEDULABLE, "not eligible due to a terminating pod on the nominated node.",
                                plugin=NAME)
        profile: Profile = self.handle.profile()
        gang = profile.get("GangScheduling")
        in_gang = isinstance(gang, GangScheduling) and gang.in_gang(pod)
        # the scheduler's nominated pods (a handle without any: tests, tools)
        nominated_for = getattr(self.handle, "nominated_pods_for", None)
        nominated = nominated_for(pod) if nominated_for is not None else None
        pdbs = list(self.handle.lister("poddisruptionbudgets").values())
        chosen, why_not = find_candidate(profile, state, pod, [nodes[n] for n in statuses if n in nodes], statuses,
                                         nominated, pdbs)
        if chosen is None:
            from ..profile import FitError  # profile imports the plugins

            # no candidate: the pod's nomination, if it had one, is cleared (upstream's
            # NewPostFilterResultWithNominatedNode(""), a ModeOverride to nothing)
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, FitError(len(statuses), why_not).message(),
                                                plugin=NAME)
        if in_gang:
            # evicting for one member of a gang does not place the gang (basic groups' members
            # preempt); a member no eviction could help was told so above, as any pod
            return None, Status(Code.UNSCHEDULABLE, "preemption is not attempted for gang members", plugin=NAME)
        node, victims = chosen
        errors = [e for e in await asyncio.gather(*(self._evict(pod, v) for v in victims)) if e]
        if errors:
            return None, Status(Code.ERROR, f"could not evict the victims: {'; '.join(errors)}", plugin=NAME)
        for v in victims:
            self.handle.record_event(v.obj, "Preempted", f"Preempted by pod {pod.uid} on node {node.name}",
                                     action="Preempting", related=pod.obj)
        return PostFilterResult(node.name), None

    @staticmethod
    def _awaits_victims(pod: PodInfo, nodes: Mapping[str, NodeInfo], statuses: Mapping[str, Status]) -> bool:
        """Upstream's ``PodEligibleToPreemptOthers`` (past ``preemptionPolicy``): a pod whose
        ``status.nominatedNodeName`` node still holds a pod of lower priority terminating by
        preemption waits for it rather than preempting again, unless that node now rejects
        the pod UNSCHEDULABLE_AND_UNRESOLVABLE (evicting there no longer helps)."""
        # the stored nomination, or the one this scheduler just made (its patch in flight)
        nominated = (pod.obj.get("status") or {}).get("nominatedNodeName") or pod.nominated_node
        if not nominated:
            return False
        s = statuses.get(nominated)
        if s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return False
        node = nodes.get(nominated)
        if node is None:
            return False
        return any(p.terminating and p.priority < pod.priority and _preempted(p) for p in node.pods.values())

    async def _evict(self, pod: PodInfo, victim: PodInfo) -> str | None:
        """Mark ``victim`` with ``DisruptionTarget`` (a pods/status patch through the scheduler's
        writer), then delete it (UID precondition), as upstream does: whoever watches it (a
        Job's podFailurePolicy) learns it was preempted before it goes, so a victim whose
        condition is not written is not deleted. None, or why the eviction failed (a victim
        already gone is no failure)."""
        from ...client import ApiError, resource_path

        # the preemptor's schedulerName is this scheduler's name: it schedules only those pods
        scheduler = (pod.obj.get("spec") or {}).get("schedulerName") or "default-scheduler"
        condition = observing({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                               "message": f"{scheduler}: preempting to accommodate a higher priority pod",
                               "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))},
                              victim.obj)
        path = resource_path("", "v1", "pods", victim.namespace, victim.name)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if victim.uid:
            body["preconditions"] = {"uid": victim.uid}
        try:
            await self._patch_status(f"{path}/status", {"status": {"conditions": [condition]}})
            await self.handle.client.delete(path, body)
        except ApiError as e:
            if e.code != 404:
                log.warning("preemption: could not evict %s: %s", victim.key, e)
                return f"{victim.key}: {e.message}"
        except (TimeoutError, OSError, httpx.TransportError) as e:
            log.warning("preemption: could not evict %s: %s", victim.key, e)
            return f"{victim.key}: {e!r}"
        return None

    async def _patch_status(self, path: str, body: dict[str, Any]) -> None:
        # The scheduler's Writer (its bounded lane for conditions); a handle without one
        # (tests, tools) writes through its client.
        writer = getattr(self.handle, "writer", None)
        if writer is not None:
            await writer.patch(path, body, "strategic")
        else:
            await self.handle.client.patch(path, body, patch_type="strategic")
