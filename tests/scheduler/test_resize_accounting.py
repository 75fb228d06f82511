"""A resized pod's requests in the scheduler's cache (nodeinfo.resize_state): while a
resize is pending or in progress the larger of the spec's and the kubelet's report, the
report alone when it is Infeasible; a shrink lets a parked pod fit."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.scheduler.nodeinfo import PodInfo

from .helpers import node, pod
from .test_requeue import Harness

Obj = dict[str, Any]


def running(obj: Obj, reported_cpu: str, generation: int = 1, reason: str | None = None) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["generation"] = generation
    status: Obj = {"phase": "Running", "containerStatuses": [
        {"name": "c", "state": {"running": {}}, "resources": {"requests": {"cpu": reported_cpu}}}]}
    if reason:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    out["status"] = status
    return out


def resized(obj: Obj, cpu: str) -> Obj:
    out = copy.deepcopy(obj)
    out["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    out["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
    return out


def test_a_resized_pods_requests_are_the_larger_of_spec_and_report_but_infeasible() -> None:
    p = running(pod("p", cpu="500m", node_name="n"), "500m")
    assert PodInfo(p).req_cpu == 500
    up = resized(p, "2")  # asked for, not yet actuated: the spec's
    assert PodInfo(up).req_cpu == 2000
    down = resized(p, "100m")  # a shrink not yet actuated: still the reported
    assert PodInfo(down).req_cpu == 500
    infeasible = running(resized(p, "64"), "500m", generation=2, reason="Infeasible")
    assert PodInfo(infeasible).req_cpu == 500
    deferred = running(resized(p, "3"), "500m", generation=2, reason="Deferred")
    assert PodInfo(deferred).req_cpu == 3000


async def test_the_cache_follows_a_resize_and_a_shrink_requeues_a_parked_pod() -> None:
    h = Harness()
    h.inf["nodes"].add(node("n", cpu="2"))
    bound = running(pod("big", cpu="1500m", node_name="n"), "1500m")
    h.inf["pods"].add(bound)
    ni = h.sched.cache.nodes.get("n")
    assert ni is not None and ni.requested["cpu"] == 1500
    await h.parked(pod("waiting", cpu="1"))
    # resized down and actuated: the kubelet's report follows the spec
    down = running(resized(bound, "500m"), "500m", generation=2)
    h.inf["pods"].update(down)
    assert ni.requested["cpu"] == 500
    assert h.where("waiting") != "unschedulable"
    assert await h.schedule_all() == ["waiting"]
    assert h.client.bindings() == {"waiting": "n"}
    # resized up again while the node is full: counted at once (the larger, the spec's)
    up = resized(down, "1")
    h.inf["pods"].update(up)
    assert ni.requested["cpu"] == 2000
