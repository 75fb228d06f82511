"""DefaultPreemption (PostFilter): make room for a pod by evicting lower-priority pods.

For each node the pod was rejected from with UNSCHEDULABLE (not
UNSCHEDULABLE_AND_UNRESOLVABLE: evicting cannot fix a taint or a selector),
remove every pod of lower priority, check the pod then passes the Filter
plugins, and put victims back, highest priority first, while it still passes:
what remains are the victims. Among candidate nodes pick, as upstream, the one
whose highest-priority victim is lowest, then the smallest sum of victim
priorities, then the fewest victims. The victims are deleted through the API
and the pod's ``status.nominatedNodeName`` is set; the pod itself is retried
when the deletions arrive (pod DELETE events).

``select_victims`` is the pure part (tested alone); ``post_filter`` adds the writes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..framework import Code, CycleState, Handle, PostFilterResult, Status
from ..nodeinfo import NodeInfo, PodInfo

if TYPE_CHECKING:
    from ..profile import Profile

__all__ = ["DefaultPreemption", "select_victims"]

NAME = "DefaultPreemption"
log = logging.getLogger("controlplane.scheduler")


def _victims_on(profile: Profile, state: CycleState, pod: PodInfo, node: NodeInfo) -> list[PodInfo] | None:
    lower = [p for p in node.pods.values() if p.priority < pod.priority]
    if not lower:
        return None
    view = node.clone()
    for p in lower:
        view.remove_pod(p)
    filters = profile.filters_for(state)
    if profile.run_filters(filters, state, pod, view) is not None:
        return None
    victims = []
    for p in sorted(lower, key=lambda p: (-p.priority, p.timestamp)):  # try to keep the most important
        view.add_pod(p)
        if profile.run_filters(filters, state, pod, view) is not None:
            view.remove_pod(p)
            victims.append(p)
    return victims


def select_victims(profile: Profile, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                   statuses: Mapping[str, Status]) -> tuple[NodeInfo, list[PodInfo]] | None:
    """The node to nominate and the pods to evict there, or None if preemption cannot help."""
    best: tuple[tuple[int, int, int], NodeInfo, list[PodInfo]] | None = None
    for node in nodes:
        s = statuses.get(node.name)
        if s is None or s.code != Code.UNSCHEDULABLE:
            continue
        victims = _victims_on(profile, state, pod, node)
        if not victims:
            continue
        rank = (max(v.priority for v in victims), sum(v.priority for v in victims), len(victims))
        if best is None or rank < best[0]:
            best = (rank, node, victims)
    return None if best is None else (best[1], best[2])


class DefaultPreemption:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> DefaultPreemption:
        return cls(handle)

    def name(self) -> str:
        return NAME

    async def post_filter(self, state: CycleState, pod: PodInfo,
                          statuses: Mapping[str, Status]) -> tuple[PostFilterResult | None, Status | None]:
        policy = (pod.obj.get("spec") or {}).get("preemptionPolicy")
        if policy == "Never":
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "not eligible due to preemptionPolicy=Never.",
                                plugin=NAME)
        if pod.group:  # evicting for one member of a gang does not place the gang
            return None, Status(Code.UNSCHEDULABLE, "preemption is not attempted for gang members", plugin=NAME)
        profile: Profile = self.handle.profile()
        nodes = [self.handle.nodes()[n] for n in statuses if n in self.handle.nodes()]
        chosen = select_victims(profile, state, pod, nodes, statuses)
        if chosen is None:
            n = len(statuses)
            return None, Status(Code.UNSCHEDULABLE,
                                f"0/{n} nodes are available: {n} No preemption victims found for incoming pod.",
                                plugin=NAME)
        node, victims = chosen
        from ...client import ApiError, resource_path

        for v in victims:
            body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
            if v.uid:
                body["preconditions"] = {"uid": v.uid}
            try:
                await self.handle.client.delete(resource_path("", "v1", "pods", v.namespace, v.name), body)
            except ApiError as e:
                if e.code != 404:
                    log.warning("preemption: could not delete %s: %s", v.key, e)
            except (TimeoutError, OSError) as e:
                log.warning("preemption: could not delete %s: %s", v.key, e)
            self.handle.record_event(v.obj, "Preempted", f"Preempted by pod {pod.uid} on node {node.name}")
        return PostFilterResult(node.name), None
