"""Containers that fail: when a simulated pod's containers exit, with what, and what its kubelet writes then.

The failure model is data on the pod, or a simulator-wide rate for Job pods:

    metadata:
      annotations:
        sim.controlplane.dev/exit-code: "3"          # the containers exit 3 (a failure: reason Error)
        sim.controlplane.dev/oom-killed: "true"      # or are OOMKilled (exit code 137 unless exit-code says)
        sim.controlplane.dev/fail-after: "30s"       # each run lasts this long (Go duration or ms; default
                                                     # the simulator's job_seconds, 1 s)
        sim.controlplane.dev/failure-probability: "0.25"  # each run fails so often (default 1); a run that
                                                     # does not exits 0 (restartPolicy Never/OnFailure) or
                                                     # runs on (Always)

``SimConfig.job_failure_rate`` (``--job-failure-rate``) makes every run of a Job's pod with
none of these annotations fail so often, with ``job_failure_exit_code``. A run's draw is a
hash of the pod's uid, its run (the restart count) and the simulator's seed: the same run
draws the same however often the pod is seen.

What the kubelet does then is upstream's (``pkg/kubelet/kubelet_pods.go``, ``getPhase`` and
``convertToAPIContainerStatuses``; ``pkg/kubelet/status/generate.go``; the back-off of
``kuberuntime_manager.go``'s ``doBackOff`` over ``flowcontrol.Backoff``):

- the pod's ``restartPolicy`` does not restart the exit (``Never``; ``OnFailure`` and exit 0):
  the containers ``terminated`` (``Error``, ``OOMKilled`` or ``Completed``), the phase
  ``Failed`` (or ``Succeeded``), ``Ready`` and ``ContainersReady`` False with reason
  ``PodFailed`` (``PodCompleted``);
- it does (``Always``; ``OnFailure`` and a failure): the first exit restarts at once, each
  later one waits a back-off, 10 s doubling to 5 min, reset when a run lasted 10 min (the
  entry expired: twice the maximum since it was last stepped). Meanwhile the container is
  ``waiting`` with reason ``CrashLoopBackOff`` and the message ``back-off 10s restarting
  failed container=NAME pod=NAME_NAMESPACE(UID)``, ``lastState.terminated`` holds the exit,
  and the pod stays ``Running`` with ``Ready``/``ContainersReady`` False
  (``ContainersNotReady``, ``containers with unready status: [NAME]``); then it runs again,
  ``restartCount`` one more.

Every regular container of the pod exits together, with the same code; sidecars (restartable
init containers) run on.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .events import go_duration
from .native import pod_complete
from .observed import generation_of, stamped
from .stages import parse_duration

__all__ = ["EXIT_CODE", "FAILURE_PROBABILITY", "FAIL_AFTER", "OOM_KILLED", "Exit", "JobFailures", "all_running",
           "crashed", "exited", "may_fail", "planned_exit", "restarted", "run_of", "waiting_in_backoff"]

log = logging.getLogger(__name__)

PREFIX = "sim.controlplane.dev/"
EXIT_CODE = PREFIX + "exit-code"
OOM_KILLED = PREFIX + "oom-killed"
FAIL_AFTER = PREFIX + "fail-after"
FAILURE_PROBABILITY = PREFIX + "failure-probability"
OOM_EXIT_CODE = 137  # SIGKILL's 128 + 9, as the runtime reports an OOM kill


@dataclass(frozen=True, slots=True)
class Exit:
    code: int
    reason: str  # the terminated state's: Completed, Error, OOMKilled
    after: float  # seconds the run lasts


@dataclass(frozen=True, slots=True)
class JobFailures:
    """The simulator-wide default: each run of a Job's pod fails with ``rate``, exiting ``exit_code``."""
    rate: float = 0.0
    exit_code: int = 1


def may_fail(pod: dict[str, Any], jobs: JobFailures) -> bool:
    """Whether the failure model concerns ``pod`` at all: two lookups when nothing is configured."""
    annotations = (pod.get("metadata") or {}).get("annotations")
    if annotations and (EXIT_CODE in annotations or OOM_KILLED in annotations):
        return True
    return jobs.rate > 0 and _owned_by_job(pod)


def _owned_by_job(pod: dict[str, Any]) -> bool:
    return any(isinstance(r, dict) and r.get("kind") == "Job" and r.get("controller")
               for r in (pod.get("metadata") or {}).get("ownerReferences") or ())


def _draw(seed: int | None, uid: str, run: int) -> float:
    """A number in [0, 1) fixed by the pod's uid and run."""
    return zlib.crc32(f"{seed}/{uid}/{run}".encode()) / 2 ** 32


def planned_exit(pod: dict[str, Any], run: int, jobs: JobFailures, default_after: float,
                 seed: int | None = None) -> Exit | None:
    """How run ``run`` (0 the first) of ``pod``'s containers ends if it fails, None if it does not
    (an unreadable annotation counts as absent, with a warning: a kubelet cannot refuse a pod)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    if EXIT_CODE in annotations or OOM_KILLED in annotations:
        oom = str(annotations.get(OOM_KILLED, "")).lower() == "true"
        code = _int(annotations.get(EXIT_CODE), name, EXIT_CODE)
        if code is None:
            code = OOM_EXIT_CODE if oom else 1
        probability = _probability(annotations.get(FAILURE_PROBABILITY), name)
        after = parse_duration(annotations.get(FAIL_AFTER), datetime.now(UTC)) if FAIL_AFTER in annotations \
            else None
        reason = "OOMKilled" if oom else "Error" if code else "Completed"
    else:
        if not (jobs.rate > 0 and _owned_by_job(pod)):
            return None
        code, probability, after, reason = jobs.exit_code, jobs.rate, None, "Error" if jobs.exit_code else "Completed"
    if probability < 1 and _draw(seed, str(meta.get("uid") or ""), run) >= probability:
        return None
    return Exit(code, reason, default_after if after is None else after)


def _int(value: Any, pod: str, key: str) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        log.warning("pod %s: annotation %s=%r is not an integer: ignored", pod, key, value)
        return None


def _probability(value: Any, pod: str) -> float:
    if value is None:
        return 1.0
    try:
        p = float(str(value).strip())
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        log.warning("pod %s: annotation %s=%r is not a probability in [0, 1]: taken as 1", pod,
                    FAILURE_PROBABILITY, value)
        return 1.0
    return p


def _regular(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)]


def _statuses(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(s.get("name")): s for s in (pod.get("status") or {}).get("containerStatuses") or ()
            if isinstance(s, dict)}


def run_of(pod: dict[str, Any]) -> int:
    """The run the pod's containers are in: their restart count (the highest, should they differ)."""
    return max((int(s.get("restartCount") or 0) for s in _statuses(pod).values()), default=0)


def _conditions(pod: dict[str, Any], ready: bool, reason: str, message: str, now: str) -> list[dict[str, Any]]:
    """The pod's conditions with ``Ready`` and ``ContainersReady`` as generate.go computes them."""
    generation = generation_of(pod)
    out = []
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") in ("Ready", "ContainersReady"):
            new = {"type": c["type"], "status": "True" if ready else "False"}
            if reason:
                new["reason"] = reason
            if message:
                new["message"] = message
            # the transition time moves only with the status, as the status manager keeps it
            new["lastTransitionTime"] = c.get("lastTransitionTime") or now \
                if c.get("status") == new["status"] else now
            out.append(stamped(new, generation))
        else:
            out.append(stamped(dict(c), generation) if c.get("type") in ("PodScheduled", "Initialized",
                                                                          "PodReadyToStartContainers") else c)
    return out


def _observed(pod: dict[str, Any]) -> dict[str, Any]:
    generation = generation_of(pod)
    return {"observedGeneration": generation} if generation is not None else {}


def _terminated(status: dict[str, Any], ending: Exit, now: str, fallback_start: str) -> dict[str, Any]:
    running = (status.get("state") or {}).get("running") or {}
    return {"exitCode": ending.code, "reason": ending.reason, "startedAt": running.get("startedAt") or fallback_start,
            "finishedAt": now}


def exited(pod: dict[str, Any], ending: Exit, now: str) -> dict[str, Any]:
    """The status once the containers exited and the pod's restartPolicy leaves them so: the
    pod ``Failed`` (``Succeeded`` for exit 0), as ``pod_complete`` writes a completed pod, with
    each container's exit, restart count and last state."""
    status = pod_complete(pod, {"Now": lambda: now})
    failed = ending.code != 0
    current = _statuses(pod)
    started = str((pod.get("status") or {}).get("startTime") or now)
    for cs in status.get("containerStatuses") or ():
        before = current.get(cs["name"]) or {}
        cs["restartCount"] = int(before.get("restartCount") or 0)
        if before.get("lastState"):
            cs["lastState"] = before["lastState"]
        cs["state"] = {"terminated": _terminated(before, ending, now, started)}
    if failed:
        status["phase"] = "Failed"
        for c in status.get("conditions") or ():
            if c.get("type") in ("Ready", "ContainersReady"):
                c["reason"] = "PodFailed"
    return status


def crashed(pod: dict[str, Any], ending: Exit, now: str, backoff: float | None) -> dict[str, Any]:
    """The status once the containers exited and are to be restarted: at once (``backoff``
    None: running again, restart count one more) or after ``backoff`` seconds (waiting in
    ``CrashLoopBackOff``, the pod not ready)."""
    meta = pod.get("metadata") or {}
    current = _statuses(pod)
    started = str((pod.get("status") or {}).get("startTime") or now)
    containers = []
    for c in _regular(pod):
        before = dict(current.get(str(c.get("name"))) or {"name": c.get("name"), "image": c.get("image"),
                                                      "restartCount": 0})
        before["lastState"] = {"terminated": _terminated(before, ending, now, started)}
        if backoff is None:
            before.update(ready=True, started=True, restartCount=int(before.get("restartCount") or 0) + 1,
                          state={"running": {"startedAt": now}})
        else:
            message = (f"back-off {go_duration(backoff)} restarting failed container={c.get('name')} "
                       f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})")
            before.update(ready=False, started=False,
                          state={"waiting": {"reason": "CrashLoopBackOff", "message": message}})
        containers.append(before)
    if backoff is None:
        return {**_observed(pod), "containerStatuses": containers}
    unready = " ".join(str(c.get("name")) for c in _regular(pod))
    return {**_observed(pod), "phase": "Running", "containerStatuses": containers,
            "conditions": _conditions(pod, False, "ContainersNotReady",
                                      f"containers with unready status: [{unready}]", now)}


def restarted(pod: dict[str, Any], now: str) -> dict[str, Any]:
    """The status once the back-off is over: the containers running again, ready."""
    containers = []
    for s in _statuses(pod).values():
        s = dict(s)
        if "waiting" in (s.get("state") or {}):
            s.update(ready=True, started=True, restartCount=int(s.get("restartCount") or 0) + 1,
                     state={"running": {"startedAt": now}})
        containers.append(s)
    gates = (pod.get("spec") or {}).get("readinessGates") or ()
    gated = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or ()}
    ready = all(gated.get(g.get("conditionType")) == "True" for g in gates if isinstance(g, dict))
    conditions = _conditions(pod, True, "", "", now)
    if not ready:  # the containers are, the pod is not until its gates are
        conditions = [c if c["type"] != "Ready" else {**c, "status": "False", "reason": "ReadinessGatesNotReady"}
                      for c in conditions]
    return {**_observed(pod), "containerStatuses": containers, "conditions": conditions}


def waiting_in_backoff(pod: dict[str, Any]) -> bool:
    """Whether a container of ``pod`` waits in ``CrashLoopBackOff``."""
    return any(((s.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
               for s in _statuses(pod).values())


def all_running(pod: dict[str, Any]) -> bool:
    """Whether each regular container of ``pod`` has a status and runs."""
    current = _statuses(pod)
    containers = _regular(pod)
    return bool(containers) and all("running" in ((current.get(str(c.get("name"))) or {}).get("state") or {})
                                    for c in containers)
