"""The scheduler: informers in, the scheduling loop, bindings out.

``Scheduler(client).run()`` watches nodes, pods, podgroups, workloads,
priorityclasses and whatever its plugins list in ``resources_to_watch()``;
keeps the cache and queue in step with them; pops pods one at a time and runs
the scheduling cycle (PreFilter .. Permit, synchronous, against the cache);
and hands each placed pod to a binding cycle (PreBind, Bind: ``POST
pods/binding``) that runs as its own task, so the next pod's cycle does not
wait for the write. It writes nothing but bindings, ``PodScheduled`` conditions
and ``nominatedNodeName`` (pods/status), Events, PodGroup status, and the
``DisruptionTarget`` conditions and deletions of preemption victims.

Inside ``controlplane serve`` it runs on a ``Client.in_process`` (``start``);
alone, ``controlplane scheduler --kubeconfig PATH`` (``main``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ..client import ApiError, Client, InformerHandle, KubeconfigError, resource_path
from ..gcsettings import settle_heap
from ..metrics import SCHEDULER_E2E_SCHEDULING, SCHEDULER_SCHEDULE_ATTEMPTS
from ..podgeneration import generation_of, observing
from .cache import Cache
from .events import EventRecorder
from .framework import BIND_SLOT, ActionType, BindSlot, Code, CycleState, Registry, Status, WatchedResource
from .nodeinfo import NodeInfo, PodInfo, resize_state
from .plugins import PluginConfig
from .plugins.gangscheduling import rejected_with_group
from .profile import FitError, Profile
from .queue import SchedulingQueue
from .writer import Writer

if TYPE_CHECKING:
    from ..config import Config
    from ..metricsserver import Address
    from .plugins.gangscheduling import GangScheduling

__all__ = ["Scheduler", "start"]

log = logging.getLogger("controlplane.scheduler")

DEFAULT_SCHEDULER_NAME = "default-scheduler"
# PreFilter rejections that PostFilter (preemption) still runs after, as upstream's scheduling cycle
# does for any FitError; a gang member held PENDING is left to its group
_PREFILTER_REJECTED = (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

EventHandler = Callable[..., object]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))


def _go_duration(seconds: float) -> str:
    """Seconds as Go prints a ``time.Duration`` (to the millisecond): ``5m0s``, ``1m30.5s``,
    ``400ms``, as upstream's messages say them.

    >>> _go_duration(300), _go_duration(90.5), _go_duration(0.4), _go_duration(3725)
    ('5m0s', '1m30.5s', '400ms', '1h2m5s')
    """
    ms = max(0, round(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs = f"{ms // 1000}.{ms % 1000:03d}".rstrip("0").rstrip(".") + "s"
    return (f"{hours}h{minutes}m" if hours else f"{minutes}m" if minutes else "") + secs


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _terminal(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class _Waiting:
    __slots__ = ("future", "pending", "timer")

    def __init__(self, future: asyncio.Future[Status | None], pending: set[str]) -> None:
        self.future = future
        self.pending = pending
        self.timer: asyncio.TimerHandle | None = None


class Scheduler:
    """One profile's scheduler over one API client (see the module docstring).

    ``bind_concurrency`` bounds the binding cycles writing at once (PreBind's writes and
    the binding); one whose PreBind waits for a controller (a claim's binding, binding
    conditions) holds no place meanwhile (``framework.BindSlot``).
    """

    def __init__(self, client: Client, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                 registry: Registry | None = None, profile: Sequence[PluginConfig] | None = None,
                 percentage_of_nodes_to_score: int = 0, bind_concurrency: int = 512,
                 success_events: bool = True) -> None:
        self._client = client
        self.writer = Writer(client)  # bindings, events, conditions
        self.scheduler_name = scheduler_name
        self.cache = Cache()
        self._handlers: dict[str, list[tuple[EventHandler, EventHandler, EventHandler]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._waiting: dict[str, _Waiting] = {}
        self.nominated: dict[str, dict[str, PodInfo]] = {}  # node -> pods nominated there
        self.priority_classes: dict[str, int] = {}
        self.success_events = success_events
        self.events = EventRecorder(self.writer, scheduler_name, self.spawn)
        self._binds = asyncio.Semaphore(bind_concurrency)
        self.fwk = Profile.build(self, registry, profile, percentage_of_nodes_to_score)
        self.gang: GangScheduling | None = self.fwk.get("GangScheduling")  # type: ignore[assignment]
        self.queue = SchedulingQueue(pre_enqueue=self.fwk.pre_enqueue, events=self.fwk.events)
        self.informers: dict[str, InformerHandle] = {}
        self.scheduled = 0
        self.synced = asyncio.Event()
        self.yield_interval = 0.005

    # ---------------------------------------------------------------- Handle

    @property
    def client(self) -> Client:
        return self._client

    def nodes(self) -> Mapping[str, NodeInfo]:
        return self.cache.nodes

    def lister(self, resource: str) -> Mapping[str, Any]:
        inf = self.informers.get(resource)  # its ``items`` is replaced by each relist: look it up each time
        return inf.items if inf is not None else {}

    def add_event_handler(self, resource: str, on_add: EventHandler, on_update: EventHandler,
                          on_delete: EventHandler) -> None:
        """Called, after the cache and queue, on every event of a resource the scheduler watches."""
        self._handlers.setdefault(resource, []).append((on_add, on_update, on_delete))

    def profile(self) -> Profile:
        return self.fwk

    def allow(self, pod_key: str, plugin: str) -> None:
        w = self._waiting.get(pod_key)
        if w is None:
            return
        w.pending.discard(plugin)
        if not w.pending and not w.future.done():
            w.future.set_result(None)

    def reject(self, pod_key: str, plugin: str, message: str) -> None:
        w = self._waiting.get(pod_key)
        if w is not None and not w.future.done():
            w.future.set_result(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    def waiting_pods(self) -> Iterable[str]:
        return list(self._waiting)

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def record_event(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal", *,
                     action: str, related: Mapping[str, Any] | None = None) -> None:
        """An events.k8s.io Event about ``obj``, folded into a series with its isomorphic ones
        (events.py)."""
        self.events.record(obj, reason, message, type_, action=action, related=related)

    def _record_scheduled(self, obj: Mapping[str, Any], message: str) -> None:
        # binding changes the pod: it cannot recur
        self.events.record(obj, "Scheduled", message, action="Binding", once=True)

    @property
    def dropped_events(self) -> int:
        return self.events.dropped

    # ---------------------------------------------------------------- informers

    def _watch(self, group: str, version: str, plural: str, on_add: EventHandler, on_update: EventHandler,
               on_delete: EventHandler) -> InformerHandle:
        def add(obj: dict[str, Any]) -> None:
            on_add(obj)
            for h in self._handlers.get(plural, ()):
                h[0](obj)

        def update(old: dict[str, Any], new: dict[str, Any]) -> None:
            on_update(old, new)
            for h in self._handlers.get(plural, ()):
                h[1](old, new)

        def delete(obj: dict[str, Any]) -> None:
            on_delete(obj)
            for h in self._handlers.get(plural, ()):
                h[2](obj)

        # against a cluster of an earlier release (kind, a managed cluster), the APIs beyond core/v1
        # and PriorityClasses (Workloads and PodGroups, DRA's, DeviceTaintRules) may not be served:
        # the scheduler starts without them, as kube-scheduler with their feature gates off
        always = group == "" or (group, plural) == ("scheduling.k8s.io", "priorityclasses")
        inf = self._client.informer(resource_path(group, version, plural), on_add=add, on_update=update,
                                    on_delete=delete, page_size=1000, optional=not always)
        self.informers[plural] = inf
        return inf

    def _informers(self) -> list[InformerHandle]:
        out = [
            self._watch("scheduling.k8s.io", "v1", "priorityclasses", self._pc_add, self._pc_update, self._pc_delete),
            self._watch("", "v1", "nodes", self._node_add, self._node_update, self._node_delete),
            self._watch("scheduling.k8s.io", "v1beta1", "workloads", self._wl_add, self._wl_update, self._wl_delete),
            self._watch("scheduling.k8s.io", "v1beta1", "podgroups", self._pg_add, self._pg_update, self._pg_delete),
        ]
        seen = {"priorityclasses", "nodes", "workloads", "podgroups", "pods"}
        for w in self.fwk.watches:
            if w.plural not in seen:
                seen.add(w.plural)
                out.append(self._watch_plugin_resource(w))
        out.append(self._watch("", "v1", "pods", self._pod_add, self._pod_update, self._pod_delete))
        return out

    def _watch_plugin_resource(self, w: WatchedResource) -> InformerHandle:
        q = self.queue
        return self._watch(w.group, w.version, w.plural,
                           lambda o: q.on_event(w.plural, ActionType.ADD, None, o),
                           lambda a, b: q.on_event(w.plural, ActionType.UPDATE, a, b),
                           lambda o: q.on_event(w.plural, ActionType.DELETE, o, None))

    # priorityclasses

    def _pc_add(self, obj: dict[str, Any]) -> None:
        self.priority_classes[obj["metadata"]["name"]] = int(obj.get("value") or 0)

    def _pc_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._pc_add(new)

    def _pc_delete(self, obj: dict[str, Any]) -> None:
        self.priority_classes.pop(obj["metadata"]["name"], None)

    # nodes

    def _node_add(self, obj: dict[str, Any]) -> None:
        self.cache.add_or_update_node(obj)
        self.queue.on_event("nodes", ActionType.ADD, None, obj)

    def _node_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cache.add_or_update_node(new)
        action = ActionType(0)
        os_, ns_ = old.get("spec") or {}, new.get("spec") or {}
        ost, nst = old.get("status") or {}, new.get("status") or {}
        if ost.get("allocatable") != nst.get("allocatable"):
            action |= ActionType.UPDATE_NODE_ALLOCATABLE
        if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
            action |= ActionType.UPDATE_NODE_LABEL
        if os_.get("taints") != ns_.get("taints") or os_.get("unschedulable") != ns_.get("unschedulable"):
            action |= ActionType.UPDATE_NODE_TAINT
        if ost.get("conditions") != nst.get("conditions"):
            action |= ActionType.UPDATE_NODE_CONDITION
        if action:
            self.queue.on_event("nodes", action, old, new)

    def _node_delete(self, obj: dict[str, Any]) -> None:
        self.cache.remove_node(obj["metadata"]["name"])

    # workloads and podgroups

    def _wl_add(self, obj: dict[str, Any]) -> None:
        if self.gang is not None:
            self.gang.manager.set_workload(obj)
        self.queue.on_event("workloads", ActionType.ADD, None, obj)

    def _wl_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self.gang is not None:
            self.gang.manager.set_workload(new)
        self.queue.on_event("workloads", ActionType.UPDATE, old, new)

    def _wl_delete(self, obj: dict[str, Any]) -> None:
        if self.gang is not None:
            meta = obj["metadata"]
            self.gang.manager.remove_workload(f"{meta.get('namespace', '')}/{meta['name']}")

    def _pg_add(self, obj: dict[str, Any]) -> None:
        if self.gang is not None:
            self.gang.manager.set_podgroup(obj)
        self.queue.on_event("podgroups", ActionType.ADD, None, obj)

    def _pg_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self.gang is not None:
            self.gang.manager.set_podgroup(new)
        if old.get("spec") != new.get("spec"):
            self.queue.on_event("podgroups", ActionType.UPDATE, old, new)

    def _pg_delete(self, obj: dict[str, Any]) -> None:
        if self.gang is not None:
            meta = obj["metadata"]
            self.gang.manager.remove_podgroup(f"{meta.get('namespace', '')}/{meta['name']}")

    # pods

    def _pod_info(self, obj: dict[str, Any]) -> PodInfo:
        pod = PodInfo(obj)
        spec = obj.get("spec") or {}
        pcn = spec.get("priorityClassName")
        if pcn and pcn in self.priority_classes:
            # Priority admission (this server's, api/priority.py, as upstream's) has written the
            # class's value into spec.priority already; a class's value cannot change, so this is
            # the same, and holds for a pod stored without admission (a store restored from elsewhere).
            pod.priority = self.priority_classes[pcn]
        return pod

    def _ours(self, obj: Mapping[str, Any]) -> bool:
        spec = obj.get("spec") or {}
        return (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) == self.scheduler_name

    def _pod_add(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        if spec.get("nodeName"):
            if _terminal(obj):
                return
            pod = self._pod_info(obj)
            self._assigned(pod)
            self.queue.on_event("pods", ActionType.ADD, None, obj)
            return
        if not self._ours(obj) or _terminal(obj) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        pod = self._pod_info(obj)
        if pod.group and self.gang is not None:
            self.gang.manager.observe_pod(pod.group_key, pod.key, None)
        self.queue.add(pod)
        if pod.group:
            self.queue.on_event("pods", ActionType.ADD, None, obj)

    def _assigned(self, pod: PodInfo) -> None:
        """A pod the informer shows bound: into the cache, for its life (so, of its object,
        only what names it: the informer holds the rest)."""
        pod.keep_only_identity()
        self.cache.add_pod(pod)
        if self.queue.where(pod.key) not in (None, "inflight"):
            self.queue.delete(pod.key)  # bound by someone else
        if self.nominated:
            self._clear_nomination(pod.key)
        if pod.group and self.gang is not None:
            self.gang.manager.observe_pod(pod.group_key, pod.key, pod.node_name)

    def _resized(self, key: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A bound pod that has been resized (its generation past 1) changed: when its
        requests moved (a resize written, its kubelet's report, a Pending condition), the
        cache counts the new ones; a shrink may let pending pods fit (upstream's
        UpdatePodScaleDown event)."""
        node = self.cache.node_of(key)
        ni = self.cache.nodes.get(node) if node is not None else None
        held = ni.pods.get(key) if ni is not None else None
        pod = self._pod_info(new)
        if held is None or held.requests == pod.requests:
            return
        shrunk = any(v < held.requests.get(k, 0) for k, v in pod.requests.items()) or \
            any(k not in pod.requests for k in held.requests)
        pod.keep_only_identity()
        self.cache.add_pod(pod)
        if shrunk:
            self.queue.on_event("pods", ActionType.UPDATE_POD_SCALE_DOWN, old, new)

    def _pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
        if nspec.get("nodeName"):
            key = _key(new)
            if _terminal(new):
                if self.cache.node_of(key) is not None:
                    self.cache.remove_pod(key)
                    self._forget_member(new)
                    self.queue.on_event("pods", ActionType.UPDATE_POD_SCALE_DOWN, old, new)
                return
            if not ospec.get("nodeName"):
                self._assigned(self._pod_info(new))
                self.queue.on_event("pods", ActionType.ADD, None, new)
                return
            ometa, nmeta = old.get("metadata") or {}, new.get("metadata") or {}
            relabeled = ometa.get("labels") != nmeta.get("labels")
            if relabeled or (nmeta.get("deletionTimestamp") and not ometa.get("deletionTimestamp")):
                # (a terminating pod is no longer counted by PodTopologySpread: cache.counts)
                pod = self._pod_info(new)
                pod.keep_only_identity()
                self.cache.add_pod(pod)
                if relabeled:
                    self.queue.on_event("pods", ActionType.UPDATE_POD_LABEL, old, new)
            elif ometa.get("generation") != nmeta.get("generation") or resize_state(new) is not None:
                self._resized(key, old, new)
            return
        if not self._ours(new):
            return
        if _terminal(new) or (new.get("metadata") or {}).get("deletionTimestamp"):
            self._pod_delete(new)
            return
        ometa, nmeta = old.get("metadata") or {}, new.get("metadata") or {}
        if ospec == nspec and ometa.get("labels") == nmeta.get("labels") and \
                ometa.get("annotations") == nmeta.get("annotations"):
            held = self.queue.pods.get(_key(new))
            if held is not None:
                held.obj = new  # our own status writes: nothing that could change the verdict
            return
        pod = self._pod_info(new)
        self.queue.add(pod)
        if ospec.get("schedulingGates") and not nspec.get("schedulingGates"):
            self.queue.on_event("pods", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, old, new)

    def _pod_delete(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self._forget_member(obj)
        if self.nominated:
            self._clear_nomination(key)
        if self.cache.node_of(key) is not None and not self.cache.is_assumed(key):
            self.cache.remove_pod(key)
            self.queue.on_event("pods", ActionType.DELETE, obj, None)
            return
        w = self._waiting.get(key)
        if w is not None and not w.future.done():
            w.future.set_result(Status(Code.UNSCHEDULABLE, "pod deleted while waiting", plugin="Scheduler"))
        if self.queue.where(key) != "inflight":
            self.queue.delete(key)

    def _forget_member(self, obj: Mapping[str, Any]) -> None:
        group = ((obj.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if group and self.gang is not None:
            meta = obj.get("metadata") or {}
            ns = meta.get("namespace", "")
            self.gang.manager.forget_pod(f"{ns}/{group}", f"{ns}/{meta.get('name', '')}")

    def _clear_nomination(self, key: str) -> None:
        for node, pods in list(self.nominated.items()):
            if pods.pop(key, None) is not None and not pods:
                del self.nominated[node]

    # ---------------------------------------------------------------- the loop

    async def run(self) -> None:
        """Start the informers, wait for them to sync, then schedule until cancelled."""
        informers = self._informers()
        for inf in informers:
            self.spawn(inf.run())
        self.spawn(self.events.run())
        for inf in informers:
            await inf.synced.wait()
        self.synced.set()
        settle_heap()  # the synced caches leave the collector's sight (gcsettings)
        log.info("scheduler %s: synced %d nodes, %d pods queued", self.scheduler_name, len(self.cache.nodes),
                 len(self.queue))
        try:
            last_yield = time.perf_counter()
            while True:
                pod = await self.queue.pop()
                await self.schedule_one(pod)
                now = time.perf_counter()
                if now - last_yield > self.yield_interval:
                    # Inside serve the loop is the API's too: hand it back every few ms, not every
                    # pod (a cycle is shorter than a trip through the loop's ready queue).
                    await asyncio.sleep(0)
                    last_yield = time.perf_counter()
        finally:
            self.queue.close()
            for t in list(self._tasks):
                t.cancel()

    def nominated_pods_for(self, pod: PodInfo) -> dict[str, list[PodInfo]] | None:
        """Node name -> the pods nominated there that ``pod`` must leave room for (those of
        at least its priority, as upstream's ``addGENominatedPods``); None if there are none.
        Filter counts them (``schedule_one``), and so does preemption's dry run."""
        return self._extra_for(pod)

    def _extra_for(self, pod: PodInfo) -> dict[str, list[PodInfo]] | None:
        if not self.nominated:
            return None
        extra: dict[str, list[PodInfo]] = {}
        for node, pods in self.nominated.items():
            others = [p for p in pods.values() if p.key != pod.key and p.priority >= pod.priority]
            if others:
                extra[node] = others
        return extra or None

    async def schedule_one(self, pod: PodInfo) -> None:
        """One scheduling cycle; on success the binding cycle is started as a task."""
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        node, fit_error = self.fwk.place(state, pod, self.cache.order, self._extra_for(pod))
        if node is None:
            assert fit_error is not None
            await self._unschedulable(state, pod, fit_error, cycle)
            return
        name = node.name
        self.cache.assume(pod, name)
        for p in self.fwk.reserve:
            s = p.reserve(state, pod, name)
            if s is not None:
                self._unreserve(state, pod, name)
                self._failed(pod, s, cycle, s.message)
                return
        waiting: _Waiting | None = None
        for pp in self.fwk.permit:
            s, timeout = pp.permit(state, pod, name)
            if s is None:
                continue
            if s.code == Code.WAIT:
                if waiting is None:
                    waiting = _Waiting(asyncio.get_running_loop().create_future(), set())
                    self._waiting[pod.key] = waiting
                waiting.pending.add(pp.name())
                t = waiting.timer
                if t is None or timeout < t.when() - asyncio.get_running_loop().time():
                    if t is not None:
                        t.cancel()
                    waiting.timer = asyncio.get_running_loop().call_later(
                        timeout, self.reject, pod.key, pp.name(),
                        f"rejected due to timeout after waiting {_go_duration(timeout)} at plugin {pp.name()}")
                continue
            self._unreserve(state, pod, name)
            self._failed(pod, s, cycle, s.message)
            return
        if waiting is not None and not waiting.pending:
            waiting.future.set_result(None)
        self.spawn(self._binding_cycle(state, pod, name, waiting, cycle))

    async def _unschedulable(self, state: CycleState, pod: PodInfo, fit: FitError, cycle: int) -> None:
        message = fit.message()
        nominated = ""
        clear = False
        if fit.num_nodes == 0:  # no node: no preemption, and the nomination cleared
            if pod.nominated_node:
                self._clear_nomination(pod.key)
                pod.nominated_node = ""
                clear = True
        elif self.fwk.post_filter and (fit.pre_filter is None or fit.pre_filter.code in _PREFILTER_REJECTED):
            statuses = fit.statuses if fit.pre_filter is None else self._prefilter_statuses(fit.pre_filter)
            for p in self.fwk.post_filter:
                try:
                    result, s = await p.post_filter(state, pod, statuses)
                except Exception:
                    log.exception("post-filter %s failed for %s", p.name(), pod.key)
                    continue
                if result is not None and result.nominated_node:
                    nominated = result.nominated_node
                    pod.nominated_node = nominated
                    self.nominated.setdefault(nominated, {})[pod.key] = pod
                    break
                if result is not None and result.nominated_node == "" and pod.nominated_node:
                    # preemption found no room any more: the node it was nominated to is let go
                    self._clear_nomination(pod.key)
                    pod.nominated_node = ""
                    clear = True
                if s is not None and s.message:
                    message = f"{message} preemption: {s.message}"
        status = fit.pre_filter or Status(Code.UNSCHEDULABLE, message, plugin="")
        if pod.group and self.gang is not None:
            q = self.queue
            untried = [p.key for p in q.group_members(pod.group_key) if q.where(p.key) in ("active", "backoff")]
            sibling_message = self.gang.on_member_failed(pod, message, error=status.code == Code.ERROR,
                                                         untried=untried)
            if sibling_message is not None:  # None: the member fails alone, its group's attempt goes on
                self._park_siblings(pod, sibling_message)
        SCHEDULER_SCHEDULE_ATTEMPTS.labels(result="unschedulable").inc()
        if self._gone(pod):
            return
        self.queue.add_unschedulable(pod, status, cycle, fit.rejectors())
        self._report_failure(pod, message, nominated, clear_nominated=clear, error=status.code == Code.ERROR)

    def _prefilter_statuses(self, status: Status) -> dict[str, Status]:
        """Every node's status after a PreFilter rejection: the rejection itself, as upstream's
        ``SetAbsentNodesStatus`` gives it to the nodes PostFilter sees; preemption then finds
        ``Preemption is not helpful for scheduling`` on each node the rejection is unresolvable for."""
        return dict.fromkeys(self.cache.nodes, status)

    def _park_siblings(self, pod: PodInfo, sibling_message: str) -> None:
        """``pod``'s failure failed its gang's attempt: the members still queued are parked
        with it, and each gets the failure report a cycle of its own would have written (a
        FailedScheduling event, ``PodScheduled=False`` when it changes), as upstream runs
        every pod of a failed group attempt through failure handling; the autoscaler counts
        the pods so marked. Members waiting at Permit are rejected and report themselves."""
        if self.gang is None or not self.gang.in_gang(pod):
            return
        for sibling in self.queue.park_group(pod.group_key, "GangScheduling"):
            self._report_failure(sibling, sibling_message, "")

    def _gone(self, pod: PodInfo) -> bool:
        """Was the pod deleted while its cycle ran? Then it leaves the queue."""
        pods = self.informers.get("pods")
        if pods is not None and pod.key not in pods.items:
            self.queue.delete(pod.key)
            return True
        return False

    def _failed(self, pod: PodInfo, status: Status, cycle: int, message: str) -> None:
        if self._gone(pod):
            return
        if status.code == Code.ERROR:
            SCHEDULER_SCHEDULE_ATTEMPTS.labels(result="error").inc()
            self.queue.requeue_error(pod)
        else:
            SCHEDULER_SCHEDULE_ATTEMPTS.labels(result="unschedulable").inc()
            self.queue.add_unschedulable(pod, status, cycle)
        self._report_failure(pod, message, "", error=status.code == Code.ERROR)

    def _unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for p in reversed(self.fwk.reserve):
            try:
                p.unreserve(state, pod, node)
            except Exception:
                log.exception("unreserve %s failed for %s", p.name(), pod.key)
        self.cache.forget(pod)

    def _report_failure(self, pod: PodInfo, message: str, nominated: str, clear_nominated: bool = False,
                        error: bool = False) -> None:
        """FailedScheduling event, and the PodScheduled=False condition (written only when it
        changes: its message, or the pod's generation it observed, as upstream's
        UpdatePodCondition compares), with ``status.nominatedNodeName`` set to ``nominated`` or,
        ``clear_nominated``, removed. Its reason is upstream's: ``SchedulerError`` for an
        ``error`` of the scheduler's own (a failed write, a PreBind that gave up), else
        ``Unschedulable``."""
        self.record_event(pod.obj, "FailedScheduling", message, "Warning", action="Scheduling")
        generation = generation_of(pod.obj)
        reason = "SchedulerError" if error else "Unschedulable"
        for c in (pod.obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message") == message \
                    and c.get("reason") == reason and c.get("observedGeneration") == generation \
                    and not nominated and not clear_nominated:
                return
        self.spawn(self._write_condition(pod, message, nominated, clear_nominated, reason))

    async def _write_condition(self, pod: PodInfo, message: str, nominated: str, clear_nominated: bool = False,
                               reason: str = "Unschedulable") -> None:
        status: dict[str, Any] = {"conditions": [observing({
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": _now()}, pod.obj)]}
        if nominated:
            status["nominatedNodeName"] = nominated
        elif clear_nominated:
            status["nominatedNodeName"] = None  # a strategic merge patch's null removes it
        try:
            await self.writer.patch(resource_path("", "v1", "pods", pod.namespace, pod.name, "status"),
                                    {"status": status}, "strategic")
        except (ApiError, OSError, httpx.TransportError) as e:
            log.debug("pod %s: condition not written: %r", pod.key, e)

    async def _binding_cycle(self, state: CycleState, pod: PodInfo, node: str, waiting: _Waiting | None,
                             cycle: int) -> None:
        # The bound on writes in flight is taken after Permit: members of gangs waiting there hold
        # no slot, so a quorum can always complete.
        if waiting is not None:
            verdict = await waiting.future
            if waiting.timer is not None:
                waiting.timer.cancel()
            self._waiting.pop(pod.key, None)
            if verdict is not None:
                self._unreserve(state, pod, node)
                if pod.group:
                    self._park_siblings(pod, rejected_with_group(pod.group, verdict.message))
                self._failed(pod, verdict, cycle, verdict.message)
                return
        # (a PreBind that waits for a controller gives its slot up meanwhile: BindSlot)
        slot = BindSlot(self._binds)
        state.write(BIND_SLOT, slot)
        await slot.acquire()
        try:
            for p in self.fwk.pre_bind:
                s = await p.pre_bind(state, pod, node)
                if s is not None and s.code != Code.SKIP:
                    self._unreserve(state, pod, node)
                    self._failed(pod, s, cycle, s.message)
                    return
            s = await self._bind(state, pod, node)
            if s is not None:
                self._unreserve(state, pod, node)
                if s.code == Code.SKIP:  # bound elsewhere meanwhile
                    self.queue.done(pod.key)
                    return
                self._failed(pod, s, cycle, s.message)
                return
            self.queue.done(pod.key)
            self.scheduled += 1
            SCHEDULER_SCHEDULE_ATTEMPTS.labels(result="scheduled").inc()
            SCHEDULER_E2E_SCHEDULING.observe(time.monotonic() - pod.initial_attempt)
            if self.success_events:
                self._record_scheduled(pod.obj, f"Successfully assigned {pod.key} to {node}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("binding cycle of %s failed", pod.key)
            self._unreserve(state, pod, node)
            self._failed(pod, Status(Code.ERROR, str(e)), cycle, f"binding rejected: {e}")
        finally:
            slot.release()

    async def _bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        for p in self.fwk.bind:
            s = await p.bind(state, pod, node)
            if s is None:
                return None
            if s.code != Code.SKIP:
                return s
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace, **({"uid": pod.uid} if pod.uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            await self.writer.create(resource_path("", "v1", "pods", pod.namespace, pod.name, "binding"), body)
        except (OSError, httpx.TransportError) as e:
            return Status(Code.ERROR, f"binding not written: {e!r}")
        except ApiError as e:
            if e.code == 404:
                return Status(Code.SKIP, "pod deleted")
            if e.code == 409 and "already assigned" in e.message:
                return Status(Code.SKIP, e.message)
            return Status(Code.ERROR, f"binding rejected: {e.message}")
        return None


async def start(client: Client, config: Config) -> None:
    """The component starter of ``controlplane serve`` (components.py)."""
    await Scheduler(client).run()


def main(kubeconfig: str | Path, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME, percentage: int = 0,
         log_level: str = "info", metrics_address: Address | None = None) -> int:
    """``controlplane scheduler --kubeconfig PATH``: run until interrupted, serving its metrics and
    health checks on ``metrics_address`` (metricsserver.py; None: not served)."""
    import signal

    from ..logsetup import configure as configure_logging
    from ..metrics import SCHEDULER_METRICS, component_registry
    from ..metricsserver import AddressInUse, listen, serving

    configure_logging(log_level)
    try:
        sock = listen("controlplane scheduler", metrics_address)
    except AddressInUse as e:
        print(e, file=sys.stderr)
        return 1

    async def run() -> int:
        settle_heap()
        try:
            client = Client.from_kubeconfig(kubeconfig).as_agent("kube-scheduler")
        except KubeconfigError as e:
            print(f"controlplane scheduler: error: {e}", file=sys.stderr)
            return 1
        sched = Scheduler(client, scheduler_name=scheduler_name, percentage_of_nodes_to_score=percentage)
        task = asyncio.create_task(sched.run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            async with serving("controlplane scheduler", sock, component_registry(SCHEDULER_METRICS),
                               sched.synced.is_set):
                await task
        except asyncio.CancelledError:
            pass
        finally:
            await client.aclose()
        return 0

    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(run())
        return uvloop.run(run())
    finally:
        if sock is not None:
            sock.close()
