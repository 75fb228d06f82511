"""The CEL type checker (``registry/celcheck.py``): what upstream's checker refuses at a CRD's
write is refused in cel-go's words and columns, and what it accepts is never refused: the
rules of upstream's own compilation tests, and of real CRDs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.registry.celcheck import DYN, CelType, check, escaped, schema_type, type_errors
from controlplane.registry.structural import structure_problems

INTEGER, STRING_, BOOLEAN, NUMBER = ({"type": t} for t in ("integer", "string", "boolean", "number"))
SPEC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "minReplicas": INTEGER, "maxReplicas": INTEGER, "name": STRING_, "ready": BOOLEAN, "ratio": NUMBER,
        "tags": {"type": "array", "items": STRING_},
        "labels": {"type": "object", "additionalProperties": STRING_},
        "port": {"x-kubernetes-int-or-string": True},
        "created": {"type": "string", "format": "date-time"},
        "data": {"type": "string", "format": "byte"},
        "foo-bar": STRING_, "namespace": STRING_, "if": INTEGER,
        "nested": {"type": "object", "properties": {"val": INTEGER}},
        "items": {"type": "array", "items": {"type": "object", "properties": {"name": STRING_, "port": INTEGER}}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": INTEGER}},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _vars(schema: dict[str, Any] = SPEC, root: bool = False) -> dict[str, CelType]:
    t = schema_type(schema, root)
    return {"self": t, "oldSelf": t}


@pytest.mark.parametrize("rule", [
    # upstream's compilation tests (apiextensions-apiserver schema/cel/compilation_test.go), on our schema
    "self.minReplicas < self.maxReplicas",
    "self.nested.val == 10",
    "self.name.startsWith('s')",
    "string(self.data).endsWith('s')",
    "self.ready == true",
    "self.ratio > 1.0",
    "size(self.tags[0]) == 10",
    "size(self.labels) > 0",
    "self.__namespace__.size() < 10", "self.__if__ == 10",
    "self.foo__dash__bar == 'x'",
    "self.minReplicas >= oldSelf.minReplicas",
    # the common shapes of real rules
    "self.tags.all(t, t.size() <= 63 && t.matches('^[a-z]+$'))",
    "self.items.exists(i, i.name == 'http' && i.port > 0)",
    "self.items.map(i, i.port).all(p, p < 65536)",
    "self.items.filter(i, i.port > 1024).size() <= 3",
    "self.labels.all(k, k.size() < 253 && self.labels[k] != '')",
    "!has(self.nested) || self.nested.val >= 0",
    "has(self.extra.a) ? self.extra.a > 0 : true",
    "self.extra.a == 1",  # preserve-unknown-fields: its declared fields are typed
    "type(self.port) == string ? self.port.matches('^[0-9]+%$') : self.port >= 0",
    "self.port == 80 || self.port == 'http'",
    "self.created < timestamp('2030-01-01T00:00:00Z')",
    "self.minReplicas + 1 <= self.maxReplicas * 2 && self.maxReplicas % 2 == 0",
    "self.ratio < 2",  # numbers of different kinds compared: cel-go's cross-type comparisons
    "self.?nested.?val.orValue(0) >= 0",
    "self.tags.all(i, t, i < 10 && t != '')",
    "cel.bind(n, self.name, n.size() > 1)",
    "sets.contains(self.tags, ['a'])",
    "self.name in ['a', 'b'] && 'a' in self.labels",
    "self.items.size() == 0 || self.items[0].name.lowerAscii() == self.items[0].name",
    "self.template.metadata.name.size() > 0 && self.template.kind != '' && self.template.apiVersion != ''",
    "fakeFunction('abc') == 'ABC' || self.name.fakeMethod()",
    "self.name.split('/').size() <= 2",
    "[1, 2].exists(x, x == self.minReplicas) && {'a': 1}['a'] == 1",
    "self == oldSelf",
])
def test_rules_upstream_accepts_pass(rule: str) -> None:
    assert type_errors(rule, _vars()) == []


@pytest.mark.parametrize(("rule", "error"), [
    ("self.minReplicaz > 0", "ERROR: <input>:1:5: undefined field 'minReplicaz'\n | self.minReplicaz > 0\n | ....^"),
    ("self.name > 5",
     "ERROR: <input>:1:11: found no matching overload for '_>_' applied to '(string, int)'\n | self.name > 5\n"
     " | ..........^"),
    ("size(self.minReplicas) == 10",
     "ERROR: <input>:1:5: found no matching overload for 'size' applied to '(int)'\n"
     " | size(self.minReplicas) == 10\n | ....^"),
    ("self.minReplicas.startsWith('a')",
     "ERROR: <input>:1:28: found no matching overload for 'startsWith' applied to 'int.(string)'\n"
     " | self.minReplicas.startsWith('a')\n | ...........................^"),
    # x-kubernetes-preserve-unknown-fields does not expose what it preserves (upstream's SchemaDeclType;
    # cel/validation_test.go "known and unknown fields", "embedded object with preserve unknown")
    ("self.extra.unknown == 'x'",
     "ERROR: <input>:1:11: undefined field 'unknown'\n | self.extra.unknown == 'x'\n | ..........^"),
    ("has(self.template.spec)",
     "ERROR: <input>:1:4: undefined field 'spec'\n | has(self.template.spec)\n | ...^"),
    ("self.extra > 0",
     "ERROR: <input>:1:12: found no matching overload for '_>_' applied to '(selfType0.extra, int)'\n"
     " | self.extra > 0\n | ...........^"),
    ("self.nested.vals == 1", "ERROR: <input>:1:12: undefined field 'vals'\n | self.nested.vals == 1\n | ...........^"),
    # has()'s presence test is at the macro's "(" (cel-go's parser gives the node the call's place)
    ("has(self.nope)", "ERROR: <input>:1:4: undefined field 'nope'\n | has(self.nope)\n | ...^"),
    ("self.items.name == 'a'",
     "ERROR: <input>:1:11: type 'list(selfType0.items.@idx)' does not support field selection\n"
     " | self.items.name == 'a'\n | ..........^"),
    ("has(self.items.name)",
     "ERROR: <input>:1:4: type 'list(selfType0.items.@idx)' does not support field selection\n"
     " | has(self.items.name)\n | ...^"),
    # a property whose name CEL escapes is known by its escaped name only (upstream's "invalid for escaping")
    ("self.namespace.size() < 10",
     "ERROR: <input>:1:5: undefined field 'namespace'\n | self.namespace.size() < 10\n | ....^"),
    ("self.if == 10", "ERROR: <input>:1:5: undefined field 'if'\n | self.if == 10\n | ....^"),
    ("self.items.all(i, i.nam == 'a')",
     "ERROR: <input>:1:20: undefined field 'nam'\n | self.items.all(i, i.nam == 'a')\n | ...................^"),
    ("self.name.size() == 'a'",
     "ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(int, string)'\n"
     " | self.name.size() == 'a'\n | .................^"),
    ("self.minReplicas + 1.5 > 2",
     "ERROR: <input>:1:18: found no matching overload for '_+_' applied to '(int, double)'\n"
     " | self.minReplicas + 1.5 > 2\n | .................^"),
    ("self.ready && self.name",
     "ERROR: <input>:1:12: found no matching overload for '_&&_' applied to '(bool, string)'\n"
     " | self.ready && self.name\n | ...........^"),
    ("self.minReplicas.all(x, x > 0)",
     "ERROR: <input>:1:5: expression of type 'int' cannot be range of a comprehension (must be list, map, or "
     "dynamic)\n | self.minReplicas.all(x, x > 0)\n | ....^"),
    ("self.name.first == 'a'",
     "ERROR: <input>:1:10: type 'string' does not support field selection\n | self.name.first == 'a'\n"
     " | .........^"),
    ("'a' in self.name",
     "ERROR: <input>:1:5: found no matching overload for '@in' applied to '(string, string)'\n"
     " | 'a' in self.name\n | ....^"),
    ("self.tags['a'] == 'b'",
     "ERROR: <input>:1:10: found no matching overload for '_[_]' applied to '(list(string), string)'\n"
     " | self.tags['a'] == 'b'\n | .........^"),
    ("self == 10",  # upstream's "invalid for escaping" case: an object compared with an int
     "ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(selfType0, int)'\n"
     " | self == 10\n | .....^"),
])
def test_type_errors_in_cel_gos_words(rule: str, error: str) -> None:
    assert type_errors(rule, _vars()) == [error]


def test_errors_on_several_lines_are_ordered_by_position() -> None:
    errors = type_errors("self.a == 1 &&\n  self.name > 1", _vars())
    assert errors == [
        "ERROR: <input>:1:5: undefined field 'a'\n | self.a == 1 &&\n | ....^",
        "ERROR: <input>:2:13: found no matching overload for '_>_' applied to '(string, int)'\n"
        " |   self.name > 1\n | ............^",
    ]


def test_a_resource_root_has_apiversion_kind_and_the_two_metadata_fields() -> None:
    root = {"type": "object", "properties": {"metadata": {"type": "object"}, "spec": SPEC}}
    assert type_errors("self.metadata.name.startsWith(self.kind) && self.apiVersion != ''", _vars(root, True)) == []
    assert type_errors("self.metadata.labels.size() > 0", _vars(root, True)) == [
        "ERROR: <input>:1:14: undefined field 'labels'\n | self.metadata.labels.size() > 0\n | .............^"]
    assert type_errors("self.kind == 'x'", _vars(SPEC)) == [
        "ERROR: <input>:1:5: undefined field 'kind'\n | self.kind == 'x'\n | ....^"]


def test_result_types() -> None:
    assert check("self.minReplicas", _vars())[1].kind == "int"
    assert check("self.tags.map(t, t.size())", _vars())[1].elem.kind == "int"  # type: ignore[union-attr]
    assert check("self.port", _vars())[1] is DYN
    assert check("self.name.size() > 0", _vars())[1].kind == "bool"


def test_what_this_parser_does_not_read_is_not_checked() -> None:
    assert check("self.a ~ 1", _vars()) == ([], DYN)


def test_property_names_escaped_as_upstream() -> None:
    assert [escaped(n) for n in ("a-b", "a.b", "a/b", "a__b", "namespace", "1a", "a b")] == [
        "a__dash__b", "a__dot__b", "a__slash__b", "a__underscores__b", "__namespace__", None, None]


def _crd_problems(rule: dict[str, Any], schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    spec = dict(schema or SPEC)
    spec["x-kubernetes-validations"] = [rule]
    return structure_problems({"type": "object", "properties": {"spec": spec}}, "spec.validation.openAPIV3Schema")


def test_a_crd_rule_that_does_not_type_check_is_refused_on_its_path() -> None:
    [cause] = _crd_problems({"rule": "self.minReplicaz > 0"})
    assert cause["field"] == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["message"] == (
        'Invalid value: apiextensions.ValidationRule{Rule:"self.minReplicaz > 0", Message:"", MessageExpression:"", '
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: '
        "compilation failed: ERROR: <input>:1:5: undefined field 'minReplicaz'\n | self.minReplicaz > 0\n | ....^")


def test_a_crd_rule_must_be_a_bool_and_its_message_expression_a_string() -> None:
    [cause] = _crd_problems({"rule": "self.minReplicas"})
    assert cause["message"].endswith("}: cel expression must evaluate to a bool")
    [cause] = _crd_problems({"rule": "self.minReplicas > 0", "messageExpression": "self.minReplicas"})
    assert cause["field"].endswith("x-kubernetes-validations[0].messageExpression")
    assert cause["message"].endswith("}: messageExpression must evaluate to a string")
    [cause] = _crd_problems({"rule": "self.minReplicas > 0", "messageExpression": "'min ' + self.minReplicas"})
    assert cause["message"].endswith(
        "}: messageExpression compilation failed: ERROR: <input>:1:8: found no matching overload for '_+_' applied "
        "to '(string, int)'\n | 'min ' + self.minReplicas\n | .......^")
    assert _crd_problems({"rule": "self.minReplicas > 0",
                          "messageExpression": "'min ' + string(self.minReplicas)"}) == []
    assert _crd_problems({"rule": "self.port"}) == []  # dyn: not known not to be a bool


def test_optional_old_self_is_not_held_against_a_rule() -> None:
    assert _crd_problems({"rule": "oldSelf.hasValue() ? self.minReplicas >= oldSelf.value().minReplicas : true",
                          "optionalOldSelf": True}) == []


CRDS = Path(__file__).parent.parent / "e2e" / "crds"


@pytest.mark.parametrize("path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_real_crds_rules_pass(path: Path) -> None:
    """Gateway API's rules (and the other CRDs' schemas): every rule accepted upstream is here."""
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        for version in doc["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            assert structure_problems(schema, "spec.validation.openAPIV3Schema") == []


def test_an_object_that_preserves_unknown_fields_is_an_object_as_an_operand() -> None:
    """Upstream types it by its declared fields alone: neither a map to range over nor dyn."""
    assert [e.split("\n")[0] for e in type_errors("self.extra.all(k, k != '') && size(self.extra) > 0", _vars())] == [
        "ERROR: <input>:1:5: expression of type 'selfType0.extra' cannot be range of a comprehension "
        "(must be list, map, or dynamic)",
        "ERROR: <input>:1:35: found no matching overload for 'size' applied to '(selfType0.extra)'"]
    assert type_errors("self.extra == oldSelf.extra", _vars()) == []
    assert type_errors("self.nested.all(k, k != '')", _vars())[0].startswith(
        "ERROR: <input>:1:5: expression of type 'selfType0.nested' cannot be range of a comprehension")


@pytest.mark.parametrize(("rule", "where", "name"), [
    ("foo.bar > 1", 1, "foo"),
    ("self.name == other", 14, "other"),
    ("self.name.toLower() == 'a'", 18, "toLower"),
    ("lengthOf(self.tags) > 1", 9, "lengthOf"),
    ("self.tags.all(t, t == y)", 23, "y"),
])
def test_undeclared_references_are_refused_as_cel_go_words_them(rule: str, where: int, name: str) -> None:
    """A name that is neither ``self``, ``oldSelf``, a macro's variable nor a function of
    Kubernetes' CEL environment: at the name (a call's, at its parenthesis)."""
    errors = type_errors(rule, _vars(), strict=True)
    assert errors == [f"ERROR: <input>:1:{where}: undeclared reference to '{name}' (in container '')\n"
                      f" | {rule}\n | {'.' * (where - 1)}^"]
    assert type_errors(rule, _vars()) == []  # not strict: not held against it


@pytest.mark.parametrize("rule", [
    "sets.contains(self.tags, ['a'])", "cel.bind(n, self.name, n.size() < 5)", "type(self.port) == int",
    "self.tags.exists(t, t.lowerAscii().matches('^a'))", "format.dns1123Label().validate(self.name).hasValue()",
    "quantity(self.name).isGreaterThan(quantity('1')) && ip.isCanonical(self.name)",
    "self.labels.all(k, v, k.size() < v.size())", "self.?name.orValue('') == ''", "self.name.split(',').size() < 2",
    "dyn(self.port) == 1 || double(self.ratio) < 2.0 || string(self.minReplicas) == '1'",
])
def test_declared_names_and_library_functions_are_not_undeclared(rule: str) -> None:
    assert type_errors(rule, _vars(), strict=True) == []


def test_an_optional_old_self_is_an_optional_of_selfs_type() -> None:
    """With optionalOldSelf, upstream declares oldSelf optional_type(<self's type>): a field of it
    is an optional of the field, and comparing either with a plain value does not compile."""
    from controlplane.registry.celcheck import optional_of, schema_type

    self_type = schema_type({"type": "object", "properties": {"name": {"type": "string"}}})
    variables = {"self": self_type, "oldSelf": optional_of(self_type)}
    assert [e.split("\n")[0] for e in type_errors("self == oldSelf", variables)] == [
        "ERROR: <input>:1:6: found no matching overload for '_==_' applied to "
        "'(selfType0, optional_type(selfType0))'"]
    assert [e.split("\n")[0] for e in type_errors("!has(oldSelf.name) || self.name == oldSelf.name", variables)] == [
        "ERROR: <input>:1:33: found no matching overload for '_==_' applied to '(string, optional_type(string))'"]
    assert type_errors("oldSelf.nope.hasValue()", variables)[0].startswith("ERROR: <input>:1:8: undefined field 'nope'")
    for rule in ["!oldSelf.hasValue() || self.name == oldSelf.value().name", "oldSelf.value() == self",
                 "oldSelf.?name.orValue('') == self.name", "oldSelf.orValue(self).name == self.name",
                 "oldSelf.name == optional.of(self.name)", "oldSelf.or(optional.none()).hasValue()"]:
        assert type_errors(rule, variables) == [], rule


def test_an_optional_is_no_operand_of_the_functions_that_take_values() -> None:
    """cel-go declares no overload of an ordering, arithmetic, `in`, `size` or a string method
    taking an optional, and no optional is a comprehension's range: an `optionalOldSelf` rule
    using `oldSelf.n` as the number does not compile upstream (it failed at run time here).
    Indexing an optional list or map is declared (optional_list_index_int) and gives an optional."""
    from controlplane.registry.celcheck import formatted, optional_of, result_type, schema_type

    self_type = schema_type({"type": "object", "properties": {
        "n": {"type": "integer"}, "l": {"type": "array", "items": {"type": "string"}}}})
    variables = {"self": self_type, "oldSelf": optional_of(self_type)}
    overload = "found no matching overload for"
    for rule, error in [
            ("self.n > oldSelf.n", f"1:8: {overload} '_>_' applied to '(int, optional_type(int))'"),
            ("self.n + oldSelf.n > 0", f"1:8: {overload} '_+_' applied to '(int, optional_type(int))'"),
            ("oldSelf.n in [1]", f"1:11: {overload} '@in' applied to '(optional_type(int), list(int))'"),
            ("oldSelf.l.size() > 0", f"1:15: {overload} 'size' applied to 'optional_type(list(string)).()'"),
            ("oldSelf.l[0] == 'a'", f"1:14: {overload} '_==_' applied to '(optional_type(string), string)'"),
            ("oldSelf.l.all(x, x != '')", "1:8: expression of type 'optional_type(list(string))' cannot be range "
                                          "of a comprehension (must be list, map, or dynamic)")]:
        assert [e.split("\n")[0] for e in type_errors(rule, variables)] == [f"ERROR: <input>:{error}"], rule
    assert formatted(result_type("oldSelf.l[0]", variables)) == "optional_type(string)"
    for rule in ["oldSelf.l[0].orValue('') == 'a'", "oldSelf.hasValue() ? oldSelf.value().n : 0",
                 "dyn(oldSelf) != null", "oldSelf.n.optMap(v, v + 1).orValue(0) > 0", "has(oldSelf.n)"]:
        assert type_errors(rule, variables) == [], rule


def test_the_optional_methods_of_a_value_that_is_no_optional_find_no_overload() -> None:
    """`oldSelf.hasValue()` on a rule without optionalOldSelf: oldSelf is self's type there, which
    has no hasValue() (cel-go's checker refuses it; it failed at run time here)."""
    assert [e.split("\n")[0] for e in type_errors("oldSelf.hasValue()", _vars())] == [
        "ERROR: <input>:1:17: found no matching overload for 'hasValue' applied to 'selfType0.()'"]
    assert type_errors("self.name.value() == 'a'", _vars())[0].startswith(
        "ERROR: <input>:1:16: found no matching overload for 'value' applied to 'string.()'")
    assert type_errors("self.?name.hasValue() && self.?name.orValue('') != ''", _vars()) == []


def test_constant_patterns_are_the_literal_patterns_of_the_regex_functions() -> None:
    from controlplane.registry.celcheck import constant_patterns

    assert constant_patterns("matches(self, '[') && self.find(r'\\d(') == '' && self.matches(self)") == [
        "[", "\\d("]
    assert constant_patterns("self.findAll('x', 2).size() > 0 && self.matches('^\\\\d+$')") == ["x", "^\\d+$"]
