"""What every control-plane client in these load tests shares.

- :class:`KubeUser`, the abstract Locust user: the run's credentials
  (``loadtest.kubeauth``: a token, a client certificate, an exec plugin's, and the
  kubeconfig's CA), Kubernetes paths,
  and :meth:`KubeUser.call`, which names each request the way ``loadtest.slo``
  reads it (``pods``, ``pods/status``, ``pods [namespace]`` for a namespaced
  LIST, ``pods [cluster]``, ``pods [watch]``) and treats the answers a real
  client expects (``409 AlreadyExists`` of a namespace someone else made) as
  deliberate, counted under ``EXPECTED``.
- :class:`Reflector`, client-go's list-then-watch loop in a greenlet: a LIST
  (paginated, or a ``sendInitialEvents`` WatchList), a watch from its
  resourceVersion with bookmarks, a relist on 410 Gone, a rewatch from the last
  seen revision when the stream ends.
- :data:`TRACKER`, the process's bookkeeping for latencies that are not
  requests: watch delivery (a write's response -> the event with the same
  resourceVersion on any watch of this process), create -> bound and
  create -> Running of pods this process created. They are reported through
  ``events.request.fire`` under request type ``LATENCY`` so they land in the
  same statistics as the requests.

Parameters come from the environment (``LOADTEST_*``), which the harness sets
for the master and every worker process; workers on other machines need the
same environment (docs/operations.md).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import gevent
import gevent.event
import orjson
from locust import FastHttpUser, events
from locust.contrib.fasthttp import FastHttpSession

from controlplane.gcsettings import settle_heap

from .. import kubeauth
from ..answer import RESOURCE_VERSION, Answer, WholeList
from ..podlines import PodFacts, facts_of, pod_facts

__all__ = [
    "PARAMS", "TARGETS", "TRACKER", "KubeUser", "Reflector", "Tracker", "WatchEvent", "microtime", "param",
    "path_for", "spread_index", "spread_target", "unique_suffix",
]

# --------------------------------------------------------------------------- parameters

PARAMS: dict[str, Any] = json.loads(os.environ.get("LOADTEST_PARAMS") or "{}")


def param(name: str, default: Any) -> Any:
    """A scenario parameter (``LOADTEST_PARAMS``, a JSON object), or ``default``."""
    return PARAMS.get(name, default)


# whether the users send their requests as the identities they stand for (KubeUser.act_as)
IMPERSONATE = bool(param("impersonate", False))

# the API server replicas the users spread over (``run --target A --target B``); none: Locust's
# --host, the one target
TARGETS: list[str] = [str(t) for t in param("targets", [])]
_SPREAD: dict[str, int] = {}  # user class -> users of it this process has placed


def spread_index(k: int, place: int, worker_index: int, targets: int) -> int:
    """Which of ``targets`` the ``k``-th user (from 0) of a class in a worker process loads: the
    class is ``place``-th among the plan's classes (sorted by name), the process is Locust's
    worker ``worker_index``. Each class goes round the targets within a process; a class of one
    user a process lands on a different target in each worker, and classes of one user each
    (smoke's) on different targets.

        >>> [spread_index(k, 0, 0, 2) for k in range(3)], spread_index(0, 1, 0, 2), spread_index(0, 0, 1, 3)
        ([0, 1, 0], 1, 1)
    """
    return (k + place + max(worker_index, 0)) % targets


def spread_target(user_class: str, worker_index: int) -> str | None:
    """The target of the next ``user_class`` user this process starts (``spread_index``), or
    None with one target (Locust's --host). A user keeps it for its life, as a client keeps
    the connection a load balancer gave it to one replica."""
    if len(TARGETS) < 2:
        return None
    classes = sorted({*PARAMS.get("_fixed", {}), *PARAMS.get("_weighted", {})})
    k = _SPREAD.get(user_class, 0)
    _SPREAD[user_class] = k + 1
    place = classes.index(user_class) if user_class in classes else 0
    return TARGETS[spread_index(k, place, worker_index, len(TARGETS))]


_counter = itertools.count()


def unique_suffix() -> str:
    """A name part no other user of this run, nor of another run against the same
    server, has: the worker's name (set by the harness as ``LOADTEST_WORKER``, else
    the process id), this process's run tag and a counter in the process."""
    return f"{worker_label(os.environ.get('LOADTEST_WORKER', ''))}-{_RUN_TAG}-{next(_counter)}"


def worker_label(name: str) -> str:
    """``LOADTEST_WORKER`` as a part of an object's name (a DNS label: lowercase letters, digits
    and ``-``, at most 20 characters of it), or the process id when nothing of it is left. A
    remote worker's is what its operator typed, a host name (``Worker_3.example.com`` is
    ``worker-3-example-com``), which Nodes, Leases and namespaces refused with 422 Invalid.

        >>> worker_label("Worker_3.example.com"), worker_label("w0")
        ('worker-3-example-com', 'w0')
    """
    label = re.sub(r"[^a-z0-9]+", "-", name.lower())[:20].strip("-")
    return label or str(os.getpid())


# a few characters per process, so names from runs against one --target do not collide
_RUN_TAG = format(int.from_bytes(os.urandom(3), "big"), "x")


def microtime(t: float | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def path_for(plural: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None,
             group: str = "", version: str = "v1") -> str:
    """``/api/v1/namespaces/ns/pods/p/status`` and the like."""
    p = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        p += f"/namespaces/{namespace}"
    p += f"/{plural}"
    if name:
        p += f"/{name}"
    if subresource:
        p += f"/{subresource}"
    return p


# --------------------------------------------------------------------------- the collector

@events.init.add_listener  # type: ignore[untyped-decorator]
def _settle_heap(**_: Any) -> None:
    """The cyclic collector's settings of the API server (``controlplane.gcsettings``), in
    every Locust process once it has set up: what exists then (Locust, gevent, these modules)
    out of the collector's sight, young collections every 20,000 net allocations rather than
    700. With the defaults, in-flight requests' objects outlived two young collections and
    were promoted, and full collections of a worker's 300,000 objects came every few
    seconds: in a ``million --scale 0.05`` run a quarter of each worker's CPU (32 of 140 s,
    23 of them in 93 full collections), where a worker's CPU is CPU the server on the same
    machine does not get (docs/benchmarks.md, "The Locust workers' collector")."""
    settle_heap()


# --------------------------------------------------------------------------- latencies

def fire_latency(name: str, seconds: float, exception: Exception | None = None) -> None:
    """A latency that is not one request's, into Locust's statistics (a failure with ``exception``)."""
    events.request.fire(request_type="LATENCY", name=name,  # type: ignore[no-untyped-call]
                        response_time=max(0.0, seconds) * 1000.0, response_length=0, exception=exception,
                        context={})


def fire_expected(name: str) -> None:
    """A deliberate non-2xx answer (409 AlreadyExists of a shared namespace, 409 on a
    binding another binder won): counted, not failed."""
    events.request.fire(request_type="EXPECTED", name=name,  # type: ignore[no-untyped-call]
                        response_time=0.0, response_length=0, exception=None, context={})


class _Bounded(OrderedDict[str, float]):
    """A dict that forgets its oldest entries beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: str, value: float) -> None:
        self[key] = value
        if len(self) > self.limit:
            self.popitem(last=False)


class Tracker:
    """Latencies that span a write and a watch of this process.

    Watch delivery is matched by resourceVersion: the writer records when its
    response arrived (``wrote``), a watcher when the event with that revision
    arrived (``seen``); whichever comes second reports the difference (0 when
    the event beat the response). Only resources some watch of this process
    follows are recorded (``watching``), and only the first watcher to see a
    revision counts. With several targets (replicas over one etcd, whose
    revisions are the resourceVersions of them all) the write and the watches
    may be on different replicas, and match the same: the first watcher may be
    on the writer's replica or on another, whose event crossed etcd. Pods this process created are followed to bound (a
    ``spec.nodeName``) and to ``Running``, from the time the create was sent.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.watching: dict[str, int] = {}
        self._writes = _Bounded(limit)
        self._early = _Bounded(limit)
        self._created = _Bounded(limit)
        self._bound: set[str] = set()

    def wrote(self, resource: str, rv: str | None, at: float) -> None:
        if not rv or not self.watching.get(resource):
            return
        early = self._early.pop(rv, None)
        if early is not None:
            fire_latency(f"watch delivery {resource}", 0.0)
        else:
            self._writes.put(rv, at)

    def seen(self, resource: str, rv: str | None, at: float) -> None:
        if not rv:
            return
        wrote = self._writes.pop(rv, None)
        if wrote is not None:
            fire_latency(f"watch delivery {resource}", at - wrote)
        elif self.watching.get(resource):
            self._early.put(rv, at)

    def created(self, key: str, sent: float) -> None:
        self._created.put(key, sent)

    def pod_seen(self, pod: PodFacts, at: float) -> None:
        key = pod.key
        sent = self._created.get(key)
        if sent is None:
            return
        if pod.node_name and key not in self._bound:
            self._bound.add(key)
            fire_latency("pod create→bound", at - sent)
        if pod.phase == "Running":
            del self._created[key]
            self._bound.discard(key)
            fire_latency("pod startup", at - sent)

    def forget(self, key: str) -> None:
        self._created.pop(key, None)
        self._bound.discard(key)


TRACKER = Tracker()


# --------------------------------------------------------------------------- the user

class ApiFailure(Exception):
    """A call that got an answer its caller did not expect. The message is the
    status code and the Status's reason only (no object names), so Locust's
    failure table groups like failures into one row."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".rstrip())
        self.status = status


def _reason(status: int, parsed: dict[str, Any] | None, error: object) -> str:
    if status == 0:
        return type(error).__name__ if error is not None else "no response"
    if parsed and parsed.get("kind") == "Status":
        if status >= 500:  # a server error is rare and its message is the clue: keep it
            return f"{parsed.get('reason') or ''}: {str(parsed.get('message') or '')[:160]}"
        return str(parsed.get("reason") or "")
    return ""


# what geventhttpclient raises when the server had closed a pooled connection
_IDLE_CLOSED = frozenset({"HTTPConnectionClosed", "ConnectionResetError", "BrokenPipeError"})

# client-go's rest client sends a request again when the server answers 429 (or a 5xx) with a
# Retry-After header, after that many seconds, at most 10 times (request.go's checkWait,
# maxRetries): what API Priority and Fairness's rejections ask of every client
MAX_RETRIES = 10


def _retry_after(resp: Any) -> float | None:
    """The seconds a 429 or 5xx answer's ``Retry-After`` asks to wait, else None."""
    status = resp.status_code or 0
    if status != 429 and not 500 <= status < 600:
        return None
    try:
        value = (resp.headers or {}).get("Retry-After")
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


_CREDENTIALS: kubeauth.Credentials | None = None


def credentials() -> kubeauth.Credentials:
    """The process's credentials (``LOADTEST_AUTH``), shared by its users as client-go's
    clients of one kubeconfig share one exec plugin's results."""
    global _CREDENTIALS
    if _CREDENTIALS is None:
        _CREDENTIALS = kubeauth.from_env()
    return _CREDENTIALS


_ACCEPT = {"Accept": "application/json", "Accept-Encoding": "identity"}


def _status_reason(answer: Answer) -> str:
    """The reason of a Status answer ("" for anything else)."""
    body = answer.body
    return str(body.get("reason") or "") if body and body.get("kind") == "Status" else ""


class KubeUser(FastHttpUser):
    """A Kubernetes API client. Subclasses read like the traffic they make.

    Its connections present the run's client certificate, if any, and verify the server as
    the kubeconfig says; each request carries the ``Authorization`` of the moment (an exec
    plugin's token is asked for again when it expires, or after a 401). When the client
    certificate changes (an exec plugin's, rotated), the user's connections are made anew.

    With the run's ``impersonate`` parameter (``--impersonate``), a user that has called
    :meth:`act_as` sends its requests as the identity it stands for (``Impersonate-User``,
    ``Impersonate-Group``): a kubelet as its node, a controller as its service account, so
    the server's API Priority and Fairness, audit and authorization see a cluster's callers
    rather than one. Its setup (the namespaces and objects its real counterpart finds made by
    someone else) goes out as the run's own credentials, before it calls ``act_as``."""

    abstract = True
    network_timeout = 120.0
    connection_timeout = 30.0
    concurrency = 4  # connections per user: a watch holds one for its lifetime

    def __init__(self, environment: Any) -> None:
        self.auth = credentials()
        target = spread_target(type(self).__name__, getattr(environment.runner, "worker_index", 0))
        if target is not None:
            self.host = target  # this user's replica, for its whole life (the class keeps --host)
        super().__init__(environment)
        self._session()
        self.greenlets: list[gevent.Greenlet] = []

    def _session(self) -> None:
        """(Re)make ``self.client`` with the credentials' TLS: FastHttpUser's own takes
        neither a client certificate nor a server name to verify."""
        auth = self.auth
        self._cert_generation = auth.cert_generation
        ssl_options = {"server_hostname": auth.tls_server_name} if auth.tls_server_name else None
        self.client = FastHttpSession(
            base_url=self.host, request_event=self.environment.events.request, user=self,
            network_timeout=self.network_timeout, connection_timeout=self.connection_timeout,
            max_redirects=self.max_redirects, max_retries=self.max_retries, concurrency=self.concurrency,
            client_pool=self.client_pool, headers=self.default_headers, proxy_host=self.proxy_host,
            proxy_port=self.proxy_port,
            # geventhttpclient checks the host name unless insecure; the context verifies (or not)
            insecure=not auth.verify, ssl_context_factory=auth.ssl_context,
            **({"ssl_options": ssl_options} if ssl_options else {}))
        self._auth_generation = -1
        self._headers: dict[str, str] = dict(_ACCEPT)
        self._identity: dict[str, str] = getattr(self, "_identity", {})

    def act_as(self, user: str, group: str = "") -> None:
        """From now on, send requests as ``user`` in ``group`` (the server adds a service
        account's own groups when none is given), if the run impersonates; else nothing. (One
        group: a header each, and the headers here are a dict.)"""
        if IMPERSONATE:
            self._identity = {"Impersonate-User": user, **({"Impersonate-Group": group} if group else {})}
            self._auth_generation = -1

    @property
    def headers(self) -> dict[str, str]:
        """Accept headers, the ``Authorization`` of the moment and the identity acted as."""
        auth = self.auth
        if auth.cert_generation != self._cert_generation:
            self._session()
        value = auth.authorization()
        if auth.generation != self._auth_generation:
            self._auth_generation = auth.generation
            self._headers = {**_ACCEPT, **({"Authorization": value} if value else {}), **self._identity}
        return self._headers

    def on_stop(self) -> None:
        gevent.killall(self.greenlets, block=False)
        self.greenlets.clear()

    def spawn(self, fn: Callable[..., Any], *args: Any) -> gevent.Greenlet:
        g = gevent.spawn(fn, *args)
        self.greenlets.append(g)
        return g

    # -- calls -----------------------------------------------------------------
    def call(self, method: str, path: str, name: str, body: Any = None, *, query: dict[str, Any] | None = None,
             content_type: str = "application/json", expected: tuple[int | tuple[int, str], ...] = (),
             track: str | None = None) -> Answer:
        """One API call, recorded under ``name``. 2xx succeeds; a status in
        ``expected``, or a (status, Status reason) pair there, is deliberate (counted
        under EXPECTED, not failed); anything else fails the request. ``track`` names the resource whose watch
        delivery this write should be matched against.

        A request that finds its pooled connection closed by the server (an idle
        keep-alive connection the server timed out) is sent again once on a new
        connection, as Go's HTTP transport does for a connection that died while
        idle; the retry is counted under EXPECTED and the latency covers both. A 429 or 5xx
        with a ``Retry-After`` (API Priority and Fairness's rejection) is sent again after it, at
        most ``MAX_RETRIES`` times, as client-go's rest client does; each retry is counted under
        EXPECTED and the latency covers them all."""
        headers = self.headers  # first: it remakes the session when the client certificate changed
        session = self.client
        url = session._build_url(path + ("?" + urlencode(query) if query else ""))
        data: Any = None  # bytes; geventhttpclient sends them as they are
        if body is not None:
            # lower case: geventhttpclient looks for "content-type" and, not finding it, adds
            # application/octet-stream beside ours (the server then sees two)
            headers = {**headers, "content-type": content_type}
            data = body if isinstance(body, bytes) else orjson.dumps(body)
        start_time = time.time()
        started = time.perf_counter()
        resp = session._send_request_safe_mode(method, url, payload=data, headers=headers)
        if (resp.status_code or 0) == 0 and type(getattr(resp, "error", None)).__name__ in _IDLE_CLOSED:
            fire_expected(f"reconnect {name}")
            resp = session._send_request_safe_mode(method, url, payload=data, headers=headers)
        for _ in range(MAX_RETRIES):
            wait = _retry_after(resp)
            if wait is None or (resp.status_code or 0) in expected:
                break
            fire_expected(f"retried {resp.status_code} {name}")
            gevent.sleep(wait)
            resp = session._send_request_safe_mode(method, url, payload=data, headers=headers)
        status = resp.status_code or 0
        if status == 401:
            self.auth.unauthorized(self._auth_generation)
        error: Exception | None = getattr(resp, "error", None)
        content = b""
        if status:
            try:
                content = resp.content or b""
            except Exception as e:  # the body broke off
                status, error = 0, e
        at = time.perf_counter()
        answer = Answer(status, content, at)
        exception: Exception | None = None
        # a success's body is not parsed to find it unexpected: most are never read (answer.py)
        if status in expected or (status >= 300 and expected and (status, _status_reason(answer)) in expected):
            fire_expected(f"{status} {name}")
        elif not 200 <= status < 300:
            exception = ApiFailure(status, _reason(status, answer.body, error))
        events.request.fire(request_type=method, name=name,  # type: ignore[no-untyped-call]
                            response_time=(at - started) * 1000.0, response_length=len(content),
                            exception=exception, context={}, start_time=start_time, url=url, response=resp)
        if track and 200 <= status < 300:
            TRACKER.wrote(track, answer.rv, at)
        return answer

    def create(self, plural: str, body: dict[str, Any], namespace: str | None = None, group: str = "",
               version: str = "v1", expected: tuple[int, ...] = (), track: bool = False) -> Answer:
        return self.call("POST", path_for(plural, namespace, group=group, version=version), plural, body,
                         expected=expected, track=plural if track else None)

    def ensure(self, plural: str, body: dict[str, Any], namespace: str | None = None, group: str = "",
               version: str = "v1") -> Answer:
        """Create, where AlreadyExists (another user made it first) is fine."""
        return self.create(plural, body, namespace, group, version, expected=(409,))

    def patch(self, plural: str, namespace: str | None, name: str, patch: Any, patch_type: str = "merge",
              subresource: str | None = None, group: str = "", version: str = "v1",
              query: dict[str, Any] | None = None, track: bool = False, expected: tuple[int, ...] = ()) -> Answer:
        label = plural + (f"/{subresource}" if subresource else "")
        body = patch if isinstance(patch, bytes) else orjson.dumps(patch)
        return self.call("PATCH", path_for(plural, namespace, name, subresource, group, version), label, body,
                         query=query, content_type=_PATCH_TYPES[patch_type], expected=expected,
                         track=plural if track else None)

    def list_pages(self, plural: str, namespace: str | None = None, group: str = "", version: str = "v1",
                   limit: int = 0, **query: Any) -> Iterator[Answer]:
        """A LIST, page by page (``limit`` 0: one unpaginated call), as client-go's pager
        reads it: later pages go on from the continue token without the resourceVersion
        asked for; when a later page's token has expired (410 Expired: the list's revision
        was compacted meanwhile) the 410 is an expected event and one LIST without limit,
        as first asked for, follows (the pager's FullListIfExpired). That LIST comes as a
        :class:`WholeList`, which replaces the pages before it."""
        path = path_for(plural, namespace, group=group, version=version)
        name = f"{plural} [{'namespace' if namespace else 'cluster'}]"
        q: dict[str, Any] = dict(query)
        if limit:
            q["limit"] = limit
        while True:
            later = "continue" in q
            a = self.call("GET", path, name, query=q, expected=((410, "Expired"),) if later else ())
            if later and a.status == 410 and _status_reason(a) == "Expired":
                whole = self.call("GET", path, name, query=dict(query))
                yield WholeList(whole.status, whole.content, whole.at)
                return
            yield a
            cont = a.continue_token
            if a.status != 200 or not limit or not cont:
                return
            q = {k: v for k, v in q.items() if k not in ("resourceVersion", "resourceVersionMatch")}
            q["continue"] = cont

    # -- watches ---------------------------------------------------------------
    def open_watch(self, path: str, name: str, query: dict[str, Any], expected: tuple[int, ...] = ()) -> Any:
        """The watch's response, headers read, body not: the caller reads its
        lines (``resp._response.readline(b"\\n")``). Recorded under ``name``
        with the time to the response headers; a status in ``expected`` is
        deliberate (counted under EXPECTED, not failed)."""
        url = path + "?" + urlencode({**query, "watch": "true"})
        headers = self.headers  # first: it remakes the session when the client certificate changed
        with self.client.request("GET", url, name=name, headers=headers, stream=True,
                                 catch_response=True) as resp:
            if resp.status_code in expected:
                resp.success()
                fire_expected(f"{resp.status_code} {name}")
        if resp.status_code == 401:
            self.auth.unauthorized(self._auth_generation)
        return resp


# --------------------------------------------------------------------------- list + watch

_TYPE = re.compile(rb'^\{"type":"([A-Z]+)"')


@dataclass(slots=True)
class WatchEvent:
    type: str
    rv: str | None
    line: bytes
    at: float
    _obj: dict[str, Any] | None = None

    @property
    def object(self) -> dict[str, Any]:
        """The event's object, parsed on first use (a count-only watcher never pays for it)."""
        if self._obj is None:
            self._obj = orjson.loads(self.line)["object"]
        return self._obj

    def pod(self) -> PodFacts:
        """What a controller or a kubelet needs of the event's pod, read from its line without
        parsing it where that can be done (``loadtest/podlines.py``)."""
        if self._obj is None:
            facts = pod_facts(self.line)
            if facts is not None:
                return facts
        return facts_of(self.object)


class Reflector:
    """client-go's reflector, reduced to what load needs: list (or WatchList),
    then watch from that revision with bookmarks, relist on 410, rewatch on
    a closed stream. ``on_event`` sees every ADDED/MODIFIED/DELETED event
    (the initial LIST's items are not replayed as events, only counted).

    Its first LIST asks for ``resourceVersion=0``, as client-go's does "for performance
    reasons": the watch cache answers it with what it has, whole (it ignores ``limit``
    there), the reads a watch cache's lock is contended by. After a 410 that revision is
    gone, and the relist is a consistent one (no resourceVersion), paginated.
    """

    def __init__(self, user: KubeUser, plural: str, namespace: str | None = None, *, group: str = "",
                 version: str = "v1", field_selector: str = "", label_selector: str = "",
                 page_size: int = 500, watch_list: bool = False, list_first: bool = True,
                 on_event: Callable[[WatchEvent], None] | None = None,
                 on_list: Callable[[list[dict[str, Any]]], None] | None = None, timeout_seconds: int = 60) -> None:
        self.user = user
        self.plural = plural
        self.namespace = namespace
        self.group, self.version = group, version
        self.selectors = {k: v for k, v in (("fieldSelector", field_selector), ("labelSelector", label_selector))
                          if v}
        self.page_size = page_size
        self.watch_list = watch_list
        self.list_first = list_first
        self.on_event = on_event
        self.on_list = on_list  # the LIST's items, when the caller needs them (then it must not use watch_list)
        self.timeout_seconds = timeout_seconds
        self.rv: str | None = None
        self.count = 0            # objects it believes exist (list + adds - deletes)
        self.relists = 0
        self.expired = False      # a 410 came: list consistently from then on, not from resourceVersion=0
        self.synced = gevent.event.Event()
        self._syncing = False     # reading a WatchList's initial events, before its end bookmark
        self._scope = "namespace" if namespace else "cluster"

    def start(self) -> gevent.Greenlet:
        return self.user.spawn(self.run)

    def run(self) -> None:
        TRACKER.watching[self.plural] = TRACKER.watching.get(self.plural, 0) + 1
        try:
            while True:
                if self.rv is None and not self.watch_list:
                    self._list()
                self._watch()
        finally:
            TRACKER.watching[self.plural] -= 1

    def _list(self) -> None:
        if not self.list_first:
            self.rv = "0"  # a kubelet-like watcher that does not need the current state first
            return
        count = 0
        items: list[dict[str, Any]] = []
        rv: str | None = None
        query = self.selectors if self.expired else {**self.selectors, "resourceVersion": "0"}
        for page in self.user.list_pages(self.plural, self.namespace, self.group, self.version,
                                         limit=self.page_size, **query):
            if isinstance(page, WholeList):  # the pages before it are void: it is the list
                count, items = 0, []
            if page.status != 200 or page.body is None:
                # the list starts over, as client-go's reflector does: a watch from the revision of
                # the pages that came would never learn of the objects on the pages that did not
                gevent.sleep(1.0)
                return
            count += len(page.body.get("items") or ())
            if self.on_list is not None:
                items.extend(page.body.get("items") or ())
            rv = page.body["metadata"]["resourceVersion"]
        self.rv = rv
        self.count = count
        if self.on_list is not None:
            self.on_list(items)
        self.synced.set()

    def _watch(self) -> None:
        query: dict[str, Any] = {**self.selectors, "allowWatchBookmarks": "true",
                                 "timeoutSeconds": self.timeout_seconds}
        initial = self.watch_list and self.rv is None
        if initial:
            query.update(sendInitialEvents="true", resourceVersionMatch="NotOlderThan")
            self.count = 0
        else:
            query["resourceVersion"] = self.rv or "0"
        path = path_for(self.plural, self.namespace, group=self.group, version=self.version)
        # a server without WatchList (its feature gate off) refuses sendInitialEvents as invalid
        resp = self.user.open_watch(path, f"{self.plural} [watch]", query, expected=(400, 422) if initial else ())
        if resp.status_code != 200:
            if resp.status_code == 410:
                self._relist()
            elif initial:
                # client-go falls back to a LIST when its WatchList fails, "because making progress
                # is better than deadlocking"; the next relist tries a WatchList again
                self._list()
            else:
                gevent.sleep(1.0)
            return
        self._syncing = initial
        stream = resp._response
        try:
            while True:
                line = stream.readline(b"\n")
                if not line:
                    return  # the server ended the watch (timeoutSeconds): rewatch from self.rv
                self._handle(line)
        except Exception:
            # a reset connection or a read timeout: rewatch from where we are, as client-go does
            gevent.sleep(0.5)
        finally:
            stream.release()
            if self._syncing:
                # ended before the initial events did: the objects' revisions it brought are not a
                # point to watch from (they come in key order), so the WatchList starts over
                self._syncing = False
                self.rv = None

    def _relist(self) -> None:
        self.relists += 1
        self.rv = None
        self.expired = True
        fire_expected(f"410 {self.plural} [watch]")

    def _handle(self, line: bytes) -> None:
        at = time.perf_counter()
        m = _TYPE.match(line)
        etype = m.group(1).decode() if m else orjson.loads(line)["type"]
        rv_m = RESOURCE_VERSION.search(line)
        rv = rv_m.group(1).decode() if rv_m else None
        if etype == "BOOKMARK":
            if self._syncing:
                # the WatchList's state is whole at the revision of its initial-events-end bookmark
                if b"k8s.io/initial-events-end" in line:
                    self._syncing = False
                    self.rv = rv or self.rv
                    self.synced.set()
                return
            self.rv = rv or self.rv
            return
        if etype == "ERROR":
            obj = orjson.loads(line)["object"]
            if obj.get("code") == 410:
                self._relist()
                raise _Restart
            return
        if not self._syncing:
            self.rv = rv or self.rv
        if etype == "ADDED":
            self.count += 1
        elif etype == "DELETED":
            self.count -= 1
        if not self._syncing:
            TRACKER.seen(self.plural, rv, at)
        if self.on_event is not None:
            self.on_event(WatchEvent(etype, rv, line, at))


class _Restart(Exception):
    """Leave the current watch stream (a 410 arrived on it)."""
