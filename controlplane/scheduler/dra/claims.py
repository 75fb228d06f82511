"""The ResourceClaim controller (upstream's ``pkg/controller/resourceclaim``), as an API client.

For a pod whose ``spec.resourceClaims`` name a ``resourceClaimTemplateName``,
it creates the ResourceClaim from the template (named
``<pod>-<claim>-<5 random characters>``, annotated
``resource.kubernetes.io/pod-claim-name``, owned by the pod as its controller)
and records it in the pod's ``status.resourceClaimStatuses``, which is where
the scheduler looks for it.

For a claim, it drops consumers in ``status.reservedFor`` that are gone (deleted,
replaced by another pod of the same name, or done); a claim left with no
consumer loses its ``allocation`` and the scheduler's finalizer. A claim made
for a pod that is done or gone is deleted (upstream leaves that last step to
the garbage collector, whose part here, api/dependents.py, leaves them to this
controller); so is the claim the scheduler made for a pod's extended resources
backed by DRA (its ``status.extendedResourceClaimStatus``), which the pod owns.

A PodGroup's claims (KEP-5729): for each ``spec.resourceClaims`` entry of a
PodGroup naming a template, one claim is created for the group
(``<podgroup>-<claim>-xxxxx``, owned by the PodGroup) and recorded in the
group's ``status.resourceClaimStatuses``; a pod whose claim matches the group's
exactly gets that claim's name in its own status instead of a claim of its own.
The scheduler reserves such a claim for the PodGroup; the reservation is dropped
when the PodGroup is gone (not when its pods end, as upstream: a PodGroup being
deleted stays while its pods run, ``controllers/podgroupprotection.py``), and the
claim, deallocated, is then deleted.

Runs inside ``controlplane serve`` as a component (``start``) or alone
(``ClaimController(client).run()``). Work is keyed by object, as client-go's
work queue: a key is never processed by two workers at once, and a key that
changes while it is processed is processed again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .groups import API_GROUP, group_claim_names, group_name, is_group_consumer, owner_podgroup, status_claim_name
from .manager import FINALIZER

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["POD_CLAIM_NAME", "ClaimController", "generated_name", "start"]

log = logging.getLogger(__name__)

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet: no vowels, no look-alikes


def generated_name(pod_name: str, claim_name: str) -> str:
    """``<pod>-<claim>-xxxxx``, the prefix cut so the whole fits in 63 characters as generateName does."""
    prefix = f"{pod_name}-{claim_name}"[:57] + "-"
    return prefix + "".join(random.choice(_ALPHANUMS) for _ in range(5))


def _pod_done(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") in ("Succeeded", "Failed") or bool(
        (pod.get("metadata") or {}).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"))


def _extended_claim(pod: Mapping[str, Any]) -> str:
    """The claim the scheduler made for the pod's extended resources backed by DRA (KEP-5004)."""
    return str(((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or "")


def _owner_pod(claim: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return ref.get("name", ""), ref.get("uid", "")
    return None




def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


# Upstream runs 10 workers (kube-controller-manager's defaultResourceClaimControllerWorkers), each
# a create and a pod status patch per pod at a Go client's latency. Ours wait longer per call on a
# busy server (the writes are fsynced in groups), so more are in flight: with 8, the controller
# was what held `bench dra --api` at 126 pods/s (median of 3; 154 with 32).
CLAIM_WORKERS = 32


class ClaimController:
    def __init__(self, client: Client, workers: int = CLAIM_WORKERS) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)
        self.claims = client.informer(resource_path("resource.k8s.io", "v1", "resourceclaims"),
                                      on_add=self._claim_changed, on_update=lambda _old, new: self._claim_changed(new),
                                      on_delete=self._claim_deleted)
        self.templates = client.informer(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates"),
                                         on_add=self._template_added,
                                         on_update=lambda _old, new: self._template_added(new))
        self.podgroups = client.informer(resource_path(API_GROUP, "v1beta1", "podgroups"),
                                         on_add=self._podgroup_changed,
                                         on_update=lambda _old, new: self._podgroup_changed(new),
                                         on_delete=self._podgroup_deleted)
        # Pods with claims by their PodGroup ("ns/group" -> pod keys): a group's claim reaches them.
        self._members: dict[str, set[str]] = {}
        # What this controller wrote, newer than the (shared, not ours to change) informers may hold yet
        self._wrote: dict[str, dict[str, Any]] = {}
        # Claims by owning pod uid, to find a claim created for a pod whose status was not yet updated.
        self._owned: dict[str, set[str]] = {}
        # Pods and PodGroups ("pod:ns/name", "podgroup:ns/name") skipped because a template they name is
        # missing, by template ("ns/template"): its creation requeues them (kubectl apply -f dir/ creates
        # in file order, a template may well come after its pods)
        self._awaiting_template: dict[str, set[str]] = {}
        self.created = 0
        self.deleted = 0
        self.released = 0

    # -- events

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        spec_claims = (pod.get("spec") or {}).get("resourceClaims") or []
        if not spec_claims:
            if _pod_done(pod) and _extended_claim(pod):
                self._enqueue_claims_of(pod)
            return
        group = group_name(pod)
        if group is not None:
            self._members.setdefault(f"{pod['metadata'].get('namespace', '')}/{group}", set()).add(_key(pod))
        self.queue.add("pod:" + _key(pod))
        if _pod_done(pod):
            self._enqueue_claims_of(pod)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        if _extended_claim(pod) and not (pod.get("spec") or {}).get("resourceClaims"):
            self._enqueue_claims_of(pod)  # the scheduler's claim for its extended resources (it owns it)
        if (pod.get("spec") or {}).get("resourceClaims"):
            self._enqueue_claims_of(pod)
            group = group_name(pod)
            if group is not None:
                members = self._members.get(f"{pod['metadata'].get('namespace', '')}/{group}")
                if members is not None:
                    members.discard(_key(pod))
            if self._awaiting_template:
                self._stop_awaiting(pod, "pod:")

    def _podgroup_changed(self, podgroup: dict[str, Any]) -> None:
        key = _key(podgroup)
        if (podgroup.get("spec") or {}).get("resourceClaims"):
            self.queue.add("podgroup:" + key)
        # every member waiting for it: a pod of a group makes no claim until the group is known
        # (whether each of its claims is the group's), group claims or not
        for pod_key in self._members.get(key, ()):
            self.queue.add("pod:" + pod_key)

    def _podgroup_deleted(self, podgroup: dict[str, Any]) -> None:
        if self._awaiting_template:
            self._stop_awaiting(podgroup, "podgroup:")
        self._enqueue_claims_of(podgroup)  # a PodGroup names and owns claims as a pod does

    def _template_added(self, template: dict[str, Any]) -> None:
        for waiting in self._awaiting_template.pop(_key(template), ()):
            self.queue.add(waiting)

    def _await_template(self, owner: Mapping[str, Any], kind: str, template_key: str) -> None:
        """``owner`` (a pod or PodGroup, ``kind`` its key prefix) waits for ``template_key`` to be created."""
        self._awaiting_template.setdefault(template_key, set()).add(kind + _key(owner))
        if template_key in self.templates.items:  # its event came while the server was asked
            self._template_added(self.templates.items[template_key])

    def _stop_awaiting(self, owner: Mapping[str, Any], kind: str) -> None:
        ns = (owner.get("metadata") or {}).get("namespace", "")
        for rc in (owner.get("spec") or {}).get("resourceClaims") or ():
            template_key = f"{ns}/{rc.get('resourceClaimTemplateName') or ''}"
            waiting = self._awaiting_template.get(template_key)
            if waiting is not None:
                waiting.discard(kind + _key(owner))
                if not waiting:
                    del self._awaiting_template[template_key]

    def _enqueue_claims_of(self, pod: Mapping[str, Any]) -> None:
        """The claims a pod (or a PodGroup) names, was given, or owns, to be synced."""
        ns = (pod.get("metadata") or {}).get("namespace", "")
        for rc in (pod.get("spec") or {}).get("resourceClaims") or []:
            if rc.get("resourceClaimName"):
                self.queue.add(f"claim:{ns}/{rc['resourceClaimName']}")
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("resourceClaimName"):
                self.queue.add(f"claim:{ns}/{st['resourceClaimName']}")
        for key in self._owned.get((pod.get("metadata") or {}).get("uid", ""), ()):
            self.queue.add("claim:" + key)

    def _claim_changed(self, claim: dict[str, Any]) -> None:
        owner = _owner_pod(claim) or owner_podgroup(claim)
        if owner is not None:
            self._owned.setdefault(owner[1], set()).add(_key(claim))
        if (claim.get("status") or {}).get("reservedFor") or (claim.get("status") or {}).get("allocation") \
                or owner is not None or (claim.get("metadata") or {}).get("deletionTimestamp"):
            self.queue.add("claim:" + _key(claim))

    def _claim_deleted(self, claim: dict[str, Any]) -> None:
        owner = _owner_pod(claim) or owner_podgroup(claim)
        if owner is not None:
            owned = self._owned.get(owner[1])
            if owned is not None:
                owned.discard(_key(claim))
                if not owned:
                    del self._owned[owner[1]]

    # -- running

    async def run(self) -> None:
        await run_controller("resourceclaim controller", (self.templates, self.claims, self.podgroups, self.pods),
                             self.queue,
                             self._handle, self.workers)

    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "pod":
            await self.sync_pod(name)
        elif kind == "podgroup":
            await self.sync_podgroup(name)
        else:
            await self.sync_claim(name)

    def _newest(self, kind: str, items: Mapping[str, dict[str, Any]], key: str) -> dict[str, Any] | None:
        """The informer's object, or the one this controller wrote if that is newer."""
        held = items.get(key)
        wrote = self._wrote.get(kind + key)
        if wrote is None:
            return held
        # only objects the informer held are written here: gone from it is deleted
        if held is None or _rv(held) >= _rv(wrote):
            del self._wrote[kind + key]  # the informer caught up
            return held
        return wrote

    # -- pods: claims from templates

    async def sync_pod(self, key: str) -> None:
        pod = self._newest("pod:", self.pods.items, key)
        if pod is None or _pod_done(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return
        meta = pod["metadata"]
        ns, uid = meta["namespace"], meta.get("uid", "")
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        have = {s.get("name") for s in statuses}
        changed = False
        group = group_name(pod)
        podgroup = self.podgroups.items.get(f"{ns}/{group}") if group is not None else None
        shared = group_claim_names(pod, podgroup)
        for rc in pod["spec"].get("resourceClaims") or []:
            template_name = rc.get("resourceClaimTemplateName")
            if not template_name or rc.get("name") in have:
                continue
            if group is not None and podgroup is None:
                continue  # whether the claim is the group's is known once the PodGroup is (its event requeues)
            if podgroup is not None and rc["name"] in shared:
                # The group's claim: its name, once made for the group (the group's sync makes it).
                claim_name = status_claim_name(podgroup, rc["name"]) or self._existing_claim(
                    podgroup["metadata"].get("uid", ""), rc["name"])
                if claim_name is None:
                    self.queue.add("podgroup:" + _key(podgroup))
                    continue
                statuses.append({"name": rc["name"], "resourceClaimName": claim_name})
                changed = True
                continue
            claim_name = self._existing_claim(uid, rc["name"])
            if claim_name is None:
                claim_name = await self._create_claim(pod, rc["name"], template_name)
            if claim_name is None:
                continue
            statuses.append({"name": rc["name"], "resourceClaimName": claim_name})
            changed = True
        if changed:
            path = resource_path("", "v1", "pods", ns, meta["name"], "status")
            updated = await self.client.patch(path, {"metadata": {"uid": uid},
                                                     "status": {"resourceClaimStatuses": statuses}})
            self._wrote["pod:" + key] = updated

    async def sync_podgroup(self, key: str) -> None:
        """Create the group's claims from its templates, once, and record them in its status."""
        podgroup = self._newest("podgroup:", self.podgroups.items, key)
        if podgroup is None or (podgroup.get("metadata") or {}).get("deletionTimestamp"):
            return
        meta = podgroup["metadata"]
        statuses = list((podgroup.get("status") or {}).get("resourceClaimStatuses") or [])
        have = {s.get("name") for s in statuses}
        changed = False
        for rc in (podgroup.get("spec") or {}).get("resourceClaims") or []:
            template_name = rc.get("resourceClaimTemplateName")
            if not template_name or rc.get("name") in have:
                continue
            claim_name = self._existing_claim(meta.get("uid", ""), rc["name"])
            if claim_name is None:
                owner = {"apiVersion": podgroup.get("apiVersion") or f"{API_GROUP}/v1beta1", "kind": "PodGroup"}
                claim_name = await self._create_claim(podgroup, rc["name"], template_name, owner)
            if claim_name is None:
                continue
            statuses.append({"name": rc["name"], "resourceClaimName": claim_name})
            changed = True
        if changed:
            path = resource_path(API_GROUP, "v1beta1", "podgroups", meta["namespace"], meta["name"], "status")
            updated = await self.client.patch(path, {"metadata": {"uid": meta.get("uid", "")},
                                                     "status": {"resourceClaimStatuses": statuses}})
            self._wrote["podgroup:" + key] = updated
            self._podgroup_changed(updated)  # its pods can now record the claims

    def _existing_claim(self, pod_uid: str, pod_claim: str) -> str | None:
        for ckey in self._owned.get(pod_uid, ()):
            claim = self.claims.items.get(ckey)
            if claim is not None and (claim["metadata"].get("annotations") or {}).get(POD_CLAIM_NAME) == pod_claim:
                return str(claim["metadata"]["name"])
        return None

    async def _create_claim(self, pod: Mapping[str, Any], pod_claim: str, template_name: str,
                            owner: Mapping[str, str] | None = None) -> str | None:
        """A claim from the template for ``pod``, or for a PodGroup (``owner``: its apiVersion and kind)."""
        meta = pod["metadata"]
        ns = meta["namespace"]
        template = self.templates.items.get(f"{ns}/{template_name}")
        if template is None:
            try:
                template = await self.client.get(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates",
                                                               ns, template_name))
            except ApiError as e:
                if e.code == 404:
                    log.info("%s %s/%s: resourceclaimtemplate %s not found", "pod" if owner is None else "podgroup",
                             ns, meta["name"], template_name)
                    self._await_template(pod, "pod:" if owner is None else "podgroup:", f"{ns}/{template_name}")
                    return None
                raise
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        for _ in range(5):
            name = generated_name(meta["name"], pod_claim)
            body = {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {
                    "name": name, "namespace": ns, "generateName": f"{meta['name']}-{pod_claim}"[:57] + "-",
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: pod_claim},
                    "ownerReferences": [{**(owner or {"apiVersion": "v1", "kind": "Pod"}), "name": meta["name"],
                                         "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}],
                },
                "spec": tspec.get("spec") or {},
            }
            try:
                created = await self.client.create(resource_path("resource.k8s.io", "v1", "resourceclaims", ns), body)
            except ApiError as e:
                if e.code == 409:
                    continue  # the random name was taken
                raise
            self.created += 1
            self._claim_changed(created)
            return str(created["metadata"]["name"])
        raise ApiError(500, "InternalError", f"no free name for a claim of pod {ns}/{meta['name']}")

    # -- claims: release

    async def _consumer_alive(self, ns: str, ref: Mapping[str, Any]) -> bool:
        if is_group_consumer(ref):  # reserved for a PodGroup: until the PodGroup is gone (KEP-5729)
            return await self._podgroup_alive(ns, ref.get("name", ""), ref.get("uid", ""))
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return True  # other consumers are not ours to judge
        pod = self.pods.items.get(f"{ns}/{ref.get('name', '')}")
        if pod is None:
            # Not seen yet, or gone: ask the server rather than release a claim in use.
            try:
                pod = await self.client.get(resource_path("", "v1", "pods", ns, ref.get("name", "")))
            except ApiError as e:
                if e.code == 404:
                    return False
                raise
        return pod["metadata"].get("uid") == ref.get("uid") and not _pod_done(pod)

    async def _podgroup_alive(self, ns: str, name: str, uid: str) -> bool:
        podgroup = self.podgroups.items.get(f"{ns}/{name}")
        if podgroup is None:
            try:
                podgroup = await self.client.get(resource_path(API_GROUP, "v1beta1", "podgroups", ns, name))
            except ApiError as e:
                if e.code == 404:
                    return False
                raise
        return bool(podgroup["metadata"].get("uid") == uid)

    async def sync_claim(self, key: str) -> None:
        claim = self._newest("claim:", self.claims.items, key)
        if claim is None:
            return
        meta = claim["metadata"]
        ns = meta["namespace"]
        path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns, meta["name"])
        status = dict(claim.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        valid = [r for r in reserved if await self._consumer_alive(ns, r)]
        dropped = len(valid) != len(reserved)
        if dropped or (not valid and status.get("allocation") and meta.get("deletionTimestamp")):
            status["reservedFor"] = valid
            if not valid:
                # Allocated by the scheduler (structured parameters): deallocating is clearing it;
                # an empty reservedFor is left out, as kube-apiserver's omitempty drops it
                status.pop("reservedFor")
                status.pop("allocation", None)
                status.pop("devices", None)
            claim = await self.client.update(path + "/status", {**claim, "status": status})
            self._wrote["claim:" + key] = claim
            self.released += 1
        finalizers = claim["metadata"].get("finalizers") or []
        if not valid and not (claim.get("status") or {}).get("allocation") and FINALIZER in finalizers:
            claim = await self.client.patch(path, {"metadata": {
                "finalizers": [f for f in finalizers if f != FINALIZER],
                "resourceVersion": claim["metadata"].get("resourceVersion")}})
            self._wrote["claim:" + key] = claim
        if valid or meta.get("deletionTimestamp"):
            return
        group_owner = owner_podgroup(claim)
        if group_owner is not None:
            # Upstream's garbage collector deletes it with its PodGroup; this emulator's does not.
            if not await self._podgroup_alive(ns, *group_owner):
                await self._delete_claim(path)
            return
        owner = _owner_pod(claim)
        if owner is None:
            return
        pod = self.pods.items.get(f"{ns}/{owner[0]}")
        if pod is None:
            try:
                pod = await self.client.get(resource_path("", "v1", "pods", ns, owner[0]))
            except ApiError as e:
                if e.code != 404:
                    raise
                pod = None
        if pod is None or pod["metadata"].get("uid") != owner[1] or _pod_done(pod):
            await self._delete_claim(path)

    async def _delete_claim(self, path: str) -> None:
        """Delete a claim whose owner is gone or done (gone already: nothing to do)."""
        try:
            await self.client.delete(path)
            self.deleted += 1
        except ApiError as e:
            if e.code != 404:
                raise


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await ClaimController(client).run()
