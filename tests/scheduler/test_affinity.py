"""InterPodAffinity's scoring, as upstream's, and the cache's index of the nodes holding
pods with (anti-)affinity terms."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

from controlplane.client import Client
from controlplane.scheduler.cache import Cache
from controlplane.scheduler.framework import Code, CycleState
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo
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
