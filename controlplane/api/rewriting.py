"""A whole answer rewritten before it goes out: the ASGI ``send`` wrapper that
buffers a response the caller takes (its start message decides) and hands its
start and whole body to a rewrite, for the answers negotiated as YAML
(``negotiation.negotiated_writer``) and those asked pretty (``pretty.pretty_writer``).

Invariant: an answer not taken goes out message by message as the app sent it; a
taken one goes out as two messages, the rewritten start and the whole body, once the
app's last body message has arrived.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Send", "rewriting_writer"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Message = dict[str, Any]


def rewriting_writer(send: Send, takes: Callable[[Message], bool],
                     rewrite: Callable[[Message, bytes], tuple[Message, bytes]]) -> Send:
    """``send``, with an answer whose ``http.response.start`` ``takes`` accepts buffered whole
    and sent as ``rewrite(start, body)`` makes it (the start message to send, the body)."""
    start: Message | None = None
    body: list[bytes] = []
    passing = False

    async def write(message: Message) -> None:
        nonlocal start, passing
        if message["type"] == "http.response.start":
            if not takes(message):
                passing = True
                await send(message)  # as it is
                return
            start = message
            return
        if passing or start is None:
            await send(message)
            return
        body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        new_start, whole = rewrite(start, b"".join(body))
        await send(new_start)
        await send({"type": "http.response.body", "body": whole})

    return write
