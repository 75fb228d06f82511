"""Binding conditions at the scheduler's level (KEP-5007): a PreBind that gives up, on a
``bindingFailureConditions`` True or after the binding timeout, releases the claim's
allocation and sends the pod back to the queue; the pod is placed again and bound once
the device is ready. The scheduler runs in process over a real API app."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import ApiError, resource_path
from controlplane.scheduler.plugins.dynamic_resources import DynamicResources
from controlplane.scheduler.scheduler import Scheduler
from tests.scheduler.helpers import create_node, node, pod
from tests.scheduler.inprocess import Cluster, running

R = ("resource.k8s.io", "v1")
CLAIMS = resource_path(*R, "resourceclaims", "default")
DRIVER = "fabric.example.com"
NODE = "fabric-node"
ATTACHED, FAILED = "example.com/attached", "example.com/attach-failed"


def _condition(type_: str) -> dict[str, Any]:
    return {"type": type_, "status": "True", "reason": "Reported", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


async def _fabric(cluster: Cluster) -> None:
    """A node with one device that binds only once the driver says it is attached."""
    c = cluster.c
    await create_node(c, node(NODE))
    await c.create(resource_path(*R, "deviceclasses"), {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fabric"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    await c.create(resource_path(*R, "resourceslices"), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric-slice"},
        "spec": {"driver": DRIVER, "nodeName": NODE,
                 "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "link-0", "bindsToNode": True, "bindingConditions": [ATTACHED],
                              "bindingFailureConditions": [FAILED]}]}})
    await c.create(CLAIMS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": "link", "namespace": "default"},
                            "spec": {"devices": {"requests": [{"name": "l", "exactly": {
                                "deviceClassName": "fabric"}}]}}})
    await cluster.pods(pod("attached", resourceClaims=[{"name": "link", "resourceClaimName": "link"}]))


async def _report(cluster: Cluster, type_: str) -> bool:
    """The driver reports ``type_`` True on the allocated device; False if the claim is not
    allocated (or changed under the write: the caller tries again)."""
    claim = await cluster.c.get(f"{CLAIMS}/link")
    if not (claim.get("status") or {}).get("allocation"):
        return False
    claim["status"]["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": "link-0",
                                   "conditions": [_condition(type_)]}]
    try:
        await cluster.c.update(f"{CLAIMS}/link/status", claim)
    except ApiError as e:
        if e.code == 409:
            return False
        raise
    return True


async def _scheduled_condition(cluster: Cluster) -> str:
    """The message of the pod's PodScheduled=False condition ("" if none)."""
    for c in (await cluster.get("attached"))["status"].get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c["message"])
    return ""


async def _allocated_with_devices(cluster: Cluster) -> dict[str, Any] | None:
    claim = await cluster.c.get(f"{CLAIMS}/link")
    return claim if (claim.get("status") or {}).get("allocation") else None


async def _until_value(cluster: Cluster, get: Callable[[], Awaitable[Any]]) -> Any:
    box: list[Any] = []

    async def check() -> bool:
        got = await get()
        if got:
            box.append(got)
        return bool(got)

    await cluster.until(check)
    return box[-1]


class ClaimHistory:
    """Every version of the claim "link" the API shows, in order, as ``(allocated, consumers)``:
    a release is an unallocated version between two allocated ones."""

    def __init__(self, cluster: Cluster) -> None:
        self.versions: list[tuple[bool, int]] = []
        self._task = asyncio.ensure_future(self._watch(cluster))

    async def _watch(self, cluster: Cluster) -> None:
        async for ev in cluster.c.watch(CLAIMS, field_selector="metadata.name=link", send_initial_events=True):
            if ev.type in ("ADDED", "MODIFIED"):
                st = ev.object.get("status") or {}
                self.versions.append((bool(st.get("allocation")), len(st.get("reservedFor") or ())))

    def releases(self) -> int:
        """How often an allocation was taken back (with its consumer)."""
        v = self.versions
        return sum(1 for a, b in itertools.pairwise(v) if a == (True, 1) and b == (False, 0))

    def close(self) -> None:
        self._task.cancel()


def _attempts(sched: Scheduler) -> int:
    held = sched.queue.pods.get("default/attached")
    return held.attempts if held is not None else 0


async def _bound_when_attached(cluster: Cluster) -> dict[str, Any]:
    """Report the device attached until the pod is bound (a report that lands just before a
    release is lost with the allocation, as a driver's would be), then the claim."""
    async def bound() -> bool:
        if (await cluster.placement()).get("attached") == NODE:
            return True
        claim = await cluster.c.get(f"{CLAIMS}/link")
        conds = [c["type"] for d in (claim.get("status") or {}).get("devices") or () for c in d["conditions"]]
        if ATTACHED not in conds:
            await _report(cluster, ATTACHED)
        return False

    await cluster.until(bound, timeout=10)
    claim = await cluster.c.get(f"{CLAIMS}/link")
    pod_uid = (await cluster.get("attached"))["metadata"]["uid"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "attached", "uid": pod_uid}]
    return claim


async def test_a_binding_failure_condition_releases_the_claim_requeues_and_later_binds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await _fabric(cluster)
        with contextlib.closing(ClaimHistory(cluster)) as history:
            first = await _until_value(cluster, lambda: _allocated_with_devices(cluster))
            assert first["status"]["allocation"]["devices"]["results"][0]["bindingFailureConditions"] == [FAILED]
            await cluster.settle(0.3)
            assert (await cluster.placement())["attached"] is None  # waiting in PreBind
            assert _attempts(cluster.sched) == 1
            await cluster.until(lambda: _report(cluster, FAILED))

            # PreBind gives up: the pod is told why, and tried again at once (the release is a
            # claim event that may help it) ...
            async def failed() -> bool:
                return "binding failed" in await _scheduled_condition(cluster)

            await cluster.until(failed)
            message = await _scheduled_condition(cluster)
            # upstream's words (isClaimReadyForBinding, wrapped by RunPreBindPlugins)
            assert message == 'running PreBind plugin "DynamicResources": claim link binding failed: ' \
                              'reason=Reported, message=""'
            await cluster.until(lambda: _attempts(cluster.sched) >= 2)

            # ... and the allocation was released: it is written afresh, without the failed
            # device's report, and the pod waits in PreBind again (the failure is cleared)
            async def reallocated() -> dict[str, Any] | None:
                claim = await _allocated_with_devices(cluster)
                return claim if claim is not None and not claim["status"].get("devices") else None

            again = await _until_value(cluster, reallocated)
            await cluster.until(lambda: history.releases() == 1)  # the watch may trail the read
            assert again["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
            assert (await cluster.placement())["attached"] is None
            assert cluster.sched.queue.where("default/attached") == "inflight"

            claim = await _bound_when_attached(cluster)
            assert [c["type"] for c in claim["status"]["devices"][0]["conditions"]] == [ATTACHED]
            assert cluster.sched.queue.where("default/attached") is None


async def test_the_binding_timeout_releases_the_claim_requeues_and_later_binds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def short_timeout(s: Scheduler) -> None:
        dra = s.fwk.get("DynamicResources")
        assert isinstance(dra, DynamicResources)
        dra.manager.binding_timeout = 0.4

    async with running(tmp_path, monkeypatch, short_timeout) as cluster:
        await _fabric(cluster)
        with contextlib.closing(ClaimHistory(cluster)) as history:
            await _until_value(cluster, lambda: _allocated_with_devices(cluster))

            async def timed_out() -> bool:
                return await _scheduled_condition(cluster) == \
                    'running PreBind plugin "DynamicResources": device binding timeout'

            await cluster.until(timed_out)
            assert (await cluster.placement())["attached"] is None
            # each timeout releases the claim and the pod is tried again: allocated anew each time
            await cluster.until(lambda: _attempts(cluster.sched) >= 3, timeout=5)
            await cluster.until(lambda: history.releases() >= 2)
            # never more than the one consumer, never allocated without it
            assert set(history.versions) <= {(False, 0), (True, 1)}
            await _bound_when_attached(cluster)


async def test_pods_waiting_for_binding_conditions_hold_no_bind_slot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PreBind waiting for a device's binding conditions gives its place among the binding
    cycles writing at once up meanwhile (``framework.BindSlot``): more such pods than places
    do not hold up an ordinary pod's binding (upstream's binding cycles share no bound)."""
    async with running(tmp_path, monkeypatch, make=lambda c: Scheduler(c, bind_concurrency=1)) as cluster:
        c = cluster.c
        await create_node(c, node(NODE))
        await c.create(resource_path(*R, "deviceclasses"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fabric"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
        await c.create(resource_path(*R, "resourceslices"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric-slice"},
            "spec": {"driver": DRIVER, "nodeName": NODE,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"link-{i}", "bindsToNode": True, "bindingConditions": [ATTACHED],
                                  "bindingFailureConditions": [FAILED]}
                                 for i in range(2)]}})
        for i in range(2):  # never reported attached
            await c.create(CLAIMS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                    "metadata": {"name": f"link-{i}", "namespace": "default"},
                                    "spec": {"devices": {"requests": [{"name": "l", "exactly": {
                                        "deviceClassName": "fabric"}}]}}})
            await cluster.pods(pod(f"attached-{i}", resourceClaims=[{"name": "link",
                                                                     "resourceClaimName": f"link-{i}"}]))

        async def both_allocated() -> bool:  # each PreBind has written its claim and waits
            claims = (await c.list(CLAIMS))["items"]
            return sum(1 for cl in claims if (cl.get("status") or {}).get("allocation")) == 2

        await cluster.until(both_allocated)
        await cluster.pods(pod("plain"))
        where = await cluster.bound("plain", timeout=5.0)
        assert where["attached-0"] is None and where["attached-1"] is None


async def test_a_pod_waiting_for_binding_conditions_gets_upstreams_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # upstream's PreBind records BindingConditionsPending (action Scheduling) before it polls
    async with running(tmp_path, monkeypatch) as cluster:
        await _fabric(cluster)

        async def pending() -> list[dict[str, Any]]:
            events = (await cluster.c.list("/apis/events.k8s.io/v1/namespaces/default/events"))["items"]
            return [e for e in events if e.get("reason") == "BindingConditionsPending"]

        [event] = await _until_value(cluster, pending)
        assert event["type"] == "Normal" and event["action"] == "Scheduling"
        assert event["note"] == f"waiting for binding conditions for device on node {NODE}"
        assert event["regarding"]["name"] == "attached"
        await _until_value(cluster, lambda: _report(cluster, ATTACHED))
        await cluster.bound("attached")
