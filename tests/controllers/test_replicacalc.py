"""The HorizontalPodAutoscaler's arithmetic (controllers/replicacalc.py), against the cases
kube-controller-manager's replica calculator and normalisation describe."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.replicacalc import (
    MetricError,
    Recommendations,
    limit_with_behavior,
    limit_without_behavior,
    pod_requests,
    resource_replicas,
)

NOW = 1_000_000.0
M = 1_000_000  # a milli-CPU in nanocores


def pod(name: str, cpu: str = "100m", phase: str = "Running", ready: bool = True, started_ago: float = 3600,
        ready_ago: float = 3600, **meta: Any) -> dict[str, Any]:
    def ts(ago: float) -> str:
        import datetime

        return datetime.datetime.fromtimestamp(NOW - ago, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return {"metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            "status": {"phase": phase, "startTime": ts(started_ago),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": ts(ready_ago)}]}}


def replicas(current: int, pods: list[dict[str, Any]], usage: dict[str, int], **kw: Any) -> int:
    kw.setdefault("target_utilization", 50)
    return resource_replicas(current, pods, usage, "cpu", now=NOW, metric_time=NOW, window=15.0, **kw).replicas


def test_utilization_scales_in_proportion_and_rounds_up() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    # 90% of requests against a 50% target: 3 * 1.8 = 5.4 -> 6
    assert replicas(3, pods, {"a": 90 * M, "b": 90 * M, "c": 90 * M}) == 6
    # 20%: 3 * 0.4 = 1.2 -> 2
    assert replicas(3, pods, {"a": 20 * M, "b": 20 * M, "c": 20 * M}) == 2


def test_within_the_tolerance_nothing_changes() -> None:
    pods = [pod("a"), pod("b")]
    assert replicas(2, pods, {"a": 54 * M, "b": 54 * M}) == 2  # ratio 1.08
    assert replicas(2, pods, {"a": 56 * M, "b": 56 * M}) == 3  # ratio 1.12


def test_average_value_targets() -> None:
    pods = [pod("a"), pod("b")]
    got = resource_replicas(2, pods, {"a": 300 * M, "b": 300 * M}, "cpu", target_average=100 * M, now=NOW,
                            metric_time=NOW, window=15.0)
    assert (got.replicas, got.utilization, got.average) == (6, None, 300 * M)


def test_missing_metrics_count_against_the_direction_of_change() -> None:
    pods = [pod("a"), pod("b"), pod("c"), pod("d")]
    # scaling up: the two missing pods are taken as using nothing, 2 * 100% + 2 * 0 over 4 = 50%... x2 target 25
    assert replicas(4, pods, {"a": 100 * M, "b": 100 * M}, target_utilization=25) == 8
    # scaling down: missing pods are taken at 100% of their request: (10 + 10 + 100 + 100) / 4 = 55% vs 50: hold
    assert replicas(4, pods, {"a": 10 * M, "b": 10 * M}) == 4


def test_unready_pods_are_taken_as_idle_when_scaling_up() -> None:
    fresh = pod("new", started_ago=20, ready_ago=5)  # ready less than a metric window ago
    pods = [pod("a"), pod("b"), fresh, pod("pending", phase="Pending")]
    # the ready pods alone use 200% of their requests; counting the two unready ones as idle
    # halves that: 100% against a 50% target over 4 pods -> 8
    assert replicas(4, pods, {"a": 200 * M, "b": 200 * M, "new": 200 * M}) == 8
    # at 100% the idle unready pods bring it to the target: no change
    assert replicas(4, pods, {"a": 100 * M, "b": 100 * M, "new": 100 * M}) == 4
    # and when counting the unready as idle reverses the direction, the count holds
    assert replicas(4, pods, {"a": 30 * M, "b": 30 * M, "new": 0}, target_utilization=25) == 4


def test_a_shorter_cpu_initialization_period_counts_a_fresh_ready_pod() -> None:
    # started 20 s ago, ready for 5: unready within the default 5 minutes, counted past a 10 s period
    # (serve --horizontal-pod-autoscaler-cpu-initialization-period)
    pods = [pod("a"), pod("new", started_ago=20, ready_ago=5)]
    usage = {"a": 200 * M, "new": 200 * M}
    assert replicas(2, pods, usage) == 4  # (200% + 0) / 2 over a 50% target: 2 pods x 2
    assert replicas(2, pods, usage, cpu_initialization=10.0) == 8  # 200% each: 2 pods x 4
    # an unready pod past the period is still unready, as ever
    assert replicas(2, [pod("a"), pod("new", started_ago=20, ready=False, ready_ago=20)], usage,
                    cpu_initialization=10.0) == 4


def test_deleted_and_failed_pods_are_ignored() -> None:
    pods = [pod("a"), pod("gone", deletionTimestamp="2026-01-01T00:00:00Z"), pod("failed", phase="Failed")]
    assert replicas(3, pods, {"a": 100 * M, "gone": 500 * M, "failed": 500 * M}) == 2


def test_errors() -> None:
    with pytest.raises(MetricError, match="no pods returned"):
        replicas(1, [], {})
    with pytest.raises(MetricError, match="did not receive metrics"):
        replicas(1, [pod("a")], {})
    bare = pod("a")
    del bare["spec"]["containers"][0]["resources"]
    with pytest.raises(MetricError, match="missing request for cpu in container c"):
        pod_requests(bare, "cpu")


def test_without_behavior_scale_up_is_at_most_doubling() -> None:
    assert limit_without_behavior(3, 20, 1, 100).replicas == 6
    assert limit_without_behavior(1, 20, 1, 100).replicas == 4  # or up to 4
    got = limit_without_behavior(3, 20, 1, 5)
    assert (got.replicas, got.reason) == (5, "TooManyReplicas")
    got = limit_without_behavior(3, 0, 2, 5)
    assert (got.replicas, got.reason) == (2, "TooFewReplicas")
    assert limit_without_behavior(3, 4, 1, 5).reason == "DesiredWithinRange"


def test_behavior_policies_limit_the_rate() -> None:
    behavior = {"scaleUp": {"selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    h = Recommendations()
    got = limit_with_behavior(10, 50, 1, 100, behavior, h, NOW)
    assert (got.replicas, got.reason) == (20, "ScaleUpLimit")  # the larger of +4 and +100%
    h.record_scale(10, 20, NOW, 60)
    # within the same period the scale-up budget is counted from the period's start (10)
    assert limit_with_behavior(20, 50, 1, 100, behavior, h, NOW + 1).replicas == 20
    assert limit_with_behavior(20, 50, 1, 100, behavior, h, NOW + 16).replicas == 40
    # scaling down one pod a minute counts from the period's start: 20 less the 10 just added
    got = limit_with_behavior(20, 5, 1, 100, behavior, h, NOW + 16)
    assert (got.replicas, got.reason) == (9, "ScaleDownLimit")
    got = limit_with_behavior(20, 5, 1, 100, behavior, Recommendations(), NOW + 16)
    assert (got.replicas, got.reason) == (19, "ScaleDownLimit")
    disabled = {**behavior, "scaleDown": {"selectPolicy": "Disabled", "policies": []}}
    assert limit_with_behavior(20, 5, 1, 100, disabled, h, NOW).replicas == 20


def test_stabilization_keeps_the_highest_recent_recommendation() -> None:
    h = Recommendations()
    assert h.stabilize(8, 4, NOW, 0, 300)[0] == 8
    got, reason, _ = h.stabilize(2, 8, NOW + 60, 0, 300)
    assert (got, reason) == (8, "ScaleDownStabilized")
    assert h.stabilize(2, 8, NOW + 400, 0, 300)[0] == 2  # the 8s fell out of the window
    # a scale-up window holds the lowest recent recommendation
    h = Recommendations()
    h.stabilize(3, 3, NOW, 60, 0)
    assert h.stabilize(9, 3, NOW + 10, 60, 0)[0] == 3
    assert h.stabilize(9, 3, NOW + 70, 60, 0)[0] == 9


def test_a_pod_with_pod_level_requests_is_measured_against_them() -> None:
    """Upstream's calculatePodRequests (PodLevelResources): the pod-level request when the pod
    has pod-level requests and the metric names no container (PodRequests: the containers'
    where the pod level does not name the resource, and the overhead); a container's own
    otherwise, sidecars counted among the containers."""
    level = pod("a", cpu="100m")
    level["spec"]["resources"] = {"requests": {"cpu": "1"}}
    level["spec"]["overhead"] = {"cpu": "50m"}
    assert pod_requests(level, "cpu") == 1050 * M
    # memory is not at pod level: the containers' (64Mi), with a plain init container's as a floor
    level["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"memory": "128Mi"}}}]
    assert pod_requests(level, "memory") == 128 * 1024 * 1024 * 10**9
    # a ContainerResource metric reads the container, whatever the pod level says
    assert pod_requests(level, "cpu", container="c") == 100 * M
    with pytest.raises(MetricError, match=r"^missing pod-level request for ephemeral-storage in Pod a$"):
        pod_requests(level, "ephemeral-storage")
    # utilisation over the pod-level requests: 1000m used of 1050m asked is 95%, over a 50% target
    assert replicas(2, [level, {**level, "metadata": {"name": "b"}}], {"a": 1000 * M, "b": 1000 * M}) == 4
    # sidecars are among the containers; a container the pod lacks is an error
    side = pod("s", cpu="100m")
    side["spec"]["initContainers"] = [
        {"name": "log", "restartPolicy": "Always", "resources": {"requests": {"cpu": "20m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "2"}}}]
    assert pod_requests(side, "cpu") == 120 * M
    assert pod_requests(side, "cpu", container="log") == 20 * M
    with pytest.raises(MetricError, match=r"^container web not found in Pod s$"):
        pod_requests(side, "cpu", container="web")
