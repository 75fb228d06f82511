"""A Handle without a server: nodes in memory, permit decisions recorded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from controlplane.scheduler.cache import NodeMap
from controlplane.scheduler.framework import Code, Status
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo
from controlplane.scheduler.plugins import PluginConfig
from controlplane.scheduler.profile import Profile

from .helpers import node


class FakeHandle:
    def __init__(self, nodes: Iterable[dict[str, Any]] = ()) -> None:
        self._nodes: dict[str, NodeInfo] = NodeMap()
        for n in nodes:
            self.add_node(n)
        self.allowed: list[str] = []
        self.rejected: list[tuple[str, str]] = []
        self.events: list[tuple[str, str]] = []
        self.spawned: list[Awaitable[None]] = []
        self._profile: Profile | None = None
        self.client: Any = None
        self.writer: Any = None  # the Scheduler's Writer, where a test gives one

    def add_node(self, obj: dict[str, Any]) -> NodeInfo:
        ni = NodeInfo(obj["metadata"]["name"], obj)
        self._nodes[ni.name] = ni
        self._nodes.version += 1  # type: ignore[attr-defined]
        return ni

    def bind_pod(self, obj: dict[str, Any], node_name: str) -> PodInfo:
        p = PodInfo(obj)
        self._nodes[node_name].add_pod(p)
        if p.affinity.get("podAffinity") or p.affinity.get("podAntiAffinity"):
            self._nodes.with_affinity += 1  # type: ignore[attr-defined]
        return p

    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    def lister(self, resource: str) -> Mapping[str, Any]:
        return {}

    def add_event_handler(self, resource: str, on_add: Callable[[Any], None], on_update: Callable[[Any, Any], None],
                          on_delete: Callable[[Any], None]) -> None:
        pass

    def profile(self) -> Profile:
        assert self._profile is not None
        return self._profile

    def allow(self, pod_key: str, plugin: str) -> None:
        self.allowed.append(pod_key)

    def reject(self, pod_key: str, plugin: str, message: str) -> None:
        self.rejected.append((pod_key, message))

    def waiting_pods(self) -> Iterable[str]:
        return []

    def record_event(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal", *,
                     action: str, related: Mapping[str, Any] | None = None) -> None:
        self.events.append((reason, message))

    def spawn(self, coro: Awaitable[None]) -> None:
        close = getattr(coro, "close", None)
        if close is not None:
            close()  # no server to write to
        self.spawned.append(coro)


def build(nodes: Iterable[dict[str, Any]] = (), config: Iterable[PluginConfig] | None = None,
          percentage: int = 0) -> tuple[FakeHandle, Profile]:
    h = FakeHandle(nodes)
    h._profile = Profile.build(h, config=tuple(config) if config is not None else None, percentage=percentage)
    return h, h._profile


def nodes(n: int, **kw: Any) -> list[dict[str, Any]]:
    return [node(f"n{i}", **kw) for i in range(n)]


def rejected(s: Status | None, code: Code | None = None) -> bool:
    return s is not None and (code is None or s.code == code)
