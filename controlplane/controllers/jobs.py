"""The Job controller of kube-controller-manager (batch/v1), as an API client.

A Job runs pods made from its template (``generateName: <job>-``, owned by
the Job as controller) until ``completions`` of them have succeeded, at most
``parallelism`` at a time. With ``completions`` unset, it runs until one pod
succeeds, then starts no more and completes once the others finish. ``Indexed`` jobs give each pod an index
(``batch.kubernetes.io/job-completion-index``, annotation and label, hostname
``<job>-<index>``, env ``JOB_COMPLETION_INDEX``) and complete once every index
has succeeded (``status.completedIndexes``). More than ``backoffLimit``
failed pods, or ``activeDeadlineSeconds`` passed, fail the Job: its active
pods are deleted, and counted in ``status.failed`` as upstream counts them.
``suspend`` deletes the active pods until resumed.

``podFailurePolicy`` (``controllers/podfailurepolicy.py``): each failed pod is
judged by the first rule that matches its exit codes or conditions; a
``FailJob`` rule fails the Job at once (FailureTarget, then Failed once its
other pods are gone, reason ``PodFailurePolicy`` and upstream's message), an
``Ignore`` rule's pod is not counted against ``backoffLimit`` (nor in
``status.failed``), ``Count`` counts it, ``FailIndex`` fails its index. With a
policy (or ``podReplacementPolicy: Failed``) a terminating pod is neither
replaced nor counted before it has failed (its kubelet marks it ``Failed``;
the pod garbage collector, one never scheduled), the tracking finalizer
keeping it until then: a pod someone else deletes (an eviction, preemption)
is judged as it ended, its conditions (``DisruptionTarget``) matching.

Indexed Jobs (``controllers/indexedjobs.py``) with ``backoffLimitPerIndex``:
each index is retried on its own, its pods carrying the index's failure counts
(``batch.kubernetes.io/job-index-failure-count``, and
``job-index-ignored-failure-count`` for the policy's ignored ones); an index
that fails once more than allowed, or on a ``FailIndex`` rule, is listed in
``status.failedIndexes`` and not run again. More failed indexes than
``maxFailedIndexes`` fail the Job (``MaxFailedIndexesExceeded``), and so does
every index ended with some failed (``FailedIndexes``). A ``successPolicy``
met (its first rule whose ``succeededIndexes``, or ``succeededCount`` of
them, have succeeded) ends the Job early: SuccessCriteriaMet (reason
``SuccessPolicy``, ``Matched rules at index N``), its other pods deleted (not
counted as failed), then Complete.

Pods are tracked with the finalizer ``batch.kubernetes.io/job-tracking``
(``controllers/jobtracking.py``, KEP-2307): each finished pod is recorded in
``status.uncountedTerminatedPods``, loses the finalizer, then moves into the
counts, so the counts, completed and failed indexes and per-index failure
counts outlive the pods (deleted by hand or by the pod garbage collector).
A pod of an index with ``backoffLimitPerIndex`` that failed keeps it until its
index's next pod carries its failure counts. The pods a suspended Job deletes
lose it uncounted first; a Job being deleted, finished or gone, and a pod no
Job controls any more (orphaned), let their pods go uncounted, so no pod is
left terminating. The status writes go on the Job's resourceVersion, and a
sync waits for the informer to show the finalizers it removed: nothing is
counted twice.

Status as upstream: active, ready, terminating (0 too), succeeded, failed,
completedIndexes and failedIndexes (intervals, ``0-2,5,7,8``),
uncountedTerminatedPods, startTime, completionTime, and the conditions
``kubectl wait --for=condition=complete`` reads: SuccessCriteriaMet then
Complete, or FailureTarget then Failed (each terminal condition once no pod
is left terminating or uncounted), and Suspended. Pods of a deleted Job are
collected (``controllers/ownership.py``); with no ``propagationPolicy`` a
batch/v1 Job's pods are orphaned, as upstream, and the API warns as upstream
does.

``podReplacementPolicy: TerminatingOrFailed`` (the default without a pod
failure policy): a pod someone else deletes before it finished is replaced at
once, and counted as failed, as upstream's ``isPodFailed``; the pods this
controller deletes (suspend, a success) are not.

A failed pod is replaced after upstream's exponential delay
(``controllers/jobbackoff.py``; ``config.JobBackoff``, 10 s doubling to 6
minutes): the Job's failures since its last success are kept per Job, in
memory as upstream's, fed by the pods each sync finds newly finished (still
carrying the finalizer), and the Job is requeued for the moment its delay
ends, not polled; with ``backoffLimitPerIndex`` each index waits on its own,
by its last failed pod (kept by its finalizer until replaced).

``ttlSecondsAfterFinished``: a finished Job is deleted (Foreground, so its pods
go first) that many seconds after it finished, as the TTL-after-finished
controller does.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.config import JobBackoff
from controlplane.identities import service_account_user

from .events import Recorder, namespace_terminating
from .indexedjobs import (
    COMPLETION_INDEX,
    completion_index,
    compress_indexes,
    fails_its_index,
    failure_annotations,
    parse_indexes,
    pods_being_replaced,
    success_policy_met,
)
from .jobbackoff import BackoffRecord, index_delay
from .jobtracking import FINALIZER, REMOVE_FINALIZER, Uncounted, has_finalizer, is_failed, record_finished
from .ownership import Dependents, Expectations, collect, finalize, key_of, meta_of, owner_exists, pods_to_sync
from .podfailurepolicy import Verdict, verdict

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["COMPLETION_INDEX", "JobController", "compress_indexes", "start"]

log = logging.getLogger(__name__)

BURST = 500
_UNFINALIZED = "~"  # an expectation's prefix: the pod (uid) whose tracking finalizer was removed


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_since(timestamp: str) -> float:
    moment = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return (datetime.datetime.now(datetime.UTC) - moment).total_seconds()


# the events upstream records as a Job's conditions change: (reason, message); empty: the condition's
_CONDITION_EVENTS = {("Complete", "True"): ("Completed", "Job completed"), ("Failed", "True"): ("", ""),
                     ("Suspended", "True"): ("Suspended", "Job suspended"),
                     ("Suspended", "False"): ("Resumed", "Job resumed")}


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def _surplus(completions: Any, indexed: bool, parallelism: int, succeeded: int,
             active: list[dict[str, Any]], done_indexes: set[int]) -> list[dict[str, Any]]:
    """The active pods upstream's ``manageJob`` deletes: an Indexed Job's pods of an index
    out of range, already ended or held twice, then as many as are active beyond what the
    Job wants (``parallelism``, lowered, or fewer than the completions left), in
    ``controller.ActivePods``' order (not on a node, pending, not ready, then the newest
    first); without ``completions``, none once a pod has succeeded."""
    doomed: list[dict[str, Any]] = []
    kept = active
    if indexed:
        seen: set[int] = set()
        kept = []
        for pod in active:
            i = completion_index(pod)
            if i is None or i >= int(completions) or i in done_indexes or i in seen:
                doomed.append(pod)
            else:
                seen.add(i)
                kept.append(pod)
    if completions is None:
        wanted = len(kept) if succeeded else parallelism
    else:
        wanted = max(0, min(int(completions) - succeeded, parallelism))
    extra = len(kept) - wanted
    if extra > 0:
        def removal_order(pod: Mapping[str, Any]) -> tuple[bool, int, bool, str]:
            meta, status = meta_of(pod), pod.get("status") or {}
            newest_first = "".join(chr(0x10FFFF - ord(ch)) for ch in str(meta.get("creationTimestamp") or ""))
            return (bool((pod.get("spec") or {}).get("nodeName")), _PHASE_RANK.get(status.get("phase", ""), 0),
                    _ready(pod), newest_first)
        doomed += sorted(kept, key=removal_order)[:extra]
    return doomed


def _restarts_on_failure(spec: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int | None:
    """The restarts of the containers (init containers too) of the Job's pending and running
    pods when its pods restart on failure (``restartPolicy: OnFailure``), None otherwise: the
    kubelet restarts their failed containers, so only their restart counts say they failed."""
    template = spec.get("template") or {}
    if (template.get("spec") or {}).get("restartPolicy") != "OnFailure":
        return None
    return sum(int(c.get("restartCount") or 0) for p in pods if _phase(p) in ("Pending", "Running")
               for field in ("initContainerStatuses", "containerStatuses")
               for c in (p.get("status") or {}).get(field) or () if isinstance(c, dict))


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _condition(job: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def _uid(pod: Mapping[str, Any]) -> str:
    return str(meta_of(pod).get("uid", ""))


def _uids(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    return {_uid(p) for p in pods}


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int(meta_of(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _maybe_orphaned(pod: Mapping[str, Any]) -> bool:
    """Whether a pod with the tracking finalizer that no known Job files may be an orphan, as
    upstream's pod handlers decide it: no controller any more, or one this controller does not
    know while the pod is being deleted (its Job gone, not yet seen)."""
    meta = meta_of(pod)
    return bool(meta.get("deletionTimestamp")) or not any(r.get("controller") for r in meta.get("ownerReferences")
                                                             or ())


def _failed_only(spec: Mapping[str, Any]) -> bool:
    """Whether a failed pod is replaced only once it has failed (not while terminating): with
    a pod failure policy, which must see how it ended, or ``podReplacementPolicy: Failed``."""
    return spec.get("podFailurePolicy") is not None or spec.get("podReplacementPolicy") == "Failed"


class JobController:
    """The Job controller, the TTL-after-finished controller's part for Jobs and the garbage
    collector's for their pods, over one set of informers; ``syncs``, ``expires`` and ``collects``
    turn each off (``serve --controllers``)."""

    def __init__(self, client: Client, workers: int = 4, backoff: JobBackoff | None = None, *,
                 syncs: bool = True, expires: bool = True, collects: bool = True) -> None:
        self.client = client
        self.gc_client = client.as_identity(service_account_user("generic-garbage-collector"))  # its collector part
        self.ttl_client = client.as_identity(service_account_user("ttl-after-finished-controller"))
        self.syncs = syncs
        self.expires = expires
        self.collects = collects
        self.backoff = backoff or JobBackoff()
        self.workers = workers
        self.queue = WorkQueue()
        self.jobs = client.informer(resource_path("batch", "v1", "jobs"), on_add=self._job_changed,
                                    on_update=lambda _old, new: self._job_changed(new),
                                    on_delete=self._job_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)
        self._job_keys: dict[str, str] = {}  # uid -> namespace/name
        self.pods_of = Dependents("Job", self._job_keys.__contains__)
        # the pods created and deleted, and the tracking finalizers removed ("~<pod uid>"), that
        # the pod informer has not shown yet: a Job is not synced before it has
        self.expectations = Expectations()
        self.events = Recorder(client, "job-controller")
        self.created = 0
        # per running Job (uid): its failures since its last success (upstream's podBackoffStore),
        # fed by the pods each sync finds newly finished, so deleting them forgets nothing
        self._backoffs: dict[str, BackoffRecord] = {}
        # per Job key: the Job as this controller's last status write answered it, until the
        # informer holds that version or a newer one (a sync never starts from a status it
        # has overwritten: its counts would be written back)
        self._written: dict[str, dict[str, Any]] = {}

    # -- events
    def _job_changed(self, job: dict[str, Any]) -> None:
        uid = str(meta_of(job).get("uid", ""))
        if uid not in self._job_keys:
            self._job_keys[uid] = key_of(job)
            self.pods_of.claim(uid)
        self.queue.add("job:" + key_of(job))

    def _job_deleted(self, job: dict[str, Any]) -> None:
        uid = str(meta_of(job).get("uid", ""))
        self._job_keys.pop(uid, None)
        self.pods_of.forget(uid)
        self.expectations.forget(uid)
        self._backoffs.pop(uid, None)
        self._written.pop(key_of(job), None)
        self.queue.add("gc:" + uid)

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.file(pod)
        if owner is not None:
            self.expectations.observe(owner, pod)
            if not has_finalizer(pod):
                self.expectations.seen(owner, _UNFINALIZED + str(meta_of(pod).get("uid", "")))
            self._owner_changed(owner)
        elif meta_of(pod).get("finalizers") and has_finalizer(pod) and _maybe_orphaned(pod):
            self.queue.add("orphan:" + key_of(pod))

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.unfile(pod)
        if owner is not None:
            self.expectations.seen(owner, _UNFINALIZED + str(meta_of(pod).get("uid", "")))
            self._owner_changed(owner)

    def _owner_changed(self, uid: str) -> None:
        key = self._job_keys.get(uid)
        self.queue.add("job:" + key if key is not None else "gc:" + uid)

    # -- running
    async def run(self) -> None:
        await run_controller("job controller", (self.jobs, self.pods), self.queue, self._handle, self.workers)

    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "job":
            if self.syncs:
                await self.sync(name)
            else:
                await self._unsynced(name)
        elif kind == "orphan":
            if self.syncs:
                await self._release_orphan(name)
        else:  # the Job is gone: its pods are counted no more, and collected
            if self.syncs:
                _, error = await self._release(None, list(self.pods_of.of(name).values()))
                if error is not None:
                    raise error
            if self.collects:
                await collect(self.gc_client, "Pod", self.pods_of.of(name), name, self._job_keys)

    async def _unsynced(self, key: str) -> None:
        """A Job while the Job controller does not run: what the other two do for it, the
        collector's finalizers and its expiry once finished."""
        job = self.jobs.items.get(key)
        if job is None:
            return
        if self.collects:
            await finalize(self.gc_client, "Job", job, "Pod", self.pods_of.of(str(meta_of(job).get("uid", ""))))
        if self.expires and (job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None \
                and (_condition(job, "Complete") or _condition(job, "Failed")):
            await self._expire(key, job)

    # -- the tracking finalizer (controllers/jobtracking.py)
    async def _remove_finalizer(self, job_uid: str | None, pod: Mapping[str, Any]) -> None:
        """Takes the tracking finalizer off ``pod`` (its uid a precondition: a pod of that name
        may be another by now, which it then leaves alone); a pod gone already is done. The
        Job ``job_uid`` waits for the informer to show it."""
        meta = meta_of(pod)
        uid = str(meta.get("uid", ""))
        if job_uid is not None:
            self.expectations.expect(job_uid, _UNFINALIZED + uid)
        patch = {"metadata": {**REMOVE_FINALIZER["metadata"], "uid": uid}}
        try:
            await self.client.patch(resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name")),
                                    patch, patch_type="strategic")
        except ApiError as e:
            if job_uid is not None:
                self.expectations.seen(job_uid, _UNFINALIZED + uid)
            if e.code not in (404, 409):  # gone, or another pod of that name
                raise

    async def _release(self, job_uid: str | None, pods: Iterable[Mapping[str, Any]]
                       ) -> tuple[set[str], BaseException | None]:
        """Takes the tracking finalizer off the ``pods`` that carry it, all at once; returns the
        uids of those done, and the first error of the others (None when none failed)."""
        tried = [p for p in pods if has_finalizer(p)]
        results = await asyncio.gather(*(self._remove_finalizer(job_uid, p) for p in tried), return_exceptions=True)
        done = {str(meta_of(p).get("uid", "")) for p, r in zip(tried, results, strict=True)
                if not isinstance(r, BaseException)}
        return done, next((r for r in results if isinstance(r, BaseException)), None)

    async def _release_orphan(self, key: str) -> None:
        """A pod with the tracking finalizer that no running Job of this controller's tracks
        (its controller reference removed, or its Job gone or finished) loses it, as upstream's
        syncOrphanPod; a pod another kind controls keeps it (not this controller's)."""
        pod = self.pods.items.get(key)
        if pod is None or not has_finalizer(pod):
            return
        meta = meta_of(pod)
        ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return
            job = self.jobs.items.get(f"{meta.get('namespace', '')}/{ref.get('name', '')}")
            if job is not None and meta_of(job).get("uid") == ref.get("uid"):
                if not (_condition(job, "Complete") or _condition(job, "Failed")):
                    return  # its Job's (the Job's sync counts it)
            elif await owner_exists(self.client, pod, str(ref.get("uid", ""))):
                return  # the Job informer is behind
        await self._remove_finalizer(None, pod)

    def _latest(self, key: str) -> dict[str, Any] | None:
        """The Job: the informer's, or this controller's last write of it while newer."""
        job = self.jobs.items.get(key)
        written = self._written.get(key)
        if written is None:
            return job
        if job is None or meta_of(job).get("uid") != meta_of(written).get("uid") or _rv(job) >= _rv(written):
            del self._written[key]
            return job
        return written

    # -- a Job
    async def _expire(self, key: str, job: dict[str, Any]) -> bool:
        """The TTL-after-finished controller's part: a finished Job with ``ttlSecondsAfterFinished``
        is deleted (its pods with it, Foreground) that long after it finished; until then the
        controller wakes itself at that time. True once the delete is sent."""
        status = job.get("status") or {}
        finished_at = status.get("completionTime") or next(
            (c.get("lastTransitionTime") for c in status.get("conditions") or ()
             if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
        if not finished_at:
            return False
        remaining = float((job.get("spec") or {})["ttlSecondsAfterFinished"]) - _seconds_since(str(finished_at))
        if remaining > 0:
            self.queue.add_after("job:" + key, remaining + 0.1)
            return False
        if meta_of(job).get("deletionTimestamp"):
            return False  # being deleted already: the finalizers are carried out below
        meta = meta_of(job)
        try:
            await self.ttl_client.delete(resource_path("batch", "v1", "jobs", meta.get("namespace"), meta.get("name")),
                                     {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground",
                                      "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:
            if e.code not in (404, 409):
                raise
        return True

    async def sync(self, key: str) -> None:
        job = self._latest(key)
        if job is None:
            return
        meta = meta_of(job)
        uid = str(meta.get("uid", ""))
        if meta.get("deletionTimestamp"):
            # being deleted: its pods are counted no more, and must not hold it up (Foreground)
            _, stuck = await self._release(uid, list(self.pods_of.of(uid).values()))
            if stuck is not None:
                raise stuck
        pods = await pods_to_sync(self.gc_client, "Job", job, self.pods_of, self.expectations, collects=self.collects)
        if pods is None:
            return
        spec, status = job.get("spec") or {}, dict(job.get("status") or {})
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) or 0)
        n = int(completions) if indexed and completions is not None else 0
        policy = spec.get("podFailurePolicy")
        failed_only = _failed_only(spec)
        active = [p for p in pods.values() if _phase(p) not in ("Succeeded", "Failed")
                  and not meta_of(p).get("deletionTimestamp")]
        leaving = [p for p in pods.values() if meta_of(p).get("deletionTimestamp")
                   and _phase(p) not in ("Succeeded", "Failed")]
        terminating = len(leaving)

        def valid(pod: Mapping[str, Any]) -> bool:
            """Whether an Indexed Job's pod has an index it counts (a NonIndexed Job's all do)."""
            return not indexed or ((i := completion_index(pod)) is not None and i < n)

        # counted: the status's counts and the pods whose finalizer is gone (the lists' uids whose
        # pods no longer carry it, were this controller stopped before moving them)
        tracked = [p for p in pods.values() if has_finalizer(p)]
        uncounted = Uncounted.of(status)
        moved = uncounted.settle(_uids(tracked))
        counted_succeeded = int(status.get("succeeded", 0) or 0) + moved[0]
        counted_failed = int(status.get("failed", 0) or 0) + moved[1]
        # and the pods finished since, still carrying it
        new_succeeded = [p for p in tracked if _phase(p) == "Succeeded" and valid(p)
                         and _uid(p) not in uncounted.succeeded]
        new_failed = [p for p in tracked if is_failed(p, failed_only) and valid(p) and _uid(p) not in uncounted.failed]
        verdicts = [verdict(policy, p) for p in pods.values() if is_failed(p, failed_only)]
        backoff = self._backoffs.get(uid, BackoffRecord()).advanced(new_succeeded, new_failed)
        failed = counted_failed + len(uncounted.failed) + sum(1 for p in new_failed if verdict(policy, p).counts)
        # an index once succeeded stays so (its pod may be gone), as does one failed
        done_indexes = parse_indexes(status.get("completedIndexes"), n) | {
            i for p in tracked if _phase(p) == "Succeeded" and valid(p) and (i := completion_index(p)) is not None}
        succeeded = len(done_indexes) if indexed else counted_succeeded + len(uncounted.succeeded) + len(new_succeeded)
        per_index = indexed and spec.get("backoffLimitPerIndex") is not None
        failed_indexes: set[int] = set()
        if per_index:
            limit = int(spec["backoffLimitPerIndex"])
            failed_indexes = parse_indexes(status.get("failedIndexes"), n) | {
                i for p in tracked if is_failed(p, failed_only) and valid(p) and (i := completion_index(p)) is not None
                and i not in done_indexes and fails_its_index(policy, limit, p)}
        conditions = list(status.get("conditions") or ())
        now = _now()

        def condition(kind: str, state: str, reason: str, message: str) -> None:
            event = _CONDITION_EVENTS.get((kind, state))
            if event is not None and not any(c.get("type") == kind and c.get("status") == state for c in conditions):
                self.events.record("Job", job, event[0] or reason, event[1] or message,
                                   "Warning" if kind == "Failed" else "Normal")
            for c in conditions:
                if c.get("type") == kind:
                    if c.get("status") != state:
                        c.update(status=state, reason=reason, message=message, lastTransitionTime=now,
                                 lastProbeTime=now)
                    return
            conditions.append({"type": kind, "status": state, "reason": reason, "message": message,
                               "lastProbeTime": now, "lastTransitionTime": now})

        finished = _condition(job, "Complete") or _condition(job, "Failed")
        if finished and self.expires and spec.get("ttlSecondsAfterFinished") is not None \
                and await self._expire(key, job):
            return
        doomed: list[dict[str, Any]] = []  # the active pods to delete
        released: list[dict[str, Any]] = []  # the pods whose finalizer goes uncounted, before that
        to_create: list[int | None] = []
        annotations: dict[int, dict[str, str]] = {}  # per index, those of its new pod
        delayed: set[str] = set()  # failed pods kept until their index's next pod carries their counts
        target: tuple[str, str] | None = None
        success: tuple[str, str] | None = None
        settled = False
        if finished:
            doomed = active
            released = tracked  # (their counts are in the status for good)
            self._backoffs.pop(uid, None)
        elif spec.get("suspend"):
            doomed = released = active  # (not counted: upstream's deleteJobPods)
            condition("Suspended", "True", "JobSuspended", "Job suspended")
        else:
            if _condition(job, "Suspended"):
                condition("Suspended", "False", "JobResumed", "Job resumed")
            status.setdefault("startTime", now)
            deadline = spec.get("activeDeadlineSeconds")
            # the terminal condition waits for the pods still terminating, as upstream's
            # (FailureTarget or SuccessCriteriaMet says at once what it will be)
            settled = not active and not terminating
            success = next(((c.get("reason", ""), c.get("message", "")) for c in conditions
                            if c.get("type") == "SuccessCriteriaMet" and c.get("status") == "True"), None)
            target = None if success is not None else self._failure_target(spec, status, conditions, verdicts, failed,
                                                                            _restarts_on_failure(spec, pods.values()))
            if indexed and target is None and success is None:
                target = self._failed_indexes_target(spec, n, done_indexes, failed_indexes) if per_index else None
                message = success_policy_met(spec.get("successPolicy"), n, done_indexes) if target is None else None
                success = ("SuccessPolicy", message) if message is not None else None
            if success is None and target is None and (
                    # without completions, the pods still running after the first success are
                    # left to finish, as each may decide the Job is done (upstream's manageJob)
                    succeeded > 0 and not active if completions is None else succeeded >= int(completions)):
                success = ("CompletionsReached", "Reached expected number of succeeded pods")
            if target is not None:
                condition("FailureTarget", "True", *target)
                doomed = active  # (each counted as failed below, unless the policy ignores it, as upstream)
            elif success is not None:
                condition("SuccessCriteriaMet", "True", *success)
                doomed = active  # (not counted as failed: the Job succeeded)
            else:
                waiting = leaving if failed_only else []  # not replaced before they have failed
                doomed = _surplus(completions, indexed, parallelism, succeeded, active,
                                  done_indexes | failed_indexes)
                to_create = [] if doomed else self._wanted(completions, indexed, parallelism, succeeded, active,
                                                           done_indexes | failed_indexes, waiting)
                if per_index:
                    running = {i for p in [*active, *waiting] if (i := completion_index(p)) is not None}
                    replaced = pods_being_replaced([p for p in tracked if is_failed(p, failed_only)],
                                                   done_indexes | failed_indexes | running, n)
                    delayed = _uids(replaced.values())
                    if to_create:
                        to_create = self._indexes_due(key, to_create, replaced)
                        annotations = {i: failure_annotations(policy, replaced.get(i))
                                       for i in to_create if i is not None}
                elif to_create and (wait := backoff.delay(self.backoff.base, self.backoff.cap)) > 0:
                    to_create = []  # (not polled: requeued once the delay is over)
                    self._requeue(key, wait)
            if deadline is not None and not doomed:
                remaining = float(deadline) - _seconds_since(status["startTime"])
                self.queue.add_after("job:" + key, max(remaining, 0) + 0.5)
        error: BaseException | None = None
        if released:
            _, error = await self._release(uid, released)
        if doomed:
            await asyncio.gather(*(self._delete_pod(job, p) for p in doomed))
        created = 0
        if to_create:  # a create refused: the status still written, counting what was made, then the
            # error (upstream's manageJob lowers active by the creates that failed)
            created, failure = await self._create_pods(job, to_create[:BURST], annotations)
            error = error or failure
        ready = sum(1 for p in active if _ready(p))
        new_status = {**status, "active": len(active) - len(doomed) + created or None,
                      "ready": ready, "terminating": terminating + len(doomed)}
        if indexed:
            new_status["completedIndexes"] = compress_indexes(done_indexes) or None
            if per_index:  # (set, empty or not, as upstream's pointer)
                new_status["failedIndexes"] = compress_indexes(failed_indexes)
        if finished:  # (its counts are final: only a finalizer left behind goes)
            await self._write_status(key, job, {**new_status, "succeeded": len(done_indexes) if indexed
                                                else counted_succeeded, "failed": counted_failed,
                                                "conditions": conditions}, uncounted)
            if error is not None:
                raise error
            return
        # the pods finished (all, once the Job's fate is known) are recorded uncounted, then lose
        # their finalizer, then move into the counts: three steps, each safe to repeat
        finishing = target is not None or success is not None
        removable = record_finished(sorted(tracked, key=lambda p: completion_index(p) or 0) if indexed else tracked,
                                    uncounted, failed_only=failed_only, finishing=finishing,
                                    failing=target is not None, delayed=delayed, indexed=indexed,
                                    counts=lambda p: valid(p) and verdict(policy, p).counts)
        written = await self._write_status(key, job, {**new_status, "succeeded": counted_succeeded if not indexed
                                                  else len(done_indexes), "failed": counted_failed,
                                                  "conditions": conditions}, uncounted)
        self._backoffs[uid] = backoff
        if removable:
            done, failure = await self._release(uid, removable)
            error = error or failure
            moved = uncounted.settle(_uids(tracked) - done)
            counted_succeeded += moved[0]
            counted_failed += moved[1]
        if settled and not uncounted and finishing:
            if target is not None:
                condition("Failed", "True", *target)
            elif success is not None:
                condition("Complete", "True", *success)
                new_status["completionTime"] = now
        await self._write_status(key, written, {**new_status, "succeeded": counted_succeeded if not indexed
                                                else len(done_indexes), "failed": counted_failed,
                                                "conditions": conditions}, uncounted)
        if error is not None:
            raise error

    async def _write_status(self, key: str, job: dict[str, Any], status: dict[str, Any],
                            uncounted: Uncounted) -> dict[str, Any]:
        """Writes ``status`` (a field None, empty or 0 removed, as upstream's omitempty, but
        ``terminating`` and ``ready``) with its ``uncountedTerminatedPods``, if it differs from the Job's,
        on the Job's resourceVersion (a 409 if another write came first); returns the Job as
        written."""
        lists = uncounted.as_status()
        wanted = {k: v for k, v in status.items()
                  if not (v is None or v == [] or (v == 0 and k not in ("terminating", "ready")))}
        wanted["uncountedTerminatedPods"] = {k: v for k, v in lists.items() if v is not None}
        current = job.get("status") or {}
        if wanted == current:
            return job
        meta = meta_of(job)
        patch: dict[str, Any] = {k: wanted.get(k) for k in {*wanted, *current}}  # a key no longer set: null
        patch["uncountedTerminatedPods"] = lists
        written = await self.client.patch(
            resource_path("batch", "v1", "jobs", meta.get("namespace"), meta.get("name"), "status"),
            {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch})
        self._written[key] = written
        return written

    # -- the delay before replacing failed pods (controllers/jobbackoff.py)
    def _indexes_due(self, key: str, indexes: list[int | None],
                     replaced: Mapping[int, Mapping[str, Any]]) -> list[int | None]:
        """Of the ``indexes`` to start, those whose delay since their last failed pod (in
        ``replaced``) is over; the Job is requeued for the first of the others."""
        due: list[int | None] = []
        waits: list[float] = []
        for index in indexes:
            wait = index_delay(replaced.get(index) if index is not None else None,
                               self.backoff.base, self.backoff.cap)
            if wait > 0:
                waits.append(wait)
            else:
                due.append(index)
        if waits:
            self._requeue(key, min(waits))
        return due

    def _requeue(self, key: str, delay: float) -> None:
        # (a little late rather than early: a sync a hair too soon would requeue again)
        self.queue.add_after("job:" + key, delay + 0.01)

    @staticmethod
    def _failure_target(spec: Mapping[str, Any], status: Mapping[str, Any], conditions: list[dict[str, Any]],
                        verdicts: list[Verdict], failed: int, restarts: int | None = None) -> tuple[str, str] | None:
        """Why the Job fails, if it does, as upstream decides it in this order: a FailureTarget
        already set, a FailJob rule's pod, more failures than ``backoffLimit`` (or, with
        ``restartPolicy: OnFailure``, ``restarts`` of its running pods' containers reaching it:
        upstream's pastBackoffLimitOnFailure, more than 0 for a limit of 0), its
        ``activeDeadlineSeconds`` passed; None while it runs on."""
        target = next(((c.get("reason", ""), c.get("message", "")) for c in conditions
                       if c.get("type") == "FailureTarget" and c.get("status") == "True"), None)
        if target is None:
            target = next((("PodFailurePolicy", v.message) for v in verdicts if v.message is not None), None)
        limit = int(spec.get("backoffLimit", 6))
        if target is None and (failed > limit or (restarts is not None and restarts >= max(limit, 1))):
            target = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        if target is None and deadline is not None and _seconds_since(status["startTime"]) >= float(deadline):
            target = ("DeadlineExceeded", "Job was active longer than specified deadline")
        return target

    @staticmethod
    def _failed_indexes_target(spec: Mapping[str, Any], completions: int, done: set[int],
                               failed: set[int]) -> tuple[str, str] | None:
        """Why a Job with ``backoffLimitPerIndex`` fails for its failed indexes: more of them than
        ``maxFailedIndexes``, or every index ended and some failed."""
        most = spec.get("maxFailedIndexes")
        if most is not None and len(failed) > int(most):
            return "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes"
        if failed and len(failed) + len(done) >= completions:
            return "FailedIndexes", "Job has failed indexes"
        return None

    @staticmethod
    def _wanted(completions: Any, indexed: bool, parallelism: int, succeeded: int,
                active: list[dict[str, Any]], done_indexes: set[int],
                waiting: list[dict[str, Any]] | None = None) -> list[int | None]:
        """The pods to create now: their indexes (None for a NonIndexed Job); the ``waiting``
        terminating pods, not to be replaced yet, keep their room and their indexes."""
        waiting = waiting or []
        room = parallelism - len(active) - len(waiting)
        if room <= 0:
            return []
        if completions is None:
            return [None] * room if not succeeded else []  # (after a success, none new)
        if indexed:
            running = {i for p in [*active, *waiting] if (i := completion_index(p)) is not None}
            missing = [i for i in range(int(completions)) if i not in done_indexes and i not in running]
            return list(missing[:room])
        return [None] * min(room, int(completions) - succeeded - len(active) - len(waiting))

    async def _delete_pod(self, job: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        meta = meta_of(pod)
        try:
            await self.client.delete(resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name")),
                                     {"kind": "DeleteOptions", "apiVersion": "v1",
                                      "preconditions": {"uid": meta.get("uid")}})
            self.events.record("Job", job, "SuccessfulDelete", f"Deleted pod: {meta.get('name')}")
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name
                raise

    async def _create_pods(self, job: dict[str, Any], indexes: list[int | None],
                           annotations: Mapping[int, Mapping[str, str]] | None = None,
                           ) -> tuple[int, BaseException | None]:
        """Creates the pods of ``indexes`` (None: a NonIndexed Job's), each index's with its
        ``annotations`` (the per-index failure counts) besides the template's; returns how
        many were made and the first create's error, if any failed."""
        meta = meta_of(job)
        uid = str(meta.get("uid", ""))
        template = (job.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        path = resource_path("", "v1", "pods", meta.get("namespace"))

        async def create(index: int | None) -> None:
            pod_meta: dict[str, Any] = {
                "generateName": f"{meta['name']}-" if index is None else f"{meta['name']}-{index}-",
                "namespace": meta.get("namespace"),
                "labels": dict(tmeta.get("labels") or {}), "annotations": dict(tmeta.get("annotations") or {}),
                "finalizers": [*(f for f in tmeta.get("finalizers") or () if f != FINALIZER), FINALIZER],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": uid,
                                     "controller": True, "blockOwnerDeletion": True}]}
            spec = copy.deepcopy(template.get("spec") or {})
            if index is not None:
                pod_meta["annotations"].update((annotations or {}).get(index) or {})
                pod_meta["annotations"][COMPLETION_INDEX] = str(index)
                pod_meta["labels"][COMPLETION_INDEX] = str(index)
                spec.setdefault("hostname", f"{meta['name']}-{index}")
                for container in [*spec.get("initContainers", ()), *spec.get("containers", ())]:
                    env = container.setdefault("env", [])
                    if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                        env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                            "apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}})
            pod_meta = {k: v for k, v in pod_meta.items() if v}
            try:
                created = await self.client.create(path, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                                                          "spec": spec})
            except ApiError as e:
                if not namespace_terminating(e):  # (upstream's RealPodControl.CreatePods)
                    self.events.record("Job", job, "FailedCreate", f"Error creating: {e.message}", "Warning")
                raise
            name = meta_of(created).get("name", "")
            if name not in self.pods_of.of(uid):  # (in process, its event can come before the answer)
                self.expectations.expect(uid, "+" + name)
            self.created += 1
            self.events.record("Job", job, "SuccessfulCreate", f"Created pod: {name}")

        results = await asyncio.gather(*(create(i) for i in indexes), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if any(not isinstance(e, Exception) for e in errors):  # (a cancellation is not a failed create)
            raise next(e for e in errors if not isinstance(e, Exception))
        return len(results) - len(errors), errors[0] if errors else None


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await JobController(client, backoff=config.job_backoff, syncs=config.controller_enabled("job-controller"),
                        expires=config.controller_enabled("ttl-after-finished-controller"),
                        collects=config.controller_enabled("garbage-collector-controller")).run()
