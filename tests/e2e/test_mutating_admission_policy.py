"""MutatingAdmissionPolicy over a socket with the real kubectl and the official Python client's
typed API: a policy and its binding applied from YAML mutate the pods and ConfigMaps created
after; an invalid policy is refused with upstream's 422; ``kubectl get`` prints upstream's
columns."""

from __future__ import annotations

import os
import subprocess
import time

import yaml
from kubernetes import client

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team-label}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods, configmaps]}
  matchConditions:
  - {name: opted-in, expression: "has(object.metadata.labels) && 'mutate-me' in object.metadata.labels"}
  variables:
  - {name: team, expression: "object.metadata.namespace == 'default' ? 'core' : object.metadata.namespace"}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"team": variables.team}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        object.kind == "Pod" ?
        [JSONPatch{op: "add", path: "/spec/containers/0/env", value: [{"name": "TEAM", "value": variables.team}]}] :
        [JSONPatch{op: "add", path: "/data", value: {"team": variables.team}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team-label}
spec:
  policyName: team-label
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: labelled, labels: {mutate-me: "yes"}}
spec:
  containers: [{name: web, image: "nginx:1.27"}]
"""


def _listed(served: Serve, kind: str, name: str) -> None:
    for _ in range(200):  # admission reads the watch cache
        if name in kubectl(served, "get", kind, "-o", "name"):
            return
        time.sleep(0.02)
    raise AssertionError(f"{kind} {name} never listed")


def test_kubectl_applies_a_policy_whose_mutations_apply(served: Serve) -> None:
    out = kubectl(served, "apply", "-f", "-", stdin=POLICY)
    assert "mutatingadmissionpolicy.admissionregistration.k8s.io/team-label created" in out
    assert "mutatingadmissionpolicybinding.admissionregistration.k8s.io/team-label created" in out
    _listed(served, "mutatingadmissionpolicybindings", "team-label")
    kubectl(served, "apply", "-f", "-", stdin=POD)
    pod = yaml.safe_load(kubectl(served, "get", "pod", "labelled", "-o", "yaml"))
    assert pod["metadata"]["labels"] == {"mutate-me": "yes", "team": "core"}
    assert pod["spec"]["containers"][0]["env"] == [{"name": "TEAM", "value": "core"}]
    kubectl(served, "create", "namespace", "shop")
    kubectl(served, "create", "configmap", "cfg", "-n", "shop")  # no label: the match condition is false
    assert "data" not in yaml.safe_load(kubectl(served, "get", "configmap", "cfg", "-n", "shop", "-o", "yaml"))
    made = yaml.safe_load(kubectl(served, "create", "-f", "-", "-o", "yaml", stdin=yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg2", "namespace": "shop",
                                                              "labels": {"mutate-me": "1"}}})))
    assert made["data"] == {"team": "shop"} and made["metadata"]["labels"]["team"] == "shop"
    table = kubectl(served, "get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings").splitlines()
    assert table[0].split() == ["NAME", "MUTATIONS", "PARAMKIND", "AGE"]
    assert table[1].split()[:3] == ["mutatingadmissionpolicy.admissionregistration.k8s.io/team-label", "2",
                                    "<unset>"]
    assert [line.split()[:3] for line in table[3:5]] == [
        ["NAME", "POLICYNAME", "PARAMREF"],
        ["mutatingadmissionpolicybinding.admissionregistration.k8s.io/team-label", "team-label", "<unset>"]]
    explained = kubectl(served, "explain", "mutatingadmissionpolicy.spec.mutations.jsonPatch")
    assert "FIELD: jsonPatch <JSONPatch>" in explained and "expression\t<string>" in explained
    kubectl(served, "delete", "-f", "-", stdin=POLICY)


def test_kubectl_sees_an_invalid_policy_refused(served: Serve) -> None:
    bad = POLICY.split("---")[0].replace("operations: [CREATE]", "operations: [DELETE]") \
        .replace('{"team": variables.team}}}', '{"team": variables.team}}').replace("name: team-label", "name: bad")
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0
    assert 'The MutatingAdmissionPolicy "bad" is invalid' in r.stderr
    assert '* spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: ' \
           '"*", "CONNECT", "CREATE", "UPDATE"' in r.stderr
    assert "* spec.mutations[0].applyConfiguration.expression: Invalid value: " in r.stderr
    assert "compilation failed: ERROR: <input>:2:1: Syntax error: mismatched input" in r.stderr  # (after its newline)


def test_the_python_clients_typed_api(api: client.ApiClient) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    rule = client.V1NamedRuleWithOperations(api_groups=[""], api_versions=["v1"], operations=["CREATE"],
                                            resources=["configmaps"])
    made = admission.create_mutating_admission_policy(client.V1MutatingAdmissionPolicy(
        metadata=client.V1ObjectMeta(name="typed"), spec=client.V1MutatingAdmissionPolicySpec(
            match_constraints=client.V1MatchResources(
                resource_rules=[rule], object_selector=client.V1LabelSelector(match_labels={"typed": "yes"})),
            reinvocation_policy="Never", mutations=[client.V1Mutation(
                patch_type="JSONPatch", json_patch=client.V1JSONPatch(
                    expression='[JSONPatch{op: "add", path: "/data", value: {"by": "typed"}}]'))])))
    assert made.spec.failure_policy == "Fail" and made.spec.match_constraints.match_policy == "Equivalent"
    admission.create_mutating_admission_policy_binding(client.V1MutatingAdmissionPolicyBinding(
        metadata=client.V1ObjectMeta(name="typed"), spec=client.V1MutatingAdmissionPolicyBindingSpec(
            policy_name="typed")))
    assert [p.metadata.name for p in admission.list_mutating_admission_policy().items] == ["typed"]
    assert admission.read_mutating_admission_policy_binding("typed").spec.policy_name == "typed"
    core = client.CoreV1Api(api)
    for _ in range(200):  # the binding reaches admission through the watch cache
        cm = core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(
            generate_name="typed-", labels={"typed": "yes"})))
        if cm.data == {"by": "typed"}:
            break
        time.sleep(0.02)
    assert cm.data == {"by": "typed"}
    patched = admission.patch_mutating_admission_policy("typed", {"spec": {"failurePolicy": "Ignore"}})
    assert patched.spec.failure_policy == "Ignore" and patched.metadata.generation == 2
    admission.delete_mutating_admission_policy_binding("typed")
    admission.delete_mutating_admission_policy("typed")


SEQUENCED = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: sequenced}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: sequenced}}
  matchConditions:
  - {name: errs, expression: "object.data.missing == 'x'"}
  - {name: opted-in, expression: "'count' in object.data"}
  variables:
  - {name: keys, expression: "string(size(object.data))"}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/data/added", value: variables.keys}]'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "replace", path: "/data/count", value: variables.keys}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: sequenced}
spec: {policyName: sequenced}
"""


def test_variables_follow_the_mutations_and_a_false_condition_wins_over_errors(served: Serve) -> None:
    """As upstream's: each mutation's variables are of the object the mutation before made (the
    second sees the key the first added); a match condition that is false leaves the policy out
    whatever errors the others had, and errors alone refuse (failurePolicy Fail)."""
    kubectl(served, "create", "namespace", "sequenced")
    kubectl(served, "apply", "-f", "-", stdin=SEQUENCED)
    _listed(served, "mutatingadmissionpolicybindings", "sequenced")
    plain = yaml.safe_load(kubectl(served, "create", "configmap", "plain", "-n", "sequenced", "--from-literal=a=1",
                                   "-o", "yaml"))
    assert plain["data"] == {"a": "1"}  # 'count' absent: false, the other condition's error aside
    made = yaml.safe_load(kubectl(served, "create", "configmap", "counted", "-n", "sequenced",
                                  "--from-literal=count=0", "--from-literal=missing=x", "-o", "yaml"))
    assert made["data"] == {"count": "3", "missing": "x", "added": "2"}
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "create", "configmap", "erring", "-n", "sequenced", "--from-literal=count=0"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert ("failed to create configmap: policy 'sequenced' with binding 'sequenced' denied request: "
            "expression 'object.data.missing == 'x'' resulted in error: no such key: missing") in r.stderr, r.stderr
