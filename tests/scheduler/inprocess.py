"""The scheduler alone inside a real API app, in process (no socket, no subprocess):
``running(tmp_path, monkeypatch)`` yields the ``Cluster`` of ``test_scheduler`` over it,
after ``configure`` has had a look at the new ``Scheduler`` (shorter timeouts...);
``make`` builds it instead of ``Scheduler(client)`` (another registry or profile)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from controlplane import components
from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from controlplane.scheduler import scheduler as scheduler_module
from controlplane.scheduler.scheduler import Scheduler

from .test_scheduler import Cluster

__all__ = ["Cluster", "running"]


@contextlib.asynccontextmanager
async def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  configure: Callable[[Scheduler], None] | None = None,
                  make: Callable[[Client], Scheduler] = Scheduler) -> AsyncIterator[Cluster]:
    made: list[Scheduler] = []

    async def start(client: Client, config: Config) -> None:
        s = make(client)
        if configure is not None:
            configure(s)
        made.append(s)
        await s.run()

    monkeypatch.setattr(scheduler_module, "start", start)
    monkeypatch.setattr(components, "COMPONENTS", [
        components.Component("scheduler", "controlplane.scheduler.scheduler:start", lambda c: c.scheduler)])
    app = create_app(Config(data_dir=tmp_path / "data", tls=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client:
        for _ in range(250):
            if made and made[0].synced.is_set():
                break
            await asyncio.sleep(0.02)
        assert made and made[0].synced.is_set(), "the scheduler did not sync"
        yield Cluster(client, made[0])
