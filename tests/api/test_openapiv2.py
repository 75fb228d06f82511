"""``/openapi/v2``: the Swagger 2.0 document converted from the v3 ones, as JSON and as gnostic's protobuf."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from controlplane.api.openapi import OpenApiV3
from controlplane.api.openapiv2 import PROTOBUF, OpenApiV2, v2_schema
from controlplane.registry import Registry, ResourceType

PB_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # what client-go sends


@pytest.fixture(scope="module")
def openapi() -> OpenApiV2:
    return OpenApiV2(OpenApiV3(Registry()))


@pytest.fixture
async def client(openapi: OpenApiV2) -> AsyncIterator[httpx.AsyncClient]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await openapi(scope, receive, send)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp") as c:
        yield c


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    """A schema and its sub-schemas (not the property maps, whose keys are names, not keywords)."""
    if not isinstance(node, dict):
        return
    yield node
    for name in ("items", "additionalProperties"):
        yield from _schemas(node.get(name))
    for sub in node.get("allOf", ()):
        yield from _schemas(sub)
    for sub in node.get("properties", {}).values():
        yield from _schemas(sub)


# -- a minimal protobuf reader, independent of the encoder --------------------------------
Fields = dict[int, list[Any]]


def _message(data: bytes) -> Fields:
    """The fields of one message: number -> values (int for varints, float for doubles, bytes otherwise)."""
    fields: Fields = {}
    i = 0

    def varint() -> int:
        nonlocal i
        shift = n = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return n

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value = varint()
        elif wire == 1:
            value = struct.unpack_from("<d", data, i)[0]
            i += 8
        elif wire == 2:
            size = varint()
            value = data[i:i + size]
            assert len(value) == size, "a length runs past the message"
            i += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.setdefault(number, []).append(value)
    assert i == len(data)
    return fields


def _named(fields: Fields, number: int) -> dict[str, bytes]:
    """A repeated Named* field (name: 1, value: 2) as a dict."""
    out = {}
    for raw in fields.get(number, []):
        named = _message(raw)
        out[named[1][0].decode()] = named.get(2, [b""])[0]
    return out


def _extensions(schema: Fields, number: int = 31) -> dict[str, Any]:
    """Vendor extensions (NamedAny{name, Any{yaml: 2}}), their JSON-as-YAML text parsed."""
    return {name: json.loads(_message(raw)[2][0]) for name, raw in _named(schema, number).items()}


# -- JSON ------------------------------------------------------------------------------
async def test_json_has_the_definitions_with_their_extensions_and_v2_refs(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi/v2", headers={"accept": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.headers["etag"] == '"' + hashlib.sha512(r.content).hexdigest().upper() + '"'
    doc = r.json()
    assert doc["swagger"] == "2.0" and doc["info"]["title"] == "Kubernetes"
    defs = doc["definitions"]
    cm = defs["io.k8s.api.core.v1.ConfigMap"]
    assert cm["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap", "version": "v1"}]
    assert cm["properties"]["data"] == {"additionalProperties": {"type": "string"}, "description": cm[
        "properties"]["data"]["description"], "type": "object"}
    # a $ref with siblings is the $ref itself again, not v3's allOf
    meta = cm["properties"]["metadata"]
    assert meta["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" and "allOf" not in meta
    containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-type"] == "map" and containers["x-kubernetes-list-map-keys"] == ["name"]
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"] == "string"
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"
    policy = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"]
    assert policy["enum"] == ["Always", "Never", "OnFailure"]
    assert "\n\nPossible enum values:\n - `\"Always\"`\n" in policy["description"]
    assert {"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.ConfigMapList",
            "io.k8s.api.coordination.v1.Lease"} <= set(defs)
    for definition in defs.values():
        for node in _schemas(definition):
            assert not {"oneOf", "anyOf", "nullable"} & set(node)  # none of them is Swagger 2.0
            ref = node.get("$ref")
            if ref is not None:  # kube-openapi refuses the whole document over one dangling ref
                assert ref.startswith("#/definitions/") and ref.removeprefix("#/definitions/") in defs
            if node.get("type") == "array":
                assert isinstance(node.get("items"), dict)


async def test_json_paths_are_swagger_2_operations(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi/v2")).json()
    item = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]
    patch = item["patch"]
    assert patch["operationId"] == "patchCoreV1NamespacedConfigMap"
    assert "application/strategic-merge-patch+json" in patch["consumes"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert patch["x-kubernetes-action"] == "patch"
    body = patch["parameters"][0]
    assert body == {"in": "body", "name": "body", "required": True,
                    "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}
    params = {p["name"]: p for p in patch["parameters"]}
    assert {"in": "query", "type": "string"}.items() <= params["fieldValidation"].items()
    assert item["get"]["responses"]["200"]["schema"] == {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}
    assert {"name": "name", "in": "path", "required": True}.items() <= item["parameters"][0].items()
    assert not any("components" in str(n) for n in _walk(doc["paths"]) if isinstance(n, str))


def test_v2_schema() -> None:
    node = {"type": "object", "properties": {
        "a": {"allOf": [{"$ref": "#/components/schemas/X"}], "description": "d", "default": {}},
        "b": {"type": "array", "items": {"$ref": "#/components/schemas/Y"}},
        "c": {"type": "string", "nullable": True, "x-kubernetes-map-type": "atomic"},
        "d": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "e": {"type": "array"},
        "oneOf": {"type": "string"}}}  # a property named like a keyword stays
    assert v2_schema(node) == {"type": "object", "properties": {
        "a": {"$ref": "#/definitions/X", "description": "d", "default": {}},
        "b": {"type": "array", "items": {"$ref": "#/definitions/Y"}},
        "c": {"x-kubernetes-map-type": "atomic"},
        "d": {"x-kubernetes-int-or-string": True},
        "e": {},
        "oneOf": {"type": "string"}}}


def test_v2_schema_of_kept_unknown_fields_and_nullable_required_ones() -> None:
    """apiextensions-apiserver's ``ToStructuralOpenAPIV2``: a node that keeps unknown fields
    names none (kubectl's validation would refuse the others) and is no typed object; a field
    that may be null is not required."""
    node = {"type": "object", "required": ["kept", "maybe", "plain"], "properties": {
        "kept": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": True, "items": {"type": "string"}},
        "maybe": {"type": "string", "nullable": True},
        "plain": {"type": "string"}}}
    assert v2_schema(node) == {"type": "object", "required": ["kept", "plain"], "properties": {
        "kept": {"x-kubernetes-preserve-unknown-fields": True, "additionalProperties": {"type": "string"}},
        "list": {"x-kubernetes-preserve-unknown-fields": True},
        "maybe": {},
        "plain": {"type": "string"}}}
    assert "required" not in v2_schema({"type": "object", "required": ["x"],
                                        "additionalProperties": {"type": "string", "nullable": True}})
    assert v2_schema({"type": "object", "required": ["x"], "properties": {"x": {"nullable": True}}}) == {
        "type": "object", "properties": {"x": {}}}


# -- protobuf --------------------------------------------------------------------------
async def test_protobuf_is_a_gnostic_document_with_the_same_definitions(client: httpx.AsyncClient) -> None:
    as_json = (await client.get("/openapi/v2")).json()
    r = await client.get("/openapi/v2", headers={"accept": PB_ACCEPT})
    assert r.status_code == 200 and r.headers["content-type"] == PROTOBUF
    assert r.headers["etag"] == '"' + hashlib.sha512(r.content).hexdigest().upper() + '"'
    document = _message(r.content)
    assert document[1] == [b"2.0"]  # swagger
    assert _message(document[2][0])[1] == [b"Kubernetes"]  # info.title
    definitions = _named(_message(document[9][0]), 1)  # Definitions{additional_properties: NamedSchema}
    assert list(definitions) == list(as_json["definitions"])

    cm = _message(definitions["io.k8s.api.core.v1.ConfigMap"])
    assert _message(cm[22][0])[1] == [b"object"]  # type: TypeItem{value}
    assert _extensions(cm)["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap",
                                                                   "version": "v1"}]
    props = _named(_message(cm[25][0]), 1)  # properties: Properties{additional_properties: NamedSchema}
    assert _message(props["metadata"])[1] == [b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    data = _message(props["data"])
    extra = _message(_message(data[21][0])[1][0])  # additional_properties: AdditionalPropertiesItem{schema}
    assert _message(extra[22][0])[1] == [b"string"]

    spec = _message(definitions["io.k8s.api.core.v1.PodSpec"])
    containers = _message(_named(_message(spec[25][0]), 1)["containers"])
    assert _extensions(containers)["x-kubernetes-patch-merge-key"] == "name"
    assert _extensions(containers)["x-kubernetes-patch-strategy"] == "merge"
    item = _message(_message(containers[23][0])[1][0])  # items: ItemsItem{schema}
    assert item[1] == [b"#/definitions/io.k8s.api.core.v1.Container"]

    policy = _message(_named(_message(spec[25][0]), 1)["restartPolicy"])
    enum = [json.loads(_message(raw)[2][0]) for raw in policy[20]]  # enum: repeated Any{yaml: 2}, JSON is YAML
    assert enum == ["Always", "Never", "OnFailure"]
    assert policy[4][0].decode().endswith("Possible enum values:\n - `\"Always\"`\n - `\"Never\"`\n"
                                          " - `\"OnFailure\"`")  # description

    paths = _named(_message(document[8][0]), 2)  # Paths{path: NamedPathItem}
    assert list(paths) == list(as_json["paths"])
    patch = _message(_message(paths["/api/v1/namespaces/{namespace}/configmaps/{name}"])[8][0])
    assert patch[5] == [b"patchCoreV1NamespacedConfigMap"]
    assert b"application/strategic-merge-patch+json" in patch[7]  # consumes
    assert _extensions(patch, 13)["x-kubernetes-group-version-kind"]["kind"] == "ConfigMap"


async def test_etag_not_modified_and_errors(client: httpx.AsyncClient) -> None:
    first = await client.get("/openapi/v2")
    again = await client.get("/openapi/v2", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == first.headers["etag"]
    pb = await client.get("/openapi/v2", headers={"accept": PB_ACCEPT, "if-none-match": first.headers["etag"]})
    assert pb.status_code == 200  # each representation has its own ETag
    assert (await client.get("/openapi/v2", headers={"accept": "application/json, */*"})).json()["swagger"] == "2.0"
    r = await client.get("/openapi/v2", headers={"accept": "text/html"})
    assert r.status_code == 406 and r.json()["kind"] == "Status"
    assert (await client.post("/openapi/v2")).status_code == 405
    head = await client.head("/openapi/v2")
    assert head.status_code == 200 and head.content == b""


async def test_custom_resources_come_and_go_with_the_v3_documents() -> None:
    registry = Registry()
    v3 = OpenApiV3(registry)
    v2 = OpenApiV2(v3)
    before = await v2.current()
    assert b"com.example.v1.Widget" not in before.json
    assert await v2.current() is before  # nothing changed: not rebuilt
    widget = ResourceType("example.com", "v1", "Widget", "widgets", True)
    registry.add(widget)
    v3.set_schema("example.com", "v1", "Widget", {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer"}, "note": {"type": "string", "nullable": True}}}}})
    added = json.loads((await v2.current()).json)
    schema = added["definitions"]["com.example.v1.Widget"]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "example.com", "version": "v1", "kind": "Widget"}]
    assert schema["properties"]["spec"]["properties"] == {"size": {"type": "integer"}, "note": {}}
    assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}" in added["paths"]
    gadget = ResourceType("example.com", "v1", "Gadget", "gadgets", True)
    registry.add(gadget)  # no schema of its own: it keeps every field, so its v2 names none
    v3.invalidate("example.com", "v1")
    kept = json.loads((await v2.current()).json)["definitions"]["com.example.v1.Gadget"]
    assert kept == {"type": "object",
                    "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Gadget"}]}
    registry.remove(gadget)
    registry.remove(widget)
    v3.invalidate("example.com", "v1")
    assert b"com.example.v1.Widget" not in (await v2.current()).json
