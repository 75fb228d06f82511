"""CEL expressions as the API server evaluates them: compiled once per text, errors as one
exception, with the Kubernetes libraries (``registry/cellibs.py``: ``split``, ``lowerAscii``,
``isIP``, ``url``, ``quantity``, ...). Used by ValidatingAdmissionPolicies (``api/admissionpolicy.py``) and by CRDs'
``x-kubernetes-validations`` (``registry/structural.py``)::

    evaluate("self.replicas <= 10", {"self": {"replicas": 3}})   # True
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ExpressionError", "compile_error", "context_of", "evaluate", "variables_of"]

# by the expression; a CRD rule's with escaped names (``celsyntax``) by (expression, True)
_compiled: dict[str | tuple[str, bool], Any] = {}
# of those, the names as written by the names they were rewritten to
_escaped: dict[str, dict[str, str]] = {}
_UNSUPPORTED = re.compile(r"ERROR: <input>:\d+:\d+: unsupported syntax ")
# how the interpreter wraps the exception of a library function (``cellibs``)
_LIBRARY_ERROR = re.compile(r"Function '[^']*' error: Python function call failed: (\w+): (.*)\. "
                            r"Check function arguments and their types\.", re.DOTALL)


class ExpressionError(Exception):
    """An expression that does not compile, or fails as it runs (no such key, a type mismatch)."""


def _program(expression: str, unescape: bool = False) -> Any:
    """The compiled ``expression``; ``unescape`` for a CRD's rule, which selects properties by
    their escaped names (``celsyntax``): only an expression with ``__`` is compiled apart."""
    key: str | tuple[str, bool] = (expression, True) if unescape and "__" in expression else expression
    program = _compiled.get(key)
    if program is None:
        import cel  # on first use: the package imports its command line (prompt_toolkit) too, 0.1 s of every start

        from .cellibs import with_global_matches
        from .celsyntax import escaped_names
        from .celsyntax import rewritten as rewrite

        rewritten = rewrite(expression, unescape=key is not expression)
        try:
            program = cel.compile(with_global_matches(rewritten))
        except Exception as e:  # the interpreter's parse errors
            raise ExpressionError(f"compilation failed: {_parse_errors(expression, rewritten, e)}") from e
        if len(_compiled) < 10_000:
            _compiled[key] = program
            names = escaped_names(expression) if key is not expression else {}
            if names:
                _escaped[expression] = names
    return program


def _parse_errors(expression: str, rewritten: str, error: Exception) -> str:
    """The parse errors of ``expression``, at its own lines and columns: those of the text as
    written when it was rewritten (``celsyntax``), less its complaints of the optional
    syntax the rewrite took care of."""
    if rewritten == expression:  # (also one left unrewritten for its unbalanced brackets)
        issues = re.split(r"\n(?=ERROR: )", _as_cel_go(str(error)))
        kept = [i for i in issues if not re.search(r"unsupported syntax '(\.\?|\[\?)'", i)]
        return "\n".join(kept) if kept else _as_cel_go(str(error))
    import cel

    try:
        cel.compile(expression)
    except Exception as e:
        issues = re.split(r"\n(?=ERROR: )", _as_cel_go(str(e)))
        kept = [i for i in issues if not re.search(r"unsupported syntax '(\.\?|\[\?)'", i)]
        return "\n".join(kept) if kept else _as_cel_go(str(error))
    return _as_cel_go(str(error))


def _as_cel_go(parse_error: str) -> str:
    """The interpreter's parse error as cel-go's ``Issues.Err()`` lays it out: its
    ``ERROR: <input>:line:col: ...`` lines, each followed by the source line and a caret
    line indented by one space (``\n | 1 +\n | ...^``); the interpreter's own prefix
    (``Failed to parse expression '...': ``) dropped."""
    at = parse_error.find("ERROR: <input>:")
    text = parse_error[at:] if at >= 0 else parse_error
    return text.replace("\n| ", "\n | ").replace("\n|\n", "\n |\n")


def compile_error(expression: str) -> str | None:
    """Why ``expression`` does not compile, as upstream's CEL compiler words it
    (``compilation failed: ERROR: <input>:1:4: Syntax error: ...``), or None when it does::

        compile_error("self.replicas >")   # 'compilation failed: ERROR: <input>:1:16: Syntax error: ...'

    Only syntax is checked: the interpreter has no type checker; its callers that know the
    variables' types run ``registry/celcheck.py`` after this (a CRD's rules, DRA selectors),
    so that a rule naming a field its schema lacks is refused as cel-go refuses it. Nor is valid
    CEL the interpreter's parser lacks (``unsupported syntax '?'``: optional entries of
    literals, ``[?x]``) held against the expression here, as cel-go would not: it fails as it
    runs."""
    try:
        _program(expression)
    except ExpressionError as e:
        issues = re.split(r"\n(?=ERROR: )", str(e).removeprefix("compilation failed: "))
        if all(_UNSUPPORTED.match(issue) for issue in issues):
            return None
        return str(e)
    return None


def variables_of(expression: str) -> frozenset[str]:
    """The names ``expression`` reads (``self``, ``oldSelf``, ...; a macro's own variable too);
    raises ``ExpressionError`` when it does not compile."""
    return frozenset(_program(expression).variables())


def context_of(variables: dict[str, Any]) -> Any:
    """A ``cel.Context`` holding ``variables`` and the Kubernetes CEL libraries (``cellibs``)."""
    import cel

    from .cellibs import FUNCTIONS

    context = cel.Context(functions=FUNCTIONS)
    for name, value in variables.items():
        context.add_variable(name, value)
    return context


def evaluate(expression: str, context: Any, unescape: bool = False) -> Any:
    """The value of ``expression`` in ``context`` (a ``cel.Context``, or a dict of variables);
    ``unescape`` for a CRD's rule (and message expression), whose escaped names
    (``self.foo__dash__bar``) select the properties they escape (``foo-bar``), as upstream's."""
    if isinstance(context, dict):
        context = context_of(context)
    try:
        return _program(expression, unescape).execute(context)
    except ExpressionError:
        raise
    except KeyError as e:  # a field the object does not have, as cel-go words it
        message = f"no such key: {e.args[0] if e.args else e}"
        raise ExpressionError(_as_written(expression, message) if unescape else message) from e
    except Exception as e:  # the interpreter's other run-time errors (a type mismatch, ...)
        message = _run_time_error(str(e))
        raise ExpressionError(_as_written(expression, message) if unescape else message) from e


def _as_written(expression: str, message: str) -> str:
    """``no such key: foo-bar`` of a property the expression selects by its escaped name as
    cel-go words it: ``no such key: foo__dash__bar``, the name as written."""
    names = _escaped.get(expression)
    if names is None or not message.startswith("no such key: "):
        return message
    key = message.removeprefix("no such key: ")
    return f"no such key: {names[key]}" if key in names else message


def _run_time_error(text: str) -> str:
    """A run-time error as cel-go words it: a library function's own message (``index out of
    range: 4``; a missing key, of an optional chain's ``.f``, ``no such key: f``), not the
    interpreter's wrapping of its Python exception."""
    wrapped = _LIBRARY_ERROR.fullmatch(text)
    if wrapped is None:
        return text
    kind, message = wrapped.groups()
    if kind == "KeyError":
        return f"no such key: {message.strip(chr(39))}"
    return message
