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
    assert bad.status_code == 422 and bad.json()["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"')


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


def test_kubectl_delete_dry_run_server_deletes_nothing(served: Serve) -> None:
    # kubectl asks for the dry run in the DeleteOptions body, not in the query
    kubectl(served, "apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n")
    out = kubectl(served, "delete", "configmap", "keep", "--dry-run=server")
    assert "deleted from default namespace (server dry run)" in out
    r = httpx.get(f"{served.url}/api/v1/namespaces/default/configmaps/keep", headers=bearer(served))
    assert r.status_code == 200
    out = kubectl(served, "delete", "configmaps", "--all", "--dry-run=server")
    assert "configmap \"keep\" deleted from default namespace (server dry run)" in out
    assert httpx.get(f"{served.url}/api/v1/namespaces/default/configmaps/keep", headers=bearer(served)).is_success


def test_delete_options_in_the_body_are_validated_and_honoured(served: Serve) -> None:
    h = {**bearer(served), "content-type": "application/json"}
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    for name in ("a", "b"):
        assert httpx.post(base, headers=h, json={"metadata": {"name": name, "labels": {"set": "x"}}}).is_success
    bogus = httpx.request("DELETE", f"{base}/a", headers=h,
                          content=b'{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Bogus"}')
    assert bogus.status_code == 422 and bogus.json()["reason"] == "Invalid"
    assert bogus.json()["message"].startswith('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                                              'Unsupported value: "Bogus"')
    both = httpx.request("DELETE", f"{base}/a", headers=h,
                         content=b'{"orphanDependents":true,"propagationPolicy":"Orphan"}')
    assert both.status_code == 422
    bad_dry = httpx.request("DELETE", f"{base}/a", headers=h, content=b'{"dryRun":["Some"]}')
    assert bad_dry.status_code == 422 and "dryRun" in bad_dry.json()["message"]
    assert httpx.delete(base, params={"propagationPolicy": "Bogus"}, headers=h).status_code == 422
    # a collection delete's dry run in its body stores nothing
    r = httpx.request("DELETE", base, params={"labelSelector": "set=x"}, headers=h,
                      content=b'{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}')
    assert r.status_code == 200 and sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["a", "b"]
    assert httpx.get(f"{base}/a", headers=h).is_success and httpx.get(f"{base}/b", headers=h).is_success
    r = httpx.request("DELETE", base, params={"labelSelector": "set=x"}, headers=h,
                      content=b'{"propagationPolicy":"Background"}')
    assert r.status_code == 200 and httpx.get(f"{base}/a", headers=h).status_code == 404


def test_a_collection_delete_of_pods_keeps_their_grace_and_finalizers(served: Serve) -> None:
    h = bearer(served)
    base = f"{served.url}/api/v1/namespaces/default/pods"
    spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
    assert httpx.post(base, headers=h, json={"metadata": {"name": "held", "labels": {"g": "1"},
                                                          "finalizers": ["example.com/hold"]},
                                             "spec": {"containers": spec["containers"]}}).is_success
    assert httpx.post(base, headers=h, json={"metadata": {"name": "bound", "labels": {"g": "1"}},
                                             "spec": spec}).is_success
    r = httpx.delete(base, params={"labelSelector": "g=1"}, headers=h)
    assert r.status_code == 200
    held = httpx.get(f"{base}/held", headers=h).json()["metadata"]
    bound = httpx.get(f"{base}/bound", headers=h).json()["metadata"]
    assert held["deletionTimestamp"] and held["finalizers"] == ["example.com/hold"]
    assert bound["deletionTimestamp"] and bound["deletionGracePeriodSeconds"] == 30


def test_namespaces_have_no_collection_delete(served: Serve) -> None:
    r = httpx.delete(f"{served.url}/api/v1/namespaces", headers=bearer(served))
    assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed"
    assert httpx.get(f"{served.url}/api/v1/namespaces/default", headers=bearer(served)).is_success


def test_a_put_of_a_missing_lease_creates_it(served: Serve) -> None:
    h = bearer(served)
    url = f"{served.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/put-lease"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "put-lease"},
             "spec": {"holderIdentity": "me"}}
    r = httpx.put(url, headers=h, json=lease)
    assert r.status_code == 201 and r.json()["metadata"]["uid"]
    assert httpx.put(url, headers=h, json=lease).status_code == 200
    r = httpx.put(f"{served.url}/api/v1/namespaces/default/configmaps/put-cm", headers=h,
                  json={"metadata": {"name": "put-cm"}})
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"


def test_client_go_timeout_is_accepted_and_a_bad_resource_version_is_a_400(served: Serve) -> None:
    # kubectl --request-timeout adds ?timeout=; unknown parameters are ignored, as upstream
    assert "default" in kubectl(served, "get", "ns", "--request-timeout=5s", "-o", "name")
    h = bearer(served)
    r = httpx.get(f"{served.url}/api/v1/namespaces/default", params={"resourceVersion": "abc"}, headers=h)
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    r = httpx.get(f"{served.url}/api/v1/namespaces/default", params={"resourceVersion": "0"}, headers=h)
    assert r.status_code == 200


def test_duplicate_keys_are_found_in_a_body_without_kind_or_api_version(served: Serve) -> None:
    h = {**bearer(served), "content-type": "application/json"}
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    body = b'{"metadata":{"name":"dup"},"data":{"a":"b"},"data":{"c":"d"}}'
    r = httpx.post(base, params={"fieldValidation": "Strict"}, headers=h, content=body)
    assert r.status_code == 400 and 'duplicate field "data"' in r.json()["message"]
    r = httpx.post(base, headers=h, content=body)
    assert r.status_code == 201 and 'duplicate field \\"data\\"' in r.headers["warning"]
    assert r.json()["data"] == {"c": "d"}


def test_yaml_request_bodies_are_decoded(served: Serve) -> None:
    h = {**bearer(served), "content-type": "application/yaml"}
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  when: 2026-11-30\n  n: '1'\n"
    r = httpx.post(base, headers=h, content=body)
    assert r.status_code == 201 and r.json()["data"] == {"when": "2026-11-30", "n": "1"}
    r = httpx.put(f"{base}/from-yaml", headers=h, content=body.replace(b"'1'", b"'2'"))
    assert r.status_code == 200 and r.json()["data"]["n"] == "2"
    r = httpx.post(base, headers=h, content=b"metadata: [unclosed")
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_json_nested_deeper_than_the_walks_is_a_400_status(served: Serve) -> None:
    h = {**bearer(served), "content-type": "application/json"}
    base = f"{served.url}/api/v1/namespaces/default/configmaps"
    deep = "[" * 600 + "]" * 600
    body = '{"metadata":{"name":"deep"},"data":{"v":' + deep + "}}"
    r = httpx.post(base, headers=h, content=body)
    assert r.status_code == 400 and r.json()["kind"] == "Status"
    assert httpx.get(f"{base}/deep", headers=h).status_code == 404
    assert httpx.get(f"{served.url}/readyz").status_code == 200


def test_a_yaml_alias_bomb_is_refused(served: Serve) -> None:
    lines = ["l0: &l0 [" + ",".join(['"lol"'] * 10) + "]"]
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 8)]
    bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nbomb:\n" + "\n".join("  " + x for x in lines)
    h = {**bearer(served), "content-type": "application/apply-patch+yaml"}
    r = httpx.patch(f"{served.url}/api/v1/namespaces/default/configmaps/bomb", params={"fieldManager": "t"},
                    headers=h, content=bomb, timeout=30)
    assert r.status_code == 400 and "excessive aliasing" in r.json()["message"]
    r = httpx.post(f"{served.url}/api/v1/namespaces/default/configmaps",
                   headers={**h, "content-type": "application/yaml"}, content=bomb, timeout=30)
    assert r.status_code == 400 and "excessive aliasing" in r.json()["message"]
