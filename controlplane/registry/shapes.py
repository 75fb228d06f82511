"""The structure of a kind as server-side apply sees it: which nodes are structs,
maps, lists (atomic, set, or associative by key), and which are leaves.

This is the view structured-merge-diff derives from a type's OpenAPI schema:

- ``x-kubernetes-map-type: atomic`` (or ``x-kubernetes-list-type: atomic``, the
  default for lists) makes a node a leaf: it is owned, merged and compared as
  one value;
- ``x-kubernetes-list-type: map`` with ``x-kubernetes-list-map-keys``, or the
  older ``x-kubernetes-patch-strategy: merge`` with a patch merge key, makes an
  associative list whose items are identified by their keys; ``set`` (or merge
  without a key) a list of unique scalars;
- a schema with neither properties nor a type (``RawExtension``, unknown
  custom resources) is *deduced* from the value: objects are granular maps,
  lists atomic.

Shapes are built lazily, once per schema node, and cached: the walkers of
``typed`` only do dict lookups on the hot path.

Custom resources plug in with ``register(group, version, kind, schema)`` (a
CRD's ``openAPIV3Schema``); kinds with no schema get a deduced shape. Either way
``metadata`` is ObjectMeta's.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable
from typing import Any

from . import schema as builtin

__all__ = ["DEDUCED", "WALK_DICT", "WALK_LIST", "Kind", "Shape", "custom_shape", "register", "shape_for",
           "unregister"]

Schema = dict[str, Any]
Resolver = Callable[[Schema], Schema]


class _Builder:
    """Builds shapes for one family of schemas: how to follow ``$ref``, and a cache of
    the shapes already built, by schema node. The nodes must outlive the builder
    (the cache is keyed by their identity). ``value_structs``: the fields of a struct
    node that are Go structs held by value (see ``Shape.zero``), none for schemas
    without Go types (custom resources)."""

    def __init__(self, resolve: Resolver,
                 value_structs: Callable[[Schema], frozenset[str]] | None = None) -> None:
        self.resolve = resolve
        self.value_structs = value_structs
        self.cache: dict[int, Shape] = {}

    def build(self, node: Schema) -> Shape:
        cached = self.cache.get(id(node))
        if cached is not None:
            return cached
        shape = _classify(node, self)
        self.cache[id(node)] = shape
        return shape

# Key fields that upstream's schemas default (structured-merge-diff fills a missing
# key from the schema's default; the published schemas do not all carry it).
KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


class Kind(enum.Enum):
    LEAF = "leaf"          # scalar, or atomic map/list: one value
    STRUCT = "struct"      # named fields (maybe also extra keys, by ``elem``)
    MAP = "map"            # granular map: every key has ``elem``
    SET = "set"            # list of unique scalars, items are ``v:<value>``
    ASSOCIATIVE = "assoc"  # list of objects identified by ``keys``, items are ``k:{...}``
    DEDUCED = "deduced"    # no schema: maps granular, lists atomic, by the value


WALK_DICT, WALK_LIST = 1, 2


class Shape:
    """One schema node's structure. ``field(name)`` is the shape of a struct field
    or map value; ``elem`` the shape of list items or map values."""

    __slots__ = ("_builder", "_elem", "_fields", "_node", "key_defaults", "keys", "kind", "walk", "zero")

    def __init__(self, kind: Kind, node: Schema | None = None, builder: _Builder | None = None,
                 keys: tuple[str, ...] = (), key_defaults: dict[str, Any] | None = None) -> None:
        self.kind = kind
        # what the walkers descend into: dicts (WALK_DICT), lists (WALK_LIST), or nothing
        self.walk = WALK_DICT if kind in (Kind.STRUCT, Kind.MAP, Kind.DEDUCED) else \
            WALK_LIST if kind in (Kind.SET, Kind.ASSOCIATIVE) else 0
        self.keys = keys
        self.key_defaults = key_defaults or {}
        self._node = node
        self._builder = builder
        self._fields: dict[str, Shape] = {}
        self._elem: Shape | None = None
        # the fields the Go zero value of this struct has, as the create's "before" (upstream's
        # field manager compares a create with the empty object of its type): the required ones
        # (no ``omitempty``) and the structs held by value, which even ``omitempty`` writes as
        # ``{}`` (Event.source, DeploymentSpec.strategy). A set written over one of them does
        # not own the field itself (``.``), only what it sets inside.
        self.zero: frozenset[str] = frozenset(node.get("required", ())) if node else frozenset()
        if node and builder is not None and builder.value_structs is not None and kind is Kind.STRUCT:
            self.zero |= builder.value_structs(node)

    def field(self, name: str) -> Shape | None:
        """A struct field's shape (None if the struct has no such field), or a map value's."""
        got = self._fields.get(name)
        if got is not None:
            return got
        if self.kind is Kind.DEDUCED:
            return DEDUCED
        node, builder = self._node, self._builder
        if node is None or builder is None:
            return None
        props = node.get("properties")
        if isinstance(props, dict) and name in props:
            got = builder.build(builder.resolve(props[name]))
            self._fields[name] = got
            return got
        if self.kind is Kind.MAP or "additionalProperties" in node:
            return self.elem
        if node.get("x-kubernetes-preserve-unknown-fields") or (
                name in _EMBEDDED and node.get("x-kubernetes-embedded-resource")):
            return DEDUCED  # what the schema does not describe is kept, and deduced
        return None

    def declares(self, name: str) -> bool:
        """Whether ``name`` is a declared field (not a map key) of this struct."""
        props = self._node.get("properties") if self._node else None
        return isinstance(props, dict) and name in props

    @property
    def elem(self) -> Shape:
        if self._elem is None:
            node, builder = self._node, self._builder
            raw = None
            if node is not None:
                raw = node.get("items") if self.kind in (Kind.SET, Kind.ASSOCIATIVE) else \
                    node.get("additionalProperties")
            self._elem = builder.build(builder.resolve(raw)) if isinstance(raw, dict) and builder else DEDUCED
        return self._elem

    def __repr__(self) -> str:
        return f"Shape({self.kind.value}{', keys=' + repr(self.keys) if self.keys else ''})"


DEDUCED = Shape(Kind.DEDUCED)
# what an ``x-kubernetes-embedded-resource`` object has whether its schema says so or not
_EMBEDDED = frozenset({"apiVersion", "kind", "metadata"})
_LEAF = Shape(Kind.LEAF)


def _type(node: Schema) -> str | None:
    t = builtin.type_of(node)
    if t is None and node.get("x-kubernetes-int-or-string"):
        return "string"
    return t


def _classify(node: Schema, builder: _Builder) -> Shape:
    resolve = builder.resolve
    if "allOf" in node and len(node["allOf"]) == 1 and isinstance(node["allOf"][0], dict):
        return builder.build(resolve(node["allOf"][0]))
    t = _type(node)
    if node.get("x-kubernetes-map-type") == "atomic":
        return _LEAF
    if t == "array":
        list_type = node.get("x-kubernetes-list-type")
        if list_type is None and "merge" in builtin.patch_strategy(node):
            key = builtin.patch_merge_key(node)
            list_type, keys = ("map", (key,)) if key else ("set", ())
        else:
            keys = tuple(node.get("x-kubernetes-list-map-keys") or ())
        if list_type == "map" and keys:
            items = node.get("items")
            defaults = dict(KEY_DEFAULTS)
            if isinstance(items, dict):
                props = resolve(items).get("properties") or {}
                defaults.update({k: props[k]["default"] for k in keys
                                 if isinstance(props.get(k), dict) and "default" in props[k]})
            return Shape(Kind.ASSOCIATIVE, node, builder, keys, {k: v for k, v in defaults.items() if k in keys})
        if list_type == "set":
            return Shape(Kind.SET, node, builder)
        return _LEAF
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        return DEDUCED
    if t == "object" or "properties" in node or "additionalProperties" in node:
        if isinstance(node.get("properties"), dict):
            return Shape(Kind.STRUCT, node, builder)
        if isinstance(node.get("additionalProperties"), dict):
            return Shape(Kind.MAP, node, builder)
        return DEDUCED
    if t is None and not node.get("oneOf") and not node.get("anyOf"):
        return DEDUCED
    return _LEAF


_registered: dict[tuple[str, str, str], Shape] = {}


def register(group: str, version: str, kind: str, openapi_schema: Schema) -> None:
    """Serve ``kind`` with this schema (a CRD version's ``openAPIV3Schema``, no ``$ref``s)."""
    _registered[(group, version, kind)] = _custom(openapi_schema)


def _custom(openapi_schema: Schema) -> Shape:
    """A custom resource's shape: its schema, but always a struct whose ``metadata`` is
    ObjectMeta (a CRD says only ``type: object`` there; the server knows better)."""
    root = {**openapi_schema, "type": "object",
            "properties": {**(openapi_schema.get("properties") or {}), "metadata": {"type": "object"}}}
    shape = _Builder(_no_refs).build(root)
    meta = builtin.definitions().defs.get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    if meta is not None:
        shape._fields["metadata"] = _builtins().build(meta)
    return shape


# The shapes of the served custom resource versions, by their schema (which the entry keeps
# alive, so its id is not reused while it is here): a CRD's types are rebuilt, with new
# schema objects, when its spec changes.
_CUSTOM_LIMIT = 512
_customs: dict[int, tuple[Schema, Shape]] = {}


def custom_shape(openapi_schema: Schema) -> Shape:
    """The shape of a custom resource version served with this ``openAPIV3Schema`` (its
    list types, map types and key defaults, as upstream's field manager reads the CRD)."""
    got = _customs.get(id(openapi_schema))
    if got is not None and got[0] is openapi_schema:
        return got[1]
    shape = _custom(openapi_schema)
    if len(_customs) >= _CUSTOM_LIMIT:  # forget the older half
        for old in list(itertools.islice(_customs, _CUSTOM_LIMIT // 2)):
            del _customs[old]
    _customs[id(openapi_schema)] = (openapi_schema, shape)
    return shape


def unregister(group: str, version: str, kind: str) -> None:
    _registered.pop((group, version, kind), None)


def _no_refs(node: Schema) -> Schema:
    return node


def shape_for(group: str, version: str, kind: str) -> Shape:
    """The shape of a served kind: its registered schema, the built-in one, or deduced."""
    shape = _registered.get((group, version, kind))
    if shape is not None:
        return shape
    return _builtin_shape(group, version, kind)


@functools.cache
def _builtin_shape(group: str, version: str, kind: str) -> Shape:
    """The shape of a kind without a registered schema. Kept per kind: the built-in
    definitions are loaded once and never change, and ``_builtins`` builds one shape
    per definition node, so every call would return this very shape (every write asks)."""
    node = builtin.definitions().for_kind(group, version, kind)
    return _schemaless() if node is None else _builtins().build(node)


@functools.cache
def _schemaless() -> Shape:
    """A kind nobody described: ObjectMeta, and the rest deduced."""
    return _custom({"x-kubernetes-preserve-unknown-fields": True})


@functools.cache
def _builtins() -> _Builder:
    return _Builder(builtin.definitions().resolve, _value_structs)


# The messages whose JSON is no object (a Time's zero is null): never an empty struct
_NOT_OBJECTS = frozenset({
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time", "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration", "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.runtime.RawExtension", "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString"})


@functools.cache
def _definition_names() -> dict[int, str]:
    return {id(node): name for name, node in builtin.definitions().defs.items()}


def _value_structs(node: Schema) -> frozenset[str]:
    """The fields of a built-in definition that are Go structs held by value (not pointers,
    lists or maps), from the Go types the protobuf wire schema records
    (``io.k8s.api.core.v1.Event`` is the message ``k8s.io.api.core.v1.Event``)."""
    from ..api.protobuf.schema import MESSAGES

    name = _definition_names().get(id(node))
    if name is None or not name.startswith("io.k8s."):
        return frozenset()
    fields = MESSAGES.get("k8s.io." + name[len("io.k8s."):])
    if not fields:
        return frozenset()
    return frozenset(json_name for _, json_name, type_, repeated, pointer in fields
                     if json_name and isinstance(type_, str) and len(type_) > 1 and not repeated and not pointer
                     and type_ not in _NOT_OBJECTS)
