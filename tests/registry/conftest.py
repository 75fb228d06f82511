"""The registry tests' served API: an in-process server without a scheduler, its rules
reached through the API as a client reaches them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c
