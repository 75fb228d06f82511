"""A write that changes nothing writes nothing (upstream's GuaranteedUpdate compares the
new object's bytes with the stored ones): an update (PUT) as a patch, through the object
and its status, keeps the resourceVersion. A write whose base came from the watch cache
is compared with the store's version, not the cache's, which may be behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api.app import create_app
from controlplane.api.rest import KubeApi
from controlplane.client import Client, resource_path
from controlplane.config import Config

CONFIGMAPS = resource_path("", "v1", "configmaps", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[KubeApi, Client]]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield app.state.front.kube, c


async def test_an_update_that_changes_nothing_keeps_the_resource_version(served: tuple[KubeApi, Client]) -> None:
    _, client = served
    created = await client.create(CONFIGMAPS, {"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}})
    again = await client.update(f"{CONFIGMAPS}/c", created)
    assert again == created  # the same resourceVersion and managedFields
    assert await client.get(f"{CONFIGMAPS}/c") == created
    # without a resourceVersion (an unconditional update) too
    body = {**created, "metadata": {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}}
    assert (await client.update(f"{CONFIGMAPS}/c", body))["metadata"]["resourceVersion"] == \
        created["metadata"]["resourceVersion"]
    changed = await client.update(f"{CONFIGMAPS}/c", {**created, "data": {"k": "w"}})
    assert int(changed["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_a_status_update_that_changes_nothing_keeps_the_resource_version(
        served: tuple[KubeApi, Client]) -> None:
    _, client = served
    created = await client.create(DEPLOYMENTS, {
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
                 "template": {"metadata": {"labels": {"app": "a"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    status = await client.update(f"{DEPLOYMENTS}/d/status", {**created, "status": {"replicas": 1}})
    assert int(status["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    again = await client.update(f"{DEPLOYMENTS}/d/status", status)
    assert again["metadata"]["resourceVersion"] == status["metadata"]["resourceVersion"]
    assert again["metadata"].get("generation") == created["metadata"].get("generation")


@pytest.mark.parametrize("verb", ["update", "patch"])
async def test_a_write_is_compared_with_the_stored_version_not_a_stale_cached_one(
        served: tuple[KubeApi, Client], monkeypatch: pytest.MonkeyPatch, verb: str) -> None:
    kube, client = served
    first = await client.create(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"k": "1"}})
    second = await client.patch(f"{CONFIGMAPS}/c", {"data": {"k": "2"}})
    assert second["data"] == {"k": "2"}
    stale = orjson.dumps(first)
    revision = int(first["metadata"]["resourceVersion"])

    def behind(rtype: Any, key: bytes) -> tuple[bytes, int]:
        return stale, revision  # the cache still holding the first version

    monkeypatch.setattr(kube.reads, "latest", behind)
    if verb == "update":  # an unconditional update back to the first data: equal to the cache's version only
        body = {"metadata": {"name": "c"}, "data": {"k": "1"}}
        written = await client.update(f"{CONFIGMAPS}/c", body)
    else:
        written = await client.patch(f"{CONFIGMAPS}/c", {"data": {"k": "1"}})
    monkeypatch.undo()
    assert written["data"] == {"k": "1"}
    assert int(written["metadata"]["resourceVersion"]) > int(second["metadata"]["resourceVersion"])
    assert (await client.get(f"{CONFIGMAPS}/c"))["data"] == {"k": "1"}


WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


async def test_true_is_not_1_but_1_0_is_1(served: tuple[KubeApi, Client]) -> None:
    """Upstream compares the bytes Go writes: ``true`` differs from ``1`` (Python's == says
    equal), so the write is made; ``1.0`` is written ``1``, so that one is no change."""
    _, client = served
    await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGET_CRD)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": 1}}
    created = await client.create(WIDGETS, widget)
    version = created["metadata"]["resourceVersion"]
    same = await client.patch(f"{WIDGETS}/w", {"spec": {"x": 1.0}})
    assert same["metadata"]["resourceVersion"] == version
    flipped = await client.patch(f"{WIDGETS}/w", {"spec": {"x": True}})
    assert flipped["spec"]["x"] is True and flipped["metadata"]["resourceVersion"] != version
    back = await client.update(f"{WIDGETS}/w", {**flipped, "spec": {"x": 1}})
    assert back["spec"]["x"] == 1 and back["spec"]["x"] is not True
    assert back["metadata"]["resourceVersion"] != flipped["metadata"]["resourceVersion"]
    applied = await client.patch(f"{WIDGETS}/w", {"apiVersion": "example.com/v1", "kind": "Widget",
                                                  "metadata": {"name": "w"}, "spec": {"x": True}},
                                 "apply", fieldManager="one", force=True)
    assert applied["spec"]["x"] is True
