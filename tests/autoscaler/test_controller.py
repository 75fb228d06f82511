"""The autoscaler against the API server, in process, with the server's scheduler
(which marks pods unschedulable and binds them) and the node simulator (which
runs them): CRDs, scale from zero with DRA devices, limits, consolidation
within budgets, replacement, drift."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from controlplane.api.app import create_app
from controlplane.autoscaler.catalog import Catalog
from controlplane.autoscaler.controller import Autoscaler
from controlplane.autoscaler.nodepool import HASH_ANNOTATION
from controlplane.client import ApiError, Client, Informer, resource_path
from controlplane.config import Config
from controlplane.nodes.config import SimConfig
from controlplane.nodes.simulator import NodeSimulator
from tests.autoscaler.helpers import (
    CLAIM_TEMPLATE,
    CLAIMS,
    DEVICE_CLASS,
    FAST,
    FAST_TYPES,
    NODES,
    PODS,
    POOLS,
    SLICES,
    conditions,
    create_dra_objects,
    nodepool,
    pending_pods,
    pod,
    wait_for,
)

PDBS = resource_path("policy", "v1", "poddisruptionbudgets", "default")


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False))
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[Client]:
    async with Client.in_process(app.state.front) as c:
        yield c


def _autoscaler(client: Client, drain_timeout: float = 30.0) -> Autoscaler:
    """An autoscaler with the tests' short timings (the fixture's, and those of tests that start one)."""
    return Autoscaler(client, FAST, batch_idle=0.2, batch_max=2.0, disruption_interval=0.2, status_interval=0.2,
                      drain_timeout=drain_timeout)


def _kubelets(client: Client) -> NodeSimulator:
    """The node simulator: the kubelets of the nodes the autoscaler launches."""
    return NodeSimulator(client, SimConfig(catalog=tuple(FAST_TYPES), instance_type="cpu-small"))


@contextlib.asynccontextmanager
async def _started(*components: Autoscaler | NodeSimulator) -> AsyncIterator[None]:
    """The components running for the block (an autoscaler's informers synced first), then stopped."""
    tasks = [asyncio.create_task(c.run()) for c in components]
    try:
        for c in components:
            if isinstance(c, Autoscaler):
                await asyncio.wait_for(c.synced.wait(), 10)
        yield
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def scaler(client: Client) -> AsyncIterator[Autoscaler]:
    a = _autoscaler(client, drain_timeout=5.0)
    async with _started(a, _kubelets(client)):
        yield a


async def items(client: Client, path: str) -> list[dict[str, Any]]:
    return list((await client.list(path))["items"])


async def _all_gone(client: Client) -> bool:
    """No NodeClaim nor Node left."""
    return not await items(client, CLAIMS) and not await items(client, NODES)


async def _node_gone(client: Client, node: str) -> bool:
    return not any(n["metadata"]["name"] == node for n in await items(client, NODES))


async def _one_running(client: Client, p: dict[str, Any], pool: dict[str, Any] | None = None) -> str:
    """``pool`` (by default "cpu", never consolidated) and ``p`` pending, until ``p`` runs on the node
    launched for it: that node's name (its NodeClaim's too)."""
    await client.create(POOLS, pool or nodepool("cpu", consolidate_after="Never"))
    await pending_pods(client, [p])
    await wait_for(lambda: _running(client, 1), timeout=15)
    return str((await items(client, NODES))[0]["metadata"]["name"])


def _do_not_disrupt(name: str) -> dict[str, Any]:
    """A 1-CPU pod annotated ``karpenter.sh/do-not-disrupt``."""
    p = pod(name, "1")
    p["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    return p


def _app(name: str, cpu: str = "1") -> dict[str, Any]:
    """A pod labelled ``app: <name>``, for a PodDisruptionBudget to select."""
    p = pod(name, cpu)
    p["metadata"]["labels"] = {"app": name}
    return p


async def _budget(client: Client, name: str, app: str, **spec: int) -> None:
    """A PodDisruptionBudget over the pods labelled ``app: <app>``."""
    await client.create(PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
                               "spec": {**spec, "selector": {"matchLabels": {"app": app}}}})


async def _counted(client: Client, budget: str) -> bool:
    """The disruption controller has counted the budget's one healthy pod."""
    return ((await client.get(f"{PDBS}/{budget}")).get("status") or {}).get("currentHealthy") == 1


async def test_crds_are_installed_with_karpenter_defaults(client: Client, scaler: Autoscaler) -> None:
    created = await client.create(POOLS, nodepool("default", consolidate_after="30s"))
    d = created["spec"]["disruption"]
    assert d["budgets"] == [{"nodes": "10%"}] and d["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    bad = nodepool("bad")
    bad["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    with pytest.raises(ApiError) as e:
        await client.create(POOLS, bad)
    assert e.value.code == 422
    # the NodePool gets its hash and a status
    pool = await wait_for(lambda: _pool_with_status(client, "default"))
    assert pool["metadata"]["annotations"][HASH_ANNOTATION] and pool["status"]["nodes"] == 0


async def _pool_with_status(client: Client, name: str) -> dict[str, Any] | None:
    p = await client.get(f"{POOLS}/{name}")
    return p if (p.get("status") or {}).get("conditions") and HASH_ANNOTATION in p["metadata"].get(
        "annotations", {}) else None


@pytest.mark.parametrize(("requirements", "labels", "budgets", "message"), [
    ([{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}], None, None,
     'spec.template.spec.requirements[0].key: Invalid value: "kubernetes.io/hostname": '
     'label "kubernetes.io/hostname" is restricted'),
    ([{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]}], None, None,
     'label "karpenter.sh/nodepool" is restricted'),
    ([{"key": "karpenter.sh/other", "operator": "Exists"}], None, None, 'label domain "karpenter.sh" is restricted'),
    ([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []}], None, None,
     "requirements with operator 'In' must have a value defined"),
    ([{"key": "example.com/gen", "operator": "Gt", "values": ["2", "3"]}], None, None,
     "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"),
    ([{"key": "example.com/family", "operator": "In", "values": ["a"], "minValues": 2}], None, None,
     "requirements with 'minValues' must have at least that many values specified in the 'values' field"),
    ([], {"kubernetes.io/hostname": "x"}, None, 'label "kubernetes.io/hostname" is restricted'),
    ([], None, [{"nodes": "1", "schedule": "@daily"}], "'schedule' must be set with 'duration'"),
    ([], None, [{"nodes": "1", "schedule": "daily", "duration": "1h"}],
     "spec.disruption.budgets[0].schedule in body should match"),
    # reasons is a set (x-kubernetes-list-type: set), as in Karpenter's CRD
    ([], None, [{"nodes": "1", "reasons": ["Empty", "Drifted", "Empty"]}],
     'spec.disruption.budgets[0].reasons[2]: Duplicate value: "Empty"'),
    ([{"key": "example.com/a b", "operator": "Exists"}], None, None,
     "spec.template.spec.requirements[0].key in body should match"),
    ([], {"team": "x" * 64}, None, "spec.template.metadata.labels.team: Too long"),
])
async def test_nodepools_are_validated_by_karpenters_rules(
        client: Client, scaler: Autoscaler, requirements: list[dict[str, Any]], labels: dict[str, str] | None,
        budgets: list[dict[str, Any]] | None, message: str) -> None:
    bad = nodepool("bad", requirements=requirements, budgets=budgets)
    if labels:
        bad["spec"]["template"]["metadata"] = {"labels": labels}
    with pytest.raises(ApiError) as e:
        await client.create(POOLS, bad)
    assert e.value.code == 422 and message in str(e.value.message)


async def test_a_nodepool_its_runtime_validation_refuses_is_not_ready_and_launches_nothing(
        client: Client, scaler: Autoscaler) -> None:
    # what Karpenter's CRD lets through and its nodepool.validation controller refuses: a capacity
    # type it does not know, a requirement value that is no label value (the CRD's pattern is on the
    # values array, where it checks nothing), two taints of one key and effect
    bad = nodepool("typo", requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["ondemand"]},
        {"key": "example.com/team", "operator": "In", "values": ["a/b"]}],
        taints=[{"key": "dedicated", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    await client.create(POOLS, bad)  # stored: 201, as with Karpenter's CRD

    async def validated(status: str) -> dict[str, Any] | None:
        p = await client.get(f"{POOLS}/typo")
        c = {c["type"]: c for c in (p.get("status") or {}).get("conditions") or ()}
        return c if c.get("ValidationSucceeded", {}).get("status") == status else None

    c = await wait_for(lambda: validated("False"))
    assert c["ValidationSucceeded"]["reason"] == "NodePoolValidationFailed"
    assert c["ValidationSucceeded"]["message"] == (
        "duplicate taint Key/Effect pair dedicated=NoSchedule; "
        "invalid value: no valid values found in [ondemand] for karpenter.sh/capacity-type, expected one of: "
        "map[on-demand:{} reserved:{} spot:{}], got: [ondemand] in requirements, restricted; "
        "invalid value: invalid value a/b for key example.com/team, a valid label must be an empty string or consist "
        "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') in requirements, restricted")
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == (
        "False", "UnhealthyDependents", "ValidationSucceeded=False")
    # a NodePool not Ready provisions nothing (Karpenter's provisioner ignores it)
    await pending_pods(client, [pod("waits", "1")])
    await asyncio.sleep(1.0)
    assert not await items(client, CLAIMS)
    # corrected, it is Ready and launches
    await client.patch(f"{POOLS}/typo", {"spec": {"template": {"spec": {
        "taints": [], "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                        "values": ["on-demand"]}]}}}})
    c = await wait_for(lambda: validated("True"))
    assert c["Ready"]["status"] == "True"
    await wait_for(lambda: _running(client, 1), timeout=15)


async def test_karpenters_own_nodepool_examples_are_accepted(client: Client, scaler: Autoscaler) -> None:
    good = nodepool("good", requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 5}],
        budgets=[{"nodes": "0", "schedule": "@daily", "duration": "10m"}])
    good["spec"]["template"]["metadata"] = {"labels": {"team": "a", "karpenter.sh/capacity-type": "spot"}}
    await client.create(POOLS, good)
    # nodeClassRef's group and kind are immutable, its name is not
    good = await client.get(f"{POOLS}/good")
    good["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "other"
    good = await client.update(f"{POOLS}/good", good)
    good["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = "EC2NodeClass"
    with pytest.raises(ApiError) as e:
        await client.update(f"{POOLS}/good", good)
    assert e.value.code == 422 and "nodeClassRef.kind is immutable" in str(e.value.message)


async def test_static_nodepools_and_nodeclaim_specs_as_karpenters_rules(client: Client, scaler: Autoscaler) -> None:
    static = nodepool("static")
    static["spec"].update(replicas=2, weight=10, limits={"cpu": "10"})
    with pytest.raises(ApiError) as e:
        await client.create(POOLS, static)
    assert e.value.code == 422 and "only 'limits.nodes' is supported on static NodePools" in str(e.value.message)
    assert "'weight' is not supported on static NodePools" in str(e.value.message)
    await client.create(POOLS, nodepool("dynamic"))
    with pytest.raises(ApiError) as e:
        await client.patch(f"{POOLS}/dynamic", {"spec": {"replicas": 1}})
    assert e.value.code == 422 and "Cannot transition NodePool between static" in str(e.value.message)
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "mine"}, "spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["cpu-small"]}]}}
    await client.create(CLAIMS, claim)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CLAIMS}/mine", {"spec": {"expireAfter": "1h"}})
    assert e.value.code == 422 and "spec is immutable" in str(e.value.message)
    # conditions are a list-map keyed by type, as Karpenter's (operatorpkg's) conditions
    condition = {"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CLAIMS}/mine/status", {"status": {"conditions": [condition, condition]}})
    assert e.value.code == 422 and 'status.conditions[1]: Duplicate value: {"type":"Launched"}' in str(e.value.message)


async def _claims_of(client: Client, pool: str, n: int) -> list[dict[str, Any]] | None:
    """The NodePool's NodeClaims not being deleted, once there are exactly ``n``, each with its Node."""
    claims = [c for c in await items(client, CLAIMS) if c["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
              and not c["metadata"].get("deletionTimestamp")]
    nodes = {n["metadata"]["name"] for n in await items(client, NODES)}
    return claims if len(claims) == n and all(c.get("status", {}).get("nodeName") in nodes for c in claims) else None


async def test_a_static_nodepool_keeps_its_replicas(client: Client, scaler: Autoscaler) -> None:
    """Karpenter's static capacity: a NodePool with ``replicas`` keeps that many nodes whatever
    the pods (``kubectl scale nodepool`` changes it), within ``limits.nodes``; its nodes are never
    consolidated, even empty, and pending pods get no node from it."""
    static = nodepool("static", consolidate_after="0s")  # dynamic, its empty nodes would go at once
    static["spec"]["replicas"] = 2
    static["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["cpu-small"]}]
    await client.create(POOLS, static)
    await wait_for(lambda: _claims_of(client, "static", 2), timeout=10)
    await client.patch(f"{POOLS}/static/scale", {"spec": {"replicas": 3}})
    await wait_for(lambda: _claims_of(client, "static", 3), timeout=10)
    await client.patch(f"{POOLS}/static/scale", {"spec": {"replicas": 1}})
    await wait_for(lambda: _claims_of(client, "static", 1), timeout=10)
    await client.patch(f"{POOLS}/static", {"spec": {"replicas": 4, "limits": {"nodes": "2"}}})
    await wait_for(lambda: _claims_of(client, "static", 2), timeout=10)
    # its nodes are ordinary nodes to the scheduler; a pod none holds gets no node from the NodePool
    await pending_pods(client, [pod("p", "1")])
    await wait_for(lambda: _running(client, 1), timeout=10)
    await pending_pods(client, [pod("big", "20")])
    await wait_for(lambda: _events(client, "big", "FailedScheduling"), timeout=10)
    await asyncio.sleep(1.0)  # five disruption passes: the empty static node stays, nothing is added
    assert await _claims_of(client, "static", 2)
    pool = await client.get(f"{POOLS}/static")
    assert pool["status"]["nodes"] == 2


async def test_a_drifted_static_node_is_replaced_by_one_of_its_nodepool(client: Client, scaler: Autoscaler) -> None:
    static = nodepool("static", budgets=[{"nodes": "100%"}])
    static["spec"]["replicas"] = 1
    await client.create(POOLS, static)
    (old,) = await wait_for(lambda: _claims_of(client, "static", 1), timeout=10)
    await client.patch(f"{POOLS}/static", {"spec": {"template": {"metadata": {"labels": {"team": "b"}}}}})

    async def replaced() -> bool:
        claims = await _claims_of(client, "static", 1)
        if not claims:
            return False
        (new,) = claims
        return new["metadata"]["name"] != old["metadata"]["name"] and new["metadata"]["labels"].get("team") == "b" \
            and not any(c["metadata"]["name"] == old["metadata"]["name"] for c in await items(client, CLAIMS))

    await wait_for(replaced, timeout=15)


async def test_scale_from_zero_for_dra_gpu_pods(client: Client, scaler: Autoscaler) -> None:
    await create_dra_objects(client)
    eight = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["gpu-8x"]}]
    await client.create(POOLS, nodepool("gpu", consolidate_after="Never", requirements=eight))
    await pending_pods(client, [pod(f"g{i}", "1", dra=True) for i in range(20)])

    async def ready_claims() -> list[dict[str, Any]] | None:
        claims = await items(client, CLAIMS)
        ok = claims and all(conditions(c).get("Initialized") == "True" for c in claims)
        return claims if ok else None

    claims = await wait_for(ready_claims)
    # 20 one-GPU pods on 8-GPU nodes (the NodePool allows no other type): 8 + 8 + 4
    assert len(claims) == 3
    for c in claims:
        labels = c["metadata"]["labels"]
        assert labels["karpenter.sh/nodepool"] == "gpu"
        assert labels["node.kubernetes.io/instance-type"] == "gpu-8x"
        assert labels["karpenter.sh/capacity-type"] == "on-demand" and labels["topology.kubernetes.io/zone"]
        assert {k: v for k, v in conditions(c).items() if k != "Drifted"} == {
            "Launched": "True", "Registered": "True", "Initialized": "True", "Ready": "True"}
        assert c["status"]["nodeName"] == c["metadata"]["name"] and c["status"]["providerID"]
        assert c["status"]["capacity"]["nvidia.com/gpu"] == "8"
    nodes = await items(client, NODES)
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(c["metadata"]["name"] for c in claims)
    for n in nodes:
        assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert n["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
        assert n["metadata"]["ownerReferences"][0]["kind"] == "NodeClaim"
    async def three_slices() -> list[dict[str, Any]] | None:
        slices = await items(client, SLICES)
        return slices if len(slices) == 3 else None

    slices = await wait_for(three_slices, timeout=5)
    assert all(len(s["spec"]["devices"]) == 8 and s["spec"]["driver"] == "gpu.nvidia.com" for s in slices)
    # the scheduler binds the pods there (it ignores DRA devices until its DRA plugin lands: the devices
    # are counted by the autoscaler alone); nothing more is launched
    async def bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await items(client, PODS))

    await wait_for(bound, timeout=45)  # pods first tried with no nodes back off up to 10 s
    await asyncio.sleep(0.5)
    assert len(await items(client, CLAIMS)) == 3


async def test_a_device_taint_rule_is_watched_and_taints_the_devices_of_nodes_to_launch(
        client: Client, scaler: Autoscaler) -> None:
    """The autoscaler watches DeviceTaintRules: one tainting ``gpu-0`` of the driver's devices
    leaves a gpu-1x no device for a claim, so a gpu-8x is launched (a gpu-1x was, whose one GPU
    the scheduler refuses)."""
    await create_dra_objects(client)
    await client.create(resource_path("resource.k8s.io", "v1", "devicetaintrules"), {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "first-gpus"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "device": "gpu-0"},
                 "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}})
    await wait_for(lambda: _known(scaler.state.taint_rules.objects), timeout=5)
    await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
    await pending_pods(client, [pod("g", "1", dra=True)])

    async def launched_types() -> list[str] | None:
        """The instance types of the NodeClaims, once the launcher has chosen each one's."""
        types = [c["metadata"]["labels"].get("node.kubernetes.io/instance-type") for c in await items(client, CLAIMS)]
        return types if types and all(types) else None

    assert await wait_for(launched_types, timeout=15) == ["gpu-8x"]


async def _known(objects: dict[str, Any]) -> bool:
    return bool(objects)


async def test_limits_hold_back_capacity(client: Client, scaler: Autoscaler) -> None:
    await client.create(POOLS, nodepool("small", limits={"nvidia.com/gpu": "8"}, consolidate_after="Never"))
    await pending_pods(client, [pod(f"g{i}", "1", gpus=1) for i in range(12)])
    await wait_for(lambda: items(client, NODES))
    await asyncio.sleep(0.5)  # another batch would have had time to run
    await scaler.provision()
    claims = await items(client, CLAIMS)
    gpus = sum(int(c["status"]["capacity"]["nvidia.com/gpu"]) for c in claims)
    assert gpus <= 8 and len(claims) >= 1
    assert scaler.last_plan is not None and len(scaler.last_plan.unschedulable) == 4


async def test_empty_nodes_are_consolidated_within_the_budget(client: Client, scaler: Autoscaler) -> None:
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s", budgets=[{"nodes": "1"}]))
    # 20 cpu each: no two fit one node, so three nodes
    await pending_pods(client, [pod(f"p{i}", "20") for i in range(3)])
    await wait_for(lambda: _running(client, 3), timeout=15)
    await asyncio.sleep(1.5)  # occupied nodes are not consolidated
    assert len(await items(client, CLAIMS)) == 3
    # every NodeClaim event, in order: how many are being deleted at once, exactly as the API saw it
    deleting: set[str] = set()
    most = [0]

    def saw(claim: dict[str, Any]) -> None:
        if claim["metadata"].get("deletionTimestamp"):
            deleting.add(claim["metadata"]["name"])
            most[0] = max(most[0], len(deleting))

    watch = Informer(client, CLAIMS, on_add=saw, on_update=lambda o, n: saw(n),
                     on_delete=lambda c: deleting.discard(c["metadata"]["name"]))
    task = asyncio.create_task(watch.run())
    await watch.synced.wait()
    for i in range(3):
        await client.delete(f"{PODS}/p{i}", gracePeriodSeconds=0)
    await wait_for(lambda: _all_gone(client), timeout=15)
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert most[0] == 1  # the budget: one node at a time


async def test_a_budget_that_allows_nothing_is_reported_on_the_nodepool(client: Client, scaler: Autoscaler) -> None:
    """Karpenter's DisruptionBlocked event on the NodePool, what users look for when nothing is
    consolidated: for each reason a budget allows no disruption of (a NodePool with nodes)."""
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s", budgets=[
        {"nodes": "0", "reasons": ["Empty"]}, {"nodes": "0%", "reasons": ["Drifted"]}]))
    await pending_pods(client, [pod("p", "1")])
    await wait_for(lambda: _running(client, 1), timeout=15)
    await client.delete(f"{PODS}/p", gracePeriodSeconds=0)

    async def blocked() -> list[str] | None:
        got = sorted(await _events(client, "cpu", "DisruptionBlocked", "NodePool"))
        return got if len(got) >= 2 else None

    assert await wait_for(blocked, timeout=10) == [
        "No allowed disruptions for disruption reason Drifted due to blocking budget",
        "No allowed disruptions for disruption reason Empty due to blocking budget"]
    assert len(await items(client, CLAIMS)) == 1  # the empty node stays

async def test_deleting_a_nodepool_deletes_its_nodeclaims_and_nodes(client: Client, scaler: Autoscaler) -> None:
    # NodeClaims are owned by their NodePool: the garbage collector deletes them with it (Karpenter
    # relies on that), and the termination finalizer drains and removes their nodes
    await client.create(POOLS, nodepool("doomed", consolidate_after="Never"))
    await client.create(POOLS, nodepool("kept", consolidate_after="Never",
                                        taints=[{"key": "kept", "effect": "NoSchedule"}]))
    await pending_pods(client, [pod(f"p{i}", "20") for i in range(2)])
    await wait_for(lambda: _running(client, 2), timeout=15)
    claims = await items(client, CLAIMS)
    assert len(claims) == 2 and {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims} == {"doomed"}
    await client.delete(f"{POOLS}/doomed")
    await wait_for(lambda: _all_gone(client), timeout=15)
    assert [p["metadata"]["name"] for p in await items(client, POOLS)] == ["kept"]


async def test_nodeclaims_of_a_nodepool_deleted_while_the_autoscaler_was_down_are_deleted(
        app: FastAPI, client: Client) -> None:
    # the garbage collector converges whenever it looks: a NodePool deleted while no autoscaler watched
    # (restart, upgrade) still takes its NodeClaims and their nodes with it
    sim_task = asyncio.create_task(_kubelets(client).run())

    async def start() -> tuple[Client, Autoscaler, asyncio.Task[None]]:
        c = Client.in_process(app.state.front)
        a = _autoscaler(c, drain_timeout=5.0)
        t = asyncio.create_task(a.run())
        await asyncio.wait_for(a.synced.wait(), 10)
        return c, a, t

    first, _, task = await start()
    second: Client | None = None
    try:
        await client.create(POOLS, nodepool("doomed", consolidate_after="Never"))
        await pending_pods(client, [pod(f"p{i}", "20") for i in range(2)])
        await wait_for(lambda: _running(client, 2), timeout=15)
        assert len(await items(client, CLAIMS)) == 2
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await first.aclose()
        await client.delete(f"{POOLS}/doomed")
        await asyncio.sleep(0.3)
        assert len(await items(client, CLAIMS)) == 2  # nobody collected them meanwhile
        second, _, task = await start()
        await wait_for(lambda: _all_gone(client), timeout=15)
    finally:
        for t in (task, sim_task):
            t.cancel()
        await asyncio.gather(task, sim_task, return_exceptions=True)
        if second is not None:
            await second.aclose()


async def test_a_failed_nodeclaim_deletion_is_retried(client: Client, scaler: Autoscaler,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the NodePool's delete event is seen once: a deletion of one of its NodeClaims that fails
    # (a 500, a timeout) must be tried again, not lost
    await client.create(POOLS, nodepool("doomed", consolidate_after="Never"))
    await pending_pods(client, [pod(f"p{i}", "20") for i in range(2)])
    await wait_for(lambda: _running(client, 2), timeout=15)
    real_delete = client.delete
    failed: list[str] = []

    async def flaky_delete(path: str, body: dict[str, Any] | None = None, **query: Any) -> dict[str, Any]:
        if path.startswith(f"{CLAIMS}/") and path not in failed:
            failed.append(path)
            raise ApiError(500, "InternalError", "etcdserver: request timed out")
        return await real_delete(path, body, **query)

    monkeypatch.setattr(client, "delete", flaky_delete)
    await client.delete(f"{POOLS}/doomed")
    await wait_for(lambda: _all_gone(client), timeout=15)
    assert len(failed) == 2  # each claim's first deletion failed


async def _running(client: Client, n: int) -> bool:
    pods = await items(client, PODS)
    return sum(1 for p in pods if p["status"].get("phase") == "Running") >= n


async def _n_nodes(client: Client, n: int) -> list[dict[str, Any]] | None:
    nodes = await items(client, NODES)
    return nodes if len(nodes) >= n else None


@pytest.mark.parametrize("policy", ["WhenEmptyOrUnderutilized", "Balanced"])
async def test_underutilized_node_is_drained_onto_the_other(client: Client, scaler: Autoscaler, policy: str) -> None:
    large = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["cpu-large"]}]
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s", budgets=[{"nodes": "100%"}],
                                        requirements=large, policy=policy))
    await pending_pods(client, [pod("big", "20"), pod("big2", "20")])
    await wait_for(lambda: _running(client, 2), timeout=15)
    names = sorted(n["metadata"]["name"] for n in await items(client, NODES))
    # a small pod on each, then the big ones go: each node holds 1 cpu of 32; one node takes both
    await client.create(PODS, pod("s0", "1", node=names[0]))
    await client.create(PODS, pod("s1", "1", node=names[1]))
    await wait_for(lambda: _running(client, 4), timeout=15)
    for name in ("big", "big2"):
        await client.delete(f"/api/v1/namespaces/default/pods/{name}", gracePeriodSeconds=0)

    async def one_left() -> bool:
        claims = await items(client, CLAIMS)
        return len(claims) == 1 and len(await items(client, NODES)) == 1

    await wait_for(one_left, timeout=15)
    # the drained node's pod was evicted through the API (and, a bare pod, is gone: no controller recreates it)
    pods = {p["metadata"]["name"] for p in await items(client, PODS) if not p["metadata"].get("deletionTimestamp")}
    assert len(pods & {"s0", "s1"}) == 1
    # with Karpenter's event naming the disruption (the NodeClaim's DisruptionReason)
    [evicted] = {"s0", "s1"} - pods
    assert await _events(client, evicted, "Evicted", "Pod") == ["Evicted pod: Underutilized"]
    # Balanced (Karpenter's, k=2) took it for its score: half the NodePool's cost saved for half of
    # its disruption cost (a node and its pod: 2 of 4), with Karpenter's ConsolidationApproved
    [gone] = set(names) - {n["metadata"]["name"] for n in await items(client, NODES)}
    approved = await _events(client, gone, "ConsolidationApproved", "NodeClaim")
    assert approved == (["score 1.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 50.0%)"]
                        if policy == "Balanced" else [])


async def test_a_when_empty_nodes_pods_keep_it_with_karpenters_unconsolidatable_event(
        client: Client, scaler: Autoscaler) -> None:
    # `kubectl describe nodeclaim` (and node) says why consolidation leaves it, as Karpenter's
    name = await _one_running(client, pod("a", "1"), nodepool("cpu", consolidate_after="1s", policy="WhenEmpty"))
    why = 'NodePool "cpu" has consolidation policy WhenEmpty, but node is not empty'

    async def said(kind: str) -> list[str]:
        return await _events(client, name, "Unconsolidatable", kind)

    assert await wait_for(lambda: said("NodeClaim"), timeout=10) == [why]
    assert await said("Node") == [why]
    assert [c["metadata"]["name"] for c in await items(client, CLAIMS)] == [name]


async def test_drift_replaces_the_node_before_deleting_it(client: Client, scaler: Autoscaler) -> None:
    old = await _one_running(client, pod("a", "20"))
    claim = await client.get(f"{CLAIMS}/{old}")
    old_hash = claim["metadata"]["annotations"][HASH_ANNOTATION]
    # change the template: a new taint the pod tolerates
    await client.patch(f"{POOLS}/cpu", {"spec": {"template": {"spec": {"taints": [
        {"key": "team", "value": "ml", "effect": "PreferNoSchedule"}]}}}})

    async def replaced() -> list[dict[str, Any]] | None:
        claims = await items(client, CLAIMS)
        names = [c["metadata"]["name"] for c in claims]
        return claims if old not in names and len(claims) == 1 else None

    claims = await wait_for(replaced, timeout=15)
    new = claims[0]
    assert new["metadata"]["annotations"][HASH_ANNOTATION] != old_hash
    assert new["spec"]["taints"] == [{"key": "team", "value": "ml", "effect": "PreferNoSchedule"}]
    assert [n["metadata"]["name"] for n in await items(client, NODES)] == [new["metadata"]["name"]]


async def test_a_drifted_node_is_tainted_before_its_replacement_launches(client: Client, scaler: Autoscaler) -> None:
    # as Karpenter's disruption queue: the candidate is tainted karpenter.sh/disrupted and its NodeClaim
    # gets DisruptionReason before the replacement launches, so no new pod lands on it meanwhile
    scaler.launcher.latency_scale = 5.0  # the replacement takes 1.5 s: time to look
    old = await _one_running(client, pod("a", "1"))
    await client.patch(f"{POOLS}/cpu", {"spec": {"template": {"metadata": {"labels": {"team": "ml"}}}}})

    async def replacing() -> bool:
        return len(await items(client, CLAIMS)) == 2

    await wait_for(replacing, timeout=10)
    claim = await client.get(f"{CLAIMS}/{old}")
    assert not claim["metadata"].get("deletionTimestamp")  # still waiting for its replacement
    reason = [(c["status"], c["reason"]) for c in claim["status"]["conditions"] if c["type"] == "DisruptionReason"]
    assert reason == [("True", "Drifted")]
    taints = (await client.get(f"{NODES}/{old}"))["spec"].get("taints") or []
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in taints


async def test_pending_pods_do_not_take_the_room_of_a_replacement(client: Client) -> None:
    # as Karpenter's provisioner: the pods of a node being replaced are scheduled with the pending
    # ones, so a pending pod gets a node of its own instead of the replacement launched for them
    from controlplane.autoscaler.simulation import resource_fit
    from tests.autoscaler.test_disruption import claim, pool_node
    from tests.autoscaler.test_state import bound

    scaler = Autoscaler(client, FAST, fits=resource_fit)
    created: list[Any] = []

    async def create(new: Any, started: float) -> dict[str, Any]:
        created.append(new)
        return {}

    scaler._create_claim = create  # type: ignore[method-assign, assignment]
    st = scaler.state
    st.on_nodeclaim_change = lambda old, new: None  # no launcher: these claims exist only here
    st.nodepools["default"] = nodepool("default", consolidate_after="Never")
    st.nodepools["default"]["metadata"]["resourceVersion"] = "1"
    st.node_added(pool_node("n1"))
    st.nodeclaim_set(None, claim("n1", "cpu-small", node_name="n1"))
    for i in range(2):
        st.pod_added(bound(f"n1-p{i}", "900m", "n1"))
    st.nodeclaim_set(None, claim("r1", "cpu-small"))  # n1's replacement, launching
    scaler.replacing["n1"] = (["r1"], "Drifted", "default")
    waiting = bound("new", "900m", "")
    waiting["spec"].pop("nodeName")
    waiting["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    st.pod_added(waiting)
    plan = await scaler.provision()
    assert plan is not None
    # r1 holds two of the three pods (whichever); the third gets a node of its own
    assert set(plan.existing.values()) == {"r1"} and len(plan.existing) == 2
    assert len(created) == 1 and len(created[0].pods) == 1
    assert {p.key for c in created for p in c.pods} | set(plan.existing) == {
        "default/n1-p0", "default/n1-p1", "default/new"}


async def test_underutilized_node_is_replaced_by_a_cheaper_one(client: Client, scaler: Autoscaler) -> None:
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s"))
    await pending_pods(client, [pod("big", "20")])
    await wait_for(lambda: _running(client, 1), timeout=15)
    nodes = await items(client, NODES)
    old = nodes[0]["metadata"]["name"]
    assert nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "cpu-large"
    await client.create(PODS, pod("small", "1", node=old))
    await wait_for(lambda: _running(client, 2), timeout=15)
    await client.delete(f"{PODS}/big", gracePeriodSeconds=0)

    async def replacement() -> list[str] | None:
        names = [n["metadata"]["name"] for n in await items(client, NODES)
                 if n["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "cpu-small"]
        return names or None

    async def old_gone() -> bool:
        return old not in [n["metadata"]["name"] for n in await items(client, NODES)]

    # a cheaper node comes first, then the old one goes once its pod is evicted and gone. (The bare
    # pod is not recreated, so the replacement is empty afterwards and may be consolidated in turn.)
    await wait_for(replacement, timeout=15)
    await wait_for(old_gone, timeout=15)


async def test_pods_holding_node_local_devices_are_not_consolidated_onto_taken_ones(
        client: Client, scaler: Autoscaler) -> None:
    # three one-GPU pods by DRA claim on three one-GPU nodes: each node's device is allocated, so no pod
    # can move to another node, however little CPU they use
    await create_dra_objects(client)
    one = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["gpu-1x"]}]
    await client.create(POOLS, nodepool("gpu", consolidate_after="1s", budgets=[{"nodes": "100%"}],
                                        requirements=one))
    await pending_pods(client, [pod(f"g{i}", "1", dra=True) for i in range(3)])
    await wait_for(lambda: _running(client, 3), timeout=45)

    async def allocated() -> bool:
        claims = await items(client, resource_path("resource.k8s.io", "v1", "resourceclaims", "default"))
        return len(claims) == 3 and all((c.get("status") or {}).get("allocation") for c in claims)

    await wait_for(allocated, timeout=10)
    await asyncio.sleep(2.5)  # consolidateAfter, and several disruption passes
    claims = await items(client, CLAIMS)
    assert len(claims) == 3 and not any(c["metadata"].get("deletionTimestamp") for c in claims)
    assert all(p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
               for p in await items(client, PODS))


async def test_a_node_outlives_the_pods_its_drain_evicts(client: Client, scaler: Autoscaler) -> None:
    # a grace period longer than the drain timeout: the node is deleted only once its pod is gone,
    # else its kubelet would go with it and leave the pod Terminating for ever
    scaler.launcher.drain_timeout = 0.5
    slow = pod("slow", "1")
    slow["spec"]["terminationGracePeriodSeconds"] = 3
    node = await _one_running(client, slow)
    started = asyncio.get_running_loop().time()
    await client.delete(f"{CLAIMS}/{node}")
    await wait_for(lambda: _node_gone(client, node), timeout=15, interval=0.02)
    assert [p["metadata"]["name"] for p in await items(client, PODS)] == []
    # it waited for the pod, well past the drain timeout (the grace period ends on a whole second: up to 1 s early)
    assert asyncio.get_running_loop().time() - started >= 1.5


async def test_a_gang_with_a_rack_constraint_gets_its_nodes_in_one_rack(client: Client, scaler: Autoscaler) -> None:
    # launched nodes carry the node simulator's topology labels; a gang that must share a rack gets its new
    # nodes in one (20 cpu each: one pod per node)
    rack = "topology.controlplane.io/rack"
    await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
    await client.create(resource_path("scheduling.k8s.io", "v1beta1", "podgroups", "default"), {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "train"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                 "schedulingConstraints": {"topology": [{"key": rack}]}}})
    members = [pod(f"t{i}", "20") for i in range(3)]
    for m in members:
        m["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    await pending_pods(client, members)

    async def bound() -> bool:
        pods = await items(client, PODS)
        return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

    await wait_for(bound, timeout=45)
    nodes = await items(client, NODES)
    assert len(nodes) == 3
    labels = [n["metadata"]["labels"] for n in nodes]
    assert all(lb["topology.kubernetes.io/region"] == "region-1" for lb in labels)
    assert all(lb[rack].startswith(lb["topology.kubernetes.io/zone"] + "-rack-") for lb in labels)
    assert len({lb[rack] for lb in labels}) == 1


async def test_a_drain_waits_for_the_pods_disruption_budget(client: Client, scaler: Autoscaler) -> None:
    # the only pod is covered by a budget allowing no disruption: its eviction is refused (429) and
    # retried until the budget is relaxed, then the pod and the node go; without a
    # terminationGracePeriod, as Karpenter, however long that takes (well past the drain timeout)
    scaler.launcher.drain_timeout = 0.5
    node = await _one_running(client, _app("guarded"))
    await _budget(client, "g", "guarded", minAvailable=1)
    await wait_for(lambda: _counted(client, "g"), timeout=10)
    await client.delete(f"{CLAIMS}/{node}")
    await asyncio.sleep(2.0)
    assert [p["metadata"]["name"] for p in await items(client, PODS)
            if not p["metadata"].get("deletionTimestamp")] == ["guarded"]  # refused, still running
    # as Karpenter's terminator says so: the NodeClaim Draining, the Node failing to drain
    draining = (await client.get(f"{CLAIMS}/{node}"))["status"]["conditions"]
    assert [(c["status"], c["reason"]) for c in draining if c["type"] == "Drained"] == [("Unknown", "Draining")]
    failed = await _events(client, node, "FailedDraining", "Node")
    assert "Failed to drain node, evicting pod violates a PDB (Pod=default/guarded)" in failed
    assert "Failed to drain node, 1 pods are waiting to be evicted" in failed
    await client.patch(f"{PDBS}/g", {"spec": {"minAvailable": 0}})
    await wait_for(lambda: _node_gone(client, node), timeout=20)
    assert await items(client, PODS) == []
    # deleted by hand, not disrupted: Karpenter's reason for the eviction
    assert await _events(client, "guarded", "Evicted", "Pod") == ["Evicted pod: Forceful Termination"]


async def test_a_drain_retries_a_pod_several_budgets_cover(client: Client, scaler: Autoscaler) -> None:
    # the eviction API refuses a pod two PodDisruptionBudgets cover (a 500, as upstream's); Karpenter's
    # terminator retries it as it does a 429, with a FailedDraining event, until one budget goes
    node = await _one_running(client, _app("guarded"))
    for name in ("one", "two"):
        await _budget(client, name, "guarded", maxUnavailable=1)
    await client.delete(f"{CLAIMS}/{node}")

    async def refused() -> list[str]:
        return [m for m in await _events(client, node, "FailedDraining", "Node") if "multiple PDBs" in m]

    assert await wait_for(refused, timeout=10) == [
        "Failed to drain node, eviction does not support multiple PDBs (Pod=default/guarded)"]
    await client.delete(f"{PDBS}/two")
    await wait_for(lambda: _node_gone(client, node), timeout=20)


async def test_a_deleted_nodeclaims_pods_get_capacity_before_they_are_evicted(client: Client,
                                                                                scaler: Autoscaler) -> None:
    # as Karpenter's provisioner: a NodeClaim deleted (by hand, expired) starts a provisioning pass for
    # the pods its drain will evict; here the eviction waits for a budget, and the new node comes anyway
    old = await _one_running(client, _app("guarded"))
    await _budget(client, "g", "guarded", minAvailable=1)
    await wait_for(lambda: _counted(client, "g"), timeout=10)
    await client.delete(f"{CLAIMS}/{old}")

    async def launched() -> list[str]:
        return [c["metadata"]["name"] for c in await items(client, CLAIMS) if c["metadata"]["name"] != old]

    await wait_for(launched, timeout=10)
    assert (await client.get(f"{PODS}/guarded"))["spec"]["nodeName"] == old  # not evicted yet
    await client.delete(f"{PDBS}/g")


async def _events(client: Client, name: str, reason: str, kind: str = "") -> list[str]:
    evs = (await client.list(resource_path("", "v1", "events")))["items"]
    return [e["message"] for e in evs if e["involvedObject"]["name"] == name and e["reason"] == reason
            and e["involvedObject"]["kind"] == (kind or e["involvedObject"]["kind"])]


async def test_a_requirement_with_several_values_gives_the_node_one(client: Client, scaler: Autoscaler) -> None:
    # Karpenter labels a NodeClaim with a value of each custom requirement (In: one of its values;
    # Exists, Gt: a number within bounds), so a pod asking for the label can land on it: one node
    p = pod("p", "1")
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "example.com/team", "operator": "In", "values": ["x", "z"]},
            {"key": "example.com/gen", "operator": "Gt", "values": ["1"]},
            {"key": "example.com/any", "operator": "Exists"}]}]}}}
    await _one_running(client, p, nodepool("custom", consolidate_after="Never", requirements=[
        {"key": "example.com/team", "operator": "In", "values": ["x", "z"]},
        {"key": "example.com/gen", "operator": "Gt", "values": ["2"]},
        {"key": "example.com/any", "operator": "Exists"}]))
    [claim] = await items(client, CLAIMS)
    [node] = await items(client, NODES)
    labels = node["metadata"]["labels"]
    assert labels["example.com/team"] in ("x", "z") and int(labels["example.com/gen"]) > 2
    assert "example.com/any" in labels and claim["metadata"]["labels"]["example.com/team"] == labels[
        "example.com/team"]
    # Karpenter's Nominated event on the pod (and, if a later round still found it pending with
    # the node registered, one naming the node too: alone, as Karpenter's, when the Node reached
    # the autoscaler's informer before its NodeClaim's status.nodeName did)
    nominated = await _events(client, "p", "Nominated")
    said = f"Pod should schedule on: nodeclaim/{claim['metadata']['name']}"
    on_node = f"node/{node['metadata']['name']}"
    assert said in nominated and set(nominated) <= {said, f"{said}, {on_node}", f"Pod should schedule on: {on_node}"}, \
        nominated


async def test_the_templates_labels_and_annotations_reach_the_node(client: Client, scaler: Autoscaler) -> None:
    # Karpenter's registration copies the NodeClaim's labels and annotations (the NodePool
    # template's among them) onto the Node
    body = nodepool("cpu", consolidate_after="Never")
    body["spec"]["template"]["metadata"] = {"labels": {"billing-team": "my-team"},
                                            "annotations": {"example.com/owner": "my-team"}}
    await _one_running(client, pod("p", "1"), body)
    [claim] = await items(client, CLAIMS)
    [node] = await items(client, NODES)
    assert claim["metadata"]["annotations"]["example.com/owner"] == "my-team"
    assert node["metadata"]["annotations"]["example.com/owner"] == "my-team"
    assert node["metadata"]["annotations"][HASH_ANNOTATION] == claim["metadata"]["annotations"][HASH_ANNOTATION]
    assert node["metadata"]["labels"]["billing-team"] == "my-team"
    # and the KWOK provider's instance labels, as on the NodeClaim
    assert node["metadata"]["labels"]["karpenter.kwok.sh/instance-cpu"] == "2"
    assert claim["metadata"]["labels"]["karpenter.kwok.sh/instance-family"] == "cpu"


async def test_a_pod_no_instance_type_holds_gets_a_failed_scheduling_event(client: Client, scaler: Autoscaler) -> None:
    await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
    await pending_pods(client, [pod("huge", "1000")])

    async def failed() -> list[str]:  # the scheduler's, and Karpenter's own
        return [m for m in await _events(client, "huge", "FailedScheduling")
                if m.startswith("Failed to schedule pod, ")]

    await wait_for(failed, timeout=10)
    assert await items(client, CLAIMS) == []


async def launched_claims(client: Client) -> list[dict[str, Any]]:
    """The NodeClaims, once each has its instance type: a claim is created with the pool's
    requirements and labelled with the type its launch chose, a write later (as Karpenter's)."""
    claims = await items(client, CLAIMS)
    return claims if claims and all("node.kubernetes.io/instance-type" in (c["metadata"].get("labels") or {})
                                    for c in claims) else []


async def test_a_claim_of_a_missing_device_class_launches_nothing_until_the_class_exists(
        client: Client, scaler: Autoscaler) -> None:
    """As the scheduler's PreFilter: a request's DeviceClass that does not exist fails on every
    node, so no node is launched for it (Karpenter's event says why); once the class is created,
    the DeviceClass informer triggers a batch and the node comes."""
    await client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default"),
                        CLAIM_TEMPLATE)
    await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
    await pending_pods(client, [pod("g", "1", dra=True)])

    async def failed() -> list[str]:
        return [m for m in await _events(client, "g", "FailedScheduling") if m.startswith("Failed to schedule pod, ")]

    assert await wait_for(failed, timeout=10) == [
        "Failed to schedule pod, request gpu: device class gpu.nvidia.com does not exist"]
    assert await items(client, CLAIMS) == []
    await client.create(resource_path("resource.k8s.io", "v1", "deviceclasses"), DEVICE_CLASS)
    claims = await wait_for(lambda: launched_claims(client), timeout=5)  # within a batch, not batch_max's retry
    assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims] == ["gpu-1x"]


async def test_a_pod_whose_claim_template_does_not_exist_launches_nothing_until_it_does(
        client: Client, scaler: Autoscaler) -> None:
    """As the scheduler, which waits for the claim the resourceclaim controller makes from the
    template: nothing is launched for the pod (a node without a GPU was: it was simulated with
    no claim), and once the template is created the GPU node comes."""
    await client.create(resource_path("resource.k8s.io", "v1", "deviceclasses"), DEVICE_CLASS)
    await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
    await pending_pods(client, [pod("g", "1", dra=True)], mark=True)

    async def failed() -> list[str]:
        return [m for m in await _events(client, "g", "FailedScheduling") if m.startswith("Failed to schedule pod, ")]

    assert await wait_for(failed, timeout=10) == [
        'Failed to schedule pod, waiting for resource claim "gpu" to be created from its template']
    assert await items(client, CLAIMS) == []
    await client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default"),
                        CLAIM_TEMPLATE)
    claims = await wait_for(lambda: launched_claims(client), timeout=5)
    assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims] == ["gpu-1x"]


async def test_nodepool_and_nodeclaim_status_as_karpenter(client: Client, scaler: Autoscaler) -> None:
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s"))
    pool = await wait_for(lambda: _pool_with_status(client, "cpu"))
    # the counter's base resources, nodes included, and the conditions Ready depends on
    assert pool["status"]["resources"] == {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "nodes": "0",
                                           "pods": "0"}
    # NodeRegistrationHealthy: Unknown until one of its nodes registers (Ready does not depend on it)
    assert conditions(pool) == {"ValidationSucceeded": "True", "NodeClassReady": "True", "Ready": "True",
                                "NodeRegistrationHealthy": "Unknown"}
    await pending_pods(client, [pod("p", "1")])
    await wait_for(lambda: _running(client, 1), timeout=15)

    async def counted() -> dict[str, Any] | None:
        p = await client.get(f"{POOLS}/cpu")
        return p if p["status"]["resources"]["nodes"] == "1" and p["status"]["nodes"] == 1 and \
            conditions(p)["NodeRegistrationHealthy"] == "True" else None

    counted_pool = await wait_for(counted)
    assert counted_pool["status"]["resources"]["cpu"] == "2"
    # a new generation of the NodePool: its registration health is unknown again
    await client.patch(f"{POOLS}/cpu", {"spec": {"weight": 5}})

    async def reset() -> bool:
        return conditions(await client.get(f"{POOLS}/cpu"))["NodeRegistrationHealthy"] == "Unknown"

    await wait_for(reset)
    # the pod's node is not consolidatable while it has the pod... once it is gone and
    # consolidateAfter has passed, the NodeClaim is marked Consolidatable, then deleted
    [claim] = await items(client, CLAIMS)
    assert "Consolidatable" not in conditions(claim) and claim["status"]["lastPodEventTime"]
    # as operatorpkg's conditions: each observes the NodeClaim's generation
    assert {c["type"]: c.get("observedGeneration") for c in claim["status"]["conditions"]} == {
        "Launched": 1, "Registered": 1, "Initialized": 1, "Ready": 1}
    scaler.disruption_interval = 3600.0  # see the condition before the node goes
    await client.delete(f"{PODS}/p", gracePeriodSeconds=0)

    async def consolidatable() -> bool:
        return conditions(await client.get(f"{CLAIMS}/{claim['metadata']['name']}")).get("Consolidatable") == "True"

    await wait_for(consolidatable, timeout=10)
    crd = await client.get(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                         name="nodeclaims.karpenter.sh"))
    columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Type", "Capacity", "Zone", "Node", "Ready", "Age", "ImageID", "ID", "NodePool", "NodeClass",
                       "Drifted"]


async def _first_claim(client: Client, condition: str) -> dict[str, Any] | None:
    """The first NodeClaim, once its ``condition`` is True."""
    claims = await items(client, CLAIMS)
    return claims[0] if claims and conditions(claims[0]).get(condition) == "True" else None


async def _registered_claim(client: Client) -> dict[str, Any]:
    """A NodePool and a pending pod; the NodeClaim launched for it once it is Registered."""
    await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
    await pending_pods(client, [pod("p", "1")])
    claim: dict[str, Any] = await wait_for(lambda: _first_claim(client, "Registered"), timeout=10)
    return claim


async def test_a_launched_node_is_initialized_by_its_kubelet(client: Client) -> None:
    """As with Karpenter's KWOK provider: the Node is created without conditions (phase Pending);
    its kubelet, the node simulator, posts them with its addresses and nodeInfo; only then is
    the NodeClaim Initialized and Ready, and the Node labelled karpenter.sh/initialized."""
    async with _started(_autoscaler(client)):
        claim = await _registered_claim(client)
        name = claim["status"]["nodeName"]
        node = await client.get(f"{NODES}/{name}")
        assert node["status"]["phase"] == "Pending" and not node["status"].get("conditions")
        assert "karpenter.sh/initialized" not in node["metadata"]["labels"]
        await asyncio.sleep(0.5)  # no kubelet: it stays so
        claim = await client.get(f"{CLAIMS}/{claim['metadata']['name']}")
        assert conditions(claim)["Initialized"] == "Unknown" and conditions(claim)["Ready"] == "Unknown"

        async with _started(_kubelets(client)):
            async def initialized() -> dict[str, Any] | None:
                c = await client.get(f"{CLAIMS}/{claim['metadata']['name']}")
                return c if conditions(c).get("Ready") == "True" else None

            claim = await wait_for(initialized, timeout=10)
            assert conditions(claim)["Initialized"] == "True" and conditions(claim)["Registered"] == "True"
            node = await client.get(f"{NODES}/{name}")
            assert node["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
            status = node["status"]
            assert {c["type"] for c in status["conditions"]} == {"Ready", "MemoryPressure", "DiskPressure",
                                                                  "PIDPressure", "NetworkUnavailable"}
            assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
            assert status["nodeInfo"]["kubeletVersion"] and status["phase"] == "Running"
            assert status["capacity"]["cpu"] == "2"  # the instance type's, as the launcher posted it
            await wait_for(lambda: _running(client, 1), timeout=15)


async def test_a_nodeclaim_waiting_for_its_kubelet_can_be_deleted(client: Client) -> None:
    async with _started(_autoscaler(client)):
        claim = await _registered_claim(client)
        name = claim["status"]["nodeName"]
        await client.delete(f"{CLAIMS}/{claim['metadata']['name']}")

        async def draining() -> bool:
            # its termination started: the Node tainted, its pod evicted (which, with no kubelet to
            # end it, stays terminating: the drain waits for it, as Karpenter's)
            node = await client.get(f"{NODES}/{name}")
            tainted = any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or ())
            p = await client.get(f"{PODS}/p")
            return tainted and bool(p["metadata"].get("deletionTimestamp"))

        await wait_for(draining, timeout=10)


async def test_a_nodeclaim_deleted_while_it_launches_is_gone_at_once(client: Client) -> None:
    """As Karpenter's termination: the instance of a NodeClaim deleted before its Node registered
    is terminated at once and the finalizer removed; the claim does not linger, Terminating, until
    its launch latency (a minute for a GPU type) is over, nor is its Node created then."""
    from dataclasses import replace

    slow = Autoscaler(client, Catalog.of([replace(t, launch_latency_seconds=60.0) for t in FAST_TYPES]),
                      batch_idle=0.2, batch_max=2.0, disruption_interval=0.2, status_interval=0.2)
    async with _started(slow):
        await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
        await pending_pods(client, [pod("p", "1")])
        claim = await wait_for(lambda: _first_claim(client, "Launched"), timeout=10)
        await client.delete(f"{CLAIMS}/{claim['metadata']['name']}")
        await wait_for(lambda: _all_gone(client), timeout=5)


async def test_a_launch_that_fails_is_tried_again(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch or initialization that fails (a 500, a timeout under load) is handled again after a
    delay, as Karpenter's controllers requeue: the NodeClaim gets no event of its own to retry on,
    and would stay Registered, never Initialized, its Node Ready and used."""
    from controlplane.autoscaler import launcher

    real = launcher.Launcher._initialize
    failed: list[str] = []

    async def flaky(self: launcher.Launcher, name: str, claim: dict[str, Any]) -> None:
        if not failed:
            failed.append(name)
            raise ApiError(500, "InternalError", "the first try fails")
        await real(self, name, claim)

    monkeypatch.setattr(launcher.Launcher, "_initialize", flaky)
    monkeypatch.setattr(launcher, "RETRY_FIRST", 0.2)
    async with _started(_autoscaler(client), _kubelets(client)):
        await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
        await pending_pods(client, [pod("p", "1")])
        await wait_for(lambda: _first_claim(client, "Initialized"), timeout=10)
        assert len(failed) == 1


async def test_a_pass_that_fails_with_a_client_timeout_stops_nothing(client: Client,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A status write that times out (the client's timeout on a loaded machine, not an ApiError)
    fails that pass only: the loops go on, the NodePool's status is written on the next pass
    and a pod that comes later still gets its node."""
    real_patch = client.patch
    failed: list[str] = []

    async def slow_patch(path: str, body: Any, **kw: Any) -> dict[str, Any]:
        if path == f"{POOLS}/cpu/status" and not failed:
            failed.append(path)
            raise httpx.ReadTimeout("timed out")
        return await real_patch(path, body, **kw)

    monkeypatch.setattr(client, "patch", slow_patch)
    async with _started(_autoscaler(client), _kubelets(client)):
        await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))

        async def counted() -> bool:
            return "nodes" in ((await client.get(f"{POOLS}/cpu")).get("status") or {})

        await wait_for(counted, timeout=10)
        assert failed
        await pending_pods(client, [pod("p", "1")])
        await wait_for(lambda: _running(client, 1), timeout=15)


async def test_a_new_node_holds_the_daemonsets_pods_too(client: Client, scaler: Autoscaler) -> None:
    """With a DaemonSet asking 1 CPU, a 1.5-CPU pod needs more than cpu-small's 2 CPUs: the node
    launched holds both, and both run there (the DaemonSet controller places its pod)."""
    await client.create(resource_path("apps", "v1", "daemonsets", "default"), {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]}}}})
    await client.create(POOLS, nodepool("cpu", consolidate_after="Never"))
    await pending_pods(client, [pod("p", "1500m")])
    nodes = await wait_for(lambda: _n_nodes(client, 1), timeout=15)
    # the cheapest type that holds both
    assert nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] != "cpu-small"
    [claim] = await items(client, CLAIMS)
    assert claim["spec"]["resources"]["requests"]["cpu"] == "2500m"
    await wait_for(lambda: _running(client, 2), timeout=15)
    assert len(await items(client, CLAIMS)) == 1


async def test_a_pod_disruption_budget_blocks_consolidation(client: Client, scaler: Autoscaler) -> None:
    # a node whose pod's budget allows no disruption is no candidate (Karpenter's
    # ValidatePodsDisruptable): DisruptionBlocked, and it stays until the budget allows one
    await client.create(POOLS, nodepool("cpu", consolidate_after="1s", budgets=[{"nodes": "100%"}]))
    await pending_pods(client, [pod("big", "20"), _app("small")])
    await wait_for(lambda: _running(client, 2), timeout=15)
    [claim] = await items(client, CLAIMS)
    name = claim["metadata"]["name"]
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "cpu-large"
    await _budget(client, "s", "small", minAvailable=1)
    await wait_for(lambda: _counted(client, "s"), timeout=10)
    await client.delete(f"{PODS}/big", gracePeriodSeconds=0)  # the large node is now underutilized

    async def blocked() -> list[str]:
        return await _events(client, name, "DisruptionBlocked", "NodeClaim")

    assert await wait_for(blocked, timeout=10) == ["Pdb prevents pod evictions (PodDisruptionBudget=[default/s])"]
    # on the Node too, where `kubectl describe node` finds it (no namespace: a cluster-scoped object)
    evs = (await client.list(resource_path("", "v1", "events")))["items"]
    assert any(e["involvedObject"] == {**e["involvedObject"], "kind": "Node", "name": name}
               and "namespace" not in e["involvedObject"] and e["reason"] == "DisruptionBlocked" for e in evs)
    await asyncio.sleep(2.0)
    assert [c["metadata"]["name"] for c in await items(client, CLAIMS)] == [name]
    assert not (await client.get(f"{CLAIMS}/{name}"))["metadata"].get("deletionTimestamp")
    await client.patch(f"{PDBS}/s", {"spec": {"minAvailable": 0}})

    async def replaced() -> bool:
        claims = await items(client, CLAIMS)
        return all(c["metadata"]["name"] != name for c in claims)

    await wait_for(replaced, timeout=20)
    assert await _events(client, name, "DisruptionTerminating", "NodeClaim") == ["Disrupting NodeClaim: Underutilized"]


async def test_termination_grace_period_bounds_a_drain_of_a_do_not_disrupt_pod(
        client: Client, scaler: Autoscaler) -> None:
    # a do-not-disrupt pod is not evicted: the drain waits for it until the NodeClaim's
    # terminationGracePeriod has passed, then deletes it (Karpenter's terminator)
    pool = nodepool("cpu", consolidate_after="Never")
    pool["spec"]["template"]["spec"]["terminationGracePeriod"] = "3s"
    await _one_running(client, _do_not_disrupt("keep"), pool)
    [claim] = await items(client, CLAIMS)
    assert claim["spec"]["terminationGracePeriod"] == "3s"
    await client.delete(f"{CLAIMS}/{claim['metadata']['name']}")
    await asyncio.sleep(1.5)
    [p] = await items(client, PODS)
    assert not p["metadata"].get("deletionTimestamp")  # not evicted

    async def gone() -> bool:
        return not await items(client, NODES) and not any(
            c["metadata"]["name"] == claim["metadata"]["name"] for c in await items(client, CLAIMS))

    await wait_for(gone, timeout=15)
    assert await items(client, PODS) == []


async def test_an_expired_nodeclaim_is_deleted(client: Client, scaler: Autoscaler) -> None:
    pool = nodepool("cpu", consolidate_after="Never")
    pool["spec"]["template"]["spec"]["expireAfter"] = "2s"
    await _one_running(client, pod("p", "1"), pool)
    [claim] = await items(client, CLAIMS)
    assert claim["spec"]["expireAfter"] == "2s"

    async def expired() -> bool:
        return all(c["metadata"]["name"] != claim["metadata"]["name"] for c in await items(client, CLAIMS))

    await wait_for(expired, timeout=15)


async def test_min_values_go_onto_the_nodeclaim_and_an_inflexible_pod_gets_an_event(
        client: Client, scaler: Autoscaler) -> None:
    """A NodePool asking for 2 instance types of flexibility: the NodeClaim names at least two,
    keeps the minValues (as Karpenter's), and is accepted by its CRD; a pod only one type can
    hold gets Karpenter's FailedScheduling with the minValues message and no NodeClaim."""
    it = "node.kubernetes.io/instance-type"
    await _one_running(client, pod("p", "1"), nodepool("flexible", consolidate_after="Never", requirements=[
        {"key": it, "operator": "Exists", "minValues": 2},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]))
    [claim] = await items(client, CLAIMS)
    [req] = [r for r in claim["spec"]["requirements"] if r["key"] == it]
    assert req["operator"] == "In" and req["minValues"] == 2 and len(req["values"]) >= 2
    largest = max(FAST_TYPES, key=lambda t: float(str(t.cpu)))
    await pending_pods(client, [pod("big", str(largest.cpu))])

    async def failed() -> list[str]:
        return [m for m in await _events(client, "big", "FailedScheduling") if "minValues" in m]

    assert await wait_for(failed, timeout=10) == [
        f"Failed to schedule pod, minValues requirement is not met for label(s) ({it})"]
    assert len(await items(client, CLAIMS)) == 1


async def test_a_do_not_disrupt_pod_holds_its_node_until_it_may_go(client: Client, scaler: Autoscaler,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a terminationGracePeriod, Karpenter's terminator waits for a do-not-disrupt pod
    for ever: the node stays (tainted) past the drain timeout and the pod's grace period; the
    annotation removed, the pod is evicted and the node goes."""
    from controlplane.autoscaler import launcher

    scaler.launcher.drain_timeout = 0.5
    monkeypatch.setattr(launcher, "GRACE_MARGIN_SECONDS", 0.0)  # no wait beyond the pod's 1 s
    node = await _one_running(client, _do_not_disrupt("kept"))
    await client.delete(f"{CLAIMS}/{node}")
    await asyncio.sleep(2.0)
    [still] = await items(client, NODES)
    assert any(t["key"] == "karpenter.sh/disrupted" for t in still["spec"].get("taints") or ())
    assert [p["metadata"]["name"] for p in await items(client, PODS) if not p["metadata"].get("deletionTimestamp")] \
        == ["kept"]
    await client.patch(f"{PODS}/kept", {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": None}}})
    await wait_for(lambda: _node_gone(client, node), timeout=20)
    assert await items(client, PODS) == []


async def test_a_drain_neither_evicts_nor_waits_for_a_pod_tolerating_the_disrupted_taint(
        client: Client, scaler: Autoscaler) -> None:
    """Karpenter's terminator drains only pods that do not tolerate karpenter.sh/disrupted:NoSchedule
    (``IsDrainable``: such a pod could be scheduled straight back, so it is neither evicted nor
    waited for): a do-not-disrupt pod tolerating every taint does not hold its node for ever."""
    scaler.launcher.drain_timeout = 0.5
    tolerant = _do_not_disrupt("tolerant")
    tolerant["spec"]["tolerations"] = [{"operator": "Exists"}]
    node = await _one_running(client, tolerant)
    await client.delete(f"{CLAIMS}/{node}")
    await wait_for(lambda: _node_gone(client, node), timeout=10)
    # not evicted: it goes with its node (the pod GC's, upstream)
    [left] = await items(client, PODS)
    assert left["metadata"]["name"] == "tolerant" and not left["metadata"].get("deletionTimestamp")


async def test_a_gte_zero_requirement_launches_a_node(client: Client, scaler: Autoscaler) -> None:
    """``Gte 0`` is a valid NodePool requirement (its CRD allows values >= 0): the NodeClaim made
    for it must pass the same CRD rule (no ``Gt -1``), and the pod gets its node."""
    await _one_running(client, pod("p", "1"), nodepool("gte", consolidate_after="Never", requirements=[
        {"key": "example.com/generation", "operator": "Gte", "values": ["0"]}]))
    [claim] = await items(client, CLAIMS)
    assert all(int(v) >= 0 for r in claim["spec"]["requirements"] if r["operator"] in ("Gt", "Lt", "Gte", "Lte")
               for v in r["values"])
