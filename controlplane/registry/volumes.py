"""PersistentVolumeClaims, PersistentVolumes and StorageClasses: defaults and validation.

What kube-apiserver's strategies for these types do on every write:

- a claim's ``volumeMode`` defaults to ``Filesystem``; it needs access modes and a
  ``resources.requests.storage`` above zero; once created its spec is fixed but for
  a *bound* claim's storage request (it may grow, never shrink to its capacity; an
  unbound claim's request is fixed), ``volumeAttributesClassName`` (not unset once set),
  the ``volumeName`` its binding sets once, and a ``storageClassName`` it had none of
  (the default class, assigned later);
- a volume's reclaim policy defaults to ``Retain`` and its ``volumeMode`` to
  ``Filesystem``; it needs a capacity, access modes and exactly one volume source
  (a ``local`` one also needs a node affinity). Its spec is checked as upstream's
  ``ValidatePersistentVolumeSpec`` (``persistent_volume_spec_causes``), which a
  VolumeAttachment's ``inlineVolumeSpec`` is checked with too, as an *inline* spec: a
  ``csi`` source only, no capacity, claimRef, node affinity or storage class, reclaimed
  by ``Retain`` and mounted as a ``Filesystem`` if it says so. Of the sources' own
  fields only an inline ``csi`` source's are checked (``ValidateCSIDriverName``, a
  volume handle, its secret references): upstream checks every source's, of every
  volume, but the provisioning controller here names a volume's CSI driver after its
  class's provisioner (``example.com/csi``), which that check would refuse;
- a class's reclaim policy defaults to ``Delete`` and its binding mode to
  ``Immediate``; its provisioner, parameters, reclaim policy and binding mode are
  fixed once created.

Binding and provisioning are the controller's (``controllers/volumes.py``).
"""

from __future__ import annotations

import posixpath
from typing import Any

from ..quantity import QuantityError, parse_quantity
from .causes import forbidden, invalid, not_supported, required, too_long
from .podvalidation import dns_label_problems, subdomain_problems

__all__ = ["VOLUME_SOURCES", "csi_driver_name_causes", "persistent_volume_spec_causes", "prepare_claim",
           "prepare_storage_class", "prepare_volume"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")  # upstream's sorted set
# a PersistentVolumeSpec's sources in the order ValidatePersistentVolumeSpec meets them: the
# first one given is the volume's, each later one "more than 1 volume type", named at the
# path upstream writes (cephfs's at ``cephFS``); a flexVolume counts but is never the extra one
_SOURCES_IN_ORDER = (
    ("hostPath", "hostPath"), ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("nfs", "nfs"), ("rbd", "rbd"), ("quobyte", "quobyte"), ("cephfs", "cephFS"), ("iscsi", "iscsi"),
    ("cinder", "cinder"), ("fc", "fc"), ("flexVolume", ""), ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("scaleIO", "scaleIO"), ("local", "local"),
    ("storageos", "storageos"), ("csi", "csi"),
)
VOLUME_SOURCES = tuple(sorted(source for source, _ in _SOURCES_IN_ORDER))
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
CSI_DRIVER_NAME_MAX = 63
_CSI_SECRET_REFS = ("controllerPublishSecretRef", "controllerExpandSecretRef", "nodePublishSecretRef",
                    "nodeExpandSecretRef")
INLINE = "may not be specified in the context of inline volumes"


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


def _volume_access_modes(modes: Any, field: str) -> Causes:
    """A PersistentVolumeSpec's access modes: required, each supported (the bad ones named at
    the list, not the item), ReadWriteOncePod alone among the supported ones."""
    modes = modes if isinstance(modes, list) else []
    causes: Causes = [required(field)] if not modes else []
    causes.extend(not_supported(field, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES)
    if "ReadWriteOncePod" in modes and any(m in ACCESS_MODES and m != "ReadWriteOncePod" for m in modes):
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
    return causes + _claim_update_causes(pvc, spec, old, requested)


_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
_CLAIM_SPEC_FIXED = "spec is immutable after creation except resources.requests and volumeAttributesClassName " \
                    "for bound claims"


def _claim_update_causes(pvc: Obj, spec: Obj, old: Obj, requested: Any) -> Causes:
    """``ValidatePersistentVolumeClaimUpdate``: the spec compared with the stored one, but for
    the ``volumeName`` the binder sets once, a ``storageClassName`` a claim had none of (the
    default class, assigned later; the beta annotation's class when it had that), the
    ``volumeAttributesClassName``, and the storage request of a *bound* claim (an expansion;
    an unbound claim's request is as fixed as the rest). The beta class annotation is
    fixed; the volume mode and a set ``volumeAttributesClassName`` have words of their own;
    a request below the one stored may not go down to the capacity in the status
    (RecoverVolumeExpansionFailure, GA: a failed expansion can be taken back above it).
    Upstream's Forbidden ends with a ``cmp.Diff`` of the two specs, not reproduced here."""
    causes: Causes = []
    old_spec = old.get("spec") or {}
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    was, now = dict(old_spec), dict(spec)
    if not old_spec.get("volumeName"):  # the binder's, once
        was["volumeName"] = spec.get("volumeName")
    old_class, new_class = old_spec.get("storageClassName"), spec.get("storageClassName")
    old_beta = old_annotations.get(_BETA_CLASS)
    if old_class is None and new_class is not None and (_BETA_CLASS not in old_annotations or new_class == old_beta):
        now["storageClassName"] = None  # validateStorageClassUpgradeFromNil / ...FromAnnotation
        was["storageClassName"] = None
    upgraded = old_beta is not None and old_class is None and new_class == old_beta \
        and annotations.get(_BETA_CLASS, old_beta) == old_beta  # the beta annotation's class made the field's
    if not upgraded and annotations.get(_BETA_CLASS, "") != (old_beta or ""):  # ValidateImmutableAnnotation
        causes.append(invalid(f"metadata.annotations.{_BETA_CLASS}", annotations.get(_BETA_CLASS, ""),
                              "field is immutable"))
    bound = (old.get("status") or {}).get("phase") == "Bound"  # (an update keeps the stored status)
    resources = now.get("resources")
    if bound and isinstance(resources, dict) and isinstance(resources.get("requests"), dict):
        requests = dict(resources["requests"])
        old_storage = ((old_spec.get("resources") or {}).get("requests") or {}).get("storage")
        if old_storage is None:
            requests.pop("storage", None)
        else:
            requests["storage"] = old_storage
        now["resources"] = {**resources, "requests": requests}
    now["volumeAttributesClassName"] = was.get("volumeAttributesClassName")
    now["resources"], was["resources"] = _by_value(now.get("resources")), _by_value(was.get("resources"))
    if {k: v for k, v in now.items() if v is not None} != {k: v for k, v in was.items() if v is not None}:
        causes.append(forbidden("spec", _CLAIM_SPEC_FIXED))
    previous = storage_of((old_spec.get("resources") or {}).get("requests"), "spec.resources.requests")
    capacity = storage_of(((old.get("status") or {}).get("capacity")), "status.capacity")
    if requested is not None and previous is not None and requested < previous \
            and capacity is not None and requested <= capacity:
        causes.append(forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
    if spec.get("volumeMode") != old_spec.get("volumeMode"):
        causes.append(invalid("volumeMode", spec.get("volumeMode"), "field is immutable"))
    old_vac, new_vac = old_spec.get("volumeAttributesClassName"), spec.get("volumeAttributesClassName")
    if old_vac is not None and new_vac is None:
        causes.append(forbidden("spec.volumeAttributesClassName", "update from non-nil value to nil is forbidden"))
    elif old_vac is not None and new_vac == "":
        causes.append(forbidden("spec.volumeAttributesClassName",
                                "update from non-nil value to an empty string is forbidden"))
    return causes


def _by_value(resources: Any) -> Any:
    """A claim's ``resources`` with its quantities as their values: upstream compares the specs
    with ``Semantic.DeepEqual``, to which ``1e9`` and ``1G`` (what a number written for them
    stores) are the same quantity."""
    if not isinstance(resources, dict):
        return resources
    out = dict(resources)
    for key in ("requests", "limits"):
        amounts = out.get(key)
        if isinstance(amounts, dict):
            valued: dict[str, Any] = {}
            for name, amount in amounts.items():
                try:
                    valued[name] = parse_quantity(amount)
                except (QuantityError, TypeError):
                    valued[name] = amount
            out[key] = valued
    return out


def csi_driver_name_causes(name: Any, field: str) -> Causes:
    """``ValidateCSIDriverName``: required, at most 63 characters, a DNS subdomain once lowercased."""
    name = name if isinstance(name, str) else ""
    causes: Causes = [required(field)] if not name else []
    if len(name) > CSI_DRIVER_NAME_MAX:
        causes.append(too_long(field, CSI_DRIVER_NAME_MAX))
    causes.extend(invalid(field, name, p) for p in subdomain_problems(name.lower()))
    return causes


def _secret_reference(ref: Obj, at: str) -> Causes:
    """``validatePVSecretReference``: a name (a DNS subdomain) and a namespace (a DNS label)."""
    name, namespace = ref.get("name") or "", ref.get("namespace") or ""
    causes: Causes = [required(f"{at}.name")] if not name else \
        [invalid(f"{at}.name", name, p) for p in subdomain_problems(name)]
    causes += [required(f"{at}.namespace")] if not namespace else \
        [invalid(f"{at}.namespace", namespace, p) for p in dns_label_problems(namespace)]
    return causes


def _csi_source(csi: Obj, at: str) -> Causes:
    """``validateCSIPersistentVolumeSource``."""
    causes = csi_driver_name_causes(csi.get("driver"), f"{at}.driver")
    if not csi.get("volumeHandle"):
        causes.append(required(f"{at}.volumeHandle"))
    for ref in _CSI_SECRET_REFS:
        if isinstance(csi.get(ref), dict):
            causes += _secret_reference(csi[ref], f"{at}.{ref}")
    return causes


def _sources(spec: Obj, at: str, inline: bool) -> Causes:
    """Exactly one volume source, in upstream's order; a ``local`` one with a node affinity;
    an inline ``csi`` one's fields (see the module's docstring)."""
    causes: Causes = []
    count = 0
    for source, named in _SOURCES_IN_ORDER:
        value = spec.get(source)
        if value is None:
            continue
        if count and named:
            causes.append(forbidden(f"{at}.{named}", "may not specify more than 1 volume type"))
            continue
        count += 1
        if source == "csi" and inline and isinstance(value, dict):
            causes += _csi_source(value, f"{at}.csi")
        elif source == "local" and (inline or not spec.get("nodeAffinity")):  # (inline: never taken as given)
            causes.append(required(f"{at}.nodeAffinity", "Local volume requires node affinity"))
    if not count:
        causes.append(required(at, "must specify a volume type"))
    return causes


def _inline_only(spec: Obj, at: str) -> Causes:
    """What an inline spec may not say, before the rest is checked as any volume's."""
    causes: Causes = []
    if spec.get("claimRef") is not None:
        causes.append(forbidden(f"{at}.claimRef", INLINE))
    if spec.get("capacity"):
        causes.append(forbidden(f"{at}.capacity", INLINE))
    if spec.get("csi") is None:
        causes.append(required(f"{at}.csi", "has to be specified in the context of inline volumes"))
    return causes


def _reclaim_policy(policy: Any, at: str, inline: bool) -> Causes:
    if not policy:
        return []
    if inline:
        return [] if policy == "Retain" else [forbidden(at, "may only be Retain in the context of inline volumes")]
    return [] if policy in RECLAIM_POLICIES else [not_supported(at, policy, RECLAIM_POLICIES)]


def _volume_mode_of_spec(mode: Any, at: str, inline: bool) -> Causes:
    if mode is None:
        return []
    if inline:
        return [] if mode == "Filesystem" else \
            [forbidden(at, "may not specify volumeMode other than Filesystem in the context of inline volumes")]
    return [] if mode in VOLUME_MODES else [not_supported(at, mode, VOLUME_MODES)]


def _class_names(spec: Obj, at: str, inline: bool) -> Causes:
    """The storage class (none inline) and the volume attributes class (a csi volume's)."""
    causes: Causes = []
    class_name = spec.get("storageClassName")
    if class_name:
        causes += [forbidden(f"{at}.storageClassName", INLINE)] if inline else \
            [invalid(f"{at}.storageClassName", class_name, p) for p in subdomain_problems(str(class_name))]
    attributes = spec.get("volumeAttributesClassName")
    if attributes is not None:
        field = f"{at}.volumeAttributesClassName"
        causes += [required(field, "an empty string is disallowed")] if not attributes else \
            [invalid(field, attributes, p) for p in subdomain_problems(str(attributes))]
        if spec.get("csi") is None:
            causes.append(required(f"{at}.csi", "has to be specified when using volumeAttributesClassName"))
    return causes


def _recycles_root(spec: Obj) -> bool:
    """A hostPath volume of ``/`` (as Go's ``path.Clean`` reads it) that would be recycled."""
    host_path = spec.get("hostPath")
    if not isinstance(host_path, dict) or spec.get("persistentVolumeReclaimPolicy") != "Recycle":
        return False
    path = str(host_path.get("path") or "")
    return path.startswith("/") and posixpath.normpath("/" + path.lstrip("/")) == "/"


def _node_affinity(affinity: Any, at: str) -> Causes:
    """``validateVolumeNodeAffinity``'s ``ValidateNodeSelector`` of ``required``: one term at least
    (none, null or ``[]``; the schema leaves a NodeSelector's terms to the hand-written checks)."""
    selector = affinity.get("required") if isinstance(affinity, dict) else None
    if isinstance(selector, dict) and not selector.get("nodeSelectorTerms"):
        return [required(f"{at}.required.nodeSelectorTerms", "must have at least one node selector term")]
    return []


def persistent_volume_spec_causes(spec: Obj, at: str, inline: bool = False) -> Causes:
    """``ValidatePersistentVolumeSpec`` of the spec at path ``at``, in upstream's order;
    ``inline``: a VolumeAttachment's ``inlineVolumeSpec`` (see the module's docstring)."""
    causes = _inline_only(spec, at) if inline else []
    causes += _volume_access_modes(spec.get("accessModes"), f"{at}.accessModes")
    if not inline and storage_of(spec.get("capacity"), f"{at}.capacity") is None:
        causes.append(_required(f"{at}.capacity"))
    causes += _reclaim_policy(spec.get("persistentVolumeReclaimPolicy"), f"{at}.persistentVolumeReclaimPolicy", inline)
    if inline and spec.get("nodeAffinity") is not None:
        causes.append(forbidden(f"{at}.nodeAffinity", INLINE))
    causes += _node_affinity(spec.get("nodeAffinity"), f"{at}.nodeAffinity")
    causes += _sources(spec, at, inline)
    if _recycles_root(spec):
        causes.append(forbidden(f"{at}.persistentVolumeReclaimPolicy",
                                "may not be 'recycle' for a hostPath mount of '/'"))
    return causes + _class_names(spec, at, inline) + _volume_mode_of_spec(spec.get("volumeMode"), f"{at}.volumeMode",
                                                                          inline)


def prepare_volume(pv: Obj, old: Obj | None) -> Causes:
    spec = _dict(pv, "spec")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    causes = persistent_volume_spec_causes(spec, "spec")
    sources = [s for s, _ in _SOURCES_IN_ORDER if spec.get(s) is not None]
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
