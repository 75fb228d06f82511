"""A response as the Locust users hold it: status, arrival time, and the body,
parsed only when read.

Most writes' bodies are never read (a load test's controller needs the status and
at most the resourceVersion). Parsing every 5 KB pod took a third of a Locust
worker's CPU in the ``million`` scenario, and on a small machine that CPU is the
server's. No Locust import here, so tests can use it without gevent's patching.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["RESOURCE_VERSION", "Answer", "WholeList"]

# an object's (or a list's) first resourceVersion is its metadata's, on this server and on
# kube-apiserver: ObjectMeta's fields come before anything else that has one
RESOURCE_VERSION = re.compile(rb'"resourceVersion":"(\d+)"')
# a list's metadata comes before its items, on this server and on kube-apiserver (ListMeta
# before Items); a continue token is base64url, no quote or escape in it
_ITEMS = b'"items":'
_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')
_UNPARSED: Any = object()


class Answer:
    """A response: its status, when it arrived, and its body, parsed on first use."""

    __slots__ = ("status", "content", "at", "_body")

    def __init__(self, status: int, content: bytes, at: float) -> None:
        self.status = status
        self.content = content
        self.at = at  # perf_counter when the answer arrived
        self._body: dict[str, Any] | None = _UNPARSED

    @property
    def body(self) -> dict[str, Any] | None:
        if self._body is _UNPARSED:
            self._body = _parse_object(self.content)
        return self._body

    @property
    def rv(self) -> str | None:
        if self._body is _UNPARSED:
            m = RESOURCE_VERSION.search(self.content, 0, 4096)
            if m is not None:
                return m.group(1).decode()
        return ((self.body or {}).get("metadata") or {}).get("resourceVersion")

    @property
    def continue_token(self) -> str | None:
        """A list's ``metadata.continue`` (None when it has none): read from before its items
        while the body is unparsed. A paginated LIST reads nothing else of its pages, and
        parsing each 500-pod page (2.5 MB) for it was a twentieth of a Locust worker's CPU
        in the ``million`` run."""
        if self._body is _UNPARSED:
            items = self.content.find(_ITEMS, 0, 4096)
            if items >= 0 and self.content.find(b'"metadata":', 0, items) >= 0:
                m = _CONTINUE.search(self.content, 0, items)
                return m.group(1).decode() if m is not None and m.group(1) else None
        cont = ((self.body or {}).get("metadata") or {}).get("continue")
        return str(cont) if cont else None


class WholeList(Answer):
    """A LIST without limit that a paginated LIST fell back to when the continue token of
    one of its later pages had expired (client-go's pager, FullListIfExpired): it stands
    for the whole list, and the pages that came before it are void."""

    __slots__ = ()


def _parse_object(content: bytes) -> dict[str, Any] | None:
    if content[:1] != b"{":
        return None
    try:
        parsed = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None
