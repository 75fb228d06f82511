"""The scheduler's event recorder, deduplicating as client-go's events broadcaster does.

kube-scheduler records through ``k8s.io/client-go/tools/events``, which keeps
the events it wrote for a while and merges *isomorphic* ones (same type,
reason, action, reporting controller and instance, and the same ``regarding``
object reference, resourceVersion included) into an ``EventSeries``:

- the first occurrence is created;
- the second sets ``series: {count: 2, lastObservedTime}`` on that event
  (one PATCH);
- later ones only count, in memory; every ``REFRESH_SECONDS`` the series whose
  count grew are written again, and a series not observed for
  ``FINISH_SECONDS`` is written a last time and forgotten (as is a lone event
  that old).

So a pod that keeps failing for the same reason costs a few writes, not one per
attempt. A pod whose object changed in between (our ``PodScheduled`` condition
write gives it a new resourceVersion) starts a new event, as upstream.

Events are written in the background; at most ``MAX_PENDING`` unwritten
Normal ones are kept, beyond which they are dropped, as the broadcaster's
bounded queue drops them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ..client import ApiError, resource_path
from .writer import Writer

__all__ = ["FINISH_SECONDS", "MAX_PENDING", "REFRESH_SECONDS", "EventRecorder"]

log = logging.getLogger(__name__)

FINISH_SECONDS = 6 * 60.0  # client-go events: finishTime
REFRESH_SECONDS = 30 * 60.0  # client-go events: refreshTime
MAX_PENDING = 2000

Key = tuple[str, str, str, str, str, str, str]  # type, reason, namespace, name, uid, resourceVersion, kind


def _timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str  # the event's name
    last_seen: float
    # the event's create, while it runs (then None, and ``stored`` says how it ended)
    creating: asyncio.Future[bool] | None
    stored: bool = False
    count: int = 1
    written: int = 1  # the count the stored event says
    last_observed: str = ""


class EventRecorder:
    def __init__(self, writer: Writer, component: str, spawn: Callable[[Awaitable[None]], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.writer = writer
        self.component = component
        self.spawn = spawn
        self.clock = clock
        self.series: dict[Key, _Series] = {}
        self.pending = 0
        self.dropped = 0
        self.merged = 0  # occurrences counted into a series without a write of their own
        self._last_finish = self._last_refresh = clock()

    def record(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal",
               once: bool = False) -> None:
        """``once``: an event that cannot recur for this version of ``obj`` (a pod's
        ``Scheduled``: binding changes the pod). Merging would change nothing, so it is not
        kept for the series (at a thousand pods a second, six minutes of them would be
        hundreds of thousands of entries)."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        if once:
            self._create_in_background(obj, ns, reason, message, type_, None)
            return
        key: Key = (type_, reason, ns, meta.get("name", ""), meta.get("uid", ""), meta.get("resourceVersion", ""),
                    obj.get("kind", "Pod"))
        now = self.clock()
        self._sweep(now)
        s = self.series.get(key)
        if s is not None:
            s.count += 1
            s.last_seen = now
            s.last_observed = _micro_time()
            if s.count == 2:
                self.spawn(self._write_series(s))
            else:
                self.merged += 1
            return
        s = _Series(ns, "", now, asyncio.get_running_loop().create_future())
        if self._create_in_background(obj, ns, reason, message, type_, s):
            self.series[key] = s

    def _create_in_background(self, obj: Mapping[str, Any], ns: str, reason: str, message: str, type_: str,
                              s: _Series | None) -> bool:
        if self.pending >= MAX_PENDING and type_ == "Normal":
            self.dropped += 1
            return False
        name = f"{(obj.get('metadata') or {}).get('name', '')}.{time.time_ns():x}{os.urandom(2).hex()}"
        if s is not None:
            s.name = name
        self.pending += 1
        self.spawn(self._create(obj, ns, name, reason, message, type_, s))
        return True

    async def _create(self, obj: Mapping[str, Any], ns: str, name: str, reason: str, message: str, type_: str,
                      s: _Series | None) -> None:
        meta = obj.get("metadata") or {}
        now = _timestamp()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"),
                               "namespace": ns, "name": meta.get("name", ""), "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "reportingInstance": self.component, "action": "Scheduling",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        ok = False
        try:
            await self.writer.create_event(resource_path("", "v1", "events", ns), event)
            ok = True
        except (ApiError, OSError, httpx.TransportError) as e:
            log.debug("event not written: %r", e)
        finally:
            self.pending -= 1
            if s is not None and s.creating is not None:
                s.stored = ok
                s.creating.set_result(ok)
                s.creating = None

    async def _write_series(self, s: _Series) -> None:
        """Write the series' count as it is now (once its event is stored)."""
        if s.creating is not None:
            await asyncio.shield(s.creating)
        if not s.stored or s.written == s.count:
            return
        count = s.count
        try:
            await self.writer.patch(resource_path("", "v1", "events", s.namespace, s.name),
                                    {"series": {"count": count, "lastObservedTime": s.last_observed},
                                     "count": count, "lastTimestamp": _timestamp()}, "merge")
            s.written = max(s.written, count)
        except (ApiError, OSError, httpx.TransportError) as e:
            log.debug("event series not written: %r", e)

    async def run(self) -> None:
        """The sweep's timer, for a recorder that records nothing for a while."""
        while True:
            await asyncio.sleep(60.0)
            self._sweep(self.clock())

    def _sweep(self, now: float) -> None:
        """Forget the series not observed for FINISH_SECONDS (writing their final count), and
        every REFRESH_SECONDS write the counts that grew; at most once a minute, cheaply."""
        if now - self._last_finish >= 60.0:
            self._last_finish = now
            for key, s in list(self.series.items()):
                if now - s.last_seen >= FINISH_SECONDS:
                    del self.series[key]
                    if s.count > s.written:
                        self.spawn(self._write_series(s))
        if now - self._last_refresh >= REFRESH_SECONDS:
            self._last_refresh = now
            for s in self.series.values():
                if s.count > s.written and s.count > 1:
                    self.spawn(self._write_series(s))
