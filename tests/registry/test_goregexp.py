"""CRD ``pattern``s read as Go's regexp reads them: its syntax, its meaning, its refusals."""

from __future__ import annotations

import pytest

from controlplane.registry.goregexp import compile_go, syntax_error
from controlplane.registry.structural import structure_problems, validate


def matches(pattern: str, value: str) -> bool:
    compiled = compile_go(pattern)
    assert compiled is not None, pattern
    return compiled.search(value) is not None


def test_flags_set_mid_expression_last_to_the_end_of_their_group() -> None:
    # prometheus-operator's PrometheusRule spec.groups[].partial_response_strategy
    assert syntax_error("^(?i)(abort|warn)?$") is None
    assert [matches("^(?i)(abort|warn)?$", v) for v in ("WARN", "Abort", "", "x")] == [True, True, True, False]
    # across a `|` of their level, not before it
    assert [matches("^a(?i)b$|^c$", v) for v in ("aB", "AB", "C")] == [True, False, True]
    assert [matches("^(a(?i)b)c$", v) for v in ("aBc", "aBC")] == [True, False]
    assert matches("(?i:A)b", "ab") and not matches("^(?i:A)b$", "aB")


def test_end_of_text_digits_words_and_spaces_mean_what_they_mean_in_go() -> None:
    assert not matches("^a$", "a\n")  # Go's $ is \z without the m flag
    assert matches("(?m)^a$", "a\nb") and matches(r"^a\z", "a") and not matches(r"^a\z", "a\n")
    assert not matches(r"^\d+$", "١٢") and not matches(r"^\w+$", "é")  # ASCII classes
    assert matches(r"^\Qa.b\E$", "a.b") and not matches(r"^\Qa.b\E$", "axb")
    assert matches(r"^\x{263a}$", "☺") and matches("^[[:alpha:]_]+$", "Ab_") and not matches("^[[:digit:]]$", "a")
    assert matches("^x{,2}$", "x{,2}")  # not a repetition in Go
    assert matches("^(?P<a>x)(?<b>y)$", "xy")


@pytest.mark.parametrize(("pattern", "message"), [
    ("^(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
    ("(?!a)", "invalid or unsupported Perl syntax: `(?!`"),
    ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
    ("(?P=n)", "invalid or unsupported Perl syntax: `(?P`"),
    (r"(a)\1", r"invalid escape sequence: `\1`"),
    (r"a\Z", r"invalid escape sequence: `\Z`"),
    (r"\u0041", r"invalid escape sequence: `\u`"),
    ("a**", "invalid nested repetition operator: `**`"),
    ("a*+", "invalid nested repetition operator: `*+`"),
    ("a{1001}", "invalid repeat count: `{1001}`"),
    ("a{2,1}", "invalid repeat count: `{2,1}`"),
    ("*a", "missing argument to repetition operator: `*`"),
    ("(ab", "missing closing ): `(ab`"),
    ("ab)", "unexpected ): `ab)`"),
    ("x[ab", "missing closing ]: `[ab`"),
    ("[z-a]", "invalid character class range: `z-a`"),
])
def test_what_go_refuses_is_refused_in_its_words(pattern: str, message: str) -> None:
    assert syntax_error(pattern) == f"error parsing regexp: {message}"
    assert compile_go(pattern) is None


def test_go_syntax_without_a_python_form_is_matched_as_go_matches_it() -> None:
    assert all(syntax_error(p) is None for p in (r"^\pL+$", r"^\p{Greek}$", "(?U)a+"))
    assert matches(r"^\pL+$", "héllo") and not matches(r"^\pL+$", "h1")
    assert matches(r"^\p{Greek}$", "λ") and not matches(r"^\p{Greek}$", "l")
    ungreedy = compile_go("(?U)a+")
    assert ungreedy is not None and ungreedy.search("aaa").group(0) == "a"
    assert matches("^(?i)straße$", "STRASSE") is False and matches("^(?i)é$", "É")  # Unicode folding, as Go
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"^\pL+$"}}}
    assert validate(schema, {"s": "abc"}) == []
    assert [c["message"] for c in validate(schema, {"s": "1"})] == [
        "Invalid value: \"1\": s in body should match '^\\pL+$'"]


@pytest.mark.timeout(30)
def test_a_pattern_takes_linear_time_whatever_the_value() -> None:
    # a backtracking engine takes 2^n steps for ^(a+)+$ on n a's and a mismatch: this one
    # request would hold the server's event loop for ever (RE2: about a millisecond)
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    assert len(validate(schema, {"s": "a" * 100_000 + "!"})) == 1


def test_a_crd_pattern_is_checked_with_go_syntax_and_values_against_it() -> None:
    path = "spec.versions[0].schema.openAPIV3Schema"
    strategy = {"type": "string", "pattern": "^(?i)(abort|warn)?$"}
    schema = {"type": "object", "properties": {"strategy": strategy, "bad": {"type": "string", "pattern": "^(?=x)"}}}
    assert structure_problems(schema, path) == [{
        "reason": "FieldValueInvalid", "field": f"{path}.properties[bad].pattern",
        "message": 'Invalid value: "^(?=x)": must be a valid regular expression, but isn\'t: '
                   "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"}]
    schema = {"type": "object", "properties": {"strategy": strategy}}
    assert validate(schema, {"strategy": "Warn"}) == []
    assert validate(schema, {"strategy": "warn\n"}) == [{
        "reason": "FieldValueInvalid", "field": "strategy",
        "message": 'Invalid value: "warn\\n": strategy in body should match \'^(?i)(abort|warn)?$\''}]
