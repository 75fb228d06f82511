"""``dryRun=All``: answered as the write would be, nothing stored; with kubectl --dry-run=server too."""

from __future__ import annotations

import httpx

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"k": "v"}}


def test_dry_run_writes_answer_but_store_nothing(served: Serve) -> None:
    h = bearer(served)
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    r = httpx.post(base, params={"dryRun": "All"}, headers=h, json=CM)
    assert r.status_code == 201 and r.json()["metadata"]["uid"]
    assert httpx.get(f"{base}/dry", headers=h).status_code == 404

    assert httpx.post(base, headers=h, json=CM).status_code == 201
    rv = httpx.get(f"{base}/dry", headers=h).json()["metadata"]["resourceVersion"]
    # a dry-run create of an existing name is still a conflict
    assert httpx.post(base, params={"dryRun": "All"}, headers=h, json=CM).status_code == 409
    changed = {**CM, "data": {"k": "changed"}}
    r = httpx.put(f"{base}/dry", params={"dryRun": "All"}, headers=h, json=changed)
    assert r.status_code == 200 and r.json()["data"] == {"k": "changed"}
    stale = {**changed, "metadata": {"name": "dry", "resourceVersion": "1"}}
    assert httpx.put(f"{base}/dry", params={"dryRun": "All"}, headers=h, json=stale).status_code == 409
    r = httpx.patch(f"{base}/dry", params={"dryRun": "All"},
                    headers={**h, "content-type": "application/merge-patch+json"}, content=b'{"data":{"x":"y"}}')
    assert r.status_code == 200 and r.json()["data"] == {"k": "v", "x": "y"}
    assert httpx.delete(f"{base}/dry", params={"dryRun": "All"}, headers=h).status_code == 200
    now = httpx.get(f"{base}/dry", headers=h).json()
    assert now["data"] == {"k": "v"} and now["metadata"]["resourceVersion"] == rv

    bad = httpx.post(base, params={"dryRun": "Some"}, headers=h, json=CM)
    assert bad.status_code == 400 and "Invalid dryRun value" in bad.json()["message"]


def test_a_dry_run_namespace_delete_leaves_it_active(served: Serve) -> None:
    h = bearer(served)
    assert httpx.post(f"{served.url}/api/v1/namespaces", headers=h,
                      json={"metadata": {"name": "dry-ns"}}).status_code == 201
    assert httpx.delete(f"{served.url}/api/v1/namespaces/dry-ns", params={"dryRun": "All"},
                        headers=h).status_code == 200
    ns = httpx.get(f"{served.url}/api/v1/namespaces/dry-ns", headers=h).json()
    assert ns["status"]["phase"] == "Active" and "deletionTimestamp" not in ns["metadata"]


def test_kubectl_dry_run_server(served: Serve) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kdry}\ndata: {a: b}\n"
    out = kubectl(served, "create", "--dry-run=server", "-f", "-", "-o", "name", stdin=manifest)
    assert out.strip() == "configmap/kdry"
    r = httpx.get(f"{served.url}/api/v1/namespaces/default/configmaps/kdry", headers=bearer(served))
    assert r.status_code == 404
