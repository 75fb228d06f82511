"""The controllers' event recorder (controllers/events.py): the same event again counts up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.api.tables import _event_source
from controlplane.client import Client
from controlplane.config import Config
from controlplane.controllers.events import Recorder

EVENTS = "/api/v1/namespaces/default/events"
HPA = {"metadata": {"name": "web", "namespace": "default", "uid": "u-1"}}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


async def written(recorder: Recorder) -> None:
    while recorder.pending:
        await asyncio.sleep(0.01)


async def test_the_same_event_again_counts_up_the_one_written(client: Client) -> None:
    recorder = Recorder(client, "horizontal-pod-autoscaler")
    for _ in range(3):  # at once: the updates wait for the create
        recorder.record("HorizontalPodAutoscaler", HPA, "FailedGetScale", "no scale", "Warning")
    recorder.record("HorizontalPodAutoscaler", HPA, "SuccessfulRescale", "New size: 2")
    await written(recorder)
    events = {e["reason"]: e for e in (await client.list(EVENTS))["items"]}
    assert set(events) == {"FailedGetScale", "SuccessfulRescale"}
    failed = events["FailedGetScale"]
    assert failed["count"] == 3 and failed["firstTimestamp"] <= failed["lastTimestamp"]
    assert events["SuccessfulRescale"]["count"] == 1
    # as client-go's recorder with a source of no host: no reporting instance, and kubectl's
    # SOURCE column (-o wide) shows the component alone
    assert failed["source"] == {"component": "horizontal-pod-autoscaler"}
    assert failed["reportingComponent"] == "horizontal-pod-autoscaler" and not failed.get("reportingInstance")
    assert _event_source(failed) == "horizontal-pod-autoscaler"

    await client.delete(f"{EVENTS}/{failed['metadata']['name']}")
    recorder.record("HorizontalPodAutoscaler", HPA, "FailedGetScale", "no scale", "Warning")
    await written(recorder)
    again = [e for e in (await client.list(EVENTS))["items"] if e["reason"] == "FailedGetScale"]
    assert [e["count"] for e in again] == [1]  # gone: written anew


async def test_a_field_path_is_an_event_of_its_own_and_a_host_reports_it(client: Client) -> None:
    """The kubelet's recorder: each container's event apart (``fieldPath``), the node as the
    source's host and the reporting instance, the writes handed to its owner's queue."""
    queued: list[Any] = []
    recorder = Recorder(client, "kubelet", submit=queued.append)
    pod = {"metadata": {"name": "multi", "namespace": "default", "uid": "u-2"}}
    for path in ("spec.containers{a}", "spec.containers{b}", "spec.containers{a}"):
        recorder.record("Pod", pod, "Started", "Container started", field_path=path, host="node-1")
    assert len(queued) == 2 and recorder.pending == 2  # the repeat rides on the queued write of its key
    for job in queued:
        await job()
    events = {e["involvedObject"]["fieldPath"]: e for e in (await client.list(EVENTS))["items"]}
    assert {path: e["count"] for path, e in events.items()} == {"spec.containers{a}": 2, "spec.containers{b}": 1}
    a = events["spec.containers{a}"]
    assert a["source"] == {"component": "kubelet", "host": "node-1"}
    assert (a["reportingComponent"], a["reportingInstance"]) == ("kubelet", "node-1") and recorder.pending == 0


RS = {"metadata": {"name": "web-5d8f", "namespace": "default", "uid": "u-rs"}}


async def test_the_tenth_similar_message_and_after_are_combined_in_one_event(client: Client) -> None:
    """client-go's EventAggregator: similar events (same object, type and reason) with ten
    different messages in ten minutes: nine written as they are, then one event that counts
    the rest, its message the latest one, prefixed."""
    recorder = Recorder(client, "replicaset-controller")
    for i in range(15):
        recorder.record("ReplicaSet", RS, "SuccessfulCreate", f"Created pod: web-5d8f-{i:05d}")
        await written(recorder)
    recorder.record("ReplicaSet", RS, "SuccessfulDelete", "Deleted pod: web-5d8f-00000")  # another reason
    await written(recorder)
    items = (await client.list(EVENTS))["items"]
    created = sorted((e["message"], e["count"]) for e in items if e["reason"] == "SuccessfulCreate")
    assert created == [("(combined from similar events): Created pod: web-5d8f-00014", 6),
                       *((f"Created pod: web-5d8f-{i:05d}", 1) for i in range(9))]
    assert [e["message"] for e in items if e["reason"] == "SuccessfulDelete"] == ["Deleted pod: web-5d8f-00000"]


async def test_a_source_writes_25_events_about_an_object_then_one_each_five_minutes(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go's spam filter: a token bucket per source and object, 25 deep, one token back
    every 300 s; an occurrence held back still counts in the next one written."""
    clock = [1_000_000.0]
    monkeypatch.setattr("controlplane.controllers.events.time.time", lambda: clock[0])
    recorder = Recorder(client, "kubelet", host="node-1")
    pod = {"metadata": {"name": "crashing", "namespace": "default", "uid": "u-pod"}}
    for _ in range(30):
        recorder.record("Pod", pod, "BackOff", "Back-off restarting failed container", "Warning")
        await written(recorder)
    events = (await client.list(EVENTS))["items"]
    assert [e["count"] for e in events] == [25]  # the last five held back
    clock[0] += 299
    recorder.record("Pod", pod, "BackOff", "Back-off restarting failed container", "Warning")
    await written(recorder)
    assert [e["count"] for e in (await client.list(EVENTS))["items"]] == [25]
    clock[0] += 1  # a token again: written, with every occurrence since
    recorder.record("Pod", pod, "BackOff", "Back-off restarting failed container", "Warning")
    await written(recorder)
    assert [e["count"] for e in (await client.list(EVENTS))["items"]] == [32]
    other = {"metadata": {"name": "other", "namespace": "default", "uid": "u-other"}}
    recorder.record("Pod", other, "BackOff", "Back-off restarting failed container", "Warning")  # its own bucket
    await written(recorder)
    assert len((await client.list(EVENTS))["items"]) == 2


async def test_an_event_is_named_by_its_object_and_the_nanoseconds_in_hex(client: Client,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """As client-go's ``makeEvent``: ``<object>.<UnixNano in hex>``, nothing after; two events
    about one object in one clock tick still get two names."""
    import time

    import controlplane.controllers.events as events_module
    monkeypatch.setattr(time, "time_ns", lambda: 1_796_550_000_123_456_789)
    monkeypatch.setattr(events_module, "_last_nanos", 0)  # (an earlier test's events: later than this clock)
    recorder = Recorder(client, "horizontal-pod-autoscaler")
    recorder.record("HorizontalPodAutoscaler", HPA, "FailedGetScale", "no scale", "Warning")
    recorder.record("HorizontalPodAutoscaler", HPA, "SuccessfulRescale", "New size: 2")
    await written(recorder)
    names = sorted(e["metadata"]["name"] for e in (await client.list(EVENTS))["items"])
    tick = 1_796_550_000_123_456_789
    assert names == [f"web.{tick:x}", f"web.{tick + 1:x}"] and len(f"{tick:x}") == 16
