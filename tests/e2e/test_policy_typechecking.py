"""A ValidatingAdmissionPolicy's expressions type-checked against the kinds it matches, over
a socket with real kubectl: the warnings land in ``status.typeChecking`` as upstream's type
checking controller writes them, and the policy is not refused."""

from __future__ import annotations

import yaml

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve

POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas-limit}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicaz <= 5"
  - expression: "object.spec.replicas <= 5 && object.metadata.labels.all(k, k != '')"
    messageExpression: "'at most 5, not ' + object.spec.replicas"
"""


def test_kubectl_sees_type_warnings_in_a_policys_status(served: Serve) -> None:
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/replicas-limit created" in kubectl(
        served, "apply", "-f", "-", stdin=POLICY)
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "replicas-limit", "-o", "yaml"))
    assert got["status"]["observedGeneration"] == got["metadata"]["generation"] == 1
    assert got["status"]["typeChecking"]["expressionWarnings"] == [
        {"fieldRef": "spec.validations[0].expression",
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n"
                    " | object.spec.replicaz <= 5\n | ...........^\n"},
        {"fieldRef": "spec.validations[1].messageExpression",
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:19: found no matching overload for '_+_' "
                    "applied to '(string, int)'\n | 'at most 5, not ' + object.spec.replicas\n"
                    " | ..................^\n"}]
    fixed = POLICY.replace("replicaz", "replicas").replace("+ object.spec.replicas", "+ string(object.spec.replicas)")
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=fixed)
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "replicas-limit", "-o", "yaml"))
    assert got["status"] == {"observedGeneration": 2, "typeChecking": {}}


def test_kubectl_sees_undeclared_references_refused(served: Serve) -> None:
    """Unlike type errors against the matched kinds, a name the policy's environment does not
    declare fails upstream's compile at the write: ``params`` without a ``paramKind``, a
    function of no Kubernetes CEL library; a 422 in cel-go's words."""
    import subprocess

    from tests.e2e.test_kubectl import KUBECTL

    bad = POLICY.replace("object.spec.replicaz <= 5", "object.spec.replicas <= params.max") \
        .replace("k != ''", "isBlank(k)").replace("name: replicas-limit", "name: undeclared")
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}, timeout=60)
    assert r.returncode != 0
    assert 'The ValidatingAdmissionPolicy "undeclared" is invalid: \n' in r.stderr
    assert ('* spec.validations[0].expression: Invalid value: "object.spec.replicas <= params.max": compilation '
            "failed: ERROR: <input>:1:25: undeclared reference to 'params' (in container '')\n"
            " | object.spec.replicas <= params.max\n | ........................^\n") in r.stderr
    assert ("compilation failed: ERROR: <input>:1:67: undeclared reference to 'isBlank' (in container '')") \
        in r.stderr
    with_params = bad.replace("validations:", "paramKind: {apiVersion: v1, kind: ConfigMap}\n  validations:") \
        .replace("isBlank(k)", "k != ''")
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/undeclared created" in kubectl(
        served, "apply", "-f", "-", stdin=with_params)


DEMO = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: demo-policy.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - {expression: "object.spec.replicas <= 5"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: demo-binding-test.example.com}
spec:
  policyName: demo-policy.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {environment: test}
"""


def test_kubectl_applies_a_policy_and_binding_defaulted_and_enforced(served: Serve) -> None:
    """kubernetes.io's first example applied as is: upstream's defaults stored (a second apply
    changes nothing), the binding enforced in its namespaces, an invalid binding refused with
    upstream's causes as kubectl prints them."""
    import subprocess
    import time

    from tests.e2e.test_kubectl import KUBECTL

    out = kubectl(served, "apply", "-f", "-", stdin=DEMO)
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/demo-policy.example.com created" in out
    assert "validatingadmissionpolicybinding.admissionregistration.k8s.io/demo-binding-test.example.com created" \
        in out
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "demo-policy.example.com", "-o", "yaml"))
    assert got["spec"]["failurePolicy"] == "Fail"
    assert got["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert got["spec"]["matchConstraints"]["resourceRules"][0]["scope"] == "*"
    bound = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicybinding",
                                   "demo-binding-test.example.com", "-o", "yaml"))
    assert bound["spec"]["matchResources"] == {"matchPolicy": "Equivalent", "objectSelector": {},
                                               "namespaceSelector": {"matchLabels": {"environment": "test"}}}
    again = kubectl(served, "apply", "-f", "-", stdin=DEMO)
    # the binding's defaults sit in maps the merge leaves alone; the policy's rules are an atomic
    # list whose items got a scope, so kubectl sends them again, as to kube-apiserver: a no-op
    assert "demo-binding-test.example.com unchanged" in again and "demo-policy.example.com configured" in again
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "demo-policy.example.com", "-o", "yaml"))
    assert got["metadata"]["generation"] == 1 and got["status"]["observedGeneration"] == 1
    kubectl(served, "create", "namespace", "demo-test")
    kubectl(served, "label", "namespace", "demo-test", "environment=test")
    env = {"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state)}
    assert KUBECTL
    for _ in range(200):  # admission reads the watch cache
        r = subprocess.run([KUBECTL, "create", "deployment", "big", "-n", "demo-test", "--image=nginx",
                            "--replicas=6"], capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0:
            break
        kubectl(served, "delete", "deployment", "big", "-n", "demo-test")
        time.sleep(0.05)
    assert r.stderr == "error: failed to create deployment: deployments.apps \"big\" is forbidden: " \
        "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' " \
        "denied request: failed expression: object.spec.replicas <= 5\n"
    kubectl(served, "create", "deployment", "big", "-n", "default", "--image=nginx", "--replicas=6")
    bad = DEMO.split("---")[1].replace("[Deny]", "[Deny, Warn]").replace("demo-binding-test", "both")
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0
    assert 'The ValidatingAdmissionPolicyBinding "both.example.com" is invalid: spec.validationActions: ' \
           'Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn"}: must not contain both Deny ' \
           "and Warn" in r.stderr


LIMITS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: limits.example.com}
spec:
  group: example.com
  names: {kind: Limit, plural: limits, singular: limit, listKind: LimitList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              containers:
                type: array
                items: {type: object, properties: {name: {type: string}}}
"""

PARAMS_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME}
spec:
  paramKind: {apiVersion: PARAMS, kind: KIND}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [limits]}
  validations:
  - expression: "object.spec.replicas <= params.spec.replicas + 'x'"
  - expression: "params.metadata.labels.all(k, k != '') && params.kind != 1"
  - expression: "object.spec.containers.name == 'a'"
"""


def test_params_are_type_checked_against_the_param_kind_and_crds_are_checked(served: Serve) -> None:
    """Upstream's type checker types ``params`` by the ``paramKind``'s schema (a built-in kind's
    definition, a CRD's published schema: ObjectMeta for ``metadata``) for each matched kind,
    custom resources' kinds among them; the warnings are upstream's, the policy is stored."""
    kubectl(served, "apply", "-f", "-", stdin=LIMITS)
    kubectl(served, "wait", "--for", "condition=established", "crd/limits.example.com", "--timeout=30s")
    crd = PARAMS_POLICY.replace("NAME", "crd-params").replace("PARAMS", "example.com/v1").replace("KIND", "Limit")
    assert "crd-params created" in kubectl(served, "apply", "-f", "-", stdin=crd)
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "crd-params", "-o", "yaml"))
    overload = ("ERROR: <input>:1:46: found no matching overload for '_+_' applied to '(int, string)'\n"
                " | object.spec.replicas <= params.spec.replicas + 'x'\n"
                " | .............................................^\n")
    assert got["status"]["typeChecking"]["expressionWarnings"] == [
        {"fieldRef": "spec.validations[0].expression",
         "warning": f"apps/v1, Kind=Deployment: {overload}\nexample.com/v1, Kind=Limit: {overload}"},
        {"fieldRef": "spec.validations[1].expression",
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:55: found no matching overload for '_!=_' applied "
                    "to '(string, int)'\n | params.metadata.labels.all(k, k != '') && params.kind != 1\n"
                    " | ......................................................^\n\n"
                    "example.com/v1, Kind=Limit: ERROR: <input>:1:55: found no matching overload for '_!=_' applied "
                    "to '(string, int)'\n | params.metadata.labels.all(k, k != '') && params.kind != 1\n"
                    " | ......................................................^\n"},
        {"fieldRef": "spec.validations[2].expression",  # a list's field: refused for a kind with a schema
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'containers'\n"
                    " | object.spec.containers.name == 'a'\n | ...........^\n\n"
                    "example.com/v1, Kind=Limit: ERROR: <input>:1:23: type 'list(Limit.spec.containers.@idx)' does "
                    "not support field selection\n | object.spec.containers.name == 'a'\n"
                    " | ......................^\n"}]
    config_map = PARAMS_POLICY.replace("NAME", "cm-params").replace("PARAMS", "v1").replace("KIND", "ConfigMap")
    assert "cm-params created" in kubectl(served, "apply", "-f", "-", stdin=config_map)
    got = yaml.safe_load(kubectl(served, "get", "validatingadmissionpolicy", "cm-params", "-o", "yaml"))
    assert [w["fieldRef"] for w in got["status"]["typeChecking"]["expressionWarnings"]] == [
        "spec.validations[0].expression", "spec.validations[1].expression", "spec.validations[2].expression"]
    first = got["status"]["typeChecking"]["expressionWarnings"][0]["warning"]
    assert first.startswith("apps/v1, Kind=Deployment: ERROR: <input>:1:31: undefined field 'spec'\n"
                            " | object.spec.replicas <= params.spec.replicas + 'x'\n"
                            " | ..............................^\n\n")  # a ConfigMap has no spec
