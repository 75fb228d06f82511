"""The servicecidrs controller (controllers/servicecidrs.py): a ServiceCIDR gets its finalizer
and Ready=True; one being deleted stays, Ready=False Terminating, while a Service's cluster
IP lies in it and in no other, and goes once the IP is released; one inside another's
range goes at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.controllers.servicecidrs import ServiceCIDRsController
from tests.controllers.helpers import until

CIDRS = resource_path("networking.k8s.io", "v1", "servicecidrs")
SVCS = resource_path("", "v1", "services", "default")
FINALIZER = "networking.k8s.io/service-cidr-finalizer"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        task = asyncio.create_task(ServiceCIDRsController(c, recheck=0.05, grace=0.0).run())
        try:
            yield c
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def ready(sc: dict[str, Any]) -> tuple[str, str, str] | None:
    for c in (sc.get("status") or {}).get("conditions") or ():
        if c["type"] == "Ready":
            return c["status"], c["reason"], c["message"]
    return None


async def gone(c: Client, name: str) -> bool:
    try:
        await c.get(f"{CIDRS}/{name}")
    except ApiError as e:
        return e.code == 404
    return False


async def test_a_service_cidr_is_held_while_a_cluster_ip_lies_in_it(client: Client) -> None:
    c = client
    await c.create(CIDRS, {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}})

    async def is_ready() -> dict[str, Any] | None:
        sc = await c.get(f"{CIDRS}/extra")
        return sc if ready(sc) == ("True", "", "Kubernetes Service CIDR is ready") else None

    sc = await until(is_ready)
    assert sc["metadata"]["finalizers"] == [FINALIZER]
    await c.create(SVCS, {"metadata": {"name": "a"}, "spec": {"clusterIP": "10.200.0.5", "ports": [{"port": 80}]}})
    await c.delete(f"{CIDRS}/extra")

    async def blocked() -> bool:
        return ready(await c.get(f"{CIDRS}/extra")) == (
            "False", "Terminating", "There are still IPAddresses referencing the ServiceCIDR, please remove them or "
            "create a new ServiceCIDR")

    await until(blocked)
    await asyncio.sleep(0.2)  # (several rechecks)
    assert not await gone(c, "extra")
    await c.delete(f"{SVCS}/a")
    await until(lambda: gone(c, "extra"))


async def test_a_service_cidr_inside_another_goes_at_once(client: Client) -> None:
    c = client
    await c.create(CIDRS, {"metadata": {"name": "inner"}, "spec": {"cidrs": ["10.96.1.0/24"]}})

    async def finalized() -> bool:
        return FINALIZER in ((await c.get(f"{CIDRS}/inner"))["metadata"].get("finalizers") or ())

    await until(finalized)
    await c.create(SVCS, {"metadata": {"name": "b"}, "spec": {"clusterIP": "10.96.1.5", "ports": [{"port": 80}]}})
    await c.delete(f"{CIDRS}/inner")  # the default range holds 10.96.1.5 too
    await until(lambda: gone(c, "inner"))
    assert (await c.get(f"{SVCS}/b"))["spec"]["clusterIP"] == "10.96.1.5"
