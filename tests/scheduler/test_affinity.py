"""InterPodAffinity's scoring and NodeResourcesBalancedAllocation, as upstream's, and the
cache's index of the nodes holding pods with (anti-)affinity terms."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client
from controlplane.scheduler.cache import Cache
from controlplane.scheduler.framework import Code, CycleState
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo
from controlplane.scheduler.plugins.noderesources import NodeResourcesBalancedAllocation, balanced_score
from controlplane.scheduler.plugins.podplacement import HOSTNAME, InterPodAffinity
from tests.test_cli import start_serve

from .fakes import FakeHandle, build
from .helpers import node, pod

WEB = {"matchLabels": {"app": "web"}}


def _preferred(kind: str, weight: int, key: str = HOSTNAME, selector: Any = WEB, **term: Any) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": {"labelSelector": selector, "topologyKey": key, **term}}]}}


def _required(kind: str, key: str = HOSTNAME, selector: Any = WEB) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": key}]}}


def _scores(plugin: InterPodAffinity, p: PodInfo, nodes: list[NodeInfo]) -> tuple[list[int], list[int]] | None:
    """(raw, normalized) scores, or None when PreScore skips."""
    st = CycleState()
    s = plugin.pre_score(st, p, nodes)
    if s is not None:
        assert s.code == Code.SKIP
        return None
    raw = plugin.score_all(st, p, nodes)
    assert raw == [plugin.score(st, p, n) for n in nodes]
    normalized = list(raw)
    plugin.normalize_scores(st, p, normalized)
    return raw, normalized


def _zones() -> FakeHandle:
    return FakeHandle([node("a1", labels={"zone": "z1"}), node("a2", labels={"zone": "z1"}),
                       node("b1", labels={"zone": "z2"}), node("c1", labels={"zone": "z3"})])


# --------------------------------------------------------------------------- InterPodAffinity: scoring

def test_preferred_anti_affinity_on_hostname_spreads_replicas() -> None:
    """A Helm chart's usual term: replicas of app=web prefer hosts without one."""
    h = _zones()
    h.bind_pod(pod("w0", labels={"app": "web"}), "a1")
    plugin = InterPodAffinity(h.nodes)
    nodes = list(h.nodes().values())
    p = PodInfo(pod("w1", labels={"app": "web"}, affinity=_preferred("podAntiAffinity", 100)))
    assert _scores(plugin, p, nodes) == ([-100, 0, 0, 0], [0, 100, 100, 100])


def test_preferred_terms_sum_over_domains_with_their_weights() -> None:
    h = _zones()
    h.bind_pod(pod("db", labels={"app": "db"}), "a1")
    h.bind_pod(pod("cache", labels={"app": "cache"}), "b1")
    h.bind_pod(pod("cache2", labels={"app": "cache"}), "b1")
    plugin = InterPodAffinity(h.nodes)
    nodes = list(h.nodes().values())
    affinity = _preferred("podAffinity", 30, "zone", {"matchLabels": {"app": "db"}})
    affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append(
        {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}})
    affinity.update(_preferred("podAntiAffinity", 7, HOSTNAME, {"matchLabels": {"app": "db"}}))
    p = PodInfo(pod("api", affinity=affinity))
    raw, normalized = _scores(plugin, p, nodes) or ([], [])
    # a1: zone z1 +30, host a1 -7; a2: zone z1 +30; b1: zone z2 +5 +5 (two caches); c1: nothing
    assert raw == [23, 30, 10, 0]
    assert normalized == [76, 100, 33, 0]  # 100 * (s - 0) / 30, truncated


def test_existing_pods_terms_that_match_the_incoming_pod_count() -> None:
    """An existing pod's required podAffinity adds hardPodAffinityWeight to its domain; its
    preferred affinity adds its weight, its preferred anti-affinity takes it away."""
    h = _zones()
    h.bind_pod(pod("needs-web", affinity=_required("podAffinity", "zone")), "a1")
    h.bind_pod(pod("likes-web", affinity=_preferred("podAffinity", 4, "zone")), "b1")
    h.bind_pod(pod("hates-web", affinity=_preferred("podAntiAffinity", 9)), "c1")
    nodes = list(h.nodes().values())
    web = PodInfo(pod("w", labels={"app": "web"}))
    assert _scores(InterPodAffinity(h.nodes), web, nodes) == ([1, 1, 4, -9], [76, 76, 100, 0])
    assert _scores(InterPodAffinity(h.nodes, hard_weight=8), web, nodes) == ([8, 8, 4, -9], [100, 100, 76, 0])
    assert _scores(InterPodAffinity(h.nodes, hard_weight=0), web, nodes) == ([0, 0, 4, -9], [69, 69, 100, 0])
    # upstream's ignorePreferredTermsOfExistingPods: a pod without terms of its own is not scored
    assert _scores(InterPodAffinity(h.nodes, ignore_existing_preferred=True), web, nodes) is None
    # nothing matches the incoming pod: SKIP, as upstream's PreScore with an empty topologyScore
    assert _scores(InterPodAffinity(h.nodes), PodInfo(pod("other", labels={"app": "other"})), nodes) is None


def test_no_terms_anywhere_skips_without_a_walk() -> None:
    h = _zones()
    for i in range(4):
        h.bind_pod(pod(f"p{i}", labels={"app": "web"}), "a1")
    plugin = InterPodAffinity(h.nodes)
    assert _scores(plugin, PodInfo(pod("bare", labels={"app": "web"})), list(h.nodes().values())) is None


def test_namespaces_and_namespace_selector() -> None:
    """A term matches pods of the namespaces it names, else of its pod's own; with a
    ``namespaceSelector``, of the namespaces whose labels it selects (``{}``: all)."""
    h = _zones()
    h.bind_pod(pod("w-prod", namespace="prod", labels={"app": "web"}), "a1")
    h.bind_pod(pod("w-dev", namespace="dev", labels={"app": "web"}), "b1")
    h.bind_pod(pod("w-here", labels={"app": "web"}), "c1")
    namespaces = {"prod": {"metadata": {"name": "prod", "labels": {"env": "prod"}}},
                  "dev": {"metadata": {"name": "dev", "labels": {"env": "dev"}}},
                  "default": {"metadata": {"name": "default"}}}
    plugin = InterPodAffinity(h.nodes, namespaces=lambda: namespaces)
    nodes = list(h.nodes().values())

    def raw(**term: Any) -> list[int]:
        got = _scores(plugin, PodInfo(pod("x", affinity=_preferred("podAffinity", 10, **term))), nodes)
        return got[0] if got else []

    assert raw() == [0, 0, 0, 10]  # its own namespace
    assert raw(namespaces=["prod", "dev"]) == [10, 0, 10, 0]
    assert raw(namespaceSelector={"matchLabels": {"env": "prod"}}) == [10, 0, 0, 0]
    assert raw(namespaceSelector={}) == [10, 0, 10, 10]
    assert raw(namespaces=["dev"], namespaceSelector={"matchLabels": {"env": "prod"}}) == [10, 0, 10, 0]
    # an existing pod's term with a namespaceSelector is matched against the incoming pod's namespace
    h.bind_pod(pod("picky", namespace="prod",
                   affinity=_preferred("podAntiAffinity", 3, selector={}, namespaceSelector={
                       "matchLabels": {"env": "dev"}})), "a2")
    assert _scores(plugin, PodInfo(pod("d", namespace="dev")), nodes) == ([0, -3, 0, 0], [100, 0, 100, 100])
    assert _scores(plugin, PodInfo(pod("q", namespace="default")), nodes) is None


def test_the_required_filter_reads_namespace_selectors_too() -> None:
    h = _zones()
    h.bind_pod(pod("w-prod", namespace="prod", labels={"app": "web"}), "a1")
    namespaces = {"prod": {"metadata": {"name": "prod", "labels": {"env": "prod"}}}}
    plugin = InterPodAffinity(h.nodes, namespaces=lambda: namespaces)
    term = {"labelSelector": WEB, "topologyKey": "zone", "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    p = PodInfo(pod("near", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}))
    st = CycleState()
    assert plugin.pre_filter(st, p) is None
    assert [plugin.filter(st, p, n) is None for n in h.nodes().values()] == [True, True, False, False]


def test_normalize_truncates_as_upstream() -> None:
    plugin = InterPodAffinity(dict)
    scores = [-3, 0, 4]
    plugin.normalize_scores(CycleState(), PodInfo(pod("p")), scores)
    assert scores == [0, 42, 100]  # 100 * 3 / 7 = 42.86
    scores = [5, 5]
    plugin.normalize_scores(CycleState(), PodInfo(pod("p")), scores)
    assert scores == [0, 0]


def test_the_profile_places_by_preferred_anti_affinity() -> None:
    """Replicas with a preferred hostname anti-affinity: one a node, though NodeResourcesFit
    prefers the bigger first node for each."""
    h, profile = build([node("n0", cpu="32", memory="64Gi"), node("n1"), node("n2")])
    for i in range(3):
        obj = pod(f"w{i}", cpu="1", memory="1Gi", labels={"app": "web"}, affinity=_preferred("podAntiAffinity", 100))
        chosen, err = profile.place(CycleState(), PodInfo(obj), list(h.nodes().values()))
        assert chosen is not None and err is None
        h.bind_pod(obj, chosen.name)
    assert sorted(len(n.pods) for n in h.nodes().values()) == [1, 1, 1]


def test_over_a_cache_the_pods_of_the_terms_namespaces_only_and_terminating_ones_count() -> None:
    """Over the cache, a pod's own terms read the pods of the namespaces they name (the cache
    keeps them by namespace) and score as a walk over every pod does, terminating pods
    included (upstream's InterPodAffinity counts them; PodTopologySpread does not)."""
    c = Cache()
    for n in ("a1", "a2", "b1", "c1"):
        c.add_or_update_node(node(n, labels={"zone": n[0]}))
    for i, (ns, on) in enumerate([("shop", "a1"), ("shop", "b1"), ("other", "a2"), ("other", "c1"), ("shop", "c1")]):
        c.add_pod(PodInfo(pod(f"w{i}", namespace=ns, labels={"app": "web"}, node_name=on)))
    leaving = pod("leaving", namespace="shop", labels={"app": "web"}, node_name="a2")
    leaving["metadata"]["deletionTimestamp"] = "2026-12-04T15:00:00Z"
    c.add_pod(PodInfo(leaving))
    c.add_pod(PodInfo(pod("picky", namespace="other", node_name="b1",
                          affinity=_preferred("podAffinity", 2, "zone", namespaces=["shop"]))))
    c.remove_node("c1")  # and back: its pods are counted again
    c.add_or_update_node(node("c1", labels={"zone": "c"}))
    indexed = InterPodAffinity(lambda: c.nodes)
    walked = InterPodAffinity(lambda: dict(c.nodes))  # a plain mapping: every pod is walked
    nodes = list(c.nodes.values())
    for affinity in (_preferred("podAntiAffinity", 10),
                     _preferred("podAntiAffinity", 10, namespaces=["shop", "other"]),
                     _preferred("podAffinity", 3, "zone", namespaceSelector={}),
                     {**_preferred("podAffinity", 3, "zone"), **_required("podAntiAffinity", "zone")}):
        p = PodInfo(pod("new", namespace="shop", labels={"app": "web"}, affinity=affinity))
        assert _scores(indexed, p, nodes) == _scores(walked, p, nodes), affinity
        st_i, st_w = CycleState(), CycleState()
        assert indexed.pre_filter(st_i, p) is None and walked.pre_filter(st_w, p) is None
        assert [indexed.filter(st_i, p, n) is None for n in nodes] == [walked.filter(st_w, p, n) is None for n in nodes]
    raw, _ = _scores(indexed, PodInfo(pod("new", namespace="shop", labels={"app": "web"},
                                           affinity=_preferred("podAntiAffinity", 10))), nodes) or ([], [])
    # a2: the terminating pod; b1: +2 for picky's term; c1: the pod kept while its node was away
    assert raw == [-10, -10, -8, -10]
    assert c.counts.pods_of("shop") is not None and len(c.counts.pods_of("shop") or ()) == 4


# --------------------------------------------------------------------------- the cache's index

def test_the_cache_indexes_the_nodes_holding_pods_with_terms() -> None:
    c = Cache()
    for n in ("a", "b", "c"):
        c.add_or_update_node(node(n))
    with_terms = PodInfo(pod("t", affinity=_preferred("podAntiAffinity", 1), node_name="a"))
    c.add_pod(with_terms)
    c.add_pod(PodInfo(pod("plain", node_name="b")))
    c.assume(PodInfo(pod("t2", affinity=_required("podAffinity"))), "b")
    assert c.nodes.affinity_nodes == {"a", "b"} and c.nodes.with_affinity == 2
    c.forget(PodInfo(pod("t2")))
    assert c.nodes.affinity_nodes == {"a"}
    c.remove_node("a")  # its pod is kept aside until the node comes back
    assert c.nodes.affinity_nodes == set() and c.nodes.with_affinity == 0
    c.add_or_update_node(node("a"))
    assert c.nodes.affinity_nodes == {"a"} and c.nodes.with_affinity == 1
    c.remove_pod(with_terms.key)
    assert c.nodes.affinity_nodes == set() and c.nodes.with_affinity == 0


# --------------------------------------------------------------------------- NodeResourcesBalancedAllocation

def test_balanced_score_as_upstream() -> None:
    gi = 2**30
    assert balanced_score([3000, 5000], [4000, 10000]) == 87  # 0.75 and 0.5: std 0.125
    assert balanced_score([3000, 5000], [6000, 10000]) == 100
    assert balanced_score([5000, 2 * gi], [4000, 8 * gi]) == 62  # cpu over allocatable: counted as 1
    assert balanced_score([1000, 0], [4000, 0]) == 100  # no memory allocatable: cpu alone, std 0
    assert balanced_score([1, 2, 3], [4, 4, 4]) == 79  # three: sqrt(sum of squares / 3)


def test_balanced_allocation_reads_requests_and_skips_best_effort_pods() -> None:
    n = NodeInfo("n", node("n", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "4"}))
    n.add_pod(PodInfo(pod("x", cpu="1", memory=None)))  # requests no memory: 0, not the non-zero default
    plugin = NodeResourcesBalancedAllocation()
    p = PodInfo(pod("p", cpu="1", memory="2Gi"))
    st = CycleState()
    assert plugin.pre_score(st, p, [n]) is None
    assert plugin.score(st, p, n) == 87  # cpu 2/4, memory 2/8: std 0.125
    st = CycleState()
    s = plugin.pre_score(st, PodInfo(pod("be", cpu=None, memory=None)), [n])
    assert s is not None and s.code == Code.SKIP
    gpu = NodeResourcesBalancedAllocation([{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}])
    st = CycleState()
    assert gpu.pre_score(st, p, [n]) is None
    assert gpu.score(st, p, n) == 87  # the pod requests no GPU: left out
    wants = PodInfo(pod("g", cpu="1", memory="2Gi", extra={"nvidia.com/gpu": "2"}))
    st = CycleState()
    gpu.pre_score(st, wants, [n])
    assert gpu.score(st, wants, n) == 88  # 0.5, 0.25, 0.5: std 0.118


@pytest.mark.parametrize("most", [False, True])
def test_balanced_allocation_decides_between_nodes_fit_ties(most: bool) -> None:
    """Two kinds of node NodeResourcesFit scores alike for the pod; BalancedAllocation
    prefers the one the pod leaves evenly used, by the columns and node by node alike."""
    from controlplane.scheduler.plugins import PluginConfig, default_profile, default_registry

    config = list(default_profile(default_registry()))
    if most:
        config = [PluginConfig(c.name, c.weight, {"scoringStrategy": {"type": "MostAllocated"}})
                  if c.name == "NodeResourcesFit" else c for c in config]
    _, vec = build(config=config)
    _, loop = build(config=config)
    cache = Cache()
    for i in range(300):
        cache.add_or_update_node(node(f"n{i}", cpu="4", memory="4Gi"))
    for i in range(0, 300, 2):  # even nodes: 2 cpu taken; odd ones: 2Gi
        on = f"n{i}"
        cache.add_pod(PodInfo(pod(f"cpu{i}", cpu="2", memory="100Mi", node_name=on)))
        cache.add_pod(PodInfo(pod(f"mem{i + 1}", cpu="100m", memory="2Gi", node_name=f"n{i + 1}")))
    p = PodInfo(pod("p", cpu="100m", memory="2Gi"))  # evens them out on an even node
    fit = vec.get("NodeResourcesFit")
    assert fit is not None
    even, odd = cache.nodes["n0"], cache.nodes["n1"]
    assert fit.score(CycleState(), p, even) == fit.score(CycleState(), p, odd)  # type: ignore[attr-defined]
    for profile, nodes in ((vec, cache.order), (loop, list(cache.order))):
        for _ in range(5):  # (a tie would be broken at random)
            chosen, _ = profile.place(CycleState(), p, nodes)
            assert chosen is not None and int(chosen.name[1:]) % 2 == 0, chosen


# --------------------------------------------------------------------------- over a real socket

ANTI_DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                 "containers": [{"name": "nginx", "image": "nginx"}],
                 "affinity": {
                     # every replica is drawn to the first node (NodeAffinity, weight 2, as much as
                     # InterPodAffinity can swing) ...
                     "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
                         "matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["sim-node-0"]}]}}]},
                     # ... and only the anti-affinity pushes it off a node a replica holds
                     **_preferred("podAntiAffinity", 100)}}}}}


async def _anti_affinity_spreads(kubeconfig: Path) -> Counter[str]:
    async with Client.from_kubeconfig(kubeconfig) as c:
        await c.create("/apis/apps/v1/namespaces/default/deployments", ANTI_DEPLOYMENT)
        deadline = time.monotonic() + 30
        while True:
            items = (await c.list("/api/v1/namespaces/default/pods"))["items"]
            where = [p["spec"].get("nodeName") for p in items]
            if len(where) == 3 and all(where):
                return Counter(str(w) for w in where)
            assert time.monotonic() < deadline, f"not all bound: {where}"
            await asyncio.sleep(0.1)


def test_a_deployments_preferred_hostname_anti_affinity_spreads_its_replicas(tmp_path: Path) -> None:
    """``serve --nodes 3``: a Deployment of 3 replicas preferring the first node but, by a
    preferred ``podAntiAffinity`` on ``kubernetes.io/hostname``, hosts without a replica:
    one a node (without the term's score, the first two land on sim-node-0)."""
    s = start_serve(tmp_path, scheduler=True, extra=("--nodes", "3"))
    try:
        s.wait_ready()
        where = asyncio.run(_anti_affinity_spreads(s.kubeconfig))
        assert sorted(where.values()) == [1, 1, 1], where
    finally:
        s.proc.kill()
        s.proc.wait()
