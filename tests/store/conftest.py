"""Fixtures shared by the store tests: a store of each backend, fresh for each test.

The etcd backend runs against a real etcd (one per session, started on a free
loopback port). Tests that share it keep to their own key prefix, and read
revisions relative to where the store was when they began.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

import store
from tests.etcd_server import EtcdServer

BACKENDS = ["lmdb", "etcd"]


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    with EtcdServer() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: os.PathLike[str], request: pytest.FixtureRequest) -> str:
    if backend == "lmdb":
        return f"lmdb://{tmp_path}/store"
    server: EtcdServer = request.getfixturevalue("etcd_server")
    return server.url


@pytest.fixture
async def kv(store_url: str) -> AsyncIterator[store.Store]:
    s = store.open(store_url)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def prefix() -> bytes:
    """A key prefix no other test uses (the etcd server is shared)."""
    return f"/t/{uuid.uuid4().hex[:12]}/".encode()
