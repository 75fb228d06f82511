"""API Priority and Fairness, applied to every request; or, without it, the max-in-flight filter.

As kube-apiserver's ``WithPriorityAndFairness`` filter and its config controller
(``k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go``,
``pkg/util/flowcontrol/apf_controller.go``, ``apf_filter.go``):

- Each request (resource or not, after authentication and impersonation, before
  authorization) is classified: the FlowSchemas whose priority level exists, by
  ``matchingPrecedence`` then name, the first whose rules match the user and the request
  (``api/flowmatch.py``). Classifications are kept by (user, groups, verb, group,
  resource, subresource, namespace), or (user, groups, verb, path), until the
  configuration changes. Responses carry ``X-Kubernetes-PF-FlowSchema-UID`` and
  ``X-Kubernetes-PF-PriorityLevel-UID`` (served or rejected alike). While the mandatory
  ``exempt`` schema (its spec fixed: ``system:masters``, every request) comes first, a
  request of ``system:masters`` (the load tests', kube-apiserver's own controllers') is exempt without being
  read further: the hot path pays about 2 us for flow control (a limited level's request
  about 4.5 us).
- The ``exempt`` level's requests run unlimited. A limited level has
  ``ceil(server limit x nominalConcurrencyShares / the shares of all levels)`` seats, the
  server's limit being ``--max-requests-inflight`` + ``--max-mutating-requests-inflight``
  (600 by default) per server process. No borrowing: ``lendablePercent`` and
  ``borrowingLimitPercent`` are not applied.
- A request occupies seats from its dispatch until its response is complete; a watch
  until its response starts (its initialization, as upstream's), then runs free. A
  LIST's width is one seat per 100 objects the watch cache holds of its resource (1 for
  one named by ``metadata.name``), 1 to 10, as upstream's list work estimator by object
  count; every other request 1 seat.
- Queues and rejection: ``api/fairqueuing.py``. A request waits at most a quarter of its
  timeout (``?timeout=``, at most the server's 60 s: 15 s by default). A rejected
  request gets upstream's 429, plain text ``Too many requests, please try again later.``
  with ``Retry-After`` (1 s, growing with the level's rejections as upstream's tracker).
- Long-running requests (exec, attach, port-forward, proxy, logs) pass unclassified, as
  upstream's.

``--enable-priority-and-fairness=false`` puts ``MaxInFlight`` in its place: at most
``--max-requests-inflight`` reads and ``--max-mutating-requests-inflight`` writes at a
time, watches and long-running requests not counted, ``system:masters`` never refused,
429 with ``Retry-After: 1`` past a limit.

Metrics (upstream's names and labels): ``apiserver_flowcontrol_dispatched_requests_total``,
``..._rejected_requests_total{reason}``, ``..._current_inqueue_requests``,
``..._current_executing_requests``, ``..._current_executing_seats``,
``..._request_wait_duration_seconds{execute}`` (each by ``flow_schema`` and
``priority_level``), ``..._nominal_limit_seats`` and ``..._current_limit_seats`` (by
``priority_level``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..metrics import REGISTRY
from ..registry.flowcontrol import MANDATORY
from .fairqueuing import DroppedRequests, QueueSet, Ticket, flow_hash
from .flowmatch import Info, Rule, request_info
from .rbac import User

__all__ = ["METRICS", "FlowControl", "MaxInFlight", "wait_limit"]

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SCHEMA_HEADER = b"x-kubernetes-pf-flowschema-uid"
LEVEL_HEADER = b"x-kubernetes-pf-prioritylevel-uid"
TOO_MANY = b"Too many requests, please try again later.\n"  # upstream's http.Error, with its newline
REQUEST_TIMEOUT = 60.0  # kube-apiserver's --request-timeout; a request waits a quarter of its own
MAX_WAIT = 60.0
MIN_SEATS, MAX_SEATS, OBJECTS_PER_SEAT = 1, 10, 100
# who asks when the server authenticates nobody (no token file: ``create_app`` in the benchmarks
# and tests, whose requests come from their own in-process clients): kube-apiserver's loopback
# client, in system:masters, so exempt
LOOPBACK = User("system:apiserver", ("system:authenticated", "system:masters"))
IN_PROCESS = ("in-process", 0)  # the ``server`` of a scope ``Client.in_process`` makes (client/transport.py)
_MASTER = User("", ("system:masters",))
_EVERYTHING = (Info(True, "deletecollection", "/apis/x/v1/namespaces/x/x", "x", "v1", "x", "", "x"),
               Info(True, "patch", "/apis/x/v1/x/x/x", "x", "v1", "x", "x", "", "x"), Info(False, "post", "/x"))
_LONG_RUNNING_ENDINGS = ("/log", "/exec", "/attach", "/portforward", "/proxy")
_CLASSIFIED_MAX = 65536  # classifications kept; all dropped when full (or when the configuration changes)
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def wait_limit(query: str) -> float:
    """How long a request may wait in its queue: a quarter of its deadline (its ``timeout``
    parameter, a Go duration, capped at the server's request timeout), at most a minute."""
    timeout = REQUEST_TIMEOUT
    if "timeout=" in query:
        for part in query.split("&"):
            if part.startswith("timeout="):
                text = part[len("timeout="):]
                matched = _GO_DURATION.findall(text)
                if matched and "".join(a + b for a, b in matched) == text:
                    asked = sum(float(a) * _UNITS[b] for a, b in matched)
                    if asked > 0:  # (0: none asked)
                        timeout = min(timeout, asked)
    return min(timeout / 4, MAX_WAIT)


# -- metrics ---------------------------------------------------------------------------------
_WAIT_BUCKETS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0)
DISPATCHED, INQUEUE, EXECUTING, SEATS = range(4)


class FlowMetrics(Collector):
    """The flow-control series; written by the event loop only, read by a scrape's thread
    (copies taken in one step under the GIL)."""

    def __init__(self) -> None:
        self.stats: dict[tuple[str, str], list[int]] = {}  # (level, schema) -> [dispatched, inqueue, executing, seats]
        self.rejected: dict[tuple[str, str, str], int] = {}  # (level, schema, reason) -> count
        self.waits: dict[tuple[str, str, str], list[float]] = {}  # (level, schema, execute) -> [buckets..., +Inf, sum]
        self.nominal: dict[str, int] = {}  # level -> seats

    def of(self, level: str, schema: str) -> list[int]:
        stats = self.stats.get((level, schema))
        if stats is None:
            stats = self.stats[(level, schema)] = [0, 0, 0, 0]
        return stats

    def observe_wait(self, level: str, schema: str, executed: bool, seconds: float) -> None:
        key = (level, schema, "true" if executed else "false")
        counts = self.waits.get(key)
        if counts is None:
            counts = self.waits[key] = [0.0] * (len(_WAIT_BUCKETS) + 2)
        counts[bisect.bisect_left(_WAIT_BUCKETS, seconds)] += 1
        counts[-1] += seconds

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        stats = {k: list(v) for k, v in self.stats.copy().items()}
        labels = ["flow_schema", "priority_level"]
        dispatched = CounterMetricFamily("apiserver_flowcontrol_dispatched_requests",
                                         "Number of requests executed by API Priority and Fairness subsystem",
                                         labels=labels)
        inqueue = GaugeMetricFamily("apiserver_flowcontrol_current_inqueue_requests",
                                    "Number of requests currently pending in queues of the API Priority and "
                                    "Fairness subsystem", labels=labels)
        executing = GaugeMetricFamily("apiserver_flowcontrol_current_executing_requests",
                                      "Number of requests in initial (for a WATCH) or any (for a non-WATCH) "
                                      "execution stage in the API Priority and Fairness subsystem", labels=labels)
        seats = GaugeMetricFamily("apiserver_flowcontrol_current_executing_seats",
                                  "Concurrency (number of seats) occupied by the currently executing (initial stage "
                                  "for a WATCH, any stage otherwise) requests in the API Priority and Fairness "
                                  "subsystem", labels=labels)
        for (level, schema), (d, q, e, s) in sorted(stats.items()):
            dispatched.add_metric([schema, level], d)
            inqueue.add_metric([schema, level], q)
            executing.add_metric([schema, level], e)
            seats.add_metric([schema, level], s)
        rejected = CounterMetricFamily("apiserver_flowcontrol_rejected_requests",
                                       "Number of requests rejected by API Priority and Fairness subsystem",
                                       labels=["flow_schema", "priority_level", "reason"])
        for (level, schema, reason), n in sorted(self.rejected.copy().items()):
            rejected.add_metric([schema, level, reason], n)
        waits = HistogramMetricFamily("apiserver_flowcontrol_request_wait_duration_seconds",
                                      "Length of time a request spent waiting in its queue",
                                      labels=["execute", "flow_schema", "priority_level"])
        for (level, schema, execute), counts in sorted(self.waits.copy().items()):
            counts = list(counts)
            cumulative, buckets = 0.0, []
            for bound, count in zip((*_WAIT_BUCKETS, math.inf), counts[:-1], strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            waits.add_metric([execute, schema, level], buckets, counts[-1])
        nominal = GaugeMetricFamily("apiserver_flowcontrol_nominal_limit_seats",
                                    "Nominal number of execution seats configured for each priority level",
                                    labels=["priority_level"])
        current = GaugeMetricFamily("apiserver_flowcontrol_current_limit_seats",
                                    "current derived number of execution seats available to each priority level",
                                    labels=["priority_level"])
        for level, n in sorted(self.nominal.copy().items()):
            nominal.add_metric([level], n)
            current.add_metric([level], n)  # (no borrowing: the nominal limit)
        return [dispatched, rejected, inqueue, executing, seats, waits, nominal, current]


def _bound(b: float) -> str:
    return "+Inf" if b == math.inf else repr(b)


METRICS = FlowMetrics()
REGISTRY.register(METRICS)


# -- the configuration ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Schema:
    name: str
    uid: str
    precedence: int
    level: str
    distinguisher: str  # "ByUser", "ByNamespace" or ""
    rules: tuple[Rule, ...]


class Level:
    """A priority level: its object's identity and, when limited, its seats and queues (kept
    across configuration changes, so those running and waiting stay counted)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.uid = ""
        self.exempt = False
        self.shares = 0
        self.reject = False
        self.queuing = (0, 0, 0)  # (queues, handSize, queueLengthLimit)
        self.queues: QueueSet | None = None
        self.dropped = DroppedRequests()

    def configure(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        self.uid = str((obj.get("metadata") or {}).get("uid", ""))
        self.exempt = spec.get("type") == "Exempt"
        settings = (spec.get("exempt") if self.exempt else spec.get("limited")) or {}
        shares = settings.get("nominalConcurrencyShares")
        self.shares = int(shares) if shares is not None else (0 if self.exempt else 30)
        response = settings.get("limitResponse") or {}
        self.reject = response.get("type") == "Reject"
        queuing = response.get("queuing") or {}
        self.queuing = (0, 0, 0) if self.reject else (int(queuing.get("queues", 64)), int(queuing.get("handSize", 8)),
                                                       int(queuing.get("queueLengthLimit", 50)))

    def set_limit(self, seats: int) -> None:
        if self.exempt:
            self.queues = None
        elif self.queues is None:
            self.queues = QueueSet(seats, *self.queuing)
        else:
            self.queues.configure(seats, *self.queuing)


@dataclass(slots=True)
class Classified:
    schema: Schema
    level: Level
    flow: int  # the flow's hash (shuffle sharding)
    headers: tuple[tuple[bytes, bytes], ...]
    stats: list[int]


class FlowControl:
    """API Priority and Fairness over the FlowSchemas and PriorityLevelConfigurations given to
    ``configure`` (``follow`` gives it those of the watch cache, again whenever they change).
    Called as ``await flow(scope, receive, send, app, user)`` in place of ``app(scope, receive,
    send)``, ``user`` None when the server authenticates nobody (``LOOPBACK``). Until
    configured, requests pass unclassified."""

    def __init__(self, server_limit: int, objects: Callable[[Info], int | None] | None = None) -> None:
        self.server_limit = server_limit
        self.objects = objects  # how many objects a LIST's resource has (the watch cache's count)
        self.schemas: list[Schema] = []
        self.levels: dict[str, Level] = {}
        self._classified: dict[tuple[Any, ...], Classified] = {}
        self._masters: Classified | None = None  # system:masters' classification, when it is always exempt
        self.configured = False

    # -- configuration ------------------------------------------------------------------------
    def configure(self, schemas: list[dict[str, Any]], levels: list[dict[str, Any]]) -> None:
        """The configuration in force from now: the mandatory objects stand in for missing ones."""
        by_name = {str((o.get("metadata") or {}).get("name", "")): o for o in levels}
        schema_objs = {str((o.get("metadata") or {}).get("name", "")): o for o in schemas}
        for plural, obj in MANDATORY:
            name = obj["metadata"]["name"]
            (by_name if plural == "prioritylevelconfigurations" else schema_objs).setdefault(name, obj)
        kept: dict[str, Level] = {}
        for name, obj in by_name.items():
            level = self.levels.get(name) or Level(name)
            level.configure(obj)
            kept[name] = level
        total = sum(level.shares for level in kept.values()) or 1
        for level in kept.values():
            seats = math.ceil(self.server_limit * level.shares / total)
            level.set_limit(seats)
            METRICS.nominal[level.name] = seats
        for name in set(METRICS.nominal) - set(kept):
            METRICS.nominal.pop(name, None)
        compiled = []
        for name, obj in schema_objs.items():
            spec = obj.get("spec") or {}
            level_name = str((spec.get("priorityLevelConfiguration") or {}).get("name", ""))
            if level_name not in kept:  # dangling: matches nothing
                continue
            compiled.append(Schema(name, str((obj.get("metadata") or {}).get("uid", "")),
                                   int(spec.get("matchingPrecedence", 1000)), level_name,
                                   str((spec.get("distinguisherMethod") or {}).get("type", "")),
                                   tuple(Rule.of(r) for r in spec.get("rules") or ())))
        compiled.sort(key=lambda s: (s.precedence, s.name))
        self.schemas, self.levels = compiled, kept
        self._classified = {}
        # the mandatory exempt schema (its spec fixed: system:masters, every request) first: every
        # request of system:masters is exempt, classified without being read (the hot path's)
        first = compiled[0] if compiled else None
        self._masters = Classified(first, kept[first.level], 0, (
            (LEVEL_HEADER, kept[first.level].uid.encode()), (SCHEMA_HEADER, first.uid.encode())),
            METRICS.of(first.level, first.name)) \
            if first is not None and first.name == "exempt" and first.level == "exempt" \
            and kept["exempt"].exempt and all(any(r.matches(_MASTER, probe) for r in first.rules)
                                              for probe in _EVERYTHING) else None
        self.configured = True

    async def follow(self, read: Callable[[], Awaitable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]],
                     generation: Callable[[], int], seen: int | None = None, every: float = 0.1) -> None:
        """Configure from ``read()`` whenever ``generation()`` moves from ``seen`` (the watch
        caches' generations of the two types: a change seen within ``every`` seconds)."""
        while True:
            now = generation()
            if now != seen:
                try:
                    schemas, levels = await read()
                except Exception as e:  # the caches are not loaded yet, or went away: the next turn
                    log.debug("flow control configuration not read: %r", e)
                else:
                    self.configure(schemas, levels)
                    seen = now
            await asyncio.sleep(every)

    # -- classification -----------------------------------------------------------------------
    def classify(self, user: User, info: Info) -> Classified | None:
        key = (user.name, user.groups, info.verb, info.group, info.plural, info.subresource, info.namespace) \
            if info.resource else (user.name, user.groups, info.verb, info.path)
        found = self._classified.get(key)
        if found is not None:
            return found
        chosen = None
        for schema in self.schemas:
            if any(rule.matches(user, info) for rule in schema.rules):
                chosen = schema
                break
        if chosen is None:  # (the catch-all schema matches every authenticated or unauthenticated user)
            chosen = next((s for s in self.schemas if s.name == "catch-all"), None)
            if chosen is None:
                return None
        schema = chosen
        level = self.levels[schema.level]
        distinguisher = user.name if schema.distinguisher == "ByUser" else \
            info.namespace if schema.distinguisher == "ByNamespace" else ""
        found = Classified(schema, level, flow_hash(schema.name, distinguisher),
                           ((LEVEL_HEADER, level.uid.encode()), (SCHEMA_HEADER, schema.uid.encode())),
                           METRICS.of(level.name, schema.name))
        if len(self._classified) >= _CLASSIFIED_MAX:
            self._classified = {}
        self._classified[key] = found
        return found

    def width(self, info: Info) -> int:
        """The seats a request occupies (upstream's list work estimator, by object count)."""
        if info.verb != "list" and not (info.verb == "watch" and "sendInitialEvents=true" in info.query):
            return MIN_SEATS
        if "metadata.name" in info.query or self.objects is None:  # (a fieldSelector naming one object)
            return MIN_SEATS
        n = self.objects(info)
        if n is None:
            return MIN_SEATS
        return max(MIN_SEATS, min(MAX_SEATS, math.ceil(n / OBJECTS_PER_SEAT)))

    # -- the filter ---------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: App, user: User | None) -> None:
        user = user or LOOPBACK
        masters = self._masters
        if masters is not None and "system:masters" in user.groups:  # (the load tests', kube-apiserver's own)
            path, query = scope["path"], scope.get("query_string", b"")
            if path.endswith(_LONG_RUNNING_ENDINGS) or "/proxy/" in path:
                info = request_info(scope["method"], path, query)  # (to be sure: rare)
                if info.long_running:
                    return await app(scope, receive, send)
            watch = (b"watch" in query and request_info(scope["method"], path, query).verb == "watch") \
                or "/watch/" in path
            if scope.get("server") == IN_PROCESS:
                # this process's own client (kube-apiserver's own controllers): served without the headers,
                # which it would only parse, and a watch not counted executing (inline: the hot path)
                stats = masters.stats
                stats[DISPATCHED] += 1
                if watch:
                    return await app(scope, receive, send)
                stats[EXECUTING] += 1
                stats[SEATS] += MIN_SEATS
                try:
                    return await app(scope, receive, send)
                finally:
                    stats[EXECUTING] -= 1
                    stats[SEATS] -= MIN_SEATS
            return await self._run(masters, None, MIN_SEATS, watch, app, scope, receive, send)
        info = request_info(scope["method"], scope["path"], scope.get("query_string", b""))
        if info.long_running or not self.configured:
            return await app(scope, receive, send)
        found = self.classify(user, info)
        if found is None:
            return await app(scope, receive, send)
        queues = found.level.queues
        seats = self.width(info)
        ticket: Ticket | None = None
        if queues is not None:  # (None: exempt, never limited)
            started = queues.start(seats, found.flow)
            level, schema = found.level.name, found.schema.name
            if isinstance(started, str):
                METRICS.observe_wait(level, schema, False, 0.0)
                return await self._reject(found, started, send)
            ticket = started
            if ticket.granted is not None:
                if not await self._wait(found, ticket, info, queues):
                    return await self._reject(found, "time-out", send)
            else:
                METRICS.observe_wait(level, schema, True, 0.0)
        return await self._run(found, ticket, seats, info.verb == "watch", app, scope, receive, send)

    @staticmethod
    async def _run(found: Classified, ticket: Ticket | None, seats: int, watch: bool, app: App, scope: Scope,
                   receive: Receive, send: Send) -> None:
        """Run a dispatched request on its ``seats`` (its ``ticket``'s; None: exempt) until its
        response is complete, a watch until its response starts."""
        headers, stats, queues = found.headers, found.stats, found.level.queues
        stats[DISPATCHED] += 1
        stats[EXECUTING] += 1
        stats[SEATS] += seats
        done = False

        def finish() -> None:
            nonlocal done
            if not done:
                done = True
                if queues is not None and ticket is not None:
                    queues.finish(ticket)
                stats[EXECUTING] -= 1
                stats[SEATS] -= seats

        async def answer(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *headers]
                if watch:  # initialized once its response starts: it runs free from here
                    finish()
            await send(message)

        try:
            await app(scope, receive, answer)
        finally:
            finish()

    async def _wait(self, found: Classified, ticket: Ticket, info: Info, queues: QueueSet) -> bool:
        """Wait for seats: True once granted, False when the wait limit passed first."""
        granted = ticket.granted
        assert granted is not None
        level, schema = found.level.name, found.schema.name
        found.stats[INQUEUE] += 1
        began = time.perf_counter()
        try:
            # (a watch has no deadline, as upstream's long-running requests: the default limit)
            await asyncio.wait((granted,), timeout=wait_limit("" if info.verb == "watch" else info.query))
        except asyncio.CancelledError:  # the client went away
            if granted.done():
                queues.finish(ticket)
            else:
                queues.withdraw(ticket)
            METRICS.rejected[(level, schema, "cancelled")] = METRICS.rejected.get((level, schema, "cancelled"), 0) + 1
            METRICS.observe_wait(level, schema, False, time.perf_counter() - began)
            raise
        finally:
            found.stats[INQUEUE] -= 1
        waited = time.perf_counter() - began
        if granted.done():
            METRICS.observe_wait(level, schema, True, waited)
            return True
        queues.withdraw(ticket)
        METRICS.observe_wait(level, schema, False, waited)
        return False

    @staticmethod
    async def _reject(found: Classified, reason: str, send: Send) -> None:
        level = found.level
        key = (level.name, found.schema.name, reason)
        METRICS.rejected[key] = METRICS.rejected.get(key, 0) + 1
        level.dropped.record()
        await too_many_requests(send, level.dropped.retry_after, found.headers)


DEBUG_PREFIX = "/debug/api_priority_and_fairness/"


def _table(rows: list[list[str]]) -> bytes:
    """Rows as upstream's dumps write them: cells joined by ``,`` and aligned as Go's tabwriter
    (minimum width 8, padding 1) aligns the cells before each tab."""
    widths = [max(8, max(len(r[i]) + 1 for r in rows) + 1) for i in range(len(rows[0]) - 1)]
    return "".join("".join(f"{cell + ',':<{w}}" for cell, w in zip(r, widths, strict=False)) + r[-1] + "\n"
                   for r in rows).encode()


def dump(flow: FlowControl, what: str) -> bytes | None:
    """``/debug/api_priority_and_fairness/dump_priority_levels`` or ``dump_queues``, as upstream's
    (levels by name; ``NextDispatchR`` the seat-seconds of service the queue has had, this
    server's virtual time); None for another name."""
    levels = sorted(flow.levels.values(), key=lambda lv: lv.name)
    if what == "dump_priority_levels":
        rows = [["PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests"]]
        for level in levels:
            qs = level.queues
            if qs is None:
                rows.append([level.name, *["<none>"] * 5])
                continue
            active = sum(1 for q in qs.dump() if q[0])
            idle = "true" if qs.waiting == 0 and qs.running == 0 else "false"
            rows.append([level.name, str(active), idle, "false", str(qs.waiting), str(qs.running)])
        return _table(rows)
    if what == "dump_queues":
        rows = [["PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR",
                 "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"]]
        for level in levels:
            if level.queues is None:
                rows.append([level.name, *["<none>"] * 8])
                continue
            for i, (waiting, running, seats, served, waiting_seats) in enumerate(level.queues.dump()):
                rows.append([level.name, str(i), str(waiting), str(running), str(seats), f"{served:.8f}ss",
                             str(waiting_seats), str(waiting_seats), f"{waiting_seats * level.queues.mean:.8f}ss"])
        return _table(rows)
    return None


async def too_many_requests(send: Send, retry_after: int, extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Upstream's 429: ``http.Error``'s plain text, with ``Retry-After``."""
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"),
        (b"retry-after", str(retry_after).encode()), *extra, (b"content-length", str(len(TOO_MANY)).encode())]})
    await send({"type": "http.response.body", "body": TOO_MANY})


class MaxInFlight:
    """kube-apiserver's max-in-flight filter (``WithMaxInFlightLimit``), used when API Priority
    and Fairness is off: ``readonly`` reads (get, list) and ``mutating`` writes at a time (0: no
    limit); watches and long-running requests pass; ``system:masters`` is never refused."""

    def __init__(self, readonly: int, mutating: int) -> None:
        self.limits = (readonly, mutating)
        self.inflight = [0, 0]

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: App, user: User | None) -> None:
        info = request_info(scope["method"], scope["path"], scope.get("query_string", b""))
        if info.long_running or info.verb == "watch":
            return await app(scope, receive, send)
        kind = 1 if info.mutating else 0
        limit = self.limits[kind]
        if limit and self.inflight[kind] >= limit:
            if "system:masters" in (user or LOOPBACK).groups:  # served, not counted, as upstream's
                return await app(scope, receive, send)
            return await too_many_requests(send, 1)
        self.inflight[kind] += 1
        try:
            await app(scope, receive, send)
        finally:
            self.inflight[kind] -= 1
