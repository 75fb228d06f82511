"""RBAC's privilege-escalation prevention, as kube-apiserver's RBAC storage applies it to every
write of a Role, ClusterRole, RoleBinding or ClusterRoleBinding (``pkg/registry/rbac/*/policybased``),
whatever the authorization mode asks of the request itself:

- a member of ``system:masters`` may write anything (upstream's ``EscalationAllowed``);
- a Role or ClusterRole may be created or updated by a user who already holds every permission
  its rules grant (``ConfirmNoEscalation``: the rules of the user's bindings, cluster-wide and,
  for a Role, in its namespace, must cover them, ``Covers``), or who may ``escalate`` that
  resource (in its namespace, by the name the URL gives: a create names none); setting an
  ``aggregationRule``, or changing a ClusterRole that has one, needs every permission
  (``*`` on ``*.*`` and on every path: "must have cluster-admin privileges to use the
  aggregationRule");
- a RoleBinding or ClusterRoleBinding may be written by a user who may ``bind`` the role it
  refers to (by its name, in the binding's namespace), or who holds every permission of that
  role; a role that does not exist is upstream's 404 of its registry's lookup;
- an update that changes only the owner references and finalizers (the garbage collector's,
  and the managedFields that record them) is not checked.

A refusal is upstream's 403: ``roles.rbac.authorization.k8s.io "x" is forbidden: user "alice"
(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:``
then each missing permission on a line of its own, broken down to one verb on one resource
and compacted back by resource (``CompactRules``), as ``{APIGroups:[""], Resources:["pods"],
Verbs:["get" "list"]}``, sorted; the bindings of the user that name a missing role are
appended as ``; resolution errors: [...]``.

The covering of rules (``breakdown``, ``covers``, ``uncovered``) is shared with the bootstrap
policy's reconciler (``rbacreconcile.py``), as upstream's reconciler uses the same ``Covers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..gostrings import quote as go_quote
from ..gostrings import quote_list
from .errors import ApiError
from .rbac import MASTERS, Authorizer, Authorizes, Request, User, aggregate

__all__ = ["FULL_AUTHORITY", "GROUP", "RoleLookup", "breakdown", "check_write", "compact", "compact_string", "covers",
           "escalation_message", "go_quote", "go_strings", "only_gc_fields", "uncovered", "url_covered"]

Obj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"
ROLE_TYPES = ("roles", "clusterroles")
BINDING_TYPES = ("rolebindings", "clusterrolebindings")

# what an aggregationRule needs (upstream's fullAuthority)
FULL_AUTHORITY: tuple[Obj, ...] = ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                   {"verbs": ["*"], "nonResourceURLs": ["*"]})

RoleLookup = Callable[[str, str, str], Awaitable[Obj | None]]  # (plural, namespace, name) -> the role


def breakdown(rule: Obj) -> list[Obj]:
    """``rule`` as rules of one verb on one resource of one group (and one name, if it names
    any), or one verb on one path, as upstream's ``BreakdownRule``. A rule without verbs, or
    without groups or resources, breaks down into nothing (it grants nothing).

    >>> breakdown({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "pods/log"]})
    [{'verbs': ['get'], 'apiGroups': [''], 'resources': ['pods']}, {'verbs': ['get'], 'apiGroups': [''], \
'resources': ['pods/log']}]
    """
    verbs, names = rule.get("verbs") or [], rule.get("resourceNames") or []
    out: list[Obj] = []
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in verbs:
                one: Obj = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
                out.extend([{**one, "resourceNames": [name]} for name in names] if names else [one])
    out.extend({"verbs": [verb], "nonResourceURLs": [url]} for url in rule.get("nonResourceURLs") or ()
               for verb in verbs)
    return out


def _resource_covered(owned: Sequence[str], resource: str) -> bool:
    if "*" in owned or resource in owned:
        return True
    _, slash, subresource = resource.partition("/")
    return bool(slash) and f"*/{subresource}" in owned


def url_covered(owner: str, url: str) -> bool:
    """Whether the path ``owner`` of a rule covers ``url`` (upstream's ``nonResourceURLCovers``):
    the same path, or one a trailing ``*`` (or several) makes a prefix of."""
    return owner == url or (owner.endswith("*") and url.startswith(owner.rstrip("*")))


def covers(owner: Obj, sub: Obj) -> bool:
    """Whether ``owner`` allows all that ``sub`` does (upstream's ``ruleCovers``): its verbs,
    groups, resources (``*``, ``*/<subresource>``), names (none owned: any) and paths
    (a trailing ``*`` a prefix)."""
    def has_all(field: str) -> bool:
        owned = owner.get(field) or []
        return "*" in owned or all(v in owned for v in sub.get(field) or ())

    owned_names, names = owner.get("resourceNames") or [], sub.get("resourceNames") or []
    if names:  # some objects: covered by a rule naming them all, or naming none
        names_covered = not owned_names or all(n in owned_names for n in names)
    else:  # every object: by a rule naming none only
        names_covered = not owned_names
    owned_urls = owner.get("nonResourceURLs") or []
    return (names_covered and has_all("verbs") and has_all("apiGroups")
            and all(_resource_covered(owner.get("resources") or [], r) for r in sub.get("resources") or ())
            and all(any(url_covered(o, u) for o in owned_urls) for u in sub.get("nonResourceURLs") or ()))


def uncovered(owner_rules: Iterable[Obj], rules: Iterable[Obj]) -> list[Obj]:
    """The broken-down parts of ``rules`` that no rule of ``owner_rules`` covers, in order
    (upstream's ``Covers``: each part is covered by one owner rule or by none)."""
    owned = [r for r in owner_rules if isinstance(r, dict)]
    return [sub for rule in rules if isinstance(rule, dict)
            for sub in breakdown(rule) if not any(covers(o, sub) for o in owned)]


def compact(rules: Iterable[Obj]) -> list[Obj]:
    """Upstream's ``CompactRules``: the rules of one group, one resource and at most one name
    (and nothing else) merged into one per (group, resource, name), their verbs joined in
    order; the others kept as they are, before them."""
    merged: dict[tuple[str, str, str | None], Obj] = {}
    out: list[Obj] = []
    for rule in rules:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        names = rule.get("resourceNames") or []
        if len(groups) == 1 and len(resources) == 1 and len(names) <= 1 and not rule.get("nonResourceURLs"):
            key = (groups[0], resources[0], names[0] if names else None)
            if key in merged:
                merged[key]["verbs"] = [*merged[key]["verbs"], *(rule.get("verbs") or ())]
            else:
                merged[key] = {**rule, "verbs": list(rule.get("verbs") or ())}
        else:
            out.append(rule)
    return out + list(merged.values())


def go_strings(values: Iterable[Any]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return quote_list([str(v) for v in values])


def compact_string(rule: Obj) -> str:
    """A rule as upstream's ``CompactString`` writes it in an escalation message:
    ``{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`` (the fields it has, in that order)."""
    parts = [f"{label}:{go_strings(rule[field])}" for label, field in (
        ("APIGroups", "apiGroups"), ("Resources", "resources"), ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"), ("Verbs", "verbs")) if rule.get(field)]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: User, missing: Iterable[Obj], errors: Sequence[str] = ()) -> str:
    """Upstream's ``ConfirmNoEscalation`` error: the missing rules compacted, written once each,
    sorted; the resolution errors of the user's bindings after them."""
    lines = sorted({compact_string(rule) for rule in compact(missing)})
    message = (f"user {go_quote(user.name)} (groups={go_strings(user.groups)}) is attempting to grant RBAC "
               "permissions not currently held:\n" + "\n".join(lines))
    if errors:
        message += f"; resolution errors: [{aggregate(list(errors))}]"
    return message


def only_gc_fields(obj: Obj, old: Obj | None) -> bool:
    """Whether an update changes nothing but the owner references and finalizers, which the
    garbage collector writes, and the managedFields that record them (upstream's
    ``IsOnlyMutatingGCFields``, since kubernetes#90534); the resourceVersion, a precondition,
    is not compared."""
    if old is None:
        return False
    kept = ("ownerReferences", "finalizers", "managedFields", "resourceVersion", "selfLink")

    def without(o: Obj) -> Obj:
        meta = o.get("metadata")
        meta = {k: v for k, v in meta.items() if k not in kept} if isinstance(meta, dict) else meta
        return {**o, "metadata": meta}

    return without(obj) == without(old)


def _forbidden(plural: str, name: str, message: str) -> ApiError:
    """upstream's ``NewForbidden`` of a write of the RBAC resource ``plural``."""
    what = f"{plural}.{GROUP}" + (f" {go_quote(name)}" if name else "")
    details: Obj = {"name": name, "group": GROUP, "kind": plural} if name else {"group": GROUP, "kind": plural}
    return ApiError(403, "Forbidden", f"{what} is forbidden: {message}", details)


def _plural_error(error: str) -> str:
    """A binding's unresolved role as upstream's registry lookup words it (``roles.rbac...``,
    ``clusterroles.rbac...``), where the authorizer's lister says ``role.rbac...``."""
    for kind in ("role", "clusterrole"):
        if error.startswith(f"{kind}.{GROUP} "):
            return f"{kind}s{error[len(kind):]}"
    return error


async def _confirm_no_escalation(resolver: Authorizer | None, user: User, namespace: str,
                                 rules: Iterable[Obj]) -> str | None:
    """Why ``user`` may not grant ``rules`` in ``namespace`` ("": cluster-wide), None if it holds
    them all (upstream's ``ConfirmNoEscalation``, over the RBAC bindings only)."""
    if resolver is None:
        owner: list[Obj] = []
        errors: list[str] = []
    else:
        held = await resolver.rules_for(user, namespace)
        owner, errors = held.resource_rules + held.non_resource_rules, held.errors
    missing = uncovered(owner, rules)
    if not missing:
        return None
    return escalation_message(user, missing, [_plural_error(e) for e in errors])


async def check_write(authorizer: Authorizes, resolver: Authorizer | None, user: User, plural: str,
                      namespace: str, url_name: str, obj: Obj, old: Obj | None, role_of: RoleLookup) -> None:
    """403 (or the missing role's 404) unless ``user`` may write ``obj`` of the RBAC resource
    ``plural`` over ``old`` (None: a create) without gaining permissions it does not hold.
    ``authorizer`` decides the ``escalate`` and ``bind`` verbs; ``resolver`` gives the rules the
    user holds (the RBAC authorizer's; None: none); ``url_name`` is the name the request's URL
    gives (none for a POST); ``role_of`` reads a binding's role."""
    if MASTERS in user.groups or (old is not None and only_gc_fields(obj, old)):
        return
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if plural in ROLE_TYPES:
        if await authorizer.allowed(user, Request("escalate", GROUP, plural, namespace=namespace, name=url_name)):
            return
        why = await _confirm_no_escalation(resolver, user, namespace, _rule_list(obj))
        if why is not None:
            raise _forbidden(plural, name, why)
        if plural == "clusterroles" and (_aggregates(obj) or _aggregates(old)) and \
                await _confirm_no_escalation(resolver, user, "", FULL_AUTHORITY) is not None:
            raise _forbidden(plural, name, "must have cluster-admin privileges to use the aggregationRule")
        return
    ref = obj.get("roleRef")
    ref = ref if isinstance(ref, dict) else {}
    kind, role = ref.get("kind"), ref.get("name")
    if kind not in ("Role", "ClusterRole") or not isinstance(role, str):
        # no role to resolve: validation refuses it (422) where upstream's lookup fails with
        # a 500 (``unsupported role reference kind``), which this server keeps for its own faults
        return
    role_plural = "roles" if kind == "Role" else "clusterroles"
    group = ref.get("apiGroup")
    group = group if isinstance(group, str) else ""
    if await authorizer.allowed(user, Request("bind", group, role_plural, namespace=namespace, name=role)):
        return
    if kind == "Role" and not namespace:  # (a ClusterRoleBinding's Role: the namespaced lookup's 400)
        raise ApiError.bad_request("Namespace parameter required.")
    found = await role_of(role_plural, namespace if kind == "Role" else "", role)
    if found is None:
        raise ApiError(404, "NotFound", f"{role_plural}.{GROUP} {go_quote(role)} not found",
                       {"name": role, "group": GROUP, "kind": role_plural})
    why = await _confirm_no_escalation(resolver, user, namespace, _rule_list(found))
    if why is not None:
        raise _forbidden(plural, name, why)


def _rule_list(role: Obj) -> list[Obj]:
    rules = role.get("rules")
    return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []


def _aggregates(role: Obj | None) -> bool:
    """Whether a ClusterRole has an aggregationRule with a selector (upstream's ``hasAggregationRule``)."""
    rule = (role or {}).get("aggregationRule")
    return isinstance(rule, dict) and bool(rule.get("clusterRoleSelectors"))
