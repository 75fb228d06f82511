"""JSON numbers as kube-apiserver's Go code holds them: what its decoders make of ``80.0``.

Python keeps the text's kind (``80`` an int, ``80.0`` a float); upstream's decoders do not
all agree:

- Decoded into a Go struct (a create's or update's body, a JSON or merge patch's result),
  ``80.0`` is no int: ``json: cannot unmarshal number 80.0 into Go struct field ... of type
  int32`` (``strconv.ParseInt`` of the number's text).
- Decoded into unstructured (a custom resource; ``k8s.io/apimachinery/pkg/util/json``),
  it is a float64 while the request lasts, int64 only when the text parses as one; Go's
  encoder writes a whole float64 without a fraction (``80``), so it is stored, and read
  back, as the int ``80`` (``written_back``).
- apimachinery's unstructured converter (a strategic merge patch's result, a server-side
  apply's merge) takes a float64 for an int field when it is whole (``math.Trunc``) and
  converts it as ``reflect.Value.Convert`` does (``go_int``); 3.5 is ``cannot convert
  float64 to int32``.
- A server-side apply's body is YAML, made JSON by ``json.Marshal`` before it is decoded
  with ``UseNumber``: every whole float in it is an int64 from the start (``written_back``).

    >>> written_back(80.0), written_back(2.5), written_back(2.0 ** 62), written_back(1e20)
    (80, 2.5, 4611686018427388000, 1e+20)
    >>> go_int(4294967299.0, 32), go_int(3000000000, 32), go_int(1e300, 64)
    (3, -1294967296, -9223372036854775808)

Go's encoder writes a float64 in plain decimal from 1e-6 up to 1e21 and with an exponent
outside (``json_text``), where orjson changes at 1e-5 and 1e16: ``go_json`` rewrites what
orjson wrote. ``%v`` (an error message's number) has an exponent below 1e-4 and from 1e6
(``format_v``).

    >>> json_text(1e20), json_text(1.5e-6), json_text(1e21), json_text(1e-7), json_text(-0.0)
    ('100000000000000000000', '0.0000015', '1e+21', '1e-7', '-0')
    >>> go_json(b'{"a":1e+20,"b":"1e+20","c":[1.5e-6,2.5]}')
    b'{"a":100000000000000000000,"b":"1e+20","c":[0.0000015,2.5]}'
    >>> format_v(1e20), format_v(1e6), format_v(123456.5), format_v(1e-5), format_v(0.0001)
    ('1e+20', '1e+06', '123456.5', '1e-05', '0.0001')
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

__all__ = ["format_v", "go_int", "go_json", "json_text", "may_hold_uint64s", "may_hold_whole_floats",
           "uint64s_written_back", "whole_floats_written_back", "written_back"]

_INT64_MIN, _INT64_END = -(1 << 63), 1 << 63
_EXACT = float(1 << 53)  # below it a whole float's digits are its value's


def written_back(x: float) -> int | float:
    """A float64 as Go's JSON encoder writes it and apimachinery's JSON decoder reads it back:
    an int when whole and the digits written parse as an int64 (the shortest digits that
    name the float, then zeros: 2^62 is written ``4611686018427388000``), else the float
    (2.5; 1e20, written ``100000000000000000000``, past an int64)."""
    if not x.is_integer():  # (NaN and the infinities too)
        return x
    if -_EXACT < x < _EXACT:
        return int(x)
    n = int(Decimal(repr(x)))
    return n if _INT64_MIN <= n < _INT64_END else x


def go_int(x: int | float, bits: int) -> int:
    """``reflect.Value.Convert`` of an int64 or a (whole) float64 to a Go int of ``bits``
    bits, as the unstructured converter converts one: a float through Go's ``int64(f)``
    (on amd64, one past int64 is ``-9223372036854775808``), then the low ``bits`` bits kept
    (an int32's 4294967299 is 3)."""
    if type(x) is float:
        x = int(x) if -_INT64_END <= x < _INT64_END else _INT64_MIN
    span = 1 << bits
    half = span >> 1
    return (int(x) + half) % span - half


def may_hold_whole_floats(encoded: bytes) -> bool:
    """Whether ``encoded`` (orjson's output) may hold a whole float: orjson writes one as
    ``80.0`` or, from 1e16, ``1e+16``. Two C scans (the ``+`` alone: memchr), about 2 us for
    a 650-byte custom resource here; a string holding ``.0`` or ``+`` (an IP address, a
    version) only costs the walk ``whole_floats_written_back`` does."""
    return b"+" in encoded or b".0" in encoded


def whole_floats_written_back(value: Any) -> bool:
    """Replace, in place, each float of a decoded JSON tree by ``written_back`` of it: the
    tree as Go's encoder writes an unstructured object and its decoder reads it back.
    True if anything changed."""
    changed = False
    pending = [value]
    while pending:
        node = pending.pop()
        if type(node) is dict:
            for k, v in node.items():
                t = type(v)
                if t is float:
                    n = written_back(v)
                    if n is not v:
                        node[k] = n  # (the key is there: the dict's size does not change)
                        changed = True
                elif t is dict or t is list:
                    pending.append(v)
        elif type(node) is list:
            for i, v in enumerate(node):
                t = type(v)
                if t is float:
                    n = written_back(v)
                    if n is not v:
                        node[i] = n
                        changed = True
                elif t is dict or t is list:
                    pending.append(v)
    return changed


_NINETEEN_DIGITS = re.compile(rb"[0-9]{19}")
_UINT64_END = 1 << 64


def may_hold_uint64s(encoded: bytes) -> bool:
    """Whether JSON ``encoded`` may hold an integer from 2^63 to 2^64 - 1, which orjson decodes
    as an int where Go's decoder into unstructured makes a float64 of it (19 or 20 digits; a
    longer one orjson reads as a float). A regex scan of the bytes; a string of 19 digits
    (base64, a long id) only costs the walk ``uint64s_written_back`` does."""
    return _NINETEEN_DIGITS.search(encoded) is not None


def uint64s_written_back(value: Any) -> bool:
    """Replace, in place, each int of a decoded JSON tree from 2^63 up (orjson's unsigned 64-bit
    ones) by what Go's encoder writes for the float64 its decoder into unstructured makes of it
    (apimachinery's ``util/json``: an int64 when the number's text parses as one, else a
    float64), as orjson reads that back: the float's shortest digits then zeros, an int
    (``9223372036854775808`` is ``9223372036854776000``), or the float where those digits
    pass 2^64 (orjson reads such a number as a float). So the tree is what a custom resource's
    stored bytes read back as, and a number the server's JSON validation calls an integer is
    one Go's does (one from 2^63 is a ``number`` there). True if anything changed.

        >>> tree = {"a": [9223372036854775808, 9223372036854775807], "b": 18446744073709551615}
        >>> uint64s_written_back(tree), tree
        (True, {'a': [9223372036854776000, 9223372036854775807], 'b': 1.8446744073709552e+19})
    """
    changed = False
    pending = [value]
    while pending:
        node = pending.pop()
        items = node.items() if type(node) is dict else enumerate(node)
        for k, v in items:
            t = type(v)
            if t is int:
                if v >= _INT64_END:
                    x = float(v)
                    n = int(Decimal(repr(x)))
                    if n >= _UINT64_END or n != v:  # (written back already: as it is)
                        node[k] = n if n < _UINT64_END else x  # (the key or index is there: no resize)
                        changed = True
            elif t is dict or t is list:
                pending.append(v)
    return changed


def _digits(x: float) -> tuple[str, int]:
    """The shortest digits that read back as ``abs(x)`` (Go's precision -1 finds the same as
    Python's ``repr``), and the decimal exponent of the first: 1.5e-06 is ("15", -6)."""
    _, digits, exponent = Decimal(repr(abs(x))).as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    return shown, len(digits) + exponent - 1


def _plain(shown: str, point: int) -> str:
    """Digits with the first at the decimal exponent ``point``, without an exponent."""
    if point < 0:
        return "0." + "0" * (-point - 1) + shown
    if len(shown) > point + 1:
        return shown[:point + 1] + "." + shown[point + 1:]
    return shown + "0" * (point + 1 - len(shown))


def _exponent(shown: str, point: int) -> str:
    """``strconv.FormatFloat(x, 'e', -1, 64)`` of the digits: two exponent digits at least."""
    mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
    return f"{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"


def json_text(x: float) -> str:
    """A finite float64 as Go's ``encoding/json`` writes it (``floatEncoder``): plain decimal
    (``strconv`` 'f', shortest digits) for 1e-6 <= |x| < 1e21, else 'e' with ``e-07``
    cleaned up to ``e-7``."""
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    shown, point = _digits(x)
    sign = "-" if x < 0 else ""
    if 1e-6 <= abs(x) < 1e21:
        return sign + _plain(shown, point)
    text = _exponent(shown, point)
    if len(text) >= 4 and text[-4:-1] == "e-0":
        text = text[:-2] + text[-1]
    return sign + text


def format_v(x: float) -> str:
    """A float64 as Go's ``%v`` prints it (``strconv`` 'g', shortest digits, which decides on
    the exponent as for precision 6): an exponent below -4 or from 6 up (``1e-05``,
    ``1e+06``), plain decimal between."""
    if math.isnan(x) or math.isinf(x):
        return "NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf")
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    shown, point = _digits(x)
    return ("-" if x < 0 else "") + (_exponent(shown, point) if point < -4 or point >= 6 else _plain(shown, point))


# orjson writes an exponent from 1e16 and below 1e-5, Go from 1e21 and below 1e-6: the
# numbers the two write differently (a whole float below 1e16, ``80.0``, is ``written_back``)
_UNLIKE = re.compile(rb"e(?:-6|\+1[6-9]|\+20)(?![0-9])")  # (matched after a digit)
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.]*e[-+][0-9]+')


def _unlike(encoded: bytes) -> bool:
    """Whether orjson wrote a float in ``encoded`` as Go would not: byte searches for the
    exponents (``+`` first, a memchr), each hit checked where it is (base64 holds a few)."""
    markers = (b"e+1", b"e+20", b"e-6") if b"+" in encoded else (b"e-6",)
    for marker in markers:
        at = encoded.find(marker)
        while at > 0:
            if 0x30 <= encoded[at - 1] <= 0x39 and _UNLIKE.match(encoded, at):
                return True
            at = encoded.find(marker, at + 1)
    return False


def go_json(encoded: bytes) -> bytes:
    """orjson's output with each float written as Go's encoder writes it (``json_text``),
    where orjson writes one otherwise (1e-6 <= |x| < 1e-5 and 1e16 <= |x| < 1e21: ``1e+20``
    is ``100000000000000000000``). A few byte scans when there is none; strings are left alone."""
    if not _unlike(encoded):
        return encoded

    def token(m: re.Match[bytes]) -> bytes:
        text = m.group()
        return text if text[0] == 0x22 else json_text(float(text)).encode()

    return _TOKENS.sub(token, encoded)
