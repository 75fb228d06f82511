"""``matchPolicy: Equivalent`` of a ValidatingAdmissionPolicy's ``matchConstraints`` over a
socket with the real kubectl: a rule naming ``autoscaling/v2`` takes in a HorizontalPodAutoscaler
written as ``autoscaling/v1``, its object converted to v2 before the validations see it
(``request.kind`` the v2 one, ``request.requestKind`` the request's); ``Exact`` does not. A
MutatingAdmissionPolicy the same, its result converted back to the request's version."""

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
  matchConstraints:
    matchPolicy: POLICY
    resourceRules:
    - {apiGroups: [autoscaling], apiVersions: [v2], operations: [CREATE], resources: [horizontalpodautoscalers]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NAME}}
  validations:
  - expression: "object.apiVersion == 'autoscaling/v2' && request.kind.version == 'v2'"
    messageExpression: "'seen as ' + object.apiVersion + ', ' + request.kind.version"
  - expression: "object.spec.metrics.all(m, m.resource.target.averageUtilization <= 80)"
    messageExpression: >
      'at most 80% (' + request.requestKind.version + ' ' + request.requestResource.resource + ' as ' +
      request.resource.version + ')'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: NAME}
spec: {policyName: NAME, validationActions: [Deny]}
"""

HPA = """
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: HPANAME, namespace: HPASPACE}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
  targetCPUUtilizationPercentage: TARGET
"""


def hpa(name: str, namespace: str, target: int) -> str:
    return HPA.replace("HPANAME", name).replace("HPASPACE", namespace).replace("TARGET", str(target))


def test_a_v2_rule_takes_in_a_v1_write_converted(served: Serve) -> None:
    ok(served, "create", "namespace", "equivalent")
    ok(served, "apply", "-f", "-", stdin=POLICY.replace("NAME", "equivalent").replace("POLICY", "Equivalent"))
    deadline = time.monotonic() + 10
    while (r := run(served, "create", "-f", "-", stdin=hpa("busy", "equivalent", 90))).returncode == 0:
        ok(served, "delete", "hpa", "busy", "-n", "equivalent")
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(0.1)
    # the v1 target as the v2 metric, and the request's own version beside the one matched
    assert ("ValidatingAdmissionPolicy 'equivalent' with binding 'equivalent' denied request: "
            "at most 80% (v1 horizontalpodautoscalers as v2)") in r.stderr, r.stderr
    ok(served, "create", "-f", "-", stdin=hpa("calm", "equivalent", 50))


def test_exact_leaves_other_versions_alone(served: Serve) -> None:
    ok(served, "create", "namespace", "exact")
    ok(served, "apply", "-f", "-", stdin=POLICY.replace("NAME", "exact").replace("POLICY", "Exact"))
    v2 = hpa("v2-busy", "exact", 90).replace("autoscaling/v1", "autoscaling/v2").replace(
        "targetCPUUtilizationPercentage: 90",
        "metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 90}}}]")
    deadline = time.monotonic() + 10
    while (r := run(served, "create", "-f", "-", stdin=v2)).returncode == 0:  # a v2 write: matched
        ok(served, "delete", "hpa", "v2-busy", "-n", "exact")
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(0.1)
    assert "denied request: at most 80% (v2 horizontalpodautoscalers as v2)" in r.stderr, r.stderr
    ok(served, "create", "-f", "-", stdin=hpa("v1-busy", "exact", 90))  # a v1 write: not


MUTATING = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: cap-target}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [autoscaling], apiVersions: [v2], operations: [CREATE], resources: [horizontalpodautoscalers]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: mutated}}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "replace", path: "/spec/metrics/0/resource/target/averageUtilization", value: 60},
         JSONPatch{op: "add", path: "/metadata/labels", value: {"seen-as": object.apiVersion.split("/")[1]}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: cap-target}
spec: {policyName: cap-target}
"""


def test_a_mutating_policy_mutates_in_the_version_it_names(served: Serve) -> None:
    """The v1 write converted to v2 for the mutations (a v2 path patched), then back: the v1
    object keeps the change, as upstream's dispatcher converts the versioned object back."""
    ok(served, "create", "namespace", "mutated")
    ok(served, "apply", "-f", "-", stdin=MUTATING)
    deadline = time.monotonic() + 10
    n = 0
    while True:
        r = ok(served, "create", "-f", "-", "-o", "json", stdin=hpa(f"h{n}", "mutated", 90))
        created = json.loads(r.stdout)
        if created["metadata"].get("labels") or time.monotonic() > deadline:
            break
        n += 1
        time.sleep(0.1)
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["metadata"]["labels"] == {"seen-as": "v2"}
    assert created["spec"]["targetCPUUtilizationPercentage"] == 60
