"""The DaemonSet controller (controllers/daemonsets.py), inside a server with its scheduler and
four simulated nodes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.client import ApiError, Client
from controlplane.controllers.daemonsets import REVISION_HASH, daemon_tolerations
from controlplane.nodes.failures import inject_failure
from controlplane.scheduler.plugins.nodes import _named_nodes
from tests.controllers.helpers import until

DAEMONSETS = "/apis/apps/v1/namespaces/default/daemonsets"
PODS = "/api/v1/namespaces/default/pods"
NODES = {f"sim-node-{i}" for i in range(4)}


def daemonset(name: str, image: str = "agent:1", **template_spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "a", "image": image}], **template_spec}}}}


@pytest.fixture
async def c(client: Client) -> Client:
    """The client, once the four simulated nodes exist."""
    async def all_nodes() -> bool:
        return {n["metadata"]["name"] for n in (await client.list("/api/v1/nodes"))["items"]} >= NODES

    await until(all_nodes)
    return client


async def live_pods(c: Client, name: str) -> list[dict[str, Any]]:
    items = (await c.list(PODS, labelSelector=f"app={name}"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def on_nodes(c: Client, name: str, nodes: set[str], image: str | None = None) -> bool:
    pods = await live_pods(c, name)
    ready = [p for p in pods if any(cond["type"] == "Ready" and cond["status"] == "True"
                                    for cond in (p.get("status") or {}).get("conditions") or ())]
    placed = sorted(p["spec"].get("nodeName", "") for p in ready
                    if image is None or p["spec"]["containers"][0]["image"] == image)
    return placed == sorted(nodes) and len(pods) == len(nodes)


def test_daemon_pods_tolerate_what_upstream_adds() -> None:
    keys = {(t["key"], t["effect"]) for t in daemon_tolerations({"tolerations": [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]})}
    assert ("gpu", "NoSchedule") in keys and ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") in {
        (t["key"], t["effect"]) for t in daemon_tolerations({"hostNetwork": True})}


def test_node_affinity_on_names_narrows_the_candidates() -> None:
    def terms(*ts: dict[str, Any]) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(ts)}}}

    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert _named_nodes(terms(pin)) == {"a", "b"}
    assert _named_nodes(terms(pin, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]})) \
        == {"a", "b", "c"}
    assert _named_nodes(terms(pin, {"matchExpressions": [{"key": "x", "operator": "Exists"}]})) is None
    assert _named_nodes(None) is None and _named_nodes({"nodeAffinity": {}}) is None


async def test_one_pod_per_node_even_a_cordoned_one(c: Client) -> None:
    await c.patch("/api/v1/nodes/sim-node-0", {"spec": {"unschedulable": True}})
    await c.create(DAEMONSETS, daemonset("agent"))
    await until(lambda: on_nodes(c, "agent", NODES))
    pod = (await live_pods(c, "agent"))[0]
    (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]
    assert pod["metadata"]["labels"][REVISION_HASH] and pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    assert pod["metadata"]["labels"]["pod-template-generation"] == "1"

    async def status_done() -> bool:
        s = (await c.get(f"{DAEMONSETS}/agent")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("numberReady"), s.get("updatedNumberScheduled"),
                s.get("observedGeneration")) == (4, 4, 4, 1)

    await until(status_done)


async def test_a_rolling_update_replaces_one_node_at_a_time(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("roll"))
    await until(lambda: on_nodes(c, "roll", NODES))
    worst = 0
    done = asyncio.Event()

    async def watch_unavailable() -> None:
        nonlocal worst
        while not done.is_set():
            pods = await live_pods(c, "roll")
            ready_nodes = {p["spec"].get("nodeName") for p in pods if any(
                cond["type"] == "Ready" and cond["status"] == "True"
                for cond in (p.get("status") or {}).get("conditions") or ())}
            worst = max(worst, len(NODES - ready_nodes))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_unavailable())
    try:
        await c.patch(f"{DAEMONSETS}/roll", {"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "agent:2"}]}}}}, patch_type="strategic")
        await until(lambda: on_nodes(c, "roll", NODES, image="agent:2"))
    finally:
        done.set()
        await watcher
    assert worst <= 1  # maxUnavailable 1 (the default)


async def test_nodes_that_stop_fitting_lose_their_pod_and_new_ones_gain_one(c: Client) -> None:
    await c.patch("/api/v1/nodes/sim-node-1", {"metadata": {"labels": {"gpu": "yes"}}})
    await c.create(DAEMONSETS, daemonset("gpu", nodeSelector={"gpu": "yes"}))
    await until(lambda: on_nodes(c, "gpu", {"sim-node-1"}))
    await c.patch("/api/v1/nodes/sim-node-2", {"metadata": {"labels": {"gpu": "yes"}}})
    await until(lambda: on_nodes(c, "gpu", {"sim-node-1", "sim-node-2"}))
    await c.patch("/api/v1/nodes/sim-node-1", {"metadata": {"labels": {"gpu": None}}})
    await until(lambda: on_nodes(c, "gpu", {"sim-node-2"}))
    # a NoExecute taint the pods do not tolerate takes the node out too
    await c.patch("/api/v1/nodes/sim-node-2", {"spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}})

    async def none_left() -> bool:
        return not await live_pods(c, "gpu")

    await until(none_left)


async def test_a_node_tainted_noschedule_keeps_its_daemon_pod_and_gets_no_new_one(c: Client) -> None:
    # upstream's NodeShouldRunDaemonPod: an untolerated NoSchedule taint stops new daemon pods but
    # not the running one, nor does a tolerated NoExecute one; so a NotReady node (its not-ready
    # taints: NoSchedule, and NoExecute which daemon pods tolerate) keeps its daemons
    await c.create(DAEMONSETS, daemonset("stay", tolerations=[{"key": "y", "operator": "Exists",
                                                                "effect": "NoExecute"}]))
    await until(lambda: on_nodes(c, "stay", NODES))
    before = {p["spec"]["nodeName"]: p["metadata"]["uid"] for p in await live_pods(c, "stay")}
    await c.patch("/api/v1/nodes/sim-node-1", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})
    await c.patch("/api/v1/nodes/sim-node-2", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"},
                                                                   {"key": "y", "effect": "NoExecute"}]}})

    async def misscheduled() -> bool:
        s = (await c.get(f"{DAEMONSETS}/stay")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("numberMisscheduled")) == (2, 2)

    await until(misscheduled)
    await asyncio.sleep(0.5)
    assert {p["spec"]["nodeName"]: p["metadata"]["uid"] for p in await live_pods(c, "stay")} == before
    # a pod deleted there is not replaced: the node no longer gets new daemon pods
    on_1 = next(p["metadata"]["name"] for p in await live_pods(c, "stay") if p["spec"]["nodeName"] == "sim-node-1")
    await c.delete(f"{PODS}/{on_1}")

    async def gone_from_node_1() -> bool:
        return {p["spec"]["nodeName"] for p in await live_pods(c, "stay")} == NODES - {"sim-node-1"}

    await until(gone_from_node_1)
    await asyncio.sleep(0.5)
    assert await gone_from_node_1()


async def test_deleting_a_daemonset_collects_its_pods(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("gone"))
    await until(lambda: on_nodes(c, "gone", NODES))
    await c.delete(f"{DAEMONSETS}/gone", {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": "Background"})

    async def collected() -> bool:
        try:
            await c.get(f"{DAEMONSETS}/gone")
            return False
        except ApiError:
            return not await live_pods(c, "gone")

    await until(collected)


async def test_a_not_ready_node_keeps_its_daemon_pod(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("agent"))
    await until(lambda: on_nodes(c, "agent", NODES))
    uid = next(p["metadata"]["uid"] for p in await live_pods(c, "agent") if p["spec"]["nodeName"] == "sim-node-3")
    await inject_failure(c, "sim-node-3", "not-ready")

    async def tainted() -> bool:
        taints = (await c.get("/api/v1/nodes/sim-node-3"))["spec"].get("taints") or []
        return {(t["key"], t["effect"]) for t in taints} >= {
            ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")}

    await until(tainted)
    await asyncio.sleep(1.0)
    assert uid in {p["metadata"]["uid"] for p in await live_pods(c, "agent")}
