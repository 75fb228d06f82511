"""The scheduler's writes (bindings, events, conditions).

Inside ``serve`` the client is a ``Client.in_process`` one, whose single-answer
requests go straight into the ASGI app (``client.transport.call``): nothing to
add here. Over a socket, writes are bounded: at most ``SOCKET_CONCURRENCY`` in
flight, the rest wait here. httpcore's connection pool scans its whole queue of
requests for every connection it frees, which makes a queue of hundreds of
bindings and events quadratic; a short one is cheap.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..client import Client

__all__ = ["SOCKET_CONCURRENCY", "Writer"]

SOCKET_CONCURRENCY = 16


class Writer:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.in_process = getattr(client, "_app", None) is not None
        self._slots = asyncio.Semaphore(SOCKET_CONCURRENCY)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.in_process:
            return await self.client.create(path, body)
        async with self._slots:
            return await self.client.create(path, body)

    async def patch(self, path: str, body: dict[str, Any], patch_type: str) -> dict[str, Any]:
        if self.in_process:
            return await self.client.patch(path, body, patch_type=patch_type)
        async with self._slots:
            return await self.client.patch(path, body, patch_type=patch_type)
