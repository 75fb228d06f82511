"""Server-side apply as upstream merges: custom resources by their CRD's list and map
types, unknown fields refused, and kubectl's move from client-side apply."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controlplane.client import Client
from controlplane.client.client import ApiError as ClientError

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

SPEC_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "mode": {"type": "string", "default": "fast"},
    "port": {"x-kubernetes-int-or-string": True},
    "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "required": ["name"], "properties": {
                  "name": {"type": "string"}, "value": {"type": "string"},
                  "prio": {"type": "integer", "default": 5}}}},
    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "args": {"type": "array", "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "sel": {"type": "object", "x-kubernetes-map-type": "atomic",
            "properties": {"x": {"type": "string"}, "z": {"type": "string"}}},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}}


def crd() -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "properties": {"spec": SPEC_SCHEMA}}}}]}}


def widget(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


async def test_custom_resources_merge_by_their_schemas_list_and_map_types(client: Client) -> None:
    await client.create(CRDS, crd())
    first = await client.patch(f"{WIDGETS}/w", widget({
        "items": [{"name": "a", "value": "1"}], "tags": ["x"], "args": ["p"], "labels": {"a": "1"},
        "sel": {"x": "1"}, "port": 80, "free": {"deep": {"er": 1}, "l": [1]}}), "apply", fieldManager="one")
    assert managers(first)[("one", "Apply")] == {"f:spec": {
        "f:items": {'k:{"name":"a"}': {".": {}, "f:name": {}, "f:value": {}}},  # not prio: defaulted, nobody's
        "f:tags": {'v:"x"': {}}, "f:args": {}, "f:labels": {"f:a": {}}, "f:sel": {}, "f:port": {},
        "f:free": {"f:deep": {".": {}, "f:er": {}}, "f:l": {}}}}
    # another manager's items, tags and keys join the first one's; atomic values are replaced
    second = await client.patch(f"{WIDGETS}/w", widget({
        "items": [{"name": "b", "value": "2"}], "tags": ["y"], "labels": {"b": "2"}, "sel": {"z": "2"}}),
        "apply", fieldManager="two", force=True)
    spec = second["spec"]
    assert spec["items"] == [{"name": "a", "value": "1", "prio": 5}, {"name": "b", "value": "2", "prio": 5}]
    assert spec["tags"] == ["x", "y"] and spec["labels"] == {"a": "1", "b": "2"} and spec["sel"] == {"z": "2"}
    assert "f:sel" not in managers(second)[("one", "Apply")]["f:spec"]
    # the first manager drops its item: only its own goes
    third = await client.patch(f"{WIDGETS}/w", widget({"tags": ["x"]}), "apply", fieldManager="one")
    assert third["spec"]["items"] == [{"name": "b", "value": "2", "prio": 5}]
    assert third["spec"]["tags"] == ["x", "y"] and third["spec"]["labels"] == {"b": "2"}
    assert third["spec"]["mode"] == "fast"


async def test_an_applied_field_no_schema_declares_is_refused(client: Client) -> None:
    await client.create(CRDS, crd())
    with pytest.raises(ClientError) as err:
        await client.patch(f"{WIDGETS}/w", widget({"items": [{"name": "a", "bogus": 1}]}), "apply",
                           fieldManager="one")
    assert err.value.code == 400
    assert err.value.message.endswith('.spec.items[name="a"].bogus: field not declared in schema')
    with pytest.raises(ClientError) as err:
        await client.patch(f"{WIDGETS}/w", widget({"items": [{"value": "x"}]}), "apply", fieldManager="one")
    assert err.value.message.endswith('.spec.items: element 0: associative list with keys has an element that '
                                      'omits all key fields ["name"] (and doesn\'t have default values for any key '
                                      'fields)')
    with pytest.raises(ClientError):
        await client.get(f"{WIDGETS}/w")
    # what the schema preserves may be anything
    applied = await client.patch(f"{WIDGETS}/w", widget({"free": {"any": {"thing": [1]}}}), "apply",
                                 fieldManager="one")
    assert applied["spec"]["free"] == {"any": {"thing": [1]}}


def client_side(name: str, data: dict[str, str]) -> dict[str, Any]:
    """A ConfigMap as ``kubectl apply`` (client-side) creates it: with its annotation."""
    meta = {"name": name, "namespace": "default"}
    config: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
    return {**config, "metadata": {**meta, "annotations": {LAST_APPLIED: orjson.dumps(config).decode() + "\n"}}}


async def test_kubectl_takes_over_from_client_side_apply_and_keeps_the_annotation(client: Client) -> None:
    await client.create(CONFIGMAPS, client_side("c", {"a": "1", "b": "2"}), fieldManager="kubectl-client-side-apply")
    await client.patch(f"{CONFIGMAPS}/c", {"data": {"other": "x"}}, fieldManager="editor")
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
              "data": {"a": "1", "b": "3", "c": "<4>"}}
    # b is as the annotation has it: kubectl takes it without a conflict
    applied = await client.patch(f"{CONFIGMAPS}/c", config, "apply", fieldManager="kubectl")
    assert applied["data"] == {"a": "1", "b": "3", "c": "<4>", "other": "x"}
    assert managers(applied)[("kubectl", "Apply")] == {"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}}
    assert applied["metadata"]["annotations"][LAST_APPLIED] == (
        '{"apiVersion":"v1","data":{"a":"1","b":"3","c":"\\u003c4\\u003e"},"kind":"ConfigMap",'
        '"metadata":{"name":"c","namespace":"default"}}\n')
    # a field changed since the annotation was written stays a conflict
    with pytest.raises(ClientError) as err:
        await client.patch(f"{CONFIGMAPS}/c", {**config, "data": {"other": "y"}}, "apply", fieldManager="kubectl")
    assert err.value.code == 409
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "editor" using v1: .data.other'
    # other managers neither take over nor rewrite the annotation
    await client.create(CONFIGMAPS, client_side("d", {"a": "1"}), fieldManager="kubectl-client-side-apply")
    with pytest.raises(ClientError) as err:
        await client.patch(f"{CONFIGMAPS}/d", {**config, "metadata": {"name": "d"}, "data": {"a": "2"}}, "apply",
                           fieldManager="tool")
    assert err.value.code == 409
    forced = await client.patch(f"{CONFIGMAPS}/d", {**config, "metadata": {"name": "d"}, "data": {"a": "2"}},
                                "apply", fieldManager="tool", force=True)
    assert '"a":"1"' in forced["metadata"]["annotations"][LAST_APPLIED]


async def test_keys_and_values_compare_as_structured_merge_diff_compares_them(client: Client) -> None:
    """An applied ``80.0`` is the live item keyed ``80`` (value.Compare takes an int and a
    float by value; FieldsV1 writes it as Go does, ``k:{"port":80}``); ``true`` equals no
    number, so applying it over another manager's ``1`` conflicts."""
    numbered = crd()
    numbered["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                      "items": {"type": "object", "required": ["port"],
                                "properties": {"port": {"type": "number"}, "v": {"type": "string"}}}},
            "nums": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "number"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    await client.create(CRDS, numbered)
    await client.patch(f"{WIDGETS}/w", widget({"ports": [{"port": 80, "v": "a"}], "nums": [1], "free": {"x": 1}}),
                       "apply", fieldManager="one")
    second = await client.patch(f"{WIDGETS}/w", widget({"ports": [{"port": 80.0, "v": "b"}], "nums": [1.0]}),
                                "apply", fieldManager="two", force=True)
    assert [p["v"] for p in second["spec"]["ports"]] == ["b"] and len(second["spec"]["nums"]) == 1
    assert managers(second)[("two", "Apply")] == {"f:spec": {
        "f:ports": {'k:{"port":80}': {".": {}, "f:port": {}, "f:v": {}}}, "f:nums": {"v:1": {}}}}
    assert managers(second)[("one", "Apply")]["f:spec"]["f:ports"] == {'k:{"port":80}': {".": {}, "f:port": {}}}
    with pytest.raises(ClientError) as err:
        await client.patch(f"{WIDGETS}/w", widget({"free": {"x": True}}), "apply", fieldManager="two")
    assert err.value.code == 409
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "one": .spec.free.x'
    same = await client.patch(f"{WIDGETS}/w", widget({"free": {"x": 1.0}}), "apply", fieldManager="two")
    assert managers(same)[("one", "Apply")]["f:spec"]["f:free"] == {"f:x": {}}  # 1.0 is 1: shared, no conflict
