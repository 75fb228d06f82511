"""JSON merge patch as upstream's json-patch library (v4) merges it."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.mergepatch import merge_patch


@pytest.mark.parametrize(("target", "patch", "merged"), [
    ({"a": 1, "b": 2}, {"a": None, "c": 3}, {"b": 2, "c": 3}),
    ({"a": {"x": 1}}, {"a": {"x": None, "y": {"z": None}}}, {"a": {"y": {}}}),
    # what the patch brings where there is no object loses its null fields, in the maps of
    # its lists too; a list keeps its null items
    ({}, {"a": [{"b": None, "c": 1}, None, [{"d": None}]]}, {"a": [{"c": 1}, None, [{}]]}),
    ({"a": [1]}, {"a": [{"b": None}]}, {"a": [{}]}),
    ({"a": "s"}, {"a": {"b": None, "c": [{"d": None}]}}, {"a": {"c": [{}]}}),
    # a non-object over an object is taken as sent (the library's merge returns it unpruned)
    ({"a": {"x": 1}}, {"a": [{"b": None}]}, {"a": [{"b": None}]}),
    ({"a": {"x": 1}}, {"a": "s"}, {"a": "s"}),
])
def test_merge_patch(target: dict[str, Any], patch: dict[str, Any], merged: dict[str, Any]) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == merged
    assert repr(target) == before


def test_a_patch_said_to_hold_no_null_is_merged_alike_without_the_pruning_walk() -> None:
    # the API passes nulls=False for a body without the bytes `null` (a kubelet's status patch):
    # the result is the same, and what the patch brings is taken as it is, not rebuilt
    status = {"conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [{"name": "c", "ready": True}]}
    target = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    pruned, taken = merge_patch(target, {"status": status}), merge_patch(target, {"status": status}, nulls=False)
    assert pruned == taken == {"metadata": {"name": "p"}, "status": {"phase": "Pending", **status}}
    assert taken["status"]["conditions"] is status["conditions"]
    assert pruned["status"]["conditions"] is not status["conditions"]
