"""A terminating namespace as kube-controller-manager's namespace controller empties it
(api/namespace_deleter.py): held for as long as its content is, saying why in its
conditions, and emptied again after a restart."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from controlplane.api import namespace_deleter
from controlplane.api.app import create_app
from controlplane.api.namespace_deleter import namespace_conditions
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config

NAMESPACES = resource_path("", "v1", "namespaces")


def _cms(namespace: str) -> str:
    return resource_path("", "v1", "configmaps", namespace)


async def _gone(client: Client, path: str, timeout: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            await client.get(path)
        except ApiError as e:
            if e.code == 404:
                return True
            raise
        await asyncio.sleep(0.02)
    return False


def _by_type(ns: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in ns["status"].get("conditions") or []}


async def test_content_held_by_a_finalizer_holds_the_namespace_however_long(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The namespace waits for its content as long as it stays (it was released after 100
    rounds of 0.2 s, leaving a ConfigMap in a namespace that no longer existed), its
    conditions in upstream's words; once the finalizer goes, so does the namespace."""
    monkeypatch.setattr(namespace_deleter, "FIRST_RECHECK", 0.001)
    monkeypatch.setattr(namespace_deleter, "LAST_RECHECK", 0.001)
    rounds = 0
    delete_content = namespace_deleter._delete_content

    async def counted(*args: Any) -> tuple[Counter[str], Counter[str]]:
        nonlocal rounds
        rounds += 1
        return await delete_content(*args)
    monkeypatch.setattr(namespace_deleter, "_delete_content", counted)

    await client.create(NAMESPACES, {"metadata": {"name": "held"}})
    await client.create(_cms("held"), {"metadata": {"name": "kept", "finalizers": ["example.com/hold"]}})
    await client.create(_cms("held"), {"metadata": {"name": "free"}})
    await client.delete(f"{NAMESPACES}/held")
    deadline = asyncio.get_running_loop().time() + 10
    while rounds < 150 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert rounds >= 150  # more than the 100 it gave up after
    ns = await client.get(f"{NAMESPACES}/held")
    assert ns["status"]["phase"] == "Terminating"
    assert _by_type(ns) == {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
        "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions",
                                                        "All legacy kube types successfully parsed"),
        "NamespaceDeletionContentFailure": ("False", "ContentDeleted",
                                            "All content successfully deleted, may be waiting on finalization"),
        "NamespaceContentRemaining": ("True", "SomeResourcesRemain",
                                      "Some resources are remaining: configmaps. has 1 resource instances"),
        "NamespaceFinalizersRemaining": ("True", "SomeFinalizersRemain",
                                         "Some content in the namespace has finalizers remaining: "
                                         "example.com/hold in 1 resource instances"),
    }
    assert await _gone(client, f"{_cms('held')}/free", timeout=0.1)
    assert (await client.get(f"{_cms('held')}/kept"))["metadata"]["deletionTimestamp"]
    await client.patch(f"{_cms('held')}/kept", {"metadata": {"finalizers": None}})
    assert await _gone(client, f"{NAMESPACES}/held")


async def test_a_restart_resumes_emptying_a_terminating_namespace(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data", tls=False, scheduler=False)
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.create(NAMESPACES, {"metadata": {"name": "held"}})
        await c.create(_cms("held"), {"metadata": {"name": "kept", "finalizers": ["example.com/hold"]}})
        await c.delete(f"{NAMESPACES}/held")
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.patch(f"{_cms('held')}/kept", {"metadata": {"finalizers": None}})
        assert await _gone(c, f"{NAMESPACES}/held")


def test_a_condition_moves_its_transition_time_only_when_its_status_changes() -> None:
    """As upstream's updateConditions: a new message keeps the time, a new status moves it;
    conditions of other types stay."""
    other = {"type": "example.com/Mine", "status": "True"}
    first = namespace_conditions([other], Counter({"pods.": 2}), Counter())
    assert first[0] == other and [c["type"] for c in first[1:]] == list(namespace_deleter.CONDITION_TYPES)
    stamped = [{**c, "lastTransitionTime": "2020-01-01T00:00:00Z"} for c in first]
    fewer = {c["type"]: c for c in namespace_conditions(stamped, Counter({"pods.": 1}), Counter())}
    assert fewer["NamespaceContentRemaining"]["message"] == \
        "Some resources are remaining: pods. has 1 resource instances"
    assert fewer["NamespaceContentRemaining"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    done = {c["type"]: c for c in namespace_conditions(stamped, Counter(), Counter())}
    assert (done["NamespaceContentRemaining"]["status"], done["NamespaceContentRemaining"]["reason"]) == \
        ("False", "ContentRemoved")
    assert done["NamespaceContentRemaining"]["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    assert done["NamespaceFinalizersRemaining"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"


async def test_a_restart_leaves_a_live_namespace_whose_labels_name_deletion_alone(tmp_path: Path) -> None:
    """Only a namespace being deleted is emptied at start: one whose label (or annotation)
    is called ``deletionTimestamp`` keeps its content."""
    config = Config(data_dir=tmp_path / "data", tls=False, scheduler=False)
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.create(NAMESPACES, {"metadata": {"name": "live", "labels": {"deletionTimestamp": "soon"}}})
        await c.create(_cms("live"), {"metadata": {"name": "kept"}})
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        assert not await _gone(c, f"{_cms('live')}/kept", timeout=0.3)
        assert "deletionTimestamp" not in (await c.get(f"{NAMESPACES}/live"))["metadata"]


async def test_a_round_that_fails_is_tried_again(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round that raises something other than a store error (a bug, a refused delete) is
    logged and tried again after the delay: the namespace still goes, not left Terminating
    until a restart."""
    monkeypatch.setattr(namespace_deleter, "FIRST_RECHECK", 0.001)
    monkeypatch.setattr(namespace_deleter, "LAST_RECHECK", 0.001)
    delete_content = namespace_deleter._delete_content
    failures = 0

    async def failing_once(*args: Any) -> tuple[Counter[str], Counter[str]]:
        nonlocal failures
        if not failures:
            failures += 1
            raise RuntimeError("a round's fault")
        return await delete_content(*args)
    monkeypatch.setattr(namespace_deleter, "_delete_content", failing_once)

    await client.create(NAMESPACES, {"metadata": {"name": "flaky"}})
    await client.create(_cms("flaky"), {"metadata": {"name": "c"}})
    await client.delete(f"{NAMESPACES}/flaky")
    assert await _gone(client, f"{NAMESPACES}/flaky") and failures == 1
