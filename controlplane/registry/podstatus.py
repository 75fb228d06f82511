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

from .causes import Causes, duplicate, forbidden, invalid
from .podvalidation import label_key_problems, subdomain_problems

__all__ = ["status_causes", "user_causes"]

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
    """``validatePodResourceClaimStatuses``: each names one of the pod's claims, once."""
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


def user_causes(status: Obj, spec: Obj) -> Causes:
    """``validateContainerStatusUsers`` of each of the three container status lists, after the
    IPs' checks in ``ValidatePodStatusUpdate``: a container's ``user.linux`` (the ids the kubelet
    says it runs as, KEP-3619) is forbidden for a Windows pod, and for a Linux one (a pod without
    ``spec.os`` is one) holds ids in range; upstream's path leaves ``user`` out
    (``status.containerStatuses[0].linux``). A status without users costs a test a container."""
    for key in _STATUS_LISTS:
        statuses = status.get(key)
        if statuses and isinstance(statuses, list):
            for c in statuses:
                if isinstance(c, dict) and "user" in c:
                    return _users(status, spec)
    return []


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
