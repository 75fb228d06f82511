"""``kubectl top``, ``kubectl autoscale`` and the official client over a real socket: the
metrics.k8s.io API (api/resourcemetrics.py) and the HorizontalPodAutoscaler controller
(controllers/podautoscaler.py) in ``controlplane serve --nodes 2``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any, cast

import pytest
from kubernetes import client, config

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, running, start_serve

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: busy}
spec:
  replicas: 2
  selector: {matchLabels: {app: busy}}
  template:
    metadata:
      labels: {app: busy}
      annotations: {kwok.x-k8s.io/usage-cpu: 150m, kwok.x-k8s.io/usage-memory: 48Mi}
    spec:
      containers:
      - {name: app, image: "nginx:1.27", resources: {requests: {cpu: 100m, memory: 64Mi}}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    # (autoscalers reconciled every 4 s, not 15, and the pods' CPU counted once they are ready,
    # not once ready for a whole 15 s metric window: kube-controller-manager's flags)
    with running(start_serve(tmp_path_factory.mktemp("top"), scheduler=True,
                             extra=("--nodes", "2", "--horizontal-pod-autoscaler-sync-period", "4s",
                                    "--horizontal-pod-autoscaler-cpu-initialization-period", "0s"))) as s:
        kubectl(s, "apply", "-f", "-", stdin=DEPLOYMENT)
        kubectl(s, "rollout", "status", "deployment/busy", "--timeout=60s")
        yield s


def test_kubectl_top_pods_and_nodes(served: Serve) -> None:
    out = kubectl(served, "top", "pods", "-l", "app=busy", "--no-headers")
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 2 and all(r[1:] == ["150m", "48Mi"] for r in rows), out
    out = kubectl(served, "top", "nodes", "--no-headers")
    nodes = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    assert sorted(nodes) == ["sim-node-0", "sim-node-1"], out
    # the two pods' 150m land on one node or both
    assert sorted(nodes.values()) in (["0m", "300m"], ["150m", "150m"]), out
    # the quantities as metrics-server marshals them: canonical (150m, 48Mi), not in nanocores and Ki
    raw = json.loads(kubectl(served, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"))
    assert {(c["usage"]["cpu"], c["usage"]["memory"]) for p in raw["items"] if p["metadata"]["name"].startswith("busy")
            for c in p["containers"]} == {("150m", "48Mi")}
    table = kubectl(served, "get", "pods.metrics.k8s.io", "-l", "app=busy")
    assert table.split("\n")[0].split() == ["NAME", "CPU", "MEMORY", "WINDOW"]
    assert "150m" in table and "48Mi" in table


def test_the_official_client_reads_metrics(served: Serve) -> None:
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        custom = client.CustomObjectsApi(api)
        pods = cast(dict[str, Any], custom.list_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", "default", "pods", label_selector="app=busy"))
        assert {c["usage"]["cpu"] for p in pods["items"] for c in p["containers"]} == {"150m"}
        nodes = cast(dict[str, Any], custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes"))
        assert len(nodes["items"]) == 2
    finally:
        api.close()


def test_kubectl_autoscale_scales_the_deployment(served: Serve) -> None:
    kubectl(served, "autoscale", "deployment/busy", "--cpu=50%", "--min=1", "--max=5")
    # 150% of requests against 50%: 2 pods x 3 = 6, limited to the maximum of 5
    deadline = time.monotonic() + 60
    while True:
        hpa = json.loads(kubectl(served, "get", "hpa", "busy", "-o", "json"))
        replicas = json.loads(kubectl(served, "get", "deployment", "busy", "-o", "json"))["spec"]["replicas"]
        if replicas == 5 and (hpa.get("status") or {}).get("desiredReplicas") == 5:
            break
        assert time.monotonic() < deadline, hpa
        time.sleep(0.5)
    described = kubectl(served, "describe", "hpa", "busy")
    assert "SuccessfulRescale" in described and "New size: 5" in described
    assert "TooManyReplicas" in described
    out = kubectl(served, "get", "hpa", "busy", "--no-headers")
    assert "cpu: 150%/50%" in out, out


def test_a_new_autoscaler_is_first_reconciled_a_sync_period_after_its_create(served: Serve) -> None:
    """As upstream's rate-limited queue: a new HPA waits the sync period (the server's 4 s)
    before its first reconcile, and its own status write brings no second one (its event is
    recorded once)."""
    kubectl(served, "apply", "-f", "-", stdin="""
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: orphan}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: missing}
  maxReplicas: 3
""")
    deadline = time.monotonic() + 60
    while True:
        hpa = json.loads(kubectl(served, "get", "hpa", "orphan", "-o", "json"))
        conditions = (hpa.get("status") or {}).get("conditions") or []
        if conditions:
            break
        assert time.monotonic() < deadline, hpa
        time.sleep(0.2)
    (able,) = conditions
    assert (able["type"], able["status"], able["reason"]) == ("AbleToScale", "False", "FailedGetScale")

    def stamp(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    assert stamp(able["lastTransitionTime"]) - stamp(hpa["metadata"]["creationTimestamp"]) >= 4
    events = json.loads(kubectl(served, "get", "events", "--field-selector",
                                "involvedObject.name=orphan,reason=FailedGetScale", "-o", "json"))["items"]
    assert [e.get("count", 1) for e in events] == [1], events
