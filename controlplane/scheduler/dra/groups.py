"""ResourceClaims of a PodGroup (KEP-5729, ``DRAWorkloadResourceClaims``, beta in 1.37).

A PodGroup (scheduling.k8s.io/v1beta1) lists claims in ``spec.resourceClaims``
(``name`` plus one of ``resourceClaimName``/``resourceClaimTemplateName``). A pod
of the group (``spec.schedulingGroup.podGroupName``) uses one of them by listing a
claim in its own ``spec.resourceClaims`` that matches the group's *exactly* (same
name, same claim or template name); a claim that does not match is the pod's own,
as before. For a matching template the resourceclaim controller creates one claim
for the group (owned by the PodGroup, recorded in the group's
``status.resourceClaimStatuses`` and in each pod's); the scheduler allocates it
for the first pod and reserves it for the group, not for each pod:
``reservedFor: [{apiGroup: scheduling.k8s.io, resource: podgroups, name, uid}]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["API_GROUP", "RESOURCE", "consumer", "group_claim_names", "group_name", "is_group_consumer",
           "owner_podgroup", "status_claim_name"]

API_GROUP = "scheduling.k8s.io"
RESOURCE = "podgroups"
_FIELDS = ("name", "resourceClaimName", "resourceClaimTemplateName")


def group_name(pod: Mapping[str, Any]) -> str | None:
    """The pod's PodGroup name (``spec.schedulingGroup.podGroupName``), or None."""
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or None


def group_claim_names(pod: Mapping[str, Any], podgroup: Mapping[str, Any] | None) -> set[str]:
    """The names of the pod's claims that match one of its PodGroup's exactly (all three fields)."""
    if podgroup is None:
        return set()
    theirs = {tuple(rc.get(f) or None for f in _FIELDS)
              for rc in (podgroup.get("spec") or {}).get("resourceClaims") or ()}
    if not theirs:
        return set()
    return {str(rc.get("name")) for rc in (pod.get("spec") or {}).get("resourceClaims") or ()
            if tuple(rc.get(f) or None for f in _FIELDS) in theirs}


def status_claim_name(podgroup: Mapping[str, Any], claim: str) -> str | None:
    """The claim generated for the group's claim ``claim``, as its status records it."""
    for st in (podgroup.get("status") or {}).get("resourceClaimStatuses") or ():
        if st.get("name") == claim:
            return st.get("resourceClaimName") or None
    return None


def consumer(podgroup: Mapping[str, Any]) -> dict[str, str]:
    """The ``reservedFor`` entry naming the group."""
    meta = podgroup.get("metadata") or {}
    return {"apiGroup": API_GROUP, "resource": RESOURCE, "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def is_group_consumer(ref: Mapping[str, Any]) -> bool:
    return ref.get("apiGroup") == API_GROUP and ref.get("resource") == RESOURCE


def owner_podgroup(claim: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the PodGroup a claim was generated for (its controller owner), or None."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "PodGroup" \
                and str(ref.get("apiVersion", "")).startswith(API_GROUP + "/"):
            return ref.get("name", ""), ref.get("uid", "")
    return None
