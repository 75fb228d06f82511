"""API Priority and Fairness's accounting of what it refuses and waits: ``apiserver_request_terminations_total``
(upstream's ``RecordRequestTermination`` labels), ``apiserver_request_total``'s 429s (``RecordDroppedRequest``)
and ``/debug/api_priority_and_fairness/dump_requests``
(upstream's columns, ``includeRequestDetails=1``). Over a real socket in test_apf.py's socket test."""

from __future__ import annotations

import asyncio
import re

from controlplane.api.flowcontrol import MaxInFlight, dump, go_duration
from controlplane.metrics import REQUESTS
from tests.api.test_apf import ALICE, TINY, Slow, call, flow, limited, metric


def terminations(**labels: str) -> float:
    try:
        return metric("apiserver_request_terminations_total", **labels)
    except KeyError:
        return 0.0


def requests_total(**labels: str) -> float:
    """``apiserver_request_total``'s value for ``labels`` (all of them), as a scrape reads it."""
    for family in REQUESTS.collect():
        for sample in family.samples:
            if sample.name == "apiserver_request_total" and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_refusals_are_counted_in_request_total_as_upstreams_dropped_requests() -> None:
    """A refused request is in apiserver_request_total with code 429 (and its dry_run label),
    as upstream's RecordDroppedRequest counts it; a non-resource one without its path."""
    f = flow(TINY, [limited("tiny", 1)], limit=2)
    app = Slow()
    held = asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps/c"))
    await asyncio.sleep(0.02)
    labels = {"verb": "POST", "dry_run": "All", "group": "apps", "version": "v1", "resource": "deployments",
              "subresource": "", "scope": "resource", "component": "apiserver", "code": "429"}
    before = requests_total(**labels)
    assert (await call(f, app, ALICE, "POST", "/apis/apps/v1/namespaces/a/deployments", b"dryRun=All"))[0] == 429
    assert requests_total(**labels) == before + 1
    watch = {**labels, "verb": "WATCH", "dry_run": "", "group": "", "resource": "configmaps", "scope": "namespace"}
    before = requests_total(**watch)
    assert (await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps", b"watch=1"))[0] == 429
    assert requests_total(**watch) == before + 1
    app.release.set()
    await held
    limits = MaxInFlight(1, 1)
    slow = Slow()
    busy = asyncio.create_task(call(limits, slow, ALICE, "GET", "/version"))
    await asyncio.sleep(0.02)
    path = {"verb": "GET", "dry_run": "", "group": "", "version": "", "resource": "", "subresource": "",
            "scope": "", "component": "apiserver", "code": "429"}
    before = requests_total(**path)
    assert (await call(limits, slow, ALICE, "GET", "/healthz"))[0] == 429
    assert requests_total(**path) == before + 1
    slow.release.set()
    await busy


async def test_refusals_are_counted_as_terminations_with_upstreams_labels() -> None:
    f = flow(TINY, [limited("tiny", 1)], limit=2)  # a Reject level of one seat
    app = Slow()
    held = asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps/c"))
    await asyncio.sleep(0.02)
    labels = {"verb": "LIST", "group": "", "version": "v1", "resource": "configmaps", "subresource": "",
              "scope": "namespace", "component": "apiserver", "code": "429"}
    before = terminations(**labels)
    assert (await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps"))[0] == 429
    assert terminations(**labels) == before + 1
    watch = {**labels, "verb": "WATCH"}
    before = terminations(**watch)
    assert (await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps", b"watch=1"))[0] == 429
    assert terminations(**watch) == before + 1
    create = {**labels, "verb": "POST", "group": "apps", "resource": "deployments", "scope": "resource"}
    before = terminations(**create)
    assert (await call(f, app, ALICE, "POST", "/apis/apps/v1/namespaces/a/deployments"))[0] == 429
    assert terminations(**create) == before + 1
    app.release.set()
    await held
    # the max-in-flight filter's refusals too; a non-resource request's path is its subresource
    limits = MaxInFlight(1, 1)
    slow = Slow()
    busy = asyncio.create_task(call(limits, slow, ALICE, "GET", "/version"))
    await asyncio.sleep(0.02)
    path = {"verb": "GET", "group": "", "version": "", "resource": "", "subresource": "/healthz", "scope": "",
            "component": "apiserver", "code": "429"}
    before = terminations(**path)
    assert (await call(limits, slow, ALICE, "GET", "/healthz"))[0] == 429
    assert terminations(**path) == before + 1
    slow.release.set()
    await busy


def test_go_durations_print_as_go_prints_them() -> None:
    assert [go_duration(s) for s in (0, 0.005, 0.0125, 1.5, 61.5, 3600)] == \
        ["0s", "5ms", "12.5ms", "1.5s", "1m1.5s", "1h0m0s"]
    assert go_duration(0.0000015) == "1.5µs"


async def test_dump_requests_lists_the_waiting_requests_as_upstreams() -> None:
    f = flow(TINY, [limited("tiny", 1, queues=2, hand=1, length=5)], limit=2)  # 1 seat, queued
    app = Slow()
    tasks = [asyncio.create_task(call(f, app, who, "GET", path)) for who, path in (
        (ALICE, "/api/v1/namespaces/a/configmaps/c"), (ALICE, "/apis/apps/v1/namespaces/a/deployments/d"),
        (ALICE, "/api/v1/namespaces/b/secrets"))]
    await asyncio.sleep(0.05)
    assert app.running == 1
    text = dump(f, "dump_requests")
    assert text is not None
    lines = text.decode().splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    assert header == ["PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
                      "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency"]
    rows = [[c.strip() for c in line.split(",")] for line in lines[1:]]
    assert len(rows) == 2  # the waiting ones (the running one is not in a queue)
    for i, row in enumerate(rows):
        assert row[:2] == ["tiny", "alices"] and row[3] == str(i) and row[4] == "alice"  # ByUser: one queue
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", row[5])
        assert row[6:] == ["1", "0", "0s"]
    detailed = dump(f, "dump_requests", "includeRequestDetails=1")
    assert detailed is not None
    lines = detailed.decode().splitlines()
    assert [c.strip() for c in lines[0].split(",")][9:] == ["UserName", "Verb", "APIPath", "Namespace", "Name",
                                                            "APIVersion", "Resource", "SubResource"]
    first = [c.strip() for c in lines[1].split(",")]
    assert first[9:] == ["alice", "get", "/apis/apps/v1/namespaces/a/deployments/d", "a", "d", "apps/v1",
                         "deployments", ""]
    app.release.set()
    await asyncio.gather(*tasks)
    assert dump(f, "dump_requests") == dump(f, "dump_requests", "includeRequestDetails=")  # (empty: no details)
