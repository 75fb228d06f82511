"""Objects for the scheduler's tests: nodes, pods, podgroups as the API would hold them."""

from __future__ import annotations

from typing import Any


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, unschedulable: bool = False,
         extra: dict[str, str] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"capacity": alloc, "allocatable": alloc}}


def pod(name: str, cpu: str | None = "100m", memory: str | None = "128Mi", namespace: str = "default",
        labels: dict[str, str] | None = None, priority: int | None = None, node_name: str | None = None,
        group: str | None = None, extra: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    if requests:
        container["resources"] = {"requests": requests}
        # an extended resource (nvidia.com/gpu) cannot be overcommitted: its limit is its request,
        # as upstream's validation requires
        extended = {k: v for k, v in requests.items() if "/" in k}
        if extended:
            container["resources"]["limits"] = extended
    s: dict[str, Any] = {"containers": [container], **spec}
    if priority is not None:
        s["priority"] = priority
    if node_name:
        s["nodeName"] = node_name
    if group:
        s["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "uid": f"uid-{name}"},
            "spec": s, "status": {"phase": "Pending"}}


def podgroup(name: str, min_count: int | None = None, namespace: str = "default", topology: str | None = None,
             workload: tuple[str, str] | None = None, earlier_ref: bool = False) -> dict[str, Any]:
    """A PodGroup; ``workload`` (name, template) is referenced as 1.37 does (``workloadRef``),
    or, with ``earlier_ref``, in the drafts' shape the scheduler still reads
    (``podGroupTemplateRef.workload``)."""
    spec: dict[str, Any] = {}
    if min_count is not None:
        spec["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    if workload is not None and earlier_ref:
        spec["podGroupTemplateRef"] = {"workload": {"workloadName": workload[0], "podGroupTemplateName": workload[1]}}
    elif workload is not None:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def create_node(client: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a node (the create keeps its status, as upstream's) and write the status through
    nodes/status as well, as a kubelet's later updates do. The not-ready taint the create
    gives it (TaintNodesAtCreation) is taken off, as the node lifecycle controller these
    tests' servers do not run would take it off a node without a Ready condition."""
    created: dict[str, Any] = await client.create("/api/v1/nodes", obj)
    if created["spec"].get("taints") != (obj.get("spec") or {}).get("taints"):
        await client.patch(f"/api/v1/nodes/{obj['metadata']['name']}",
                           {"spec": {"taints": (obj.get("spec") or {}).get("taints")}}, patch_type="merge")
    result: dict[str, Any] = await client.patch(f"/api/v1/nodes/{obj['metadata']['name']}/status",
                                                {"status": obj["status"]}, patch_type="merge")
    return result or created
