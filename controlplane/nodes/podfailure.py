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
init containers) run on. Unless ``sim.controlplane.dev/fail-container: NAME`` names the one
container that fails (``Target``; the others run on), as the kubelet treats it
(``computePodActions`` in kuberuntime_manager.go, its ``computeInitContainerActions`` in
kuberuntime_container.go, ``getPhase``, generate.go):

- an init container: the pod starts with the init containers before it completed, it running,
  the rest and the regular containers ``waiting`` in ``PodInitializing``, the pod ``Pending``
  and ``Initialized`` False (``ContainersNotInitialized``). Its exit is reported ``terminated``
  (kubectl's ``Init:Error``); under ``Never`` the pod is then ``Failed``; else the kubelet's next
  sync starts it again, at once the first time, then after the back-off (``CrashLoopBackOff``,
  kubectl's ``Init:CrashLoopBackOff``), the pod ``Pending`` throughout. A run that does not fail
  completes it (exit 0), and the pod goes on: the init containers after it completed, the
  containers running;
- a regular container: it alone exits, not ready, ``restartCount`` its own; restarted (as above,
  its exit reported first) as the pod's policy says, the pod ``Running`` meanwhile; not
  restarted, the others complete as the built-in pod-complete stage completes them, and the pod
  is ``Failed`` (getPhase: not every container succeeded);
- a sidecar (an init container with ``restartPolicy: Always``, KEP-753): restarted whatever the
  pod's policy, the pod ``Running``, ``Initialized`` still True (a regular container started).
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

__all__ = ["EXIT_CODE", "FAILURE_PROBABILITY", "FAIL_AFTER", "FAIL_CONTAINER", "OOM_KILLED", "Exit", "JobFailures",
           "Target", "all_running", "completed", "crashed", "exited", "get_phase", "initialized", "initializing",
           "may_fail", "one_backing_off", "one_exited", "one_restarted", "planned_exit", "restarted", "restarts",
           "run_of", "state_of", "target_of", "target_status", "waiting_in_backoff"]

log = logging.getLogger(__name__)

PREFIX = "sim.controlplane.dev/"
EXIT_CODE = PREFIX + "exit-code"
OOM_KILLED = PREFIX + "oom-killed"
FAIL_AFTER = PREFIX + "fail-after"
FAILURE_PROBABILITY = PREFIX + "failure-probability"
FAIL_CONTAINER = PREFIX + "fail-container"
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


# -- one container failing: a named init container, sidecar or regular container ----------------


@dataclass(frozen=True, slots=True)
class Target:
    """The one container ``fail-container`` names: its status list, and its kind."""
    name: str
    field: str  # the status list: "initContainerStatuses" or "containerStatuses"
    init: bool  # a regular init container: the pod waits for it to complete
    sidecar: bool  # a restartable init container (KEP-753): restarted whatever the pod's restartPolicy


def target_of(pod: dict[str, Any]) -> Target | None:
    """The container ``fail-container`` names, None if it names none (every regular container
    fails, as without it; a name the pod lacks counts as absent, with a warning)."""
    meta = pod.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(FAIL_CONTAINER)
    if not name:
        return None
    spec = pod.get("spec") or {}
    for c in spec.get("initContainers") or ():
        if isinstance(c, dict) and c.get("name") == name:
            sidecar = c.get("restartPolicy") == "Always"
            return Target(name, "initContainerStatuses", not sidecar, sidecar)
    if any(isinstance(c, dict) and c.get("name") == name for c in spec.get("containers") or ()):
        return Target(name, "containerStatuses", False, False)
    uid = str(meta.get("uid") or "")
    if uid not in _warned:  # (once a pod: this is read each time the pod is seen)
        if len(_warned) >= 1024:
            _warned.clear()
        _warned.add(uid)
        log.warning("pod %s/%s: annotation %s=%r names no container of the pod: ignored", meta.get("namespace"),
                    meta.get("name"), FAIL_CONTAINER, name)
    return None


_warned: set[str] = set()  # the pods whose fail-container names none of their containers, warned of


def restarts(target: Target, policy: str, code: int) -> bool:
    """Whether the kubelet starts ``target`` again after it exited ``code`` (computeInitContainerActions,
    computePodActions): a sidecar always; an init container only after a failure, unless the
    pod's policy is Never; a regular container as the pod's policy says."""
    if target.sidecar:
        return True
    if policy == "Never":
        return False
    return code != 0 or (policy == "Always" and not target.init)


def target_status(pod: dict[str, Any], target: Target) -> dict[str, Any]:
    """``target``'s status as the pod has it ({} before its kubelet wrote one)."""
    for s in (pod.get("status") or {}).get(target.field) or ():
        if isinstance(s, dict) and s.get("name") == target.name:
            return s
    return {}


def state_of(status: dict[str, Any]) -> str:
    """"running", "terminated", "waiting" or "" (none yet)."""
    state = status.get("state") or {}
    return next((k for k in ("running", "terminated", "waiting") if k in state), "")


def _regular_started(spec: dict[str, Any], containers: list[dict[str, Any]]) -> bool:
    """Whether a regular container of the pod runs or ran (kubecontainer.HasAnyRegularContainerStarted)."""
    names = {c.get("name") for c in spec.get("containers") or () if isinstance(c, dict)}
    return any(s.get("name") in names and state_of(s) in ("running", "terminated") for s in containers)


def get_phase(spec: dict[str, Any], inits: list[dict[str, Any]], containers: list[dict[str, Any]]) -> str:
    """The phase of a pod not yet terminal from its containers' statuses, as the kubelet's
    getPhase (kubelet_pods.go; the ContainerRestartRules gate off: the pod's policy decides)."""
    by_name = {s.get("name"): s for s in (*inits, *containers)}
    pending_init = failed_init = pending_sidecars = 0
    unknown = running = waiting = stopped = succeeded = 0
    for c in spec.get("initContainers") or ():
        if not isinstance(c, dict) or c.get("restartPolicy") == "Always":
            continue
        s = by_name.get(c.get("name")) or {}
        state = state_of(s)
        last_exit = (s.get("lastState") or {}).get("terminated")
        if state == "terminated":
            failed_init += 1 if s["state"]["terminated"].get("exitCode") else 0
        elif state == "waiting" and last_exit is not None:
            failed_init += 1 if last_exit.get("exitCode") else 0
        else:  # running, waiting to start, or no status yet
            pending_init += 1
    for c in spec.get("initContainers") or ():
        if not isinstance(c, dict) or c.get("restartPolicy") != "Always":
            continue
        s = by_name.get(c.get("name")) or {}
        state = state_of(s)
        if state == "running":
            pending_sidecars += 0 if s.get("started") else 1
            running += 1
        elif state == "waiting" and not (s.get("lastState") or {}).get("terminated"):
            pending_sidecars += 1
            waiting += 1
        elif not state:
            pending_sidecars += 1
            unknown += 1
    for c in spec.get("containers") or ():
        if not isinstance(c, dict):
            continue
        s = by_name.get(c.get("name")) or {}
        state = state_of(s)
        if state == "running":
            running += 1
        elif state == "terminated":
            stopped += 1
            succeeded += 0 if s["state"]["terminated"].get("exitCode") else 1
        elif state == "waiting":
            if (s.get("lastState") or {}).get("terminated"):
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1
    policy = spec.get("restartPolicy") or "Always"
    if failed_init and policy == "Never":
        return "Failed"
    if pending_init or (pending_sidecars and not _regular_started(spec, containers)) or waiting:
        return "Pending"
    if running and not unknown:
        return "Running"
    if not running and stopped and not unknown:
        if policy == "Always":
            return "Running"  # every container restarting
        if stopped == succeeded:
            return "Succeeded"
        return "Failed" if policy == "Never" else "Running"
    return "Pending"


def _settled(pod: dict[str, Any], inits: list[dict[str, Any]], containers: list[dict[str, Any]],
             now: str) -> dict[str, Any]:
    """The status the kubelet writes for these container statuses: the phase (``get_phase``),
    ``Initialized``, ``ContainersReady`` and ``Ready`` as status/generate.go generates them."""
    spec = pod.get("spec") or {}
    phase = get_phase(spec, inits, containers)
    by_name = {s.get("name"): s for s in (*inits, *containers)}
    incomplete, unready = [], []
    for c in spec.get("initContainers") or ():
        s = by_name.get(c.get("name")) or {}
        sidecar = c.get("restartPolicy") == "Always"
        if not s.get("started" if sidecar else "ready"):
            incomplete.append(str(c.get("name")))
        if sidecar and not s.get("ready"):
            unready.append(str(c.get("name")))
    unready += [str(c.get("name")) for c in spec.get("containers") or ()
                if not (by_name.get(c.get("name")) or {}).get("ready")]
    wanted: dict[str, tuple[bool, str, str]] = {}
    if incomplete and not _regular_started(spec, containers):
        wanted["Initialized"] = (False, "ContainersNotInitialized",
                                 f"containers with incomplete status: [{' '.join(incomplete)}]")
    else:
        wanted["Initialized"] = (True, "", "")
    if phase == "Failed":
        ready = (False, "PodFailed", "")
    elif unready:
        ready = (False, "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    else:
        ready = (True, "", "")
    wanted["ContainersReady"] = ready
    wanted["Ready"] = ready if not ready[0] else _gated(pod)
    return {**_observed(pod), "phase": phase, "initContainerStatuses": inits or None,
            "containerStatuses": containers or None, "conditions": _with_conditions(pod, wanted, now)}


def _gated(pod: dict[str, Any]) -> tuple[bool, str, str]:
    """``Ready`` once the containers are: its readiness gates' conditions True (generate.go's words)."""
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
    messages = []
    for g in (pod.get("spec") or {}).get("readinessGates") or ():
        kind = str(g.get("conditionType"))
        c = conditions.get(kind)
        if c is None:
            messages.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif c.get("status") != "True":
            messages.append(f'the status of pod readiness gate "{kind}" is not "True", but {c.get("status")}')
    return (False, "ReadinessGatesNotReady", ", ".join(messages)) if messages else (True, "", "")


def _with_conditions(pod: dict[str, Any], wanted: dict[str, tuple[bool, str, str]], now: str) -> list[dict[str, Any]]:
    generation = generation_of(pod)
    out, seen = [], set()
    for c in (pod.get("status") or {}).get("conditions") or ():
        kind = c.get("type")
        seen.add(kind)
        if kind not in wanted:
            out.append(stamped(dict(c), generation) if kind in ("PodScheduled", "PodReadyToStartContainers") else c)
            continue
        ok, reason, message = wanted[kind]
        new = {"type": kind, "status": "True" if ok else "False"}
        if reason:
            new["reason"] = reason
        if message:
            new["message"] = message
        new["lastTransitionTime"] = c.get("lastTransitionTime") or now if c.get("status") == new["status"] else now
        out.append(stamped(new, generation))
    for kind, (ok, reason, message) in wanted.items():
        if kind not in seen:
            new = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": now}
            if reason:
                new["reason"] = reason
            if message:
                new["message"] = message
            out.append(stamped(new, generation))
    return out


def _lists(pod: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    status = pod.get("status") or {}
    return ([dict(s) for s in status.get("initContainerStatuses") or () if isinstance(s, dict)],
            [dict(s) for s in status.get("containerStatuses") or () if isinstance(s, dict)])


def _replace(pod: dict[str, Any], target: Target, change: dict[str, Any], now: str) -> dict[str, Any]:
    inits, containers = _lists(pod)
    for s in inits if target.init or target.sidecar else containers:
        if s.get("name") == target.name:
            s.update(change)
    return _settled(pod, inits, containers, now)


def initializing(pod: dict[str, Any], ready: dict[str, Any], target: Target, now: str) -> dict[str, Any]:
    """What the built-in pod-ready stage writes (``ready``) made the status of a pod whose init
    container ``target`` runs: the init containers before it completed (sidecars running), it
    running, those after it and the regular containers waiting in ``PodInitializing``; the pod
    ``Pending``, not initialized."""
    def waiting(s: dict[str, Any]) -> dict[str, Any]:  # not created yet: no container nor image ID
        kept = {k: v for k, v in s.items() if k not in ("containerID", "state", "ready", "started")}
        return {**kept, "imageID": "", "ready": False, "started": False,
                "state": {"waiting": {"reason": "PodInitializing"}}}

    inits, after = [], False
    for s in ready.get("initContainerStatuses") or ():
        if s.get("name") == target.name:
            after = True
            inits.append({**s, "ready": False, "started": True, "containerID": f"containerd://{target.name}",
                          "state": {"running": {"startedAt": now}}})
        else:
            inits.append(waiting(s) if after else s)
    containers = [waiting(s) for s in ready.get("containerStatuses") or ()]
    out = {**ready, **_settled({**pod, "status": {**(pod.get("status") or {}),
                                                   "conditions": ready.get("conditions") or []}},
                               inits, containers, now)}
    return out


def initialized(pod: dict[str, Any], now: str) -> dict[str, Any]:
    """The status once the init container the pod waited for completed: the init containers
    after it completed at once (sidecars running), the regular containers running."""
    spec = pod.get("spec") or {}
    sidecars = {c.get("name") for c in spec.get("initContainers") or () if isinstance(c, dict)
                and c.get("restartPolicy") == "Always"}
    inits, containers = _lists(pod)
    for s in inits:
        if state_of(s) == "waiting" and not s.get("lastState"):
            s.update(containerID=f"containerd://{s.get('name')}", imageID=f"{s.get('image')}@sha256:simulated")
            if s.get("name") in sidecars:
                s.update(ready=True, started=True, state={"running": {"startedAt": now}})
            else:
                s.update(ready=True, started=False,
                         state={"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                               "finishedAt": now}})
    for s in containers:
        if state_of(s) == "waiting" and not s.get("lastState"):
            s.update(containerID=f"containerd://{s.get('name')}", imageID=f"{s.get('image')}@sha256:simulated",
                     ready=True, started=True, state={"running": {"startedAt": now}})
    return _settled(pod, inits, containers, now)


def one_exited(pod: dict[str, Any], target: Target, ending: Exit, now: str) -> dict[str, Any]:
    """The status once ``target`` exited (the others running on): it ``terminated``, not ready;
    the phase and conditions what the kubelet makes of that (an init container's success lets
    the pod go on: ``initialized``)."""
    current = target_status(pod, target)
    started = str((pod.get("status") or {}).get("startTime") or now)
    status = _replace(pod, target, {"ready": ending.code == 0 and target.init, "started": False,
                                    "state": {"terminated": _terminated(current, ending, now, started)}}, now)
    if target.init and ending.code == 0:
        return initialized({**pod, "status": {**(pod.get("status") or {}), **status}}, now)
    return status


def one_backing_off(pod: dict[str, Any], target: Target, backoff: float, now: str) -> dict[str, Any]:
    """``target`` exited, to be started again after ``backoff`` seconds: waiting in
    ``CrashLoopBackOff``, its exit its ``lastState``."""
    meta = pod.get("metadata") or {}
    current = target_status(pod, target)
    last = (current.get("state") or {}).get("terminated") or (current.get("lastState") or {}).get("terminated")
    message = (f"back-off {go_duration(backoff)} restarting failed container={target.name} "
               f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})")
    return _replace(pod, target, {"ready": False, "started": False, "lastState": {"terminated": last} if last else {},
                                  "state": {"waiting": {"reason": "CrashLoopBackOff", "message": message}}}, now)


def one_restarted(pod: dict[str, Any], target: Target, now: str) -> dict[str, Any]:
    """``target`` started again: running, ``restartCount`` one more, its exit its ``lastState``
    (ready at once: the failure model's containers are not probed, nodes/probes.py; an init container once
    it completes)."""
    current = target_status(pod, target)
    last = (current.get("state") or {}).get("terminated") or (current.get("lastState") or {}).get("terminated")
    return _replace(pod, target, {"ready": not target.init, "started": True,
                                  "restartCount": int(current.get("restartCount") or 0) + 1,
                                  "lastState": {"terminated": last} if last else {},
                                  "state": {"running": {"startedAt": now}}}, now)


def completed(pod: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """What the built-in pod-complete stage writes (``rendered``), keeping what the failure
    model did: each container's restart count and last state, a container that exited in
    failure so (the pod ``Failed`` then, as getPhase: not every container succeeded)."""
    inits, current = _lists(pod)
    by_name = {s.get("name"): s for s in (*inits, *current)}
    failed = False
    for s in (*(rendered.get("initContainerStatuses") or ()), *(rendered.get("containerStatuses") or ())):
        before = by_name.get(s.get("name")) or {}
        s["restartCount"] = int(before.get("restartCount") or 0)
        if before.get("lastState"):
            s["lastState"] = before["lastState"]
        terminated = (before.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") and s in (rendered.get("containerStatuses") or ()):
            s["state"] = {"terminated": terminated}
            failed = True
    if failed:
        rendered["phase"] = "Failed"
        for c in rendered.get("conditions") or ():
            if c.get("type") in ("Ready", "ContainersReady"):
                c["reason"] = "PodFailed"
    return rendered
