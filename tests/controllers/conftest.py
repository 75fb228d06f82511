"""A server with its scheduler, controllers and four simulated nodes, for the controllers' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=4))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)
