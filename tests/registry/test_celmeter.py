"""The bound on an expression's work (``celsyntax.metered``, ``expressions.Meter``): each
comprehension iteration counts 1, an expression past the per-call limit stops with cel-go's
error, and the count is the same value's as the expression unmetered."""

from __future__ import annotations

import pytest

from controlplane.registry import expressions
from controlplane.registry.celsyntax import metered, rewritten
from controlplane.registry.expressions import COST_LIMIT_EXCEEDED, ExpressionError, Meter, context_of, evaluate


def test_each_macros_last_argument_ticks_first() -> None:
    assert metered("xs.all(x, x > 0)") == "xs.all(x, (_cp_tick() ? (x > 0) : null))"
    assert metered("xs.map(x, x > 1, x * 2)") == "xs.map(x, x > 1, (_cp_tick() ? (x * 2) : null))"
    assert metered("xs.exists(a, ys.filter(b, a == b).size() > 0)") == (
        "xs.exists(a, (_cp_tick() ? (ys.filter(b, (_cp_tick() ? (a == b) : null)).size() > 0) : null))")
    # in strings, on literal or indexed lists (the two-variable macros' bindings), unbalanced: left alone
    assert metered("'xs.all(x, y)' + s") == "'xs.all(x, y)' + s"
    assert metered("[1, 2].map(x, x)") == "[1, 2].map(x, x)"
    assert metered("xs.all(x, ") == "xs.all(x, "
    two = metered(rewritten("m.all(k, v, v > 0)"))
    assert two.count("_cp_tick()") == 1


@pytest.mark.parametrize("expression", [
    "xs.all(a, xs.exists(b, a == b))", "xs.map(x, x * 2).filter(y, y > 4)", "xs.exists_one(x, x == 3)",
    "m.all(k, v, v > 0)", "xs.transformList(i, v, v + i)"])
def test_a_metered_expression_has_the_same_value(expression: str) -> None:
    variables = {"xs": [1, 2, 3], "m": {"a": 1, "b": 2}}
    meter = Meter()
    context = context_of(variables)
    meter.install(context)
    assert evaluate(expression, context, meter=meter) == evaluate(expression, variables)
    assert meter.spent > 0


def test_past_the_per_call_limit_it_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """10 outer and 100 inner iterations past a limit of 50: stopped at 50, cel-go's error even
    where ``||`` would absorb an error (upstream cancels the whole evaluation)."""
    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 50)
    meter = Meter()
    context = context_of({"xs": list(range(10))})
    meter.install(context)
    for expression in ("xs.all(a, xs.all(b, b < 10))", "xs.all(a, xs.all(b, b < 10)) || true"):
        meter.spent = 0
        with pytest.raises(ExpressionError, match=f"^{COST_LIMIT_EXCEEDED}$"):
            evaluate(expression, context, meter=meter)
        assert meter.spent == 50
    meter.spent = 0
    assert evaluate("xs.all(a, a < 10) && xs.exists(b, b == 9)", context, meter=meter) is True
    assert meter.spent == 20 and not meter.over_budget()  # each expression its own limit, the sum spent
