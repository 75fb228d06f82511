"""A Job's pods tracked with a finalizer, as upstream's Job controller tracks them
(KEP-2307, "Job tracking without lingering pods", GA since 1.26).

Every pod the Job controller creates carries ``batch.kubernetes.io/job-tracking``
(``FINALIZER``). While a pod carries it, the pod is not counted in the Job's status
yet, and it cannot leave the store: deleted by hand, by the pod garbage collector
or by an eviction, it stays terminating until its Job has seen how it ended. Once
it has finished (``Succeeded``, or failed as ``is_failed`` says), the controller

1. records its uid in ``status.uncountedTerminatedPods`` (``succeeded`` or
   ``failed``; an Indexed Job's success goes straight into
   ``status.completedIndexes`` and its failed indexes into ``failedIndexes``,
   which are sets, so counting one again changes nothing),
2. removes the finalizer from the pod,
3. moves the uids whose pod no longer carries the finalizer out of the lists
   and into ``status.succeeded``/``status.failed`` (``Uncounted.settle``).

A crash between two steps loses nothing and counts nothing twice: a uid in the
lists is not counted again from its pod, and a pod without the finalizer is not
looked at. So counts survive their pods: deleting finished pods lowers no count
and restarts no index's failure count.

Invariants:
- a uid is in at most one of the lists; the lists hold at most ``MAX_UNCOUNTED``
  uids between them after a sync (upstream's cap, keeping the status small);
- a pod without the finalizer is counted already (or was never to be: the pods
  a suspended Job deletes lose it before they are deleted);
- a pod of a Job that is gone, finished or being deleted, or of no Job any more
  (orphaned), loses the finalizer uncounted, so nothing stays terminating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FINALIZER", "MAX_UNCOUNTED", "REMOVE_FINALIZER", "Uncounted", "has_finalizer", "is_failed",
           "record_finished"]

FINALIZER = "batch.kubernetes.io/job-tracking"
MAX_UNCOUNTED = 500  # upstream's MaxUncountedPods: the lists' uids, about 20 KB
# the strategic merge patch that takes the finalizer out of a pod, leaving any other
REMOVE_FINALIZER = {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}}


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or ())


def is_failed(pod: Mapping[str, Any], failed_only: bool) -> bool:
    """Whether ``pod`` counts as failed (upstream's ``isPodFailed``): its phase is ``Failed``,
    or, unless the Job replaces only failed pods (``failed_only``: a pod failure policy, or
    ``podReplacementPolicy: Failed``), it is being deleted and has not succeeded."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == "Failed":
        return True
    if failed_only:
        return False
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and phase != "Succeeded"


@dataclass(slots=True)
class Uncounted:
    """``status.uncountedTerminatedPods``: the uids of finished pods recorded but not yet in
    the counts, in the order they were recorded."""

    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Uncounted:
        lists = status.get("uncountedTerminatedPods") or {}
        return cls([str(u) for u in lists.get("succeeded") or ()], [str(u) for u in lists.get("failed") or ()])

    def __len__(self) -> int:
        return len(self.succeeded) + len(self.failed)

    def settle(self, with_finalizer: Iterable[str]) -> tuple[int, int]:
        """Takes out the uids whose pods no longer carry the finalizer (removed, or the pod
        gone); returns how many succeeded and failed were taken, to add to the counts."""
        keep = set(with_finalizer)
        succeeded = [u for u in self.succeeded if u in keep]
        failed = [u for u in self.failed if u in keep]
        moved = (len(self.succeeded) - len(succeeded), len(self.failed) - len(failed))
        self.succeeded, self.failed = succeeded, failed
        return moved

    def as_status(self) -> dict[str, list[str] | None]:
        """The field as a merge patch writes it: an empty list removed (upstream's omitempty)."""
        return {"succeeded": list(self.succeeded) or None, "failed": list(self.failed) or None}


_Pod = Mapping[str, Any]


def record_finished(tracked: Sequence[_Pod], uncounted: Uncounted, *, failed_only: bool, finishing: bool,
                    failing: bool, delayed: set[str], indexed: bool, counts: Callable[[_Pod], bool]) -> list[_Pod]:
    """Step 1 for the ``tracked`` pods (those carrying the finalizer): the uids of the pods to
    count are added to ``uncounted``, and the pods whose finalizer may go are returned, as
    upstream's trackJobStatusAndRemoveFinalizers decides them:

    - a pod goes once it has succeeded or failed (but for a failed pod ``delayed`` until its
      index's next pod carries its counts), and every pod once the Job's fate is known
      (``finishing``: SuccessCriteriaMet or FailureTarget);
    - a succeeded pod is counted (an Indexed Job's only in ``completedIndexes``), a failed one if
      ``counts`` says so (its policy's verdict, its index valid), and, the Job ``failing``,
      every pod not succeeded;
    - at most ``MAX_UNCOUNTED`` uids are listed: the rest wait for the next sync."""
    removable: list[_Pod] = []
    for pod in tracked:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        succeeded = (pod.get("status") or {}).get("phase") == "Succeeded"
        failed = is_failed(pod, failed_only)
        if not (finishing or succeeded or (failed and uid not in delayed)):
            continue
        removable.append(pod)
        if succeeded and uid not in uncounted.failed:
            if not indexed and uid not in uncounted.succeeded:
                uncounted.succeeded.append(uid)
        elif (failed or failing) and uid not in uncounted.failed and counts(pod):
            uncounted.failed.append(uid)
        if len(uncounted) >= MAX_UNCOUNTED:  # (the status write requeues the Job)
            break
    return removable
