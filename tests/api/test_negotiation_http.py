"""Accept and Content-Type negotiation, and server-side apply through ``/scale``, over a real
socket against ``controlplane serve`` (api/negotiation.py, api/rest.py), checked against
kube-apiserver's handlers: goautoneg's clause order, the endpoint's allowed conversions,
406/415 with upstream's words, and the ScaleHandler's ownership of the replicas."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import yaml

from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

NOT_ACCEPTABLE = ("only the following media types are accepted: application/json, application/yaml, "
                  "application/vnd.kubernetes.protobuf")
NOT_ACCEPTABLE_WATCH = ("only the following media types are accepted: application/json;stream=watch, "
                        "application/vnd.kubernetes.protobuf;stream=watch")
BODIES = ("the body of the request was in an unknown format - accepted media types include: "
          "application/json, application/yaml, application/vnd.kubernetes.protobuf")
PATCHES = ("the body of the request was in an unknown format - accepted media types include: "
           "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
           "application/apply-patch+yaml")
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
APPLY = "application/apply-patch+yaml"

GADGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.neg.example.com"},
    "spec": {"group": "neg.example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                      "statusReplicasPath": ".status.size"}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                               "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("negotiation"), tls=False)) as s:
        yield s


@pytest.fixture(scope="module")
def web(served: Serve) -> Iterator[httpx.Client]:
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as c:
        made = c.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "neg"}, "data": {"a": "1"}})
        assert made.status_code == 201
        yield c


CM = "/api/v1/namespaces/default/configmaps"


def _status(r: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(r.text) if r.headers["content-type"] == "application/yaml" else r.json()
    assert body["kind"] == "Status" and body["code"] == r.status_code
    return body


@pytest.mark.parametrize(("accept", "kind", "content_type"), [
    ("", "ConfigMap", "application/json"),
    ("*/*", "ConfigMap", "application/json"),
    ("*", "ConfigMap", "application/json"),
    ("application/*", "ConfigMap", "application/json"),
    ("application/yaml", "ConfigMap", "application/yaml"),
    ("application/vnd.kubernetes.protobuf", "ConfigMap", "application/json"),  # protobuf is answered as JSON
    ("application/vnd.kubernetes.protobuf, */*", "ConfigMap", "application/json"),  # client-go's typed clients
    ("text/html,*/*;q=0.8", "ConfigMap", "application/json"),  # a browser
    ("application/json;q=0.5, application/yaml", "ConfigMap", "application/yaml"),  # by q
    ("application/yaml;q=0.5, */*", "ConfigMap", "application/json"),
    # goautoneg puts a concrete type before a wildcard whatever their q, and never refuses q=0
    ("*/*, application/yaml;q=0.5", "ConfigMap", "application/yaml"),
    ("application/yaml;q=0", "ConfigMap", "application/yaml"),
    ("application/json;stream=watch", "ConfigMap", "application/json"),
    (TABLE, "Table", "application/json"),
    ("application/yaml;as=Table;g=meta.k8s.io;v=v1", "Table", "application/yaml"),
    ("application/json, " + TABLE, "ConfigMap", "application/json"),  # the first clause that fits wins
    ("application/json;as=Foo;g=meta.k8s.io;v=v1, application/json", "ConfigMap", "application/json"),
    ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "PartialObjectMetadata", "application/json"),
])
def test_accept_negotiates_the_answer_as_upstream(web: httpx.Client, accept: str, kind: str,
                                                  content_type: str) -> None:
    r = web.get(f"{CM}/neg", headers={"accept": accept} if accept else {})
    assert r.status_code == 200 and r.headers["content-type"] == content_type
    got = yaml.safe_load(r.text) if content_type == "application/yaml" else r.json()
    assert got["kind"] == kind


@pytest.mark.parametrize("accept", [
    "text/plain", "application/xml", "application/xml, text/plain", "text/*", "foo", "Application/JSON",
    "application/json;as=Foo;g=meta.k8s.io;v=v1",      # no such conversion
    "application/json;as=Table;g=meta.k8s.io",         # a conversion needs its version
    "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",  # a Table is JSON or YAML
    "application/yaml;stream=watch",                   # YAML has no stream form
    "application/json;stream=other", "application/json;sv=v2",
])
def test_what_nothing_served_fits_is_406_with_upstreams_message(web: httpx.Client, accept: str) -> None:
    for path in (f"{CM}/neg", CM):
        r = web.get(path, headers={"accept": accept})
        assert r.status_code == 406 and r.headers["content-type"] == "application/json"
        assert _status(r)["reason"] == "NotAcceptable" and _status(r)["message"] == NOT_ACCEPTABLE
    # a write negotiates its answer before it reads the body
    r = web.post(CM, headers={"accept": accept, "content-type": "text/plain"}, content=b"x")
    assert r.status_code == 406


def test_tables_of_meta_v1beta1_are_that_version(web: httpx.Client) -> None:
    accept = "application/json;as=Table;g=meta.k8s.io;v=v1beta1"
    table = web.get(f"{CM}/neg", headers={"accept": accept}).json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1beta1")
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    listed = web.get(CM, headers={"accept": accept}).json()
    assert listed["apiVersion"] == "meta.k8s.io/v1beta1" and "neg" in [r["cells"][0] for r in listed["rows"]]
    with web.stream("GET", CM, params={"watch": "1", "timeoutSeconds": "1"}, headers={"accept": accept}) as r:
        events = [orjson.loads(line) for line in r.iter_lines() if line]
    assert events and all(e["object"]["apiVersion"] == "meta.k8s.io/v1beta1" for e in events)


def test_a_watch_takes_only_types_with_a_stream_form(web: httpx.Client) -> None:
    params = {"watch": "1", "timeoutSeconds": "1"}
    r = web.get(CM, params=params, headers={"accept": "application/yaml"})
    assert r.status_code == 406 and r.headers["content-type"] == "application/yaml"  # its error as negotiated
    assert _status(r)["message"] == NOT_ACCEPTABLE_WATCH
    r = web.get(CM, params=params, headers={"accept": "application/yaml;as=Table;g=meta.k8s.io;v=v1"})
    assert r.status_code == 406 and r.headers["content-type"] == "application/json"
    assert _status(r)["message"] == NOT_ACCEPTABLE_WATCH
    assert web.get(CM, params=params, headers={"accept": "text/plain"}).json()["message"] == NOT_ACCEPTABLE
    for accept in ("application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch, */*",
                   TABLE):
        with web.stream("GET", CM, params=params, headers={"accept": accept}) as r:
            assert r.status_code == 200
            events = [orjson.loads(line) for line in r.iter_lines() if line]
        assert events[0]["type"] == "ADDED"


def test_errors_are_written_as_negotiated_without_conversions(web: httpx.Client) -> None:
    missing = f"{CM}/nope"
    r = web.get(missing, headers={"accept": "application/yaml"})
    assert r.status_code == 404 and r.headers["content-type"] == "application/yaml"
    assert _status(r)["reason"] == "NotFound"
    # the Table clause fits the resource, not the error: JSON, or the next clause that fits
    r = web.get(missing, headers={"accept": "application/yaml;as=Table;g=meta.k8s.io;v=v1"})
    assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    r = web.get(missing, headers={"accept": TABLE + ", application/yaml"})
    assert r.status_code == 404 and r.headers["content-type"] == "application/yaml"
    # a path nothing serves is a 404 before any negotiation, as upstream routes first
    r = web.get("/api/v1/namespaces/default/nosuchthings", headers={"accept": "text/plain"})
    assert r.status_code == 404


def test_discovery_documents_take_no_conversion(web: httpx.Client) -> None:
    r = web.get("/api/v1", headers={"accept": TABLE})
    assert r.status_code == 406 and r.json()["message"] == NOT_ACCEPTABLE
    r = web.get("/apis", headers={"accept": "application/yaml"})
    assert r.status_code == 200 and yaml.safe_load(r.text)["kind"] == "APIGroupList"
    aggregated = web.get("/apis", headers={"accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                                      "as=APIGroupDiscoveryList,application/json"})
    assert aggregated.json()["kind"] == "APIGroupDiscoveryList"


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "*/*", "application/cbor",
                                          # what Go's mime.ParseMediaType does not parse (they were JSON)
                                          ";;;", "application/json; charset", "application/json; a=1; a=2",
                                          "application/"])
def test_create_and_update_bodies_of_other_types_are_415(web: httpx.Client, content_type: str) -> None:
    body = orjson.dumps({"metadata": {"name": "neg"}})
    for r in (web.post(CM, headers={"content-type": content_type}, content=body),
              web.put(f"{CM}/neg", headers={"content-type": content_type}, content=body)):
        assert r.status_code == 415 and _status(r)["reason"] == "UnsupportedMediaType"
        assert _status(r)["message"] == BODIES
    ok = web.put(f"{CM}/neg", headers={"content-type": "Application/JSON; charset=utf-8"},
                 content=orjson.dumps({"metadata": {"name": "neg"}, "data": {"a": "1"}}))
    assert ok.status_code == 200  # a body's type is parsed as a MIME type: case does not matter


@pytest.mark.parametrize("content_type", [None, "", "application/json", "text/plain",
                                          "Application/Merge-Patch+Json", "application/apply-patch+cbor"])
def test_patches_of_other_types_are_415_before_anything_else(web: httpx.Client, content_type: str | None) -> None:
    headers = {"accept": "text/plain"}  # a 406 would come after
    if content_type is not None:
        headers["content-type"] = content_type
    r = web.patch(f"{CM}/neg", headers=headers, content=b"{}")
    assert r.status_code == 415 and _status(r)["message"] == PATCHES
    fine = web.patch(f"{CM}/neg", headers={"content-type": "application/merge-patch+json; charset=utf-8"},
                     content=b"{}")
    assert fine.status_code == 200


def _deployment(web: httpx.Client, name: str) -> str:
    path = f"/apis/apps/v1/namespaces/default/deployments/{name}"
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                       "template": {"metadata": {"labels": {"app": name}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    made = web.patch(path, params={"fieldManager": "kubectl"}, headers={"content-type": APPLY},
                     content=orjson.dumps(config))
    assert made.status_code == 201
    return path


def _scale(replicas: int | None = None, **meta: str) -> bytes:
    scale: dict[str, Any] = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta}
    if replicas is not None:
        scale["spec"] = {"replicas": replicas}
    return orjson.dumps(scale)


def _entries(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e for e in obj["metadata"]["managedFields"]}


def test_server_side_apply_through_scale_owns_the_parents_replicas(web: httpx.Client) -> None:
    path = _deployment(web, "ssa-scale")
    apply = {"content-type": APPLY}
    r = web.patch(path + "/scale", params={"fieldManager": "hpa"}, headers=apply, content=_scale(3))
    assert r.status_code == 409 and _status(r)["reason"] == "Conflict"
    assert _status(r)["message"] == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert _status(r)["details"]["causes"] == [{"type": "FieldManagerConflict", "message": 'conflict with "kubectl"',
                                                "field": ".spec.replicas"}]
    r = web.patch(path + "/scale", params={"fieldManager": "hpa", "force": "true"}, headers=apply,
                  content=yaml.safe_dump({"apiVersion": "autoscaling/v1", "kind": "Scale",
                                          "metadata": {"name": "ssa-scale"}, "spec": {"replicas": 3}}).encode())
    assert r.status_code == 200
    scale = r.json()
    assert (scale["kind"], scale["spec"], scale["status"]["selector"]) == ("Scale", {"replicas": 3}, "app=ssa-scale")
    assert "managedFields" not in scale["metadata"]
    got = web.get(path).json()
    assert got["spec"]["replicas"] == 3 and got["metadata"]["generation"] == 2
    entries = _entries(got)
    hpa = entries["hpa", "Apply", "scale"]
    assert (hpa["apiVersion"], hpa["fieldsV1"]) == ("apps/v1", {"f:spec": {"f:replicas": {}}})
    assert "f:replicas" not in entries["kubectl", "Apply", ""]["fieldsV1"]["f:spec"]  # taken from it
    # the same apply again changes nothing, not even the resourceVersion
    again = web.patch(path + "/scale", params={"fieldManager": "hpa"}, headers=apply, content=_scale(3))
    assert again.status_code == 200 and again.json()["metadata"]["resourceVersion"] == \
        scale["metadata"]["resourceVersion"]
    # the object's own apply now conflicts with the Scale's applier
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa-scale"},
              "spec": {"replicas": 1}}
    r = web.patch(path, params={"fieldManager": "kubectl"}, headers=apply, content=orjson.dumps(config))
    assert r.status_code == 409
    assert _status(r)["message"] == ('Apply failed with 1 conflict: conflict with "hpa" with subresource "scale": '
                                     ".spec.replicas")
    # a scale update by another manager takes them; the applier then conflicts with it
    assert web.patch(path + "/scale", params={"fieldManager": "scaler"},
                     headers={"content-type": "application/merge-patch+json"},
                     content=b'{"spec":{"replicas":5}}').status_code == 200
    r = web.patch(path + "/scale", params={"fieldManager": "hpa"}, headers=apply, content=_scale(4))
    assert r.status_code == 409
    assert _status(r)["message"] == ('Apply failed with 1 conflict: conflict with "scaler" with subresource "scale" '
                                     "using apps/v1: .spec.replicas")


@pytest.mark.parametrize(("plural", "group"), [("replicasets", "apis/apps/v1"), ("statefulsets", "apis/apps/v1"),
                                               ("replicationcontrollers", "api/v1")])
def test_apply_through_scale_of_the_other_scalable_kinds(web: httpx.Client, plural: str, group: str) -> None:
    name = f"ssa-{plural}"
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    selector: dict[str, Any] = {"app": name} if plural == "replicationcontrollers" else {"matchLabels": {"app": name}}
    spec: dict[str, Any] = {"selector": selector, "template": template}
    if plural == "statefulsets":
        spec["serviceName"] = name
    made = web.post(f"/{group}/namespaces/default/{plural}", params={"fieldManager": "creator"},
                    json={"metadata": {"name": name}, "spec": spec})
    assert made.status_code == 201
    r = web.patch(f"/{group}/namespaces/default/{plural}/{name}/scale", params={"fieldManager": "hpa", "force": "1"},
                  headers={"content-type": APPLY}, content=_scale(2))
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 2
    got = web.get(f"/{group}/namespaces/default/{plural}/{name}").json()
    assert got["spec"]["replicas"] == 2
    assert _entries(got)["hpa", "Apply", "scale"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_apply_through_scale_refuses_what_is_no_scale(web: httpx.Client, served: Serve) -> None:
    path = _deployment(web, "ssa-bad")
    apply = {"content-type": APPLY}

    def refused(body: bytes, params: dict[str, str] | None = None) -> dict[str, Any]:
        r = web.patch(path + "/scale", params=params if params is not None else {"fieldManager": "hpa"},
                      headers=apply, content=body)
        assert r.status_code in (400, 409, 422)
        return _status(r)

    deployment = orjson.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa-bad"},
                               "spec": {"replicas": 3}})
    assert refused(deployment)["message"] == "invalid object type: apps/v1, Kind=Deployment"
    assert refused(b'{"apiVersion": "v1", "kind": "Scale"}')["message"] == "invalid object type: /v1, Kind=Scale"
    assert refused(b'{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"foo":1}}')["message"] == (
        "failed to create typed patch object (/; autoscaling/v1, Kind=Scale): .spec.foo: field not declared in schema")
    assert refused(_scale(-1), {"fieldManager": "hpa", "force": "true"})["code"] == 422  # (a conflict comes first)
    assert refused(_scale(2))["reason"] == "Conflict"
    assert refused(_scale(2, resourceVersion="1"), {"fieldManager": "hpa", "force": "true"})["reason"] == "Conflict"
    assert refused(_scale(2), {})["reason"] == "Invalid"  # fieldManager is required
    assert refused(_scale(2, name="other"), {"fieldManager": "hpa", "force": "true"})["code"] == 400
    assert web.get(path).json()["spec"]["replicas"] == 1
    # what kubectl apply --server-side --subresource=scale sends: the file's object, a Deployment
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "--server-side", "--subresource=scale", "-f", "-"], input=yaml.safe_dump(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa-bad", "namespace": "default"},
         "spec": {"replicas": 3}}), capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "invalid object type: apps/v1, Kind=Deployment" in r.stderr


def test_custom_resources_apply_through_scale_and_have_no_protobuf_form(web: httpx.Client) -> None:
    assert web.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=GADGETS).status_code == 201
    base = "/apis/neg.example.com/v1/namespaces/default/gadgets"
    deadline = time.monotonic() + 20
    while web.get(base).status_code != 200:
        assert time.monotonic() < deadline, "the CRD was not served"
        time.sleep(0.1)
    made = web.post(base, params={"fieldManager": "creator"},
                    json={"apiVersion": "neg.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
                          "spec": {"size": 1}})
    assert made.status_code == 201
    r = web.patch(f"{base}/g/scale", params={"fieldManager": "hpa", "force": "true"},
                  headers={"content-type": APPLY}, content=_scale(4))
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 4
    got = web.get(f"{base}/g").json()
    assert got["spec"]["size"] == 4
    assert _entries(got)["hpa", "Apply", "scale"]["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert ("creator", "Update", "") not in _entries(got)  # its only field was taken: the entry is gone
    # a custom resource takes no strategic merge patch, also through /scale
    r = web.patch(f"{base}/g/scale", headers={"content-type": "application/strategic-merge-patch+json"},
                  content=b'{"spec":{"replicas":1}}')
    assert r.status_code == 415 and _status(r)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    # nor a protobuf form of its own: that clause is passed over
    assert web.get(f"{base}/g", headers={"accept": "application/vnd.kubernetes.protobuf"}).status_code == 406
    assert web.get(f"{base}/g", headers={"accept": "application/vnd.kubernetes.protobuf, application/json"}
                   ).json()["kind"] == "Gadget"
    meta = web.get(f"{base}/g", headers={"accept": "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;"
                                                   "g=meta.k8s.io;v=v1"})
    assert meta.status_code == 200 and meta.json()["kind"] == "PartialObjectMetadata"
