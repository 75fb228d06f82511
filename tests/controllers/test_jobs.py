"""The Job controller (controllers/jobs.py), inside a server with its scheduler and no nodes:
the tests play the kubelet, writing each pod's phase themselves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config, JobBackoff
from controlplane.controllers.jobs import COMPLETION_INDEX, JobController, _surplus, compress_indexes
from controlplane.controllers.jobtracking import FINALIZER
from tests.controllers.helpers import until

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    # (failed pods replaced after 10 ms, not 10 s: tests/controllers/test_jobbackoff.py times the delay)
    # (the pod GC sweeps every 0.1 s, not 20: an evicted unscheduled pod is failed at once)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, job_backoff=JobBackoff(base=0.01, cap=0.08),
                            pod_gc_check_period=0.1))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


def job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


async def pods_of(c: Client, name: str, active: bool = True) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await c.list(PODS, labelSelector=f"job-name={name}"))["items"]
    if active:
        items = [p for p in items if not p["metadata"].get("deletionTimestamp")
                 and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    return items


async def finish(c: Client, pod: dict[str, Any], phase: str) -> None:
    await c.patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": {"phase": phase}})


async def conditions(c: Client, name: str) -> dict[str, str]:
    got = await c.get(f"{JOBS}/{name}")
    return {cond["type"]: cond["reason"] for cond in (got.get("status") or {}).get("conditions") or ()
            if cond["status"] == "True"}


async def settled(c: Client, name: str, last: str) -> dict[str, str] | None:
    """The job's conditions once ``last`` is among them: the interim condition
    (FailureTarget, SuccessCriteriaMet) comes first, the terminal one after its pods."""
    got = await conditions(c, name)
    return got if last in got else None


def test_completed_indexes_are_compressed() -> None:
    assert compress_indexes({0, 1, 2, 5, 7, 8}) == "0-2,5,7,8"  # a pair as two, as upstream
    assert compress_indexes(set()) == ""


async def test_a_job_runs_parallelism_pods_until_completions_succeed(client: Client) -> None:
    c = client
    await c.create(JOBS, job("work", completions=3, parallelism=2))
    first = await until(lambda: _exactly(c, "work", 2))
    for pod in first:
        (ref,) = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["controller"], pod["metadata"]["generateName"]) == ("Job", True, "work-")
    async def counted() -> dict[str, Any] | None:  # the pods show before the status that counts them
        status: dict[str, Any] = (await c.get(f"{JOBS}/work")).get("status") or {}
        return status if status.get("active") == 2 else None

    assert (await until(counted))["startTime"]
    await finish(c, first[0], "Succeeded")
    second = await until(lambda: _exactly(c, "work", 2, without={first[0]["metadata"]["name"]}))
    for pod in second:
        await finish(c, pod, "Succeeded")
    assert await until(lambda: settled(c, "work", "Complete")) == {"SuccessCriteriaMet": "CompletionsReached",
                                                                   "Complete": "CompletionsReached"}
    status = (await c.get(f"{JOBS}/work"))["status"]
    assert status["succeeded"] == 3 and "active" not in status and status["completionTime"]
    assert len(await pods_of(c, "work", active=False)) == 3  # no pod more than needed


async def test_a_job_without_completions_lets_its_other_pods_finish_after_a_success(client: Client) -> None:
    """A work-queue Job (no ``completions``): after one pod succeeds, no pod is started and
    none deleted; the Job completes once the others have finished, as upstream's manageJob."""
    c = client
    await c.create(JOBS, job("queue", parallelism=3))
    pods = await until(lambda: _exactly(c, "queue", 3))
    await finish(c, pods[0], "Succeeded")

    async def counted() -> dict[str, Any] | None:
        status: dict[str, Any] = (await c.get(f"{JOBS}/queue")).get("status") or {}
        return status if status.get("succeeded") == 1 else None

    status = await until(counted)
    assert status.get("active") == 2 and not status.get("conditions")
    assert len(await pods_of(c, "queue")) == 2  # the two still running are left to run
    await finish(c, pods[1], "Succeeded")
    await finish(c, pods[2], "Failed")  # (a later failure is not held against the Job)
    assert await until(lambda: settled(c, "queue", "Complete")) == {"SuccessCriteriaMet": "CompletionsReached",
                                                                    "Complete": "CompletionsReached"}
    status = (await c.get(f"{JOBS}/queue"))["status"]
    assert (status["succeeded"], status["failed"]) == (2, 1)
    assert len(await pods_of(c, "queue", active=False)) == 3  # none started after the success


async def test_lowering_parallelism_deletes_the_surplus_pods(client: Client) -> None:
    """As upstream's manageJob: active pods beyond a lowered ``parallelism`` are deleted (and,
    deleted before they finished under TerminatingOrFailed, counted as failed, as upstream's
    isPodFailed counts them); the Job goes on with the pods it keeps."""
    c = client
    await c.create(JOBS, job("narrow", completions=6, parallelism=3))
    await until(lambda: _exactly(c, "narrow", 3))
    await c.patch(f"{JOBS}/narrow", {"spec": {"parallelism": 1}})
    (kept,) = await until(lambda: _exactly(c, "narrow", 1))

    async def settled_counts() -> dict[str, Any] | None:
        status: dict[str, Any] = (await c.get(f"{JOBS}/narrow")).get("status") or {}
        return status if status.get("active") == 1 and status.get("failed") == 2 else None

    await until(settled_counts)
    await finish(c, kept, "Succeeded")
    (after,) = await until(lambda: _exactly(c, "narrow", 1, without={kept["metadata"]["name"]}))
    assert after["metadata"]["name"] != kept["metadata"]["name"]  # one at a time now


def test_the_surplus_of_an_indexed_job_goes_first_by_index() -> None:
    def pod(name: str, index: int, node: str = "n1") -> dict[str, Any]:
        return {"metadata": {"name": name, "annotations": {COMPLETION_INDEX: str(index)},
                             "creationTimestamp": f"2026-12-04T10:00:0{len(name)}Z"},
                "spec": {"nodeName": node}, "status": {"phase": "Running"}}
    active = [pod("a", 0), pod("b", 1), pod("bb", 1), pod("c", 5), pod("d", 2)]
    doomed = _surplus(3, True, 3, 1, active, {2})  # index 2 done, 5 out of range, 1 twice
    assert [p["metadata"]["name"] for p in doomed] == ["bb", "c", "d"]
    assert _surplus(None, False, 2, 1, active[:2], set()) == []  # after a success, none


async def _exactly(c: Client, name: str, n: int, without: set[str] | None = None) -> list[dict[str, Any]] | None:
    pods = [p for p in await pods_of(c, name) if p["metadata"]["name"] not in (without or set())]
    return pods if len(pods) == n else None


async def _none(c: Client, name: str) -> bool:
    return not await pods_of(c, name)


async def test_more_failures_than_the_backoff_limit_fail_the_job(client: Client) -> None:
    c = client
    await c.create(JOBS, job("flaky", backoffLimit=1, parallelism=2, completions=4))
    pods = await until(lambda: _exactly(c, "flaky", 2))
    await finish(c, pods[0], "Failed")
    replaced = await until(lambda: _exactly(c, "flaky", 2, without={pods[0]["metadata"]["name"]}))
    await finish(c, next(p for p in replaced if p["metadata"]["name"] != pods[1]["metadata"]["name"]), "Failed")
    assert await until(lambda: settled(c, "flaky", "Failed")) == {"FailureTarget": "BackoffLimitExceeded",
                                                                  "Failed": "BackoffLimitExceeded"}
    assert await pods_of(c, "flaky") == []  # the one still active was deleted
    assert (await c.get(f"{JOBS}/flaky"))["status"]["failed"] == 3  # and counted, as upstream counts it


async def test_an_indexed_job_gives_each_pod_its_index(client: Client) -> None:
    c = client
    await c.create(JOBS, job("idx", completions=3, parallelism=3, completionMode="Indexed"))
    pods = await until(lambda: _exactly(c, "idx", 3))
    by_index = {int(p["metadata"]["annotations"][COMPLETION_INDEX]): p for p in pods}
    assert sorted(by_index) == [0, 1, 2]
    pod = by_index[1]
    assert pod["metadata"]["labels"][COMPLETION_INDEX] == "1" and pod["spec"]["hostname"] == "idx-1"
    assert pod["metadata"]["name"].startswith("idx-1-")
    assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}} in \
        pod["spec"]["containers"][0]["env"]
    await finish(c, by_index[0], "Succeeded")
    await finish(c, by_index[2], "Succeeded")

    async def partial() -> bool:
        return bool((await c.get(f"{JOBS}/idx")).get("status", {}).get("completedIndexes") == "0,2")

    await until(partial)
    await finish(c, by_index[1], "Failed")  # index 1 runs again
    again = await until(lambda: _exactly(c, "idx", 1))
    assert again[0]["metadata"]["annotations"][COMPLETION_INDEX] == "1"
    await finish(c, again[0], "Succeeded")
    assert "Complete" in await until(lambda: settled(c, "idx", "Complete"))
    assert (await c.get(f"{JOBS}/idx"))["status"]["completedIndexes"] == "0-2"


async def test_suspend_and_resume(client: Client) -> None:
    c = client
    await c.create(JOBS, job("sus", parallelism=2, completions=2))
    await until(lambda: _exactly(c, "sus", 2))
    await c.patch(f"{JOBS}/sus", {"spec": {"suspend": True}})
    assert await until(lambda: conditions(c, "sus")) == {"Suspended": "JobSuspended"}
    await until(lambda: _none(c, "sus"))
    await c.patch(f"{JOBS}/sus", {"spec": {"suspend": False}})
    await until(lambda: _exactly(c, "sus", 2))

    async def resumed() -> bool:  # (the pods show before the status written after them)
        return await conditions(c, "sus") == {}

    await until(resumed)


async def test_an_active_deadline_fails_the_job(client: Client) -> None:
    c = client
    await c.create(JOBS, job("late", activeDeadlineSeconds=1))
    assert await until(lambda: settled(c, "late", "Failed"), timeout=10) == {
        "FailureTarget": "DeadlineExceeded", "Failed": "DeadlineExceeded"}
    assert await pods_of(c, "late") == []


async def test_a_finished_job_with_a_ttl_is_deleted_with_its_pods(client: Client) -> None:
    c = client
    await c.create(JOBS, job("brief", ttlSecondsAfterFinished=1))
    await c.create(JOBS, job("kept"))
    for name in ("brief", "kept"):
        pod = (await until(lambda name=name: pods_of(c, name)))[0]  # type: ignore[misc]
        await finish(c, pod, "Succeeded")
    await until(lambda: _gone(c, "brief"), timeout=15)
    assert await pods_of(c, "brief", active=False) == []
    assert "Complete" in await conditions(c, "kept")  # no TTL: it stays


async def _gone(c: Client, name: str) -> bool:
    try:
        await c.get(f"{JOBS}/{name}")
    except ApiError as e:
        return e.code == 404
    return False


async def test_deleting_a_job_orphans_its_pods_by_default_and_collects_them_in_background(client: Client) -> None:
    c = client
    await c.create(JOBS, job("keep", parallelism=2, completions=2))
    await c.create(JOBS, job("drop", parallelism=2, completions=2))
    await until(lambda: _exactly(c, "keep", 2))
    await until(lambda: _exactly(c, "drop", 2))
    await c.delete(f"{JOBS}/keep")  # no propagationPolicy: upstream's batch/v1 default is Orphan

    async def gone(name: str) -> bool:
        try:
            await c.get(f"{JOBS}/{name}")
        except ApiError as e:
            return e.code == 404
        return False

    await until(lambda: gone("keep"))
    kept = await pods_of(c, "keep")
    assert len(kept) == 2 and all(not p["metadata"].get("ownerReferences") for p in kept)
    await c.delete(f"{JOBS}/drop", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    await until(lambda: _none(c, "drop"))


# -- podFailurePolicy ---------------------------------------------------------------------------
async def fail_with(c: Client, pod: dict[str, Any], code: int, *conditions: str) -> None:
    """The pod fails as a kubelet reports it: its container terminated with ``code``."""
    await c.patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": {
        "phase": "Failed",
        "conditions": [{"type": t, "status": "True", "reason": "Test"} for t in conditions] or None,
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
                               "state": {"terminated": {"exitCode": code, "reason": "Error"}}}]}})


async def full_conditions(c: Client, name: str) -> dict[str, tuple[str, str]]:
    got = await c.get(f"{JOBS}/{name}")
    return {cond["type"]: (cond["reason"], cond["message"]) for cond in (got.get("status") or {}).get("conditions")
            or () if cond["status"] == "True"}


async def test_a_fail_job_rule_fails_the_job_at_once(client: Client) -> None:
    c = client
    await c.create(JOBS, job("fatal", parallelism=2, completions=4, podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}}]}))
    pods = await until(lambda: _exactly(c, "fatal", 2))
    await fail_with(c, pods[0], 42)
    message = (f"Container c for pod default/{pods[0]['metadata']['name']} failed with exit code 42 matching "
               "FailJob rule at index 0")

    async def failed() -> dict[str, tuple[str, str]] | None:
        got = await full_conditions(c, "fatal")
        return got if "Failed" in got else None

    assert await until(failed) == {"FailureTarget": ("PodFailurePolicy", message),
                                   "Failed": ("PodFailurePolicy", message)}
    assert await pods_of(c, "fatal") == []  # the other one was deleted, none replaced
    status = (await c.get(f"{JOBS}/fatal"))["status"]
    assert status["failed"] == 2 and "active" not in status  # the deleted one counted too, as upstream

    async def warned() -> bool:  # (the controller's event recorder writes after the status: wait for it)
        events = (await c.list("/api/v1/namespaces/default/events"))["items"]
        return any(e["reason"] == "PodFailurePolicy" and e["message"] == message and e["type"] == "Warning"
                   for e in events)

    assert await until(warned)


async def test_an_ignore_rule_does_not_count_against_the_backoff_limit(client: Client) -> None:
    c = client
    await c.create(JOBS, job("tolerant", backoffLimit=0, podFailurePolicy={"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}}]}))
    (first,) = await until(lambda: _exactly(c, "tolerant", 1))
    await fail_with(c, first, 137, "DisruptionTarget")
    (second,) = await until(lambda: _exactly(c, "tolerant", 1, without={first["metadata"]["name"]}))
    got = await c.get(f"{JOBS}/tolerant")
    assert "failed" not in got["status"] and await conditions(c, "tolerant") == {}
    await fail_with(c, second, 1)  # counted: past a backoff limit of 0
    assert await until(lambda: settled(c, "tolerant", "Failed")) == {"FailureTarget": "BackoffLimitExceeded",
                                                                     "Failed": "BackoffLimitExceeded"}
    assert (await c.get(f"{JOBS}/tolerant"))["status"]["failed"] == 1


async def test_an_evicted_pod_is_judged_by_its_disruption_condition(client: Client) -> None:
    """The eviction gives the pod DisruptionTarget and deletes it before it fails: the Job
    judges it as the kubelet's failed pod would be judged."""
    c = client
    rules = {"ignored": "Ignore", "stopped": "FailJob"}
    for name, action in rules.items():
        await c.create(JOBS, job(name, backoffLimit=0, podFailurePolicy={"rules": [
            {"action": action, "onPodConditions": [{"type": "DisruptionTarget"}]}]}))
    for name in rules:
        (pod,) = await until(lambda name=name: _exactly(c, name, 1))  # type: ignore[misc]
        await c.create(f"{PODS}/{pod['metadata']['name']}/eviction",
                       {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod["metadata"]["name"]}})
        rules[name] = pod["metadata"]["name"]
    # Ignore: replaced, not counted
    await until(lambda: _exactly(c, "ignored", 1, without={rules["ignored"]}))
    assert "failed" not in (await c.get(f"{JOBS}/ignored"))["status"]
    # FailJob: the Job fails
    message = f"Pod default/{rules['stopped']} has condition DisruptionTarget matching FailJob rule at index 0"

    async def failed() -> dict[str, tuple[str, str]] | None:
        got = await full_conditions(c, "stopped")
        return got if "Failed" in got else None

    assert (await until(failed))["Failed"] == ("PodFailurePolicy", message)
    assert await conditions(c, "ignored") == {}


async def test_with_a_policy_a_deleted_pod_is_held_until_its_kubelet_fails_it_then_judged(client: Client) -> None:
    """podReplacementPolicy Failed: the tracking finalizer keeps a deleted pod until it has
    failed; it is neither replaced nor counted before (its node, never seen, plays no kubelet:
    the test does)."""
    c = client
    patient = job("patient", backoffLimit=0, podFailurePolicy={"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]})
    patient["spec"]["template"]["spec"]["nodeName"] = "far-away"  # (bound: no pod GC of unscheduled pods)
    await c.create(JOBS, patient)
    (pod,) = await until(lambda: _exactly(c, "patient", 1))
    name = pod["metadata"]["name"]
    await c.delete(f"{PODS}/{name}")
    assert await until(lambda: status_of(c, "patient", terminating=1))
    await asyncio.sleep(0.3)
    held = await c.get(f"{PODS}/{name}")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [FINALIZER]
    assert await pods_of(c, "patient") == []  # not replaced yet
    assert "failed" not in (await c.get(f"{JOBS}/patient"))["status"]
    await fail_with(c, pod, 3)  # its kubelet ends it: exit code 3, ignored
    (replacement,) = await until(lambda: _exactly(c, "patient", 1))
    await until(lambda: _pod_gone(c, name))  # judged: its finalizer removed, it goes
    assert "failed" not in (await c.get(f"{JOBS}/patient"))["status"]
    await fail_with(c, replacement, 1)  # counted past the limit of 0
    assert await until(lambda: settled(c, "patient", "Failed")) == {"FailureTarget": "BackoffLimitExceeded",
                                                                    "Failed": "BackoffLimitExceeded"}
    assert (await c.get(f"{JOBS}/patient"))["status"]["failed"] == 1


async def _pod_gone(c: Client, name: str) -> bool:
    try:
        await c.get(f"{PODS}/{name}")
    except ApiError as e:
        return e.code == 404
    return False


def test_terminating_pods_not_yet_replaced_keep_their_room_and_index() -> None:
    def pod(index: int) -> dict[str, Any]:
        return {"metadata": {"annotations": {COMPLETION_INDEX: str(index)}}}

    # podReplacementPolicy Failed: index 1's pod is terminating, so only index 2 is started
    assert JobController._wanted(3, True, 3, 0, [pod(0)], set(), [pod(1)]) == [2]
    assert JobController._wanted(3, True, 3, 0, [pod(0)], set()) == [1, 2]
    assert JobController._wanted(4, False, 2, 1, [pod(0)], set(), [pod(1)]) == []


# -- backoffLimitPerIndex and successPolicy -------------------------------------------------------
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"


async def by_index(c: Client, name: str, n: int, without: set[str] | None = None) -> dict[int, dict[str, Any]] | None:
    """The job's ``n`` active pods by index, once there are that many."""
    pods = await _exactly(c, name, n, without)
    return {int(p["metadata"]["annotations"][COMPLETION_INDEX]): p for p in pods} if pods is not None else None


async def status_of(c: Client, name: str, **want: Any) -> dict[str, Any] | None:
    """The job's status once it has the ``want``ed fields."""
    status: dict[str, Any] = (await c.get(f"{JOBS}/{name}")).get("status") or {}
    return status if all(status.get(k) == v for k, v in want.items()) else None


async def test_an_index_past_its_backoff_limit_fails_alone_and_is_not_retried(client: Client) -> None:
    c = client
    await c.create(JOBS, job("per", completions=3, parallelism=3, completionMode="Indexed", backoffLimitPerIndex=1))
    first = await until(lambda: by_index(c, "per", 3))
    assert {p["metadata"]["annotations"][FAILURE_COUNT] for p in first.values()} == {"0"}
    await finish(c, first[0], "Failed")  # the index's first failure, of one allowed: retried
    again = await until(lambda: by_index(c, "per", 3, without={first[0]["metadata"]["name"]}))
    assert again[0]["metadata"]["annotations"][FAILURE_COUNT] == "1"
    await finish(c, again[0], "Failed")  # its second: index 0 fails, and no pod runs it again
    # (the failed index is written before its pod is counted, as upstream's: the two come apart)
    status = await until(lambda: status_of(c, "per", failedIndexes="0", failed=2))
    assert status["active"] == 2 and status["terminating"] == 0
    assert "conditions" not in status  # the other indexes run on
    assert sorted(await until(lambda: by_index(c, "per", 2))) == [1, 2]
    await finish(c, first[1], "Succeeded")
    await finish(c, first[2], "Succeeded")
    message = "Job has failed indexes"
    assert await until(lambda: settled(c, "per", "Failed")) == {"FailureTarget": "FailedIndexes",
                                                                "Failed": "FailedIndexes"}
    assert (await full_conditions(c, "per"))["Failed"] == ("FailedIndexes", message)
    status = (await c.get(f"{JOBS}/per"))["status"]
    assert (status["completedIndexes"], status["failedIndexes"], status["succeeded"], status["failed"]) == \
        ("1,2", "0", 2, 2)


async def test_more_failed_indexes_than_max_failed_indexes_fail_the_job(client: Client) -> None:
    c = client
    await c.create(JOBS, job("most", completions=4, parallelism=4, completionMode="Indexed", backoffLimitPerIndex=0,
                             maxFailedIndexes=1))
    pods = await until(lambda: by_index(c, "most", 4))
    await finish(c, pods[1], "Failed")
    await until(lambda: status_of(c, "most", failedIndexes="1"))
    assert await conditions(c, "most") == {}  # one failed index is allowed
    await finish(c, pods[3], "Failed")
    assert await until(lambda: settled(c, "most", "Failed")) == {"FailureTarget": "MaxFailedIndexesExceeded",
                                                                 "Failed": "MaxFailedIndexesExceeded"}
    assert (await full_conditions(c, "most"))["Failed"][1] == \
        "Job has exceeded the specified maximal number of failed indexes"
    assert await pods_of(c, "most") == []  # the others were ended, and counted as failed, as upstream
    status = (await c.get(f"{JOBS}/most"))["status"]
    assert (status["failedIndexes"], status["failed"]) == ("1,3", 4)


async def test_a_fail_index_rule_fails_the_index_at_once_and_ignored_failures_are_counted_apart(
        client: Client) -> None:
    c = client
    await c.create(JOBS, job("rules", completions=2, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=3,
                             podFailurePolicy={"rules": [
                                 {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
                                 {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]}))
    pods = await until(lambda: by_index(c, "rules", 2))
    await fail_with(c, pods[0], 3)  # ignored: retried, counted apart
    await fail_with(c, pods[1], 42)  # FailIndex: index 1 fails, with retries left
    await until(lambda: status_of(c, "rules", failedIndexes="1"))
    (again,) = (await until(lambda: by_index(c, "rules", 1, without={pods[0]["metadata"]["name"]}))).values()
    annotations = again["metadata"]["annotations"]
    assert (annotations[COMPLETION_INDEX], annotations[FAILURE_COUNT], annotations[IGNORED_FAILURE_COUNT]) == \
        ("0", "0", "1")
    await finish(c, again, "Succeeded")
    assert await until(lambda: settled(c, "rules", "Failed")) == {"FailureTarget": "FailedIndexes",
                                                                  "Failed": "FailedIndexes"}
    assert (await c.get(f"{JOBS}/rules"))["status"]["failed"] == 1  # the ignored failure is not counted


async def test_a_success_policy_met_ends_the_job_early_and_complete(client: Client) -> None:
    c = client
    await c.create(JOBS, job("early", completions=5, parallelism=5, completionMode="Indexed", successPolicy={"rules": [
        {"succeededIndexes": "4"}, {"succeededIndexes": "0-2", "succeededCount": 2}]}))
    pods = await until(lambda: by_index(c, "early", 5))
    await finish(c, pods[0], "Succeeded")
    await until(lambda: status_of(c, "early", completedIndexes="0"))
    assert await conditions(c, "early") == {}
    await finish(c, pods[2], "Succeeded")  # two of 0-2: rule 1 is met
    message = "Matched rules at index 1"
    got = await until(lambda: settled(c, "early", "Complete"))
    assert got == {"SuccessCriteriaMet": "SuccessPolicy", "Complete": "SuccessPolicy"}
    assert (await full_conditions(c, "early"))["Complete"] == ("SuccessPolicy", message)
    assert await pods_of(c, "early") == []  # the others were ended, not counted as failed
    status = (await c.get(f"{JOBS}/early"))["status"]
    assert (status["completedIndexes"], status["succeeded"], status["terminating"]) == ("0,2", 2, 0)
    assert "failed" not in status and "active" not in status and status["completionTime"]


async def test_without_a_policy_a_deleted_pod_is_replaced_at_once_and_counted_as_failed(client: Client) -> None:
    """podReplacementPolicy TerminatingOrFailed (the default without a pod failure policy): a
    pod someone deletes has failed, as upstream's isPodFailed has it, terminating or gone."""
    c = client
    eager = job("eager", backoffLimit=1)
    eager["spec"]["template"]["spec"]["nodeName"] = "far-away"  # (bound: no pod GC of unscheduled pods)
    await c.create(JOBS, eager)
    (pod,) = await until(lambda: _exactly(c, "eager", 1))
    name = pod["metadata"]["name"]
    await c.patch(f"{PODS}/{name}", {"metadata": {"finalizers": ["test.example/hold"]}}, patch_type="strategic")
    await c.delete(f"{PODS}/{name}")
    (replacement,) = await until(lambda: _exactly(c, "eager", 1, without={name}))  # while it terminates
    assert await until(lambda: status_of(c, "eager", active=1, terminating=1, failed=1))
    await c.patch(f"{PODS}/{name}", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["test.example/hold"]}},
                  patch_type="strategic")
    assert await until(lambda: status_of(c, "eager", active=1, terminating=0, failed=1))  # gone: still counted
    await finish(c, replacement, "Failed")
    assert await until(lambda: settled(c, "eager", "Failed")) == {"FailureTarget": "BackoffLimitExceeded",
                                                                  "Failed": "BackoffLimitExceeded"}
    assert (await c.get(f"{JOBS}/eager"))["status"]["failed"] == 2


# -- pods tracked with the finalizer (controllers/jobtracking.py) -----------------------------
async def test_counts_survive_their_pods_deletion_and_go_on_counting(client: Client) -> None:
    """The pods carry the tracking finalizer until counted; deleting the finished ones after
    lowers no count, and the next finished pods are added to the counts, not to what is left."""
    c = client
    await c.create(JOBS, job("kept", completions=3, backoffLimit=5))
    for outcome, want in (("Failed", {"failed": 1}), ("Failed", {"failed": 2}),
                          ("Succeeded", {"failed": 2, "succeeded": 1}), ("Succeeded", {"failed": 2, "succeeded": 2})):
        (pod,) = await until(lambda: _exactly(c, "kept", 1))
        assert pod["metadata"]["finalizers"] == [FINALIZER]
        await finish(c, pod, outcome)
        assert await until(lambda: status_of(c, "kept", **want))  # noqa: B023 (awaited at once)
        name = pod["metadata"]["name"]
        await until(lambda: _no_finalizer(c, name))  # noqa: B023  counted: the finalizer goes
        await c.delete(f"{PODS}/{name}")
        await until(lambda: _pod_gone(c, name))  # noqa: B023
    status = await until(lambda: status_of(c, "kept", failed=2, succeeded=2))
    assert status["uncountedTerminatedPods"] == {} and await conditions(c, "kept") == {}


async def _no_finalizer(c: Client, name: str) -> bool:
    return FINALIZER not in ((await c.get(f"{PODS}/{name}"))["metadata"].get("finalizers") or ())


async def test_a_finished_pod_deleted_before_it_was_counted_is_held_until_it_is(tmp_path: Path) -> None:
    """With no Job controller running (stopped, or behind), a finished pod deleted by hand is
    kept by its finalizer; the controller, started, counts it and lets it go. A uid it had
    recorded uncounted, whose pod lost the finalizer, is counted then too."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))  # (no controllers)
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        made = await c.create(JOBS, job("late", completions=3, parallelism=2))
        ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "late", "uid": made["metadata"]["uid"],
               "controller": True, "blockOwnerDeletion": True}
        labels = made["spec"]["template"]["metadata"]["labels"]
        pods = []
        for name in ("late-done", "late-counted"):
            pods.append(await c.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "labels": labels, "ownerReferences": [ref], "finalizers": [FINALIZER]},
                "spec": made["spec"]["template"]["spec"]}))
            await finish(c, pods[-1], "Succeeded")
        await c.delete(f"{PODS}/late-done")  # held: not counted yet
        assert (await c.get(f"{PODS}/late-done"))["metadata"]["deletionTimestamp"]
        # (the controller had recorded late-counted's uid and removed its finalizer, then stopped)
        await c.patch(f"{JOBS}/late/status", {"status": {"uncountedTerminatedPods": {
            "succeeded": [pods[1]["metadata"]["uid"]]}}})
        await c.patch(f"{PODS}/late-counted", {"metadata": {"finalizers": None}})
        controller = asyncio.create_task(JobController(c).run())
        try:
            assert await until(lambda: status_of(c, "late", succeeded=2, uncountedTerminatedPods={}))
            await until(lambda: _pod_gone(c, "late-done"))
            await until(lambda: _exactly(c, "late", 1))  # the one completion left
        finally:
            controller.cancel()
            await asyncio.gather(controller, return_exceptions=True)


async def test_an_orphaned_pod_loses_the_finalizer(client: Client) -> None:
    """A pod with the tracking finalizer that no Job controls (its reference removed, or a
    Job never seen and the pod being deleted: the garbage collector deletes it, as upstream's
    deletes a pod whose owner does not exist) is not left terminating."""
    c = client
    await c.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "finalizers": [FINALIZER]},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await until(lambda: _no_finalizer(c, "bare"))
    ghost = {"apiVersion": "batch/v1", "kind": "Job", "name": "ghost", "uid": "6b1c4a34-0000-4000-8000-00000000dead",
             "controller": True}
    await c.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "ghostly", "finalizers": [FINALIZER], "ownerReferences": [ghost]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await until(lambda: _pod_gone(c, "ghostly"))


async def test_every_way_of_deleting_a_job_or_its_pods_ends_with_them_gone(client: Client) -> None:
    """Foreground, Background and Orphan deletion of a Job with running pods, and its
    namespace's deletion: none of its pods stays terminating on the tracking finalizer."""
    c = client
    await c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    await c.create("/apis/batch/v1/namespaces/doomed/jobs", job("inside", parallelism=2, completions=2))
    for name in ("fore", "back", "orphan"):
        await c.create(JOBS, job(name, parallelism=2, completions=2))
        await until(lambda name=name: _exactly(c, name, 2))  # type: ignore[misc]
    for name, policy in (("fore", "Foreground"), ("back", "Background"), ("orphan", "Orphan")):
        await c.delete(f"{JOBS}/{name}", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
    for name in ("fore", "back"):
        await until(lambda name=name: _gone(c, name))  # type: ignore[misc]
        await until(lambda name=name: _no_pods(c, name))  # type: ignore[misc]
    await until(lambda: _gone(c, "orphan"))
    kept = await until(lambda: _untracked(c, "orphan"))
    assert len(kept) == 2 and all(not p["metadata"].get("ownerReferences") for p in kept)
    await until(lambda: _namespace_pods(c, 2))
    await c.delete("/api/v1/namespaces/doomed")

    async def namespace_gone() -> bool:
        try:
            await c.get("/api/v1/namespaces/doomed")
        except ApiError as e:
            return e.code == 404
        return False

    await until(namespace_gone)


async def _no_pods(c: Client, name: str) -> bool:
    return not await pods_of(c, name, active=False)


async def _untracked(c: Client, name: str) -> list[dict[str, Any]] | None:
    pods = await pods_of(c, name, active=False)
    return pods if pods and not any(FINALIZER in (p["metadata"].get("finalizers") or ()) for p in pods) else None


async def _namespace_pods(c: Client, n: int) -> bool:
    return len((await c.list("/api/v1/namespaces/doomed/pods"))["items"]) == n
