"""Inputs for DRA benchmarks: nodes with partitionable GPUs, their classes and claim templates.

Each node publishes one pool (``gpu-<node>``): one slice with the counter sets (one
per GPU: 80Gi of memory and 7 multiprocessor slices) and the devices in slices of
whole GPUs, at most 64 devices each (upstream's limit for devices that consume
counters: 6 GPUs' ten devices); at most 8 GPUs a node, upstream's limit of counter
sets in a slice. Each GPU is offered whole (``gpu-3``, consuming all of its
counters) and as partitions: two ``3g.40gb`` (3 slices, 40Gi) and seven ``1g.10gb``
(1 slice, 10Gi). So a GPU serves either itself whole, or partitions up to its
counters (e.g. two 3g and one 1g), never both::

    data = gpu_cluster(nodes=1000, gpus_per_node=8)
    data.slices, data.classes, data.templates    # API objects to create
    gpu_pod("p-1", "default", "mig-1g")          # a pod claiming one 1g partition

Template names: ``whole-gpu``, ``mig-3g``, ``mig-1g``; device classes
``gpu.example.com``, ``mig-3g.gpu.example.com``, ``mig-1g.gpu.example.com``.

For a benchmark through the API (``controlplane bench scheduler``)::

    data = gpu_cluster(nodes=1000)
    await create_gpu_cluster(client, data)              # classes, templates, nodes, slices
    ... create gpu_pod(f"p-{i}", "default", t) for t in template_mix(20000), wait until bound ...
    assert await cluster_invariants(client) == []      # no device double-allocated or overcommitted
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DRIVER", "TEMPLATES", "GpuCluster", "claim_templates", "cluster_invariants", "create_gpu_cluster",
           "device_classes", "gpu_cluster", "gpu_node", "gpu_pod", "node_slices", "template_mix"]

DRIVER = "gpu.example.com"
TEMPLATES = {"whole-gpu": "gpu.example.com", "mig-3g": "mig-3g.gpu.example.com", "mig-1g": "mig-1g.gpu.example.com"}


@dataclass
class GpuCluster:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)


def gpu_node(name: str, gpus: int = 8) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "gpu.example.com/present": "true"}},
            "spec": {}, "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _attrs(kind: str, gpu: int, profile: str) -> dict[str, Any]:
    return {"type": {"string": kind}, "index": {"int": gpu}, "profile": {"string": profile},
            "model": {"string": "H100"}, "driverVersion": {"version": "550.54.15"}}


DEVICES_PER_SLICE = 64  # ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
_DEVICES_PER_GPU = 10  # whole, two 3g, seven 1g


def node_slices(node: str, gpus: int = 8) -> list[dict[str, Any]]:
    per_slice = DEVICES_PER_SLICE // _DEVICES_PER_GPU * _DEVICES_PER_GPU
    device_slices = max(1, -(-gpus * _DEVICES_PER_GPU // per_slice))
    pool = {"name": f"gpu-{node}", "generation": 1, "resourceSliceCount": 1 + device_slices}
    counter_sets = [{"name": f"gpu-{g}-counters",
                     "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}} for g in range(gpus)]
    devices: list[dict[str, Any]] = []
    for g in range(gpus):
        cs = f"gpu-{g}-counters"
        devices.append({"name": f"gpu-{g}", "attributes": _attrs("gpu", g, "whole"),
                        "capacity": {"memory": {"value": "80Gi"}},
                        "consumesCounters": [{"counterSet": cs, "counters": {"memory": {"value": "80Gi"},
                                                                              "slices": {"value": "7"}}}]})
        for m in range(2):
            devices.append({"name": f"gpu-{g}-3g-{m}", "attributes": _attrs("mig", g, "3g.40gb"),
                            "capacity": {"memory": {"value": "40Gi"}},
                            "consumesCounters": [{"counterSet": cs, "counters": {"memory": {"value": "40Gi"},
                                                                                  "slices": {"value": "3"}}}]})
        for m in range(7):
            devices.append({"name": f"gpu-{g}-1g-{m}", "attributes": _attrs("mig", g, "1g.10gb"),
                            "capacity": {"memory": {"value": "10Gi"}},
                            "consumesCounters": [{"counterSet": cs, "counters": {"memory": {"value": "10Gi"},
                                                                                  "slices": {"value": "1"}}}]})
    meta = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
    return [
        {**meta, "metadata": {"name": f"{node}-gpu-counters"},
         "spec": {"driver": DRIVER, "pool": pool, "nodeName": node, "sharedCounters": counter_sets}},
        *({**meta, "metadata": {"name": f"{node}-gpu-devices" + (f"-{i}" if i else "")},
           "spec": {"driver": DRIVER, "pool": pool, "nodeName": node,
                    "devices": devices[i * per_slice:(i + 1) * per_slice]}} for i in range(device_slices)),
    ]


def device_classes() -> list[dict[str, Any]]:
    def cls(name: str, expr: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expr}}]}}

    base = f'device.driver == "{DRIVER}"'
    return [
        cls("gpu.example.com", f'{base} && device.attributes["{DRIVER}"].type == "gpu"'),
        cls("mig-3g.gpu.example.com", f'{base} && device.attributes["{DRIVER}"].profile == "3g.40gb"'),
        cls("mig-1g.gpu.example.com", f'{base} && device.attributes["{DRIVER}"].profile == "1g.10gb"'),
    ]


def claim_templates(namespace: str = "default") -> list[dict[str, Any]]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}}}
            for name, cls in TEMPLATES.items()]


def gpu_cluster(nodes: int = 1000, gpus_per_node: int = 8, namespace: str = "default",
                node_prefix: str = "gpu-node-") -> GpuCluster:
    out = GpuCluster(classes=device_classes(), templates=claim_templates(namespace))
    for i in range(nodes):
        name = f"{node_prefix}{i}"
        out.nodes.append(gpu_node(name, gpus_per_node))
        out.slices.extend(node_slices(name, gpus_per_node))
    return out


def gpu_pod(name: str, namespace: str, template: str, cpu: str = "1") -> dict[str, Any]:
    """A pod whose one container uses one claim made from ``template``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}


def template_mix(n: int, seed: int = 1) -> list[str]:
    """``n`` template names: 10% whole GPUs, 20% 3g partitions, 70% 1g partitions.

    20,000 of them fill about 6,000 GPUs (each 3g half a GPU, each 1g a seventh):
    three quarters of 1,000 nodes with 8 GPUs."""
    rng = random.Random(seed)
    return rng.choices(("whole-gpu", "mig-3g", "mig-1g"), weights=(1, 2, 7), k=n)


async def create_gpu_cluster(client: Any, data: GpuCluster, concurrency: int = 16,
                             create_nodes: bool = True) -> None:
    """Create ``data`` through the API: classes, templates, nodes (with their status), slices.

    ``client`` is a ``controlplane.client.Client``; ``create_nodes=False`` when the
    benchmark makes its nodes itself (their names must be ``data.nodes``')."""
    import asyncio

    from controlplane.client import resource_path

    r = ("resource.k8s.io", "v1")
    sem = asyncio.Semaphore(concurrency)

    async def one(path: str, obj: dict[str, Any], status: dict[str, Any] | None = None) -> None:
        async with sem:
            await client.create(path, obj)
            if status is not None:  # a merge patch: the node lifecycle controller may have written the
                # Node since its create (taking off TaintNodesByCondition's not-ready taint)
                await client.patch(f"{path}/{obj['metadata']['name']}/status", {"status": status})

    for cls in data.classes:
        await one(resource_path(*r, "deviceclasses"), cls)
    for t in data.templates:
        await one(resource_path(*r, "resourceclaimtemplates", t["metadata"]["namespace"]), t)
    if create_nodes:
        await asyncio.gather(*(one(resource_path("", "v1", "nodes"), n, n["status"]) for n in data.nodes))
    await asyncio.gather(*(one(resource_path(*r, "resourceslices"), s) for s in data.slices))


async def cluster_invariants(client: Any) -> list[str]:
    """``check_invariants`` over every ResourceSlice and ResourceClaim the API has now."""
    from controlplane.client import resource_path

    from .invariants import check_invariants

    r = ("resource.k8s.io", "v1")
    slices = (await client.list(resource_path(*r, "resourceslices")))["items"]
    claims = (await client.list(resource_path(*r, "resourceclaims")))["items"]
    return check_invariants(slices, claims)
