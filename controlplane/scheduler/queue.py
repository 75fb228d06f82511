"""The scheduling queue, as kube-scheduler's: activeQ, backoffQ and the unschedulable pods.

- **activeQ**: pods ready to be tried, highest priority first, then oldest
  (``PodInfo.timestamp``, set when the pod entered or re-entered activeQ).
- **backoffQ**: pods that failed and wait out their backoff: 1 s after the first
  failure, doubling with each attempt up to 10 s; they move to activeQ when it ends.
  When activeQ is empty the scheduler takes the next pod from backoffQ anyway
  (upstream's ``SchedulerPopFromBackoffQ``, KEP-5142, on by default since 1.33): a
  backoff delays a pod behind others, it never leaves the scheduler idle. Pods
  backing off after an ERROR (a failed write, not a plugin's rejection) are kept
  apart and always wait out their backoff, as upstream's ``podErrorBackoffQ``.
  Upstream also rounds backoff expiries to whole-second windows ordered by
  priority; here they expire exactly, earliest first.
- **unschedulable**: pods rejected by Filter/PreFilter/PreEnqueue plugins. They
  stay until a *cluster event* that one of the plugins that rejected them
  registered for (``events_to_register``; a hint may narrow it) arrives, then go
  to backoffQ (or activeQ, if their backoff is already over, or if the rejection
  was PENDING). Pods parked longer than ``max_unschedulable_seconds`` (5 minutes)
  are retried anyway, looked for every 30 s (``LEFTOVER_FLUSH_PERIOD``), idle or
  not, as upstream's flushUnschedulablePodsLeftover. That is all that retries a
  pod whose InterPodAffinity ``namespaceSelector`` a Namespace's new labels now
  satisfy: upstream's plugin registers no Namespace event either.
- An event that arrives while a pod is being scheduled can make the verdict
  stale: a rejected pod goes to backoffQ, not to the unschedulable pool, if an
  event since its cycle started is one a plugin that rejected it registered for
  (its hint saying the event may help), as upstream replays the in-flight
  events through the rejectors' QueueingHints. The last ``RECENT_EVENTS`` events
  are kept for this; a pod whose cycle is older than all of them goes to
  backoffQ (the events it missed are unknown).

PreEnqueue runs in ``add``: a pod held by it (``schedulingGates``, a PodGroup
not created yet) is parked as unschedulable, rejected by the holding plugin.

Gang members are popped together: when a pod of a PodGroup leaves activeQ, it
and its siblings waiting in activeQ or backoffQ (or parked after an earlier
attempt of the group) go through consecutive cycles, in upstream's order of a
pod group's members (``PodGroupMemberPodsOrderingFunc``, the pod group cycle of
KEP-4671): higher priority first, then more attempts, then the earlier queue
timestamp, then the name. The pod popped is one of them, not necessarily the first.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .framework import ActionType, ClusterEvent, Code, PreEnqueuePlugin, QueueingHint, Status
from .nodeinfo import PodInfo

__all__ = ["INITIAL_BACKOFF", "MAX_BACKOFF", "SchedulingQueue", "member_order"]

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
RECENT_EVENTS = 1024  # cluster events kept to judge the pods in flight when they arrived
LEFTOVER_FLUSH_PERIOD = 30.0  # seconds between looks for pods parked too long, as upstream's


@dataclass(slots=True)
class _Parked:
    pod: PodInfo
    rejectors: frozenset[str]
    since: float
    pending: bool = False


class _ParkingLot(dict[str, _Parked]):
    """The unschedulable pods by key, indexed by uid (``by_uid``) for events that name
    the pods they concern, by the plugins that rejected them (``by_rejector``: an event
    only concerns the pods a plugin that registered for it rejected), and the keys of
    those a plugin without registered events rejected (``any_event``: every event may
    help them)."""

    def __init__(self, unregistered: Callable[[frozenset[str]], bool]) -> None:
        super().__init__()
        self.by_uid: dict[str, str] = {}
        self.by_rejector: dict[str, dict[str, None]] = {}  # plugin -> keys, in parking order
        self.any_event: set[str] = set()
        self._unregistered = unregistered

    def __setitem__(self, key: str, parked: _Parked) -> None:
        if key in self:
            self._forget(key)
        super().__setitem__(key, parked)
        if parked.pod.uid:
            self.by_uid[parked.pod.uid] = key
        for plugin in parked.rejectors:
            self.by_rejector.setdefault(plugin, {})[key] = None
        if self._unregistered(parked.rejectors):
            self.any_event.add(key)

    def _forget(self, key: str) -> None:
        parked = super().__getitem__(key)
        if parked.pod.uid and self.by_uid.get(parked.pod.uid) == key:
            del self.by_uid[parked.pod.uid]
        for plugin in parked.rejectors:
            keys = self.by_rejector.get(plugin)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self.by_rejector[plugin]
        self.any_event.discard(key)

    def __delitem__(self, key: str) -> None:
        self._forget(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self._forget(key)
        return super().pop(key, *default)


def member_order(pod: PodInfo) -> tuple[int, int, float, str]:
    """The sort key of a pod group's members in its cycles, upstream's
    ``PodGroupMemberPodsOrderingFunc``: higher priority first, then the member tried
    more often, then the one queued earlier, then by name (one namespace: the key's order)."""
    return -pod.priority, -pod.attempts, pod.timestamp, pod.name


@dataclass
class SchedulingQueue:
    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    # plugin name -> the events that may help pods it rejected
    events: dict[str, list[ClusterEvent]] = field(default_factory=dict)
    initial_backoff: float = INITIAL_BACKOFF
    max_backoff: float = MAX_BACKOFF
    max_unschedulable_seconds: float = 300.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._seq = itertools.count()
        self._active: list[tuple[int, float, int, str]] = []  # (-priority, timestamp, seq, key)
        self._backoff: list[tuple[float, int, str]] = []  # (expiry, seq, key): rejected by a plugin
        self._error_backoff: list[tuple[float, int, str]] = []  # (expiry, seq, key): after an ERROR
        self._front: deque[str] = deque()  # gang siblings popped next
        self.pods: dict[str, PodInfo] = {}  # every pod the queue holds, by key
        self._where: dict[str, str] = {}  # key -> "active" | "backoff" | "unschedulable" | "inflight"
        self.unschedulable = _ParkingLot(lambda rejectors: any(r not in self.events for r in rejectors))
        self._groups: dict[str, set[str]] = {}  # group key -> queued pod keys
        self._wakeup = asyncio.Event()
        self.scheduling_cycle = 0
        # (scheduling cycle when it arrived, resource, action, old, new) of the latest cluster events
        self._recent: deque[tuple[int, str, int, Any, Any]] = deque()
        self._forgotten_cycle = -1  # the cycle of the latest event dropped from _recent
        self._last_leftover_flush = self.clock()
        self.closed = False

    # ---------------------------------------------------------------- adding

    def __len__(self) -> int:
        return len(self.pods)

    def where(self, key: str) -> str | None:
        return self._where.get(key)

    def add(self, pod: PodInfo) -> None:
        """A new unscheduled pod (or an updated one not in flight): PreEnqueue, then activeQ."""
        old = self.pods.get(pod.key)
        if old is not None:
            pod.attempts, pod.initial_attempt = old.attempts, old.initial_attempt
            if self._where.get(pod.key) == "inflight":
                self.pods[pod.key] = pod  # the running cycle's result decides where it goes
                return
            self._drop(pod.key)
        self._track(pod)
        self._enqueue(pod)

    def _track(self, pod: PodInfo) -> None:
        self.pods[pod.key] = pod
        if pod.group:
            self._groups.setdefault(pod.group_key, set()).add(pod.key)

    def _enqueue(self, pod: PodInfo) -> None:
        status = self._run_pre_enqueue(pod)
        if status is not None:
            self._park(pod, frozenset({status.plugin}), pending=True)
            return
        self._push_active(pod)

    def _run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        for p in self.pre_enqueue:
            s = p.pre_enqueue(pod)
            if s is not None:
                if not s.plugin:
                    s.plugin = p.name()
                return s
        return None

    def _push_active(self, pod: PodInfo) -> None:
        pod.timestamp = self.clock()
        self._where[pod.key] = "active"
        heapq.heappush(self._active, (-pod.priority, pod.timestamp, next(self._seq), pod.key))
        self._wakeup.set()

    def _push_backoff(self, pod: PodInfo, *, error: bool = False) -> None:
        expiry = self.backoff_expiry(pod)
        if expiry <= self.clock():
            self._push_active(pod)
            return
        self._where[pod.key] = "backoff"
        heapq.heappush(self._error_backoff if error else self._backoff, (expiry, next(self._seq), pod.key))
        self._wakeup.set()

    def _park(self, pod: PodInfo, rejectors: frozenset[str], pending: bool = False) -> None:
        self._where[pod.key] = "unschedulable"
        self.unschedulable[pod.key] = _Parked(pod, rejectors, self.clock(), pending)

    def backoff_duration(self, pod: PodInfo) -> float:
        if pod.attempts <= 0:
            return 0.0
        d: float = self.initial_backoff * (2 ** (pod.attempts - 1))
        return min(d, self.max_backoff)

    def backoff_expiry(self, pod: PodInfo) -> float:
        return pod.timestamp + self.backoff_duration(pod)

    def delete(self, key: str) -> None:
        """The pod is gone (deleted, or bound by someone else)."""
        self._drop(key)
        pod = self.pods.pop(key, None)
        self._where.pop(key, None)
        if pod is not None and pod.group:
            members = self._groups.get(pod.group_key)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._groups[pod.group_key]

    def _drop(self, key: str) -> None:
        # Heap entries are left behind and skipped at pop time (their key no longer says "active").
        self.unschedulable.pop(key, None)
        self._where.pop(key, None)

    # ---------------------------------------------------------------- popping

    def _flush_backoff(self, now: float) -> None:
        for b in (self._backoff, self._error_backoff):
            while b and b[0][0] <= now:
                _, _, key = heapq.heappop(b)
                if self._where.get(key) == "backoff":
                    self._push_active(self.pods[key])

    def _next_backoff_expiry(self) -> float | None:
        heads = [b[0][0] for b in (self._backoff, self._error_backoff) if b]
        return min(heads) if heads else None

    def _flush_unschedulable_leftovers(self, now: float) -> None:
        limit = self.max_unschedulable_seconds
        stale = [k for k, p in self.unschedulable.items() if now - p.since > limit]
        for k in stale:
            parked = self.unschedulable.pop(k)
            self._push_backoff(parked.pod)

    def pop_nowait(self) -> PodInfo | None:
        """The next pod to schedule, or None if activeQ is empty."""
        now = self.clock()
        if self._backoff or self._error_backoff:
            self._flush_backoff(now)
        if self.unschedulable and now - self._last_leftover_flush > LEFTOVER_FLUSH_PERIOD:
            self._last_leftover_flush = now
            self._flush_unschedulable_leftovers(now)
        while self._front:
            key = self._front.popleft()
            if self._where.get(key) in ("active", "backoff"):
                return self._start(key)
        a = self._active
        while a:
            _, _, _, key = heapq.heappop(a)
            if self._where.get(key) != "active":
                continue
            return self._start_with_siblings(key)
        # activeQ is empty: the pod whose backoff ends first goes now (SchedulerPopFromBackoffQ)
        b = self._backoff
        while b:
            _, _, key = heapq.heappop(b)
            if self._where.get(key) != "backoff":
                continue
            return self._start_with_siblings(key)
        return None

    def _start_with_siblings(self, key: str) -> PodInfo:
        pod = self.pods[key]
        if not pod.group:
            return self._start(key)
        members = sorted([key, *self._pull_siblings(pod)], key=lambda k: member_order(self.pods[k]))
        self._front.extend(members[1:])  # (popped, ``key`` is out of activeQ's heap but still "active")
        return self._start(members[0])

    def _start(self, key: str) -> PodInfo:
        self._where[key] = "inflight"
        pod = self.pods[key]
        self.scheduling_cycle += 1
        pod.attempts += 1
        return pod

    def _pull_siblings(self, pod: PodInfo) -> list[str]:
        """The group's other members to try with ``pod``: those in activeQ or backoffQ,
        and those parked after an earlier attempt of the group (not those PreEnqueue
        holds), made active: a gang is tried as a whole."""
        out = []
        for key in self._groups.get(pod.group_key, ()):
            if key == pod.key:
                continue
            where = self._where.get(key)
            if where == "unschedulable" and not self.unschedulable[key].pending:
                del self.unschedulable[key]
                self._where[key] = "active"
                where = "active"
            if where in ("active", "backoff"):
                out.append(key)
        return out

    async def pop(self) -> PodInfo:
        """Wait for the next pod (backoffQ is flushed as its entries expire)."""
        while True:
            pod = self.pop_nowait()
            if pod is not None:
                return pod
            if self.closed:
                raise asyncio.CancelledError
            self._wakeup.clear()
            try:
                async with asyncio.timeout(self._idle_wait()):  # (not wait_for: it can lose a cancellation in 3.11)
                    await self._wakeup.wait()
            except TimeoutError:
                if self.unschedulable:
                    self._last_leftover_flush = self.clock()
                    self._flush_unschedulable_leftovers(self._last_leftover_flush)

    def _idle_wait(self) -> float | None:
        """How long an idle ``pop`` may sleep: until the next backoff expires, and no longer than
        the period of the flush of pods parked too long while some are parked (None: no limit)."""
        timeout: float | None = None
        expiry = self._next_backoff_expiry()
        if expiry is not None:
            timeout = max(0.0, expiry - self.clock())
        if self.unschedulable:
            period = min(LEFTOVER_FLUSH_PERIOD, self.max_unschedulable_seconds / 4)
            timeout = period if timeout is None else min(timeout, period)
        return timeout

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    # ---------------------------------------------------------------- after a cycle

    def done(self, key: str) -> None:
        """The pod's cycle ended in a binding attempt: it leaves the queue."""
        self.delete(key)

    def requeue_error(self, pod: PodInfo) -> None:
        """An ERROR: retry after backoff, whatever happens in the cluster."""
        if self._where.get(pod.key) != "inflight":
            return
        self._push_backoff(self.pods[pod.key], error=True)

    def add_unschedulable(self, pod: PodInfo, status: Status, cycle: int, rejectors: Iterable[str] = ()) -> None:
        """The pod's cycle (started at ``cycle``) rejected it: park it until a helpful event."""
        if self._where.get(pod.key) != "inflight":
            return
        current = self.pods[pod.key]
        names = frozenset(rejectors) or frozenset({status.plugin})
        if self._helped_in_flight(current, names, cycle):
            self._push_backoff(current)
            return
        self._park(current, names, pending=status.code == Code.PENDING)

    def _helped_in_flight(self, pod: PodInfo, rejectors: frozenset[str], cycle: int) -> bool:
        """Did an event that may help ``pod`` (by what its ``rejectors`` registered, and
        their hints) arrive since its cycle ``cycle`` started?"""
        if self._forgotten_cycle >= cycle:
            return True
        for ev_cycle, resource, action, old, new in reversed(self._recent):
            if ev_cycle < cycle:
                break
            for plugin in rejectors:
                m = self._matching(plugin, resource, action)
                if m is True or (m and any(h(pod, old, new) for h in m)):
                    return True
        return False

    def activate(self, keys: Iterable[str]) -> None:
        """Move these pods to activeQ at once (a gang's siblings, a preemptor's victims gone)."""
        for key in keys:
            where = self._where.get(key)
            if where == "unschedulable":
                parked = self.unschedulable.pop(key)
                self._push_active(parked.pod)
            elif where == "backoff":
                self._push_active(self.pods[key])

    def park_group(self, group_key: str, rejector: str) -> list[PodInfo]:
        """Pull a gang's queued members out of activeQ/backoffQ into the unschedulable
        pool (the group cannot be placed now; it is retried as a whole). Returns the pods
        parked: the caller owes each the failure report its own cycle would have made."""
        parked = []
        for key in list(self._groups.get(group_key, ())):
            if self._where.get(key) in ("active", "backoff"):
                pod = self.pods[key]
                self._park(pod, frozenset({rejector}))
                parked.append(pod)
        if parked and self._front:  # queued behind the failed member: no longer next, nor alone when retried
            gone = {p.key for p in parked}
            self._front = deque(k for k in self._front if k not in gone)
        return parked

    def group_members(self, group_key: str) -> list[PodInfo]:
        return [self.pods[k] for k in self._groups.get(group_key, ())]

    # ---------------------------------------------------------------- cluster events

    def on_event(self, resource: str, action: ActionType, old: Any = None, new: Any = None) -> int:
        """A cluster event: retry the unschedulable pods it may help. Returns how many moved."""
        recent = self._recent
        recent.append((self.scheduling_cycle, resource, int(action), old, new))
        if len(recent) > RECENT_EVENTS:
            self._forgotten_cycle = recent.popleft()[0]
        if not self.unschedulable:
            return 0
        moved: list[_Parked] = []
        # what each plugin that rejected a parked pod registered for this event, found once
        # per event (True: any pod it rejected may be helped; else the hints to ask, per pod)
        wanted = int(action)
        matching: dict[str, bool | list[QueueingHint]] = {}
        for plugin in self.unschedulable.by_rejector:
            m = self._matching(plugin, resource, wanted)
            if m:
                matching[plugin] = m
        if not matching:
            return 0  # no parked pod was rejected by a plugin this event may change the mind of
        for parked in self._candidates(resource, wanted, old, new, matching):
            for plugin in parked.rejectors:
                m = matching.get(plugin, False)
                if m is True or (m and any(h(parked.pod, old, new) for h in m)):
                    moved.append(parked)
                    break
        groups = {p.pod.group_key for p in moved if p.pod.group}
        if groups:  # a gang is retried as a whole: its parked siblings come along
            seen = {p.pod.key for p in moved}
            for g in groups:
                for key in self._groups.get(g, ()):
                    sib = self.unschedulable.get(key)
                    if sib is not None and key not in seen:
                        moved.append(sib)
                        seen.add(key)
        for parked in moved:
            del self.unschedulable[parked.pod.key]
            if parked.pending:
                self._enqueue(parked.pod)
            else:
                self._push_backoff(parked.pod)
        return len(moved)

    def _candidates(self, resource: str, action: int, old: Any, new: Any,
                    matching: Mapping[str, object]) -> list[_Parked]:
        """The parked pods this event may concern: those the registrations name by uid
        (``ClusterEvent.targets``) when every registration for it names them, and the pods
        a plugin that registered nothing rejected; else every pod a ``matching`` plugin
        (one that registered for the event) rejected."""
        uids: set[str] = set()
        for registered in self.events.values():
            for ev in registered:
                if ev.resource != resource or not (int(ev.actions) & action):
                    continue
                named = ev.targets(old, new) if ev.targets is not None else None
                if named is None:
                    lot = self.unschedulable
                    if len(matching) == 1:
                        (plugin,) = matching
                        return [lot[k] for k in lot.by_rejector.get(plugin, ())]
                    keys = dict.fromkeys(k for plugin in matching for k in lot.by_rejector.get(plugin, ()))
                    return [lot[k] for k in keys]
                uids.update(named)
        parked = self.unschedulable
        out = [parked[k] for k in parked.any_event if k in parked]
        seen = {p.pod.key for p in out}
        for uid in uids:
            key = parked.by_uid.get(uid)
            if key is not None and key not in seen and key in parked:
                out.append(parked[key])
                seen.add(key)
        return out

    def _matching(self, plugin: str, resource: str, action: int) -> bool | list[QueueingHint]:
        """``plugin``'s registrations for this event: True if one has no hint (or the plugin
        registered nothing: any event may help, upstream's default), else their hints."""
        registered = self.events.get(plugin)
        if registered is None:
            return True
        hints: list[QueueingHint] = []
        for ev in registered:
            if ev.resource != resource or not (int(ev.actions) & action):
                continue
            if ev.hint is None:
                return True
            hints.append(ev.hint)
        return hints

    def pending_counts(self) -> dict[str, int]:
        counts = {"active": 0, "backoff": 0, "unschedulable": 0, "inflight": 0}
        for w in self._where.values():
            counts[w] = counts.get(w, 0) + 1
        return counts
