"""The verbs' checks of what a request may change, as kube-apiserver's handlers make them:
a patch or an update cannot rename, move or re-identify the object it writes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config

CMS = resource_path("", "v1", "configmaps", "default")
NODES = resource_path("", "v1", "nodes")


@pytest.mark.parametrize(("patch_type", "patch"), [
    ("merge", {"metadata": {"name": "other"}}),
    ("strategic", {"metadata": {"name": "other"}}),
    ("json", [{"op": "replace", "path": "/metadata/name", "value": "other"}]),
    ("json", [{"op": "remove", "path": "/metadata/name"}]),
])
async def test_a_patch_cannot_rename_the_object(client: Client, patch_type: str, patch: Any) -> None:
    created = await client.create(CMS, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/cm", patch, patch_type)
    assert e.value.code == 400 and e.value.reason == "BadRequest"
    if patch_type != "json" or patch[0]["op"] == "replace":
        assert e.value.message == "the name of the object (other) does not match the name on the URL (cm)"
    else:  # (upstream's ScopeNamer refuses an object without a name before comparing)
        assert e.value.message == "the name of the object (cm based on URL) was undeterminable: name must be provided"
    assert await client.get(f"{CMS}/cm") == created  # nothing was written
    with pytest.raises(ApiError) as missing:
        await client.get(f"{CMS}/other")
    assert missing.value.code == 404


@pytest.mark.parametrize(("patch_type", "patch"), [
    ("merge", {"kind": "Secret"}),
    ("merge", {"apiVersion": "v2"}),
    ("json", [{"op": "replace", "path": "/kind", "value": "Secret"}]),
])
async def test_a_patch_cannot_retype_the_object(client: Client, patch_type: str, patch: Any) -> None:
    # the patched JSON is decoded into the URL's type: upstream's 422 on the field patch (the
    # kind or apiVersion was dropped and the patch answered 200)
    created = await client.create(CMS, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/cm", patch, patch_type)
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    assert e.value.message.startswith(' "" is invalid: patch: Invalid value: ')
    assert await client.get(f"{CMS}/cm") == created
    # a strategic patch's result goes through the unstructured converter, which keeps any kind
    patched = await client.patch(f"{CMS}/cm", {"kind": "Secret", "data": {"a": "2"}}, "strategic")
    assert (patched["kind"], patched["data"]) == ("ConfigMap", {"a": "2"})


async def test_a_patch_cannot_move_the_object_to_another_namespace(client: Client) -> None:
    await client.create(CMS, {"metadata": {"name": "cm"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/cm", {"metadata": {"namespace": "kube-system"}})
    assert e.value.code == 400
    assert e.value.message == "the namespace of the provided object does not match the namespace sent on the request"
    # the same namespace, or none, is the object's
    patched = await client.patch(f"{CMS}/cm", {"metadata": {"namespace": "default", "labels": {"a": "b"}}})
    assert patched["metadata"]["namespace"] == "default" and patched["metadata"]["labels"] == {"a": "b"}
    # a cluster-scoped object has no namespace to move to: it is dropped, as upstream
    node = await client.create(NODES, {"metadata": {"name": "n"}})
    patched = await client.patch(f"{NODES}/n", {"metadata": {"namespace": "default", "labels": {"a": "b"}}})
    assert "namespace" not in patched["metadata"] and patched["metadata"]["uid"] == node["metadata"]["uid"]


async def test_a_patch_cannot_change_the_uid(client: Client) -> None:
    created = await client.create(CMS, {"metadata": {"name": "cm"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/cm", {"metadata": {"uid": "not-its-uid"}})
    assert e.value.code == 422 and e.value.reason == "Invalid"
    assert e.value.message == ('ConfigMap "cm" is invalid: metadata.uid: Invalid value: "not-its-uid": '
                               "field is immutable")
    # its own uid, or none (a merge patch's null), changes nothing
    uid = created["metadata"]["uid"]
    assert (await client.patch(f"{CMS}/cm", {"metadata": {"uid": uid}}))["metadata"]["uid"] == uid
    assert (await client.patch(f"{CMS}/cm", {"metadata": {"uid": None}}))["metadata"]["uid"] == uid


async def test_an_update_with_another_uid_fails_its_precondition(client: Client) -> None:
    created = await client.create(CMS, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    uid = created["metadata"]["uid"]
    stale = {**created, "metadata": {**created["metadata"], "uid": "a-recreated-objects-uid"}, "data": {"a": "2"}}
    with pytest.raises(ApiError) as e:
        await client.update(f"{CMS}/cm", stale)
    assert e.value.code == 409 and e.value.reason == "Conflict"
    assert e.value.message == ('Operation cannot be fulfilled on configmaps "cm": StorageError: invalid object, '
                               "Code: 4, Key: /registry/configmaps/default/cm, ResourceVersion: 0, "
                               "AdditionalErrorMsg: Precondition failed: UID in precondition: "
                               f"a-recreated-objects-uid, UID in object meta: {uid}")
    assert (await client.get(f"{CMS}/cm"))["data"] == {"a": "1"}
    # without a uid the update goes ahead, and keeps the object's
    del stale["metadata"]["uid"]
    updated = await client.update(f"{CMS}/cm", stale)
    assert updated["data"] == {"a": "2"} and updated["metadata"]["uid"] == uid


async def test_an_update_names_both_names_when_they_differ(client: Client) -> None:
    created = await client.create(CMS, {"metadata": {"name": "cm"}})
    with pytest.raises(ApiError) as e:
        await client.update(f"{CMS}/cm", {**created, "metadata": {**created["metadata"], "name": "other"}})
    assert e.value.code == 400
    assert e.value.message == "the name of the object (other) does not match the name on the URL (cm)"


async def test_an_update_must_name_its_object(client: Client) -> None:
    # upstream's checkName asks the ScopeNamer for the body's name first: a PUT without one (or
    # with an empty one) is 400, where it was taken from the URL and stored
    created = await client.create(CMS, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    for meta in ({}, {"name": ""}, {"resourceVersion": created["metadata"]["resourceVersion"]}):
        with pytest.raises(ApiError) as e:
            await client.update(f"{CMS}/cm", {"metadata": meta, "data": {"a": "2"}})
        assert (e.value.code, e.value.reason) == (400, "BadRequest")
        assert e.value.message == "the name of the object (cm based on URL) was undeterminable: name must be provided"
    assert await client.get(f"{CMS}/cm") == created


async def test_a_generated_name_is_validated_as_upstream_validates_it(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"generateName": "Bad_"}})
    assert e.value.code == 422
    causes = e.value.status["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.generateName", "metadata.name"]
    assert causes[0]["message"].startswith('Invalid value: "Bad_": a lowercase RFC 1123 subdomain')
    generated = e.value.status["details"]["name"]
    assert generated.startswith("Bad_") and len(generated) == len("Bad_") + 5
    assert (await client.list(CMS))["items"] == []
    # a trailing dash is what a prefix has; a long prefix is cut so that the name fits (a
    # Service's name is a DNS label, at most 63 characters; so is its generateName)
    made = await client.create(CMS, {"metadata": {"generateName": "web-"}})
    assert made["metadata"]["generateName"] == "web-"
    assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", made["metadata"]["name"])  # util/rand's alphabet
    services = resource_path("", "v1", "services", "default")
    svc = await client.create(services, {"metadata": {"generateName": "s" * 60},
                                         "spec": {"ports": [{"port": 80}]}})
    assert len(svc["metadata"]["name"]) == 63 and svc["metadata"]["name"].startswith("s" * 58)
    with pytest.raises(ApiError) as long:
        await client.create(services, {"metadata": {"generateName": "s" * 64}, "spec": {"ports": [{"port": 80}]}})
    assert long.value.code == 422 and "must be no more than 63 characters" in long.value.message


async def test_finalizers_are_qualified_names(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "cm", "finalizers": ["example.com/ok", "not ok"]}})
    assert e.value.code == 422
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["metadata.finalizers"]
    assert 'Invalid value: "not ok": name part must consist of' in e.value.message
    await client.create(CMS, {"metadata": {"name": "cm", "finalizers": ["example.com/ok"]}})
    with pytest.raises(ApiError) as both:
        await client.patch(f"{CMS}/cm", {"metadata": {"finalizers": ["orphan", "foregroundDeletion"]}})
    assert both.value.code == 422 and "finalizer orphan and foregroundDeletion cannot be both set" in \
        both.value.message


async def test_binary_data_that_is_not_base64_is_refused(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "cm"}, "binaryData": {"k": "not base64!"}})
    assert e.value.code == 400
    assert e.value.message == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: illegal base64 data '
                               "at input byte 3")
    with pytest.raises(ApiError) as missing:
        await client.get(f"{CMS}/cm")
    assert missing.value.code == 404


@pytest.mark.parametrize("version", ["0", "", "-1", "abc", "1", "123"])
async def test_a_create_resource_version_is_dropped(client: Client, version: str) -> None:
    """Upstream's storage refuses a create naming a resourceVersion it can read with a 500;
    this server answers no 500 for a client's input, and drops it."""
    created = await client.create(CMS, {"metadata": {"generateName": "v-", "resourceVersion": version}})
    assert int(created["metadata"]["resourceVersion"]) > 0


async def test_a_namespaced_collection_is_deleted_only_namespace_by_namespace(client: Client) -> None:
    """DELETE on a namespaced type's path across namespaces (``/api/v1/configmaps``, where the
    dynamic client sends a delete by selector given no namespace) is upstream's 405: its
    installer routes only list and watch there. It deleted what matched in every namespace."""
    await client.create(CMS, {"metadata": {"name": "kept", "labels": {"doomed": "no"}}})
    with pytest.raises(ApiError) as e:
        await client.delete(resource_path("", "v1", "configmaps"), labelSelector="doomed")
    assert (e.value.code, e.value.reason) == (405, "MethodNotAllowed")
    assert (await client.get(f"{CMS}/kept"))["metadata"]["labels"] == {"doomed": "no"}
    deleted = await client.delete(CMS, labelSelector="doomed")  # in its namespace: as before
    assert [item["metadata"]["name"] for item in deleted["items"]] == ["kept"]
    await client.create(NODES, {"metadata": {"name": "swept", "labels": {"doomed": "yes"}}})
    deleted = await client.delete(NODES, labelSelector="doomed")  # a cluster-scoped type's: as before
    assert [item["metadata"]["name"] for item in deleted["items"]] == ["swept"]


async def test_a_self_link_is_never_stored(client: Client) -> None:
    created = await client.create(CMS, {"metadata": {"name": "cm", "selfLink": "/api/v1/elsewhere"}})
    assert "selfLink" not in created["metadata"]
    patched = await client.patch(f"{CMS}/cm", {"metadata": {"selfLink": "/x", "labels": {"a": "b"}}})
    updated = await client.update(f"{CMS}/cm", {**patched, "metadata": {**patched["metadata"], "selfLink": "/y"}})
    assert "selfLink" not in patched["metadata"] and "selfLink" not in updated["metadata"]
    assert "selfLink" not in (await client.get(f"{CMS}/cm"))["metadata"]


async def test_a_create_clears_a_deletions_timestamp_and_grace_period(client: Client) -> None:
    # as upstream's BeforeCreate: a new object is never being deleted (the grace period was kept)
    created = await client.create(CMS, {"metadata": {"name": "fresh", "deletionTimestamp": "2020-01-01T00:00:00Z",
                                                     "deletionGracePeriodSeconds": 3}})
    stored = (await client.get(f"{CMS}/fresh"))["metadata"]
    for meta in (created["metadata"], stored):
        assert "deletionTimestamp" not in meta and "deletionGracePeriodSeconds" not in meta


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
async def test_the_immortal_namespaces_may_not_be_deleted(client: Client, name: str) -> None:
    namespaces = resource_path("", "v1", "namespaces")
    for dry_run in (None, "All"):
        with pytest.raises(ApiError) as e:
            await client.delete(f"{namespaces}/{name}", dryRun=dry_run)
        assert (e.value.code, e.value.reason) == (403, "Forbidden")
        assert e.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    ns = await client.get(f"{namespaces}/{name}")
    assert "deletionTimestamp" not in ns["metadata"] and ns["status"]["phase"] == "Active"


async def test_the_kubernetes_service_names_this_server(client: Client) -> None:
    """kube-apiserver's bootstrap controller: the ``kubernetes`` Service at the first address of
    the service range, its Endpoints and EndpointSlice at the server's address and port."""
    svc = await client.get(resource_path("", "v1", "services", "default") + "/kubernetes")
    assert svc["spec"]["clusterIP"] == "10.96.0.1" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    endpoints = await client.get(resource_path("", "v1", "endpoints", "default") + "/kubernetes")
    assert endpoints["subsets"] == [{"addresses": [{"ip": "127.0.0.1"}],
                                     "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
    sliced = await client.get(resource_path("discovery.k8s.io", "v1", "endpointslices", "default") + "/kubernetes")
    assert sliced["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
    assert sliced["endpoints"] == [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]


async def test_owner_references_are_complete_and_name_one_controller(client: Client) -> None:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u-a", "controller": True}
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "x", "ownerReferences": [{**ref, "uid": ""}]}})
    assert e.value.code == 422
    assert 'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty' in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "x", "ownerReferences": [
            ref, {**ref, "name": "b", "uid": "u-b"}]}})
    assert e.value.code == 422
    assert ('Only one reference can have Controller set to true. Found "true" in references for ConfigMap/a and '
            "ConfigMap/b") in e.value.message
    made = await client.create(CMS, {"metadata": {"name": "x", "ownerReferences": [ref]}})
    assert made["metadata"]["ownerReferences"] == [ref]


async def test_no_new_finalizer_once_deletion_began(client: Client) -> None:
    await client.create(CMS, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    await client.delete(f"{CMS}/held")
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/held", {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})
    assert e.value.code == 422
    assert ('metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found '
            'new finalizers []string{"example.com/new"}') in e.value.message
    await client.patch(f"{CMS}/held", {"metadata": {"finalizers": []}})  # removing one is allowed: it goes
    with pytest.raises(ApiError) as gone:
        await client.get(f"{CMS}/held")
    assert gone.value.code == 404


async def test_a_json_patch_that_does_not_apply_is_refused_in_upstreams_words(client: Client) -> None:
    """Upstream's patch handler wraps the json-patch library's error in NewGenericServerResponse
    (422), whose Status has its own words and empty details, not the library's message; a
    patch that is not a list of operations does not decode (400, in Go's words)."""
    await client.create(CMS, {"metadata": {"name": "jp"}, "data": {"a": "1"}})
    for patch in ([{"op": "test", "path": "/data/a", "value": "2"}],
                  [{"op": "add", "path": "/data/a", "value": "2"},
                   {"op": "replace", "path": "/spec/nope/x", "value": 1}],
                  [{"op": "remove", "path": "/data/b"}], [{"op": "bogus", "path": "/data/a"}], [{"op": "add"}]):
        with pytest.raises(ApiError) as e:
            await client.patch(f"{CMS}/jp", patch, "json")
        assert (e.value.code, e.value.reason, e.value.status["details"]) == (422, "Invalid", {}), patch
        assert e.value.message == "the server rejected our request due to an error in our request"
    undecodable: list[tuple[Any, str]] = [({"op": "add"}, "object into Go value of type jsonpatch.Patch"),
                                          ([{"op": "add", "path": "/data/b", "value": "1"}, 3],
                                           "number into Go value of type jsonpatch.Operation")]
    for body, why in undecodable:
        with pytest.raises(ApiError) as e:
            await client.patch(f"{CMS}/jp", body, "json")
        assert (e.value.code, e.value.message) == (400, f"json: cannot unmarshal {why}")
    assert (await client.get(f"{CMS}/jp"))["data"] == {"a": "1"}
    with pytest.raises(ApiError) as e:  # upstream's maxJSONPatchOperations
        await client.patch(f"{CMS}/jp", [{"op": "test", "path": "/data/a", "value": "1"}] * 10_001, "json")
    assert e.value.code == 413
    assert e.value.message.endswith("The allowed maximum operations in a JSON patch is 10000, got 10001")


async def test_a_dry_run_does_not_outlive_its_request(client: Client) -> None:
    """The in-process client runs the app in the caller's task: a dry run's context (or a
    converted type's) must end with its request, or the next create is silently not stored."""
    body = {"metadata": {"name": "after-dry-run"}, "data": {"a": "1"}}
    await client.create(CMS, body, dryRun="All")
    made = await client.create(CMS, body)
    assert (await client.get(f"{CMS}/after-dry-run"))["metadata"]["uid"] == made["metadata"]["uid"]
    await client.create("/apis/events.k8s.io/v1/namespaces/default/events", {
        "metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "t",
        "reportingInstance": "t", "action": "A", "reason": "R", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": "after-dry-run", "namespace": "default"}})
    await client.create(CMS, {"metadata": {"name": "after-conversion"}})  # stored as a ConfigMap, not converted
    assert (await client.get(f"{CMS}/after-conversion"))["kind"] == "ConfigMap"


async def test_a_delete_that_races_another_is_not_found_in_the_usual_words(tmp_path: Path) -> None:
    """``kubectl delete -f`` of a namespace and its pod: the namespace's deletion may delete the
    pod between the pod delete's read and its write. Upstream's store answers that write's
    NotFound as the registry's, ``pods "web" not found``; the same for a mark of an object
    with finalizers."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client:
        kube = app.state.front.kube
        pods = resource_path("", "v1", "pods", "default")
        await client.create(pods, {"metadata": {"name": "web"},  # bound: its delete is graceful
                                   "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
        await client.create(CMS, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
        update = kube.store.update

        async def deleted_first(key: bytes, value: bytes, expected: int) -> int:
            await kube.store.delete(key)  # another request's delete, just before this write
            revision: int = await update(key, value, expected)
            return revision

        kube.store.update = deleted_first
        try:
            for path, message in ((f"{pods}/web", 'pods "web" not found'),
                                  (f"{CMS}/held", 'configmaps "held" not found')):
                with pytest.raises(ApiError) as e:
                    await client.delete(path)
                assert (e.value.code, e.value.reason, e.value.message) == (404, "NotFound", message)
        finally:
            kube.store.update = update
