"""``serve --controllers``, over a real socket: a controller turned off leaves its objects alone
while the others work, in the server and in a components process; an unknown name stops the
server at start with kube-controller-manager's message."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client
from tests.controllers.helpers import until
from tests.test_cli import running, start_serve

NS = "/namespaces/default"
DEPLOYMENTS, REPLICASETS, JOBS = (f"/apis/apps/v1{NS}/deployments", f"/apis/apps/v1{NS}/replicasets",
                                  f"/apis/batch/v1{NS}/jobs")
PODS = f"/api/v1{NS}/pods"


def _template(app: str, restart: str = "Always") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "nginx"}]}}


async def _without_the_replicaset_controller(kubeconfig: Path) -> None:
    async with Client.from_kubeconfig(kubeconfig) as c:
        await c.create(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": _template("web")}})
        await c.create(REPLICASETS, {"metadata": {"name": "bare"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "bare"}}, "template": _template("bare")}})
        await c.create(JOBS, {"metadata": {"name": "batch"}, "spec": {
            "completions": 1, "template": _template("batch", "Never")}})

        async def deployments_replicaset() -> dict[str, Any] | None:
            items: list[dict[str, Any]] = (await c.list(REPLICASETS))["items"]
            for rs in items:
                refs = rs["metadata"].get("ownerReferences") or ()
                if any(r["kind"] == "Deployment" and r["name"] == "web" for r in refs):
                    return rs
            return None

        async def pods(app: str) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = (await c.list(PODS, labelSelector=f"app={app}"))["items"]
            return items

        # the Deployment controller still makes its ReplicaSet, the Job controller its pod
        rs = await until(deployments_replicaset, timeout=30, message="the Deployment got no ReplicaSet")
        assert rs["spec"]["replicas"] == 2
        await until(lambda: pods("batch"), timeout=30, message="the Job got no pod")
        await asyncio.sleep(2.0)  # as long again for a ReplicaSet controller that would run
        assert await pods("web") == [] and await pods("bare") == []
        for name in (rs["metadata"]["name"], "bare"):  # nor is their status written
            assert "observedGeneration" not in ((await c.get(f"{REPLICASETS}/{name}")).get("status") or {})


@pytest.mark.parametrize("where", [(), ("--components-process",), ("--workers", "2")],
                         ids=["server", "components-process", "workers"])
def test_a_replicaset_controller_turned_off_leaves_replicasets_without_pods(
        tmp_path: Path, where: tuple[str, ...]) -> None:
    extra = ["--controllers", "*,-replicaset-controller", *where]
    with running(start_serve(tmp_path, extra=extra, scheduler=True)) as s:
        asyncio.run(_without_the_replicaset_controller(s.kubeconfig))


def test_an_unknown_controller_stops_the_server_at_start(tmp_path: Path) -> None:
    s = start_serve(tmp_path, extra=["--controllers", "*,-replicaset,-no-such-controller"], scheduler=True)
    assert s.proc.wait(timeout=60) == 2
    assert '"no-such-controller" is not in the list of known controllers' in s.output()
