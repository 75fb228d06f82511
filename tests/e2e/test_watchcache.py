"""The watch cache over a real socket, in both snapshot modes: consistent reads
(read-your-writes with no resourceVersion), pagination from one snapshot, watch
resume from a resourceVersion (also across a server restart: no gap, no
duplicate), the resourceVersion rules' 400s and 504, and the metrics."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client, config, watch

from controlplane.tokens import find_admin, read_token_file
from tests.test_cli import Serve, running, start_serve


def bearer(s: Serve) -> dict[str, str]:
    admin = find_admin(read_token_file(s.tokens))
    assert admin is not None
    return {"authorization": f"Bearer {admin.token}"}


@pytest.fixture(scope="module", params=["lazy", "copy"])
def cached(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp(f"wc-{request.param}"),
                             extra=["--watch-cache-snapshot", request.param])) as s:
        yield s


@pytest.fixture(scope="module")
def http(cached: Serve) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cached.url, headers=bearer(cached), timeout=15) as c:
        yield c


def cm(name: str, ns: str = "default", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def make_ns(http: httpx.Client, name: str) -> str:
    r = http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    return name


def watch_lines(s: Serve, path: str, params: dict[str, str], n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with httpx.stream("GET", s.url + path, params=params, headers=bearer(s), timeout=15) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line:
                out.append(orjson.loads(line))
            if len(out) >= n:
                break
    return out


def test_reads_with_no_resource_version_see_every_acknowledged_write(http: httpx.Client) -> None:
    ns = make_ns(http, "ryw")
    for i in range(40):
        r = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm(f"c{i}", ns))
        assert r.status_code == 201
        rv = r.json()["metadata"]["resourceVersion"]
        got = http.get(f"/api/v1/namespaces/{ns}/configmaps/c{i}")
        assert got.status_code == 200 and got.json()["metadata"]["resourceVersion"] == rv
        listed = http.get(f"/api/v1/namespaces/{ns}/configmaps").json()
        assert len(listed["items"]) == i + 1
        assert int(listed["metadata"]["resourceVersion"]) >= int(rv)
        r = http.put(f"/api/v1/namespaces/{ns}/configmaps/c{i}", json={**got.json(), "data": {"v": "2"}})
        assert r.status_code == 200
        assert http.get(f"/api/v1/namespaces/{ns}/configmaps/c{i}").json()["data"] == {"v": "2"}


def test_pages_of_one_list_come_from_one_snapshot(http: httpx.Client) -> None:
    ns = make_ns(http, "pages")
    for i in range(25):
        assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm(f"c{i:02d}", ns)).status_code == 201
    page = http.get(f"/api/v1/namespaces/{ns}/configmaps", params={"limit": "10"}).json()
    rv = page["metadata"]["resourceVersion"]
    names = [i["metadata"]["name"] for i in page["items"]]
    # counted from the cache's snapshot (in copy mode too); upstream sets it when no selector filters
    assert page["metadata"]["remainingItemCount"] == 15
    # changes between the pages must not show in them
    assert http.delete(f"/api/v1/namespaces/{ns}/configmaps/c20").status_code == 200
    assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("c99", ns)).status_code == 201
    while page["metadata"].get("continue"):
        page = http.get(f"/api/v1/namespaces/{ns}/configmaps",
                        params={"limit": "10", "continue": page["metadata"]["continue"]}).json()
        assert page["metadata"]["resourceVersion"] == rv
        names += [i["metadata"]["name"] for i in page["items"]]
    assert names == [f"c{i:02d}" for i in range(25)]


def test_resource_version_rules(http: httpx.Client) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    # invalid ListOptions are 422 against ListOptions.meta.k8s.io, as upstream's ValidateListOptions
    r = http.get(path, params={"resourceVersionMatch": "NotOlderThan"})
    assert r.status_code == 422 and r.json()["message"].startswith('ListOptions.meta.k8s.io "" is invalid: '
                                                                   "resourceVersionMatch: Forbidden")
    assert http.get(path, params={"resourceVersion": "0", "resourceVersionMatch": "Exact"}).status_code == 422
    assert http.get(path, params={"resourceVersion": "1", "resourceVersionMatch": "Sometimes"}).status_code == 422
    assert http.get(path, params={"resourceVersion": "x"}).status_code == 400
    listed = http.get(path, params={"resourceVersion": "0"})
    assert listed.status_code == 200
    current = int(http.get(path).json()["metadata"]["resourceVersion"])
    r = http.get(path, params={"resourceVersion": str(current + 1000), "resourceVersionMatch": "NotOlderThan"})
    assert r.status_code == 504 and r.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    exact = http.get(path, params={"resourceVersion": str(current), "resourceVersionMatch": "Exact"})
    assert exact.status_code == 200 and exact.json()["metadata"]["resourceVersion"] == str(current)


def test_too_large_resource_version_is_upstreams_timeout(http: httpx.Client) -> None:
    """storage.NewTooLargeResourceVersionError: a NewTimeoutError ("Timeout: ..."), with the
    Retry-After header client-go waits on; a legacy watch from a revision not reached yet
    is served (the events after it), as upstream's cacher serves it."""
    path = "/api/v1/namespaces/default/configmaps"
    current = int(http.get(path).json()["metadata"]["resourceVersion"])
    r = http.get(path, params={"resourceVersion": str(current + 1000)})
    assert r.status_code == 504 and r.headers["retry-after"] == "1"
    assert r.json()["message"].startswith(f"Timeout: Too large resource version: {current + 1000}, current: ")
    assert r.json()["details"]["retryAfterSeconds"] == 1
    watched = http.get(path, params={"watch": "1", "resourceVersion": str(current + 1000), "timeoutSeconds": "1"})
    assert watched.status_code == 200 and watched.text == ""


def test_a_list_from_resource_version_0_ignores_limit(http: httpx.Client) -> None:
    """As upstream's cacher (computeListLimit): resourceVersion=0 is served whole."""
    ns = make_ns(http, "rv0-limit")
    for i in range(5):
        http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm(f"c{i}", ns))
    whole = http.get(f"/api/v1/namespaces/{ns}/configmaps", params={"resourceVersion": "0", "limit": "2"}).json()
    assert len(whole["items"]) == 5 and "continue" not in whole["metadata"]
    paged = http.get(f"/api/v1/namespaces/{ns}/configmaps", params={"limit": "2"}).json()
    assert len(paged["items"]) == 2 and paged["metadata"]["remainingItemCount"] == 3


def test_watch_events_as_upstream_sends_them(cached: Serve, http: httpx.Client) -> None:
    """An object leaving a label selector is DELETED as it was (its previous labels and
    data) at the change's resourceVersion; the initial-events-end bookmark only with
    allowWatchBookmarks."""
    ns = make_ns(http, "leaving")
    rv = http.post(f"/api/v1/namespaces/{ns}/configmaps",
                   json={**cm("a", ns, x="1"), "metadata": {"name": "a", "labels": {"app": "web"}}}
                   ).json()["metadata"]["resourceVersion"]
    left = http.patch(f"/api/v1/namespaces/{ns}/configmaps/a",
                      content=b'{"metadata":{"labels":{"app":"db"}},"data":{"x":"2"}}',
                      headers={"content-type": "application/merge-patch+json"}).json()["metadata"]["resourceVersion"]
    events = watch_lines(cached, f"/api/v1/namespaces/{ns}/configmaps",
                         {"watch": "1", "resourceVersion": rv, "labelSelector": "app=web", "timeoutSeconds": "5"}, 1)
    assert events[0]["type"] == "DELETED"
    gone = events[0]["object"]
    assert gone["metadata"]["labels"] == {"app": "web"} and gone["data"] == {"x": "1"}
    assert gone["metadata"]["resourceVersion"] == left
    with httpx.stream("GET", cached.url + f"/api/v1/namespaces/{ns}/configmaps", headers=bearer(cached),
                      params={"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                              "timeoutSeconds": "1"}, timeout=15) as r:
        types = [orjson.loads(line)["type"] for line in r.iter_lines() if line]
    assert types == ["ADDED"]


def test_watch_resumes_from_a_resource_version(cached: Serve, http: httpx.Client) -> None:
    ns = make_ns(http, "resume")
    rv = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("a", ns)).json()["metadata"]["resourceVersion"]
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("b", ns))
    http.patch(f"/api/v1/namespaces/{ns}/configmaps/a", content=b'{"data":{"x":"1"}}',
               headers={"content-type": "application/merge-patch+json"})
    http.delete(f"/api/v1/namespaces/{ns}/configmaps/b")
    events = watch_lines(cached, f"/api/v1/namespaces/{ns}/configmaps",
                         {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5"}, 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
        [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert revs == sorted(revs) and revs[0] > int(rv)


def _write_blocks(http: httpx.Client) -> float:
    text = http.get("/metrics").text
    found = re.search(r"^controlplane_http_write_blocks_total (\S+)$", text, re.M)
    assert found is not None
    return float(found.group(1))


def test_a_live_watch_whose_reader_stalls_gets_every_event_once_in_order(cached: Serve, http: httpx.Client) -> None:
    """Live events are written in the turn that fans them out while the connection keeps up,
    and through the watch's task while it is backed up (a reader that stops reading): over the
    socket, both ways together, every event arrives once and in order."""
    ns = make_ns(http, "stalls")
    rv = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("seed", ns)).json()["metadata"]["resourceVersion"]
    blocks = _write_blocks(http)
    n, pad = 40, "x" * 131072  # 5 MB of events: more than the socket's buffers and the server's high-water mark
    with httpx.stream("GET", cached.url + f"/api/v1/namespaces/{ns}/configmaps", headers=bearer(cached),
                      params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "60"}, timeout=30) as r:
        assert r.status_code == 200
        for i in range(n):  # nothing read meanwhile
            assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm(f"c{i:03}", ns, pad=pad)).status_code == 201
        got: list[tuple[str, str, int]] = []
        for line in r.iter_lines():
            if line:
                e = orjson.loads(line)
                meta = e["object"]["metadata"]
                got.append((e["type"], meta["name"], int(meta["resourceVersion"])))
            if len(got) >= n:
                break
    assert [(t, name) for t, name, _ in got] == [("ADDED", f"c{i:03}") for i in range(n)]
    revisions = [rev for _, _, rev in got]
    assert revisions == sorted(set(revisions))
    assert _write_blocks(http) > blocks  # the connection did back up


def test_the_python_client_watches_from_a_list(cached: Serve, http: httpx.Client) -> None:
    ns = make_ns(http, "informer")
    api = config.new_client_from_config(config_file=str(cached.kubeconfig))
    try:
        v1 = client.CoreV1Api(api)
        for i in range(3):
            v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}")))
        listed = v1.list_namespaced_config_map(ns)
        v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late")))
        w = watch.Watch()
        seen = []
        for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=listed.metadata.resource_version,
                           timeout_seconds=5):
            seen.append((ev["type"], ev["object"].metadata.name))
            w.stop()
        assert seen == [("ADDED", "late")]
    finally:
        api.close()


def test_the_python_client_sees_each_lease_of_a_bulk_renewal_modified_at_its_own_version(
        cached: Serve, http: httpx.Client) -> None:
    """A LeaseRenewal's Leases reach the watch cache as one run of the store's (arrays, not an
    event each): a watch over the socket still gets one MODIFIED per Lease, carrying the
    version a GET returns, each at its own resourceVersion."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    names = [f"bulk-{i}" for i in range(40)]
    for name in names:
        r = http.post(leases, json={"metadata": {"name": name}, "spec": {
            "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-12-04T20:00:00.000000Z"}})
        assert r.status_code == 201, r.text
    api = config.new_client_from_config(config_file=str(cached.kubeconfig))
    try:
        coordination = client.CoordinationV1Api(api)
        listed = coordination.list_namespaced_lease("kube-node-lease")
        renewals = "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals"
        for renew_time in ("2026-12-04T20:00:10.000000Z", "2026-12-04T20:00:20.000000Z"):  # the second one spliced
            r = http.post(renewals, json={"spec": {"renewTime": renew_time, "leases": names}})
            assert r.status_code == 201 and r.json()["status"] == {"renewed": len(names)}, r.text
        w = watch.Watch()
        seen: list[tuple[str, str, str, str]] = []
        for ev in w.stream(coordination.list_namespaced_lease, "kube-node-lease",
                           resource_version=listed.metadata.resource_version, timeout_seconds=10):
            obj = ev["object"]
            seen.append((ev["type"], obj.metadata.name, obj.metadata.resource_version,
                         obj.spec.renew_time.strftime("%S")))
            if len(seen) == 2 * len(names):
                w.stop()
        assert [(t, name, second) for t, name, _, second in seen] == [
            ("MODIFIED", name, second) for second in ("10", "20") for name in names]
        versions = [int(rv) for _, _, rv, _ in seen]
        assert versions == sorted(set(versions))  # each its own, in order
        for name in names:
            got = http.get(f"{leases}/{name}").json()
            assert got["metadata"]["resourceVersion"] == [rv for _, n, rv, _ in seen if n == name][-1]
    finally:
        api.close()


def test_metrics_of_the_watch_cache(cached: Serve, http: httpx.Client) -> None:
    ns = make_ns(http, "metrics")
    rv = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("a", ns)).json()["metadata"]["resourceVersion"]
    later = threading.Timer(0.5, lambda: http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("b", ns)))
    later.start()
    events = watch_lines(cached, f"/api/v1/namespaces/{ns}/configmaps",
                         {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5"}, 1)
    later.join()
    assert events[0]["object"]["metadata"]["name"] == "b"  # a live event, delivered through a watcher's buffer
    text = httpx.get(cached.url + "/metrics").text
    for pattern in (r'controlplane_watch_cache_lock_wait_seconds_count\{resource="configmaps",role="writer"\} [1-9]',
                    r'controlplane_watch_cache_lock_wait_seconds_count\{resource="configmaps",role="reader"\} [1-9]',
                    r'controlplane_watch_event_delivery_seconds_count\{resource="configmaps"\} [1-9]',
                    r"controlplane_event_loop_lag_seconds_count [1-9]"):
        assert re.search(pattern, text), pattern


def test_watch_resumes_across_a_restart_with_no_gap_or_duplicate(tmp_path: Path) -> None:
    s = start_serve(tmp_path)
    s.wait_ready()
    try:
        with httpx.Client(base_url=s.url, headers=bearer(s), timeout=15) as http:
            rv = http.post("/api/v1/namespaces/default/configmaps", json=cm("a")).json()["metadata"][
                "resourceVersion"]
            for name in ("b", "c"):
                assert http.post("/api/v1/namespaces/default/configmaps", json=cm(name)).status_code == 201
    finally:
        s.stop()
    s = start_serve(tmp_path, run=1)
    s.wait_ready()
    try:
        with httpx.Client(base_url=s.url, headers=bearer(s), timeout=15) as http:
            assert http.delete("/api/v1/namespaces/default/configmaps/a").status_code == 200
        events = watch_lines(s, "/api/v1/namespaces/default/configmaps",
                             {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5"}, 3)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
            [("ADDED", "b"), ("ADDED", "c"), ("DELETED", "a")]
    finally:
        s.stop()
