"""Builders for DRA objects in tests."""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.dra.manager import DraManager

DRIVER = "gpu.example.com"


def device_class(name: str, *exprs: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}


def slice_(name: str, node: str | None, devices: list[dict[str, Any]], *, pool: str | None = None,
           counters: list[dict[str, Any]] | None = None, count: int = 1, generation: int = 1,
           driver: str = DRIVER, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or name, "generation": generation,
                                                         "resourceSliceCount": count}, **spec}
    if node:
        body["nodeName"] = node
    elif "nodeSelector" not in spec:
        body["allNodes"] = True
    if devices:
        body["devices"] = devices
    if counters:
        body["sharedCounters"] = counters
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def device(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def claim(name: str, *requests: dict[str, Any], namespace: str = "default", constraints: Any = None,
          **status: Any) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                        "resourceVersion": "1"},
                           "spec": {"devices": devices}}
    if status:
        obj["status"] = status
    return obj


def request(name: str, cls: str, **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, **exactly}}


def pod(name: str, *claim_names: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claim_names]}}


def gpu_node_slices(node: str, gpus: int = 1) -> list[dict[str, Any]]:
    """Per GPU: the whole device and partitions (two 3g, seven 1g) sharing one counter set."""
    from controlplane.scheduler.dra.benchdata import node_slices

    return node_slices(node, gpus)


def manager_with(*objs: dict[str, Any]) -> DraManager:
    m = DraManager()
    for o in objs:
        kind = o["kind"]
        if kind == "ResourceSlice":
            m.on_slice(o)
        elif kind == "DeviceClass":
            m.on_class(o)
        elif kind == "ResourceClaim":
            m.on_claim(o)
        else:
            raise ValueError(kind)
    return m


def allocate(m: DraManager, pod_obj: dict[str, Any], node: str, labels: dict[str, str] | None = None) -> str | None:
    """Filter, reserve and record the allocation as written (what pre_bind + the informer would do)."""
    pc = m.pre_filter(pod_obj)
    assert pc is not None
    reason = m.filter(pc, node, labels or {})
    if reason is not None:
        return reason
    reason = m.reserve(pc, node, labels or {})
    if reason is not None:
        return reason
    assert pc.reserved is not None
    plan = pc.reserved[1]
    for n, i in enumerate(pc.to_allocate):
        c = dict(pc.claims[i])
        c["status"] = {"allocation": plan.allocation(n, node),
                       "reservedFor": [{"resource": "pods", "name": pod_obj["metadata"]["name"],
                                        "uid": pod_obj["metadata"]["uid"]}]}
        m.on_claim(c)
    return None


def allocated_devices(m: DraManager, claim_name: str, namespace: str = "default") -> list[str]:
    c = m.claims[f"{namespace}/{claim_name}"]
    return [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
