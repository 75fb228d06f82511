"""A type checker for CEL expressions, for the common errors cel-go's checker finds at a
rule's write, worded and placed as cel-go reports them (``checker/errors.go``)::

    type_errors("self.replicaz > 0", {"self": schema_type(schema, root=True)})
    # ["ERROR: <input>:1:5: undefined field 'replicaz'\\n | self.replicaz > 0\\n | ....^"]

The interpreter (``registry/expressions.py``) has no checker of its own and no AST to show,
so the expression is parsed again here, with each node at the offset cel-go gives it: a
field selection at its ``.`` (``has()``'s at the macro's ``(``), an operator at its token, a
call at its ``(``, an index at its ``[``. Types come from a structural schema as upstream's ``SchemaDeclType``
(``apiserver/pkg/cel/common/schemas.go``): an object's declared properties (named as
``Escape`` names them, and only so: ``foo-bar`` is ``foo__dash__bar``, ``namespace``
``__namespace__``, and ``self.namespace`` an undefined field), ``additionalProperties`` a map
of strings, ``items`` a list, ``integer`` int, ``number`` double, ``boolean`` bool,
``string`` string (``byte`` bytes), ``x-kubernetes-int-or-string`` dyn; a resource's root
(and an embedded resource) has ``apiVersion``, ``kind`` and ``metadata.name`` and
``generateName`` even when its schema lacks them.

Reported: a field an object's schema does not declare (``undefined field 'x'``); a field
selected on a value that has none (``type 'int' does not support field selection``); the
operators (arithmetic, comparison, logic, ``in``, indexing, the conditional) and
``size``, ``startsWith``, ``endsWith``, ``contains``, ``matches`` applied to known types
they have no overload for (``found no matching overload for '_>_' applied to '(string,
int)'``); a comprehension (``all``, ``exists``, ``exists_one``, ``map``, ``filter``)
over a value that is neither a list nor a map; with ``strict`` (the variables given are all
there are), a name that is neither a variable, a macro's or ``cel.bind``'s, nor a type's
name, and a function no Kubernetes CEL library has (``undeclared reference to 'x' (in
container '')``, at the name, a call's at its ``(``). ``result_type`` says what an expression
evaluates to, for upstream's ``cel expression must evaluate to a bool``. ``typed_tree`` gives
the parsed expression with each node's type, for the cost estimate (``registry/celcost.py``).

Precision over coverage: whatever is ``dyn`` passes, and so does every case where cel-go's
verdict is not certain here: numbers of different kinds compared, functions and methods
this module does not know (their result is ``dyn``), timestamps and durations (strings of
format ``date``, ``date-time``, ``duration`` are ``dyn`` here), properties without a type
(an object with ``x-kubernetes-preserve-unknown-fields`` is typed by its declared fields
alone, as upstream's ``SchemaDeclType``: the fields it preserves are not exposed), names that
are not declared variables (but with ``strict``), functions of a namespace some library has
(``math.greatest``, ``cel.bind``, which Kubernetes' environments lack).
An expression this parser does not read is not checked at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controlplane.registry.celsyntax import RESERVED

__all__ = ["CelType", "DYN", "check", "result_type", "schema_type", "type_errors", "typed_tree"]


# -- types ------------------------------------------------------------------------------------
@dataclass(eq=False)
class CelType:
    """A CEL type: ``kind`` one of dyn, int, uint, double, string, bool, bytes, null, list,
    map, object, optional; a list's ``elem``, a map's ``key`` and ``elem``, an optional's
    ``elem``; an object's schema (its fields read on demand) and its name in messages."""

    kind: str
    elem: CelType | None = None
    key: CelType | None = None
    schema: dict[str, Any] | None = None
    name: str = ""
    open: bool = False  # no type (a root that omits it): undeclared fields are dyn
    resolve: Callable[[Any], Any] | None = field(default=None, repr=False)  # a node's $ref followed
    _fields: dict[str, CelType] | None = field(default=None, repr=False)

    def fields(self) -> dict[str, CelType]:
        if self._fields is None:
            self._fields = _object_fields(self)
        return self._fields


DYN = CelType("dyn")
_SIMPLE = {k: CelType(k) for k in ("int", "uint", "double", "string", "bool", "bytes", "null")}
INT, UINT, DOUBLE, STRING, BOOL, BYTES, NULL = (_SIMPLE[k] for k in
                                                 ("int", "uint", "double", "string", "bool", "bytes", "null"))
_NUMBERS = frozenset({"int", "uint", "double"})
_PRIMITIVES = frozenset({"int", "uint", "double", "string", "bool", "bytes"})
_ROOT_NAME = "selfType0"  # upstream's is random per write (selfType<nanoseconds>)


def list_of(elem: CelType) -> CelType:
    return CelType("list", elem=elem)


def map_of(key: CelType, elem: CelType) -> CelType:
    return CelType("map", key=key, elem=elem)


def optional_of(elem: CelType) -> CelType:
    """``optional_type(elem)``: an ``optionalOldSelf`` rule's ``oldSelf``. Its field is an
    optional of the field (cel-go's checker unwraps the optional for a selection and wraps
    the result), its ``hasValue()``, ``value()``, ``orValue()`` and ``or()`` are typed; an
    equality with a value that is not an optional is refused, and so is any call cel-go
    declares no optional overload of (``_optional_misused``)."""
    return CelType("optional", elem=elem)


def formatted(t: CelType) -> str:
    """A type as cel-go's ``FormatCelType`` prints it."""
    if t.kind == "list":
        return f"list({formatted(t.elem or DYN)})"
    if t.kind == "map":
        return f"map({formatted(t.key or DYN)}, {formatted(t.elem or DYN)})"
    if t.kind == "object":
        return t.name
    if t.kind == "null":
        return "null_type"
    if t.kind == "optional":
        return f"optional_type({formatted(t.elem or DYN)})"
    return t.kind


_ESCAPED = re.compile(r"__|[-./]")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_ESCAPABLE = re.compile(r"[A-Za-z_.\-/][A-Za-z0-9_.\-/]*")


def escaped(name: str) -> str | None:
    """A property's name as CEL reads it (apiserver's ``cel.Escape``), None when it cannot."""
    if name in RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.fullmatch(name):
        return None
    return _ESCAPED.sub(lambda m: _ESCAPES[m.group(0)], name)


def schema_type(schema: Any, root: bool = False, name: str = _ROOT_NAME,
                resolve: Callable[[Any], Any] | None = None) -> CelType:
    """The CEL type of values of ``schema`` (``SchemaDeclType``); ``root`` for a resource's
    root or an embedded resource. ``dyn`` where upstream's type is not modelled here.
    ``resolve`` turns a node of a schema with references (the built-in types' definitions)
    into a structural one."""
    if resolve is not None:
        schema = resolve(schema)
    if not isinstance(schema, dict) or schema.get("x-kubernetes-int-or-string") is True:
        return DYN
    t = schema.get("type")
    if t == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            return DYN
        return list_of(schema_type(items, _embedded(items, resolve), f"{name}.@idx", resolve))
    if t == "object" or (root and t is None):
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return map_of(STRING, schema_type(extra, _embedded(extra, resolve), f"{name}.@elem", resolve))
        if extra is True:
            return DYN
        # x-kubernetes-preserve-unknown-fields does not open it: upstream's SchemaDeclType exposes
        # the declared fields alone, so `self.undeclared` is an undefined field there too
        return CelType("object", schema={**schema, "__root__": root}, name=name, open=t is None, resolve=resolve)
    if t == "string":
        fmt = schema.get("format")
        if fmt == "byte":
            return BYTES
        return DYN if fmt in ("date", "date-time", "duration") else STRING
    return {"boolean": BOOL, "number": DOUBLE, "integer": INT}.get(t, DYN) if isinstance(t, str) else DYN


def _embedded(schema: Any, resolve: Callable[[Any], Any] | None) -> bool:
    node = resolve(schema) if resolve is not None else schema
    return isinstance(node, dict) and node.get("x-kubernetes-embedded-resource") is True


_META_PROPERTIES: dict[str, Any] = {"name": {"type": "string"}, "generateName": {"type": "string"}}
_META_SCHEMA: dict[str, Any] = {"type": "object", "properties": _META_PROPERTIES}


def _object_fields(t: CelType) -> dict[str, CelType]:
    schema = t.schema or {}
    props = schema.get("properties")
    props = dict(props) if isinstance(props, dict) else {}
    if schema.get("__root__"):
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        meta = props.get("metadata")
        if t.resolve is not None and meta is not None:
            meta = t.resolve(meta)
        if not isinstance(meta, dict) or not isinstance(meta.get("properties"), dict):
            props["metadata"] = _META_SCHEMA
        else:
            props["metadata"] = {**meta, "properties": {**_META_PROPERTIES, **meta["properties"]}}
    out: dict[str, CelType] = {}
    for prop_name, prop in props.items():
        if not isinstance(prop_name, str):
            continue
        if t.resolve is not None:
            prop = t.resolve(prop)
        prop_type = schema_type(prop, _embedded(prop, None), f"{t.name}.{prop_name}", t.resolve)
        if isinstance(prop, dict) and prop.get("type") in (None, "") \
                and prop.get("x-kubernetes-int-or-string") is not True:
            prop_type = DYN  # upstream hides such a property; here it is not held against a rule
        cel_name = escaped(prop_name)
        if cel_name is not None:  # only so: upstream's undefined field 'namespace' (its name is __namespace__)
            out[cel_name] = prop_type
    return out


# -- the parser ---------------------------------------------------------------------------------
class _Unreadable(Exception):
    """An expression this parser does not read: not checked."""


@dataclass(eq=False)
class _Node:
    kind: str  # lit ident select call list map struct
    at: int
    name: str = ""
    target: _Node | None = None
    args: list[_Node] = field(default_factory=list)
    literal: CelType | None = None
    optional: bool = False


_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
""", re.VERBOSE)
_KEYWORD_LITERALS = {"true": BOOL, "false": BOOL, "null": NULL}


def _lex(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) tokens; kinds: string, number, name, op, end."""
    out: list[tuple[str, str, int]] = []
    at = 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise _Unreadable(text[at])
        kind = m.lastgroup or ""
        if kind == "string":
            opener = m.group("string")
            quote = opener.lstrip("rRbB")
            raw = "r" in opener[:len(opener) - len(quote)].lower()
            end = m.end()
            while not text.startswith(quote, end):
                if end >= len(text):
                    raise _Unreadable("unterminated string")
                end += 2 if text[end] == "\\" and not raw else 1
            end += len(quote)
            out.append(("bytes" if "b" in opener[:len(opener) - len(quote)].lower() else "string",
                        text[at:end], at))
            at = end
            continue
        if kind != "space":
            out.append((kind, m.group(0), at))
        at = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    """CEL's grammar (cel-spec's ``langdef.md``), by recursive descent."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> tuple[str, str, int]:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self, want: str | None = None) -> tuple[str, str, int]:
        token = self.tokens[self.i]
        if want is not None and token[1] != want:
            raise _Unreadable(f"expected {want!r}")
        self.i += 1
        return token

    def is_op(self, *ops: str) -> bool:
        kind, text, _ = self.peek()
        return kind in ("op", "name") and text in ops

    def parse(self) -> _Node:
        node = self.expr()
        if self.peek()[0] != "end":
            raise _Unreadable("trailing input")
        return node

    def expr(self) -> _Node:
        cond = self.binary(0)
        if self.is_op("?"):
            at = self.take()[2]
            then = self.binary(0)
            self.take(":")
            other = self.expr()
            return _Node("call", at, "_?_:_", args=[cond, then, other])
        return cond

    _LEVELS: tuple[tuple[str, ...], ...] = (("||",), ("&&",), ("<", "<=", ">", ">=", "==", "!=", "in"),
                                             ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> _Node:
        if level == len(self._LEVELS):
            return self.unary()
        ops = self._LEVELS[level]
        if level < 2:  # && and ||: cel-go balances the chain into a tree
            terms, at = [self.binary(level + 1)], []
            while self.is_op(*ops):
                at.append(self.take()[2])
                terms.append(self.binary(level + 1))
            return _balanced(f"_{ops[0]}_", terms, at, 0, len(at) - 1) if at else terms[0]
        left = self.binary(level + 1)
        while self.is_op(*ops):
            _, op, at_ = self.take()
            right = self.binary(level + 1)
            left = _Node("call", at_, "@in" if op == "in" else f"_{op}_", args=[left, right])
        return left

    def unary(self) -> _Node:
        if self.is_op("!", "-"):
            _, op, at = self.take()
            if op == "-" and self.peek()[0] == "number":  # a negative literal
                operand = self.unary()
                if operand.kind == "lit":
                    return operand
                return _Node("call", at, "-_", args=[operand])
            return _Node("call", at, "!_" if op == "!" else "-_", args=[self.unary()])
        return self.member()

    def member(self) -> _Node:
        node = self.primary()
        while True:
            if self.is_op("."):
                at = self.take()[2]
                optional = self.is_op("?")
                if optional:
                    self.take()
                kind, name, _ = self.take()
                if kind != "name":
                    raise _Unreadable("expected a field name")
                if not optional and self.is_op("("):
                    call_at = self.take()[2]
                    node = _Node("call", call_at, name, target=node, args=self.arguments(")"))
                else:
                    node = _Node("select", at, name, target=node, optional=optional)
            elif self.is_op("["):
                at = self.take()[2]
                optional = self.is_op("?")
                if optional:
                    self.take()
                index = self.expr()
                self.take("]")
                node = _Node("call", at, "_[_]", args=[node, index], optional=optional)
            elif self.is_op("{") and node.kind in ("ident", "select"):
                at = self.take()[2]
                entries = self.entries("}")
                node = _Node("struct", at, args=entries)
            else:
                return node

    def arguments(self, closing: str) -> list[_Node]:
        args: list[_Node] = []
        while not self.is_op(closing):
            args.append(self.expr())
            if not self.is_op(closing):
                self.take(",")
        self.take(closing)
        return args

    def entries(self, closing: str) -> list[_Node]:
        args: list[_Node] = []
        while not self.is_op(closing):
            if self.is_op("?"):
                self.take()
            args.append(self.expr())
            self.take(":")
            args.append(self.expr())
            if not self.is_op(closing):
                self.take(",")
        self.take(closing)
        return args

    def primary(self) -> _Node:
        kind, text, at = self.take()
        if kind == "number":
            if text.lower().endswith("u"):
                return _Node("lit", at, literal=UINT)
            floating = not text.lower().startswith("0x") and any(c in text for c in ".eE")
            return _Node("lit", at, literal=DOUBLE if floating else INT)
        if kind in ("string", "bytes"):  # the literal as written, for its size
            return _Node("lit", at, text, literal=STRING if kind == "string" else BYTES)
        if kind == "name":
            if text in _KEYWORD_LITERALS:
                return _Node("lit", at, literal=_KEYWORD_LITERALS[text])
            if text == "in":
                raise _Unreadable("in")
            if self.is_op("("):
                call_at = self.take()[2]
                return _Node("call", call_at, text, args=self.arguments(")"))
            return _Node("ident", at, text)
        if kind == "op" and text == ".":  # a leading-dot name (.self)
            return self.primary()
        if kind == "op" and text == "(":
            node = self.expr()
            self.take(")")
            return node
        if kind == "op" and text == "[":
            items: list[_Node] = []
            while not self.is_op("]"):
                if self.is_op("?"):
                    self.take()
                items.append(self.expr())
                if not self.is_op("]"):
                    self.take(",")
            self.take("]")
            return _Node("list", at, args=items)
        if kind == "op" and text == "{":
            return _Node("map", at, args=self.entries("}"))
        raise _Unreadable(text)


def _balanced(function: str, terms: list[_Node], at: list[int], lo: int, hi: int) -> _Node:
    """cel-go's balancing of a ``&&`` (``||``) chain: the middle operator at the root."""
    mid = (lo + hi + 1) // 2
    left = terms[mid] if mid == lo else _balanced(function, terms, at, lo, mid - 1)
    right = terms[mid + 1] if mid + 1 == hi + 1 else _balanced(function, terms, at, mid + 1, hi)
    return _Node("call", at[mid], function, args=[left, right])


# -- the checker ---------------------------------------------------------------------------------
_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter", "transformList",
                             "transformMap", "transformMapEntry"})
_CONVERSIONS = {"int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bool": BOOL, "bytes": BYTES}
_STRING_METHODS = {"lowerAscii": STRING, "upperAscii": STRING, "trim": STRING, "replace": STRING,
                   "substring": STRING, "charAt": STRING, "indexOf": INT, "lastIndexOf": INT,
                   "split": None, "matches": BOOL, "startsWith": BOOL, "endsWith": BOOL, "contains": BOOL}
_STRING_PREDICATES = frozenset({"startsWith", "endsWith", "contains"})
# names an expression may use without declaring them: the types' own names, and the first step
# of a qualified type name (google.protobuf.Timestamp)
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
                         "dyn", "optional_type", "google"})
# the namespaces of qualified functions (sets.contains, format.dns1123Label(), ip.isCanonical(...))
_NAMESPACES = frozenset({"sets", "strings", "optional", "cel", "math", "base64", "format", "lists", "regex", "ip",
                         "cidr", "quantity", "semver", "url", "jsonpatch", "google", "time"})
# every function and method of the environments Kubernetes compiles CEL in (cel-go's standard
# library, its strings, sets, optionals and two-variable comprehensions; Kubernetes' lists,
# regex, URLs, quantities, IPs, CIDRs, format, semver, image, pod, authorizer and JSON patch
# libraries: apiserver's environment/base.go and library_compatibility_test.go), and some
# more (cel-go's lists, math and encoders, cel.bind): a name missing from this set is an
# undeclared reference in all of them; one in it may not be in the environment a given
# expression compiles in, and is let pass
_FUNCTION_NAMES = """
    has all exists exists_one existsOne map filter transformList transformMap transformMapEntry size
    int uint double string bytes bool type dyn duration timestamp matches contains startsWith endsWith
    getFullYear getMonth getDayOfYear getDayOfMonth getDate getDayOfWeek getHours getMinutes getSeconds
    getMilliseconds charAt indexOf lastIndexOf lowerAscii upperAscii replace split substring trim join quote
    reverse format slice flatten distinct range sort sortBy first last greatest least ceil floor round trunc abs
    sign isInf isNaN isFinite bitAnd bitOr bitXor bitNot bitShiftLeft bitShiftRight sqrt encode decode
    equivalent intersects of none ofNonZeroValue hasValue value orValue or optMap optFlatMap unwrap bind
    isSorted sum min max find findAll url isURL getScheme getHost getHostname getPort getEscapedPath getQuery
    quantity isQuantity isGreaterThan isLessThan compareTo add sub asInteger asApproximateFloat isInteger
    ip isIP family isUnspecified isLoopback isLinkLocalMulticast isLinkLocalUnicast isGlobalUnicast
    isCanonical cidr isCIDR containsIP containsCIDR masked prefixLength validate named dns1123Label
    dns1123Subdomain dns1035Label qualifiedName dns1123LabelPrefix dns1123SubdomainPrefix dns1035LabelPrefix
    labelValue uri uuid byte date datetime semver isSemver major minor patch path group resource subresource
    namespace name check allowed reason errored error serviceAccount fieldSelector labelSelector
    escapeKey mul div divInt image isImage containsDigest registry repository identifier tag digest allContainers
"""
_FUNCTIONS = frozenset(_FUNCTION_NAMES.split())


class _Checker:
    def __init__(self, variables: dict[str, CelType], strict: bool = False) -> None:
        self.variables = variables
        self.strict = strict  # names other than the variables are undeclared references
        self.errors: list[tuple[int, str]] = []
        self.types: dict[int, CelType] = {}  # by id() of a node: its type, for the cost estimate (celcost)

    def report(self, at: int, message: str) -> None:
        self.errors.append((at, message))

    def no_overload(self, at: int, name: str, args: list[CelType], target: CelType | None = None) -> None:
        listed = ", ".join(formatted(a) for a in args)
        signature = f"{formatted(target)}.({listed})" if target is not None else f"({listed})"
        self.report(at, f"found no matching overload for '{name}' applied to '{signature}'")

    def undeclared(self, at: int, name: str) -> None:
        self.report(at, f"undeclared reference to '{name}' (in container '')")

    def check(self, node: _Node, scope: dict[str, CelType]) -> CelType:
        found = self.typed(node, scope)
        self.types[id(node)] = found
        return found

    def typed(self, node: _Node, scope: dict[str, CelType]) -> CelType:
        if node.kind == "lit":
            return node.literal or DYN
        if node.kind == "ident":
            if self.strict and node.name not in scope and node.name not in _TYPE_NAMES:
                self.undeclared(node.at, node.name)
            return scope.get(node.name, DYN)
        if node.kind == "select":
            return self.select(node, scope, test_only=False)
        if node.kind == "list":
            items = [self.check(a, scope) for a in node.args]
            return list_of(_joined(items))
        if node.kind == "map":
            types = [self.check(a, scope) for a in node.args]
            return map_of(_joined(types[0::2]), _joined(types[1::2]))
        if node.kind == "struct":
            for a in node.args[1::2]:
                self.check(a, scope)
            return DYN
        return self.call(node, scope)

    def select(self, node: _Node, scope: dict[str, CelType], test_only: bool, at: int | None = None) -> CelType:
        """A field selection's type; ``at`` where its errors are reported, if not at its ``.``:
        ``has()``'s presence test is a node cel-go's parser places at the macro's ``(``."""
        assert node.target is not None
        at = node.at if at is None else at
        target = self.check(node.target, scope)
        if target.kind == "optional" and not node.optional and target.elem is not None:
            found = self._select_in(target.elem, node, at)
            return DYN if found.kind == "dyn" else optional_of(found)
        return self._select_in(target, node, at)

    def _select_in(self, target: CelType, node: _Node, at: int) -> CelType:
        if node.optional or target.kind == "dyn":
            return DYN
        if target.kind == "map":
            return target.elem or DYN
        if target.kind == "object":
            found = target.fields().get(node.name)
            if found is not None:
                return found
            if not target.open:
                self.report(at, f"undefined field '{node.name}'")
            return DYN
        self.report(at, f"type '{formatted(target)}' does not support field selection")
        return DYN

    def call(self, node: _Node, scope: dict[str, CelType]) -> CelType:
        name, args = node.name, node.args
        if node.target is None and name == "has" and len(args) == 1 and args[0].kind == "select":
            self.select(args[0], scope, test_only=True, at=node.at)
            return BOOL
        if node.target is not None and name in _COMPREHENSIONS and args \
                and all(a.kind == "ident" for a in args[:_bound_count(name, args)]):
            return self.comprehension(node, scope)
        if node.target is not None and node.target.kind == "ident" and node.target.name not in scope:
            if node.target.name == "cel" and name == "bind" and len(args) == 3 and args[0].kind == "ident":
                return self.check(args[2], {**scope, args[0].name: self.check(args[1], scope)})
            if self.strict and node.target.name not in _NAMESPACES:  # cel-go: neither a function nor a variable
                self.undeclared(node.target.at, node.target.name)
                if name not in _FUNCTIONS:
                    self.undeclared(node.at, name)
            for a in args:  # a namespaced function: sets.contains, strings.quote, optional.of, ...
                self.check(a, scope)
            return DYN
        if self.strict and name not in _FUNCTIONS and not name.startswith(("_", "!", "-", "@")):
            self.undeclared(node.at, name)
        raw_target = self.check(node.target, scope) if node.target is not None else None
        raw = [self.check(a, scope) for a in args]
        if raw_target is not None and raw_target.kind == "optional" and name in _OPTIONAL_METHODS:
            elem = raw_target.elem or DYN
            if name == "orValue" and not (len(raw) == 1 and _same(raw[0], elem)):
                return DYN  # another type than the optional's: not modelled
            return raw_target if name == "or" else BOOL if name == "hasValue" else elem
        if raw_target is not None and name in _OPTIONAL_METHODS and raw_target.kind in _PLAIN \
                and not raw_target.open:  # oldSelf.hasValue() where oldSelf is no optional
            self.no_overload(node.at, name, raw, raw_target)
            return DYN
        if name in ("_==_", "_!=_") and len(raw) == 2 and _optional_against_value(*raw):
            self.no_overload(node.at, name, raw)
            return BOOL
        if name == "_[_]" and not node.optional and len(raw) == 2 and raw[0].kind == "optional" \
                and raw[1].kind != "optional":  # cel-go's optional_list_index_int, optional_map_index_value
            found = self.index(node, [_loose(raw[0].elem or DYN), _loose(raw[1])])
            return DYN if found.kind == "dyn" else optional_of(found)
        if _optional_misused(name, raw_target, raw):
            self.no_overload(node.at, name, raw, raw_target)
            return DYN
        target = _loose(raw_target) if raw_target is not None else None
        types = [_loose(t) for t in raw]
        if target is None and name.startswith(("_", "!", "-", "@")):
            return self.operator(node, types)
        if target is None:
            return self.function(node, types)
        return self.method(node, target, types)

    def comprehension(self, node: _Node, scope: dict[str, CelType]) -> CelType:
        assert node.target is not None
        name, args = node.name, node.args
        over = self.check(node.target, scope)
        over = over if over.kind == "optional" else _loose(over)  # an optional is no range
        bound = _bound_count(name, args)
        if over.kind == "list":
            kinds = [over.elem or DYN] if bound == 1 else [INT, over.elem or DYN]
        elif over.kind == "map":
            kinds = [over.key or DYN] if bound == 1 else [over.key or DYN, over.elem or DYN]
        else:
            if over.kind != "dyn":
                self.report(node.target.at, f"expression of type '{formatted(over)}' cannot be range of a "
                                            "comprehension (must be list, map, or dynamic)")
            kinds = [DYN] * bound
        inner = {**scope, **{a.name: t for a, t in zip(args[:bound], kinds, strict=True)}}
        results = [self.check(a, inner) for a in args[bound:]]
        if name in ("all", "exists", "exists_one", "existsOne"):
            return BOOL
        if name == "filter" and bound == 1:
            return list_of(kinds[0])
        if name == "map" and results:
            return list_of(results[-1])
        return DYN

    def operator(self, node: _Node, types: list[CelType]) -> CelType:
        name = node.name
        known = all(t.kind != "dyn" for t in types)
        if name in ("_&&_", "_||_", "!_"):
            if any(t.kind not in ("dyn", "bool") for t in types):
                self.no_overload(node.at, name, types)
            return BOOL
        if name == "_?_:_":
            if types[0].kind not in ("dyn", "bool"):
                self.no_overload(node.at, name, types)
            return types[1] if _same(types[1], types[2]) else DYN
        if name == "-_":
            if types[0].kind not in ("dyn", "int", "double"):
                self.no_overload(node.at, name, types)
            return types[0] if types[0].kind in ("int", "double") else DYN
        if name == "_[_]":
            return self.index(node, types)
        left, right = types
        if name in ("_==_", "_!=_"):
            if known and _never_equal(left, right):
                self.no_overload(node.at, name, types)
            return BOOL
        if name in ("_<_", "_<=_", "_>_", "_>=_"):
            if known and not ((left.kind in _NUMBERS and right.kind in _NUMBERS)
                              or (left.kind == right.kind and left.kind in ("string", "bytes", "bool"))):
                self.no_overload(node.at, name, types)
            return BOOL
        if name == "@in":
            if right.kind in ("list", "map"):
                member = (right.elem if right.kind == "list" else right.key) or DYN
                if left.kind in _PRIMITIVES and member.kind in _PRIMITIVES and _group(left) != _group(member):
                    self.no_overload(node.at, name, types)
            elif right.kind != "dyn":
                self.no_overload(node.at, name, types)
            return BOOL
        if not known:
            return DYN
        if name == "_+_" and left.kind == right.kind == "list":
            return list_of((left.elem or DYN) if _same(left.elem or DYN, right.elem or DYN) else DYN)
        allowed = {"_+_": ("int", "uint", "double", "string", "bytes"), "_-_": ("int", "uint", "double"),
                   "_*_": ("int", "uint", "double"), "_/_": ("int", "uint", "double"),
                   "_%_": ("int", "uint")}.get(name)
        if allowed is None:
            return DYN
        if left.kind != right.kind or left.kind not in allowed:
            self.no_overload(node.at, name, types)
            return DYN
        return left

    def index(self, node: _Node, types: list[CelType]) -> CelType:
        operand, key = types
        if node.optional or operand.kind == "dyn":
            return DYN
        if operand.kind == "list":
            if key.kind in ("string", "bool", "bytes", "null", "list", "map", "object"):
                self.no_overload(node.at, "_[_]", types)
            return operand.elem or DYN
        if operand.kind == "map":
            want = operand.key or DYN
            if key.kind in _PRIMITIVES and want.kind in _PRIMITIVES and _group(key) != _group(want):
                self.no_overload(node.at, "_[_]", types)
            return operand.elem or DYN
        if operand.kind in _PRIMITIVES or operand.kind == "null":
            self.no_overload(node.at, "_[_]", types)
        return DYN

    def function(self, node: _Node, types: list[CelType]) -> CelType:
        name = node.name
        if name in _CONVERSIONS and len(types) == 1:
            return _CONVERSIONS[name]
        if name == "size" and len(types) == 1:
            if types[0].kind not in ("dyn", "string", "bytes", "list", "map"):
                self.no_overload(node.at, name, types)
            return INT
        if name == "matches" and len(types) == 2:
            if any(t.kind not in ("dyn", "string") for t in types):
                self.no_overload(node.at, name, types)
            return BOOL
        return DYN

    def method(self, node: _Node, target: CelType, types: list[CelType]) -> CelType:
        name = node.name
        if name == "size" and not types:
            if target.kind not in ("dyn", "string", "bytes", "list", "map"):
                self.no_overload(node.at, name, types, target)
            return INT
        if (name in _STRING_PREDICATES or name == "matches") and len(types) == 1:
            if target.kind not in ("dyn", "string") or types[0].kind not in ("dyn", "string"):
                self.no_overload(node.at, name, types, target)
            return BOOL
        if target.kind == "string" and name in _STRING_METHODS:
            result = _STRING_METHODS[name]
            return list_of(STRING) if result is None else result
        if target.kind == "list" and name == "join":
            return STRING
        if target.kind == "list" and name == "isSorted" and not types:
            return BOOL
        return DYN


def _bound_count(name: str, args: list[_Node]) -> int:
    """How many variables a comprehension macro call binds (``all(x, p)`` one, ``all(k, v, p)``
    two, ``map(x, f, t)`` one)."""
    if name in ("transformList", "transformMap", "transformMapEntry"):
        return 2
    if name in ("all", "exists", "existsOne", "exists_one") and len(args) == 3:
        return 2
    return 1


def _loose(t: CelType) -> CelType:
    """An object without a type (a root that omits it), or an optional, as an operand: dyn."""
    return DYN if (t.kind == "object" and t.open) or t.kind == "optional" else t


_OPTIONAL_METHODS = frozenset({"hasValue", "value", "orValue", "or"})
_PLAIN = _PRIMITIVES | {"list", "map", "object"}  # the kinds that are never an optional


def _optional_against_value(a: CelType, b: CelType) -> bool:
    """Whether ``a == b`` compares an optional with a value of a known type that is not one
    (``self == oldSelf`` where ``oldSelf`` is optional): cel-go finds no overload."""
    plain = ("dyn", "optional", "null")
    return (a.kind == "optional" and b.kind not in plain) or (b.kind == "optional" and a.kind not in plain)


# what cel-go declares for an optional operand beyond its methods: equality (checked above), an
# index into an optional list or map (typed above), a conditional's branches, dyn() and type()
_OPTIONAL_CALLS = frozenset({"_==_", "_!=_", "_[_]", "dyn", "type", "optMap", "optFlatMap"})


def _optional_misused(name: str, target: CelType | None, args: list[CelType]) -> bool:
    """Whether a call is given an optional where cel-go declares no overload taking one:
    ``self.n > oldSelf.n``, ``size(oldSelf)``, ``oldSelf.s.startsWith('a')`` with
    ``optionalOldSelf`` (upstream refuses such a rule when the CRD is written)."""
    if name in _OPTIONAL_CALLS or not (name in _FUNCTIONS or name.startswith(("_", "!", "-", "@"))):
        return False
    if name == "_?_:_":
        return args[0].kind == "optional"
    return (target is not None and target.kind == "optional") or any(a.kind == "optional" for a in args)


def _group(t: CelType) -> str:
    return "number" if t.kind in _NUMBERS else t.kind


def _same(a: CelType, b: CelType) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "list":
        return _same(a.elem or DYN, b.elem or DYN)
    if a.kind == "map":
        return _same(a.key or DYN, b.key or DYN) and _same(a.elem or DYN, b.elem or DYN)
    if a.kind == "object":
        return a.name == b.name
    return True


def _never_equal(a: CelType, b: CelType) -> bool:
    """Whether cel-go refuses ``a == b`` for sure: a scalar and a value of another kind (a
    number and a string, a list and a bool, an object and an int); null against anything,
    numbers of any kind, and two aggregates (an object and a map literal) pass."""
    if a.kind == "null" or b.kind == "null" or (a.kind not in _PRIMITIVES and b.kind not in _PRIMITIVES):
        return False
    plain = _PRIMITIVES | {"list", "map", "object"}
    return a.kind in plain and b.kind in plain and _group(a) != _group(b)


def _joined(types: list[CelType]) -> CelType:
    if types and all(_same(types[0], t) for t in types):
        return types[0]
    return DYN


# -- the public surface -----------------------------------------------------------------------------
def _parsed(expression: str) -> _Node | None:
    try:
        return _Parser(expression).parse()
    except (_Unreadable, IndexError, RecursionError):
        return None


def check(expression: str, variables: dict[str, CelType], strict: bool = False) -> tuple[list[str], CelType]:
    """The type errors of ``expression`` with ``variables`` declared, each as cel-go's
    ``Issues`` prints it (``ERROR: <input>:1:5: ...``, its source line and a caret line),
    ordered by position; and its result type (``dyn`` when not known, or on errors).
    ``strict`` when ``variables`` are all the expression may name: any other name (a function
    no Kubernetes environment has too) is an ``undeclared reference to 'x' (in container '')``."""
    tree = _checked(expression, variables, strict)
    if tree is None:
        return [], DYN
    checker, _, result = tree
    lines = expression.split("\n")
    out = []
    seen = set()
    for at, message in sorted(checker.errors, key=lambda e: e[0]):
        if (at, message) in seen:
            continue
        seen.add((at, message))
        line = expression.count("\n", 0, at)
        column = at - (expression.rfind("\n", 0, at) + 1)
        out.append(f"ERROR: <input>:{line + 1}:{column + 1}: {message}\n | {lines[line]}\n | {'.' * column}^")
    return out, (DYN if out else result)


def _checked(expression: str, variables: dict[str, CelType], strict: bool) -> tuple[_Checker, _Node, CelType] | None:
    node = _parsed(expression)
    if node is None:
        return None
    checker = _Checker(variables, strict)
    try:
        result = checker.check(node, dict(variables))
    except RecursionError:
        return None
    return checker, node, result


def typed_tree(expression: str, variables: dict[str, CelType]) -> tuple[Any, dict[int, CelType]] | None:
    """The parsed ``expression`` and the type of each of its nodes (by ``id()``), for the cost
    estimate (``registry/celcost.py``); None when it is not read or does not type-check."""
    tree = _checked(expression, variables, strict=False)
    if tree is None or tree[0].errors:
        return None
    return tree[1], tree[0].types


_REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll"})


def constant_patterns(expression: str) -> list[str]:
    """The string literals ``expression`` gives as the pattern of ``matches`` (the method or
    the global function), ``find`` or ``findAll``: upstream's programs compile them when they
    are made (cel-go's regex constant optimization, which Kubernetes' environments enable),
    so one Go's ``regexp`` refuses fails the rule's compilation."""
    node = _parsed(expression)
    out: list[tuple[int, str]] = []
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        stack.extend(n.args)
        if n.target is not None:
            stack.append(n.target)
        if n.kind != "call" or n.name not in _REGEX_FUNCTIONS:
            continue
        at = 0 if n.target is not None else 1
        if len(n.args) > at and n.args[at].kind == "lit" and n.args[at].literal is STRING:
            pattern = _string_value(n.args[at].name)
            if pattern is not None:
                out.append((n.args[at].at, pattern))
    return [pattern for _, pattern in sorted(out)]


def _string_value(literal: str) -> str | None:
    """A CEL string literal's value (its escapes as Python's, nearly all CEL's); None when not read."""
    import ast

    quote = literal.lstrip("rR")
    if len(quote) < len(literal):
        q = 3 if quote[:3] in ('"""', "'''") else 1
        return quote[q:-q]
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def type_errors(expression: str, variables: dict[str, CelType], strict: bool = False) -> list[str]:
    """``check``'s errors only."""
    return check(expression, variables, strict)[0]


def result_type(expression: str, variables: dict[str, CelType]) -> CelType:
    """``check``'s result type only."""
    return check(expression, variables)[1]
