"""Owner references, for the controllers: who controls what, and kube-controller-manager's
garbage collector for the kinds these controllers own.

``Dependents`` files the objects of one kind (pods, ReplicaSets) under the uid of
their controller (``ownerReferences[].controller``), from informer events.
``collect`` deletes the dependents of an owner once it is deleted
(``Background`` propagation), after checking with the API that it is gone.
``finalize`` carries out the ``orphan`` and ``foregroundDeletion`` finalizers
the API gives an owner deleted with ``Orphan`` or ``Foreground``.

Only owners this controller has seen are followed here: a dependent whose
owner is not known yet is parked for ``UNCLAIMED_SECONDS``, because informers
of different collections are not ordered with one another. If its owner
appears in that time, the dependent is filed; otherwise it is forgotten (a
million pods naming owners that do not exist are not held). Those, whose
references dangle as upstream's collector says, are the API server's
collector's (``api/dependents.py``): it looks up the owners each dependent's
create or update names anew, and those of every dependent stored at start, and
deletes the dependents of one that is not there, as it does those of an owner
deleted while no controller ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.selectormatch import match_label_selector

__all__ = ["EXPECTATIONS_TIMEOUT", "FOREGROUND", "ORPHAN", "PLURALS", "UNCLAIMED_SECONDS", "Dependents",
           "Expectations", "collect", "controller_uid", "finalize", "key_of", "meta_of", "owner_exists", "pods_to_sync"]

ORPHAN = "orphan"
UNCLAIMED_SECONDS = 30.0
EXPECTATIONS_TIMEOUT = 30.0  # seconds; a relist can lose the event an expectation waits for
FOREGROUND = "foregroundDeletion"
# owner and dependent kinds: (group, plural), all at version v1
PLURALS = {"Pod": ("", "pods"), "ReplicaSet": ("apps", "replicasets"), "Deployment": ("apps", "deployments"),
           "ReplicationController": ("", "replicationcontrollers"),
           "Job": ("batch", "jobs"), "CronJob": ("batch", "cronjobs"), "DaemonSet": ("apps", "daemonsets"),
           "StatefulSet": ("apps", "statefulsets"), "ControllerRevision": ("apps", "controllerrevisions")}


def meta_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def key_of(obj: Mapping[str, Any]) -> str:
    meta = meta_of(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def controller_uid(obj: Mapping[str, Any], kind: str) -> str | None:
    for ref in meta_of(obj).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == kind:
            return str(ref.get("uid", ""))
    return None


def _path(kind: str, namespace: str | None, name: str | None = None) -> str:
    group, plural = PLURALS[kind]
    return resource_path(group, "v1", plural, namespace, name)


class Dependents:
    """The objects of one kind whose controller is of ``owner_kind``, by the owner's uid.

    ``released`` holds those whose controller let them go (deleted with ``Orphan``):
    a controller whose selector matches adopts them. Bare objects are not tracked:
    a million bare pods would cost memory for nothing, so only released ones are
    adopted (upstream adopts bare ones too)."""

    def __init__(self, owner_kind: str, known: Callable[[str], bool], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.owner_kind = owner_kind
        self.known = known  # whether an owner uid has been seen (and not deleted)
        self.clock = clock
        self._by_owner: dict[str, dict[str, dict[str, Any]]] = {}
        self._owner_of: dict[str, str] = {}  # object key -> owner uid
        self.released: dict[str, dict[str, Any]] = {}
        # dependents of owners not seen (yet), by owner uid, with when the owner was first named
        self._unclaimed: dict[str, tuple[float, dict[str, dict[str, Any]]]] = {}
        self._pruned = clock()

    def of(self, uid: str) -> dict[str, dict[str, Any]]:
        return self._by_owner.get(uid, {})

    def file(self, obj: dict[str, Any]) -> str | None:
        """Files ``obj`` under its controller's uid, which is returned. Called for every pod
        event, so an object with no owner costs little while nothing is tracked."""
        if not meta_of(obj).get("ownerReferences") and not self._owner_of and not self.released:
            return None
        owner = controller_uid(obj, self.owner_kind)
        key = key_of(obj)
        before = self._owner_of.get(key)
        if owner is not None and owner != before and not self.known(owner):
            if before is not None:
                self._drop(before, key)
            self._park(owner, key, obj)  # an owner not seen (yet): not followed
            return None
        if before is not None and before != owner:  # its owner reference changed
            self._drop(before, key)
            if owner is None:  # orphaned: may be adopted
                self.released[key] = obj
        elif owner is None and key in self.released:
            self.released[key] = obj
        if owner is not None:  # (an owner deleted since: kept filed until its collection)
            self._by_owner.setdefault(owner, {})[key] = obj
            self._owner_of[key] = owner
            self.released.pop(key, None)
        return owner

    def _park(self, owner: str, key: str, obj: dict[str, Any]) -> None:
        now = self.clock()
        if now - self._pruned > UNCLAIMED_SECONDS:
            self._pruned = now
            for uid in [u for u, (since, _) in self._unclaimed.items() if now - since > UNCLAIMED_SECONDS]:
                del self._unclaimed[uid]
        parked = self._unclaimed.get(owner)
        if parked is None:
            parked = self._unclaimed[owner] = (now, {})
        parked[1][key] = obj

    def claim(self, owner: str) -> None:
        """``owner`` is seen: the dependents parked for it are filed."""
        parked = self._unclaimed.pop(owner, None)
        if parked is not None:
            for obj in parked[1].values():
                self.file(obj)

    def forget(self, owner: str) -> None:
        self._unclaimed.pop(owner, None)

    def unfile(self, obj: dict[str, Any]) -> str | None:
        key = key_of(obj)
        self.released.pop(key, None)
        owner_named = controller_uid(obj, self.owner_kind)
        if owner_named is not None and owner_named in self._unclaimed:
            self._unclaimed[owner_named][1].pop(key, None)
        owner = self._owner_of.get(key)
        if owner is not None:
            self._drop(owner, key)
        return owner

    def _drop(self, owner: str, key: str) -> None:
        self._owner_of.pop(key, None)
        members = self._by_owner.get(owner)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self._by_owner[owner]


class Expectations:
    """Upstream's ControllerExpectations: a controller's writes, by owner uid, that its informers
    have not shown yet. An owner with some pending is not synced (each such event requeues it),
    so a slow watch never makes a controller create or delete twice. An expectation older than
    ``EXPECTATIONS_TIMEOUT`` is dropped: a relist can lose the event it waits for.

    What is expected is a string: ``"+<pod>"`` for a pod created, ``"-<pod>"`` for one deleted
    (``observe`` and ``observe_gone`` settle those from pod events), or any other token the
    controller settles itself with ``seen``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._pending: dict[str, set[str]] = {}
        self._since: dict[str, float] = {}

    def expect(self, owner: str, what: str) -> None:
        self._pending.setdefault(owner, set()).add(what)
        self._since[owner] = self.clock()

    def seen(self, owner: str, what: str) -> None:
        pending = self._pending.get(owner)
        if pending is not None:
            pending.discard(what)

    def observe(self, owner: str, pod: Mapping[str, Any]) -> None:
        """A pod event: its create is seen, and its delete too once it is being deleted (a graceful
        delete leaves it terminating, which is deleted enough for its controller)."""
        name = meta_of(pod).get("name", "")
        self.seen(owner, "+" + name)
        if meta_of(pod).get("deletionTimestamp"):
            self.seen(owner, "-" + name)

    def observe_gone(self, owner: str, pod: Mapping[str, Any]) -> None:
        """A pod's deletion event: its delete is seen, and its create can no longer be."""
        name = meta_of(pod).get("name", "")
        self.seen(owner, "-" + name)
        self.seen(owner, "+" + name)

    def waiting(self, owner: str) -> bool:
        """Whether ``owner`` must wait for its informers; an owner done waiting is cleared."""
        if self._pending.get(owner) and self.clock() - self._since.get(owner, 0.0) < EXPECTATIONS_TIMEOUT:
            return True
        self.forget(owner)
        return False

    def forget(self, owner: str) -> None:
        self._pending.pop(owner, None)
        self._since.pop(owner, None)


async def owner_exists(client: Client, dependent: Mapping[str, Any], uid: str) -> bool:
    """Whether the owner ``uid`` named in ``dependent``'s references still exists (a live read)."""
    meta = meta_of(dependent)
    for ref in meta.get("ownerReferences") or ():
        if ref.get("uid") == uid and ref.get("kind") in PLURALS:
            try:
                owner = await client.get(_path(ref["kind"], meta.get("namespace"), ref.get("name")))
            except ApiError as e:
                if e.code == 404:
                    return False
                raise
            return bool(meta_of(owner).get("uid") == uid)
    return False


def adoptable(key: str, obj: Mapping[str, Any], prefix: str, selector: Mapping[str, Any]) -> bool:
    """Whether a released object (``key`` ``namespace/name``) may be adopted by an owner of the
    namespace ``prefix`` names, with the non-empty ``selector``: not being deleted, and matched
    (upstream's ControllerRefManager)."""
    dep = meta_of(obj)
    return key.startswith(prefix) and not dep.get("deletionTimestamp") \
        and match_label_selector(selector, dep.get("labels") or {})


async def add_controller_ref(client: Client, group: str, plural: str, obj: Mapping[str, Any],
                             ref: dict[str, Any]) -> bool:
    """Adopt ``obj``: its owner references with ``ref`` (the controller's) added, written against
    the version read; False when it is gone or changed meanwhile (404, 409: its next event says)."""
    dep = meta_of(obj)
    try:
        await client.patch(resource_path(group, "v1", plural, dep.get("namespace"), dep.get("name")),
                           {"metadata": {"ownerReferences": [*(dep.get("ownerReferences") or ()), ref],
                                         "resourceVersion": dep.get("resourceVersion")}})
    except ApiError as e:
        if e.code not in (404, 409):
            raise
        return False
    return True


async def collect(client: Client, kind: str, dependents: Mapping[str, dict[str, Any]], owner_uid: str,
                  live_owners: Mapping[str, Any]) -> int:
    """Delete the dependents (of ``kind``) of the owner ``owner_uid`` once it is gone; a dependent
    with another owner still alive only loses this reference. Returns how many were deleted."""
    if owner_uid in live_owners or not dependents:
        return 0
    if await owner_exists(client, next(iter(dependents.values())), owner_uid):
        return 0  # the owner's informer is behind this one
    deleted = 0
    for obj in list(dependents.values()):
        meta = meta_of(obj)
        if meta.get("deletionTimestamp"):
            continue
        path = _path(kind, meta.get("namespace"), meta.get("name"))
        refs = meta.get("ownerReferences") or []
        if any(r.get("uid") != owner_uid and str(r.get("uid", "")) in live_owners for r in refs):
            await client.patch(path, {"metadata": {"ownerReferences": [r for r in refs if r.get("uid") != owner_uid],
                                                   "resourceVersion": meta.get("resourceVersion")}})
            continue
        try:
            await client.delete(path, {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                                       "preconditions": {"uid": meta.get("uid")}})
            deleted += 1
        except ApiError as e:
            if e.code not in (404, 409):
                raise
    return deleted


async def finalize(client: Client, owner_kind: str, owner: dict[str, Any], dependent_kind: str,
                   dependents: Mapping[str, dict[str, Any]],
                   also_orphaned: tuple[tuple[str, Mapping[str, dict[str, Any]]], ...] = (),
                   collects: bool = True) -> bool:
    """An owner being deleted: carry out its ``orphan`` or ``foregroundDeletion`` finalizer (not
    when the garbage collector is turned off: ``collects``). True if the owner is being deleted
    (its controller then leaves it alone). ``also_orphaned``: more dependents, by kind, that
    ``orphan`` lets go too (a set's ControllerRevisions: upstream's collector orphans every
    dependent; a foreground deletion leaves them to ``collect``)."""
    meta = meta_of(owner)
    if not meta.get("deletionTimestamp"):
        return False
    if not collects:
        return True
    finalizers = list(meta.get("finalizers") or ())
    if ORPHAN in finalizers:
        for kind, objs in ((dependent_kind, dependents), *also_orphaned):
            for obj in list(objs.values()):
                dep = meta_of(obj)
                refs = [r for r in dep.get("ownerReferences") or () if r.get("uid") != meta.get("uid")]
                await client.patch(_path(kind, dep.get("namespace"), dep.get("name")),
                                   {"metadata": {"ownerReferences": refs or None,
                                                 "resourceVersion": dep.get("resourceVersion")}})
        finalizers.remove(ORPHAN)
    elif FOREGROUND in finalizers:
        if dependents:
            for obj in list(dependents.values()):
                dep = meta_of(obj)
                if not dep.get("deletionTimestamp"):
                    await client.delete(_path(dependent_kind, dep.get("namespace"), dep.get("name")),
                                        {"kind": "DeleteOptions", "apiVersion": "v1",
                                         "propagationPolicy": "Foreground"})
            return True  # the finalizer goes once the dependents are gone (their deletes requeue the owner)
        finalizers.remove(FOREGROUND)
    else:
        return True  # being deleted for another finalizer: not ours
    await client.patch(_path(owner_kind, meta.get("namespace"), meta.get("name")),
                       {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}})
    return True


async def pods_to_sync(gc_client: Client, kind: str, owner: dict[str, Any], pods: Dependents,
                       expectations: Expectations,
                       also_orphaned: tuple[tuple[str, Mapping[str, dict[str, Any]]], ...] = (),
                       collects: bool = True) -> dict[str, dict[str, Any]] | None:
    """The pods ``owner`` controls, when it is its controller's turn to act on them; None while it
    is being deleted (``finalize`` carries out its finalizer, ``also_orphaned`` as it says, if the
    collector runs: ``collects``, as the collector: ``gc_client``, whose role alone may patch every
    owner's finalizers) or while its controller's last writes are not in the informers yet (their
    events requeue it)."""
    uid = str(meta_of(owner).get("uid", ""))
    owned = pods.of(uid)
    if await finalize(gc_client, kind, owner, "Pod", owned, also_orphaned, collects) or expectations.waiting(uid):
        return None
    return owned
