"""Query parameters as upstream's parameter codec reads them into its options structs.

    >>> flag({"watch": "True"}, "watch"), flag({"watch": "0"}, "watch"), flag({}, "watch")
    (True, False, None)
    >>> go_int64("-5"), go_int64("1e9"), go_int64("1_000"), go_int64("9223372036854775808")
    (-5, None, None, None)
    >>> q = query_of(b"watch=0&watch=1&dryRun=All&dryRun=x"); q["watch"], q["dryRun"], q.values_of("dryRun")
    ('0', 'All', ['All', 'x'])
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

__all__ = ["Query", "flag", "go_int64", "query_of", "values_of"]

_DECIMAL = re.compile(r"[+-]?[0-9]+\Z")


class Query(dict[str, str]):
    """A request's query parameters, each its first value: upstream's parameter codec reads
    a repeated scalar parameter (``watch``, ``limit``, ``fieldValidation``, ...) by its first
    (``Convert_Slice_string_To_*`` take ``[0]``), so ``watch=0&watch=1`` is a list there, not a
    watch. A parameter that is a list in the options structs (``dryRun``) has every value
    in ``values_of``."""

    __slots__ = ("_repeated",)

    def __init__(self) -> None:
        super().__init__()
        self._repeated: dict[str, list[str]] = {}

    def values_of(self, name: str) -> list[str]:
        """Every value ``name`` was given, in order ([] when absent)."""
        repeated = self._repeated.get(name)
        if repeated is not None:
            return repeated
        value = self.get(name)
        return [] if value is None else [value]


def query_of(query_string: bytes) -> Query:
    """The ``Query`` of a request's raw query string."""
    query = Query()
    if not query_string:
        return query
    for key, value in parse_qsl(query_string.decode("utf-8", "replace"), keep_blank_values=True):
        if key in query:  # (not an identity test: CPython shares one-character strings)
            query._repeated.setdefault(key, [query[key]]).append(value)
        else:
            query[key] = value
    return query


def values_of(query: dict[str, str], name: str) -> list[str]:
    """Every value of ``name`` in ``query``: a ``Query``'s all, a plain dict's one."""
    if isinstance(query, Query):
        return query.values_of(name)
    value = query.get(name)
    return [] if value is None else [value]


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
