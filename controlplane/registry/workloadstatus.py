"""A workload's status write, validated as upstream's ``Validate<Kind>StatusUpdate``.

Each count a status reports is not negative, the replica counts are bounded by
``status.replicas`` (and the available ones by the ready ones), and a ``collisionCount``
never goes down: a status of ``replicas: -1`` or ``readyReplicas`` above ``replicas`` was
stored, and then read by the controllers, the HPA and ``kubectl rollout status``. Only a
write that changes the status is checked (a spec update keeps the stored status, as
upstream's strategies keep it and its update validation does not look at it).

    >>> [c["field"] for c in workload_status_causes("deployments", {"replicas": 1, "readyReplicas": 2}, {})]
    ['status.readyReplicas']
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, invalid

__all__ = ["STATUS_VALIDATED", "workload_status_causes"]

_NEGATIVE = "must be greater than or equal to 0"
# (counts that may not be negative, counts bounded by replicas, the word after "cannot be
# greater than" for available above ready, whether collisionCount is checked); a count
# given here that the status leaves out is Go's zero
_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, bool]] = {
    "deployments": (("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                     "unavailableReplicas", "terminatingReplicas", "collisionCount"),
                    ("updatedReplicas", "readyReplicas", "availableReplicas"), "readyReplicas", True),
    "replicasets": (("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "terminatingReplicas",
                     "observedGeneration"),
                    ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), "readyReplicas", False),
    "replicationcontrollers": (("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                                "observedGeneration"),
                               ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), "readyReplicas", False),
    "statefulsets": (("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
                      "observedGeneration", "collisionCount"),
                     ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"),
                     "status.readyReplicas", True),
    "daemonsets": (("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                    "observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                    "collisionCount"), (), "", True),
}
STATUS_VALIDATED = frozenset(_RULES)


def workload_status_causes(plural: str, status: Any, old_status: Any) -> Causes:
    """The causes of a 422 for the status ``status`` of a ``plural`` written over ``old_status``
    (a type's decoder made both objects, or None); none for a kind upstream leaves alone."""
    rules = _RULES.get(plural)
    if rules is None or not isinstance(status, dict):
        return []
    counts, bounded, ready_word, collisions = rules
    causes: Causes = []

    def count(name: str) -> int:
        value = status.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    for name in counts:
        if count(name) < 0:
            causes.append(invalid(f"status.{name}", count(name), _NEGATIVE))
    replicas = count("replicas")
    for name in bounded:
        if count(name) > replicas:
            causes.append(invalid(f"status.{name}", count(name), "cannot be greater than status.replicas"))
    if bounded and count("availableReplicas") > count("readyReplicas"):
        causes.append(invalid("status.availableReplicas", count("availableReplicas"),
                              f"cannot be greater than {ready_word}"))
    if collisions and isinstance(old_status, dict) and isinstance(old_status.get("collisionCount"), int):
        new = status.get("collisionCount")
        if not isinstance(new, int) or new < old_status["collisionCount"]:  # IsDecremented
            causes.append(invalid("status.collisionCount", new if isinstance(new, int) else 0,
                                  "cannot be decremented"))
    return causes
