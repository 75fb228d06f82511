"""Details a client sweep found answered otherwise than kube-apiserver answers them: a dry-run
create has no resourceVersion (``DryRunnableStorage.Create``); ``bindings`` and ``componentstatuses``
are served and discovered; a metadata-only answer of the wrong form (one object asked of a list,
a list of one object) is a 406 (``asPartialObjectMetadata``); Event field selectors as upstream's
``ToSelectableFields`` and events.k8s.io/v1's field label conversion."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import httpx
import orjson
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec: {containers: [{name: c, image: IMAGE}]}
"""


def _deployment(name: str, image: str = "nginx") -> str:
    return DEPLOYMENT.replace("NAME", name).replace("IMAGE", image)


def _kubectl_all(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)


# -- dry run -----------------------------------------------------------------------------------
def test_a_dry_run_create_has_no_resource_version(served: Serve) -> None:
    made = orjson.loads(kubectl(served, "create", "--dry-run=server", "-o", "json", "-f", "-",
                                stdin=_deployment("dry-new")))
    meta = made["metadata"]
    assert "resourceVersion" not in meta  # upstream copies the object as prepared: no version yet
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    h = bearer(served)
    base = f"{served.url}/apis/apps/v1/namespaces/default/deployments"
    assert httpx.get(f"{base}/dry-new", headers=h).status_code == 404
    # the raw answer: managedFields as the create would record them, still no resourceVersion
    body = orjson.loads(kubectl(served, "create", "--dry-run=client", "-o", "json", "-f", "-",
                                stdin=_deployment("dry-raw")))
    r = httpx.post(base, params={"dryRun": "All", "fieldManager": "tester"}, headers=h, json=body)
    assert r.status_code == 201
    meta = r.json()["metadata"]
    assert "resourceVersion" not in meta and [m["manager"] for m in meta["managedFields"]] == ["tester"]
    # a server-side apply that would create: the same
    r = httpx.patch(f"{base}/dry-ssa", params={"dryRun": "All", "fieldManager": "tester"},
                    headers={**h, "content-type": "application/apply-patch+yaml"}, content=_deployment("dry-ssa"))
    assert r.status_code == 201 and "resourceVersion" not in r.json()["metadata"] and r.json()["metadata"]["uid"]
    assert httpx.get(f"{base}/dry-ssa", headers=h).status_code == 404
    # kubectl diff of an object that does not exist yet shows no resourceVersion either
    diff = _kubectl_all(served, "diff", "-f", "-", stdin=_deployment("dry-diff"))
    assert diff.returncode == 1 and "+  name: dry-diff" in diff.stdout and "resourceVersion" not in diff.stdout


def test_a_dry_run_update_patch_and_apply_answer_the_current_resource_version(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=_deployment("dry-old"))
    h = bearer(served)
    url = f"{served.url}/apis/apps/v1/namespaces/default/deployments/dry-old"
    live = httpx.get(url, headers=h).json()
    rv, uid = live["metadata"]["resourceVersion"], live["metadata"]["uid"]
    patched = orjson.loads(kubectl(served, "patch", "deployment", "dry-old", "--dry-run=server", "-o", "json",
                                   "-p", '{"spec":{"replicas":3}}'))
    assert patched["metadata"]["resourceVersion"] == rv and patched["metadata"]["generation"] == 2
    assert patched["metadata"]["uid"] == uid and patched["spec"]["replicas"] == 3
    live["spec"]["replicas"] = 4
    r = httpx.put(url, params={"dryRun": "All"}, headers=h, json=live)
    assert r.status_code == 200 and r.json()["metadata"]["resourceVersion"] == rv
    r = httpx.patch(url, params={"dryRun": "All", "fieldManager": "tester", "force": "true"},
                    headers={**h, "content-type": "application/apply-patch+yaml"},
                    content=_deployment("dry-old", "nginx:2"))
    assert r.status_code == 200 and r.json()["metadata"]["resourceVersion"] == rv
    assert "tester" in [m["manager"] for m in r.json()["metadata"]["managedFields"]]
    now = httpx.get(url, headers=h).json()
    assert now["metadata"]["resourceVersion"] == rv and now["metadata"]["generation"] == 1
    diff = _kubectl_all(served, "diff", "-f", "-", stdin=_deployment("dry-old", "nginx:2"))
    assert diff.returncode == 1 and "-  generation: 1" in diff.stdout and "+  generation: 2" in diff.stdout


# -- bindings and componentstatuses ------------------------------------------------------------
def test_bindings_and_componentstatuses_are_discovered(served: Serve) -> None:
    rows = {line.split()[0]: line.split() for line in kubectl(served, "api-resources", "-o", "wide",
                                                              "--no-headers").splitlines()}
    assert rows["bindings"][1:] == ["v1", "true", "Binding", "create"]
    assert rows["componentstatuses"][1:] == ["cs", "v1", "false", "ComponentStatus", "get,list"]
    listed = httpx.get(f"{served.url}/api/v1", headers=bearer(served)).json()["resources"]
    found = {r["name"]: r for r in listed}
    assert found["bindings"]["namespaced"] is True and found["bindings"]["verbs"] == ["create"]
    assert found["componentstatuses"]["shortNames"] == ["cs"]


def test_kubectl_get_componentstatuses(served: Serve) -> None:
    r = _kubectl_all(served, "get", "componentstatuses")
    assert r.returncode == 0 and "Warning: v1 ComponentStatus is deprecated in v1.19+" in r.stderr
    lines = [line.split() for line in r.stdout.splitlines()]
    assert lines[0] == ["NAME", "STATUS", "MESSAGE", "ERROR"]
    assert sorted(line[:3] for line in lines[1:]) == [["controller-manager", "Healthy", "ok"],
                                                       ["etcd-0", "Healthy", "ok"], ["scheduler", "Healthy", "ok"]]
    one = orjson.loads(kubectl(served, "get", "cs", "etcd-0", "-o", "json"))
    assert (one["kind"], one["metadata"]["name"]) == ("ComponentStatus", "etcd-0")
    assert one["conditions"] == [{"type": "Healthy", "status": "True", "message": "ok"}]
    assert kubectl(served, "get", "cs", "--field-selector", "metadata.name=scheduler", "-o", "name").split() == \
        ["componentstatus/scheduler"]
    missing = _kubectl_all(served, "get", "cs", "nope")
    assert missing.returncode == 1 and 'componentstatuses "nope" not found' in missing.stderr
    h = bearer(served)
    r2 = httpx.get(f"{served.url}/api/v1/componentstatuses", params={"watch": "1"}, headers=h)
    assert r2.status_code == 405 and r2.json()["reason"] == "MethodNotAllowed"
    assert httpx.delete(f"{served.url}/api/v1/componentstatuses/etcd-0", headers=h).status_code == 405
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        names = sorted(c.metadata.name for c in client.CoreV1Api(api).list_component_status().items)
    finally:
        api.close()
    assert names == ["controller-manager", "etcd-0", "scheduler"]


def test_a_binding_posted_to_bindings_binds_its_pod(served: Serve) -> None:
    h = bearer(served)
    pods = f"{served.url}/api/v1/namespaces/default/pods"
    for name in ("bind-a", "bind-b"):
        assert httpx.post(pods, headers=h, json={"metadata": {"name": name},
                                                 "spec": {"containers": [{"name": "c", "image": "i"}]}}).is_success
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bind-a"},
               "target": {"kind": "Node", "name": "node-x"}}
    bindings = f"{served.url}/api/v1/namespaces/default/bindings"
    r = httpx.post(bindings, params={"dryRun": "All"}, headers=h, json=binding)
    assert r.status_code == 201 and r.json()["status"] == "Success"
    assert "nodeName" not in httpx.get(f"{pods}/bind-a", headers=h).json()["spec"]  # a dry run binds nothing
    # kubectl finds the kind in discovery now
    out = kubectl(served, "create", "-f", "-", stdin="apiVersion: v1\nkind: Binding\nmetadata: {name: bind-a}\n"
                                                     "target: {name: node-x}\n")
    assert "created" in out
    assert httpx.get(f"{pods}/bind-a", headers=h).json()["spec"]["nodeName"] == "node-x"
    again = httpx.post(bindings, headers=h, json=binding)
    assert again.status_code == 409 and "already assigned" in again.json()["message"]
    # the typed client (its V1Binding model cannot read the Status upstream answers either: raw)
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        raw: Any = client.CoreV1Api(api).create_namespaced_binding(
            "default", client.V1Binding(metadata=client.V1ObjectMeta(name="bind-b"),
                                        target=client.V1ObjectReference(kind="Node", name="node-y")),
            _preload_content=False)
    finally:
        api.close()
    assert raw.status == 201 and orjson.loads(raw.data)["status"] == "Success"
    assert httpx.get(f"{pods}/bind-b", headers=h).json()["spec"]["nodeName"] == "node-y"
    # only a create, and only in a namespace
    assert httpx.get(bindings, headers=h).status_code == 405
    assert httpx.post(f"{served.url}/api/v1/bindings", headers=h, json=binding).status_code == 404
    assert httpx.get(f"{bindings}/bind-a", headers=h).status_code == 404


# -- metadata-only answers ---------------------------------------------------------------------
def _meta_accept(kind: str) -> dict[str, str]:
    return {"accept": f"application/json;as={kind};g=meta.k8s.io;v=v1"}


def test_a_metadata_only_answer_of_the_wrong_form_is_a_406(served: Serve) -> None:
    h = bearer(served)
    cms = f"{served.url}/api/v1/namespaces/default/configmaps"
    assert httpx.post(cms, headers=h, json={"metadata": {"name": "meta-form"}}).is_success
    r = httpx.get(cms, headers={**h, **_meta_accept("PartialObjectMetadata")})
    assert r.status_code == 406 and r.json()["reason"] == "NotAcceptable"
    assert r.json()["message"] == ("you requested PartialObjectMetadata, but the requested object is a list "
                                   "(*core.ConfigMapList)")
    r = httpx.get(f"{cms}/meta-form", headers={**h, **_meta_accept("PartialObjectMetadataList")})
    assert r.status_code == 406 and r.json()["message"] == (
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)")
    r = httpx.get(f"{served.url}/apis/apps/v1/deployments", headers={**h, **_meta_accept("PartialObjectMetadata")})
    assert r.status_code == 406 and r.json()["message"].endswith("(*apps.DeploymentList)")
    # the forms that fit
    listed = httpx.get(cms, headers={**h, **_meta_accept("PartialObjectMetadataList")})
    assert listed.status_code == 200 and listed.json()["kind"] == "PartialObjectMetadataList"
    one = httpx.get(f"{cms}/meta-form", headers={**h, **_meta_accept("PartialObjectMetadata")})
    assert one.status_code == 200 and one.json()["kind"] == "PartialObjectMetadata"
    # a missing object is still a 404 (the object is read before it is transformed)
    r = httpx.get(f"{cms}/nope", headers={**h, **_meta_accept("PartialObjectMetadataList")})
    assert r.status_code == 404


# -- events ------------------------------------------------------------------------------------
def test_event_field_selectors_as_upstream(served: Serve) -> None:
    h = bearer(served)
    pods = f"{served.url}/api/v1/namespaces/default/pods"
    pod = httpx.post(pods, headers=h, json={"metadata": {"name": "ev-pod"},
                                            "spec": {"containers": [{"name": "c", "image": "i"}]}}).json()
    uid = pod["metadata"]["uid"]
    regarding = {"kind": "Pod", "name": "ev-pod", "namespace": "default", "uid": uid, "apiVersion": "v1"}
    core = f"{served.url}/api/v1/namespaces/default/events"
    assert httpx.post(core, headers=h, json={
        "metadata": {"name": "ev-pulled"}, "involvedObject": regarding, "reason": "Pulled", "type": "Normal",
        "message": "pulled", "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1}).is_success
    new = f"{served.url}/apis/events.k8s.io/v1/namespaces/default/events"
    assert httpx.post(new, headers=h, json={
        "metadata": {"name": "ev-failed"}, "regarding": regarding, "reason": "Failed", "type": "Warning",
        "note": "boom", "action": "Pulling", "eventTime": "2026-01-01T00:00:01.000000Z",
        "reportingController": "my-controller", "reportingInstance": "my-controller-1"}).is_success

    def names(url: str, selector: str) -> list[str]:
        r = httpx.get(url, params={"fieldSelector": selector}, headers=h)
        assert r.status_code == 200, r.text
        return sorted(i["metadata"]["name"] for i in r.json()["items"] if i["metadata"]["name"].startswith("ev-"))

    both = ["ev-failed", "ev-pulled"]
    assert names(core, "involvedObject.kind=Pod,involvedObject.name=ev-pod") == both
    assert names(core, f"involvedObject.uid={uid}") == both
    assert names(core, "involvedObject.namespace=default,reason=Failed") == ["ev-failed"]
    assert names(core, "type!=Normal") == ["ev-failed"]
    assert names(core, "source=kubelet") == ["ev-pulled"]
    # no source.component: the reporting controller is its source (upstream's ToSelectableFields)
    assert names(core, "source=my-controller") == ["ev-failed"]
    assert names(core, "reportingComponent=my-controller") == ["ev-failed"]
    assert names(new, "regarding.kind=Pod,regarding.name=ev-pod") == both
    assert names(new, f"regarding.uid={uid},type=Warning") == ["ev-failed"]
    assert names(new, "reportingController=my-controller") == ["ev-failed"]
    assert names(new, "source=kubelet") == ["ev-pulled"]
    # events.k8s.io/v1 knows only its own labels (pkg/apis/events/v1/conversion.go)
    for label in ("involvedObject.name", "note", "deprecatedSource", "reportingComponent"):
        r = httpx.get(new, params={"fieldSelector": f"{label}=x"}, headers=h)
        assert r.status_code == 400 and r.json()["message"] == f"field label not supported: {label}"
    r = httpx.get(core, params={"fieldSelector": "regarding.name=x"}, headers=h)
    assert r.status_code == 400 and r.json()["message"] == "field label not supported: regarding.name"
    # a watch filters by the same fields
    with httpx.stream("GET", new, params={"watch": "1", "timeoutSeconds": "1",
                                          "fieldSelector": "regarding.name=ev-pod,type=Warning"},
                      headers=h, timeout=10) as w:
        events = [orjson.loads(line) for line in w.iter_lines() if line]
    assert [e["object"]["metadata"]["name"] for e in events] == ["ev-failed"]

    out = kubectl(served, "events", "--for", "pod/ev-pod")
    assert "Pulled" in out and "Failed" in out and "Pod/ev-pod" in out
    out = kubectl(served, "events", "--for", "pod/ev-pod", "--types", "Warning")
    assert "Failed" in out and "Pulled" not in out
    out = kubectl(served, "get", "events", "--field-selector", "involvedObject.name=ev-pod,type=Normal")
    assert "Pulled" in out and "Failed" not in out


def test_v1_endpoints_carry_upstreams_deprecation_warning(served: Serve) -> None:
    """Every request for v1 Endpoints warns, as kube-apiserver 1.33+ does (KEP-4974); their
    replacement, EndpointSlices, does not."""
    warning = "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
    created = _kubectl_all(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: Endpoints\nmetadata: {name: legacy}\n"
        "subsets: [{addresses: [{ip: 10.9.0.1}], ports: [{port: 80}]}]\n"))
    listed = _kubectl_all(served, "get", "endpoints")
    one = _kubectl_all(served, "get", "endpoints", "legacy", "-o", "name")
    for r in (created, listed, one):
        assert r.returncode == 0 and warning in r.stderr, r
    assert one.stdout.split() == ["endpoints/legacy"]
    slices = _kubectl_all(served, "get", "endpointslices")
    assert slices.returncode == 0 and "Warning" not in slices.stderr, slices
    kubectl(served, "delete", "endpoints", "legacy")


def test_endpoints_addresses_in_legacy_forms_are_refused_and_kubectl_says_why(served: Serve) -> None:
    """1.37's StrictIPCIDRValidation is on: an Endpoints address with leading zeros or IPv4-mapped
    is refused, in kube-apiserver's words; a non-canonical IPv6 one is stored as written, and
    kubectl prints the warning that says which form is canonical."""
    refused = _kubectl_all(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: Endpoints\nmetadata: {name: odd-ips}\n"
        "subsets: [{addresses: [{ip: 010.9.0.1}, {ip: '::ffff:10.9.0.2'}], ports: [{port: 80}]}]\n"))
    assert refused.returncode != 0, refused
    assert 'The Endpoints "odd-ips" is invalid: \n* subsets[0].addresses[0].ip: Invalid value: "010.9.0.1": ' \
           "must not have leading 0s" in refused.stderr, refused.stderr
    assert '* subsets[0].addresses[1].ip: Invalid value: "::ffff:10.9.0.2": must not be an IPv4-mapped IPv6 ' \
           "address" in refused.stderr, refused.stderr
    created = _kubectl_all(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: Endpoints\nmetadata: {name: odd-ips}\n"
        "subsets: [{addresses: [{ip: '2001:DB8:0::1'}], ports: [{port: 80}]}]\n"))
    assert created.returncode == 0, created
    assert 'Warning: subsets[0].addresses[0].ip: IPv6 address "2001:DB8:0::1" should be in RFC 5952 canonical ' \
           'format ("2001:db8::1")' in created.stderr, created.stderr
    stored = orjson.loads(kubectl(served, "get", "endpoints", "odd-ips", "-o", "json"))
    assert [a["ip"] for a in stored["subsets"][0]["addresses"]] == ["2001:DB8:0::1"]
    kubectl(served, "delete", "endpoints", "odd-ips")


def test_the_legacy_watch_paths_over_kubectl_and_the_official_client(served: Serve) -> None:
    """``/api/v1/watch/...`` (deprecated, still served by kube-apiserver): ``kubectl get --raw``
    and the official client's ``call_api`` see the one object such a path names."""
    kubectl(served, "create", "namespace", "legacy-watch")
    for name in ("one", "two"):
        kubectl(served, "create", "configmap", name, "-n", "legacy-watch")
    out = kubectl(served, "get", "--raw", "/api/v1/watch/namespaces/legacy-watch/configmaps/two?timeoutSeconds=1")
    events = [orjson.loads(line) for line in out.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "two")]
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        request = api.param_serialize("GET", "/api/v1/watch/namespaces/{namespace}/configmaps",
                                      path_params={"namespace": "legacy-watch"},
                                      query_params=[("watch", False), ("timeoutSeconds", 1)],
                                      header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        answer = api.call_api(*request)
        assert answer.status == 200
        events = [orjson.loads(line) for line in answer.read().splitlines()]
        assert {e["type"] for e in events} == {"ADDED"}
        assert {"one", "two"} <= {e["object"]["metadata"]["name"] for e in events}  # (a root CA's too, perhaps)
    finally:
        api.close()


def test_kubectl_get_raw_of_odd_but_legal_paths(served: Serve) -> None:
    """``kubectl get --raw`` of paths and parameters kube-apiserver answers: a trailing slash
    (trimmed on its go-restful routes, 404 on its exact health and metrics paths), ``?pretty``
    (indented, as upstream's negotiation), a health check by name, an object's status."""
    assert orjson.loads(kubectl(served, "get", "--raw", "/version/"))["major"] == "1"
    assert orjson.loads(kubectl(served, "get", "--raw", "/apis/apps/"))["name"] == "apps"
    assert orjson.loads(kubectl(served, "get", "--raw", "/api/v1/namespaces/default/configmaps/"))["kind"] \
        == "ConfigMapList"
    pretty = kubectl(served, "get", "--raw", "/api/v1/namespaces/default?pretty=true")
    assert pretty.startswith('{\n  "') and orjson.loads(pretty)["metadata"]["name"] == "default"
    assert "\n" not in kubectl(served, "get", "--raw", "/api/v1/namespaces/default").strip()  # kubectl's: compact
    status = orjson.loads(kubectl(served, "get", "--raw", "/api/v1/namespaces/default/status"))
    assert status["kind"] == "Namespace" and status["status"]["phase"] == "Active"
    assert kubectl(served, "get", "--raw", "/healthz/etcd") == "ok"
    assert kubectl(served, "get", "--raw", "/readyz/ping") == "ok"
    assert "[+]ping ok" in kubectl(served, "get", "--raw", "/livez?verbose")
    missing = _kubectl_all(served, "get", "--raw", "/healthz/")
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
GIZMOS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.tables.example.com}
spec:
  group: tables.example.com
  scope: Namespaced
  names: {plural: gizmos, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size, description: The gizmo's size.}
    - {name: Color, type: string, jsonPath: .spec.color}
"""


def test_table_columns_carry_upstreams_descriptions(served: Serve) -> None:
    """kubectl's Tables describe their columns as kube-apiserver's do: the printers' sentences or
    the field's API docs for built-in types, a CRD's printer column's description (or
    apiextensions' "Custom resource definition column (in JSONPath format): ...")."""
    pods = httpx.get(f"{served.url}/api/v1/namespaces/default/pods", headers={**bearer(served), "accept": TABLE})
    assert pods.status_code == 200 and pods.json()["kind"] == "Table"
    described = {c["name"]: c["description"] for c in pods.json()["columnDefinitions"]}
    assert described["Name"].startswith("Name must be unique within a namespace.")
    assert described["Age"].startswith("CreationTimestamp is a timestamp representing the server time")
    assert described["Status"] == "The aggregate status of the containers in this pod."
    assert described["Node"].startswith("NodeName indicates in which node this pod is scheduled.")

    kubectl(served, "apply", "-f", "-", stdin=GIZMOS)
    kubectl(served, "wait", "--for=condition=Established", "crd/gizmos.tables.example.com", "--timeout=20s")
    url = f"{served.url}/apis/tables.example.com/v1/namespaces/default/gizmos"
    for _ in range(100):
        r = httpx.get(url, headers={**bearer(served), "accept": TABLE})
        if r.status_code == 200:
            break
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    described = {c["name"]: c["description"] for c in r.json()["columnDefinitions"]}
    assert described["Size"] == "The gizmo's size."
    assert described["Color"] == "Custom resource definition column (in JSONPath format): .spec.color"
    assert described["Name"].startswith("Name must be unique within a namespace.")
