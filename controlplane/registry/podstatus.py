"""What a pod's status write may not do, as upstream's ``ValidatePodStatusUpdate`` says it
(``pkg/apis/core/validation``), besides its IPs (``ipfields.pod_status_ip_causes``): a custom
condition's type is a qualified name (reported, as upstream, at ``metadata.conditions[i].Type``),
a nominated node a node's name, the QoS class fixed at the create, a terminated container of a
pod that does not restart it not running again, a resource claim's status names one of the
pod's claims, and a container's reported user is its OS's (``user_causes``). Cheap on purpose,
as the simulated kubelets write pods' statuses all the time: each check looks at what it needs,
and most at nothing unless it changed::

    status_causes({"qosClass": "Guaranteed"}, {"qosClass": "BestEffort"}, {})
    # [{'field': 'status.qosClass', 'message': 'Invalid value: "Guaranteed": field is immutable', ...}]
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, duplicate, forbidden, invalid, not_supported
from .podvalidation import label_key_problems, subdomain_problems

__all__ = ["allocated_causes", "status_causes", "user_causes"]

Obj = dict[str, Any]

_SYSTEM_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized"})
# the custom condition types seen valid (the kubelet's ContainersReady and
# PodReadyToStartContainers on nearly every status write): checked once each, up to a bound
_VALID_TYPES: set[str] = set()
_MAX_VALID_TYPES = 4096
_NOT_RUNNING_AGAIN = "may not be transitioned to non-terminated state"
_ID_RANGE = "must be between 0 and 2147483647, inclusive"  # IsValidUserID, IsValidGroupID
_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def status_causes(status: Obj, old: Obj, spec: Obj) -> Causes:
    """The causes of a 422 in the new ``status`` of a pod whose stored status is ``old`` and
    whose (unchanged) spec is ``spec``, in ``ValidatePodStatusUpdate``'s order."""
    causes: Causes = []
    conditions = status.get("conditions")
    if conditions and isinstance(conditions, list) and conditions != old.get("conditions"):
        for i, c in enumerate(conditions):  # validatePodConditions (its path says metadata)
            kind = c.get("type") if isinstance(c, dict) else None
            if isinstance(kind, str) and kind not in _SYSTEM_CONDITIONS and kind not in _VALID_TYPES:
                problems = label_key_problems(kind)
                if not problems and len(_VALID_TYPES) < _MAX_VALID_TYPES:
                    _VALID_TYPES.add(kind)
                causes.extend(invalid(f"metadata.conditions[{i}].Type", kind, m) for m in problems)
    nominated = status.get("nominatedNodeName")
    if nominated and isinstance(nominated, str) and nominated != old.get("nominatedNodeName"):
        causes.extend(invalid("status.nominatedNodeName", nominated, m) for m in subdomain_problems(nominated))
    qos = status.get("qosClass") or ""
    if qos != (old.get("qosClass") or ""):  # (left out, the stored one was kept: api/rest.py)
        causes.append(invalid("status.qosClass", qos, "field is immutable"))
    policy = spec.get("restartPolicy")
    if policy != "Always":
        _transitions(status.get("containerStatuses"), old.get("containerStatuses"), "status.containerStatuses",
                     policy, None, causes)
        _transitions(status.get("initContainerStatuses"), old.get("initContainerStatuses"),
                     "status.initContainerStatuses", policy, spec.get("initContainers"), causes)
    _transitions(status.get("ephemeralContainerStatuses"), old.get("ephemeralContainerStatuses"),
                 "status.ephemeralContainerStatuses", "Never", None, causes)  # never restarted
    claims = status.get("resourceClaimStatuses")
    if claims and isinstance(claims, list) and claims != old.get("resourceClaimStatuses"):
        _claim_statuses(claims, spec, causes)
    return causes


def _transitions(new: Any, old: Any, path: str, policy: Any, init: Any, causes: Causes) -> None:
    """``ValidateContainerStateTransition`` (``init``: the init containers, whose sidecars may
    restart: ``ValidateInitContainerStateTransition``): a container terminated (with 0, or at
    all under ``Never``) may not be reported running or waiting again."""
    if not old or not new or not isinstance(old, list) or not isinstance(new, list) or new == old:
        return
    for i, before in enumerate(old):
        state = before.get("state") if isinstance(before, dict) else None
        terminated = state.get("terminated") if isinstance(state, dict) else None
        if not isinstance(terminated, dict):
            continue
        if terminated.get("exitCode") not in (0, None) and policy == "OnFailure":
            continue
        name = before.get("name")
        if init and any(isinstance(c, dict) and c.get("name") == name and c.get("restartPolicy") == "Always"
                        for c in init):
            continue  # a sidecar
        for after in new:
            if not isinstance(after, dict) or after.get("name") != name:
                continue
            now = after.get("state")
            if not isinstance(now, dict) or now.get("terminated") is None:
                causes.append(forbidden(f"{path}[{i}].state", _NOT_RUNNING_AGAIN))


def _claim_statuses(claims: list[Any], spec: Obj, causes: Causes) -> None:
    """``validatePodResourceClaimStatuses``: each names one of the pod's claims, once, and its
    ``resourceClaimName``, when set, is a DNS subdomain (reported at ``name``, as upstream)."""
    declared = {c.get("name") for c in spec.get("resourceClaims") or () if isinstance(c, dict)}
    seen: set[Any] = set()
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict):
            continue
        name = claim.get("name") or ""
        at = f"status.resourceClaimStatuses[{i}].name"
        if name not in declared:
            causes.append(invalid(at, name, "must match the name of an entry in `spec.resourceClaims`"))
        if name in seen:
            causes.append(duplicate(at, name))
        seen.add(name)
        claim_name = claim.get("resourceClaimName")
        if isinstance(claim_name, str):  # ValidateResourceClaimName, reported at the name (upstream's path)
            causes.extend(invalid(at, claim_name, m) for m in subdomain_problems(claim_name))


def user_causes(status: Obj, spec: Obj) -> Causes:
    """The end of ``ValidatePodStatusUpdate``, after the IPs' checks: ``validateContainerStatusUsers``
    of each of the three container status lists (a container's ``user.linux``, the ids the kubelet
    says it runs as, KEP-3619, is forbidden for a Windows pod, and for a Linux one, a pod without
    ``spec.os`` included, holds ids in range; upstream's path leaves ``user`` out:
    ``status.containerStatuses[0].linux``), then ``validateContainerStatusAllocatedResourcesStatus``
    (``allocated_causes``). A status with neither costs two tests a container."""
    users = allocated = False
    for key in _STATUS_LISTS:
        statuses = status.get(key)
        if statuses and isinstance(statuses, list):
            for c in statuses:
                if isinstance(c, dict):
                    if "user" in c:
                        users = True
                    if "allocatedResourcesStatus" in c:
                        allocated = True
    if not users and not allocated:
        return []
    return (_users(status, spec) if users else []) + (allocated_causes(status, spec) if allocated else [])


_HEALTH = ("Healthy", "Unhealthy", "Unknown")  # ResourceHealthStatus, listed sorted
_NOT_A_CLAIM = ("must match one of the container's resource claims in a format 'claim:<claimName>/<request>' "
                "or 'claim:<claimName>' if request is empty")
_NOT_A_REQUEST = "must match one of the container's resource requests"


def allocated_causes(status: Obj, spec: Obj) -> Causes:
    """``validateContainerStatusAllocatedResourcesStatus`` (ResourceHealthStatus, KEP-4680) of the
    container and init container statuses: each entry names one of its container's requests, or
    one of its claims as ``claim:<name>[/<request>]`` (not checked for a status of no container of
    the spec, as upstream); its resources' health is Healthy, Unhealthy or Unknown, their IDs
    unique; then ``validateContainerStatusNoAllocatedResourcesStatus``: an ephemeral container has
    none."""
    causes: Causes = []
    for key, containers in (("containerStatuses", spec.get("containers")),
                            ("initContainerStatuses", spec.get("initContainers"))):
        statuses = status.get(key)
        if not statuses or not isinstance(statuses, list):
            continue
        for i, c in enumerate(statuses):
            reported = c.get("allocatedResourcesStatus") if isinstance(c, dict) else None
            if not reported or not isinstance(reported, list):
                continue
            name = c.get("name")
            container = next((x for x in containers or () if isinstance(x, dict) and x.get("name") == name), None)
            resources = container.get("resources") if container is not None else None
            resources = resources if isinstance(resources, dict) else {}
            for j, entry in enumerate(reported):
                if not isinstance(entry, dict):
                    continue
                at = f"status.{key}[{i}].allocatedResourcesStatus[{j}]"
                resource = entry.get("name") or ""
                if container is not None:
                    if isinstance(resource, str) and resource.startswith("claim:"):
                        claims = resources.get("claims")
                        names = {"claim:" + str(x.get("name") or "") + ("/" + x["request"] if x.get("request") else "")
                                 for x in claims or () if isinstance(x, dict)}
                        if resource not in names:
                            causes.append(invalid(f"{at}.name", resource, _NOT_A_CLAIM))
                    else:
                        requests = resources.get("requests")
                        if not isinstance(requests, dict) or resource not in requests:
                            causes.append(invalid(f"{at}.name", resource, _NOT_A_REQUEST))
                ids: set[Any] = set()
                health_list = entry.get("resources")
                for k, r in enumerate(health_list if isinstance(health_list, list) else ()):
                    if not isinstance(r, dict):
                        continue
                    health = r.get("health") or ""
                    if health not in _HEALTH:
                        causes.append(not_supported(f"{at}.resources[{k}].health", health, _HEALTH))
                    rid = r.get("resourceID") or ""
                    if rid in ids:
                        causes.append(duplicate(f"{at}.resources[{k}].resourceID", rid))
                    ids.add(rid)
    statuses = status.get("ephemeralContainerStatuses")
    for i, c in enumerate(statuses if isinstance(statuses, list) else ()):
        if isinstance(c, dict) and c.get("allocatedResourcesStatus"):
            causes.append(forbidden(f"status.ephemeralContainerStatuses[{i}].allocatedResourcesStatus",
                                    "cannot be set for a container status"))
    return causes


def _users(status: Obj, spec: Obj) -> Causes:
    causes: Causes = []
    pod_os = spec.get("os")
    name = pod_os.get("name") if isinstance(pod_os, dict) else "linux"
    for key in _STATUS_LISTS:
        statuses = status.get(key)
        if not statuses or not isinstance(statuses, list):
            continue
        for i, c in enumerate(statuses):
            user = c.get("user") if isinstance(c, dict) else None
            linux = user.get("linux") if isinstance(user, dict) else None
            if linux is None:
                continue
            at = f"status.{key}[{i}].linux"
            if name == "windows":
                causes.append(forbidden(at, "cannot be set for a windows pod"))
            elif name == "linux" and isinstance(linux, dict):
                for field in ("uid", "gid"):
                    value = linux.get(field)
                    if isinstance(value, int) and not 0 <= value <= 2147483647:
                        causes.append(invalid(f"{at}.{field}", value, _ID_RANGE))
                groups = linux.get("supplementalGroups")
                for g, gid in enumerate(groups if isinstance(groups, list) else ()):
                    if isinstance(gid, int) and not 0 <= gid <= 2147483647:
                        causes.append(invalid(f"{at}.supplementalGroups[{g}]", gid, _ID_RANGE))
    return causes
