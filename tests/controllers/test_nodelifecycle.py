"""The node lifecycle controller (controllers/nodelifecycle.py): taints from a Node's conditions,
on any node whoever wrote them, and the taint eviction controller evicting for them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from controlplane.client import ApiError, Client
from controlplane.config import NodeLifecycle
from controlplane.controllers.nodelifecycle import (
    TokenBucket,
    lifecycle_taints,
    tainted,
    unknown_conditions,
    zone_key,
    zone_state,
)
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


async def _simulated_nodes_ready(c: Client) -> None:
    """Wait for the fixture's four simulated nodes to be Ready, and the controller's next pass:
    until then every zone is without a Ready node, and the controller adds no NoExecute taint."""
    async def ready() -> bool:
        nodes = (await c.list(NODES))["items"]
        return len(nodes) == 4 and all(any(x["type"] == "Ready" and x["status"] == "True"
                                           for x in n.get("status", {}).get("conditions", ())) for n in nodes)
    await until(ready, timeout=10)
    await asyncio.sleep(0.5)


async def _events(c: Client, reason: str) -> list[str]:
    items = (await c.list("/api/v1/namespaces/default/events"))["items"]
    return [e["message"] for e in items if e.get("reason") == reason]


async def test_a_client_setting_ready_false_taints_the_node_and_its_pods_go_after_toleration_seconds(
        client: Client) -> None:
    c = client
    await _simulated_nodes_ready(c)
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
               and cond["observedGeneration"] == 1  # (KEP-5067; its deletion made it 2 since)
               for cond in quick["status"]["conditions"])
    assert not await _terminating(c, "slow") and not await _terminating(c, "forever")
    assert not await _events(c, "NodeNotReady")  # the kubelet's to record, not the controller's

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
                while (UNREACHABLE, "NoSchedule") not in pairs((await c.get("/api/v1/nodes/n"))["spec"].get("taints")):
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert refused == ["/api/v1/nodes/n"]


def test_zones_their_states_and_rates_are_upstreams() -> None:
    assert zone_key({"metadata": {"labels": {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z",
                                              "failure-domain.beta.kubernetes.io/zone": "old"}}}) == "r:\x00:z"
    assert zone_key({"metadata": {"labels": {"failure-domain.beta.kubernetes.io/zone": "old"}}}) == ":\x00:old"
    assert zone_key({"metadata": {}}) == ""
    assert zone_state(0, 1, 0.55) == "FullDisruption"
    assert zone_state(0, 0, 0.55) == "Normal"
    assert zone_state(2, 3, 0.55) == "PartialDisruption"  # 3 of 5 >= 0.55, and more than 2
    assert zone_state(1, 2, 0.55) == "Normal"  # 2 of 3, but not more than 2
    assert zone_state(5, 3, 0.55) == "Normal"
    bucket = TokenBucket(0.5, now=100.0)
    assert bucket.try_accept(100.0) and not bucket.try_accept(101.0) and bucket.try_accept(102.0)
    assert not TokenBucket(0.0, now=0.0).try_accept(1e9)


def test_the_health_pass_writes_unknown_as_upstream() -> None:
    posted = {"metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:01:00Z"},
        {"type": "MemoryPressure", "status": "False"}, {"type": "DiskPressure", "status": "Unknown"},
        {"type": "NetworkUnavailable", "status": "False"}]}}
    got = {c["type"]: c for c in unknown_conditions(posted, "2026-01-01T00:02:00Z") or ()}
    assert set(got) == {"Ready", "MemoryPressure", "PIDPressure"}  # DiskPressure is Unknown already
    assert got["Ready"] == {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                            "message": "Kubelet stopped posting node status.",
                            "lastTransitionTime": "2026-01-01T00:02:00Z"}  # its lastHeartbeatTime kept
    assert got["PIDPressure"]["reason"] == "NodeStatusNeverUpdated"
    assert got["PIDPressure"]["lastHeartbeatTime"] == "2026-01-01T00:00:00Z"  # the node's creation
    posted["status"]["conditions"][0]["status"] = "Unknown"  # type: ignore[index]
    assert unknown_conditions(posted, "2026-01-01T00:02:00Z") is None  # written only when Ready changes


@contextlib.asynccontextmanager
async def _controller(tmp_path: Path, settings: NodeLifecycle) -> AsyncIterator[Client]:
    """A server without the components, and a node lifecycle controller of ``settings`` on it."""
    from controlplane.api.app import create_app
    from controlplane.config import Config
    from controlplane.controllers.nodelifecycle import NodeLifecycleController

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        task = asyncio.create_task(NodeLifecycleController(c, settings).run())
        try:
            yield c
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _conditions(c: Client, name: str) -> dict[str, dict[str, Any]]:
    return {x["type"]: x for x in (await c.get(f"{NODES}/{name}")).get("status", {}).get("conditions") or ()}


async def test_a_node_not_heard_from_turns_unknown_and_a_renewed_lease_is_heard(tmp_path: Path) -> None:
    """Ready True, then neither a Lease renewal nor a heartbeat for the grace period: Unknown,
    and NodeNotReady. Never posted a status: Unknown (NodeStatusNeverUpdated) after the
    startup grace period, unless its Lease is renewed (upstream then takes it as healthy)."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1, monitor_grace_period=2.0,
                                                   startup_grace_period=3.0)) as c:
        for name in ("posted", "silent", "leased", "beating"):
            await c.create(NODES, {"metadata": {"name": name}})
        await _set_ready(c, "posted", "True")
        await _set_ready(c, "beating", "True")
        await c.create(leases, {"metadata": {"name": "leased"}, "spec": {"holderIdentity": "leased",
                                                                         "renewTime": "2026-01-01T00:00:00.000000Z"}})
        started = time.monotonic()
        for i in range(1, 18):  # 5.1 s of renewals and heartbeats, every 0.3 s
            await asyncio.sleep(0.3)
            await c.patch(f"{leases}/leased", {"spec": {"renewTime": f"2026-01-01T00:00:{i:02d}.000000Z"}})
            await c.patch(f"{NODES}/beating/status", {"status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": f"2026-01-01T00:00:{i:02d}Z"}]}},
                patch_type="strategic")
        posted, silent = await _conditions(c, "posted"), await _conditions(c, "silent")
        assert posted["Ready"]["status"] == "Unknown" and posted["Ready"]["reason"] == "NodeStatusUnknown"
        assert posted["Ready"]["lastHeartbeatTime"] == "2026-01-01T00:00:00Z"
        assert {t: x["reason"] for t, x in silent.items()} == dict.fromkeys(
            ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"), "NodeStatusNeverUpdated")
        created = (await c.get(f"{NODES}/silent"))["metadata"]["creationTimestamp"]
        assert all(x["lastHeartbeatTime"] == created for x in silent.values())
        assert await _conditions(c, "leased") == {}
        assert (await _conditions(c, "beating"))["Ready"]["status"] == "True"
        assert time.monotonic() - started > 3.0
        await until(lambda: _eq(_events(c, "NodeNotReady"), ["Node posted status is now: NodeNotReady"]), timeout=5)
        assert await _taints(c, "posted") >= {(UNREACHABLE, "NoSchedule")}


async def test_first_noexecute_taints_go_at_the_zones_rate_and_none_when_every_zone_is_down(tmp_path: Path) -> None:
    """Two nodes of a healthy zone going not ready: one is tainted at once, the other a 1/rate
    later (NoSchedule at once for both). A small zone mostly down (partial disruption) gets no
    new NoExecute taint. Every zone down: the NoExecute taints come off."""
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1, eviction_rate=0.5)) as c:
        zones = {"a": 8, "b": 1}
        for zone, count in zones.items():
            for i in range(count):
                await c.create(NODES, {"metadata": {"name": f"{zone}{i}", "labels": {
                    "topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": zone}}})
                await _set_ready(c, f"{zone}{i}", "True")
        await asyncio.sleep(0.3)  # a pass: the zones are normal

        async def no_execute() -> set[str]:
            return {n["metadata"]["name"] for n in (await c.list(NODES))["items"]
                    if any(t["effect"] == "NoExecute" for t in n.get("spec", {}).get("taints") or ())}

        await _set_ready(c, "a0", "False")
        await _set_ready(c, "a1", "False")

        async def tainted_one() -> bool:
            return len(await no_execute()) == 1
        await until(tainted_one, timeout=5)
        first = time.monotonic()
        other = ({"a0", "a1"} - await no_execute()).pop()
        assert (NOT_READY, "NoSchedule") in await _taints(c, other)  # NoSchedule at once
        await until(lambda: _eq(no_execute(), {"a0", "a1"}), timeout=8)
        assert time.monotonic() - first > 1.5  # 2 s at 0.5 nodes a second

        for i in (2, 3, 4):  # 5 of 8 not ready: a partial disruption, in a zone of at most 50 nodes
            await _set_ready(c, f"a{i}", "False")
        await asyncio.sleep(2.5)  # more than a token's time (2 s) at the normal rate
        assert await no_execute() == {"a0", "a1"}

        for i in (5, 6, 7):
            await _set_ready(c, f"a{i}", "False")
        await _set_ready(c, "b0", "False")  # no zone has a Ready node
        await until(lambda: _eq(no_execute(), set()), timeout=5)
        assert (NOT_READY, "NoSchedule") in await _taints(c, "a0")

        await _set_ready(c, "b0", "True")  # zone b recovers; zone a is fully down: the normal rate, one by one
        async def one() -> bool:
            return len(await no_execute()) == 1
        await until(one, timeout=8)  # (the queue's first: a2, which waited through the partial disruption)
        await asyncio.sleep(1.0)  # the next token is 2 s away
        assert len(await no_execute()) == 1


def test_a_lease_is_renewed_only_forward() -> None:
    from controlplane.controllers.nodelifecycle import _later

    assert _later("2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:00.999999Z")
    assert not _later("2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z")
    assert not _later("2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:01.000000Z")
    assert _later("2026-01-01T00:00:01.5Z", "2026-01-01T00:00:01Z")  # widths differ: parsed
    assert _later("2026-01-01T00:00:00Z", None)


async def test_a_first_taint_that_conflicts_is_tried_again_within_its_token(tmp_path: Path) -> None:
    """The tainter writes from the informer's copy, which may be behind the controller's own
    NoSchedule write: a 409 is tried again on a fresh read, not a token (10 s here) later."""
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1, eviction_rate=0.1)) as c:
        for name in ("up", "down"):
            await c.create(NODES, {"metadata": {"name": name}})
            await _set_ready(c, name, "True")
        await asyncio.sleep(0.3)
        patch = c.patch
        refused: list[str] = []

        async def conflict_once(path: str, body: Any, *args: Any, **kw: Any) -> Any:
            if path == f"{NODES}/down" and not refused and any(
                    t.get("effect") == "NoExecute" for t in (body.get("spec") or {}).get("taints") or ()):
                refused.append(path)
                raise ApiError(409, "Conflict", "refused by the test")
            return await patch(path, body, *args, **kw)

        c.patch = conflict_once  # type: ignore[method-assign]
        await _set_ready(c, "down", "False")
        await until(lambda: _has(_taints(c, "down"), (NOT_READY, "NoExecute")), timeout=5)
        assert refused == [f"{NODES}/down"]


async def test_pods_are_not_marked_not_ready_on_a_ready_node(tmp_path: Path) -> None:
    """A MarkPodsNotReady left to retry does nothing once the kubelet has posted Ready again
    (upstream retries only while the node is not Ready): it has readied its pods."""
    from controlplane.api.app import create_app
    from controlplane.config import Config
    from controlplane.controllers.nodelifecycle import NodeLifecycleController

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        await c.create(NODES, {"metadata": {"name": "n"}})
        await _set_ready(c, "n", "True")
        await c.create(PODS, _pod("p", "n"))
        await c.patch(f"{PODS}/p/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "observedGeneration": 1}]}}, patch_type="strategic")
        controller = NodeLifecycleController(c)
        task = asyncio.create_task(controller.nodes.run())
        try:
            await controller.nodes.synced.wait()
            # turned Unknown at an older heartbeat; the kubelet has posted Ready since
            controller.unheard["n"] = "2025-12-31T00:00:00Z"
            await controller.mark_pods_not_ready("n")
            ready = [x for x in (await c.get(f"{PODS}/p"))["status"]["conditions"] if x["type"] == "Ready"]
            assert [x["status"] for x in ready] == ["True"] and "n" not in controller.unheard
            # turned Unknown at the heartbeat it still has (the informer may not show the write yet)
            controller.unheard["n"] = "2026-01-01T00:00:00Z"
            await controller.mark_pods_not_ready("n")
            ready = [x for x in (await c.get(f"{PODS}/p"))["status"]["conditions"] if x["type"] == "Ready"]
            assert [x["status"] for x in ready] == ["False"]
            assert ready[0]["observedGeneration"] == 1  # the kubelet's, kept as upstream's MarkPodsNotReady
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def test_a_node_set_back_from_unknown_without_a_heartbeat_is_overdue_at_once() -> None:
    """A node found Unknown is skipped by the passes until heard from; set Ready again by a
    client without a new heartbeat, it is still not heard from: the next pass queues it, as
    upstream's, whose probe time did not move."""
    from types import SimpleNamespace

    from controlplane.controllers.nodelifecycle import NodeLifecycleController

    class Held(SimpleNamespace):
        items: dict[str, Any]

    fake = SimpleNamespace(informer=lambda *a, **kw: Held(items={}))
    fake.for_informers = lambda: fake  # (the leases' informer lists as the client it was made from)
    controller = NodeLifecycleController(fake)  # type: ignore[arg-type]
    recorded: list[str] = []
    controller.events = SimpleNamespace(record=lambda _kind, _obj, reason, *_: recorded.append(reason))  # type: ignore[assignment]
    unknown = node("Unknown")
    controller.nodes.items["n"] = unknown
    controller._node_changed(unknown)
    controller.monitor_pass(now=time.monotonic() + 1000)  # overdue and Unknown: not looked at again
    assert controller.due["n"] == float("inf")
    controller.queue = type(controller.queue)()
    ready = node("True")
    controller.nodes.items["n"] = ready
    controller._node_changed(ready)  # (no lastHeartbeatTime, as before)
    controller.monitor_pass(now=time.monotonic() + 1)
    assert not controller.queue.empty()
    assert recorded == ["RegisteredNode"]  # once, when first seen


async def test_the_zones_queues_are_tried_only_while_a_node_waits_in_one() -> None:
    """The tainting loop wakes at upstream's eviction period only while a zone's queue holds a
    node; with every queue empty it sleeps until a node joins one (an idle server's timers)."""
    from types import SimpleNamespace

    from controlplane.controllers import nodelifecycle
    from controlplane.controllers.nodelifecycle import NodeLifecycleController

    fake = SimpleNamespace(informer=lambda *a, **kw: SimpleNamespace(items={}))
    fake.for_informers = lambda: fake
    controller = NodeLifecycleController(fake)  # type: ignore[arg-type]
    passes: list[int] = []

    async def drain_once() -> None:
        passes.append(sum(len(t.waiting) for t in controller.tainters.values()))
        for t in controller.tainters.values():
            t.waiting.clear()
    controller._drain_once = drain_once  # type: ignore[method-assign]
    task = asyncio.create_task(controller._drain_tainters())
    try:
        await asyncio.sleep(5 * nodelifecycle.TAINTER_PERIOD)
        assert passes == []  # nothing waits: no pass
        controller._tainter("").waiting["n"] = None  # as _write_taints queues a node
        controller.tainters_waiting.set()
        await asyncio.sleep(3 * nodelifecycle.TAINTER_PERIOD)
        assert passes == [1]  # one pass gave it its taint; then asleep again
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_pod_bound_to_a_node_not_ready_is_marked_not_ready(tmp_path: Path) -> None:
    """Upstream's processPod: a pod that reports Ready, bound after its node went Unknown (a
    scheduler's binding raced the outage), is marked not Ready with NodeNotReady; a pod bound
    to a Ready node is left alone."""
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1)) as c:
        for name in ("down", "up"):
            await c.create(NODES, {"metadata": {"name": name}})
        await _set_ready(c, "down", "Unknown")
        await _set_ready(c, "up", "True")
        for name, node_name in (("on-down", "down"), ("on-up", "up")):
            pod = _pod(name, node_name)
            pod["spec"].pop("nodeName")
            await c.create(PODS, pod)
            await c.patch(f"{PODS}/{name}/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                          patch_type="strategic")
            await c.create(f"{PODS}/{name}/binding", {"metadata": {"name": name},
                                                      "target": {"kind": "Node", "name": node_name}})

        async def ready(name: str) -> str:
            pod = await c.get(f"{PODS}/{name}")
            return str(next(x["status"] for x in pod["status"]["conditions"] if x["type"] == "Ready"))

        await until(lambda: _eq(ready("on-down"), "False"), timeout=5)
        await until(lambda: _has(_events(c, "NodeNotReady"), "Node is not ready"), timeout=5)
        await asyncio.sleep(0.3)
        assert await ready("on-up") == "True"


async def test_zone_gauges_under_upstreams_names(tmp_path: Path) -> None:
    """node_collector_zone_size, _zone_health (percent Ready) and _unhealthy_nodes_in_zone, by
    upstream's zone key, set on each health pass; the pass's duration is observed."""
    from controlplane.metrics import REGISTRY

    zone = "region-9:\x00:zone-z"
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1)) as c:
        for name, ready in (("za", "True"), ("zb", "True"), ("zc", "False"), ("zd", "Unknown")):
            await c.create(NODES, {"metadata": {"name": name, "labels": {
                "topology.kubernetes.io/region": "region-9", "topology.kubernetes.io/zone": "zone-z"}}})
            await _set_ready(c, name, ready)

        async def gauges() -> tuple[float | None, ...]:
            return tuple(REGISTRY.get_sample_value(f"node_collector_{m}", {"zone": zone})
                         for m in ("zone_size", "zone_health", "unhealthy_nodes_in_zone"))

        await until(lambda: _eq(gauges(), (4.0, 50.0, 2.0)), timeout=5)
        assert (REGISTRY.get_sample_value("node_collector_update_all_nodes_health_duration_seconds_count") or 0) > 0


async def test_a_node_seen_first_is_registered_and_a_deleted_one_removed(tmp_path: Path) -> None:
    """As upstream's health pass: ``RegisteredNode`` when the controller first sees a node (each
    node it knows at start, too), ``RemovingNode`` when it goes; both Normal, about the Node
    (``kubectl describe node`` finds them by its name in ``default``), and only once each."""
    async with _controller(tmp_path, NodeLifecycle(monitor_period=0.1)) as c:
        created = await c.create(NODES, {"metadata": {"name": "fresh"}})
        registered = ["Node fresh event: Registered Node fresh in Controller"]
        await until(lambda: _eq(_events(c, "RegisteredNode"), registered), timeout=5)
        await _set_ready(c, "fresh", "True")  # an update: not a second registration
        await c.delete(f"{NODES}/fresh")
        await until(lambda: _eq(_events(c, "RemovingNode"), ["Node fresh event: Removing Node fresh from Controller"]),
                    timeout=5)
        items = (await c.list("/api/v1/namespaces/default/events"))["items"]
        ours = [e for e in items if e.get("reason") in ("RegisteredNode", "RemovingNode")]
        assert len(ours) == 2 and all(e["count"] == 1 and e["type"] == "Normal" for e in ours)
        assert all(e["source"]["component"] == "node-controller" for e in ours)
        assert all(e["involvedObject"]["kind"] == "Node" and e["involvedObject"]["name"] == "fresh"
                   and e["involvedObject"]["uid"] == created["metadata"]["uid"]
                   and "namespace" not in e["involvedObject"] for e in ours)
        # upstream's RecordNodeEvent reference: apiVersion v1, no resourceVersion
        assert all(e["involvedObject"]["apiVersion"] == "v1" and "resourceVersion" not in e["involvedObject"]
                   for e in ours)
