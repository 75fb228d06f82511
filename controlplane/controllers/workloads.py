"""The Deployment and ReplicaSet controllers of kube-controller-manager, and the part of its
garbage collector that their objects need, as one API client.

- **ReplicaSet**: keeps ``spec.replicas`` active pods made from the template
  (``generateName: <rs>-``, owned by the ReplicaSet as controller), deleting
  the least useful extras first (unbound, then pending, then not ready, then
  the newest), and writes ``status`` (replicas, fullyLabeledReplicas,
  readyReplicas, availableReplicas, observedGeneration, and terminatingReplicas:
  its pods being deleted that have not finished, as upstream's
  DeploymentReplicaSetTerminatingReplicas, beta and on since 1.35). Creates wait for
  the informer to see the pods created before (upstream's expectations), so a
  slow watch never doubles a ReplicaSet.
- **Deployment**: one ReplicaSet per pod template, named
  ``<deployment>-<pod-template-hash>``, with the ``pod-template-hash`` label
  added to its selector, template and labels, and the
  ``deployment.kubernetes.io/revision`` annotation. The new ReplicaSet is the oldest
  whose template is the Deployment's (upstream's FindNewReplicaSet); a name taken by a
  ReplicaSet not the Deployment's or of another template is a hash collision: its
  ``status.collisionCount`` goes up and the hash (so the name) changes with it, as
  upstream's getNewReplicaSet. ``RollingUpdate`` scales the
  new ReplicaSet up within ``maxSurge`` and the old ones down within
  ``maxUnavailable`` (25% each by default: surge rounded up, unavailable down);
  ``Recreate`` scales the old ones to zero first. Status as upstream:
  replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, terminatingReplicas (its ReplicaSets'), observedGeneration, and the ``Available`` and
  ``Progressing`` conditions that ``kubectl rollout status`` reads. Old
  ReplicaSets beyond ``revisionHistoryLimit`` are deleted; ``paused`` stops
  rollouts (scaling still applies, to the one ReplicaSet with replicas, the old one
  when the template changed meanwhile; a Deployment paused mid-rollout, with
  several, is not scaled: upstream scales those in proportion, not done here)
  and turns ``Progressing`` Unknown
  (``DeploymentPaused``; ``DeploymentResumed`` on resuming), as upstream.
- **Garbage collection** along Deployment -> ReplicaSet -> Pod: when an
  owner is gone, its dependents go (``propagationPolicy: Background``, what
  kubectl sends). An owner deleted with ``Orphan`` carries the ``orphan``
  finalizer (the API adds it): its dependents lose their owner reference,
  then the finalizer is removed. ``Foreground`` (``foregroundDeletion``)
  deletes the dependents first, then removes the finalizer.

Released objects (whose owner was deleted with ``Orphan``) are adopted by a
controller whose selector matches them, as upstream; bare objects that match
are not (upstream adopts those too). ``progressDeadlineSeconds``: a rollout
that makes no progress (no more updated, ready or available replicas, no
fewer old ones) for that long turns ``Progressing`` False with
``ProgressDeadlineExceeded``, which ``kubectl rollout status`` reports as a
failure; a paused Deployment is not timed. ``minReadySeconds``: a pod counts
as available once it has been Ready that long (from its Ready condition's
``lastTransitionTime``), so rollouts pace themselves on it. Not done: rollbacks
other than by re-applying an old template, and garbage collection of other
kinds.

The ReplicationController controller is the ReplicaSet controller over the ``v1`` kind, as
upstream's replication manager is its ReplicaSet controller behind adapters: a second
``WorkloadController`` over ``SetKind`` ``REPLICATION_CONTROLLERS`` (no Deployments), its
selector a map (``matchLabels``), its pods owned by a ``v1`` ``ReplicationController``, its
writes and events as upstream's ``replication-controller``, its status without
``terminatingReplicas`` (ReplicationControllerStatus has none).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.identities import service_account_user

from .events import Recorder, namespace_terminating
from .ownership import (
    Dependents,
    Expectations,
    add_controller_ref,
    adoptable,
    collect,
    controller_uid,
    finalize,
    key_of,
    meta_of,
    pods_to_sync,
)
from .readiness import available as pods_available
from .readiness import is_ready, seconds_since

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["HASH_LABEL", "REPLICATION_CONTROLLERS", "REPLICA_SETS", "REVISION", "SetKind", "WorkloadController",
           "pod_template_hash", "start", "start_replication"]

log = logging.getLogger(__name__)

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
# a Deployment's annotations go to its new ReplicaSet (kubectl rollout history reads
# kubernetes.io/change-cause there), all but these (upstream's annotationsToSkip)
_NOT_COPIED = frozenset({"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED,
                         MAX_REPLICAS, "deprecated.deployment.rollback.to"})
BURST = 500  # pods created per ReplicaSet sync (upstream: slow-start batches up to 500)
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's SafeEncodeString alphabet


@dataclass(frozen=True)
class SetKind:
    """The kind whose sets of pods a ``WorkloadController`` keeps: ReplicaSets, or the
    ReplicationControllers upstream keeps with the same code."""

    kind: str
    group: str
    plural: str
    controller: str  # upstream's name for its controller: its service account and its events' source

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else "v1"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        return resource_path(self.group, "v1", self.plural, namespace, name, sub)

    def selector(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The set's selector as a LabelSelector (a ReplicationController's is a map)."""
        selector = (obj.get("spec") or {}).get("selector") or {}
        if self.group:
            return dict(selector)
        return {"matchLabels": dict(selector)} if selector else {}


REPLICA_SETS = SetKind("ReplicaSet", "apps", "replicasets", "replicaset-controller")
REPLICATION_CONTROLLERS = SetKind("ReplicationController", "", "replicationcontrollers", "replication-controller")


def pod_template_hash(template: Mapping[str, Any], collisions: int = 0) -> str:
    """The ``pod-template-hash``: FNV-1a (32 bits) of the template, as upstream's
    ComputeHash, encoded with the safe alphabet so it is a valid label value."""
    import orjson

    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS) + (str(collisions).encode() if collisions else b"")
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(h))


def _active(pod: Mapping[str, Any]) -> bool:
    return not meta_of(pod).get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


_ready = is_ready


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """An intstr of a rolling update (``25%`` or ``2``) as a count of ``total``."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        exact = int(text[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def _deletion_rank(pod: Mapping[str, Any]) -> tuple[int, int, int, str]:
    """Smaller first: unbound, pending, not ready, then the newest (upstream's ActivePods order)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    created = meta_of(pod).get("creationTimestamp") or ""
    return (1 if spec.get("nodeName") else 0, 1 if status.get("phase") == "Running" else 0,
            1 if _ready(pod) else 0, "".join(chr(0x10FFFF - ord(c)) for c in created))


class WorkloadController:
    """The three controllers over one set of informers and one queue; ``deployments``,
    ``replicasets`` and ``collects`` turn each off (``serve --controllers``): a part turned
    off leaves its objects alone, as when that controller of kube-controller-manager does
    not run (with the collector off, owners deleted with ``Orphan`` or ``Foreground`` keep
    their finalizer and the dependents of deleted owners stay)."""

    def __init__(self, client: Client, workers: int = 4, *, deployments: bool = True, replicasets: bool = True,
                 collects: bool = True, sets: SetKind = REPLICA_SETS) -> None:
        """``sets``: the kind whose pods the ReplicaSet part keeps; a controller of
        ``REPLICATION_CONTROLLERS`` keeps no Deployments (``deployments`` is ignored)."""
        self.client = client  # as the deployment controller (components.py)
        self.kind = sets
        keeps_deployments = sets is REPLICA_SETS  # (their collector's part too, with their controller off)
        deployments = deployments and keeps_deployments
        # the ReplicaSet controller's and the garbage collector's writes as their service accounts
        self.rs_client = client.as_identity(service_account_user(sets.controller))
        self.gc_client = client.as_identity(service_account_user("generic-garbage-collector"))
        self.workers = workers
        self.syncs_deployments = deployments
        self.syncs_replicasets = replicasets
        self.collects = collects
        self.queue = WorkQueue()
        # (one informer per collection in a process: a ReplicationController controller's handle on
        # the Deployments' has no handlers, so they are none of its business)
        path = resource_path("apps", "v1", "deployments")
        self.deployments = client.informer(path, on_add=self._deployment_changed,
                                           on_update=lambda _old, new: self._deployment_changed(new),
                                           on_delete=self._deployment_deleted) if keeps_deployments \
            else client.informer(path)
        self.replicasets = client.informer(sets.path(),
                                           on_add=self._replicaset_changed,
                                           on_update=lambda _old, new: self._replicaset_changed(new),
                                           on_delete=self._replicaset_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)
        self._owner_keys: dict[str, str] = {}  # uid -> "kind:namespace/name" of the owners seen
        self.pods_of = Dependents(sets.kind, self._owner_keys.__contains__)  # the pods of each ReplicaSet
        self.sets_of = Dependents("Deployment", self._owner_keys.__contains__)  # the ReplicaSets of each Deployment
        self.expectations = Expectations()  # a ReplicaSet's pod creates and deletes not yet seen
        self.events = Recorder(client, "deployment-controller")
        self.rs_events = Recorder(self.rs_client, sets.controller)  # the ReplicaSets' own events
        self.created = 0
        self.deleted = 0

    # -- events
    def _deployment_changed(self, d: dict[str, Any]) -> None:
        uid = str(meta_of(d).get("uid", ""))
        if uid not in self._owner_keys:
            self._owner_keys[uid] = "deployment:" + key_of(d)
            self.sets_of.claim(uid)
        self.queue.add("deployment:" + key_of(d))

    def _deployment_deleted(self, d: dict[str, Any]) -> None:
        uid = str(meta_of(d).get("uid", ""))
        self._owner_keys.pop(uid, None)
        self.sets_of.forget(uid)
        self.queue.add("gc-sets:" + uid)

    def _replicaset_changed(self, rs: dict[str, Any]) -> None:
        uid = str(meta_of(rs).get("uid", ""))
        if uid not in self._owner_keys:
            self._owner_keys[uid] = "replicaset:" + key_of(rs)
            self.pods_of.claim(uid)
        self.sets_of.file(rs)
        self.queue.add("replicaset:" + key_of(rs))
        owner = controller_uid(rs, "Deployment")
        if owner is not None and owner in self._owner_keys:
            self.queue.add(self._owner_keys[owner])

    def _replicaset_deleted(self, rs: dict[str, Any]) -> None:
        uid = str(meta_of(rs).get("uid", ""))
        self._owner_keys.pop(uid, None)
        self.sets_of.unfile(rs)
        self.pods_of.forget(uid)
        self.expectations.forget(uid)
        self.queue.add("gc-pods:" + uid)
        owner = controller_uid(rs, "Deployment")
        if owner is not None and owner in self._owner_keys:
            self.queue.add(self._owner_keys[owner])

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.file(pod)
        if owner is not None:
            self.expectations.observe(owner, pod)
            self._owner_changed(owner)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.unfile(pod)
        if owner is not None:
            self.expectations.observe_gone(owner, pod)
            self._owner_changed(owner)

    def _owner_changed(self, uid: str) -> None:
        key = self._owner_keys.get(uid)
        if key is not None:
            self.queue.add(key)
        else:
            self.queue.add("gc-pods:" + uid)  # an owner deleted since: its pods are collected

    # -- running
    async def run(self) -> None:
        await run_controller("workload controller", (self.deployments, self.replicasets, self.pods), self.queue,
                             self._handle, self.workers)

    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "replicaset":
            if self.syncs_replicasets:
                await self.sync_replicaset(name)
            elif self.collects:
                await self._finalize(self.replicasets.items.get(name), self.kind.kind, "Pod", self.pods_of)
        elif kind == "deployment":
            if self.syncs_deployments:
                await self.sync_deployment(name)
            elif self.collects:
                await self._finalize(self.deployments.items.get(name), "Deployment", "ReplicaSet", self.sets_of)
        elif not self.collects:
            return
        elif kind == "gc-pods":
            self.deleted += await collect(self.gc_client, "Pod", self.pods_of.of(name), name, self._owner_keys)
        elif kind == "gc-sets":
            await collect(self.gc_client, "ReplicaSet", self.sets_of.of(name), name, self._owner_keys)

    async def _finalize(self, owner: dict[str, Any] | None, kind: str, dependent_kind: str,
                        dependents: Dependents) -> None:
        """The collector's part alone, for an owner whose controller does not run: its
        ``orphan`` or ``foregroundDeletion`` finalizer once it is being deleted."""
        if owner is not None:
            await finalize(self.gc_client, kind, owner, dependent_kind,
                           dependents.of(str(meta_of(owner).get("uid", ""))))

    async def _adopt(self, owner: dict[str, Any], kind: str, group: str, plural: str) -> bool:
        """Take as dependents the released objects of the owner's namespace that its selector
        matches (upstream's ControllerRefManager); True if any was adopted."""
        released = (self.pods_of if kind == self.kind.kind else self.sets_of).released
        if not released:
            return False
        meta = meta_of(owner)
        spec = owner.get("spec") or {}
        selector = self.kind.selector(owner) if kind == self.kind.kind else spec.get("selector") or {}
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            return False  # an empty selector adopts nothing, as upstream
        prefix = f"{meta.get('namespace', '')}/"
        adopted = False
        ref = {"apiVersion": self.kind.api_version if kind == self.kind.kind else "apps/v1", "kind": kind,
               "name": meta.get("name"), "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}
        client = self.rs_client if kind == self.kind.kind else self.client
        for key, obj in list(released.items()):
            if not adoptable(key, obj, prefix, selector) \
                    or not await add_controller_ref(client, group, plural, obj, ref):
                continue
            released.pop(key, None)
            adopted = True
        return adopted

    # -- ReplicaSet
    async def sync_replicaset(self, key: str) -> None:
        rs = self.replicasets.items.get(key)
        if rs is None:
            return
        owned = await pods_to_sync(self.gc_client, self.kind.kind, rs, self.pods_of, self.expectations,
                                   collects=self.collects)
        if owned is None:
            return
        meta = meta_of(rs)
        uid = str(meta.get("uid", ""))
        if await self._adopt(rs, self.kind.kind, "", "pods"):
            return  # the adopted pods' events requeue this ReplicaSet
        # the status counts the pods as they were before this sync's creates and deletes (upstream's
        # calculateStatus of the lists manageReplicas got): ``owned`` is the informer's own view,
        # which a delete's event may change before the delete returns (a pod counted both active
        # and terminating)
        active = [p for p in owned.values() if _active(p)]
        terminating = sum(1 for p in owned.values() if _terminating(p))
        diff = _replicas(rs) - len(active)
        namespace = meta.get("namespace")
        # upstream's manageReplicas error: the status still gets written, with the ReplicaFailure
        # condition, and the error then requeues the set with backoff
        failure: ApiError | None = None
        if diff > 0:
            try:
                await self._create_pods(rs, min(diff, BURST))
            except ApiError as e:
                failure = e
        elif diff < 0:
            doomed = sorted(active, key=_deletion_rank)[:-diff]
            for p in doomed:
                self.expectations.expect(uid, "-" + meta_of(p)["name"])

            async def delete(pod: Mapping[str, Any]) -> None:
                name = meta_of(pod)["name"]
                try:
                    await self.rs_client.delete(resource_path("", "v1", "pods", namespace, name))
                    self.deleted += 1
                    self.rs_events.record(self.kind.kind, rs, "SuccessfulDelete", f"Deleted pod: {name}")
                except ApiError as e:
                    self.expectations.seen(uid, "-" + name)
                    if e.code != 404:  # (upstream's DeletePod records none for a pod already gone)
                        self.rs_events.record(self.kind.kind, rs, "FailedDelete", f"Error deleting: {e.message}",
                                              "Warning")
                        raise

            results = await asyncio.gather(*(delete(p) for p in doomed), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                if not isinstance(errors[0], ApiError):
                    raise errors[0]
                failure = errors[0]
        await self._replicaset_status(rs, active, terminating,
                                      ("FailedCreate" if diff > 0 else "FailedDelete", failure.message)
                                      if failure is not None else None)
        if failure is not None:
            raise failure

    async def _create_pods(self, rs: dict[str, Any], count: int) -> None:
        meta = meta_of(rs)
        uid = str(meta.get("uid", ""))
        template = (rs.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-", "namespace": meta.get("namespace"),
            "ownerReferences": [{"apiVersion": self.kind.api_version, "kind": self.kind.kind, "name": meta["name"],
                                 "uid": uid, "controller": True, "blockOwnerDeletion": True}]}
        for field in ("labels", "annotations", "finalizers"):
            if tmeta.get(field):
                pod_meta[field] = tmeta[field]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}
        path = resource_path("", "v1", "pods", meta.get("namespace"))

        async def create() -> None:
            try:
                created = await self.rs_client.create(path, copy.deepcopy(body))
            except ApiError as e:
                if not namespace_terminating(e):  # (upstream's RealPodControl.CreatePods)
                    self.rs_events.record(self.kind.kind, rs, "FailedCreate", f"Error creating: {e.message}",
                                          "Warning")
                raise
            name = meta_of(created).get("name", "")
            # the informer may have shown it already (in process, events can come before the answer)
            if name not in self.pods_of.of(uid):
                self.expectations.expect(uid, "+" + name)
            self.created += 1
            self.rs_events.record(self.kind.kind, rs, "SuccessfulCreate", f"Created pod: {name}")

        results = await asyncio.gather(*(create() for _ in range(count)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            # a namespace being deleted is no failure: every create would fail (upstream's manageReplicas)
            failed = next((e for e in errors if not namespace_terminating(e)), None)
            if failed is not None:
                raise failed

    async def _replicaset_status(self, rs: dict[str, Any], active: Iterable[dict[str, Any]],
                                 terminating: int, failure: tuple[str, str] | None = None) -> None:
        """``failure``: the reason and message of the last sync's failed creates or deletes, set
        as the ``ReplicaFailure`` condition if the set has none (upstream's calculateStatus: an
        existing one is kept as it is, and removed by a sync that fails nothing)."""
        pods = list(active)
        ready = [p for p in pods if _ready(p)]
        # available: ready for minReadySeconds; the set looks again when the next one will be
        available, soonest = pods_available(ready, float((rs.get("spec") or {}).get("minReadySeconds") or 0))
        if soonest is not None:
            self.queue.add_after("replicaset:" + key_of(rs), soonest + 0.1)
        # fully labeled: the pod has its template's labels, which may be more than the selector's
        # (an adopted pod may lack some; upstream's calculateStatus)
        wanted = ((((rs.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
        labeled = sum(1 for p in pods if all(meta_of(p).get("labels", {}).get(k) == v for k, v in wanted.items()))
        status = {"replicas": len(pods), "fullyLabeledReplicas": labeled, "readyReplicas": len(ready),
                  "availableReplicas": available, "observedGeneration": meta_of(rs).get("generation", 1)}
        old = rs.get("status") or {}
        conditions = list(old.get("conditions") or ())
        failed_before = any(c.get("type") == "ReplicaFailure" for c in conditions)
        if failure is not None and not failed_before:
            conditions.append({"type": "ReplicaFailure", "status": "True", "lastTransitionTime": _now(),
                               "reason": failure[0], "message": failure[1]})
        elif failure is None and failed_before:
            conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
        counts_terminating = self.kind is REPLICA_SETS  # (a ReplicationController's status has no such field)
        if all(old.get(k, 0) == v for k, v in status.items()) \
                and (not counts_terminating or old.get("terminatingReplicas") == terminating) \
                and conditions == list(old.get("conditions") or ()):
            return
        meta = meta_of(rs)
        patch: dict[str, Any] = {k: v if k == "replicas" else v or None for k, v in status.items()}
        if counts_terminating:
            patch["terminatingReplicas"] = terminating
        await self.rs_client.patch(self.kind.path(meta.get("namespace"), meta.get("name"), "status"),
                                   {"status": {**patch, "conditions": conditions or None}})

    # -- Deployment
    async def sync_deployment(self, key: str) -> None:
        d = self.deployments.items.get(key)
        if d is None:
            return
        meta = meta_of(d)
        uid = str(meta.get("uid", ""))
        sets = self.sets_of.of(uid)
        if await finalize(self.gc_client, "Deployment", d, "ReplicaSet", sets, collects=self.collects):
            return
        if await self._adopt(d, "Deployment", "apps", "replicasets"):
            return
        spec = d.get("spec") or {}
        template = spec.get("template") or {}
        replicas = _replicas(d)
        collisions = int((d.get("status") or {}).get("collisionCount") or 0)
        pod_hash = pod_template_hash(template, collisions)
        new_rs = _new_replicaset(sets.values(), template)
        old_sets = [rs for rs in sets.values() if rs is not new_rs and not meta_of(rs).get("deletionTimestamp")]
        # the new ReplicaSet's revision is one past every other's: one brought back (rollout
        # undo, a template changed back) takes the next revision, its old one kept in the history
        revision = max((_revision(rs) for rs in sets.values() if rs is not new_rs), default=0) + 1
        paused = bool(spec.get("paused"))
        strategy = spec.get("strategy") or {}
        rolling = strategy.get("type", "RollingUpdate") != "Recreate"
        surge = unavailable = 0
        if rolling:
            ru = strategy.get("rollingUpdate") or {}
            surge = _scaled(ru.get("maxSurge", "25%"), replicas, round_up=True)
            unavailable = _scaled(ru.get("maxUnavailable", "25%"), replicas, round_up=False)
            if surge == 0 and unavailable == 0:
                unavailable = 1
        if new_rs is None and not paused:
            new_rs = await self._create_replicaset(d, template, pod_hash, revision,
                                                   0 if old_sets else replicas, replicas + surge)
            if new_rs is None:
                return  # created: its informer event requeues this deployment
        if new_rs is not None:
            annotations = _new_replicaset_annotations(d, new_rs, revision)
            if annotations:
                rs_meta = meta_of(new_rs)
                await self.client.patch(resource_path("apps", "v1", "replicasets", rs_meta.get("namespace"),
                                                      rs_meta.get("name")), {"metadata": {"annotations": annotations}})
                return  # its event brings this deployment back
        if new_rs is not None and (new_rs.get("spec") or {}).get("minReadySeconds", 0) != \
                spec.get("minReadySeconds", 0):  # the new ReplicaSet follows its Deployment's, as upstream
            rs_meta = meta_of(new_rs)
            await self.client.patch(resource_path("apps", "v1", "replicasets", rs_meta.get("namespace"),
                                                  rs_meta.get("name")),
                                    {"spec": {"minReadySeconds": spec.get("minReadySeconds", 0)}})
            return  # its event brings this deployment back
        if new_rs is not None and not paused:
            await self._roll(d, new_rs, old_sets, replicas, surge, unavailable, rolling)
        elif paused:  # scaling still applies, to the one active ReplicaSet (upstream's FindActiveOrLatest):
            # the old one when the template changed while paused (no new ReplicaSet is made then)
            target = _active_or_latest(new_rs, old_sets)
            if target is not None and _replicas(target) != replicas:
                await self._scale(target, replicas, d, replicas + surge)
        await self._prune(d, old_sets)
        await self._deployment_status(d, new_rs, old_sets, replicas, unavailable)

    async def _create_replicaset(self, d: dict[str, Any], template: dict[str, Any], pod_hash: str,
                                 revision: int, replicas: int, max_replicas: int) -> dict[str, Any] | None:
        meta = meta_of(d)
        spec = d.get("spec") or {}
        template = copy.deepcopy(template)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: pod_hash}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_hash}
        name = f"{meta['name']}-{pod_hash}"
        body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": meta.get("namespace"),
                             "labels": tmeta["labels"],
                             "annotations": {**_copied_annotations(d), REVISION: str(revision),
                                             DESIRED: str(_replicas(d)), MAX_REPLICAS: str(max_replicas)},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                  "name": meta["name"], "uid": meta.get("uid"),
                                                  "controller": True, "blockOwnerDeletion": True}]},
                "spec": {"replicas": replicas, "minReadySeconds": spec.get("minReadySeconds", 0),
                         "selector": selector, "template": template}}
        try:
            await self.client.create(resource_path("apps", "v1", "replicasets", meta.get("namespace")), body)
            if replicas:
                self.events.record("Deployment", d, "ScalingReplicaSet",
                                   f"Scaled up replica set {name} from 0 to {replicas}")
        except ApiError as e:
            if e.code != 409:
                raise
            await self._name_taken(d, name)
        return None

    async def _name_taken(self, d: dict[str, Any], name: str) -> None:
        """A ReplicaSet ``name`` exists. Made by an earlier sync of ours (its event on its way):
        nothing to do. Another's, or another template's: a hash collision, and as upstream's
        getNewReplicaSet the Deployment's ``status.collisionCount`` goes up by one (a write
        conditional on the version read), so its next sync names the ReplicaSet by a new hash."""
        meta = meta_of(d)
        namespace = meta.get("namespace")
        try:
            rs = await self.client.get(resource_path("apps", "v1", "replicasets", namespace, name))
        except ApiError as e:
            if e.code == 404:  # gone meanwhile: the next sync creates it
                self.queue.add("deployment:" + key_of(d))
                return
            raise
        template = (d.get("spec") or {}).get("template") or {}
        if controller_uid(rs, "Deployment") == meta.get("uid") and \
                _same_template((rs.get("spec") or {}).get("template") or {}, template):
            return
        collisions = int((d.get("status") or {}).get("collisionCount") or 0)
        await self.client.patch(
            resource_path("apps", "v1", "deployments", namespace, meta.get("name"), "status"),
            {"metadata": {"resourceVersion": meta.get("resourceVersion")},
             "status": {"collisionCount": collisions + 1}})
        log.info("workload controller: hash collision for deployment %s/%s (replicaset %s): collisionCount %d -> %d",
                 namespace, meta.get("name"), name, collisions, collisions + 1)

    async def _scale(self, rs: dict[str, Any], replicas: int, d: dict[str, Any], max_replicas: int) -> None:
        meta = meta_of(rs)
        before = _replicas(rs)
        await self.client.patch(
            resource_path("apps", "v1", "replicasets", meta.get("namespace"), meta.get("name")),
            {"metadata": {"annotations": {DESIRED: str(_replicas(d)), MAX_REPLICAS: str(max_replicas)},
                          "resourceVersion": meta.get("resourceVersion")},
             "spec": {"replicas": replicas}})
        direction = "up" if replicas > before else "down"
        self.events.record("Deployment", d, "ScalingReplicaSet",
                           f"Scaled {direction} replica set {meta.get('name')} from {before} to {replicas}")

    async def _roll(self, d: dict[str, Any], new_rs: dict[str, Any], old_sets: list[dict[str, Any]],
                    replicas: int, surge: int, unavailable: int, rolling: bool) -> None:
        old_replicas = sum(_replicas(rs) for rs in old_sets)
        if not rolling:  # Recreate: the old pods all go before the new ones come
            for rs in old_sets:
                if _replicas(rs):
                    await self._scale(rs, 0, d, replicas)
            still_running = any(p for rs in old_sets for p in self.pods_of.of(str(meta_of(rs).get("uid"))).values()
                                if _active(p))
            if not still_running and _replicas(new_rs) != replicas:
                await self._scale(new_rs, replicas, d, replicas)
            return
        # scale up the new ReplicaSet within maxSurge
        allowed = replicas + surge - old_replicas
        target = max(min(replicas, allowed), 0) if old_replicas else replicas
        if target > _replicas(new_rs) or (not old_replicas and target != _replicas(new_rs)):
            await self._scale(new_rs, target, d, replicas + surge)
            return
        if not old_replicas:
            return
        # scale the old ones down within maxUnavailable, in upstream's two steps. The bound comes from
        # the ReplicaSets' specs, which this controller just wrote, not from their statuses, which lag
        # behind its scale-downs: a sync before the statuses catch up must not take more pods away.
        def available(rs: Mapping[str, Any]) -> int:
            return int((rs.get("status") or {}).get("availableReplicas", 0) or 0)

        min_available = replicas - unavailable
        new_unavailable = _replicas(new_rs) - available(new_rs)
        max_scaled_down = sum(_replicas(rs) for rs in (new_rs, *old_sets)) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return
        oldest_first = sorted(old_sets, key=lambda r: int((meta_of(r).get("annotations") or {}).get(REVISION, "0")
                                                            or 0))
        targets = {id(rs): _replicas(rs) for rs in oldest_first}
        cleaned = 0
        for rs in oldest_first:  # 1: old pods that are not available cost nothing to remove
            unhealthy = targets[id(rs)] - available(rs)
            cut = min(max(unhealthy, 0), max_scaled_down - cleaned)
            if cut > 0:
                targets[id(rs)] -= cut
                cleaned += cut
        # 2: what is available above the minimum may go (within the bound too: statuses may be stale)
        total = min(sum(available(rs) for rs in (new_rs, *old_sets)) - min_available, max_scaled_down - cleaned)
        for rs in oldest_first:
            cut = min(targets[id(rs)], max(total, 0))
            if cut > 0:
                targets[id(rs)] -= cut
                total -= cut
        for rs in oldest_first:
            if targets[id(rs)] != _replicas(rs):
                await self._scale(rs, targets[id(rs)], d, replicas + surge)

    async def _prune(self, d: dict[str, Any], old_sets: list[dict[str, Any]]) -> None:
        limit = (d.get("spec") or {}).get("revisionHistoryLimit", 10)
        idle = [rs for rs in old_sets if not _replicas(rs) and not (rs.get("status") or {}).get("replicas")]
        idle.sort(key=lambda r: int((meta_of(r).get("annotations") or {}).get(REVISION, "0") or 0))
        for rs in idle[:max(len(idle) - int(limit), 0)]:
            meta = meta_of(rs)
            await self.client.delete(resource_path("apps", "v1", "replicasets", meta.get("namespace"),
                                                   meta.get("name")))

    async def _deployment_status(self, d: dict[str, Any], new_rs: dict[str, Any] | None,
                                 old_sets: list[dict[str, Any]], replicas: int, unavailable: int) -> None:
        sets = [*old_sets, *([new_rs] if new_rs is not None else [])]

        def total(field: str) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0) or 0) for rs in sets)

        updated = int(((new_rs or {}).get("status") or {}).get("replicas", 0) or 0)
        available = total("availableReplicas")
        terminating = _terminating_replicas(sets)
        status: dict[str, Any] = {
            "observedGeneration": meta_of(d).get("generation", 1), "replicas": total("replicas"),
            "updatedReplicas": updated, "readyReplicas": total("readyReplicas"), "availableReplicas": available,
            "unavailableReplicas": max(replicas - available, 0)}
        old = d.get("status") or {}
        complete = new_rs is not None and updated == replicas and status["replicas"] == replicas \
            and available >= replicas and _replicas(new_rs) == replicas
        conditions = {c.get("type"): c for c in old.get("conditions") or ()}
        rs_name = meta_of(new_rs or {}).get("name", "")
        # progress, as upstream's DeploymentProgressing: more updated, ready or available
        # replicas than the last status said, or fewer old ones
        moved = updated > int(old.get("updatedReplicas", 0) or 0) \
            or status["readyReplicas"] > int(old.get("readyReplicas", 0) or 0) \
            or available > int(old.get("availableReplicas", 0) or 0) \
            or status["replicas"] - updated < int(old.get("replicas", 0) or 0) - int(old.get("updatedReplicas", 0) or 0)
        before_progress = conditions.get("Progressing") or {}
        given = (d.get("spec") or {}).get("progressDeadlineSeconds")
        deadline = float(given) if given is not None else 0.0
        paused = bool((d.get("spec") or {}).get("paused"))
        timed = given is not None and not paused
        # upstream's checkPausedConditions: with a progress deadline, pausing turns Progressing
        # Unknown (not for a rollout that timed out) and resuming says so, restarting the clock
        has_deadline = given is not None and int(given) != 2**31 - 1
        reason_before = before_progress.get("reason")
        updating = ("True", "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
        resumed = ("Unknown", "DeploymentResumed", "Deployment is resumed")
        if has_deadline and paused and reason_before != "ProgressDeadlineExceeded":
            progress = ("Unknown", "DeploymentPaused", "Deployment is paused")
        elif has_deadline and paused:
            progress = (str(before_progress.get("status")), str(reason_before),
                        str(before_progress.get("message", "")))
        elif has_deadline and reason_before == "DeploymentPaused":
            progress = resumed
        elif complete:
            progress = ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
        elif moved or reason_before in (None, "NewReplicaSetAvailable") \
                or (f'"{rs_name}"' not in str(before_progress.get("message", ""))
                    and reason_before != "DeploymentResumed"):  # a rollout (re)starts
            progress = updating
        elif before_progress.get("reason") == "ProgressDeadlineExceeded" \
                or (timed and seconds_since(before_progress.get("lastUpdateTime")) > deadline):
            progress = ("False", "ProgressDeadlineExceeded", f'ReplicaSet "{rs_name}" has timed out progressing.')
        else:
            progress = resumed if reason_before == "DeploymentResumed" else updating
            if timed:  # no progress yet: look again when the deadline passes
                remaining = deadline - seconds_since(before_progress.get("lastUpdateTime"))
                self.queue.add_after("deployment:" + key_of(d), max(remaining, 0) + 0.5)
        wanted = {
            "Available": ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
            if available >= replicas - unavailable else
            ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
            "Progressing": progress,
        }
        now = _now()
        out = []
        changed = False
        for kind, (state, reason, message) in wanted.items():
            before = conditions.get(kind)
            if before is not None and (before.get("status"), before.get("reason")) == (state, reason) \
                    and before.get("message") == message \
                    and not (kind == "Progressing" and moved and progress == updating):
                out.append(before)
                continue
            changed = True
            transition = before.get("lastTransitionTime") if before and before.get("status") == state else now
            out.append({"type": kind, "status": state, "reason": reason, "message": message,
                        "lastUpdateTime": now, "lastTransitionTime": transition})
        # upstream's syncRolloutStatus: a ReplicaSet's ReplicaFailure (the new one's first) copied
        # as the Deployment's, its transition time as both times; removed when none has one. A
        # paused Deployment's sync (upstream's syncStatusOnly) leaves it as it was.
        before = conditions.get("ReplicaFailure")
        failed = before if paused else _replica_failure(new_rs, old_sets)
        if failed is not None and failed is not before:
            if before is not None and (before.get("status"), before.get("reason")) == \
                    (failed.get("status"), failed.get("reason")):
                failed = before
            else:
                since = failed.get("lastTransitionTime")
                failed = {"type": "ReplicaFailure", "status": failed.get("status"), "reason": failed.get("reason"),
                          "message": failed.get("message"), "lastUpdateTime": since,
                          "lastTransitionTime": before.get("lastTransitionTime")
                          if before is not None and before.get("status") == failed.get("status") else since}
        if failed is not None:
            out.append(failed)
        changed = changed or failed is not before
        status["conditions"] = out
        revision = (meta_of(new_rs or {}).get("annotations") or {}).get(REVISION)
        annotations = meta_of(d).get("annotations") or {}
        if not changed and all(old.get(k, 0) == v for k, v in status.items() if k != "conditions") \
                and old.get("terminatingReplicas") == terminating \
                and (revision is None or annotations.get(REVISION) == revision):
            return
        meta = meta_of(d)
        path = resource_path("apps", "v1", "deployments", meta.get("namespace"), meta.get("name"))
        if revision is not None and annotations.get(REVISION) != revision:
            await self.client.patch(path, {"metadata": {"annotations": {REVISION: revision}}})
        await self.client.patch(path + "/status", {"status": {
            **{k: (v or None) if k != "conditions" else v for k, v in status.items()},
            "terminatingReplicas": terminating}})


def _without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template without its ``pod-template-hash`` label, empty maps left out (upstream's
    semantic equality takes an empty map for a missing one)."""
    out = {k: v for k, v in template.items() if k != "metadata"}
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k != "labels" and v not in (None, {})}
    labels = {k: v for k, v in ((template.get("metadata") or {}).get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    if meta:
        out["metadata"] = meta
    return out


def _same_template(rs_template: Mapping[str, Any], template: Mapping[str, Any]) -> bool:
    """Whether a ReplicaSet's template is ``template`` but for the hash label (upstream's EqualIgnoreHash)."""
    return _without_hash(rs_template) == _without_hash(template)


def _new_replicaset(sets: Iterable[dict[str, Any]], template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The oldest of ``sets`` whose template is ``template`` (upstream's FindNewReplicaSet): found by
    its template, not its name, so one named under an earlier ``collisionCount`` is still the new one."""
    ordered = sorted(sets, key=lambda rs: (meta_of(rs).get("creationTimestamp") or "", meta_of(rs).get("name", "")))
    return next((rs for rs in ordered if _same_template((rs.get("spec") or {}).get("template") or {}, template)),
                None)


def _active_or_latest(new_rs: dict[str, Any] | None, old_sets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The only ReplicaSet with replicas, or the newest when none has any; None when
    several have (upstream's FindActiveOrLatest; those are scaled in proportion there)."""
    sets = [*([new_rs] if new_rs is not None else []), *old_sets]
    active = [rs for rs in sets if _replicas(rs)]
    if len(active) == 1:
        return active[0]
    if active or not sets:
        return None
    if new_rs is not None:
        return new_rs
    return max(old_sets, key=lambda rs: (str(meta_of(rs).get("creationTimestamp") or ""), _revision(rs)))


def _replica_failure(new_rs: dict[str, Any] | None, old_sets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``ReplicaFailure`` condition of the new ReplicaSet, else of the first old one that
    has one (upstream's getReplicaFailures)."""
    for rs in [*([new_rs] if new_rs is not None else []), *old_sets]:
        for c in (rs.get("status") or {}).get("conditions") or ():
            if c.get("type") == "ReplicaFailure":
                return dict(c)
    return None


def _terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted and not finished (upstream's FilterTerminatingPods)."""
    return bool(meta_of(pod).get("deletionTimestamp")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _terminating_replicas(sets: Iterable[Mapping[str, Any]]) -> int | None:
    """A Deployment's ``terminatingReplicas``: its ReplicaSets' summed, as upstream's
    GetTerminatingReplicaCountForReplicaSets; one its controller has not synced yet counts
    nothing, one synced that does not say (written without the field) makes the sum unknown."""
    total = 0
    for rs in sets:
        status = rs.get("status") or {}
        count = status.get("terminatingReplicas")
        if count is None and not status.get("observedGeneration"):
            continue
        if count is None:
            return None
        total += int(count)
    return total


def _revision(rs: dict[str, Any]) -> int:
    try:
        return int((meta_of(rs).get("annotations") or {}).get(REVISION) or 0)
    except ValueError:
        return 0


def _copied_annotations(d: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (meta_of(d).get("annotations") or {}).items() if k not in _NOT_COPIED}


def _new_replicaset_annotations(d: dict[str, Any], rs: dict[str, Any], revision: int) -> dict[str, str]:
    """What the new ReplicaSet's annotations lack (upstream's SetNewReplicaSetAnnotations):
    the Deployment's own, and a revision one past every other ReplicaSet's, its old one
    appended to ``revision-history``. Empty when it has them."""
    have = meta_of(rs).get("annotations") or {}
    wanted = {k: v for k, v in _copied_annotations(d).items() if have.get(k) != v}
    old = _revision(rs)
    if old < revision:
        wanted[REVISION] = str(revision)
        if old:
            history = have.get(REVISION_HISTORY)
            wanted[REVISION_HISTORY] = f"{history},{old}" if history else str(old)
    return wanted


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")




async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``): the parts ``--controllers``
    turns on."""
    await WorkloadController(client, deployments=config.controller_enabled("deployment-controller"),
                             replicasets=config.controller_enabled("replicaset-controller"),
                             collects=config.controller_enabled("garbage-collector-controller")).run()


async def start_replication(client: Client, config: Config) -> None:
    """The component entry point of the ReplicationController controller (and its part of the
    garbage collector: the pods of deleted ReplicationControllers)."""
    await WorkloadController(client, sets=REPLICATION_CONTROLLERS, deployments=False,
                             replicasets=config.controller_enabled("replicationcontroller-controller"),
                             collects=config.controller_enabled("garbage-collector-controller")).run()
