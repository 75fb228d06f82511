"""The bound on an admission policy's CEL work over a socket with the real kubectl: a
validation whose comprehensions iterate past upstream's per-call cost limit is stopped with
cel-go's error, and ``failurePolicy`` decides (``expressions.Meter``)."""

from __future__ import annotations

import json
import time

from tests.e2e.test_kubectl_openapi import ok, run
from tests.test_cli import Serve

POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME}
spec:
  failurePolicy: FAILURE
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NAME}}
  validations:
  - expression: "object.data.all(k, object.data.all(j, size(k) + size(j) > 0))"
  - expression: "size(object.data) < 5"
    message: at most 4 keys
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: NAME}
spec: {policyName: NAME, validationActions: [Deny]}
"""


def configmap(name: str, namespace: str, keys: int) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                       "data": {f"k{i}": "v" for i in range(keys)}})


def refused_after_enforced(served: Serve, namespace: str, keys: int) -> str:
    """The refusal of a ConfigMap of ``keys`` keys, once the policy is enforced (a ConfigMap of
    5 keys, which fails its second validation whatever its cost, is refused)."""
    deadline = time.monotonic() + 10
    while run(served, "create", "-f", "-", stdin=configmap("probe", namespace, 5)).returncode == 0:
        ok(served, "delete", "configmap", "probe", "-n", namespace)
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(0.1)
    r = run(served, "create", "-f", "-", stdin=configmap("big", namespace, keys))
    assert r.returncode == 1, r.stdout
    return r.stderr


def test_an_expression_past_the_per_call_limit_is_stopped(served: Serve) -> None:
    """1,100 keys: 1,100 × 1,100 inner iterations, past the 1,000,000 upstream's per-call limit
    (each iteration costs cel-go at least 1); the error is that validation's decision, and
    the next validation still runs (its failure is not the first denial)."""
    ok(served, "create", "namespace", "costly")
    ok(served, "apply", "-f", "-", stdin=POLICY.replace("NAME", "costly").replace("FAILURE", "Fail"))
    stderr = refused_after_enforced(served, "costly", 1100)
    assert ("ValidatingAdmissionPolicy 'costly' with binding 'costly' denied request: expression "
            "'object.data.all(k, object.data.all(j, size(k) + size(j) > 0))' resulted in error: "
            "operation cancelled: actual cost limit exceeded") in stderr, stderr
    ok(served, "create", "-f", "-", stdin=configmap("small", "costly", 4))  # 20 iterations: no limit near


def test_failure_policy_ignore_admits_what_runs_out_of_cost(served: Serve) -> None:
    ok(served, "create", "namespace", "ignored")
    ok(served, "apply", "-f", "-", stdin=POLICY.replace("NAME", "ignored").replace("FAILURE", "Ignore"))
    stderr = refused_after_enforced(served, "ignored", 1100)  # refused by the second validation only
    assert "denied request: at most 4 keys" in stderr and "cost limit" not in stderr, stderr
