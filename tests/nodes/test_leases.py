"""Node heartbeats (Leases in kube-node-lease) and adoption of nodes created by others."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest

from controlplane.client import Client, resource_path
from controlplane.metrics import LEASE_RENEW_LAG
from controlplane.nodes.config import FAKE_NODE_ANNOTATION
from controlplane.nodes.simulator import NodeSimulator
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")


def _time(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("bulk", [True, False], ids=["LeaseRenewal", "PUT"])
async def test_leases_renew_every_interval_and_nodes_carry_their_shape(client: Client, bulk: bool) -> None:
    async with simulating(client, fast(count=3, renew_interval=0.4, heartbeat_batch=0.1,
                                       lease_renewals=bulk)) as sim:
        assert sim.bulk_renewals is bulk  # this server serves LeaseRenewals: used unless turned off
        async def leases() -> dict[str, dict[str, Any]] | None:
            items = {item["metadata"]["name"]: item for item in (await client.list(LEASES))["items"]}
            return items if set(items) == {"sim-node-0", "sim-node-1", "sim-node-2"} else None

        lease = (await eventually(leases))["sim-node-0"]

        async def reported() -> dict[str, Any] | None:  # (its first status may follow its Lease)
            node = await client.get(f"{NODES}/sim-node-0")
            return node if "capacity" in (node.get("status") or {}) else None

        node = await eventually(reported)
        assert lease["spec"]["holderIdentity"] == "sim-node-0"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        seen = []
        for _ in range(10):
            seen.append(_time((await client.get(f"{LEASES}/sim-node-0"))["spec"]["renewTime"]))
            await asyncio.sleep(0.2)
        distinct = sorted(set(seen))
        # after the create, the first renewal falls at the node's place in the interval; then every
        # interval, on a fixed schedule: one written late on a loaded machine makes its step longer
        # and the next one shorter (0.28 s then), so the rate is checked on average, and no step is
        # short enough to be two renewals in one interval
        steps = [b - a for a, b in itertools.pairwise(distinct[1:])]
        assert len(steps) >= 2 and 0.3 < sum(steps) / len(steps) < 0.6 and all(s > 0.15 for s in steps), steps
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == "sim-node-0"
        assert labels["topology.kubernetes.io/zone"] == "zone-a"
        assert labels["topology.controlplane.io/rack"].startswith("zone-a-rack-")
        assert labels["node.kubernetes.io/instance-type"] == "cpu-large"
        assert node["status"]["capacity"]["cpu"] == "32" and node["status"]["allocatable"]["pods"] == "110"
        assert node["spec"]["podCIDR"] == sim.nodes["sim-node-0"].cidr
        assert len({n.cidr for n in sim.nodes.values()}) == 3
        # renewals fall in one of the interval's batches (0.1 s apart)
        assert all(0 <= n.offset < 0.4 and round(n.offset / 0.1, 6).is_integer() for n in sim.nodes.values())
        assert LEASE_RENEW_LAG._sum.get() >= 0 and sim.lease_renewals >= 3


async def test_a_deleted_lease_is_created_again_by_the_next_bulk_renewal(client: Client) -> None:
    async with simulating(client, fast(count=2, renew_interval=0.3, heartbeat_batch=0.1)) as sim:
        assert sim.bulk_renewals

        async def both() -> bool:
            return len((await client.list(LEASES))["items"]) == 2
        await eventually(both)
        gone = await client.get(f"{LEASES}/sim-node-1")
        await client.delete(f"{LEASES}/sim-node-1")

        async def again() -> dict[str, Any] | None:
            items = {i["metadata"]["name"]: i for i in (await client.list(LEASES))["items"]}
            lease = items.get("sim-node-1")
            return lease if lease is not None and lease["metadata"]["uid"] != gone["metadata"]["uid"] else None
        lease = await eventually(again, timeout=3)
        assert lease["spec"]["holderIdentity"] == "sim-node-1"


async def test_leases_come_back_once_their_deleted_namespace_does(client: Client) -> None:
    """``kubectl delete namespace --all`` deletes kube-node-lease with every Lease: each renewal
    then finds its Lease missing and cannot create it (no namespace) until kube-apiserver's
    system namespaces controller makes the namespace again; the kubelets keep trying, so
    their Leases come back then."""
    namespaces = resource_path("", "v1", "namespaces")
    async with simulating(client, fast(count=2, renew_interval=0.3, heartbeat_batch=0.1)) as sim:
        assert sim.bulk_renewals

        async def both() -> bool:
            return len((await client.list(LEASES))["items"]) == 2
        await eventually(both)
        await client.delete(f"{namespaces}/kube-node-lease")

        async def gone() -> bool:
            return "kube-node-lease" not in {n["metadata"]["name"] for n in (await client.list(namespaces))["items"]}
        await eventually(gone)
        await asyncio.sleep(1.0)  # a few renewals that cannot create their Leases
        assert sim.nodes["sim-node-0"].lease_ready
        await client.create(namespaces, {"metadata": {"name": "kube-node-lease"}})
        await eventually(both, timeout=3)


async def test_nodes_created_by_others_with_the_kwok_annotation_are_adopted(client: Client) -> None:
    async with simulating(client, fast(count=0)) as sim:
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "karpenter-1", "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {"node.kubernetes.io/instance-type": "gpu-1x-l4"}}})
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "real-1"}})

        async def ready() -> bool:
            n = await client.get(f"{NODES}/karpenter-1")
            conditions = n.get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        await eventually(ready)
        node = await client.get(f"{NODES}/karpenter-1")
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "1"  # from its instance type
        assert node["spec"]["podCIDR"]
        assert await client.get(f"{LEASES}/karpenter-1")
        assert "real-1" not in sim.nodes
        assert not (await client.get(f"{NODES}/real-1")).get("status", {}).get("conditions")
        await client.create(PODS, pod("gpu-pod", "karpenter-1"))

        async def running() -> bool:
            return bool((await client.get(f"{PODS}/gpu-pod"))["status"].get("phase") == "Running")

        await eventually(running)
        # IPs come from the adopted node's CIDR and are released with the pod
        ip = (await client.get(f"{PODS}/gpu-pod"))["status"]["podIP"]
        assert len(sim.nodes["karpenter-1"].pod_ips) == 1
        await client.delete(f"{PODS}/gpu-pod", gracePeriodSeconds=0)
        await eventually(lambda: _empty(sim.nodes["karpenter-1"].pod_ips))
        await client.create(PODS, pod("again", "karpenter-1"))
        await eventually(lambda: _ip(client, "again"))
        assert await _ip(client, "again") == ip
        # a deleted node's lease goes with it (the garbage collector's part, by ownerReference)
        await client.delete(f"{NODES}/karpenter-1")

        async def lease_gone() -> bool:
            return not any(item["metadata"]["name"] == "karpenter-1" for item in (await client.list(LEASES))["items"])

        await eventually(lease_gone)
        assert "karpenter-1" not in sim.nodes


async def test_a_node_of_a_type_not_in_the_catalog_is_warned_of_and_keeps_its_own_capacity(
        client: Client, caplog: pytest.LogCaptureFixture) -> None:
    """A node whose instance type the simulator's catalog lacks (an autoscaler given its own
    ``--instance-types`` beside a simulator without the file) is simulated as the default type,
    once said in a warning per type: it was silent. Its Node's own capacity or allocatable, where
    it has one, stands for both; the default type's only where it has neither."""
    caplog.set_level(logging.WARNING, logger="controlplane.nodes.simulator")
    own = {"cpu": "4", "memory": "16Gi", "pods": "30"}
    async with simulating(client, fast(count=0)) as sim:
        for name, status in (("bare", {}), ("sized", {"capacity": own}), ("reserved", {"allocatable": own})):
            await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "annotations": {FAKE_NODE_ANNOTATION: "fake"},
                "labels": {"node.kubernetes.io/instance-type": "m5.large"}}, "status": status})

        async def statuses() -> dict[str, dict[str, Any]] | None:
            got = {n: (await client.get(f"{NODES}/{n}")).get("status") or {} for n in ("bare", "sized", "reserved")}
            return got if all(s.get("conditions") for s in got.values()) else None

        got = await eventually(statuses)
        assert got["bare"]["capacity"]["cpu"] == got["bare"]["allocatable"]["cpu"] == "32"  # cpu-large's
        for name in ("sized", "reserved"):
            assert got[name]["capacity"] == got[name]["allocatable"] == own
        assert {n.itype.name for n in sim.nodes.values()} == {"cpu-large"}
    warned = [r.getMessage() for r in caplog.records if "m5.large" in r.getMessage()]
    assert len(warned) == 1 and "not in the simulator's catalog" in warned[0] and "--instance-types" in warned[0]


async def _empty(pool: object) -> bool:
    return len(pool) == 0  # type: ignore[arg-type]


async def _ip(client: Client, name: str) -> str | None:
    got: str | None = (await client.get(f"{PODS}/{name}"))["status"].get("podIP")
    return got


async def test_many_pods_get_distinct_ips_in_their_nodes_cidr(client: Client) -> None:
    import ipaddress

    async with simulating(client, fast(count=2)) as sim:
        await asyncio.gather(*(client.create(PODS, pod(f"p{i}", f"sim-node-{i % 2}")) for i in range(40)))

        async def all_ips() -> dict[str, str] | None:
            items = (await client.list(PODS))["items"]
            ips = {p["metadata"]["name"]: p["status"].get("podIP") for p in items}
            return ips if all(ips.values()) and len(ips) == 40 else None

        ips = await eventually(all_ips)
        assert len(set(ips.values())) == 40
        for i in range(40):
            net = ipaddress.ip_network(sim.nodes[f"sim-node-{i % 2}"].cidr)
            assert ipaddress.ip_address(ips[f"p{i}"]) in net


async def test_a_finished_pods_ip_goes_back_to_its_node(client: Client) -> None:
    """As a kubelet tears a finished pod's sandbox down (CNI DEL): its address serves the node's
    next pod, while its status keeps showing it. A node's /24 would otherwise be full after 253
    of a Job's pods, and the next ones would stay Pending."""
    async with simulating(client, fast(count=1)) as sim:
        await client.create(PODS, pod("done", "sim-node-0", restartPolicy="Never"))

        async def succeeded() -> bool:
            return bool((await client.get(f"{PODS}/done"))["status"].get("phase") == "Succeeded")

        await eventually(succeeded)
        ip = await _ip(client, "done")
        await eventually(lambda: _empty(sim.nodes["sim-node-0"].pod_ips))
        await client.create(PODS, pod("next", "sim-node-0"))
        await eventually(lambda: _ip(client, "next"))
        assert await _ip(client, "next") == ip and await _ip(client, "done") == ip
        # deleting the finished pod frees nothing twice: the running one keeps the address alone
        await client.delete(f"{PODS}/done", gracePeriodSeconds=0)
        await client.create(PODS, pod("third", "sim-node-0"))
        await eventually(lambda: _ip(client, "third"))
        assert await _ip(client, "third") != ip
        await client.create(PODS, pod("done2", "sim-node-0", restartPolicy="Never"))
        await eventually(lambda: _ip(client, "done2"))
        await eventually(lambda: _len_is(sim.nodes["sim-node-0"].pod_ips, 2))
    # a simulator that starts with a finished pod there does not count its address as used
    async with simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _len_is(sim.nodes["sim-node-0"].pod_ips, 2))


async def _len_is(pool: object, n: int) -> bool:
    return len(pool) == n  # type: ignore[arg-type]


@pytest.mark.parametrize("bulk", [True, False], ids=["LeaseRenewal", "PUT"])
async def test_a_lease_is_not_renewed_again_while_its_renewal_is_unanswered(client: Client, bulk: bool) -> None:
    """As the kubelet's one renew loop: a renewal stuck behind a busy server is not joined by
    another each interval (they would conflict, and pile up behind the backlog)."""
    async with simulating(client, fast(count=2, renew_interval=0.2, heartbeat_batch=0.1,
                                       lease_renewals=bulk)) as sim:
        await eventually(lambda: _renewed_at_least(sim, 2))
        held = asyncio.Event()
        sent: list[str] = []
        real_many, real_one = sim._renew_many, sim._renew

        async def stuck_many(at: float, names: list[str]) -> None:
            sent.extend(names)
            await held.wait()
            await real_many(at, names)

        async def stuck_one(name: str, due: float) -> None:
            sent.append(name)
            await held.wait()
            await real_one(name, due)

        sim._renew_many, sim._renew = stuck_many, stuck_one  # type: ignore[method-assign]
        await asyncio.sleep(1.0)  # five intervals
        assert sorted(sent) == ["sim-node-0", "sim-node-1"]  # one renewal each, still unanswered
        before = sim.lease_renewals
        held.set()
        await eventually(lambda: _renewed_at_least(sim, before + 4))  # answered, then due again
        assert sent.count("sim-node-0") >= 2


async def _renewed_at_least(sim: Any, n: int) -> bool:
    return bool(sim.lease_renewals >= n)


@pytest.mark.parametrize("bulk", [True, False], ids=["NodeStatusReport", "patch"])
async def test_status_is_reported_every_report_interval_with_only_heartbeats_moving(client: Client,
                                                                                    bulk: bool) -> None:
    """A healthy node's periodic status report: every condition's lastHeartbeatTime moves,
    nothing else; against this server as NodeStatusReports unless turned off."""
    async with simulating(client, fast(count=2, status_report_frequency=1.2, bulk_status_reports=bulk)) as sim:
        assert sim.bulk_reports is bulk
        patched: list[str] = []
        real = sim._post_status

        async def post(name: str) -> None:
            patched.append(name)
            await real(name)

        sim._post_status = post  # type: ignore[method-assign]
        async def posted() -> dict[str, dict[str, Any]] | None:
            # the node's first status may not be written yet when the simulator starts
            conditions = (await client.get(f"{NODES}/sim-node-0")).get("status", {}).get("conditions")
            return {c["type"]: c for c in conditions} if conditions else None

        initial = await eventually(posted, timeout=15)

        def reported_after(before: dict[str, dict[str, Any]]) -> Callable[[], Awaitable[dict[str, Any] | None]]:
            async def reported() -> dict[str, dict[str, Any]] | None:
                now = {c["type"]: c for c in (await client.get(f"{NODES}/sim-node-0"))["status"]["conditions"]}
                return now if now["Ready"]["lastHeartbeatTime"] > before["Ready"]["lastHeartbeatTime"] else None
            return reported

        # (from a report on: the first status may be the node stage's, its times taken apart from
        # the simulator's own by a second's boundary)
        first = await eventually(reported_after(initial), timeout=15)
        later = await eventually(reported_after(first), timeout=15)
        assert set(later) == set(first)
        beat = later["Ready"]["lastHeartbeatTime"]
        for kind, c in later.items():
            assert c == {**first[kind], "lastHeartbeatTime": beat}  # status, reason, transition time kept
        assert (not patched) is bulk


async def test_two_simulators_with_label_selectors_take_their_own_nodes(client: Client) -> None:
    """KWOK's --manage-nodes-with-label-selector: each simulator plays only the fake nodes its
    selector takes, and labels the nodes it creates so that it takes them; a fake node neither
    selects is left to no one."""
    async with simulating(client, fast(count=2, name_prefix="a-", node_selector="sim=a")) as a, \
            simulating(client, fast(count=2, name_prefix="b-", node_selector="sim=b,tier!=gold")) as b:
        await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "other", "annotations": {FAKE_NODE_ANNOTATION: "fake"}, "labels": {"sim": "c"}}})
        await eventually(lambda: _both(a, b))
        assert set(a.nodes) == {"a-0", "a-1"} and set(b.nodes) == {"b-0", "b-1"}
        assert (await client.get(f"{NODES}/a-0"))["metadata"]["labels"]["sim"] == "a"
        await client.create(PODS, pod("on-b", "b-1"))

        async def running() -> bool:
            return bool((await client.get(f"{PODS}/on-b"))["status"].get("phase") == "Running")

        await eventually(running)
        assert "on-b" not in {k.split("/")[-1] for k in a.pods}
        assert not (await client.get(f"{NODES}/other")).get("status", {}).get("conditions")


async def _both(a: NodeSimulator, b: NodeSimulator) -> bool:
    return len(a.nodes) == 2 and len(b.nodes) == 2


def test_a_selector_that_would_not_take_the_created_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="would not take the nodes this simulator creates"):
        NodeSimulator(Client("http://127.0.0.1:1"), fast(count=1, node_selector="sim in (a,b)"))
    NodeSimulator(Client("http://127.0.0.1:1"), fast(count=0, node_selector="sim in (a,b)"))  # creates none
