"""An admission policy's ``variables``, computed as upstream's composition computes them
(``apiserver/pkg/admission/plugin/cel/composition.go`` over ``apiserver/pkg/cel/lazy``): a
variable is evaluated when an expression first reads it (``variables.name``), at most once
per evaluation, so one whose expression fails fails only the expressions that read it, in
upstream's words::

    expression 'variables.per > 2' resulted in error: composited variable "per" fails to evaluate: division by zero

One evaluation is what upstream gives one activation: a ValidatingAdmissionPolicy's match
conditions, its validations together, its message expressions together, its audit
annotations together; a MutatingAdmissionPolicy's match conditions, then each mutation on
its own, of the object the one before it made. The message expressions' and the audit
annotations' variables are computed without the ``authorizer``, as upstream binds none there
(a variable that asks it fails: ``no such attribute(s): authorizer``).

A variable reads those declared before it (upstream compiles each with only those); any
other name is upstream's ``no such key``. A variable's comprehension iterations count
against the per-call limit on their own (its program's, as upstream's) and against the
budget of the expression that read it: ``take_cost`` after each expression, as upstream's
``GetAndResetCost``.

The expressions are rewritten (``celsyntax.variable_reads``) so that a read is a call the
interpreter makes into ``Variables``::

    variables = Variables(spec.get("variables"), context, meter, library)   # installed in context
    value = evaluate(reads("variables.a + 1"), context, meter=meter)
    meter.spent += variables.take_cost()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry.celsyntax import VARIABLE, VARIABLE_SET, variable_reads
from ..registry.expressions import ExpressionError, Meter, context_of, evaluate

if TYPE_CHECKING:
    from .celauthz import AuthorizerLibrary

__all__ = ["Variables", "reads", "without_authorizer"]

_reads: dict[str, str] = {}  # each expression as evaluated (``celsyntax.variable_reads``), by its text


def reads(expression: str) -> str:
    """``expression`` with its reads of variables made calls into ``Variables``."""
    text = _reads.get(expression)
    if text is None:
        text = variable_reads(expression)
        if len(_reads) < 10_000:
            _reads[expression] = text
    return text


class Variables:
    """One evaluation's variables of a policy (upstream's lazy map of composited variables),
    installed in ``context`` (a ``cel.Context``) as the functions the rewritten reads call.
    ``authorizer``: False where upstream binds none (message expressions, audit annotations)."""

    __slots__ = ("_bare", "_context", "_declared", "_errors", "_library", "_meter", "_reading", "_values", "cost")

    def __init__(self, declared: Any, context: Any, meter: Meter | None, library: AuthorizerLibrary | None,
                 authorizer: bool = True) -> None:
        self._declared: dict[str, tuple[int, str]] = {}  # name -> (its index, its expression); the last of a name
        for index, variable in enumerate(declared or ()):
            if isinstance(variable, dict):
                self._declared[str(variable.get("name"))] = (index, str(variable.get("expression", "")))
        self._context = context
        self._meter = meter
        self._library = library if authorizer else None
        self._bare: Any = None if authorizer or library is None else False  # False: to build when needed
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._reading: list[int] = []  # the indexes of the variables being computed, innermost last
        self.cost = 0  # the comprehension iterations of the variables computed since ``take_cost``
        self.install(context)

    def install(self, context: Any) -> None:
        context.add_function(VARIABLE, self._read)
        context.add_function(VARIABLE_SET, self._set)

    def take_cost(self) -> int:
        cost, self.cost = self.cost, 0
        return cost

    def _read(self, name: Any) -> Any:
        name = str(name)
        if name in self._values:
            return self._values[name]
        error = self._errors.get(name)
        if error is None:
            declared = self._declared.get(name)
            if declared is None or (self._reading and declared[0] >= self._reading[-1]):
                raise ValueError(f"no such key: {name}")
            value, error = self._compute(name, *declared)
            if error is None:
                return value
        raise ValueError(error)

    def _set(self, name: Any) -> bool:
        """``has(variables.name)``: upstream's lazy map computes the variable (its error is
        the answer's) and says whether it is declared."""
        if str(name) not in self._declared:
            return False
        self._read(name)
        return True

    def _compute(self, name: str, index: int, expression: str) -> tuple[Any, str | None]:
        meter = self._meter
        calls, exceeded, spent = (meter.calls, meter.exceeded, meter.spent) if meter is not None else (0, False, 0)
        self._reading.append(index)
        value: Any = None
        error: str | None = None
        try:
            value = self._evaluate(reads(expression))
        except ExpressionError as e:
            told = str(e)
            error = f'composited variable "{name}" fails to ' + (
                f"compile: {told}" if told.startswith("compilation failed") else f"evaluate: {told}")
        finally:
            self._reading.pop()
            cost = 0
            if meter is not None:  # its own per-call count; its iterations the reader's, once it is kept
                cost = meter.spent - spent
                meter.calls, meter.exceeded, meter.spent = calls, exceeded, spent
        if self._library is not None and self._library.waiting():
            return value, error  # computed with provisional denials: the reader runs again with the answers
        self.cost += cost
        if error is None:
            self._values[name] = value
        else:
            self._errors[name] = error
        return value, error

    def _evaluate(self, text: str) -> Any:
        if self._bare is None or "authorizer" not in text:
            return evaluate(text, self._context, meter=self._meter)
        if self._bare is False:
            self._bare = _unbound(self._context, self._meter, self)
        return _without(text, self._bare, self._meter)


def without_authorizer(expression: str, context: Any, meter: Meter, library: AuthorizerLibrary | None,
                       variables: Variables) -> Any:
    """``expression``'s value where upstream declares the ``authorizer`` but binds none (an
    audit annotation): naming it fails as cel-go fails an unbound variable."""
    text = reads(expression)
    if library is None or "authorizer" not in text:
        return evaluate(text, context, meter=meter)
    return _without(text, _unbound(context, meter, variables), meter)


def _unbound(context: Any, meter: Meter | None, variables: Variables) -> Any:
    """A ``cel.Context`` of ``context``'s variables but the ``authorizer``, with ``variables``."""
    bare = context_of({k: v for k, v in context.variables.items() if k != "authorizer"})
    if meter is not None:
        meter.install(bare)
    variables.install(bare)
    return bare


def _without(text: str, bare: Any, meter: Meter | None) -> Any:
    try:
        return evaluate(text, bare, meter=meter)
    except ExpressionError as e:
        if "'authorizer'" in str(e):
            raise ExpressionError("no such attribute(s): authorizer") from None
        raise
