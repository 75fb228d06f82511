"""PodLogOptions: the query of ``GET pods/<name>/log``, read and validated as kube-apiserver does
before it looks the pod up (``LogREST.Get``): a number that does not parse is 400 (the
parameter codec's ``strconv.ParseInt`` error), a value out of range 422 against
``PodLogOptions`` (``ValidatePodLogOptions``)."""

from __future__ import annotations

import datetime

from ..registry.types import ResourceType
from .errors import ApiError

__all__ = ["validate_log_options"]

_OPTIONS_TYPE = ResourceType("", "v1", "PodLogOptions", "podlogoptions", False)
_STREAMS = ("All", "Stderr", "Stdout")


def _int(query: dict[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw, 10)
    except ValueError:
        raise ApiError.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def validate_log_options(name: str, query: dict[str, str]) -> None:
    """Raise the Status kube-apiserver answers for these log options, if any."""
    tail, limit, since = _int(query, "tailLines"), _int(query, "limitBytes"), _int(query, "sinceSeconds")
    since_time = query.get("sinceTime") or None
    if since_time is not None:
        try:
            datetime.datetime.fromisoformat(since_time.replace("Z", "+00:00"))
        except ValueError:
            raise ApiError.bad_request(f'parsing time "{since_time}" as "2006-01-02T15:04:05Z07:00": '
                                       "not an RFC 3339 time") from None
    causes: list[dict[str, str]] = []

    def cause(reason: str, field: str, message: str) -> None:
        causes.append({"reason": reason, "field": field, "message": message})

    if tail is not None and tail < 0:
        cause("FieldValueInvalid", "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        cause("FieldValueInvalid", "limitBytes", f"Invalid value: {limit}: must be greater than 0")
    if since is not None and since_time is not None:
        cause("FieldValueForbidden", "", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
    elif since is not None and since < 1:
        cause("FieldValueInvalid", "sinceSeconds", f"Invalid value: {since}: must be greater than 0")
    stream = query.get("stream")
    if stream is not None:
        if stream not in _STREAMS:
            cause("FieldValueNotSupported", "stream", f'Unsupported value: "{stream}": supported values: '
                  + ", ".join(f'"{s}"' for s in _STREAMS))
        if stream != "All" and tail is not None:
            cause("FieldValueForbidden", "", "Forbidden: `tailLines` and specific `stream` are mutually "
                  "exclusive for now")
    if causes:
        raise ApiError.invalid(_OPTIONS_TYPE, name, causes)
