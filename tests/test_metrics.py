"""``observe_many``: the same histogram as one ``observe`` per amount; ``exposition``: the same text as
prometheus_client's ``generate_latest``; ``component_registry``: a standalone command's metrics alone."""

from __future__ import annotations

import ast
import gc
import math
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import GaugeHistogramMetricFamily, Metric, StateSetMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from controlplane import metrics
from controlplane.metrics import (
    ADMISSION_WEBHOOK_FAIL_OPEN,
    AUTOSCALER_METRICS,
    CONTROLLERS_METRICS,
    NODES_METRICS,
    REGISTRY,
    SCHEDULER_METRICS,
    component_registry,
    exposition,
    observe_many,
)

ROOT = Path(__file__).resolve().parents[1]


def _exposed(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


def test_observe_many_counts_as_observe_one_by_one() -> None:
    rng = random.Random(7)
    amounts = [rng.choice([0.0, 0.0005, 0.001, 0.01, 0.1000001, 0.5, 1.0, 2.0, -1.0]) for _ in range(1000)]
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    a = Histogram("d", "d", ["r"], buckets=(0.001, 0.01, 0.1, 1.0), registry=one_by_one).labels(r="pods")
    b = Histogram("d", "d", ["r"], buckets=(0.001, 0.01, 0.1, 1.0), registry=batched).labels(r="pods")
    for amount in amounts:
        a.observe(amount)
    observe_many(b, amounts)
    observe_many(b, [])
    observe_many(b, amounts[:1])
    a.observe(amounts[0])
    assert _exposed(one_by_one) == _exposed(batched)


class _OpenMetricsKinds(Collector):
    def collect(self) -> Iterator[Metric]:
        yield GaugeHistogramMetricFamily("queue_depth", "a gauge histogram", buckets=[("1.0", 4.0), ("+Inf", 5.0)],
                                         gsum_value=7.0)
        yield StateSetMetricFamily("mode", "a state set", value={"on": True, "off": False})


def test_exposition_is_generate_latest_byte_for_byte() -> None:
    registry = CollectorRegistry()
    Counter("writes", "Writes\\done\nby kind.", ["kind"], registry=registry).labels(kind='we"ird\\\n').inc(3)
    gauge = Gauge("sizes", "Sizes.", ["resource"], registry=registry)
    for resource, value in (("pods", 0.0), ("nodes", 1e6), ("leases", 123456789.0), ("a", -2.5), ("b", 1e-7),
                            ("c", math.inf), ("d", -math.inf), ("e", math.nan), ("f", 999999.9), ("g", 12)):
        gauge.labels(resource=resource).set(value)
    histogram = Histogram("waits", "Waits.", ["role"], buckets=(1e-6, 0.5, 2.5e6), registry=registry)
    for role in ("writer", "reader"):
        for amount in (0.0, 3e-7, 0.25, 4e6):
            histogram.labels(role=role).observe(amount)
    Summary("took", "Took.", registry=registry).observe(0.2)
    Info("build", "Build.", registry=registry).info({"version": "1.37.0", "commit": "abc"})
    registry.register(_OpenMetricsKinds())
    Gauge("plain", "No labels.", registry=registry).set(7)
    for _ in range(2):  # the second time from the label texts made the first
        assert exposition(registry) == go_bounds(generate_latest(registry))


def go_bounds(text: bytes) -> bytes:
    """``generate_latest``'s text with its bucket and quantile bounds as Go writes them."""
    return re.sub(rb'((?:le|quantile)="[-+0-9]+)\.0"', rb'\1"', text)


def test_bounds_are_written_as_kube_apiservers() -> None:
    # kubernetes-mixin's apiserver SLO rules name buckets: apiserver_request_sli_duration_seconds_bucket{le="1"}
    registry = CollectorRegistry()
    Histogram("took", "Took.", buckets=(0.005, 1.0, 60.0, 2.5e6), registry=registry).observe(0.5)
    Summary("sized", "Sized.", registry=registry).observe(1)
    lines = exposition(registry).decode().splitlines()
    bounds = [line.split('le="')[1].split('"')[0] for line in lines if line.startswith("took_bucket")]
    assert bounds == ["0.005", "1", "60", "2.5e+06", "+Inf"]
    text = exposition().decode()
    assert 'apiserver_request_sli_duration_seconds_bucket' not in text or '.0"' not in "".join(
        line for line in text.splitlines() if line.startswith("apiserver_request_sli_duration_seconds_bucket"))


def test_exposition_of_the_servers_registry() -> None:
    def steady(text: bytes) -> list[bytes]:
        # what changes between two reads: the process's own figures, and the most requests in flight
        # since the previous read (a read resets it, as upstream's reports its last second's)
        # (and the counters upstream names without _total, which generate_latest would add: below)
        return [line for line in text.splitlines()
                if not line.startswith((b"process_", b"python_gc_", b"apiserver_current_inflight_requests"))
                and b"apiserver_admission_webhook_rejection_count" not in line
                and b"apiserver_admission_webhook_fail_open_count" not in line]

    gc.disable()  # a collection between the two reads would change controlplane_gc_pause_seconds
    try:
        assert steady(exposition()) == steady(go_bounds(generate_latest(REGISTRY)))
    finally:
        gc.enable()


def test_counters_upstream_names_without_total_keep_their_names() -> None:
    ADMISSION_WEBHOOK_FAIL_OPEN.inc("w.example.com", "admit")
    lines = [line for line in exposition().decode().splitlines() if "fail_open_count" in line]
    assert lines[1:] == ["# TYPE apiserver_admission_webhook_fail_open_count counter",
                         'apiserver_admission_webhook_fail_open_count{name="w.example.com",type="admit"} '
                         f"{ADMISSION_WEBHOOK_FAIL_OPEN.values[('w.example.com', 'admit')]}"]


@pytest.mark.parametrize(("owned", "own"), [
    (SCHEDULER_METRICS, "controlplane_scheduler_e2e_scheduling_seconds"),
    (NODES_METRICS, "controlplane_nodes_image_pull_seconds"),
    (AUTOSCALER_METRICS, "controlplane_pod_startup_seconds"),
])
def test_a_component_registry_holds_its_metrics_and_the_process(owned: tuple[Collector, ...], own: str) -> None:
    text = exposition(component_registry(owned)).decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    assert own in families
    assert {"process_cpu_seconds_total", "python_info", "controlplane_event_loop_lag_seconds",
            "controlplane_gc_pause_seconds"} <= families
    # nothing of the API server's, which the command does not run, nor another component's
    assert not {f for f in families if f.startswith(("apiserver_", "controlplane_watch", "controlplane_store",
                                                     "controlplane_request", "node_collector"))}
    others = {SCHEDULER_METRICS: "controlplane_scheduler", NODES_METRICS: "controlplane_nodes",
              AUTOSCALER_METRICS: "controlplane_autoscaler"}
    assert not {f for f in families for o, prefix in others.items() if o is not owned and f.startswith(prefix)}


def _imported_metrics(package: Path) -> set[str]:
    """The names a package's modules import from controlplane/metrics.py."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").endswith("metrics"):
                continue
            depth = len(path.relative_to(ROOT / "controlplane").parts) - 1  # packages below controlplane/
            if node.module == "controlplane.metrics" or (node.module == "metrics" and node.level == depth + 1):
                names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize(("package", "owned"), [
    ("scheduler", SCHEDULER_METRICS), ("nodes", NODES_METRICS), ("autoscaler", AUTOSCALER_METRICS),
    ("controllers", CONTROLLERS_METRICS)])
def test_every_metric_a_component_records_is_in_its_tuple(package: str, owned: tuple[Collector, ...]) -> None:
    recorded = {name for name in _imported_metrics(ROOT / "controlplane" / package)
                if isinstance(getattr(metrics, name), MetricWrapperBase)}
    assert recorded, package
    assert [name for name in recorded if getattr(metrics, name) not in owned] == []


async def test_the_lag_monitor_ticks_closely_only_while_the_loop_runs_late() -> None:
    import asyncio
    import time

    def count() -> float:
        return metrics.REGISTRY.get_sample_value("controlplane_event_loop_lag_seconds_count") or 0.0

    before = count()
    # "late" is 0.1 s here, so that a loaded machine's idle ticks do not count as late
    task = asyncio.create_task(metrics.monitor_event_loop_lag(interval=0.01, idle_interval=0.2, busy_for=1.0,
                                                              late=0.1))
    try:
        await asyncio.sleep(0.5)
        idle = count() - before  # 2 or 3 ticks, not 50
        time.sleep(0.3)  # the loop held past a tick: that tick is late, the next ones close
        await asyncio.sleep(0.3)
        busy = count() - before - idle
    finally:
        task.cancel()
    assert 1 <= idle <= 5, idle
    assert busy >= 8, busy
