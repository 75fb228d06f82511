"""Admission policies' ``variables`` over a socket with the real kubectl, computed as upstream's
composition computes them (``api/policyvariables.py``): when an expression reads one, so a
variable that fails fails only the expressions that read it, not those that skip it
(``!has(...) || variables.v``), in upstream's words (``composited variable "v" fails to
evaluate: ...``); ``has(variables.v)`` computes it; a message expression's variables have no
``authorizer``, as upstream binds none there; a MutatingAdmissionPolicy's mutation fails only
when it reads the failing variable."""

from __future__ import annotations

import time

from tests.e2e.test_kubectl_openapi import ok, run
from tests.test_cli import Serve

VALIDATING = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: lazy}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: lazy}}
  variables:
  - {name: missing, expression: "object.data.missing"}
  - {name: per, expression: "10 / (size(object.data) - 1)"}
  - {name: scaled, expression: "variables.per * 2"}
  - name: allowed
    expression: "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('create').allowed()"
  validations:
  - expression: "!has(object.data.check) || variables.missing == object.data.check"
  - expression: "!has(object.data.ratio) || variables.scaled > 2"
  - expression: "!has(object.data.present) || has(variables.missing)"
  - expression: "(has(object.data.late) && variables.missing == '') || !has(object.data.other)"
    message: no other
  - expression: "!has(object.data.deny) || !variables.allowed"
    messageExpression: "'allowed is ' + string(variables.allowed)"
    message: the message, as the message expression failed
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: lazy}
spec: {policyName: lazy, validationActions: [Deny]}
"""

MUTATING = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: lazy-mutating}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: lazy-mutating}}
  variables:
  - {name: missing, expression: "object.data.missing"}
  - {name: keys, expression: "string(size(object.data))"}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        has(object.data.want) ? [JSONPatch{op: "add", path: "/data/got", value: variables.missing}]
        : [JSONPatch{op: "add", path: "/data/keys", value: variables.keys}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: lazy-mutating}
spec: {policyName: lazy-mutating}
"""


def configmap(served: Serve, namespace: str, name: str, **data: str) -> tuple[int, str, str]:
    r = run(served, "create", "configmap", name, "-n", namespace, *(f"--from-literal={k}={v}" for k, v in data.items()),
            "-o", "jsonpath={.data}")
    return r.returncode, r.stdout, r.stderr


def enforced(served: Serve, namespace: str, probe: dict[str, str]) -> None:
    """Wait until the policy judges ConfigMaps (admission reads the watch caches): ``probe``'s
    data is refused (a validating policy) or changed (a mutating one)."""
    deadline = time.monotonic() + 10
    for attempt in range(1000):
        code, out, _ = configmap(served, namespace, f"probe{attempt}", **probe)
        if code != 0 or (out and '"keys"' in out):
            return
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(0.1)


def test_a_validating_policys_variables_are_computed_when_read(served: Serve) -> None:
    ok(served, "create", "namespace", "lazy")
    ok(served, "apply", "-f", "-", stdin=VALIDATING)
    enforced(served, "lazy", {"check": "x"})
    prefix = "ValidatingAdmissionPolicy 'lazy' with binding 'lazy' denied request: "
    # no validation reads a variable (each skips it), so none of those that would fail fails anything
    assert configmap(served, "lazy", "plain", a="1")[0] == 0
    code, _, stderr = configmap(served, "lazy", "checked", check="x")
    assert code == 1 and (
        prefix + "expression '!has(object.data.check) || variables.missing == object.data.check' resulted in "
        'error: composited variable "missing" fails to evaluate: no such key: missing') in stderr, stderr
    # read by another variable, which fails with it: 10 / (1 - 1)
    code, _, stderr = configmap(served, "lazy", "ratio", ratio="1")
    assert code == 1 and (
        prefix + "expression '!has(object.data.ratio) || variables.scaled > 2' resulted in error: composited variable "
        '"scaled" fails to evaluate: composited variable "per" fails to evaluate: division by zero') in stderr, stderr
    assert configmap(served, "lazy", "ratios", ratio="1", b="2")[0] == 0  # 10 / 1 * 2 > 2
    code, _, stderr = configmap(served, "lazy", "present", present="1")  # has() computes it, as upstream's lazy map
    assert code == 1 and 'resulted in error: composited variable "missing" fails to evaluate: no such key: missing' \
        in stderr, stderr
    # the failing variable is skipped (no 'late'), so the error is the expression's own
    code, _, stderr = configmap(served, "lazy", "other", other="1")
    assert code == 1 and prefix + "no other" in stderr, stderr
    # a message expression's variables have no authorizer (upstream's): it fails, so the message is the message
    code, _, stderr = configmap(served, "lazy", "denied", deny="1")
    assert code == 1 and prefix + "the message, as the message expression failed" in stderr, stderr
    assert "allowed is" not in stderr


def test_a_mutation_fails_only_when_it_reads_the_failing_variable(served: Serve) -> None:
    ok(served, "create", "namespace", "lazy-mutating")
    ok(served, "apply", "-f", "-", stdin=MUTATING)
    enforced(served, "lazy-mutating", {"a": "1"})
    code, out, stderr = configmap(served, "lazy-mutating", "plain", a="1", b="2")
    assert code == 0 and '"keys":"2"' in out, (out, stderr)
    code, _, stderr = configmap(served, "lazy-mutating", "wanted", want="1")
    assert code == 1 and (
        "policy 'lazy-mutating' with binding 'lazy-mutating' denied request: expression 'has(object.data.want) ? "
        '[JSONPatch{op: "add", path: "/data/got", value: variables.missing}] : [JSONPatch{op: "add", path: '
        "\"/data/keys\", value: variables.keys}]' resulted in error: composited variable \"missing\" fails to "
        "evaluate: no such key: missing") in stderr, stderr
