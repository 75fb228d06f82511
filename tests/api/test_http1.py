"""The API server's HTTP/1.1 protocol (controlplane/api/http1.py): framing, pipelining,
request bodies, flow control and failures, first against a recording transport (what
is written, in how many writes), then over a real socket under uvicorn's server."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
import weakref
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from controlplane.api import http1
from controlplane.api.http1 import HIGH_WATER, MAX_HEAD, RECEIVED_SCOPE_KEY, ServerProtocol
from tests.front_socket import serving

App = Any


class RecordingTransport:
    """What the protocol writes, one entry per ``write`` call."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.reading = True
        self.pauses = 0
        self.proto: ServerProtocol | None = None

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            assert self.proto is not None
            asyncio.get_running_loop().call_soon(self.proto.connection_lost, None)

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 6443), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def is_closed(self) -> bool:  # (a call, so that mypy does not narrow the flag across awaits)
        return self.closed

    def is_reading(self) -> bool:
        return self.reading

    @property
    def output(self) -> bytes:
        return b"".join(self.writes)


def connect(app: App, keep_alive_timeout: float = 90.0) -> tuple[ServerProtocol, RecordingTransport, Any]:
    state = SimpleNamespace(connections=set(), tasks=set(), default_headers=[(b"date", b"Tue, 01 Dec 2026")],
                            total_requests=0)
    config = SimpleNamespace(loaded=True, loaded_app=app, timeout_keep_alive=keep_alive_timeout, root_path="")
    proto = ServerProtocol(config, state, {})
    transport = RecordingTransport()
    transport.proto = proto
    proto.connection_made(transport)  # type: ignore[arg-type]
    return proto, transport, state


async def settle(state: Any) -> None:
    """Until every request task of the connection has finished."""
    for _ in range(200):
        await asyncio.sleep(0)
        if not state.tasks:
            return
    await asyncio.wait_for(asyncio.gather(*state.tasks, return_exceptions=True), 5)


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split written bytes into (status, headers, body) by their framing."""
    out = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        code = int(status_line.split()[1])
        if code == 100:
            continue
        if "content-length" in headers:
            n = int(headers["content-length"])
            body, data = data[:n], data[n:]
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, data = data.partition(b"\r\n")
                size = int(size_line, 16)
                chunk, data = data[:size], data[size + 2:]
                if size == 0:
                    break
                body += chunk
        else:
            body, data = data, b""
        out.append((code, headers, body))
    return out


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the method, path, query and the whole request body, content-length framed."""
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    out = b"%s %s?%s %s" % (scope["method"].encode(), scope["path"].encode(), scope["query_string"], body)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(out))]})
    await send({"type": "http.response.body", "body": out})


async def test_a_response_of_known_length_is_one_write() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"GET /api/v1/pods?limit=5 HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    assert len(transport.writes) == 1
    [(code, headers, body)] = responses(transport.output)
    assert (code, body) == (200, b"GET /api/v1/pods?limit=5 ")
    assert headers["date"] == "Tue, 01 Dec 2026" and headers["content-type"] == "text/plain"
    assert not transport.closed  # kept alive


async def test_every_answer_has_an_audit_id_the_requests_own_if_it_sent_one() -> None:
    """As upstream's WithAuditInit: auditing on or off, a response carries ``Audit-Id``, a
    new version 4 UUID for each request unless the request sent its own ``Audit-ID``."""
    proto, transport, state = connect(echo)
    proto.data_received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
                        b"GET /c HTTP/1.1\r\nHost: x\r\nAudit-ID: mine-1\r\n\r\n")
    await settle(state)
    first, second, third = (headers["audit-id"] for _, headers, _ in responses(transport.output))
    assert uuid.UUID(first).version == 4 and uuid.UUID(second).version == 4 and first != second
    assert third == "mine-1"


async def test_an_app_that_set_its_audit_id_is_not_given_another() -> None:
    async def audited(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": [(b"Audit-Id", b"the-app's")]})
        await send({"type": "http.response.body", "body": b""})

    proto, transport, state = connect(audited)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    assert transport.output.lower().count(b"audit-id") == 1 and b"Audit-Id: the-app's" in transport.output


async def test_a_streamed_response_is_chunked_and_written_as_it_comes() -> None:
    release = asyncio.Event()

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"type":"ADDED"}\n', "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b'{"type":"DELETED"}\n', "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    proto, transport, state = connect(stream)
    proto.data_received(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(transport.writes) == 2  # the head at once (a watch has no length), then the first event
    assert b"transfer-encoding: chunked" in transport.writes[0]
    release.set()
    await settle(state)
    [(code, _, body)] = responses(transport.output)
    assert code == 200 and body == b'{"type":"ADDED"}\n{"type":"DELETED"}\n'


async def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    running: list[str] = []

    async def slow_first(scope: Any, receive: Any, send: Any) -> None:
        running.append(scope["path"])
        assert len(running) - len(finished) == 1  # never two at once on one connection
        if scope["path"] == "/first":
            await asyncio.sleep(0.01)
        await echo(scope, receive, send)
        finished.append(scope["path"])

    finished: list[str] = []
    proto, transport, state = connect(slow_first)
    proto.data_received(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
                        b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                        b"GET /third HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not transport.reading  # paused while requests wait
    for _ in range(100):
        await asyncio.sleep(0.005)
        if len(finished) == 3:
            break
    await settle(state)
    assert [b for _, _, b in responses(transport.output)] == [b"GET /first? ", b"POST /second? abc", b"GET /third? "]
    assert transport.is_reading() and not transport.is_closed()


async def test_a_request_is_stamped_when_taken_up_not_when_its_task_first_runs() -> None:
    """The start of a request's latency (api/rest.py's request metrics): when the server took it
    up, so a request that waited for a busy event loop counts the wait, as upstream's counts from
    the moment the apiserver gets the request; a pipelined request is taken up when the one
    before it is answered."""
    called: dict[str, tuple[float, float]] = {}
    answered: dict[str, float] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called[scope["path"]] = (scope[RECEIVED_SCOPE_KEY], time.perf_counter())
        await asyncio.sleep(0.05)
        await echo(scope, receive, send)
        answered[scope["path"]] = time.perf_counter()

    proto, _transport, state = connect(app)
    proto.data_received(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)  # the loop is busy elsewhere before the request's task can run
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(answered) == 2:
            break
    await settle(state)
    received, ran = called["/first"]
    assert ran - received >= 0.2
    received2, _ = called["/second"]
    assert answered["/first"] - 0.01 <= received2 <= called["/second"][1]


async def test_a_response_waiting_for_a_slow_reader_is_counted() -> None:
    """A send while the transport's buffer is over its high-water mark waits for it to drain,
    and the wait is counted (controlplane_http_write_blocked_*): a watch event's delivery
    latency includes such waits, and these tell them from the server's own work."""
    from controlplane.metrics import HTTP_WRITE_BLOCKED_SECONDS, HTTP_WRITE_BLOCKS

    blocks0, seconds0 = HTTP_WRITE_BLOCKS._value.get(), HTTP_WRITE_BLOCKED_SECONDS._value.get()
    sent = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await send({"type": "http.response.body", "body": b"second", "more_body": False})
        sent.set()

    proto, transport, state = connect(app)
    proto.pause_writing()  # the client is not reading
    proto.data_received(b"GET /w HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(0.1)
    assert not sent.is_set() and b"first" not in transport.output
    proto.resume_writing()
    await asyncio.wait_for(sent.wait(), 5)
    await settle(state)
    assert responses(transport.output)[0][2] == b"firstsecond"
    assert HTTP_WRITE_BLOCKS._value.get() == blocks0 + 1
    assert HTTP_WRITE_BLOCKED_SECONDS._value.get() - seconds0 >= 0.09


async def test_a_large_body_arrives_whole_with_reading_paused_past_the_high_water_mark() -> None:
    got: list[int] = []

    async def count(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            await asyncio.sleep(0)  # a slow reader
            m = await receive()
            body += m["body"]
            if not m["more_body"]:
                break
        got.append(len(body))
        assert body == payload
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    payload = bytes(range(256)) * (4 * HIGH_WATER // 256)
    proto, transport, state = connect(count)
    proto.data_received(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(payload))
    for i in range(0, len(payload), 3 * HIGH_WATER // 2):
        proto.data_received(payload[i:i + 3 * HIGH_WATER // 2])
    await settle(state)
    assert got == [len(payload)]
    assert transport.pauses >= 1 and transport.reading
    assert responses(transport.output)[0][0] == 201


async def test_a_chunked_request_body_is_reassembled() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"PUT /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    await asyncio.sleep(0)
    proto.data_received(b"2\r\nde\r\n0\r\n\r\n")
    await settle(state)
    assert responses(transport.output)[0][2] == b"PUT /c? abcde"


async def test_expect_100_continue_is_answered_when_the_app_asks_for_the_body() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    for _ in range(5):
        await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    proto.data_received(b"ok")
    await settle(state)
    assert responses(transport.output)[0][2] == b"POST /e? ok"


async def test_an_answer_before_the_body_is_read_closes_the_connection() -> None:
    async def refuse(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"no"})

    proto, transport, state = connect(refuse)
    proto.data_received(b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
    await settle(state)
    [(code, headers, body)] = responses(transport.output)
    assert (code, body, headers["connection"]) == (401, b"no", "close")
    assert not transport.is_closed()  # the rest of the body is read first, and thrown away
    proto.data_received(b"x" * 993 + b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")  # what follows is not served
    await asyncio.sleep(0)
    assert transport.is_closed() and proto.closed
    await settle(state)
    assert len(responses(transport.output)) == 1



async def test_a_refused_body_is_read_on_only_so_long_and_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    monkeypatch.setattr(http1, "DISCARD_SECONDS", 0.05)
    slow, slow_transport, state = connect(refuse)  # a client that stops sending
    slow.data_received(b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
    await settle(state)
    assert not slow_transport.is_closed()
    await asyncio.sleep(0.1)
    assert slow_transport.is_closed()
    monkeypatch.setattr(http1, "DISCARD_SECONDS", 10.0)
    monkeypatch.setattr(http1, "DISCARD_BYTES", 1000)
    big, big_transport, state = connect(refuse)  # one that sends more than is worth reading
    big.data_received(b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial")
    await settle(state)
    big.data_received(b"x" * 900)
    assert not big_transport.is_closed()
    big.data_received(b"x" * 200)
    assert big_transport.is_closed()

async def test_a_lost_connection_wakes_receive_and_later_sends_write_nothing() -> None:
    seen: list[str] = []

    async def watch(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the (empty) body
        await send({"type": "http.response.start", "status": 200, "headers": []})
        seen.append((await receive())["type"])  # until the client goes
        await send({"type": "http.response.body", "body": b"late", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    proto, transport, state = connect(watch)
    proto.data_received(b"GET /w?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    for _ in range(5):
        await asyncio.sleep(0)
    writes = len(transport.writes)
    proto.connection_lost(None)
    await settle(state)
    assert seen == ["http.disconnect"]
    assert len(transport.writes) == writes and not state.connections


async def test_a_closed_connection_is_freed_by_reference_counting_not_the_cyclic_collector() -> None:
    """A closed connection's protocol (with a TLS connection's buffers behind it) is freed as it
    closes. Its parser held the protocol's callbacks while the protocol held the parser: a soak
    of clients that drop their connections kept every closed one until a full collection, rare
    in this server (gcsettings), a few hundred of them and their TLS objects at a time."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    gc.disable()
    try:
        proto, transport, state = connect(app)
        proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await settle(state)
        assert b"ok" in transport.output
        proto.connection_lost(None)
        transport.proto = None  # (this fake's own reference: a real transport drops its protocol once closed)
        gone = weakref.ref(proto)
        del proto
        assert gone() is None
    finally:
        gc.enable()


async def test_unparseable_requests_get_400_and_the_connection_closes() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"NOT HTTP AT ALL\r\n\r\n")
    await settle(state)
    assert responses(transport.output)[0][0] == 400 and transport.closed


async def test_a_body_that_stops_parsing_gets_400_for_its_request() -> None:
    # a chunk size that is no hex number: the request reading its body is answered, once
    # (the connection was closed without a word)
    async def reading(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    proto, transport, state = connect(reading)
    proto.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n")
    await asyncio.sleep(0)
    proto.data_received(b"zz\r\nxx\r\n0\r\n\r\n")
    await settle(state)
    assert [code for code, _, _ in responses(transport.output)] == [400] and transport.closed


async def test_a_request_head_over_the_limit_gets_431() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n")
    for _ in range(MAX_HEAD // 100_000 + 3):
        proto.data_received(b"X-Filler: " + b"a" * 100_000 + b"\r\n")
        if transport.closed:
            break
    await settle(state)
    assert responses(transport.output)[0][0] == 431 and transport.closed


async def test_a_header_value_with_a_line_break_is_a_500_never_a_split_response() -> None:
    async def splitting(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"warning", b'299 - "x"\r\nset-cookie: evil=1'), (b"content-length", b"0")]})

    proto, transport, state = connect(splitting)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    [(code, headers, _)] = responses(transport.output)
    assert code == 500 and "set-cookie" not in headers and transport.closed


async def test_an_app_that_raises_gets_a_500() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise ValueError("a bug")

    proto, transport, state = connect(broken)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    assert responses(transport.output)[0][0] == 500 and transport.closed


async def test_http10_gets_no_chunked_framing_and_the_connection_closes() -> None:
    async def unsized(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one ", "more_body": True})
        await send({"type": "http.response.body", "body": b"two"})

    proto, transport, state = connect(unsized)
    proto.data_received(b"GET / HTTP/1.0\r\n\r\n")
    await settle(state)
    head, _, body = transport.output.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head and b"connection: close" in head and body == b"one two"
    await asyncio.sleep(0)
    assert transport.closed


async def test_an_upgrade_request_is_answered_plainly_with_connection_close() -> None:
    """An upgrade the app answers plainly (kubectl's SPDY exec gets a Status): the answer says
    the connection closes, so that no client sends its next request on it."""
    proto, transport, state = connect(echo)
    proto.data_received(b"GET /x/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                        b"Sec-WebSocket-Version: 13\r\n\r\nwhat a websocket would send")
    await settle(state)
    [(code, headers, body)] = responses(transport.output)
    assert (code, body, headers["connection"]) == (200, b"GET /x/exec? ", "close")
    await asyncio.sleep(0)
    assert transport.closed


H2C = (b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAEAAEAAAAIAAAAAAAMAAAAAAAQBAAAAAAUAAEAAAAYABgAA\r\n"
       b"Upgrade: h2c\r\n")


async def test_an_upgrade_to_h2c_is_ignored_and_the_body_read_as_go_does() -> None:
    """Java's HttpClient (fabric8's) asks for h2c on every request over cleartext, its POSTs'
    bodies too; httptools stops at such a head. The request is read as HTTP/1.1 all the same,
    body and all, in whatever pieces it comes, and the connection stays open for the next."""
    proto, transport, state = connect(echo)
    request = (b"POST /a HTTP/1.1\r\nHost: x\r\n" + H2C + b"Content-Length: 11\r\n\r\nhello world"
               b"PUT /b HTTP/1.1\r\nHost: x\r\n" + H2C + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
               b"GET /c HTTP/1.1\r\nHost: x\r\n" + H2C + b"\r\n")
    for at in range(0, len(request), 7):
        proto.data_received(request[at:at + 7])
        await asyncio.sleep(0)
    await settle(state)
    got = responses(transport.output)
    assert [(code, body) for code, _, body in got] == [(200, b"POST /a? hello world"), (200, b"PUT /b? abc"),
                                                       (200, b"GET /c? ")]
    assert all("connection" not in headers for _, headers, _ in got) and not transport.closed


async def test_a_101_goes_out_unframed_and_its_body_ends_the_connection() -> None:
    """An app that switches protocols (a websocket exec told of its failed dial, api/streaming.py):
    no length, no chunks, no ``connection: close`` beside the app's ``Upgrade``; the head and the
    first part of the body in one write, the rest as sent; what the client sends after its head is
    not parsed as HTTP; the body's end closes the connection."""
    async def switching(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 101,
                    "headers": [(b"upgrade", b"websocket"), (b"connection", b"Upgrade"), (b"content-length", b"3")]})
        await send({"type": "http.response.body", "body": b"\x82\x01\x01", "more_body": True})
        await send({"type": "http.response.body", "body": b"\x88\x02\x03\xe8"})

    proto, transport, state = connect(switching)
    proto.data_received(b"GET /x/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                        b"Sec-WebSocket-Version: 13\r\n\r\n\x81\x85masks")
    await settle(state)
    first, rest = transport.writes
    head, _, body = first.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n") and body == b"\x82\x01\x01"
    lines = head.lower().split(b"\r\n")
    assert b"connection: upgrade" in lines and b"upgrade: websocket" in lines
    assert not any(line.startswith((b"content-length", b"transfer-encoding", b"connection: close")) for line in lines)
    assert rest == b"\x88\x02\x03\xe8"
    await asyncio.sleep(0)
    assert transport.closed


async def test_head_requests_get_the_head_alone() -> None:
    proto, transport, state = connect(echo)
    proto.data_received(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    head, _, rest = transport.output.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length: 9" in head and rest == b""


async def test_an_idle_keep_alive_connection_is_closed_after_its_timeout() -> None:
    proto, transport, state = connect(echo, keep_alive_timeout=0.05)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await settle(state)
    assert not transport.is_closed()
    for _ in range(200):
        await asyncio.sleep(0.01)
        if transport.is_closed():
            break
    assert transport.is_closed()


async def test_a_head_that_does_not_arrive_in_time_closes_the_connection() -> None:
    slow, slow_transport, _ = connect(echo)
    slow.head_timeout = 0.05
    slow.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and the rest, a byte at a time, never
    for _ in range(200):
        await asyncio.sleep(0.01)
        if slow_transport.closed:
            break
    assert slow_transport.is_closed() and slow_transport.writes == []
    parts, parts_transport, state = connect(echo)
    parts.head_timeout = 60
    parts.data_received(b"GET /p HTTP/1.1\r\n")
    parts.data_received(b"Host: x\r\n\r\n")  # in time: answered
    await settle(state)
    assert responses(parts_transport.output)[0][2] == b"GET /p? " and parts._head_timer is None


async def test_shutdown_closes_an_idle_connection_and_lets_a_busy_one_finish() -> None:
    release = asyncio.Event()

    async def held(scope: Any, receive: Any, send: Any) -> None:
        await release.wait()
        await echo(scope, receive, send)

    idle, idle_transport, _ = connect(echo)
    idle.shutdown()
    assert idle_transport.closed
    busy, busy_transport, state = connect(held)
    busy.data_received(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(0)
    busy.shutdown()
    assert not busy_transport.closed
    release.set()
    await settle(state)
    [(code, headers, _)] = responses(busy_transport.output)
    assert code == 200 and headers["connection"] == "close"



async def test_shutdown_ends_a_stream_cleanly_and_tells_a_busy_request_nothing() -> None:
    """A watch learns of the stop as of its client's going and ends its stream with the last
    chunk; a request at work that reads its body and answers is answered as usual."""
    release = asyncio.Event()
    told: list[str] = []

    async def watch(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"event\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def write(scope: Any, receive: Any, send: Any) -> None:
        while (m := await receive()).get("more_body"):
            pass
        told.append(m["type"])
        await release.wait()
        await echo(scope, _replayed(m), send)

    watching, watch_transport, watch_state = connect(watch)
    watching.data_received(b"GET /w HTTP/1.1\r\nHost: x\r\n\r\n")
    writing, write_transport, write_state = connect(write)
    writing.data_received(b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
    for _ in range(5):
        await asyncio.sleep(0)
    watching.shutdown()
    writing.shutdown()
    await settle(watch_state)
    [(code, _, body)] = responses(watch_transport.output)  # (the chunked framing's end parsed)
    assert code == 200 and body == b"event\n" and watch_transport.closed
    assert not write_transport.closed
    release.set()
    await settle(write_state)
    [(code, headers, body)] = responses(write_transport.output)
    assert code == 200 and body == b"POST /c? hi" and headers["connection"] == "close"
    assert told == ["http.request"]


def _replayed(message: dict[str, Any]) -> Any:
    async def receive() -> dict[str, Any]:
        return message
    return receive


async def test_a_request_cut_off_by_the_stop_closes_its_connection_unanswered() -> None:
    """Past the shutdown's grace uvicorn cancels what still runs: a write that may have been
    stored must not be answered 500, which says it failed; Go's server closes the connection."""
    async def forever(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()

    proto, transport, state = connect(forever)
    proto.data_received(b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    await asyncio.sleep(0)
    proto.shutdown()
    for task in state.tasks:
        task.cancel()
    await asyncio.gather(*state.tasks, return_exceptions=True)
    assert transport.output == b"" and transport.closed

# -- over a real socket, under uvicorn's server ---------------------------------------------
@pytest.fixture
async def served() -> AsyncIterator[int]:
    async with serving(echo, http=ServerProtocol) as port:
        yield port


async def test_over_a_socket_keep_alive_and_pipelining(served: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    writer.write(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nPOST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
    data = b""
    while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"body"):
        data += await asyncio.wait_for(reader.read(65536), 10)
    assert [b for _, _, b in responses(data)] == [b"GET /one? ", b"POST /two? body"]
    writer.write(b"GET /three?x=%2F HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rest = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    [(code, headers, body)] = responses(rest)
    assert code == 200 and headers["connection"] == "close" and body == b"GET /three?x=%2F "
    writer.close()



async def test_over_a_socket_a_body_refused_early_is_drained_so_its_client_reads_the_answer() -> None:
    """A body answered before it all came (a 413 past the API's limit) is still read, and the
    connection closed only then: a client that writes its whole body before reading (Python's
    httpx) gets the answer. Closed at once with unread bytes
    in its buffer, the socket sent a reset and the client saw a broken connection instead."""
    async def refuse(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the first part only, as the API stops reading past its limit
        body = b'{"kind":"Status","code":413}'
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    async with serving(refuse, http=ServerProtocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        size = 4 << 20
        writer.write(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
        for _ in range(size // 65536):  # the whole body, then the answer: as httpx does
            writer.write(b"x" * 65536)
            await asyncio.wait_for(writer.drain(), 10)
        answer = await asyncio.wait_for(reader.read(), 10)  # until the server closes
        [(code, headers, body)] = responses(answer)
        assert code == 413 and headers["connection"] == "close" and body == b'{"kind":"Status","code":413}'
        writer.close()

async def test_over_a_socket_an_h2c_upgrade_with_a_body_is_served_as_http11(served: int) -> None:
    """The bytes Java's HttpClient writes for a POST over cleartext (HTTP/2 preferred, fabric8's
    default), then a GET on the same connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    writer.write(b"POST /cms HTTP/1.1\r\n" + H2C + b"Content-Length: 13\r\nHost: x\r\n"
                 b"User-Agent: Java-http-client/17.0.15\r\nContent-Type: application/json\r\n\r\n")
    await writer.drain()
    writer.write(b'{"kind":"CM"}')
    writer.write(b"GET /cms/a HTTP/1.1\r\n" + H2C + b"Host: x\r\n\r\n")
    data = b""
    while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"/cms/a? "):
        data += await asyncio.wait_for(reader.read(65536), 10)
    assert [b for _, _, b in responses(data)] == [b'POST /cms? {"kind":"CM"}', b"GET /cms/a? "]
    writer.close()
