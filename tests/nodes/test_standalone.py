"""Over a real socket: ``controlplane nodes`` in its own process against ``controlplane serve``
(scheduler and controllers on, no simulator of its own). Its nodes register and renew their
Leases, and run the pods the scheduler binds to them, and its own ``/metrics`` counts the image
pulls and pod starts (``--metrics-address``); when the process dies, nothing renews
them any more: the server's node lifecycle controller turns them Unknown after
``--node-monitor-grace-period`` and taints them unreachable, and the taint eviction
controller evicts the pods whose toleration runs out (``tolerationSeconds``).

Its nodes are of the first type of its ``--instance-types`` catalog, which has no ``cpu-large``
(the default type), as ``serve --nodes N --instance-types FILE`` makes them: without
``--instance-type`` beside the file, the command refused to start.

One node, ``kept-0``, has a kubelet played by the test (a Ready status and its Lease renewed),
so that the cluster is not wholly down when the simulator dies: with no Ready node at all
the controller takes the NoExecute taints off instead, as upstream's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from controlplane.client import ApiError, Client, resource_path
from controlplane.nodes.simulator import NodeSimulator
from tests.nodes.conftest import NODES, PODS, eventually, fast
from tests.test_cli import start_serve
from tests.test_metricsserver import metrics_url

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _kubelet(client: Client, name: str) -> None:
    """A minimal kubelet for ``name``: Ready once, then its Lease renewed every 0.3 s."""
    await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    now = _now()
    await client.patch(f"{NODES}/{name}/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, "strategic")
    await client.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now}})
    while True:
        await asyncio.sleep(0.3)
        await client.patch(f"{LEASES}/{name}", {"spec": {"renewTime": _now()}})


def _on(name: str, node: str, seconds: int | None, image: str = "registry.k8s.io/pause:3.10") -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                  "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [toleration],
                     "containers": [{"name": "c", "image": image}]}}


async def _ready(client: Client, node: str) -> str | None:
    try:
        n = await client.get(f"{NODES}/{node}")
    except ApiError:
        return None
    return next((c["status"] for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)


async def _lease(client: Client, name: str) -> dict[str, Any] | None:
    try:
        return await client.get(f"{LEASES}/{name}")
    except ApiError as e:
        if e.code != 404:
            raise
    return None


async def _phase(client: Client, name: str) -> str | None:
    got: str | None = (await client.get(f"{PODS}/{name}")).get("status", {}).get("phase")
    return got


async def _is(awaitable: Any, want: Any) -> bool:
    return bool(await awaitable == want)


async def test_a_standalone_simulator_that_dies_leaves_its_nodes_to_the_node_lifecycle_controller(
        tmp_path: Path) -> None:
    serve = start_serve(tmp_path, scheduler=True, extra=(
        "--node-monitor-grace-period", "3s", "--node-monitor-period", "0.2s", "--node-eviction-rate", "50"))
    cli: subprocess.Popen[bytes] | None = None
    kubelet: asyncio.Task[None] | None = None
    try:
        serve.wait_ready()
        async with Client.from_kubeconfig(serve.kubeconfig) as client:
            kubelet = asyncio.create_task(_kubelet(client, "kept-0"))
            catalog = tmp_path / "types.yaml"
            catalog.write_text('- {name: m5.large, cpu: "2", memory: 8Gi, pods: 29, price: 0.096}\n'
                               '- {name: m5.xlarge, cpu: "4", memory: 16Gi, pods: 58, price: 0.192}\n')
            with (tmp_path / "nodes.err").open("wb") as err:
                cli = subprocess.Popen(
                    [sys.executable, "-m", "controlplane", "nodes", "--kubeconfig", str(serve.kubeconfig),
                     "--count", "2", "--name-prefix", "cli-", "--renew-interval", "1",
                     "--instance-types", str(catalog), "--metrics-address", "127.0.0.1:0"],
                    stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            for node in ("cli-0", "cli-1"):
                await eventually(lambda node=node: _is(_ready(client, node), "True"), timeout=20)  # type: ignore[misc]
            said = (tmp_path / "nodes.err").read_text()
            assert f"controlplane nodes: against {serve.url}: creating 2 nodes (cli-0..cli-1), " in said
            made = await client.get(f"{NODES}/cli-0")
            assert made["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
            assert made["status"]["capacity"]["cpu"] == "2"
            first = (await eventually(lambda: _lease(client, "cli-0")))["spec"]["renewTime"]

            async def renewed() -> bool:
                return bool((await client.get(f"{LEASES}/cli-0"))["spec"]["renewTime"] != first)

            await eventually(renewed, timeout=5)
            # bound by the scheduler, run by the standalone simulator
            await client.create(PODS, _on("brief", "cli-0", 1))
            await client.create(PODS, _on("stays", "cli-1", None))
            await client.create(PODS, _on("pulled", "cli-1", None, image="busybox:1.36"))  # not on the node yet
            for name in ("brief", "stays", "pulled"):
                await eventually(lambda name=name: _is(_phase(client, name), "Running"), timeout=20)  # type: ignore[misc]
            assert (await client.get(f"{PODS}/brief"))["spec"]["nodeName"] == "cli-0"
            # its own metrics, on its own port (the server's /metrics has none of them)
            own = metrics_url(tmp_path / "nodes.err")
            metrics = httpx.get(f"{own}/metrics").text
            assert "controlplane_nodes_image_pull_seconds_count 1.0" in metrics  # busybox: 4.3 MB
            assert 'controlplane_nodes_image_pulls_total{result="pull"} 1.0' in metrics
            assert 'controlplane_nodes_image_pulls_total{result="hit"} 2.0' in metrics  # the pause image
            assert "controlplane_nodes_pod_start_seconds_count 3.0" in metrics
            assert re.search(r'^controlplane_nodes_lease_renewals_total\{result="ok"\} [1-9]', metrics, re.M)
            assert "apiserver_request_total" not in metrics and "controlplane_scheduler" not in metrics
            assert httpx.get(f"{own}/readyz").text == "ok" and httpx.get(f"{own}/nope").status_code == 404
            assert "controlplane_nodes_image_pull_seconds_count 0.0" in httpx.get(f"{serve.url}/metrics").text
            # Longer than the grace period: the simulator's renewals keep its nodes Ready
            await asyncio.sleep(4)
            assert await _ready(client, "cli-0") == "True"

            cli.send_signal(signal.SIGKILL)  # a kubelet that dies without a word
            cli.wait(10)
            for node in ("cli-0", "cli-1"):
                await eventually(lambda node=node: _is(_ready(client, node), "Unknown"), timeout=10)  # type: ignore[misc]

            async def tainted() -> bool:
                n = await client.get(f"{NODES}/cli-0")
                return any(t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute"
                           for t in n["spec"].get("taints") or [])

            await eventually(tainted, timeout=5)

            async def evicted() -> bool:
                p = await client.get(f"{PODS}/brief")
                return bool(p["metadata"].get("deletionTimestamp")) and any(
                    c["type"] == "DisruptionTarget" and c.get("reason") == "DeletionByTaintManager"
                    for c in p["status"].get("conditions", []))

            await eventually(evicted, timeout=10)
            stays = await client.get(f"{PODS}/stays")
            assert not stays["metadata"].get("deletionTimestamp")
            assert await _ready(client, "kept-0") == "True"
    finally:
        if kubelet is not None:
            kubelet.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApiError):
                await kubelet
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait(10)
        serve.proc.terminate()
        serve.proc.wait(20)


async def test_a_standalone_simulator_beside_the_servers_under_another_selector_gets_nodes_of_its_own(
        tmp_path: Path) -> None:
    """docs/nodes.md's example: ``controlplane nodes --count N --manage-nodes-with-label-selector
    sim=standalone`` beside ``serve --nodes M --manage-nodes-with-label-selector sim=server``, both with
    the default name prefix. The names the server's nodes hold are passed over: the standalone one
    gets N nodes of its own, renews their Leases and runs their pods (before, it counted the server's
    sim-node-0.. as its own, never adopted them and so never started: its nodes' Leases stood still)."""
    serve = start_serve(tmp_path, extra=("--nodes", "2", "--manage-nodes-with-label-selector", "sim=server"))
    cli: subprocess.Popen[bytes] | None = None
    try:
        serve.wait_ready()
        async with Client.from_kubeconfig(serve.kubeconfig) as client:
            await eventually(lambda: _is(_ready(client, "sim-node-1"), "True"), timeout=20)
            with (tmp_path / "nodes.err").open("wb") as err:
                cli = subprocess.Popen(
                    [sys.executable, "-m", "controlplane", "nodes", "--kubeconfig", str(serve.kubeconfig),
                     "--count", "2", "--manage-nodes-with-label-selector", "sim=standalone", "--renew-interval", "1",
                     "--metrics-address", "127.0.0.1:0"],
                    stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            for node in ("sim-node-2", "sim-node-3"):
                await eventually(lambda node=node: _is(_ready(client, node), "True"), timeout=20)  # type: ignore[misc]
            labels = {n["metadata"]["name"]: n["metadata"]["labels"].get("sim")
                      for n in (await client.get(NODES))["items"]}
            assert labels == {"sim-node-0": "server", "sim-node-1": "server",
                              "sim-node-2": "standalone", "sim-node-3": "standalone"}
            # (its Lease comes after its Node, registered Ready, as a kubelet's lease controller makes it)
            first = (await eventually(lambda: _lease(client, "sim-node-3")))["spec"]["renewTime"]

            async def renewed() -> bool:
                return bool((await client.get(f"{LEASES}/sim-node-3"))["spec"]["renewTime"] != first)

            await eventually(renewed, timeout=10)
            await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-standalone"},
                                       "spec": {"nodeName": "sim-node-3",
                                                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
            await eventually(lambda: _is(_phase(client, "on-standalone"), "Running"), timeout=20)
            said = (tmp_path / "nodes.err").read_text()
            warned = said.index("2 node names (sim-node-0, sim-node-1) taken by nodes it does not play: "
                                "its 2 nodes are sim-node-2, sim-node-3")
            # its start line names the nodes it plays, once it knows them (it named those it meant to)
            started = said.index(f"controlplane nodes: against {serve.url}: creating 2 nodes (sim-node-2..sim-node-3), "
                                 "playing the kubelet of every node annotated kwok.x-k8s.io/node: fake labelled "
                                 "sim=standalone; Ctrl-C stops it")
            assert warned < started and "sim-node-0..sim-node-1" not in said, said
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait(10)
        serve.proc.terminate()
        serve.proc.wait(20)


async def test_a_name_another_simulator_takes_between_the_list_and_the_create_is_passed_over(tmp_path: Path) -> None:
    """Two simulators started together under different selectors with the same prefix: the other's
    node appears after this one listed the nodes and before its create (409). It is passed over as a
    name held from the start is, and the simulator gets its nodes and starts (it waited for ever for a
    node it would never play)."""

    class Raced(NodeSimulator):
        _raced = False

        async def create_nodes(self, names: list[str]) -> None:
            if not self._raced:
                self._raced = True
                await self.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
                    "name": "sim-node-0", "labels": {"sim": "other"},
                    "annotations": {"kwok.x-k8s.io/node": "fake"}}})
            await super().create_nodes(names)

    serve = start_serve(tmp_path)
    try:
        serve.wait_ready()
        async with Client.from_kubeconfig(serve.kubeconfig) as client:
            sim = Raced(client, fast(count=2, node_selector="sim=mine"))
            task = asyncio.create_task(sim.run())
            try:
                await asyncio.wait_for(sim.ready(), 20)
                assert set(sim.nodes) == {"sim-node-1", "sim-node-2"}
                assert (await client.get(f"{NODES}/sim-node-0"))["metadata"]["labels"] == {"sim": "other"}
                assert (await client.get(f"{NODES}/sim-node-2"))["metadata"]["labels"]["sim"] == "mine"
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        serve.proc.terminate()
        serve.proc.wait(20)
