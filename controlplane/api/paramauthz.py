"""Who may point an admission policy at its parameters: upstream's ``authz.go`` of the
ValidatingAdmissionPolicy and MutatingAdmissionPolicy strategies and of their bindings'
(``pkg/registry/admissionregistration/*/authz.go``), run by their ``Validate`` once the object
is well-formed, so a refusal is a 422 whose cause is ``spec.paramKind`` or ``spec.paramRef``
``Forbidden``:

- a policy whose ``paramKind`` is new (a create, or an update that changes it) needs ``get``
  on every object of that kind: the resource its group, version and kind resolve to (``*``
  when they do not), name and namespace ``*``;
- a binding whose ``paramRef`` or ``policyName`` is new needs ``get`` of the named object
  (``list`` for a selector) of the bound policy's ``paramKind``, in ``paramRef.namespace``
  when one is set; on every group and resource when the policy, its group and version or its
  kind cannot be found, each said in the refusal.

Members of ``system:masters`` skip both (upstream's ``EscalationAllowed``); so does everyone
without an authorizer (AlwaysAllow) or without a user (no authentication). The user is named
as Go's ``%v`` prints upstream's ``*user.DefaultInfo``: ``&{alice  [system:authenticated] map[]}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .policyparams import _group_version
from .rbac import MASTERS, Authorizes, Request, User

__all__ = ["go_user", "param_kind_causes", "param_ref_causes"]

Obj = dict[str, Any]
Resolve = Callable[[str, str, str], str | None]  # (group, version, kind) -> the resource, None if not served
PolicyGetter = Callable[[str], Awaitable[Obj | None]]  # a policy by name, None if there is none


def go_user(user: User) -> str:
    """``fmt.Sprintf("%v", user)`` of upstream's ``*user.DefaultInfo``: name, uid, groups, extra
    (keys sorted, as Go prints a map)."""
    extra = " ".join(f"{key}:[{' '.join(values)}]" for key, values in sorted(user.extra))
    return f"&{{{user.name} {user.uid} [{' '.join(user.groups)}] map[{extra}]}}"


def _spec(obj: Obj | None) -> Obj:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _skipped(authorizer: Authorizes | None, user: User | None) -> bool:
    return authorizer is None or user is None or MASTERS in user.groups


async def param_kind_causes(authorizer: Authorizes | None, user: User | None, resolve: Resolve,
                            policy: Obj, old: Obj | None) -> list[dict[str, str]]:
    """The ``spec.paramKind`` cause of a policy's create or update (``old``) the user may not
    make; empty when they may."""
    kind = _spec(policy).get("paramKind")
    if not isinstance(kind, dict) or _skipped(authorizer, user):
        return []
    if old is not None and _spec(old).get("paramKind") == kind:
        return []  # identical paramKind to the old object
    assert authorizer is not None and user is not None
    api_version, kind_name = str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")
    group, resource = "*", "*"
    parsed = _group_version(api_version)
    if parsed is not None:
        group = parsed[0]
        resource = resolve(parsed[0], parsed[1], kind_name) or "*"
    if await authorizer.allowed(user, Request("get", group, resource, namespace="*", name="*")):
        return []
    return [{"reason": "FieldValueForbidden", "field": "spec.paramKind",
             "message": f'Forbidden: user {go_user(user)} must have "get" permission on all objects of the '
                        f"referenced paramKind (kind={kind_name}, apiVersion={api_version})"}]


async def param_ref_causes(authorizer: Authorizes | None, user: User | None, resolve: Resolve,
                           policy_of: PolicyGetter, binding: Obj, old: Obj | None) -> list[dict[str, str]]:
    """The ``spec.paramRef`` cause of a binding's create or update (``old``) the user may not
    make; empty when they may."""
    spec = _spec(binding)
    ref = spec.get("paramRef")
    if not isinstance(ref, dict) or _skipped(authorizer, user):
        return []
    if old is not None and _spec(old).get("paramRef") == ref and _spec(old).get("policyName") == spec.get("policyName"):
        return []  # identical paramRef and policy to the old object
    assert authorizer is not None and user is not None
    policy_name = str(spec.get("policyName") or "")
    policy = await policy_of(policy_name)
    kind = _spec(policy).get("paramKind") if policy is not None else None
    group, resource, unknown = "*", "*", ""
    if isinstance(kind, dict):
        printed = f"&{{{kind.get('apiVersion') or ''} {kind.get('kind') or ''}}}"  # Go's %v of *ParamKind
        parsed = _group_version(str(kind.get("apiVersion") or ""))
        if parsed is None:
            unknown = f"unable to parse paramKind {printed}"
        else:
            group = parsed[0]
            resolved = resolve(parsed[0], parsed[1], str(kind.get("kind") or ""))
            if resolved is None:
                unknown = f"unable to resolve paramKind {printed}"
            else:
                resource = resolved
    name, namespace = str(ref.get("name") or ""), str(ref.get("namespace") or "")
    verb = "get" if name else "list"
    if await authorizer.allowed(user, Request(verb, group, resource, namespace=namespace, name=name)):
        return []
    if policy is None:
        unknown = f"unable to get policy {policy_name}"
    if unknown:
        why = (f"{unknown} to determine minimum required permissions and user {go_user(user)} does not have "
               f'"{verb}" permission for all groups, versions and resources')
    else:
        why = f'user {go_user(user)} does not have "{verb}" permission on the object referenced by paramRef'
    return [{"reason": "FieldValueForbidden", "field": "spec.paramRef", "message": f"Forbidden: {why}"}]
