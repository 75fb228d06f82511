"""Startup and readiness probes' timing as a kubelet's prober gives it (nodes/probes.py), seen
with kubectl against ``controlplane serve --nodes 2``: a pod Running but not ready until its
probes' initial delays have passed, out of its Service's ready endpoints meanwhile, and a
rollout that waits for it."""

from __future__ import annotations

import contextlib
import json
import queue
import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from tests.e2e.test_kubectl import kubectl, watching
from tests.e2e.test_kubectl_day2 import eventually
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("probes"), scheduler=True, extra=("--nodes", "2"))) as s:
        yield s


def _app(name: str, probes: str) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: web
        image: "nginx:1.27"
        ports: [{{containerPort: 80}}]
{probes}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec:
  selector: {{app: {name}}}
  ports: [{{port: 80}}]
"""


SLOW = """        startupProbe: {tcpSocket: {port: 80}, initialDelaySeconds: 2, periodSeconds: 1}
        readinessProbe: {httpGet: {path: /, port: 80}, initialDelaySeconds: 4, periodSeconds: 2}"""
NEVER_SOON = """        readinessProbe: {httpGet: {path: /, port: 80}, initialDelaySeconds: 3600}"""


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_pod_is_ready_once_its_probes_initial_delays_have_passed(served: Serve) -> None:
    with watching(served, "pods", "-l", "app=slow") as lines:
        kubectl(served, "apply", "-f", "-", stdin=_app("slow", SLOW))
        seen: list[list[str]] = []
        deadline = time.monotonic() + 60
        while not any(line[1:3] == ["1/1", "Running"] for line in seen):
            assert time.monotonic() < deadline, seen
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1).split())
    # Running before ready, as the watch showed it
    running_at = next(i for i, line in enumerate(seen) if line[1:3] == ["0/1", "Running"])
    assert running_at < next(i for i, line in enumerate(seen) if line[1:3] == ["1/1", "Running"])
    kubectl(served, "rollout", "status", "deployment/slow", "--timeout=60s")
    for item in json.loads(kubectl(served, "get", "pods", "-l", "app=slow", "-o", "json"))["items"]:
        (container,) = item["status"]["containerStatuses"]
        assert container["ready"] and container["started"]
        ready = next(c for c in item["status"]["conditions"] if c["type"] == "Ready")
        # not before the readiness probe's initial delay (4 s) from the container's start
        assert _seconds(ready["lastTransitionTime"]) - _seconds(container["state"]["running"]["startedAt"]) >= 4


def test_a_pod_not_ready_yet_is_a_not_ready_endpoint_and_holds_its_rollout(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=_app("waiting", NEVER_SOON))

    def running() -> list[dict[str, object]]:
        items = json.loads(kubectl(served, "get", "pods", "-l", "app=waiting", "-o", "json"))["items"]
        return items if len(items) == 2 and all(i["status"].get("phase") == "Running" for i in items) else []

    for item in eventually(running):
        (container,) = item["status"]["containerStatuses"]
        assert (container["ready"], container["started"]) == (False, True)
        conditions = {c["type"]: c for c in item["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "ContainersNotReady"
        assert conditions["ContainersReady"]["message"] == "containers with unready status: [web]"
    assert all(line.split()[1:3] == ["0/1", "Running"]
               for line in kubectl(served, "get", "pods", "-l", "app=waiting").splitlines()[1:])

    def endpoints_listed() -> bool:
        slices = json.loads(kubectl(served, "get", "endpointslices", "-l", "kubernetes.io/service-name=waiting",
                                    "-o", "json"))["items"]
        endpoints = [e for s in slices for e in s.get("endpoints") or ()]
        return len(endpoints) == 2 and all(e["conditions"] == {"ready": False, "serving": False,
                                                               "terminating": False} for e in endpoints)

    eventually(endpoints_listed)
    subsets = json.loads(kubectl(served, "get", "endpoints", "waiting", "-o", "json"))["subsets"]
    assert len(subsets[0]["notReadyAddresses"]) == 2 and "addresses" not in subsets[0]
    deployment = json.loads(kubectl(served, "get", "deployment", "waiting", "-o", "json"))
    assert deployment["status"].get("availableReplicas") is None and deployment["status"]["replicas"] == 2
