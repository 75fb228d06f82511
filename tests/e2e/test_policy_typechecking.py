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
