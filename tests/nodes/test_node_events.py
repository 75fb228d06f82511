"""The simulated kubelets' Events about their nodes (``nodes/events.py``, ``NodeEvents``)."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane import cli
from controlplane.client import Client, resource_path
from tests.nodes.conftest import eventually, fast, simulating

EVENTS = resource_path("", "v1", "events", "default")
NODES = resource_path("", "v1", "nodes")
REGISTERED = ["Starting", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID",
              "NodeAllocatableEnforced", "NodeReady"]


async def _node_events(client: Client, node: str) -> list[dict[str, Any]]:
    items = (await client.list(EVENTS))["items"]
    return [e for e in items if e["involvedObject"].get("kind") == "Node" and e["involvedObject"].get("name") == node
            and e["source"].get("component") == "kubelet"]


def _by_reason(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["reason"]: e for e in events}


async def _with(client: Client, node: str, *reasons: str) -> dict[str, dict[str, Any]]:
    got = _by_reason(await _node_events(client, node))
    return got if all(r in got for r in reasons) else {}


async def test_a_registered_node_has_the_kubelets_events_in_upstreams_words(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        got = await eventually(lambda: _with(client, "sim-node-0", *REGISTERED))
    n = "sim-node-0"
    assert {r: e["message"] for r, e in got.items()} == {
        "Starting": "Starting kubelet.",
        "NodeHasSufficientMemory": f"Node {n} status is now: NodeHasSufficientMemory",
        "NodeHasNoDiskPressure": f"Node {n} status is now: NodeHasNoDiskPressure",
        "NodeHasSufficientPID": f"Node {n} status is now: NodeHasSufficientPID",
        "NodeAllocatableEnforced": "Updated Node Allocatable limit across pods",
        "NodeReady": f"Node {n} status is now: NodeReady",
    }
    for e in got.values():
        # the kubelet's nodeRef (1.35+): apiVersion v1, its name for a uid, no resourceVersion; in default
        # no namespace at all: ObjectReference's fields are omitempty, so kube-apiserver never writes ""
        assert e["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": n, "uid": n}, e["involvedObject"]
        assert e["metadata"]["namespace"] == "default"
        assert e["source"] == {"component": "kubelet", "host": n}
        assert e["reportingComponent"] == "kubelet" and e["reportingInstance"] == n
        assert e["type"] == "Normal" and e["count"] == 1


async def test_a_cordon_and_an_uncordon_are_seen_by_the_kubelet(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await eventually(lambda: _with(client, "sim-node-0", "NodeReady"))
        assert "NodeNotSchedulable" not in _by_reason(await _node_events(client, "sim-node-0"))
        await client.patch(f"{NODES}/sim-node-0", {"spec": {"unschedulable": True}}, patch_type="merge")
        got = await eventually(lambda: _with(client, "sim-node-0", "NodeNotSchedulable"))
        assert got["NodeNotSchedulable"]["message"] == "Node sim-node-0 status is now: NodeNotSchedulable"
        assert "NodeSchedulable" not in got  # a kubelet starts thinking its node schedulable: no event then
        await client.patch(f"{NODES}/sim-node-0", {"spec": {"unschedulable": None}}, patch_type="merge")
        got = await eventually(lambda: _with(client, "sim-node-0", "NodeSchedulable"))
        assert got["NodeSchedulable"]["message"] == "Node sim-node-0 status is now: NodeSchedulable"
        assert got["NodeNotSchedulable"]["count"] == 1


async def _ready_count(client: Client, node: str, count: int) -> dict[str, dict[str, Any]]:
    got = _by_reason(await _node_events(client, node))
    return got if got.get("NodeReady", {}).get("count") == count else {}


async def test_a_kubelet_reporting_not_ready_says_so_and_ready_again_as_it_recovers(client: Client) -> None:
    async with simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _with(client, "sim-node-0", "NodeReady"))
        sim.fail_node("sim-node-0", "not-ready")
        got = await eventually(lambda: _with(client, "sim-node-0", "NodeNotReady"))
        assert got["NodeNotReady"]["message"] == "Node sim-node-0 status is now: NodeNotReady"
        assert got["NodeNotReady"]["source"]["component"] == "kubelet"
        sim.recover_node("sim-node-0")
        # the same event again: the correlator counts it
        await eventually(lambda: _ready_count(client, "sim-node-0", 2))


async def test_an_unreachable_kubelet_records_nothing_until_it_is_back(client: Client) -> None:
    async with simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _with(client, "sim-node-0", "NodeReady"))
        sim.fail_node("sim-node-0", "unreachable")
        await client.patch(f"{NODES}/sim-node-0", {"spec": {"unschedulable": True}}, patch_type="merge")
        await asyncio.sleep(0.5)
        assert "NodeNotSchedulable" not in _by_reason(await _node_events(client, "sim-node-0"))
        sim.recover_node("sim-node-0")  # (its Ready never left True here: no second NodeReady)
        await eventually(lambda: _with(client, "sim-node-0", "NodeNotSchedulable"))


async def test_without_node_events_the_kubelets_record_none(client: Client) -> None:
    async with simulating(client, fast(count=1, node_events=False)) as sim:
        assert sim.node_events is None
        await client.patch(f"{NODES}/sim-node-0", {"spec": {"unschedulable": True}}, patch_type="merge")
        await asyncio.sleep(0.5)
        while sim.pending_writes():
            await asyncio.sleep(0.02)
    assert await _node_events(client, "sim-node-0") == []


def test_the_switch_is_no_node_events_on_serve_and_nodes() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["serve"]).node_events is True
    assert parser.parse_args(["serve", "--no-node-events"]).node_events is False
    assert parser.parse_args(["nodes", "--kubeconfig", "kc"]).node_events is True
    assert parser.parse_args(["nodes", "--kubeconfig", "kc", "--no-node-events"]).node_events is False
