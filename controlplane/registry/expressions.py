"""CEL expressions as the API server evaluates them: compiled once per text, errors as one
exception, with the Kubernetes libraries (``registry/cellibs.py``: ``split``, ``lowerAscii``,
``isIP``, ``url``, ``quantity``, ...). Used by ValidatingAdmissionPolicies (``api/admissionpolicy.py``) and by CRDs'
``x-kubernetes-validations`` (``registry/structural.py``)::

    evaluate("self.replicas <= 10", {"self": {"replicas": 3}})   # True
"""

from __future__ import annotations

from typing import Any

__all__ = ["ExpressionError", "context_of", "evaluate"]

_compiled: dict[str, Any] = {}


class ExpressionError(Exception):
    """An expression that does not compile, or fails as it runs (no such key, a type mismatch)."""


def _program(expression: str) -> Any:
    program = _compiled.get(expression)
    if program is None:
        import cel  # on first use: the package imports its command line (prompt_toolkit) too, 0.1 s of every start

        from .cellibs import with_global_matches

        try:
            program = cel.compile(with_global_matches(expression))
        except Exception as e:  # the interpreter's parse errors
            raise ExpressionError(f"compilation failed: {e}") from e
        if len(_compiled) < 10_000:
            _compiled[expression] = program
    return program


def context_of(variables: dict[str, Any]) -> Any:
    """A ``cel.Context`` holding ``variables`` and the Kubernetes CEL libraries (``cellibs``)."""
    import cel

    from .cellibs import FUNCTIONS

    context = cel.Context(functions=FUNCTIONS)
    for name, value in variables.items():
        context.add_variable(name, value)
    return context


def evaluate(expression: str, context: Any) -> Any:
    """The value of ``expression`` in ``context`` (a ``cel.Context``, or a dict of variables)."""
    if isinstance(context, dict):
        context = context_of(context)
    try:
        return _program(expression).execute(context)
    except ExpressionError:
        raise
    except KeyError as e:  # a field the object does not have, as cel-go words it
        raise ExpressionError(f"no such key: {e.args[0] if e.args else e}") from e
    except Exception as e:  # the interpreter's other run-time errors (a type mismatch, ...)
        raise ExpressionError(str(e)) from e
