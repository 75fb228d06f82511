"""Watches over a WebSocket (RFC 6455), as kube-apiserver serves them.

kube-apiserver's watch handler (``endpoints/handlers/watch.go``) serves a watch request that
asks for a websocket (``wsstream.IsWebSocketRequest``: ``Upgrade: websocket`` and a
``Connection`` that names ``upgrade``) through ``golang.org/x/net/websocket``'s ``Handler``:
``101 Switching Protocols``, then each event as one message, its JSON and the newline the JSON
encoder ends it with, in text frames; the client's messages are read and dropped (a ping is
answered with a pong, a close ends the watch); when the watch ends the server sends a close
frame (1000) and closes the connection. fabric8's kubernetes-client asks for its watches (and
its informers') this way first, with an ``Origin`` header, since x/net's ``Handler`` refuses a
handshake without one.

Before the upgrade, x/net answers a bad handshake itself, with a bare head and its error's
words (no Status): a ``Sec-WebSocket-Version`` other than 13 is 400 naming the version it
speaks, no ``Sec-WebSocket-Key`` 400, no ``Origin`` (or one that does not parse) 403, and
more than one offered subprotocol 400 (``Handler`` picks none: it echoes the only one).

This module is the handshake's rules and the frames; ``http1.Exchange`` writes them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import urllib.parse
from collections.abc import Iterable

__all__ = ["CLOSE", "PING", "PONG", "TEXT", "FrameReader", "Handshake", "accept", "close_frame", "frame", "requested"]

TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# wsstream's connectionUpgradeRegex: "upgrade" as one of the Connection header's tokens
_UPGRADE_TOKEN = re.compile(r"(^|.*,\s*)upgrade($|\s*,)")
# a frame's payload is bounded, as x/net's DefaultMaxPayloadBytes (32 MiB): the client sends nothing
# the watch wants, so a larger one only costs memory
MAX_PAYLOAD = 32 << 20


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str:
    """The first value of a header (lower-case ``name``), as Go's ``Header.Get``."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1").strip()
    return ""


def requested(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request asks for a websocket (wsstream's ``IsWebSocketRequest``)."""
    headers = list(headers)
    return (_header(headers, b"upgrade").lower() == "websocket"
            and _UPGRADE_TOKEN.match(_header(headers, b"connection").lower()) is not None)


def accept(key: str) -> bytes:
    """``Sec-WebSocket-Accept`` for a ``Sec-WebSocket-Key`` (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("latin-1") + _GUID).digest())


class Handshake:
    """A websocket request's handshake as x/net's ``Handler`` judges it: ``refusal`` is None, or
    the status and text it answers instead of upgrading; ``head`` the 101 answer otherwise."""

    __slots__ = ("refusal", "head")

    def __init__(self, method: str, headers: Iterable[tuple[bytes, bytes]]) -> None:
        headers = list(headers)
        self.refusal: tuple[int, bytes, bytes] | None = None  # (status, extra head lines, body)
        self.head = b""
        key = _header(headers, b"sec-websocket-key")
        protocols = [p.strip() for p in _header(headers, b"sec-websocket-protocol").split(",") if p.strip()]
        if method != "GET":
            self.refusal = (405, b"", b"")
        elif _header(headers, b"sec-websocket-version") != "13":
            self.refusal = (400, b"Sec-WebSocket-Version: 13\r\n", b"bad protocol version")
        elif not key:
            self.refusal = (400, b"", b"mismatch challenge/response")
        elif not _origin_parses(_header(headers, b"origin")):
            self.refusal = (403, b"", b"")
        elif len(protocols) > 1:
            self.refusal = (400, b"", b"")
        else:
            lines = [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
                     b"Sec-WebSocket-Accept: %s\r\n" % accept(key)]
            if protocols:
                lines.append(b"Sec-WebSocket-Protocol: %s\r\n" % protocols[0].encode("latin-1"))
            lines.append(b"\r\n")
            self.head = b"".join(lines)


def _origin_parses(origin: str) -> bool:
    """x/net's ``Origin``: present, and a URL that parses."""
    if not origin:
        return False
    try:
        urllib.parse.urlsplit(origin)
    except ValueError:
        return False
    return True


def frame(payload: bytes, opcode: int = TEXT) -> bytes:
    """One final, unmasked frame (a server's frames are never masked)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def close_frame(code: int = 1000) -> bytes:
    return frame(struct.pack("!H", code), CLOSE)


class FrameReader:
    """The client's frames from the bytes as they arrive: ``feed`` returns the (opcode,
    unmasked payload) of each frame completed, a data frame's payload left out (empty: never
    read, so never unmasked byte by byte). A frame over ``MAX_PAYLOAD`` raises ValueError."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self.buffer
        buf += data
        frames: list[tuple[int, bytes]] = []
        while len(buf) >= 2:
            opcode = buf[0] & 0x0F
            masked = buf[1] & 0x80
            n = buf[1] & 0x7F
            at = 2
            if n == 126:
                if len(buf) < 4:
                    break
                n = struct.unpack_from("!H", buf, 2)[0]
                at = 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n = struct.unpack_from("!Q", buf, 2)[0]
                at = 10
            if n > MAX_PAYLOAD or (opcode & 0x8 and n > 125):  # (a control frame's limit: RFC 6455 5.5)
                raise ValueError(f"a websocket frame of {n} bytes")
            mask = b""
            if masked:
                mask = bytes(buf[at:at + 4])
                at += 4
            if len(buf) < at + n:
                break
            # a data frame's payload is dropped (a watch reads nothing the client says): only a
            # control frame's (a ping's, a close's: at most 125 bytes) is unmasked
            payload = b""
            if opcode & 0x8:
                payload = bytes(buf[at:at + n])
                if mask:
                    payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
            del buf[:at + n]
            frames.append((opcode, payload))
        return frames
