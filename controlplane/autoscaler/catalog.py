"""What the autoscaler can launch: the node simulator's instance types
(``controlplane.nodes.instancetypes``, one catalog for both), each with its
offerings, as Karpenter's cloud provider describes them.

An offering is where and how a type can be bought: a zone and a capacity type
(``on-demand`` or ``spot``) at a price. The nodes' catalog says what a type is
made of; here each type is offered in every zone of ``ZONES``, on demand at its
price and as spot at ``SPOT_DISCOUNT`` of it, unless its entry in an
``--instance-types`` file says otherwise (extra keys, ignored by the node
simulator)::

    - name: gpu-1x-l4
      cpu: "8"
      memory: 32Gi
      price: 0.98
      launchLatencySeconds: 5
      extendedResources: {nvidia.com/gpu: "1"}
      gpus: [{model: L4, memory: 24Gi, count: 1}]
      zones: [zone-a, zone-b]           # default: ZONES
      capacityTypes: [on-demand]        # default: [on-demand, spot]
      spotPrice: 0.30                   # default: price * SPOT_DISCOUNT
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..nodes.instancetypes import DEFAULT_CATALOG, InstanceType
from .labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, ZONE, device_resource
from .requirements import Requirement, Requirements
from .resources import Resources, parse_resources

__all__ = ["SPOT_DISCOUNT", "ZONES", "Catalog", "Offering", "Option", "load", "provider_labels", "resource_slices"]

ZONES = ("zone-a", "zone-b", "zone-c")
SPOT_DISCOUNT = 0.35


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    price: float


@dataclass(frozen=True, slots=True)
class Option:
    """One instance type as the provisioner sees it."""

    type: InstanceType
    offerings: tuple[Offering, ...]
    # allocatable, in milli-units, with DRA devices counted per driver and a "nodes" slot for limits
    allocatable: Resources
    # labels every node of the type has, as requirements (instance type, arch, os, the provider's
    # karpenter.kwok.sh/instance-*; zones and capacity types offered)
    requirements: Requirements

    @property
    def name(self) -> str:
        return self.type.name

    def cheapest(self, requirements: Requirements) -> Offering | None:
        """The cheapest offering whose zone and capacity type ``requirements`` allow."""
        zone = requirements.get(ZONE)
        ct = requirements.get(CAPACITY_TYPE)
        best: Offering | None = None
        for o in self.offerings:
            if zone is not None and not zone.allows(o.zone):
                continue
            if ct is not None and not ct.allows(o.capacity_type):
                continue
            if best is None or o.price < best.price:
                best = o
        return best


_AWS_SIZE = re.compile(r"^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$")


def provider_labels(t: InstanceType) -> dict[str, str]:
    """The labels Karpenter's KWOK provider gives every instance type (and so every node of
    it), which NodePools and pods may select on (``karpenter.kwok.sh/instance-cpu Gt 4``):
    cpu and memory as the catalog writes them, the family (the name up to its first ``.``
    or ``-``, else its first letter) and the size (an AWS-style name's, else the cpu)."""
    family = re.split(r"[.-]", t.name, maxsplit=1)
    size = _AWS_SIZE.match(t.name)
    return {
        "karpenter.kwok.sh/instance-cpu": t.cpu,
        "karpenter.kwok.sh/instance-memory": t.memory,
        "karpenter.kwok.sh/instance-family": family[0] if len(family) == 2 else t.name[:1],
        "karpenter.kwok.sh/instance-size": size.group(1) if size else t.cpu,
    }


def resource_slices(node: str, t: InstanceType, node_uid: str = "") -> list[dict[str, Any]]:
    """The ResourceSlices a node of type ``t`` publishes (the launcher creates them; the
    simulation allocates on them for a node not launched yet): one per driver of its
    device templates, ``<node>-<driver>`` with the driver's dots and slashes made dashes,
    the node its pool, owned by the Node. A second template of a driver adds nothing (its
    slice's name is taken)."""
    out: dict[str, dict[str, Any]] = {}
    for gpu in t.gpus:
        name = f"{node}-{gpu.driver.replace('.', '-').replace('/', '-')}"
        out.setdefault(name, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                            "uid": node_uid, "controller": True}]},
            "spec": {"driver": gpu.driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": gpu.devices()},
        })
    return list(out.values())


def _option(t: InstanceType, extra: Mapping[str, Any] | None = None) -> Option:
    extra = extra or {}
    zones = tuple(str(z) for z in extra.get("zones") or ZONES)
    cts = tuple(str(c) for c in extra.get("capacityTypes") or ("on-demand", "spot"))
    spot = float(extra.get("spotPrice", t.price * SPOT_DISCOUNT))
    offerings = tuple(Offering(z, c, spot if c == "spot" else t.price) for z in zones for c in cts)
    allocatable = parse_resources(t.capacity())
    for g in t.gpus:
        key = device_resource(g.driver)
        allocatable[key] = allocatable.get(key, 0) + g.count * 1000
    allocatable["nodes"] = 1000
    reqs = Requirements([
        Requirement(INSTANCE_TYPE, False, frozenset((t.name,))),
        Requirement(ARCH, False, frozenset((t.arch,))),
        Requirement(OS, False, frozenset((t.os,))),
        Requirement(ZONE, False, frozenset(zones)),
        Requirement(CAPACITY_TYPE, False, frozenset(cts)),
        *(Requirement(k, False, frozenset((v,))) for k, v in provider_labels(t).items()),
    ])
    return Option(t, offerings, allocatable, reqs)


class Catalog(Sequence[Option]):
    """The instance types, cheapest first (by their cheapest offering)."""

    def __init__(self, options: Iterable[Option]) -> None:
        self._options = sorted(options, key=lambda o: (min((f.price for f in o.offerings), default=0.0), o.name))
        self._by_name = {o.name: o for o in self._options}

    @classmethod
    def default(cls) -> Catalog:
        return cls(_option(t) for t in DEFAULT_CATALOG)

    @classmethod
    def of(cls, types: Iterable[InstanceType]) -> Catalog:
        return cls(_option(t) for t in types)

    def __getitem__(self, i: Any) -> Any:
        return self._options[i]

    def __len__(self) -> int:
        return len(self._options)

    def get(self, name: str) -> Option | None:
        return self._by_name.get(name)


def load(path: Path) -> Catalog:
    """A catalog from a YAML or JSON file: a list of instance types, or
    ``{"instanceTypes": [...]}`` (the node simulator's format, plus offerings)."""
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if isinstance(data, dict):
        data = data.get("instanceTypes")
    if not isinstance(data, list) or not data or not all(isinstance(d, dict) for d in data):
        raise ValueError(f"{path}: expected a non-empty list of instance types")
    try:
        return Catalog(_option(InstanceType.from_dict(d), d) for d in data)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad instance type: {e}") from e
