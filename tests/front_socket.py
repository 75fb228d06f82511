"""An API server in process, its front served over a real socket by this project's
HTTP/1.1 protocol (``http1.ServerProtocol``), as ``serve`` runs it: for tests that send
bytes a client library would not (malformed requests, cut bodies)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from controlplane.api.app import create_app
from controlplane.api.http1 import ServerProtocol
from controlplane.client import Client
from controlplane.config import Config


@contextlib.asynccontextmanager
async def front_on_socket(tmp_path: Path) -> AsyncIterator[tuple[int, Client]]:
    """The port the server listens on, and an in-process client of it (for seeding and
    reading back); its store under ``tmp_path``, no TLS, no scheduler."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c, \
            serving(app.state.front, http=ServerProtocol) as port:
        yield port, c


@contextlib.asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[int]:
    """``app`` served by uvicorn in this process (``options`` are its ``uvicorn.Config``'s) on a
    port of 127.0.0.1, which is yielded once it listens; stopped at the end."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = _InProcessServer(uvicorn.Config(app, lifespan="off", log_level="warning", loop="none", **options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # its error
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


class _InProcessServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers alone; the test stops it.

    uvicorn's own takes SIGINT and SIGTERM while it serves and puts back at its end what it
    found at its start. Started in a fixture's setup, it found the handler pytest-asyncio's
    event loop runner had set for that one run; the runner, finding uvicorn's in its place,
    left it, and uvicorn put the runner's back after the test for good: the process's SIGINT
    was a finished run's."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
