"""A pod's ``resize`` subresource (KEP-1287, in-place pod vertical scaling, GA in 1.35):
the only way to change the resources of a running pod's containers.

An update through it keeps the stored pod but for each container's ``resources`` and
``resizePolicy`` (a regular container's, or a sidecar's: an init container whose
``restartPolicy`` is ``Always``), taken by position, and the pod-level ``resources``
(InPlacePodLevelResourcesVerticalScaling, on since 1.36); the rest of what is sent is ignored,
as upstream's podResizeStrategy drops it (though its validation then refuses a changed
resize policy, comparing each container whole but for cpu and memory). A body whose containers were added, removed,
reordered or renamed is kept whole, so that the validation refuses it. The validation is
upstream's ValidatePodResize, worded as it words it: no static or Windows pods, the QoS
class stays, requests and limits may not be removed (pod-level ones neither, nor the
pod-level ``resources`` once set), only cpu and memory change (at pod level too), a plain
init container's resources not at all; and the result is a valid pod spec. A memory limit
may be lowered or added whatever the resize policy, as since 1.34.
"""

from __future__ import annotations

import copy
from typing import Any

from .causes import Causes, forbidden, invalid
from .podresources import default_pod_level_resources
from .podspec import qos_class
from .podvalidation import pod_spec_causes
from .validation import Shape, same_once_stored, shape_at, shape_of

__all__ = ["resize_causes", "resized_spec"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_CPU_MEMORY = ("cpu", "memory")
_ONLY_CPU_MEMORY = "only cpu and memory resources are mutable"


def resized_spec(old_spec: dict[str, Any], new_spec: Any) -> dict[str, Any]:
    """The spec a resize writes: ``old_spec`` with the containers' resources and resize
    policies of ``new_spec`` (upstream's dropNonResizeUpdates)."""
    new_spec = new_spec if isinstance(new_spec, dict) else {}
    spec = dict(old_spec)
    for key in ("containers", "initContainers"):
        old_list, new_list = old_spec.get(key) or [], new_spec.get(key) or []
        if not isinstance(new_list, list) or len(new_list) != len(old_list):
            return _with_pod_level_of(_with_lists_of(old_spec, new_spec), new_spec)  # for the validation to refuse
    for key in ("containers", "initContainers"):
        if key in old_spec:
            spec[key] = _merged_containers(old_spec[key], new_spec[key])
    return _with_pod_level_of(spec, new_spec)


def _with_pod_level_of(spec: dict[str, Any], new_spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with ``new_spec``'s pod-level ``resources`` (none: none), defaulted as a Pod's
    at create (``default_pod_level_resources``, upstream's SetDefaults_Pod, which its decoding
    of the resize's body, or of the patched pod, runs): from the containers' resources the
    resize leaves them, so a resize that adds pod-level limits requests the containers'
    aggregate cpu and memory, not the limits."""
    spec = {k: v for k, v in spec.items() if k != "resources"}
    if new_spec.get("resources") is not None:
        spec["resources"] = copy.deepcopy(new_spec["resources"])
        default_pod_level_resources(spec)
    return spec


def _with_lists_of(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> dict[str, Any]:
    """``old_spec`` with ``new_spec``'s lists of containers as they are (absent: none)."""
    spec = {k: v for k, v in old_spec.items() if k not in ("containers", "initContainers")}
    for key in ("containers", "initContainers"):
        if new_spec.get(key) is not None:
            spec[key] = copy.deepcopy(new_spec[key])
    return spec


def _merged_containers(old: list[Any], new: list[Any]) -> list[Any]:
    """Each of ``old`` with the resources of ``new``'s at its position (a plain init
    container's too: the validation refuses its change)."""
    merged = []
    for before, after in zip(old, new, strict=True):
        if not isinstance(after, dict) or not isinstance(before, dict) or before.get("name") != after.get("name"):
            return copy.deepcopy(new)  # reordered or renamed: kept, for the validation to refuse
        c = dict(before)
        resources = copy.deepcopy(after.get("resources")) or {}
        _default_requests(resources)
        c["resources"] = resources
        if after.get("resizePolicy") is not None:
            c["resizePolicy"] = copy.deepcopy(after["resizePolicy"])
        else:
            c.pop("resizePolicy", None)
        merged.append(c)
    return merged


def _default_requests(resources: Any) -> None:
    """A limit without a request requests the limit (SetDefaults_Pod, run on every decode)."""
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if isinstance(limits, dict) and limits:
        requests = resources.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, value in limits.items():
                requests.setdefault(name, value)


def resize_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    """The causes of a 422 for the resize of ``old`` into ``new`` (whose spec is
    :func:`resized_spec`'s), as upstream's ValidatePodResize finds them."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if MIRROR_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [forbidden("", "static pods cannot be resized")]
    if (old_spec.get("os") or {}).get("name") == "windows":
        return [forbidden("", "windows pods cannot be resized")]
    causes = pod_spec_causes(new_spec, "spec", pod=True, old=old_spec)
    kept_qos = (old.get("status") or {}).get("qosClass") or qos_class(old_spec)
    if kept_qos != qos_class(new_spec):
        causes.append(invalid("spec", kept_qos, "Pod QOS Class may not change as a result of resizing"))
    if not _resize_supported(old):
        causes.append(forbidden("spec", "Pod running on node without support for resize"))
    if _pod_level_resources(old_spec) or _pod_level_resources(new_spec):
        causes.extend(_pod_level_resize(old_spec.get("resources"), new_spec.get("resources")))
    old_c, new_c = old_spec.get("containers") or [], new_spec.get("containers") or []
    old_i, new_i = old_spec.get("initContainers") or [], new_spec.get("initContainers") or []
    if len(old_c) != len(new_c) or len(old_i) != len(new_i):
        return [*causes, forbidden("spec", _ONLY_CPU_MEMORY)]
    for i, (before, after) in enumerate(zip(old_i, new_i, strict=True)):
        if _is_sidecar(before):
            causes.extend(_container_resize(before, after, f"spec.initContainers[{i}].resources"))
    for i, (before, after) in enumerate(zip(old_c, new_c, strict=True)):
        causes.extend(_container_resize(before, after, f"spec.containers[{i}].resources"))
    container = _pod_spec_shape("containers")
    container = container.items if container is not None else None
    for before, after in zip(old_c, new_c, strict=True):
        if not _same(_without_cpu_memory_change(after, before), before, container):
            causes.append(forbidden("spec", _ONLY_CPU_MEMORY))
    for before, after in zip(old_i, new_i, strict=True):
        if _is_sidecar(after):
            if not _same(_without_cpu_memory_change(after, before), before, container):
                causes.append(forbidden("spec", "only cpu and memory resources for sidecar containers are mutable"))
        elif not _same(after, before, container):
            causes.append(forbidden("spec", "resources for non-sidecar init containers are immutable"))
    if causes:
        return causes
    resized = ("containers", "initContainers", "resources")
    if not _same({k: v for k, v in new_spec.items() if k not in resized},
                 {k: v for k, v in old_spec.items() if k not in resized}, _pod_spec_shape()):
        causes.append(forbidden("spec", _ONLY_CPU_MEMORY))
    return causes


def _pod_spec_shape(*path: str) -> Shape | None:
    return shape_at(shape_of("", "v1", "Pod"), "spec", *path)


def _same(a: Any, b: Any, shape: Shape | None) -> bool:
    """Whether ``a`` and ``b`` are the same Go values, as ValidatePodResize's
    ``Semantic.DeepEqual`` compares them: a quantity by its value (``1e9`` stored, the ``1G``
    a number sent for it becomes), an empty list or map as nil."""
    return a == b or same_once_stored(a, b, shape)


def _pod_level_resources(spec: dict[str, Any]) -> bool:
    resources = spec.get("resources")
    return isinstance(resources, dict) and bool(resources.get("requests") or resources.get("limits"))


def _pod_level_resize(before: Any, after: Any) -> Causes:
    """upstream's validatePodLevelResourcesResize: pod-level resources, once set, stay, their
    requests and limits are not removed, and only their cpu and memory change."""
    if before is not None and after is None:
        return [forbidden("spec.resources", "pod-level resources cannot be removed")]
    old_r = before if isinstance(before, dict) else {}
    new_r = after if isinstance(after, dict) else {}
    causes: Causes = []
    for part in ("requests", "limits"):
        if set(old_r.get(part) or {}) - set(new_r.get(part) or {}):
            causes.append(forbidden(f"spec.resources.{part}", f"pod-level resource {part} cannot be removed"))
    if not _same(_without_cpu_memory(new_r, old_r), _without_cpu_memory(old_r, old_r), _pod_spec_shape("resources")):
        causes.append(forbidden("spec", "only cpu and memory resources are mutable at pod-level"))
    return causes


def _without_cpu_memory(resources: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """``resources`` with ``old``'s cpu and memory in place of its own, empty lists dropped
    (dropCPUMemoryResourceRequirementsUpdates): what differs from ``old`` so is no resize."""
    out = {k: v for k, v in resources.items() if k not in ("requests", "limits")}
    for part in ("requests", "limits"):
        munged = {k: v for k, v in (resources.get(part) or {}).items() if k not in _CPU_MEMORY}
        munged.update({k: v for k, v in (old.get(part) or {}).items() if k in _CPU_MEMORY})
        if munged:
            out[part] = munged
    return out


def _is_sidecar(c: Any) -> bool:
    return isinstance(c, dict) and c.get("restartPolicy") == "Always"


def _resize_supported(pod: dict[str, Any]) -> bool:
    """Upstream's version-skew check: the first running container's status reports its
    resources (a node whose kubelet resizes does), or no container runs yet."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if isinstance(status, dict) and "running" in (status.get("state") or {}):
            return status.get("resources") is not None
    return True


def _container_resize(before: Any, after: Any, path: str) -> Causes:
    """validateContainerResize: requests and limits stay. (A memory limit may be lowered or
    added whatever the resize policy since 1.34, kubernetes#133012: the kubelet checks the
    usage first.)"""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    old_r, new_r = before.get("resources") or {}, after.get("resources") or {}
    causes: Causes = []
    for part in ("requests", "limits"):
        if set(old_r.get(part) or {}) - set(new_r.get(part) or {}):
            causes.append(forbidden(f"{path}.{part}", f"resource {part} cannot be removed"))
    return causes


def _without_cpu_memory_change(after: Any, before: Any) -> Any:
    """``after`` with ``before``'s cpu and memory (upstream's dropCPUMemoryResourcesFromContainer):
    what is left differing from ``before`` is a change a resize may not make (its resize
    policy too: upstream's comparison keeps the new one)."""
    if not isinstance(after, dict) or not isinstance(before, dict):
        return after
    old_r = before.get("resources") or {}
    new_r: dict[str, Any] = after["resources"] if isinstance(after.get("resources"), dict) else {}
    resources: dict[str, Any] = {}
    for part in ("limits", "requests"):
        old_list = old_r.get(part)
        if old_list is None:
            continue
        munged = {k: v for k, v in (new_r.get(part) or {}).items() if k not in _CPU_MEMORY}
        munged.update({k: old_list[k] for k in _CPU_MEMORY if k in old_list})
        resources[part] = munged
    return {**after, "resources": resources}
