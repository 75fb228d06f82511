"""Failures as Kubernetes reports them: a ``metav1.Status`` with code, reason and details.

    raise ApiError.not_found(rtype, "web-0")   # 404 NotFound, as kube-apiserver words it
"""

from __future__ import annotations

from typing import Any

import orjson

from ..registry import ResourceType

__all__ = ["ApiError"]


class ApiError(Exception):
    # the Status's ListMeta: an expired continue token's 410 carries a fresh token (``continue``)
    list_meta: dict[str, Any] | None = None

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``metav1.Status``, its members in the order of upstream's struct (as Go's encoder
        writes them: ``details`` before ``code``), the empty ones left out as its ``omitempty``
        tags leave them out; clients that compare an error's text (the Python client's
        ``FailToCreateError``) see the same bytes as from kube-apiserver."""
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta or {}),
                                "status": "Failure"}
        if self.message:
            body["message"] = self.message
        if self.reason:  # omitted when empty, as upstream's (StatusReasonUnknown)
            body["reason"] = self.reason
        if self.details is not None:  # (a pointer upstream: empty details are still written, as {})
            body["details"] = _in_order(self.details, _DETAILS)
        body["code"] = self.code
        return body

    def body(self) -> bytes:
        return orjson.dumps(self.status())

    def retry_after(self) -> list[tuple[bytes, bytes]]:
        """The ``Retry-After`` header of an answer whose details say ``retryAfterSeconds``,
        as upstream's ``ErrorNegotiated`` sets it (client-go waits and retries on it)."""
        seconds = (self.details or {}).get("retryAfterSeconds")
        return [(b"retry-after", str(seconds).encode())] if isinstance(seconds, int) and seconds > 0 else []

    @staticmethod
    def _details(rtype: ResourceType | None, name: str | None) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if name:
            d["name"] = name
        if rtype is not None:
            if rtype.group:
                d["group"] = rtype.group
            d["kind"] = rtype.plural
        return d

    @staticmethod
    def _what(rtype: ResourceType) -> str:
        return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural

    @classmethod
    def not_found(cls, rtype: ResourceType, name: str) -> ApiError:
        return cls(404, "NotFound", f'{cls._what(rtype)} "{name}" not found', cls._details(rtype, name))

    @classmethod
    def already_exists(cls, rtype: ResourceType, name: str) -> ApiError:
        return cls(409, "AlreadyExists", f'{cls._what(rtype)} "{name}" already exists', cls._details(rtype, name))

    @classmethod
    def conflict(cls, rtype: ResourceType, name: str, why: str) -> ApiError:
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {cls._what(rtype)} "{name}": {why}',
                   cls._details(rtype, name))

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def name_mismatch(cls, got: object, name: str) -> ApiError:
        """An object whose name is not the one on the URL (upstream's ``checkName``); one
        without a name is its ScopeNamer's error, ``name must be provided``."""
        if not got:
            return cls.bad_request(f"the name of the object ({name} based on URL) was undeterminable: "
                                   "name must be provided")
        return cls.bad_request(f"the name of the object ({got}) does not match the name on the URL ({name})")

    @classmethod
    def namespace_mismatch(cls, got: object, namespace: str) -> ApiError:
        """A PUT's body in another namespace than the URL's, in upstream's ``checkName``
        words (a POST's or a patch's is ``EnsureObjectNamespaceMatchesRequestNamespace``'s)."""
        return cls.bad_request(f"the namespace of the object ({got}) does not match the namespace on the "
                               f"request ({namespace})")

    @classmethod
    def invalid(cls, rtype: ResourceType, name: str, causes: list[dict[str, str]]) -> ApiError:
        """422 Invalid as ``NewInvalid`` words it: the qualified kind (``Deployment.apps``), one
        cause as ``field: message``, several as ``[a: m1, b: m2]``, each said once (as the aggregate
        upstream prints, where the causes keep every error); details name the kind, not the plural."""
        errs = list(dict.fromkeys(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes))
        msg = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        details = cls._details(rtype, name) | {"kind": rtype.kind, "causes": causes}
        kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
        return cls(422, "Invalid", f'{kind} "{name}" is invalid: {msg}', details)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        """405 as go-restful's answer through upstream's ``NewGenericServerResponse``: the
        message names neither method nor path."""
        return cls(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})

    @classmethod
    def unsupported_media_type(cls, accepted: tuple[str, ...]) -> ApiError:
        """A body of a type the endpoint does not read, worded as upstream's (which does not
        name the type it got)."""
        return cls(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types include: "
                   f'{", ".join(accepted)}')

    @classmethod
    def too_large(cls, why: str = "") -> ApiError:
        """413; ``why`` in upstream's words (``NewRequestEntityTooLargeError``): ``limit is 3145728``."""
        if not why:
            return cls(413, "RequestEntityTooLarge", "the request body is too large (limit 3 MiB)")
        return cls(413, "RequestEntityTooLarge", f"Request entity too large: {why}")

    @classmethod
    def timeout(cls, why: str) -> ApiError:
        """504 as upstream's ``NewTimeoutError`` (details empty: no retryAfterSeconds)."""
        return cls(504, "Timeout", f"Timeout: {why}", {})

    @classmethod
    def not_found_path(cls) -> ApiError:
        """404 for a path nothing is routed at, as go-restful's answer through upstream's
        ``NewGenericServerResponse``: the bare message, which kubectl prints as it is (``kubectl
        get pod x --subresource=scale``), and details present but empty (kubectl debug reads
        them to tell an old server)."""
        return cls(404, "NotFound", "the server could not find the requested resource", {})


# metav1.StatusDetails' and StatusCause's members in their structs' order
_DETAILS = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE = ("reason", "message", "field")


def _in_order(details: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``details`` (or a cause) with its members in upstream's order, the empty ones dropped
    (every member is ``omitempty``); a member upstream does not have goes last, as it was."""
    out: dict[str, Any] = {}
    for key in order:
        value = details.get(key)
        if value:
            out[key] = [_in_order(c, _CAUSE) if isinstance(c, dict) else c for c in value] \
                if key == "causes" and isinstance(value, list) else value
    for key, value in details.items():
        if key not in out and key not in order:
            out[key] = value
    return out


def json_object(body: bytes, what: str) -> dict[str, Any]:
    """``body`` decoded as a JSON object, or a 400 naming ``what`` ("the request body")."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ApiError.bad_request(f"{what} is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise ApiError.bad_request(f"{what} must be a JSON object")
    return value
