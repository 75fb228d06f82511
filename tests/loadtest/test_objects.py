"""The load tests' objects: pods a scheduler can place on the run's nodes."""

from __future__ import annotations

from typing import Any

from loadtest.objects import PodFactory


def _gpus(pod: dict[str, Any]) -> int:
    return sum(int(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
               for c in pod["spec"]["containers"])


def test_pods_ask_for_gpus_only_where_the_nodes_have_them() -> None:
    some, none = PodFactory(seed=3), PodFactory(seed=3, gpus=False)
    with_gpus = [some.pod("ns", f"p{i}") for i in range(1000)]
    without = [none.pod("ns", f"p{i}") for i in range(1000)]
    assert 50 < sum(1 for p in with_gpus if _gpus(p)) < 200  # podgen's tenth
    assert not any(_gpus(p) for p in without)
    assert all(p["metadata"]["name"] == f"p{i}" and "nodeName" not in p["spec"] for i, p in enumerate(without))
    # the account every namespace has: ServiceAccount admission refuses podgen's made-up ones
    accounts = {(p["spec"]["serviceAccountName"], p["spec"]["serviceAccount"]) for p in with_gpus}
    assert accounts == {("default", "default")}


def test_pods_name_no_owner_but_a_real_one() -> None:
    # podgen's references name ReplicaSets and Jobs that do not exist: a garbage collector
    # (upstream's, the server's) would delete the run's pods
    factory = PodFactory(seed=3)
    assert not any("ownerReferences" in factory.pod("ns", f"p{i}")["metadata"] for i in range(100))
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True}
    assert factory.pod("ns", "p", owner=owner)["metadata"]["ownerReferences"] == [owner]


def test_a_kubelet_s_lease_and_slices_are_its_node_s_and_the_run_s() -> None:
    # as a kubelet's Lease and a DRA driver's ResourceSlice: owned by the Node, so deleting a run's
    # Nodes (label loadtest=true) from a cluster takes them too; labelled, for a cluster whose
    # collector does not follow Nodes
    from loadtest.objects import lease, resource_slice

    owner = [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1"}]
    for obj in (lease("n1", "2026-01-01T00:00:00.000000Z", "u1"), resource_slice("n1", 8, "u1")):
        assert obj["metadata"]["ownerReferences"] == owner
        assert obj["metadata"]["labels"] == {"loadtest": "true"}
    assert "ownerReferences" not in lease("n1", "2026-01-01T00:00:00.000000Z")["metadata"]
