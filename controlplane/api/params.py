"""Query parameters as upstream's parameter codec reads them into its options structs.

    >>> flag({"watch": "True"}, "watch"), flag({"watch": "0"}, "watch"), flag({}, "watch")
    (True, False, None)
    >>> go_int64("-5"), go_int64("1e9"), go_int64("1_000"), go_int64("9223372036854775808")
    (-5, None, None, None)
"""

from __future__ import annotations

import re

__all__ = ["flag", "go_int64"]

_DECIMAL = re.compile(r"[+-]?[0-9]+\Z")


def flag(query: dict[str, str], name: str) -> bool | None:
    """A boolean parameter (``watch``, ``allowWatchBookmarks``, ``force``, ...) as
    ``Convert_Slice_string_To_bool`` reads it: absent is None, ``0`` and ``false`` (in
    any case) are False, and anything else, the empty string too, is True. Hand-written
    clients send ``watch=True`` (Python's ``requests``) or ``watch=1``."""
    value = query.get(name)
    if value is None:
        return None
    return not (value == "0" or value.lower() == "false")


def go_int64(raw: str) -> int | None:
    """An integer parameter (``limit``, ``timeoutSeconds``, ``gracePeriodSeconds``) as
    ``strconv.ParseInt(raw, 10, 64)`` reads it, or None where Go's parse fails and
    upstream's parameter codec answers 400: a sign and ASCII digits only (Python's
    ``int`` also takes ``1_000``, `` 5`` and other scripts' digits), within an int64."""
    if not _DECIMAL.match(raw):
        return None
    value = int(raw)
    return value if -(1 << 63) <= value < 1 << 63 else None
