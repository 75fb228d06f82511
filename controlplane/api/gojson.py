"""Go's ``encoding/json`` words for a body that is not JSON, as kube-apiserver's decoders
report it: its scanner's ``SyntaxError`` messages, and ``Unmarshal``'s for a JSON value that
is no object where its serializer looks for ``apiVersion`` and ``kind``.

Only the error path uses this (a body orjson has refused), so it is a plain port of the
scanner's states, one byte at a time:

    >>> syntax_error(b"apiVersion: v1")
    "invalid character 'a' looking for beginning of value"
    >>> syntax_error(b'{"a": 1,}')
    "invalid character '}' looking for beginning of object key string"
    >>> syntax_error(b'{"a": tru}')
    "invalid character '}' in literal true (expecting 'e')"
    >>> syntax_error(b"[1, 2")
    'unexpected end of JSON input'
    >>> syntax_error(b'{"a": 1}') is None
    True
"""

from __future__ import annotations

import json
import math
import re

__all__ = ["NumberOutOfRange", "interpret_error", "loads", "summarize", "syntax_error"]

_SPACE = frozenset(b" \t\r\n")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_EOF = "unexpected end of JSON input"
_MAX_DEPTH = 10000  # the scanner's nesting limit
# the anonymous struct kube's SimpleMetaFactory.Interpret unmarshals into, as Go prints its type
_FIND_KIND = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
_C_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v",
              0x5C: "\\\\"}


def _quote(c: int) -> str:
    """Go's ``quoteChar``: the byte as ``strconv.Quote`` writes it (as a rune), in single quotes."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    if c in _C_ESCAPES:
        return f"'{_C_ESCAPES[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    if 0x80 <= c <= 0xA0 or c == 0xAD:  # not printable as strconv.IsPrint sees it
        return f"'\\u00{c:02x}'"
    return f"'{chr(c)}'"


def _invalid(c: int, context: str) -> str:
    return f"invalid character {_quote(c)} {context}"


def syntax_error(data: bytes) -> str | None:
    """The message of Go's scanner for ``data`` (``checkValid``), or None if it scans as JSON."""
    stack: list[str] = []  # "key": in an object before ':', "value": after it, "array"
    state = "begin"
    i, n = 0, len(data)
    while i < n:
        # a run of bytes that leaves the state as it is, skipped in one step (most of a large
        # body is string contents, digits and indentation)
        run = _RUNS.get(state)
        if run is not None:
            skipped = run(data, i)  # (a run may be empty: it always matches)
            i = skipped.end() if skipped is not None else i
            if i >= n:
                break
        c = data[i]
        i += 1
        if state in ("begin", "begin_or_empty"):
            if c in _SPACE:
                continue
            if state == "begin_or_empty" and c == 0x5D:  # ']'
                stack.pop()
                state = "end"
                continue
            if c == 0x7B:  # '{'
                if len(stack) >= _MAX_DEPTH:
                    return "exceeded max depth"
                stack.append("key")
                state = "key_or_empty"
            elif c == 0x5B:  # '['
                if len(stack) >= _MAX_DEPTH:
                    return "exceeded max depth"
                stack.append("array")
                state = "begin_or_empty"
            elif c == 0x22:
                state = "string"
            elif c == 0x2D:  # '-'
                state = "neg"
            elif c == 0x30:
                state = "zero"
            elif 0x31 <= c <= 0x39:
                state = "int"
            elif c in b"tfn":
                state = {0x74: "t", 0x66: "f", 0x6E: "n"}[c]
            else:
                return _invalid(c, "looking for beginning of value")
            continue
        if state in ("key_or_empty", "key"):
            if c in _SPACE:
                continue
            if state == "key_or_empty" and c == 0x7D:  # '}'
                stack.pop()
                state = "end"
                continue
            if c == 0x22:
                state = "string"
                continue
            return _invalid(c, "looking for beginning of object key string")
        if state == "string":
            if c == 0x22:
                state = "end"
            elif c == 0x5C:
                state = "esc"
            elif c < 0x20:
                return _invalid(c, "in string literal")
            continue
        if state == "esc":
            if c in _ESCAPES:
                state = "string"
            elif c == 0x75:  # 'u'
                state = "u0"
            else:
                return _invalid(c, "in string escape code")
            continue
        if state in ("u0", "u1", "u2", "u3"):
            if c not in _HEX:
                return _invalid(c, "in \\u hexadecimal character escape")
            state = {"u0": "u1", "u1": "u2", "u2": "u3", "u3": "string"}[state]
            continue
        if state == "neg":
            if c == 0x30:
                state = "zero"
            elif 0x31 <= c <= 0x39:
                state = "int"
            else:
                return _invalid(c, "in numeric literal")
            continue
        if state == "int" and c in _DIGITS:
            continue
        if state in ("int", "zero"):
            if c == 0x2E:  # '.'
                state = "dot"
                continue
            if c in b"eE":
                state = "e"
                continue
            state = "end"  # this byte ends the number: read again below
        elif state == "dot":
            if c not in _DIGITS:
                return _invalid(c, "after decimal point in numeric literal")
            state = "frac"
            continue
        elif state == "frac":
            if c in _DIGITS:
                continue
            if c in b"eE":
                state = "e"
                continue
            state = "end"
        elif state in ("e", "esign"):
            if state == "e" and c in b"+-":
                state = "esign"
                continue
            if c not in _DIGITS:
                return _invalid(c, "in exponent of numeric literal")
            state = "exp"
            continue
        elif state == "exp":
            if c in _DIGITS:
                continue
            state = "end"
        elif state in _LITERALS:
            literal, expected, following = _LITERALS[state]
            if c != expected:
                return _invalid(c, f"in literal {literal} (expecting {_quote(expected)})")
            state = following
            continue
        if state == "top":
            if c not in _SPACE:
                return _invalid(c, "after top-level value")
            continue
        # state == "end": a value has ended; what may follow it
        if not stack:
            state = "top"
            i -= 1
            continue
        if c in _SPACE:
            continue
        where = stack[-1]
        if where == "key":
            if c != 0x3A:  # ':'
                return _invalid(c, "after object key")
            stack[-1] = "value"
            state = "begin"
        elif where == "value":
            if c == 0x2C:
                stack[-1] = "key"
                state = "key"
            elif c == 0x7D:
                stack.pop()
            else:
                return _invalid(c, "after object key:value pair")
        else:
            if c == 0x2C:
                state = "begin"
            elif c == 0x5D:
                stack.pop()
            else:
                return _invalid(c, "after array element")
    if state in ("top", "end", "int", "zero", "frac", "exp") and not stack:
        return None
    return _EOF


# the states in which a run of these bytes changes nothing: string contents (no quote,
# backslash or control byte), whitespace between tokens, a number's digits
_STRING_RUN = re.compile(rb'[^"\\\x00-\x1f]*').match
_SPACE_RUN = re.compile(rb"[ \t\r\n]*").match
_DIGIT_RUN = re.compile(rb"[0-9]*").match
_RUNS = {"string": _STRING_RUN, "int": _DIGIT_RUN, "frac": _DIGIT_RUN, "exp": _DIGIT_RUN,
         **dict.fromkeys(("begin", "begin_or_empty", "key_or_empty", "key", "end", "top"), _SPACE_RUN)}

# the states within true, false and null: (the literal, the byte expected, the next state)
_LITERALS: dict[str, tuple[str, int, str]] = {
    "t": ("true", 0x72, "tr"), "tr": ("true", 0x75, "tru"), "tru": ("true", 0x65, "end"),
    "f": ("false", 0x61, "fa"), "fa": ("false", 0x6C, "fal"), "fal": ("false", 0x73, "fals"),
    "fals": ("false", 0x65, "end"),
    "n": ("null", 0x75, "nu"), "nu": ("null", 0x6C, "nul"), "nul": ("null", 0x6C, "end"),
}


def interpret_error(data: bytes, value: object) -> str:
    """What kube's ``SimpleMetaFactory.Interpret`` says of a body: Go's syntax error, or, for
    JSON that is an array, a string, a number or a boolean, ``Unmarshal``'s type error."""
    problem = syntax_error(data)
    if problem is None:
        kind = ("array" if isinstance(value, list) else "string" if isinstance(value, str)
                else "bool" if isinstance(value, bool) else "number")
        problem = f"json: cannot unmarshal {kind} into Go value of type {_FIND_KIND}"
    return f"couldn't get version/kind; json parse error: {problem}"


def summarize(data: bytes, limit: int = 30) -> str:
    """apiserver's ``summarizeData``: an object's first bytes as text, anything else's in hex."""
    if not data:
        return "<empty>"
    if data[0] == 0x7B:
        return data[:limit].decode("utf-8", "replace") + (" ..." if len(data) > limit else "")
    return data[:limit].hex() + (" ..." if len(data) > limit else "")


_SURROGATE = re.compile("[\ud800-\udfff]")
_INT64 = 1 << 63


class NumberOutOfRange(ValueError):
    """A number past a float64's range (``1e400``), which Go's decoder refuses where Python's
    would read infinity (and orjson write it back as null): ``strconv.ParseFloat``'s range
    error, as ``Unmarshal`` into an ``interface{}`` words it."""


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberOutOfRange(f"json: cannot unmarshal number {text} into Go value of type float64")
    return value


def _number(text: str) -> int | float:
    value = int(text)
    return value if -_INT64 <= value < _INT64 else _float(text)


def _valid(value: object) -> object:
    """Lone surrogates (from ``\\ud800`` escapes) as U+FFFD, as Go decodes them."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_valid(v) for v in value]
    if isinstance(value, dict):
        return {_valid(k): _valid(v) for k, v in value.items()}
    return value


def loads(data: bytes) -> object:
    """JSON that Go's decoder reads and orjson refuses (call it once ``syntax_error`` has found
    nothing wrong): invalid UTF-8 and lone surrogate escapes become U+FFFD, integers past 64
    bits floats, as decoding into an ``interface{}`` makes them; a number past a float64's
    range raises ``NumberOutOfRange``, as Go refuses it (never an infinity)."""
    return _valid(json.loads(data.decode("utf-8", "replace"), parse_int=_number, parse_float=_float))
