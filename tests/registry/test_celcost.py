"""The static cost estimate of CRD rules (``registry/celcost.py``): the numbers of upstream's
own ``TestCostEstimation`` (apiextensions' ``schema/cel/compilation_test.go``) where the
model is exact, a lower bound where it is not, and the CRDs upstream refuses for their cost
refused with its causes (``structure_problems``), those it accepts accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.registry.celcheck import schema_type
from controlplane.registry.celcost import cost_message, expression_cost, max_cardinality, max_elements, min_size
from controlplane.registry.structural import structure_problems

PRIMITIVES: dict[str, dict[str, Any]] = {
    "number": {"type": "number"}, "string": {"type": "string"}, "boolean": {"type": "boolean"},
    "int-or-string": {"x-kubernetes-int-or-string": True},
    "duration": {"type": "string", "format": "duration"}, "date": {"type": "string", "format": "date"},
    "date-time": {"type": "string", "format": "date-time"},
}


def array_of(kind: str, bound: int | None = None) -> dict[str, Any]:
    return {"type": "array", "items": PRIMITIVES[kind], **({"maxItems": bound} if bound is not None else {})}


def map_of(kind: str, bound: int | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": PRIMITIVES[kind],
            **({"maxProperties": bound} if bound is not None else {})}


def string(bound: int | None = None) -> dict[str, Any]:
    return {"type": "string", **({"maxLength": bound} if bound is not None else {})}


def cost(rule: str, schema: dict[str, Any], root: bool = False) -> int | None:
    t = schema_type(schema, root)
    return expression_cost(rule, {"self": t, "oldSelf": t}, schema, root)


# upstream's TestCostEstimation: (rule, schema unbounded, its cost; schema bounded, its cost)
UPSTREAM = [
    ("self.all(x, true)", array_of("number"), 4718591, array_of("number", 10), 32),
    ("self.all(x, true)", array_of("string"), 3145727, array_of("string", 20), 62),
    ("self.all(x, true)", array_of("boolean"), 1887437, array_of("boolean", 5), 17),
    ("self.all(x, true)", map_of("number"), 1348169, map_of("number", 10), 32),
    ("has(self.x)", map_of("number"), 0, map_of("number", 100), 0),
    ("self.all(x, true)", map_of("string"), 1179647, map_of("string", 3), 11),
    ("self.all(x, true)", map_of("boolean"), 943718, map_of("boolean", 100), 302),
    ("self.contains('test')", string(), 314574, string(10), 5),
    ("self.startsWith('test')", string(), 2, string(15), 2),
    ("self.endsWith('test')", string(), 2, string(30), 2),
    ('size(self + "hello") > size("hello")', string(), 314578, string(4), 7),
    ("self[1] == 0.0", array_of("number"), 2, array_of("number", 5000), 2),
    ("self[1] == self[1]", array_of("string"), 314577, array_of("string", 8), 314577),
    ("self.all(x, self.all(y, true))", array_of("number"), None, array_of("number", 10), 352),
    ("self.all(x, self.all(y, self.all(z, true)))", array_of("number"), None, array_of("number", 10), 3552),
    ('self.matches("x")', string(), 314574, string(50), 22),
    ('"".matches("(((((((((())))))))))[0-9]")', string(), 7, string(10), 7),
    ('self.matches("")', string(), 1, string(100), 1),
    ("self.all(x, x.contains(self[x]))", map_of("string"), 2752507, map_of("string", 10), 72),
    ("self[3] == 0.0", array_of("number"), 2, array_of("number", 0), 2),
    ('self["x"] == 0.0', map_of("number"), 2, map_of("number", 0), 2),
    ('self == "x"', string(), 2, string(0), 1),
    ("self.all(x, x == 0.0)", array_of("number"), 6291454, array_of("number", 3 * 1024 * 2048), 25165826),
    ("self.all(x, true)", array_of("int-or-string"), 4718591, array_of("int-or-string", 10), 32),
    ("self[0] == 5", array_of("int-or-string"), 3, array_of("int-or-string", 10), 3),
    ("self[0] == false", array_of("boolean"), 2, array_of("boolean", 25), 2),
    ("self.all(x, true)", array_of("duration"), 2359295, array_of("duration", 5), 17),
    ("self.all(x, true)", array_of("date"), 725936, array_of("date", 15), 47),
    ("self.all(x, true)", array_of("date-time"), 428963, array_of("date-time", 25), 77),
    ("self.all(x, true)", map_of("int-or-string"), 1348169, map_of("int-or-string", 15), 47),
    ("self.all(x, true)", map_of("duration"), 1048577, map_of("duration", 5), 17),
    ("self.all(x, true)", map_of("date"), 524288, map_of("date", 10), 32),
    ("self.all(x, true)", map_of("date-time"), 349526, map_of("date-time", 25), 77),
    ("self.find('[0-9]+') == ''", string(), 629147, string(10), 11),
    ("self.isSorted() == true", {"type": "array", "items": string()}, 329854432052,
     {"type": "array", "maxItems": 10, "items": string(10)}, 52),
]


@pytest.mark.parametrize(("rule", "unbounded", "expected", "bounded", "expected_bounded"), UPSTREAM)
def test_the_estimate_is_upstreams_own(rule: str, unbounded: dict[str, Any], expected: int | None,
                                       bounded: dict[str, Any], expected_bounded: int) -> None:
    if expected is not None:
        assert cost(rule, unbounded) == expected
    else:  # upstream: over the limit of one call
        assert (cost(rule, unbounded) or 0) > 1_000_000
    assert cost(rule, bounded) == expected_bounded


def test_where_the_model_is_unsure_the_estimate_is_a_lower_bound() -> None:
    # upstream: 6291452 (the number a path through a map does not reach is sized 1); here 5242877
    maps = {"type": "array", "items": map_of("number")}
    found = cost("self.all(x, x.y == 25.2)", maps)
    assert found is not None and found <= 6291452
    # upstream: 329853068905, join's; here join is not modelled and costs only its operand
    assert cost("self.join(' ') == 'aa bb'", {"type": "array", "items": string()}) == 1
    # a range whose size is not known (a library function's result) is iterated 0 times
    assert cost("self.split(',').all(x, x.matches('^a+$'))", string()) == 2
    assert cost("no such syntax (", string()) is None


def test_sizes_of_values_as_upstream_declares_them() -> None:
    assert max_elements(string()) == 3 * 1024 * 1024 - 2
    assert max_elements(string(63)) == 252  # maxLength counts characters, of up to 4 bytes each
    assert max_elements({"type": "string", "enum": ["a", "abc"]}) == 3
    assert max_elements({"type": "string", "format": "byte", "maxLength": 10}) == 10
    assert max_elements(array_of("string")) == (3 * 1024 * 1024 - 2) // 3
    assert max_elements(map_of("number")) == (3 * 1024 * 1024 - 2) // 7
    obj = {"type": "object", "required": ["name", "port"], "properties": {
        "name": string(), "port": {"type": "integer", "default": 80}, "extra": string()}}
    assert min_size(obj) == 2 + len("name") + 2 + 4  # required without a default
    assert max_cardinality(obj, False) == 3 * 1024 * 1024 // 13


def test_the_factor_is_formatted_as_go_formats_it() -> None:
    assert "by factor of more than 100x (try" in cost_message("estimated rule cost", 10**12, 10**7)
    assert "by factor of 2.5x (try" in cost_message("estimated rule cost", 25 * 10**6, 10**7)
    assert "by factor of 1.200000x (try" in cost_message("estimated rule cost", 12 * 10**6, 10**7)


def crd_schema(names: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": {"names": names}}}}


HINT = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
        "strings are declared)")


def test_a_rule_over_the_limit_is_refused_with_upstreams_causes() -> None:
    at = "spec.validation.openAPIV3Schema"
    rule_at = f"{at}.properties[spec].properties[names].x-kubernetes-validations[0].rule"
    names = {**array_of("string"), "x-kubernetes-validations": [{"rule": "self.all(x, x.matches('^[a-z]+$'))"}]}
    assert [(c["reason"], c["field"], c["message"]) for c in structure_problems(crd_schema(names), at)] == [
        ("FieldValueForbidden", rule_at,
         f"Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}"),
        ("FieldValueForbidden", rule_at, "Forbidden: contributed to estimated rule & messageExpression cost total "
                                         "exceeding cost limit for entire OpenAPIv3 schema"),
        ("FieldValueForbidden", at, "Forbidden: x-kubernetes-validations estimated rule & messageExpression cost "
                                    "total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x "
                                    f"{HINT}")]
    # bounded, it is cheap: 1 + 1 + 64 * (3 + 1 + ceil(253 * 0.1) * ceil(8 * 0.25))
    bounded = {**names, "maxItems": 64, "items": string(63)}
    assert cost("self.all(x, x.matches('^[a-z]+$'))", bounded) == 2 + 64 * (4 + 26 * 2)
    assert structure_problems(crd_schema(bounded), at) == []


def test_a_rule_runs_as_often_as_the_lists_above_it_allow() -> None:
    """A rule's cost is times the product of the maxItems/maxProperties above it, or, under
    one without, times as many of its values as fit in a request."""
    at = "x"
    item = {"type": "object", "properties": {"name": string()},
            "x-kubernetes-validations": [{"rule": "self.name.startsWith('a') && self.name.endsWith('b')"}]}
    # per item: 2 * (1 + 1 + 1) = 6; under 1,000 lists of 1,000 items: 6,000,000
    fine = {"type": "object", "properties": {"lists": {"type": "array", "maxItems": 1000, "items": {
        "type": "array", "maxItems": 1000, "items": item}}}}
    assert structure_problems(fine, at) == []
    # under 1,000 lists of 2,000: 12,000,000, over the 10,000,000 of one rule
    dear = {"type": "object", "properties": {"lists": {"type": "array", "maxItems": 1000, "items": {
        "type": "array", "maxItems": 2000, "items": item}}}}
    found = structure_problems(dear, at)
    assert found[0]["field"] == f"{at}.properties[lists].items.items.x-kubernetes-validations[0].rule"
    assert found[0]["message"] == f"Forbidden: estimated rule cost exceeds budget by factor of 1.200000x {HINT}"
    assert len(found) == 1  # the total, 12,000,000, is under the schema's 100,000,000
    # under an unbounded list: as many {} as fit in 3 MiB, 1,048,576, times 6: under the limit
    assert structure_problems({"type": "object", "properties": {"items": {"type": "array", "items": item}}}, at) == []
    # and times 12 (four tests) over it
    four = "self.name.startsWith('a') && self.name.endsWith('b') && self.name.startsWith('c') && " \
           "self.name.endsWith('d')"
    item = {**item, "x-kubernetes-validations": [{"rule": four}]}
    found = structure_problems({"type": "object", "properties": {"items": {"type": "array", "items": item}}}, at)
    assert [c["message"] for c in found] == [
        f"Forbidden: estimated rule cost exceeds budget by factor of 1.258291x {HINT}"]


def test_the_schemas_total_is_bounded_too() -> None:
    """Rules each under the limit of one, together over the schema's: the dearest four named,
    then the schema."""
    at = "x"
    rule = {"rule": "self.all(x, x.startsWith('a'))"}  # 2 + 1,048,575 * 5 = 5,242,877 each
    props = {f"p{i}": {**array_of("string"), "x-kubernetes-validations": [rule]} for i in range(20)}
    found = structure_problems({"type": "object", "properties": props}, at)
    assert [c["field"] for c in found] == [f"{at}.properties[p{i}].x-kubernetes-validations[0].rule"
                                           for i in range(4)] + [at]
    assert found[-1]["message"] == ("Forbidden: x-kubernetes-validations estimated rule & messageExpression cost "
                                    f"total for entire OpenAPIv3 schema exceeds budget by factor of 1.048575x {HINT}")
    assert structure_problems({"type": "object", "properties": dict(list(props.items())[:19])}, at) == []


REAL = Path(__file__).resolve().parents[1] / "e2e" / "crds"


@pytest.mark.parametrize("path", sorted(REAL.glob("*.yaml")), ids=lambda p: p.name)
def test_real_world_crds_are_not_refused(path: Path) -> None:
    """Gateway API's, cert-manager's, Prometheus operator's and Argo's CRDs install upstream."""
    for doc in yaml.safe_load_all(path.read_text()):
        for version in doc["spec"]["versions"]:
            schema = version.get("schema", {}).get("openAPIV3Schema")
            if schema is not None:
                assert structure_problems(schema, "x") == []


def test_an_update_leaving_a_versions_schema_is_not_held_to_the_limit_of_one_rule() -> None:
    """Upstream's suppressPerExpressionCost: a schema stored before the limit (or a smaller
    estimate) stays writable while an update leaves it as it was; a changed one is checked."""
    from controlplane.registry.crd import problems

    item = {"type": "object", "properties": {"name": string()}, "x-kubernetes-validations": [{"rule": (
        "self.name.startsWith('a') && self.name.endsWith('b') && self.name.startsWith('c') && "
        "self.name.endsWith('d')")}]}
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": item}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "conversion": {"strategy": "None"},
                    "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": schema}}]}}
    refused = [c["field"] for c in problems(crd)]
    assert refused == ["spec.validation.openAPIV3Schema.properties[items].items.x-kubernetes-validations[0].rule"]
    assert problems(crd, old=crd) == []
    changed = yaml.safe_load(yaml.safe_dump(crd))
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["other"] = string()
    assert [c["field"] for c in problems(changed, old=crd)] == refused


def test_the_dearest_real_rule_seen_passes() -> None:
    """Karpenter's NodeOverlay (karpenter.sh/v1alpha1) limits its capacity map's keys with the
    dearest of 1,400 rules of real CRDs estimated here: 2 + 449,389 keys * (3 + 16), under
    the limit, as it is upstream, where the CRD installs."""
    rule = "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
    capacity: dict[str, Any] = {"type": "object", "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|"
                   r"(\.[0-9]+))))?$"},
        "x-kubernetes-validations": [{"message": "invalid resource restricted", "rule": rule}]}
    assert cost(rule, capacity) == 8_538_393
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"capacity": capacity}}}}
    assert structure_problems(schema, "x") == []
