"""kube-controller-manager's pod garbage collector: its sweeps of terminated pods
and of orphans.

**Terminated pods** (upstream's ``gcTerminated``): once the pod informer has synced,
then every 20 s (``gcCheckPeriod``),
when more pods have finished (phase ``Succeeded`` or ``Failed``) than
``--terminated-pod-gc-threshold`` (12,500; 0 turns the sweep off), the excess is
deleted with a grace period of 0, evicted pods (``Failed``, reason ``Evicted``)
first, then the oldest by creation time, names breaking ties. The finished pods
are kept as a set of their keys, updated by the pod informer's events, so a
sweep under the threshold costs a comparison; only a sweep over it sorts them.
Jobs' finished pods (``ttlSecondsAfterFinished`` aside) and evicted pods stop
piling up in a long run.

**Orphans**: pods bound to a node that no longer exists (``kubectl delete
node``, an autoscaler's node gone with its DaemonSet pods) leave instead of
staying ``Running`` forever. As upstream's ``gcOrphaned``: a node name that pods name but the node informer
does not hold is quarantined for 40 s (a node deleted and created again, an
informer behind, are not orphans); then, if the informer still lacks it and a
GET confirms it is gone (404), each pod bound to it (listed by
``spec.nodeName``) that has not finished is marked ``Failed`` with the
condition ``DisruptionTarget`` (``DeletionByPodGC``, "PodGC: node no longer
exists"), and every one is deleted with a grace period of 0. Their controllers
(ReplicaSets, Jobs, ...) then replace them where nodes exist.

**Terminating pods on out-of-service nodes** (upstream's ``gcTerminating``, the
non-graceful node shutdown of KEP-2268): every period, a pod being deleted (a
``deletionTimestamp``, not finished) whose node is not Ready and is tainted
``node.kubernetes.io/out-of-service`` with effect ``NoExecute`` is marked
``Failed`` and deleted with a grace period of 0, evicted pods first, then the
oldest: a dead kubelet never ends them (``kubectl taint nodes n
node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`` after a node died; the
taint eviction controller deletes the pods that do not tolerate it, and this
sweep finishes them, so a StatefulSet's replacements start elsewhere). The
terminating pods are kept as a map from the pod informer's events.

**Unscheduled terminating pods** (upstream's ``gcUnscheduledTerminating``): every
period, a pod being deleted, not finished and bound to no node (one the API could
not delete at once, a finalizer holding it: a Job's pod, ``batch.kubernetes.io/job-tracking``,
evicted or deleted before it was scheduled) is marked ``Failed`` and deleted with a
grace period of 0, as no kubelet will ever end it: its owner's controller sees it
failed and lets it go.

Deletions are counted in ``pod_gc_collector_force_delete_pods_total`` and
``pod_gc_collector_force_delete_pod_errors_total`` (labels ``namespace`` and
``reason``: ``terminated``, ``orphaned``, ``out-of-service`` or ``unscheduled``),
kube-controller-manager's names.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.metrics import PODGC_DELETE_ERRORS, PODGC_DELETES
from controlplane.podgeneration import observing

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["CHECK_PERIOD", "QUARANTINE_SECONDS", "TERMINATED_THRESHOLD", "PodGCController", "start"]

QUARANTINE_SECONDS = 40.0  # upstream's quarantineTime
CHECK_PERIOD = 20.0  # upstream's gcCheckPeriod
TERMINATED_THRESHOLD = 12_500  # --terminated-pod-gc-threshold's default
DELETES_AT_ONCE = 64  # a sweep's deletes in flight
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"  # upstream's TaintNodeOutOfService
REASON = "DeletionByPodGC"
MESSAGE = "PodGC: node no longer exists"
log = logging.getLogger(__name__)


# a finished pod's place in a terminated sweep's order: evicted first, then the oldest
# (RFC 3339 timestamps of one format sort as their times), then by name; and its uid
_Order = tuple[bool, str, str, str]


class PodGCController:
    def __init__(self, client: Client, quarantine: float = QUARANTINE_SECONDS,
                 terminated_threshold: int = TERMINATED_THRESHOLD, check_period: float = CHECK_PERIOD) -> None:
        self.client = client
        self.quarantine = quarantine
        self.terminated_threshold = terminated_threshold
        self.check_period = check_period
        self.queue = WorkQueue()
        self.nodes = client.informer("/api/v1/nodes", on_delete=self._node_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_seen,
                                    on_update=lambda _old, new: self._pod_seen(new), on_delete=self._pod_gone)
        self._quarantined: set[str] = set()  # node names waiting out their quarantine
        # (namespace, name) -> order, of every pod the informer holds finished (phase
        # Succeeded or Failed); kept only while the terminated sweep is on
        self.terminated: dict[tuple[str, str], _Order] = {}
        # (namespace, name) -> (its node, its order), of every pod the informer holds being
        # deleted (a deletionTimestamp) and not finished, bound to a node
        self.terminating: dict[tuple[str, str], tuple[str, _Order]] = {}
        # (namespace, name) -> order, of every pod the informer holds being deleted, not
        # finished and bound to no node
        self.unscheduled: dict[tuple[str, str], _Order] = {}

    def _node_deleted(self, node: dict[str, Any]) -> None:
        self._quarantine(str(meta_of(node).get("name", "")))

    def _pod_seen(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node not in self.nodes.items:
            self._quarantine(node)
        meta = meta_of(pod)
        phase = (pod.get("status") or {}).get("phase")
        if node and meta.get("deletionTimestamp") and phase != "Succeeded" and phase != "Failed":
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            evicted = (pod.get("status") or {}).get("reason") == "Evicted"
            self.terminating[key] = (str(node), (not evicted, str(meta.get("creationTimestamp", "")), key[1],
                                                 str(meta.get("uid", ""))))
        elif self.terminating:
            self.terminating.pop((str(meta.get("namespace", "")), str(meta.get("name", ""))), None)
        if not node and meta.get("deletionTimestamp") and phase != "Succeeded" and phase != "Failed":
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            self.unscheduled[key] = (True, str(meta.get("creationTimestamp", "")), key[1], str(meta.get("uid", "")))
        elif self.unscheduled:
            self.unscheduled.pop((str(meta.get("namespace", "")), str(meta.get("name", ""))), None)
        if self.terminated_threshold > 0:
            meta = meta_of(pod)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            status = pod.get("status") or {}
            phase = status.get("phase")
            if phase == "Succeeded" or phase == "Failed":
                evicted = phase == "Failed" and status.get("reason") == "Evicted"
                self.terminated[key] = (not evicted, str(meta.get("creationTimestamp", "")), key[1],
                                        str(meta.get("uid", "")))
            elif self.terminated:
                self.terminated.pop(key, None)

    def _pod_gone(self, pod: dict[str, Any]) -> None:
        meta = meta_of(pod)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if self.terminated:
            self.terminated.pop(key, None)
        if self.terminating:
            self.terminating.pop(key, None)
        if self.unscheduled:
            self.unscheduled.pop(key, None)

    async def gc_terminating(self) -> int:
        """Fail and delete the terminating pods of nodes not Ready and tainted out-of-service
        (upstream's ``gcTerminating``), evicted and oldest first; returns how many."""
        doomed = sorted(((key, order) for key, (node, order) in self.terminating.items()
                         if _out_of_service(self.nodes.items.get(node))), key=lambda item: item[1])
        if doomed:
            log.info("garbage collecting %d pods terminating on out-of-service nodes", len(doomed))
        for start in range(0, len(doomed), DELETES_AT_ONCE):
            await asyncio.gather(*(self._delete_out_of_service(ns, name, order[3])
                                   for (ns, name), order in doomed[start:start + DELETES_AT_ONCE]))
        return len(doomed)

    async def gc_unscheduled_terminating(self) -> int:
        """Fail and delete the terminating pods bound to no node (upstream's
        ``gcUnscheduledTerminating``), oldest first; returns how many."""
        doomed = sorted(self.unscheduled.items(), key=lambda item: item[1])
        if doomed:
            log.info("garbage collecting %d unscheduled terminating pods", len(doomed))
        for start in range(0, len(doomed), DELETES_AT_ONCE):
            await asyncio.gather(*(self._delete_unscheduled(ns, name, order[3])
                                   for (ns, name), order in doomed[start:start + DELETES_AT_ONCE]))
        return len(doomed)

    async def _delete_unscheduled(self, namespace: str, name: str, uid: str) -> None:
        if await self._fail_and_delete(namespace, name, uid, "unscheduled"):
            held = self.unscheduled.get((namespace, name))
            if held is not None and held[3] == uid:
                del self.unscheduled[(namespace, name)]

    async def _delete_out_of_service(self, namespace: str, name: str, uid: str) -> None:
        if await self._fail_and_delete(namespace, name, uid, "out-of-service"):
            held = self.terminating.get((namespace, name))
            if held is not None and held[1][3] == uid:
                del self.terminating[(namespace, name)]

    async def _fail_and_delete(self, namespace: str, name: str, uid: str, reason: str) -> bool:
        """Marks a terminating pod ``Failed`` and deletes it with no grace; False if that failed
        (logged and counted: the next sweep tries again). The informer's events take it out of
        the sweeps' maps too; the caller does at once, not to sweep it again meanwhile."""
        path = resource_path("", "v1", "pods", namespace, name)
        PODGC_DELETES.labels(namespace, reason).inc()
        try:
            # the phase first, as for an orphan (no DisruptionTarget here, as upstream); the uid a
            # precondition: a StatefulSet's pod of that name may be another by now
            await self.client.patch(path + "/status", {"metadata": {"uid": uid}, "status": {"phase": "Failed"}},
                                    patch_type="strategic")
            await self.client.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name by now
                PODGC_DELETE_ERRORS.labels(namespace, reason).inc()
                log.warning("pod %s/%s: terminating pod not deleted: %s", namespace, name, e)
                return False
        return True

    async def gc_terminated(self) -> int:
        """Delete the finished pods past the threshold, evicted and oldest first (upstream's
        ``gcTerminated``); returns how many were asked to go."""
        excess = len(self.terminated) - self.terminated_threshold
        if self.terminated_threshold <= 0 or excess <= 0:
            return 0
        doomed = sorted(self.terminated.items(), key=lambda item: item[1])[:excess]
        log.info("garbage collecting %d terminated pods (%d finished, threshold %d)", excess,
                 len(self.terminated), self.terminated_threshold)
        for start in range(0, len(doomed), DELETES_AT_ONCE):
            await asyncio.gather(*(self._delete_terminated(ns, name, order[3])
                                   for (ns, name), order in doomed[start:start + DELETES_AT_ONCE]))
        return excess

    async def _delete_terminated(self, namespace: str, name: str, uid: str) -> None:
        path = resource_path("", "v1", "pods", namespace, name)
        try:
            await self.client.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name by now
                PODGC_DELETE_ERRORS.labels(namespace, "terminated").inc()
                PODGC_DELETES.labels(namespace, "terminated").inc()  # every attempt, as upstream counts
                log.warning("pod %s/%s: terminated pod not deleted: %s", namespace, name, e)
                return
        PODGC_DELETES.labels(namespace, "terminated").inc()
        # the informer's delete drops it too; not sweeping it again meanwhile. Only the pod
        # deleted: after a 409 the name may be another pod's by now (a StatefulSet's
        # replacement), which the informer has put in its place and which stays counted
        held = self.terminated.get((namespace, name))
        if held is not None and held[3] == uid:
            del self.terminated[(namespace, name)]

    async def _sweep(self) -> None:
        await self.pods.synced.wait()  # a partial set would pick the wrong pods as the oldest
        while True:  # at once, then every period (upstream's wait.Until)
            for name, gc in (("terminated", self.gc_terminated), ("terminating", self.gc_terminating),
                             ("unscheduled terminating", self.gc_unscheduled_terminating)):
                try:
                    await gc()
                except Exception:  # a sweep's failure must not end the controller: the next one tries again
                    log.exception("%s pod sweep failed", name)
            await asyncio.sleep(self.check_period)

    def _quarantine(self, node: str) -> None:
        if node and node not in self._quarantined:
            self._quarantined.add(node)
            asyncio.get_running_loop().call_later(self.quarantine, self._release, node)

    def _release(self, node: str) -> None:
        self._quarantined.discard(node)
        self.queue.add(node)

    async def sync(self, node: str) -> None:
        if node in self.nodes.items:
            return
        try:
            await self.client.get(resource_path("", "v1", "nodes", name=node))
            return  # there after all (the informer is behind)
        except ApiError as e:
            if e.code != 404:
                raise
        pods = await self.client.list(resource_path("", "v1", "pods"), fieldSelector=f"spec.nodeName={node}")
        for pod in pods.get("items") or ():
            await self._delete(pod, node)

    async def _delete(self, pod: dict[str, Any], node: str) -> None:
        meta = meta_of(pod)
        path = resource_path("", "v1", "pods", str(meta.get("namespace", "")), str(meta.get("name", "")))
        log.info("pod %s/%s: its node %s no longer exists; deleting it", meta.get("namespace"), meta.get("name"),
                 node)
        try:
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                # the phase first: no kubelet will ever end the pod (upstream's markFailedAndDeletePodWithCondition)
                now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                await self.client.patch(path + "/status", {"status": {"phase": "Failed", "conditions": [observing(
                    {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": MESSAGE,
                     "lastTransitionTime": now}, pod)]}}, patch_type="strategic")
            await self.client.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name by now
                PODGC_DELETE_ERRORS.labels(str(meta.get("namespace", "")), "orphaned").inc()
                PODGC_DELETES.labels(str(meta.get("namespace", "")), "orphaned").inc()
                raise
        PODGC_DELETES.labels(str(meta.get("namespace", "")), "orphaned").inc()

    async def run(self) -> None:
        # the nodes first: a pod's node is looked up in them as the pods arrive
        nodes = asyncio.create_task(self.nodes.run())
        sweep = asyncio.create_task(self._sweep())
        try:
            await self.nodes.synced.wait()
            await run_controller("pod garbage collector", (self.pods,), self.queue, self.sync, 1)
        finally:
            for task in (nodes, sweep):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*(t for t in (nodes, sweep) if t is not None), return_exceptions=True)


def _out_of_service(node: dict[str, Any] | None) -> bool:
    """Not Ready and tainted ``out-of-service:NoExecute`` (upstream's IsNodeReady and
    HasOutOfServiceTaint); a node the informer does not hold is not (upstream skips it)."""
    if node is None:
        return False
    if any(c.get("type") == "Ready" and c.get("status") == "True"
           for c in (node.get("status") or {}).get("conditions") or ()):
        return False
    return any(t.get("key") == OUT_OF_SERVICE and t.get("effect") == "NoExecute"
               for t in (node.get("spec") or {}).get("taints") or ())


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await PodGCController(client, terminated_threshold=config.terminated_pod_gc_threshold,
                          check_period=config.pod_gc_check_period).run()
