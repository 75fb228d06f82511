"""Strategic merge patch (``application/strategic-merge-patch+json``), as kube-apiserver applies it.

A strategic merge patch is a JSON merge patch (maps merge recursively, ``null``
deletes a key) in which each field's schema says how its lists merge:

- a list without a patch strategy is replaced by the patch's list;
- a list with strategy ``merge`` and a merge key (``containers`` by ``name``,
  ``ports`` by ``containerPort``) merges item by item: a patch item updates the
  live item with the same key, or is added (see "Order" below);
- a list of scalars with strategy ``merge`` (``metadata.finalizers``) is a set
  union;
- a map with strategy ``replace`` is replaced, not merged.

Directives in the patch ask for more:

- ``{"$patch": "replace"}`` in a map replaces the map; ``"delete"`` deletes it;
  in a merging list, ``{"$patch": "replace"}`` replaces the whole list and
  ``{"name": "x", "$patch": "delete"}`` deletes the item keyed ``x``;
- ``"$deleteFromPrimitiveList/finalizers": ["a"]`` removes scalars from a list
  (any list, whatever its strategy). Naming a field that is not a list is not
  refused, as upstream's ``mergeMap`` does not refuse it: a field missing or of
  another JSON type is left alone, a map is merged as the patch's map, and a
  scalar of the directive's type is set to it; only a key without ``/<field>``
  is the 400 ``invalid patch format of primitive list``;
- ``"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]`` orders the
  resulting list (items only the server has keep their place relative to the
  others, as far as that can be decided);
- ``"$retainKeys": ["type", "rollingUpdate"]`` clears every other key of the
  live map first (``kubectl apply`` sends it for union types such as a
  Deployment's ``strategy`` and a volume's source).

The algorithm follows apimachinery's ``strategicpatch.StrategicMergeMapPatch``
with the options the API server uses (parallel deletion lists are applied, nulls
without a live counterpart are dropped). The field metadata comes from the
built-in types' OpenAPI schemas (``x-kubernetes-patch-strategy``,
``x-kubernetes-patch-merge-key``); a path the schema does not know merges maps
and replaces lists. Custom resources have no such metadata: the API server
rejects strategic merge patches for them (415) before this module is reached.

Upstream decodes the patched map into the Go type, which drops ``null`` values
and keys no field has; this module gives the same result by keeping no
``null`` and no leftover ``$`` directive key in the values a patch brings in.

Order: the patch's items keep the patch's order and the live-only items the
live order; the two are interleaved so that a live-only item stays before a
patch item the live list had after it. An item new to the list is therefore
placed before the live ones: on a Pod with containers ``[a]``, the patch
``{"spec": {"containers": [{"name": "b", "image": "y"}]}}`` gives ``[b, a]``
(``kubectl apply`` sends ``$setElementOrder`` to get the manifest's order).
A JSON merge patch would have replaced the list with ``[b]``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson

from . import schema as openapi

_J = TypeVar("_J", dict[str, Any], list[Any])  # a decoded JSON container

__all__ = [
    "FieldPatchMeta",
    "PatchSchema",
    "StrategicMergeError",
    "TypeSchema",
    "apply",
    "schema_for_kind",
]

DIRECTIVE = "$patch"
REPLACE, DELETE, MERGE = "replace", "delete", "merge"
RETAIN_KEYS = "$retainKeys"
RETAIN_KEYS_STRATEGY = "retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER = "$setElementOrder"


class StrategicMergeError(ValueError):
    """A patch the algorithm cannot apply; ``code`` is the HTTP status the API server answers with.

    Upstream answers 400 for malformed directives, 422 for lists of lists and
    500 (with no reason) for the rest, such as an unknown ``$patch`` value or a
    list item without its merge key; here those are 400 too, with upstream's
    message, since they are the client's mistake.
    """

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# Upstream's fixed messages (apimachinery mergepatch/errors.go).
BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
NO_LIST_OF_LISTS = "lists of lists are not supported"


# -- the schema the algorithm consults ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldPatchMeta:
    """How one field merges, and the schema of what it holds.

    ``schema`` is the schema of the field's value for a map, of its items for a list.
    """

    strategies: tuple[str, ...]
    merge_key: str | None
    schema: PatchSchema


class PatchSchema(Protocol):
    name: str  # the type's name, for messages ("Container")

    def field(self, name: str) -> FieldPatchMeta: ...


class TypeSchema:
    """A place in a built-in type's OpenAPI schema; ``node=None`` is a place the schema does not know."""

    def __init__(self, defs: openapi.Definitions, node: openapi.Schema | None, name: str = "") -> None:
        self.defs = defs
        self.node = node
        self.name = name

    def field(self, name: str) -> FieldPatchMeta:
        if self.node is None:
            return FieldPatchMeta((), None, TypeSchema(self.defs, None))
        node = self.defs.resolve(self.node)
        raw = (node.get("properties") or {}).get(name)
        if raw is None:
            extra = node.get("additionalProperties")
            raw = extra if isinstance(extra, dict) else None
        if raw is None:
            return FieldPatchMeta((), None, TypeSchema(self.defs, None))
        # The patch metadata sits on the property, next to a $ref to the type it holds.
        strategies = openapi.patch_strategy(raw)
        merge_key = openapi.patch_merge_key(raw)
        held: openapi.Schema | None = self.defs.resolve(raw)
        if held is not None and openapi.type_of(held) == "array":
            # a list's schema, for merging, is that of its items
            item = held.get("items")
            raw = item if isinstance(item, dict) else {}
            held = item if isinstance(item, dict) else None
        return FieldPatchMeta(strategies, merge_key, TypeSchema(self.defs, held, _type_name(raw)))


def _type_name(node: openapi.Schema) -> str:
    ref = node.get("$ref")
    return ref.rsplit(".", 1)[-1] if isinstance(ref, str) else ""


def schema_for_kind(group: str, version: str, kind: str) -> TypeSchema | None:
    """The patch schema of a built-in kind, or None for a kind the release does not have."""
    defs = openapi.definitions()
    node = defs.for_kind(group, version, kind)
    return TypeSchema(defs, node, kind) if node is not None else None


# -- applying ---------------------------------------------------------------------------------


def apply(original: dict[str, Any], patch: dict[str, Any], schema: PatchSchema) -> dict[str, Any]:
    """The object ``original`` becomes under ``patch``; neither argument is modified.

    The result shares with ``original`` the parts the patch does not reach (a status
    patch leaves the spec where it was): whoever changes the result in place must
    replace such a part, not edit it."""
    return _merge_map(_copied_for(original, patch), _json_copy(patch), schema)


def _copied_for(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``original`` with every part ``_merge_map`` may change in place under ``patch``
    copied, and the rest shared. The merge changes a map only along the patch's keys;
    a list it merges in place, so a list the patch reaches is copied whole; a directive
    (``$patch``, ``$retainKeys``, ``$setElementOrder/…``, ``$deleteFromPrimitiveList/…``)
    may touch any key of its map, so a map with one is copied whole."""
    if any(k.startswith("$") for k in patch):
        return _json_copy(original)
    copied = dict(original)
    for key, value in patch.items():
        live = copied.get(key)
        if isinstance(live, dict) and isinstance(value, dict):
            copied[key] = _copied_for(live, value)
        elif isinstance(live, list) and isinstance(value, list):
            copied[key] = _json_copy(live)
    return copied


def _json_copy(value: _J) -> _J:
    """A deep copy of decoded JSON: a round trip through orjson, several times faster than
    ``copy.deepcopy`` on objects of this size (what it cannot encode is copied the slow way)."""
    try:
        copied: _J = orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return copy.deepcopy(value)
    return copied


def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], schema: PatchSchema) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch.pop(DIRECTIVE)
        if directive == REPLACE:
            replaced: dict[str, Any] = _as_stored(patch)
            return replaced
        if directive == DELETE:
            return {}
        patch[DIRECTIVE] = directive
        raise _bad_patch_type(directive, patch)
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _apply_element_orders(original, patch, schema)
    for key, value in patch.items():
        deletion_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if deletion_list:
            key = _directive_target(key, DELETE_FROM_PRIMITIVE_LIST)
        if value is None:
            original.pop(key, None)
            continue
        if key.startswith("$"):
            continue  # no field is named so; upstream's typed decoding drops it
        if key not in original or not _same_kind(original[key], value):
            if not deletion_list:
                _set_new(original, key, value)
            elif key in original and _scalar_kind(value) is not None \
                    and _scalar_kind(original[key]) == _scalar_kind(value):
                original[key] = value  # a deletion list of a scalar field: upstream's merge sets it
            continue
        live = original[key]
        meta = schema.field(key)
        strategy = _strategy(meta.strategies)
        if isinstance(live, dict):
            original[key] = _as_stored(value) if strategy == REPLACE else _merge_map(live, value, meta.schema)
        elif isinstance(live, list):
            original[key] = _merge_list_field(live, value, meta, strategy, deletion_list)
        else:
            original[key] = value
    return original


def _same_kind(live: Any, value: Any) -> bool:
    """Whether both are maps or both are lists (only those merge; anything else is replaced)."""
    return (isinstance(live, dict) and isinstance(value, dict)) or (isinstance(live, list) and isinstance(value, list))


def _scalar_kind(value: Any) -> type | None:
    """The Go type a decoded JSON scalar has in upstream's maps (``string``, ``bool``,
    ``int64`` for a whole number, ``float64``), or None for a map, a list or null."""
    if isinstance(value, bool):
        return bool
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return int
    return type(value) if isinstance(value, (str, float)) else None


def _strategy(strategies: tuple[str, ...]) -> str:
    """The list/map strategy of a field, ``retainKeys`` aside (it only tells clients to send ``$retainKeys``)."""
    rest = [s for s in strategies if s != RETAIN_KEYS_STRATEGY]
    if len(strategies) > 2 or len(rest) > 1:
        raise StrategicMergeError(f"unexpected patch strategy: {_go(list(strategies))}")
    return rest[0] if rest else ""


def _merge_list_field(live: list[Any], value: list[Any], meta: FieldPatchMeta, strategy: str,
                      deletion_list: bool) -> list[Any]:
    if strategy == MERGE or deletion_list:
        return _merge_list(live, value, meta.schema, meta.merge_key or "", deletion_list)
    replaced: list[Any] = _as_stored(value)
    return replaced


def _merge_list(original: list[Any], patch: list[Any], schema: PatchSchema, merge_key: str,
                deletion_list: bool = False) -> list[Any]:
    if not original and not patch:
        return original
    if _element_kind(original, patch) is not dict:
        if deletion_list:
            return [v for v in original if not _within(v, patch)]
        merged = _unique(original + patch)
        in_patch, server_only = _partition(merged, patch, "")
        return _order(in_patch, server_only, patch, original, "")
    if not merge_key:
        raise StrategicMergeError(f"cannot merge lists without merge key for {schema.name}")
    live, plain = _apply_item_directives(_Slice(original), patch, merge_key)
    server_order = live.items()
    for item in plain:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        at = _find(live.items(), merge_key, item[merge_key])
        if at is None:
            new = _new_value(item)
            if new is not _DROPPED:
                live.append(new)
        else:
            live.set(at, _merge_map(live.get(at), item, schema))
    merged = live.items()
    in_patch, server_only = _partition(merged, plain, merge_key)
    return _order(in_patch, server_only, plain, server_order, merge_key)


class _Slice:
    """A Go slice over the live list, for upstream's order of a merged list.

    Upstream deletes and appends items of the live list in place: a delete
    shifts the backing array left, an append writes after the slice's end while
    the array has room (a decoded list has no spare room, so after deletions
    only). The caller's view of the live list sees those writes, and the order
    ``$setElementOrder`` gives to items only the server has is decided against
    that view; this class makes the same writes to the live Python list.
    """

    def __init__(self, backing: list[Any]) -> None:
        self.backing = backing  # shared with the caller until an append outgrows it
        self.length = len(backing)

    def items(self) -> list[Any]:
        return self.backing[:self.length]

    def get(self, i: int) -> Any:
        return self.backing[i]

    def set(self, i: int, value: Any) -> None:
        self.backing[i] = value

    def delete(self, i: int) -> None:
        # as Go's append(s[:i], s[i+1:]...): the last slot keeps its old value
        self.backing[i:self.length - 1] = self.backing[i + 1:self.length]
        self.length -= 1

    def append(self, value: Any) -> None:
        if self.length < len(self.backing):
            self.backing[self.length] = value
        else:
            self.backing = [*self.backing[:self.length], value]
        self.length += 1


def _apply_item_directives(live: _Slice, patch: list[Any], merge_key: str) -> tuple[_Slice, list[Any]]:
    """Apply the ``$patch`` items of a merging list: the live list left, and the patch's plain items."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == DELETE:
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            while (at := _find(live.items(), merge_key, item[merge_key])) is not None:
                live.delete(at)
        elif directive == REPLACE:
            replace = True
        elif directive == MERGE:
            raise StrategicMergeError("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        return _Slice([_as_stored(p) for p in plain]), []
    return live, plain


def _find(items: list[Any], merge_key: str, value: Any) -> int | None:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise StrategicMergeError(f"value for key {i} is not a map")
        if merge_key in item and _same(item[merge_key], value):
            return i
    return None


def _element_kind(*lists: list[Any]) -> type:
    """The one type of all items of the lists (upstream's ``sliceElementType``)."""
    kind: type | None = None
    for items in lists:
        for item in items:
            t = type(item)
            if kind is None:
                if t is list:
                    raise StrategicMergeError(NO_LIST_OF_LISTS, 422)
                kind = t
            elif t is not kind and not (_number(t) and _number(kind)):
                raise StrategicMergeError(f"list element types are not identical: {_go(list(lists))}")
    if kind is None:
        raise StrategicMergeError("no elements in any of the given slices")
    return kind


def _number(t: type) -> bool:
    return t is int or t is float


def _same(a: Any, b: Any) -> bool:
    """Go's ``==`` on two JSON-decoded values, as upstream compares merge keys and the items of
    primitive lists: the same type and value. A whole float is float64 and an integer int64
    (apimachinery's JSON decoding), so ``80.0`` is not ``80``; nor is ``true`` ``1`` (Python
    says both are)."""
    return a == b and type(a) is type(b)


def _within(value: Any, items: list[Any]) -> bool:
    return any(_same(value, item) for item in items)


def _unique(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if not _within(item, out):
            out.append(item)
    return out


# -- order --------------------------------------------------------------------------------------


def _key_of(item: Any, merge_key: str) -> Any:
    if merge_key:
        return item.get(merge_key) if isinstance(item, dict) else None
    return item


def _index(order: list[Any], item: Any, merge_key: str) -> int:
    wanted = _key_of(item, merge_key)
    for i, o in enumerate(order):
        if _same(_key_of(o, merge_key), wanted):
            return i
    return -1


def _partition(merged: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """Split ``merged`` into the items ``by`` names (by merge key, or by value) and the others."""
    named: list[Any] = []
    others: list[Any] = []
    for item in merged:
        if merge_key:
            if not isinstance(item, dict):
                raise _bad_arg_type({}, item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            key = item[merge_key]
            found = any(isinstance(b, dict) and merge_key in b and _same(b[merge_key], key) for b in by)
        else:
            found = _within(item, by)
        (named if found else others).append(item)
    return named, others


def _order(in_patch: list[Any], server_only: list[Any], patch_order: list[Any], server_order: list[Any],
           merge_key: str) -> list[Any]:
    """Interleave the patch's items (in ``patch_order``) with the server-only items (in ``server_order``).

    The relative order within each group is kept; a server-only item goes before
    a patch item only when the live list had it before that item.
    """
    in_patch = _sorted_by(in_patch, patch_order, merge_key)
    server_only = _sorted_by(server_only, server_order, merge_key)
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if j >= len(in_patch):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(in_patch[j])
            j += 1
        else:
            li = _index(server_order, server_only[i], merge_key)
            ri = _index(server_order, in_patch[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(in_patch[j])
                j += 1
    return out


def _sorted_by(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    if merge_key:
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise _bad_arg_type({}, item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
    deleted = [i for i in items if merge_key and i.get(DIRECTIVE) == DELETE]
    kept = [i for i in items if not (merge_key and i.get(DIRECTIVE) == DELETE)]
    positions = [_index(order, item, merge_key) for item in kept]
    missing = len(order)
    ranked = sorted(range(len(kept)), key=lambda n: positions[n] if positions[n] >= 0 else missing)
    return [kept[n] for n in ranked] + deleted


def _apply_element_orders(original: dict[str, Any], patch: dict[str, Any], schema: PatchSchema) -> None:
    """Merge each list named by a ``$setElementOrder/<field>`` directive and order it as the directive says.

    The list's own patch is consumed here (removed from ``patch``).
    """
    for directive_key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise _bad_arg_type([], order)
        key = _directive_target(directive_key, SET_ELEMENT_ORDER)
        live_raw, value_raw = original.get(key), patch.get(key)
        for raw in (live_raw, value_raw):
            if raw is not None and not isinstance(raw, list):
                raise _bad_arg_type([], raw)
        found_live, found_patch = isinstance(live_raw, list), isinstance(value_raw, list)
        live: list[Any] = live_raw if isinstance(live_raw, list) else []
        value: list[Any] = value_raw if isinstance(value_raw, list) else []
        meta = schema.field(key)
        strategy = _strategy(meta.strategies)
        merge_key = meta.merge_key or ""
        _check_order(value, order, merge_key)
        if found_live and found_patch:
            merged = _merge_list_field(live, value, meta, strategy, False)
        elif found_live:
            merged = live
        elif found_patch:
            merged = _new_value(value)
        else:
            patch.pop(key, None)
            continue
        if not live and not value:
            original[key] = merged
            patch.pop(key, None)
            continue
        in_order, server_only = _partition(merged, order, merge_key)
        kind = _element_kind(live, value)
        original[key] = _order(in_order, server_only, order, live, merge_key if kind is dict else "")
        patch.pop(key, None)


def _check_order(items: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch's list must be in the directive's order, and a subset of it (``$patch`` items aside)."""
    if not items or not order:
        return
    if merge_key:
        for item in items:
            if not isinstance(item, dict):
                raise _bad_arg_type({}, item)
        items = [i for i in items if i.get(DIRECTIVE) != DELETE]
    p = s = 0
    while p < len(items) and s < len(order):
        item = items[p]
        if isinstance(item, dict) and DIRECTIVE in item:
            p += 1
            continue
        if merge_key:
            if not isinstance(order[s], dict):
                raise _bad_arg_type({}, order[s])
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            if merge_key not in order[s]:
                raise _no_merge_key(order[s], merge_key)
            same = _same(item[merge_key], order[s][merge_key])
        else:
            same = _same(item, order[s])
        if same:
            p += 1
        s += 1
    if p < len(items) and s >= len(order):
        raise StrategicMergeError(f"The order in patch list:\n{_go(items)}\n doesn't match {SET_ELEMENT_ORDER} "
                                  f"list:\n{_go(order)}\n")


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """``$retainKeys``: clear the live map's keys the list does not name; every key the patch sets must be named."""
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise StrategicMergeError(BAD_RETAIN_KEYS)
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in retain:
            raise StrategicMergeError(BAD_RETAIN_KEYS)
    for key in [k for k in original if k not in retain]:
        del original[key]


def _directive_target(key: str, prefix: str) -> str:
    """The field a ``<prefix>/<field>`` directive key is about."""
    head, sep, field = key.partition("/")
    if not sep or head != prefix:
        raise StrategicMergeError(BAD_PRIMITIVE_LIST if prefix == DELETE_FROM_PRIMITIVE_LIST else BAD_SET_ELEMENT_ORDER)
    return field


# -- values the patch brings in ---------------------------------------------------------------

_DROPPED = object()


def _set_new(target: dict[str, Any], key: str, value: Any) -> None:
    new = _new_value(value)
    if new is _DROPPED:
        target.pop(key, None)
    else:
        target[key] = new


def _new_value(value: Any) -> Any:
    """A patch value with no live counterpart, as it is stored.

    Upstream drops ``null`` fields and every map that carries a ``$patch``
    directive (and the list item or field holding it); other directive keys
    would be dropped by its typed decoding.
    """
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return _DROPPED
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or k.startswith("$"):
                continue
            new = _new_value(v)
            if new is not _DROPPED:
                out[k] = new
        return out
    if isinstance(value, list):
        return [n for n in (_new_value(v) for v in value) if n is not _DROPPED]
    return value


def _as_stored(value: Any) -> Any:
    """A value that replaces the live one as a whole, without ``null`` fields or directive keys."""
    if isinstance(value, dict):
        return {k: _as_stored(v) for k, v in value.items() if v is not None and not k.startswith("$")}
    if isinstance(value, list):
        return [_as_stored(v) for v in value]
    return value


# -- upstream's messages ----------------------------------------------------------------------


def _go(value: Any) -> str:
    """``value`` as Go's ``%v`` prints the decoded JSON (upstream's messages embed it)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "%!s(<nil>)"


def _no_merge_key(item: dict[str, Any], merge_key: str) -> StrategicMergeError:
    return StrategicMergeError(f"map: {_go(item)} does not contain declared merge key: {merge_key}")


def _bad_patch_type(directive: Any, where: dict[str, Any]) -> StrategicMergeError:
    return StrategicMergeError(f"unknown patch type: {_go(directive)} in map: {_go(where)}")


def _bad_arg_type(expected: Any, actual: Any) -> StrategicMergeError:
    return StrategicMergeError(f"expected a {_go_type(expected)}, but received a {_go_type(actual)}")
