"""Field sets, comparisons, merges and removals over the built-in schemas."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.registry import shapes
from controlplane.registry.fieldpath import paths, set_element
from controlplane.registry.shapes import Kind, shape_for
from controlplane.registry.typed import ShapeError, compare, created_set, equal, field_set, merge, remove

POD = shape_for("", "v1", "Pod")
DEPLOYMENT = shape_for("apps", "v1", "Deployment")


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]}],
                     **spec}}


def test_shapes_follow_the_schema_annotations() -> None:
    spec = POD.field("spec")
    assert spec is not None and spec.kind is Kind.STRUCT
    containers = spec.field("containers")
    assert containers is not None and containers.kind is Kind.ASSOCIATIVE and containers.keys == ("name",)
    ports = containers.elem.field("ports")
    assert ports is not None and ports.keys == ("containerPort", "protocol")
    meta = POD.field("metadata")
    assert meta is not None
    assert meta.field("finalizers").kind is Kind.SET  # type: ignore[union-attr]
    assert meta.field("labels").kind is Kind.MAP  # type: ignore[union-attr]
    assert meta.field("ownerReferences").elem.kind is Kind.LEAF  # type: ignore[union-attr]  # structType=atomic
    assert containers.elem.field("args").kind is Kind.LEAF  # type: ignore[union-attr]  # listType=atomic
    dspec = DEPLOYMENT.field("spec")
    assert dspec is not None and dspec.field("selector").kind is Kind.LEAF  # type: ignore[union-attr]


def test_unknown_kinds_are_deduced_and_registered_schemas_used() -> None:
    unknown = shape_for("example.com", "v1", "Widget")
    assert unknown.field("spec") is shapes.DEDUCED
    meta = unknown.field("metadata")
    assert meta is not None and meta.field("finalizers").kind is Kind.SET  # type: ignore[union-attr]
    assert field_set({"metadata": {"labels": {"a": "b"}}, "spec": {"l": [1]}}, unknown) == {
        "f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {".": {}, "f:l": {}}}
    shapes.register("example.com", "v1", "Widget", {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                      "items": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}})
    try:
        widget = shape_for("example.com", "v1", "Widget")
        spec = widget.field("spec")
        assert spec is not None and spec.field("items").kind is Kind.ASSOCIATIVE  # type: ignore[union-attr]
        assert widget.field("metadata") is meta  # ObjectMeta, whatever the CRD says
    finally:
        shapes.unregister("example.com", "v1", "Widget")


def test_field_set_of_an_applied_configuration() -> None:
    s = field_set(pod(), POD)
    assert s == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"web"}': {
            ".": {}, "f:name": {}, "f:image": {},
            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}}},
    }


def test_field_set_of_deduced_values() -> None:
    s = field_set({"spec": {"a": {"b": 1}, "l": [1, 2]}}, shapes.DEDUCED)
    assert s == {"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:l": {}}}


def test_missing_key_without_default_is_an_error() -> None:
    with pytest.raises(ShapeError, match=r'omits all key fields \["name"\] \(and doesn\'t have default values'):
        field_set({"spec": {"containers": [{"image": "x"}]}}, POD)
    with pytest.raises(ShapeError, match="duplicate"):
        field_set({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}, POD)


def test_created_set_owns_new_nodes_but_not_the_zero_object() -> None:
    s = created_set(pod(restartPolicy="Always"), POD)
    assert "." not in s["f:spec"] and "." not in s["f:spec"]["f:containers"]  # zero object has them
    assert "." in s["f:metadata"]["f:labels"]
    assert s["f:spec"]["f:restartPolicy"] == {}
    assert "." in s["f:spec"]["f:containers"]['k:{"name":"web"}']


def test_compare() -> None:
    old = pod(restartPolicy="Always")
    new = pod(dnsPolicy="ClusterFirst")
    new["spec"]["containers"][0]["image"] = "nginx:2"
    new["metadata"]["labels"]["tier"] = "x"
    c = compare(old, new, POD)
    assert paths(c.added) == [("f:metadata", "f:labels", "f:tier"), ("f:spec", "f:dnsPolicy")]
    assert paths(c.modified) == [("f:spec", "f:containers", 'k:{"name":"web"}', "f:image")]
    assert paths(c.removed) == [("f:spec", "f:restartPolicy")]
    assert not compare(old, old, POD).changed()


def test_merge_keeps_live_fields_and_merges_lists_by_key() -> None:
    live = pod(restartPolicy="Always")
    live["spec"]["containers"].insert(0, {"name": "side", "image": "busybox"})
    config = {"metadata": {"labels": {"tier": "x"}},
              "spec": {"containers": [{"name": "web", "image": "nginx:2"}, {"name": "new", "image": "y"}]}}
    merged = merge(live, config, POD)
    assert merged["metadata"]["labels"] == {"app": "web", "tier": "x"}
    assert [c["name"] for c in merged["spec"]["containers"]] == ["side", "web", "new"]
    web = merged["spec"]["containers"][1]
    assert web["image"] == "nginx:2" and web["ports"] == [{"containerPort": 80}]
    assert merged["spec"]["restartPolicy"] == "Always"
    assert live["spec"]["containers"][1]["image"] == "nginx:1"  # the live object is untouched


def test_keys_and_values_compare_as_structured_merge_diffs_values() -> None:
    """value.Compare/Equals: an int and a float by value (80 and 80.0 name one item, and
    FieldsV1 writes the float as Go does, ``80``); a bool equals no number (``true`` is not 1)."""
    live = pod()
    floated = {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80.0, "name": "http"}]}]}}
    assert merge(live, floated, POD)["spec"]["containers"][0]["ports"] == [{"containerPort": 80.0, "name": "http"}]
    assert field_set(floated, POD)["f:spec"]["f:containers"]['k:{"name":"web"}']["f:ports"] == {
        'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}, "f:name": {}}}
    assert paths(compare(live, merge(live, floated, POD), POD).modified) == []  # (80 is 80.0: name is added)
    boolean = {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": True}]}]}}
    assert merge(live, boolean, POD)["spec"]["containers"][0]["ports"] == [{"containerPort": 80},
                                                                           {"containerPort": True}]
    deduced = shapes.DEDUCED
    assert paths(compare({"spec": {"x": 1}}, {"spec": {"x": True}}, deduced).modified) == [("f:spec", "f:x")]
    assert paths(compare({"spec": {"x": 1}}, {"spec": {"x": 1.0}}, deduced).modified) == []
    assert [set_element(v) for v in (1.0, 1, True, 1.5, 1e21, "1")] == ["v:1", "v:1", "v:true", "v:1.5", "v:1e+21",
                                                                         'v:"1"']


def test_equal_tells_a_bool_from_a_number() -> None:
    shared = {"a": [1, {"b": True}]}
    assert equal({"x": shared, "y": 1}, {"x": shared, "y": 1.0})
    assert not equal({"x": shared, "y": 1}, {"x": shared, "y": True})
    assert not equal({"x": [{"b": 1}]}, {"x": [{"b": True}]}) and equal({"x": [{"b": 1}]}, {"x": [{"b": 1.0}]})
    assert not equal({"a": 1, "b": [0]}, {"b": [False], "a": 1}) and equal({"a": 1, "b": []}, {"b": [], "a": 1})


def test_merge_replaces_atomic_values_and_unions_sets() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [{"name": "w", "args": ["1", "2"]}]}}
    config = {"metadata": {"finalizers": ["c", "a"]}, "spec": {"containers": [{"name": "w", "args": ["3"]}]}}
    merged = merge(live, config, POD)
    assert merged["spec"]["containers"][0]["args"] == ["3"]
    assert merged["metadata"]["finalizers"] == ["c", "a", "b"]


def test_remove_drops_members_and_what_they_empty() -> None:
    obj = pod()
    out = remove(obj, {"f:metadata": {"f:labels": {"f:app": {}}},
                       "f:spec": {"f:containers": {'k:{"name":"web"}': {"f:ports": {
                           'k:{"containerPort":80,"protocol":"TCP"}': {}}}}}}, POD)
    assert "metadata" not in out  # emptied: it held only the removed label
    assert "ports" not in out["spec"]["containers"][0]
    assert obj["metadata"]["labels"] == {"app": "web"}  # the input is untouched


def test_created_set_leaves_out_what_the_empty_object_has_anyway() -> None:
    assert created_set({"metadata": {"labels": {"a": "b"}}, "spec": {}, "status": {}}, POD) == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
    assert created_set({"spec": {"containers": []}}, POD) == {}


def test_structs_held_by_value_are_in_the_zero_object() -> None:
    # the Go types' pointers, from the protobuf schema: an Event's source and a Deployment's strategy
    # are values (``{}`` in the empty object: their fields are owned, not the struct), a pod's
    # securityContext and a strategy's rollingUpdate pointers (they appear: ``.``); an
    # ObjectReference is atomic (``+structType=atomic``)
    event = shape_for("", "v1", "Event")
    assert {"source", "involvedObject"} <= event.zero and "series" not in event.zero
    involved = event.field("involvedObject")
    assert involved is not None and involved.kind is Kind.LEAF
    got = created_set({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "x"}}, event)
    assert got == {"f:involvedObject": {}, "f:source": {"f:component": {}}}
    deployment = shape_for("apps", "v1", "Deployment")
    got = created_set({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
                      deployment)
    assert got == {"f:spec": {"f:strategy": {"f:type": {}, "f:rollingUpdate": {".": {}, "f:maxSurge": {}}}}}
    # an update from an object that lacks one compares with its zero value, both ways
    diff = compare({"reason": "r"}, {"reason": "r", "source": {"host": "n"}}, event)
    assert (diff.added, diff.modified, diff.removed) == ({"f:source": {"f:host": {}}}, {}, {})
    diff = compare({"reason": "r", "source": {"host": "n"}}, {"reason": "r"}, event)
    assert (diff.added, diff.modified, diff.removed) == ({}, {}, {"f:source": {"f:host": {}}})
    # custom resources have no Go types: nothing held by value
    inner = {"type": "object", "properties": {"a": {"type": "string"}}}
    shapes.register("example.com", "v1", "Widget", {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"inner": inner}}}})
    try:
        spec = shape_for("example.com", "v1", "Widget").field("spec")
        assert spec is not None and spec.zero == frozenset()
    finally:
        shapes.unregister("example.com", "v1", "Widget")


# -- duplicated elements in a stored object (upstream types live objects allowing them) --
def env_pod(*env: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "web", "image": "x", "env": list(env)}]}}


def env_set(tree: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = tree["f:spec"]["f:containers"]['k:{"name":"web"}']["f:env"]
    return out


def test_a_duplicated_element_is_one_member_as_a_whole() -> None:
    s = created_set(env_pod({"name": "A", "value": "1"}, {"name": "A", "value": "2"}, {"name": "B", "value": "3"}), POD)
    assert env_set(s) == {".": {}, 'k:{"name":"A"}': {}, 'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}


def test_compare_with_duplicates_before_or_after() -> None:
    a1, a2, b = {"name": "A", "value": "1"}, {"name": "A", "value": "2"}, {"name": "B", "value": "3"}
    # duplicates before and after: modified as a whole, if they changed
    assert not compare(env_pod(a1, a2), env_pod(a1, a2), POD).changed()
    assert env_set(compare(env_pod(a1, a2), env_pod(a2, a1), POD).modified) == {'k:{"name":"A"}': {}}
    # duplicates no more: the item is added, the marker removed
    gone = compare(env_pod(a1, a2, b), env_pod({"name": "A", "value": "9"}, b), POD)
    assert env_set(gone.added) == {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}
    assert env_set(gone.removed) == {'k:{"name":"A"}': {}}
    # new duplicates: the item's content removed, the marker added
    new = compare(env_pod(a1, b), env_pod(a1, a2, b), POD)
    assert env_set(new.added) == {'k:{"name":"A"}': {}}
    assert env_set(new.removed) == {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}


def test_merge_replaces_all_duplicates_by_the_applied_item_and_keeps_the_others() -> None:
    a1, a2, b = {"name": "A", "value": "1"}, {"name": "A", "value": "2"}, {"name": "B", "value": "3"}
    live = env_pod(a1, a2, b)
    merged = merge(live, env_pod({"name": "A", "value": "9"}), POD)
    assert merged["spec"]["containers"][0]["env"] == [{"name": "A", "value": "9"}, b]
    kept = merge(live, env_pod({"name": "B", "value": "8"}), POD)
    assert kept["spec"]["containers"][0]["env"] == [a1, a2, {"name": "B", "value": "8"}]
    with pytest.raises(ShapeError, match="duplicate"):  # the configuration may not have them
        merge(env_pod(b), env_pod(a1, a2), POD)


@pytest.mark.parametrize(("live", "config", "merged"), [
    # structured-merge-diff's own cases for its merge order (typed/merge_test.go)
    ("ab", "ba", "ba"), ("abc", "def", "abcdef"), ("abc", "cdef", "abcdef"), ("abcgf", "cdef", "abcgdef"),
    ("abc", "defxyz", "abcdefxyz"), ("cdef", "ace", "acdef"), ("abcxyz", "def", "abcxyzdef"),
    ("abcxyz", "defxyz", "abcdefxyz"), ("cagf", "cfag", "cfag"), ("abcd", "defa", "bcdefa"),
    ("cdefghij", "2h3e4kl", "cdfg2hij3e4kl"), ("abcdefghij", "1b2h3e4kl", "a1bcdfg2hij3e4kl"),
])
def test_merge_orders_a_list_as_upstream(live: str, config: str, merged: str) -> None:
    def names(*items: str) -> dict[str, Any]:
        return env_pod(*({"name": n, "value": "v"} for n in items))
    got = merge(names(*live), names(*config), POD)
    assert "".join(e["name"] for e in got["spec"]["containers"][0]["env"]) == merged


def test_an_item_with_some_of_its_keys_is_named_by_those() -> None:
    """structured-merge-diff v6 (optional map keys, helpers.go
    ``keyedAssociativeListItemToPathElement``): a key field the item leaves out, with no
    default, is left out of its element; only an item with none of them is an error. A port
    without its containerPort is ``k:{"protocol":"TCP"}`` (protocol's default); it was a
    ``ShapeError`` (``omits key field "containerPort"``)."""
    s = field_set({"spec": {"containers": [{"name": "c", "ports": [{"name": "http"}]}]}}, POD)
    ports = s["f:spec"]["f:containers"]['k:{"name":"c"}']["f:ports"]
    assert ports == {'k:{"protocol":"TCP"}': {".": {}, "f:name": {}}}
