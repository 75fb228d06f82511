"""A server with its scheduler, controllers and four simulated nodes, for the controllers' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config, NodeLifecycle


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    # (the node lifecycle controller's pass every 0.2 s, not 5: its zones' states follow at once;
    # NoExecute taints at 50 nodes a second, not 0.1: the tests that are about the rate set their own;
    # volumes provisioned only for the provisioners a CSIDriver registers, not every one)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=4, volume_provisioners=(),
                            node_lifecycle=NodeLifecycle(monitor_period=0.2, eviction_rate=50.0)))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)
