"""The websocket frames and handshake rules of watches (``api/websocket.py``)."""

from __future__ import annotations

import struct

import pytest

from controlplane.api import websocket


def masked(payload: bytes, opcode: int, key: bytes = b"\x01\x02\x03\x04") -> bytes:
    """A client's frame: always masked (RFC 6455 section 5.3)."""
    n = len(payload)
    length = struct.pack("!B", 0x80 | n) if n < 126 else struct.pack("!BH", 0x80 | 126, n)
    return bytes([0x80 | opcode]) + length + key + bytes(b ^ key[i & 3] for i, b in enumerate(payload))


def test_accept_is_rfc_6455s_example() -> None:
    assert websocket.accept("dGhlIHNhbXBsZSBub25jZQ==") == b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_a_servers_frame_carries_its_length_in_the_three_forms() -> None:
    for n, head in ((5, b"\x81\x05"), (300, b"\x81\x7e\x01\x2c"), (70000, b"\x81\x7f" + struct.pack("!Q", 70000))):
        data = websocket.frame(b"x" * n)
        assert data[:len(head)] == head and len(data) == len(head) + n
    assert websocket.close_frame() == b"\x88\x02\x03\xe8"


def test_the_clients_frames_are_unmasked_whatever_the_pieces_they_arrive_in() -> None:
    stream = (masked(b"ping me", websocket.PING) + masked(b"y" * 200, websocket.TEXT)
              + masked(b"\x03\xe8", websocket.CLOSE))
    reader = websocket.FrameReader()
    got = [f for i in range(len(stream)) for f in reader.feed(stream[i:i + 1])]
    # a data frame's payload is dropped unread (a watch takes nothing from the client)
    assert got == [(websocket.PING, b"ping me"), (websocket.TEXT, b""), (websocket.CLOSE, b"\x03\xe8")]
    with pytest.raises(ValueError, match="a websocket frame of 126 bytes"):  # a control frame: 125 at most
        websocket.FrameReader().feed(masked(b"p" * 126, websocket.PING))


def test_requested_as_wsstream_reads_it() -> None:
    assert websocket.requested([(b"upgrade", b"WebSocket"), (b"connection", b"keep-alive, Upgrade")])
    assert not websocket.requested([(b"upgrade", b"websocket"), (b"connection", b"keep-alive")])
    assert not websocket.requested([(b"upgrade", b"SPDY/3.1"), (b"connection", b"Upgrade")])


def test_the_handshakes_refusals_are_x_nets() -> None:
    good = [(b"sec-websocket-version", b"13"), (b"sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
            (b"origin", b"https://127.0.0.1:6443")]
    ok = websocket.Handshake("GET", good)
    assert ok.refusal is None and b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in ok.head
    assert websocket.Handshake("GET", good[:2]).refusal == (403, b"", b"")
    assert websocket.Handshake("GET", [(b"sec-websocket-version", b"8"), *good[1:]]).refusal == (
        400, b"Sec-WebSocket-Version: 13\r\n", b"bad protocol version")
    one = websocket.Handshake("GET", [*good, (b"sec-websocket-protocol", b"v1.watch")])
    assert b"Sec-WebSocket-Protocol: v1.watch\r\n" in one.head
    assert websocket.Handshake("GET", [*good, (b"sec-websocket-protocol", b"a, b")]).refusal == (400, b"", b"")
