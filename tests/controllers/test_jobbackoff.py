"""The delay before a Job's failed pods are replaced (controllers/jobbackoff.py): the arithmetic
and the record alone, then the Job controller in a server whose delays start at a fraction of a
second (upstream's 10 s shortened through ``Config.job_backoff``), the tests playing the kubelet
and timing each replacement from the ``finishedAt`` they wrote."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config, JobBackoff
from controlplane.controllers.indexedjobs import COMPLETION_INDEX, FAILURE_COUNT, IGNORED_FAILURE_COUNT
from controlplane.controllers.jobbackoff import BackoffRecord, delay, finished_at, index_delay
from tests.controllers.helpers import until
from tests.front_socket import serving

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ended(seconds: float, phase: str = "Failed", **annotations: str) -> dict[str, Any]:
    """A pod whose container finished ``seconds`` after T0."""
    return {"metadata": {"uid": f"{phase}-{seconds}", "annotations": annotations,
                         "creationTimestamp": "2025-01-01T00:00:00Z"},
            "status": {"phase": phase, "containerStatuses": [{"name": "c", "state": {"terminated": {
                "exitCode": 1, "finishedAt": _stamp(T0 + datetime.timedelta(seconds=seconds))}}}]}}


# -- the arithmetic ---------------------------------------------------------------------------
def test_the_delay_doubles_per_consecutive_failure_up_to_the_cap() -> None:
    assert [delay(n, T0, 10, 360, now=T0) for n in range(8)] == [0, 10, 20, 40, 80, 160, 320, 360]
    assert delay(3, T0, 10, 360, now=T0 + datetime.timedelta(seconds=15)) == 25  # less the time since
    assert delay(1, T0, 10, 360, now=T0 + datetime.timedelta(seconds=11)) == 0
    assert delay(10_000, T0, 10, 360, now=T0) == 360  # (no overflow)


def test_a_pods_finish_time_as_upstream_reads_it() -> None:
    pod = ended(3)
    assert finished_at(pod) == T0 + datetime.timedelta(seconds=3)
    # a container still running: the Ready condition's turn to False, then the deletion less its grace
    pod["status"]["containerStatuses"].append({"name": "d", "state": {"running": {}}})
    pod["metadata"].update(deletionTimestamp="2026-01-01T00:01:00Z", deletionGracePeriodSeconds=30)
    assert finished_at(pod) == T0 + datetime.timedelta(seconds=30)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:05Z"}]
    assert finished_at(pod) == T0 + datetime.timedelta(seconds=5)
    assert finished_at({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}) == T0


def test_the_record_counts_the_failures_since_the_last_success() -> None:
    record = BackoffRecord().advanced([], [ended(1), ended(3), ended(2)])
    assert record == BackoffRecord(3, T0 + datetime.timedelta(seconds=3))
    assert record.advanced([], []) is record
    assert record.advanced([], [ended(4)]) == BackoffRecord(4, T0 + datetime.timedelta(seconds=4))
    # a success among the new pods: only the failures that ended after it count
    assert record.advanced([ended(5, "Succeeded")], [ended(4), ended(6), ended(7)]) == \
        BackoffRecord(2, T0 + datetime.timedelta(seconds=7))
    assert record.advanced([ended(5, "Succeeded")], [ended(4)]) == BackoffRecord()
    assert BackoffRecord().delay(10, 360) == 0


def test_an_index_waits_by_its_last_failed_pods_counts() -> None:
    assert index_delay(None, 10, 360, now=T0) == 0
    assert index_delay(ended(0, **{FAILURE_COUNT: "0"}), 10, 360, now=T0) == 10
    # its counted and ignored failures before it, and its own
    pod = ended(0, **{FAILURE_COUNT: "1", IGNORED_FAILURE_COUNT: "1"})
    assert index_delay(pod, 10, 360, now=T0 + datetime.timedelta(seconds=5)) == 35


# -- the Job controller ---------------------------------------------------------------------
# Times in the API are whole seconds, so the controller counts a delay from the second its pod
# finished in; each failure below is written early in a second (``finish``), well before its
# delay would have passed without one.
BASE = 0.5


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    """The server's components in process, its API over a real socket (the test's requests)."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, job_backoff=JobBackoff(base=BASE, cap=60)))
    async with app.router.lifespan_context(app), serving(app.state.front) as port:
        c = Client(f"http://127.0.0.1:{port}")
        try:
            yield c
        finally:
            await c.aclose()


def job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


async def running(c: Client, name: str, seen: set[str]) -> list[dict[str, Any]]:
    """The job's pods not yet finished, none of them ``seen`` before."""
    items = (await c.list(PODS, labelSelector=f"job-name={name}"))["items"]
    return [p for p in items if p["metadata"]["name"] not in seen
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


async def finish(c: Client, pod: dict[str, Any], phase: str, early: bool = True) -> float:
    """Ends the pod's container, as a kubelet would, at most 0.2 s into a second unless not
    ``early``; the second its ``finishedAt`` says (wall-clock seconds)."""
    if early and (into := time.time() % 1) > 0.2:
        await asyncio.sleep(1.01 - into)
    now = time.time()
    await c.patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": {
        "phase": phase, "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": False,
                                               "restartCount": 0, "state": {"terminated": {
                                                   "exitCode": 0 if phase == "Succeeded" else 1,
                                                   "finishedAt": _stamp(datetime.datetime.fromtimestamp(
                                                       now, datetime.UTC))}}}]}})
    return float(int(now))


async def next_pod(c: Client, name: str, seen: set[str]) -> tuple[dict[str, Any], float]:
    """The job's next new pod, and when it was first seen."""
    (pod,) = await until(lambda: running(c, name, seen))
    seen.add(pod["metadata"]["name"])
    return pod, time.time()


async def test_each_consecutive_failure_doubles_the_wait_and_a_success_starts_the_count_again(
        client: Client) -> None:
    c, seen = client, set[str]()
    await c.create(JOBS, job("flaky", backoffLimit=6, completions=2))
    pod, _ = await next_pod(c, "flaky", seen)
    for failures in (1, 2):
        failed_at = await finish(c, pod, "Failed")
        pod, seen_at = await next_pod(c, "flaky", seen)
        assert BASE * 2 ** (failures - 1) <= seen_at - failed_at < BASE * 2 ** (failures - 1) + 0.5
    await finish(c, pod, "Succeeded", early=False)
    pod, _ = await next_pod(c, "flaky", seen)  # (the last failure's delay is over)
    # one failure since the last success: the first delay again, not a third doubled one
    failed_at = await finish(c, pod, "Failed")
    _, seen_at = await next_pod(c, "flaky", seen)
    assert BASE <= seen_at - failed_at < 2 * BASE
    assert (await c.get(f"{JOBS}/flaky"))["status"]["failed"] == 3


async def test_each_index_waits_on_its_own_failures(client: Client) -> None:
    c, seen = client, set[str]()
    await c.create(JOBS, job("per", completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=3))
    first = {int(p["metadata"]["annotations"][COMPLETION_INDEX]): p
             for p in await until(lambda: _pods(c, "per", 2))}
    seen.update(p["metadata"]["name"] for p in first.values())
    failed_at = await finish(c, first[0], "Failed")
    again, seen_at = await next_pod(c, "per", seen)  # index 0, after the first delay; index 1 runs on
    assert (again["metadata"]["annotations"][COMPLETION_INDEX], again["metadata"]["annotations"][FAILURE_COUNT]) == \
        ("0", "1")
    assert BASE <= seen_at - failed_at < BASE + 0.5
    # index 0's second failure waits twice as long; index 1's first, in the same second, the first delay
    failed_at = await finish(c, again, "Failed")
    assert await finish(c, first[1], "Failed", early=False) == failed_at
    one, one_at = await next_pod(c, "per", seen)
    zero, zero_at = await next_pod(c, "per", seen)
    assert [p["metadata"]["annotations"][COMPLETION_INDEX] for p in (one, zero)] == ["1", "0"]
    assert BASE <= one_at - failed_at < 2 * BASE
    assert 2 * BASE <= zero_at - failed_at < 2 * BASE + 0.5


async def _pods(c: Client, name: str, n: int) -> list[dict[str, Any]] | None:
    pods = await running(c, name, set())
    return pods if len(pods) == n else None


async def test_the_wait_is_not_reset_by_deleting_the_failed_pods(client: Client) -> None:
    """The record is fed by the pods as they finish, not read from the pods still there: the
    failed pods deleted (the second before it was counted, which its finalizer waits for),
    the next pod still waits twice the first delay."""
    c, seen = client, set[str]()
    await c.create(JOBS, job("forgetful", backoffLimit=6))
    first, _ = await next_pod(c, "forgetful", seen)
    await finish(c, first, "Failed")
    second, _ = await next_pod(c, "forgetful", seen)
    await c.delete(f"{PODS}/{first['metadata']['name']}")
    failed_at = await finish(c, second, "Failed")
    await c.delete(f"{PODS}/{second['metadata']['name']}")
    _, seen_at = await next_pod(c, "forgetful", seen)
    assert 2 * BASE <= seen_at - failed_at < 2 * BASE + 0.5
    assert (await c.get(f"{JOBS}/forgetful"))["status"]["failed"] == 2
    left = {p["metadata"]["name"] for p in (await c.list(PODS, labelSelector="job-name=forgetful"))["items"]}
    assert not left & {first["metadata"]["name"], second["metadata"]["name"]}  # (counted, then let go)


async def test_an_index_keeps_its_failure_count_when_its_failed_pod_is_deleted(client: Client) -> None:
    """The failed pod is kept (its finalizer) until its index's next pod carries its counts,
    deleted by hand or not; then it goes."""
    c, seen = client, set[str]()
    await c.create(JOBS, job("counted", completionMode="Indexed", completions=1, backoffLimitPerIndex=1))
    first, _ = await next_pod(c, "counted", seen)
    await finish(c, first, "Failed")
    name = first["metadata"]["name"]
    await c.delete(f"{PODS}/{name}")  # during its index's delay
    held = await c.get(f"{PODS}/{name}")
    assert held["metadata"]["deletionTimestamp"]
    again, _ = await next_pod(c, "counted", seen)
    assert again["metadata"]["annotations"][FAILURE_COUNT] == "1"

    async def gone() -> bool:
        return name not in {p["metadata"]["name"] for p in (await c.list(PODS))["items"]}

    await until(gone)
    await finish(c, again, "Failed", early=False)  # its second failure: past a limit of 1

    async def failed_index() -> bool:
        return bool((await c.get(f"{JOBS}/counted"))["status"].get("failedIndexes") == "0")

    await until(failed_index)
