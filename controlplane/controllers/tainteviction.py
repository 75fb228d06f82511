"""The taint eviction controller of kube-controller-manager: pods go from nodes tainted
``NoExecute`` (``kubectl taint nodes n key=value:NoExecute``) unless they tolerate it.

For every pod bound to a node with ``NoExecute`` taints, as upstream's
``tainteviction`` controller decides it:

- a taint the pod does not tolerate: the pod is evicted now;
- every taint tolerated, the tolerations used (the first that matches each taint)
  with ``tolerationSeconds``: evicted when the shortest of them has passed since the
  controller first saw the pod there (0 or less: now); tolerations without a time:
  never;
- the taints removed (or the pod gone) before then: the eviction is cancelled
  (event ``TaintManagerEviction``, ``Cancelling deletion of Pod ns/name``).

An eviction records the event ``TaintManagerEviction`` (``Marking for deletion Pod
ns/name``), gives the pod the ``DisruptionTarget`` condition (``DeletionByTaintManager``)
and deletes it with its own grace period, once: the pod is not deleted again.

The node lifecycle controller's taints (``node.kubernetes.io/not-ready`` and
``unreachable``, ``nodelifecycle.py``) are taints like any other here, on every node,
simulated or not: the DefaultTolerationSeconds admission gives every pod 300 s of them,
so an ordinary pod goes 5 minutes after its node turns NotReady or Unknown. Pods on a
tainted node are listed from the API by ``spec.nodeName`` when its taints change; other
pod events cost a dictionary lookup. Each eviction counts in
``controlplane_nodes_evictions_total``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.metrics import NODE_EVICTIONS
from controlplane.podgeneration import observing
from controlplane.selectormatch import tolerates

from .events import Recorder
from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["TaintEvictionController", "min_toleration_seconds", "start"]

REASON = "TaintManagerEviction"
RETRY_SECONDS = 1.0
log = logging.getLogger(__name__)


def no_execute_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The node's NoExecute taints this controller acts on: all of them."""
    return [t for t in (node.get("spec") or {}).get("taints") or ()
            if isinstance(t, dict) and t.get("effect") == "NoExecute"]


def min_toleration_seconds(taints: Sequence[Mapping[str, Any]],
                           tolerations: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds until a pod with ``tolerations`` is evicted for ``taints``: 0 when one is not
    tolerated, None when it may stay for ever (upstream's GetMatchingTolerations and
    getMinTolerationTime)."""
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates([dict(t)], taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    if not used:
        return None
    least: float | None = None
    for t in used:
        seconds = t.get("tolerationSeconds")
        if seconds is None:
            continue
        if int(seconds) <= 0:
            return 0.0
        least = float(seconds) if least is None else min(least, float(seconds))
    return least


@dataclass
class _Eviction:
    uid: str
    node: str
    created: float
    handle: asyncio.TimerHandle | None  # None: done, the pod is not evicted again


class TaintEvictionController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "taint-eviction-controller")
        self.nodes = client.informer("/api/v1/nodes", on_add=self._node_changed,
                                     on_update=lambda _old, new: self._node_changed(new),
                                     on_delete=self._node_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)
        self.tainted: dict[str, list[dict[str, Any]]] = {}  # node name -> its NoExecute taints
        self.evictions: dict[str, _Eviction] = {}  # pod key -> its eviction, scheduled or done

    # -- events
    def _node_changed(self, node: dict[str, Any]) -> None:
        name = str(meta_of(node).get("name", ""))
        taints = no_execute_taints(node)
        if taints == self.tainted.get(name, []):
            return
        if taints:
            self.tainted[name] = taints
        else:
            self.tainted.pop(name, None)
        self.queue.add("node:" + name)

    def _node_deleted(self, node: dict[str, Any]) -> None:
        self.tainted.pop(str(meta_of(node).get("name", "")), None)

    def _pod_added(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node in self.tainted:
            self.queue.add("pod:" + key_of(pod))

    def _pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if old_spec.get("nodeName") == new_spec.get("nodeName") \
                and old_spec.get("tolerations") == new_spec.get("tolerations"):
            return  # as upstream: only a binding or new tolerations change the decision
        self._pod_added(new)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        self._cancel(key_of(pod))

    # -- decisions
    def _cancel(self, key: str) -> None:
        ev = self.evictions.pop(key, None)
        if ev is not None and ev.handle is not None:
            ev.handle.cancel()
            ns, name = key.split("/", 1)
            self.events.record("Pod", {"metadata": {"namespace": ns, "name": name}}, REASON,
                               f"Cancelling deletion of Pod {key}")

    def _process(self, pod: Mapping[str, Any], node: str, taints: Sequence[Mapping[str, Any]]) -> None:
        key, uid = key_of(pod), str(meta_of(pod).get("uid", ""))
        ev = self.evictions.get(key)
        if ev is not None and ev.uid != uid:  # another pod of that name
            self._cancel(key)
            ev = None
        if ev is not None and ev.handle is None:
            return  # evicted already
        seconds = min_toleration_seconds(taints, (pod.get("spec") or {}).get("tolerations") or ())
        if seconds is None:
            self._cancel(key)
            return
        now = time.monotonic()
        if ev is not None and seconds > 0:
            return  # scheduled already, from when the pod was first seen here (upstream keeps it)
        if ev is not None:
            self._cancel(key)
        loop = asyncio.get_running_loop()
        entry = _Eviction(uid, node, now, None)
        entry.handle = loop.call_later(seconds, self.queue.add, "evict:" + key)
        self.evictions[key] = entry

    async def sync(self, item: str) -> None:
        kind, _, key = item.partition(":")
        if kind == "node":
            await self._sync_node(key)
        elif kind == "pod":
            pod = self.pods.items.get(key)
            if pod is None:
                self._cancel(key)
                return
            node = (pod.get("spec") or {}).get("nodeName")
            taints = self.tainted.get(node or "")
            if node and taints:
                self._process(pod, node, taints)
        elif kind == "evict":
            await self._evict(key)

    async def _sync_node(self, name: str) -> None:
        taints = self.tainted.get(name)
        if not taints:  # the taints went: every eviction scheduled there is off
            for key in [k for k, ev in self.evictions.items() if ev.node == name]:
                self._cancel(key)
            return
        pods = await self.client.list(resource_path("", "v1", "pods"), fieldSelector=f"spec.nodeName={name}")
        taints = self.tainted.get(name)
        if not taints:
            return
        for pod in pods.get("items") or ():
            self._process(pod, name, taints)

    async def _evict(self, key: str) -> None:
        ev = self.evictions.get(key)
        if ev is None or ev.handle is None:
            return
        ev.handle = None  # done, whatever comes of it: evicted once
        ns, name = key.split("/", 1)
        path = resource_path("", "v1", "pods", ns, name)
        self.events.record("Pod", {"metadata": {"namespace": ns, "name": name}}, REASON,
                           f"Marking for deletion Pod {key}")
        try:
            pod = await self.client.get(path)
            if meta_of(pod).get("uid") != ev.uid:
                return
            conditions = (pod.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                       and c.get("reason") == "DeletionByTaintManager" for c in conditions):
                now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                await self.client.patch(path + "/status", {"status": {"conditions": [observing(
                    {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": now}, pod)]}},
                    patch_type="strategic")
            await self.client.delete(path, {"preconditions": {"uid": ev.uid}})
            NODE_EVICTIONS.inc()
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod by now: nothing to evict
                self._retry(key, ev, e)
        except (OSError, TimeoutError, httpx.HTTPError) as e:
            self._retry(key, ev, e)

    def _retry(self, key: str, ev: _Eviction, error: BaseException) -> None:
        """An eviction that failed is tried again in a second (upstream's timed worker
        forgets a failed one, so the pod's next update schedules it again), unless it was
        cancelled meanwhile."""
        log.warning("taint eviction of pod %s failed (%r); again in %.0f s", key, error, RETRY_SECONDS)
        if self.evictions.get(key) is ev:
            ev.handle = asyncio.get_running_loop().call_later(RETRY_SECONDS, self.queue.add, "evict:" + key)

    async def run(self) -> None:
        try:
            await run_controller("taint eviction controller", (self.nodes, self.pods), self.queue, self.sync,
                                 self.workers)
        finally:
            for ev in self.evictions.values():
                if ev.handle is not None:
                    ev.handle.cancel()


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await TaintEvictionController(client).run()
