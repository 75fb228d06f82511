"""Python renderings of the built-in pod and node stages' status templates.

Rendering a status template costs about 0.1 ms and reading its YAML back
0.3-0.5 ms (libyaml), most of a pod start's budget at 1,000 pods a second.
The built-in stages (``default-stages.yaml``) therefore carry these
functions, which build the same status directly; ``tests/nodes`` checks that
each gives exactly what its template gives. A user's stage file is always
rendered from its templates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .allocated import pod_allocation
from .observed import KUBELET_CONDITIONS, generation_of

__all__ = ["NATIVE"]

Funcs = dict[str, Callable[..., Any]]


def _s(v: Any) -> str:
    """What ``{{ v | Quote }}`` reads back as: the text of ``v`` (KWOK's ``"null"`` for nothing)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def pod_ready(pod: dict[str, Any], funcs: Funcs) -> dict[str, Any]:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    now = _s(funcs["Now"]())
    pod_ip = _s(funcs["PodIPWith"](spec.get("nodeName"), spec.get("hostNetwork") or False, meta.get("uid") or "",
                                   meta.get("name") or "", meta.get("namespace") or ""))
    host_ip = _s(funcs["NodeIPWith"](spec.get("nodeName")))
    generation = generation_of(pod)
    observed = {"observedGeneration": generation} if generation is not None else {}
    conditions = [{"type": t, "status": "True", **observed, "lastTransitionTime": now}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")]
    conditions.append({"type": "PodScheduled", "status": "True", **observed,
                       "lastTransitionTime": _s(meta.get("creationTimestamp") or now)})
    conditions += [{"type": _s(g.get("conditionType")), "status": "True", "lastTransitionTime": now}
                   for g in spec.get("readinessGates") or []]
    containers = [{"name": _s(c.get("name")), "image": _s(c.get("image")),
                   "imageID": f"{_s(c.get('image'))}@sha256:simulated", "containerID": f"containerd://{_s(c.get('name'))}",
                   "ready": True, "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}},
                   **_reported_resources(c)}
                  for c in spec.get("containers") or []]
    inits = [{"name": _s(c.get("name")), "image": _s(c.get("image")),
              "imageID": f"{_s(c.get('image'))}@sha256:simulated", "ready": True, "restartCount": 0,
              **({"containerID": f"containerd://{_s(c.get('name'))}", "started": True,
                  "state": {"running": {"startedAt": now}}} if _sidecar(c) else
                 {"state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                           "finishedAt": now}}}),
              **_reported_resources(c)}
             for c in spec.get("initContainers") or []]
    return {**observed, "phase": "Running", "startTime": now, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "conditions": conditions,
            "containerStatuses": containers or None, "initContainerStatuses": inits or None,
            **pod_allocation(spec)}


def pod_complete(pod: dict[str, Any], funcs: Funcs) -> dict[str, Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    now = _s(funcs["Now"]())
    generation = generation_of(pod)
    observed = {"observedGeneration": generation} if generation is not None else {}
    conditions = []
    for c in status.get("conditions") or []:
        if c.get("type") in ("Ready", "ContainersReady"):
            conditions.append({"type": _s(c.get("type")), "status": "False", "reason": "PodCompleted", **observed,
                               "lastTransitionTime": now})
        else:
            conditions.append({"type": _s(c.get("type")), "status": _s(c.get("status")),
                               **(observed if c.get("type") in KUBELET_CONDITIONS else {}),
                               "lastTransitionTime": _s(c.get("lastTransitionTime") or now)})
    started = _s(status.get("startTime") or now)
    containers = [{"name": _s(c.get("name")), "image": _s(c.get("image")),
                   "imageID": f"{_s(c.get('image'))}@sha256:simulated", "containerID": f"containerd://{_s(c.get('name'))}",
                   "ready": False, "started": False, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                            "finishedAt": now}}, **_reported_resources(c)}
                  for c in spec.get("containers") or []]
    # the kubelet stops the sidecars (init containers restartPolicy Always) once the others are done
    inits = [{"name": _s(c.get("name")), "image": _s(c.get("image")),
              "imageID": f"{_s(c.get('image'))}@sha256:simulated", "restartCount": 0,
              **({"containerID": f"containerd://{_s(c.get('name'))}", "ready": False, "started": False,
                  "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                           "finishedAt": now}}} if _sidecar(c) else
                 {"ready": True, "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                                          "finishedAt": started}}}),
              **_reported_resources(c)}
             for c in spec.get("initContainers") or []]
    return {**observed, "phase": "Succeeded", "conditions": conditions or None, "containerStatuses": containers or None,
            "initContainerStatuses": inits or None, **pod_allocation(spec)}


def _reported_resources(container: dict[str, Any]) -> dict[str, Any]:
    """What a kubelet reports of a started container's resources (KEP-1287): those it runs
    with, the spec's at the start (an exited init container's too), and its requests as
    ``allocatedResources`` (written since 1.36, when InPlacePodVerticalScalingAllocatedStatus
    went; left out when it requests nothing). Shared, not copied: the status is only serialised."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") if isinstance(resources, dict) else None
    return {"resources": resources, "allocatedResources": requests} if requests else {"resources": resources}


def _sidecar(container: dict[str, Any]) -> bool:
    """A restartable init container (KEP-753): it runs beside the containers, as they do."""
    return container.get("restartPolicy") == "Always"


_DEFAULT_RESOURCES = {"cpu": "32", "memory": "128Gi", "pods": "110"}


def node_initialize(node: dict[str, Any], funcs: Funcs) -> dict[str, Any]:
    """(once per node: at 100,000 nodes set up at once, the YAML read back was about a
    millisecond each)"""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    now = funcs["Now"]()
    since = meta.get("creationTimestamp") or now
    conditions = [{"type": _s(c["type"]), "status": _s(c["status"]), "reason": _s(c["reason"]),
                   "message": _s(c["message"]), "lastHeartbeatTime": _s(now), "lastTransitionTime": _s(since)}
                  for c in funcs["NodeConditions"]()]
    addresses = status.get("addresses") or [{"type": "InternalIP", "address": _s(funcs["NodeIP"]())},
                                            {"type": "Hostname", "address": _s(funcs["NodeName"]())}]
    version = _s(funcs["Version"]())
    info = status.get("nodeInfo") or {}  # what the node's creator set is kept, as KWOK's node-initialize
    return {"conditions": conditions, "addresses": addresses,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": funcs["NodePort"]()}},
            "capacity": status.get("capacity") or dict(_DEFAULT_RESOURCES),
            "allocatable": status.get("allocatable") or dict(_DEFAULT_RESOURCES),
            "nodeInfo": {"architecture": _s(info.get("architecture")
                                            or (meta.get("labels") or {}).get("kubernetes.io/arch") or "amd64"),
                         "operatingSystem": _s(info.get("operatingSystem") or "linux"),
                         "containerRuntimeVersion": _s(info.get("containerRuntimeVersion")
                                                       or f"controlplane://{version}"),
                         "kernelVersion": _s(info.get("kernelVersion") or version),
                         "kubeletVersion": _s(info.get("kubeletVersion") or version),
                         "kubeProxyVersion": _s(info.get("kubeProxyVersion") or version),
                         "osImage": _s(info.get("osImage") or "controlplane simulated node"),
                         "machineID": _s(info.get("machineID") or ""),
                         "systemUUID": _s(info.get("systemUUID") or meta.get("uid") or ""),
                         "bootID": _s(info.get("bootID") or "")},
            "phase": "Running"}


NATIVE: dict[str, Callable[[dict[str, Any], Funcs], dict[str, Any]]] = {
    "node-initialize": node_initialize,
    "pod-ready": pod_ready,
    "pod-complete": pod_complete,
}
