"""The CEL selectors of resource.k8s.io/v1 (a DeviceClass's, a request's), checked at their
write as upstream's ``validateCELExpression``: at most 10 KiB, and compiling, refused in
cel-go's words: a syntax error as the interpreter's parser finds it
(``registry/expressions.py``), a name other than ``device`` (and the variables macros and
``cel.bind`` declare), or a function of no Kubernetes CEL library, as cel-go's checker
reports it::

    compilation failed: ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')
     | gpu.model == "x"
     | ^

And type errors as cel-go's checker reports them against upstream's ``kubernetes.DRADevice``
(``registry/celcheck.py``): ``device.drivr`` is an ``undefined field 'drivr'``,
``device.driver > 1`` has ``no matching overload``; an attribute's value is dyn. Over
upstream's cost limit (1,000,000; ``registry/celcost.py``'s estimate with the device's own
values unsized, a lower bound of upstream's): ``Forbidden: too complex, exceeds cost
limit``. Not done: a result that is not a bool; such an expression fails when the scheduler
runs it. An expression stored as it is (an update that leaves it) is not compiled again, as
upstream; one that compiled is remembered.
"""

from __future__ import annotations

import re
from typing import Any

from ..gostrings import quote
from .causes import Causes, cause, required
from .drafields import CEL_MAX_LENGTH, SELECTORS_MAX, _remember, items, mapping, text, too_long, too_many

_MACRO_VARIABLE = re.compile(r"\.\s*(?:all|exists|exists_one|existsOne|map|filter|transformList|transformMap|"
                             r"transformMapEntry)\s*\(\s*([A-Za-z_]\w*)\s*,(?:\s*([A-Za-z_]\w*)\s*,)?")
_BIND = re.compile(r"\bcel\s*\.\s*bind\s*\(\s*([A-Za-z_]\w*)\s*,")
_TOKENS = re.compile(r"""[rRbB]?(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')"""
                     r"|(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)[uU]?|(\.\s*)?([A-Za-z_]\w*)|.", re.DOTALL)
# names cel-go declares besides the variable: keywords and the types' own names
_DECLARED = frozenset({"device", "true", "false", "null", "in", "int", "uint", "double", "bool", "string", "bytes",
                       "list", "map", "null_type", "type", "dyn"})
_COMPILED_OK: set[str] = set()  # expressions that compiled: a class's selectors are written again and again


def cel_causes(expression: Any, field: str, stored: bool = False) -> Causes:
    """``validateCELExpression``: at most 10 KiB and compiling in cel-go's words (syntax,
    undeclared references); an expression stored as it is was valid and is not compiled again."""
    if stored:
        return []
    expression = text(expression)
    if len(expression) > CEL_MAX_LENGTH:
        return [too_long(field, CEL_MAX_LENGTH)]
    if expression in _COMPILED_OK:
        return []
    why = _compile_error(expression)
    if why is None:
        if _too_complex(expression):
            return [cause("FieldValueForbidden", field, "Forbidden: too complex, exceeds cost limit")]
        _remember(_COMPILED_OK, expression)
        return []
    # the expression as Go's %q prints it: a multi-line one with its newlines escaped
    return [cause("FieldValueInvalid", field, f"Invalid value: {quote(expression)}: {why}")]


def _compile_error(expression: str) -> str | None:
    from .expressions import compile_error

    why = compile_error(expression)
    if why is not None:
        return why
    from .celcheck import type_errors

    # the checker's undeclared names and functions; the names also by tokens, for what it does not parse
    found = _undeclared(expression) + type_errors(expression, {"device": _device_type()}, strict=True)
    issues = sorted(dict.fromkeys(found), key=_position)
    return "compilation failed: " + "\n".join(issues) if issues else None


_MAX_COST = 1_000_000  # CELSelectorExpressionMaxCost


def _too_complex(expression: str) -> bool:
    """Whether the expression's estimated cost (``registry/celcost.py``) is over upstream's
    limit for a selector; the device's own values sized 0 here (upstream sizes its strings by
    DRA's limits), so only what the expression itself makes dear is counted: loops over
    literal lists, regular expressions over literal strings."""
    from .celcost import expression_cost

    found = expression_cost(expression, {"device": _device_type()}, None, False, names=("device",))
    return found is not None and found > _MAX_COST


def _position(issue: str) -> tuple[int, int]:
    line, column = _ISSUE_AT.match(issue).groups()  # type: ignore[union-attr]
    return int(line), int(column)


_ISSUE_AT = re.compile(r"ERROR: <input>:(\d+):(\d+):")
_ANY_BY_NAME = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}  # values dyn
# upstream's kubernetes.DRADevice (dynamic-resource-allocation/cel/compile.go): the driver, the
# attributes and capacities by domain and name, whether it allows several allocations
_DEVICE_SCHEMA = {"type": "object", "properties": {
    "driver": {"type": "string"}, "allowMultipleAllocations": {"type": "boolean"},
    "attributes": {"type": "object", "additionalProperties": _ANY_BY_NAME},
    "capacity": {"type": "object", "additionalProperties": _ANY_BY_NAME}}}


def _device_type() -> Any:
    from .celcheck import schema_type

    return schema_type(_DEVICE_SCHEMA, name="kubernetes.DRADevice")


def _undeclared(expression: str) -> list[str]:
    """cel-go's checker errors for names other than ``device`` (and the variables macros and
    ``cel.bind`` declare), each at its line and column with the source line and a caret."""
    bound = set(_DECLARED)
    for m in _MACRO_VARIABLE.finditer(expression):
        bound.update(v for v in m.groups() if v)
    bound.update(_BIND.findall(expression))
    issues = []
    lines = expression.split("\n")
    for m in _TOKENS.finditer(expression):
        name = m.group(2)
        if not name or m.group(1) or name in bound or _is_call(expression, m.end()) \
                or (name == "cel" and _BIND.match(expression, m.start())):
            continue
        line = expression.count("\n", 0, m.start(2))
        column = m.start(2) - (expression.rfind("\n", 0, m.start(2)) + 1)
        issues.append(f"ERROR: <input>:{line + 1}:{column + 1}: undeclared reference to '{name}' (in container '')"
                      f"\n | {lines[line]}\n | {'.' * column}^")
    return issues


def _is_call(expression: str, end: int) -> bool:
    """Whether the name ending at ``end`` is a global function's (``quantity("1Gi")``, ``size(x)``)."""
    rest = expression[end:end + 64].lstrip()
    return rest.startswith("(")


def selector_causes(selectors: Any, path: str, stored: bool = False) -> Causes:
    """``validateSelectorSlice``: at most 32, each with a ``cel`` expression that compiles."""
    listed = items(selectors)
    if len(listed) > SELECTORS_MAX:
        return [too_many(path, len(listed), SELECTORS_MAX)]
    causes: Causes = []
    for i, selector in enumerate(listed):
        cel = mapping(selector).get("cel")
        if not isinstance(cel, dict):
            causes.append(required(f"{path}[{i}].cel"))
        else:
            causes += cel_causes(cel.get("expression"), f"{path}[{i}].cel.expression", stored)
    return causes
