"""The scheduler's event recorder writes events.k8s.io/v1 Events and folds isomorphic ones
into series, as client-go's events library."""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import Any

from controlplane.client import ApiError
from controlplane.scheduler.events import (
    FINISH_SECONDS,
    NOTE_LIMIT,
    REFRESH_SECONDS,
    EventRecorder,
    micro_time,
    truncate_note,
)

EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"


class FakeWriter:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.gone = False  # the events written are gone (expired): a patch is 404

    async def create_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert path == f"/apis/events.k8s.io/v1/namespaces/{body['metadata']['namespace']}/events"
        self.created.append(body)
        return body

    async def patch_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.gone:
            raise ApiError(404, "NotFound", "events not found")
        self.patched.append((path, body))
        return body


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def pod(rv: str = "5") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": rv}}


async def settle(tasks: list[asyncio.Future[Any]]) -> None:
    while tasks:
        batch = list(tasks)
        tasks.clear()
        await asyncio.gather(*batch)


def recorder() -> tuple[EventRecorder, FakeWriter, Clock, list[asyncio.Future[Any]]]:
    writer, clock, tasks = FakeWriter(), Clock(), []

    def spawn(coro: Any) -> None:
        tasks.append(asyncio.ensure_future(coro))

    return EventRecorder(writer, "default-scheduler", spawn, clock=clock, hostname="host-1"), writer, clock, tasks


async def test_an_event_is_what_the_events_library_writes() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod(), "FailedScheduling", "0/3 nodes are available", "Warning", action="Scheduling")
    await settle(tasks)
    (event,) = writer.created
    assert {k: v for k, v in event.items() if k not in ("metadata", "eventTime")} == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-host-1", "action": "Scheduling", "reason": "FailedScheduling",
        "type": "Warning", "note": "0/3 nodes are available",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u-1",
                      "resourceVersion": "5"}}
    assert event["metadata"]["namespace"] == "ns" and re.fullmatch(r"p\.[0-9a-f]+", event["metadata"]["name"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])  # a MicroTime


async def test_a_preemption_names_the_preemptor_as_related() -> None:
    rec, writer, _clock, tasks = recorder()
    preemptor = {"metadata": {"name": "vip", "namespace": "ns", "uid": "u-9", "resourceVersion": "7"}}
    rec.record(pod(), "Preempted", "Preempted by pod u-9 on node n1", action="Preempting", related=preemptor)
    await settle(tasks)
    (event,) = writer.created
    assert event["related"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "vip", "uid": "u-9",
                                "resourceVersion": "7"}
    assert event["action"] == "Preempting" and event["type"] == "Normal"


async def test_a_repeated_failure_is_one_event_with_a_series() -> None:
    rec, writer, clock, tasks = recorder()
    for i in range(5):
        rec.record(pod(), "FailedScheduling", f"0/{i} nodes are available", "Warning", action="Scheduling")
        clock.t += 1
    await settle(tasks)
    assert len(writer.created) == 1
    event = writer.created[0]
    assert event["note"] == "0/0 nodes are available"  # the first note: notes are not compared
    # the second occurrence writes the series; the later ones only count
    assert len(writer.patched) == 1
    path, body = writer.patched[0]
    assert path == f"{EVENTS}/{event['metadata']['name']}"
    # written once the event is stored, with the count as it is then: the series alone
    assert list(body) == ["series"] and body["series"]["count"] == 5
    assert body["series"]["lastObservedTime"] > event["eventTime"]
    assert rec.merged == 3


async def test_the_object_changed_or_another_reason_or_action_is_another_event() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod("5"), "FailedScheduling", "m", "Warning", action="Scheduling")
    rec.record(pod("6"), "FailedScheduling", "m", "Warning", action="Scheduling")  # a new version of the pod
    rec.record(pod("6"), "FailedScheduling", "m", "Warning", action="Binding")
    rec.record(pod("6"), "Scheduled", "m", action="Binding")
    await settle(tasks)
    assert len(writer.created) == 4
    assert writer.patched == []


async def test_a_finished_series_gets_its_final_count_and_is_forgotten() -> None:
    rec, writer, clock, tasks = recorder()
    for _ in range(2):
        rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    await settle(tasks)
    assert [b["series"]["count"] for _, b in writer.patched] == [2]
    for _ in range(2):
        rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    await settle(tasks)
    assert len(writer.patched) == 1  # counted, not written
    clock.t += FINISH_SECONDS + 61
    rec.record(pod("9"), "FailedScheduling", "m", "Warning", action="Scheduling")  # any record runs the sweep
    await settle(tasks)
    assert [b["series"]["count"] for _, b in writer.patched] == [2, 4]
    assert len(rec.series) == 1  # only the new one
    rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")  # the old key again: a new event
    await settle(tasks)
    assert len(writer.created) == 3


async def test_every_series_is_written_again_at_the_refresh() -> None:
    rec, writer, clock, tasks = recorder()
    for _ in range(2):
        rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    await settle(tasks)
    rec.record(pod("9"), "FailedScheduling", "m", "Warning", action="Scheduling")  # a lone event
    observed = int(REFRESH_SECONDS // FINISH_SECONDS)
    for _ in range(observed):  # often enough not to finish
        clock.t += FINISH_SECONDS - 1
        rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    assert len(writer.patched) == 1
    clock.t += 61
    rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")  # the sweep runs the refresh
    await settle(tasks)
    # the series written again, with its count; the lone event (long finished) not
    assert [b["series"]["count"] for _, b in writer.patched] == [2, 3 + observed]
    assert len(writer.created) == 2


async def test_a_series_whose_event_is_gone_is_created_anew_with_it() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    await settle(tasks)
    writer.gone = True
    rec.record(pod(), "FailedScheduling", "m", "Warning", action="Scheduling")
    await settle(tasks)
    first, again = writer.created
    assert again["metadata"] == first["metadata"] and again["eventTime"] == first["eventTime"]
    assert again["series"]["count"] == 2 and "series" not in first


async def test_an_event_that_cannot_recur_is_written_and_not_kept() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod(), "Scheduled", "Successfully assigned ns/p to n1", action="Binding", once=True)
    await settle(tasks)
    assert [(e["reason"], e["action"]) for e in writer.created] == [("Scheduled", "Binding")]
    assert rec.series == {}


def test_the_micro_time_is_now_in_utc_to_the_microsecond() -> None:
    before = datetime.datetime.now(datetime.UTC)
    stamped = datetime.datetime.fromisoformat(micro_time())
    after = datetime.datetime.now(datetime.UTC)
    assert before - datetime.timedelta(microseconds=1) <= stamped <= after + datetime.timedelta(microseconds=1)


def test_a_note_too_long_is_cut_to_the_limit_in_bytes() -> None:
    assert truncate_note("x" * NOTE_LIMIT) == "x" * NOTE_LIMIT
    cut = truncate_note("é" * NOTE_LIMIT)  # two bytes each
    assert cut.endswith(" ...") and len(cut.encode()) <= NOTE_LIMIT and cut.startswith("é" * 500)
