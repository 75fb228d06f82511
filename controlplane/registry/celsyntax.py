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

A CRD's rule selects a property whose name is not a CEL identifier by its escaped name, as
upstream's ``cel.Escape`` names it (``foo-bar`` is ``foo__dash__bar``, ``x.y`` ``x__dot__y``,
``a/b`` ``a__slash__b``, ``a__b`` ``a__underscores__b``, the reserved word ``namespace``
``__namespace__``), and upstream's objects of a CRD's schema look a selected name up
unescaped (``cel.Unescape``); the interpreter's maps look it up as written. So, asked to
(``unescape``, for a CRD's rules only: an admission policy's objects are plain maps upstream,
where ``object.metadata.__namespace__`` is no such key), such a selection is rewritten to an
index by the unescaped name, and ``has()`` of it to ``in``; a name that does not unescape, or
that unescapes to itself, is left alone::

    self.foo__dash__bar > 0              -> self["foo-bar"] > 0
    has(self.spec.__namespace__)         -> ("namespace" in (self.spec))
    self.?x__dot__y                      -> self._cp_opt_field('x.y')

A message construction, which the interpreter parses but cannot evaluate (a
MutatingAdmissionPolicy's ``JSONPatch{op: "add", path: "/x", value: 1}`` and
``Object{spec: Object.spec{replicas: 1}}``), is rewritten to a map of its fields plus a
``_cp_type`` entry that names the type as written (``api/mutatingpolicy.py`` checks and drops
it)::

    Object{spec: Object.spec{replicas: 1}}
    -> {"_cp_type": "Object", "spec": {"_cp_type": "Object.spec", "replicas": 1}}

Not rewritten: an optional selected on anything but such a chain (``optional.of(m).f``, or
``(self.?a).b``) is not propagated, and optional entries of list and map literals
(``[?x]``, ``{?'k': v}``) stay refused by the parser. Text inside string literals is never
touched. Unlike upstream, the escaped name is unescaped on a map
(``additionalProperties``) too, where upstream looks the key up as written.
"""

from __future__ import annotations

import re
from contextvars import ContextVar

__all__ = ["CHAIN_FIELD", "CHAIN_INDEX", "ENTRIES", "HAS", "MAP_OF", "MERGED", "OPTIONAL_FIELD", "OPTIONAL_INDEX",
           "RESERVED", "STRUCT_TYPE", "TICK", "VARIABLE", "VARIABLE_SET", "escaped_names", "literal_tokens", "metered",
           "rewritten", "selections_called", "unescaped", "variable_reads"]

OPTIONAL_FIELD, OPTIONAL_INDEX = "_cp_opt_field", "_cp_opt_index"
CHAIN_FIELD, CHAIN_INDEX = "_cp_field", "_cp_index"
HAS = "_cp_has"  # ``has(x.f)`` as ``selections_called`` makes it a call: ``_cp_has(x, 'f')``
ENTRIES, MAP_OF, MERGED = "_cp_entries", "_cp_map_of", "_cp_merged"
_ENTRY = "_cp_e"
STRUCT_TYPE = "_cp_type"  # the key a message construction's map names its type under
TICK = "_cp_tick"  # what a metered comprehension calls once per iteration (``metered``)
VARIABLE, VARIABLE_SET = "_cp_variable", "_cp_variable_set"  # a policy variable's read, its has() (``variable_reads``)
_MACROS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter"})
# a name, maybe qualified, then ``{``: a message construction (CEL has no other ``name {``)
_STRUCT = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*\s*\{")
_TWO_VARIABLE = {"all": 3, "exists": 3, "existsOne": 3, "exists_one": 3, "transformList": 4, "transformMap": 4,
                 "transformMapEntry": 4}  # the most arguments each takes
_TWO_VARIABLE_CALL = re.compile(r"\.\s*(?:" + "|".join(_TWO_VARIABLE) + r")\s*\(")
_NAME = re.compile(r"[A-Za-z_]\w*")

# CEL's reserved words (the lexer's): a property so named is selected as __word__
RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                      "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ESCAPE = re.compile(r"__[^_]+__")
_UNESCAPES = {"underscores": "__", "dot": ".", "dash": "-", "slash": "/"}
# a selection (``.name``, ``.?name``) that may hold an escape: the cheap test before the tokens
_UNESCAPING: ContextVar[bool] = ContextVar("controlplane_cel_unescaping", default=False)  # rewritten()'s unescape
_ESCAPED_SELECTION = re.compile(r"\.\s*(?:\?\s*)?\w*__(?:" + "|".join([*_UNESCAPES, *sorted(RESERVED)]) + r")__")

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


def unescaped(name: str) -> str | None:
    """A selected name as upstream's ``cel.Unescape`` reads it (``foo__dash__bar``:
    ``foo-bar``; ``__namespace__``: ``namespace``); None for one with an escape it does not
    know (``__x__``), or a reserved word's inside a longer name (``a__in__``)."""
    if "__" not in name:
        return name
    ok = True

    def one(m: re.Match[str]) -> str:
        nonlocal ok
        word = m.group(0)[2:-2]
        if word in _UNESCAPES:
            return _UNESCAPES[word]
        if word not in RESERVED or len(m.group(0)) != len(name):
            ok = False
        return word

    out = _ESCAPE.sub(one, name)
    return out if ok else None


def _field_name(name: str) -> str | None:
    """The name to look up for a selected escaped ``name``; None to leave it as written."""
    if "__" not in name or not _UNESCAPING.get():
        return None
    field = unescaped(name)
    return field if field is not None and field != name else None


def escaped_names(expression: str) -> dict[str, str]:
    """The escaped names ``rewritten`` unescapes in ``expression``, by their unescaped names
    (``{"foo-bar": "foo__dash__bar"}``): an error naming a key is worded with the name as
    written, as cel-go's ``no such key: foo__dash__bar``."""
    if "__" not in expression or not _ESCAPED_SELECTION.search(expression):
        return {}
    out: dict[str, str] = {}
    for token in _tokens(expression):
        if _NAME.fullmatch(token):
            field = unescaped(token) if "__" in token else None
            if field is not None and field != token:
                out.setdefault(field, token)
    return out


def rewritten(expression: str, unescape: bool = False) -> str:
    """``expression`` with its optional syntax, two-variable comprehensions and (``unescape``)
    escaped property names rewritten as the module says; an expression without them is
    returned as it is."""
    unescape = unescape and "__" in expression and _ESCAPED_SELECTION.search(expression) is not None
    if ".?" not in expression and "[?" not in expression.replace(" ", "") \
            and not _TWO_VARIABLE_CALL.search(expression) and not unescape \
            and ("{" not in expression or not _STRUCT.search(expression)):
        return expression
    tokens = _tokens(expression)
    if not _balanced(tokens):
        return expression  # left to the parser, which says where (a rewrite would close the brackets)
    token = _UNESCAPING.set(unescape)
    try:
        out, _ = _rewrite(tokens, 0, "")
    finally:
        _UNESCAPING.reset(token)
    return "".join(out)


_SCALAR = re.compile(r"(?:true|false|null)\Z")
_NUMBER = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)[uU]?\Z")


def literal_tokens(expression: str) -> list[str] | None:
    """The tokens (no white space) of ``expression`` if it is one literal as a whole: a list
    or map literal whose brackets close at its end, a string, a number, ``true``, ``false`` or
    ``null``; None for anything else (``"a" in x ? [] : []``, ``Object{}``, ``[1] + x``)."""
    if _NUMBER.match(expression.strip()):
        return [expression.strip()]
    tokens = [t for t in _tokens(expression) if not t.isspace()]
    if len(tokens) == 1 and (tokens[0][:1] in "\"'" or tokens[0][:2].lower() in ("r'", 'r"', "b'", 'b"')
                             or _SCALAR.match(tokens[0])):
        return tokens
    if not tokens or tokens[0] not in ("[", "{"):
        return None
    depth = 0
    for i, token in enumerate(tokens):
        if token in _CLOSING:
            depth += 1
        elif token in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return tokens if i == len(tokens) - 1 else None
    return None


def _balanced(tokens: list[str]) -> bool:
    """Whether every bracket among ``tokens`` is closed by its own kind, in order."""
    stack: list[str] = []
    for token in tokens:
        if token in _CLOSING:
            stack.append(_CLOSING[token])
        elif token in (")", "]", "}") and (not stack or stack.pop() != token):
            return False
    return not stack


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
        if _NAME.fullmatch(token) and token not in RESERVED and not _after_dot(out):
            struct = _struct(tokens, at)
            if struct is not None:
                text, at = struct
                out.append(text)
                chained = False
                continue
        if token == "has" and not _after_dot(out):
            test = _has_escaped(tokens, at)
            if test is not None:
                text, at = test
                out.append(text)
                chained = False
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
    call = after < len(tokens) and tokens[after] == "("
    field = None if call else _field_name(name)
    if optional:
        return f".{OPTIONAL_FIELD}('{field or name}')", name_at + 1, True
    if name in _TWO_VARIABLE and after < len(tokens) and tokens[after] == "(":
        comprehension = _two_variable(tokens, name, after)
        if comprehension is not None:
            return comprehension[0], comprehension[1], chained
    if not chained:
        return (f'["{field}"]', name_at + 1, False) if field is not None else None
    if call:  # a method call: kept, the chain goes on
        inner, end = _rewrite(tokens, after + 1, ")")
        return f".{name}({''.join(inner)})", end, True
    return f".{CHAIN_FIELD}('{field or name}')", name_at + 1, True


def _after_dot(out: list[str]) -> bool:
    """Whether what was written so far ends with a ``.`` (the next name is selected)."""
    return next((t for t in reversed(out) if not t.isspace()), "").endswith(".")


def _has_escaped(tokens: list[str], at: int) -> tuple[str, int] | None:
    """``has(x.name)`` of an escaped ``name`` (at ``at``, the ``has``) as ``("field" in (x))``
    and the index past its ``)``; None for any other ``has``, left to the parser's macro."""
    paren = _next(tokens, at + 1)
    if paren >= len(tokens) or tokens[paren] != "(":
        return None
    args, end = _arguments(tokens, paren)
    arg = args[0]
    while arg and arg[-1].isspace():
        arg = arg[:-1]
    if len(args) != 1 or len(arg) < 3 or not _NAME.fullmatch(arg[-1]):
        return None
    dot = len(arg) - 2
    while dot > 0 and arg[dot].isspace():
        dot -= 1
    field = _field_name(arg[-1])
    if arg[dot] != "." or field is None:
        return None
    operand, _ = _rewrite(arg[:dot], 0, "")
    return f'("{field}" in ({"".join(operand).strip()}))', end


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


def _struct(tokens: list[str], at: int) -> tuple[str, int] | None:
    """The message construction whose type name starts at ``at`` (``Object.spec{a: 1}``) as
    a map with its type's name (module docstring), and the index past its ``}``; None when
    the name is not followed by ``{``, or the fields are not ``name: value`` pairs."""
    names = [tokens[at]]
    end = _next(tokens, at + 1)
    while end + 1 < len(tokens) and tokens[end] == "." and _NAME.fullmatch(tokens[_next(tokens, end + 1)]):
        name_at = _next(tokens, end + 1)
        names.append(tokens[name_at])
        end = _next(tokens, name_at + 1)
    if end >= len(tokens) or tokens[end] != "{":
        return None
    fields, after = _arguments(tokens, end)
    entries = [f'"{STRUCT_TYPE}": "{".".join(names)}"']
    for field in fields:
        name_at = _next(field, 0)
        if name_at >= len(field):
            continue  # a trailing comma, or no fields
        colon = _next(field, name_at + 1)
        if not _NAME.fullmatch(field[name_at]) or colon >= len(field) or field[colon] != ":":
            return None
        value, _ = _rewrite(field[colon + 1:], 0, "")
        entries.append(f'"{field[name_at]}": {"".join(value).strip()}')
    return "{" + ", ".join(entries) + "}", after


def metered(expression: str) -> str:
    """``expression`` (as ``rewritten`` leaves it) with each comprehension macro's last argument,
    the one evaluated once per item, made to call ``TICK`` first, ``(_cp_tick() ? (<body>) :
    null)``, so that whoever evaluates it counts the iterations and can stop them (the tick
    raising an error, or false)::

        metered("xs.all(x, x > 0)")   # 'xs.all(x, (_cp_tick() ? (x > 0) : null))'

    A macro on an indexed or literal list (``[e[0]].map(k, ...)``, as ``rewritten`` binds a
    two-variable comprehension's names) is not metered: it counts fewer iterations, never more.
    An expression whose brackets this does not follow is returned as it is."""
    if "(" not in expression:
        return expression
    tokens = _tokens(expression)
    significant = [i for i, t in enumerate(tokens) if not t.isspace()]
    before: dict[int, list[str]] = {}
    for k in range(1, len(significant) - 4):
        dot, name, opening, variable, comma = (tokens[significant[k + n]] for n in range(5))
        if dot != "." or name not in _MACROS or opening != "(" or not _NAME.fullmatch(variable) or comma != "," \
                or tokens[significant[k - 1]] == "]":
            continue
        depth, last, closing = 0, -1, -1
        for m in range(k + 2, len(significant)):
            token = tokens[significant[m]]
            if token in _CLOSING:
                depth += 1
            elif token in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    closing = m
                    break
            elif token == "," and depth == 1:
                last = m
        if closing < 0 or last < 0 or last + 1 >= closing:
            return expression
        before.setdefault(significant[last + 1], []).append(f"({TICK}() ? (")
        before.setdefault(significant[closing], []).append(") : null)")
    if not before:
        return expression
    return "".join("".join(before.get(i, ())) + t for i, t in enumerate(tokens))


def variable_reads(expression: str) -> str:
    """``expression`` with each read of an admission policy's variable (``variables.name``)
    made a call of ``VARIABLE`` (``has(variables.name)`` one of ``VARIABLE_SET``, ``variables.?name``
    its optional), so that
    whoever evaluates it computes a variable only when it is read (``api/policyvariables.py``,
    as upstream's lazily evaluated composited variables)::

        variable_reads("variables.replicas > 3")   # "_cp_variable('replicas') > 3"

    A selection on something else (``object.variables.x``), a text in a string literal, and an
    expression without ``variables`` are left as they are."""
    if "variables" not in expression:
        return expression
    tokens = _tokens(expression)
    significant = [i for i, t in enumerate(tokens) if not t.isspace()]
    replaced: dict[int, tuple[int, str]] = {}  # first token -> (last token, its replacement)
    for k, at in enumerate(significant):
        if tokens[at] != "variables" or k + 2 >= len(significant) or (k and tokens[significant[k - 1]] == "."):
            continue
        dot, name = tokens[significant[k + 1]], tokens[significant[k + 2]]
        optional = name == "?" and k + 3 < len(significant)
        if optional:  # ``variables.?name``: the variable, present
            name = tokens[significant[k + 3]]
        if dot != "." or not _NAME.fullmatch(name) or name in RESERVED:
            continue
        after = k + 4 if optional else k + 3
        if after < len(significant) and tokens[significant[after]] == "(":
            continue  # a call (``variables.f()``): no variable's read
        if optional:
            replaced[at] = (significant[k + 3], f"optional.of({VARIABLE}('{name}'))")
        elif k >= 2 and tokens[significant[k - 2]] == "has" and tokens[significant[k - 1]] == "(" \
                and k + 3 < len(significant) and tokens[significant[k + 3]] == ")" \
                and (k < 3 or tokens[significant[k - 3]] != "."):
            replaced[significant[k - 2]] = (significant[k + 3], f"{VARIABLE_SET}('{name}')")
        else:
            replaced[at] = (significant[k + 2], f"{VARIABLE}('{name}')")
    if not replaced:
        return expression
    out: list[str] = []
    at = 0
    while at < len(tokens):
        if at in replaced:
            last, text = replaced[at]
            out.append(text)
            at = last + 1
        else:
            out.append(tokens[at])
            at += 1
    return "".join(out)


def selections_called(expression: str) -> str:
    """``expression`` (as ``rewritten`` leaves it) with each plain field selection ``x.f`` made
    a call ``x._cp_field('f')`` (``CHAIN_FIELD``), which selects as the interpreter does but
    fails on a value that is no map as cel-go does (``no such key: f``, where the interpreter
    says only "No such overload"), and each ``has(x.f)`` a call ``_cp_has(x, 'f')`` (``HAS``),
    false of a value that is neither a map nor a list as cel-go's presence test (the
    interpreter's ``has()`` of a null fails): ``expressions`` evaluates this form again, on
    that error only, to word it or to get cel-go's value. Left as written: method calls
    (``x.f(...)``), qualified names before a ``{`` (message constructions), numbers, text in
    string literals, and a ``has()`` of anything but a selection::

        selections_called("namespaceObject.metadata.name == has(a.b.c)")
        # "namespaceObject._cp_field('metadata')._cp_field('name') == _cp_has(a._cp_field('b'), 'c')"
    """
    if "." not in expression:
        return expression
    tokens = _tokens(expression)
    out: list[str] = []
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token == "has" and not _after_dot(out):
            paren = _next(tokens, at + 1)
            if paren < len(tokens) and tokens[paren] == "(":
                args, end = _arguments(tokens, paren)
                out.append(_presence_called(args) or "".join(tokens[at:end]))
                at = end
                continue
        if token == "." and out and _ends_operand(out) and not out[-1][-1:].isdigit():
            name_at = _next(tokens, at + 1)
            after = _next(tokens, name_at + 1)
            if name_at < len(tokens) and _NAME.fullmatch(tokens[name_at]) and tokens[name_at] not in RESERVED \
                    and (after >= len(tokens) or tokens[after] not in ("(", "{")):
                out.append(f".{CHAIN_FIELD}('{tokens[name_at]}')")
                at = name_at + 1
                continue
        out.append(token)
        at += 1
    return "".join(out)


def _presence_called(args: list[list[str]]) -> str | None:
    """``has(x.f)``'s arguments as ``_cp_has(x, 'f')``, ``x``'s own selections called; None for
    a ``has`` of anything but one field selection (left to the parser, which says why)."""
    arg = [t for t in args[0] if not t.isspace()] if len(args) == 1 else []
    if len(arg) < 3 or arg[-2] != "." or not _NAME.fullmatch(arg[-1]) or arg[-1] in RESERVED:
        return None
    text = "".join(args[0]).rstrip()
    operand = text[:len(text) - len(arg[-1])].rstrip()[:-1]  # less the name and its dot
    return f"{HAS}({selections_called(operand)}, '{arg[-1]}')"
