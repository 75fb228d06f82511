"""The ASGI app in process, over a fake store: lifespan, health semantics, version, metrics."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

import store
from controlplane.api.app import StoreProbe, create_app
from controlplane.config import Config
from controlplane.metrics import REGISTRY


class FakeStore:
    """Just enough store for the app's lifespan: the system namespaces, the revision."""

    def __init__(self) -> None:
        self.closed = False
        self.created: list[bytes] = []
        self.failure: Exception | None = None  # what revision() raises, when set
        self.answering = asyncio.Event()  # revision() waits for it
        self.answering.set()

    async def create(self, key: bytes, value: bytes) -> int:
        self.created.append(key)
        return len(self.created) + 1

    async def revision(self) -> int:
        await self.answering.wait()
        if self.failure is not None:
            raise self.failure
        return len(self.created) + 1

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[store.KeyValue], int, bool]:
        return [], len(self.created) + 1, False  # no CustomResourceDefinitions

    async def watch(self, start: bytes, end: bytes, start_revision: int = 0,
                    prev_kv: bool = False) -> AsyncIterator[list[store.Event]]:
        await asyncio.Event().wait()  # nothing ever changes
        yield []

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, FakeStore]]:
    calls: list[tuple[str, FakeStore]] = []

    def fake_open(url: str) -> FakeStore:
        s = FakeStore()
        calls.append((url, s))
        return s

    monkeypatch.setattr(store, "open", fake_open)
    return calls


@pytest.fixture
def app(opened: list[tuple[str, FakeStore]]) -> FastAPI:
    return create_app(Config(store="lmdb:///nowhere"))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app.state.front), base_url="http://cp") as c:
        yield c


async def test_not_ready_until_the_store_is_open(app: FastAPI, client: httpx.AsyncClient,
                                                 opened: list[tuple[str, FakeStore]]) -> None:
    r = await client.get("/readyz")
    assert r.status_code == 500
    assert "[-]etcd failed: reason withheld" in r.text
    assert r.text.endswith("readyz check failed\n")
    assert (await client.get("/livez")).status_code == 500  # as upstream's, etcd is a liveness check too
    r = await client.get("/livez/etcd")
    assert (r.status_code, r.text) == (500, "internal server error: etcd client connection not yet established\n")

    async with app.router.lifespan_context(app):
        assert [url for url, _ in opened] == ["lmdb:///nowhere"]
        await _until_ready(client)  # the watch caches load in the background
        assert (await client.get("/healthz")).text == "ok"
        assert (await client.get("/readyz/etcd")).text == "ok"
    assert opened[0][1].closed


async def _until_ready(client: httpx.AsyncClient) -> None:
    for _ in range(200):
        if (await client.get("/readyz")).text == "ok":
            return
        await asyncio.sleep(0.01)
    pytest.fail((await client.get("/readyz?verbose")).text)


async def test_readyz_waits_for_the_watch_caches(app: FastAPI, client: httpx.AsyncClient) -> None:
    async with app.router.lifespan_context(app):
        pods = next(c for c in app.state.server.caches.caches() if c.plural == "pods")
        await pods.ready.wait()
        pods.ready.clear()  # as while a large resource loads
        r = await client.get("/readyz?verbose")
        assert r.status_code == 500 and "[-]informer-sync failed: reason withheld" in r.text
        pods.ready.set()
        await _until_ready(client)


async def test_shutdown_makes_readyz_fail_first(app: FastAPI, client: httpx.AsyncClient) -> None:
    async with app.router.lifespan_context(app):
        await _until_ready(client)
        app.state.server.shutting_down = True
        r = await client.get("/readyz?verbose")
        assert r.status_code == 500
        lines = r.text.splitlines()
        assert lines[:5] == ["[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]etcd-readiness ok", "[+]informer-sync ok"]
        assert lines[-2:] == ["[-]shutdown failed: reason withheld", "readyz check failed"]
        assert all(line.startswith("[+]poststarthook/") and line.endswith(" ok") for line in lines[5:-2])
        assert (await client.get("/readyz?exclude=shutdown")).text == "ok"
        assert (await client.get("/readyz/shutdown")).status_code == 500
        assert (await client.get("/healthz")).text == "ok"


async def test_the_etcd_check_reads_the_store(app: FastAPI, client: httpx.AsyncClient,
                                              opened: list[tuple[str, FakeStore]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StoreProbe, "TIMEOUT", 0.1)  # a read every 0.05 s at most

    async def after_the_last_read(path: str) -> httpx.Response:
        await asyncio.sleep(0.06)
        return await client.get(path)

    async with app.router.lifespan_context(app):
        await _until_ready(client)
        fake = opened[0][1]
        fake.failure = store.Unavailable("the disk is gone")
        r = await after_the_last_read("/readyz/etcd")
        assert (r.status_code, r.text) == (500, "internal server error: Unavailable: the disk is gone\n")
        r = await client.get("/livez?verbose")
        assert r.status_code == 500 and "[-]etcd failed: reason withheld" in r.text.splitlines()
        assert r.text.endswith("livez check failed\n")
        fake.failure = None
        fake.answering.clear()  # a store that does not answer at all
        r = await after_the_last_read("/healthz/etcd")
        assert (r.status_code, r.text) == (500, "internal server error: context deadline exceeded\n")
        fake.answering.set()
        r = await after_the_last_read("/readyz")
        assert (r.status_code, r.text) == (200, "ok")


async def test_a_store_that_fails_to_open_fails_startup(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(url: str) -> FakeStore:
        raise store.Unavailable("no quorum")

    monkeypatch.setattr(store, "open", broken)
    app = create_app(Config())
    with pytest.raises(store.Unavailable):
        async with app.router.lifespan_context(app):
            pytest.fail("startup should have failed")
    assert all(t.done() for t in app.state.server._tasks)


async def test_event_loop_lag_is_measured(app: FastAPI) -> None:
    before = REGISTRY.get_sample_value("controlplane_event_loop_lag_seconds_count") or 0.0
    async with app.router.lifespan_context(app):
        # the monitor ticks every 100 ms on an idle loop: three samples come within 0.3 s, and
        # are waited for up to 5 s on a loaded one (its ticks then come late, which is the point)
        deadline = asyncio.get_running_loop().time() + 5.0
        while (REGISTRY.get_sample_value("controlplane_event_loop_lag_seconds_count") or 0.0) - before < 3 \
                and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
    after = REGISTRY.get_sample_value("controlplane_event_loop_lag_seconds_count") or 0.0
    assert after - before >= 3


async def test_collections_are_timed_once_the_server_has_started(app: FastAPI) -> None:
    """Every collection's pause, by generation, in controlplane_gc_pause_seconds."""
    def count() -> float:
        return REGISTRY.get_sample_value("controlplane_gc_pause_seconds_count", {"generation": "1"}) or 0.0

    async with app.router.lifespan_context(app):
        before = count()
        gc.collect(1)
        gc.collect(1)
        assert count() - before == 2


async def test_version_and_metrics(client: httpx.AsyncClient) -> None:
    v = (await client.get("/version")).json()
    assert v["gitVersion"] == "v1.37.0-controlplane"
    r = await client.get("/metrics")
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE controlplane_request_duration_seconds histogram" in r.text


async def test_fastapi_extras_are_not_served(client: httpx.AsyncClient) -> None:
    for path in ("/docs", "/redoc", "/openapi.json", "/openapi/v2/foo", "/foo"):
        r = await client.get(path)
        assert r.status_code == 404, path
        assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "the server could not find the requested resource", "reason": "NotFound",
                            "details": {}, "code": 404}
    r = await client.post("/version")
    assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed"


async def test_a_trailing_slash_is_what_upstreams_muxes_make_of_it(client: httpx.AsyncClient) -> None:
    """No redirect: /version/ is /version (go-restful trims it), /healthz/ and /metrics/ are
    404 (the exact paths of upstream's non-go-restful mux)."""
    r = await client.get("/version/")
    assert r.status_code == 200 and r.json()["gitVersion"] == "v1.37.0-controlplane"
    for path in ("/healthz/", "/livez/", "/readyz/", "/metrics/", "/healthz/ping/"):
        r = await client.get(path)
        assert (r.status_code, r.json()["reason"]) == (404, "NotFound"), path


async def test_the_root_lists_the_paths(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/")).json()["paths"]
    assert {"/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/healthz", "/version"} <= set(paths)


async def test_openapi_v3_is_routed(client: httpx.AsyncClient) -> None:
    index = (await client.get("/openapi/v3")).json()["paths"]
    assert "api/v1" in index
    doc = await client.get(index["api/v1"]["serverRelativeURL"])
    assert doc.status_code == 200 and "io.k8s.api.core.v1.Pod" in doc.json()["components"]["schemas"]


async def test_openapi_v2_is_routed(client: httpx.AsyncClient) -> None:
    doc = await client.get("/openapi/v2")
    assert doc.status_code == 200 and "io.k8s.api.core.v1.Pod" in doc.json()["definitions"]
    assert "/openapi/v2" in (await client.get("/")).json()["paths"]
