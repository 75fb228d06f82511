"""Audit logging, as kube-apiserver's (``--audit-policy-file`` with ``--audit-log-path``).

The policy (``audit.k8s.io/v1`` ``Policy``, ``load_policy``) decides each request's level by
its first matching rule (upstream's ``policy/checker.go``); no rule matching is ``None``::

    apiVersion: audit.k8s.io/v1
    kind: Policy
    omitStages: [RequestReceived]
    rules:
    - level: None
      nonResourceURLs: [/healthz*, /readyz*, /livez*, /version]
    - level: RequestResponse
      resources: [{group: "", resources: [pods/status, "*/scale"]}]
    - level: Metadata
      omitManagedFields: true

``Auditing`` is the ASGI layer in front of the router (``api/app.py``; not there at all
without a policy, so a server that audits nothing pays nothing), as upstream's ``WithAudit``
filter: every request gets an ``Audit-Id`` (the request's own ``Audit-ID`` header, else a
new UUID) returned as a response header; its level is decided once its user is known (when
the handler first reads the body or answers); a level other than ``None`` sends events of
``audit.k8s.io/v1`` ``Event`` shape to the log (``api/auditlog.py``) at each stage not
omitted: ``RequestReceived``; ``ResponseStarted`` for long-running requests (watches,
``proxy``, and the ``log``/``exec``/``attach``/``portforward`` subresources) when they
answer; ``ResponseComplete``; ``Panic`` when the handler raised.

What an event holds, as upstream fills it (``audit/request.go``, ``filters/audit.go``):
the user the request authenticated as and whom it impersonates; ``sourceIPs`` from
``X-Forwarded-For``, ``X-Real-Ip`` and the peer; the ``objectRef`` from the URL, completed
at ``Metadata`` and above by a create's or update's body (name, namespace, uid,
resourceVersion); ``responseStatus``, the answer's code and, when the answer is a Status,
its status, message, reason and details; at ``Request`` and above the request's body
(``requestObject``: the object, the patch, the DeleteOptions), at ``RequestResponse`` the
answer's JSON (``responseObject``; not a watch's stream), without ``metadata.managedFields``
when the rule (or the policy) says ``omitManagedFields``; and the ``annotations`` the
request's handlers added (``annotate``): the authorization decision, PodSecurity's.

A request whose authentication failed (401) gets upstream's one ``ResponseStarted`` event
with no user and ``Authentication failed, attempted: ...``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from ..gostrings import quote
from ..metrics import AUDIT_EVENTS, AUDIT_LEVELS, AUDIT_REJECTED
from ..registry.dnsnames import DNS1123_SUBDOMAIN
from .auditid import new_audit_id
from .http1 import CLIENT_CERT_SCOPE_KEY
from .rbac import Request as Attributes
from .rbac import User

__all__ = ["AUTHENTICATED_SCOPE_KEY", "Auditing", "BlockingAuditing", "Policy", "PolicyError", "annotate", "authorized",
           "blocking", "decoded", "load_policy", "parse_policy", "recording"]

log = logging.getLogger(__name__)

LEVELS = ("None", "Metadata", "Request", "RequestResponse")  # in order: each logs more than the one before
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
API_VERSION = "audit.k8s.io/v1"
# the user a request authenticated as, when it impersonates another (the scope's user is then
# the impersonated one); set by the router in front (api/app.py)
AUTHENTICATED_SCOPE_KEY = "controlplane.authenticated"
# upstream's BasicLongRunningRequestCheck(verbs watch and proxy, these subresources)
_LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
_MAX_USER_AGENT = 1024
_MAX_CAPTURED = 64 * 1024 * 1024  # a response body kept for responseObject (a bigger one is left out)
_WRITE_VERBS = frozenset({"create", "update"})  # whose body completes the objectRef (LogRequestObject)
_BODY_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


# -- the policy (audit.k8s.io/v1 Policy; upstream's policy/checker.go, reader.go, validation.go) ---------

class PolicyError(ValueError):
    """A policy file that cannot be used; the message is upstream's."""


@dataclass(frozen=True, slots=True)
class GroupResources:
    group: str
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]

    def matches(self, resource: str, subresource: str, name: str) -> bool:
        if not self.resources:
            return True
        if self.resource_names and name not in self.resource_names:
            return False
        combined = f"{resource}/{subresource}" if subresource else resource
        for r in self.resources:
            if r == combined or r == "*":
                return True
            if subresource and r.startswith("*/") and r[2:] == subresource:
                return True
            if r.endswith("/*") and r[:-2] == resource:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Rule:
    level: str
    users: frozenset[str] = frozenset()
    user_groups: frozenset[str] = frozenset()
    verbs: frozenset[str] = frozenset()
    resources: tuple[GroupResources, ...] = ()
    namespaces: frozenset[str] = frozenset()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool | None = None

    def matches(self, user: User | None, attrs: Attributes) -> bool:
        """upstream's ``ruleMatches``: every field given must match (a user-less request
        matches no rule that names users or groups)."""
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None or self.user_groups.isdisjoint(user.groups)):
            return False
        if self.verbs and attrs.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            if not attrs.resource:
                return False
            if self.namespaces and attrs.namespace not in self.namespaces:
                return False
            return not self.resources or any(
                gr.group == attrs.api_group and gr.matches(attrs.resource, attrs.subresource, attrs.name)
                for gr in self.resources)
        if self.non_resource_urls:
            return not attrs.resource and any(_path_matches(attrs.path, spec) for spec in self.non_resource_urls)
        return True


def _path_matches(path: str, spec: str) -> bool:
    return spec == "*" or spec == path or (spec.endswith("*") and path.startswith(spec.rstrip("*")))


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy decided for one request."""

    level: str
    omit_stages: frozenset[str]
    omit_managed_fields: bool


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False

    def evaluate(self, user: User | None, attrs: Attributes) -> Decision:
        """The first matching rule's level, its stages to omit with the policy's, and whether
        to drop managedFields (the rule's say, else the policy's)."""
        for rule in self.rules:
            if rule.matches(user, attrs):
                omit = rule.omit_managed_fields
                return Decision(rule.level, rule.omit_stages | self.omit_stages,
                                self.omit_managed_fields if omit is None else omit)
        return Decision("None", self.omit_stages, self.omit_managed_fields)


def load_policy(path: Path) -> Policy:
    """The policy of a file; PolicyError with upstream's words if it cannot be read or used."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise PolicyError(f"failed to read file path {str(path)!r}: {e}") from None
    try:
        return parse_policy(text)
    except PolicyError as e:
        raise PolicyError(f"{e}: from file {path}") from None


def parse_policy(text: str) -> Policy:
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise PolicyError(f"failed decoding: {_one_line(str(e))}") from None
    if not isinstance(doc, dict):
        raise PolicyError("failed decoding: Object 'Kind' is missing in the policy")
    kind, version = doc.get("kind"), doc.get("apiVersion")
    if not kind:
        raise PolicyError("failed decoding: Object 'Kind' is missing in the policy")
    if version != API_VERSION:
        raise PolicyError(f"unknown group version field {version!r} in policy (only {API_VERSION} is served)")
    if kind != "Policy":
        raise PolicyError(f'failed decoding: no kind "{kind}" is registered for version "{API_VERSION}"')
    _warn_unknown(doc, {"apiVersion", "kind", "metadata", "rules", "omitStages", "omitManagedFields"}, "")
    errors: list[str] = []
    rules = tuple(_rule(r, f"rules[{i}]", errors) for i, r in enumerate(_list(doc, "rules", "", dict)))
    omit = _stages(_list(doc, "omitStages", "", str), "omitStages", errors)
    omit_managed = _bool(doc, "omitManagedFields", "")
    if errors:
        raise PolicyError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    if not rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    return Policy(rules, omit, bool(omit_managed))


def _rule(raw: dict[str, Any], at: str, errors: list[str]) -> Rule:
    _warn_unknown(raw, {"level", "users", "userGroups", "verbs", "resources", "namespaces", "nonResourceURLs",
                        "omitStages", "omitManagedFields"}, at)
    level = raw.get("level")
    if not level:
        errors.append(f"{at}.level: Required value")
    elif level not in LEVELS:
        errors.append(f"{at}.level: Unsupported value: {_q(level)}: supported values: "
                      + ", ".join(_q(v) for v in LEVELS))
    urls = _list(raw, "nonResourceURLs", at, str)
    for i, url in enumerate(urls):
        if url == "*":
            continue
        if not url.startswith("/"):
            errors.append(f"{at}.nonResourceURLs[{i}]: Invalid value: {_q(url)}: non-resource URL rules must "
                          "begin with a '/' character")
        if url and "*" in url[:-1]:
            errors.append(f"{at}.nonResourceURLs[{i}]: Invalid value: {_q(url)}: non-resource URL wildcards '*' "
                          "must be the final character of the rule")
    resources = []
    for i, gr in enumerate(_list(raw, "resources", at, dict)):
        where = f"{at}.resources[{i}]"
        _warn_unknown(gr, {"group", "resources", "resourceNames"}, where)
        group = gr.get("group") or ""
        if not isinstance(group, str):
            raise PolicyError(f"failed decoding: {where}.group: expected a string, not {_json_kind(group)}")
        if group and (len(group) > 253 or not DNS1123_SUBDOMAIN.match(group)):
            errors.append(f"{at}.resources.group: Invalid value: {_q(group)}: a lowercase RFC 1123 subdomain "
                          "must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                          "with an alphanumeric character")
        names = tuple(_list(gr, "resourceNames", where, str))
        plurals = tuple(_list(gr, "resources", where, str))
        if names and not plurals:
            errors.append(f"{at}.resources.resourceNames: Invalid value: {_go_strings(names)}: using "
                          "resourceNames requires at least one resource")
        resources.append(GroupResources(group, plurals, names))
    namespaces = _list(raw, "namespaces", at, str)
    if urls and (resources or namespaces):
        errors.append(f"{at}.nonResourceURLs: Invalid value: {_go_strings(urls)}: rules cannot apply to both "
                      "regular resources and non-resource URLs")
    return Rule(level=str(level or ""), users=frozenset(_list(raw, "users", at, str)),
                user_groups=frozenset(_list(raw, "userGroups", at, str)),
                verbs=frozenset(_list(raw, "verbs", at, str)), resources=tuple(resources),
                namespaces=frozenset(namespaces), non_resource_urls=tuple(urls),
                omit_stages=_stages(_list(raw, "omitStages", at, str), f"{at}.omitStages", errors),
                omit_managed_fields=_bool(raw, "omitManagedFields", at))


def _stages(stages: list[str], at: str, errors: list[str]) -> frozenset[str]:
    for i, stage in enumerate(stages):
        if stage not in STAGES:
            errors.append(f"{at}[{i}]: Invalid value: {_q(stage)}: allowed stages are {','.join(STAGES)}")
    return frozenset(stages)


def _list(raw: Mapping[str, Any], key: str, at: str, item: type) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    where = f"{at}.{key}" if at else key
    if not isinstance(value, list):
        raise PolicyError(f"failed decoding: {where}: expected a list, not {_json_kind(value)}")
    for i, v in enumerate(value):
        if not isinstance(v, item) or isinstance(v, bool):
            want = "an object" if item is dict else "a string"
            raise PolicyError(f"failed decoding: {where}[{i}]: expected {want}, not {_json_kind(v)}")
    return value


def _bool(raw: Mapping[str, Any], key: str, at: str) -> bool | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, bool):
        where = f"{at}.{key}" if at else key
        raise PolicyError(f"failed decoding: {where}: expected a boolean, not {_json_kind(value)}")
    return value


def _warn_unknown(raw: Mapping[str, Any], known: set[str], at: str) -> None:
    """upstream's decoder drops unknown fields silently; a typo there (``userGroup``) widens a
    rule, so it is named in the log, and the file still taken as upstream takes it."""
    for key in raw:
        if key not in known:
            log.warning("audit policy: unknown field %s ignored", f"{at}.{key}" if at else key)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null"


def _q(s: Any) -> str:
    return quote(str(s))


def _go_strings(values: Iterable[str]) -> str:
    return "[]string{" + ", ".join(_q(v) for v in values) + "}"


def _one_line(message: str) -> str:
    return " ".join(message.split())


# -- annotations (upstream's audit.AddAuditAnnotation) ----------------------------------------------------

_CURRENT: ContextVar[_Request | None] = ContextVar("controlplane.audit", default=None)


def recording() -> bool:
    """Whether this request is audited (an annotation worth computing would be kept)."""
    return _CURRENT.get() is not None


def annotate(key: str, value: str, level: str = "Metadata") -> None:
    """Add an annotation to this request's audit event; the first value of a key stays, as upstream's.
    ``level``: the least the event's level must be for it to be logged (upstream's
    AddAnnotationWithLevel: a mutating webhook's patch only from ``Request`` on)."""
    request = _CURRENT.get()
    if request is not None and key not in request.annotations:
        request.annotations[key] = value
        if level != "Metadata":
            request.leveled[key] = LEVELS.index(level)


def decoded(body: bytes) -> bytes:
    """``body`` (a protobuf or YAML request body's JSON) is what the audit event logs of this request."""
    request = _CURRENT.get()
    if request is not None and request.body is not None:
        request.body = [body]
        request.decoded = True
    return body


def authorized(allowed: bool, reason: str = "") -> None:
    """The authorizer's decision on this request (upstream's WithAuthorization annotations)."""
    request = _CURRENT.get()
    if request is not None:
        request.annotations["authorization.k8s.io/decision"] = "allow" if allowed else "forbid"
        request.annotations["authorization.k8s.io/reason"] = reason


# -- events ---------------------------------------------------------------------------------------------

_second: tuple[int, str] = (-1, "")  # the last second formatted, and its text


def micro_time(t: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC (the second formatted once a second)."""
    global _second
    second = int(t)
    micros = round((t - second) * 1e6)  # (as datetime rounds it)
    if micros == 1_000_000:
        second, micros = second + 1, 0
    if _second[0] != second:
        _second = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{micros:06d}Z"


def source_ips(scope: Mapping[str, Any]) -> list[str]:
    """upstream's ``utilnet.SourceIPs``: the valid addresses of ``X-Forwarded-For``, then
    ``X-Real-Ip`` unless already there, then the peer unless it is the last one."""
    forwarded = real = b""
    for name, value in scope.get("headers", ()):
        if name == b"x-forwarded-for" and not forwarded:
            forwarded = value
        elif name == b"x-real-ip" and not real:
            real = value
    ips: list[str] = []
    for part in forwarded.decode("latin-1").split(",") if forwarded else ():
        ip = _ip(part.strip())
        if ip is not None:
            ips.append(ip)
    if real:
        ip = _ip(real.decode("latin-1").strip())
        if ip is not None and ip not in ips:
            ips.append(ip)
    client = scope.get("client")
    peer = _ip(str(client[0])) if client else None
    if peer is not None and (not ips or ips[-1] != peer):
        ips.append(peer)
    return ips


def _ip(text: str) -> str | None:
    """An address as Go's net.IP prints it; None if it is none (the peers' kept: every request has one)."""
    known = _IPS.get(text, _ip)
    if known is not _ip:
        return known  # type: ignore[return-value]
    try:
        ip: str | None = str(ipaddress.ip_address(text))
    except ValueError:
        ip = None
    if len(_IPS) >= 4096:
        _IPS.clear()
    _IPS[text] = ip
    return ip


_IPS: dict[str, str | None] = {}


def _auth_methods(scope: Mapping[str, Any]) -> str:
    """upstream's ``getAuthMethods``: what a request that failed authentication tried."""
    methods = []
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme = value.decode("latin-1").strip().split(" ", 1)
            if scheme[0].lower() == "basic":
                methods.append("basic")
            elif scheme[0].lower() == "bearer" and len(scheme) > 1:
                methods.append("bearer")
    if scope.get(CLIENT_CERT_SCOPE_KEY) is not None:
        methods.append("x509")
    return f"Authentication failed, attempted: {', '.join(methods)}" if methods else \
        "Authentication failed, no credentials provided"


def _without_managed_fields(obj: Any) -> Any:
    """The object (or list's items, or table rows' objects) without metadata.managedFields, in place."""
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    for item in obj.get("items") or () if isinstance(obj.get("items"), list) else ():
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
            item["metadata"].pop("managedFields", None)
    for row in obj.get("rows") or () if obj.get("kind") == "Table" and isinstance(obj.get("rows"), list) else ():
        inner = row.get("object") if isinstance(row, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("metadata"), dict):
            inner["metadata"].pop("managedFields", None)
    return obj


def _json_body(body: bytes, content_type: str, omit_managed_fields: bool, parse: bool = False) -> Any:
    """A body as the event embeds it; None if it is no JSON (or YAML) object or list. Compact
    JSON is kept as it is (checked, not rebuilt) unless managedFields are to be dropped or
    ``parse`` asks for the object."""
    if not body:
        return None
    stripped = body.strip()
    if not parse and stripped[:1] == b"{" and not omit_managed_fields and b"\n" not in stripped \
            and b"\r" not in stripped:
        try:
            orjson.loads(stripped)  # (well-formed, or the line would not be)
        except orjson.JSONDecodeError:
            return None
        return orjson.Fragment(stripped)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        if "yaml" not in content_type:
            return None
        try:
            obj = yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            return None
    if not isinstance(obj, dict | list):
        return None
    return _without_managed_fields(obj) if omit_managed_fields else obj


def _header(scope: Mapping[str, Any], wanted: bytes) -> bytes:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return bytes(value)
    return b""


_LEVEL_COUNTS = {level: AUDIT_LEVELS.labels(level) for level in LEVELS}


# -- the ASGI layer -------------------------------------------------------------------------------------

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Backend(Protocol):
    """Where audit events go (``auditlog.LogBackend``, ``auditwebhook.WebhookBackend``).

    One whose ``blocking`` is true (the webhook's ``blocking`` modes) is given each event by
    ``send`` instead, which the request waits for: False when the event could not be stored
    and the request must fail (``blocking-strict``)."""

    def process(self, event: Mapping[str, Any]) -> None: ...

    async def close(self) -> None: ...


def blocking(backend: Backend) -> bool:
    """Whether ``backend`` (or one of a union's) sends each event in the request's time."""
    return bool(getattr(backend, "blocking", False))


class Backends:
    """Several backends as one, as upstream's union backend: every event to each (and the
    request fails when one that blocks fails, as upstream's union answers)."""

    def __init__(self, backends: list[Backend]) -> None:
        self.backends = backends
        self.blocking = any(map(blocking, backends))

    def process(self, event: Mapping[str, Any]) -> None:
        for backend in self.backends:
            backend.process(event)

    async def send(self, event: Mapping[str, Any]) -> bool:
        stored = True
        for backend in self.backends:
            if blocking(backend):
                stored = await backend.send(event) and stored  # type: ignore[attr-defined]
            else:
                backend.process(event)
        return stored

    async def close(self) -> None:
        for backend in self.backends:
            await backend.close()


class Auditing:
    """The ASGI app auditing the requests of ``app`` (``api/app.py``'s router).

    ``attributes(scope)``: a request's authorization attributes (the policy matches them);
    ``user_scope_key``: where the router puts the request's user; ``always_allowed()``:
    whether no authorizer decides (AlwaysAllow: every request gets upstream's ``allow``)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], policy: Policy, backend: Backend,
                 attributes: Callable[[Scope], Attributes], user_scope_key: str,
                 always_allowed: Callable[[], bool]) -> None:
        self.app = app
        self.policy = policy
        self.backend = backend
        self.attributes = attributes
        self.user_scope_key = user_scope_key
        self.always_allowed = always_allowed

    def __getattr__(self, name: str) -> Any:  # the router's own attributes (discovery, kube, ...)
        if name == "app":  # (not set yet: no recursion)
            raise AttributeError(name)
        return getattr(self.app, name)

    async def close(self) -> None:
        await self.backend.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _Request(self, scope)
        token = _CURRENT.set(request)
        try:
            await self.app(scope, request.wrap_receive(receive), request.wrap_send(send))
        except Exception as e:
            request.panic(e)
            raise
        except BaseException:  # cancelled (the client went away): the request is over all the same
            request.complete()
            raise
        finally:
            _CURRENT.reset(token)
        request.complete()


class _Request:
    """One request's audit: its event as it fills, and the stages sent."""

    __slots__ = ("annotations", "attrs", "auditing", "body", "code", "decision", "decoded", "id", "leveled",
                 "long_running", "received", "response", "response_type", "scope", "started_sent", "static")

    def __init__(self, auditing: Auditing, scope: Scope) -> None:
        self.auditing = auditing
        self.scope = scope
        self.received = time.time()
        given = _header(scope, b"audit-id")
        self.id = given.decode("latin-1") if given else new_audit_id()
        try:
            self.attrs = auditing.attributes(scope)
        except ValueError:  # (a query string that is not UTF-8: the handler answers it; the path is logged)
            self.attrs = Attributes(str(scope.get("method", "")).lower(), path=scope.get("path", ""))
        self.long_running = self.attrs.verb in ("watch", "proxy") \
            or self.attrs.subresource in _LONG_RUNNING_SUBRESOURCES
        self.annotations: dict[str, str] = {}
        self.leveled: dict[str, int] = {}  # annotations logged only from a level on (LEVELS' index)
        self.decision: Decision | None = None
        self.static: dict[str, Any] = {}  # the event's fields set once the level is known
        self.code = 0
        self.started_sent = False
        self.body: list[bytes] | None = None  # the request's, kept when it will be logged
        self.decoded = False  # body: a protobuf or YAML one's JSON (decoded)
        self.response: list[bytes] | None = None  # the answer's, kept when it may be logged
        self.response_type = ""

    # the level is decided once the user is known: when the handler reads or answers
    def begin(self) -> Decision:
        scope = self.scope
        authenticated: User | None = scope.get(AUTHENTICATED_SCOPE_KEY)
        acting: User | None = scope.get(self.auditing.user_scope_key)
        user = authenticated or acting
        decision = self.decision = self.auditing.policy.evaluate(user, self.attrs)
        _LEVEL_COUNTS[decision.level].inc()
        if decision.level == "None":
            return decision
        attrs = self.attrs
        agent = _header(scope, b"user-agent").decode("latin-1")
        if len(agent) > _MAX_USER_AGENT:
            agent = agent[:_MAX_USER_AGENT] + "...TRUNCATED"
        query = scope.get("query_string", b"")
        path = scope.get("raw_path") or scope["path"].encode()
        static: dict[str, Any] = {
            "requestURI": (path + b"?" + query if query else path).decode("latin-1"),
            "verb": attrs.verb,
            "user": user.info() if user is not None else {},
        }
        if authenticated is not None and acting is not None:
            static["impersonatedUser"] = acting.info()
        static["sourceIPs"] = source_ips(scope)
        if agent:
            static["userAgent"] = agent
        if attrs.resource:
            static["objectRef"] = self._object_ref()
        self.static = static
        if attrs.verb in _BODY_VERBS and (decision.level != "Metadata" or attrs.verb in _WRITE_VERBS):
            self.body = []
        if decision.level == "RequestResponse" and not self.long_running:
            self.response = []
        if not self._failed_authentication():
            self.emit("RequestReceived")
        return decision

    def _object_ref(self) -> dict[str, str]:
        attrs = self.attrs
        parts = [p for p in self.scope["path"].split("/") if p]
        version = parts[1] if parts[:1] == ["api"] and len(parts) > 1 else parts[2] if len(parts) > 2 else ""
        resource, subresource = attrs.resource, attrs.subresource
        if resource == "pods" and subresource == "binding" and parts[-1:] == ["bindings"]:
            resource, subresource = "bindings", ""  # (upstream's RequestInfo: the bindings resource)
        ref = {"resource": resource}
        if attrs.namespace:
            ref["namespace"] = attrs.namespace
        if attrs.name:
            ref["name"] = attrs.name
        if attrs.api_group:
            ref["apiGroup"] = attrs.api_group
        ref["apiVersion"] = version
        if subresource:
            ref["subresource"] = subresource
        return ref

    def wrap_receive(self, receive: Receive) -> Receive:
        async def audited() -> dict[str, Any]:
            message = await receive()
            if self.decision is None:
                self.begin()
            if self.body is not None and message["type"] == "http.request":
                self.body.append(message.get("body", b""))
            return message

        return audited

    def wrap_send(self, send: Send) -> Send:
        async def audited(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                self.code = message["status"]
                if self.decision is None:
                    self.begin()
                headers = list(message.get("headers") or ())
                headers.append((b"Audit-Id", self.id.encode("latin-1", "replace")))
                if self.response is not None or self.code >= 400:
                    self.response = [] if self.response is None else self.response
                    self.response_type = next((v.decode("latin-1") for k, v in headers
                                               if k.lower() == b"content-type"), "")
                message = {**message, "headers": headers}
                if self.long_running and not self._failed_authentication() \
                        and self.decision is not None and self.decision.level != "None":
                    self.started_sent = True
                    self.emit("ResponseStarted")
            elif kind == "http.response.body" and self.response is not None:
                chunk = message.get("body", b"")
                if chunk and sum(map(len, self.response)) + len(chunk) <= _MAX_CAPTURED:
                    self.response.append(chunk)
                elif chunk:
                    self.response = None  # too big to log
            await send(message)

        return audited

    def _failed_authentication(self) -> bool:
        return self.code == 401 and self.scope.get(self.auditing.user_scope_key) is None

    def complete(self) -> None:
        decision = self.decision or self.begin()
        if decision.level == "None":
            return
        if self._failed_authentication():  # upstream's WithFailedAuthenticationAudit: one event
            self.emit("ResponseStarted", {"metadata": {}, "message": _auth_methods(self.scope), "code": 401})
            return
        if self.long_running and not self.started_sent:
            self.emit("ResponseStarted", {"metadata": {}, "status": "Success", "message": "Connection closed early",
                                          "code": 200})
        self.emit("ResponseComplete", self._status())

    def panic(self, e: BaseException) -> None:
        if (self.decision or self.begin()).level == "None":
            return
        self.emit("Panic", {"metadata": {}, "status": "Failure", "message": f"APIServer panic'd: {e!r}",
                            "reason": "InternalError", "code": 500})

    def _status(self) -> dict[str, Any]:
        if not self.code:  # nothing answered (the client went away first)
            return {"metadata": {}, "status": "Success", "message": "Connection closed early", "code": 200}
        status: dict[str, Any] = {"metadata": {}}
        answer = self._answer()
        if isinstance(answer, dict) and answer.get("kind") == "Status":
            for key in ("status", "message", "reason", "details"):  # (upstream's LogResponseObject copies these)
                if answer.get(key):
                    status[key] = answer[key]
        status["code"] = self.code
        return status

    def _answer(self) -> Any:
        """The answer's JSON, parsed (a Status is small; the rest only at RequestResponse)."""
        if not self.response or "json" not in self.response_type:
            return None
        body = b"".join(self.response)
        if self.code < 400 and not body.startswith(b'{"kind":"Status"'):
            return None
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None

    def emit(self, stage: str, status: dict[str, Any] | None = None) -> None:
        event = self._event(stage, status)
        if event is not None:
            self.auditing.backend.process(event)

    def _event(self, stage: str, status: dict[str, Any] | None) -> dict[str, Any] | None:
        """The event of ``stage``, counted; None when the policy omits the stage."""
        decision = self.decision
        assert decision is not None
        if stage in decision.omit_stages:
            return None
        now = self.received if stage == "RequestReceived" else time.time()
        event: dict[str, Any] = {"kind": "Event", "apiVersion": API_VERSION, "level": decision.level,
                                 "auditID": self.id, "stage": stage, **self.static}
        if status is not None:
            event["responseStatus"] = status
        elif stage == "ResponseStarted":
            event["responseStatus"] = {"metadata": {}, "code": self.code}
        if stage != "RequestReceived" and stage != "ResponseStarted":
            self._objects(event, decision)
        event["requestReceivedTimestamp"] = micro_time(self.received)
        event["stageTimestamp"] = micro_time(now)
        if self.code != 401 and "authorization.k8s.io/decision" not in self.annotations \
                and self.auditing.always_allowed():
            self.annotations["authorization.k8s.io/decision"] = "allow"  # (AlwaysAllow's, reason "")
            self.annotations["authorization.k8s.io/reason"] = ""
        if self.annotations:
            if self.leveled:
                at = LEVELS.index(decision.level)
                event["annotations"] = {k: v for k, v in self.annotations.items() if self.leveled.get(k, 0) <= at}
            else:
                event["annotations"] = dict(self.annotations)
        AUDIT_EVENTS.inc()
        return event

    def _objects(self, event: dict[str, Any], decision: Decision) -> None:
        """requestObject and responseObject (and the objectRef a create's or update's body completes)."""
        omit = decision.omit_managed_fields
        if self.body:
            content_type = "application/json" if self.decoded else \
                _header(self.scope, b"content-type").decode("latin-1")
            body = b"".join(self.body)
            if self.attrs.verb in _WRITE_VERBS:  # (parsed: its metadata completes the objectRef)
                sent = _json_body(body, content_type, omit, parse=True)
                meta = sent.get("metadata") if isinstance(sent, dict) else None
                if isinstance(meta, dict) and "objectRef" in event:
                    event["objectRef"] = _completed_ref(event["objectRef"], meta)
            else:
                sent = _json_body(body, content_type, omit)
            if sent is not None and decision.level != "Metadata":
                event["requestObject"] = sent
        if decision.level == "RequestResponse" and self.response and "json" in self.response_type:
            answer = _json_body(b"".join(self.response), self.response_type, omit)
            if answer is not None:
                event["responseObject"] = answer


_REF_FIELDS = ("resource", "namespace", "name", "uid", "apiGroup", "apiVersion", "resourceVersion", "subresource")



class _Refused(BaseException):
    """Raised into the handler when ``blocking-strict`` could not store the RequestReceived event."""


class BlockingAuditing(Auditing):
    """``Auditing`` over a backend that blocks (``--audit-webhook-mode blocking`` or
    ``blocking-strict``), as upstream's WithAudit filter over a backend not buffered: each
    event is sent in the request's time. The RequestReceived event before the handler reads
    the body or answers; ResponseStarted before the answer starts; ResponseComplete (or
    Panic) after the answer went out and before the request is done (upstream sends it
    before the answer it buffered is flushed). In ``blocking-strict``, a RequestReceived event
    that cannot be stored fails the request as upstream's filter does, before the handler
    goes on: a plain-text 500 ``Internal Server Error: "<uri>": failed to store audit
    event``, counted in ``apiserver_audit_requests_rejected_total``, and no other event."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _BlockingRequest(self, scope)
        token = _CURRENT.set(request)
        try:
            await self.app(scope, request.wrap_receive(receive), request.wrap_send(send))
        except _Refused:
            AUDIT_REJECTED.inc()
            uri = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
            query = scope.get("query_string", b"").decode("latin-1")
            text = f"Internal Server Error: {orjson.dumps(uri + ('?' + query if query else '')).decode()}: " \
                   "failed to store audit event"
            body = (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "\n").encode()
            await send({"type": "http.response.start", "status": 500, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        except Exception as e:
            request.panic(e)
            await request.flush()
            raise
        except BaseException:  # cancelled: its events sent all the same, by a task of their own
            request.complete()
            if request.unsent:
                task = asyncio.get_running_loop().create_task(request.flush())
                _FLUSHING.add(task)
                task.add_done_callback(_FLUSHING.discard)
            raise
        finally:
            _CURRENT.reset(token)
        request.complete()
        await request.flush()


_FLUSHING: set[asyncio.Task[bool]] = set()


class _BlockingRequest(_Request):
    """A request's audit whose events wait in ``unsent`` until the request sends them (``flush``)."""

    __slots__ = ("unsent",)

    def __init__(self, auditing: Auditing, scope: Scope) -> None:
        super().__init__(auditing, scope)
        self.unsent: list[dict[str, Any]] = []

    def emit(self, stage: str, status: dict[str, Any] | None = None) -> None:
        event = self._event(stage, status)
        if event is not None:
            self.unsent.append(event)

    async def flush(self) -> bool:
        """Send the events emitted so far, in order; False when the backend could not store one."""
        stored = True
        while self.unsent:
            event = self.unsent.pop(0)
            stored = await self.auditing.backend.send(event) and stored  # type: ignore[attr-defined]
        return stored

    async def _flush_or_refuse(self) -> None:
        while self.unsent:
            event = self.unsent.pop(0)
            if not await self.auditing.backend.send(event) and event["stage"] == "RequestReceived":  # type: ignore[attr-defined]
                self.unsent.clear()
                raise _Refused

    def wrap_receive(self, receive: Receive) -> Receive:
        audited = super().wrap_receive(receive)

        async def sent_first() -> dict[str, Any]:
            message = await audited()
            if self.unsent:
                await self._flush_or_refuse()
            return message

        return sent_first

    def wrap_send(self, send: Send) -> Send:
        async def sent_first(message: dict[str, Any]) -> None:
            if self.unsent:
                await self._flush_or_refuse()
            await send(message)

        return super().wrap_send(sent_first)


def _completed_ref(ref: dict[str, str], meta: Mapping[str, Any]) -> dict[str, str]:
    """The objectRef with what the request's object says of itself where the URL did not (upstream's
    LogRequestObject), in the ObjectReference's field order."""
    merged = dict(ref)
    for key in ("namespace", "name", "uid", "resourceVersion"):
        value = meta.get(key)
        if not merged.get(key) and isinstance(value, str) and value:
            merged[key] = value
    return {k: merged[k] for k in _REF_FIELDS if k in merged}
