"""Requeue with the real plugins: cluster events go through the scheduler's own informer
handlers (``Scheduler._node_update``'s classification of a node's change, the plugin
resources' events), and the queue asks the plugins' real ``events_to_register``. A pod
parked by a plugin comes back only on an event that plugin registered.

No server: ``FakeClient`` hands the scheduler informers the test feeds, and records the
writes; the scheduling cycles are run one by one."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from controlplane.scheduler.scheduler import Scheduler

from .helpers import node, pod

Obj = dict[str, Any]


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


class FakeInformer:
    def __init__(self, on_add: Callable[[Obj], None], on_update: Callable[[Obj, Obj], None],
                 on_delete: Callable[[Obj], None]) -> None:
        self.items: dict[str, Obj] = {}
        self.on_add, self.on_update, self.on_delete = on_add, on_update, on_delete
        self.synced = asyncio.Event()
        self.synced.set()

    async def run(self) -> None:
        await asyncio.Event().wait()

    def add(self, obj: Obj) -> None:
        self.items[_key(obj)] = obj
        self.on_add(obj)

    def update(self, new: Obj) -> None:
        old = self.items[_key(new)]
        self.items[_key(new)] = new
        self.on_update(old, new)


class FakeClient:
    """The scheduler's client: informers the test feeds; writes recorded and echoed."""

    def __init__(self) -> None:
        self.informers: dict[str, FakeInformer] = {}
        self.writes: list[tuple[str, str, Any]] = []
        self.objects: dict[str, Obj] = {}  # path -> object, for the writes that read back (claims)

    def informer(self, path: str, *, on_add: Callable[[Obj], None], on_update: Callable[[Obj, Obj], None],
                 on_delete: Callable[[Obj], None], page_size: int = 0, optional: bool = False) -> FakeInformer:
        inf = FakeInformer(on_add, on_update, on_delete)
        self.informers[path.rsplit("/", 1)[-1]] = inf
        return inf

    async def create(self, path: str, body: Obj, **query: Any) -> Obj:
        self.writes.append(("create", path, body))
        return body

    async def patch(self, path: str, body: Any, patch_type: str = "merge", **query: Any) -> Obj:
        self.writes.append(("patch", path, body))
        obj = copy.deepcopy(self.objects.get(path, {}))
        for k, v in (body.get("metadata") or {}).items():
            obj.setdefault("metadata", {})[k] = v
        return obj

    async def update(self, path: str, body: Obj, **query: Any) -> Obj:
        self.writes.append(("update", path, body))
        out = copy.deepcopy(body)
        meta = out.setdefault("metadata", {})
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        return out

    def bindings(self) -> dict[str, str]:
        return {path.split("/")[-2]: body["target"]["name"] for kind, path, body in self.writes
                if kind == "create" and path.endswith("/binding")}


class Harness:
    def __init__(self) -> None:
        self.client = FakeClient()
        self.sched = Scheduler(self.client)  # type: ignore[arg-type]
        self.sched._informers()
        self.inf = self.client.informers

    def where(self, name: str) -> str | None:
        return self.sched.queue.where(f"default/{name}")

    def rejectors(self, name: str) -> set[str]:
        return set(self.sched.queue.unschedulable[f"default/{name}"].rejectors)

    async def schedule_all(self) -> list[str]:
        """Run cycles until the queue has nothing to pop (backoffQ too: the scheduler is
        idle); the binding cycles and writes run to their end. The names tried, in order."""
        tried = []
        while (p := self.sched.queue.pop_nowait()) is not None:
            tried.append(p.name)
            await self.sched.schedule_one(p)
        while self.sched._tasks:
            await asyncio.gather(*list(self.sched._tasks))
        return tried

    async def parked(self, *pods: Obj) -> None:
        for p in pods:
            self.inf["pods"].add(p)
        assert sorted(await self.schedule_all()) == sorted(p["metadata"]["name"] for p in pods)
        for p in pods:
            assert self.where(p["metadata"]["name"]) == "unschedulable"

    def update_node(self, name: str, change: Callable[[Obj], None]) -> None:
        new = copy.deepcopy(self.inf["nodes"].items[name])
        change(new)
        self.inf["nodes"].update(new)

    def reactivated(self, names: Iterable[str]) -> set[str]:
        return {n for n in names if self.where(n) != "unschedulable"}


ALL = [{"operator": "Exists"}]
CORDON = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "operator": "Exists"}


def _set_allocatable(n: Obj) -> None:
    n["status"]["allocatable"] = {**n["status"]["allocatable"], "cpu": "8"}


def _set_label(n: Obj) -> None:
    n["metadata"]["labels"]["disk"] = "ssd"


def _drop_taint(n: Obj) -> None:
    n["spec"]["taints"] = []


def _uncordon(n: Obj) -> None:
    n["spec"]["unschedulable"] = False


def _condition(n: Obj) -> None:
    n["status"]["conditions"] = [{"type": "Ready", "status": "True"}]


def _heartbeat(n: Obj) -> None:
    n["metadata"]["annotations"] = {"node.alpha.kubernetes.io/ttl": "0"}
    n["status"]["images"] = [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 1}]


@pytest.mark.parametrize(("change", "expected"), [
    (_set_allocatable, {"cpu"}),  # NodeResourcesFit: nodes ADD | UPDATE_NODE_ALLOCATABLE
    (_set_label, {"label"}),  # NodeAffinity: nodes ADD | UPDATE_NODE_LABEL
    (_drop_taint, {"taint", "cordon"}),  # TaintToleration and NodeUnschedulable: UPDATE_NODE_TAINT
    (_uncordon, {"taint", "cordon"}),  # spec.unschedulable is a taint change, as upstream's
    (_condition, set()),  # UPDATE_NODE_CONDITION: none of them registered it
    (_heartbeat, set()),  # no event at all
], ids=["allocatable", "label", "taint", "unschedulable", "condition", "other"])
async def test_a_node_update_reactivates_the_pods_whose_rejector_registered_it(
        change: Callable[[Obj], None], expected: set[str]) -> None:
    h = Harness()
    h.inf["nodes"].add(node("n1", cpu="1", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
                            unschedulable=True))
    pods = {
        "cordon": pod("cordon", tolerations=[DEDICATED]),
        "taint": pod("taint", tolerations=[CORDON]),
        "label": pod("label", tolerations=ALL, nodeSelector={"disk": "ssd"}),
        "cpu": pod("cpu", cpu="2", tolerations=ALL),
    }
    await h.parked(*pods.values())
    assert {n: h.rejectors(n) for n in pods} == {
        "cordon": {"NodeUnschedulable"}, "taint": {"TaintToleration"}, "label": {"NodeAffinity"},
        "cpu": {"NodeResourcesFit"}}
    h.update_node("n1", change)
    assert h.reactivated(pods) == expected
    assert set(await h.schedule_all()) == expected  # those, and only those, are tried again


async def test_a_reactivated_pod_that_now_fits_is_bound() -> None:
    h = Harness()
    h.inf["nodes"].add(node("n1", cpu="1"))
    await h.parked(pod("big", cpu="2"), pod("picky", nodeSelector={"disk": "ssd"}))
    h.update_node("n1", _set_allocatable)
    assert await h.schedule_all() == ["big"]
    assert h.client.bindings() == {"big": "n1"}
    h.update_node("n1", _set_label)
    assert await h.schedule_all() == ["picky"]
    assert h.client.bindings() == {"big": "n1", "picky": "n1"}


def _gpu_objects() -> tuple[Obj, Obj, Obj]:
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "gpu", "namespace": "default", "uid": "uid-claim", "resourceVersion": "1"},
             "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
              "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                       "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "gpu-0"}]}}
    return cls, claim, slice_


async def test_a_resource_slice_reactivates_a_pod_rejected_by_dynamic_resources() -> None:
    h = Harness()
    cls, claim, slice_ = _gpu_objects()
    h.inf["nodes"].add(node("n1", cpu="1"))
    h.inf["deviceclasses"].add(cls)
    h.inf["resourceclaims"].add(claim)
    h.client.objects["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/gpu"] = claim
    await h.parked(pod("dra", resourceClaims=[{"name": "g", "resourceClaimName": "gpu"}]), pod("big", cpu="2"))
    assert h.rejectors("dra") == {"DynamicResources"} and h.rejectors("big") == {"NodeResourcesFit"}
    h.inf["resourceslices"].add(slice_)  # the driver publishes the node's GPU
    assert h.reactivated(["dra", "big"]) == {"dra"}
    assert await h.schedule_all() == ["dra"]
    assert h.client.bindings() == {"dra": "n1"}
    [allocated] = [body for kind, path, body in h.client.writes if kind == "update" and path.endswith("gpu/status")]
    assert allocated["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


async def test_a_node_label_reactivates_a_pod_rejected_by_dynamic_resources() -> None:
    """Devices published for the nodes a selector picks (a slice's ``nodeSelector``): a
    node labelled into the selection may now serve the pod, so DynamicResources registers
    node label changes (as upstream: nodes Add | UpdateNodeLabel | UpdateNodeTaint)."""
    h = Harness()
    cls, claim, slice_ = _gpu_objects()
    del slice_["spec"]["nodeName"]
    slice_["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "fabric", "operator": "In", "values": ["yes"]}]}]}
    h.inf["nodes"].add(node("n1", cpu="1"))
    for inf, obj in (("deviceclasses", cls), ("resourceclaims", claim), ("resourceslices", slice_)):
        h.inf[inf].add(obj)
    h.client.objects["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/gpu"] = claim
    await h.parked(pod("dra", resourceClaims=[{"name": "g", "resourceClaimName": "gpu"}]), pod("big", cpu="2"))
    assert h.rejectors("dra") == {"DynamicResources"}
    h.update_node("n1", lambda n: n["metadata"]["labels"].update(fabric="yes"))
    assert h.reactivated(["dra", "big"]) == {"dra"}
    assert await h.schedule_all() == ["dra"]
    assert h.client.bindings() == {"dra": "n1"}
