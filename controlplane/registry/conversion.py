"""Conversions between versions that share one storage: events.k8s.io/v1 Event over
core/v1 Event, and autoscaling/v1 HorizontalPodAutoscaler over autoscaling/v2.

kube-apiserver keeps one Event in etcd (``/registry/events/<ns>/<name>``) and
serves it both as ``v1`` Event and as ``events.k8s.io/v1`` Event, converting
field by field. This server stores the core/v1 shape and converts at the API:
``to_storage`` on writes of the other version, ``from_storage`` on its reads.

events.k8s.io/v1 renames::

    regarding            involvedObject
    note                 message
    reportingController  reportingComponent
    deprecatedSource     source
    deprecatedFirstTimestamp / deprecatedLastTimestamp / deprecatedCount
                         firstTimestamp / lastTimestamp / count

and keeps ``eventTime``, ``series``, ``action``, ``reason``, ``related``,
``type``, ``reportingInstance`` and ``metadata`` as they are.

autoscaling/v1 has one metric, ``targetCPUUtilizationPercentage`` (and
``status.currentCPUUtilizationPercentage``): it is the v2 CPU ``Utilization``
resource metric. What v1 cannot say travels, as upstream, in annotations
(``autoscaling.alpha.kubernetes.io/metrics``, ``/behavior``, ``/conditions``,
``/current-metrics``), here in the v2 shape, so that a v1 client's update
keeps what a v2 client set.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from .autoscaling import default_horizontal_pod_autoscaler

__all__ = ["CONVERSIONS", "EVENTS_V1", "HPA_V1", "Conversion", "conversion_for", "validate_events_v1"]

# events.k8s.io/v1 name -> core/v1 name
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_BACK = {v: k for k, v in _RENAMED.items()}
# the field selector labels of events.k8s.io/v1 -> core/v1's; no others (not even core/v1's own names)
_EVENT_FIELD_LABELS = {
    **{f"regarding.{f}": f"involvedObject.{f}"
       for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reportingController": "reportingComponent",
    "reason": "reason", "source": "source", "type": "type",
    "metadata.namespace": "metadata.namespace", "metadata.name": "metadata.name",
}
_KEPT = ("metadata", "eventTime", "series", "action", "reason", "related", "type", "reportingInstance")
# events.k8s.io/v1's metav1.Time/MicroTime fields, written as null when zero (Go's omitempty
# does not omit a struct), and its strings that core/v1 writes empty and it omits
_V1_TIMES = ("eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp")
_V1_OMITTED_EMPTY = ("reportingController", "reportingInstance")


class Conversion:
    """How one served version maps onto the stored shape (which is another version's)."""

    def __init__(self, served_api_version: str, stored_api_version: str, kind: str) -> None:
        self.served_api_version = served_api_version
        self.stored_api_version = stored_api_version
        self.kind = kind

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object of the served version, in the stored shape."""
        out: dict[str, Any] = {"apiVersion": self.stored_api_version, "kind": self.kind}
        for k, v in obj.items():
            if k in ("apiVersion", "kind"):
                continue
            out[_RENAMED.get(k, k)] = v
        return out

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object, in the served version's shape (core-only fields are dropped), as
        Go writes an events.k8s.io/v1 Event: its times always (a zero one ``null``: an event
        written through core/v1 has ``eventTime: null``), its reporting strings only when
        not empty (``omitempty`` here, where core/v1 writes ``""``)."""
        out: dict[str, Any] = {"apiVersion": self.served_api_version, "kind": self.kind}
        for k, v in obj.items():
            if k in ("apiVersion", "kind"):
                continue
            if k in _BACK:
                out[_BACK[k]] = v
            elif k in _KEPT:
                out[k] = v
        for k in _V1_TIMES:
            out.setdefault(k, None)
        for k in _V1_OMITTED_EMPTY:
            if out.get(k) == "":
                del out[k]
        return out

    def field_label(self, label: str) -> str | None:
        """A field selector's label of the served version, as the stored shape names it;
        None if the served version has no such label (upstream's field label conversion
        function for events.k8s.io/v1 Event, pkg/apis/events/v1/conversion.go)."""
        return _EVENT_FIELD_LABELS.get(label)


EVENTS_V1 = Conversion("events.k8s.io/v1", "v1", "Event")

_HPA_ANNOTATIONS = {  # v2 field -> the v1 annotation carrying it
    "metrics": "autoscaling.alpha.kubernetes.io/metrics",
    "behavior": "autoscaling.alpha.kubernetes.io/behavior",
    "conditions": "autoscaling.alpha.kubernetes.io/conditions",
    "currentMetrics": "autoscaling.alpha.kubernetes.io/current-metrics",
}
_SCALE_FIELDS = ("scaleTargetRef", "minReplicas", "maxReplicas")
_STATUS_FIELDS = ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")


def _is_cpu_utilization(metric: Any, key: str) -> bool:
    source = metric.get("resource") if isinstance(metric, dict) and metric.get("type") == "Resource" else None
    return isinstance(source, dict) and source.get("name") == "cpu" and (
        (key == "target" and (source.get("target") or {}).get("type") == "Utilization")
        or (key == "current" and "averageUtilization" in (source.get("current") or {})))


class HorizontalPodAutoscalerV1(Conversion):
    """autoscaling/v1 HorizontalPodAutoscaler over the stored autoscaling/v2 one."""

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "status")}
        out["apiVersion"], out["kind"] = self.stored_api_version, self.kind
        annotations = (out.get("metadata") or {}).get("annotations") or {}
        carried: dict[str, Any] = {}
        for field, key in _HPA_ANNOTATIONS.items():
            if key in annotations:
                try:
                    value = orjson.loads(annotations.pop(key))
                except (orjson.JSONDecodeError, TypeError):
                    continue
                # what does not have the field's shape is dropped (a list of objects; behavior an object)
                shaped = isinstance(value, dict) if field == "behavior" else \
                    isinstance(value, list) and all(isinstance(v, dict) for v in value)
                if shaped:
                    carried[field] = value
        if "annotations" in out.get("metadata", {}) and not annotations:
            del out["metadata"]["annotations"]
        spec_in, status_in = obj.get("spec") or {}, obj.get("status") or {}
        spec = {k: spec_in[k] for k in _SCALE_FIELDS if k in spec_in}
        metrics = [m for m in carried.get("metrics") or () if not _is_cpu_utilization(m, "target")]
        if spec_in.get("targetCPUUtilizationPercentage") is not None:
            metrics.insert(0, {"type": "Resource", "resource": {"name": "cpu", "target": {
                "type": "Utilization", "averageUtilization": spec_in["targetCPUUtilizationPercentage"]}}})
        if metrics:
            spec["metrics"] = metrics
        if carried.get("behavior"):
            spec["behavior"] = carried["behavior"]
        out["spec"] = spec
        status = {k: status_in[k] for k in _STATUS_FIELDS if k in status_in}
        current = [m for m in carried.get("currentMetrics") or () if not _is_cpu_utilization(m, "current")]
        if status_in.get("currentCPUUtilizationPercentage") is not None:
            current.insert(0, {"type": "Resource", "resource": {"name": "cpu", "current": {
                "averageUtilization": status_in["currentCPUUtilizationPercentage"]}}})
        if current:
            status["currentMetrics"] = current
        if carried.get("conditions"):
            status["conditions"] = carried["conditions"]
        out["status"] = status
        default_horizontal_pod_autoscaler(out)  # as v2 defaulting would on decoding it
        return out

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "status")}
        out["apiVersion"], out["kind"] = self.served_api_version, self.kind
        spec_in, status_in = obj.get("spec") or {}, obj.get("status") or {}
        spec = {k: spec_in[k] for k in _SCALE_FIELDS if k in spec_in}
        status = {k: status_in[k] for k in _STATUS_FIELDS if k in status_in}
        carried: dict[str, Any] = {}
        metrics = list(spec_in.get("metrics") or ())
        cpu = next((m for m in metrics if _is_cpu_utilization(m, "target")), None)
        if cpu is not None:
            spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"].get("averageUtilization")
            metrics.remove(cpu)
        carried["metrics"] = metrics
        carried["behavior"] = spec_in.get("behavior")
        current = list(status_in.get("currentMetrics") or ())
        now = next((m for m in current if _is_cpu_utilization(m, "current")), None)
        if now is not None:
            status["currentCPUUtilizationPercentage"] = now["resource"]["current"]["averageUtilization"]
            current.remove(now)
        carried["currentMetrics"] = current
        carried["conditions"] = status_in.get("conditions")
        status.setdefault("currentReplicas", 0)  # not omitempty in v1
        status.setdefault("desiredReplicas", 0)
        shown = {_HPA_ANNOTATIONS[k]: orjson.dumps(v).decode() for k, v in carried.items() if v}
        if shown:
            out.setdefault("metadata", {}).setdefault("annotations", {}).update(shown)
        out["spec"], out["status"] = spec, status
        return out

    def field_label(self, label: str) -> str | None:
        return label


HPA_V1 = HorizontalPodAutoscalerV1("autoscaling/v1", "autoscaling/v2", "HorizontalPodAutoscaler")


def validate_events_v1(obj: dict[str, Any]) -> list[dict[str, str]]:
    """What events.k8s.io/v1 requires of a new Event (upstream's ValidateEventCreate for that version)."""
    causes = []
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not obj.get(field):
            causes.append({"reason": "FieldValueRequired", "field": field, "message": "Required value"})
    if obj.get("type") not in (None, "", "Normal", "Warning"):
        causes.append({"reason": "FieldValueNotSupported", "field": "type",
                       "message": f'Unsupported value: "{obj.get("type")}": supported values: "Normal", "Warning"'})
    note = obj.get("note")
    if isinstance(note, str) and len(note.encode()) > 1024:  # bytes, as Go's len counts them
        causes.append({"reason": "FieldValueTooLong", "field": "note",
                       "message": "Too long: may not be more than 1024 bytes"})
    return causes


# (group, version, kind) of a served version stored as another -> its conversion
CONVERSIONS: dict[tuple[str, str, str], Conversion] = {
    ("events.k8s.io", "v1", "Event"): EVENTS_V1,
    ("autoscaling", "v1", "HorizontalPodAutoscaler"): HPA_V1,
}


def conversion_for(group: str, version: str, kind: str) -> Conversion | None:
    return CONVERSIONS.get((group, version, kind))
