"""The pods' table columns READY, STATUS and RESTARTS, as kubectl's pod printer makes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.api.tables import as_table


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None, *, phase: str = "Running",
        init_specs: list[dict[str, Any]] | None = None, conditions: list[dict[str, Any]] | None = None,
        **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z", **meta},
            "spec": {"containers": [{"name": c["name"]} for c in containers],
                     "initContainers": init_specs or [{"name": c["name"]} for c in inits or ()]},
            "status": {"phase": phase, "containerStatuses": containers, "initContainerStatuses": inits or [],
                       "conditions": conditions or []}}


def columns(p: dict[str, Any]) -> tuple[str, str, str]:
    ready, status, restarts = as_table("pods", [p], None)["rows"][0]["cells"][1:4]
    return ready, status, restarts


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:01Z"}}
DONE = {"terminated": {"exitCode": 0, "reason": "Completed"}}


@pytest.mark.parametrize(("p", "expected"), [
    (pod([{"name": "a", "ready": True, "state": RUNNING}]), ("1/1", "Running", "0")),
    (pod([{"name": "a", "state": DONE}], phase="Succeeded"), ("0/1", "Completed", "0")),
    (pod([{"name": "a", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}], phase="Failed"),
     ("0/1", "Error", "0")),
    (pod([{"name": "a", "state": {"terminated": {"exitCode": 3}}}], phase="Failed"), ("0/1", "ExitCode:3", "0")),
    (pod([{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}],
         [{"name": "i", "state": {"running": {}}}], phase="Pending"), ("0/1", "Init:0/1", "0")),
    (pod([{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}],
         [{"name": "i", "state": DONE}, {"name": "j", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
         phase="Pending"), ("0/1", "Init:CrashLoopBackOff", "0")),
    (pod([{"name": "a", "ready": True, "state": RUNNING}, {"name": "b", "state": DONE}]), ("1/2", "NotReady", "0")),
    (pod([{"name": "a", "ready": True, "state": RUNNING}], [{"name": "s", "ready": True, "started": True,
                                                             "state": RUNNING}],
         init_specs=[{"name": "s", "restartPolicy": "Always"}]), ("2/2", "Running", "0")),
    (pod([{"name": "a", "ready": True, "state": RUNNING}], deletionTimestamp="2026-01-01T00:01:00Z"),
     ("1/1", "Terminating", "0")),
    (pod([], phase="Pending", conditions=[{"type": "PodScheduled", "status": "False",
                                           "reason": "SchedulingGated"}]), ("0/0", "SchedulingGated", "0")),
])
def test_status_as_kubectl_prints_it(p: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert columns(p) == expected


def test_restarts_say_when_the_last_was() -> None:
    finished = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = pod([{"name": "a", "ready": True, "state": RUNNING, "restartCount": 2,
              "lastState": {"terminated": {"exitCode": 1, "finishedAt": finished}}}])
    assert columns(p) == ("1/1", "Running", "2 (3m ago)")


def test_a_sidecar_not_started_holds_the_init_status() -> None:
    p = pod([{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}],
            [{"name": "s", "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}],
            init_specs=[{"name": "s", "restartPolicy": "Always"}], phase="Pending")
    assert columns(p) == ("0/2", "Init:ContainerCreating", "0")
