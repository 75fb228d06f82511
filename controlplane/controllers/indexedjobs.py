"""An Indexed Job's indexes, as upstream's Job controller keeps them (pkg/controller/job/
indexed_job_utils.go and success_policy.go).

- Interval strings: ``status.completedIndexes``, ``status.failedIndexes`` and a success
  policy rule's ``succeededIndexes`` list indexes in increasing order, runs of three or more
  as ``first-last``, pairs and single indexes comma separated::

      compress_indexes({0, 1, 2, 5, 7, 8})    # '0-2,5,7,8'
      parse_indexes("0-2,5,9", completions=6)  # {0, 1, 2, 5}: past completions is dropped

- ``backoffLimitPerIndex`` (KEP-3850): each pod of an index carries how many of the index's
  pods failed before it (``batch.kubernetes.io/job-index-failure-count``) and how many the pod
  failure policy ignored (``batch.kubernetes.io/job-index-ignored-failure-count``, only once
  non-zero). A replacement pod takes the counts of the failed pod it replaces, plus that pod's
  own failure. A failed pod fails its index when a ``FailIndex`` rule matches it, or when it
  counts and the index had already failed ``backoffLimitPerIndex`` times before it.
- ``successPolicy`` (KEP-3998): the first rule whose ``succeededIndexes`` have all succeeded
  (or at least ``succeededCount`` of them), or, without indexes, under which at least
  ``succeededCount`` indexes have succeeded, is met.

Indexes are plain sets of ints: an Indexed Job has at most 100,000 pods running (validation),
and its intervals are read once per sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .podfailurepolicy import verdict

__all__ = ["COMPLETION_INDEX", "FAILURE_COUNT", "IGNORED_FAILURE_COUNT", "completion_index", "compress_indexes",
           "failure_annotations", "failure_counts", "fails_its_index", "parse_indexes", "pods_being_replaced",
           "success_policy_met"]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
_INT32_MAX = 2**31 - 1


def compress_indexes(indexes: Iterable[int]) -> str:
    """The interval string of ``indexes``: ``{0, 1, 2, 5, 7, 8}`` -> ``"0-2,5,7,8"`` (a run of
    two is written as two indexes, as upstream's ``orderedIntervals.String``)."""
    parts: list[str] = []
    ordered = sorted(set(indexes))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        parts.append(str(first) if first == last else f"{first},{last}" if last == first + 1 else f"{first}-{last}")
        i = j + 1
    return ",".join(parts)


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """The indexes below ``completions`` an interval string names, read as leniently as
    upstream's ``parseIndexesFromString``: a fragment that is not a number is skipped, the
    first interval starting at or past ``completions`` ends the list, and one ending past it
    is cut short."""
    indexes: set[int] = set()
    if not text:
        return indexes
    for fragment in text.split(","):
        bounds = fragment.split("-")
        try:
            first = int(bounds[0])
            last = int(bounds[1]) if len(bounds) > 1 else first
        except ValueError:
            continue
        if first >= completions:
            break
        indexes.update(range(max(first, 0), min(last, completions - 1) + 1))
    return indexes


def completion_index(pod: Mapping[str, Any]) -> int | None:
    """The pod's index (its ``batch.kubernetes.io/job-completion-index`` annotation), None
    when missing, not a number or negative."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        index = int(value) if value is not None else -1
    except ValueError:
        return None
    return index if index >= 0 else None


def _count(annotations: Mapping[str, Any], key: str) -> int:
    """An annotation's count, 0 when missing, not a number, negative or past int32."""
    try:
        value = int(annotations.get(key, 0))
    except (TypeError, ValueError):
        return 0
    return value if 0 <= value <= _INT32_MAX else 0


def failure_counts(pod: Mapping[str, Any]) -> tuple[int, int]:
    """How many of its index's pods failed before ``pod``: (counted, ignored by the policy)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return _count(annotations, FAILURE_COUNT), _count(annotations, IGNORED_FAILURE_COUNT)


def fails_its_index(policy: Mapping[str, Any] | None, backoff_limit_per_index: int, pod: Mapping[str, Any]) -> bool:
    """Whether the failed ``pod`` fails its index: a ``FailIndex`` rule matches it, or it counts
    (no rule, or a ``Count`` rule) and its index had failed ``backoffLimitPerIndex`` times."""
    judged = verdict(policy, pod)
    if judged.action == "FailIndex":
        return True
    return judged.counts and failure_counts(pod)[0] >= backoff_limit_per_index


def failure_annotations(policy: Mapping[str, Any] | None, replaced: Mapping[str, Any] | None) -> dict[str, str]:
    """The counts a new pod of an index carries, from the failed pod it replaces (if any):
    that pod's counts with its own failure added, as counted or as ignored."""
    counted, ignored = 0, 0
    if replaced is not None:
        counted, ignored = failure_counts(replaced)
        if verdict(policy, replaced).counts:
            counted += 1
        else:
            ignored += 1
    annotations = {FAILURE_COUNT: str(counted)}
    if ignored:
        annotations[IGNORED_FAILURE_COUNT] = str(ignored)
    return annotations


def _finished_at(pod: Mapping[str, Any]) -> str:
    """When the pod ended: its containers' last ``finishedAt`` (RFC 3339 strings, which sort
    as times), else when it was deleted or created."""
    status, meta = pod.get("status") or {}, pod.get("metadata") or {}
    ends = [str(t) for field in ("containerStatuses", "initContainerStatuses") for cs in status.get(field) or ()
            if (t := ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))]
    return max(ends, default=str(meta.get("deletionTimestamp") or meta.get("creationTimestamp") or ""))


def pods_being_replaced(failed: Iterable[Mapping[str, Any]], settled: set[int],
                        completions: int) -> dict[int, Mapping[str, Any]]:
    """Per index not ``settled`` (succeeded, failed, or running a pod), the failed pod its next
    pod replaces: the one with the most failures before it, the last to end among equals."""
    replaced: dict[int, Mapping[str, Any]] = {}
    for pod in failed:
        index = completion_index(pod)
        if index is None or index >= completions or index in settled:
            continue
        rank = (sum(failure_counts(pod)), _finished_at(pod))
        last = replaced.get(index)
        if last is None or rank >= (sum(failure_counts(last)), _finished_at(last)):
            replaced[index] = pod
    return replaced


def success_policy_met(policy: Mapping[str, Any] | None, completions: int, succeeded: set[int]) -> str | None:
    """The message of the first rule of ``policy`` that the ``succeeded`` indexes meet
    (``Matched rules at index N``), None while none is met."""
    if not policy or not succeeded:
        return None
    for position, rule in enumerate(policy.get("rules") or ()):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = parse_indexes(str(rule["succeededIndexes"]), completions)
            if not required:
                continue
            done = len(required & succeeded)
            if done == len(required) or (count is not None and done >= int(count)):
                return f"Matched rules at index {position}"
        elif count is not None and len(succeeded) >= int(count):
            return f"Matched rules at index {position}"
    return None
