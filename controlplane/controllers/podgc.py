"""kube-controller-manager's pod garbage collector, its part for orphans: pods
bound to a node that no longer exists (``kubectl delete node``, an autoscaler's
node gone with its DaemonSet pods) leave instead of staying ``Running`` forever.

As upstream's ``gcOrphaned``: a node name that pods name but the node informer
does not hold is quarantined for 40 s (a node deleted and created again, an
informer behind, are not orphans); then, if the informer still lacks it and a
GET confirms it is gone (404), each pod bound to it (listed by
``spec.nodeName``) that has not finished is marked ``Failed`` with the
condition ``DisruptionTarget`` (``DeletionByPodGC``, "PodGC: node no longer
exists"), and every one is deleted with a grace period of 0. Their controllers
(ReplicaSets, Jobs, ...) then replace them where nodes exist.

Upstream's other sweeps are left out: terminated pods past
``--terminated-pod-gc-threshold`` (12,500), terminating pods on
``out-of-service`` nodes, and unscheduled terminating pods (which the API
deletes at once here).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["QUARANTINE_SECONDS", "PodGCController", "start"]

QUARANTINE_SECONDS = 40.0  # upstream's quarantineTime
REASON = "DeletionByPodGC"
MESSAGE = "PodGC: node no longer exists"
log = logging.getLogger(__name__)


class PodGCController:
    def __init__(self, client: Client, quarantine: float = QUARANTINE_SECONDS) -> None:
        self.client = client
        self.quarantine = quarantine
        self.queue = WorkQueue()
        self.nodes = client.informer("/api/v1/nodes", on_delete=self._node_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_seen,
                                    on_update=lambda _old, new: self._pod_seen(new))
        self._quarantined: set[str] = set()  # node names waiting out their quarantine

    def _node_deleted(self, node: dict[str, Any]) -> None:
        self._quarantine(str(meta_of(node).get("name", "")))

    def _pod_seen(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node not in self.nodes.items:
            self._quarantine(node)

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
                await self.client.patch(path + "/status", {"status": {"phase": "Failed", "conditions": [
                    {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": MESSAGE,
                     "lastTransitionTime": now}]}}, patch_type="strategic")
            await self.client.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name by now
                raise

    async def run(self) -> None:
        # the nodes first: a pod's node is looked up in them as the pods arrive
        nodes = asyncio.create_task(self.nodes.run())
        try:
            await self.nodes.synced.wait()
            await run_controller("pod garbage collector", (self.pods,), self.queue, self.sync, 1)
        finally:
            nodes.cancel()
            await asyncio.gather(nodes, return_exceptions=True)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await PodGCController(client).run()
