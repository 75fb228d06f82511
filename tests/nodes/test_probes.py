"""The prober's timing of started and ready containers (nodes/probes.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.nodes.native import pod_ready
from controlplane.nodes.probes import container_times, next_change, probed, starting

START = datetime(2026, 1, 1, tzinfo=UTC)
STAMP = START.strftime("%Y-%m-%dT%H:%M:%SZ")


def funcs() -> dict[str, Any]:
    return {"Now": lambda: STAMP, "PodIPWith": lambda *a: "10.0.0.5", "NodeIPWith": lambda *a: "172.16.0.2"}


def pod(*containers: dict[str, Any], restart: str = "Always") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u", "generation": 1},
            "spec": {"nodeName": "n", "restartPolicy": restart, "containers": list(containers)}}


def test_container_times_follow_the_workers_ticks() -> None:
    assert container_times({"name": "plain"}) == (0, 0)
    assert container_times({"readinessProbe": {"periodSeconds": 5}}) == (0, 0)  # probed at once
    assert container_times({"readinessProbe": {"initialDelaySeconds": 15, "periodSeconds": 5}}) == (0, 15)
    assert container_times({"readinessProbe": {"initialDelaySeconds": 12, "periodSeconds": 5}}) == (0, 15)
    assert container_times({"readinessProbe": {"initialDelaySeconds": 3}}) == (0, 10)  # periodSeconds 10
    assert container_times({"readinessProbe": {"successThreshold": 3, "periodSeconds": 2}}) == (0, 4)
    # the readiness worker waits for the startup probe, then for its own next tick
    assert container_times({"startupProbe": {"initialDelaySeconds": 5, "periodSeconds": 2},
                            "readinessProbe": {"periodSeconds": 4}}) == (6, 8)
    assert container_times({"startupProbe": {"initialDelaySeconds": 5, "periodSeconds": 5}}) == (5, 5)


def test_a_container_waiting_on_its_probes_starts_not_ready_then_becomes_ready() -> None:
    p = pod({"name": "web", "image": "nginx", "startupProbe": {"initialDelaySeconds": 4, "periodSeconds": 2},
             "readinessProbe": {"initialDelaySeconds": 6, "periodSeconds": 3}},
            {"name": "plain", "image": "busybox"})
    status = starting(p, pod_ready(p, funcs()))
    web, plain = status["containerStatuses"]
    assert (web["ready"], web["started"], plain["ready"], plain["started"]) == (False, False, True, True)
    conditions = {c["type"]: c for c in status["conditions"]}
    for kind in ("Ready", "ContainersReady"):
        assert conditions[kind]["status"] == "False" and conditions[kind]["reason"] == "ContainersNotReady"
        assert conditions[kind]["message"] == "containers with unready status: [web]"
    assert conditions["PodScheduled"]["status"] == conditions["Initialized"]["status"] == "True"
    p["status"] = status
    assert next_change(p, START) == 4  # started first
    assert probed(p, START + timedelta(seconds=3)) is None
    p["status"] = {**status, **probed(p, START + timedelta(seconds=4))}  # type: ignore[dict-item]
    web = p["status"]["containerStatuses"][0]
    assert (web["started"], web["ready"]) == (True, False)
    assert next_change(p, START + timedelta(seconds=4)) == 2  # ready at 6, the first tick past both
    p["status"] = {**p["status"], **probed(p, START + timedelta(seconds=6))}  # type: ignore[dict-item]
    assert [c["ready"] for c in p["status"]["containerStatuses"]] == [True, True]
    conditions = {c["type"]: c for c in p["status"]["conditions"]}
    assert conditions["Ready"] == {"type": "Ready", "status": "True", "observedGeneration": 1,
                                   "lastTransitionTime": "2026-01-01T00:00:06Z"}
    assert conditions["ContainersReady"]["status"] == "True"
    assert next_change(p, START + timedelta(seconds=6)) is None


def test_pods_without_delays_and_batch_pods_are_ready_at_once() -> None:
    no_delay = pod({"name": "web", "image": "nginx", "readinessProbe": {"periodSeconds": 5}})
    status = pod_ready(no_delay, funcs())
    assert starting(no_delay, status) is status
    job = pod({"name": "task", "image": "busybox", "readinessProbe": {"initialDelaySeconds": 30}}, restart="Never")
    status = pod_ready(job, funcs())
    assert starting(job, status) is status
    job["status"] = status
    assert next_change(job, START) is None


def test_a_terminating_pod_waits_on_no_probe() -> None:
    p = pod({"name": "web", "image": "nginx", "readinessProbe": {"initialDelaySeconds": 30}})
    p["status"] = starting(p, pod_ready(p, funcs()))
    assert next_change(p, START) == 30
    p["metadata"]["deletionTimestamp"] = STAMP
    assert next_change(p, START) is None and probed(p, START + timedelta(seconds=60)) is None
