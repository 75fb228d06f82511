"""The resource quota controller of kube-controller-manager: each ResourceQuota's
``status.hard`` (its spec's) and ``status.used``, counted from what its namespace holds.

Usage is what ``registry/quota.py`` says each object uses, summed over the objects
the quota covers: pods that have not ended (an ended one counts in ``count/pods``
only, as upstream's), from the shared pod informer (indexed
only for namespaces that have quotas), and the other kinds its ``hard`` names
(services, secrets, config maps, claims, ``count/<resource>.<group>``) listed from
the API's watch cache. As upstream, a quota is counted again when it appears or
its limits change, when a pod of its namespace ends or goes (replenishment), and
every ``RESYNC_SECONDS`` (which gives back the other kinds' deletions; upstream
replenishes those on their events and resyncs every five minutes). Creates are
charged between two counts by the quota admission (``api/quota.py``); a count
never starts on a charge, which it could not see the object of yet.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, held_in, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.quantity import format_quantity
from controlplane.registry.quota import STORAGE_CLASS_SUFFIX, covers, pod_counts, tracked, usage

from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["RESYNC_SECONDS", "QuotaController", "resources_counted", "start"]

RESYNC_SECONDS = 10.0
QUOTAS = resource_path("", "v1", "resourcequotas")

Obj = dict[str, Any]
_CORE = {"services": "services", "services.loadbalancers": "services", "services.nodeports": "services",
         "secrets": "secrets", "configmaps": "configmaps", "persistentvolumeclaims": "persistentvolumeclaims",
         "requests.storage": "persistentvolumeclaims", "replicationcontrollers": "replicationcontrollers",
         "resourcequotas": "resourcequotas"}


def resources_counted(hard: Any) -> set[tuple[str, str]]:
    """The (group, plural) of the kinds other than pods that a quota's ``hard`` names count."""
    kinds: set[tuple[str, str]] = set()
    for name in hard or ():
        if name in _CORE:
            kinds.add(("", _CORE[name]))
        elif STORAGE_CLASS_SUFFIX in name:
            kinds.add(("", "persistentvolumeclaims"))
        elif name.startswith("count/"):
            plural, _, group = name[len("count/"):].partition(".")
            if (group, plural) != ("", "pods"):
                kinds.add((group, plural))
    return kinds


class QuotaController:
    def __init__(self, client: Client, workers: int = 1) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.quotas = client.informer(QUOTAS, on_add=self._quota_changed, on_update=self._quota_updated,
                                      on_delete=self._quota_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> quota keys
        self._pods_in: dict[str, dict[str, Obj]] = {}  # namespace with quotas -> its pods

    # -- events
    def _quota_changed(self, quota: Obj) -> None:
        namespace = meta_of(quota).get("namespace", "")
        self._by_namespace.setdefault(namespace, set()).add(key_of(quota))
        if namespace not in self._pods_in:
            self._pods_in[namespace] = {key_of(p): p for p in held_in(self.pods.items, namespace)}
        self.queue.add(key_of(quota))

    def _quota_updated(self, old: Obj, new: Obj) -> None:
        """Counted again only when its limits change: the admission's charges (status
        writes) must not start a count that cannot see the objects being created yet."""
        hard = (new.get("spec") or {}).get("hard")
        if (old.get("spec") or {}) != (new.get("spec") or {}) or (new.get("status") or {}).get("hard") != hard:
            self._quota_changed(new)

    def _quota_deleted(self, quota: Obj) -> None:
        namespace = meta_of(quota).get("namespace", "")
        keys = self._by_namespace.get(namespace)
        if keys is not None:
            keys.discard(key_of(quota))
            if not keys:
                del self._by_namespace[namespace]
                self._pods_in.pop(namespace, None)

    def _pod_added(self, pod: Obj) -> None:
        pods = self._pods_in.get(meta_of(pod).get("namespace", ""))
        if pods is not None:
            pods[key_of(pod)] = pod  # charged by the admission already

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        pods = self._pods_in.get(meta_of(pod).get("namespace", ""))
        if pods is not None:
            pods[key_of(pod)] = pod
            if pod_counts(old) and not pod_counts(pod):  # it ended: its usage is given back
                self._requeue(meta_of(pod).get("namespace", ""))

    def _pod_deleted(self, pod: Obj) -> None:
        pods = self._pods_in.get(meta_of(pod).get("namespace", ""))
        if pods is not None and pods.pop(key_of(pod), None) is not None:
            self._requeue(meta_of(pod).get("namespace", ""))

    def _requeue(self, namespace: str) -> None:
        for key in self._by_namespace.get(namespace, ()):
            self.queue.add(key)

    # -- running
    async def run(self) -> None:
        resync = asyncio.create_task(self._resync())
        try:
            await run_controller("resource quota controller", (self.quotas, self.pods), self.queue, self.sync,
                                 self.workers)
        finally:
            resync.cancel()

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            for key in list(self.quotas.items):
                self.queue.add(key)

    async def sync(self, key: str) -> None:
        quota = self.quotas.items.get(key)
        if quota is None:
            return
        meta, spec = meta_of(quota), quota.get("spec") or {}
        namespace = meta.get("namespace", "")
        hard = dict(spec.get("hard") or {})
        total: dict[str, Fraction] = {name: Fraction(0) for name in hard}
        for pod in list(self._pods_in.get(namespace, {}).values()):
            if covers(quota, "", "pods", pod):  # an ended pod counts as an object only (count/pods), as upstream's
                uses = usage("", "pods", pod) if pod_counts(pod) else {"count/pods": Fraction(1)}
                for name, value in tracked(quota, uses).items():
                    total[name] += value
        for group, plural in sorted(resources_counted(hard)):
            path = resource_path(group, "v1" if not group else _version(group), plural, namespace)
            try:
                items = (await self.client.list(path, resourceVersion="0")).get("items") or ()
            except ApiError as e:
                if e.code != 404:  # a kind not served (yet): it counts nothing
                    raise
                items = ()
            for obj in items:
                if covers(quota, group, plural, obj):
                    for name, value in tracked(quota, usage(group, plural, obj)).items():
                        total[name] += value
        used = {name: format_quantity(value) for name, value in total.items()}
        status = quota.get("status") or {}
        if status.get("hard") == hard and status.get("used") == used:
            return
        # a merge patch merges maps: what a changed spec no longer names is written as null
        gone = {name: None for name in (status.get("used") or {}) if name not in used}
        await self.client.patch(resource_path("", "v1", "resourcequotas", namespace, meta.get("name"), "status"),
                                {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                                 "status": {"hard": {**gone, **hard}, "used": {**gone, **used}}})


_VERSIONS = {"apps": "v1", "batch": "v1", "networking.k8s.io": "v1", "policy": "v1", "autoscaling": "v2",
             "rbac.authorization.k8s.io": "v1", "storage.k8s.io": "v1", "discovery.k8s.io": "v1",
             "resource.k8s.io": "v1", "scheduling.k8s.io": "v1", "coordination.k8s.io": "v1"}


def _version(group: str) -> str:
    return _VERSIONS.get(group, "v1")


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await QuotaController(client).run()
