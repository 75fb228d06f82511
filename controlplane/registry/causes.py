"""The causes of a 422 Invalid (``details.causes``), as the validators of the newer
modules build them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["Causes", "cause", "objects"]

Causes = list[dict[str, str]]


def cause(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


def objects(items: list[Any], path: str, causes: Causes) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each object of the list at ``path`` with its own path (``path[i]``); an item that is
    not an object is a cause, and skipped."""
    for i, item in enumerate(items):
        at = f"{path}[{i}]"
        if isinstance(item, dict):
            yield at, item
        else:
            causes.append(cause("FieldValueInvalid", at, "Invalid value: must be an object"))
