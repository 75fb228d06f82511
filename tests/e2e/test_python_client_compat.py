"""Findings of a sweep with the official ``kubernetes`` Python client used as operators'
tools use it (its dynamic client, typed APIs and watches), each over a socket against
``controlplane serve``: what it found different from kube-apiserver, now the same."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client, dynamic, utils
from kubernetes.dynamic.exceptions import ResourceNotFoundError, UnprocessibleEntityError

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve


def test_the_token_subresource_is_discovered_as_a_token_request(served: Serve, api: client.ApiClient,
                                                                tmp_path: Path) -> None:
    """``serviceaccounts/token`` is a TokenRequest of authentication.k8s.io/v1 one creates, as
    upstream's discovery says (it said a ServiceAccount one gets, patches and updates), so the
    dynamic client finds it and asks for a token with it."""
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    token = dyn.resources.get(api_version="v1", kind="ServiceAccount").subresources["token"]
    assert (token.kind, token.verbs) == ("TokenRequest", ["create"])
    issued = token.create(body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
                          name="default", namespace="default")
    assert issued.kind == "TokenRequest" and issued.status.token.count(".") == 2
    aggregated = httpx.get(f"{served.url}/api", headers={
        **bearer(served), "accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}).json()
    resources = {r["resource"]: r for r in aggregated["items"][0]["versions"][0]["resources"]}
    subresources = {s["subresource"]: s for s in resources["serviceaccounts"]["subresources"]}
    assert subresources["token"] == {
        "subresource": "token", "verbs": ["create"],
        "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}}


def test_a_namespace_held_by_a_finalizer_says_why_to_the_typed_client(api: client.ApiClient) -> None:
    """A namespace whose content a finalizer holds stays Terminating with upstream's
    conditions, which the typed client reads into V1NamespaceConditions; once released,
    the namespace goes."""
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="held")))
    core.create_namespaced_config_map("held", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="kept", finalizers=["example.com/hold"])))
    core.delete_namespace("held")
    deadline = time.monotonic() + 5
    while not (conditions := core.read_namespace("held").status.conditions) and time.monotonic() < deadline:
        time.sleep(0.05)
    by_type = {c.type: c for c in conditions or ()}
    assert (by_type["NamespaceFinalizersRemaining"].status, by_type["NamespaceFinalizersRemaining"].message) == (
        "True", "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    assert by_type["NamespaceContentRemaining"].reason == "SomeResourcesRemain"
    assert by_type["NamespaceDeletionContentFailure"].status == "False"
    assert core.read_namespace("held").status.phase == "Terminating"
    core.patch_namespaced_config_map("kept", "held", [{"op": "remove", "path": "/metadata/finalizers"}])
    deadline = time.monotonic() + 5
    while any(ns.metadata.name == "held" for ns in core.list_namespace().items) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(ns.metadata.name != "held" for ns in core.list_namespace().items)


MANIFEST = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object,
     x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: manifest-config}
data: {colour: blue}
---
apiVersion: v1
kind: pod
metadata: {name: manifest-pod}
spec:
  containers: [{name: c, image: nginx}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: manifest-web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
"""


@pytest.fixture(scope="module")
def manifest_refusals(api: client.ApiClient) -> list[client.ApiException]:
    """What ``create_from_yaml`` could not create of MANIFEST (it creates the rest)."""
    with pytest.raises(utils.FailToCreateError) as failed:
        utils.create_from_yaml(api, yaml_objects=list(yaml.safe_load_all(MANIFEST)), namespace="default")
    return list(failed.value.api_exceptions)


@pytest.fixture(scope="module")
def gadgets(api: client.ApiClient, manifest_refusals: list[client.ApiException],
            tmp_path_factory: pytest.TempPathFactory) -> dynamic.Resource:
    """The manifest's CRD through the dynamic client, once its discovery finds it: a miss
    refreshes the client's discovery cache, and the CRD is served once Established."""
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path_factory.mktemp("dynamic") / "discovery.json"))
    deadline = time.monotonic() + 10
    while True:
        try:
            found: dynamic.Resource = dyn.resources.get(api_version="example.com/v1", kind="Gadget")
            return found
        except ResourceNotFoundError:
            assert time.monotonic() < deadline, "the CRD was not discovered within 10 s"
            time.sleep(0.1)


def test_a_manifest_of_another_kind_than_its_url_is_refused_in_upstreams_words(
        api: client.ApiClient, manifest_refusals: list[client.ApiException], gadgets: dynamic.Resource) -> None:
    """``create_from_yaml`` creates what it can of a manifest and reports the rest: a
    ``kind: pod`` (it calls create_namespaced_pod for it) is upstream's decoding 400, not the
    server's own words with a Python None in them; a custom resource of another kind, sent by
    the dynamic client, is its validator's 422."""
    (refused,) = manifest_refusals
    assert refused.status == 400
    assert json.loads(refused.body)["message"] == (
        'pod in version "v1" cannot be handled as a Pod: no kind "pod" is registered for version "v1" in '
        'scheme "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"')
    assert client.CoreV1Api(api).read_namespaced_config_map("manifest-config", "default").data == {"colour": "blue"}
    assert client.AppsV1Api(api).read_namespaced_deployment("manifest-web", "default").spec.replicas == 1

    with pytest.raises(UnprocessibleEntityError) as invalid:
        gadgets.create(namespace="default", body={"apiVersion": "example.com/v1", "kind": "Widget",
                                                  "metadata": {"name": "g"}})
    status = json.loads(invalid.value.body)
    assert status["message"] == 'Gadget.example.com "g" is invalid: kind: Invalid value: "Widget": must be Gadget'
    assert gadgets.create(namespace="default", body={"metadata": {"name": "g"}}).kind == "Gadget"


def test_a_json_patch_the_custom_objects_api_sends_as_a_merge_patch_is_refused_as_upstream(
        api: client.ApiClient, gadgets: dynamic.Resource) -> None:
    """``CustomObjectsApi.patch_*`` sends every body as a merge patch, a list of JSON patch
    operations too: upstream decodes a merge patch as a map first (fieldValidation Warn, the
    default) and answers 400 ``error decoding patch``; the server said 'the patch must leave an
    object'. The same operations as a JSON patch, through the dynamic client, apply."""
    gadgets.create(namespace="default", body={"metadata": {"name": "patched"}, "spec": {"size": 1}})
    operations = [{"op": "replace", "path": "/spec/size", "value": 2}]
    custom = client.CustomObjectsApi(api)
    with pytest.raises(client.ApiException) as refused:
        custom.patch_namespaced_custom_object("example.com", "v1", "default", "gadgets", "patched", operations)
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == (
        "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}")
    patched = gadgets.patch(namespace="default", name="patched", body=operations,
                            content_type="application/json-patch+json")
    assert patched.spec.size == 2


def test_a_server_side_apply_that_says_no_type_is_refused_as_upstream(api: client.ApiClient, tmp_path: Path) -> None:
    """The dynamic client's ``server_side_apply`` sends the body as written: one without
    ``apiVersion`` and ``kind`` (a status applied by a controller, often) is the field manager's
    400 ``invalid object type: /, Kind=``, which is what clients search for; the server had
    words of its own."""
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    with pytest.raises(dynamic.exceptions.BadRequestError) as refused:
        configmaps.server_side_apply(namespace="default", field_manager="tool",
                                     body={"metadata": {"name": "applied"}, "data": {"a": "1"}})
    assert json.loads(refused.value.body)["message"] == "invalid object type: /, Kind="
    applied = configmaps.server_side_apply(namespace="default", field_manager="tool", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}})
    assert applied.data.a == "1"


def test_an_eviction_of_another_type_is_refused_and_policy_v1beta1_still_taken(api: client.ApiClient) -> None:
    """``create_namespaced_pod_eviction`` posts the body as given: an Eviction said to be of
    ``v1`` is upstream's decoding 400 and evicts nothing (it was taken as policy/v1); the older
    ``policy/v1beta1`` Eviction is still accepted, as upstream's eviction REST accepts both."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="evicted"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")])))
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("evicted", "default", client.V1Eviction(
            api_version="v1", kind="Eviction", metadata=client.V1ObjectMeta(name="evicted")))
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"].startswith(
        'Eviction in version "v1" cannot be handled as a Eviction: no kind "Eviction" is registered for version "v1"')
    assert core.read_namespaced_pod("evicted", "default").metadata.deletion_timestamp is None
    core.create_namespaced_pod_eviction("evicted", "default", client.V1Eviction(
        api_version="policy/v1beta1", kind="Eviction", metadata=client.V1ObjectMeta(name="evicted")))
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_pod("evicted", "default")
    assert gone.value.status == 404


def _client_request(common_name: str) -> str:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(
        ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def test_a_pending_certificate_request_reads_with_an_empty_status_the_client_approves_through(
        api: client.ApiClient) -> None:
    """A new CertificateSigningRequest has ``status: {}`` (Go writes the struct), so the
    client's approval as its docs show it, setting ``status.conditions`` on what it read, works;
    the status was left out and the typed client read None there."""
    certificates = client.CertificatesV1Api(api)
    made = certificates.create_certificate_signing_request(client.V1CertificateSigningRequest(
        metadata=client.V1ObjectMeta(name="py-approved"), spec=client.V1CertificateSigningRequestSpec(
            request=_client_request("py-approved"), signer_name="kubernetes.io/kube-apiserver-client",
            usages=["client auth"])))
    assert made.status is not None and made.status.conditions is None
    pending = certificates.read_certificate_signing_request_status("py-approved")
    pending.status.conditions = [client.V1CertificateSigningRequestCondition(
        type="Approved", status="True", reason="PythonApprove", message="approved by a script")]
    approved = certificates.replace_certificate_signing_request_approval("py-approved", pending)
    assert [c.type for c in approved.status.conditions] == ["Approved"]


def test_quantities_read_back_in_upstreams_canonical_form(api: client.ApiClient) -> None:
    """Quantities are written back as kube-apiserver writes a ``resource.Quantity`` it decoded
    (``0.5`` as ``500m``, ``1024Mi`` as ``1Gi``), so a script comparing what it reads with
    what ``kubectl get -o yaml`` shows of a real cluster finds the same; they were stored as
    sent."""
    core = client.CoreV1Api(api)
    resources = client.V1ResourceRequirements(requests={"cpu": "0.5", "memory": "1024Mi"},
                                              limits={"cpu": "1000m", "memory": "1.5Gi"})
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="canonical"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx", resources=resources)])))
    read = core.read_namespaced_pod("canonical", "default").spec.containers[0].resources
    assert (read.requests, read.limits) == ({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1536Mi"})


def test_a_delete_by_selector_without_a_namespace_is_refused_not_run_everywhere(api: client.ApiClient,
                                                                                tmp_path: Path) -> None:
    """The dynamic client's ``delete(label_selector=...)`` without a namespace sends DELETE to
    the path across namespaces, where upstream routes only list and watch: 405, nothing
    deleted. This server deleted what matched in every namespace."""
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="elsewhere")))
    for namespace in ("default", "elsewhere"):
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="swept", labels={"sweep": "me"})))
    configmaps = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json")).resources.get(
        api_version="v1", kind="ConfigMap")
    with pytest.raises(dynamic.exceptions.MethodNotAllowedError):
        configmaps.delete(label_selector="sweep=me")
    assert len(core.list_config_map_for_all_namespaces(label_selector="sweep=me").items) == 2
    deleted = configmaps.delete(namespace="elsewhere", label_selector="sweep=me")
    assert [item.metadata.name for item in deleted.items] == ["swept"]
