"""A pod's ``ephemeralcontainers`` subresource (``kubectl debug``): the only way to add
containers to a running pod.

An update through it changes ``spec.ephemeralContainers`` and nothing else (the rest
of what is sent is ignored, as upstream's strategy does). Ephemeral containers may be
added, never changed or removed; each needs a name unique among all the pod's
containers and an image, may target an existing container, and may not have what only
a regular container has (ports, probes, lifecycle hooks, resources, a restart policy or
restart rules), nor what the pod's OS forbids (``spec.os``: a Windows pod's container no
Linux security context field, a Linux pod's no ``windowsOptions``). Each added one is
otherwise checked as any container is (``validateContainerCommon``: its security context
too), and the pod's HostProcess rules over all its containers, as upstream's
``ValidatePodEphemeralContainersUpdate`` validates the whole new spec.
"""

from __future__ import annotations

import copy
from typing import Any

from .causes import Causes, cause, objects
from .podannotations import MIRROR
from .podspec import default_container
from .podvalidation import ephemeral_container_causes, host_process_causes, os_causes

__all__ = ["ephemeral_update"]

# fields an ephemeral container may not set (upstream's validateEphemeralContainers)
_FORBIDDEN = ("ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resizePolicy",
              "restartPolicy", "restartPolicyRules")


def ephemeral_update(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], Causes]:
    """The pod ``old`` with ``new``'s ephemeral containers (defaulted), and the causes of a 422."""
    old_spec = old.get("spec") or {}
    wanted = (new.get("spec") or {}).get("ephemeralContainers")
    merged = dict(old)
    merged["metadata"] = dict(old.get("metadata") or {})
    spec = merged["spec"] = dict(old_spec)
    if MIRROR in (merged["metadata"].get("annotations") or {}):
        # a static pod's mirror: ValidatePodEphemeralContainersUpdate refuses any write, this alone
        # (kubernetes#113935; its path is the root's, written ``[]`` by field.Path)
        return merged, [cause("FieldValueForbidden", "[]",
                              "Forbidden: static pods do not support ephemeral containers")]
    causes: Causes = []
    if wanted is None:
        wanted = []
    if not isinstance(wanted, list):
        return merged, [cause("FieldValueInvalid", "spec.ephemeralContainers", "Invalid value: must be a list")]
    containers = [copy.deepcopy(c) for c in wanted]
    spec["ephemeralContainers"] = containers
    if not containers:
        spec.pop("ephemeralContainers", None)
    regular = {c.get("name") for key in ("containers", "initContainers") for c in old_spec.get(key) or ()
               if isinstance(c, dict)}
    seen: set[str] = set()
    stored = old_spec.get("ephemeralContainers") or ()
    for path, c in objects(containers, "spec.ephemeralContainers", causes):
        default_container(c)
        if c not in stored:  # validateContainerCommon (a stored one passed it)
            causes += ephemeral_container_causes(spec, [(path, c)])
        name = c.get("name")
        if name and (name in regular or name in seen):
            causes.append(cause("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
        seen.add(str(name))
        for field in _FORBIDDEN:
            if c.get(field):
                causes.append(cause("FieldValueForbidden", f"{path}.{field}",
                                     "Forbidden: cannot be set for an Ephemeral Container"))
        resources = c.get("resources") or {}
        if resources.get("limits") or resources.get("requests"):
            causes.append(cause("FieldValueForbidden", f"{path}.resources",
                                 "Forbidden: cannot be set for an Ephemeral Container"))
        target = c.get("targetContainerName")
        if target and target not in regular:
            causes.append(cause("FieldValueNotFound", f"{path}.targetContainerName", f'Not found: "{target}"'))
    causes += host_process_causes(spec, "spec")
    if spec.get("os") is not None:  # (ValidatePodSpec's last check: a Windows pod's containers' Linux fields)
        causes += os_causes(spec, "spec")
    by_name = {c.get("name"): c for c in containers if isinstance(c, dict)}
    for before in old_spec.get("ephemeralContainers") or ():
        name = before.get("name")
        after = by_name.get(name)
        if after is None:
            causes.append(cause("FieldValueForbidden", "spec.ephemeralContainers",
                                 f'Forbidden: existing ephemeral containers "{name}" may not be removed'))
        elif after != before:
            causes.append(cause("FieldValueForbidden", "spec.ephemeralContainers",
                                 f'Forbidden: existing ephemeral containers "{name}" may not be changed'))
    return merged, causes
