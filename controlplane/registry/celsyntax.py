"""CEL's optional field selection and indexing (``self.?spec.replicas``, ``list[?0]``), which
the interpreter's parser refuses (``unsupported syntax '.?'``), rewritten into calls it
parses, before it compiles an expression (``registry/expressions.py``)::

    optional_syntax("self.?spec.replicas.orValue(1)")
    # "self._cp_opt_field('spec')._cp_field('replicas').orValue(1)"

The calls (``cellibs``) do what cel-go does: ``x.?f`` is ``optional.of(x.f)`` when ``x`` has
``f`` and ``optional.none()`` when not (and of an optional ``x``, its value's field, or none);
``x[?k]`` the same for a list's index or a map's key. As in cel-go, the selections and
indexes that follow in the same chain apply to the optional, staying optional
(``self.?a.b`` is none when ``a`` is absent, and when ``b`` is): they are rewritten to
``_cp_field``/``_cp_index``, which act as the plain ``.b``/``[k]`` on a value that is not
optional. Method calls in the chain (``.orValue(1)``, ``.hasValue()``) are left as written.

Not rewritten: an optional selected on anything but such a chain (``optional.of(m).f``, or
``(self.?a).b``) is not propagated, and optional entries of list and map literals
(``[?x]``, ``{?'k': v}``) stay refused by the parser. Text inside string literals is never
touched.
"""

from __future__ import annotations

import re

__all__ = ["OPTIONAL_FIELD", "OPTIONAL_INDEX", "CHAIN_FIELD", "CHAIN_INDEX", "optional_syntax"]

OPTIONAL_FIELD, OPTIONAL_INDEX = "_cp_opt_field", "_cp_opt_index"
CHAIN_FIELD, CHAIN_INDEX = "_cp_field", "_cp_index"

_TOKEN = re.compile(r"""
    (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|"))
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _tokens(expression: str) -> list[str]:
    """The expression cut into string literals, names, white space and single characters."""
    out: list[str] = []
    at = 0
    while at < len(expression):
        m = _TOKEN.match(expression, at)
        assert m is not None  # the last alternative takes any character
        if m.group("string") is not None:
            at = _string_end(expression, m.end(), m.group("string"))
            out.append(expression[m.start():at])
            continue
        out.append(m.group(0))
        at = m.end()
    return out


def _string_end(expression: str, at: int, opener: str) -> int:
    quote = opener.lstrip("rRbB")
    raw = "r" in opener[:len(opener) - len(quote)].lower()
    while at < len(expression):
        if expression.startswith(quote, at):
            return at + len(quote)
        at += 2 if expression[at] == "\\" and not raw else 1
    return len(expression)  # unterminated: the parser says so


def optional_syntax(expression: str) -> str:
    """``expression`` with its ``.?f`` and ``[?k]`` rewritten as the module says; an
    expression without them is returned as it is."""
    if ".?" not in expression and "[?" not in expression.replace(" ", ""):
        return expression
    tokens = _tokens(expression)
    out, _ = _rewrite(tokens, 0, "")
    return "".join(out)


def _next(tokens: list[str], at: int) -> int:
    """The index of the first token at or after ``at`` that is not white space."""
    while at < len(tokens) and tokens[at].isspace():
        at += 1
    return at


def _rewrite(tokens: list[str], at: int, closing: str) -> tuple[list[str], int]:
    """The tokens from ``at`` up to the ``closing`` bracket (or the end), rewritten; and the
    index just past that bracket."""
    out: list[str] = []
    chained = False  # an optional step was taken in the current member chain
    while at < len(tokens):
        token = tokens[at]
        if token == closing:
            return out, at + 1
        if token.isspace():
            out.append(token)
            at += 1
            continue
        if token == ".":
            step = _member(tokens, at, chained)
            if step is not None:
                text, at, chained = step
                out.append(text)
                continue
        if token == "[" and (chained or _is_optional_index(tokens, at)) and out and _ends_operand(out):
            optional = _is_optional_index(tokens, at)
            start = _next(tokens, at + 1) + 1 if optional else at + 1
            inner, at = _rewrite(tokens, start, "]")
            out.append(f".{OPTIONAL_INDEX if optional else CHAIN_INDEX}({''.join(inner)})")
            chained = True
            continue
        if token in _CLOSING:
            inner, at = _rewrite(tokens, at + 1, _CLOSING[token])
            out.append(token + "".join(inner) + _CLOSING[token])
            chained = False
            continue
        out.append(token)
        chained = False
        at += 1
    return out, at


def _member(tokens: list[str], at: int, chained: bool) -> tuple[str, int, bool] | None:
    """``.?f`` (always), or ``.f`` and ``.m(args)`` in a chain that took an optional step;
    None for a ``.`` to leave as it is."""
    name_at = _next(tokens, at + 1)
    optional = name_at < len(tokens) and tokens[name_at] == "?"
    if optional:
        name_at = _next(tokens, name_at + 1)
    if name_at >= len(tokens) or not re.fullmatch(r"[A-Za-z_]\w*", tokens[name_at]):
        return None
    name = tokens[name_at]
    after = _next(tokens, name_at + 1)
    if optional:
        return f".{OPTIONAL_FIELD}('{name}')", name_at + 1, True
    if not chained:
        return None
    if after < len(tokens) and tokens[after] == "(":  # a method call: kept, the chain goes on
        inner, end = _rewrite(tokens, after + 1, ")")
        return f".{name}({''.join(inner)})", end, True
    return f".{CHAIN_FIELD}('{name}')", name_at + 1, True


def _is_optional_index(tokens: list[str], at: int) -> bool:
    inside = _next(tokens, at + 1)
    return inside < len(tokens) and tokens[inside] == "?"


def _ends_operand(out: list[str]) -> bool:
    """Whether what was written so far ends an operand a ``[`` indexes (not a list literal)."""
    last = next((t for t in reversed(out) if not t.isspace()), "")
    return bool(last) and (last[-1] in ")]}'\"" or last[-1].isalnum() or last[-1] == "_")
