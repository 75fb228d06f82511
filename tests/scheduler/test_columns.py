"""The numpy columns path of a scheduling cycle chooses what the per-node path chooses.

Two caches are built and changed identically; one is scheduled through
``cache.order`` (which carries ``columns``), the other through a plain list of
the same nodes (the per-node loop). With the same seed, every pod must land on
the same node, or fail with the same message, while nodes come and go, pods are
assumed and removed, and some nodes are tainted or cordoned.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from controlplane.scheduler.cache import Cache
from controlplane.scheduler.framework import Code, CycleState, Status
from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo

from .fakes import build
from .helpers import node, pod


def _random_node(rng: random.Random, i: int) -> dict:
    kw: dict = {"cpu": str(rng.choice([2, 4, 8, 16])), "memory": f"{rng.choice([4, 8, 32])}Gi",
                "pods": rng.choice([3, 10, 110])}
    if rng.random() < 0.02:  # no memory at all: BalancedAllocation scores its cpu alone
        kw["memory"] = "0"
    roll = rng.random()
    if roll < 0.03:
        kw["unschedulable"] = True
    elif roll < 0.06:
        kw["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    elif roll < 0.08:
        kw["taints"] = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    return node(f"n{i}", **kw)


def _random_pod(rng: random.Random, i: int) -> PodInfo:
    cpu = rng.choice(["100m", "500m", "1", "3", "20", None])
    mem = rng.choice(["128Mi", "1Gi", "6Gi", None])
    tol = [{"key": "gpu", "operator": "Exists"}] if rng.random() < 0.2 else None
    obj = pod(f"p{i}", cpu=cpu, memory=mem) if tol is None else pod(f"p{i}", cpu=cpu, memory=mem, tolerations=tol)
    return PodInfo(obj)


def _assert_columns_match(cache: Cache) -> None:
    cols = cache.order.columns
    cols.refresh()
    assert cols.size == len(cache.order)
    assert cols.not_plain == sum(1 for ni in cache.order if ni.unschedulable or ni.taints)
    assert cols.zero_alloc == sum(1 for ni in cache.order if not (ni.alloc_cpu and ni.alloc_mem))
    for i, ni in enumerate(cache.order):
        assert cols.row[ni.name] == i
        assert (int(cols.free_cpu[i]), int(cols.free_mem[i]), int(cols.free_pods[i])) == (
            ni.free_cpu, ni.free_mem, ni.free_pods)
        assert (int(cols.nonzero_cpu[i]), int(cols.nonzero_mem[i])) == (ni.nonzero_cpu, ni.nonzero_mem)
        assert bool(cols.plain[i]) == (not (ni.unschedulable or ni.taints))
        assert bool(cols.no_alloc[i]) == (not (ni.alloc_cpu and ni.alloc_mem))


class _EveryThirdNode:
    """A Filter plugin beyond the resources (as DynamicResources is): it rejects nodes whose
    number is a multiple of three, for pods whose number is even."""

    def name(self) -> str:
        return "EveryThirdNode"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if int(pod.name[1:]) % 2 == 0 and int(node.name[1:]) % 3 == 0:
            return Status(Code.UNSCHEDULABLE, "every third node", plugin="EveryThirdNode")
        return None


@pytest.mark.parametrize(("percentage", "most", "after", "balanced"),
                         [(10, False, False, 1), (0, False, False, 1), (30, True, False, 1), (0, False, True, 1),
                          (10, True, True, 1), (10, False, False, 3), (0, True, False, 0)])
def test_columns_choose_the_nodes_the_per_node_loop_chooses(percentage: int, most: bool, after: bool,
                                                            balanced: int) -> None:
    """``balanced``: NodeResourcesBalancedAllocation's weight (1 by default; 0: not scoring)."""
    from controlplane.scheduler.plugins import PluginConfig, default_profile, default_registry

    rng = random.Random(percentage + most + 10 * balanced)
    config = list(default_profile(default_registry()))
    if most:
        config = [PluginConfig(c.name, c.weight, {"scoringStrategy": {"type": "MostAllocated"}})
                  if c.name == "NodeResourcesFit" else c for c in config]
    config = [PluginConfig(c.name, balanced, c.args) if c.name == "NodeResourcesBalancedAllocation" else c
              for c in config]
    _, vec = build(config=config, percentage=percentage)
    _, loop = build(config=config, percentage=percentage)
    if after:  # the columns path runs it on the nodes whose resources fit; the loop on every node
        vec.filter.append(_EveryThirdNode())
        loop.filter.append(_EveryThirdNode())
    columns_cycles = 0
    inner = vec._find_feasible_columns

    def counted(*args: Any, **kw: Any) -> Any:
        nonlocal columns_cycles
        rows = inner(*args, **kw)
        columns_cycles += rows is not None
        return rows

    vec._find_feasible_columns = counted  # type: ignore[method-assign]
    a, b = Cache(), Cache()
    next_node = 0
    for _ in range(1200):
        obj = _random_node(rng, next_node)
        next_node += 1
        a.add_or_update_node(obj)
        b.add_or_update_node(obj)
    placed: list[PodInfo] = []
    used_columns = 0
    # 450 pods: some 375 placed on either path (the seeds fix it; 300 are asserted below) while
    # nodes go, come and change; 1,200 nodes: more than one window of the columns' walk
    for i in range(450):
        p = _random_pod(rng, i)
        na, ea = vec.place(CycleState(), p, a.order)
        nb, eb = loop.place(CycleState(), p, list(b.order))
        assert (na.name if na else None) == (nb.name if nb else None), f"pod {i}"
        assert (ea.message() if ea else None) == (eb.message() if eb else None)
        if na is not None and nb is not None:
            a.assume(p, na.name)
            b.assume(p, nb.name)
            placed.append(p)
            used_columns += 1
        roll = rng.random()
        if roll < 0.05 and placed:  # a pod ends
            gone = placed.pop(rng.randrange(len(placed)))
            a.remove_pod(gone.key)
            b.remove_pod(gone.key)
        elif roll < 0.07:  # a node goes (swap-remove in order and columns)
            victim = rng.choice(a.order).name
            a.remove_node(victim)
            b.remove_node(victim)
            placed = [q for q in placed if a.node_of(q.key) is not None and a.node_of(q.key) in a.nodes]
        elif roll < 0.09:  # a node arrives, or one changes (cordoned, tainted, resized)
            obj = _random_node(rng, next_node if rng.random() < 0.5 else rng.randrange(next_node))
            next_node += 1
            a.add_or_update_node(obj)
            b.add_or_update_node(obj)
    assert used_columns > 300 and columns_cycles > 300
    _assert_columns_match(a)


def test_balanced_scores_by_the_columns_are_the_plugins() -> None:
    """``NodeColumns.balanced_scores`` gives NodeResourcesBalancedAllocation's ``score`` of each
    row: requests (not the non-zero defaults), fractions capped at 1 (overcommitted nodes), a
    node without memory scored on cpu alone."""
    from controlplane.scheduler.plugins.noderesources import NodeResourcesBalancedAllocation

    rng = random.Random(7)
    c = Cache()
    for i in range(400):
        c.add_or_update_node(node(f"n{i}", cpu=rng.choice(["1", "4", "16"]),
                                  memory=rng.choice(["0", "2Gi", "64Gi"]) if i % 50 else "0"))
    for i in range(1500):  # assumed without a Filter: some nodes end up over their allocatable
        p = PodInfo(pod(f"x{i}", cpu=rng.choice(["100m", "1", None]), memory=rng.choice(["300Mi", "3Gi", None])))
        c.assume(p, rng.choice(c.order).name)
    plugin = NodeResourcesBalancedAllocation()
    cols = c.order.columns
    cols.refresh()
    rows = np.arange(cols.size)
    for i in range(40):
        p = PodInfo(pod(f"p{i}", cpu=rng.choice(["100m", "2", None]), memory=rng.choice(["1Gi", "5Gi", None])))
        st = CycleState()
        if plugin.pre_score(st, p, c.order) is not None:
            assert not p.req_cpu and not p.req_mem  # best effort: skipped
            continue
        each = [plugin.score(st, p, n) for n in c.order]
        assert cols.balanced_scores(rows, p.req_cpu, p.req_mem).tolist() == each
    _assert_columns_match(c)
    for name in [n.name for n in c.order if not n.alloc_mem]:  # its other branch: no row without memory
        c.remove_node(name)
    _assert_columns_match(c)
    assert cols.zero_alloc == 0
    for i in range(10):
        p = PodInfo(pod(f"q{i}", cpu=rng.choice(["100m", "2"]), memory=rng.choice(["1Gi", "5Gi", None])))
        st = CycleState()
        assert plugin.pre_score(st, p, c.order) is None
        assert cols.balanced_scores(np.arange(cols.size), p.req_cpu, p.req_mem).tolist() == [
            plugin.score(st, p, n) for n in c.order]


def test_columns_follow_nodes_and_pods() -> None:
    c = Cache()
    for i in range(5):
        c.add_or_update_node(node(f"n{i}", cpu="4", memory="8Gi"))
    c.assume(PodInfo(pod("a", cpu="1", memory="1Gi")), "n1")
    c.add_or_update_node(node("n2", cpu="4", memory="8Gi", unschedulable=True))
    c.remove_node("n0")  # n4 moves into row 0
    _assert_columns_match(c)
    assert c.order.columns.row["n4"] == 0
    c.add_pod(PodInfo(pod("b", cpu="2", memory="1Gi", node_name="n4")))
    c.remove_node("n4")
    c.add_or_update_node(node("n4", cpu="4", memory="8Gi"))  # the orphaned pod counts again
    _assert_columns_match(c)
    assert c.order.columns.free_cpu[c.order.columns.row["n4"]] == 2000
    assert NodeInfo("x", node("x")).watcher is None  # a node outside a cache tells nobody


def test_a_restriction_is_taken_by_name_in_the_caches_order() -> None:
    from controlplane.scheduler.profile import _restricted

    c = Cache()
    for i in range(400):
        c.add_or_update_node(node(f"n{i}"))
    for gone in ("n3", "n10", "n200"):  # swap-removes: the order is no longer by name
        c.remove_node(gone)
    names = {f"n{i}" for i in range(0, 400, 9)} | {"n10", "not-a-node"}
    walked = [n for n in c.order if n.name in names]
    assert _restricted(c.order, names) == walked
    assert _restricted(list(c.order), names) == walked  # a plain list: the walk
