"""HorizontalPodAutoscalers scaling Deployments on the pods' declared usage
(controllers/podautoscaler.py reading api/resourcemetrics.py), inside a server with its
scheduler, controllers and four simulated nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api import resourcemetrics
from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from controlplane.nodes.usage import USAGE_CPU
from tests.controllers.helpers import until
from tests.controllers.test_workloads import DEPLOYMENTS, deployment, rolled_out

HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
EVENTS = "/api/v1/namespaces/default/events"


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    # metrics over a 1 s window: a new pod's CPU counts 1 s after it is ready, not 15 s
    monkeypatch.setattr(resourcemetrics, "WINDOW", "1s")
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=4,
                            hpa_sync_period=0.5))  # upstream's is 15 s
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


def loaded(name: str, replicas: int, cpu_used: str) -> dict[str, Any]:
    """A Deployment whose pods ask for 100m of CPU each and use ``cpu_used``."""
    d = deployment(name, replicas)
    template = d["spec"]["template"]
    template["metadata"]["annotations"] = {USAGE_CPU: cpu_used}
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "32Mi"}}
    return d


def hpa(name: str, low: int, high: int, utilization: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": low, "maxReplicas": high,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": utilization}}}], **spec}}


def condition(h: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in (h.get("status") or {}).get("conditions") or () if c["type"] == type_)


async def with_condition(c: Client, name: str, type_: str, reason: str | None = None, status: str | None = None,
                         message: str = "") -> dict[str, Any] | None:
    """The HPA ``name`` once its ``type_`` condition has this reason, status and message (part)."""
    h = await c.get(f"{HPAS}/{name}")
    try:
        got = condition(h, type_)
    except StopIteration:
        return None
    if (reason is None or got["reason"] == reason) and (status is None or got["status"] == status) \
            and message in got["message"]:
        return h
    return None


async def test_a_loaded_deployment_is_scaled_up_then_down(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, loaded("web", 2, "90m"))
    await until(lambda: rolled_out(c, "web"))
    # scale-down stabilisation off, so the way down is seen without waiting five minutes
    await c.create(HPAS, hpa("web", 1, 10, 50, behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))

    async def scaled_to(n: int) -> dict[str, Any] | None:
        h = await c.get(f"{HPAS}/web")
        d = await c.get(f"{DEPLOYMENTS}/web")
        return h if d["spec"]["replicas"] == n and (h.get("status") or {}).get("desiredReplicas") == n else None

    # 90% of requests against 50%: 2 * 1.8 = 3.6 -> 4
    h = await until(lambda: scaled_to(4))
    status = h["status"]
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageUtilization": 90, "averageValue": "90m"}}}]
    assert status.get("lastScaleTime")
    assert condition(h, "ScalingActive")["reason"] == "ValidMetricFound"
    assert condition(h, "AbleToScale")["status"] == "True"

    async def rescale_event() -> list[dict[str, Any]]:  # events are written in the background
        events = (await c.list(EVENTS, fieldSelector="involvedObject.kind=HorizontalPodAutoscaler"))["items"]
        return [e for e in events if e["reason"] == "SuccessfulRescale"]

    events = await until(rescale_event)
    assert any(e["message"].startswith("New size: 4; reason: cpu resource utilization (percentage of request) "
                                       "above target") for e in events)
    await until(lambda: rolled_out(c, "web"))

    # the load drops to 10%: 4 * 0.2 = 0.8 -> 1, the minimum
    d = await c.get(f"{DEPLOYMENTS}/web")
    d["spec"]["template"]["metadata"]["annotations"][USAGE_CPU] = "10m"
    await c.update(f"{DEPLOYMENTS}/web", d)
    h = await until(lambda: scaled_to(1), timeout=40)
    assert h["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] <= 50


async def test_limits_and_failures_show_in_conditions(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, loaded("hot", 1, "500m"))
    await until(lambda: rolled_out(c, "hot"))
    await c.create(HPAS, hpa("hot", 1, 3, 50))

    h = await until(lambda: with_condition(c, "hot", "ScalingLimited", reason="TooManyReplicas"))
    assert h["status"]["desiredReplicas"] == 3
    assert condition(h, "ScalingLimited")["status"] == "True"

    # a target that does not exist: AbleToScale False, FailedGetScale
    missing = hpa("absent", 1, 3, 50)
    await c.create(HPAS, missing)

    h = await until(lambda: with_condition(c, "absent", "AbleToScale", reason="FailedGetScale"))
    assert condition(h, "AbleToScale")["status"] == "False"

    # pods without CPU requests cannot be measured as a percentage of them
    bare = deployment("bare", 1)
    await c.create(DEPLOYMENTS, bare)
    await until(lambda: rolled_out(c, "bare"))
    await c.create(HPAS, hpa("bare", 1, 3, 50))

    # as upstream, a pod is measured once it has been ready for a whole metric window (1 s here): before,
    # the HPA says "did not receive metrics for targeted pods" (a state too brief to wait for reliably)
    h = await until(lambda: with_condition(c, "bare", "ScalingActive", status="False",
                                           message="missing request for cpu in container c"), timeout=40)
    assert condition(h, "ScalingActive")["reason"] == "FailedGetResourceMetric"
    assert (await c.get(f"{DEPLOYMENTS}/bare"))["spec"]["replicas"] == 1


async def test_pods_with_pod_level_requests_are_measured_against_them(client: Client) -> None:
    """PodLevelResources: a Resource metric's utilisation is over the pod-level request
    (upstream's calculatePodRequests), not the containers' (150m used of 200m is 75%, not 150%)."""
    c = client
    d = loaded("level", 2, "150m")
    d["spec"]["template"]["spec"]["resources"] = {"requests": {"cpu": "200m"}}
    await c.create(DEPLOYMENTS, d)
    await until(lambda: rolled_out(c, "level"))
    await c.create(HPAS, hpa("level", 1, 10, 50))

    async def decided() -> dict[str, Any] | None:
        # measured, and past upstream's holding back while a pod has not been ready for a whole
        # metric window (it counts as 0% on a scale-up, which turns 1.5 into 0.75: no change)
        h = await c.get(f"{HPAS}/level")
        status = h.get("status") or {}
        return h if status.get("currentMetrics") and status.get("desiredReplicas") != 2 else None

    h = await until(decided)
    assert h["status"]["currentMetrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageUtilization": 75, "averageValue": "150m"}}}]
    assert h["status"]["desiredReplicas"] == 3  # 2 * 75 / 50; over the containers' 100m it would be 6
