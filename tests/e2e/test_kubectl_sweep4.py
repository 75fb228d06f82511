"""Workflows a fourth sweep against upstream found answered differently, with the real kubectl
and the official Python client against one ``controlplane serve`` (the e2e conftest's) over a
socket: field selectors on a custom resource's ``selectableFields`` (CustomResourceFieldSelectors,
GA in 1.32: the example of kubernetes.io's CRD page), and the CRD's validation of them; the
eviction of a pod two PodDisruptionBudgets cover; and creates through subresources (an eviction,
a token, a binding) in a terminating namespace."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kubernetes import client

from tests.e2e.test_crd import as_dict
from tests.e2e.test_kubectl import kubectl, watching
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve

SHIRTS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: shirts.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: shirts, singular: shirt, kind: Shirt}
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
              color: {type: string}
              size: {type: string, enum: [S, M, L]}
              count: {type: integer}
              folded: {type: boolean}
    selectableFields:
    - jsonPath: .spec.color
    - jsonPath: .spec.size
    - jsonPath: .spec.count
    - jsonPath: .spec.folded
    additionalPrinterColumns:
    - {jsonPath: .spec.color, name: Color, type: string}
    - {jsonPath: .spec.size, name: Size, type: string}
"""

SOME_SHIRTS = """
apiVersion: stable.example.com/v1
kind: Shirt
metadata: {name: example1}
spec: {color: blue, size: S, count: 1, folded: true}
---
apiVersion: stable.example.com/v1
kind: Shirt
metadata: {name: example2}
spec: {color: blue, size: M, count: 2}
---
apiVersion: stable.example.com/v1
kind: Shirt
metadata: {name: example3}
spec: {color: green, size: M}
"""


def names(served: Serve, *args: str) -> list[str]:
    return kubectl(served, "get", *args, "-o", "name").split()


@pytest.fixture(scope="module")
def shirts(served: Serve) -> Serve:
    kubectl(served, "apply", "-f", "-", stdin=SHIRTS)
    kubectl(served, "apply", "-f", "-", stdin=SOME_SHIRTS)
    return served


def test_kubectl_selects_custom_resources_by_their_selectable_fields(shirts: Serve) -> None:
    """As upstream's customResourceStrategy: a field's value is Go's ``fmt.Sprint`` of it (an
    integer's digits, ``true``), ``""`` where the object has none; several terms all hold."""
    assert kubectl(shirts, "get", "shirts", "--field-selector", "spec.color=blue").splitlines() == [
        "NAME       COLOR   SIZE", "example1   blue    S", "example2   blue    M"]
    assert names(shirts, "shirts", "--field-selector", "spec.color=green,spec.size=M") == [
        "shirt.stable.example.com/example3"]
    assert names(shirts, "shirts", "--field-selector", "spec.count=2") == ["shirt.stable.example.com/example2"]
    assert names(shirts, "shirts", "--field-selector", "spec.folded=true") == ["shirt.stable.example.com/example1"]
    assert names(shirts, "shirts", "--field-selector", "spec.folded!=true") == [
        "shirt.stable.example.com/example2", "shirt.stable.example.com/example3"]
    assert names(shirts, "shirts", "--field-selector", "spec.count=") == ["shirt.stable.example.com/example3"]
    assert names(shirts, "shirts", "-A", "--field-selector", "spec.size=S,metadata.namespace=default") == [
        "shirt.stable.example.com/example1"]
    # a field it does not declare is refused in the words of upstream's field label conversion
    err = failing(shirts, "get", "shirts", "--field-selector", "spec.sleeves=long")
    assert err.strip().endswith('field selector "spec.sleeves=long": field label not supported: spec.sleeves')


def test_a_watch_sees_custom_resources_enter_and_leave_its_field_selector(shirts: Serve) -> None:
    kubectl(shirts, "apply", "-f", "-", stdin="apiVersion: stable.example.com/v1\nkind: Shirt\n"
                                              "metadata: {name: watched}\nspec: {color: white, size: L}\n")
    with watching(shirts, "shirts", "--field-selector", "spec.color=red", "--output-watch-events",
                  "--no-headers") as lines:
        for patch in ({"color": "red"}, {"size": "M"}, {"color": "white"}):
            kubectl(shirts, "patch", "shirt", "watched", "--type=merge", "-p", json.dumps({"spec": patch}))
        seen = [lines.get(timeout=30).split()[:4] for _ in range(3)]
    kubectl(shirts, "delete", "shirt", "watched")
    # leaving it is a DELETED of the version before, as upstream's cacheWatcher sends it
    assert seen == [["ADDED", "watched", "red", "L"], ["MODIFIED", "watched", "red", "M"],
                    ["DELETED", "watched", "red", "M"]]


def test_the_python_client_lists_custom_objects_by_a_selectable_field(shirts: Serve, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    listed = as_dict(custom.list_namespaced_custom_object("stable.example.com", "v1", "default", "shirts",
                                                          field_selector="spec.size=M"))
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["example2", "example3"]
    with pytest.raises(client.ApiException) as e:
        custom.list_namespaced_custom_object("stable.example.com", "v1", "default", "shirts",
                                             field_selector="status.phase=Ready")
    assert e.value.status == 400 and json.loads(e.value.body)["message"] == "field label not supported: status.phase"


def test_each_version_selects_by_its_own_fields_and_a_cluster_scoped_kind_has_no_namespace(served: Serve) -> None:
    """The fields are a version's (upstream's conversion asks the request's version), evaluated
    on its objects; a cluster-scoped kind's field set has ``metadata.name`` alone."""
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tier": {"type": "string"}, "zone": {"type": "string"}}}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "racks.infra.example.com"},
           "spec": {"group": "infra.example.com", "scope": "Cluster",
                    "names": {"plural": "racks", "singular": "rack", "kind": "Rack"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema,
                                  "selectableFields": [{"jsonPath": ".spec.tier"}]},
                                 {"name": "v2", "served": True, "storage": False, "schema": schema,
                                  "selectableFields": [{"jsonPath": ".spec.tier"}, {"jsonPath": ".spec.zone"}]}]}}
    kubectl(served, "apply", "-f", "-", stdin=json.dumps(crd))
    for name, tier, zone in (("r1", "gold", "a"), ("r2", "gold", "b"), ("r3", "iron", "b")):
        kubectl(served, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "infra.example.com/v1", "kind": "Rack", "metadata": {"name": name},
            "spec": {"tier": tier, "zone": zone}}))
    assert names(served, "racks.v2.infra.example.com", "--field-selector", "spec.tier=gold,spec.zone=b") == [
        "rack.infra.example.com/r2"]
    assert names(served, "racks.v1.infra.example.com", "--field-selector", "spec.tier=iron") == [
        "rack.infra.example.com/r3"]
    err = failing(served, "get", "racks.v1.infra.example.com", "--field-selector", "spec.zone=b")
    assert err.strip().endswith("field label not supported: spec.zone")
    err = failing(served, "get", "racks.v2.infra.example.com", "--field-selector", "metadata.namespace=default")
    assert err.strip().endswith("field label not supported: metadata.namespace")


def test_a_crd_that_changes_its_selectable_fields_selects_by_the_new_ones(shirts: Serve) -> None:
    """Upstream makes the CRD's storage anew; here its watch cache is made again."""
    assert names(shirts, "shirts", "--field-selector", "spec.size=M")  # the cache as it was, loaded
    kubectl(shirts, "patch", "crd", "shirts.stable.example.com", "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/versions/0/selectableFields", "value": [{"jsonPath": ".spec.color"}]}]))
    err = failing(shirts, "get", "shirts", "--field-selector", "spec.size=M")
    assert err.strip().endswith("field label not supported: spec.size")
    assert names(shirts, "shirts", "--field-selector", "spec.color=green") == ["shirt.stable.example.com/example3"]
    kubectl(shirts, "apply", "-f", "-", stdin=SHIRTS)  # as the other tests found it
    assert names(shirts, "shirts", "--field-selector", "spec.size=M,spec.count=2") == [
        "shirt.stable.example.com/example2"]


def test_selectable_fields_are_validated_as_upstream(served: Serve) -> None:
    """ValidateCustomResourceSelectableFields: a path the schema has (cel.ValidFieldPath, no
    array notation), outside metadata, to a string, boolean or integer, each once, at most 8;
    a one-version CRD's errors name ``spec.selectableFields``, as its internal version has them."""
    crd = SHIRTS.replace("shirts", "blouses").replace("Shirt", "Blouse").replace("shirt", "blouse")
    bad = crd.replace("- jsonPath: .spec.count\n", "- jsonPath: .spec.sleeves\n    - jsonPath: spec.color\n"
                                                   "    - jsonPath: .spec['size']\n    - jsonPath: .spec\n"
                                                   "    - jsonPath: .spec.color\n")
    err = failing(served, "apply", "-f", "-", stdin=bad)
    at = "spec.selectableFields"
    assert err.strip().splitlines() == [
        'The CustomResourceDefinition "blouses.stable.example.com" is invalid: ',
        f'* {at}[2].jsonPath: Invalid value: ".spec.sleeves": is an invalid path: does not refer to a valid field',
        f'* {at}[3].jsonPath: Invalid value: "spec.color": is an invalid path: expected [ or . but got: spec',
        f'* {at}[4].jsonPath: Invalid value: ".spec[\'size\']": is an invalid path: array notation is not allowed',
        f'* {at}[5].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. '
        "Enum string fields and strings with formats are allowed.",
        f'* {at}[6].jsonPath: Duplicate value: ".spec.color"']
    many = crd.replace("              folded: {type: boolean}\n", "              folded: {type: boolean}\n" + "".join(
        f"              f{i}: {{type: string}}\n" for i in range(5)))
    many = many.replace("    - jsonPath: .spec.folded\n", "    - jsonPath: .spec.folded\n" + "".join(
        f"    - jsonPath: .spec.f{i}\n" for i in range(5)))
    err = failing(served, "apply", "-f", "-", stdin=many)
    assert err.strip() == ('The CustomResourceDefinition "blouses.stable.example.com" is invalid: '
                           "spec.selectableFields: Too many: 9: must have at most 8 items")


def test_an_eviction_two_budgets_cover_is_a_500_without_a_reason(served: Serve, api: client.ApiClient) -> None:
    """Upstream's EvictionREST answers a bare failed Status (code 500, no reason), which the
    handler's finisher turns into the error as it is: kubectl says ``Error from server:``,
    not ``(InternalError)``, and the body has no ``reason``."""
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="covered", labels={"app": "covered"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
    # running, as a kubelet would report it (no nodes here): a pending pod ignores budgets
    core.patch_namespaced_pod_status("covered", "default", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    for name in ("first", "second"):
        policy.create_namespaced_pod_disruption_budget("default", client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name=name), spec=client.V1PodDisruptionBudgetSpec(
                min_available=0, selector=client.V1LabelSelector(match_labels={"app": "covered"}))))
    eviction = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "covered"}})
    err = failing(served, "create", "--raw", "/api/v1/namespaces/default/pods/covered/eviction", "-f", "-",
                  stdin=eviction)
    message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    assert err.strip() == f"Error from server: {message}"
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_pod_eviction("covered", "default", json.loads(eviction))
    assert e.value.status == 500
    assert json.loads(e.value.body) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": message, "code": 500}
    assert core.read_namespaced_pod("covered", "default").metadata.deletion_timestamp is None


def test_no_eviction_token_or_binding_is_created_in_a_terminating_namespace(served: Serve,
                                                                            api: client.ApiClient) -> None:
    """Upstream's NamespaceLifecycle refuses every CREATE in a terminating namespace, a
    subresource's too, with the NamespaceTerminating cause: ``kubectl drain`` takes that answer
    to an eviction of a terminating pod as one to wait on (drain.go's evictPods)."""
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="closing")))
    core.create_namespaced_service_account("closing", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="sa")))
    for name in ("held", "unbound"):  # kept by a finalizer while the namespace goes
        core.create_namespaced_pod("closing", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, finalizers=["example.com/hold"]),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
    core.delete_namespace("closing")
    try:
        def refused(call: Callable[[], object], what: str) -> None:
            with pytest.raises(client.ApiException) as e:
                call()
            body = json.loads(e.value.body)
            assert (e.value.status, body["reason"], body["message"]) == (
                403, "Forbidden", f"{what} is forbidden: unable to create new content in namespace closing because "
                                  "it is being terminated")
            assert body["details"]["causes"] == [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                  "message": "namespace closing is being terminated"}]

        refused(lambda: core.create_namespaced_pod_eviction("held", "closing", client.V1Eviction(
            metadata=client.V1ObjectMeta(name="held"))), 'pods "held"')
        refused(lambda: core.create_namespaced_service_account_token("sa", "closing",
                                                                     client.AuthenticationV1TokenRequest(
                                                                         spec=client.V1TokenRequestSpec(audiences=[]))),
                'serviceaccounts "sa"')
        refused(lambda: core.create_namespaced_pod_binding("unbound", "closing", client.V1Binding(
            metadata=client.V1ObjectMeta(name="unbound"), target=client.V1ObjectReference(kind="Node", name="n"))),
            'pods "unbound"')
        err = failing(served, "create", "--raw", "/api/v1/namespaces/closing/pods/held/eviction", "-f", "-",
                      stdin=json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "held"}}))
        assert err.strip() == ('Error from server (Forbidden): pods "held" is forbidden: unable to create new content '
                               "in namespace closing because it is being terminated")
    finally:
        for name in ("held", "unbound"):
            core.patch_namespaced_pod(name, "closing", [{"op": "remove", "path": "/metadata/finalizers"}])
