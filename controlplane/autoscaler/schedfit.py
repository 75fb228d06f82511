"""``Fits`` by the scheduler's own filter plugins (``controlplane.scheduler``).

``SchedulerFits`` answers with ``resource_fit`` first (requirements, taints,
requests, DRA devices counted and allocated by the scheduler's allocator: what
Karpenter's simulation decides itself, and all a node that does not exist yet
can be judged by), then, for a real
node, with the scheduler profile's PreFilter and Filter plugins
(``Profile.feasible_nodes``): node affinity, taints, pod topology spread,
inter-pod affinity, node resources (those ``scheduler.feasibility`` runs; it
builds a cache per call, this keeps one handle per simulation). The plugins
see the cluster through a ``Handle`` over the autoscaler's informers; their
node view (``NodeInfo``s with the bound pods) is rebuilt at most once per
simulation (``refresh``), when a plugin first reads it, and only for the nodes
that changed.

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
from .state import ClusterState, as_considered

__all__ = ["SchedulerFits"]


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class _Handle:
    """The framework's Handle, over the autoscaler's state (no event handlers, no Permit)."""

    def __init__(self, client: Client, state: ClusterState) -> None:
        self._client = client
        self._state = state
        self._nodes: dict[str, NodeInfo] = {}
        # node -> (the versions of the Node and its pods it was built from, the NodeInfo)
        self._built: dict[str, tuple[tuple[str, ...], NodeInfo]] = {}
        self._pod_infos: dict[str, tuple[str, PodInfo]] = {}  # pod key -> (resourceVersion, PodInfo)
        self._stale = False  # refresh() was called since the view was built
        self._profile: Profile | None = None

    @property
    def client(self) -> Client:
        return self._client

    def nodes(self) -> Mapping[str, NodeInfo]:
        if self._stale:
            self._rebuild()
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

    def dra_backed(self, resource: str) -> bool:
        """Whether a DeviceClass backs an extended resource (NodeResourcesFit leaves it to DRA on
        a node without it; the simulation counts it as devices)."""
        return self._state.device_classes.backing(resource) is not None

    def allow(self, pod_key: str, plugin: str) -> None:
        pass

    def refresh(self) -> None:
        """Take the cluster as it is now: the node view is rebuilt when next read (a
        disruption pass with no candidate reads none)."""
        self._stale = True

    def _rebuild(self) -> None:
        """Rebuild the node view from the state. A node's ``NodeInfo`` is kept from the
        last refresh while its Node and its pods are the same versions (the plugins only
        read it), and a pod's ``PodInfo`` while the pod is: refreshing every disruption
        pass then costs a walk over the state, not a parse of every bound pod."""
        infos: dict[str, NodeInfo] = {}
        built: dict[str, tuple[tuple[str, ...], NodeInfo]] = {}
        pod_infos: dict[str, tuple[str, PodInfo]] = {}
        for name, node in self._state.nodes.items():
            # every bound pod not finished, as the scheduler's cache holds them (terminating ones too)
            pods = [*self._state.pods_of(name), *self._state.held_pods_of(name)]
            versions = (_version(node), *(_version(p) for p in pods))
            cached = self._built.get(name)
            if cached is not None and cached[0] == versions:
                info = cached[1]
                for p in pods:
                    k = _key(p)
                    pod_infos[k] = self._pod_infos[k]
            else:
                info = NodeInfo(name, as_considered(node))  # (Karpenter's view of its new nodes' taints)
                for p in pods:
                    k, rv = _key(p), _version(p)
                    known = self._pod_infos.get(k)
                    pod_info = known[1] if known is not None and known[0] == rv else PodInfo(p)
                    pod_infos[k] = (rv, pod_info)
                    info.add_pod(pod_info)
            built[name] = (versions, info)
            infos[name] = info
        self._built, self._pod_infos, self._nodes = built, pod_infos, infos
        self._stale = False


class SchedulerFits:
    def __init__(self, client: Client, state: ClusterState) -> None:
        self.handle = _Handle(client, state)
        # the Filter plugins that need a running scheduler's informers are left out, as in
        # scheduler.feasibility (gangs, preemption; DRA devices are resource_fit's: devices.NodeDevices)
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
