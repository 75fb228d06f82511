"""What a kubelet's prober makes of a running pod's startup and readiness probes, for the
built-in stages: when each container is ``started`` and ``ready``.

The simulated probes always succeed, so what shows is their timing, as upstream's prober
workers (``pkg/kubelet/prober/worker.go``) give it: a worker probes at once, then every
``periodSeconds`` (10 by default); it skips its probes while the container has run less than
the probe's ``initialDelaySeconds``, and a readiness or liveness worker skips its own until
the container is started, i.e. until the startup probe succeeds. Counted from the container's
start (the workers' start, a pull earlier, is taken to be the same), a container is

- started at ``ceil(startup.initialDelaySeconds / startup.periodSeconds) * periodSeconds``
  (at once without a startup probe, or with one without an initial delay);
- ready at the first readiness tick at or after both that and the readiness probe's initial
  delay, plus ``successThreshold - 1`` periods (at once when that is 0; when started
  without a readiness probe).

A container whose times are both 0 is started and ready with its pod, as before. Until then
the pod-ready stage's status says what the kubelet's does: ``started: false`` while the
startup probe has not passed, ``ready: false``, and the pod's ``Ready`` and
``ContainersReady`` False (``ContainersNotReady``, ``containers with unready status: [web]``);
the simulator writes each container's change when its time comes (``probed``). Only pods
that restart their containers (``restartPolicy: Always``) are probed so: a Job's pod completes
as its stage says, whatever its probes. Liveness probes never fail here and change nothing.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from .observed import generation_of, stamped

__all__ = ["container_times", "next_change", "probed", "starting"]

Obj = dict[str, Any]
PERIOD = 10  # a probe's periodSeconds by default


def _seconds(probe: Any, field: str, default: int) -> int:
    value = probe.get(field) if isinstance(probe, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _first_tick(at_least: float, period: int) -> float:
    """The first tick of a worker probing every ``period`` seconds from 0 at or after ``at_least``."""
    return math.ceil(at_least / period) * period if at_least > 0 else 0.0


def container_times(container: Obj) -> tuple[float, float]:
    """Seconds after its start when ``container`` is started and when it is ready."""
    startup, readiness = container.get("startupProbe"), container.get("readinessProbe")
    started = 0.0
    if isinstance(startup, dict):
        started = _first_tick(_seconds(startup, "initialDelaySeconds", 0), _seconds(startup, "periodSeconds", PERIOD))
    if not isinstance(readiness, dict):
        return started, started
    period = _seconds(readiness, "periodSeconds", PERIOD)
    ready = _first_tick(max(started, _seconds(readiness, "initialDelaySeconds", 0)), period)
    return started, ready + (_seconds(readiness, "successThreshold", 1) - 1) * period


def _probed_times(pod: Obj) -> dict[str, tuple[float, float]]:
    """The regular containers that are not started or ready with their pod: name -> times."""
    spec = pod.get("spec") or {}
    if (spec.get("restartPolicy") or "Always") != "Always":
        return {}
    times = {}
    for c in spec.get("containers") or ():
        if isinstance(c, dict) and (c.get("startupProbe") or c.get("readinessProbe")):
            started, ready = container_times(c)
            if ready > 0:
                times[str(c.get("name", ""))] = (started, ready)
    return times


def _not_ready(conditions: list[Any], unready: list[str], now: str, generation: int | None) -> list[Any]:
    """``conditions`` with Ready and ContainersReady False for ``unready`` containers, as the kubelet's."""
    message = f"containers with unready status: [{' '.join(unready)}]"
    out = []
    for c in conditions:
        if isinstance(c, dict) and c.get("type") in ("Ready", "ContainersReady"):
            was = c.get("status") == "False" and c.get("reason") == "ContainersNotReady"
            c = stamped({"type": c["type"], "status": "False", "reason": "ContainersNotReady", "message": message,
                         "lastTransitionTime": c.get("lastTransitionTime") if was else now}, generation)
        out.append(c)
    return out


def starting(pod: Obj, status: Obj) -> Obj:
    """The pod-ready stage's ``status`` of ``pod`` as its probes leave it at its containers'
    start: those whose probes have not passed not ready (nor started, before a startup probe
    has), the pod not Ready. ``status`` itself when no container waits on a probe."""
    times = _probed_times(pod)
    if not times or not status.get("containerStatuses"):
        return status
    containers = []
    for c in status["containerStatuses"]:
        waits = times.get(c.get("name"))
        if waits is not None:
            c = {**c, "ready": False, "started": waits[0] <= 0}
        containers.append(c)
    unready = [str(c.get("name")) for c in containers if not c.get("ready")]
    now = str(status.get("startTime") or "")
    return {**status, "containerStatuses": containers,
            "conditions": _not_ready(list(status.get("conditions") or ()), unready, now, generation_of(pod))}


def _started_at(container_status: Obj) -> datetime | None:
    running = (container_status.get("state") or {}).get("running")
    at = running.get("startedAt") if isinstance(running, dict) else None
    try:
        return datetime.fromisoformat(str(at).replace("Z", "+00:00")) if at else None
    except ValueError:
        return None


def _waiting(pod: Obj) -> list[tuple[Obj, datetime, tuple[float, float]]]:
    """The running containers of a running pod that still wait on a probe, with their start and times."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
        return []
    times = _probed_times(pod)
    out = []
    for c in status.get("containerStatuses") or ():
        if isinstance(c, dict) and c.get("name") in times and not (c.get("ready") and c.get("started")):
            at = _started_at(c)
            if at is not None:
                out.append((c, at, times[c["name"]]))
    return out


def next_change(pod: Obj, now: datetime) -> float | None:
    """Seconds from ``now`` until a container of ``pod`` is started or ready by its probes (0 if
    one is due); None when none waits on a probe."""
    due = [(at - now).total_seconds() + (ready if c.get("started") else started)
           for c, at, (started, ready) in _waiting(pod)]
    return max(0.0, min(due)) if due else None


def probed(pod: Obj, now: datetime) -> Obj | None:
    """The status the kubelet writes once the probes due by ``now`` have passed: its containers
    started and ready as their times say, the pod Ready once every container is. None if
    nothing changes."""
    waiting = {id(c): (at, times) for c, at, times in _waiting(pod)}
    if not waiting:
        return None
    status = pod.get("status") or {}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    containers, changed = [], False
    for c in status.get("containerStatuses") or ():
        if id(c) in waiting:
            at, (started, ready) = waiting[id(c)]
            ran = (now - at).total_seconds()
            now_started, now_ready = bool(c.get("started")) or ran >= started, ran >= ready
            if (now_started, now_ready) != (bool(c.get("started")), bool(c.get("ready"))):
                c, changed = {**c, "started": now_started, "ready": now_ready}, True
        containers.append(c)
    if not changed:
        return None
    generation = generation_of(pod)
    unready = [str(c.get("name")) for c in containers if isinstance(c, dict) and not c.get("ready")]
    conditions = list(status.get("conditions") or ())
    if unready:
        conditions = _not_ready(conditions, unready, stamp, generation)
    else:
        # Ready follows, unless a readiness gate holds it (its condition, someone else's, stays as it is)
        gates = {g.get("conditionType") for g in (pod.get("spec") or {}).get("readinessGates") or ()
                 if isinstance(g, dict)}
        held = any(c.get("type") in gates and c.get("status") != "True" for c in conditions if isinstance(c, dict))
        turned = ("ContainersReady",) if held else ("Ready", "ContainersReady")
        conditions = [stamped({"type": c["type"], "status": "True", "lastTransitionTime": stamp}, generation)
                      if isinstance(c, dict) and c.get("type") in turned else c for c in conditions]
    return {"containerStatuses": containers, "conditions": conditions}
