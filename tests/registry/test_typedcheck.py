"""An applied configuration typed as structured-merge-diff types it (typed/validate.go,
typed/helpers.go, fieldpath/element.go), its errors in its words."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.registry.shapes import shape_for
from controlplane.registry.typedcheck import typed_errors
from controlplane.registry.validation import shape_of


def deployment(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}


def errors(config: dict[str, Any]) -> list[str]:
    shape = shape_of("apps", "v1", "Deployment")
    assert shape is not None
    return typed_errors(shape, shape_for("apps", "v1", "Deployment"), config)


def containers(*items: Any) -> dict[str, Any]:
    return {"template": {"spec": {"containers": list(items)}}}


@pytest.mark.parametrize(("spec", "why"), [
    ({"replicas": "two"}, ".spec.replicas: expected numeric (int or float), got string"),
    ({"replicas": [1]}, ".spec.replicas: expected numeric (int or float), got []interface {}"),
    ({"replicas": {"a": 1}}, ".spec.replicas: expected numeric (int or float), got map[string]interface {}"),
    ({"replicas": True}, ".spec.replicas: expected numeric (int or float), got bool"),
    ({"paused": "yes"}, ".spec.paused: expected boolean, got &{yes}"),
    ({"selector": ["a", 1.5]}, ".spec.selector: expected map, got &{[a 1.5]}"),
    ({"selector": {"matchLabels": {"a": 1e6}}},
     ".spec.selector.matchLabels.a: expected string, got &value.valueUnstructured{Value:1e+06}"),
    ({"selector": {"matchLabels": {"a": {"b": [1, "x", None]}}}},
     '.spec.selector.matchLabels.a: expected string, got &value.valueUnstructured{Value:map[string]interface {}'
     '{"b":[]interface {}{1, "x", interface {}(nil)}}}'),
    (containers({"a": 1}), '.spec.template.spec.containers: element 0: associative list with keys has an element '
                           'that omits all key fields ["name"] (and doesn\'t have default values for any key fields)'),
    (containers(None), ".spec.template.spec.containers: element 0: associative list with keys may not have a null "
                       "element"),
    (containers({"name": "c", "ports": {"a": 1}}),
     '.spec.template.spec.containers[name="c"].ports: expected list, got &{map[a:1]}'),
    (containers({"name": "c", "ports": [{"containerPort": 80, "x": 1}]}),
     '.spec.template.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].x: field not declared in schema'),
    (containers({"name": "c", "command": ["a", 1]}),
     '.spec.template.spec.containers[name="c"].command[1]: expected string, got &value.valueUnstructured{Value:1}'),
    (containers({"name": "c", "resources": {"limits": {"cpu": [1]}}}),
     '.spec.template.spec.containers[name="c"].resources.limits.cpu: expected any scalar, got &{[1]}'),
    (containers({"name": "c", "ports": [{"name": "a", "x": 1}]}),  # (named by the keys it has: v6's optional keys)
     '.spec.template.spec.containers[name="c"].ports[protocol="TCP"].x: field not declared in schema'),
    ({"template": {"metadata": {"finalizers": ["a", "a", "b"]}}},
     '.spec.template.metadata.finalizers: duplicate entries for key [="a"]'),
])
def test_one_error_in_structured_merge_diffs_words(spec: dict[str, Any], why: str) -> None:
    assert errors(deployment(spec)) == [why]


def test_what_fits_is_no_error() -> None:
    """A number is any number (3.5 for an int32 is the converter's to refuse); a Quantity, an
    IntOrString and a Time are any scalar; null fits everything."""
    spec = {"replicas": 3.5, "paused": None, "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            **containers({"name": "c", "image": "i", "ports": [{"containerPort": 80}, {"containerPort": 80,
                                                                                    "protocol": "UDP"}],
                          "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}})}
    assert errors(deployment(spec)) == []


def test_every_duplicate_and_mistyped_field_is_listed_but_a_map_stops_at_its_first_undeclared_field() -> None:
    config = deployment({"replicas": "x", "bogus": 1, "other": 2,
                         **containers({"name": "a"}, {"name": "a"}, {"name": "b"}, {"name": "b", "image": 5})})
    assert errors(config) == [
        ".spec.replicas: expected numeric (int or float), got string",
        ".spec.bogus: field not declared in schema",
    ]
    config = deployment(containers({"name": "a"}, {"name": "a"}, {"name": "b"}, {"name": "b", "image": 5}))
    assert errors(config) == [
        '.spec.template.spec.containers: duplicate entries for key [name="a"]',
        '.spec.template.spec.containers: duplicate entries for key [name="b"]',
        '.spec.template.spec.containers[name="b"].image: expected string, got &value.valueUnstructured{Value:5}',
    ]
