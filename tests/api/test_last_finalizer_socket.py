"""A write that removes a deleting object's last finalizer deletes it; over a real socket, its
answer is upstream's (``Store.deleteWithoutFinalizers`` returns the update's object): the
written object at the revision it was written over, with no empty ``finalizers``; the
deletion's revision is the DELETED event's, whose object is the last stored, finalizer and
all. Operators (kopf) read the answer to know which version of the object to wait for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.front_socket import front_on_socket

CMS = "/api/v1/namespaces/default/configmaps"
HOLD = "example.com/hold"

WRITES: list[tuple[str, Any]] = [
    ("application/json-patch+json", [{"op": "remove", "path": "/metadata/finalizers"}]),
    ("application/merge-patch+json", {"metadata": {"finalizers": None}}),
    ("application/merge-patch+json", {"metadata": {"finalizers": []}}),
    ("application/strategic-merge-patch+json", {"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD]}}),
    ("PUT", None),
]


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        yield c


async def _first_event(http: httpx.AsyncClient, name: str, after: str) -> dict[str, Any]:
    url = f"{CMS}?watch=1&resourceVersion={after}&fieldSelector=metadata.name%3D{name}"
    async with http.stream("GET", url) as r:
        async for line in r.aiter_lines():
            if line.strip():
                event: dict[str, Any] = json.loads(line)
                return event
    raise AssertionError("the watch ended without an event")


@pytest.mark.parametrize(("how", "body"), WRITES, ids=["json", "merge-null", "merge-empty", "strategic", "put"])
async def test_the_last_finalizers_removal_answers_the_object_as_written_over(
        http: httpx.AsyncClient, how: str, body: Any) -> None:
    r = await http.post(CMS, json={"metadata": {"name": "held", "finalizers": [HOLD]}, "data": {"k": "v"}})
    assert r.status_code == 201, r.text
    r = await http.delete(f"{CMS}/held")
    assert r.status_code == 200, r.text
    held = r.json()
    last = held["metadata"]["resourceVersion"]
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [HOLD]

    if how == "PUT":
        held["metadata"]["finalizers"] = []
        r = await http.put(f"{CMS}/held", json=held)
    else:
        r = await http.patch(f"{CMS}/held", content=json.dumps(body), headers={"Content-Type": how})
    assert r.status_code == 200, r.text
    meta = r.json()["metadata"]
    assert "finalizers" not in meta, meta
    assert meta["resourceVersion"] == last and meta["deletionTimestamp"] and r.json()["data"] == {"k": "v"}
    assert (await http.get(f"{CMS}/held")).status_code == 404

    event = await asyncio.wait_for(_first_event(http, "held", last), 10)
    gone = event["object"]["metadata"]
    assert event["type"] == "DELETED"
    assert int(gone["resourceVersion"]) > int(last) and gone["finalizers"] == [HOLD]


POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The server over its socket, with a ValidatingAdmissionPolicy that refuses an update of
    the ConfigMap ``guarded`` leaving it no finalizer (and lets any other update through)."""
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        r = await c.post(POLICIES, json={"metadata": {"name": "keep-held"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["UPDATE"], "resources": ["configmaps"],
                                                    "resourceNames": ["guarded"]}]},
            "validations": [{"expression": "has(object.metadata.finalizers) && "
                                           "size(object.metadata.finalizers) > 0",
                             "message": "guarded keeps its finalizer"}]}})
        assert r.status_code == 201, r.text
        r = await c.post(BINDINGS, json={"metadata": {"name": "keep-held"}, "spec": {
            "policyName": "keep-held", "validationActions": ["Deny"]}})
        assert r.status_code == 201, r.text
        while not (await c.get(f"{BINDINGS}?resourceVersion=0")).json()["items"]:
            await asyncio.sleep(0.01)  # admission reads the watch cache
        yield c


async def _held(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    """A ConfigMap ``name`` held by a finalizer and deleted: the object as marked."""
    r = await http.post(CMS, json={"metadata": {"name": name, "finalizers": [HOLD]}, "data": {"k": "v"}})
    assert r.status_code == 201, r.text
    r = await http.delete(f"{CMS}/{name}")
    assert r.status_code == 200, r.text
    held: dict[str, Any] = r.json()
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [HOLD]
    return held


@pytest.mark.parametrize(("how", "body"), [WRITES[0], WRITES[1], WRITES[4]], ids=["json", "merge", "put"])
async def test_validating_admission_that_refuses_the_removal_keeps_the_object(
        guarded: httpx.AsyncClient, how: str, body: Any) -> None:
    """Upstream's Store.Update admits the update (its validating admission included) before it
    asks whether the update empties a deleting object's finalizers: refused, nothing is deleted."""
    held = await _held(guarded, "guarded")
    if how == "PUT":
        held["metadata"]["finalizers"] = []
        r = await guarded.put(f"{CMS}/guarded", json=held)
    else:
        r = await guarded.patch(f"{CMS}/guarded", content=json.dumps(body), headers={"Content-Type": how})
    assert r.status_code == 422, r.text
    assert r.json()["reason"] == "Invalid" and "guarded keeps its finalizer" in r.json()["message"]
    r = await guarded.get(f"{CMS}/guarded")
    assert r.status_code == 200, r.text
    kept = r.json()["metadata"]
    assert kept["finalizers"] == [HOLD] and kept["resourceVersion"] == held["metadata"]["resourceVersion"]

    # the same removal, on an object the policy does not guard, deletes it as before
    other = await _held(guarded, "other")
    last = other["metadata"]["resourceVersion"]
    if how == "PUT":
        other["metadata"]["finalizers"] = []
        r = await guarded.put(f"{CMS}/other", json=other)
    else:
        r = await guarded.patch(f"{CMS}/other", content=json.dumps(body), headers={"Content-Type": how})
    assert r.status_code == 200, r.text
    meta = r.json()["metadata"]
    assert "finalizers" not in meta and meta["resourceVersion"] == last and meta["deletionTimestamp"]
    assert (await guarded.get(f"{CMS}/other")).status_code == 404
