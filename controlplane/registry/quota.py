"""ResourceQuotas and LimitRanges: defaults and validation.

- A quota's ``spec.hard`` values are quantities (one that does not parse is a 400,
  as upstream's decoder answers) and not negative; its ``scopes`` are upstream's.
- A LimitRange item of type ``Container`` gets upstream's defaults: a missing
  ``default`` limit from ``max``, then a missing ``defaultRequest`` from the
  ``default`` limit, then from ``min``. Its type is Container, Pod or
  PersistentVolumeClaim.
"""

from __future__ import annotations

from typing import Any

from ..quantity import QuantityError, parse_quantity
from .volumes import BadQuantity

__all__ = ["SCOPES", "prepare_limit_range", "prepare_resource_quota"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

SCOPES = ("BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass",
          "Terminating", "VolumeAttributesClass")
LIMIT_TYPES = ("Container", "PersistentVolumeClaim", "Pod")


def _quantities(values: Any, field: str) -> Causes:
    causes: Causes = []
    for name, value in (values or {}).items():
        try:
            q = parse_quantity(value)
        except QuantityError as e:
            raise BadQuantity(f"{field}.{name}: {e}") from e
        if q < 0:
            causes.append({"reason": "FieldValueInvalid", "field": f"{field}[{name}]",
                           "message": f'Invalid value: "{value}": must be greater than or equal to 0'})
    return causes


def prepare_resource_quota(rq: Obj, old: Obj | None) -> Causes:
    spec = rq.get("spec") if isinstance(rq.get("spec"), dict) else {}
    causes = _quantities(spec.get("hard"), "spec.hard")
    for i, scope in enumerate(spec.get("scopes") or ()):
        if scope not in SCOPES:
            causes.append({"reason": "FieldValueNotSupported", "field": f"spec.scopes[{i}]",
                           "message": f'Unsupported value: "{scope}": unsupported scope'})
    return causes


def prepare_limit_range(lr: Obj, old: Obj | None) -> Causes:
    spec = lr.get("spec") if isinstance(lr.get("spec"), dict) else {}
    causes: Causes = []
    for i, item in enumerate(spec.get("limits") or ()):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind not in LIMIT_TYPES:
            causes.append({"reason": "FieldValueNotSupported", "field": f"spec.limits[{i}].type",
                           "message": f'Unsupported value: "{kind}": supported values: '
                                      + ", ".join(f'"{t}"' for t in LIMIT_TYPES)})
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            causes += _quantities(item.get(field), f"spec.limits[{i}].{field}")
        if kind == "Container":
            default = item.setdefault("default", {})
            request = item.setdefault("defaultRequest", {})
            for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
                for name, value in (source or {}).items():
                    target.setdefault(name, value)
            for key in ("default", "defaultRequest"):
                if not item[key]:
                    del item[key]
    return causes
