"""Sets of field paths in the ``FieldsV1`` format of ``metadata.managedFields``.

A set is a tree of nested dicts whose keys are path elements, exactly as the
wire format spells them (structured-merge-diff's ``fieldpath.Set``)::

    f:<name>                  a field of a struct, or a key of a map
    k:{"name":"web"}          the item of an associative list with these key values
    v:"x"                     the item of a set list with this value
    i:3                       a list item by index (only in sets written by others)
    .                         the node itself, when it also has children

A node is a member of the set when it is a leaf (``{}``) or has a ``.`` child.
A tree's keys may come in any order; ``ordered`` puts them in the order upstream
serialises a set in (``.`` first, then its path elements sorted), for the object.
Invariant, kept by every function here: a non-leaf node that is not a member
has at least one member below it (no empty, memberless branches), so the tree
is also its own serialisation::

    {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}   # labels and labels.app

Sets are treated as immutable values: the operations build new trees and may
share unchanged subtrees with their inputs.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import orjson

__all__ = [
    "SELF",
    "Tree",
    "difference",
    "intersection",
    "is_member",
    "key_element",
    "ordered",
    "path_string",
    "remember_ordered",
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


def ordered(tree: Tree, known: Tree | None = None) -> Tree:
    """``tree`` with its keys in the order structured-merge-diff writes a ``fieldpath.Set``
    (``serialize.go``, ``emitContentsV1``): ``.`` first, then the path elements sorted as
    ``PathElement.Compare`` sorts them: fields (``f:``) by name, then keys (``k:``) by their
    fields, then set values (``v:``), then indices (``i:``), each kind by ``value.Compare``::

        {"f:b": {}, ".": {}, "i:10": {}, "k:{\"n\":2}": {}, "f:a": {}, "k:{\"n\":10}": {}, "i:9": {}}
        -> {".": {}, "f:a": {}, "f:b": {}, "k:{\"n\":2}": {}, "k:{\"n\":10}": {}, "i:9": {}, "i:10": {}}

    A node already in order is returned as it is (the same dict), as is a tree
    ``remember_ordered`` gave; for a node equal to the node at the same place of ``known``
    (a tree this wrote before, so in order) that node is returned: the sets of a write
    share or repeat most of the stored ones, so only the nodes the write changed are
    looked at."""
    if not tree or _ordered.get(id(tree)) is tree:
        return tree
    if known is not None and (tree is known or tree == known):  # (==: dicts, in C, whatever their order)
        return known
    out: Tree | None = None
    for k, v in tree.items():
        if v:
            w = ordered(v, known.get(k) if known else None)
            if w is not v:
                if out is None:
                    out = dict(tree)
                out[k] = w
    src = tree if out is None else out
    # as strings, "." comes first and fields ("f:") before the other elements ("i:", "k:",
    # "v:"): a node of fields alone (most nodes) is in order as its strings sort, in C
    keys = sorted(src)
    last = keys[-1]
    if last[0] != "f" and last != SELF:
        keys = sorted(src, key=_sort_key)
    if keys == list(src):
        return src
    return {k: src[k] for k in keys}


def remember_ordered(tree: Tree) -> Tree:
    """``ordered(tree)``, remembered as such: ``ordered`` returns it at once wherever it meets
    it again (a memo's set, shared by the objects created from one template)."""
    tree = ordered(tree)
    if tree:
        if len(_ordered) >= _ORDERED_LIMIT:  # forget the older half
            for key in list(itertools.islice(_ordered, _ORDERED_LIMIT // 2)):
                del _ordered[key]
        _ordered[id(tree)] = tree  # (held, so that its id names no other tree while here)
    return tree


_ORDERED_LIMIT = 8192
_ordered: dict[int, Tree] = {}


@functools.lru_cache(maxsize=16384)
def _sort_key(element: str) -> tuple[Any, ...]:
    """What orders ``element`` among a node's elements (``PathElement.Compare``; ``.`` first)."""
    if element == SELF:
        return (-1,)
    kind = element[:2]
    if kind == "f:":
        return (0, element)
    try:
        if kind == "k:":
            fields = orjson.loads(element[2:])
            return (1, tuple((name, _value_key(fields[name])) for name in sorted(fields)))
        if kind == "v:":
            return (2, _value_key(orjson.loads(element[2:])))
        if kind == "i:":
            return (3, int(element[2:]))
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
        pass
    return (4, element)  # (nothing valid() lets through)


def _value_key(value: Any) -> tuple[Any, ...]:
    """``value.Compare``'s order: numbers (an int and a float by value), then strings, bools,
    lists (item by item, the shorter first), maps (by their sorted keys and values), null."""
    t = type(value)
    if t is int or t is float:
        return (0, value)
    if t is str:
        return (1, value)
    if t is bool:
        return (2, value)
    if t is list:
        return (3, tuple(_value_key(v) for v in value))
    if t is dict:
        return (4, tuple((k, _value_key(value[k])) for k in sorted(value)))
    return (5,)


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
