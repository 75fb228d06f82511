"""The audit annotations of admission (api/webhooks.py, api/admissionpolicy.py) in the audit
log of a real ``controlplane serve``: mutating webhooks' calls and patches, a webhook's own
audit annotations, a ValidatingAdmissionPolicy's Audit action and ``auditAnnotations``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_webhooks import MUTATING, NS, PODS, VALIDATING, Api, webhook
from tests.api.webhook_server import WebhookServer
from tests.test_cli import Serve, running, start_serve

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: coordination.k8s.io}]
- level: Request
  userGroups: [system:masters]
  resources: [{group: "", resources: [pods, configmaps]}]
- level: Metadata
  omitStages: [RequestReceived]
"""
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("audit-admission")
    (tmp / "policy.yaml").write_text(POLICY)
    with running(start_serve(tmp, extra=("--audit-policy-file", str(tmp / "policy.yaml"),
                                         "--audit-log-path", str(tmp / "audit.log")))) as s:
        yield s


@pytest.fixture
def api(audited: Serve) -> Iterator[Api]:
    a = Api(audited)
    a.http.post("/api/v1/namespaces", json={"metadata": {"name": NS, "labels": {"webhooks": "on"}}})
    try:
        yield a
    finally:
        a.close()


def completed(served: Serve, audit_id: str) -> dict[str, Any]:
    log = served.state.parent / "audit.log"
    for _ in range(200):
        for line in log.read_text().splitlines():
            e: dict[str, Any] = json.loads(line)
            if e["auditID"] == audit_id and e["stage"] == "ResponseComplete":
                return e
        time.sleep(0.05)
    raise AssertionError(f"no ResponseComplete event for {audit_id}")


def test_mutating_webhooks_calls_and_patches_and_a_webhooks_own_annotations(
        api: Api, hook: WebhookServer, audited: Serve) -> None:
    api.configure(MUTATING, "audit-mutate", [webhook("mutate.example.com", hook, "/mutate"),
                                             webhook("allow.example.com", hook, "/annotate")])
    api.configure(VALIDATING, "audit-validate", [webhook("check.example.com", hook, "/annotate")])
    r = api.http.post(PODS, json=api.pod("annotated"))
    assert r.status_code == 201, r.text
    notes = completed(audited, r.headers["Audit-Id"])["annotations"]
    assert json.loads(notes["mutation.webhook.admission.k8s.io/round_0_index_0"]) == \
        {"configuration": "audit-mutate", "webhook": "mutate.example.com", "mutated": True}
    assert json.loads(notes["mutation.webhook.admission.k8s.io/round_0_index_1"]) == \
        {"configuration": "audit-mutate", "webhook": "allow.example.com", "mutated": False}
    patch = json.loads(notes["patch.webhook.admission.k8s.io/round_0_index_0"])  # (the level is Request)
    assert patch["webhook"] == "mutate.example.com" and patch["patchType"] == "JSONPatch"
    assert {"op": "add", "path": "/metadata/labels/mutated", "value": "yes"} in patch["patch"]
    assert "patch.webhook.admission.k8s.io/round_0_index_1" not in notes  # (no patch, none noted)
    assert notes["allow.example.com/checked"] == "yes" and notes["check.example.com/checked"] == "yes"


def test_a_patch_is_left_out_below_the_request_level(api: Api, hook: WebhookServer, audited: Serve) -> None:
    api.configure(MUTATING, "audit-mutate-meta", [webhook("mutate.example.com", hook, "/mutate",
                                                          rules=[{"operations": ["CREATE"], "apiGroups": [""],
                                                                  "apiVersions": ["v1"],
                                                                  "resources": ["secrets"]}])])
    r = api.http.post(f"/api/v1/namespaces/{NS}/secrets", json={"metadata": {"name": "s"}})
    assert r.status_code == 201, r.text
    e = completed(audited, r.headers["Audit-Id"])
    assert e["level"] == "Metadata"
    assert "mutation.webhook.admission.k8s.io/round_0_index_0" in e["annotations"]
    assert not any(k.startswith("patch.webhook.admission.k8s.io/") for k in e["annotations"])


def test_a_policys_audit_action_and_audit_annotations(api: Api, audited: Serve) -> None:
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "small-maps"},
        "spec": {"matchConstraints": {"resourceRules": rules},
                 "validations": [{"expression": "true"},
                                 {"expression": "size(object.data) < 2", "message": "too many keys"}],
                 "auditAnnotations": [{"key": "keys", "valueExpression": "string(size(object.data))"},
                                      {"key": "never", "valueExpression": "null"}]}}
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "small-maps-audit"},
        "spec": {"policyName": "small-maps", "validationActions": ["Audit", "Warn"]}}
    for path, obj in ((POLICIES, policy), (BINDINGS, binding)):
        r = api.http.post(path, json=obj)
        assert r.status_code == 201, r.text
        api.made.append(f"{path}/{obj['metadata']['name']}")
    for _ in range(200):  # (the bindings are read from the watch cache)
        r = api.http.post("/api/v1/namespaces/default/configmaps",
                          json={"metadata": {"generateName": "big-"}, "data": {"a": "1", "b": "2"}})
        assert r.status_code == 201, r.text
        if r.headers.get("warning"):
            break
        time.sleep(0.05)
    notes = completed(audited, r.headers["Audit-Id"])["annotations"]
    assert json.loads(notes["validation.policy.admission.k8s.io/validation_failure"]) == [
        {"message": "too many keys", "policy": "small-maps", "binding": "small-maps-audit", "expressionIndex": 1,
         "validationActions": ["Audit", "Warn"]}]
    assert notes["small-maps/keys"] == "2" and "small-maps/never" not in notes


def test_a_policys_audit_annotations_of_several_params_are_joined(api: Api, audited: Serve) -> None:
    """Each selected param evaluates the annotation; distinct values joined with ', ', as upstream's
    auditAnnotationCollector."""
    for name, tier in (("tier-a", "gold"), ("tier-b", "silver"), ("tier-c", "gold")):
        r = api.http.post(f"/api/v1/namespaces/{NS}/configmaps", json={
            "metadata": {"name": name, "labels": {"audit-param": "yes"}}, "data": {"tier": tier}})
        assert r.status_code == 201, r.text
        api.made.append(f"/api/v1/namespaces/{NS}/configmaps/{name}")
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "tiers"},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["CREATE"], "resources": ["secrets"]}]},
                 "validations": [{"expression": "true"}],
                 "auditAnnotations": [{"key": "tier", "valueExpression": "params.data.tier"}]}}
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "tiers"},
        "spec": {"policyName": "tiers", "validationActions": ["Audit"],
                 "paramRef": {"selector": {"matchLabels": {"audit-param": "yes"}},
                              "parameterNotFoundAction": "Allow"}}}
    for path, obj in ((POLICIES, policy), (BINDINGS, binding)):
        r = api.http.post(path, json=obj)
        assert r.status_code == 201, r.text
        api.made.append(f"{path}/{obj['metadata']['name']}")
    for _ in range(200):  # (the binding is read from the watch cache)
        r = api.http.post(f"/api/v1/namespaces/{NS}/secrets", json={"metadata": {"generateName": "tiered-"}})
        assert r.status_code == 201, r.text
        notes = completed(audited, r.headers["Audit-Id"])["annotations"]
        if "tiers/tier" in notes:
            break
        time.sleep(0.05)
    assert notes["tiers/tier"] == "gold, silver"  # tier-a, tier-b; tier-c's gold once
