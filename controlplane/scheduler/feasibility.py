"""Which nodes could a pod go on, by the Filter plugins, without running the scheduler.

For the autoscaler: given a pending pod and candidate nodes (existing ones, or
templates of nodes it might add), ask the same PreFilter and Filter plugins the
scheduler runs::

    from controlplane.scheduler.feasibility import feasible_nodes

    fits, why_not = feasible_nodes(pod, [template_node], pods_on={"n1": [running_pod]})
    # fits: names of the nodes the pod could go on
    # why_not: name -> reasons, as in FailedScheduling ("Insufficient cpu", ...)

Nodes are API objects (dicts), ``status.allocatable`` included; ``pods_on``
maps a node's name to the pods already on it (their requests count against
it; their labels and affinity against PodTopologySpread and InterPodAffinity,
which see only the nodes given). Gang and DRA plugins are left out: they need
the scheduler's informers. Inside a running scheduler, use
``scheduler.profile().feasible_nodes(PodInfo(pod), node_infos)`` over its own
cache instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from .cache import Cache
from .nodeinfo import NodeInfo, PodInfo
from .plugins import DEFAULT_PROFILE, PluginConfig
from .profile import Profile

__all__ = ["feasible_nodes"]

_NEEDS_SCHEDULER = {"GangScheduling", "DefaultPreemption", "DynamicResources"}


class _StaticHandle:
    """A Handle over a fixed set of nodes: enough for the Filter plugins."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._profile: Profile | None = None
        self.client: Any = None

    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._cache.nodes

    def lister(self, resource: str) -> Mapping[str, Any]:
        return {}

    def add_event_handler(self, resource: str, on_add: Callable[[Any], None], on_update: Callable[[Any, Any], None],
                          on_delete: Callable[[Any], None]) -> None:
        pass

    def profile(self) -> Profile:
        assert self._profile is not None
        return self._profile

    def allow(self, pod_key: str, plugin: str) -> None:
        pass

    def reject(self, pod_key: str, plugin: str, message: str) -> None:
        pass

    def waiting_pods(self) -> Iterable[str]:
        return ()

    def record_event(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal", *,
                     action: str, related: Mapping[str, Any] | None = None) -> None:
        pass

    def spawn(self, coro: Awaitable[None]) -> None:
        close = getattr(coro, "close", None)
        if close is not None:
            close()


def feasible_nodes(pod: dict[str, Any], nodes: Sequence[dict[str, Any]],
                   pods_on: Mapping[str, Sequence[dict[str, Any]]] | None = None,
                   profile: Sequence[PluginConfig] | None = None) -> tuple[list[str], dict[str, list[str]]]:
    """(names of the nodes ``pod`` fits on, {node name: reasons it does not}); a PreFilter
    rejection (nothing could fit) is reported under the name ``""``."""
    cache = Cache()
    for n in nodes:
        cache.add_or_update_node(n)
    for name, pods in (pods_on or {}).items():
        for p in pods:
            info = PodInfo(p)
            info.node_name = name
            cache.add_pod(info)
    handle = _StaticHandle(cache)
    config = [c for c in (profile if profile is not None else DEFAULT_PROFILE) if c.name not in _NEEDS_SCHEDULER]
    prof = Profile.build(handle, config=config)
    handle._profile = prof
    ok, failed = prof.feasible_nodes(PodInfo(pod), list(cache.order))
    return [n.name for n in ok], {k: list(s.reasons) for k, s in failed.items()}
