"""Conversions between versions that share one storage: events.k8s.io/v1 Event over core/v1 Event.

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
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONVERSIONS", "EVENTS_V1", "Conversion", "conversion_for", "validate_events_v1"]

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
_KEPT = ("metadata", "eventTime", "series", "action", "reason", "related", "type", "reportingInstance")


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
        """A stored object, in the served version's shape (core-only fields are dropped)."""
        out: dict[str, Any] = {"apiVersion": self.served_api_version, "kind": self.kind}
        for k, v in obj.items():
            if k in ("apiVersion", "kind"):
                continue
            if k in _BACK:
                out[_BACK[k]] = v
            elif k in _KEPT:
                out[k] = v
        return out

    def field_label(self, label: str) -> str:
        """A field selector's label of the served version, as the stored shape names it."""
        head, dot, rest = label.partition(".")
        return _RENAMED.get(head, head) + dot + rest


EVENTS_V1 = Conversion("events.k8s.io/v1", "v1", "Event")


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
    if isinstance(note, str) and len(note) > 1024:
        causes.append({"reason": "FieldValueTooLong", "field": "note",
                       "message": "Too long: may not be more than 1024 bytes"})
    return causes


# (group, version, kind) of a served version stored as another -> its conversion
CONVERSIONS: dict[tuple[str, str, str], Conversion] = {("events.k8s.io", "v1", "Event"): EVENTS_V1}


def conversion_for(group: str, version: str, kind: str) -> Conversion | None:
    return CONVERSIONS.get((group, version, kind))
