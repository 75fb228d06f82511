"""The simulated kubelet's in-place resize (nodes/resize.py): actuated when the node has
room (the statuses report the new resources, PodResizeInProgress for one write), else
PodResizePending Infeasible (beyond the node's allocatable) or Deferred (no room beside
the other pods now; decided again when one leaves or a resize is done)."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client
from controlplane.nodes.resize import resize_decision, resize_patch, settled_patch, wants_resize

from .conftest import PODS, FirstPatchTimesOut, eventually, fast, pod, simulating

Obj = dict[str, Any]


def with_cpu(name: str, cpu: str) -> Obj:
    body = pod(name, "sim-node-0")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    return body


async def resize(client: Client, name: str, cpu: str) -> Obj:
    return await client.patch(f"{PODS}/{name}/resize", {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}, "strategic")


async def running(client: Client, name: str) -> Obj:
    got: Obj = await client.get(f"{PODS}/{name}")
    return got if (got.get("status") or {}).get("phase") == "Running" else {}


def condition(pod_obj: Obj, kind: str) -> Obj | None:
    return next((c for c in pod_obj["status"].get("conditions") or () if c["type"] == kind), None)


async def test_a_resize_that_fits_is_actuated_and_reported(client: Client) -> None:
    async with simulating(client, fast()):
        await client.create(PODS, with_cpu("r", "100m"))
        started = await eventually(lambda: running(client, "r"))
        [cs] = started["status"]["containerStatuses"]
        assert cs["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
        # allocated: its requests (written since 1.36, InPlacePodVerticalScalingAllocatedStatus gone), the pod's too
        assert cs["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert started["status"]["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
        assert started["status"]["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert (await resize(client, "r", "200m"))["metadata"]["generation"] == 2

        async def actuated() -> Obj | None:
            got: Obj = await client.get(f"{PODS}/r")
            [cs] = got["status"]["containerStatuses"]
            done = cs["resources"]["requests"]["cpu"] == "200m" and condition(got, "PodResizeInProgress") is None
            return got if done else None

        got = await eventually(actuated)
        assert got["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "200m"
        assert got["status"]["containerStatuses"][0]["allocatedResources"] == {"cpu": "200m", "memory": "64Mi"}
        assert got["status"]["resources"] == {"requests": {"cpu": "200m", "memory": "64Mi"}}
        assert got["status"]["allocatedResources"] == {"cpu": "200m", "memory": "64Mi"}
        assert got["status"]["observedGeneration"] == 2
        assert condition(got, "PodResizePending") is None
        assert condition(got, "Ready")["observedGeneration"] == 2  # type: ignore[index]  # the kubelet's own too


async def test_a_resize_whose_status_write_times_out_is_written_again(client: Client) -> None:
    """The kubelet's write of an actuated resize times out (a loaded server): it is decided and
    written again from the pod as it is then, not lost with the pod's statuses left behind its spec."""
    slow = FirstPatchTimesOut(client, "/pods/r/status", "PodResizeInProgress")
    async with simulating(slow, fast()):  # type: ignore[arg-type]  # (a Client in all but name)
        await client.create(PODS, with_cpu("r", "100m"))
        await eventually(lambda: running(client, "r"))
        await resize(client, "r", "200m")

        async def actuated() -> bool:
            got: Obj = await client.get(f"{PODS}/r")
            return bool(got["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "200m"
                        and got["status"].get("observedGeneration") == 2
                        and condition(got, "PodResizeInProgress") is None)

        await eventually(actuated)
        assert slow.failed == [f"{PODS}/r/status"]


async def test_a_resize_beyond_the_node_is_infeasible_and_one_without_room_deferred(client: Client) -> None:
    async with simulating(client, fast()):
        async def allocatable() -> Obj:
            got: Obj = (await client.get("/api/v1/nodes/sim-node-0")).get("status") or {}
            return got.get("allocatable") or {}

        cpus = int((await eventually(allocatable))["cpu"])
        await client.create(PODS, with_cpu("small", "100m"))
        await client.create(PODS, with_cpu("hog", f"{cpus - 1}"))
        await eventually(lambda: running(client, "small"))
        await eventually(lambda: running(client, "hog"))
        await resize(client, "small", f"{cpus + 1}")

        async def pending(reason: str) -> Obj | None:
            got: Obj = await client.get(f"{PODS}/small")
            c = condition(got, "PodResizePending")
            return c if c is not None and c.get("reason") == reason else None

        infeasible = await eventually(lambda: pending("Infeasible"))
        assert infeasible["message"] == (f"Node didn't have enough capacity: cpu, requested: {(cpus + 1) * 1000}, "
                                         f"capacity: {cpus * 1000}")
        await resize(client, "small", "2")  # fits the node, not beside the hog
        deferred = await eventually(lambda: pending("Deferred"))
        assert deferred["message"] == (f"Node didn't have enough resource: cpu, requested: 2000, "
                                       f"used: {(cpus - 1) * 1000}, capacity: {cpus * 1000}")
        got = await client.get(f"{PODS}/small")
        assert got["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "100m"
        assert got["status"]["observedGeneration"] == 3

        async def actuated(name: str, cpu: str) -> bool:
            got = await client.get(f"{PODS}/{name}")
            return bool(got["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == cpu
                        and condition(got, "PodResizePending") is None
                        and condition(got, "PodResizeInProgress") is None)

        # the hog shrinks (room for one more cpu): the deferred resize is actuated once that is done
        await resize(client, "hog", f"{cpus - 2}")
        await eventually(lambda: actuated("hog", f"{cpus - 2}"))
        await eventually(lambda: actuated("small", "2"))
        # asked for more again, deferred; the hog goes: actuated
        await resize(client, "small", "3")
        await eventually(lambda: pending("Deferred"))
        await client.delete(f"{PODS}/hog", {"gracePeriodSeconds": 0})
        await eventually(lambda: actuated("small", "3"))


async def test_a_pod_level_resize_is_actuated_and_reported_at_pod_level(client: Client) -> None:
    """InPlacePodLevelResourcesVerticalScaling: a pod with pod-level resources reports them in
    ``status.resources`` once running; a resize of them is decided by its pod-level requests
    (beyond the node: Infeasible) and, when it fits, reported there."""
    async with simulating(client, fast()):
        body = pod("pl", "sim-node-0", resources={"requests": {"cpu": "100m", "memory": "64Mi"}})
        await client.create(PODS, body)
        started = await eventually(lambda: running(client, "pl"))
        assert started["status"]["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
        node = await client.get("/api/v1/nodes/sim-node-0")
        cpus = int(node["status"]["allocatable"]["cpu"])

        async def resize_pod(cpu: str) -> None:
            await client.patch(f"{PODS}/pl/resize", {"spec": {"resources": {"requests": {"cpu": cpu}}}}, "strategic")

        await resize_pod(f"{cpus + 1}")

        async def infeasible() -> Obj | None:
            c = condition(await client.get(f"{PODS}/pl"), "PodResizePending")
            return c if c is not None and c.get("reason") == "Infeasible" else None

        assert (await eventually(infeasible))["message"].startswith("Node didn't have enough capacity: cpu, requested:")
        await resize_pod("300m")

        async def actuated() -> Obj | None:
            got: Obj = await client.get(f"{PODS}/pl")
            done = got["status"]["resources"]["requests"]["cpu"] == "300m" and \
                condition(got, "PodResizePending") is None and condition(got, "PodResizeInProgress") is None
            return got if done else None

        got = await eventually(actuated)
        assert got["status"]["resources"] == {"requests": {"cpu": "300m", "memory": "64Mi"}}
        assert got["status"]["observedGeneration"] == 3


def test_the_patches_say_in_progress_once_and_pending_only_when_it_changes() -> None:
    obj: Obj = {"metadata": {"generation": 2, "resourceVersion": "7"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                           "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}
    assert wants_resize(obj)
    assert resize_decision(obj, {"cpu": "4", "memory": "1Gi"}, []) == ("", "")
    patch = resize_patch(obj, "", "", "t")
    assert patch is not None and patch["metadata"] == {"resourceVersion": "7"}
    status = patch["status"]
    assert [c["type"] for c in status["conditions"]] == ["Ready", "PodResizeInProgress"]
    assert status["containerStatuses"][0]["resources"] == {"requests": {"cpu": "1"}}
    done = {**obj, "status": {**obj["status"], **status}}
    assert not wants_resize(done)
    settled = settled_patch(done)
    assert settled is not None and [c["type"] for c in settled["status"]["conditions"]] == ["Ready"]
    pending = resize_patch(obj, "Deferred", "m", "t")
    assert pending is not None
    assert resize_patch({**obj, "status": {**obj["status"], **pending["status"]}}, "Deferred", "m", "t2") is None


def test_another_pods_pod_level_allocation_counts_against_a_resize() -> None:
    """A pod with pod-level resources holds its pod level's reported requests on the node
    (3 cpus, not its container's 100m), so a resize that fits beside its containers alone is
    Deferred (upstream's PodRequests with pod-level resources, for the allocated pods too)."""
    other: Obj = {"metadata": {"generation": 1},
                  "spec": {"resources": {"requests": {"cpu": "3"}},
                           "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
                  "status": {"phase": "Running", "resources": {"requests": {"cpu": "3"}},
                             "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}
    obj: Obj = {"metadata": {"generation": 2},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
                "status": {"phase": "Running",
                           "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}
    reason, message = resize_decision(obj, {"cpu": "4", "memory": "1Gi"}, [other])
    assert (reason, message) == ("Deferred", "Node didn't have enough resource: cpu, requested: 2000, used: 3000, "
                                             "capacity: 4000")
