"""What the controllers of sets whose templates are ControllerRevisions share: the
DaemonSet and StatefulSet controllers (``daemonsets``, ``statefulsets``).

Each keeps its sets by uid, files their pods under their owner (``Dependents``), counts
the pod writes its informers have not shown yet (``Expectations``), and records templates
in a ``History``. Its work queue holds two kinds of keys::

    "<prefix>:<namespace>/<name>"   sync that set (``sync``, the subclass's)
    "gc:<uid>"                      the set is gone: collect its pods and revisions

A pod event requeues its owner's sync while the owner is known, its collection once it
is gone. A subclass names its kind and key prefix, makes its sets' informer
(``_sets_informer``) and any more it needs, and writes ``sync``; the hooks ``_forget``
and ``_observe`` let it keep more per set or per pod event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from controlplane.client import ApiError, Client, InformerHandle, resource_path
from controlplane.client.workqueue import WorkQueue
from controlplane.identities import service_account_user

from .events import Recorder
from .history import History
from .ownership import (
    ORPHAN,
    Dependents,
    Expectations,
    add_controller_ref,
    adoptable,
    collect,
    finalize,
    key_of,
    meta_of,
    pods_to_sync,
)

__all__ = ["RevisionedSetController"]


class RevisionedSetController:
    """The events and queue keys of a set controller; ``kind`` is the sets' kind, ``prefix``
    their sync keys' prefix."""

    kind: ClassVar[str]
    prefix: ClassVar[str]
    # the set controller itself, and the garbage collector's part for its pods and revisions:
    # each turned off on its own by ``serve --controllers`` (the components' start)
    syncs: bool = True
    collects: bool = True

    def __init__(self, client: Client, workers: int, component: str) -> None:
        self.client = client
        self.gc_client = client.as_identity(service_account_user("generic-garbage-collector"))  # its collector part
        self.workers = workers
        self.queue = WorkQueue()
        self._keys: dict[str, str] = {}  # uid -> namespace/name
        self.pods_of = Dependents(self.kind, self._keys.__contains__)
        self.events = Recorder(client, component)
        self.history = History(client, self.kind)
        self.expectations = Expectations()
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)

    def _sets_informer(self, plural: str) -> InformerHandle:
        """The informer of the apps/v1 ``plural`` this controller keeps, with its handlers."""
        self._sets = self.client.informer(resource_path("apps", "v1", plural), on_add=self._changed,
                                          on_update=lambda _old, new: self._changed(new), on_delete=self._deleted)
        return self._sets

    # -- the sets' events
    def _changed(self, obj: dict[str, Any]) -> None:
        uid = str(meta_of(obj).get("uid", ""))
        if uid not in self._keys:
            self._keys[uid] = key_of(obj)
            self.pods_of.claim(uid)
        self.queue.add(f"{self.prefix}:{key_of(obj)}")

    def _deleted(self, obj: dict[str, Any]) -> None:
        uid = str(meta_of(obj).get("uid", ""))
        self._keys.pop(uid, None)
        self.pods_of.forget(uid)
        self.expectations.forget(uid)
        self._forget(uid)
        self.queue.add("gc:" + uid)

    def _forget(self, uid: str) -> None:
        """What a subclass keeps of a set that is gone, dropped."""

    # -- the pods' events
    def _pod_changed(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.file(pod)
        if owner is not None:
            self._observe(owner, pod)
            self.expectations.observe(owner, pod)
            self._requeue(owner)

    def _observe(self, owner: str, pod: dict[str, Any]) -> None:
        """A pod of ``owner`` added or changed, for a subclass's own expectations."""

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        owner = self.pods_of.unfile(pod)
        if owner is not None:
            self.expectations.observe_gone(owner, pod)
            self._requeue(owner)

    def _requeue(self, owner: str) -> None:
        key = self._keys.get(owner)
        self.queue.add(f"{self.prefix}:{key}" if key is not None else "gc:" + owner)

    # -- the queue's keys
    async def _handle(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == self.prefix:
            if self.syncs:
                await self.sync(name)
            elif self.collects and (owner := self._sets.items.get(name)) is not None:
                uid = str(meta_of(owner).get("uid", ""))  # (its revisions let go with its pods, as below)
                await finalize(self.gc_client, self.kind, owner, "Pod", self.pods_of.of(uid),
                               (("ControllerRevision", self.history.owned_by(uid)),))
        elif self.collects:
            await collect(self.gc_client, "Pod", self.pods_of.of(name), name, self._keys)
            await collect(self.gc_client, "ControllerRevision", self.history.owned_by(name), name, self._keys)

    # -- a set's dependents
    async def _pods_to_sync(self, owner: dict[str, Any], member: Callable[[Mapping[str, Any]], bool] | None = None
                            ) -> dict[str, dict[str, Any]] | None:
        """``pods_to_sync`` for a set: deleted with ``Orphan``, its revisions are let go with its
        pods (upstream's collector orphans every dependent); else, once its writes are seen, the
        released pods (``member`` ones) and the revisions no controller owns that its selector
        matches are adopted first (upstream's ClaimPods and ClaimControllerRevisions), so a set
        deleted with ``--cascade=orphan`` and created again takes its pods and history back
        rather than running a second pod per node or ordinal. None while it waits."""
        meta = meta_of(owner)
        uid = str(meta.get("uid", ""))
        orphaning = bool(meta.get("deletionTimestamp")) and ORPHAN in (meta.get("finalizers") or ())
        revisions = (("ControllerRevision", self.history.owned_by(uid)),) if orphaning else ()
        owned = await pods_to_sync(self.gc_client, self.kind, owner, self.pods_of, self.expectations, revisions,
                                   collects=self.collects)
        if owned is None:
            return None
        if await self._adopt(owner, member):
            return None  # the adopted objects' events requeue the set
        return owned

    async def _adopt(self, owner: dict[str, Any], member: Callable[[Mapping[str, Any]], bool] | None) -> bool:
        """Adopt the released pods and the revisions without a controller of ``owner``'s namespace
        that its selector matches (not ones being deleted); True if any was. An adopted pod is
        expected until its informer shows it owned."""
        released, orphans = self.pods_of.released, self.history.orphans
        if not released and not orphans:
            return False
        meta = meta_of(owner)
        selector = (owner.get("spec") or {}).get("selector") or {}
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            return False  # an empty selector adopts nothing, as upstream
        uid, prefix = str(meta.get("uid", "")), f"{meta.get('namespace', '')}/"
        ref = {"apiVersion": "apps/v1", "kind": self.kind, "name": meta.get("name"), "uid": uid,
               "controller": True, "blockOwnerDeletion": True}
        adopted = False
        for plural, candidates in (("pods", released), ("controllerrevisions", orphans)):
            for key, obj in list(candidates.items()):
                if not adoptable(key, obj, prefix, selector) \
                        or (plural == "pods" and member is not None and not member(obj)):
                    continue
                pod = "+" + str(meta_of(obj).get("name", "")) if plural == "pods" else None
                if pod is not None:
                    self.expectations.expect(uid, pod)
                taken = False
                try:
                    taken = await add_controller_ref(self.client, "" if pod else "apps", plural, obj, ref)
                finally:  # (a pod not adopted, by a conflict or an error, is not expected)
                    if pod is not None and not taken:
                        self.expectations.seen(uid, pod)
                if not taken:
                    continue
                candidates.pop(key, None)
                adopted = True
        return adopted

    # -- writes
    async def _delete_pod(self, owner: Mapping[str, Any], pod: Mapping[str, Any], message: str) -> None:
        """Delete ``pod`` of ``owner``, expected until the informer shows it gone; a pod gone
        already is no error. A ``SuccessfulDelete`` event says ``message``."""
        pmeta = meta_of(pod)
        uid = str(meta_of(owner).get("uid", ""))
        self.expectations.expect(uid, "-" + pmeta.get("name", ""))
        try:
            await self.client.delete(resource_path("", "v1", "pods", pmeta.get("namespace"), pmeta.get("name")))
        except ApiError as e:
            self.expectations.seen(uid, "-" + pmeta.get("name", ""))
            if e.code != 404:
                raise
            return
        self.events.record(self.kind, owner, "SuccessfulDelete", message)

    async def sync(self, key: str) -> None:
        """Bring the set ``key`` (``namespace/name``) to what it says."""
        raise NotImplementedError
