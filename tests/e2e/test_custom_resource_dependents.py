"""The garbage collector's part for custom resources as owners (api/dependents.py): an
operator's children (kopf's ``kopf.adopt``) go when their custom resource goes, over a
real socket, with the requests kopf sends (its JSON patch that drops its finalizer)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import running, start_serve

CRS = "/apis/kopf.dev/v1/namespaces/gc/ephemeralvolumeclaims"
CMS = "/api/v1/namespaces/gc/configmaps"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    # the collectors run with the controllers, which run with the scheduler
    with running(start_serve(tmp_path_factory.mktemp("gc"), scheduler=True)) as served, \
            httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as c:
        c.post("/api/v1/namespaces", json={"metadata": {"name": "gc"}}).raise_for_status()
        c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json={
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ephemeralvolumeclaims.kopf.dev"},
            "spec": {"group": "kopf.dev", "scope": "Namespaced",
                     "names": {"plural": "ephemeralvolumeclaims", "singular": "ephemeralvolumeclaim",
                               "kind": "EphemeralVolumeClaim"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]},
        }).raise_for_status()
        yield c


def _owner(http: httpx.Client, name: str, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    r = http.post(CRS, json={"apiVersion": "kopf.dev/v1", "kind": "EphemeralVolumeClaim",
                             "metadata": {"name": name, "finalizers": list(finalizers)}, "spec": {"size": "1G"}})
    r.raise_for_status()
    created: dict[str, Any] = r.json()
    return created


def _ref(owner: dict[str, Any]) -> dict[str, Any]:
    """As kopf.adopt writes it."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _child(http: httpx.Client, name: str, *owners: dict[str, Any]) -> None:
    http.post(CMS, json={"metadata": {"name": name, "ownerReferences": list(owners)}}).raise_for_status()


def _gone(http: httpx.Client, path: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http.get(path).status_code == 404:
            return True
        time.sleep(0.05)
    return False


def test_deleting_a_custom_resource_deletes_the_objects_it_alone_owns(http: httpx.Client) -> None:
    owner, other = _owner(http, "owner"), _owner(http, "other")
    _child(http, "child", _ref(owner))
    # another owner still exists: upstream keeps it too (one controller reference at most)
    _child(http, "shared", _ref(owner), _ref(other) | {"controller": False})
    _child(http, "unrelated", _ref(other))
    http.delete(f"{CRS}/owner").raise_for_status()
    assert _gone(http, f"{CMS}/child")
    assert http.get(f"{CMS}/shared").status_code == 200
    assert http.get(f"{CMS}/unrelated").status_code == 200


def test_an_owner_held_by_its_operators_finalizer_takes_its_children_when_the_operator_lets_it_go(
        http: httpx.Client) -> None:
    owner = _owner(http, "held", finalizers=("kopf.dev/test-finalizer",))
    _child(http, "held-child", _ref(owner))
    marked = http.delete(f"{CRS}/held").json()
    assert marked["metadata"]["deletionTimestamp"]
    time.sleep(0.3)
    assert http.get(f"{CMS}/held-child").status_code == 200  # the owner is still there
    # kopf's own request once its deletion handlers are done
    r = http.patch(f"{CRS}/held", headers={"content-type": "application/json-patch+json"}, json=[
        {"op": "test", "path": "/metadata/resourceVersion", "value": marked["metadata"]["resourceVersion"]},
        {"op": "remove", "path": "/metadata/finalizers"}])
    assert r.status_code == 200, r.text
    assert _gone(http, f"{CRS}/held")
    assert _gone(http, f"{CMS}/held-child")


def test_dependents_that_are_custom_resources_take_theirs_along(http: httpx.Client) -> None:
    top = _owner(http, "top")
    r = http.post(CRS, json={"apiVersion": "kopf.dev/v1", "kind": "EphemeralVolumeClaim",
                             "metadata": {"name": "middle", "ownerReferences": [_ref(top)]}})
    r.raise_for_status()
    _child(http, "bottom", _ref(r.json()))
    http.delete(f"{CRS}/top").raise_for_status()
    assert _gone(http, f"{CRS}/middle")
    assert _gone(http, f"{CMS}/bottom")


def test_an_orphan_delete_leaves_the_dependents_without_their_reference(http: httpx.Client) -> None:
    owner = _owner(http, "orphaning")
    _child(http, "orphan", _ref(owner))
    marked = http.request("DELETE", f"{CRS}/orphaning", json={"propagationPolicy": "Orphan"})
    marked.raise_for_status()
    assert "orphan" in marked.json()["metadata"]["finalizers"]  # as upstream's BeforeDelete gives it
    assert _gone(http, f"{CRS}/orphaning")
    left = http.get(f"{CMS}/orphan")
    assert left.status_code == 200
    assert "ownerReferences" not in left.json()["metadata"]


def test_deleting_a_definition_collects_the_dependents_of_all_its_resources(http: httpx.Client) -> None:
    """Its resources go with it; the owners gone meanwhile are taken in a pass or two."""
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    http.post(crd, json={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    }).raise_for_status()
    widgets = [http.post("/apis/example.com/v1/namespaces/gc/widgets", json={
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": f"w{i}"}}).json() for i in range(12)]
    for i, widget in enumerate(widgets):
        _child(http, f"widget-child-{i}", _ref(widget))
    _child(http, "two-widgets", _ref(widgets[0]), _ref(widgets[1]) | {"controller": False})  # both go
    http.delete(f"{crd}/widgets.example.com").raise_for_status()
    assert _gone(http, f"{crd}/widgets.example.com")
    for i in range(12):
        assert _gone(http, f"{CMS}/widget-child-{i}")
    assert _gone(http, f"{CMS}/two-widgets")
