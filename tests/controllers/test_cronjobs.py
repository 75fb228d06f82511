"""The CronJob controller (controllers/cronjobs.py) on a clock the test moves, in a server
without its components (no Job controller: the Jobs it creates stay active until the test
finishes them)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.cronjobs import SCHEDULED_TIMESTAMP, CronJobController
from tests.controllers.helpers import until

CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC).replace(second=30, microsecond=0)

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Client, CronJobController, Clock]]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        clock = Clock()
        controller = CronJobController(c, clock=clock)
        task = asyncio.create_task(controller.run())
        try:
            yield c, controller, clock
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def cronjob(name: str, schedule: str = "*/1 * * * *", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"metadata": {"labels": {"cron": name}}, "spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
                **spec}}


async def tick(c: Client, controller: CronJobController, clock: Clock, name: str, minutes: int = 1) -> None:
    clock.now += dt.timedelta(minutes=minutes)
    controller.queue.add(f"cronjob:default/{name}")
    await asyncio.sleep(0.2)


async def jobs_of(c: Client, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await c.list(JOBS, labelSelector=f"cron={name}"))["items"]
    return sorted(items, key=lambda j: j["metadata"]["name"])


async def finish(c: Client, job: dict[str, Any], outcome: str = "Complete") -> None:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await c.patch(f"{JOBS}/{job['metadata']['name']}/status", {"status": {
        "conditions": [{"type": outcome, "status": "True", "lastTransitionTime": now, "lastProbeTime": now}],
        **({"completionTime": now, "succeeded": 1} if outcome == "Complete" else {"failed": 1})}})


async def test_each_scheduled_minute_creates_one_job(setup: tuple[Client, CronJobController, Clock]) -> None:
    c, controller, clock = setup
    await c.create(CRONJOBS, cronjob("every"))
    await asyncio.sleep(0.2)
    assert await jobs_of(c, "every") == []  # created mid-minute: nothing due yet
    await tick(c, controller, clock, "every")
    (job,) = await until(lambda: jobs_of(c, "every"))
    due = clock.now.replace(second=0)
    assert job["metadata"]["name"] == f"every-{int(due.timestamp() // 60)}"
    assert job["metadata"]["annotations"][SCHEDULED_TIMESTAMP] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    (ref,) = job["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["controller"]) == ("CronJob", True)
    controller.queue.add("cronjob:default/every")  # the same minute again: no second job
    await asyncio.sleep(0.2)
    assert len(await jobs_of(c, "every")) == 1
    status = (await c.get(f"{CRONJOBS}/every"))["status"]
    assert status["lastScheduleTime"] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [a["name"] for a in status["active"]] == [job["metadata"]["name"]]
    await finish(c, job)

    async def recorded() -> bool:
        s = (await c.get(f"{CRONJOBS}/every")).get("status", {})
        return "active" not in s and bool(s.get("lastSuccessfulTime"))

    await until(recorded)
    await tick(c, controller, clock, "every", minutes=5)  # missed minutes: only the latest runs
    jobs = await until(lambda: _count(c, "every", 2))
    assert jobs[-1]["metadata"]["annotations"][SCHEDULED_TIMESTAMP] == \
        clock.now.replace(second=0).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _count(c: Client, name: str, n: int) -> list[dict[str, Any]] | None:
    jobs = await jobs_of(c, name)
    return jobs if len(jobs) == n else None


async def test_forbid_skips_while_a_job_runs_and_replace_deletes_it(
        setup: tuple[Client, CronJobController, Clock]) -> None:
    c, controller, clock = setup
    await c.create(CRONJOBS, cronjob("forbid", concurrencyPolicy="Forbid"))
    await c.create(CRONJOBS, cronjob("replace", concurrencyPolicy="Replace"))
    clock.now += dt.timedelta(minutes=1)
    for name in ("forbid", "replace"):
        controller.queue.add(f"cronjob:default/{name}")
    await until(lambda: _count(c, "forbid", 1))
    first = (await until(lambda: _count(c, "replace", 1)))[0]
    clock.now += dt.timedelta(minutes=1)
    for name in ("forbid", "replace"):
        controller.queue.add(f"cronjob:default/{name}")
    await asyncio.sleep(0.5)
    assert len(await jobs_of(c, "forbid")) == 1  # the first still runs

    async def replaced() -> bool:
        live = [j for j in await jobs_of(c, "replace") if not j["metadata"].get("deletionTimestamp")]
        return [j["metadata"]["name"] for j in live] != [first["metadata"]["name"]] and len(live) == 1

    await until(replaced)


async def test_history_limits_delete_the_oldest_finished_jobs(
        setup: tuple[Client, CronJobController, Clock]) -> None:
    c, controller, clock = setup
    await c.create(CRONJOBS, cronjob("hist", successfulJobsHistoryLimit=2, failedJobsHistoryLimit=0))
    names = []
    for outcome in ("Complete", "Complete", "Complete", "Complete", "Failed"):
        await tick(c, controller, clock, "hist")
        job = await until(lambda: _scheduled_now(c, "hist", clock))
        names.append(job["metadata"]["name"])
        await finish(c, job, outcome)

    async def trimmed() -> bool:
        left = [j["metadata"]["name"] for j in await jobs_of(c, "hist") if not j["metadata"].get("deletionTimestamp")]
        return left == names[2:4]  # the last two that completed; the failed one is not kept

    await until(trimmed)


async def _scheduled_now(c: Client, name: str, clock: Clock) -> dict[str, Any] | None:
    stamp = clock.now.replace(second=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    return next((j for j in await jobs_of(c, name)
                 if j["metadata"]["annotations"][SCHEDULED_TIMESTAMP] == stamp), None)


async def test_suspend_and_an_invalid_schedule(setup: tuple[Client, CronJobController, Clock]) -> None:
    c, controller, clock = setup
    await c.create(CRONJOBS, cronjob("paused", suspend=True))
    await tick(c, controller, clock, "paused", minutes=3)
    assert await jobs_of(c, "paused") == []
    with pytest.raises(ApiError) as e:
        await c.create(CRONJOBS, cronjob("bad", schedule="* * * *"))
    assert e.value.code == 422 and "spec.schedule" in e.value.message
    with pytest.raises(ApiError) as e:
        await c.create(CRONJOBS, cronjob("tz", timeZone="Mars/Olympus"))
    assert e.value.code == 422 and "spec.timeZone" in e.value.message


async def test_a_job_made_by_hand_from_the_cronjob_is_as_old_as_its_start(
        setup: tuple[Client, CronJobController, Clock]) -> None:
    """``kubectl create job --from=cronjob/x`` makes a Job owned by the CronJob without a
    scheduled time: history cleanup goes by start time (upstream's byJobStartTime), so the
    oldest scheduled Job goes, not the one just made by hand."""
    c, controller, clock = setup
    cj = await c.create(CRONJOBS, cronjob("byhand", successfulJobsHistoryLimit=2))
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    scheduled = []
    for i in range(2):
        await tick(c, controller, clock, "byhand")
        job = await until(lambda: _scheduled_now(c, "byhand", clock))
        scheduled.append(job["metadata"]["name"])
        await c.patch(f"{JOBS}/{job['metadata']['name']}/status", {"status": {
            "startTime": (started + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}})
        await finish(c, job)
    manual = await c.create(JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "byhand-manual", "labels": {"cron": "byhand"},
                     "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "byhand",
                                          "uid": cj["metadata"]["uid"], "controller": True}]},
        "spec": cronjob("byhand")["spec"]["jobTemplate"]["spec"]})
    await c.patch(f"{JOBS}/byhand-manual/status", {"status": {
        "startTime": (started + dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}})
    await finish(c, manual)
    controller.queue.add("cronjob:default/byhand")

    async def trimmed() -> bool:
        left = {j["metadata"]["name"] for j in await jobs_of(c, "byhand") if not j["metadata"].get("deletionTimestamp")}
        return left == {scheduled[1], "byhand-manual"}

    await until(trimmed)


async def test_a_job_made_by_hand_is_not_active_and_is_warned_about(
        setup: tuple[Client, CronJobController, Clock]) -> None:
    """Upstream's syncCronJob counts only the Jobs of ``status.active`` (those it started): a
    running Job made by ``kubectl create job --from=cronjob/x`` gets an ``UnexpectedJob``
    warning, stays out of ``ACTIVE``, does not hold a ``Forbid`` schedule back and is not
    deleted by ``Replace``; a listed Job that ends is reported ``SawCompletedJob``."""
    c, controller, clock = setup
    for policy in ("Forbid", "Replace"):
        cj = await c.create(CRONJOBS, cronjob(policy.lower(), concurrencyPolicy=policy))
        await c.create(JOBS, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{policy.lower()}-manual", "labels": {"cron": policy.lower()},
                         "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": policy.lower(),
                                              "uid": cj["metadata"]["uid"], "controller": True}]},
            "spec": cronjob(policy.lower())["spec"]["jobTemplate"]["spec"]})

    async def warned() -> list[dict[str, Any]] | None:
        events = (await c.list("/api/v1/namespaces/default/events"))["items"]
        return [e for e in events if e["reason"] == "UnexpectedJob"] or None

    controller.queue.add("cronjob:default/forbid")
    event = (await until(warned))[0]
    assert event["type"] == "Warning"
    assert event["message"] == "Saw a job that the controller did not create or forgot: forbid-manual"
    assert not (await c.get(f"{CRONJOBS}/forbid")).get("status", {}).get("active")
    clock.now += dt.timedelta(minutes=1)
    for name in ("forbid", "replace"):
        controller.queue.add(f"cronjob:default/{name}")
    for name in ("forbid", "replace"):  # each ran its schedule beside the manual Job, which stays
        jobs = await until(functools.partial(_count, c, name, 2))
        assert all(not j["metadata"].get("deletionTimestamp") for j in jobs)
    scheduled = next(j for j in await jobs_of(c, "forbid") if j["metadata"]["name"] != "forbid-manual")

    async def listed() -> bool:
        active = (await c.get(f"{CRONJOBS}/forbid")).get("status", {}).get("active") or []
        return [a["name"] for a in active] == [scheduled["metadata"]["name"]]

    await until(listed)
    await finish(c, scheduled)

    async def saw_completed() -> list[dict[str, Any]] | None:
        events = (await c.list("/api/v1/namespaces/default/events"))["items"]
        return [e for e in events if e["reason"] == "SawCompletedJob"] or None

    event = (await until(saw_completed))[0]
    assert event["message"] == f"Saw completed job: {scheduled['metadata']['name']}, condition: Complete"
