"""A patch is applied to the version it read without copying what the patch leaves alone
(rest.py ``_patch``): the patched object shares those parts with the version read. These
check what must not change with that: a patch that changes nothing writes nothing, the
spec's generation counts only spec changes, and a write through a subresource keeps the
rest as stored, for each patch type, through the status subresource and the object."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import Client, resource_path

PODS = resource_path("", "v1", "pods", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}}


RUNNING = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("patch_type", ["merge", "strategic"])
async def test_a_status_patch_changes_the_status_and_nothing_else_and_again_nothing(
        client: Client, patch_type: str) -> None:
    created = await client.create(PODS, _pod("p"))
    first = await client.patch(f"{PODS}/p/status", RUNNING, patch_type, fieldManager="kubelet")
    assert first["status"]["phase"] == "Running"
    assert first["status"]["conditions"] == [{"type": "Ready", "status": "True", "lastProbeTime": None,
                                              "lastTransitionTime": None}]
    assert first["spec"] == created["spec"] and first["metadata"]["labels"] == {"app": "a"}
    assert int(first["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert "generation" not in first["metadata"] or first["metadata"]["generation"] == \
        created["metadata"].get("generation")
    owners = {(e.get("manager", ""), e.get("subresource", "")) for e in first["metadata"]["managedFields"]}
    assert ("kubelet", "status") in owners
    again = await client.patch(f"{PODS}/p/status", RUNNING, patch_type, fieldManager="kubelet")
    assert again == first  # nothing written: the same resourceVersion and managedFields times
    assert await client.get(f"{PODS}/p") == first


@pytest.mark.parametrize("patch_type", ["merge", "strategic", "json"])
async def test_a_patch_of_the_object_keeps_its_status_and_counts_spec_changes(client: Client, patch_type: str) -> None:
    created = await client.create(DEPLOYMENTS, {
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
                 "template": {"metadata": {"labels": {"app": "a"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    status = await client.patch(f"{DEPLOYMENTS}/d/status", {"status": {"observedGeneration": 1, "replicas": 1}})
    generation = created["metadata"]["generation"]
    labels: Any = ([{"op": "add", "path": "/metadata/labels", "value": {"team": "x"}}] if patch_type == "json"
                   else {"metadata": {"labels": {"team": "x"}}})
    labelled = await client.patch(f"{DEPLOYMENTS}/d", labels, patch_type)
    assert labelled["metadata"]["labels"] == {"team": "x"} and labelled["metadata"]["generation"] == generation
    assert labelled["status"] == status["status"] and labelled["spec"] == status["spec"]
    scaled_patch: Any = ([{"op": "replace", "path": "/spec/replicas", "value": 3}] if patch_type == "json"
                         else {"spec": {"replicas": 3}})
    scaled = await client.patch(f"{DEPLOYMENTS}/d", scaled_patch, patch_type)
    assert scaled["spec"]["replicas"] == 3 and scaled["metadata"]["generation"] == generation + 1
    assert scaled["spec"]["template"] == created["spec"]["template"] and scaled["status"] == status["status"]
    again = await client.patch(f"{DEPLOYMENTS}/d", scaled_patch, patch_type)
    assert again["metadata"]["resourceVersion"] == scaled["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == generation + 1
    assert await client.get(f"{DEPLOYMENTS}/d") == scaled


async def test_a_merge_patch_removing_a_key_of_a_shared_map_leaves_the_stored_one_whole(client: Client) -> None:
    await client.create(PODS, {**_pod("q"), "metadata": {"name": "q", "labels": {"app": "a", "tier": "t"},
                                                          "annotations": {"k": "v"}}})
    before = await client.get(f"{PODS}/q")
    # a status patch read the same cached version: its metadata is not this patch's to change
    await client.patch(f"{PODS}/q/status", {"status": {"phase": "Running"}})
    patched = await client.patch(f"{PODS}/q", {"metadata": {"labels": {"tier": None}, "annotations": None}})
    assert patched["metadata"]["labels"] == {"app": "a"} and "annotations" not in patched["metadata"]
    assert patched["spec"] == before["spec"]
    assert (await client.get(f"{PODS}/q"))["metadata"]["labels"] == {"app": "a"}
