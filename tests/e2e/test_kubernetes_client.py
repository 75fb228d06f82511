"""The official ``kubernetes`` Python client against a real ``controlplane serve``
over a socket: discovery, CRUD, paging, watch from a resourceVersion, and the
Status errors the client turns into ``ApiException``s."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controlplane.tokens import find_admin, read_token_file
from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, start_serve


def bearer(served: Serve) -> dict[str, str]:
    admin = find_admin(read_token_file(served.tokens))
    assert admin is not None
    return {"authorization": f"Bearer {admin.token}"}


@pytest.fixture(scope="module")
def ns(api: client.ApiClient) -> str:
    client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="e2e")))
    return "e2e"


def test_discovery(api: client.ApiClient) -> None:
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert {"apps", "batch", "coordination.k8s.io"} <= set(groups)
    core = client.CoreV1Api(api).get_api_resources()
    pods = next(r for r in core.resources if r.name == "pods")
    assert pods.namespaced and pods.kind == "Pod" and "po" in pods.short_names and "watch" in pods.verbs
    assert "pods/status" in {r.name for r in core.resources}


def test_every_answer_carries_an_audit_id(api: client.ApiClient) -> None:
    """Auditing off (no policy), as upstream's WithAuditInit: each response has its own ID."""
    core = client.CoreV1Api(api)
    ids = [core.list_namespace_with_http_info()[2]["Audit-Id"] for _ in range(2)]
    assert ids[0] != ids[1] and all(uuid.UUID(i).version == 4 for i in ids)
    with pytest.raises(ApiException) as missing:
        core.read_namespace("no-such-namespace")
    assert uuid.UUID(missing.value.headers["Audit-Id"]).version == 4


def test_system_namespaces_exist(api: client.ApiClient) -> None:
    names = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system", "kube-node-lease"} <= names


def test_configmap_crud(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings", labels={"app": "web"}), data={"a": "1"}))
    assert cm.metadata.uid and cm.metadata.resource_version and cm.metadata.namespace == ns
    got = v1.read_namespaced_config_map("settings", ns)
    assert got.data == {"a": "1"} and got.metadata.resource_version == cm.metadata.resource_version
    got.data["b"] = "2"
    updated = v1.replace_namespaced_config_map("settings", ns, got)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    assert updated.metadata.uid == cm.metadata.uid
    with pytest.raises(ApiException) as stale:  # optimistic concurrency: the old version is stale
        v1.replace_namespaced_config_map("settings", ns, got)
    assert stale.value.status == 409 and '"reason":"Conflict"' in stale.value.body
    with pytest.raises(ApiException) as dup:
        v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings")))
    assert dup.value.status == 409 and '"reason":"AlreadyExists"' in dup.value.body
    v1.delete_namespaced_config_map("settings", ns)
    with pytest.raises(ApiException) as missing:
        v1.read_namespaced_config_map("settings", ns)
    assert missing.value.status == 404 and '"reason":"NotFound"' in missing.value.body


def test_generate_name_and_namespace_must_exist(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    a = v1.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(generate_name="tok-")))
    b = v1.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(generate_name="tok-")))
    assert a.metadata.name.startswith("tok-") and a.metadata.name != b.metadata.name
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_secret("nowhere", client.V1Secret(metadata=client.V1ObjectMeta(name="x")))
    assert e.value.status == 404


def test_list_pages_with_limit_and_continue(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for i in range(7):
        v1.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=f"sa{i}")))
    names: list[str] = []
    token = None
    while True:
        page = v1.list_namespaced_service_account(ns, limit=3, _continue=token)
        names += [sa.metadata.name for sa in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == ["default"] + [f"sa{i}" for i in range(7)]  # "default": every namespace has it


def test_watch_from_a_resource_version_sees_every_change(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def follow() -> None:
        w = watch.Watch()
        for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                w.stop()
    t = threading.Thread(target=follow)
    t.start()
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="w"), data={}))
    cm.data = {"k": "v"}
    v1.replace_namespaced_config_map("w", ns, cm)
    v1.delete_namespaced_config_map("w", ns)
    t.join(15)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_deployment_in_a_named_group(api: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api)
    d = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2, selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")]))))
    apps.create_namespaced_deployment(ns, d)
    got = apps.read_namespaced_deployment("web", ns)
    assert got.spec.replicas == 2 and got.spec.template.spec.containers[0].image == "nginx"
    assert [x.metadata.name for x in apps.list_namespaced_deployment(ns).items] == ["web"]


def test_bad_requests_get_status_errors(served: Serve, ns: str) -> None:
    base = f"{served.url}/api/v1/namespaces/{ns}/configmaps"
    auth = bearer(served)
    r = httpx.post(base, content=b"{not json", headers={"content-type": "application/json", **auth})
    assert r.status_code == 400 and r.json()["kind"] == "Status" and r.json()["reason"] == "BadRequest"
    r = httpx.post(base, json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, headers=auth)
    assert r.status_code == 400
    r = httpx.post(base, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, headers=auth)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    r = httpx.get(base, params={"dryRun": "Bogus"}, headers=auth)  # a read has no dryRun: ignored, as upstream
    assert r.status_code == 200 and r.json()["kind"] == "ConfigMapList"
    r = httpx.post(base, params={"dryRun": "Bogus"}, headers=auth, json={"metadata": {"name": "d"}})
    assert r.status_code == 422 and r.json()["details"]["kind"] == "CreateOptions"
    r = httpx.get(base, params={"labelSelector": "a in (b"}, headers=auth)
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    r = httpx.post(base, content=b"x" * (3 * 1024 * 1024 + 1), headers={"content-type": "application/json", **auth})
    assert r.status_code == 413
    r = httpx.get(f"{served.url}/api/v1/nosuchthings", headers=auth)
    assert r.status_code == 404 and r.json()["kind"] == "Status"
    r = httpx.put(base, headers=auth, json={})
    assert r.status_code == 405


def test_merge_patch(served: Serve, api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="p"),
                                                           data={"keep": "1", "drop": "2"}))
    r = httpx.patch(f"{served.url}/api/v1/namespaces/{ns}/configmaps/p",
                    content=b'{"data": {"drop": null, "new": "3"}}',
                    headers={"content-type": "application/merge-patch+json", **bearer(served)})
    assert r.status_code == 200, r.text
    assert v1.read_namespaced_config_map("p", ns).data == {"keep": "1", "new": "3"}
    r = httpx.patch(f"{served.url}/api/v1/namespaces/{ns}/configmaps/p", content=b"{}",
                    headers={"content-type": "text/plain", **bearer(served)})
    assert r.status_code == 415


def test_objects_survive_a_restart(tmp_path: Path) -> None:
    s = start_serve(tmp_path, run=0)
    s.wait_ready()
    try:
        r = httpx.post(f"{s.url}/api/v1/namespaces/default/configmaps", headers=bearer(s),
                       json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "durable"},
                             "data": {"x": "y"}})
        assert r.status_code == 201
    finally:
        assert s.stop() == 0
    s = start_serve(tmp_path, run=1, port=s.port)
    s.wait_ready()
    try:
        r = httpx.get(f"{s.url}/api/v1/namespaces/default/configmaps/durable", headers=bearer(s))
        assert r.status_code == 200 and r.json()["data"] == {"x": "y"}
    finally:
        s.stop()


def test_label_and_field_selectors_on_list(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for i, (app, node) in enumerate([("web", "n1"), ("web", "n2"), ("db", "n1")]):
        v1.create_namespaced_pod(ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name=f"sel{i}", labels={"app": app}),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")])))
    names = lambda items: sorted(p.metadata.name for p in items)
    assert names(v1.list_namespaced_pod(ns, label_selector="app=web").items) == ["sel0", "sel1"]
    assert names(v1.list_namespaced_pod(ns, label_selector="app in (db)").items) == ["sel2"]
    assert names(v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items) == ["sel0", "sel2"]
    page = v1.list_namespaced_pod(ns, label_selector="app=web", limit=1)
    assert len(page.items) == 1 and page.metadata._continue
    with pytest.raises(ApiException) as e:
        v1.list_namespaced_config_map(ns, field_selector="spec.nodeName=n1")
    assert e.value.status == 400 and '\\"spec.nodeName\\" is not a known field selector' in e.value.body


def test_watch_with_a_selector_sees_objects_enter_and_leave_it(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def follow() -> None:
        w = watch.Watch()
        for event in w.stream(v1.list_namespaced_config_map, ns, label_selector="watched=yes",
                              resource_version=rv, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                w.stop()
    t = threading.Thread(target=follow)
    t.start()
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="quiet")))
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="moves")))
    cm.metadata.labels = {"watched": "yes"}
    cm = v1.replace_namespaced_config_map("moves", ns, cm)
    cm.metadata.labels = {}
    v1.replace_namespaced_config_map("moves", ns, cm)
    t.join(15)
    assert seen == [("ADDED", "moves"), ("DELETED", "moves")]


def test_presented_credentials_must_be_a_valid_token(served: Serve) -> None:
    url = f"{served.url}/api/v1/namespaces"
    for headers in ({"authorization": "Bearer not-a-token"}, {"authorization": "Basic YWRtaW46YWRtaW4="}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized", headers
    assert httpx.get(url, headers=bearer(served)).status_code == 200
    # no credentials, over TLS: 401 as well
    assert served.url.startswith("https://")
    r = httpx.get(url)
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
    assert httpx.get(f"{served.url}/readyz").status_code == 200  # health stays open
    assert httpx.get(f"{served.url}/version").status_code == 200
    # but a bad token is refused there too, not taken as anonymous, as kube-apiserver's
    # authentication (union.NewFailOnError) refuses it on every path: it answered 200
    for path in ("/readyz", "/livez", "/healthz", "/version", "/metrics"):
        r = httpx.get(f"{served.url}{path}", headers={"authorization": "Bearer not-a-token"})
        assert (r.status_code, r.json()["reason"]) == (401, "Unauthorized"), path
        assert httpx.get(f"{served.url}{path}", headers=bearer(served)).status_code == 200, path
    # another scheme is no token: anonymous, as upstream's bearer authenticator passes it over
    assert httpx.get(f"{served.url}/readyz", headers={"authorization": "Basic YWRtaW46YWRtaW4="}).text == "ok"


def test_without_tls_requests_without_credentials_are_anonymous(tmp_path: Path) -> None:
    # client-go sends credentials only over TLS: under --no-tls kubectl sends none, so none is allowed
    s = start_serve(tmp_path, tls=False)
    try:
        s.wait_ready()
        assert s.url.startswith("http://")
        assert httpx.get(f"{s.url}/api/v1/namespaces").status_code == 200
        assert httpx.get(f"{s.url}/api/v1/namespaces", headers={"authorization": "Bearer nope"}).status_code == 401
        kc = yaml.safe_load(s.kubeconfig.read_text())
        assert "certificate-authority-data" not in kc["clusters"][0]["cluster"]
    finally:
        s.stop()


def test_status_is_written_through_its_subresource_only(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name="st"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        status=client.V1PodStatus(phase="Running")))
    assert pod.status.phase == "Pending"  # set by the server at create
    pod.status.phase = "Running"
    pod.status.pod_ip = "10.0.0.7"
    pod.spec.containers[0].image = "ignored-by-status"
    after = v1.replace_namespaced_pod_status("st", ns, pod)
    assert after.status.phase == "Running" and after.status.pod_ip == "10.0.0.7"
    assert after.spec.containers[0].image == "busybox"  # spec untouched by a status write
    after.status.phase = "Failed"
    again = v1.replace_namespaced_pod("st", ns, after)
    assert again.status.phase == "Running"  # status untouched by an object write
    read = v1.read_namespaced_pod_status("st", ns).status
    assert read.pod_ip == "10.0.0.7"
    assert [i.ip for i in read.pod_ips] == ["10.0.0.7"]  # as upstream's conversion fills it in


def test_generation_counts_spec_changes(api: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api)
    d = apps.read_namespaced_deployment("web", ns) if any(
        x.metadata.name == "web" for x in apps.list_namespaced_deployment(ns).items) else None
    if d is None:
        test_deployment_in_a_named_group(api, ns)
        d = apps.read_namespaced_deployment("web", ns)
    g = d.metadata.generation
    d.metadata.labels = {"touched": "yes"}  # metadata only: same generation
    d = apps.replace_namespaced_deployment("web", ns, d)
    assert d.metadata.generation == g
    d.spec.replicas = 5
    d = apps.replace_namespaced_deployment("web", ns, d)
    assert d.metadata.generation == g + 1


def test_generation_only_for_the_types_whose_upstream_strategy_sets_one(
        served: Serve, api: client.ApiClient, ns: str) -> None:
    """As kube-apiserver's registry strategies: ConfigMaps, Secrets and Services carry no
    ``metadata.generation`` (not at create, not after an update, not when a finalizer
    holds their deletion); Deployments and Ingresses start at 1 and step per spec change,
    and a deletion held by a finalizer steps theirs once more."""
    v1, apps, net = client.CoreV1Api(api), client.AppsV1Api(api), client.NetworkingV1Api(api)
    meta = client.V1ObjectMeta(name="nogen", finalizers=["example.com/hold"])
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta, data={"a": "1"}))
    v1.create_namespaced_secret(ns, client.V1Secret(metadata=meta, string_data={"a": "1"}))
    v1.create_namespaced_service(ns, client.V1Service(metadata=meta, spec=client.V1ServiceSpec(
        ports=[client.V1ServicePort(port=80)], selector={"app": "x"})))
    v1.patch_namespaced_config_map("nogen", ns, {"data": {"a": "2"}})
    v1.patch_namespaced_secret("nogen", ns, {"stringData": {"a": "2"}})
    v1.patch_namespaced_service("nogen", ns, {"spec": {"sessionAffinity": "ClientIP"}})
    for kind in ("configmap", "secret", "service"):  # what `kubectl get -o yaml` shows
        shown = yaml.safe_load(kubectl(served, "get", kind, "nogen", "-n", ns, "-o", "yaml"))
        assert "generation" not in shown["metadata"], kind
    v1.delete_namespaced_config_map("nogen", ns)
    held = v1.read_namespaced_config_map("nogen", ns).metadata
    assert held.deletion_timestamp is not None and held.generation is None
    v1.patch_namespaced_config_map("nogen", ns, {"metadata": {"finalizers": None}})

    labels = {"app": "gen"}
    d = apps.create_namespaced_deployment(ns, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="gen"), spec=client.V1DeploymentSpec(
            replicas=0, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels), spec=client.V1PodSpec(
                containers=[client.V1Container(name="c", image="nginx")])))))
    assert d.metadata.generation == 1
    d = apps.patch_namespaced_deployment("gen", ns, {"metadata": {"labels": {"x": "y"}}})
    assert d.metadata.generation == 1
    assert apps.patch_namespaced_deployment("gen", ns, {"spec": {"replicas": 1}}).metadata.generation == 2
    shown = yaml.safe_load(kubectl(served, "get", "deployment", "gen", "-n", ns, "-o", "yaml"))
    assert shown["metadata"]["generation"] == 2

    backend = client.V1IngressBackend(service=client.V1IngressServiceBackend(
        name="nogen", port=client.V1ServiceBackendPort(number=80)))
    ing = net.create_namespaced_ingress(ns, client.V1Ingress(
        metadata=meta, spec=client.V1IngressSpec(default_backend=backend)))
    assert ing.metadata.generation == 1
    ing = net.patch_namespaced_ingress("nogen", ns, {"spec": {"ingressClassName": "nginx"}})
    assert ing.metadata.generation == 2
    net.delete_namespaced_ingress("nogen", ns)
    held = net.read_namespaced_ingress("nogen", ns).metadata
    assert held.deletion_timestamp is not None and held.generation == 3  # the store's markAsDeleting
    net.patch_namespaced_ingress("nogen", ns, {"metadata": {"finalizers": None}})
    v1.patch_namespaced_secret("nogen", ns, {"metadata": {"finalizers": None}})
    v1.patch_namespaced_service("nogen", ns, {"metadata": {"finalizers": None}})
    v1.delete_namespaced_secret("nogen", ns)
    v1.delete_namespaced_service("nogen", ns)
    apps.delete_namespaced_deployment("gen", ns)


def test_delete_collection_with_a_label_selector(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for name, batch in (("dc1", "old"), ("dc2", "old"), ("dc3", "new")):
        v1.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels={"batch": batch})))
    v1.delete_collection_namespaced_config_map(ns, label_selector="batch=old")
    left = sorted(c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="batch").items)
    assert left == ["dc3"]


def test_finalizers_hold_a_deletion_until_removed(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="fin", finalizers=["example.com/hold"])))
    v1.delete_namespaced_config_map("fin", ns)
    held = v1.read_namespaced_config_map("fin", ns)
    assert held.metadata.deletion_timestamp is not None
    held.metadata.finalizers = []
    v1.replace_namespaced_config_map("fin", ns, held)
    with pytest.raises(ApiException) as e:
        v1.read_namespaced_config_map("fin", ns)
    assert e.value.status == 404


def test_delete_preconditions(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="pre")))
    with pytest.raises(ApiException) as e:
        v1.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="not-the-uid")))
    assert e.value.status == 409
    v1.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=cm.metadata.uid, resource_version=cm.metadata.resource_version)))


def test_deleting_a_namespace_empties_it_then_removes_it(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    created = v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="doomed")))
    assert created.spec.finalizers == ["kubernetes"] and created.status.phase == "Active"
    for i in range(3):
        v1.create_namespaced_config_map("doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}")))
    v1.delete_namespace("doomed")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        names = {n.metadata.name: n for n in v1.list_namespace().items}
        if "doomed" not in names:
            break
        assert names["doomed"].status.phase == "Terminating"
        with pytest.raises(ApiException) as forbidden:
            v1.create_namespaced_config_map("doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late")))
        assert forbidden.value.status in (403, 404)
        time.sleep(0.1)
    else:
        pytest.fail("the namespace was not removed")
    assert v1.list_namespaced_config_map("doomed").items == []


def test_pods_are_defaulted_and_bound_once(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name="dflt"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")])))
    s = pod.spec
    assert (s.restart_policy, s.dns_policy, s.scheduler_name, s.termination_grace_period_seconds,
            s.service_account_name) == ("Always", "ClusterFirst", "default-scheduler", 30, "default")
    assert {t.key for t in s.tolerations} >= {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert s.containers[0].image_pull_policy == "Always"  # no tag: latest
    # kube-apiserver answers a binding with a Status, which the client cannot read as a V1Binding
    r = v1.create_namespaced_pod_binding("dflt", ns, client.V1Binding(
        metadata=client.V1ObjectMeta(name="dflt"), target=client.V1ObjectReference(kind="Node", name="node-1")),
        _preload_content=False)
    assert r.status == 201  # type: ignore[attr-defined]
    r.read()  # type: ignore[attr-defined]
    r.release_conn()  # type: ignore[attr-defined]  # else its socket is left to the collector (a ResourceWarning)
    bound = v1.read_namespaced_pod("dflt", ns)
    assert bound.spec.node_name == "node-1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_binding("dflt", ns, client.V1Binding(
            metadata=client.V1ObjectMeta(name="dflt"), target=client.V1ObjectReference(kind="Node", name="n2")))
    assert e.value.status == 409


def test_names_are_validated_and_namespaces_get_a_default_service_account(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    with pytest.raises(ApiException) as e:
        v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="Not_Valid")))
    assert e.value.status == 422 and '"reason":"Invalid"' in e.value.body
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="with-sa")))
    assert v1.read_namespaced_service_account("default", "with-sa").metadata.name == "default"
    svc = v1.create_namespaced_service("with-sa", client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    assert svc.spec.cluster_ip.startswith("10.") and svc.spec.type == "ClusterIP"
    assert svc.spec.ports[0].protocol == "TCP" and svc.spec.ports[0].target_port == 80


def test_service_account_admission_mounts_the_token_and_refuses_a_missing_account(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="sa-admission")))
    # at once: the namespace's default ServiceAccount is written before its create answers
    pod = v1.create_namespaced_pod("sa-admission", client.V1Pod(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")])))
    assert pod.spec.service_account_name == pod.spec.service_account == "default"
    [volume] = pod.spec.volumes
    [mount] = pod.spec.containers[0].volume_mounts
    assert volume.name.startswith("kube-api-access-") and len(volume.name) == len("kube-api-access-") + 5
    assert (mount.name, mount.mount_path, mount.read_only) == (
        volume.name, "/var/run/secrets/kubernetes.io/serviceaccount", True)
    token, ca, namespace = volume.projected.sources
    assert volume.projected.default_mode == 420
    assert (token.service_account_token.path, token.service_account_token.expiration_seconds) == ("token", 3607)
    assert ca.config_map.name == "kube-root-ca.crt"
    assert [(i.key, i.path) for i in ca.config_map.items] == [("ca.crt", "ca.crt")]
    assert namespace.downward_api.items[0].field_ref.field_path == "metadata.namespace"
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod("sa-admission", client.V1Pod(
            metadata=client.V1ObjectMeta(name="robot"),
            spec=client.V1PodSpec(service_account_name="robot", automount_service_account_token=False,
                                  containers=[client.V1Container(name="c", image="nginx")])))
    status = orjson.loads(e.value.body)
    assert e.value.status == 403 and status["reason"] == "Forbidden"
    assert status["message"] == ('pods "robot" is forbidden: error looking up service account '
                                 'sa-admission/robot: serviceaccount "robot" not found')


def watch_lines(served: Serve, path: str, params: dict[str, str], n: int) -> list[dict]:
    """The first ``n`` events of a raw watch."""
    out: list[dict] = []
    with httpx.stream("GET", served.url + path, params=params, headers=bearer(served), timeout=15) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line:
                out.append(orjson.loads(line))
            if len(out) >= n:
                break
    return out


def test_watch_list_sends_initial_events_then_the_end_bookmark(served: Serve, api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="wl")))
    for i in range(3):
        v1.create_namespaced_config_map("wl", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}")))
    events = watch_lines(served, "/api/v1/namespaces/wl/configmaps",
                         {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                          "allowWatchBookmarks": "true", "timeoutSeconds": "5"}, 4)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "ADDED", "BOOKMARK"]
    end = events[3]["object"]["metadata"]
    assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["resourceVersion"]) >= max(int(e["object"]["metadata"]["resourceVersion"]) for e in events[:3])
    r = httpx.get(served.url + "/api/v1/namespaces/wl/configmaps", headers=bearer(served),
                  params={"watch": "true", "sendInitialEvents": "true"})
    assert r.status_code == 422  # upstream requires resourceVersionMatch=NotOlderThan


def test_boolean_parameters_are_read_as_upstream_reads_them(served: Serve, api: client.ApiClient) -> None:
    """``watch=True`` (what Python's ``requests`` sends for ``params={"watch": True}``) is a
    watch; only ``false`` and ``0`` are false, in any case."""
    v1 = client.CoreV1Api(api)
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="flags")))
    v1.create_namespaced_config_map("flags", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c")))
    path = "/api/v1/namespaces/flags/configmaps"
    events = watch_lines(served, path, {"watch": "True", "sendInitialEvents": "True",
                                        "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "True",
                                        "fieldSelector": "metadata.name=c", "timeoutSeconds": "5"}, 2)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    for false in ("False", "0"):
        r = httpx.get(served.url + path, params={"watch": false}, headers=bearer(served))
        assert r.status_code == 200 and r.json()["kind"] == "ConfigMapList"


def test_periodic_bookmarks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTROLPLANE_WATCH_BOOKMARK_SECONDS", "0.3")
    s = start_serve(tmp_path)
    s.wait_ready()
    try:
        # (the components' start-up writes done: their service accounts, the last one Karpenter's; a
        # bookmark carries the newest revision, which a write of any resource moves)
        deadline = time.monotonic() + 10
        while "karpenter" not in {a["metadata"]["name"] for a in httpx.get(
                s.url + "/api/v1/namespaces/kube-system/serviceaccounts", headers=bearer(s)).json()["items"]}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rv = httpx.get(s.url + "/api/v1/namespaces/default/configmaps", headers=bearer(s)).json()["metadata"][
            "resourceVersion"]
        events = watch_lines(s, "/api/v1/namespaces/default/configmaps",
                             {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true",
                              "timeoutSeconds": "5"}, 2)
        assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
        assert events[0]["object"]["metadata"]["resourceVersion"] == rv
    finally:
        s.stop()


def test_a_bookmark_comes_two_seconds_before_the_watch_ends(served: Serve, ns: str) -> None:
    """As upstream's cacheWatcher, an idle watch gets a bookmark shortly before its
    ``timeoutSeconds`` end it (bookmarks are otherwise a minute apart): the client
    resumes from a fresh revision, and is handed seconds of backlog, not a minute's."""
    base = f"{served.url}/api/v1/namespaces/{ns}/configmaps"
    rv = httpx.get(base, headers=bearer(served)).json()["metadata"]["resourceVersion"]
    start = time.monotonic()
    got: list[tuple[float, dict]] = []
    with httpx.stream("GET", base, params={"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true",
                                           "timeoutSeconds": "4"}, headers=bearer(served), timeout=15) as r:
        got = [(time.monotonic() - start, orjson.loads(line)) for line in r.iter_lines() if line]
    ended = time.monotonic() - start
    assert [e["type"] for _, e in got] == ["BOOKMARK"]
    at, bookmark = got[0]
    assert 1.0 <= at < 3.5 and 3.5 <= ended < 8
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_json_patch(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="jp"), data={"a": "1"}))
    # a list body: the client sends application/json-patch+json
    got = v1.patch_namespaced_config_map("jp", ns, [{"op": "add", "path": "/data/b", "value": "2"},
                                                   {"op": "remove", "path": "/data/a"}])
    assert got.data == {"b": "2"}
    with pytest.raises(ApiException) as e:
        v1.patch_namespaced_config_map("jp", ns, [{"op": "test", "path": "/data/b", "value": "nope"}])
    assert e.value.status == 422


def test_rbac_and_the_scheduling_and_dra_groups_are_served(served: Serve, api: client.ApiClient, ns: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(ns, client.V1Role(
        metadata=client.V1ObjectMeta(name="reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])]))
    rbac.create_cluster_role(client.V1ClusterRole(metadata=client.V1ObjectMeta(name="e2e-admin")))
    assert rbac.read_namespaced_role("reader", ns).rules[0].resources == ["pods"]
    assert "e2e-admin" in {r.metadata.name for r in rbac.list_cluster_role().items}
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "train"},
                "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 8}}}]}}
    r = httpx.post(f"{served.url}/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/workloads", json=workload,
                   headers=bearer(served))
    assert r.status_code == 201, r.text
    r = httpx.get(f"{served.url}/apis/resource.k8s.io/v1", headers=bearer(served))
    assert {x["name"] for x in r.json()["resources"]} >= {"deviceclasses", "resourceslices", "resourceclaims"}


def test_workloads_read_back_through_the_typed_client(api: client.ApiClient, ns: str) -> None:
    # the client checks required fields: a StatefulSet's status.replicas, a Secret's type
    apps = client.AppsV1Api(api)
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "db"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="postgres:17")]))
    selector = client.V1LabelSelector(match_labels={"app": "db"})
    apps.create_namespaced_stateful_set(ns, client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="db"),
        spec=client.V1StatefulSetSpec(service_name="db", selector=selector, template=template)))
    apps.create_namespaced_replica_set(ns, client.V1ReplicaSet(
        metadata=client.V1ObjectMeta(name="rs"), spec=client.V1ReplicaSetSpec(selector=selector, template=template)))
    apps.create_namespaced_daemon_set(ns, client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name="ds"), spec=client.V1DaemonSetSpec(selector=selector, template=template)))
    sts = apps.read_namespaced_stateful_set("db", ns)
    assert sts.status.replicas == 0 and sts.spec.replicas == 1
    assert [r.metadata.name for r in apps.list_namespaced_replica_set(ns).items] == ["rs"]
    assert apps.list_namespaced_daemon_set(ns).items[0].status.number_ready == 0
    secret = client.CoreV1Api(api).create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name="creds"), string_data={"user": "admin"}))
    assert secret.type == "Opaque" and secret.data == {"user": "YWRtaW4="} and secret.string_data is None


def test_legacy_bindings_endpoint_binds_and_clears_the_nomination(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name="legacy-bind"),
        spec=client.V1PodSpec(scheduler_name="nobody", containers=[client.V1Container(name="c", image="x")])))
    v1.patch_namespaced_pod_status("legacy-bind", ns, {"status": {"nominatedNodeName": "n1"}})
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="legacy-bind"),
                            target=client.V1ObjectReference(api_version="v1", kind="Node", name="n1"))
    # what Python schedulers call; the answer is a Status (the client cannot read it as a Binding)
    r: Any = v1.create_namespaced_binding(ns, body, _preload_content=False)  # the raw urllib3 response
    assert r.status == 201
    pod = v1.read_namespaced_pod("legacy-bind", ns)
    assert pod.spec.node_name == "n1" and pod.status.nominated_node_name is None
    with pytest.raises(ApiException) as again:
        v1.create_namespaced_binding(ns, body, _preload_content=False)
    assert again.value.status == 409


def test_an_immediate_delete_answers_a_status_unless_the_type_returns_the_object(api: client.ApiClient,
                                                                                ns: str) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="short-lived")))
    status: Any = v1.delete_namespaced_config_map("short-lived", ns)  # this client reads it as a plain object
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"] == {"name": "short-lived", "kind": "configmaps", "uid": cm.metadata.uid}
    v1.create_namespaced_service(ns, client.V1Service(metadata=client.V1ObjectMeta(name="gone-svc"),
                                                      spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    raw: Any = v1.delete_namespaced_service("gone-svc", ns, _preload_content=False)
    assert orjson.loads(raw.data)["kind"] == "Service"  # services return the deleted object, as upstream


def test_metadata_only_get_list_and_watch(served: Serve, ns: str) -> None:
    # what client-go's metadata client (metadata informers, the garbage collector) asks for
    h = {**bearer(served), "accept": "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;"
         "g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"}
    base = f"{served.url}/api/v1/namespaces/{ns}/configmaps"
    assert httpx.post(base, headers=bearer(served), json={"metadata": {"name": "meta-only", "labels": {"a": "b"}},
                                                          "data": {"k": "v"}}).is_success
    listed = httpx.get(base, headers=h).json()
    assert listed["kind"] == "PartialObjectMetadataList" and listed["apiVersion"] == "meta.k8s.io/v1"
    item = next(i for i in listed["items"] if i["metadata"]["name"] == "meta-only")
    assert item["kind"] == "PartialObjectMetadata" and item["metadata"]["labels"] == {"a": "b"} and "data" not in item
    one = httpx.get(f"{base}/meta-only", headers={**h, "accept": h["accept"].replace("MetadataList", "Metadata")})
    assert one.json()["kind"] == "PartialObjectMetadata" and "data" not in one.json()
    with httpx.stream("GET", base, params={"watch": "1", "timeoutSeconds": "1", "allowWatchBookmarks": "true",
                                           "fieldSelector": "metadata.name=meta-only"}, headers=h,
                      timeout=10) as r:
        events = [orjson.loads(line) for line in r.iter_lines() if line]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["kind"] == "PartialObjectMetadata"
    assert all(e["object"]["kind"] == "PartialObjectMetadata" for e in events)


def test_self_subject_reviews_through_the_typed_client(api: client.ApiClient) -> None:
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
            verb="delete", resource="nodes"))))
    assert review.status.allowed is True  # AlwaysAllow
    who = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
    assert who.status.user_info.username and "system:authenticated" in who.status.user_info.groups


def test_times_the_client_sends_are_stored_as_go_writes_them(served: Serve, api: client.ApiClient, ns: str) -> None:
    """The client sends a datetime as ``isoformat()`` gives it. A Lease's MicroTimes must
    have six digits of a second, as Go parses them (a whole second is upstream's 400),
    and every Time is stored in UTC, as Go writes it back: kubectl and informers read it."""
    leases = client.CoordinationV1Api(api)
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    renewed = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=plus2)
    lease = leases.create_namespaced_lease(ns, client.V1Lease(
        metadata=client.V1ObjectMeta(name="holder"), spec=client.V1LeaseSpec(holder_identity="me", renew_time=renewed)))
    assert lease.spec.renew_time == renewed
    spec = orjson.loads(kubectl(served, "get", "lease", "holder", "-n", ns, "-o", "jsonpath={.spec}"))
    assert spec["renewTime"] == "2026-01-01T10:00:00.123456Z"
    with pytest.raises(ApiException) as e:
        leases.patch_namespaced_lease("holder", ns, {"spec": {"renewTime": renewed.replace(microsecond=0)}})
    assert e.value.status == 422 and 'cannot parse \\"+02:00\\" as \\".000000\\"' in e.value.body
    pods = client.CoreV1Api(api)
    pods.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="timed"), spec=client.V1PodSpec(
        node_name="nowhere", containers=[client.V1Container(name="c", image="x")])))
    started = datetime.datetime(2026, 1, 1, 12, 0, 0, 999999, tzinfo=plus2)
    pod = pods.patch_namespaced_pod_status("timed", ns, {"status": {"startTime": started}})
    assert pod.status.start_time == started.replace(microsecond=0)
    status = orjson.loads(kubectl(served, "get", "pod", "timed", "-n", ns, "-o", "jsonpath={.status}"))
    assert status["startTime"] == "2026-01-01T10:00:00Z"


def test_resource_slices_are_selected_by_node_and_driver(api: client.ApiClient) -> None:
    """As a DRA driver lists its slices, and the kubelet deletes a driver's slices of its node:
    by the field selectors ``spec.nodeName`` and ``spec.driver`` (upstream's selectable fields)."""
    dra = client.ResourceV1Api(api)
    for node, driver in (("n1", "gpu.example.com"), ("n2", "gpu.example.com"), ("n1", "nic.example.com")):
        dra.create_resource_slice(client.V1ResourceSlice(
            metadata=client.V1ObjectMeta(name=f"{node}-{driver.split('.')[0]}"),
            spec=client.V1ResourceSliceSpec(driver=driver, node_name=node, devices=[client.V1Device(name="d0")],
                                            pool=client.V1ResourcePool(name=node, generation=1,
                                                                       resource_slice_count=1))))

    def names(selector: str) -> list[str]:
        return sorted(s.metadata.name for s in dra.list_resource_slice(field_selector=selector).items)

    assert names("spec.driver=gpu.example.com") == ["n1-gpu", "n2-gpu"]
    assert names("spec.nodeName=n1,spec.driver=nic.example.com") == ["n1-nic"]
    assert names("spec.nodeName!=n1") == ["n2-gpu"]
    dra.delete_collection_resource_slice(field_selector="spec.nodeName=n1,spec.driver=gpu.example.com")
    assert names("spec.driver=gpu.example.com") == ["n2-gpu"]
    with pytest.raises(ApiException) as e:
        dra.list_resource_slice(field_selector="spec.pool.name=n1")
    assert e.value.status == 400 and "field label not supported: spec.pool.name" in e.value.body


def test_the_default_cluster_roles_exist_without_rbac_mode(served: Serve, api: client.ApiClient) -> None:
    """kube-apiserver bootstraps its RBAC policy whatever its authorization mode: charts and
    tools bind to ``cluster-admin``, ``admin``, ``edit`` and ``view`` and read them."""
    rbac = client.RbacAuthorizationV1Api(api)
    roles = {r.metadata.name: r for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "admin", "edit", "view"} <= set(roles)
    assert roles["view"].aggregation_rule.cluster_role_selectors[0].match_labels == {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"}
    binding = rbac.read_cluster_role_binding("cluster-admin")
    assert binding.role_ref.name == "cluster-admin" and binding.subjects[0].name == "system:masters"
    deadline = time.monotonic() + 30
    while not rbac.read_cluster_role("view").rules and time.monotonic() < deadline:
        time.sleep(0.1)  # the aggregation controller fills the rules in
    out = kubectl(served, "describe", "clusterrole", "view")
    assert "pods" in out and "[get list watch]" in out


def test_the_csi_objects_through_the_typed_storage_client(api: client.ApiClient, ns: str) -> None:
    """What CSI sidecars call (external-attacher, external-provisioner's capacity tracking):
    each object reads back through the typed models, which check their required fields."""
    storage = client.StorageV1Api(api)
    driver = storage.create_csi_driver(client.V1CSIDriver(metadata=client.V1ObjectMeta(name="csi.example.com"),
                                                           spec=client.V1CSIDriverSpec()))
    assert (driver.spec.attach_required, driver.spec.fs_group_policy) == (True, "ReadWriteOnceWithFSType")
    storage.create_csi_node(client.V1CSINode(metadata=client.V1ObjectMeta(name="node-1"), spec=client.V1CSINodeSpec(
        drivers=[client.V1CSINodeDriver(name="csi.example.com", node_id="i-1", allocatable=client.V1VolumeNodeResources(
            count=16))])))
    assert storage.read_csi_node("node-1").spec.drivers[0].allocatable.count == 16
    storage.create_volume_attachment(client.V1VolumeAttachment(
        metadata=client.V1ObjectMeta(name="va-1"), spec=client.V1VolumeAttachmentSpec(
            attacher="csi.example.com", node_name="node-1", source=client.V1VolumeAttachmentSource(
                persistent_volume_name="pv-1"))))
    assert storage.read_volume_attachment_status("va-1").status.attached is False
    attached = storage.patch_volume_attachment_status("va-1", {"status": {
        "attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdf"}}})
    assert attached.status.attached is True and attached.status.attachment_metadata == {"devicePath": "/dev/xvdf"}
    storage.create_namespaced_csi_storage_capacity(ns, client.V1CSIStorageCapacity(
        metadata=client.V1ObjectMeta(name="cap-1"), storage_class_name="fast", capacity="100Gi"))
    assert [c.capacity for c in storage.list_csi_storage_capacity_for_all_namespaces().items] == ["100Gi"]
    storage.create_volume_attributes_class(client.V1VolumeAttributesClass(
        metadata=client.V1ObjectMeta(name="gold"), driver_name="csi.example.com", parameters={"iops": "3000"}))
    with pytest.raises(ApiException) as e:
        storage.patch_volume_attributes_class("gold", {"parameters": {"iops": "6000"}})
    assert e.value.status == 422 and "parameters: Forbidden: updates to parameters are forbidden." in e.value.body
