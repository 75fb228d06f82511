"""The scheduler's event recorder: events.k8s.io/v1 Events, as kube-scheduler records
them through client-go's events library (``k8s.io/client-go/tools/events``).

An event is about its ``regarding`` object (and, for a preemption victim, the
``related`` preemptor), says what the scheduler did (``action``: ``Scheduling``,
``Binding``, ``Preempting``), and is reported by ``reportingController`` (the
profile's scheduler name, ``default-scheduler``) from ``reportingInstance``
(``<controller>-<hostname>``, as the library's ``NewRecorder`` names it). It carries
``eventTime`` (a MicroTime) and no ``deprecated*`` fields, so its core/v1 view has no
``firstTimestamp``, ``lastTimestamp``, ``count`` nor ``source``; ``kubectl describe``
ages it from ``eventTime`` and a ``series``.

The library keeps the events it wrote for a while and folds *isomorphic* ones (same
type, action, reason, regarding and related references, resourceVersion included;
the note is not compared) into an ``EventSeries``:

- the first occurrence is created;
- the second sets ``series: {count: 2, lastObservedTime}`` on that event (a
  strategic merge patch; an event gone meanwhile is created anew with its series);
- later ones only count, in memory; every ``REFRESH_SECONDS`` every series is
  written again (keeping it from expiring), and a series not observed for
  ``FINISH_SECONDS`` is written a last time and forgotten (a lone event that old
  is just forgotten).

So a pod that keeps failing for the same reason costs a few writes, not one per
attempt. A pod whose object changed in between (a new resourceVersion) starts a new
event, as upstream.

Events are written in the background; at most ``MAX_PENDING`` unwritten Normal ones
are kept, beyond which they are dropped, as the broadcaster's bounded queue drops
them. A note longer than ``NOTE_LIMIT`` bytes, which the API refuses, is cut as the
scheduler's ``truncateMessage`` cuts it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..client import ApiError, resource_path

__all__ = ["FINISH_SECONDS", "MAX_PENDING", "NOTE_LIMIT", "REFRESH_SECONDS", "EventRecorder", "truncate_note"]

log = logging.getLogger(__name__)

FINISH_SECONDS = 6 * 60.0  # client-go events: finishTime
REFRESH_SECONDS = 30 * 60.0  # client-go events: refreshTime
MAX_PENDING = 2000
NOTE_LIMIT = 1024  # events.k8s.io validation: NoteLengthLimit, in bytes

# the parts of an ObjectReference the library's reference.GetReference fills
Ref = tuple[str, str, str, str, str, str]  # apiVersion, kind, namespace, name, uid, resourceVersion
Key = tuple[str, str, str, Ref, Ref | None]  # type, action, reason, regarding, related


class EventWriter(Protocol):
    """What the recorder writes through (the scheduler's ``Writer``: its event lane)."""

    async def create_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


class _MicroClock:
    """Now as a MicroTime: RFC 3339 with microseconds, in UTC (``2026-12-05T04:13:37.123456Z``).
    The text of the second is made once a second: one is stamped for every pod scheduled."""

    __slots__ = ("prefix", "second")

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def __call__(self) -> str:
        now = time.time_ns() // 1000
        second, micros = divmod(now, 1_000_000)
        if second != self.second:
            self.second, self.prefix = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self.prefix}.{micros:06d}Z"


micro_time = _MicroClock()


def truncate_note(note: str) -> str:
    """``note`` cut to ``NOTE_LIMIT`` bytes with a `` ...`` suffix if longer (the scheduler's
    truncateMessage; a character cut in two is dropped)."""
    data = note.encode()
    if len(data) <= NOTE_LIMIT:
        return note
    return data[:NOTE_LIMIT - 4].decode(errors="ignore") + " ..."


def reference(obj: Mapping[str, Any]) -> Ref:
    """The object reference of ``obj`` (list items need not carry apiVersion and kind: a Pod)."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion") or "v1"), str(obj.get("kind") or "Pod"), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""), str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))


def _reference_json(ref: Ref) -> dict[str, str]:
    fields = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion")
    return {k: v for k, v in zip(fields, ref, strict=True) if v}


@dataclass(slots=True)
class _Series:
    event: dict[str, Any]  # as created (its name, namespace, eventTime): a series lost is created anew from it
    last_seen: float  # the recorder's clock
    # the event's create, while it runs (then None, and ``stored`` says how it ended)
    creating: asyncio.Future[bool] | None
    stored: bool = False
    count: int = 1
    last_observed: str = ""


class EventRecorder:
    def __init__(self, writer: EventWriter, reporting_controller: str, spawn: Callable[[Awaitable[None]], None],
                 clock: Callable[[], float] = time.monotonic, hostname: str | None = None) -> None:
        self.writer = writer
        self.reporting_controller = reporting_controller
        self.reporting_instance = f"{reporting_controller}-{hostname if hostname is not None else socket.gethostname()}"
        self.spawn = spawn
        self.clock = clock
        self.series: dict[Key, _Series] = {}
        self.pending = 0
        self.dropped = 0
        self.merged = 0  # occurrences counted into a series without a write of their own
        self._last_finish = self._last_refresh = clock()

    def record(self, regarding: Mapping[str, Any], reason: str, note: str, type_: str = "Normal", *,
               action: str, related: Mapping[str, Any] | None = None, once: bool = False) -> None:
        """An event about ``regarding``. ``once``: an event that cannot recur for this
        version of ``regarding`` (a pod's ``Scheduled``: binding changes the pod). Folding
        would change nothing, so it is not kept for a series (at a thousand pods a second,
        six minutes of them would be hundreds of thousands of entries)."""
        ref = reference(regarding)
        if once:
            self._create_in_background(self._event(ref, None, reason, note, type_, action), None)
            return
        related_ref = reference(related) if related is not None else None
        key: Key = (type_, action, reason, ref, related_ref)
        now = self.clock()
        self._sweep(now)
        s = self.series.get(key)
        if s is not None:
            s.count += 1
            s.last_seen = now
            s.last_observed = micro_time()
            if s.count == 2:
                self.spawn(self._write_series(s))
            else:
                self.merged += 1
            return
        event = self._event(ref, related_ref, reason, note, type_, action)
        s = _Series(event, now, asyncio.get_running_loop().create_future())
        if self._create_in_background(event, s):
            self.series[key] = s

    def _event(self, ref: Ref, related: Ref | None, reason: str, note: str, type_: str,
               action: str) -> dict[str, Any]:
        """The events.k8s.io/v1 Event the library's makeEvent builds: named after the object
        and the time, in its namespace (``default`` for a cluster-scoped object)."""
        event = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{ref[3]}.{time.time_ns():x}", "namespace": ref[2] or "default"},
            "eventTime": micro_time(), "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance, "action": action, "reason": reason,
            "regarding": _reference_json(ref), "note": truncate_note(note), "type": type_,
        }
        if related is not None:
            event["related"] = _reference_json(related)
        return event

    def _create_in_background(self, event: dict[str, Any], s: _Series | None) -> bool:
        if self.pending >= MAX_PENDING and event["type"] == "Normal":
            self.dropped += 1
            return False
        self.pending += 1
        self.spawn(self._create(event, s))
        return True

    async def _create(self, event: dict[str, Any], s: _Series | None) -> None:
        ok = False
        try:
            await self.writer.create_event(_path(event), event)
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
        """Write the series as it is now (once its event is stored): the patch that adds a
        series to the event; if the event is gone, the event with its series."""
        if s.creating is not None:
            await asyncio.shield(s.creating)
        if not s.stored:
            return
        series = {"count": s.count, "lastObservedTime": s.last_observed}
        path = _path(s.event)
        try:
            try:
                await self.writer.patch_event(f"{path}/{s.event['metadata']['name']}", {"series": series})
            except ApiError as e:
                if e.code != 404:
                    raise
                await self.writer.create_event(path, {**s.event, "series": series})
        except (ApiError, OSError, httpx.TransportError) as e:
            log.debug("event series not written: %r", e)

    async def run(self) -> None:
        """The sweep's timer, for a recorder that records nothing for a while."""
        while True:
            await asyncio.sleep(60.0)
            self._sweep(self.clock())

    def _sweep(self, now: float) -> None:
        """Forget the events not observed for FINISH_SECONDS (writing a series' final count),
        and every REFRESH_SECONDS write every series again; at most once a minute, cheaply."""
        if now - self._last_finish >= 60.0:
            self._last_finish = now
            for key, s in list(self.series.items()):
                if now - s.last_seen >= FINISH_SECONDS:
                    del self.series[key]
                    if s.count > 1:
                        self.spawn(self._write_series(s))
        if now - self._last_refresh >= REFRESH_SECONDS:
            self._last_refresh = now
            for s in self.series.values():
                if s.count > 1:
                    self.spawn(self._write_series(s))


def _path(event: Mapping[str, Any]) -> str:
    return resource_path("events.k8s.io", "v1", "events", event["metadata"]["namespace"])
