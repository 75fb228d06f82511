"""Pod-level resources (PodLevelResources) in the scheduler: a pod's request of a resource
its pod-level requests name is that request, not its containers' sum (upstream's
resourcehelper.PodRequests), plus the overhead; the others stay the containers'; a
resize of the pod level counts at the larger of the spec and the kubelet's report."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.scheduler.nodeinfo import PodInfo, pod_requests

from .helpers import node, pod
from .test_requeue import Harness

Obj = dict[str, Any]


def pod_level(obj: Obj, **requests: str) -> Obj:
    out = copy.deepcopy(obj)
    out["spec"]["resources"] = {"requests": dict(requests)}
    return out


def test_pod_level_requests_replace_the_containers_sum_for_what_they_name() -> None:
    spec = {"resources": {"requests": {"cpu": "3", "hugepages-2Mi": "4Mi"}},
            "overhead": {"cpu": "250m"},
            "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
                           {"resources": {"requests": {"cpu": "500m"}}}]}
    assert pod_requests(spec) == {"cpu": 3250, "memory": 2**30, "nvidia.com/gpu": 1, "hugepages-2Mi": 4 * 2**20}
    spec["resources"] = {"requests": {"cpu": "100m"}}  # below the containers' (the validation refuses it)
    assert pod_requests(spec)["cpu"] == 350
    spec["resources"] = {"limits": {"cpu": "8"}}  # limits alone: the containers' requests
    assert pod_requests(spec)["cpu"] == 1250
    info = PodInfo(pod_level(pod("p", cpu="100m", memory="64Mi"), cpu="2", memory="1Gi"))
    assert (info.req_cpu, info.req_mem, info.nonzero_cpu, info.nonzero_mem) == (2000, 2**30, 2000, 2**30)


async def test_a_pod_whose_pod_level_request_exceeds_a_node_does_not_fit_it() -> None:
    """Its containers' sum (200m) would fit a node with 1 cpu; its pod-level 2 cpus do not:
    the larger node is chosen, and with no such node the pod stays unschedulable."""
    h = Harness()
    h.inf["nodes"].add(node("small", cpu="1"))
    h.inf["pods"].add(pod_level(pod("big", cpu="200m"), cpu="2"))
    assert await h.schedule_all() == ["big"]
    assert h.where("big") == "unschedulable"
    h.inf["nodes"].add(node("large", cpu="4"))
    assert await h.schedule_all() == ["big"]
    assert h.client.bindings() == {"big": "large"}
    ni = h.sched.cache.nodes.get("large")
    assert ni is not None and ni.requested["cpu"] == 2000


def test_a_pod_level_resize_counts_at_the_larger_of_spec_and_report() -> None:
    p = pod_level(pod("p", cpu="100m", node_name="n"), cpu="1")
    p["metadata"]["generation"] = 2
    p["status"] = {"phase": "Running", "resources": {"requests": {"cpu": "1"}},
                   "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    shrunk = copy.deepcopy(p)
    shrunk["spec"]["resources"]["requests"]["cpu"] = "500m"  # not yet actuated: still the reported
    assert PodInfo(shrunk).req_cpu == 1000
    grown = copy.deepcopy(p)
    grown["spec"]["resources"]["requests"]["cpu"] = "3"
    assert PodInfo(grown).req_cpu == 3000
    grown["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    assert PodInfo(grown).req_cpu == 1000  # Infeasible: the reported alone
