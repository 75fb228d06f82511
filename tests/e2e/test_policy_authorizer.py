"""Admission policies over a socket (``serve --authorization-mode RBAC``, a token file, an audit
log) with the real kubectl and httpx: the CEL ``authorizer`` in a ValidatingAdmissionPolicy's
validations, variables and match conditions and in a MutatingAdmissionPolicy's mutations,
asking RBAC about the request's user; what several failing validations and bindings answer
(the first denial, a warning for each ``Warn`` failure, the first ``Audit`` failure's
annotation)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_kubectl_openapi import ok, run
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admintoken,admin,uid-admin,"system:masters"\nalicetoken,alice,uid-alice,"devs"\n'
AUDIT_POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  resources: [{group: "", resources: [configmaps, secrets]}]
- level: None
"""
ALICE_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: alice, namespace: NAMESPACE}
rules:
- {apiGroups: [""], resources: [configmaps, secrets], verbs: [create, get, list, update, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice, namespace: NAMESPACE}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: alice}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("policyauthz")
    (tmp / "tokens.csv").write_text(TOKENS)
    (tmp / "audit.yaml").write_text(AUDIT_POLICY)
    with running(start_serve(tmp, extra=(
            "--token-auth-file", str(tmp / "tokens.csv"), "--authorization-mode", "RBAC",
            "--audit-policy-file", str(tmp / "audit.yaml"), "--audit-log-path", str(tmp / "audit.log")))) as s:
        yield s


def namespace(served: Serve, name: str) -> str:
    """A namespace of its own for a test, where alice may write ConfigMaps and Secrets."""
    ok(served, "create", "namespace", name)
    ok(served, "apply", "-f", "-", stdin=ALICE_ROLE.replace("NAMESPACE", name))
    return name


def as_alice(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run(served, "--token=alicetoken", *args, stdin=stdin)


def eventually(attempt: Callable[[], subprocess.CompletedProcess[str]],
               done: Callable[[subprocess.CompletedProcess[str]], bool]) -> subprocess.CompletedProcess[str]:
    """``attempt`` until ``done`` takes its result (admission reads policies and RBAC from the
    watch caches, a moment after their writes are answered)."""
    deadline = time.monotonic() + 10
    while True:
        result = attempt()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def refused(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode != 0


def audit_events(served: Serve, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    log = Path(served.state.parent / "audit.log")
    deadline = time.monotonic() + 10
    while True:
        found = [e for e in map(json.loads, log.read_text().splitlines()) if match(e)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


POD_CREATORS = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pod-creators}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: authz-pods}}
  variables:
  - name: canCreatePods
    expression: "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('create').allowed()"
  validations:
  - expression: "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('create').allowed()"
    message: only those who may create pods may create ConfigMaps here
  - expression: "variables.canCreatePods"
    message: the variable agrees
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pod-creators}
spec:
  policyName: pod-creators
  validationActions: [Deny]
"""

POD_CREATOR_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-creator, namespace: authz-pods}
rules:
- {apiGroups: [""], resources: [pods], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-creator, namespace: authz-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-creator}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""


def test_a_validation_asks_the_authorizer_about_the_requests_user(served: Serve) -> None:
    """The kubernetes.io example, ``authorizer.group('').resource('pods').namespace(...)
    .check('create').allowed()``: true for the admin, false for alice until RBAC grants her
    pods; the variable asking the same agrees."""
    ns = namespace(served, "authz-pods")
    ok(served, "apply", "-f", "-", stdin=POD_CREATORS)
    denied = eventually(lambda: as_alice(served, "create", "configmap", "a", "-n", ns), refused)
    assert denied.returncode == 1
    assert ('configmaps "a" is forbidden: ValidatingAdmissionPolicy \'pod-creators\' with binding '
            "'pod-creators' denied request: only those who may create pods may create ConfigMaps here"
            in denied.stderr), denied.stderr
    ok(served, "create", "configmap", "by-admin", "-n", ns)  # system:masters may create pods
    ok(served, "apply", "-f", "-", stdin=POD_CREATOR_ROLE)
    allowed = eventually(lambda: as_alice(served, "create", "configmap", "b", "-n", ns), lambda r: not refused(r))
    assert allowed.returncode == 0, allowed.stderr


CUSTOM_VERB = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: custom-verb}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: authz-verb}}
  matchConditions:
  - name: not-exempt
    expression: "!authorizer.requestResource.check('custom-verb').allowed()"
  validations:
  - expression: "false"
    message: secrets here need the custom-verb permission
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: custom-verb}
spec:
  policyName: custom-verb
  validationActions: [Deny]
"""

CUSTOM_VERB_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: custom-verb, namespace: authz-verb}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [custom-verb]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: custom-verb, namespace: authz-verb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: custom-verb}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""


def test_a_match_condition_checks_a_custom_verb_on_the_request_resource(served: Serve) -> None:
    """``authorizer.requestResource.check('custom-verb')``: the request's own group, resource,
    namespace and name; a user granted the verb is left out of the policy."""
    ns = namespace(served, "authz-verb")
    ok(served, "apply", "-f", "-", stdin=CUSTOM_VERB)
    denied = eventually(lambda: as_alice(served, "create", "secret", "generic", "s", "-n", ns), refused)
    assert "secrets here need the custom-verb permission" in denied.stderr, denied.stderr
    ok(served, "create", "secret", "generic", "by-admin", "-n", ns)  # system:masters: every verb
    ok(served, "apply", "-f", "-", stdin=CUSTOM_VERB_ROLE)
    allowed = eventually(lambda: as_alice(served, "create", "secret", "generic", "t", "-n", ns),
                         lambda r: not refused(r))
    assert allowed.returncode == 0, allowed.stderr


MUTATING = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mark-deleters}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: authz-mutate}}
  matchConditions:
  - name: may-list
    expression: >
      authorizer.group('').resource('configmaps').namespace(object.metadata.namespace).check('list').allowed()
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"may-delete-nodes":
          string(authorizer.group('').resource('nodes').check('delete').allowed())}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mark-deleters}
spec:
  policyName: mark-deleters
"""


def test_a_mutation_asks_the_authorizer(served: Serve) -> None:
    ns = namespace(served, "authz-mutate")
    ok(served, "apply", "-f", "-", stdin=MUTATING)

    def label(result: subprocess.CompletedProcess[str]) -> str | None:
        if result.returncode != 0:
            return None
        return str((json.loads(result.stdout)["metadata"].get("labels") or {}).get("may-delete-nodes"))

    n = iter(range(100))
    by_admin = eventually(lambda: run(served, "create", "configmap", f"admin-{next(n)}", "-n", ns, "-o", "json"),
                          lambda r: label(r) is not None)
    assert label(by_admin) == "true", by_admin.stderr
    by_alice = as_alice(served, "create", "configmap", "alice", "-n", ns, "-o", "json")
    assert label(by_alice) == "false", by_alice.stderr


SEVERAL = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small-maps}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: several}}
  validations:
  - {expression: "size(object.data) < 2", message: too many keys}
  - {expression: "true"}
  - {expression: "!('secret' in object.data)", message: "  no secret key  "}
  - {expression: "object.data.absent == 'x'"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small-maps-deny}
spec: {policyName: small-maps, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small-maps-warn}
spec: {policyName: small-maps, validationActions: [Warn, Audit]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ok-names}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: several}}
  validations:
  - {expression: "object.metadata.name.startsWith('ok-')", reason: Forbidden}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: the-names}
spec: {policyName: ok-names, validationActions: [Deny]}
"""


def test_several_failing_validations_and_bindings(served: Serve) -> None:
    """As upstream's dispatcher: every binding and validation is evaluated; the first denial is
    the answer (its code and reason, one cause); each ``Warn`` failure is a warning, an error
    (under ``failurePolicy: Fail``) one too, in upstream's words; the ``Audit`` annotation holds
    the first failure only, as upstream's may not be written twice."""
    ns = namespace(served, "several")
    ok(served, "apply", "-f", "-", stdin=SEVERAL)
    headers = {"Authorization": "Bearer admintoken"}
    with httpx.Client(base_url=served.url, verify=False, timeout=10, headers=headers) as c:
        def create(name: str, data: dict[str, str]) -> httpx.Response:
            return c.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": name}, "data": data})

        deadline = time.monotonic() + 10  # until the watch caches have every policy and binding
        while len((r := create("bad", {"a": "1", "secret": "2"})).headers.get_list("warning")) < 3 \
                or create("probe", {"absent": "x"}).status_code != 403:
            for name in ("bad", "probe"):
                c.delete(f"/api/v1/namespaces/{ns}/configmaps/{name}")
            assert time.monotonic() < deadline, f"the policies were never enforced: {r.headers} {r.text}"
            time.sleep(0.1)
        first = "ValidatingAdmissionPolicy 'small-maps' with binding 'small-maps-deny' denied request: too many keys"
        assert r.status_code == 422, r.text
        status = r.json()
        assert status["reason"] == "Invalid" and status["message"] == f'configmaps "bad" is forbidden: {first}'
        assert status["details"] == {"name": "bad", "kind": "configmaps", "causes": [{"message": first}]}
        warned = "Validation failed for ValidatingAdmissionPolicy 'small-maps' with binding 'small-maps-warn': "
        warnings = r.headers.get_list("warning")
        assert warnings[:2] == [f'299 - "{warned}too many keys"', f'299 - "{warned}no secret key"'], warnings
        assert len(warnings) == 3 and warnings[2].startswith(
            f"299 - \"{warned}expression 'object.data.absent == 'x'' resulted in error: "), warnings
        audit_id = r.headers["Audit-Id"]
        done = audit_events(served, lambda e: e["auditID"] == audit_id and e["stage"] == "ResponseComplete")
        assert json.loads(done[0]["annotations"]["validation.policy.admission.k8s.io/validation_failure"]) == [
            {"message": "too many keys", "policy": "small-maps", "binding": "small-maps-warn", "expressionIndex": 0,
             "validationActions": ["Warn", "Audit"]}]

        # passing small-maps, failing ok-names alone: its reason and code (Forbidden, 403), the expression
        # as the message as upstream words it
        r = create("fine", {"absent": "x"})
        assert r.status_code == 403, r.text
        assert r.json()["reason"] == "Forbidden"
        assert r.json()["details"]["causes"] == [{"message": "ValidatingAdmissionPolicy 'ok-names' with binding "
                                                  "'the-names' denied request: failed expression: "
                                                  "object.metadata.name.startsWith('ok-')"}]
        assert create("ok-fine", {"absent": "x"}).status_code == 201


ANNOTATED = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: annotated}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: annotated}}
  validations:
  - {expression: "true"}
  auditAnnotations:
  - {key: keys, valueExpression: "'  ' + string(size(object.data)) + ' '"}
  - {key: typed, valueExpression: "has(object.data.typed) ? size(object.data) : null"}
  - {key: who, valueExpression: "has(object.data.who) ? authorizer.path('/x').check('get').reason() : null"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: annotated}
spec: {policyName: annotated, validationActions: [Audit]}
"""


def test_audit_annotations_are_evaluated_for_every_request(served: Serve) -> None:
    """Upstream evaluates a policy's audit annotations with its validations: a value that is
    not a string or null, or an error (``authorizer`` is declared but, there, not bound),
    denies under ``failurePolicy: Fail`` whatever the binding's actions; a value is trimmed."""
    ns = namespace(served, "annotated")
    ok(served, "apply", "-f", "-", stdin=ANNOTATED)
    prefix = "ValidatingAdmissionPolicy 'annotated' with binding 'annotated' denied request: "
    typed = eventually(lambda: run(served, "create", "configmap", "typed", "-n", ns, "--from-literal=typed=1"),
                       refused)
    assert (prefix + "valueExpression 'has(object.data.typed) ? size(object.data) : null' resulted in "
            "unsupported return type: int. Return type must be either string or null.") in typed.stderr, typed.stderr
    who = run(served, "create", "configmap", "who", "-n", ns, "--from-literal=who=1")
    assert (prefix + "expression 'has(object.data.who) ? authorizer.path('/x').check('get').reason() : null' "
            "resulted in error: no such attribute(s): authorizer") in who.stderr, who.stderr
    ok(served, "create", "configmap", "plain", "-n", ns, "--from-literal=a=1")
    done = audit_events(served, lambda e: e["verb"] == "create" and e["stage"] == "ResponseComplete"
                        and e["objectRef"].get("name") == "plain" and e["objectRef"].get("namespace") == ns)
    assert done[0]["annotations"]["annotated/keys"] == "1"
