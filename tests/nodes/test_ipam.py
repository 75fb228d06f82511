"""Pod CIDRs and pod IPs (controlplane.nodes.ipam)."""

from __future__ import annotations

import ipaddress

import pytest

from controlplane.nodes.ipam import CidrAllocator, IPExhausted, PodIPs, node_cidr_mask


def test_node_cidr_mask_fits_the_node_count() -> None:
    assert node_cidr_mask("10.0.0.0/8", 1000) == 24
    assert node_cidr_mask("10.0.0.0/8", 65_536) == 24
    assert node_cidr_mask("10.0.0.0/8", 100_000) == 25  # 126 addresses each, still > 110 pods


def test_cidrs_are_disjoint_and_reused_after_release() -> None:
    alloc = CidrAllocator("10.0.0.0/16", 24)
    alloc.occupy("10.0.1.0/24")  # an adopted node's
    got = [alloc.allocate() for _ in range(255)]
    assert "10.0.1.0/24" not in got and len(set(got)) == 255
    nets = [ipaddress.ip_network(c) for c in got]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
    with pytest.raises(IPExhausted):
        alloc.allocate()
    alloc.release("10.0.7.0/24")
    assert alloc.allocate() == "10.0.7.0/24"


def test_pod_ips_without_collision_and_release() -> None:
    pool = PodIPs("10.0.3.0/29")  # .1 .. .6 usable
    ips = [pool.allocate() for _ in range(6)]
    assert ips == [f"10.0.3.{i}" for i in range(1, 7)]
    with pytest.raises(IPExhausted):
        pool.allocate()
    pool.release("10.0.3.4")
    assert pool.allocate() == "10.0.3.4"
    assert len(pool) == 6


def test_occupied_ips_found_at_start_are_skipped() -> None:
    pool = PodIPs("10.0.3.0/24")
    assert pool.occupy("10.0.3.3")
    assert not pool.occupy("10.9.9.9")
    assert [pool.allocate() for _ in range(3)] == ["10.0.3.1", "10.0.3.2", "10.0.3.4"]
