"""A lean HTTP/1.1 transport for ``httpx.AsyncClient``, for talking to etcd's gateway.

httpx's default transport (httpcore, h11, anyio) is general and costs for it:
measured against etcd on a 2-core machine, about 2 ms of CPU per request,
ten times what the socket work itself takes, and its connection pool grows
slower as more requests queue. The gateway is a Go ``net/http`` server on
loopback or a LAN; speaking to it needs keep-alive connections, one write per
request, and responses framed by ``Content-Length`` or chunked encoding. This
transport does that over asyncio streams and leaves the rest (URLs, headers,
the ``Response`` API) to httpx.

Two modes, one per client: ``live_bodies=False`` reads each response whole and
returns its connection to the pool at once (unary calls);
``live_bodies=True`` hands the body over as it arrives and closes the
connection with the response (watch streams, which never end on their own).
Failures surface as httpx's own exceptions, so callers handle one family.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = ["GatewayTransport"]

_HEAD_END = b"\r\n\r\n"
_CRLF = b"\r\n"


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float, expiry: float) -> bool:
        # a peer that closed an idle connection has left EOF in the reader by now
        return not (self.reader.at_eof() or self.writer.is_closing() or now - self.idle_since > expiry)

    def close(self) -> None:
        self.writer.close()


class _LiveBody(httpx.AsyncByteStream):
    """A response body read as it arrives; its connection dies with it."""

    def __init__(self, conn: _Connection, framing: tuple[str, int], release: Any) -> None:
        self._conn = conn
        self._framing = framing
        self._release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in _body(self._conn.reader, self._framing):
                yield chunk
        except asyncio.LimitOverrunError as e:
            raise httpx.RemoteProtocolError(f"malformed HTTP response: {e}") from e
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            raise _read_error(e) from e

    async def aclose(self) -> None:
        if self._release is not None:
            self._conn.close()
            self._release()
            self._release = None


def _read_error(e: BaseException) -> httpx.TransportError:
    if isinstance(e, asyncio.IncompleteReadError):
        return httpx.RemoteProtocolError("the server closed the connection mid-response")
    if isinstance(e, ValueError):
        return httpx.RemoteProtocolError(f"malformed HTTP response: {e}")
    return httpx.ReadError(str(e) or type(e).__name__)


async def _body(reader: asyncio.StreamReader, framing: tuple[str, int]) -> AsyncIterator[bytes]:
    kind, length = framing
    if kind == "length":
        if length:
            yield await reader.readexactly(length)
        return
    if kind == "chunked":
        while True:
            line = await reader.readuntil(_CRLF)
            size = int(line.split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(_CRLF) != _CRLF:  # trailers (Go sends gRPC's here)
                    pass
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    while data := await reader.read(65536):  # "eof": the body ends with the connection
        yield data


def _parse_head(head: bytes) -> tuple[int, list[tuple[bytes, bytes]], tuple[str, int], bool]:
    lines = head[:-4].split(_CRLF)
    status = int(lines[0].split(b" ", 2)[1])
    headers = []
    framing: tuple[str, int] = ("eof", 0)
    keep_alive = True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip(), value.strip()
        headers.append((name, value))
        lower = name.lower()
        if lower == b"content-length" and framing[0] != "chunked":
            framing = ("length", int(value))
        elif lower == b"transfer-encoding" and b"chunked" in value.lower():
            framing = ("chunked", 0)
        elif lower == b"connection" and value.lower() == b"close":
            keep_alive = False
    if status in (204, 304) or 100 <= status < 200:
        framing = ("length", 0)
    return status, headers, framing, keep_alive and framing[0] != "eof"


class GatewayTransport(httpx.AsyncBaseTransport):
    """Keep-alive HTTP/1.1 to a few origins, at most ``max_connections`` at once (None: no cap)."""

    def __init__(self, *, max_connections: int | None = 128, keepalive_expiry: float = 30.0,
                 live_bodies: bool = False) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._slots = asyncio.Semaphore(max_connections) if max_connections else None
        self._expiry = keepalive_expiry
        self._live = live_bodies
        self._open: set[_Connection] = set()
        self._closed = False

    def _release_slot(self) -> None:
        if self._slots is not None:
            self._slots.release()

    async def _acquire_slot(self, timeout: float | None) -> None:
        if self._slots is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(f"no free connection within {timeout}s") from None

    def _take_idle(self, origin: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self._expiry):
                return conn
            self._discard(conn)
        return None

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._open.discard(conn)

    async def _connect(self, origin: tuple[str, int], timeout: float | None) -> _Connection:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(*origin, limit=1 << 20)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {origin[0]}:{origin[1]} timed out") from None
        except OSError as e:
            raise httpx.ConnectError(f"cannot connect to {origin[0]}:{origin[1]}: {e}") from e
        conn = _Connection(reader, writer)
        self._open.add(conn)
        return conn

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("the transport is closed")
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.host, url.port or 80)
        await self._acquire_slot(timeouts.get("pool"))
        conn: _Connection | None = None
        reusable = handed_over = False
        try:
            conn = self._take_idle(origin) or await self._connect(origin, timeouts.get("connect"))
            content = request.content  # the gateway's requests are small, whole JSON documents
            lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), url.raw_path)]
            lines.extend(b"%s: %s" % (k, v) for k, v in request.headers.raw)
            lines.append(b"")
            lines.append(content)
            try:
                conn.writer.write(_CRLF.join(lines))  # one write: one segment for small requests
            except OSError as e:
                raise httpx.WriteError(str(e)) from e
            try:
                async with asyncio.timeout(None if self._live else timeouts.get("read")):
                    status, headers, framing, keep_alive = _parse_head(await conn.reader.readuntil(_HEAD_END))
                    if self._live:
                        body = _LiveBody(conn, framing, self._live_done(conn))
                        handed_over = True  # the body owns the connection and the slot now
                        return httpx.Response(status, headers=headers, stream=body)
                    content = b"".join([chunk async for chunk in _body(conn.reader, framing)])
            except TimeoutError:
                raise httpx.ReadTimeout("etcd did not answer in time") from None
            except (asyncio.LimitOverrunError, IndexError) as e:
                raise httpx.RemoteProtocolError(f"malformed HTTP response: {e}") from e
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                raise _read_error(e) from e
            if keep_alive:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(conn)
                reusable = True
            return httpx.Response(status, headers=headers, stream=httpx.ByteStream(content))
        finally:
            if not handed_over:
                if conn is not None and not reusable:  # failed, cancelled or closing: state unknown
                    self._discard(conn)
                self._release_slot()

    def _live_done(self, conn: _Connection) -> Any:
        def done() -> None:
            self._open.discard(conn)
            self._release_slot()
        return done

    async def aclose(self) -> None:
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
