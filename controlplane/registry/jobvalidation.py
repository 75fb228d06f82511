"""A Job spec's failure and replacement policies, as upstream's ``validateJobSpec`` checks
them (pkg/apis/batch/validation): ``podFailurePolicy`` (rules, actions, exit codes, pod
conditions; only with ``restartPolicy: Never``), ``podReplacementPolicy`` (only ``Failed``
with a pod failure policy), ``backoffLimitPerIndex`` and ``maxFailedIndexes`` (Indexed Jobs
only, within the limits that keep ``status.failedIndexes`` short) and ``successPolicy``
(Indexed Jobs only; rules of ``succeededIndexes``, an interval string such as ``0,2-5``,
and ``succeededCount``). Each answers the causes of a 422 Invalid, in upstream's words::

    pod_failure_policy_causes(spec, "spec")
    # [{'field': 'spec.podFailurePolicy.rules[0].onExitCodes.values[0]',
    #   'message': 'Invalid value: 0: must not be 0 for the In operator', ...}]
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from ..gostrings import quote
from .causes import Causes, cause, duplicate, invalid, not_supported, required, too_long
from .podvalidation import subdomain_problems

__all__ = ["indexes_total", "job_policy_causes"]

Obj = dict[str, Any]

_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")  # sorted, as sets.List gives them
_OPERATORS = ("In", "NotIn")
_STATUSES = ("False", "True", "Unknown")
_REPLACEMENT = ("Failed", "TerminatingOrFailed")
_MAX_RULES = 20
_MAX_VALUES = 255
_MAX_PATTERNS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES = 64 * 1024  # bytes of a rule's succeededIndexes
_MAX_INDEXED_PARALLELISM = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000  # past it, backoffLimitPerIndex needs tighter bounds:
_PARALLELISM_PAST_SOFT_LIMIT = 10_000
_MAX_FAILED_INDEXES_PAST_SOFT_LIMIT = 10_000


def _quoted(values: tuple[str, ...]) -> str:
    """Go's ``%q`` of a []string: ``["Count" "FailIndex"]``."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _too_many(field: str, n: int, limit: int) -> dict[str, str]:
    return cause("FieldValueTooMany", field, f"Too many: {n}: must have at most {limit} items")


def _int32s(values: list[Any]) -> str:
    """A []int32 as ``field.Invalid`` prints it (``%#v``)."""
    return "[]int32{" + ", ".join(str(v) for v in values) + "}" if values else "[]int32(nil)"


def _json(value: Any) -> str:
    """A struct value as the field errors of newer apimachinery print it (JSON)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _number(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _qualified_name_problems(name: str) -> list[str]:
    from .strategies import _qualified_name  # (strategies imports this module)

    return _qualified_name(name)


_MAX_MANAGED_BY = 63  # maxManagedByLength
_HTTP_PATH = re.compile(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+\Z")
_HTTP_PATH_HINT = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"


def _domain_prefixed_path(value: str, field: str) -> Causes:
    """apimachinery's ``IsDomainPrefixedPath``: ``<DNS subdomain>/<HTTP path>``, e.g. ``acme.io/foo``."""
    if not value:
        return [required(field)]
    host, slash, rest = value.partition("/")
    if not (slash and host and rest):
        return [invalid(field, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    causes = [invalid(field, host, p) for p in subdomain_problems(host)]
    if not _HTTP_PATH.match(rest):
        causes.append(invalid(field, rest, _HTTP_PATH_HINT))
    return causes


def job_policy_causes(spec: Obj, path: str) -> Causes:
    """The causes of a (defaulted) Job spec's policies at ``path`` (``spec``, or a CronJob's
    ``spec.jobTemplate.spec``)."""
    causes: Causes = []
    mode = spec.get("completionMode")
    indexed = mode == "Indexed"
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(not_supported(f"{path}.completionMode", mode, ("NonIndexed", "Indexed")))
    for field in ("backoffLimitPerIndex", "maxFailedIndexes", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            causes.append(invalid(f"{path}.{field}", value, "must be greater than or equal to 0"))
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        causes.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    manager = spec.get("managedBy")
    if isinstance(manager, str):
        causes += _domain_prefixed_path(manager, f"{path}.managedBy")
        if len(manager) > _MAX_MANAGED_BY:
            causes.append(too_long(f"{path}.managedBy", _MAX_MANAGED_BY))
    if indexed:
        causes += _indexed_limits(spec, path)
    else:
        for field in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if spec.get(field) is not None:
                causes.append(invalid(f"{path}.{field}", spec[field], "requires indexed completion mode"))
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, dict):
        causes += _pod_failure_policy(spec, policy, f"{path}.podFailurePolicy")
    success = spec.get("successPolicy")
    if success is not None:
        if not indexed:
            causes.append(cause("FieldValueInvalid", f"{path}.successPolicy",
                                f"Invalid value: {_json(success)}: requires indexed completion mode"))
        elif isinstance(success, dict):
            causes += _success_policy(spec, success, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if isinstance(policy, dict):
            if replacement != "Failed":
                causes.append(not_supported(f"{path}.podReplacementPolicy", replacement, ("Failed",)))
        elif replacement not in _REPLACEMENT:
            causes.append(not_supported(f"{path}.podReplacementPolicy", replacement, _REPLACEMENT))
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if isinstance(policy, dict) and restart == "OnFailure":  # (others are template_causes')
        causes.append(invalid(f"{path}.template.spec.restartPolicy", restart,
                              'only "Never" is supported when podFailurePolicy is specified'))
    return causes


def _pod_failure_policy(spec: Obj, policy: Obj, path: str) -> Causes:
    causes: Causes = []
    rules = policy.get("rules") or []
    if not isinstance(rules, list):
        return causes
    if len(rules) > _MAX_RULES:
        causes.append(_too_many(f"{path}.rules", len(rules), _MAX_RULES))
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    names = {c.get("name") for field in ("containers", "initContainers") for c in pod_spec.get(field) or ()
             if isinstance(c, dict)}
    for i, rule in enumerate(rules):
        if isinstance(rule, dict):
            causes += _rule(spec, rule, f"{path}.rules[{i}]", names)
    return causes


def _rule(spec: Obj, rule: Obj, at: str, names: set[Any]) -> Causes:
    causes: Causes = []
    action = rule.get("action")
    if not action:
        causes.append(required(f"{at}.action", f"valid values: {_quoted(_ACTIONS)}"))
    elif action == "FailIndex":
        if spec.get("backoffLimitPerIndex") is None:
            causes.append(invalid(f"{at}.action", action, "requires the backoffLimitPerIndex to be set"))
    elif action not in _ACTIONS:
        causes.append(not_supported(f"{at}.action", action, _ACTIONS))
    on_exit_codes, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
    if isinstance(on_exit_codes, dict):
        causes += _on_exit_codes(on_exit_codes, f"{at}.onExitCodes", names)
    if isinstance(on_conditions, list) and on_conditions:
        causes += _on_pod_conditions(on_conditions, f"{at}.onPodConditions")
    if on_exit_codes is not None and on_conditions:
        causes.append(cause("FieldValueInvalid", at,
                            "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"))
    if on_exit_codes is None and not on_conditions:
        causes.append(cause("FieldValueInvalid", at,
                            "Invalid value: specifying one of OnExitCodes and OnPodConditions is required"))
    return causes


def _on_exit_codes(req: Obj, at: str, names: set[Any]) -> Causes:
    causes: Causes = []
    operator = req.get("operator")
    if not operator:
        causes.append(required(f"{at}.operator", f"valid values: {_quoted(_OPERATORS)}"))
    elif operator not in _OPERATORS:
        causes.append(not_supported(f"{at}.operator", operator, _OPERATORS))
    name = req.get("containerName")
    if name is not None and name not in names:
        causes.append(invalid(f"{at}.containerName", name,
                              "must be one of the container or initContainer names in the pod template"))
    values = req.get("values") or []
    if not isinstance(values, list):
        return causes
    if not values:
        causes.append(cause("FieldValueInvalid", f"{at}.values",
                            f"Invalid value: {_int32s(values)}: at least one value is required"))
    elif len(values) > _MAX_VALUES:
        causes.append(_too_many(f"{at}.values", len(values), _MAX_VALUES))
    seen: set[Any] = set()
    ordered = True
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            causes.append(invalid(f"{at}.values[{j}]", value, "must not be 0 for the In operator"))
        if value in seen:
            causes.append(duplicate(f"{at}.values[{j}]", value))
        seen.add(value)
        if j and isinstance(value, int) and isinstance(values[j - 1], int) and values[j - 1] > value:
            ordered = False
    if not ordered:
        causes.append(cause("FieldValueInvalid", f"{at}.values", f"Invalid value: {_int32s(values)}: must be ordered"))
    return causes


def _on_pod_conditions(patterns: list[Any], at: str) -> Causes:
    causes: Causes = []
    if len(patterns) > _MAX_PATTERNS:
        causes.append(_too_many(at, len(patterns), _MAX_PATTERNS))
    for j, pattern in enumerate(patterns):
        if not isinstance(pattern, dict):
            continue
        kind, status = str(pattern.get("type") or ""), pattern.get("status")
        causes.extend(invalid(f"{at}[{j}].type", kind, problem) for problem in _qualified_name_problems(kind))
        if not status:
            causes.append(required(f"{at}[{j}].status", f"valid values: {_quoted(_STATUSES)}"))
        elif status not in _STATUSES:
            causes.append(not_supported(f"{at}[{j}].status", status, _STATUSES))
    return causes


def _indexed_limits(spec: Obj, path: str) -> Causes:
    """An Indexed Job's bounds: ``completions`` set, ``parallelism`` and ``maxFailedIndexes``
    within what keeps its interval strings short, tighter still past 100,000 completions
    with ``backoffLimitPerIndex``."""
    causes: Causes = []
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    most_failed = spec.get("maxFailedIndexes")
    if completions is None:
        causes.append(required(f"{path}.completions", "when completion mode is Indexed"))
    if _number(parallelism) and parallelism > _MAX_INDEXED_PARALLELISM:
        causes.append(invalid(f"{path}.parallelism", parallelism,
                              f"must be less than or equal to {_MAX_INDEXED_PARALLELISM} when completion mode is "
                              "Indexed"))
    if _number(completions) and _number(most_failed) and most_failed > completions:
        causes.append(invalid(f"{path}.maxFailedIndexes", most_failed, "must be less than or equal to completions"))
    if _number(most_failed) and most_failed > _MAX_FAILED_INDEXES:
        causes.append(invalid(f"{path}.maxFailedIndexes", most_failed,
                              f"must be less than or equal to {_MAX_FAILED_INDEXES}"))
    if _number(completions) and completions > _COMPLETIONS_SOFT_LIMIT and \
            spec.get("backoffLimitPerIndex") is not None:
        beyond = f"when completions are above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        if most_failed is None:
            causes.append(required(f"{path}.maxFailedIndexes",
                                   f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}"))
        if _number(parallelism) and parallelism > _PARALLELISM_PAST_SOFT_LIMIT:
            causes.append(invalid(f"{path}.parallelism", parallelism,
                                  f"must be less than or equal to {_PARALLELISM_PAST_SOFT_LIMIT} {beyond}"))
        if _number(most_failed) and most_failed > _MAX_FAILED_INDEXES_PAST_SOFT_LIMIT:
            causes.append(invalid(f"{path}.maxFailedIndexes", most_failed,
                                  f"must be less than or equal to {_MAX_FAILED_INDEXES_PAST_SOFT_LIMIT} {beyond}"))
    return causes


def _success_policy(spec: Obj, policy: Obj, path: str) -> Causes:
    causes: Causes = []
    rules = policy.get("rules") or []
    if not isinstance(rules, list):
        return causes
    if not rules:
        causes.append(required(f"{path}.rules",
                               "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > _MAX_SUCCESS_RULES:
        causes.append(_too_many(f"{path}.rules", len(rules), _MAX_SUCCESS_RULES))
    completions = spec.get("completions")
    for i, rule in enumerate(rules):
        if isinstance(rule, dict) and _number(completions):
            causes += _success_rule(rule, completions, f"{path}.rules[{i}]")
    return causes


def _success_rule(rule: Obj, completions: int, at: str) -> Causes:
    causes: Causes = []
    indexes, count = rule.get("succeededIndexes"), rule.get("succeededCount")
    if indexes is None and count is None:
        causes.append(required(at, "at least one of succeededCount or succeededIndexes must be specified"))
    total = 0
    if isinstance(indexes, str):
        if len(indexes) > _MAX_SUCCEEDED_INDEXES:
            causes.append(cause("FieldValueTooLong", f"{at}.succeededIndexes",
                                f"Too long: may not be more than {_MAX_SUCCEEDED_INDEXES} bytes"))
        try:
            total = indexes_total(indexes, completions)
        except ValueError as e:
            causes.append(invalid(f"{at}.succeededIndexes", indexes, f"error parsing succeededIndexes: {e}"))
    if _number(count):
        if count < 0:
            causes.append(invalid(f"{at}.succeededCount", count, "must be greater than or equal to 0"))
        if count > completions:
            causes.append(invalid(f"{at}.succeededCount", count,
                                  f"must be less than or equal to {completions} (the number of specified completions)"))
        if indexes is not None and count > total:
            causes.append(invalid(f"{at}.succeededCount", count, f"must be less than or equal to {total} (the number "
                                  "of indexes in the specified succeededIndexes field)"))
    return causes


def indexes_total(text: str, completions: int) -> int:
    """How many indexes an interval string (``0,2-5``) names, each below ``completions``, in
    increasing order; a ValueError in upstream's words (``validateIndexesFormat``) if not."""
    total, last = 0, -1
    for fragment in text.split(",") if text else ():
        first, end = _interval(fragment, completions)
        if last >= first:
            raise ValueError(f"non-increasing order, previous: {last}, current: {first}")
        total += end - first + 1
        last = end
    return total


def _interval(fragment: str, completions: int) -> tuple[int, int]:
    bounds = fragment.split("-")
    if len(bounds) > 2:
        raise ValueError(f"the fragment {quote(fragment)} violates the requirement that an index interval can have "
                         "at most two parts separated by '-'")
    values: list[int] = []
    for bound in bounds:
        digits = bound[1:] if bound[:1] == "+" else bound  # (Go's Atoi: a sign, then decimal digits)
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"cannot convert string to integer for index: {quote(bound)}")
        value = int(digits)
        if value >= completions:
            raise ValueError(f"too large index: {quote(bound)}")
        values.append(value)
    if len(values) == 2 and values[0] >= values[1]:
        raise ValueError(f"non-increasing order, previous: {values[0]}, current: {values[1]}")
    return values[0], values[-1]


