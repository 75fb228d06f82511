"""The jq expressions KWOK stage selectors and delays use as keys.

KWOK evaluates a selector's ``key`` (and a delay's ``expressionFrom``) with
gojq against the object. This is the subset its stage files use, compiled
once and evaluated to the stream of values it yields:

- paths: ``.metadata.name``, ``.metadata.annotations["a/b"]`` (also
  ``.["a"]``), array iteration ``.[]`` (``.status.conditions.[]`` and
  ``.status.conditions[]``), an index ``.[0]``;
- pipes ``a | b``;
- ``select(A == B)`` and ``select(A != B)`` where A and B are paths or
  string, number, boolean or null literals;
- ``any(. == L)``, L a literal: whether an array holds L (``true``/``false``;
  null, an absent list, as an empty one), as the default stages ask of a
  restart rule's exit codes.

Anything else raises ``JqError`` when the stage is loaded.

    >>> Jq('.status.conditions.[] | select( .type == "Ready" ) | .status').values(
    ...     {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    ['True']
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Jq", "JqError"]


class JqError(ValueError):
    pass


Step = Callable[[Any], Iterator[Any]]

_SEGMENT = re.compile(r"""
      \.?\[\s*\]                         # iterate
    | \.?\[\s*(?P<idx>-?\d+)\s*\]        # index
    | \.?\[\s*(?P<key>"(?:[^"\\]|\\.)*")\s*\]   # quoted key
    | \.(?P<name>[A-Za-z_][A-Za-z0-9_-]*)  # plain key
""", re.X)
_SELECT = re.compile(r"^select\s*\((?P<a>.*?)(?P<op>==|!=)(?P<b>.*)\)$", re.S)
_ANY = re.compile(r"^any\s*\(\s*\.\s*==(?P<lit>.*)\)$", re.S)


def _split_pipes(expr: str) -> list[str]:
    parts, depth, quote, start = [], 0, False, 0
    for i, ch in enumerate(expr):
        if ch == '"' and (i == 0 or expr[i - 1] != "\\"):
            quote = not quote
        elif not quote:
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == "|" and depth == 0:
                parts.append(expr[start:i])
                start = i + 1
    parts.append(expr[start:])
    return [p.strip() for p in parts]


def _path(src: str) -> list[Step]:
    if src == ".":
        return []
    steps: list[Step] = []
    pos = 0
    while pos < len(src):
        m = _SEGMENT.match(src, pos)
        if m is None:
            raise JqError(f"unsupported jq expression {src!r} (at {src[pos:]!r})")
        if m.group("name") is not None:
            steps.append(_key_step(m.group("name")))
        elif m.group("key") is not None:
            steps.append(_key_step(json.loads(m.group("key"))))
        elif m.group("idx") is not None:
            steps.append(_index_step(int(m.group("idx"))))
        else:
            steps.append(_iterate)
        pos = m.end()
    return steps


def _key_step(key: str) -> Step:
    def step(v: Any) -> Iterator[Any]:
        if isinstance(v, dict):
            yield v.get(key)
        elif v is None:
            yield None
        # a key of a list or scalar is an error in jq; KWOK then treats the key as not matching

    return step


def _index_step(i: int) -> Step:
    def step(v: Any) -> Iterator[Any]:
        if isinstance(v, list):
            yield v[i] if -len(v) <= i < len(v) else None
        elif v is None:
            yield None

    return step


def _iterate(v: Any) -> Iterator[Any]:
    if isinstance(v, list):
        yield from v
    elif isinstance(v, dict):
        yield from v.values()


def _operand(src: str) -> Callable[[Any], list[Any]]:
    src = src.strip()
    if src.startswith("."):
        inner = Jq(src)
        return inner.values
    try:
        lit = json.loads(src)
    except json.JSONDecodeError:
        raise JqError(f"unsupported jq operand {src!r}") from None
    return lambda _v: [lit]


def _select(a: str, op: str, b: str) -> Step:
    left, right = _operand(a), _operand(b)

    def step(v: Any) -> Iterator[Any]:
        for x in left(v):
            for y in right(v):
                if (x == y) == (op == "=="):
                    yield v
                    return

    return step


def _any(src: str) -> Step:
    try:
        lit = json.loads(src)
    except json.JSONDecodeError:
        raise JqError(f"unsupported jq operand {src.strip()!r} of any()") from None

    def step(v: Any) -> Iterator[Any]:
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        yield any(x == lit for x in items)

    return step


_PLAIN = re.compile(r"(\.[A-Za-z_][A-Za-z0-9_-]*)+")


class Jq:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self._steps: list[Step] = []
        parts = _split_pipes(expr.strip())
        for part in parts:
            m = _SELECT.match(part)
            if m:
                self._steps.append(_select(m.group("a"), m.group("op"), m.group("b")))
            elif m := _ANY.match(part):
                self._steps.append(_any(m.group("lit")))
            elif part.startswith("."):
                self._steps.extend(_path(part))
            else:
                raise JqError(f"unsupported jq expression {part!r} in {expr!r}")
        # a plain path of keys (``.metadata.deletionTimestamp``, most stage selectors' keys):
        # walked directly, as the steps would, a tenth of their cost on every pod event
        plain = expr.strip()
        self._keys = tuple(plain[1:].split(".")) if _PLAIN.fullmatch(plain) else None
        # else the leading keys and iterations (``.spec.containers.[].restartPolicyRules.[]``)
        # are walked so too, and the steps after them only if that yields anything: most pods
        # have none of what the default stages' rule selectors look for
        self._lead, self._rest = _lead(parts[0]), self._steps
        if self._lead:
            self._rest = self._steps[len(self._lead):]

    def values(self, obj: Any) -> list[Any]:
        """Every value the expression yields (jq's output stream), nulls included."""
        if self._keys is not None:
            for key in self._keys:
                if isinstance(obj, dict):
                    obj = obj.get(key)
                elif obj is not None:
                    return []  # a key of a list or scalar: no output (an error in jq)
            return [obj]
        stream: list[Any] = _walk(obj, self._lead) if self._lead else [obj]
        for step in self._rest:
            if not stream:
                break
            stream = [out for v in stream for out in step(v)]
        return stream


_LEAD = re.compile(r"(\.[A-Za-z_][A-Za-z0-9_-]*|\.?\[\s*\])+")


def _lead(part: str) -> tuple[str | None, ...]:
    """The keys (None for ``[]``) of a first part made only of plain keys and iterations."""
    if not part.startswith(".") or not _LEAD.fullmatch(part):
        return ()
    return tuple(None if "[" in seg else seg[1:] for seg in re.findall(r"\.?\[\s*\]|\.[A-Za-z_][A-Za-z0-9_-]*", part))


def _walk(obj: Any, lead: tuple[str | None, ...]) -> list[Any]:
    """What ``_key_step`` and ``_iterate`` yield along ``lead``, in one loop."""
    stream = [obj]
    for key in lead:
        if key is None:
            out: list[Any] = []
            for v in stream:
                if isinstance(v, list):
                    out.extend(v)
                elif isinstance(v, dict):
                    out.extend(v.values())
            stream = out
            if not stream:
                return stream
        else:
            stream = [v.get(key) if v is not None else None for v in stream if v is None or isinstance(v, dict)]
    return stream
