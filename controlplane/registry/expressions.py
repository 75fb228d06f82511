"""CEL expressions as the API server evaluates them: compiled once per text, errors as one
exception, with the Kubernetes libraries (``registry/cellibs.py``: ``split``, ``lowerAscii``,
``isIP``, ``url``, ``quantity``, ...). Used by ValidatingAdmissionPolicies (``api/admissionpolicy.py``) and by CRDs'
``x-kubernetes-validations`` (``registry/structural.py``)::

    evaluate("self.replicas <= 10", {"self": {"replicas": 3}})   # True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["COST_LIMIT_EXCEEDED", "ExpressionError", "Meter", "compile_error", "context_of", "evaluate",
           "variables_of"]

# by the expression; a CRD rule's with escaped names (``celsyntax``) by (expression, True), a
# metered one (``Meter``) by (expression, "metered")
_compiled: dict[str | tuple[str, bool | str], Any] = {}
# of those, the names as written by the names they were rewritten to
_escaped: dict[str, dict[str, str]] = {}
_UNSUPPORTED = re.compile(r"ERROR: <input>:\d+:\d+: unsupported syntax ")
# how the interpreter wraps the exception of a library function (``cellibs``)
_LIBRARY_ERROR = re.compile(r"Function '[^']*' error: Python function call failed: (\w+): (.*)\. "
                            r"Check function arguments and their types\.", re.DOTALL)

# the interpreter's own run-time errors that cel-go words otherwise (``common/types/err.go``)
_NO_SUCH_OVERLOAD = "No such overload: "  # how the interpreter words an operation on the wrong types
_CEL_GO_WORDS = {"division by zero in CEL expression": "division by zero",
                 "modulo by zero in CEL expression": "modulus by zero"}
# the interpreter's failed conversions and overflows, as cel-go words them: a string that does
# not parse is String.ConvertToType's "type conversion error", an int out of range its
# overflow error (``errIntOverflow``, ``errUintOverflow``)
_CONVERTED_TO = {"int": "int", "uint": "uint", "double": "double", "duration": "google.protobuf.Duration",
                 "timestamp": "google.protobuf.Timestamp"}
_CONVERSION_ERROR = re.compile(r"Function '(int|uint|double)' error: string parse error: .*|"
                               r"Function '(duration)' error: Parsing Error: .*|"
                               r"Function '(timestamp)' error: (?:premature end of input|input contains invalid "
                               r"characters|input is out of range|trailing input|input is not enough for unique "
                               r"date and time|no possible date and time matching input)\. Check function "
                               r"arguments and their types\.", re.DOTALL)
# the interpreter's index of a list by a value of another type than int (``l["a"]``, and
# ``l.name``, a field selected of a list), as cel-go's ``IndexOrError`` words it
_LIST_INDEX = re.compile(r"Unexpected type: got '(\w+)', want 'int\|uint'\.")
# the interpreter's refusal of a pattern given to ``matches`` at run time (the rule's value, not a
# literal): cel-go answers Go's regexp.Compile error, ``error parsing regexp: missing closing ]: `[```
_BAD_PATTERN = re.compile(r"Function 'matches' error: '(.*)' not a valid regex:.*", re.DOTALL)
_OVERFLOW = re.compile(r"Function '(?:int|double)' error: (unsigned )?integer overflow\. The value is outside the "
                       r"range of the target type\.|Function 'uint' error: (unsigned) integer overflow\..*|"
                       r"Arithmetic overflow in '\w+' on .*", re.DOTALL)


class ExpressionError(Exception):
    """An expression that does not compile, or fails as it runs (no such key, a type mismatch)."""


PER_CALL_LIMIT = 1_000_000  # upstream's celconfig.PerCallLimit, of one expression's evaluation
RUNTIME_BUDGET = 10_000_000  # upstream's celconfig.RuntimeCELCostBudget, of one policy's validations
MATCH_CONDITIONS_BUDGET = 2_500_000  # upstream's RuntimeCELCostBudgetMatchConditions, of one matcher's conditions
COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"  # cel-go's, past its cost limit
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


class Meter:
    """A bound on the work of the expressions evaluated with it (``evaluate(..., meter=)``),
    for upstream's runtime cost limits, which the interpreter does not track: each
    comprehension's iteration counts 1 (``celsyntax.metered``), and an expression whose
    iterations pass ``PER_CALL_LIMIT`` is stopped with cel-go's ``COST_LIMIT_EXCEEDED``. An
    iteration costs cel-go at least 1 (its loop step reads the accumulator), so what is
    stopped here upstream would have stopped too, later or not at all here what upstream
    stops sooner (the other operations' costs are not counted). ``spent`` sums the counts
    of the expressions evaluated since ``spend(0)``, for a policy's ``RUNTIME_BUDGET``."""

    __slots__ = ("calls", "exceeded", "spent")

    def __init__(self) -> None:
        self.calls = 0
        self.exceeded = False
        self.spent = 0

    def install(self, context: Any) -> None:
        """Give ``context`` (a ``cel.Context``) the metered expressions' tick."""
        from .celsyntax import TICK

        context.add_function(TICK, self._tick)

    def _tick(self) -> bool:
        if self.calls >= PER_CALL_LIMIT:
            if not self.exceeded:  # stops the evaluation (once: then the ticks make each body null, cheaply)
                self.exceeded = True
                raise ValueError(COST_LIMIT_EXCEEDED)
            return False
        self.calls += 1
        return True

    def over_budget(self, matching: bool = False) -> bool:
        """Whether the expressions evaluated since the budget was reset (``spent = 0``) have
        counted more than ``RUNTIME_BUDGET`` (``matching``: match conditions', ``MATCH_CONDITIONS_BUDGET``)."""
        return self.spent > (MATCH_CONDITIONS_BUDGET if matching else RUNTIME_BUDGET)


def _program(expression: str, unescape: bool = False, metered: bool = False) -> Any:
    """The compiled ``expression``; ``unescape`` for a CRD's rule, which selects properties by
    their escaped names (``celsyntax``): only an expression with ``__`` is compiled apart;
    ``metered`` with its comprehensions counting their iterations (``Meter``)."""
    key: str | tuple[str, bool | str] = (expression, True) if unescape and "__" in expression else expression
    if metered and "(" in expression:
        key = (expression, "metered")
    program = _compiled.get(key)
    if program is None:
        import cel  # on first use: the package imports its command line (prompt_toolkit) too, 0.1 s of every start

        from .cellibs import with_global_matches
        from .celsyntax import escaped_names
        from .celsyntax import metered as meter
        from .celsyntax import rewritten as rewrite

        rewritten = rewrite(expression, unescape=isinstance(key, tuple) and key[1] is True)
        if isinstance(key, tuple) and key[1] == "metered":
            rewritten = meter(rewritten)
        try:
            program = cel.compile(with_global_matches(rewritten))
        except Exception as e:  # the interpreter's parse errors
            raise ExpressionError(f"compilation failed: {_parse_errors(expression, rewritten, e)}") from e
        if len(_compiled) < 10_000:
            _compiled[key] = program
            names = escaped_names(expression) if isinstance(key, tuple) and key[1] is True else {}
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


def evaluate(expression: str, context: Any, unescape: bool = False, meter: Meter | None = None) -> Any:
    """The value of ``expression`` in ``context`` (a ``cel.Context``, or a dict of variables);
    ``unescape`` for a CRD's rule (and message expression), whose escaped names
    (``self.foo__dash__bar``) select the properties they escape (``foo-bar``), as upstream's;
    ``meter`` (installed in ``context``) bounds its work, its count added to ``meter.spent``."""
    if isinstance(context, dict):
        context = context_of(context)
    if meter is not None:
        meter.calls, meter.exceeded = 0, False
    try:
        value = _program(expression, unescape, meter is not None).execute(context)
    except ExpressionError:
        raise
    except Exception as e:
        if meter is not None and meter.exceeded:
            raise ExpressionError(COST_LIMIT_EXCEEDED) from e
        error = _run_time(expression, e, unescape)
        if not str(error).startswith(_NO_SUCH_OVERLOAD):
            raise error from e
        again = _as_cel_go_selects(expression, context, unescape, meter)
        if isinstance(again, _Failed):
            raise (again.error or error) from e
        value = again.value
    finally:
        if meter is not None:
            meter.spent += meter.calls
    if meter is not None and meter.exceeded:  # (an error a comprehension's && or || absorbed)
        raise ExpressionError(COST_LIMIT_EXCEEDED)
    return value


def _run_time(expression: str, error: Exception, unescape: bool) -> ExpressionError:
    """The interpreter's run-time ``error`` of ``expression`` as one ``ExpressionError``."""
    if isinstance(error, KeyError):  # a field the object does not have, as cel-go words it
        message = f"no such key: {error.args[0] if error.args else error}"
    else:  # the interpreter's other run-time errors (a type mismatch, ...)
        message = _run_time_error(str(error))
    return ExpressionError(_as_written(expression, message) if unescape else message)


@dataclass(frozen=True, slots=True)
class _Value:
    value: Any


@dataclass(frozen=True, slots=True)
class _Failed:
    error: ExpressionError | None  # None: not an error of selection


def _as_cel_go_selects(expression: str, context: Any, unescape: bool, meter: Meter | None) -> _Value | _Failed:
    """``expression`` evaluated again, after the interpreter's "No such overload", with each
    selection and ``has()`` a call that acts as cel-go's (``celsyntax.selections_called``):
    that error does not say what failed (``namespaceObject.metadata`` of a null
    ``namespaceObject``, as a policy's match conditions have it, is cel-go's ``no such key:
    metadata``), and where it came of the interpreter's ``has()`` of a null or a scalar
    (``has(object.spec.x.f)`` where ``x`` is null) cel-go has a value: false. Only then, on
    this error path, at the cost of a second evaluation (the expression has no side
    effects); metered as the first (``meter``). An error that is not of a selection is
    ``_Failed(None)``: the first error stands."""
    variant = ("selections" if not unescape else "selections-unescaped") + ("-metered" if meter else "")
    key = (expression, variant)
    program = _compiled.get(key)
    if program is None:
        import cel

        from .cellibs import with_global_matches
        from .celsyntax import metered, rewritten, selections_called

        text = selections_called(rewritten(expression, unescape=unescape))
        try:
            program = cel.compile(with_global_matches(metered(text) if meter else text))
        except Exception:
            return _Failed(None)
        if len(_compiled) < 10_000:
            _compiled[key] = program
    try:
        return _Value(program.execute(context))
    except Exception as e:
        if meter is not None and meter.exceeded:
            return _Failed(ExpressionError(COST_LIMIT_EXCEEDED))
        error = _run_time(expression, e, unescape)
        return _Failed(error if str(error).startswith(("no such key: ", "unsupported index ")) else None)


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
    converted = _CONVERSION_ERROR.fullmatch(text)
    if converted is not None:
        function = next(g for g in converted.groups() if g)
        return f"type conversion error from 'string' to '{_CONVERTED_TO[function]}'"
    index = _LIST_INDEX.fullmatch(text)
    if index is not None:
        return f"unsupported index type '{index.group(1)}' in list"
    pattern = _BAD_PATTERN.fullmatch(text)
    if pattern is not None:
        from .goregexp import syntax_error

        return syntax_error(pattern.group(1)) or f"error parsing regexp: invalid pattern: `{pattern.group(1)}`"
    overflow = _OVERFLOW.fullmatch(text)
    if overflow is not None:
        return "unsigned integer overflow" if any(overflow.groups()) else "integer overflow"
    wrapped = _LIBRARY_ERROR.fullmatch(text)
    if wrapped is None:
        return _CEL_GO_WORDS.get(text, text)
    kind, message = wrapped.groups()
    if kind == "KeyError":
        return f"no such key: {message.strip(chr(39))}"
    return message
