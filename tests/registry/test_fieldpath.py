"""FieldsV1 sets: membership, the set operations, and the printed paths of conflicts."""

from __future__ import annotations

from controlplane.registry import fieldpath as fp

A: fp.Tree = {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}}, "f:spec": {"f:replicas": {}}}
B: fp.Tree = {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:paused": {}}}


def test_membership_leaf_and_self() -> None:
    labels = A["f:metadata"]["f:labels"]
    assert fp.is_member(labels) and fp.is_member(labels["f:app"])
    assert not fp.is_member(A["f:metadata"])


def test_paths_lists_members_parents_first() -> None:
    assert fp.paths(A) == [("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:app"),
                           ("f:metadata", "f:labels", "f:tier"), ("f:spec", "f:replicas")]


def test_union() -> None:
    u = fp.union(A, B)
    assert set(fp.paths(u)) == set(fp.paths(A)) | set(fp.paths(B))


def test_difference_drops_memberless_branches() -> None:
    d = fp.difference(A, B)
    assert set(fp.paths(d)) == {("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:tier"),
                                ("f:spec", "f:replicas")}
    assert fp.difference(B, A) == {"f:spec": {"f:paused": {}}}
    assert fp.difference(A, A) == {}


def test_intersection() -> None:
    assert fp.intersection(A, B) == {"f:metadata": {"f:labels": {"f:app": {}}}}
    assert fp.intersection(A, {}) == {}


def test_a_member_that_keeps_children_but_loses_itself() -> None:
    d = fp.difference({"f:x": {".": {}, "f:y": {}}}, {"f:x": {}})
    assert d == {"f:x": {"f:y": {}}}
    assert not fp.is_member(d["f:x"])


def test_operations_do_not_change_their_inputs() -> None:
    a: fp.Tree = {"f:x": {".": {}, "f:y": {}}}
    before = repr(a)
    fp.union(a, {"f:x": {"f:z": {}}})
    fp.difference(a, {"f:x": {}})
    fp.intersection(a, a)
    assert repr(a) == before


def test_elements_and_path_strings() -> None:
    key = fp.key_element({"protocol": "TCP", "containerPort": 80})
    assert key == 'k:{"containerPort":80,"protocol":"TCP"}'
    assert fp.set_element("kubernetes") == 'v:"kubernetes"'
    path = ("f:spec", "f:containers", 'k:{"name":"web"}', "f:ports", key, "f:hostPort")
    assert fp.path_string(path) == '.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].hostPort'
    assert fp.path_string(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'


def test_valid() -> None:
    assert fp.valid(A) and fp.valid({})
    assert not fp.valid({"x:bad": {}})
    assert not fp.valid({"f:a": []})
    assert not fp.valid({".": {"f:a": {}}})
    assert not fp.valid([])


def keys(tree: fp.Tree) -> list[str]:
    return list(tree)


def test_ordered_as_structured_merge_diff_serialises_a_set() -> None:
    """``.`` first, then fields by name, keys, set values, indices (PathElement.Compare),
    each kind by value.Compare: numbers by value, then strings, bools, lists, maps, null."""
    tree: fp.Tree = {"i:10": {}, "v:true": {}, 'k:{"port":8080}': {}, "f:b": {}, "i:9": {}, 'v:"a"': {},
            'k:{"port":80}': {}, "v:10": {}, ".": {}, "f:a": {"f:z": {}, ".": {}, "f:y": {}}, "v:9.5": {},
            'k:{"port":443}': {}, "v:null": {}, "v:[1,2]": {}, "v:[1]": {}, 'v:{"a":1}': {}, "v:false": {}}
    out = fp.ordered(tree)
    assert keys(out) == [".", "f:a", "f:b", 'k:{"port":80}', 'k:{"port":443}', 'k:{"port":8080}', "v:9.5",
                         "v:10", 'v:"a"', "v:false", "v:true", "v:[1]", "v:[1,2]", 'v:{"a":1}', "v:null",
                         "i:9", "i:10"]
    assert keys(out["f:a"]) == [".", "f:y", "f:z"]
    assert out == tree and keys(tree)[0] == "i:10"  # the same set; the argument left as it was


def test_keys_of_several_fields_sort_field_by_field_in_name_order() -> None:
    tree: fp.Tree = {'k:{"containerPort":80,"protocol":"UDP"}': {}, 'k:{"containerPort":80,"protocol":"TCP"}': {},
            'k:{"containerPort":53,"protocol":"UDP"}': {}, 'k:{"name":"b"}': {}, 'k:{"name":"a!"}': {},
            'k:{"name":"a"}': {}, 'k:{"name":"é"}': {}, 'k:{"name":"Z"}': {}}
    assert keys(fp.ordered(tree)) == [
        'k:{"containerPort":53,"protocol":"UDP"}', 'k:{"containerPort":80,"protocol":"TCP"}',
        'k:{"containerPort":80,"protocol":"UDP"}',  # "containerPort" < "name": the first fields decide
        'k:{"name":"Z"}', 'k:{"name":"a"}', 'k:{"name":"a!"}', 'k:{"name":"b"}', 'k:{"name":"é"}']


def test_ordered_keeps_what_is_in_order_and_what_was_written_before() -> None:
    sorted_tree = {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:replicas": {}}}
    assert fp.ordered(sorted_tree) is sorted_tree
    stored = fp.ordered({"f:spec": {"f:b": {}, "f:a": {}}, "f:metadata": {}})
    same: fp.Tree = {"f:metadata": {}, "f:spec": {"f:a": {}, "f:b": {}}}
    assert fp.ordered(same, stored) is stored  # equal to what was written: taken as it was
    grown = {"f:spec": stored["f:spec"], "f:metadata": {"f:name": {}}}
    out = fp.ordered(grown, stored)
    assert keys(out) == ["f:metadata", "f:spec"] and out["f:spec"] is stored["f:spec"]
    remembered = fp.remember_ordered({"f:b": {}, "f:a": {}})
    assert keys(remembered) == ["f:a", "f:b"] and fp.ordered(remembered) is remembered
