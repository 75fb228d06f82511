"""The subset of Go's ``text/template`` that KWOK stage templates use.

KWOK renders a Stage's ``statusTemplate`` with Go templates (plus Sprig-like
helpers of its own) and reads the result as YAML. This module parses a
template once (``Template(text)``) and renders it against a dict
(``render(data, funcs)``). Supported:

- text and actions ``{{ ... }}``, with ``{{-`` / ``-}}`` trimming the
  whitespace beside them, and ``{{/* comments */}}``;
- ``if`` / ``else if`` / ``else`` / ``end``, ``with`` / ``else`` / ``end``,
  ``range`` over lists and maps (``range $i, $e := ...``, ``range $e := ...``,
  ``else`` when empty);
- pipelines ``a | f b`` (the value goes last, as in Go), parentheses, fields
  ``.a.b`` on the dot, on ``$`` (the root) and on variables ``$x.a``,
  ``$x := ...`` and ``$x = ...``, string (``"..."`` and raw), number, ``true``,
  ``false`` and ``nil`` literals;
- the functions ``and or not eq ne lt le gt ge len index print println printf``
  (``printf`` as Go's ``fmt.Sprintf``: ``_printf``), Sprig's ``dict`` (KWOK's chaos stages write
  ``or .metadata.annotations dict``) and its common functions (``SPRIG``:
  ``default``, ``add1``, ``toString``, ``indent``, ``first``, ``dig``, ``regexMatch``, ...;
  KWOK renders with all of Sprig)
  and whatever the caller passes in ``funcs`` (the stage engine passes
  KWOK's: ``Now``, ``StartTime``, ``Quote``, ``YAML``, ``NodeIP``, ``PodIP``,
  ``NodeIPWith``, ``NodeIPsWith``, ``PodIPWith``, ``PodIPsWith``,
  ``NodeName``, ``NodePort``, ``NodeConditions``, ``Version``).
  ``Template.functions`` names the functions a template calls, so that a
  caller can refuse one it does not provide before rendering.

Not supported (and rejected by name at parse time, never ignored): ``define``,
``template``, ``block``, ``break``, ``continue``, method calls on values.
A missing map key renders as ``<no value>`` as in Go.

    >>> Template('phase: {{ .status.phase | printf "%q" }}').render({"status": {"phase": "Running"}}, {})
    'phase: "Running"'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTINS", "GoList", "GoMap", "GoNumber", "Template", "TemplateError", "go_format", "json_marshal",
           "json_marshal_string", "go_quote", "go_unquote", "parse_go_float", "parse_go_int", "plain",
           "truthy"]


class TemplateError(ValueError):
    pass


class GoNumber(str):
    """A number of the object rendered, as KWOK's templates hold it: ``json.Number`` (KWOK
    encodes the object and decodes it with ``UseNumber``), a string type holding the number's
    JSON text. So it prints as that text (``1.0`` as ``1``), is true even when ``0``, compares
    as a string with strings and other ``json.Number``s (``eq .a .b`` of 1 and 1.0 is false)
    and fails against a number (``eq .spec.replicas 3``: incompatible types), and ``printf
    "%d"`` does not take it (``%!d(json.Number=1)``). Made when a field is read (``_walk``,
    ``index``, ``range``), so the object itself is never converted."""

    __slots__ = ()


def _json_float(f: float) -> str:
    """Go's encoding/json text of a float64: the shortest digits, in ``%f`` form from 1e-6 up to
    1e21 and ``%e`` outside (``1e-7``, ``1e+21``); a whole number without a fraction (``1``)."""
    text = repr(f)
    if "e" in text or "E" in text:
        if f != 0 and (abs(f) < 1e-6 or abs(f) >= 1e21):
            mantissa, _, exp = text.partition("e")
            sign, digits = (exp[0], exp[1:]) if exp[0] in "+-" else ("+", exp)
            return f"{mantissa.removesuffix('.0')}e{sign}{digits.lstrip('0') or '0'}"
        from decimal import Decimal

        text = format(Decimal(text), "f")
    return text.removesuffix(".0")


def _number(v: Any) -> Any:
    """``v`` as KWOK's template reads it out of the object: a number as a ``GoNumber``."""
    t = type(v)
    if t is int:
        return GoNumber(v)
    if t is float:
        return GoNumber(_json_float(v))
    return v


def plain(v: Any) -> Any:
    """``v`` with its ``GoNumber``s numbers again (as ``json.Marshal`` writes a ``json.Number``):
    for the functions that write JSON or YAML (``toJson``, ``YAML``)."""
    if isinstance(v, GoNumber):
        return json.loads(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    return v


_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<raw>`[^`]*`)
    | (?P<num>[+-]?(?:0[xX][0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?(?:[pP][+-]?[0-9_]+)?|0[bBoO][0-9_]+
                   |(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?)(?![A-Za-z0-9_.]))
    | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    | (?P<field>(?:\.[A-Za-z0-9_]+)+|\.)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    | (?P<op>:=|=|\||\(|\)|,)
    )""", re.X)


def truthy(v: Any) -> bool:
    return not (v is None or v is False or (v == 0 and not isinstance(v, bool) and isinstance(v, int | float))
                or (isinstance(v, str | list | dict | tuple) and len(v) == 0))


class GoMap(dict[str, Any]):
    """A map a template made (Sprig's ``dict``): its numbers are Go's (``float64``, ``int``),
    where the object's maps, and so those of the functions that return a part of it, hold
    ``json.Number``s. So ``{{ dict "a" 1000000.0 }}`` prints ``map[a:1e+06]``, as Go's ``%v``."""

    __slots__ = ()


class GoList(list[Any]):
    """A list a template made (Sprig's ``list``): Go's numbers, as ``GoMap``."""

    __slots__ = ()


def go_format(v: Any) -> str:
    """How ``{{ v }}`` prints ``v``: Go's ``fmt`` ``%v`` (a missing value: ``<no value>``)."""
    if v is None:
        return "<no value>"
    return _format_v(v, False)


def _format_v(v: Any, json_numbers: bool) -> str:
    """Go's ``%v`` of ``v``: a float as Go's shortest ``%g`` (``1e+06``, ``1.5``), or, in a map or
    list of the object (``json_numbers``), as the ``json.Number`` KWOK's template holds there
    (the JSON text: ``1000000``, ``1e+21``); nil in a map or list as ``<nil>``."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return _json_float(v) if json_numbers else _go_g(v, None)
    if isinstance(v, list | tuple):
        inner = not isinstance(v, GoList)
        return "[" + " ".join(_format_v(x, inner) for x in v) + "]"
    if isinstance(v, dict):
        inner = not isinstance(v, GoMap)
        return "map[" + " ".join(f"{k}:{_format_v(v[k], inner)}" for k in sorted(v)) + "]"
    return str(v)


# ----------------------------------------------------------------- expressions

@dataclass(slots=True)
class _Lit:
    value: Any


@dataclass(slots=True)
class _Field:  # base None: the dot; base "$": the root; base "$x": a variable
    base: str | None
    path: tuple[str, ...]


@dataclass(slots=True)
class _Call:
    name: str
    args: list[Any]


@dataclass(slots=True)
class _Pipe:
    commands: list[Any]  # each a _Call or an operand
    declare: tuple[str, ...] = ()  # variables set by ":=" / "="
    assign: bool = False


@dataclass(slots=True)
class _Sub:  # (pipeline).field
    pipe: _Pipe
    path: tuple[str, ...]


def _lex(src: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if m is None or m.end() == pos:
            raise TemplateError(f"unexpected {src[pos:].strip()[:20]!r} in action {{{{{src}}}}}")
        kind = m.lastgroup or ""
        text = m.group(kind)
        if kind == "field" and m.start(kind) == pos and out and out[-1] == ("op", ")"):
            kind = "chain"  # (pipeline).field; with a space between, .field is an argument of its own
        out.append((kind, text))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], src: str) -> None:
        self.t = tokens
        self.i = 0
        self.src = src

    def peek(self) -> tuple[str, str] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise TemplateError(f"unexpected end of action {{{{{self.src}}}}}")
        self.i += 1
        return tok

    def pipeline(self, allow_decl: bool = True) -> _Pipe:
        declare: list[str] = []
        assign = False
        if allow_decl:  # "$x :=", "$i, $e :=", "$x ="
            j = self.i
            names: list[str] = []
            while j < len(self.t) and self.t[j][0] == "var" and "." not in self.t[j][1]:
                names.append(self.t[j][1])
                if j + 1 < len(self.t) and self.t[j + 1] == ("op", ","):
                    j += 2
                    continue
                j += 1
                break
            if names and j < len(self.t) and self.t[j][0] == "op" and self.t[j][1] in (":=", "="):
                declare, assign = names, self.t[j][1] == "="
                self.i = j + 1
        commands = [self.command()]
        while self.peek() == ("op", "|"):
            self.i += 1
            commands.append(self.command())
        return _Pipe(commands, tuple(declare), assign)

    def command(self) -> Any:
        operands: list[Any] = []
        while True:
            tok = self.peek()
            if tok is None or (tok[0] == "op" and tok[1] in ("|", ")")):
                break
            operands.append(self.operand())
        if not operands:
            raise TemplateError(f"empty command in {{{{{self.src}}}}}")
        head = operands[0]
        if isinstance(head, _Call) and not head.args:
            head.args = operands[1:]
            return head
        if len(operands) > 1:
            raise TemplateError(f"can't give arguments to a non-function in {{{{{self.src}}}}}")
        return head

    def operand(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return _Lit(go_unquote(text))
        if kind == "raw":
            return _Lit(text[1:-1])
        if kind == "num":
            return _Lit(_go_number(text))
        if kind == "field":
            return _Field(None, tuple(p for p in text.split(".") if p))
        if kind == "var":
            base, *path = text.split(".")
            return _Field(base, tuple(path))
        if kind == "ident":
            if text in ("true", "false"):
                return _Lit(text == "true")
            if text == "nil":
                return _Lit(None)
            if "." in text:
                raise TemplateError(f"method calls are not supported: {text}")
            return _Call(text, [])
        if (kind, text) == ("op", "("):
            pipe = self.pipeline()
            if self.take() != ("op", ")"):
                raise TemplateError(f"unclosed parenthesis in {{{{{self.src}}}}}")
            nxt = self.peek()
            if nxt is not None and nxt[0] == "chain" and nxt[1] != ".":
                self.i += 1
                return _Sub(pipe, tuple(p for p in nxt[1].split(".") if p))
            return _Sub(pipe, ())
        raise TemplateError(f"unexpected {text!r} in {{{{{self.src}}}}}")


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                   '"': '"'}
_ESCAPE = re.compile(r"\\(?:([abfnrtv\\\"])|x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.?))",
                     re.S)


def go_unquote(text: str) -> str:
    """``strconv.Unquote`` of a Go interpreted string literal, as text/template reads one: JSON's
    escapes and Go's others (``\\a``, ``\\v``, ``\\x41``, ``\\101``, ``\\U0001F600``); ``\\x`` and
    octal escapes are bytes, the whole read as UTF-8 (what is not, U+FFFD). Any other escape
    (``\\/``, ``\\'``, ``\\q``), a surrogate or a code point past U+10FFFF is a ``TemplateError``
    (Go's ``invalid syntax``)."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(body):
        out += body[pos:m.start()].encode()
        pos = m.end()
        simple, hx, octal, u4, u8, bad = m.groups()
        if simple is not None:
            out += _SIMPLE_ESCAPES[simple].encode()
        elif hx is not None:
            out.append(int(hx, 16))
        elif octal is not None:
            if int(octal, 8) > 255:
                raise TemplateError(f"invalid syntax in string literal {text}")
            out.append(int(octal, 8))
        elif u4 is not None or u8 is not None:
            cp = int(u4 or u8, 16)
            if 0xD800 <= cp < 0xE000 or cp > 0x10FFFF:
                raise TemplateError(f"invalid syntax in string literal {text}")
            out += chr(cp).encode()
        else:
            raise TemplateError(f"invalid syntax in string literal {text}: escape \\{bad}")
    out += body[pos:].encode()
    return out.decode("utf-8", "replace")


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
                  "\\": "\\\\", '"': '\\"'}


def go_quote(s: str, ascii_only: bool = False) -> str:
    """Go's ``strconv.Quote`` (``%q``, Sprig's ``quote``; ``QuoteToASCII`` for ``%+q``): a
    printable character as it is, Go's short escapes, another below a space or DEL as
    ``\\x01``, any other as ``\\u200b`` or ``\\U0001f600`` (not JSON's ``\\u0001``)."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = ['"']
    for c in s:
        esc = _QUOTE_ESCAPES.get(c)
        if esc is not None:
            out.append(esc)
        elif c.isprintable() and not (ascii_only and ord(c) > 0x7E):
            out.append(c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        elif 0xD800 <= ord(c) < 0xE000:  # not UTF-8: Go's utf8.RuneError
            out.append("\\ufffd" if ascii_only else "\ufffd")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def _go_number(text: str) -> int | float:
    """A number constant as text/template's ``idealConstant`` makes it: a float64 when it is
    written as one (``.``, an exponent; ``0x1p4``, but ``0x1e`` is a hex int), else an ``int``:
    Go's literals (``0x10``, ``0o17``, ``0b101``, ``017``, ``1_000``, ``.5``, ``+1``); a text
    Go's parser cannot read is ``illegal number syntax``."""
    body = text.lstrip("+-")
    is_hex = body[:2] in ("0x", "0X")
    if any(c in body for c in (".pP" if is_hex else ".eEpP")):
        f = parse_go_float(text)
        if f is not None and math.isfinite(f):
            return f
    else:
        n = parse_go_int(text)
        if n is not None:
            return n
    raise TemplateError(f"illegal number syntax: {text!r}")


def _parse_pipe(src: str, allow_decl: bool = True) -> _Pipe:
    p = _Parser(_lex(src), src)
    pipe = p.pipeline(allow_decl)
    if p.peek() is not None:
        raise TemplateError(f"unexpected {p.peek()[1]!r} in {{{{{src}}}}}")  # type: ignore[index]
    return pipe


# ----------------------------------------------------------------- template tree

@dataclass(slots=True)
class _Block:
    kind: str  # "if" | "with" | "range"
    pipe: _Pipe
    body: list[Any]
    orelse: list[Any]


_UNSUPPORTED = ("define", "template", "block", "break", "continue")


def _parse(text: str) -> list[Any]:
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(text):
        lead = text[pos:m.start()]
        if m.group(1):
            lead = lead.rstrip()
        if pieces and pieces[-1][0] == "trim":
            pieces.pop()
            lead = lead.lstrip()
        pieces.append(("text", lead))
        pieces.append(("action", m.group(2).strip()))
        if m.group(3):
            pieces.append(("trim", ""))
        pos = m.end()
    tail = text[pos:]
    if pieces and pieces[-1][0] == "trim":
        pieces.pop()
        tail = tail.lstrip()
    pieces.append(("text", tail))

    root: list[Any] = []
    stack: list[tuple[_Block, list[Any]]] = []  # (block, the list being filled)
    current = root
    for kind, src in pieces:
        if kind == "text":
            if src:
                current.append(src)
            continue
        if src.startswith("/*"):
            continue
        word, _, rest = src.partition(" ")
        if word in _UNSUPPORTED:
            raise TemplateError(f"{{{{{word}}}}} is not supported")
        if word in ("if", "with", "range"):
            block = _Block(word, _parse_pipe(rest, allow_decl=word != "if"), [], [])
            current.append(block)
            stack.append((block, current))
            current = block.body
        elif word == "else":
            if not stack:
                raise TemplateError("{{else}} outside a block")
            block = stack[-1][0]
            if rest.strip().startswith("if ") or rest.strip().startswith("with "):
                # "else if X" is "else" holding an "if X" that shares this block's "end"
                w2, _, r2 = rest.strip().partition(" ")
                inner = _Block(w2, _parse_pipe(r2, allow_decl=w2 != "if"), [], [])
                block.orelse.append(inner)
                stack.append((inner, _ELSE_CHAIN))
                current = inner.body
            else:
                current = block.orelse
        elif word == "end":
            if not stack:
                raise TemplateError("{{end}} outside a block")
            block, parent = stack.pop()
            while parent is _ELSE_CHAIN:  # an "else if" ends with its enclosing block
                block, parent = stack.pop()
            current = parent
        else:
            current.append(_parse_pipe(src))
    if stack:
        raise TemplateError(f"unclosed {{{{{stack[-1][0].kind}}}}}")
    return root


_ELSE_CHAIN: list[Any] = []


Funcs = dict[str, Callable[..., Any]]


def _index(v: Any, *keys: Any) -> Any:
    """Go's ``index``: a missing map key gives nothing, but indexing nothing, a list (or a
    string: its byte) out of range or with a non-integer, or a map with a non-string key
    fails the template, as in Go (and so the stage: ``Next.render_status``)."""
    for k in keys:
        if v is None:
            raise ValueError("index of untyped nil")
        if isinstance(v, dict):
            if not isinstance(k, str):
                raise ValueError("value is nil; should be of type string" if k is None
                                 else f"value has type {_go_type(k)}; should be string")
            v = v.get(k) if isinstance(v, GoMap) else _number(v.get(k))
        elif isinstance(v, list | str):
            if type(k) is not int:
                raise ValueError("cannot index slice/array with nil" if k is None
                                 else f"cannot index slice/array with type {_go_type(k)}")
            items = v if isinstance(v, list) else v.encode()  # a string's bytes
            if not 0 <= k < len(items):
                raise ValueError(f"index out of range: {k}")
            v = items[k]  # (a string's byte a Go uint8: a number, not json.Number)
            if isinstance(items, list) and not isinstance(items, GoList):
                v = _number(v)
        else:
            raise ValueError(f"can't index item of type {_go_type(v)}")
    return v


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d*|\*))?(.)", re.S)
_GO_TYPES: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (float, "float64"),
                                           (GoNumber, "json.Number"), (str, "string"),
                                           (dict, "map[string]interface {}"), (list, "[]interface {}"))


def _go_type(v: Any) -> str:
    return next((name for t, name in _GO_TYPES if isinstance(v, t)), type(v).__name__)


def _bad_verb(verb: str, v: Any) -> str:
    """Go's ``%!d(string=x)``: a verb the value's type does not take."""
    return f"%!{verb}(<nil>)" if v is None else f"%!{verb}({_go_type(v)}={go_format(v)})"


def _go_g(f: float, prec: int | None, upper: bool = False) -> str:
    """``strconv.FormatFloat(f, 'g', prec)``: the shortest digits that read back as ``f`` when
    ``prec`` is None, an exponent from 1e-4 below or 1e6 (or the precision) up."""
    if math.isinf(f) or math.isnan(f):
        return "NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf")
    if prec is not None:
        text = f"{f:.{max(prec, 1)}{'G' if upper else 'g'}}"
    else:
        exp = f"{f:e}".partition("e")[2]
        digits = repr(abs(f)).replace(".", "").lstrip("0").split("e")[0].rstrip("0") or "0"
        x = int(exp) if f else 0
        if x < -4 or x >= 6:
            text = f"{f:.{max(len(digits) - 1, 0)}e}"
        else:
            text = repr(f)
            text = text[:-2] if text.endswith(".0") else text
        text = text.upper() if upper else text
    return re.sub(r"([eE][+-])(\d)$", r"\g<1>0\2", text)


def _format_one(flags: str, width: int | None, prec: int | None, verb: str, v: Any) -> str:
    """One Go ``fmt`` verb applied to ``v`` (values as a template holds them: JSON's types)."""
    is_int = isinstance(v, int) and not isinstance(v, bool)
    number = False
    if verb == "v":
        text = "<nil>" if v is None else go_format(v)
    elif verb == "T":
        text = "<nil>" if v is None else _go_type(v)
    elif verb == "s":
        if isinstance(v, str):
            text = v if prec is None else v[:prec]
        elif isinstance(v, list):
            text = "[" + " ".join(_format_one(flags, None, prec, "s", x) for x in v) + "]"
        else:
            return _bad_verb(verb, v)
    elif verb == "q":
        if isinstance(v, str):
            text = go_quote(v, ascii_only="+" in flags)
        elif is_int:
            text = "'" + chr(v) + "'"
        else:
            return _bad_verb(verb, v)
    elif verb == "t":
        if not isinstance(v, bool):
            return _bad_verb(verb, v)
        text = "true" if v else "false"
    elif verb in "dboxXOcU":
        if isinstance(v, str) and verb in "xX":
            text = v.encode().hex()
            text = text.upper() if verb == "X" else text
        elif not is_int:
            return _bad_verb(verb, v)
        elif verb == "c":
            text = chr(v)
        elif verb == "U":
            text = f"U+{v:04X}"
        else:
            number = True
            base = {"d": "d", "b": "b", "o": "o", "O": "o", "x": "x", "X": "X"}[verb]
            text = format(abs(v), base)
            if prec is not None:
                text = text.rjust(prec, "0")
            prefix = {"b": "0b", "o": "0", "x": "0x", "X": "0X"}.get(verb, "") if "#" in flags else ""
            text = ("0o" if verb == "O" else prefix) + text
            text = ("-" if v < 0 else "+" if "+" in flags else " " if " " in flags else "") + text
    elif verb in "eEfFgG":
        if not isinstance(v, float):
            return _bad_verb(verb, v)
        number = True
        if verb in "gG":
            text = _go_g(v, prec, verb == "G")
        else:
            text = f"{v:.{6 if prec is None else prec}{verb}}"
            text = re.sub(r"([eE][+-])(\d)$", r"\g<1>0\2", text)
        if v >= 0 and not text.startswith("+"):
            text = ("+" if "+" in flags else " " if " " in flags else "") + text
    else:
        return _bad_verb(verb, v)
    if width is not None and len(text) < width:
        if "-" in flags:
            text = text.ljust(width)
        elif "0" in flags and ((number and prec is None) or verb in "eEfFgG"):
            sign = text[0] if text[:1] in "+- " else ""
            text = sign + text[len(sign):].rjust(width - len(sign), "0")
        else:
            text = text.rjust(width)
    return text


def _printf(fmt: str, *args: Any) -> str:
    """Go's ``fmt.Sprintf`` on a template's values: flags (``-+# 0``), width and precision
    (``*`` taking an argument), the verbs ``v s q d b o O x X c U t e E f F g G T`` and ``%%``;
    a verb the value's type does not take, a missing argument and extra arguments are written
    as Go writes them (``%!d(string=x)``, ``%!s(MISSING)``, ``%!(EXTRA int=1)``)."""
    out: list[str] = []
    pos = used = 0

    def arg() -> tuple[bool, Any]:
        nonlocal used
        if used >= len(args):
            return False, None
        used += 1
        return True, args[used - 1]

    for m in _VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width_text, prec_text, verb = m.groups()
        if verb == "%":
            out.append("%")
            continue
        width = prec = None
        if width_text == "*":
            _, w = arg()
            width = w if isinstance(w, int) and not isinstance(w, bool) else None
        elif width_text:
            width = int(width_text)
        if prec_text == "*":
            _, pr = arg()
            prec = pr if isinstance(pr, int) and not isinstance(pr, bool) else None
        elif prec_text is not None:
            prec = int(prec_text or 0)
        there, v = arg()
        out.append(_format_one(flags, width, prec, verb, v) if there else f"%!{verb}(MISSING)")
    out.append(fmt[pos:])
    if used < len(args):
        out.append("%!(EXTRA " + ", ".join("<nil>" if a is None else f"{_go_type(a)}={go_format(a)}"
                                            for a in args[used:]) + ")")
    return "".join(out)


def _dict(*pairs: Any) -> GoMap:
    """Sprig's ``dict``: a map of key, value pairs; a key without a value maps to ``""``."""
    if len(pairs) % 2:
        pairs = (*pairs, "")
    return GoMap({_strval(k): v for k, v in zip(pairs[::2], pairs[1::2], strict=True)})


def _kind(v: Any) -> str:
    """Go's ``basicKind`` as text/template's comparisons see it (a ``GoNumber`` is a string)."""
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is float:
        return "float"
    if isinstance(v, str):
        return "string"
    return "nil" if v is None else "other"


def _eq(a: Any, *bs: Any) -> bool:
    """Go's ``eq``: true if ``a`` equals any of ``bs``; values of different basic kinds (a
    string and a number, an int and a float, a ``json.Number`` and a number) are an error
    unless one is nothing."""
    if not bs:
        raise ValueError("missing argument for comparison")
    ka = _kind(a)
    for b in bs:
        kb = _kind(b)
        if ka != kb:
            if a is not None and b is not None:
                raise ValueError("incompatible types for comparison")
        elif a == b:
            return True
    return False


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    """Go's ``lt``/``le``/``gt``/``ge`` take two values of one basic kind (strings compared
    byte by byte: ``json.Number`` ``10`` is less than ``9``)."""
    ka, kb = _kind(a), _kind(b)
    if ka in ("nil", "other", "bool") or kb in ("nil", "other", "bool"):
        raise ValueError("invalid type for comparison")
    if ka != kb:
        raise ValueError("incompatible types for comparison")
    return a, b


# --- Sprig (KWOK renders with ``sprig.TxtFuncMap()``): the common ones, with Sprig's semantics


def _strval(v: Any) -> str:
    """Sprig's ``strval``: a string as it is, anything else as ``%v`` prints it (nil: ``<nil>``)."""
    return "<nil>" if v is None else go_format(v)


_GO_OCTAL = re.compile(r"[+-]?0[0-7_]+")
_INT64 = (-(2 ** 63), 2 ** 63)


def parse_go_int(s: str) -> int | None:
    """``strconv.ParseInt(s, 0, 64)``: decimal, ``0x``/``0o``/``0b``, a leading ``0`` for
    octal, ``_`` between digits; None for anything else (spaces, ``"1.5"``, overflow)."""
    if not s.isascii() or s != s.strip():
        return None
    try:
        v = int(s, 8) if _GO_OCTAL.fullmatch(s) else int(s, 0)
    except ValueError:
        return None
    return v if _INT64[0] <= v < _INT64[1] else None


def _trim_zero_decimal(s: str) -> str:
    """spf13/cast's ``trimZeroDecimal``: ``"1.0"``, ``"1.00"`` are ``"1"``; anything else (``"1.5"``,
    ``"1."``, ``"1.0.0"`` but its last ``.0``) as it is."""
    head, dot, tail = s.rpartition(".")
    return head if dot and tail and tail.strip("0") == "" else s


def _go_trunc(f: float) -> int:
    """Go's ``int64(f)`` on amd64: truncated; NaN, the infinities and what int64 cannot hold
    give its least value, as the CPU's conversion does."""
    if math.isnan(f) or math.isinf(f) or not _INT64[0] <= f < _INT64[1]:
        return _INT64[0]
    return int(f)


def _to_int(v: Any) -> int:
    """Sprig's ``int``, ``int64`` (``cast.ToInt``, ``ToInt64`` of spf13/cast v1.7.0, KWOK's):
    a number truncated, a bool 1 or 0, a string (or ``json.Number``) ``strconv.ParseInt(s, 0, 0)``
    reads after cast's ``trimZeroDecimal`` (so ``"1.0"`` is 1, ``"0x10"`` 16, ``"010"`` 8, while
    ``"1.5"``, ``" 1"``, ``"1e3"`` are 0), anything else (nil, a list, a map) 0."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return _go_trunc(v)
    if isinstance(v, str):
        return parse_go_int(_trim_zero_decimal(v)) or 0
    return 0


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _atoi(v: Any) -> int:
    """Sprig's ``atoi``: ``strconv.Atoi`` of a string, its error dropped: decimal digits with a
    sign at most (``"0x10"``, ``"1.0"``, ``" 1"`` are 0), held at int64's bounds past them. Its
    argument is a Go ``string``: anything else (a number, a ``json.Number`` of the object) fails
    the template, as text/template fails the call."""
    if type(v) is not str:
        raise TemplateError(f"wrong type for value; expected string; got {_go_type(v)}")
    if not _DECIMAL.fullmatch(v):
        return 0
    return min(max(int(v), _INT64[0]), _INT64[1] - 1)


_DIGITS = r"[0-9](?:_?[0-9])*"
_HEX = r"[0-9a-fA-F](?:_?[0-9a-fA-F])*"
# ParseFloat's syntax, as Go's float literals: decimal digits with ``_`` between them, a
# hexadecimal mantissa (``_`` also right after ``0x``) with a binary exponent it must have
# (``0x1p-2``, ``0x1.8p1``, ``0x_1p0``), its infinities (signed or not) and NaN (not signed),
# in any case
_GO_FLOAT = re.compile(rf"[+-]?(?:(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
                       rf"|0[xX](?:_?{_HEX}(?:\.(?:{_HEX})?)?|\.{_HEX})[pP][+-]?{_DIGITS}"
                       r"|inf|infinity)|nan", re.I)


def parse_go_float(s: str) -> float | None:
    """``strconv.ParseFloat(s, 64)`` when it succeeds: None for a syntax error (spaces, ``0b1``,
    ``0x1`` without its exponent) and for a number past float64's range (``1e400``, which Go
    answers with ±Inf and ``ErrRange``); ``"inf"`` and ``"NaN"`` as they say."""
    if not s.isascii() or not _GO_FLOAT.fullmatch(s):
        return None
    text = s.replace("_", "")
    body = text.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        try:
            f = float.fromhex(text)
        except OverflowError:
            return None
    else:
        f = float(text)
        if math.isinf(f) and body[:1] not in ("i", "I"):
            return None
    return f


def _to_float(v: Any) -> float:
    """Sprig's ``float64`` (``cast.ToFloat64``): a number as it is, a bool 1 or 0, a string (or
    ``json.Number``) as ``strconv.ParseFloat`` reads it (``"0x1p-2"`` is 0.25, ``"1_000.5"``
    1000.5), 0 where it fails (``" 1"``, ``"1e400"``), anything else 0."""
    if isinstance(v, bool | int | float):
        return float(v)
    if isinstance(v, str):
        f = parse_go_float(v)
        return 0.0 if f is None else f
    return 0.0


def _go_div(a: Any, b: Any) -> int:
    x, y = _to_int(a), _to_int(b)
    q = abs(x) // abs(y)  # Go truncates toward zero (a zero divisor raises, as Go panics)
    return q if (x >= 0) == (y >= 0) else -q


def _go_mod(a: Any, b: Any) -> int:
    x, y = _to_int(a), _to_int(b)
    return x - _go_div(x, y) * y


def _default(d: Any, *given: Any) -> Any:
    return given[0] if given and truthy(given[0]) else d


def _b64dec(s: Any) -> str:
    import base64

    try:
        return base64.b64decode(str(s), validate=True).decode()
    except ValueError as e:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return str(e)


# what Go's encoding/json escapes besides JSON's own: HTML's <, > and & (its default escapeHTML)
# and the line and paragraph separators JavaScript takes for line ends
_GO_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                  "\u2029": "\\u2029"})


_GO_JSON_LINE_ESCAPES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_marshal_string(s: str, escape_html: bool = True) -> str:
    """Go's ``json.Marshal`` of a string: JSON's quoting, and ``<``, ``>``, ``&`` as ``\\u003c``...
    (not with ``escape_html`` False: an Encoder's ``SetEscapeHTML(false)``)."""
    return json.dumps(s, ensure_ascii=False).translate(_GO_JSON_ESCAPES if escape_html else _GO_JSON_LINE_ESCAPES)


def json_marshal(v: Any, escape_html: bool = True) -> str:
    """Go's ``json.Marshal`` of a template's value: map keys sorted, a ``json.Number`` as its
    text, a float as Go writes one (``1``, ``10000000000000000``, ``1e-7``, ``1e+21``: not
    Python's ``1.0``, ``1e+16``, ``1e-07``), strings HTML-escaped (unless ``escape_html`` is
    False). NaN and the infinities are an error (``json: unsupported value``), as Go's."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, GoNumber):
        return str.__str__(v)
    if isinstance(v, str):
        return json_marshal_string(v, escape_html)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"json: unsupported value: {_go_g(v, None)}")
        return _json_float(v)
    if isinstance(v, dict):
        return "{" + ",".join(f"{json_marshal_string(str(k), escape_html)}:{json_marshal(v[k], escape_html)}"
                              for k in sorted(v)) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(json_marshal(x, escape_html) for x in v) + "]"
    return json_marshal_string(str(v), escape_html)


def _to_json(v: Any) -> str:
    """Sprig's ``toJson``: ``json.Marshal``, its error dropped (NaN: nothing)."""
    try:
        return json_marshal(v)
    except ValueError:
        return ""


def _strslice(v: Any) -> list[str]:
    """Sprig's ``strslice``: a list's items as strings, its nils left out; nothing is no item,
    anything else one."""
    if isinstance(v, list | tuple):
        return [_strval(x) for x in v if x is not None]
    return [] if v is None else [_strval(v)]


def _split(s: str, sep: str) -> list[str]:
    """Go's ``strings.Split``: an empty separator splits after each character (none of ``""``)."""
    return list(s) if sep == "" else s.split(sep)


def _uuidv4() -> str:
    import uuid

    return str(uuid.uuid4())


def _b64enc(s: Any) -> str:
    import base64

    return base64.b64encode(_strval(s).encode()).decode()


def _now() -> str:
    """Sprig's ``now`` is a ``time.Time``; here the RFC 3339 text it quotes (``now | Quote``) as."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- more of Sprig's (v3.3.0, KWOK's): strings, lists, dicts, types, hashes, regular expressions


def _go_str(v: Any, what: str = "string") -> str:
    """An argument Sprig declares ``string``: text/template passes a string (a ``json.Number`` too,
    a string type) and fails the call for anything else."""
    if not isinstance(v, str):
        raise TemplateError(f"wrong type for value; expected {what}; got {_go_type(v)}")
    return v


def _go_int_arg(v: Any) -> int:
    """An argument Sprig declares ``int``: a Go int (a template's integer constant)."""
    if type(v) is not int:
        raise TemplateError(f"wrong type for value; expected int; got {_go_type(v)}")
    return v


def _go_list(v: Any, fn: str) -> list[Any]:
    """The list a Sprig list function takes; anything else fails it, as Sprig's panic does."""
    if isinstance(v, list | tuple):
        return list(v)
    raise ValueError(f"Cannot {fn} on type {_go_type(v)}")


def _like(v: Any, items: list[Any]) -> list[Any]:
    """``items`` as a list of the kind ``v`` is: the object's (its numbers ``json.Number``s) or
    one the template made."""
    return items if type(v) is list else GoList(items)


def _indent(n: Any, s: Any) -> str:
    pad = " " * max(_go_int_arg(n), 0)
    return pad + _go_str(s).replace("\n", "\n" + pad)


def _repeat(n: Any, s: Any) -> str:
    count = _go_int_arg(n)
    if count < 0:
        raise ValueError("strings: negative Repeat count")
    return _go_str(s) * count


def _bytes_cut(s: str, start: int, end: int | None) -> str:
    """Go's ``s[start:end]`` of a string: by UTF-8 bytes (a cut inside a character leaves
    U+FFFD, where Go leaves the bytes); out of range fails, as Go's panic."""
    b = s.encode()
    stop = len(b) if end is None else end
    if not 0 <= start <= stop <= len(b):
        raise ValueError(f"runtime error: slice bounds out of range [{start}:{stop}] with length {len(b)}")
    return b[start:stop].decode("utf-8", "replace")


def _trunc(c: Any, s: Any) -> str:
    n, text = _go_int_arg(c), _go_str(s)
    size = len(text.encode())
    if n < 0 and size + n > 0:
        return _bytes_cut(text, size + n, None)
    if n >= 0 and size > n:
        return _bytes_cut(text, 0, n)
    return text


def _substr(start: Any, end: Any, s: Any) -> str:
    a, b, text = _go_int_arg(start), _go_int_arg(end), _go_str(s)
    if a < 0:
        return _bytes_cut(text, 0, b)
    if b < 0 or b > len(text.encode()):
        return _bytes_cut(text, a, None)
    return _bytes_cut(text, a, b)


def _cat(*a: Any) -> str:
    return " ".join(go_format(x) for x in a if x is not None)


def _go_space(c: str) -> bool:
    """Go's ``unicode.IsSpace`` (Python's ``isspace`` also takes U+001C..U+001F)."""
    return c.isspace() and c not in "\x1c\x1d\x1e\x1f"


def _trim_space(s: str) -> str:
    """Go's ``strings.TrimSpace``."""
    i, j = 0, len(s)
    while i < j and _go_space(s[i]):
        i += 1
    while j > i and _go_space(s[j - 1]):
        j -= 1
    return s[i:j]


def _first(v: Any) -> Any:
    items = _go_list(v, "find first")
    return items[0] if items else None


def _last(v: Any) -> Any:
    items = _go_list(v, "find last")
    return items[-1] if items else None


def _rest(v: Any) -> Any:
    items = _go_list(v, "find rest")
    return _like(v, items[1:]) if items else None


def _initial(v: Any) -> Any:
    items = _go_list(v, "find initial")
    return _like(v, items[:-1]) if items else None


def _go_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` as Sprig's ``has``, ``uniq``, ``without`` use it: values of different
    Go types are different (``1`` and ``1.0``, ``1`` and ``"1"``, a ``json.Number`` and a string)."""
    if type(a) is not type(b) and not (isinstance(a, dict) and isinstance(b, dict)) \
            and not (isinstance(a, list | tuple) and isinstance(b, list | tuple)):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_go_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_go_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _has(needle: Any, haystack: Any) -> bool:
    if haystack is None:
        return False
    return any(_go_equal(x, needle) for x in _go_list(haystack, "find has"))


def _uniq(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in _go_list(v, "find uniq"):
        if not any(_go_equal(x, y) for y in out):
            out.append(x)
    return _like(v, out)


def _without(v: Any, *omit: Any) -> list[Any]:
    return _like(v, [x for x in _go_list(v, "find without") if not any(_go_equal(x, o) for o in omit)])


def _sort_alpha(v: Any) -> list[str]:
    if isinstance(v, list | tuple):
        return GoList(sorted(_strslice(v)))
    return GoList([_strval(v)])


def _go_dict(v: Any) -> dict[str, Any]:
    """An argument Sprig declares ``map[string]interface{}``."""
    if not isinstance(v, dict):
        raise TemplateError(f"wrong type for value; expected map[string]interface {{}}; got {_go_type(v)}")
    return v


def _set(d: Any, k: Any, v: Any) -> dict[str, Any]:
    m = _go_dict(d)
    m[_go_str(k)] = v
    return m


def _unset(d: Any, k: Any) -> dict[str, Any]:
    m = _go_dict(d)
    m.pop(_go_str(k), None)
    return m


def _pick(d: Any, *keys: Any) -> GoMap:
    m = _go_dict(d)
    return GoMap({k: m[k] for k in (_go_str(x) for x in keys) if k in m})


def _omit(d: Any, *keys: Any) -> GoMap:
    m, drop = _go_dict(d), {_go_str(x) for x in keys}
    return GoMap({k: v for k, v in m.items() if k not in drop})


def _dig(*a: Any) -> Any:
    """Sprig's ``dig KEY... DEFAULT DICT``: the value at the keys' path, the default where one is
    missing (a value on the way that is not a map fails, as Sprig's type assertion)."""
    if len(a) < 3:
        raise ValueError("dig needs at least three arguments")
    *keys, default, d = a
    cur = _go_dict(d)
    for i, k in enumerate(keys):
        step = cur.get(_go_str(k), _MISSING) if isinstance(cur, dict) else _MISSING
        if step is _MISSING:
            return default
        if i == len(keys) - 1:
            return _field_value(cur, step)
        if not isinstance(step, dict):
            raise ValueError(f"interface conversion: interface {{}} is {_go_type(step)}, not map[string]interface {{}}")
        cur = step
    return default


def _go_kind(v: Any) -> str:
    """``reflect.Kind`` of a template's value as Sprig's ``kindOf`` names it."""
    if v is None:
        return "invalid"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, dict):
        return "map"
    return "slice" if isinstance(v, list | tuple) else "struct"


def _type_of(v: Any) -> str:
    """``fmt.Sprintf("%T", v)``."""
    return "<nil>" if v is None else _go_type(v)


def _sha256sum(s: Any) -> str:
    import hashlib

    return hashlib.sha256(_go_str(s).encode()).hexdigest()


def _sha1sum(s: Any) -> str:
    import hashlib

    return hashlib.sha1(_go_str(s).encode(), usedforsecurity=False).hexdigest()


def _until(n: Any) -> GoList:
    count = _go_int_arg(n)
    return GoList(range(count)) if count >= 0 else GoList(range(0, count, -1))


def _pretty_json(v: Any, pad: str) -> str:
    """``json.MarshalIndent(v, pad, "  ")`` past its first line."""
    if isinstance(v, dict) and v:
        inner = pad + "  "
        return "{\n" + ",\n".join(f"{inner}{json_marshal_string(str(k))}: {_pretty_json(v[k], inner)}"
                                   for k in sorted(v)) + "\n" + pad + "}"
    if isinstance(v, list | tuple) and v:
        inner = pad + "  "
        return "[\n" + ",\n".join(inner + _pretty_json(x, inner) for x in v) + "\n" + pad + "]"
    return json_marshal(v)


def _to_pretty_json(v: Any) -> str:
    """Sprig's ``toPrettyJson``: ``json.MarshalIndent(v, "", "  ")`` (HTML-escaped, numbers as
    ``json.Marshal`` writes them), its error dropped (NaN: nothing)."""
    try:
        return _pretty_json(v, "")
    except ValueError:
        return ""


def _from_json(s: Any) -> Any:
    """Sprig's ``fromJson``: ``json.Unmarshal`` into ``interface{}``, so every number a
    ``float64`` (``{{ (fromJson "{\\"a\\":1}").a }}`` is ``1``, a float); invalid JSON nothing."""
    try:
        v = json.loads(_go_str(s), parse_int=float, parse_constant=_refuse_constant)
    except ValueError:
        return None
    return _go_made(v)


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _go_made(v: Any) -> Any:
    if isinstance(v, dict):
        return GoMap({k: _go_made(x) for k, x in v.items()})
    if isinstance(v, list):
        return GoList(_go_made(x) for x in v)
    return v


_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]")


def _regex(pattern: Any) -> re.Pattern[str] | None:
    """A Go regular expression (RE2) as Python's ``re`` reads it: ``\\d``, ``\\w``, ``\\s``, ``\\b``
    ASCII as RE2's; None for what RE2 refuses (lookarounds, back-references) or Python does
    (Sprig's ``regexMatch`` and friends drop the error). Not RE2's: ``$`` also matches before
    a final line break, and ``(?i)`` folds ASCII only."""
    text = _go_str(pattern)
    if _NOT_RE2.search(text):
        return None
    try:
        return re.compile(text, re.ASCII)
    except re.error:
        return None


def _regex_match(pattern: Any, s: Any) -> bool:
    rx = _regex(pattern)
    return rx is not None and rx.search(_go_str(s)) is not None


def _regex_find(pattern: Any, s: Any) -> str:
    rx = _regex(pattern)
    m = rx.search(_go_str(s)) if rx is not None else None
    return m.group(0) if m else ""


def _regex_find_all(pattern: Any, s: Any, n: Any) -> GoList:
    rx, limit = _regex(pattern), _go_int_arg(n)
    if rx is None:
        return GoList()
    found = [m.group(0) for m in rx.finditer(_go_str(s))]
    return GoList(found if limit < 0 else found[:limit])


def _regex_replace_all_literal(pattern: Any, s: Any, repl: Any) -> str:
    rx = _regex(pattern)
    text, new = _go_str(s), _go_str(repl)
    return text if rx is None else rx.sub(lambda _m: new, text)


def _fail(msg: Any) -> str:
    """Sprig's ``fail``: the template fails with the message."""
    raise ValueError(_go_str(msg))


def _field_value(d: dict[str, Any], v: Any) -> Any:
    """A value read out of a map: a number of the object's as its ``json.Number``."""
    t = type(v)
    return _number(v) if (t is int or t is float) and not isinstance(d, GoMap) else v


def _to_raw_json(v: Any) -> str:
    """Sprig's ``toRawJson``: ``json.Marshal`` without HTML escaping, its error dropped."""
    try:
        return json_marshal(v, escape_html=False)
    except ValueError:
        return ""


def _slice(v: Any, *indices: Any) -> list[Any]:
    """Sprig's ``slice LIST [START [END]]`` (Go's ``l[start:end]``: out of range fails)."""
    items = _go_list(v, "slice")
    start = _to_int(indices[0]) if indices else 0
    end = _to_int(indices[1]) if len(indices) > 1 else len(items)
    if not 0 <= start <= end <= len(items):
        raise ValueError(f"reflect: slice index out of range [{start}:{end}] with length {len(items)}")
    return _like(v, items[start:end])


def _chunk(size: Any, v: Any) -> GoList:
    n, items = _go_int_arg(size), _go_list(v, "chunk")
    if n <= 0:  # Go's arithmetic makes a negative length of it
        raise ValueError("runtime error: makeslice: len out of range")
    return GoList(_like(v, items[i:i + n]) for i in range(0, len(items), n))


def _until_step(start: Any, stop: Any, step: Any) -> GoList:
    a, b, c = _go_int_arg(start), _go_int_arg(stop), _go_int_arg(step)
    if (b < a and c >= 0) or (b >= a and c <= 0):
        return GoList()
    return GoList(range(a, b, c))


def _splitn(sep: Any, n: Any, v: Any) -> GoMap:
    """Sprig's ``splitn``: ``strings.SplitN`` as a map ``_0``, ``_1``..."""
    text, by, count = _go_str(v), _go_str(sep), _go_int_arg(n)
    if count == 0:
        parts: list[str] = []
    elif by == "":
        chars = list(text)
        parts = chars if count < 0 or count >= len(chars) else [*chars[:count - 1], "".join(chars[count - 1:])]
    else:
        parts = text.split(by, count - 1 if count > 0 else -1)
    return GoMap({f"_{i}": p for i, p in enumerate(parts)})


def _b32dec(s: Any) -> str:
    import base64
    import binascii

    try:
        return base64.b32decode(_go_str(s)).decode("utf-8", "replace")
    except (binascii.Error, ValueError) as e:
        return str(e)


def _adler32sum(s: Any) -> str:
    import zlib

    return str(zlib.adler32(_go_str(s).encode()))


_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _go_path_clean(p: str) -> str:
    """Go's ``path.Clean`` (POSIX's ``normpath`` but for a leading ``//``, which Go makes ``/``)."""
    import posixpath

    cleaned = posixpath.normpath(p) if p else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _go_path_base(p: str) -> str:
    if p == "":
        return "."
    trimmed = p.rstrip("/")
    return "/" if trimmed == "" else trimmed.rsplit("/", 1)[-1]


def _go_path_dir(p: str) -> str:
    return _go_path_clean(p[:p.rfind("/") + 1])


def _go_path_ext(p: str) -> str:
    i = len(p) - 1
    while i >= 0 and p[i] != "/":
        if p[i] == ".":
            return p[i:]
        i -= 1
    return ""


def _ceil(v: Any) -> float:
    return float(math.ceil(_to_float(v))) if math.isfinite(_to_float(v)) else _to_float(v)


def _floor(v: Any) -> float:
    return float(math.floor(_to_float(v))) if math.isfinite(_to_float(v)) else _to_float(v)


SPRIG: Funcs = {
    "now": _now,
    "default": _default,
    "empty": lambda v: not truthy(v),
    "coalesce": lambda *a: next((x for x in a if truthy(x)), None),
    "ternary": lambda vt, vf, cond: vt if truthy(cond) else vf,
    "quote": lambda *a: " ".join(go_quote(_strval(x)) for x in a if x is not None),
    "squote": lambda *a: " ".join(f"'{_strval(x)}'" for x in a if x is not None),
    "toString": _strval,
    "toJson": _to_json,
    "int": _to_int,
    "int64": _to_int,
    "float64": _to_float,
    "atoi": _atoi,
    "add": lambda *a: sum(_to_int(x) for x in a),
    "add1": lambda a: _to_int(a) + 1,
    "sub": lambda a, b: _to_int(a) - _to_int(b),
    "mul": lambda a, *b: math.prod([_to_int(a), *(_to_int(x) for x in b)]),
    "div": _go_div,
    "mod": _go_mod,
    "max": lambda a, *b: max([_to_int(a), *(_to_int(x) for x in b)]),
    "min": lambda a, *b: min([_to_int(a), *(_to_int(x) for x in b)]),
    "list": lambda *a: GoList(a),
    "hasKey": lambda d, k: isinstance(d, dict) and k in d,
    "get": lambda d, k: d.get(k, "") if isinstance(d, dict) else "",
    "trim": lambda s: _trim_space(_strval(s)),
    "lower": lambda s: _strval(s).lower(),
    "upper": lambda s: _strval(s).upper(),
    "replace": lambda old, new, src: _strval(src).replace(_strval(old), _strval(new)),
    "contains": lambda sub, s: _strval(sub) in _strval(s),
    "hasPrefix": lambda p, s: _strval(s).startswith(_strval(p)),
    "hasSuffix": lambda p, s: _strval(s).endswith(_strval(p)),
    "trimPrefix": lambda p, s: _strval(s).removeprefix(_strval(p)),
    "trimSuffix": lambda p, s: _strval(s).removesuffix(_strval(p)),
    "join": lambda sep, v: _strval(sep).join(_strslice(v)),
    "splitList": lambda sep, s: _split(_strval(s), _strval(sep)),
    "indent": _indent,
    "nindent": lambda n, v: "\n" + _indent(n, v),
    "repeat": _repeat,
    "trunc": _trunc,
    "substr": _substr,
    "cat": _cat,
    "nospace": lambda v: "".join(c for c in _go_str(v) if not _go_space(c)),
    "trimAll": lambda cutset, v: _go_str(v).strip(_go_str(cutset)),
    "split": lambda sep, v: GoMap({f"_{i}": p for i, p in enumerate(_split(_go_str(v), _go_str(sep)))}),
    "toStrings": lambda v: GoList(_strslice(v)),
    "first": _first,
    "last": _last,
    "rest": _rest,
    "initial": _initial,
    "append": lambda v, x: _like(v, [*_go_list(v, "append"), x]),
    "push": lambda v, x: _like(v, [*_go_list(v, "push"), x]),
    "prepend": lambda v, x: _like(v, [x, *_go_list(v, "prepend")]),
    "concat": lambda *ls: GoList(x for v in ls for x in _go_list(v, "concat")),
    "reverse": lambda v: _like(v, _go_list(v, "find reverse")[::-1]),
    "compact": lambda v: _like(v, [x for x in _go_list(v, "compact") if truthy(x)]),
    "has": _has,
    "uniq": _uniq,
    "without": _without,
    "sortAlpha": _sort_alpha,
    "keys": lambda *ds: GoList(k for d in ds for k in sorted(_go_dict(d))),
    "values": lambda d: GoList(_field_value(d, _go_dict(d)[k]) for k in sorted(d)),
    "set": _set,
    "unset": _unset,
    "pick": _pick,
    "omit": _omit,
    "pluck": lambda k, *ds: GoList(_field_value(d, _go_dict(d)[k]) for d in ds if k in _go_dict(d)),
    "dig": _dig,
    "all": lambda *a: all(truthy(x) for x in a),
    "any": lambda *a: any(truthy(x) for x in a),
    "kindOf": _go_kind,
    "kindIs": lambda kind, v: _go_str(kind) == _go_kind(v),
    "typeOf": _type_of,
    "typeIs": lambda t, v: _go_str(t) == _type_of(v),
    "sha256sum": _sha256sum,
    "sha1sum": _sha1sum,
    "until": _until,
    "fromJson": _from_json,
    "toPrettyJson": _to_pretty_json,
    "regexMatch": _regex_match,
    "regexFind": _regex_find,
    "regexFindAll": _regex_find_all,
    "regexReplaceAllLiteral": _regex_replace_all_literal,
    "tuple": lambda *a: GoList(a),
    "slice": _slice,
    "chunk": _chunk,
    "untilStep": _until_step,
    "splitn": _splitn,
    "deepEqual": _go_equal,
    "toRawJson": _to_raw_json,
    "b32enc": lambda v: __import__("base64").b32encode(_strval(v).encode()).decode(),
    "b32dec": _b32dec,
    "adler32sum": _adler32sum,
    "regexQuoteMeta": lambda v: _REGEX_META.sub(r"\\\1", _go_str(v)),
    "base": lambda v: _go_path_base(_go_str(v)),
    "dir": lambda v: _go_path_dir(_go_str(v)),
    "ext": lambda v: _go_path_ext(_go_str(v)),
    "clean": lambda v: _go_path_clean(_go_str(v)),
    "isAbs": lambda v: _go_str(v).startswith("/"),
    "ceil": _ceil,
    "floor": _floor,
    "fail": _fail,
    "b64enc": _b64enc,
    "b64dec": _b64dec,
    "uuidv4": _uuidv4,
}


BUILTINS: Funcs = {
    "and": lambda *a: next((x for x in a if not truthy(x)), a[-1]),
    "or": lambda *a: next((x for x in a if truthy(x)), a[-1]),
    "not": lambda a: not truthy(a),
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "lt": lambda a, b: _ordered(a, b)[0] < b,
    "le": lambda a, b: _ordered(a, b)[0] <= b,
    "gt": lambda a, b: _ordered(a, b)[0] > b,
    "ge": lambda a, b: _ordered(a, b)[0] >= b,
    "len": lambda a: len(a),
    "index": _index,
    "print": lambda *a: "".join(go_format(x) for x in a),
    "println": lambda *a: " ".join(go_format(x) for x in a) + "\n",
    "printf": _printf,
    "dict": _dict,
    **SPRIG,
}


def _called(nodes: list[Any], out: set[str]) -> set[str]:
    """The names of the functions a template tree calls."""
    def pipe(p: _Pipe) -> None:
        for cmd in p.commands:
            operand(cmd)

    def operand(op: Any) -> None:
        if isinstance(op, _Call):
            out.add(op.name)
            for a in op.args:
                operand(a)
        elif isinstance(op, _Sub):
            pipe(op.pipe)

    for node in nodes:
        if isinstance(node, _Pipe):
            pipe(node)
        elif isinstance(node, _Block):
            pipe(node.pipe)
            _called(node.body, out)
            _called(node.orelse, out)
    return out


class Template:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = _parse(text)
        # every function it calls: a caller can refuse one it will not provide before rendering
        self.functions = frozenset(_called(self.tree, set()))

    def render(self, data: Any, funcs: Funcs) -> str:
        out: list[str] = []
        scopes: list[dict[str, Any]] = [{"$": data}]
        _Exec({**BUILTINS, **funcs}, scopes, out).run(self.tree, data)
        return "".join(out)


class _Exec:
    def __init__(self, funcs: Funcs, scopes: list[dict[str, Any]], out: list[str]) -> None:
        self.funcs = funcs
        self.scopes = scopes
        self.out = out

    def var(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise TemplateError(f"undefined variable {name}")

    def set_var(self, name: str, value: Any, assign: bool) -> None:
        if assign:
            for scope in reversed(self.scopes):
                if name in scope:
                    scope[name] = value
                    return
            raise TemplateError(f"undefined variable {name}")
        self.scopes[-1][name] = value

    def run(self, nodes: list[Any], dot: Any) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.out.append(node)
            elif isinstance(node, _Pipe):
                value = self.pipe(node, dot)
                if not node.declare:
                    self.out.append(go_format(value))
            else:
                self.block(node, dot)

    def block(self, b: _Block, dot: Any) -> None:
        self.scopes.append({})
        try:
            if b.kind == "range":
                self.range(b, dot)
                return
            value = self.pipe(b.pipe, dot, declare_as_value=True)
            if truthy(value):
                self.run(b.body, value if b.kind == "with" else dot)
            else:
                self.run(b.orelse, dot)
        finally:
            self.scopes.pop()

    def range(self, b: _Block, dot: Any) -> None:
        pipe = b.pipe
        value = self.pipe(_Pipe(pipe.commands), dot)
        if isinstance(value, GoMap):  # (a template's own: Go's numbers)
            items: list[tuple[Any, Any]] = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, dict):
            items = [(k, _number(value[k])) for k in sorted(value)]
        elif isinstance(value, GoList):
            items = list(enumerate(value))
        elif isinstance(value, list | tuple):
            items = [(i, _number(v)) for i, v in enumerate(value)]
        elif isinstance(value, int) and not isinstance(value, bool):
            items = [(i, i) for i in range(value)]
        elif value is None:
            items = []
        else:
            raise TemplateError(f"range can't iterate over {go_format(value)}")
        if not items:
            self.run(b.orelse, dot)
            return
        for k, v in items:
            if len(pipe.declare) == 2:
                self.scopes[-1][pipe.declare[0]] = k
                self.scopes[-1][pipe.declare[1]] = v
            elif len(pipe.declare) == 1:
                self.scopes[-1][pipe.declare[0]] = v
            self.run(b.body, v)

    def pipe(self, p: _Pipe, dot: Any, declare_as_value: bool = False) -> Any:
        value: Any = _MISSING
        for cmd in p.commands:
            value = self.command(cmd, dot, value)
        for name in p.declare:
            self.set_var(name, value, p.assign)
        return value

    def command(self, cmd: Any, dot: Any, piped: Any) -> Any:
        if isinstance(cmd, _Call):
            if cmd.name in _SHORT_CIRCUIT and self.funcs.get(cmd.name) is BUILTINS[cmd.name]:
                return self.short_circuit(cmd, dot, piped)
            fn = self.funcs.get(cmd.name)
            if fn is None:
                raise TemplateError(f'function "{cmd.name}" not defined')
            args = [self.operand(a, dot) for a in cmd.args]
            if piped is not _MISSING:
                args.append(piped)
            try:
                return fn(*args)
            except TemplateError:
                raise
            except Exception as e:
                raise TemplateError(f"error calling {cmd.name}: {e}") from e
        if piped is not _MISSING:
            raise TemplateError("can't pipe into a non-function")
        return self.operand(cmd, dot)

    def short_circuit(self, cmd: _Call, dot: Any, piped: Any) -> Any:
        """Go's ``and`` and ``or`` (since Go 1.18): the arguments evaluated in turn, up to the
        first that decides (``or``: the first true one; ``and``: the first false one), so that
        ``or .a (index .b 0)`` does not fail when ``.a`` is set; else the last."""
        if not cmd.args and piped is _MISSING:
            raise TemplateError(f"wrong number of args for {cmd.name}: want at least 1 got 0")
        decides = cmd.name == "or"
        value: Any = None
        for a in cmd.args:
            value = self.operand(a, dot)
            if truthy(value) is decides:
                return value
        return piped if piped is not _MISSING else value

    def operand(self, op: Any, dot: Any) -> Any:
        if isinstance(op, _Lit):
            return op.value
        if isinstance(op, _Field):
            base = dot if op.base is None else self.var(op.base)
            return _walk(base, op.path)
        if isinstance(op, _Call):
            return self.command(op, dot, _MISSING)
        if isinstance(op, _Sub):
            return _walk(self.pipe(op.pipe, dot), op.path)
        raise TemplateError(f"bad operand {op!r}")


_MISSING = object()
_SHORT_CIRCUIT = frozenset({"and", "or"})


def _walk(v: Any, path: tuple[str, ...]) -> Any:
    parent = None
    for key in path:
        if isinstance(v, dict):
            parent, v = v, v.get(key)
        elif v is None:
            return None
        else:
            raise TemplateError(f"can't evaluate field {key} in type {type(v).__name__}")
    t = type(v)
    # a field's number: json.Number (but in a map the template made: Go's number)
    return _number(v) if (t is int or t is float) and path and not isinstance(parent, GoMap) else v
