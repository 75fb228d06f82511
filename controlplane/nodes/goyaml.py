"""YAML as KWOK's ``YAML`` template function writes it: ``sigs.k8s.io/yaml``'s ``Marshal``.

That is Go's ``json.Marshal`` of the value, read back by go-yaml v2 (so a JSON number becomes
an ``int`` when ``strconv.ParseInt`` or ``ParseUint`` takes its text, else a ``float64``) and
written out by go-yaml v2's encoder, a port of libyaml. What differs from PyYAML's
``safe_dump`` of the same value:

- a float is Go's ``strconv.FormatFloat(f, 'g', -1, 64)`` of the JSON number: ``1.0`` is
  ``1``, ``1e16`` is ``10000000000000000`` (an integer in JSON), ``1e-7`` is ``1e-07``,
  ``1e20`` is ``1e+20`` (past uint64), ``1234567.5`` is ``1.2345675e+06``;
- a string that go-yaml v2 would read back as something else (``"true"``, ``"yes"``, ``"1"``,
  ``"1e3"``, ``"0o17"``, ``"null"``, ``""``, a timestamp, ``"1:20"``; not ``<<``, which its
  resolver never looks up) is
  double-quoted, not single-quoted; one holding a line break is a literal block (``|``);
- map keys are in go-yaml's "natural" order (``a2`` before ``a10``), not byte order.

    >>> marshal({"b": 1e16, "a": 1.0, "s": "yes"})
    'a: 1\\nb: 10000000000000000\\ns: "yes"\\n'
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

import yaml

from controlplane.nodes.gotemplate import GoNumber, _go_g, _json_float, parse_go_float

__all__ = ["marshal"]

try:  # libyaml: the emitter go-yaml v2 ports (PyYAML's own ends a root plain scalar with "...")
    from yaml import CDumper as _Dumper
except ImportError:  # pragma: no cover
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]

_INT64 = (-(2 ** 63), 2 ** 63)
_UINT64_END = 2 ** 64


def _go_key_less(a: str, b: str) -> bool:
    """go-yaml v2's ``keyList.Less`` for two string keys: letters by code point, a run of
    digits by its value (``a2`` < ``a10``), a letter after a digit run before anything else."""
    digits = False
    for i in range(min(len(a), len(b))):
        ca, cb = a[i], b[i]
        if ca == cb:
            digits = ca.isdigit()
            continue
        al, bl = ca.isalpha(), cb.isalpha()
        if al and bl:
            return ca < cb
        if al or bl:
            return al if digits else bl
        an = bn = 0
        if ca == "0" or cb == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an = an * 10 + int(a[ai]) if a[ai] in "0123456789" else an
            ai += 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn = bn * 10 + int(b[bi]) if b[bi] in "0123456789" else bn
            bi += 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return ca < cb
    return len(a) < len(b)


class _Key:
    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Key) -> bool:
        return _go_key_less(self.s, other.s)


# --- go-yaml v2's resolve(): what a plain scalar reads back as (a string needs quotes unless str).
# Its table of words is looked up only for a scalar whose first character hints at one (``y``,
# ``n``, ``t``, ``f``, ``o``, ``~``, ``.``, a sign, a digit, or none): all of these but "<<"

_BOOL_NULL_MERGE = frozenset((
    "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
    "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
    "", "~", "null", "Null", "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF",
    "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"))
_HINT_MAP = frozenset("yYnNtTfFoO~")
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
# the layouts go-yaml v2's parseTimestamp gives time.Parse: 2006-1-2T15:4:5.999999999Z07:00 (T or
# t), "2006-1-2 15:4:5.999999999" and 2006-1-2 (one- or two-digit fields but the year)
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
                        r"(?:(?:[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2}))"
                        r"|(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?))?")
_GO_INT_DIGITS = {"0x": "0123456789abcdefABCDEF", "0o": "01234567", "0b": "01"}


def _go_parse_int(s: str, unsigned: bool) -> bool:
    """``strconv.ParseInt(s, 0, 64)`` (or ``ParseUint``) succeeds (``s`` has no ``_`` here)."""
    body = s
    if body[:1] in "+-":
        if unsigned:
            return False
        body = body[1:]
    if not body:
        return False
    prefix = body[:2].lower()
    if prefix in _GO_INT_DIGITS:
        digits, base, body = _GO_INT_DIGITS[prefix], {"0x": 16, "0o": 8, "0b": 2}[prefix], body[2:]
    elif body[0] == "0" and len(body) > 1:
        digits, base, body = "01234567", 8, body[1:]
    else:
        digits, base = "0123456789", 10
    if not body or any(c not in digits for c in body):
        return False
    v = int(body, base) * (-1 if s[0] == "-" else 1)
    return 0 <= v < _UINT64_END if unsigned else _INT64[0] <= v < _INT64[1]


def _is_timestamp(s: str) -> bool:
    m = _TIMESTAMP.fullmatch(s)
    if m is None:
        return False
    y, mo, d = int(m[1]), int(m[2]), int(m[3])
    h, mi, sec = (m[4], m[5], m[6]) if m[4] is not None else (m[7], m[8], m[9])
    try:
        datetime(y, mo, d)
    except ValueError:
        return False
    return h is None or (int(h) < 24 and int(mi) < 60 and int(sec) < 60)


def _plain_ok(s: str) -> bool:
    """go-yaml v2's ``stringv``: ``s`` may go unquoted (it resolves to a string, and is not a
    YAML 1.1 base-60 float)."""
    if s in _BOOL_NULL_MERGE:
        return False
    hint = s[0]
    if hint == ".":
        return not parse_go_float(s) is not None
    if hint in "+-0123456789":
        if _is_timestamp(s):
            return False
        plain = s.replace("_", "")
        if plain and (_go_parse_int(plain, False) or _go_parse_int(plain, True)):
            return False
        if _YAML_STYLE_FLOAT.fullmatch(plain) and parse_go_float(plain) is not None:
            return False
        if plain.startswith("0b") and plain[2:] and all(c in "01" for c in plain[2:]) and \
                int(plain[2:], 2) < _UINT64_END:
            return False
        if plain.startswith("-0b") and plain[3:] and all(c in "01" for c in plain[3:]) and \
                int(plain[3:], 2) <= 2 ** 63:
            return False
        return not _BASE60_FLOAT.fullmatch(s)
    return True


# --- the value, as go-yaml v2 holds json.Marshal's text of it

def _number_text(text: str) -> str:
    """A JSON number's text as go-yaml v2 reads it and writes it back: an int when ParseInt or
    ParseUint takes it, else ``FormatFloat(f, 'g', -1, 64)``."""
    if not any(c in text for c in ".eE"):
        n = int(text)
        if _INT64[0] <= n < _UINT64_END:
            return str(n)
    return _go_g(float(text), None)


def _events(v: Any, out: list[Any]) -> None:
    if v is None:
        out.append(yaml.ScalarEvent(None, None, (True, True), "null"))
    elif isinstance(v, bool):
        out.append(yaml.ScalarEvent(None, None, (True, True), "true" if v else "false"))
    elif isinstance(v, GoNumber):
        out.append(yaml.ScalarEvent(None, None, (True, True), _number_text(str.__str__(v))))
    elif isinstance(v, str):
        _string(v, out)
    elif isinstance(v, int):
        out.append(yaml.ScalarEvent(None, None, (True, True), _number_text(str(v))))
    elif isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"error marshaling into JSON: json: unsupported value: {_go_g(v, None)}")
        out.append(yaml.ScalarEvent(None, None, (True, True), _number_text(_json_float(v))))
    elif isinstance(v, dict):
        out.append(yaml.MappingStartEvent(None, None, True, flow_style=False))
        for k in sorted((str(k) for k in v), key=_Key):
            _string(k, out)
            _events(v[k], out)
        out.append(yaml.MappingEndEvent())
    elif isinstance(v, list | tuple):
        out.append(yaml.SequenceStartEvent(None, None, True, flow_style=False))
        for x in v:
            _events(x, out)
        out.append(yaml.SequenceEndEvent())
    else:
        _string(str(v), out)


def _string(s: str, out: list[Any]) -> None:
    style = "|" if "\n" in s else (None if _plain_ok(s) else '"')
    out.append(yaml.ScalarEvent(None, None, (True, True), s, style=style))


def marshal(v: Any) -> str:
    """``sigs.k8s.io/yaml.Marshal(v)``: the document, ending in a line break (``{}`` for an
    empty map, ``null`` for nothing). NaN or an infinity is a ``ValueError``, as json.Marshal's."""
    events: list[Any] = [yaml.StreamStartEvent(), yaml.DocumentStartEvent(explicit=False)]
    _events(v, events)
    events += [yaml.DocumentEndEvent(explicit=False), yaml.StreamEndEvent()]
    text: str = yaml.emit(events, Dumper=_Dumper, allow_unicode=True, width=80, indent=2)
    return text.removesuffix("...\n")
