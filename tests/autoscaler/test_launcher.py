"""The labels the launcher gives a node: the node simulator's topology. Pure. And the node
simulator that runs the launched nodes' pods, with an ``--instance-types`` catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.autoscaler.launcher import topology_labels
from controlplane.autoscaler.requirements import Requirements
from controlplane.client import Client
from controlplane.config import Config
from controlplane.nodes import component as nodes_component

RACK = "topology.controlplane.io/rack"
REGION = "topology.kubernetes.io/region"


def test_launched_nodes_get_a_region_and_a_rack_of_their_zone() -> None:
    labels = topology_labels("cpu-x7k2p", "zone-b", Requirements())
    assert labels[REGION] == "region-1"
    assert labels[RACK].startswith("zone-b-rack-") and 0 <= int(labels[RACK].rsplit("-", 1)[1]) < 8
    assert topology_labels("cpu-x7k2p", "zone-b", Requirements()) == labels  # the same name, the same rack
    racks = {topology_labels(f"cpu-{i}", "zone-a", Requirements())[RACK] for i in range(100)}
    assert len(racks) == 8  # spread over the zone's racks


def test_topology_labels_keep_within_the_requirements() -> None:
    only = Requirements.parse([{"key": RACK, "operator": "In", "values": ["zone-a-rack-6", "zone-b-rack-1"]}])
    assert topology_labels("n", "zone-a", only)[RACK] == "zone-a-rack-6"
    # a requirement none of the zone's racks meets, or another region: those labels are left out
    # (a value the requirements pin is the NodeClaim's label anyway)
    absent = Requirements.parse([{"key": RACK, "operator": "DoesNotExist"},
                                 {"key": REGION, "operator": "In", "values": ["region-9"]}])
    assert topology_labels("n", "zone-a", absent) == {}


async def test_serve_with_a_catalog_without_the_default_type_runs_the_node_simulator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `serve --autoscaler --instance-types FILE`: the node simulator, which runs the launched
    # nodes' pods, must start with a catalog that lacks its default type (cpu-large)
    from controlplane.nodes import simulator

    started: list[str] = []

    async def run(self: simulator.NodeSimulator) -> None:
        started.append(self.config.instance_type)

    monkeypatch.setattr(simulator.NodeSimulator, "run", run)
    catalog = tmp_path / "types.yaml"
    catalog.write_text("- {name: small, cpu: '2', memory: 8Gi, price: 0.1}\n")
    config = Config(data_dir=tmp_path / "data", tls=False, autoscaler=True, instance_types=catalog)
    await nodes_component.start(Client.in_process(create_app(config).state.front), config)
    assert started == ["small"]


async def test_a_stored_nodepool_starts_the_node_simulator_as_it_starts_the_autoscaler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `serve` restarted without --autoscaler over a cluster that has a NodePool: the autoscaler
    # starts (autoscaler/component.py), and its launched Nodes wait for a kubelet to turn Ready;
    # the node simulator must start too, or its NodeClaims never become Initialized
    from controlplane.autoscaler import crds
    from controlplane.nodes import simulator
    from tests.autoscaler.helpers import POOLS, nodepool

    started: list[str] = []

    async def run(self: simulator.NodeSimulator) -> None:
        started.append(self.config.instance_type)

    monkeypatch.setattr(simulator.NodeSimulator, "run", run)
    from controlplane import components

    config = Config(data_dir=tmp_path / "data", tls=False, scheduler=False)
    assert "nodes" in {c.name for c in components.enabled(config)}  # serve starts it, and it decides
    app = create_app(config)
    async with app.router.lifespan_context(app):
        client = Client.in_process(app.state.front)
        await nodes_component.start(client, config)
        assert started == []  # no NodePool, no --nodes, no --autoscaler: nothing to simulate
        await crds.install(client)
        await nodes_component.start(client, config)
        assert started == []
        await client.create(POOLS, nodepool("cpu"))
        await nodes_component.start(client, config)
        assert len(started) == 1
