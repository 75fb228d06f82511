"""The simulated kubelet's CSINode: registered with its Node, deleted with it."""

from __future__ import annotations

import pytest

from controlplane import cli
from controlplane.client import ApiError, Client, resource_path
from controlplane.nodes.config import FAKE_NODE_ANNOTATION
from controlplane.nodes.simulator import MIGRATED_PLUGINS, MIGRATED_PLUGINS_ANNOTATION
from tests.nodes.conftest import NODES, eventually, fast, simulating

CSI_NODES = resource_path("storage.k8s.io", "v1", "csinodes")


async def _csi_node_names(client: Client) -> set[str]:
    return {item["metadata"]["name"] for item in (await client.list(CSI_NODES))["items"]}


async def test_each_node_registers_its_csi_node_owned_by_it_and_deleted_with_it(client: Client) -> None:
    async with simulating(client, fast(count=2)):
        await eventually(lambda: _has(client, {"sim-node-0", "sim-node-1"}))
        csi_node = await client.get(f"{CSI_NODES}/sim-node-0")
        node = await client.get(f"{NODES}/sim-node-0")
        assert csi_node["spec"] == {"drivers": None}  # created with [], stored as kube-apiserver stores it
        assert csi_node["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": "sim-node-0", "uid": node["metadata"]["uid"]}]
        assert csi_node["metadata"]["annotations"] == {MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS}
        await client.delete(f"{NODES}/sim-node-0")
        await eventually(lambda: _has(client, {"sim-node-1"}))


async def test_a_csi_node_of_another_node_of_that_name_is_left_alone(client: Client) -> None:
    """The deleted Node's CSINode only: one a later Node of the same name owns stays."""
    async with simulating(client, fast(count=0, csi_nodes=False)) as sim:
        await client.create(CSI_NODES, {"metadata": {"name": "n1", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "someone-else"}]}, "spec": {"drivers": []}})
        await sim._delete_owned(f"{CSI_NODES}/n1", "the-deleted-node")
        assert await client.get(f"{CSI_NODES}/n1")
        await sim._delete_owned(f"{CSI_NODES}/n1", "someone-else")
        with pytest.raises(ApiError) as e:
            await client.get(f"{CSI_NODES}/n1")
        assert e.value.code == 404


async def test_a_former_nodes_csi_node_gives_way_to_the_new_nodes(client: Client) -> None:
    """A Node deleted and created again at once: the new one's CSINode create may overtake the
    former's deletion; the former's CSINode is then replaced, not kept. (The garbage collector
    may delete the former's first, its owner being absent: the new one's is made then.)"""
    await client.create(CSI_NODES, {"metadata": {"name": "again", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "again", "uid": "the-former-node"}]}, "spec": {"drivers": []}})
    async with simulating(client, fast(count=0)):
        node = await client.create(NODES, {"metadata": {"name": "again",
                                                        "annotations": {FAKE_NODE_ANNOTATION: "fake"}}})

        async def owned_by_the_new_node() -> bool:
            try:
                got = await client.get(f"{CSI_NODES}/again")
            except ApiError as e:
                if e.code == 404:  # (between the collector's delete and the simulator's create)
                    return False
                raise
            return bool(got["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"])

        await eventually(owned_by_the_new_node)


async def test_without_csi_nodes_none_is_registered(client: Client) -> None:
    async with simulating(client, fast(count=1, csi_nodes=False)) as sim:
        await eventually(lambda: _lease_ready(sim))
        assert await _csi_node_names(client) == set()


async def _has(client: Client, names: set[str]) -> bool:
    return await _csi_node_names(client) == names


async def _lease_ready(sim: object) -> bool:
    return all(n.lease_ready for n in sim.nodes.values())  # type: ignore[attr-defined]


def test_the_switch_is_no_csi_nodes_on_serve_and_nodes() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["serve"]).csi_nodes is True
    assert parser.parse_args(["serve", "--no-csi-nodes"]).csi_nodes is False
    assert parser.parse_args(["nodes", "--kubeconfig", "kc"]).csi_nodes is True
    assert parser.parse_args(["nodes", "--kubeconfig", "kc", "--no-csi-nodes"]).csi_nodes is False
