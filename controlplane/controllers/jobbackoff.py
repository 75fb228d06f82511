"""The delay before a Job's failed pods are replaced, as upstream's (pkg/controller/job/
backoff_utils.go).

After ``n`` consecutive failures a new pod waits ``base * 2**(n-1)`` seconds from the last
failure, at most ``cap`` (upstream: 10 s and 6 minutes, ``config.JobBackoff``)::

    delay(failures=3, last_failure=t, base=10, cap=360, now=t + 5)   # 40 - 5 = 35.0

- A Job's record (``BackoffRecord``) counts its failures since its last success: the pods
  that finished since the record was last brought up to date are folded in (``advanced``),
  a success among them starting the count again from the failures after it, by finish time.
  The Job controller keeps one per Job while it runs, in memory as upstream's.
- An Indexed Job with ``backoffLimitPerIndex`` waits per index instead: the failures are its
  last failed pod's index failure counts (counted and ignored) plus that pod's own, from when
  it finished (``index_delay``).
- A pod's finish time (``finished_at``): its containers' last ``finishedAt`` once all have
  one, else when its Ready condition turned False, else its deletion time less its grace
  period, else its creation.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .indexedjobs import failure_counts

__all__ = ["BackoffRecord", "delay", "finished_at", "index_delay"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp (fractions of seconds or not), None when missing or unreadable."""
    if not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _containers_finished_at(pod: Mapping[str, Any]) -> datetime.datetime | None:
    """The last ``finishedAt`` of the pod's containers and sidecars (init containers with
    ``restartPolicy: Always``), None while one of them has not finished."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    sidecars = {c.get("name") for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
    statuses = [*(status.get("containerStatuses") or ()),
                *(s for s in status.get("initContainerStatuses") or () if s.get("name") in sidecars)]
    ends = [_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt")) for s in statuses]
    if not ends or any(end is None for end in ends):
        return None
    return max(end for end in ends if end is not None)


def finished_at(pod: Mapping[str, Any]) -> datetime.datetime:
    """When the pod ended, as upstream's ``getFinishedTime`` reads it (the module's docstring)."""
    moment = _containers_finished_at(pod)
    if moment is not None:
        return moment
    status, meta = pod.get("status") or {}, pod.get("metadata") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") == "False" and (moment := _time(ready.get("lastTransitionTime"))):
        return moment
    if (moment := _time(meta.get("deletionTimestamp"))) is not None:
        return moment - datetime.timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    return _time(meta.get("creationTimestamp")) or _EPOCH


def delay(failures: int, last_failure: datetime.datetime | None, base: float, cap: float,
          now: datetime.datetime | None = None) -> float:
    """The seconds still to wait after ``failures`` consecutive failures, the last at
    ``last_failure``: ``base`` doubled per failure after the first, at most ``cap``, less the
    time since; 0 without failures or once waited."""
    if failures <= 0 or last_failure is None:
        return 0.0
    wait = min(base * 2.0 ** min(failures - 1, 64), cap)
    since = ((now or datetime.datetime.now(datetime.UTC)) - last_failure).total_seconds()
    return max(wait - since, 0.0)


def index_delay(last_failed: Mapping[str, Any] | None, base: float, cap: float,
                now: datetime.datetime | None = None) -> float:
    """The seconds an index of a Job with ``backoffLimitPerIndex`` still waits for its next pod,
    from its ``last_failed`` pod (None: it has not failed, no wait)."""
    if last_failed is None:
        return 0.0
    counted, ignored = failure_counts(last_failed)
    return delay(counted + ignored + 1, finished_at(last_failed), base, cap, now)


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    """A Job's failures since its last success, and when the last of them ended."""

    failures: int = 0
    last_failure: datetime.datetime | None = None

    def advanced(self, succeeded: Iterable[Mapping[str, Any]],
                 failed: Iterable[Mapping[str, Any]]) -> BackoffRecord:
        """The record once the pods newly ``succeeded`` and ``failed`` are counted: their
        failures added; or, with a success among them, only the failures that ended after
        the last success."""
        failures = sorted(finished_at(p) for p in failed)
        successes = [finished_at(p) for p in succeeded]
        if not successes:
            if not failures:
                return self
            return BackoffRecord(self.failures + len(failures), failures[-1])
        last_success = max(successes)
        after = [moment for moment in failures if moment > last_success]
        return BackoffRecord(len(after), after[-1] if after else None)

    def delay(self, base: float, cap: float, now: datetime.datetime | None = None) -> float:
        """The seconds still to wait before the Job's next pod."""
        return delay(self.failures, self.last_failure, base, cap, now)
