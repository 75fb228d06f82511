"""HorizontalPodAutoscalers (autoscaling/v2): upstream's defaults and validation.

``minReplicas`` defaults to 1 and ``metrics`` to CPU at 80% utilisation; a
``behavior`` that is given gets every rule filled (scale up: no stabilisation,
the larger of 4 pods or 100% per 15 s; scale down: 100% per 15 s, the
stabilisation window left to the controller's 300 s). The target needs its kind
and name, and ``1 <= minReplicas <= maxReplicas``.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["default_horizontal_pod_autoscaler", "prepare_horizontal_pod_autoscaler"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

DEFAULT_CPU_UTILIZATION = 80
_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _rules(given: Any, default: Obj) -> Obj:
    rules = copy.deepcopy(default)
    for key in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
        if isinstance(given, dict) and given.get(key) is not None:
            rules[key] = given[key]
    return rules


def default_horizontal_pod_autoscaler(hpa: Obj) -> None:
    """The autoscaling/v2 defaults, in place."""
    spec = hpa.setdefault("spec", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    status = hpa.get("status")
    if isinstance(status, dict):  # fields Go always writes
        status.setdefault("desiredReplicas", 0)
        if hpa.get("apiVersion") == "autoscaling/v1":
            status.setdefault("currentReplicas", 0)
        else:  # a nil slice without omitempty: null (so a status written back as read is no change)
            status.setdefault("currentMetrics", None)
    if hpa.get("apiVersion") == "autoscaling/v1":
        return  # its CPU target stays unset; the v2 defaults come with the conversion
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _rules(behavior.get("scaleUp"), _SCALE_UP)
        behavior["scaleDown"] = _rules(behavior.get("scaleDown"), _SCALE_DOWN)


def prepare_horizontal_pod_autoscaler(hpa: Obj, old: Obj | None) -> Causes:
    """Defaults, then the causes of a 422; ``hpa`` is autoscaling/v2 or v1 (served shapes)."""
    default_horizontal_pod_autoscaler(hpa)
    spec = hpa["spec"]
    causes: Causes = []
    ref = spec.get("scaleTargetRef") or {}
    for field in ("kind", "name"):
        if not ref.get(field):
            causes.append({"reason": "FieldValueRequired", "field": f"spec.scaleTargetRef.{field}",
                           "message": "Required value"})
    low, high = spec["minReplicas"], spec.get("maxReplicas")
    if isinstance(low, int) and low < 1:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.minReplicas",
                       "message": f"Invalid value: {low}: must be greater than or equal to 1"})
    if not isinstance(high, int) or high < 1:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.maxReplicas",
                       "message": f"Invalid value: {high}: must be greater than 0"})
    elif isinstance(low, int) and high < low:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.maxReplicas",
                       "message": f"Invalid value: {high}: must be greater than or equal to `minReplicas`"})
    return causes
