"""``Fits`` by the scheduler's own filter plugins (``controlplane.scheduler``).

``SchedulerFits`` answers with ``resource_fit`` first (requirements, taints,
requests and DRA device counts: what Karpenter's simulation decides itself,
and all a node that does not exist yet can be judged by), then, for a real
node, with the scheduler profile's PreFilter and Filter plugins
(``Profile.feasible_nodes``): node affinity, taints, pod topology spread,
inter-pod affinity, node resources (those ``scheduler.feasibility`` runs; it
builds a cache per call, this keeps one handle per simulation). The plugins
see the cluster through a ``Handle`` over the autoscaler's informers; their
node view (``NodeInfo``s with the bound pods) is rebuilt once per simulation
(``refresh``).

A hypothetical node is left to ``resource_fit``: its labels are requirements
(a zone may still be any of three), which a Node object cannot express.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..client import Client
from ..scheduler.feasibility import _NEEDS_SCHEDULER
from ..scheduler.nodeinfo import NodeInfo, PodInfo
from ..scheduler.plugins import DEFAULT_PROFILE
from ..scheduler.profile import Profile
from .simulation import PodDemand, SimNode, resource_fit
from .state import ClusterState, is_reschedulable

__all__ = ["SchedulerFits"]


class _Handle:
    """The framework's Handle, over the autoscaler's state (no event handlers, no Permit)."""

    def __init__(self, client: Client, state: ClusterState) -> None:
        self._client = client
        self._state = state
        self._nodes: dict[str, NodeInfo] = {}
        self._profile: Profile | None = None

    @property
    def client(self) -> Client:
        return self._client

    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    def lister(self, resource: str) -> Mapping[str, Any]:
        st = self._state
        return {"pods": st.pods, "nodes": st.nodes, "resourceslices": st.slices, "resourceclaims": st.claims,
                "resourceclaimtemplates": st.templates}.get(resource, {})

    def add_event_handler(self, resource: str, on_add: Callable[[Any], None],
                          on_update: Callable[[Any, Any], None], on_delete: Callable[[Any], None]) -> None:
        pass  # the autoscaler re-simulates from its own state every batch

    def profile(self) -> Profile:
        assert self._profile is not None
        return self._profile

    def allow(self, pod_key: str, plugin: str) -> None:
        pass

    def refresh(self) -> None:
        infos: dict[str, NodeInfo] = {}
        for name, node in self._state.nodes.items():
            info = NodeInfo(name, node)
            for pod in self._state.pods_of(name):
                if is_reschedulable(pod):
                    info.add_pod(PodInfo(pod))
            infos[name] = info
        self._nodes = infos


class SchedulerFits:
    def __init__(self, client: Client, state: ClusterState) -> None:
        self.handle = _Handle(client, state)
        # the Filter plugins that need a running scheduler's informers are left out, as in
        # scheduler.feasibility (gangs, preemption; DRA devices are counted by resource_fit)
        config = [pc for pc in DEFAULT_PROFILE if pc.name not in _NEEDS_SCHEDULER]
        self.profile = Profile.build(self.handle, config=config)  # type: ignore[arg-type]
        self.handle._profile = self.profile
        self._pods: dict[str, tuple[str, PodInfo]] = {}

    def refresh(self) -> None:
        """Take the cluster as it is now (call before each simulation)."""
        self.handle.refresh()

    def _pod_info(self, pod: PodDemand) -> PodInfo:
        rv = (pod.obj.get("metadata") or {}).get("resourceVersion", "")
        cached = self._pods.get(pod.key)
        if cached is None or cached[0] != rv:
            obj = pod.obj
            if (obj.get("spec") or {}).get("nodeName"):
                # a bound pod being moved (consolidation) is simulated as if it were pending again
                obj = {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"}}
            cached = (rv, PodInfo(obj))
            self._pods[pod.key] = cached
        return cached[1]

    def __call__(self, pod: PodDemand, node: SimNode) -> bool:
        if not resource_fit(pod, node):
            return False
        if node.node is None:
            return True
        info = self.handle.nodes().get(node.name)
        if info is None:
            return True
        feasible, _ = self.profile.feasible_nodes(self._pod_info(pod), [info])
        return bool(feasible)
