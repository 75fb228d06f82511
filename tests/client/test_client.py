"""The components' client: REST verbs, watches and informers, in process and over a socket."""

from __future__ import annotations

import asyncio
import base64
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, Informer, KubeconfigError, resource_path
from controlplane.client.sharing import PodSharer
from controlplane.config import Config
from tests.test_cli import Serve, start_serve

PODS = resource_path("", "v1", "pods", "default")


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    # no scheduler: its informers' in-process watches would count among this test's tasks
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[Client]:
    async with Client.in_process(app.state.front) as c:
        yield c


def test_resource_path() -> None:
    assert resource_path("", "v1", "nodes") == "/api/v1/nodes"
    assert resource_path("", "v1", "pods", "ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert (resource_path("scheduling.k8s.io", "v1beta1", "podgroups", "ns")
            == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups")


async def test_verbs_in_process(client: Client) -> None:
    created = await client.create(PODS, pod("a", app="x"))
    assert created["metadata"]["uid"]
    got = await client.get(f"{PODS}/a")
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    patched = await client.patch(f"{PODS}/a", {"metadata": {"labels": {"tier": "web"}}})
    assert patched["metadata"]["labels"] == {"app": "x", "tier": "web"}
    patched = await client.patch(f"{PODS}/a", {"metadata": {"labels": {"s": "1"}}}, "strategic")
    assert patched["metadata"]["labels"]["s"] == "1"
    listed = await client.list(PODS, labelSelector="tier=web")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a"]
    await client.delete(f"{PODS}/a")
    with pytest.raises(ApiError) as e:
        await client.get(f"{PODS}/a")
    assert e.value.code == 404 and e.value.reason == "NotFound"
    with pytest.raises(ApiError) as e:
        await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}})
    assert e.value.code == 422


async def test_an_object_named_outside_ascii_is_reached_in_process(client: Client) -> None:
    # a ClusterRole's name is a path segment name, "ä" as good as any: the in-process client sends
    # its path percent-encoded, as an HTTP client does (the aggregation controller's patch of one
    # was an exception retried for ever)
    roles = resource_path("rbac.authorization.k8s.io", "v1", "clusterroles")
    await client.create(roles, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                "metadata": {"name": "ä"}, "rules": []})
    assert (await client.get(f"{roles}/ä"))["metadata"]["name"] == "ä"
    patched = await client.patch(f"{roles}/ä", {"metadata": {"labels": {"a": "b"}}})
    assert patched["metadata"]["labels"] == {"a": "b"}
    async for ev in client.watch(f"{roles}", field_selector="metadata.name=ä", timeout_seconds=1):
        assert ev.type in ("ADDED", "BOOKMARK")
        if ev.type == "ADDED":
            assert ev.object["metadata"]["name"] == "ä"
            break
    await client.delete(f"{roles}/ä")


async def test_watch_in_process_streams_events_as_they_happen(client: Client) -> None:
    rv = (await client.list(PODS))["metadata"]["resourceVersion"]
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for ev in client.watch(PODS, resource_version=rv):
            if ev.type != "BOOKMARK":
                seen.append((ev.type, ev.object["metadata"]["name"]))
            if len(seen) == 3:
                return

    task = asyncio.create_task(watch())
    await client.create(PODS, pod("w"))
    await client.patch(f"{PODS}/w", {"metadata": {"labels": {"a": "b"}}})
    await client.delete(f"{PODS}/w")
    await asyncio.wait_for(task, 5)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_watch_of_an_expired_revision_raises_410(client: Client, app: FastAPI) -> None:
    for i in range(3):
        await client.create(PODS, pod(f"p{i}"))
    store = app.state.server.store
    await store.compact(await store.revision())
    with pytest.raises(ApiError) as e:
        async for _ in client.watch(PODS, resource_version="1"):
            pass
    assert e.value.code == 410


async def test_closing_a_watch_ends_the_server_side(client: Client) -> None:
    rv = (await client.list(PODS))["metadata"]["resourceVersion"]
    stream = client.watch(PODS, resource_version=rv)
    task: asyncio.Task[object] = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)

    def serving() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name().startswith(f"in-process GET {PODS}") and not t.done()]

    assert serving()  # the app's request task for this watch
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await stream.aclose()
    # the app's request task for this watch is gone (the server's own controllers keep theirs)
    await asyncio.sleep(0.05)
    assert not serving()


async def test_informer_lists_then_follows(client: Client) -> None:
    await client.create(PODS, pod("before"))
    events: list[tuple[str, str]] = []
    inf = Informer(client, PODS, page_size=1,
                   on_add=lambda o: events.append(("add", o["metadata"]["name"])),
                   on_update=lambda a, b: events.append(("update", b["metadata"]["name"])),
                   on_delete=lambda o: events.append(("delete", o["metadata"]["name"])))
    await client.create(PODS, pod("before2"))
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert set(inf.items) == {"default/before", "default/before2"}
        await client.create(PODS, pod("after"))
        await client.patch(f"{PODS}/before", {"metadata": {"labels": {"x": "y"}}})
        await client.delete(f"{PODS}/before2")
        for _ in range(100):
            if len(events) >= 5:
                break
            await asyncio.sleep(0.02)
        assert sorted(events[:2]) == [("add", "before"), ("add", "before2")]
        assert events[2:] == [("add", "after"), ("update", "before"), ("delete", "before2")]
        assert set(inf.items) == {"default/before", "default/after"}
        assert inf.items["default/before"]["metadata"]["labels"] == {"x": "y"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _until(cond: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_shared_informer_one_watch_for_every_handle(client: Client) -> None:
    await client.create(PODS, pod("s1"))
    seen_a: list[str] = []
    seen_b: list[str] = []
    a = client.informer(PODS, on_add=lambda o: seen_a.append(o["metadata"]["name"]),
                        on_update=lambda _o, n: seen_a.append("~" + n["metadata"]["name"]))
    b = client.informer(PODS, on_add=lambda o: seen_b.append(o["metadata"]["name"]),
                        on_delete=lambda o: seen_b.append("-" + o["metadata"]["name"]))
    assert a.shared is b.shared and client.informer(f"{PODS}x").shared is not a.shared
    ta = asyncio.create_task(a.run())
    tb: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(a.synced.wait(), 5)
        assert seen_a == ["s1"]
        await client.create(PODS, pod("s2"))
        await _until(lambda: "s2" in seen_a)
        # a handle that starts late gets what is held as adds, then what follows
        tb = asyncio.create_task(b.run())
        await asyncio.wait_for(b.synced.wait(), 5)
        assert sorted(seen_b) == ["s1", "s2"]
        await client.patch(f"{PODS}/s1", {"metadata": {"labels": {"x": "y"}}})
        await client.delete(f"{PODS}/s2")
        await _until(lambda: "~s1" in seen_a and "-s2" in seen_b)
        # one informer task for both handles; it goes on for b when a stops
        running = [t for t in asyncio.all_tasks() if t.get_name() == f"informer {PODS}" and not t.done()]
        assert len(running) == 1
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        await client.create(PODS, pod("s3"))
        await _until(lambda: "s3" in seen_b)
        assert "s3" not in seen_a
    finally:
        for t in (ta, tb):
            if t is not None:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
    await asyncio.sleep(0.05)  # with no handle left, the watch stops
    assert not [t for t in asyncio.all_tasks() if t.get_name() == f"informer {PODS}" and not t.done()]


async def test_an_optional_informer_of_a_collection_not_served_syncs_empty_and_lists_again(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A component against a cluster of an earlier release: an API it does not serve (404) is
    taken as empty by an optional informer, which lists it again until it is served; a
    required one does not sync (client-go's)."""
    from controlplane.client import informer as informer_module

    monkeypatch.setattr(informer_module, "NOT_SERVED_RETRY", 0.05)
    path = resource_path("widgets.example.com", "v1", "widgets", None)
    seen: list[str] = []
    optional = client.informer(path, on_add=lambda o: seen.append(o["metadata"]["name"]), optional=True)
    required = client.informer(path + "x")  # another collection, needed
    tasks = [asyncio.create_task(optional.run()), asyncio.create_task(required.run())]
    try:
        await asyncio.wait_for(optional.synced.wait(), 5)
        assert not optional.shared.served and seen == []
        await asyncio.sleep(0.2)
        assert not required.synced.is_set()
        await client.create(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions", None), {
            "metadata": {"name": "widgets.widgets.example.com"},
            "spec": {"group": "widgets.example.com", "scope": "Cluster",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})

        async def created() -> None:
            while True:
                try:
                    await client.create(path, {"apiVersion": "widgets.example.com/v1", "kind": "Widget",
                                               "metadata": {"name": "w1"}})
                    return
                except ApiError as e:  # until the CRD is established
                    if e.code != 404:
                        raise
                    await asyncio.sleep(0.05)

        await asyncio.wait_for(created(), 10)
        for _ in range(200):
            if seen == ["w1"]:
                break
            await asyncio.sleep(0.05)
        assert seen == ["w1"] and optional.shared.served
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("client"))
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


async def test_over_tls_from_the_kubeconfig(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as c:
        created = await c.create(PODS, pod("sock"))

        async def first_event() -> tuple[str, str]:
            async for ev in c.watch(PODS, resource_version=created["metadata"]["resourceVersion"],
                                    allow_bookmarks=False):
                return ev.type, ev.object["metadata"]["name"]
            raise AssertionError("the watch ended")

        task = asyncio.create_task(first_event())
        await asyncio.sleep(0.1)
        await c.delete(f"{PODS}/sock")
        assert await asyncio.wait_for(task, 5) == ("DELETED", "sock")
    with pytest.raises(ApiError) as e:
        async with Client(served.url, verify=False) as anonymous:
            await anonymous.list(PODS)
    assert e.value.code == 401


async def test_shared_informers_hold_objects_without_managed_fields(client: Client) -> None:
    """As kube-scheduler's and the controllers' informers (client-go's transform): the
    objects are held and handed on without managedFields, which the server still keeps."""
    await client.create(PODS, pod("m1"))
    assert (await client.get(f"{PODS}/m1"))["metadata"]["managedFields"]
    seen: list[dict[str, Any]] = []
    handle = client.informer(PODS, on_add=seen.append, on_update=lambda _o, n: seen.append(n))
    task = asyncio.create_task(handle.run())
    try:
        await asyncio.wait_for(handle.synced.wait(), 5)
        await client.patch(f"{PODS}/m1", {"metadata": {"labels": {"x": "y"}}})  # a watch event
        await _until(lambda: len(seen) == 2)
        assert all("managedFields" not in o["metadata"] for o in seen)
        assert all("managedFields" not in o["metadata"] for o in handle.items.values())
        # writing the held object back keeps the stored managedFields, as upstream
        await client.update(f"{PODS}/m1", handle.items["default/m1"])
        assert (await client.get(f"{PODS}/m1"))["metadata"]["managedFields"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_shared_informers_deleted_objects_are_handed_on_unshared(client: Client) -> None:
    """A DELETED event's pod is handed to the handlers as the held ones are (no managedFields)
    but not shared: it is not held, so the sharer's table gains nothing from it."""
    await client.create(PODS, pod("d1"))
    deleted: list[dict[str, Any]] = []
    handle = client.informer(PODS, on_delete=deleted.append)
    task = asyncio.create_task(handle.run())
    try:
        await asyncio.wait_for(handle.synced.wait(), 5)
        sharer = handle.shared.transform
        assert isinstance(sharer, PodSharer)
        held, shared = len(sharer), sharer.shared
        await client.delete(f"{PODS}/d1")
        await _until(lambda: len(deleted) == 1)
        assert deleted[0]["metadata"]["name"] == "d1" and "managedFields" not in deleted[0]["metadata"]
        assert "default/d1" not in handle.items
        assert (len(sharer), sharer.shared) == (held, shared)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _kubeconfig(directory: Path, server: str, user: dict[str, Any]) -> Path:
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kind",
        "clusters": [{"name": "kind", "cluster": {"server": server, "certificate-authority": "ca.crt"}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "admin"}}]}))
    return path


async def test_a_kubeconfig_with_a_client_certificate_as_kinds(cert_served: Serve, tmp_path: Path) -> None:
    """kind's and kubeadm's admin.conf: a client certificate (as -data, or files beside the
    kubeconfig), and a CA file named relative to the kubeconfig's directory, as client-go reads
    them: the components (controlplane scheduler, nodes, autoscaler) ran anonymous with one."""
    from tests.client_certs import issue_client_cert
    from tests.conftest import TEST_PKI

    cert, key = issue_client_cert(tmp_path, "kind-admin", ("system:masters",))
    shutil.copy(TEST_PKI / "ca.crt", tmp_path / "ca.crt")
    as_data = {"client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
               "client-key-data": base64.b64encode(key.read_bytes()).decode()}
    as_files = {"client-certificate": cert.name, "client-key": key.name}
    for user in (as_data, as_files):
        async with Client.from_kubeconfig(_kubeconfig(tmp_path, cert_served.url, user)) as c:
            review = await c.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            assert review["status"]["userInfo"]["username"] == "kind-admin"
            assert "system:masters" in review["status"]["userInfo"]["groups"]


@pytest.mark.parametrize(("content", "said"), [
    (None, "cannot read the kubeconfig"),
    ("clusters: [", "cannot read the kubeconfig"),
    ("- a list", "is not a kubeconfig"),
    ("current-context: nowhere\ncontexts: []\n", "no context named 'nowhere'"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
     "users: [{name: u, user: {exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}}]\n",
     "user 'u' authenticates with an exec plugin"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
     "users: [{name: u, user: {client-certificate: nope.crt, client-key: nope.key}}]\n", "nope.crt"),
])
def test_a_kubeconfig_it_cannot_use_is_a_kubeconfig_error_naming_it(tmp_path: Path, content: str | None,
                                                                      said: str) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeconfigError) as e:
        Client.from_kubeconfig(path)
    assert said in str(e.value)
    assert str(path) in str(e.value)
