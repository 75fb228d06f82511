"""CEL syntax the interpreter's parser lacks, rewritten into calls it parses before it
compiles an expression (``registry/expressions.py``): the optional field selection and
indexing (``self.?spec.replicas``, ``list[?0]``), and the two-variable comprehensions
(``self.all(k, v, ...)``, Kubernetes' since 1.32)::

    rewritten("self.?spec.replicas.orValue(1)")
    # "self._cp_opt_field('spec')._cp_field('replicas').orValue(1)"

The optional calls (``cellibs``) do what cel-go does: ``x.?f`` is ``optional.of(x.f)`` when
``x`` has ``f`` and ``optional.none()`` when not (and of an optional ``x``, its value's field,
or none); ``x[?k]`` the same for a list's index or a map's key. As in cel-go, the selections
and indexes that follow in the same chain apply to the optional, staying optional
(``self.?a.b`` is none when ``a`` is absent, and when ``b`` is): they are rewritten to
``_cp_field``/``_cp_index``, which act as the plain ``.b``/``[k]`` on a value that is not
optional. Method calls in the chain (``.orValue(1)``, ``.hasValue()``) are left as written.

A two-variable comprehension walks ``_cp_entries(x)``, the ``[index, item]`` pairs of a list
or the ``[key, value]`` pairs of a map, with the interpreter's one-variable macro, binding
the two names to a pair's halves by one-item ``map`` macros (``[e[0]].map(k, ...)[0]``, the
value of the body with ``k`` bound, evaluated once)::

    m.all(k, v, P)              -> _cp_entries(m).all(_cp_e, <P with k, v bound>)
    (exists, existsOne and exists_one the same)
    l.transformList(i, v, E)    -> _cp_entries(l).map(_cp_e, <E>)   (a filter F first: .filter(_cp_e, <F>))
    m.transformMap(k, v, E)     -> _cp_entries(m).map(_cp_e, [_cp_e[0], <E>])._cp_map_of()
    m.transformMapEntry(k, v, E) -> _cp_entries(m).map(_cp_e, <E>)._cp_merged()

Not rewritten: an optional selected on anything but such a chain (``optional.of(m).f``, or
``(self.?a).b``) is not propagated, and optional entries of list and map literals
(``[?x]``, ``{?'k': v}``) stay refused by the parser. Text inside string literals is never
touched.
"""

from __future__ import annotations

import re

__all__ = ["CHAIN_FIELD", "CHAIN_INDEX", "ENTRIES", "MAP_OF", "MERGED", "OPTIONAL_FIELD", "OPTIONAL_INDEX",
           "rewritten"]

OPTIONAL_FIELD, OPTIONAL_INDEX = "_cp_opt_field", "_cp_opt_index"
CHAIN_FIELD, CHAIN_INDEX = "_cp_field", "_cp_index"
ENTRIES, MAP_OF, MERGED = "_cp_entries", "_cp_map_of", "_cp_merged"
_ENTRY = "_cp_e"
_TWO_VARIABLE = {"all": 3, "exists": 3, "existsOne": 3, "exists_one": 3, "transformList": 4, "transformMap": 4,
                 "transformMapEntry": 4}  # the most arguments each takes
_TWO_VARIABLE_CALL = re.compile(r"\.\s*(?:" + "|".join(_TWO_VARIABLE) + r")\s*\(")
_NAME = re.compile(r"[A-Za-z_]\w*")

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


def rewritten(expression: str) -> str:
    """``expression`` with its optional syntax and two-variable comprehensions rewritten as
    the module says; an expression without them is returned as it is."""
    if ".?" not in expression and "[?" not in expression.replace(" ", "") \
            and not _TWO_VARIABLE_CALL.search(expression):
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
    if name_at >= len(tokens) or not _NAME.fullmatch(tokens[name_at]):
        return None
    name = tokens[name_at]
    after = _next(tokens, name_at + 1)
    if optional:
        return f".{OPTIONAL_FIELD}('{name}')", name_at + 1, True
    if name in _TWO_VARIABLE and after < len(tokens) and tokens[after] == "(":
        comprehension = _two_variable(tokens, name, after)
        if comprehension is not None:
            return comprehension[0], comprehension[1], chained
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


def _arguments(tokens: list[str], at: int) -> tuple[list[list[str]], int]:
    """The arguments of the call whose ``(`` is at ``at``, each its tokens (split at the
    commas outside brackets), and the index just past its ``)``."""
    args: list[list[str]] = [[]]
    depth = 0
    at += 1
    while at < len(tokens):
        token = tokens[at]
        if token in _CLOSING:
            depth += 1
        elif token in (")", "]", "}"):
            if depth == 0:
                return args, at + 1
            depth -= 1
        elif token == "," and depth == 0:
            args.append([])
            at += 1
            continue
        args[-1].append(token)
        at += 1
    return args, at


def _two_variable(tokens: list[str], macro: str, paren: int) -> tuple[str, int] | None:
    """``.macro(a, b, ...)`` rewritten (module docstring), and the index past its ``)``; None
    for a call that is not a two-variable comprehension (``.all(x, p)``)."""
    args, end = _arguments(tokens, paren)
    names = ["".join(a).strip() for a in args[:2]]
    if not 3 <= len(args) <= _TWO_VARIABLE[macro] or not all(_NAME.fullmatch(n) for n in names):
        return None
    first, second = names
    body = ["".join(_rewrite(a, 0, "")[0]).strip() for a in args[2:]]

    def bound(expression: str) -> str:
        return f"[{_ENTRY}[0]].map({first}, [{_ENTRY}[1]].map({second}, {expression})[0])[0]"

    walk = f".{ENTRIES}()"
    if macro in ("all", "exists", "existsOne", "exists_one"):
        return f"{walk}.{'exists_one' if macro == 'existsOne' else macro}({_ENTRY}, {bound(body[0])})", end
    if len(body) == 2:  # a filter
        walk += f".filter({_ENTRY}, {bound(body[0])})"
    made = body[-1]
    if macro == "transformList":
        return f"{walk}.map({_ENTRY}, {bound(made)})", end
    if macro == "transformMap":
        return f"{walk}.map({_ENTRY}, [{_ENTRY}[0], {bound(made)}]).{MAP_OF}()", end
    return f"{walk}.map({_ENTRY}, {bound(made)}).{MERGED}()", end
