"""Empty lists and maps sent by kubectl and the official client, read back as kube-apiserver
serves them from its protobuf storage: left out where the Go field is ``omitempty``, ``null``
where it is not (a Role's ``rules``), in the create's response as in later reads; a
``kubectl apply`` last-applied annotation keeps what was sent; a custom resource, stored as
JSON, keeps its ``[]`` (``registry/validation.py``: ``empty_collections``). Admission sees the
object decoded, not yet stored: a ValidatingAdmissionPolicy sees a Role's ``rules: []``; the
empty lists a MutatingAdmissionPolicy adds are stored as any others (``stored_form``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
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


def test_an_empty_required_list_is_refused_as_missing_never_stored_unupdatable(api: client.ApiClient) -> None:
    # Empty, these lists are nil once stored: taken, each object would be refused by its own
    # next update (``values: Required value``). Upstream's validation refuses them empty too.
    storage, core = client.StorageV1Api(api), client.CoreV1Api(api)
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zones"},
          "provisioner": "example.com/x",
          "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": []}]}]}
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rbd"},
           "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}],
                    "volumes": [{"name": "v", "rbd": {"monitors": [], "image": "i"}}]}}
    cases: tuple[tuple[Callable[[Any], Any], dict[str, Any], str], ...] = (
        (storage.create_storage_class, sc, "allowedTopologies[0].matchLabelExpressions[0].values"),
        (lambda b: core.create_namespaced_pod("default", b), pod, "spec.volumes[0].rbd.monitors"))
    for create, body, cause in cases:
        with pytest.raises(client.ApiException) as refused:
            create(body)
        status = json.loads(refused.value.body)
        assert refused.value.status == 422 and status["reason"] == "Invalid", refused.value.body
        assert status["details"]["causes"] == [
            {"reason": "FieldValueRequired", "message": "Required value", "field": cause}]


def test_an_empty_list_upstream_takes_is_stored_so_that_it_can_be_replaced(served: Serve) -> None:
    # A LimitRange's ``limits`` and a pod failure policy's ``rules``: upstream's validation only
    # walks them, so none or an empty one is valid, and the stored null must pass again.
    limits: dict[str, Any] = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "none"},
                              "spec": {"limits": []}}
    job: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "nothing-fails"},
           "spec": {"suspend": True, "podFailurePolicy": {"rules": []}, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    # A StatefulSet's template: upstream validates its labels and annotations only
    # (ValidatePodTemplateSpecForStatefulSet), so no containers is taken; its pods are refused.
    sts: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "hollow"},
                           "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "h"}},
                                    "template": {"metadata": {"labels": {"app": "h"}}, "spec": {"containers": []}}}}
    # nor its node affinity: a required node selector without terms is taken (a Pod's is refused)
    terms: dict[str, Any] = json.loads(json.dumps(sts))
    terms["metadata"]["name"] = "anywhere"
    terms["spec"]["template"]["spec"] = {"containers": [{"name": "c", "image": "busybox:1.36"}], "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}
    cases: tuple[tuple[dict[str, Any], str, Callable[[Any], Any], Any], ...] = (
        (limits, "limitrange", lambda o: o["spec"], {"limits": None}),
        (job, "job", lambda o: o["spec"]["podFailurePolicy"], {"rules": None}),
        (sts, "statefulset", lambda o: o["spec"]["template"]["spec"]["containers"], None),
        (terms, "statefulset", lambda o: o["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"], {"nodeSelectorTerms": None}))
    for body, kind, read, written in cases:
        kubectl(served, "create", "-f", "-", stdin=json.dumps(body))
        stored = _get(served, kind, body["metadata"]["name"])
        assert read(stored) == written  # (no omitempty: Go writes the nil list as null)
        stored["metadata"].setdefault("labels", {})["replaced"] = "yes"
        kubectl(served, "replace", "-f", "-", stdin=json.dumps(stored))  # a PUT of what was read
        assert _get(served, kind, body["metadata"]["name"])["metadata"]["labels"]["replaced"] == "yes"
    no_spec = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "no-limits"}, "spec": {}}
    kubectl(served, "create", "-f", "-", stdin=json.dumps(no_spec))


SEES_EMPTY_RULES = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: empty-rules}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [rbac.authorization.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [roles]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: seen}}
  validations:
  - {expression: "has(object.rules) && size(object.rules) == 0", message: "rules are not []"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: empty-rules}
spec: {policyName: empty-rules, validationActions: [Deny]}
"""


def test_a_validating_policy_sees_the_empty_rules_that_are_stored_null(served: Serve, api: client.ApiClient) -> None:
    # upstream's policies see the object decoded from the request, as the unstructured converter
    # makes it: a non-nil empty slice of a field without omitempty is [] there; protobuf storage
    # makes it nil, null in the response and reads
    kubectl(served, "create", "namespace", "seen")
    kubectl(served, "apply", "-f", "-", stdin=SEES_EMPTY_RULES)
    rbac = client.RbacAuthorizationV1Api(api)
    rule = client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])
    deadline = time.monotonic() + 10
    refused: client.ApiException | None = None
    for attempt in range(1000):  # the policy reaches admission through the watch caches
        try:
            rbac.create_namespaced_role("seen", client.V1Role(metadata=client.V1ObjectMeta(name=f"probe{attempt}"),
                                                              rules=[rule]))
        except client.ApiException as e:
            refused = e
            break
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(0.05)
    assert refused is not None and refused.status == 422 and "rules are not []" in refused.body, refused
    response: Any = rbac.create_namespaced_role("seen", client.V1Role(metadata=client.V1ObjectMeta(name="empty"),
                                                                      rules=[]), _preload_content=False)
    assert json.loads(response.data)["rules"] is None  # admitted on [], answered as stored
    response = rbac.read_namespaced_role("empty", "seen", _preload_content=False)
    assert json.loads(response.data)["rules"] is None
    kubectl(served, "delete", "-f", "-", stdin=SEES_EMPTY_RULES)


ADDS_EMPTY_LISTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: empty-lists}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: mutated}}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"mutated": "yes"}},
         JSONPatch{op: "add", path: "/metadata/labels", value: {}},
         JSONPatch{op: "add", path: "/spec/imagePullSecrets", value: []},
         JSONPatch{op: "add", path: "/spec/containers/0/args", value: []},
         JSONPatch{op: "add", path: "/spec/volumes", value: [{"name": "p", "projected": {"sources": []}}]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: empty-lists}
spec: {policyName: empty-lists}
"""


def test_the_empty_lists_a_mutating_policy_adds_are_stored_as_upstream_stores_them(served: Serve) -> None:
    # upstream decodes the patched object into the Go type and stores it as protobuf: the empty
    # omitempty lists and maps are left out, a projected volume's sources (no omitempty) null
    kubectl(served, "create", "namespace", "mutated")
    kubectl(served, "apply", "-f", "-", stdin=ADDS_EMPTY_LISTS)
    deadline = time.monotonic() + 10
    for attempt in range(1000):  # the binding reaches admission through the watch caches
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{attempt}", "namespace": "mutated"},
               "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], "automountServiceAccountToken": False}}
        created = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(pod)))
        if (created["metadata"].get("annotations") or {}).get("mutated") == "yes":
            break
        assert time.monotonic() < deadline, "the policy was never applied"
        time.sleep(0.05)
    for pod in (created, _get(served, "pod", created["metadata"]["name"], "-n", "mutated")):
        assert "labels" not in pod["metadata"]
        assert "imagePullSecrets" not in pod["spec"] and "args" not in pod["spec"]["containers"][0]
        [volume] = pod["spec"]["volumes"]
        assert volume["projected"]["sources"] is None, volume
    kubectl(served, "delete", "-f", "-", stdin=ADDS_EMPTY_LISTS)
