"""The simulated kubelets' Events about pods' containers (``nodes/events.py``)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from controlplane import cli
from controlplane.client import Client, resource_path
from controlplane.nodes.events import go_duration, with_default_tag
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating

EVENTS = resource_path("", "v1", "events", "default")


@pytest.mark.parametrize(("seconds", "printed"), [
    (0, "0s"), (0.0004, "0s"), (0.05, "50ms"), (0.5236, "523ms"), (1.0, "1s"), (1.001, "1.001s"),
    (1.25, "1.25s"), (10.0, "10s"), (61.5, "1m1.5s"), (3600, "1h0m0s"), (3723.4, "1h2m3.4s")])
def test_go_duration_prints_as_go_truncated_to_the_millisecond(seconds: float, printed: str) -> None:
    assert go_duration(seconds) == printed


@pytest.mark.parametrize(("image", "pulled"), [
    ("nginx", "nginx:latest"), ("nginx:1.27", "nginx:1.27"), ("localhost:5000/app", "localhost:5000/app:latest"),
    ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"), ("busybox@sha256:ab", "busybox@sha256:ab")])
def test_an_image_without_tag_nor_digest_is_pulled_as_latest(image: str, pulled: str) -> None:
    assert with_default_tag(image) == pulled


async def _kubelet_events(client: Client, name: str) -> list[dict[str, Any]]:
    items = (await client.list(EVENTS))["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["source"].get("component") == "kubelet"]


def _said(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"].get("fieldPath", ""), e["reason"], e["message"]) for e in events]


async def _running(client: Client, name: str) -> bool:
    return bool((await client.get(f"{PODS}/{name}")).get("status", {}).get("phase") == "Running")


async def test_a_pod_started_on_a_simulated_node_has_the_kubelets_events(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        body = pod("web", "sim-node-0", image="nginx")  # not on the node: pulled (190 MB, about 3.5 s)
        body["spec"]["initContainers"] = [{"name": "setup", "image": "registry.k8s.io/pause:3.10"}]
        await client.create(PODS, body)
        pulling = await eventually(lambda: _kubelet_events(client, "web"))
        assert ("spec.containers{c}", "Pulling", 'Pulling image "nginx:latest"') in _said(pulling)
        assert not await _running(client, "web")  # still pulling
        await eventually(lambda: _running(client, "web"), timeout=15)
        events = await eventually(lambda: _events_at_least(client, "web", 6))
    said = _said(events)
    assert ("spec.initContainers{setup}", "Pulled",
            'Container image "registry.k8s.io/pause:3.10" already present on machine and can be accessed by the pod'
            ) in said
    pulled = [m for path, reason, m in said if reason == "Pulled" and path == "spec.containers{c}"]
    assert len(pulled) == 1 and re.fullmatch(
        r'Successfully pulled image "nginx:latest" in \d+(\.\d+)?s \(\d+(\.\d+)?s including waiting\)\. '
        r'Image size: 190000000 bytes\.', pulled[0]), pulled
    for path in ("spec.initContainers{setup}", "spec.containers{c}"):
        assert (path, "Created", "Container created") in said
        assert (path, "Started", "Container started") in said
    # init container first, as the kubelet starts them
    assert said.index(("spec.initContainers{setup}", "Started", "Container started")) < \
        said.index(("spec.containers{c}", "Created", "Container created"))
    for e in events:
        assert e["source"] == {"component": "kubelet", "host": "sim-node-0"}
        assert e["reportingComponent"] == "kubelet" and e["reportingInstance"] == "sim-node-0"
        assert e["involvedObject"]["kind"] == "Pod" and e["involvedObject"]["uid"] and e["count"] == 1
        assert e["type"] == "Normal"


async def _events_at_least(client: Client, name: str, n: int) -> list[dict[str, Any]]:
    events = await _kubelet_events(client, name)
    return events if len(events) >= n else []


async def test_a_graceful_delete_stops_each_running_container(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        body = pod("web", "sim-node-0", terminationGracePeriodSeconds=1)
        body["spec"]["containers"].append({"name": "log", "image": "registry.k8s.io/pause:3.10"})
        await client.create(PODS, body)
        await eventually(lambda: _running(client, "web"))
        await client.delete(f"{PODS}/web")
        events = await eventually(lambda: _killing(client, "web"))
    assert sorted(_said(events)) == [("spec.containers{c}", "Killing", "Stopping container c"),
                                     ("spec.containers{log}", "Killing", "Stopping container log")]


async def test_a_force_delete_stops_the_containers_too(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await client.create(PODS, pod("web", "sim-node-0"))
        await eventually(lambda: _running(client, "web"))
        await client.delete(f"{PODS}/web", {"gracePeriodSeconds": 0}, gracePeriodSeconds="0")
        events = await eventually(lambda: _killing(client, "web", 1))
    assert _said(events) == [("spec.containers{c}", "Killing", "Stopping container c")]


async def test_an_ephemeral_container_has_its_own_events_and_is_stopped_with_the_pod(client: Client) -> None:
    """kubectl debug's container: its image pulled, then created and started, each event naming it
    (``spec.ephemeralContainers{dbg}``), as a kubelet's; stopped with the pod's containers."""
    async with simulating(client, fast(count=1)):
        await client.create(PODS, pod("web", "sim-node-0", terminationGracePeriodSeconds=1))
        await eventually(lambda: _running(client, "web"))
        await client.patch(f"{PODS}/web/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "busybox"}]}}, "strategic")

        async def debugger_events(n: int) -> list[dict[str, Any]]:
            events = [e for e in await _kubelet_events(client, "web")
                      if e["involvedObject"].get("fieldPath") == "spec.ephemeralContainers{dbg}"]
            return events if len(events) >= n else []

        said = _said(await eventually(lambda: debugger_events(4)))
        await client.delete(f"{PODS}/web")
        stopped = _said(await eventually(lambda: _killing(client, "web")))
    path = "spec.ephemeralContainers{dbg}"
    assert [(p, reason) for p, reason, _ in said] == [(path, "Pulling"), (path, "Pulled"), (path, "Created"),
                                                    (path, "Started")]
    assert said[0][2] == 'Pulling image "busybox:latest"'
    assert said[1][2].startswith('Successfully pulled image "busybox:latest" in ')
    assert sorted(stopped) == [("spec.containers{c}", "Killing", "Stopping container c"),
                               (path, "Killing", "Stopping container dbg")]


async def _killing(client: Client, name: str, n: int = 2) -> list[dict[str, Any]]:
    killing = [e for e in await _kubelet_events(client, name) if e["reason"] == "Killing"]
    return killing if len(killing) == n else []


async def test_an_image_never_pulled_and_absent_is_reported(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        body = pod("web", "sim-node-0", image="nginx:1.27")
        body["spec"]["containers"][0]["imagePullPolicy"] = "Never"
        await client.create(PODS, body)
        events = await eventually(lambda: _events_at_least(client, "web", 2))
    assert sorted((e["type"], e["reason"], e["message"]) for e in events) == [
        ("Warning", "ErrImageNeverPull", 'Container image "nginx:1.27" is not present with pull policy of Never'),
        ("Warning", "Failed", "Error: ErrImageNeverPull")]


async def test_without_pod_events_the_kubelets_record_none(client: Client) -> None:
    async with simulating(client, fast(count=1, pod_events=False)) as sim:
        await client.create(PODS, pod("web", "sim-node-0", terminationGracePeriodSeconds=1))
        await eventually(lambda: _running(client, "web"))
        await client.delete(f"{PODS}/web")
        await eventually(lambda: _gone(client, "web"))
        while sim.pending_writes():
            await asyncio.sleep(0.02)
    assert await _kubelet_events(client, "web") == []


async def _gone(client: Client, name: str) -> bool:
    return not any(p["metadata"]["name"] == name for p in (await client.list(PODS))["items"])


def test_the_switch_is_no_pod_events_on_serve_and_nodes() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["serve"]).pod_events is True
    assert parser.parse_args(["nodes", "--kubeconfig", "kc"]).pod_events is True
    assert parser.parse_args(["nodes", "--kubeconfig", "kc", "--no-pod-events"]).pod_events is False
