"""Label and field selectors: kube-apiserver's syntax and per-type fields."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.registry.selectors import (
    SelectorError,
    custom_fields_key,
    parse_field_selector,
    parse_label_selector,
)


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "web"}, True),
    ("app=web", {"app": "db"}, False),
    ("app!=web", {}, True),
    ("app!=web", {"app": "web"}, False),
    ("tier in (front, back)", {"tier": "back"}, True),
    ("tier in (front,back)", {"tier": "db"}, False),
    ("tier notin (front)", {}, True),
    ("tier notin (front)", {"tier": "front"}, False),
    ("canary", {"canary": ""}, True),
    ("!canary", {"canary": "yes"}, False),
    ("app=web,tier in (a,b),!canary", {"app": "web", "tier": "a"}, True),
    ("example.com/role=x", {"example.com/role": "x"}, True),
    ("", {"anything": "goes"}, True),
    ("gen>2", {"gen": "3"}, True),
    ("gen>2", {"gen": "2"}, False),
    ("gen<2", {"gen": "-1"}, True),
    ("gen<2", {}, False),
    ("gen>2", {"gen": "three"}, False),
    # upstream's grammar: "()" and empty items are the empty value, "in" a value where one is expected
    ("a in ()", {"a": ""}, True),
    ("a in (b,)", {"a": ""}, True),
    ("a notin (,)", {"a": ""}, False),
    ("in in (in)", {"in": "in"}, True),
    ("a = b , !c", {"a": "b"}, True),
    ("a==", {"a": ""}, True),
    ("gen>99999999999999999", {"gen": "99999999999999999999"}, False),  # no int64 on the label's side
])
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["app=", "=web", "tier in (a", "a b", "app=we b", ",app=web", "x=" + "v" * 64,
                                 "gen>two"])
def test_bad_label_selectors_are_refused(bad: str) -> None:
    if bad == "app=":  # an empty value is legal: app has the empty value
        assert parse_label_selector(bad).matches({"app": ""})
        return
    with pytest.raises(SelectorError):
        parse_label_selector(bad)


def test_field_selectors_know_each_types_fields() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert parse_field_selector("spec.nodeName=n1", "pods").matches(pod)
    assert not parse_field_selector("spec.nodeName=n2", "pods").matches(pod)
    assert parse_field_selector("status.phase!=Failed,metadata.namespace=ns", "pods").matches(pod)
    assert parse_field_selector("spec.nodeName=", "pods").matches({"spec": {}})  # unscheduled pods
    assert parse_field_selector("metadata.name=p", "configmaps").matches(pod)
    # a kind with no field label conversion of its own refuses in the scheme's default words
    with pytest.raises(SelectorError, match=r'^"spec\.nodeName" is not a known field selector: only "metadata\.name", '
                                            r'"metadata\.namespace"$'):
        parse_field_selector("spec.nodeName=n1", "configmaps")
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.bogus$"):
        parse_field_selector("spec.bogus=n1", "pods")
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.nodeName$"):
        parse_field_selector("spec.nodeName=n1", "widgets", custom=True)
    assert parse_field_selector("spec.host=n1", "pods").matches(pod)  # an old client's spec.nodeName
    assert not parse_field_selector("spec.host=n2", "pods").matches(pod)
    with pytest.raises(SelectorError, match=r"^invalid selector: 'spec.nodeName,'; can't understand 'spec.nodeName'$"):
        parse_field_selector("spec.nodeName,", "pods")  # upstream's parseSelector's words


def test_empty_field_selector_terms_are_skipped_as_upstream() -> None:
    """Upstream's parseSelector passes over empty terms: kr8s gets an object by name with
    ``metadata.name=x,`` (its selector dict joined with a comma after each term)."""
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    assert parse_field_selector("metadata.name=p,", "pods").matches(pod)
    assert not parse_field_selector(",metadata.name=q,,", "pods").matches(pod)
    assert parse_field_selector(",", "pods").empty


def test_field_selector_spaces_are_kept_as_upstream() -> None:
    """Upstream's parseSelector trims nothing: the field ``"metadata.name "`` is refused by the
    field label conversion, a value `` p`` is that string, and a selector of a space is a term
    without an operator."""
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    with pytest.raises(SelectorError, match=r'^"metadata\.name " is not a known field selector'):
        parse_field_selector("metadata.name = p", "configmaps")
    with pytest.raises(SelectorError, match=r"^field label not supported:  status\.phase$"):
        parse_field_selector("metadata.name=p, status.phase=Running", "pods")
    assert not parse_field_selector("metadata.name= p", "pods").matches(pod)
    assert parse_field_selector("metadata.name!= p", "pods").matches(pod)
    with pytest.raises(SelectorError, match=r"^invalid selector: ' '; can't understand ' '$"):
        parse_field_selector(" ", "pods")


def test_field_getters_format_values_as_upstream() -> None:
    from controlplane.registry.selectors import _path

    def reference(keys: tuple[str, ...], zero: str) -> Any:  # the loop every getter once was
        def get(obj: Any) -> str:
            cur = obj
            for k in keys:
                if not isinstance(cur, dict):
                    return zero
                cur = cur.get(k)
            if cur is None:
                return zero
            if isinstance(cur, bool):
                return "true" if cur else "false"
            return str(cur)
        return get

    class Text(str):
        pass

    values: list[Any] = [None, True, False, 0, 3, 1.5, "s", "", Text("t"), [], {}, {"b": 1}, {"b": None},
                         {"b": True}, {"b": "x"}, {"b": Text("y")}, {"b": [1]}, {"b": {"c": 2}}]
    for keys in (("a",), ("a", "b"), ("a", "b", "c")):
        for zero in ("", "false", "0"):
            get, want = _path(*keys, zero=zero), reference(keys, zero)
            for v in values:
                for obj in ({"a": v}, {}, {"x": v}):
                    assert get(obj) == want(obj)
                    assert type(get(obj)) is type(want(obj))


_SELECTOR_ALPHABET = "ab1-_./=!(),<> \tin"



def test_a_custom_resources_fields_are_its_crds_selectable_fields() -> None:
    """Upstream's customResourceStrategy: ``fmt.Sprint`` of the value (``""`` when absent); a
    CRD's plural that is a built-in one's gets none of the built-in's fields; a cluster-scoped
    kind has no ``metadata.namespace``; ``only`` keeps the version's own."""
    key = custom_fields_key("jobs.batch.example.com", True, ("spec.size", "spec.count", "spec.on"))
    obj = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"count": 3, "on": False}}
    for text, expected in (("spec.count=3", True), ("spec.on=false", True), ("spec.size=", True),
                           ("spec.size!=", False), ("metadata.namespace=ns,spec.count!=4", True)):
        assert parse_field_selector(text, key, custom=True).matches(obj) is expected, text
    with pytest.raises(SelectorError, match=r"^field label not supported: status\.successful$"):
        parse_field_selector("status.successful=1", key, custom=True)
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.count$"):
        parse_field_selector("spec.count=3", key, custom=True, only=("spec.size",))
    cluster = custom_fields_key("racks.example.com", False, ())
    with pytest.raises(SelectorError, match=r"^field label not supported: metadata\.namespace$"):
        parse_field_selector("metadata.namespace=ns", cluster, custom=True)

@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(alphabet=_SELECTOR_ALPHABET, max_size=24))
def test_any_label_selector_text_parses_or_is_refused_in_words(text: str) -> None:
    # the grammar's every path: a selector, or a SelectorError in one of labels.Parse's forms
    refusal = ""
    try:
        selector = parse_label_selector(text)
    except SelectorError as e:
        refusal = str(e)
    if refusal:
        assert refusal.startswith(("found '", "unable to parse requirement: ")), refusal
        return
    selector.matches({"a": "1", "b": ""})
    for req in selector.requirements:  # what was accepted is a valid key and values
        assert req.key and req.op in ("=", "!=", "in", "notin", "exists", "!exists", "gt", "lt")


@pytest.mark.parametrize(("text", "value"), [
    ("metadata.name=a\\,b", "a,b"), ("metadata.name=a\\=b", "a=b"), ("metadata.name=a\\\\b", "a\\b"),
    ("metadata.name==a\\,b,metadata.namespace=x", "a,b"),
])
def test_a_field_selectors_value_is_unescaped_as_upstreams(text: str, value: str) -> None:
    selector = parse_field_selector(text, "configmaps")
    assert selector.matches({"metadata": {"name": value, "namespace": "x"}})
    assert not selector.matches({"metadata": {"name": value + "y", "namespace": "x"}})


@pytest.mark.parametrize(("text", "message"), [
    ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
    ("metadata.name=a!=b", "invalid field selector: unescaped character in value: 61"),
    ("metadata.name=a\\b", "invalid field selector: invalid escape sequence: \\b"),
    ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
])
def test_a_field_selectors_bad_escape_or_bare_operator_is_refused(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as e:
        parse_field_selector(text, "configmaps")
    assert str(e.value) == message
