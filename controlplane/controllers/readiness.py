"""Pod readiness and availability, as the workload controllers count them.

A pod is *ready* when its ``Ready`` condition is true, and *available* once it has
been ready for its owner's ``minReadySeconds`` (from the condition's
``lastTransitionTime``; at once when that is 0), as upstream's
``podutil.IsPodAvailable``. ``available`` also says when the next ready pod will
become available, so a controller can look again then.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["available", "is_ready", "ready_since", "seconds_since"]


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or ()
                 if c.get("type") == "Ready" and c.get("status") == "True"), None)


def is_ready(pod: Mapping[str, Any]) -> bool:
    return _ready_condition(pod) is not None


def ready_since(pod: Mapping[str, Any]) -> Any:
    """When the pod's Ready condition last turned true (None if it is not ready)."""
    condition = _ready_condition(pod)
    return None if condition is None else condition.get("lastTransitionTime")


def seconds_since(timestamp: Any) -> float:
    """Seconds since an RFC 3339 time (0 for none or one that does not parse)."""
    try:
        then = datetime.datetime.strptime(str(timestamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return 0.0
    return (datetime.datetime.now(datetime.UTC) - then).total_seconds()


def available(pods: Iterable[Mapping[str, Any]], min_ready_seconds: float) -> tuple[int, float | None]:
    """How many of ``pods`` are available, and in how many seconds the next ready one will
    be (None if none is waiting)."""
    count, soonest = 0, None
    for pod in pods:
        if not is_ready(pod):
            continue
        wait = min_ready_seconds - seconds_since(ready_since(pod)) if min_ready_seconds else 0.0
        if wait <= 0:
            count += 1
        elif soonest is None or wait < soonest:
            soonest = wait
    return count, soonest
