"""componentsmetrics: the ``--components-process`` child's metrics read over its abstract Unix
socket, in place of the server's own idle copies; nothing when no child answers."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from controlplane import componentsmetrics
from controlplane.metrics import COMPONENTS_METRICS, SCHEDULER_SCHEDULE_ATTEMPTS, exposition


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"controlplane-components-metrics-test-{os.getpid()}-{id(monkeypatch)}"
    monkeypatch.setenv(componentsmetrics.ENV, name)
    return name


def test_nothing_is_skipped_or_fetched_without_a_components_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(componentsmetrics.ENV, raising=False)
    assert componentsmetrics.skipped_families() == frozenset()
    assert componentsmetrics.fetch() == b""


def test_the_skipped_families_are_the_components_and_only_theirs(announced: str) -> None:
    skipped = componentsmetrics.skipped_families()
    assert "controlplane_scheduler_schedule_attempts" in skipped
    assert "controlplane_nodes_image_pull_seconds" in skipped
    assert "node_collector_zone_health" in skipped  # (kube-controller-manager's name)
    assert "controlplane_request_duration_seconds" not in skipped
    assert len(skipped) == len(COMPONENTS_METRICS)
    served = exposition(skip=skipped).decode()
    assert "controlplane_scheduler_schedule_attempts_total" not in served
    assert "controlplane_request_duration_seconds" in served


def test_a_child_that_is_not_listening_gives_nothing_at_once(announced: str) -> None:
    assert componentsmetrics.fetch(timeout=0.5) == b""


async def test_the_server_reads_the_childs_exposition(announced: str) -> None:
    SCHEDULER_SCHEDULE_ATTEMPTS.labels(result="scheduled").inc(3)
    async with componentsmetrics.serving():
        text = (await asyncio.to_thread(componentsmetrics.fetch)).decode()
        again = (await asyncio.to_thread(componentsmetrics.fetch)).decode()  # every connection answered
    value = re.search(r'^controlplane_scheduler_schedule_attempts_total\{result="scheduled"\} (\S+)$', text, re.M)
    assert value is not None and float(value.group(1)) >= 3
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    assert "controlplane_nodes_image_pull_seconds" in helps
    assert not any(h.startswith(("controlplane_request_", "process_", "python_")) for h in helps)
    assert again.splitlines()[0] == text.splitlines()[0]
    assert await asyncio.to_thread(componentsmetrics.fetch, 0.5) == b""  # closed with the block


async def test_a_name_already_taken_serves_nothing_and_does_not_fail(announced: str) -> None:
    async with componentsmetrics.serving(), componentsmetrics.serving():
        assert b"controlplane_scheduler_schedule_attempts" in await asyncio.to_thread(componentsmetrics.fetch)
