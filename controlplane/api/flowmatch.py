"""API Priority and Fairness's view of a request, and FlowSchema rules matched against it.

``request_info(method, path, query)`` reads a request as upstream's ``RequestInfoFactory``
does (``k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``): a resource request has
a verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``,
``deletecollection``), an API group, a resource and subresource, a namespace and a name;
any other path is a non-resource request whose verb is the HTTP method in lower case.
Example::

    request_info("GET", "/api/v1/namespaces/a/pods", b"watch=true")
    -> Info(resource=True, verb="watch", group="", version="v1", plural="pods", namespace="a", ...)

This emulator's bulk heartbeats are read as the heartbeats they stand for, so they
classify as a kubelet's would (the ``system-node-high`` schema for a user of
``system:nodes``): a ``LeaseRenewal`` as an ``update`` of ``leases`` in its namespace, a
``NodeStatusReport`` as a ``patch`` of ``nodes/status``.

``Rule`` holds one of a FlowSchema's ``rules`` (``PolicyRulesWithSubjects``) compiled
into sets; ``Rule.matches`` is upstream's ``matchesPolicyRule``
(``k8s.io/apiserver/pkg/util/flowcontrol/rule.go``): a subject matches (a user by name, a
group the user is in, a service account by its username, ``*`` for any), then a resource
rule (verb, group, ``resource`` or ``resource/subresource``, the namespace or
``clusterScope`` for a request without one) or a non-resource rule (verb, the path
exactly or under a ``prefix/*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from .rbac import User

__all__ = ["Info", "Rule", "request_info"]

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get", "HEAD": "get"}
# what upstream serves without limits (its long-running check: the watch verb is limited
# during its initialization; these never are)
_LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})  # Go's strconv.ParseBool
# the bulk heartbeats (api/leaserenewals.py, api/nodereports.py) read as what they stand for
_BULK = {("nodes.controlplane.dev", "leaserenewals"): ("update", "coordination.k8s.io", "leases", ""),
         ("nodes.controlplane.dev", "nodestatusreports"): ("patch", "", "nodes", "status")}


@dataclass(slots=True)
class Info:
    """A request as API Priority and Fairness sees it (not frozen: made for every request,
    and a frozen dataclass's construction costs twice as much)."""

    resource: bool  # a resource request (else a non-resource one: ``path`` is what rules match)
    verb: str
    path: str = ""
    group: str = ""
    version: str = ""
    plural: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    query: str = ""  # the query string, for the width of a list

    @property
    def long_running(self) -> bool:
        """Served past flow control, as upstream's long-running requests (exec, logs, proxy...)."""
        return self.resource and (self.subresource in _LONG_RUNNING_SUBRESOURCES or self.verb == "proxy")

    @property
    def mutating(self) -> bool:
        return self.verb not in ("get", "list", "watch")


def request_info(method: str, path: str, query: bytes) -> Info:
    parts = path.split("/")  # ["", "api", "v1", ...]
    if "" in parts[1:]:  # (a doubled or trailing slash: rare)
        parts = ["", *(p for p in parts if p)]
    n = len(parts)
    if n < 2 or (parts[1] != "api" and parts[1] != "apis"):
        return Info(False, method.lower(), path)
    if parts[1] == "api":
        head, group = 3, ""
    else:
        head, group = 4, parts[2] if n > 2 else ""
    if n <= head:  # discovery: /api, /api/v1, /apis, /apis/g, /apis/g/v
        return Info(False, method.lower(), path)
    version = parts[head - 1]
    rest = parts[head:]
    verb = _VERBS.get(method) or method.lower()
    if (rest[0] == "watch" or rest[0] == "proxy") and len(rest) > 1:  # the deprecated /watch/..., /proxy/...
        verb = rest[0]
        rest = rest[1:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    plural = rest[0]
    k = len(rest)
    name = rest[1] if k > 1 else ""
    subresource = rest[2] if k > 2 else ""
    text = query.decode("latin-1") if query else ""
    if not name:
        if verb == "get":
            verb = "list"
        elif verb == "delete":
            verb = "deletecollection"
        elif verb == "create" and group == "nodes.controlplane.dev":
            bulk = _BULK.get((group, plural))
            if bulk is not None:
                verb, group, plural, subresource = bulk
    if text and "watch=" in text and (verb == "list" or verb == "get") \
            and any(key == "watch" and v in _TRUE for key, v in parse_qsl(text, keep_blank_values=True)):
        verb = "watch"
    return Info(True, verb, path, group, version, plural, subresource, namespace, name, text)


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``PolicyRulesWithSubjects`` of a FlowSchema, compiled."""

    users: frozenset[str]
    groups: frozenset[str]
    accounts: frozenset[tuple[str, str]]  # (namespace, name or "*")
    resource_rules: tuple[tuple[frozenset[str], frozenset[str], frozenset[str], bool, frozenset[str]], ...]
    non_resource_rules: tuple[tuple[frozenset[str], tuple[str, ...]], ...]

    @classmethod
    def of(cls, rule: dict[str, Any]) -> Rule:
        users, groups, accounts = set(), set(), set()
        for subject in rule.get("subjects") or ():
            kind = subject.get("kind")
            if kind == "User":
                users.add(str((subject.get("user") or {}).get("name", "")))
            elif kind == "Group":
                groups.add(str((subject.get("group") or {}).get("name", "")))
            elif kind == "ServiceAccount":
                account = subject.get("serviceAccount") or {}
                accounts.add((str(account.get("namespace", "")), str(account.get("name", ""))))
        resource_rules = tuple(
            (frozenset(r.get("verbs") or ()), frozenset(r.get("apiGroups") or ()), frozenset(r.get("resources") or ()),
             bool(r.get("clusterScope")), frozenset(r.get("namespaces") or ()))
            for r in rule.get("resourceRules") or ())
        non_resource_rules = tuple((frozenset(r.get("verbs") or ()), tuple(r.get("nonResourceURLs") or ()))
                                   for r in rule.get("nonResourceRules") or ())
        return cls(frozenset(users), frozenset(groups), frozenset(accounts), resource_rules, non_resource_rules)

    def matches(self, user: User, info: Info) -> bool:
        return self._subject(user) and (self._resource(info) if info.resource else self._non_resource(info))

    def _subject(self, user: User) -> bool:
        if "*" in self.users or user.name in self.users or "*" in self.groups:
            return True
        if any(g in self.groups for g in user.groups):
            return True
        if self.accounts and user.name.startswith("system:serviceaccount:"):
            namespace, _, name = user.name[len("system:serviceaccount:"):].partition(":")
            return (namespace, name) in self.accounts or (namespace, "*") in self.accounts
        return False

    def _resource(self, info: Info) -> bool:
        full = f"{info.plural}/{info.subresource}" if info.subresource else info.plural
        for verbs, groups, resources, cluster, namespaces in self.resource_rules:
            if not ("*" in verbs or info.verb in verbs):
                continue
            if not ("*" in groups or info.group in groups):
                continue
            if not ("*" in resources or full in resources):
                continue
            if info.namespace:
                if "*" in namespaces or info.namespace in namespaces:
                    return True
            elif cluster:
                return True
        return False

    def _non_resource(self, info: Info) -> bool:
        for verbs, urls in self.non_resource_rules:
            if not ("*" in verbs or info.verb in verbs):
                continue
            for url in urls:
                if url == "*" or url == info.path or (url.endswith("/*") and info.path.startswith(url[:-1])):
                    return True
        return False

