"""Go's quoting of a string (``strconv.Quote``, what ``%q`` prints), shared by every message
that names a value the way upstream's ``fmt.Sprintf("%q", ...)`` does.

    >>> quote('web-1')
    '"web-1"'

Go keeps what ``unicode.IsPrint`` calls printable (letters, marks, numbers, punctuation,
symbols and the ASCII space: the categories Python's ``str.isprintable`` keeps too), escapes
``"`` and ``\\``, writes the C escapes ``\\a \\b \\f \\n \\r \\t \\v`` for those controls, ``\\xNN``
for the other controls below 0x80 and DEL, ``\\uNNNN``/``\\UNNNNNNNN`` for the rest. A byte that
was not UTF-8 (held here as a surrogate escape, U+DC80–U+DCFF) is ``\\xNN`` as Go writes it.
"""

from __future__ import annotations

__all__ = ["quote", "quote_list"]

_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
              '"': '\\"', "\\": "\\\\"}


def quote(text: str) -> str:
    """``text`` as Go's ``strconv.Quote`` writes it."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case: nothing to escape
    out = ['"']
    for ch in text:
        escaped = _C_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
                out.append(f"\\x{code - 0xDC00:02x}")
            elif 0xD800 <= code <= 0xDFFF:  # not a rune at all: Go writes the replacement
                out.append("\\ufffd")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def quote_list(values: list[str]) -> str:
    """A ``[]string`` as ``%q`` prints it: ``["a" "b"]``."""
    return "[" + " ".join(quote(v) for v in values) + "]"
