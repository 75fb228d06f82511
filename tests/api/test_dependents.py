"""The garbage collector's index of where owners of each kind have dependents (api/dependents.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

import store
from controlplane.api.dependents import GarbageCollector, OwnerIndex
from controlplane.registry import Registry, ResourceType

REGISTRY = Registry()


def _type(plural: str, group: str = "") -> ResourceType:
    return next(t for t in REGISTRY.all() if t.plural == plural and t.group == group)


def test_places_are_the_dependents_namespaces_and_resources_by_owner_kind() -> None:
    index = OwnerIndex()
    configmaps, secrets, leases = _type("configmaps"), _type("secrets"), _type("leases", "coordination.k8s.io")
    index.note(configmaps, "a", [{"apiVersion": "v1", "kind": "Service", "name": "s", "uid": "1"}])
    index.note(secrets, "b", [{"apiVersion": "v1", "kind": "Service", "name": "s", "uid": "2"}])
    index.note(leases, "kube-node-lease", [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "3"}])
    assert index.places("", "Service", "a") == [("a", "", "configmaps")]  # a namespaced owner: its namespace
    assert index.places("", "Node", None) == [("kube-node-lease", "coordination.k8s.io", "leases")]
    assert index.names("", "Service") and not index.names("", "ConfigMap")
    assert index.places("", "ConfigMap", "a") == []


def test_the_pairs_controllers_collect_are_not_looked_for() -> None:
    index = OwnerIndex()
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": True}
    index.note(_type("pods"), "a", [ref])
    index.note(_type("configmaps"), "a", [ref])
    assert index.places("apps", "ReplicaSet", "a") == [("a", "", "configmaps")]
    index.note(_type("persistentvolumeclaims"), "a", [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "2"}])
    # (the persistent volume controller's)
    assert index.names("", "Pod") and index.places("", "Pod", "a") == []


def _collector(seen: list[int]) -> tuple[GarbageCollector, list[str | None]]:
    """A collector following a feed at ``seen[0]``; the namespaces it starts passes for (its
    look-ups of owners are not run: ``_unverified`` holds what they would look up)."""
    passes: list[str | None] = []

    def spawn(coro: Any) -> None:  # (the collector's work, started as the collector)
        work = coro.cr_frame.f_locals["work"]
        if work.cr_code.co_name != "_looking_up":
            passes.append(work.cr_frame.f_locals.get("namespace", "seed"))
        work.close()
        coro.close()

    async def unused(*_: Any) -> None:
        raise AssertionError("no pass runs here")

    gc = GarbageCollector(REGISTRY, lambda: None, unused, unused, spawn, frozenset())  # type: ignore[arg-type, return-value]
    gc.follow(lambda: seen[0])
    assert passes == ["seed"]
    passes.clear()
    gc.seeded.set()
    return gc, passes


def _put(key: bytes, obj: dict[str, Any], revision: int) -> store.Event:
    return store.Event(store.EventType.PUT, store.KeyValue(key, orjson.dumps(obj), revision, revision, 1))


ROLE_REF = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "r", "uid": "u1"}


def test_the_feed_notes_the_owner_references_of_every_write() -> None:
    """Another process's writes come by the store's events: noted, values without references
    not parsed, deletes (empty values) passed over; a bulk request's run of rewrites (renewals)
    not read: its objects' references are their earlier versions'."""
    gc, passes = _collector([0])
    gc.observe([_put(b"/registry/secrets/a/s", {"metadata": {"name": "s", "namespace": "a",
                                                              "ownerReferences": [ROLE_REF]}}, 5),
                _put(b"/registry/configmaps/a/plain", {"metadata": {"name": "plain"}}, 6),
                store.Event(store.EventType.DELETE, store.KeyValue(b"/registry/secrets/a/t", b"", 0, 7, 0))])
    assert gc.index.places("rbac.authorization.k8s.io", "ClusterRole", None) == [("a", "", "secrets")]
    node_ref = {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u2"}
    lease = orjson.dumps({"metadata": {"name": "n", "namespace": "kube-node-lease", "ownerReferences": [node_ref]}})
    gc.observe(store.EventRun(8, [b"/registry/leases/kube-node-lease/n"], [lease], [(8, 7, 2)]))
    assert not gc.index.names("", "Node")
    gc.observe([_put(b"/registry/leases/kube-node-lease/n", orjson.loads(lease), 7)])  # (its create)
    assert gc.index.places("", "Node", None) == [("kube-node-lease", "coordination.k8s.io", "leases")]
    gc.observe([_put(b"/registry/deployments/a/d", {"metadata": {"ownerReferences": [
        {"apiVersion": "example.com/v1", "kind": "App", "name": "x", "uid": "u3"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "uid": "u4"}]}}, 9)])
    assert gc.index.places("example.com", "App", "a") == [("a", "apps", "deployments")]
    assert gc.index.places("", "ConfigMap", "a") == [("a", "apps", "deployments")]
    assert passes == []
    # (their owners are looked up by the process each went through: ``noted``, not here)
    assert not gc._created and not gc._unverified


def test_an_owner_deleted_before_the_feed_brought_its_dependent_is_looked_for_again() -> None:
    """The owner's delete (revision 10) reached this process before the event of a dependent
    written through another (revision 8): that event starts the pass. One written after the
    delete (revision 12) does not, nor does an owner the feed had seen past."""
    seen = [7]
    gc, passes = _collector(seen)
    gc.gone(_type("clusterroles", "rbac.authorization.k8s.io"), {"metadata": {"name": "r", "uid": "u1"}}, 10)
    assert passes == []  # (nothing named a ClusterRole yet)
    gc.observe([_put(b"/registry/configmaps/late/c", {"metadata": {"ownerReferences": [ROLE_REF]}}, 12)])
    assert passes == []
    gc.observe([_put(b"/registry/secrets/b/s", {"metadata": {"ownerReferences": [ROLE_REF]}}, 8)])
    assert passes == ["b"]
    seen[0] = 10  # the feed went past the delete: it is let go at the next one
    gc.gone(_type("configmaps"), {"metadata": {"name": "x", "namespace": "a", "uid": "u3"}}, 11)
    gc.observe([_put(b"/registry/secrets/c/s", {"metadata": {"ownerReferences": [ROLE_REF]}}, 9)])
    assert passes == ["b"]


def test_a_write_s_new_owners_are_looked_up_by_the_process_it_went_through() -> None:
    """A create names all its owners anew, an update those not in the version it replaced (as
    upstream's ``referencesDiffs``); a write that keeps them (a pod's status) or cannot change
    them (``before`` None) looks nothing up, nor does one naming an owner lately found there.
    The pairs the workload controllers collect are looked up too: a pod naming a ReplicaSet
    that never existed is collected here."""
    gc, passes = _collector([0])
    pods, configmaps = _type("pods"), _type("configmaps")
    rs_ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u5", "controller": True}
    gc.noted(pods, "a", [rs_ref], 3, ())
    assert set(gc._unverified) == {("a", "apps/v1", "ReplicaSet", "rs", "u5")}
    gc._unverified.clear()
    gc.noted(pods, "a", [rs_ref], 4, [dict(rs_ref)])  # (a status update: the same references)
    gc.noted(pods, "a", [rs_ref], 5, None)  # (a binding)
    assert not gc._unverified
    gc.noted(configmaps, "a", [ROLE_REF, rs_ref], 6, [rs_ref])  # (an update naming another owner)
    assert set(gc._unverified) == {("a", "rbac.authorization.k8s.io/v1", "ClusterRole", "r", "u1")}
    gc._unverified.clear()
    rs_key = _type("replicasets", "apps").key("a", "rs")
    gc._owner_keys[rs_key] = ""  # (being looked up...
    gc._keep(rs_key, "u5")  # ... and found there)
    gc.noted(pods, "a", [rs_ref], 7, ())
    assert not gc._unverified
    # its delete, whichever process made it, is seen: looked up again
    gc.observe([store.Event(store.EventType.DELETE, store.KeyValue(rs_key, b"", 0, 8, 0))])
    gc.noted(pods, "a", [rs_ref], 9, ())
    assert set(gc._unverified) == {("a", "apps/v1", "ReplicaSet", "rs", "u5")}
    assert passes == []


async def test_a_feed_restart_scans_the_store_and_collects_what_names_an_absent_owner(tmp_path: Any) -> None:
    """Writes the feed never handed over (it restarted): ``restarted`` scans the store, notes
    them and looks their owners up in the store. The dependent of an owner that is not there
    is deleted (with its uid as a precondition), and so is the pod of a ReplicaSet that does
    not exist (its controller never saw it); the one whose owner is there is not. Restarts in
    a row make one scan."""
    st = store.open(f"lmdb://{tmp_path}/store")
    deleted: list[tuple[str, str | None, str, dict[str, Any]]] = []
    tasks: list[asyncio.Task[None]] = []

    async def delete(rtype: ResourceType, namespace: str | None, name: str, options: dict[str, Any]) -> None:
        deleted.append((rtype.plural, namespace, name, options))

    async def patch(*_: Any) -> None:
        raise AssertionError("nothing to patch here")

    def spawn(work: Any) -> None:
        tasks.append(asyncio.ensure_future(work))

    async def settle() -> None:
        while not all(t.done() for t in tasks):
            await asyncio.gather(*tasks)

    try:
        gc = GarbageCollector(REGISTRY, lambda: st, delete, patch, spawn, frozenset())
        gc.follow(lambda: 0)
        await settle()
        assert gc.seeded.is_set()
        configmaps, pods = _type("configmaps"), _type("pods")
        await st.create(_type("namespaces").key(None, "a"), orjson.dumps({"metadata": {"name": "a"}}))
        owner = {"metadata": {"name": "owner", "namespace": "a", "uid": "live-uid"}}
        await st.create(configmaps.key("a", "owner"), orjson.dumps(owner))
        for name, refs in (("orphaned", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "gone-uid"}]),
                           ("owned", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "live-uid"}])):
            await st.create(configmaps.key("a", name), orjson.dumps(
                {"metadata": {"name": name, "namespace": "a", "uid": f"{name}-uid", "ownerReferences": refs}}))
        await st.create(pods.key("a", "p"), orjson.dumps({"metadata": {"name": "p", "namespace": "a", "uid": "p-uid",
                                                                        "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]}}))
        started = len(tasks)
        gc.restarted()
        gc.restarted()  # (restarts before its scan started share it)
        assert len(tasks) == started + 1
        await settle()
        def background(uid: str) -> dict[str, Any]:
            return {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        assert sorted(deleted) == [("configmaps", "a", "orphaned", background("orphaned-uid")),
                                   ("pods", "a", "p", background("p-uid"))]
    finally:
        await st.close()


async def test_a_worker_forked_with_the_first_leaves_the_scans_look_ups_to_it(tmp_path: Any) -> None:
    """``serve --workers``: every process's scan at start notes the owner references stored,
    but only the first looks their owners up (and resumes the propagation finalizers): the
    others, forked with it, would repeat its work."""
    st = store.open(f"lmdb://{tmp_path}/store")
    deleted: list[str] = []
    tasks: list[asyncio.Task[None]] = []

    async def delete(rtype: ResourceType, namespace: str | None, name: str, options: dict[str, Any]) -> None:
        deleted.append(name)

    async def patch(*_: Any) -> None:
        raise AssertionError("nothing to patch here")

    def spawn(work: Any) -> None:
        tasks.append(asyncio.ensure_future(work))

    try:
        configmaps = _type("configmaps")
        await st.create(_type("namespaces").key(None, "a"), orjson.dumps({"metadata": {"name": "a"}}))
        await st.create(configmaps.key("a", "orphaned"), orjson.dumps({"metadata": {
            "name": "orphaned", "namespace": "a", "uid": "orphaned-uid",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "gone-uid"}]}}))
        for first in (False, True):
            gc = GarbageCollector(REGISTRY, lambda: st, delete, patch, spawn, frozenset())
            gc.first = first
            gc.follow(lambda: 0)
            while not all(t.done() for t in tasks):
                await asyncio.gather(*tasks)
            assert gc.index.places("", "ConfigMap", "a") == [("a", "", "configmaps")]
            assert deleted == (["orphaned"] if first else [])
    finally:
        await st.close()
