"""The generation a writer of a pod's status says it looked at (KEP-5067, on since 1.34).

Each writer of a pod condition stamps it with the ``metadata.generation`` of the pod it
decided on, as upstream's ``CalculatePodConditionObservedGeneration`` with its gate on: the
kubelet its own conditions (``nodes/observed.py``), the scheduler ``PodScheduled=False``,
preemption, the taint eviction controller and PodGC ``DisruptionTarget``. A reader compares
the two to tell whether a condition speaks of the pod's current spec. The API server
writes none on the conditions it sets itself (the binding's ``PodScheduled=True``, a gated
pod's ``SchedulingGated``), as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["generation_of", "observing"]


def generation_of(pod: Mapping[str, Any]) -> int | None:
    """The pod's ``metadata.generation``, or None when it has none (a pod an API server
    before 1.33 stored)."""
    generation = (pod.get("metadata") or {}).get("generation")
    return generation if type(generation) is int and generation > 0 else None


def observing(condition: dict[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """``condition`` (changed in place and returned) with ``observedGeneration`` the pod's
    generation, when it has one."""
    generation = generation_of(pod)
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition
