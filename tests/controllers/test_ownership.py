"""Owner references (controllers/ownership.py): filing dependents by their controller, parking
those of owners not seen yet, releasing orphans; and a dangling reference left alone."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.client import ApiError, Client
from controlplane.controllers.ownership import EXPECTATIONS_TIMEOUT, UNCLAIMED_SECONDS, Dependents, Expectations


def pod(name: str, owner: str | None, controller: bool = True) -> dict[str, Any]:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": controller}]
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         **({"ownerReferences": refs} if owner else {})}}


def test_dependents_of_known_owners_are_filed_and_others_parked_until_claimed() -> None:
    known: set[str] = {"a"}
    now = [0.0]
    deps = Dependents("ReplicaSet", known.__contains__, clock=lambda: now[0])
    assert deps.file(pod("p1", "a")) == "a"
    assert deps.file(pod("p2", "b")) is None  # b not seen: parked, not filed
    assert deps.file(pod("bare", None)) is None
    assert deps.file(pod("other", "a", controller=False)) is None  # not its controller
    assert set(deps.of("a")) == {"ns/p1"} and deps.of("b") == {}
    known.add("b")
    deps.claim("b")  # b's informer event came after its pod's
    assert set(deps.of("b")) == {"ns/p2"}
    # a pod named with an owner never seen is forgotten after a while
    deps.file(pod("p3", "c"))
    now[0] += UNCLAIMED_SECONDS + 1
    deps.file(pod("p4", "d"))  # (parking prunes what waited too long)
    known.add("c")
    deps.claim("c")
    assert deps.of("c") == {}


def test_an_orphaned_dependent_is_released_and_a_deleted_owners_stay_filed() -> None:
    known = {"a"}
    deps = Dependents("ReplicaSet", known.__contains__)
    deps.file(pod("p1", "a"))
    deps.file(pod("p2", "a"))
    deps.file(pod("p1", None))  # its reference removed (the owner deleted with Orphan)
    assert set(deps.released) == {"ns/p1"} and set(deps.of("a")) == {"ns/p2"}
    known.discard("a")  # the owner deleted: its pods stay filed until collected
    assert deps.file(pod("p2", "a")) == "a" and set(deps.of("a")) == {"ns/p2"}
    assert deps.unfile(pod("p2", "a")) == "a" and deps.of("a") == {}
    assert deps.unfile(pod("p1", None)) is None and not deps.released


async def test_a_pod_naming_an_owner_that_never_existed_is_collected(client: Client) -> None:
    """The ReplicaSet controller never saw its owner and leaves it; the API server's collector
    looks the owner up and deletes it (as upstream's collector: a dangling reference)."""
    c = client
    bare = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "synthetic", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "controller": True,
                 "uid": "00000000-0000-0000-0000-000000000001"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    await c.create("/api/v1/namespaces/default/pods", bare)
    for _ in range(200):
        try:
            await c.get("/api/v1/namespaces/default/pods/synthetic")
        except ApiError as e:
            if e.code == 404:
                break
            raise
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the pod of a ReplicaSet that never existed is still there")


def test_expectations_hold_an_owner_until_its_writes_are_seen_or_too_old() -> None:
    now = [0.0]
    ex = Expectations(clock=lambda: now[0])
    assert not ex.waiting("rs")
    ex.expect("rs", "+p1")
    ex.expect("rs", "-p2")
    assert ex.waiting("rs")
    ex.observe("rs", pod("p1", "rs"))  # the create is seen
    assert ex.waiting("rs")
    ex.observe("rs", {"metadata": {"name": "p2", "deletionTimestamp": "2026-12-01T00:00:00Z"}})  # terminating
    assert not ex.waiting("rs")
    ex.expect("rs", "+p3")
    ex.observe_gone("rs", pod("p3", "rs"))  # created and gone before its add was seen
    assert not ex.waiting("rs")
    ex.expect("rs", "token")
    now[0] += EXPECTATIONS_TIMEOUT + 1  # a lost event does not hold the owner for ever
    assert not ex.waiting("rs") and not ex.waiting("rs")
