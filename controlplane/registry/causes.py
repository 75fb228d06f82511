"""The causes of a 422 Invalid (``details.causes``), as the validators of the newer
modules build them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..gostrings import quote

__all__ = ["Causes", "cause", "duplicate", "forbidden", "invalid", "not_found", "not_supported", "objects", "required",
           "show", "too_long", "too_many"]

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


# -- field errors, as apimachinery's field package words them ------------------------------
def show(value: Any) -> str:
    """A bad value as ``field.Error`` prints it: strings quoted (``%q``), numbers plain."""
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {show(value)}: {detail}"}


def required(field: str, detail: str = "") -> dict[str, str]:
    return {"reason": "FieldValueRequired", "field": field,
            "message": f"Required value: {detail}" if detail else "Required value"}


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> dict[str, str]:
    listed = ", ".join(f'"{v}"' for v in supported)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f"Unsupported value: {show(value)}: supported values: {listed}"}


def duplicate(field: str, value: Any) -> dict[str, str]:
    return {"reason": "FieldValueDuplicate", "field": field, "message": f"Duplicate value: {show(value)}"}


def not_found(field: str, value: Any) -> dict[str, str]:
    return {"reason": "FieldValueNotFound", "field": field, "message": f"Not found: {show(value)}"}


def forbidden(field: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "field": field, "message": f"Forbidden: {detail}"}


def too_long(field: str, limit: int) -> dict[str, str]:
    return {"reason": "FieldValueTooLong", "field": field, "message": f"Too long: may not be more than {limit} bytes"}


def too_many(field: str, count: int, limit: int) -> dict[str, str]:
    """``field.TooMany``: a list longer than it may be (its length is the bad value)."""
    return {"reason": "FieldValueTooMany", "field": field,
            "message": f"Too many: {count}: must have at most {limit} items"}
