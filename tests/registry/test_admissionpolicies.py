"""A ValidatingAdmissionPolicy's type checking at its write (``registry/admissionpolicies.py``),
as upstream's ``TypeChecker.Check``: which kinds and which ``params`` type an expression."""

from __future__ import annotations

from typing import Any

from controlplane.registry.admissionpolicies import SERVED, prepare_validating_admission_policy
from controlplane.registry.custom import CustomVersion
from controlplane.registry.types import Registry, ResourceType

DEPLOYMENTS = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}


def warnings(expression: str, rules: list[dict[str, Any]], **spec: Any) -> list[dict[str, str]]:
    policy = {"metadata": {"name": "p"}, "spec": {"matchConstraints": {"resourceRules": rules},
                                                 "validations": [{"expression": expression}], **spec}}
    assert prepare_validating_admission_policy(policy, None) == []
    return list(policy["status"]["typeChecking"].get("expressionWarnings", []))


CONFIG_MAPS = {"apiVersion": "v1", "kind": "ConfigMap"}


def test_params_are_typed_by_a_built_in_param_kind() -> None:
    (warning,) = warnings("params.data.max + 1 > 0", [DEPLOYMENTS], paramKind=CONFIG_MAPS)
    assert warning["warning"] == ("apps/v1, Kind=Deployment: ERROR: <input>:1:17: found no matching overload for "
                                  "'_+_' applied to '(string, int)'\n | params.data.max + 1 > 0\n"
                                  " | ................^\n")
    assert warnings("int(params.data.max) + 1 > 0", [DEPLOYMENTS], paramKind=CONFIG_MAPS) == []


def test_params_of_a_kind_not_known_are_dyn_and_nothing_is_checked_without_a_known_kind() -> None:
    # a custom kind no server was given: params dyn (upstream: schema not found)
    assert warnings("params.spec.replicas + 'x' == ''", [DEPLOYMENTS],
                    paramKind={"apiVersion": "example.com/v1", "kind": "Limit"}) == []
    # no matched kind known (a wildcard): not even params are checked, as upstream's
    wildcard = {**DEPLOYMENTS, "resources": ["*"]}
    assert warnings("params.data.max + 1 > 0", [wildcard], paramKind=CONFIG_MAPS) == []


def test_a_served_custom_kind_types_object_and_params() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}
    registry = Registry()
    registry.add(ResourceType("example.com", "v1", "Limit", "limits", True,
                              custom=CustomVersion(crd="limits.example.com", schema=schema, printer_columns=())))
    limits = {"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["limits"]}
    token = SERVED.set(registry)
    try:
        (warning,) = warnings("object.spec.tags.name == params.spec.replicas && params.metadata.labels.x == ''",
                              [limits], paramKind={"apiVersion": "example.com/v1", "kind": "Limit"})
    finally:
        SERVED.reset(token)
    assert warning["warning"] == (
        "example.com/v1, Kind=Limit: ERROR: <input>:1:17: type 'list(string)' does not support field selection\n"
        " | object.spec.tags.name == params.spec.replicas && params.metadata.labels.x == ''\n"
        " | ................^\n")
