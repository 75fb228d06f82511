"""kube-apiserver's Priority admission, and the PriorityClasses every cluster has.

On a pod's create the pod's ``spec.priority`` (and ``spec.preemptionPolicy``)
come from its ``priorityClassName``: the class's ``value`` and policy; with no
class named, the class marked ``globalDefault`` (whose name is then written
into the pod), or priority 0 and ``PreemptLowerPriority`` if there is none. A
class that does not exist, or a priority or policy in the pod that differs
from the class's, is refused with 403 Forbidden and upstream's message. A
PriorityClass marked ``globalDefault`` is refused while another class is
(``admit_priority_class``, the plugin's ``validatePriorityClass``).

``SYSTEM_CLASSES`` are what kube-apiserver creates at start (its
``scheduling/bootstrap-system-priority-classes`` hook).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .errors import ApiError

__all__ = ["SYSTEM_CLASSES", "admit_pod_priority", "admit_priority_class"]

SYSTEM_CLASSES = (
    ("system-node-critical", 2000001000,
     "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", 2000000000,
     "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
)

DEFAULT_POLICY = "PreemptLowerPriority"

# name -> the PriorityClass (None: there is none); the class with globalDefault (None: none)
ClassLookup = Callable[[str], Awaitable[dict[str, Any] | None]]
DefaultLookup = Callable[[], Awaitable[dict[str, Any] | None]]


def system_class(name: str, value: int, description: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": False, "description": description, "preemptionPolicy": DEFAULT_POLICY}


def _forbidden(pod: dict[str, Any], why: str) -> ApiError:
    name = (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get("generateName") or ""
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', {"name": name, "kind": "pods"})


async def admit_pod_priority(pod: dict[str, Any], get_class: ClassLookup, get_default: DefaultLookup) -> None:
    """Set ``spec.priority`` and ``spec.preemptionPolicy`` of a pod being created, as upstream."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    if name:
        pc = await get_class(name)
        if pc is None:
            raise _forbidden(pod, f"no PriorityClass with name {name} was found")
    else:
        pc = await get_default()
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc.get("value") or 0) if pc is not None else 0
    policy = (pc.get("preemptionPolicy") if pc is not None else None) or DEFAULT_POLICY
    given = spec.get("priority")
    if given is not None and given != value:
        raise _forbidden(pod, f"the integer value of priority ({given}) must not be provided in pod spec; "
                              f"priority admission controller computed {value} from the given PriorityClass name")
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _forbidden(pod, f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod "
                              f"spec; priority admission controller computed {policy} from the given "
                              "PriorityClass name")
    spec["priority"] = value
    spec["preemptionPolicy"] = policy


async def admit_priority_class(pc: dict[str, Any], old: dict[str, Any] | None, get_default: DefaultLookup) -> None:
    """A class made the global default (created so, or another class updated to it) while
    one already is: 403, as upstream's plugin (the one it names is the lowest, as a pod's
    default)."""
    if pc.get("globalDefault") is not True:
        return
    default = await get_default()
    name = str((pc.get("metadata") or {}).get("name") or "")
    if default is None or (old is not None and default["metadata"]["name"] == name):
        return
    why = f'PriorityClass {default["metadata"]["name"]} is already marked as default. Only one default can exist'
    raise ApiError(403, "Forbidden", f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: {why}',
                   {"name": name, "group": "scheduling.k8s.io", "kind": "priorityclasses"})
