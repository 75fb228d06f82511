"""The in-tree plugins, their registry and the default profile.

``default_registry()`` maps plugin names to factories ``(handle, args) -> plugin``;
``DEFAULT_PROFILE`` lists the enabled plugins in order, with score weights as
kube-scheduler's defaults. Another package adds a plugin by registering it and
naming it in the profile given to the scheduler::

    registry = default_registry()
    registry.register("DynamicResources", DynamicResources.build)
    profile = [*DEFAULT_PROFILE, PluginConfig("DynamicResources")]

The DRA plugin (``plugins/dynamic_resources.py``, built on branch ``dra``) is
picked up without further wiring: that module defines ``register(registry)``,
which registers the factory under ``"DynamicResources"``; ``default_profile``
then enables it right after NodeResourcesFit. Its informers come from the
framework: the plugin lists resourceclaims, resourceslices, deviceclasses,
devicetaintrules (and resourceclaimtemplates) in ``resources_to_watch()`` and reads them through
``handle.lister(plural)``; their events requeue the pods it rejected, as its
``events_to_register()`` says.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..framework import Handle, Plugin, Registry
from .noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from .nodes import NodeAffinity, NodeName, NodeUnschedulable, SchedulingGates, TaintToleration
from .podplacement import InterPodAffinity, PodTopologySpread

__all__ = ["DEFAULT_PROFILE", "PluginConfig", "default_profile", "default_registry"]


@dataclass(frozen=True, slots=True)
class PluginConfig:
    name: str
    weight: int = 1  # its Score's weight, if it scores
    args: Mapping[str, Any] = field(default_factory=dict)


def _gang(handle: Handle, args: Mapping[str, Any]) -> Plugin:
    from .gangscheduling import GangScheduling

    return GangScheduling.build(handle, args)


def _preemption(handle: Handle, args: Mapping[str, Any]) -> Plugin:
    from .preemption import DefaultPreemption

    return DefaultPreemption.build(handle, args)


def _volume_binding(handle: Handle, args: Mapping[str, Any]) -> Plugin:
    from .volumebinding import VolumeBinding

    return VolumeBinding.build(handle, args)


def default_registry() -> Registry:
    r = Registry()
    r.register("SchedulingGates", lambda h, a: SchedulingGates())
    r.register("NodeName", lambda h, a: NodeName())
    r.register("NodeUnschedulable", lambda h, a: NodeUnschedulable())
    r.register("TaintToleration", lambda h, a: TaintToleration())
    r.register("NodeAffinity", NodeAffinity.build)
    r.register("NodeResourcesFit", NodeResourcesFit.build)
    r.register("NodeResourcesBalancedAllocation", NodeResourcesBalancedAllocation.build)
    r.register("PodTopologySpread", PodTopologySpread.build)
    r.register("InterPodAffinity", InterPodAffinity.build)
    r.register("GangScheduling", _gang)
    r.register("VolumeBinding", _volume_binding)
    r.register("DefaultPreemption", _preemption)
    try:  # the DRA plugin, when its module is present (branch dra)
        dra = importlib.import_module(f"{__name__}.dynamic_resources")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.dynamic_resources":
            raise
    else:
        dra.register(r)
    return r


# Order matters for Filter (cheap and most selective first) and gives the Score weights.
DEFAULT_PROFILE: tuple[PluginConfig, ...] = (
    PluginConfig("SchedulingGates"),
    PluginConfig("GangScheduling"),
    PluginConfig("NodeUnschedulable"),
    PluginConfig("NodeName"),
    PluginConfig("TaintToleration", weight=3),
    PluginConfig("NodeAffinity", weight=2),
    PluginConfig("NodeResourcesFit", weight=1),
    PluginConfig("VolumeBinding"),
    PluginConfig("PodTopologySpread", weight=2),
    PluginConfig("InterPodAffinity", weight=2),
    PluginConfig("NodeResourcesBalancedAllocation", weight=1),
    PluginConfig("DefaultPreemption"),
)


def default_profile(registry: Registry) -> tuple[PluginConfig, ...]:
    """``DEFAULT_PROFILE``, plus DynamicResources when the registry has it."""
    if "DynamicResources" not in registry.factories:
        return DEFAULT_PROFILE
    out: list[PluginConfig] = []
    for pc in DEFAULT_PROFILE:
        out.append(pc)
        if pc.name == "NodeResourcesFit":
            out.append(PluginConfig("DynamicResources"))
    return tuple(out)
