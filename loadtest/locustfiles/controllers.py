"""Controllers: a ReplicaSet controller's traffic.

Each user owns one ReplicaSet in one of the run's namespaces and follows its
own pods with a label-selected watch (as the controller's informer does). It
creates pods in bursts, deletes them again (churn) and writes the
ReplicaSet's status. With ``quota`` set (the ``million`` scenario) it creates
exactly that many pods, waits until they run, holds them for ``hold``
seconds, deletes them all and goes idle; ``pod_rate`` (the harness's
``--pod-rate``) paces those creates and deletes, all controllers together.
It plays the built-in ReplicaSet controller, so a server the harness starts
runs without that one (``serve --controllers '*,-replicaset-controller'``,
``scenarios.PLAYED_CONTROLLERS``), which would rewrite the status it writes.

Run alone against a server for debugging::

    LOADTEST_PARAMS='{"namespaces": 2}' python -m loadtest.locustfiles.controllers http://127.0.0.1:28500
"""

from __future__ import annotations

import random
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gevent
import gevent.pool
from locust import between, run_single_user, task

from .. import objects
from ..answer import WholeList
from ..podlines import facts_of
from .base import TRACKER, KubeUser, Reflector, WatchEvent, fire_latency, param, path_for, unique_suffix

__all__ = ["Pacer", "ReplicaSetController"]


class Pacer:
    """Spaces one controller's writes at ``rate`` a second (its share of the run's
    ``pod_rate``, as clusterloader2 paces its pods by a throughput): a write of ``n``
    waits for its slot, and the next slot is ``n / rate`` later. A slot missed while
    the server was slow is not made up, so a slow server lowers the rate instead of
    drawing a burst. The first slot is at a random phase, so the controllers' bursts
    interleave."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = gevent.sleep) -> None:
        self.interval = 1.0 / rate
        self.burst = max(1, min(burst, round(rate / 2)))  # about two bursts a second
        self.clock, self.sleep = clock, sleep
        self.next = clock() + random.uniform(0.0, self.burst * self.interval)

    def take(self, n: int) -> None:
        now = self.clock()
        if self.next > now:
            self.sleep(self.next - now)
            now = self.next
        self.next = now + n * self.interval


def namespace_for(index: int) -> str:
    return f"load-{index % max(1, int(param('namespaces', 4))):04d}"


class ReplicaSetController(KubeUser):
    wait_time = between(float(param("controller_wait_min", 0.5)), float(param("controller_wait_max", 2.0)))
    concurrency = 16  # a burst's creates go out in parallel, as the controller's slow-start batches do

    def on_start(self) -> None:
        suffix = unique_suffix()
        self.ns = namespace_for(random.randrange(1 << 30))
        self.rs = f"rs-{suffix}"
        self.selector = {"loadtest/controller": self.rs}
        self.factory = objects.PodFactory(seed=hash(suffix) & 0xFFFF, gpus=int(param("gpus_per_node", 0)) > 0,
                                          run=str(param("run_id", "")))
        self.pods: OrderedDict[str, float] = OrderedDict()  # name -> create sent
        self.running: set[str] = set()
        self.ready = 0  # how many of self.pods are in self.running, kept as either changes (see _recount)
        self.max_pods = int(param("pods_per_controller", 30))
        self.burst = int(param("burst", 10))
        self.quota = int(param("quota", 0))
        self.hold = float(param("hold", 5.0))
        pod_rate = float(param("pod_rate", 0) or 0)
        controllers = int((param("_fixed", {}) or {}).get("ReplicaSetController", 0) or 1)
        self.pacer = Pacer(pod_rate / controllers, self.burst) if pod_rate > 0 else None
        self.created_total = 0
        self.phase = "create"
        self.done_at = 0.0
        self._phase_started = 0.0
        self._last_resync = 0.0
        self._last_running = 0.0  # when one of its pods was last seen turn Running
        self.ensure("namespaces", objects.namespace(self.ns))
        # the ReplicaSet whose status this user writes, as its controller would; it selects none of
        # the pods (they carry no owner reference: one naming a ReplicaSet that does not exist gets
        # them collected), so a server's own ReplicaSet controller does not adopt them and scale
        # them down to its 0 replicas
        self.ensure("replicasets", objects.replicaset(self.ns, self.rs, {"loadtest/replicaset": self.rs}, 0), self.ns,
                    group="apps")
        # the namespace and the ReplicaSet are a user's; the pods and the status kube-controller-manager's
        self.act_as("system:serviceaccount:kube-system:replicaset-controller")
        self.reflector = Reflector(self, "pods", self.ns, label_selector=f"loadtest/controller={self.rs}",
                                   on_event=self._pod_event, on_list=self._pods_listed)
        self.reflector.start()
        self.reflector.synced.wait(timeout=30)

    def _pods_listed(self, items: list[dict[str, Any]]) -> None:
        """A (re)list is the truth: after a 410 the watch's missed events are in it, not replayed."""
        self.running = {p["metadata"]["name"] for p in items if (p.get("status") or {}).get("phase") == "Running"}
        self._recount()
        for p in items:
            TRACKER.pod_seen(facts_of(p), time.perf_counter())

    def _pod_event(self, ev: WatchEvent) -> None:
        pod = ev.pod()
        name = pod.key.partition("/")[2]
        if ev.type == "DELETED":
            if name in self.running:
                self.running.discard(name)
                self.ready -= name in self.pods
            TRACKER.forget(pod.key)
            return
        TRACKER.pod_seen(pod, ev.at)
        if pod.phase == "Running" and name not in self.running:
            self.running.add(name)
            self.ready += name in self.pods
            self._last_running = ev.at

    def _recount(self) -> None:
        """``ready`` counted afresh. Elsewhere it is kept step by step: the status write and
        the wait for Running read it at every task, and walking a controller's thousand pods
        each time for it was a tenth of a Locust worker's CPU in the ``million`` run."""
        self.ready = sum(1 for name in self.pods if name in self.running)

    # -- the traffic -------------------------------------------------------------
    def _create_pods(self, n: int) -> None:
        def one() -> None:
            name = f"{self.rs}-{random.getrandbits(40):010x}"
            pod = self.factory.pod(self.ns, name, self.selector)
            sent = time.perf_counter()
            TRACKER.created(f"{self.ns}/{name}", sent)
            a = self.create("pods", pod, self.ns, track=True)
            if a.status == 201:
                self.pods[name] = sent
                self.ready += name in self.running  # (its Running event may come before the answer)
                self.created_total += 1
            else:
                TRACKER.forget(f"{self.ns}/{name}")

        pool = gevent.pool.Pool(min(n, self.concurrency - 2) or 1)
        for _ in range(n):
            pool.spawn(one)
        pool.join()

    def _delete_pods(self, n: int) -> None:
        def one(name: str) -> None:
            self.call("DELETE", path_for("pods", self.ns, name), "pods", expected=(404,))

        names = [self.pods.popitem(last=False)[0] for _ in range(min(n, len(self.pods)))]
        self.ready -= sum(1 for name in names if name in self.running)
        pool = gevent.pool.Pool(max(1, min(len(names), self.concurrency - 2)))
        for name in names:
            pool.spawn(one, name)
        pool.join()

    def _write_status(self) -> None:
        n = len(self.pods)
        ready = self.ready
        self.patch("replicasets", self.ns, self.rs,
                   {"status": {"replicas": n, "fullyLabeledReplicas": n, "readyReplicas": ready,
                               "availableReplicas": ready, "observedGeneration": 1}},
                   subresource="status", group="apps", track=False)

    @task(3)
    def burst_of_creates(self) -> None:
        if self.quota:
            self._quota_step()
            return
        room = self.max_pods - len(self.pods)
        if room > 0:
            self._create_pods(min(room, random.randint(1, self.burst)))
            self._write_status()  # the controller reports the replicas it now has

    @task(2)
    def scale_down(self) -> None:
        if self.quota:
            self._quota_step()
            return
        if len(self.pods) > self.max_pods // 2:
            self._delete_pods(random.randint(1, self.burst))

    @task(2)
    def status_update(self) -> None:
        if self.quota and self.phase == "idle":
            return
        self._write_status()

    # -- the million's fixed quota ------------------------------------------------------
    def _resync_if_stuck(self) -> None:
        """After 30 s with no pod turning Running, read the pods back with a LIST: a watch
        event missed across a reconnect must not hold the run forever. Only then: while
        pods still start, a LIST every 30 s of waiting made a slow server slower (1,000
        pods listed and parsed by each of the controllers, most of the namespaced LISTs
        of the ``million`` run)."""
        now = time.perf_counter()
        if now - max(self._phase_started, self._last_resync, self._last_running) < 30.0:
            return
        self._last_resync = now
        items: list[dict[str, Any]] = []
        for page in self.list_pages("pods", self.ns, limit=500, labelSelector=f"loadtest/controller={self.rs}"):
            if isinstance(page, WholeList):  # the continue token expired: this LIST replaces the pages
                items = []
            items.extend((page.body or {}).get("items") or ())
        self._pods_listed(items)

    def _quota_step(self) -> None:
        if self.phase == "create":
            left = self.quota - self.created_total
            if left > 0:
                n = min(left, self.pacer.burst if self.pacer else self.burst)
                if self.pacer:
                    self.pacer.take(n)
                self._create_pods(n)
                return
            self.phase = "wait-running"
            self._phase_started = time.perf_counter()
        if self.phase == "wait-running":
            if self.ready < len(self.pods):  # (not all of them Running yet)
                self._resync_if_stuck()
                return
            fire_latency("controller all pods running", time.perf_counter() - self._phase_started)
            self.phase = "hold"
            self.done_at = time.perf_counter() + self.hold
        if self.phase == "hold":
            if time.perf_counter() < self.done_at:
                return
            self.phase = "delete"
        if self.phase == "delete":
            if self.pods:
                n = min(len(self.pods), self.pacer.burst if self.pacer else self.burst)
                if self.pacer:
                    self.pacer.take(n)
                self._delete_pods(n)
                return
            self._write_status()
            self.phase = "idle"


def main(argv: list[str]) -> None:
    ReplicaSetController.host = argv[1] if len(argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(ReplicaSetController)


if __name__ == "__main__":
    main(sys.argv)

