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
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

__all__ = ["go_int", "may_hold_whole_floats", "whole_floats_written_back", "written_back"]

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
