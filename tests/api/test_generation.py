"""metadata.generation type by type, as upstream's registry strategies (rest.GENERATION):
only the types whose PrepareForCreate sets it have one, each stepped by the fields its
PrepareForUpdate compares; the others keep what a create carried, and no update or
deletion gives them one."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

CMS = resource_path("", "v1", "configmaps", "default")
PODS = resource_path("", "v1", "pods", "default")
TEMPLATES = resource_path("", "v1", "podtemplates", "default")
SLICES = resource_path("discovery.k8s.io", "v1", "endpointslices", "default")
CLASSES = resource_path("scheduling.k8s.io", "v1", "priorityclasses")
HOOKS = resource_path("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
ROLES = resource_path("rbac.authorization.k8s.io", "v1", "roles", "default")
CONTAINERS = [{"name": "c", "image": "nginx"}]


async def test_a_configmap_has_none_through_create_update_and_a_held_deletion(client: Client) -> None:
    made = await client.create(CMS, {"metadata": {"name": "c", "finalizers": ["example.com/x"]}, "data": {"a": "1"}})
    assert "generation" not in made["metadata"]
    made["data"] = {"a": "2"}
    assert "generation" not in (await client.update(f"{CMS}/c", made))["metadata"]
    await client.delete(f"{CMS}/c")
    held = await client.get(f"{CMS}/c")
    assert held["metadata"]["deletionTimestamp"] and "generation" not in held["metadata"]
    await client.patch(f"{CMS}/c", {"metadata": {"finalizers": None}})


async def test_a_role_has_none(client: Client) -> None:
    role = await client.create(ROLES, {"metadata": {"name": "r"}, "rules": []})
    assert "generation" not in role["metadata"]
    role["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    assert "generation" not in (await client.update(f"{ROLES}/r", role))["metadata"]


async def test_a_negative_generation_sent_at_create_is_invalid(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "neg", "generation": -1}})
    assert e.value.code == 422 and "metadata.generation: Invalid value: -1" in e.value.message
    # a type that keeps one sets its own, whatever was sent
    pod = await client.create(PODS, {"metadata": {"name": "p", "generation": 7}, "spec": {"containers": CONTAINERS}})
    assert pod["metadata"]["generation"] == 1


async def test_a_priority_class_starts_at_1_and_no_update_steps_it(client: Client) -> None:
    pc = await client.create(CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    assert pc["metadata"]["generation"] == 1
    pc["description"] = "changed"
    assert (await client.update(f"{CLASSES}/high", pc))["metadata"]["generation"] == 1
    system = await client.get(f"{CLASSES}/system-node-critical")
    assert system["metadata"]["generation"] == 1


async def test_webhook_configurations_step_when_their_webhooks_change(client: Client) -> None:
    hook: dict[str, Any] = {"name": "a.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "clientConfig": {"url": "https://example.com/hook"}}
    made = await client.create(HOOKS, {"metadata": {"name": "w"}, "webhooks": [hook]})
    assert made["metadata"]["generation"] == 1
    made["metadata"]["labels"] = {"x": "y"}
    made = await client.update(f"{HOOKS}/w", made)
    assert made["metadata"]["generation"] == 1
    made["webhooks"][0]["timeoutSeconds"] = 5
    assert (await client.update(f"{HOOKS}/w", made))["metadata"]["generation"] == 2


async def test_an_endpointslice_steps_on_any_change_but_to_its_metadata(client: Client) -> None:
    made = await client.create(SLICES, {"metadata": {"name": "s"}, "addressType": "IPv4",
                                        "endpoints": [{"addresses": ["10.0.0.1"]}]})
    assert made["metadata"]["generation"] == 1
    labelled = await client.patch(f"{SLICES}/s", {"metadata": {"labels": {"x": "y"}}})
    assert labelled["metadata"]["generation"] == 1
    moved = await client.patch(f"{SLICES}/s", {"endpoints": [{"addresses": ["10.0.0.2"]}]})
    assert moved["metadata"]["generation"] == 2
    assert (await client.get(f"{SLICES}/kubernetes"))["metadata"]["generation"] == 1  # the bootstrap one too


async def test_a_pod_template_steps_when_its_template_changes(client: Client) -> None:
    made = await client.create(TEMPLATES, {"metadata": {"name": "t"}, "template": {"spec": {"containers": CONTAINERS}}})
    assert made["metadata"]["generation"] == 1
    assert (await client.patch(f"{TEMPLATES}/t", {"metadata": {"labels": {"a": "b"}}}))["metadata"]["generation"] == 1
    changed = await client.patch(f"{TEMPLATES}/t", {"template": {"metadata": {"labels": {"a": "b"}}}})
    assert changed["metadata"]["generation"] == 2


async def test_an_ephemeral_container_is_a_new_generation_of_its_pod(client: Client) -> None:
    await client.create(PODS, {"metadata": {"name": "e"}, "spec": {"containers": CONTAINERS}})
    got = await client.patch(f"{PODS}/e/ephemeralcontainers",
                             {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}}, "strategic")
    assert got["metadata"]["generation"] == 2
