"""Instance types: what a simulated node is made of.

An ``InstanceType`` is plain data, shared by the node simulator (a node's
capacity, labels, registry bandwidth) and the autoscaler (price, launch
latency, which pods fit). The built-in ``DEFAULT_CATALOG`` has a few CPU and
GPU shapes; ``load_catalog(path)`` reads a replacement from YAML or JSON::

    - name: m5.large
      cpu: "2"
      memory: 8Gi
      pods: 29
      price: 0.096               # per hour, on demand
      launchLatencySeconds: 30
      registryBandwidthMBps: 125 # what one image pull can download per second
      unpackMBps: 100            # one unpack worker's throughput (decompress + write)
      unpackWorkers: 1           # >1: containerd 2.2's parallel unpack
      extendedResources: {nvidia.com/gpu: "1"}
      gpus: [{model: A100, memory: 40Gi, count: 1}]   # DRA device templates
      arch: amd64
      capacityType: on-demand

Quantities are Kubernetes quantity strings (as a node's ``status.capacity``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CREATED_NODE_TYPE", "DEFAULT_CATALOG", "GpuDevice", "InstanceType", "catalog_by_name", "created_node_type",
           "load_catalog"]


NVIDIA_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """A template for the DRA devices one node of the type publishes (``count`` of them):
    the attributes and capacity a ResourceSlice device gets."""

    model: str
    memory: str  # a quantity, e.g. "80Gi"
    count: int = 1
    driver: str = "gpu.nvidia.com"
    attributes: dict[str, str] = field(default_factory=dict)

    def devices(self) -> list[dict[str, Any]]:
        """The ``spec.devices`` of a resource.k8s.io/v1 ResourceSlice for one node. For
        NVIDIA's driver, a whole GPU also has ``type: gpu``, as that driver publishes it:
        the ``gpu.nvidia.com`` DeviceClass it installs selects
        ``device.attributes['gpu.nvidia.com'].type == 'gpu'`` (MIG devices are ``mig``)."""
        attrs: dict[str, Any] = {"model": {"string": self.model}}
        if self.driver == NVIDIA_DRIVER:
            attrs["type"] = {"string": "gpu"}
        attrs.update({k: {"string": v} for k, v in self.attributes.items()})
        return [{"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": self.memory}}}
                for i in range(self.count)]


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    cpu: str
    memory: str
    pods: int = 110
    price: float = 0.0  # per hour
    launch_latency_seconds: float = 30.0
    registry_bandwidth_mbps: float = 125.0  # MB/s for image layer downloads
    unpack_mbps: float = 100.0  # MB/s per unpack worker
    unpack_workers: int = 1  # 1: serial unpack (containerd < 2.2)
    extended_resources: dict[str, str] = field(default_factory=dict)
    gpus: tuple[GpuDevice, ...] = ()
    arch: str = "amd64"
    os: str = "linux"
    capacity_type: str = "on-demand"

    def capacity(self) -> dict[str, str]:
        """The node's ``status.capacity`` (and, here, ``allocatable``: no reservations)."""
        cap = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods), "ephemeral-storage": "100Gi"}
        cap.update(self.extended_resources)
        return cap

    def labels(self) -> dict[str, str]:
        return {"node.kubernetes.io/instance-type": self.name, "kubernetes.io/arch": self.arch,
                "kubernetes.io/os": self.os, "karpenter.sh/capacity-type": self.capacity_type}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InstanceType:
        gpus = tuple(GpuDevice(model=str(g["model"]), memory=str(g.get("memory", "0")), count=int(g.get("count", 1)),
                               driver=str(g.get("driver", "gpu.nvidia.com")),
                               attributes={str(k): str(v) for k, v in (g.get("attributes") or {}).items()})
                     for g in d.get("gpus") or ())
        return cls(
            name=str(d["name"]), cpu=str(d["cpu"]), memory=str(d["memory"]), pods=int(d.get("pods", 110)),
            price=float(d.get("price", 0.0)),
            launch_latency_seconds=float(d.get("launchLatencySeconds", 30.0)),
            registry_bandwidth_mbps=float(d.get("registryBandwidthMBps", 125.0)),
            unpack_mbps=float(d.get("unpackMBps", 100.0)), unpack_workers=int(d.get("unpackWorkers", 1)),
            extended_resources={str(k): str(v) for k, v in (d.get("extendedResources") or {}).items()},
            gpus=gpus, arch=str(d.get("arch", "amd64")), os=str(d.get("os", "linux")),
            capacity_type=str(d.get("capacityType", "on-demand")),
        )


# What NVIDIA's DRA driver (k8s-dra-driver-gpu) publishes of these models besides ``type``, as
# users' selectors read it (``device.attributes['gpu.nvidia.com'].productName.contains('A100')``):
# the name NVML gives, the brand and the architecture; the same on every GPU of a node.
_NVIDIA_MODELS = {
    "L4": {"productName": "NVIDIA L4", "brand": "Nvidia", "architecture": "Ada Lovelace"},
    "A100": {"productName": "NVIDIA A100-SXM4-80GB", "brand": "Nvidia", "architecture": "Ampere"},
    "H100": {"productName": "NVIDIA H100 80GB HBM3", "brand": "Nvidia", "architecture": "Hopper"},
}


def _gpu_type(name: str, cpu: str, memory: str, gpus: int, model: str, gpu_memory: str, price: float,
              bandwidth: float) -> InstanceType:
    return InstanceType(
        name=name, cpu=cpu, memory=memory, pods=110, price=price, launch_latency_seconds=60.0,
        registry_bandwidth_mbps=bandwidth, unpack_mbps=150.0, unpack_workers=4,
        extended_resources={"nvidia.com/gpu": str(gpus)},
        gpus=(GpuDevice(model=model, memory=gpu_memory, count=gpus, attributes=dict(_NVIDIA_MODELS[model])),),
    )


# Prices and shapes in the spirit of public cloud catalogs (rounded; not a price list).
DEFAULT_CATALOG: tuple[InstanceType, ...] = (
    InstanceType("cpu-small", cpu="2", memory="8Gi", pods=29, price=0.096, launch_latency_seconds=30.0),
    InstanceType("cpu-medium", cpu="8", memory="32Gi", pods=58, price=0.384, launch_latency_seconds=30.0,
                 registry_bandwidth_mbps=250.0),
    InstanceType("cpu-large", cpu="32", memory="128Gi", pods=110, price=1.536, launch_latency_seconds=35.0,
                 registry_bandwidth_mbps=500.0, unpack_workers=2),
    InstanceType("cpu-xlarge", cpu="96", memory="384Gi", pods=250, price=4.608, launch_latency_seconds=40.0,
                 registry_bandwidth_mbps=1000.0, unpack_workers=4),
    _gpu_type("gpu-1x-l4", "8", "32Gi", 1, "L4", "24Gi", 0.98, 500.0),
    _gpu_type("gpu-4x-l4", "48", "192Gi", 4, "L4", "24Gi", 4.89, 1000.0),
    _gpu_type("gpu-8x-a100", "96", "1152Gi", 8, "A100", "80Gi", 32.77, 2500.0),
    _gpu_type("gpu-8x-h100", "192", "2048Gi", 8, "H100", "80Gi", 98.32, 2500.0),
)


def catalog_by_name(catalog: tuple[InstanceType, ...] = DEFAULT_CATALOG) -> dict[str, InstanceType]:
    return {t.name: t for t in catalog}


# the type of the nodes a simulator creates (``serve --nodes N``, ``controlplane nodes --count N``)
# when none is asked for
CREATED_NODE_TYPE = "cpu-large"


def created_node_type(catalog: tuple[InstanceType, ...]) -> str:
    """The type a simulator's own nodes get when none is asked for: ``cpu-large``, or the first
    of a catalog (``--instance-types FILE``) without it, so a catalog of its own needs no
    ``--instance-type`` beside it."""
    names = [t.name for t in catalog]
    return CREATED_NODE_TYPE if CREATED_NODE_TYPE in names else names[0]


def load_catalog(path: Path) -> tuple[InstanceType, ...]:
    """A catalog from a YAML or JSON file: a list of instance types, or ``{"instanceTypes": [...]}``."""
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if isinstance(data, dict):
        data = data.get("instanceTypes")
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty list of instance types")
    return tuple(InstanceType.from_dict(d) for d in data)
