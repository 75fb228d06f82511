"""The resource metrics API, ``metrics.k8s.io/v1beta1``: what metrics-server serves
in a real cluster (as an aggregated API) and ``kubectl top`` and the
HorizontalPodAutoscaler read.

``PodMetrics`` (namespaced, ``pods``) and ``NodeMetrics`` (cluster-scoped,
``nodes``) are answered, never stored: get and list, with label selectors (on
the pods' and nodes' labels) and, for pods, field selectors; no watch, as
metrics-server. The numbers are the simulated containers' declared usage
(``nodes/usage.py``) read from the pods and nodes the server holds, at the
moment of the request.

Which objects have metrics follows what a kubelet reports: pods bound and
Running (not being deleted), each of their containers; nodes whose ``Ready``
condition is True, using what their measured pods use.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from controlplane.nodes.usage import NOTHING, Usage, container_usages, measured, pod_usage

from ..registry.types import ResourceType
from .errors import ApiError
from .params import flag
from .reads import Listed

__all__ = ["GROUP", "VERSION", "ResourceMetrics"]

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
WINDOW = "15s"  # metrics-server's default resolution: the span its CPU rates are taken over
# what a whole-cluster node aggregate may be reused for: `kubectl top nodes` in a loop (or a load
# test) then costs one walk of the running pods a second, not one per request
NODE_USAGE_TTL = 1.0


ListFn = Callable[[ResourceType, "str | None", dict[str, str]], Awaitable[Listed]]
GetFn = Callable[[ResourceType, "str | None", str], Awaitable[bytes]]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready(node: dict[str, Any]) -> bool:
    if (node.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or () if isinstance(c, dict))


class ResourceMetrics:
    """Answers ``metrics.k8s.io`` reads from the server's own pods and nodes (``list``/``get``:
    the API server's reads, through the watch cache)."""

    def __init__(self, pods: ResourceType, nodes: ResourceType, list_: ListFn, get: GetFn) -> None:
        self.pods = pods
        self.nodes = nodes
        self._list = list_
        self._get = get
        self._node_usage: tuple[float, dict[str, Usage]] = (-NODE_USAGE_TTL, {})

    async def answer(self, rtype: ResourceType, namespace: str | None, name: str | None,
                     query: dict[str, str]) -> dict[str, Any]:
        if flag(query, "watch"):
            raise ApiError.method_not_allowed()
        if rtype.plural == "pods":
            return await self._pod_metrics(namespace, name, query)
        return await self._node_metrics(name, query)

    async def _measured(self, rtype: ResourceType, namespace: str | None, name: str,
                        has_metrics: Callable[[dict[str, Any]], bool], kind: str, shown: str) -> dict[str, Any]:
        """The pod or node ``name``, if it has metrics; else metrics-server's 404."""
        try:
            obj: dict[str, Any] | None = orjson.loads(await self._get(rtype, namespace, name))
        except ApiError as e:
            if e.code != 404:
                raise
            obj = None
        if obj is None or not has_metrics(obj):
            raise ApiError(404, "NotFound", f'{kind}.{GROUP} "{shown}" not found',
                           {"name": name, "group": GROUP, "kind": rtype.plural})
        return obj

    # -- pods
    async def _pod_metrics(self, namespace: str | None, name: str | None, query: dict[str, str]) -> dict[str, Any]:
        now = _now()
        if name is not None:
            pod = await self._measured(self.pods, namespace, name, measured, "podmetrics", f"{namespace}/{name}")
            return self._pod_object(pod, now)
        listed = await self._list(self.pods, namespace, _selectors(query))
        items = []
        for raw in listed.items:
            pod = orjson.loads(raw)
            if measured(pod):
                items.append(self._pod_object(pod, now))
        return {"kind": "PodMetricsList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}

    @staticmethod
    def _pod_object(pod: dict[str, Any], now: str) -> dict[str, Any]:
        meta = pod.get("metadata") or {}
        out_meta: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace"),
                                    "creationTimestamp": now}
        if meta.get("labels"):
            out_meta["labels"] = meta["labels"]
        return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": out_meta,
                "timestamp": now, "window": WINDOW,
                "containers": [{"name": n, "usage": u.quantities()} for n, u in container_usages(pod)]}

    # -- nodes
    async def _node_metrics(self, name: str | None, query: dict[str, str]) -> dict[str, Any]:
        now = _now()
        if name is not None:
            node = await self._measured(self.nodes, None, name, _ready, "nodemetrics", name)
            listed = await self._list(self.pods, None, {"fieldSelector": f"spec.nodeName={name}"})
            usage = NOTHING
            for raw in listed.items:
                pod = orjson.loads(raw)
                if measured(pod):
                    usage = usage + pod_usage(pod)
            return self._node_object(node, usage, now)
        if "fieldSelector" in query:
            raise ApiError.bad_request("field selectors are not supported for node metrics")
        listed = await self._list(self.nodes, None, _selectors(query))
        nodes = [orjson.loads(raw) for raw in listed.items]
        usage_by_node = await self._usage_by_node()
        items = [self._node_object(n, usage_by_node.get(n["metadata"]["name"], NOTHING), now)
                 for n in nodes if _ready(n)]
        return {"kind": "NodeMetricsList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}

    async def _usage_by_node(self) -> dict[str, Usage]:
        at, held = self._node_usage
        if time.monotonic() - at < NODE_USAGE_TTL:
            return held
        listed = await self._list(self.pods, None, {"fieldSelector": "status.phase=Running"})
        usage: dict[str, Usage] = {}
        for raw in listed.items:
            pod = orjson.loads(raw)
            if measured(pod):
                node = pod["spec"]["nodeName"]
                usage[node] = usage.get(node, NOTHING) + pod_usage(pod)
        self._node_usage = (time.monotonic(), usage)
        return usage

    @staticmethod
    def _node_object(node: dict[str, Any], usage: Usage, now: str) -> dict[str, Any]:
        meta = node.get("metadata") or {}
        out_meta: dict[str, Any] = {"name": meta.get("name"), "creationTimestamp": now}
        if meta.get("labels"):
            out_meta["labels"] = meta["labels"]
        return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": out_meta,
                "timestamp": now, "window": WINDOW, "usage": usage.quantities()}


def _selectors(query: dict[str, str]) -> dict[str, str]:
    """The list query passed on to the pods' or nodes' list: the selectors only (metrics have
    no resourceVersion and are never paginated)."""
    return {k: query[k] for k in ("labelSelector", "fieldSelector") if query.get(k)}
