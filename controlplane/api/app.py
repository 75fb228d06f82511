"""The ASGI application: ``create_app(config)``.

For now it serves what every kube-apiserver serves besides the API itself:

- ``/livez``, ``/readyz``, ``/healthz``: named checks, named and answered as
  kube-apiserver does (``ok``; ``?verbose`` lists each check; ``?exclude=NAME``
  skips one; ``/readyz/NAME`` runs one; a failure is HTTP 500 with the list;
  see ``_health_checks``);
- ``/version``: ``version.Info`` of Kubernetes 1.37;
- ``/metrics``: ``controlplane.metrics.REGISTRY`` in Prometheus text format
  (the ``controlplane_*`` series and kube-apiserver's ``apiserver_*`` ones);
- ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``: the service account
  issuer's discovery (``api/oidc.py``).

The lifespan opens the store (``store.open(config.store_url)``) and starts the
watch caches (``controlplane.watchcache``, every read goes through them) before
the server accepts connections, and closes them after the last one has finished;
``/readyz`` fails until the store is open, and its ``shutdown`` check fails
once the lifespan's shutdown begins.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

import store
from store.compactor import run_compactor

from .. import componentsmetrics
from ..client import ApiError as ClientApiError
from ..client import Client, resource_path
from ..client.transport import IN_PROCESS
from ..components import enabled, installed_crds
from ..components import start as start_components
from ..config import Config
from ..gcsettings import settle_heap
from ..heap import release_free_heap
from ..identities import CONTROLLER_MANAGER, TOKEN_PREFIX, Identities, admin_tokens, identity_key
from ..leaderelection import identity, run_elected
from ..metrics import (
    CONTENT_TYPE,
    OBJECT_COUNTS,
    STORE_COMMIT_BATCH_SIZE,
    STORE_COMMIT_SECONDS,
    exposition,
    monitor_event_loop_lag,
    observe_gc_pauses,
)
from ..registry import Registry, ResourceType, schema
from ..registry.attrs import field_names
from ..tokens import read_token_file
from ..version import version_info
from ..watchcache import CacheConfig, CacheReads, WatchCaches
from ..watchcache.entry import ATTRS, KEY, REVISION, Entry, entry_json
from . import podsecurity
from .audit import (
    AUTHENTICATED_SCOPE_KEY,
    Auditing,
    Backend,
    Backends,
    BlockingAuditing,
    authorized,
    blocking,
    load_policy,
    recording,
)
from .auditlog import LogBackend, LogOptions
from .auditwebhook import Truncation, WebhookBackend, WebhookOptions
from .dependents import COLLECTOR, DeleteObject, PatchObject
from .errors import ApiError
from .eventttl import EventExpiry
from .flowcontrol import DEBUG_PREFIX as FLOW_DEBUG
from .flowcontrol import FlowControl, MaxInFlight
from .flowcontrol import dump as flow_dump
from .flowmatch import Info
from .http1 import CLIENT_CERT_SCOPE_KEY
from .impersonation import impersonated
from .nodeauthz import Authorizers, NodeAuthorizer
from .oidc import PATHS as DISCOVERY_PATHS
from .oidc import Discovery, discovery_for
from .openapi import PREFIX as OPENAPI_V3
from .openapi import OpenApiV3, custom_resource_schema
from .openapiv2 import PATH as OPENAPI_V2
from .openapiv2 import OpenApiV2
from .rbac import ANONYMOUS, Authorizer, User, forbidden
from .rbac import Request as AuthzRequest
from .reads import StoreReads, list_options
from .rest import USER_SCOPE_KEY, KubeApi
from .tokenrequest import ServiceAccountKeys, TokenIssuer

__all__ = ["ServerState", "create_app"]

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"
_NOSNIFF = {"X-Content-Type-Options": "nosniff"}


@dataclass
class ServerState:
    """What the running server holds; ``app.state.server``."""

    config: Config
    store: store.Store | None = None
    shutting_down: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _clients: list[Client] = field(default_factory=list)  # the in-process components' (components.py)
    caches: WatchCaches | None = None
    hooks: set[str] = field(default_factory=set)  # POST_START_HOOKS done
    event_expiry: EventExpiry | None = None  # --event-ttl's (api/eventttl.py); None with 0
    # why the start failed, in one line, where the reason is the operator's to fix (a store
    # that cannot be opened): ``serve`` says it so, without the lifespan's traceback
    startup_error: str | None = None

    @property
    def components_client(self) -> Client | None:
        """The client the in-process components share (so one informer, one parsed copy of
        each object, serves them all), once they started; None without components."""
        return self._clients[0] if self._clients else None

    def caches_loaded(self) -> bool:
        """Every watch cache has loaded its initial state: until then reads wait or go to the store."""
        caches = self.caches
        return caches is not None and all(c.ready.is_set() and c.failed is None for c in caches.caches())


# A health check answers None when it passes, else why not: the reason is shown at
# /ENDPOINT/NAME only (and logged); the endpoint's list withholds it, as upstream's.
Check = Callable[[], Awaitable[str | None]]

# kube-apiserver's post-start hooks that have a step of this server's startup (the lifespan)
# to stand for, in the order upstream lists them; ServerState.hooks names those done
POST_START_HOOKS = (
    "generic-apiserver-start-informers",  # the watch caches started
    "storage-object-count-tracker-hook",  # apiserver_storage_objects served
    "start-apiextensions-informers",  # the CRD watch started
    "crd-informer-synced",  # the stored CRDs loaded
    "start-service-ip-repair-controllers",  # the Services' allocations repaired
    "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes",
    "start-system-namespaces-controller",
    "bootstrap-controller",  # the kubernetes Service and its endpoints
)


class StoreProbe:
    """The ``etcd`` (and ``etcd-readiness``) check: the store answers a revision read
    (LMDB: the WAL head; etcd: a count-only range) within ``TIMEOUT``, upstream's
    ``--etcd-healthcheck-timeout``. As upstream's etcd prober, it reads at most once every
    half timeout; a check in between gets the last read's result."""

    TIMEOUT = 2.0

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._at = -self.TIMEOUT
        self._error: str | None = None

    async def __call__(self) -> str | None:
        s = self.state.store
        if s is None:
            return "server is shutting down" if self.state.shutting_down else \
                "etcd client connection not yet established"
        now = time.monotonic()
        if now - self._at < self.TIMEOUT / 2:
            return self._error
        self._at = now
        try:
            await asyncio.wait_for(s.revision(), self.TIMEOUT)
        except TimeoutError:
            self._error = "context deadline exceeded"
        except Exception as e:  # whatever the store raises, the check fails with it
            self._error = f"{type(e).__name__}: {e}"
        else:
            self._error = None
        return self._error


def _passes(condition: Callable[[], bool], failure: str) -> Check:
    async def check() -> str | None:
        return None if condition() else failure

    return check


def _health_checks(state: ServerState, crds_served: Callable[[], bool]) -> dict[str, dict[str, Check]]:
    """Endpoint -> ordered checks, named and ordered as kube-apiserver's: ``ping``, ``log``,
    ``etcd`` and the post-start hooks on all three; ``/readyz`` adds ``etcd-readiness`` and
    ``informer-sync`` (the watch caches loaded) after ``etcd``, and ``shutdown`` last. As
    upstream, ``etcd`` is a liveness check too: a store that stops answering fails ``/livez``.
    This server's own, on ``/readyz`` only, before ``shutdown``:
    ``poststarthook/controlplane-component-crds``, the CRDs its components install served
    (``components.installed_crds``; always passing without any)."""
    ping = _passes(lambda: True, "")
    store_answers = StoreProbe(state)
    hooks: dict[str, Check] = {
        f"poststarthook/{name}": _passes(functools.partial(state.hooks.__contains__, name), "not finished")
        for name in POST_START_HOOKS}
    common: dict[str, Check] = {"ping": ping, "log": ping, "etcd": store_answers}
    return {
        "livez": {**common, **hooks},
        "healthz": {**common, **hooks},
        "readyz": {**common, "etcd-readiness": store_answers,
                   "informer-sync": _passes(state.caches_loaded, "the watch caches have not loaded"),
                   **hooks,
                   "poststarthook/controlplane-component-crds": _passes(
                       crds_served, "the components' CustomResourceDefinitions are not served yet"),
                   "shutdown": _passes(lambda: not state.shutting_down, "process is shutting down")},
    }


def _health_endpoint(endpoint: str, checks: dict[str, Check]) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        excluded = request.query_params.getlist("exclude")
        unknown = set(excluded) - checks.keys()
        lines: list[str] = []
        failed: list[str] = []
        for name, check in checks.items():
            if name in excluded:
                lines.append(f"[+]{name} excluded: ok")
                continue
            reason = await check()
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                failed.append(f"[-]{name} failed: {reason}")
                lines.append(f"[-]{name} failed: reason withheld")
        if unknown:
            names = ",".join(f'"{n}"' for n in sorted(unknown))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
        if failed:  # the list whether asked or not, as upstream
            log.info("%s check failed: %s", endpoint, "; ".join(failed))
            lines.append(f"{endpoint} check failed")
            return Response("\n".join(lines) + "\n", status_code=500, media_type=_TEXT, headers=_NOSNIFF)
        if "verbose" in request.query_params:
            lines.append(f"{endpoint} check passed")
            return Response("\n".join(lines) + "\n", media_type=_TEXT, headers=_NOSNIFF)
        return Response("ok", media_type=_TEXT, headers=_NOSNIFF)

    return handler


def _single_check(check: Check) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        reason = await check()
        if reason is None:
            return Response("ok", media_type=_TEXT, headers=_NOSNIFF)
        return Response(f"internal server error: {reason}\n", status_code=500, media_type=_TEXT,
                        headers=_NOSNIFF)

    return handler


class _KubeRoutes:
    """Sends ``/api`` and ``/apis`` requests straight to the Kubernetes API app,
    past FastAPI (the hot path), ``/openapi/v3`` and below and ``/openapi/v2`` to the OpenAPI documents,
    and everything else (lifespan included) on to FastAPI.

    With a token file, a request that presents credentials must present a token of
    one of its users, or gets 401, as kube-apiserver does. Over TLS a request with
    none gets 401 too. Over plain HTTP (``--no-tls``) a request with none is
    anonymous and, under AlwaysAllow, allowed: client-go sends credentials only
    over TLS, so kubectl sends none there. A client certificate the TLS handshake verified
    against ``--client-ca-file`` (api/http1.py) authenticates its subject before any token: its
    common name is the user, its organizations the groups. A service account token
    (api/tokenrequest.py) authenticates a request only if one of its audiences is the API's
    (``--api-audiences``), as upstream's: one made for Vault is refused (401)."""

    def __init__(self, app: Any, kube: KubeApi, openapi: OpenApiV3, tokens: dict[str, User] | None,
                 anonymous: bool, discovery: Discovery | None = None,
                 flow: FlowControl | MaxInFlight | None = None, identities: Identities | None = None,
                 identities_over_sockets: bool = False) -> None:
        self.app = app
        self.flow = flow  # API Priority and Fairness, or the max-in-flight limits (api/flowcontrol.py)
        # the built-in components' credentials (identities.py): the fixed ones parsed once, a kubelet's
        # checked as it comes; taken from this process's components only, unless they run in a process
        # of their own (--components-process), whose requests come over a socket
        self.identities = identities
        self.identities_over_sockets = identities_over_sockets
        self._identity_users = {token: User(user, groups) for token, (user, groups) in
                                identities.static_tokens().items()} if identities is not None else {}
        self.kube = kube
        self.openapi = openapi
        self.openapi_v2 = OpenApiV2(openapi)  # converted from the v3 documents, rebuilt when they change
        self.tokens = tokens
        self.anonymous = anonymous
        self.discovery = discovery  # the service account issuer's (api/oidc.py)
        self._parsed: dict[bytes, tuple[bytes, dict[str, Any]]] = {}  # key -> (JSON, object): _current_object's
        if tokens is not None:  # TokenReview authenticates as requests are (else nothing does)
            kube.authenticate_token = self.token_user

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/api" or path == "/apis" or path.startswith(("/api/", "/apis/")):
            target: Any = self.kube
        elif path == OPENAPI_V3 or path.startswith(OPENAPI_V3 + "/"):
            target = self.openapi
        elif path == OPENAPI_V2:
            target = self.openapi_v2
        elif (path == "/metrics" or path == "/metrics/slis") and self.kube.authorizer is not None:
            await self._non_resource(scope, receive, send, path, self.app)
            return
        elif path.startswith(FLOW_DEBUG) and isinstance(self.flow, FlowControl):  # (authorized as /metrics)
            await self._non_resource(scope, receive, send, path, self._flow_dump)
            return
        elif self.discovery is not None and path.rstrip("/") in DISCOVERY_PATHS:
            path = path.rstrip("/")  # (go-restful's routes, which upstream's are: a trailing slash trimmed)
            await self._non_resource(scope, receive, send, path, self.discovery)
            return
        else:  # /healthz, /version... (and /metrics under AlwaysAllow): anonymous allowed
            user = None
            if self.tokens is not None and scope["type"] == "http":
                user = await self._authenticated(scope)
                if user is None:
                    if _bears_a_token(scope):  # a bad token is refused, not taken as anonymous, as
                        await KubeApi._respond(send, 401, _UNAUTHORIZED)  # upstream's NewFailOnError
                        return
                    user = ANONYMOUS
            if self.flow is not None and scope["type"] == "http":  # flow control too
                await self.flow(scope, receive, send, self.app, user)
                return
            await self.app(scope, receive, send)
            return
        if target is not self.kube and self.tokens is not None and self.kube.authorizer is not None:
            await self._non_resource(scope, receive, send, path, target)  # system:discovery's /openapi/*
            return
        user = None
        if self.tokens is not None:
            user = await self._requester(scope, send)
            if user is None:
                return
            scope[USER_SCOPE_KEY] = user  # for the authorizer (--authorization-mode RBAC)
        if self.flow is not None:
            await self.flow(scope, receive, send, target, user)
            return
        await target(scope, receive, send)

    async def _flow_dump(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """API Priority and Fairness's debug dumps (api/flowcontrol.py), plain text as upstream's."""
        assert isinstance(self.flow, FlowControl)
        body = flow_dump(self.flow, scope["path"][len(FLOW_DEBUG):], scope.get("query_string", b"").decode("latin-1")) \
            if scope["method"] == "GET" else None
        code, text = (200, body) if body is not None else (404, b"404 page not found\n")
        await send({"type": "http.response.start", "status": code, "headers": [
            (b"content-type", _TEXT.encode()), (b"x-content-type-options", b"nosniff"),
            (b"content-length", str(len(text)).encode())]})
        await send({"type": "http.response.body", "body": text})

    async def _requester(self, scope: dict[str, Any], send: Any) -> User | None:
        """Who asks: the authenticated user, or the one it impersonates (``kubectl --as``); None
        once a 401 (or the impersonation's refusal) is sent."""
        user = await self._authenticated(scope)
        if user is None:
            await KubeApi._respond(send, 401, _UNAUTHORIZED)
            return None
        if any(n.startswith(b"impersonate-") for n, _ in scope.get("headers", ())):
            scope[AUTHENTICATED_SCOPE_KEY] = user  # (who impersonates: the audit log's user)
            try:
                user = await impersonated(scope, user, self.kube.authorizer, self.kube.rbac_request_of(scope))
            except ApiError as e:
                await KubeApi._respond(send, e.code, e.body())
                return None
        return user

    async def _non_resource(self, scope: dict[str, Any], receive: Any, send: Any, path: str, target: Any) -> None:
        """A non-resource path outside the API that upstream authorizes: ``/metrics`` (under RBAC:
        the group ``system:monitoring`` by the bootstrap policy, and ``system:masters``), the
        OpenAPI documents (every authenticated user, ``system:discovery``) and the issuer
        discovery (every service account). For whom a rule allows ``get`` on the path; a
        request without credentials is anonymous where the server takes anonymous ones."""
        user = await self._requester(scope, send) if self.tokens is not None else ANONYMOUS
        if user is None:
            return

        async def checked(scope: dict[str, Any], receive: Any, send: Any) -> None:
            need = AuthzRequest("get", path=path)
            authorizer = self.kube.authorizer
            if authorizer is not None:
                allowed = await authorizer.allowed(user, need)
                if recording():  # (the audit event's decision)
                    authorized(allowed, await authorizer.reason(user, need) if allowed else "")
                if not allowed:
                    await KubeApi._respond(send, 403, forbidden(user, need).body())
                    return
            await target(scope, receive, send)

        if self.flow is not None:  # (before authorization, as upstream's filter)
            await self.flow(scope, receive, send, checked, user)
            return
        await checked(scope, receive, send)

    async def _authenticated(self, scope: dict[str, Any]) -> User | None:
        subject = scope.get(CLIENT_CERT_SCOPE_KEY)
        if subject is not None:  # first, as kube-apiserver's x509 authenticator is before its token ones
            return User(subject[0], subject[1]).with_authenticated()
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return None
                token = token.strip()
                if token.startswith(TOKEN_PREFIX):
                    return self._identity(token, scope)
                found = await self.token_user(token)
                if found is None:
                    return None
                user, audiences = found
                issuer = self.kube.token_issuer
                if audiences is not None and issuer is not None and not any(a in issuer.audiences for a in audiences):
                    return None  # a token for someone else (Vault's, an OIDC relying party's): not for the API
                return user
        return ANONYMOUS if self.anonymous else None

    def _identity(self, token: str, scope: dict[str, Any]) -> User | None:
        """The built-in component ``token`` names (identities.py), if it is one of this server's
        and comes from where the components run; None otherwise (a 401)."""
        if self.identities is None or not (self.identities_over_sockets or scope.get("server") == IN_PROCESS):
            return None
        user = self._identity_users.get(token)
        if user is not None:
            return user
        found = self.identities.user_of(token)  # a kubelet's: one per node, checked, not held
        return User(found[0], found[1]) if found is not None else None

    async def token_user(self, token: str) -> tuple[User, list[str] | None] | None:
        """The user ``token`` authenticates, and the audiences it is good for (None for a
        static token: any of the server's); None if it authenticates nobody."""
        user = (self.tokens or {}).get(token)
        if user is not None:
            return user, None
        if token.count(".") == 2 and self.kube.token_issuer is not None:
            try:  # a service account's (TokenRequest)
                return await self.kube.token_issuer.authenticate(token, self._current_object)
            except (OSError, ValueError) as e:  # the generated key could not be made or read
                log.error("service account tokens cannot be verified: %s", e)
        return None

    async def _current_object(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A core object a service account token names (its account, its bound object), as the
        watch cache has it; one it lacks is looked for in the store (perhaps not cached yet).
        Each request of a pod presents its token, so the last parse of each object is kept and
        reused while its JSON is unchanged (comparing 5 kB costs a fraction of parsing them)."""
        rtype = self.kube.registry.get("", "v1", plural)
        if rtype is None:
            return None
        key = rtype.key(namespace, name)
        try:
            raw = await self.kube.reads.get(rtype, namespace, name, "0")
            if raw is None:
                kv = await self.kube.store.get(key)
                raw = kv.value if kv is not None else None
        except ApiError:  # the store is not open yet
            return None
        if raw is None:
            return None
        parsed = self._parsed.get(key)
        if parsed is not None and parsed[0] == raw:
            return parsed[1]
        obj: dict[str, Any] = orjson.loads(raw)
        if len(self._parsed) >= _PARSED_OBJECTS:
            del self._parsed[next(iter(self._parsed))]
        self._parsed[key] = (raw, obj)
        return obj


FLOWCONTROL_GROUP = "flowcontrol.apiserver.k8s.io"
_PEEK_WAIT = 10.0  # seconds the garbage collector's look-up of an owner waits for its kind's cache to load
_PARSED_OBJECTS = 4096  # the service accounts and bound objects of recent tokens, parsed

def _bears_a_token(scope: dict[str, Any]) -> bool:
    """Whether the request presents a bearer token (a non-empty one), as upstream's bearer token
    authenticator finds one: such a request is authenticated by it or refused, never anonymous."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            return scheme.lower() == "bearer" and bool(token.strip())
    return False


_UNAUTHORIZED = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401})


def _rbac_authorizer(kube: KubeApi, caches: WatchCaches) -> Authorizer:
    """The RBAC authorizer over the four cached RBAC types; re-indexed when one changes."""
    types = {plural: kube.registry.get("rbac.authorization.k8s.io", "v1", plural)
             for plural in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")}

    async def list_objects(plural: str) -> list[bytes]:
        rtype = types[plural]
        assert rtype is not None
        return (await kube.reads.list(rtype, None, list_options(rtype, None, {}))).items

    def changed() -> int:
        return sum(caches.cache_for(t).generation for t in types.values() if t is not None)

    return Authorizer(list_objects, changed)


def _objects(kube: KubeApi, state: ServerState, info: Info) -> tuple[int, int] | None:
    """How many objects the watch cache holds of a LIST's resource, and their average size
    (its width; None: unknown)."""
    rtype = kube.registry.get(info.group, info.version, info.plural)
    caches = state.caches
    if rtype is None or caches is None:
        return None
    cache = caches.cache_for(rtype)
    return (len(cache), cache.object_size()) if cache.ready.is_set() and cache.failed is None else None


def _watchers(kube: KubeApi, state: ServerState, info: Info) -> int:
    """How many watches a write of ``info``'s object may wake (its cost; 0: its type not cached)."""
    rtype = kube.registry.get(info.group, info.version, info.plural)
    caches = state.caches
    if rtype is None or caches is None:
        return 0
    cache = caches.cached(rtype)
    return cache.watchers.interested(info.namespace, info.name) if cache is not None else 0


async def _follow_flow_config(flow: FlowControl, kube: KubeApi, caches: WatchCaches, state: ServerState) -> None:
    """API Priority and Fairness configured from the cached FlowSchemas and
    PriorityLevelConfigurations now, and again whenever their caches move."""
    types = [kube.registry.get(FLOWCONTROL_GROUP, "v1", plural) for plural in ("flowschemas",
                                                                              "prioritylevelconfigurations")]

    async def read() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        lists = []
        for rtype in types:
            assert rtype is not None
            listed = await kube.reads.list(rtype, None, list_options(rtype, None, {}))
            lists.append([orjson.loads(raw) for raw in listed.items])
        return lists[0], lists[1]

    def generation() -> int:
        return sum(caches.cache_for(t).generation for t in types if t is not None)

    def moved() -> list[asyncio.Future[None]]:
        return [caches.cache_for(t).moved() for t in types if t is not None]

    seen = generation()
    flow.configure(*await read())
    state._tasks.append(asyncio.create_task(flow.follow(read, generation, moved, seen), name="flow-control-config"))
    state._tasks.append(asyncio.create_task(flow.rebalance(), name="flow-control-borrowing"))


def _pod_node(kube: KubeApi, caches: WatchCaches) -> Callable[[str, str], Awaitable[str | None]]:
    """A pod's ``spec.nodeName`` ("" unbound; None: no such pod), for NodeRestriction: from the
    watch cache's field values, no parse; from the store for one the cache has not seen yet."""
    pods = kube.registry.get("", "v1", "pods")
    assert pods is not None
    at = field_names("pods").index("spec.nodeName")

    async def pod_node(namespace: str, name: str) -> str | None:
        key = pods.key(namespace, name)
        entry = caches.cache_for(pods).get(key)
        if entry is not None:
            return entry[ATTRS][1][at]
        kv = await kube.store.get(key)
        if kv is None:
            return None
        return str((orjson.loads(kv.value).get("spec") or {}).get("nodeName") or "")

    return pod_node


class _CachedObjects:
    """The Node authorizer's reads (nodeauthz.Objects): the watch caches' current entries,
    the pods bound to a node by the pod cache's index on ``spec.nodeName``."""

    def __init__(self, registry: Registry, caches: WatchCaches) -> None:
        self._registry = registry
        self._caches = caches
        pods = registry.get("", "v1", "pods")
        assert pods is not None
        self._pods = pods
        self._node_at = field_names("pods").index("spec.nodeName")

    def pods_on(self, node: str) -> list[tuple[bytes, int, Any]]:
        cache = self._caches.cache_for(self._pods)
        if cache.index is None:
            return []
        get = cache.get
        return [(entry[KEY], entry[REVISION], entry) for entry in map(get, cache.index.members(node))
                if entry is not None]

    def pod_node(self, namespace: str, name: str) -> str | None:
        entry = self._caches.cache_for(self._pods).get(self._pods.key(namespace, name))
        return entry[ATTRS][1][self._node_at] if entry is not None else None

    def load(self, handle: Any) -> dict[str, Any]:
        entry: Entry = handle
        loaded: dict[str, Any] = orjson.loads(entry_json(entry))
        return loaded

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        rtype = self._registry.get(group, "v1", plural)  # (core, storage.k8s.io, resource.k8s.io: all v1)
        if rtype is None:
            return None
        entry = self._caches.cache_for(rtype).get(rtype.key(namespace or None, name))
        return self.load(entry) if entry is not None else None


def _requests_of(client: Client) -> tuple[DeleteObject, PatchObject]:
    """The garbage collector's deletes and merge patches as requests of ``client``, its errors
    the API's (api/dependents.py)."""
    def path(rtype: ResourceType, namespace: str | None, name: str) -> str:
        return resource_path(rtype.group, rtype.version, rtype.plural, namespace, name)

    async def delete(rtype: ResourceType, namespace: str | None, name: str, options: dict[str, Any]) -> object:
        try:
            return await client.delete(path(rtype, namespace, name), options)
        except ClientApiError as e:
            raise ApiError(e.code, e.reason, e.message) from e

    async def patch(rtype: ResourceType, namespace: str | None, name: str, body: dict[str, Any]) -> object:
        try:
            return await client.patch(path(rtype, namespace, name), body, patch_type="merge")
        except ClientApiError as e:
            raise ApiError(e.code, e.reason, e.message) from e

    return delete, patch


async def _peek(caches: WatchCaches, rtype: ResourceType, key: bytes) -> bytes | None:
    """An object's JSON as the watch cache holds it (b"": it holds no such key), for the garbage
    collector's look-ups of owners (api/dependents.py); None when the cache cannot say: none
    for the type, failed, or (after waiting for it to load) behind the store events the feed
    has handed out, so that an owner's delete the collector saw is never missed here."""
    cache = caches.cached(rtype)
    if cache is None or cache.failed is not None:
        return None
    if not cache.ready.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cache.ready.wait(), _PEEK_WAIT)
    if cache.revision < caches.revision:
        return None
    entry = cache.get(key)
    return b"" if entry is None else entry_json(entry)


def _object_counts(registry: Registry, caches: WatchCaches) -> list[tuple[str, str, int]]:
    """(group, resource, objects) of each loaded watch cache, for each type stored under its
    prefix (``apiserver_storage_objects``; read in a scrape's thread)."""
    served: dict[bytes, set[tuple[str, str]]] = {}
    for t in registry.all():
        served.setdefault(t.prefix(), set()).add((t.group, t.plural))
    counts: list[tuple[str, str, int]] = []
    for cache in caches.caches():
        if cache.ready.is_set() and cache.failed is None:
            n = len(cache)
            counts.extend((group, plural, n) for group, plural in served.get(cache.prefix, ()))
    return counts


def _observe_commit(batch_size: int, seconds: float) -> None:
    STORE_COMMIT_BATCH_SIZE.observe(batch_size)
    STORE_COMMIT_SECONDS.observe(seconds)


def create_app(config: Config) -> FastAPI:
    state = ServerState(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        caches: WatchCaches | None = None
        counts: Callable[[], list[tuple[str, str, int]]] | None = None  # OBJECT_COUNTS' source
        state._tasks.append(asyncio.create_task(monitor_event_loop_lag(), name="event-loop-lag"))
        observe_gc_pauses()
        try:
            log.info("opening store %s", config.store_url)
            try:
                s = store.open(config.store_url)
            except (store.StoreError, OSError, ValueError) as e:
                state.startup_error = f"cannot open the store {config.store_url}: {e}"
                raise
            if hasattr(s, "commit_observer"):  # the LMDB engine reports its group commits
                s.commit_observer = _observe_commit
            state.store = s
            if config.compaction_interval > 0:  # every server process: they take turns (store/compactor.py)
                def compacted(revision: int) -> None:  # the caches' snapshots from before it go
                    if state.caches is not None:
                        state.caches.compacted(revision)
                    # and the C heap's free pages back to the system, off the loop (heap.py: a long
                    # run's heap fragments, its free part growing by MBs a minute)
                    asyncio.get_running_loop().run_in_executor(None, release_free_heap)
                state._tasks.append(asyncio.create_task(run_compactor(s, config.compaction_interval, compacted),
                                                        name="store-compactor"))
            # the schemas (~0.7 s to load) are used by every write's managedFields: load them before serving
            await asyncio.to_thread(schema.definitions)
            try:
                await kube.bootstrap()
            except store.Unavailable as e:  # the first call to an etcd store: none of it answers
                state.startup_error = f"cannot open the store {config.store_url}: {e}"
                raise
            state.hooks.update(("crd-informer-synced", "scheduling/bootstrap-system-priority-classes",
                                "start-system-namespaces-controller", "bootstrap-controller"))
            # the Services' claims checked (made for data stored before them), the hint seeded;
            # then again every few minutes, in every process (api/allocations.py)
            await kube.allocations.repair()
            state.hooks.add("start-service-ip-repair-controllers")
            state._tasks.append(asyncio.create_task(kube.allocations.run(), name="service-allocation-repair"))
            # custom resources another server process defines appear here too
            state._tasks.append(asyncio.create_task(kube.crds.follow(s), name="crd-watch"))
            state.hooks.add("start-apiextensions-informers")
            revision = await s.revision()
            log.info("store open at revision %d", revision)
            caches = WatchCaches(s, CacheConfig(mode=config.watch_cache_snapshot))
            await caches.start()
            if kube.gc is not None:  # every process's writes noted, then those stored before (api/dependents.py)
                caches.observers.append(kube.gc.observe)
                caches.on_restart.append(kube.gc.restarted)
                kube.gc.follow(lambda: caches.revision, functools.partial(_peek, caches))
                if isinstance(app.state.front, Auditing) and identities is not None:
                    # audited, as upstream's collector's requests (kube-controller-manager's): its
                    # deletes and patches as requests to this process, only when something audits
                    gc_client = Client.in_process(app.state.front, token=identities.token(COLLECTOR.name))
                    state._clients.append(gc_client)
                    kube.gc.calls(*_requests_of(gc_client))
            if config.event_ttl > 0:  # Events deleted a TTL after their last write, as by etcd's leases
                expiry = EventExpiry(lambda: state.store, config.event_ttl)
                caches.observers.append(expiry.observe)
                caches.on_restart.append(expiry.restarted)
                state.event_expiry = expiry
                state._tasks.append(asyncio.create_task(expiry.run(), name="event-expiry"))
            for rtype in kube.registry.all():  # built-in types cached from the start, as upstream
                caches.cache_for(rtype)
            kube.reads = CacheReads(caches, StoreReads(lambda: kube.store))
            state.caches = caches
            OBJECT_COUNTS.source = counts = functools.partial(_object_counts, kube.registry, caches)
            state.hooks.update(("generic-apiserver-start-informers", "storage-object-count-tracker-hook"))
            if isinstance(flow, FlowControl):  # configured before serving, then as the objects change
                await _follow_flow_config(flow, kube, caches, state)
            await kube.bootstrap_rbac()  # in every mode, as upstream's rbac/bootstrap-roles hook
            state.hooks.add("rbac/bootstrap-roles")
            modes = config.authorization_modes()
            if modes != ("AlwaysAllow",):  # (AlwaysAllow alone: no authorizer on the requests' path)
                node = NodeAuthorizer(_pod_node(kube, caches), _CachedObjects(kube.registry, caches)) \
                    if "Node" in modes else None
                # (the RBAC authorizer in every mode: RBAC's escalation check resolves what a user holds by
                # the RBAC objects whatever the modes, as upstream's registry; it indexes them when first asked)
                kube.authorizer = Authorizers(modes, _rbac_authorizer(kube, caches), node)
                kube.node_restriction = node  # (NodeRestriction goes with the Node mode, as kubeadm enables both)
            settle_heap()  # the startup heap leaves the collector's sight (gcsettings)
            components = enabled(config)
            if components:
                # as kube-controller-manager: the shared informers and the leader election; each
                # component as its own identity (components.py)
                client = Client.in_process(app.state.front,
                                           token=identities.token(CONTROLLER_MANAGER) if identities else None)
                client.with_identities(identities.token if identities else None)
                state._clients.append(client)

                # under a Lease: several servers over one store run them once (leaderelection.py)
                state._tasks.append(asyncio.create_task(
                    run_elected(client, functools.partial(start_components, client, config, components),
                                identity(config.host, config.port)),
                    name="components-leader-election"))
            yield
        finally:
            state.shutting_down = True
            for task in state._tasks:
                task.cancel()
            await asyncio.gather(*state._tasks, return_exceptions=True)
            for client in state._clients:
                await client.aclose()
            if kube.webhooks is not None:
                await kube.webhooks.clients.close()
            if isinstance(app.state.front, Auditing):
                await app.state.front.close()  # (the events of the last requests written)
            if caches is not None:
                if OBJECT_COUNTS.source is counts:
                    OBJECT_COUNTS.source = None
                state.caches = None
                await caches.stop()
            if state.store is not None:
                s, state.store = state.store, None
                await s.close()
                log.info("store closed")

    # FastAPI's own /docs, /redoc and /openapi.json would shadow nothing of
    # Kubernetes' but answer paths kube-apiserver does not; the OpenAPI of
    # this server is /openapi/v3, built from the registry.
    # No redirect of a path with a trailing slash to the one without (Starlette's default): as
    # upstream's mux, /healthz/ and /metrics/ are 404; /version/ is /version, which go-restful
    # serves with a trailing slash trimmed
    app = FastAPI(title="controlplane", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  redirect_slashes=False)
    app.state.server = state
    kube = KubeApi(Registry(), lambda: state.store, f"{config.host}:{config.port}")
    kube.admission_webhooks(config.admission_webhooks)
    kube.taint_nodes_at_creation = "TaintNodesByCondition" not in config.disable_admission_plugins
    if config.admission_control_config_file is not None:
        kube.pod_security = podsecurity.load_configuration(config.admission_control_config_file)
    discovery = None
    try:
        if config.service_account_signing_key_file is None:  # the generated key, made on first use
            config.pki_dir.mkdir(parents=True, exist_ok=True)
        kube.token_issuer = TokenIssuer(
            ServiceAccountKeys(config.service_account_signing_key_file, config.service_account_key_files,
                               generated_in=config.pki_dir),
            config.service_account_issuers, config.api_audiences,
            max_seconds=int(config.service_account_max_token_expiration),
            extend=config.service_account_extend_token_expiration)
        discovery = discovery_for(kube.token_issuer, config.service_account_jwks_uri, config.server_url)
    except OSError as e:  # a state directory this process may not write: no service account tokens
        log.warning("service account tokens disabled: %s", e)
    if config.scheduler:  # the workload controllers run with the scheduler (components.py)
        kube.garbage_collected = frozenset({("apps", "deployments"), ("apps", "replicasets"), ("batch", "jobs"),
                                            ("batch", "cronjobs"), ("apps", "daemonsets"),
                                            ("apps", "statefulsets")})
        kube.storage_protected = True  # the persistent volume and PodGroup protection controllers run too
        # every kind's dependents collected once its objects go (api/dependents.py)
        if config.controller_enabled("garbage-collector-controller"):
            kube.collect_garbage()
            assert kube.gc is not None
            kube.gc.first = not config.forked_worker  # (the first process scans for them all)
    # the served types' documents; app.state.openapi.invalidate(group, version) when they change
    openapi = app.state.openapi = OpenApiV3(kube.registry)

    def republish(t: ResourceType) -> None:
        """A custom resource type came or went: its group-version's document changes."""
        schema = custom_resource_schema(t)
        if schema is not None and kube.registry.get(t.group, t.version, t.plural) is t:
            openapi.set_schema(t.group, t.version, t.kind, schema)
        openapi.invalidate(t.group, t.version)

    kube.crds.listeners.append(republish)
    tokens = None
    identities = None  # the in-process components' credentials (identities.py)
    if config.token_auth_file is not None:
        entries = read_token_file(config.token_auth_file)
        tokens = {e.token: User(e.user, e.groups, uid=e.uid).with_authenticated() for e in entries}
        key = identity_key(admin_tokens(entries))
        identities = Identities(key) if key is not None else None
    flow: FlowControl | MaxInFlight = \
        FlowControl(config.max_requests_inflight + config.max_mutating_requests_inflight,
                    functools.partial(_objects, kube, state), functools.partial(_watchers, kube, state)) \
        if config.enable_priority_and_fairness else \
        MaxInFlight(config.max_requests_inflight, config.max_mutating_requests_inflight)
    # In front of FastAPI, not inside its middleware stack: the Kubernetes API is
    # the hot path, and FastAPI's own layers (error, telemetry and body-limit
    # middleware) cost about a tenth of a pod create. ``serve`` runs ``front``.
    front = _KubeRoutes(app, kube=kube, openapi=openapi, tokens=tokens, anonymous=not config.tls,
                        discovery=discovery, flow=flow, identities=identities,
                        identities_over_sockets=config.components_process)
    app.state.front = _audited(front, config, kube) \
        if config.audit.policy_file or config.audit.path or config.audit.webhook_config_file else front

    component_crds = installed_crds(config)
    # Starlette's plain routes, each handler taking the request: FastAPI's ``add_api_route`` analyses
    # a handler's signature for its dependencies, ~0.5 ms a route, and the checks are some 200 routes
    for endpoint, checks in _health_checks(state, lambda: all(map(kube.crds.serves, component_crds))).items():
        app.add_route(f"/{endpoint}", _health_endpoint(endpoint, checks), methods=["GET"], include_in_schema=False)
        for name, check in checks.items():
            app.add_route(f"/{endpoint}/{name}", _single_check(check), methods=["GET"], include_in_schema=False)

    version = orjson.dumps(version_info(), option=orjson.OPT_INDENT_2)

    @app.get("/version", include_in_schema=False)
    @app.get("/version/", include_in_schema=False)
    async def get_version() -> Response:
        return Response(version, media_type="application/json")

    components_families = componentsmetrics.skipped_families()  # (serve --components-process)

    @app.get("/metrics", include_in_schema=False)
    def get_metrics() -> Response:  # sync: FastAPI runs it in a worker thread, off the event loop
        if not components_families:
            return Response(exposition(), media_type=CONTENT_TYPE)
        return Response(exposition(skip=components_families) + componentsmetrics.fetch(), media_type=CONTENT_TYPE)

    @app.get("/", include_in_schema=False)
    async def get_root() -> Response:
        """The paths served, as kube-apiserver's index."""
        paths = {"/api", "/api/v1", "/apis", "/metrics", "/openapi/v2", "/openapi/v3", "/version", "/healthz",
                 "/livez", "/readyz"}
        if front.discovery is not None:
            paths.update(DISCOVERY_PATHS)
        for group, versions in kube.registry.groups().items():
            if group:
                paths.add(f"/apis/{group}")
                paths.update(f"/apis/{group}/{v}" for v in versions)
        return Response(orjson.dumps({"paths": sorted(paths)}, option=orjson.OPT_INDENT_2),
                        media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    async def as_status(request: Request, exc: StarletteHTTPException) -> Response:
        """Errors of the paths outside the API (a path nothing serves, a wrong method) as a
        Kubernetes Status, as kube-apiserver answers them."""
        reason, message = _NON_API_ERRORS.get(exc.status_code, ("", str(exc.detail)))
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                "reason": reason, "details": {}, "code": exc.status_code}
        return Response(orjson.dumps(body), status_code=exc.status_code, media_type="application/json")

    return app


def _audited(front: _KubeRoutes, config: Config, kube: KubeApi) -> Any:
    """The router behind audit logging (api/audit.py), when a policy and a backend (a log, a
    webhook) are configured (as upstream: a policy without a backend, or a backend without a
    policy, audits nothing); the router as it is otherwise, so that a server without them pays
    nothing."""
    audit = config.audit
    if audit.policy_file is None:
        log.warning("audit backends without --audit-policy-file: no audit events are recorded")
        return front
    policy = load_policy(audit.policy_file)
    if not audit.enabled:
        log.warning("--audit-policy-file without --audit-log-path or --audit-webhook-config-file: "
                    "no audit events are recorded")
        return front
    backends: list[Backend] = []
    if audit.path:
        backends.append(LogBackend(LogOptions(audit.path, audit.format, audit.mode, audit.max_age,
                                              audit.max_backups, audit.max_size, audit.compress, audit.buffer_size,
                                              Truncation(*audit.truncate) if audit.truncate else None)))
        log.info("audit log: %s (%s, %s)", audit.path, audit.format, audit.mode)
    if audit.webhook_config_file is not None:
        webhook = WebhookBackend(WebhookOptions(
            audit.webhook_config_file, audit.webhook_mode, audit.webhook_buffer_size, audit.webhook_max_size,
            audit.webhook_max_wait, audit.webhook_throttle_enable, audit.webhook_throttle_qps,
            audit.webhook_throttle_burst, audit.webhook_initial_backoff, audit.webhook_version,
            Truncation(*audit.webhook_truncate) if audit.webhook_truncate else None))
        backends.append(webhook)
        log.info("audit webhook: %s (%s)", webhook.url, f"batches of {audit.webhook_max_size}"
                 if audit.webhook_mode == "batch" else audit.webhook_mode)
    log.info("audit policy %s with %d rules", audit.policy_file, len(policy.rules))
    backend = backends[0] if len(backends) == 1 else Backends(backends)
    auditing = BlockingAuditing if blocking(backend) else Auditing  # (a batch webhook, a log: no wait)
    return auditing(front, policy, backend, kube.rbac_request_of, USER_SCOPE_KEY, lambda: kube.authorizer is None)


_NON_API_ERRORS = {
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
}
