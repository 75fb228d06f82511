"""KWOK's own fast stages (``kwok-fast-stages.yaml``, upstream's files unchanged), end to end.

Since KWOK v0.8 the fast ``pod-ready`` writes dual-stack addresses with
``NodeIPsWith`` and ``PodIPsWith``, and runs sidecars (init containers with
``restartPolicy: Always``) rather than completing them.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from controlplane.client import Client
from controlplane.nodes.stages import KWOK_FUNCTIONS, load_stages
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating
from tests.nodes.test_general_stages import _bind, _conditions, _gone, _in_phase

STAGES = Path(__file__).with_name("kwok-fast-stages.yaml")


async def test_kwok_fast_stages_run_pods_with_their_addresses(client: Client) -> None:
    stages = load_stages(STAGES.read_text())
    assert [s.name for s in stages] == ["node-initialize", "node-heartbeat", "pod-ready", "pod-complete",
                                        "pod-delete"]
    async with simulating(client, fast(count=1, stages=stages)) as sim:
        node = sim.nodes["sim-node-0"]
        ready = await eventually(lambda: _ready(client))
        # KWOK's NodeConditions, as its node-initialize renders them (reasons and messages)
        assert {c["type"]: (c["status"], c["reason"], c["message"]) for c in ready["status"]["conditions"]} == {
            "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
            "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            "NetworkUnavailable": ("False", "RouteCreated", "RouteController created a route")}
        await _bind(client, pod("web", initContainers=[{"name": "setup", "image": "busybox"},
                                                      {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]),
                    "sim-node-0")
        await _bind(client, pod("host", hostNetwork=True), "sim-node-0")
        owner = await client.create("/apis/batch/v1/namespaces/default/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
        job = pod("job", restartPolicy="Never")
        job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                               "uid": owner["metadata"]["uid"], "controller": False}]
        # (owned, not controlled: the Job of parallelism 0 would delete a pod it controls, as upstream's)
        await _bind(client, job, "sim-node-0")

        web = (await eventually(lambda: _in_phase(client, "web", "Running")))["status"]
        assert web["podIPs"] == [{"ip": web["podIP"]}] and ipaddress.ip_address(web["podIP"]) in \
            ipaddress.ip_network(node.cidr)
        assert web["hostIP"] == node.ip and web["hostIPs"] == [{"ip": node.ip}]
        assert {k: v for k, v in _conditions({"status": web}).items() if k != "PodScheduled"} == \
            {"Initialized": "True", "Ready": "True", "ContainersReady": "True"}
        setup, proxy = web["initContainerStatuses"]
        assert setup["state"]["terminated"]["reason"] == "Completed"
        assert proxy["started"] is True and proxy["state"]["running"]["startedAt"]  # a sidecar keeps running
        assert web["containerStatuses"][0]["ready"] is True

        host = (await eventually(lambda: _in_phase(client, "host", "Running")))["status"]
        assert host["podIP"] == node.ip and host["podIPs"] == [{"ip": node.ip}]

        done = (await eventually(lambda: _in_phase(client, "job", "Succeeded")))["status"]
        assert done["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

        await client.delete(f"{PODS}/web")
        await eventually(lambda: _gone(client, "web"))

        funcs = sim._template_funcs(node)
        assert set(funcs) == KWOK_FUNCTIONS  # what the loader lets templates call, no more, no less
        assert funcs["StartTime"]() == sim.start_time
        assert funcs["NodeIPsWith"]("sim-node-0") == [node.ip] and funcs["NodeIPsWith"]("elsewhere") == []


async def _ready(client: Client) -> dict[str, Any] | None:
    got = await client.get(f"{NODES}/sim-node-0")
    return got if _conditions(got).get("Ready") == "True" else None
