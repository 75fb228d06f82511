"""ValidatingAdmissionPolicy and its binding at their write, over a real socket: upstream's v1
defaults visible on a GET, each 422 with upstream's field path and message
(``pkg/apis/admissionregistration/validation/validation.go``), the examples of kubernetes.io's
ValidatingAdmissionPolicy page accepted; a policy stored before the defaults is enforced as
before (no ``failurePolicy`` read as Fail)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.front_socket import front_on_socket

POLICIES = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
BINDINGS = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
DEPLOYMENT_RULE = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": ["deployments"]}


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as h:
        yield h


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [DEPLOYMENT_RULE]},
                     "validations": [{"expression": "object.spec.replicas <= 5"}], **spec}}


def binding(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": "p", "validationActions": ["Deny"], **spec}}


async def refused(http: httpx.AsyncClient, path: str, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    r = await http.post(path, json=obj)
    status = r.json()
    assert (r.status_code, status["kind"], status["reason"]) == (422, "Status", "Invalid"), status
    assert (status["details"]["group"], status["details"]["kind"]) == ("admissionregistration.k8s.io", obj["kind"])
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


async def test_defaults_are_visible_on_a_get(http: httpx.AsyncClient) -> None:
    r = await http.post(POLICIES, json=policy("defaulted"))
    assert r.status_code == 201, r.text
    spec = (await http.get(f"{POLICIES}/defaulted")).json()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"] == {
        "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
        "resourceRules": [{**DEPLOYMENT_RULE, "scope": "*"}]}
    r = await http.post(BINDINGS, json=binding("defaulted", matchResources={
        "resourceRules": [{**DEPLOYMENT_RULE, "scope": "Namespaced"}],
        "excludeResourceRules": [{**DEPLOYMENT_RULE, "operations": ["UPDATE"]}]}))
    assert r.status_code == 201, r.text
    spec = (await http.get(f"{BINDINGS}/defaulted")).json()["spec"]
    assert spec["matchResources"] == {
        "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
        "resourceRules": [{**DEPLOYMENT_RULE, "scope": "Namespaced"}],
        "excludeResourceRules": [{**DEPLOYMENT_RULE, "operations": ["UPDATE"], "scope": "*"}]}
    assert "paramRef" not in spec  # nothing is made up where the binding has none
    r = await http.post(BINDINGS, json=binding("plain"))
    assert "matchResources" not in r.json()["spec"]


async def test_a_policys_structure_is_validated_as_upstreams(http: httpx.AsyncClient) -> None:
    assert await refused(http, POLICIES, {**policy("empty"), "spec": {}}) == [
        ("FieldValueRequired", "spec.matchConstraints", "Required value"),
        ("FieldValueRequired", "spec.validations",
         "Required value: validations or auditAnnotations must contain at least one item"),
        ("FieldValueRequired", "spec.auditAnnotations",
         "Required value: validations or auditAnnotations must contain at least one item")]
    bad = policy("bad", failurePolicy="Sometimes",
                 paramKind={"apiVersion": "Rules.example.com/v1", "kind": "Replica_Limit"},
                 matchConstraints={"matchPolicy": "Loose", "objectSelector": {"matchLabels": {"bad key!": "x"}},
                                   "resourceRules": [{"apiGroups": ["*", "apps"], "apiVersions": ["v1"],
                                                      "operations": ["*", "CREATE", "PATCH"],
                                                      "resources": ["*", "deployments"], "scope": "Anywhere"}]},
                 matchConditions=[{"name": "a", "expression": "true"}, {"name": "a", "expression": "true"}],
                 variables=[{"name": "in", "expression": "1"}],
                 validations=[{"expression": " ", "message": "two\nlines", "reason": "Conflict"}],
                 auditAnnotations=[{"key": "k/x", "valueExpression": "'v'"}])
    got = await refused(http, POLICIES, bad)
    assert got == [
        ("FieldValueNotSupported", "spec.failurePolicy",
         'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'),
        ("FieldValueInvalid", "spec.paramKind.apiVersion",
         'Invalid value: "Rules.example.com": a lowercase RFC 1123 subdomain must consist of lower case '
         "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
         "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
         "[a-z0-9])?)*')"),
        ("FieldValueInvalid", "spec.paramKind.kind",
         'Invalid value: "Replica_Limit": may have mixed case, but should otherwise match: a DNS-1035 label '
         "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and "
         "end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
         "'[a-z]([-a-z0-9]*[a-z0-9])?')"),
        ("FieldValueNotSupported", "spec.matchConstraints.matchPolicy",
         'Unsupported value: "Loose": supported values: "Equivalent", "Exact"'),
        ("FieldValueInvalid", "spec.matchConstraints.objectSelector.matchLabels",
         'Invalid value: "bad key!": name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', '
         "and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
         "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("FieldValueInvalid", "spec.matchConstraints.resourceRules[0].operations",
         'Invalid value: []admissionregistration.OperationType{"*", "CREATE", "PATCH"}: if \'*\' is present, '
         "must not specify other operations"),
        ("FieldValueNotSupported", "spec.matchConstraints.resourceRules[0].operations[2]",
         'Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"'),
        ("FieldValueInvalid", "spec.matchConstraints.resourceRules[0].apiGroups",
         'Invalid value: []string{"*", "apps"}: if \'*\' is present, must not specify other API groups'),
        ("FieldValueInvalid", "spec.matchConstraints.resourceRules[0].resources",
         'Invalid value: []string{"*", "deployments"}: if \'*\' is present, must not specify other resources '
         "without subresources"),
        ("FieldValueNotSupported", "spec.matchConstraints.resourceRules[0].scope",
         'Unsupported value: "Anywhere": supported values: "*", "Cluster", "Namespaced"'),
        ("FieldValueDuplicate", "spec.matchConditions[1].name", 'Duplicate value: "a"'),
        ("FieldValueInvalid", "spec.variables[0].name", 'Invalid value: "in": name is not a valid CEL identifier'),
        ("FieldValueRequired", "spec.validations[0].expression", "Required value: expression is not specified"),
        ("FieldValueInvalid", "spec.validations[0].message",
         'Invalid value: "two\\nlines": message must not contain line breaks'),
        ("FieldValueNotSupported", "spec.validations[0].reason",
         'Unsupported value: "Conflict": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"'),
        ("FieldValueInvalid", "spec.auditAnnotations[0].key",
         'Invalid value: "bad/k/x": a valid label key must consist of alphanumeric characters, \'-\', \'_\' or '
         "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional "
         "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
    assert (await http.get(f"{POLICIES}/bad")).status_code == 404
    got = await refused(http, POLICIES, policy("rules", matchConstraints={"resourceRules": []},
                                               auditAnnotations=[{"key": "a", "valueExpression": "'x'"},
                                                                 {"key": "a", "valueExpression": "  "}]))
    assert got == [
        ("FieldValueRequired", "spec.matchConstraints.resourceRules", "Required value"),
        ("FieldValueRequired", "spec.auditAnnotations[1].valueExpression",
         "Required value: valueExpression is not specified"),
        ("FieldValueDuplicate", "spec.auditAnnotations[1].key", 'Duplicate value: "a"')]


async def test_a_bindings_structure_is_validated_as_upstreams(http: httpx.AsyncClient) -> None:
    assert await refused(http, BINDINGS, {**binding("empty"), "spec": {}}) == [
        ("FieldValueRequired", "spec.policyName", "Required value"),
        ("FieldValueRequired", "spec.validationActions", "Required value: at least one validation action is required")]
    got = await refused(http, BINDINGS, binding(
        "bad", policyName="Not_A_Name", validationActions=["Deny", "Warn", "Deny", "Block"],
        paramRef={"name": "a/b", "selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
        matchResources={"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                           "resources": ["pods/*", "pods/status"]}]}))
    assert got == [
        ("FieldValueInvalid", "spec.policyName",
         'Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
         "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
         "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ("FieldValueInvalid", "spec.paramRef.name", "Invalid value: \"a/b\": may not contain '/'"),
        ("FieldValueForbidden", "spec.paramRef.name", "Forbidden: name and selector are mutually exclusive"),
        ("FieldValueRequired", "spec.paramRef.selector.matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ("FieldValueForbidden", "spec.paramRef.selector", "Forbidden: name and selector are mutually exclusive"),
        ("FieldValueRequired", "spec.paramRef.parameterNotFoundAction", "Required value"),
        ("FieldValueInvalid", "spec.matchResources.resourceRules[0].resources[1]",
         "Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status"),
        ("FieldValueDuplicate", "spec.validationActions[2]", 'Duplicate value: "Deny"'),
        ("FieldValueNotSupported", "spec.validationActions[3]",
         'Unsupported value: "Block": supported values: "Audit", "Deny", "Warn"'),
        ("FieldValueInvalid", "spec.validationActions",
         'Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn", "Deny", "Block"}: must not '
         "contain both Deny and Warn (repeating the same validation failure information in the API response "
         "and headers serves no purpose)")]
    assert await refused(http, BINDINGS, binding("neither", paramRef={"parameterNotFoundAction": "Ignore"})) == [
        ("FieldValueRequired", "spec.paramRef", "Required value: one of name or selector must be specified"),
        ("FieldValueNotSupported", "spec.paramRef.parameterNotFoundAction",
         'Unsupported value: "Ignore": supported values: "Deny", "Allow"')]
    r = await http.put(f"{BINDINGS}/neither", json=binding("neither"))  # no create on update
    assert r.status_code == 404
    r = await http.post(BINDINGS, json=binding("fine"))
    assert r.status_code == 201
    r = await http.patch(f"{BINDINGS}/fine", json={"spec": {"validationActions": ["Warn", "Deny"]}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "spec.validationActions"


# kubernetes.io's "Validating Admission Policy" page (docs/reference/access-authn-authz/validating-admission-policy.md)
DOCS_EXAMPLES: list[dict[str, Any]] = [
    {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "demo-policy.example.com"}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [DEPLOYMENT_RULE]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]}},
    {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "demo-binding-test.example.com"}, "spec": {
        "policyName": "demo-policy.example.com", "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "test"}}}}},
    {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicalimit-policy.example.com"}, "spec": {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
        "matchConstraints": {"resourceRules": [DEPLOYMENT_RULE]},
        "validations": [{"expression": "object.spec.replicas <= params.maxReplicas", "reason": "Invalid",
                         "messageExpression": "'object.spec.replicas must be no greater than ' + "
                                              "string(params.maxReplicas)"}]}},
    {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "replicalimit-binding-test.example.com"},
     "spec": {"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
              "paramRef": {"name": "replica-limit-test.example.com", "namespace": "default",
                           "parameterNotFoundAction": "Deny"},
              "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "test"}}}}},
    {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "replicalimit-binding-nontest"},
     "spec": {"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
              "paramRef": {"selector": {"matchLabels": {"environment": "test"}}, "parameterNotFoundAction": "Allow"},
              "matchResources": {"namespaceSelector": {"matchExpressions": [
                  {"key": "environment", "operator": "NotIn", "values": ["test"]}]}}}},
    {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "demo-policy-audit.example.com"}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [DEPLOYMENT_RULE]},
        "validations": [{"expression": "object.spec.replicas > 50",
                         "messageExpression": "'Deployment spec.replicas set to ' + string(object.spec.replicas)"}],
        "auditAnnotations": [{"key": "high-replica-count", "valueExpression": (
            "'Deployment spec.replicas set to ' + string(object.spec.replicas)")}]}},
    {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "demo-policy-conditions.example.com"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["*"]}]},
        "matchConditions": [
            {"name": "exclude-leases", "expression": "!(request.resource.group == 'coordination.k8s.io' && "
                                                     "request.resource.resource == 'leases')"},
            {"name": "exclude-kubelet-requests", "expression": "!('system:nodes' in request.userInfo.groups)"},
            {"name": "rbac", "expression": "request.resource.group != 'rbac.authorization.k8s.io'"}],
        "validations": [{"expression": "!object.metadata.name.contains('demo') || "
                                       "object.metadata.namespace == 'demo'"}]}},
    {"kind": "ValidatingAdmissionPolicy",
     "metadata": {"name": "image-matches-namespace-environment.policy.example.com"}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [DEPLOYMENT_RULE]},
        "variables": [
            {"name": "environment", "expression": "'environment' in namespaceObject.metadata.labels ? "
                                                  "namespaceObject.metadata.labels['environment'] : 'prod'"},
            {"name": "exempt", "expression": "'exempt' in namespaceObject.metadata.labels && "
                                             "namespaceObject.metadata.labels['exempt'] == 'true'"},
            {"name": "containers", "expression": "object.spec.template.spec.containers"},
            {"name": "containersToCheck", "expression": "variables.containers.filter(c, "
                                                        "c.image.contains('example.com/'))"}],
        "validations": [{"expression": "variables.exempt || variables.containersToCheck.all(c, "
                                       "c.image.startsWith(variables.environment + '.'))",
                         "messageExpression": "'only ' + variables.environment + ' images are allowed in "
                                              "namespace ' + namespaceObject.metadata.name"}]}},
]


async def test_the_docs_examples_are_accepted(http: httpx.AsyncClient) -> None:
    for example in DOCS_EXAMPLES:
        path = POLICIES if example["kind"] == "ValidatingAdmissionPolicy" else BINDINGS
        r = await http.post(path, json={"apiVersion": "admissionregistration.k8s.io/v1", **example})
        assert r.status_code == 201, (example["metadata"]["name"], r.text)
    got = (await http.get(f"{POLICIES}/demo-policy-conditions.example.com")).json()
    assert got["spec"]["failurePolicy"] == "Fail" and got["status"]["observedGeneration"] == 1


async def test_a_policy_stored_before_the_defaults_is_enforced_as_before(tmp_path: Path) -> None:
    """A policy and binding written by an earlier version (no failurePolicy, no matchPolicy,
    no selectors, no scope) are read as upstream reads them: a run-time error fails closed,
    the rules match as written; a label update of the policy stores its defaults."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        kube = app.state.front.kube
        meta = {"uid": "u", "creationTimestamp": "2020-01-01T00:00:00Z", "generation": 1}
        old_policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                      "metadata": {"name": "legacy", **meta}, "spec": {
                          "matchConstraints": {"resourceRules": [{
                              "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["configmaps"]}]},
                          "validations": [{"expression": "object.data.missing == 'x'"}]}}
        old_binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                       "metadata": {"name": "legacy", **meta},
                       "spec": {"policyName": "legacy", "validationActions": ["Deny"]}}
        for plural, obj in (("validatingadmissionpolicies", old_policy),
                            ("validatingadmissionpolicybindings", old_binding)):
            rtype = kube.registry.get("admissionregistration.k8s.io", "v1", plural)
            await kube.store.create(rtype.key(None, "legacy"), orjson.dumps(obj))
        cms = resource_path("", "v1", "configmaps", "default")
        refusal: ApiError | None = None
        for _ in range(500):  # admission reads the watch cache
            try:
                await c.create(cms, {"metadata": {"generateName": "probe-"}, "data": {}})
            except ApiError as e:
                refusal = e
                break
            await asyncio.sleep(0.01)
        assert refusal is not None, "the stored policy was never enforced"
        assert refusal.code == 422
        assert "denied request: expression 'object.data.missing == 'x'' resulted in error: " in refusal.message
        got = await c.patch(f"{POLICIES}/legacy", {"metadata": {"labels": {"touched": "yes"}}})
        assert got["spec"]["failurePolicy"] == "Fail" and got["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
        assert got["metadata"]["generation"] == 1  # only defaults differ: the same generation


async def test_an_expression_of_a_known_other_type_is_refused(http: httpx.AsyncClient) -> None:
    """Upstream's compile checks the output type: a validation and a match condition make a
    bool, a message expression a string, an audit annotation a string or null; what is dyn here
    (a field of ``object``) passes."""
    got = await refused(http, POLICIES, policy(
        "typed", validations=[{"expression": "size(object.metadata.name)", "messageExpression": "1 + 1"},
                              {"expression": "object.spec.paused == true", "messageExpression": "object.x"}],
        matchConditions=[{"name": "m", "expression": "'yes'"}],
        auditAnnotations=[{"key": "k", "valueExpression": "[1]"}]))
    assert got == [
        ("FieldValueInvalid", "spec.matchConditions[0].expression",
         "Invalid value: \"'yes'\": must evaluate to bool but got string"),
        ("FieldValueInvalid", "spec.validations[0].expression",
         'Invalid value: "size(object.metadata.name)": must evaluate to bool but got int'),
        ("FieldValueInvalid", "spec.validations[0].messageExpression",
         'Invalid value: "1 + 1": must evaluate to string but got int'),
        ("FieldValueInvalid", "spec.auditAnnotations[0].valueExpression",
         'Invalid value: "[1]": must evaluate to one of [string null_type] but got list(int)')]
