"""The jq subset of stage selectors (controlplane.nodes.jqpath)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.nodes.jqpath import Jq, JqError

POD = {"metadata": {"name": "p", "annotations": {"example.com/x": "1"}, "ownerReferences": [{"kind": "Job"}]},
       "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "False"}]}}


def test_paths() -> None:
    assert Jq(".metadata.name").values(POD) == ["p"]
    assert Jq(".metadata.deletionTimestamp").values(POD) == [None]
    assert Jq('.metadata.annotations["example.com/x"]').values(POD) == ["1"]
    assert Jq(".metadata.ownerReferences.[].kind").values(POD) == ["Job"]
    assert Jq(".metadata.ownerReferences[0].kind").values(POD) == ["Job"]
    assert Jq(".status.conditions[].type").values(POD) == ["Ready", "Initialized"]


def test_select() -> None:
    assert Jq('.status.conditions.[] | select( .type == "Ready" ) | .status').values(POD) == ["True"]
    assert Jq('.status.conditions.[] | select(.type != "Ready") | .type').values(POD) == ["Initialized"]
    assert Jq('.status.conditions.[] | select(.type == "Nope") | .status').values(POD) == []


@pytest.mark.parametrize("expr", ["map(.x)", ".a | length", "select(.a > 1)"])
def test_unsupported(expr: str) -> None:
    with pytest.raises(JqError):
        Jq(expr)


@pytest.mark.parametrize("obj", [
    {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, {"metadata": {}}, {}, None,
    {"metadata": None}, {"metadata": ["a"]}, {"metadata": "text"}, [{"metadata": {}}], 3,
])
def test_a_plain_path_walked_directly_yields_what_its_steps_yield(obj: Any) -> None:
    fast = Jq(".metadata.deletionTimestamp")
    assert fast._keys == ("metadata", "deletionTimestamp")
    stepped = Jq(".metadata.deletionTimestamp")
    stepped._keys = None
    assert fast.values(obj) == stepped.values(obj)
    assert Jq(".metadata.finalizers.[]")._keys is None and Jq('.metadata["a/b"]')._keys is None
