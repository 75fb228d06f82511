"""The node lifecycle controller (controllers/nodelifecycle.py): taints from a Node's conditions,
on any node whoever wrote them, and the taint eviction controller evicting for them."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from controlplane.client import ApiError, Client
from controlplane.controllers.nodelifecycle import lifecycle_taints, tainted
from tests.controllers.helpers import until

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def node(ready: str | None = "True", taints: list[dict[str, Any]] | None = None, **conditions: str) -> dict[str, Any]:
    conds = [{"type": t, "status": s} for t, s in conditions.items()]
    if ready is not None:
        conds.insert(0, {"type": "Ready", "status": ready})
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return {"metadata": {"name": "n"}, "spec": spec, "status": {"conditions": conds}}


def pairs(taints: list[dict[str, Any]] | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in taints or ()}


def test_ready_false_and_unknown_give_their_taints_and_true_none() -> None:
    assert tainted(node()) is None
    assert pairs(tainted(node("False"))) == {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")}
    assert pairs(tainted(node("Unknown"))) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    added = tainted(node("False")) or []
    assert all(t["timeAdded"].endswith("Z") for t in added) and added[0]["effect"] == "NoSchedule"
    # one replaces the other; a user's taint stays; Ready again takes them all off
    user = {"key": "maint", "value": "yes", "effect": "NoExecute"}
    held = [user, {"key": NOT_READY, "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]
    assert pairs(tainted(node("Unknown", held))) == {("maint", "NoExecute"), (UNREACHABLE, "NoSchedule"),
                                                     (UNREACHABLE, "NoExecute")}
    assert tainted(node("True", held)) == [user]
    assert tainted(node("False", held)) is None  # right already: its timeAdded stays


def test_conditions_and_cordons_give_the_noschedule_taints_of_taint_nodes_by_condition() -> None:
    got = tainted(node(MemoryPressure="True", DiskPressure="True", PIDPressure="True", NetworkUnavailable="True"))
    assert pairs(got) == {(f"node.kubernetes.io/{k}", "NoSchedule")
                          for k in ("memory-pressure", "disk-pressure", "pid-pressure", "network-unavailable")}
    assert tainted(node(MemoryPressure="False", NetworkUnavailable="False")) is None
    cordoned = node()
    cordoned["spec"]["unschedulable"] = True
    assert pairs(tainted(cordoned)) == {("node.kubernetes.io/unschedulable", "NoSchedule")}


def test_a_node_without_a_ready_condition_keeps_its_noexecute_taints() -> None:
    held = [{"key": UNREACHABLE, "effect": "NoExecute"}, {"key": UNREACHABLE, "effect": "NoSchedule"}]
    wanted, have, _ = lifecycle_taints(node(None, held))
    assert wanted == frozenset() and have == {(UNREACHABLE, "NoSchedule")}
    assert tainted(node(None, held)) == [held[0]]  # the NoSchedule one follows the (missing) condition


async def _set_ready(c: Client, name: str, status: str) -> None:
    await c.patch(f"{NODES}/{name}/status", {"status": {"conditions": [
        {"type": "Ready", "status": status, "reason": "Test", "message": "set by a client",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        patch_type="strategic")


async def _taints(c: Client, name: str) -> set[tuple[str, str]]:
    return pairs((await c.get(f"{NODES}/{name}")).get("spec", {}).get("taints"))


async def _terminating(c: Client, name: str) -> bool:
    try:
        return bool((await c.get(f"{PODS}/{name}"))["metadata"].get("deletionTimestamp"))
    except ApiError as e:
        return e.code == 404


def _pod(name: str, node_name: str, seconds: int | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "app"}], **spec}}
    if seconds is not None:
        body["spec"]["tolerations"] = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                                        "tolerationSeconds": seconds}]
    return body


async def _events(c: Client, reason: str) -> list[str]:
    items = (await c.list("/api/v1/namespaces/default/events"))["items"]
    return [e["message"] for e in items if e.get("reason") == reason]


async def test_a_client_setting_ready_false_taints_the_node_and_its_pods_go_after_toleration_seconds(
        client: Client) -> None:
    c = client
    # a node no simulator manages (no kwok annotation): only its client writes its status
    await c.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    await _set_ready(c, "bare", "True")
    await c.create(PODS, _pod("quick", "bare", 1, terminationGracePeriodSeconds=30))
    await c.create(PODS, _pod("slow", "bare"))  # the default 300 s (DefaultTolerationSeconds)
    await c.create(PODS, _pod("forever", "bare", tolerations=[{"operator": "Exists"}]))
    assert await _taints(c, "bare") == set()

    await _set_ready(c, "bare", "False")
    await until(lambda: _eq(_taints(c, "bare"), {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")}), timeout=5)
    await until(lambda: _terminating(c, "quick"), timeout=5)  # no kubelet here: it stays Terminating
    quick = await c.get(f"{PODS}/quick")
    assert any(cond["type"] == "DisruptionTarget" and cond["reason"] == "DeletionByTaintManager"
               for cond in quick["status"]["conditions"])
    assert not await _terminating(c, "slow") and not await _terminating(c, "forever")
    await until(lambda: _events(c, "NodeNotReady"), timeout=5)

    await _set_ready(c, "bare", "Unknown")  # the taint of the other kind replaces it
    await until(lambda: _eq(_taints(c, "bare"), {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}),
                timeout=5)

    # recovery: the taints go, and with them the eviction waiting on its 300 s
    await _set_ready(c, "bare", "True")
    await until(lambda: _eq(_taints(c, "bare"), set()), timeout=5)
    await until(lambda: _has(_events(c, "TaintManagerEviction"), "Cancelling deletion of Pod default/slow"), timeout=5)
    assert not await _terminating(c, "slow")


async def test_pressure_and_cordon_taint_noschedule_and_untaint_when_they_end(client: Client) -> None:
    c = client
    await c.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"},
                           "spec": {"taints": [{"key": "mine", "effect": "NoSchedule"}]}})
    await c.patch(f"{NODES}/bare/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]}}, patch_type="strategic")
    await until(lambda: _eq(_taints(c, "bare"), {("mine", "NoSchedule"),
                                                 ("node.kubernetes.io/disk-pressure", "NoSchedule")}), timeout=5)
    await c.patch(f"{NODES}/bare", {"spec": {"unschedulable": True}})
    await until(lambda: _has(_taints(c, "bare"), ("node.kubernetes.io/unschedulable", "NoSchedule")), timeout=5)
    await c.patch(f"{NODES}/bare", {"spec": {"unschedulable": False}})
    await c.patch(f"{NODES}/bare/status", {"status": {"conditions": [{"type": "DiskPressure", "status": "False"}]}},
                  patch_type="strategic")
    await until(lambda: _eq(_taints(c, "bare"), {("mine", "NoSchedule")}), timeout=5)


async def _eq(awaitable: Any, want: Any) -> bool:
    return bool(await awaitable == want)


async def _has(awaitable: Any, item: Any) -> bool:
    return item in await awaitable


async def test_a_taint_write_that_fails_is_tried_again(tmp_path: Path) -> None:
    """A node marked unhealthy once gets no further event: a failed taint patch (a 500 here, a
    client timeout under load) is handled again after a delay (the work queue's rate-limited
    requeue), not left for an event that never comes."""
    from controlplane.api.app import create_app
    from controlplane.config import Config
    from controlplane.controllers.nodelifecycle import NodeLifecycleController

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        await c.create("/api/v1/nodes", {"metadata": {"name": "n"}})
        controller = NodeLifecycleController(c)
        patch = c.patch
        refused: list[str] = []

        async def refuse_once(path: str, *args: Any, **kw: Any) -> Any:
            if path == "/api/v1/nodes/n" and not refused:
                refused.append(path)
                raise ApiError(500, "InternalError", "refused by the test")
            return await patch(path, *args, **kw)

        c.patch = refuse_once  # type: ignore[method-assign]
        task = asyncio.create_task(controller.run())
        try:
            await patch("/api/v1/nodes/n/status", {"status": {"conditions": [
                {"type": "Ready", "status": "Unknown"}]}}, patch_type="strategic")
            async with asyncio.timeout(10):
                while not ((await c.get("/api/v1/nodes/n")).get("spec") or {}).get("taints"):
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert refused == ["/api/v1/nodes/n"]
