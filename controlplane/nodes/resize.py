"""What a simulated kubelet does with a pod's in-place resize (KEP-1287, ``pods/resize``).

A running pod whose containers' ``resources`` in the spec differ from what their statuses
report (``containerStatuses[].resources``, written when the pod started: ``native.py``),
or whose ``status.resources`` (the pod-level report of InPlacePodLevelResourcesVerticalScaling,
on since 1.36: ``allocated.py``) is not what its spec now makes of it, has a resize to actuate. As
upstream's kubelet (its allocation manager) decides it:

- **Infeasible**: the pod's new requests (its pod-level cpu and memory requests where it
  has them, as upstream's PodRequests) exceed the node's allocatable cpu or memory
  (the node could never hold it): condition ``PodResizePending`` with reason ``Infeasible``;
- **Deferred**: they fit the node but not beside the other pods' allocated requests
  (what their statuses report): ``PodResizePending`` with reason ``Deferred``, tried again
  when a pod leaves the node, a resize on it is done, or the pod changes;
- **fits**: the statuses report the new resources (``resources`` and ``allocatedResources``,
  the pod's too), with the condition
  ``PodResizeInProgress`` for one write; the next sight of the pod removes it.
  ``status.observedGeneration`` is the pod's generation, and the observed generation of
  the kubelet's conditions.

The functions here are pure (the pod, the node's allocatable, the other pods in, a status
patch out); the simulator (``simulator.py``) calls them and writes the patches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..scheduler.nodeinfo import pod_requests, reported_pod_level, resource_amount
from .allocated import pod_allocation
from .observed import generation_of, stamped

__all__ = ["allocated_requests", "resize_decision", "resize_patch", "settled_patch", "wants_resize"]

Obj = dict[str, Any]
PENDING, IN_PROGRESS = "PodResizePending", "PodResizeInProgress"
_STATUS_LISTS = (("containers", "containerStatuses"), ("initContainers", "initContainerStatuses"))


def _reported(pod: Obj) -> dict[Any, Any]:
    """Each container's reported ``resources``, by name (only the statuses that carry them)."""
    status = pod.get("status") or {}
    return {cs.get("name"): cs["resources"] for _, key in _STATUS_LISTS for cs in status.get(key) or ()
            if isinstance(cs, dict) and isinstance(cs.get("resources"), dict)}


def wants_resize(pod: Obj) -> bool:
    """Whether ``pod`` runs with a container whose spec's resources differ from its
    report (a pod never resized, generation 1, is not looked at)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    generation = meta.get("generation")
    if not isinstance(generation, int) or generation <= 1 or meta.get("deletionTimestamp") \
            or status.get("phase") != "Running":
        return False
    reported = _reported(pod)
    spec = pod.get("spec") or {}
    if isinstance(status.get("resources"), dict) and pod_allocation(spec)["resources"] != status["resources"]:
        return True
    return any(c.get("name") in reported and (c.get("resources") or {}) != reported[c.get("name")]
               for key, _ in _STATUS_LISTS for c in spec.get(key) or () if isinstance(c, dict))


def allocated_requests(pod: Obj) -> dict[str, int]:
    """The requests the kubelet has allocated to ``pod`` (its statuses' reports where they
    are, the spec's elsewhere; its pod level's report, ``status.resources``, likewise): what it
    holds of the node while a resize of it waits."""
    return pod_requests(pod.get("spec") or {},
                        (_reported_requests(pod), True, reported_pod_level(pod.get("status") or {})))


def _reported_requests(pod: Obj) -> dict[Any, Any]:
    return {name: r.get("requests") or {} for name, r in _reported(pod).items()}


def resize_decision(pod: Obj, allocatable: dict[str, Any], others: Iterable[Obj]) -> tuple[str, str]:
    """``("", "")`` when the resize fits; else ``(reason, message)`` of the Pending
    condition, in the kubelet's words."""
    wanted = pod_requests(pod.get("spec") or {})
    capacity = {}
    for name in ("cpu", "memory"):
        try:
            capacity[name] = resource_amount(name, allocatable.get(name) or 0)
        except (ValueError, TypeError):
            capacity[name] = 0
    for name in ("cpu", "memory"):
        if wanted.get(name, 0) > capacity[name]:
            return "Infeasible", (f"Node didn't have enough capacity: {name}, requested: {wanted.get(name, 0)}, "
                                  f"capacity: {capacity[name]}")
    used = {"cpu": 0, "memory": 0}
    for other in others:
        held = allocated_requests(other)
        for name in used:
            used[name] += held.get(name, 0)
    for name in ("cpu", "memory"):
        if wanted.get(name, 0) + used[name] > capacity[name]:
            return "Deferred", (f"Node didn't have enough resource: {name}, requested: {wanted.get(name, 0)}, "
                                f"used: {used[name]}, capacity: {capacity[name]}")
    return "", ""


def _conditions(pod: Obj, drop: tuple[str, ...], add: Obj | None) -> list[Obj]:
    """The pod's conditions but ``drop``'s, with ``add``; the kubelet's own stamped with the
    generation it acted on (``observed.py``)."""
    generation = generation_of(pod)
    kept = [stamped(dict(c), generation) for c in (pod.get("status") or {}).get("conditions") or ()
            if isinstance(c, dict) and c.get("type") not in drop]
    return [*kept, add] if add is not None else kept


def _condition(pod: Obj, kind: str, now: str, reason: str = "", message: str = "") -> Obj:
    """A resize condition; its transition time kept while it says the same."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == kind and c.get("reason", "") == reason:
            now = c.get("lastTransitionTime") or now
    condition: Obj = {"type": kind, "status": "True", "lastTransitionTime": now,
                      "observedGeneration": (pod.get("metadata") or {}).get("generation")}
    if reason:
        condition["reason"], condition["message"] = reason, message
    return condition


def _precondition(pod: Obj) -> Obj:
    return {"resourceVersion": (pod.get("metadata") or {}).get("resourceVersion")}


def resize_patch(pod: Obj, reason: str, message: str, now: str) -> Obj | None:
    """The status patch of a resize decided (``resize_decision``); None when the pod already
    says so (a Pending condition as it would be written, for this generation)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    generation = meta.get("generation")
    if reason:
        pending = [c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == PENDING]
        if status.get("observedGeneration") == generation and len(pending) == 1 \
                and (pending[0].get("reason"), pending[0].get("message")) == (reason, message):
            return None
        conditions = _conditions(pod, (PENDING, IN_PROGRESS), _condition(pod, PENDING, now, reason, message))
        return {"metadata": _precondition(pod),
                "status": {"observedGeneration": generation, "conditions": conditions}}
    spec = pod.get("spec") or {}
    out: Obj = {"observedGeneration": generation,
                "conditions": _conditions(pod, (PENDING, IN_PROGRESS), _condition(pod, IN_PROGRESS, now))}
    for spec_key, status_key in _STATUS_LISTS:
        statuses = status.get(status_key)
        if not statuses:
            continue
        by_name = {c.get("name"): c for c in spec.get(spec_key) or () if isinstance(c, dict)}
        out[status_key] = [_actuated(cs, by_name.get(cs.get("name"))) for cs in statuses]
    if "resources" in status:  # the pod's allocation, as the kubelet reports it (allocated.py)
        allocation = pod_allocation(spec)
        out["resources"] = allocation["resources"]
        out["allocatedResources"] = allocation.get("allocatedResources")
    return {"metadata": _precondition(pod), "status": out}


def _actuated(cs: Any, container: Obj | None) -> Any:
    """A container's status reporting the spec's resources, and its requests as allocated,
    when it reports any."""
    if not isinstance(cs, dict) or container is None or "resources" not in cs:
        return cs
    resources = container.get("resources") or {}
    out = {k: v for k, v in cs.items() if k != "allocatedResources"}  # (a list is patched whole)
    out["resources"] = resources
    if resources.get("requests"):
        out["allocatedResources"] = resources["requests"]
    return out


def settled_patch(pod: Obj) -> Obj | None:
    """Once a resize is actuated (no container left to resize): the patch that removes
    ``PodResizeInProgress``, or None when there is none."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    if not any(isinstance(c, dict) and c.get("type") == IN_PROGRESS for c in conditions):
        return None
    return {"metadata": _precondition(pod), "status": {"conditions": _conditions(pod, (IN_PROGRESS,), None)}}
