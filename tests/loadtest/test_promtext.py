"""Scraping /metrics: parsing, histogram arithmetic, and the per-interval lines the report plots."""

from __future__ import annotations

import os

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from loadtest.promtext import parse
from loadtest.serverwatch import interval_line, proc_usage, run_histograms


def registry_text(observations: dict[tuple[str, str], list[float]], scheduled: int = 0) -> str:
    reg = CollectorRegistry()
    lock = Histogram("controlplane_watch_cache_lock_wait_seconds", "", ["resource", "role"],
                     buckets=(1e-5, 1e-4, 1e-3, 1e-2), registry=reg)
    lag = Histogram("controlplane_event_loop_lag_seconds", "", buckets=(1e-3, 1e-2, 0.1), registry=reg)
    c = Counter("controlplane_scheduler_schedule_attempts_total", "", ["result"], registry=reg)
    for (resource, role), values in observations.items():
        for v in values:
            lock.labels(resource=resource, role=role).observe(v)
    lag.observe(0.005)
    c.labels(result="scheduled").inc(scheduled)
    return generate_latest(reg).decode()


def test_parse_reads_histograms_and_samples() -> None:
    s = parse(registry_text({("pods", "writer"): [5e-5] * 9 + [5e-3]}, scheduled=7), at=1.0)
    h = s.histogram("controlplane_watch_cache_lock_wait_seconds", resource="pods", role="writer")
    assert h is not None and h.count == 10
    assert h.buckets[-1] == (float("inf"), 10.0)
    assert h.quantile(0.5) == pytest.approx(1e-5 + (1e-4 - 1e-5) * 5 / 9)
    assert h.quantile(0.99) == pytest.approx(1e-3 + (1e-2 - 1e-3) * 0.9)
    assert s.sum("controlplane_scheduler_schedule_attempts_total", result="scheduled") == 7
    assert s.histogram("controlplane_watch_cache_lock_wait_seconds", role="reader") is None


def test_minus_is_what_happened_between_two_scrapes_and_plus_merges() -> None:
    a = parse(registry_text({("pods", "writer"): [5e-3] * 10}), at=0)
    b = parse(registry_text({("pods", "writer"): [5e-3] * 10 + [5e-5] * 100}), at=2)
    ha = a.histogram("controlplane_watch_cache_lock_wait_seconds")
    hb = b.histogram("controlplane_watch_cache_lock_wait_seconds")
    assert ha is not None and hb is not None
    d = hb.minus(ha)
    p99 = d.quantile(0.99)
    assert d.count == 100 and p99 is not None and p99 <= 1e-4
    # a restarted server (counts went down) is taken as it is
    assert ha.minus(hb).count == 10
    merged = parse(registry_text({("pods", "writer"): [1e-3], ("leases", "writer"): [1e-3]}), 0).histogram(
        "controlplane_watch_cache_lock_wait_seconds", role="writer")
    assert merged is not None and merged.count == 2


def test_quantile_edges() -> None:
    s = parse("# TYPE h histogram\nh_bucket{le=\"1.0\"} 0\nh_bucket{le=\"+Inf\"} 4\nh_count 4\nh_sum 20\n", 0)
    h = s.histogram("h")
    assert h is not None
    assert h.quantile(0.5) == float("inf")  # beyond the last finite bound: only "more than 1.0" is known
    assert h.mean() == 5.0
    text = "# TYPE h histogram\nh_bucket{le=\"1.0\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_count 0\nh_sum 0\n"
    empty = parse(text, 0).histogram("h")
    assert empty is not None and empty.quantile(0.99) is None


def test_interval_line_and_run_histograms() -> None:
    a = parse(registry_text({("pods", "writer"): [5e-3] * 10}, scheduled=10), at=0)
    b = parse(registry_text({("pods", "writer"): [5e-3] * 10 + [5e-5] * 100, ("pods", "reader"): [5e-3]},
                            scheduled=30), at=2)
    line = interval_line(a, b, (100.0, 2.5))
    assert line["at"] == 2 and line["rss_bytes"] == 100.0 and line["cpu_seconds"] == 2.5
    assert line["lock_wait_writer"]["count"] == 100
    assert line["lock_wait_reader"]["count"] == 1
    assert line["scheduled_total"] == 30
    per_resource = run_histograms(a, b, "controlplane_watch_cache_lock_wait_seconds", role="writer")
    assert set(per_resource) == {"pods"} and per_resource["pods"].count == 100


def test_the_first_scrape_has_no_interval_and_no_quantiles() -> None:
    # its histograms hold everything since the server started (its start-up, or a --target's whole
    # life): plotted as the first interval, they would show what the run never did
    a = parse(registry_text({("pods", "writer"): [5e-3] * 10}, scheduled=10), at=0)
    line = interval_line(None, a, (100.0, 2.5))
    assert "lock_wait_writer" not in line and "lock_wait_reader" not in line
    assert line["scheduled_total"] == 10 and line["rss_bytes"] == 100.0


def test_proc_usage_of_this_process() -> None:
    usage = proc_usage(os.getpid())
    assert usage is not None
    rss, cpu = usage
    assert rss > 10 * 2**20 and cpu > 0
    assert proc_usage(2**22 + 12345) is None


def test_interval_line_counts_bindings_the_server_answered() -> None:
    """A scheduler in another process (serve --components-process, controlplane scheduler)
    shows in the server's metrics only as the pods/binding requests it answered 201."""
    text = ("# TYPE controlplane_request_duration_seconds histogram\n"
            + "".join(f'controlplane_request_duration_seconds_{part}{{verb="POST",resource="pods",'
                      f'subresource="{sub}",scope="{scope}",code="{code}"{le}}} {n}\n'
                      for part, le in (("bucket", ',le="+Inf"'), ("count", ""), ("sum", ""))
                      for sub, scope, code, n in (("binding", "resource", "201", 40),
                                                  ("binding", "resource", "409", 3),
                                                  ("", "namespace", "201", 50))))
    line = interval_line(None, parse(text, at=1), None)
    assert line["bindings_total"] == 40
    assert "scheduled_total" not in line


def _reference(text: str) -> tuple[dict, dict]:
    """What prometheus_client's own parser reads in ``text``: samples by (name, labels) and
    histograms' parts by (family, labels without le), for comparing ``parse`` against."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict = {}
    histograms: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted(s.labels.items()))
            if family.type != "histogram":
                samples[(s.name, labels)] = s.value
                continue
            key = (family.name, tuple(kv for kv in labels if kv[0] != "le"))
            part = histograms.setdefault(key, {"buckets": [], "sum": 0.0, "count": 0.0})
            if s.name.endswith("_bucket"):
                part["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith(("_sum", "_count")):
                part[s.name.rsplit("_", 1)[1]] = s.value
    return samples, histograms


def test_parse_reads_what_prometheus_clients_parser_reads() -> None:
    from prometheus_client import Gauge, Summary

    reg = CollectorRegistry()
    h = Histogram("req_seconds", "", ["verb", "resource"], buckets=(0.01, 0.1, 1.0), registry=reg)
    h.labels(verb="GET", resource="pods").observe(0.05)
    h.labels(verb="LIST", resource='a "quoted", back\\slashed\nline').observe(2.0)
    Counter("requests_total", "", ["code"], registry=reg).labels(code="200").inc(3)
    Gauge("zone_info", "", ["zone"], registry=reg).labels(zone="us-east-1\x00a").set(float("nan"))
    Gauge("inflight", "", registry=reg).set(float("inf"))
    Summary("sizes", "", registry=reg).observe(4.0)
    text = generate_latest(reg).decode() + "untyped_total{a=\"b\",} 7 1700000000000\n"
    scrape = parse(text, 0.0)
    samples, histograms = _reference(text)
    assert set(scrape.samples) == set(samples)
    for key, value in samples.items():
        assert scrape.samples[key] == value or (value != value and scrape.samples[key] != scrape.samples[key])
    assert {k: (list(v.buckets), v.total, v.count) for k, v in scrape.histograms.items()} == {
        k: (sorted(v["buckets"]), v["sum"], v["count"]) for k, v in histograms.items()}
    odd = scrape.histogram("req_seconds", resource='a "quoted", back\\slashed\nline')
    assert odd is not None and odd.count == 1 and odd.buckets[-1] == (float("inf"), 1.0)
    assert scrape.value("untyped_total", a="b") == 7


@pytest.mark.parametrize("text", ["<html><body>Sign in</body></html>\n", '{"kind": "Status"}\n',
                                  'm{a="b" 1\n', 'm{a=b} 1\n', "m 1 2 3\n", "m one\n"])
def test_parse_refuses_what_is_not_prometheus_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"sample|labels|metric name"):
        parse(text, 0.0)
