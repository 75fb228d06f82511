"""What a served version of a CustomResourceDefinition adds to a ``ResourceType``,
and what its custom resources go through on their way in and out.

In (create, update, patch)::

    pruned, causes = admit(version, obj)   # pruned unknown fields, defaulted, validated
    pruned, causes = admit(version, obj, old)   # an update: transition rules (oldSelf) see ``old``,
                                                # and the values it leaves unchanged are ratcheted
    pruned, causes = admit(version, obj, old, ratcheted)   # ... their failed rules added to ratcheted

Out (every read)::

    present(rtype, obj)    # apiVersion of the version asked for; pruned and defaulted by its schema

All versions of a CRD share one storage (``/registry/<group>/<plural>/``). Under the
``None`` conversion strategy converting between versions only rewrites ``apiVersion``;
under ``Webhook`` (``conversion`` set) the CRD's webhook converts (``api/crdconversion.py``),
and writes are stored in ``storage_version``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .structural import Cause, Schema, apply_defaults, prune, validate

if TYPE_CHECKING:
    from .types import ResourceType

__all__ = ["CustomVersion", "admit", "present", "scale_causes"]


@dataclass(frozen=True)
class CustomVersion:
    crd: str                                      # the CRD's name, <plural>.<group>
    schema: Schema | None                         # the version's openAPIV3Schema
    printer_columns: tuple[dict[str, Any], ...]   # additionalPrinterColumns, as the CRD has them
    list_kind: str = ""                           # acceptedNames.listKind
    deprecation_warning: str = ""                 # sent with every request to a deprecated version
    scale: dict[str, str] | None = None           # subresources.scale: specReplicasPath, statusReplicasPath, ...
    conversion: dict[str, Any] | None = None      # spec.conversion.webhook under the Webhook strategy, else None
    storage_version: str = ""                     # the version with storage: true (its name)
    # selectableFields: this version's jsonPaths without their leading dot, and the key of
    # the field set of every version's (selectors.custom_fields_key), which the versions'
    # one storage and watch cache hold
    selectable_fields: tuple[str, ...] = ()
    fields_key: str = ""


def admit(version: CustomVersion, obj: dict[str, Any], old: dict[str, Any] | None = None,
          ratcheted: list[Cause] | None = None) -> tuple[list[str], list[Cause]]:
    """Prune, default and validate ``obj`` in place: (the pruned paths, the causes
    of a 422). ``metadata`` is not the schema's business (only its name is
    checked, by the caller, as for every type). ``old`` is the stored object of an
    update, which the schema's transition rules compare with (as read: pruned and
    defaulted by the schema, as upstream decodes it), and against which the errors of
    unchanged values are ratcheted (upstream's CRDValidationRatcheting, GA in 1.33): the
    failed rules among those are added to ``ratcheted``, for the request's warnings."""
    if version.schema is None:
        return [], []
    pruned = prune(version.schema, obj)
    apply_defaults(version.schema, obj)
    without_meta = {k: v for k, v in version.schema.get("properties", {}).items() if k != "metadata"}
    schema = dict(version.schema, properties=without_meta)
    if old is None:
        return pruned, validate(schema, obj)
    before = copy.deepcopy(old)
    prune(version.schema, before)
    apply_defaults(version.schema, before)
    return pruned, validate(schema, obj, old=before, ratcheted=ratcheted)


_MAX_INT32 = (1 << 31) - 1


def scale_causes(scale: dict[str, str] | None, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    """Upstream's ValidateScaleSpec and ValidateScaleStatus of a custom resource whose CRD
    declares a ``scale`` subresource: the replicas at ``specReplicasPath`` and
    ``statusReplicasPath`` are int32s not negative, the selector at ``labelSelectorPath`` a
    string (each field named by its path as the CRD writes it, ``.spec.replicas``); a
    Scale of ``"x"`` replicas was stored, then served to typed clients that could not read
    it. A value an update leaves as it was is not checked again."""
    if not scale:
        return []
    causes: list[Cause] = []
    for key, integer in (("specReplicasPath", True), ("statusReplicasPath", True), ("labelSelectorPath", False)):
        path = scale.get(key)
        if not path:
            continue
        fields = path.lstrip(".").split(".")
        found, value, why = _nested(obj, fields)
        if old is not None and found and _nested(old, fields)[:2] == (True, value):
            continue
        if why is None and found:
            if integer and (isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < 1 << 63):
                why = f"{_json_path(fields)} accessor error: {_go_v(value)} is of the type {_go_type(value)}, " \
                      "expected int64"
            elif not integer and not isinstance(value, str):
                why = f"{_json_path(fields)} accessor error: {_go_v(value)} is of the type {_go_type(value)}, " \
                      "expected string"
        if why is not None:
            shown = "0" if integer else '""'  # the zero value NestedInt64 and NestedString answer beside an error
            causes.append({"reason": "FieldValueInvalid", "field": path, "message": f"Invalid value: {shown}: {why}"})
        elif integer and found and value < 0:
            causes.append({"reason": "FieldValueInvalid", "field": path,
                           "message": f"Invalid value: {value}: should be a non-negative integer"})
        elif integer and found and value > _MAX_INT32:
            causes.append({"reason": "FieldValueInvalid", "field": path,
                           "message": f"Invalid value: {value}: should be less than or equal to {_MAX_INT32}"})
    return causes


def _nested(obj: Any, fields: list[str]) -> tuple[bool, Any, str | None]:
    """unstructured.NestedFieldNoCopy: (found, value, its accessor error where a step is no object)."""
    cur = obj
    for i, field in enumerate(fields):
        if not isinstance(cur, dict):
            return False, None, (f"{_json_path(fields[:i + 1])} accessor error: {_go_v(cur)} is of the type "
                                 f"{_go_type(cur)}, expected map[string]interface{{}}")
        if field not in cur:
            return False, None, None
        cur = cur[field]
    return True, cur, None


def _json_path(fields: list[str]) -> str:
    return "." + ".".join(fields)


def _go_type(value: Any) -> str:
    """The Go type ``%T`` names for a decoded JSON value (an integer past int64 decodes as a float64)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if -(1 << 63) <= value < 1 << 63 else "float64"
    return {float: "float64", str: "string", list: "[]interface {}", dict: "map[string]interface {}"}[type(value)]


def _go_v(value: Any) -> str:
    """A decoded JSON value as Go's ``%v`` prints it: floats shortest, without an exponent
    below 1e21; lists ``[a b]``, objects ``map[k:v]`` with their keys sorted."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) or (isinstance(value, int) and not -(1 << 63) <= value < 1 << 63):
        number = float(value)
        # the shortest digits that read back as the number, as Go's, then zeros (2^64 is
        # 18446744073709552000, not the binary value's 18446744073709551616)
        if number.is_integer() and abs(number) < 1e21:
            return format(Decimal(repr(number)).normalize(), "f")
        return repr(number)
    if isinstance(value, list):
        return "[" + " ".join(_go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_v(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def present(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as read through ``rtype``: its apiVersion, pruned and defaulted by its
    schema (kube-apiserver prunes and defaults what it reads from storage too:
    the object may have been written through another version, or a schema since
    changed)."""
    obj["apiVersion"] = rtype.api_version
    if rtype.custom is not None and rtype.custom.schema is not None:
        prune(rtype.custom.schema, obj)
        apply_defaults(rtype.custom.schema, obj)
    return obj
