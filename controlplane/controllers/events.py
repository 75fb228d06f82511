"""Events the controllers record about their objects (``kubectl describe`` shows them):
core/v1 Events written in the background, as client-go's record.EventRecorder does
for kube-controller-manager. At most ``MAX_PENDING`` unwritten events are kept,
beyond which they are dropped, as the broadcaster's bounded queue drops them; a
failed write is logged and forgotten.

The same event again (same object and field path, type, reason and message)
updates the one written, as client-go's EventCorrelator: its ``count`` goes up
and its ``lastTimestamp`` moves, so ``kubectl describe`` shows ``(x6 over 75s)``
rather than six lines. The events written are remembered for the last
``SEEN_MAX`` keys.

As that correlator too, similar events (same object, type and reason) with
``AGGREGATE_MAX`` different messages within ``AGGREGATE_INTERVAL`` seconds are
aggregated: from the tenth on, one event counts them all, its message the latest
prefixed ``(combined from similar events): `` (a ReplicaSet of twenty pods shows
nine ``Created pod`` lines and one combined). Its spam filter then lets a source
write ``SPAM_BURST`` events about an object, and one more every ``1 / SPAM_QPS``
seconds; the occurrences it holds back still count in the next one written.

A recorder with a ``host`` (the kubelet's: its node) names it as the source's
host and the reporting instance, as client-go's recorder does with its
EventSource; one given ``submit`` hands its writes to its owner's queue (the
node simulator's event lane, apart from its heartbeats and pod status) instead
of starting a task each. ``max_pending`` bounds its unwritten events otherwise
than ``MAX_PENDING`` (one recorder standing for many kubelets, each of which
has a broadcaster of its own upstream).

An Event is named as client-go's ``makeEvent`` names it, ``<object>.<UnixNano in hex>``
(16 digits until 2262): the nanoseconds are made strictly increasing in this process
(``_event_nanos``), so two events about one object in one clock tick do not share a name.

The involved object's ``apiVersion`` is the one ``API_VERSIONS`` gives its kind,
else the object's own, else ``v1``; its ``resourceVersion`` is left out where
the object has none (a reference such as the kubelet's to its node, as Go's
``omitempty`` leaves it out).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from controlplane.client import ApiError, Client, resource_path

__all__ = ["MAX_PENDING", "Recorder", "namespace_terminating"]

log = logging.getLogger(__name__)

MAX_PENDING = 1000
SEEN_MAX = 4096  # client-go's maxLruCacheEntries
AGGREGATE_MAX = 10  # client-go's defaultAggregateMaxEvents
AGGREGATE_INTERVAL = 600.0  # defaultAggregateIntervalInSeconds
COMBINED = "(combined from similar events): "
SPAM_BURST = 25  # defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # defaultSpamQPS
_last_nanos = 0


def _event_nanos() -> int:
    """``time.time_ns()``, but above the last one this gave (an Event name's uniqueness)."""
    global _last_nanos
    now = time.time_ns()
    _last_nanos = now = now if now > _last_nanos else _last_nanos + 1
    return now


# the involved object's apiVersion by kind (``kubectl events --for daemonset/x`` selects on it);
# a kind not here is core/v1's unless the object says otherwise
API_VERSIONS = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1", "StatefulSet": "apps/v1",
                "Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1",
                "HorizontalPodAutoscaler": "autoscaling/v2", "PodDisruptionBudget": "policy/v1",
                "NodePool": "karpenter.sh/v1", "NodeClaim": "karpenter.sh/v1"}


def namespace_terminating(error: BaseException) -> bool:
    """A create refused because its namespace is being deleted (the ``NamespaceTerminating``
    cause of upstream's NamespaceLifecycle): controllers record no ``FailedCreate`` for it, and
    the ReplicaSet controller does not count it a failure, as upstream's."""
    if not isinstance(error, ApiError):
        return False
    causes = (error.status.get("details") or {}).get("causes") or ()
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


# kind, namespace, name, uid, field path, type, reason, message
EventKey = tuple[str, str, str, str, str, str, str, str]
# hands a write to the owner's queue, which awaits it once (``Recorder(submit=...)``)
Submit = Callable[[Callable[[], Awaitable[None]]], None]


class _Seen:
    """An event written for a key: its name, the count, time and message of its last
    occurrence (an aggregated event's changes), the count the server has, and whether a write
    is queued or in flight (one at a time: occurrences meanwhile only count up, and it sends
    the latest count when it runs)."""

    __slots__ = ("count", "first", "last", "message", "name", "namespace", "stored", "writing")

    def __init__(self, name: str, namespace: str, first: str, message: str) -> None:
        self.name = name
        self.namespace = namespace
        self.first = first
        self.last = first
        self.message = message
        self.count = 0
        self.stored = 0  # the count the server holds (0: not written yet)
        self.writing = False


class _Similar:
    """The messages of similar events seen lately (client-go's aggregateRecord)."""

    __slots__ = ("last", "messages")

    def __init__(self) -> None:
        self.messages: set[str] = set()
        self.last = 0.0


class _Bucket:
    """A source's token bucket for one object (client-go's spamRecord)."""

    __slots__ = ("last", "tokens")

    def __init__(self, now: float) -> None:
        self.tokens = float(SPAM_BURST)
        self.last = now

    def take(self, now: float) -> bool:
        self.tokens = min(float(SPAM_BURST), self.tokens + (now - self.last) * SPAM_QPS)
        self.last = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class _Ref(NamedTuple):
    """What an event is about, and who reports it."""

    kind: str
    obj: Mapping[str, Any]
    field_path: str
    host: str


class Recorder:
    def __init__(self, client: Client, component: str, host: str = "", submit: Submit | None = None,
                 as_host: Callable[[str], Client] | None = None, max_pending: int = MAX_PENDING) -> None:
        self.client = client
        self.max_pending = max_pending
        self.as_host = as_host  # the client an event of a host writes with (a kubelet's, its node's identity)
        self.component = component
        self.host = host
        self.submit = submit
        self.pending = 0
        self.dropped = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen: OrderedDict[EventKey, _Seen] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()

    def record(self, kind: str, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal",
               field_path: str = "", host: str = "") -> None:
        """An event about ``obj``, a ``kind`` (list items need not carry their kind), or about
        the part of it ``field_path`` names (a pod's container: ``spec.containers{web}``);
        ``host``: the source's, if not the recorder's (one recorder for many kubelets)."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        name, uid, host = str(meta.get("name", "")), str(meta.get("uid", "")), host or self.host
        clock = time.time()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock))
        # client-go's EventAggregator: the tenth different message of similar events in ten
        # minutes, and any after, go into one event of their own, whatever their field path
        similar_key = (host, kind, ns, name, uid, type_, reason)
        similar = self._similar.get(similar_key)
        if similar is None or clock - similar.last > AGGREGATE_INTERVAL:
            similar = self._similar[similar_key] = _Similar()
        self._similar.move_to_end(similar_key)
        if len(self._similar) > SEEN_MAX:
            self._similar.popitem(last=False)
        similar.messages.add(message)
        similar.last = clock
        key: EventKey = (kind, ns, name, uid, field_path, type_, reason, message)
        if len(similar.messages) >= AGGREGATE_MAX:
            similar.messages.pop()  # (the set grows no larger, as upstream's PopAny)
            message = COMBINED + message
            key = (kind, ns, name, uid, "", type_, reason, COMBINED)
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = _Seen(f"{name}.{_event_nanos():x}", ns, now, message)
            if len(self._seen) > SEEN_MAX:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(key)
        seen.count += 1
        seen.last = now
        seen.message = message
        # client-go's spam filter, by source and object: held back, this occurrence still counts
        bucket_key = (host, kind, ns, name, uid)
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = self._buckets[bucket_key] = _Bucket(clock)
            if len(self._buckets) > SEEN_MAX:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(bucket_key)
        if not bucket.take(clock):
            return
        if seen.writing:
            return  # the write queued or in flight sends this count too
        if self.pending >= self.max_pending:
            self.dropped += 1
            return
        self.pending += 1
        seen.writing = True
        ref = _Ref(kind, obj, field_path, host)
        if self.submit is not None:
            self.submit(lambda: self._write(ref, reason, type_, seen))
            return
        task = asyncio.get_running_loop().create_task(self._write(ref, reason, type_, seen))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, ref: _Ref, reason: str, type_: str, seen: _Seen) -> None:
        path = resource_path("", "v1", "events", seen.namespace)
        client = self.as_host(ref.host) if self.as_host is not None and ref.host else self.client
        try:
            while seen.stored != seen.count:
                count, now, message = seen.count, seen.last, seen.message
                if seen.stored:
                    try:  # (the message too, as client-go's patch: an aggregated event's is the latest)
                        await client.patch(f"{path}/{seen.name}",
                                           {"count": count, "lastTimestamp": now, "message": message})
                        seen.stored = count
                        continue
                    except ApiError as e:
                        if e.code != 404:
                            raise
                    # gone (expired, deleted): written anew, counting from here
                    seen.first, seen.count, seen.stored, count = now, seen.count - count + 1, 0, 1
                await client.create(path, self._event(ref, reason, message, type_, seen, now, count))
                seen.stored = count
        except Exception as e:  # an event is best effort: never the controller's failure
            seen.stored = seen.count  # given up: the next occurrence tries again from here
            log.debug("event not written: %r", e)
        finally:
            seen.writing = False
            self.pending -= 1

    def _event(self, ref: _Ref, reason: str, message: str, type_: str, seen: _Seen, now: str,
               count: int) -> dict[str, Any]:
        kind, meta = ref.kind, ref.obj.get("metadata") or {}
        # a cluster-scoped object's events live in "default" but name no namespace (as
        # client-go's recorder), which `kubectl describe node` searches them by; every field of
        # an ObjectReference is omitempty in Go, so an empty one (that namespace, a reference
        # without a resourceVersion or a field path) is left out, not written as ""
        involved = {k: v for k, v in (
            ("kind", kind), ("namespace", meta.get("namespace")), ("name", meta.get("name")), ("uid", meta.get("uid")),
            ("apiVersion", API_VERSIONS.get(kind) or str(ref.obj.get("apiVersion") or "v1")),
            ("resourceVersion", meta.get("resourceVersion")), ("fieldPath", ref.field_path)) if v}
        # as client-go's recorder: the reporting instance is the source's host, which a
        # controller's recorder leaves empty (kubectl's SOURCE column: the component alone)
        source = {"component": self.component, **({"host": ref.host} if ref.host else {})}
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": seen.name, "namespace": seen.namespace},
                 "involvedObject": involved, "reason": reason, "message": message, "type": type_,
                 "source": source, "reportingComponent": self.component,
                 "firstTimestamp": seen.first, "lastTimestamp": now, "count": count}
        if ref.host:
            event["reportingInstance"] = ref.host
        return event
