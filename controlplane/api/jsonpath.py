"""The JSONPath of ``additionalPrinterColumns``: the subset of kubectl's JSONPath
that column paths use.

    >>> find(".status.conditions[?(@.type==\\"Ready\\")].status", obj)
    ['True']

Supported steps: ``.field`` (with ``\\.`` for a dot in the name, as in a label
key: ``.metadata.labels.node\\.kubernetes\\.io/instance-type``), ``['field']``, ``[n]`` (negative counts from the
end), ``[*]`` and ``.*``, ``[?(@.path==value)]`` / ``!=`` (value a quoted string
or a number), ``..field`` (recursive descent). A path may be wrapped in ``{}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import orjson

__all__ = ["JsonPathError", "compile_path", "find"]


class JsonPathError(ValueError):
    pass


Step = Callable[[Any], Iterator[Any]]

_TOKEN = re.compile(r"""
    \.\.(?P<descend>[A-Za-z0-9_-]+)
  | \.(?P<field>(?:[A-Za-z0-9_/-]|\\\.)+|\*)
  | \[\s*'(?P<quoted>[^']*)'\s*\]
  | \[\s*"(?P<dquoted>[^"]*)"\s*\]
  | \[\s*(?P<index>-?\d+)\s*\]
  | \[\s*(?P<star>\*)\s*\]
  | \[\?\(\s*@(?P<fpath>(?:\.[A-Za-z0-9_-]+)+)\s*(?P<op>==|!=)\s*(?P<fvalue>"[^"]*"|'[^']*'|-?[0-9.]+|true|false)\s*\)\]
""", re.VERBOSE)


def _field(name: str) -> Step:
    def step(v: Any) -> Iterator[Any]:
        if isinstance(v, dict) and name in v:
            yield v[name]
    return step


def _all(v: Any) -> Iterator[Any]:
    if isinstance(v, dict):
        yield from v.values()
    elif isinstance(v, list):
        yield from v


def _index(i: int) -> Step:
    def step(v: Any) -> Iterator[Any]:
        if isinstance(v, list) and -len(v) <= i < len(v):
            yield v[i]
    return step


def _descend(name: str) -> Step:
    def step(v: Any) -> Iterator[Any]:
        if isinstance(v, dict):
            if name in v:
                yield v[name]
            for child in v.values():
                yield from step(child)
        elif isinstance(v, list):
            for child in v:
                yield from step(child)
    return step


def _filter(path: str, op: str, raw: str) -> Step:
    names = path.strip(".").split(".")
    wanted: Any = raw[1:-1] if raw[:1] in "'\"" else orjson.loads(raw)

    def get(item: Any) -> Any:
        for n in names:
            if not isinstance(item, dict):
                return None
            item = item.get(n)
        return item

    def step(v: Any) -> Iterator[Any]:
        for item in v if isinstance(v, list) else []:
            if (get(item) == wanted) == (op == "=="):
                yield item
    return step


def compile_path(path: str) -> list[Step]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JsonPathError(f"unsupported JSONPath {path!r} at {text[pos:]!r}")
        pos = m.end()
        if m["descend"]:
            steps.append(_descend(m["descend"]))
        elif m["field"] == "*" or m["star"]:
            steps.append(_all)
        elif m["field"]:
            steps.append(_field(m["field"].replace("\\.", ".")))  # a label key: node\.kubernetes\.io/zone
        elif m["quoted"] is not None or m["dquoted"] is not None:
            steps.append(_field(m["quoted"] if m["quoted"] is not None else m["dquoted"]))
        elif m["index"]:
            steps.append(_index(int(m["index"])))
        else:
            steps.append(_filter(m["fpath"], m["op"], m["fvalue"]))
    return steps


def find(path: str | list[Step], obj: Any) -> list[Any]:
    """Every value ``path`` selects in ``obj``, in document order."""
    values = [obj]
    for step in compile_path(path) if isinstance(path, str) else path:
        values = [out for v in values for out in step(v)]
    return values
