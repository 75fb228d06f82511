"""Third-party Python clients' own requests (kr8s, lightkube, kopf, kubernetes_asyncio),
reproduced byte for byte with httpx over a real socket: these libraries are not the
project's dependencies, so each test sends what the library sends (its method, path, query,
headers and body, read from its source) and checks what it relies on in the answer."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve


@pytest.fixture(scope="module")
def http(served: Serve) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as c:
        c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "libs"}})
        yield c


def test_kr8s_gets_an_object_by_name_with_a_trailing_comma_in_its_field_selector(http: httpx.Client) -> None:
    """kr8s's ``api.get(kind, name)`` (and so ``Pod.get(name)``) lists with the field selector
    ``metadata.name=<name>,`` (its extra selector joined after a comma, empty by default);
    upstream's parseSelector skips the empty term."""
    http.post("/api/v1/namespaces/libs/configmaps", json={"metadata": {"name": "wanted"}}).raise_for_status()
    http.post("/api/v1/namespaces/libs/configmaps", json={"metadata": {"name": "other"}}).raise_for_status()
    r = http.get("/api/v1/namespaces/libs/configmaps",
                 params={"limit": "100", "fieldSelector": "metadata.name=wanted,"})
    assert r.status_code == 200, r.text
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["wanted"]
    r = http.get("/api/v1/configmaps", params={"fieldSelector": "metadata.name=wanted,metadata.namespace=libs,"})
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["wanted"]


def test_events_read_with_every_field_go_writes(http: httpx.Client) -> None:
    """kr8s and kopf read objects as dicts (kr8s's ``Box`` raises on a missing key): an Event
    has what kube-apiserver's Go structs always write. core/v1: ``eventTime``,
    ``firstTimestamp`` and ``lastTimestamp`` (Time structs: ``null`` when zero, ``omitempty``
    or not), ``reportingComponent`` and ``reportingInstance`` (no ``omitempty``: ``""``);
    events.k8s.io/v1: its times too (``deprecatedFirstTimestamp``...), its reporting strings
    omitted when empty. Both as kopf posts an event (client-go's legacy shape, no eventTime
    here) and as an events.k8s.io/v1 recorder does (no legacy timestamps)."""
    legacy = {"metadata": {"name": "legacy"}, "involvedObject": {"kind": "ConfigMap", "namespace": "libs", "name": "x"},
              "reason": "Created", "message": "m", "type": "Normal", "source": {"component": "kopf"},
              "firstTimestamp": "2026-12-06T17:00:00Z", "lastTimestamp": "2026-12-06T17:00:00Z", "count": 1}
    r = http.post("/api/v1/namespaces/libs/events", json=legacy)
    assert r.status_code == 201, r.text
    for got in (r.json(), http.get("/api/v1/namespaces/libs/events/legacy").json()):
        assert got["eventTime"] is None
        assert (got["reportingComponent"], got["reportingInstance"]) == ("", "")
    v1 = http.get("/apis/events.k8s.io/v1/namespaces/libs/events/legacy").json()
    assert v1["eventTime"] is None and v1["deprecatedFirstTimestamp"] == "2026-12-06T17:00:00Z"
    assert "reportingController" not in v1 and "reportingInstance" not in v1
    modern = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "modern"},
              "regarding": {"kind": "ConfigMap", "namespace": "libs", "name": "x"},
              "eventTime": "2026-12-06T17:00:00.000000Z", "reportingController": "example.com/ctl",
              "reportingInstance": "ctl-0", "action": "Act", "reason": "Done", "note": "n", "type": "Normal"}
    r = http.post("/apis/events.k8s.io/v1/namespaces/libs/events", json=modern)
    assert r.status_code == 201, r.text
    assert (r.json()["deprecatedFirstTimestamp"], r.json()["deprecatedLastTimestamp"]) == (None, None)
    core = http.get("/api/v1/namespaces/libs/events/modern").json()
    assert (core["firstTimestamp"], core["lastTimestamp"]) == (None, None) and "count" not in core
    assert (core["reportingComponent"], core["reportingInstance"]) == ("example.com/ctl", "ctl-0")
    listed = http.get("/apis/events.k8s.io/v1/namespaces/libs/events").json()["items"]
    assert {e["metadata"]["name"]: e["eventTime"] is None for e in listed} == {"legacy": True, "modern": False}
