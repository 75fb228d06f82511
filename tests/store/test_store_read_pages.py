"""Pages of a paginated list that the store serves rather than a watch cache (an ``Exact`` list
at a revision the cache does not keep; a continue token whose snapshot is gone, as after a
restart) carry ``metadata.remainingItemCount`` as upstream's etcd3 store sets it: the objects
after the page at the page's revision, when no selector filters the list; none on the last
page. Over a real socket, on LMDB and on a real etcd."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.api.app import create_app
from controlplane.api.http1 import ServerProtocol
from controlplane.config import Config
from controlplane.metrics import REGISTRY
from tests.front_socket import serving

pytestmark = pytest.mark.asyncio


def store_reads(reason: str = "past-revision") -> float:
    """The configmaps lists the watch cache has handed to the store so far, for ``reason``."""
    return REGISTRY.get_sample_value("controlplane_watch_cache_fallbacks_total",
                                     {"resource": "configmaps", "reason": reason}) or 0.0


@contextlib.asynccontextmanager
async def server(tmp_path: Path, store_url: str, mode: str) -> AsyncIterator[httpx.AsyncClient]:
    """An API server on ``store_url`` (its watch cache's snapshots as ``mode`` says), over a socket."""
    app = create_app(Config(data_dir=tmp_path / "data", store=store_url, tls=False, scheduler=False,
                            watch_cache_snapshot=mode))  # type: ignore[arg-type]
    async with app.router.lifespan_context(app), serving(app.state.front, http=ServerProtocol) as port, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=15) as c:
        yield c


async def seed(c: httpx.AsyncClient, n: int) -> str:
    """A new namespace (the etcd server is shared) holding configmaps c00..c<n-1>; its path."""
    ns = f"pages-{uuid.uuid4().hex[:8]}"
    assert (await c.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(n):
        r = await c.post(path, json={"metadata": {"name": f"c{i:02d}", "labels": {"all": "yes"}}})
        assert r.status_code == 201, r.text
    return path


async def churn(c: httpx.AsyncClient, path: str) -> None:
    """Changes after the list's revision, which its pages must not show (nor count)."""
    assert (await c.delete(f"{path}/c03")).status_code == 200
    assert (await c.delete(f"{path}/c17")).status_code == 200
    assert (await c.post(path, json={"metadata": {"name": "c05x"}})).status_code == 201
    assert (await c.post(path, json={"metadata": {"name": "c99"}})).status_code == 201


async def pages(c: httpx.AsyncClient, path: str, first: dict[str, Any],
                **params: str) -> list[dict[str, Any]]:
    """``first`` and the pages after it, each one its continue token asks for."""
    out = [first]
    while out[-1]["metadata"].get("continue"):
        r = await c.get(path, params={**params, "limit": "5", "continue": out[-1]["metadata"]["continue"]})
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


def check_counts(listed: list[dict[str, Any]], total: int, rv: str) -> None:
    seen = 0
    for page in listed:
        meta = page["metadata"]
        assert meta["resourceVersion"] == rv
        seen += len(page["items"])
        if "continue" in meta:
            assert meta["remainingItemCount"] == total - seen, (seen, meta)
        else:
            assert "remainingItemCount" not in meta  # the last page: upstream leaves it unset
    assert seen == total
    assert [i["metadata"]["name"] for p in listed for i in p["items"]] == [f"c{i:02d}" for i in range(total)]


async def test_exact_list_pages_read_from_the_store_count_what_remains(tmp_path: Path, store_url: str) -> None:
    """Copy mode keeps no snapshot of a past revision: an ``Exact`` list there, and its
    continue pages, are the store's."""
    async with server(tmp_path, store_url, "copy") as c:
        path = await seed(c, 23)
        rv = (await c.get(path)).json()["metadata"]["resourceVersion"]
        await churn(c, path)
        before = store_reads()
        params = {"resourceVersion": rv, "resourceVersionMatch": "Exact"}
        r = await c.get(path, params={**params, "limit": "5"})
        assert r.status_code == 200, r.text
        listed = await pages(c, path, r.json())
        assert len(listed) == 5 and store_reads() - before == 5  # every page from the store
        check_counts(listed, 23, rv)
        # a selector's count would include what it filters out: upstream sets none
        # (the URL's namespace said again as a field selector too: the predicate is not Empty())
        for selector in ({"labelSelector": "all=yes"}, {"fieldSelector": "metadata.name!=zz"},
                         {"fieldSelector": f"metadata.namespace={path.split('/')[4]}"}):
            r = await c.get(path, params={**params, **selector, "limit": "5"})
            filtered = await pages(c, path, r.json(), **selector)
            assert len(filtered) == 5 and all("remainingItemCount" not in p["metadata"] for p in filtered)
        # a page of 23 at once (no continue) has none either
        whole = (await c.get(path, params={**params, "limit": "23"})).json()["metadata"]
        assert "continue" not in whole and "remainingItemCount" not in whole


async def test_continue_pages_whose_snapshot_is_gone_count_what_remains(tmp_path: Path, store_url: str) -> None:
    """The first page from a lazy cache's snapshot, the rest after a restart (no snapshot of
    that revision any more) from the store: the counts agree across the two."""
    async with server(tmp_path, store_url, "lazy") as c:
        path = await seed(c, 23)
        first = (await c.get(path, params={"limit": "5"})).json()
        rv = first["metadata"]["resourceVersion"]
        assert first["metadata"]["remainingItemCount"] == 18  # (from the cache's snapshot)
    async with server(tmp_path, store_url, "lazy") as c:
        await churn(c, path)
        before = store_reads()
        listed = await pages(c, path, first)
        assert len(listed) == 5 and store_reads() - before == 4
        check_counts(listed, 23, rv)


async def test_cache_pages_selecting_the_urls_namespace_count_nothing(tmp_path: Path, store_url: str) -> None:
    """A page the watch cache serves: counted without a selector, but not with a field
    selector that names the URL's namespace (upstream's predicate is not ``Empty()`` then)."""
    async with server(tmp_path, store_url, "lazy") as c:
        path = await seed(c, 12)
        before = store_reads()
        plain = (await c.get(path, params={"limit": "5"})).json()["metadata"]
        assert plain["remainingItemCount"] == 7
        selector = {"fieldSelector": f"metadata.namespace={path.split('/')[4]}"}
        r = await c.get(path, params={**selector, "limit": "5"})
        assert r.status_code == 200, r.text
        listed = await pages(c, path, r.json(), **selector)
        assert store_reads() == before  # every page from the cache
        assert [len(p["items"]) for p in listed] == [5, 5, 2]
        assert all("remainingItemCount" not in p["metadata"] for p in listed)
