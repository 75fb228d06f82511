"""resource.k8s.io/v1 DeviceTaintRules (KEP-5055, GA in 1.37), defaulted and validated as
upstream's v1 defaulting, ``validateDeviceTaintRuleSpec`` and its registry strategy:

- ``spec.taint`` is a device taint as a ResourceSlice's (``resourceslices.taint_causes``:
  a label key, a label value, an effect of ``NoExecute``, ``NoSchedule`` or ``None``,
  the effect checked only when it changes); its ``timeAdded`` is defaulted to the
  write's time (to the second) when left out, and set to it again when an update
  changes the effect and leaves the time as it was (the time says since when the
  *effect* holds, which is what ``tolerationSeconds`` count from);
- ``spec.deviceSelector``, each field optional: ``driver`` a driver name (a CSI
  driver's), ``pool`` a pool name, ``device`` a device name (a DNS label). Without a
  selector the rule selects no device; an empty one selects every device;
- ``status.conditions`` (``/status`` only; a create starts with an empty status): at
  most 8, each as metav1's ``ValidateConditions`` wants it.

A spec change steps ``metadata.generation`` (``api/rest.py``'s table). What a rule
does is elsewhere: the scheduler's inventory puts its taint on the devices it selects
(``scheduler/dra/inventory.py``), the device taint eviction controller evicts the pods
of a NoExecute one (``controllers/devicetainteviction.py``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .causes import Causes
from .drafields import conditions_causes, driver_name, items, label, mapping, pool_name, too_many
from .resourceslices import taint_causes

__all__ = ["MAX_CONDITIONS", "prepare_device_taint_rule", "selects"]

Obj = dict[str, Any]

MAX_CONDITIONS = 8  # DeviceTaintRuleStatusMaxConditions


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _default_taint(taint: Obj, old_taint: Obj | None) -> None:
    """``SetDefaults_DeviceTaint``, and the strategy's bump of ``timeAdded`` when an update
    changes the effect but not the time."""
    effect_moved = old_taint is not None and taint.get("effect") != old_taint.get("effect") \
        and taint.get("timeAdded") == old_taint.get("timeAdded")
    if effect_moved or not taint.get("timeAdded"):
        taint["timeAdded"] = _now()


def _selector_causes(selector: Obj) -> Causes:
    """``validateDeviceTaintSelector``: each field set is checked; none is required."""
    causes: Causes = []
    if selector.get("driver") is not None:
        causes += driver_name(selector["driver"], "spec.deviceSelector.driver")
    if selector.get("pool") is not None:
        causes += pool_name(selector["pool"], "spec.deviceSelector.pool")
    if selector.get("device") is not None:
        causes += label(selector["device"], "spec.deviceSelector.device")
    return causes


def _status_causes(status: Obj) -> Causes:
    """``ValidateDeviceTaintRuleStatusUpdate``: the conditions, at most 8."""
    conditions = items(status.get("conditions"))
    causes = conditions_causes(conditions, "status.conditions")
    if len(conditions) > MAX_CONDITIONS:
        causes.append(too_many("status.conditions", len(conditions), MAX_CONDITIONS))
    return causes


def prepare_device_taint_rule(rule: Obj, old: Obj | None) -> Causes:
    """A DeviceTaintRule's write (``old``: the stored rule of an update): its taint
    defaulted, its spec validated when it is new or changed, its status when changed."""
    spec = rule.get("spec")
    old_spec = mapping(old.get("spec")) if old is not None else None
    causes: Causes = []
    if old is None or spec is not old.get("spec"):  # (a status write carries the stored spec itself)
        if not isinstance(spec, dict):
            spec = rule["spec"] = {}
        taint = spec.get("taint")
        if not isinstance(taint, dict):
            taint = spec["taint"] = {}
        old_taint = mapping(old_spec.get("taint")) if old_spec is not None else None
        _default_taint(taint, old_taint)
        if spec.get("deviceSelector") is not None:
            causes += _selector_causes(mapping(spec["deviceSelector"]))
        causes += taint_causes(taint, "spec.taint", old_taint)
    if old is not None and rule.get("status") is not old.get("status") and rule.get("status") != old.get("status"):
        causes += _status_causes(mapping(rule.get("status")))
    return causes


def selects(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """Whether the rule's selector picks the device (upstream's ``ruleMatchesDevice``): no
    selector picks none, each field set must equal the device's."""
    selector = mapping(rule.get("spec")).get("deviceSelector")
    if not isinstance(selector, dict):
        return False
    return all(selector.get(key) is None or selector[key] == value
               for key, value in (("driver", driver), ("pool", pool), ("device", device)))
