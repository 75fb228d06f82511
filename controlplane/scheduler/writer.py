"""The scheduler's writes (bindings, events, conditions).

Inside ``serve`` the client is a ``Client.in_process`` one, whose single-answer
requests go straight into the ASGI app (``client.transport.call``): nothing to
add here. Over a socket, writes are bounded, in two lanes: at most
``SOCKET_CONCURRENCY`` bindings and conditions in flight, and apart from them
at most ``EVENT_CONCURRENCY`` events, so a server slow to answer never makes
bindings queue behind events (upstream's event broadcaster writes from its own
goroutine, and drops what overflows its queue, as ``events.EventRecorder``
does): an event's create and its series' patches go in the event lane. Each
request in flight holds a connection of the client's pool.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..client import Client

__all__ = ["EVENT_CONCURRENCY", "SOCKET_CONCURRENCY", "Writer"]

SOCKET_CONCURRENCY = 64
EVENT_CONCURRENCY = 8


class Writer:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.in_process = getattr(client, "_app", None) is not None
        self._slots = asyncio.Semaphore(SOCKET_CONCURRENCY)
        self._event_slots = asyncio.Semaphore(EVENT_CONCURRENCY)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.in_process:
            return await self.client.create(path, body)
        async with self._slots:
            return await self.client.create(path, body)

    async def create_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.in_process:
            return await self.client.create(path, body)
        async with self._event_slots:
            return await self.client.create(path, body)

    async def patch_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A strategic merge patch of an Event (an events.k8s.io one's series), in the event lane."""
        if self.in_process:
            return await self.client.patch(path, body, patch_type="strategic")
        async with self._event_slots:
            return await self.client.patch(path, body, patch_type="strategic")

    async def patch(self, path: str, body: dict[str, Any], patch_type: str) -> dict[str, Any]:
        if self.in_process:
            return await self.client.patch(path, body, patch_type=patch_type)
        async with self._slots:
            return await self.client.patch(path, body, patch_type=patch_type)
