"""The generation a simulated kubelet says it acted on (KEP-5067, on since 1.34).

Upstream's kubelet stamps every pod status it writes with ``status.observedGeneration``,
the ``metadata.generation`` of the pod it synced, and each condition it owns
(``KUBELET_CONDITIONS``, and the resize conditions of ``resize.py``) with the same
number; the conditions other writers own (readiness gates, ``DisruptionTarget``) keep
theirs. A change of a running pod's spec (``activeDeadlineSeconds``, an image, a
toleration; a resize or an ephemeral container, whose writes carry it themselves) is a new
generation, which the kubelet's next sync reports though nothing else in the status moves:
``observe_patch`` is that write.

The built-in stages write the generation in their templates (``default-stages.yaml``) and
their Python renderings (``native.py``). A user's KWOK stages write what their templates
say: KWOK's own write no observed generation, so a pod's stays where another write left
it (the API server keeps a stored value a write leaves out), as under a kubelet older
than 1.33; nor is ``observe_patch`` written for a spec change alone under them (an
ephemeral container's write and a resize's, the simulator's own, still carry it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..podgeneration import generation_of

__all__ = ["KUBELET_CONDITIONS", "generation_of", "observe_patch", "stamped"]

# what upstream's kubetypes.PodConditionByKubelet names, but the resize conditions
KUBELET_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized", "ContainersReady",
                                "PodReadyToStartContainers"})


def stamped(condition: dict[str, Any], generation: int | None) -> dict[str, Any]:
    """``condition`` with ``observedGeneration`` set to ``generation`` (in place) if the kubelet
    owns its type and there is a generation; returned."""
    if generation is not None and condition.get("type") in KUBELET_CONDITIONS:
        condition["observedGeneration"] = generation
    return condition


def observe_patch(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The strategic merge patch of ``pods/status`` by which the kubelet reports a running
    pod's new generation: ``status.observedGeneration`` and its own conditions' (merged by
    type, so no other writer's condition is touched); None when the status already says it,
    or the pod is not the kubelet's to report (not started, finished, being deleted)."""
    generation = generation_of(pod)
    status = pod.get("status") or {}
    if generation is None or status.get("observedGeneration") == generation \
            or status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    conditions = [{"type": c["type"], "observedGeneration": generation} for c in status.get("conditions") or ()
                  if isinstance(c, dict) and c.get("type") in KUBELET_CONDITIONS]
    patch: dict[str, Any] = {"observedGeneration": generation}
    if conditions:
        patch["conditions"] = conditions
    return {"status": patch}
