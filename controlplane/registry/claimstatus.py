"""A ResourceClaim's status, written through ``/status`` (the scheduler's allocation and
reservations, a driver's device statuses), held to upstream's
``validateResourceClaimStatusUpdate``:

- ``reservedFor``: at most 256 consumers, each with ``resource``, ``name`` and ``uid``,
  unique by UID; only with an allocation; none added while the claim is being deleted;
- ``allocation``: written once (an update may remove it: deallocation, not change it);
  a new one's results (at most 32) name requests of the claim, drivers, pools and
  devices, its configs (at most 64) a source and the claim's requests, its node selector
  a valid one;
- ``devices``: each an allocated device, unique, with at most 8 valid conditions, data a
  JSON object of at most 10 KiB, network data (an interface name of at most 256
  characters, a hardware address of at most 128, at most 16 IPs in canonical CIDR form).

This is the scheduler's hot path: its write adds an allocation and a reservation; the
names it carries are remembered once valid (``drafields``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from .causes import Causes, cause, forbidden, invalid, not_supported, required, show
from .drafields import (
    CONFIG_SOURCES,
    CONFIGS_MAX,
    DEVICE_CONDITIONS_MAX,
    DEVICE_DATA_MAX,
    HARDWARE_ADDRESS_MAX,
    INTERFACE_NAME_MAX,
    IPS_MAX,
    REQUESTS_MAX,
    RESERVED_FOR_MAX,
    RequestNames,
    as_json,
    binding_conditions,
    bounded,
    conditions_causes,
    device_configuration,
    driver_name,
    immutable,
    items,
    label,
    mapping,
    node_selector,
    pool_name,
    raw_object,
    request_names,
    request_ref,
    request_refs,
    text,
    toleration_causes,
    too_long,
    too_many,
    uid,
    unique,
)
from .validation import same_once_stored, shape_at, shape_of

__all__ = ["claim_status_causes"]

Obj = dict[str, Any]


def _consumer(ref: Obj, path: str) -> Causes:
    return [required(f"{path}.{key}") for key in ("resource", "name", "uid") if not ref.get(key)]


def _device_id(d: Obj) -> tuple[str, str, str, str]:
    return (text(d.get("driver")), text(d.get("pool")), text(d.get("device")), text(d.get("shareID")))


def _shown_id(key: tuple[str, str, str, str]) -> str:
    """A SharedDeviceID as its ``String()`` prints it: ``driver/pool/device[/shareID]``."""
    return "/".join(k for k in key if k) if key[3] else "/".join(key[:3])


_PLAIN_RESULT = frozenset({"request", "driver", "pool", "device"})
_VALID_DEVICES: set[tuple[str, str, str]] = set()  # (driver, pool, device) of results found valid


def _result(result: Obj, path: str, names: RequestNames) -> Causes:
    """``validateDeviceRequestAllocationResult``; a plain result (the scheduler's: a request,
    a device and no more) of a device seen valid needs only its request looked up."""
    device = (text(result.get("driver")), text(result.get("pool")), text(result.get("device")))
    if device in _VALID_DEVICES and result.keys() <= _PLAIN_RESULT and _known_request(result.get("request"), names):
        return []
    causes = _result_causes(result, path, names)
    if not causes and result.keys() <= _PLAIN_RESULT and len(_VALID_DEVICES) < 65536:
        _VALID_DEVICES.add(device)
    return causes


def _known_request(ref: Any, names: RequestNames) -> bool:
    """Whether ``ref`` names a request of the claim (whose names were checked at its create)."""
    if not isinstance(ref, str):
        return False
    request, _, sub = ref.partition("/")
    subs = names.get(request, False)
    return subs is not False if not sub else (isinstance(subs, frozenset) and sub in subs)


def _result_causes(result: Obj, path: str, names: RequestNames) -> Causes:
    causes = request_ref(result.get("request"), f"{path}.request", names)
    causes += driver_name(result.get("driver"), f"{path}.driver")
    causes += pool_name(result.get("pool"), f"{path}.pool")
    causes += label(result.get("device"), f"{path}.device")
    causes += binding_conditions(result, f"{path}.")
    for i, toleration in enumerate(items(result.get("tolerations"))):
        causes += toleration_causes(toleration, f"{path}.tolerations[{i}]")
    if result.get("shareID") is not None:
        causes += uid(result["shareID"], f"{path}.shareID")
    return causes


def _allocation_config(config: Obj, path: str, names: RequestNames) -> Causes:
    source = config.get("source")
    causes = ([required(f"{path}.source")] if not source else
              [not_supported(f"{path}.source", source, CONFIG_SOURCES)] if source not in CONFIG_SOURCES else [])
    causes += request_refs(config.get("requests"), f"{path}.requests", names)
    return causes + device_configuration(config, path, False)


def allocation_causes(allocation: Obj, path: str, names: RequestNames) -> Causes:
    """``validateAllocationResult`` of a new allocation."""
    devices = mapping(allocation.get("devices"))
    causes = bounded(items(devices.get("results")), REQUESTS_MAX, f"{path}.devices.results",
                     lambda r, p: _result(r, p, names))
    causes += bounded(items(devices.get("config")), 2 * CONFIGS_MAX, f"{path}.devices.config",
                      lambda c, p: _allocation_config(c, p, names))
    if allocation.get("nodeSelector") is not None:
        causes += node_selector(allocation["nodeSelector"], f"{path}.nodeSelector")
    return causes


def _interface_address(value: Any, field: str) -> Causes:
    value = text(value)
    try:
        address = ipaddress.ip_interface(value)
    except ValueError:
        return [invalid(field, value, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)")]
    canonical = f"{address.ip}/{address.network.prefixlen}"
    return [] if value == canonical else [invalid(field, value, f"must be in canonical form ({show(canonical)})")]


def _network_data(data: Any, path: str) -> Causes:
    if not isinstance(data, dict):
        return []
    causes: Causes = []
    if len(text(data.get("interfaceName"))) > INTERFACE_NAME_MAX:
        causes.append(too_long(f"{path}.interfaceName", INTERFACE_NAME_MAX))
    if len(text(data.get("hardwareAddress"))) > HARDWARE_ADDRESS_MAX:
        causes.append(too_long(f"{path}.hardwareAddress", HARDWARE_ADDRESS_MAX))
    ips = items(data.get("ips"))
    if len(ips) > IPS_MAX:
        return [*causes, too_many(f"{path}.ips", len(ips), IPS_MAX)]
    for i, ip in enumerate(ips):
        causes += _interface_address(ip, f"{path}.ips[{i}]")
    return causes + unique(ips, f"{path}.ips")


def _device_status(device: Obj, path: str, allocated: set[tuple[str, str, str, str]]) -> Causes:
    causes = driver_name(device.get("driver"), f"{path}.driver")
    causes += pool_name(device.get("pool"), f"{path}.pool")
    causes += label(device.get("device"), f"{path}.device")
    if device.get("shareID") is not None:
        causes += uid(device["shareID"], f"{path}.shareID")
    key = _device_id(device)
    if key not in allocated:
        causes.append(cause("FieldValueInvalid", path,
                            f"Invalid value: {_shown_id(key)}: must be an allocated device in the claim"))
    conditions = items(device.get("conditions"))
    if len(conditions) > DEVICE_CONDITIONS_MAX:
        causes.append(too_many(f"{path}.conditions", len(conditions), DEVICE_CONDITIONS_MAX))
    causes += conditions_causes(conditions, f"{path}.conditions")
    if device.get("data") is not None:
        causes += raw_object(device["data"], f"{path}.data", DEVICE_DATA_MAX)
    return causes + _network_data(device.get("networkData"), f"{path}.networkData")


def claim_status_causes(claim: Obj, old: Obj) -> Causes:
    """``ValidateResourceClaimStatusUpdate``'s status rules."""
    status, old_status = mapping(claim.get("status")), mapping(old.get("status"))
    reserved = items(status.get("reservedFor"))
    causes: Causes
    if len(reserved) > RESERVED_FOR_MAX:
        causes = [too_many("status.reservedFor", len(reserved), RESERVED_FOR_MAX)]
    else:
        causes = []
        for i, ref in enumerate(reserved):
            ref = mapping(ref)
            if not (ref.get("resource") and ref.get("name") and ref.get("uid")):
                causes += _consumer(ref, f"status.reservedFor[{i}]")
        if len(reserved) > 1:
            causes += unique((text(mapping(r).get("uid")) for r in reserved), "status.reservedFor")
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    devices = items(status.get("devices"))
    if devices:
        results = items(mapping(mapping(allocation).get("devices")).get("results"))
        allocated = {_device_id(mapping(r)) for r in results}
        for i, device in enumerate(devices):
            causes += _device_status(mapping(device), f"status.devices[{i}]", allocated)
        causes += unique((_device_id(mapping(d)) for d in devices), "status.devices", _shown_id)
    if reserved and allocation is None:
        causes.append(forbidden("status.reservedFor", "may not be specified when `allocated` is not set"))
    elif reserved and mapping(claim.get("metadata")).get("deletionTimestamp"):
        before = {as_json(r) for r in items(old_status.get("reservedFor"))}
        if any(as_json(r) not in before for r in reserved):
            causes.append(forbidden("status.reservedFor", "new entries may not be added while "
                                    "`deallocationRequested` or `deletionTimestamp` are set"))
    if old_allocation is not None and allocation is not None:
        # (compared as Go values, as ValidateImmutableField's Semantic.DeepEqual: a consumed
        # capacity's quantity by its value)
        if allocation != old_allocation and not same_once_stored(
                allocation, old_allocation, shape_at(shape_of("resource.k8s.io", "v1", "ResourceClaim"),
                                                     "status", "allocation")):
            causes.append(immutable("status.allocation", allocation))
    elif allocation is not None:
        causes += allocation_causes(mapping(allocation), "status.allocation", request_names(claim.get("spec")))
    return causes
