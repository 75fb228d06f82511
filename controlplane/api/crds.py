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
replaces or drops a custom resource's storage: ``RETIRE_GRACE`` later, as
upstream's ``crdHandler.tearDown`` stops the old storage only after a second
(and once its short requests are done). Clients watch again and see the new
schema, or a 404; an operator that follows the CRDs (kopf) has seen the CRD go
by then and does not watch again into a 404 that it would take for a failure.

Admission of CRDs (defaults, validation, status) and of custom resources
(pruning, defaulting, schema validation) also lives here: it needs the set.
What follows a CRD's deletion is ``crd_controllers``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

import store
from store import EventType, Store

from ..registry import Registry, ResourceType
from ..registry.crd import (
    CLEANUP_FINALIZER,
    accepted_names_problems,
    condition_true,
    established,
    problems,
    served_types,
    set_defaults,
    set_status,
    stored_version_problems,
    terminate,
    unrecognized_format_warnings,
)
from ..registry.custom import admit, scale_causes
from ..registry.structural import apply_defaults, prune
from .dryrun import DRY_RUN
from .errors import ApiError
from .fieldvalidation import add_warning, unknown_fields
from .scale import BUILTIN as BUILTIN_SCALE
from .scale import ScalePaths

__all__ = ["RETIRE_GRACE", "CustomResourceDefinitions", "scale_paths"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

RETIRE_GRACE = 1.0  # seconds from a type's retirement to the end of its watches (upstream's tearDown)


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
                _set_later(retired[1])
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

    def get(self, name: str) -> Obj | None:
        return self._crds.get(name)

    def serves(self, name: str) -> bool:
        """Whether the resources of the CRD ``name`` (``<plural>.<group>``) are served here."""
        return bool(self._served.get(name))

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
        if subresource == "status":  # (other writes keep the status the server sets)
            causes += accepted_names_problems(crd)
        if causes:
            raise ApiError.invalid(self.type, crd.get("metadata", {}).get("name", ""), causes)
        if subresource != "status":
            set_status(crd, old, self.all())
            if old is not None and condition_true(old, "Terminating"):
                terminate(crd)
        causes = stored_version_problems(crd)
        if causes:
            raise ApiError.invalid(self.type, crd.get("metadata", {}).get("name", ""), causes)
        if subresource != "status":
            for warning in unrecognized_format_warnings(crd, old):
                add_warning(warning)

    def prepare_resource(self, rtype: ResourceType, obj: Obj) -> None:
        """Prune a custom resource being written of its unknown fields (reported under
        the request's ``fieldValidation``) and fill in its defaults, before its
        managed fields are recorded: upstream's decoder does both, so no manager
        owns a field that was pruned. ``admit_resource`` validates it later."""
        assert rtype.custom is not None
        if rtype.custom.schema is not None:
            pruned = prune(rtype.custom.schema, obj)
            apply_defaults(rtype.custom.schema, obj)
            unknown_fields(rtype, obj, pruned)

    def admit_resource(self, rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Prune, default and validate a custom resource being written. A new one
        of a terminating CRD is refused, as upstream; the pruned unknown fields
        are reported under the request's ``fieldValidation`` (Strict: refused); the
        failed rules ratcheted on an update are warnings, as upstream's."""
        assert rtype.custom is not None
        name = obj.get("metadata", {}).get("name", "") or obj.get("metadata", {}).get("generateName", "")
        if old is None:
            if rtype.custom.crd in self.terminating():
                raise ApiError(405, "MethodNotAllowed", "create not allowed while custom resource definition "
                               "is terminating", {"name": name, "group": rtype.group, "kind": rtype.plural})
            if "status" in rtype.subresources:
                obj.pop("status", None)  # the status is written through /status only
        ratcheted: list[dict[str, str]] = []
        pruned, causes = admit(rtype.custom, obj, old, ratcheted)
        causes += scale_causes(rtype.custom.scale, obj, old)
        for failure in ratcheted:  # as upstream's CEL validator: field.Error.Error() as a warning
            add_warning(f"{failure['field']}: {failure['message']}")
        unknown_fields(rtype, obj, pruned)
        if causes:
            raise ApiError.invalid(rtype, name, causes)


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


def _set_later(event: asyncio.Event) -> None:
    """``event`` set ``RETIRE_GRACE`` from now (at once outside an event loop)."""
    try:
        asyncio.get_running_loop().call_later(RETIRE_GRACE, event.set)
    except RuntimeError:
        event.set()
