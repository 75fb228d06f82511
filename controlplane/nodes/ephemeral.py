"""The statuses of ``kubectl debug``'s ephemeral containers, as a kubelet writes them.

Upstream's kubelet (``pkg/kubelet/kubelet_pods.go`` at 1.37) converts the ephemeral
containers' runtime statuses with the same code as the regular containers', with
these consequences, which ``ephemeral_statuses`` reproduces:

- one not running yet (its image being pulled) waits with reason ``ContainerCreating``,
  ``PodInitializing`` in a pod with init containers (the default waiting state of
  every container the runtime does not know yet), ``ErrImageNeverPull`` when its
  image is absent and its policy ``Never``;
- one running has ``ready: false`` and no ``started``: the prober manager, which sets
  both, walks only the regular and init containers' statuses;
- one running reports ``resources: {}`` (in-place resize on, a running container's
  status says its resources; an ephemeral container may have none);
- the list is sorted by name, as the kubelet sorts every status list but the init
  containers'.

The image and container IDs are the simulator's, as its stages write them for the
regular containers (``default-stages.yaml``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ephemeral_statuses", "running", "waiting"]


def running(container: Mapping[str, Any], started_at: str) -> dict[str, Any]:
    """The status of ``container`` started at ``started_at`` (RFC 3339)."""
    image = str(container.get("image", ""))
    return {"name": container.get("name"), "image": image, "imageID": f"{image}@sha256:simulated",
            "containerID": f"containerd://{uuid.uuid4().hex}", "ready": False, "restartCount": 0,
            "resources": {}, "state": {"running": {"startedAt": started_at}}}


def waiting(container: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """The status of ``container`` before it runs, waiting for ``reason``."""
    return {"name": container.get("name"), "image": str(container.get("image", "")), "imageID": "",
            "ready": False, "restartCount": 0, "state": {"waiting": {"reason": reason}}}


def ephemeral_statuses(reported: Iterable[Mapping[str, Any]],
                       changed: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod's ``ephemeralContainerStatuses``: those ``reported`` with the ``changed`` ones
    (by name) in their place, sorted by name."""
    by_name = {str(s.get("name")): dict(s) for s in reported}
    by_name.update(changed)
    return [by_name[name] for name in sorted(by_name)]
