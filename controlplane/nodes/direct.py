"""The simulator's writes, straight into the in-process app when there is one.

Inside ``controlplane serve`` the simulator's client is ``Client.in_process``:
an httpx client over an ASGI transport. httpx's request machinery (URL and
header models, the transport's task and queue for streaming) costs about
twice what the API server spends on a lease update, and the simulator makes
10,000 of them a second at 100,000 nodes. ``Api`` sends the simulator's
single-answer requests (every verb but watch) to the same ASGI app with a
bare ``scope``/``receive``/``send`` exchange: the same path through the API
(authentication, admission, validation, the store, the watch cache) without
httpx in front. Over a socket (``Client.from_kubeconfig``) it is the client.

    api = Api(client)
    await api.update("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", lease)
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

import orjson

from ..client import PATCH_TYPES, ApiError, Client, InProcessTransport

__all__ = ["Api"]


class Api:
    def __init__(self, client: Client) -> None:
        self.client = client
        transport = getattr(client.http, "_transport", None)
        self.app: Any = transport.app if isinstance(transport, InProcessTransport) else None
        self._headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in client.http.headers.items()
                         if k.lower() == "authorization"]

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      **query: Any) -> dict[str, Any]:
        if self.app is None:
            return await self.client.request(method, path, body, content_type, **query)
        data = b"" if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        headers = [*self._headers, (b"accept", b"application/json")]
        if body is not None:
            headers.append((b"content-type", content_type.encode()))
        q = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items() if v is not None}
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": urlencode(q).encode(),
                 "root_path": "", "headers": headers, "server": ("in-process", 0), "client": ("127.0.0.1", 0),
                 "state": {}}
        done = asyncio.get_running_loop().create_future()
        first = True
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": data, "more_body": False}
            await done
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and not done.done():
                    done.set_result(None)

        try:
            await self.app(scope, receive, send)
        finally:
            if not done.done():
                done.set_result(None)
        raw = b"".join(chunks)
        try:
            result: dict[str, Any] = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            result = {"message": raw[:200].decode("utf-8", "replace")}
        if status >= 300:
            raise ApiError(status, str(result.get("reason", "")), str(result.get("message", "")), result)
        return result

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        return await self.request("GET", path, **query)

    async def create(self, path: str, body: dict[str, Any], **query: Any) -> dict[str, Any]:
        return await self.request("POST", path, body, **query)

    async def update(self, path: str, body: dict[str, Any], **query: Any) -> dict[str, Any]:
        return await self.request("PUT", path, body, **query)

    async def patch(self, path: str, body: Any, patch_type: str = "merge", **query: Any) -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type=PATCH_TYPES[patch_type], **query)

    async def delete(self, path: str, body: dict[str, Any] | None = None, **query: Any) -> dict[str, Any]:
        return await self.request("DELETE", path, body, **query)
