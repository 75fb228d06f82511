"""Kubelets: one user is one node.

It registers its Node through the API and reports the node's status, keeps a
Lease in ``kube-node-lease`` renewed every 10 s (the kubelet's heartbeat),
watches the pods bound to it (``fieldSelector=spec.nodeName=NAME``) and, for
each new one, reports it Running with a strategic-merge patch of its status,
as a kubelet does once the containers start. On GPU nodes (``gpus`` > 0) it
also publishes a ResourceSlice for its devices, as a DRA driver does.

Run alone::

    python -m loadtest.locustfiles.kubelets http://127.0.0.1:28500
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from typing import Any

from locust import constant, run_single_user, task

from .. import objects
from ..podlines import PodFacts, facts_of
from .base import TRACKER, KubeUser, Reflector, WatchEvent, microtime, param, path_for, unique_suffix

__all__ = ["KubeletUser"]

_lease_namespace_ready = False


class KubeletUser(KubeUser):
    wait_time = constant(float(param("lease_interval", 10.0)))
    concurrency = 3  # the watch, the lease, status patches

    def on_start(self) -> None:
        global _lease_namespace_ready
        self.node_name = f"node-{unique_suffix()}"
        self.gpus = int(param("gpus_per_node", 0))
        self.started: set[str] = set()
        self.deleting: set[str] = set()  # pods whose graceful deletion this kubelet is finishing
        self.unsynced: dict[str, dict[str, Any]] = {}  # status writes that failed, retried every lease interval
        if not _lease_namespace_ready:
            self.ensure("namespaces", objects.namespace("kube-node-lease"))
            _lease_namespace_ready = True
        self.act_as(f"system:node:{self.node_name}", "system:nodes")  # a kubelet's client certificate's
        created = self.ensure("nodes", objects.node(self.node_name, self.gpus, param("run_id", "")))
        node_uid = ((created.body or {}).get("metadata") or {}).get("uid") if created.status == 201 else None
        self.patch("nodes", None, self.node_name, objects.node_status(self.gpus, now=microtime()[:19] + "Z"),
                   "strategic", subresource="status")
        a = self.ensure("leases", objects.lease(self.node_name, microtime(), node_uid), "kube-node-lease",
                        group="coordination.k8s.io")
        self.lease: dict[str, Any] | None = a.body if a.status == 201 else None
        if self.gpus:
            self.ensure("resourceslices", objects.resource_slice(self.node_name, self.gpus, node_uid),
                        group="resource.k8s.io")
        self.reflector = Reflector(self, "pods", field_selector=f"spec.nodeName={self.node_name}",
                                   on_event=self._pod_event, on_list=self._pods_listed,
                                   timeout_seconds=random.randint(300, 600))  # client-go's reflector: 5-10 min
        self.reflector.start()

    def _pods_listed(self, items: list[dict[str, Any]]) -> None:
        """A (re)list: every pod bound here that is not yet reported running."""
        now = time.perf_counter()
        for obj in items:
            self._pod(facts_of(obj), lambda obj=obj: obj, now)  # type: ignore[misc]

    def _pod_event(self, ev: WatchEvent) -> None:
        pod = ev.pod()
        if ev.type != "DELETED":
            self._pod(pod, lambda: ev.object, ev.at)
        else:
            self.started.discard(pod.key)
            self.deleting.discard(pod.key)
            self.unsynced.pop(pod.key, None)

    def _pod(self, pod: PodFacts, whole: Callable[[], dict[str, Any]], at: float) -> None:
        """A pod bound here, as it is now: started (reported Running) once, its deletion finished
        once. Most events (its own Running status coming back) need no more than ``pod``; ``whole``
        parses the rest when it is needed."""
        key = pod.key
        TRACKER.pod_seen(pod, at)
        if pod.deleting:
            obj = whole()
            if obj["metadata"].get("deletionTimestamp"):  # not a label so named (podlines.py)
                self._finish_deletion(key, obj)
                return
        if pod.phase in ("Running", "Succeeded", "Failed") or key in self.started:
            return
        self.started.add(key)
        self._report_running(key, whole())

    def _report_running(self, key: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        ip = f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"
        # 404: the pod was deleted before its kubelet got to it (churn); a kubelet lets it go
        a = self.patch("pods", meta.get("namespace"), meta["name"],
                       objects.pod_running_status(obj, microtime()[:19] + "Z", ip), "strategic",
                       subresource="status", track=True, expected=(404,))
        if a.status != 404 and not 200 <= a.status < 300:
            self.unsynced[key] = obj  # the status manager tries again on its next sync

    def _finish_deletion(self, key: str, obj: dict[str, Any]) -> None:
        """A pod deleted gracefully stays (``Terminating``, holding its node's resources and its
        claims' devices) until its kubelet has stopped it and deletes it with grace 0, the pod's
        UID as precondition, as the kubelet's status manager does. Its containers stop at once here."""
        if key in self.deleting:
            return
        self.deleting.add(key)
        self.unsynced.pop(key, None)
        meta = obj["metadata"]
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if meta.get("uid"):
            options["preconditions"] = {"uid": meta["uid"]}
        # 404: already gone; 409: the name is another pod's by now. Recorded apart from the
        # controllers' deletes ("DELETE pods"), which the quota run counts against the creates
        a = self.call("DELETE", path_for("pods", meta.get("namespace"), meta["name"]), "pods [kubelet]", options,
                      expected=(404, 409))
        if not 200 <= a.status < 300 and a.status not in (404, 409):
            self.deleting.discard(key)  # tried again on the pod's next event or the next relist

    def _resync_statuses(self) -> None:
        for key, obj in list(self.unsynced.items()):
            del self.unsynced[key]
            self._report_running(key, obj)

    @task
    def renew_lease(self) -> None:
        """The node's heartbeat: an update of the Lease it holds (PUT, as client-go's lease controller);
        status writes that failed are retried on the same beat."""
        self._resync_statuses()
        path = path_for("leases", "kube-node-lease", self.node_name, group="coordination.k8s.io")
        if self.lease is None:
            a = self.call("GET", path, "leases")
            if a.status != 200 or a.body is None:
                return
            self.lease = a.body
        self.lease["spec"]["renewTime"] = microtime()
        a = self.call("PUT", path, "leases", self.lease)
        self.lease = a.body if a.status == 200 else None


if __name__ == "__main__":
    KubeletUser.host = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(KubeletUser)
