"""Kubernetes quantities as exact numbers.

A quantity (``"40Gi"``, ``"100m"``, ``"1.5"``, ``"2e3"``) is parsed to a
``Fraction`` so that sums and comparisons of device capacity are exact, as
``resource.Quantity`` is upstream::

    parse_quantity("1Gi") == 1073741824
    parse_quantity("100m") == Fraction(1, 10)
    format_quantity(Fraction(3, 2)) == "1500m"

``format_quantity`` writes the numbers the allocator produces (consumed
capacity) in the shortest of their binary and decimal spellings.

``canonical_quantity`` is the text kube-apiserver writes back for a quantity it
decoded (``Quantity.MarshalJSON``), which keeps the *format* the text was written
in: a decimal one (``"0.1"``, ``"1000m"``, ``"1500k"``) as an integer times a power
of 1000 (``"100m"``, ``"1"``, ``"1500k"``), an exponent one as an integer times a
power of ten in threes (``"1e4"`` is ``"10e3"``), a binary one as an integer times a
power of 1024 (``"1024Mi"`` is ``"1Gi"``) when it is whole and at least 1Ki in
magnitude, else as a decimal one. Values are rounded up (away from zero) to the
nano. Text that is already in that form is kept as written (``"+1"`` stays), as
``ParseQuantity`` keeps it::

    canonical_quantity("0.5") == "500m"
    canonical_quantity("2048Ki") == "2Mi"
    canonical_quantity("1.5Gi") == "1536Mi"
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

__all__ = ["NANO", "QuantityError", "binary_quantity", "canonical_quantity", "format_quantity", "nanos",
           "parse_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
# ASCII digits only, as Go's parser: Python's \d takes any script's (and int() reads them)
_RE = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$", re.ASCII)


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
    value = _bounded_number(number)
    if exponent is not None:
        value *= Fraction(10) ** _bounded_exponent(exponent)
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    return -value if sign == "-" else value


# what an exact value keeps of a quantity no one writes by hand: ten to the thousandth at the
# most (an exponent clamped there, a longer whole part taken as that), a thousand digits of a
# fraction. Ten to the ten millionth took seconds of the event loop to compute; ten to the
# billionth, minutes, and a number of over 4,300 digits cannot be read as a Python int at all
_FARTHEST = 1_000


def _bounded_number(number: str) -> Fraction:
    whole, _, fraction = number.partition(".")
    whole = whole.lstrip("0")
    if len(whole) > _FARTHEST:
        return Fraction(10) ** _FARTHEST
    fraction, beyond = fraction[:_FARTHEST], fraction[_FARTHEST:]
    value = Fraction(int(whole + fraction or "0"), 10 ** len(fraction))
    if beyond.strip("0"):  # still above what was kept: nanos() rounds it up, as Go does
        value += Fraction(1, 10**_FARTHEST)
    return value


def _bounded_exponent(exponent: str) -> int:
    digits = exponent.lstrip("+-")
    power = int(digits) if len(digits) <= 5 else _FARTHEST
    return -min(power, _FARTHEST) if exponent.startswith("-") else min(power, _FARTHEST)


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


# the decimal SI suffixes by power of ten; the binary ones by power of 1024
_SI_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_SI_POWER = {suffix: power for power, suffix in _SI_SUFFIX.items()}
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_MAX_QUANTITY = 2**63 - 1  # what ParseQuantity caps a value it cannot hold in an int64 at
_INT64_DIGITS = 18         # the digits of a decimal quantity it parses into an int64 (maxInt64Factors)
_LONGEST = 1_000           # digits past which a quantity is kept as written (canonical_quantity)
_EXPONENT_DIGITS = 10      # the digits of an int32 exponent


@functools.lru_cache(maxsize=4096)
def canonical_quantity(text: str) -> str:
    """The text kube-apiserver writes back for the quantity ``text`` (see the module's
    docstring); a ``QuantityError`` if ``text`` is not one. Worked out on the digits and
    the power of ten, never on the number itself, so that ``1e2147483647`` costs no more
    than ``1``; a text beyond anything written by hand (over a thousand digits, an exponent
    past an int32) is kept as written."""
    text = text.strip()
    m = _RE.match(text)
    if m is None:
        raise QuantityError(f"not a quantity: {text!r}")
    sign, number, suffix, exponent = m.groups()
    whole, _, fraction = number.partition(".")
    digits = whole + fraction
    if len(digits) > _LONGEST or (exponent is not None and len(exponent.lstrip("+-")) > _EXPONENT_DIGITS):
        return text
    if _kept_as_written(digits, fraction, suffix, exponent):
        return text
    n = int(digits)
    if n == 0:
        return "0"
    sign = "-" if sign == "-" else ""
    if suffix in _BINARY:
        return sign + _binary(Fraction(n * _BINARY[suffix], 10 ** len(fraction)))
    power = int(exponent) if exponent is not None else _SI_POWER[suffix or ""]
    n, power = _decimal(n, power - len(fraction), capped=len(digits) > _INT64_DIGITS)
    if exponent is not None:
        return f"{sign}{n}" + (f"e{power}" if power else "")
    return f"{sign}{n}{_SI_SUFFIX[power]}" if power in _SI_SUFFIX else f"{sign}{n}e{power}"


def binary_quantity(n: int) -> str:
    """The text Go writes for the whole number ``n`` made a BinarySI quantity
    (``resource.NewQuantity(n, resource.BinarySI)``, as metrics-server makes a memory usage):
    a multiple of the largest power of 1024 it is one of (``50331648`` is ``"48Mi"``, ``1536``
    stays ``"1536"``), and below 1Ki a decimal one (``1000`` is ``"1k"``)."""
    if n == 0:
        return "0"
    return ("-" if n < 0 else "") + _binary(Fraction(abs(n)))


def _kept_as_written(digits: str, fraction: str, suffix: str | None, exponent: str | None) -> bool:
    """Whether ``ParseQuantity`` keeps the text it parsed (its int64 path, for a text in
    canonical form already): a binary one without a fraction, small enough for that path,
    whose number is not a multiple of 8; a decimal one of at most 18 digits whose power of
    ten is a multiple of three from the nano up, its digits neither ending in three zeros
    nor starting with one."""
    if suffix in _BINARY:
        power = 10 * (_BINARY_SUFFIX.index(suffix))
        if fraction or 15 - len(digits) - (power * 3) // 10 - 1 < 0:
            return False
        n = int(digits)
        return n << power <= _MAX_QUANTITY and n & 7 != 0
    power = int(exponent) if exponent is not None else _SI_POWER[suffix or ""]
    scale = power - len(fraction)
    return (len(digits) <= _INT64_DIGITS and scale >= -9 and scale % 3 == 0
            and not digits.endswith("000") and not digits.startswith("0"))


def _binary(value: Fraction) -> str:
    """A positive binary quantity, as Canonicalize writes it: rounded up to the nano and
    capped at the int64 maximum, a whole number of at least 1Ki as a multiple of the largest
    power of 1024 it is one of, anything else as a decimal one."""
    nanos = -(-value.numerator * NANO // value.denominator)
    if nanos >= _MAX_QUANTITY * NANO:
        return str(_MAX_QUANTITY)
    if nanos % NANO or nanos < 1024 * NANO:
        n, power = _decimal(nanos, -9, capped=False)
        return f"{n}{_SI_SUFFIX[power]}"
    n, power = nanos // NANO, 0
    while n % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
        n, power = n // 1024, power + 1
    return f"{n}{_BINARY_SUFFIX[power]}"


def _decimal(n: int, power: int, capped: bool) -> tuple[int, int]:
    """``n`` (positive) times ten to the ``power`` as ParseQuantity keeps it and Canonicalize
    writes it: rounded up to the nano, at most the int64 maximum when ``capped`` (its inf.Dec
    path, for more than 18 digits), then as (m, p): p a multiple of three, m with as few
    trailing zeros as that allows."""
    if power < -9:
        below = -9 - power  # digits below the nano
        n = 1 if below > len(str(n)) else -(-n // 10**below)
        power = -9
    if capped and _above_max(n, power):
        n, power = _MAX_QUANTITY, 0
    while n % 10 == 0:
        n, power = n // 10, power + 1
    shift = power % 3
    return n * 10**shift, power - shift


def _above_max(n: int, power: int) -> bool:
    """Whether ``n`` times ten to the ``power`` (at least -9) is above the int64 maximum."""
    if power >= 0:
        return len(str(n)) + power > 19 or n * 10**power > _MAX_QUANTITY
    return bool(n > _MAX_QUANTITY * 10 ** (-power))
