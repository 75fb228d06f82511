"""An API server in this process, without its scheduler and controllers, and a client of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from tests.api.webhook_server import WebhookServer, webhook_server


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    """A real HTTPS webhook server with its own CA (``webhook_server.py``), one per test module."""
    with webhook_server(tmp_path_factory.mktemp("hook")) as server:
        yield server
