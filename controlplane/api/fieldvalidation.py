"""``fieldValidation`` (KEP-2885) and warnings for one request.

    with request_scope(scope):                 # in the ASGI entry point
        obj = check_object(rtype, obj, body)   # Strict: 400; Warn: a warning; Ignore: nothing
        ...
        headers += warning_headers()           # 'Warning: 299 - "unknown field \\"spec.foo\\""'

The directive comes from the ``fieldValidation`` query parameter: ``Strict``,
``Warn`` (kube-apiserver's default when it is absent) or ``Ignore``; any other
value is a 422 against the verb's options kind (``CreateOptions`` for a POST,
``UpdateOptions`` for a PUT, ``PatchOptions`` for a PATCH), as upstream. Unknown fields are
dropped from the object under Warn and Ignore (a Go struct cannot hold them).
Missing required fields are a 422 Invalid whatever the directive.

Warnings are request-scoped, as kube-apiserver's warning recorder: a context
variable set by ``request_scope`` for the task serving the request.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from ..registry import ResourceType
from ..registry.validation import Findings, decode_with_duplicates, may_have_duplicates, shape_of
from .errors import ApiError

__all__ = ["add_warning", "check_object", "request_scope", "warning_headers"]

DIRECTIVES = ("Ignore", "Strict", "Warn")
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
# Most warnings a response carries, as kube-apiserver's recorder limits them
_MAX_WARNINGS = 50


@dataclass
class _Request:
    method: str
    directive: str | None
    warnings: list[str] = field(default_factory=list)


_CURRENT: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("controlplane_request", default=None)


@contextlib.contextmanager
def request_scope(scope: dict[str, Any]) -> Iterator[None]:
    """Hold an ASGI request's field-validation directive and collect its warnings."""
    qs: bytes = scope.get("query_string", b"")
    directive = None
    if b"fieldValidation" in qs:  # the common request has none: skip parsing the query
        values = parse_qs(qs.decode("latin-1"), keep_blank_values=True).get("fieldValidation")
        directive = values[-1] if values else None
    token = _CURRENT.set(_Request(scope.get("method", "GET"), directive))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def add_warning(text: str) -> None:
    """Add a warning to the current request's response (no-op outside a request)."""
    req = _CURRENT.get()
    if req is not None and text not in req.warnings and len(req.warnings) < _MAX_WARNINGS:
        req.warnings.append(text)


def warning_headers() -> list[tuple[bytes, bytes]]:
    """``Warning: 299 - "<text>"`` headers (RFC 7234 form, as kube-apiserver sends them)."""
    req = _CURRENT.get()
    if req is None or not req.warnings:
        return []
    return [(b"warning", b'299 - "' + _quote(w).encode() + b'"') for w in req.warnings]


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _directive() -> tuple[str, str]:
    """The request's (directive, method)."""
    req = _CURRENT.get()
    raw, method = (req.directive, req.method) if req is not None else (None, "POST")
    if raw is None or raw == "":
        return "Warn", method
    if raw not in DIRECTIVES:
        kind = _OPTIONS_KIND.get(method, "CreateOptions")
        message = f'Unsupported value: "{raw}": supported values: "", "Ignore", "Strict", "Warn"'
        raise ApiError(422, "Invalid", f'{kind}.meta.k8s.io "" is invalid: fieldValidation: {message}',
                       {"group": "meta.k8s.io", "kind": kind,
                        "causes": [{"reason": "FieldValueNotSupported", "message": message,
                                    "field": "fieldValidation"}]})
    return raw, method


def check_object(rtype: ResourceType, obj: dict[str, Any], body: bytes | None = None) -> dict[str, Any]:
    """Check a decoded request object (``body`` is its raw JSON, for duplicate keys;
    None for a patch result, whose duplicates were the patch's to carry).

    Returns the object to go on with: ``obj`` with unknown fields removed, or, when
    the body had duplicate keys, the body decoded again (the last value of a key wins,
    as in ``obj``). Raises 400 for a value of the wrong JSON type where an object or a
    list belongs (whatever the directive: it cannot be decoded), 400 under Strict for
    unknown or duplicate fields, and 422 for missing required ones."""
    directive, method = _directive()
    shape = shape_of(rtype.group, rtype.version, rtype.kind)
    if shape is None:
        return obj  # no schema (custom resources until theirs are registered): everything is kept
    found = shape.check(obj)
    if directive != "Ignore" and body is not None and may_have_duplicates(body, found.keys):
        redecoded, duplicates = decode_with_duplicates(body)
        if duplicates and isinstance(redecoded, dict):
            # the fields _parse settled (kind, apiVersion, metadata) are kept from obj
            redecoded.update({k: obj[k] for k in ("kind", "apiVersion") if k in obj})
            redecoded.setdefault("metadata", obj.get("metadata", {}))
            obj = redecoded
            found = shape.check(obj, duplicates=duplicates)
    if found.mismatched:
        path, given, expected = found.mismatched[0]
        raise ApiError.bad_request(_undecodable(rtype, method, f"json: cannot unmarshal {given} into Go struct field "
                                                            f"{rtype.kind}.{path} of type {expected}"))
    if found.problems:
        if directive == "Strict":
            raise ApiError.bad_request(_undecodable(rtype, method, "strict decoding error: "
                                                    + ", ".join(found.problems)))
        if directive == "Warn":
            for p in found.problems:
                add_warning(p)
        shape.check(obj, prune=True)
    _require(rtype, obj, found)
    return obj


def _undecodable(rtype: ResourceType, method: str, why: str) -> str:
    """A decoding failure as upstream words it: a create or update names the kind, a patch not."""
    if method == "PATCH":
        return why
    return f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: {why}'


def _require(rtype: ResourceType, obj: dict[str, Any], found: Findings) -> None:
    if not found.missing:
        return
    meta = obj.get("metadata")
    name = (meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""
    raise ApiError.invalid(rtype, str(name), [{"reason": "FieldValueRequired", "message": "Required value",
                                               "field": path} for path in found.missing])
