"""The audit policy (api/audit.py): upstream's rule matching (policy/checker.go) and the
policy file's validation (reader.go, validation.go), in upstream's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.api.audit import Policy, PolicyError, load_policy, parse_policy, source_ips
from controlplane.api.auditlog import event_string
from controlplane.api.rbac import Request, User

ALICE = User("alice", ("devs", "system:authenticated"))
BOB = User("bob", ("ops", "system:authenticated"))


def policy(rules: str, head: str = "") -> Policy:
    return parse_policy(f"apiVersion: audit.k8s.io/v1\nkind: Policy\n{head}rules:\n{rules}")


def level(p: Policy, user: User | None, attrs: Request) -> str:
    return p.evaluate(user, attrs).level


def pods(verb: str = "get", subresource: str = "", namespace: str = "default", name: str = "p",
         group: str = "") -> Request:
    return Request(verb, group, "pods", subresource, namespace, name)


def test_the_first_matching_rule_decides_and_no_match_is_none() -> None:
    p = policy("- level: RequestResponse\n  users: [alice]\n- level: Metadata\n  userGroups: [ops]\n")
    assert level(p, ALICE, pods()) == "RequestResponse"  # (alice's rule first, though none of the others match)
    assert level(p, BOB, pods()) == "Metadata"
    assert level(p, User("carol", ("qa",)), pods()) == "None"
    assert level(p, None, pods()) == "None"  # a request without a user matches no users/groups rule


def test_verbs_namespaces_and_groups() -> None:
    p = policy("- level: Request\n  verbs: [create, patch]\n  namespaces: [team]\n"
               "  resources: [{group: apps, resources: [deployments]}]\n- level: Metadata\n")
    assert level(p, ALICE, Request("create", "apps", "deployments", "", "team", "d")) == "Request"
    assert level(p, ALICE, Request("get", "apps", "deployments", "", "team", "d")) == "Metadata"
    assert level(p, ALICE, Request("create", "apps", "deployments", "", "other", "d")) == "Metadata"
    assert level(p, ALICE, Request("create", "", "deployments", "", "team", "d")) == "Metadata"  # other group
    # a namespaces rule is a resource rule: a non-resource request never matches it
    assert level(p, ALICE, Request("create", path="/apis")) == "Metadata"


@pytest.mark.parametrize(("spec", "subresource", "matches"), [
    ("pods", "", True), ("pods", "status", False),
    ("pods/status", "status", True), ("pods/status", "", False), ("pods/status", "log", False),
    ("*", "", True), ("*", "status", True),
    ("*/status", "status", True), ("*/status", "", False), ("*/status", "log", False),
    ("pods/*", "", True), ("pods/*", "log", True),
])
def test_resources_with_subresources_and_wildcards(spec: str, subresource: str, matches: bool) -> None:
    p = policy(f"- level: Request\n  resources: [{{group: '', resources: ['{spec}']}}]\n")
    assert (level(p, ALICE, pods(subresource=subresource)) == "Request") is matches


def test_a_group_without_resources_is_all_of_it_and_resource_names_narrow() -> None:
    p = policy("- level: Request\n  resources: [{group: ''}]\n")
    assert level(p, ALICE, pods()) == "Request"
    assert level(p, ALICE, pods(group="apps")) == "None"
    p = policy("- level: Request\n  resources: [{group: '', resources: [configmaps], resourceNames: [cfg]}]\n")
    assert level(p, ALICE, Request("get", "", "configmaps", "", "default", "cfg")) == "Request"
    assert level(p, ALICE, Request("get", "", "configmaps", "", "default", "other")) == "None"
    assert level(p, ALICE, Request("list", "", "configmaps", "", "default", "")) == "None"


def test_non_resource_urls_exact_prefix_and_star() -> None:
    p = policy("- level: None\n  nonResourceURLs: [/healthz*, /version]\n- level: Metadata\n  nonResourceURLs: ['*']\n"
               "- level: Request\n")
    for path in ("/healthz", "/healthz/etcd", "/version"):
        assert level(p, ALICE, Request("get", path=path)) == "None"
    assert level(p, ALICE, Request("get", path="/version/x")) == "Metadata"
    assert level(p, ALICE, Request("get", path="/apis")) == "Metadata"
    assert level(p, ALICE, pods()) == "Request"  # a nonResourceURLs rule never matches a resource request


def test_omit_stages_union_and_managed_fields_the_rule_overrides() -> None:
    p = policy("- level: Metadata\n  users: [alice]\n  omitStages: [ResponseStarted]\n  omitManagedFields: false\n"
               "- level: Request\n", head="omitStages: [RequestReceived]\nomitManagedFields: true\n")
    d = p.evaluate(ALICE, pods())
    assert d.omit_stages == {"RequestReceived", "ResponseStarted"} and d.omit_managed_fields is False
    d = p.evaluate(BOB, pods())
    assert d.omit_stages == {"RequestReceived"} and d.omit_managed_fields is True
    d = policy("- level: None\n  users: [nobody]\n", head="omitStages: [Panic]\n").evaluate(ALICE, pods())
    assert d.level == "None" and d.omit_stages == {"Panic"}


@pytest.mark.parametrize(("text", "message"), [
    ("rules: [{level: Metadata}]", "failed decoding: Object 'Kind' is missing in the policy"),
    ("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: Metadata}]",
     "unknown group version field 'audit.k8s.io/v1beta1' in policy (only audit.k8s.io/v1 is served)"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []", "loaded illegal policy with 0 rules"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{users: [a]}]", "rules[0].level: Required value"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]",
     'rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", '
     '"RequestResponse"'),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [healthz]}]",
     "rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' "
     "character"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: ['/a*/b']}]",
     "rules[0].nonResourceURLs[0]: Invalid value: \"/a*/b\": non-resource URL wildcards '*' must be the final "
     "character of the rule"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/a], namespaces: [x]}]",
     'rules[0].nonResourceURLs: Invalid value: []string{"/a"}: rules cannot apply to both regular resources '
     "and non-resource URLs"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{group: '', resourceNames: "
     "[x]}]}]",
     'rules[0].resources.resourceNames: Invalid value: []string{"x"}: using resourceNames requires at least '
     "one resource"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{group: Apps/v1}]}]",
     'rules[0].resources.group: Invalid value: "Apps/v1": a lowercase RFC 1123 subdomain'),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Later]\nrules: [{level: None}]",
     'omitStages[0]: Invalid value: "Later": allowed stages are RequestReceived,ResponseStarted,'
     "ResponseComplete,Panic"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, users: alice}]",
     "failed decoding: rules[0].users: expected a list, not a string"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, omitManagedFields: yes please}]",
     "failed decoding: rules[0].omitManagedFields: expected a boolean, not a string"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None}\n", "failed decoding: "),
])
def test_bad_policies_are_refused_in_upstreams_words(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy(text)
    assert str(e.value).startswith(message), str(e.value)


def test_several_errors_are_listed_and_a_file_is_named(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: x}, {level: None, omitStages: [y]}]\n")
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    assert str(e.value) == (
        '[rules[0].level: Unsupported value: "x": supported values: "None", "Metadata", "Request", '
        '"RequestResponse", rules[1].omitStages[0]: Invalid value: "y": allowed stages are RequestReceived,'
        f"ResponseStarted,ResponseComplete,Panic]: from file {f}")
    with pytest.raises(PolicyError, match=r"^failed to read file path '.*missing.yaml': "):
        load_policy(tmp_path / "missing.yaml")


def test_unknown_fields_are_ignored_as_upstream_but_logged(caplog: pytest.LogCaptureFixture) -> None:
    p = policy("- level: Metadata\n  userGroup: [devs]\n")
    assert level(p, BOB, pods()) == "Metadata"  # the typo widens the rule, as upstream's decoder lets it
    assert "unknown field rules[0].userGroup ignored" in caplog.text


def test_source_ips_are_upstreams() -> None:
    def scope(*headers: tuple[bytes, bytes], peer: str = "10.0.0.9") -> dict[str, object]:
        return {"headers": list(headers), "client": (peer, 5000)}

    assert source_ips(scope()) == ["10.0.0.9"]
    assert source_ips(scope((b"x-forwarded-for", b"1.2.3.4, junk, 5.6.7.8"))) == ["1.2.3.4", "5.6.7.8", "10.0.0.9"]
    assert source_ips(scope((b"x-forwarded-for", b"1.2.3.4"), (b"x-real-ip", b"1.2.3.4"))) == \
        ["1.2.3.4", "10.0.0.9"]
    assert source_ips(scope((b"x-real-ip", b"10.0.0.9"))) == ["10.0.0.9"]  # the peer is not repeated
    assert source_ips(scope((b"x-forwarded-for", b"::1"), peer="::1")) == ["::1"]


def test_the_legacy_line_is_upstreams_event_string() -> None:
    event = {"auditID": "id-1", "stage": "ResponseComplete", "verb": "create", "requestURI": "/api/v1/pods",
             "user": {"username": "alice", "groups": ["devs", "system:authenticated"]},
             "impersonatedUser": {"username": "bob"}, "sourceIPs": ["10.0.0.1"], "userAgent": "kubectl",
             "objectRef": {"resource": "pods", "namespace": "ns"}, "responseStatus": {"code": 201},
             "requestReceivedTimestamp": "2026-12-05T17:12:23.120000Z"}
    assert event_string(event) == (
        '2026-12-05T17:12:23.12Z AUDIT: id="id-1" stage="ResponseComplete" ip="10.0.0.1" method="create" '
        'user="alice" groups="\\"devs\\",\\"system:authenticated\\"" as="bob" asgroups="<lookup>" '
        'user-agent="kubectl" namespace="ns" uri="/api/v1/pods" response="201"')
    bare = {"auditID": "id-2", "stage": "RequestReceived", "requestReceivedTimestamp": "2026-12-05T17:12:23.000000Z"}
    assert event_string(bare) == (
        '2026-12-05T17:12:23Z AUDIT: id="id-2" stage="RequestReceived" ip="<unknown>" method="" user="<none>" '
        'groups="<none>" as="<self>" asgroups="<lookup>" user-agent="" namespace="<none>" uri="" '
        'response="<deferred>"')
