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


RULES = {"spec": {"containers": [
    {"name": "a", "restartPolicyRules": [{"exitCodes": {"operator": "In", "values": [1, 0]}},
                                         {"exitCodes": {"operator": "NotIn"}}]},
    {"name": "b"}, {"name": "c", "restartPolicyRules": None}]}}


def test_any_says_whether_an_array_holds_a_literal() -> None:
    """``any(. == L)``, which the built-in pod-complete asks of restart rules' exit codes; an
    absent list holds nothing."""
    codes = ".spec.containers.[].restartPolicyRules.[] | .exitCodes.values | any(. == 0)"
    assert Jq(codes).values(RULES) == [True, False]
    assert Jq('.spec.containers.[0] | any(. == "a")').values(RULES) == [True]  # an object's values
    assert Jq(codes).values({"spec": {"containers": [{"name": "x"}]}}) == []
    with pytest.raises(JqError):
        Jq(".a | any(. == x)")
    with pytest.raises(JqError):
        Jq(".a | any(. > 1)")


@pytest.mark.parametrize("obj", [RULES, POD, {"spec": {"containers": None}}, {"spec": {"containers": "x"}},
                                 {"spec": {"containers": [None, 3, {"restartPolicyRules": {"k": {"exitCodes": 1}}}]}},
                                 {"spec": [1]}, None, 3])
def test_leading_keys_and_iterations_walked_at_once_yield_what_their_steps_yield(obj: Any) -> None:
    expr = ".spec.containers.[].restartPolicyRules[] | .exitCodes"
    fast = Jq(expr)
    assert fast._lead == ("spec", "containers", None, "restartPolicyRules", None)
    stepped = Jq(expr)
    stepped._lead, stepped._rest = (), stepped._steps
    assert fast.values(obj) == stepped.values(obj)
    assert Jq('.metadata["a/b"] | .x')._lead == () and Jq(".a[0].b")._lead == ()
