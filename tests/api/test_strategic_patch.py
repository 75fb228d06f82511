"""How ``PATCH`` with ``application/strategic-merge-patch+json`` answers what it cannot apply."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api import rest
from controlplane.api.errors import ApiError
from controlplane.client import Client
from controlplane.registry import ResourceType

WIDGETS = ResourceType("example.com", "v1", "Widget", "widgets", True, storage_group="example.com")
PODS = ResourceType("", "v1", "Pod", "pods", True)


def test_custom_resources_get_415_as_upstream() -> None:
    with pytest.raises(ApiError) as e:
        rest._strategic_schema(WIDGETS)
    assert (e.value.code, e.value.reason) == (415, "UnsupportedMediaType")
    assert e.value.message == ("the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")  # upstream's words: the type it got is not named


def test_built_in_types_have_a_patch_schema() -> None:
    assert rest._strategic_schema(PODS).field("spec").schema.field("containers").merge_key == "name"


@pytest.mark.parametrize(("body", "kind"), [([1], "array"), ("x", "string"), (3, "number"), (True, "bool")])
def test_a_patch_that_is_not_an_object_is_a_400(body: object, kind: str) -> None:
    with pytest.raises(ApiError) as e:
        rest._strategic_patch_map(body)
    assert e.value.code == 400
    assert e.value.message == f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"


def test_null_is_an_empty_patch() -> None:
    assert rest._strategic_patch_map(None) == {}


def test_merge_errors_become_400_or_422() -> None:
    schema = rest._strategic_schema(PODS)
    with pytest.raises(ApiError) as e:
        rest._strategic_merge_patch({"spec": {"containers": [{"name": "a"}]}},
                                    {"spec": {"containers": [{"image": "x"}]}}, schema)
    assert (e.value.code, e.value.reason) == (400, "BadRequest")
    with pytest.raises(ApiError) as e:
        rest._strategic_merge_patch({"metadata": {"finalizers": []}}, {"metadata": {"finalizers": [["a"]]}}, schema)
    assert (e.value.code, e.value.reason) == (422, "Invalid")


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def test_a_merge_key_matches_by_type_and_value_as_upstreams(client: Client) -> None:
    """``containerPort: 80.0`` (float64 to Go) names no port 80 (int64), ``true`` no port 1:
    a ``$patch: delete`` by either deletes nothing, and ``$setElementOrder`` by them orders
    nothing (kubectl patch --local agrees: tests/registry/test_strategic.py)."""
    ports = [{"containerPort": 1, "name": "one", "protocol": "TCP"},
             {"containerPort": 80, "name": "web", "protocol": "TCP"}]
    await client.create(DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "a", "image": "x", "ports": ports}]}}}})

    def patch(*items: dict[str, Any], order: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "a", "ports": list(items)}
        if order is not None:
            container["$setElementOrder/ports"] = order
        return {"spec": {"template": {"spec": {"containers": [container]}}}}

    for key in (80.0, True):
        out = await client.patch(f"{DEPLOYMENTS}/d", patch({"containerPort": key, "$patch": "delete"}), "strategic")
        assert out["spec"]["template"]["spec"]["containers"][0]["ports"] == ports
    out = await client.patch(f"{DEPLOYMENTS}/d", patch(order=[{"containerPort": 80.0}, {"containerPort": 1}]),
                             "strategic")
    assert out["spec"]["template"]["spec"]["containers"][0]["ports"] == ports
    out = await client.patch(f"{DEPLOYMENTS}/d", patch(order=[{"containerPort": 80}, {"containerPort": 1}]),
                             "strategic")
    assert out["spec"]["template"]["spec"]["containers"][0]["ports"] == ports[::-1]
    out = await client.patch(f"{DEPLOYMENTS}/d", patch({"containerPort": 80, "$patch": "delete"}), "strategic")
    assert out["spec"]["template"]["spec"]["containers"][0]["ports"] == ports[:1]
