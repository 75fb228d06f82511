"""Empty lists and maps of the built-in kinds on every write path, as kube-apiserver reads
them back: it stores them as protobuf, which has no empty repeated field or map, so an
``args: []`` or ``labels: {}`` decodes to Go's nil and is left out (``omitempty``) or written
as ``null`` (a Role's ``rules``), in the write's response too. Custom resources, stored as
JSON, keep theirs (``registry/validation.py``: ``empty_collections``)."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client, resource_path

PODS = resource_path("", "v1", "pods", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
ROLES = resource_path("rbac.authorization.k8s.io", "v1", "roles", "default")


def deployment(name: str, **pod_spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}], **pod_spec}}}}


def container(obj: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return c


async def test_a_create_answers_and_stores_its_empty_lists_and_maps_left_out(client: Client) -> None:
    created = await client.create(PODS, {
        "metadata": {"name": "p", "labels": {}, "annotations": {}, "finalizers": []},
        "spec": {"containers": [{"name": "c", "image": "i", "args": [], "command": [], "env": [], "ports": [],
                                 "resources": {"limits": {}}}],
                 "nodeSelector": {}, "imagePullSecrets": [], "securityContext": {}}})
    for pod in (created, await client.get(f"{PODS}/p")):
        assert "labels" not in pod["metadata"] and "annotations" not in pod["metadata"]
        [c] = pod["spec"]["containers"]
        assert not {"args", "command", "env", "ports"} & set(c)
        assert c["resources"] == {}  # a struct: kept, its empty map not
        assert "nodeSelector" not in pod["spec"] and "imagePullSecrets" not in pod["spec"]
        assert pod["spec"]["securityContext"] == {}


async def test_a_list_without_omitempty_reads_back_null(client: Client) -> None:
    created = await client.create(ROLES, {"metadata": {"name": "r"}, "rules": []})
    assert created["rules"] is None
    assert (await client.get(f"{ROLES}/r"))["rules"] is None
    updated = await client.update(f"{ROLES}/r", {**created, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert updated["rules"][0]["verbs"] == ["get"]
    patched = await client.patch(f"{ROLES}/r", {"rules": []}, "merge")
    assert patched["rules"] is None


async def test_rules_null_once_stored_are_the_same_rules_as_an_updates_empty_ones(client: Client) -> None:
    """An update's ``rules: []`` is ``[]`` through admission and null once stored: the same as
    the stored null, as upstream compares the bytes it would store (no write, no new
    resourceVersion) and its strategies compare Go values (no new generation)."""
    created = await client.create(ROLES, {"metadata": {"name": "same"}, "rules": []})
    again = await client.update(f"{ROLES}/same", {**created, "rules": []})
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    patched = await client.patch(f"{ROLES}/same", {"rules": []}, "merge")
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    job = {"metadata": {"name": "j"}, "spec": {
        "podFailurePolicy": {"rules": []},
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}
    jobs = resource_path("batch", "v1", "jobs", "default")
    made = await client.create(jobs, job)
    assert made["spec"]["podFailurePolicy"] == {"rules": None} and made["metadata"]["generation"] == 1
    made["spec"]["podFailurePolicy"]["rules"] = []
    made["metadata"].setdefault("labels", {})["touched"] = "yes"  # (a write, of no new generation)
    updated = await client.update(f"{jobs}/j", made)
    assert updated["metadata"]["labels"]["touched"] == "yes"
    assert updated["spec"]["podFailurePolicy"] == {"rules": None} and updated["metadata"]["generation"] == 1


async def test_updates_and_patches_of_every_type(client: Client) -> None:
    created = await client.create(DEPLOYMENTS, deployment("d"))
    created["spec"]["template"]["spec"]["tolerations"] = []
    updated = await client.update(f"{DEPLOYMENTS}/d", created)
    assert "tolerations" not in updated["spec"]["template"]["spec"]
    merged = await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"volumes": []}}}}, "merge")
    assert "volumes" not in merged["spec"]["template"]["spec"]
    # a strategic merge patch's directives: the last item deleted, the list replaced by nothing
    await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "A", "value": "1"}]}]}}}}, "strategic")
    deleted = await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "A", "$patch": "delete"}]}]}}}}, "strategic")
    assert "env" not in container(deleted)
    await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "A", "value": "1"}]}]}}}}, "strategic")
    replaced = await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"$patch": "replace"}]}]}}}}, "strategic")
    assert "env" not in container(replaced)
    labels = await client.patch(f"{DEPLOYMENTS}/d", {"metadata": {"labels": {"$patch": "replace"}}}, "strategic")
    assert "labels" not in labels["metadata"]
    json_patched = await client.patch(f"{DEPLOYMENTS}/d", [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/spec/template/spec/containers/0/args", "value": []}], "json")
    assert "annotations" not in json_patched["metadata"] and "args" not in container(json_patched)
    assert container(await client.get(f"{DEPLOYMENTS}/d")) == container(json_patched)


async def test_a_server_side_apply_owns_what_it_sent_and_stores_it_as_decoded(client: Client) -> None:
    """Upstream's field manager works on the applied configuration, so the manager owns
    ``env`` though the object, stored as protobuf, has none (kubernetes/kubernetes#128924);
    applying it again changes nothing."""
    config = (b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n"
              b"spec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n"
              b"    spec: {containers: [{name: c, image: i, env: []}], tolerations: []}\n")
    applied = await client.request("PATCH", f"{DEPLOYMENTS}/a", config, "application/apply-patch+yaml",
                                   fieldManager="me")
    assert "env" not in container(applied) and "tolerations" not in applied["spec"]["template"]["spec"]
    [entry] = applied["metadata"]["managedFields"]
    spec = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]
    assert "f:tolerations" in spec and "f:env" in spec["f:containers"]['k:{"name":"c"}']
    again = await client.request("PATCH", f"{DEPLOYMENTS}/a", config, "application/apply-patch+yaml",
                                 fieldManager="me")
    assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


async def test_custom_resources_keep_their_empty_lists(client: Client) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {
                                          "args": {"type": "array", "items": {"type": "string"}},
                                          "labels": {"type": "object",
                                                     "additionalProperties": {"type": "string"}}}}}}}}]}}
    await client.create(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), crd)
    gadgets = resource_path("example.com", "v1", "gadgets", "default")
    created = await client.create(gadgets, {"apiVersion": "example.com/v1", "kind": "Gadget",
                                            "metadata": {"name": "g"}, "spec": {"args": [], "labels": {}}})
    assert created["spec"] == {"args": [], "labels": {}}
    assert (await client.get(f"{gadgets}/g"))["spec"] == {"args": [], "labels": {}}
