"""Sets of field paths in the ``FieldsV1`` format of ``metadata.managedFields``.

A set is a tree of nested dicts whose keys are path elements, exactly as the
wire format spells them (structured-merge-diff's ``fieldpath.Set``)::

    f:<name>                  a field of a struct, or a key of a map
    k:{"name":"web"}          the item of an associative list with these key values
    v:"x"                     the item of a set list with this value
    i:3                       a list item by index (only in sets written by others)
    .                         the node itself, when it also has children

A node is a member of the set when it is a leaf (``{}``) or has a ``.`` child.
Invariant, kept by every function here: a non-leaf node that is not a member
has at least one member below it (no empty, memberless branches), so the tree
is also its own serialisation::

    {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}   # labels and labels.app

Sets are treated as immutable values: the operations build new trees and may
share unchanged subtrees with their inputs.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "SELF",
    "Tree",
    "difference",
    "intersection",
    "is_member",
    "key_element",
    "path_string",
    "paths",
    "set_element",
    "union",
    "valid",
]

Tree = dict[str, Any]  # str -> Tree; typed loosely because the recursion is unbounded
SELF = "."


def is_member(node: Tree) -> bool:
    return not node or SELF in node


def _make(member: bool, children: Tree) -> Tree | None:
    """A node from its membership and (non-empty, valid) children; None if it would be empty."""
    if not children:
        return {} if member else None
    if member:
        children[SELF] = {}
    return children


def union(a: Tree, b: Tree) -> Tree:
    if not a:
        return b
    if not b:
        return a
    children: Tree = {}
    for k, v in a.items():
        if k == SELF:
            continue
        w = b.get(k)
        children[k] = v if w is None else _union_node(v, w)
    for k, w in b.items():
        if k != SELF and k not in a:
            children[k] = w
    if SELF in a or SELF in b:
        children[SELF] = {}
    return children


def _union_node(a: Tree, b: Tree) -> Tree:
    member = is_member(a) or is_member(b)
    children: Tree = {}
    for k, v in a.items():
        if k == SELF:
            continue
        w = b.get(k)
        children[k] = v if w is None else _union_node(v, w)
    for k, w in b.items():
        if k != SELF and k not in a:
            children[k] = w
    made = _make(member, children)
    return made if made is not None else {}


def difference(a: Tree, b: Tree) -> Tree:
    """The members of ``a`` that are not members of ``b`` (top level: the root is never a member)."""
    if not b:
        return a
    return _difference_children(a, b)


def _difference_node(a: Tree, b: Tree) -> Tree | None:
    return _make(is_member(a) and not is_member(b), _difference_children(a, b))


def _difference_children(a: Tree, b: Tree) -> Tree:
    children: Tree = {}
    for k, v in a.items():
        if k == SELF:
            continue
        w = b.get(k)
        if w is None:
            children[k] = v
            continue
        d = _difference_node(v, w)
        if d is not None:
            children[k] = d
    return children


def intersection(a: Tree, b: Tree) -> Tree:
    if not a or not b:
        return {}
    out: Tree = {}
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    for k, v in small.items():
        if k == SELF:
            continue
        w = large.get(k)
        if w is not None:
            i = _intersection_node(v, w)
            if i is not None:
                out[k] = i
    return out


def _intersection_node(a: Tree, b: Tree) -> Tree | None:
    member = is_member(a) and is_member(b)
    children: Tree = {}
    for k, v in a.items():
        if k == SELF:
            continue
        w = b.get(k)
        if w is not None:
            i = _intersection_node(v, w)
            if i is not None:
                children[k] = i
    return _make(member, children)


def paths(tree: Tree, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The members of the set as paths of elements, parents before children."""
    out: list[tuple[str, ...]] = []
    for k in sorted(tree):
        if k == SELF:
            continue
        node = tree[k]
        path = (*prefix, k)
        if is_member(node):
            out.append(path)
        out.extend(paths(node, path))
    return out


def valid(tree: Any) -> bool:
    """Whether ``tree`` is a well-formed FieldsV1 set (as decoded from a client's managedFields)."""
    if not isinstance(tree, dict):
        return False
    for k, v in tree.items():
        if not isinstance(v, dict):
            return False
        if k == SELF:
            if v:
                return False
            continue
        if k[:2] not in ("f:", "k:", "v:", "i:") or not valid(v):
            return False
    return True


def key_element(fields: dict[str, Any]) -> str:
    """The element of an associative list item: ``k:`` and the key fields as compact JSON, sorted by name.

    A whole float is written as the integer it equals (``k:{"port":80}`` for ``80.0``):
    structured-merge-diff compares an int and a float by value (``value.Compare``), so the
    two name one item, and writes the float as Go's JSON does. A bool stays a bool: it
    equals no number there (``true`` is not ``1``)."""
    for v in fields.values():
        if type(v) is float:
            fields = {k: _whole(v) for k, v in fields.items()}
            break
    return "k:" + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS).decode()


def set_element(value: Any) -> str:
    """The element of a set list item: ``v:`` and the value as JSON (a whole float as its integer, as above)."""
    if type(value) is float:
        value = _whole(value)
    return "v:" + orjson.dumps(value).decode()


def _whole(value: Any) -> Any:
    """A float that is a whole number below 1e21 (which Go's JSON writes without an exponent)
    as that int; any other value as it is."""
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def path_string(path: tuple[str, ...]) -> str:
    """A path as kube-apiserver prints it in a conflict: ``.spec.containers[name="web"].image``."""
    out: list[str] = []
    for element in path:
        kind, raw = element[:2], element[2:]
        if kind == "f:":
            out.append("." + raw)
        elif kind == "k:":
            fields = orjson.loads(raw)
            out.append("[" + ",".join(f"{k}={_json(fields[k])}" for k in sorted(fields)) + "]")
        elif kind == "v:":
            out.append(f"[={_json(orjson.loads(raw))}]")
        else:
            out.append(f"[{raw}]")
    return "".join(out)
