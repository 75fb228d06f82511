"""KWOK's own material run against the simulator: where it behaved otherwise than KWOK's controller."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.cli import build_parser, main
from controlplane.client import ApiError, Client
from controlplane.nodes.cli import leases, selection
from controlplane.nodes.config import FAKE_NODE_ANNOTATION
from controlplane.nodes.gotemplate import Template
from controlplane.nodes.simulator import NodeSimulator, stage_retry_delay
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating

REFUSED_STAGE = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-broken}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {broken: "yes"}
  next:
    statusTemplate: |
      conditions: "not a list"
"""


def _count_patches(monkeypatch: pytest.MonkeyPatch, suffix: str) -> list[int]:
    """The simulated kubelets' patches of a path ending in ``suffix``: the list gets one item each."""
    seen: list[int] = []
    real_kubelet = NodeSimulator._kubelet

    class Counting:
        def __init__(self, inner: Client) -> None:
            self.inner = inner

        async def patch(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
            if path.endswith(suffix):
                seen.append(1)
            return await self.inner.patch(path, body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(NodeSimulator, "_kubelet", lambda sim, node: Counting(real_kubelet(sim, node)))
    return seen


async def test_a_stage_write_the_server_refuses_is_logged_and_not_made_again(
        client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A stage whose template renders what the API refuses (here 422: ``conditions`` a string) was
    tried again every second for as long as the pod lived, with nothing logged above debug: a
    broken Stage gave one doomed write a second per pod, silently. KWOK's controller logs
    ``failed to apply stage`` and retries only what ``shouldRetry`` says may pass later (no
    answer, 429, 503, timeouts); the pod's next change draws a stage again."""
    patches = _count_patches(monkeypatch, "/pods/broken/status")
    caplog.set_level(logging.WARNING, logger="controlplane.nodes.simulator")
    async with simulating(client, fast(stages=load_stages(REFUSED_STAGE))):
        body = pod("broken", "sim-node-0")
        body["metadata"]["labels"] = {"broken": "yes"}
        await client.create(PODS, body)
        await eventually(lambda: asyncio.sleep(0, result=patches))
        await asyncio.sleep(2.5)  # two retries' worth at the old rate
        assert len(patches) == 1
        [record] = [r for r in caplog.records if "pod-broken" in r.getMessage()]
        assert "default/broken" in record.getMessage() and "422" in record.getMessage()
        # its next change draws the stage again, as KWOK's next event of the pod does
        await client.patch(f"{PODS}/broken", {"metadata": {"labels": {"touched": "1"}}}, patch_type="merge")
        await eventually(lambda: asyncio.sleep(0, result=len(patches) == 2))


async def test_kwoks_node_selection_flags_choose_the_nodes_played(client: Client) -> None:
    """KWOK's --manage-nodes-with-annotation-selector and --manage-all-nodes (kwokctl runs its
    controller with the first; a KWOK deployment's arguments carry them) were refused by
    ``controlplane nodes`` and ``serve`` as unknown options: only ``kwok.x-k8s.io/node: fake``
    nodes could be played. Now the annotation selector says which nodes are fake (the nodes the
    simulator creates get its key=value annotations), and --manage-all-nodes takes every node."""
    def node(name: str, annotations: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}

    await client.create(NODES, node("plain", {}))
    await client.create(NODES, node("kwok-only", {FAKE_NODE_ANNOTATION: "fake"}))
    await client.create(NODES, node("lab", {"example.com/sim": "lab"}))

    async def ready(name: str) -> bool:
        conditions = (await client.get(f"{NODES}/{name}")).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    async with simulating(client, fast(count=1, name_prefix="lab-", node_annotation_selector="example.com/sim=lab")) \
            as sim:
        await eventually(lambda: ready("lab"))
        assert set(sim.nodes) == {"lab", "lab-0"}
        assert (await client.get(f"{NODES}/lab-0"))["metadata"]["annotations"]["example.com/sim"] == "lab"
        assert not await ready("plain") and not await ready("kwok-only")
    async with simulating(client, fast(count=0, manage_all_nodes=True)) as sim:
        await eventually(lambda: ready("plain"))
        assert {"plain", "kwok-only", "lab", "lab-0"} <= set(sim.nodes)
    with pytest.raises(ValueError, match="would not take the nodes this simulator creates"):
        NodeSimulator(Client("http://127.0.0.1:1"), fast(count=1, node_annotation_selector="example.com/sim"))
    with pytest.raises(ValueError, match="--manage-all-nodes cannot be used with"):
        NodeSimulator(Client("http://127.0.0.1:1"), fast(manage_all_nodes=True, node_selector="a=b"))


def test_kwoks_node_selection_flags_on_the_command_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n"
                          "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                          "users: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    assert main(["nodes", "--kubeconfig", str(kubeconfig), "--manage-all-nodes",
                 "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"]) == 2
    assert "--manage-all-nodes conflicts with" in capsys.readouterr().err
    args = build_parser().parse_args(["nodes", "--kubeconfig", "k", "--manage-all-nodes=false",
                                      "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"])
    assert selection(args) == {"node_selector": "", "manage_all_nodes": False,
                               "node_annotation_selector": "kwok.x-k8s.io/node=fake"}
    args = build_parser().parse_args(["serve", "--manage-all-nodes"])
    assert selection(args)["manage_all_nodes"] is True
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--manage-all-nodes=maybe"])


@pytest.mark.parametrize(("text", "want"), [
    ('{{ printf "%05d|%x|%t|%v" 3 255 true .metadata.labels }}', "00003|ff|true|map[app:web]"),
    ('{{ printf "%-6s|%6s|%.2s" "ab" "cd" .metadata.name }}', "ab    |    cd|we"),
    ('{{ printf "%.2f %e %g %g" 3.14159 123456.789 1000000.0 0.5 }}', "3.14 1.234568e+05 1e+06 0.5"),
    ('{{ printf "%+d %#x %o %b %c %q" 5 255 8 5 65 .metadata.name }}', '+5 0xff 10 101 A "web"'),
    ('{{ printf "%d|%s|%d %d|%z" "x" .metadata.nothing 1 }}', "%!d(string=x)|%!s(<nil>)|1 %!d(MISSING)|%!z(MISSING)"),
    ('{{ printf "%d%%" 1 2 }}', "1%%!(EXTRA int=2)"),
    ('{{ printf "kwok-%s" "v0.8.0" }}', "kwok-v0.8.0"),
])
def test_printf_formats_as_gos_fmt(text: str, want: str) -> None:
    """``printf`` read ``%s %d %v %q`` only and copied any other verb, or one with a flag, width or
    precision, into the output as it was: ``printf "%05d" 3`` rendered ``%05d``, silently. Go's
    ``fmt.Sprintf`` (text/template's ``printf``) pads, rounds and converts, and writes its
    complaints into the text (``%!d(string=x)``, ``%!s(MISSING)``, ``%!(EXTRA int=2)``)."""
    obj = {"metadata": {"name": "web", "labels": {"app": "web"}}}
    assert Template(text).render(obj, {}) == want


def test_stage_retries_back_off_as_kwoks() -> None:
    """KWOK's ``backoffDelayByStep`` over ``defaultBackoff``: a second, doubling, 32 minutes at most,
    plus up to a fifth."""
    rng = random.Random(7)
    for retries, base in ((0, 1.0), (1, 2.0), (3, 8.0), (11, 1920.0), (40, 1920.0)):
        got = stage_retry_delay(retries, rng)
        assert base <= got <= base * 1.2


async def test_a_stage_the_server_keeps_failing_is_tried_again_later_and_later(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage whose write failed for the server's sake (here 503, as a server shedding load
    answers) was tried again every second for as long as it failed: 10,000 pods' stages were
    10,000 writes a second at a server already refusing them. KWOK's controllers wait a second,
    then two, four... (``backoffDelayByStep``); the stage still goes through once the server
    takes it, and the count starts again from there."""
    attempts: list[float] = []
    real_kubelet = NodeSimulator._kubelet

    class Shedding:
        def __init__(self, inner: Client) -> None:
            self.inner = inner

        async def patch(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
            if path.endswith("/pods/shed/status"):
                attempts.append(time.monotonic())
                if len(attempts) <= 2:
                    raise ApiError(503, "ServiceUnavailable", "the server is shedding load")
            return await self.inner.patch(path, body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(NodeSimulator, "_kubelet", lambda sim, node: Shedding(real_kubelet(sim, node)))
    async with simulating(client, fast()) as sim:
        await client.create(PODS, pod("shed", "sim-node-0"))

        async def running() -> bool:
            return bool((await client.get(f"{PODS}/shed")).get("status", {}).get("phase") == "Running")

        await eventually(running, timeout=15)
        first, second = attempts[1] - attempts[0], attempts[2] - attempts[1]
        assert 0.9 <= first <= 1.5 and 1.9 <= second <= 2.7, attempts
        assert sim.pods["default/shed"].retries == 0


def test_a_kwok_configurations_options_are_named_where_they_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    """A KWOK config file holds its KwokConfiguration beside its Stages; its options (KWOK's flags'
    defaults) were skipped with the document, the warning naming none of them, so a
    ``manageAllNodes: true`` was lost without a word. The warning now lists each option and the
    flag that does it here, or that nothing does."""
    caplog.set_level(logging.WARNING, logger="controlplane.nodes.stages")
    stages = load_stages("""
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: true
  cidr: 10.0.0.1/24
---
""" + REFUSED_STAGE)
    assert [s.name for s in stages] == ["pod-broken"]
    [record] = caplog.records
    assert record.getMessage() == (
        "stages: skipping KwokConfiguration (not a Stage); its options are not read from a file here "
        "(cidr: not supported, manageAllNodes: give --manage-all-nodes)")


def test_kwoks_node_lease_duration_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KWOK's --node-lease-duration-seconds (kwokctl's 40; a KWOK deployment's arguments carry it)
    was an unknown option of ``controlplane nodes``. It sets the Leases' duration and their renewal
    every quarter of it, as KWOK's lease controller (the kubelet's rule); KWOK's 0, nodes without
    Leases, is refused by name."""
    def parsed(*argv: str) -> dict[str, Any]:
        return leases(build_parser().parse_args(["nodes", "--kubeconfig", "k", *argv]))

    assert parsed() == {"lease_duration_seconds": 40, "renew_interval": 10.0}
    assert parsed("--node-lease-duration-seconds=20") == {"lease_duration_seconds": 20, "renew_interval": 5.0}
    assert parsed("--node-lease-duration-seconds=20", "--renew-interval", "2") == {
        "lease_duration_seconds": 20, "renew_interval": 2.0}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert main(["nodes", "--kubeconfig", str(kubeconfig), "--node-lease-duration-seconds=0"]) == 2
    assert "nodes without Leases (KWOK's 0) are not supported here" in capsys.readouterr().err
