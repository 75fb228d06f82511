"""Impersonation: ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid`` and
``Impersonate-Extra-*`` headers, as kube-apiserver's impersonation filter (``kubectl --as``,
``--as-group``, ``--as-uid``; client-go's ``ImpersonationConfig``).

The requesting user must be allowed the ``impersonate`` verb on each thing named, asked in
upstream's order: the user (resource ``users``, or ``serviceaccounts`` in its namespace for
``system:serviceaccount:<namespace>:<name>``), each group (``groups``), each extra value
(``userextras/<key>`` in ``authentication.k8s.io``, the value as the name), then the uid
(``uids`` in ``authentication.k8s.io``); the first refusal is upstream's 403. The request
then runs as the impersonated user, with:

- its uid, and its extras: the header's key lower-cased and %-decoded (``Impersonate-Extra-
  Example.com%2fteam`` is ``example.com/team``; a malformed escape is kept as sent), each
  repeated header one more value;
- the groups given; none given for a service account: its two (``system:serviceaccounts``,
  ``system:serviceaccounts:<namespace>``);
- and ``system:authenticated``, unless the groups hold it or ``system:unauthenticated``
  (``system:anonymous`` gets ``system:unauthenticated`` instead).

An empty ``Impersonate-User`` or ``Impersonate-Uid`` is as none. Groups, a uid or extras
without a user are a 400 (upstream answers 500 there). Without an authorizer (AlwaysAllow)
every impersonation is allowed.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from ..registry.dnsnames import DNS1123_LABEL, DNS1123_SUBDOMAIN
from .errors import ApiError
from .rbac import ANONYMOUS, AUTHENTICATED, Authorizer, Request, User, forbidden

__all__ = ["extra_key", "impersonated"]

EXTRA_PREFIX = b"impersonate-extra-"
UNAUTHENTICATED = "system:unauthenticated"
_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class _Asked:
    """What a request's impersonation headers name (ASGI gives their names lower-cased)."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.user = ""
        self.uid = ""
        self.groups: list[str] = []
        self.extras: dict[str, list[str]] = {}
        for name, value in scope.get("headers", ()):
            if not name.startswith(b"impersonate-"):
                continue
            text = value.decode("utf-8", "replace")  # as Go's JSON writes a string that is not UTF-8
            if name == b"impersonate-user":
                self.user = self.user or text  # the first, as Header.Get
            elif name == b"impersonate-group":
                self.groups.append(text)
            elif name == b"impersonate-uid":
                self.uid = self.uid or text
            elif name.startswith(EXTRA_PREFIX):
                self.extras.setdefault(extra_key(name[len(EXTRA_PREFIX):].decode("ascii", "replace")),
                                       []).append(text)


def extra_key(encoded: str) -> str:
    """An ``Impersonate-Extra-`` header's key, as upstream's unescapeExtraKey reads it."""
    encoded = encoded.lower()
    if _MALFORMED_ESCAPE.search(encoded):
        return encoded  # url.PathUnescape fails: the key is kept as sent
    return unquote(encoded, encoding="utf-8", errors="replace")


async def impersonated(scope: dict[str, Any], user: User, authorizer: Authorizer | None) -> User:
    """The user a request acts as: ``user``, or whom its impersonation headers name."""
    asked = _Asked(scope)
    if not asked.user:
        if asked.groups or asked.uid or asked.extras:
            raise ApiError.bad_request("requesting uid, groups or user-extra without impersonating a user")
        return user
    if authorizer is not None:
        for ask in _asks(asked):
            if not await authorizer.allowed(user, ask):
                raise forbidden(user, ask)
    return _acting(asked)


def _asks(asked: _Asked) -> list[Request]:
    """The ``impersonate`` checks, in upstream's order."""
    account = _service_account(asked.user)
    if account is not None:
        asks = [Request("impersonate", "", "serviceaccounts", namespace=account[0], name=account[1])]
    else:
        asks = [Request("impersonate", "", "users", name=asked.user)]
    asks += [Request("impersonate", "", "groups", name=g) for g in asked.groups]
    asks += [Request("impersonate", "authentication.k8s.io", "userextras", subresource=key, name=value)
             for key, values in asked.extras.items() for value in values]
    if asked.uid:
        asks.append(Request("impersonate", "authentication.k8s.io", "uids", name=asked.uid))
    return asks


def _acting(asked: _Asked) -> User:
    groups = list(asked.groups)
    account = _service_account(asked.user)
    if account is not None and not groups:
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{account[0]}"]
    if asked.user == ANONYMOUS.name:
        if UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    extra = tuple(sorted((key, tuple(values)) for key, values in asked.extras.items()))
    return User(asked.user, tuple(groups), uid=asked.uid, extra=extra)


def _service_account(name: str) -> tuple[str, str] | None:
    """(namespace, name) of a service account's user name, as upstream's SplitUsername: a
    namespace that is a DNS-1123 label and a name that is a subdomain; else None (a user)."""
    parts = name.split(":")
    if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
        return None
    namespace, account = parts[2], parts[3]
    if not (len(namespace) <= 63 and DNS1123_LABEL.match(namespace)
            and len(account) <= 253 and DNS1123_SUBDOMAIN.match(account)):
        return None
    return namespace, account
