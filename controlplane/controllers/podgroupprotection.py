"""The PodGroup protection controller of kube-controller-manager (upstream's
``pkg/controller/podgroupprotection``).

The API stamps ``scheduling.k8s.io/podgroup-protection`` on every PodGroup it creates
while the controllers run (upstream's PodGroupProtection admission plugin;
``api/rest.py``). Deleting such a PodGroup only marks it (``deletionTimestamp``); this
controller lets it go, by removing the finalizer, once no active pod names it in
``spec.schedulingGroup.podGroupName``. Active is upstream's test: the pod exists and its
phase is neither ``Succeeded`` nor ``Failed`` (a pod being deleted still counts until
it is gone).

This is what keeps a gang's devices while its pods run: a claim reserved for a PodGroup
(KEP-5729) is released by the resourceclaim controller only once the PodGroup is gone
(``scheduler/dra/claims.py``), so deleting the PodGroup under running pods frees
nothing until they end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["FINALIZER", "PodGroupProtectionController", "start"]

FINALIZER = "scheduling.k8s.io/podgroup-protection"
GROUP, VERSION = "scheduling.k8s.io", "v1beta1"
log = logging.getLogger(__name__)


def _group_key(pod: Mapping[str, Any]) -> str | None:
    """``namespace/podGroupName`` of an active pod of a PodGroup, or None."""
    if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
        return None
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return f"{meta_of(pod).get('namespace', '')}/{group}" if group else None


def _deletion_candidate(podgroup: Mapping[str, Any]) -> bool:
    meta = meta_of(podgroup)
    return bool(meta.get("deletionTimestamp")) and FINALIZER in (meta.get("finalizers") or ())


class PodGroupProtectionController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        # "ns/podgroup" -> keys of its active pods (upstream's activePodSchedulingGroup index)
        self.active: dict[str, set[str]] = {}
        self._pod_group: dict[str, str] = {}  # pod key -> the group it is indexed under
        self.podgroups = client.informer(resource_path(GROUP, VERSION, "podgroups"), on_add=self._podgroup_changed,
                                         on_update=lambda _old, new: self._podgroup_changed(new))
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new),
                                    on_delete=lambda pod: self._pod_gone(key_of(pod)))

    def _podgroup_changed(self, podgroup: dict[str, Any]) -> None:
        if _deletion_candidate(podgroup):
            self.queue.add(key_of(podgroup))

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        key, group = key_of(pod), _group_key(pod)
        if self._pod_group.get(key) == group:
            return
        self._pod_gone(key)
        if group is not None:
            self._pod_group[key] = group
            self.active.setdefault(group, set()).add(key)

    def _pod_gone(self, key: str) -> None:
        group = self._pod_group.pop(key, None)
        if group is None:
            return
        members = self.active.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self.active[group]
        podgroup = self.podgroups.items.get(group)
        if podgroup is not None and _deletion_candidate(podgroup):
            self.queue.add(group)

    async def sync(self, key: str) -> None:
        podgroup = self.podgroups.items.get(key)
        if podgroup is None or not _deletion_candidate(podgroup) or self.active.get(key):
            return
        meta = meta_of(podgroup)
        path = resource_path(GROUP, VERSION, "podgroups", meta.get("namespace"), meta.get("name"))
        # with the resourceVersion read: a pod added meanwhile is seen again (409, then requeued)
        await self.client.patch(path, {"metadata": {
            "finalizers": [f for f in meta.get("finalizers") or () if f != FINALIZER],
            "resourceVersion": meta.get("resourceVersion")}})
        log.info("podgroup %s: no active pods, protection finalizer removed", key)

    async def run(self) -> None:
        await run_controller("podgroup protection controller", (self.podgroups, self.pods), self.queue, self.sync,
                             self.workers)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await PodGroupProtectionController(client).run()
