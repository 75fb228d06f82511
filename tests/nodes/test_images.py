"""Image pulls: the pull model, the per-node cache, ContainerCreating while pulling, metrics."""

from __future__ import annotations

import time

import pytest

from controlplane.client import Client
from controlplane.metrics import IMAGE_PULLS, exposition
from controlplane.nodes.images import Image, ImageCatalog, NodeImages, Pull, PullModel
from controlplane.nodes.instancetypes import DEFAULT_CATALOG, InstanceType
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating


def test_parallel_unpack_cuts_a_ten_gigabyte_pull_from_two_minutes_to_under_45_seconds() -> None:
    big = Image("nvcr.io/nvidia/pytorch:25.01", [500.0] * 20)  # 10 GB in 20 layers
    serial = PullModel(bandwidth_mbps=500, unpack_mbps=100, unpack_workers=1)
    parallel = PullModel(bandwidth_mbps=500, unpack_mbps=100, unpack_workers=4)
    assert serial.pull_seconds(big) == pytest.approx(120.05)
    assert parallel.pull_seconds(big) == pytest.approx(45.05)
    assert PullModel(bandwidth_mbps=500, unpack_mbps=100, unpack_workers=8).pull_seconds(big) < 45
    # uneven layers: the longest one bounds the parallel unpack
    assert PullModel(1000, 100, 4).pull_seconds(Image("x", [600.0, 100.0, 100.0])) == pytest.approx(0.05 + 0.8 + 6.0)


def test_the_cache_serialised_pulls_and_pull_policies() -> None:
    images = NodeImages(PullModel(bandwidth_mbps=100, unpack_mbps=100), serialize=True)
    a, b = Image("a:1", [100.0]), Image("b:1", [200.0])
    hits = IMAGE_PULLS.labels(result="hit")._value.get()
    assert images.ensure(a, "IfNotPresent", now=0.0) == pytest.approx(2.05)
    assert images.ensure(b, "IfNotPresent", now=0.0) == pytest.approx(2.05 + 4.05)  # waits its turn
    assert images.ensure(a, "IfNotPresent", now=1.0) == pytest.approx(2.05)  # joins the pull in progress
    assert images.ensure(a, "IfNotPresent", now=3.0) == 3.0  # cached
    assert images.ensure(a, "Always", now=3.0) == pytest.approx(3.05)  # cached layers, a manifest check
    assert images.ensure(Image("c:1", [1.0]), "Never", now=3.0) is None
    assert IMAGE_PULLS.labels(result="hit")._value.get() == hits + 2
    assert images.images(now=10.0) == ["a:1", "b:1"]
    parallel = NodeImages(PullModel(bandwidth_mbps=100, unpack_mbps=100), serialize=False)
    parallel.ensure(a, "IfNotPresent", now=0.0)
    assert parallel.ensure(b, "IfNotPresent", now=0.0) == pytest.approx(4.05)


def test_a_pull_says_whether_the_container_pulls_and_for_how_long() -> None:
    """What the kubelet's events say: a pull's own time apart from the wait for its turn, a pull
    joined or a manifest check (Always) a pull too, an image on the node none."""
    images = NodeImages(PullModel(bandwidth_mbps=100, unpack_mbps=100), serialize=True)
    a, b = Image("a:1", [100.0]), Image("b:1", [200.0])
    def said(pull: Pull) -> tuple[float | None, bool, float]:
        return (None if pull.ready is None else round(pull.ready, 6), pull.pulled, round(pull.seconds, 6))

    assert said(images.pull(a, "IfNotPresent", now=0.0)) == (2.05, True, 2.05)
    assert said(images.pull(b, "IfNotPresent", now=0.0)) == (6.1, True, 4.05)  # its own 4.05 s, after a's
    assert said(images.pull(a, "IfNotPresent", now=1.0)) == (2.05, True, 1.05)  # joins a's, 1.05 s from here
    assert images.pull(a, "IfNotPresent", now=3.0) == Pull(3.0)
    assert said(images.pull(a, "Always", now=3.0)) == (3.05, True, 0.05)
    assert images.pull(Image("c:1", [1.0]), "Never", now=3.0) == Pull(None)


def test_catalog_lookup() -> None:
    cat = ImageCatalog()
    assert cat.lookup("nginx:1.27").size_mb == 190.0
    assert cat.lookup("docker.io/library/unknown:1").size_mb == 100.0
    assert cat.lookup("nvcr.io/nvidia/pytorch:25.01").size_mb == 10_000.0
    assert all(t.registry_bandwidth_mbps > 0 for t in DEFAULT_CATALOG)


async def test_pods_wait_in_container_creating_while_their_image_pulls(client: Client) -> None:
    itype = InstanceType("test-fast", cpu="8", memory="32Gi", registry_bandwidth_mbps=1000.0, unpack_mbps=1000.0)
    catalog = ImageCatalog(sizes={"example.com/big": (1500.0, 4), "example.com/small": (1.0, 1)})
    config = fast(count=1, instance_type="test-fast", catalog=(*DEFAULT_CATALOG, itype), image_catalog=catalog)
    async with simulating(client, config):
        t0 = time.monotonic()
        await client.create(PODS, pod("first", "sim-node-0", image="example.com/big:1"))

        async def creating() -> bool:
            p = await client.get(f"{PODS}/first")
            statuses = p.get("status", {}).get("containerStatuses") or []
            return bool(statuses) and statuses[0]["state"].get("waiting", {}).get("reason") == "ContainerCreating"

        await eventually(creating, timeout=2.5)
        assert (await client.get(f"{PODS}/first"))["status"]["phase"] == "Pending"

        async def running(name: str) -> bool:
            return bool((await client.get(f"{PODS}/{name}")).get("status", {}).get("phase") == "Running")

        await eventually(lambda: running("first"), timeout=10)
        took = time.monotonic() - t0
        assert 2.9 <= took < 8.0, took  # 0.05 + 1.5 + 1.5 s modelled
        # the image is now cached on the node: the next pod starts at once
        t1 = time.monotonic()
        await client.create(PODS, pod("second", "sim-node-0", image="example.com/big:1"))
        await eventually(lambda: running("second"), timeout=2)
        assert time.monotonic() - t1 < 1.0
        metrics = exposition().decode()
        assert "controlplane_nodes_image_pull_seconds_count" in metrics
        assert 'controlplane_nodes_image_pulls_total{result="hit"}' in metrics
