"""The scheduler's writes (bindings, events, conditions), with a fast path inside ``serve``.

Over a socket they are ordinary ``Client`` calls. When the client is a
``Client.in_process`` one, each write is instead one direct call of the same
ASGI app with the same headers (the admin's token included): the whole API
path (authentication, validation, store, watch cache) runs, but without
httpx's request and response objects and the transport's streaming task and
queue, which cost about as much as the write itself. A write's answer is
read whole; nothing here streams.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..client import ApiError, Client, InProcessTransport

__all__ = ["Writer"]

_CONTENT_TYPES = {
    "json": b"application/json",
    "merge": b"application/merge-patch+json",
    "strategic": b"application/strategic-merge-patch+json",
}


class Writer:
    def __init__(self, client: Client) -> None:
        self.client = client
        transport = getattr(client.http, "_transport", None)
        self.app: Any = transport.app if isinstance(transport, InProcessTransport) else None
        self._headers = [(k.lower(), v) for k, v in client.http.headers.raw
                         if k.lower() not in (b"content-type", b"content-length")]

    @property
    def in_process(self) -> bool:
        return self.app is not None

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.app is None:
            return await self.client.create(path, body)
        return await self._call("POST", path, body, "json")

    async def patch(self, path: str, body: dict[str, Any], patch_type: str) -> dict[str, Any]:
        if self.app is None:
            return await self.client.patch(path, body, patch_type=patch_type)
        return await self._call("PATCH", path, body, patch_type)

    async def _call(self, method: str, path: str, body: dict[str, Any], kind: str) -> dict[str, Any]:
        data = orjson.dumps(body)
        raw = path.encode()
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": raw, "query_string": b"",
            "root_path": "", "server": ("in-process", 0), "client": ("127.0.0.1", 0), "state": {},
            "headers": [*self._headers, (b"content-type", _CONTENT_TYPES[kind]),
                        (b"content-length", str(len(data)).encode())],
        }
        sent = False
        status = 500
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        content = b"".join(chunks)
        try:
            answer = orjson.loads(content) if content else {}
        except orjson.JSONDecodeError:
            answer = None
        if status >= 300:
            if isinstance(answer, dict) and answer.get("kind") == "Status":
                raise ApiError(status, str(answer.get("reason", "")), str(answer.get("message", "")), answer)
            raise ApiError(status, "", content[:200].decode(errors="replace"))
        return answer if isinstance(answer, dict) else {}
