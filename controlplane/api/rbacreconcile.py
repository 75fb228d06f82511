"""The bootstrap RBAC policy written at start, as kube-apiserver's ``rbac/bootstrap-roles``
post-start hook reconciles it: at every start, whatever the authorization mode (the roles
exist to be bound).

For each object of the policy (``POLICY``: ``rbacpolicy.py``, ``controllerpolicy.py``,
``namespacepolicy.py``, in upstream's order):

- a missing one is created; an aggregated role with the rules the aggregation controller
  (``controllers/clusterroles.py``) would gather, so that it has nothing to write at once;
- one whose ``rbac.authorization.kubernetes.io/autoupdate`` annotation is ``"false"`` is
  left as it is, as upstream's reconciler leaves a protected object;
- any other is reconciled: the expected labels and annotations it lacks are added (its
  own values kept); a role gets every expected rule none of its rules covers, broken down
  to one verb on one resource (and name) or path as upstream's ``BreakdownRule`` makes them,
  and the aggregation selectors it lacks; a binding gets the subjects it lacks, and is made
  anew when it refers to another role (a roleRef cannot be changed).

Nothing is taken away: rules and subjects an administrator added stay. The objects are
written straight to the store before the server serves; several servers over one store
reconcile the same objects, and a write another one made first (409) is left to it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from controlplane.registry.types import Registry, ResourceType

from .componentpolicy import COMPONENT_ROLE_BINDINGS, COMPONENT_ROLES
from .controllerpolicy import CONTROLLER_ROLE_BINDINGS, CONTROLLER_ROLES
from .namespacepolicy import NAMESPACE_ROLE_BINDINGS, NAMESPACE_ROLES
from .rbacescalation import breakdown, covers
from .rbacpolicy import ADDON_ROLES, AUTOUPDATE, CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, aggregated_rules
from .stored import metadata_first
from .uids import new_uid

__all__ = ["POLICY", "breakdown", "covers", "ensure_rbac_policy", "missing_rules", "reconciled_binding",
           "reconciled_role"]

Obj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"

POLICY: tuple[tuple[str, Obj], ...] = (
    *(("clusterroles", r) for r in (*CLUSTER_ROLES, *CONTROLLER_ROLES, *ADDON_ROLES, *COMPONENT_ROLES)),
    *(("clusterrolebindings", b) for b in (*CLUSTER_ROLE_BINDINGS, *CONTROLLER_ROLE_BINDINGS,
                                           *COMPONENT_ROLE_BINDINGS)),
    *(("roles", r) for r in NAMESPACE_ROLES),
    *(("rolebindings", b) for b in NAMESPACE_ROLE_BINDINGS),
)


def missing_rules(existing: Iterable[Obj], expected: Iterable[Obj]) -> list[Obj]:
    """The broken-down parts of ``expected`` that no rule of ``existing`` covers (upstream's
    ``Covers``)."""
    have = [r for r in existing if isinstance(r, dict)]
    return [sub for r in expected if r not in have  # (a rule kept as it was covers itself: the usual case)
            for sub in breakdown(r) if not any(covers(o, sub) for o in have)]


def _protected(stored: Obj) -> bool:
    return ((stored.get("metadata") or {}).get("annotations") or {}).get(AUTOUPDATE) == "false"


def _merged_metadata(stored: Obj, expected: Obj) -> Obj:
    """``stored``'s metadata with the expected labels and annotations it lacks; its own values kept."""
    meta = dict(stored.get("metadata") or {})
    for field in ("labels", "annotations"):
        wanted = expected["metadata"].get(field)
        if wanted:
            meta[field] = {**wanted, **(meta.get(field) or {})}
    return meta


def reconciled_role(stored: Obj, expected: Obj) -> Obj | None:
    """``stored`` (a ClusterRole or Role) with what it lacks of ``expected``; None when it lacks
    nothing or is protected."""
    if _protected(stored):
        return None
    out = {**stored, "metadata": _merged_metadata(stored, expected)}
    missing = missing_rules(stored.get("rules") or [], expected.get("rules") or [])
    if missing:
        out["rules"] = [*(stored.get("rules") or []), *missing]
    wanted = (expected.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    selectors = (stored.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    lacking = [s for s in wanted if s not in selectors]
    if lacking:
        out["aggregationRule"] = {**(stored.get("aggregationRule") or {}),
                                  "clusterRoleSelectors": [*selectors, *lacking]}
    return None if out == stored else out


def reconciled_binding(stored: Obj, expected: Obj) -> Obj | None:
    """``stored`` (a ClusterRoleBinding or RoleBinding) with the subjects and metadata it lacks
    of ``expected``, and ``expected``'s roleRef; None when it lacks nothing or is protected."""
    if _protected(stored):
        return None
    out = {**stored, "metadata": _merged_metadata(stored, expected), "roleRef": expected["roleRef"]}
    subjects = stored.get("subjects") or []
    lacking = [s for s in expected.get("subjects") or () if s not in subjects]
    if lacking:
        out["subjects"] = [*subjects, *lacking]
    return None if out == stored else out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_aggregated_rules(policy: Sequence[tuple[str, Obj]]) -> list[tuple[str, Obj]]:
    """The policy, its aggregated roles holding the rules they aggregate (to the fixed point of
    the chains: view into edit into admin)."""
    out = [(plural, dict(obj)) for plural, obj in policy]
    roles = [obj for plural, obj in out if plural == "clusterroles"]
    aggregated = [role for role in roles if role.get("aggregationRule")]
    for _ in aggregated:
        for role in aggregated:
            role["rules"] = aggregated_rules(role, roles)
    return out


async def _reconcile(s: store.Store, key: bytes, current: store.KeyValue | None, expected: Obj,
                     created: Obj) -> None:
    """One object of the policy: ``created`` if it is missing, else ``expected`` reconciled into it."""
    with contextlib.suppress(store.KeyExists, store.Conflict, store.NotFound):
        if current is None:
            await s.create(key, orjson.dumps(created))
            return
        stored = orjson.loads(current.value)
        if expected["kind"].endswith("Binding"):
            update = reconciled_binding(stored, expected)
            if update is not None and update["roleRef"] != stored.get("roleRef"):
                await s.delete(key, current.mod_revision)  # a roleRef is immutable: made anew
                meta = {**update["metadata"], "uid": new_uid(), "creationTimestamp": _now()}
                await s.create(key, orjson.dumps(metadata_first({**update, "metadata": meta})))
                return
        else:
            update = reconciled_role(stored, expected)
        if update is not None:
            await s.update(key, orjson.dumps(update), current.mod_revision)


async def ensure_rbac_policy(s: store.Store, registry: Registry) -> None:
    """Every object of ``POLICY`` created or reconciled, the writes made together (one group
    commit or few)."""
    types: dict[str, ResourceType] = {}
    for plural in ("clusterroles", "clusterrolebindings", "roles", "rolebindings"):
        rtype = registry.get(GROUP, "v1", plural)
        assert rtype is not None
        types[plural] = rtype
    keys = [types[plural].key(obj["metadata"].get("namespace"), obj["metadata"]["name"]) for plural, obj in POLICY]
    # ClusterRoles and their bindings in one read each (most are the policy's); Roles and
    # RoleBindings of the policy's namespaces only, a cluster's being maybe many
    prefixes = {rtype.prefix() for rtype in types.values() if not rtype.namespaced}
    prefixes |= {types[plural].prefix(obj["metadata"]["namespace"]) for plural, obj in POLICY
                 if types[plural].namespaced}
    stored: dict[bytes, store.KeyValue] = {}
    for prefix in sorted(prefixes):
        kvs, _, _ = await s.range(prefix, store.prefix_end(prefix))
        stored.update((kv.key, kv) for kv in kvs)
    now = _now()
    writes = []
    for key, (_, expected), (_, prefilled) in zip(keys, POLICY, _with_aggregated_rules(POLICY), strict=True):
        meta = {**expected["metadata"], "uid": new_uid(), "creationTimestamp": now}
        writes.append(_reconcile(s, key, stored.get(key), expected, metadata_first({**prefilled, "metadata": meta})))
    await asyncio.gather(*writes)
