"""Partitionable devices (KEP-4815): a GPU and its partitions share counters and are never both allocated."""

from __future__ import annotations

from controlplane.scheduler.dra.benchdata import device_classes
from controlplane.scheduler.dra.invariants import check_invariants

from .helpers import allocate, allocated_devices, claim, gpu_node_slices, manager_with, pod, request

WHOLE, MIG3, MIG1 = "gpu.example.com", "mig-3g.gpu.example.com", "mig-1g.gpu.example.com"


def setup(gpus: int = 1):
    slices = gpu_node_slices("n1", gpus)
    return slices, manager_with(*slices, *device_classes())


def test_whole_gpu_excludes_its_partitions() -> None:
    slices, m = setup()
    m.on_claim(claim("whole", request("gpu", WHOLE)))
    assert allocate(m, pod("p-whole", "whole"), "n1") is None
    assert allocated_devices(m, "whole") == ["gpu-0"]
    m.on_claim(claim("part", request("gpu", MIG1)))
    reason = allocate(m, pod("p-part", "part"), "n1")
    assert reason is not None and "cannot allocate" in reason
    assert check_invariants(slices, m.claims.values()) == []


def test_a_partition_excludes_the_whole_gpu_and_partitions_fill_the_counters() -> None:
    slices, m = setup()
    m.on_claim(claim("a", request("gpu", MIG3)))
    assert allocate(m, pod("pa", "a"), "n1") is None
    m.on_claim(claim("w", request("gpu", WHOLE)))
    assert allocate(m, pod("pw", "w"), "n1") is not None  # 3 of 7 slices are taken
    # 3g + 4 x 1g = 7 slices and 80Gi: the fifth 1g does not fit although 1g devices are free.
    for i in range(4):
        m.on_claim(claim(f"s{i}", request("gpu", MIG1)))
        assert allocate(m, pod(f"ps{i}", f"s{i}"), "n1") is None
    m.on_claim(claim("s4", request("gpu", MIG1)))
    assert allocate(m, pod("ps4", "s4"), "n1") is not None
    assert check_invariants(slices, m.claims.values()) == []


def test_freeing_a_partition_makes_room_again() -> None:
    _slices, m = setup()
    m.on_claim(claim("a", request("gpu", MIG3)))
    assert allocate(m, pod("pa", "a"), "n1") is None
    m.on_claim(claim("w", request("gpu", WHOLE)))
    assert allocate(m, pod("pw", "w"), "n1") is not None
    m.on_claim(claim("a", request("gpu", MIG3)))  # released: no status any more
    m.on_claim(claim("w", request("gpu", WHOLE)))
    assert allocate(m, pod("pw", "w"), "n1") is None
    assert allocated_devices(m, "w") == ["gpu-0"]


def test_count_spans_gpus_and_all_mode_takes_every_free_match() -> None:
    _slices, m = setup(gpus=2)
    m.on_claim(claim("two", request("gpu", WHOLE, count=2)))
    assert allocate(m, pod("p2", "two"), "n1") is None
    assert sorted(allocated_devices(m, "two")) == ["gpu-0", "gpu-1"]
    m.on_claim(claim("any", request("gpu", MIG1)))
    assert allocate(m, pod("pany", "any"), "n1") is not None
    slices2, m2 = setup(gpus=2)
    m2.on_claim(claim("all", request("gpu", MIG3, allocationMode="All")))
    assert allocate(m2, pod("pall", "all"), "n1") is None
    assert len(allocated_devices(m2, "all")) == 4
    assert check_invariants(slices2, m2.claims.values()) == []


def test_invariant_checker_reports_double_allocation_and_counter_overflow() -> None:
    slices, _m = setup()
    node = "n1"
    pool = f"gpu-{node}"

    def allocated(name: str, *devices: str):
        results = [{"request": "gpu", "driver": "gpu.example.com", "pool": pool, "device": d} for d in devices]
        return claim(name, request("gpu", WHOLE), allocation={"devices": {"results": results}})

    problems = check_invariants(slices, [allocated("x", "gpu-0"), allocated("y", "gpu-0-1g-0")])
    assert any("counter gpu-0-counters/" in p and "consumed" in p for p in problems)
    problems = check_invariants(slices, [allocated("x", "gpu-0-1g-0"), allocated("y", "gpu-0-1g-0")])
    assert any("allocated more than once" in p for p in problems)
    assert check_invariants(slices, [allocated("x", "gpu-0-3g-0", "gpu-0-3g-1")]) == []


def test_first_available_falls_back_to_the_next_subrequest() -> None:
    # A 3g partition is in use, so the whole GPU is not available: the claim gets a partition.
    _, m2 = setup()
    m2.on_claim(claim("a", request("gpu", MIG3)))
    assert allocate(m2, pod("pa", "a"), "n1") is None
    fa = {"name": "gpu", "firstAvailable": [{"name": "whole", "deviceClassName": WHOLE},
                                             {"name": "part", "deviceClassName": MIG3}]}
    m2.on_claim(claim("fb", fa))
    assert allocate(m2, pod("pfb", "fb"), "n1") is None
    results = m2.claims["default/fb"]["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("gpu/part", "gpu-0-3g-1")]


def test_the_api_confirming_an_assumed_allocation_leaves_the_nodes_answers_valid() -> None:
    # A node's generation keys its Filter answers; only a change of what is in use may move it.
    _slices, m = setup(gpus=2)
    st = m.state
    m.on_claim(claim("a", request("gpu", MIG1)))
    pc = m.pre_filter(pod("pa", "a"))
    assert pc is not None and m.reserve(pc, "n1", {}) is None  # assumed: gpu in use, generation moves
    assumed = st.node_generation["n1"]
    assert pc.reserved is not None
    written = dict(pc.claims[0])
    written["metadata"] = {**written["metadata"], "resourceVersion": "2"}
    written["status"] = {"allocation": pc.reserved[1].allocation(0, "n1"),
                         "reservedFor": [{"resource": "pods", "name": "pa", "uid": "uid-pa"}]}
    m.on_claim(written)  # PreBind's write, as the API answered it: the same devices
    assert st.node_generation["n1"] == assumed and not st.is_assumed("default/a")
    assert st.committed("default/a") == st.claims()["default/a"]
    later = {**written, "metadata": {**written["metadata"], "resourceVersion": "3", "labels": {"x": "y"}}}
    m.on_claim(later)  # the informer's event of it, then an update that leaves the allocation alone
    assert st.node_generation["n1"] == assumed
    # a real change still counts: the claim released
    m.on_claim({**later, "metadata": {**later["metadata"], "resourceVersion": "4"}, "status": {}})
    assert st.node_generation["n1"] > assumed and st.committed("default/a") is None
    assert m.filter(m.pre_filter(pod("pb", "a")), "n1", {}) is None  # and its room is free again
