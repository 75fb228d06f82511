"""Shared by the autoscaler's API-level tests: objects and waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from controlplane.autoscaler.catalog import Catalog
from controlplane.client import Client, resource_path
from controlplane.nodes.instancetypes import GpuDevice, InstanceType

PODS = resource_path("", "v1", "pods", "default")
NODES = resource_path("", "v1", "nodes")
POOLS = resource_path("karpenter.sh", "v1", "nodepools")
CLAIMS = resource_path("karpenter.sh", "v1", "nodeclaims")
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")

LATENCY = 0.3

FAST_TYPES = [
    InstanceType("cpu-small", cpu="2", memory="8Gi", pods=20, price=0.1, launch_latency_seconds=LATENCY),
    InstanceType("cpu-large", cpu="32", memory="128Gi", pods=110, price=1.6, launch_latency_seconds=LATENCY),
    InstanceType("gpu-1x", cpu="8", memory="32Gi", price=1.0, launch_latency_seconds=LATENCY,
                 extended_resources={"nvidia.com/gpu": "1"}, gpus=(GpuDevice("L4", "24Gi", 1),)),
    InstanceType("gpu-8x", cpu="96", memory="768Gi", price=10.0, launch_latency_seconds=LATENCY,
                 extended_resources={"nvidia.com/gpu": "8"}, gpus=(GpuDevice("A100", "80Gi", 8),)),
]
FAST = Catalog.of(FAST_TYPES)


def nodepool(name: str, *, consolidate_after: str = "1s", budgets: list[dict[str, Any]] | None = None,
             limits: dict[str, str] | None = None, requirements: list[dict[str, Any]] | None = None,
             taints: list[dict[str, Any]] | None = None, policy: str = "WhenEmptyOrUnderutilized") -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "requirements": requirements or []}
    if taints:
        template_spec["taints"] = taints
    disruption: dict[str, Any] = {"consolidateAfter": consolidate_after, "consolidationPolicy": policy}
    if budgets is not None:
        disruption["budgets"] = budgets
    spec: dict[str, Any] = {"template": {"spec": template_spec}, "disruption": disruption}
    if limits:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def pod(name: str, cpu: str = "1", *, dra: bool = False, gpus: int = 0, node: str = "") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": resources}],
                            "terminationGracePeriodSeconds": 1}
    if dra:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}}
CLAIM_TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "one-gpu", "namespace": "default"},
                  "spec": {"spec": {"devices": {"requests": [
                      {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}


async def create_dra_objects(client: Client) -> None:
    await client.create(resource_path("resource.k8s.io", "v1", "deviceclasses"), DEVICE_CLASS)
    await client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default"),
                        CLAIM_TEMPLATE)


async def unschedulable(client: Client, name: str) -> None:
    """What the scheduler writes when no node fits."""
    await client.patch(f"{PODS}/{name}/status", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/0 nodes are available", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})


async def pending_pods(client: Client, pods: list[dict[str, Any]], mark: bool = False) -> None:
    """Create the pods; ``mark``: also mark them unschedulable, for a server without a scheduler."""
    await asyncio.gather(*(client.create(PODS, p) for p in pods))
    if mark:
        await asyncio.gather(*(unschedulable(client, p["metadata"]["name"]) for p in pods))


async def bind(client: Client, pod_name: str, node: str) -> None:
    await client.create(f"{PODS}/{pod_name}/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name, "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


async def wait_for(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        await asyncio.sleep(interval)


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}
