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
- The ``exempt`` level's requests run unlimited. Each level has a nominal limit,
  ``ceil(server limit x nominalConcurrencyShares / the shares of all levels)`` seats, the
  server's limit being ``--max-requests-inflight`` + ``--max-mutating-requests-inflight``
  (600 by default) per server process; a lower limit, the nominal less
  ``round(nominal x lendablePercent / 100)``; an upper one, the nominal plus
  ``round(nominal x borrowingLimitPercent / 100)`` (the server's limit without one).
- Borrowing (KEP-1040; upstream's ``updateBorrowing``, ``computeConcurrencyAllocation``):
  a limited level is dispatched by its current limit, which ``adjust`` moves between its
  bounds every 10 s (``rebalance``, a task on the server's loop that only starts a new
  period while no level has demand) and at each configuration change, from each level's
  seat demand (seats in use and waiting, integrated over the period: its high watermark,
  mean and deviation; smoothed as upstream's, up at once, down by 0.977 a period). The
  exempt level takes the seats its demand peaked at (at least its lower limit: with the
  default 0 shares, none when idle); the rest of the nominal seats go to the limited
  levels, each at least its lower limit and its peak demand up to its nominal, the rest in
  proportion to their smoothed demands, up to their upper limits; when the exempt level
  leaves less than that, pro rata down to the lower limits.
- A request occupies seats from its dispatch until its response is complete; a watch
  until its response starts (its initialization, as upstream's), then runs free. The
  width of a limited level's request (upstream's work estimators): a LIST's one seat per
  100 kB of the objects it holds at once (upstream's size-based estimate, ``list_seats``:
  the watch cache's count of its resource, its ``limit``, the objects' average size); a
  create, update, patch or delete waking at least 10 watches (the watch cache's watchers
  of every object of its type, of its namespace and of its name) one seat per 10 watches,
  held 5 ms of events' work past its response (spread over the
  level's widest: the same seat-seconds); every other request 1 seat. At most 10 seats,
  and at a queuing level at most ``max(1, min(ceil(15% of nominal), nominal / handSize))``.
  The exempt level's requests count 1 seat each in its demand.
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
``..._request_wait_duration_seconds{execute}``, ``..._work_estimated_seats`` (each by
``flow_schema`` and ``priority_level``), ``..._nominal_limit_seats``,
``..._lower_limit_seats``, ``..._upper_limit_seats``, ``..._current_limit_seats``,
``..._demand_seats_high_watermark``, ``..._demand_seats_average``,
``..._demand_seats_stdev``, ``..._demand_seats_smoothed``, ``..._target_seats`` (by
``priority_level``) and ``..._seat_fair_frac``.
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
from urllib.parse import unquote_plus

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..metrics import REGISTRY, REQUESTS, dry_run_label
from ..registry.flowcontrol import MANDATORY
from .fairqueuing import DemandStats, DroppedRequests, Integrator, Peak, QueueSet, Ticket, flow_hash
from .flowmatch import Info, Rule, request_info
from .rbac import User

__all__ = ["METRICS", "FlowControl", "MaxInFlight", "allocate", "list_seats", "wait_limit"]

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
MIN_SEATS, MAX_SEATS = 1, 10
# upstream's size-based LIST estimate (list_work_estimator.go, SizeBasedListCostEstimate, on
# since 1.34): a seat per BYTES_PER_SEAT of objects held at once, at most CACHE_LIST_BYTES of
# them for a list served from the cache (it streams), MAX_LIST_SEATS at most; an object of
# unknown size counts as MAX_OBJECT_SIZE (etcd's request limit)
BYTES_PER_SEAT, CACHE_LIST_BYTES, MAX_OBJECT_SIZE, MAX_LIST_SEATS = 100_000, 1_000_000, 1_500_000, 100
MAX_SEATS_FRACTION = 0.15  # of a queuing level's nominal seats: its widest request (at most nominal/handSize)
WATCHES_PER_SEAT = 10  # the mutating work estimator's: a write's final seats, per watch it wakes
EVENT_LATENCY = 0.005  # s of a seat a watch event costs (upstream's eventAdditionalDuration)
ADJUSTMENT_PERIOD = 10.0  # s between the current limits' adjustments (upstream's borrowingAdjustmentPeriod)
SMOOTHING = 0.977  # the smoothed seat demand's decay per period (half-life 5 minutes)
MIN_TARGET = 0.001
_EPSILON = 1e-7
# who asks when the server authenticates nobody (no token file: ``create_app`` in the benchmarks
# and tests, whose requests come from their own in-process clients): kube-apiserver's loopback
# client, in system:masters, so exempt
LOOPBACK = User("system:apiserver", ("system:authenticated", "system:masters"))
IN_PROCESS = ("in-process", 0)  # the ``server`` of a scope ``Client.in_process`` makes (client/transport.py)
_MASTER = User("", ("system:masters",))
_EVERYTHING = (Info(True, "deletecollection", "/apis/x/v1/namespaces/x/x", "x", "v1", "x", "", "x"),
               Info(True, "patch", "/apis/x/v1/x/x/x", "x", "v1", "x", "x", "", "x"), Info(False, "post", "/x"))
_LONG_RUNNING_ENDINGS = ("/log", "/exec", "/attach", "/portforward", "/proxy")
_MUTATING = frozenset({"create", "update", "patch", "delete"})  # (deletecollection: one seat, as upstream's)
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


def _names_one(selector: str) -> bool:
    """Whether a field selector requires one ``metadata.name`` (``metadata.name=x``, ``==x``),
    which upstream's request info takes for the name of the LIST."""
    for term in selector.split(","):
        field, op, _ = term.partition("==") if "==" in term else term.partition("=")
        if op and not field.endswith("!") and field.strip() == "metadata.name":
            return True
    return False


def list_seats(info: Info, count: int, size: int, max_seats: int) -> int:
    """The seats of a LIST (or a watch asking for its initial events) of a resource of
    ``count`` objects ``size`` bytes long on average, as upstream's size-based estimate: the
    objects it holds at once (one when a field selector names it; the ``limit``; half the
    resource at least when a selector filters a read of the store) times their size, at
    most ``CACHE_LIST_BYTES`` for one served from the cache (a consistent read, ``0``,
    ``NotOlderThan``: not a continuation or an exact version, which upstream reads from
    etcd), a seat per ``BYTES_PER_SEAT``::

        list_seats(request_info("GET", "/api/v1/pods", b""), 2500, 4000, 100)                # 10 (1 MB)
        list_seats(request_info("GET", "/api/v1/pods", b"limit=100&continue=x"), 2500, 4000, 100)  # 4
    """
    single = selector = continued = False
    limit, version, match = 0, "", ""
    if info.query:
        for part in info.query.split("&"):  # (by hand: parse_qsl costs ten times as much)
            key, _, value = part.partition("=")
            if "%" in value or "+" in value:
                value = unquote_plus(value)
            if key == "limit":
                try:
                    limit = int(value)  # (int64 in Go: a number past it fails there too, at length)
                except ValueError:
                    return max_seats  # (upstream: bound to fail validation, the most seats)
            elif key == "resourceVersion":
                version = value
            elif key == "resourceVersionMatch":
                match = value
            elif key == "continue":
                continued = bool(value)
            elif key == "labelSelector":
                selector = selector or bool(value)
            elif key == "fieldSelector":
                selector = selector or bool(value)
                single = single or _names_one(value)
    if info.verb == "watch" or match == "NotOlderThan":
        from_cache = True
    elif match:  # Exact, or one not known (an error: upstream assumes the worst, etcd)
        from_cache = False
    else:
        from_cache = not continued and not (limit > 0 and version not in ("", "0"))
    if size <= 0 and count:
        size = MAX_OBJECT_SIZE
    limited = min(count, limit) if limit > 0 else count
    if single:
        held = 1
    elif not from_cache and selector:
        held = max(limited, count // 2)
    else:
        held = limited
    memory = held * size
    if from_cache:
        memory = min(memory, CACHE_LIST_BYTES)
    return max(MIN_SEATS, min(max_seats, -(-memory // BYTES_PER_SEAT)))


# -- metrics ---------------------------------------------------------------------------------
_WAIT_BUCKETS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0)
_SEAT_BUCKETS = (1.0, 2.0, 4.0, 10.0)
_VALID_METHODS = frozenset({"APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH", "POST",
                            "PROXY", "PUT", "UPDATE", "WATCH", "WATCHLIST"})  # (upstream's validRequestMethods)
_TERMINATIONS_MAX = 4096
DISPATCHED, INQUEUE, EXECUTING, SEATS = range(4)


class FlowMetrics(Collector):
    """The flow-control series; written by the event loop only, read by a scrape's thread
    (copies taken in one step under the GIL)."""

    def __init__(self) -> None:
        self.stats: dict[tuple[str, str], list[int]] = {}  # (level, schema) -> [dispatched, inqueue, executing, seats]
        self.rejected: dict[tuple[str, str, str], int] = {}  # (level, schema, reason) -> count
        self.waits: dict[tuple[str, str, str], list[float]] = {}  # (level, schema, execute) -> [buckets..., +Inf, sum]
        self.estimates: dict[tuple[str, str], list[float]] = {}  # (level, schema) -> [seat buckets..., +Inf, sum]
        # (verb, group, version, resource, subresource, scope, code) -> requests refused in self-defense
        self.terminations: dict[tuple[str, str, str, str, str, str, str], int] = {}
        self.levels: list[Level] = []  # the configured levels, for their limits and seat demand
        self.fair_frac = 0.0

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

    def observe_seats(self, level: str, schema: str, seats: int) -> None:
        counts = self.estimates.get((level, schema))
        if counts is None:
            counts = self.estimates[(level, schema)] = [0.0] * (len(_SEAT_BUCKETS) + 2)
        counts[bisect.bisect_left(_SEAT_BUCKETS, seats)] += 1
        counts[-1] += seats

    def terminated(self, request: Scope, info: Info, code: int = 429) -> None:
        """A request refused by flow control or the max-in-flight filter, counted as upstream's
        filters count it: in ``apiserver_request_total`` with code 429 (``RecordDroppedRequest``,
        its ``dry_run`` label too) and in ``apiserver_request_terminations_total``
        (``RecordRequestTermination``, a non-resource request's path as its subresource); its verb
        the method as upstream's metrics name it (LIST, WATCH, APPLY). (The long-running requests
        upstream would name CONNECT are never refused.)"""
        scope = "resource" if info.name or info.verb == "create" else "namespace" if info.namespace else \
            "cluster" if info.resource else ""
        verb = str(request["method"]).upper()
        if verb == "PATCH" and any(k == b"content-type" and v.split(b";")[0].strip() == b"application/apply-patch+yaml"
                                   for k, v in request.get("headers", ())):
            verb = "APPLY"
        elif verb in ("GET", "HEAD"):
            verb = "LIST" if scope not in ("resource", "") else "GET"
        if info.verb == "watch":
            verb = "WATCH"
        elif verb not in _VALID_METHODS:
            verb = "other"
        if info.resource:
            REQUESTS.dropped_request(verb, dry_run_label(request.get("query_string", b"")), info.group,
                                     info.version, info.plural, info.subresource, scope)
        else:
            REQUESTS.dropped_request(verb, dry_run_label(request.get("query_string", b"")), "", "", "", "", scope)
        key = (verb, info.group, info.version, info.plural, info.subresource, scope, str(code)) if info.resource \
            else (verb, "", "", "", info.path, scope, str(code))
        if key not in self.terminations and len(self.terminations) >= _TERMINATIONS_MAX:
            key = (*key[:4], "other", *key[5:])  # (junk paths do not grow the series without end)
        self.terminations[key] = self.terminations.get(key, 0) + 1

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
        estimates = HistogramMetricFamily("apiserver_flowcontrol_work_estimated_seats",
                                          "Number of estimated seats (maximum of initial and final seats) associated "
                                          "with requests in API Priority and Fairness",
                                          labels=["flow_schema", "priority_level"])
        for (level, schema), counts in sorted(self.estimates.copy().items()):
            counts = list(counts)
            cumulative, buckets = 0.0, []
            for bound, count in zip((*_SEAT_BUCKETS, math.inf), counts[:-1], strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            estimates.add_metric([schema, level], buckets, counts[-1])
        gauges = [(GaugeMetricFamily(f"apiserver_flowcontrol_{name}", text, labels=["priority_level"]), value)
                  for name, text, value in _LEVEL_GAUGES]
        for each in sorted(self.levels, key=lambda lv: lv.name):  # (a list replaced whole, never changed)
            for gauge, value in gauges:
                gauge.add_metric([each.name], value(each))
        fair = GaugeMetricFamily("apiserver_flowcontrol_seat_fair_frac", "Fair fraction of server's concurrency to "
                                 "allocate to each priority level that can use it", value=self.fair_frac)
        terminations = CounterMetricFamily("apiserver_request_terminations", "Number of requests which apiserver "
                                           "terminated in self-defense.", labels=[
                                               "code", "component", "group", "resource", "scope", "subresource", "verb",
                                               "version"])
        for (verb, group, version, resource, sub, scope, code), n in sorted(self.terminations.copy().items()):
            terminations.add_metric([code, "apiserver", group, resource, scope, sub, verb, version], n)
        return [dispatched, rejected, inqueue, executing, seats, waits, estimates, *(g for g, _ in gauges), fair,
                terminations]


def _bound(b: float) -> str:
    return "+Inf" if b == math.inf else repr(b)


_LEVEL_GAUGES: list[tuple[str, str, Callable[[Level], float]]] = [
    ("nominal_limit_seats", "Nominal number of execution seats configured for each priority level",
     lambda lv: lv.nominal),
    ("lower_limit_seats", "Configured lower bound on number of execution seats available to each priority level",
     lambda lv: lv.lower),
    ("upper_limit_seats", "Configured upper bound on number of execution seats available to each priority level",
     lambda lv: lv.upper),
    ("current_limit_seats", "current derived number of execution seats available to each priority level",
     lambda lv: lv.current),
    ("demand_seats_high_watermark", "High watermark, over last adjustment period, of demand_seats",
     lambda lv: lv.high),
    ("demand_seats_average", "Time-weighted average, over last adjustment period, of demand_seats",
     lambda lv: lv.average),
    ("demand_seats_stdev", "Time-weighted standard deviation, over last adjustment period, of demand_seats",
     lambda lv: lv.deviation),
    ("demand_seats_smoothed", "Smoothed seat demands", lambda lv: lv.smoothed),
    ("target_seats", "Seat allocation targets", lambda lv: lv.target),
]


def _round(x: float) -> int:
    """Go's ``math.Round`` (halves away from zero) of a non-negative number."""
    return math.floor(x + 0.5)


def allocate(total: float, items: list[tuple[float, float, float]]) -> tuple[list[float], float]:
    """Share ``total`` seats among ``items`` of (lower bound, upper bound, target), as upstream's
    ``computeConcurrencyAllocation``: each gets ``fair x target`` clipped to its bounds, for the
    one ``fair`` proportion that makes them sum to ``total``. Returns the shares and ``fair``;
    ValueError when the bounds make it impossible. A target under ``MIN_TARGET`` counts as it.

    Example: ``allocate(10, [(1, 10, 1), (1, 10, 3)])`` is ``([2.5, 7.5], 2.5)``."""
    if total < 0:
        raise ValueError("negative sums are not supported")
    low = high = 0.0
    targets = []
    for i, (lower, upper, target) in enumerate(items):
        if lower < 0:
            raise ValueError(f"lower bound {i} is {lower} but negative lower bounds are not allowed")
        if target < lower:
            raise ValueError(f"target {i} is {target}, which is below its lower bound of {lower}")
        if upper < lower:
            raise ValueError(f"upper bound {i} is {upper} but should not be less than the lower bound {lower}")
        low += lower
        high += upper
        targets.append(max(target, MIN_TARGET))
    if low - total > _EPSILON:
        raise ValueError(f"lower bounds sum to {low}, which is higher than the required sum of {total}")
    if total - high > _EPSILON:
        raise ValueError(f"upper bounds sum to {high}, which is lower than the required sum of {total}")
    if total == 0:
        return [0.0] * len(items), 0.0
    pairs = list(zip(items, targets, strict=True))
    if low - total > -_EPSILON:
        return [float(lower) for lower, _, _ in items], min(lo / t for (lo, _, _), t in pairs)
    if total - high > -_EPSILON:
        return [float(upper) for _, upper, _ in items], max(up / t for (_, up, _), t in pairs)

    def shares(fair: float) -> list[float]:
        return [min(upper, max(lower, fair * t)) for (lower, upper, _), t in pairs]

    # the sum of the shares grows with ``fair``, linearly between the points where a share meets
    # a bound: find the stretch where it passes ``total`` and interpolate there
    points = sorted({b / t for (lower, upper, _), t in pairs for b in (lower, upper)})
    before, before_sum = 0.0, low
    for point in points:
        point_sum = sum(shares(point))
        if point_sum >= total:
            fair = point if point_sum == before_sum else \
                before + (total - before_sum) * (point - before) / (point_sum - before_sum)
            return shares(fair), fair
        before, before_sum = point, point_sum
    return shares(points[-1]), points[-1]  # (not reached: the upper bounds sum to at least total)


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
    across configuration changes, so those running and waiting stay counted), and its
    concurrency limits: ``nominal`` (its shares of the server's), ``lower`` (nominal less
    what it lends) and ``upper`` (nominal plus what it may borrow), and ``current``, moved
    between them by its seat demand (``FlowControl.adjust``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.uid = ""
        self.exempt = False
        self.shares = 0
        self.lendable = 0  # percent of nominal
        self.borrowing: int | None = None  # percent of nominal; None: no limit
        self.reject = False
        self.queuing = (0, 0, 0)  # (queues, handSize, queueLengthLimit)
        self.queues: QueueSet | None = None
        self.dropped = DroppedRequests()
        self.nominal: int = 0
        self.lower: int = 0
        self.upper: int = 0
        self.current: int = 0
        self.max_seats = MAX_SEATS  # the widest a request may be here (upstream's MaxSeatsTracker)
        self.new = True  # not yet given a limit
        # seat demand: a limited level's is its queues' (seats in use and waiting), integrated over
        # time; the exempt level's, its seats in use, counted here: only their peak (its limit is
        # its peak demand, and it is on every exempt request's path)
        self.exempt_demand = Peak()
        self.high: float = 0.0  # the last period's seat demand: its peak, mean, deviation
        self.average: float = 0.0
        self.deviation: float = 0.0
        self.smoothed: float = 0.0
        self.target: float = 0.0  # what the last adjustment aimed at

    @property
    def demand(self) -> Integrator | Peak:
        return self.queues.demand if self.queues is not None else self.exempt_demand

    def note(self, stats: DemandStats) -> None:
        """A period's seat demand (upstream's ``seatDemandStats.update``): the smoothed demand
        follows the envelope (mean plus deviation) up at once, down slowly."""
        self.high = stats.high
        if stats.duration <= 0:
            return
        deviation = 0.0 if math.isnan(stats.deviation) else stats.deviation
        self.average, self.deviation = stats.average, deviation
        envelope = stats.average + deviation
        smoothed = max(envelope, SMOOTHING * self.smoothed + (1 - SMOOTHING) * envelope)
        self.smoothed = smoothed if smoothed >= MIN_TARGET else 0.0  # (below it, all targets are alike)

    def configure(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        self.uid = str((obj.get("metadata") or {}).get("uid", ""))
        self.exempt = spec.get("type") == "Exempt"
        settings = (spec.get("exempt") if self.exempt else spec.get("limited")) or {}
        shares = settings.get("nominalConcurrencyShares")
        self.shares = int(shares) if shares is not None else (0 if self.exempt else 30)
        self.lendable = int(settings.get("lendablePercent") or 0)
        borrowing = None if self.exempt else settings.get("borrowingLimitPercent")
        self.borrowing = int(borrowing) if borrowing is not None else None
        response = settings.get("limitResponse") or {}
        self.reject = response.get("type") == "Reject"
        queuing = response.get("queuing") or {}
        self.queuing = (0, 0, 0) if self.reject else (int(queuing.get("queues", 64)), int(queuing.get("handSize", 8)),
                                                       int(queuing.get("queueLengthLimit", 50)))

    def set_limits(self, nominal: int, server_limit: int) -> None:
        """The limits of a configuration (upstream's ``finishQueueSetReconfigsLocked``): a new
        level starts at its nominal limit less half what it lends."""
        lendable = _round(nominal * self.lendable / 100)
        borrowing = _round(nominal * self.borrowing / 100) if self.borrowing is not None else server_limit
        self.nominal, self.lower, self.upper = nominal, nominal - lendable, nominal + borrowing
        queues, hand, _ = self.queuing
        self.max_seats = max(1, min(math.ceil(nominal * MAX_SEATS_FRACTION), nominal // hand)) \
            if queues and hand and not self.exempt else MAX_SEATS
        self.max_seats = min(self.max_seats, MAX_SEATS)
        if self.new:
            self.current = nominal - lendable // 2
            self.new = False
        if self.exempt:
            if self.queues is not None:  # (a level that became exempt: its demand goes on here)
                self.exempt_demand.add(round(self.queues.demand.x) - self.exempt_demand.x)
            self.queues = None
        elif self.queues is None:
            self.queues = QueueSet(self.current, *self.queuing)
        else:
            self.queues.configure(self.current, *self.queuing)

    def set_current(self, current: int) -> None:
        self.current = current
        if self.queues is not None:
            self.queues.set_limit(current)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A queued request as the ``dump_requests`` debug table shows it."""

    schema: str
    distinguisher: str
    arrived: int  # ns since the epoch
    initial_seats: int
    final_seats: int
    latency: float  # s its seats are held after its response
    user: str
    info: Info


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

    def __init__(self, server_limit: int, objects: Callable[[Info], tuple[int, int] | None] | None = None,
                 watchers: Callable[[Info], int] | None = None) -> None:
        self.server_limit = server_limit
        # how many objects a LIST's resource has and their average size (the watch cache's)
        self.objects = objects
        self.watchers = watchers  # how many watches a write wakes (the watch cache's watchers)
        self.nominal_sum = 0  # the levels' nominal limits summed (a little over server_limit: ceilings)
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
            level.set_limits(math.ceil(self.server_limit * level.shares / total), self.server_limit)
        self.nominal_sum = sum(level.nominal for level in kept.values())
        METRICS.levels = list(kept.values())
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
        self.adjust()  # (a configuration ends the adjustment period early, as upstream's)
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
                     generation: Callable[[], int], moved: Callable[[], list[asyncio.Future[None]]],
                     seen: int | None = None, retry: float = 0.1, longest: float = 1.0) -> None:
        """Configure from ``read()`` whenever ``generation()`` moves from ``seen`` (the watch
        caches' generations of the two types). Between changes it waits on ``moved()`` (the
        caches' futures, done at their next change: ``ResourceCache.moved``), or ``longest``
        seconds at most (a cache that failed was replaced by one whose future this wait does
        not hold); a read that fails is tried again after ``retry``."""
        while True:
            futures = moved()  # made before the check: a change after it resolves one of them
            now = generation()
            if now != seen:
                try:
                    schemas, levels = await read()
                except Exception as e:  # the caches are not loaded yet, or went away: the next turn
                    log.debug("flow control configuration not read: %r", e)
                    await asyncio.sleep(retry)
                else:
                    self.configure(schemas, levels)
                    seen = now
                continue
            await asyncio.wait(futures, timeout=longest)

    # -- borrowing ----------------------------------------------------------------------------
    def adjust(self, now: float | None = None) -> None:
        """Each level's current limit from its seat demand over the period now ended (upstream's
        ``updateBorrowing``). The exempt level takes the seats its demand peaked at (at least its
        lower limit); what remains of the server's is shared by the limited levels: each at least
        its lower limit and, as far as the rest allows, its peak demand up to its nominal limit
        (``floor``); beyond that in proportion to its smoothed demand (``target``), up to its upper
        limit."""
        levels = list(self.levels.values())
        remaining = self.nominal_sum
        limited: list[Level] = []
        floors: list[int] = []
        lower_sum = floor_sum = 0
        for level in levels:
            level.note(level.demand.reset(now))
            high = math.ceil(level.high - _EPSILON)
            if level.exempt:
                level.target = max(level.lower, high)
                remaining -= level.target
                continue
            floor = max(level.lower, min(level.nominal, high))
            level.target = max(floor, level.smoothed)
            limited.append(level)
            floors.append(floor)
            lower_sum += level.lower
            floor_sum += floor
        for level in levels:
            if level.exempt:
                level.set_current(int(level.target))
        fair = 0.0
        if remaining <= lower_sum:  # the exempt level took all it could: the others at their lower limits
            currents = [level.lower for level in limited]
        elif remaining <= floor_sum:  # enough for the lower limits, not for every floor: shared pro rata
            share = (remaining - lower_sum) / (floor_sum - lower_sum)
            currents = [level.lower + _round((floor - level.lower) * share) for level, floor in zip(
                limited, floors, strict=True)]
        else:
            try:
                shares, fair = allocate(remaining, [(floor, level.upper, level.target) for level, floor in zip(
                    limited, floors, strict=True)])
                currents = [_round(x) for x in shares]
            except ValueError as e:  # (not expected: the bounds are checked above) the limits stay
                log.error("flow control: unable to derive new concurrency limits: %s", e)
                currents = [level.current for level in limited]
        for level, current in zip(limited, currents, strict=True):
            level.set_current(current)
        METRICS.fair_frac = fair

    async def rebalance(self, every: float = ADJUSTMENT_PERIOD) -> None:
        """``adjust`` every ``every`` seconds (upstream's periodic rebalancing); nothing to do
        while no level has had any demand since."""
        while True:
            await asyncio.sleep(every)
            levels = self.levels.values()
            if any(level.demand.high or level.smoothed for level in levels):  # (high: the period's peak, >= now)
                self.adjust()
            else:  # idle: the limits would come out as they are; only a new period starts
                for level in levels:
                    level.demand.reset()

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

    def width(self, info: Info, max_seats: int = MAX_SEATS) -> tuple[int, float]:
        """The seats a request occupies at a level whose widest request is ``max_seats``, and how
        long it holds them after its response (upstream's work estimators): a LIST (and a watch
        asking for its initial events) one seat per ``BYTES_PER_SEAT`` of the objects it holds
        at once (``list_seats``); a create, update, patch or delete waking
        at least ``WATCHES_PER_SEAT`` watches one seat per that many, held ``EVENT_LATENCY`` (the
        seat-seconds of its events, spread over at most ``max_seats`` seats) after its response
        while the watches are sent its event; everything else one seat."""
        verb = info.verb
        if verb in _MUTATING:
            if self.watchers is None or not info.resource:
                return MIN_SEATS, 0.0
            watches = self.watchers(info)
            if watches < WATCHES_PER_SEAT:
                return MIN_SEATS, 0.0
            final = math.ceil(watches / WATCHES_PER_SEAT)
            work = final * EVENT_LATENCY
            final = min(final, max_seats)
            return final, work / final
        if verb != "list" and not (verb == "watch" and "sendInitialEvents=true" in info.query):
            return MIN_SEATS, 0.0
        stats = self.objects(info) if self.objects is not None else None
        if stats is None:  # (upstream: an unknown count, an aggregated API's, is the minimum)
            return MIN_SEATS, 0.0
        return list_seats(info, stats[0], stats[1], min(max_seats, MAX_LIST_SEATS)), 0.0

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
                demand = masters.level.exempt_demand  # (what the exempt level borrows by: Peak.add, inline)
                x = demand.x + MIN_SEATS
                demand.x = x
                if x > demand.high:
                    demand.high = x
                try:
                    return await app(scope, receive, send)
                finally:
                    stats[EXECUTING] -= 1
                    stats[SEATS] -= MIN_SEATS
                    demand.x -= MIN_SEATS
            return await self._run(masters, None, MIN_SEATS, 0.0, watch, app, scope, receive, send)
        info = request_info(scope["method"], scope["path"], scope.get("query_string", b""))
        if info.long_running or not self.configured:
            return await app(scope, receive, send)
        found = self.classify(user, info)
        if found is None:
            return await app(scope, receive, send)
        queues = found.level.queues
        seats, latency = MIN_SEATS, 0.0
        ticket: Ticket | None = None
        if queues is not None:  # (None: exempt, never limited)
            level, schema = found.level.name, found.schema.name
            seats, latency = self.width(info, found.level.max_seats)
            METRICS.observe_seats(level, schema, seats)
            started = queues.start(seats, found.flow)
            if isinstance(started, str):
                METRICS.observe_wait(level, schema, False, 0.0)
                return await self._reject(found, started, send, scope, info)
            ticket = started
            if ticket.granted is not None:
                ticket.about = self._about(found, user, info, seats, latency)
                if not await self._wait(found, ticket, info, queues):
                    return await self._reject(found, "time-out", send, scope, info)
            else:
                METRICS.observe_wait(level, schema, True, 0.0)
        return await self._run(found, ticket, seats, latency, info.verb == "watch", app, scope, receive, send)

    @staticmethod
    def _about(found: Classified, user: User, info: Info, seats: int, latency: float) -> Waiting:
        queues = found.level.queues
        method = found.schema.distinguisher if queues is not None and queues.queues > 1 else ""
        return Waiting(found.schema.name, user.name if method == "ByUser" else info.namespace if method == "ByNamespace"
                       else "", time.time_ns(), 1 if latency else seats, seats if latency else 0, latency, user.name,
                       info)

    @staticmethod
    async def _run(found: Classified, ticket: Ticket | None, seats: int, latency: float, watch: bool, app: App,
                   scope: Scope, receive: Receive, send: Send) -> None:
        """Run a dispatched request on its ``seats`` (its ``ticket``'s; None: exempt) until its
        response is complete, then ``latency`` seconds more (its watch events' work); a watch
        until its response starts."""
        headers, stats, queues = found.headers, found.stats, found.level.queues
        stats[DISPATCHED] += 1
        stats[EXECUTING] += 1
        stats[SEATS] += seats
        exempt = found.level.exempt_demand if queues is None else None
        if exempt is not None:
            exempt.add(seats)
        done = False

        def release() -> None:
            if queues is not None and ticket is not None:
                queues.finish(ticket)
            if exempt is not None:
                exempt.add(-seats)
            stats[SEATS] -= seats

        def finish() -> None:
            nonlocal done
            if not done:
                done = True
                stats[EXECUTING] -= 1
                if latency > 0:  # the seats stay taken while the watches are sent the event
                    asyncio.get_running_loop().call_later(latency, release)
                else:
                    release()

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
    async def _reject(found: Classified, reason: str, send: Send, scope: Scope, info: Info) -> None:
        METRICS.terminated(scope, info)
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


def dump(flow: FlowControl, what: str, query: str = "") -> bytes | None:
    """``/debug/api_priority_and_fairness/dump_priority_levels``, ``dump_queues`` or
    ``dump_requests`` (the waiting requests; ``includeRequestDetails=1`` for who asked what), as
    upstream's (levels by name; ``NextDispatchR`` the seat-seconds of service the queue has
    had, this server's virtual time); None for another name."""
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
    if what == "dump_requests":
        rows = [["PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
                 "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency"]]
        details = "includeRequestDetails=" in query and any(
            part.startswith("includeRequestDetails=") and len(part) > len("includeRequestDetails=")
            for part in query.split("&"))
        if details:
            rows[0] += ["UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource"]
        for level in levels:
            if level.queues is None:
                continue
            for i, tickets in enumerate(level.queues.waiting_tickets()):
                for j, ticket in enumerate(tickets):
                    w = ticket.about
                    if not isinstance(w, Waiting):
                        continue
                    row = [level.name, w.schema, str(i), str(j), w.distinguisher, _rfc3339_nano(w.arrived),
                           str(w.initial_seats), str(w.final_seats), go_duration(w.latency)]
                    if details:
                        info = w.info
                        version = f"{info.group}/{info.version}" if info.group else info.version
                        row += [w.user, info.verb, info.path, info.namespace, info.name, version, info.plural,
                                info.subresource]
                    rows.append(row)
        return _table(rows)
    return None


def _rfc3339_nano(ns: int) -> str:
    """Go's ``time.RFC3339Nano`` of a UTC time: the fraction without its trailing zeros."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return text + (f".{fraction:09d}".rstrip("0") if fraction else "") + "Z"


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()``: ``0s``, ``5ms``, ``12.5ms``, ``1.5s``, ``2m0.5s``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    if ns < 1000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return _trimmed(ns / 1e3) + "µs"
    if ns < 1_000_000_000:
        return _trimmed(ns / 1e6) + "ms"
    minutes, rest = divmod(ns, 60_000_000_000)
    hours, minutes = divmod(minutes, 60)
    text = _trimmed(rest / 1e9) + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _trimmed(x: float) -> str:
    text = f"{x:.9f}".rstrip("0").rstrip(".")
    return text or "0"


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
            METRICS.terminated(scope, info)
            return await too_many_requests(send, 1)
        self.inflight[kind] += 1
        try:
            await app(scope, receive, send)
        finally:
            self.inflight[kind] -= 1
