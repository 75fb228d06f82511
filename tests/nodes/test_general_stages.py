"""A stage file in the shape of KWOK's general pod stages and its node stages, end to end.

The fixture (``kwok-general-stages.yaml``) has weights and ``weightFrom`` on
every pod stage, partial status templates that rely on a strategic merge patch
to keep the conditions they do not mention, a finalizer of its own, and a
heartbeat stage ten minutes apart.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.nodes.images import ImageCatalog
from controlplane.nodes.instancetypes import DEFAULT_CATALOG, InstanceType
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating

STAGES = Path(__file__).with_name("kwok-general-stages.yaml")
KEPT = {"PodScheduled": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True"}


async def _bind(client: Client, body: dict[str, Any], node: str) -> None:
    """Create the pod unbound and bind it, as the scheduler would (the binding sets PodScheduled)."""
    await client.create(PODS, body)
    name = body["metadata"]["name"]
    await client.create(resource_path("", "v1", "pods", "default", name, "binding"),
                        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions") or []}


async def test_kwok_general_stages_drive_pods_and_keep_their_conditions(client: Client) -> None:
    stages = load_stages(STAGES.read_text())
    assert [s.name for s in stages if s.weight_from is not None][:2] == ["pod-create", "pod-init-container-running"]
    # an image that is not on the node: the simulator's pull comes before the first stage
    itype = InstanceType("test-pull", cpu="8", memory="32Gi", registry_bandwidth_mbps=1000.0, unpack_mbps=1000.0)
    config = fast(count=1, stages=stages, instance_type="test-pull", catalog=(*DEFAULT_CATALOG, itype),
                  image_catalog=ImageCatalog(sizes={"example.com/app": (300.0, 1)}))
    seen: list[dict[str, Any]] = []  # every version of the pods, from a watch

    async def record(rv: str) -> None:
        async for event in client.watch(PODS, resource_version=rv):
            if event.type in ("ADDED", "MODIFIED"):
                seen.append(event.object)

    async with simulating(client, config) as sim:
        node = await eventually(lambda: _ready_node(client))
        watcher = asyncio.create_task(record((await client.list(PODS))["metadata"]["resourceVersion"]))
        try:
            web = pod("web", image="example.com/app:1", terminationGracePeriodSeconds=1,
                      initContainers=[{"name": "setup", "image": "registry.k8s.io/pause:3.10"}])
            await _bind(client, web, "sim-node-0")
            # a pod of a real Job (the garbage collector deletes pods of a Job that does not exist); with
            # parallelism 0 its controller makes no pod of its own
            owner = await client.create("/apis/batch/v1/namespaces/default/jobs", {
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"parallelism": 0, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
            job = pod("job", restartPolicy="Never")
            job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                   "uid": owner["metadata"]["uid"], "controller": False}]
            # (owned, not controlled: the Job of parallelism 0 would delete a pod it controls, as upstream's)
            await _bind(client, job, "sim-node-0")

            got = await eventually(lambda: _in_phase(client, "web", "Running"))
            status = got["status"]
            assert _conditions(got) == KEPT  # PodScheduled from the binding, Initialized from the init stages
            assert status["podIP"].startswith("10.") and status["hostIP"] and status["startTime"]
            [init] = status["initContainerStatuses"]
            assert init["state"]["terminated"]["reason"] == "Completed" and init["state"]["terminated"]["startedAt"]
            [main] = status["containerStatuses"]
            assert main["ready"] is True and main["state"]["running"]["startedAt"]
            assert got["metadata"]["finalizers"] == ["kwok.x-k8s.io/fake"]

            done = await eventually(lambda: _in_phase(client, "job", "Succeeded"))
            assert _conditions(done) == KEPT  # pod-complete's template mentions none: all kept
            assert done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

            # the web pod went through every general stage, in order, and never ran without its IP

            async def web_history() -> list[dict[str, Any]]:  # once the watch has brought it Running
                out = [p["status"] for p in seen if p["metadata"]["name"] == "web" and p.get("status")]
                return out if any(s.get("phase") == "Running" for s in out) else []

            history = await eventually(web_history)
            assert all(s.get("podIP") for s in history if s.get("phase") == "Running")
            phases = [s.get("phase") for s in history]
            assert "Pending" not in phases[phases.index("Running"):]
            inits = [_state(s, "initContainerStatuses") for s in history]
            assert _in_order(inits, ["waiting", "running", "terminated"])
            assert any(_conditions({"status": s}).get("Initialized") == "False" for s in history)

            # the node: initialised by its stage; the heartbeat stage waits its ten minutes
            assert node["status"]["phase"] == "Running" and node["status"]["nodeInfo"]["kubeletVersion"]
            assert sim.nodes["sim-node-0"].stage == "node-heartbeat-with-lease"
            rv = (await client.get(f"{NODES}/sim-node-0"))["metadata"]["resourceVersion"]
            await asyncio.sleep(1.2)
            assert (await client.get(f"{NODES}/sim-node-0"))["metadata"]["resourceVersion"] == rv

            # deletion: pod-remove-finalizer, then pod-delete when the grace period is over
            await client.delete(f"{PODS}/web")
            await eventually(lambda: _gone(client, "web"), timeout=6)

            async def finalizer_removed_first() -> bool:
                return any(p["metadata"].get("deletionTimestamp") and not p["metadata"].get("finalizers")
                           for p in seen if p["metadata"]["name"] == "web")

            await eventually(finalizer_removed_first)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def test_node_stages_wait_their_delay_and_recur(client: Client) -> None:
    text = STAGES.read_text().replace("durationMilliseconds: 600000", "durationMilliseconds: 1000")
    stages = load_stages(text.replace("jitterDurationMilliseconds: 610000", "jitterDurationMilliseconds: 1100"))
    async with simulating(client, fast(count=1, stages=stages)):
        await eventually(lambda: _ready_node(client))
        beats: list[str] = []

        async def record(rv: str) -> None:
            async for event in client.watch(NODES, resource_version=rv):
                conditions = event.object.get("status", {}).get("conditions") or []
                beats.extend(c["lastHeartbeatTime"] for c in conditions if c["type"] == "Ready")

        watcher = asyncio.create_task(record((await client.list(NODES))["metadata"]["resourceVersion"]))
        await asyncio.sleep(3.4)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    # a heartbeat every 1-1.1 s (each in a second of its own, so each is a write): not one, not a loop
    assert 2 <= len(beats) <= 4 and len(set(beats)) == len(beats), beats


async def _ready_node(client: Client) -> dict[str, Any] | None:
    node = await client.get(f"{NODES}/sim-node-0")
    return node if _conditions(node).get("Ready") == "True" else None


async def _in_phase(client: Client, name: str, phase: str) -> dict[str, Any] | None:
    got = await client.get(f"{PODS}/{name}")
    return got if got.get("status", {}).get("phase") == phase else None


async def _gone(client: Client, name: str) -> bool:
    try:
        await client.get(f"{PODS}/{name}")
    except ApiError as e:
        return e.code == 404
    return False


def _state(status: dict[str, Any], field: str) -> str | None:
    """The state (waiting, running, terminated) of the first container of ``field``."""
    items = status.get(field) or []
    return next(iter(items[0].get("state") or {}), None) if items else None


def _in_order(values: list[str | None], wanted: list[str]) -> bool:
    """Whether ``wanted`` appear in ``values`` in that order (others may come between)."""
    it = iter(values)
    return all(any(v == w for v in it) for w in wanted)
