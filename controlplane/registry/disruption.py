"""PodDisruptionBudgets (policy/v1): which pods a budget covers and how many of them must
stay healthy. Shared by the eviction check (``api/rest.py``) and the disruption
controller that keeps a budget's status (``controllers/disruption.py``).

As upstream's disruption controller: a pod is *healthy* when it is Ready and not
being deleted. ``expectedPods`` is the number of pods the selector covers.
``desiredHealthy`` is ``minAvailable``, or ``expectedPods - maxUnavailable``. A
percentage is of ``expectedPods``, rounded up. ``disruptionsAllowed`` is
``currentHealthy - desiredHealthy``, less the pods evicted recently whose
deletion the controller has not seen yet (``disruptedPods``), never below 0.
Upstream takes ``expectedPods`` from the pods' controllers' scale when the
budget is a percentage or ``maxUnavailable``. This server takes the number of
pods that exist; a missing pod is then not counted as unavailable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["budget", "covers", "healthy", "selector_matches"]


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics, as a budget uses them: None or ``{}`` selects nothing
    (policy/v1: an empty selector matches no pods)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key", ""), e.get("operator", ""), e.get("values") or []
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def covers(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    pmeta, bmeta = pod.get("metadata") or {}, pdb.get("metadata") or {}
    return pmeta.get("namespace") == bmeta.get("namespace") and \
        selector_matches((pdb.get("spec") or {}).get("selector"), pmeta.get("labels") or {})


def healthy(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _count(value: Any, total: int) -> int:
    text = str(value)
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def budget(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], disrupted: int = 0) -> dict[str, int]:
    """The status numbers of ``pdb`` over the ``pods`` it covers."""
    covered = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    expected = len(covered)
    current = sum(1 for p in covered if healthy(p))
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        desired = max(expected - _count(spec["maxUnavailable"], expected), 0)
    elif spec.get("minAvailable") is not None:
        desired = _count(spec["minAvailable"], expected)
    else:
        desired = 0  # neither set: as upstream, nothing must stay healthy
    allowed = max(current - desired - disrupted, 0)
    return {"expectedPods": expected, "currentHealthy": current, "desiredHealthy": desired,
            "disruptionsAllowed": allowed}
