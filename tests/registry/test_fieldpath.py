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
