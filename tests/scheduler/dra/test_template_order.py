"""The resourceclaim controller and a ResourceClaimTemplate created after the pod or PodGroup that
names it (``kubectl apply -f dir/`` creates in file order): the template's creation requeues them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client, resource_path
from controlplane.config import Config
from controlplane.scheduler.dra.claims import ClaimController

PODS = resource_path("", "v1", "pods", "default")
TEMPLATES = resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default")
PODGROUPS = resource_path("scheduling.k8s.io", "v1beta1", "podgroups", "default")


def template(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}}}}


def pod(name: str, template_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
                     "containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[tuple[Client, ClaimController]]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        ctl = ClaimController(c)
        task = asyncio.create_task(ctl.run())
        await asyncio.wait_for(ctl.templates.synced.wait(), 10)
        try:
            yield c, ctl
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _eventually(check: Any, timeout: float = 5.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


async def test_a_template_created_after_its_pod_gives_the_pod_its_claim(
        controller: tuple[Client, ClaimController]) -> None:
    c, ctl = controller
    await c.create(PODS, pod("early", "late-template"))
    await asyncio.sleep(0.5)  # the controller has looked at the pod and found no template
    assert not ((await c.get(f"{PODS}/early")).get("status") or {}).get("resourceClaimStatuses")
    await c.create(TEMPLATES, template("late-template"))

    async def claimed() -> Any:
        return ((await c.get(f"{PODS}/early")).get("status") or {}).get("resourceClaimStatuses")

    statuses = await _eventually(claimed)
    assert statuses and statuses[0]["name"] == "gpu" and statuses[0]["resourceClaimName"].startswith("early-gpu-")
    assert not getattr(ctl, "_awaiting_template", None)  # nothing left waiting


async def test_a_template_created_after_its_podgroup_gives_the_group_its_claim(
        controller: tuple[Client, ClaimController]) -> None:
    c, _ = controller
    await c.create(PODGROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "group-template"}]}})
    await asyncio.sleep(0.5)
    await c.create(TEMPLATES, template("group-template"))

    async def claimed() -> Any:
        return ((await c.get(f"{PODGROUPS}/g")).get("status") or {}).get("resourceClaimStatuses")

    statuses = await _eventually(claimed)
    assert statuses and statuses[0]["resourceClaimName"].startswith("g-gpu-")


async def test_a_deleted_pod_stops_waiting_for_its_template(controller: tuple[Client, ClaimController]) -> None:
    c, ctl = controller
    await c.create(PODS, pod("gone", "never"))
    assert await _eventually(lambda: _true(ctl._awaiting_template))
    await c.delete(f"{PODS}/gone", gracePeriodSeconds=0)
    assert await _eventually(lambda: _true(not ctl._awaiting_template))


async def _true(value: Any) -> bool:
    return bool(value)
