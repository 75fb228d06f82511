"""Single-answer HTTP/1.1 requests over a pool of keep-alive connections.

httpx spends about a millisecond of Python per request on its request and
response models, its connection pool (which scans every waiting request each
time a connection frees) and anyio; an external scheduler binding a few
hundred pods a second spent nine tenths of its time there. This pool writes
the request line and headers itself and parses answers with httptools (the C
parser uvicorn uses): the cost of a request is then the server's.

It serves ``Client``'s unary verbs from a pool, and each watch (``stream``) on
a connection of its own, chunk by chunk as the server sends them.

Failures are httpx's exception types (``ConnectError``, ``ReadError``,
``WriteError``, ``RemoteProtocolError``, ``ReadTimeout``), which callers
already catch as ``httpx.TransportError``. A request that finds its reused
keep-alive connection closed before any byte of the answer (the server timed
it out meanwhile) is sent once more on a fresh connection, as Go's net/http
does: the server never read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TypeVar, cast
from urllib.parse import urlsplit

import httptools
import httpx

__all__ = ["ConnectionPool"]


P = TypeVar("P", bound=asyncio.Protocol)


class _Answer:
    __slots__ = ("body", "done", "keep_alive", "retry_after", "status")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status = 0
        self.retry_after: bytes | None = None  # the answer's Retry-After header
        self.body: list[bytes] = []
        self.keep_alive = True
        self.done: asyncio.Future[None] = loop.create_future()


class _Parsed(asyncio.Protocol):
    """A socket whose bytes go to an httptools response parser calling back this object;
    ``lost`` resolves once the socket is closed. Subclasses say what a failure does."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._parser = httptools.HttpResponseParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {e}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.lost.done():
            self.lost.set_result(None)

    def _fail(self, error: Exception) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Connection(_Parsed):
    """One socket; at most one request on it at a time (no pipelining)."""

    def __init__(self) -> None:
        super().__init__()
        self.received = 0  # bytes of the current answer
        self._answer: _Answer | None = None

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._fail(httpx.ReadError(f"the server closed the connection{f': {exc}' if exc else ''}"))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        # (every header of every answer comes here: a length compared first, the name only then)
        if len(name) == 11 and name.lower() == b"retry-after" and self._answer is not None:
            self._answer.retry_after = value

    def on_body(self, body: bytes) -> None:
        if self._answer is not None:
            self._answer.body.append(body)

    def on_message_complete(self) -> None:
        answer = self._answer
        if answer is None or answer.done.done():
            return
        answer.status = self._parser.get_status_code()
        answer.keep_alive = self._parser.should_keep_alive()
        self._answer = None
        answer.done.set_result(None)

    # -- the pool's side
    def send(self, data: bytes, answer: _Answer) -> None:
        assert self.transport is not None
        self._answer = answer
        self.received = 0
        self.transport.write(data)

    def _fail(self, error: Exception) -> None:
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done.done():
            answer.done.set_exception(error)


class _Stream(_Parsed):
    """One streamed answer (a watch) on a connection of its own, handed over chunk by
    chunk; reading pauses while ``_HIGH_WATER`` chunks wait for the reader, so a slow
    reader slows the server's writes rather than growing memory."""

    def __init__(self) -> None:
        super().__init__()
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._chunks: deque[bytes] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._ended = False
        self._error: Exception | None = None
        self._paused = False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._ended:
            self._fail(httpx.RemoteProtocolError("the server closed the connection before the answer's end"))
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        if not self.status.done():
            self.status.set_result(self._parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        if len(self._chunks) >= _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._ended = True
        self._wake()

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        if not self.status.done():
            self.status.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def body(self) -> AsyncIterator[bytes]:
        while True:
            if self._chunks:
                chunk = self._chunks.popleft()
                if self._paused and len(self._chunks) <= _HIGH_WATER // 4 and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
                yield chunk
                continue
            if self._ended:
                return
            if self._error is not None:
                raise self._error
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup


_HIGH_WATER = 256


class ConnectionPool:
    """Up to ``limit`` connections to the server of ``base_url`` (http or https)."""

    def __init__(self, base_url: str, *, headers: dict[str, str], verify: ssl.SSLContext | bool = True,
                 timeout: float = 30.0, limit: int = 100) -> None:
        url = urlsplit(base_url)
        self._tls = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._tls else 80)
        self._prefix = url.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        if self._tls:
            if isinstance(verify, ssl.SSLContext):
                self._ssl = verify
            else:
                self._ssl = ssl.create_default_context()
                if not verify:
                    self._ssl.check_hostname = False
                    self._ssl.verify_mode = ssl.CERT_NONE
        host = url.netloc.rsplit("@", 1)[-1]
        # the User-Agent and the credentials apart: a request may name its own (``Client.as_agent``, ``as_user``)
        self._agent = f"User-Agent: {headers.get('User-Agent', 'controlplane-client')}\r\n"
        self._authorization = f"Authorization: {headers['Authorization']}\r\n" if "Authorization" in headers else ""
        self._head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, **headers}.items()
                             if k != "User-Agent" and k != "Authorization").encode("latin-1")
        self.timeout = timeout
        self._idle: deque[_Connection] = deque()
        self._slots = asyncio.Semaphore(limit)

    async def request(self, method: str, target: str, body: bytes | None,
                      headers: dict[str, str]) -> tuple[int, bytes, bytes | None]:
        """``target`` is the path and query. Returns the status, the whole body and the
        ``Retry-After`` header (None without one)."""
        data = self._request_head(method, target, {**headers, "Content-Length": str(len(body or b""))}) + (body or b"")
        try:
            async with asyncio.timeout(self.timeout), self._slots:
                for attempt in range(2):
                    conn, reused = await self._connection()
                    answer = _Answer(asyncio.get_running_loop())
                    try:
                        conn.send(data, answer)
                        await answer.done
                    except httpx.TransportError:
                        conn.close()
                        if reused and conn.received == 0 and attempt == 0:
                            continue  # a keep-alive connection the server had closed: it never read this
                        raise
                    except BaseException:  # cancelled or timed out mid-answer: the socket is unusable
                        conn.close()
                        raise
                    if answer.keep_alive and not conn.closed:
                        self._idle.append(conn)
                    else:
                        conn.close()
                    return answer.status, b"".join(answer.body), answer.retry_after
        except TimeoutError as e:
            raise httpx.ReadTimeout(f"no answer to {method} {target} in {self.timeout} s") from e
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def stream(self, method: str, target: str,
                     headers: dict[str, str]) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
        """A request whose answer is read as it comes (a watch), on a connection of its
        own, closed on leaving. Yields the status and the body's chunks. Only the
        connection and the answer's head are bounded by the timeout."""
        data = self._request_head(method, target, headers)
        stream: _Stream | None = None
        try:
            async with asyncio.timeout(self.timeout):
                stream = await self._connect(_Stream)
                assert stream.transport is not None
                stream.transport.write(data)
                status = await stream.status
        except TimeoutError as e:
            if stream is not None:
                stream.close()
            raise httpx.ReadTimeout(f"no answer to {method} {target} in {self.timeout} s") from e
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        try:
            yield status, stream.body()
        finally:
            stream.close()
            # (a cancellation here goes on up: suppressing it would let a cancelled task run on)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await asyncio.shield(stream.lost)

    async def _connection(self) -> tuple[_Connection, bool]:
        """An idle connection (True), else a new one (False). The caller holds a slot,
        so idle plus busy connections never exceed the limit."""
        while self._idle:
            conn = self._idle.pop()  # the most recent: the least likely to have timed out
            if not conn.closed:
                return conn, True
        return await self._connect(_Connection), False

    async def _connect(self, protocol: Callable[[], P]) -> P:
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                protocol, self._host, self._port, ssl=self._ssl,
                server_hostname=self._host if self._ssl is not None else None)
        except (OSError, ssl.SSLError) as e:
            raise httpx.ConnectError(f"cannot connect to {self._host}:{self._port}: {e}") from e
        return conn

    def _request_head(self, method: str, target: str, headers: dict[str, str]) -> bytes:
        """The request line and headers (the pool's, then ``headers``), up to the blank line."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if "User-Agent" not in headers:
            extra = self._agent + extra
        if "Authorization" not in headers:
            extra = self._authorization + extra
        return b"".join([f"{method} {self._prefix}{target} HTTP/1.1\r\n".encode("latin-1"), self._head,
                         extra.encode("latin-1"), b"\r\n"])

    async def aclose(self) -> None:
        """Close the idle connections and wait until their sockets are (an event loop that
        ends right after would otherwise leave them to the garbage collector)."""
        closing = []
        while self._idle:
            conn = self._idle.pop()
            conn.close()
            closing.append(conn.lost)
        if closing:
            await asyncio.wait(closing, timeout=1.0)
