"""A large list is sent in chunks (no content-length) and is the same JSON; a small one in one body;
both end with a newline, as upstream's JSON serializer ends them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

import store
from controlplane.api import rest
from controlplane.api.rest import KubeApi
from controlplane.registry import Registry

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[KubeApi, store.Store]]:
    st = store.open(f"lmdb://{tmp_path}/store")
    try:
        yield KubeApi(Registry(), lambda: st, "127.0.0.1:1"), st
    finally:
        await st.close()


async def test_large_lists_are_streamed_in_chunks(api: tuple[KubeApi, store.Store]) -> None:
    kube, st = api
    cms = Registry().get("", "v1", "configmaps")
    assert cms is not None
    n = rest.LIST_CHUNK * 2 + 7
    for i in range(n):
        await st.create(cms.key("big", f"c{i:05d}"), orjson.dumps({"metadata": {"name": f"c{i:05d}",
                                                                                 "namespace": "big"}}))
    await st.create(cms.key("small", "one"), orjson.dumps({"metadata": {"name": "one", "namespace": "small"}}))
    transport = httpx.ASGITransport(app=kube)  # type: ignore[arg-type]  # KubeApi types scope as dict
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        big = await c.get("/api/v1/namespaces/big/configmaps")
        small = await c.get("/api/v1/namespaces/small/configmaps")
    assert big.status_code == 200 and "content-length" not in big.headers
    listed = orjson.loads(big.content)
    assert listed["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in listed["items"]] == [f"c{i:05d}" for i in range(n)]
    assert small.headers["content-length"] == str(len(small.content))
    assert [i["metadata"]["name"] for i in orjson.loads(small.content)["items"]] == ["one"]
    assert big.content.endswith(b"]}\n") and small.content.endswith(b"]}\n")
