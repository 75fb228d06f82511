"""``pods/<name>/log?follow=true`` over a real socket: the stream stays open while the container
runs and ends when it stops (its status leaves ``running``) or the pod is deleted, as a
kubelet's; a client that goes frees the request; idle followers cost the server nothing."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("logs"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


@pytest.fixture(scope="module")
def core(served: Serve) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


def _run_pod(served: Serve, core: client.CoreV1Api, name: str) -> None:
    """A pod the simulated node runs (its container's state ``running``)."""
    kubectl(served, "run", name, "--image=nginx:1.27")
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod(name, "default").status.phase != "Running":
        assert time.monotonic() < deadline, "the pod did not run within 30 s"
        time.sleep(0.1)


GHOST = """
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: ghost
  containers: [{name: c, image: "nginx:1.27"}]
"""


def _ghost_pod(served: Serve, name: str, state: str) -> None:
    """A pod on a node no simulator manages, whose container status the test writes as a kubelet would."""
    kubectl(served, "apply", "-f", "-", stdin=GHOST % name)
    _set_state(served, name, state)


def _set_state(served: Serve, name: str, state: str, restarts: int = 0) -> None:
    kubectl(served, "patch", "pod", name, "--subresource=status", "--type=merge", "-p",
            '{"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "nginx:1.27", '
            f'"imageID": "", "ready": true, "restartCount": {restarts}, "containerID": "containerd://c{restarts}", '
            f'"state": {state}}}]}}}}')


def _follow(served: Serve, name: str, *extra: str) -> subprocess.Popen[str]:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.Popen([KUBECTL, "logs", "-f", name, *extra], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _still_following(proc: subprocess.Popen[str], seconds: float = 2.0) -> None:
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        return
    pytest.fail(f"kubectl logs -f ended ({proc.returncode}) while the container runs: {out!r} {err!r}")


def _ended(proc: subprocess.Popen[str], within: float = 15.0) -> str:
    out, err = proc.communicate(timeout=within)
    assert proc.returncode == 0, err
    return out


def _log_requests_done(served: Serve) -> int:
    """How many ``pods/log`` requests the server has finished with 200 (its request metric)."""
    text = httpx.get(served.url + "/metrics", headers=bearer(served), timeout=30).text
    total = 0
    for line in text.splitlines():
        if line.startswith("controlplane_request_duration_seconds_count{") and 'subresource="log"' in line \
                and 'code="200"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# --------------------------------------------------------------------------- kubectl logs -f

def test_kubectl_follow_holds_while_running_and_ends_when_the_pod_is_deleted(served: Serve,
                                                                             core: client.CoreV1Api) -> None:
    _run_pod(served, core, "followed")
    proc = _follow(served, "followed")
    try:
        _still_following(proc, 3.0)
        kubectl(served, "delete", "pod", "followed", "--grace-period=1", "--wait=false")
        assert _ended(proc) == ""
    finally:
        proc.kill()


def test_kubectl_follow_ends_when_the_container_stops_running(served: Serve) -> None:
    _ghost_pod(served, "stopping", '{"running": {"startedAt": "2026-01-01T00:00:00Z"}}')
    proc = _follow(served, "stopping")
    try:
        _still_following(proc)
        kubectl(served, "label", "pod", "stopping", "touched=yes")  # other changes leave it running
        _still_following(proc)
        _set_state(served, "stopping", '{"terminated": {"exitCode": 0, "reason": "Completed"}}')
        assert _ended(proc) == ""
    finally:
        proc.kill()


def test_follow_ends_when_a_new_instance_of_the_container_replaces_it(served: Serve) -> None:
    _ghost_pod(served, "restarted", '{"running": {}}')
    proc = _follow(served, "restarted")
    try:
        _still_following(proc)
        _set_state(served, "restarted", '{"running": {}}', restarts=1)
        assert _ended(proc) == ""
    finally:
        proc.kill()


def test_follow_of_a_stopped_container_or_a_pod_without_a_node_ends_at_once(served: Serve) -> None:
    _ghost_pod(served, "done", '{"terminated": {"exitCode": 0, "reason": "Completed"}}')
    assert kubectl(served, "logs", "-f", "done") == ""
    kubectl(served, "apply", "-f", "-", stdin=(GHOST % "unbound").replace("  nodeName: ghost\n", "")
            .replace("spec:\n", "spec:\n  nodeSelector: {no-such: node}\n"))
    assert kubectl(served, "logs", "-f", "unbound") == ""


# --------------------------------------------------------------------------- the Python client

def test_python_client_follow_stream_stays_open_until_the_pod_is_deleted(served: Serve,
                                                                        core: client.CoreV1Api) -> None:
    _run_pod(served, core, "streamed")
    # not preloaded, the answer is urllib3's response (typed as the log's text)
    r: Any = core.read_namespaced_pod_log("streamed", "default", follow=True, _preload_content=False)
    assert r.status == 200
    assert r.headers["content-type"] == "text/plain"
    assert r.headers["transfer-encoding"] == "chunked"
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(r.read()), daemon=True)
    reader.start()
    reader.join(3.0)
    assert reader.is_alive(), "the follow stream ended while the container runs"
    core.delete_namespaced_pod("streamed", "default", grace_period_seconds=0)
    reader.join(15.0)
    assert not reader.is_alive(), "the follow stream outlived the pod"
    assert read == [b""]
    r.release_conn()


# --------------------------------------------------------------------------- clients that go, many followers

def test_a_follower_that_disconnects_frees_its_request(served: Serve) -> None:
    _ghost_pod(served, "abandoned", '{"running": {}}')
    before = _log_requests_done(served)
    url = served.url + "/api/v1/namespaces/default/pods/abandoned/log?follow=true"
    with httpx.Client(headers=bearer(served), timeout=30) as c, c.stream("GET", url) as r:
        assert r.status_code == 200
        time.sleep(0.5)
        assert _log_requests_done(served) == before  # still open
    deadline = time.monotonic() + 10
    while _log_requests_done(served) == before:
        assert time.monotonic() < deadline, "the server still holds the follow its client closed"
        time.sleep(0.1)
    assert _log_requests_done(served) == before + 1


def test_two_hundred_idle_followers_cost_nothing_measurable(served: Serve) -> None:
    _ghost_pod(served, "popular", '{"running": {}}')
    pid = served.proc.pid
    idle = 3.0
    start = _cpu_seconds(pid)
    time.sleep(idle)
    baseline = _cpu_seconds(pid) - start
    url = served.url + "/api/v1/namespaces/default/pods/popular/log?follow=true"
    with httpx.Client(headers=bearer(served), timeout=30, limits=httpx.Limits(max_connections=250)) as c:
        followers = [c.send(c.build_request("GET", url), stream=True) for _ in range(200)]
        try:
            assert {r.status_code for r in followers} == {200}
            time.sleep(0.5)  # the last ones settled
            start = _cpu_seconds(pid)
            time.sleep(idle)
            following = _cpu_seconds(pid) - start
            # the server idles as it did without them (timers and heartbeats of its own, in ticks of 10 ms)
            assert following <= baseline + 0.1, (baseline, following)
            kubectl(served, "delete", "pod", "popular", "--grace-period=0", "--force")
            ended = time.monotonic()
            assert all(r.read() == b"" for r in followers)
            assert time.monotonic() - ended < 10
        finally:
            for r in followers:
                r.close()


def test_follow_options_are_still_validated_and_unknown_containers_refused(served: Serve) -> None:
    _ghost_pod(served, "checked", '{"running": {}}')
    r = httpx.get(served.url + "/api/v1/namespaces/default/pods/checked/log?follow=true&tailLines=-1",
                  headers=bearer(served), timeout=30)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    r = httpx.get(served.url + "/api/v1/namespaces/default/pods/checked/log?follow=true&container=nope",
                  headers=bearer(served), timeout=30)
    assert r.status_code == 400 and r.json()["message"] == "container nope is not valid for pod checked"
    r = httpx.get(served.url + "/api/v1/namespaces/default/pods/missing/log?follow=true",
                  headers=bearer(served), timeout=30)
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"
    assert re.fullmatch(r'pods "missing" not found', r.json()["message"])
