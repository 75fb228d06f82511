"""The scheduler as ``controlplane serve``'s component, in process: ``--no-scheduler``
leaves pods unbound; the attempts metric counts an unschedulable pod under its label."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controlplane import cli, components
from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from controlplane.metrics import REGISTRY
from controlplane.scheduler import scheduler as scheduler_module

from .helpers import create_node, node, pod
from .inprocess import running

PODS = "/api/v1/namespaces/default/pods"


async def test_serve_no_scheduler_leaves_pods_unbound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(
        ["serve", "--no-tls", "--no-scheduler", "--data-dir", str(tmp_path / "data")]))
    assert not config.scheduler
    assert "scheduler" not in {c.name for c in components.enabled(config)}
    started: list[Config] = []
    real_start = scheduler_module.start

    async def start(client: Client, cfg: Config) -> None:  # would the server start it anyway?
        started.append(cfg)
        await real_start(client, cfg)

    monkeypatch.setattr(scheduler_module, "start", start)
    app = create_app(config)  # every component serve would run with this command line
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await create_node(c, node("n1"))
        await c.create(PODS, {**pod("p"), "metadata": {"name": "p", "namespace": "default"}})
        await asyncio.sleep(1.0)  # bound within a few ms when a scheduler runs
        got = await c.get(f"{PODS}/p")
        assert not got["spec"].get("nodeName")
        assert not got["status"].get("conditions")  # nobody even tried
        assert not (await c.list("/api/v1/namespaces/default/events"))["items"]
    assert not started


def _scraped(result: str) -> float:
    """The counter's sample as /metrics shows it."""
    from prometheus_client import generate_latest

    want = f'controlplane_scheduler_schedule_attempts_total{{result="{result}"}} '
    for line in generate_latest(REGISTRY).decode().splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    return 0.0


async def test_an_unschedulable_pod_is_counted_under_its_result_label(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        await cluster.nodes(node("n1", cpu="1"))
        before = {r: _scraped(r) for r in ("unschedulable", "scheduled", "error")}
        await cluster.pods(pod("huge", cpu="64"))
        await cluster.until(lambda: cluster.sched.queue.where("default/huge") == "unschedulable")
        await cluster.settle(0.3)
        after = {r: _scraped(r) for r in before}
        assert after == {**before, "unschedulable": before["unschedulable"] + 1}
        await cluster.pods(pod("small", cpu="100m"))
        await cluster.bound("small")
        assert _scraped("scheduled") == before["scheduled"] + 1
        assert _scraped("unschedulable") == before["unschedulable"] + 1  # a pod bound is no event for it
