"""The counts of matching pods the cache keeps per (namespace, selector), for PodTopologySpread."""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.cache import Cache
from controlplane.scheduler.nodeinfo import PodInfo
from controlplane.scheduler.podcounts import PodCounts, selector_from_set

from .helpers import node, pod

ZONE = "topology.kubernetes.io/zone"
WEB = {"app": "web", "pod-template-hash": "abc"}


def owned(name: str, kind: str = "ReplicaSet", owner: str = "web-abc", api: str = "apps/v1",
          labels: dict[str, str] | None = None, namespace: str = "default", **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu=None, memory=None, labels=labels if labels is not None else dict(WEB), namespace=namespace, **kw)
    p["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": owner, "uid": f"uid-{owner}",
                                         "controller": True}]
    return p


def bound(cache: Cache, obj: dict[str, Any], node_name: str) -> PodInfo:
    obj = {**obj, "spec": {**obj["spec"], "nodeName": node_name}}
    p = PodInfo(obj)
    p.keep_only_identity()
    cache.add_pod(p)
    return p


def cluster(*nodes: dict[str, Any]) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.add_or_update_node(n)
    return cache


# --------------------------------------------------------------------------- the cache's counts

def test_counts_follow_pods_added_deleted_terminating_and_assumed() -> None:
    cache = cluster(node("n1", labels={ZONE: "a"}), node("n2", labels={ZONE: "a"}), node("n3", labels={ZONE: "b"}))
    bound(cache, owned("before"), "n1")  # bound before the index is built: found by its first walk
    web = cache.counts.get("default", selector_from_set({"app": "web"}))
    assert web.nodes == {"n1": 1}
    assert cache.counts.domains(web, ZONE) == {"a": 1}
    bound(cache, owned("p2"), "n2")
    bound(cache, owned("p3"), "n3")
    bound(cache, owned("other-ns", namespace="prod"), "n3")  # another namespace: not counted
    bound(cache, pod("db", labels={"app": "db"}), "n3")  # not matching
    assert web.nodes == {"n1": 1, "n2": 1, "n3": 1}
    assert cache.counts.domains(web, ZONE) == {"a": 2, "b": 1}
    gone = owned("p3")
    gone["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    bound(cache, gone, "n3")  # terminating: no longer counted (as upstream's countPodsMatchSelector)
    assert web.nodes == {"n1": 1, "n2": 1}
    assert cache.counts.domains(web, ZONE) == {"a": 2}
    cache.remove_pod("default/p2")
    assert web.nodes == {"n1": 1} and web.domains[ZONE] == {"a": 1}
    p = PodInfo(owned("assumed"))
    cache.assume(p, "n2")
    assert web.nodes == {"n1": 1, "n2": 1}
    cache.forget(p)
    assert web.nodes == {"n1": 1}
    relabel = PodInfo({**owned("before"), "spec": {"nodeName": "n1"}})
    relabel.labels = {"app": "api"}
    cache.add_pod(relabel)  # its labels changed: it leaves the index
    assert web.nodes == {} and web.domains[ZONE] == {}


def test_counts_follow_nodes_removed_relabeled_and_arriving_after_their_pods() -> None:
    cache = cluster(node("n1", labels={ZONE: "a"}), node("n2", labels={ZONE: "b"}))
    web = cache.counts.get("default", selector_from_set({"app": "web"}))
    bound(cache, owned("p1"), "n1")
    bound(cache, owned("p2"), "n2")
    bound(cache, owned("early"), "n3")  # n3 is not known yet
    assert cache.counts.domains(web, ZONE) == {"a": 1, "b": 1}
    cache.add_or_update_node(node("n2", labels={ZONE: "a"}))
    assert web.domains[ZONE] == {"a": 2}
    cache.add_or_update_node(node("n3", labels={ZONE: "c"}))
    assert web.nodes == {"n1": 1, "n2": 1, "n3": 1} and web.domains[ZONE] == {"a": 2, "c": 1}
    cache.remove_node("n1")
    assert web.nodes == {"n2": 1, "n3": 1} and web.domains[ZONE] == {"a": 1, "c": 1}


def test_an_index_unused_for_its_ttl_is_dropped() -> None:
    now = [0.0]
    counts = PodCounts({}, ttl=60.0, clock=lambda: now[0])
    web, db = selector_from_set({"app": "web"}), selector_from_set({"app": "db"})
    first = counts.get("default", web)
    counts.get("default", db)
    now[0] = 50.0
    assert counts.get("default", web) is first
    now[0] = 100.0  # db unused for 100 s, web for 50 s
    counts.get("prod", web)
    assert {(c.namespace, c.selector) for c in counts.indexes()} == {("default", web), ("prod", web)}
