"""The HorizontalPodAutoscaler's arithmetic, as kube-controller-manager's replica
calculator and its normalisation do it; no I/O here (``podautoscaler.py`` reads
the API and writes the results).

For a Resource metric: the target's pods are grouped (deleted and failed pods
ignored; pending pods, and CPU pods not yet ready or too recently ready to be
measured fairly, count as unready; pods without metrics are missing). Utilisation
is the ready pods' usage over their requests. Within the tolerance (10%) nothing
changes; otherwise, if no pod is missing or unready-while-scaling-up, the answer
is ``ceil(ratio * ready pods)``. Else missing pods are assumed at 100% of their
request when scaling down and 0 when scaling up, unready pods at 0 when scaling
up, and the ratio is taken again; a recount that changes direction, or falls
within tolerance, keeps the current count.

The proposal is then stabilised (the highest recommendation of the scale-down
window, default 300 s; the lowest of the scale-up window) and limited in rate (by
the ``behavior`` policies; without a ``behavior``, at most doubling, or up to 4)
and to ``[minReplicas, maxReplicas]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controlplane.podlevel import pod_level
from controlplane.quantity import QuantityError, nanos

__all__ = ["CPU_INITIALIZATION_PERIOD", "DEFAULT_TOLERANCE", "DOWNSCALE_STABILIZATION", "INITIAL_READINESS_DELAY",
           "Limited", "MetricError", "Recommendations", "ResourceProposal", "limit_with_behavior",
           "limit_without_behavior", "pod_requests", "resource_replicas"]

DEFAULT_TOLERANCE = 0.1
CPU_INITIALIZATION_PERIOD = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period
INITIAL_READINESS_DELAY = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay
DOWNSCALE_STABILIZATION = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4


class MetricError(Exception):
    """A metric gave no replica count: the HPA's ScalingActive turns False with this message
    and ``reason``."""

    def __init__(self, message: str, reason: str = "FailedGetResourceMetric") -> None:
        super().__init__(message)
        self.reason = reason


def _time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c
    return None


def pod_requests(pod: Mapping[str, Any], resource: str, container: str | None = None) -> int:
    """The pod's request of ``resource`` in billionths (CPU: nanocores; memory: nano-bytes), as
    upstream's calculatePodRequests: for a pod with pod-level requests (PodLevelResources) and
    no ``container`` named, the pod's (``_pod_level_request``); otherwise summed over its
    containers and sidecars (restartable init containers), or just ``container``'s. A
    container without one, or a ``container`` the pod lacks, is an error."""
    spec: dict[str, Any] = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name")
    if container is None and pod_level(spec, "requests"):  # IsPodLevelRequestsSet
        return _pod_level_request(spec, resource, name)
    inits = spec.get("initContainers") or ()
    sidecars = [c for c in inits if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    containers = [*(spec.get("containers") or ()), *sidecars]
    total = 0
    for c in containers:
        if container is not None and c.get("name") != container:
            continue
        value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
        if value is None:
            raise MetricError(f"missing request for {resource} in container {c.get('name')} of Pod {name}")
        total += _billionths(value, f"invalid request for {resource} in container {c.get('name')}")
        if container is not None:  # container names are unique inside the pod
            return total
    if container is not None:
        raise MetricError(f"container {container} not found in Pod {name}")
    return total


def _pod_level_request(spec: dict[str, Any], resource: str, name: Any) -> int:
    """A pod's request of ``resource`` as upstream's PodRequests has it: the pod-level request
    where the pod level names it, else its containers' (the sum, sidecars added, at least each
    plain init container's beside the sidecars before it) where any names it; plus the
    overhead. Neither: an error."""
    what = f"invalid request for {resource} in Pod {name}"

    def request(c: Any) -> int | None:
        value = ((c.get("resources") or {}).get("requests") or {}).get(resource) if isinstance(c, dict) else None
        return None if value is None else _billionths(value, what)

    level = pod_level(spec, "requests").get(resource)
    total: int | None = None if level is None else _billionths(level, what)
    if total is None:
        named = [r for r in map(request, spec.get("containers") or ()) if r is not None]
        total = sum(named) if named else None
        sidecars: int | None = None  # the sidecars started so far (None: none names it)
        peak: int | None = None
        for c in spec.get("initContainers") or ():
            one = request(c)
            if isinstance(c, dict) and c.get("restartPolicy") == "Always":
                if one is not None:
                    total = (total or 0) + one
                    sidecars = (sidecars or 0) + one
                one = sidecars
            elif sidecars is not None:
                one = (one or 0) + sidecars
            if one is not None and (peak is None or one > peak):
                peak = one
        if peak is not None and (total is None or peak > total):
            total = peak
    overhead = (spec.get("overhead") or {}).get(resource)
    if overhead is not None:
        total = (total or 0) + _billionths(overhead, what)
    if total is None:
        raise MetricError(f"missing pod-level request for {resource} in Pod {name}")
    return total


def _billionths(value: Any, what: str) -> int:
    try:
        return nanos(str(value))
    except (QuantityError, ValueError) as e:
        raise MetricError(f"{what}: {e}") from e


@dataclass
class ResourceProposal:
    replicas: int
    utilization: int | None  # percent of requests, for Utilization targets
    average: int             # the ready pods' average usage, in billionths


def _group(pods: Sequence[Mapping[str, Any]], usage: Mapping[str, int], resource: str, now: float,
           metric_time: float, window: float,
           cpu_initialization: float = CPU_INITIALIZATION_PERIOD) -> tuple[int, set[str], set[str], set[str]]:
    """(ready count, unready, missing, ignored) pod names: upstream's groupPods."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        if name not in usage:
            missing.add(name)
            continue
        if resource == "cpu":
            condition = _ready_condition(pod)
            start = _time((pod.get("status") or {}).get("startTime"))
            if condition is None or start is None:
                unready.add(name)
                continue
            is_ready = condition.get("status") == "True"
            changed = _time(condition.get("lastTransitionTime")) or start
            if start + cpu_initialization > now:
                # recently started: measured fairly only once ready for a whole metric window
                if not is_ready or metric_time < changed + window:
                    unready.add(name)
                    continue
            elif not is_ready and start + INITIAL_READINESS_DELAY > changed:
                unready.add(name)  # never became ready after its start
                continue
        ready += 1
    return ready, unready, missing, ignored


def resource_replicas(current: int, pods: Sequence[Mapping[str, Any]], usage: Mapping[str, int], resource: str,
                      *, target_utilization: int | None = None, target_average: int | None = None,
                      container: str | None = None, tolerance: float = DEFAULT_TOLERANCE,
                      now: float, metric_time: float, window: float,
                      cpu_initialization: float = CPU_INITIALIZATION_PERIOD) -> ResourceProposal:
    """The replica count one Resource (or ContainerResource) metric asks for.

    ``usage``: pod name -> usage in billionths (as ``pod_requests``); exactly one of the
    targets is given (a percentage of requests, or an average value in billionths).
    ``cpu_initialization``: seconds after its start during which a pod's CPU counts only once
    it has been ready for a whole metric ``window``."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    ready, unready, missing, ignored = _group(pods, usage, resource, now, metric_time, window, cpu_initialization)
    measured = {n: v for n, v in usage.items() if n not in unready and n not in ignored}
    counted = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    if not measured or not any(n in counted for n in measured):
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    requests: dict[str, int] = {}
    if target_utilization is not None:
        for name, pod in counted.items():
            if name not in ignored:
                requests[name] = pod_requests(pod, resource, container)

    def ratio_of(values: Mapping[str, int]) -> tuple[float, int | None, int]:
        names = [n for n in values if n in counted]
        total = sum(values[n] for n in names)
        average = total // len(names) if names else 0
        if target_utilization is not None:
            asked = sum(requests.get(n, 0) for n in names)
            if asked == 0:
                raise MetricError(f"no pods had a request for {resource}")
            utilization = int(total * 100 / asked)
            return utilization / target_utilization, utilization, average
        assert target_average is not None
        return (total / len(names)) / target_average if names else 0.0, None, average

    ratio, utilization, average = ratio_of(measured)
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if abs(1.0 - ratio) <= tolerance:
            return ResourceProposal(current, utilization, average)
        return ResourceProposal(math.ceil(ratio * ready), utilization, average)
    assumed = dict(measured)
    if missing:
        for name in missing:
            if ratio < 1.0:  # scaling down: a missing pod is taken to use what it asks for
                assumed[name] = requests.get(name, 0) if target_utilization is not None else target_average or 0
            elif ratio > 1.0:
                assumed[name] = 0
    if scale_up_with_unready:
        for name in unready:
            assumed[name] = 0
    new_ratio, _, _ = ratio_of(assumed)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return ResourceProposal(current, utilization, average)
    replicas = math.ceil(new_ratio * len([n for n in assumed if n in counted]))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return ResourceProposal(current, utilization, average)
    return ResourceProposal(replicas, utilization, average)


@dataclass
class Limited:
    replicas: int
    reason: str
    message: str

    @property
    def limited(self) -> bool:
        return self.reason not in ("DesiredWithinRange",)


@dataclass
class Recommendations:
    """One HPA's recent recommendations and scale events (upstream keeps these in memory too:
    a restarted controller starts its windows afresh)."""
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_ups: list[tuple[float, int]] = field(default_factory=list)    # (time, replicas added)
    scale_downs: list[tuple[float, int]] = field(default_factory=list)  # (time, replicas removed)

    def stabilize(self, desired: int, current: int, now: float, up_window: float,
                  down_window: float) -> tuple[int, str, str]:
        up, down = desired, desired
        for at, value in self.recommendations:
            if at > now - up_window:
                up = min(up, value)
            if at > now - down_window:
                down = max(down, value)
        keep = max(up_window, down_window)
        self.recommendations = [(at, v) for at, v in self.recommendations if at > now - keep]
        self.recommendations.append((now, desired))
        recommendation = max(current, up)
        recommendation = min(recommendation, down)
        if desired >= current:
            return recommendation, "ScaleUpStabilized", \
                "recent recommendations were lower than current one, applying the lowest recent recommendation"
        return recommendation, "ScaleDownStabilized", \
            "recent recommendations were higher than current one, applying the highest recent recommendation"

    def record_scale(self, before: int, after: int, now: float, keep: float) -> None:
        if after > before:
            self.scale_ups.append((now, after - before))
        elif after < before:
            self.scale_downs.append((now, before - after))
        self.scale_ups = [e for e in self.scale_ups if e[0] > now - keep]
        self.scale_downs = [e for e in self.scale_downs if e[0] > now - keep]

    def changed_within(self, period: float, now: float) -> tuple[int, int]:
        """Replicas (added, removed) by this controller within the last ``period`` seconds."""
        return (sum(n for at, n in self.scale_ups if at > now - period),
                sum(n for at, n in self.scale_downs if at > now - period))


def limit_without_behavior(current: int, desired: int, low: int, high: int) -> Limited:
    """Upstream's convertDesiredReplicasWithRules: at most doubling (or up to 4) at once."""
    scale_up_limit = max(int(SCALE_UP_LIMIT_FACTOR * current), SCALE_UP_LIMIT_MINIMUM)
    if high > scale_up_limit:
        maximum, reason, message = scale_up_limit, "ScaleUpLimit", \
            "the desired replica count is increasing faster than the maximum scale rate"
    else:
        maximum, reason, message = high, "TooManyReplicas", "the desired replica count is more than the maximum " \
            "replica count"
    if desired < low:
        return Limited(low, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
    if desired > maximum:
        return Limited(maximum, reason, message)
    return Limited(desired, "DesiredWithinRange", "the desired count is within the acceptable range")


def _rate_limit(current: int, rules: Mapping[str, Any], history: Recommendations, now: float, up: bool) -> int:
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    # scaling up, "Max" takes the most permissive (largest) proposal; scaling down, the smallest
    pick_largest = (select != "Min") if up else (select == "Min")
    result: int | None = None
    for policy in rules.get("policies") or ():
        period = float(policy.get("periodSeconds") or 15)
        added, removed = history.changed_within(period, now)
        start = current - added + removed
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if up else start - value
        elif up:
            proposed = math.ceil(start * (1 + value / 100))
        else:
            proposed = int(start * (1 - value / 100))
        if result is None:
            result = proposed
        else:
            result = max(result, proposed) if pick_largest else min(result, proposed)
    return current if result is None else result


def limit_with_behavior(current: int, desired: int, low: int, high: int, behavior: Mapping[str, Any],
                        history: Recommendations, now: float) -> Limited:
    """Upstream's convertDesiredReplicasWithBehaviorRate."""
    if desired > current:
        limit = max(_rate_limit(current, behavior.get("scaleUp") or {}, history, now, up=True), current)
        if high < limit:
            maximum, reason, message = high, "TooManyReplicas", \
                "the desired replica count is more than the maximum replica count"
        else:
            maximum, reason, message = limit, "ScaleUpLimit", \
                "the desired replica count is increasing faster than the maximum scale rate"
        if desired > maximum:
            return Limited(maximum, reason, message)
    elif desired < current:
        limit = min(_rate_limit(current, behavior.get("scaleDown") or {}, history, now, up=False), current)
        if low > limit:
            minimum, reason, message = low, "TooFewReplicas", \
                "the desired replica count is less than the minimum replica count"
        else:
            minimum, reason, message = limit, "ScaleDownLimit", \
                "the desired replica count is decreasing faster than the maximum scale rate"
        if desired < minimum:
            return Limited(minimum, reason, message)
    return Limited(desired, "DesiredWithinRange", "the desired count is within the acceptable range")
