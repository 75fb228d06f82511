"""The scheduler over a real socket: inside ``controlplane serve``, and as
``controlplane scheduler --kubeconfig`` in its own process against a server in another."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from controlplane.client import Client
from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, start_serve
from tests.test_metricsserver import metrics_url

from .helpers import create_node, node, pod, podgroup

PODS = "/api/v1/namespaces/default/pods"
AGE = r"\d+s"  # an event's age in seconds, as kubectl prints it (duration.HumanDuration)


async def _wait_bound(c: Client, names: set[str], timeout: float = 20.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        items = (await c.list(PODS))["items"]
        where = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items}
        if all(where.get(n) for n in names):
            return where
        if time.monotonic() > deadline:
            raise AssertionError(f"not bound in time: {where}")
        await asyncio.sleep(0.1)


async def _until_condition(c: Client, name: str) -> list[dict[str, Any]]:
    """The pod's conditions once it has one (the scheduler's PodScheduled)."""
    deadline = time.monotonic() + 10
    while True:
        conds: list[dict[str, Any]] = (await c.get(f"{PODS}/{name}"))["status"].get("conditions") or []
        if conds:
            return conds
        assert time.monotonic() < deadline, "no PodScheduled condition"
        await asyncio.sleep(0.1)


async def _exercise(kubeconfig: Path) -> None:
    c = Client.from_kubeconfig(kubeconfig)
    try:
        # no node yet: upstream's ErrNoNodesAvailable, no "0/0 nodes are available"; a node added requeues it
        await c.create(PODS, pod("early", cpu="100m"))
        await _until_condition(c, "early")
        conds = (await c.get(f"{PODS}/early"))["status"]["conditions"]
        assert (conds[0]["reason"], conds[0]["message"]) == ("Unschedulable", "no nodes available to schedule pods")
        await create_node(c, node("n1", cpu="2"))
        await create_node(c, node("n2", cpu="2", extra={"nvidia.com/gpu": "4"}))
        await c.create(PODS, pod("plain", cpu="1"))
        await c.create(PODS, pod("gpu", cpu="1", extra={"nvidia.com/gpu": "2"}))
        await c.create("/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups", podgroup("pair", 2))
        await c.create(PODS, pod("g1", cpu="500m", group="pair"))
        await c.create(PODS, pod("g2", cpu="500m", group="pair"))
        where = await _wait_bound(c, {"early", "plain", "gpu", "g1", "g2"})
        assert where["gpu"] == "n2"
        await c.create(PODS, pod("huge", cpu="64"))
        conds = await _until_condition(c, "huge")
        assert conds[0]["reason"] == "Unschedulable"
        assert conds[0]["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    finally:
        await c.aclose()


async def _scheduled_event(kubeconfig: Path, name: str) -> tuple[dict[str, Any], ...]:
    """The pod, and its Scheduled event read as events.k8s.io/v1 and as core/v1."""
    async with Client.from_kubeconfig(kubeconfig) as c:
        deadline = time.monotonic() + 10
        while True:
            items = (await c.list("/apis/events.k8s.io/v1/namespaces/default/events",
                                  fieldSelector=f"regarding.name={name},reason=Scheduled"))["items"]
            if items:
                break
            assert time.monotonic() < deadline, f"no Scheduled event of {name}"
            await asyncio.sleep(0.1)
        return (await c.get(f"{PODS}/{name}"), items[0],
                await c.get(f"/api/v1/namespaces/default/events/{items[0]['metadata']['name']}"))


def _as_kube_scheduler_writes_it(s: Serve) -> None:
    """The Scheduled event is kube-scheduler's events.k8s.io/v1 one through both versions,
    and kubectl shows it as it shows a real cluster's."""
    pod_obj, event, core = asyncio.run(_scheduled_event(s.kubeconfig, "plain"))
    node_name = pod_obj["spec"]["nodeName"]
    assert {k: event[k] for k in ("reportingController", "action", "reason", "type", "note")} == {
        "reportingController": "default-scheduler", "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": f"Successfully assigned default/plain to {node_name}"}
    assert event["reportingInstance"] == f"default-scheduler-{socket.gethostname()}"
    assert {k: event["regarding"][k] for k in ("apiVersion", "kind", "namespace", "name", "uid")} == {
        "apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "plain", "uid": pod_obj["metadata"]["uid"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    assert not {"series", "related"} & set(event) and event["deprecatedSource"] == {}  # a struct: Go writes it
    # no legacy count; the legacy timestamps zero, which Go writes as null (a Time is a struct)
    assert {k: event[k] for k in event if k.startswith("deprecated") and k != "deprecatedSource"} == {
        "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None}
    # the core/v1 view: upstream's conversion of it, no legacy count (null timestamps), an empty source
    assert (core["message"], core["involvedObject"], core["eventTime"], core["reportingComponent"],
            core["reportingInstance"], core["action"]) == (event["note"], event["regarding"], event["eventTime"],
                                                          "default-scheduler", event["reportingInstance"], "Binding")
    assert not {"count", "series"} & set(core) and core["source"] == {}
    assert core["firstTimestamp"] is None and core["lastTimestamp"] is None
    # kubectl describe (core/v1 events, aged from eventTime, From the reporting controller)
    described = kubectl(s, "describe", "pod", "plain")
    line = f"Normal +Scheduled +{AGE} +default-scheduler +Successfully assigned default/plain to {node_name}"
    assert re.search(line, described[described.index("Events:"):]), described
    shown = kubectl(s, "events", "--for", "pod/plain")
    assert re.search(f"{AGE} +Normal +Scheduled +Pod/plain +Successfully assigned default/plain", shown), shown
    listed = kubectl(s, "get", "events", "--field-selector", "involvedObject.name=plain")
    assert re.search(f"{AGE} +Normal +Scheduled +pod/plain +Successfully assigned default/plain", listed), listed


def test_the_scheduler_inside_serve_binds_over_the_socket(tmp_path: Path) -> None:
    s = start_serve(tmp_path, scheduler=True)
    try:
        s.wait_ready()
        asyncio.run(_exercise(s.kubeconfig))
        _as_kube_scheduler_writes_it(s)
        metrics = httpx.get(f"{s.url}/metrics").text
        assert 'controlplane_scheduler_schedule_attempts_total{result="scheduled"} 5.0' in metrics
        assert "controlplane_scheduler_e2e_scheduling_seconds_count 5.0" in metrics
        assert 'controlplane_podgroup_schedule_attempts_total{result="scheduled"} 1.0' in metrics
    finally:
        s.proc.kill()
        s.proc.wait()


def test_the_standalone_scheduler_against_a_server_in_another_process(tmp_path: Path) -> None:
    """It binds, and serves its own metrics (the server's /metrics has none of them), as
    kube-scheduler does on its port."""
    s = start_serve(tmp_path, extra=("--no-scheduler",))
    sched: subprocess.Popen[bytes] | None = None
    try:
        s.wait_ready()
        with (tmp_path / "scheduler.log").open("wb") as log:
            sched = subprocess.Popen([sys.executable, "-m", "controlplane", "scheduler",
                                      "--kubeconfig", str(s.kubeconfig), "--metrics-address", "127.0.0.1:0"],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        asyncio.run(_exercise(s.kubeconfig))
        assert sched.poll() is None
        own = metrics_url(tmp_path / "scheduler.log")
        metrics = httpx.get(f"{own}/metrics").text
        assert 'controlplane_scheduler_schedule_attempts_total{result="scheduled"} 5.0' in metrics
        assert re.search(r'^controlplane_scheduler_schedule_attempts_total\{result="unschedulable"\} [1-9]', metrics,
                         re.M)  # early, before a node; huge
        assert "controlplane_scheduler_e2e_scheduling_seconds_count 5.0" in metrics
        assert 'controlplane_podgroup_schedule_attempts_total{result="scheduled"} 1.0' in metrics
        assert "apiserver_request_total" not in metrics and "process_cpu_seconds_total" in metrics
        assert "controlplane_scheduler_e2e_scheduling_seconds_count 0.0" in httpx.get(f"{s.url}/metrics").text
        assert httpx.get(f"{own}/readyz").text == "ok"
        assert httpx.get(f"{own}/api/v1/pods").status_code == 404
        sched.terminate()
        assert sched.wait(timeout=10) == 0
        assert "synced" in (tmp_path / "scheduler.log").read_text()
    finally:
        if sched is not None and sched.poll() is None:
            sched.kill()
            sched.wait()
        s.proc.kill()
        s.proc.wait()


async def _a_pod_runs_on_a_simulated_node(kubeconfig: Path) -> None:
    async with Client.from_kubeconfig(kubeconfig) as c:
        await c.create(PODS, pod("web", cpu="100m"))
        deadline = time.monotonic() + 30
        while True:
            got = await c.get(f"{PODS}/web")
            if got["status"].get("phase") == "Running":
                break
            assert time.monotonic() < deadline, f"not running: {got['spec'].get('nodeName')} {got['status']}"
            await asyncio.sleep(0.2)
        assert got["spec"]["nodeName"].startswith("sim-node-")


def test_serve_with_simulated_nodes_schedules_and_runs_pods(tmp_path: Path) -> None:
    """The whole path in one server: the scheduler binds, the node simulator runs the pod."""
    s = start_serve(tmp_path, scheduler=True, extra=("--nodes", "3"))

    try:
        s.wait_ready()
        asyncio.run(_a_pod_runs_on_a_simulated_node(s.kubeconfig))
    finally:
        s.proc.kill()
        s.proc.wait()


def test_serve_components_process_runs_them_beside_the_server(tmp_path: Path) -> None:
    """``serve --components-process``: the scheduler and the node simulator in a process
    ``serve`` forks, clients of it over its TLS socket; a pod is bound and runs, the
    server's /metrics shows the child's scheduler and simulator metrics, and SIGTERM stops both promptly."""
    s = start_serve(tmp_path, scheduler=True, extra=("--nodes", "3", "--components-process"))

    try:
        s.wait_ready()
        children = [c for c in Path(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read_text().split()
                    if b"\0serve\0" in Path(f"/proc/{c}/cmdline").read_bytes()]  # (not the store's applier)
        assert len(children) == 1, children
        asyncio.run(_a_pod_runs_on_a_simulated_node(s.kubeconfig))
        # the child's metrics on the server's /metrics (componentsmetrics.py), each family once
        metrics = httpx.get(f"{s.url}/metrics", verify=False).text
        scheduled = re.search(r'^controlplane_scheduler_schedule_attempts_total\{result="scheduled"\} (\S+)$',
                              metrics, re.M)
        assert scheduled is not None and float(scheduled.group(1)) >= 1, metrics
        assert re.search(r"^controlplane_nodes_pod_start_seconds_count (\S+)$", metrics, re.M)
        helps = re.findall(r"^# HELP (\S+) ", metrics, re.M)
        assert len(helps) == len(set(helps))
        assert "controlplane_request_duration_seconds_bucket" in metrics  # and the server's own
        s.proc.terminate()
        assert s.proc.wait(timeout=20) == 0
        assert not Path(f"/proc/{children[0]}").exists() or "Z" in Path(f"/proc/{children[0]}/stat").read_text()
        assert "Traceback" not in s.stderr.read_text()
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
