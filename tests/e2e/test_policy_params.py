"""Parameters of admission policies over a socket with the real kubectl: the kubernetes.io
page's ``replicalimit`` example (a ReplicaLimit CRD as the ``paramKind``, a binding naming
one in ``default``), a ConfigMap param selected by label, ``parameterNotFoundAction`` Deny
against Allow, and a MutatingAdmissionPolicy whose mutation reads its param."""

from __future__ import annotations

import os
import subprocess
import time

import yaml

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: replicalimits.rules.example.com}
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          maxReplicas: {type: integer}
"""

# as the kubernetes.io page "Validating Admission Policy" writes them
REPLICA_LIMIT = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "replicalimit-policy.example.com"
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: rules.example.com/v1
    kind: ReplicaLimit
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= params.maxReplicas"
      messageExpression: "'object.spec.replicas must be no greater than ' + string(params.maxReplicas)"
      reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "replicalimit-binding-test.example.com"
spec:
  policyName: "replicalimit-policy.example.com"
  validationActions: [Deny]
  paramRef:
    name: "replica-limit-test.example.com"
    namespace: "default"
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
---
apiVersion: rules.example.com/v1
kind: ReplicaLimit
metadata:
  name: "replica-limit-test.example.com"
  namespace: "default"
maxReplicas: 3
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
"""

LABEL_RULES = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: required-labels}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [services]}
  validations:
  - expression: "has(object.metadata.labels) && params.data.label in object.metadata.labels"
    messageExpression: "'missing label ' + params.data.label + ' (' + params.metadata.name + ')'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: required-labels}
spec:
  policyName: required-labels
  validationActions: [Deny]
  paramRef:
    selector: {matchLabels: {policy: required-labels}}
    parameterNotFoundAction: ACTION
"""

MUTATING = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: default-owner}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: not-a-param, expression: "object.metadata.name != params.metadata.name"}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": params.data.owner}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: default-owner}
spec:
  policyName: default-owner
  paramRef: {name: owner-defaults, namespace: kube-system, parameterNotFoundAction: Allow}
"""


def refused(served: Serve, *args: str, stdin: str) -> str:
    """kubectl's error for a command the server refuses."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def created(served: Serve, stdin: str) -> bool:
    """Whether ``kubectl create`` of ``stdin`` succeeds."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "create", "-f", "-"], input=stdin, capture_output=True, text=True, env=env,
                       timeout=60)
    return r.returncode == 0


def deployment(name: str, replicas: int, namespace: str = "default") -> str:
    return DEPLOYMENT.replace("NAMESPACE", namespace).replace("NAME", name).replace("REPLICAS", str(replicas))


def eventually(check: object, what: str) -> None:
    for _ in range(300):  # admission reads policies, bindings and params from the watch cache
        if callable(check) and check():
            return
        time.sleep(0.02)
    raise AssertionError(what)


def test_the_replicalimit_example_with_a_crd_param(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=CRD)
    kubectl(served, "wait", "--for", "condition=Established", "crd/replicalimits.rules.example.com")
    eventually(lambda: "replicalimits" in kubectl(served, "api-resources", "--api-group", "rules.example.com"),
               "replicalimits never served")
    kubectl(served, "label", "namespace", "default", "environment=test", "--overwrite")
    out = kubectl(served, "apply", "-f", "-", stdin=REPLICA_LIMIT)
    assert "replicalimit.rules.example.com/replica-limit-test.example.com created" in out
    eventually(lambda: "replicalimit-binding-test.example.com" in kubectl(
        served, "get", "validatingadmissionpolicybindings", "-o", "name"), "the binding never listed")
    message = ("ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding "
               "'replicalimit-binding-test.example.com' denied request: object.spec.replicas must be no greater "
               "than 3")
    eventually(lambda: refused(served, "apply", "-f", "-", stdin=deployment("over", 4))  # as the page shows it
               == f'The deployments "over" is invalid: : {message}\n', "a Deployment over the limit was not refused")
    assert 'deployment.apps/under created' in kubectl(served, "apply", "-f", "-", stdin=deployment("under", 3))
    kubectl(served, "create", "namespace", "prod")  # not selected by the binding: not limited
    assert 'deployment.apps/big created' in kubectl(served, "apply", "-f", "-", stdin=deployment("big", 50, "prod"))
    table = kubectl(served, "get", "validatingadmissionpolicybindings").splitlines()
    assert table[1].split()[:3] == ["replicalimit-binding-test.example.com", "replicalimit-policy.example.com",
                                    "default/replica-limit-test.example.com"]
    kubectl(served, "delete", "replicalimit", "replica-limit-test.example.com")
    missing = ("ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding "
               "'replicalimit-binding-test.example.com' denied request: failed to configure binding: no params found "
               "for policy binding with `Deny` parameterNotFoundAction")
    eventually(lambda: missing in refused(served, "apply", "-f", "-", stdin=deployment("small", 1)),
               "a missing param with Deny did not refuse")
    kubectl(served, "delete", "-f", "-", stdin=REPLICA_LIMIT.rsplit("---", 1)[0])


def test_a_configmap_param_by_label_deny_and_allow(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=LABEL_RULES.replace("ACTION", "Deny"))
    eventually(lambda: "required-labels" in kubectl(served, "get", "validatingadmissionpolicybindings", "-o", "name"),
               "the binding never listed")
    service = yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {}},
                              "spec": {"ports": [{"port": 80}]}})
    eventually(lambda: "failed to configure binding: no params found for policy binding with `Deny` "
                       "parameterNotFoundAction" in refused(served, "create", "-f", "-", stdin=service),
               "no ConfigMap selected with Deny did not refuse")
    kubectl(served, "apply", "-f", "-", stdin=LABEL_RULES.replace("ACTION", "Allow"))
    eventually(lambda: created(served, service), "no ConfigMap selected with Allow did not skip the policy")
    kubectl(served, "create", "configmap", "needs-team", "--from-literal=label=team")
    kubectl(served, "create", "configmap", "needs-tier", "--from-literal=label=tier")
    kubectl(served, "label", "configmap", "needs-team", "needs-tier", "policy=required-labels")
    kubectl(served, "create", "configmap", "unselected", "--from-literal=label=other")
    labelled = yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "api", "labels": {"team": "a"}}, "spec": {"ports": [{"port": 80}]}})
    eventually(lambda: "missing label tier (needs-tier)" in refused(served, "create", "-f", "-", stdin=labelled),
               "the second selected param was not evaluated")
    full = labelled.replace("team: a", "team: a\n    tier: b")
    assert "service/api created" in kubectl(served, "create", "-f", "-", stdin=full)
    kubectl(served, "delete", "-f", "-", stdin=LABEL_RULES.replace("ACTION", "Allow"))


def test_a_mutating_policy_reads_its_param(served: Serve) -> None:
    kubectl(served, "create", "configmap", "owner-defaults", "-n", "kube-system", "--from-literal=owner=platform")
    kubectl(served, "apply", "-f", "-", stdin=MUTATING)
    eventually(lambda: "default-owner" in kubectl(served, "get", "mutatingadmissionpolicybindings", "-o", "name"),
               "the binding never listed")

    def owned() -> bool:
        name = f"cm-{time.monotonic_ns()}"
        made = yaml.safe_load(kubectl(served, "create", "configmap", name, "-o", "yaml"))
        return bool((made["metadata"].get("labels") or {}).get("owner") == "platform")

    eventually(owned, "the param's owner never labelled a ConfigMap")
    kubectl(served, "delete", "configmap", "owner-defaults", "-n", "kube-system")

    def unowned() -> bool:  # none found, Allow: the policy is not applied
        name = f"cm-{time.monotonic_ns()}"
        made = yaml.safe_load(kubectl(served, "create", "configmap", name, "-o", "yaml"))
        return "labels" not in made["metadata"]

    eventually(unowned, "a missing param with Allow still mutated")
    kubectl(served, "delete", "-f", "-", stdin=MUTATING)

