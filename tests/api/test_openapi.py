"""``/openapi/v3``: the index, the per-group-version documents, their conversion and caching."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from controlplane.api.openapi import OpenApiV3, convert_schema
from controlplane.registry import Registry, ResourceType


@pytest.fixture(scope="module")
def openapi() -> OpenApiV3:
    return OpenApiV3(Registry())


@pytest.fixture
async def client(openapi: OpenApiV3) -> AsyncIterator[httpx.AsyncClient]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await openapi(scope, receive, send)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp") as c:
        yield c


def _walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


async def test_the_index_lists_every_served_group_version_with_its_hash(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi/v3")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    paths = r.json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/coordination.k8s.io/v1",
            "apis/scheduling.k8s.io/v1beta1", "apis/resource.k8s.io/v1"} <= set(paths)
    url = paths["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    doc = await client.get(url)
    assert url.endswith("hash=" + hashlib.sha512(doc.content).hexdigest().upper())


async def test_a_document_has_the_operations_kubectl_looks_for(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi/v3/api/v1")).json()
    assert doc["openapi"].startswith("3.0")
    item = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    patch = item["patch"]
    assert patch["operationId"] == "patchCoreV1NamespacedPod"
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert set(patch["requestBody"]["content"]) >= {"application/merge-patch+json", "application/json-patch+json"}
    assert {p["name"] for p in item["parameters"]} == {"name", "namespace", "pretty"}
    assert item["get"]["operationId"] == "readCoreV1NamespacedPod"
    assert item["put"]["operationId"] == "replaceCoreV1NamespacedPod"
    assert item["delete"]["operationId"] == "deleteCoreV1NamespacedPod"
    coll = doc["paths"]["/api/v1/namespaces/{namespace}/pods"]
    assert coll["get"]["x-kubernetes-action"] == "list" and coll["post"]["x-kubernetes-action"] == "post"
    assert coll["delete"]["operationId"] == "deleteCoreV1CollectionNamespacedPod"
    assert doc["paths"]["/api/v1/pods"]["get"]["operationId"] == "listCoreV1PodForAllNamespaces"
    assert doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]["operationId"] == \
        "patchCoreV1NamespacedPodStatus"
    assert doc["paths"]["/api/v1/nodes/{name}"]["get"]["operationId"] == "readCoreV1Node"  # cluster-scoped
    rbac = (await client.get("/openapi/v3/apis/rbac.authorization.k8s.io/v1")).json()
    assert rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles"]["post"][
        "operationId"] == "createRbacAuthorizationV1NamespacedRole"


async def test_schemas_are_openapi_3_0(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi/v3/api/v1")).json()
    schemas = doc["components"]["schemas"]
    pod = schemas["io.k8s.api.core.v1.Pod"]
    assert {"group": "", "version": "v1", "kind": "Pod"} in pod["x-kubernetes-group-version-kind"]
    assert pod["type"] == "object" and "enum" not in pod["properties"]["kind"]
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["x-kubernetes-list-type"] == "map"
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert "type" not in schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    for node in _walk(doc):
        if isinstance(node, dict):
            assert not isinstance(node.get("type"), list)
            ref = node.get("$ref")
            if ref is not None:
                assert ref.startswith("#/components/schemas/") and ref.split("/")[-1] in schemas
                assert len(node) == 1, "a $ref has no siblings in OpenAPI 3.0"


async def test_enum_fields_have_their_values_and_enum_description(client: httpx.AsyncClient) -> None:
    """A +enum field as a running kube-apiserver publishes it (kubectl explain's ENUM section)."""
    doc = (await client.get("/openapi/v3/api/v1")).json()
    schemas = doc["components"]["schemas"]
    policy = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"]
    assert policy["type"] == "string" and policy["enum"] == ["Always", "Never", "OnFailure"]
    assert policy["description"].endswith("\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n"
                                          " - `\"OnFailure\"`")
    families = schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ipFamilies"]
    assert families["items"] == {"type": "string", "enum": ["", "IPv4", "IPv6"]}  # an enum in a list
    # a property named kind that is an enum keeps it; only a kind's own apiVersion and kind lose theirs
    assert schemas["io.k8s.api.core.v1.AzureDiskVolumeSource"]["properties"]["kind"]["enum"] == [
        "Dedicated", "Managed", "Shared"]
    apps = (await client.get("/openapi/v3/apis/apps/v1")).json()["components"]["schemas"]
    assert apps["io.k8s.api.apps.v1.DeploymentStrategy"]["properties"]["type"]["enum"] == ["Recreate",
                                                                                          "RollingUpdate"]


def test_convert_schema() -> None:
    node = {"type": ["object", "null"], "properties": {
        "a": {"$ref": "#/$defs/X", "description": "d"},
        "b": {"type": ["array", "null"], "items": {"$ref": "#/$defs/Y"}},
        "c": {"additionalProperties": {"type": ["string", "null"]}, "x-kubernetes-map-type": "atomic"}}}
    assert convert_schema(node) == {"type": "object", "properties": {
        "a": {"allOf": [{"$ref": "#/components/schemas/X"}], "description": "d"},
        "b": {"type": "array", "items": {"$ref": "#/components/schemas/Y"}},
        "c": {"additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"}}}


async def test_hash_caching_redirects_and_not_modified(client: httpx.AsyncClient) -> None:
    index = (await client.get("/openapi/v3")).json()["paths"]
    url = index["api/v1"]["serverRelativeURL"]
    etag = url.split("hash=")[1]
    r = await client.get(url)
    assert r.headers["etag"] == f'"{etag}"'
    assert r.headers["cache-control"] == "public, immutable" and "expires" in r.headers
    plain = await client.get("/openapi/v3/api/v1")
    assert plain.content == r.content and "cache-control" not in plain.headers
    stale = await client.get("/openapi/v3/api/v1?hash=0123")
    assert stale.status_code == 301 and stale.headers["location"] == url
    again = await client.get("/openapi/v3/api/v1", headers={"if-none-match": f'"{etag}"'})
    assert again.status_code == 304 and again.content == b""


async def test_errors(client: httpx.AsyncClient) -> None:
    assert (await client.get("/openapi/v3/apis/nope/v1")).status_code == 404
    assert (await client.get("/openapi/v3/apis/apps/v9")).status_code == 404
    assert (await client.post("/openapi/v3")).status_code == 405
    r = await client.get("/openapi/v3/api/v1",
                         headers={"accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"})
    assert r.status_code == 406 and r.json()["kind"] == "Status"
    head = await client.head("/openapi/v3/api/v1")
    assert head.status_code == 200 and head.content == b""


async def test_types_added_at_run_time_appear_after_invalidate() -> None:
    registry = Registry()
    openapi = OpenApiV3(registry)
    assert openapi.document("apis/example.com/v1") is None
    before = json.loads(openapi.index())["paths"]
    registry.add(ResourceType("example.com", "v1", "Widget", "widgets", True))
    openapi.set_schema("example.com", "v1", "Widget", {
        "type": "object", "properties": {"spec": {"type": "object", "description": "the widget"}}})
    doc = openapi.document("apis/example.com/v1")
    assert doc is not None
    built = json.loads(doc.body)
    widget = built["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["description"] == "the widget"
    assert built["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"][
        "x-kubernetes-group-version-kind"]["kind"] == "Widget"
    assert set(json.loads(openapi.index())["paths"]) == set(before) | {"apis/example.com/v1"}
    openapi.set_schema("example.com", "v1", "Widget", {"type": "object", "description": "changed"})
    changed = openapi.document("apis/example.com/v1")
    assert changed is not None and changed.etag != doc.etag
