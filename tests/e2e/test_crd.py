"""CustomResourceDefinitions over a socket: real kubectl and the official Python
client, a namespaced and a cluster-scoped CRD, and a second server process over
the same data directory."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from kubernetes import client, dynamic, watch
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, start_serve

WIDGETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [gadgets]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas,
              labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status', priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:  # apiVersion, kind and metadata declared as controller-gen does
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [color]
            properties:
              replicas: {type: integer, minimum: 0, default: 1}
              color: {type: string, enum: [red, blue]}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties: {type: {type: string}, status: {type: string}}
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: %s}
spec: {color: red, unknown: dropped}
"""


_clients: list[httpx.Client] = []


def authed(served: Serve) -> httpx.Client:
    """httpx with the admin's token: the server speaks TLS, where a request without one is 401.
    Closed after the test."""
    c = httpx.Client(headers=bearer(served), timeout=30)
    _clients.append(c)
    return c


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def test_kubectl_applies_a_crd_then_its_resource_at_once(served: Serve) -> None:
    out = kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" in out
    # no wait: the CRD is established when its create returns
    assert "widget.example.com/w1 created" in kubectl(served, "apply", "--validate=false", "-f", "-",
                                                      stdin=WIDGET % "w1")
    table = kubectl(served, "get", "widgets").splitlines()
    assert table[0].split() == ["NAME", "REPLICAS", "COLOR", "AGE"]
    assert table[1].split()[:3] == ["w1", "1", "red"]
    assert kubectl(served, "get", "wd", "-o", "wide").splitlines()[0].split() == \
        ["NAME", "REPLICAS", "COLOR", "READY", "AGE"]
    assert kubectl(served, "get", "widget.example.com", "-o", "name").split() == ["widget.example.com/w1"]
    assert kubectl(served, "get", "widgets.v1.example.com", "-o", "name").split() == ["widget.example.com/w1"]
    assert kubectl(served, "get", "gadgets", "-o", "name").split() == ["widget.example.com/w1"]
    obj = yaml.safe_load(kubectl(served, "get", "wd", "w1", "-o", "yaml"))
    assert obj["apiVersion"] == "example.com/v1" and obj["kind"] == "Widget"
    assert obj["spec"] == {"color": "red", "replicas": 1}  # pruned, defaulted
    names = {line.split()[0]: line.split() for line in kubectl(served, "api-resources", "--no-headers").splitlines()}
    assert names["widgets"][1:] == ["wd", "example.com/v1", "true", "Widget"]
    assert names["customresourcedefinitions"][1] == "crd,crds"
    crd = yaml.safe_load(kubectl(served, "get", "crd", "widgets.example.com", "-o", "yaml"))
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}


def test_kubectl_shows_schema_errors_as_upstream(served: Serve) -> None:
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    bad = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {color: pink, replicas: two}\n"
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "--validate=false", "-f", "-"], input=bad, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    assert 'The Widget "bad" is invalid' in r.stderr
    assert 'spec.color: Unsupported value: "pink": supported values: "red", "blue"' in r.stderr
    assert 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"' \
        in r.stderr


def test_kubectl_get_watch_sees_changes(served: Serve) -> None:
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGET % "w-watch")
    assert KUBECTL
    env = {"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}
    with subprocess.Popen([KUBECTL, "get", "wd", "w-watch", "-w", "--no-headers"], stdout=subprocess.PIPE,
                          text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().split()
            assert first[:3] == ["w-watch", "1", "red"]
            kubectl(served, "patch", "wd", "w-watch", "--type=merge", "-p", '{"spec":{"replicas":4}}')
            assert proc.stdout.readline().split()[:3] == ["w-watch", "4", "red"]
        finally:
            proc.kill()


def test_kubectl_delete_crd_removes_its_resources(served: Serve) -> None:
    web = authed(served)
    gizmos = WIDGETS.replace("widgets", "gizmos").replace("Widget", "Gizmo").replace("widget", "gizmo") \
        .replace("[wd]", "[gz]")
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=gizmos)
    for i in range(3):
        kubectl(served, "apply", "--validate=false", "-f", "-",
                stdin=f"apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {{name: g{i}}}\nspec: {{color: blue}}\n")
    assert len(kubectl(served, "get", "gizmos", "-o", "name").split()) == 3
    assert "deleted" in kubectl(served, "delete", "crd", "gizmos.example.com")
    assert "gizmos.example.com" not in kubectl(served, "get", "crd", "-o", "name")
    r = web.get(f"{served.url}/apis/example.com/v1/namespaces/default/gizmos")
    assert r.status_code == 404
    names = {line.split()[0] for line in kubectl(served, "api-resources", "--no-headers").splitlines()}
    assert "gizmos" not in names and "widgets" in names
    # the custom resources are gone from the store: a new CRD of the same name starts empty
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=gizmos)
    assert kubectl(served, "get", "gizmos", "-o", "name").split() == []


def test_kubectl_scale_writes_through_the_scale_subresource(served: Serve) -> None:
    web = authed(served)
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGET % "w-scale")
    assert "widget.example.com/w-scale scaled" in kubectl(served, "scale", "wd", "w-scale", "--replicas=5")
    assert kubectl(served, "get", "wd", "w-scale", "-o", "jsonpath={.spec.replicas}") == "5"
    url = f"{served.url}/apis/example.com/v1/namespaces/default/widgets/w-scale"
    web.patch(url + "/status", json={"status": {"replicas": 2, "selector": "app=w"}},
                headers={"content-type": "application/merge-patch+json"}).raise_for_status()
    scale = web.get(url + "/scale").json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 5} and scale["status"] == {"replicas": 2, "selector": "app=w"}
    assert scale["metadata"]["name"] == "w-scale" and scale["metadata"]["namespace"] == "default"
    r = web.patch(url + "/scale", json={"spec": {"replicas": -1}},
                    headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "spec.replicas"
    stale = dict(scale, spec={"replicas": 7}, metadata=dict(scale["metadata"], resourceVersion="1"))
    assert web.put(url + "/scale", json=stale).status_code == 409
    resources = {r["name"]: r for r in web.get(f"{served.url}/apis/example.com/v1").json()["resources"]}
    assert resources["widgets/scale"]["kind"] == "Scale" and resources["widgets/scale"]["group"] == "autoscaling"


CLUSTER_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: regions.infra.example.org}
spec:
  group: infra.example.org
  scope: Cluster
  names: {plural: regions, kind: Region}
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {zone: {type: string}}}
"""


def test_a_cluster_scoped_crd_with_two_versions(served: Serve) -> None:
    web = authed(served)
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=CLUSTER_CRD)
    region = "apiVersion: infra.example.org/v1beta1\nkind: Region\nmetadata: {name: eu}\nspec: {zone: eu-1, x: 1}\n"
    assert "region.infra.example.org/eu created" in kubectl(served, "apply", "--validate=false", "-f", "-",
                                                           stdin=region)
    table = kubectl(served, "get", "regions").splitlines()
    assert table[0].split() == ["NAME", "AGE"]
    assert table[1].split()[0] == "eu"
    # the preferred version is v1; the object reads as v1, the None conversion only rewrites apiVersion
    got = yaml.safe_load(kubectl(served, "get", "region", "eu", "-o", "yaml"))
    assert got["apiVersion"] == "infra.example.org/v1"
    assert got["spec"] == {"zone": "eu-1"}  # v1's schema prunes what v1beta1 preserved
    r = web.get(f"{served.url}/apis/infra.example.org/v1beta1/regions/eu")
    assert r.json()["apiVersion"] == "infra.example.org/v1beta1"
    assert r.headers["warning"] == ('299 - "infra.example.org/v1beta1 Region is deprecated; '
                                    'use infra.example.org/v1 Region"')
    assert "warning" not in web.get(f"{served.url}/apis/infra.example.org/v1/regions/eu").headers
    group = web.get(f"{served.url}/apis/infra.example.org").json()
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1"
    resources = web.get(f"{served.url}/apis/infra.example.org/v1").json()["resources"]
    assert [(r["name"], r["namespaced"], r["kind"], r["singularName"]) for r in resources] == \
        [("regions", False, "Region", "region")]


def test_invalid_crds_are_refused_with_causes(served: Serve) -> None:
    web = authed(served)
    bad = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "stuff", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": False}]}}
    r = web.post(f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=bad)
    assert r.status_code == 422
    status = r.json()
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('CustomResourceDefinition.apiextensions.k8s.io "things.example.com" is '
                                        "invalid: [")
    assert {c["field"] for c in status["details"]["causes"]} == {
        "metadata.name", "spec.versions[0].schema.openAPIV3Schema", "spec.versions"}


# -- the Python client -------------------------------------------------------------------------

def crd_body(plural: str, kind: str, scope: str = "Namespaced") -> dict[str, Any]:
    doc = yaml.safe_load(WIDGETS)
    doc["metadata"]["name"] = f"{plural}.example.com"
    doc["spec"]["scope"] = scope
    doc["spec"]["names"] = {"plural": plural, "kind": kind}
    return dict(doc)


def crd_model(plural: str, kind: str, scope: str = "Namespaced",
              short_names: list[str] | None = None) -> client.V1CustomResourceDefinition:
    body = crd_body(plural, kind, scope)
    if short_names:
        body["spec"]["names"]["shortNames"] = short_names
    model = client.V1CustomResourceDefinition.from_dict(body)
    assert model is not None
    return model


def as_dict(value: object) -> dict[str, Any]:
    """The CustomObjectsApi's answers are JSON objects (typed ``object``)."""
    assert isinstance(value, dict)
    return value


def test_custom_objects_api_crud_list_and_watch(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    created = ext.create_custom_resource_definition(crd_model("sprockets", "Sprocket"))
    assert created.status.accepted_names.kind == "Sprocket"
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "example.com", "v1", "default", "sprockets"
    obj = as_dict(co.create_namespaced_custom_object(g, v, ns, plural, {
        "apiVersion": "example.com/v1", "kind": "Sprocket", "metadata": {"name": "s1"},
        "spec": {"color": "blue"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
    assert obj["spec"] == {"color": "blue", "replicas": 1}
    assert "status" not in obj  # written through /status only
    rv = obj["metadata"]["resourceVersion"]

    events: list[tuple[str, str, int]] = []

    def follow() -> None:
        w = watch.Watch()
        for ev in w.stream(co.list_namespaced_custom_object, g, v, ns, plural, resource_version=rv,
                           timeout_seconds=10):
            events.append((ev["type"], ev["object"]["metadata"]["name"], ev["object"]["spec"].get("replicas", 0)))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.5)
    obj["spec"]["replicas"] = 2
    replaced = as_dict(co.replace_namespaced_custom_object(g, v, ns, plural, "s1", obj))
    assert replaced["spec"]["replicas"] == 2 and replaced["metadata"]["generation"] == 2
    patched = as_dict(co.patch_namespaced_custom_object(g, v, ns, plural, "s1", {"spec": {"replicas": 3}}))
    assert patched["spec"]["replicas"] == 3
    status = as_dict(co.patch_namespaced_custom_object_status(g, v, ns, plural, "s1", {
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
    assert status["status"]["conditions"][0]["status"] == "True"
    assert status["metadata"]["generation"] == 3
    listed = as_dict(co.list_namespaced_custom_object(g, v, ns, plural))
    assert listed["kind"] == "SprocketList" and [i["metadata"]["name"] for i in listed["items"]] == ["s1"]
    assert as_dict(co.list_cluster_custom_object(g, v, plural))["items"][0]["metadata"]["namespace"] == "default"
    with pytest.raises(ApiException) as err:
        co.patch_namespaced_custom_object(g, v, ns, plural, "s1", {"spec": {"replicas": "many"}})
    assert err.value.status == 422
    co.delete_namespaced_custom_object(g, v, ns, plural, "s1")
    t.join(15)
    assert events == [("MODIFIED", "s1", 2), ("MODIFIED", "s1", 3), ("MODIFIED", "s1", 3), ("DELETED", "s1", 3)]
    with pytest.raises(ApiException) as err:
        co.get_namespaced_custom_object(g, v, ns, plural, "s1")
    assert err.value.status == 404


def test_custom_objects_api_cluster_scoped(api: client.ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd_model("cogs", "Cog", scope="Cluster"))
    co = client.CustomObjectsApi(api)
    co.create_cluster_custom_object("example.com", "v1", "cogs", {
        "apiVersion": "example.com/v1", "kind": "Cog", "metadata": {"name": "c1"}, "spec": {"color": "red"}})
    got = as_dict(co.get_cluster_custom_object("example.com", "v1", "cogs", "c1"))
    assert "namespace" not in got["metadata"]
    listed = as_dict(co.list_cluster_custom_object("example.com", "v1", "cogs"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c1"]
    with pytest.raises(ApiException) as err:
        co.create_cluster_custom_object("example.com", "v1", "cogs", {
            "apiVersion": "example.com/v1", "kind": "Cog", "metadata": {"name": "c2"}, "spec": {}})
    assert err.value.status == 422
    assert "spec.color: Required value" in err.value.body


def test_strict_field_validation_refuses_unknown_fields(served: Serve, api: client.ApiClient) -> None:
    web = authed(served)
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd_model("levers", "Lever"))
    url = f"{served.url}/apis/example.com/v1/namespaces/default/levers"
    body = {"apiVersion": "example.com/v1", "kind": "Lever", "metadata": {"name": "l1"},
            "spec": {"color": "red", "bogus": 1}}
    r = web.post(url + "?fieldValidation=Strict", json=body)
    assert r.status_code == 400
    assert r.json()["message"] == ('Lever in version "v1" cannot be handled as a Lever: strict decoding error: '
                                   'unknown field "spec.bogus"')
    warned = web.post(url, json=dict(body, metadata={"name": "l0"}))  # Warn, the default: kept out, and said
    assert warned.status_code == 201 and warned.headers["warning"] == '299 - "unknown field \\"spec.bogus\\""'
    r = web.post(url, json=body)
    assert r.status_code == 201 and r.json()["spec"] == {"color": "red", "replicas": 1}


def test_a_conflicting_name_is_not_accepted(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(crd_model("bolts", "Bolt", short_names=["bt"]))
    got = ext.create_custom_resource_definition(crd_model("nuts", "Nut", short_names=["bt"]))
    conditions = {c.type: c for c in got.status.conditions}
    assert conditions["NamesAccepted"].status == "False"
    assert conditions["Established"].status == "False"
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as err:
        co.list_namespaced_custom_object("example.com", "v1", "default", "nuts")
    assert err.value.status == 404
    # once the holder of the name is gone, the name is accepted and the CRD established
    ext.delete_custom_resource_definition("bolts.example.com")
    deadline = time.monotonic() + 10
    while True:
        got = ext.read_custom_resource_definition("nuts.example.com")
        if {c.type: c.status for c in got.status.conditions or []}.get("Established") == "True":
            break
        assert time.monotonic() < deadline, "nuts never became established"
        time.sleep(0.05)
    assert got.status.accepted_names.short_names == ["bt"]
    assert as_dict(co.list_namespaced_custom_object("example.com", "v1", "default", "nuts"))["items"] == []


def test_a_status_writers_observed_generations_outlive_the_controllers_writes(api: client.ApiClient) -> None:
    """CRDObservedGenerationTracking (on at 1.37): ``status.observedGeneration`` and a
    condition's are kept as a status writer sets them, and the naming controller's next
    write of its conditions, after a change of the spec, keeps them (upstream's
    SetCRDCondition); no controller of the server sets them itself."""
    ext = client.ApiextensionsV1Api(api)
    created = ext.create_custom_resource_definition(crd_model("gauges", "Gauge"))
    assert created.status.observed_generation is None
    assert all(c.observed_generation is None for c in created.status.conditions)
    created.status.observed_generation = 1
    for condition in created.status.conditions:
        condition.observed_generation = 1
    written = ext.replace_custom_resource_definition_status("gauges.example.com", created)
    assert written.status.observed_generation == 1
    assert {c.type: c.observed_generation for c in written.status.conditions} == {"NamesAccepted": 1,
                                                                                  "Established": 1}
    written.spec.names.short_names = ["gg"]  # a spec change: the naming controller writes its conditions
    changed = ext.replace_custom_resource_definition("gauges.example.com", written)
    assert changed.metadata.generation == 2 and changed.status.accepted_names.short_names == ["gg"]
    assert changed.status.observed_generation == 1
    assert {c.type: c.observed_generation for c in changed.status.conditions} == {"NamesAccepted": 1,
                                                                                  "Established": 1}


# -- several server processes over one store -----------------------------------------------------

def test_a_second_server_process_sees_the_crds_of_the_first(tmp_path: Path) -> None:
    first = start_serve(tmp_path)
    second: Serve | None = None
    try:
        first.wait_ready()
        web = authed(first)  # the second process shares the state: its tokens too
        kubectl(first, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
        kubectl(first, "apply", "--validate=false", "-f", "-", stdin=WIDGET % "shared")
        second = start_serve(tmp_path, run=1)
        second.wait_ready()
        url = f"{second.url}/apis/example.com/v1/namespaces/default/widgets"
        assert [i["metadata"]["name"] for i in web.get(url).json()["items"]] == ["shared"]
        # a CRD created through the second process appears in the first, through the store's watch
        r = web.post(f"{second.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                       json=crd_body("dials", "Dial"))
        assert r.status_code == 201, r.text
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if web.get(f"{first.url}/apis/example.com/v1/namespaces/default/dials").status_code == 200:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the first process never served dials")
        resources = {r["name"] for r in web.get(f"{first.url}/apis/example.com/v1").json()["resources"]}
        assert {"widgets", "widgets/status", "dials", "dials/status"} <= resources
        # and its deletion too
        kubectl(second, "delete", "crd", "dials.example.com")
        deadline = time.monotonic() + 10
        while web.get(f"{first.url}/apis/example.com/v1/namespaces/default/dials").status_code != 404:
            assert time.monotonic() < deadline, "the first process still serves dials"
            time.sleep(0.05)
    finally:
        for s in (first, second):
            if s is not None and s.proc.poll() is None:
                s.stop()


def test_a_crd_waits_for_its_resources_finalizers(served: Serve) -> None:
    web = authed(served)
    crds = f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert web.post(crds, json=crd_body("latches", "Latch")).status_code == 201
    url = f"{served.url}/apis/example.com/v1/namespaces/default/latches"
    held = {"apiVersion": "example.com/v1", "kind": "Latch",
            "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "spec": {"color": "red"}}
    assert web.post(url, json=held).status_code == 201
    r = web.delete(f"{crds}/latches.example.com")
    assert r.status_code == 200
    crd = r.json()
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
    assert crd["metadata"]["deletionTimestamp"]
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Terminating"] == "True"
    deadline = time.monotonic() + 10
    while not web.get(f"{url}/held").json()["metadata"].get("deletionTimestamp"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    late = dict(held, metadata={"name": "late"})
    r = web.post(url, json=late)
    assert r.status_code == 405 and "terminating" in r.json()["message"]
    assert web.get(f"{crds}/latches.example.com").status_code == 200  # held by its resource
    r = web.patch(f"{url}/held", json={"metadata": {"finalizers": None}},
                    headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200
    while web.get(f"{crds}/latches.example.com").status_code != 404:
        assert time.monotonic() < deadline, "the CRD outlived its last resource"
        time.sleep(0.05)
    assert web.get(url).status_code == 404


def test_watches_end_when_the_crd_changes_or_goes(served: Serve) -> None:
    web = authed(served)
    crds = f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert web.post(crds, json=crd_body("knobs", "Knob")).status_code == 201
    url = f"{served.url}/apis/example.com/v1/namespaces/default/knobs"
    merge = {"content-type": "application/merge-patch+json"}

    def watch_ends_after(change: Any) -> bool:
        with web.stream("GET", url, params={"watch": "true", "timeoutSeconds": "20"}, timeout=30) as r:
            started = time.monotonic()
            change()
            for _line in r.iter_lines():
                pass
            return time.monotonic() - started < 10

    # a label on the CRD changes nothing its resources are served with: the watch goes on (to its timeout)
    with web.stream("GET", url, params={"watch": "true", "timeoutSeconds": "2"}, timeout=30) as r:
        web.patch(f"{crds}/knobs.example.com", json={"metadata": {"labels": {"a": "b"}}},
                    headers=merge).raise_for_status()
        started = time.monotonic()
        list(r.iter_lines())
        assert time.monotonic() - started > 1
    new_column = {"spec": {"versions": [dict(crd_body("knobs", "Knob")["spec"]["versions"][0],
                                             additionalPrinterColumns=[{"name": "Colour", "type": "string",
                                                                        "jsonPath": ".spec.color"}])]}}
    assert watch_ends_after(lambda: web.patch(f"{crds}/knobs.example.com", json=new_column,
                                                headers=merge).raise_for_status())
    assert watch_ends_after(lambda: web.delete(f"{crds}/knobs.example.com").raise_for_status())


def test_a_restart_resumes_the_deletion_of_a_crd(tmp_path: Path) -> None:
    s = start_serve(tmp_path)
    try:
        s.wait_ready()
        web = authed(s)  # the restarted server keeps its tokens
        crds = f"{s.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        assert web.post(crds, json=crd_body("hinges", "Hinge")).status_code == 201
        url = f"{s.url}/apis/example.com/v1/namespaces/default/hinges"
        held = {"apiVersion": "example.com/v1", "kind": "Hinge",
                "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "spec": {"color": "red"}}
        assert web.post(url, json=held).status_code == 201
        assert web.delete(f"{crds}/hinges.example.com").status_code == 200
        s.stop()
        s = start_serve(tmp_path, run=1)
        s.wait_ready()
        crds = f"{s.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        url = f"{s.url}/apis/example.com/v1/namespaces/default/hinges"
        assert web.get(f"{crds}/hinges.example.com").json()["metadata"]["deletionTimestamp"]
        assert web.get(f"{url}/held").json()["metadata"]["deletionTimestamp"]
        # only the restarted server's cleanup can drop the CRD's finalizer once its resource is gone
        deadline = time.monotonic() + 10
        web.patch(f"{url}/held", json={"metadata": {"finalizers": None}},
                    headers={"content-type": "application/merge-patch+json"}).raise_for_status()
        while web.get(f"{crds}/hinges.example.com").status_code != 404:
            assert time.monotonic() < deadline, "the CRD outlived its last resource"
            time.sleep(0.05)
    finally:
        if s.proc.poll() is None:
            s.stop()


def test_the_dynamic_client_discovers_a_new_crd(served: Serve, api: client.ApiClient, tmp_path: Path) -> None:
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body=crd_body("pulleys", "Pulley"))
    # a kind the cached discovery does not know makes the client discover again
    pulleys = dyn.resources.get(api_version="example.com/v1", kind="Pulley")
    assert pulleys.namespaced and pulleys.name == "pulleys"
    pulleys.create(namespace="default", body={"apiVersion": "example.com/v1", "kind": "Pulley",
                                              "metadata": {"name": "p1"}, "spec": {"color": "blue"}})
    got = pulleys.get(namespace="default", name="p1")
    assert got.spec.replicas == 1 and got.spec.color == "blue"
    assert [i.metadata.name for i in pulleys.get(namespace="default").items] == ["p1"]
    events = [ev["type"] for ev in pulleys.watch(namespace="default", timeout=1)]
    assert events == ["ADDED"]


def test_a_dry_run_crd_is_not_served(served: Serve) -> None:
    web = authed(served)
    crds = f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    r = web.post(crds + "?dryRun=All", json=crd_body("ghosts", "Ghost"))
    assert r.status_code == 201 and r.json()["status"]["acceptedNames"]["kind"] == "Ghost"
    assert web.get(f"{crds}/ghosts.example.com").status_code == 404
    assert web.get(f"{served.url}/apis/example.com/v1/namespaces/default/ghosts").status_code == 404
    bad = dict(crd_body("ghosts", "Ghost"), metadata={"name": "wrong.example.com"})
    assert web.post(crds + "?dryRun=All", json=bad).status_code == 422  # validated all the same


def test_openapi_publishes_the_crd_schema_and_kubectl_validates_with_it(served: Serve) -> None:
    web = authed(served)
    kubectl(served, "apply", "-f", "-", stdin=WIDGETS.replace("widgets", "sliders").replace("Widget", "Slider")
            .replace("widget", "slider").replace("[wd]", "[sl]").replace("[gadgets]", "[]"))
    doc = web.get(f"{served.url}/openapi/v3/apis/example.com/v1").json()
    slider = doc["components"]["schemas"]["com.example.v1.Slider"]
    assert slider["properties"]["spec"]["properties"]["replicas"] == {"type": "integer", "minimum": 0, "default": 1}
    assert slider["properties"]["metadata"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}
    assert "/apis/example.com/v1/namespaces/{namespace}/sliders/{name}" in doc["paths"]
    assert "replicas\t<integer>" in kubectl(served, "explain", "sliders.spec").replace("  ", "\t").replace("\t\t", "\t")
    # kubectl's default validation (strict, on the server) with the published schema: no --validate=false
    slider_cr = "apiVersion: example.com/v1\nkind: Slider\nmetadata: {name: s1}\nspec: {color: red}\n"
    assert "slider.example.com/s1 created" in kubectl(served, "apply", "-f", "-", stdin=slider_cr)
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=slider_cr.replace("s1", "s2").replace("red", "red, x: 1"),
                       capture_output=True, text=True, timeout=60,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)})
    assert r.returncode != 0 and 'unknown field "spec.x"' in r.stderr
    # a change of the CRD's schema changes the published document
    crd = f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sliders.example.com"
    versions = web.get(crd).json()["spec"]["versions"]
    versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {"type": "string"}
    web.patch(crd, json={"spec": {"versions": versions}},
              headers={"content-type": "application/merge-patch+json"}).raise_for_status()
    doc = web.get(f"{served.url}/openapi/v3/apis/example.com/v1").json()
    assert "size" in doc["components"]["schemas"]["com.example.v1.Slider"]["properties"]["spec"]["properties"]


def test_server_side_apply_of_a_crd_and_its_resources(served: Serve) -> None:
    crd = WIDGETS.replace("widgets", "levels").replace("Widget", "Level").replace("widget", "level") \
        .replace("[wd]", "[lv]").replace("[gadgets]", "[]")
    assert "serverside-applied" in kubectl(served, "apply", "--server-side", "-f", "-", stdin=crd)
    level = "apiVersion: example.com/v1\nkind: Level\nmetadata: {name: l1}\nspec: {color: red}\n"
    assert "serverside-applied" in kubectl(served, "apply", "--server-side", "-f", "-", stdin=level)
    assert kubectl(served, "get", "level", "l1", "-o", "jsonpath={.spec.replicas}") == "1"  # defaulted
    kubectl(served, "apply", "--server-side", "-f", "-", stdin=level.replace("{color: red}", "{color: blue}"))
    assert kubectl(served, "get", "lv", "l1", "-o", "jsonpath={.spec.color}") == "blue"
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "--server-side", "-f", "-"], input=level.replace("red", "pink"),
                       capture_output=True, text=True, timeout=60,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)})
    assert r.returncode != 0 and 'spec.color: Unsupported value: "pink"' in r.stderr
    # a server-side apply that changes the CRD's columns changes what is served
    wider = crd.replace("- {name: Color, type: string, jsonPath: .spec.color}",
                        "- {name: Colour, type: string, jsonPath: .spec.color}")
    kubectl(served, "apply", "--server-side", "-f", "-", stdin=wider)
    assert kubectl(served, "get", "levels").splitlines()[0].split() == ["NAME", "REPLICAS", "COLOUR", "AGE"]



def test_kubectl_apply_updates_a_custom_resource_with_a_merge_patch(served: Serve) -> None:
    """kubectl's client-side apply sends a strategic merge patch where the OpenAPI operation
    lists one: a custom resource's must not (it has no patch schema; upstream answers 415)."""
    kubectl(served, "apply", "-f", "-", stdin=WIDGETS)
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: reapplied}\nspec: {color: red, replicas: 1}\n"
    kubectl(served, "apply", "-f", "-", stdin=widget)
    out = kubectl(served, "apply", "-f", "-", stdin=widget.replace("replicas: 1", "replicas: 2"))
    assert "widget.example.com/reapplied configured" in out
    assert kubectl(served, "get", "widget", "reapplied", "-o", "jsonpath={.spec.replicas}") == "2"
    doc = authed(served).get(served.url + "/openapi/v3/apis/example.com/v1").json()
    patch = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    builtin = authed(served).get(served.url + "/openapi/v3/apis/apps/v1").json()
    deployments = builtin["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in deployments["requestBody"]["content"]

RULED_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: quotas.ruled.example.com}
spec:
  group: ruled.example.com
  names: {kind: Quota, plural: quotas, singular: quota}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.min <= self.max", message: "min must not exceed max"}
            properties:
              min: {type: integer}
              max: {type: integer}
"""


def test_kubectl_sees_a_crds_cel_rules_enforced(served: Serve) -> None:
    """Operators' CRDs validate with CEL (``x-kubernetes-validations``): a resource that
    breaks a rule is upstream's 422, worded as upstream words it."""
    kubectl(served, "apply", "-f", "-", stdin=RULED_CRD)
    ok = "apiVersion: ruled.example.com/v1\nkind: Quota\nmetadata: {name: q}\nspec: {min: 1, max: 5}\n"
    kubectl(served, "apply", "-f", "-", stdin=ok)
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=ok.replace("min: 1", "min: 9"), capture_output=True,
                       text=True, env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    assert 'The Quota "q" is invalid: spec: Invalid value: min must not exceed max' in r.stderr
    assert kubectl(served, "get", "quotas.ruled.example.com", "q", "-o", "jsonpath={.spec.min}") == "1"


ESCAPED_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: routes.ruled.example.com}
spec:
  group: ruled.example.com
  names: {kind: Route, plural: routes, singular: route}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.foo__dash__bar > 0", message: "foo-bar must be positive"}
            - {rule: "!has(self.x__dot__y) || self.x__dot__y.startsWith('v')",
               messageExpression: "'x.y is ' + self.x__dot__y"}
            - {rule: "!has(self.__namespace__) || self.__namespace__ != 'kube-system'"}
            - {rule: "self.foo__dash__bar >= oldSelf.foo__dash__bar", message: "foo-bar may only grow"}
            properties:
              foo-bar: {type: integer}
              x.y: {type: string}
              namespace: {type: string}
              backends:
                type: array
                items:
                  type: object
                  x-kubernetes-validations: [{rule: "self.a__slash__b.size() <= 3", message: "a/b too long"}]
                  properties:
                    a/b: {type: string}
"""


def test_kubectl_sees_rules_on_escaped_property_names_run(served: Serve) -> None:
    """Properties whose names are not CEL identifiers (``foo-bar``, ``x.y``, ``a/b``, the
    reserved word ``namespace``) are selected by upstream's escaped names
    (``foo__dash__bar``, ``x__dot__y``, ``a__slash__b``, ``__namespace__``), in ``has()``,
    message expressions, transition rules and items of lists too; a 422 as upstream's."""
    kubectl(served, "apply", "-f", "-", stdin=ESCAPED_CRD)
    route = "apiVersion: ruled.example.com/v1\nkind: Route\nmetadata: {name: r}\nspec: %s\n"
    ok = '{foo-bar: 2, x.y: v1, namespace: apps, backends: [{a/b: abc}]}'
    assert "route.ruled.example.com/r created" in kubectl(served, "apply", "-f", "-", stdin=route % ok)

    def refused(spec: str) -> str:
        assert KUBECTL
        r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=route % spec, capture_output=True, text=True,
                           env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
        assert r.returncode != 0
        return r.stderr.strip()

    invalid = 'The Route "r" is invalid: '
    assert refused(ok.replace("x.y: v1", "x.y: w1")) == f"{invalid}spec: Invalid value: x.y is w1"
    assert refused(ok.replace("apps", "kube-system")) == (
        f"{invalid}spec: Invalid value: failed rule: !has(self.__namespace__) || self.__namespace__ != 'kube-system'")
    assert refused(ok.replace("abc", "abcd")) == f"{invalid}spec.backends[0]: Invalid value: a/b too long"
    assert refused(ok.replace("foo-bar: 2", "foo-bar: 1")) == f"{invalid}spec: Invalid value: foo-bar may only grow"
    missing = 'spec: Invalid value: "object": no such key: foo__dash__bar evaluating rule: foo-bar'
    assert [line.strip() for line in refused(ok.replace("foo-bar: 2, ", "")).splitlines()] == [
        invalid.strip(), f"* {missing} must be positive", f"* {missing} may only grow"]
    assert "route.ruled.example.com/r configured" in kubectl(
        served, "apply", "-f", "-", stdin=route % ok.replace("foo-bar: 2", "foo-bar: 3"))
    assert kubectl(served, "get", "routes", "r", "-o", "jsonpath={.spec.foo-bar}") == "3"
    # a misspelt escaped name is refused as the CRD is written, as cel-go's checker refuses it
    env = {"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}
    r = subprocess.run([KUBECTL or "", "apply", "-f", "-"], capture_output=True, text=True, env=env, timeout=60,
                       input=ESCAPED_CRD.replace("self.foo__dash__bar > 0", "self.foo__dash__baz > 0"))
    assert r.returncode != 0 and "undefined field 'foo__dash__baz'" in r.stderr


def test_kubectl_scale_of_a_custom_resource_owns_its_replicas(served: Serve) -> None:
    kubectl(served, "apply", "--validate=false", "-f", "-", stdin=WIDGETS)
    applied = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w-owned}\nspec: {color: red, replicas: 1}\n"
    kubectl(served, "apply", "--server-side", "-f", "-", stdin=applied)
    kubectl(served, "scale", "wd", "w-owned", "--replicas=3")
    got = orjson.loads(kubectl(served, "get", "wd", "w-owned", "-o", "json", "--show-managed-fields"))
    [entry] = [e for e in got["metadata"]["managedFields"] if e.get("subresource") == "scale"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Update", "example.com/v1")
    assert entry["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "--server-side", "-f", "-"], input=applied, capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode != 0
    assert ('Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using example.com/v1: '
            ".spec.replicas") in r.stderr
    assert kubectl(served, "get", "wd", "w-owned", "-o", "jsonpath={.spec.replicas}") == "3"


LOCKS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: locks.ruled.example.com}
spec:
  group: ruled.example.com
  scope: Namespaced
  names: {plural: locks, singular: lock, kind: Lock}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size >= oldSelf.size", message: size may only grow}
            properties:
              size: {type: integer}
              owner:
                type: string
                x-kubernetes-validations: [{rule: "self == oldSelf", message: owner is immutable}]
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer, x-kubernetes-validations: [{rule: "self == oldSelf", message: fixed}]}
"""


def test_transition_rules_compare_an_update_with_the_stored_object(served: Serve, api: client.ApiClient) -> None:
    """CEL rules naming ``oldSelf`` (immutability, only-grow) run on updates, against the
    stored object's value at the same place; a create, or a value the old object lacked,
    does not run them. Rules are not run on an object of the wrong shape, as upstream."""
    kubectl(served, "apply", "-f", "-", stdin=LOCKS_CRD)
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "ruled.example.com", "v1", "default", "locks"
    co.create_namespaced_custom_object(g, v, ns, plural, {
        "apiVersion": f"{g}/{v}", "kind": "Lock", "metadata": {"name": "l1"},
        "spec": {"size": 2, "ports": [{"name": "a", "port": 1}]}})

    locks = dynamic.DynamicClient(api).resources.get(api_version=f"{g}/{v}", kind="Lock")

    def refused(patch: object, content_type: str = "application/merge-patch+json") -> str:
        with pytest.raises(ApiException) as err:
            locks.patch(name="l1", namespace=ns, body=patch, content_type=content_type)
        assert err.value.status == 422
        return str(orjson.loads(err.value.body)["message"])

    assert refused({"spec": {"size": 1}}) == 'Lock.ruled.example.com "l1" is invalid: spec: Invalid value: ' \
                                            "size may only grow"
    co.patch_namespaced_custom_object(g, v, ns, plural, "l1", {"spec": {"owner": "me", "size": 3}})  # new: no oldSelf
    assert refused([{"op": "replace", "path": "/spec/owner", "value": "you"}], "application/json-patch+json") == \
        'Lock.ruled.example.com "l1" is invalid: spec.owner: Invalid value: "you": owner is immutable'
    # list-type map items are correlated by key: "a" keeps its port, "b" is new
    co.patch_namespaced_custom_object(g, v, ns, plural, "l1", {"spec": {"ports": [{"name": "b", "port": 7},
                                                                                  {"name": "a", "port": 1}]}})
    assert refused({"spec": {"ports": [{"name": "a", "port": 2}]}}).endswith(
        'spec.ports[0].port: Invalid value: 2: fixed')
    assert refused({"spec": {"size": "big"}}) == (
        'Lock.ruled.example.com "l1" is invalid: [spec.size: Invalid value: "string": spec.size in body must be of '
        'type integer: "string", <nil>: Invalid value: null: some validation rules were not checked because the '
        "object was invalid; correct the existing errors to complete validation]")
    got = as_dict(co.get_namespaced_custom_object(g, v, ns, plural, "l1"))
    assert got["spec"] == {"size": 3, "owner": "me", "ports": [{"name": "b", "port": 7}, {"name": "a", "port": 1}]}


def test_deleting_an_object_with_finalizers_counts_a_generation(api: client.ApiClient) -> None:
    """The first ``deletionTimestamp`` bumps ``metadata.generation`` (upstream's
    markAsDeleting), so operators filtering on generation changes see the deletion."""
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd_model("latches", "Latch"))
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "example.com", "v1", "default", "latches"
    co.create_namespaced_custom_object(g, v, ns, plural, {
        "apiVersion": f"{g}/{v}", "kind": "Latch", "metadata": {"name": "l1", "finalizers": ["example.com/hold"]},
        "spec": {"color": "red"}})
    deleted = as_dict(co.delete_namespaced_custom_object(g, v, ns, plural, "l1",
                                                         body=client.V1DeleteOptions(grace_period_seconds=30)))
    meta = deleted["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0 and meta["generation"] == 2
    co.delete_namespaced_custom_object(g, v, ns, plural, "l1")  # already deleting: no other generation
    got = as_dict(co.get_namespaced_custom_object(g, v, ns, plural, "l1"))["metadata"]
    assert got["generation"] == 2 and got["deletionTimestamp"] == meta["deletionTimestamp"]
    co.patch_namespaced_custom_object(g, v, ns, plural, "l1", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        co.get_namespaced_custom_object(g, v, ns, plural, "l1")
    assert err.value.status == 404


def test_pruned_fields_are_owned_by_no_manager(api: client.ApiClient) -> None:
    """Unknown fields are pruned as the object is decoded, before the field manager
    sees it: managedFields never name them (create, update, patch, status)."""
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd_model("pawls", "Pawl"))
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "example.com", "v1", "default", "pawls"

    def owned(obj: object) -> list[Any]:
        entries = as_dict(obj)["metadata"]["managedFields"]
        return [(e["manager"], e.get("subresource", ""), e["fieldsV1"]) for e in entries]

    made = co.create_namespaced_custom_object(g, v, ns, plural, {
        "apiVersion": f"{g}/{v}", "kind": "Pawl", "metadata": {"name": "p1"}, "spec": {"color": "red", "junk": 1}})
    assert owned(made) == [("OpenAPI-Generator", "", {"f:spec": {"f:color": {}, "f:replicas": {}}})]
    co.patch_namespaced_custom_object(g, v, ns, plural, "p1", {"spec": {"color": "blue", "more": {"a": 1}}})
    got = co.patch_namespaced_custom_object_status(g, v, ns, plural, "p1", {"status": {"replicas": 1, "tick": "x"}})
    assert as_dict(got)["status"] == {"replicas": 1}
    [main, status] = owned(got)
    assert main == ("OpenAPI-Generator", "", {"f:spec": {"f:color": {}, "f:replicas": {}}})
    assert status[:2] == ("OpenAPI-Generator", "status") and "f:tick" not in status[2]["f:status"]


def test_kubectl_creates_a_resource_whose_schema_has_no_status_under_strict_validation(served: Serve) -> None:
    """kubectl's default ``--validate`` is Strict: a create must not report the status
    the server drops (a status subresource, a schema without ``status``) as unknown."""
    crd = WIDGETS.replace("widgets", "knobs").replace("Widget", "Knob").replace("widget", "knob") \
        .replace("[wd]", "[kn]").replace("[gadgets]", "[]")
    crd = crd[:crd.index("          status:")]
    kubectl(served, "apply", "-f", "-", stdin=crd)
    knob = "apiVersion: example.com/v1\nkind: Knob\nmetadata: {name: k1}\nspec: {color: red}\n"
    assert "knob.example.com/k1 created" in kubectl(served, "apply", "-f", "-", stdin=knob)
    assert "knob.example.com/k2 created" in kubectl(served, "create", "-f", "-", stdin=knob.replace("k1", "k2"))
    assert "knob.example.com/k1 configured" in kubectl(served, "apply", "-f", "-",
                                                       stdin=knob.replace("red", "blue"))
    obj = yaml.safe_load(kubectl(served, "get", "knob", "k1", "-o", "yaml"))
    assert obj["spec"] == {"color": "blue", "replicas": 1} and "status" not in obj


def test_a_crd_whose_rule_does_not_compile_is_refused(served: Serve) -> None:
    """A rule is compiled at its CRD's write, as upstream's: one that does not parse is a 422
    on its path, the bad value the whole rule; kubectl shows the cause."""
    bad = renamed(LOCKS_CRD, "hasp").replace("self.size >= oldSelf.size", "self.size >=")
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    # one version's schema: upstream's internal CRD holds it at spec.validation, where its errors are
    assert ('The CustomResourceDefinition "hasps.ruled.example.com" is invalid: spec.validation.openAPIV3Schema'
            '.properties[spec].x-kubernetes-validations[0].rule: Invalid value: '
            'apiextensions.ValidationRule{Rule:"self.size >=", Message:"size may only grow", '
            'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
            "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:13: Syntax error: ") in r.stderr
    web = authed(served)
    assert web.get(f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "hasps.ruled.example.com").status_code == 404


def test_a_crd_whose_rule_does_not_type_check_is_refused(served: Serve) -> None:
    """A rule is type-checked against its schema at its CRD's write, as upstream's cel-go
    checker: a field the schema lacks, or a string compared with an int, is a 422 on the
    rule's path in cel-go's words and columns; kubectl shows it as upstream prints it."""
    bad = renamed(LOCKS_CRD, "latch").replace("self.size >= oldSelf.size", "self.sise >= oldSelf.size") \
        .replace('"self == oldSelf", message: owner', '"self > 5", message: owner')
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    prefix = ("spec.validation.openAPIV3Schema.properties[spec]{}.x-kubernetes-validations[0].rule: Invalid value: "
              'apiextensions.ValidationRule{{Rule:"{}", Message:"{}", MessageExpression:"", '
              'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}}: ')
    assert 'The CustomResourceDefinition "latchs.ruled.example.com" is invalid: \n' in r.stderr
    assert prefix.format("", "self.sise >= oldSelf.size", "size may only grow") + (
        "compilation failed: ERROR: <input>:1:5: undefined field 'sise'\n"
        " | self.sise >= oldSelf.size\n"
        " | ....^") in r.stderr
    assert prefix.format(".properties[owner]", "self > 5", "owner is immutable") + (
        "compilation failed: ERROR: <input>:1:6: found no matching overload for '_>_' applied to '(string, int)'\n"
        " | self > 5\n"
        " | .....^") in r.stderr
    web = authed(served)
    assert web.get(f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "latchs.ruled.example.com").status_code == 404
    fixed = bad.replace("self.sise", "self.size").replace('"self > 5"', '"self.size() > 5"')
    assert "latchs.ruled.example.com created" in kubectl(served, "apply", "-f", "-", stdin=fixed)


def renamed(crd: str, name: str) -> str:
    """LOCKS_CRD for a kind of another name, so that a test changing it changes no other's."""
    return crd.replace("locks", f"{name}s").replace("lock", name).replace("Lock", name.capitalize())


TIERS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tiers.ruled.example.com}
spec:
  group: ruled.example.com
  scope: Namespaced
  names: {plural: tiers, singular: tier, kind: Tier}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!format.dns1123Label().validate(self.?owner.orValue('nobody')).hasValue()"
              messageExpression: "format.dns1123Label().validate(self.owner).value()[0]"
            properties:
              owner: {type: string}
              level:
                type: string
                x-kubernetes-validations:
                - {rule: "oldSelf.hasValue() || self != 'gold'", optionalOldSelf: true, message: gold is earned}
"""


def test_optional_old_self_the_optional_syntax_and_the_format_library(served: Serve, api: client.ApiClient) -> None:
    """Rules as Gateway API and Cluster API write them: ``optionalOldSelf`` rules run on a
    create too (``oldSelf`` none), ``self.?f.orValue(...)`` and the format library work."""
    kubectl(served, "apply", "-f", "-", stdin=TIERS_CRD)
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "ruled.example.com", "v1", "default", "tiers"

    def create(name: str, spec: dict[str, Any]) -> None:
        co.create_namespaced_custom_object(g, v, ns, plural, {
            "apiVersion": f"{g}/{v}", "kind": "Tier", "metadata": {"name": name}, "spec": spec})

    with pytest.raises(ApiException) as err:
        create("t1", {"level": "gold"})
    assert err.value.status == 422
    assert orjson.loads(err.value.body)["message"] == \
        'Tier.ruled.example.com "t1" is invalid: spec.level: Invalid value: "gold": gold is earned'
    create("t1", {"level": "silver"})
    co.patch_namespaced_custom_object(g, v, ns, plural, "t1", {"spec": {"level": "gold"}})  # now it has an old value
    with pytest.raises(ApiException) as err:
        create("t2", {"owner": "Me"})
    assert orjson.loads(err.value.body)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec",
        "message": "Invalid value: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                   "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
                   "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}]
    create("t2", {"owner": "me"})


def test_a_rule_failure_ratcheted_on_an_update_is_a_warning(served: Serve) -> None:
    """A CRD made stricter lets an object it would now refuse be updated where the update
    leaves the failing value as it was; upstream sends that rule's failure as a warning."""
    pins = renamed(LOCKS_CRD, "pin")
    kubectl(served, "apply", "-f", "-", stdin=pins)
    web = authed(served)
    objects = f"{served.url}/apis/ruled.example.com/v1/namespaces/default/pins"
    assert web.post(objects, json={"apiVersion": "ruled.example.com/v1", "kind": "Pin", "metadata": {"name": "p9"},
                                   "spec": {"size": 9, "owner": "me"}}).status_code == 201
    stricter = pins.replace("properties:\n              size: {type: integer}",
                            "properties:\n              size: {type: integer, x-kubernetes-validations: "
                            "[{rule: 'self < 5', message: at most 4}]}")
    assert stricter != pins
    kubectl(served, "apply", "-f", "-", stdin=stricter)
    answer = web.patch(f"{objects}/p9", json={"metadata": {"labels": {"a": "b"}}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status_code == 200, answer.text
    assert answer.headers.get_list("warning") == ['299 - "spec.size: Invalid value: 9: at most 4"']
    refused = web.patch(f"{objects}/p9", json={"spec": {"size": 10}},
                        headers={"Content-Type": "application/merge-patch+json"})
    assert refused.status_code == 422
    assert refused.json()["message"] == \
        'Pin.ruled.example.com "p9" is invalid: spec.size: Invalid value: 10: at most 4'


TAGS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tags.costly.example.com}
spec:
  group: costly.example.com
  scope: Namespaced
  names: {plural: tags, singular: tag, kind: Tag}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              names:
                type: array
                items: {type: string}
                x-kubernetes-validations:
                - {rule: "self.all(x, x.matches('^[a-z]+$'))", message: names are lower case}
"""


def test_a_crd_whose_rule_costs_too_much_is_refused(served: Serve) -> None:
    """A rule whose estimated cost is over upstream's limit (a regex over each of as many
    strings as a request holds, each as long as a request) is refused at the CRD's write with
    upstream's Forbidden causes: the rule's, then the schema's total; bounded by maxItems and
    maxLength, the same rule is accepted."""
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=TAGS_CRD, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    at = "spec.validation.openAPIV3Schema"
    hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and " \
           "strings are declared)"
    assert 'The CustomResourceDefinition "tags.costly.example.com" is invalid: \n' in r.stderr
    assert (f"* {at}.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule "
            f"cost exceeds budget by factor of more than 100x {hint}\n") in r.stderr
    assert (f"* {at}.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: contributed to "
            "estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema\n") \
        in r.stderr
    assert (f"* {at}: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire "
            f"OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}") in r.stderr
    web = authed(served)
    assert web.get(f"{served.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "tags.costly.example.com").status_code == 404
    bounded = TAGS_CRD.replace("items: {type: string}",
                               "maxItems: 64\n                items: {type: string, maxLength: 63}")
    assert "tags.costly.example.com created" in kubectl(served, "apply", "-f", "-", stdin=bounded)


def test_a_crd_whose_rule_names_an_undeclared_function_is_refused(served: Serve) -> None:
    """A name that is neither a variable nor a function of Kubernetes' CEL environment is an
    undeclared reference in cel-go's words, at the call's parenthesis."""
    bad = renamed(LOCKS_CRD, "bolt").replace("self.size >= oldSelf.size", "self.size >= lengthOf(oldSelf)")
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    assert ("compilation failed: ERROR: <input>:1:22: undeclared reference to 'lengthOf' (in container '')\n"
            " | self.size >= lengthOf(oldSelf)\n"
            " | .....................^") in r.stderr


def test_a_merge_patch_drops_the_nulls_of_the_maps_inside_its_lists(api: client.ApiClient) -> None:
    # The Python client's dicts carry None for what they leave unset; upstream's merge patch
    # (json-patch's MergePatch) drops the null fields of every map it brings in, in the maps
    # inside its lists too. They were stored as nulls in the fields a schema preserves.
    body = crd_body("trinkets", "Trinket")
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["free"] = {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    model = client.V1CustomResourceDefinition.from_dict(body)
    assert model is not None
    client.ApiextensionsV1Api(api).create_custom_resource_definition(model)
    co = client.CustomObjectsApi(api)
    g, v, ns, plural = "example.com", "v1", "default", "trinkets"
    co.create_namespaced_custom_object(g, v, ns, plural, {
        "apiVersion": "example.com/v1", "kind": "Trinket", "metadata": {"name": "t"},
        "spec": {"color": "red", "free": {"kept": {"a": 1}, "list": [1]}}})
    patched = as_dict(co.patch_namespaced_custom_object(g, v, ns, plural, "t", {"spec": {"free": {
        "list": [{"x": None, "y": 1}, None, {"z": {"w": None}}],
        "new": [{"q": None}],
        "kept": [{"r": None}],  # a list over a map: taken as sent, as upstream's library takes it
    }}}))
    assert patched["spec"]["free"] == {"list": [{"y": 1}, None, {"z": {}}], "new": [{}], "kept": [{"r": None}]}
    assert as_dict(co.get_namespaced_custom_object(g, v, ns, plural, "t"))["spec"] == patched["spec"]
