"""The StatefulSet controller of kube-controller-manager (apps/v1), as an API client.

A StatefulSet runs ``replicas`` pods with stable identities: ``<set>-<ordinal>``,
with hostname ``<set>-<ordinal>`` and subdomain ``serviceName``, and the labels
``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``.
``podManagementPolicy: OrderedReady`` (the default) creates ordinal i only once
0..i-1 are Running and Ready, and removes pods from the highest ordinal down, one
at a time. ``Parallel`` creates and removes them all at once.

Updates: each template is a ControllerRevision ``<set>-<hash>`` (``history.py``,
so ``kubectl rollout history`` and ``rollout undo`` work); its name is the pods'
``controller-revision-hash`` label and the status's revisions.
``RollingUpdate`` replaces pods from the highest ordinal down to ``partition``,
one at a time, each once the one above it is Ready again. ``OnDelete`` replaces
a pod only when it is deleted. A deleted or failed pod is recreated under its
name. Status as upstream: replicas, readyReplicas, availableReplicas,
currentReplicas, updatedReplicas, currentRevision, updateRevision,
observedGeneration. That is what ``kubectl rollout status statefulset`` reads.

Storage: each of ``volumeClaimTemplates`` gives every pod its own claim,
``<template>-<set>-<ordinal>``, created before the pod (if it does not exist)
with the template's spec and labels plus the set's selector labels, and mounted
as the volume of the template's name. Claims outlive their pods and the set
unless ``persistentVolumeClaimRetentionPolicy`` says ``Delete``: ``whenDeleted``
makes the set their owner, ``whenScaled`` the pod a scale-down removes (the
garbage collector then deletes them with their owner), as upstream.

``availableReplicas`` counts pods Ready for ``minReadySeconds``. Not done:
``ordinals.start`` and ``maxUnavailable`` for RollingUpdate.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .events import Recorder
from .history import REVISION_HASH, History
from .ownership import Dependents, Expectations, collect, key_of, meta_of, pods_to_sync
from .readiness import available as pods_available

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["POD_INDEX", "POD_NAME", "REVISION_HASH", "StatefulSetController", "start"]

POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _terminating(pod: Mapping[str, Any]) -> bool:
    return bool(meta_of(pod).get("deletionTimestamp"))


def _revision(pod: Mapping[str, Any]) -> str:
    return str((meta_of(pod).get("labels") or {}).get(REVISION_HASH, ""))


class StatefulSetController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.sets = client.informer(resource_path("apps", "v1", "statefulsets"), on_add=self._changed,
                                    on_update=lambda _old, new: self._changed(new), on_delete=self._deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)
        self._keys: dict[str, str] = {}  # uid -> namespace/name
        self.pods_of = Dependents("StatefulSet", self._keys.__contains__)
        self.events = Recorder(client, "statefulset-controller")
        self.history = History(client, "StatefulSet")
        self.expectations = Expectations()

    # -- events
    def _changed(self, sts: dict[str, Any]) -> None:
        uid = str(meta_of(sts).get("uid", ""))
        if uid not in self._keys:
            self._keys[uid] = key_of(sts)
            self.pods_of.claim(uid)
        self.queue.add("sts:" + key_of(sts))

    def _deleted(self, sts: dict[str, Any]) -> None:
        uid = str(meta_of(sts).get("uid", ""))
        self._keys.pop(uid, None)
        self.pods_of.forget(uid)
        self.expectations.forget(uid)
        self.queue.add("gc:" + uid)

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.file(pod)
        if owner is not None:
            self.expectations.observe(owner, pod)
            self._requeue(owner)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.unfile(pod)
        if owner is not None:
            self.expectations.observe_gone(owner, pod)
            self._requeue(owner)

    def _requeue(self, owner: str) -> None:
        key = self._keys.get(owner)
        self.queue.add("sts:" + key if key is not None else "gc:" + owner)

    # -- running
    async def run(self) -> None:
        await run_controller("statefulset controller", (self.sets, self.pods, self.history.informer), self.queue,
                             self._handle, self.workers)

    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "sts":
            await self.sync(name)
        else:
            await collect(self.client, "Pod", self.pods_of.of(name), name, self._keys)
            await collect(self.client, "ControllerRevision", self.history.owned_by(name), name, self._keys)

    # -- a StatefulSet
    async def sync(self, key: str) -> None:
        sts = self.sets.items.get(key)
        if sts is None:
            return
        owned = await pods_to_sync(self.client, "StatefulSet", sts, self.pods_of, self.expectations)
        if owned is None:
            return
        meta = meta_of(sts)
        spec = sts.get("spec") or {}
        replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
        name = meta.get("name", "")
        pattern = re.compile(re.escape(name) + r"-(\d+)\Z")
        by_ordinal: dict[int, dict[str, Any]] = {}
        for pod in owned.values():
            m = pattern.match(meta_of(pod).get("name", ""))
            if m is not None:
                by_ordinal[int(m.group(1))] = pod
        template = spec.get("template") or {}
        update_revision, _ = await self.history.record(sts, template, {_revision(p) for p in owned.values()})
        parallel = spec.get("podManagementPolicy") == "Parallel"
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        partition = int(((strategy.get("rollingUpdate") or {}).get("partition")) or 0)
        await self._converge(sts, by_ordinal, replicas, template, update_revision, parallel, rolling, partition)
        await self._write_status(sts, by_ordinal, replicas, update_revision)

    async def _converge(self, sts: dict[str, Any], by_ordinal: dict[int, dict[str, Any]], replicas: int,
                        template: dict[str, Any], update_revision: str, parallel: bool, rolling: bool,
                        partition: int) -> None:
        # failed pods go first (recreated below, under their names)
        for _ordinal, failed in sorted(by_ordinal.items()):
            if (failed.get("status") or {}).get("phase") == "Failed" and not _terminating(failed):
                await self._delete(sts, failed)
                return
        # create the missing ordinals below replicas: in order, each after the ones before are Ready
        for ordinal in range(replicas):
            pod = by_ordinal.get(ordinal)
            if pod is None:
                await self._create(sts, ordinal, template, update_revision)
                if not parallel:
                    return
                continue
            if not parallel and (_terminating(pod) or not _ready(pod)):
                return  # OrderedReady: nothing further until this one is Ready
        # scale down: the highest ordinals first, one at a time unless Parallel
        extra = sorted((o for o in by_ordinal if o >= replicas), reverse=True)
        for ordinal in extra:
            going = by_ordinal[ordinal]
            if _terminating(going):
                if not parallel:
                    return
                continue
            await self._condemn_claims(sts, ordinal, going)
            await self._delete(sts, going)
            if not parallel:
                return
        if extra and not parallel:
            return
        # rolling update: from the highest ordinal down to the partition, one at a time
        if not rolling:
            return
        for ordinal in range(replicas - 1, partition - 1, -1):
            current = by_ordinal.get(ordinal)
            if current is None or _terminating(current):
                return
            if _revision(current) != update_revision:
                await self._delete(sts, current)  # recreated at the next sync with the new template
                return
            if not _ready(current):
                return  # the one above must be Ready before the next goes

    async def _create(self, sts: dict[str, Any], ordinal: int, template: dict[str, Any], revision: str) -> None:
        meta = meta_of(sts)
        uid = str(meta.get("uid", ""))
        name = f"{meta['name']}-{ordinal}"
        tmeta = template.get("metadata") or {}
        spec = copy.deepcopy(template.get("spec") or {})
        spec["hostname"] = name
        if (sts.get("spec") or {}).get("serviceName"):
            spec["subdomain"] = sts["spec"]["serviceName"]
        pod_meta: dict[str, Any] = {
            "name": name, "namespace": meta.get("namespace"),
            "labels": {**(tmeta.get("labels") or {}), POD_NAME: name, POD_INDEX: str(ordinal),
                       REVISION_HASH: revision},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": uid,
                                 "controller": True, "blockOwnerDeletion": True}]}
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        claims = await self._claims(sts, ordinal)
        if claims:
            kept = [v for v in spec.get("volumes") or () if v.get("name") not in claims]
            spec["volumes"] = kept + [{"name": v, "persistentVolumeClaim": {"claimName": c}} for v, c in claims.items()]
        self.expectations.expect(uid, "+" + name)
        try:
            await self.client.create(resource_path("", "v1", "pods", meta.get("namespace")),
                                     {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
        except ApiError as e:
            self.expectations.seen(uid, "+" + name)
            if e.code != 409:  # 409: the old pod of that name is still going; its deletion requeues us
                raise
            return

        self.events.record("StatefulSet", sts, "SuccessfulCreate",
                           f"create Pod {name} in StatefulSet {meta['name']} successful")

    async def _claims(self, sts: dict[str, Any], ordinal: int) -> dict[str, str]:
        """The claims of pod ``ordinal`` (volume name -> claim name), created if missing."""
        meta, spec = meta_of(sts), sts.get("spec") or {}
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        claims: dict[str, str] = {}
        for template in spec.get("volumeClaimTemplates") or ():
            tmeta = template.get("metadata") or {}
            volume = str(tmeta.get("name", ""))
            claim = f"{volume}-{meta['name']}-{ordinal}"
            claims[volume] = claim
            cmeta: dict[str, Any] = {"name": claim, "namespace": meta.get("namespace"),
                                     "labels": {**(tmeta.get("labels") or {}), **selector}}
            if tmeta.get("annotations"):
                cmeta["annotations"] = dict(tmeta["annotations"])
            if policy.get("whenDeleted") == "Delete":
                cmeta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"],
                                             "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}]
            try:
                await self.client.create(resource_path("", "v1", "persistentvolumeclaims", meta.get("namespace")),
                                         {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": cmeta,
                                          "spec": copy.deepcopy(template.get("spec") or {})})
            except ApiError as e:
                if e.code != 409:  # the claim outlived an earlier pod of this ordinal: it is reused
                    raise
                continue
            self.events.record("StatefulSet", sts, "SuccessfulCreate",
                               f"create Claim {claim} Pod {meta['name']}-{ordinal} in StatefulSet {meta['name']} "
                               "success")
        return claims

    async def _condemn_claims(self, sts: dict[str, Any], ordinal: int, pod: Mapping[str, Any]) -> None:
        """``whenScaled: Delete``: a pod removed by a scale-down owns its claims, which the
        garbage collector deletes with it (a pod replaced by an update keeps them). The pod is
        their only owner: with ``whenDeleted: Delete`` the set's reference goes (the merge patch
        replaces the list), else the set, still there, would keep them (upstream's
        updateClaimOwnerRefForSetAndPod)."""
        spec, meta, pmeta = sts.get("spec") or {}, meta_of(sts), meta_of(pod)
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        if policy.get("whenScaled") != "Delete":
            return
        refs = [{"apiVersion": "v1", "kind": "Pod", "name": pmeta.get("name"), "uid": pmeta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}]
        for template in spec.get("volumeClaimTemplates") or ():
            claim = f"{(template.get('metadata') or {}).get('name', '')}-{meta['name']}-{ordinal}"
            try:
                await self.client.patch(resource_path("", "v1", "persistentvolumeclaims", meta.get("namespace"), claim),
                                        {"metadata": {"ownerReferences": refs}})
            except ApiError as e:
                if e.code != 404:
                    raise

    async def _delete(self, sts: dict[str, Any], pod: Mapping[str, Any]) -> None:
        meta, pmeta = meta_of(sts), meta_of(pod)
        uid = str(meta.get("uid", ""))
        self.expectations.expect(uid, "-" + pmeta.get("name", ""))
        try:
            await self.client.delete(resource_path("", "v1", "pods", pmeta.get("namespace"), pmeta.get("name")))
        except ApiError as e:
            self.expectations.seen(uid, "-" + pmeta.get("name", ""))
            if e.code != 404:
                raise
            return
        self.events.record("StatefulSet", sts, "SuccessfulDelete",
                           f"delete Pod {pmeta.get('name')} in StatefulSet {meta['name']} successful")

    async def _write_status(self, sts: dict[str, Any], by_ordinal: dict[int, dict[str, Any]], replicas: int,
                            update_revision: str) -> None:
        live = [p for p in by_ordinal.values() if not _terminating(p)]
        ready = sum(1 for p in live if _ready(p))
        updated = sum(1 for p in live if _revision(p) == update_revision)
        old = sts.get("status") or {}
        revisions = {_revision(p) for p in live if _revision(p)}
        # the revision most pods ran before this update, until every pod is on the new one
        current_revision = update_revision if revisions <= {update_revision} and len(live) >= replicas \
            else old.get("currentRevision") or next(iter(revisions - {update_revision}), update_revision)
        current = sum(1 for p in live if _revision(p) == current_revision)
        available, soonest = pods_available([p for p in live if _ready(p)],
                                            float((sts.get("spec") or {}).get("minReadySeconds") or 0))
        if soonest is not None:
            asyncio.get_running_loop().call_later(soonest + 0.1, self.queue.add, "sts:" + key_of(sts))
        status = {"replicas": len(live), "readyReplicas": ready, "availableReplicas": available,
                  "currentReplicas": current, "updatedReplicas": updated, "currentRevision": current_revision,
                  "updateRevision": update_revision, "observedGeneration": meta_of(sts).get("generation", 1),
                  "collisionCount": old.get("collisionCount", 0)}
        if all(old.get(k, 0) == v for k, v in status.items()):
            return
        meta = meta_of(sts)
        await self.client.patch(
            resource_path("apps", "v1", "statefulsets", meta.get("namespace"), meta.get("name"), "status"),
            {"status": {k: v if k in ("replicas", "availableReplicas") else v or None for k, v in status.items()}})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await StatefulSetController(client).run()
