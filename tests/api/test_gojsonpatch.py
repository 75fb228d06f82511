"""RFC 6902 patches as upstream's json-patch library (gopkg.in/evanphx/json-patch.v4) applies
them (api/gojsonpatch.py): its departures from the RFC and its error messages, as its
``patch.go`` words them."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api.gojsonpatch import MAX_COPY_BYTES, PatchError, apply


def op(kind: str, path: str, **fields: Any) -> dict[str, Any]:
    return {"op": kind, "path": path, **fields}


def test_what_applies() -> None:
    doc = {"a": {"b": 1}, "l": [1, 2, 3]}
    assert apply(doc, [op("add", "/a/c", value=2)]) == {"a": {"b": 1, "c": 2}, "l": [1, 2, 3]}
    assert apply(doc, [op("add", "/l/-", value=4)])["l"] == [1, 2, 3, 4]
    assert apply(doc, [op("add", "/l/0", value=0)])["l"] == [0, 1, 2, 3]
    assert apply(doc, [op("add", "/l/3", value=4)])["l"] == [1, 2, 3, 4]  # at the end
    assert apply(doc, [op("add", "/l/-1", value=9)])["l"] == [1, 2, 3, 9]  # negative: from the end of the new list
    assert apply(doc, [op("remove", "/l/-1")])["l"] == [1, 2]
    assert apply(doc, [op("replace", "/a/missing", value=1)])["a"] == {"b": 1, "missing": 1}  # a missing key added
    assert apply(doc, [op("move", "/c", **{"from": "/a/b"})]) == {"a": {}, "l": [1, 2, 3], "c": 1}
    assert apply(doc, [op("copy", "/c", **{"from": "/a"})])["c"] == {"b": 1}
    assert apply(doc, [op("copy", "/c", **{"from": "/a/none"})])["c"] is None  # a missing key copied as null
    assert apply(doc, [op("add", "/a/n")])["a"] == {"b": 1, "n": None}  # no value: null
    assert apply(doc, [op("replace", "", value={"x": 1})]) == {"x": 1}
    assert apply({"a~/b": 1}, [op("remove", "/a~0~1b")]) == {}
    assert apply(doc, [op("test", "/a/b", value=1.0), op("test", "/a/none")]) == doc  # no value matches a missing key
    assert doc == {"a": {"b": 1}, "l": [1, 2, 3]}  # (patched in a copy)


@pytest.mark.parametrize(("operation", "message"), [
    (op("replace", "/data/x", value=1),
     "replace operation does not apply: doc is missing path: /data/x: missing value"),
    (op("replace", "/l/7", value=1), "replace operation does not apply: doc is missing key: /l/7: missing value"),
    (op("replace", "", value=1), "replace operation value must be object or array: %!w(<nil>)"),
    (op("add", "/x/y", value=1), 'add operation does not apply: doc is missing path: "/x/y": missing value'),
    (op("add", "/l/x", value=1), "error in add for path: '/l/x': value was not a proper array index: 'x': "
                                 'strconv.Atoi: parsing "x": invalid syntax'),
    (op("add", "/l/5", value=1), "error in add for path: '/l/5': Unable to access invalid index: 5: invalid index "
                                 "referenced"),
    (op("add", "", value=1), 'add operation does not apply: doc is missing path: "": missing value'),
    (op("remove", "/a/zz"), "error in remove for path: '/a/zz': Unable to remove nonexistent key: zz: missing value"),
    (op("remove", "/l/3"), "error in remove for path: '/l/3': Unable to access invalid index: 3: invalid index "
                           "referenced"),
    (op("remove", "/l/-4"), "error in remove for path: '/l/-4': Unable to access invalid index: -4: invalid index "
                            "referenced"),
    (op("remove", "/l/99999999999999999999"), "error in remove for path: '/l/99999999999999999999': strconv.Atoi: "
                                              'parsing "99999999999999999999": value out of range'),
    (op("remove", "/a/b/c"), 'remove operation does not apply: doc is missing path: "/a/b/c": missing value'),
    (op("move", "/c", **{"from": "/a/zz"}), "error in move for path: 'zz': Unable to remove nonexistent key: zz: "
                                            "missing value"),
    (op("move", "/c"), "move operation failed to decode from: operation, missing from field: missing value"),
    (op("move", "/x/y", **{"from": "/a/b"}), "move operation does not apply: doc is missing destination path: "
                                             "/x/y: missing value"),
    (op("copy", "/c", **{"from": "/x/y"}), 'copy operation does not apply: doc is missing from path: "/x/y": '
                                           "missing value"),
    (op("copy", "/l/9", **{"from": "/a"}), "error while adding value during copy: Unable to access invalid index: "
                                           "9: invalid index referenced"),
    (op("test", "/x/y", value=1), "test operation does not apply: is missing path: /x/y: missing value"),
    (op("frob", "/a"), "Unexpected kind: frob"),
])
def test_what_does_not_apply_in_the_librarys_words(operation: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError) as e:
        apply({"a": {"b": 1}, "l": [1, 2, 3]}, [operation])
    assert str(e.value) == message and not e.value.test_failed


@pytest.mark.parametrize("operation", [
    op("test", "/a/b", value=2), op("test", "/a/b", value=True), op("test", "/a/b"), op("test", "/a/n", value=None),
    op("test", "", value={"a": 1})])
def test_a_failed_test_is_told_apart(operation: dict[str, Any]) -> None:
    with pytest.raises(PatchError) as e:
        apply({"a": {"b": 1, "n": None}}, [operation])
    assert e.value.test_failed and str(e.value) == f"testing value {operation['path']} failed: test failed"


def test_copies_are_bounded_as_kube_apiservers() -> None:
    doc = {"a": "x" * (MAX_COPY_BYTES // 2)}
    with pytest.raises(PatchError) as e:
        apply(doc, [op("copy", "/b", **{"from": "/a"}), op("copy", "/c", **{"from": "/a"})])
    assert str(e.value).startswith("Unable to complete the copy, the accumulated size increase of copy is ")


def test_a_decoded_patchs_null_value_is_the_librarys_nil() -> None:
    """A client's ``"value": null`` decodes to the library's nil value, which a missing key
    matches in a ``test``; a policy's marshalled null does not. A null operation has no op."""
    doc = {"a": {"b": 1}}
    assert apply(doc, [op("test", "/a/none", value=None)], decoded=True) == doc
    with pytest.raises(PatchError) as e:
        apply(doc, [op("test", "/a/none", value=None)])
    assert e.value.test_failed
    with pytest.raises(PatchError) as e:
        apply(doc, [None], decoded=True)
    assert str(e.value) == "Unexpected kind: unknown"
