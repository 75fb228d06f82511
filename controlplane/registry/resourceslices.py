"""resource.k8s.io/v1 ResourceSlices, defaulted and validated as upstream's v1 defaulting
and ``validateResourceSliceSpec`` (kube-apiserver 1.34), on ``registry/drafields.py``'s names:

- a driver name (a CSI driver's), a pool (a name of DNS subdomains joined by ``/``, a
  ``resourceSliceCount`` above zero, a ``generation`` not negative); the pool's name,
  the driver and the node name are fixed once created;
- exactly one of ``nodeName`` (a node's name), ``nodeSelector`` (one term), ``allNodes``
  and ``perDeviceNodeSelection`` (each ``true`` when set); ``sharedCounters`` or
  ``devices``, not both;
- at most 128 devices (64 when one has taints or consumes counters), uniquely named
  DNS labels, each with at most 32 attributes and capacities, named as qualified
  names (a C identifier of at most 32 characters, after a driver name's domain and
  ``/``); an attribute holds exactly one value, a string or version of at most 64
  characters, a version of semver's syntax; at most 16 taints (a label key, a label
  value, an effect of ``NoExecute``, ``NoSchedule`` or ``None``; ``timeAdded``
  defaulted to the write's time); at most 2 counter consumptions; a device's own node
  selection only with ``perDeviceNodeSelection``; binding conditions as a claim's results';
- at most 8 counter sets, each a DNS label with 1-32 counters named as DNS labels.

An update checks the new spec whole but for a device's capacities and taints left as
they were (upstream does not validate those again).
"""

from __future__ import annotations

import re
import time
from typing import Any

from .causes import Causes, cause, invalid, not_supported, required
from .drafields import (
    TAINT_EFFECTS,
    as_json,
    binding_conditions,
    driver_name,
    immutable,
    items,
    label,
    label_name,
    label_value,
    mapping,
    node_selector,
    pool_name,
    qualified_name,
    subdomain,
    text,
    too_long,
    too_many,
    unique,
)

__all__ = ["prepare_resource_slice"]

Obj = dict[str, Any]

MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUE = 64
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS = 2
QUALIFIED_NAME_KEY_MAX = 63 + 1 + 32  # the longest domain/ID, where a map key's path is cut
NODE_SELECTION = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
DEVICE_NODE_SELECTION = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                         "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
                     r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?\Z")
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


def _key_path(path: str, key: str, limit: int) -> str:
    """``truncateIfTooLong``: a long map key cut in its middle, in its path."""
    limit = max(limit, 16)
    if len(key) > limit:
        keep = limit - 3
        key = key[:(keep + 1) // 2] + "..." + key[len(key) - keep // 2:]
    return f"{path}[{key}]"


def _attribute(attribute: Obj, path: str) -> Causes:
    """``validateDeviceAttribute``: exactly one value; strings and versions at most 64."""
    causes: Causes = []
    for kind in ("string", "version"):
        value = attribute.get(kind)
        if value is None:
            continue
        if kind == "version" and not _SEMVER.match(text(value)):
            causes.append(invalid(f"{path}.version", text(value), "must be a string compatible with semver.org spec "
                                                                 "2.0.0"))
        if len(text(value)) > MAX_ATTRIBUTE_VALUE:
            causes.append(too_long(f"{path}.{kind}", MAX_ATTRIBUTE_VALUE))
    given = sum(attribute.get(kind) is not None for kind in _ATTRIBUTE_KINDS)
    if given == 0:
        causes.append(invalid(path, "", "exactly one value must be specified"))
    elif given > 1:
        causes.append(cause("FieldValueInvalid", path,
                            f"Invalid value: {as_json(attribute)}: exactly one value must be specified"))
    return causes


def _named_map(entries: Obj, path: str, check: Any) -> Causes:
    """``validateMap`` of qualified names: each key at the map's path, each value at its key's."""
    causes: Causes = []
    for key, value in entries.items():
        causes += qualified_name(key, path)
        causes += check(mapping(value), _key_path(path, key, QUALIFIED_NAME_KEY_MAX))
    return causes


def _capacity(multiple: bool) -> Any:
    def check(capacity: Obj, path: str) -> Causes:
        if capacity.get("requestPolicy") is not None and not multiple:
            return [cause("FieldValueForbidden", f"{path}.requestPolicy",
                          "Forbidden: allowMultipleAllocations must be true")]
        return []
    return check


def taint_causes(taint: Obj, path: str, old: Obj | None = None) -> Causes:
    """``validateDeviceTaint``: a label key, a label value, an effect (unless unchanged)."""
    causes = label_name(taint.get("key"), f"{path}.key")
    if taint.get("value"):
        causes += label_value(taint["value"], f"{path}.value")
    effect = taint.get("effect")
    if old is None or old.get("effect") != effect:
        if not effect:
            causes.append(required(f"{path}.effect"))
        elif effect not in TAINT_EFFECTS:
            causes.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return causes


def _counters(counters: Any, path: str, limit: int) -> Causes:
    counters = mapping(counters)
    if not counters:
        return [required(path)]
    if len(counters) > limit:
        return [too_many(path, len(counters), limit)]
    causes: Causes = []
    for name in counters:
        causes += label(name, path)
    return causes


def _consumption(consumption: Obj, path: str) -> Causes:
    counter_set = consumption.get("counterSet")
    causes = [required(f"{path}.counterSet")] if not counter_set else label(counter_set, f"{path}.counterSet")
    return causes + _counters(consumption.get("counters"), f"{path}.counters", MAX_COUNTERS)


def _own_node_selection(device: Obj, path: str, per_device: bool) -> Causes:
    """A device's ``nodeName``, ``nodeSelector`` or ``allNodes``: exactly one when the slice
    selects nodes per device, none otherwise."""
    keys = ("nodeName", "nodeSelector", "allNodes")
    if not per_device:
        if any(device.get(k) is not None for k in keys):
            return [cause("FieldValueInvalid", path, "Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` "
                          "can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec")]
        return []
    causes: Causes = []
    chosen = []
    if device.get("nodeName") is not None:
        if device["nodeName"]:
            chosen.append("`nodeName`")
            causes += _node_name(device["nodeName"], f"{path}.nodeName")
        else:
            causes.append(invalid(f"{path}.nodeName", "", "must not be empty"))
    if device.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        causes += node_selector(device["nodeSelector"], f"{path}.nodeSelector")
    if device.get("allNodes") is not None:
        if device["allNodes"] is True:
            chosen.append("`allNodes`")
        else:
            causes.append(invalid(f"{path}.allNodes", device["allNodes"], "must be either unset or set to true"))
    if not chosen:
        causes.append(required(path, DEVICE_NODE_SELECTION))
    elif len(chosen) > 1:
        causes.append(invalid(path, "{" + ", ".join(chosen) + "}", DEVICE_NODE_SELECTION))
    return causes


def _device(device: Obj, path: str, old: Obj | None, per_device: bool) -> Causes:
    """``validateDevice``."""
    causes = label(device.get("name"), f"{path}.name")
    attributes, capacity = mapping(device.get("attributes")), mapping(device.get("capacity"))
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        causes.append(invalid(path, len(attributes) + len(capacity),
                              f"the total number of attributes and capacities must not exceed "
                              f"{MAX_ATTRIBUTES_AND_CAPACITIES}"))
    causes += _named_map(attributes, f"{path}.attributes", _attribute)
    if old is None or old.get("capacity") != device.get("capacity"):
        causes += _named_map(capacity, f"{path}.capacity", _capacity(device.get("allowMultipleAllocations") is True))
    taints = items(device.get("taints"))
    if old is None or old.get("taints") != device.get("taints"):
        if len(taints) > MAX_TAINTS:
            causes.append(too_many(f"{path}.taints", len(taints), MAX_TAINTS))
        else:
            for i, taint in enumerate(taints):
                causes += taint_causes(mapping(taint), f"{path}.taints[{i}]")
    consumptions = items(device.get("consumesCounters"))
    if len(consumptions) > MAX_CONSUMPTIONS:
        causes.append(too_many(f"{path}.consumesCounters", len(consumptions), MAX_CONSUMPTIONS))
    else:
        for i, consumption in enumerate(consumptions):
            causes += _consumption(mapping(consumption), f"{path}.consumesCounters[{i}]")
        causes += unique((text(mapping(c).get("counterSet")) for c in consumptions), f"{path}.consumesCounters")
    causes += _own_node_selection(device, path, per_device)
    return causes + binding_conditions(device, f"{path}.")


def _node_name(name: str, field: str) -> Causes:
    """``ValidateNodeName``: a DNS subdomain."""
    return subdomain(name, field)


def _pool(pool: Obj, path: str) -> Causes:
    causes = pool_name(pool.get("name"), f"{path}.name")
    count = pool.get("resourceSliceCount") or 0
    if not isinstance(count, int) or count <= 0:
        causes.append(invalid(f"{path}.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation") or 0
    if isinstance(generation, int) and generation < 0:
        causes.append(invalid(f"{path}.generation", generation, "must be greater than or equal to zero"))
    return causes


def _node_selection(spec: Obj) -> Causes:
    """The slice's own node selection: exactly one way."""
    causes: Causes = []
    chosen = []
    name = spec.get("nodeName")
    if name is not None:
        if name:
            chosen.append("`nodeName`")
            causes += _node_name(text(name), "spec.nodeName")
        else:
            causes.append(invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
    selector = spec.get("nodeSelector")
    if selector is not None:
        chosen.append("`nodeSelector`")
        causes += node_selector(selector, "spec.nodeSelector")
        terms = items(mapping(selector).get("nodeSelectorTerms"))
        if len(terms) != 1:
            causes.append(cause("FieldValueInvalid", "spec.nodeSelector.nodeSelectorTerms",
                                f"Invalid value: {as_json(terms)}: must have exactly one node selector term"))
    for key in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(key) is None:
            continue
        if spec[key] is True:
            chosen.append(f"`{key}`")
        else:
            causes.append(invalid(f"spec.{key}", spec[key], "must be either unset or set to true"))
    if not chosen:
        causes.append(required("spec", NODE_SELECTION))
    elif len(chosen) > 1:
        causes.append(invalid("spec", "{" + ", ".join(chosen) + "}", NODE_SELECTION + ", but multiple fields are set"))
    return causes


def _devices(spec: Obj, old_spec: Obj | None) -> Causes:
    devices = items(spec.get("devices"))
    advanced = any(mapping(d).get("taints") or mapping(d).get("consumesCounters") for d in devices)
    limit = MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if advanced else MAX_DEVICES
    if len(devices) > limit:
        return [too_many("spec.devices", len(devices), limit)]
    old_devices = {text(mapping(d).get("name")): mapping(d) for d in items(mapping(old_spec).get("devices"))}
    per_device = spec.get("perDeviceNodeSelection") is True
    causes: Causes = []
    for i, device in enumerate(devices):
        device = mapping(device)
        old = old_devices.get(text(device.get("name"))) if old_spec is not None else None
        causes += _device(device, f"spec.devices[{i}]", old, per_device)
    return causes + unique((text(mapping(d).get("name")) for d in devices), "spec.devices")


def _counter_sets(spec: Obj) -> Causes:
    sets = items(spec.get("sharedCounters"))
    if len(sets) > MAX_COUNTER_SETS:
        return [too_many("spec.sharedCounters", len(sets), MAX_COUNTER_SETS)]
    causes: Causes = []
    for i, counter_set in enumerate(sets):
        counter_set, at = mapping(counter_set), f"spec.sharedCounters[{i}]"
        name = counter_set.get("name")
        causes += [required(f"{at}.name")] if not name else label(name, f"{at}.name")
        causes += _counters(counter_set.get("counters"), f"{at}.counters", MAX_COUNTERS)
    return causes + unique((text(mapping(s).get("name")) for s in sets), "spec.sharedCounters")


def _default_taints(spec: Obj) -> None:
    """``SetDefaults_DeviceTaint``: a taint without ``timeAdded`` was added now (to the second)."""
    now = None
    for device in items(spec.get("devices")):
        for taint in items(mapping(device).get("taints")):
            if isinstance(taint, dict) and not taint.get("timeAdded"):
                now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                taint["timeAdded"] = now


def prepare_resource_slice(slice_: Obj, old: Obj | None) -> Causes:
    """A ResourceSlice's write: its taints defaulted, its spec validated (``old``: the
    stored slice of an update, whose pool name, driver and node name it keeps)."""
    spec = mapping(slice_.get("spec"))
    _default_taints(spec)
    old_spec = mapping(old.get("spec")) if old is not None else None
    causes = driver_name(spec.get("driver"), "spec.driver")
    causes += _pool(mapping(spec.get("pool")), "spec.pool")
    if old_spec is not None:
        for field, new, was in (("spec.pool.name", mapping(spec.get("pool")).get("name"),
                                 mapping(old_spec.get("pool")).get("name")),
                                ("spec.driver", spec.get("driver"), old_spec.get("driver")),
                                ("spec.nodeName", spec.get("nodeName"), old_spec.get("nodeName"))):
            if new != was:
                causes.append(immutable(field, new))
    causes += _node_selection(spec)
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        causes.append(invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    causes += _devices(spec, old_spec) + _counter_sets(spec)
    for key in ("sharedCounters", "devices"):  # validated as sent (an empty list is one), stored as
        if spec.get(key) == []:               # protobuf: nil, left out (validation.KEPT_EMPTY)
            del spec[key]
    return causes
