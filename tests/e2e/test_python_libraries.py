"""Third-party Python clients' own requests (kr8s, lightkube, kopf, kubernetes_asyncio),
reproduced byte for byte with httpx over a real socket: these libraries are not the
project's dependencies, so each test sends what the library sends (its method, path, query,
headers and body, read from its source) and checks what it relies on in the answer."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve


@pytest.fixture(scope="module")
def http(served: Serve) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as c:
        c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "libs"}})
        yield c


def test_kr8s_gets_an_object_by_name_with_a_trailing_comma_in_its_field_selector(http: httpx.Client) -> None:
    """kr8s's ``api.get(kind, name)`` (and so ``Pod.get(name)``) lists with the field selector
    ``metadata.name=<name>,`` (its extra selector joined after a comma, empty by default);
    upstream's parseSelector skips the empty term."""
    http.post("/api/v1/namespaces/libs/configmaps", json={"metadata": {"name": "wanted"}}).raise_for_status()
    http.post("/api/v1/namespaces/libs/configmaps", json={"metadata": {"name": "other"}}).raise_for_status()
    r = http.get("/api/v1/namespaces/libs/configmaps",
                 params={"limit": "100", "fieldSelector": "metadata.name=wanted,"})
    assert r.status_code == 200, r.text
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["wanted"]
    r = http.get("/api/v1/configmaps", params={"fieldSelector": "metadata.name=wanted,metadata.namespace=libs,"})
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["wanted"]
