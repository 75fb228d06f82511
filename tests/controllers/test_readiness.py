"""Availability as the workload controllers count it (controllers/readiness.py)."""

from __future__ import annotations

import datetime
from typing import Any

from controlplane.controllers.readiness import available


def pod(ready: bool, seconds_ago: float) -> dict[str, Any]:
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return {"status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": when.strftime("%Y-%m-%dT%H:%M:%SZ")}]}}


def test_a_pod_is_available_once_ready_for_min_ready_seconds() -> None:
    pods = [pod(True, 100), pod(True, 3), pod(False, 100)]
    assert available(pods, 0) == (2, None)
    count, soonest = available(pods, 10)
    assert count == 1 and soonest is not None and 5 < soonest <= 8  # the second one, in about 7 s
    assert available([], 10) == (0, None)
