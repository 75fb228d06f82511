"""registry/attrs.py ``Filter``: selectors matched on the cache's attrs agree with the
selectors matched on the object, the equality-only fast path included."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.registry.attrs import Filter, attrs_of
from controlplane.registry.selectors import parse_label_selector

KEYS = ["app", "tier", "loadtest/controller", "gen"]
VALUES = ["web", "db", "rs-1", "2", "3"]
SELECTORS = ["app=web", "app==web", "app in (web)", "app=web,tier=db", "loadtest/controller=rs-1,app=web",
             "app in (web,db)", "app!=web", "!app", "app", "gen>2", "app=web,!tier", "app=web,tier notin (db)"]


def pod(labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": labels},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


@settings(max_examples=300, deadline=None)
@given(labels=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4),
       selector=st.sampled_from(SELECTORS))
def test_the_filter_on_attrs_agrees_with_the_selector_on_the_labels(labels: dict[str, str], selector: str) -> None:
    f = Filter.parse("pods", selector, None)
    assert f.matches(attrs_of("pods", pod(labels))) == parse_label_selector(selector).matches(labels)


def test_only_selectors_of_equalities_take_the_fast_path() -> None:
    assert Filter.parse("pods", "app=web,tier in (db)", None).label_pairs == (("app", "web"), ("tier", "db"))
    for selector in ("app in (web,db)", "app=web,!tier", "app!=web", "app", ""):
        assert Filter.parse("pods", selector or None, None).label_pairs is None


def test_field_terms_still_apply_with_the_fast_path() -> None:
    f = Filter.parse("pods", "app=web", "spec.nodeName=n2")
    assert not f.matches(attrs_of("pods", pod({"app": "web"})))
    assert Filter.parse("pods", "app=web", "spec.nodeName=n1").matches(attrs_of("pods", pod({"app": "web"})))
