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
pods that exist; a missing pod is then not counted as unavailable. A bound the
controller cannot read (stored before it was validated) is a ``BadBudget``, which
the controller reports as upstream's does, never a crash.

A budget is validated as upstream's ``ValidatePodDisruptionBudget`` (and, for a write of
its status, ``ValidatePodDisruptionBudgetStatusUpdate``) checks it, in its words
(``prepare_pod_disruption_budget``): at most one of ``minAvailable`` and
``maxUnavailable``, each an int not negative or a percent of at most 100, a valid label
selector, a known ``unhealthyPodEvictionPolicy``; status counts not negative and
conditions as ``metav1.Condition`` requires. Bad values print as 1.34's ``field.Error``
prints them: strings quoted, structs as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from .causes import Causes, cause, duplicate, invalid, not_supported, required
from .podvalidation import label_key_problems, label_selector_causes

__all__ = ["BadBudget", "budget", "covers", "healthy", "prepare_pod_disruption_budget", "selector_matches"]


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


class BadBudget(ValueError):
    """A ``minAvailable`` or ``maxUnavailable`` no count can be read from, worded as
    upstream's ``GetScaledValueFromIntOrPercent`` words it."""


_ATOI = re.compile(r"[+-]?[0-9]+\Z")  # what Go's strconv.Atoi reads


def _count(value: Any, total: int) -> int:
    """An int as it is; a percent of ``total``, rounded up (in integers: ``1e9999%`` is no float)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise BadBudget("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise BadBudget("invalid value for IntOrString: invalid type: string is not a percentage")
    number = value[:-1]
    if not _ATOI.match(number):
        raise BadBudget(f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing '
                        f'"{number}": invalid syntax')
    return -(-int(number) * total // 100)


def budget(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], disrupted: int = 0) -> dict[str, int]:
    """The status numbers of ``pdb`` over the ``pods`` it covers. Raises ``BadBudget``."""
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


# -- validation ----------------------------------------------------------------------------------
_PERCENT = re.compile(r"[0-9]+%\Z")
_PERCENT_HINT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
                 "'93%', regex used for validation is '[0-9]+%')")
_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_STATUS_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
_CONDITION_STATUSES = ("False", "True", "Unknown")
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?\Z")
_REASON_HINT = ("a condition reason must start with alphabetic character, optionally followed by a string of "
                "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. "
                "'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used "
                "for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')")
_NONNEGATIVE = "must be greater than or equal to 0"


def _bound_causes(value: Any, field: str) -> Causes:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent`` (an IntOrString prints
    as its JSON: a string quoted)."""
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [invalid(field, value, _PERCENT_HINT)]
        return [invalid(field, value, "must not be greater than 100%")] if int(value[:-1]) > 100 else []
    if isinstance(value, int) and value < 0:
        return [invalid(field, value, _NONNEGATIVE)]
    return []


def _go_selector(selector: Any) -> Any:
    """A LabelSelector as Go's JSON encoder writes it (empty fields left out, map keys sorted)."""
    if not isinstance(selector, dict):
        return None
    shown: dict[str, Any] = {}
    if selector.get("matchLabels"):
        shown["matchLabels"] = dict(sorted(selector["matchLabels"].items()))
    if selector.get("matchExpressions"):
        shown["matchExpressions"] = [
            {k: e.get(k) or "" for k in ("key", "operator", "values") if e.get(k) or k != "values"}
            for e in selector["matchExpressions"] if isinstance(e, dict)]
    return shown


def _both_set(spec: dict[str, Any]) -> dict[str, str]:
    """The whole spec, printed as the internal struct's JSON, for setting both bounds."""
    shown = {"MinAvailable": spec.get("minAvailable"), "Selector": _go_selector(spec.get("selector")),
             "MaxUnavailable": spec.get("maxUnavailable"),
             "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy")}
    return cause("FieldValueInvalid", "spec", f"Invalid value: {orjson.dumps(shown).decode()}: "
                                              "minAvailable and maxUnavailable cannot be both set")


def _spec_causes(spec: dict[str, Any]) -> Causes:
    """``ValidatePodDisruptionBudgetSpec``."""
    least, most = spec.get("minAvailable"), spec.get("maxUnavailable")
    causes: Causes = [_both_set(spec)] if least is not None and most is not None else []
    causes += _bound_causes(least, "spec.minAvailable") + _bound_causes(most, "spec.maxUnavailable")
    selector = spec.get("selector")
    if isinstance(selector, dict):
        causes += label_selector_causes(selector, "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _EVICTION_POLICIES:
        causes.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, _EVICTION_POLICIES))
    return causes


def _condition_causes(condition: dict[str, Any], at: str) -> Causes:
    """apimachinery's ``ValidateCondition`` (a ``metav1.Condition``)."""
    kind, status, reason = str(condition.get("type") or ""), condition.get("status"), condition.get("reason") or ""
    causes = [invalid(f"{at}.type", kind, p) for p in label_key_problems(kind)]
    if status not in _CONDITION_STATUSES:
        causes.append(not_supported(f"{at}.status", status or "", _CONDITION_STATUSES))
    generation = condition.get("observedGeneration")
    if isinstance(generation, int) and generation < 0:
        causes.append(invalid(f"{at}.observedGeneration", generation, "must be greater than or equal to zero"))
    if not condition.get("lastTransitionTime"):
        causes.append(required(f"{at}.lastTransitionTime", "must be set"))
    if not reason:
        causes.append(required(f"{at}.reason", "must be set"))
    else:
        if not _REASON.match(str(reason)):
            causes.append(invalid(f"{at}.reason", reason, _REASON_HINT))
        if len(str(reason).encode()) > 1024:
            causes.append(cause("FieldValueTooLong", f"{at}.reason", "Too long: may not be more than 1024 bytes"))
    if len(str(condition.get("message") or "").encode()) > 32768:
        causes.append(cause("FieldValueTooLong", f"{at}.message", "Too long: may not be more than 32768 bytes"))
    return causes


def _status_causes(status: dict[str, Any]) -> Causes:
    """``ValidatePodDisruptionBudgetStatusUpdate`` (policy/v1): conditions, then the counts."""
    causes: Causes = []
    seen: set[Any] = set()
    conditions = status.get("conditions")
    for i, condition in enumerate(conditions if isinstance(conditions, list) else ()):
        if not isinstance(condition, dict):
            continue
        if condition.get("type") in seen:
            causes.append(duplicate(f"status.conditions[{i}].type", condition.get("type")))
        seen.add(condition.get("type"))
        causes += _condition_causes(condition, f"status.conditions[{i}]")
    for field in _STATUS_COUNTS:
        value = status.get(field)
        if isinstance(value, int) and value < 0:
            causes.append(invalid(f"status.{field}", value, _NONNEGATIVE))
    return causes


def prepare_pod_disruption_budget(pdb: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """The causes of a 422 in a budget's create or update: its spec when new or changed (a
    status write carries the stored one), its status when changed (only a status write
    changes it: an update of the budget keeps the stored status)."""
    spec, status = pdb.get("spec"), pdb.get("status")
    causes: Causes = []
    if isinstance(spec, dict) and (old is None or spec != old.get("spec")):
        causes += _spec_causes(spec)
    if old is not None and isinstance(status, dict) and status != old.get("status"):
        causes += _status_causes(status)
    return causes
