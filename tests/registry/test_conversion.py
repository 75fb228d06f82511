"""events.k8s.io/v1 Event over the stored core/v1 Event."""

from controlplane.registry.conversion import EVENTS_V1, validate_events_v1

NEW = {
    "apiVersion": "events.k8s.io/v1", "kind": "Event",
    "metadata": {"name": "e1", "namespace": "default"},
    "eventTime": "2026-11-30T08:00:00.000000Z", "reportingController": "example.com/ctl",
    "reportingInstance": "ctl-0", "action": "Scheduling", "reason": "Scheduled", "type": "Normal",
    "note": "assigned default/web-0 to node-1",
    "regarding": {"kind": "Pod", "namespace": "default", "name": "web-0"},
    "series": {"count": 2, "lastObservedTime": "2026-11-30T08:00:01.000000Z"},
}


def test_round_trip_keeps_every_events_v1_field() -> None:
    stored = EVENTS_V1.to_storage(NEW)
    assert stored["apiVersion"] == "v1" and stored["kind"] == "Event"
    assert stored["involvedObject"] == NEW["regarding"] and stored["message"] == NEW["note"]
    assert stored["reportingComponent"] == "example.com/ctl" and "regarding" not in stored
    # its times Go writes null when zero (``omitempty`` does not omit a struct)
    assert EVENTS_V1.from_storage(stored) == {**NEW, "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None}


def test_a_core_event_without_event_time_reads_with_a_null_one() -> None:
    """kube-apiserver writes every Time field of an events.k8s.io/v1 Event, ``null`` when zero,
    and omits its empty reporting strings (``omitempty`` there; core/v1 writes them ``""``)."""
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "involvedObject": {"name": "p"},
            "reason": "SuccessfulCreate", "message": "m", "source": {"component": "replicaset-controller"},
            "firstTimestamp": "2026-11-30T08:00:00Z", "lastTimestamp": None,
            "reportingComponent": "", "reportingInstance": ""}
    got = EVENTS_V1.from_storage(core)
    assert got["eventTime"] is None and got["deprecatedLastTimestamp"] is None
    assert got["deprecatedFirstTimestamp"] == "2026-11-30T08:00:00Z"
    assert "reportingController" not in got and "reportingInstance" not in got


def test_a_core_event_reads_as_events_v1_with_deprecated_fields() -> None:
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "involvedObject": {"name": "p"},
            "reason": "Pulled", "message": "pulled", "source": {"component": "kubelet"}, "count": 3,
            "firstTimestamp": "2026-11-30T08:00:00Z", "lastTimestamp": "2026-11-30T08:01:00Z"}
    got = EVENTS_V1.from_storage(core)
    assert got["regarding"] == {"name": "p"} and got["note"] == "pulled"
    assert got["deprecatedSource"] == {"component": "kubelet"} and got["deprecatedCount"] == 3
    assert got["deprecatedFirstTimestamp"] == "2026-11-30T08:00:00Z"
    assert EVENTS_V1.field_label("regarding.name") == "involvedObject.name"
    assert EVENTS_V1.field_label("reason") == "reason"


def test_validation_requires_what_upstream_requires() -> None:
    assert validate_events_v1(NEW) == []
    causes = validate_events_v1({"note": "x" * 2000, "type": "Odd"})
    fields = {c["field"] for c in causes}
    assert fields == {"eventTime", "reportingController", "reportingInstance", "action", "reason", "type", "note"}


def test_a_note_is_limited_in_bytes() -> None:
    """1,024 bytes, as upstream's len() counts them: 600 two-byte characters are too many."""
    assert validate_events_v1({**NEW, "note": "x" * 1024}) == []
    (cause,) = validate_events_v1({**NEW, "note": "é" * 600})
    assert (cause["field"], cause["message"]) == ("note", "Too long: may not be more than 1024 bytes")
