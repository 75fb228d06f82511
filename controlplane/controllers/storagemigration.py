"""kube-controller-manager's ``storage-version-migrator-controller``: StorageVersionMigrations
run, as upstream's two loops do (``pkg/controller/storageversionmigrator``: the resource
version controller, then the migrator), in one handler of each migration not yet
``Succeeded`` or ``Failed``:

1. the resource (``spec.resource``: group and plural) is looked up in discovery, at its
   group's preferred version; not served: ``Failed`` (reason
   ``StorageVersionMigrationFailed``, ``resource does not exist in discovery``);
2. ``status.resourceVersion`` set to the resource's current list resourceVersion (a list of
   one item, as upstream's), once;
3. ``Running`` (``StorageVersionMigrationInProgress``), the objects listed, then ``Running``
   made False and ``Succeeded`` (``StorageVersionMigrationSucceeded``) added.

Upstream rewrites each object listed at or before that resourceVersion with an empty
server-side apply (its uid and resourceVersion as preconditions), so that the store encodes
it again in the current storage version (and with the current encryption key). Here every
built-in object is stored as the version it is served at, and a custom resource as its CRD's
storage version at each write, with no encryption at rest: the rewrite would change nothing
but the objects' resourceVersions, and it is left out; listing the objects is what is kept of
it (a resource that cannot be listed fails the migration with upstream's message).
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.storagemigration import FAILED, RUNNING, SUCCEEDED, condition_true

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["SVMS", "StorageVersionMigrator", "start"]

log = logging.getLogger(__name__)

SVMS = "/apis/storagemigration.k8s.io/v1/storageversionmigrations"
SUCCEEDED_REASON = "StorageVersionMigrationSucceeded"
RUNNING_REASON = "StorageVersionMigrationInProgress"
FAILED_REASON = "StorageVersionMigrationFailed"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_condition(svm: dict[str, Any], kind: str, reason: str, message: str = "") -> dict[str, Any]:
    """``svm`` with the condition ``kind`` True (upstream's ``setStatusConditions``): added
    unless already true; a terminal one (``Succeeded``, ``Failed``) makes ``Running`` False."""
    status = dict(svm.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, dict)]
    if not condition_true(svm, kind):
        if kind in (SUCCEEDED, FAILED):
            for c in conditions:
                if c.get("type") == RUNNING:
                    c["status"] = "False"
        conditions.append({"type": kind, "status": "True", "lastTransitionTime": _now(), "reason": reason,
                           "message": message})
    status["conditions"] = conditions
    return {**svm, "status": status}


class StorageVersionMigrator:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.svms = client.informer(SVMS, on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, svm: dict[str, Any]) -> None:
        if not condition_true(svm, SUCCEEDED) and not condition_true(svm, FAILED):
            self.queue.add(str(meta_of(svm).get("name", "")))

    async def run(self) -> None:
        await run_controller("storage version migrator", (self.svms,), self.queue, self.sync, 1)

    async def _collection(self, group: str, plural: str) -> str | None:
        """The path of the collection of ``group``'s ``plural`` at the group's preferred
        version (the REST mapper's answer), or None when discovery does not list it."""
        if group:
            try:
                found = await self.client.get(f"/apis/{group}")
            except ApiError as e:
                if e.code == 404:
                    return None
                raise
            version = str((found.get("preferredVersion") or {}).get("version") or "")
            if not version:
                return None
            base = f"/apis/{group}/{version}"
        else:
            base = "/api/v1"
        resources = await self.client.get(base)
        if any(r.get("name") == plural for r in resources.get("resources") or () if isinstance(r, dict)):
            return f"{base}/{plural}"
        return None

    async def _write_status(self, svm: dict[str, Any]) -> dict[str, Any]:
        return await self.client.update(f"{SVMS}/{meta_of(svm)['name']}/status", svm)

    async def sync(self, name: str) -> None:
        svm = self.svms.items.get(name)
        if svm is None or condition_true(svm, SUCCEEDED) or condition_true(svm, FAILED):
            return
        resource = (svm.get("spec") or {}).get("resource") or {}
        collection = await self._collection(str(resource.get("group") or ""), str(resource.get("resource") or ""))
        if collection is None:
            await self._write_status(with_condition(svm, FAILED, FAILED_REASON, "resource does not exist in discovery"))
            return
        if not (svm.get("status") or {}).get("resourceVersion"):  # the resource version controller
            latest = await self.client.list(collection, limit=1)
            svm = {**svm, "status": {**(svm.get("status") or {}),
                                     "resourceVersion": str((latest.get("metadata") or {}).get("resourceVersion"))}}
            svm = await self._write_status(svm)
        svm = await self._write_status(with_condition(svm, RUNNING, RUNNING_REASON))
        try:  # the objects the migration would rewrite (see the module's docstring)
            await self.client.list(collection)
        except ApiError as e:
            if e.code in (429, 500, 503, 504):
                raise  # retriable, as upstream's isRetriableError: the migration is tried again
            await self._write_status(with_condition(svm, FAILED, FAILED_REASON,
                                                    f"migration encountered unhandled error: {e}"))
            return
        await self._write_status(with_condition(svm, SUCCEEDED, SUCCEEDED_REASON))
        log.info("storage version migration %s of %s succeeded", name, collection)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await StorageVersionMigrator(client).run()
