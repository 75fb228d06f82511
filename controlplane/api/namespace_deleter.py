"""What kube-controller-manager's namespace controller does for a namespace being
deleted (upstream's ``namespaced_resources_deleter``): delete everything in it, say in
the namespace's conditions what stays and which finalizers hold it, and, once nothing
is left, drop the ``kubernetes`` finalizer, which deletes the namespace.

    self._spawn(empty_namespace(self.registry, self.store, namespaces, name, self._delete,
                                self._store_namespace))

Content that stays (held by finalizers) is waited for as long as it stays, as upstream
requeues the namespace until it is empty: the namespace stays ``Terminating`` and its
conditions say why, in upstream's words::

    NamespaceContentRemaining     True  SomeResourcesRemain
        Some resources are remaining: configmaps. has 1 resource instances
    NamespaceFinalizersRemaining  True  SomeFinalizersRemain
        Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances

(the other three, and these once nothing is left, in their ``False`` form). Each round
deletes what is not yet being deleted, through the API (so finalizers hold it); the next
comes after 0.2 s, doubling to 2 s while content stays. It runs in the process that took
the delete; a restart resumes it (``KubeApi.bootstrap``). It ends when the namespace is
gone, however it went (a ``finalize`` that dropped the finalizer, say).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from store import Store

from ..registry import Registry, ResourceType
from .errors import ApiError

__all__ = ["CONDITION_TYPES", "NAMESPACE_FINALIZER", "empty_namespace", "namespace_conditions"]

log = logging.getLogger(__name__)

NAMESPACE_FINALIZER = "kubernetes"
FIRST_RECHECK, LAST_RECHECK = 0.2, 2.0  # seconds between rounds while content stays

# upstream's conditionTypes, in its order, with the reason and message of each when all is well
CONDITION_TYPES: dict[str, tuple[str, str]] = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions",
                                                    "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted",
                                        "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}

# deletes one object through the API: None if it is gone, else the object as it stays
DeleteOne = Callable[[ResourceType, str | None, str, dict[str, Any] | None], Awaitable[dict[str, Any] | None]]
StoreNamespace = Callable[[bytes, dict[str, Any], int], Awaitable[int]]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace_conditions(old: list[dict[str, Any]], by_resource: Counter[str],
                         by_finalizer: Counter[str]) -> list[dict[str, Any]]:
    """The status conditions of a terminating namespace whose remaining content counts
    ``by_resource`` (``"configmaps."``: plural and group) and ``by_finalizer``, over its
    ``old`` ones: as upstream's ``updateConditions``, a condition's ``lastTransitionTime``
    moves only when its status does, and conditions of other types are kept."""
    wanted: dict[str, tuple[str, str, str]] = {t: ("False", *ok) for t, ok in CONDITION_TYPES.items()}
    if by_resource:
        remaining = sorted(f"{r} has {n} resource instances" for r, n in by_resource.items())
        wanted["NamespaceContentRemaining"] = ("True", "SomeResourcesRemain",
                                               "Some resources are remaining: " + ", ".join(remaining))
    if by_finalizer:
        held = sorted(f"{f} in {n} resource instances" for f, n in by_finalizer.items())
        wanted["NamespaceFinalizersRemaining"] = (
            "True", "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: " + ", ".join(held))
    conditions = [dict(c) for c in old if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in conditions}
    for ctype, (status, reason, message) in wanted.items():
        current = by_type.get(ctype)
        if current is None:
            conditions.append({"type": ctype, "status": status, "lastTransitionTime": _now(),
                               "reason": reason, "message": message})
            continue
        if current.get("status") != status:
            current["lastTransitionTime"] = _now()
        current.update(status=status, reason=reason, message=message)
    return conditions


async def empty_namespace(registry: Registry, s: Store, namespaces: ResourceType, name: str,
                          delete: DeleteOne, store_namespace: StoreNamespace) -> None:
    """Empty the terminating namespace ``name``, then release it (module docstring). If the
    store fails (or closes at shutdown), the next start resumes it."""
    try:
        await _empty_namespace(registry, s, namespaces, name, delete, store_namespace)
    except store.StoreError as e:
        log.warning("emptying namespace %s stopped: %s", name, e)


async def _empty_namespace(registry: Registry, s: Store, namespaces: ResourceType, name: str,
                           delete: DeleteOne, store_namespace: StoreNamespace) -> None:
    delay = FIRST_RECHECK
    while True:
        try:
            by_resource, by_finalizer = await _delete_content(registry, s, name, delete)
            if await _record(s, namespaces, name, by_resource, by_finalizer, store_namespace):
                return
        except store.StoreError:
            raise
        except Exception:  # a round that failed is tried again, as upstream's controller requeues
            log.exception("emptying namespace %s: a round failed; trying again", name)
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_RECHECK)


async def _delete_content(registry: Registry, s: Store, namespace: str,
                          delete: DeleteOne) -> tuple[Counter[str], Counter[str]]:
    """One round: delete every object of the namespace (a pod without its grace period:
    upstream waits for its kubelet, and most nodes here have none); what stays, counted
    by resource and by finalizer."""
    by_resource: Counter[str] = Counter()
    by_finalizer: Counter[str] = Counter()
    pods = registry.get("", "v1", "pods")
    seen: set[bytes] = set()
    for rtype in registry.all():
        prefix = rtype.prefix(namespace) if rtype.namespaced else b""
        if not prefix or prefix in seen:  # versions of one resource share its objects
            continue
        seen.add(prefix)
        kvs, _, _ = await s.range(prefix, store.prefix_end(prefix))
        for kv in kvs:
            obj: dict[str, Any] = orjson.loads(kv.value)
            left: dict[str, Any] | None = obj
            try:
                left = await delete(rtype, namespace, (obj.get("metadata") or {}).get("name", ""),
                                    {"gracePeriodSeconds": 0} if rtype is pods else None)
            except ApiError as e:
                if e.code == 404:
                    continue
            except store.StoreError:
                pass  # counted as it was; the next round tries again
            if left is None:
                continue
            by_resource[f"{rtype.plural}.{rtype.group}"] += 1
            for finalizer in (left.get("metadata") or {}).get("finalizers") or ():
                by_finalizer[finalizer] += 1
    return by_resource, by_finalizer


async def _record(s: Store, namespaces: ResourceType, name: str, by_resource: Counter[str],
                  by_finalizer: Counter[str], store_namespace: StoreNamespace) -> bool:
    """Write what stays into the namespace's conditions (when they change) and, once
    nothing does, drop its ``kubernetes`` finalizer. True when there is no more to do."""
    key = namespaces.key(None, name)
    for _attempt in range(16):
        kv = await s.get(key)
        if kv is None:
            return True  # gone (a finalize dropped the finalizer, or another process finished)
        ns: dict[str, Any] = orjson.loads(kv.value)
        if not (ns.get("metadata") or {}).get("deletionTimestamp"):
            return True
        status = ns.setdefault("status", {})
        conditions = namespace_conditions(status.get("conditions") or [], by_resource, by_finalizer)
        empty = not by_resource
        spec = ns.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if conditions == status.get("conditions") and not (empty and NAMESPACE_FINALIZER in finalizers):
            return empty
        status["conditions"] = conditions
        if empty:
            spec["finalizers"] = [f for f in finalizers if f != NAMESPACE_FINALIZER]
        try:
            await store_namespace(key, ns, kv.mod_revision)
        except (store.Conflict, store.NotFound):
            continue
        return empty
    return False
