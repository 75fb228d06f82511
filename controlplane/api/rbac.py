"""``--authorization-mode RBAC``: kube-apiserver's RBAC authorizer, over the watch cache.

A request is allowed when a rule of a role bound to its user allows it:

- the user is who the token file says (with the group ``system:authenticated``),
  or ``system:anonymous`` (``system:unauthenticated``) on a plain-HTTP server;
- members of ``system:masters`` are allowed everything, as upstream's superuser
  group (the generated admin is one);
- ClusterRoleBindings grant their ClusterRole's rules everywhere, RoleBindings
  their Role's or ClusterRole's rules in their namespace;
- a resource rule matches on verb, API group, resource (``pods``,
  ``pods/status``, ``*``, ``*/status``) and, when it names any,
  ``resourceNames``; a non-resource rule on the path (``/healthz``, ``/api/*``).

Nothing else is granted: what every signed-in user may do comes from the bootstrap policy
(``rbacpolicy.py``, written at start by ``rbacreconcile.py``), as upstream's, so a deleted
binding takes its grant away until the next start puts it back. ``system:discovery`` lets
every authenticated user read discovery (``/api``, ``/apis`` and below, ``/openapi``,
``/version``), ``system:basic-user`` ask the self-reviews (``api/reviews.py``);
``system:public-info-viewer`` is bound to the unauthenticated too (``/version`` and the
health checks are served without authorization here, see ``app.py``); ``/metrics`` is for
``system:monitoring`` and the masters (``app.py`` asks); ``system:service-account-issuer-discovery``
lets every service account read the issuer's discovery documents.

The rules are indexed by subject from the cached RBAC objects and rebuilt when one of the
four caches changes (their ``generation``), so a binding takes effect once its
write has reached the cache, a few milliseconds after it is acknowledged, as
with upstream's informer-fed authorizer. The aggregated roles are kept by
``controllers/clusterroles.py``; impersonation is ``impersonation.py``.

A denial is a 403 Forbidden worded as upstream's:
``pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "dev"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import orjson

from ..registry.selectors import SelectorError, exact_match, parse_label_selector
from .errors import ApiError
from .params import go_int64

__all__ = ["ANONYMOUS", "Authorizer", "Authorizes", "Request", "Rules", "User", "aggregate", "forbidden",
           "selected_name", "verb_of"]

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), sorted by key

    def with_authenticated(self) -> User:
        return self if AUTHENTICATED in self.groups else \
            dataclasses.replace(self, groups=(*self.groups, AUTHENTICATED))

    def info(self) -> dict[str, Any]:
        """As a review's ``userInfo`` shows it (``uid`` and ``extra`` when set)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {key: list(values) for key, values in self.extra}
        return out


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


@dataclass(frozen=True, slots=True)
class Request:
    """What is asked: a resource request (``resource`` set) or a non-resource one (``path``)."""

    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    field_selector: str = ""  # a list's or watch's (the Node authorizer's scoped reads; RBAC ignores it)


def verb_of(method: str, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request on a resource, as upstream's RequestInfo reads it: HEAD
    as GET (a proxy subresource takes it), and a GET of one named object a ``get``, a watch
    or not."""
    if method == "GET" or method == "HEAD":
        return "get" if named else ("watch" if watch else "list")
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}.get(method, method.lower())


def selected_name(query: Mapping[str, str]) -> str:
    """The name a list or watch asks for by ``fieldSelector``, as upstream's RequestInfo takes
    it for the request's name (so that ``resourceNames`` rules apply): what the selector
    requires of ``metadata.name`` (fields.ParseSelector's terms, escapes and order:
    ``metadata.name=a\\,b`` is ``a,b``; of two such terms, the first sorted). ``""`` when it
    requires none, when the name is no valid path segment, or when the query's ListOptions
    fail to decode (a malformed field or label selector, a ``limit`` or ``timeoutSeconds``
    that is no int64): upstream then reads the request as a list of no name."""
    text = query.get("fieldSelector") or ""
    if not text:
        return ""
    try:
        name = exact_match(text, "metadata.name")
        parse_label_selector(query.get("labelSelector"))
    except SelectorError:
        return ""
    if not name or name in (".", "..") or "/" in name or "%" in name:  # path.IsValidPathSegmentName
        return ""
    if any((raw := query.get(key) or "") and go_int64(raw) is None for key in ("limit", "timeoutSeconds")):
        return ""
    return name


@dataclass(slots=True)
class _Rule:
    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    paths: tuple[str, ...]
    source: dict[str, Any] = field(default_factory=dict, compare=False)  # the role's rule, as written

    def allows(self, r: Request) -> bool:
        if "*" not in self.verbs and r.verb not in self.verbs:
            return False
        if not r.resource:
            return any(p == "*" or p == r.path or (p.endswith("*") and r.path.startswith(p[:-1]))
                       for p in self.paths)
        if "*" not in self.groups and r.api_group not in self.groups:
            return False
        full = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
        if not ("*" in self.resources or full in self.resources
                or (r.subresource and f"*/{r.subresource}" in self.resources)):
            return False
        return not self.names or (bool(r.name) and r.name in self.names)


def _rules(role: dict[str, Any] | None) -> list[_Rule]:
    out = []
    for rule in (role or {}).get("rules") or ():
        if isinstance(rule, dict):
            out.append(_Rule(frozenset(rule.get("verbs") or ()), frozenset(rule.get("apiGroups") or ()),
                             frozenset(rule.get("resources") or ()), frozenset(rule.get("resourceNames") or ()),
                             tuple(rule.get("nonResourceURLs") or ()), rule))
    return out


@dataclass(slots=True)
class _Index:
    """The rules bound to each subject (``_subject_key``): cluster-wide, and by namespace."""

    cluster: dict[str, list[_Rule]] = field(default_factory=dict)
    by_namespace: dict[str, dict[str, list[_Rule]]] = field(default_factory=dict)
    # the same rules by the binding that grants them ("ClusterRoleBinding "x" of ClusterRole "y" to
    # User "z""), for the reason of an allowed request (the audit log's); not on the decision's path
    cluster_sources: dict[str, list[tuple[str, list[_Rule]]]] = field(default_factory=dict)
    namespace_sources: dict[str, dict[str, list[tuple[str, list[_Rule]]]]] = field(default_factory=dict)
    # the role references of the bindings to each subject that do not resolve, as upstream's rule
    # resolver reports them (``role.rbac.authorization.k8s.io "x" not found``): a denial's reason
    # and a rules review's evaluationError
    cluster_errors: dict[str, list[str]] = field(default_factory=dict)
    namespace_errors: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def errors(self, user: User, namespace: str) -> list[str]:
        """The resolution errors of the bindings that apply to ``user`` in ``namespace``: the
        cluster-wide ones first, as upstream visits them."""
        keys = _user_keys(user)
        out = [e for key in keys for e in self.cluster_errors.get(key, ())]
        if namespace:
            local = self.namespace_errors.get(namespace, {})
            out += [e for key in keys for e in local.get(key, ())]
        return out

    def rules(self, user: User, namespace: str) -> Iterator[_Rule]:
        """The rules that apply to ``user`` in ``namespace`` ("": cluster-wide only), by key."""
        local = self.by_namespace.get(namespace, {}) if namespace else {}
        for key in _user_keys(user):
            yield from self.cluster.get(key, ())
            yield from local.get(key, ())


def _subject_key(subject: dict[str, Any]) -> str | None:
    """A binding's subject as the key a user matches it by: a ServiceAccount is the user
    ``system:serviceaccount:<namespace>:<name>``; None for a kind that matches nobody."""
    kind, name = subject.get("kind"), subject.get("name")
    if not isinstance(name, str):
        return None
    if kind == "User":
        return "user:" + name
    if kind == "Group":
        return "group:" + name
    if kind == "ServiceAccount":
        return f"user:system:serviceaccount:{subject.get('namespace', '')}:{name}"
    return None


def _user_keys(user: User) -> list[str]:
    return ["user:" + user.name, *("group:" + g for g in user.groups)]


def _bind(into: dict[str, list[_Rule]], subjects: Iterable[Any], rules: list[_Rule],
          sources: dict[str, list[tuple[str, list[_Rule]]]], binding: str) -> None:
    for subject in subjects:
        key = _subject_key(subject) if isinstance(subject, dict) else None
        if key is not None:
            into.setdefault(key, []).extend(rules)
            sources.setdefault(key, []).append((f"{binding} to {_describe_subject(subject)}", rules))


def _unresolved(into: dict[str, list[str]], subjects: Iterable[Any], error: str) -> None:
    for subject in subjects:
        key = _subject_key(subject) if isinstance(subject, dict) else None
        if key is not None:
            into.setdefault(key, []).append(error)


def _role_error(ref: dict[str, Any], found: bool) -> str | None:
    """Upstream's GetRoleReferenceRules error for a binding's ``roleRef``, None if it resolves."""
    kind, name = ref.get("kind", ""), ref.get("name", "")
    if kind not in ("Role", "ClusterRole"):
        return f'unsupported role reference kind: "{kind}"'
    return None if found else f'{kind.lower()}.rbac.authorization.k8s.io "{name}" not found'


def aggregate(errors: list[str]) -> str:
    """apimachinery's aggregate error as ``Error()`` words it: one message alone, several
    (each once) in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _describe_subject(subject: dict[str, Any]) -> str:
    """A binding's subject as upstream's RBAC authorizer names it in a reason."""
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace", "")}"'
    return f'{kind} "{name}"'


Lister = Callable[[str], Awaitable[list[bytes]]]  # plural -> the cached objects' JSON


class Rules(NamedTuple):
    """What a SelfSubjectRulesReview answers: the rules, whether the list may lack some, and the
    errors met on the way (its ``evaluationError``)."""

    resource_rules: list[dict[str, Any]]
    non_resource_rules: list[dict[str, Any]]
    incomplete: bool
    errors: list[str]


class Authorizes(Protocol):
    """What decides requests: ``Authorizer`` (RBAC), or the ``--authorization-mode`` list
    (``nodeauthz.Authorizers``)."""

    async def allowed(self, user: User, r: Request) -> bool: ...

    async def reason(self, user: User, r: Request) -> str: ...

    async def denial(self, user: User, r: Request) -> str: ...

    async def rules_for(self, user: User, namespace: str) -> Rules: ...


class Authorizer:
    """Decides requests by the cached RBAC objects; ``changed()`` says when to re-index."""

    def __init__(self, list_objects: Lister, changed: Callable[[], int]) -> None:
        self._list = list_objects
        self._changed = changed
        self._version = -1
        self._checked = 0.0
        self._index = _Index()
        self._building = asyncio.Lock()

    async def allowed(self, user: User, r: Request) -> bool:
        if MASTERS in user.groups:
            return True
        index = await self._current()
        return any(rule.allows(r) for rule in index.rules(user, r.namespace if r.resource else ""))

    async def reason(self, user: User, r: Request) -> str:
        """Why ``r`` is allowed to ``user``, as upstream's RBAC authorizer says it (``RBAC: allowed
        by ClusterRoleBinding "x" of ClusterRole "y" to Group "z"``); "" for ``system:masters``
        (upstream's privileged-group authorizer gives none) or a request not allowed."""
        if MASTERS in user.groups:
            return ""
        index = await self._current()
        namespace = r.namespace if r.resource else ""
        scopes = [index.cluster_sources, index.namespace_sources.get(namespace, {})] if namespace \
            else [index.cluster_sources]
        keys = _user_keys(user)
        for sources in scopes:  # (upstream visits the cluster bindings first)
            for key in keys:
                for description, rules in sources.get(key, ()):
                    if any(rule.allows(r) for rule in rules):
                        return f"RBAC: allowed by {description}"
        return ""

    async def denial(self, user: User, r: Request) -> str:
        """Why ``r`` was denied: RBAC gives no reason unless a binding of the user's did not
        resolve (``RBAC: role.rbac.authorization.k8s.io "x" not found``, upstream's)."""
        if MASTERS in user.groups:
            return ""
        errors = (await self._current()).errors(user, r.namespace if r.resource else "")
        return f"RBAC: {aggregate(errors)}" if errors else ""

    async def rules_for(self, user: User, namespace: str) -> Rules:
        """The resource and non-resource rules that apply to ``user`` in ``namespace`` (what
        SelfSubjectRulesReview answers): those of its cluster-wide bindings (the bootstrap
        policy's discovery and self-review roles among them, for an authenticated user) and of
        the namespace's; and the errors of its bindings that do not resolve (upstream's RBAC
        still calls the list complete)."""
        index = await self._current()
        keys = _user_keys(user)
        local = index.by_namespace.get(namespace, {}) if namespace else {}
        # every rule of every binding, as upstream's resolver lists them: the cluster-wide bindings'
        # first, each rule as its role writes it (its verbs' order kept, nothing merged: kubectl
        # compacts them); system:masters has cluster-admin's through its bootstrap binding
        rules = [rule for scope in (index.cluster, local) for key in keys for rule in scope.get(key, ())]
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        for rule in rules:
            verbs = [str(v) for v in rule.source.get("verbs") or ()]
            if rule.resources:
                shown: dict[str, Any] = {"verbs": verbs}
                for name in ("apiGroups", "resources", "resourceNames"):
                    if rule.source.get(name):
                        shown[name] = [str(v) for v in rule.source[name]]
                resource_rules.append(shown)
            if rule.paths:
                non_resource_rules.append({"verbs": verbs, "nonResourceURLs": list(rule.paths)})
        return Rules(resource_rules, non_resource_rules, False, index.errors(user, namespace))

    async def _current(self) -> _Index:
        """The index as of at least the caches' generation at the call. Builds go one at a
        time, each reading the generation before its lists, so the index kept is never older
        than the generation kept beside it (two builds side by side could finish out of order
        and leave a stale index marked current, denying a binding until the next RBAC write)."""
        version = self._changed()
        if version < 0:  # no cache to tell: re-index at most once a second
            now = time.monotonic()
            if now - self._checked < 1.0:
                return self._index
            self._checked = now
        elif version == self._version:
            return self._index
        async with self._building:
            if version >= 0 and self._version == (version := self._changed()):
                return self._index  # built while this one waited
            self._index = await self._build()
            self._version = version
        return self._index

    async def _build(self) -> _Index:
        def objects(raws: Iterable[bytes]) -> list[dict[str, Any]]:
            return [orjson.loads(raw) for raw in raws]

        cluster_roles = {o["metadata"]["name"]: _rules(o) for o in objects(await self._list("clusterroles"))}
        roles = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): _rules(o)
                 for o in objects(await self._list("roles"))}
        index = _Index()
        for b in objects(await self._list("clusterrolebindings")):
            ref = b.get("roleRef") or {}
            # (a ClusterRoleBinding's roleRef is a ClusterRole: "Role" there is upstream's "not found"
            # of the cluster-scoped lookup of a Role, which its validation refuses anyway)
            error = _role_error(ref, ref.get("kind") == "ClusterRole" and ref.get("name", "") in cluster_roles)
            if error is not None:
                _unresolved(index.cluster_errors, b.get("subjects") or (), error)
            elif ref.get("kind") == "ClusterRole":
                binding = f'ClusterRoleBinding "{b["metadata"]["name"]}" of ClusterRole "{ref.get("name", "")}"'
                _bind(index.cluster, b.get("subjects") or (), cluster_roles.get(ref.get("name", ""), []),
                      index.cluster_sources, binding)
        for b in objects(await self._list("rolebindings")):
            ns, ref = b["metadata"].get("namespace", ""), b.get("roleRef") or {}
            subjects = _in_namespace(b.get("subjects") or [], ns)
            found = ref.get("name", "") in cluster_roles if ref.get("kind") == "ClusterRole" \
                else (ns, ref.get("name", "")) in roles
            error = _role_error(ref, found)
            if error is not None:
                _unresolved(index.namespace_errors.setdefault(ns, {}), subjects, error)
                continue
            rules = (cluster_roles.get(ref.get("name", ""), []) if ref.get("kind") == "ClusterRole"
                     else roles.get((ns, ref.get("name", "")), []))
            binding = f'RoleBinding "{b["metadata"]["name"]}/{ns}" of {ref.get("kind", "")} "{ref.get("name", "")}"'
            _bind(index.by_namespace.setdefault(ns, {}), subjects, rules,
                  index.namespace_sources.setdefault(ns, {}), binding)
        return index


def _in_namespace(subjects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """A RoleBinding's subjects, a ServiceAccount that names no namespace taken as one of the
    binding's, as upstream's ``appliesToUser`` reads it (validation lets a RoleBinding leave it out)."""
    return [{**s, "namespace": namespace} if s.get("kind") == "ServiceAccount" and not s.get("namespace") else s
            for s in subjects]


def forbidden(user: User, r: Request, reason: str = "") -> ApiError:
    """upstream's Forbidden for a denied request (its ForbiddenStatusError: a ``reason`` is
    appended after a colon)."""
    why = f": {reason}" if reason else ""
    if not r.resource:
        return ApiError(403, "Forbidden", f'forbidden: User "{user.name}" cannot {r.verb} path "{r.path}"{why}', {})
    full = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
    scope = f'in the namespace "{r.namespace}"' if r.namespace else "at the cluster scope"
    qualified = f"{r.resource}.{r.api_group}" if r.api_group else r.resource  # a GroupResource's String()
    what = f'{qualified} "{r.name}"' if r.name else qualified
    details: dict[str, Any] = {"kind": r.resource}
    if r.name:
        details["name"] = r.name
    if r.api_group:
        details["group"] = r.api_group
    return ApiError(403, "Forbidden", f'{what} is forbidden: User "{user.name}" cannot {r.verb} resource "{full}" '
                                      f'in API group "{r.api_group}" {scope}{why}', details)
