"""The Kubernetes CEL libraries in CRD rules: upstream's functions, evaluated."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.registry.expressions import ExpressionError, evaluate
from controlplane.registry.structural import validate


@pytest.mark.parametrize("expression", [
    # strings
    "'ABCé'.lowerAscii() == 'abcé' && 'abc'.upperAscii() == 'ABC'",
    "'a/b/c'.split('/') == ['a', 'b', 'c'] && 'a/b/c'.split('/', 2) == ['a', 'b/c'] && 'a'.split('/', 0) == []",
    "'abc'.indexOf('c') == 2 && 'abcabc'.indexOf('a', 1) == 3 && 'abcabc'.lastIndexOf('a') == 3",
    "'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 1) == 'baa'",
    "'abc'.substring(1) == 'bc' && 'abc'.substring(0, 2) == 'ab' && ' a '.trim() == 'a'",
    "'abc'.charAt(1) == 'b' && 'abc'.charAt(3) == '' && 'abc'.reverse() == 'cba'",
    "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
    # lists
    "[1, 2, 3].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
    # regex, in Go's syntax
    "'ab12cd3'.find('[0-9]+') == '12' && 'ab12cd3'.findAll('[0-9]') == ['1', '2', '3'] && 'x'.find('y') == ''",
    # URLs
    "isURL('https://example.com:8443/a?b=c') && !isURL('example.com') && !isURL('https://x/#frag')",
    "url('https://u@example.com:8443/a?b=c').getHost() == 'example.com:8443'",
    "url('https://[::1]:80/').getHostname() == '::1' && url('https://example.com/').getPort() == ''",
    "url('http://x/a%20b').getEscapedPath() == '/a%20b' && url('http://x/?k=1&k=2').getQuery()['k'] == ['1', '2']",
    # IPs and CIDRs
    "isIP('10.0.0.1') && isIP('fd00::1') && !isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0') && !isIP('1.2.3')",
    "ip('10.0.0.1').family() == 4 && ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified()",
    "ip('fe80::1').isLinkLocalUnicast() && ip('224.0.0.1').isLinkLocalMulticast() && ip('8.8.8.8').isGlobalUnicast()",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
    "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
    "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
    "cidr('10.1.2.3/8').prefixLength() == 8 && cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')",
    "cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
    # quantities
    "quantity('1Gi').isGreaterThan(quantity('1G')) && isQuantity('250m') && !isQuantity('x')",
    # string() of an IP or a CIDR
    "string(ip('fd00:0::1')) == 'fd00::1' && string(cidr('10.0.0.0/8')) == '10.0.0.0/8' && string(1) == '1'",
    "string(true) == 'true' && string(false) == 'false' && string(b'ab') == 'ab' && string(2u) == '2'",
    # sets (cel-go's ext.Sets): CEL's equality, where 1 is 1.0 but never true
    "sets.contains([1, 2, 3], [3, 1]) && !sets.contains([1], [2]) && sets.contains([1], [])",
    "sets.contains([1], [1.0]) && !sets.contains([1], [true]) && !sets.contains([[1]], [[true]])",
    "sets.equivalent([1, 2], [2, 1, 1]) && !sets.equivalent([1], [1, 2])",
    "sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], []) && !sets.intersects([0], [false])",
    # strings.quote (cel-go's ext.Strings, version 2)
    r"""strings.quote('a"b\\c\n') == '"a\\"b\\\\c\\n"'""",
    # format (Kubernetes' format library): none when valid, else the problems
    "!format.dns1123Label().validate('my-name').hasValue() && format.dns1123Label().validate('a.b').hasValue()",
    "format.dns1123Label().validate('a.b').value() == ['must not contain dots']",
    "!format.dns1123LabelPrefix().validate('my-prefix-').hasValue() && format.dns1123Label().validate('x-').hasValue()",
    "!format.dns1123Subdomain().validate('a.example.com').hasValue()",
    "format.dns1035Label().validate('1a').hasValue()",
    "!format.qualifiedName().validate('example.com/Name').hasValue() && format.labelValue().validate('a b').hasValue()",
    "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
    "format.uuid().validate('x').value() == ['does not match the UUID format']",
    "format.byte().validate('***').value() == ['invalid base64'] && !format.date().validate('2021-01-01').hasValue()",
    "format.datetime().validate('yesterday').value() == ['invalid datetime'] && format.uri().validate('x').hasValue()",
    "format.named('labelValue').hasValue() && !format.named('nope').hasValue()",
    "format.named('dns1123Label').value().validate('UP').value().size() == 1",
    # optionals: optional.of/none and their methods, and the optional syntax
    "optional.of(1).hasValue() && !optional.none().hasValue() && optional.none().orValue(2) == 2",
    "self.?a.hasValue() && !self.?zz.hasValue() && self.?a.b.orValue(0) == 1 && self.?zz.b.orValue(0) == 0",
    "self.?a.?zz.orValue(3) == 3 && self.?a['b'].value() == 1 && self.?a[?'zz'].orValue(4) == 4",
    "self.l[?1].value() == 'y' && !self.l[?2].hasValue() && self.m[?'k.x'].orValue('') == 'v'",
    "self.?a.orValue({}).b == 1 && ['x'][?0].value() == 'x'",
    # two-variable comprehensions (Kubernetes' since 1.32): index and item, key and value
    "self.m.all(k, v, k.contains('.') && v == 'v') && !self.l.all(i, v, i == 0)",
    "self.l.exists(i, v, i == 1 && v == 'y') && self.l.existsOne(i, v, v == 'x') && !self.l.exists_one(i, v, i >= 0)",
    "self.l.transformList(i, v, v + string(i)) == ['x0', 'y1'] && self.l.transformList(i, v, i > 0, v) == ['y']",
    "self.m.transformMap(k, v, v + k) == {'k.x': 'vk.x'} && self.m.transformMap(k, v, false, v) == {}",
    "self.m.transformMapEntry(k, v, {v: k}) == {'v': 'k.x'}",
    "self.l.all(x, x != '') && self.m.all(k, v, self.l.exists(i, w, w + k != v))",  # one variable, and nested
])
def test_the_kubernetes_libraries_are_there(expression: str) -> None:
    assert evaluate(expression, {"self": {"a": {"b": 1}, "l": ["x", "y"], "m": {"k.x": "v"}}}) is True


def test_a_library_function_that_fails_is_a_rule_that_fails_to_run() -> None:
    for expression in ("'abc'.substring(4)", "[].min()", "ip('x')", "url('nope')"):
        with pytest.raises(ExpressionError):
            evaluate(expression, {"self": {}})


def test_gateway_apis_label_key_rule_runs() -> None:
    # gateway.networking.k8s.io Gateway spec.infrastructure.labels
    schema: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
    schema["x-kubernetes-validations"] = [
        {"rule": 'self.all(key, key.split("/")[0].size() < 253)',
         "message": "If specified, the label key's prefix must be a DNS subdomain not longer than 253 characters"}]
    assert validate(schema, {"example.com/team": "a"}, "spec.infrastructure.labels") == []
    (cause,) = validate(schema, {"a" * 253 + "/team": "a"}, "spec.infrastructure.labels")
    assert cause["message"] == ("Invalid value: If specified, the label key's prefix must be a DNS subdomain not "
                                "longer than 253 characters")


def test_matches_is_a_global_function_too() -> None:
    # Gateway API's safe-upgrades ValidatingAdmissionPolicy
    assert evaluate("matches(self, 'v1.[0-3].\\\\d+') && !matches(self, 'v0') && self.matches('^v1')",
                    {"self": "v1.2.3"}) is True


def test_only_global_matches_calls_are_renamed() -> None:
    from controlplane.registry.cellibs import GLOBAL_MATCHES, with_global_matches

    assert with_global_matches("matches(a, 'x') && !matches (b, 'y')") == \
        f"{GLOBAL_MATCHES}(a, 'x') && !{GLOBAL_MATCHES}(b, 'y')"
    for unchanged in ("self.matches('^a')", "self.x.matches('a')", "'matches(x)' == s", '"""matches(""" == s',
                      "nomatches(x)", r"'it\'s matches(x)' == s"):
        assert with_global_matches(unchanged) == unchanged


def test_the_format_library_words_its_problems_as_apimachinery() -> None:
    assert evaluate("format.dns1123Label().validate(self).value()", {"self": "A" * 64}) == [
        "must be no more than 63 characters",
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]


def test_a_field_after_an_optional_step_stays_optional_on_a_plain_value() -> None:
    # self.?a.b.c: .c applies to b's value (1), which has no fields: cel-go's presence test
    # (refQualify) finds none there, as it does of a null
    assert evaluate("self.?a.b.c.hasValue()", {"self": {"a": {"b": 1}}}) is False
    assert evaluate("self.?a.b.c.orValue(2)", {"self": {"a": {"b": None}}}) == 2
    with pytest.raises(ExpressionError, match="no such key: zz"):
        evaluate("self.?a.orValue({}).zz", {"self": {"a": {"b": 1}}})


def test_a_map_entry_made_twice_is_an_error() -> None:
    with pytest.raises(ExpressionError, match="already exists"):
        evaluate("{'a': 1, 'b': 1}.transformMapEntry(k, v, {v: k})", {})


def test_the_optional_syntax_is_rewritten_outside_string_literals_only() -> None:
    from controlplane.registry.celsyntax import rewritten

    assert rewritten("self.?a.b[0].orValue(1)") == \
        "self._cp_opt_field('a')._cp_field('b')._cp_index(0).orValue(1)"
    assert rewritten("self.l[?i + 1] == x[0]") == "self.l._cp_opt_index(i + 1) == x[0]"
    assert rewritten("m.all(k, v, v > 0)") == \
        "m._cp_entries().all(_cp_e, [_cp_e[0]].map(k, [_cp_e[1]].map(v, v > 0)[0])[0])"
    for unchanged in ("'self.?a' == s", "r'x[?0]' + '''.?''' == s", "self.a[0].b", "[1, 2][0]", "l.all(x, x > 0)",
                      "'m.all(k, v, v)' == s", "m.all(k.x, v, v)"):
        assert rewritten(unchanged) == unchanged


def test_optional_entries_of_literals_are_valid_cel_the_interpreter_cannot_run() -> None:
    from controlplane.registry.expressions import compile_error

    # accepted at the write, as cel-go would; fails as it runs
    assert compile_error("[?self.?a, 1].size() == 1") is None
    with pytest.raises(ExpressionError, match="unsupported syntax"):
        evaluate("[?self.?a, 1].size() == 1", {"self": {}})
    assert compile_error("[?self.?a, 1].size() ==") is not None  # with a syntax error too
    assert compile_error("self.?a.orValue(1) == 1") is None


def test_a_syntax_error_is_reported_at_its_place_in_the_text_as_written() -> None:
    from controlplane.registry.expressions import compile_error

    error = compile_error("self.?a.orValue(1) ==")
    assert error is not None
    assert error.startswith("compilation failed: ERROR: <input>:1:22: Syntax error: ")
    assert error.endswith("\n | self.?a.orValue(1) ==\n | .....................^")


def test_a_library_functions_error_is_worded_as_its_own_not_as_the_interpreters_wrapping() -> None:
    with pytest.raises(ExpressionError) as e:
        evaluate("'abc'.substring(4)", {})
    assert str(e.value) == "index out of range: 4"
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "self.substring(4) == ''", "message": "m"}]}
    assert [c["message"] for c in validate(schema, "abc", "spec.name")] == [
        'Invalid value: "string": index out of range: 4 evaluating rule: m']


@pytest.mark.parametrize(("expression", "error"), [
    ("10 / (size(self) - 1)", "division by zero"), ("10u / 0u", "division by zero"),
    ("[1].all(x, x % 0 == 0)", "modulus by zero")])
def test_a_division_by_zero_is_worded_as_cel_gos(expression: str, error: str) -> None:
    """cel-go's ``ErrDivisionByZero`` and ``ErrModulusByZero`` (``common/types/err.go``), not the
    interpreter's ``... in CEL expression``."""
    with pytest.raises(ExpressionError) as e:
        evaluate(expression, {"self": [1]})
    assert str(e.value) == error


@pytest.mark.parametrize(("expression", "error"), [
    ("namespaceObject.metadata", "no such key: metadata"),  # null, as in a policy's match conditions
    ("namespaceObject.metadata.name == 'x'", "no such key: metadata"),
    ("object.spec.replicas > 1", "no such key: replicas"),  # a null field
    ("object.kind.name", "no such key: name"),  # a string
    ("object.items.map(i, i.name)", "no such key: name"),  # (of a comprehension's variable)
    ("size(object.kind) > 0 && namespaceObject.metadata.name == ''", "no such key: metadata"),
])
def test_a_field_of_a_value_that_is_no_map_is_no_such_key_as_cel_go(expression: str, error: str) -> None:
    """cel-go's ``refQualify`` answers a field selected on null or a scalar with ``no such key``;
    the interpreter's "No such overload" named nothing."""
    variables = {"namespaceObject": None, "object": {"kind": "Pod", "spec": None, "items": [3]}}
    with pytest.raises(ExpressionError) as e:
        evaluate(expression, variables)
    assert str(e.value) == error


@pytest.mark.parametrize(("expression", "value"), [
    ("has(object.spec.missing.f)", False),  # an explicit null
    ("!has(object.spec.missing.f) && has(object.spec.m.f)", True),
    ("has(params.f)", False),  # no params
    ("has(object.kind.f)", False),  # a string
    ("has(object.spec.replicas.f) || object.spec.replicas == 2", True),
    ("object.items.all(i, !has(i.f))", True),  # of a comprehension's variable
    ("has(object.spec.missing.f) ? 1 : 2", 2),
])
def test_has_of_a_field_of_null_or_a_scalar_is_false_as_cel_go(expression: str, value: object) -> None:
    """cel-go's presence test (``refQualify``, without ``EnableErrorOnBadPresenceTest``, which
    Kubernetes leaves off) answers false where the value tested is no map: the interpreter's
    ``has()`` failed with "No such overload"."""
    variables = {"params": None, "object": {"kind": "Pod", "spec": {"missing": None, "m": {"f": 1}, "replicas": 2},
                                            "items": [None, 3, "x"]}}
    assert evaluate(expression, variables) == value


@pytest.mark.parametrize(("expression", "value"), [
    ("params.?f.orValue(1)", 1),
    ("params[?'f'].hasValue()", False),
    ("object.spec.missing.?f.orValue('none')", "none"),
    ("object.spec.?missing.f.hasValue()", False),
    ("object.spec.missing[?'f'].orValue(0)", 0),
    ("object.kind.?f.hasValue()", False),  # a scalar
    ("object.items[?1.0].value()", 3),  # a double without a fraction indexes a list, as cel-go's
])
def test_an_optional_field_of_null_or_a_scalar_is_none_as_cel_go(expression: str, value: object) -> None:
    variables = {"params": None, "object": {"kind": "Pod", "spec": {"missing": None}, "items": [None, 3]}}
    assert evaluate(expression, variables) == value


@pytest.mark.parametrize("expression", [
    "object.spec.containers.name == 'a'",
    "has(object.spec.containers.name)",
    "object.spec.?containers.name.hasValue()",
    "object.spec.containers.?name.hasValue()",
    "object.spec.containers['name'] == 'a'",
    "object.spec[?'containers'][?'name'].hasValue()",
])
def test_a_field_of_a_list_is_cel_gos_unsupported_index_type(expression: str) -> None:
    variables = {"object": {"spec": {"containers": [{"name": "a"}]}}}
    with pytest.raises(ExpressionError) as e:
        evaluate(expression, variables)
    assert str(e.value) == "unsupported index type 'string' in list"


def test_an_operation_on_the_wrong_types_keeps_its_own_error() -> None:
    with pytest.raises(ExpressionError, match=r"^No such overload"):
        evaluate("(1 + 2u) == namespaceObject.metadata", {"namespaceObject": None})  # (the left fails first)
    assert evaluate("namespaceObject == null || namespaceObject.metadata.name == 'x'", {"namespaceObject": None})
    assert evaluate("has(object.a.b)", {"object": {"a": {"b": None}}})
