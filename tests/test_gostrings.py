"""Go's %q (strconv.Quote), checked against what Go prints for the same strings."""

import pytest

from controlplane.gostrings import quote, quote_list


@pytest.mark.parametrize(("text", "go"), [
    ("web-1", '"web-1"'),                             # fmt.Sprintf("%q", "web-1")
    ("", '""'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("a\nb\tc\r\a\b\f\v", '"a\\nb\\tc\\r\\a\\b\\f\\v"'),
    ("\x00\x1f\x7f", '"\\x00\\x1f\\x7f"'),           # controls below 0x80 and DEL: \x
    ("\x85\xa0", '"\\u0085\\u00a0"'),                 # C1 control, no-break space: not IsPrint
    ("héllo 世界", '"héllo 世界"'),                   # printable runes kept as they are
    ("\u200b", '"\\u200b"'),                          # a format character (Cf)
    ("\U000e0001", '"\\U000e0001"'),                  # a tag character beyond the BMP
    ("\U0001f600", '"\U0001f600"'),                   # an emoji is a symbol: printable
    (b"a\xffb".decode("utf-8", "surrogateescape"), '"a\\xffb"'),  # a byte that was not UTF-8
])
def test_quote_is_gos(text: str, go: str) -> None:
    assert quote(text) == go


def test_quote_list_is_a_string_slice_with_percent_q() -> None:
    assert quote_list(["a", 'b"c']) == '["a" "b\\"c"]'
    assert quote_list([]) == "[]"
