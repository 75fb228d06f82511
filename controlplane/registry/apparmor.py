"""A pod's deprecated AppArmor annotations (``container.apparmor.security.beta.kubernetes.io/<container>``)
beside its ``appArmorProfile`` fields, as kube-apiserver 1.34+ treats them (KEP-24's version skew,
phase 2, kubernetes/kubernetes#131989): at a create, an annotation without its container's field is
copied into the field (the pod strategy's ``applyAppArmorVersionSkew``), never the reverse any more;
the annotations are checked on every write and fixed once the pod exists (``ValidatePodSpecificAnnotations``,
``ValidatePodSpecificAnnotationUpdates``, ``validateAppArmorAnnotationsAndFieldsMatchOnCreate`` in
``pkg/apis/core/validation``), as is the mirror pod annotation those functions check beside them.

Cheap on purpose, as every pod write passes here: a pod without annotations costs one test, one
with annotations a scan of their keys for the prefix::

    pod = {"metadata": {"annotations": {PREFIX + "web": "runtime/default"}},
           "spec": {"containers": [{"name": "web"}]}}
    version_skew(pod)      # ['metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]:
                           #   deprecated since v1.30; use the "appArmorProfile" field instead']
    pod["spec"]["containers"][0]["securityContext"]     # {'appArmorProfile': {'type': 'RuntimeDefault'}}
"""

from __future__ import annotations

from typing import Any

from ..gostrings import quote
from .causes import Causes, forbidden, invalid

__all__ = ["PREFIX", "annotation_causes", "concerned", "create_causes", "update_causes", "version_skew"]

PREFIX = "container.apparmor.security.beta.kubernetes.io/"
MIRROR = "kubernetes.io/config.mirror"
_WARNING = 'deprecated since v1.30; use the "appArmorProfile" field instead'
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")  # VisitContainers' order
_MAX_LOCALHOST = 4095  # PATH_MAX - 1, as ValidateAppArmorProfileField
_TYPE_MISMATCH = "apparmor type in annotation and field must match"
_PROFILE_MISMATCH = "apparmor profile in annotation and field must match"

Obj = dict[str, Any]


def _apparmor_keys(annotations: Obj) -> bool:
    for key in annotations:  # noqa: SIM110 (a plain loop: any() of a generator costs twice as much)
        if key.startswith(PREFIX):
            return True
    return False


def concerned(annotations: Obj) -> bool:
    """Whether the (non-empty) annotations hold anything checked here: an AppArmor or a
    mirror pod annotation."""
    return MIRROR in annotations or _apparmor_keys(annotations)


def _containers(spec: Obj) -> list[Obj]:
    out: list[Obj] = []
    for key in _CONTAINER_LISTS:
        listed = spec.get(key)
        if isinstance(listed, list):
            out.extend(c for c in listed if isinstance(c, dict))
    return out


def _profile(holder: Any) -> Obj | None:
    sc = holder.get("securityContext") if isinstance(holder, dict) else None
    profile = sc.get("appArmorProfile") if isinstance(sc, dict) else None
    return profile if isinstance(profile, dict) else None


def _field_for(annotation: Any) -> Obj | None:
    """``ApparmorFieldForAnnotation``: the field an annotation's value means, or None."""
    if annotation == "unconfined":
        return {"type": "Unconfined"}
    if annotation == "runtime/default":
        return {"type": "RuntimeDefault"}
    if isinstance(annotation, str) and annotation.startswith("localhost/") and len(annotation) > 10:
        local = annotation[10:]
        # ValidateAppArmorProfileField would refuse these: upstream copies nothing then
        if local.strip() != local or len(local.encode()) > _MAX_LOCALHOST:
            return None
        return {"type": "Localhost", "localhostProfile": local}
    return None


def _windows(spec: Obj) -> bool:
    os = spec.get("os")
    return isinstance(os, dict) and os.get("name") == "windows"


def version_skew(pod: Obj) -> list[str]:
    """``applyAppArmorVersionSkew`` (the pod strategy's ``PrepareForCreate``): each container
    that has an AppArmor annotation and no ``appArmorProfile`` of its own is given the field
    the annotation means, unless that is the pod's own profile; the annotation is warned of
    where it was copied or could not be. ``pod`` is changed in place; the warnings are returned,
    to be sent before the strategy's others. Not on an update, nor for a Windows pod."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not annotations or not isinstance(annotations, dict) or not _apparmor_keys(annotations):
        return []
    spec = pod.get("spec")
    if not isinstance(spec, dict) or _windows(spec):
        return []
    pod_profile = _profile(spec)
    out: list[str] = []
    for c in _containers(spec):
        key = PREFIX + str(c.get("name") or "")
        if key not in annotations or _profile(c) is not None:
            continue
        field = _field_for(annotations[key])
        warn = field is None
        if field is not None and not _same(field, pod_profile):
            sc = c.get("securityContext")
            if not isinstance(sc, dict):
                sc = c["securityContext"] = {}
            sc["appArmorProfile"] = field
            warn = True
        if warn:
            out.append(f"metadata.annotations[{key}]: {_WARNING}")
    return out


def _same(field: Obj, profile: Obj | None) -> bool:
    """``apiequality.Semantic.DeepEqual`` of two profiles (a missing one equals none)."""
    return profile is not None and field.get("type") == profile.get("type") \
        and field.get("localhostProfile") == profile.get("localhostProfile")


def annotation_causes(annotations: Obj, spec: Obj, path: str = "metadata.annotations") -> Causes:
    """The AppArmor and mirror pod halves of ``ValidatePodSpecificAnnotations``, for the pod's
    (non-empty) annotations: a mirror pod names its node; an AppArmor annotation names a
    container of the pod and a profile of the known forms. ``path``: the annotations' (a
    template's are ``spec.template.annotations``, as upstream's path says it)."""
    causes: Causes = []
    if MIRROR in annotations and not spec.get("nodeName"):
        causes.append(invalid(f"{path}[{MIRROR}]", annotations[MIRROR],
                              "must set spec.nodeName if mirror pod annotation is set"))
    names: set[Any] | None = None
    for key, value in annotations.items():
        if not key.startswith(PREFIX):
            continue
        if names is None:
            names = {c.get("name") for c in _containers(spec)}
        container = key[len(PREFIX):]
        at = f"{path}[{key}]"
        if container not in names:
            causes.append(invalid(at, container, "container not found"))
        if value not in ("", "runtime/default", "unconfined") and \
                not (isinstance(value, str) and value.startswith("localhost/")):
            causes.append(invalid(at, value, f"invalid AppArmor profile name: {quote(str(value))}"))
    return causes


def create_causes(annotations: Obj, spec: Obj, path: str = "spec") -> Causes:
    """``validateAppArmorAnnotationsAndFieldsMatchOnCreate``: where a container has both an
    annotation and a profile (its own, or else the pod's), they say the same. Not for Windows.
    ``path``: the pod spec's (a template's: ``spec.template.spec``)."""
    if _windows(spec) or not _apparmor_keys(annotations):
        return []
    pod_profile = _profile(spec)
    causes: Causes = []
    for key, listed in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers")),
                        ("ephemeralContainers", spec.get("ephemeralContainers"))):
        if not isinstance(listed, list):
            continue
        for i, c in enumerate(listed):
            if not isinstance(c, dict):
                continue
            profile = _profile(c) or pod_profile
            annotation = annotations.get(PREFIX + str(c.get("name") or "")) if profile is not None else None
            if profile is None or annotation is None:
                continue
            at = f"{path}.{key}[{i}].securityContext.appArmorProfile"
            kind = profile.get("type")
            if (kind == "Unconfined" and annotation != "unconfined") or \
                    (kind == "RuntimeDefault" and annotation != "runtime/default"):
                causes.append(forbidden(f"{at}.type", _TYPE_MISMATCH))
            elif kind == "Localhost":
                if not (isinstance(annotation, str) and annotation.startswith("localhost/")):
                    causes.append(forbidden(f"{at}.type", _TYPE_MISMATCH))
                elif profile.get("localhostProfile") != annotation[10:]:
                    causes.append(forbidden(f"{at}.localhostProfile", _PROFILE_MISMATCH))
    return causes


def update_causes(annotations: Obj, old: Obj) -> Causes:
    """The first half of ``ValidatePodSpecificAnnotationUpdates``, for annotations that changed:
    an AppArmor or mirror pod annotation may be neither added, removed nor changed (the second
    half checks the new annotations as a create's: ``annotation_causes``)."""
    causes: Causes = []
    for key, value in old.items():
        if key in annotations and annotations[key] == value:
            continue
        if key.startswith(PREFIX):
            causes.append(forbidden(f"metadata.annotations[{key}]", "may not remove or update AppArmor annotations"))
        if key == MIRROR:
            causes.append(forbidden(f"metadata.annotations[{key}]", "may not remove or update mirror pod annotation"))
    for key in annotations:
        if key in old:
            continue
        if key.startswith(PREFIX):
            causes.append(forbidden(f"metadata.annotations[{key}]", "may not add AppArmor annotations"))
        if key == MIRROR:
            causes.append(forbidden(f"metadata.annotations[{key}]", "may not add mirror pod annotation"))
    return causes
