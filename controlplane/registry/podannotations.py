"""The annotations of a pod (and of a workload's pod template) that kube-apiserver reads:
upstream's ``ValidatePodSpecificAnnotations``, ``ValidatePodSpecificAnnotationUpdates`` and the
annotation/field agreement checks of ``pkg/apis/core/validation``, and the pod strategy's AppArmor
version skew.

The deprecated AppArmor annotations (``container.apparmor.security.beta.kubernetes.io/<container>``)
beside the ``appArmorProfile`` fields, as kube-apiserver 1.34+ treats them (KEP-24's version skew,
phase 2, kubernetes/kubernetes#131989): at a create, an annotation without its container's field is
copied into the field (the pod strategy's ``applyAppArmorVersionSkew``), never the reverse any more;
the annotations name containers and profiles, agree with the fields at a create
(``validateAppArmorAnnotationsAndFieldsMatchOnCreate``) and are fixed once the pod exists. Beside
them: the mirror pod annotation (names a node, fixed), the seccomp annotations (known profiles,
agreeing with the ``seccompProfile`` fields at a create: ``validateSeccompAnnotationsAndFields``),
``controller.kubernetes.io/pod-deletion-cost`` (a 32-bit integer) and
``scheduler.alpha.kubernetes.io/tolerations`` (JSON tolerations, as a pod spec's).

Cheap on purpose, as every pod write passes here: a pod without annotations costs one test, one
with annotations a scan of their keys::

    pod = {"metadata": {"annotations": {PREFIX + "web": "runtime/default"}},
           "spec": {"containers": [{"name": "web"}]}}
    version_skew(pod)      # ['metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]:
                           #   deprecated since v1.30; use the "appArmorProfile" field instead']
    pod["spec"]["containers"][0]["securityContext"]     # {'appArmorProfile': {'type': 'RuntimeDefault'}}
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..gostrings import quote
from .causes import Causes, forbidden, invalid

__all__ = ["DELETION_COST", "MIRROR", "PREFIX", "TOLERATIONS", "annotation_causes", "concerned", "create_causes",
           "local_descending_path", "update_causes", "valid_deletion_cost", "version_skew"]

PREFIX = "container.apparmor.security.beta.kubernetes.io/"
MIRROR = "kubernetes.io/config.mirror"
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
TOLERATIONS = "scheduler.alpha.kubernetes.io/tolerations"
_SECCOMP_TYPE_MISMATCH = "seccomp type in annotation and field must match"
_SECCOMP_PROFILE_MISMATCH = "seccomp profile in annotation and field must match"
_PREFIXES = (PREFIX, SECCOMP_PREFIX)
_INT32 = re.compile(r"[+-]?[0-9]+\Z")
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
    """Whether the (non-empty) annotations hold anything checked here: an AppArmor, seccomp,
    mirror pod, deletion cost or tolerations annotation."""
    if MIRROR in annotations or SECCOMP_POD in annotations or DELETION_COST in annotations \
            or TOLERATIONS in annotations:
        return True
    for key in annotations:  # noqa: SIM110 (as _apparmor_keys)
        if key.startswith(_PREFIXES):
            return True
    return False


def _containers(spec: Obj) -> list[Obj]:
    out: list[Obj] = []
    for key in _CONTAINER_LISTS:
        listed = spec.get(key)
        if isinstance(listed, list):
            out.extend(c for c in listed if isinstance(c, dict))
    return out


def _profile(holder: Any, field: str = "appArmorProfile") -> Obj | None:
    sc = holder.get("securityContext") if isinstance(holder, dict) else None
    profile = sc.get(field) if isinstance(sc, dict) else None
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


def annotation_causes(annotations: Obj, spec: Obj, path: str = "metadata.annotations",
                      invalid_cost: bool = False) -> Causes:
    """``ValidatePodSpecificAnnotations``, for the pod's (non-empty) annotations, in its order:
    a mirror pod names its node; the tolerations annotation is JSON tolerations, each valid as a
    pod spec's (``ValidateTolerationsInPodAnnotations``); the deletion cost is a 32-bit integer
    (unless ``invalid_cost``: an update of a pod stored with an invalid one); a seccomp annotation
    names a known profile; an AppArmor annotation names a container of the pod and a profile of
    the known forms. ``path``: the annotations' (a template's are ``spec.template.annotations``,
    as upstream's path says it)."""
    causes: Causes = []
    if MIRROR in annotations and not spec.get("nodeName"):
        causes.append(invalid(f"{path}[{MIRROR}]", annotations[MIRROR],
                              "must set spec.nodeName if mirror pod annotation is set"))
    if annotations.get(TOLERATIONS):
        causes += _tolerations_annotation(annotations[TOLERATIONS], path)
    if not invalid_cost and DELETION_COST in annotations and not valid_deletion_cost(annotations[DELETION_COST]):
        causes.append(invalid(f"{path}[{DELETION_COST}]", annotations[DELETION_COST], "must be a 32bit integer"))
    if SECCOMP_POD in annotations:  # (upstream's path: a child, not a key)
        causes += _seccomp_annotation(annotations[SECCOMP_POD], f"{path}.{SECCOMP_POD}")
    names: set[Any] | None = None
    for key, value in annotations.items():
        if key.startswith(SECCOMP_PREFIX):
            causes += _seccomp_annotation(value, f"{path}.{key}")
            continue
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


# the fields of the internal core.Toleration that encoding/json fills (no json tags: its Go field
# names, matched without regard to case), each with its Go name and type as a type error names them
_TOLERATION_FIELDS = {"key": ("key", "Key", "string"), "operator": ("operator", "Operator", "core.TolerationOperator"),
                      "value": ("value", "Value", "string"), "effect": ("effect", "Effect", "core.TaintEffect"),
                      "tolerationseconds": ("tolerationSeconds", "TolerationSeconds", "int64")}


class _Number(str):
    """A JSON number, as its text (Go's type errors quote a bad integer's literal)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object, as its members in order (a repeated key's later value is decoded later)."""


def _kind(value: Any) -> str:
    """The JSON kind as Go's ``UnmarshalTypeError`` names it."""
    if isinstance(value, _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "object" if isinstance(value, _Object) else "array"


def _tolerations_annotation(text: Any, path: str) -> Causes:
    """``ValidateTolerationsInPodAnnotations``: the annotation decoded as
    ``GetTolerationsFromPodAnnotations`` decodes it (``encoding/json`` into ``[]core.Toleration``;
    its error, the first, is an Invalid of the annotations naming the key, upstream's value), then
    ``ValidateTolerations`` at ``<path>.scheduler.alpha.kubernetes.io/tolerations[i]``."""
    from ..api.gojson import syntax_error  # (the API's port of Go's scanner; only on this rare path)
    from .podvalidation import tolerations_causes

    problem = syntax_error(str(text).encode())
    if problem is not None:
        return [invalid(path, TOLERATIONS, problem)]
    decoded = json.loads(str(text), object_pairs_hook=_Object, parse_int=_Number, parse_float=_Number)
    tolerations: list[Any] = []
    errors: list[str] = []
    if isinstance(decoded, _Object) or (decoded is not None and not isinstance(decoded, list)):
        errors.append(f"json: cannot unmarshal {_kind(decoded)} into Go value of type []core.Toleration")
    elif decoded is not None:
        for item in decoded:
            toleration: dict[str, Any] = {}
            tolerations.append(toleration)
            if item is None:
                continue
            if not isinstance(item, _Object):
                errors.append(f"json: cannot unmarshal {_kind(item)} into Go value of type core.Toleration")
                continue
            for key, value in item:
                known = _TOLERATION_FIELDS.get(key.lower())
                if known is None or (value is None and known[0] != "tolerationSeconds"):
                    continue  # (unknown, or null into a string: nothing changes)
                name, go_name, go_type = known
                if value is None:
                    toleration.pop(name, None)
                elif go_type == "int64":
                    if isinstance(value, _Number) and _whole_int64(value):
                        toleration[name] = int(value)
                    else:
                        kind = _kind(value)
                        errors.append(f"json: cannot unmarshal {kind}{' ' + value if kind == 'number' else ''} "
                                      f"into Go struct field Toleration.{go_name} of type int64")
                elif isinstance(value, str) and not isinstance(value, _Number):
                    toleration[name] = value
                else:
                    errors.append(f"json: cannot unmarshal {_kind(value)} into Go struct field "
                                  f"Toleration.{go_name} of type {go_type}")
    if errors:
        return [invalid(path, TOLERATIONS, errors[0])]
    return tolerations_causes(tolerations, f"{path}.{TOLERATIONS}") if tolerations else []


def _whole_int64(text: str) -> bool:
    """``strconv.ParseInt(text, 10, 64)`` succeeds (no fraction, no exponent, in range)."""
    return text.lstrip("-").isdigit() and -(2**63) <= int(text) < 2**63


def valid_deletion_cost(value: Any) -> bool:
    """``GetDeletionCostFromPodAnnotations`` reads it: no ``+`` and no leading zero, then
    ``strconv.ParseInt(value, 10, 32)``."""
    if not isinstance(value, str) or not value or not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return False
    if len(value) < 10 and value.isdigit() and value.isascii():  # (every update re-checks it: the common case first)
        return True
    return bool(_INT32.match(value)) and -(2**31) <= int(value) < 2**31


def _seccomp_annotation(value: Any, path: str) -> Causes:
    """``ValidateSeccompProfile``: a known profile; a localhost one a relative path without ``..``."""
    if value in ("runtime/default", "docker/default", "unconfined"):
        return []
    if isinstance(value, str) and value.startswith("localhost/"):
        return local_descending_path(value[10:], path)
    return [invalid(path, value, "must be a valid seccomp profile")]


def local_descending_path(target: str, path: str) -> Causes:
    """``validateLocalDescendingPath``: relative, and no ``..`` step."""
    causes: Causes = []
    if target.startswith("/"):
        causes.append(invalid(path, target, "must be a relative path"))
    if ".." in target.split("/"):
        causes.append(invalid(path, target, "must not contain '..'"))
    return causes


def create_causes(annotations: Obj, spec: Obj, path: str = "spec") -> Causes:
    """``validateSeccompAnnotationsAndFields`` and ``validateAppArmorAnnotationsAndFieldsMatchOnCreate``:
    where a pod or container has both an annotation and a profile (for AppArmor, the container's
    own or else the pod's), they say the same (AppArmor's not for Windows). ``path``: the pod
    spec's (a template's: ``spec.template.spec``)."""
    causes: Causes = []
    pod_seccomp = _profile(spec, "seccompProfile")
    if pod_seccomp is not None and SECCOMP_POD in annotations:
        causes += _seccomp_match(annotations[SECCOMP_POD], pod_seccomp, f"{path}.securityContext.seccompProfile")
    apparmor = not _windows(spec) and _apparmor_keys(annotations)
    seccomp = _seccomp_keys(annotations)
    if not apparmor and not seccomp:
        return causes
    pod_profile = _profile(spec)
    for key, listed in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers")),
                        ("ephemeralContainers", spec.get("ephemeralContainers"))):
        if not isinstance(listed, list):
            continue
        for i, c in enumerate(listed):
            if not isinstance(c, dict):
                continue
            name = str(c.get("name") or "")
            if seccomp:
                own = _profile(c, "seccompProfile")
                if own is not None and SECCOMP_PREFIX + name in annotations:
                    causes += _seccomp_match(annotations[SECCOMP_PREFIX + name], own,
                                             f"{path}.{key}[{i}].securityContext.seccompProfile")
            if not apparmor:
                continue
            profile = _profile(c) or pod_profile
            annotation = annotations.get(PREFIX + name) if profile is not None else None
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


def _seccomp_keys(annotations: Obj) -> bool:
    for key in annotations:  # noqa: SIM110 (as _apparmor_keys)
        if key.startswith(SECCOMP_PREFIX):
            return True
    return False


def _seccomp_match(annotation: Any, profile: Obj, path: str) -> Causes:
    """``validateSeccompAnnotationsAndFieldsMatch``."""
    kind = profile.get("type")
    if (kind == "Unconfined" and annotation != "unconfined") or \
            (kind == "RuntimeDefault" and annotation not in ("runtime/default", "docker/default")):
        return [forbidden(f"{path}.type", _SECCOMP_TYPE_MISMATCH)]
    if kind == "Localhost":
        if not (isinstance(annotation, str) and annotation.startswith("localhost/")):
            return [forbidden(f"{path}.type", _SECCOMP_TYPE_MISMATCH)]
        if profile.get("localhostProfile") != annotation[10:]:
            return [forbidden(f"{path}.localhostProfile", _SECCOMP_PROFILE_MISMATCH)]
    return []


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
