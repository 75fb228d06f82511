"""A MutatingAdmissionPolicy's CEL: message constructions rewritten into maps that name their
type (registry/celsyntax.py), since the interpreter parses but cannot evaluate them; an
unterminated one left to the parser, whose error is cel-go's; the JSONPatch library; the
policy's write validated (registry/mutatingpolicies.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.registry.admissionpolicies import compiled
from controlplane.registry.celsyntax import rewritten
from controlplane.registry.expressions import ExpressionError, evaluate
from controlplane.registry.mutatingpolicies import prepare_mutating_admission_policy

DECLARED = frozenset({"object", "oldObject", "request", "namespaceObject", "authorizer", "variables"})


def test_message_constructions_become_maps_that_name_their_type() -> None:
    assert rewritten('Object{spec: Object.spec{replicas: 1 > 0 ? 2 : 3}}') == \
        '{"_cp_type": "Object", "spec": {"_cp_type": "Object.spec", "replicas": 1 > 0 ? 2 : 3}}'
    assert evaluate('[JSONPatch{op: "add", path: "/a", value: object.?x.orValue("d")}]', {"object": {}}) == [
        {"_cp_type": "JSONPatch", "op": "add", "path": "/a", "value": "d"}]
    assert evaluate('Object{}', {}) == {"_cp_type": "Object"}
    assert rewritten('x in {"a": 1}') == 'x in {"a": 1}'  # a map literal is no construction
    assert rewritten('"Object{a: 1}"') == '"Object{a: 1}"'  # nor is a string


def test_unterminated_brackets_are_left_to_the_parser() -> None:
    assert rewritten("[JSONPatch{") == "[JSONPatch{"
    why = compiled("[JSONPatch{op: 1", DECLARED)
    assert why is not None and why.startswith(
        "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'}', ','}")
    why = compiled("object.?a.b + [1", DECLARED)  # the optional syntax's complaint is not cel-go's
    assert why is not None and "unsupported syntax" not in why and "<input>:1:17" in why


def test_jsonpatch_escape_key() -> None:
    assert evaluate('"/metadata/labels/" + jsonpatch.escapeKey("example.com/a~b")', {}) == \
        "/metadata/labels/example.com~1a~0b"
    with pytest.raises(ExpressionError):
        evaluate("jsonpatch.escapeKey(1)", {})


def test_a_valid_policy_is_defaulted() -> None:
    policy: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["*"], "resources": ["deployments"]}]},
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "ApplyConfiguration",
                       "applyConfiguration": {"expression": "Object{spec: Object.spec{replicas: 1}}"}}]}}
    assert prepare_mutating_admission_policy(policy, None) == []
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["scope"] == "*"


def test_the_other_patch_is_refused_and_an_empty_expression_required() -> None:
    policy = {"metadata": {"name": "p"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["pods"]}]},
        "reinvocationPolicy": "Sometimes", "failurePolicy": "Maybe",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": " "},
                       "applyConfiguration": {"expression": "Object{}"}}]}}
    assert [(c["field"], c["message"]) for c in prepare_mutating_admission_policy(policy, None)] == [
        ("spec.failurePolicy", 'Unsupported value: "Maybe": supported values: "Fail", "Ignore"'),
        ("spec.mutations[0].jsonPatch.expression", "Required value"),
        ("spec.mutations[0].applyConfiguration",
         'Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch'),
        ("spec.reinvocationPolicy", 'Unsupported value: "Sometimes": supported values: "IfNeeded", "Never"')]


@pytest.mark.parametrize(("patch_type", "expression", "refused"), [
    ("JSONPatch", '[{"op": "add", "path": "/a", "value": 1}]', True),  # maps, not JSONPatch
    ("JSONPatch", '"add"', True),
    ("JSONPatch", "12", True),
    ("JSONPatch", '[JSONPatch{op: "add", path: "/a", value: 1}]', False),
    ("JSONPatch", '"a" in object.metadata.labels ? [] : []', False),  # not one literal: not known here
    ("ApplyConfiguration", '{"metadata": {"labels": {"a": "b"}}}', True),
    ("ApplyConfiguration", "[Object{}]", True),
    ("ApplyConfiguration", "Object{}", False),
])
def test_a_literal_of_another_type_is_refused(patch_type: str, expression: str, refused: bool) -> None:
    section = "jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"
    policy = {"metadata": {"name": "p"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["pods"]}]},
        "reinvocationPolicy": "Never", "mutations": [{"patchType": patch_type, section: {"expression": expression}}]}}
    causes = prepare_mutating_admission_policy(policy, None)
    wanted = "list(JSONPatch)" if patch_type == "JSONPatch" else "Object"
    assert causes == ([{"reason": "FieldValueInvalid", "field": f"spec.mutations[0].{section}.expression",
                        "message": f"Invalid value: {json.dumps(expression)}: must evaluate to {wanted}"}]
                      if refused else [])
