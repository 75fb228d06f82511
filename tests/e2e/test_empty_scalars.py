"""Zero scalars of the built-in kinds over a socket, as kube-apiserver serves them: a non-pointer
``omitempty`` field holding its zero value (``hostNetwork: false``, ``hostname: ""``, a pod
condition's ``reason: ""``, a Deployment's ``minReadySeconds: 0``) is no value once decoded into
the Go struct, left out of the write's response and of every read, whatever the write (create,
update, each patch type, a status write, a server-side apply); a pointer's zero (``replicas: 0``,
``automountServiceAccountToken: false``, ``terminationGracePeriodSeconds: 0``) is kept
(``registry/validation.py``: ``Shape.omit_zero``). Admission sees the request so decoded, and
the zeros a mutating policy adds are left out too."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve

PODS = resource_path("", "v1", "pods", "default")
SERVICES = resource_path("", "v1", "services", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
ZERO_POD_SPEC = {"hostname": "", "subdomain": "", "priorityClassName": "", "hostNetwork": False, "hostPID": False,
                 "nodeName": ""}
ZERO_CONTAINER = {"workingDir": "", "tty": False, "stdin": False}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i", **ZERO_CONTAINER}], **ZERO_POD_SPEC,
                     "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0}}


def deployment(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"replicas": 0, "minReadySeconds": 0, "paused": False,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i", "tty": False}],
                                           "hostNetwork": False}}}}


def assert_pod_without_zeros(p: dict[str, Any]) -> None:
    spec = p["spec"]
    assert not set(ZERO_POD_SPEC) & set(spec), spec
    assert not set(ZERO_CONTAINER) & set(spec["containers"][0]), spec["containers"][0]
    # pointers: their zero is a value
    assert spec["automountServiceAccountToken"] is False and spec["terminationGracePeriodSeconds"] == 0


async def test_a_create_and_its_reads_leave_zero_scalars_out(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        created = await c.create(PODS, pod("p"))
        assert_pod_without_zeros(created)
        assert_pod_without_zeros(await c.get(f"{PODS}/p"))
        assert_pod_without_zeros((await c.list(PODS))["items"][0])
        service = await c.create(SERVICES, {"metadata": {"name": "s"}, "spec": {
            "loadBalancerIP": "", "externalName": "", "publishNotReadyAddresses": False, "ports": [{"port": 80}]}})
        for s in (service, await c.get(f"{SERVICES}/s")):
            assert not {"loadBalancerIP", "externalName", "publishNotReadyAddresses"} & set(s["spec"]), s["spec"]


async def test_status_writes_leave_a_conditions_empty_reason_and_message_out(served: Serve) -> None:
    """What KWOK's stage files write: ``reason: ""``, ``message: ""`` (the Go client reads them
    back the same either way; kubectl's and clients' JSON does not)."""
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        await c.create(PODS, pod("st"))
        condition = {"type": "Ready", "status": "False", "reason": "", "message": ""}
        for patch_type in ("merge", "strategic"):
            patched = await c.patch(f"{PODS}/st/status", {"status": {
                "conditions": [condition], "message": "", "reason": "", "hostIP": "", "phase": "Pending"}}, patch_type)
            for p in (patched, await c.get(f"{PODS}/st")):
                [ready] = p["status"]["conditions"]
                assert ready == {"type": "Ready", "status": "False", "lastProbeTime": None,
                                 "lastTransitionTime": None}, ready
                assert not {"message", "reason", "hostIP"} & set(p["status"])
        current = await c.get(f"{PODS}/st")
        current["status"]["conditions"][0].update(reason="", message="")
        updated = await c.update(f"{PODS}/st/status", current)
        assert not {"reason", "message"} & set(updated["status"]["conditions"][0])


async def test_patches_of_every_type_and_a_noop_update(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        created = await c.create(DEPLOYMENTS, deployment("d"))
        spec = created["spec"]
        assert spec["replicas"] == 0  # a pointer: kept
        assert not {"minReadySeconds", "paused"} & set(spec)
        assert "hostNetwork" not in spec["template"]["spec"]
        assert "tty" not in spec["template"]["spec"]["containers"][0]
        # an update sending what upstream drops is the object stored: no write
        again = await c.update(f"{DEPLOYMENTS}/d", {**created, "spec": {
            **created["spec"], "minReadySeconds": 0, "paused": False}})
        assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert not {"minReadySeconds", "paused"} & set(again["spec"])
        merged = await c.patch(f"{DEPLOYMENTS}/d", {"spec": {"paused": True, "minReadySeconds": 5}}, "merge")
        assert merged["spec"]["paused"] is True and merged["spec"]["minReadySeconds"] == 5
        merged = await c.patch(f"{DEPLOYMENTS}/d", {"spec": {"paused": False}}, "merge")
        assert "paused" not in merged["spec"] and merged["spec"]["minReadySeconds"] == 5
        strategic = await c.patch(f"{DEPLOYMENTS}/d", {"spec": {"minReadySeconds": 0, "template": {"spec": {
            "containers": [{"name": "c", "workingDir": ""}]}}}}, "strategic")
        assert "minReadySeconds" not in strategic["spec"]
        assert "workingDir" not in strategic["spec"]["template"]["spec"]["containers"][0]
        json_patched = await c.patch(f"{DEPLOYMENTS}/d", [
            {"op": "add", "path": "/spec/template/spec/hostname", "value": ""},
            {"op": "add", "path": "/spec/template/spec/containers/0/stdin", "value": False}], "json")
        assert "hostname" not in json_patched["spec"]["template"]["spec"]
        assert "stdin" not in json_patched["spec"]["template"]["spec"]["containers"][0]
        # adding what decodes to nothing is no change: no write, no new generation
        assert json_patched["metadata"]["resourceVersion"] == strategic["metadata"]["resourceVersion"]
        assert json_patched["metadata"]["generation"] == strategic["metadata"]["generation"]
        got = await c.get(f"{DEPLOYMENTS}/d")
        assert got["spec"] == json_patched["spec"]


async def test_a_server_side_apply_owns_the_zero_scalars_it_sent(served: Serve) -> None:
    """As with an empty list, upstream's field manager works on the applied configuration: the
    manager owns ``paused`` though the object has none; applying it again changes nothing."""
    config = (b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n"
              b"spec:\n  replicas: 0\n  paused: false\n  minReadySeconds: 0\n"
              b"  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n"
              b"    spec: {containers: [{name: c, image: i, tty: false}], hostNetwork: false}\n")
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        applied = await c.request("PATCH", f"{DEPLOYMENTS}/a", config, "application/apply-patch+yaml",
                                  fieldManager="me")
        assert applied["spec"]["replicas"] == 0
        assert not {"paused", "minReadySeconds"} & set(applied["spec"])
        assert "hostNetwork" not in applied["spec"]["template"]["spec"]
        assert "tty" not in applied["spec"]["template"]["spec"]["containers"][0]
        [entry] = applied["metadata"]["managedFields"]
        spec = entry["fieldsV1"]["f:spec"]
        assert {"f:replicas", "f:paused", "f:minReadySeconds"} <= set(spec)
        assert "f:hostNetwork" in spec["f:template"]["f:spec"]
        assert "f:tty" in spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
        again = await c.request("PATCH", f"{DEPLOYMENTS}/a", config, "application/apply-patch+yaml",
                                fieldManager="me")
        assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]
        assert again["spec"] == (await c.get(f"{DEPLOYMENTS}/a"))["spec"]


def test_kubectl_get_yaml_shows_no_zero_scalars(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: k}\n"
        "spec:\n  hostname: ''\n  subdomain: ''\n  hostNetwork: false\n  automountServiceAccountToken: false\n"
        "  containers: [{name: c, image: i, workingDir: '', tty: false}]\n"))
    out = kubectl(served, "get", "pod", "k", "-o", "yaml")
    for key in ("hostname:", "subdomain:", "hostNetwork:", "workingDir:", "tty:"):
        assert key not in out, out
    assert "automountServiceAccountToken: false" in out


ZERO_POLICIES = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-hostname}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: zeros}}
  validations:
  - {expression: "!has(object.spec.hostname)", message: "a hostname is there"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-hostname}
spec: {policyName: no-hostname, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-zeros}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: zeros}}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"mutated": "yes"}},
         JSONPatch{op: "add", path: "/spec/hostNetwork", value: false},
         JSONPatch{op: "add", path: "/spec/containers/0/workingDir", value: ""}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: add-zeros}
spec: {policyName: add-zeros}
"""


async def test_admission_sees_the_decoded_object_and_a_mutations_zeros_are_left_out(served: Serve) -> None:
    """Upstream's policies see the request decoded into the Go struct, as the unstructured
    converter writes it (``omitempty`` honoured): ``hostname: ""`` is not there; the zeros a
    mutation adds are decoded away before the object is stored."""
    kubectl(served, "create", "namespace", "zeros")
    kubectl(served, "apply", "-f", "-", stdin=ZERO_POLICIES)
    pods = resource_path("", "v1", "pods", "zeros")

    def pod_named(name: str, hostname: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"hostname": hostname, "containers": [{"name": "c", "image": "i"}]}}

    async with Client.from_kubeconfig(served.kubeconfig) as c:
        deadline = time.monotonic() + 10
        for attempt in range(1000):  # the policies reach admission through the watch caches
            refused: ApiError | None = None
            try:
                await c.create(pods, pod_named(f"probe{attempt}", "named"))
            except ApiError as e:
                refused = e
            if refused is not None:
                assert refused.code == 422 and "a hostname is there" in refused.message, refused
                # admitted: the policy saw no hostname
                created = await c.create(pods, pod_named(f"made{attempt}", ""))
                if (created["metadata"].get("annotations") or {}).get("mutated") == "yes":
                    break
            assert time.monotonic() < deadline, "the policies were never applied"
            await asyncio.sleep(0.05)
        for p in (created, await c.get(f"{pods}/{created['metadata']['name']}")):
            assert "hostname" not in p["spec"] and "hostNetwork" not in p["spec"], p["spec"]
            assert "workingDir" not in p["spec"]["containers"][0]
    kubectl(served, "delete", "-f", "-", stdin=ZERO_POLICIES)


async def test_a_crds_zero_scalars_are_left_out_and_its_custom_resources_keep_theirs(served: Serve) -> None:
    """A CRD is a built-in kind (apiextensions' Go types: ``preserveUnknownFields``, a schema's
    ``nullable`` and ``description``, a column's ``priority`` are ``omitempty``); its custom
    resources, stored as JSON, keep what they were sent."""
    schema = {"type": "object", "description": "", "nullable": False, "properties": {
        "spec": {"type": "object", "properties": {"name": {"type": "string", "nullable": False},
                                                  "on": {"type": "boolean"}}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "zeros.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "preserveUnknownFields": False,
                    "names": {"plural": "zeros", "singular": "", "kind": "Zero"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "deprecated": False,
                                  "schema": {"openAPIV3Schema": schema},
                                  "additionalPrinterColumns": [{"name": "Name", "type": "string", "priority": 0,
                                                                "description": "", "jsonPath": ".spec.name"}]}]}}
    crds = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        created = await c.create(crds, crd)
        for got in (created, await c.get(f"{crds}/zeros.example.com")):
            spec = got["spec"]
            assert "preserveUnknownFields" not in spec, spec
            assert spec["names"]["singular"] == "zero"  # none: defaulted, as upstream's SetDefaults does
            [version] = spec["versions"]
            assert "deprecated" not in version
            assert version["schema"]["openAPIV3Schema"] == {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"name": {"type": "string"}, "on": {"type": "boolean"}}}}}
            assert version["additionalPrinterColumns"] == [{"name": "Name", "type": "string",
                                                            "jsonPath": ".spec.name"}]
        zeros = resource_path("example.com", "v1", "zeros", "default")
        deadline = time.monotonic() + 10
        while True:  # the CRD is served once established
            missing: ApiError | None = None
            try:
                made = await c.create(zeros, {"apiVersion": "example.com/v1", "kind": "Zero", "metadata": {"name": "z"},
                                              "spec": {"name": "", "on": False}})
                break
            except ApiError as e:
                missing = e
            assert missing.code == 404 and time.monotonic() < deadline, missing
            await asyncio.sleep(0.05)
        assert made["spec"] == {"name": "", "on": False}
        assert (await c.get(f"{zeros}/z"))["spec"] == {"name": "", "on": False}


CONFIGMAPS = resource_path("", "v1", "configmaps", "default")
META_ZEROS = {"generateName": "", "generation": 0, "selfLink": "", "uid": "", "resourceVersion": ""}


def assert_meta_without_zeros(meta: dict[str, Any]) -> None:
    assert not {"generateName", "generation", "selfLink"} & set(meta), meta
    assert meta["uid"] and meta["resourceVersion"]
    for entry in meta.get("managedFields", ()):
        assert "f:generateName" not in entry["fieldsV1"].get("f:metadata", {}), entry
        assert "subresource" not in entry or entry["subresource"], entry


async def test_object_metas_zero_scalars_are_left_out_on_every_write_path(served: Serve) -> None:
    """ObjectMeta's fields are ``omitempty`` (apimachinery's ``metav1``): ``generateName: ""``,
    ``generation: 0``, ``uid: ""``, ``resourceVersion: ""`` are no value once decoded, so none is
    stored, a write that sends them to an object without them writes nothing, and neither
    ``uid: ""`` nor ``resourceVersion: ""`` is a precondition. A pointer's zero
    (``deletionGracePeriodSeconds``, an owner reference's ``controller``) is a value."""
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1", "controller": False}
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        created = await c.create(CONFIGMAPS, {"metadata": {"name": "m", "namespace": "", **META_ZEROS,
                                                            "ownerReferences": [owner]}, "data": {"a": "b"}})
        for got in (created, await c.get(f"{CONFIGMAPS}/m")):
            assert_meta_without_zeros(got["metadata"])
            assert got["metadata"]["namespace"] == "default"
            assert got["metadata"]["ownerReferences"] == [owner]
        rv = created["metadata"]["resourceVersion"]
        namespace = await c.create(resource_path("", "v1", "namespaces"), {"metadata": {
            "name": "meta-zeros", "namespace": "", **META_ZEROS}})
        assert "namespace" not in namespace["metadata"] and "generateName" not in namespace["metadata"]
        # a PUT sending them to the object stored without them: no write, and no precondition
        again = await c.update(f"{CONFIGMAPS}/m", {**created, "metadata": {**created["metadata"], **META_ZEROS}})
        assert again["metadata"]["resourceVersion"] == rv
        assert_meta_without_zeros(again["metadata"])
        for patch, patch_type in (({"metadata": {"generateName": "", "selfLink": "", "uid": ""}}, "merge"),
                                  ({"metadata": {"generateName": "", "generation": 0}}, "strategic"),
                                  ([{"op": "add", "path": "/metadata/generateName", "value": ""}], "json")):
            patched = await c.patch(f"{CONFIGMAPS}/m", patch, patch_type)
            assert patched["metadata"]["resourceVersion"] == rv, patch
            assert_meta_without_zeros(patched["metadata"])
        # a managedFields entry's omitempty strings too (what a client sends back as it read it)
        entries = [{**e, "subresource": ""} for e in created["metadata"]["managedFields"]]
        patched = await c.patch(f"{CONFIGMAPS}/m", {"metadata": {"managedFields": entries}}, "merge")
        assert patched["metadata"]["managedFields"] == created["metadata"]["managedFields"]
        assert patched["metadata"]["resourceVersion"] == rv
        # a status write, and a Deployment's template, whose generation a PUT's 0 does not reset
        await c.create(PODS, pod("meta"))
        status = await c.patch(f"{PODS}/meta/status", {"metadata": {"generateName": "", "labels": {"x": "y"}},
                                                       "status": {"message": ""}}, "merge")
        assert status["metadata"]["labels"] == {"x": "y"} and "generateName" not in status["metadata"]
        made = await c.create(DEPLOYMENTS, {**deployment("meta"), "metadata": {"name": "meta", **META_ZEROS}})
        template = made["spec"]["template"]["metadata"]
        assert made["metadata"]["generation"] == 1
        put = await c.update(f"{DEPLOYMENTS}/meta", {**made, "metadata": {**made["metadata"], "generation": 0},
                                                     "spec": {**made["spec"], "template": {
                                                         **made["spec"]["template"], "metadata": {
                                                             **template, "name": "", "generateName": "",
                                                             "namespace": ""}}}})
        assert put["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
        assert put["metadata"]["generation"] == 1 and put["spec"]["template"]["metadata"] == template
        # a real uid or resourceVersion is still a precondition
        with pytest.raises(ApiError) as e:
            await c.update(f"{CONFIGMAPS}/m", {**created, "metadata": {**created["metadata"], "uid": "other"}})
        assert e.value.code == 409, e.value


async def test_a_server_side_apply_owns_the_generate_name_it_sent(served: Serve) -> None:
    """As with any zero scalar: the field manager types the configuration, which says
    ``generateName``; the object has none, and applying the same again writes nothing."""
    config = (b"apiVersion: v1\nkind: ConfigMap\n"
              b"metadata: {name: applied, generateName: '', generation: 0, uid: '', resourceVersion: ''}\n"
              b"data: {a: b}\n")
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        applied = await c.request("PATCH", f"{CONFIGMAPS}/applied", config, "application/apply-patch+yaml",
                                  fieldManager="me")
        assert not {"generateName", "generation", "selfLink"} & set(applied["metadata"])
        [entry] = applied["metadata"]["managedFields"]
        assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:generateName": {}}}
        again = await c.request("PATCH", f"{CONFIGMAPS}/applied", config, "application/apply-patch+yaml",
                                fieldManager="me")
        assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


def test_kubectl_get_yaml_shows_no_zero_object_meta(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kmeta, generateName: '', generation: 0, selfLink: ''}\n"
        "data: {a: b}\n"))
    out = kubectl(served, "get", "configmap", "kmeta", "-o", "yaml")
    for key in ("generateName:", "generation:", "selfLink:"):
        assert key not in out, out
    assert "name: kmeta" in out


async def test_a_custom_resources_metadata_is_decoded_as_object_meta(served: Serve) -> None:
    """Upstream decodes a custom resource's ``metadata`` into ObjectMeta and writes it back
    (apiextensions' ``GetObjectMeta``, ``SetObjectMeta``): its zero scalars and empty maps and
    lists are gone, on a create, a patch, a status write and an apply; the rest of the object,
    stored as JSON, keeps its own."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "metas.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "metas", "kind": "Meta"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                      "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
    metas = resource_path("example.com", "v1", "metas", "default")
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        await c.create(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), crd)
        deadline = time.monotonic() + 10
        while True:  # the CRD is served once established
            missing: ApiError | None = None
            try:
                made = await c.create(metas, {"apiVersion": "example.com/v1", "kind": "Meta", "metadata": {
                    "name": "m", **META_ZEROS, "labels": {}, "finalizers": []}, "spec": {"name": "", "n": 0}})
                break
            except ApiError as e:
                missing = e
            assert missing.code == 404 and time.monotonic() < deadline, missing
            await asyncio.sleep(0.05)
        rv = made["metadata"]["resourceVersion"]
        for got in (made, await c.get(f"{metas}/m")):
            assert not {"generateName", "selfLink", "labels", "finalizers"} & set(got["metadata"]), got["metadata"]
            assert got["metadata"]["generation"] == 1
            assert got["spec"] == {"name": "", "n": 0}
        patched = await c.patch(f"{metas}/m", {"metadata": {"generateName": "", "labels": {}}, "spec": {"name": ""}},
                                "merge")
        assert patched["metadata"]["resourceVersion"] == rv and "generateName" not in patched["metadata"]
        again = await c.update(f"{metas}/m", {**made, "metadata": {**made["metadata"], "generateName": "",
                                                                   "generation": 0}})
        assert again["metadata"]["resourceVersion"] == rv and again["metadata"]["generation"] == 1
        status = await c.patch(f"{metas}/m/status", {"metadata": {"generateName": ""}, "status": {"ok": False}},
                               "merge")
        assert "generateName" not in status["metadata"] and status["status"] == {"ok": False}
        config = (b"apiVersion: example.com/v1\nkind: Meta\nmetadata: {name: m, generateName: '', labels: {a: b}}\n"
                  b"spec: {name: ''}\n")
        applied = await c.request("PATCH", f"{metas}/m", config, "application/apply-patch+yaml", fieldManager="me")
        assert "generateName" not in applied["metadata"] and applied["metadata"]["labels"] == {"a": "b"}
        assert applied["spec"] == {"name": "", "n": 0}


async def test_a_reviews_empty_extra_list_is_answered_as_sent(served: Serve) -> None:
    """An empty list as a map's value is null only once stored (protobuf): a SubjectAccessReview,
    never stored, is answered with the ``[]`` Go's JSON encoder writes for the decoded slice."""
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        review = await c.create(resource_path("authorization.k8s.io", "v1", "subjectaccessreviews"), {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "u", "extra": {"k": [], "l": ["v"]},
                     "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}})
        assert review["spec"]["extra"] == {"k": [], "l": ["v"]}


MUTE_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-meta-zeros}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [mutes]}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"mutated": "yes"}},
         JSONPatch{op: "add", path: "/metadata/generateName", value: ""},
         JSONPatch{op: "add", path: "/metadata/finalizers", value: []}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: add-meta-zeros}
spec: {policyName: add-meta-zeros}
"""


async def test_a_mutations_zero_metadata_on_a_custom_resource_is_not_stored(served: Serve) -> None:
    """Upstream's storage encoding converts a custom resource to its storage version, which
    coerces its metadata through ObjectMeta: what a mutating policy adds there empty is gone."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "mutes.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "mutes", "kind": "Mute"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    mutes = resource_path("example.com", "v1", "mutes", "default")
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        await c.create(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), crd)
        kubectl(served, "apply", "-f", "-", stdin=MUTE_POLICY)
        deadline = time.monotonic() + 10
        for attempt in range(1000):  # the CRD and the policy reach admission through the watch caches
            made: dict[str, Any] | None = None
            missing: ApiError | None = None
            try:
                made = await c.create(mutes, {"apiVersion": "example.com/v1", "kind": "Mute",
                                              "metadata": {"name": f"m{attempt}"}})
            except ApiError as e:
                missing = e
            assert missing is None or missing.code == 404, missing
            if made is not None and (made["metadata"].get("annotations") or {}).get("mutated") == "yes":
                break
            assert time.monotonic() < deadline, "the policy was never applied"
            await asyncio.sleep(0.05)
        assert made is not None
        for got in (made, await c.get(f"{mutes}/{made['metadata']['name']}")):
            assert not {"generateName", "finalizers"} & set(got["metadata"]), got["metadata"]
    kubectl(served, "delete", "-f", "-", stdin=MUTE_POLICY)
