"""The scheduler's event recorder merges isomorphic events into series, as client-go's events broadcaster."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.scheduler.events import FINISH_SECONDS, EventRecorder


class FakeWriter:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    async def create_event(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body

    async def patch(self, path: str, body: dict[str, Any], patch_type: str) -> dict[str, Any]:
        assert patch_type == "merge"
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

    return EventRecorder(writer, "default-scheduler", spawn, clock=clock), writer, clock, tasks  # type: ignore[arg-type]


async def test_a_repeated_failure_is_one_event_with_a_series() -> None:
    rec, writer, clock, tasks = recorder()
    for i in range(5):
        rec.record(pod(), "FailedScheduling", f"0/{i} nodes are available", "Warning")
        clock.t += 1
    await settle(tasks)
    assert len(writer.created) == 1
    event = writer.created[0]
    assert event["reason"] == "FailedScheduling" and event["message"] == "0/0 nodes are available"  # the first note
    assert event["involvedObject"]["resourceVersion"] == "5" and event["action"] == "Scheduling"
    # the second occurrence writes the series; the later ones only count
    assert len(writer.patched) == 1
    path, body = writer.patched[0]
    assert path == f"/api/v1/namespaces/ns/events/{event['metadata']['name']}"
    # written once the event is stored, with the count as it is then
    assert body["series"]["count"] == 5 and body["count"] == 5
    assert rec.merged == 3


async def test_the_object_changed_or_another_reason_is_another_event() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod("5"), "FailedScheduling", "m", "Warning")
    rec.record(pod("6"), "FailedScheduling", "m", "Warning")  # our condition write gave it a new version
    rec.record(pod("6"), "Scheduled", "m")
    await settle(tasks)
    assert len(writer.created) == 3
    assert writer.patched == []


async def test_a_finished_series_gets_its_final_count_and_is_forgotten() -> None:
    rec, writer, clock, tasks = recorder()
    for _ in range(2):
        rec.record(pod(), "FailedScheduling", "m", "Warning")
    await settle(tasks)
    assert [b["series"]["count"] for _, b in writer.patched] == [2]
    for _ in range(2):
        rec.record(pod(), "FailedScheduling", "m", "Warning")
    await settle(tasks)
    assert len(writer.patched) == 1  # counted, not written
    clock.t += FINISH_SECONDS + 61
    rec.record(pod("9"), "FailedScheduling", "m", "Warning")  # any record runs the sweep
    await settle(tasks)
    assert [b["series"]["count"] for _, b in writer.patched] == [2, 4]
    assert len(rec.series) == 1  # only the new one
    rec.record(pod(), "FailedScheduling", "m", "Warning")  # the old key again: a new event
    await settle(tasks)
    assert len(writer.created) == 3


async def test_an_event_that_cannot_recur_is_written_and_not_kept() -> None:
    rec, writer, _clock, tasks = recorder()
    rec.record(pod(), "Scheduled", "Successfully assigned ns/p to n1", once=True)
    await settle(tasks)
    assert [e["reason"] for e in writer.created] == ["Scheduled"]
    assert rec.series == {}
