"""The horizontal pod autoscaler controller of kube-controller-manager
(autoscaling/v2 HorizontalPodAutoscalers).

Every sync period (15 s, ``serve --horizontal-pod-autoscaler-sync-period``) it reads
the target's ``scale`` subresource (so any
kind with one: Deployments, ReplicaSets, StatefulSets, custom resources), the
pods of the scale's selector and their ``metrics.k8s.io`` PodMetrics, computes
the replica count each metric asks for (``replicacalc.py``), takes the largest,
stabilises and rate-limits it, and writes the scale when it differs. The HPA's
status gets ``currentReplicas``, ``desiredReplicas``, ``currentMetrics``,
``lastScaleTime`` and the conditions ``AbleToScale``, ``ScalingActive`` and
``ScalingLimited`` with upstream's reasons; rescales and failures are recorded as
events (``SuccessfulRescale``, ``FailedGetScale``, ``FailedGetResourceMetric``...).

Resource and ContainerResource metrics are computed; Pods, Object and External
metrics need a custom or external metrics API, which this server does not serve:
such a metric is reported invalid, as upstream does when the API is missing. An
HPA whose metrics are partly invalid scales up on the valid ones, never down.

The usage the simulated pods report is declared on them (``nodes/usage.py``):
``kwok.x-k8s.io/usage-cpu`` and ``kwok.x-k8s.io/usage-memory`` annotations.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.quantity import QuantityError, format_quantity, nanos

from .events import Recorder
from .ownership import key_of, meta_of
from .replicacalc import (
    CPU_INITIALIZATION_PERIOD,
    DOWNSCALE_STABILIZATION,
    Limited,
    MetricError,
    Recommendations,
    limit_with_behavior,
    limit_without_behavior,
    resource_replicas,
)

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["SYNC_PERIOD", "PodAutoscaler", "start"]

log = logging.getLogger(__name__)

SYNC_PERIOD = 15.0
HPAS = resource_path("autoscaling", "v2", "horizontalpodautoscalers")
NANO = 10**9


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window_seconds(text: Any) -> float:
    try:
        return float(str(text).rstrip("s"))
    except ValueError:
        return 15.0


def _metric_time(metrics: dict[str, Any]) -> float:
    for item in metrics.get("items") or ():
        try:
            return datetime.strptime(str(item.get("timestamp")), "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=UTC).timestamp()
        except ValueError:
            break
    return time.time()


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class PodAutoscaler:
    def __init__(self, client: Client, period: float | None = None, workers: int = 2,
                 cpu_initialization: float = CPU_INITIALIZATION_PERIOD) -> None:
        self.client = client
        self.period = SYNC_PERIOD if period is None else period
        self.cpu_initialization = cpu_initialization
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "horizontal-pod-autoscaler")
        self.hpas = client.informer(HPAS, on_add=self._changed, on_update=lambda _old, new: self._changed(new),
                                    on_delete=self._deleted)
        self._history: dict[str, Recommendations] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._plurals: dict[tuple[str, str], str] = {}  # (apiVersion, kind) -> plural, from discovery

    # -- events
    def _changed(self, hpa: dict[str, Any]) -> None:
        # upstream's enqueueHPA: an add or update waits a sync period in the queue (AddRateLimited
        # with a FixedItemIntervalRateLimiter), the earliest wait standing: a new HPA is first
        # reconciled a period after it is seen, an edit within the period, and the HPA's own
        # status writes bring no second sync (nor its events twice)
        self._resync_later(key_of(hpa))

    def _deleted(self, hpa: dict[str, Any]) -> None:
        key = key_of(hpa)
        self._history.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _resync_later(self, key: str) -> None:
        """``key`` synced a period from now, unless a sync of it is already due sooner."""
        if key not in self._timers:
            self._timers[key] = asyncio.get_running_loop().call_later(self.period, self._due, key)

    def _due(self, key: str) -> None:
        self._timers.pop(key, None)
        self.queue.add(key)

    # -- running
    async def run(self) -> None:
        try:
            await run_controller("horizontal pod autoscaler", (self.hpas,), self.queue, self.sync, self.workers)
        finally:
            for timer in self._timers.values():
                timer.cancel()

    async def _plural(self, api_version: str, kind: str) -> str:
        key = (api_version, kind)
        if key not in self._plurals:
            group, version = _split(api_version)
            found = await self.client.get(f"/apis/{group}/{version}" if group else f"/api/{version}")
            for r in found.get("resources") or ():
                if "/" not in str(r.get("name")):
                    self._plurals[(api_version, str(r.get("kind")))] = str(r.get("name"))
            if key not in self._plurals:
                raise ApiError(404, "NotFound", f"no resource of kind {kind} in {api_version}")
        return self._plurals[key]

    async def sync(self, key: str) -> None:
        hpa = self.hpas.items.get(key)
        if hpa is None:
            return
        try:
            await self._reconcile(key, hpa)
        finally:
            if key in self.hpas.items:
                self._resync_later(key)

    async def _reconcile(self, key: str, hpa: dict[str, Any]) -> None:
        meta, spec = meta_of(hpa), hpa.get("spec") or {}
        namespace = str(meta.get("namespace") or "")
        old_status = hpa.get("status") or {}
        conditions = Conditions(old_status.get("conditions") or [])
        ref = spec.get("scaleTargetRef") or {}
        kind = str(ref.get("kind") or "")
        try:
            plural = await self._plural(str(ref.get("apiVersion") or ""), kind)
            group, version = _split(str(ref.get("apiVersion") or ""))
            scale_path = resource_path(group, version, plural, namespace, str(ref.get("name")), "scale")
            scale = await self.client.get(scale_path)
        except ApiError as e:
            if e.code == 409:
                raise
            message = f"the HPA controller was unable to get the target's current scale: {e.message}"
            self.events.record("HorizontalPodAutoscaler", hpa, "FailedGetScale", e.message, "Warning")
            conditions.set("AbleToScale", "False", "FailedGetScale", message)
            await self._write_status(hpa, old_status, conditions, old_status.get("currentReplicas", 0),
                                     old_status.get("desiredReplicas", 0), old_status.get("currentMetrics"), False)
            return
        conditions.set("AbleToScale", "True", "SucceededGetScale",
                       "the HPA controller was able to get the target's current scale")
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        if key not in self._history:  # upstream's recordInitialRecommendation: a new HPA (or a restarted
            # controller) counts the current size as a recommendation, so it scales down only after
            # the stabilisation window, not at its first sync
            self._history[key] = Recommendations(recommendations=[(time.time(), current)])
        low = int(spec.get("minReplicas") or 1)
        high = int(spec.get("maxReplicas") or low)
        metric_statuses: list[dict[str, Any]] | None = old_status.get("currentMetrics")
        reason = ""
        if current == 0 and low != 0:
            desired = 0
            conditions.set("ScalingActive", "False", "ScalingDisabled",
                           "scaling is disabled since the replica count of the target is zero")
        elif current > high:
            desired, reason = high, "Current number of replicas above Spec.MaxReplicas"
        elif current < low:
            desired, reason = low, "Current number of replicas below Spec.MinReplicas"
        else:
            selector = str((scale.get("status") or {}).get("selector") or "")
            try:
                proposal, metric_name, metric_statuses = await self._replicas_for_metrics(
                    hpa, namespace, selector, current)
            except MetricError as e:
                message = str(e)
                conditions.set("ScalingActive", "False", e.reason,
                               f"the HPA was unable to compute the replica count: {message}")
                self.events.record("HorizontalPodAutoscaler", hpa, "FailedComputeMetricsReplicas",
                                   f"invalid metrics, first error is: {message}", "Warning")
                await self._write_status(hpa, old_status, conditions, current,
                                         old_status.get("desiredReplicas", 0), metric_statuses, False)
                return
            conditions.set("ScalingActive", "True", "ValidMetricFound",
                           f"the HPA was able to successfully calculate a replica count from {metric_name}")
            if proposal > current:
                reason = f"{metric_name} above target"
            limited = self._normalize(key, hpa, current, proposal, low, high, conditions)
            desired = limited.replicas
            if desired < current:
                reason = "All metrics below target"
        rescale = desired != current
        if rescale:
            body = {**scale, "spec": {**(scale.get("spec") or {}), "replicas": desired}}
            try:
                await self.client.update(scale_path, body)
            except ApiError as e:
                if e.code == 409:
                    raise
                conditions.set("AbleToScale", "False", "FailedUpdateScale",
                               f"the HPA controller was unable to update the target scale: {e.message}")
                self.events.record("HorizontalPodAutoscaler", hpa, "FailedRescale",
                                   f"New size: {desired}; reason: {reason}; error: {e.message}", "Warning")
                await self._write_status(hpa, old_status, conditions, current, old_status.get("desiredReplicas", 0),
                                         metric_statuses, False)
                return
            conditions.set("AbleToScale", "True", "SucceededRescale",
                           f"the HPA controller was able to update the target scale to {desired}")
            self.events.record("HorizontalPodAutoscaler", hpa, "SuccessfulRescale",
                               f"New size: {desired}; reason: {reason}")
            history = self._history.setdefault(key, Recommendations())
            history.record_scale(current, desired, time.time(), _longest_period(spec.get("behavior")))
        await self._write_status(hpa, old_status, conditions, current, desired, metric_statuses, rescale)

    def _normalize(self, key: str, hpa: dict[str, Any], current: int, proposal: int, low: int, high: int,
                   conditions: Conditions) -> Limited:
        history = self._history.setdefault(key, Recommendations())
        now = time.time()
        behavior = (hpa.get("spec") or {}).get("behavior")
        if isinstance(behavior, dict):
            up = behavior.get("scaleUp") or {}
            down = behavior.get("scaleDown") or {}
            up_window = float(up.get("stabilizationWindowSeconds") or 0)
            down_window = down.get("stabilizationWindowSeconds")
            down_window = DOWNSCALE_STABILIZATION if down_window is None else float(down_window)
            stabilized, reason, message = history.stabilize(proposal, current, now, up_window, down_window)
        else:
            stabilized, reason, message = history.stabilize(proposal, current, now, 0.0, DOWNSCALE_STABILIZATION)
            if stabilized != proposal:  # the legacy path: only the scale-down window exists
                reason, message = "ScaleDownStabilized", \
                    "recent recommendations were higher than current one, applying the highest recent recommendation"
        if stabilized != proposal:
            conditions.set("AbleToScale", "True", reason, message)
        else:
            conditions.set("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
        if isinstance(behavior, dict):
            limited = limit_with_behavior(current, stabilized, low, high, behavior, history, now)
        else:
            limited = limit_without_behavior(current, stabilized, low, high)
        conditions.set("ScalingLimited", "False" if limited.replicas == stabilized else "True",
                       limited.reason, limited.message)
        return limited

    async def _replicas_for_metrics(self, hpa: dict[str, Any], namespace: str, selector: str,
                                    current: int) -> tuple[int, str, list[dict[str, Any]]]:
        """(the largest proposal, the metric that gave it, currentMetrics), or a MetricError."""
        if not selector:
            raise MetricError("the scale target has no selector", "InvalidSelector")
        spec = hpa.get("spec") or {}
        pods = (await self.client.list(resource_path("", "v1", "pods", namespace), labelSelector=selector))
        pod_items = pods.get("items") or []
        metrics: dict[str, Any] | None = None
        best, best_name = -1, ""
        statuses: list[dict[str, Any]] = []
        errors: list[tuple[str, str]] = []
        specs = spec.get("metrics") or []
        for m in specs:
            kind = m.get("type")
            if kind not in ("Resource", "ContainerResource"):
                what = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric",
                        "External": "FailedGetExternalMetric"}.get(str(kind), "InvalidMetricSourceType")
                errors.append((what, f"unable to get metric of type {kind}: the custom and external metrics APIs "
                                     "are not served by this server"))
                continue
            source = m.get("resource" if kind == "Resource" else "containerResource") or {}
            resource = str(source.get("name") or "")
            container = source.get("container") if kind == "ContainerResource" else None
            target = source.get("target") or {}
            label = f"{resource} {'container ' if container else ''}resource"
            try:
                if metrics is None:
                    metrics = await self.client.list(resource_path("metrics.k8s.io", "v1beta1", "pods", namespace),
                                                     labelSelector=selector)
                usage = _usage(metrics, resource, container)
                now = time.time()
                kw: dict[str, Any] = {}
                if target.get("type") == "Utilization":
                    kw["target_utilization"] = int(target.get("averageUtilization") or 0)
                    label += " utilization (percentage of request)"
                    if kw["target_utilization"] <= 0:
                        raise MetricError("the target utilization must be positive")
                else:
                    try:
                        kw["target_average"] = nanos(str(target.get("averageValue")))
                    except (QuantityError, ValueError) as e:
                        raise MetricError(f"invalid averageValue target: {e}") from e
                    if kw["target_average"] <= 0:
                        raise MetricError("the target average value must be positive")
                proposal = resource_replicas(current, pod_items, usage, resource, container=container, now=now,
                                             metric_time=_metric_time(metrics),
                                             window=_window_seconds(_first(metrics).get("window")),
                                             cpu_initialization=self.cpu_initialization, **kw)
            except (MetricError, ApiError) as e:
                reason = "FailedGetContainerResourceMetric" if container else "FailedGetResourceMetric"
                if isinstance(e, ApiError):
                    errors.append((reason, f"unable to get metrics for resource {resource}: {e.message}"))
                else:
                    errors.append((reason, f"failed to get {resource} utilization: {e}"))
                    self.events.record("HorizontalPodAutoscaler", hpa, reason, str(e), "Warning")
                continue
            current_values: dict[str, Any] = {"averageValue": format_quantity(_milli(proposal.average))}
            if proposal.utilization is not None:
                current_values["averageUtilization"] = proposal.utilization
            if container:
                statuses.append({"type": "ContainerResource", "containerResource": {
                    "name": resource, "container": container, "current": current_values}})
            else:
                statuses.append({"type": "Resource", "resource": {"name": resource, "current": current_values}})
            if proposal.replicas > best:
                best, best_name = proposal.replicas, label
        if not specs:
            raise MetricError("the HPA has no metrics", "InvalidMetricSourceType")
        # upstream: all invalid, or some invalid and the valid ones would scale down: no change
        if errors and (len(errors) >= len(specs) or best < current):
            raise MetricError(errors[0][1], errors[0][0])
        return best, best_name, statuses

    async def _write_status(self, hpa: dict[str, Any], old: dict[str, Any], conditions: Conditions, current: int,
                            desired: int, metrics: list[dict[str, Any]] | None, rescaled: bool) -> None:
        status: dict[str, Any] = {"currentReplicas": current, "desiredReplicas": desired,
                                  "conditions": conditions.items}
        generation = meta_of(hpa).get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        # (no omitempty upstream: none is null, as the stored status has it, so that an unchanged
        # status compares equal: registry/validation.py, _NIL_WRITTEN)
        status["currentMetrics"] = metrics or None
        last = _now() if rescaled else old.get("lastScaleTime")
        if last:
            status["lastScaleTime"] = last
        if status == old:
            return
        meta = meta_of(hpa)
        await self.client.update(resource_path("autoscaling", "v2", "horizontalpodautoscalers",
                                               meta.get("namespace"), meta.get("name"), "status"),
                                 {**hpa, "status": status})


class Conditions:
    """An HPA's conditions: set by type; a condition keeps its lastTransitionTime while its status holds."""

    def __init__(self, old: list[dict[str, Any]]) -> None:
        self.items = [dict(c) for c in old if isinstance(c, dict)]

    def set(self, type_: str, status: str, reason: str, message: str) -> None:
        for c in self.items:
            if c.get("type") == type_:
                if c.get("status") != status:
                    c["lastTransitionTime"] = _now()
                c.update(status=status, reason=reason, message=message)
                return
        self.items.append({"type": type_, "status": status, "lastTransitionTime": _now(), "reason": reason,
                           "message": message})


def _first(metrics: dict[str, Any]) -> dict[str, Any]:
    items = metrics.get("items") or []
    return items[0] if items else {}


def _usage(metrics: dict[str, Any], resource: str, container: str | None) -> dict[str, int]:
    """Pod name -> usage of ``resource`` in billionths (summed over containers, or one)."""
    out: dict[str, int] = {}
    for item in metrics.get("items") or ():
        total, found = 0, False
        for c in item.get("containers") or ():
            if container is not None and c.get("name") != container:
                continue
            value = (c.get("usage") or {}).get(resource)
            if value is None:
                continue
            try:
                total += nanos(str(value))
            except (QuantityError, ValueError):
                continue
            found = True
        if found:
            out[str((item.get("metadata") or {}).get("name"))] = total
    if not out:
        raise MetricError(f"no metrics returned from resource metrics API for {resource}")
    return out


def _milli(billionths: int) -> Fraction:
    return Fraction(billionths // 1_000_000, 1000)  # upstream reports averages in whole milli-units


def _longest_period(behavior: Any) -> float:
    longest = 0.0
    if isinstance(behavior, dict):
        for rules in (behavior.get("scaleUp") or {}, behavior.get("scaleDown") or {}):
            for p in rules.get("policies") or ():
                longest = max(longest, float(p.get("periodSeconds") or 0))
    return max(longest, 60.0)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await PodAutoscaler(client, period=config.hpa_sync_period,
                        cpu_initialization=config.hpa_cpu_initialization_period).run()

