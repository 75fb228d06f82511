"""The garbage collector's part for custom resources as owners: once a custom resource is
gone from the store, the objects that name it and no owner that is left are deleted, as
kube-controller-manager's garbage collector deletes them (``Background`` propagation,
the default). This is what cleans up after an operator that adopts its children (kopf's
``kopf.adopt``, controller-runtime's ``SetControllerReference``): delete the custom
resource, and its ConfigMaps, Services, Deployments... go too.

    await collect_dependents(self.registry, self.store, namespace, gone_uids, self._delete, lately_gone)

Upstream's collector keeps a graph of every object's owners, fed by watching every
resource. Here an owner's dependents are found when it goes, by one pass over the
objects of the owner's namespace (a cluster-scoped owner: over the cluster-scoped
objects), each value tested for the owner's uid as bytes before it is parsed, so the
pass costs a read of the namespace and no parse of objects that do not name it; a
dependent's other owners are looked up by key (those this process collected lately are
known gone). The owners deleted in a namespace while a pass runs are taken together by
the next one (``KubeApi._collect``): the resources of a deleted
CustomResourceDefinition cost a pass or two, not one each.
Custom resources are rarely deleted next to the pods, Leases and Events the hot paths
write, and nothing else is slowed: built-in owners keep their collectors
(``controllers/ownership.py`` for the workloads), and other built-in owners none.

As upstream, each dependent is deleted with its uid as a precondition (one replaced by
a new object of the same name is left alone) and ``propagationPolicy: Background``, so
its own dependents follow when it is a custom resource too (a workload's, through the
workload controllers). Left as they are, unlike upstream:

* the dangling references of a dependent that keeps another owner (upstream removes
  them; the dependent stays here as there). One whose owners are all gone, deleted
  together or one after another, goes, as upstream's;
* namespaced dependents of a cluster-scoped owner;
* the dependents of an owner deleted while this process was not running, or of one
  deleted in a namespace being emptied (the namespace deleter deletes them anyway);
* ``Foreground`` for custom resources: the delete goes ahead at once, as ``Background``
  (``propagationPolicy`` is still validated). ``Orphan`` (or ``orphanDependents``) leaves
  the dependents, with their references, when the delete removes the object at once; one
  that finalizers hold (an operator's) has them collected once it goes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container
from typing import Any

import orjson

import store
from store import Store

from ..registry import Registry, ResourceType
from .errors import ApiError

__all__ = ["DeleteDependent", "collect_dependents", "owners_gone"]

log = logging.getLogger(__name__)

# deletes one dependent through the API with these DeleteOptions
DeleteDependent = Callable[[ResourceType, str | None, str, dict[str, Any]], Awaitable[object]]

# up to this many owners, a value is tested for each one's uid before it is parsed; past it
# (a CustomResourceDefinition's resources removed), for having owners at all
_NEEDLES_MAX = 8


def _owners(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [ref for ref in refs if isinstance(ref, dict)]


async def _owner_exists(registry: Registry, s: Store, namespace: str | None, ref: dict[str, Any]) -> bool:
    """Whether the owner ``ref`` names is stored (by its uid): one of a kind this server
    does not serve (any more) counts as there, so that its dependents are left."""
    group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
    rtype = next((t for t in registry.in_group_version(group, version) if t.kind == ref.get("kind")), None)
    if rtype is None:
        return True
    kv = await s.get(rtype.key(namespace, str(ref.get("name") or "")))
    return kv is not None and (orjson.loads(kv.value).get("metadata") or {}).get("uid") == ref.get("uid")


async def owners_gone(registry: Registry, s: Store, namespace: str | None, obj: dict[str, Any],
                      gone: Container[str]) -> bool:
    """Whether no owner of ``obj`` (which has at least one) is left: each is in ``gone`` (just
    deleted, or lately) or no longer stored."""
    refs = [ref for ref in _owners(obj) if ref.get("uid") not in gone]
    for ref in refs:
        if await _owner_exists(registry, s, namespace, ref):
            return False
    return bool(_owners(obj))


async def collect_dependents(registry: Registry, s: Store, namespace: str | None, gone: set[str],
                             delete: DeleteDependent, lately: Container[str] = ()) -> None:
    """Delete the objects of ``namespace`` (None: the cluster-scoped ones) that name one of
    ``gone``, the uids of owners just deleted there, and no owner that is left (those in
    ``lately``, deleted before, are not looked up again). Module docstring."""
    try:
        if namespace is not None and await _terminating(registry, s, namespace):
            return
        needles = [uid.encode() for uid in gone] if len(gone) <= _NEEDLES_MAX else [b'"ownerReferences"']
        seen: set[bytes] = set()
        for rtype in registry.all():
            if rtype.namespaced != (namespace is not None):
                continue
            prefix = rtype.prefix(namespace)
            if prefix in seen:  # versions of one resource share its objects
                continue
            seen.add(prefix)
            kvs, _, _ = await s.range(prefix, store.prefix_end(prefix))
            for kv in kvs:
                value = kv.value
                if not any(needle in value for needle in needles):
                    continue
                obj: dict[str, Any] = orjson.loads(value)
                if not any(ref.get("uid") in gone for ref in _owners(obj)):
                    continue
                if not await owners_gone(registry, s, namespace, obj, _Either(gone, lately)):
                    continue
                dep = obj.get("metadata") or {}
                try:
                    await delete(rtype, namespace, dep.get("name", ""),
                                 {"propagationPolicy": "Background", "preconditions": {"uid": dep.get("uid")}})
                except ApiError as e:  # gone already (404), or replaced (409: the uid precondition)
                    if e.code not in (404, 409):
                        log.warning("garbage collector: deleting %s %s/%s, a dependent of a deleted owner: %s",
                                    rtype.plural, namespace or "", dep.get("name"), e)
    except store.StoreError as e:
        log.warning("garbage collector: the dependents of %d owners in %s are left: %s", len(gone),
                    namespace or "the cluster scope", e)


class _Either:
    """Membership in either of two containers."""

    __slots__ = ("a", "b")

    def __init__(self, a: Container[str], b: Container[str]) -> None:
        self.a, self.b = a, b

    def __contains__(self, item: object) -> bool:
        return item in self.a or item in self.b


async def _terminating(registry: Registry, s: Store, namespace: str) -> bool:
    namespaces = registry.get("", "v1", "namespaces")
    assert namespaces is not None
    kv = await s.get(namespaces.key(None, namespace))
    return kv is None or bool((orjson.loads(kv.value).get("metadata") or {}).get("deletionTimestamp"))
