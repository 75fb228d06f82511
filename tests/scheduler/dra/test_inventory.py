"""Pools from ResourceSlices: completeness, generations, node targeting, counters in another slice."""

from __future__ import annotations

from controlplane.scheduler.dra.inventory import Inventory, PoolID

from .helpers import DRIVER, allocate, claim, device, device_class, manager_with, pod, request, slice_

CLASS = device_class("gpu", f'device.driver == "{DRIVER}"')


def test_incomplete_pool_is_not_used_until_all_its_slices_are_there() -> None:
    a = slice_("a", "n1", [device("d0")], pool="p", count=2)
    b = slice_("b", "n1", [device("d1")], pool="p", count=2)
    m = manager_with(a, CLASS)
    m.on_claim(claim("c", request("r", "gpu")))
    assert allocate(m, pod("p1", "c"), "n1") is not None
    m.on_slice(b)
    assert allocate(m, pod("p1", "c"), "n1") is None


def test_a_newer_generation_replaces_the_older_slices() -> None:
    inv = Inventory()
    inv.upsert(slice_("old", "n1", [device("d0")], pool="p", generation=1))
    inv.upsert(slice_("new", "n1", [device("x0"), device("x1")], pool="p", generation=2))
    [pool] = inv.pools_for_node("n1", {})
    assert [d.id.device for d in pool.devices] == ["x0", "x1"]
    inv.remove(slice_("new", "n1", [], pool="p", generation=2))
    [pool] = inv.pools_for_node("n1", {})
    assert [d.id.device for d in pool.devices] == ["d0"]
    inv.remove(slice_("old", "n1", [], pool="p"))
    assert inv.pools_for_node("n1", {}) == [] and inv.pools == {}


def test_node_selector_and_all_nodes_slices_serve_matching_nodes() -> None:
    inv = Inventory()
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    inv.upsert(slice_("rack", None, [device("switch")], pool="rack-pool", nodeSelector=sel))
    inv.upsert(slice_("global", None, [device("license")], pool="global-pool"))
    on_r1 = {p.id for p in inv.pools_for_node("n1", {"rack": "r1"})}
    on_r2 = {p.id for p in inv.pools_for_node("n2", {"rack": "r2"})}
    assert on_r1 == {PoolID(DRIVER, "rack-pool"), PoolID(DRIVER, "global-pool")}
    assert on_r2 == {PoolID(DRIVER, "global-pool")}
    assert inv.pool_node[PoolID(DRIVER, "rack-pool")] is None


def test_counters_published_in_their_own_slice() -> None:
    counters = [{"name": "gpu-0", "counters": {"mem": {"value": "10Gi"}}}]
    devs = [device(f"part-{i}", consumesCounters=[{"counterSet": "gpu-0", "counters": {"mem": {"value": "4Gi"}}}])
            for i in range(3)]
    m = manager_with(slice_("counters", "n1", [], pool="p", count=2, counters=counters),
                     slice_("devices", "n1", devs, pool="p", count=2), CLASS)
    for i in range(2):
        m.on_claim(claim(f"c{i}", request("r", "gpu")))
        assert allocate(m, pod(f"p{i}", f"c{i}"), "n1") is None
    m.on_claim(claim("c2", request("r", "gpu")))
    assert allocate(m, pod("p2", "c2"), "n1") is not None  # 8Gi of 10Gi used: a third 4Gi does not fit


def test_a_device_consuming_an_unknown_counter_set_makes_the_pool_invalid() -> None:
    bad = [device("d0", consumesCounters=[{"counterSet": "nope", "counters": {"mem": {"value": "1"}}}])]
    inv = Inventory()
    inv.upsert(slice_("s", "n1", bad))
    [pool] = inv.pools_for_node("n1", {})
    assert "unknown counter set nope" in pool.invalid
