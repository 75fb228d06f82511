"""``quantity.canonical_quantity``: the text kube-apiserver writes back for a quantity, as
``resource.Quantity`` canonicalises it (the cases of upstream's quantity tests and docs); and
``parse_quantity`` on quantities no one writes by hand."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from controlplane.quantity import QuantityError, binary_quantity, canonical_quantity, parse_quantity


@pytest.mark.parametrize(("text", "written"), [
    # decimal: an integer times a power of 1000, trailing zeros moved into the suffix
    ("0.1", "100m"), ("0.5", "500m"), ("1.5", "1500m"), ("1000m", "1"), ("1000", "1k"), ("1500", "1500"),
    ("1000k", "1M"), ("1000M", "1G"), ("01", "1"), ("0.0", "0"), ("-0", "0"), ("0", "0"), ("-1", "-1"),
    # already canonical: kept as written, sign and case included
    ("+1", "+1"), ("250m", "250m"), ("1e3", "1e3"), ("1E3", "1E3"), ("12e6", "12e6"),
    # an exponent: powers of ten in threes
    ("1e4", "10e3"), ("1.5e3", "1500"), ("1e-10", "1e-9"),
    # binary: powers of 1024 when whole and at least 1Ki, else decimal
    ("1024Mi", "1Gi"), ("2048Ki", "2Mi"), ("1.5Gi", "1536Mi"), ("0.5Gi", "512Mi"), ("1536Mi", "1536Mi"),
    ("1.5Ki", "1536"), ("0.5Ki", "512"), ("0.1Ki", "102400m"), ("1.1Ki", "1126400m"), ("8Ki", "8Ki"),
    ("-1Ki", "-1Ki"), ("4Ei", "4Ei"),
    # rounded up to the nano; capped at the int64 maximum past the int64 path
    ("0.1n", "1n"), ("1.0000000001", "1000000001n"), ("100000000000000000000", "9223372036854775807"),
    ("8Ei", "9223372036854775807"), ("9Ei", "9223372036854775807"), ("3.001n", "4n"),
    # upstream's TestQuantityString alternates and TestQuantityParseEmit
    ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"), ("5000m", "5"), ("1.08", "1080m"),
    ("1080000000n", "1080m"), ("0.001T", "1G"), ("1000u", "1m"), (".001e12", "1e9"), ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"), ("00", "0"), (".001Ki", "1024m"), (".000001Ki", "1024u"), (".000000000001Ki", "2n"),
    ("1000E", "1e21"),
    # the text is trimmed first, as Quantity.UnmarshalJSON trims it
    (" 1 ", "1"),
    # worked out on the digits: far exponents cost nothing
    ("1e2147483647", "10e2147483646"), ("1e-2147483647", "1e-9"), ("-1e4", "-10e3"), ("-1.5Gi", "-1536Mi"),
])
def test_a_quantity_is_written_back_in_upstreams_canonical_form(text: str, written: str) -> None:
    assert canonical_quantity(text) == written


def test_a_text_that_is_no_quantity_is_refused() -> None:
    with pytest.raises(QuantityError):
        canonical_quantity("1.5.5")


def test_a_quantity_no_one_writes_by_hand_is_read_at_once() -> None:
    """An exponent of millions or a number of thousands of digits: ``parse_quantity``, which
    pod validation and quota run on every request, held the event loop for seconds (minutes
    for ``1e999999999``) or failed with a ValueError, a 500; its exact value is bounded now."""
    started = time.monotonic()
    assert parse_quantity("1e999999999") > parse_quantity("1e999") > 0 > parse_quantity("-1e999999999")
    assert 0 < parse_quantity("1e-999999999") < Fraction(1, 10**999)
    assert parse_quantity("1" * 5000) >= 10**999 and 0 < parse_quantity("0." + "0" * 5000 + "1") < Fraction(1, 10**999)
    assert parse_quantity("0001.5e3") == 1500 and parse_quantity(".5") == Fraction(1, 2)
    assert time.monotonic() - started < 1


def test_binary_quantity_is_what_go_writes_for_a_binary_si_number() -> None:
    assert [binary_quantity(n) for n in (0, 1000, 1023, 1024, 1536, 48 << 20, 14544 << 10, -(1 << 30))] \
        == ["0", "1k", "1023", "1Ki", "1536", "48Mi", "14544Ki", "-1Gi"]
