"""SLO verdicts: percentiles of Locust entries, grouping by verb and scope, server histograms."""

from __future__ import annotations

from typing import Any

import pytest

from loadtest.promtext import Histogram
from loadtest.slo import MIN_SAMPLES, SLOS, TOO_FEW, Entry, Verdict, entries_from_locust_json, evaluate, overall


def by_key(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.key: v for v in verdicts}


def test_percentile_is_locust_s_in_seconds() -> None:
    # the report's verdicts read what locust_stats.csv shows: one slow request in 100 is the p99
    e = Entry("GET", "pods", {1: 50, 2: 40, 10: 9, 2000: 1})
    assert e.num_requests == 100
    assert e.percentile(0.5) == 0.002
    assert e.percentile(0.9) == 0.01
    assert e.percentile(0.99) == 2.0
    assert e.percentile(1.0) == 2.0
    assert Entry("GET", "pods", {7: 1}).percentile(0.99) == 0.007
    assert Entry("GET", "pods", {}).percentile(0.99) is None


def calculate_response_time_percentile(response_times: dict[int, int], num_requests: int, percent: float) -> int:
    """Locust 2.47's ``locust.stats.calculate_response_time_percentile``, which fills the
    percentile columns of locust_stats.csv (importing locust here would monkey-patch the tests)."""
    num_of_request = int(num_requests * percent)
    processed_count = 0
    for response_time in sorted(response_times.keys(), reverse=True):
        processed_count += response_times[response_time]
        if num_requests - processed_count <= num_of_request:
            return response_time
    return 0


@pytest.mark.parametrize("times", [{1: 50, 2: 40, 10: 9, 2000: 1}, {3: 98, 1200: 2}, {4: 7}, {1: 3, 5: 4, 9: 3},
                                   {2: 990, 3: 9, 80: 1}, {2: 989, 3: 10, 80: 1}, {1: 1, 2: 1}])
def test_percentiles_agree_with_locust_s_csv(times: dict[int, int]) -> None:
    e = Entry("GET", "pods", times)
    for q in (0.5, 0.9, 0.95, 0.99, 0.999, 1.0):
        want = calculate_response_time_percentile(times, e.num_requests, q)
        assert e.percentile(q) == want / 1000.0, q


def test_names_carry_scope() -> None:
    assert Entry("GET", "pods [namespace]", {}).scope == "namespace"
    assert Entry("GET", "pods [namespace]", {}).resource == "pods"
    assert Entry("PATCH", "pods/status", {}).scope == ""


def test_each_slo_reads_its_own_entries_and_names_the_worst_pair() -> None:
    entries = [
        Entry("POST", "pods", {5: 99, 30: 1}),
        Entry("PATCH", "pods/status", {5: 98, 1500: 2}),         # p99 1.5 s: fails the mutating SLO
        Entry("GET", "pods", {2: 100}),
        Entry("GET", "pods [watch]", {9000: 10}),                # watches have no SLO
        Entry("GET", "pods [namespace]", {4000: 100}),
        Entry("GET", "pods [cluster]", {20000: 100}),
        Entry("LATENCY", "pod startup", {800: 100}),
        Entry("LATENCY", "watch delivery pods", {70: 100}),
        Entry("EXPECTED", "409 namespaces", {0: 3}),
    ]
    v = by_key(evaluate(entries))
    assert v["mutating"].verdict == "fail" and v["mutating"].worst == "PATCH pods/status"
    assert v["mutating"].p99_s == 1.5 and v["mutating"].samples == 200
    assert v["get"].verdict == "pass" and v["get"].p99_s == 0.002 and v["get"].samples == 100
    assert v["list-namespace"].verdict == "pass" and v["list-namespace"].p99_s == 4.0
    assert v["list-cluster"].verdict == "pass" and v["list-cluster"].p99_s == 20.0
    assert v["pod-startup"].verdict == "pass" and v["pod-startup"].p99_s == 0.8
    assert v["writer-lock-wait"].verdict == "no data"
    assert v["event-delivery"].verdict == "no data"
    assert overall(list(v.values())) == "fail"


def test_server_side_targets_from_histograms() -> None:
    fast = Histogram(((0.0001, 99.0), (0.0005, 100.0), (float("inf"), 100.0)), 0.01, 100.0)
    slow = Histogram(((0.001, 10.0), (0.01, 50.0), (float("inf"), 100.0)), 5.0, 100.0)
    v = by_key(evaluate([], lock_wait={"pods": fast, "leases": fast}, delivery={"pods": slow}))
    assert v["writer-lock-wait"].verdict == "pass" and v["writer-lock-wait"].samples == 200
    assert v["event-delivery"].verdict == "fail" and v["event-delivery"].worst == "pods"
    assert v["mutating"].verdict == "no data"


def test_overall() -> None:
    none = evaluate([])
    assert overall(none) == "no data"
    passing = evaluate([Entry("GET", "pods", {1: 100})])
    assert overall(passing) == "pass"
    assert overall(evaluate([Entry("GET", "pods", {1: 10})])) == TOO_FEW  # a p99 of ten judges nothing
    assert overall(evaluate([Entry("GET", "pods", {1: 100}), Entry("LATENCY", "pod startup", {1: 10})])) == "pass"


def test_entries_from_locust_json_drop_the_aggregate() -> None:
    raw: list[dict[str, Any]] = [
        {"name": "pods", "method": "POST", "response_times": {"3": 2, "12": 1}, "num_failures": 1},
        {"name": "Aggregated", "method": "", "response_times": {"3": 2}},
    ]
    [e] = entries_from_locust_json(raw)
    assert (e.request_type, e.name, dict(e.response_times), e.num_failures) == ("POST", "pods", {3: 2, 12: 1}, 1)


def test_the_slos_are_the_issue_s() -> None:
    thresholds = {s.key: s.threshold for s in SLOS}
    assert thresholds == {"mutating": 1.0, "get": 1.0, "list-namespace": 5.0, "list-cluster": 30.0,
                          "pod-startup": 5.0, "writer-lock-wait": 0.001, "event-delivery": 0.05}


def test_api_call_slos_read_the_server_s_sli_when_the_run_has_it() -> None:
    """Upstream's API call latency runs from the apiserver getting the request to the last
    byte sent (apiserver_request_sli_duration_seconds); the clients' p99 stays beside it."""
    inf = float("inf")
    quick = Histogram(((0.05, 99.0), (0.1, 100.0), (inf, 100.0)), 1.0, 100.0)
    slow = Histogram(((0.05, 90.0), (1.0, 95.0), (2.0, 100.0), (inf, 100.0)), 20.0, 100.0)
    api = {
        ("PUT", "coordination.k8s.io", "leases", "", "resource"): slow,   # p99 1.8 s: fails
        ("POST", "", "pods", "binding", "resource"): quick,
        ("GET", "", "pods", "", "resource"): quick,
        ("LIST", "", "pods", "", "cluster"): slow,
        ("WATCH", "", "pods", "", "cluster"): slow,                        # no SLO
        ("POST", "", "events", "", "resource"): Histogram(((0.05, 0.0), (inf, 0.0)), 0.0, 0.0),  # none this run
    }
    entries = [Entry("POST", "pods", {3000: 100}), Entry("GET", "pods [namespace]", {40: 10})]
    v = by_key(evaluate(entries, api_calls=api))
    m = v["mutating"]
    assert (m.verdict, m.measured, m.worst, m.samples) == ("fail", "server", "PUT leases.coordination.k8s.io", 200)
    assert abs((m.p99_s or 0) - 1.8) < 1e-9
    assert (m.client_p99_s, m.client_worst) == (3.0, "POST pods")  # the clients waited longer than the server
    assert v["get"].verdict == "pass" and v["get"].worst == "GET pods" and v["get"].measured == "server"
    assert v["list-cluster"].worst == "LIST pods [cluster]" and v["list-cluster"].verdict == "pass"
    # no namespace-scoped LIST in the server's series: the clients' figure, said so
    ns = v["list-namespace"]
    assert (ns.measured, ns.p99_s, ns.worst) == ("client", 0.04, "GET pods [namespace]")
    assert "client_p99_s" not in ns.as_dict() and m.as_dict()["client_p99_s"] == 3.0
    # without the SLI (a server whose /metrics was not read): every API call verdict is the clients'
    assert by_key(evaluate(entries))["mutating"].measured == "client"


def test_an_sli_p99_within_the_first_bucket_says_so() -> None:
    # upstream's SLI buckets start at 50 ms: sub-millisecond calls read as 49.5 ms, every pair alike
    inf = float("inf")
    fast = Histogram(((0.05, 130.0), (0.1, 130.0), (inf, 130.0)), 0.001, 130.0)
    v = by_key(evaluate([Entry("GET", "deployments", {0: 130})],
                        api_calls={("GET", "apps", "deployments", "", "resource"): fast}))["get"]
    assert v.verdict == "pass" and v.p99_s is not None and abs(v.p99_s - 0.0495) < 1e-9
    assert "within the histogram's first bucket, under 50 ms" in v.note
    assert v.as_dict()["worst"] == "GET deployments.apps"
    slow = Histogram(((0.05, 90.0), (1.0, 100.0), (inf, 100.0)), 20.0, 100.0)
    v = by_key(evaluate([], api_calls={("GET", "", "pods", "", "resource"): slow}))["get"]
    assert v.note == ""  # above the first bucket: an interpolation between two bounds, no note


@pytest.mark.parametrize("samples", [1, 5, MIN_SAMPLES - 1])
def test_a_verdict_from_too_few_samples_neither_passes_nor_fails(samples: int) -> None:
    # of fewer than 100 samples a p99 is the slowest (or an interpolation in its bucket): one
    # observation, which judges nothing, on every verdict alike, client and server side
    inf = float("inf")
    fast = Histogram(((0.0001, float(samples)), (inf, float(samples))), 0.0, float(samples))
    slow = Histogram(((0.001, 0.0), (1.0, float(samples)), (inf, float(samples))), 0.5 * samples, float(samples))
    for entries, lock, delivery, api in [
            ([Entry("GET", "pods", {1: samples}), Entry("LATENCY", "pod startup", {100: samples}),
              Entry("GET", "pods [namespace]", {1: samples}), Entry("GET", "pods [cluster]", {1: samples}),
              Entry("POST", "pods", {1: samples})], {"pods": fast}, {"pods": fast},
             {("GET", "", "pods", "", "resource"): fast}),
            ([Entry("LATENCY", "pod startup", {9000: samples}), Entry("POST", "pods", {9000: samples}),
              Entry("GET", "pods [namespace]", {9000: samples}), Entry("GET", "pods [cluster]", {40000: samples})],
             {"pods": slow}, {"pods": slow}, {("GET", "", "pods", "", "resource"): Histogram(
                 ((0.05, 0.0), (5.0, float(samples)), (inf, float(samples))), 3.0 * samples, float(samples))})]:
        verdicts = evaluate(entries, lock, delivery, api)
        for v in verdicts:
            assert v.verdict == TOO_FEW and v.samples == samples and v.p99_s is not None, v
            assert f"fewer than the {MIN_SAMPLES}" in v.note and v.as_dict()["note"] == v.note
        assert overall(verdicts) == TOO_FEW
    # and from MIN_SAMPLES, a verdict: the same delivery histogram passes, or fails, once it has enough
    enough = Histogram(((0.0001, 100.0), (inf, 100.0)), 0.0, 100.0)
    assert by_key(evaluate([], delivery={"pods": enough}))["event-delivery"].verdict == "pass"
    late = Histogram(((0.001, 0.0), (1.0, 100.0), (inf, 100.0)), 50.0, 100.0)
    assert by_key(evaluate([], delivery={"pods": late}))["event-delivery"].verdict == "fail"
    # the resources' samples are summed: a p99 read from one resource's histogram of 60 and another's of 40
    summed = by_key(evaluate([], delivery={"pods": Histogram(((0.0001, 60.0), (inf, 60.0)), 0.0, 60.0),
                                           "leases": Histogram(((0.0001, 40.0), (inf, 40.0)), 0.0, 40.0)}))
    assert summed["event-delivery"].verdict == "pass" and summed["event-delivery"].samples == 100
