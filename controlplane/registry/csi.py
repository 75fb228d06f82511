"""The CSI objects of storage.k8s.io/v1: CSIDrivers, CSINodes, CSIStorageCapacities,
VolumeAttachments and VolumeAttributesClasses. Defaults and validation, as upstream's
v1 defaulting and ``pkg/apis/storage/validation`` (kube-apiserver 1.34 and later):

- a CSIDriver's spec is defaulted (``attachRequired`` true, ``podInfoOnMount``,
  ``storageCapacity``, ``requiresRepublish`` and ``seLinuxMount`` false, ``fsGroupPolicy``
  ``ReadWriteOnceWithFSType``, ``volumeLifecycleModes`` ``[Persistent]``); its
  ``attachRequired`` and ``volumeLifecycleModes`` are fixed once created (the former
  reported at upstream's ``spec.attachedRequired``), the rest may change;
- a CSINode's drivers each need a CSI driver name (a DNS subdomain of at most 63
  characters), unique in the list, and a ``nodeID`` of at most 256 characters; their
  topology keys are qualified names, unique per driver. A driver that stays in the
  list may change only its ``allocatable`` (MutableCSINodeAllocatableCount). Neither
  ``spec`` nor ``spec.drivers`` is asked for, though the schema calls them required;
  no drivers, or an empty list, reads back as ``drivers: null``, as kube-apiserver's
  (Go writes the field, and an empty list stored as protobuf is decoded as nil);
- a CSIStorageCapacity needs a ``storageClassName`` (a DNS subdomain); its
  ``capacity`` is not negative; ``storageClassName`` and ``nodeTopology`` are fixed;
- a VolumeAttachment needs an ``attacher`` (a CSI driver name), a ``nodeName`` and a
  source naming exactly one of ``persistentVolumeName`` and ``inlineVolumeSpec``; its
  spec is fixed once created; an ``inlineVolumeSpec`` is checked as an inline
  PersistentVolume spec (``volumes.persistent_volume_spec_causes``: a ``csi`` source and
  little else), without the defaults a PersistentVolume gets. Its status, written through ``/status``, starts as
  ``{attached: false}`` (a Go bool without ``omitempty``);
- a VolumeAttributesClass needs a ``driverName`` (a qualified name) and at least one
  parameter; both are fixed once created.

Each ``prepare_*`` takes the object (defaulted in place) and the stored one (None for
a create) and answers the causes of a 422, in upstream's order and words. A value
upstream prints with Go's ``%#v`` (a struct, which holds pointers) is shown as JSON here.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..quantity import QuantityError, parse_quantity
from .causes import Causes, duplicate, forbidden, invalid, not_supported, required, too_long
from .podvalidation import _label_selector, _subdomain_problems, label_key_problems
from .validation import same_once_stored
from .volumes import BadQuantity, csi_driver_name_causes, persistent_volume_spec_causes

__all__ = ["INITIAL_ATTACHMENT_STATUS", "prepare_csi_driver", "prepare_csi_node", "prepare_csi_storage_capacity",
           "prepare_volume_attachment", "prepare_volume_attributes_class"]

Obj = dict[str, Any]

IMMUTABLE = "field is immutable"
INITIAL_ATTACHMENT_STATUS = {"attached": False}
CSI_NODE_ID_MAX = 256  # csiNodeIDLongerMaxLength: upstream's strategy allows the long IDs
MAX_PARAMETERS = 512
MAX_PARAMETERS_BYTES = 256 * 1024
MAX_ATTACHMENT_METADATA_BYTES = 256 * 1024
MAX_VOLUME_ERROR_MESSAGE = 1024
MIN_TOKEN_SECONDS = 600
MAX_TOKEN_SECONDS = 1 << 32
INT32_MAX = 2**31 - 1

FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")  # upstream's sorted set
LIFECYCLE_MODES = ("Persistent", "Ephemeral")
_DRIVER_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
    ("fsGroupPolicy", "ReadWriteOnceWithFSType"), ("requiresRepublish", False), ("seLinuxMount", False))


def _dict(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json(value: Any) -> str:
    """A value as a field error shows it here: JSON; a nil pointer as Go's ``"null"``."""
    return '"null"' if value is None else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _immutable(field: str, shown: str) -> dict[str, str]:
    """``field.Invalid(path, value, "field is immutable")`` with the value already printed."""
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}: {IMMUTABLE}"}


def _qualified_name(value: str, field: str) -> Causes:
    """``ValidateQualifiedName``: each problem of ``IsQualifiedName`` a cause."""
    return [invalid(field, value, p) for p in label_key_problems(value)]


def _provisioner(name: Any, field: str) -> Causes:
    """``validateProvisioner``: required, else a qualified name once lowercased."""
    name = _text(name)
    return [required(field)] if not name else _qualified_name(name.lower(), field)


def _parameters(params: Any, field: str, allow_empty: bool) -> Causes:
    """``validateParameters``: at most 512 entries of 256 KiB in all, keys not empty."""
    params = params if isinstance(params, dict) else {}
    if len(params) > MAX_PARAMETERS:
        return [too_long(field, MAX_PARAMETERS)]
    causes = [invalid(field, "", "field can not be empty.") for key in params if not key]
    if sum(len(k.encode()) + len(_text(v).encode()) for k, v in params.items()) > MAX_PARAMETERS_BYTES:
        causes.append(too_long(field, MAX_PARAMETERS_BYTES))
    if not allow_empty and not params:
        causes.append(required(field, "must contain at least one key/value pair"))
    return causes


# -- CSIDriver -------------------------------------------------------------------------------------
def _go_modes(modes: Any) -> str:
    """A ``[]VolumeLifecycleMode`` as Go's ``%#v`` prints it."""
    if not isinstance(modes, list):
        return "[]storage.VolumeLifecycleMode(nil)"
    return "[]storage.VolumeLifecycleMode{" + ", ".join(_json(m) for m in modes) + "}"


def _token_requests(requests: Any, field: str) -> Causes:
    causes: Causes = []
    audiences: set[str] = set()
    for i, request in enumerate(requests if isinstance(requests, list) else ()):
        request = request if isinstance(request, dict) else {}
        at, audience = f"{field}[{i}]", _text(request.get("audience"))
        if audience in audiences:
            causes.append(duplicate(f"{at}.audience", audience))
            continue
        audiences.add(audience)
        seconds = request.get("expirationSeconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            continue
        if seconds < MIN_TOKEN_SECONDS:
            causes.append(invalid(f"{at}.expirationSeconds", seconds,
                                  "may not specify a duration less than 10 minutes"))
        if seconds > MAX_TOKEN_SECONDS:
            causes.append(invalid(f"{at}.expirationSeconds", seconds,
                                  "may not specify a duration larger than 2^32 seconds"))
    return causes


def _csi_driver_spec(spec: Obj) -> Causes:
    causes: Causes = []
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in FS_GROUP_POLICIES:
        causes.append(not_supported("spec.fsGroupPolicy", policy, FS_GROUP_POLICIES))
    causes += _token_requests(spec.get("tokenRequests"), "spec.tokenRequests")
    for mode in spec.get("volumeLifecycleModes") or ():
        if mode not in LIFECYCLE_MODES:
            causes.append(not_supported("spec.volumeLifecycleModes", mode, LIFECYCLE_MODES))
    period = spec.get("nodeAllocatableUpdatePeriodSeconds")
    if isinstance(period, int) and not isinstance(period, bool) and period < 10:
        causes.append(invalid("spec.nodeAllocatableUpdatePeriodSeconds", period,
                              "must be greater than or equal to 10 seconds"))
    return causes


def prepare_csi_driver(driver: Obj, old: Obj | None) -> Causes:
    spec = _dict(driver, "spec")
    for key, value in _DRIVER_DEFAULTS:
        if spec.get(key) is None:
            spec[key] = value
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]
    causes = _csi_driver_spec(spec)
    if old is not None:
        old_spec = old.get("spec") or {}
        if spec.get("attachRequired") != old_spec.get("attachRequired"):
            causes.append(_immutable("spec.attachedRequired", _json(spec.get("attachRequired"))))
        if spec.get("volumeLifecycleModes") != old_spec.get("volumeLifecycleModes"):
            causes.append(_immutable("spec.volumeLifecycleModes", _go_modes(spec.get("volumeLifecycleModes"))))
    return causes


# -- CSINode ---------------------------------------------------------------------------------------
def _csi_node_driver(driver: Obj, at: str, names: set[str]) -> Causes:
    name = _text(driver.get("name"))
    causes = csi_driver_name_causes(name, f"{at}.name")
    node_id = _text(driver.get("nodeID"))
    if not node_id:
        causes.append(required(f"{at}.nodeID"))
    if len(node_id) > CSI_NODE_ID_MAX:
        causes.append(invalid(f"{at}.nodeID", node_id, f"must be {CSI_NODE_ID_MAX} characters or less"))
    count = (driver.get("allocatable") or {}).get("count") if isinstance(driver.get("allocatable"), dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and count < 0:
        causes.append(invalid(f"{at}.allocatable.count", count, "must be greater than or equal to 0"))
    if name in names:
        causes.append(duplicate(f"{at}.name", name))
    names.add(name)
    keys: set[str] = set()
    for key in driver.get("topologyKeys") or ():
        key = _text(key)
        if not key:
            causes.append(required(at))
        if key in keys:
            causes.append(duplicate(at, key))
        keys.add(key)
        causes += _qualified_name(key, at)
    return causes


def _drivers(spec: Obj) -> list[Obj]:
    drivers = spec.get("drivers")
    return [d if isinstance(d, dict) else {} for d in drivers] if isinstance(drivers, list) else []


def prepare_csi_node(node: Obj, old: Obj | None) -> Causes:
    spec = _dict(node, "spec")
    if not spec.get("drivers"):
        spec["drivers"] = None
    names: set[str] = set()
    causes: Causes = []
    for i, driver in enumerate(_drivers(spec)):
        causes += _csi_node_driver(driver, f"spec.drivers[{i}]", names)
    if old is None:
        return causes
    for was in _drivers(old.get("spec") or {}):
        for now in _drivers(spec):
            if now.get("name") != was.get("name"):
                continue
            fixed_now = {k: v for k, v in now.items() if k != "allocatable"}
            fixed_was = {k: v for k, v in was.items() if k != "allocatable"}
            if fixed_now != fixed_was and not same_once_stored(fixed_now, fixed_was):  # (topologyKeys: [] is null)
                causes.append(_immutable("spec.drivers", _json(fixed_now)))
    return causes


# -- CSIStorageCapacity ----------------------------------------------------------------------------
def prepare_csi_storage_capacity(capacity: Obj, old: Obj | None) -> Causes:
    causes: Causes = []
    topology = capacity.get("nodeTopology")
    if isinstance(topology, dict):
        _label_selector(topology, "nodeTopology", causes)
    class_name = _text(capacity.get("storageClassName"))
    causes.extend(invalid("storageClassName", class_name, p) for p in _subdomain_problems(class_name))
    amount = capacity.get("capacity")
    if amount is not None:
        try:
            parsed = parse_quantity(amount)
        except QuantityError as e:
            raise BadQuantity(f"capacity: {e}") from e
        if parsed < 0:
            causes.append(invalid("capacity", str(amount), "must be greater than or equal to 0"))
    if old is not None:
        if topology != old.get("nodeTopology"):
            causes.append(_immutable("nodeTopology", _json(topology)))
        if class_name != _text(old.get("storageClassName")):
            causes.append(invalid("storageClassName", class_name, IMMUTABLE))
    return causes


# -- VolumeAttachment ------------------------------------------------------------------------------
def _attachment_source(source: Any) -> Causes:
    source = source if isinstance(source, dict) else {}
    volume, inline = source.get("persistentVolumeName"), source.get("inlineVolumeSpec")
    both = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    if volume is None and inline is None:
        return [required("spec.source", both)]
    if volume is not None and inline is not None:
        return [forbidden("spec.source", both)]
    if volume is not None:
        return [] if volume else [required("spec.source.persistentVolumeName",
                                           "must specify non empty persistentVolumeName")]
    return persistent_volume_spec_causes(inline if isinstance(inline, dict) else {}, "spec.source.inlineVolumeSpec",
                                         inline=True)


def _volume_error(error: Any, field: str) -> Causes:
    if not isinstance(error, dict):
        return []
    causes: Causes = []
    if len(_text(error.get("message")).encode()) > MAX_VOLUME_ERROR_MESSAGE:
        # (upstream names the metadata's limit here, not the message's)
        causes.append(too_long(f"{field}.message", MAX_ATTACHMENT_METADATA_BYTES))
    code = error.get("errorCode")
    if isinstance(code, int) and not isinstance(code, bool) and code < 0:
        causes.append(invalid(f"{field}.errorCode", code, f"must be between 0 and {INT32_MAX}, inclusive"))
    return causes


def _attachment_status(status: Any) -> Causes:
    status = status if isinstance(status, dict) else {}
    metadata = status.get("attachmentMetadata")
    causes: Causes = []
    if isinstance(metadata, dict) and sum(len(k.encode()) + len(_text(v).encode())
                                          for k, v in metadata.items()) > MAX_ATTACHMENT_METADATA_BYTES:
        causes.append(too_long("status.attachmentMetadata", MAX_ATTACHMENT_METADATA_BYTES))
    return causes + _volume_error(status.get("attachError"), "status.attachError") \
        + _volume_error(status.get("detachError"), "status.detachError")


def prepare_volume_attachment(attachment: Obj, old: Obj | None) -> Causes:
    """``ValidateVolumeAttachment`` then v1's ``ValidateVolumeAttachmentV1`` (whose checks
    of the attacher repeat the first's Required, as upstream's do)."""
    spec = _dict(attachment, "spec")
    attacher, node_name = _text(spec.get("attacher")), _text(spec.get("nodeName"))
    causes: Causes = [required("spec.attacher")] if not attacher else []
    causes += _attachment_source(spec.get("source"))
    causes.extend(invalid("spec.nodeName", node_name, p) for p in _subdomain_problems(node_name))
    causes += _attachment_status(attachment.get("status"))
    causes += csi_driver_name_causes(attacher, "spec.attacher")
    volume = (spec.get("source") or {}).get("persistentVolumeName") if isinstance(spec.get("source"), dict) else None
    if isinstance(volume, str) and volume:
        causes.extend(invalid("spec.source.persistentVolumeName", volume, p) for p in _subdomain_problems(volume))
    if old is not None and spec != old.get("spec"):
        causes.append(_immutable("spec", _json(spec)))
    return causes


# -- VolumeAttributesClass -------------------------------------------------------------------------
def prepare_volume_attributes_class(vac: Obj, old: Obj | None) -> Causes:
    causes: Causes = []
    if old is not None:
        if vac.get("driverName") != old.get("driverName"):
            causes.append(forbidden("driverName", "updates to driverName are forbidden."))
        if (vac.get("parameters") or {}) != (old.get("parameters") or {}):
            causes.append(forbidden("parameters", "updates to parameters are forbidden."))
    return causes + _provisioner(vac.get("driverName"), "driverName") \
        + _parameters(vac.get("parameters"), "parameters", allow_empty=False)
