"""Pruning, defaulting and validation of custom resources by their openAPIV3Schema,
with the messages kube-apiserver gives; and the structural-schema check of CRDs."""

from __future__ import annotations

from typing import Any

from controlplane.registry.structural import apply_defaults, prune, same, structure_problems, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["color"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": True},
                "when": {"type": "string", "format": "date-time"},
                "note": {"type": "string", "nullable": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "nested": {"type": "object", "default": {},
                           "properties": {"level": {"type": "string", "default": "info"}}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def causes(value: Any) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in validate(SCHEMA, value)]


def test_a_valid_object_has_no_causes() -> None:
    assert causes({"spec": {"color": "red", "replicas": 3, "name": "abc", "tags": ["x"], "port": "http",
                            "when": "2026-01-02T03:04:05Z", "note": None, "labels": {"a": "b"}}}) == []


def test_type_errors_read_as_upstream() -> None:
    assert causes({"spec": {"color": "red", "replicas": "two"}}) == [
        ("FieldValueTypeInvalid", "spec.replicas",
         'Invalid value: "string": spec.replicas in body must be of type integer: "string"')]
    assert causes({"spec": {"color": "red", "replicas": 1.5}})[0][2].endswith("must be of type integer: \"number\"")
    assert causes({"spec": {"color": "red", "replicas": 2.0}}) == []  # an integral number is an integer
    assert causes({"spec": {"color": True}})[0][2] == \
        'Invalid value: "boolean": spec.color in body must be of type string: "boolean"'
    assert causes({"spec": {"color": "red", "port": 1.5}})[0][1] == "spec.port"
    assert causes({"spec": {"color": "red", "name": None}})[0][2].endswith('must be of type string: "null"')


def test_required_enum_bounds_and_lengths() -> None:
    assert causes({"spec": {}}) == [("FieldValueRequired", "spec.color", "Required value")]
    assert causes({"spec": {"color": "pink"}}) == [
        ("FieldValueNotSupported", "spec.color", 'Unsupported value: "pink": supported values: "red", "blue"')]
    assert causes({"spec": {"color": "red", "replicas": -1}}) == [
        ("FieldValueInvalid", "spec.replicas",
         "Invalid value: -1: spec.replicas in body should be greater than or equal to 0")]
    assert causes({"spec": {"color": "red", "replicas": 11}})[0][2].endswith("should be less than or equal to 10")
    assert causes({"spec": {"color": "red", "name": "a"}})[0][2] == \
        'Invalid value: "a": spec.name in body should be at least 2 chars long'
    assert causes({"spec": {"color": "red", "name": "abcdef"}})[0][:2] == ("FieldValueTooLong", "spec.name")
    assert causes({"spec": {"color": "red", "name": "AB"}})[0][2] == \
        "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"
    assert causes({"spec": {"color": "red", "tags": ["a", "b", "c"]}}) == [
        ("FieldValueTooMany", "spec.tags", "Too many: 3: must have at most 2 items")]
    assert causes({"spec": {"color": "red", "tags": []}})[0][2].endswith("should have at least 1 items")
    assert causes({"spec": {"color": "red", "tags": ["a", 1]}})[0][1] == "spec.tags[1]"
    assert causes({"spec": {"color": "red", "labels": {"a": 1}}})[0][1] == "spec.labels.a"


def test_formats() -> None:
    assert causes({"spec": {"color": "red", "when": "yesterday"}}) == [
        ("FieldValueInvalid", "spec.when",
         'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"')]
    assert validate({"type": "string", "format": "ipv4"}, "10.0.0.1") == []
    assert validate({"type": "string", "format": "ipv4"}, "10.0.0.300") != []
    assert validate({"type": "string", "format": "uuid"}, "not-a-uuid") != []
    assert validate({"type": "string", "format": "something-else"}, "anything") == []  # unknown: not checked


def test_embedded_resources_need_apiversion_and_kind() -> None:
    got = causes({"spec": {"color": "red", "template": {"spec": {"a": "b"}}}})
    assert [c[1] for c in got] == ["spec.template.apiVersion", "spec.template.kind"]


def test_unknown_fields_are_pruned_except_where_preserved() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"color": "red", "extra": 1, "free": {"anything": {"goes": True}}, "labels": {"k": "v"},
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": {"a": "x", "b": "y"}},
                 "tags": ["a"]},
        "status": {"ready": True, "phase": "x"},
        "top": 1,
    }
    assert sorted(prune(SCHEMA, obj)) == ["spec.extra", "spec.template.spec.b", "status.phase", "top"]
    assert obj["metadata"] == {"name": "w", "labels": {"a": "b"}}
    assert obj["spec"]["free"] == {"anything": {"goes": True}}
    assert obj["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                       "spec": {"a": "x"}}


def test_metadata_is_never_pruned_even_when_declared_as_an_object() -> None:
    schema = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                               "metadata": {"type": "object"}, "spec": {"type": "object"}}}
    obj: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": "w", "namespace": "default", "labels": {"a": "b"}}, "spec": {}}
    assert prune(schema, obj) == []
    assert obj["metadata"] == {"name": "w", "namespace": "default", "labels": {"a": "b"}}


def test_nulls_of_fields_that_are_not_nullable_are_dropped_then_defaulted() -> None:
    obj: dict[str, Any] = {"spec": {"color": "red", "replicas": None, "note": None, "name": None,
                                    "labels": {"a": None}}}
    assert prune(SCHEMA, obj) == []
    assert obj["spec"] == {"color": "red", "note": None, "labels": {}}
    apply_defaults(SCHEMA, obj)
    assert obj["spec"]["replicas"] == 1 and obj["spec"]["note"] is None
    assert causes(obj) == []


def test_defaults_fill_absent_fields_depth_first() -> None:
    obj: dict[str, Any] = {"spec": {"color": "red"}}
    apply_defaults(SCHEMA, obj)
    assert obj["spec"] == {"color": "red", "replicas": 1, "nested": {"level": "info"}}
    kept: dict[str, Any] = {"spec": {"replicas": 5, "nested": {"level": "debug"}}}
    apply_defaults(SCHEMA, kept)
    assert kept["spec"] == {"replicas": 5, "nested": {"level": "debug"}}
    nulled: dict[str, Any] = {"spec": {"replicas": None}}
    apply_defaults(SCHEMA, nulled)
    assert nulled["spec"]["replicas"] == 1  # not nullable: null takes the default
    assert "status" not in obj  # no default, no object


def test_a_structural_schema_has_no_problems() -> None:
    assert structure_problems(SCHEMA, "s") == []


def test_structure_problems() -> None:
    path = "spec.versions[0].schema.openAPIV3Schema"
    got = structure_problems({"type": "object", "properties": {
        "spec": {"properties": {"a": {"type": "string"}}},
        "list": {"type": "array"},
        "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "odd": {"type": "strin"},
        "bad": {"type": "integer", "default": "x"},
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
    }}, path)
    fields = {c["field"]: c["message"] for c in got}
    assert fields[f"{path}.properties[spec].type"] == "Required value: must not be empty for specified object fields"
    assert fields[f"{path}.properties[list].items"] == "Required value: must be specified"
    assert fields[f"{path}.properties[both].additionalProperties"].startswith("Forbidden")
    assert fields[f"{path}.properties[odd].type"].startswith('Unsupported value: "strin"')
    assert fields[f"{path}.properties[bad].default"].endswith('must be of type integer: "string"')
    assert fields[f"{path}.properties[metadata]"].startswith("Forbidden: must not specify anything other than name")
    assert structure_problems(None, path) == [
        {"reason": "FieldValueRequired", "field": path, "message": "Required value: schemas are required"}]
    assert structure_problems({"type": "string"}, path)[0]["message"] == \
        'Invalid value: "string": must be object at the root'


def test_a_type_beside_int_or_string_is_allowed_and_takes_both() -> None:
    # calico's operator CRDs declare ``type: integer`` with ``x-kubernetes-int-or-string: true``;
    # upstream's structural check allows it and validates the value as an integer or a string
    schema = {"type": "object", "properties": {
        "mark": {"type": "integer", "x-kubernetes-int-or-string": True, "pattern": "^.*"}}}
    assert structure_problems(schema, "s") == []
    assert validate(schema, {"mark": 7}, "") == []
    assert validate(schema, {"mark": "0x10"}, "") == []
    assert [c["field"] for c in validate(schema, {"mark": True}, "")] == ["mark"]


def test_list_types_set_and_map_refuse_duplicates() -> None:
    as_set = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
    assert validate(as_set, ["a", "b", "a"], "spec.tags") == [
        {"reason": "FieldValueDuplicate", "field": "spec.tags[2]", "message": 'Duplicate value: "a"'}]
    as_map = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}
    assert validate(as_map, [{"name": "a", "v": 1}, {"name": "b", "v": 1}], "spec.ports") == []
    assert validate(as_map, [{"name": "a", "v": 1}, {"name": "a", "v": 2}], "spec.ports") == [
        {"reason": "FieldValueDuplicate", "field": "spec.ports[1]", "message": 'Duplicate value: {"name":"a"}'}]


def test_keywords_of_the_wrong_type_are_problems_not_crashes() -> None:
    path = "s"
    got = structure_problems({"type": "object", "properties": {
        "a": {"type": "integer", "enum": 3, "minimum": "1"},
        "b": {"type": "string", "maxLength": -1, "required": "x"},
        "c": {"type": "string", "nullable": "yes"},
    }}, path)
    assert {c["field"]: c["message"] for c in got} == {
        "s.properties[a].enum": "Invalid value: 3: must be an array",
        "s.properties[a].minimum": 'Invalid value: "1": must be an integer or a number',
        "s.properties[b].maxLength": "Invalid value: -1: must be a non-negative integer",
        "s.properties[b].required": 'Invalid value: "x": must be an array of strings',
        "s.properties[c].nullable": 'Invalid value: "yes": must be a boolean',
    }


RULED: dict[str, Any] = {"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.replicas <= 10", "message": "at most 10 replicas"},
        {"rule": "!has(self.min) || self.min <= self.replicas", "reason": "FieldValueForbidden", "fieldPath": ".min",
         "messageExpression": "'min ' + string(self.min) + ' is above replicas'"},
        {"rule": "self.replicas >= oldSelf.replicas"},  # a transition rule: needs the stored object
    ],
    "properties": {"replicas": {"type": "integer"}, "min": {"type": "integer"},
                   "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('w')"}]}}}}}


def test_cel_rules_of_the_schema_are_run_on_their_values() -> None:
    assert validate(RULED, {"spec": {"replicas": 5, "min": 1, "name": "web"}}) == []
    causes = validate(RULED, {"spec": {"replicas": 11, "min": 20, "name": "db"}})
    assert {(c["field"], c["reason"], c["message"]) for c in causes} == {
        ("spec", "FieldValueInvalid", "Invalid value: at most 10 replicas"),  # an object's value is not shown
        ("spec.min", "FieldValueForbidden", "Forbidden: min 20 is above replicas"),
        ("spec.name", "FieldValueInvalid", 'Invalid value: "db": failed rule: self.startsWith(\'w\')'),  # a scalar's is
    }


def test_a_values_own_rules_come_before_its_childrens() -> None:
    causes = validate(RULED, {"spec": {"replicas": 11, "min": 1, "name": "db"}})
    assert [c["field"] for c in causes] == ["spec", "spec.name"]


def test_a_rules_reason_words_its_cause_as_upstream() -> None:
    def failing(reason: str, kind: str, value: Any, **extra: str) -> tuple[str, str]:
        rule = {"rule": "false", "message": " not this ", "reason": reason, **extra}
        schema = {"type": "object", "properties": {"v": {"type": kind, "x-kubernetes-validations": [rule]}}}
        (cause,) = validate(schema, {"v": value})
        return cause["reason"], cause["message"]

    assert failing("FieldValueDuplicate", "string", "a") == ("FieldValueDuplicate", 'Duplicate value: "a"')
    assert failing("FieldValueDuplicate", "object", {}) == ("FieldValueDuplicate", "Duplicate value")
    assert failing("FieldValueRequired", "integer", 1) == ("FieldValueRequired", "Required value: not this")
    assert failing("FieldValueInvalid", "integer", 7) == ("FieldValueInvalid", "Invalid value: 7: not this")
    assert failing("", "array", []) == ("FieldValueInvalid", "Invalid value: not this")
    # a messageExpression that is empty or has a line break gives way to the message
    for expression in ("'  '", "'a\\nb'", "1"):
        assert failing("", "boolean", True, messageExpression=expression) == \
            ("FieldValueInvalid", "Invalid value: true: not this")
    assert failing("", "boolean", True, messageExpression="' made '") == \
        ("FieldValueInvalid", "Invalid value: true: made")


def test_a_rule_that_fails_to_run_is_a_cause() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.replicas > 1"}]}
    assert validate(schema, {"size": 1}, "spec") == [
        {"reason": "FieldValueInvalid", "field": "spec",
         "message": 'Invalid value: "object": no such key: replicas evaluating rule: self.replicas > 1'}]


def test_transition_rules_run_on_an_update_where_the_old_object_has_the_value() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.replicas >= oldSelf.replicas", "message": "no scaling down"}],
        "properties": {
            "replicas": {"type": "integer"},
            "mode": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "fixed"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"},
                          "port": {"type": "integer", "x-kubernetes-validations": [
                              {"rule": "self == oldSelf", "message": "port fixed"}]}}}},
        }}}}
    new = {"spec": {"replicas": 1, "mode": "b", "ports": [{"name": "a", "port": 2}, {"name": "c", "port": 3}]}}
    assert validate(schema, new) == []  # a create: no oldSelf, the rules are not run
    old = {"spec": {"replicas": 2, "mode": "a", "ports": [{"name": "b", "port": 9}, {"name": "a", "port": 1}]}}
    assert {(c["field"], c["message"]) for c in validate(schema, new, old=old)} == {
        ("spec", "Invalid value: no scaling down"),
        ("spec.mode", 'Invalid value: "b": fixed'),
        ("spec.ports[0].port", "Invalid value: 2: port fixed"),  # item "a", correlated by its key
    }
    assert validate(schema, {"spec": {"replicas": 3}}, old=old) == []  # mode newly absent: not compared


def test_optional_old_self_rules_run_on_a_create_too_with_old_self_an_optional() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tier": {"type": "string", "x-kubernetes-validations": [
            {"rule": "oldSelf.hasValue() ? self == oldSelf.value() : self != 'gold'", "optionalOldSelf": True,
             "message": "gold is earned, and a tier fixed"},
            {"rule": "self == oldSelf", "optionalOldSelf": False, "message": "fixed"}]}}}}}
    assert [c["message"] for c in validate(schema, {"spec": {"tier": "gold"}})] == [
        'Invalid value: "gold": gold is earned, and a tier fixed']  # a create: oldSelf is optional.none()
    assert validate(schema, {"spec": {"tier": "silver"}}) == []
    old = {"spec": {"tier": "silver"}}
    assert [c["message"] for c in validate(schema, {"spec": {"tier": "gold"}}, old=old)] == [
        'Invalid value: "gold": gold is earned, and a tier fixed', 'Invalid value: "gold": fixed']
    assert validate(schema, {"spec": {"tier": "silver"}}, old=old) == []
    # a value the old object lacks: oldSelf is none again, where the plain transition rule is not run
    assert [c["message"] for c in validate(schema, {"spec": {"tier": "gold"}}, old={"spec": {}})] == [
        'Invalid value: "gold": gold is earned, and a tier fixed']


def test_a_ratcheted_rule_failure_is_collected_for_a_warning() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 1,
                 "x-kubernetes-validations": [{"rule": "self < 5", "message": "small"}]},
        "name": {"type": "string"}}}}}
    old = {"spec": {"size": 9, "name": "a"}}
    ratcheted: list[dict[str, str]] = []
    assert validate(schema, {"spec": {"size": 9, "name": "b"}}, old=old, ratcheted=ratcheted) == []
    assert ratcheted == [{"reason": "FieldValueInvalid", "field": "spec.size", "message": "Invalid value: 9: small"}]
    ratcheted.clear()  # a schema error ratcheted is dropped silently, as upstream's
    assert validate(schema, {"spec": {"size": 0, "name": "b"}}, old={"spec": {"size": 0}}, ratcheted=ratcheted) == []
    assert ratcheted == []


def test_rules_are_not_run_when_the_schema_finds_the_wrong_shape() -> None:
    causes = validate(RULED, {"spec": {"replicas": "many", "name": "db"}})
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.replicas", 'Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
        ("<nil>", "Invalid value: null: some validation rules were not checked because the object was invalid; "
                  "correct the existing errors to complete validation"),
    ]


def test_a_rules_fields_are_checked_with_the_crd() -> None:
    path = "spec.versions[0].schema.openAPIV3Schema"
    rules: list[dict[str, Any]] = [
        {"rule": "self.a == 1", "reason": "Bogus"},
        {"rule": "self.a == 1", "fieldPath": ".zzz"},
        {"rule": " "},
        {"rule": "self.a ==\n1"},
        {"rule": "self.a == 1", "message": "two\nlines"},
        {"rule": "self.a == 1", "messageExpression": " "},
        {"rule": "self.a == 1", "fieldPath": ".labels['k.x']", "reason": "FieldValueRequired"},
    ]
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": rules,
        "properties": {"a": {"type": "integer"}, "labels": {"type": "object",
                                                            "additionalProperties": {"type": "string"}}}}}}
    at = f"{path}.properties[spec].x-kubernetes-validations"
    assert [(c["field"], c["message"]) for c in structure_problems(schema, path)] == [
        (f"{at}[0].reason", 'Unsupported value: "Bogus": supported values: "FieldValueDuplicate", '
                            '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"'),
        (f"{at}[1].fieldPath", 'Invalid value: ".zzz": must be a valid path'),
        (f"{at}[2].rule", "Required value: rule is not specified"),
        (f"{at}[3].message", "Required value: message must be specified if rule contains line breaks"),
        (f"{at}[4].message", 'Invalid value: "two\\nlines": must not contain line breaks'),
        (f"{at}[5].messageExpression", "Required value: messageExpression must be non-empty if specified"),
    ]


def test_a_rule_or_message_expression_that_does_not_compile_refuses_the_crd() -> None:
    path = "spec.versions[0].schema.openAPIV3Schema"
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.a >", "reason": "FieldValueForbidden"},
        {"rule": "self.a > 1", "messageExpression": "'a is ' + this does not compile"},
        {"rule": "self.?a.orValue(0) > 1", "messageExpression": "'a is ' + string(self.a)"},  # both compile
        {"rule": "self.a > 1", "optionalOldSelf": False},  # set, where the rule has no oldSelf
        {"rule": "self.a > oldSelf.orValue(0)", "optionalOldSelf": True},
    ], "properties": {"a": {"type": "integer"}}}}}
    at = f"{path}.properties[spec].x-kubernetes-validations"
    found = structure_problems(schema, path)
    assert [(c["reason"], c["field"]) for c in found] == [
        ("FieldValueInvalid", f"{at}[0].rule"), ("FieldValueInvalid", f"{at}[1].messageExpression"),
        ("FieldValueInvalid", f"{at}[3].optionalOldSelf")]
    assert found[2]["message"] == "Invalid value: false: may not be set if oldSelf is not used in rule"
    # the bad value is the whole rule, as Go's %#v prints apiextensions.ValidationRule
    assert found[0]["message"].startswith(
        'Invalid value: apiextensions.ValidationRule{Rule:"self.a >", Message:"", MessageExpression:"", '
        "Reason:(*apiextensions.FieldValueErrorReason)(0xc000010000), FieldPath:\"\", "
        "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:9: Syntax error: mismatched input "
        "'<EOF>' expecting ")
    assert found[0]["message"].endswith("\n | self.a >\n | ........^")
    assert found[1]["message"].startswith(
        'Invalid value: apiextensions.ValidationRule{Rule:"self.a > 1", Message:"", '
        "MessageExpression:\"'a is ' + this does not compile\", Reason:(*apiextensions.FieldValueErrorReason)(nil), "
        'FieldPath:"", OptionalOldSelf:(*bool)(nil)}: messageExpression compilation failed: ERROR: <input>:1:16: '
        "Syntax error: mismatched input 'does' expecting ")


def test_old_self_is_refused_where_old_and_new_items_are_not_paired() -> None:
    path = "spec.validation.openAPIV3Schema"
    fixed = [{"rule": "self == oldSelf"}]
    schema = {"type": "object", "properties": {  # bounded lists: else the rules cost too much (below)
        "atomic": {"type": "array", "maxItems": 10, "items": {"type": "object", "properties": {
            "a": {"type": "string", "x-kubernetes-validations": fixed}}}},
        "keyed": {"type": "array", "maxItems": 10, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "required": ["k"], "properties": {
                      "k": {"type": "string"}, "a": {"type": "string", "x-kubernetes-validations": fixed}}}}}}
    assert [(c["field"], c["message"]) for c in structure_problems(schema, path)] == [
        (f"{path}.properties[atomic].items.properties[a].x-kubernetes-validations[0].rule",
         'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema '
         f"within {path}.properties[atomic]")]


def test_rules_are_not_compiled_where_the_schema_has_other_errors_and_follow_them() -> None:
    path = "spec.validation.openAPIV3Schema"
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "x-kubernetes-validations": [{"rule": "self.x >"}],
              "properties": {"x": {"type": "bogus"}}},
        "b": {"type": "object", "x-kubernetes-validations": [{"rule": "self.x >"}],
              "properties": {"x": {"type": "integer"}}},
        "c": {"type": "string", "uniqueItems": True}}}
    assert [c["field"] for c in structure_problems(schema, path)] == [
        f"{path}.properties[a].properties[x].type", f"{path}.properties[c].uniqueItems",
        f"{path}.properties[b].x-kubernetes-validations[0].rule"]


def test_a_rules_field_path_is_normalised_as_upstream() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [
        {"rule": "false", "fieldPath": ".spec['a']", "message": "root"}],
        "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"},
                       "x-kubernetes-validations": [{"rule": "false", "fieldPath": ".k", "message": "key"}]}}}}}
    # a key is "[k]", joined as a child's name: upstream's field.Path renders spec.labels.[k]
    assert [c["field"] for c in validate(schema, {"spec": {"a": "x", "labels": {"k": "v"}}})] == \
        ["spec.a", "spec.labels.[k]"]


def test_an_update_is_not_held_to_what_it_leaves_unchanged() -> None:
    """CRDValidationRatcheting (GA in 1.33): a CRD made stricter does not refuse updates of
    objects written before, for the values they do not change."""
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self <= 10", "message": "too big"},
                                                                  {"rule": "self >= oldSelf", "message": "no shrink"}]},
        "note": {"type": "string"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["port"], "properties": {
                      "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}}}}}}
    old = {"spec": {"name": "Bad_Name", "size": 20, "ports": [{"name": "a", "port": 500}]}}
    new = {"spec": {"name": "Bad_Name", "size": 20, "note": "x", "ports": [{"name": "a", "port": 500}]}}
    assert validate(schema, new, old=old) == []  # only note changed
    assert len(validate(schema, new)) == 3  # a create is held to everything
    changed = {"spec": {"name": "Bad-Name", "size": 30,
                        "ports": [{"name": "a", "port": 501}, {"name": "b", "port": 101}]}}
    assert {c["field"] for c in validate(schema, changed, old=old)} == {
        "spec.name", "spec.size", "spec.ports[0].port", "spec.ports[1].port"}
    # a transition rule is never ratcheted
    shrunk = {"spec": {"name": "Bad_Name", "size": 15, "ports": [{"name": "a", "port": 500}]}}
    assert [c["message"] for c in validate(schema, shrunk, old=old)] == ["Invalid value: 15: too big",
                                                                         "Invalid value: 15: no shrink"]
    # unchanged as Go's DeepEqual of decoded JSON says
    assert same({"a": [1, "x"]}, {"a": [1, "x"]}) and not same(20, 20.0) and not same(1, True)


def test_a_string_too_long_or_short_is_not_matched_against_its_pattern() -> None:
    schema = {"type": "string", "maxLength": 3, "minLength": 2, "pattern": "^[a-z]+$"}
    assert [c["message"] for c in validate(schema, "ABCD", "s")] == ["Too long: may not be more than 3 bytes"]
    assert [c["message"] for c in validate(schema, "A", "s")] == ['Invalid value: "A": s in body should be at '
                                                                  "least 2 chars long"]
    assert [c["message"] for c in validate(schema, "AB", "s")] == ['Invalid value: "AB": s in body should match '
                                                                   "'^[a-z]+$'"]
