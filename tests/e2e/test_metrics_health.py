"""``/metrics`` and the health endpoints over a real socket, as the tools pointed at a
kube-apiserver read them: kube-apiserver's request and object-count series (Prometheus,
clusterloader2), ``/readyz?verbose`` and friends (kubectl, probes), and the ``etcd`` check
following the etcd store as it stops and comes back."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from loadtest.promtext import parse
from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.etcd_server import EtcdServer
from tests.test_cli import Serve, running, start_serve

UPSTREAM_BUCKETS = ["0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2",
                    "3", "4", "5", "6", "8", "10", "15", "20", "30", "45", "60", "+Inf"]  # as Go writes them
CORE = {"group": "", "version": "v1", "component": "apiserver", "subresource": ""}


def _samples(served: Serve, name: str) -> list[Sample]:
    r = httpx.get(f"{served.url}/metrics")
    assert r.status_code == 200
    return [s for f in text_string_to_metric_families(r.text) for s in f.samples if s.name == name]


def _value(samples: list[Sample], **labels: str) -> float | None:
    found = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found) if found else None


@pytest.fixture(scope="module")
def traffic(served: Serve) -> None:
    """One of each kind of request the series tell apart."""
    h = bearer(served)
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    for i in range(3):
        assert httpx.post(base, headers=h, json={"metadata": {"name": f"m{i}"}}).status_code == 201
    assert httpx.post(base, params={"dryRun": "All"}, headers=h, json={"metadata": {"name": "dry"}}).status_code == 201
    assert httpx.get(f"{base}/m0", headers=h).status_code == 200
    assert httpx.get(f"{base}/missing", headers=h).status_code == 404
    assert httpx.get(base, headers=h).status_code == 200
    assert httpx.get(f"{served.url}/api/v1/configmaps", headers=h).status_code == 200
    applied = httpx.patch(f"{base}/m0", params={"fieldManager": "t"},
                          headers={**h, "content-type": "application/apply-patch+yaml"},
                          content=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m0}\ndata: {a: b}\n")
    assert applied.status_code == 200
    assert httpx.patch(f"{base}/m1", headers={**h, "content-type": "application/merge-patch+json"},
                       content=b'{"data":{"x":"y"}}').status_code == 200
    assert httpx.get(f"{base}", params={"watch": "1", "timeoutSeconds": "1"}, headers=h, timeout=10).status_code == 200


def test_request_duration_has_upstream_labels_and_buckets(served: Serve, traffic: None) -> None:
    r = httpx.get(f"{served.url}/metrics")
    buckets = [s for f in text_string_to_metric_families(r.text) for s in f.samples
               if s.name == "apiserver_request_duration_seconds_bucket" and s.labels.get("verb") == "POST"
               and s.labels.get("resource") == "configmaps" and s.labels.get("dry_run") == ""]
    assert [s.labels["le"] for s in buckets] == UPSTREAM_BUCKETS
    # a create is scope "resource" upstream (its installer's rule for POST)
    assert {k: v for k, v in buckets[0].labels.items() if k != "le"} == {
        **CORE, "verb": "POST", "dry_run": "", "resource": "configmaps", "scope": "resource"}
    assert buckets[-1].value >= 3
    # le as kube-apiserver's client_golang writes it ("1", not "1.0"): a query for le="1" finds it
    assert 'le="1",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"}' in r.text
    counts = [s for f in text_string_to_metric_families(r.text) for s in f.samples
              if s.name == "apiserver_request_duration_seconds_count" and s.labels.get("resource") == "configmaps"]
    shown = {(s.labels["verb"], s.labels["scope"], s.labels["dry_run"]) for s in counts}
    assert {("POST", "resource", ""), ("POST", "resource", "All"), ("GET", "resource", ""),
            ("LIST", "namespace", ""), ("LIST", "cluster", ""), ("APPLY", "resource", ""),
            ("PATCH", "resource", ""), ("WATCH", "namespace", "")} <= shown


def test_request_total_counts_by_code(served: Serve, traffic: None) -> None:
    total = _samples(served, "apiserver_request_total")
    assert _value(total, **CORE, verb="POST", dry_run="", resource="configmaps", scope="resource", code="201") == 3
    assert _value(total, verb="POST", dry_run="All", resource="configmaps", code="201") == 1
    assert _value(total, verb="GET", resource="configmaps", scope="resource", code="404") == 1
    assert _value(total, verb="WATCH", resource="configmaps", scope="namespace", code="200") == 1
    for s in total:
        assert set(s.labels) == {"verb", "dry_run", "group", "version", "resource", "subresource", "scope",
                                 "component", "code"}
    assert _value(total, verb="LIST", group="apps", version="v1", resource="deployments") is None  # none made


def test_sli_duration_leaves_dry_runs_out(served: Serve, traffic: None) -> None:
    r = httpx.get(f"{served.url}/metrics")
    sli = [s for f in text_string_to_metric_families(r.text) for s in f.samples
           if s.name.startswith("apiserver_request_sli_duration_seconds") and s.labels.get("verb") == "POST"
           and s.labels.get("resource") == "configmaps"]
    assert [s.labels["le"] for s in sli if s.name.endswith("_bucket")] == UPSTREAM_BUCKETS[2:]
    assert "dry_run" not in sli[0].labels
    assert _value([s for s in sli if s.name.endswith("_count")]) == 3  # the dry run is not counted


def test_the_controlplane_series_keep_their_labels(served: Serve, traffic: None) -> None:
    """What loadtest/serverwatch.py reads: controlplane_request_duration_seconds, its own
    labels (a create is scope namespace there), watches left out."""
    scrape = parse(httpx.get(f"{served.url}/metrics").text, 0.0)
    created = scrape.histogram("controlplane_request_duration_seconds", verb="POST", resource="configmaps",
                               subresource="", scope="namespace", code="201")
    assert created is not None and created.count == 4  # three and the dry run
    assert scrape.histogram("controlplane_request_duration_seconds", verb="WATCH") is None
    labels = {frozenset(dict(lab)) for lab in scrape.series("controlplane_request_duration_seconds")}
    assert labels == {frozenset({"verb", "resource", "subresource", "scope", "code"})}


def test_storage_objects_count_what_is_stored(served: Serve, traffic: None) -> None:
    h = bearer(served)
    configmaps = len(httpx.get(f"{served.url}/api/v1/configmaps", headers=h).json()["items"])
    namespaces = len(httpx.get(f"{served.url}/api/v1/namespaces", headers=h).json()["items"])
    roles = len(httpx.get(f"{served.url}/apis/rbac.authorization.k8s.io/v1/clusterroles", headers=h).json()["items"])
    legacy = _samples(served, "apiserver_storage_objects")
    assert _value(legacy, resource="configmaps") == configmaps
    assert _value(legacy, resource="namespaces") == namespaces
    assert _value(legacy, resource="clusterroles.rbac.authorization.k8s.io") == roles
    assert _value(legacy, resource="deployments.apps") == 0
    grouped = _samples(served, "apiserver_resource_objects")
    assert _value(grouped, group="rbac.authorization.k8s.io", resource="clusterroles") == roles
    assert _value(grouped, group="", resource="configmaps") == configmaps


def test_a_watch_is_a_long_running_request(served: Serve) -> None:
    watching = {"verb": "WATCH", "group": "", "version": "v1", "resource": "secrets", "subresource": "",
                "scope": "namespace", "component": "apiserver"}
    opened = threading.Event()

    def watch() -> None:
        with httpx.stream("GET", f"{served.url}/api/v1/namespaces/default/secrets",
                          params={"watch": "true", "timeoutSeconds": "2"}, headers=bearer(served), timeout=10) as r:
            opened.set()
            for _ in r.iter_bytes():
                pass

    t = threading.Thread(target=watch)
    t.start()
    assert opened.wait(10)
    deadline = time.monotonic() + 5
    while _value(_samples(served, "apiserver_longrunning_requests"), **watching) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    t.join()
    assert _value(_samples(served, "apiserver_longrunning_requests"), **watching) == 0
    inflight = _samples(served, "apiserver_current_inflight_requests")
    assert {s.labels["request_kind"] for s in inflight} == {"readOnly", "mutating"}
    assert all(s.value >= 0 for s in inflight)


# -- health -----------------------------------------------------------------------------------------------
def test_verbose_health_lists_upstream_checks(served: Serve) -> None:
    for endpoint in ("livez", "healthz", "readyz"):
        r = httpx.get(f"{served.url}/{endpoint}?verbose")
        lines = r.text.splitlines()
        assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert lines[:3] == ["[+]ping ok", "[+]log ok", "[+]etcd ok"]
        assert "[+]poststarthook/rbac/bootstrap-roles ok" in lines
        assert "[+]poststarthook/bootstrap-controller ok" in lines
        assert lines[-1] == f"{endpoint} check passed"
        assert all(line.endswith(" ok") for line in lines[:-1])
    ready = httpx.get(f"{served.url}/readyz?verbose").text.splitlines()
    assert ready[3:5] == ["[+]etcd-readiness ok", "[+]informer-sync ok"]
    assert ready[-2] == "[+]shutdown ok"
    assert "[+]shutdown ok" not in httpx.get(f"{served.url}/livez?verbose").text


def test_single_checks_and_exclusions(served: Serve) -> None:
    for path in ("/readyz/etcd", "/livez/ping", "/healthz/log", "/readyz/informer-sync", "/readyz/shutdown",
                 "/livez/poststarthook/start-apiextensions-informers"):
        r = httpx.get(served.url + path)
        assert (r.status_code, r.text) == (200, "ok"), path
    r = httpx.get(f"{served.url}/livez/shutdown")  # a readyz-only check
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"
    r = httpx.get(f"{served.url}/readyz", params=[("verbose", ""), ("exclude", "etcd"), ("exclude", "nope")])
    lines = r.text.splitlines()
    assert r.status_code == 200
    assert "[+]etcd excluded: ok" in lines and "[+]etcd-readiness ok" in lines
    assert lines[-2:] == ['warn: some health checks cannot be excluded: no matches for "nope"', "readyz check passed"]
    assert httpx.get(f"{served.url}/readyz?exclude=etcd").text == "ok"


def test_kubectl_get_raw_readyz_verbose(served: Serve) -> None:
    out = kubectl(served, "get", "--raw=/readyz?verbose")
    assert "[+]etcd ok" in out.splitlines() and out.rstrip().endswith("readyz check passed")
    assert kubectl(served, "get", "--raw=/livez") == "ok"


def test_the_etcd_check_follows_the_etcd_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    with EtcdServer() as etcd, running(start_serve(tmp_path_factory.mktemp("etcd-health"),
                                                   extra=("--store", etcd.url))) as served:
        assert httpx.get(f"{served.url}/readyz/etcd").text == "ok"
        etcd.stop()
        deadline = time.monotonic() + 15
        while (r := httpx.get(f"{served.url}/readyz?verbose", timeout=10)).status_code == 200:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)
        lines = r.text.splitlines()
        assert r.status_code == 500
        assert "[-]etcd failed: reason withheld" in lines and "[-]etcd-readiness failed: reason withheld" in lines
        assert lines[-1] == "readyz check failed"
        assert httpx.get(f"{served.url}/readyz", timeout=10).text == r.text  # the list, asked or not
        single = httpx.get(f"{served.url}/readyz/etcd", timeout=10)
        assert single.status_code == 500 and single.text.startswith("internal server error: ")
        assert httpx.get(f"{served.url}/livez", timeout=10).status_code == 500  # as upstream's livez
        assert httpx.get(f"{served.url}/livez/ping").text == "ok"
        etcd.start()
        deadline = time.monotonic() + 30
        while (r := httpx.get(f"{served.url}/readyz?verbose", timeout=10)).status_code != 200:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)
        assert httpx.get(f"{served.url}/livez").text == "ok"
