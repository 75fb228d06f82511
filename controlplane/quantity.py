"""Kubernetes quantities as exact numbers.

A quantity (``"40Gi"``, ``"100m"``, ``"1.5"``, ``"2e3"``) is parsed to a
``Fraction`` so that sums and comparisons of device capacity are exact, as
``resource.Quantity`` is upstream::

    parse_quantity("1Gi") == 1073741824
    parse_quantity("100m") == Fraction(1, 10)
    format_quantity(Fraction(3, 2)) == "1500m"

``format_quantity`` writes the numbers the allocator produces (consumed
capacity) in the shortest of their binary and decimal spellings.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

__all__ = ["NANO", "QuantityError", "format_quantity", "nanos", "parse_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_RE = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")


NANO = 10**9


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """The exact value of a quantity; ints and floats (as JSON may carry) are taken as they are."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):  # a list or dict is not hashable
        raise QuantityError(f"not a quantity: {text!r}")
    return _parse_quantity(text)


@functools.lru_cache(maxsize=4096)
def _parse_quantity(text: str | int | float) -> Fraction:
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    m = _RE.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    sign, number, suffix, exponent = m.groups()
    value = Fraction(number)
    if exponent is not None:
        value *= Fraction(10) ** int(exponent)
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    return -value if sign == "-" else value


def format_quantity(value: Fraction | int) -> str:
    """The canonical text of ``value``: ``"4Gi"``, ``"500m"``, ``"3"``."""
    value = Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value.denominator == 1:
        # The shorter of the binary and the decimal spelling: "3Gi", "10G", "1536Mi".
        n = value.numerator
        spellings = [str(n)]
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if n % _BINARY[suffix] == 0:
                spellings.append(f"{n // _BINARY[suffix]}{suffix}")
                break
        for suffix in ("E", "P", "T", "G", "M", "k"):
            scale = _DECIMAL[suffix]
            if n % scale.numerator == 0:
                spellings.append(f"{n // scale.numerator}{suffix}")
                break
        return sign + min(spellings, key=len)
    for suffix in ("m", "u", "n"):
        scaled = value / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    # Below a nano: Kubernetes rounds up to the next nano.
    nanos = -(-value.numerator * 10**9 // value.denominator)
    return f"{sign}{nanos}n"


@functools.lru_cache(maxsize=4096)
def nanos(value: Fraction | str | int) -> int:
    """``value`` in integer billionths, rounded up as Kubernetes rounds below a nano: counters and
    capacity are summed as ints on the allocator's hot path."""
    v = parse_quantity(value) if isinstance(value, str) else Fraction(value)
    return -((-v.numerator * NANO) // v.denominator)
