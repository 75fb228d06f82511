"""The CronJob controller of kube-controller-manager (batch/v1), as an API client.

At each time its ``schedule`` names (``registry/cron.py``; in ``timeZone``, else
UTC), a CronJob creates a Job from its ``jobTemplate``, named
``<cronjob>-<scheduled minutes since the epoch>`` so a schedule never runs twice.
The Job is owned by the CronJob as controller and annotated
``batch.kubernetes.io/cronjob-scheduled-timestamp``. Only the latest missed time
runs; a time older than ``startingDeadlineSeconds`` is skipped.
``concurrencyPolicy``: ``Allow`` runs Jobs side by side; ``Forbid`` skips a time
while a Job is active (and retries it later, within the deadline); ``Replace``
deletes the active Jobs first. ``suspend`` stops new runs. Finished Jobs beyond
``successfulJobsHistoryLimit``/``failedJobsHistoryLimit`` are deleted, oldest
first. Status: ``active`` (references to the running Jobs it started; a Job made from it
by hand is not one, and gets an ``UnexpectedJob`` warning, as upstream),
``lastScheduleTime``, ``lastSuccessfulTime``. The Jobs of a deleted CronJob are
collected (``ownership.py``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import zoneinfo
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.identities import service_account_user
from controlplane.registry.cron import CronError, parse

from .events import Recorder
from .ownership import Dependents, collect, finalize, key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["SCHEDULED_TIMESTAMP", "CronJobController", "start"]

log = logging.getLogger(__name__)

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MAX_MISSED = 100  # as upstream: more missed times than this are not walked one by one
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _parse_time(ts: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(str(ts), _FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def _format(t: datetime.datetime) -> str:
    return t.astimezone(datetime.UTC).strftime(_FORMAT)


def _finished(job: Mapping[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` for a finished Job, else None."""
    for c in (job.get("status") or {}).get("conditions") or ():
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


class CronJobController:
    def __init__(self, client: Client, workers: int = 2,
                 clock: Any = lambda: datetime.datetime.now(datetime.UTC), *, syncs: bool = True,
                 collects: bool = True) -> None:
        self.client = client
        self.gc_client = client.as_identity(service_account_user("generic-garbage-collector"))  # its collector part
        # the CronJob controller, and the garbage collector's part for its Jobs (serve --controllers)
        self.syncs = syncs
        self.collects = collects
        self.workers = workers
        self.clock = clock
        self.queue = WorkQueue()
        self.cronjobs = client.informer(resource_path("batch", "v1", "cronjobs"), on_add=self._changed,
                                        on_update=lambda _old, new: self._changed(new), on_delete=self._deleted)
        self.jobs = client.informer(resource_path("batch", "v1", "jobs"), on_add=self._job_changed,
                                    on_update=lambda _old, new: self._job_changed(new),
                                    on_delete=self._job_deleted)
        self._keys: dict[str, str] = {}  # uid -> namespace/name
        self.jobs_of = Dependents("CronJob", self._keys.__contains__)
        self.events = Recorder(client, "cronjob-controller")
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # -- events
    def _changed(self, cj: dict[str, Any]) -> None:
        uid = str(meta_of(cj).get("uid", ""))
        if uid not in self._keys:
            self._keys[uid] = key_of(cj)
            self.jobs_of.claim(uid)
        self.queue.add("cronjob:" + key_of(cj))

    def _deleted(self, cj: dict[str, Any]) -> None:
        uid = str(meta_of(cj).get("uid", ""))
        self._keys.pop(uid, None)
        self.jobs_of.forget(uid)
        timer = self._timers.pop(key_of(cj), None)
        if timer is not None:
            timer.cancel()
        self.queue.add("gc:" + uid)

    def _job_changed(self, job: dict[str, Any]) -> None:
        owner = self.jobs_of.file(job)
        if owner is not None:
            self._owner_changed(owner)

    def _job_deleted(self, job: dict[str, Any]) -> None:
        owner = self.jobs_of.unfile(job)
        if owner is not None:
            self._owner_changed(owner)

    def _owner_changed(self, uid: str) -> None:
        key = self._keys.get(uid)
        self.queue.add("cronjob:" + key if key is not None else "gc:" + uid)

    # -- running
    async def run(self) -> None:
        try:
            await run_controller("cronjob controller", (self.cronjobs, self.jobs), self.queue, self._handle,
                                 self.workers)
        finally:
            for timer in self._timers.values():
                timer.cancel()

    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "cronjob":
            if self.syncs:
                await self.sync(name)
            elif self.collects and (cj := self.cronjobs.items.get(name)) is not None:
                await finalize(self.gc_client, "CronJob", cj, "Job", self.jobs_of.of(str(meta_of(cj).get("uid", ""))))
        elif self.collects:
            await collect(self.gc_client, "Job", self.jobs_of.of(name), name, self._keys)

    def _wake_at(self, key: str, when: datetime.datetime) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max((when - self.clock()).total_seconds(), 0.0) + 0.1
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self.queue.add, "cronjob:" + key)

    # -- a CronJob
    async def sync(self, key: str) -> None:
        cj = self.cronjobs.items.get(key)
        if cj is None:
            return
        meta = meta_of(cj)
        uid = str(meta.get("uid", ""))
        jobs = list(self.jobs_of.of(uid).values())
        if await finalize(self.client, "CronJob", cj, "Job", self.jobs_of.of(uid), collects=self.collects):
            return
        spec, status = cj.get("spec") or {}, dict(cj.get("status") or {})
        active = self._active(cj, jobs)
        await self._clean_history(cj, jobs)
        succeeded = [t for j in jobs if _finished(j) == "Complete"
                     and (t := _parse_time((j.get("status") or {}).get("completionTime"))) is not None]
        new_status: dict[str, Any] = {
            "lastScheduleTime": status.get("lastScheduleTime"),
            "lastSuccessfulTime": _format(max(succeeded)) if succeeded else status.get("lastSuccessfulTime")}
        try:
            schedule = parse(str(spec.get("schedule", "")))
            zone = zoneinfo.ZoneInfo(spec["timeZone"]) if spec.get("timeZone") else datetime.UTC
        except (CronError, zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
            self.events.record("CronJob", cj, "UnparseableSchedule", f"unparseable schedule: {e}", "Warning")
            return
        now = self.clock()
        if not spec.get("suspend"):
            since = _parse_time(status.get("lastScheduleTime")) or _parse_time(meta.get("creationTimestamp")) or now
            due, next_time = self._due(schedule, zone, since, now)
            if due is None and next_time is None:
                # a schedule no date matches (the 31st of February): upstream's cron library finds no next
                # time, so two zero times 0 s apart, which its controller reports at each sync
                self.events.record("CronJob", cj, "InvalidSchedule",
                                   f"invalid schedule: {spec.get('schedule', '')} : time difference between two "
                                   "schedules is less than 1 second", "Warning")
            if next_time is not None:
                self._wake_at(key, next_time)
            deadline = spec.get("startingDeadlineSeconds")
            if due is not None and deadline is not None and (now - due).total_seconds() > float(deadline):
                self.events.record("CronJob", cj, "MissSchedule",
                                   f"Missed scheduled time to start a job: {_format(due)}", "Warning")
                due = None
            if due is not None:
                policy = spec.get("concurrencyPolicy", "Allow")
                if policy == "Forbid" and active:
                    self.events.record("CronJob", cj, "JobAlreadyActive",
                                       "Not starting job because prior execution is running and concurrency "
                                       "policy is Forbid")
                    due = None  # tried again at the next sync (a Job's end requeues us)
                elif policy == "Replace":
                    for job in active:
                        await self._delete_job(cj, job)
                    active = []
            if due is not None:
                created = await self._create_job(cj, due)
                if created is not None:
                    active.append(created)
                new_status["lastScheduleTime"] = _format(due)
        new_status["active"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": meta_of(j).get("name"),
                                 "namespace": meta_of(j).get("namespace"), "uid": meta_of(j).get("uid"),
                                 "resourceVersion": meta_of(j).get("resourceVersion")}
                                for j in sorted(active, key=lambda j: meta_of(j).get("name", ""))] or None
        current = {k: status.get(k) for k in new_status}
        if _names(current.get("active")) != _names(new_status["active"]) or any(
                current.get(k) != new_status[k] for k in ("lastScheduleTime", "lastSuccessfulTime")):
            await self.client.patch(resource_path("batch", "v1", "cronjobs", meta.get("namespace"), meta.get("name"),
                                                  "status"), {"status": new_status})

    def _active(self, cj: dict[str, Any], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The running Jobs this controller started: those of ``status.active``, and those it
        scheduled (annotated) that the status does not show yet. Another running Job it owns
        (``kubectl create job --from=cronjob/x``) is warned about and left out, as upstream's
        syncCronJob: concurrency rules do not see it, ``Replace`` does not delete it."""
        listed = {r.get("uid") for r in (cj.get("status") or {}).get("active") or ()}
        active = []
        for job in jobs:
            jmeta = meta_of(job)
            outcome = _finished(job)
            if outcome is not None:
                if jmeta.get("uid") in listed:
                    self.events.record("CronJob", cj, "SawCompletedJob",
                                       f"Saw completed job: {jmeta.get('name')}, condition: {outcome}")
            elif jmeta.get("deletionTimestamp"):
                continue
            elif jmeta.get("uid") in listed or SCHEDULED_TIMESTAMP in (jmeta.get("annotations") or {}):
                active.append(job)
            else:
                self.events.record("CronJob", cj, "UnexpectedJob",
                                   f"Saw a job that the controller did not create or forgot: {jmeta.get('name')}",
                                   "Warning")
        return active

    @staticmethod
    def _due(schedule: Any, zone: Any, since: datetime.datetime, now: datetime.datetime
             ) -> tuple[datetime.datetime | None, datetime.datetime | None]:
        """The latest scheduled time in (since, now], and the next one after now (both UTC)."""
        local_now = now.astimezone(zone).replace(tzinfo=None)
        t = schedule.next_after(since.astimezone(zone).replace(tzinfo=None))
        due = None
        missed = 0
        while t is not None and t <= local_now:
            due = t
            missed += 1
            if missed > MAX_MISSED:  # jump to the last time before now rather than walk them all
                t = schedule.next_after(local_now - datetime.timedelta(days=1))
                while t is not None and t <= local_now:
                    due, t = t, schedule.next_after(t)
                break
            t = schedule.next_after(t)

        def utc(local: datetime.datetime | None) -> datetime.datetime | None:
            return None if local is None else local.replace(tzinfo=zone).astimezone(datetime.UTC)

        return utc(due), utc(t)

    async def _create_job(self, cj: dict[str, Any], due: datetime.datetime) -> dict[str, Any] | None:
        meta = meta_of(cj)
        template = (cj.get("spec") or {}).get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        name = f"{meta['name']}-{int(due.timestamp() // 60)}"
        job_meta: dict[str, Any] = {
            "name": name, "namespace": meta.get("namespace"),
            "annotations": {**(tmeta.get("annotations") or {}), SCHEDULED_TIMESTAMP: _format(due)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": meta["name"],
                                 "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}]}
        if tmeta.get("labels"):
            job_meta["labels"] = dict(tmeta["labels"])
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": template.get("spec") or {}}
        try:
            created = await self.client.create(resource_path("batch", "v1", "jobs", meta.get("namespace")), job)
        except ApiError as e:
            if e.code == 409:  # created before (this controller restarted): the name makes it once
                return None
            raise
        self.events.record("CronJob", cj, "SuccessfulCreate", f"Created job {name}")
        return created

    async def _delete_job(self, cj: Mapping[str, Any], job: Mapping[str, Any]) -> None:
        jmeta = meta_of(job)
        try:
            await self.client.delete(resource_path("batch", "v1", "jobs", jmeta.get("namespace"), jmeta.get("name")),
                                     {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        except ApiError as e:
            if e.code != 404:
                raise
            return
        self.events.record("CronJob", cj, "SuccessfulDelete", f"Deleted job {jmeta.get('name')}")

    async def _clean_history(self, cj: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        spec = cj.get("spec") or {}
        for outcome, limit in (("Complete", spec.get("successfulJobsHistoryLimit", 3)),
                               ("Failed", spec.get("failedJobsHistoryLimit", 1))):
            done = [j for j in jobs if _finished(j) == outcome and not meta_of(j).get("deletionTimestamp")]
            done.sort(key=_by_start_time)
            for job in done[:max(len(done) - int(limit), 0)]:
                await self._delete_job(cj, job)


def _by_start_time(job: Mapping[str, Any]) -> tuple[bool, str, str]:
    """Oldest first by ``status.startTime``, one without it last, names breaking ties (upstream's
    byJobStartTime): a Job made by hand from the CronJob (``kubectl create job --from``),
    which has no scheduled time, is as old as it is."""
    start = (job.get("status") or {}).get("startTime")
    return start is None, str(start or ""), str(meta_of(job).get("name", ""))


def _names(refs: Any) -> list[str]:
    return [str(r.get("name")) for r in refs or ()]


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await CronJobController(client, syncs=config.controller_enabled("cronjob-controller"),
                            collects=config.controller_enabled("garbage-collector-controller")).run()
