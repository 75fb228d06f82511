"""Components run inside the server's lifespan, as API clients of the app in process."""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

import pytest

from controlplane import components
from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config


async def test_an_enabled_component_runs_as_an_in_process_client_until_shutdown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    stopped = asyncio.Event()

    async def start(client: Client, config: Config) -> None:
        namespaces = await client.list("/api/v1/namespaces")
        seen.extend(n["metadata"]["name"] for n in namespaces["items"])
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    module = types.ModuleType("fake_component")
    module.start = start  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_component", module)
    monkeypatch.setattr(components, "COMPONENTS", [
        components.Component("fake", "fake_component:start", lambda c: True),
        components.Component("unwanted", "no_such_module:start", lambda c: False),
    ])
    app = create_app(Config(data_dir=tmp_path / "data", tls=False))
    async with app.router.lifespan_context(app):
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.02)
        assert "default" in seen and "kube-system" in seen
    assert stopped.is_set()
