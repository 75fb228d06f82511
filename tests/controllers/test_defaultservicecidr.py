"""kube-apiserver's default ServiceCIDR controller (controllers/defaultservicecidr.py): the
ServiceCIDR ``kubernetes`` created again once deleted, at its next periodic sync, and set
Ready when it has no Ready condition; a False one, one being deleted and one of other CIDRs
left as they are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.controllers.defaultservicecidr import DefaultServiceCIDRController
from controlplane.controllers.servicecidrs import ServiceCIDRsController
from tests.controllers.helpers import until

CIDRS = resource_path("networking.k8s.io", "v1", "servicecidrs")
DEFAULT = f"{CIDRS}/kubernetes"
FINALIZER = "networking.k8s.io/service-cidr-finalizer"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


async def _gone(client: Client) -> bool:
    try:
        await client.get(DEFAULT)
    except ApiError as e:
        return e.code == 404
    return False


async def _without_finalizer(client: Client) -> None:
    await client.patch(DEFAULT, {"metadata": {"finalizers": None}})


def _ready(sc: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (sc.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), None)


async def test_a_deleted_default_comes_back_at_the_next_sync_with_both_controllers(client: Client) -> None:
    """Deleted, it is held by kube-controller-manager's finalizer until no IP needs it (the
    ``kubernetes`` Service's would: a wider range takes it over), then goes; the next of
    the API server's periodic syncs makes it again, Ready, and the servicecidrs controller
    gives it its finalizer back."""
    await client.create(CIDRS, {"metadata": {"name": "wider"}, "spec": {"cidrs": ["10.96.0.0/11"]}})
    tasks = [asyncio.create_task(DefaultServiceCIDRController(client, ["10.96.0.0/12"], interval=0.05).run()),
             asyncio.create_task(ServiceCIDRsController(client, recheck=0.05, grace=0.0).run())]
    try:
        first = await client.get(DEFAULT)
        await client.delete(DEFAULT)
        again = await until(lambda: _recreated(client, first["metadata"]["uid"]), timeout=10)
        assert again["spec"] == {"cidrs": ["10.96.0.0/12"]}
        ready = _ready(again)
        assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == \
            ("True", "", "Kubernetes default Service CIDR is ready")
        await until(lambda: _has_finalizer(client), timeout=10)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _recreated(client: Client, old_uid: str) -> dict[str, Any] | None:
    try:
        sc = await client.get(DEFAULT)
    except ApiError:
        return None
    return sc if sc["metadata"]["uid"] != old_uid and _ready(sc) else None


async def _has_finalizer(client: Client) -> bool:
    return FINALIZER in ((await client.get(DEFAULT))["metadata"].get("finalizers") or ())


async def test_a_sync_creates_the_default_and_writes_its_ready_condition_as_upstreams(client: Client) -> None:
    controller = DefaultServiceCIDRController(client, ["10.96.0.0/12"])
    await client.delete(DEFAULT)
    await controller.sync()  # being deleted: left to kube-controller-manager's controller
    held = await client.get(DEFAULT)
    assert held["metadata"]["deletionTimestamp"] and _ready(held)["status"] == "True"  # type: ignore[index]
    await _without_finalizer(client)
    assert await _gone(client)
    await controller.sync()
    made = await client.get(DEFAULT)
    assert made["spec"] == {"cidrs": ["10.96.0.0/12"]} and not made["metadata"].get("finalizers")
    assert ("kubernetes-service-cidr-controller", "Apply", "status") in \
        [(e.get("manager", ""), e["operation"], e.get("subresource")) for e in made["metadata"]["managedFields"]]
    ready = _ready(made)
    assert ready is not None and ready["status"] == "True"


async def test_a_false_condition_and_other_cidrs_are_left_alone(client: Client) -> None:
    sc = await client.get(DEFAULT)
    not_ready = {"type": "Ready", "status": "False", "reason": "Broken", "message": "by hand",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await client.update(f"{DEFAULT}/status", {**sc, "status": {"conditions": [not_ready]}})
    await DefaultServiceCIDRController(client, ["10.96.0.0/12"]).sync()
    assert (await client.get(DEFAULT))["status"]["conditions"] == [not_ready]
    unknown = {**not_ready, "status": "Unknown"}
    sc = await client.get(DEFAULT)
    await client.update(f"{DEFAULT}/status", {**sc, "status": {"conditions": [unknown]}})
    await DefaultServiceCIDRController(client, ["10.0.0.0/16"]).sync()  # another server's range: a mismatch
    assert (await client.get(DEFAULT))["status"]["conditions"] == [unknown]
    await DefaultServiceCIDRController(client, ["10.96.0.0/12"]).sync()
    ready = _ready(await client.get(DEFAULT))
    assert ready is not None and (ready["status"], ready["message"]) == \
        ("True", "Kubernetes default Service CIDR is ready")
