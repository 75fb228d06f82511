"""The static cost of a CRD's CEL rules, estimated as upstream estimates it at the CRD's
write, so that the CRDs it refuses for their cost are refused here too::

    schema = {"type": "array", "items": {"type": "string"}}
    expression_cost("self.all(x, x.matches('^[a-z]+$'))", {"self": schema_type(schema)}, schema, root=False)
    # 659710961252: far over StaticEstimatedCostLimit (10,000,000)

Upstream's estimate is cel-go's ``checker/cost.go`` with Kubernetes' ``library/cost.go``,
fed with the sizes a schema allows (apiextensions' ``schema/cel/compilation.go`` sizes a
value by its path from ``self``, through ``apiserver/pkg/cel/common/schemas.go``): a
string's ``maxLength`` times 4 (its longest enum value, a date's, a duration's fixed length,
or else the 3 MiB request less its quotes), a list's ``maxItems`` (or as many of its
smallest items as fit in a request), a map's ``maxProperties`` (the same). The estimate
walks the rule as cel-go expands it: a macro is a comprehension whose body costs its
condition and step once per item of its range, an ``all``'s ``3 + body``, an
``exists``'s ``4 + body``; a selection costs 1 more than its operand (of an object or a
map), a variable 1, a literal 0, a list literal 10, a map literal 30, ``&&`` and ``||`` the
sum of their sides, ``a ? b : c`` ``a`` and the dearer of the others, ``matches`` the
string's length + 1 times 0.1 times the pattern's length times 0.25 (each rounded up),
``contains`` the two lengths times 0.1 each, ``startsWith``/``endsWith`` the prefix's times
0.1, ``==`` on strings the shorter's times 0.1, ``in`` a list the list's size, Kubernetes'
``find``/``findAll`` as ``matches``, ``isSorted``/``sum``/``min``/``max`` 1 per item (and
a string item's length times 0.1), and most other calls 1 plus their arguments.

Precision over coverage: the number is a lower bound of upstream's. Where its model is
unsure (a size upstream knows only as a worst case, a library function whose estimate it
does not model, a value of a type it leaves ``dyn``) it counts the least upstream could,
0 for a size or a call's own cost, so a CRD it refuses upstream refuses too, and some that
upstream refuses pass here. An expression ``registry/celcheck.py`` does not read, or finds
errors in, is not estimated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .celcheck import CelType, typed_tree
from .celsyntax import unescaped

__all__ = ["MAX_UINT64", "RULE_LIMIT", "SCHEMA_LIMIT", "cardinality_below", "cost_message", "expression_cost",
           "max_cardinality", "max_elements", "min_size"]

RULE_LIMIT = 10_000_000  # StaticEstimatedCostLimit: one rule, times how often it may run
SCHEMA_LIMIT = 100_000_000  # StaticEstimatedCRDCostLimit: all the rules of one schema
MAX_UINT64 = 2**64 - 1
_REQUEST = 3 * 1024 * 1024  # DefaultMaxRequestSizeBytes
_FORMAT_SIZES = {"duration": 32, "date": 12, "date-time": 32}  # the longest such value, quoted
_FORMAT_MIN_SIZES = {"duration": 3, "date": 12, "date-time": 21, "byte": 2}
_STRING_FACTOR = 0.1  # StringTraversalCostFactor
_REGEX_FACTOR = 0.25  # RegexStringLengthCostFactor


# -- what a schema allows ------------------------------------------------------------------------
def _typed(schema: Any) -> bool:
    """Whether upstream's ``SchemaDeclType`` gives ``schema`` a type (a property without one
    is left out of CEL)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-int-or-string") is True:
        return True
    t = schema.get("type")
    if t == "array":
        return _typed(schema.get("items"))
    if t == "object":
        extra = schema.get("additionalProperties")
        return _typed(extra) if isinstance(extra, dict) else True
    return t in ("string", "boolean", "number", "integer")


def _properties(schema: dict[str, Any], root: bool) -> dict[str, Any]:
    """The properties of an object; a resource's root (and an embedded resource) has
    ``apiVersion``, ``kind`` and ``metadata`` (``name``, ``generateName``) as plain strings
    unless it declares them all so (``WithTypeAndObjectMeta``)."""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    if not (root or schema.get("x-kubernetes-embedded-resource") is True):
        return props
    meta = props.get("metadata")
    meta_props = meta.get("properties") if isinstance(meta, dict) else None

    def is_string(node: Any) -> bool:
        return isinstance(node, dict) and node.get("type") == "string"

    if is_string(props.get("kind")) and is_string(props.get("apiVersion")) and isinstance(meta_props, dict) \
            and is_string(meta_props.get("name")) and is_string(meta_props.get("generateName")):
        return props
    plain = {"type": "string"}
    return {**props, "kind": plain, "apiVersion": plain,
            "metadata": {"type": "object", "properties": {"name": plain, "generateName": plain}}}


def min_size(schema: Any, root: bool = False) -> int:
    """``DeclType.MinSerializedSize``: the fewest bytes a value of ``schema`` takes in JSON."""
    if not isinstance(schema, dict):
        return 1
    if schema.get("x-kubernetes-int-or-string") is True:
        return 1
    t = schema.get("type")
    if t == "string":
        return _FORMAT_MIN_SIZES.get(schema.get("format"), 2)  # type: ignore[arg-type]
    if t == "boolean":
        return 4
    if t in ("number", "integer"):
        return 1
    if t == "array" or (t == "object" and isinstance(schema.get("additionalProperties"), dict)):
        return 2
    if t != "object":
        return 1
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    size = 2
    for name, prop in _properties(schema, root).items():
        if name in required and _typed(prop) and "default" not in prop:
            size += len(name.encode()) + min_size(prop, prop.get("x-kubernetes-embedded-resource") is True) + 4
    return size


def max_elements(schema: Any) -> int:
    """``DeclType.MaxElements``: the most characters of a string (bytes of a byte string),
    items of a list, entries of a map a value of ``schema`` may hold; 0 for other types."""
    if not isinstance(schema, dict):
        return 0
    if schema.get("x-kubernetes-int-or-string") is True:
        return _max_length(schema, 4)
    t = schema.get("type")
    if t == "string":
        fmt = schema.get("format")
        if fmt in _FORMAT_SIZES:
            return _FORMAT_SIZES[fmt]
        if fmt == "byte":
            return _max_length(schema, 1)
        enum = schema.get("enum")
        if not isinstance(schema.get("maxLength"), int) and isinstance(enum, list) and enum:
            return max((len(v.encode()) for v in enum if isinstance(v, str)), default=0)
        return _max_length(schema, 4)
    if t == "array":
        items = schema.get("items")
        bound = schema.get("maxItems")
        if isinstance(bound, int):
            return max(bound, 0)
        return (_REQUEST - 2) // (min_size(items, _embedded(items)) + 1)
    if t == "object" and isinstance(schema.get("additionalProperties"), dict):
        extra = schema["additionalProperties"]
        bound = schema.get("maxProperties")
        if isinstance(bound, int):
            return max(bound, 0)
        return (_REQUEST - 2) // (min_size(extra, _embedded(extra)) + 6)
    return 0


def _max_length(schema: dict[str, Any], per_character: int) -> int:
    bound = schema.get("maxLength")
    return max(bound, 0) * per_character if isinstance(bound, int) else _REQUEST - 2


def _embedded(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("x-kubernetes-embedded-resource") is True


def max_cardinality(schema: Any, root: bool) -> int:
    """How often a rule of ``schema`` may run at most when a list or map above it is
    unbounded (compilation.go's ``maxCardinality``): as many of its smallest values as fit in a
    request, each with a comma."""
    return _REQUEST // (min_size(schema, root) + 1)


def cardinality_below(cardinality: int | None, schema: Any) -> int | None:
    """The cardinality of the children of ``schema`` (``CELSchemaContext.childContext``): a
    list's times its ``maxItems``, a map's times its ``maxProperties``, an object's the same;
    None (unbounded) under a list or map without its bound."""
    if cardinality is None or not isinstance(schema, dict):
        return cardinality
    t = schema.get("type")
    if t == "array":
        bound = schema.get("maxItems")
    elif t == "object" and schema.get("additionalProperties") not in (None, False):
        bound = schema.get("maxProperties")
    else:
        return cardinality
    return min(cardinality * max(bound, 0), MAX_UINT64) if isinstance(bound, int) else None


def cost_message(name: str, cost: int, limit: int) -> str:
    """apiextensions' ``getCostErrorMessage``, with Go's formatting of the factor."""
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (f"{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, "
            "maxProperties, and maxLength where arrays, maps, and strings are declared)")


# -- the estimate ----------------------------------------------------------------------------------
@dataclass
class _Cost:
    cost: int  # the most it may cost (a lower bound of upstream's Max)
    size: int = 0  # the largest value it may be (string length, list or map size); 0 when not known
    schema: Any = None  # the schema of the value, when it is one a path from self reaches


_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter", "transformList",
                             "transformMap", "transformMapEntry"})
_ONE = frozenset({"size", "int", "uint", "double", "bool", "type", "duration", "timestamp", "getFullYear",
                  "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours", "getMinutes",
                  "getSeconds", "getMilliseconds", "!_", "-_", "@not_strictly_false"})
_ARITHMETIC = frozenset({"_-_", "_*_", "_/_", "_%_"})
_ORDERING = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
_TEXT = frozenset({"string", "bytes"})
_LIST_WALKS = frozenset({"isSorted", "sum", "min", "max"})
_SCALARS = frozenset({"int", "uint", "double", "bool"})
# calls whose size is an argument's (or an item's, reached by its path), not their type's
_SIZED_AS_ARGUMENT = frozenset({"_[_]", "dyn", "_?_:_", "bind"})


def _mul(a: int, b: int) -> int:
    return min(a * b, MAX_UINT64)


def _factor(size: int, factor: float) -> int:
    return min(math.ceil(size * factor), MAX_UINT64)


class _Estimator:
    def __init__(self, types: dict[int, CelType], roots: dict[str, tuple[Any, bool]]) -> None:
        self.types = types
        self.roots = roots  # variable: (its schema, whether a resource's root)

    def kind(self, node: Any) -> str:
        t = self.types.get(id(node))
        return t.kind if t is not None else "dyn"

    def estimate(self, node: Any, scope: dict[str, _Cost]) -> _Cost:
        if node.kind == "lit":
            return _Cost(0, _literal_size(node))
        if node.kind == "ident":
            if node.name in scope:
                bound = scope[node.name]
                return _Cost(1, bound.size, bound.schema)
            if node.name in self.roots:
                schema, root = self.roots[node.name]
                return _Cost(1, max_elements(schema), (schema, root))
            return _Cost(1)
        if node.kind == "select":
            operand = self.estimate(node.target, scope)
            if node.optional:
                return _Cost(operand.cost)
            cost = operand.cost + (1 if self.kind(node.target) in ("object", "map") else 0)
            field = self.field(operand.schema, node.name)
            return _Cost(cost, max_elements(field[0]) if field else 0, field)
        if node.kind == "list":
            parts = [self.estimate(a, scope) for a in node.args]
            return _Cost(10 + sum(p.cost for p in parts), len(parts))
        if node.kind == "map":
            parts = [self.estimate(a, scope) for a in node.args]
            return _Cost(30 + sum(p.cost for p in parts), len(parts) // 2)
        if node.kind == "struct":
            return _Cost(40 + sum(self.estimate(a, scope).cost for a in node.args[1::2]))
        found = self.call(node, scope)
        if not found.size and node.name not in _SIZED_AS_ARGUMENT and self.kind(node) in _SCALARS:
            found.size = 1  # cel-go sizes a scalar result it has no size for at 1 (computeTypeSize)
        return found

    def item_kind(self, node: Any) -> str:
        t = self.types.get(id(node))
        return t.elem.kind if t is not None and t.kind == "list" and t.elem is not None else "dyn"

    def field(self, at: Any, name: str) -> tuple[Any, bool] | None:
        """The schema a selection of ``name`` reaches from the schema ``at`` (an object's
        property, by its unescaped name, if it has a type)."""
        if at is None:
            return None
        schema, root = at
        if not isinstance(schema, dict) or schema.get("type") != "object" \
                or isinstance(schema.get("additionalProperties"), dict):
            return None
        prop = _properties(schema, root).get(unescaped(name) or name)
        return (prop, _embedded(prop)) if _typed(prop) else None

    def element(self, at: Any) -> tuple[Any, bool] | None:
        """The schema of a list's items, or of a map's values."""
        if at is None or not isinstance(at[0], dict):
            return None
        schema = at[0]
        child = schema.get("items") if schema.get("type") == "array" else schema.get("additionalProperties")
        return (child, _embedded(child)) if _typed(child) else None

    def call(self, node: Any, scope: dict[str, _Cost]) -> _Cost:
        name, args, target = node.name, node.args, node.target
        if target is None and name == "has" and len(args) == 1 and args[0].kind == "select":
            return _Cost(0)  # a presence test, its operand too, costs 0 in upstream's own tests
        if target is not None and target.kind == "ident" and target.name == "cel" and name == "bind" \
                and len(args) == 3 and args[0].kind == "ident" and "cel" not in scope:
            init = self.estimate(args[1], scope)
            body = self.estimate(args[2], {**scope, args[0].name: init})
            return _Cost(10 + init.cost + body.cost, body.size)
        if target is not None and name in _COMPREHENSIONS and args and all(a.kind == "ident" for a in args[:1]):
            return self.comprehension(node, scope)
        over = self.estimate(target, scope) if target is not None else None
        parts = [self.estimate(a, scope) for a in args]
        spent = sum(p.cost for p in parts) + (over.cost if over is not None else 0)
        kinds = [self.kind(a) for a in args]
        if name in ("_&&_", "_||_"):
            return _Cost(spent)
        if name == "_?_:_":
            return _Cost(parts[0].cost + max(parts[1].cost, parts[2].cost), max(parts[1].size, parts[2].size))
        if name in ("_==_", "_!=_"):
            return _Cost(spent + _factor(min(parts[0].size, parts[1].size), _STRING_FACTOR))
        if name in _ORDERING:
            if kinds[0] in _TEXT and kinds[1] in _TEXT:
                return _Cost(spent + _factor(min(parts[0].size, parts[1].size), _STRING_FACTOR))
            return _Cost(spent + (1 if "dyn" not in kinds else 0))
        if name == "_+_":
            if kinds[0] in _TEXT and kinds[1] in _TEXT:
                size = parts[0].size + parts[1].size
                return _Cost(spent + _factor(size, _STRING_FACTOR), size)
            if kinds[0] == "list" and kinds[1] == "list":
                return _Cost(spent + 1, parts[0].size + parts[1].size)
            return _Cost(spent + (1 if "dyn" not in kinds else 0))
        if name in _ARITHMETIC:
            return _Cost(spent + (1 if "dyn" not in kinds else 0))
        if name == "@in":
            if kinds[1] == "list":
                return _Cost(spent + parts[1].size)
            return _Cost(spent + (1 if kinds[1] == "map" else 0))
        if name == "_[_]":
            if kinds[0] not in ("list", "map"):
                return _Cost(spent)
            element = self.element(parts[0].schema)
            return _Cost(spent + 1, max_elements(element[0]) if element else 0, element)
        if name == "dyn" and len(parts) == 1:
            return _Cost(spent + 1, parts[0].size, parts[0].schema)
        if name in _ONE:
            return _Cost(spent + 1)
        if over is not None and not parts and name in _LIST_WALKS and self.kind(target) == "list":
            # Kubernetes' lists library: 1 per item, and the item's length times 0.1 for strings
            element = self.element(over.schema)
            each = 1 + (_factor(max_elements(element[0]), _STRING_FACTOR)
                        if element and self.item_kind(target) in _TEXT else 0)
            return _Cost(spent + _mul(over.size, each))
        if over is not None and len(parts) == 1 and name in ("find", "findAll") and self.kind(target) == "string":
            # Kubernetes' regex library, as matches: the result at most as long as the string
            return _Cost(spent + _mul(_factor(over.size + 1, _STRING_FACTOR), _factor(parts[0].size, _REGEX_FACTOR)),
                         over.size)
        if over is not None and len(parts) == 1:
            if name == "matches":
                return _Cost(spent + _mul(_factor(over.size + 1, _STRING_FACTOR),
                                          _factor(parts[0].size, _REGEX_FACTOR)))
            if name == "contains" and self.kind(target) == "string":
                return _Cost(spent + _mul(_factor(over.size, _STRING_FACTOR), _factor(parts[0].size, _STRING_FACTOR)))
            if name in ("startsWith", "endsWith"):
                return _Cost(spent + _factor(parts[0].size, _STRING_FACTOR))
        return _Cost(spent)  # a library function: its own cost not modelled

    def comprehension(self, node: Any, scope: dict[str, _Cost]) -> _Cost:
        name, args = node.name, node.args
        over = self.estimate(node.target, scope)
        two = name in ("transformList", "transformMap", "transformMapEntry") \
            or (name in ("all", "exists", "exists_one", "existsOne") and len(args) == 3)
        bound = 2 if two else 1
        if any(a.kind != "ident" for a in args[:bound]) or len(args) <= bound:
            return _Cost(over.cost)
        kind = self.kind(node.target)
        element = self.element(over.schema)
        item = _Cost(0, max_elements(element[0]) if element else 0, element)
        if kind == "list":
            names = {args[0].name: item} if bound == 1 else {args[0].name: _Cost(0), args[1].name: item}
        elif kind == "map":
            names = {args[0].name: _Cost(0)} if bound == 1 else {args[0].name: _Cost(0), args[1].name: item}
        else:
            names = {a.name: _Cost(0) for a in args[:bound]}
        inner = {**scope, **names}
        bodies = [self.estimate(a, inner).cost for a in args[bound:]]
        count = over.size
        if name == "all":
            return _Cost(over.cost + 1 + _mul(count, 3 + bodies[0]))
        if name == "exists":
            return _Cost(over.cost + 1 + _mul(count, 4 + bodies[0]))
        if name in ("exists_one", "existsOne"):
            return _Cost(over.cost + 2 + _mul(count, 2 + bodies[0]))
        if name == "map":
            return _Cost(over.cost + 11 + _mul(count, 12 + sum(bodies)), count)
        if name == "filter":
            return _Cost(over.cost + 11 + _mul(count, 13 + bodies[0]), count)
        return _Cost(over.cost + _mul(count, sum(bodies)))  # the two-variable transforms: their bodies only


def _literal_size(node: Any) -> int:
    """A literal's size as cel-go counts it: a string's characters, a bytes literal's bytes
    (here, its characters too), 1 for a number, a bool or null."""
    text = node.name
    if not text:
        return 1
    opener = len(text) - len(text.lstrip("rRbB"))
    prefix, body = text[:opener].lower(), text[opener:]
    quote = 3 if body[:3] in ("'''", '"""') else 1
    body = body[quote:len(body) - quote]
    if "r" in prefix:
        return len(body)
    size, i = 0, 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            step = {"x": 4, "u": 6, "U": 10}.get(body[i + 1], 4 if body[i + 1].isdigit() else 2)
            i += step
        else:
            i += 1
        size += 1
    return size


def expression_cost(expression: str, variables: dict[str, CelType], schema: Any, root: bool,
                    names: tuple[str, ...] = ("self", "oldSelf")) -> int | None:
    """The estimated cost of ``expression`` (a rule or message expression of ``schema``, whose
    values ``names`` hold, typed ``variables``), a lower bound of cel-go's ``EstimateCost``'s
    ``Max``; None when it is not estimated."""
    tree = typed_tree(expression, variables)
    if tree is None:
        return None
    node, types = tree
    try:
        found = _Estimator(types, dict.fromkeys(names, (schema, root))).estimate(node, {})
    except RecursionError:
        return None
    return min(found.cost, MAX_UINT64)
