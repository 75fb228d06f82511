"""Gang scheduling's domain logic: PodGroups, their quorum, their waiting members, their topology domain.

Pure bookkeeping, no I/O and no clock of its own (times are passed in), so it is
tested alone; the ``GangScheduling`` plugin adapts it to the framework.

A PodGroup (scheduling.k8s.io/v1beta1) names its policy inline
(``spec.schedulingPolicy``) or through the Workload's ``podGroupTemplates``
(1.37's ``spec.workloadRef: {workloadName, templateName}``; the earlier drafts'
``spec.podGroupTemplateRef.workload: {workloadName, podGroupTemplateName}`` is
read when ``workloadRef`` is absent): ``gang: {minCount: N}`` or ``basic: {}``.
Pods join with ``spec.schedulingGroup.podGroupName``.

The life of a gang of ``minCount`` N:

1. PreEnqueue holds every member until the PodGroup exists and at least N of
   its pods have been observed (``pre_enqueue``).
2. Each member goes through its own cycle; a member that finds a node reserves
   it and waits at Permit (``permit`` returns ``WAIT``), holding the reservation.
3. The member that brings the reserved-or-bound count to N allows every waiting
   sibling (``permit`` returns their keys): all bind together.
4. A member that fails its cycle while the placed members and those still to
   try can reach N fails alone (``failed_alone``): the others go on, as
   upstream's pod group cycle does. Once they cannot, the group fails: every
   waiting sibling is rejected (``fail``), reservations released, and the group
   retried as a whole. So is a group whose waiting members are not joined by the
   rest within the timeout (``expired``).

``basic`` groups skip 2-4's quorum: each member binds as soon as it is placed.

Topology (``spec.schedulingConstraints.topology: [{key: K}]``): the group is
placed inside one domain (one value of node label K). The domain is chosen when
the first member's cycle starts and kept until the group is bound or fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INITIALLY_SCHEDULED", "GangManager", "GroupState", "Policy", "initially_scheduled", "policy_of"]

# The PodGroup condition the scheduler owns (1.37). Once True it is terminal: it never
# reverts to False, even if the group's pods are evicted later.
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


@dataclass(frozen=True, slots=True)
class Policy:
    gang: bool  # False: "basic"
    min_count: int
    topology_key: str = ""


def _workload_ref(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(workload name, template name) the PodGroup was made from: 1.37's ``workloadRef``,
    else the earlier ``podGroupTemplateRef.workload``; ("", "") if it names none."""
    ref = spec.get("workloadRef")
    if ref:
        return ref.get("workloadName") or "", ref.get("templateName") or ""
    old = (spec.get("podGroupTemplateRef") or {}).get("workload") or {}
    return old.get("workloadName") or "", old.get("podGroupTemplateName") or ""


def policy_of(podgroup: Mapping[str, Any], workloads: Mapping[str, Mapping[str, Any]]) -> Policy | None:
    """The PodGroup's effective policy: its own ``schedulingPolicy``, else the one of the
    Workload template it references; None if neither is there (the Workload is missing)."""
    spec = podgroup.get("spec") or {}
    policy = spec.get("schedulingPolicy")
    if not policy:
        workload, template = _workload_ref(spec)
        ns = (podgroup.get("metadata") or {}).get("namespace") or ""
        wl = workloads.get(f"{ns}/{workload}")
        if wl is None:
            return None
        for t in (wl.get("spec") or {}).get("podGroupTemplates") or ():
            if t.get("name") == template:
                policy = t.get("schedulingPolicy")
                break
        if not policy:
            return None
    topology = ((spec.get("schedulingConstraints") or {}).get("topology")) or []
    key = topology[0].get("key", "") if topology and isinstance(topology[0], dict) else ""
    gang = policy.get("gang")
    if gang is not None:
        return Policy(True, max(1, int(gang.get("minCount") or 1)), key)
    return Policy(False, 1, key)


def initially_scheduled(podgroup: Mapping[str, Any] | None) -> bool:
    """Does the stored PodGroup carry ``PodGroupInitiallyScheduled=True``?"""
    for c in ((podgroup or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == INITIALLY_SCHEDULED and c.get("status") == "True":
            return True
    return False


@dataclass
class GroupState:
    key: str  # "namespace/name"
    policy: Policy | None = None
    podgroup: dict[str, Any] | None = None
    members: set[str] = field(default_factory=set)  # observed pods of the group, not terminal
    bound: set[str] = field(default_factory=set)  # members with a node (bound, or allowed and binding)
    waiting: dict[str, str] = field(default_factory=dict)  # member key -> reserved node, waiting at Permit
    failed: set[str] = field(default_factory=set)  # members that failed alone in the attempt under way
    deadline: float = 0.0  # when the first waiting member gives up
    domain: str | None = None  # chosen topology domain (value of policy.topology_key)
    domain_nodes: frozenset[str] = frozenset()
    # PodGroupInitiallyScheduled=True was written by us or seen on the stored object: sticky,
    # so no later failure (evicted members retried, a restart) writes False over it
    initially_scheduled: bool = False

    @property
    def quorum_reached(self) -> bool:
        p = self.policy
        return p is None or not p.gang or len(self.bound) + len(self.waiting) >= p.min_count


class GangManager:
    def __init__(self, timeout: float = 300.0) -> None:
        self.timeout = timeout
        self.groups: dict[str, GroupState] = {}
        self.workloads: dict[str, dict[str, Any]] = {}

    def group(self, key: str) -> GroupState:
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = GroupState(key)
        return g

    # ---------------------------------------------------------------- informer input

    def set_podgroup(self, obj: dict[str, Any]) -> GroupState:
        meta = obj.get("metadata") or {}
        g = self.group(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        g.podgroup = obj
        g.policy = policy_of(obj, self.workloads)
        g.initially_scheduled = g.initially_scheduled or initially_scheduled(obj)
        return g

    def remove_podgroup(self, key: str) -> None:
        g = self.groups.get(key)
        if g is not None:
            g.podgroup, g.policy = None, None
            g.initially_scheduled = False  # a PodGroup created again under this name starts afresh

    def set_workload(self, obj: dict[str, Any]) -> list[str]:
        """A Workload changed: re-resolve the policies of the groups that use it."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        self.workloads[f"{ns}/{meta.get('name', '')}"] = obj
        return self._refresh(ns)

    def remove_workload(self, key: str) -> list[str]:
        self.workloads.pop(key, None)
        return self._refresh(key.partition("/")[0])

    def _refresh(self, namespace: str) -> list[str]:
        changed = []
        for g in self.groups.values():
            if g.podgroup is not None and g.key.startswith(namespace + "/"):
                g.policy = policy_of(g.podgroup, self.workloads)
                changed.append(g.key)
        return changed

    def observe_pod(self, group_key: str, pod_key: str, node: str | None) -> None:
        g = self.group(group_key)
        g.members.add(pod_key)
        if node:
            g.bound.add(pod_key)
            g.waiting.pop(pod_key, None)

    def forget_pod(self, group_key: str, pod_key: str) -> None:
        g = self.groups.get(group_key)
        if g is None:
            return
        g.members.discard(pod_key)
        g.bound.discard(pod_key)
        g.waiting.pop(pod_key, None)
        g.failed.discard(pod_key)

    # ---------------------------------------------------------------- the cycle

    def pre_enqueue(self, group_key: str) -> str | None:
        """None if the member may be queued, else why not: upstream's words
        (gangscheduling.go, PreEnqueue) for a missing PodGroup and a missing quorum. Upstream
        logs them; it writes no event or condition for a pod held at PreEnqueue."""
        g = self.groups.get(group_key)
        name = group_key.partition("/")[2]
        if g is None or g.podgroup is None:
            return f'waiting for pod\'s pod group "{name}" to appear in scheduling queue'
        if g.policy is None:  # this project's own wait (the 1.36 template reference)
            return f'waiting for the Workload of PodGroup "{name}" to be created'
        if g.policy.gang and len(g.members) < g.policy.min_count:
            return "waiting for minCount pods from a gang to appear in scheduling queue"
        return None

    def set_domain(self, group_key: str, domain: str | None, nodes: frozenset[str]) -> None:
        g = self.group(group_key)
        g.domain, g.domain_nodes = domain, nodes

    def permit(self, group_key: str, pod_key: str, node: str, now: float) -> tuple[bool, list[str]]:
        """The member reserved ``node``. Returns (allowed now, waiting siblings to allow)."""
        g = self.group(group_key)
        if g.policy is None or not g.policy.gang:
            g.bound.add(pod_key)
            return True, []
        if not g.waiting:
            g.deadline = now + self.timeout
        g.waiting[pod_key] = node
        if len(g.bound) + len(g.waiting) < g.policy.min_count:
            return False, []
        siblings = [k for k in g.waiting if k != pod_key]
        g.bound.update(g.waiting)
        g.waiting.clear()
        g.failed.clear()  # the attempt is over: the members that failed in it are retried alone
        return True, siblings

    def failed_alone(self, group_key: str, pod_key: str) -> None:
        """A member found no node, but the group's attempt goes on without it: it is not
        counted among the members still to try until the attempt ends."""
        self.group(group_key).failed.add(pod_key)

    def fail(self, group_key: str) -> list[str]:
        """A member failed: the group gives up this attempt. Returns the waiting members to
        reject; the topology domain is chosen afresh next time."""
        g = self.groups.get(group_key)
        if g is None:
            return []
        rejected = list(g.waiting)
        g.waiting.clear()
        g.failed.clear()
        g.domain, g.domain_nodes = None, frozenset()
        return rejected

    def unreserved(self, group_key: str, pod_key: str) -> None:
        """A member's reservation was released (after rejection, or a failed bind)."""
        g = self.groups.get(group_key)
        if g is None:
            return
        g.waiting.pop(pod_key, None)
        g.bound.discard(pod_key)

    def expired(self, now: float) -> list[tuple[str, list[str]]]:
        """Groups whose waiting members timed out: (group key, members to reject)."""
        out = []
        for g in self.groups.values():
            if g.waiting and g.deadline <= now:
                out.append((g.key, self.fail(g.key)))
        return out
