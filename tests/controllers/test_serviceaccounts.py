"""The service account controller (controllers/serviceaccounts.py): ``default`` put back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.serviceaccounts import ServiceAccountsController
from tests.controllers.helpers import until


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        task = asyncio.create_task(ServiceAccountsController(c).run())
        try:
            yield c
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _uid(c: Client, namespace: str) -> str | None:
    try:
        return str((await c.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"))["metadata"]["uid"])
    except ApiError:
        return None


async def test_a_deleted_default_service_account_comes_back_and_pods_can_use_it(client: Client) -> None:
    c = client
    await c.create("/api/v1/namespaces", {"metadata": {"name": "team"}})
    first = await _uid(c, "team")
    assert first is not None  # made with the namespace, before its create answered
    await c.delete("/api/v1/namespaces/team/serviceaccounts/default")
    second = await until(lambda: _uid(c, "team"))
    assert second != first
    pod = await c.create("/api/v1/namespaces/team/pods", {"metadata": {"name": "p"},
                                                          "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert pod["spec"]["serviceAccountName"] == "default"


async def test_none_is_made_in_a_terminating_namespace(client: Client) -> None:
    c = client
    await c.create("/api/v1/namespaces", {"metadata": {"name": "going"}})
    await c.create("/api/v1/namespaces/going/configmaps", {"metadata": {"name": "held", "finalizers": ["t/hold"]}})
    await c.delete("/api/v1/namespaces/going")
    await c.delete("/api/v1/namespaces/going/serviceaccounts/default")
    await asyncio.sleep(0.3)  # what the controller would take to put it back (the test above: at once)
    assert await _uid(c, "going") is None
