"""Printer columns of custom resources: the JSONPath subset and the Table cells."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.api.jsonpath import JsonPathError, compile_path, find
from controlplane.api.tables import as_table
from controlplane.registry.custom import CustomVersion

OBJ: dict[str, Any] = {
    "metadata": {"name": "w1", "creationTimestamp": (datetime.now(UTC) - timedelta(days=10)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"), "labels": {"app.kubernetes.io/name": "web"}},
    "spec": {"replicas": 3, "paused": False, "ratio": 0.5, "items": [{"name": "a"}, {"name": "b"}]},
    "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


def test_jsonpath_steps() -> None:
    assert find(".spec.replicas", OBJ) == [3]
    assert find("{.spec.items[*].name}", OBJ) == ["a", "b"]
    assert find(".spec.items[-1].name", OBJ) == ["b"]
    assert find('.status.conditions[?(@.type=="Ready")].status', OBJ) == ["True"]
    assert find(".status.conditions[?(@.type!='Ready')].type", OBJ) == ["Synced"]
    assert find(".metadata.labels['app.kubernetes.io/name']", OBJ) == ["web"]
    assert find("..name", OBJ) == ["w1", "a", "b"]
    assert find(".spec.missing", OBJ) == []
    with pytest.raises(JsonPathError):
        compile_path(".spec[")


def test_printer_columns_make_the_table() -> None:
    version = CustomVersion("widgets.example.com", None, (
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
        {"name": "Items", "type": "string", "jsonPath": ".spec.items"},
        {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ))
    table = as_table("widgets", [OBJ], {"resourceVersion": "7"}, custom=version)
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0), ("Replicas", "integer", 0), ("Ready", "string", 0), ("Paused", "boolean", 0),
        ("Ratio", "number", 1), ("Items", "string", 0), ("Missing", "string", 0), ("Age", "date", 0)]
    assert table["rows"][0]["cells"] == ["w1", 3, "True", False, 0.5, '[{"name":"a"},{"name":"b"}]', None, "10d"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


@pytest.mark.parametrize(("value", "cell"), [
    ("", "<unknown>"), ("null", "<unknown>"),  # the zero time, as UnmarshalQueryParameter reads them
    ("a", "<invalid>"), ("2020-01-01", "<invalid>"), ("2020-13-01T00:00:00Z", "<invalid>"),  # no RFC 3339 time
    ("9999-12-31T23:59:59Z", "<invalid>"),  # in the future: HumanDuration's
    ("2020-01-01T00:00:00.123456789+01:00", "days"),
])
def test_a_date_column_is_the_age_of_an_rfc3339_time_or_invalid(value: str, cell: str) -> None:
    version = CustomVersion("widgets.example.com", None, ({"name": "When", "type": "date", "jsonPath": ".spec.when"},))
    got = as_table("widgets", [{"metadata": {"name": "w"}, "spec": {"when": value}}], None, custom=version)
    when = got["rows"][0]["cells"][1]
    assert when == cell if cell != "days" else when.startswith(("5y", "6y", "7y")), when


def test_without_printer_columns_name_and_age() -> None:
    table = as_table("widgets", [OBJ], {}, custom=CustomVersion("widgets.example.com", None, ()))
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"][0]["cells"] == ["w1", "10d"]


def test_a_column_path_may_escape_the_dots_of_a_label_key() -> None:
    # karpenter's NodeClaim columns: .metadata.labels.node\.kubernetes\.io/instance-type
    obj = {"metadata": {"labels": {"node.kubernetes.io/instance-type": "gpu-8x", "node": {"kubernetes": "no"}}}}
    assert find(r".metadata.labels.node\.kubernetes\.io/instance-type", obj) == ["gpu-8x"]


def test_printer_columns_are_described_as_apiextensions_describes_them() -> None:
    """A column's own description, else "Custom resource definition column (in JSONPath
    format): <path>"; Name (and the default Age) quote ObjectMeta's docs."""
    version = CustomVersion("widgets.example.com", None, (
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "description": "How many."},
        {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
    ))
    described = {c["name"]: c["description"] for c in as_table("widgets", [], {}, custom=version)["columnDefinitions"]}
    assert described["Name"].startswith("Name must be unique within a namespace.")
    assert described["Replicas"] == "How many."
    assert described["Paused"] == "Custom resource definition column (in JSONPath format): .spec.paused"
    bare = as_table("widgets", [], {}, custom=CustomVersion("widgets.example.com", None, ()))["columnDefinitions"]
    assert bare[1]["description"].startswith("CreationTimestamp is a timestamp representing the server time")
