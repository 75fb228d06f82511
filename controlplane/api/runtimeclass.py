"""RuntimeClass admission: a pod that names a RuntimeClass gets its overhead and scheduling.

As upstream's plugin, at create: a pod whose ``runtimeClassName`` names no RuntimeClass
is refused (403 ``pod rejected: RuntimeClass "x" not found``); the class's
``overhead.podFixed`` becomes the pod's ``spec.overhead`` (a pod that states another
is refused, as is a pod that states one when it names no class or a class without an
overhead); its ``scheduling.nodeSelector`` is merged into the pod's (a conflicting
value is refused) and its ``scheduling.tolerations`` are added. The scheduler counts
the overhead (``scheduler/nodeinfo.py``). RuntimeClasses are memoised per watch-cache
generation, as the quotas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry.types import ResourceType
from ..registry.validation import same_once_stored, shape_at, shape_of
from .errors import ApiError
from .namespaced import NamespacedObjects

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["RuntimeClassAdmission"]

Obj = dict[str, Any]


def _refused(name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: pod rejected: {message}',
                    {"name": name, "kind": "pods"})


class RuntimeClassAdmission:
    def __init__(self, kube: KubeApi, classes: ResourceType) -> None:
        self.classes = NamespacedObjects(kube, classes)

    async def admit(self, pod: Obj) -> None:
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        name = (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get("generateName", "")
        rc = None
        if spec.get("runtimeClassName"):
            wanted = spec["runtimeClassName"]
            rc = next((c for c in await self.classes.of("") if (c.get("metadata") or {}).get("name") == wanted),
                      None)
            if rc is None:
                raise _refused(name, f'RuntimeClass "{wanted}" not found')
        overhead = rc.get("overhead") if rc is not None else None
        if isinstance(overhead, dict):
            fixed = overhead.get("podFixed") or {}
            # (compared as Go values, as upstream's Semantic.DeepEqual: a quantity by its value)
            if spec.get("overhead") and spec["overhead"] != fixed and not same_once_stored(
                    spec["overhead"], fixed, shape_at(shape_of("", "v1", "Pod"), "spec", "overhead")):
                raise _refused(name, "Pod's Overhead doesn't match RuntimeClass's defined Overhead")
            if fixed:
                spec["overhead"] = dict(fixed)
        scheduling = (rc.get("scheduling") if rc is not None else None) or {}
        selector = scheduling.get("nodeSelector") or {}
        if selector:
            mine = spec.setdefault("nodeSelector", {})
            for key, value in selector.items():
                if key in mine and mine[key] != value:
                    raise _refused(name, f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                                         f"pod.spec.nodeSelector[{key}] = {mine[key]}")
                mine[key] = value
        extra = scheduling.get("tolerations") or []
        if extra:
            tolerations = spec.setdefault("tolerations", [])
            for toleration in extra:
                if toleration not in tolerations:
                    tolerations.append(toleration)
        if not isinstance(overhead, dict) and spec.get("overhead"):
            # (upstream's validating half, validateOverhead: an overhead comes only from a class
            # that defines one, whether the pod names no class or one without an overhead)
            raise _refused(name, "Pod Overhead set without corresponding RuntimeClass defined Overhead")
