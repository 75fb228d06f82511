"""The simulated kubelet's observed generations (nodes/observed.py, KEP-5067): every pod
status the built-in stages write says the generation it was written for, on the status and
on the kubelet's own conditions; a running pod's spec change is reported by the next
write; another writer's condition keeps its own; a user's KWOK stages write none."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client
from controlplane.nodes.observed import observe_patch
from controlplane.nodes.stages import load_stages

from .conftest import PODS, FirstPatchTimesOut, eventually, fast, pod, simulating
from .test_kwok_fast_stages import STAGES as KWOK_FAST_STAGES

Obj = dict[str, Any]
KUBELETS = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}


def generations(got: Obj) -> dict[str, Any]:
    return {c["type"]: c.get("observedGeneration") for c in got["status"].get("conditions") or ()}


async def at(client: Client, name: str, phase: str, generation: int | None) -> Obj:
    got: Obj = await client.get(f"{PODS}/{name}")
    status = got.get("status") or {}
    return got if status.get("phase") == phase and status.get("observedGeneration") == generation else {}


async def test_a_running_pod_reports_its_generation_and_its_spec_changes(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await client.create(PODS, pod("o", "sim-node-0"))
        running = await eventually(lambda: at(client, "o", "Running", 1))
        assert generations(running) == dict.fromkeys(KUBELETS, 1)
        # another writer's condition (a controller's readiness gate), then a spec change
        await client.patch(f"{PODS}/o/status", {"status": {"conditions": [
            {"type": "example.com/gate", "status": "True", "observedGeneration": 1}]}}, "strategic")
        changed = await client.patch(f"{PODS}/o", {"spec": {"activeDeadlineSeconds": 600}})
        assert changed["metadata"]["generation"] == 2
        seen = await eventually(lambda: at(client, "o", "Running", 2))
        assert generations(seen) == {**dict.fromkeys(KUBELETS, 2), "example.com/gate": 1}
        # kubectl debug: the ephemeral container's status write carries the new generation
        await client.patch(f"{PODS}/o/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "registry.k8s.io/pause:3.10"}]}}, "strategic")
        debugged = await eventually(lambda: at(client, "o", "Running", 3))
        assert debugged["status"]["ephemeralContainerStatuses"][0]["name"] == "dbg"
        assert generations(debugged)["Ready"] == 3


async def test_the_writes_of_a_spec_change_that_time_out_are_written_again(client: Client) -> None:
    """The kubelet's report of a new generation, and of an ephemeral container started, each time
    out once (a loaded server): each is written again from the pod as it is then."""
    slow = FirstPatchTimesOut(client, "/pods/o/status", "'observedGeneration': 2")
    async with simulating(slow, fast(count=1)):  # type: ignore[arg-type]  # (a Client in all but name)
        await client.create(PODS, pod("o", "sim-node-0"))
        await eventually(lambda: at(client, "o", "Running", 1))
        await client.patch(f"{PODS}/o", {"spec": {"activeDeadlineSeconds": 600}})
        await eventually(lambda: at(client, "o", "Running", 2))
        assert slow.failed == [f"{PODS}/o/status"]
        slow.failed.clear()
        slow.marker = "ephemeralContainerStatuses"
        await client.patch(f"{PODS}/o/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "registry.k8s.io/pause:3.10"}]}}, "strategic")
        debugged = await eventually(lambda: at(client, "o", "Running", 3))
        assert slow.failed == [f"{PODS}/o/status"]
        [status] = debugged["status"]["ephemeralContainerStatuses"]
        assert status["name"] == "dbg" and "running" in status["state"]


async def test_a_pod_waiting_for_its_image_and_a_finished_one_report_theirs(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        never = pod("w", "sim-node-0", image="example.com/absent:1")
        never["spec"]["containers"][0]["imagePullPolicy"] = "Never"
        await client.create(PODS, never)
        waiting = await eventually(lambda: at(client, "w", "Pending", 1))
        assert waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull"
        assert generations(waiting) == dict.fromkeys(KUBELETS, 1)
        await client.create(PODS, pod("j", "sim-node-0", restartPolicy="Never"))
        done = await eventually(lambda: at(client, "j", "Succeeded", 1))
        assert generations(done) == dict.fromkeys(KUBELETS, 1)


async def test_kwoks_own_stages_write_none(client: Client) -> None:
    """A user's stages (KWOK's fast ones, unchanged) know nothing of the field: the pod runs
    without one, as under a kubelet older than 1.33, and a spec change is not reported."""
    stages = load_stages(KWOK_FAST_STAGES.read_text())
    async with simulating(client, fast(count=1, stages=stages)):
        await client.create(PODS, pod("k", "sim-node-0"))
        running = await eventually(lambda: at(client, "k", "Running", None))
        assert all(g is None for g in generations(running).values())


def test_the_patch_for_a_spec_change_touches_only_the_kubelets_conditions() -> None:
    conditions = [{"type": "Ready", "status": "True", "observedGeneration": 3},
                  {"type": "DisruptionTarget", "status": "True", "observedGeneration": 3}]
    running: Obj = {"metadata": {"generation": 4},
                    "status": {"phase": "Running", "observedGeneration": 3, "conditions": conditions}}
    assert observe_patch(running) == {"status": {"observedGeneration": 4, "conditions": [
        {"type": "Ready", "observedGeneration": 4}]}}
    assert observe_patch({**running, "metadata": {"generation": 3}}) is None  # said already
    assert observe_patch({**running, "metadata": {"generation": 4, "deletionTimestamp": "x"}}) is None
    assert observe_patch({**running, "status": {**running["status"], "phase": "Succeeded"}}) is None
