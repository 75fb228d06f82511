"""What fuzzing CustomResourceDefinitions and their custom resources found answered unlike
upstream, over a real socket (httpx to the project's HTTP/1.1 protocol)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.test_bad_input_http import CRDS, Served, assert_status, served, widget_crd

__all__ = ["served"]  # the fixture, imported for the tests below


async def test_cel_rules_see_only_the_declared_fields_of_an_object_that_preserves_unknown_ones(
        served: Served) -> None:
    """Upstream's CEL type of an object with x-kubernetes-preserve-unknown-fields (or an
    embedded resource) is the object of its declared fields (apiserver/pkg/cel/common
    SchemaDeclType): a rule naming another field, or using the object as a number or a map,
    does not compile and the CRD is refused. They were accepted here, then failed at run time
    ("no such overload") on every write of a resource, its own PUT included."""
    def preserving(rule: str, **more: Any) -> dict[str, Any]:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"a": {"type": "integer"}}, "x-kubernetes-validations": [{"rule": rule}], **more}

    refused = [
        (preserving("self.b == 1"), "undefined field 'b'"),
        (preserving("has(self.b)"), "undefined field 'b'"),
        (preserving("self >= oldSelf"), "found no matching overload for '_>=_'"),
        (preserving("self.size() > 0"), "found no matching overload for 'size'"),
        (preserving("self.spec.x == 1", **{"x-kubernetes-embedded-resource": True}), "undefined field 'spec'"),
    ]
    for field, error in refused:
        resp = await served.http.post(CRDS, json=widget_crd(field))
        status = assert_status(resp, 422, "Invalid")
        assert error in status["message"], (field, status)
    # its declared fields, and an embedded resource's kind, apiVersion and metadata.name, are typed
    accepted = preserving("self.a >= 0 && self == oldSelf", **{"x-kubernetes-embedded-resource": True})
    accepted["x-kubernetes-validations"].append({"rule": "self.kind != '' && self.metadata.name != ''"})
    resp = await served.http.post(CRDS, json=widget_crd(accepted))
    assert resp.status_code == 201, resp.text


async def test_an_optional_old_self_rule_that_reads_old_self_as_a_value_is_refused(served: Served) -> None:
    """A rule with optionalOldSelf sees oldSelf as an optional (upstream's compileRule declares
    it optional_type of self's type), so `self == oldSelf` does not compile upstream. It was
    accepted here and then failed every update of every resource, their unchanged PUT included."""
    def field(rule: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"name": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": rule, "optionalOldSelf": True}]}

    for rule, error in [("self == oldSelf", "'_==_' applied to '(selfType"),
                        ("!has(oldSelf.name) || self.name == oldSelf.name",
                         "'_==_' applied to '(string, optional_type(string))'"),
                        # an optional is no operand of an ordering, a size or a string function either
                        ("self.name > oldSelf.name", "'_>_' applied to '(string, optional_type(string))'"),
                        ("size(oldSelf.name) > 0", "'size' applied to '(optional_type(string))'"),
                        ("oldSelf.name.startsWith('a')", "'startsWith' applied to 'optional_type(string).(string)'")]:
        status = assert_status(await served.http.post(CRDS, json=widget_crd(field(rule))), 422, "Invalid")
        assert "found no matching overload for " + error in status["message"], status
    resp = await served.http.post(CRDS, json=widget_crd(field("!oldSelf.hasValue() || oldSelf.value() == self")))
    assert resp.status_code == 201, resp.text


async def test_a_pattern_matches_refuses_at_run_time_is_reported_in_gos_words(served: Served) -> None:
    """A rule matching against a pattern taken from the object (`self.s.matches(self.p)`) whose
    pattern does not compile fails as cel-go's matches does: Go's regexp error
    (`error parsing regexp: missing closing ]: `[``), not the interpreter's multi-line message."""
    field = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 10},
                                               "p": {"type": "string", "maxLength": 10}},
             "x-kubernetes-validations": [{"rule": "self.s.matches(self.p)"}]}
    assert (await served.http.post(CRDS, json=widget_crd(field))).status_code == 201
    widgets = "/apis/fz.io/v1/namespaces/default/widgets"
    for pattern, error in [("[", "missing closing ]: `[`"), ("(a", "missing closing ): `(a`")]:
        body = {"apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"x": {"s": "a", "p": pattern}}}
        for _ in range(50):  # until the new resource is served
            resp = await served.http.post(widgets, json=body)
            if resp.status_code != 404:
                break
            await asyncio.sleep(0.1)
        status = assert_status(resp, 422, "Invalid")
        assert status["details"]["causes"] == [{
            "reason": "FieldValueInvalid", "field": "spec.x",
            "message": f'Invalid value: "object": error parsing regexp: {error} evaluating rule: '
                       "self.s.matches(self.p)"}], status


async def test_a_rules_constant_pattern_go_refuses_refuses_the_crd(served: Served) -> None:
    """cel-go compiles a constant pattern of matches(), find() and findAll() as the program is
    made (the regex optimization Kubernetes' environments enable), so upstream refuses such a
    rule with "program instantiation failed: error parsing regexp: ...". It was accepted here,
    then failed (or, for a pattern only Go refuses, `a**`, matched) on every write."""
    for rule, error in [("self.matches('[')", "missing closing ]: `[`"),
                        ("self.matches('a**')", "invalid nested repetition operator: `**`"),
                        ("self.find('(?=a)') == ''", "invalid or unsupported Perl syntax: `(?=`")]:
        field = {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": rule}]}
        status = assert_status(await served.http.post(CRDS, json=widget_crd(field)), 422, "Invalid")
        assert status["message"].endswith(f"program instantiation failed: error parsing regexp: {error}"), status
    field = {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": r"self.matches('^\\pL+$')"}]}
    resp = await served.http.post(CRDS, json=widget_crd(field))
    assert resp.status_code == 201, resp.text
