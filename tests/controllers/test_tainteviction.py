"""The taint eviction controller (controllers/tainteviction.py): its decision, as upstream's
GetMatchingTolerations and getMinTolerationTime make it, and a failed eviction's retry."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.tainteviction import (
    TaintEvictionController,
    min_toleration_seconds,
    no_execute_taints,
)

MAINT = {"key": "maint", "value": "yes", "effect": "NoExecute"}
GPU = {"key": "gpu", "effect": "NoExecute"}


def test_an_untolerated_taint_evicts_now() -> None:
    assert min_toleration_seconds([MAINT], []) == 0
    assert min_toleration_seconds([MAINT], [{"key": "maint", "value": "no", "effect": "NoExecute"}]) == 0
    assert min_toleration_seconds([MAINT, GPU], [{"key": "maint", "operator": "Exists"}]) == 0


def test_tolerations_without_a_time_keep_the_pod_and_the_shortest_time_wins() -> None:
    assert min_toleration_seconds([MAINT], [{"operator": "Exists"}]) is None
    assert min_toleration_seconds([MAINT, GPU], [
        {"key": "maint", "operator": "Exists", "tolerationSeconds": 60},
        {"key": "gpu", "operator": "Exists", "tolerationSeconds": 30}]) == 30
    # the first toleration matching a taint is the one used, and one without a time is for ever
    assert min_toleration_seconds([MAINT, GPU], [
        {"key": "maint", "operator": "Exists", "tolerationSeconds": 60},
        {"operator": "Exists"}]) == 60
    assert min_toleration_seconds([MAINT], [{"key": "maint", "operator": "Exists", "tolerationSeconds": -5}]) == 0


def test_only_noexecute_taints_count_the_node_lifecycle_ones_too_on_simulated_nodes() -> None:
    taints = [MAINT, {"key": "x", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    assert no_execute_taints({"spec": {"taints": taints}}) == [MAINT, taints[2]]
    # the simulator no longer evicts for its nodes: the controller does, as for any node
    simulated = {"metadata": {"annotations": {"kwok.x-k8s.io/node": "fake"}}, "spec": {"taints": taints}}
    assert no_execute_taints(simulated) == [MAINT, taints[2]]


async def test_an_eviction_that_fails_is_tried_again(tmp_path: Path) -> None:
    """A delete the server refuses (a 500 here, a timeout in a loaded run) leaves the pod
    on the tainted node only until the retry a second later, not for ever."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        client = Client.in_process(app.state.front)
        await client.create("/api/v1/nodes", {"metadata": {"name": "n"}, "spec": {"taints": [MAINT]}})
        pods = "/api/v1/namespaces/default/pods"
        await client.create(pods, {"metadata": {"name": "p"}, "spec": {
            "nodeName": "n", "containers": [{"name": "c", "image": "busybox"}]}})
        controller = TaintEvictionController(client)
        delete = client.delete
        refused: list[str] = []

        async def refuse_once(path: str, *args: Any, **kw: Any) -> Any:
            if not refused:
                refused.append(path)
                raise ApiError(500, "InternalError", "refused by the test")
            return await delete(path, *args, **kw)

        client.delete = refuse_once  # type: ignore[method-assign]
        task = asyncio.create_task(controller.run())
        try:
            async with asyncio.timeout(10):
                while not (await client.get(f"{pods}/p"))["metadata"].get("deletionTimestamp"):
                    await asyncio.sleep(0.05)  # bound: deleted with its grace period, no kubelet to end it
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert refused == [f"{pods}/p"]
