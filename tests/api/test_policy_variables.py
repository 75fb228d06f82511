"""A policy's variables computed when read (``api/policyvariables.py``), without a server: the
reads rewritten outside string literals, each variable computed once per evaluation, only
those declared before one readable from it, ``has()`` and ``.?`` of one."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api.policyvariables import Variables, reads
from controlplane.registry.expressions import ExpressionError, Meter, context_of, evaluate


def evaluation(declared: list[tuple[str, str]], **values: Any) -> tuple[Any, Variables, Meter]:
    context = context_of(values)
    meter = Meter()
    meter.install(context)
    variables = Variables([{"name": n, "expression": e} for n, e in declared], context, meter, None)
    return context, variables, meter


def test_reads_are_rewritten_outside_string_literals_only() -> None:
    assert reads("variables.a + 'variables.b'") == "_cp_variable('a') + 'variables.b'"
    assert reads("object.variables.a") == "object.variables.a"
    assert reads("has(variables.a) && variables.?b.orValue(1) > 0") == \
        "_cp_variable_set('a') && optional.of(_cp_variable('b')).orValue(1) > 0"


def test_a_variable_is_computed_once_and_only_when_read() -> None:
    calls: list[int] = []
    context, _, _ = evaluation([("counted", "count() + 1"), ("broken", "object.missing")], object={})
    def count() -> int:
        calls.append(1)
        return len(calls)

    context.add_function("count", count)
    assert evaluate(reads("variables.counted == variables.counted"), context) is True
    assert evaluate(reads("variables.counted"), context) == 2 and calls == [1]
    assert evaluate(reads("false && variables.broken"), context) is False
    for expression in ("variables.broken == 1", "has(variables.broken)"):  # has() computes it
        with pytest.raises(ExpressionError) as e:
            evaluate(reads(expression), context)
        assert str(e.value) == 'composited variable "broken" fails to evaluate: no such key: missing'
    assert evaluate(reads("has(variables.nosuch)"), context) is False


def test_a_variable_reads_only_those_declared_before_it() -> None:
    context, _, _ = evaluation([("a", "1"), ("b", "variables.a + 1"), ("c", "variables.d"), ("d", "3")])
    assert evaluate(reads("variables.b"), context) == 2
    with pytest.raises(ExpressionError) as e:
        evaluate(reads("variables.c"), context)
    assert str(e.value) == 'composited variable "c" fails to evaluate: no such key: d'
    assert evaluate(reads("variables.d + variables.?a.orValue(0)"), context) == 4


def test_a_variables_iterations_are_its_own_then_its_readers_once() -> None:
    context, variables, meter = evaluation([("n", "xs.filter(x, x > 0).size()")], xs=[1, 2, 3])
    assert evaluate(reads("variables.n + variables.n + xs.map(x, x).size()"), context, meter=meter) == 9
    assert meter.spent == 3 and variables.take_cost() == 3 and variables.take_cost() == 0
