"""A simulated kubelet registers its Node with its status, as a kubelet does (upstream's
``initialNode`` ends with ``setNodeStatus``; the Node registry keeps a create's status): the
Node's first version, its ADDED event, already has its capacity, allocatable, addresses,
``nodeInfo`` and conditions, so no pod pending when the node joins is turned away for want of
them (``Too many pods``, ``Insufficient cpu``), and the built-in ``node-initialize`` has nothing
left to write. A user's node stages own the conditions: their ``node-initialize`` still runs,
on a Node created with its capacity, as KWOK's documented Nodes are."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client, resource_path
from controlplane.metrics import STAGE_TRANSITIONS
from controlplane.nodes.simulator import NodeSimulator
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating
from tests.test_cli import running, start_serve

EVENTS = resource_path("", "v1", "events", "default")
KWOK_FAST = Path(__file__).parent / "kwok-fast-stages.yaml"


def _conditions(node: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or ()}


async def _added(client: Client, rv: str, names: set[str], seen: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
    async for event in client.watch(NODES, resource_version=rv):
        name = event.object.get("metadata", {}).get("name")
        if name in names:
            seen.setdefault(name, []).append((event.type, event.object))


@contextlib.asynccontextmanager
async def _watching(client: Client, names: set[str]) -> Any:
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    rv = (await client.list(NODES))["metadata"]["resourceVersion"]
    task = asyncio.create_task(_added(client, rv, names, seen))
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _initialized() -> float:
    return float(STAGE_TRANSITIONS.labels(stage="node-initialize", result="ok")._value.get())


async def test_the_node_is_created_with_its_status(client: Client) -> None:
    before = _initialized()
    names = {"sim-node-0", "sim-node-1"}
    async with _watching(client, names) as seen, simulating(client, fast(count=2)) as sim:
        await eventually(lambda: _all_added(seen, names))
        await asyncio.sleep(0.5)  # what would follow: node-initialize's patch, had it run
        got = await client.get(f"{NODES}/sim-node-0")
        node = sim.nodes["sim-node-0"]
    for name in names:
        kind, first = seen[name][0]
        assert kind == "ADDED"
        status = first["status"]
        assert status["capacity"] == status["allocatable"] == {
            "cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}, status
        assert _conditions(first) == {"Ready": "True", "MemoryPressure": "False", "DiskPressure": "False",
                                      "PIDPressure": "False", "NetworkUnavailable": "False"}
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["reason"] == "KubeletReady" and ready["message"] == "kubelet is posting ready status"
        assert ready["lastHeartbeatTime"] and ready["lastTransitionTime"]
        assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
        assert status["addresses"][1]["address"] == name
        assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
        info = status["nodeInfo"]
        assert info["kubeletVersion"] == "v1.37.0-controlplane" and info["architecture"] == "amd64"
        assert info["operatingSystem"] == "linux" and len(info["systemUUID"]) == 36
        assert first["spec"]["podCIDR"]
        # the OS and arch labels a kubelet registers, the deprecated beta ones too (old node selectors)
        labels = first["metadata"]["labels"]
        assert labels["kubernetes.io/os"] == labels["beta.kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] == labels["beta.kubernetes.io/arch"] == "amd64"
        # no status written after it (the simulator's node-initialize had nothing to do); the node
        # lifecycle controller takes the admission's not-ready taint off, as the node is Ready
        assert all(later["status"] == status for _, later in seen[name][1:]), seen[name]
        assert [t for _, later in seen[name] for t in later["spec"].get("taints") or ()] == [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}], seen[name]
    assert _initialized() == before
    # the simulator's view of it: the address it registered, the Ready transition its reports keep
    assert got["status"]["addresses"][0]["address"] == node.ip
    assert node.since == next(c["lastTransitionTime"] for c in got["status"]["conditions"] if c["type"] == "Ready")


async def _all_added(seen: dict[str, list[tuple[str, dict[str, Any]]]], names: set[str]) -> bool:
    return all(name in seen for name in names)


async def test_nodes_others_create_bare_are_still_initialized(client: Client) -> None:
    """A fake Node created without a status (a user's, as KWOK's users create them) gets it from
    the built-in ``node-initialize``, as before."""
    async with simulating(client, fast(count=0)):
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "bare", "annotations": {"kwok.x-k8s.io/node": "fake"}}})

        async def ready() -> dict[str, Any] | None:
            n = await client.get(f"{NODES}/bare")
            return n if _conditions(n).get("Ready") == "True" else None

        node = await eventually(ready)
    assert node["status"]["allocatable"]["pods"] == "110" and node["status"]["nodeInfo"]["kubeletVersion"]


async def test_a_users_node_initialize_still_runs_on_a_node_created_with_its_capacity(client: Client) -> None:
    """With a user's stage file (KWOK's fast stages), the Node is created with its capacity and
    addresses but no conditions: the file's ``node-initialize`` turns it Ready, as in KWOK."""
    before = _initialized()
    stages = load_stages(KWOK_FAST.read_text())
    async with _watching(client, {"sim-node-0"}) as seen, simulating(client, fast(count=1, stages=stages)):
        await eventually(lambda: _all_added(seen, {"sim-node-0"}))

        async def ready() -> dict[str, Any] | None:
            n = await client.get(f"{NODES}/sim-node-0")
            return n if _conditions(n).get("Ready") == "True" else None

        node = await eventually(ready)
    kind, first = seen["sim-node-0"][0]
    assert kind == "ADDED" and "conditions" not in first["status"]
    assert first["status"]["allocatable"]["pods"] == "110"
    assert node["status"]["allocatable"] == first["status"]["allocatable"]
    assert node["status"]["nodeInfo"]["kubeletVersion"]  # the file's template wrote it
    assert _initialized() == before + 1


class _StaleEventsAround:
    """A kubelet's client whose node status patches come with the events a loaded server makes
    likely: the node as it was before the patch (a node event the informer delivers while the
    write is in flight, and again after it answered), and the write's own event while it is
    still in flight. ``writes`` gets each node status patch's path."""

    def __init__(self, sim: NodeSimulator, inner: Client, writes: list[str]) -> None:
        self.sim, self.inner, self.writes = sim, inner, writes

    async def patch(self, path: str, body: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        name = path.split("/")[-2]
        if not path.endswith("/status") or "/nodes/" not in path or name not in self.sim.node_informer.items:
            got: dict[str, Any] = await self.inner.patch(path, body, *args, **kw)
            return got
        self.writes.append(path)
        stale = copy.deepcopy(self.sim.node_informer.items[name])
        self.sim._node_seen(stale)
        await asyncio.sleep(0.05)  # (what it queued, had it drawn a stage, runs now)
        got = await self.inner.patch(path, body, *args, **kw)
        version = int(got["metadata"]["resourceVersion"])

        async def seen() -> bool:
            return int(self.sim.node_informer.items[name]["metadata"]["resourceVersion"]) >= version

        await eventually(seen)  # its own event, seen while the write is still in flight
        self.sim._node_seen(stale)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_users_node_initialize_runs_once_whatever_node_events_come_before_its_own(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node event older than the simulator's own stage write (the node as it was, not Ready yet)
    draws no stage: before, it matched node-initialize again and the same status was written
    twice. KWOK's stage controller skips a version it has already queued a stage for."""
    before = _initialized()
    writes: list[str] = []
    kubelet = NodeSimulator._kubelet

    def stale_events_around(self: NodeSimulator, node: str) -> Any:
        return _StaleEventsAround(self, kubelet(self, node), writes)

    monkeypatch.setattr(NodeSimulator, "_kubelet", stale_events_around)
    stages = load_stages(KWOK_FAST.read_text())
    async with simulating(client, fast(count=1, stages=stages)) as sim:
        async def ready() -> dict[str, Any] | None:
            n = await client.get(f"{NODES}/sim-node-0")
            return n if _conditions(n).get("Ready") == "True" else None

        await eventually(ready)
        await asyncio.sleep(0.3)  # what a second draw would write
        assert writes == ["/api/v1/nodes/sim-node-0/status"]
        assert _initialized() == before + 1
        # its next stage drawn all the same, from the version the informer had once the write answered
        assert sim.nodes["sim-node-0"].stage == "node-heartbeat"


async def test_a_stage_file_without_node_stages_leaves_the_status_to_the_simulator(client: Client) -> None:
    """A stage file of pod stages only: the simulator owns the nodes' status (its status reports),
    and registers them Ready, as with the built-in stages (before, they had no capacity, and no
    conditions until their first status report, minutes later)."""
    stages = [s for s in load_stages(KWOK_FAST.read_text()) if s.kind == "Pod"]
    async with _watching(client, {"sim-node-0"}) as seen, simulating(client, fast(count=1, stages=stages)) as sim:
        await eventually(lambda: _all_added(seen, {"sim-node-0"}))
        assert sim.status_reports
    kind, first = seen["sim-node-0"][0]
    assert kind == "ADDED" and _conditions(first)["Ready"] == "True"
    assert first["status"]["allocatable"]["pods"] == "110"


async def test_pods_pending_when_nodes_join_are_not_turned_away_for_want_of_allocatable(tmp_path: Path) -> None:
    """Over a socket, with the scheduler and the controllers (the node lifecycle controller takes
    the admission's not-ready taint off a Ready node): pods pending before any node exists run
    once the nodes join, without a FailedScheduling about the nodes' resources; the new nodes get
    no taint from the node lifecycle controller."""
    with running(start_serve(tmp_path, scheduler=True)) as serve:
        async with Client.from_kubeconfig(serve.kubeconfig) as client:
            for i in range(6):
                body = pod(f"p{i}")
                body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
                await client.create(PODS, body)

            async def phases() -> set[str]:
                return {p.get("status", {}).get("phase", "") for p in (await client.list(PODS))["items"]}

            async def failed_scheduling() -> list[str]:
                return [e["message"] for e in (await client.list(EVENTS))["items"] if e["reason"] == "FailedScheduling"]

            await eventually(failed_scheduling)  # (no nodes: seen by the scheduler before they join)
            async with simulating(client, fast(count=3)):
                await eventually(lambda: _running(phases), timeout=30)
                nodes = (await client.list(NODES))["items"]
            messages = await failed_scheduling()
    assert not [m for m in messages if "Too many pods" in m or "Insufficient" in m], messages
    assert len(nodes) == 3
    for n in nodes:
        assert _conditions(n).get("Ready") == "True"
        assert not [t for t in n["spec"].get("taints") or () if t["effect"] == "NoExecute"], n["spec"]


async def _running(phases: Any) -> bool:
    return bool(await phases() == {"Running"})


async def test_a_deleted_nodes_address_is_given_again(client: Client) -> None:
    """A deleted node's InternalIP goes back to the simulator's pool, as its pod CIDR does: fake
    nodes made and deleted over and over (an autoscaler's churn) hold no more addresses than
    live nodes, and the network's end wraps round to the addresses freed at its start."""
    async with simulating(client, fast(count=0, node_network="172.16.0.0/29")) as sim:  # 5 addresses
        for round_ in range(4):
            names = [f"churn-{round_}-{i}" for i in range(3)]
            for name in names:
                await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
                    "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}}})

            async def adopted(names: list[str] = names) -> bool:
                return all(n in sim.nodes for n in names)

            async def gone(names: list[str] = names) -> bool:
                return not any(n in sim.nodes for n in names)

            await eventually(adopted)
            ips = {sim.nodes[n].ip for n in names}
            assert len(ips) == 3, ips
            for name in names:
                await client.delete(f"{NODES}/{name}")
            await eventually(gone)
            assert not sim._node_ips, sim._node_ips
