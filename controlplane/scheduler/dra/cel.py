"""CEL selectors over devices, as upstream's ``dynamic-resource-allocation/cel``.

A DeviceClass or a request selects devices with CEL expressions over one variable,
``device``::

    device.driver == "gpu.example.com"
    device.attributes["gpu.example.com"].model == "H100"
    device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0
    device.allowMultipleAllocations

Attribute and capacity names without a domain get the driver's. A domain the
device does not have reads as an empty map (upstream's default), so
``device.attributes["other.com"].x`` is a runtime error ("no such key") but
``"x" in device.attributes["other.com"]`` is false.

Evaluation uses ``common-expression-language`` (the Rust ``cel`` interpreter
behind a Python module). Expressions are compiled once per distinct text
(``Selectors``); each device's activation (``DeviceEnv``) is built once and
reused by every expression. Upstream's Kubernetes CEL libraries are provided
where selectors use them: ``quantity(s)`` with ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``asInteger``, ``asApproximateFloat``, ``sign``, ``add``, ``sub``,
``isInteger``; ``semver(s)``/``isSemver(s)`` with ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``major``, ``minor``, ``patch``. Not provided: ``cel.bind``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...quantity import QuantityError, parse_quantity

__all__ = ["CelError", "CompiledSelector", "DeviceEnv", "Selectors", "compile_selector"]

# Values of the Kubernetes CEL types are carried as tagged maps: the Rust interpreter
# converts only plain values back and forth. Equal quantities have equal maps (the
# value is kept as an exact fraction), so `==` behaves as upstream's.
_Q = "__quantity__"
_V = "__semver__"


class CelError(ValueError):
    """A selector that does not compile, fails at run time, or does not yield a bool."""


def _quantity_value(v: Any) -> Fraction:
    if isinstance(v, dict) and _Q in v:
        return Fraction(int(v["num"]), int(v["den"]))
    raise TypeError(f"not a quantity: {v!r}")


def _make_quantity(value: Fraction) -> dict[str, Any]:
    return {_Q: True, "num": value.numerator, "den": value.denominator}


def quantity_of(text: str | int | float) -> dict[str, Any]:
    return _make_quantity(parse_quantity(text))


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


def semver_of(text: str) -> dict[str, Any]:
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"not a semantic version: {text!r}")
    return {_V: True, "major": int(m[1]), "minor": int(m[2]), "patch": int(m[3]), "pre": m[4] or ""}


def _semver_key(v: dict[str, Any]) -> tuple[Any, ...]:
    pre = v["pre"]
    # A version without a pre-release sorts after its pre-releases (semver 2.0.0 §11).
    parts: tuple[Any, ...] = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return (v["major"], v["minor"], v["patch"], 0 if pre else 1, parts)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _V in a and isinstance(b, dict) and _V in b:
        ka, kb = _semver_key(a), _semver_key(b)
    else:
        ka, kb = _quantity_value(a), _quantity_value(b)  # type: ignore[assignment]
    return (ka > kb) - (ka < kb)


def _is_semver(text: str) -> bool:
    return isinstance(text, str) and _SEMVER.match(text) is not None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except (QuantityError, TypeError):
        return False
    return True


def _as_integer(v: Any) -> int:
    value = _quantity_value(v)
    if value.denominator != 1:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _operand(v: Any) -> Fraction:
    return _quantity_value(v) if isinstance(v, dict) else Fraction(v)


_FUNCTIONS: dict[str, Any] = {
    "quantity": quantity_of,
    "isQuantity": _is_quantity,
    "semver": semver_of,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda v: float(_quantity_value(v)),
    "isInteger": lambda v: _quantity_value(v).denominator == 1,
    "sign": lambda v: (_quantity_value(v) > 0) - (_quantity_value(v) < 0),
    "add": lambda a, b: _make_quantity(_quantity_value(a) + _operand(b)),
    "sub": lambda a, b: _make_quantity(_quantity_value(a) - _operand(b)),
    "major": lambda v: v["major"],
    "minor": lambda v: v["minor"],
    "patch": lambda v: v["patch"],
}

# Domains named as literals in an expression: `device.attributes["gpu.example.com"]`.
_DOMAIN_LITERAL = re.compile(r"""device\s*\.\s*(?:attributes|capacity)\s*\[\s*(?:"([^"]*)"|'([^']*)')\s*\]""")


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: Any
    domains: frozenset[str]

    def matches(self, env: DeviceEnv) -> bool:
        """Whether the device matches; raises ``CelError`` on a runtime error or a non-bool result."""
        try:
            result = self.program.execute(env.context(self.domains))
        except Exception as e:  # the interpreter raises KeyError, TypeError, RuntimeError...
            raise CelError(f"CEL runtime error: {_describe(e)}") from None
        if not isinstance(result, bool):
            raise CelError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return result


def _describe(e: Exception) -> str:
    if isinstance(e, KeyError):
        return f"no such key: {e.args[0] if e.args else ''}"
    return str(e).split("\n", 1)[0]


def compile_selector(expression: str) -> CompiledSelector:
    """Compile ``expression`` (uncached; ``Selectors.get`` caches)."""
    import cel as _cel  # on first use: the package imports its command line (prompt_toolkit) too, 0.1 s of every start

    try:
        program = _cel.compile(expression)
    except Exception as e:
        raise CelError(f"compilation failed: {_describe(e)}") from None
    domains = frozenset(a or b for a, b in _DOMAIN_LITERAL.findall(expression))
    return CompiledSelector(expression, program, domains)


class Selectors:
    """Compiled selectors by expression text: each distinct expression is compiled once.

    A compile error is cached too (as the exception to raise again), so a bad
    class costs one compilation, not one per device.
    """

    def __init__(self, cache: bool = True) -> None:
        self._cache: dict[str, CompiledSelector | CelError] = {}
        self.cache = cache  # False: compile on every use (the benchmark's naive peer)
        self.compilations = 0

    def get(self, expression: str) -> CompiledSelector:
        got = self._cache.get(expression) if self.cache else None
        if got is None:
            self.compilations += 1
            try:
                got = compile_selector(expression)
            except CelError as e:
                got = e
            self._cache[expression] = got
        if isinstance(got, CelError):
            raise got
        return got


def _attribute_value(attr: Mapping[str, Any]) -> Any:
    if "int" in attr:
        return int(attr["int"])
    if "bool" in attr:
        return bool(attr["bool"])
    if "string" in attr:
        return str(attr["string"])
    if "version" in attr:
        return semver_of(str(attr["version"]))
    raise CelError(f"unsupported attribute value {dict(attr)!r}")


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


class DeviceEnv:
    """The ``device`` variable for one device, built once and shared by all expressions.

    ``context(domains)`` adds empty maps for domains an expression names that the
    device lacks (upstream's map-with-default); contexts are cached per domain set.
    """

    __slots__ = ("_attributes", "_base", "_capacity", "_contexts", "_device")

    def __init__(self, driver: str, device: Mapping[str, Any]) -> None:
        attributes: dict[str, dict[str, Any]] = {}
        for name, attr in (device.get("attributes") or {}).items():
            domain, ident = _split(name, driver)
            try:
                attributes.setdefault(domain, {})[ident] = _attribute_value(attr)
            except ValueError as e:
                raise CelError(f"attribute {name}: {e}") from None
        capacity: dict[str, dict[str, Any]] = {}
        for name, cap in (device.get("capacity") or {}).items():
            domain, ident = _split(name, driver)
            try:
                capacity.setdefault(domain, {})[ident] = quantity_of(cap.get("value", 0))
            except QuantityError as e:
                raise CelError(f"capacity {name}: {e}") from None
        self._attributes = attributes
        self._capacity = capacity
        self._device = {"driver": driver, "attributes": attributes, "capacity": capacity,
                        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False))}
        self._contexts: dict[frozenset[str], Any] = {}
        self._base: Any = None

    def context(self, domains: frozenset[str]) -> Any:
        missing = frozenset(d for d in domains if d not in self._attributes or d not in self._capacity)
        ctx = self._contexts.get(missing)
        if ctx is None:
            device = self._device
            if missing:
                device = dict(device)
                device["attributes"] = {**{d: {} for d in missing}, **self._attributes}
                device["capacity"] = {**{d: {} for d in missing}, **self._capacity}
            import cel as _cel

            ctx = _cel.Context({"device": device}, functions=_FUNCTIONS)
            self._contexts[missing] = ctx
        return ctx
