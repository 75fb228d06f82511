"""The client's HTTP/1.1 pool (client/wire.py) against small servers that misbehave
on purpose: closing kept-alive connections, chunked answers, silence, nobody listening.
(The pool against the real server, over TLS, is tests/client/test_client.py's
socket tests and every component test that runs ``controlplane`` processes.)"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from controlplane.client.wire import ConnectionPool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return head, body


class _Server:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def pools() -> AsyncIterator[list[ConnectionPool]]:
    made: list[ConnectionPool] = []
    yield made
    for p in made:
        await p.aclose()


def _pool(made: list[ConnectionPool], url: str, timeout: float = 5.0) -> ConnectionPool:
    p = ConnectionPool(url, headers={"User-Agent": "test"}, timeout=timeout)
    made.append(p)
    return p


async def test_keep_alive_reuses_one_connection_and_sends_the_body(pools: list[ConnectionPool]) -> None:
    server: _Server

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head, body = await _read_request(reader)
            server.requests.append(head)
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    server = _Server(echo)
    async with server as url:
        pool = _pool(pools, url)
        for i in range(5):
            status, body, _ = await pool.request("POST", f"/x?i={i}", b'{"n":%d}' % i, {"Accept": "application/json"})
            assert (status, body) == (201, b'{"n":%d}' % i)
        assert server.connections == 1
        assert server.requests[3].startswith(b"POST /x?i=3 HTTP/1.1\r\n")
        assert b"User-Agent: test\r\n" in server.requests[0] and b"Host: 127.0.0.1:" in server.requests[0]


async def test_chunked_answers_and_connection_close(pools: list[ConnectionPool]) -> None:
    server: _Server

    async def chunked_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     b"3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n")
        await writer.drain()

    server = _Server(chunked_then_close)
    async with server as url:
        pool = _pool(pools, url)
        assert await pool.request("GET", "/a", None, {}) == (200, b'{"a":1}', None)
        assert await pool.request("GET", "/b", None, {}) == (200, b'{"a":1}', None)
        assert server.connections == 2  # "Connection: close" is honoured


async def test_a_kept_alive_connection_the_server_closed_is_retried_once(pools: list[ConnectionPool]) -> None:
    server: _Server

    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, body = await _read_request(reader)
        server.requests.append(body)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        # keep-alive advertised, but the connection is dropped as an idle timeout would,
        # and a request already on its way is never read
        await asyncio.sleep(0.05)
        writer.transport.abort()

    server = _Server(one_answer_then_close)
    async with server as url:
        pool = _pool(pools, url)
        assert await pool.request("POST", "/a", b"1", {}) == (200, b"ok", None)
        await asyncio.sleep(0.02)  # the request below may race the close: either way one answer
        assert await pool.request("POST", "/b", b"2", {}) == (200, b"ok", None)
        assert server.requests == [b"1", b"2"]


async def test_failures_are_httpx_transport_errors(pools: list[ConnectionPool]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    with pytest.raises(httpx.ConnectError):
        await _pool(pools, f"http://127.0.0.1:{port}").request("GET", "/", None, {})

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(10)

    async with _Server(silent) as url:
        with pytest.raises(httpx.ReadTimeout):
            await _pool(pools, url, timeout=0.3).request("GET", "/", None, {})

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with _Server(garbage) as url:
        with pytest.raises(httpx.TransportError):
            await _pool(pools, url).request("GET", "/", None, {})

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()

    async with _Server(hang_up) as url:  # a fresh connection cut mid-answer: not retried
        with pytest.raises(httpx.ReadError):
            await _pool(pools, url).request("POST", "/", b"x", {})


async def test_concurrent_requests_stay_within_the_limit(pools: list[ConnectionPool]) -> None:
    server: _Server
    busy = 0
    peak = 0

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal busy, peak
        while True:
            await _read_request(reader)
            busy += 1
            peak = max(peak, busy)
            await asyncio.sleep(0.01)
            busy -= 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()

    server = _Server(slow)
    async with server as url:
        pool = ConnectionPool(url, headers={}, limit=4)
        pools.append(pool)
        answers = await asyncio.gather(*(pool.request("GET", f"/{i}", None, {}) for i in range(40)))
        assert answers == [(200, b"", None)] * 40
        assert peak <= 4 and server.connections <= 4


async def test_a_stream_hands_chunks_over_as_they_come_and_a_cut_is_an_error(pools: list[ConnectionPool]) -> None:
    sent = asyncio.Event()

    async def watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await sent.wait()  # the reader has the first chunk before the second exists
        writer.write(b"6\r\nsecond\r\n")
        if b"cut=1" in head:
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with _Server(watch) as url:
        pool = _pool(pools, url)
        async with pool.stream("GET", "/w", {}) as (status, chunks):
            assert status == 200
            got = []
            async for chunk in chunks:
                got.append(chunk)
                sent.set()
            assert got == [b"first", b"second"]
        sent.clear()

        async def read_cut() -> None:
            async with pool.stream("GET", "/w?cut=1", {}) as (_, cut):
                async for _ in cut:
                    sent.set()

        with pytest.raises(httpx.RemoteProtocolError):
            await read_cut()


async def test_a_429_of_flow_control_is_sent_again_and_a_budgets_429_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Client.request`` over the pool, as client-go: a request kube-apiserver's flow control
    could not take (429, plain text, ``Retry-After``) is sent again after the header's seconds
    (shortened here), up to ten times; a 429 without the header is not (client-go's
    ``checkWait``), nor a 429 ``Status`` naming no wait (a PodDisruptionBudget refusing an
    eviction): the caller's at once."""
    from controlplane.client.client import ApiError, Client

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("controlplane.client.client.asyncio.sleep", no_wait)
    busy = b"Too many requests, please try again later.\n"
    budget = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,'
              b'"message":"Cannot evict pod as it would violate the pod\'s disruption budget.",'
              b'"details":{"causes":[{"reason":"DisruptionBudget"}]}}')
    text, json = b"text/plain", b"application/json"
    answers: list[tuple[int, bytes, bytes, bytes | None]] = [
        (429, busy, text, b"3"), (429, busy, text, b"1"), (200, b'{"kind":"Pod"}', json, None),
        (429, budget, json, None), (429, busy, text, None)] + [(429, busy, text, b"2")] * 11

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _read_request(reader)
            code, body, kind, retry = answers.pop(0)
            wait = b"retry-after: %b\r\n" % retry if retry is not None else b""
            writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %b\r\n%bContent-Length: %d\r\n\r\n%b"
                         % (code, kind, wait, len(body), body))
            await writer.drain()

    async with _Server(handler) as url, Client(url) as c:
        assert await c.get("/api/v1/namespaces/default/pods/p") == {"kind": "Pod"}
        assert waits == [3.0, 1.0]  # the header's seconds, each time
        with pytest.raises(ApiError) as refused:
            await c.create("/api/v1/namespaces/default/pods/p/eviction", {"kind": "Eviction"})
        assert refused.value.reason == "TooManyRequests" and waits == [3.0, 1.0]
        with pytest.raises(ApiError) as unnamed:  # no Retry-After: not retried
            await c.get("/api/v1/namespaces/default/pods/p")
        assert unnamed.value.code == 429 and unnamed.value.retry_after is None and len(waits) == 2
        with pytest.raises(ApiError) as busy_still:  # ten tries more, then the 429 is the caller's
            await c.get("/api/v1/namespaces/default/pods/p")
        assert busy_still.value.code == 429 and busy_still.value.retry_after == "2"
        assert waits == [3.0, 1.0, *[2.0] * 10] and answers == []


async def test_the_in_process_client_waits_the_retry_after_of_a_429(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process transport keeps a 429's ``Retry-After`` (only a 429's headers are read):
    the client waits its seconds, as over a socket."""
    from controlplane.client.client import Client

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("controlplane.client.client.asyncio.sleep", no_wait)
    answers = [(429, [(b"retry-after", b"4")]), (429, [(b"retry-after", b"7")]), (200, [])]

    async def app(scope: dict[str, object], receive: object, send: Callable[[dict[str, object]], Awaitable[None]],
                  ) -> None:
        code, headers = answers.pop(0)
        body = b"Too many requests, please try again later.\n" if code == 429 else b'{"kind":"Pod"}'
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async with Client.in_process(app) as c:
        assert await c.get("/api/v1/namespaces/default/pods/p") == {"kind": "Pod"}
    assert waits == [4.0, 7.0]


async def test_a_5xx_naming_a_wait_is_sent_again_as_client_go_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go's ``checkWait`` takes any code from 500 up as it takes a 429: a 503 or a 504
    with ``Retry-After`` (the 504 of a resourceVersion the server has not reached, whose
    ``Status`` names ``retryAfterSeconds``) is sent again after the header's seconds; a 500
    without one, or a 409 with one, is the caller's at once."""
    from controlplane.client.client import ApiError, Client

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("controlplane.client.client.asyncio.sleep", no_wait)
    json = b"application/json"
    too_large = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Timeout: Too large resource '
                 b'version: 9, current: 5","reason":"Timeout","details":{"causes":[{"reason":'
                 b'"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},'
                 b'"code":504}')
    internal = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}'
    conflict = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409}'
    answers: list[tuple[int, bytes, bytes | None]] = [
        (503, b"unavailable", b"2"), (504, too_large, b"1"), (200, b'{"kind":"Pod"}', None),
        (500, internal, None), (409, conflict, b"3")]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _read_request(reader)
            code, body, retry = answers.pop(0)
            wait = b"retry-after: %b\r\n" % retry if retry is not None else b""
            writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %b\r\n%bContent-Length: %d\r\n\r\n%b"
                         % (code, json, wait, len(body), body))
            await writer.drain()

    async with _Server(handler) as url, Client(url) as c:
        assert await c.get("/api/v1/namespaces/default/pods/p", resourceVersion="9") == {"kind": "Pod"}
        assert waits == [2.0, 1.0]
        with pytest.raises(ApiError) as internal_error:
            await c.get("/api/v1/namespaces/default/pods/p")
        assert internal_error.value.code == 500 and waits == [2.0, 1.0]
        with pytest.raises(ApiError) as conflicted:
            await c.update("/api/v1/namespaces/default/pods/p", {"kind": "Pod"})
        assert conflicted.value.code == 409 and conflicted.value.retry_after == "3" and waits == [2.0, 1.0]
        assert answers == []


async def test_the_in_process_client_waits_the_retry_after_of_a_5xx(monkeypatch: pytest.MonkeyPatch) -> None:
    from controlplane.client.client import Client

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("controlplane.client.client.asyncio.sleep", no_wait)
    answers = [(503, [(b"retry-after", b"5")]), (200, [])]

    async def app(scope: dict[str, object], receive: object, send: Callable[[dict[str, object]], Awaitable[None]],
                  ) -> None:
        code, headers = answers.pop(0)
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": b"busy" if code == 503 else b'{"kind":"Pod"}'})

    async with Client.in_process(app) as c:
        assert await c.get("/api/v1/namespaces/default/pods/p") == {"kind": "Pod"}
    assert waits == [5.0]
