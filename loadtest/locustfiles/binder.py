"""A scheduler-like binder, for runs without the built-in scheduler.

It learns as a scheduler does, from watches only: its run's nodes (list + watch,
selected by the run's label: :func:`run_nodes`),
the pods not yet bound (``fieldSelector=spec.nodeName=``), the bound ones
(``spec.nodeName!=``: only their deletions matter, which free their node's room)
and the PodGroups (their gang ``minCount``). It binds each pod with a
``pods/binding`` POST to the node with the fewest of the pods it placed there
still existing (up to the node's 110-pod limit), and gang members all together
once the group has ``minCount`` pods
waiting, onto nodes with enough GPUs. No filters beyond that: it places load, it
is not a scheduler. A 409 (bound by someone else) or 404 (deleted meanwhile)
is expected and counted apart.

Run alone::

    python -m loadtest.locustfiles.binder http://127.0.0.1:28500
"""

from __future__ import annotations

import heapq
import sys
from collections import defaultdict
from typing import Any

import gevent
import gevent.queue
from locust import constant, run_single_user, task

from .. import objects
from .base import KubeUser, Reflector, WatchEvent, param, path_for

__all__ = ["BinderUser"]

MAX_PODS_PER_NODE = 110


def run_nodes() -> str:
    """The label selector of the nodes the binder places pods on: its run's kubelets' (the
    run's id, ``run_id``, on each), else any load test's. A target's other nodes (a cluster's
    own, ``serve --nodes``'s, an earlier run's left without a kubelet) would never run the
    pods, and are no GPU nodes: a gang placed there waited out its run."""
    run = str(param("run_id", ""))
    return f"{objects.RUN_LABEL}={run}" if run else "loadtest=true"


def run_pods() -> str:
    """The label selector of the pods the binder places: its run's (the controllers' and training
    jobs' pods carry the run's id), no other pod of the target's. Against a target without a
    scheduler, a pod of its own (a user's, pending) was bound to a load-test node, where that
    node's kubelet reported it Running, and stayed there once the run was over. Alone (no run),
    every unbound pod."""
    run = str(param("run_id", ""))
    return f"{objects.RUN_LABEL}={run}" if run else ""


def _gpus(pod: dict[str, Any]) -> int:
    n = 0
    for c in pod.get("spec", {}).get("containers", []):
        n += int(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0) or 0)
    claims = pod.get("spec", {}).get("resourceClaims") or ()
    return n or (int(param("gang_gpus_per_pod", 1)) if claims else 0)


class BinderUser(KubeUser):
    wait_time = constant(5)
    fixed_count = 1
    concurrency = int(param("binder_concurrency", 24)) + 4

    def on_start(self) -> None:
        self.nodes: dict[str, int] = {}          # name -> pods placed
        self.free_gpus: dict[str, int] = {}
        self.heap: list[tuple[int, str]] = []    # (pods placed, node): least-loaded first
        self.queue: gevent.queue.Queue[dict[str, Any]] = gevent.queue.Queue()
        self.queued: set[str] = set()
        self.min_count: dict[str, int] = {}      # "ns/podgroup" -> minCount
        self.gangs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.gpu_nodes = int(param("gpus_per_node", 0))
        self._rr = 0
        self.act_as("system:kube-scheduler")
        Reflector(self, "nodes", label_selector=run_nodes(), on_event=self._node_event,
                  on_list=self._nodes_listed).start()
        Reflector(self, "podgroups", group="scheduling.k8s.io", version="v1beta1",
                  on_event=self._podgroup_event, on_list=self._podgroups_listed).start()
        Reflector(self, "pods", field_selector="spec.nodeName=", label_selector=run_pods(),
                  on_event=self._pod_event, on_list=self._pods_listed).start()
        # a deleted pod gives its node's room back: without this, a node was full for good once 110
        # pods had been placed on it, however many were gone (list-storm bound 1,100 pods of 2,596)
        Reflector(self, "pods", field_selector="spec.nodeName!=", list_first=False,
                  on_event=self._bound_pod_event).start()
        for _ in range(int(param("binder_concurrency", 24))):
            self.spawn(self._bind_loop)

    # -- what it learns ------------------------------------------------------------------
    def _add_node(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if name in self.nodes:
            return
        self.nodes[name] = 0
        gpus = int(((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", self.gpu_nodes) or 0)
        self.free_gpus[name] = gpus
        heapq.heappush(self.heap, (0, name))

    def _nodes_listed(self, items: list[dict[str, Any]]) -> None:
        for n in items:
            self._add_node(n)

    def _node_event(self, ev: WatchEvent) -> None:
        if ev.type == "ADDED":
            self._add_node(ev.object)
        elif ev.type == "DELETED":
            self.nodes.pop(ev.object["metadata"]["name"], None)

    def _podgroups_listed(self, items: list[dict[str, Any]]) -> None:
        for pg in items:
            self._podgroup(pg)

    def _podgroup_event(self, ev: WatchEvent) -> None:
        if ev.type != "DELETED":
            self._podgroup(ev.object)

    def _podgroup(self, pg: dict[str, Any]) -> None:
        key = f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
        gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
        self.min_count[key] = int(gang.get("minCount", 1))
        self._try_gang(key)

    def _pods_listed(self, items: list[dict[str, Any]]) -> None:
        for p in items:
            self._offer(p)

    def _pod_event(self, ev: WatchEvent) -> None:
        if ev.type == "ADDED":
            self._offer(ev.object)

    def _bound_pod_event(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            self._unplace(str((ev.object.get("spec") or {}).get("nodeName") or ""))

    def _offer(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if key in self.queued or meta.get("deletionTimestamp") or pod.get("spec", {}).get("nodeName"):
            return
        self.queued.add(key)
        group = (pod.get("spec", {}).get("schedulingGroup") or {}).get("podGroupName")
        if group:
            gkey = f"{meta['namespace']}/{group}"
            self.gangs[gkey].append(pod)
            self._try_gang(gkey)
        else:
            self.queue.put(pod)

    def _try_gang(self, gkey: str) -> None:
        """All members at once, once ``minCount`` are waiting and GPUs are free for them."""
        members = self.gangs.get(gkey) or []
        need = self.min_count.get(gkey)
        if need is None or len(members) < need:
            return
        placement = self._place_gang(members)
        if placement is None:
            return  # wait for capacity (a finished job frees its GPUs when its pods go)
        del self.gangs[gkey]
        for pod, node in placement:
            pod["_node"] = node
            self.queue.put(pod)

    def _place_gang(self, members: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]] | None:
        """Spread the members over nodes with enough GPUs. Capacity is the node's,
        not what is left of it: the binder sees unbound pods only, so it cannot
        tell when a finished job gives its GPUs back (a real scheduler can)."""
        out = []
        for pod in members:
            want = _gpus(pod)
            candidates = [n for n, g in self.free_gpus.items() if g >= want and n in self.nodes]
            if not candidates:
                return None
            self._rr += 1
            out.append((pod, candidates[self._rr % len(candidates)]))
        return out

    # -- what it does ---------------------------------------------------------------------
    def _least_loaded(self) -> str | None:
        while self.heap:
            placed, name = heapq.heappop(self.heap)
            if name not in self.nodes:
                continue
            if placed != self.nodes[name]:
                continue  # stale: each change of a node's count pushed an entry with the new count
            if placed >= MAX_PODS_PER_NODE:
                heapq.heappush(self.heap, (placed, name))
                return None
            self.nodes[name] = placed + 1
            heapq.heappush(self.heap, (placed + 1, name))
            return name
        return None

    def _place(self, node: str) -> None:
        """One more pod on ``node`` (a gang member's, placed by :meth:`_place_gang`)."""
        if node in self.nodes:
            self._recount(node, self.nodes[node] + 1)

    def _unplace(self, node: str) -> None:
        """One pod fewer on ``node``: deleted, or its binding refused."""
        if self.nodes.get(node, 0) > 0:
            self._recount(node, self.nodes[node] - 1)

    def _recount(self, node: str, count: int) -> None:
        self.nodes[node] = count
        if len(self.heap) > 4 * len(self.nodes) + 64:  # mostly stale entries: start it again
            self.heap = [(c, n) for n, c in self.nodes.items()]
            heapq.heapify(self.heap)
        else:
            heapq.heappush(self.heap, (count, node))

    def _bind_loop(self) -> None:
        while True:
            pod = self.queue.get()
            node = pod.pop("_node", None)
            if node is not None:
                self._place(node)
            else:
                node = self._least_loaded()
            if node is None:
                gevent.sleep(0.5)  # no node (yet), or all full
                self.queue.put(pod)
                continue
            meta = pod["metadata"]
            a = self.call("POST", path_for("pods", meta["namespace"], meta["name"], "binding"), "pods/binding",
                          objects.binding(meta["name"], node), expected=(404, 409))
            if not 200 <= a.status < 300:
                self._unplace(node)  # the pod is gone or someone else's: no room taken
            self.queued.discard(f"{meta['namespace']}/{meta['name']}")

    @task
    def idle(self) -> None:
        """All the binder's work happens in its watch and bind greenlets."""


if __name__ == "__main__":
    BinderUser.host = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(BinderUser)
