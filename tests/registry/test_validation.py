"""Field validation against the built-in schemas: unknown, duplicate and missing required fields."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import orjson
import pytest

from controlplane.podgen import PodGenerator
from controlplane.registry.types import BUILTIN
from controlplane.registry.validation import (
    _count_values,
    compile_schema,
    decode_with_duplicates,
    key_tokens,
    may_have_duplicates,
    register_schema,
    shape_of,
)


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x"}], **spec}}


def test_every_builtin_kind_compiles() -> None:
    assert all(shape_of(t.group, t.version, t.kind) is not None for t in BUILTIN)
    assert shape_of("example.com", "v1", "Widget") is None


def test_a_generated_pod_is_clean_and_every_key_is_counted() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    gen = PodGenerator(seed=3)
    for _ in range(50):
        raw = gen.pod_json()
        found = shape.check(orjson.loads(raw))
        assert found.problems == [] and found.missing == [] and found.mismatched == []
        assert found.keys == key_tokens(raw)  # managedFields keys hold escaped '\\":'
        assert not may_have_duplicates(raw, found.keys)


def test_unknown_fields_are_reported_in_document_order_with_their_paths() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    obj = pod(foo=1)
    obj["metadata"]["bar"] = {"deep": [1]}
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPortt": 1}]
    obj["bogus"] = True
    found = shape.check(obj)
    assert found.problems == ['unknown field "metadata.bar"', 'unknown field "spec.containers[0].ports[0].hostPortt"',
                              'unknown field "spec.foo"', 'unknown field "bogus"']
    assert "foo" in obj["spec"], "check without prune leaves the object alone"


def test_prune_removes_exactly_the_unknown_fields() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    obj = pod(foo=1)
    obj["spec"]["containers"][0]["bar"] = "x"
    shape.check(obj, prune=True)
    assert obj == pod()


def test_maps_and_opaque_fields_accept_any_key() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    obj = pod(nodeSelector={"any/key": "v"}, overhead={"cpu": "1"})
    obj["metadata"]["annotations"] = {"x.y/z": "1"}
    obj["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {"f:anything": {}}}}]
    assert shape.check(obj).problems == []


def test_a_struct_without_fields_rejects_every_key() -> None:
    node = {"type": "object", "properties": {"policy": {"$ref": "#/x/Empty"}}}
    shape = compile_schema(node, lambda ref: {"type": "object"})
    assert shape.check({"policy": {"a": 1}}).problems == ['unknown field "policy.a"']


def test_preserve_unknown_fields_keeps_everything_below() -> None:
    node = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    shape = compile_schema(node, lambda ref: {})
    assert shape.check({"spec": {"anything": {"goes": 1}}}).problems == []
    assert shape.check({"other": 1}).problems == ['unknown field "other"']


def test_missing_required_fields_are_found_but_not_under_status_nor_for_numbers() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    obj = pod()
    obj["spec"]["containers"] = [{"image": "x", "env": [{"value": "v"}]}, {"name": "ok", "image": "y"}]
    obj["status"] = {"conditions": [{"reason": "no type, no status"}]}
    assert shape.check(obj).missing == ["spec.containers[0].env[0].name", "spec.containers[0].name"]
    obj["spec"]["containers"] = [{"name": "c", "image": "x", "env": [{"value": "v", "name": None}]}]
    assert shape.check(obj).missing == ["spec.containers[0].env[0].name"]  # null is as good as absent
    del obj["spec"]["containers"]  # worded by the pod validation (not a StatefulSet's template's)
    assert shape.check(obj).missing == []
    pc = shape_of("scheduling.k8s.io", "v1", "PriorityClass")
    assert pc is not None and pc.check({"metadata": {"name": "x"}}).missing == []  # value: the zero value is valid
    dep = shape_of("apps", "v1", "Deployment")
    assert dep is not None
    assert dep.check({"metadata": {}, "spec": {}}).missing == ["spec.selector", "spec.template"]


def test_duplicates_are_seen_only_when_the_key_count_says_so() -> None:
    body = (b'{"apiVersion": "apps/v1", "kind": "Deployment",'
            b' "metadata": {"name": "d", "labels": {"a": "1", "a": "2"}},'
            b' "spec": {"unknownDupe": 1, "unknownDupe": 2, "paused": true, "paused": false,'
            b' "selector": {"matchLabels": {"a": "1"}}, "template": {"spec": {"containers": [{"name": "n",'
            b' "image": "i", "unknownNested": 1, "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}')
    shape = shape_of("apps", "v1", "Deployment")
    assert shape is not None
    fast = shape.check(orjson.loads(body))
    assert may_have_duplicates(body, fast.keys)
    tree, dups = decode_with_duplicates(body)
    found = shape.check(tree, duplicates=dups)
    # an unknown field given twice is reported once, as unknown (as upstream for typed objects)
    assert found.problems == [
        'duplicate field "metadata.labels.a"',
        'unknown field "spec.unknownDupe"',
        'duplicate field "spec.paused"',
        'unknown field "spec.template.spec.containers[0].unknownNested"',
        'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
    ]
    assert tree["spec"]["paused"] is False, "the last value wins"


@pytest.mark.parametrize("body", [
    b'{"a": {"b": 1}, "c": "x\\":y"}',              # an escaped quote and colon inside a string
    b'{"a" : 1, "b"\n:\t{"c" :2}}',                 # whitespace before colons
    b'{"k": "v: w", "l": ["\\"m\\":"]}',
    b'{"k\\\\": 1, "s": "\\\\\\":", "t": "\\\\ \\" :"}',  # keys ending in an escaped backslash
    b'{"f:x": {"k:{\\"name\\":\\"c\\"}": {}}}',          # managedFields
])
def test_key_tokens_counts_exactly_the_keys(body: bytes) -> None:
    keys = sum(1 for _ in _keys(json.loads(body)))
    assert key_tokens(body) == keys
    assert not may_have_duplicates(body, keys)
    assert may_have_duplicates(body[:-1] + b', "a": 2}', keys)


def _keys(value: Any) -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def test_check_does_not_change_a_clean_object() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    obj = PodGenerator(seed=5).pod()
    before = copy.deepcopy(obj)
    shape.check(obj, prune=True)
    assert obj == before


def test_values_of_the_wrong_json_type_where_objects_or_lists_belong() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    assert shape.check({"spec": "x"}).mismatched == [("spec", "string", "object")]
    assert shape.check({"spec": {"containers": {"name": "c"}}}).mismatched == [("spec.containers", "object", "array")]
    assert shape.check({"spec": {"containers": ["c"]}}).mismatched == [("spec.containers[0]", "string", "object")]
    assert shape.check({"metadata": {"labels": []}}).mismatched == [("metadata.labels", "array", "object")]
    assert shape.check({"spec": {"containers": [{"name": "c", "args": 1}]}}).mismatched == [
        ("spec.containers[0].args", "number", "array")]
    assert shape.check({"metadata": {"name": 5, "labels": {"a": 1}}}).mismatched == [
        ("metadata.name", "number", "string"), ("metadata.labels.a", "number", "string")]
    assert shape.check({"spec": {"hostNetwork": "true", "terminationGracePeriodSeconds": 1.5, "priority": True,
                                 "containers": [{"name": "c", "args": ["a", 1], "ports": [{"containerPort": "80"}],
                                                 "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}
                       ).mismatched == [("spec.hostNetwork", "string", "bool"),
                                        ("spec.terminationGracePeriodSeconds", "number 1.5", "int"),  # (the text)
                                        ("spec.priority", "bool", "int"),
                                        ("spec.containers[0].args[1]", "number", "string"),
                                        ("spec.containers[0].ports[0].containerPort", "string", "int")]
    # null is an absent value; IntOrString and Quantity take both
    assert shape.check({"spec": None, "metadata": {"labels": None, "name": None}}).mismatched == []
    svc = shape_of("", "v1", "Service")
    assert svc is not None
    assert svc.check({"spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8080}]}}
                     ).mismatched == []


def test_a_registered_custom_schema_is_used_with_object_meta() -> None:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "string"}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    assert shape_of("example.com", "v1", "Widget") is None
    register_schema("example.com", "v1", "Widget", schema)
    try:
        shape = shape_of("example.com", "v1", "Widget")
        assert shape is not None
        obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "bogus": 1},
               "spec": {"colour": "red"}, "status": {"anything": {"at": "all"}}}
        found = shape.check(obj)
        assert found.problems == ['unknown field "metadata.bogus"', 'unknown field "spec.colour"']
        assert found.missing == ["spec.size"]
    finally:
        register_schema("example.com", "v1", "Widget", None)
    assert shape_of("example.com", "v1", "Widget") is None


def _counted_by_recursion(value: Any) -> int:
    """The key count ``_count_values`` was first written as (a recursion), the reference."""
    if type(value) is dict:
        return len(value) + sum(_counted_by_recursion(v) for v in value.values()
                                if type(v) is dict or type(v) is list)
    if type(value) is list:
        return sum(_counted_by_recursion(v) for v in value if type(v) is dict or type(v) is list)
    return 0


def test_key_count_below_a_node_matches_the_recursive_count() -> None:
    class Sub(dict[str, Any]):
        pass

    rnd = random.Random(7)

    def tree(depth: int) -> Any:
        r = rnd.random()
        if depth > 5 or r < 0.3:  # scalars, and what only exact dicts and lists are not: tuples, subclasses
            return rnd.choice(["s", 1, None, True, (1, {"a": 1}), Sub(a={"b": 1}), {}, []])
        if r < 0.65:
            return {str(i): tree(depth + 1) for i in range(rnd.randint(0, 4))}
        return [tree(depth + 1) for _ in range(rnd.randint(0, 4))]

    for _ in range(3000):
        value = tree(0)
        if type(value) is dict or type(value) is list:
            expected = _counted_by_recursion(value) - (len(value) if type(value) is dict else 0)
            assert _count_values(value) == expected


def test_managed_fields_count_as_keys_for_duplicates() -> None:
    # the opaque fieldsV1 are counted, not walked: a body without duplicates stays one
    obj = pod()
    obj["metadata"]["managedFields"] = [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                                         "fieldsType": "FieldsV1", "fieldsV1": {
                                             "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}}}}]
    body = orjson.dumps(obj)
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    assert not may_have_duplicates(body, shape.check(orjson.loads(body)).keys)
    doubled = body.replace(b'"f:image":{}', b'"f:image":{},"f:image":{}')
    assert may_have_duplicates(doubled, shape.check(orjson.loads(doubled)).keys)


def test_findings_without_the_key_count_are_the_same() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    broken = pod(bogus={"a": [{"b": 1}]}, nodeName=3, containers=[{"name": "c", "image": "x", "extra": {"y": 1}},
                                                                     "scalar"])
    broken["metadata"]["managedFields"] = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:x": {}}}, "time": "not a time"}]
    broken["metadata"]["creationTimestamp"] = "yesterday"
    broken["status"] = {"conditions": "no", "unknown": {"deep": {"er": 1}}}
    for obj in (broken, pod(), pod(containers=[{"image": "x"}])):
        counted = shape.check(copy.deepcopy(obj))
        uncounted = shape.check(copy.deepcopy(obj), count_keys=False)
        assert counted.keys >= uncounted.keys  # (more for what no schema describes)
        for f in ("problems", "mismatched", "missing", "malformed"):
            assert getattr(counted, f) == getattr(uncounted, f)
    assert shape.check(copy.deepcopy(broken)).problems  # the object is broken indeed


def test_a_patch_result_is_checked_only_where_it_differs_from_what_was_stored() -> None:
    """``known`` (a patch's stored base): equal parts are not walked again; every changed
    part is, and equal-looking values of another JSON type (80.0 for 80) count as changed."""
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    stored = pod()
    stored["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    stored["spec"]["legacy"] = 1  # as if a field the schema no longer has were stored
    patched = copy.deepcopy(stored)
    patched["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert shape.check(copy.deepcopy(patched), count_keys=False).problems == ['unknown field "spec.legacy"']
    assert shape.check(patched, count_keys=False, known=stored).problems == []  # spec as stored
    patched["status"]["conditions"][0]["reasonn"] = "typo"
    patched["metadata"]["labels"] = {"a": 1}
    found = shape.check(patched, count_keys=False, known=stored)
    assert found.problems == ['unknown field "status.conditions[0].reasonn"']
    assert [m[0] for m in found.mismatched] == ["metadata.labels.a"]
    retyped = copy.deepcopy(stored)
    retyped["spec"]["containers"][0]["ports"] = [{"containerPort": 80.0}]  # == 80 in Python, not in Go
    assert [m[0] for m in shape.check(retyped, count_keys=False, known=stored).mismatched] == \
        ["spec.containers[0].ports[0].containerPort"]


def lease(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": spec}


@pytest.mark.parametrize(("given", "stored"), [
    ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
    ("2026-01-01T01:30:00+01:30", "2026-01-01T00:00:00Z"),       # in UTC
    ("2025-12-31T23:00:00.999999-01:00", "2026-01-01T00:00:00Z"),  # to the second
    ("2024-02-29T12:00:00.5Z", "2024-02-29T12:00:00Z"),
    # KWOK's Now (RFC3339Nano) in a stage's status: truncated, never rounded
    ("2026-12-07T23:59:59.999999999Z", "2026-12-07T23:59:59Z"),
    ("2026-12-31T10:00:00.1Z", "2026-12-31T10:00:00Z"),
    ("2026-12-31T10:00:00.Z", None),  # a dot without digits: Go's error
])
def test_a_time_is_stored_as_go_writes_it_back(given: str, stored: str | None) -> None:
    shape = shape_of("batch", "v1", "Job")
    assert shape is not None
    def job(at: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "creationTimestamp": at},
                "status": {"startTime": at, "conditions": [{"type": "Complete", "status": "True",
                                                            "lastTransitionTime": at}]}}

    written = job(given)
    if stored is None:
        assert shape.check(written).malformed
        return
    assert not shape.check(written).malformed
    assert written == job(stored)


@pytest.mark.parametrize(("given", "stored"), [
    ("2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z"),
    ("2026-01-01T02:00:00.123456+02:00", "2026-01-01T00:00:00.123456Z"),
])
def test_a_micro_time_is_stored_in_utc_with_its_microseconds(given: str, stored: str) -> None:
    shape = shape_of("coordination.k8s.io", "v1", "Lease")
    assert shape is not None
    obj = lease(renewTime=given, acquireTime=given)
    assert not shape.check(obj).malformed
    assert obj == lease(renewTime=stored, acquireTime=stored)


@pytest.mark.parametrize(("given", "why"), [
    # what the Python client sends for a datetime without microseconds (isoformat)
    ("2026-01-01T00:00:00+00:00", 'cannot parse "+00:00" as ".000000"'),
    ("2026-01-01T00:00:00Z", 'cannot parse "Z" as ".000000"'),
    ("2026-01-01T00:00:00.5Z", 'cannot parse ".5Z" as ".000000"'),
    ("2026-01-01T00:00:00.123456789Z", 'cannot parse "789Z" as "Z07:00"'),
])
def test_a_micro_time_needs_six_digits_of_a_second_as_go_parses_it(given: str, why: str) -> None:
    shape = shape_of("coordination.k8s.io", "v1", "Lease")
    assert shape is not None
    obj = lease(renewTime=given)
    found = shape.check(obj)
    assert found.malformed == [f'parsing time "{given}" as "2006-01-02T15:04:05.000000Z07:00": {why}']
    assert obj == lease(renewTime=given)  # (the request fails: nothing to store)


@pytest.mark.parametrize(("given", "what"), [
    ("2026-13-01T00:00:00Z", "month"), ("2026-02-29T00:00:00Z", "day"), ("2026-04-31T00:00:00Z", "day"),
    ("2026-01-01T24:00:00Z", "hour"), ("2026-01-01T00:60:00Z", "minute"), ("2026-01-01T00:00:60Z", "second"),
])
def test_a_time_out_of_range_is_malformed(given: str, what: str) -> None:
    shape = shape_of("batch", "v1", "Job")
    assert shape is not None
    found = shape.check({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                         "status": {"startTime": given}})
    assert found.malformed == [f'parsing time "{given}": {what} out of range']


def test_every_day_of_the_calendar_is_a_time_and_no_other_is() -> None:
    """The stored forms are accepted without a parse (a pattern of the days each month
    has; February the 29th is parsed for its year): every real day of a common year, a
    leap year and a century that is not one is valid, and no other."""
    import datetime
    shape = shape_of("batch", "v1", "Job")
    assert shape is not None
    for year in (2026, 2028, 2100):
        for month in range(1, 13):
            for day in range(1, 32):
                given = f"{year}-{month:02d}-{day:02d}T23:59:59Z"
                found = shape.check({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                                     "status": {"startTime": given}})
                try:
                    datetime.date(year, month, day)
                except ValueError:
                    assert found.malformed == [f'parsing time "{given}": day out of range']
                else:
                    assert found.malformed == [], given


@pytest.mark.parametrize(("given", "why"), [
    ("YWJj", None), ("YWI=", None), ("YQ==", None), ("", None), ("YWJj\nZGVm", None),  # Go skips line breaks
    ("!!", "illegal base64 data at input byte 0"), ("YWJjZ", "illegal base64 data at input byte 4"),
    ("YW Jj", "illegal base64 data at input byte 2"), ("YQ", "illegal base64 data at input byte 0"),
])
def test_byte_fields_are_standard_base64_as_go_decodes_them(given: str, why: str | None) -> None:
    """ConfigMap ``binaryData``, Secret ``data``, webhooks' ``caBundle``: a Go []byte,
    which a Go client cannot decode from anything else (so neither can its informers)."""
    cm_shape, hook_shape = shape_of("", "v1", "ConfigMap"), \
        shape_of("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
    assert cm_shape is not None and hook_shape is not None
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "binaryData": {"k": given}}
    hooks = {"metadata": {"name": "w"}, "webhooks": [{"name": "a.b.c", "clientConfig": {"caBundle": given}}]}
    expected = [] if why is None else [why]
    assert cm_shape.check(cm).malformed == expected
    assert hook_shape.check(hooks).malformed == expected
