"""PodTopologySpread's scoring as upstream's: the system default constraints and their
selector (DefaultSelector), the counts the cache keeps per (namespace, selector), the
normalizing formula; and a Deployment's replicas spread over a real server's nodes."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from controlplane.client import Client
from controlplane.scheduler.cache import Cache
from controlplane.scheduler.columns import FeasibleNodes
from controlplane.scheduler.framework import ActionType, Code, CycleState, Status
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo
from controlplane.scheduler.plugins.defaultselector import DefaultSelectors
from controlplane.scheduler.plugins.noderesources import NodeResourcesFit
from controlplane.scheduler.plugins.podplacement import (
    HOSTNAME,
    SYSTEM_DEFAULT_CONSTRAINTS,
    PodTopologySpread,
    constraint_selector,
)
from controlplane.scheduler.podcounts import PodCounts, SelectorCount, selector_from_set, selector_of
from tests.test_cli import start_serve

from .fakes import FakeHandle
from .helpers import node, pod

ZONE = "topology.kubernetes.io/zone"
WEB = {"app": "web", "pod-template-hash": "abc"}


def owned(name: str, kind: str = "ReplicaSet", owner: str = "web-abc", api: str = "apps/v1",
          labels: dict[str, str] | None = None, namespace: str = "default", **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu=None, memory=None, labels=labels if labels is not None else dict(WEB), namespace=namespace, **kw)
    p["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": owner, "uid": f"uid-{owner}",
                                         "controller": True}]
    return p


def replicaset(name: str = "web-abc", selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector if selector is not None else {"matchLabels": dict(WEB)}}}


def service(name: str, selector: dict[str, str] | None, namespace: str = "default") -> dict[str, Any]:
    spec = {"selector": selector} if selector is not None else {}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


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


def scored(plugin: PodTopologySpread, p: PodInfo, nodes: list[NodeInfo]) -> list[int] | Status:
    st = CycleState()
    s = plugin.pre_score(st, p, nodes)
    if s is not None:
        return s
    scores = [plugin.score(st, p, n) for n in nodes]
    plugin.normalize_scores(st, p, scores)
    return scores


# --------------------------------------------------------------------------- DefaultSelector

def test_default_selector_merges_the_services_selecting_the_pod_and_its_controller() -> None:
    sel = DefaultSelectors()
    sel.set("services", service("web", {"app": "web"}))
    sel.set("services", service("all-web", {"pod-template-hash": "abc"}))
    sel.set("services", service("other", {"app": "db"}))  # does not select the pod
    sel.set("services", service("headless", None))  # no selector: selects nothing
    sel.set("services", service("elsewhere", {"app": "web"}, namespace="prod"))
    sel.set("replicasets", replicaset(selector={"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "DoesNotExist"}]}))
    p = PodInfo(owned("p"))
    assert sel.for_pod(p) == (("app", "In", ("web",)), ("pod-template-hash", "In", ("abc",)),
                              ("tier", "DoesNotExist", ()))
    sel.remove("replicasets", replicaset())
    assert sel.for_pod(p) == (("app", "In", ("web",)), ("pod-template-hash", "In", ("abc",)))
    sel.remove("services", service("web", None))
    sel.remove("services", service("all-web", None))
    assert sel.for_pod(p) is None  # nothing selects it: no default constraints


def test_default_selector_of_a_statefulset_and_a_replicationcontroller() -> None:
    sel = DefaultSelectors()
    sel.set("statefulsets", {"metadata": {"name": "db", "namespace": "default"},
                             "spec": {"selector": {"matchLabels": {"app": "db"}}}})
    sel.set("replicationcontrollers", {"metadata": {"name": "old", "namespace": "default"},
                                       "spec": {"selector": {"app": "old"}}})
    sts = PodInfo(owned("db-0", kind="StatefulSet", owner="db", labels={"app": "db"}))
    assert sel.for_pod(sts) == (("app", "In", ("db",)),)
    rc = PodInfo(owned("old-x", kind="ReplicationController", owner="old", api="v1", labels={"app": "old"}))
    assert sel.for_pod(rc) == (("app", "In", ("old",)),)
    # a Job's pods, an unknown ReplicaSet's, a pod without owner: no selector
    assert sel.for_pod(PodInfo(owned("j", kind="Job", owner="db", api="batch/v1"))) is None
    assert sel.for_pod(PodInfo(owned("r", owner="gone"))) is None
    assert sel.for_pod(PodInfo(pod("plain", labels={"app": "db"}))) is None


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


def test_the_caches_index_is_built_from_its_namespaces_pods_as_a_walk_would_count() -> None:
    """The cache keeps its pods by namespace, so an index's first build walks only the
    namespace's pods; what it counts must be what a walk over every node counts, through
    terminating pods, moves, removed nodes and pods bound before their node."""
    cache = cluster(node("n1", labels={ZONE: "a"}), node("n2", labels={ZONE: "b"}), node("n3", labels={ZONE: "a"}))
    web = selector_from_set({"app": "web"})

    def labelled(name: str, ns: str = "default", app: str = "web") -> dict[str, Any]:
        return pod(name, namespace=ns, labels={"app": app})

    for i, n in enumerate(("n1", "n1", "n2", "n3")):
        bound(cache, labelled(f"w{i}"), n)
    bound(cache, labelled("other-ns", ns="prod"), "n1")
    bound(cache, labelled("db", app="db"), "n2")
    bound(cache, labelled("leaving"), "n2")
    terminating = {**labelled("leaving"), "metadata": {**labelled("leaving")["metadata"],
                                                        "deletionTimestamp": "2026-12-04T00:00:00Z"}}
    bound(cache, terminating, "n2")  # now terminating: no longer counted
    bound(cache, labelled("moved"), "n1")
    cache.remove_pod("default/moved")
    bound(cache, labelled("early"), "n4")  # n4 is not known yet
    cache.remove_node("n3")  # w3 is no longer counted

    def walked() -> dict[str, int]:
        return PodCounts(cache.nodes).get("default", web).nodes  # untracked: a walk over every node

    assert cache.counts.get("default", web).nodes == walked() == {"n1": 2, "n2": 1}
    # the next index of the namespace is built from the pods as they are now
    cache.add_or_update_node(node("n4", labels={ZONE: "b"}))
    cache.add_or_update_node(node("n3", labels={ZONE: "a"}))
    anyapp = selector_of({"matchExpressions": [{"key": "app", "operator": "Exists"}]})
    assert anyapp is not None
    assert cache.counts.get("default", anyapp).nodes == PodCounts(cache.nodes).get("default", anyapp).nodes == {
        "n1": 2, "n2": 2, "n3": 1, "n4": 1}


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


# --------------------------------------------------------------------------- scoring

def _replicaset_setup() -> tuple[Cache, PodTopologySpread, list[NodeInfo]]:
    cache = cluster(node("n1"), node("n2"), node("n3"))
    sel = DefaultSelectors()
    sel.set("replicasets", replicaset())
    plugin = PodTopologySpread(lambda: cache.nodes, SYSTEM_DEFAULT_CONSTRAINTS, sel, system_defaulted=True)
    bound(cache, owned("w1"), "n1")
    bound(cache, owned("w2"), "n1")
    bound(cache, owned("w3"), "n2")
    return cache, plugin, [cache.nodes["n1"], cache.nodes["n2"], cache.nodes["n3"]]


def test_system_defaults_spread_a_replicasets_pods_by_hostname() -> None:
    cache, plugin, nodes = _replicaset_setup()
    # hostname, maxSkew 3, 3 nodes: count * ln(5) + 2 -> 5, 4, 2; no node has a zone label;
    # normalized 100 * (5 + 2 - s) / 5
    assert scored(plugin, PodInfo(owned("w4")), nodes) == [40, 60, 100]
    bound(cache, owned("w4"), "n3")
    bound(cache, owned("w5"), "n3")
    assert scored(plugin, PodInfo(owned("w6")), nodes) == [80, 100, 80]  # 2/1/2: 5, 4, 5


def test_no_default_constraints_for_a_pod_with_its_own_or_an_empty_selector() -> None:
    _, plugin, nodes = _replicaset_setup()
    hard = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}
    own = scored(plugin, PodInfo(owned("w4", topologySpreadConstraints=[hard])), nodes)
    assert isinstance(own, Status) and own.code == Code.SKIP  # its own constraints, none ScheduleAnyway
    stray = scored(plugin, PodInfo(owned("w4", owner="unknown")), nodes)
    assert isinstance(stray, Status) and stray.code == Code.SKIP
    plain = scored(plugin, PodInfo(pod("bench", labels={"app": "web"})), nodes)
    assert isinstance(plain, Status) and plain.code == Code.SKIP


def test_zone_and_hostname_weights_with_nodes_without_a_zone() -> None:
    cache = cluster(node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}),
                    node("bare"))
    sel = DefaultSelectors()
    sel.set("services", service("web", {"app": "web"}))
    plugin = PodTopologySpread(lambda: cache.nodes, SYSTEM_DEFAULT_CONSTRAINTS, sel, system_defaulted=True)
    bound(cache, pod("w1", labels={"app": "web"}), "a1")
    nodes = [cache.nodes[n] for n in ("a1", "a2", "b1", "bare")]
    # hostname (4 nodes, ln 6 = 1.79): 1, 0, 0, 0 -> +2; zone (a, b and "" : ln 5 = 1.61): a 1, b 0 -> +4
    # a1: 1.79 + 2 + 1.61 + 4 = 9.4 -> 9; a2: 2 + 5.61 -> 8; b1: 6; bare (no zone label): 2
    assert scored(plugin, PodInfo(pod("w2", labels={"app": "web"})), nodes) == [
        100 * (9 + 2 - 9) // 9, 100 * (9 + 2 - 8) // 9, 100 * (9 + 2 - 6) // 9, 100]


def test_schedule_anyway_scores_as_upstream() -> None:
    """The pod's own ScheduleAnyway constraint: weight ln(domains + 2), maxSkew - 1 added,
    normalized 100 * (max + min - s) / max; nodes without the key are ignored (0)."""
    h = FakeHandle([node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"}), node("nolabel")])
    h.bind_pod(pod("w1", labels={"app": "web"}), "a1")
    h.bind_pod(pod("w2", labels={"app": "web"}), "a1")
    h.bind_pod(pod("w3", labels={"app": "web"}), "b1")
    plugin = PodTopologySpread(h.nodes)
    c = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    nodes = [h.nodes()[n] for n in ("a1", "b1", "nolabel")]
    # zone a: 2 * ln 4 = 2.77 -> 3, zone b: 1.39 -> 1; 100 * (3 + 1 - s) / 3
    assert scored(plugin, PodInfo(pod("w4", labels={"app": "web"}, topologySpreadConstraints=[c])), nodes) == [
        33, 100, 0]


def test_normalize_as_upstream() -> None:
    plugin = PodTopologySpread(dict)
    st = CycleState()
    scores = [5, 10, -1, 7]
    plugin.normalize_scores(st, PodInfo(pod("p")), scores)
    assert scores == [100, 50, 0, 80]
    scores = [0, 0, -1]
    plugin.normalize_scores(st, PodInfo(pod("p")), scores)
    assert scores == [100, 100, 0]


# --------------------------------------------------------------------------- over a real socket

async def _deployment_spreads(kubeconfig: Path) -> Counter[str]:
    async with Client.from_kubeconfig(kubeconfig) as c:
        await c.create("/apis/apps/v1/namespaces/default/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}})
        deadline = time.monotonic() + 30
        while True:
            items = (await c.list("/api/v1/namespaces/default/pods"))["items"]
            where = [p["spec"].get("nodeName") for p in items]
            if len(where) == 6 and all(where):
                return Counter(str(w) for w in where)
            assert time.monotonic() < deadline, f"not all bound: {where}"
            await asyncio.sleep(0.1)


def test_a_deployments_request_less_replicas_spread_evenly(tmp_path: Path) -> None:
    """``serve --nodes 3`` and a Deployment of 6 replicas without requests: 2/2/2, as
    kube-scheduler places them (its ReplicaSet's selector, the default hostname constraint)."""
    s = start_serve(tmp_path, scheduler=True, extra=("--nodes", "3"))
    try:
        s.wait_ready()
        where = asyncio.run(_deployment_spreads(s.kubeconfig))
        assert sorted(where.values()) == [2, 2, 2], where
    finally:
        s.proc.kill()
        s.proc.wait()


def test_batch_scores_are_the_per_node_scores() -> None:
    """``score_all`` (the one call per plugin a cycle makes) gives each node's ``score``:
    PodTopologySpread's unrolled hostname-and-zone sums, NodeResourcesFit's columns."""
    cache = cluster(*(node(f"n{i}", cpu="4", labels={ZONE: f"z{i % 3}"} if i % 5 else {}) for i in range(300)))
    sel = DefaultSelectors()
    sel.set("replicasets", replicaset())
    spread = PodTopologySpread(lambda: cache.nodes, SYSTEM_DEFAULT_CONSTRAINTS, sel, system_defaulted=True)
    for i in range(200):
        bound(cache, owned(f"w{i}") if i % 2 else pod(f"o{i}", cpu="250m"), f"n{(i * 7) % 150}")
    rows = np.arange(0, 300, 2, dtype=np.int64)
    feasible = FeasibleNodes(cache.order, rows, True)
    p = PodInfo(owned("new"))
    st = CycleState()
    assert spread.pre_score(st, p, feasible) is None
    soft, _ = st.read("PodTopologySpread/soft")
    unrolled = spread.score_all(st, p, feasible)
    st.write("PodTopologySpread/soft", (soft, {"none-such"}))  # an ignored node: the generic loop
    assert unrolled == spread.score_all(st, p, feasible) and len(set(unrolled)) > 2
    fit = NodeResourcesFit()
    assert fit.score_all(st, p, feasible) == [fit.score(st, p, n) for n in feasible]


def test_a_pod_is_tested_only_against_the_indexes_its_labels_could_match() -> None:
    cache = cluster(node("n1"))
    tested: list[str] = []

    def spy(c: SelectorCount, app: str) -> None:
        inner = c.match

        def match(labels: Mapping[str, str]) -> bool:
            tested.append(app)
            return inner(labels)

        c.match = match

    for app in ("web", "db"):
        spy(cache.counts.get("default", selector_from_set({"app": app, "pod-template-hash": app[0]})), app)
    anything = cache.counts.get("default", ())  # no equality: every pod of the namespace is tested
    bound(cache, pod("w", labels={"app": "web", "pod-template-hash": "w"}), "n1")
    assert tested == ["web"]
    assert anything.nodes == {"n1": 1}


def test_an_empty_label_selector_counts_no_pod_as_upstream() -> None:
    """``labelSelector: {}`` matches every pod, but upstream's ``countPodsMatchSelector`` returns 0
    for an empty selector: the existing pods count nothing (the pod itself still self-matches in
    Filter), so such a constraint neither filters nor ranks nodes."""
    h = FakeHandle([node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})])
    for i in range(3):
        h.bind_pod(pod(f"w{i}", labels={"app": "web"}), "a1")
    plugin = PodTopologySpread(h.nodes)
    nodes = [h.nodes()[n] for n in ("a1", "b1")]
    soft = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
    assert scored(plugin, PodInfo(pod("w9", labels={"app": "web"}, topologySpreadConstraints=[soft])), nodes) == [
        100, 100]
    hard = {**soft, "whenUnsatisfiable": "DoNotSchedule"}
    p = PodInfo(pod("w9", labels={"app": "web"}, topologySpreadConstraints=[hard]))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    assert [plugin.filter(st, p, n) for n in nodes] == [None, None]


def test_list_default_constraints_that_are_do_not_schedule_filter() -> None:
    """``defaultingType: List`` with a DoNotSchedule default constraint: upstream's PreFilter
    builds the default constraints for DoNotSchedule as its PreScore does for ScheduleAnyway,
    so a pod without constraints of its own is filtered by them (with its default selector)."""
    cache = cluster(node("n1"), node("n2"))
    sel = DefaultSelectors()
    sel.set("replicasets", replicaset())
    hard = {"topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 1}
    plugin = PodTopologySpread(lambda: cache.nodes, [hard], sel)
    bound(cache, owned("w1"), "n1")
    p = PodInfo(owned("w2"))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    verdicts = [plugin.filter(st, p, cache.nodes[n]) for n in ("n1", "n2")]
    assert verdicts[1] is None
    assert verdicts[0] is not None and verdicts[0].code == Code.UNSCHEDULABLE  # 1 + 1 - 0 > 1
    # a pod no Service or controller selects: no default constraints
    skipped = plugin.pre_filter(CycleState(), PodInfo(owned("x", owner="unknown")))
    assert skipped is not None and skipped.code == Code.SKIP


# --------------------------------------------------------------------------- matchLabelKeys

def hard_spread(key: str, selector: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    c = {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def verdicts(plugin: PodTopologySpread, p: PodInfo, cache: Cache, names: list[str]) -> list[Code | None]:
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    out = []
    for n in names:
        s = plugin.filter(st, p, cache.nodes[n])
        out.append(None if s is None else s.code)
    return out


def test_match_label_keys_count_only_the_pods_of_the_same_revision() -> None:
    """A pod stored before the API server merged ``matchLabelKeys`` (or by a server that does
    not): PodTopologySpread merges them itself, as upstream's ``filterTopologySpreadConstraints``,
    so the new revision's pods are not held back by the old one's; a merged selector and an
    unmerged one with its keys are the same selector (the same index of the cache)."""
    cache = cluster(node("n1"), node("n2"))
    for i in range(2):
        bound(cache, pod(f"old{i}", labels={"app": "web", "pod-template-hash": "a"}), "n1")
    plugin = PodTopologySpread(lambda: cache.nodes)
    web = {"matchLabels": {"app": "web"}}
    new = {"app": "web", "pod-template-hash": "b"}
    without = PodInfo(pod("new0", labels=new, topologySpreadConstraints=[hard_spread(HOSTNAME, web)]))
    assert verdicts(plugin, without, cache, ["n1", "n2"]) == [Code.UNSCHEDULABLE, None]
    keyed = hard_spread(HOSTNAME, web, matchLabelKeys=["pod-template-hash"])
    assert verdicts(plugin, PodInfo(pod("new1", labels=new, topologySpreadConstraints=[keyed])), cache,
                    ["n1", "n2"]) == [None, None]
    merged = {**keyed, "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "pod-template-hash", "operator": "In", "values": ["b"]}]}}
    assert constraint_selector(merged, new) == constraint_selector(keyed, new) == (
        ("app", "In", ("web",)), ("pod-template-hash", "In", ("b",)))
    # a key the pod lacks adds nothing; no labelSelector stays no selector (it counts nothing)
    assert constraint_selector({**keyed, "matchLabelKeys": ["absent"]}, new) == (("app", "In", ("web",)),)
    assert constraint_selector({"matchLabelKeys": ["app"]}, new) is None
    # an empty selector with a key: a selector, which counts the pods of the revision
    assert constraint_selector({"labelSelector": {}, "matchLabelKeys": ["pod-template-hash"]}, new) == (
        ("pod-template-hash", "In", ("b",)),)
    # the old revision's next pod counts its own: n1 holds 2 of them
    old = PodInfo(pod("old2", labels={"app": "web", "pod-template-hash": "a"}, topologySpreadConstraints=[keyed]))
    assert verdicts(plugin, old, cache, ["n1", "n2"]) == [Code.UNSCHEDULABLE, None]


# --------------------------------------------------------------------------- node inclusion policies

def test_node_affinity_policy_decides_whether_nodes_the_pod_cannot_use_count() -> None:
    """Zones a and b have an ssd node with one matching pod each, zone c only an hdd node; the
    pod wants ssd. Honor (the default): zone c is no domain, the minimum is 1, a1 may take a
    second pod. Ignore: zone c counts, at 0, so a1 and b1 would be 2 over it."""
    cache = cluster(node("a1", labels={ZONE: "a", "disk": "ssd"}), node("b1", labels={ZONE: "b", "disk": "ssd"}),
                    node("c1", labels={ZONE: "c", "disk": "hdd"}))
    for n in ("a1", "b1"):
        bound(cache, pod(f"w-{n}", labels={"app": "web"}), n)
    plugin = PodTopologySpread(lambda: cache.nodes)
    web = {"matchLabels": {"app": "web"}}

    def incoming(**policy: str) -> PodInfo:
        return PodInfo(pod("w", labels={"app": "web"}, nodeSelector={"disk": "ssd"},
                           topologySpreadConstraints=[hard_spread(ZONE, web, **policy)]))

    assert verdicts(plugin, incoming(), cache, ["a1", "b1"]) == [None, None]
    assert verdicts(plugin, incoming(nodeAffinityPolicy="Honor"), cache, ["a1", "b1"]) == [None, None]
    assert verdicts(plugin, incoming(nodeAffinityPolicy="Ignore"), cache, ["a1", "b1"]) == [
        Code.UNSCHEDULABLE, Code.UNSCHEDULABLE]


def test_node_taints_policy_decides_whether_tainted_nodes_count() -> None:
    """Zone c's only node is tainted. Ignore (the default): zone c counts, at 0, so a1 and b1
    (one matching pod each) are over it. Honor: a node whose taint the pod does not tolerate
    is no domain; tolerated, it is one again."""
    taint = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    cache = cluster(node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}),
                    node("c1", labels={ZONE: "c"}, taints=taint))
    for n in ("a1", "b1"):
        bound(cache, pod(f"w-{n}", labels={"app": "web"}), n)
    plugin = PodTopologySpread(lambda: cache.nodes)
    web = {"matchLabels": {"app": "web"}}

    def incoming(tolerations: list[dict[str, Any]] | None = None, **policy: str) -> PodInfo:
        return PodInfo(pod("w", labels={"app": "web"}, tolerations=tolerations or [],
                           topologySpreadConstraints=[hard_spread(ZONE, web, **policy)]))

    blocked = [Code.UNSCHEDULABLE, Code.UNSCHEDULABLE]
    assert verdicts(plugin, incoming(), cache, ["a1", "b1"]) == blocked
    assert verdicts(plugin, incoming(nodeTaintsPolicy="Ignore"), cache, ["a1", "b1"]) == blocked
    assert verdicts(plugin, incoming(nodeTaintsPolicy="Honor"), cache, ["a1", "b1"]) == [None, None]
    tolerant = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    assert verdicts(plugin, incoming(tolerant, nodeTaintsPolicy="Honor"), cache, ["a1", "b1"]) == blocked
    # PreferNoSchedule is no taint to these policies
    soft = cluster(node("a1", labels={ZONE: "a"}), node("c1", labels={ZONE: "c"}, taints=[
        {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"}]))
    bound(soft, pod("w-a1", labels={"app": "web"}), "a1")
    plugin = PodTopologySpread(lambda: soft.nodes)
    # (c1 still counts, at 0: 1 + 1 - 0 > 1)
    assert verdicts(plugin, incoming(nodeTaintsPolicy="Honor"), soft, ["a1"]) == [Code.UNSCHEDULABLE]
    assert plugin.events_to_register()[1].actions & ActionType.UPDATE_NODE_TAINT


def test_node_inclusion_policies_decide_the_scoring_counts_too() -> None:
    """ScheduleAnyway: the pods on nodes a constraint's policies leave out are not counted in
    their zone (upstream's PreScore walks every node through ``matchNodeInclusionPolicies``)."""
    taint = [{"key": "dedicated", "value": "batch", "effect": "NoExecute"}]
    cache = cluster(node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}, taints=taint),
                    node("b1", labels={ZONE: "b"}))
    for i in range(3):
        bound(cache, pod(f"t{i}", labels={"app": "web"}), "a2")
    bound(cache, pod("b", labels={"app": "web"}), "b1")
    plugin = PodTopologySpread(lambda: cache.nodes)
    feasible = [cache.nodes["a1"], cache.nodes["b1"]]  # a2: filtered out by TaintToleration
    soft = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}}

    def score(**policy: str) -> list[int] | Status:
        return scored(plugin, PodInfo(pod("w", labels={"app": "web"}, topologySpreadConstraints=[
            {**soft, **policy}])), feasible)

    assert score() == [25, 100]  # zone a: 3 * ln 4 -> 4, zone b: 1 -> 1; 100 * (4 + 1 - s) / 4
    assert score(nodeTaintsPolicy="Honor") == [100, 0]  # zone a: 0, zone b: 1
    # nodeAffinityPolicy: b2 (hdd) holds two pods of zone b the ssd pod cannot go to
    cache = cluster(node("a1", labels={ZONE: "a", "disk": "ssd"}), node("b1", labels={ZONE: "b", "disk": "ssd"}),
                    node("b2", labels={ZONE: "b", "disk": "hdd"}))
    for i in range(2):
        bound(cache, pod(f"h{i}", labels={"app": "web"}), "b2")
    plugin = PodTopologySpread(lambda: cache.nodes)
    feasible = [cache.nodes["a1"], cache.nodes["b1"]]

    def restricted(**policy: str) -> list[int] | Status:
        return scored(plugin, PodInfo(pod("w", labels={"app": "web"}, nodeSelector={"disk": "ssd"},
                                          topologySpreadConstraints=[{**soft, **policy}])), feasible)

    assert restricted() == [100, 100]  # Honor: b2 left out, no zone holds a pod
    assert restricted(nodeAffinityPolicy="Ignore") == [100, 0]  # zone b: 2 * ln 4 -> 3


ROLLING = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.27"}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
         labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [pod-template-hash]}
"""


def _live_pods(s: Any) -> list[dict[str, Any]]:
    import json

    from tests.e2e.test_kubectl import kubectl

    deadline = time.monotonic() + 30
    while True:  # a replaced revision's pods may linger, terminating
        pods = [p for p in json.loads(kubectl(s, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
                if not p["metadata"].get("deletionTimestamp")]
        if len(pods) == 3 or time.monotonic() > deadline:
            return pods
        time.sleep(0.2)


def _check_merged(pods: list[dict[str, Any]]) -> str:
    """Every pod's selector holds its own revision's hash; that hash (all the same); 1/1/1."""
    hashes = {str(p["metadata"]["labels"]["pod-template-hash"]) for p in pods}
    assert len(pods) == 3 and len(hashes) == 1, [p["metadata"]["name"] for p in pods]
    for p in pods:
        (c,) = p["spec"]["topologySpreadConstraints"]
        assert c["matchLabelKeys"] == ["pod-template-hash"]
        assert c["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "pod-template-hash", "operator": "In", "values": [p["metadata"]["labels"]["pod-template-hash"]]}]}
    assert sorted(Counter(p["spec"]["nodeName"] for p in pods).values()) == [1, 1, 1]
    return hashes.pop()


def test_a_deployment_rolls_out_with_match_label_keys_merged_into_its_pods(tmp_path: Path) -> None:
    """kubectl applies a Deployment whose spread constraint has ``matchLabelKeys:
    [pod-template-hash]`` and rolls it out to a second revision: every pod the ReplicaSets
    create is stored with its own revision's hash merged into the selector (the template
    keeps its own), and each revision's pods spread one a node."""
    import json

    from tests.e2e.test_kubectl import kubectl

    s = start_serve(tmp_path, scheduler=True, extra=("--nodes", "3"))
    try:
        s.wait_ready()
        kubectl(s, "apply", "-f", "-", stdin=ROLLING)
        kubectl(s, "rollout", "status", "deployment/web", "--timeout=60s")
        first = _check_merged(_live_pods(s))
        kubectl(s, "set", "env", "deployment/web", "REVISION=2")
        kubectl(s, "rollout", "status", "deployment/web", "--timeout=60s")
        assert _check_merged(_live_pods(s)) != first
        template = json.loads(kubectl(s, "get", "deployment", "web", "-o", "json"))["spec"]["template"]["spec"]
        assert template["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {"app": "web"}}
    finally:
        s.proc.kill()
        s.proc.wait()
