"""client/sharing.py: pods held with their common parts shared, unchanged in content."""

from __future__ import annotations

import copy
import gc
from typing import Any

import orjson
import pytest

from controlplane.client import sharing
from controlplane.client.sharing import PodSharer
from controlplane.podgen import PodGenerator


def pods(n: int, seed: int = 1) -> list[bytes]:
    gen = PodGenerator(seed=seed, namespaces=2)
    return [gen.pod_json() for _ in range(n)]


def test_a_shared_pod_is_the_pod_without_managed_fields() -> None:
    sharer = PodSharer()
    for raw in pods(200):
        want = orjson.loads(raw)
        del want["metadata"]["managedFields"]
        got = sharer(orjson.loads(raw))
        assert got == want
        assert orjson.dumps(got) == orjson.dumps(want)  # key order kept too: what is written back is the same


def test_pods_of_one_template_share_its_parts() -> None:
    sharer = PodSharer()
    held = [sharer(orjson.loads(raw)) for raw in pods(300)]
    by_template: dict[str, list[dict[str, Any]]] = {}
    for p in held:
        by_template.setdefault(p["metadata"]["labels"].get("pod-template-hash", ""), []).append(p)
    a, b = next(group for h, group in by_template.items() if h and len(group) >= 2)[:2]
    assert a is not b and a["metadata"]["uid"] != b["metadata"]["uid"]
    ca, cb = a["spec"]["containers"][0], b["spec"]["containers"][0]
    assert ca is not cb  # each pod has its own containers...
    assert ca["resources"] is cb["resources"]  # ...made of the template's parts
    if "env" in ca:
        assert ca["env"] is cb["env"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    assert sharer.shared > 0
    # what is the pod's own stays its own
    assert a["status"].get("podIP") != b["status"].get("podIP")


def test_pods_that_started_in_the_same_second_share_their_conditions() -> None:
    gen = PodGenerator(seed=3, namespaces=1)
    raws = [gen.pod() for _ in range(3)]
    for pod, second in zip(raws, ("00", "00", "01"), strict=True):
        for c in pod["status"]["conditions"]:
            c["lastTransitionTime"] = f"2026-12-03T05:00:{second}Z"
    sharer = PodSharer()
    a, b, c = (sharer(orjson.loads(orjson.dumps(p))) for p in raws)
    assert a["status"]["conditions"] is b["status"]["conditions"]
    assert c["status"]["conditions"] is not a["status"]["conditions"]
    assert c["status"]["conditions"][0]["lastTransitionTime"] == "2026-12-03T05:00:01Z"
    assert a["status"]["containerStatuses"] is not b["status"]["containerStatuses"]  # their container ids


def test_parts_no_pod_holds_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharing, "MIN_SWEEP", 64)
    sharer = PodSharer()
    sharer._sweep_at = 64
    kept = [sharer(orjson.loads(raw)) for raw in pods(50)]
    del kept
    gc.collect()
    for raw in pods(400, seed=2):  # other pods, other parts: the first ones' parts go
        sharer(orjson.loads(raw))
    sharer._sweep()
    assert len(sharer) == 0  # none of the pods is held any more, so none of their parts is


def test_an_equal_part_is_never_changed_through_another_pod() -> None:
    sharer = PodSharer()
    raw = pods(1)[0]
    first = sharer(orjson.loads(raw))
    before = copy.deepcopy(first)
    second = sharer(orjson.loads(raw))
    assert second == first == before and second is not first
    assert second["spec"]["containers"][0]["resources"] is first["spec"]["containers"][0]["resources"]


def nodes(n: int) -> list[bytes]:
    """Simulated nodes' JSON: one real shape (instance type, conditions, node info), each
    with its own name, uid, CIDR, machine ids and address."""
    out = []
    for i in range(n):
        beat = f"2026-12-02T01:00:{i % 3:02d}Z"  # three heartbeat seconds among them
        out.append(orjson.dumps({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "uid": f"uid-{i}",
                         "labels": {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": "zone-a"},
                         "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {}}]},
            "spec": {"podCIDR": f"10.0.{i}.0/24", "podCIDRs": [f"10.0.{i}.0/24"],
                     "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "32", "pods": "110"}, "allocatable": {"cpu": "32", "pods": "110"},
                       "conditions": [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": "ok",
                                       "lastHeartbeatTime": beat, "lastTransitionTime": "2026-12-02T00:00:00Z"}
                                      for t in ("MemoryPressure", "DiskPressure", "Ready")],
                       "addresses": [{"type": "InternalIP", "address": f"172.16.0.{i}"}],
                       "nodeInfo": {"machineID": f"m{i}", "systemUUID": f"s{i}", "bootID": f"b{i}",
                                    "kubeletVersion": "v1.37.0", "osImage": "Controlplane Simulated"},
                       "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 700000}]}}))
    return out


def test_a_shared_node_is_the_node_without_managed_fields_and_nodes_share_their_types_parts() -> None:
    sharer = sharing.NodeSharer()
    held = []
    for raw in nodes(30):
        want = orjson.loads(raw)
        del want["metadata"]["managedFields"]
        got = sharer(orjson.loads(raw))
        assert orjson.dumps(got) == orjson.dumps(want)  # content and key order unchanged
        held.append(got)
    a, b, c = held[0], held[3], held[1]  # a and b posted in the same second, c in another
    for part in ("capacity", "allocatable", "images"):
        assert a["status"][part] is b["status"][part]
    assert a["spec"]["taints"] is b["spec"]["taints"]
    assert a["metadata"]["annotations"] is b["metadata"]["annotations"]
    assert a["status"]["conditions"][0] is b["status"]["conditions"][0]  # equal conditions held once
    assert a["status"]["conditions"][0] is not c["status"]["conditions"][0]  # another heartbeat: its own
    assert a["status"]["conditions"] is not b["status"]["conditions"]  # each node's list its own
    assert a["status"]["nodeInfo"] is not b["status"]["nodeInfo"]
    assert a["status"]["nodeInfo"]["kubeletVersion"] is b["status"]["nodeInfo"]["kubeletVersion"]  # interned
    assert a["spec"]["podCIDR"] != b["spec"]["podCIDR"] and a["metadata"]["labels"] is not b["metadata"]["labels"]


def test_the_node_informer_holds_nodes_shared() -> None:
    from controlplane.client.informer import SharedInformer

    informer = SharedInformer(None, "/api/v1/nodes")  # type: ignore[arg-type]
    assert isinstance(informer.transform, sharing.NodeSharer)
    assert isinstance(SharedInformer(None, "/api/v1/pods").transform, PodSharer)  # type: ignore[arg-type]
