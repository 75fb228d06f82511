"""The CustomResourceDefinitions this process serves, kept in step with the store.

Every API server process over one store must serve the same custom resources,
so the set of CRDs is built from the store at startup (``load``) and followed
by a watch on the CRD prefix (``follow``): another process's create shows up
here within a watch delivery. A write of this process is also applied at once
(``observe``), so that discovery lists a CRD's resources as soon as its create
returns (kubectl re-discovers right after applying a CRD, then applies the CR);
that is ``written``, which a dry run skips.

Invariant: ``_revisions[name]`` is the store revision of the newest state of
``name`` applied; an older event (the watch delivering what ``observe``
already applied) changes nothing.

A CRD's types are rebuilt only when what they are made of changes (its spec,
its accepted names, being established); the old ones are then retired, which
ends their watches (``until_retired``), as kube-apiserver ends them when it
replaces or drops a custom resource's storage. Clients watch again and see the
new schema, or a 404.

Admission of CRDs (defaults, validation, status) and of custom resources
(pruning, defaulting, schema validation) also lives here: it needs the set.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

import store
from store import EventType, Store

from ..registry import Registry, ResourceType
from ..registry.crd import (
    CLEANUP_FINALIZER,
    condition_true,
    established,
    problems,
    served_types,
    set_defaults,
    set_status,
    stored_version_problems,
    terminate,
)
from ..registry.custom import admit
from .dryrun import DRY_RUN
from .errors import ApiError
from .fieldvalidation import unknown_fields
from .scale import BUILTIN as BUILTIN_SCALE
from .scale import ScalePaths

__all__ = ["CustomResourceDefinitions", "scale_paths"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
DeleteOne = Callable[[ResourceType, str | None, str], Awaitable[object]]


class CustomResourceDefinitions:
    def __init__(self, registry: Registry, crd_type: ResourceType) -> None:
        self._registry = registry
        self.type = crd_type
        self._crds: dict[str, Obj] = {}                    # name -> the CRD as stored
        self._served: dict[str, list[ResourceType]] = {}   # name -> its types in the registry
        self._revisions: dict[str, int] = {}               # name -> revision of what is applied
        # id(type) -> (the type, set when it is retired), for the served types being watched
        self._retirements: dict[int, tuple[ResourceType, asyncio.Event]] = {}
        self._loaded_at = 0
        # called with each type that starts or stops being served (e.g. to republish OpenAPI)
        self.listeners: list[Callable[[ResourceType], None]] = []

    # -- the set, in step with the store ----------------------------------------------------
    def observe(self, name: str, crd: Obj | None, revision: int) -> None:
        """Apply the state of CRD ``name`` at ``revision`` (None: deleted)."""
        if revision <= self._revisions.get(name, 0):
            return
        self._revisions[name] = revision
        old = self._crds.get(name)
        if crd is not None and old is not None and _serving(old) == _serving(crd):
            self._crds[name] = crd  # e.g. labels or conditions: the types stay as they are
            return
        removed = self._served.pop(name, [])
        for t in removed:
            self._registry.remove(t)
            retired = self._retirements.pop(id(t), None)
            if retired is not None:
                retired[1].set()
        added: list[ResourceType] = []
        if crd is None:
            self._crds.pop(name, None)
        else:
            self._crds[name] = crd
            added = self._served[name] = [t for t in served_types(crd) if self._registry.add(t)]
        for t in [*removed, *added]:
            for listener in self.listeners:
                listener(t)

    def written(self, name: str, crd: Obj | None, revision: int) -> None:
        """A write of this process to CRD ``name``: applied at once (the watch would
        apply it a moment later), unless it was a dry run, which stored nothing."""
        if not DRY_RUN.get():
            self.observe(name, crd, revision)

    async def until_retired(self, rtype: ResourceType, other: Awaitable[None]) -> None:
        """Wait until ``other`` is done or ``rtype`` is no longer served, whichever is first."""
        entry = self._retirements.get(id(rtype))
        if entry is None:
            entry = (rtype, asyncio.Event())
            if any(t is rtype for types in self._served.values() for t in types):
                self._retirements[id(rtype)] = entry
            else:
                entry[1].set()  # already retired
        waits = {asyncio.ensure_future(other), asyncio.ensure_future(entry[1].wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def all(self) -> list[Obj]:
        return list(self._crds.values())

    def terminating(self) -> list[str]:
        return [n for n, c in self._crds.items() if CLEANUP_FINALIZER in c.get("metadata", {}).get("finalizers", [])]

    async def load(self, s: Store) -> None:
        """Read every CRD at one revision; CRDs this process knew but the store no
        longer has are forgotten."""
        prefix = self.type.prefix()
        kvs, revision, _ = await s.range(prefix, store.prefix_end(prefix))
        present = set()
        for kv in kvs:
            crd = orjson.loads(kv.value)
            name = crd.get("metadata", {}).get("name", "")
            present.add(name)
            self.observe(name, crd, kv.mod_revision)
        for name in set(self._crds) - present:
            self.observe(name, None, revision)
        self._loaded_at = revision

    async def follow(self, s: Store) -> None:
        """Apply every change of a CRD from the store's watch, until cancelled
        (a compacted watch reloads the set and watches on)."""
        prefix = self.type.prefix()
        reload = False
        while True:
            try:
                if reload:
                    await self.load(s)
                async for events in s.watch(prefix, store.prefix_end(prefix), self._loaded_at + 1):
                    for ev in events:
                        self._apply(ev)
                reload = True  # the watch ended: start over from a fresh read
            except store.Compacted:
                reload = True
                continue
            except store.StoreError as e:  # e.g. the store is unavailable for a while: retry
                log.warning("watch of CRDs failed: %s", e)
                reload = True
            await asyncio.sleep(1.0)

    def _apply(self, ev: store.Event) -> None:
        self._loaded_at = max(self._loaded_at, ev.kv.mod_revision)
        if ev.type is EventType.DELETE:
            name = ev.kv.key[len(self.type.prefix()):].decode()
            self.observe(name, None, ev.kv.mod_revision)
            return
        crd = orjson.loads(ev.kv.value)
        self.observe(crd.get("metadata", {}).get("name", ""), crd, ev.kv.mod_revision)

    # -- admission ----------------------------------------------------------------------------
    def admit_definition(self, crd: Obj, old: Obj | None, subresource: str | None) -> None:
        """Default and validate a CRD being written, and set its status (but a
        write to ``/status`` keeps the status written)."""
        set_defaults(crd)
        causes = problems(crd, old)
        if causes:
            raise ApiError.invalid(self.type, crd.get("metadata", {}).get("name", ""), causes)
        if subresource != "status":
            set_status(crd, old, self.all())
            if old is not None and condition_true(old, "Terminating"):
                terminate(crd)
        causes = stored_version_problems(crd)
        if causes:
            raise ApiError.invalid(self.type, crd.get("metadata", {}).get("name", ""), causes)

    def admit_resource(self, rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Prune, default and validate a custom resource being written. A new one
        of a terminating CRD is refused, as upstream; the pruned unknown fields
        are reported under the request's ``fieldValidation`` (Strict: refused)."""
        assert rtype.custom is not None
        name = obj.get("metadata", {}).get("name", "") or obj.get("metadata", {}).get("generateName", "")
        if old is None:
            if rtype.custom.crd in self.terminating():
                raise ApiError(405, "MethodNotAllowed", "create not allowed while custom resource definition "
                               "is terminating", {"name": name, "group": rtype.group, "kind": rtype.plural})
            if "status" in rtype.subresources:
                obj.pop("status", None)  # the status is written through /status only
        pruned, causes = admit(rtype.custom, obj)
        unknown_fields(rtype, obj, pruned)
        if causes:
            raise ApiError.invalid(rtype, name, causes)

    # -- deletion --------------------------------------------------------------------------------
    async def remove_resources(self, s: Store, name: str, delete: DeleteOne) -> None:
        """The finalizing controller: delete every custom resource of CRD ``name``
        (each as a delete through the API, so their finalizers hold them), then
        drop the cleanup finalizer, which deletes the CRD if it was the last.
        If the store fails (or closes at shutdown), the next start resumes it."""
        try:
            await self._remove_resources(s, name, delete)
        except store.StoreError as e:
            log.warning("removing the custom resources of %s stopped: %s", name, e)

    async def _remove_resources(self, s: Store, name: str, delete: DeleteOne) -> None:
        delay = 0.1
        while True:
            crd = self._crds.get(name)
            if crd is None:
                return
            storage = _storage_type(crd)
            if storage is None:
                break
            prefix = storage.prefix()
            kvs, _, _ = await s.range(prefix, store.prefix_end(prefix))
            if not kvs:
                break
            for item in kvs:
                meta = orjson.loads(item.value).get("metadata", {})
                if not meta.get("deletionTimestamp"):
                    with contextlib.suppress(ApiError, store.NotFound, store.Conflict):
                        await delete(storage, meta.get("namespace"), meta.get("name", ""))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        key = self.type.key(None, name)
        for _attempt in range(16):
            kv = await s.get(key)
            if kv is None:
                return
            crd = orjson.loads(kv.value)
            meta = crd.setdefault("metadata", {})
            meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != CLEANUP_FINALIZER]
            try:
                if meta["finalizers"]:
                    rev = await s.update(key, orjson.dumps(crd), kv.mod_revision)
                    self.observe(name, crd, rev)
                else:
                    rev = await s.delete(key, kv.mod_revision)
                    self.observe(name, None, rev)
                    await self.reconsider_names(s, crd.get("spec", {}).get("group"))
                return
            except (store.Conflict, store.NotFound):
                continue

    async def reconsider_names(self, s: Store, group: Any) -> None:
        """A CRD of ``group`` went: the names it held may now be accepted for the
        CRDs that asked for them (the naming controller requeues the group)."""
        if DRY_RUN.get():
            return
        for crd in self.all():
            if crd.get("spec", {}).get("group") != group or condition_true(crd, "NamesAccepted"):
                continue
            name = crd.get("metadata", {}).get("name", "")
            key = self.type.key(None, name)
            with contextlib.suppress(store.Conflict, store.NotFound):  # changed meanwhile: its writer decided
                kv = await s.get(key)
                if kv is None:
                    continue
                current = orjson.loads(kv.value)
                updated = copy.deepcopy(current)
                set_status(updated, current, self.all())
                if updated["status"] != current.get("status"):
                    self.observe(name, updated, await s.update(key, orjson.dumps(updated), kv.mod_revision))


def scale_paths(rtype: ResourceType) -> ScalePaths:
    """Where ``rtype`` keeps the replicas its ``scale`` subresource shows: the paths
    of its CRD (``.spec.replicas`` -> ("spec", "replicas")), or the built-in ones."""
    paths = rtype.custom.scale if rtype.custom is not None else None
    if paths is None:
        return BUILTIN_SCALE

    def split(path: str) -> tuple[str, ...]:
        return tuple(p for p in path.split(".") if p)

    selector = paths.get("labelSelectorPath")
    # without a labelSelectorPath the Scale has no selector: () names the object itself, never a string
    return ScalePaths(split(paths.get("specReplicasPath", "")), split(paths.get("statusReplicasPath", "")),
                      split(selector) if selector else ())


def _serving(crd: Obj) -> tuple[Any, Any, bool]:
    """What a CRD's served types are made of."""
    return crd.get("spec"), crd.get("status", {}).get("acceptedNames"), established(crd)


def _storage_type(crd: Obj) -> ResourceType | None:
    """A type for reaching the stored custom resources of ``crd``, served or not."""
    spec = crd.get("spec", {})
    group, names = spec.get("group"), spec.get("names", {})
    versions = [v for v in spec.get("versions", []) if isinstance(v, dict) and v.get("name")]
    if not group or not names.get("plural") or not versions:
        return None
    kind = names.get("kind", "")
    return ResourceType(group, versions[0]["name"], kind, names["plural"], spec.get("scope") == "Namespaced",
                        storage_group=group)
