"""The reviews, answered and never stored, as upstream:

- the self-reviews: ``SelfSubjectAccessReview`` (may I?), ``SelfSubjectRulesReview``
  (what may I, in a namespace?) and ``SelfSubjectReview`` (who am I?);
- ``SubjectAccessReview`` and ``LocalSubjectAccessReview`` (may this user and these
  groups?), which webhook authorizers and proxies such as kube-rbac-proxy ask;
- ``TokenReview`` (whose is this token?), which webhook authenticators ask.

An access review asks the server's authorizer: under ``--authorization-mode RBAC``
the RBAC rules (``api/rbac.py``), under ``AlwaysAllow`` every question is allowed.
A SelfSubjectReview echoes the user the token authenticates; a TokenReview runs the
server's own token authentication (``authenticate``: static tokens, service account
tokens) on the token it is given. Both show the user as upstream's ``UserInfo``: name,
uid and extras when it has them (a service account's uid, its token's pod, node and
credential id), groups.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from .errors import ApiError
from .rbac import ANONYMOUS, Authorizes, Request, User
from .tokenrequest import AUDIENCE

__all__ = ["REVIEWS", "review"]

REVIEWS = frozenset({"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews",
                     "subjectaccessreviews", "localsubjectaccessreviews", "tokenreviews"})

# a token -> the user it authenticates and the audiences it is good for (None: any,
# a static token), or None
Authenticate = Callable[[str], Awaitable[tuple[User, list[str] | None] | None]]
SERVER_AUDIENCES = (AUDIENCE,)  # kube-apiserver's --api-audiences default: its service account issuer


async def review(plural: str, body: dict[str, Any], user: User | None, authorizer: Authorizes | None,
                 namespace: str | None = None, authenticate: Authenticate | None = None,
                 audiences: tuple[str, ...] = SERVER_AUDIENCES) -> dict[str, Any]:
    """The review ``body`` answered for ``user`` (None: no authentication configured), in
    ``namespace`` for a LocalSubjectAccessReview; a TokenReview's tokens by ``authenticate``,
    for the server's ``audiences`` unless it names its own."""
    who = user or ANONYMOUS
    out = {**body, "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None}}
    if namespace is not None:
        out["metadata"]["namespace"] = namespace
    if plural == "tokenreviews":
        out["status"] = await _token_status(body.get("spec") or {}, authenticate, audiences)
        return out
    if plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
        spec = body.get("spec") or {}
        subject = _subject(plural, spec, namespace)
        out["status"] = await _access_status(spec, subject, authorizer, kind=_KINDS[plural])
        return out
    if plural == "selfsubjectreviews":
        out["status"] = {"userInfo": who.info()}
        return out
    spec = body.get("spec") or {}
    if plural == "selfsubjectrulesreviews":  # kubectl auth can-i --list
        namespace = str(spec.get("namespace") or "")
        if authorizer is None or user is None:  # AlwaysAllow
            out["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                             "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
            return out
        resource_rules, non_resource_rules = await authorizer.rules_for(user, namespace)
        out["status"] = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                         "incomplete": False}
        return out
    out["status"] = await _access_status(spec, user, authorizer, kind="SelfSubjectAccessReview")
    return out


_KINDS = {"subjectaccessreviews": "SubjectAccessReview", "localsubjectaccessreviews": "LocalSubjectAccessReview"}


def _invalid(kind: str, causes: list[dict[str, str]]) -> ApiError:
    listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(422, "Invalid", f'{kind}.authorization.k8s.io "" is invalid: '
                    + (listed if len(causes) == 1 else f"[{listed}]"),
                    {"group": "authorization.k8s.io", "kind": kind, "causes": causes})


def _go_value(value: Any) -> str:
    """A struct as a field error shows it (JSON here, where Go prints its own syntax)."""
    return orjson.dumps(value).decode()


def _subject(plural: str, spec: dict[str, Any], namespace: str | None) -> User:
    """The user a (Local)SubjectAccessReview asks about, its spec checked as upstream's
    ValidateSubjectAccessReviewSpec and ValidateLocalSubjectAccessReview."""
    causes: list[dict[str, str]] = []
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if plural == "localsubjectaccessreviews":
        if isinstance(non_resource, dict):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.nonResourceAttributes",
                           "message": f"Invalid value: {_go_value(non_resource)}: disallowed on this kind of request"})
        if isinstance(resource, dict) and str(resource.get("namespace") or "") != namespace:
            causes.append({"reason": "FieldValueInvalid", "field": "spec.resourceAttributes.namespace",
                           "message": f'Invalid value: "{resource.get("namespace") or ""}": must match '
                                      "metadata.namespace"})
    groups = spec.get("groups") or []
    if not spec.get("user") and not groups:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.user",
                       "message": 'Invalid value: "": at least one of user or group must be specified'})
    if causes:
        raise _invalid(_KINDS[plural], causes)
    return User(str(spec.get("user") or ""), tuple(str(g) for g in groups))


def _selector_causes(resource: dict[str, Any]) -> list[dict[str, str]]:
    """Upstream's validateFieldSelectorAttributes and validateLabelSelectorAttributes: a
    selector says a raw selector or requirements, not both; each requirement has a key
    (a label name for labels) and values as its operator wants them, unknown operators
    allowed (a newer client's)."""
    causes: list[dict[str, str]] = []
    for name in ("fieldSelector", "labelSelector"):
        selector = resource.get(name)
        if not isinstance(selector, dict):
            continue
        at = f"spec.resourceAttributes.{name}"
        raw, requirements = selector.get("rawSelector") or "", selector.get("requirements") or []
        if raw and requirements:
            causes.append({"reason": "FieldValueInvalid", "field": f"{at}.rawSelector",
                           "message": f"Invalid value: {_go_value(raw)}: may not specified at the same time as "
                                      "requirements"})
        if not raw and not requirements:
            causes.append({"reason": "FieldValueRequired", "field": f"{at}.requirements",
                           "message": f"Required value: when {at} is specified, requirements or rawSelector is "
                                      "required"})
        for i, requirement in enumerate(requirements if isinstance(requirements, list) else ()):
            if isinstance(requirement, dict):
                causes += _requirement_causes(requirement, f"{at}.requirements[{i}]", labels=name == "labelSelector")
    return causes


def _requirement_causes(requirement: dict[str, Any], at: str, labels: bool) -> list[dict[str, str]]:
    """ValidateFieldSelectorRequirement, or ValidateLabelSelectorRequirement (its key a label
    name, its values label values), with AllowUnknownOperatorInRequirement."""
    from ..registry.podvalidation import label_key_problems, label_value_problems

    causes: list[dict[str, str]] = []
    key, operator, values = requirement.get("key") or "", requirement.get("operator"), requirement.get("values") or []
    if not labels and not key:
        causes.append({"reason": "FieldValueRequired", "field": f"{at}.key", "message": "Required value: must be "
                       "specified"})
    if operator in ("In", "NotIn") and not values:
        causes.append({"reason": "FieldValueRequired", "field": f"{at}.values",
                       "message": "Required value: must be specified when `operator` is 'In' or 'NotIn'"})
    elif operator in ("Exists", "DoesNotExist") and values:
        causes.append({"reason": "FieldValueForbidden", "field": f"{at}.values",
                       "message": "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"})
    if labels:
        causes += [{"reason": "FieldValueInvalid", "field": f"{at}.key",
                    "message": f"Invalid value: {_go_value(key)}: {p}"} for p in label_key_problems(str(key))]
        for j, value in enumerate(values if isinstance(values, list) else ()):
            causes += [{"reason": "FieldValueInvalid", "field": f"{at}.values[{j}]",
                        "message": f"Invalid value: {_go_value(value)}: {p}"} for p in label_value_problems(str(value))]
    return causes


async def _access_status(spec: dict[str, Any], user: User | None, authorizer: Authorizes | None,
                         kind: str) -> dict[str, Any]:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        which = "nonResourceAttributes" if isinstance(resource, dict) else "resourceAttributes"
        message = f"Invalid value: {_go_value(non_resource)}: cannot be specified in combination with " \
            "resourceAttributes" if isinstance(resource, dict) else \
            'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified'
        raise _invalid(kind, [{"reason": "FieldValueInvalid", "field": f"spec.{which}", "message": message}])
    if isinstance(resource, dict):
        causes = _selector_causes(resource)
        if causes:
            raise _invalid(kind, causes)
        request = Request(str(resource.get("verb", "")), str(resource.get("group", "")),
                          str(resource.get("resource", "")), str(resource.get("subresource", "")),
                          str(resource.get("namespace", "")), str(resource.get("name", "")))
    else:
        assert isinstance(non_resource, dict)
        request = Request(str(non_resource.get("verb", "")), path=str(non_resource.get("path", "")))
    allowed = authorizer is None or user is None or await authorizer.allowed(user, request)
    # a denial has no reason, as upstream's RBAC authorizer gives none (NoOpinion, ""): `auth can-i` prints "no"
    return {"allowed": allowed}


async def _token_status(spec: dict[str, Any], authenticate: Authenticate | None,
                        server_audiences: tuple[str, ...]) -> dict[str, Any]:
    """Upstream's TokenReview: the user, and the audiences both the token and the review
    accept (the review's, or else the server's); a static token is good for any of the
    server's audiences."""
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise ApiError.bad_request("token is required for TokenReview in authentication")
    asked = [str(a) for a in spec.get("audiences") or ()] or list(server_audiences)
    found = await authenticate(token) if authenticate is not None else None
    if found is None:
        return {"user": {}, "error": "invalid bearer token"}
    user, token_audiences = found
    good = [a for a in asked if a in (token_audiences if token_audiences is not None else server_audiences)]
    if not good:
        return {"user": {}, "error": "token audiences do not match the review's"}
    return {"authenticated": True, "user": user.info(), "audiences": good}
