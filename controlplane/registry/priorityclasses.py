"""scheduling.k8s.io/v1 PriorityClasses, defaulted and validated as upstream's
``SetDefaults_PriorityClass``, ``ValidatePriorityClass`` and ``ValidatePriorityClassUpdate``
do it, in their words.

- A missing ``preemptionPolicy`` is ``PreemptLowerPriority``; one given is that or ``Never``.
- A user's class is worth at most 1,000,000,000 (``HighestUserDefinablePriority``); the
  names starting ``system-`` are kept for the two system classes kube-apiserver writes at
  start (``api/priority.py``), with their values and ``globalDefault`` false.
- An update changes neither ``value`` nor ``preemptionPolicy`` (description, globalDefault
  and metadata may change).

    >>> prepare_priority_class({"metadata": {"name": "high"}, "value": 2000000000}, None)[0]["message"]
    'Forbidden: maximum allowed value of a user defined priority is 1000000000'
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, forbidden, invalid, not_supported, required

__all__ = ["HIGHEST_USER_DEFINABLE", "SYSTEM_PREFIX", "prepare_priority_class"]

HIGHEST_USER_DEFINABLE = 1_000_000_000
SYSTEM_PREFIX = "system-"
_POLICIES = ("PreemptLowerPriority", "Never")  # upstream's order, not sorted
# name -> value of the system classes (upstream's systemPriorityClasses; globalDefault false)
_SYSTEM_VALUES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}


def _system_problem(name: str, value: Any, global_default: bool) -> str:
    """Why a ``system-`` class is not one of the system classes (``IsKnownSystemPriorityClass``)."""
    wanted = _SYSTEM_VALUES.get(name)
    if wanted is None:
        return f"{name} is not a known system priority class"
    if value != wanted:
        return f"value of {name} PriorityClass must be {wanted}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def _create_causes(pc: dict[str, Any]) -> Causes:
    name = str((pc.get("metadata") or {}).get("name") or "")
    value = pc.get("value") or 0
    causes: Causes = []
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_problem(name, value, pc.get("globalDefault") is True)
        if problem:
            causes.append(forbidden("metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are "
                                                     f"reserved for system use only. error: {problem}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE:
        causes.append(forbidden("value", f"maximum allowed value of a user defined priority is "
                                         f"{HIGHEST_USER_DEFINABLE}"))
    policy = pc.get("preemptionPolicy")
    if policy == "":
        causes.append(required("preemptionPolicy"))
    elif policy not in _POLICIES:
        causes.append(not_supported("preemptionPolicy", policy, _POLICIES))
    return causes


def prepare_priority_class(pc: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """Defaulted, then ``ValidatePriorityClass`` at a create, ``ValidatePriorityClassUpdate``
    at an update (which checks nothing else)."""
    if pc.get("preemptionPolicy") is None:  # a nil pointer only: "" is a value, refused
        pc["preemptionPolicy"] = _POLICIES[0]
    if old is None:
        return _create_causes(pc)
    causes: Causes = []
    if (pc.get("value") or 0) != (old.get("value") or 0):
        causes.append(forbidden("value", "may not be changed in an update."))
    if pc["preemptionPolicy"] != old.get("preemptionPolicy", _POLICIES[0]):
        causes.append(invalid("preemptionPolicy", pc["preemptionPolicy"], "field is immutable"))
    return causes
