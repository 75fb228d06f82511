"""What apiextensions-apiserver's finalizing and naming controllers do after a write:
delete a deleted CRD's custom resources, then the CRD; accept for the other CRDs of
its group the names it held.

    self._spawn(remove_resources(self.crds, self.store, name, self._delete))   # on a CRD's delete
    await reconsider_names(self.crds, self.store, group)                     # when a CRD is gone

They run in the process that took the delete (a restart resumes a deletion:
``KubeApi.bootstrap``) and write through the store like any client; every
process learns the outcome from its CRD watch.
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
from store import Store

from ..registry import ResourceType
from ..registry.crd import CLEANUP_FINALIZER, condition_true, set_status
from .crds import CustomResourceDefinitions, Obj
from .dryrun import DRY_RUN
from .errors import ApiError

__all__ = ["reconsider_names", "remove_resources"]

log = logging.getLogger(__name__)

DeleteOne = Callable[[ResourceType, str | None, str], Awaitable[object]]


async def remove_resources(crds: CustomResourceDefinitions, s: Store, name: str, delete: DeleteOne) -> None:
    """The finalizing controller: delete every custom resource of CRD ``name``
    (each as a delete through the API, so their finalizers hold them), then
    drop the cleanup finalizer, which deletes the CRD if it was the last.
    If the store fails (or closes at shutdown), the next start resumes it."""
    try:
        await _remove_resources(crds, s, name, delete)
    except store.StoreError as e:
        log.warning("removing the custom resources of %s stopped: %s", name, e)


async def _remove_resources(crds: CustomResourceDefinitions, s: Store, name: str, delete: DeleteOne) -> None:
    delay = 0.1
    while True:
        crd = crds.get(name)
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
    await _drop_finalizer(crds, s, name)


async def _drop_finalizer(crds: CustomResourceDefinitions, s: Store, name: str) -> None:
    """Remove the cleanup finalizer from the newest CRD, trying again (with a growing
    delay) after every conflict until it is gone: upstream's finalizer returns on a
    conflict, and the update that made it brings the CRD back to its queue."""
    key = crds.type.key(None, name)
    delay = 0.005
    while True:
        kv = await s.get(key)
        if kv is None:
            return
        crd = orjson.loads(kv.value)
        meta = crd.setdefault("metadata", {})
        finalizers = meta.get("finalizers", [])
        if CLEANUP_FINALIZER not in finalizers:
            return  # someone removed it meanwhile
        meta["finalizers"] = [f for f in finalizers if f != CLEANUP_FINALIZER]
        try:
            if meta["finalizers"]:
                rev = await s.update(key, orjson.dumps(crd), kv.mod_revision)
                crds.observe(name, crd, rev)
            else:
                rev = await s.delete(key, kv.mod_revision)
                crds.observe(name, None, rev)
                await reconsider_names(crds, s, crd.get("spec", {}).get("group"))
            return
        except (store.Conflict, store.NotFound):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)


async def reconsider_names(crds: CustomResourceDefinitions, s: Store, group: Any) -> None:
    """A CRD of ``group`` went: the names it held may now be accepted for the
    CRDs that asked for them (the naming controller requeues the group)."""
    if DRY_RUN.get():
        return
    for crd in crds.all():
        if crd.get("spec", {}).get("group") != group or condition_true(crd, "NamesAccepted"):
            continue
        name = crd.get("metadata", {}).get("name", "")
        key = crds.type.key(None, name)
        with contextlib.suppress(store.Conflict, store.NotFound):  # changed meanwhile: its writer decided
            kv = await s.get(key)
            if kv is None:
                continue
            current = orjson.loads(kv.value)
            updated = copy.deepcopy(current)
            set_status(updated, current, crds.all())
            if updated["status"] != current.get("status"):
                crds.observe(name, updated, await s.update(key, orjson.dumps(updated), kv.mod_revision))


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
