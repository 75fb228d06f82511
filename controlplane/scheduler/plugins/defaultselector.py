"""The selector PodTopologySpread's default constraints count pods with (upstream's
``helper.DefaultSelector``).

For a pod without ``topologySpreadConstraints``, the selector is the merge of the
selectors of the Services in its namespace that select it, and of the selector of
its controller (the owner reference with ``controller: true``) when that is a
ReplicationController, ReplicaSet or StatefulSet that exists; an empty result
means no default constraints. Pods of a Deployment are counted with their
ReplicaSet's selector, so its replicas spread over nodes and zones::

    sel = DefaultSelectors()
    sel.set("replicasets", rs)   # (the scheduler's informers call these)
    sel.for_pod(pod)             # (('app', 'In', ('web',)), ('pod-template-hash', 'In', ('5d4f',)))

Only the selectors are held, not the objects: a Service's selector indexed by its
first label, so a pod finds the Services selecting it by its own labels, not by a
walk over its namespace's Services.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..framework import Handle, WatchedResource
from ..nodeinfo import PodInfo
from ..podcounts import Requirement, Selector, selector_from_set, selector_of

__all__ = ["DefaultSelectors"]

# The controllers whose selector counts, by (apiVersion, kind) of the owner reference, and their plural.
_CONTROLLERS = {("v1", "ReplicationController"): "replicationcontrollers",
                ("apps/v1", "ReplicaSet"): "replicasets",
                ("apps/v1", "StatefulSet"): "statefulsets"}

Items = tuple[tuple[str, str], ...]


def _name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


class DefaultSelectors:
    RESOURCES = (WatchedResource("", "v1", "services"), WatchedResource("", "v1", "replicationcontrollers"),
                 WatchedResource("apps", "v1", "replicasets"), WatchedResource("apps", "v1", "statefulsets"))

    def __init__(self) -> None:
        # namespace -> (first label of the selector) -> service name -> its selector's labels
        self._services: dict[str, dict[tuple[str, str], dict[str, Items]]] = {}
        self._service_key: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, name) -> where it is indexed
        # (plural, namespace, name) -> the controller's selector (None: it selects nothing)
        self._controllers: dict[tuple[str, str, str], Selector | None] = {}

    def watch(self, handle: Handle) -> None:
        """Keep up with the scheduler's informers of ``RESOURCES``."""
        for r in self.RESOURCES:
            self._watch(handle, r.plural)

    def _watch(self, handle: Handle, plural: str) -> None:
        def add(obj: Mapping[str, Any]) -> None:
            self.set(plural, obj)

        def update(_: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
            self.set(plural, obj)

        def delete(obj: Mapping[str, Any]) -> None:
            self.remove(plural, obj)

        handle.add_event_handler(plural, add, update, delete)

    def set(self, plural: str, obj: Mapping[str, Any]) -> None:
        ns, name = _name(obj)
        spec = obj.get("spec") or {}
        if plural == "services":
            self._remove_service(ns, name)
            items = tuple(sorted((spec.get("selector") or {}).items()))
            if items:  # a Service without a selector selects no pod
                self._services.setdefault(ns, {}).setdefault(items[0], {})[name] = items
                self._service_key[(ns, name)] = items[0]
        elif plural == "replicationcontrollers":
            sel = spec.get("selector")
            self._controllers[(plural, ns, name)] = selector_from_set(sel) if sel is not None else None
        else:
            self._controllers[(plural, ns, name)] = selector_of(spec.get("selector"))

    def remove(self, plural: str, obj: Mapping[str, Any]) -> None:
        ns, name = _name(obj)
        if plural == "services":
            self._remove_service(ns, name)
        else:
            self._controllers.pop((plural, ns, name), None)

    def _remove_service(self, ns: str, name: str) -> None:
        first = self._service_key.pop((ns, name), None)
        if first is None:
            return
        in_ns = self._services[ns]
        named = in_ns[first]
        del named[name]
        if not named:
            del in_ns[first]
            if not in_ns:
                del self._services[ns]

    def for_pod(self, pod: PodInfo) -> Selector | None:
        """The default constraints' selector for ``pod`` (pending: its whole object is held);
        None when it is empty (no Service selects the pod, no known controller)."""
        merged: dict[str, str] = {}
        labels = pod.labels
        services = self._services.get(pod.namespace)
        if services is not None:
            for pair in labels.items():
                for items in services.get(pair, {}).values():
                    if all(labels.get(k) == v for k, v in items):
                        merged.update(items)
        extra: tuple[Requirement, ...] = ()
        owner = _controller_of(pod.obj)
        if owner is not None:
            plural = _CONTROLLERS.get((owner.get("apiVersion", ""), owner.get("kind", "")))
            key = (plural or "", pod.namespace, owner.get("name") or "")
            if plural is not None and key in self._controllers:
                sel = self._controllers[key]
                if plural == "replicationcontrollers":
                    if sel is not None:  # its map merged into the Services' labels
                        merged.update((k, vs[0]) for k, _, vs in sel)
                elif sel is not None:  # its requirements added beside them
                    extra = sel
        if not merged and not extra:
            return None
        return tuple(sorted(set(selector_from_set(merged)) | set(extra)))


def _controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None
