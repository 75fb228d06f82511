"""PersistentVolumeClaims, PersistentVolumes and StorageClasses: defaults and validation.

What kube-apiserver's strategies for these types do on every write:

- a claim's ``volumeMode`` defaults to ``Filesystem``; it needs access modes and a
  ``resources.requests.storage`` above zero; once created its spec is fixed but for
  ``resources.requests`` (a bound claim may grow, never shrink below its capacity),
  ``volumeAttributesClassName``, the ``volumeName`` its binding sets, and a
  ``storageClassName`` it had none of (the default class, assigned later);
- a volume's reclaim policy defaults to ``Retain`` and its ``volumeMode`` to
  ``Filesystem``; it needs a capacity, access modes and exactly one volume source
  (a ``local`` one also needs a node affinity);
- a class's reclaim policy defaults to ``Delete`` and its binding mode to
  ``Immediate``; its provisioner, parameters, reclaim policy and binding mode are
  fixed once created.

Binding and provisioning are the controller's (``controllers/volumes.py``).
"""

from __future__ import annotations

from typing import Any

from ..quantity import QuantityError, parse_quantity
from .causes import forbidden, not_supported

__all__ = ["VOLUME_SOURCES", "prepare_claim", "prepare_storage_class", "prepare_volume"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk",
    "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)


class BadQuantity(ValueError):
    """A quantity that does not parse: upstream's decoder rejects the body (400)."""


def _required(field: str) -> dict[str, str]:
    return {"reason": "FieldValueRequired", "field": field, "message": "Required value"}


def _dict(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def storage_of(resources: Any, field: str) -> Any:
    """The ``storage`` quantity of a resource list, parsed (None when absent)."""
    if not isinstance(resources, dict) or resources.get("storage") is None:
        return None
    try:
        return parse_quantity(resources["storage"])
    except QuantityError as e:
        raise BadQuantity(f"{field}.storage: {e}") from e


def _access_modes(modes: Any, field: str) -> Causes:
    if not modes:
        return [{"reason": "FieldValueRequired", "field": field,
                 "message": "Required value: at least 1 access mode is required"}]
    causes: Causes = []
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            causes.append(not_supported(f"{field}[{i}]", mode, ACCESS_MODES))
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        causes.append(forbidden(field, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _volume_mode(spec: Obj) -> Causes:
    mode = spec.setdefault("volumeMode", "Filesystem")
    return [] if mode in ("Filesystem", "Block") else [not_supported("spec.volumeMode", mode, ("Block", "Filesystem"))]


def prepare_claim(pvc: Obj, old: Obj | None) -> Causes:
    spec = _dict(pvc, "spec")
    causes = _volume_mode(spec) + _access_modes(spec.get("accessModes"), "spec.accessModes")
    requested = storage_of((spec.get("resources") or {}).get("requests"), "spec.resources.requests")
    if requested is None:
        causes.append(_required("spec.resources[storage]"))
    elif requested <= 0:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.resources[storage]",
                       "message": f'Invalid value: "{spec["resources"]["requests"]["storage"]}": '
                                  "must be greater than zero"})
    if old is None:
        pvc.setdefault("status", {}).setdefault("phase", "Pending")
        return causes
    old_spec = old.get("spec") or {}
    mutable = ["resources", "volumeAttributesClassName", "volumeName"]
    if old_spec.get("storageClassName") is None:  # a default class is assigned once, later
        mutable.append("storageClassName")
    fixed = {k: v for k, v in spec.items() if k not in mutable}
    if fixed != {k: v for k, v in old_spec.items() if k not in mutable} \
            or (old_spec.get("volumeName") and spec.get("volumeName") != old_spec.get("volumeName")):
        causes.append(forbidden("spec", "spec is immutable after creation except resources.requests and "
                                         "volumeAttributesClassName for bound claims"))
    capacity = storage_of(((old.get("status") or {}).get("capacity")), "status.capacity")
    if requested is not None and capacity is not None and requested < capacity:
        causes.append(forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
    return causes


def prepare_volume(pv: Obj, old: Obj | None) -> Causes:
    spec = _dict(pv, "spec")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    causes = _volume_mode(spec) + _access_modes(spec.get("accessModes"), "spec.accessModes")
    if storage_of(spec.get("capacity"), "spec.capacity") is None:
        causes.append(_required("spec.capacity"))
    policy = spec["persistentVolumeReclaimPolicy"]
    if policy not in ("Delete", "Recycle", "Retain"):
        causes.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, ("Delete", "Recycle", "Retain")))
    sources = [s for s in VOLUME_SOURCES if spec.get(s) is not None]
    if not sources:
        causes.append({"reason": "FieldValueRequired", "field": "spec",
                       "message": "Required value: must specify a volume type"})
    for extra in sources[1:]:
        causes.append(forbidden(f"spec.{extra}", "may not specify more than 1 volume type"))
    if sources == ["local"] and not spec.get("nodeAffinity"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.nodeAffinity",
                       "message": "Required value: Local volume requires node affinity"})
    if old is None:
        pv.setdefault("status", {}).setdefault("phase", "Pending")
    elif sources and (old.get("spec") or {}).get(sources[0]) != spec.get(sources[0]):
        causes.append(forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after "
                                                                "creation"))
    return causes


_CLASS_FIXED = ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")


def prepare_storage_class(sc: Obj, old: Obj | None) -> Causes:
    sc.setdefault("reclaimPolicy", "Delete")
    sc.setdefault("volumeBindingMode", "Immediate")
    causes: Causes = []
    if not sc.get("provisioner"):
        causes.append(_required("provisioner"))
    if sc["reclaimPolicy"] not in ("Delete", "Retain"):
        causes.append(not_supported("reclaimPolicy", sc["reclaimPolicy"], ("Delete", "Retain")))
    if sc["volumeBindingMode"] not in ("Immediate", "WaitForFirstConsumer"):
        causes.append(not_supported("volumeBindingMode", sc["volumeBindingMode"],
                                    ("Immediate", "WaitForFirstConsumer")))
    if old is not None:
        for field in _CLASS_FIXED:
            if sc.get(field) != old.get(field):
                causes.append(forbidden(field, f"updates to {field} are forbidden."))
    return causes
