"""Failure injection: a node's kubelet stops (or reports NotReady), the upstream taints go on,
pods are evicted when their tolerationSeconds run out; recovery undoes it.

The simulator does only the kubelet's part: its Lease stops. Ready turning Unknown once the
Lease has stood still for the grace period, the taints and the evictions are the node
lifecycle and taint eviction controllers', components of the server these tests run
(``controllers/nodelifecycle.py``, ``controllers/tainteviction.py``), here with a grace
period of 3 s. A KWOK chaos stage setting Ready=False gets the same treatment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config, NodeLifecycle
from controlplane.nodes.failures import clear_failure, inject_failure
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")
# Leases renewed every 0.5 s (``fast``): a grace period of 3 s, checked every 0.1 s
# (and NoExecute taints at 50 nodes a second: these tests are not about the rate)
LIFECYCLE = NodeLifecycle(monitor_period=0.1, monitor_grace_period=3.0, eviction_rate=50.0)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, node_lifecycle=LIFECYCLE))
    async with app.router.lifespan_context(app):
        yield app


def tolerating(name: str, node: str, seconds: int | None,
               key: str = "node.kubernetes.io/unreachable") -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return pod(name, node, tolerations=[t], terminationGracePeriodSeconds=0)


async def condition(client: Client, node: str, ctype: str = "Ready") -> str | None:
    n = await client.get(f"{NODES}/{node}")
    return next((c["status"] for c in n.get("status", {}).get("conditions", []) if c["type"] == ctype), None)


async def taints(client: Client, node: str) -> set[tuple[str, str]]:
    n = await client.get(f"{NODES}/{node}")
    return {(t["key"], t["effect"]) for t in n.get("spec", {}).get("taints") or []}


async def gone_or_terminating(client: Client, name: str) -> bool:
    try:
        return bool((await client.get(f"{PODS}/{name}"))["metadata"].get("deletionTimestamp"))
    except ApiError as e:
        return e.code == 404


async def test_unreachable_node_is_tainted_and_its_pods_evicted_after_toleration_seconds(client: Client) -> None:
    async with simulating(client, fast(count=2)):
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"))
        await client.create(PODS, tolerating("quick", "sim-node-0", 1))
        await client.create(PODS, tolerating("forever", "sim-node-0", None))
        await client.create(PODS, pod("default", "sim-node-0"))  # 300 s from DefaultTolerationSeconds
        await client.create(PODS, pod("other-node", "sim-node-1", terminationGracePeriodSeconds=0))
        for name in ("quick", "forever", "default", "other-node"):
            await eventually(lambda name=name: _eq(_phase(client, name), "Running"))  # type: ignore[misc]
        default_pod = await client.get(f"{PODS}/default")
        assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300} in default_pod["spec"]["tolerations"]

        await inject_failure(client, "sim-node-0")
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "Unknown"), timeout=10)
        lease = await client.get(f"{LEASES}/sim-node-0")  # (a renewal may have been under way at the injection)
        await eventually(lambda: _eq(taints(client, "sim-node-0"), {("node.kubernetes.io/unreachable", "NoExecute"),
                                                                    ("node.kubernetes.io/unreachable", "NoSchedule")}))
        await eventually(lambda: gone_or_terminating(client, "quick"), timeout=5)
        await asyncio.sleep(1.0)  # several renew intervals (0.5 s) of the failed node
        assert (await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"] == lease["spec"]["renewTime"]
        assert not await gone_or_terminating(client, "forever")
        assert not await gone_or_terminating(client, "default")
        assert await condition(client, "sim-node-1") == "True"
        assert not await gone_or_terminating(client, "other-node")

        await clear_failure(client, "sim-node-0")
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"), timeout=5)
        await eventually(lambda: _eq(taints(client, "sim-node-0"), set()), timeout=5)
        async def renewed() -> bool:
            return bool((await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"] != lease["spec"]["renewTime"])
        await eventually(renewed, timeout=2)
        # the evicted pod, left Terminating by the dead kubelet, is finished by the live one
        async def gone() -> bool:
            try:
                await client.get(f"{PODS}/quick")
                return False
            except ApiError as e:
                return e.code == 404
        await eventually(gone, timeout=5)


async def test_not_ready_node_keeps_its_lease_and_gets_the_not_ready_taint(client: Client) -> None:
    # (two nodes: were every node not Ready, the controller would add no NoExecute taint)
    async with simulating(client, fast(count=2)) as sim:
        await client.create(PODS, tolerating("p", "sim-node-0", 0, key="node.kubernetes.io/not-ready"))
        await eventually(lambda: _eq(_phase(client, "p"), "Running"))
        before = (await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"]
        sim.fail_node("sim-node-0", "not-ready")  # the Python call, without the annotation
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "False"), timeout=5)
        await eventually(lambda: gone_or_terminating(client, "p"), timeout=5)
        assert ("node.kubernetes.io/not-ready", "NoExecute") in await taints(client, "sim-node-0")  # before evicting
        await asyncio.sleep(1.2)
        assert (await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"] != before  # the kubelet lives
        assert sim.nodes["sim-node-0"].failed == "not-ready"  # the annotation's absence does not undo a call
        sim.recover_node("sim-node-0")
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"), timeout=5)


# KWOK's fast stages, whose node-initialize leaves a node in chaos alone, and a chaos stage in the
# shape of KWOK's node-not-ready (kustomize/stage/node/chaos): a labelled node reports Ready=False
FAST_STAGES = Path(__file__).with_name("kwok-fast-stages.yaml")
CHAOS_LABEL = "node-not-ready.stage.kwok.x-k8s.io"
NODE_NOT_READY = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.metadata.labels["{CHAOS_LABEL}"]'
      operator: 'In'
      values: ['true']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  weight: 10000
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      {{{{ range NodeConditions }}}}
      - type: {{{{ .type | Quote }}}}
        status: {{{{ if eq .type "Ready" }}}}"False"{{{{ else }}}}{{{{ .status | Quote }}}}{{{{ end }}}}
        reason: {{{{ if eq .type "Ready" }}}}"nodeFailed"{{{{ else }}}}{{{{ .reason | Quote }}}}{{{{ end }}}}
        message: {{{{ .message | Quote }}}}
        lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $now | Quote }}}}
      {{{{ end }}}}
"""


def chaos_stages() -> str:
    text = FAST_STAGES.read_text()
    initialize = "  name: node-initialize\nspec:\n  resourceRef:\n    apiGroup: v1\n    kind: Node\n" \
                 "  selector:\n    matchExpressions:\n"
    assert text.count(initialize) == 1
    text = text.replace(initialize, initialize + f"    - key: '.metadata.labels[\"{CHAOS_LABEL}\"]'\n"
                                                  "      operator: 'DoesNotExist'\n")
    return text + "\n---\n" + NODE_NOT_READY


async def test_a_kwok_chaos_stage_setting_ready_false_taints_the_node_and_evicts_after_toleration_seconds(
        client: Client) -> None:
    async with simulating(client, fast(count=2, stages=load_stages(chaos_stages()))) as sim:
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"))
        await client.create(PODS, tolerating("quick", "sim-node-0", 1, key="node.kubernetes.io/not-ready"))
        await client.create(PODS, pod("slow", "sim-node-0", terminationGracePeriodSeconds=0))  # 300 s by default
        for name in ("quick", "slow"):
            await eventually(lambda name=name: _eq(_phase(client, name), "Running"))  # type: ignore[misc]

        await client.patch(f"{NODES}/sim-node-0", {"metadata": {"labels": {CHAOS_LABEL: "true"}}})
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "False"), timeout=5)
        assert not sim.nodes["sim-node-0"].failed  # the stage's doing, not a failure of the simulator's
        await eventually(lambda: _eq(taints(client, "sim-node-0"), {("node.kubernetes.io/not-ready", "NoExecute"),
                                                                    ("node.kubernetes.io/not-ready", "NoSchedule")}),
                         timeout=5)
        await eventually(lambda: _gone(client, "quick"), timeout=5)  # evicted; the live kubelet finishes it
        assert not await gone_or_terminating(client, "slow")

        # recovery: node-initialize makes it Ready again, the taints go, the pending eviction is off
        await client.patch(f"{NODES}/sim-node-0", {"metadata": {"labels": {CHAOS_LABEL: None}}})
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"), timeout=5)
        await eventually(lambda: _eq(taints(client, "sim-node-0"), set()), timeout=5)
        await eventually(lambda: _cancelled(client, "default/slow"), timeout=5)
        assert not await gone_or_terminating(client, "slow")


async def test_without_the_controllers_a_failed_node_stays_ready(tmp_path: Path) -> None:
    """The division of labour: with no controllers (``--no-scheduler``) nothing watches the
    Leases, as in a cluster without kube-controller-manager: the simulator's failure stops its
    Lease and nothing more; the node stays Ready, its pods where they are, with no taint but the
    not-ready one it was created with (TaintNodesAtCreation), which only that controller takes off."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, node_lifecycle=LIFECYCLE))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as client, \
            simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"))
        await client.create(PODS, tolerating("quick", "sim-node-0", 0))
        sim.fail_node("sim-node-0", "unreachable")
        await asyncio.sleep(1.0)  # (a renewal may have been under way at the failure)
        lease = (await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"]
        await asyncio.sleep(LIFECYCLE.monitor_grace_period + 1)
        assert (await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"] == lease
        assert await condition(client, "sim-node-0") == "True"
        assert await taints(client, "sim-node-0") == {("node.kubernetes.io/not-ready", "NoSchedule")}
        assert not await gone_or_terminating(client, "quick")


async def _pod_ready(client: Client, name: str) -> str | None:
    pod = await client.get(f"{PODS}/{name}")
    return next((c["status"] for c in pod.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)


async def test_the_controller_turns_a_silent_node_unknown_as_upstream(client: Client) -> None:
    """Ready, MemoryPressure, DiskPressure and PIDPressure Unknown (each lastHeartbeatTime the
    kubelet's last), NetworkUnavailable left alone, the event NodeNotReady; its pods not Ready
    (MarkPodsNotReady). The kubelet back posts Ready, renews, and its pods are Ready again."""
    async with simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"))
        await client.create(PODS, tolerating("stays", "sim-node-0", None))
        await eventually(lambda: _eq(_pod_ready(client, "stays"), "True"))
        before = {c["type"]: c for c in (await client.get(f"{NODES}/sim-node-0"))["status"]["conditions"]}
        sim.fail_node("sim-node-0", "unreachable")
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "Unknown"), timeout=10)
        node = await client.get(f"{NODES}/sim-node-0")
        after = {c["type"]: c for c in node["status"]["conditions"]}
        for ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
            assert after[ctype]["status"] == "Unknown" and after[ctype]["reason"] == "NodeStatusUnknown"
            assert after[ctype]["message"] == "Kubelet stopped posting node status."
            assert after[ctype]["lastHeartbeatTime"] == before[ctype]["lastHeartbeatTime"]
        assert after["NetworkUnavailable"] == before["NetworkUnavailable"]
        async def event(**want: str) -> bool:  # (the recorder writes events in the background)
            events = (await client.list(resource_path("", "v1", "events", "default")))["items"]
            return any(all(e[k] == v if k != "involved" else e["involvedObject"]["name"] == v
                           for k, v in want.items()) for e in events)
        await eventually(lambda: event(reason="NodeNotReady", message="Node sim-node-0 status is now: NodeNotReady",
                                       involved="sim-node-0"), timeout=5)
        await eventually(lambda: _eq(_pod_ready(client, "stays"), "False"), timeout=5)
        await eventually(lambda: event(reason="NodeNotReady", message="Node is not ready", type="Warning",
                                       involved="stays"), timeout=5)
        sim.recover_node("sim-node-0")
        await eventually(lambda: _eq(condition(client, "sim-node-0"), "True"), timeout=5)
        await eventually(lambda: _eq(taints(client, "sim-node-0"), set()), timeout=5)
        await eventually(lambda: _eq(_pod_ready(client, "stays"), "True"), timeout=5)


async def _gone(client: Client, name: str) -> bool:
    try:
        await client.get(f"{PODS}/{name}")
        return False
    except ApiError as e:
        return e.code == 404


async def _cancelled(client: Client, key: str) -> bool:
    events = (await client.list(resource_path("", "v1", "events", "default")))["items"]
    return any(e.get("reason") == "TaintManagerEviction" and e.get("message") == f"Cancelling deletion of Pod {key}"
               for e in events)


async def _phase(client: Client, name: str) -> str | None:
    got: str | None = (await client.get(f"{PODS}/{name}")).get("status", {}).get("phase")
    return got


async def _eq(awaitable: Any, want: Any) -> bool:
    return bool(await awaitable == want)


async def test_a_ready_condition_put_back_is_written_again_after_a_server_error(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone turns a running pod's Ready False (as MarkPodsNotReady); the kubelet's write putting it
    back fails with a 500, then a timeout: it is made again a second later each time (nothing else
    would: the pod is quiet), as a stage's is. It was dropped and the pod stayed not Ready."""
    from controlplane.nodes.simulator import NodeSimulator

    armed: list[bool] = []
    failed: list[str] = []
    real_kubelet = NodeSimulator._kubelet

    class FailingKubelet:
        def __init__(self, inner: Client) -> None:
            self.inner = inner

        async def patch(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
            if armed and path.endswith("/pods/quiet/status") and len(failed) < 2:
                failed.append(path)
                if len(failed) == 1:
                    raise ApiError(500, "InternalError", "etcdserver: request timed out")
                raise httpx.ReadTimeout("timed out")
            return await self.inner.patch(path, body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(NodeSimulator, "_kubelet", lambda sim, node: FailingKubelet(real_kubelet(sim, node)))
    async with simulating(client, fast(count=1)):
        await client.create(PODS, pod("quiet", "sim-node-0"))
        await eventually(lambda: _eq(_pod_ready(client, "quiet"), "True"))
        await asyncio.sleep(0.5)  # its stages done: no more writes of its own
        armed.append(True)
        now = "2026-12-06T00:00:00Z"
        await client.patch(f"{PODS}/quiet/status", {"status": {"conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": now}]}}, patch_type="strategic")
        await eventually(lambda: _eq(_pod_ready(client, "quiet"), "True"), timeout=10)
        assert len(failed) == 2


def test_the_kubelet_puts_back_only_a_ready_condition_it_would_compute_true() -> None:
    from controlplane.nodes.simulator import _unreadied

    def running(ready: str, containers: str = "True", gate: str | None = None) -> dict[str, Any]:
        conditions = [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": containers}]
        spec: dict[str, Any] = {}
        if gate is not None:
            spec["readinessGates"] = [{"conditionType": "example.com/lb"}]
            conditions.append({"type": "example.com/lb", "status": gate})
        return {"metadata": {}, "spec": spec, "status": {"phase": "Running", "conditions": conditions}}

    assert _unreadied(running("False"))  # MarkPodsNotReady's doing
    assert _unreadied(running("False", gate="True"))
    assert not _unreadied(running("True"))
    assert not _unreadied(running("False", containers="False"))
    assert not _unreadied(running("False", gate="False"))  # a gate False keeps Ready False
    terminating = running("False")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not _unreadied(terminating)
