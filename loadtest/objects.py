"""The objects the load tests write, in the Kubernetes 1.37 shapes.

Pods come from ``controlplane.podgen`` (realistic sizes and variety), made
creatable: no uid, resourceVersion, timestamps, managedFields, status or node,
no node selector a simulated node would not match, and no owner references but a
real owner's (podgen's name ReplicaSets and Jobs that do not exist, whose pods a
garbage collector deletes). Everything else is a
small literal that reads like what its real writer sends::

    >>> p = PodFactory(seed=1).pod("team-a", "web-1", {"app": "web"})
    >>> p["metadata"]["name"], "nodeName" in p["spec"], "status" in p
    ('web-1', False, False)
"""

from __future__ import annotations

import random
from typing import Any

from controlplane.podgen import PodGenerator

__all__ = [
    "GPU_CLASS", "GPU_DRIVER", "PodFactory", "binding", "claim_template", "configmap", "deployment", "device_class",
    "lease", "namespace", "node", "node_status", "pod_running_status", "podgroup", "replicaset", "resource_slice",
    "workload",
]

GPU_DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"


class PodFactory:
    """``gpus``: whether the run's nodes have ``nvidia.com/gpu``. Without, podgen's GPU
    pods (a tenth) are left out: a scheduler could never place them, and a run that
    waits for its pods to run would wait for ever (the harness's binder placed them
    anyway, a real scheduler does not). ``run``: the run's id, labelled ``RUN_LABEL`` on
    each pod, the pods the harness's binder places (and no other of the target's)."""

    def __init__(self, seed: int = 0, namespaces: int = 50, gpus: bool = True, run: str = "") -> None:
        self._gen = PodGenerator(seed=seed, namespaces=namespaces, gpu_fraction=0.1 if gpus else 0.0)
        self._run = {RUN_LABEL: run} if run else {}

    def pod(self, namespace: str, name: str, labels: dict[str, str] | None = None,
            owner: dict[str, Any] | None = None) -> dict[str, Any]:
        p = self._gen.pod(namespace, bound=False)
        meta = p["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generateName"):
            meta.pop(key, None)
        meta["name"] = name
        meta["labels"] = {**meta.get("labels", {}), **(labels or {}), **self._run}
        # (podgen's references are synthetic: only a real owner is named)
        if owner is not None:
            meta["ownerReferences"] = [owner]
        else:
            meta.pop("ownerReferences", None)
        p.pop("status", None)
        spec = p["spec"]
        spec.pop("nodeSelector", None)
        spec.pop("nodeName", None)
        spec.pop("priorityClassName", None)  # the run does not create PriorityClasses
        spec.pop("priority", None)
        # nor ServiceAccounts: its pods run as the one every namespace has (ServiceAccount
        # admission refuses a pod whose account does not exist)
        spec["serviceAccountName"] = spec["serviceAccount"] = "default"
        return p


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"loadtest": "true"}}}


RUN_LABEL = "loadtest/run"  # on the run's Nodes and pods: the harness's binder places these pods on these nodes only


def node(name: str, gpus: int = 0, run: str = "") -> dict[str, Any]:
    """A kubelet's Node; ``run`` (the harness's run id) labels it as this run's."""
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p5.48xlarge" if gpus else "m7i.16xlarge",
        "topology.kubernetes.io/zone": random.choice(["zone-a", "zone-b", "zone-c"]), "loadtest": "true",
        **({RUN_LABEL: run} if run else {}),
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"podCIDR": f"10.{random.randrange(256)}.{random.randrange(256)}.0/24"}}


def node_status(gpus: int = 0, ready: bool = True, now: str = "") -> dict[str, Any]:
    """The status a kubelet reports: capacity generous enough for ~100 pods of
    podgen's sizes, a Ready condition."""
    capacity = {"cpu": "512", "memory": "4Ti", "pods": "110", "ephemeral-storage": "2Ti"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {"status": {
        "capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}],
        "nodeInfo": {"kubeletVersion": "v1.37.0", "containerRuntimeVersion": "containerd://2.1.0",
                     "operatingSystem": "linux", "architecture": "amd64", "osImage": "Emulated Linux",
                     "kernelVersion": "6.8.0", "machineID": "", "systemUUID": "", "bootID": "",
                     "kubeProxyVersion": ""},
    }}


def _node_owned(node_name: str, node_uid: str | None) -> dict[str, Any]:
    """The metadata a kubelet's Lease and a DRA driver's ResourceSlice carry: the Node as owner
    (a cluster's garbage collector removes them with it), and the run's label."""
    meta: dict[str, Any] = {"labels": {"loadtest": "true"}}
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    return meta


def lease(node_name: str, renew_time: str, node_uid: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node_name, "namespace": "kube-node-lease", **_node_owned(node_name, node_uid)},
            "spec": {"holderIdentity": node_name, "leaseDurationSeconds": 40, "renewTime": renew_time}}


def binding(pod_name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}


def pod_running_status(pod: dict[str, Any], now: str, ip: str) -> dict[str, Any]:
    """A strategic-merge patch of ``status`` as a kubelet sends when the pod's containers start."""
    containers = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
    return {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
        "hostIP": "10.64.0.1", "hostIPs": [{"ip": "10.64.0.1"}],
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")],
        "containerStatuses": [{"name": c, "ready": True, "started": True, "restartCount": 0,
                               "image": "registry.k8s.io/pause:3.10", "imageID": "",
                               "containerID": f"containerd://{random.getrandbits(128):032x}",
                               "state": {"running": {"startedAt": now}}} for c in containers],
    }}


def replicaset(namespace_: str, name: str, selector: dict[str, str], replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": namespace_,
                                                                         "labels": selector},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": selector},
                                  "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}}


def deployment(namespace_: str, name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace_},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}}


def configmap(namespace_: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace_},
            "data": data}


# -- AI jobs: Workload / PodGroup gangs with GPU claims (scheduling.k8s.io/v1beta1, resource.k8s.io/v1) ------

def workload(namespace_: str, name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace_},
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": min_count}}}]}}


def podgroup(namespace_: str, name: str, workload_name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace_},
            "spec": {"workloadRef": {"workloadName": workload_name, "templateName": "workers"},
                     "schedulingPolicy": {"gang": {"minCount": min_count}}}}


def device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}}


def claim_template(namespace_: str, name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace_},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount",
                                            "count": gpus}}]}}}}


def resource_slice(node_name: str, gpus: int, node_uid: str | None = None) -> dict[str, Any]:
    """What a DRA driver on the node publishes: one pool per node, one device per GPU."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{GPU_DRIVER}", **_node_owned(node_name, node_uid)},
            "spec": {"driver": GPU_DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}",
                                  "attributes": {"model": {"string": "H100"}, "index": {"int": i}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]}}
