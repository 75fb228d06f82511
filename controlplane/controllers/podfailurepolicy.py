"""A Job's ``podFailurePolicy`` (batch/v1, GA since 1.31): what a failed pod means to its Job,
as upstream's Job controller decides it (pkg/controller/job/pod_failure_policy.go).

The rules are tried in order and the first that matches decides:

- ``onExitCodes``: a terminated container (the pod's containers first, then its init
  containers; only the one named ``containerName`` if set) whose exit code is ``In`` or
  ``NotIn`` the ``values``. An exit code of 0 never matches, nor does a container that has
  not terminated.
- ``onPodConditions``: the pod has a condition of one of the patterns' ``type`` with the
  pattern's ``status`` (``DisruptionTarget``, which evictions, preemption, the taint
  eviction controller and the pod garbage collector set).

Its ``action``: ``FailJob`` fails the Job (the message says which container or condition
matched which rule), ``Ignore`` does not count the pod against ``backoffLimit``, ``Count``
counts it as if no rule matched, ``FailIndex`` counts it and fails the pod's index (only with
``backoffLimitPerIndex``, which validation requires: ``controllers/indexedjobs.py``)::

    verdict(policy, pod)   # Verdict(message=None, counts=False, action='Ignore')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["Verdict", "verdict"]


class Verdict(NamedTuple):
    message: str | None  # why the Job fails: set for a FailJob rule only
    counts: bool  # counted as a failure (against backoffLimit, or the index's backoffLimitPerIndex)
    action: str | None  # the action of the rule that matched; None when none did


_NO_RULE = Verdict(None, True, None)


def verdict(policy: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> Verdict:
    """What ``policy`` makes of the failed ``pod``; a pod no rule matches is counted."""
    if not policy:
        return _NO_RULE
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    for index, rule in enumerate(policy.get("rules") or ()):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            container = _exit_code_match(status, rule["onExitCodes"])
            if container is None:
                continue
            code = container["state"]["terminated"].get("exitCode")
            why = (f"Container {container.get('name', '')} for pod {where} failed with exit code {code} matching "
                   f"{action} rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            condition = _condition_match(status, rule["onPodConditions"])
            if condition is None:
                continue
            why = f"Pod {where} has condition {condition.get('type', '')} matching {action} rule at index {index}"
        else:
            continue
        if action == "Ignore":
            return Verdict(None, False, action)
        if action == "FailJob":
            return Verdict(why, True, action)
        if action in ("Count", "FailIndex"):
            return Verdict(None, True, action)
        # an unknown action (validation refuses it) matches nothing, as upstream's switch
    return _NO_RULE


def _exit_code_match(status: Mapping[str, Any], req: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first terminated container status (containers, then init containers) whose
    non-zero exit code meets ``req``."""
    name, operator, values = req.get("containerName"), req.get("operator"), req.get("values") or ()
    for field in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(field) or ():
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None or (name is not None and cs.get("name") != name):
                continue
            code = terminated.get("exitCode") or 0
            if code != 0 and ((operator == "In" and code in values) or (operator == "NotIn" and code not in values)):
                return cs  # type: ignore[no-any-return]
    return None


def _condition_match(status: Mapping[str, Any], patterns: Any) -> Mapping[str, Any] | None:
    """The first of the pod's conditions that one of ``patterns`` (type and status) matches."""
    for condition in status.get("conditions") or ():
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and \
                    condition.get("status") == (pattern.get("status") or "True"):
                return condition  # type: ignore[no-any-return]
    return None
