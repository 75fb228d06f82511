"""ControllerRevisions: the template history of StatefulSets and DaemonSets (upstream's
``pkg/controller/history``), which ``kubectl rollout history`` and ``rollout undo`` read.

Each pod template a set has run is one ControllerRevision (apps/v1), named
``<set>-<hash>`` after the template's hash, owned by the set (controller reference),
labelled with the template's labels and ``controller-revision-hash``, annotated as
the set was when the revision was made (so ``kubernetes.io/change-cause`` shows in the
history, and a revision made newest again keeps its own), and holding the
template as a strategic merge patch that replaces it::

    data: {"spec": {"template": {..., "$patch": "replace"}}}

which is what ``kubectl rollout undo`` sends back. Revisions are numbered from 1;
going back to a template that has a revision makes that revision the newest again
(its number is raised past the others), as upstream. Revisions beyond the set's
``revisionHistoryLimit`` (default 10), oldest first, are deleted unless pods still
run them. A set's revision is found by its data, whatever its name; a new one whose name
is taken by a revision of other data (not the set's, or another template's) is named again
with the set's ``status.collisionCount`` raised, which the set's controller writes, as
upstream's CreateControllerRevision.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.client import ApiError, Client, resource_path

from .ownership import meta_of
from .workloads import pod_template_hash

__all__ = ["REVISION_HASH", "History", "revision_data"]

REVISION_HASH = "controller-revision-hash"
DEFAULT_HISTORY_LIMIT = 10
REVISIONS = resource_path("apps", "v1", "controllerrevisions")

Obj = dict[str, Any]


def revision_data(template: Mapping[str, Any]) -> Obj:
    """The revision's ``data``: a strategic merge patch that puts ``template`` back."""
    return {"spec": {"template": {**copy.deepcopy(dict(template)), "$patch": "replace"}}}


class History:
    """The revisions of one kind of set, by owner uid, from a shared informer."""

    def __init__(self, client: Client, kind: str) -> None:
        self.client = client
        self.kind = kind
        # the revisions no controller owns (their set deleted with Orphan), by key: few, so
        # a set's sync looks for ones to adopt without walking every revision
        self.orphans: dict[str, Obj] = {}
        self.informer = client.informer(REVISIONS, on_add=self._seen, on_update=lambda _old, new: self._seen(new),
                                        on_delete=self._gone)

    def _seen(self, revision: Obj) -> None:
        key = _key(revision)
        if any(ref.get("controller") for ref in meta_of(revision).get("ownerReferences") or ()):
            self.orphans.pop(key, None)
        else:
            self.orphans[key] = revision

    def _gone(self, revision: Obj) -> None:
        self.orphans.pop(_key(revision), None)

    def of(self, uid: str) -> list[Obj]:
        """The revisions ``uid`` controls, oldest first."""
        owned = [r for r in self.informer.items.values()
                 if any(ref.get("controller") and ref.get("uid") == uid
                        for ref in meta_of(r).get("ownerReferences") or ())]
        return sorted(owned, key=lambda r: (int(r.get("revision", 0)), meta_of(r).get("name", "")))

    def template(self, uid: str, name: str) -> Obj | None:
        """The pod template revision ``name`` of ``uid`` holds (None if it has none)."""
        for r in self.of(uid):
            if meta_of(r).get("name") == name:
                template = ((r.get("data") or {}).get("spec") or {}).get("template")
                if isinstance(template, dict):
                    return {k: v for k, v in template.items() if k != "$patch"}
        return None

    def owned_by(self, uid: str) -> dict[str, Obj]:
        """The revisions of ``uid`` by key, for the garbage collector once it is gone."""
        return {_key(r): r for r in self.of(uid)}

    async def record(self, owner: Mapping[str, Any], template: Mapping[str, Any], in_use: Iterable[str] = ()
                     ) -> tuple[str, int, int]:
        """The revision of ``owner``'s current ``template`` (created, or made newest): its name,
        number and the owner's collision count. Old revisions past the history limit go, except
        those named in ``in_use``. The revision is found by its data, whatever its name (upstream's
        FindEqualRevisions); a new one is named by the hash of the template and the owner's
        ``status.collisionCount``, which goes up while the name is another revision's of other
        data (upstream's CreateControllerRevision): the caller writes the count it gets back."""
        meta, spec = meta_of(owner), owner.get("spec") or {}
        namespace, uid = meta.get("namespace", ""), str(meta.get("uid", ""))
        collisions = int((owner.get("status") or {}).get("collisionCount") or 0)
        held = {"spec": {"template": {**template, "$patch": "replace"}}}  # (a copy only to create one)
        revisions = self.of(uid)
        newest = max((int(r.get("revision", 0)) for r in revisions), default=0)
        mine = next((r for r in reversed(revisions) if r.get("data") == held), None)
        path = resource_path("apps", "v1", "controllerrevisions", namespace)
        if mine is None:
            number = newest + 1
            name, collisions = await self._create(owner, template, revision_data(template), number, collisions)
        elif int(mine.get("revision", 0)) < newest:  # back to an older template: it is the newest again
            name = meta_of(mine).get("name", "")
            # only the number changes: the revision keeps the annotations it was made with (its
            # change-cause), as upstream's UpdateControllerRevision
            number = newest + 1
            await self.client.patch(f"{path}/{name}", {"revision": number})
        else:
            name = meta_of(mine).get("name", "")
            number = int(mine.get("revision", 0))
        limit = spec.get("revisionHistoryLimit")
        limit = DEFAULT_HISTORY_LIMIT if limit is None else int(limit)
        keep = {name, *in_use}
        old = [r for r in revisions if meta_of(r).get("name") not in keep]
        for r in old[:max(len(old) - limit, 0)]:
            try:
                await self.client.delete(f"{path}/{meta_of(r)['name']}")
            except ApiError as e:
                if e.code != 404:
                    raise
        return name, number, collisions

    async def _create(self, owner: Mapping[str, Any], template: Mapping[str, Any], data: Obj, number: int,
                      collisions: int) -> tuple[str, int]:
        """Create revision ``number`` of ``template``: the name of the revision that holds it (one
        of the same data already there under its name counts as made) and the collision count."""
        meta = meta_of(owner)
        namespace, uid = meta.get("namespace", ""), str(meta.get("uid", ""))
        path = resource_path("apps", "v1", "controllerrevisions", namespace)
        while True:
            hash_ = pod_template_hash(dict(template), collisions)
            name = f"{meta.get('name', '')}-{hash_}"
            rmeta: Obj = {
                "name": name, "namespace": namespace,
                "labels": {**((template.get("metadata") or {}).get("labels") or {}), REVISION_HASH: hash_},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": self.kind, "name": meta.get("name"),
                                     "uid": uid, "controller": True, "blockOwnerDeletion": True}]}
            if meta.get("annotations"):
                rmeta["annotations"] = dict(meta["annotations"])
            body = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": rmeta,
                    "data": data, "revision": number}
            try:
                await self.client.create(path, body)
                return name, collisions
            except ApiError as e:
                if e.code != 409:
                    raise
            try:
                there = await self.client.get(f"{path}/{name}")
            except ApiError as e:
                if e.code == 404:
                    continue  # gone meanwhile: made again
                raise
            if there.get("data") == data:  # an earlier sync's, whose event is on its way
                return name, collisions
            collisions += 1


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta_of(obj).get('namespace', '')}/{meta_of(obj).get('name', '')}"
