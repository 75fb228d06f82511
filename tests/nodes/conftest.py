"""In-process server, client and a running simulator for the node tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.client import Client, resource_path
from controlplane.config import Config
from controlplane.nodes.config import SimConfig
from controlplane.nodes.simulator import NodeSimulator

PODS = resource_path("", "v1", "pods", "default")
NODES = resource_path("", "v1", "nodes")


def pod(name: str, node: str | None = None, image: str = "registry.k8s.io/pause:3.10",
        **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"containers": [{"name": "c", "image": image}], **spec}}
    if node:
        body["spec"]["nodeName"] = node
    return body


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; its last value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s (last: {got!r})")
        await asyncio.sleep(interval)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False))
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[Client]:
    async with Client.in_process(app.state.front) as c:
        yield c


class FirstPatchTimesOut:
    """``client`` whose first patch of a path ending in ``suffix`` whose body holds ``marker``
    (anywhere in its JSON) times out: the client's timeout on a loaded server, not an ApiError.
    ``failed`` gets that path once it has; everything else goes to ``client``."""

    def __init__(self, client: Client, suffix: str, marker: str) -> None:
        self.inner, self.suffix, self.marker = client, suffix, marker
        self.failed: list[str] = []

    async def patch(self, path: str, body: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        if not self.failed and path.endswith(self.suffix) and self.marker in repr(body):
            self.failed.append(path)
            raise httpx.ReadTimeout("timed out")
        got: dict[str, Any] = await self.inner.patch(path, body, *args, **kw)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def fast(**kw: Any) -> SimConfig:
    """A simulator configuration on a test's time scale."""
    base: dict[str, Any] = {"count": 2, "renew_interval": 0.5, "tick": 0.02,
                            "status_report_frequency": 60.0, "job_seconds": 0.2, "seed": 1, "write_concurrency": 8}
    base.update(kw)
    return SimConfig(**base)


@contextlib.asynccontextmanager
async def simulating(client: Client, config: SimConfig) -> AsyncIterator[NodeSimulator]:
    sim = NodeSimulator(client, config)
    task = asyncio.create_task(sim.run())
    try:
        await asyncio.wait_for(sim.ready(), 20)
        yield sim
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
