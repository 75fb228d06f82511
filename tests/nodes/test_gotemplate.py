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
    assert render('{{ if eq .n 1 }}one{{ else if eq .n 2 }}two{{ else }}many{{ end }}', data) == "two"
    assert render("{{ (index .spec.containers 1).name }}", data) == "b"
    assert render('{{ if and .n (not .empty) }}ok{{ end }}', data) == "ok"


def test_sprig_dict_as_kwok_chaos_stages_use_it() -> None:
    tpl = '{{ $a := or .metadata.annotations dict }}{{ or (index $a "k") "default" }}'
    assert render(tpl, {"metadata": {}}) == "default"
    assert render(tpl, {"metadata": {"annotations": {"k": "set"}}}) == "set"
    assert render('{{ index (dict "x" 1 "y") "y" | Quote }}', {}) == '""'


def test_trim_markers_and_comments() -> None:
    assert render("a  {{- 1 -}}  b{{/* note */}}", {}) == "a1b"


@pytest.mark.parametrize("text", ["{{ template \"x\" }}", "{{ define \"x\" }}{{ end }}", "{{ if 1 }}",
                                  "{{ end }}", "{{ Nope }}", "{{ .a.Method 1 }}"])
def test_unsupported_or_broken_templates_are_errors(text: str) -> None:
    with pytest.raises(TemplateError):
        Template(text).render({"a": {}}, FUNCS)
