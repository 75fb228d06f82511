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


async def test_a_component_that_fails_says_so_while_the_server_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Its task is gathered only when the server stops: without a word at its failure, a server whose
    autoscaler could not start (a catalog it could not read) ran on as if it had none asked for."""
    async def start(client: Client, config: Config) -> None:
        await client.list("/api/v1/namespaces")
        raise ValueError("catalog.yaml: expected a non-empty list of instance types")

    module = types.ModuleType("failing_component")
    module.start = start  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "failing_component", module)
    monkeypatch.setattr(components, "COMPONENTS", [
        components.Component("failing", "failing_component:start", lambda c: True)])
    app = create_app(Config(data_dir=tmp_path / "data", tls=False))
    said = "component failing stopped: ValueError: catalog.yaml: expected a non-empty list of instance types"
    async with app.router.lifespan_context(app):
        for _ in range(250):
            if any(r.getMessage() == said for r in caplog.records):
                break
            await asyncio.sleep(0.02)
        failure = [r for r in caplog.records if r.getMessage() == said]
        assert len(failure) == 1 and failure[0].levelname == "ERROR" and failure[0].exc_info is not None
    # stopping the server cancels the others; nothing more is said of them
    assert not [r for r in caplog.records if "stopped:" in r.getMessage() and r.getMessage() != said]


async def test_components_write_as_the_programs_they_stand_for(tmp_path: Path) -> None:
    """Each component's requests carry its program's User-Agent, so the server names the field
    managers of their writes as upstream's would be: the kubelet's status writes are "kubelet"'s,
    the scheduler's and the controllers' theirs (not an anonymous "")."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=1))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.create("/apis/apps/v1/namespaces/default/deployments", {
            "metadata": {"name": "web"}, "spec": {
                "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})

        async def running() -> dict | None:
            pods = (await c.list("/api/v1/namespaces/default/pods"))["items"]
            return next((p for p in pods if p.get("status", {}).get("phase") == "Running"), None)

        pod = None
        for _ in range(200):
            if pod := await running():
                break
            await asyncio.sleep(0.05)
        assert pod is not None
        managers = {(e["manager"], e["operation"], e.get("subresource", "")) for e in pod["metadata"]["managedFields"]}
        assert ("kube-controller-manager", "Update", "") in managers  # the ReplicaSet controller's create
        assert ("kubelet", "Update", "status") in managers
        assert "" not in {m for m, _, _ in managers}
        rs = (await c.list("/apis/apps/v1/namespaces/default/replicasets"))["items"][0]
        assert ("kube-controller-manager", "Update", "status") in {
            (e["manager"], e["operation"], e.get("subresource", "")) for e in rs["metadata"]["managedFields"]}


def test_an_agents_view_shares_the_clients_informers() -> None:
    c = Client("http://127.0.0.1:1")
    view = c.as_agent("kubelet")
    assert view._shared is c._shared and view.http is c.http
    assert view._json["User-Agent"].startswith("kubelet/v1.")
