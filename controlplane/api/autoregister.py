"""What kube-apiserver writes of its own configuration at start, beside the namespaces and
PriorityClasses (``KubeApi.bootstrap``):

- the local APIServices of the built-in groups/versions it serves (the aggregator's
  autoregistration, ``registry/apiservices.py``), each ``Available`` (reason ``Local``);
  created when missing, their spec set back when it drifted, and those of versions no
  longer served removed, as long as they carry the ``automanaged: onstart`` label;
- API Priority and Fairness's bootstrap configuration (its ``priority-and-fairness-config-
  producer`` hook, ``registry/flowcontrol.py``): created when missing, their spec set back
  as ``restores`` says (then once a minute by ``controllers/flowschemas.py``).

Written straight to the store, as the other bootstrap objects are: before the server
serves, and again at each start (several servers over one store write the same).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from controlplane.registry.apiservices import AUTOMANAGED, local_apiservice
from controlplane.registry.flowcontrol import bootstrap_objects, restores
from controlplane.registry.types import Registry, ResourceType

from .stored import metadata_first
from .uids import new_uid

__all__ = ["ensure_flowcontrol_bootstrap", "ensure_local_apiservices", "local_status"]

Obj = dict[str, Any]
GROUP = "apiregistration.k8s.io"
FLOWCONTROL = "flowcontrol.apiserver.k8s.io"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def local_status(now: str) -> Obj:
    """A local APIService's status: available, as upstream's availability controller says."""
    return {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "Local",
                            "message": "Local APIServices are always available"}]}


def _dangling_false(level: str, now: str) -> Obj:
    """A FlowSchema's status whose priority level exists (upstream's config controller's words)."""
    return {"conditions": [{"type": "Dangling", "status": "False", "lastTransitionTime": now, "reason": "Found",
                            "message": f'This FlowSchema references the PriorityLevelConfiguration object named '
                                       f'"{level}" and it exists'}]}


async def _ensure(s: store.Store, rtype: ResourceType, wanted: Obj, status: Obj,
                  restore: Callable[[Obj], bool]) -> None:
    """``wanted`` created if missing (with ``status``); else its spec and labels set back when
    ``restore(stored)`` says so and they differ."""
    name = wanted["metadata"]["name"]
    key = rtype.key(None, name)
    now = _now()
    meta = {**wanted["metadata"], "uid": new_uid(), "creationTimestamp": now}
    if rtype.group == FLOWCONTROL:
        meta["generation"] = 1
    with contextlib.suppress(store.KeyExists):
        await s.create(key, orjson.dumps(metadata_first({**wanted, "metadata": meta, "status": status})))
        return
    current = await s.get(key)
    if current is None:
        return
    stored = orjson.loads(current.value)
    if not restore(stored) or stored.get("spec") == wanted["spec"]:
        return
    stored["spec"] = wanted["spec"]
    stored_meta = stored.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        if field in wanted["metadata"]:
            stored_meta[field] = {**(stored_meta.get(field) or {}), **wanted["metadata"][field]}
    if "generation" in stored_meta:
        stored_meta["generation"] = int(stored_meta["generation"]) + 1
    with contextlib.suppress(store.Conflict, store.NotFound):
        await s.update(key, orjson.dumps(stored), current.mod_revision)


async def ensure_local_apiservices(s: store.Store, registry: Registry) -> None:
    """A local APIService for each built-in group/version served; those of ``onstart``
    that no served version has any more removed."""
    rtype = registry.get(GROUP, "v1", "apiservices")
    if rtype is None:
        return
    served = sorted({(t.group, t.version) for t in registry.all() if t.custom is None})
    now = _now()
    names = set()
    for group, version in served:
        wanted = local_apiservice(group, version, "onstart")
        names.add(wanted["metadata"]["name"])
        await _ensure(s, rtype, wanted, local_status(now),
                      lambda stored: (stored.get("metadata") or {}).get("labels", {}).get(AUTOMANAGED) == "onstart")
    prefix = rtype.prefix()
    kvs, _, _ = await s.range(prefix, store.prefix_end(prefix))
    for kv in kvs:
        obj = orjson.loads(kv.value)
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(AUTOMANAGED) == "onstart" and meta.get("name") not in names:
            with contextlib.suppress(store.NotFound, store.Conflict):
                await s.delete(kv.key, kv.mod_revision)


def _restores(plural: str, mandatory: bool, stored: Obj) -> bool:
    return restores(plural, stored, mandatory)


async def ensure_flowcontrol_bootstrap(s: store.Store, registry: Registry) -> None:
    """API Priority and Fairness's mandatory and suggested configuration objects."""
    now = _now()
    for plural, wanted, mandatory in bootstrap_objects():
        rtype = registry.get(FLOWCONTROL, "v1", plural)
        if rtype is None:
            continue
        status = _dangling_false(wanted["spec"]["priorityLevelConfiguration"]["name"], now) \
            if plural == "flowschemas" else {}
        await _ensure(s, rtype, wanted, status, functools.partial(_restores, plural, mandatory))
