"""How ``PATCH`` with ``application/strategic-merge-patch+json`` answers what it cannot apply."""

from __future__ import annotations

import pytest

from controlplane.api import rest
from controlplane.api.errors import ApiError
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
