"""The parts of the components that ``serve --controllers`` turns off one by one: the Deployment
and ReplicaSet controllers and the garbage collector's part (controllers/workloads.py), the
EndpointSlice and Endpoints controllers (controllers/endpoints.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from tests.controllers.helpers import until

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"
BACKGROUND = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
ORPHAN = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}


@asynccontextmanager
async def serving(tmp_path: Path, controllers: Sequence[str]) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=1, controllers=tuple(controllers)))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


def _spec(app: str, replicas: int) -> dict[str, Any]:
    return {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                         "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "x"}]}}}


async def _pods(c: Client, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await c.list(PODS, labelSelector=f"app={app}"))["items"]
    return items


async def _gone(c: Client, path: str) -> bool:
    try:
        await c.get(path)
    except ApiError as e:
        return e.code == 404
    return False


async def test_without_the_collector_dependents_stay_and_orphan_finalizers_hold(tmp_path: Path) -> None:
    async with serving(tmp_path, ["*", "-garbage-collector-controller"]) as c:
        await c.create(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": _spec("web", 1)})
        rs = await until(lambda: _only(c))
        await until(lambda: _pods(c, "web"))
        await c.delete(f"{DEPLOYMENTS}/web", BACKGROUND)
        await until(lambda: _gone(c, f"{DEPLOYMENTS}/web"))
        await asyncio.sleep(1.0)  # a collector would have deleted the ReplicaSet by now
        assert (await c.get(f"{REPLICASETS}/{rs['metadata']['name']}"))["metadata"]["uid"] == rs["metadata"]["uid"]
        deleting = await c.delete(f"{REPLICASETS}/{rs['metadata']['name']}", ORPHAN)
        assert "orphan" in deleting["metadata"]["finalizers"]  # the API adds it, as kube-apiserver does
        await asyncio.sleep(1.0)
        held = await c.get(f"{REPLICASETS}/{rs['metadata']['name']}")
        assert held["metadata"]["deletionTimestamp"] and "orphan" in held["metadata"]["finalizers"]


async def _only(c: Client) -> dict[str, Any] | None:
    items = (await c.list(REPLICASETS))["items"]
    return items[0] if len(items) == 1 else None


async def test_without_the_deployment_controller_replicasets_still_run_and_are_collected(tmp_path: Path) -> None:
    async with serving(tmp_path, ["*", "-deployment"]) as c:  # (the alias of before 1.30)
        await c.create(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": _spec("web", 1)})
        await c.create(REPLICASETS, {"metadata": {"name": "bare"}, "spec": _spec("bare", 2)})
        await until(lambda: _two(c, "bare"))
        assert [rs["metadata"]["name"] for rs in (await c.list(REPLICASETS))["items"]] == ["bare"]
        assert "observedGeneration" not in ((await c.get(f"{DEPLOYMENTS}/web")).get("status") or {})
        await c.delete(f"{REPLICASETS}/bare", BACKGROUND)

        async def collected() -> bool:
            return not [p for p in await _pods(c, "bare") if not p["metadata"].get("deletionTimestamp")]

        await until(collected)


async def _two(c: Client, app: str) -> bool:
    return len(await _pods(c, app)) == 2


async def test_the_endpoints_controller_turned_off_leaves_the_slices_to_theirs(tmp_path: Path) -> None:
    async with serving(tmp_path, ["*", "-endpoints-controller"]) as c:
        await c.create(REPLICASETS, {"metadata": {"name": "web"}, "spec": _spec("web", 1)})
        await c.create("/api/v1/namespaces/default/services", {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80}]}})

        async def sliced() -> bool:
            slices = (await c.list("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                                   labelSelector="kubernetes.io/service-name=web"))["items"]
            return any(s.get("endpoints") for s in slices)

        await until(sliced, timeout=30)
        assert await _gone(c, "/api/v1/namespaces/default/endpoints/web")
