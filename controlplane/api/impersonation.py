"""Impersonation: ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid`` and
``Impersonate-Extra-*`` headers, as kube-apiserver's impersonation filter (``kubectl --as``).

The requesting user must be allowed the ``impersonate`` verb on each thing named: the
user (resource ``users``, or ``serviceaccounts`` in its namespace for
``system:serviceaccount:<namespace>:<name>``), each group (``groups``), the uid
(``uids``) and each extra (``userextras/<key>`` in ``authentication.k8s.io``); a
refusal is upstream's 403. The request then runs as the impersonated user, with the
given groups plus ``system:authenticated`` (and a service account's two groups).
Groups, uid or extras without a user are a 400. Without an authorizer
(AlwaysAllow) every impersonation is allowed.
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .rbac import Authorizer, Request, User, forbidden

__all__ = ["impersonated"]


def _headers(scope: dict[str, Any]) -> tuple[str | None, list[str], str | None, dict[str, list[str]]]:
    user, uid = None, None
    groups: list[str] = []
    extras: dict[str, list[str]] = {}
    for name, value in scope.get("headers", ()):
        if not name.startswith(b"impersonate-"):
            continue
        text = value.decode("latin-1")
        if name == b"impersonate-user":
            user = text
        elif name == b"impersonate-group":
            groups.append(text)
        elif name == b"impersonate-uid":
            uid = text
        elif name.startswith(b"impersonate-extra-"):
            extras.setdefault(name[len(b"impersonate-extra-"):].decode("latin-1"), []).append(text)
    return user, groups, uid, extras


async def impersonated(scope: dict[str, Any], user: User, authorizer: Authorizer | None) -> User:
    """The user a request acts as: ``user``, or whom its impersonation headers name."""
    name, groups, uid, extras = _headers(scope)
    if name is None:
        if groups or uid is not None or extras:
            raise ApiError.bad_request("impersonating groups, a uid or extras requires impersonating a user")
        return user
    asks: list[Request] = []
    if name.startswith("system:serviceaccount:") and name.count(":") == 3:
        _, _, namespace, account = name.split(":")
        asks.append(Request("impersonate", "", "serviceaccounts", namespace=namespace, name=account))
        implied = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        asks.append(Request("impersonate", "", "users", name=name))
        implied = []
    asks += [Request("impersonate", "", "groups", name=g) for g in groups]
    if uid is not None:
        asks.append(Request("impersonate", "authentication.k8s.io", "uids", name=uid))
    asks += [Request("impersonate", "authentication.k8s.io", "userextras", subresource=key, name=v)
             for key, values in extras.items() for v in values]
    if authorizer is not None:
        for ask in asks:
            if not await authorizer.allowed(user, ask):
                raise forbidden(user, ask)
    all_groups = tuple(dict.fromkeys([*groups, *implied]))
    acting = User(name, all_groups)
    return acting if name == "system:anonymous" else acting.with_authenticated()
