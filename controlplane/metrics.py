"""The server's Prometheus metrics (names fixed by DESIGN.md).

Every metric is a module-level object on ``REGISTRY``; code that records one
imports it from here::

    from controlplane.metrics import WATCH_CACHE_LOCK_WAIT
    WATCH_CACHE_LOCK_WAIT.labels(resource="pods", role="writer").observe(waited)

``REGISTRY`` is what the API server's ``/metrics`` shows: everything, the components
that run inside ``serve`` included. A standalone command (``controlplane scheduler``,
``nodes``, ``autoscaler``) serves its own ``/metrics`` (metricsserver.py) from
``component_registry`` of its component's tuple (``SCHEDULER_METRICS``, ``NODES_METRICS``,
``AUTOSCALER_METRICS``): what it records, never the API server's series, which it does
not run. A metric a component records belongs in its tuple (the controllers' in
``CONTROLLERS_METRICS``): ``serve --components-process`` shows their child's values of
them all (``COMPONENTS_METRICS``, componentsmetrics.py).

Durations are in seconds. Buckets reach far below kube-apiserver's: this
server answers in microseconds to milliseconds, and a histogram whose first
bucket is 5 ms would hide every difference worth measuring.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import math
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import parse_qs

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Metric,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "ADMISSION_MATCH_CONDITION_ERRORS",
    "ADMISSION_MATCH_CONDITION_EXCLUSIONS",
    "ADMISSION_MATCH_CONDITION_SECONDS",
    "ADMISSION_WEBHOOK_DURATION",
    "ADMISSION_WEBHOOK_FAIL_OPEN",
    "ADMISSION_WEBHOOK_REJECTIONS",
    "ADMISSION_WEBHOOK_REQUESTS",
    "CONVERSION_WEBHOOK_DURATION",
    "CONVERSION_WEBHOOK_REQUESTS",
    "CRD_CONVERSION_WEBHOOK_DURATION",
    "AUTOSCALER_NODECLAIMS_CREATED",
    "AUTOSCALER_NODECLAIMS_DISRUPTED",
    "AUTOSCALER_NODES",
    "AUTOSCALER_PROVISIONING",
    "AUTOSCALER_METRICS",
    "COMPONENTS_METRICS",
    "CONTROLLERS_METRICS",
    "AUTOSCALER_SIMULATION",
    "CONTENT_TYPE",
    "EVENT_LOOP_LAG",
    "GC_PAUSE",
    "IMAGE_PULLS",
    "IMAGE_PULL_SECONDS",
    "LEASE_RENEWALS",
    "LEASE_RENEW_LAG",
    "LONGRUNNING_REQUESTS",
    "NODES_HEALTH_PASS",
    "NODES_METRICS",
    "NODE_EVICTIONS",
    "OBJECT_COUNTS",
    "PODGC_DELETES",
    "PODGC_DELETE_ERRORS",
    "PODGROUP_SCHEDULE_ATTEMPTS",
    "POD_STARTUP",
    "POD_START_SECONDS",
    "PROCESS_COLLECTORS",
    "REGISTRY",
    "REQUESTS",
    "REQUEST_BUCKETS",
    "SCHEDULER_E2E_SCHEDULING",
    "SCHEDULER_METRICS",
    "SCHEDULER_SCHEDULE_ATTEMPTS",
    "STAGE_TRANSITIONS",
    "STORE_COMMIT_BATCH_SIZE",
    "STORE_COMMIT_SECONDS",
    "UNHEALTHY_NODES",
    "WATCH_CACHE_FALLBACKS",
    "WATCH_CACHE_LOCK_WAIT",
    "WATCH_CACHE_REREAD_EVENTS",
    "WATCH_EVENT_DELIVERY",
    "ZONE_EVICTIONS",
    "ZONE_HEALTH",
    "ZONE_SIZE",
    "component_registry",
    "dry_run_label",
    "observe_many",
    "exposition",
    "monitor_event_loop_lag",
    "observe_gc_pauses",
]

# The classic text format (0.0.4), which every Prometheus and kube tool reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# A registry of our own rather than prometheus_client's global one, so that
# importing this module twice (tests, reloads) never collides, and /metrics
# shows exactly what is listed here plus the process collectors.
REGISTRY = CollectorRegistry(auto_describe=True)
# process_*, python_info, python_gc_*: every process's, on each registry (component_registry's too)
PROCESS_COLLECTORS: tuple[Collector, ...] = (
    ProcessCollector(registry=REGISTRY), PlatformCollector(registry=REGISTRY), GCCollector(registry=REGISTRY))

_MICRO_TO_SECOND = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
    1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)
_SUBMILLI_TO_TEN = (
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)

WATCH_CACHE_LOCK_WAIT = Histogram(
    "controlplane_watch_cache_lock_wait_seconds",
    "Time spent waiting to acquire a watch cache's lock, by the cache's writer or a reader.",
    ["resource", "role"],  # role: "writer" | "reader"
    buckets=_MICRO_TO_SECOND,
    registry=REGISTRY,
)

WATCH_CACHE_FALLBACKS = Counter(
    "controlplane_watch_cache_fallbacks_total",
    "Reads the watch cache handed to the store: a consistent read that waited too long for the cache "
    "(reason get/list/watch), a revision older than the cache keeps (past-revision, window), an exact revision "
    "it has not reached (behind), a cache not loaded.",
    ["resource", "reason"],
    registry=REGISTRY,
)

WATCH_CACHE_REREAD_EVENTS = Counter(
    "controlplane_watch_cache_reread_events_total",
    "Events a watch cache read back from the store's log because it had fallen more than its feed backlog "
    "(100,000 events) behind its writers, rather than hold them queued in memory.",
    ["resource"],
    registry=REGISTRY,
)

WATCH_EVENT_DELIVERY = Histogram(
    "controlplane_watch_event_delivery_seconds",
    "Time from the store's commit of a revision to the event's bytes being handed to a watcher's stream.",
    ["resource"],
    buckets=_SUBMILLI_TO_TEN,
    registry=REGISTRY,
)

EVENT_LOOP_LAG = Histogram(
    "controlplane_event_loop_lag_seconds",
    "How late the event loop runs its timer: due every 10 ms while the loop runs late (5 ms or more "
    "within the last second), every 100 ms while it keeps time.",
    buckets=(1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=REGISTRY,
)

GC_PAUSE = Histogram(
    "controlplane_gc_pause_seconds",
    "Duration of one run of the cyclic garbage collector, by the generation it collected: "
    "the thread that allocated (the event loop's, mostly) runs nothing else meanwhile.",
    ["generation"],
    buckets=(1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)

# -- the API's requests: controlplane_request_duration_seconds and kube-apiserver's series ----------------
# One observation per request (api/rest.py ``_observe_request``): a count in the bucket its duration falls in
# and the duration added to a sum, kept per RequestKey in a plain list. Every series below is derived from
# those lists when /metrics is read (``RequestMetrics.collect``), so naming them as upstream does costs a
# request nothing. Upstream's buckets are a subset of REQUEST_BUCKETS: a cumulative count at one of its
# bounds is the same number in both.
REQUEST_BUCKETS = (  # kube-apiserver's buckets, preceded by sub-5 ms ones
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5,
    2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)
# k8s.io/apiserver/pkg/endpoints/metrics: apiserver_request_duration_seconds' and
# apiserver_request_sli_duration_seconds' buckets
APISERVER_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
                     10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
SLI_BUCKETS = APISERVER_BUCKETS[2:]
# upstream reports these subresources' requests as verb CONNECT, and any verb it does not know as "other"
CONNECT_SUBRESOURCES = frozenset({"log", "exec", "portforward", "attach", "proxy"})
_UPSTREAM_VERBS = frozenset({"APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH",
                             "POST", "PROXY", "PUT", "UPDATE", "WATCH", "WATCHLIST"})
COMPONENT = "apiserver"  # upstream's component label of the API's own requests

# (verb, dry_run, group, version, resource, subresource, scope, code). verb: GET, LIST, WATCH, POST, PUT,
# PATCH, APPLY (a server-side apply patch), DELETE, DELETECOLLECTION (or the method); scope: resource
# (named), namespace or cluster (a collection), for a create too (controlplane_request_duration_seconds'
# meaning; upstream's create is scope resource, made so when exposed); dry_run: upstream's label ("", "All",
# "invalid").
RequestKey = tuple[str, str, str, str, str, str, str, str]
REQUEST_SERIES_MAX = 4096  # keys; past it a new key's resource is "other" (junk paths cannot grow it without end)


# le label values: prometheus_client's form (1.0) for ours, as before; Go's (1), as kube-apiserver's
# client_golang writes them, for the apiserver_* series (a query for le="1" finds them)
_LE = [str(floatToGoString(b)) for b in REQUEST_BUCKETS]  # type: ignore[no-untyped-call]
_GO_LE = [format(b, "g") for b in REQUEST_BUCKETS]


def _cumulative(counts: Sequence[float], at: Sequence[int], le: Sequence[str]) -> list[tuple[str, float]]:
    """Prometheus buckets (le, cumulative count) at REQUEST_BUCKETS' indexes ``at``, then +Inf."""
    out: list[tuple[str, float]] = []
    running = 0.0
    i = 0
    for j in at:
        while i <= j:
            running += counts[i]
            i += 1
        out.append((le[j], running))
    out.append(("+Inf", float(sum(counts[:-1]))))
    return out


def dry_run_label(query: bytes) -> str:
    """Upstream's ``dry_run`` label of a request's query: the distinct ``dryRun`` values, sorted
    and joined with commas; ``invalid`` if one is not ``All``; "" without any."""
    if b"dryRun" not in query:
        return ""
    values = parse_qs(query.decode("latin-1"), keep_blank_values=True).get("dryRun", [])
    if any(v != "All" for v in values):
        return "invalid"
    return ",".join(sorted(set(values)))


def _upstream_verb(verb: str, subresource: str, scope: str) -> str:
    if subresource in CONNECT_SUBRESOURCES:
        return "CONNECT"
    if verb == "HEAD":
        return "GET" if scope == "resource" else "LIST"
    return verb if verb in _UPSTREAM_VERBS else "other"


class RequestMetrics(Collector):
    """The API's request series: ``controlplane_request_duration_seconds{verb,resource,subresource,scope,code}``
    (watches left out), and kube-apiserver's ``apiserver_request_duration_seconds``,
    ``apiserver_request_sli_duration_seconds`` (the same durations less the time spent calling admission
    webhooks, as upstream's: no queue time to take out here; dry runs left out, as upstream),
    ``apiserver_request_total`` and ``apiserver_current_inflight_requests``.

    A request refused with a 429 before it was served (flow control, the max-in-flight
    filter) is counted in ``apiserver_request_total`` only, with code 429, as upstream's
    ``RecordDroppedRequest`` counts it (``dropped_request``); no duration is observed.

    A request that called a webhook is moved, in the SLI only, from its duration's bucket to that of
    its duration less the webhooks' time (``exclude``: a list of such moves per key, added to the
    key's counts when collected), so a request that called none pays nothing for it.

    ``series`` and ``inflight`` are written by the event loop's thread only; ``collect`` (a
    scrape's worker thread) reads copies, each taken in one step under the GIL."""

    def __init__(self) -> None:
        self.series: dict[RequestKey, list[float]] = {}  # key -> [count per bucket..., +Inf count, sum]
        self.sli_moved: dict[RequestKey, list[float]] = {}  # key -> what to add to its counts for the SLI
        # requests being served, by upstream's request_kind: [readOnly, mutating] (watches not counted),
        # and the most of each since the last scrape: upstream reports its last second's most
        self.inflight = [0, 0]
        self.peak = [0, 0]
        # apiserver_request_total's labels (code first) -> requests refused with a 429 before being served
        self.dropped: dict[tuple[str, ...], int] = {}

    def dropped_request(self, verb: str, dry_run: str, group: str, version: str, resource: str, subresource: str,
                        scope: str) -> None:
        """A request refused with a 429 by flow control or the max-in-flight filter (upstream's
        ``RecordDroppedRequest``): ``verb`` as upstream's metrics name it; a non-resource
        request has no group, version, resource or subresource."""
        key = ("429", COMPONENT, dry_run, group, resource, scope, subresource, verb, version)
        if key not in self.dropped and len(self.dropped) >= REQUEST_SERIES_MAX:
            key = ("429", COMPONENT, dry_run, group, "other", scope, "", verb, version)
        self.dropped[key] = self.dropped.get(key, 0) + 1

    def counts(self, key: RequestKey) -> list[float]:
        """``key``'s list, made on first use."""
        counts = self.series.get(key)
        if counts is None:
            if len(self.series) >= REQUEST_SERIES_MAX:
                key = (*key[:4], "other", "", *key[6:])
                counts = self.series.get(key)
            if counts is None:
                counts = self.series[key] = [0] * (len(REQUEST_BUCKETS) + 2)
        return counts

    def clear(self) -> None:
        self.series.clear()
        self.sli_moved.clear()
        self.dropped.clear()

    def exclude(self, key: RequestKey, bucket: int, seconds: float, excluded: float) -> None:
        """For the SLI: the request of ``key`` counted in ``bucket`` (``seconds`` long) spent
        ``excluded`` of them calling webhooks (upstream's latency trackers)."""
        if key not in self.series:  # (counted under "other": ``counts``)
            key = (*key[:4], "other", "", *key[6:])
        moved = self.sli_moved.get(key)
        if moved is None:
            moved = self.sli_moved[key] = [0] * (len(REQUEST_BUCKETS) + 2)
        excluded = min(excluded, seconds)
        moved[bucket] -= 1
        moved[bisect.bisect_left(REQUEST_BUCKETS, seconds - excluded)] += 1
        moved[-1] -= excluded

    @staticmethod
    def _families() -> tuple[HistogramMetricFamily, HistogramMetricFamily, HistogramMetricFamily,
                             CounterMetricFamily, GaugeMetricFamily]:
        return (
            HistogramMetricFamily(
                "controlplane_request_duration_seconds",
                "Response latency by verb, resource, subresource, scope and HTTP code (as "
                "apiserver_request_duration_seconds; watches are not counted).",
                labels=["verb", "resource", "subresource", "scope", "code"]),
            HistogramMetricFamily(
                "apiserver_request_duration_seconds",
                "Response latency in seconds by verb, dry run value, group, version, resource, subresource, "
                "scope and component.",
                labels=["component", "dry_run", "group", "resource", "scope", "subresource", "verb", "version"]),
            HistogramMetricFamily(
                "apiserver_request_sli_duration_seconds",
                "Response latency distribution (not counting webhook duration and priority & fairness queue wait "
                "times) in seconds for each verb, group, version, resource, subresource, scope and component.",
                labels=["component", "group", "resource", "scope", "subresource", "verb", "version"]),
            CounterMetricFamily(
                "apiserver_request",
                "Requests by verb, dry run value, group, version, resource, subresource, scope, component and "
                "HTTP code.",
                labels=["code", "component", "dry_run", "group", "resource", "scope", "subresource", "verb",
                        "version"]),
            GaugeMetricFamily(
                "apiserver_current_inflight_requests",
                "Most requests being served at once since the previous scrape, by request kind (readOnly, "
                "mutating; long-running ones not counted).",
                labels=["request_kind"]),
        )

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        ours, duration, sli, total, inflight = self._families()
        width = len(REQUEST_BUCKETS) + 2
        by_ours: dict[tuple[str, ...], list[float]] = {}
        by_upstream: dict[tuple[str, ...], list[float]] = {}
        by_sli: dict[tuple[str, ...], list[float]] = {}
        by_code: dict[tuple[str, ...], float] = {}

        def add(into: dict[tuple[str, ...], list[float]], key: tuple[str, ...], counts: list[float]) -> None:
            into_counts = into.get(key)
            if into_counts is None:
                into[key] = counts
            else:
                into[key] = [a + b for a, b in zip(into_counts, counts, strict=True)]

        moved_by_key = self.sli_moved.copy()
        for key, counts in self.series.copy().items():
            verb, dry_run, group, version, resource, sub, scope, code = key
            counts = list(counts)
            if len(counts) != width:
                continue
            if verb != "WATCH":
                add(by_ours, ("PATCH" if verb == "APPLY" else verb, resource, sub, scope, code), counts)
            shown = _upstream_verb(verb, sub, scope)
            if verb == "POST":
                scope = "resource"  # upstream's installer: a create is scope resource
            add(by_upstream, (COMPONENT, dry_run, group, resource, scope, sub, shown, version), counts)
            with_code = (code, COMPONENT, dry_run, group, resource, scope, sub, shown, version)
            by_code[with_code] = by_code.get(with_code, 0.0) + sum(counts[:-1])
            if not dry_run:
                moved = moved_by_key.get(key)
                if moved is not None and len(moved) == width:
                    counts = [a + b for a, b in zip(counts, moved, strict=True)]
                add(by_sli, (COMPONENT, group, resource, scope, sub, shown, version), counts)
        every = range(len(REQUEST_BUCKETS))
        upstream_at = [REQUEST_BUCKETS.index(b) for b in APISERVER_BUCKETS]
        sli_at = [REQUEST_BUCKETS.index(b) for b in SLI_BUCKETS]
        for family, series, at, le in ((ours, by_ours, every, _LE), (duration, by_upstream, upstream_at, _GO_LE),
                                       (sli, by_sli, sli_at, _GO_LE)):
            for labels, counts in sorted(series.items()):
                family.add_metric(labels, _cumulative(counts, at, le), counts[-1])
        for labels_code, dropped in self.dropped.copy().items():
            by_code[labels_code] = by_code.get(labels_code, 0.0) + dropped
        for labels_code, n in sorted(by_code.items()):
            total.add_metric(labels_code, n)
        for i, kind in enumerate(("readOnly", "mutating")):
            now = self.inflight[i]
            inflight.add_metric([kind], max(self.peak[i], now))
            self.peak[i] = now
        return [ours, duration, sli, total, inflight]


REQUESTS = RequestMetrics()
REGISTRY.register(REQUESTS)

LONGRUNNING_REQUESTS = Gauge(
    "apiserver_longrunning_requests",
    "Long-running requests (watches) being served, by verb, group, version, resource, subresource, scope "
    "and component.",
    ["component", "group", "resource", "scope", "subresource", "verb", "version"],
    registry=REGISTRY,
)


# -- admission webhooks and CRD conversion webhooks, under kube-apiserver's names ----------------------
# (k8s.io/apiserver/pkg/admission/metrics and apiextensions-apiserver/pkg/apiserver/conversion; recorded
# by api/webhooks.py and api/crdconversion.py, and only when a webhook is called: a write with none pays
# nothing here). Upstream's buckets: these start at 5 ms, as kube-apiserver's.
class PlainCounter(Collector):
    """A counter whose name upstream exposes without ``_total`` (client_golang adds none):
    ``apiserver_admission_webhook_rejection_count``. prometheus_client's ``Counter`` would
    append it; this one's samples carry the name as it is (``exposition`` keeps it)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + 1.0

    def count(self, labels: tuple[str, ...]) -> None:
        """``inc`` of the label values as one tuple (a hot path's, made once)."""
        self.values[labels] = self.values.get(labels, 0.0) + 1.0

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, "counter")]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        for labels, value in sorted(self.values.copy().items()):
            metric.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        return [metric]


ADMISSION_WEBHOOK_DURATION = Histogram(
    "apiserver_admission_webhook_admission_duration_seconds",
    "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and "
    "API resource and type (validate or admit).",
    ["name", "type", "operation", "rejected"],
    buckets=(0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0),
    registry=REGISTRY,
)
ADMISSION_WEBHOOK_REQUESTS = Counter(
    "apiserver_admission_webhook_request",
    "Admission webhook request total, identified by name and broken out for each admission type (validating or "
    "mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP "
    "status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
    ["name", "type", "operation", "code", "rejected"],
    registry=REGISTRY,
)
ADMISSION_WEBHOOK_REJECTIONS = PlainCounter(
    "apiserver_admission_webhook_rejection_count",
    "Admission webhook rejection count, identified by name and broken out for each admission type (validating "
    "or admit) and operation. Additional labels specify an error type (calling_webhook_error or "
    "apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection "
    "code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code "
    "is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality "
    "bounded.",
    ["name", "type", "operation", "error_type", "rejection_code"],
)
REGISTRY.register(ADMISSION_WEBHOOK_REJECTIONS)
ADMISSION_WEBHOOK_FAIL_OPEN = PlainCounter(
    "apiserver_admission_webhook_fail_open_count",
    "Admission webhook fail open count, identified by name and broken out for each admission type (validating "
    "or mutating).",
    ["name", "type"],
)
REGISTRY.register(ADMISSION_WEBHOOK_FAIL_OPEN)
_PLAIN_COUNTERS = frozenset({ADMISSION_WEBHOOK_REJECTIONS.name, ADMISSION_WEBHOOK_FAIL_OPEN.name})


class LabelCounter(PlainCounter):
    """A ``<name>_total`` counter held as a dict by label values, for a hot path: an increment is
    a dict update where prometheus_client's ``labels(...).inc()`` takes a lock and a lookup
    (0.2 µs with ``count`` of a tuple made once, against 3.7 µs, on a loaded machine). ``inc``
    and ``count`` take the label values in ``labelnames``' order."""

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        for labels, value in sorted(self.values.copy().items()):
            metric.add_sample(self.name + "_total", dict(zip(self.labelnames, labels, strict=True)), value)
        return [metric]


# PodSecurity admission's metrics (k8s.io/pod-security-admission/metrics), recorded by api/rest.py
POD_SECURITY_EVALUATIONS = LabelCounter(
    "pod_security_evaluations",
    "Number of policy evaluations that occurred, not counting ignored or exempt requests.",
    ["decision", "policy_level", "policy_version", "mode", "request_operation", "resource", "subresource"],
)
REGISTRY.register(POD_SECURITY_EVALUATIONS)
POD_SECURITY_EXEMPTIONS = LabelCounter(
    "pod_security_exemptions",
    "Number of exempt requests, not counting ignored or out of scope requests.",
    ["request_operation", "resource", "subresource"],
)
REGISTRY.register(POD_SECURITY_EXEMPTIONS)
POD_SECURITY_ERRORS = LabelCounter(
    "pod_security_errors",
    "Number of errors preventing normal evaluation. Non-fatal errors may result in the latest restricted "
    "profile being used for evaluation.",
    ["fatal", "request_operation", "resource", "subresource"],
)
REGISTRY.register(POD_SECURITY_ERRORS)


ADMISSION_MATCH_CONDITION_ERRORS = Counter(
    "apiserver_admission_match_condition_evaluation_errors",
    "Admission match condition evaluation errors count, identified by name of resource containing the match "
    "condition and broken out for each kind containing matchConditions (webhook or policy), operation and "
    "admission type (validate or admit).",
    ["name", "kind", "type", "operation"],
    registry=REGISTRY,
)
ADMISSION_MATCH_CONDITION_EXCLUSIONS = Counter(
    "apiserver_admission_match_condition_exclusions",
    "Admission match condition evaluation exclusions count, identified by name of resource containing the match "
    "condition and broken out for each kind containing matchConditions (webhook or policy), operation and "
    "admission type (validate or admit).",
    ["name", "kind", "type", "operation"],
    registry=REGISTRY,
)
ADMISSION_MATCH_CONDITION_SECONDS = Histogram(
    "apiserver_admission_match_condition_evaluation_seconds",
    "Admission match condition evaluation time in seconds, identified by name and broken out for each kind "
    "containing matchConditions (webhook or policy), operation and type (validate or admit).",
    ["name", "kind", "type", "operation"],
    buckets=(0.005, 0.025, 0.1, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
# upstream's k8s.io/apiserver/pkg/admission/plugin/policy/validating/metrics: one observation per
# decision and action taken (a validation that passed, none)
VALIDATING_POLICY_CHECKS = Counter(
    "apiserver_validating_admission_policy_check",
    "Validating admission policy checks, by policy, binding, error type and the enforcement action taken.",
    ["policy", "policy_binding", "error_type", "enforcement_action"],
    registry=REGISTRY,
)
VALIDATING_POLICY_CHECK_SECONDS = Histogram(
    "apiserver_validating_admission_policy_check_duration_seconds",
    "Time each validation expression of a validating admission policy took, in seconds, by policy, binding, "
    "error type and the enforcement action taken.",
    ["policy", "policy_binding", "error_type", "enforcement_action"],
    buckets=(0.0000005, 0.001, 0.01, 0.1, 1.0),
    registry=REGISTRY,
)
# upstream's k8s.io/apiserver/pkg/admission/plugin/policy/mutating/metrics: one observation per mutation
MUTATING_POLICY_CHECKS = Counter(
    "apiserver_mutating_admission_policy_check",
    "Mutating admission policy checks (each mutation evaluated), by policy, binding and error type.",
    ["policy", "policy_binding", "error_type"],
    registry=REGISTRY,
)
MUTATING_POLICY_CHECK_SECONDS = Histogram(
    "apiserver_mutating_admission_policy_check_duration_seconds",
    "Time each mutation of a mutating admission policy took, in seconds, by policy, binding and error type.",
    ["policy", "policy_binding", "error_type"],
    buckets=(0.0000005, 0.001, 0.01, 0.1, 1.0),
    registry=REGISTRY,
)
CONVERSION_WEBHOOK_REQUESTS = Counter(
    "apiserver_conversion_webhook_request",
    "Counter for conversion webhook requests with success/failure and failure error type",
    ["result", "failure_type"],
    registry=REGISTRY,
)
CONVERSION_WEBHOOK_DURATION = Histogram(
    "apiserver_conversion_webhook_duration_seconds",
    "Conversion webhook request latency",
    ["result", "failure_type"],
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0),
    registry=REGISTRY,
)
CRD_CONVERSION_WEBHOOK_DURATION = Histogram(
    "apiserver_crd_conversion_webhook_duration_seconds",
    "CRD webhook conversion duration in seconds",
    ["crd_name", "from_version", "to_version", "succeeded"],
    buckets=tuple(0.001 * 2**i for i in range(15)),  # upstream's ExponentialBuckets(0.001, 2, 15)
    registry=REGISTRY,
)


# -- audit logging, under kube-apiserver's names (k8s.io/apiserver/pkg/audit/metrics.go; recorded by
# api/audit.py only when a policy file and a log are configured: a server without them pays nothing)
AUDIT_EVENTS = Counter(
    "apiserver_audit_event",
    "Counter of audit events generated and sent to the audit backend.",
    registry=REGISTRY,
)
AUDIT_ERRORS = Counter(
    "apiserver_audit_error",
    "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the "
    "error.",
    ["plugin"],
    registry=REGISTRY,
)
AUDIT_REJECTED = Counter(
    "apiserver_audit_requests_rejected",
    "Counter of apiserver requests rejected due to an error in audit logging backend.",
    registry=REGISTRY,
)
AUDIT_LEVELS = Counter(
    "apiserver_audit_level",
    "Counter of policy levels for audit events (1 per request).",
    ["level"],
    registry=REGISTRY,
)

# Responses (watch streams above all) that waited for their client to read: the connection's
# send buffer was over its high-water mark, so the writer waited for it to drain (api/http1.py).
# A watch event's delivery latency (controlplane_watch_event_delivery_seconds) includes such
# waits: these say how much of it was the clients' reading rather than the server's work.
HTTP_WRITE_BLOCKED_SECONDS = Counter(
    "controlplane_http_write_blocked_seconds",
    "Seconds responses waited for their client to read (the connection's send buffer over its high-water "
    "mark), summed over responses.",
    registry=REGISTRY,
)
HTTP_WRITE_BLOCKS = Counter(
    "controlplane_http_write_blocks",
    "Times a response waited for its client to read (the connection's send buffer over its high-water mark).",
    registry=REGISTRY,
)


class ObjectCounts(Collector):
    """``apiserver_storage_objects{resource}`` (``pods``, ``deployments.apps``) and
    ``apiserver_resource_objects{group,resource}``: objects stored, per resource, as the loaded watch
    caches hold them. ``source`` (set by the running server: api/app.py) yields (group, resource,
    count); without one, nothing is shown."""

    source: Callable[[], Iterable[tuple[str, str, int]]] | None = None

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (GaugeMetricFamily("apiserver_storage_objects",
                                  "Objects stored, by resource (resource.group).", labels=["resource"]),
                GaugeMetricFamily("apiserver_resource_objects",
                                  "Objects stored, by group and resource.", labels=["group", "resource"]))

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        legacy, counts = self._families()
        source = self.source
        if source is not None:
            for group, resource, n in sorted(source()):
                legacy.add_metric([f"{resource}.{group}" if group else resource], n)
                counts.add_metric([group, resource], n)
        return [legacy, counts]


OBJECT_COUNTS = ObjectCounts()
REGISTRY.register(OBJECT_COUNTS)

STORE_COMMIT_BATCH_SIZE = Histogram(
    "controlplane_store_commit_batch_size",
    "Mutations per store commit (group commit batch size; a count, not seconds).",
    buckets=tuple(float(2**i) for i in range(13)),  # 1 .. 4096
    registry=REGISTRY,
)

STORE_COMMIT_SECONDS = Histogram(
    "controlplane_store_commit_seconds",
    "Duration of one store commit, from its first mutation to durable (fsync'd or quorum-acknowledged).",
    buckets=_SUBMILLI_TO_TEN,
    registry=REGISTRY,
)

SCHEDULER_SCHEDULE_ATTEMPTS = Counter(
    "controlplane_scheduler_schedule_attempts_total",
    "Pod scheduling attempts by result (scheduled, unschedulable, error).",
    ["result"],
    registry=REGISTRY,
)

SCHEDULER_E2E_SCHEDULING = Histogram(
    "controlplane_scheduler_e2e_scheduling_seconds",
    "Time from a pod entering the scheduling queue to its binding being written.",
    buckets=tuple(0.001 * 2**i for i in range(15)),  # 1 ms .. 16 s, as kube-scheduler
    registry=REGISTRY,
)

PODGROUP_SCHEDULE_ATTEMPTS = Counter(
    "controlplane_podgroup_schedule_attempts_total",
    "Gang (PodGroup) scheduling attempts by result (scheduled, unschedulable, error).",
    ["result"],
    registry=REGISTRY,
)


# The node simulator (controlplane.nodes), beside what DESIGN.md fixes.
LEASE_RENEW_LAG = Histogram(
    "controlplane_nodes_lease_renew_lag_seconds",
    "How late a simulated node's lease renewal completed, against when it was due.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
LEASE_RENEWALS = Counter(
    "controlplane_nodes_lease_renewals_total", "Lease renewals by result (ok, error).", ["result"],
    registry=REGISTRY,
)
POD_START_SECONDS = Histogram(
    "controlplane_nodes_pod_start_seconds",
    "From the simulator first seeing a pod bound to one of its nodes to its Running status being written "
    "(image pulls and stage delays included).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
    registry=REGISTRY,
)
STAGE_TRANSITIONS = Counter(
    "controlplane_nodes_stage_transitions_total", "Stages applied, by stage and result (ok, error).",
    ["stage", "result"], registry=REGISTRY,
)
# kube-controller-manager's node lifecycle controller (controllers/nodelifecycle.py), under its
# names: a zone is upstream's key, "<region>:\x00:<zone>" ("" without either label)
ZONE_HEALTH = Gauge(
    "node_collector_zone_health", "Gauge measuring percentage of healthy nodes per zone.", ["zone"],
    registry=REGISTRY,
)
ZONE_SIZE = Gauge(
    "node_collector_zone_size", "Gauge measuring number of registered Nodes per zones.", ["zone"],
    registry=REGISTRY,
)
UNHEALTHY_NODES = Gauge(
    "node_collector_unhealthy_nodes_in_zone", "Gauge measuring number of not Ready Nodes per zones.", ["zone"],
    registry=REGISTRY,
)
ZONE_EVICTIONS = Counter(
    "node_collector_evictions", "Number of Node evictions that happened since current instance of "
    "NodeController started (first NoExecute taints given by a zone's queue).", ["zone"],
    registry=REGISTRY,
)
NODES_HEALTH_PASS = Histogram(
    "node_collector_update_all_nodes_health_duration_seconds",
    "Duration in seconds for NodeController to update the health of all nodes.",
    buckets=(1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
PODGC_DELETES = Counter(
    "pod_gc_collector_force_delete_pods_total",
    "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
    ["namespace", "reason"], registry=REGISTRY,
)
PODGC_DELETE_ERRORS = Counter(
    "pod_gc_collector_force_delete_pod_errors_total",
    "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
    ["namespace", "reason"], registry=REGISTRY,
)
NODE_EVICTIONS = Counter(
    "controlplane_nodes_evictions_total", "Pods deleted by the taint eviction controller (NoExecute taints).",
    registry=REGISTRY,
)
IMAGE_PULL_SECONDS = Histogram(
    "controlplane_nodes_image_pull_seconds",
    "Simulated image pull duration (download + unpack), from the pull's start to the image being usable.",
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0),
    registry=REGISTRY,
)
IMAGE_PULLS = Counter(
    "controlplane_nodes_image_pulls_total",
    "Image lookups by the simulated kubelet: result=hit (cached), pull (downloaded), joined (waited for a pull "
    "in progress), never (pull policy Never and not cached).",
    ["result"],
    registry=REGISTRY,
)


# -- the autoscaler (controlplane.autoscaler) ---------------------------------------------------------
_AUTOSCALER_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0,
                       60.0, 90.0, 120.0, 180.0, 300.0)
AUTOSCALER_PROVISIONING = Histogram(
    "controlplane_autoscaler_provisioning_seconds",
    "From the simulation that created a NodeClaim to its Node being registered.",
    buckets=_AUTOSCALER_SECONDS, registry=REGISTRY,
)
AUTOSCALER_SIMULATION = Histogram(
    "controlplane_autoscaler_scheduling_simulation_seconds",
    "Duration of one provisioning simulation (pending pods onto existing and new nodes).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=REGISTRY,
)
AUTOSCALER_NODECLAIMS_CREATED = Counter(
    "controlplane_autoscaler_nodeclaims_created_total", "NodeClaims created, by NodePool.", ["nodepool"],
    registry=REGISTRY,
)
AUTOSCALER_NODECLAIMS_DISRUPTED = Counter(
    "controlplane_autoscaler_nodeclaims_disrupted_total",
    "NodeClaims disrupted, by NodePool and reason (Drifted, Empty, Underutilized).", ["nodepool", "reason"],
    registry=REGISTRY,
)
AUTOSCALER_NODES = Gauge(
    "controlplane_autoscaler_nodes", "NodeClaims by state (launching, registered, ready, deleting).", ["state"],
    registry=REGISTRY,
)
# parts: total (created -> Running), scheduling (created -> bound), provisioning (marked unschedulable ->
# bound, for pods that waited for capacity), starting (bound -> Running: image pull and start)
POD_STARTUP = Histogram(
    "controlplane_pod_startup_seconds",
    "Pod startup as the autoscaler observes it, by part (total, scheduling, provisioning, starting).", ["part"],
    buckets=_AUTOSCALER_SECONDS, registry=REGISTRY,
)


# -- what each standalone command records, and serves on its own /metrics --------------------------
SCHEDULER_METRICS: tuple[Collector, ...] = (
    SCHEDULER_SCHEDULE_ATTEMPTS, SCHEDULER_E2E_SCHEDULING, PODGROUP_SCHEDULE_ATTEMPTS)
# (not NODE_EVICTIONS: the taint eviction controller's, which runs in serve)
NODES_METRICS: tuple[Collector, ...] = (
    LEASE_RENEW_LAG, LEASE_RENEWALS, POD_START_SECONDS, STAGE_TRANSITIONS, IMAGE_PULL_SECONDS, IMAGE_PULLS)
AUTOSCALER_METRICS: tuple[Collector, ...] = (
    AUTOSCALER_PROVISIONING, AUTOSCALER_SIMULATION, AUTOSCALER_NODECLAIMS_CREATED, AUTOSCALER_NODECLAIMS_DISRUPTED,
    AUTOSCALER_NODES, POD_STARTUP)
# the controllers' (kube-controller-manager's), which run in serve only
CONTROLLERS_METRICS: tuple[Collector, ...] = (
    NODE_EVICTIONS, NODES_HEALTH_PASS, UNHEALTHY_NODES, ZONE_EVICTIONS, ZONE_HEALTH, ZONE_SIZE, PODGC_DELETES,
    PODGC_DELETE_ERRORS)
# what serve --components-process's child records, shown on the server's /metrics (componentsmetrics.py)
COMPONENTS_METRICS: tuple[Collector, ...] = (
    *SCHEDULER_METRICS, *NODES_METRICS, *AUTOSCALER_METRICS, *CONTROLLERS_METRICS)


def component_registry(owned: Iterable[Collector]) -> CollectorRegistry:
    """A registry of ``owned`` (a component's tuple above) and what every process has: its
    collectors (``PROCESS_COLLECTORS``), its event loop's lag and its collector's pauses
    (``monitor_event_loop_lag`` and ``observe_gc_pauses`` record them once started). The
    metrics are the same objects as on ``REGISTRY``, which keeps them too."""
    registry = CollectorRegistry(auto_describe=True)
    for collector in (*PROCESS_COLLECTORS, EVENT_LOOP_LAG, GC_PAUSE, *owned):
        registry.register(collector)
    return registry


def observe_many(child: Histogram, amounts: Sequence[float]) -> None:
    """``child.observe(a)`` for each of ``amounts``, counted per bucket first: one locked
    increment per bucket touched and one for the sum, instead of two per amount. A watch
    drains hundreds of events at a time (a bulk renewal's Leases share a commit), each
    observed in its delivery histogram: 1.3 µs an event one by one. Uses prometheus_client's
    histogram internals (``_upper_bounds``, ``_buckets``, ``_sum``; stable since 0.4), and
    the public call where a version lacks them."""
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(amounts) < 2:
        for amount in amounts:
            child.observe(amount)
        return
    counts: dict[int, int] = {}
    for amount in amounts:
        i = bisect.bisect_left(bounds, amount)  # the first bound >= amount, as observe's scan
        counts[i] = counts.get(i, 0) + 1
    total.inc(sum(amounts))
    for i, n in counts.items():
        if i < len(buckets):
            buckets[i].inc(n)


def exposition(registry: CollectorRegistry = REGISTRY, skip: frozenset[str] = frozenset()) -> bytes:
    """The registry in Prometheus text format (what ``GET /metrics`` returns): byte for byte
    what prometheus_client's ``generate_latest`` writes but for bucket and quantile bounds,
    written as kube-apiserver's Go client writes them (``le="1"``, not ``le="1.0"``:
    ``_go_bound``), in about a third of its time; the families named in ``skip`` (their base
    names) left out.

    Why not ``generate_latest`` itself: in the ``million`` run the load test's scrape every
    2.5 s read 9,000 lines (1.2 MB), and writing them cost the server's process 5% of its
    CPU, in a worker thread that holds the GIL against the event loop for about 100 ms a
    scrape. ``generate_latest`` escapes and validates every label of every line again; the
    label sets of one series are the same from scrape to scrape (a histogram's bucket lines
    differ only in ``le``, the same few values), so each set's text is made once
    (``_label_text``) and every value that Go and Python write alike skips the conversion
    (``_value_text``)."""
    output: list[str] = []
    append = output.append
    for metric in registry.collect():
        name, kind = metric.name, metric.type
        if name in skip:
            continue
        # the classic format's names and types for OpenMetrics' kinds, as generate_latest's
        if kind == "counter" and name not in _PLAIN_COUNTERS:
            name += "_total"
        elif kind == "info":
            name, kind = name + "_info", "gauge"
        elif kind == "stateset":
            kind = "gauge"
        elif kind == "gaugehistogram":
            kind = "histogram"
        elif kind == "unknown":
            kind = "untyped"
        shown = _metric_name(name)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {shown} {doc}\n# TYPE {shown} {kind}\n")
        # OpenMetrics' own samples go in a gauge family each, after the metric's
        gauges: dict[str, list[str]] = {}
        created, gsum, gcount = metric.name + "_created", metric.name + "_gsum", metric.name + "_gcount"
        for sample in metric.samples:
            sname = sample.name
            line = f"{_metric_name(sname)}{_label_text(sample.labels)} {_value_text(sample.value)}"
            if sample.timestamp is not None:
                line += f" {int(float(sample.timestamp) * 1000):d}"
            if sname in (created, gsum, gcount):
                gauges.setdefault(sname[len(metric.name):], []).append(line + "\n")
            else:
                append(line + "\n")
        for suffix, lines in sorted(gauges.items()):
            shown = _metric_name(metric.name + suffix)
            append(f"# HELP {shown} {doc}\n# TYPE {shown} gauge\n")
            output.extend(lines)
    return "".join(output).encode()


# What a label set or a metric name is written as, made on first sight. Bounded: past the bound
# (label values without end, which no series here has) it starts over rather than grow.
_TEXT_CACHE_MAX = 200_000
_label_texts: dict[tuple[tuple[str, str], ...], str] = {}
_metric_names: dict[str, str] = {}


def _label_text(labels: dict[str, str]) -> str:
    key = tuple(labels.items())
    text = _label_texts.get(key)
    if text is None:
        if len(_label_texts) >= _TEXT_CACHE_MAX:
            _label_texts.clear()
        text = ("{" + ",".join(
            f'{openmetrics.escape_label_name(k, openmetrics.UNDERSCORES)}='
            f'"{_go_bound(v) if k in _BOUND_LABELS else _escaped_label_value(v)}"'
            for k, v in sorted(labels.items())) + "}") if labels else ""
        _label_texts[key] = text
    return text


# a histogram bucket's and a summary quantile's bound, which client_golang writes as Go's
# strconv.FormatFloat(bound, 'g', -1, 64) ("1", "2.5", "1e-05", "+Inf") and prometheus_client as
# Python's repr ("1.0"): queries that name a bucket, as kubernetes-mixin's apiserver SLO rules do
# (apiserver_request_sli_duration_seconds_bucket{le="1"}), find kube-apiserver's spelling only
_BOUND_LABELS = frozenset({"le", "quantile"})


def _go_bound(value: str) -> str:
    """``value`` (prometheus_client's floatToGoString of a bound) as Go writes it: the same
    but for a whole number's ``.0`` (``1.0`` -> ``1``, ``60.0`` -> ``60``; from 1e6 up both
    write ``1e+06``)."""
    return value[:-2] if value.endswith(".0") and "e" not in value else value


def _escaped_label_value(value: str) -> str:
    """A label value as the text format writes it (any UTF-8; backslash, newline and quote escaped)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _metric_name(name: str) -> str:
    shown = _metric_names.get(name)
    if shown is None:
        if len(_metric_names) >= _TEXT_CACHE_MAX:
            _metric_names.clear()
        shown = _metric_names[name] = openmetrics.escape_metric_name(name, openmetrics.UNDERSCORES)
    return shown


def _value_text(value: float) -> str:
    """``floatToGoString``: Python's repr but for infinities, NaN and Go's exponent from 1e6 up;
    below 1e6 (every count and duration here) the repr is both."""
    value = float(value)
    if -math.inf < value < 1e6:
        return repr(value)
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


# A timer this late: the loop is busy, time it closely. Not less: on a host whose cores are
# all taken, an idle loop's timers come a millisecond or two late (the kernel's scheduling
# delay, not the loop's), and the monitor ticked every 10 ms on every such host.
LAG_LATE = 0.005


async def monitor_event_loop_lag(interval: float = 0.01, idle_interval: float = 0.1,
                                 busy_for: float = 1.0, late: float = LAG_LATE) -> None:
    """Observe ``EVENT_LOOP_LAG`` forever: sleep, record how much later than asked the
    loop woke us. Run it as a task on the loop to be measured.

    The timer is set ``interval`` ahead while the loop runs late (a timer ``late`` late
    or more within the last ``busy_for``), ``idle_interval`` ahead while it keeps
    time. Each wake-up of an idle process costs about 0.2 ms of CPU here (the epoll and
    timer round trip, whatever the callback does): at 100 a second, the monitor was a
    third of an idle server's CPU. A stall is seen either way, as the lateness of the
    timer due within it; at the idle rate it reads up to ``idle_interval`` short, once.

    The clock is ``perf_counter``, not ``loop.time()``: uvloop's loop clock has
    millisecond resolution.
    """
    busy_until = 0.0
    while True:
        start = time.perf_counter()
        wait = interval if start < busy_until else idle_interval
        await asyncio.sleep(wait)
        woke = time.perf_counter()
        lag = max(0.0, woke - start - wait)
        EVENT_LOOP_LAG.observe(lag)
        if lag >= late:
            busy_until = woke + busy_for


def observe_gc_pauses() -> None:
    """Observe every collection's duration in ``GC_PAUSE`` from now on (once a process:
    a second call adds nothing). prometheus_client's ``GCCollector`` counts collections
    but not how long they held the loop, which a young collection of a large heap can,
    for tens of milliseconds."""
    if _gc_timer not in gc.callbacks:
        gc.callbacks.append(_gc_timer)


_gc_started = [0.0]
_gc_pauses = [GC_PAUSE.labels(generation=str(g)) for g in range(3)]


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        _gc_pauses[info["generation"]].observe(time.perf_counter() - _gc_started[0])
