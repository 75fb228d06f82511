"""An asynchronous Kubernetes API client for the emulator's own components.

The scheduler, the node simulator and the autoscaler are clients of the API,
as their upstream counterparts are: they learn from watches and write through
REST calls, never behind the API's back. The same ``Client`` talks to a
server over a socket (``from_kubeconfig``) or to the app in this process
(``in_process``: the whole API, no socket, see ``transport``).

    c = Client.from_kubeconfig(".controlplane/kubeconfig")
    pod = await c.get(resource_path("", "v1", "pods", "default", "web-0"))
    async for ev in c.watch(resource_path("", "v1", "pods"), resource_version=rv,
                            field_selector="spec.nodeName=node-1"):
        ...
"""

from __future__ import annotations

import asyncio
import base64
import copy
import ssl
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import orjson
import yaml

from ..mergepatch import merge_patch
from .transport import InProcessTransport, call, open_stream, raw_path
from .wire import ConnectionPool

if TYPE_CHECKING:
    from .informer import Handler, InformerHandle, SharedInformer, UpdateHandler

__all__ = ["PATCH_TYPES", "ApiError", "Client", "KubeconfigError", "WatchEvent", "resource_path"]

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

_JSON = {"Accept": "application/json"}


def resource_path(group: str, version: str, plural: str, namespace: str | None = None,
                  name: str | None = None, subresource: str | None = None) -> str:
    """The REST path of a collection or an object.

    >>> resource_path("", "v1", "pods", "ns", "p", "status")
    '/api/v1/namespaces/ns/pods/p/status'
    >>> resource_path("apps", "v1", "deployments")
    '/apis/apps/v1/deployments'
    """
    parts = ["/api/v1" if not group else f"/apis/{group}/{version}"]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


class ApiError(Exception):
    """A non-2xx answer: ``code`` and ``reason`` from the server's ``Status``; ``retry_after``
    its ``Retry-After`` header, if any (as the transport kept it)."""

    def __init__(self, code: int, reason: str, message: str, status: dict[str, Any] | None = None,
                 retry_after: bytes | str | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}
        self.retry_after = retry_after.decode("latin-1") if isinstance(retry_after, bytes) else retry_after

    @classmethod
    def from_response(cls, r: httpx.Response) -> ApiError:
        return cls.from_body(r.status_code, r.content, r.headers.get("retry-after"))

    @classmethod
    def from_body(cls, code: int, content: bytes, retry_after: bytes | str | None = None) -> ApiError:
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls(code, str(body.get("reason", "")), str(body.get("message", "")), body, retry_after)
        return cls(code, "", content[:200].decode("utf-8", "replace"), retry_after=retry_after)


# client-go's maxRetries: how many times a request is sent again after a 429 or 5xx that names a wait
RETRIES_429 = 10


def retry_after(error: ApiError) -> float | None:
    """The seconds a 429 or a 5xx asks the client to wait before trying again; None: not to
    be retried (nor is any other answer). kube-apiserver's flow control and max-in-flight
    filters answer a request they could not take with plain text and ``Retry-After`` (1 s at
    first, up to 32 s as it keeps dropping requests), and a 5xx ``Status`` naming
    ``details.retryAfterSeconds`` carries the header too (a 504 for a resourceVersion the
    server has not reached, a 500 server timeout); client-go waits the header's whole seconds
    and sends the request again (``rest/request.go``/``with_retry.go``: ``checkWait``, which
    takes a 429 or any code from 500 up, and ``retryAfterSeconds``), and so does this client
    (every transport keeps that header). An answer without a header that parses is not
    retried, as client-go's; but for a ``Status`` naming ``details.retryAfterSeconds``
    (upstream sets the header from it): a PodDisruptionBudget refusing an eviction names
    none, and is the caller's at once.

    >>> retry_after(ApiError(503, "ServiceUnavailable", "", retry_after="2"))
    2.0
    >>> retry_after(ApiError(500, "InternalError", "")) is None
    True
    >>> retry_after(ApiError(409, "Conflict", "", retry_after="2")) is None
    True
    """
    if error.code != 429 and error.code < 500:
        return None
    header = error.retry_after
    if header is not None:
        text = header.strip()
        if text.lstrip("+-").isdigit():  # (Go's strconv.Atoi: an optional sign, then digits)
            return max(float(int(text)), 0.0)
    seconds = (error.status.get("details") or {}).get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, int) and seconds > 0 else None


class KubeconfigError(ValueError):
    """A kubeconfig this client cannot use: unreadable, not YAML, its current context, cluster or
    user missing, or credentials it does not present (an exec plugin, an auth provider). The
    message names the file and what is wrong, for a command to print as it is."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict[str, Any]


def _query(query: dict[str, Any]) -> dict[str, str]:
    return {k: ("true" if v is True else "false" if v is False else str(v))
            for k, v in query.items() if v is not None}


class Client:
    """One connection pool to one server. Every call raises ``ApiError`` on a non-2xx answer."""

    def __init__(self, base_url: str, *, token: str | None = None, verify: ssl.SSLContext | bool = True,
                 transport: httpx.AsyncBaseTransport | None = None, timeout: float = 30.0) -> None:
        headers = {"User-Agent": "controlplane-client"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=100)
        # in process, single-answer requests skip httpx for the bare ASGI exchange (transport.call)
        self._app = transport.app if isinstance(transport, InProcessTransport) else None
        self._auth = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._json = _JSON  # a request's own headers (over a socket): Accept, and an agent's User-Agent
        # (and a view's own Authorization: as_user)
        self._root = self  # whose credentials (its _auth) the shared informers present (as_user)
        self._mint: Callable[[str], str] | None = None  # an identity's token (as_identity)
        self._updates: frozenset[str] = frozenset()  # what merge patches are made as updates (updating)
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, verify=verify, transport=transport,
                                      timeout=httpx.Timeout(timeout), limits=limits)
        # over a socket, requests and watches skip httpx too (wire.py)
        self._pool = ConnectionPool(base_url, headers=headers, verify=verify, timeout=timeout) \
            if transport is None else None
        self._shared: dict[str, SharedInformer] = {}

    def as_agent(self, product: str) -> Client:
        """This client, its connections and its shared informers, for a component that writes
        as ``product`` (``kube-scheduler``, ``kubelet``, ``kube-controller-manager``): its requests
        carry the User-Agent ``<product>/<version> (linux/amd64) controlplane``, from which the
        server names the field manager of a write that names none, as upstream's clients do."""
        from controlplane.version import GIT_VERSION

        agent = f"{product}/{GIT_VERSION} (linux/amd64) controlplane"
        view = copy.copy(self)
        view._auth = [*(h for h in self._auth if h[0] != b"user-agent"), (b"user-agent", agent.encode())]
        view._json = {**self._json, "User-Agent": agent}
        return view

    def as_user(self, token: str | None) -> Client:
        """This client, its connections and its shared informers, presenting ``token`` on its
        requests (a component's identity: ``controlplane.identities``); None: this client's own.
        The shared informers list and watch with the credentials of the client this one was
        made from (``in_process``, ``from_kubeconfig``), as kube-controller-manager's shared
        informers run as itself while each controller writes as its service account."""
        if token is None:
            return self
        view = copy.copy(self)
        view._auth = [(b"authorization", f"Bearer {token}".encode()),
                      *(h for h in self._auth if h[0] != b"authorization")]
        view._json = {**self._json, "Authorization": f"Bearer {token}"}
        return view

    def for_informers(self) -> Client:
        """This view with the credentials of the client it was made from (``as_user``), for the
        informers: they list and watch as kube-controller-manager's shared informers do, as
        itself, whichever controller reads them."""
        if "Authorization" not in self._json:
            return self
        lister = copy.copy(self)
        lister._auth = [*self._root._auth, *(h for h in self._auth if h[0] != b"authorization")]
        lister._json = {k: v for k, v in self._json.items() if k != "Authorization"}
        return lister

    def with_identities(self, mint: Callable[[str], str] | None) -> Client:
        """This client, able to act as the built-in components' identities: ``mint(user)`` is a
        user's token (``controlplane.identities.Identities.token``). Call before making views."""
        self._mint = mint
        return self

    def as_identity(self, user: str) -> Client:
        """This client presenting the token of ``user``, an identity of the built-in components
        (``controlplane.identities``: ``system:kube-scheduler``, a controller's service account,
        ``system:node:<node>``); as it is when it was given no way to make one (``with_identities``:
        no token file, or a client of another server)."""
        mint = self._mint
        return self.as_user(mint(user)) if mint is not None else self

    def as_component(self, product: str, user: str) -> Client:
        """``as_identity(user)`` with ``as_agent(product)``: a component's view."""
        return self.as_identity(user).as_agent(product)

    @classmethod
    def in_process(cls, app: Any, token: str | None = None) -> Client:
        """The ASGI app of this process (``create_app(config).state.front``)."""
        return cls("http://in-process", token=token, transport=InProcessTransport(app))

    @classmethod
    def from_kubeconfig(cls, path: str | Path, context: str | None = None, server: str | None = None,
                        token: str | None = None) -> Client:
        """The current (or named) context of a kubeconfig: server (unless ``server``), CA, and a bearer
        token or a client certificate (``client-certificate``/``client-key`` files or their ``-data``,
        as kind's and kubeadm's ``admin.conf``); relative paths are the kubeconfig's directory's, as
        client-go reads them. ``token``: presented instead of the user's credentials (the server's
        own components, ``serve --components-process``). Raises ``KubeconfigError``."""
        url, token, verify = kubeconfig_target(path, context, server, token)
        return cls(url, token=token, verify=verify)

    def informer(self, path: str, *, on_add: Handler | None = None, on_update: UpdateHandler | None = None,
                 on_delete: Handler | None = None, page_size: int = 500, optional: bool = False) -> InformerHandle:
        """A handle on this client's one informer of ``path`` (a whole collection, no
        selectors), shared with every other caller: the components in one process list
        and watch each collection once. Run the handle as an ``Informer``. ``optional``:
        the server may not serve it (``Informer.optional``), unless another caller needs it."""
        from .informer import InformerHandle, SharedInformer

        shared = self._shared.get(path)
        if shared is None:
            shared = self._shared[path] = SharedInformer(self.for_informers(), path, page_size=page_size)
            shared.optional = optional
        elif not optional:
            shared.optional = False
        return InformerHandle(shared, on_add, on_update, on_delete)

    async def aclose(self) -> None:
        for shared in self._shared.values():
            await shared.stop()
        if self._pool is not None:
            await self._pool.aclose()
        await self.http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ verbs

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      **query: Any) -> dict[str, Any]:
        """One request, its answer parsed. A 429 or 5xx the server asks to retry is retried
        after the wait it names, up to ``RETRIES_429`` times, as client-go does (see
        ``retry_after``)."""
        content = None
        if body is not None:
            content = body if isinstance(body, bytes) else orjson.dumps(body)
        for _ in range(RETRIES_429):
            try:
                return await self._request(method, path, content, content_type, query)
            except ApiError as e:
                wait = retry_after(e)
                if wait is None:
                    raise
                await asyncio.sleep(wait)
        return await self._request(method, path, content, content_type, query)

    async def _request(self, method: str, path: str, content: bytes | None, content_type: str,
                       query: dict[str, Any]) -> dict[str, Any]:
        if self._app is not None:
            headers = [*self._auth, (b"accept", b"application/json")]
            if content is not None:
                headers.append((b"content-type", content_type.encode()))
            status, answer, wait = await call(self._app, method, path, urlencode(_query(query)).encode(), headers,
                                              content or b"")
            if status >= 300:
                raise ApiError.from_body(status, answer, wait)
            result: dict[str, Any] = orjson.loads(answer)
            return result
        hdrs = dict(self._json)
        if content is not None:
            hdrs["Content-Type"] = content_type
        if self._pool is not None:
            params = urlencode(_query(query))
            status, answer, wait = await self._pool.request(method, f"{path}?{params}" if params else path, content,
                                                            hdrs)
            if status >= 300:
                raise ApiError.from_body(status, answer, wait)
            result = orjson.loads(answer)
            return result
        r = await self.http.request(method, path, content=content, params=_query(query), headers=hdrs)
        if r.status_code >= 300:
            raise ApiError.from_response(r)
        result = orjson.loads(r.content)
        return result

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        return await self.request("GET", path, **query)

    async def list(self, path: str, **query: Any) -> dict[str, Any]:
        return await self.request("GET", path, **query)

    async def create(self, path: str, body: dict[str, Any], **query: Any) -> dict[str, Any]:
        return await self.request("POST", path, body, **query)

    async def update(self, path: str, body: dict[str, Any], **query: Any) -> dict[str, Any]:
        return await self.request("PUT", path, body, **query)

    async def patch(self, path: str, body: Any, patch_type: str = "merge", **query: Any) -> dict[str, Any]:
        if self._updates and patch_type == "merge" and isinstance(body, dict) and _written(path) in self._updates:
            return await self._patch_by_update(path, body, query)
        return await self.request("PATCH", path, body, content_type=PATCH_TYPES[patch_type], **query)

    def updating(self, written: frozenset[str]) -> Client:
        """This view writing ``written`` (``<plural>`` or ``<plural>/<subresource>``) by ``update``
        where it asks for a merge patch (``patch``): the object read (its main resource), the
        patch applied here, the result PUT at its resourceVersion, again on a conflict; as
        upstream's controllers write those (``UpdateStatus``, ``Update``), and as the roles
        their service accounts are bound to allow (``update``, not ``patch``)."""
        view = copy.copy(self)
        view._updates = written
        return view

    async def _patch_by_update(self, path: str, body: dict[str, Any], query: dict[str, Any]) -> dict[str, Any]:
        main = path.rsplit("/", 1)[0] if _written(path).count("/") else path
        collection, name = main.rsplit("/", 1)
        for attempt in range(_UPDATE_ATTEMPTS):
            # read as the controllers' roles allow (list, watch; not always get): listed by its name
            listed = await self.list(collection, fieldSelector=f"metadata.name={name}")
            if not listed.get("items"):
                raise ApiError(404, "NotFound", f'"{name}" not found')
            current = {"apiVersion": listed.get("apiVersion"), "kind": str(listed.get("kind", "")).removesuffix("List"),
                       **listed["items"][0]}
            try:
                return await self.update(path, merge_patch(current, body), **query)
            except ApiError as e:
                if e.code != 409 or attempt == _UPDATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def delete(self, path: str, body: dict[str, Any] | None = None, **query: Any) -> dict[str, Any]:
        return await self.request("DELETE", path, body, **query)

    async def watch(self, path: str, *, resource_version: str | None = None, field_selector: str | None = None,
                    label_selector: str | None = None, send_initial_events: bool = False,
                    allow_bookmarks: bool = True,
                    timeout_seconds: int | None = None) -> AsyncGenerator[WatchEvent, None]:
        """The events of a watch, until the server ends it. An expired
        ``resource_version`` raises ``ApiError`` 410 (as an HTTP answer or an ERROR event)."""
        query = {"watch": True, "resourceVersion": resource_version, "fieldSelector": field_selector,
                 "labelSelector": label_selector, "allowWatchBookmarks": allow_bookmarks or None,
                 "timeoutSeconds": timeout_seconds}
        if send_initial_events:
            query["sendInitialEvents"] = True
            query["resourceVersionMatch"] = "NotOlderThan"
        if self._app is not None:  # in process: the app's chunks as it sends them, without httpx
            status, _, body = await open_stream(self._app, "GET", raw_path(path), urlencode(_query(query)).encode(),
                                                [*self._auth, (b"accept", b"application/json")], b"")
            try:
                if status >= 300:
                    raise ApiError.from_body(status, b"".join([c async for c in body]))
                async for event in _events(body):
                    yield event
            finally:
                await body.aclose()
            return
        if self._pool is not None:
            params = urlencode(_query(query))
            async with self._pool.stream("GET", f"{path}?{params}", self._json) as (status, chunks):
                if status >= 300:
                    raise ApiError.from_body(status, b"".join([c async for c in chunks]))
                async for event in _events(chunks):
                    yield event
            return
        timeout = httpx.Timeout(30.0, read=None)
        async with self.http.stream("GET", path, params=_query(query), headers=self._json, timeout=timeout) as r:
            if r.status_code >= 300:
                await r.aread()
                raise ApiError.from_response(r)
            chunks = r.aiter_bytes() if r.headers.get("content-encoding") else r.aiter_raw()
            async for event in _events(chunks):
                yield event


async def _events(chunks: AsyncIterable[bytes]) -> AsyncGenerator[WatchEvent, None]:
    """A watch's events from its body: JSON lines, split here as bytes (httpx's text and
    line decoders cost more than the parse, and orjson takes bytes)."""
    rest = b""
    async for chunk in chunks:
        if rest:
            chunk = rest + chunk
        lines = chunk.split(b"\n")
        rest = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
            if kind == "ERROR":
                raise ApiError(int(obj.get("code", 500)), str(obj.get("reason", "")),
                               str(obj.get("message", "")), obj)
            yield WatchEvent(kind, obj)



def kubeconfig_target(path: str | Path, context: str | None = None, server: str | None = None,
                      token: str | None = None) -> tuple[str, str | None, ssl.SSLContext | bool]:
    """The server URL, bearer token and TLS verification (a context with the CA and the client
    certificate) of a kubeconfig's current (or named) context. Raises ``KubeconfigError``."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise KubeconfigError(f"cannot read the kubeconfig {path}: {e}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{path} is not a kubeconfig (a YAML mapping with clusters, users, contexts)")
    try:
        return _target_of(doc, path.parent, context, server, token)
    except KubeconfigError as e:
        raise KubeconfigError(f"kubeconfig {path}: {e}") from None
    except (OSError, ssl.SSLError, ValueError, TypeError, KeyError) as e:
        raise KubeconfigError(f"kubeconfig {path}: {type(e).__name__}: {e}") from None


def _target_of(doc: dict[str, Any], base: Path, context: str | None, server: str | None,
               token: str | None) -> tuple[str, str | None, ssl.SSLContext | bool]:
    ctx_name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
    user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
    for field, what in (("exec", "an exec plugin"), ("auth-provider", "an auth provider")):
        if user.get(field):
            raise KubeconfigError(f"user {ctx.get('user')!r} authenticates with {what}, which this "
                                  "client does not run: give it a token or a client certificate")
    url = server or cluster.get("server")
    if not url:
        raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server")
    verify: ssl.SSLContext | bool = True
    if str(url).startswith("https://"):
        verify = _tls_context(cluster, {} if token else user, base)
    if not token:
        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = (base / user["tokenFile"]).read_text().strip()
    return str(url), token, verify


def _named(entries: list[dict[str, Any]] | None, name: str | None, what: str) -> dict[str, Any]:
    for entry in entries or ():
        if entry.get("name") == name:
            body: dict[str, Any] = entry.get(what, {})
            return body
    raise KubeconfigError(f"no {what} named {name!r}")


_UPDATE_ATTEMPTS = 5


def _written(path: str) -> str:
    """What a path writes: ``<plural>/<name>`` -> ``plural``, ``<plural>/<name>/<sub>`` -> ``plural/sub``.

    >>> _written("/apis/apps/v1/namespaces/ns/replicasets/web/status"), _written("/api/v1/nodes/n1")
    ('replicasets/status', 'nodes')
    """
    parts = path.split("?", 1)[0].strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 3:
        rest = rest[2:]
    if len(rest) >= 3:
        return f"{rest[0]}/{rest[2]}"
    return rest[0] if rest else ""




def _tls_context(cluster: dict[str, Any], user: dict[str, Any], base: Path) -> ssl.SSLContext:
    """How to trust the cluster (its CA, the system's roots without one, nothing with
    ``insecure-skip-tls-verify``) and the user's client certificate, if it has one."""
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif cluster.get("certificate-authority"):
        context = ssl.create_default_context(cafile=str(base / cluster["certificate-authority"]))
    else:
        context = ssl.create_default_context()
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    if cert is not None or key is not None:
        if cert is None or key is None:
            raise KubeconfigError("a client certificate needs both client-certificate and client-key")
        _load_cert_chain(context, cert, key)
    return context


def _pem(user: dict[str, Any], field: str, base: Path) -> bytes | None:
    """The PEM of ``field``-data, or of the file ``field`` names."""
    if user.get(f"{field}-data"):
        return base64.b64decode(user[f"{field}-data"])
    if user.get(field):
        return (base / str(user[field])).read_bytes()
    return None


def _load_cert_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``ssl`` loads a certificate and key from files only: write them to a private temporary
    directory for the call, and remove it at once."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="controlplane-client-") as tmp:
        cert_file, key_file = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        cert_file.write_bytes(cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        context.load_cert_chain(str(cert_file), str(key_file))
