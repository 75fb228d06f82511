"""HTTP/1.1 for the API server: an asyncio Protocol on httptools that runs the
ASGI app, in place of uvicorn's own HTTP protocol (uvicorn still runs the
server: sockets, TLS, lifespan, signals, the ``date`` header's clock).

Why a protocol of our own: an API answer is one status line, a few headers and a
body whose length is known. uvicorn's protocol writes the head and the body in
two ``transport.write`` calls (two ``send`` syscalls, two loopback segments),
checks every header against two regular expressions, and allocates an
``asyncio.Event``, a keep-alive timer and a cycle object per request. With the
API at one core, that was a quarter of the server's samples in the scheduler
benchmark. Here a response of known length goes out in one write, a streamed
one (watches, chunked lists) is written as it comes, and the keep-alive timer
is armed once per connection, not once per request.

One connection is one ``ServerProtocol``; each request on it an ``Exchange``,
which is the ASGI app's ``receive`` and ``send``. Invariants:

- at most one exchange of a connection runs the app at a time (``current``);
  pipelined requests wait in ``waiting``, with reading paused, and start in
  order as the one before completes;
- an exchange's request body is handed to the app in the order it arrived;
  reading pauses while more than ``HIGH_WATER`` bytes wait for the app;
- a response with ``content-length`` is held until its body arrives and goes
  out in one write; one without it is chunked (HTTP/1.1) or ends with the
  connection (HTTP/1.0);
- ``receive`` raises TimeoutError when a request's body has not all arrived
  ``BODY_TIMEOUT`` after the app first had to wait for it (the API answers 504);
- after a connection is lost, ``receive`` answers ``http.disconnect`` and
  ``send`` writes nothing (as uvicorn's: a watch learns it from ``receive``);
- a response sent before its request's body was read closes the connection
  afterwards (the rest of the body is not read, as Go's server does past a
  small limit);
- header names and values the app sends may not hold CR or LF (no response
  splitting through a value that carries a client's text, such as a Warning).

Requests that are not HTTP/1.x-parseable get a 400 and the connection closes (a body that stops
parsing, a bad chunk size, too, if its request has not been answered);
request heads larger than ``MAX_HEAD`` get a 431, and a head still incomplete
``HEAD_TIMEOUT`` after it began closes the connection (both as kube-apiserver). ``Upgrade`` requests
for a websocket or SPDY are answered as plain requests with ``connection: close``, then the
connection closes, unless the app switches protocols. It may upgrade the exchange to a websocket
(``accept_websocket``: a watch, ``api/websocket.py``): its response is then a 101 and its body's
lines are text frames, ended with a close frame; the client's frames are read (a ping answered, a
close ending the exchange's ``receive`` with ``http.disconnect``). Or it may answer with a 101 of its
own: the head goes out without framing (no length, not chunked, its ``connection`` header the
app's) and the body is written as it comes, bytes of the protocol switched to, until its end closes
the connection; nothing reads what the client sends after the head (``api/streaming.py`` writes a
whole websocket session at once, as an exec whose kubelet cannot be dialled has one). An Upgrade to
anything else (``h2c``, which Java's HttpClient asks for on every request over cleartext, a body
too) is ignored, as Go's server ignores it (RFC 9110 allows it): the request is read whole, body
included, and the connection stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import re
import time
import urllib.parse
from collections import deque
from typing import Any

import httptools

from ..metrics import HTTP_WRITE_BLOCKED_SECONDS, HTTP_WRITE_BLOCKS
from . import websocket
from .auditid import new_audit_id

__all__ = ["BODY_TIMEOUT", "CLIENT_CERT_SCOPE_KEY", "EXCHANGE_SCOPE_KEY", "HEAD_TIMEOUT", "HIGH_WATER", "MAX_HEAD",
           "RECEIVED_SCOPE_KEY", "Exchange", "ServerProtocol", "client_subject"]

log = logging.getLogger("controlplane.http")

# Request body bytes waiting for the app before reading pauses (uvicorn's is 64 KiB too).
HIGH_WATER = 64 * 1024
# The request line and headers together (Go's http.DefaultMaxHeaderBytes, which kube-apiserver keeps).
MAX_HEAD = 1 << 20
# How long a request's head may take to arrive before the connection is closed (kube-apiserver's
# ReadHeaderTimeout): a client sending its headers a byte at a time does not hold a connection forever.
HEAD_TIMEOUT = 32.0
# How long a request's body may take to arrive, from the app's first wait for it (kube-apiserver's
# --request-timeout, whose filter answers a handler still reading): ``receive`` then raises
# TimeoutError. A body that is there when the app asks (almost every request) arms no timer.
BODY_TIMEOUT = 60.0
# A body answered before it all came (a 413 past the API's limit, an error before the body was
# wanted) is still read, and thrown away, before the connection closes, for at most this long
# and this much: a socket closed with unread bytes sends a reset, and a client that writes its
# whole body before it reads (httpx) loses the answer in it. Go's server reads on too
# (up to 256 KiB, then lingers half a second for the client to read the answer).
DISCARD_SECONDS = 5.0
DISCARD_BYTES = 16 << 20

ASGI = {"version": "3.0", "spec_version": "2.3"}
# scope key: time.perf_counter() when the server took the request up (its head parsed and the request
# before it on the connection answered), before its task waited for the event loop: the start of
# upstream's request latency ("from the moment the apiserver gets the request"), read by the API's
# request metrics (api/rest.py)
RECEIVED_SCOPE_KEY = "controlplane.received"
# scope key, on the requests of a TLS connection whose client presented a certificate the
# handshake verified against ``--client-ca-file``: its subject as (common name, organizations),
# which the API's authenticator takes for a user and its groups (kube-apiserver's x509 authenticator)
CLIENT_CERT_SCOPE_KEY = "controlplane.client_cert"
# scope key: the request's Exchange, for a stream's synchronous writes (``Exchange.send_now``): a watch
# writes its events in the turn of the loop that fans them out, not in its task's next turn
EXCHANGE_SCOPE_KEY = "controlplane.exchange"
# uvicorn's access log (`serve --log-level debug` turns it on: uvicorn.Config(access_log=...) gives this
# logger its handler, or none): a line per request, as uvicorn's own protocols write it
ACCESS_LOG = logging.getLogger("uvicorn.access")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LAST_CHUNK = b"0\r\n\r\n"


def client_subject(peercert: Any) -> tuple[str, tuple[str, ...]] | None:
    """(common name, organizations) of a verified peer certificate, as ``SSLObject.getpeercert()``
    gives it (a dict with ``subject``, a tuple of RDNs of (attribute, value) pairs; ``{}`` or None
    when there was none); None without a common name, which names no user.

    >>> client_subject({"subject": ((("organizationName", "system:masters"),), (("commonName", "admin"),))})
    ('admin', ('system:masters',))
    """
    if not peercert:
        return None
    pairs = [pair for rdn in peercert.get("subject") or () for pair in rdn]
    names = [value for attribute, value in pairs if attribute == "commonName"]
    if not names or not names[0]:
        return None
    return names[0], tuple(value for attribute, value in pairs if attribute == "organizationName")


def _status_line(code: int) -> bytes:
    try:
        phrase = http.HTTPStatus(code).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {code} {phrase}\r\n".encode()


STATUS_LINES = {code: _status_line(code) for code in range(100, 600)}


def _plain(code: int, text: str) -> bytes:
    body = text.encode()
    return b"".join([STATUS_LINES[code], b"content-type: text/plain; charset=utf-8\r\n",
                     b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body), body])


class _DefaultHeaders:
    """uvicorn's server replaces ``server_state.default_headers`` (the ``date``
    header) once a second; its bytes are built once per replacement, for all
    connections."""

    __slots__ = ("bytes", "source")

    def __init__(self) -> None:
        self.source: object = None
        self.bytes = b""

    def of(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        if headers is not self.source:
            self.bytes = b"".join(b"%s: %s\r\n" % (n, v) for n, v in headers)
            self.source = headers
        return self.bytes


_DEFAULTS = _DefaultHeaders()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("the request's body did not arrive in time"))


class Exchange:
    """One request and its response: the ASGI ``receive`` and ``send`` of one app call."""

    __slots__ = ("proto", "scope", "keep_alive", "expect_continue", "head_request", "http10",
                 "chunks", "buffered", "body_done", "delivered", "waiter", "body_deadline",
                 "started", "head", "chunked", "remaining", "done", "disconnected", "audit_id",
                 "ws_head", "ws_partial", "ws_closed", "stopping")

    def __init__(self, proto: ServerProtocol, scope: dict[str, Any], keep_alive: bool,
                 expect_continue: bool) -> None:
        self.proto = proto
        self.scope = scope
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.head_request = scope["method"] == "HEAD"
        self.http10 = scope["http_version"] == "1.0"
        # the request body: chunks not yet handed to the app
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.body_done = False
        self.delivered = False  # the app has been given the body's end
        self.waiter: asyncio.Future[None] | None = None
        self.body_deadline = 0.0  # (loop time) when the body must have arrived; 0: not waited for yet
        # the response
        self.started = False
        self.head: bytes | None = None  # a head of known length, held for its body
        self.chunked = False
        self.remaining = -1  # body bytes still due under content-length (-1: no length)
        self.done = False
        self.disconnected = False
        self.audit_id = b""  # the request's own Audit-ID header, if it sent one
        # upgraded to a websocket (accept_websocket): its 101 head, a body line not yet ended,
        # and whether the client sent its close frame
        self.ws_head: bytes | None = None
        self.ws_partial = b""
        self.ws_closed = False
        # the server is stopping: once its body is read, the app is told the client went
        # (a watch, a followed log, ends its stream cleanly; other requests never ask)
        self.stopping = False

    def wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- ASGI receive ------------------------------------------------------------------
    async def receive(self) -> dict[str, Any]:
        while True:
            if self.chunks or (self.body_done and not self.delivered):
                body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
                self.chunks = []
                self.buffered = 0
                self.proto.body_taken()
                if self.body_done:
                    self.delivered = True
                return {"type": "http.request", "body": body, "more_body": not self.body_done}
            if self.disconnected or self.done or self.ws_closed or (self.stopping and self.delivered):
                return {"type": "http.disconnect"}
            if self.expect_continue and not self.started and not self.body_done:
                self.expect_continue = False
                self.proto.write(_CONTINUE)
            # the body's next part, its end, the response's end or the client's going
            loop = self.proto.loop
            self.waiter = waiter = loop.create_future()
            expiry = None
            if not self.body_done:  # (a body still due: bounded; the end of a response or the client's going not)
                if not self.body_deadline:
                    self.body_deadline = loop.time() + BODY_TIMEOUT
                expiry = loop.call_at(self.body_deadline, _expire, waiter)
            try:
                await waiter
            finally:
                self.waiter = None
                if expiry is not None:
                    expiry.cancel()

    # -- websocket ---------------------------------------------------------------------
    @property
    def websocket_requested(self) -> bool:
        """Whether the request asks for a websocket (and the response has not started)."""
        return not self.started and websocket.requested(self.scope["headers"])

    def accept_websocket(self) -> tuple[int, bytes, bytes] | None:
        """Upgrade this exchange to a websocket: its response's start writes the 101 head, and each
        line of its body goes out as a text frame. None when upgraded; else the handshake's
        refusal (status, extra head lines, body), which the app answers instead, plainly."""
        handshake = websocket.Handshake(self.scope["method"], self.scope["headers"])
        if handshake.refusal is None:
            self.ws_head = handshake.head
            self.keep_alive = False
        return handshake.refusal

    def ws_received(self, frames: list[tuple[int, bytes]]) -> None:
        """The client's frames: a ping is answered; a close ends the exchange's ``receive``."""
        for opcode, payload in frames:
            if opcode == websocket.PING and not self.done:
                self.proto.write(websocket.frame(payload, websocket.PONG))
            elif opcode == websocket.CLOSE:
                self.ws_closed = True
                self.wake()

    def _ws_frames(self, body: bytes) -> bytes:
        """A body's complete lines as text frames, one a line with its newline (as kube-apiserver's
        watch sends each event); a line's unfinished end waits for the rest."""
        if self.ws_partial:
            body = self.ws_partial + body
        end = body.rfind(b"\n") + 1
        self.ws_partial = body[end:]
        if not end:
            return b""
        lines = body[:end].split(b"\n")
        lines.pop()  # (after the last newline: nothing)
        return b"".join([websocket.frame(line + b"\n") for line in lines])

    # -- ASGI send ---------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, not {kind!r}")
            self._start(message["status"], message.get("headers", ()))
            return
        if kind != "http.response.body":
            raise RuntimeError(f"expected http.response.body, not {kind!r}")
        if self.done:
            raise RuntimeError("the response is complete")
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        proto = self.proto
        if proto.write_paused:
            blocked = time.perf_counter()
            await proto.drained()
            HTTP_WRITE_BLOCKS.inc()
            HTTP_WRITE_BLOCKED_SECONDS.inc(time.perf_counter() - blocked)
        if self.disconnected:
            return
        if self.ws_head is not None:
            data = self._ws_frames(body) if body else b""
            if not more:
                data += websocket.close_frame()
        elif self.head_request:
            data = self.head or b""
        elif self.chunked:
            data = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            if not more:
                data += _LAST_CHUNK
        else:
            if self.remaining >= 0:
                self.remaining -= len(body)
                if self.remaining < 0:
                    raise RuntimeError("the response body is longer than its content-length")
            data = self.head + body if self.head is not None else body
        self.head = None
        if data:
            proto.write(data)
        if not more:
            if self.remaining > 0 and not self.head_request:
                raise RuntimeError("the response body is shorter than its content-length")
            self.done = True
            self.wake()
            proto.exchange_done(self)

    def writable(self) -> bool:
        """Whether ``send_now`` can write: the response has started chunked (a stream) and is not
        over, the client is there, and the connection's send buffer is below its high-water mark
        (else ``send`` would wait for it to drain)."""
        return ((self.chunked or (self.ws_head is not None and self.started)) and not self.done
                and not self.disconnected and not self.proto.write_paused)

    def send_now(self, body: bytes) -> None:
        """``send`` of one more part of a chunked body (a websocket's lines), done now, without the
        loop; only while ``writable``."""
        if not body:
            return
        if self.ws_head is not None:
            data = self._ws_frames(body)
            if data:
                self.proto.write(data)
        else:
            self.proto.write(b"%x\r\n%s\r\n" % (len(body), body))

    def _start(self, status: int, headers: Any) -> None:
        if self.proto.access_log:
            self._log_access(status)
        if self.ws_head is not None:
            if status not in (101, 200):
                raise RuntimeError(f"a websocket's response starts with 101, not {status}")
            self.started = True
            self.expect_continue = False
            if not self.disconnected:
                self.proto.write(self.ws_head)
            return
        lines = [STATUS_LINES[status], _DEFAULTS.of(self.proto.server_state.default_headers)]
        length = -1
        chunked_asked = False
        audit_id = False
        switched = status == 101  # the body is the new protocol's: no HTTP framing, the connection ends with it
        for name, value in headers:
            if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name or b":" in name:
                raise RuntimeError(f"invalid response header {name!r}")
            lname = name.lower()
            if switched and lname in (b"content-length", b"transfer-encoding"):
                continue
            if lname == b"content-length":
                length = int(value)
            elif lname == b"transfer-encoding":
                chunked_asked = b"chunked" in value.lower()
                continue  # framing is ours to decide
            elif lname == b"connection" and b"close" in value.lower():
                self.keep_alive = False
            elif lname == b"audit-id":
                audit_id = True
            lines.append(b"%s: %s\r\n" % (name, value))
        if not audit_id:  # (upstream's WithAuditInit: every answer has one, audited or not)
            lines.append(b"Audit-Id: %s\r\n" % (self.audit_id or new_audit_id().encode()))
        if not self.body_done:  # answered before the whole body came: it will not be read
            self.keep_alive = False
        if switched:
            self.keep_alive = False  # (an Upgrade request's already is; its Connection header is the app's)
        elif length >= 0 and not chunked_asked:
            self.remaining = length
        elif self.head_request or status in (204, 304):
            pass
        elif self.http10:  # no chunked framing in HTTP/1.0: the body ends with the connection
            self.keep_alive = False
        else:
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive and not switched:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        head = b"".join(lines)
        self.started = True
        self.expect_continue = False  # answered before the body was asked for: no 100
        if self.remaining >= 0 or self.head_request or switched:
            self.head = head  # out with the body in one write (HEAD: with the response's end)
        elif not self.disconnected:
            self.proto.write(head)

    def _log_access(self, status: int) -> None:
        """uvicorn's access log line: ``127.0.0.1:50312 - "GET /api/v1/pods?limit=500 HTTP/1.1" 200``."""
        scope = self.scope
        client = scope["client"]
        target = scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b"")
        ACCESS_LOG.info('%s - "%s %s HTTP/%s" %d', f"{client[0]}:{client[1]}" if client else "-", scope["method"],
                        target.decode("latin-1").replace('"', "%22"), scope["http_version"], status)

    def fail(self, answer: bool = True) -> None:
        """The app ended without completing the response (or raised). Without ``answer`` (the
        server cut the request off as it stopped), the connection closes with no answer: a
        500 would tell the client that a write which may have been stored was not."""
        if self.done:
            return
        if answer and not self.started and not self.disconnected:
            self.keep_alive = False
            self.proto.write(_plain(500, "Internal Server Error"))
        self.done = True
        self.keep_alive = False
        self.wake()
        self.proto.exchange_done(self)


class ServerProtocol(asyncio.Protocol):
    """One client connection. Constructed by uvicorn's server, as its own protocols are
    (``uvicorn.Config(http=ServerProtocol)``)."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.app_state = app_state
        self.idle_timeout: float = config.timeout_keep_alive
        self.access_log: bool = bool(getattr(config, "access_log", False)) and ACCESS_LOG.hasHandlers()
        self.root_path: str = config.root_path
        self.parser = _parser(self)
        self.transport: asyncio.Transport | None = None
        self.server: tuple[str, int] | None = None
        self.client: tuple[str, int] | None = None
        self.scheme = "http"
        self.client_cert: tuple[str, tuple[str, ...]] | None = None  # see CLIENT_CERT_SCOPE_KEY
        self.current: Exchange | None = None  # running the app
        self.waiting: deque[Exchange] = deque()  # pipelined behind it
        self.reading: Exchange | None = None  # the request whose body the parser is in
        self.read_paused = False
        self.write_paused = False
        self._drain: asyncio.Future[None] | None = None
        self.closed = False
        self.upgraded = False
        self.ws_reader: websocket.FrameReader | None = None  # after an Upgrade request's head
        self.headed: Exchange | None = None  # the last request whose head was parsed
        self.resuming = False  # a new parser reads the head that stands in for an ignored Upgrade's
        # an answered exchange whose body is read on, and thrown away, before the close
        self._discarding: Exchange | None = None
        self._discarded = 0
        self._discard_done = False  # (closed after it: what follows in the same read is not served)
        self._discard_timer: asyncio.TimerHandle | None = None
        # the request being parsed
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_size = 0
        self._expect = False
        self._audit_id = b""
        self._in_head = False
        self._head_began = 0.0
        self._head_timer: asyncio.TimerHandle | None = None
        # keep-alive: the timer is re-armed from the last activity, not per request
        self._idle: asyncio.TimerHandle | None = None
        self._last_active = 0.0
        self.head_timeout = HEAD_TIMEOUT

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's TLS transport is no asyncio.Transport subclass, but is one in all but name)
        self.transport = transport  # type: ignore[assignment]
        self.server_state.connections.add(self)
        self.server = _address(transport.get_extra_info("sockname"))
        self.client = _address(transport.get_extra_info("peername"))
        self.scheme = "https" if transport.get_extra_info("sslcontext") is not None else "http"
        if self.scheme == "https":
            # the handshake is done: a certificate here was verified against the client CA
            self.client_cert = client_subject(transport.get_extra_info("peercert"))
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        # the parser holds this protocol's bound callbacks, and this protocol the parser: a
        # cycle, which would keep a closed connection (its TLS buffers and objects, its last
        # request) until a full collection of the cyclic garbage collector, rare in this server
        # (gcsettings): without the parser, reference counting frees it as soon as it closes
        self.parser = _DETACHED_PARSER
        self.server_state.connections.discard(self)
        for timer in (self._idle, self._head_timer, self._discard_timer):
            if timer is not None:
                timer.cancel()
        self._idle = self._head_timer = self._discard_timer = None
        self._discarding = None
        for ex in (self.current, *self.waiting):
            if ex is not None:
                ex.disconnected = True
                ex.wake()
        self.waiting.clear()
        self._resume_writers()

    def data_received(self, data: bytes) -> None:
        self._last_active = self.loop.time()
        if self.upgraded:
            self._upgraded_data(data)  # what follows an Upgrade request's head is another protocol's
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as e:
            offset = e.args[0] if e.args and isinstance(e.args[0], int) else len(data)
            ex = self.headed
            if ex is not None and not _switches(ex.scope["headers"]):
                self._ignore_upgrade(ex)
                if offset < len(data):
                    self.data_received(data[offset:])
                return
            self.upgraded = True
            if self.reading is not None:  # the head is all there is of it
                self.reading.keep_alive = False
                self.on_message_complete()
            if offset < len(data):
                self._upgraded_data(data[offset:])
        except httptools.HttpParserError as e:  # a callback's own error comes as its __context__
            if isinstance(e.__context__, _HeadTooLarge):
                self._refuse(431, "Request Header Fields Too Large")
            else:
                self._refuse(400, "Bad Request")
            return
        if self._in_head and self._head_timer is None:  # a head in parts: it gets a deadline
            self._head_timer = self.loop.call_at(self._head_began + self.head_timeout, self._head_expired)

    def _ignore_upgrade(self, ex: Exchange) -> None:
        """Read on as HTTP/1.1 after the head of ``ex``, an Upgrade this server does not take.
        httptools stopped at the head (its upgrade skips the body, and it has completed the
        message): a new parser is given a head of the same framing in its place, so that it reads
        the body into ``ex`` and then the requests after it."""
        headers = ex.scope["headers"]
        framing = b"Content-Length: 0\r\n"
        for name, value in headers:
            if name == b"transfer-encoding":
                framing = b"Transfer-Encoding: %s\r\n" % value
                break
            if name == b"content-length":
                framing = b"Content-Length: %s\r\n" % value
        ex.body_done = ex.delivered = False  # (the app has not run yet: its task starts after this)
        ex.keep_alive = not any(n == b"connection" and b"close" in v.lower() for n, v in headers) \
            and ex.scope["http_version"] != "1.0"
        self.reading = ex
        self.parser = _parser(self)
        self.resuming = True
        try:
            self.parser.feed_data(b"POST / HTTP/1.1\r\n%s\r\n" % framing)
        except httptools.HttpParserError:  # a framing header that does not parse: as the original's
            self.resuming = False
            self._refuse(400, "Bad Request")

    def _upgraded_data(self, data: bytes) -> None:
        """Bytes after an Upgrade request's head: a websocket's frames, once the exchange is one
        (a client sends none before the 101); anything else is dropped."""
        ex = self.current
        if ex is None or ex.ws_head is None:
            return
        if self.ws_reader is None:
            self.ws_reader = websocket.FrameReader()
        try:
            frames = self.ws_reader.feed(data)
        except ValueError:  # a frame over the bound: the client is not one
            if self.transport is not None:
                self.transport.close()
            return
        ex.ws_received(frames)

    def eof_received(self) -> bool | None:
        return None  # the transport closes when the client half-closes, as with uvicorn's protocol

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._resume_writers()

    # -- uvicorn's server --------------------------------------------------------------
    def shutdown(self) -> None:
        """Graceful shutdown: close an idle connection now, a busy one after its response. A
        stream (a watch, a followed log) ends now, cleanly, as kube-apiserver ends its watches
        when it stops: its client watches again, from where it was, elsewhere or once the
        server is back; without this every open watch held the shutdown for its whole grace
        period, and was then cut off mid-stream with the requests still running.

        An idle TLS connection closes as Go's ``tls.Conn.Close`` closes kube-apiserver's: its
        close_notify alert sent, the socket closed without waiting for the client's. Waiting,
        an idle client that was not reading held the shutdown for its whole grace period."""
        if self.current is None:
            self._close_now()
        else:
            self.current.keep_alive = False
            self.current.stopping = True
            self.current.wake()
            for ex in self.waiting:
                ex.keep_alive = False

    # -- httptools callbacks -----------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.resuming:
            return
        self._url = b""
        self._headers = []
        self._head_size = 0
        self._expect = False
        self._audit_id = b""
        self._in_head = True
        self._head_began = self._last_active

    def on_url(self, url: bytes) -> None:
        if self.resuming:
            return
        self._url += url
        self._head_size += len(url)
        if self._head_size > MAX_HEAD:
            raise _HeadTooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.resuming:
            return
        self._head_size += len(name) + len(value) + 4
        if self._head_size > MAX_HEAD:
            raise _HeadTooLarge
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self._expect = True
        elif name == b"audit-id" and value:
            self._audit_id = value
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.resuming:  # the stand-in head: the body that follows is the ignored Upgrade's
            self.resuming = False
            return
        if self._discard_done:
            return
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        parser = self.parser
        version = parser.get_http_version()
        url = self._url
        if url[:1] == b"/":
            raw_path, _, query = url.partition(b"?")
            raw_path = raw_path.partition(b"#")[0]
        else:  # absolute-form (through a proxy) or "*"
            parsed = httptools.parse_url(url)
            raw_path, query = parsed.path or b"/", parsed.query or b""
        path = raw_path.decode("latin-1")
        if "%" in path:
            if _BAD_ESCAPE.search(path):  # Go's url.ParseRequestURI fails: net/http's plain 400
                raise _BadTarget
            path = urllib.parse.unquote(path)
        scope: dict[str, Any] = {
            "type": "http", "asgi": ASGI, "http_version": version,
            "server": self.server, "client": self.client, "scheme": self.scheme,
            "method": parser.get_method().decode("ascii"),
            "root_path": self.root_path, "path": self.root_path + path,
            "raw_path": self.root_path.encode("ascii") + raw_path if self.root_path else raw_path,
            "query_string": query, "headers": self._headers,
            "state": self.app_state.copy() if self.app_state else {},
        }
        if self.client_cert is not None:
            scope[CLIENT_CERT_SCOPE_KEY] = self.client_cert
        # an Upgrade request is answered plainly and the connection then closes: its answer says so
        # (one to what this server ignores is kept alive again by _ignore_upgrade)
        ex = Exchange(self, scope, parser.should_keep_alive() and not parser.should_upgrade(), self._expect)
        ex.audit_id = self._audit_id
        self.reading = self.headed = ex
        if self.current is None:
            self._start(ex)
        else:
            self.waiting.append(ex)
            self._pause_reading()

    def on_body(self, body: bytes) -> None:
        ex = self.reading
        if ex is None or ex.done or ex.disconnected:
            if ex is not None and ex is self._discarding:  # answered already: read, not kept
                self._discarded += len(body)
                if self._discarded > DISCARD_BYTES:
                    self._discard_over()
            return
        ex.chunks.append(body)
        ex.buffered += len(body)
        if ex.buffered > HIGH_WATER:
            self._pause_reading()
        ex.wake()

    def on_message_complete(self) -> None:
        ex = self.reading
        if ex is None:
            return
        self.reading = None
        ex.body_done = True
        ex.wake()
        if ex is self._discarding:  # all of it read: the client has sent what it meant to
            self._discard_over()

    # -- exchanges ---------------------------------------------------------------------
    def _start(self, ex: Exchange) -> None:
        self.current = ex
        ex.scope[RECEIVED_SCOPE_KEY] = time.perf_counter()
        ex.scope[EXCHANGE_SCOPE_KEY] = ex
        task = self.loop.create_task(self._run(ex))
        tasks = self.server_state.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _run(self, ex: Exchange) -> None:
        try:
            await self.app(ex.scope, ex.receive, ex.send)
        except BaseException as e:
            if not isinstance(e, asyncio.CancelledError):
                log.error("%s %s: the app raised %r", ex.scope["method"], ex.scope["path"], e, exc_info=True)
            ex.fail(answer=not isinstance(e, asyncio.CancelledError))
            if isinstance(e, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                raise
        else:
            if not ex.done:
                if ex.started and not ex.disconnected:
                    log.error("%s %s: the app returned without completing its response",
                              ex.scope["method"], ex.scope["path"])
                ex.fail()
        finally:
            # the exchange and its scope hold each other: undone here, reference counting frees
            # them, not the cyclic collector
            ex.scope.pop(EXCHANGE_SCOPE_KEY, None)

    def exchange_done(self, ex: Exchange) -> None:
        """``ex``'s response is complete: close, or start the next pipelined request."""
        self.server_state.total_requests += 1
        if ex is self.headed:  # (held only until its head's parse is over: not past its answer)
            self.headed = None
        if ex is not self.current:
            return
        self.current = None
        self._last_active = self.loop.time()
        if self.closed:
            return
        if not ex.keep_alive or self.upgraded:
            assert self.transport is not None
            if ex.stopping:  # the server stops: as an idle connection (shutdown), at once
                self._close_now()
            elif ex.started and not ex.body_done and not ex.disconnected and not self.upgraded:
                self._discard_rest(ex)
            else:
                self.transport.close()
            return
        if self.waiting:
            self._start(self.waiting.popleft())
            if not self.waiting and (self.reading is None or self.reading.buffered <= HIGH_WATER):
                self._resume_reading()
        else:
            self._resume_reading()

    def body_taken(self) -> None:
        """The app took the buffered body: read on, unless pipelined requests wait."""
        if self.read_paused and not self.waiting:
            self._resume_reading()

    # -- transport ---------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if not self.closed:
            assert self.transport is not None
            self.transport.write(data)

    async def drained(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = self.loop.create_future()
        await asyncio.shield(self._drain)

    def _resume_writers(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _close_now(self) -> None:
        """Close as Go's ``tls.Conn.Close`` closes kube-apiserver's connections: over TLS the
        close_notify alert sent, the socket closed without waiting for the client's (a client
        that is not reading would hold the connection, and a stop, for the SSL shutdown's 30 s).
        What is still to be written (a response just sent) goes first, for up to a second."""
        transport = self.transport
        if transport is not None:
            transport.close()  # (writes the alert now, if TLS)
            if transport.get_extra_info("ssl_object") is not None:
                self.loop.call_soon(self._abort_once_written, transport, self.loop.time() + 1.0)

    def _abort_once_written(self, transport: asyncio.Transport, deadline: float) -> None:
        if self.closed:
            return
        if transport.get_write_buffer_size() and self.loop.time() < deadline:
            self.loop.call_later(0.02, self._abort_once_written, transport, deadline)
            return
        transport.abort()

    def _discard_rest(self, ex: Exchange) -> None:
        """Read the rest of ``ex``'s body (answered without it) and throw it away, then close;
        DISCARD_SECONDS and DISCARD_BYTES bound it. A stop closes the connection at once."""
        self._discarding = ex
        self._discarded = ex.buffered
        ex.chunks = []
        ex.buffered = 0
        self._discard_timer = self.loop.call_later(DISCARD_SECONDS, self._discard_over)
        self._resume_reading()

    def _discard_over(self) -> None:
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None
        self._discarding = None
        self._discard_done = True
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _pause_reading(self) -> None:
        if not self.read_paused and not self.closed:
            self.read_paused = True
            assert self.transport is not None
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.read_paused and not self.closed:
            self.read_paused = False
            assert self.transport is not None
            self.transport.resume_reading()

    def _refuse(self, code: int, text: str) -> None:
        ex = self.current
        if ex is None or (ex is self.reading and not ex.started):
            # no request running, or the running one's body does not parse (a bad chunk size):
            # it is answered here, and its app's answer goes nowhere
            self.write(_plain(code, text))
            if ex is not None:
                ex.disconnected = True
        if self.transport is not None:
            self.transport.close()

    def _head_expired(self) -> None:
        self._head_timer = None
        if self._in_head and not self.closed and self.transport is not None:
            log.info("closing a connection from %s: its request head took over %.0f s", self.client,
                     self.head_timeout)
            self.transport.close()

    def _arm_idle(self) -> None:
        self._last_active = self.loop.time()
        self._idle = self.loop.call_later(self.idle_timeout, self._idle_check)

    def _idle_check(self) -> None:
        """Close a keep-alive connection idle for ``idle_timeout``; a busy one is looked at again later."""
        self._idle = None
        if self.closed:
            return
        idle_for = self.loop.time() - self._last_active
        if self.current is None and not self.waiting and idle_for >= self.idle_timeout:
            assert self.transport is not None
            self.transport.close()
            return
        wait = self.idle_timeout - idle_for if self.current is None else self.idle_timeout
        self._idle = self.loop.call_later(max(wait, 0.05), self._idle_check)


class _NoCallbacks:
    """A parser's protocol with no callbacks."""


# what a closed connection's protocol holds in place of its parser (never fed)
_DETACHED_PARSER = httptools.HttpRequestParser(_NoCallbacks())


def _parser(proto: ServerProtocol) -> httptools.HttpRequestParser:
    parser = httptools.HttpRequestParser(proto)
    with contextlib.suppress(AttributeError):  # (httptools < 0.6.3 has no leniencies)
        # a response to the first of pipelined requests even if the client half-closed
        parser.set_dangerous_leniencies(lenient_data_after_close=True)
    return parser


def _switches(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether an Upgrade request's protocol is one a handler here may switch to, or answers
    plainly and then closes the connection: a websocket (a watch's, exec's) or SPDY (exec's)."""
    for name, value in headers:
        if name == b"upgrade":
            value = value.lower()
            return b"websocket" in value or b"spdy" in value
    return True  # (httptools saw an Upgrade: a CONNECT)


class _HeadTooLarge(Exception):
    """Raised from a parser callback: the request's head is over ``MAX_HEAD``."""


class _BadTarget(Exception):
    """Raised from a parser callback: the request's path has a ``%`` that is no escape
    (``/api/v1/namespaces/%zz/pods``), which Go's request parsing refuses."""


# a "%" not followed by two hex digits (Go's unescape in its path mode)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _address(info: Any) -> tuple[str, int] | None:
    if isinstance(info, (list, tuple)) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return None
