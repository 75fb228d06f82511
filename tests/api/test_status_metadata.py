"""What a write through ``/status`` may change in ``metadata``, type by type, as upstream's
status strategies decide (``registry/statuswrites.py``): most keep the request's labels and
annotations, a pod's status write drops its ownerReferences and deletionTimestamp, a
Deployment's its labels, the types of ``ResetObjectMetaForStatus`` (and CRDs, APIServices)
labels and annotations, and custom resources and FlowSchemas all of it. Every patch type,
an update and an apply through ``/status`` follow the same rules, and managedFields record
what they changed."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.controllers.helpers import until

NS = "/api/v1/namespaces/default"
PODS = f"{NS}/pods"
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
WIDGETS = resource_path("example.com", "v1", "widgets", "default")
CHANGE = {"metadata": {"labels": {"added": "yes"}, "annotations": {"note": "x"}}}


def pod(name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def deployment() -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"app": "d"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": template}}


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


async def widget(client: Client) -> str:
    """A custom resource with a status subresource; its path."""
    await client.create(CRDS, WIDGET_CRD)

    async def served() -> bool:
        try:
            await client.list(WIDGETS)
        except ApiError:
            return False
        return True

    await until(served)
    await client.create(WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                  "spec": {"size": 1}})
    return f"{WIDGETS}/w"


# (what to create where, the object's path) per family; whether a /status write keeps the
# request's labels, and its annotations
FAMILIES: list[tuple[str, str, dict[str, Any], str, bool, bool]] = [
    ("pod", PODS, pod(), f"{PODS}/p", True, True),
    ("node", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
     "/api/v1/nodes/n", True, True),
    ("service", f"{NS}/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                                   "spec": {"ports": [{"port": 80}]}}, f"{NS}/services/s", True, True),
    ("namespace", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}},
     "/api/v1/namespaces/ns1", True, True),
    ("job", resource_path("batch", "v1", "jobs", "default"), {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
     f"{resource_path('batch', 'v1', 'jobs', 'default')}/j", True, True),
    # deploymentStatusStrategy: the labels only
    ("deployment", DEPLOYMENTS, deployment(), f"{DEPLOYMENTS}/d", False, True),
    # ResetObjectMetaForStatus
    ("servicecidr", resource_path("networking.k8s.io", "v1", "servicecidrs"), {
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
        "spec": {"cidrs": ["10.100.0.0/16"]}},
     f"{resource_path('networking.k8s.io', 'v1', 'servicecidrs')}/extra", False, False),
    # the built-in ones, written at start: the CRD's and aggregator's strategies, the whole ObjectMeta
    ("apiservice", "", {}, f"{resource_path('apiregistration.k8s.io', 'v1', 'apiservices')}/v1.apps", False, False),
    ("flowschema", "", {}, f"{resource_path('flowcontrol.apiserver.k8s.io', 'v1', 'flowschemas')}/catch-all",
     False, False),
]


@pytest.mark.parametrize(("family", "collection", "obj", "path", "labels", "annotations"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])
async def test_a_status_write_keeps_the_metadata_its_types_strategy_lets_it(
        client: Client, family: str, collection: str, obj: dict[str, Any], path: str, labels: bool,
        annotations: bool) -> None:
    if collection:
        await client.create(collection, obj)
    before = await client.get(path)
    written = await client.patch(f"{path}/status", CHANGE)
    meta, old = written["metadata"], before["metadata"]
    assert (meta.get("labels", {}).get("added") == "yes") is labels, meta
    assert (meta.get("annotations", {}).get("note") == "x") is annotations, meta
    assert meta.get("labels") == ({**old.get("labels", {}), "added": "yes"} if labels else old.get("labels"))
    stored = (await client.get(path))["metadata"]
    assert (stored.get("labels"), stored.get("annotations")) == (meta.get("labels"), meta.get("annotations"))
    if not labels and not annotations:  # all it asked was dropped: nothing written, as upstream
        assert meta["resourceVersion"] == old["resourceVersion"]


async def test_a_custom_resources_status_write_keeps_the_stored_metadata_whole(client: Client) -> None:
    path = await widget(client)
    written = await client.patch(f"{path}/status", {**CHANGE, "status": {"ready": True},
                                                    "metadata": {**CHANGE["metadata"], "finalizers": ["x/y"]}})
    assert written["status"] == {"ready": True}
    assert {k: written["metadata"].get(k) for k in ("labels", "annotations", "finalizers")} == dict.fromkeys(
        ("labels", "annotations", "finalizers"))
    owned = [e["fieldsV1"] for e in written["metadata"]["managedFields"] if e.get("subresource") == "status"]
    assert [list(fields) for fields in owned] == [["f:status"]]  # none of the metadata it did not change
    crd = await client.patch(f"{CRDS}/widgets.example.com/status", CHANGE)  # the CRD's own: neither
    assert "added" not in (crd["metadata"].get("labels") or {}) and "note" not in (crd["metadata"].get("annotations")
                                                                                  or {})


async def test_a_pods_status_write_changes_labels_annotations_and_finalizers_not_its_owners(client: Client) -> None:
    await client.create(PODS, pod())
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "6b1f6d1c-0000-4000-8000-000000000001"}
    written = await client.patch(f"{PODS}/p/status", {"metadata": {
        "labels": {"app": "b"}, "annotations": {"a": "1"}, "finalizers": ["example.com/hold"],
        "ownerReferences": [owner], "deletionTimestamp": "2030-01-01T00:00:00Z"}})
    meta = written["metadata"]
    assert (meta["labels"], meta["annotations"], meta["finalizers"]) == ({"app": "b"}, {"a": "1"}, ["example.com/hold"])
    # dropped silently, as podStatusStrategy drops them: no 422, the pod not made terminating
    assert "ownerReferences" not in meta and "deletionTimestamp" not in meta
    # every patch type and an update through /status alike
    json_patched = await client.patch(f"{PODS}/p/status", [
        {"op": "add", "path": "/metadata/annotations/b", "value": "2"}], patch_type="json")
    assert json_patched["metadata"]["annotations"] == {"a": "1", "b": "2"}
    strategic = await client.patch(f"{PODS}/p/status", {"metadata": {"labels": {"tier": "web"}}},
                                   patch_type="strategic")
    assert strategic["metadata"]["labels"] == {"app": "b", "tier": "web"}
    body = {**strategic, "metadata": {**strategic["metadata"], "finalizers": None, "labels": {"app": "c"}}}
    updated = await client.update(f"{PODS}/p/status", body)
    assert updated["metadata"]["labels"] == {"app": "c"} and "finalizers" not in updated["metadata"]


async def test_labels_written_through_status_are_validated_as_any_metadata(client: Client) -> None:
    await client.create(PODS, pod())
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PODS}/p/status", {"metadata": {"labels": {"bad key!": "x"}}})
    assert e.value.code == 422
    causes = e.value.status["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.labels"], causes
    assert (await client.get(f"{PODS}/p"))["metadata"]["labels"] == {"app": "a"}


async def test_a_deletion_a_status_strategy_does_not_reset_is_refused(client: Client) -> None:
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    with pytest.raises(ApiError) as e:
        await client.patch("/api/v1/nodes/n/status", {"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})
    assert e.value.code == 422 and "metadata.deletionTimestamp" in e.value.message, e.value.message
    await client.create(PODS, pod())  # the grace period: refused for a pod too (no strategy resets it)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PODS}/p/status", {"metadata": {"deletionGracePeriodSeconds": 30}})
    assert e.value.code == 422 and "metadata.deletionGracePeriodSeconds" in e.value.message


def status_entry(obj: dict[str, Any], manager: str, operation: str = "Update") -> dict[str, Any]:
    entries = [e for e in obj["metadata"].get("managedFields", [])
               if (e.get("manager", ""), e["operation"], e.get("subresource")) == (manager, operation, "status")]
    assert len(entries) == 1, obj["metadata"].get("managedFields")
    return dict(entries[0]["fieldsV1"])


async def test_managed_fields_record_the_metadata_a_status_write_changed(client: Client) -> None:
    await client.create(PODS, pod())
    written = await client.patch(f"{PODS}/p/status", CHANGE, fieldManager="node-agent")
    assert status_entry(written, "node-agent") == {"f:metadata": {
        "f:annotations": {".": {}, "f:note": {}}, "f:labels": {"f:added": {}}}}
    await client.create(DEPLOYMENTS, deployment())
    written = await client.patch(f"{DEPLOYMENTS}/d/status", {**CHANGE, "status": {"observedGeneration": 1}},
                                 fieldManager="rollout")
    assert status_entry(written, "rollout") == {  # the labels were dropped: not the writer's
        "f:metadata": {"f:annotations": {".": {}, "f:note": {}}}, "f:status": {"f:observedGeneration": {}}}
    # an apply through /status: its labels merged and owned where the type keeps them
    applied = await client.patch(f"{PODS}/p/status", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"applied": "yes"}}},
        patch_type="apply", fieldManager="applier")
    assert applied["metadata"]["labels"] == {"app": "a", "added": "yes", "applied": "yes"}
    assert status_entry(applied, "applier", "Apply") == {"f:metadata": {"f:labels": {"f:applied": {}}}}
    applied = await client.patch(f"{DEPLOYMENTS}/d/status", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"applied": "yes"}}, "status": {"observedGeneration": 1}},
        patch_type="apply", fieldManager="applier", force="true")
    assert applied["metadata"]["labels"] == {"app": "d"}
    assert status_entry(applied, "applier", "Apply") == {"f:status": {"f:observedGeneration": {}}}
