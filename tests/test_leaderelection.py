"""The components' Lease judged by this process's clock, not by the holder's renewTime.

Another server's Lease counts as expired once it has gone ``leaseDurationSeconds`` without a
change seen here (client-go's leaderelection), so replicas whose clocks disagree neither take
a live holder's Lease (its renewTime looks old) nor wait on a dead one's (it looks new).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from controlplane.leaderelection import LEASE_NAMESPACE, run_elected

LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
NAME = "skewed"  # not the server's own components' Lease


@pytest_asyncio.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


def _stamp(offset: float) -> str:
    """A renewTime written by a clock ``offset`` seconds off this one."""
    t = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _held_by_other(c: Client, offset: float) -> dict[str, Any]:
    lease: dict[str, Any] = await c.create(LEASES, {"metadata": {"name": NAME}, "spec": {
        "holderIdentity": "other", "leaseDurationSeconds": 1, "renewTime": _stamp(offset)}})
    return lease


async def _elected_within(c: Client, seconds: float, renew: asyncio.Event | None = None,
                          offset: float = 0.0) -> bool:
    """Whether a standby (lease 1 s, retries every 0.1 s) starts its components within
    ``seconds``, while the other holder renews (with its skewed clock) as long as ``renew`` is set."""
    started = asyncio.Event()

    def start() -> list[asyncio.Task[None]]:
        started.set()
        return []

    async def holder() -> None:
        while renew is not None and renew.is_set():
            lease = await c.get(f"{LEASES}/{NAME}")
            lease["spec"]["renewTime"] = _stamp(offset)
            await c.update(f"{LEASES}/{NAME}", lease)
            await asyncio.sleep(0.2)

    standby = asyncio.create_task(run_elected(c, start, "me", lease_duration=1.0, renew_deadline=0.8,
                                              retry_period=0.1, name=NAME))
    renewing = asyncio.create_task(holder())
    try:
        await asyncio.wait_for(started.wait(), seconds)
        return True
    except TimeoutError:
        return False
    finally:
        standby.cancel()
        renewing.cancel()
        await asyncio.gather(standby, renewing, return_exceptions=True)


async def test_a_renewing_holder_whose_clock_is_behind_keeps_the_lease(client: Client) -> None:
    await _held_by_other(client, offset=-3600.0)
    renew = asyncio.Event()
    renew.set()
    assert not await _elected_within(client, 1.5, renew, offset=-3600.0)  # taken at once before
    renew.clear()
    assert await _elected_within(client, 3.0)  # once it stops, within the lease's second or so


async def test_a_dead_holder_whose_clock_was_ahead_loses_the_lease_after_its_duration(client: Client) -> None:
    await _held_by_other(client, offset=3600.0)  # held for an hour more, by this clock
    assert await _elected_within(client, 3.0)  # never, before: not for an hour
