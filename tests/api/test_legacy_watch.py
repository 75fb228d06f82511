"""The deprecated watch paths (``/api/v1/watch/...``, ``/apis/G/V/watch/...``) as upstream's
installer routes them: a watch of the list or of one object (by a ``metadata.name`` field
selector), ``?watch=false`` or not, with the options of a list path's watch."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from controlplane.client import Client, resource_path
from controlplane.client.transport import call, open_stream

ACCEPT = [(b"accept", b"application/json")]


async def events(client: Client, path: str, n: int, **query: str) -> list[dict[str, Any]]:
    """The first ``n`` events of a raw watch on ``path``."""
    status, _, body = await open_stream(client._app, "GET", path.encode(), urlencode(query).encode(), ACCEPT, b"")
    try:
        assert status == 200, b"".join([c async for c in body])
        out: list[dict[str, Any]] = []
        rest = b""
        async for chunk in body:
            *lines, rest = (rest + chunk).split(b"\n")
            out.extend(orjson.loads(line) for line in lines if line.strip())
            if len(out) >= n:
                return out[:n]
        return out
    finally:
        await body.aclose()


async def refusal(client: Client, path: str, method: str = "GET", **query: str) -> dict[str, Any]:
    status, body, _ = await call(client._app, method, path, urlencode(query).encode(), ACCEPT, b"")
    answer: dict[str, Any] = orjson.loads(body)
    assert answer["code"] == status and answer["kind"] == "Status"
    return answer


@pytest.fixture
async def two_namespaces(client: Client) -> Client:
    for ns in ("a", "b"):
        await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": ns}})
        for cm in ("x", "y"):
            await client.create(resource_path("", "v1", "configmaps", ns),
                                {"metadata": {"name": cm, "labels": {"cm": cm}}})
    return client


async def test_the_list_paths_watch_all_namespaces_or_one(two_namespaces: Client) -> None:
    c = two_namespaces
    everywhere = await events(c, "/api/v1/watch/configmaps", 4, labelSelector="cm", timeoutSeconds="5")
    assert sorted((e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in everywhere) \
        == [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    assert {e["type"] for e in everywhere} == {"ADDED"}
    in_b = await events(c, "/api/v1/watch/namespaces/b/configmaps", 1, labelSelector="cm=y", timeoutSeconds="5")
    assert [(e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in in_b] == [("b", "y")]


async def test_the_item_path_watches_one_object_whatever_watch_says(two_namespaces: Client) -> None:
    c = two_namespaces
    for query in ({}, {"watch": "false"}, {"watch": "true"}, {"fieldSelector": "metadata.name=y"}):
        seen = await events(c, "/api/v1/watch/namespaces/a/configmaps/y", 1, timeoutSeconds="1", **query)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [("ADDED", "y")], query
    # (the first of a's configmaps and of the namespaces, by key, is another: these are selected)
    # a cluster-scoped object: the namespace b itself, not what is in it
    seen = await events(c, "/api/v1/watch/namespaces/b", 1, timeoutSeconds="1")
    assert [(e["type"], e["object"]["kind"], e["object"]["metadata"]["name"]) for e in seen] \
        == [("ADDED", "Namespace", "b")]


async def test_a_watch_from_a_resource_version_sees_later_changes_of_its_object(two_namespaces: Client) -> None:
    c = two_namespaces
    cms = resource_path("", "v1", "configmaps", "a")
    rv = (await c.get(f"{cms}/x"))["metadata"]["resourceVersion"]
    await c.patch(f"{cms}/y", {"data": {"k": "1"}})
    await c.patch(f"{cms}/x", {"data": {"k": "2"}})
    seen = await events(c, "/api/v1/watch/namespaces/a/configmaps/x", 1, resourceVersion=rv, timeoutSeconds="5")
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["data"]) for e in seen] \
        == [("MODIFIED", "x", {"k": "2"})]


async def test_errors_are_upstreams(two_namespaces: Client) -> None:
    c = two_namespaces
    answer = await refusal(c, "/api/v1/watch/namespaces/a/configmaps/x", fieldSelector="metadata.name=y")
    assert (answer["code"], answer["message"]) == (400, "fieldSelector metadata.name doesn't match requested name")
    answer = await refusal(c, "/api/v1/watch/namespaces/a/configmaps/x", fieldSelector="metadata.namespace=a")
    assert answer["code"] == 400
    # without ?watch=true the options are a list's, as upstream validates them
    answer = await refusal(c, "/api/v1/watch/configmaps", sendInitialEvents="true")
    assert answer["code"] == 422 and answer["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "field": "sendInitialEvents",
         "message": "Forbidden: sendInitialEvents is forbidden for list"}]
    answer = await refusal(c, "/api/v1/watch/configmaps", resourceVersionMatch="NotOlderThan")
    assert answer["code"] == 422
    for path in ("/api/v1/watch/configmaps/x",                 # a namespaced object needs its namespace
                 "/api/v1/watch/namespaces/a/configmaps/x/status",
                 "/api/v1/watch/namespaces/a/bindings",        # not watchable: no such route upstream
                 "/api/v1/watch/componentstatuses",
                 "/apis/metrics.k8s.io/v1beta1/watch/nodes",
                 "/api/v1/watch/nothings"):
        assert (await refusal(c, path))["code"] == 404, path
    assert (await refusal(c, "/api/v1/watch/namespaces/a/configmaps", "POST"))["code"] == 405
    assert (await refusal(c, "/api/v1/watch/namespaces/a/configmaps/x", "DELETE"))["code"] == 405


async def test_with_watch_true_the_options_are_a_watchs(two_namespaces: Client) -> None:
    c = two_namespaces
    seen = await events(c, "/api/v1/watch/namespaces/a/configmaps", 3, watch="true", sendInitialEvents="true",
                        resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true", timeoutSeconds="5")
    assert [e["type"] for e in seen] == ["ADDED", "ADDED", "BOOKMARK"]
    assert seen[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_an_api_groups_and_a_custom_resources_paths(client: Client) -> None:
    deployments = resource_path("apps", "v1", "deployments", "default")
    await client.create(deployments, {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    seen = await events(client, "/apis/apps/v1/watch/namespaces/default/deployments/d", 1, timeoutSeconds="1")
    assert [(e["type"], e["object"]["kind"]) for e in seen] == [("ADDED", "Deployment")]
    seen = await events(client, "/apis/rbac.authorization.k8s.io/v1/watch/clusterroles/admin", 1,
                        timeoutSeconds="1")
    assert [e["object"]["metadata"]["name"] for e in seen] == ["admin"]


def test_a_legacy_watch_is_counted_as_upstream_counts_it() -> None:
    """``apiserver_request_*``'s labels: verb WATCH, the type's resource (not ``watch``), and
    scope ``resource`` for one object's path, as upstream's CleanVerb and CleanScope."""
    from controlplane.api.rest import WATCH_SCOPE_KEY, _request_labels

    def labels(path: str) -> tuple[str, ...] | None:
        return _request_labels({"method": "GET", "path": path, "query_string": b"", WATCH_SCOPE_KEY: True})

    assert labels("/api/v1/watch/namespaces/ns/pods/p") == ("WATCH", "", "", "v1", "pods", "", "resource")
    assert labels("/api/v1/watch/namespaces/ns/pods") == ("WATCH", "", "", "v1", "pods", "", "namespace")
    assert labels("/apis/apps/v1/watch/deployments") == ("WATCH", "", "apps", "v1", "deployments", "", "cluster")
