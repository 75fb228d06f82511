"""The Go template subset (controlplane.nodes.gotemplate)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.nodes.gotemplate import Template, TemplateError

FUNCS: dict[str, Any] = {"Quote": json.dumps, "Now": lambda: "T"}


def render(text: str, data: Any) -> str:
    return Template(text).render(data, FUNCS)


def test_fields_pipes_and_variables() -> None:
    data = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert render("{{ .metadata.name }}", data) == "p"
    assert render("{{ .metadata.creationTimestamp }}", data) == "2026-01-01T00:00:00Z"
    assert render("{{ .metadata.name | Quote }}", data) == '"p"'
    assert render("{{ $now := Now }}at {{ $now }}", data) == "at T"
    assert render("{{ $root := . }}{{ $root.metadata.name }}", data) == "p"
    assert render("{{ .missing }}", data) == "<no value>"
    assert render('{{ or .metadata.uid "none" | Quote }}', data) == '"none"'
    assert render('{{ printf "%s-%d" .metadata.name 3 }}', data) == "p-3"


def test_range_with_if_else_and_index() -> None:
    data = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "n": 2, "empty": []}
    assert render("{{ range .spec.containers }}[{{ .name }}]{{ end }}", data) == "[a][b]"
    assert render("{{ range $i, $c := .spec.containers }}{{ $i }}={{ $c.name }};{{ end }}", data) == "0=a;1=b;"
    assert render("{{ range .empty }}x{{ else }}none{{ end }}", data) == "none"
    assert render("{{ with .spec }}{{ len .containers }}{{ else }}no{{ end }}", data) == "2"
    assert render("{{ with .nothing }}yes{{ else }}no{{ end }}", data) == "no"
    # the object's numbers are json.Number, a string type, as KWOK's: compared with strings
    assert render('{{ if eq .n "1" }}one{{ else if eq .n "2" }}two{{ else }}many{{ end }}', data) == "two"
    assert render("{{ (index .spec.containers 1).name }}", data) == "b"
    assert render('{{ if and .n (not .empty) }}ok{{ end }}', data) == "ok"


def test_sprig_dict_as_kwok_chaos_stages_use_it() -> None:
    tpl = '{{ $a := or .metadata.annotations dict }}{{ or (index $a "k") "default" }}'
    assert render(tpl, {"metadata": {}}) == "default"
    assert render(tpl, {"metadata": {"annotations": {"k": "set"}}}) == "set"
    assert render('{{ index (dict "x" 1 "y") "y" | Quote }}', {}) == '""'


def test_sprig_functions_as_kwok_renders_them() -> None:
    """KWOK renders with Sprig's functions; the common ones, with Sprig's semantics."""
    data = {"a": {"k": "v"}, "n": "3", "s": " Mixed ", "l": ["x", "y"], "z": 0}
    cases = {
        # the object's 0 is json.Number "0", a string: not empty, as in KWOK
        '{{ .missing | default "d" }} {{ .a.k | default "d" }} {{ .z | default 7 }} {{ 0 | default 7 }}': "d v 0 7",
        "{{ empty .z }} {{ empty 0 }} {{ empty .a }} {{ coalesce .missing .z .a.k }}": "false true false 0",
        '{{ ternary "yes" "no" (hasKey .a "k") }} {{ get .a "nope" | quote }} {{ .a.k | squote }}': "yes \"\" 'v'",
        "{{ add1 .n }} {{ add 1 .n 2.9 }} {{ sub 1 .n }} {{ mul 2 .n }} {{ div -7 2 }} {{ mod -7 2 }}":
            "4 6 -2 6 -3 -1",
        "{{ max 1 .n }} {{ min 1 .n }} {{ int \"x\" }} {{ toString 5 }} {{ toString .missing }}": "3 1 0 5 <nil>",
        '{{ trim .s | lower }}|{{ upper .s }}|{{ replace "i" "!" .s }}|{{ join "," .l }}': "mixed| MIXED | M!xed |x,y",
        '{{ contains "ix" .s }} {{ hasPrefix " M" .s }} {{ hasSuffix "x" .s }} {{ trimPrefix " " .s }}':
            "true true false Mixed ",
        '{{ toJson .a }} {{ list 1 "b" | toJson }} {{ b64enc "hi" }} {{ b64dec "aGk=" }}':
            '{"k":"v"} [1,"b"] aGk= hi',
        '{{ splitList "," "a,b" | len }} {{ println "a" 1 }}': "2 a 1\n",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text
    assert len(render("{{ uuidv4 }}", {})) == 36
    assert render("{{ now | Quote }}", {}).endswith('Z"')  # Sprig's now, as KWOK's branch stages quote it


def test_a_template_lists_the_functions_it_calls() -> None:
    text = '{{ $n := Now }}{{ range .x }}{{ if eq (index . 0) "y" }}{{ PodIPsWith .a | Quote }}{{ end }}{{ end }}'
    assert Template(text).functions == {"Now", "eq", "index", "PodIPsWith", "Quote"}


def test_trim_markers_and_comments() -> None:
    assert render("a  {{- 1 -}}  b{{/* note */}}", {}) == "a1b"


@pytest.mark.parametrize("text", ["{{ template \"x\" }}", "{{ define \"x\" }}{{ end }}", "{{ if 1 }}",
                                  "{{ end }}", "{{ Nope }}", "{{ .a.Method 1 }}"])
def test_unsupported_or_broken_templates_are_errors(text: str) -> None:
    with pytest.raises(TemplateError):
        Template(text).render({"a": {}}, FUNCS)


@pytest.mark.parametrize(("text", "error"), [
    ("{{ index .l 2 }}", "error calling index: index out of range: 2"),
    ("{{ index .l -1 }}", "error calling index: index out of range: -1"),
    ("{{ index .missing 0 }}", "error calling index: index of untyped nil"),
    ('{{ index .m "a" "b" }}', "error calling index: index of untyped nil"),  # the missing key's nothing
    ('{{ index .l "0" }}', "error calling index: cannot index slice/array with type string"),
    ("{{ index .m 0 }}", "error calling index: value has type int; should be string"),
    ("{{ index .b 0 0 }}", "error calling index: can't index item of type bool"),
])
def test_index_fails_the_template_as_gos_does(text: str, error: str) -> None:
    """Go's ``index`` fails the template for nothing, a list out of range or a key of the wrong
    type; only a missing map key gives nothing (``<no value>``)."""
    data = {"l": [1, 2], "m": {"k": "v"}, "b": [True]}
    with pytest.raises(TemplateError) as e:
        render(text, data)
    assert str(e.value) == error
    # a string's byte; the object's number a json.Number, so its text's (Go's too)
    assert render('{{ index .m "nope" }}|{{ index .l 1 }}|{{ index "ab" 1 }}|{{ index .l 1 0 }}', data) == \
        "<no value>|2|98|50"


def test_and_and_or_stop_at_the_argument_that_decides() -> None:
    """Go 1.18's ``and``/``or`` evaluate their arguments in turn: one after the deciding one is
    never evaluated, so an ``index`` that would fail there does not fail the template."""
    data = {"a": "set", "l": []}
    assert render("{{ or .a (index .l 0) }}", data) == "set"
    assert render("{{ and .missing (index .l 0) }}", data) == "<no value>"
    assert render('{{ .missing | or "" }}|{{ "x" | and 1 }}|{{ or 0 "" }}', data) == "<no value>|x|"
    with pytest.raises(TemplateError, match="index out of range"):
        render("{{ or .missing (index .l 0) }}", data)


def test_the_objects_numbers_are_json_numbers_as_kwok_renders_them() -> None:
    """KWOK encodes the object and decodes it with ``UseNumber``: its templates see each number
    as ``json.Number``, a string type holding Go's JSON text of it. It prints as that text, is
    true when 0, equals strings and numbers' texts but is not comparable with a number, and
    compares with another as strings do; numbers from the template itself or a function stay
    numbers."""
    data = {"spec": {"x": 1.0, "y": 1, "z": 0, "big": 1e20, "tiny": 1e-7, "half": 0.5, "ten": 10, "nine": 9,
                     "l": [0, 2.5], "m": {"k": 3}}}
    cases = {
        "{{ .spec.x }} {{ .spec.big }} {{ .spec.tiny }} {{ .spec.half }} {{ .spec.l }}":
            "1 100000000000000000000 1e-7 0.5 [0 2.5]",
        "{{ if .spec.z }}true{{ end }} {{ not .spec.z }} {{ len .spec.ten }} {{ with .spec.z }}{{ . }}{{ end }}":
            "true false 2 0",
        '{{ eq .spec.x .spec.y }} {{ eq .spec.y "1" }} {{ eq .spec.x "1" }} {{ ne .spec.y "2" }}':
            "true true true true",
        "{{ lt .spec.ten .spec.nine }} {{ lt 10 9 }}": "true false",  # as strings, as in Go
        '{{ printf "%d|%v|%s|%T|%q" .spec.y .spec.y .spec.y .spec.y .spec.y }}':
            '%!d(json.Number=1)|1|1|json.Number|"1"',
        "{{ range .spec.l }}[{{ if . }}{{ . }}{{ end }}]{{ end }} "
        "{{ range $k, $v := .spec.m }}{{ $k }}={{ $v }}{{ end }}":
            "[0][2.5] k=3",
        '{{ index .spec.l 1 }} {{ toJson .spec.y }} {{ toJson (dict "a" .spec.x) }} {{ add1 .spec.y }} '
        '{{ .spec.y | Quote }}':
            '2.5 1 {"a":1} 2 "1"',
        "{{ $n := .spec.y }}{{ $n }} {{ eq 1 1 }}": "1 true",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text
    for text in ("{{ eq .spec.y 1 }}", "{{ lt .spec.y 2 }}", "{{ eq 1 1.0 }}", "{{ range .spec.y }}{{ end }}",
                 "{{ index .spec.l .spec.y }}"):
        with pytest.raises(TemplateError, match=r"incompatible types|can't iterate|cannot index slice"):
            render(text, data)


def test_sprigs_number_casts_read_strings_as_spf13_cast_does() -> None:
    """Sprig's ``int`` and ``int64`` are spf13/cast's ``ToInt``/``ToInt64`` (v1.7.0, as KWOK's
    go.mod pins it): a string is ``strconv.ParseInt(s, 0, 0)`` after ``trimZeroDecimal`` (a
    fraction of zeros dropped), 0 if that fails; the object's ``json.Number`` alike. ``float64``
    is ``strconv.ParseFloat``; ``atoi`` is ``strconv.Atoi`` of a Go string (base 10 only)."""
    data = {"spec": {"whole": "2.0", "half": 1.5, "one": 1.0}}
    cases = {
        '{{ int "1.0" }} {{ int "1.00" }} {{ int64 "-3.0" }} {{ int "1.5" }} {{ int "1." }} {{ int ".0" }}':
            "1 1 -3 0 0 0",
        '{{ int "0x10" }} {{ int "010" }} {{ int "1_000" }} {{ int " 1" }} {{ int "1e3" }} {{ int "08" }}':
            "16 8 1000 0 0 0",
        "{{ int .spec.whole }} {{ int .spec.half }} {{ int .spec.one }} {{ int 2.9 }} {{ int true }} {{ int .x }}":
            "2 0 1 2 1 0",
        '{{ int "9223372036854775808" }} {{ add1 "41.0" }}': "0 42",
        '{{ atoi "42" }} {{ atoi "+7" }} {{ atoi "1.0" }} {{ atoi "0x10" }} {{ atoi " 1" }} {{ atoi "1_0" }}':
            "42 7 0 0 0 0",
        '{{ atoi "99999999999999999999" }}': "9223372036854775807",
        '{{ float64 "1e3" }} {{ float64 "1_000.5" }} {{ float64 " 1" }} {{ float64 "x" }} {{ float64 .spec.half }}':
            "1000 1000.5 0 0 1.5",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text
    with pytest.raises(TemplateError, match=r"wrong type for value; expected string; got json\.Number"):
        render("{{ atoi .spec.whole }}", {"spec": {"whole": 2}})


def test_floats_print_as_gos_fmt_and_the_objects_as_json_numbers() -> None:
    """Go's ``%v`` of a float64 (a template's own number, one a function made) is its shortest
    ``%g``: an exponent from 1e+06 up and below 1e-04 (``1e+06``, ``1.2345675e+06``); nil in a map
    is ``<nil>``. The object's numbers are ``json.Number``s all the way down in KWOK's template,
    so a map of the object printed whole shows their JSON text (``10000000000000000``, ``1e-7``),
    while a map a template made (``dict``, ``list``) holds Go's numbers."""
    data = {"spec": {"a": 1.5, "b": 1e21, "c": 1e16, "d": 1e-7, "n": None, "i": 3, "l": [1000000.0, 2]}}
    cases = {
        "{{ 1000000.0 }} {{ 1.5 }} {{ 1.0 }} {{ 0.00001 }} {{ 123456.7 }} {{ float64 1234567.5 }}":
            "1e+06 1.5 1 1e-05 123456.7 1.2345675e+06",
        '{{ dict "a" 1.5 "b" 1000000000000000000000.0 "c" 1000000.0 "n" .missing }}':
            "map[a:1.5 b:1e+21 c:1e+06 n:<nil>]",
        "{{ list 1.5 1234567.5 .spec.c }}": "[1.5 1.2345675e+06 10000000000000000]",
        "{{ .spec }}": "map[a:1.5 b:1e+21 c:10000000000000000 d:1e-7 i:3 l:[1000000 2] n:<nil>]",
        '{{ dict "s" .spec.l "t" (list 1000000.0) }}': "map[s:[1000000 2] t:[1e+06]]",
        '{{ printf "%v %v" 1000000.0 .spec.l }} {{ toString 1000000.0 }} {{ quote 0.5 }}':
            '1e+06 [1000000 2] 1e+06 "0.5"',
    }
    for text, want in cases.items():
        assert render(text, data) == want, text


def test_a_number_read_out_of_a_map_the_template_made_is_gos() -> None:
    """``(dict "a" 1).a`` is Go's int (Sprig's ``dict`` holds the values it was given), where a
    number of the object is a ``json.Number``: it compares with numbers, prints with ``%d``."""
    data = {"spec": {"n": 1}}
    cases = {
        '{{ eq (dict "a" 1).a 1 }} {{ eq (index (dict "a" 2) "a") 2 }} {{ printf "%d" (dict "a" 3).a }}': "true true 3",
        '{{ range (list 1 2.5) }}{{ printf "%T " . }}{{ end }}{{ range (dict "k" 1) }}{{ printf "%T" . }}{{ end }}':
            "int float64 int",
        '{{ printf "%T" (dict "s" .spec).s.n }} {{ printf "%T" (index (list .spec.n) 0) }}': "json.Number json.Number",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text


def test_to_json_and_quote_write_numbers_as_gos_json_marshal() -> None:
    """Sprig's ``toJson`` and KWOK's ``Quote`` are Go's ``json.Marshal``: a float as Go's encoder
    writes it (``1``, ``10000000000000000``, ``1e-7``; not Python's ``1.0``, ``1e+16``, ``1e-07``),
    a ``json.Number`` as its text, ``<``, ``>`` and ``&`` escaped (its HTML-safe default); what it
    cannot write (NaN) is nothing for ``toJson`` and ``fmt.Sprint``'s text for ``Quote``."""
    from controlplane.nodes.simulator import _quote

    data = {"spec": {"a": 1.0, "b": 1e-7, "c": 1e16, "d": 1e21, "s": "<x & y>"}}
    funcs = {**FUNCS, "Quote": _quote}
    cases = {
        "{{ toJson .spec }}": '{"a":1,"b":1e-7,"c":10000000000000000,"d":1e+21,"s":"\\u003cx \\u0026 y\\u003e"}',
        '{{ toJson 1000000.0 }} {{ toJson (dict "a" 0.000001 "b" (list 2.5 .spec.c)) }} [{{ toJson (float64 "nan") }}]':
            '1000000 {"a":0.000001,"b":[2.5,10000000000000000]} []',
        '{{ Quote 1.0 }} {{ Quote .spec.c }} {{ Quote (dict "k" 1e21) }} {{ Quote (float64 "nan") }} {{ Quote "a" }}':
            '"1" "10000000000000000" "{\\"k\\":1e+21}" "NaN" "a"',
    }
    for text, want in cases.items():
        assert Template(text).render(data, funcs) == want, text


def test_float64_reads_gos_hexadecimal_floats_and_refuses_what_parsefloat_refuses() -> None:
    """``float64`` is ``cast.ToFloat64``, so ``strconv.ParseFloat``: Go's float literals,
    hexadecimal ones with their binary exponent too (``0x1p-2`` is 0.25), ``_`` only between
    digits or after ``0x``; 0 for anything it refuses, a number past float64's range included
    (ParseFloat answers it with ±Inf and an error, which cast turns into 0)."""
    cases = {
        '{{ float64 "0x1p-2" }} {{ float64 "0x1.8p1" }} {{ float64 "-0X.8P1" }} {{ float64 "0x_1p0" }}':
            "0.25 3 -1 1",
        '{{ float64 "0x1" }} {{ float64 "0x1p" }} {{ float64 "0x1_p0" }} {{ float64 "0b1" }} {{ float64 "1__0" }}':
            "0 0 0 0 0",
        '{{ float64 "1e400" }} {{ float64 "-1e400" }} {{ float64 "0x1p2000" }} {{ float64 "1e-400" }}': "0 0 0 0",
        '{{ float64 "inf" }} {{ float64 "-Infinity" }} {{ float64 "1e1_0" }}': "+Inf -Inf 1e+10",
    }
    for text, want in cases.items():
        assert render(text, {}) == want, text
    assert render("{{ float64 .spec.x }}", {"spec": {"x": "0x1p4"}}) == "16"


def _yaml(text: str, data: Any = None) -> str:
    from controlplane.nodes.simulator import _yaml as kwok_yaml

    return Template(text).render(data or {}, {"YAML": kwok_yaml})


def test_yaml_writes_as_sigs_k8s_io_yaml_marshal() -> None:
    """KWOK's ``YAML`` is ``sigs.k8s.io/yaml.Marshal``: Go's ``json.Marshal``, read back and
    written by go-yaml v2. A float is the JSON number as go-yaml reads it (an int when it
    has no fraction and fits uint64, else ``FormatFloat(f, 'g', -1)``); a string that would
    read back as anything else is double-quoted; keys in go-yaml's natural order; the text
    ends in a line break."""
    assert _yaml('{{ YAML (dict "a" 1.0 "b" 1e16) }}') == "a: 1\nb: 10000000000000000\n"
    numbers = ('{{ YAML (dict "a" 1e20 "b" 0.0000001 "c" 1234567.5 "d" 0.1 "e" 1e19 "f" -0.0 "g" .spec.x'
               ' "h" .spec.y "i" 5) }}')
    assert _yaml(numbers, {"spec": {"x": 1.5, "y": 2.0}}) == (
        "a: 1e+20\nb: 1e-07\nc: 1.2345675e+06\nd: 0.1\ne: 10000000000000000000\nf: 0\ng: 1.5\nh: 2\ni: 5\n")
    strings = ['yes', 'no', 'y', 'on', 'True', '1', '1e3', '0o17', '0x1F', '1_000', '08', '.5', '+.inf', 'null',
               '~', '', '2026-01-01T00:00:00Z', '2026-1-2', '1:20', '<<', 'abc', '1e400', '- x', 'a: b', '=',
               'tab\there', 'ünï']
    want = ['"yes"', '"no"', '"y"', '"on"', '"True"', '"1"', '"1e3"', '"0o17"', '"0x1F"', '"1_000"', '"08"',
            '".5"', '"+.inf"', '"null"', '"~"', '""', '"2026-01-01T00:00:00Z"', '"2026-1-2"', '"1:20"', '<<',
            'abc', '1e400', "'- x'", "'a: b'", '=', '"tab\\there"', 'ünï']
    assert _yaml("{{ YAML .l }}", {"l": strings}) == "".join(f"- {w}\n" for w in want)
    assert _yaml('{{ YAML (dict "s" "two\\nlines" "n" nil "t" true "e" (dict) "l" (list)) }}') == (
        "e: {}\nl: []\n\"n\": null\ns: |-\n  two\n  lines\nt: true\n")
    keys = '{{ YAML (dict "a10" 1 "a2" 2 "a1" 3 "B" 4 "b" 5 "10" 6 "9" 7 "a01" 8) }}'
    assert _yaml(keys) == '"9": 7\n"10": 6\nB: 4\na1: 3\na01: 8\na2: 2\na10: 1\nb: 5\n'
    nested = {"spec": {"l": [{"x": 1, "m": [1, [2]]}], "m": {"z": {"k": "v"}, "a": 1}}}
    assert _yaml("{{ YAML .spec }}", nested) == (
        "l:\n- m:\n  - 1\n  - - 2\n  x: 1\nm:\n  a: 1\n  z:\n    k: v\n")
    assert _yaml("{{ YAML .x }}|{{ YAML 1.5 }}|{{ YAML \"s\" }}", {"x": None}) == "null\n|1.5\n|s\n"


def test_yaml_indent_is_kwoks_and_bad_input_fails_the_template() -> None:
    """``YAML . n`` puts a line break and ``2n`` spaces before every line and after the last, as
    KWOK's ``strings.ReplaceAll("\\n"+data, "\\n", "\\n"+pad)``; two indents are ignored; a
    NaN (json.Marshal's error) or an indent that is not an int fails the template."""
    data = {"status": {"allocatable": {"cpu": "1k", "pods": "1M"}}}
    assert _yaml("x:\n{{ YAML .status.allocatable 1 }}", data) == 'x:\n\n  cpu: 1k\n  pods: 1M\n  '
    assert _yaml("{{ YAML .status.allocatable 2 }}", data) == '\n    cpu: 1k\n    pods: 1M\n    '
    assert _yaml("{{ YAML .status.allocatable 0 }}", data) == _yaml("{{ YAML .status.allocatable 1 1 }}", data) \
        == "cpu: 1k\npods: 1M\n"
    with pytest.raises(TemplateError, match="unsupported value: NaN"):
        _yaml('{{ YAML (float64 "nan") }}')
    with pytest.raises(TemplateError, match="expected int; got string"):
        _yaml('{{ YAML . "1" }}', data)


def test_string_literals_are_unquoted_as_gos_strconv_unquote() -> None:
    """A template's ``"..."`` is a Go string literal: Go's escapes besides JSON's (``\\x41``,
    ``\\101``, ``\\a``, ``\\v``, ``\\U0001F600``), and one Go refuses (``\\/``, ``\\'``, ``\\777``, a
    surrogate) a ``TemplateError`` at parse time (it was a JSONDecodeError, which a Stage's
    loading did not catch)."""
    assert render(r'{{ "a\x41\101\u00e9\U0001F600\a\v\t\"\\" }}', {}) == 'aAAé😀\x07\x0b\t"\\'
    assert render(r'{{ "\xff" }}', {}) == "\ufffd"
    for bad in (r'{{ "\/" }}', r'{{ "\'" }}', r'{{ "\777" }}', r'{{ "\uD800" }}', r'{{ "\q" }}'):
        with pytest.raises(TemplateError, match="invalid syntax"):
            Template(bad)


def test_stage_with_a_go_escape_in_its_template_loads_or_fails_as_a_stage_error() -> None:
    from controlplane.nodes.stages import StageError, stage_from_object

    def stage(template: str) -> dict[str, Any]:
        return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
                "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "selector": {},
                         "next": {"statusTemplate": template}}}

    assert stage_from_object(stage(r'phase: {{ "Run\x6eing" }}')) is not None
    with pytest.raises(StageError, match="invalid syntax"):
        stage_from_object(stage(r'phase: {{ "\/" }}'))


def test_quote_and_printf_q_are_gos_strconv_quote() -> None:
    """Sprig's ``quote`` and ``printf "%q"`` are ``strconv.Quote``: a control character as
    ``\\x01`` (JSON wrote ``\\u0001``), DEL and a non-printable as ``\\x7f``, ``\\u200b`` (JSON left
    them raw), printable Unicode as it is; ``%+q`` escapes all but ASCII."""
    assert render(r'{{ quote "a\x01\x7f\u200bé\t" 1 }}', {}) == r'"a\x01\x7f\u200bé\t" "1"'
    assert render(r'{{ printf "%q" "a\x01\x7f\u200bé\"\\" }}', {}) == r'"a\x01\x7f\u200bé\"\\"'
    assert render(r'{{ printf "%+q" "é😀" }}', {}) == r'"\u00e9\U0001f600"'


def test_join_and_split_list_as_sprigs() -> None:
    """``join`` takes Sprig's ``strslice`` (nils left out, nothing is no item); ``splitList``
    is ``strings.Split`` (an empty separator splits every character, not an error)."""
    assert render('{{ join "," .n }}|{{ join "," (list 1 .n 2) }}|{{ join "-" "x" }}', {"n": None}) == "|1,2|x"
    assert render('{{ splitList "" "ab" }} {{ len (splitList "" "") }}', {}) == "[a b] 0"


def test_a_field_after_a_parenthesis_and_a_space_is_an_argument_of_its_own() -> None:
    """Go chains a field onto ``(...)`` only when it follows at once: ``(list 1).x`` is a field
    of the result, ``(list 1) .spec.l`` two arguments (it was read as the first)."""
    data = {"spec": {"l": [2, 3]}}
    assert render('{{ printf "%v %v" (list 1) .spec.l }}', data) == "[1] [2 3]"
    assert render('{{ (dict "a" 1).a }} {{ (index .spec.l 1) }}', data) == "1 3"


def test_more_of_sprigs_functions_as_sprig_v3_writes_them() -> None:
    """Sprig's string, list, dict, type, hash, JSON and regular expression functions that KWOK
    renders with (``sprig.TxtFuncMap``), with Sprig's semantics: byte offsets for ``trunc``
    and ``substr``, ``reflect.DeepEqual`` for ``has``/``uniq``/``without`` (``1`` is not
    ``"1"``), the object's numbers ``json.Number``s (``kindOf`` ``string``), ``fromJson``'s
    ``float64``s, ``toPrettyJson`` as ``json.MarshalIndent``."""
    data = {"spec": {"l": [1, 2.5, "a", 1], "m": {"b": 2, "a": 1.0}}}
    cases = {
        r'{{ indent 2 "a\nb" }}|{{ nindent 2 "a" }}|{{ repeat 3 "ab" }}': "  a\n  b|\n  a|ababab",
        '{{ trunc 3 "abcdef" }} {{ trunc -2 "abcdef" }} {{ trunc 9 "ab" }} {{ substr 1 3 "abcdef" }} '
        '{{ substr -1 2 "abc" }} {{ substr 1 -1 "abc" }}': "abc ef ab bc ab bc",
        r'{{ cat "a" 1 nil 2.5 }}|{{ nospace " a b\tc " }}|{{ trimAll "$" "$5.00$" }}|{{ (split "," "a,b")._1 }}':
            "a 1 2.5|abc|5.00|b",
        '{{ first .spec.l }} {{ last .spec.l }} {{ rest .spec.l }} {{ initial .spec.l }} {{ first (list) }} '
        '{{ append .spec.l 3 }} {{ prepend (list 1) 0 }} {{ concat (list 1) .spec.l }}':
            "1 1 [2.5 a 1] [1 2.5 a] <no value> [1 2.5 a 1 3] [0 1] [1 1 2.5 a 1]",
        '{{ reverse (list 1 2 3) }} {{ compact (list 0 1 "" "a" nil) }} {{ has 1 (list 1 2) }} '
        '{{ has "1" (list 1 2) }} {{ uniq .spec.l }} {{ without (list 1 2 3) 2 }} {{ sortAlpha (list "b" "a" 10) }}':
            "[3 2 1] [1 a] true false [1 2.5 a] [1 3] [10 a b]",
        '{{ keys .spec.m }} {{ values .spec.m }} {{ pick .spec.m "a" }} {{ omit .spec.m "a" }} '
        '{{ pluck "a" .spec.m (dict "a" 3) }} {{ dig "m" "a" "d" .spec }} {{ dig "m" "z" "d" .spec }}':
            "[a b] [1 2] map[a:1] map[b:2] [1 3] 1 d",
        '{{ kindOf .spec.m.a }} {{ kindOf 1 }} {{ kindOf 1.5 }} {{ kindOf nil }} {{ kindOf .spec.l }} '
        '{{ typeOf .spec.m.a }} {{ typeOf (list) }} {{ typeOf nil }} {{ kindIs "map" .spec.m }}':
            "string int float64 invalid slice json.Number []interface {} <nil> true",
        '{{ sha256sum "abc" | trunc 8 }} {{ sha1sum "abc" | trunc 8 }} {{ until 3 }} {{ until -2 }}':
            "ba7816bf a9993e36 [0 1 2] [0 -1]",
        r'{{ fromJson "{\"a\":1,\"b\":[1.5,true,null]}" }} {{ (fromJson "{\"a\":1}").a | typeOf }} {{ fromJson "x" }}':
            "map[a:1 b:[1.5 true <nil>]] float64 <no value>",
        '{{ toPrettyJson (dict "x" (list 1 (dict)) "<" "&") }}|{{ toPrettyJson (list) }}':
            '{\n  "\\u003c": "\\u0026",\n  "x": [\n    1,\n    {}\n  ]\n}|[]',
        r'{{ regexMatch "^[a-z]+\\d$" "abc1" }} {{ regexMatch "(?=a)" "a" }} {{ regexFind "[0-9]+" "ab12cd34" }} '
        r'{{ regexFindAll "[0-9]" "a1b2c3" 2 }} {{ regexReplaceAllLiteral "a(x*)b" "-ab-axxb-" "${1}W" }}':
            "true false 12 [1 2] -${1}W-${1}W-",
        r'{{ ceil 1.2 }} {{ floor "-1.5" }} {{ all 1 "a" }} {{ any 0 "" }} {{ trim "\x1c a \t" | printf "%q" }}':
            r'2 -2 true false "\x1c a"',
        '{{ set (dict "a" 1) "b" 2 }} {{ unset (dict "a" 1 "b" 2) "a" }} {{ toStrings (list 1 nil "a") }}':
            "map[a:1 b:2] map[b:2] [1 a]",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text
    for bad, message in (('{{ fail "boom" }}', "error calling fail: boom"),
                         ('{{ indent "2" "x" }}', "expected int; got string"),
                         ('{{ first "x" }}', "Cannot find first on type string"),
                         ('{{ substr 5 9 "abc" }}', "slice bounds out of range"),
                         ('{{ keys (list) }}', "expected map")):
        with pytest.raises(TemplateError, match=message):
            render(bad, data)


def test_number_constants_are_gos_literals() -> None:
    """A number in a template is a Go literal, typed as text/template's ``idealConstant``: an
    int in any base (``0x10`` was read as ``0`` and a call of ``x10``), a float64 when written
    as one (but ``0x1e`` is a hex int); one Go cannot read fails at parse time."""
    assert render("{{ 0x10 }} {{ 0o17 }} {{ 0b101 }} {{ 017 }} {{ 1_000 }} {{ .5 }} {{ +1 }} {{ -2 }}", {}) == \
        "16 15 5 15 1000 0.5 1 -2"
    assert render('{{ 1e3 }} {{ 0x1p4 }} {{ add 0x10 1 }} {{ printf "%T %T %T" 1e3 0x1e 2 }}', {}) == \
        "1000 16 17 float64 int int"
    for bad in ("{{ 08 }}", "{{ 1__0 }}", "{{ 0x }}", "{{ 1e999 }}", "{{ 9223372036854775808 }}"):
        with pytest.raises(TemplateError, match="illegal number syntax"):
            Template(bad)


def test_sprigs_list_path_encoding_and_raw_json_functions() -> None:
    """``tuple slice chunk untilStep splitn deepEqual toRawJson b32enc b32dec adler32sum
    regexQuoteMeta base dir ext clean isAbs``, as Sprig's (Go's ``path`` package for the paths:
    ``clean "//a/../b/"`` is ``/b``, ``base ""`` is ``.``)."""
    data = {"spec": {"l": [1, 2.5, "a"]}}
    cases = {
        '{{ tuple 1 "a" }} {{ slice (list 1 2 3) 1 }} {{ slice (list 1 2 3) 0 2 }} {{ slice .spec.l 1 }} '
        '{{ chunk 2 (list 1 2 3 4 5) }} {{ chunk 2 (list) }}': "[1 a] [2 3] [1 2] [2.5 a] [[1 2] [3 4] [5]] []",
        '{{ untilStep 0 10 3 }} {{ untilStep 5 0 -2 }} {{ untilStep 0 5 0 }} {{ splitn "," 2 "a,b,c" }} '
        '{{ splitn "" 2 "abc" }} {{ splitn "," 0 "a" }}': "[0 3 6 9] [5 3 1] [] map[_0:a _1:b,c] map[_0:a _1:bc] map[]",
        '{{ deepEqual (list 1 (dict "a" "b")) (list 1 (dict "a" "b")) }} {{ deepEqual 1 1.0 }} '
        '{{ toRawJson (dict "a" "<&>" "b" 1.0) }} {{ toJson (dict "a" "<&>") }}':
            'true false {"a":"<&>","b":1} {"a":"\\u003c\\u0026\\u003e"}',
        '{{ b32enc "hi" }} {{ b32dec "NBUQ====" }} {{ adler32sum "abc" }} {{ regexQuoteMeta "a.b*c-d" }}':
            "NBUQ==== hi 38600999 a\\.b\\*c-d",
        '{{ base "/a/b/" }} {{ base "" }} {{ base "/" }} {{ dir "/a/b/c" }} {{ dir "a" }} {{ ext "a/b.tar.gz" }} '
        '{{ clean "//a/../b/./c/" }} {{ clean "" }} {{ isAbs "/x" }}': "b . / /a/b . .gz /b/c . true",
    }
    for text, want in cases.items():
        assert render(text, data) == want, text
    with pytest.raises(TemplateError, match="slice index out of range"):
        render("{{ slice (list 1) 2 }}", data)
    with pytest.raises(TemplateError, match="len out of range"):
        render("{{ chunk 0 (list 1) }}", data)
