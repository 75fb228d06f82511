"""Query parameters as upstream's parameter codec reads them into its options structs.

    >>> flag({"watch": "True"}, "watch"), flag({"watch": "0"}, "watch"), flag({}, "watch")
    (True, False, None)
"""

from __future__ import annotations

__all__ = ["flag"]


def flag(query: dict[str, str], name: str) -> bool | None:
    """A boolean parameter (``watch``, ``allowWatchBookmarks``, ``force``, ...) as
    ``Convert_Slice_string_To_bool`` reads it: absent is None, ``0`` and ``false`` (in
    any case) are False, and anything else, the empty string too, is True. Hand-written
    clients send ``watch=True`` (Python's ``requests``) or ``watch=1``."""
    value = query.get(name)
    if value is None:
        return None
    return not (value == "0" or value.lower() == "false")
