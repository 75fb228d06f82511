"""Bad query parameters, metadata and subresource requests over a real socket, as
kube-apiserver answers them: a Status of the right code and reason, never a 500, and the
stored objects untouched. Each case is one a hand-run sweep of the discovery document
(every resource and subresource, each verb) found answered otherwise."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.client import Client
from tests.front_socket import front_on_socket

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
JSON = {"Content-Type": "application/json"}


@dataclass
class Served:
    http: httpx.AsyncClient  # over the socket
    client: Client  # in process, for seeding and reading back


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with front_on_socket(tmp_path) as (port, c), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield Served(http, c)


def status(r: httpx.Response, code: int, reason: str) -> str:
    """The response's Status message, once its code and reason are checked."""
    body = r.json()
    assert (r.status_code, body["kind"], body["code"], body.get("reason")) == (code, "Status", code, reason), body
    return str(body["message"])


def widget_crd() -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"spec": {
                             "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"replicas": {"type": "integer"}}}}}}}]}}


@pytest.mark.parametrize(("param", "value"), [
    ("limit", "99999999999999999999"),  # past an int64: strconv.ParseInt's range error
    ("limit", "1_000"),  # Python's int takes it, Go's does not
    ("timeoutSeconds", "x"),  # a list decodes it too, though it has no use for it
    ("timeoutSeconds", "99999999999999999999"),
])
async def test_a_lists_integer_parameters_parse_as_gos_int64(served: Served, param: str, value: str) -> None:
    r = await served.http.get(CMS, params={param: value})
    assert status(r, 400, "BadRequest") == f"invalid {param}: {value!r}"
    r = await served.http.get(CMS, params={param: value, "watch": "1"})
    assert r.status_code == 400
    assert (await served.http.get(CMS, params={"limit": "+2", "timeoutSeconds": "-1"})).status_code == 200


async def test_a_watch_with_a_negative_timeout_ends_at_once(served: Served) -> None:
    # no error upstream: the watch's context and timer are past their deadline when it
    # starts, and the stream ends (it was a 400 here); the initial events ready at once may
    # come first, as upstream's watch server picks among its ready cases at random
    await served.client.create(CMS, {"metadata": {"name": "c"}})
    rv = (await served.client.get(CMS))["metadata"]["resourceVersion"]
    r = await asyncio.wait_for(served.http.get(CMS, params={"watch": "1", "timeoutSeconds": "-1"}), 5)
    assert r.status_code == 200
    assert all(json.loads(line)["object"]["metadata"]["name"] == "c" for line in r.content.splitlines())
    r = await asyncio.wait_for(served.http.get(CMS, params={"watch": "1", "resourceVersion": rv,
                                                            "timeoutSeconds": "-9223372036854775808"}), 5)
    assert (r.status_code, r.content) == (200, b"")


async def test_a_delete_options_bodys_preconditions_are_typed(served: Served) -> None:
    created = await served.client.create(CMS, {"metadata": {"name": "c"}})
    for body, message in [('{"preconditions": "x"}', "preconditions must be an object, not 'x'"),  # was a 500
                          ('{"preconditions": {"uid": 5}}', "preconditions.uid must be a string, not 5")]:
        r = await served.http.request("DELETE", f"{CMS}/c", content=body, headers=JSON)
        assert status(r, 400, "BadRequest") == message
    assert (await served.client.get(f"{CMS}/c"))["metadata"]["uid"] == created["metadata"]["uid"]


async def test_an_apply_with_an_unsupported_field_validation_is_422(served: Served) -> None:
    await served.client.create(CMS, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    r = await served.http.patch(f"{CMS}/c", params={"fieldManager": "m", "fieldValidation": "Bogus"},
                                content="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '2'}",
                                headers={"Content-Type": "application/apply-patch+yaml"})
    assert status(r, 422, "Invalid") == ('PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported '
                                         'value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"')
    assert (await served.client.get(f"{CMS}/c"))["data"] == {"a": "1"}


async def test_an_apply_that_creates_needs_its_own_name_and_no_uid(served: Served) -> None:
    # upstream's patcher applies a create to an empty object and then checks what came out
    # (applyPatch): with no name of its own the object has none, whatever the URL says, and a
    # uid names an object that does not exist. Both were created here, named after the URL.
    apply = {"Content-Type": "application/apply-patch+yaml"}
    for body in ("apiVersion: v1\nkind: ConfigMap\ndata: {a: '1'}",
                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}\ndata: {a: '1'}"):
        r = await served.http.patch(f"{CMS}/c", params={"fieldManager": "m"}, content=body, headers=apply)
        assert status(r, 400, "BadRequest") == ("the name of the object (c based on URL) was undeterminable: "
                                                "name must be provided")
    uid = "6b3e1c0a-0000-4000-8000-000000000001"
    r = await served.http.patch(f"{CMS}/c", params={"fieldManager": "m"}, headers=apply,
                                content=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, uid: {uid}}}")
    assert status(r, 409, "Conflict") == (f'Operation cannot be fulfilled on configmaps "c": uid mismatch: the '
                                          f"provided object specified uid {uid}, and no existing object was found")
    assert (await served.http.get(f"{CMS}/c")).status_code == 404
    # the object once there, an apply without the name applies to it
    r = await served.http.patch(f"{CMS}/c", params={"fieldManager": "m"}, headers=apply,
                                content="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1'}")
    assert r.status_code == 201, r.text
    r = await served.http.patch(f"{CMS}/c", params={"fieldManager": "m"}, headers=apply,
                                content="apiVersion: v1\nkind: ConfigMap\ndata: {a: '2'}")
    assert r.status_code == 200 and r.json()["data"] == {"a": "2"}, r.text


@pytest.mark.parametrize(("meta", "message"), [
    ({"labels": {"a": 1}}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type "
                           "string"),
    ({"finalizers": [1]}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of "
                          "type string"),
    ({"ownerReferences": "x"}, "json: cannot unmarshal string into Go struct field ObjectMeta.metadata."
                               "ownerReferences of type []v1.OwnerReference"),
    ({"creationTimestamp": 5}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata."
                               "creationTimestamp of type v1.Time"),
    ({"generation": "x"}, "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of "
                          "type int64"),
    ({"name": 5}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"),
    ({"generateName": 5}, "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.generateName of "
                          "type string"),
])
async def test_a_custom_resources_metadata_decodes_as_object_meta(served: Served, meta: dict[str, Any],
                                                                  message: str) -> None:
    # stored as sent, these broke every typed reader of the resource (a name or generateName of
    # another type was a 500); a patch of the stored object that makes one is refused too
    await served.client.create(CRDS, widget_crd())
    stored = await served.client.create(WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                                                  "metadata": {"name": "w"}, "spec": {"x": 1}})
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "v", **meta}}
    r = await served.http.post(WIDGETS, json=body)
    assert status(r, 400, "BadRequest") == f'Widget in version "v1" cannot be handled as a Widget: {message}'
    if "name" not in meta:
        r = await served.http.patch(f"{WIDGETS}/w", json={"metadata": meta},
                                    headers={"Content-Type": "application/merge-patch+json"})
        assert status(r, 422, "Invalid").endswith(message)
    listed = await served.client.get(WIDGETS)
    assert [i["metadata"] for i in listed["items"]] == [stored["metadata"]]


async def test_a_custom_resources_null_annotation_is_the_empty_string(served: Served) -> None:
    await served.client.create(CRDS, widget_crd())
    r = await served.http.post(WIDGETS, json={"apiVersion": "example.com/v1", "kind": "Widget",
                                              "metadata": {"name": "w", "annotations": {"a": None}}})
    assert r.status_code == 201 and r.json()["metadata"]["annotations"] == {"a": ""}


async def test_an_eviction_names_its_pod(served: Served) -> None:
    await served.client.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    for body in ("", "{}", '{"apiVersion": "policy/v1", "kind": "Eviction"}'):  # each evicted the pod
        r = await served.http.post(f"{PODS}/p/eviction", content=body, headers=JSON)
        assert status(r, 400, "BadRequest") == "name in URL does not match name in Eviction object"
    assert (await served.client.get(f"{PODS}/p"))["metadata"].get("deletionTimestamp") is None


async def test_a_scale_put_names_its_object_and_other_verbs_are_405(served: Served) -> None:
    await served.client.create(DEPLOYMENTS, {"metadata": {"name": "d"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    for body in ("{}", '{"spec": {"replicas": 5}}'):  # {} scaled the Deployment to zero
        r = await served.http.put(f"{DEPLOYMENTS}/d/scale", content=body, headers=JSON)
        assert status(r, 400, "BadRequest") == ("the name of the object (d based on URL) was undeterminable: "
                                                "name must be provided")
    r = await served.http.put(f"{DEPLOYMENTS}/d/scale", json={"metadata": {"name": "d"}, "status": []})
    assert status(r, 400, "BadRequest").endswith("cannot unmarshal array into Go struct field Scale.status of type "
                                                 "v1.ScaleStatus")
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 2
    # no such route, whether the object exists or not: 405 before the lookup (it was a 404)
    for name in ("d", "missing"):
        for method in ("POST", "DELETE"):
            r = await served.http.request(method, f"{DEPLOYMENTS}/{name}/scale")
            status(r, 405, "MethodNotAllowed")


async def test_a_path_with_a_percent_that_is_no_escape_is_a_plain_400(served: Served) -> None:
    # Go's request parsing refuses it (net/http's own "400 Bad Request"); it was read as the
    # namespace "%zz", and a list of it answered 200
    port = served.http.base_url.port
    for target in (b"/api/v1/namespaces/%zz/configmaps", b"/api/v1/namespaces/default/configmaps/a%2"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 10)  # then the connection closes
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    # an escape that is one still names its object
    await served.client.create(CMS, {"metadata": {"name": "a-b"}})
    assert (await served.http.get(f"{CMS}/a%2Db")).status_code == 200


@pytest.mark.parametrize("replicas", [2**63, -(2**63) - 1, 2**70, 1e300, 2.0**53])
async def test_a_custom_resources_integer_past_what_go_decodes_as_one_is_a_number(served: Served,
                                                                                  replicas: Any) -> None:
    # Go decodes a number past an int64 as a float64, which kube-openapi takes for an integer
    # only up to 2**53 - 1: these were stored (2**70 read back as 1.1805916207174113e+21)
    await served.client.create(CRDS, widget_crd())
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": replicas}}
    r = await served.http.post(WIDGETS, content=json.dumps(body), headers=JSON)
    assert status(r, 422, "Invalid") == ('Widget.example.com "w" is invalid: spec.replicas: Invalid value: "number": '
                                         'spec.replicas in body must be of type integer: "number"')
    for fine in (2**63 - 1, -(2**63), 2.0**53 - 1, 1.0):
        body["spec"] = {"replicas": fine}
        r = await served.http.post(WIDGETS, content=json.dumps(body), params={"dryRun": "All"}, headers=JSON)
        assert r.status_code == 201, r.text


async def test_a_custom_resources_unknown_metadata_field_is_dropped_and_reported(served: Served) -> None:
    await served.client.create(CRDS, widget_crd())
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "bogus": 1}}
    r = await served.http.post(WIDGETS, json=body, params={"fieldValidation": "Strict"})
    assert status(r, 400, "BadRequest") == ('Widget in version "v1" cannot be handled as a Widget: strict decoding '
                                            'error: unknown field "metadata.bogus"')
    r = await served.http.post(WIDGETS, json=body)
    assert r.status_code == 201 and r.headers["warning"] == '299 - "unknown field \\"metadata.bogus\\""'
    assert "bogus" not in (await served.client.get(f"{WIDGETS}/w"))["metadata"]


@pytest.mark.parametrize("selector", ["a" * 64 + "=b", "a/b/c=d", "!" + "x" * 64])
async def test_a_label_selectors_keys_are_qualified_names(served: Served, selector: str) -> None:
    # (they matched nothing, and a list answered 200 with no items)
    r = await served.http.get(CMS, params={"labelSelector": selector})
    assert status(r, 400, "BadRequest").startswith('unable to parse requirement: <nil>: Invalid value: "')
    assert (await served.http.get(CMS, params={"labelSelector": "example.com/" + "a" * 63 + "=b"})).status_code == 200


@pytest.mark.parametrize(("selector", "message"), [
    # each was answered in this server's own words ("unbalanced parentheses in 'a in (b'",
    # "empty requirement in selector 'a,'", "invalid label value 'b=c' in selector 'a=b=c'")
    ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a,", "found '', expected: identifier after ','"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("a (b)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
    ("a>b", "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value "
            "must be an integer"),
    ("a=-b", 'unable to parse requirement: values[0][a]: Invalid value: "-b": a valid label must be an empty string '
             "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
             "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
])
async def test_a_label_selector_is_parsed_by_upstreams_grammar(served: Served, selector: str, message: str) -> None:
    r = await served.http.get(CMS, params={"labelSelector": selector})
    assert status(r, 400, "BadRequest") == message


async def test_a_delete_collections_integer_parameters_are_checked_before_anything_goes(served: Served) -> None:
    await served.client.create(CMS, {"metadata": {"name": "c"}})
    for query in ({"limit": "x"}, {"timeoutSeconds": "1_0"}):
        r = await served.http.delete(CMS, params=query)
        assert status(r, 400, "BadRequest").startswith("invalid ")
    assert [i["metadata"]["name"] for i in (await served.client.get(CMS))["items"]] == ["c"]


async def test_a_binding_names_its_pod_in_its_namespace(served: Served) -> None:
    await served.client.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    target = {"kind": "Node", "name": "n"}
    cases: list[tuple[Any, str]] = [  # each of these bound the pod
            (None, "name in URL does not match name in Binding object"),
            ({"name": "other"}, "name in URL does not match name in Binding object"),
            ({"name": "p", "namespace": "elsewhere"},
             "the namespace of the provided object does not match the namespace sent on the request"),
            ([], 'Binding in version "v1" cannot be handled as a Binding: json: cannot unmarshal array into Go '
                 "struct field Binding.metadata of type v1.ObjectMeta")]
    for meta, message in cases:
        body = {"apiVersion": "v1", "kind": "Binding", "target": target} | ({} if meta is None else {"metadata": meta})
        r = await served.http.post(f"{PODS}/p/binding", json=body)
        assert status(r, 400, "BadRequest") == message
    assert "nodeName" not in (await served.client.get(f"{PODS}/p"))["spec"]
    r = await served.http.post(f"{PODS}/p/binding", json={"metadata": {"name": "p", "namespace": "default"},
                                                          "target": target})
    assert r.status_code == 201, r.text


async def test_a_bindings_metadata_decodes_and_its_uid_and_version_are_preconditions(served: Served) -> None:
    pod = await served.client.create(PODS, {"metadata": {"name": "p"},
                                            "spec": {"containers": [{"name": "c", "image": "i"}]}})
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    target = {"kind": "Node", "name": "n"}
    # decoded as a Binding first, as upstream's create handler: a uid of another type was taken
    for meta, why in [({"name": "p", "uid": 5}, "cannot unmarshal number into Go struct field ObjectMeta.metadata.uid"),
                      ({"name": "p", "annotations": {"a": 1}}, "cannot unmarshal number into Go struct field "
                                                               "ObjectMeta.metadata.annotations of type string"),
                      ({"uid": 5}, "cannot unmarshal number")]:  # before the name's check
        r = await served.http.post(f"{PODS}/p/binding", json={"metadata": meta, "target": target})
        message = status(r, 400, "BadRequest")
        assert message.startswith('Binding in version "v1" cannot be handled as a Binding: json: ') and why in message
    # BindingREST's storage preconditions: another pod's uid, or a changed pod, is a 409
    key = "/registry/pods/default/p"
    for meta, message in [
            ({"uid": "other"}, f"Precondition failed: UID in precondition: other, UID in object meta: {uid}"),
            ({"uid": uid, "resourceVersion": "1"},
             f"Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}")]:
        r = await served.http.post(f"{PODS}/p/binding", json={"metadata": {"name": "p"} | meta, "target": target})
        assert status(r, 409, "Conflict") == (f'Operation cannot be fulfilled on pods "p": StorageError: invalid '
                                              f"object, Code: 4, Key: {key}, ResourceVersion: 0, "
                                              f"AdditionalErrorMsg: {message}")
    assert "nodeName" not in (await served.client.get(f"{PODS}/p"))["spec"]
    r = await served.http.post(f"{PODS}/p/binding", json={"metadata": {"name": "p", "uid": uid, "resourceVersion": rv},
                                                          "target": target})
    assert r.status_code == 201, r.text
    assert (await served.client.get(f"{PODS}/p"))["spec"]["nodeName"] == "n"


async def test_a_namespaces_finalizers_are_validated_as_upstreams_finalize(served: Served) -> None:
    await served.client.create("/api/v1/namespaces", {"metadata": {"name": "n"}})
    ns = await served.client.get("/api/v1/namespaces/n")
    for finalizers, message in [  # each was stored
            (["bad name!"], 'Namespace "n" is invalid: [spec.finalizers[0]: Invalid value: "bad name!": name part '),
            (["mine"], 'Namespace "n" is invalid: spec.finalizers[0]: Invalid value: "mine": name is neither a '
                       "standard finalizer name nor is it fully qualified")]:
        r = await served.http.put("/api/v1/namespaces/n/finalize", json=ns | {"spec": {"finalizers": finalizers}})
        assert status(r, 422, "Invalid").startswith(message)
    assert (await served.client.get("/api/v1/namespaces/n"))["spec"] == {"finalizers": ["kubernetes"]}
    r = await served.http.put("/api/v1/namespaces/n/finalize",
                              json=ns | {"spec": {"finalizers": ["kubernetes", "example.com/mine"]}})
    assert r.status_code == 200, r.text


async def test_a_put_without_its_name_is_a_400_before_its_missing_spec(served: Served) -> None:
    # upstream's update handler checks the name (checkName) between decoding and validation:
    # a Deployment's `{}` lacked its spec first (422 "spec: Required value")
    missing = "the name of the object (d based on URL) was undeterminable: name must be provided"
    for body in ("{}", '{"metadata": {}}', '{"apiVersion": "apps/v1", "kind": "Deployment"}'):
        r = await served.http.put(f"{DEPLOYMENTS}/d", content=body, headers=JSON)
        assert status(r, 400, "BadRequest") == missing
    r = await served.http.put(f"{DEPLOYMENTS}/d", json={"metadata": {"name": "e"}})
    assert status(r, 400, "BadRequest") == "the name of the object (e) does not match the name on the URL (d)"
    r = await served.http.put(f"{CRDS}/widgets.example.com", content="{}", headers=JSON)
    assert status(r, 400, "BadRequest") == ("the name of the object (widgets.example.com based on URL) was "
                                            "undeterminable: name must be provided")
    # a body that does not decode is still refused as such first, and a named one lacks its spec
    r = await served.http.put(f"{DEPLOYMENTS}/d", json={"spec": []})
    assert "cannot unmarshal array" in status(r, 400, "BadRequest")
    r = await served.http.put(f"{DEPLOYMENTS}/d", json={"metadata": {"name": "d"}})
    assert status(r, 422, "Invalid") == 'Deployment.apps "d" is invalid: spec: Required value'


async def test_a_body_in_another_namespace_is_refused_in_each_handlers_words(served: Served) -> None:
    # a PUT's body is checked by the update handler's checkName, which names both namespaces; a
    # POST's (create.go) and a patched object's (patch.go) by EnsureObjectNamespaceMatchesRequestNamespace.
    # The Scale subresource's PUT and merge patch moved nothing but were answered 200.
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    await served.client.create(DEPLOYMENTS, deployment)
    await served.client.create(CMS, {"metadata": {"name": "c"}})
    elsewhere = {"namespace": "elsewhere"}
    put = "the namespace of the object (elsewhere) does not match the namespace on the request (default)"
    other = "the namespace of the provided object does not match the namespace sent on the request"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    merge = {"Content-Type": "application/merge-patch+json"}
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"} | elsewhere,
             "spec": {"replicas": 3}}
    cases: list[tuple[str, str, Any, dict[str, str], dict[str, str], str]] = [
        ("POST", CMS, {"metadata": {"name": "c2"} | elsewhere}, JSON, {}, other),
        ("PUT", f"{CMS}/c", {"metadata": {"name": "c"} | elsewhere}, JSON, {}, put),
        ("PATCH", f"{CMS}/c", {"metadata": elsewhere}, merge, {}, other),
        ("PATCH", f"{CMS}/c", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"} | elsewhere},
         apply, {"fieldManager": "m"}, other),
        ("PATCH", f"{CMS}/new", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"} | elsewhere},
         apply, {"fieldManager": "m"}, other),
        ("PUT", f"{DEPLOYMENTS}/d/status", deployment | {"metadata": {"name": "d"} | elsewhere}, JSON, {}, put),
        ("PATCH", f"{DEPLOYMENTS}/d/status", {"metadata": elsewhere}, merge, {}, other),
        ("PUT", f"{DEPLOYMENTS}/d/scale", scale, JSON, {}, put),
        ("PATCH", f"{DEPLOYMENTS}/d/scale", {"metadata": elsewhere, "spec": {"replicas": 3}}, merge, {}, other),
        ("PATCH", f"{DEPLOYMENTS}/d/scale", scale, apply, {"fieldManager": "m"}, other),
    ]
    for method, path, body, headers, params, message in cases:
        r = await served.http.request(method, path, content=json.dumps(body), headers=headers, params=params)
        assert status(r, 400, "BadRequest") == message, (method, path)
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1
    assert [i["metadata"]["name"] for i in (await served.client.get(CMS))["items"]] == ["c"]
    # the URL's namespace, or none, is fine
    r = await served.http.put(f"{DEPLOYMENTS}/d/scale", json=scale | {"metadata": {"name": "d", "namespace": ""}})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 3, r.text
    r = await served.http.patch(f"{DEPLOYMENTS}/d/scale", content=json.dumps({"metadata": {"namespace": "default"}}),
                                headers=merge)
    assert r.status_code == 200, r.text


def _token(start: str, rv: Any = 1, version: str = "meta.k8s.io/v1") -> str:
    data = json.dumps({"v": version, "rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def test_a_continue_token_names_a_key_of_the_list_it_is_given_to(served: Served) -> None:
    # upstream's storage.DecodeContinue reads the token's key relative to the list's prefix: a
    # token from another namespace, resource or selector goes on from that name there (it was our
    # 400 "the continue token is for another list")
    await served.client.create("/api/v1/namespaces", {"metadata": {"name": "other"}})
    for ns, names in (("default", "abc"), ("other", "abcd")):
        for n in names:
            await served.client.create(f"/api/v1/namespaces/{ns}/configmaps",
                                       {"metadata": {"name": n, "labels": {"odd": str(ord(n) % 2)}}})
    for n in "az":
        await served.client.create("/api/v1/namespaces/default/secrets", {"metadata": {"name": n}})
    first = (await served.http.get(CMS, params={"limit": "1"})).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["a"]
    token = first["metadata"]["continue"]
    assert "=" not in token  # unpadded, as Go's RawURLEncoding
    for path, params, expected in [
            ("/api/v1/namespaces/other/configmaps", {}, ["b", "c", "d"]),
            ("/api/v1/namespaces/default/secrets", {}, ["z"]),
            (CMS, {"labelSelector": "odd=1"}, ["c"]),
    ]:
        r = await served.http.get(path, params={"continue": token} | params)
        assert r.status_code == 200, r.text
        assert [i["metadata"]["name"] for i in r.json()["items"]] == expected, (path, params)
    # across namespaces the key goes on from "/registry/configmaps/" + "b"...: the namespaces after "b"
    every = (await served.client.get("/api/v1/configmaps"))["items"]
    r = await served.http.get("/api/v1/configmaps", params={"continue": token})
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in r.json()["items"]] == \
        [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every if i["metadata"]["namespace"] >= "b"]


@pytest.mark.parametrize(("token", "why"), [
    ("!!", "illegal base64 data at input byte 0"),
    ("eyJ2Ijoi=", "illegal base64 data at input byte 8"),  # padded: Go's RawURLEncoding takes none
    ("e", "illegal base64 data at input byte 0"),
    (base64.urlsafe_b64encode(b"[1]").rstrip(b"=").decode(),
     "json: cannot unmarshal array into Go value of type storage.continueToken"),
    (base64.urlsafe_b64encode(b"xyz").rstrip(b"=").decode(), "invalid character 'x' looking for beginning of value"),
    (_token("a", rv="1"), "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (_token("a", version="meta.k8s.io/v2"), "server does not recognize this encoded version meta.k8s.io/v2"),
    (_token("a", rv=0), "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (_token(""), "encoded start key empty (version meta.k8s.io/v1)"),
    (_token("../secrets/default/a"), "../secrets/default/a"),
    (_token("a/./b"), "a/./b"),
])
async def test_a_continue_token_that_does_not_decode_is_upstreams_400(served: Served, token: str, why: str) -> None:
    for params in ({}, {"resourceVersion": "5"}):  # decoded before the resourceVersion is refused
        r = await served.http.get(CMS, params={"continue": token} | params)
        assert status(r, 400, "BadRequest") == f"invalid continue token: continue key is not valid: {why}"


async def test_a_field_selector_on_a_kind_without_its_own_fields_is_refused_in_the_schemes_words(
        served: Served) -> None:
    # a ConfigMap (no field label conversion of its own upstream) answered "field label not supported"
    r = await served.http.get(CMS, params={"fieldSelector": "spec.nodeName=n1"})
    assert status(r, 400, "BadRequest") == ('"spec.nodeName" is not a known field selector: only "metadata.name", '
                                            '"metadata.namespace"')
    r = await served.http.get(PODS, params={"fieldSelector": "spec.bogus=n1"})
    assert status(r, 400, "BadRequest") == "field label not supported: spec.bogus"
    await served.client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
    r = await served.http.get(PODS, params={"fieldSelector": "spec.host=n1"})  # an old client's spec.nodeName
    assert [p["metadata"]["name"] for p in r.json()["items"]] == ["p"]


async def test_include_object_is_a_tables_option_only(served: Served) -> None:
    # includeObject=Bogus was a 400 of this server's words on any read, a Table or not
    await served.client.create(CMS, {"metadata": {"name": "c"}})
    assert (await served.http.get(CMS, params={"includeObject": "Bogus"})).status_code == 200
    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    for path in (CMS, f"{CMS}/c"):
        r = await served.http.get(path, params={"includeObject": "Bogus"}, headers=table)
        assert status(r, 400, "BadRequest") == ('Unable to convert to Table as requested: includeObject: Invalid '
                                                'value: "Bogus": must be \'Metadata\', \'Object\', \'None\', or empty')
    r = await served.http.get(CMS, params={"includeObject": ""}, headers=table)
    assert r.status_code == 200 and "metadata" in r.json()["rows"][0]["object"], r.text


async def test_a_write_may_not_make_an_object_terminating(served: Served) -> None:
    # a merge patch of metadata.deletionTimestamp on a live object was dropped and answered 200
    await served.client.create(CMS, {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
    merge = {"Content-Type": "application/merge-patch+json"}
    r = await served.http.patch(f"{CMS}/c", json={"metadata": {"deletionTimestamp": "2001-01-01T00:00:00Z"}},
                                headers=merge)
    assert status(r, 422, "Invalid") == ('ConfigMap "c" is invalid: metadata.deletionTimestamp: Invalid value: '
                                         "2001-01-01 00:00:00 +0000 UTC: field is immutable")  # a Time's String()
    r = await served.http.patch(f"{CMS}/c", json={"metadata": {"deletionGracePeriodSeconds": 30}}, headers=merge)
    assert status(r, 422, "Invalid") == ('ConfigMap "c" is invalid: metadata.deletionGracePeriodSeconds: Invalid '
                                         "value: 30: field is immutable")
    assert "deletionTimestamp" not in (await served.client.get(f"{CMS}/c"))["metadata"]
    # once it is terminating a write keeps its timestamp, whatever the write says of it
    assert (await served.http.delete(f"{CMS}/c")).status_code == 200
    stored = (await served.client.get(f"{CMS}/c"))["metadata"]
    r = await served.http.patch(f"{CMS}/c", headers=merge, json={"metadata": {
        "deletionTimestamp": "2001-01-01T00:00:00Z", "labels": {"a": "b"}}})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["deletionTimestamp"] == stored["deletionTimestamp"]


async def test_a_status_write_may_not_set_a_deletion_grace_period(served: Served) -> None:
    # a pod /status write of metadata.deletionGracePeriodSeconds was answered 200 and changed
    # nothing: the pod's status strategy resets the deletion's timestamp, not its grace period,
    # which ValidatePodStatusUpdate's ValidateObjectMetaUpdate then refuses
    await served.client.create(PODS, {"metadata": {"name": "p"},
                                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
    merge = {"Content-Type": "application/merge-patch+json"}
    grace = {"metadata": {"deletionGracePeriodSeconds": 30}, "status": {"phase": "Running"}}
    r = await served.http.patch(f"{PODS}/p/status", json=grace, headers=merge)
    assert status(r, 422, "Invalid") == ('Pod "p" is invalid: metadata.deletionGracePeriodSeconds: Invalid '
                                         "value: 30: field is immutable")
    assert r.json()["details"]["causes"] == [{"reason": "FieldValueInvalid",
                                              "field": "metadata.deletionGracePeriodSeconds",
                                              "message": "Invalid value: 30: field is immutable"}]
    pod = await served.client.get(f"{PODS}/p")
    assert pod["status"]["phase"] == "Pending" and "deletionGracePeriodSeconds" not in pod["metadata"]
    r = await served.http.put(f"{PODS}/p/status", json={**pod, "metadata": {**pod["metadata"],
                                                                           "deletionGracePeriodSeconds": 0}})
    assert status(r, 422, "Invalid").endswith("metadata.deletionGracePeriodSeconds: Invalid value: 0: field is "
                                              "immutable")
    # a deletion's timestamp is reset by the strategy (dropped, the write goes ahead)
    r = await served.http.patch(f"{PODS}/p/status", headers=merge, json={
        "metadata": {"deletionTimestamp": "2001-01-01T00:00:00Z"}, "status": {"phase": "Running"}})
    assert r.status_code == 200 and "deletionTimestamp" not in r.json()["metadata"], r.text
    # a terminating pod's status writes keep its grace period, left out or said again; changed: 422
    assert (await served.http.delete(f"{PODS}/p")).status_code == 200
    held = (await served.client.get(f"{PODS}/p"))["metadata"]["deletionGracePeriodSeconds"]
    for meta in ({}, {"deletionGracePeriodSeconds": held}):
        r = await served.http.patch(f"{PODS}/p/status", headers=merge,
                                    json={"metadata": meta, "status": {"phase": "Running"}})
        assert r.status_code == 200 and r.json()["metadata"]["deletionGracePeriodSeconds"] == held, r.text
    r = await served.http.patch(f"{PODS}/p/status", headers=merge,
                                json={"metadata": {"deletionGracePeriodSeconds": held + 1}})
    assert status(r, 422, "Invalid").endswith(f"Invalid value: {held + 1}: field is immutable")


async def test_a_repeated_parameter_is_read_by_its_first_value(served: Served) -> None:
    """Upstream's parameter codec reads a repeated scalar parameter by its first value
    (``Convert_Slice_string_To_bool`` and the others take ``[0]``): ``watch=0&watch=1`` is a
    list, not a watch that never ends; ``dryRun``, a list in the options, keeps every value."""
    await served.client.create(CMS, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    r = await asyncio.wait_for(served.http.get(f"{CMS}?watch=0&watch=1"), 5)
    assert r.json()["kind"] == "ConfigMapList", r.text
    r = await asyncio.wait_for(served.http.get(f"{CMS}?watch=false&watch="), 5)
    assert r.json()["kind"] == "ConfigMapList", r.text
    r = await served.http.get(f"{CMS}?limit=1&limit=x")
    assert r.status_code == 200 and r.json()["kind"] == "ConfigMapList", r.text
    assert status(await served.http.get(f"{CMS}?limit=x&limit=1"), 400, "BadRequest")
    # fieldValidation's first: Strict refuses the unknown field, whatever follows it
    r = await served.http.post(f"{CMS}?fieldValidation=Strict&fieldValidation=Ignore",
                               json={"metadata": {"name": "b"}, "bogus": 1})
    assert status(r, 400, "BadRequest").endswith('strict decoding error: unknown field "bogus"')
    # a dry run with a value that is not All among its values is refused, nothing written
    for verb, url, body in (("POST", CMS, {"metadata": {"name": "c"}}),
                            ("PATCH", f"{CMS}/a", {"data": {"k": "changed"}}),
                            ("DELETE", f"{CMS}/a", None)):
        r = await served.http.request(verb, f"{url}?dryRun=All&dryRun=", json=body,
                                      headers={"Content-Type": "application/merge-patch+json"})
        assert status(r, 422, "Invalid").endswith('dryRun: Unsupported value: ["All",""]: supported values: "All"')
    assert (await served.client.get(f"{CMS}/a"))["data"] == {"k": "v"}
    assert (await served.http.get(f"{CMS}/c")).status_code == 404
    r = await served.http.delete(f"{CMS}/a?dryRun=All&dryRun=All")
    assert r.status_code == 200 and (await served.client.get(f"{CMS}/a"))["data"] == {"k": "v"}


async def test_a_watch_list_with_a_continue_token_is_refused(served: Served) -> None:
    """Upstream's validateWatchOptions: a ``resourceVersionMatch`` beside a ``continue`` is
    forbidden on a watch as on a list; it was a stream of the initial events, the token ignored."""
    r = await asyncio.wait_for(served.http.get(CMS, params={
        "watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "continue": "x",
        "timeoutSeconds": "1"}), 5)
    assert status(r, 422, "Invalid") == ('ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                                         "resourceVersionMatch is forbidden when continue is provided")


async def test_an_integer_printer_column_of_a_number_past_int64_is_gos_conversion(served: Served) -> None:
    """apiextensions' table convertor takes an ``integer`` column's float64 as Go's ``int64(v)``:
    truncated, and past int64 (1e300; 2**64, which Go decodes as a float64) the amd64 answer
    -2**63. A Python int too large to encode made the whole list's Table a 500."""
    crd = widget_crd()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
    await served.client.create(CRDS, crd)
    for name, size in (("huge", "1e300"), ("past", "18446744073709551616"), ("half", "1.9"), ("min", "-1e19")):
        body = '{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "%s"}, "spec": {"size": %s}}'
        r = await served.http.post(WIDGETS, content=body % (name, size), headers=JSON)
        assert r.status_code == 201, r.text
    r = await served.http.get(WIDGETS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert r.status_code == 200, r.text
    assert {row["cells"][0]: row["cells"][1] for row in r.json()["rows"]} == {
        "half": 1, "huge": -(2**63), "min": -(2**63), "past": -(2**63)}


async def test_a_field_selectors_value_is_unescaped_and_a_bare_operator_refused(served: Served) -> None:
    """fields.ParseSelector: ``\\,``, ``\\=`` and ``\\\\`` in a value are the characters, and a
    bare ``=`` or ``,`` in it, or another escape, is a 400 (``a=b`` was a value, ``a\\,b`` a 400)."""
    await served.client.create(CMS, {"metadata": {"name": "a"}})
    r = await served.http.get(CMS, params={"fieldSelector": "metadata.name=a\\,b"})
    assert r.status_code == 200 and r.json()["items"] == [], r.text
    r = await served.http.get(CMS, params={"fieldSelector": "metadata.name=a=b"})
    assert status(r, 400, "BadRequest") == "invalid field selector: unescaped character in value: 61"
    r = await served.http.get(CMS, params={"fieldSelector": "metadata.name=a\\x", "watch": "1"})
    assert status(r, 400, "BadRequest") == "invalid field selector: invalid escape sequence: \\x"


async def test_a_delete_collections_list_options_are_validated_and_honoured(served: Served) -> None:
    """A deletecollection's ListOptions are a list's (upstream validates them and lists with
    them): a resourceVersion that does not parse, a match without one or a continue token
    that does not decode is refused and nothing is deleted (every ConfigMap was); a token
    that does decode deletes from where it points."""
    for name in ("a", "b", "c"):
        await served.client.create(CMS, {"metadata": {"name": name}})

    async def names() -> list[str]:
        return [i["metadata"]["name"] for i in (await served.client.get(CMS))["items"]]
    for params, code, reason in (({"resourceVersion": "x"}, 400, "BadRequest"),
                                 ({"resourceVersionMatch": "Exact"}, 422, "Invalid"),
                                 ({"continue": "x"}, 400, "BadRequest"),
                                 ({"sendInitialEvents": "false"}, 422, "Invalid")):
        assert status(await served.http.delete(CMS, params=params), code, reason)
        assert await names() == ["a", "b", "c"], params
    token = (await served.http.get(CMS, params={"limit": "1"})).json()["metadata"]["continue"]
    r = await served.http.delete(CMS, params={"continue": token})
    assert r.status_code == 200, r.text
    assert await names() == ["a"]
