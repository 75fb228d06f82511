"""When an idle watch's bookmarks are due (``WatchOptions.next_bookmark``), and when a watch ends."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from controlplane.api import reads, rest
from controlplane.api.reads import BOOKMARK_SECONDS, PRE_DEADLINE_BOOKMARK, WatchOptions
from controlplane.client import Client, resource_path
from controlplane.registry import ResourceType
from controlplane.registry.attrs import Filter


def options(deadline: float = math.inf) -> WatchOptions:
    return WatchOptions(Filter.parse("pods", None, None), bookmarks=True, deadline=deadline)


def test_without_a_deadline_bookmarks_are_periodic() -> None:
    assert options().next_bookmark(100.0) == 100.0 + BOOKMARK_SECONDS


def test_the_last_bookmark_comes_just_before_the_deadline_and_none_after() -> None:
    deadline = 100.0 + BOOKMARK_SECONDS + 30.0
    o = options(deadline)
    assert o.next_bookmark(100.0) == 100.0 + BOOKMARK_SECONDS             # a periodic one first
    last = deadline - PRE_DEADLINE_BOOKMARK
    assert o.next_bookmark(100.0 + BOOKMARK_SECONDS) == last               # then the one before the end
    assert o.next_bookmark(last) == math.inf                               # that one sent: no more
    assert o.next_bookmark(last - 0.001) == math.inf                       # nor if its timer fired early


def test_a_watch_shorter_than_the_margin_gets_no_timed_bookmark() -> None:
    assert options(100.0 + PRE_DEADLINE_BOOKMARK / 2).next_bookmark(100.0) == math.inf


# -- validation of the options, as upstream's ValidateListOptions ----------------------------
def _causes(query: dict[str, str], watch: bool) -> list[tuple[str, str]]:
    from controlplane.api.errors import ApiError
    from controlplane.api.reads import list_options, watch_options
    from controlplane.registry import Registry

    pods = Registry().get("", "v1", "pods")
    assert pods is not None
    try:
        (watch_options if watch else list_options)(pods, "default", query)
    except ApiError as e:
        error = e
    else:
        return []
    assert error.code == 422 and error.reason == "Invalid"
    return [(c["field"], c["message"]) for c in error.status()["details"]["causes"]]


def test_a_list_may_not_ask_for_initial_events() -> None:
    for value in ("true", "false"):
        assert _causes({"sendInitialEvents": value}, watch=False) == [
            ("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")]


def test_a_watch_reports_every_option_violation_as_upstream() -> None:
    assert _causes({"sendInitialEvents": "true"}, watch=True) == [
        ("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")]
    assert _causes({"resourceVersionMatch": "Exact", "resourceVersion": "5"}, watch=True) == [
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                                 "is provided"),
        ("resourceVersionMatch", 'Unsupported value: "Exact": supported values: "NotOlderThan"')]
    assert _causes({"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}, watch=True) == []
    # a continue token beside a match (a watch otherwise ignores it)
    assert _causes({"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "continue": "x"},
                   watch=True) == [
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when continue is provided")]
    assert _causes({"continue": "x"}, watch=True) == []


async def test_a_watch_without_timeout_seconds_ends_after_30_to_60_minutes(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """As upstream's handler: with no ``timeoutSeconds`` (or 0), --min-request-timeout
    (1800 s) times a random 1 to 2, so that watches started together end spread out."""
    seen: list[float] = []
    real = reads.watch_options

    def spy(rtype: ResourceType, namespace: str | None, query: dict[str, str], deadline: float = math.inf,
            *more: Any) -> Any:
        if rtype.plural == "configmaps":  # (not the server's own components' watches)
            seen.append(deadline - time.monotonic())
        return real(rtype, namespace, query, deadline, *more)

    monkeypatch.setattr(rest, "watch_options", spy)
    cms = resource_path("", "v1", "configmaps", "default")
    await client.create(cms, {"metadata": {"name": "c"}})
    for timeout in (None, 0, None, None, 7):
        events = client.watch(cms, timeout_seconds=timeout)
        async for _ in events:
            break
        await events.aclose()
    assert all(1799 < s <= 3600 for s in seen[:4]) and len({round(s) for s in seen[:4]}) > 1
    assert 6 < seen[4] <= 7
