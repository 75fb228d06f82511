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
from datetime import UTC, datetime
from typing import Any

import orjson

from .errors import ApiError
from .rbac import ANONYMOUS, Authorizes, Request, User, aggregate
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
    for the server's ``audiences`` unless it names its own.

    A missing or null ``spec`` is an empty one, as upstream decodes it into its Go struct."""
    who = user or ANONYMOUS
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    type_meta = {"kind": body["kind"], "apiVersion": body["apiVersion"]}
    if plural == "selfsubjectreviews":  # a new object: the request's metadata is not echoed
        return {**type_meta, "metadata": {"creationTimestamp": _now()}, "status": {"userInfo": who.info()}}
    if plural == "selfsubjectrulesreviews":  # kubectl auth can-i --list; a new object as well
        asked = spec.get("namespace")
        if not asked:
            raise ApiError.bad_request("no namespace on request")
        if authorizer is None or user is None:  # AlwaysAllow
            status: dict[str, Any] = {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
        else:
            rules = await authorizer.rules_for(user, str(asked))
            status = {"resourceRules": rules.resource_rules, "nonResourceRules": rules.non_resource_rules,
                      "incomplete": rules.incomplete}
            if rules.errors:  # (kubectl warns of them when the list is incomplete)
                status["evaluationError"] = aggregate(rules.errors)
        return {**type_meta, "metadata": {}, "spec": {}, "status": status}
    if namespace is not None and meta.get("namespace") not in (None, "", namespace):
        raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent on "
                                   "the request")
    # the request's metadata echoed, a zero creationTimestamp left out (omitzero since 1.34)
    out = {**body, "metadata": {k: v for k, v in meta.items() if k != "creationTimestamp" or v is not None}}
    if namespace is not None:
        out["metadata"]["namespace"] = namespace
    else:  # a cluster-scoped object's namespace is cleared, as the create handler clears it
        out["metadata"].pop("namespace", None)
    if plural == "tokenreviews":
        out["status"] = await _token_status(spec, authenticate, audiences)
        return out
    kind = _KINDS[plural]
    causes = _spec_causes(spec, self_review=plural == "selfsubjectaccessreviews")
    causes += _meta_causes(meta, local=plural == "localsubjectaccessreviews")
    if plural == "localsubjectaccessreviews":
        causes += _local_causes(spec, namespace or "")
    if causes:
        raise _invalid(kind, causes)
    subject = user if plural == "selfsubjectaccessreviews" else \
        User(str(spec.get("user") or ""), tuple(str(g) for g in spec.get("groups") or ()))
    out["status"] = await _access_status(spec, subject, authorizer)
    return out


_KINDS = {"subjectaccessreviews": "SubjectAccessReview", "localsubjectaccessreviews": "LocalSubjectAccessReview",
          "selfsubjectaccessreviews": "SelfSubjectAccessReview"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _invalid(kind: str, causes: list[dict[str, str]]) -> ApiError:
    listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(422, "Invalid", f'{kind}.authorization.k8s.io "" is invalid: '
                    + (listed if len(causes) == 1 else f"[{listed}]"),
                    {"group": "authorization.k8s.io", "kind": kind, "causes": causes})


def _go_string(value: Any) -> str:
    """A Go string as ``%#v`` prints it (quoted; JSON's quoting, near enough)."""
    return orjson.dumps(value if isinstance(value, str) else "").decode()


def _go_value(value: Any) -> str:
    """A value as a field error shows it (JSON here, where Go prints its own syntax)."""
    return orjson.dumps(value).decode()


def _go_non_resource(value: dict[str, Any]) -> str:
    """A NonResourceAttributes as a field error shows it: Go's ``%#v`` of the internal struct."""
    return (f"authorization.NonResourceAttributes{{Path:{_go_string(value.get('path'))}, "
            f"Verb:{_go_string(value.get('verb'))}}}")


def _spec_causes(spec: dict[str, Any], self_review: bool) -> list[dict[str, str]]:
    """Upstream's ValidateSubjectAccessReviewSpec (ValidateSelfSubjectAccessReviewSpec: no
    user to check), every error at once and in its order: the attributes, the user, the
    selectors. An object's presence is what counts (``{}`` is a request for nothing)."""
    causes: list[dict[str, str]] = []
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) and isinstance(non_resource, dict):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.nonResourceAttributes",
                       "message": f"Invalid value: {_go_non_resource(non_resource)}: cannot be specified in "
                                  "combination with resourceAttributes"})
    if not isinstance(resource, dict) and not isinstance(non_resource, dict):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
                       "message": 'Invalid value: "null": exactly one of nonResourceAttributes or '
                                  "resourceAttributes must be specified"})
    if not self_review and not spec.get("user") and not spec.get("groups"):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.user",
                       "message": 'Invalid value: "": at least one of user or group must be specified'})
    if isinstance(resource, dict):
        causes += _selector_causes(resource)
    return causes


def _local_causes(spec: dict[str, Any], namespace: str) -> list[dict[str, str]]:
    """The rest of upstream's ValidateLocalSubjectAccessReview: the resource's namespace is the
    review's, and no non-resource request."""
    causes: list[dict[str, str]] = []
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) and str(resource.get("namespace") or "") != namespace:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.resourceAttributes.namespace",
                       "message": f"Invalid value: {_go_string(resource.get('namespace'))}: must match "
                                  "metadata.namespace"})
    if isinstance(non_resource, dict):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.nonResourceAttributes",
                       "message": f"Invalid value: {_go_non_resource(non_resource)}: disallowed on this kind of "
                                  "request"})
    return causes


# ObjectMeta's fields in the Go struct's order, and how ``%#v`` shows each when it is empty
_META_FIELDS = (("name", "Name", '""'), ("generateName", "GenerateName", '""'), ("namespace", "Namespace", '""'),
                ("selfLink", "SelfLink", '""'), ("uid", "UID", '""'), ("resourceVersion", "ResourceVersion", '""'),
                ("generation", "Generation", "0"),
                ("creationTimestamp", "CreationTimestamp", "time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)"),
                ("deletionTimestamp", "DeletionTimestamp", "<nil>"),
                ("deletionGracePeriodSeconds", "DeletionGracePeriodSeconds", "(*int64)(nil)"),
                ("labels", "Labels", "map[string]string(nil)"),
                ("annotations", "Annotations", "map[string]string(nil)"),
                ("ownerReferences", "OwnerReferences", "[]v1.OwnerReference(nil)"),
                ("finalizers", "Finalizers", "[]string(nil)"),
                ("managedFields", "ManagedFields", "[]v1.ManagedFieldsEntry(nil)"))


def _meta_causes(meta: dict[str, Any], local: bool) -> list[dict[str, str]]:
    """Upstream's check that a review's metadata is empty (but for its managedFields, and a
    local review's namespace), the metadata shown as Go's ``%#v`` of the ObjectMeta shows it
    (the times and the lists of structs approximated)."""
    # (a cluster-scoped review's namespace was cleared, a local one's is the URL's)
    if not any(meta.get(k) not in (None, "", 0, {}, []) for k, _, _ in _META_FIELDS
               if k not in ("managedFields", "namespace")):
        return []
    shown = ", ".join(f"{go}:{_go_meta_value(key, meta.get(key), empty)}" for key, go, empty in _META_FIELDS)
    return [{"reason": "FieldValueInvalid", "field": "metadata",
             "message": f"Invalid value: v1.ObjectMeta{{{shown}}}: must be empty"
                        + (" except for namespace" if local else "")}]


def _go_meta_value(key: str, value: Any, empty: str) -> str:
    if value is None or (key not in ("labels", "annotations", "ownerReferences", "finalizers", "managedFields")
                         and value in ("", 0)):
        return empty
    if key == "generation":
        return str(value)
    if key in ("creationTimestamp", "deletionTimestamp"):
        return _go_time(value)
    if key == "deletionGracePeriodSeconds":
        return "(*int64)(0xc000000000)"  # a pointer: Go prints its address
    if key in ("labels", "annotations"):
        items = ", ".join(f"{_go_string(k)}:{_go_string(v)}" for k, v in sorted(value.items())) \
            if isinstance(value, dict) else ""
        return f"map[string]string{{{items}}}"
    if key == "finalizers":
        return "[]string{" + ", ".join(_go_string(f) for f in value if isinstance(value, list)) + "}"
    if key == "ownerReferences":
        refs = value if isinstance(value, list) else []
        return "[]v1.OwnerReference{" + ", ".join(
            f"v1.OwnerReference{{APIVersion:{_go_string(r.get('apiVersion'))}, Kind:{_go_string(r.get('kind'))}, "
            f"Name:{_go_string(r.get('name'))}, UID:{_go_string(r.get('uid'))}, Controller:(*bool)(nil), "
            "BlockOwnerDeletion:(*bool)(nil)}" for r in refs if isinstance(r, dict)) + "}"
    if key == "managedFields":
        return "[]v1.ManagedFieldsEntry{...}"
    return _go_string(value)


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _go_time(value: Any) -> str:
    """A metav1.Time as ``%#v`` shows it (``time.Date(...)``; decoded times are local, UTC here)."""
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return _go_string(value)
    return (f"time.Date({t.year}, time.{_MONTHS[t.month - 1]}, {t.day}, {t.hour}, {t.minute}, {t.second}, "
            f"{t.microsecond * 1000}, time.Local)")


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


async def _access_status(spec: dict[str, Any], user: User | None, authorizer: Authorizes | None) -> dict[str, Any]:
    """The decision on a valid spec (exactly one of the attributes)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict):
        request = Request(str(resource.get("verb", "")), str(resource.get("group", "")),
                          str(resource.get("resource", "")), str(resource.get("subresource", "")),
                          str(resource.get("namespace", "")), str(resource.get("name", "")))
    else:
        assert isinstance(non_resource, dict)
        request = Request(str(non_resource.get("verb", "")), path=str(non_resource.get("path", "")))
    if authorizer is None or user is None:  # AlwaysAllow, no reason
        return {"allowed": True}
    # the allowing binding (RBAC's reason), or why none allowed (the Node authorizer's, a binding of
    # the user's that does not resolve; usually nothing): `auth can-i` prints "no - <reason>"
    if await authorizer.allowed(user, request):
        reason = await authorizer.reason(user, request)
        return {"allowed": True, "reason": reason} if reason else {"allowed": True}
    reason = await authorizer.denial(user, request)
    return {"allowed": False, "reason": reason} if reason else {"allowed": False}


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
