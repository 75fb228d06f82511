"""What kube-apiserver writes of its own configuration at start, beside the namespaces and
PriorityClasses (``KubeApi.bootstrap``):

- API Priority and Fairness's bootstrap configuration (its ``priority-and-fairness-config-
  producer`` hook, ``registry/flowcontrol.py``): the mandatory objects always as bootstrap
  says, the suggested ones created when missing and their spec set back while their
  ``apf.kubernetes.io/autoupdate-spec`` annotation is ``"true"``.

Written straight to the store, as the other bootstrap objects are: before the server
serves, and again at each start (several servers over one store write the same).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from controlplane.registry.flowcontrol import AUTOUPDATE, bootstrap_objects
from controlplane.registry.types import Registry, ResourceType

from .stored import metadata_first
from .uids import new_uid

__all__ = ["ensure_flowcontrol_bootstrap"]

Obj = dict[str, Any]
FLOWCONTROL = "flowcontrol.apiserver.k8s.io"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def _autoupdated(stored: Obj) -> bool:
    return ((stored.get("metadata") or {}).get("annotations") or {}).get(AUTOUPDATE) == "true"


async def ensure_flowcontrol_bootstrap(s: store.Store, registry: Registry) -> None:
    """API Priority and Fairness's mandatory and suggested configuration objects."""
    now = _now()
    for plural, wanted, mandatory in bootstrap_objects():
        rtype = registry.get(FLOWCONTROL, "v1", plural)
        if rtype is None:
            continue
        status = _dangling_false(wanted["spec"]["priorityLevelConfiguration"]["name"], now) \
            if plural == "flowschemas" else {}
        await _ensure(s, rtype, wanted, status, (lambda _stored: True) if mandatory else _autoupdated)
