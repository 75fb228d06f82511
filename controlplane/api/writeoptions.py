"""A write's query options held to upstream's ``Validate{Create,Update,Patch}Options``.

Each write handler of kube-apiserver decodes its options from the query and validates
them before it reads the body: every problem of ``fieldManager``, ``dryRun`` and
``fieldValidation`` (a patch's ``fieldManager`` and ``force`` against its type first) is
one cause of a single 422 against the verb's options kind::

    POST ...?dryRun=Some&fieldManager=a%01b
    422 CreateOptions.meta.k8s.io "" is invalid: [fieldManager: Invalid value: "a\\x01b":
        invalid character U+0001 (at position 1), dryRun: Unsupported value: ["Some"]:
        supported values: "All"]

A DELETE's options, ``dryRun`` with them, are validated as its DeleteOptions (api/deleteoptions.py).
Values are worded as ``field.Error`` prints them: a string quoted, a list as its JSON.
"""

from __future__ import annotations

import json

from ..registry.managedfields import MAX_MANAGER_LENGTH
from ..registry.types import ResourceType
from .errors import ApiError
from .params import values_of
from .rbacescalation import go_quote

__all__ = ["DRY_RUN_VALUES", "check_write_options", "dry_run_problem"]

DRY_RUN_VALUES = ("All",)
_DIRECTIVES = ("", "Ignore", "Strict", "Warn")
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
_APPLY = "application/apply-patch+yaml"


def check_write_options(method: str, query: dict[str, str], patch_type: str = "") -> None:
    """Raise upstream's 422 when the options of a write (``method`` POST, PUT or PATCH;
    ``patch_type`` a PATCH's content type) are invalid; other methods have none here."""
    kind = _OPTIONS_KIND.get(method)
    if kind is None:
        return
    causes: list[dict[str, str]] = []
    manager = query.get("fieldManager")
    if method == "PATCH":
        if patch_type == _APPLY:
            if not manager:
                causes.append(_cause("FieldValueRequired", "fieldManager", "Required value: is required for "
                                                                           "apply patch"))
        elif "force" in query:
            causes.append(_cause("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply "
                                                                  "patch"))
    if manager:
        causes += _manager_problems(manager)
    dry_run = values_of(query, "dryRun")  # (a list in the options: every value, not the first)
    if dry_run:
        problem = dry_run_problem(dry_run)
        if problem is not None:
            causes.append(problem)
    directive = query.get("fieldValidation")
    if directive is not None and directive not in _DIRECTIVES:
        causes.append(_cause("FieldValueNotSupported", "fieldValidation", f"Unsupported value: {go_quote(directive)}: "
                             "supported values: " + ", ".join(f'"{d}"' for d in _DIRECTIVES)))
    if causes:
        raise ApiError.invalid(ResourceType("meta.k8s.io", "v1", kind, "", False), "", causes)


def dry_run_problem(values: list[str]) -> dict[str, str] | None:
    """Upstream's ValidateDryRun of the ``dryRun`` values, one cause naming them all."""
    if all(v in DRY_RUN_VALUES for v in values):
        return None
    given = json.dumps(values, separators=(",", ":"))  # Go's json.Marshal of the list
    return _cause("FieldValueNotSupported", "dryRun", f"Unsupported value: {given}: supported values: "
                  + ", ".join(f'"{v}"' for v in DRY_RUN_VALUES))


def _manager_problems(manager: str) -> list[dict[str, str]]:
    """ValidateFieldManager: at most 128 bytes, and each rune printable (Go's unicode.IsPrint,
    which Python's isprintable matches: letters, marks, numbers, punctuation, symbols and
    the ASCII space), each other one a cause of its own at its byte offset."""
    if len(manager) <= MAX_MANAGER_LENGTH and manager.isascii() and manager.isprintable():
        return []  # (the common case, every client's: two C-level scans, no per-rune loop)
    causes = []
    encoded = manager.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_MANAGER_LENGTH:
        causes.append(_cause("FieldValueTooLong", "fieldManager",
                             f"Too long: may not be more than {MAX_MANAGER_LENGTH} bytes"))
    offset = 0
    for ch in manager:
        if not ch.isprintable():
            causes.append(_cause("FieldValueInvalid", "fieldManager", f"Invalid value: {go_quote(manager)}: invalid "
                                 f"character U+{ord(ch):04X} (at position {offset})"))
        offset += len(ch.encode("utf-8", "surrogateescape"))
    return causes


def _cause(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}
