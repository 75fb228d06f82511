"""An applied configuration typed as structured-merge-diff types it before a merge
(``typed/validate.go``, ``typed/helpers.go``), and why it cannot be, in its words.

kube-apiserver's field manager makes the configuration a typed value of the kind's schema
(``typeConverter.ObjectToTyped``); what does not fit is its 400 (a 500 upstream for now)
``failed to create typed patch object (ns/name; gvk): <errors>``, each error its path
(``fieldpath.PathElement.String``: ``.spec``, ``[0]``, ``[name="c"]``, ``[=80]``) and a
message::

    .spec.replicas: expected numeric (int or float), got string
    .spec.template.spec.containers: expected list, got &{map[a:1]}
    .spec.template.spec.containers[name="c"].ports: expected list, got &{map[a:1]}
    .spec.template.spec.containers[name="c"].bogus: field not declared in schema
    .spec.template.spec.containers: duplicate entries for key [name="c"]

Several are listed after ``errors:``, two spaces before each. Values are
``*value.valueUnstructured`` as ``fmt`` prints them: ``%v`` is ``&{...}`` around the Go
value, ``%#v`` ``&value.valueUnstructured{Value:...}``, ``%T`` of the Go value
``map[string]interface {}``. A number is any number (an int64 or a float64: 3.5 for an
int32 is the unstructured converter's to refuse, after the merge); a Time, Quantity or
IntOrString is an untyped scalar (kube-openapi's ``schemaconv``), any scalar.

The types come from ``validation.Shape`` (the JSON type each node expects), the list
identities (keys, sets) from ``shapes.Shape``, as the merge sees them.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..gonumbers import format_v
from ..gostrings import quote
from . import shapes
from .fieldpath import path_string, set_element
from .typed import ShapeError, item_element
from .validation import Shape

__all__ = ["custom_type", "typed_errors"]

# scalars kube-openapi's schemaconv makes untyped (a string format it does not know, a
# Quantity): any scalar is one
_UNTYPED = frozenset({"intstr.IntOrString", "resource.Quantity", "v1.Time", "v1.MicroTime"})


def typed_errors(shape: Shape, apply_shape: shapes.Shape | None, config: Any) -> list[str]:
    """Why ``config`` is no typed value of ``shape`` (``apply_shape`` identifying its lists'
    items), each error as ``ValidationError.Error`` writes it, in the order of the walk."""
    errors: list[tuple[str, str]] = []
    _walk(shape, apply_shape, config, "", errors)
    return [f"{path}: {message}" if path else message for path, message in errors]


_customs: dict[int, tuple[dict[str, Any], Shape]] = {}
_CUSTOM_LIMIT = 256


def custom_type(openapi_schema: dict[str, Any]) -> Shape:
    """The types of a custom resource version served with this ``openAPIV3Schema`` (a
    structural schema; cached while it lives), as kube-openapi's ``schemaconv`` makes them:
    the properties of an object typed, what ``x-kubernetes-preserve-unknown-fields`` keeps
    beside them (or an object that declares nothing) anything. Its ``apiVersion``, ``kind``
    and ``metadata`` are not the schema's."""
    got = _customs.get(id(openapi_schema))
    if got is not None and got[0] is openapi_schema:
        return got[1]
    shape = _custom_node(openapi_schema)
    if len(_customs) >= _CUSTOM_LIMIT:
        _customs.clear()
    _customs[id(openapi_schema)] = (openapi_schema, shape)
    return shape


_ANYTHING = Shape()  # (no type, no fields, no values: not walked)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})


def _custom_node(node: dict[str, Any]) -> Shape:
    shape = Shape()
    kind = node.get("type")
    if kind not in _TYPES or node.get("x-kubernetes-int-or-string"):
        kind = None  # (an IntOrString: any scalar)
    shape.expect = kind
    props, extra = node.get("properties"), node.get("additionalProperties")
    if kind == "object" or isinstance(props, dict) or isinstance(extra, dict):
        if isinstance(props, dict):
            shape.fields = {k: _custom_node(v) for k, v in props.items() if isinstance(v, dict)}
        if isinstance(extra, dict):
            shape.values = _custom_node(extra)
        elif node.get("x-kubernetes-preserve-unknown-fields") or not isinstance(props, dict):
            shape.values = _ANYTHING
    items = node.get("items")
    if kind == "array" and isinstance(items, dict):
        shape.items = _custom_node(items)
    return shape


def _walk(shape: Shape, apply: shapes.Shape | None, value: Any, path: str, errors: list[tuple[str, str]]) -> None:
    if value is None:  # a null fits every type
        return
    expect, t = shape.expect, type(value)
    if shape.parse is not None and shape.go_type in _UNTYPED:
        if t is dict or t is list:
            errors.append((path, f"expected any scalar, got {_v(value)}"))
        return
    if expect in ("integer", "number"):
        if t is not int and t is not float:
            errors.append((path, f"expected numeric (int or float), got {_go_type(value)}"))
        return
    if expect == "string":
        if t is not str:
            errors.append((path, f"expected string, got {_sharp_v(value)}"))
        return
    if expect == "boolean":
        if t is not bool:
            errors.append((path, f"expected boolean, got {_v(value)}"))
        return
    if expect == "array" or (expect is None and t is list and shape.items is not None):
        if t is not list:
            errors.append((path, f"expected list, got {_v(value)}"))
        elif shape.items is not None:
            _list(shape.items, apply, value, path, errors)
        return
    if expect == "object" or (expect is None and t is dict and (shape.fields is not None or shape.values is not None)):
        if t is not dict:
            errors.append((path, f"expected map, got {_v(value)}"))
        else:
            _map(shape, apply, value, path, errors)


def _map(shape: Shape, apply: shapes.Shape | None, value: dict[str, Any], path: str,
         errors: list[tuple[str, str]]) -> None:
    """``visitMapItems``: a key the struct does not declare (and no map value type takes) is
    an error, and ends the walk of this map."""
    fields, values = shape.fields, shape.values
    if fields is None and values is None:
        return  # anything (opaque, or preserved unknown fields)
    granular = apply is not None and apply.walk == shapes.WALK_DICT
    for k, v in value.items():
        sub = fields.get(k) if fields is not None else None
        if sub is None:
            sub = values
        if sub is None:
            if granular and apply is not None and apply.field(k) is not None:
                continue  # (an embedded resource's apiVersion, kind and metadata; what is preserved)
            errors.append((f"{path}.{k}", "field not declared in schema"))
            return
        _walk(sub, (apply.field(k) if granular else None) if apply is not None else None, v, f"{path}.{k}", errors)


def _list(items: Shape, apply: shapes.Shape | None, value: list[Any], path: str,
          errors: list[tuple[str, str]]) -> None:
    """``visitListItems``: an associative list's (or set's) items named by their keys (or
    value), a duplicate an error of the list; an item that cannot be named ends the walk
    of the list (``element 2: ...``)."""
    kind = apply.kind if apply is not None else None
    if kind is not shapes.Kind.ASSOCIATIVE and kind is not shapes.Kind.SET:
        for i, item in enumerate(value):
            _walk(items, None, item, f"{path}[{i}]", errors)
        return
    assert apply is not None
    seen: set[str] = set()
    elem = apply.elem
    for i, item in enumerate(value):
        element, why = _element(apply, item)
        if element is None:
            errors.append((path, f"element {i}: {why}"))
            return
        name = path_string((element,))
        if element in seen:
            errors.append((path, f"duplicate entries for key {name}"))
        seen.add(element)
        _walk(items, elem if kind is shapes.Kind.ASSOCIATIVE else None, item, path + name, errors)


def _element(apply: shapes.Shape, item: Any) -> tuple[str | None, str]:
    """The path element of a list item (``k:{...}``, ``v:...``), or None and why not
    (``keyedAssociativeListItemToPathElement``, ``setItemToPathElement``)."""
    if apply.kind is shapes.Kind.SET:
        if type(item) is dict:
            return None, "associative list without keys has an element that's a map type"
        if type(item) is list:
            return None, "not supported: associative list with lists as elements"
        if item is None:
            return None, "associative list without keys has an element that's an explicit null"
        return set_element(item), ""
    try:
        return item_element(apply, item), ""
    except ShapeError as e:
        return None, str(e)


def _go_type(value: Any) -> str:
    """``%T`` of the Go value an unstructured object holds."""
    if type(value) is bool:
        return "bool"
    if type(value) is int:
        return "int64"
    if type(value) is float:
        return "float64"
    if type(value) is str:
        return "string"
    if type(value) is list:
        return "[]interface {}"
    return "map[string]interface {}"


def _v(value: Any) -> str:
    """``%v`` of a ``*valueUnstructured`` holding ``value``."""
    return "&{" + _plain(value) + "}"


def _plain(value: Any) -> str:
    """``%v`` of a Go value of unstructured JSON: ``map[a:1 b:[x y]]`` (keys sorted)."""
    if type(value) is dict:
        return "map[" + " ".join(f"{k}:{_plain(value[k])}" for k in sorted(value)) + "]"
    if type(value) is list:
        return "[" + " ".join(_plain(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return format_v(value)
    return str(value)


def _sharp_v(value: Any) -> str:
    """``%#v`` of a ``*valueUnstructured`` holding ``value``."""
    return "&value.valueUnstructured{Value:" + _go_syntax(value) + "}"


def _go_syntax(value: Any) -> str:
    """``%#v`` of a Go value of unstructured JSON, inside an ``interface{}``."""
    if type(value) is dict:
        return "map[string]interface {}{" + ", ".join(f"{quote(k)}:{_go_syntax(value[k])}"
                                                      for k in sorted(value)) + "}"
    if type(value) is list:
        return "[]interface {}{" + ", ".join(_go_syntax(v) for v in value) + "}"
    if value is None:
        return "interface {}(nil)"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return format_v(value)
    if type(value) is str:
        return quote(value)
    return orjson.dumps(value).decode()
