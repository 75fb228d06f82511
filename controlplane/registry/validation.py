"""Field validation against the types' schemas: unknown, duplicate and missing required fields.

kube-apiserver decodes a request body into the Go struct of its kind. Fields the
struct does not have are *unknown*: with ``fieldValidation=Strict`` the request
fails, with ``Warn`` (the default) it succeeds with a warning, with ``Ignore``
silently; in every case the field is dropped, since the struct cannot hold it.
A key given twice in one JSON object is a *duplicate* (the last value wins).
Fields whose Go type has no ``omitempty`` appear in the schema's ``required``
list; a missing one is a 422 ``FieldValueRequired``. A value of another JSON type
than its field's (a string for an int, an object for a list) cannot be decoded at
all: a 400 whatever the directive.

This module answers those questions for a decoded object, given a compiled
schema (``Shape``)::

    shape = shape_of("", "v1", "Pod")           # None for a kind without a schema
    found = shape.check(pod, prune=True)         # unknown fields removed from ``pod``
    found.problems   # ['unknown field "spec.foo"']   in document order
    found.missing    # ['spec.containers[0].name']
    found.mismatched # [('metadata.name', 'number', 'string')]

Duplicates cannot be seen in a decoded dict. ``may_have_duplicates(body, keys)``
compares the number of object keys in the raw JSON (``key_tokens``, a few byte
scans) with the number the decoded tree holds (``found.keys``); only when they
differ is the body parsed again, slowly, by ``decode_with_duplicates``, and
checked once more.

Paths are written as upstream's strict decoder writes them: ``spec.containers[0].name``;
a map's key is a path segment (``spec.nodeSelector.zone``).

A mismatch is worded by whichever of upstream's decoders meets it: ``go_type_error`` as
Go's JSON decoder (a create, an update, a JSON or merge patch's result: ``Go struct field
DeploymentSpec.spec.replicas of type int32``), ``converter_error`` as apimachinery's
unstructured converter (a strategic merge patch's result: ``unrecognized type: int32``).
Both read the Go types off the compiled schema (``Shape.go_type``, ``Shape.struct``).

Required fields are not enforced under the top-level ``status`` (the system
writes it, and kube-apiserver's status validation is hand-written and lenient),
nor for integer, number and boolean fields, whose Go zero value is valid and
which upstream accepts when absent (e.g. ``PriorityClass.value``).

A field that is not enforced is still never *absent* once upstream has decoded the
object: a Go field without ``omitempty`` is always written back, as its zero value
when the request left it out. ``Shape.zeros`` lists those scalar fields of a built-in
struct (its schema's ``required`` strings, integers and booleans, which openapi-gen
derives from the missing ``omitempty``, checked against k8s.io/api's tags: see
``_OMITTED``, ``_ALSO_WRITTEN``); the walk notes the dicts that lack one
(``Findings.unfilled``) and ``fill_zeros`` gives them the zero value, so that a status
patch of ``{"containerStatuses": [{}]}`` stores ``name: ""``, ``ready: false``,
``restartCount: 0``, ``image: ""``, ``imageID: ""`` as kube-apiserver does (and the typed
clients, which require them, can read the pod back). A plain ``metav1.Time`` field is a
struct, which ``omitempty`` does not omit: ``Shape.null_fields`` lists those of a struct
(``_NULL_TIMES``), filled with null when absent (a pod condition's ``lastProbeTime: null``),
their nulls kept where other nulls of a struct's fields are dropped.

Empty lists and maps are stored as upstream stores them: as protobuf, where an empty repeated
field or map is nothing, decoded back into a nil slice or map. A list or map field of a
built-in struct sent empty (``args: []``, ``tolerations: []``, ``labels: {}``) is left out, as
``omitempty`` writes a nil one, or, for the few fields without ``omitempty`` (``_NIL_WRITTEN``:
a Role's ``rules``, an EndpointSlice's ``endpoints``), null; those are ``Shape.null_fields``
too, null when absent. The walk notes the empty ones (``Findings.emptied``);
``empty_collections`` settles them. An empty struct (``emptyDir: {}``, ``resources: {}``) is
a value, kept. Zero scalars go as Go's decoding and encoding make them go: a non-pointer
``omitempty`` field holding its zero value (``hostNetwork: false``, ``hostname: ""``, a
condition's ``reason: ""``, ``minReadySeconds: 0``: ``Shape.omit_zero``, ``_OMIT_ZERO_TEXT``)
is left out, noted by the walk with the empty lists; a pointer's (``replicas: 0``,
``automountServiceAccountToken: false``) is a value, kept.

Upstream's admission sees the object decoded from the request's JSON, not yet stored: the
webhooks get it encoded by Go's JSON encoder, the admission policies' CEL as the unstructured
converter makes it, both of which leave an empty ``omitempty`` list (and a zero ``omitempty``
scalar) out but write an empty non-nil one without ``omitempty`` as ``[]`` (``rules: []``). So
the decoding drops only the ``omitempty`` ones (``empty_collections(..., decoded=True)``); the
others are ``[]`` through admission and the strategy, and null once about to be stored
(``stored_form``), as is every such list a strategy made and every empty list a mutating
policy or webhook made.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..gonumbers import go_int, written_back
from ..quantity import QuantityError, canonical_quantity, parse_quantity
from .schema import Definitions, Schema, definitions, type_of

__all__ = [
    "Findings",
    "parse_micro_time",
    "parse_time",
    "Shape",
    "compile_schema",
    "convert_numbers",
    "decode_with_duplicates",
    "key_tokens",
    "may_have_duplicates",
    "metadata_shape",
    "register_schema",
    "shape_of",
    "empty_collections",
    "fill_zeros",
    "same_once_stored",
    "shape_at",
    "stored_form",
    "zero_nulls",
]

# Object schemas whose values are arbitrary JSON in the Go types (json.RawMessage,
# runtime.RawExtension and the like): nothing under them is unknown.
_OPAQUE = frozenset({
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
})
# Required fields of these JSON types are satisfied by the Go zero value.
_ZERO_VALUE_OK = frozenset({"integer", "number", "boolean"})


# The Python types orjson decodes each JSON type to, and None (null is an absent value);
# bool is not an integer here, nor is 1.0: Go's decoder refuses both for an int field.
_NONE = type(None)
_ANY_TYPE: tuple[type, ...] = (str, int, float, bool, dict, list, _NONE)
_ACCEPTS: dict[str, tuple[type, ...]] = {"object": (dict, _NONE), "array": (list, _NONE), "string": (str, _NONE),
                                         "integer": (int, _NONE), "number": (int, float, _NONE),
                                         "boolean": (bool, _NONE)}


class Shape:
    """A schema compiled for the walk: what keys an object may have, what its items are.

    ``fields`` is None for a node that accepts anything (scalars, opaque objects,
    ``x-kubernetes-preserve-unknown-fields``); ``values`` is the schema of every
    value of a map (``additionalProperties``); ``items`` of every item of a list.
    ``expect`` is the JSON type a value must have ("object", "array", "string",
    "integer", "number", "boolean"), or None for any: a value of another type
    cannot be decoded into the Go field (a 400 whatever ``fieldValidation``).
    """

    __slots__ = ("accepts", "bound", "collections", "empty_missing", "expect", "fields", "go_type", "items",
                 "nil_plan", "nil_values", "null_fields", "null_fill", "omit_zero", "parse", "required", "struct",
                 "values", "zeros")

    def __init__(self) -> None:
        self.fields: dict[str, Shape] | None = None
        self.values: Shape | None = None
        self.items: Shape | None = None
        self.required: tuple[str, ...] = ()
        self.expect: str | None = None
        self.accepts: tuple[type, ...] = _ANY_TYPE  # the Python types of ``expect``, and None
        # for a scalar Go decodes with its own parser (a Time, a Quantity): why a value is
        # not one (Go's decoding error), or None
        # (or, as a ``Rewrite``, the form Go writes it back in: Times in UTC)
        self.parse: Callable[[Any], str | None] | None = None
        # for an integer of a sized Go type (its schema's format), the bound a value must be
        # under in magnitude (1 << 31 for an int32): a number past it cannot be decoded; or 0
        self.bound = 0
        # the scalar fields Go always writes (no ``omitempty``) and their zero values, for a
        # struct of a built-in type: ``fill_zeros``
        self.zeros: tuple[tuple[str, Any], ...] = ()
        # the fields of such a struct that Go writes as null when zero: its Time fields (a
        # struct, which ``omitempty`` does not omit: ``_NULL_TIMES``) and its lists and maps
        # without ``omitempty`` (``_NIL_WRITTEN``); ``fill_zeros``, ``empty_collections``
        self.null_fields: tuple[str, ...] = ()
        self.null_fill: tuple[tuple[str, None], ...] = ()  # (each of them, None): for ``fill_zeros``
        # the list and map fields of such a struct: empty, they are nil once stored
        # (``Findings.emptied``, ``empty_collections``)
        self.collections: frozenset[str] = frozenset()
        # its scalar fields Go leaves out when zero (``omitempty``, not pointers: ``_OMIT_ZERO``):
        # ``""``, ``false``, ``0``, sent, are gone once decoded (``Findings.emptied``)
        self.omit_zero: frozenset[str] = frozenset()
        # the required ones of those that are missing when empty too (``_EMPTY_REQUIRED``)
        self.empty_missing: frozenset[str] = frozenset()
        # of such a struct, once ``stored_form`` asked: its list and map fields without
        # ``omitempty`` (``_NIL_WRITTEN``), and the fields under which another such struct
        # has some (``_nil_plan``)
        self.nil_plan: NilPlan | None = None
        # of a map field of a built-in struct whose values are lists (a CSR's ``spec.extra``, a
        # ``map[string]ExtraValue``): an empty one is nil once stored, written null, as protobuf
        # has no empty repeated field (``Findings.emptied``, ``stored_form``)
        self.nil_values = False
        # of a built-in type: the Go type Go's decoder names in its errors (``int32``,
        # ``[]v1.Container``, ``map[string]string``), and a struct's type name (``PodSpec``)
        self.go_type = ""
        self.struct = ""

    def check(self, obj: dict[str, Any], prune: bool = False,
              duplicates: dict[int, list[str]] | None = None, count_keys: bool = True,
              known: dict[str, Any] | None = None) -> Findings:
        """Walk ``obj``; with ``prune``, remove the unknown fields from it (in place).

        ``duplicates`` (from ``decode_with_duplicates``) maps ``id()`` of a decoded
        dict to the keys it had more than once. Without ``count_keys`` (no body to
        compare with: a patch's result), ``found.keys`` is not counted: the keys of
        the subtrees no schema describes (every managedFields entry's ``fieldsV1``)
        are not walked for it.

        ``known``: the stored object ``obj`` was made from (a patch's base). A subtree
        equal to its counterpart there (same key, same list position) is not walked:
        it was checked when it was stored. Keys are not counted then."""
        found = Findings()
        found.keys = _walk(self, obj, [], found, prune, duplicates, True, True, count_keys and known is None,
                           known)
        return found


@dataclass(slots=True)
class Findings:
    problems: list[str] = field(default_factory=list)   # 'unknown field "a.b"', 'duplicate field "a.c"'
    mismatched: list[tuple[str, str, str]] = field(default_factory=list)  # (path, JSON type given, Go type)
    missing: list[str] = field(default_factory=list)    # paths of missing required fields
    malformed: list[str] = field(default_factory=list)  # decoding errors of Times and Quantities
    keys: int = 0                                        # object keys in the decoded tree (if counted)
    # the nulls met where the schema has a type: (the dict or list holding one, its key or
    # index, the Shape of its value, or None for a field of a struct); see ``zero_nulls``
    nulls: list[tuple[Any, Any, Shape | None]] = field(default_factory=list)
    # the structs that lack a field Go always writes: (the dict, its Shape's ``zeros``);
    # see ``fill_zeros``
    unfilled: list[tuple[dict[str, Any], tuple[tuple[str, Any], ...]]] = field(default_factory=list)
    # the empty lists and maps of a built-in struct's fields, and its zero scalars Go leaves out
    # (``Shape.omit_zero``): (the dict, the key, whether Go writes the field as null, else leaves
    # it out); see ``empty_collections``
    emptied: list[tuple[dict[str, Any], str, bool]] = field(default_factory=list)
    # the numbers Go's decoder refuses where apimachinery's unstructured converter may take
    # them (a float for an integer or an IntOrString, an integer past its Go type): (the dict
    # or list holding one, its key or index, the Shape of its value); see ``convert_numbers``
    numbers: list[tuple[Any, Any, Shape]] = field(default_factory=list)


def _path(stack: list[str], last: str | None = None) -> str:
    parts = [*stack, last] if last is not None else stack
    out = ""
    for p in parts:
        out += p if (p.startswith("[") or not out) else "." + p
    return out


def _walk(shape: Shape, value: Any, stack: list[str], found: Findings, prune: bool,
          duplicates: dict[int, list[str]] | None, required: bool, top: bool = False, count: bool = True,
          known: Any = None) -> int:
    """Check ``value`` against ``shape``; returns the number of object keys under it
    (only those of the nodes a schema describes, unless ``count``). ``known``: the
    stored counterpart of ``value`` (``Shape.check``), whose equal children are skipped.

    The hot path of every write: one dict lookup per key, recursion only into
    dicts and lists, paths built only for a problem."""
    if type(value) is dict:
        keys = len(value)
        if shape.expect is not None and shape.expect != "object":
            found.mismatched.append((_path(stack), "object", _GO_TYPE[shape.expect]))
            return keys + _count_values(value) if count else keys
        fields = shape.fields
        if fields is None:
            values = shape.values
            if values is None:
                if shape.parse is not None:  # an object for a scalar of any JSON type (a Quantity)
                    found.malformed.append(str(shape.parse(value)))
                return keys + _count_values(value) if count else keys
            dups = duplicates.get(id(value)) if duplicates else None
            accepts = values.accepts
            known_map = known if type(known) is dict else None
            for k, v in value.items():
                if dups and k in dups:
                    found.problems.append(f'duplicate field "{_path(stack, k)}"')
                t = type(v)
                if t is dict or t is list:
                    if not v and shape.nil_values and t in accepts:  # ({k: []}: null once stored)
                        found.emptied.append((value, k, True))
                        continue
                    was = known_map.get(k) if known_map is not None else None
                    if was is not None and _as_stored(was, v):
                        continue  # as stored
                    stack.append(k)
                    keys += _walk(values, v, stack, found, prune, duplicates, required, False, count, was)
                    stack.pop()
                elif t not in accepts:
                    _mismatch(values, value, k, v, _path(stack, k), found)
                elif t is _NONE:
                    found.nulls.append((value, k, values))
                elif values.parse is not None:
                    _parse(values, value, k, v, found)
                elif t is int and values.bound and not -values.bound <= v < values.bound:
                    _bounded(values, value, k, v, _path(stack, k), found)
            return keys
        dups = duplicates.get(id(value)) if duplicates else None
        unknown: list[str] | None = None
        known_obj = known if type(known) is dict else None
        for k, v in value.items():
            sub = fields.get(k)
            if sub is None:
                found.problems.append(f'unknown field "{_path(stack, k)}"')
                if unknown is None:
                    unknown = []
                unknown.append(k)
                if count:
                    keys += _count(v)
                continue
            if dups and k in dups:
                found.problems.append(f'duplicate field "{_path(stack, k)}"')
            t = type(v)
            if t is dict or t is list:
                if not v and k in shape.collections and t in sub.accepts:  # ([] for a map: a mismatch)
                    found.emptied.append((value, k, k in shape.null_fields))
                    continue
                was = known_obj.get(k) if known_obj is not None else None
                if was is not None and _as_stored(was, v):
                    continue  # as stored
                stack.append(k)
                keys += _walk(sub, v, stack, found, prune, duplicates, required and not (top and k == "status"),
                              False, count, was)
                stack.pop()
            elif t not in sub.accepts:
                _mismatch(sub, value, k, v, _path(stack, k), found)
            elif t is _NONE:
                if k not in shape.null_fields:  # (a zero Time, a nil list Go writes back as null: kept)
                    found.nulls.append((value, k, None))
            elif not v and k in shape.omit_zero:  # ("", false, 0 of an omitempty scalar: none once decoded)
                found.emptied.append((value, k, False))
            elif sub.parse is not None:
                _parse(sub, value, k, v, found)
            elif t is int and sub.bound and not -sub.bound <= v < sub.bound:
                _bounded(sub, value, k, v, _path(stack, k), found)
        if required and shape.required:
            for r in shape.required:
                v = value.get(r)
                if v is None or (not v and r in shape.empty_missing and isinstance(v, (list, dict))):
                    found.missing.append(_path(stack, r))
        zeros = shape.zeros
        if zeros:
            for z in zeros:
                if value.get(z[0]) is None:
                    found.unfilled.append((value, zeros))
                    break
        null_fields = shape.null_fields
        if null_fields:
            for k in null_fields:
                if k not in value:
                    found.unfilled.append((value, shape.null_fill))
                    break
        if prune and unknown:
            for k in unknown:
                del value[k]
        return keys
    if type(value) is list:
        if shape.expect is not None and shape.expect != "array":
            found.mismatched.append((_path(stack), "array", _GO_TYPE[shape.expect]))
            return _count_values(value) if count else 0
        items = shape.items
        if items is None or items.expect is None:
            if shape.parse is not None:  # a list for a scalar of any JSON type (a Quantity)
                found.malformed.append(str(shape.parse(value)))
            return _count_values(value) if count else 0
        expect = items.expect
        if expect not in ("object", "array"):  # a list of scalars: only their types to check
            accepts = items.accepts
            for i, v in enumerate(value):
                t = type(v)
                if t not in accepts:
                    _mismatch(items, value, i, v, _path(stack) + f"[{i}]", found)
                elif t is _NONE:
                    found.nulls.append((value, i, items))
                elif t is int and items.bound and not -items.bound <= v < items.bound:
                    _bounded(items, value, i, v, _path(stack) + f"[{i}]", found)
            return _count_values(value) if count else 0
        keys = 0
        base = stack.pop() if stack else ""
        known_list = known if type(known) is list else None
        for i, v in enumerate(value):
            was = known_list[i] if known_list is not None and i < len(known_list) else None
            if was is not None and _as_stored(was, v):
                continue  # as stored
            stack.append(f"{base}[{i}]")
            if type(v) is dict or type(v) is list:
                keys += _walk(items, v, stack, found, prune, duplicates, required, False, count, was)
            elif v is not None:
                found.mismatched.append((_path(stack), _json_type(v), _GO_TYPE[expect]))
            else:
                found.nulls.append((value, i, items))
            stack.pop()
        stack.append(base)
        return keys
    return 0


def _mismatch(shape: Shape, container: Any, key: Any, value: Any, path: str, found: Findings) -> None:
    """A value of another JSON type than ``shape``'s. Go's decoder names the number it
    refuses for an integer (``number 3.0``: the text ``strconv.ParseInt`` failed on, here as
    orjson writes the float back); a float there is one apimachinery's converter may take
    (``Findings.numbers``)."""
    if type(value) is float and shape.expect == "integer":
        found.mismatched.append((path, f"number {orjson.dumps(value).decode()}", _GO_TYPE["integer"]))
        found.numbers.append((container, key, shape))
    else:
        found.mismatched.append((path, _json_type(value), _GO_TYPE[shape.expect or ""]))


def _bounded(shape: Shape, container: Any, key: Any, value: int, path: str, found: Findings) -> None:
    """An integer too large for its Go type: Go's decoder names the number (the converter
    takes it: ``Findings.numbers``)."""
    found.mismatched.append((path, f"number {value}", _INT_TYPES[shape.bound]))
    found.numbers.append((container, key, shape))


# The zero value Go decodes a null item of a list or value of a map into, by the JSON type
# of the item (a struct's is an empty one; a Quantity's is 0)
_ZERO: dict[str | None, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False}


def zero_nulls(nulls: list[tuple[Any, Any, Shape | None]]) -> bool:
    """Replace the nulls ``Shape.check`` found (``Findings.nulls``) as Go's decoder reads
    them into a typed object: a null field of a struct is no value (dropped, as
    ``omitempty`` writes the zero value back; the walk keeps the nulls of ``_NULL_TIMES``,
    which Go writes back as null), a null item of a list or value of a map is
    its type's zero value (``[null]`` of containers is one empty container). In place; a
    null whose type the schema leaves open (a Time in a list, anything opaque) is kept.
    True if an empty struct was made: the walk never saw it (its required fields, the ones
    to fill); a dropped field the walk counted already as missing or unfilled."""
    made_struct = False
    for container, key, shape in nulls:
        if shape is None:
            container.pop(key, None)
            continue
        if shape.parse is _quantity:
            zero: Any = "0"
        elif shape.expect == "object":
            zero = {}
            made_struct = True
        elif shape.expect == "array":
            zero = []
        elif shape.expect in _ZERO and shape.parse is None:
            zero = _ZERO[shape.expect]
        else:
            continue
        container[key] = zero
    return made_struct


def fill_zeros(unfilled: list[tuple[dict[str, Any], tuple[tuple[str, Any], ...]]]) -> None:
    """Give the structs ``Shape.check`` found lacking (``Findings.unfilled``) the fields Go
    writes back whatever their value, as their zero values (in place; run after
    ``zero_nulls``, which drops the null fields of structs): a string ``""``, a Time null."""
    for obj, zeros in unfilled:
        for key, zero in zeros:
            if obj.get(key) is None:
                obj[key] = zero


def _as_stored(stored: Any, value: Any) -> bool:
    """Whether ``value`` is the stored subtree: the same object, or equal with the same JSON
    types (Python's == alone takes 80.0 for 80 and True for 1, which Go would not decode alike)."""
    if stored is value:
        return True
    if stored != value:
        return False
    try:
        return bool(orjson.dumps(stored) == orjson.dumps(value))
    except orjson.JSONEncodeError:
        return False


def _parse(shape: Shape, container: dict[str, Any], key: str, value: Any, found: Findings) -> None:
    """Check a scalar Go parses (``shape.parse``), and store it as Go would write it back."""
    assert shape.parse is not None
    why = shape.parse(value)
    if why is None:
        return
    if type(why) is Rewrite:
        container[key] = str(why)  # (the key is there: the dict's size does not change)
    else:
        found.malformed.append(why)
        if type(value) is float and shape.parse is _int_or_string:
            found.numbers.append((container, key, shape))


def convert_numbers(numbers: list[tuple[Any, Any, Shape]]) -> bool:
    """Convert, in place, the numbers a walk found Go's decoder refusing
    (``Findings.numbers``) as apimachinery's unstructured converter does (``fromUnstructured``:
    a whole float64 for an int, ``math.Trunc``; an int64 past an int32 kept, as
    ``reflect.Value.Convert`` keeps its low bits: ``gonumbers.go_int``); an IntOrString's
    value as Go's encoder writes it and its UnmarshalJSON reads it (``80.0`` is ``80``). What
    it refuses (3.5 for an int32) is left for the walk again to report. True if anything
    changed."""
    changed = False
    for container, key, shape in numbers:
        value = container[key]
        if shape.parse is _int_or_string:
            converted: Any = written_back(value)
        elif type(value) is float and not value.is_integer():
            continue
        else:
            converted = go_int(value, 32 if shape.bound == _INT_BOUNDS["int32"] else 64)
        if converted is not value:
            container[key] = converted
            changed = True
    return changed


# Go's time.Parse of a metav1.Time (time.RFC3339: any fraction of a second) or a
# MicroTime (RFC3339Micro: exactly six digits of one), and the form each is written
# back in (Go re-encodes what it decoded): UTC, seconds for a Time, microseconds for a
# MicroTime, so "2026-01-01T01:00:00.5+01:00" is stored as "2026-01-01T00:00:00Z"
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z", re.ASCII)
# (the stored forms, in range, checked without a parse: what nearly every write has;
# the 29th and 30th of every month but February and the 31st of the months that have one
# too, so that only February the 29th is parsed, for the leap year)
_IN_RANGE = (r"\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
             r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d")
_CANONICAL_TIME = re.compile(_IN_RANGE + r"Z\Z", re.ASCII)
# a Time in UTC with a fraction of a second (KWOK's ``Now``, RFC3339Nano), in range: the
# fraction dropped without a parse (Go truncates it, never rounds)
_FRACTION_TIME = re.compile(_IN_RANGE + r"\.\d+Z\Z", re.ASCII)
_CANONICAL_MICRO_TIME = re.compile(_IN_RANGE + r"\.\d{6}Z\Z", re.ASCII)
_TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"
_MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
_RANGES = (("month", 1, 12), ("day", 1, 31), ("hour", 0, 23), ("minute", 0, 59), ("second", 0, 59))


def _parse_time(value: Any, micro: bool) -> tuple[datetime.datetime | None, str]:
    """(the UTC time, "") or (None, Go's error) for a Time (``micro`` False) or a MicroTime."""
    layout = _MICRO_TIME_LAYOUT if micro else _TIME_LAYOUT
    m = _RFC3339.match(value) if type(value) is str else None
    if m is None:
        return None, (f'parsing time "{value}" as "{layout}": cannot parse "{value}" as a time in RFC 3339 format')
    fraction = m.group(7) or ""
    if micro and len(fraction) != 7:  # Go wants the layout's six digits, then the zone
        rest = value[19:] if len(fraction) < 7 else value[26:]
        return None, f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as ' \
                     f'"{".000000" if len(fraction) < 7 else "Z07:00"}"'
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    for (what, low, high), n in zip(_RANGES, (month, day, hour, minute, second), strict=True):
        if not low <= n <= high:
            return None, f'parsing time "{value}": {what} out of range'
    zone = m.group(8)
    offset = datetime.timedelta(0) if zone == "Z" else \
        (1 if zone[0] == "+" else -1) * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    try:
        moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone(offset))
    except ValueError:  # the 31st of a shorter month
        return None, f'parsing time "{value}": day out of range'
    if fraction:
        moment = moment.replace(microsecond=int(fraction[1:7].ljust(6, "0")))
    return moment.astimezone(datetime.UTC), ""


class Rewrite(str):
    """What a parse answers for a value Go accepts but writes back otherwise: that form."""

    __slots__ = ()


def _time(value: Any) -> str | None:
    if type(value) is str:
        if _CANONICAL_TIME.match(value):
            return None
        if _FRACTION_TIME.match(value):
            return Rewrite(value[:19] + "Z")
    moment, why = _parse_time(value, False)
    return why if moment is None else Rewrite(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _micro_time(value: Any) -> str | None:
    if type(value) is str and _CANONICAL_MICRO_TIME.match(value):
        return None
    moment, why = _parse_time(value, True)
    return why if moment is None else Rewrite(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def parse_time(value: Any) -> tuple[str | None, str]:
    """(its stored form, "") for a Time Go accepts (UTC, whole seconds), (None, Go's parse
    error) for one it refuses."""
    why = _time(value)
    if why is None:
        return value, ""
    return (str(why), "") if isinstance(why, Rewrite) else (None, why)


def parse_micro_time(value: Any) -> tuple[str | None, str]:
    """(its stored form, "") for a MicroTime Go accepts (UTC, six digits of a second),
    (None, Go's parse error) for one it refuses."""
    why = _micro_time(value)
    if why is None:
        return value, ""
    return (str(why), "") if isinstance(why, Rewrite) else (None, why)


_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")


def base64_error(value: Any) -> str | None:
    """A ``[]byte`` field (Secret ``data``, ConfigMap ``binaryData``, ``caBundle``) as Go's
    JSON decoder reads it: standard base64, padded; line breaks are skipped."""
    if type(value) is not str:
        return None
    text = value.replace("\r", "").replace("\n", "") if "\n" in value or "\r" in value else value
    if _BASE64.match(text):
        return None
    bad = _NOT_BASE64.search(text)  # (where Go stops, near enough: a stray byte, a short end, a padding)
    at = bad.start() if bad else len(text) - len(text) % 4 if len(text) % 4 else max(text.find("="), 0)
    return f"illegal base64 data at input byte {at}"


# resource.ParseQuantity: a signed decimal, then a binary or decimal SI suffix or an exponent
_QUANTITY = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?\Z", re.ASCII)


def _quantity(value: Any) -> str | None:
    """A Quantity as Go decodes it, and writes it back: in its canonical form (``"0.5"`` is
    ``"500m"``, ``"1024Mi"`` is ``"1Gi"``: ``quantity.canonical_quantity``), always a string
    (a JSON number too: readers that type the field, the typed clients, take nothing else)."""
    t = type(value)
    if t is int or t is float:
        whole = t is int or (value.is_integer() and abs(value) < 1e15)
        return Rewrite(canonical_quantity(str(int(value)) if whole else repr(value)))
    if t is str and _QUANTITY.match(value.strip()):  # (Go trims the text it decodes)
        canonical = canonical_quantity(value)
        return None if canonical == value else Rewrite(canonical)
    return "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _int_or_string(value: Any) -> str | None:
    """An IntOrString (a Service's ``targetPort``, a probe's ``port``, ``maxSurge``) as its
    UnmarshalJSON reads it: a string, else an int32 (Go's error for anything else)."""
    t = type(value)
    if t is str:
        return None
    if t is int and -(1 << 31) <= value < (1 << 31):
        return None
    found = f"number {value}" if t is int or t is float else _json_type(value)
    return f"json: cannot unmarshal {found} into Go value of type int32"


_PARSED = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": _time,
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": _micro_time,
    "io.k8s.apimachinery.pkg.api.resource.Quantity": _quantity,
}

_GO_TYPE = {"object": "object", "array": "array", "string": "string", "integer": "int", "number": "float64",
            "boolean": "bool", "": "any"}


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, as Go's decoder names it in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else type(value).__name__


def _count(value: Any) -> int:
    """The object keys of a subtree the schema does not describe."""
    if type(value) is dict:
        return len(value) + _count_values(value)
    if type(value) is list:
        return _count_values(value)
    return 0


def _count_values(container: dict[str, Any] | list[Any]) -> int:
    """The object keys below ``container`` (a dict's own not included): the keys of
    every dict (exactly a dict) reached through dicts and lists (exactly those).

    A loop over a stack, not a recursion: the opaque ``fieldsV1`` of managedFields,
    whose every node is a dict, make this most of the walk of an update or a patch."""
    n = 0
    pending: list[dict[str, Any] | list[Any]] = [container]
    while pending:
        c = pending.pop()
        for v in (c.values() if isinstance(c, dict) else c):
            t = type(v)
            if t is dict:
                if v:  # (an empty dict has nothing below it: most fieldsV1 nodes are such leaves)
                    n += len(v)
                    pending.append(v)
            elif t is list:
                pending.append(v)
    return n


# -- compiling schemas --------------------------------------------------------------
Resolve = Callable[[str], Schema]


def compile_schema(node: Schema, resolve: Resolve, _named: dict[str, Shape] | None = None) -> Shape:
    """The ``Shape`` of a JSON schema node; ``resolve`` gives the schema a ``$ref`` names.

    Named definitions are compiled once (recursive types such as JSONSchemaProps
    refer to themselves)."""
    named = _named if _named is not None else {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        shape = named.get(name)
        if shape is None:
            shape = named[name] = Shape()
            if name not in _OPAQUE:
                target = resolve(ref)
                _fill(shape, target, resolve, named)
                if name in _ABSENT_ACCEPTED:
                    shape.required = tuple(r for r in shape.required if r not in _ABSENT_ACCEPTED[name])
                if name.startswith("io.k8s.") and shape.fields:
                    shape.zeros = _zero_fields(name, target, shape.fields)
                    kept = KEPT_EMPTY.get(name, ())
                    shape.collections = frozenset(k for k, sub in shape.fields.items()
                                                  if _collection(sub) and k not in kept)
                    shape.empty_missing = frozenset(f for f in _EMPTY_REQUIRED.get(name, ()) if f in shape.required)
                    shape.null_fields = tuple(f for f in (*_NULL_TIMES.get(name, ()), *_NIL_WRITTEN.get(name, ()))
                                              if f in shape.fields)
                    shape.null_fill = tuple((f, None) for f in shape.null_fields)
                    shape.omit_zero = _omit_zero().get(name, frozenset())
                    for sub in shape.fields.values():
                        if sub.fields is None and sub.values is not None and sub.values.expect == "array":
                            sub.nil_values = True
            shape.parse = _PARSED.get(name)
            package, _, type_name = name.rpartition(".")
            shape.go_type = f"{package.rpartition('.')[2]}.{type_name}"
            if shape.fields is not None:
                shape.struct = type_name
        return shape
    shape = Shape()
    _fill(shape, node, resolve, named)
    return shape


def _fill(shape: Shape, node: Schema, resolve: Resolve, named: dict[str, Shape]) -> None:
    kind = type_of(node)
    if node.get("x-kubernetes-preserve-unknown-fields"):
        _expect(shape, kind if kind in ("object", "array") else None)
        return
    _expect(shape, kind if kind in _ACCEPTS else None)
    props = node.get("properties")
    extra = node.get("additionalProperties")
    if isinstance(props, dict):
        shape.fields = {k: compile_schema(v, resolve, named) for k, v in props.items()}
        shape.required = tuple(r for r in node.get("required", ()) if _enforced(props.get(r), resolve))
        _expect(shape, "object")
    elif isinstance(extra, dict):
        shape.values = compile_schema(extra, resolve, named)
        _expect(shape, "object")
    elif kind == "object" and extra is None:
        shape.fields = {}  # a struct without fields: every key is unknown
    items = node.get("items")
    if kind == "array" and isinstance(items, dict):
        shape.items = compile_schema(items, resolve, named)
    shape.go_type = _go_type(shape, kind, node.get("format"))
    if kind == "string" and node.get("format") == "byte":  # a Go []byte: base64 in JSON
        shape.parse = base64_error
    elif kind == "integer" and node.get("format") in _INT_BOUNDS:
        shape.bound = _INT_BOUNDS[node["format"]]


# Required fields of the built-in types that Go nonetheless omits when empty (tagged
# ``omitempty``, or pointers: nil is written as null), so they are not filled with a zero
# value: from the ``json`` tags of k8s.io/api's served versions
_OMITTED: dict[str, frozenset[str]] = {
    "io.k8s.api.core.v1.ContainerRestartRule": frozenset({"action"}),
    "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes": frozenset({"operator"}),
    "io.k8s.api.core.v1.ImageVolumeStatus": frozenset({"imageRef"}),
    "io.k8s.api.core.v1.PodCertificateProjection": frozenset({"keyType", "signerName"}),
    "io.k8s.api.core.v1.EvictionResponder": frozenset({"priority"}),  # *int32
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": frozenset({"policyName"}),
    "io.k8s.api.admissionregistration.v1.MutatingWebhook": frozenset({"sideEffects"}),  # pointer
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": frozenset({"sideEffects"}),  # pointer
    "io.k8s.api.authentication.v1.TokenReviewSpec": frozenset({"token"}),
    "io.k8s.api.flowcontrol.v1.FlowSchemaCondition": frozenset({"type"}),
    "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationCondition": frozenset({"type"}),
    "io.k8s.api.networking.v1.ParentReference": frozenset({"name", "resource"}),
    "io.k8s.api.networking.v1.HTTPIngressPath": frozenset({"pathType"}),  # pointer
}
# Required fields of the built-in types that kube-apiserver nonetheless accepts absent (no
# validation of theirs asks for them): not enforced; Go writes them back as their zero value
# (the type's strategy here: a CSINode's ``spec: {drivers: null}``, registry/csi.py); or
# whose hand-written validation words their absence itself: a restart rule's ``action`` and
# ``operator`` absent are ``Unsupported value: ""`` (registry/podvalidation.py)
_ABSENT_ACCEPTED: dict[str, frozenset[str]] = {
    "io.k8s.api.storage.v1.CSINode": frozenset({"spec"}),
    "io.k8s.api.storage.v1.CSINodeSpec": frozenset({"drivers"}),
    "io.k8s.api.core.v1.ContainerRestartRule": frozenset({"action"}),
    "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes": frozenset({"operator"}),
    # lists whose validation only walks them: none, or an empty one, is valid (ValidateLimitRange,
    # validatePodFailurePolicy)
    "io.k8s.api.core.v1.LimitRangeSpec": frozenset({"limits"}),
    "io.k8s.api.batch.v1.PodFailurePolicy": frozenset({"rules"}),
    # a pod spec's containers, required by the pod validation of a Pod and of every template but
    # a StatefulSet's, which upstream does not validate (ValidatePodTemplateSpecForStatefulSet)
    "io.k8s.api.core.v1.PodSpec": frozenset({"containers"}),
    # a pod's OS's name, which validateOS words itself (``spec.os.name: Required value: cannot be
    # empty``), in the same specs
    "io.k8s.api.core.v1.PodOS": frozenset({"name"}),
    # a NodeSelector's terms, one at least (none, null or []) by ValidateNodeSelector's hand-written
    # checks in a pod spec, a PersistentVolume's node affinity and DRA's node selectors; a
    # StatefulSet's template is not validated (above): none, or [] stored as none, is taken
    "io.k8s.api.core.v1.NodeSelector": frozenset({"nodeSelectorTerms"}),
    # an admission policy's, in validateValidatingAdmissionPolicySpec's order and words
    # (``expression is not specified``, ``at least one validation action is required``)
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": frozenset(
        {"policyName", "validationActions"}),
    "io.k8s.api.admissionregistration.v1.Validation": frozenset({"expression"}),
    "io.k8s.api.admissionregistration.v1.Variable": frozenset({"name", "expression"}),
    "io.k8s.api.admissionregistration.v1.AuditAnnotation": frozenset({"key", "valueExpression"}),
    "io.k8s.api.admissionregistration.v1.MatchCondition": frozenset({"name", "expression"}),
    # no validation at all: its REST storage refuses an empty token with a 400 of its own
    # (pkg/registry/authentication/tokenreview/storage.go), which ``api/reviews.py`` gives
    "io.k8s.api.authentication.v1.TokenReview": frozenset({"spec"}),
    "io.k8s.api.authentication.v1.TokenReviewSpec": frozenset({"token"}),
    # their spec decoded as an empty struct, which their validation words (api/reviews.py)
    "io.k8s.api.authorization.v1.SubjectAccessReview": frozenset({"spec"}),
    "io.k8s.api.authorization.v1.LocalSubjectAccessReview": frozenset({"spec"}),
    "io.k8s.api.authorization.v1.SelfSubjectAccessReview": frozenset({"spec"}),
    "io.k8s.api.authorization.v1.SelfSubjectRulesReview": frozenset({"spec"}),
}
# Fields of list items Go always writes (no ``omitempty``) that the schemas do not list
# as required (``+optional``)
_ALSO_WRITTEN: dict[str, tuple[str, ...]] = {
    "io.k8s.api.apps.v1.DaemonSetCondition": ("type", "status"),
    "io.k8s.api.apps.v1.DeploymentCondition": ("type", "status"),
    "io.k8s.api.apps.v1.ReplicaSetCondition": ("type", "status"),
    "io.k8s.api.apps.v1.StatefulSetCondition": ("type", "status"),
    "io.k8s.api.core.v1.NodeRuntimeHandler": ("name",),
}


# The Time and MicroTime fields Go writes as null when zero: a ``metav1.Time`` is a struct,
# which ``omitempty`` does not omit, so a plain (not pointer) Time field left out or null
# reads back as ``null`` from kube-apiserver, a pod condition's ``lastProbeTime`` for one.
# From the Go types of k8s.io/api, apiextensions-apiserver, kube-aggregator and apimachinery
# (1.37): every such field of a served version. Not ObjectMeta's ``creationTimestamp``
# (``omitzero``, left out when zero, so a template's metadata has none), nor the pointers
# (``deletionTimestamp``, a pod's ``startTime``, a Job's ``completionTime``: nil is omitted).
# An Event's are its strategy's (``registry/strategies.py``, both versions).
_NULL_TIMES: dict[str, tuple[str, ...]] = {
    "io.k8s.api.core.v1.PodCondition": ("lastProbeTime", "lastTransitionTime"),
    "io.k8s.api.core.v1.ContainerStateRunning": ("startedAt",),
    "io.k8s.api.core.v1.ContainerStateTerminated": ("startedAt", "finishedAt"),
    "io.k8s.api.core.v1.NodeCondition": ("lastHeartbeatTime", "lastTransitionTime"),
    "io.k8s.api.core.v1.PersistentVolumeClaimCondition": ("lastProbeTime", "lastTransitionTime"),
    "io.k8s.api.core.v1.NamespaceCondition": ("lastTransitionTime",),
    "io.k8s.api.core.v1.ReplicationControllerCondition": ("lastTransitionTime",),
    "io.k8s.api.core.v1.VolumeHealthStatus": ("lastTransitionTime",),
    "io.k8s.api.core.v1.PodVolumeHealth": ("lastTransitionTime",),
    "io.k8s.api.apps.v1.DeploymentCondition": ("lastUpdateTime", "lastTransitionTime"),
    "io.k8s.api.apps.v1.ReplicaSetCondition": ("lastTransitionTime",),
    "io.k8s.api.apps.v1.StatefulSetCondition": ("lastTransitionTime",),
    "io.k8s.api.apps.v1.DaemonSetCondition": ("lastTransitionTime",),
    "io.k8s.api.batch.v1.JobCondition": ("lastProbeTime", "lastTransitionTime"),
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerCondition": ("lastTransitionTime",),
    "io.k8s.api.certificates.v1.CertificateSigningRequestCondition": ("lastUpdateTime", "lastTransitionTime"),
    "io.k8s.api.flowcontrol.v1.FlowSchemaCondition": ("lastTransitionTime",),
    "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationCondition": ("lastTransitionTime",),
    "io.k8s.api.storage.v1.VolumeError": ("time",),
    "io.k8s.api.storage.v1.StorageHealthCondition": ("lastTransitionTime",),
    "io.k8s.api.apiserverinternal.v1alpha1.StorageVersionCondition": ("lastTransitionTime",),
    "io.k8s.api.authentication.v1.TokenRequestStatus": ("expirationTimestamp",),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionCondition":
        ("lastTransitionTime",),
    "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceCondition": ("lastTransitionTime",),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Condition": ("lastTransitionTime",),  # (no omitempty)
}


# The list and map fields of the built-in types without ``omitempty``, which Go writes as
# null when nil: what an empty one sent as ``[]`` reads back as, once stored (protobuf has no
# empty repeated field, so the stored object decodes to a nil slice), and an absent one too (a
# Role's ``rules: null``). Every other list and map field of a built-in struct is
# ``omitempty``: left out when empty. From the ``json`` tags of k8s.io/api and
# apiextensions-apiserver (1.37), every such field of a served kind but the lists' ``items``.
_NIL_WRITTEN: dict[str, tuple[str, ...]] = {
    "io.k8s.api.core.v1.PodSpec": ("containers",),
    "io.k8s.api.core.v1.NodeSelector": ("nodeSelectorTerms",),
    "io.k8s.api.core.v1.TopologySelectorLabelRequirement": ("values",),
    "io.k8s.api.core.v1.ProjectedVolumeSource": ("sources",),
    "io.k8s.api.core.v1.RBDVolumeSource": ("monitors",),
    "io.k8s.api.core.v1.RBDPersistentVolumeSource": ("monitors",),
    "io.k8s.api.core.v1.CephFSVolumeSource": ("monitors",),
    "io.k8s.api.core.v1.CephFSPersistentVolumeSource": ("monitors",),
    "io.k8s.api.core.v1.PodExtendedResourceClaimStatus": ("requestMappings",),
    "io.k8s.api.core.v1.ContainerImage": ("names",),
    "io.k8s.api.core.v1.LimitRangeSpec": ("limits",),
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": ("admissionReviewVersions",),
    "io.k8s.api.admissionregistration.v1.MutatingWebhook": ("admissionReviewVersions",),
    "io.k8s.api.authentication.v1.TokenRequestSpec": ("audiences",),
    "io.k8s.api.authorization.v1.SubjectRulesReviewStatus": ("resourceRules", "nonResourceRules"),
    "io.k8s.api.authorization.v1.ResourceRule": ("verbs",),
    "io.k8s.api.authorization.v1.NonResourceRule": ("verbs",),
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus": ("currentMetrics",),
    "io.k8s.api.batch.v1.PodFailurePolicy": ("rules",),
    "io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement": ("values",),
    "io.k8s.api.batch.v1.SuccessPolicy": ("rules",),
    "io.k8s.api.discovery.v1.EndpointSlice": ("endpoints", "ports"),
    "io.k8s.api.discovery.v1.Endpoint": ("addresses",),
    "io.k8s.api.flowcontrol.v1.PolicyRulesWithSubjects": ("subjects",),
    "io.k8s.api.flowcontrol.v1.ResourcePolicyRule": ("verbs", "apiGroups", "resources", "namespaces"),
    "io.k8s.api.flowcontrol.v1.NonResourcePolicyRule": ("verbs", "nonResourceURLs"),
    "io.k8s.api.networking.v1.HTTPIngressRuleValue": ("paths",),
    "io.k8s.api.rbac.v1.PolicyRule": ("verbs",),
    "io.k8s.api.rbac.v1.Role": ("rules",),
    "io.k8s.api.rbac.v1.ClusterRole": ("rules",),
    "io.k8s.api.resource.v1.DeviceClaim": ("requests",),
    "io.k8s.api.resource.v1.AllocatedDeviceStatus": ("conditions",),
    "io.k8s.api.scheduling.v1beta1.WorkloadSpec": ("podGroupTemplates",),
    "io.k8s.api.storage.v1.CSINodeSpec": ("drivers",),
    "io.k8s.api.storage.v1.CSINodeDriver": ("topologyKeys",),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec": ("versions",),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.WebhookConversion": ("conversionReviewVersions",),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus":
        ("conditions", "storedVersions"),
}


# The scalar fields of the built-in types Go leaves out when they hold their zero value: not
# pointers, tagged ``omitempty`` (strings, bools, integers, floats and the named types of them:
# a ``PodPhase``, a ``types.UID``). Decoded, ``hostNetwork: false`` or a condition's ``reason: ""``
# is no value: kube-apiserver, which decodes a request into the Go struct and encodes it back,
# serves the object without them (and its webhooks see it so). Pointers (``replicas``,
# ``automountServiceAccountToken``) keep their zero values, and fields without ``omitempty`` are
# always written (``Shape.zeros``). Derived from the ``json`` tags of the Go types of k8s.io/api,
# apiextensions-apiserver's and kube-aggregator's served versions and apimachinery's
# ``metav1.Condition`` (their master of July 2026, 1.37): every field of a struct whose
# definition this server serves, inlined structs' fields counted as their holder's, checked
# against the definition's schema (a string, integer, number or boolean). To regenerate: walk
# every ``type X struct`` of those packages and list the fields whose tag has ``omitempty`` and
# whose Go type is a scalar or a named scalar type (``type PodPhase string``, ``types.UID``);
# keep the structs named in ``schema.definitions()``. ObjectMeta's and a managedFields entry's
# too (apimachinery's ``metav1``: ``generateName: ""``, ``generation: 0``, ``subresource: ""``;
# an owner reference has none: its strings are always written, ``controller`` a pointer), a
# custom resource's as a built-in kind's (its ``metadata`` is decoded into ObjectMeta). One
# line a definition (``io.k8s.api.`` left out of k8s.io/api's names), wrapped lines indented.
_OMIT_ZERO_TEXT = """
admissionregistration.v1.ApplyConfiguration: expression
admissionregistration.v1.JSONPatch: expression
admissionregistration.v1.MutatingAdmissionPolicyBindingSpec: policyName
admissionregistration.v1.MutatingAdmissionPolicySpec: reinvocationPolicy
admissionregistration.v1.ParamKind: apiVersion kind
admissionregistration.v1.ParamRef: name namespace
admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec: policyName
admissionregistration.v1.ValidatingAdmissionPolicyStatus: observedGeneration
admissionregistration.v1.Validation: message messageExpression
admissionregistration.v1alpha1.ApplyConfiguration: expression
admissionregistration.v1alpha1.JSONPatch: expression
admissionregistration.v1alpha1.MutatingAdmissionPolicyBindingSpec: policyName
admissionregistration.v1alpha1.ParamKind: apiVersion kind
admissionregistration.v1alpha1.ParamRef: name namespace
admissionregistration.v1beta1.ApplyConfiguration: expression
admissionregistration.v1beta1.JSONPatch: expression
admissionregistration.v1beta1.MutatingAdmissionPolicyBindingSpec: policyName
admissionregistration.v1beta1.ParamKind: apiVersion kind
admissionregistration.v1beta1.ParamRef: name namespace
apiserverinternal.v1alpha1.ServerStorageVersion: apiServerID encodingVersion
apiserverinternal.v1alpha1.StorageVersionCondition: observedGeneration message
apps.v1.DaemonSetCondition: reason message
apps.v1.DaemonSetSpec: minReadySeconds
apps.v1.DaemonSetStatus: observedGeneration updatedNumberScheduled numberAvailable numberUnavailable
apps.v1.DaemonSetUpdateStrategy: type
apps.v1.DeploymentCondition: reason message
apps.v1.DeploymentSpec: minReadySeconds paused
apps.v1.DeploymentStatus: observedGeneration replicas updatedReplicas readyReplicas availableReplicas
    unavailableReplicas
apps.v1.DeploymentStrategy: type
apps.v1.ReplicaSetCondition: reason message
apps.v1.ReplicaSetSpec: minReadySeconds
apps.v1.ReplicaSetStatus: fullyLabeledReplicas readyReplicas availableReplicas observedGeneration
apps.v1.StatefulSetCondition: reason message
apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy: whenDeleted whenScaled
apps.v1.StatefulSetSpec: podManagementPolicy minReadySeconds
apps.v1.StatefulSetStatus: observedGeneration readyReplicas currentReplicas updatedReplicas currentRevision
    updateRevision
apps.v1.StatefulSetUpdateStrategy: type
authentication.v1.BoundObjectReference: kind apiVersion name uid
authentication.v1.TokenReviewSpec: token
authentication.v1.TokenReviewStatus: authenticated error
authentication.v1.UserInfo: username uid
authorization.v1.FieldSelectorAttributes: rawSelector
authorization.v1.LabelSelectorAttributes: rawSelector
authorization.v1.NonResourceAttributes: path verb
authorization.v1.ResourceAttributes: namespace verb group version resource subresource name
authorization.v1.SelfSubjectRulesReviewSpec: namespace
authorization.v1.SubjectAccessReviewSpec: user uid
authorization.v1.SubjectAccessReviewStatus: denied reason evaluationError
authorization.v1.SubjectRulesReviewStatus: evaluationError
autoscaling.v1.CrossVersionObjectReference: apiVersion
autoscaling.v1.ScaleSpec: replicas
autoscaling.v1.ScaleStatus: selector
autoscaling.v2.CrossVersionObjectReference: apiVersion
autoscaling.v2.HorizontalPodAutoscalerCondition: reason message
autoscaling.v2.HorizontalPodAutoscalerStatus: currentReplicas
batch.v1.CronJobSpec: concurrencyPolicy
batch.v1.JobCondition: reason message
batch.v1.JobStatus: active succeeded failed completedIndexes
certificates.v1.CertificateSigningRequestCondition: reason message
certificates.v1.CertificateSigningRequestSpec: username uid
certificates.v1.ClusterTrustBundleSpec: signerName
certificates.v1.PodCertificateRequestStatus: certificateChain
certificates.v1beta1.ClusterTrustBundleSpec: signerName
certificates.v1beta1.PodCertificateRequestStatus: certificateChain
coordination.v1alpha2.LeaseCandidateSpec: emulationVersion strategy
coordination.v1beta1.LeaseCandidateSpec: emulationVersion strategy
core.v1.AWSElasticBlockStoreVolumeSource: fsType partition readOnly
core.v1.AzureFilePersistentVolumeSource: readOnly
core.v1.AzureFileVolumeSource: readOnly
core.v1.CSIPersistentVolumeSource: readOnly fsType
core.v1.CephFSPersistentVolumeSource: path user secretFile readOnly
core.v1.CephFSVolumeSource: path user secretFile readOnly
core.v1.CinderPersistentVolumeSource: fsType readOnly
core.v1.CinderVolumeSource: fsType readOnly
core.v1.ComponentCondition: message error
core.v1.ConfigMapNodeConfigSource: uid resourceVersion
core.v1.Container: image workingDir terminationMessagePath terminationMessagePolicy imagePullPolicy stdin stdinOnce
    tty
core.v1.ContainerImage: sizeBytes
core.v1.ContainerPort: name hostPort protocol hostIP
core.v1.ContainerRestartRule: action
core.v1.ContainerRestartRuleOnExitCodes: operator
core.v1.ContainerStateTerminated: signal reason message containerID
core.v1.ContainerStateWaiting: reason message
core.v1.ContainerStatus: containerID
core.v1.EmptyDirVolumeSource: medium
core.v1.EndpointAddress: hostname
core.v1.EndpointPort: name protocol
core.v1.EnvFromSource: prefix
core.v1.EnvVar: value
core.v1.EphemeralContainer: targetContainerName
core.v1.Event: reason message count type action
core.v1.EventSeries: count
core.v1.EventSource: component host
core.v1.FCVolumeSource: fsType readOnly
core.v1.FlexPersistentVolumeSource: fsType readOnly
core.v1.FlexVolumeSource: fsType readOnly
core.v1.FlockerVolumeSource: datasetName datasetUUID
core.v1.GCEPersistentDiskVolumeSource: fsType partition readOnly
core.v1.GitRepoVolumeSource: revision directory
core.v1.GlusterfsPersistentVolumeSource: readOnly
core.v1.GlusterfsVolumeSource: readOnly
core.v1.HTTPGetAction: path host scheme
core.v1.ISCSIPersistentVolumeSource: iscsiInterface fsType readOnly chapAuthDiscovery chapAuthSession
core.v1.ISCSIVolumeSource: iscsiInterface fsType readOnly chapAuthDiscovery chapAuthSession
core.v1.ImageVolumeSource: reference pullPolicy
core.v1.ImageVolumeStatus: imageRef
core.v1.LoadBalancerIngress: ip hostname
core.v1.LocalObjectReference: name
core.v1.ModifyVolumeStatus: targetVolumeAttributesClassName
core.v1.NFSVolumeSource: readOnly
core.v1.NamespaceCondition: reason message
core.v1.NamespaceStatus: phase
core.v1.NodeCondition: reason message
core.v1.NodeConfigStatus: error
core.v1.NodeSpec: podCIDR providerID unschedulable externalID
core.v1.NodeStatus: phase
core.v1.ObjectFieldSelector: apiVersion
core.v1.ObjectReference: kind namespace name uid apiVersion resourceVersion fieldPath
core.v1.PersistentVolumeClaimCondition: reason message
core.v1.PersistentVolumeClaimSpec: volumeName
core.v1.PersistentVolumeClaimStatus: phase
core.v1.PersistentVolumeClaimVolumeSource: readOnly
core.v1.PersistentVolumeSpec: persistentVolumeReclaimPolicy storageClassName
core.v1.PersistentVolumeStatus: phase message reason
core.v1.PhotonPersistentDiskVolumeSource: fsType
core.v1.PodCertificateProjection: signerName keyType credentialBundlePath keyPath certificateChainPath
core.v1.PodCondition: observedGeneration reason message
core.v1.PodDNSConfigOption: name
core.v1.PodSpec: restartPolicy dnsPolicy serviceAccountName serviceAccount nodeName hostNetwork hostPID hostIPC
    hostname subdomain schedulerName priorityClassName
core.v1.PodStatus: observedGeneration phase message reason nominatedNodeName hostIP podIP qosClass resize
core.v1.PortworxVolumeSource: fsType readOnly
core.v1.Probe: initialDelaySeconds timeoutSeconds periodSeconds successThreshold failureThreshold
core.v1.QuobyteVolumeSource: readOnly user group tenant
core.v1.RBDPersistentVolumeSource: fsType pool user keyring readOnly
core.v1.RBDVolumeSource: fsType pool user keyring readOnly
core.v1.ReplicationControllerCondition: reason message
core.v1.ReplicationControllerSpec: minReadySeconds
core.v1.ReplicationControllerStatus: fullyLabeledReplicas readyReplicas availableReplicas observedGeneration
core.v1.ResourceClaim: request
core.v1.ResourceFieldSelector: containerName
core.v1.ResourceHealth: health
core.v1.SELinuxOptions: user role type level
core.v1.ScaleIOPersistentVolumeSource: sslEnabled protectionDomain storagePool storageMode volumeName fsType
    readOnly
core.v1.ScaleIOVolumeSource: sslEnabled protectionDomain storagePool storageMode volumeName fsType readOnly
core.v1.Secret: type
core.v1.SecretReference: name namespace
core.v1.SecretVolumeSource: secretName
core.v1.ServiceAccountTokenProjection: audience
core.v1.ServicePort: name protocol nodePort
core.v1.ServiceSpec: clusterIP type sessionAffinity loadBalancerIP externalName externalTrafficPolicy
    healthCheckNodePort publishNotReadyAddresses
core.v1.StorageOSPersistentVolumeSource: volumeName volumeNamespace fsType readOnly
core.v1.StorageOSVolumeSource: volumeName volumeNamespace fsType readOnly
core.v1.TCPSocketAction: host
core.v1.Taint: value
core.v1.Toleration: key operator value effect
core.v1.VolumeHealthCondition: message
core.v1.VolumeMount: readOnly subPath subPathExpr
core.v1.VolumeMountStatus: readOnly
core.v1.VsphereVirtualDiskVolumeSource: fsType storagePolicyName storagePolicyID
events.v1.Event: reportingController reportingInstance action reason note type deprecatedCount
flowcontrol.v1.FlowSchemaCondition: type status reason message
flowcontrol.v1.PriorityLevelConfigurationCondition: type status reason message
flowcontrol.v1.ResourcePolicyRule: clusterScope
networking.v1.HTTPIngressPath: path
networking.v1.IngressClassSpec: controller
networking.v1.IngressLoadBalancerIngress: ip hostname
networking.v1.IngressRule: host
networking.v1.IngressTLS: secretName
networking.v1.ParentReference: group resource namespace name
networking.v1.ServiceBackendPort: name number
policy.v1.PodDisruptionBudgetStatus: observedGeneration
rbac.v1.Subject: apiGroup namespace
resource.v1.DeviceSubRequest: allocationMode count
resource.v1.DeviceTaint: value
resource.v1.DeviceToleration: key operator value effect
resource.v1.ExactDeviceRequest: allocationMode count
resource.v1.NetworkDeviceData: interfaceName hardwareAddress
resource.v1.ResourceClaimConsumerReference: apiGroup
resource.v1alpha3.DeviceTaint: value
resource.v1alpha3.PartitionTypeStatus: attribute type
resource.v1alpha3.PoolStatus: driver poolName
resource.v1alpha3.ShareableCapacityStatus: name
resource.v1beta1.DeviceRequest: allocationMode count
resource.v1beta1.DeviceSubRequest: allocationMode count
resource.v1beta1.DeviceTaint: value
resource.v1beta1.DeviceToleration: key operator value effect
resource.v1beta1.NetworkDeviceData: interfaceName hardwareAddress
resource.v1beta1.ResourceClaimConsumerReference: apiGroup
resource.v1beta1.ResourceSliceSpec: nodeName allNodes
resource.v1beta2.DeviceSubRequest: allocationMode count
resource.v1beta2.DeviceTaint: value
resource.v1beta2.DeviceToleration: key operator value effect
resource.v1beta2.ExactDeviceRequest: allocationMode count
resource.v1beta2.NetworkDeviceData: interfaceName hardwareAddress
resource.v1beta2.ResourceClaimConsumerReference: apiGroup
scheduling.v1.PriorityClass: globalDefault description
scheduling.v1alpha3.CompositePodGroupSpec: priorityClassName
scheduling.v1alpha3.CompositePodGroupTemplate: priorityClassName
scheduling.v1alpha3.PodGroupSpec: priorityClassName
scheduling.v1alpha3.PodGroupTemplate: priorityClassName
scheduling.v1alpha3.TypedLocalObjectReference: apiGroup
scheduling.v1beta1.CompositePodGroupTemplate: priorityClassName
scheduling.v1beta1.PodGroupSpec: priorityClassName
scheduling.v1beta1.PodGroupTemplate: priorityClassName
scheduling.v1beta1.TypedLocalObjectReference: apiGroup
storage.v1.StorageHealthCondition: message
storage.v1.VolumeError: message
storagemigration.v1.StorageVersionMigrationStatus: resourceVersion
storagemigration.v1beta1.StorageVersionMigrationStatus: resourceVersion
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceColumnDefinition: format description priority
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionCondition: reason message
    observedGeneration
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionNames: singular listKind
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec: preserveUnknownFields
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus: observedGeneration
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion: deprecated
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ExternalDocumentation: description url
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps: id $schema description type format title
    exclusiveMaximum exclusiveMinimum pattern uniqueItems nullable x-kubernetes-embedded-resource
    x-kubernetes-int-or-string
io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ValidationRule: message messageExpression fieldPath
io.k8s.apimachinery.pkg.apis.meta.v1.Condition: observedGeneration
io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry: manager operation apiVersion fieldsType subresource
io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta: name generateName namespace selfLink uid resourceVersion generation
io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceCondition: reason message
io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec: group version insecureSkipTLSVerify
io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.ServiceReference: namespace name
"""


@functools.cache
def _omit_zero() -> dict[str, frozenset[str]]:
    """``_OMIT_ZERO_TEXT`` read: the fields by definition name."""
    out: dict[str, frozenset[str]] = {}
    for entry in _OMIT_ZERO_TEXT.replace("\n    ", " ").split("\n"):
        if entry:
            name, _, fields = entry.partition(": ")
            out[name if name.startswith("io.k8s.") else "io.k8s.api." + name] = frozenset(fields.split())
    return out


# The required lists and maps whose upstream validation refuses an empty one as it refuses none,
# in the words of the missing field here (``field.Required(path, "")``), and which no validation
# of this server's checks: empty, each is nil once stored (``Findings.emptied``), so one taken
# would be stored as an object its next update refuses. (Those with a hand-written check, a
# PodSpec's ``containers`` or a PolicyRule's ``verbs``, are worded by it.)
_EMPTY_REQUIRED: dict[str, tuple[str, ...]] = {
    "io.k8s.api.core.v1.TopologySelectorLabelRequirement": ("values",),  # validateTopologySelectorLabelRequirement
    "io.k8s.api.core.v1.RBDVolumeSource": ("monitors",),  # validateRBDVolumeSource
    "io.k8s.api.core.v1.RBDPersistentVolumeSource": ("monitors",),
    "io.k8s.api.core.v1.CephFSVolumeSource": ("monitors",),  # validateCephFSVolumeSource
    "io.k8s.api.core.v1.CephFSPersistentVolumeSource": ("monitors",),
}


# The ``omitempty`` lists of the built-in types whose upstream validation tells an empty one
# from none (a ResourceSlice's ``spec.sharedCounters != nil && spec.Devices != nil``): kept as
# sent through validation, then dropped when empty by their strategy (registry/resourceslices.py)
KEPT_EMPTY: dict[str, tuple[str, ...]] = {
    "io.k8s.api.resource.v1.ResourceSliceSpec": ("sharedCounters", "devices"),
    # validateWindows forbids a Windows pod's supplementalGroups when not nil, [] too
    # (registry/podvalidation.py: dropped after the pod spec's checks, ``drop_kept_empty``)
    "io.k8s.api.core.v1.PodSecurityContext": ("supplementalGroups",),
}


def _collection(shape: Shape) -> bool:
    """Whether a field of this shape is a Go slice or map (not a struct, not opaque JSON)."""
    return shape.expect == "array" or (shape.fields is None and shape.values is not None)


def empty_collections(emptied: list[tuple[dict[str, Any], str, bool]], decoded: bool = False) -> None:
    """The empty lists and maps ``Shape.check`` found in a built-in object's structs
    (``Findings.emptied``) as kube-apiserver reads them back: null where Go writes the field
    without ``omitempty`` (``_NIL_WRITTEN``), else left out (in place), as are the zero values of
    its ``omitempty`` scalars (``Shape.omit_zero``: ``hostNetwork: false``, ``reason: ""``). Upstream stores the
    built-in kinds as protobuf, which has no empty repeated field or map, so ``args: []`` or
    ``labels: {}`` is a nil slice or map once stored, and in the create's response (decoded
    from the bytes written). Not for custom resources: stored as JSON, they keep ``[]``.

    ``decoded``: the object was just decoded, and admission is to see it: only the
    ``omitempty`` ones go (Go's JSON encoder, which makes what the webhooks see, leaves them
    out too); the others stay ``[]`` until ``stored_form``."""
    for obj, key, null in emptied:
        if obj.get(key):  # (no longer empty: not what the walk saw)
            continue
        if not null:
            obj.pop(key, None)
        elif not decoded:
            obj[key] = None


# a struct's ``Shape.nil_plan``: (its fields without ``omitempty`` that are lists or maps,
# its map fields whose values are lists (``Shape.nil_values``),
# (field, Shape) of those under which another struct has some)
NilPlan = tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, Shape], ...]]
_NO_NILS: NilPlan = ((), (), ())


def stored_form(shape: Shape, obj: dict[str, Any], known: dict[str, Any] | None, changed: bool) -> None:
    """A built-in object about to be stored (admitted, validated) given the form upstream's
    protobuf storage gives it back in (in place): its empty lists and maps without
    ``omitempty``, ``[]`` through admission (``empty_collections``), null. ``known``: the stored
    object it replaces, whose parts ``obj`` shares are not looked at (stored so already).

    ``changed``: a mutating admission policy or webhook changed the object, which may have
    added empty lists anywhere (``imagePullSecrets: []``): the whole object is walked again, as
    decoding their patch into the Go type would see it, and every empty list settled.
    Otherwise only the paths to the structs with such fields are followed (a pod's
    ``spec.containers``, its volumes' ``projected.sources``, ...: a few lookups), the
    ``omitempty`` ones having gone when the request was decoded. (The strategies and the
    built-in admission here add no empty list.)"""
    if changed:
        found = shape.check(obj, count_keys=False, known=known)
        if found.emptied:
            empty_collections(found.emptied)
        return
    if shape.fields is not None and obj is not known:
        _nil_struct(shape, obj, known)


_NIL_ALIKE: tuple[Any, ...] = (None, [], {})


def same_once_stored(a: Any, b: Any, shape: Shape | None = None) -> bool:
    """Whether two parts of a built-in object decode to the same Go value, empty lists and maps
    and nulls and absent fields being alike (nil), as upstream's ``Semantic.DeepEqual`` takes
    them: what a strategy's comparison of an update with the stored object (a new generation?
    a change of an immutable field?) must see while an update's ``rules: []`` is not yet the
    null it is stored as. For when ``a != b``: equal subtrees are compared by ``==`` first.

    ``shape``: the two parts' type, when the caller knows it: its Quantities are then compared
    by value, as ``Semantic.DeepEqual``'s equality for them (``Cmp``) does, so ``1e9`` (kept in
    its exponent form) and ``1G`` (what a number written for it becomes) are the same, and its
    ``omitempty`` scalars' zero values are no value (``Shape.omit_zero``: an object stored before
    they were left out, with ``hostname: ""``, is the same as an update without it)."""
    if a == b:
        return True
    if shape is not None and shape.parse is _quantity and type(a) is str and type(b) is str:
        try:
            return parse_quantity(a) == parse_quantity(b)
        except QuantityError:
            return False
    if type(a) is dict and type(b) is dict:
        if shape is None:
            return all(same_once_stored(a.get(k), b.get(k)) for k in a.keys() | b.keys())
        fields, values, omit = shape.fields, shape.values, shape.omit_zero
        return all(same_once_stored(a.get(k), b.get(k), fields.get(k) if fields is not None else values)
                   or (k in omit and not a.get(k) and not b.get(k))  # ("" or false, and none: Go's zero)
                   for k in a.keys() | b.keys())
    if type(a) is list and type(b) is list:
        items = shape.items if shape is not None else None
        return len(a) == len(b) and all(same_once_stored(x, y, items) for x, y in zip(a, b, strict=True))
    return a in _NIL_ALIKE and b in _NIL_ALIKE  # (0 and False are neither: == tells them from these)


def shape_at(shape: Shape | None, *path: str) -> Shape | None:
    """The shape of the struct fields at ``path`` below ``shape`` (None where it says none)."""
    for name in path:
        if shape is None or shape.fields is None:
            return None
        shape = shape.fields.get(name)
    return shape


def _nil_walk(shape: Shape, value: Any, known: Any) -> None:
    """``stored_form``'s walk of ``value`` (a dict or a list) along the nil plans."""
    if value is known:
        return
    if type(value) is list:
        items = shape.items
        if items is None:
            return
        known_list = known if type(known) is list else None
        for i, v in enumerate(value):
            if type(v) is dict or type(v) is list:
                _nil_walk(items, v, known_list[i] if known_list is not None and i < len(known_list) else None)
        return
    if type(value) is not dict:
        return
    if shape.fields is not None:
        _nil_struct(shape, value, known)
        return
    values = shape.values  # a map: its values
    if values is not None:
        known_map = known if type(known) is dict else None
        for k, v in value.items():
            if type(v) is dict or type(v) is list:
                _nil_walk(values, v, known_map.get(k) if known_map is not None else None)


def _nil_struct(shape: Shape, value: dict[str, Any], known: Any) -> None:
    """``_nil_walk`` of a struct: its own fields settled, then those below followed, a list of
    structs (a pod's volumes) without a call per item's type checks."""
    here, maps, below = shape.nil_plan or _nil_plan(shape, set())
    for k in here:
        v = value.get(k)
        if (type(v) is list or type(v) is dict) and not v:
            value[k] = None
    known_obj = known if type(known) is dict else None
    for k in maps:
        v = value.get(k)
        if type(v) is dict and (known_obj is None or v is not known_obj.get(k)) and \
                any(type(x) is list and not x for x in v.values()):
            # (a copy: the map may be shared with another object)
            value[k] = {key: None if type(x) is list and not x else x for key, x in v.items()}
    for k, sub in below:
        v = value.get(k)
        if v is None:
            continue
        was = known_obj.get(k) if known_obj is not None else None
        if v is was:
            continue  # as stored
        items = sub.items
        if type(v) is dict and sub.fields is not None:
            _nil_struct(sub, v, was)
        elif type(v) is list and was is None and items is not None and items.fields is not None:
            for item in v:
                if type(item) is dict:
                    _nil_struct(items, item, None)
        else:
            _nil_walk(sub, v, was)


def _nil_plan(shape: Shape, visiting: set[int]) -> NilPlan:
    """A struct's ``Shape.nil_plan``, made once. A recursive type (JSONSchemaProps, which has
    no such field) is not followed into itself."""
    if shape.nil_plan is not None:
        return shape.nil_plan
    if id(shape) in visiting:
        return _NO_NILS
    visiting.add(id(shape))
    here = tuple(k for k in shape.null_fields if k in shape.collections)
    maps = tuple(k for k, sub in (shape.fields or {}).items() if sub.nil_values)
    below = tuple((k, sub) for k, sub in (shape.fields or {}).items() if _has_nils(sub, visiting))
    visiting.discard(id(shape))
    plan = (here, maps, below) if here or maps or below else _NO_NILS
    shape.nil_plan = plan
    return plan


def _has_nils(shape: Shape, visiting: set[int]) -> bool:
    """Whether a value of ``shape`` (a struct, or lists and maps of them) may hold a list or
    map field without ``omitempty``."""
    while shape.fields is None:
        below = shape.items if shape.items is not None else shape.values
        if below is None:
            return False
        shape = below
    return _nil_plan(shape, visiting) is not _NO_NILS


def _zero_fields(name: str, node: Schema, fields: dict[str, Shape]) -> tuple[tuple[str, Any], ...]:
    """The (field, zero value) pairs of a built-in struct's scalars that Go always writes.

    Only plain strings, integers, numbers and booleans: a Time's zero is written as
    null (``_NULL_TIMES``), a Quantity's or an IntOrString's are not this struct's to guess,
    a []byte's is null."""
    omitted = _OMITTED.get(name, frozenset())
    out: list[tuple[str, Any]] = []
    for r in (*node.get("required", ()), *_ALSO_WRITTEN.get(name, ())):
        sub = fields.get(r)
        if sub is None or r in omitted or any(r == k for k, _ in out):
            continue
        if sub.expect in _ZERO and sub.parse is None:
            out.append((r, _ZERO[sub.expect]))
    return tuple(out)


def _go_type(shape: Shape, kind: str | None, format_: Any) -> str:
    """The Go type of a node that is not a named definition, as Go writes it."""
    if shape.items is not None:
        return f"[]{shape.items.go_type}" if shape.items.go_type else ""
    if shape.values is not None:
        return f"map[string]{shape.values.go_type}" if shape.values.go_type else ""
    if kind == "integer":
        return format_ if format_ in _INT_BOUNDS else "int"
    return {"string": "string", "boolean": "bool", "number": "float64"}.get(kind or "", "")


def go_type_error(root: Shape, path: str, given: str) -> str | None:
    """Go's decoding error for a value of JSON type ``given`` at ``path`` (as ``Findings``
    writes it) of a built-in kind: the innermost struct's type, the path of field names
    (Go leaves out list indexes and map keys) and the field's Go type, as in
    ``json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of
    type int32``. None where the schema does not say (a custom resource's)."""
    shape: Shape | None = root
    struct, fields = "", []
    for index, name in _PATH_TOKEN.findall(path):
        if shape is None:
            return None
        if index:
            shape = shape.items
        elif shape.fields is not None:
            struct = shape.struct
            fields.append(name)
            shape = shape.fields.get(name)
        elif shape.values is not None:
            shape = shape.values
            if shape.fields is None and shape.values is None and shape.items is None:
                break  # a scalar map value: what follows is the rest of a key with dots
        else:
            return None
    if shape is None or not struct or not fields or not shape.go_type:
        return None
    return f"json: cannot unmarshal {given} into Go struct field {struct}.{'.'.join(fields)} of type {shape.go_type}"


def converter_error(root: Shape, obj: Any, path: str) -> str | None:
    """apimachinery's unstructured converter's error for the value at ``path`` of ``obj`` (a
    built-in kind), which a strategic merge patch's result is decoded with: ``unrecognized
    type: int32`` for a string where an int32 belongs, ``cannot convert int64 to string``,
    ``cannot restore map from string``, ``cannot restore slice from map``, ``cannot restore
    struct from: string``. None where the schema does not say."""
    shape: Shape | None = root
    value = obj
    for index, name in _PATH_TOKEN.findall(path):
        if shape is None:
            return None
        if index:
            if not isinstance(value, list) or int(index) >= len(value):
                return None
            shape, value = shape.items, value[int(index)]
        elif isinstance(value, dict) and name in value and (shape.fields is not None or shape.values is not None):
            shape = shape.fields.get(name) if shape.fields is not None else shape.values
            value = value[name]
        else:
            return None
    if shape is None or not shape.go_type:
        return None
    given = _GO_KIND.get(type(value), "")
    dest = shape.go_type
    if dest.startswith("map["):
        return f"cannot restore map from {given}"
    if dest.startswith("[]"):
        return f"cannot restore slice from {given}"
    if shape.fields is not None:
        return f"cannot restore struct from: {given}"
    if dest == "string" and given == "int64":
        return "cannot convert int64 to string"
    if dest in _INT_BOUNDS and given == "float64":
        return f"cannot convert float64 to {dest}"
    return f"unrecognized type: {dest}"


# reflect.Kind names of the Go values a decoded JSON value is (integers kept as int64)
_GO_KIND = {str: "string", int: "int64", float: "float64", bool: "bool", dict: "map", list: "slice"}
_PATH_TOKEN = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")
_INT_BOUNDS = {"int32": 1 << 31, "int64": 1 << 63}
_INT_TYPES = {bound: name for name, bound in _INT_BOUNDS.items()}


def _expect(shape: Shape, kind: str | None) -> None:
    shape.expect = kind
    shape.accepts = _ACCEPTS[kind] if kind is not None else _ANY_TYPE


def _enforced(prop: Schema | None, resolve: Resolve) -> bool:
    if prop is None:
        return False
    ref = prop.get("$ref")
    target = resolve(ref) if isinstance(ref, str) else prop
    return type_of(target) not in _ZERO_VALUE_OK


@functools.cache
def _builtin_named() -> tuple[Definitions, dict[str, Shape]]:
    return definitions(), {}


def _builtin_resolver(defs: Definitions) -> Resolve:
    return lambda ref: defs.resolve({"$ref": ref})


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# Kinds without a built-in definition whose schema was given at run time (custom resources).
_custom: dict[tuple[str, str, str], Shape] = {}


def shape_of(group: str, version: str, kind: str) -> Shape | None:
    """The compiled schema of a kind: a registered one, else the built-in one, else None."""
    gvk = (group, version, kind)
    custom = _custom.get(gvk)
    if custom is not None:
        return custom
    return _builtin_shape(gvk)


@functools.cache
def _builtin_shape(gvk: tuple[str, str, str]) -> Shape | None:
    defs, named = _builtin_named()
    name = defs.name_of(*gvk)
    if name is None:
        return None
    return compile_schema({"$ref": f"#/$defs/{name}"}, _builtin_resolver(defs), named)


@functools.cache
def metadata_shape() -> Shape:
    """An object's ``metadata`` as ObjectMeta, and nothing else of it: what a custom
    resource's write is checked against where its CRD's schema has no say (upstream
    decodes every custom resource's metadata into ObjectMeta: a value of another type,
    ``labels: {"a": 1}``, does not decode)."""
    defs, named = _builtin_named()
    shape = Shape()
    shape.fields = {"metadata": compile_schema({"$ref": f"#/$defs/{_OBJECT_META}"}, _builtin_resolver(defs), named)}
    return shape


def register_schema(group: str, version: str, kind: str, schema: Schema | None) -> None:
    """Validate ``kind`` against ``schema`` (a CRD version's ``openAPIV3Schema``: no ``$ref``),
    or, with None, stop validating it.

    As for custom resources upstream, ``apiVersion`` and ``kind`` are strings and
    ``metadata`` is checked as ObjectMeta whatever the schema says of them."""
    if schema is None:
        _custom.pop((group, version, kind), None)
        return

    def no_refs(ref: str) -> Schema:
        raise ValueError(f"a custom resource schema cannot use $ref ({ref})")

    shape = compile_schema(schema, no_refs)
    if shape.fields is not None:
        defs, named = _builtin_named()
        shape.fields = {**shape.fields, "apiVersion": Shape(), "kind": Shape(),
                        "metadata": compile_schema({"$ref": f"#/$defs/{_OBJECT_META}"}, _builtin_resolver(defs),
                                                   named)}
    _custom[(group, version, kind)] = shape


# -- duplicates ---------------------------------------------------------------------
_WHITESPACE = b" \t\n\r"


def key_tokens(body: bytes) -> int:
    """The number of object keys in ``body`` (valid JSON), counted on the raw bytes.

    Every key is a string token followed, after optional whitespace, by ``:``. With
    the whitespace removed, each key ends in ``":``; the only other ``":`` are
    escaped quotes inside strings, those preceded by an odd run of backslashes
    (removing whitespace keeps a run's parity: a run cut by whitespace is whole
    ``\\\\`` escapes before it). If ``c_k`` counts ``":`` preceded by at least
    ``k`` backslashes, the escaped ones number ``c_1 - c_2 + c_3 - ...``. A few
    C-speed scans (about 5% of decoding the body with orjson), where a regex
    tokenizer costs more than the decoding itself."""
    flat = body.translate(None, _WHITESPACE)
    keys = flat.count(b'":')
    needle, sign = b'\\":', 1
    while (c := flat.count(needle)) > 0:
        keys -= sign * c
        needle, sign = b"\\" + needle, -sign
    return keys


def may_have_duplicates(body: bytes, decoded_keys: int) -> bool:
    """Whether ``body`` (valid JSON) holds more object keys than the ``decoded_keys``
    its decoded tree has: exactly when some object gave a key twice."""
    return key_tokens(body) > decoded_keys


def decode_with_duplicates(body: bytes) -> tuple[Any, dict[int, list[str]]]:
    """Decode ``body`` (slowly), noting for each object the keys it had more than once.

    The duplicates are keyed by ``id()`` of the decoded dict, valid while the tree lives."""
    dups: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        repeated: list[str] = []
        for k, v in items:
            if k in obj and k not in repeated:
                repeated.append(k)
            obj[k] = v
        if repeated:
            dups[id(obj)] = repeated
        return obj

    return json.loads(body, object_pairs_hook=pairs), dups
