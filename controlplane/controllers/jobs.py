"""The Job controller of kube-controller-manager (batch/v1), as an API client.

A Job runs pods made from its template (``generateName: <job>-``, owned by
the Job as controller) until ``completions`` of them have succeeded, at most
``parallelism`` at a time. With ``completions`` unset, it runs until one pod
succeeds and the others finish. ``Indexed`` jobs give each pod an index
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
policy (or ``podReplacementPolicy: Failed``) a terminating pod is replaced only
once it is gone, and a pod someone else deletes before it finishes (an
eviction, preemption) is judged as failed with its last status, as a kubelet
would have failed it: its conditions (``DisruptionTarget``) match, its
containers, never terminated, match no exit code rule.

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

Status as upstream: active, ready, terminating (0 too), succeeded, failed,
completedIndexes and failedIndexes (intervals, ``0-2,5,7,8``), startTime,
completionTime, and the conditions ``kubectl wait --for=condition=complete``
reads: SuccessCriteriaMet then Complete, or FailureTarget then Failed (each
terminal condition once no pod is left terminating), and Suspended. Pods of a
deleted Job are collected (``controllers/ownership.py``); with no
``propagationPolicy`` a batch/v1 Job's pods are orphaned, as upstream, and the
API warns as upstream does.

``podReplacementPolicy: TerminatingOrFailed`` (the default without a pod
failure policy): a pod someone else deletes before it finished is replaced at
once, and counted as failed from then on, as upstream's; the pods this
controller deletes (suspend, a success) are not.

A failed pod is replaced after upstream's exponential delay
(``controllers/jobbackoff.py``; ``config.JobBackoff``, 10 s doubling to 6
minutes): the Job's failures since its last success are kept per Job as its
pods finish, and the Job is requeued for the moment its delay ends, not
polled; with ``backoffLimitPerIndex`` each index waits on its own, by its last
failed pod.

Not done: the pod-tracking finalizer (``batch.kubernetes.io/job-tracking``;
counts come from the pods, so deleting finished pods by hand lowers no
count, since counts never go down, and an index's failure count restarts
from the failed pods still there).

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

from .events import Recorder
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
from .ownership import Dependents, Expectations, collect, key_of, meta_of, pods_to_sync
from .podfailurepolicy import Verdict, verdict

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["COMPLETION_INDEX", "JobController", "compress_indexes", "start"]

log = logging.getLogger(__name__)

BURST = 500


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


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _condition(job: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def _failed_only(spec: Mapping[str, Any]) -> bool:
    """Whether a failed pod is replaced only once it has failed (not while terminating): with
    a pod failure policy, which must see how it ended, or ``podReplacementPolicy: Failed``."""
    return spec.get("podFailurePolicy") is not None or spec.get("podReplacementPolicy") == "Failed"


class JobController:
    def __init__(self, client: Client, workers: int = 4, backoff: JobBackoff | None = None) -> None:
        self.client = client
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
        self.expectations = Expectations()
        self.events = Recorder(client, "job-controller")
        self.created = 0
        # Pods someone else deleted before they finished (an eviction, preemption): a Job
        # replacing only failed pods would have seen them failed by their kubelet (containers
        # killed), one replacing terminating pods counts them failed once terminating (upstream's
        # isPodFailed), and the tracking finalizer kept them for the Job to see; here they are
        # simply gone, so their last state is kept (Job uid -> pod uid -> pod) and judged as a
        # failed pod's.
        self._vanished: dict[str, dict[str, dict[str, Any]]] = {}
        self._deleting: set[str] = set()  # the uids of the pods this controller deleted
        # the pods a failing Job deleted, counted as failed (Job uid -> pod uid -> pod)
        self._ended: dict[str, dict[str, dict[str, Any]]] = {}
        # per running Job (uid): its failures since its last success, and the uids of the
        # finished pods already counted in them
        self._backoffs: dict[str, BackoffRecord] = {}
        self._backed_off: dict[str, set[str]] = {}

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
        self._vanished.pop(uid, None)
        self._ended.pop(uid, None)
        self._forget_backoff(uid)
        self.queue.add("gc:" + uid)

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.file(pod)
        if owner is not None:
            self.expectations.observe(owner, pod)
            self._owner_changed(owner)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.unfile(pod)
        uid = str(meta_of(pod).get("uid", ""))
        if uid in self._deleting:
            self._deleting.discard(uid)
        elif owner is not None and _phase(pod) not in ("Succeeded", "Failed"):
            key = self._job_keys.get(owner)
            job = self.jobs.items.get(key) if key is not None else None
            if job is not None and not meta_of(job).get("deletionTimestamp") \
                    and not (_condition(job, "Complete") or _condition(job, "Failed")):
                self._vanished.setdefault(owner, {})[uid] = pod
        if owner is not None:
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
            await self.sync(name)
        else:
            await collect(self.client, "Pod", self.pods_of.of(name), name, self._job_keys)

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
            asyncio.get_running_loop().call_later(remaining + 0.1, self.queue.add, "job:" + key)
            return False
        if meta_of(job).get("deletionTimestamp"):
            return False  # being deleted already: the finalizers are carried out below
        meta = meta_of(job)
        try:
            await self.client.delete(resource_path("batch", "v1", "jobs", meta.get("namespace"), meta.get("name")),
                                     {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground",
                                      "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:
            if e.code not in (404, 409):
                raise
        return True

    async def sync(self, key: str) -> None:
        job = self.jobs.items.get(key)
        if job is None:
            return
        pods = await pods_to_sync(self.client, "Job", job, self.pods_of, self.expectations)
        if pods is None:
            return
        meta = meta_of(job)
        uid = str(meta.get("uid", ""))
        spec, status = job.get("spec") or {}, dict(job.get("status") or {})
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) or 0)
        active = [p for p in pods.values() if _phase(p) not in ("Succeeded", "Failed")
                  and not meta_of(p).get("deletionTimestamp")]
        leaving = [p for p in pods.values() if meta_of(p).get("deletionTimestamp")
                   and _phase(p) not in ("Succeeded", "Failed")]
        terminating = len(leaving)
        succeeded_pods = [p for p in pods.values() if _phase(p) == "Succeeded"]
        policy = spec.get("podFailurePolicy")
        failed_pods = {str(meta_of(p).get("uid", "")): p for p in pods.values() if _phase(p) == "Failed"}
        if not _failed_only(spec):  # (TerminatingOrFailed: one someone deletes has failed, as upstream's)
            failed_pods.update((u, p) for p in leaving if (u := str(meta_of(p).get("uid", ""))) not in self._deleting)
        failed_pods.update(self._vanished.get(uid, {}))
        verdicts = [verdict(policy, p) for p in failed_pods.values()]
        backoff = self._advance_backoff(uid, pods.values(), succeeded_pods, failed_pods)

        def counted() -> int:
            """The failures: failed pods, and the pods a failing Job ended; an Ignore rule's
            are none (nor counted in status.failed), as upstream's."""
            ended = {k: p for k, p in self._ended.get(uid, {}).items() if k not in failed_pods}
            return sum(1 for v in verdicts if v.counts) + sum(1 for p in ended.values() if verdict(policy, p).counts)

        failed = max(int(status.get("failed", 0) or 0), counted())
        n = int(completions) if indexed and completions is not None else 0
        # an index once succeeded stays so (its pod may be gone), as does one failed
        done_indexes = parse_indexes(status.get("completedIndexes"), n) | {
            i for p in succeeded_pods if (i := completion_index(p)) is not None and i < n}
        succeeded = len(done_indexes) if indexed else max(int(status.get("succeeded", 0) or 0), len(succeeded_pods))
        per_index = indexed and spec.get("backoffLimitPerIndex") is not None
        failed_indexes: set[int] = set()
        if per_index:
            limit = int(spec["backoffLimitPerIndex"])
            failed_indexes = parse_indexes(status.get("failedIndexes"), n) | {
                i for p in failed_pods.values() if (i := completion_index(p)) is not None and i < n
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
        if finished and spec.get("ttlSecondsAfterFinished") is not None and await self._expire(key, job):
            return
        doomed: list[dict[str, Any]] = []
        to_create: list[int | None] = []
        annotations: dict[int, dict[str, str]] = {}  # per index, those of its new pod
        if finished:
            doomed = active
            self._vanished.pop(uid, None)  # (their count is in status.failed for good)
            self._ended.pop(uid, None)
            self._forget_backoff(uid)
        elif spec.get("suspend"):
            doomed = active
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
            target = None if success is not None else self._failure_target(spec, status, conditions, verdicts, failed)
            if indexed and target is None and success is None:
                target = self._failed_indexes_target(spec, n, done_indexes, failed_indexes) if per_index else None
                message = success_policy_met(spec.get("successPolicy"), n, done_indexes) if target is None else None
                success = ("SuccessPolicy", message) if message is not None else None
            if success is None and target is None and (
                    bool(succeeded_pods) if completions is None else succeeded >= int(completions)):
                success = ("CompletionsReached", "Reached expected number of succeeded pods")
            if target is not None:
                condition("FailureTarget", "True", *target)
                doomed = active
                # every pod a failing Job ends counts as failed (unless the policy ignores it), as
                # upstream's
                ended = self._ended.setdefault(uid, {})
                ended.update((str(meta_of(p).get("uid", "")), p) for p in active)
                failed = max(failed, counted())
                if settled:
                    condition("Failed", "True", *target)
            elif success is not None:
                condition("SuccessCriteriaMet", "True", *success)
                doomed = active  # (not counted as failed: the Job succeeded)
                if settled:
                    condition("Complete", "True", *success)
                    status["completionTime"] = now
            else:
                waiting = leaving if _failed_only(spec) else []  # not replaced before they have failed
                to_create = self._wanted(completions, indexed, parallelism, succeeded, active,
                                         done_indexes | failed_indexes, waiting)
                if per_index and to_create:
                    running = {i for p in [*active, *waiting] if (i := completion_index(p)) is not None}
                    replaced = pods_being_replaced(failed_pods.values(), done_indexes | failed_indexes | running, n)
                    to_create = self._indexes_due(key, to_create, replaced)
                    annotations = {i: failure_annotations(policy, replaced.get(i))
                                   for i in to_create if i is not None}
                elif to_create and (wait := backoff.delay(self.backoff.base, self.backoff.cap)) > 0:
                    to_create = []  # (not polled: requeued once the delay is over)
                    self._requeue(key, wait)
            if deadline is not None and not doomed:
                remaining = float(deadline) - _seconds_since(status["startTime"])
                asyncio.get_running_loop().call_later(max(remaining, 0) + 0.5, self.queue.add, "job:" + key)
        if doomed:
            await asyncio.gather(*(self._delete_pod(job, p) for p in doomed))
        if to_create:
            await self._create_pods(job, to_create[:BURST], annotations)
        ready = sum(1 for p in active if _ready(p))
        new_status = {**status, "active": len(active) - len(doomed) + len(to_create[:BURST]) or None,
                      "ready": ready, "terminating": terminating + len(doomed),
                      "succeeded": succeeded or None, "failed": failed or None,
                      "conditions": conditions or None}
        if indexed:
            new_status["completedIndexes"] = compress_indexes(done_indexes) or None
            if per_index:  # (set, empty or not, as upstream's pointer)
                new_status["failedIndexes"] = compress_indexes(failed_indexes)
        new_status = {k: v for k, v in new_status.items() if v is not None}
        if new_status != (job.get("status") or {}):
            keys = {*new_status, *(job.get("status") or {})}  # a key no longer set is removed (null)
            await self.client.patch(resource_path("batch", "v1", "jobs", meta.get("namespace"), meta.get("name"),
                                                  "status"),
                                    {"status": {k: new_status.get(k) for k in keys}})

    # -- the delay before replacing failed pods (controllers/jobbackoff.py)
    def _advance_backoff(self, uid: str, pods: Iterable[Mapping[str, Any]], succeeded: list[dict[str, Any]],
                         failed: Mapping[str, dict[str, Any]]) -> BackoffRecord:
        """The Job's record with the pods finished since its last sync counted in."""
        counted = self._backed_off.setdefault(uid, set())
        new_succeeded = [p for p in succeeded if str(meta_of(p).get("uid", "")) not in counted]
        new_failed = [p for u, p in failed.items() if u not in counted]
        record = self._backoffs.get(uid, BackoffRecord()).advanced(new_succeeded, new_failed)
        self._backoffs[uid] = record
        # (a pod gone for good is not seen again, and not worth remembering)
        counted.intersection_update({str(meta_of(p).get("uid", "")) for p in pods} | failed.keys())
        counted.update(str(meta_of(p).get("uid", "")) for p in new_succeeded)
        counted.update(failed.keys())
        return record

    def _forget_backoff(self, uid: str) -> None:
        self._backoffs.pop(uid, None)
        self._backed_off.pop(uid, None)

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
        asyncio.get_running_loop().call_later(delay + 0.01, self.queue.add, "job:" + key)

    @staticmethod
    def _failure_target(spec: Mapping[str, Any], status: Mapping[str, Any], conditions: list[dict[str, Any]],
                        verdicts: list[Verdict], failed: int) -> tuple[str, str] | None:
        """Why the Job fails, if it does, as upstream decides it in this order: a FailureTarget
        already set, a FailJob rule's pod, more failures than ``backoffLimit``, its
        ``activeDeadlineSeconds`` passed; None while it runs on."""
        target = next(((c.get("reason", ""), c.get("message", "")) for c in conditions
                       if c.get("type") == "FailureTarget" and c.get("status") == "True"), None)
        if target is None:
            target = next((("PodFailurePolicy", v.message) for v in verdicts if v.message is not None), None)
        if target is None and failed > int(spec.get("backoffLimit", 6)):
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
            return [None] * room
        if indexed:
            running = {i for p in [*active, *waiting] if (i := completion_index(p)) is not None}
            missing = [i for i in range(int(completions)) if i not in done_indexes and i not in running]
            return list(missing[:room])
        return [None] * min(room, int(completions) - succeeded - len(active) - len(waiting))

    async def _delete_pod(self, job: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        meta = meta_of(pod)
        uid = str(meta.get("uid", ""))
        self._deleting.add(uid)
        try:
            await self.client.delete(resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name")))
            self.events.record("Job", job, "SuccessfulDelete", f"Deleted pod: {meta.get('name')}")
        except ApiError as e:
            if e.code != 404:
                self._deleting.discard(uid)
                raise

    async def _create_pods(self, job: dict[str, Any], indexes: list[int | None],
                           annotations: Mapping[int, Mapping[str, str]] | None = None) -> None:
        """Creates the pods of ``indexes`` (None: a NonIndexed Job's), each index's with its
        ``annotations`` (the per-index failure counts) besides the template's."""
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
            created = await self.client.create(path, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                                                      "spec": spec})
            name = meta_of(created).get("name", "")
            if name not in self.pods_of.of(uid):  # (in process, its event can come before the answer)
                self.expectations.expect(uid, "+" + name)
            self.created += 1
            self.events.record("Job", job, "SuccessfulCreate", f"Created pod: {name}")

        results = await asyncio.gather(*(create(i) for i in indexes), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await JobController(client, backoff=config.job_backoff).run()
