"""The server's Prometheus metrics (names fixed by DESIGN.md).

Every metric is a module-level object on ``REGISTRY``; code that records one
imports it from here::

    from controlplane.metrics import WATCH_CACHE_LOCK_WAIT
    WATCH_CACHE_LOCK_WAIT.labels(resource="pods", role="writer").observe(waited)

Durations are in seconds. Buckets reach far below kube-apiserver's: this
server answers in microseconds to milliseconds, and a histogram whose first
bucket is 5 ms would hide every difference worth measuring.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

__all__ = [
    "AUTOSCALER_NODECLAIMS_CREATED",
    "AUTOSCALER_NODECLAIMS_DISRUPTED",
    "AUTOSCALER_NODES",
    "AUTOSCALER_PROVISIONING",
    "AUTOSCALER_SIMULATION",
    "CONTENT_TYPE",
    "EVENT_LOOP_LAG",
    "IMAGE_PULLS",
    "IMAGE_PULL_SECONDS",
    "LEASE_RENEWALS",
    "LEASE_RENEW_LAG",
    "NODE_EVICTIONS",
    "PODGROUP_SCHEDULE_ATTEMPTS",
    "POD_STARTUP",
    "POD_START_SECONDS",
    "REGISTRY",
    "REQUEST_DURATION",
    "SCHEDULER_E2E_SCHEDULING",
    "SCHEDULER_SCHEDULE_ATTEMPTS",
    "STAGE_TRANSITIONS",
    "STORE_COMMIT_BATCH_SIZE",
    "STORE_COMMIT_SECONDS",
    "WATCH_CACHE_FALLBACKS",
    "WATCH_CACHE_LOCK_WAIT",
    "WATCH_CACHE_REREAD_EVENTS",
    "WATCH_EVENT_DELIVERY",
    "observe_many",
    "exposition",
    "monitor_event_loop_lag",
]

# The classic text format (0.0.4), which every Prometheus and kube tool reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# A registry of our own rather than prometheus_client's global one, so that
# importing this module twice (tests, reloads) never collides, and /metrics
# shows exactly what is listed here plus the process collectors.
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

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
    "(reason get/list/watch), a revision older than the cache keeps (past-revision, window), a cache not loaded.",
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
    "How late the event loop runs a timer that should fire every 10 ms.",
    buckets=(1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=REGISTRY,
)

REQUEST_DURATION = Histogram(
    "controlplane_request_duration_seconds",
    "Response latency by verb, resource, subresource, scope and HTTP code (as apiserver_request_duration_seconds).",
    ["verb", "resource", "subresource", "scope", "code"],
    # kube-apiserver's buckets, preceded by sub-5 ms ones.
    buckets=(
        1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5,
        2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
    ),
    registry=REGISTRY,
)

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


def exposition() -> bytes:
    """The registry in Prometheus text format (what ``GET /metrics`` returns)."""
    return generate_latest(REGISTRY)


async def monitor_event_loop_lag(interval: float = 0.01) -> None:
    """Observe ``EVENT_LOOP_LAG`` forever: sleep ``interval``, record how much later
    than asked the loop woke us. Run it as a task on the loop to be measured.

    The clock is ``perf_counter``, not ``loop.time()``: uvloop's loop clock has
    millisecond resolution.
    """
    while True:
        start = time.perf_counter()
        await asyncio.sleep(interval)
        EVENT_LOOP_LAG.observe(max(0.0, time.perf_counter() - start - interval))
