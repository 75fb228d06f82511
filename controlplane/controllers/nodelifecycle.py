"""The node lifecycle controller of kube-controller-manager, the part a Node's conditions drive:
the taints that say a node is unhealthy, on every node, whoever wrote its status.

As upstream's ``nodelifecycle`` controller decides them from ``status.conditions`` and
``spec.unschedulable``:

- Ready ``False``: ``node.kubernetes.io/not-ready:NoExecute``; Ready ``Unknown``:
  ``node.kubernetes.io/unreachable:NoExecute`` (one replaces the other); Ready ``True``:
  neither. A node without a Ready condition keeps whatever NoExecute taints it has, as
  upstream (its health pass skips a node with no Ready condition);
- TaintNodesByCondition's ``NoSchedule`` taints: ``not-ready`` (Ready False),
  ``unreachable`` (Ready Unknown), ``memory-pressure``, ``disk-pressure``, ``pid-pressure``,
  ``network-unavailable`` (their condition True), ``unschedulable`` (``spec.unschedulable``,
  a cordon).

A taint added gets ``timeAdded``, as upstream's SwapNodeControllerTaint gives it; the other
taints of the node (a user's, another controller's) are kept as they are, and one of these
keys that is still wanted is left alone (its ``timeAdded`` with it). The write is a merge
patch of ``spec.taints`` at the resourceVersion the informer holds (409: again, shortly). A
node going not ready (a NoExecute taint added where it had none) gets the event
``NodeNotReady`` ("Node n status is now: NodeNotReady").

The pods leave through the taint eviction controller (``tainteviction.py``): the
DefaultTolerationSeconds admission gives every pod 300 s of both NoExecute taints, so an
ordinary pod goes 5 minutes after the taint.

What this controller does not do: watch Leases. Upstream's health pass turns a node's
conditions Unknown when neither its status nor its Lease has moved for
``--node-monitor-grace-period``; here that is the node simulator's (``nodes/simulator.py``),
which knows when the kubelet it plays stops, and does it for its own nodes on its timer
(watching every Lease would cost a parse per renewal: 10,000 a second at 100,000 nodes;
see docs/nodes.md). Nor the rate limits of ``--node-eviction-rate`` and the zone
disruption states, nor MarkPodsNotReady.

The cost per Node event is a look at its conditions (five) and taints (usually none)
in the informer's copy; nothing is kept per node.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .events import Recorder
from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["CONDITION_TAINTS", "NodeLifecycleController", "lifecycle_taints", "start", "tainted"]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"

# TaintNodesByCondition: a condition's (type, status) -> the key of its NoSchedule taint
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
# the taints this controller owns: the NoSchedule ones always, the NoExecute ones where Ready is known
_NO_SCHEDULE_OWNED = frozenset({*((k, NO_SCHEDULE) for k in CONDITION_TAINTS.values()), (UNSCHEDULABLE, NO_SCHEDULE)})
_NO_EXECUTE_OWNED = frozenset({(NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE)})
_NO_EXECUTE_BY_READY = {"False": (NOT_READY, NO_EXECUTE), "Unknown": (UNREACHABLE, NO_EXECUTE)}
_NONE: frozenset[tuple[str, str]] = frozenset()
REASON_NOT_READY = "NodeNotReady"


def lifecycle_taints(node: Mapping[str, Any]) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]],
                                                       frozenset[tuple[str, str]]]:
    """``(wanted, held, owned)``: the (key, effect) of the lifecycle taints the node should
    have, of those it has, and of the taints this controller decides on it (the NoExecute
    ones only where the node has a Ready condition)."""
    status = node.get("status")
    wanted: list[tuple[str, str]] = []
    ready = None
    for c in (status.get("conditions") if status else None) or ():
        ctype, cstatus = c.get("type"), c.get("status")
        key = CONDITION_TAINTS.get((ctype, cstatus))
        if key is not None:
            wanted.append((key, NO_SCHEDULE))
        if ctype == "Ready":
            ready = cstatus
    spec = node.get("spec")
    if spec and spec.get("unschedulable"):
        wanted.append((UNSCHEDULABLE, NO_SCHEDULE))
    owned = _NO_SCHEDULE_OWNED
    if ready is not None:
        owned = _NO_SCHEDULE_OWNED | _NO_EXECUTE_OWNED
        no_execute = _NO_EXECUTE_BY_READY.get(ready)
        if no_execute is not None:
            wanted.append(no_execute)
    taints = spec.get("taints") if spec else None
    held = frozenset(p for t in taints if (p := (t.get("key"), t.get("effect"))) in owned) if taints else _NONE
    return (frozenset(wanted) if wanted else _NONE), held, owned


def tainted(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The node's taints as this controller would write them, or None when they are right:
    the others kept, the lifecycle ones wanted and held kept, the missing ones added
    (``timeAdded`` now), the ones no longer wanted dropped."""
    wanted, held, owned = lifecycle_taints(node)
    if wanted == held:
        return None
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for t in (node.get("spec") or {}).get("taints") or ():
        pair = (t.get("key"), t.get("effect"))
        if pair not in owned or pair in wanted:
            out.append(t)
    # in a fixed order: the NoSchedule ones, then the NoExecute one
    for key, effect in sorted(wanted - held, key=lambda p: (p[1] != NO_SCHEDULE, p[0])):
        out.append({"key": key, "effect": effect, "timeAdded": now})
    return out


def _not_ready(taints: Iterable[Mapping[str, Any]]) -> bool:
    """Whether one of ``taints`` is a not-ready or unreachable NoExecute taint."""
    return any((t.get("key"), t.get("effect")) in _NO_EXECUTE_OWNED for t in taints)


class NodeLifecycleController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "node-controller")
        self.nodes = client.informer("/api/v1/nodes", on_add=self._node_changed,
                                     on_update=lambda _old, new: self._node_changed(new))

    def _node_changed(self, node: dict[str, Any]) -> None:
        wanted, held, _ = lifecycle_taints(node)
        if wanted != held:
            self.queue.add(str(meta_of(node).get("name", "")))

    async def sync(self, name: str) -> None:
        node = self.nodes.items.get(name)
        if node is None:
            return
        taints = tainted(node)
        if taints is None:
            return
        meta = meta_of(node)
        await self.client.patch(resource_path("", "v1", "nodes", name=name),
                                {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                                 "spec": {"taints": taints or None}}, patch_type="merge")
        if _not_ready(taints) and not _not_ready((node.get("spec") or {}).get("taints") or ()):
            self.events.record("Node", node, REASON_NOT_READY, f"Node {name} status is now: {REASON_NOT_READY}")

    async def run(self) -> None:
        await run_controller("node lifecycle controller", (self.nodes,), self.queue, self.sync, self.workers)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await NodeLifecycleController(client).run()
