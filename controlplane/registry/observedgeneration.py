"""A pod's ``observedGeneration`` (KEP-5067, PodObservedGenerationTracking, on since 1.34).

``metadata.generation`` of a pod is 1 at its create and moves with every change of its spec
(the pod update, ``ephemeralcontainers`` and ``resize``) and with its first
``deletionTimestamp`` (``api/rest.py``). ``status.observedGeneration`` is the generation the
kubelet acted on in the status it wrote, and each condition's ``observedGeneration`` the
generation its writer looked at (the kubelet's own conditions, the scheduler's
``PodScheduled``, a ``DisruptionTarget``). The pods/binding subresource writes
``PodScheduled=True`` without one, as upstream's ``BindingREST``.

The API server validates neither against the generation (a value going back is allowed);
what it does is keep them: a ``pods/status`` write that leaves one out (or writes 0) keeps
the value stored, as upstream's ``preserveOldObservedGeneration`` does so that a client
that does not know the field (a mutating webhook, an older kubelet, a KWOK stage) does not
clear it. A condition takes back the value of the stored condition of its type, the n-th
of a type the n-th (validation lets a type repeat).
"""

from __future__ import annotations

from typing import Any

__all__ = ["keep_observed_generations"]


def _unset(value: Any) -> bool:
    """Whether ``value`` is what Go decodes to an int64's zero: left out, null, or 0."""
    return value is None or (type(value) is int and value == 0)


def keep_observed_generations(status: dict[str, Any], old: Any) -> dict[str, Any]:
    """``status`` (a ``pods/status`` write's) with the observed generations it leaves unset
    taken from ``old`` (the stored status); ``status`` itself is not changed.

    >>> keep_observed_generations({"conditions": [{"type": "Ready"}]},
    ...                           {"observedGeneration": 2, "conditions": [{"type": "Ready",
    ...                                                                     "observedGeneration": 2}]})
    {'conditions': [{'type': 'Ready', 'observedGeneration': 2}], 'observedGeneration': 2}
    """
    if not isinstance(old, dict):
        return status
    kept = old.get("observedGeneration")
    if not _unset(kept) and _unset(status.get("observedGeneration")):
        status = {**status, "observedGeneration": kept}
    conditions, old_conditions = status.get("conditions"), old.get("conditions")
    if not isinstance(conditions, list) or not isinstance(old_conditions, list):
        return status
    for c in conditions:  # (most writes, a kubelet's: every condition says its own)
        if isinstance(c, dict) and ((g := c.get("observedGeneration")) is None or (g == 0 and type(g) is int)):
            break
    else:
        return status
    by_type: dict[Any, list[Any]] = {}
    stored = False
    for c in old_conditions:
        if isinstance(c, dict):
            g = c.get("observedGeneration")
            by_type.setdefault(c.get("type"), []).append(g)
            stored = stored or not _unset(g)
    if not stored:
        return status  # (nothing stored to keep)
    taken = list(conditions)
    for i, c in enumerate(conditions):
        if isinstance(c, dict) and (gens := by_type.get(c.get("type"))):
            generation = gens.pop(0)
            if not _unset(generation) and _unset(c.get("observedGeneration")):
                taken[i] = {**c, "observedGeneration": generation}
    return {**status, "conditions": taken}
