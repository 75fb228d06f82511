"""Walks over an object and its ``Shape``: the field sets, comparisons, merges and
removals that server-side apply is made of (structured-merge-diff's ``typed``
package, for JSON values).

- ``field_set(config)``: the fields an applied configuration sets, which its
  manager then owns. Leaves, list items and map entries are members; a struct
  field that has content is not (its content is).
- ``compare(old, new)``: what an update added, modified and removed. A node that
  appears or disappears is itself in ``added``/``removed`` (so an update that
  creates ``labels`` owns ``labels`` as well as ``labels.app``).
- ``created_set(new)``: ``compare`` against the empty object of the kind, fast,
  for creates. The empty object has ``metadata``, ``spec`` and ``status`` and, in
  the structs it has, the required fields and the structs held by value
  (``Shape.zero``), as a Go zero value would.
- ``merge(live, config)``: the configuration laid over the live object: structs
  and granular maps field by field, associative lists by key, sets by value,
  everything else replaced.
- ``remove(value, paths)``: the value without these members (what apply prunes).

A list item that cannot be identified (an associative item with none of its keys
and no default for them, a duplicate in a configuration) raises ``ShapeError``.
A stored object's list may hold an element twice: as upstream, the duplicated
items are one member as a whole (no field below them is anyone's), and an
applied item of that element replaces them all.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, NamedTuple

import orjson

from ..gostrings import quote_list
from .fieldpath import SELF, Tree, key_element, path_string, remember_ordered, set_element
from .shapes import DEDUCED, WALK_DICT, WALK_LIST, Kind, Shape

__all__ = ["Comparison", "ShapeError", "compare", "created_set", "equal", "field_set", "item_element", "merge",
           "remove"]

# The fields the empty object of every kind has (a Go zero value marshals them).
_ZERO_TOP = frozenset({"metadata", "spec", "status"})


class ShapeError(ValueError):
    """A value does not fit its shape in a way apply cannot work around."""


class Comparison(NamedTuple):
    added: Tree
    modified: Tree
    removed: Tree

    def changed(self) -> bool:
        return bool(self.added or self.modified or self.removed)


def equal(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are equal as structured-merge-diff's ``value.Equals``
    has them, and as the bytes Go writes for them compare (kube-apiserver's no-op write
    check): Python's ``==``, but a bool equals no number (``True == 1`` in Python); an int
    and a float by value (Go writes ``1.0`` as ``1``). Cheap where the two share parts by
    identity (a patch's result and the object it patched): those are not walked."""
    if a is b:
        return True
    if a != b:
        return False
    if type(a) is dict and not any(v is b[k] for k, v in a.items()):
        # nothing shared (an update's body, decoded anew): the bytes, in C, unless a whole
        # float makes them differ
        sort = orjson.OPT_SORT_KEYS
        if orjson.dumps(a, option=sort) == orjson.dumps(b, option=sort):
            return True
    return _bools_agree(a, b)


def _bools_agree(a: Any, b: Any) -> bool:
    """For ``a == b``: whether no bool of one stands where the other has a number."""
    t = type(a)
    if t is dict:
        for k, v in a.items():
            w = b[k]
            if v is w or (not v and type(v) in _CONTAINERS):  # (an empty dict or list hides no bool)
                continue
            if (type(v) in _CONTAINERS or type(v) in _NUMBERS or type(w) in _NUMBERS) and not _bools_agree(v, w):
                return False
        return True
    if t is list:
        return all(v is w or _bools_agree(v, w) for v, w in zip(a, b, strict=True))
    return (t is bool) is (type(b) is bool)


_CONTAINERS = (dict, list)
_NUMBERS = (bool, int, float)


# -- identifying list items ------------------------------------------------------------
def item_element(shape: Shape, item: Any) -> str:
    """The element naming a list item: a set's ``v:<value>``, an associative list's
    ``k:{...}`` of the key fields it has (or its schema defaults), as structured-merge-diff's
    ``keyedAssociativeListItemToPathElement`` since optional map keys (v6): an item with some
    of its keys is named by those; one with none of them (nor their defaults), or no object,
    is a ``ShapeError`` in its words."""
    if shape.kind is Kind.SET:
        return set_element(item)
    if item is None:
        raise ShapeError("associative list with keys may not have a null element")
    if not isinstance(item, dict):
        raise ShapeError("associative list with keys may not have non-map elements")
    key: dict[str, Any] = {}
    for name in shape.keys:
        if name in item:
            key[name] = item[name]
        elif name in shape.key_defaults:
            key[name] = shape.key_defaults[name]
    if not key:
        raise ShapeError(f"associative list with keys has an element that omits all key fields "
                         f"{quote_list(list(shape.keys))} (and doesn't have default values for any key fields)")
    return key_element(key)



def _index(shape: Shape, items: list[Any]) -> dict[str, Any]:
    """The items of a set or associative list by element; duplicates are an error."""
    out: dict[str, Any] = {}
    for item in items:
        element = item_element(shape, item)
        if element in out:
            raise ShapeError(f"duplicate entries for key {path_string((element,))}")
        out[element] = item
    return out


def _group(shape: Shape, items: list[Any]) -> dict[str, list[Any]]:
    """The items of a set or associative list of a stored object by element, in the order
    each element first appears. A stored object may hold an element twice (a Pod's env
    var given twice, which validation lets through): upstream types the live object
    allowing duplicates, and treats the items of a duplicated element as one atomic
    member (structured-merge-diff's "duplicate marker"); only an applied configuration
    must not have them."""
    out: dict[str, list[Any]] = {}
    for item in items:
        element = item_element(shape, item)
        group = out.get(element)
        if group is None:
            out[element] = [item]
        else:
            group.append(item)
    return out


def _granular(shape: Shape, value: Any) -> bool:
    """Whether ``value`` is walked into (rather than treated as one leaf value)."""
    t = type(value)
    return (t is dict and shape.walk == WALK_DICT) or (t is list and shape.walk == WALK_LIST)


def _child(shape: Shape, name: str) -> Shape:
    return shape.field(name) or DEDUCED


def _with_self(children: Tree) -> Tree:
    """The node with these children that is itself a member (``.`` first, as upstream writes it)."""
    return {SELF: {}, **children} if children else children


# -- field sets ------------------------------------------------------------------------
def field_set(value: dict[str, Any], shape: Shape) -> Tree:
    """The fields an applied configuration sets (structured-merge-diff's ``ToFieldSet``).

    As upstream types the configuration first, a field its struct does not declare
    (nor take as a map key or an unknown field it preserves) is a ``ShapeError``:
    ``.spec.foo: field not declared in schema``; so is an item a list cannot
    identify, with the list's path."""
    return _set_children(value, shape, ())


def _set_children(value: Any, shape: Shape, path: tuple[str, ...]) -> Tree:
    out: Tree = {}
    if isinstance(value, dict):
        for k, v in value.items():
            child = shape.field(k)
            if child is None:
                if shape.kind is Kind.STRUCT:
                    raise ShapeError(f"{path_string((*path, 'f:' + k))}: field not declared in schema")
                child = DEDUCED
            sub = _set_children(v, child, (*path, "f:" + k)) if _granular(child, v) else None
            if sub is None:
                out["f:" + k] = {}  # a leaf
            elif not sub or v is None or not shape.declares(k):
                out["f:" + k] = _with_self(sub)  # an empty struct, or a map entry: the node itself
            else:
                out["f:" + k] = sub
    else:  # a set or associative list
        elem = shape.elem
        try:
            items = _index(shape, value)
        except ShapeError as e:
            raise ShapeError(f"{path_string(path)}: {_item_error(shape, value, e)}") from None
        for element, item in items.items():
            out[element] = _with_self(_set_children(item, elem, (*path, element))) if _granular(elem, item) else {}
    return out


def _item_error(shape: Shape, items: list[Any], error: ShapeError) -> str:
    """``error`` (from indexing ``items``) as upstream words it: the position of an
    item that cannot be identified (``element 0: ...``)."""
    for i, item in enumerate(items):
        try:
            item_element(shape, item)
        except ShapeError as e:
            return f"element {i}: {e}"
    return str(error)


# One leaf shared by the sets a create makes: most nodes are leaves, and the sets
# are never mutated (fieldpath's rule), so one empty dict serves them all.
_LEAF: Tree = {}


def _all(value: Any, shape: Shape) -> Tree:
    """Every node of ``value``, itself included (what appears or disappears as a whole)."""
    if not _granular(shape, value):
        return _LEAF
    out: Tree = {SELF: _LEAF}
    _fill_all(value, shape, out)
    return out if len(out) > 1 else _LEAF


def _all_children(value: Any, shape: Shape) -> Tree:
    out: Tree = {}
    _fill_all(value, shape, out)
    return out


def _fill_all(value: Any, shape: Shape, out: Tree) -> None:
    # the hot path of creates: leaves (most nodes) take no call
    if type(value) is dict:
        for k, v in value.items():
            t = type(v)
            if t is dict or t is list:
                child = shape.field(k) or DEDUCED
                if (t is dict and child.walk == WALK_DICT) or (t is list and child.walk == WALK_LIST):
                    out["f:" + k] = _all(v, child)
                    continue
            out["f:" + k] = _LEAF
        return
    elem = shape.elem
    for element, group in _group(shape, value).items():
        if len(group) > 1:
            out[element] = _LEAF  # a duplicated element: a member as a whole, its content nobody's
            continue
        item = group[0]
        out[element] = _remembered(item, elem) if type(item) is dict and len(item) > 4 else _all(item, elem)


def _remembered(value: Any, shape: Shape, existing: bool = False) -> Tree | None:
    """``_all`` (or ``_zero_existing``) through the memo."""
    # the shape itself (its id could be reused), and a digest of the value's JSON (smaller than it)
    key = (shape, existing, hashlib.blake2b(orjson.dumps(value), digest_size=16).digest())
    if key in _memo:
        return _memo[key]
    got = _zero_existing(value, shape) if existing else _all(value, shape)
    if got:
        got = remember_ordered(got)  # (in the order it is written in, once)
    if len(_memo) >= _MEMO_LIMIT:  # forget the older half
        for old in list(itertools.islice(_memo, _MEMO_LIMIT // 2)):
            del _memo[old]
    _memo[key] = got
    return got


def created_set(value: dict[str, Any], shape: Shape) -> Tree:
    """``compare(empty object, value).added | .modified``: what a create sets."""
    return _created(value, shape, memo=True)


# Objects are created in batches of one shape (the replicas of a template) and
# share parts (sidecar containers), so the set of a top-level field other than
# metadata, and of a large list item, is remembered by a digest of its JSON: the
# walk costs ~50 times the lookup. 8192 sets of podgen pods take about 20 MB.
# The sets are shared, hence never mutated (fieldpath's rule).
_MEMO_LIMIT = 8192
_memo: dict[tuple[Shape, bool, bytes], Tree | None] = {}


def _created(value: dict[str, Any], shape: Shape, memo: bool = False) -> Tree:
    out: Tree = {}
    zero = shape.zero
    for k, v in value.items():
        child = _child(shape, k)
        existing = k in _ZERO_TOP or k in zero
        if memo and k != "metadata" and _granular(child, v):
            node = _remembered(v, child, existing)
        else:
            node = _zero_existing(v, child) if existing else _all(v, child)
        if node is not None:
            out["f:" + k] = node
    return out


def _zero_existing(value: Any, shape: Shape) -> Tree | None:
    """The set of ``value`` at a node the empty object already has (as ``{}`` or null);
    None if that is all it is."""
    if not _granular(shape, value):
        return None if value is None else {}
    if isinstance(value, dict) and shape.kind is Kind.STRUCT:
        children = _created(value, shape)
    else:
        children = _all_children(value, shape)
    return children or None


# -- comparison ------------------------------------------------------------------------
def compare(old: dict[str, Any], new: dict[str, Any], shape: Shape) -> Comparison:
    added: Tree = {}
    modified: Tree = {}
    removed: Tree = {}
    # every object has metadata, spec and status, if only empty (Go zero values)
    missing_old = [k for k in _ZERO_TOP if k in new and k not in old]
    missing_new = [k for k in _ZERO_TOP if k in old and k not in new]
    if missing_old:
        old = {**old, **{k: {} for k in missing_old}}
    if missing_new:
        new = {**new, **{k: {} for k in missing_new}}
    _compare_children(old, new, shape, added, modified, removed)
    return Comparison(added, modified, removed)


def _compare_children(old: Any, new: Any, shape: Shape, added: Tree, modified: Tree, removed: Tree) -> None:
    if isinstance(new, dict):
        for k, v in new.items():
            element = "f:" + k
            child = _child(shape, k)
            if k in old:
                _compare_node(element, old[k], v, child, added, modified, removed)
            elif type(v) is dict and k in shape.zero:  # absent is Go's zero value there: {}
                _compare_node(element, {}, v, child, added, modified, removed)
            else:
                added[element] = _all(v, child)
        for k, v in old.items():
            if k in new:
                continue
            if type(v) is dict and k in shape.zero:
                _compare_node("f:" + k, v, {}, _child(shape, k), added, modified, removed)
            else:
                removed["f:" + k] = _all(v, _child(shape, k))
        return
    elem = shape.elem
    old_items, new_items = _group(shape, old), _group(shape, new)
    for element, group in new_items.items():
        before = old_items.get(element)
        if before is None:
            if len(group) > 1:
                added[element] = {}  # new duplicates: the duplicate marker
            else:
                added[element] = _all(group[0], elem) if _granular(elem, group[0]) else {}
        elif len(before) == 1 and len(group) == 1:
            _compare_node(element, before[0], group[0], elem, added, modified, removed)
        elif len(before) > 1 and len(group) > 1:  # duplicates before and after: compared as a whole
            if before != group:
                modified[element] = {}
        elif len(before) > 1:  # duplicates no more: the item is new, the marker goes
            added[element] = _all(group[0], elem) if _granular(elem, group[0]) else {}
            removed[element] = {}
        else:  # new duplicates: the item's content goes, the marker comes
            removed[element] = _all(before[0], elem) if _granular(elem, before[0]) else {}
            added[element] = {}
    for element, group in old_items.items():
        if element not in new_items:
            removed[element] = _all(group[0], elem) if len(group) == 1 and _granular(elem, group[0]) else {}


def _compare_node(element: str, old: Any, new: Any, shape: Shape,
                  added: Tree, modified: Tree, removed: Tree) -> None:
    if old is new:
        return
    if _granular(shape, new) and _granular(shape, old) and type(old) is type(new):
        a: Tree = {}
        m: Tree = {}
        r: Tree = {}
        _compare_children(old, new, shape, a, m, r)
        if a:
            added[element] = a
        if m:
            modified[element] = m
        if r:
            removed[element] = r
    elif _granular(shape, new):  # from null (or another type) to a structure: its content is added
        children = _all_children(new, shape)
        if children:
            added[element] = children
        else:
            modified[element] = {}
    elif old != new or (type(old) is bool) is not (type(new) is bool):
        modified[element] = {}  # (structured-merge-diff's value.Equals: true is not 1, 1.0 is 1)


# -- merging and removing --------------------------------------------------------------
def merge(live: Any, config: Any, shape: Shape) -> Any:
    """``config`` laid over ``live`` (neither is changed; unchanged parts are shared).

    A null in the configuration removes the field (Go types have no null fields)."""
    if not _granular(shape, config):
        return config
    if isinstance(config, dict):
        out = dict(live) if isinstance(live, dict) else {}
        for k, v in config.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(out.get(k), v, _child(shape, k))
        return out
    return _merge_list(live if isinstance(live, list) else [], config, shape)


def _merge_list(live: list[Any], config: list[Any], shape: Shape) -> list[Any]:
    """The live items and the configuration's, in structured-merge-diff's order
    (``typed/merge.go``, ``visitListItems``): both lists are walked together; an item
    both have is merged where the two meet, the shared items coming in the
    configuration's order (a live one met before its turn waits for it); a live-only
    item keeps its place among the live items around it, a configuration-only one
    among the configuration's::

        live [a, b, c, d] + configuration [d, e, f, a]  ->  [b, c, d, e, f, a]
        live [c, d, a] + configuration [a, b, c]         ->  [d, a, b, c]
    """
    elem = shape.elem
    config_items = _index(shape, config)
    rhs = list(config_items)
    lhs = [item_element(shape, item) for item in live]
    live_items: dict[str, Any] = {}
    for element, item in zip(lhs, live, strict=True):
        # a duplicated live element is not merged: the configuration's item replaces all of them
        live_items[element] = None if element in live_items else item
    shared = [e for e in rhs if e in live_items]  # in the configuration's order
    turn = 0  # shared[turn] is the shared item whose turn it is
    merged: set[str] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs) or ri < len(rhs):
        if li < len(lhs) and ri < len(rhs):
            element = lhs[li]
            if element == rhs[ri]:
                merged.add(element)
                out.append(merge(live_items[element], config_items[element], elem))
                li += 1
                ri += 1
                turn += 1
                continue
            if element in config_items and turn < len(shared) and shared[turn] != element:
                li += 1  # a shared item before its turn: placed when the configuration reaches it
                continue
        if li < len(lhs):
            element = lhs[li]
            if element not in config_items:
                out.append(live[li])  # (each of a duplicated element the configuration leaves alone)
                li += 1
                continue
            if element in merged:
                li += 1
        if ri < len(rhs):
            element = rhs[ri]
            merged.add(element)
            out.append(merge(live_items.get(element), config_items[element], elem))
            ri += 1
            if turn < len(shared) and shared[turn] == element:
                turn += 1
    return out


def remove(value: Any, tree: Tree, shape: Shape) -> Any:
    """``value`` without the members of ``tree``; a struct, map or list that this
    empties goes too (as an empty ``omitempty`` field would)."""
    if not tree or not _granular(shape, value):
        return value
    if isinstance(value, dict):
        out = dict(value)
        for element, node in tree.items():
            if element == SELF or not element.startswith("f:"):
                continue
            k = element[2:]
            if k not in out:
                continue
            if not node or SELF in node:
                del out[k]
                continue
            before = out[k]
            after = remove(before, node, _child(shape, k))
            if after is not before and isinstance(after, dict | list) and not after:
                del out[k]
            else:
                out[k] = after
        return out
    elem = shape.elem
    items: list[Any] = []
    for item in value:
        node = tree.get(item_element(shape, item))
        if node is None:
            items.append(item)
        elif node and SELF not in node:
            after = remove(item, node, elem)
            items.append(after)
    return items
