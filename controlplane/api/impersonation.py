"""Impersonation: ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid`` and
``Impersonate-Extra-*`` headers, as kube-apiserver 1.37's impersonation filter (``kubectl
--as``, ``--as-group``, ``--as-uid``; client-go's ``ImpersonationConfig``), which is its
constrained impersonation filter (KEP-5284, ConstrainedImpersonation, beta and on since 1.36).

Modes are tried in upstream's order, each only for the impersonations it takes; the first
that allows the request decides who it runs as:

- ``associated-node``: a service account whose token is bound to node N (its extra
  ``authentication.kubernetes.io/node-name``) impersonating ``system:node:N`` alone;
- ``arbitrary-node``: ``system:node:<name>`` alone;
- ``serviceaccount``: ``system:serviceaccount:<namespace>:<name>`` alone;
- ``user-info``: any other user, with groups, a uid and extras;
- ``legacy``: the ``impersonate`` verb, for anything.

A constrained mode asks the authorizer first for ``impersonate-on:<mode>:<verb>`` on what the
request itself is (``impersonate-on:user-info:list`` on ``pods`` in its namespace; a path's
verb on a path), then for ``impersonate:<mode>`` (group ``authentication.k8s.io``) on the
user (``nodes``, ``serviceaccounts`` in its namespace, or ``users``; ``associated-node``
asks for the node name ``*``), the uid (``uids``), each group (``groups``; four or more are
first asked as ``*``; the empty group and ``system:masters`` are refused) and each extra value
(``userextras/<key>``; four or more values first asked as ``*/*``; a key that is not a
lower-case domain-prefixed path, or an empty value, is refused). Legacy asks for
``impersonate`` on the user (``users``, or ``serviceaccounts`` in its namespace), the uid,
each group (core group), each extra value (``authentication.k8s.io``), in that order. When
every mode fails, the 403 is the first failure's: for most requesters without the new verbs,
the constrained mode's ``impersonate-on:`` check (``... cannot impersonate-on:user-info:list
resource "pods" ...``).

The request then runs as the impersonated user, with its uid and extras (the header's key
lower-cased and %-decoded: ``Impersonate-Extra-Example.com%2fteam`` is ``example.com/team``; a
malformed escape is kept as sent; each repeated header one more value); the groups given, a
service account's two when none are (``system:serviceaccounts``,
``system:serviceaccounts:<namespace>``), a node's ``system:nodes`` in a node mode; and
``system:authenticated`` unless the groups hold ``system:unauthenticated``
(``system:anonymous`` gets ``system:unauthenticated`` instead).

An empty ``Impersonate-User`` or ``Impersonate-Uid`` is as none. Groups, a uid or extras
without a user are upstream's 400 ``requested &user.DefaultInfo{...} without impersonating a
user name``. Without an authorizer (AlwaysAllow) every check is allowed, so the first mode that
takes the impersonation decides it, and what it decided for a requester's headers is kept (a
hundred thousand at most). Upstream caches decisions and tries a requester's last
successful mode first; with an authorizer this asks each time, in order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from ..gostrings import quote
from ..registry.dnsnames import DNS1123_LABEL, DNS1123_SUBDOMAIN
from .errors import ApiError
from .rbac import ANONYMOUS, AUTHENTICATED, Authorizes, Request, User, forbidden

__all__ = ["extra_key", "impersonated"]

EXTRA_PREFIX = b"impersonate-extra-"
UNAUTHENTICATED = "system:unauthenticated"
NODES = "system:nodes"
NODE_PREFIX = "system:node:"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
AUTHENTICATION = "authentication.k8s.io"
_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HTTP_PATH = re.compile(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+")
_MANY = 4  # upstream's manyAuthorizationChecksInLoop: a wildcard check is tried first

Allow = Callable[[User, Request], Awaitable[bool]]


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


async def impersonated(scope: dict[str, Any], user: User, authorizer: Authorizes | None,
                       request: Request) -> User:
    """The user a request (whose RBAC attributes are ``request``) acts as: ``user``, or whom
    its impersonation headers name, once a mode allows it."""
    if authorizer is None:  # every check allowed: who the headers make a requester depends on them alone
        key = (user, tuple(h for h in scope.get("headers", ()) if h[0].startswith(b"impersonate-")))
        decided = _ALWAYS_ALLOWED.get(key)
        if decided is None:
            decided = await _impersonated(scope, user, authorizer, request)
            if len(_ALWAYS_ALLOWED) >= _ALWAYS_ALLOWED_MAX:
                _ALWAYS_ALLOWED.clear()
            _ALWAYS_ALLOWED[key] = decided
        return decided
    return await _impersonated(scope, user, authorizer, request)


# Without an authorizer, whom each (requester, impersonation headers) acts as (a refusal is not kept):
# the load tests' kubelets and controllers send the same headers with every request
_ALWAYS_ALLOWED: dict[tuple[User, tuple[tuple[bytes, bytes], ...]], User] = {}
_ALWAYS_ALLOWED_MAX = 100_000


async def _impersonated(scope: dict[str, Any], user: User, authorizer: Authorizes | None,
                        request: Request) -> User:
    asked = _Asked(scope)
    if not asked.user:
        if asked.groups or asked.uid or asked.extras:
            raise ApiError.bad_request(f"requested {_go_syntax(asked)} without impersonating a user name")
        return user
    allow: Allow = authorizer.allowed if authorizer is not None else _always
    first: ApiError | None = None
    for mode in _modes(asked, user):
        try:
            return await _constrained(mode, asked, user, request, allow)
        except ApiError as e:
            first = first or e
    try:
        return await _legacy(asked, user, allow)
    except ApiError as e:
        raise (first or e) from None


async def _always(user: User, r: Request) -> bool:
    return True


async def _check(allow: Allow, user: User, r: Request) -> None:
    if not await allow(user, r):
        raise forbidden(user, r)


def _modes(asked: _Asked, requester: User) -> list[str]:
    """The constrained modes that take this impersonation, in upstream's order."""
    alone = not (asked.uid or asked.groups or asked.extras)
    node = _node_name(asked.user)
    account = _service_account(asked.user)
    modes = []
    if alone and node is not None:
        bound = dict(requester.extra).get(NODE_NAME_EXTRA, ())
        if _service_account(requester.name) is not None and len(bound) == 1 and bound[0] == node:
            modes.append("associated-node")
        modes.append("arbitrary-node")
    if alone and account is not None:
        modes.append("serviceaccount")
    if node is None and account is None:
        modes.append("user-info")
    return modes


async def _constrained(mode: str, asked: _Asked, requester: User, request: Request, allow: Allow) -> User:
    """The impersonated user once ``mode`` allows it (upstream's constrainedImpersonationModeState):
    the request's own verb under ``impersonate-on:<mode>:``, then each thing named."""
    await _check(allow, requester, dataclasses.replace(request, verb=f"impersonate-on:{mode}:{request.verb}"))
    verb = f"impersonate:{mode}"
    node, account = _node_name(asked.user), _service_account(asked.user)
    if node is not None:
        await _check(allow, requester, Request(verb, AUTHENTICATION, "nodes",
                                               name="*" if mode == "associated-node" else node))
    elif account is not None:
        await _check(allow, requester, Request(verb, AUTHENTICATION, "serviceaccounts",
                                               namespace=account[0], name=account[1]))
    else:
        await _check(allow, requester, Request(verb, AUTHENTICATION, "users", name=asked.user))
    if asked.uid:
        await _check(allow, requester, Request(verb, AUTHENTICATION, "uids", name=asked.uid))
    await _constrained_groups(verb, asked.groups, requester, allow)
    await _constrained_extras(verb, asked.extras, requester, allow)
    groups = [NODES] if node is not None else list(asked.groups)
    return _acting(asked, groups)


async def _constrained_groups(verb: str, groups: list[str], requester: User, allow: Allow) -> None:
    if not groups:
        return
    if "" in groups:
        raise forbidden(requester, Request(verb, AUTHENTICATION, "groups"),
                        "impersonating the empty string group is not allowed")
    if "system:masters" in groups:
        raise forbidden(requester, Request(verb, AUTHENTICATION, "groups", name="system:masters"),
                        "impersonating the system:masters group is not allowed")
    if len(groups) >= _MANY and await allow(requester, Request(verb, AUTHENTICATION, "groups", name="*")):
        return
    for group in groups:
        await _check(allow, requester, Request(verb, AUTHENTICATION, "groups", name=group))


async def _constrained_extras(verb: str, extras: dict[str, list[str]], requester: User, allow: Allow) -> None:
    if not extras:
        return
    problem = _extra_problem(extras)
    if problem:
        raise forbidden(requester, Request(verb, AUTHENTICATION, "userextras"), problem)
    many = sum(len(v) for v in extras.values()) >= _MANY
    if many and await allow(requester, Request(verb, AUTHENTICATION, "userextras", subresource="*", name="*")):
        return
    for key, values in extras.items():
        for value in values:
            await _check(allow, requester, Request(verb, AUTHENTICATION, "userextras", subresource=key, name=value))


def _extra_problem(extras: dict[str, list[str]]) -> str:
    """upstream's validateExtra: why constrained impersonation refuses these extras, or ''."""
    for key, values in extras.items():
        if not key:
            return "impersonating the empty string key in extra is not allowed"
        host, slash, path = key.partition("/")
        if not (slash and host and path):
            return ('impersonating an invalid key in extra is not allowed: extra.key: Invalid value: '
                    f'"{key}": must be a domain-prefixed path (such as "acme.io/foo")')
        if not (len(host) <= 253 and DNS1123_SUBDOMAIN.match(host)):
            return ('impersonating an invalid key in extra is not allowed: extra.key: Invalid value: '
                    f'"{host}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
                    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        if not _HTTP_PATH.fullmatch(path):
            return ('impersonating an invalid key in extra is not allowed: extra.key: Invalid value: '
                    f'"{path}": Invalid path (regex used for validation is ' + "'[A-Za-z0-9/\\-._~%!$&\'()*+,;=:]+')")
        if "" in values:
            return "impersonating the empty string value in extra is not allowed"
    return ""


async def _legacy(asked: _Asked, requester: User, allow: Allow) -> User:
    """The impersonated user once the legacy ``impersonate`` verb allows each thing named, in
    1.37's order (its reimplementation beside the constrained modes): user, uid, groups, extras."""
    account = _service_account(asked.user)
    if account is not None:
        await _check(allow, requester, Request("impersonate", "", "serviceaccounts",
                                               namespace=account[0], name=account[1]))
    else:
        await _check(allow, requester, Request("impersonate", "", "users", name=asked.user))
    if asked.uid:
        await _check(allow, requester, Request("impersonate", AUTHENTICATION, "uids", name=asked.uid))
    for group in asked.groups:
        await _check(allow, requester, Request("impersonate", "", "groups", name=group))
    for key, values in asked.extras.items():
        for value in values:
            await _check(allow, requester, Request("impersonate", AUTHENTICATION, "userextras",
                                                   subresource=key, name=value))
    return _acting(asked, list(asked.groups))


def _acting(asked: _Asked, groups: list[str]) -> User:
    account = _service_account(asked.user)
    if account is not None and not groups:
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{account[0]}"]
    if asked.user == ANONYMOUS.name:
        if UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
    elif UNAUTHENTICATED not in groups and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    extra = tuple(sorted((key, tuple(values)) for key, values in asked.extras.items()))
    return User(asked.user, tuple(groups), uid=asked.uid, extra=extra)


def _go_syntax(asked: _Asked) -> str:
    """The impersonation asked, as Go's ``%#v`` prints upstream's ``*user.DefaultInfo``."""
    def strings(values: list[str]) -> str:
        return "[]string{" + ", ".join(_quoted(v) for v in values) + "}"

    groups = strings(asked.groups) if asked.groups else "[]string(nil)"
    extra = ("map[string][]string{" + ", ".join(f"{_quoted(k)}:{strings(v)}" for k, v in sorted(asked.extras.items()))
             + "}") if asked.extras else "map[string][]string(nil)"
    return f'&user.DefaultInfo{{Name:"", UID:{_quoted(asked.uid)}, Groups:{groups}, Extra:{extra}}}'


def _quoted(text: str) -> str:
    return quote(text)


def _node_name(name: str) -> str | None:
    """The node a user name names (``system:node:<DNS subdomain>``), as upstream's isNodeUsername."""
    if not name.startswith(NODE_PREFIX):
        return None
    node = name[len(NODE_PREFIX):]
    return node if len(node) <= 253 and DNS1123_SUBDOMAIN.match(node) else None


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
