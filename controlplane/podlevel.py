"""Pod-level resources (KEP-2837, PodLevelResources: beta and on since 1.34): what a pod's
``spec.resources`` says of the pod as a whole, and where it stands in for its containers'.

Only cpu, memory and ``hugepages-<size>`` may be named at pod level (``is_pod_level_resource``,
upstream's ``IsSupportedPodLevelResource``). A resource the pod-level requests name is the
pod's request of it, whatever its containers ask (upstream's ``resourcehelper.PodRequests``:
the pod-level value replaces the containers' aggregate for that resource; every other
resource stays the containers', and the overhead is added on top of both); the same for
limits (``PodLimits``). Every place that works out a pod's requests goes through
``pod_level`` so that they agree: the scheduler's ``nodeinfo.pod_requests`` (and with it
NodeResourcesFit, the nodes' requested sums, scoring and preemption), the autoscaler's
``resources.pod_requests``, ResourceQuota's usage (``registry/quota.py``) and the simulated
kubelet's resize decision::

    pod_level({"resources": {"requests": {"cpu": "2", "ephemeral-storage": "1Gi"}}}, "requests")
    # {'cpu': '2'}: ephemeral-storage is not a pod-level resource (validation refuses it)

A pod without ``spec.resources`` (nearly every pod) costs one dict lookup.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HUGEPAGES_PREFIX", "SUPPORTED_NAMES", "is_pod_level_resource", "pod_level", "pod_level_set"]

HUGEPAGES_PREFIX = "hugepages-"
# as upstream's SupportedPodLevelResources lists them in its NotSupported error (sorted)
SUPPORTED_NAMES = ("cpu", HUGEPAGES_PREFIX, "memory")
_NONE: dict[str, Any] = {}


def is_pod_level_resource(name: str) -> bool:
    """Whether ``name`` may be set at pod level: cpu, memory, ``hugepages-<size>``."""
    return name in ("cpu", "memory") or name.startswith(HUGEPAGES_PREFIX)


def pod_level(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    """The pod-level ``kind`` (``requests`` or ``limits``) of the pod ``spec``, those of the
    resources pod level supports, as written (quantities unparsed); empty when it says none.
    The dict returned is not to be changed."""
    resources = spec.get("resources")
    if not resources or not isinstance(resources, dict):
        return _NONE
    named = resources.get(kind)
    if not named or not isinstance(named, dict):
        return _NONE
    return {k: v for k, v in named.items() if isinstance(k, str) and is_pod_level_resource(k)}


def pod_level_set(spec: dict[str, Any]) -> bool:
    """Whether the pod has pod-level resources (``IsPodLevelResourcesSet``): a supported
    resource in its pod-level requests or limits."""
    return bool(pod_level(spec, "requests") or pod_level(spec, "limits"))
