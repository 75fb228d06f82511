"""The kubelet's events about a pod's containers, in upstream's reasons and words.

A simulated kubelet records what a real one does as it starts and stops a
pod's containers (``pkg/kubelet/images``, ``pkg/kubelet/kuberuntime`` at 1.37),
each about the pod with ``involvedObject.fieldPath`` naming the container
(``spec.containers{web}``, ``spec.initContainers{setup}``,
``spec.ephemeralContainers{debugger-x7k2p}``), from source
``kubelet`` on its node (``source.host``, ``reportingInstance``):

- ``Pulling`` ``Pulling image "nginx:latest"`` when a container's image is
  not on the node (or its policy is ``Always``), and once it is there
  ``Pulled`` ``Successfully pulled image "nginx:latest" in 1.52s (3.1s
  including waiting). Image size: 190000000 bytes.`` (the pull's own time,
  then the container's wait, its turn behind other pulls included; an image
  without tag or digest is named with ``:latest``, as the kubelet's pull);
- ``Pulled`` ``Container image "nginx" already present on machine and can be
  accessed by the pod`` for an image on the node (as asked, untagged);
- ``ErrImageNeverPull`` and ``Failed`` ``Error: ErrImageNeverPull``
  (Warnings) for an image not on the node with policy ``Never``;
- ``FailedMount`` ``MountVolume.SetUp failed for volume "v" : secret "x" not found``
  (Warning, about the pod) and ``Failed`` ``Error: secret "x" not found`` (Warning, about
  the container) while a Secret or ConfigMap it needs is missing (``refs``);
- ``Created`` ``Container created`` and ``Started`` ``Container started``
  for each container, init containers first, when the pod turns Running, and
  for an ephemeral container when its image is there;
- ``Killing`` ``Stopping container web`` for each running container when the
  pod is deleted, gracefully or at once (regular containers, then sidecars from
  the last).

The simulator models no crash loops nor failed pulls, so no ``BackOff`` nor
``Failed`` pull. The events are written through the API by the controllers'
``Recorder`` (same event again: its count goes up), whose writes the simulator
queues on a lane of their own, apart from its heartbeats and pod status (``submit``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..client import Client
from ..controllers.events import Recorder, Submit
from .images import Image, Pull

__all__ = ["NODE_EVENTS_PENDING", "KubeletEvents", "NodeEvents", "container_paths", "go_duration",
           "with_default_tag"]

# the node events' recorder stands for every simulated kubelet, each of which has a broadcaster
# (and a queue of 1,000) of its own upstream: this many unwritten at once (about 1 KB each), the
# registration of some 8,000 nodes at once, before the newest are dropped
NODE_EVENTS_PENDING = 50_000


def go_duration(seconds: float) -> str:
    """``seconds`` truncated to the millisecond, as Go prints a ``time.Duration``::

        >>> go_duration(0.5236), go_duration(1.25), go_duration(61.5), go_duration(3600)
        ('523ms', '1.25s', '1m1.5s', '1h0m0s')
    """
    ms = int(seconds * 1000 + 1e-6)  # (1.001 s is 1000.999... ms in binary)
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest // 1000}.{rest % 1000:03d}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def with_default_tag(image: str) -> str:
    """``image`` as the kubelet pulls it: ``:latest`` added when it has no tag nor digest."""
    if "@" in image or ":" in image.rsplit("/", 1)[-1]:
        return image
    return f"{image}:latest"


def container_paths(pod: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each container of ``pod`` with its field path, init containers first."""
    spec = pod.get("spec") or {}
    for field, containers in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers"))):
        for c in containers or ():
            if isinstance(c, dict):
                yield f"spec.{field}{{{c.get('name', '')}}}", c


class KubeletEvents:
    """The events of every simulated kubelet (one recorder: ``host`` says whose)."""

    def __init__(self, client: Client, submit: Submit | None = None,
                 as_node: Callable[[str], Client] | None = None) -> None:
        self.recorder = Recorder(client, "kubelet", submit=submit, as_host=as_node)  # each as its node's kubelet

    def _record(self, pod: Mapping[str, Any], node: str, path: str, reason: str, message: str,
                type_: str = "Normal") -> None:
        self.recorder.record("Pod", pod, reason, message, type_, field_path=path, host=node)

    def pull_started(self, pod: Mapping[str, Any], node: str, path: str, requested: str, pull: Pull) -> None:
        """A container's image looked up as its pod is first seen: ``Pulling``, or why not."""
        if pull.ready is None:
            self._record(pod, node, path, "ErrImageNeverPull",
                         f'Container image "{requested}" is not present with pull policy of Never', "Warning")
            self._record(pod, node, path, "Failed", "Error: ErrImageNeverPull", "Warning")
        elif pull.pulled:
            self._record(pod, node, path, "Pulling", f'Pulling image "{with_default_tag(requested)}"')

    def pull_done(self, pod: Mapping[str, Any], node: str, path: str, requested: str, image: Image, pull: Pull,
                  waited: float) -> None:
        """A container's image on the node (``waited`` seconds after its ``Pulling``): ``Pulled``."""
        if pull.ready is None:
            return
        if not pull.pulled:
            self._record(pod, node, path, "Pulled",
                         f'Container image "{requested}" already present on machine and can be accessed by the pod')
            return
        self._record(pod, node, path, "Pulled",
                     f'Successfully pulled image "{with_default_tag(requested)}" in {go_duration(pull.seconds)} '
                     f'({go_duration(max(waited, pull.seconds))} including waiting). '
                     f'Image size: {int(image.size_mb * 1_000_000)} bytes.')

    def failed_mount(self, pod: Mapping[str, Any], node: str, message: str) -> None:
        """A volume of the pod cannot be set up (``refs``): ``FailedMount``, about the pod."""
        self._record(pod, node, "", "FailedMount", message, "Warning")

    def config_error(self, pod: Mapping[str, Any], node: str, path: str, message: str) -> None:
        """The container at ``path`` cannot be created (``refs``: its environment's Secret or
        ConfigMap): ``Failed``, in the words of kuberuntime's startContainer."""
        self._record(pod, node, path, "Failed", f"Error: {message}", "Warning")

    def started(self, pod: Mapping[str, Any], node: str) -> None:
        """The pod turned Running: each container created and started."""
        for path, _ in container_paths(pod):
            self.container_started(pod, node, path)

    def container_started(self, pod: Mapping[str, Any], node: str, path: str) -> None:
        """The container at ``path`` created and started (an ephemeral one, alone)."""
        self._record(pod, node, path, "Created", "Container created")
        self._record(pod, node, path, "Started", "Container started")

    def restarted(self, pod: Mapping[str, Any], node: str, only: str | None = None) -> None:
        """Its exited containers started again (``podfailure``; ``only`` the one at that field
        path): the image on the node already, each ``Pulled``, ``Created`` and ``Started``, as the
        kubelet's startContainer records them."""
        for path, c in self._exited(pod, only):
            self._record(pod, node, path, "Pulled", f'Container image "{c.get("image", "")}" already present '
                                                    "on machine and can be accessed by the pod")
            self.container_started(pod, node, path)

    def backing_off(self, pod: Mapping[str, Any], node: str, only: str | None = None) -> None:
        """Its exited containers wait before they restart (``podfailure``; ``only`` the one at
        that field path): ``BackOff``, in the words of the kubelet's doBackOff."""
        meta = pod.get("metadata") or {}
        for path, c in self._exited(pod, only):
            self._record(pod, node, path, "BackOff",
                         f"Back-off restarting failed container {c.get('name', '')} in pod "
                         f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})", "Warning")

    @staticmethod
    def _exited(pod: Mapping[str, Any], only: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        """The containers that exit together (every regular one), or the one at path ``only``."""
        if only is not None:
            return ((path, c) for path, c in container_paths(pod) if path == only)
        return ((f"spec.containers{{{c.get('name', '')}}}", c) for c in (pod.get("spec") or {}).get("containers") or ()
                if isinstance(c, dict))

    def stopping(self, pod: Mapping[str, Any], node: str) -> None:
        """A running pod deleted: each running container stopped (its regular and running
        ephemeral containers, then its sidecars, the last first, as the kubelet stops them)."""
        spec = pod.get("spec") or {}
        sidecars = [c for c in spec.get("initContainers") or () if isinstance(c, dict)
                    and c.get("restartPolicy") == "Always"]
        debugging = {s.get("name") for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or ()
                     if isinstance(s, dict) and "running" in (s.get("state") or {})}
        debuggers = [c for c in spec.get("ephemeralContainers") or () if isinstance(c, dict)
                     and c.get("name") in debugging]
        for field, containers in (("containers", [c for c in spec.get("containers") or () if isinstance(c, dict)]),
                                  ("ephemeralContainers", debuggers), ("initContainers", sidecars[::-1])):
            for c in containers:
                name = c.get("name", "")
                self._record(pod, node, f"spec.{field}{{{name}}}", "Killing", f"Stopping container {name}")


class NodeEvents:
    """The kubelet's events about its own node (``pkg/kubelet/kubelet_node_status.go``'s
    ``recordNodeStatusEvent``, ``nodestatus`` setters, ``BirthCry``, the container manager's
    node allocatable), in upstream's reasons and words, all Normal, from source ``kubelet`` on
    the node. They are about the kubelet's reference to its node (``nodeRef``): ``apiVersion:
    v1`` (since upstream's PR 134545, 1.35: without it ``kubectl events --for node/n``, which
    selects on it, showed none), ``kind: Node``, its name, and its name again for a uid (not the
    Node's uid: ``kubectl describe node`` looks under both; kubernetes#134503); in namespace
    ``default``, as client-go puts a cluster-scoped object's.

    - at registration: ``Starting`` ``Starting kubelet.``; ``NodeHasSufficientMemory``,
      ``NodeHasNoDiskPressure``, ``NodeHasSufficientPID`` (``Node n status is now: <reason>``)
      as the kubelet first sets those conditions; ``NodeAllocatableEnforced`` ``Updated Node
      Allocatable limit across pods``;
    - ``NodeReady`` / ``NodeNotReady`` (``Node n status is now: ...``) as the Ready condition it
      reports turns True, or False;
    - ``NodeSchedulable`` / ``NodeNotSchedulable`` as it sees ``spec.unschedulable`` change (a
      kubelet starts thinking its node schedulable: one cordoned before it started gets
      ``NodeNotSchedulable`` at once).
    """

    def __init__(self, client: Client, submit: Submit | None = None,
                 as_node: Callable[[str], Client] | None = None) -> None:
        self.recorder = Recorder(client, "kubelet", submit=submit, as_host=as_node, max_pending=NODE_EVENTS_PENDING)

    def _record(self, node: str, reason: str, message: str) -> None:
        # the kubelet's nodeRef: apiVersion v1 (the recorder's default), its name for a uid
        ref = {"metadata": {"name": node, "uid": node}}
        self.recorder.record("Node", ref, reason, message, host=node)

    def _status(self, node: str, reason: str) -> None:
        self._record(node, reason, f"Node {node} status is now: {reason}")

    def starting(self, node: str, conditions: bool = True) -> None:
        """The kubelet started on ``node``; ``conditions``: its pressure conditions are new
        (a first registration, not a kubelet's restart on a node that has them)."""
        self._record(node, "Starting", "Starting kubelet.")
        if conditions:
            for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
                self._status(node, reason)
        self._record(node, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")

    def ready(self, node: str, ready: bool) -> None:
        """The Ready condition the kubelet reports turned True (``NodeReady``) or False."""
        self._status(node, "NodeReady" if ready else "NodeNotReady")

    def schedulable(self, node: str, unschedulable: bool) -> None:
        """The kubelet saw the node cordoned, or uncordoned."""
        self._status(node, "NodeNotSchedulable" if unschedulable else "NodeSchedulable")
