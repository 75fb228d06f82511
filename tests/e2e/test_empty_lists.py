"""Empty lists and maps sent by kubectl and the official client, read back as kube-apiserver
serves them from its protobuf storage: left out where the Go field is ``omitempty``, ``null``
where it is not (a Role's ``rules``), in the create's response as in later reads; a
``kubectl apply`` last-applied annotation keeps what was sent; a custom resource, stored as
JSON, keeps its ``[]`` (``registry/validation.py``: ``empty_collections``)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty", "labels": {}, "annotations": {}},
       "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "args": [], "command": [], "env": [],
                                "ports": [], "envFrom": [], "volumeMounts": []}],
                "tolerations": [], "volumes": [], "nodeSelector": {}, "imagePullSecrets": [],
                "automountServiceAccountToken": False}}

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {}}
spec:
  selector: {matchLabels: {app: web}, matchExpressions: []}
  template:
    metadata: {labels: {app: web}, annotations: {}}
    spec:
      containers:
      - {name: c, image: "nginx:1.27", args: [], env: [], ports: [], resources: {limits: {}}}
      tolerations: []
      volumes: []
"""


def _get(served: Serve, *args: str) -> Any:
    return json.loads(kubectl(served, "get", *args, "-o", "json"))


def test_kubectl_creates_a_pod_whose_empty_lists_read_back_left_out(served: Serve) -> None:
    created = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(POD)))
    for pod in (created, _get(served, "pod", "empty")):
        assert "labels" not in pod["metadata"] and "annotations" not in pod["metadata"]
        [c] = pod["spec"]["containers"]
        assert not {"args", "command", "env", "ports", "envFrom", "volumeMounts"} & set(c), c
        assert c["resources"] == {}  # a struct, kept empty
        assert not {"volumes", "nodeSelector", "imagePullSecrets"} & set(pod["spec"])
        # the defaulted tolerations (DefaultTolerationSeconds) are the only ones
        assert [t["key"] for t in pod["spec"]["tolerations"]] == ["node.kubernetes.io/not-ready",
                                                                 "node.kubernetes.io/unreachable"]


def test_kubectl_apply_stores_a_template_without_its_empty_lists(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=DEPLOYMENT)
    deploy = _get(served, "deployment", "web")
    assert "labels" not in deploy["metadata"]
    assert deploy["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    template = deploy["spec"]["template"]
    assert template["metadata"] == {"labels": {"app": "web"}}
    assert template["spec"]["containers"][0]["resources"] == {}
    assert not {"args", "env", "ports"} & set(template["spec"]["containers"][0])
    assert not {"tolerations", "volumes"} & set(template["spec"])
    # the annotation is a string: what was applied, empty lists and all
    applied = json.loads(deploy["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["spec"]["template"]["spec"]["tolerations"] == []
    assert applied["spec"]["template"]["spec"]["containers"][0]["args"] == []
    # applied again: kubectl's three-way patch names the lists the live object lacks, so it
    # says "configured" each time, as against kube-apiserver (kubernetes/kubernetes#114777);
    # the patch changes nothing, and nothing is written
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=DEPLOYMENT)
    again = _get(served, "deployment", "web")
    assert again["metadata"]["resourceVersion"] == deploy["metadata"]["resourceVersion"]
    assert again["spec"] == deploy["spec"]


def test_the_official_client_reads_null_where_go_writes_no_omitempty(api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    created = rbac.create_namespaced_role("default", client.V1Role(metadata=client.V1ObjectMeta(name="none"),
                                                                    rules=[]))
    assert created.rules is None
    response: Any = rbac.read_namespaced_role("none", "default", _preload_content=False)  # (the raw answer)
    assert json.loads(response.data)["rules"] is None  # "rules": null on the wire, not left out
    core = client.CoreV1Api(api)
    cm = core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="cm", labels={}), data={}))
    assert cm.metadata.labels is None and cm.data is None
    response = core.read_namespaced_config_map("cm", "default", _preload_content=False)
    raw = json.loads(response.data)
    assert "data" not in raw and "labels" not in raw["metadata"]


def test_a_custom_resource_keeps_its_empty_lists(served: Serve) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gizmos.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "args": {"type": "array", "items": {"type": "string"}}}}}}}}]}}
    kubectl(served, "create", "-f", "-", stdin=json.dumps(crd))
    kubectl(served, "wait", "--for=condition=Established", "crd/gizmos.example.com", "--timeout=30s")
    gizmo = {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"args": []}}
    created = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(gizmo)))
    assert created["spec"] == {"args": []}
    assert _get(served, "gizmo", "g")["spec"] == {"args": []}
