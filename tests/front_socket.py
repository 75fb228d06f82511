"""An API server in process, its front served over a real socket by this project's
HTTP/1.1 protocol (``http1.ServerProtocol``), as ``serve`` runs it: for tests that send
bytes a client library would not (malformed requests, cut bodies)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from controlplane.api.app import create_app
from controlplane.api.http1 import ServerProtocol
from controlplane.client import Client
from controlplane.config import Config


@contextlib.asynccontextmanager
async def front_on_socket(tmp_path: Path) -> AsyncIterator[tuple[int, Client]]:
    """The port the server listens on, and an in-process client of it (for seeding and
    reading back); its store under ``tmp_path``, no TLS, no scheduler."""
    import uvicorn

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app.state.front, http=ServerProtocol, lifespan="off",
                                               log_level="warning", loop="none"))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            yield sock.getsockname()[1], c
        finally:
            server.should_exit = True
            await task
