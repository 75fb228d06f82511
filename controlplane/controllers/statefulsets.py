"""The StatefulSet controller of kube-controller-manager (apps/v1), as an API client.

A StatefulSet runs ``replicas`` pods with stable identities: ``<set>-<ordinal>`` for the
ordinals from ``ordinals.start`` (default 0) on, with hostname ``<set>-<ordinal>`` and
subdomain ``serviceName``, and the labels ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index``. A pod whose ordinal falls outside that range (the set
scaled down, or its start moved) is condemned. ``podManagementPolicy: OrderedReady`` (the
default) creates a pod only once those before it are Running, Ready and available (Ready
for ``minReadySeconds``), and removes condemned pods from the highest ordinal down, one at
a time; ``Parallel`` creates and removes them all at once. A failed or succeeded pod is
deleted and recreated under its name. As upstream (``stateful_set_control.go``), the pods
are seen to first, then the condemned ones, then the update.

Updates: each template is a ControllerRevision ``<set>-<hash>`` (``history.py``, so
``kubectl rollout history`` and ``rollout undo`` work); its name is the pods'
``controller-revision-hash`` label and the status's revisions. ``RollingUpdate`` deletes
the pods of an old revision from the highest ordinal down to ``partition`` (counted from
the start ordinal), each recreated with the new template: as many at once as
``maxUnavailable`` allows (an int or a percent of ``replicas`` rounded down, at least 1;
default 1: MaxUnavailableStatefulSet, beta and on in 1.37), counting every pod not
available as unavailable. Under ``Parallel``, an old pod that is unavailable anyway is
replaced at once, and only the available ones wait for the budget (upstream's fix of
kubernetes#137409, in 1.37). A pod below the partition that is lost is recreated with the
current revision's template, not the new one, as upstream's newVersionedStatefulSetPod.
``OnDelete`` replaces a pod only when it is deleted. Status as upstream: replicas,
readyReplicas, availableReplicas, currentReplicas, updatedReplicas, currentRevision,
updateRevision, observedGeneration. That is what ``kubectl rollout status statefulset``
reads.

Storage: each of ``volumeClaimTemplates`` gives every pod its own claim,
``<template>-<set>-<ordinal>``, created before the pod (if it does not exist)
with the template's spec and labels plus the set's selector labels, and mounted
as the volume of the template's name. Claims outlive their pods and the set
unless ``persistentVolumeClaimRetentionPolicy`` says ``Delete``: ``whenDeleted``
makes the set their owner, ``whenScaled`` the pod a scale-down removes (the
garbage collector then deletes them with their owner), as upstream; a policy changed
after the claims were made is carried over to them at the next sync (``claim_owners``),
and a pending pod's missing claims are made again (upstream's createMissingPersistentVolumeClaims).
A claim's create, delete or change of owners syncs its set (found by the claim's name).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import run_controller

from .history import REVISION_HASH
from .ownership import key_of, meta_of
from .readiness import available as pods_available
from .revisioned import RevisionedSetController

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["POD_INDEX", "POD_NAME", "REVISION_HASH", "Plan", "StatefulSetController", "claim_owners", "max_unavailable",
           "start"]

POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
# the status fields upstream writes when 0 (no omitempty, or a pointer it always sets)
_ALWAYS_WRITTEN = ("replicas", "availableReplicas", "collisionCount")


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _available(pod: Mapping[str, Any], min_ready: float) -> bool:
    """Running, Ready, and Ready for ``min_ready`` seconds (upstream's isRunningAndAvailable)."""
    return _ready(pod) and pods_available((pod,), min_ready)[0] == 1


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def _terminating(pod: Mapping[str, Any]) -> bool:
    return bool(meta_of(pod).get("deletionTimestamp"))


def _revision(pod: Mapping[str, Any]) -> str:
    return str((meta_of(pod).get("labels") or {}).get(REVISION_HASH, ""))


def max_unavailable(value: Any, replicas: int) -> int:
    """A rolling update's ``maxUnavailable`` as a number of pods: an int, or a percent of
    ``replicas`` rounded down; at least 1 (upstream's getStatefulSetMaxUnavailable)."""
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        value = math.floor(int(value[:-1]) * replicas / 100)
    return max(value, 1) if isinstance(value, int) and not isinstance(value, bool) else 1


def _controller_ref(api_version: str, kind: str, owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = meta_of(owner)
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"), "uid": meta.get("uid"),
            "controller": True, "blockOwnerDeletion": True}


def claim_owners(refs: list[dict[str, Any]], sts: Mapping[str, Any], pod: Mapping[str, Any],
                 scaled_down: bool) -> list[dict[str, Any]] | None:
    """The owner references a claim of ``pod`` should have under its set's retention policy
    (upstream's updateClaimOwnerRefForSetAndPod): the set's while ``whenDeleted`` is Delete,
    unless the pod is scaled down and ``whenScaled`` is Delete, when the pod's instead. Other
    owners are kept; another controller's claim loses the set's and pod's references and gets
    none; a reference to an earlier set or pod of the same name (another uid) leaves the claim
    alone (None)."""
    ours: dict[tuple[Any, Any], Any] = {("StatefulSet", meta_of(sts).get("name")): meta_of(sts).get("uid"),
                                        ("Pod", meta_of(pod).get("name")): meta_of(pod).get("uid")}
    if any(ours.get((r.get("kind"), r.get("name")), r.get("uid")) != r.get("uid") for r in refs):
        return None
    kept = [r for r in refs if (r.get("kind"), r.get("name")) not in ours]
    if any(r.get("controller") for r in kept):
        return kept
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    by_pod = scaled_down and policy.get("whenScaled") == "Delete"
    if by_pod:
        kept.append(_controller_ref("v1", "Pod", pod))
    elif policy.get("whenDeleted") == "Delete":
        kept.append(_controller_ref("apps/v1", "StatefulSet", sts))
    return kept


def _refs_key(refs: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    return sorted((str(r.get("uid")), str(r.get("kind")), bool(r.get("controller"))) for r in refs)


@dataclass(frozen=True)
class Plan:
    """What a sync reads of one StatefulSet's spec."""

    replicas: int
    start: int  # the first ordinal
    parallel: bool  # podManagementPolicy Parallel: no waiting on each other
    rolling: bool  # updateStrategy RollingUpdate (else OnDelete)
    partition: int | None  # from rollingUpdate (None without it), an index from the first ordinal
    max_unavailable: int
    min_ready: float

    @classmethod
    def of(cls, sts: Mapping[str, Any]) -> Plan:
        spec = sts.get("spec") or {}
        replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
        strategy = spec.get("updateStrategy") or {}
        params = strategy.get("rollingUpdate")
        params = params if isinstance(params, dict) else None
        return cls(replicas=replicas, start=int((spec.get("ordinals") or {}).get("start") or 0),
                   parallel=spec.get("podManagementPolicy") == "Parallel",
                   rolling=strategy.get("type", "RollingUpdate") == "RollingUpdate",
                   partition=None if params is None else int(params.get("partition") or 0),
                   max_unavailable=max_unavailable((params or {}).get("maxUnavailable", 1), replicas),
                   min_ready=float(spec.get("minReadySeconds") or 0))

    def keeps_current(self, index: int, current_replicas: int) -> bool:
        """Whether the pod at ``index`` is made with the current revision rather than the new
        one (upstream's newVersionedStatefulSetPod): below the partition, or, for a rolling
        update without parameters, among the ones the rollout has not reached."""
        if self.partition is not None:
            return index < self.partition
        return self.rolling and index < current_replicas


class StatefulSetController(RevisionedSetController):
    kind = "StatefulSet"
    prefix = "sts"

    def __init__(self, client: Client, workers: int = 2) -> None:
        super().__init__(client, workers, "statefulset-controller")
        self.sets = self._sets_informer("statefulsets")
        self.claims = client.informer(resource_path("", "v1", "persistentvolumeclaims"), on_add=self._claim_changed,
                                      on_update=self._claim_updated, on_delete=self._claim_changed)

    async def run(self) -> None:
        await run_controller("statefulset controller", (self.sets, self.pods, self.claims, self.history.informer),
                             self.queue, self._handle, self.workers)

    # -- the claims' events
    def _claim_changed(self, claim: dict[str, Any]) -> None:
        """A claim made or deleted: its set, if it is one of a set's, is synced again (the
        claim of a pod still pending made again, its owners set as the retention policy says).
        Upstream's controller watches no claims and waits for its pods' next events."""
        key = self._set_of_claim(claim)
        if key is not None:
            self.queue.add(f"{self.prefix}:{key}")

    def _claim_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # only a change of owners: a claim's binding and status are not the set's concern
        if meta_of(old).get("ownerReferences") != meta_of(new).get("ownerReferences"):
            self._claim_changed(new)

    def _set_of_claim(self, claim: Mapping[str, Any]) -> str | None:
        """The key of the set whose claim ``<template>-<set>-<ordinal>`` this is, if any."""
        meta = meta_of(claim)
        namespace, name = meta.get("namespace"), str(meta.get("name", ""))
        m = re.match(r"(.+)-(\d+)\Z", name)
        if m is None:
            return None
        stem = m.group(1)
        dash = stem.find("-")
        while dash != -1:
            key = f"{namespace}/{stem[dash + 1:]}"
            sts = self.sets.items.get(key)
            if sts is not None and any((t.get("metadata") or {}).get("name") == stem[:dash]
                                       for t in (sts.get("spec") or {}).get("volumeClaimTemplates") or ()):
                return key
            dash = stem.find("-", dash + 1)
        return None

    # -- a StatefulSet
    async def sync(self, key: str) -> None:
        sts = self.sets.items.get(key)
        if sts is None:
            return
        meta = meta_of(sts)
        pattern = re.compile(re.escape(meta.get("name", "")) + r"-(\d+)\Z")
        # only pods named as its own are adopted (upstream's isMemberOf)
        owned = await self._pods_to_sync(sts, lambda pod: pattern.match(meta_of(pod).get("name", "")) is not None)
        if owned is None:
            return
        plan = Plan.of(sts)
        by_ordinal: dict[int, dict[str, Any]] = {}
        for pod in owned.values():
            m = pattern.match(meta_of(pod).get("name", ""))
            if m is not None:
                by_ordinal[int(m.group(1))] = pod
        status = sts.get("status") or {}
        in_use = {_revision(p) for p in owned.values()} | {str(status.get("currentRevision") or "")}
        template = (sts.get("spec") or {}).get("template") or {}
        update_revision, _, collisions = await self.history.record(sts, template, in_use - {""})
        replicas = [by_ordinal.get(plan.start + i) for i in range(plan.replicas)]
        condemned = [(o, by_ordinal[o]) for o in sorted(by_ordinal, reverse=True)
                     if not plan.start <= o < plan.start + plan.replicas]
        try:
            if not meta.get("deletionTimestamp"):
                await self._converge(sts, plan, replicas, condemned, update_revision)
        except ApiError:  # the status even if a pod's write failed (upstream's performUpdate), then the error
            await self._write_status(sts, by_ordinal, plan.replicas, update_revision, collisions)
            raise
        await self._write_status(sts, by_ordinal, plan.replicas, update_revision, collisions)

    async def _converge(self, sts: dict[str, Any], plan: Plan, replicas: list[dict[str, Any] | None],
                        condemned: list[tuple[int, dict[str, Any]]], update_revision: str) -> None:
        """The pods, then the condemned ones, then the update, as upstream's updateStatefulSet:
        ordered (OrderedReady) each step waits for the one before."""
        if not await self._keep_replicas(sts, plan, replicas, update_revision):
            return
        if not await self._remove_condemned(sts, plan, condemned):
            return
        if plan.rolling:
            await self._roll(sts, plan, replicas, update_revision)

    async def _keep_replicas(self, sts: dict[str, Any], plan: Plan, replicas: list[dict[str, Any] | None],
                             update_revision: str) -> bool:
        """Each ordinal has its pod: a finished one is deleted (it comes back at the next sync), a
        missing one created. Ordered, a pod not yet available stops the pass; False then."""
        for index, pod in enumerate(replicas):
            if pod is not None and _finished(pod):
                if not _terminating(pod):
                    await self._delete(sts, pod)
                if not plan.parallel:
                    return False
                continue
            if pod is None:
                await self._create(sts, plan.start + index, *self._template_for(sts, plan, index, update_revision))
                if not plan.parallel:
                    return False
                continue
            if (pod.get("status") or {}).get("phase") == "Pending":  # its claims made again if deleted
                await self._claims(sts, plan.start + index, missing_only=True)
            if not plan.parallel and (_terminating(pod) or not _available(pod, plan.min_ready)):
                return False
            if not _terminating(pod):
                await self._own_claims(sts, plan.start + index, pod, scaled_down=False)
        return True

    def _template_for(self, sts: dict[str, Any], plan: Plan, index: int,
                      update_revision: str) -> tuple[dict[str, Any], str]:
        """The template and revision a new pod at ``index`` gets: the current revision's below the
        partition (or where a rollout has not reached), else the set's own."""
        status = sts.get("status") or {}
        current = str(status.get("currentRevision") or "")
        keeps = plan.keeps_current(index, int(status.get("currentReplicas") or 0))
        if current and current != update_revision and keeps:
            template = self.history.template(str(meta_of(sts).get("uid", "")), current)
            if template is not None:
                return template, current
        return (sts.get("spec") or {}).get("template") or {}, update_revision

    async def _remove_condemned(self, sts: dict[str, Any], plan: Plan,
                                condemned: list[tuple[int, dict[str, Any]]]) -> bool:
        """Delete the pods outside the ordinals (by ordinal, highest first). Ordered, one at a
        time, each once available (or if it is the lowest of those that are not Ready, as
        upstream's firstUnhealthyPod); False while one is being removed."""
        for ordinal, pod in condemned:
            await self._own_claims(sts, ordinal, pod, scaled_down=True)
        unready = [p for _, p in condemned if _terminating(p) or not _ready(p)]
        lowest_unready = unready[-1] if unready else None
        for _, pod in condemned:
            if _terminating(pod):
                if not plan.parallel:
                    return False
                continue
            if not plan.parallel and pod is not lowest_unready and not _available(pod, plan.min_ready):
                return False
            await self._delete(sts, pod)
            if not plan.parallel:
                return False
        return True

    async def _roll(self, sts: dict[str, Any], plan: Plan, replicas: list[dict[str, Any] | None],
                    update_revision: str) -> None:
        """Upstream's updateStatefulSetAfterInvariantEstablished: the old pods from the highest
        ordinal down to the partition are deleted, as many as ``maxUnavailable`` less the pods
        unavailable already; under Parallel, old pods unavailable anyway go first and regardless."""
        def stale(pod: dict[str, Any] | None) -> bool:
            return pod is not None and _revision(pod) != update_revision and not _terminating(pod)

        def up(pod: dict[str, Any] | None) -> bool:
            return pod is not None and not _terminating(pod) and _available(pod, plan.min_ready)

        unavailable = sum(1 for p in replicas if not up(p))
        broken = sum(1 for p in replicas if stale(p) and not up(p)) if plan.parallel else 0
        if unavailable >= plan.max_unavailable and not broken:
            return
        floor = plan.partition or 0
        old = [p for p in reversed(replicas[floor:]) if stale(p)]
        room = max(plan.max_unavailable - unavailable, 0)
        if plan.parallel:
            doomed = [p for p in old if not up(p)] + [p for p in old if up(p)][:room]
        else:
            doomed = old[:room]
        for pod in doomed:
            if pod is not None:
                await self._delete(sts, pod)

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
                self.events.record("StatefulSet", sts, "FailedCreate",  # (upstream's recordPodEvent)
                                   f"create Pod {name} in StatefulSet {meta['name']} failed error: {e.message}",
                                   "Warning")
                raise
            return

        self.events.record("StatefulSet", sts, "SuccessfulCreate",
                           f"create Pod {name} in StatefulSet {meta['name']} successful")

    async def _claims(self, sts: dict[str, Any], ordinal: int, missing_only: bool = False) -> dict[str, str]:
        """The claims of pod ``ordinal`` (volume name -> claim name), created if missing;
        ``missing_only``: only those the informer lacks (upstream's createMissingPersistentVolumeClaims,
        for a pending pod)."""
        meta, spec = meta_of(sts), sts.get("spec") or {}
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        claims: dict[str, str] = {}
        for template in spec.get("volumeClaimTemplates") or ():
            tmeta = template.get("metadata") or {}
            volume = str(tmeta.get("name", ""))
            claim = f"{volume}-{meta['name']}-{ordinal}"
            claims[volume] = claim
            if missing_only and f"{meta.get('namespace')}/{claim}" in self.claims.items:
                continue
            cmeta: dict[str, Any] = {"name": claim, "namespace": meta.get("namespace"),
                                     "labels": {**(tmeta.get("labels") or {}), **selector}}
            if tmeta.get("annotations"):
                cmeta["annotations"] = dict(tmeta["annotations"])
            if policy.get("whenDeleted") == "Delete":
                cmeta["ownerReferences"] = [_controller_ref("apps/v1", "StatefulSet", sts)]
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

    async def _own_claims(self, sts: dict[str, Any], ordinal: int, pod: Mapping[str, Any], scaled_down: bool) -> None:
        """The claims of ``pod`` owned as the set's retention policy says now (upstream's
        ClaimsMatchRetentionPolicy and UpdatePodClaimForRetentionPolicy): a policy changed since
        they were made is carried over, and a pod a scale-down removes takes them with it under
        ``whenScaled: Delete``. The claim of a pod going is read if the informer lacks it."""
        spec, meta = sts.get("spec") or {}, meta_of(sts)
        for template in spec.get("volumeClaimTemplates") or ():
            name = f"{(template.get('metadata') or {}).get('name', '')}-{meta['name']}-{ordinal}"
            path = resource_path("", "v1", "persistentvolumeclaims", meta.get("namespace"), name)
            claim = self.claims.items.get(f"{meta.get('namespace')}/{name}")
            try:
                if claim is None and scaled_down:
                    claim = await self.client.get(path)
                if claim is None or meta_of(claim).get("deletionTimestamp"):
                    continue
                refs = meta_of(claim).get("ownerReferences") or []
                wanted = claim_owners(refs, sts, pod, scaled_down)
                if wanted is not None and _refs_key(wanted) != _refs_key(refs):
                    await self.client.patch(path, {"metadata": {
                        "ownerReferences": wanted, "resourceVersion": meta_of(claim).get("resourceVersion")}})
            except ApiError as e:
                if e.code != 404:
                    raise

    async def _delete(self, sts: dict[str, Any], pod: Mapping[str, Any]) -> None:
        await self._delete_pod(sts, pod, f"delete Pod {meta_of(pod).get('name')} in StatefulSet "
                                         f"{meta_of(sts)['name']} successful")

    async def _write_status(self, sts: dict[str, Any], by_ordinal: dict[int, dict[str, Any]], replicas: int,
                            update_revision: str, collisions: int) -> None:
        # as upstream's computeReplicaStatus: replicas, ready and available count every pod
        # created, terminating ones too (a pod in its grace period still runs); current and
        # updated only the pods that are not terminating
        created = [p for p in by_ordinal.values() if (p.get("status") or {}).get("phase")]
        live = [p for p in created if not _terminating(p)]
        ready = sum(1 for p in created if _ready(p))
        updated = sum(1 for p in live if _revision(p) == update_revision)
        old = sts.get("status") or {}
        revisions = {_revision(p) for p in live if _revision(p)}
        # the revision most pods ran before this update, until every pod is on the new one
        current_revision = update_revision if revisions <= {update_revision} and len(live) >= replicas \
            else old.get("currentRevision") or next(iter(revisions - {update_revision}), update_revision)
        current = sum(1 for p in live if _revision(p) == current_revision)
        available, soonest = pods_available([p for p in created if _ready(p)],
                                            float((sts.get("spec") or {}).get("minReadySeconds") or 0))
        if soonest is not None:
            self.queue.add_after("sts:" + key_of(sts), soonest + 0.1)
        status = {"replicas": len(created), "readyReplicas": ready, "availableReplicas": available,
                  "currentReplicas": current, "updatedReplicas": updated, "currentRevision": current_revision,
                  "updateRevision": update_revision, "observedGeneration": meta_of(sts).get("generation", 1),
                  "collisionCount": collisions}
        # (collisionCount is a pointer upstream always sets: 0 is written, not left out)
        if "collisionCount" in old and all(old.get(k, 0) == v for k, v in status.items()):
            return
        meta = meta_of(sts)
        await self.client.patch(
            resource_path("apps", "v1", "statefulsets", meta.get("namespace"), meta.get("name"), "status"),
            {"status": {k: v if k in _ALWAYS_WRITTEN else v or None for k, v in status.items()}})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``): the parts ``--controllers``
    turns on."""
    controller = StatefulSetController(client)
    controller.syncs = config.controller_enabled("statefulset-controller")
    controller.collects = config.controller_enabled("garbage-collector-controller")
    await controller.run()
