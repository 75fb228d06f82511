"""The self-reviews: ``SelfSubjectAccessReview`` (may I?), ``SelfSubjectRulesReview``
(what may I, in a namespace?) and ``SelfSubjectReview`` (who am I?). They are
answered, never stored, as upstream.

A SelfSubjectAccessReview asks the server's authorizer about the requesting user:
under ``--authorization-mode RBAC`` the RBAC rules (``api/rbac.py``), under
``AlwaysAllow`` every question is allowed. A SelfSubjectReview echoes the user the
token authenticates.
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .rbac import ANONYMOUS, Authorizer, Request, User

__all__ = ["REVIEWS", "review"]

REVIEWS = frozenset({"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"})


async def review(plural: str, body: dict[str, Any], user: User | None, authorizer: Authorizer | None) -> dict[str, Any]:
    """The review ``body`` answered for ``user`` (None: no authentication configured)."""
    who = user or ANONYMOUS
    out = {**body, "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None}}
    if plural == "selfsubjectreviews":
        out["status"] = {"userInfo": {"username": who.name, "groups": list(who.groups)}}
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
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if not isinstance(resource, dict) and not isinstance(non_resource, dict):
        raise ApiError(422, "Invalid", 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec: Invalid '
                       "value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                       {"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview"})
    if isinstance(resource, dict):
        request = Request(str(resource.get("verb", "")), str(resource.get("group", "")),
                          str(resource.get("resource", "")), str(resource.get("subresource", "")),
                          str(resource.get("namespace", "")), str(resource.get("name", "")))
    else:
        assert isinstance(non_resource, dict)
        request = Request(str(non_resource.get("verb", "")), path=str(non_resource.get("path", "")))
    allowed = authorizer is None or user is None or await authorizer.allowed(user, request)
    out["status"] = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC rule allows it"}
    return out
