"""What a response is written as, from the request's ``Accept`` header, as kube-apiserver
negotiates it.

The server writes JSON; ``application/yaml`` preferred (by its ``q`` and then its
place in the header) gets the same document as YAML, its keys sorted as upstream's
JSON-to-YAML conversion sorts them. A header that accepts none of JSON, YAML or
protobuf (which this server answers with JSON, as a client asking for protobuf
always also accepts), nor a wildcard, is 406 NotAcceptable with upstream's message;
so is YAML for a watch, which has no YAML framing upstream either. A pod's log is
text and takes any ``Accept``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import yaml

from .errors import ApiError

__all__ = ["AS_JSON", "AS_YAML", "NOT_ACCEPTABLE", "output_format", "yaml_writer"]

AS_JSON, AS_YAML = "json", "yaml"
NOT_ACCEPTABLE = ApiError(406, "NotAcceptable", "only the following media types are accepted: application/json, "
                          "application/yaml, application/vnd.kubernetes.protobuf")
_JSON_TYPES = frozenset({"application/json", "application/vnd.kubernetes.protobuf", "*/*", "application/*"})

Send = Callable[[dict[str, Any]], Awaitable[None]]


@functools.lru_cache(maxsize=512)
def output_format(accept: str) -> str | None:
    """``AS_JSON``, ``AS_YAML``, or None when ``accept`` takes neither (an empty header takes JSON)."""
    if not accept:
        return AS_JSON
    best, best_q = None, 0.0
    for part in accept.split(","):
        media, _, params = part.partition(";")
        media = media.strip().lower()
        kind = AS_YAML if media == "application/yaml" else AS_JSON if media in _JSON_TYPES else None
        if kind is None:
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > best_q:
            best, best_q = kind, q
    return best


def yaml_writer(send: Send) -> Send:
    """``send``, with a JSON response body collected and written as YAML."""
    start: dict[str, Any] | None = None
    body: list[bytes] = []

    async def write(message: dict[str, Any]) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            headers = message.get("headers") or []
            if not any(k == b"content-type" and v.startswith(b"application/json") for k, v in headers):
                await send(message)  # not a JSON answer: as it is
                return
            start = message
            return
        if start is None:
            await send(message)
            return
        body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        document = yaml.safe_dump(orjson.loads(b"".join(body)), sort_keys=True, allow_unicode=True,
                                  default_flow_style=False).encode()
        headers = [(k, v) for k, v in start.get("headers") or [] if k not in (b"content-type", b"content-length")]
        await send({**start, "headers": [(b"content-type", b"application/yaml"),
                                         (b"content-length", str(len(document)).encode()), *headers]})
        await send({"type": "http.response.body", "body": document})

    return write
