"""An httpx transport that calls an ASGI app in this process, streaming.

httpx's own ``ASGITransport`` reads a response whole before returning it, so a
watch (a response that never ends) would never return. This one returns as
soon as the app has sent ``http.response.start`` and hands the body over as
the app sends it, through a bounded queue: a reader that stops reading makes
the app's ``send`` wait, as a full socket buffer would. Closing the response
tells the app the client went away (``http.disconnect``) and waits for it.

Used by components running inside ``controlplane serve`` (scheduler, node
simulator): they go through the whole API (admission, validation, watch
cache) with no socket and no HTTP parsing, and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote

import httpx

__all__ = ["IN_PROCESS", "WHOLE_BODY_SCOPE_KEY", "InProcessTransport", "call", "open_stream", "raw_path"]

# the scope's "server" of a request made in this process: none over a socket has it (the server's address)
IN_PROCESS = ("in-process", 0)

# Set in the scope of every in-process request: its body is handed over whole at the first
# ``receive`` (``_receiver``), so the app need not time its arrival.
WHOLE_BODY_SCOPE_KEY = "controlplane.whole_body"

# Chunks the app may send ahead of a reader (a watch's events, a LIST's pieces).
_QUEUE_CHUNKS = 256
_END = b""


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: asyncio.Queue[bytes | BaseException], task: asyncio.Task[None],
                 disconnected: asyncio.Event) -> None:
        self._chunks = chunks
        self._task = task
        self._disconnected = disconnected

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._chunks.get()
            if isinstance(chunk, BaseException):
                raise httpx.ReadError(f"the in-process app failed: {chunk!r}") from chunk
            if chunk is _END:
                return
            yield chunk

    async def aclose(self) -> None:
        self._disconnected.set()
        if not self._task.done():
            # the app may be blocked on a full queue: drain it so it sees the disconnect
            while not self._task.done():
                try:
                    self._chunks.get_nowait()
                except asyncio.QueueEmpty:
                    done, _ = await asyncio.wait({self._task}, timeout=0.05)
                    if done:
                        break
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


class InProcessTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncClient(transport=InProcessTransport(app), base_url="http://in-process")``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        url = request.url
        status, headers, stream = await open_stream(
            self.app, request.method, url.raw_path.split(b"?", 1)[0], url.query,
            [(k.lower(), v) for k, v in request.headers.raw], body)
        return httpx.Response(status, headers=headers, stream=stream, request=request)


async def open_stream(app: Any, method: str, raw_path: bytes, query_string: bytes,
                      headers: list[tuple[bytes, bytes]], body: bytes) -> tuple[int, list[tuple[bytes, bytes]], _Body]:
    """Start ``app`` on a request and return once it has answered ``http.response.start``:
    the status, the headers, and the body as the app sends it (iterate it, then ``aclose``).
    What ``InProcessTransport`` wraps for httpx; a watch reads it directly."""
    scope = _scope(method, raw_path, query_string, headers)
    chunks: asyncio.Queue[bytes | BaseException] = asyncio.Queue(_QUEUE_CHUNKS)
    disconnected = asyncio.Event()
    started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
    receive = _receiver(body, disconnected)

    async def send(message: dict[str, Any]) -> None:
        if disconnected.is_set():
            raise OSError("the in-process client disconnected")
        kind = message["type"]
        if kind == "http.response.start":
            started.set_result((message["status"], list(message.get("headers", ()))))
        elif kind == "http.response.body":
            data = message.get("body", b"")
            if data:
                await chunks.put(data)
            if not message.get("more_body", False):
                await chunks.put(_END)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        except Exception as e:  # handed to the reader, whichever side it is on
            if not started.done():
                started.set_exception(e)
            elif not disconnected.is_set():
                await chunks.put(e)  # aclose() drains, so this cannot wait forever
        except BaseException as e:  # cancelled: no waiting, end the reader if there is room
            if not started.done():
                started.set_exception(e)
            elif not chunks.full():
                chunks.put_nowait(_END)
            raise
        else:
            if not started.done():
                started.set_exception(RuntimeError("the app returned without a response"))

    task = asyncio.create_task(run(), name=f"in-process {method} {scope['path']}")
    try:
        status, response_headers = await started
    except BaseException:
        disconnected.set()
        with contextlib.suppress(BaseException):
            await task
        raise
    return status, response_headers, _Body(chunks, task, disconnected)


async def call(app: Any, method: str, path: str, query_string: bytes, headers: list[tuple[bytes, bytes]],
               body: bytes) -> tuple[int, bytes, bytes | None]:
    """One request with one answer (every verb but watch) straight into ``app``:
    the ASGI exchange alone, without httpx's request and response models, which
    cost about what the API server spends on a small write. Returns the status,
    the whole body and, for a 429 or a 5xx, its ``Retry-After`` header (None otherwise)."""
    scope = _scope(method, raw_path(path), query_string, headers)
    finished = asyncio.Event()
    receive = _receiver(body, finished)
    status = 0
    retry_after: bytes | None = None
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, retry_after
        if message["type"] == "http.response.start":
            status = message["status"]
            # (only a 429's or 5xx's headers are read: the hot path's 2xx pay the one comparison they paid before)
            if status >= 429 and (status == 429 or status >= 500):
                retry_after = next((v for k, v in message.get("headers", ()) if k.lower() == b"retry-after"), None)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    try:
        await app(scope, receive, send)
    finally:
        finished.set()
    if not status:
        raise RuntimeError(f"the in-process app answered {method} {path} with no response")
    return status, b"".join(chunks), retry_after


def raw_path(path: str) -> bytes:
    """A request path as it goes on the wire: percent-encoded where it is not ASCII (an object
    named ``ä``, a valid name for most kinds), as an HTTP client sends it; the app reads it
    back with ``unquote``. ASCII paths are sent as they are (``system:controller:x``)."""
    return path.encode() if path.isascii() else quote(path, safe="/%:@!$&'()*+,;=~").encode()


def _scope(method: str, raw_path: bytes, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": unquote(raw_path.decode("ascii")), "raw_path": raw_path,
            "query_string": query_string, "root_path": "", "headers": headers, "server": IN_PROCESS,
            "client": ("127.0.0.1", 0), "state": {}, WHOLE_BODY_SCOPE_KEY: True}


def _receiver(body: bytes, gone: asyncio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """The app's ``receive``: the whole body once, then ``http.disconnect`` when ``gone`` is set."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    return receive
