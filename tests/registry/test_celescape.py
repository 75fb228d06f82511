"""CRD rules that select properties by their escaped names (upstream's ``cel.Escape``:
``foo-bar`` is ``foo__dash__bar``) run as upstream's do: the name is looked up unescaped, in
selections, ``has()``, optional steps, transition rules, message expressions, nested objects
and lists of objects; a rule without an escaped name is compiled as it is written."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.registry.celcheck import escaped
from controlplane.registry.celsyntax import escaped_names, rewritten, unescaped
from controlplane.registry.expressions import ExpressionError, evaluate
from controlplane.registry.structural import structure_problems, validate


@pytest.mark.parametrize("name", ["foo-bar", "x.y", "a/b", "a__b", "namespace", "in", "a-.b/c__d", "if", "plain"])
def test_unescape_undoes_escape(name: str) -> None:
    cel_name = escaped(name)
    assert cel_name is not None and unescaped(cel_name) == name


def test_unescape_refuses_what_upstream_refuses() -> None:
    # an unknown escape, or a reserved word's inside a longer name: no property has such a name
    assert [unescaped(n) for n in ("__x__", "a__in__", "__namespace__x", "a__b", "__dash__")] == \
        [None, None, None, "a__b", "-"]


def test_only_escaped_selections_are_rewritten() -> None:
    assert rewritten("self.foo__dash__bar > 0", unescape=True) == 'self["foo-bar"] > 0'
    assert rewritten("has(self.spec.__namespace__)", unescape=True) == '("namespace" in (self.spec))'
    assert rewritten("!has(self.x__dot__y) || self.x__dot__y.size() > 0", unescape=True) == \
        '!("x.y" in (self)) || self["x.y"].size() > 0'
    assert rewritten("self.?a__slash__b.orValue(1)", unescape=True) == "self._cp_opt_field('a/b').orValue(1)"
    assert rewritten("self.?a.b__dash__c", unescape=True) == "self._cp_opt_field('a')._cp_field('b-c')"
    # left as written: no escape, a name that does not unescape, a string, a method, a has() of no escape
    for text in ("self.a__b > 0", "self.__x__ > 0", "self.a == 'self.foo__dash__bar'", "self.f__dash__g()",
                 "has(self.plain) && self.x > 0", "x.has(y)"):
        assert rewritten(text, unescape=True) == text
    assert rewritten("'self.b__dot__c' == self.__in__", unescape=True) == "'self.b__dot__c' == self[\"in\"]"


def test_escaped_names_are_those_rewritten() -> None:
    assert escaped_names("self.foo__dash__bar > self.__in__ && self.a__b") == {"foo-bar": "foo__dash__bar",
                                                                               "in": "__in__"}
    assert escaped_names("self.replicas > 0") == {}


SELF = {"foo-bar": 2, "x.y": "v", "a/b": 3, "namespace": "ns", "c__d": 4,
        "items": [{"a.b": 1}, {"a.b": 2}], "nested": {"k-8": {"deep-er": True}}}


@pytest.mark.parametrize("rule", [
    "self.foo__dash__bar == 2",
    "self.x__dot__y == 'v' && self.a__slash__b == 3 && self.__namespace__ == 'ns'",
    "self.c__underscores__d == 4",
    "has(self.foo__dash__bar) && !has(self.no__dash__such) && has(self.__namespace__)",
    "self.items.all(i, has(i.a__dot__b) && i.a__dot__b > 0)",
    "self.items.map(i, i.a__dot__b) == [1, 2]",
    "self.nested.k__dash__8.deep__dash__er",
    "has(self.nested.k__dash__8.deep__dash__er)",
    "self.?no__dash__such.orValue(5) == 5 && self.?foo__dash__bar.orValue(5) == 2",
    "self.?nested.k__dash__8.deep__dash__er.orValue(false)",
    "self.nested.all(k, v, has(v.deep__dash__er))",
])
def test_escaped_rules_evaluate(rule: str) -> None:
    assert evaluate(rule, {"self": SELF}, unescape=True) is True


def test_an_admission_policys_expressions_are_not_unescaped() -> None:
    """Upstream's admission policies see objects as plain maps: ``__namespace__`` is no such key."""
    text = "object.metadata.__namespace__ == 'a'"
    assert rewritten(text) == text
    with pytest.raises(ExpressionError, match="no such key: __namespace__"):
        evaluate(text, {"object": {"metadata": {"namespace": "a"}}})
    assert evaluate(text, {"object": {"metadata": {"namespace": "a"}}}, unescape=True) is True
    assert evaluate("self.?a.b__dash__c.orValue(0) == 0", {"self": {"a": {"b-c": 1}}}) is True


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.foo__dash__bar > 0", "message": "foo-bar must be positive"},
                {"rule": "!has(self.__namespace__) || self.__namespace__ != 'kube-system'",
                 "messageExpression": "'namespace ' + self.__namespace__ + ' is reserved'"},
                {"rule": "!has(self.x__dot__y) || self.x__dot__y.startsWith('v')"},
                {"rule": "self.foo__dash__bar >= oldSelf.foo__dash__bar", "message": "foo-bar may only grow"},
            ],
            "properties": {
                "foo-bar": {"type": "integer"},
                "x.y": {"type": "string"},
                "namespace": {"type": "string"},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "x-kubernetes-validations": [{"rule": "self.a__slash__b.size() <= 3", "message": "too long"}],
                    "properties": {"a/b": {"type": "string"}}}},
            },
        },
    },
}


def failures(value: Any, old: Any = None) -> list[tuple[str, str]]:
    causes = validate(SCHEMA, value) if old is None else validate(SCHEMA, value, old=old)
    return [(c["field"], c["message"]) for c in causes]


def test_the_schema_with_escaped_rules_is_accepted() -> None:
    assert structure_problems(SCHEMA, "s") == []
    misspelt = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"foo-bar": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.foo__dash__baz > 0"}]}}}
    [cause] = structure_problems(misspelt, "s")
    assert "undefined field 'foo__dash__baz'" in cause["message"]


def test_escaped_rules_pass_and_fail_as_upstreams() -> None:
    good = {"spec": {"foo-bar": 1, "x.y": "v1", "namespace": "apps", "items": [{"a/b": "abc"}, {"a/b": ""}]}}
    assert failures(good) == []
    bad = {"spec": {"foo-bar": 0, "x.y": "w", "namespace": "kube-system", "items": [{"a/b": "abcd"}]}}
    assert failures(bad) == [
        ("spec", "Invalid value: foo-bar must be positive"),
        ("spec", "Invalid value: namespace kube-system is reserved"),
        ("spec", "Invalid value: failed rule: !has(self.x__dot__y) || self.x__dot__y.startsWith('v')"),
        ("spec.items[0]", "Invalid value: too long"),
    ]


def test_a_missing_escaped_property_is_named_as_written() -> None:
    assert failures({"spec": {"x.y": "v"}}) == [
        ("spec", 'Invalid value: "object": no such key: foo__dash__bar evaluating rule: foo-bar must be positive')]
    assert failures({"spec": {"foo-bar": 1, "items": [{}]}}) == [
        ("spec.items[0]", 'Invalid value: "object": no such key: a__slash__b evaluating rule: too long')]


def test_escaped_transition_rules_compare_with_the_stored_object() -> None:
    assert failures({"spec": {"foo-bar": 3}}, old={"spec": {"foo-bar": 2}}) == []
    assert failures({"spec": {"foo-bar": 1}}, old={"spec": {"foo-bar": 2}}) == [
        ("spec", "Invalid value: foo-bar may only grow")]
