"""The device taint eviction controller (controllers/devicetainteviction.py): a claim's eviction
time as upstream's claimEvictionTime makes it, and, through the API, a running pod whose
device a NoExecute DeviceTaintRule selects is evicted while one whose claim tolerates it
stays, the rule's EvictionInProgress condition written."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client, resource_path
from controlplane.config import Config
from controlplane.controllers.devicetainteviction import (
    DeviceTaintEvictionController,
    Eviction,
    claim_eviction,
    toleration_seconds,
)

DRIVER = "gpu.example.com"
ADDED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # ADDED in seconds
MAINT = {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute", "timeAdded": ADDED}
PODS = "/api/v1/namespaces/default/pods"
CLAIMS = resource_path("resource.k8s.io", "v1", "resourceclaims", "default")
RULES = resource_path("resource.k8s.io", "v1", "devicetaintrules", None)
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices", None)


def rule(name: str, taint: dict[str, Any] = MAINT, **selector: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"deviceSelector": selector, "taint": taint}}


def allocated(device: str, *tolerations: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}
    if tolerations:
        result["tolerations"] = list(tolerations)
    return {"status": {"allocation": {"devices": {"results": [result]}}}}


def no_slice_taints(driver: str, pool: str, device: str) -> list[dict[str, Any]]:
    return []


def test_only_noexecute_tolerations_count_and_the_shortest_time_wins() -> None:
    assert toleration_seconds(MAINT, []) is None
    assert toleration_seconds(MAINT, [{"operator": "Exists"}]) is None  # no effect: not a NoExecute toleration
    assert toleration_seconds(MAINT, [{"operator": "Exists", "effect": "NoExecute"}]) == float("inf")
    assert toleration_seconds(MAINT, [
        {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute", "tolerationSeconds": 60},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        {"key": "example.com/maintenance", "value": "other", "effect": "NoExecute", "tolerationSeconds": 5}]) == 30
    assert toleration_seconds(MAINT, [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -3}]) == 0


def test_a_claims_eviction_is_its_earliest_untolerated_taint_from_a_slice_or_a_rule() -> None:
    rules = {"maint": rule("maint", driver=DRIVER, device="gpu-0")}
    assert claim_eviction(allocated("gpu-0"), no_slice_taints, rules) == Eviction(T0, ("maint",))
    assert claim_eviction(allocated("gpu-1"), no_slice_taints, rules) is None  # not selected
    later = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}
    assert claim_eviction(allocated("gpu-0", later), no_slice_taints, rules) == Eviction(T0 + 600, ("maint",))
    forever = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}
    assert claim_eviction(allocated("gpu-0", forever), no_slice_taints, rules) is None

    def slice_taints(driver: str, pool: str, device: str) -> list[dict[str, Any]]:
        return [{"key": "example.com/ecc", "effect": "NoExecute", "timeAdded": "2025-12-31T23:59:00Z"}]

    from_slice = claim_eviction(allocated("gpu-0", forever), slice_taints, rules)
    assert from_slice is not None and from_slice.when == T0 - 60 and from_slice.rules == ()


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


async def _running_pod(client: Client, name: str, device: str, *tolerations: dict[str, Any]) -> None:
    """A pod bound to n1 whose claim holds ``device``, reserved for it."""
    await client.create(CLAIMS, {"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    pod = await client.create(PODS, {"metadata": {"name": name}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
    status = allocated(device, *tolerations)["status"]
    status["reservedFor"] = [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]
    await client.patch(f"{CLAIMS}/{name}/status", {"status": status})


async def test_a_rules_noexecute_taint_evicts_the_pods_that_do_not_tolerate_it(client: Client) -> None:
    await client.create(SLICES, {"metadata": {"name": "n1"}, "spec": {
        "driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(3)]}})
    await _running_pod(client, "victim", "gpu-0")
    await _running_pod(client, "tolerant", "gpu-1", {"operator": "Exists", "effect": "NoExecute"})
    await _running_pod(client, "patient", "gpu-2", {"operator": "Exists", "effect": "NoExecute",
                                                    "tolerationSeconds": 3600})
    await client.create(RULES, rule("maint", {k: v for k, v in MAINT.items() if k != "timeAdded"}, pool="n1"))
    controller = DeviceTaintEvictionController(client)
    task = asyncio.create_task(controller.run())
    try:
        async with asyncio.timeout(10):
            while not (await client.get(f"{PODS}/victim"))["metadata"].get("deletionTimestamp"):
                await asyncio.sleep(0.05)  # bound: deleted with its grace period, no kubelet to end it
            while not (await client.get(f"{RULES}/maint")).get("status", {}).get("conditions"):
                await asyncio.sleep(0.05)
        victim = await client.get(f"{PODS}/victim")
        [disruption] = [c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (disruption["status"], disruption["reason"], disruption["message"]) == (
            "True", "DeletionByDeviceTaintManager", "Device Taint manager: deleting due to NoExecute taint")
        for name in ("tolerant", "patient"):
            assert not (await client.get(f"{PODS}/{name}"))["metadata"].get("deletionTimestamp"), name
        [condition] = (await client.get(f"{RULES}/maint"))["status"]["conditions"]
        assert condition["type"] == "EvictionInProgress" and condition["observedGeneration"] == 1
        # the patient pod waits for its hour: the rule's eviction is in progress, and it evicted one
        # (once the controller has seen the patient's claim too: on a loaded machine it may still be
        # behind when the victim's eviction is done)
        pending = ("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace.")
        async with asyncio.timeout(10):
            while controller._rule_condition("maint", controller.rules["maint"]) != pending:
                await asyncio.sleep(0.05)
        events = (await client.list("/api/v1/namespaces/default/events"))["items"]
        assert any(e["reason"] == "DeviceTaintManagerEviction" and e["message"] == "Marking for deletion"
                   and e["involvedObject"]["name"] == "victim" for e in events)
        # the rule relaxed to NoSchedule: nothing is pending any more
        await client.patch(f"{RULES}/maint", {"spec": {"taint": {"effect": "NoSchedule"}}})
        async with asyncio.timeout(10):
            while "default/patient" in controller.scheduled:
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_none_rule_says_what_noexecute_would_do(client: Client) -> None:
    await client.create(SLICES, {"metadata": {"name": "n1"}, "spec": {
        "driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(2)]}})
    await _running_pod(client, "p", "gpu-0")
    await client.create(RULES, rule("preview", {"key": "example.com/health", "effect": "None"}, driver=DRIVER))
    controller = DeviceTaintEvictionController(client)
    task = asyncio.create_task(controller.run())
    try:
        async with asyncio.timeout(10):
            while not (await client.get(f"{RULES}/preview")).get("status", {}).get("conditions"):
                await asyncio.sleep(0.05)
        [condition] = (await client.get(f"{RULES}/preview"))["status"]["conditions"]
        assert (condition["status"], condition["reason"]) == ("False", "NoEffect")
        assert condition["message"] == (
            "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if "
            "the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to "
            "trigger an update.")
        assert not (await client.get(f"{PODS}/p"))["metadata"].get("deletionTimestamp")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
