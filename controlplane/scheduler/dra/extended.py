"""Extended resources backed by DRA (KEP-5004, ``DRAExtendedResource``): a pod asking
``limits: {example.com/gpu: 1}`` gets a device of the DeviceClass whose
``spec.extendedResourceName`` is ``example.com/gpu``, or of class ``c`` for
``deviceclass.resource.kubernetes.io/c`` (every class's implicit name), on a node
that does not offer the resource itself (no device plugin: no allocatable of it).

The scheduler allocates the devices through a claim of its own, held in memory
(``extended_claim``) until PreBind creates it in the API: ``<pod>-extended-resources-xxxxx``,
annotated ``resource.kubernetes.io/extended-resource-claim: "true"``, owned by the
pod, with one request per container and resource, named as upstream's
``container-<i>-request-<j>`` (``i`` over init containers then containers, ``j`` the
resource's place among the container's sorted request names). The pod's
``status.extendedResourceClaimStatus`` maps them back (``request_mappings``).

    >>> names = ExtendedNames()
    >>> names.update([{"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}])
    >>> names.class_for("example.com/gpu"), names.class_for("deviceclass.resource.kubernetes.io/gpu")
    ('gpu', 'gpu')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ANNOTATION", "IMPLICIT_PREFIX", "ExtendedNames", "ExtendedRequest", "extended_requests",
           "extended_claim", "request_mappings"]

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


class ExtendedNames:
    """Which DeviceClass backs an extended resource name. Two classes naming the same
    resource: the one created last wins (then the greater name), as upstream's mapping."""

    def __init__(self) -> None:
        self._explicit: dict[str, str] = {}
        self._classes: frozenset[str] = frozenset()

    def update(self, classes: Iterable[Mapping[str, Any]]) -> None:
        best: dict[str, tuple[str, str]] = {}
        names = set()
        for cls in classes:
            meta = cls.get("metadata") or {}
            name = meta.get("name", "")
            names.add(name)
            resource = (cls.get("spec") or {}).get("extendedResourceName")
            if resource:
                rank = (meta.get("creationTimestamp") or "", name)
                if resource not in best or rank > best[resource]:
                    best[resource] = rank
        self._explicit = {r: rank[1] for r, rank in best.items()}
        self._classes = frozenset(names)

    def class_for(self, resource: str) -> str | None:
        if resource.startswith(IMPLICIT_PREFIX):
            name = resource[len(IMPLICIT_PREFIX):]
            return name if name in self._classes else None
        return self._explicit.get(resource)

    def __bool__(self) -> bool:
        return bool(self._classes)


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    container: str
    resource: str
    request: str  # container-<i>-request-<j>
    device_class: str
    count: int


def _count(quantity: Any) -> int:
    try:
        return int(str(quantity))
    except ValueError:
        return 0  # (validation keeps extended resources whole numbers)


def extended_requests(pod: Mapping[str, Any], names: ExtendedNames) -> list[ExtendedRequest]:
    """The pod's requests of resources a DeviceClass backs, in upstream's request names."""
    if not names:
        return []
    spec = pod.get("spec") or {}
    out = []
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    for i, c in enumerate(containers):
        res = c.get("resources") or {}
        requests = {**(res.get("limits") or {}), **(res.get("requests") or {})}  # limits default requests
        for j, resource in enumerate(sorted(requests)):
            cls = names.class_for(resource)
            count = _count(requests[resource]) if cls else 0
            if cls and count:
                out.append(ExtendedRequest(c.get("name", ""), resource, f"container-{i}-request-{j}", cls, count))
    return out


def extended_claim(pod: Mapping[str, Any], requests: Iterable[ExtendedRequest]) -> dict[str, Any]:
    """The claim held in memory for ``requests`` (its name and uid stand in until PreBind
    creates it; the annotation marks it)."""
    meta = pod.get("metadata") or {}
    name = f"{meta.get('name', '')}-extended-resources"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": meta.get("namespace", ""),
                         "uid": f"{meta.get('uid', '')}-extended-resources", "annotations": {ANNOTATION: "true"}},
            "spec": {"devices": {"requests": [
                {"name": r.request, "exactly": {"deviceClassName": r.device_class, "allocationMode": "ExactCount",
                                                "count": r.count}} for r in requests]}}}


def request_mappings(requests: Iterable[ExtendedRequest]) -> list[dict[str, str]]:
    return [{"containerName": r.container, "resourceName": r.resource, "requestName": r.request} for r in requests]
