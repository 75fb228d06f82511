"""Simulated containers that fail (``nodes/podfailure.py``): pods annotated
``sim.controlplane.dev/exit-code`` (or ``oom-killed``), and Job pods under
``--job-failure-rate``, exit as a kubelet reports it, per their ``restartPolicy``: a
``Never`` pod Failed with its exit code and reason; an ``Always`` or ``OnFailure`` one
restarted, at once the first time, then after a back-off in ``CrashLoopBackOff``
(upstream's 10 s doubling to 5 min, here 0.3 s doubling to 1.2 s). Pods without the
model run as before."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.client import Client
from controlplane.nodes.podfailure import (
    EXIT_CODE,
    FAIL_AFTER,
    FAILURE_PROBABILITY,
    OOM_KILLED,
    Exit,
    JobFailures,
    crashed,
    exited,
    planned_exit,
)
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating

BACKOFF = {"crash_backoff": 0.3, "crash_backoff_max": 1.2}


def annotated(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    body = pod(name, "sim-node-0", **spec)
    body["metadata"]["annotations"] = annotations
    return body


async def status_of(client: Client, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (await client.get(f"{PODS}/{name}")).get("status") or {}
    return status


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in status.get("conditions") or ()}


async def test_a_never_pod_fails_with_its_exit_code_and_reason(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        await client.create(PODS, annotated("err", {EXIT_CODE: "3", FAIL_AFTER: "300ms"}, restartPolicy="Never"))
        await client.create(PODS, annotated("oom", {OOM_KILLED: "true"}, restartPolicy="Never"))

        async def failed(name: str) -> dict[str, Any] | None:
            s = await status_of(client, name)
            return s if s.get("phase") == "Failed" else None

        err = await eventually(lambda: failed("err"))
        oom = await eventually(lambda: failed("oom"))
    t = err["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (3, "Error") and t["startedAt"] and t["finishedAt"]
    t = oom["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (137, "OOMKilled")
    for s in (err, oom):
        # generate.go: a failed pod's Ready and ContainersReady are False with reason PodFailed
        assert conditions(s)["Ready"] == ("False", "PodFailed")
        assert conditions(s)["ContainersReady"] == ("False", "PodFailed")
        assert conditions(s)["PodScheduled"][0] == "True" and "DisruptionTarget" not in conditions(s)
        assert s["containerStatuses"][0]["restartCount"] == 0 and s["containerStatuses"][0]["ready"] is False


async def test_an_always_pod_crash_loops_with_upstreams_back_off(client: Client) -> None:
    seen: list[tuple[str, int, str | None]] = []  # (state, restartCount, back-off message)
    async with simulating(client, fast(**BACKOFF)):
        created = await client.create(PODS, annotated("loop", {EXIT_CODE: "2", FAIL_AFTER: "200ms"}))
        uid = created["metadata"]["uid"]

        async def in_backoff(restarts: int) -> dict[str, Any] | None:
            s = await status_of(client, "loop")
            cs = (s.get("containerStatuses") or [{}])[0]
            state = next(iter(cs.get("state") or {"none": 0}))
            entry = (state, cs.get("restartCount", 0), (cs["state"].get("waiting") or {}).get("message")
                     if state == "waiting" else None)
            if not seen or seen[-1] != entry:
                seen.append(entry)
            return s if state == "waiting" and cs["restartCount"] == restarts else None

        first = await eventually(lambda: in_backoff(1))
        await eventually(lambda: in_backoff(2))
        await eventually(lambda: in_backoff(3), timeout=15)
    cs = first["containerStatuses"][0]
    assert first["phase"] == "Running"
    assert cs["state"]["waiting"] == {
        "reason": "CrashLoopBackOff",
        "message": f"back-off 300ms restarting failed container=c pod=loop_default({uid})"}
    last = cs["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (2, "Error")
    assert conditions(first)["Ready"] == ("False", "ContainersNotReady")
    assert conditions(first)["ContainersReady"] == ("False", "ContainersNotReady")
    assert next(c for c in first["conditions"] if c["type"] == "Ready")["message"] == \
        "containers with unready status: [c]"
    # the first exit restarts at once (no back-off entry yet); each later one waits, doubled
    backoffs = [m.split()[1] for _, _, m in seen if m]
    assert backoffs == ["300ms", "600ms", "1.2s"]
    running = [(n) for state, n, _ in seen if state == "running"]
    assert running[:3] == [0, 1, 2]
    assert all(state != "terminated" for state, _, _ in seen)  # its phase stays Running throughout


async def test_the_back_off_resets_after_a_long_run(client: Client) -> None:
    """flowcontrol.Backoff forgets an entry not stepped for twice its maximum: a container that
    ran that long restarts at once again."""
    async with simulating(client, fast(crash_backoff=0.2, crash_backoff_max=0.25)) as sim:
        await client.create(PODS, annotated("slow", {EXIT_CODE: "1", FAIL_AFTER: "700ms"}))

        async def restarts() -> int:
            cs = ((await status_of(client, "slow")).get("containerStatuses") or [{}])[0]
            assert "waiting" not in (cs.get("state") or {}), cs
            return int(cs.get("restartCount") or 0)

        await eventually(lambda: _at_least(restarts, 2), timeout=10)
        assert sim.pods["default/slow"].backoff == 0.2


async def _at_least(get: Any, n: int) -> bool:
    return bool(await get() >= n)


async def test_pods_without_the_model_run_as_before(client: Client) -> None:
    async with simulating(client, fast(job_failure_rate=1.0)):
        await client.create(PODS, pod("job-like", "sim-node-0", restartPolicy="Never"))  # no Job owns it
        await client.create(PODS, pod("server", "sim-node-0"))

        async def phase(name: str, want: str) -> bool:
            return (await status_of(client, name)).get("phase") == want

        await eventually(lambda: phase("job-like", "Succeeded"))
        await asyncio.sleep(0.5)
        assert await phase("server", "Running")
        cs = (await status_of(client, "server"))["containerStatuses"][0]
        assert cs["restartCount"] == 0 and "running" in cs["state"]


def test_the_draw_is_fixed_by_uid_and_run() -> None:
    jobs = JobFailures()
    owned = {"metadata": {"uid": "u", "annotations": {EXIT_CODE: "5", FAILURE_PROBABILITY: "0.5"}}}
    draws = [planned_exit({"metadata": {**owned["metadata"], "uid": f"u{i}"}}, 0, jobs, 1.0) for i in range(400)]
    assert draws == [planned_exit({"metadata": {**owned["metadata"], "uid": f"u{i}"}}, 0, jobs, 1.0)
                     for i in range(400)]
    failures = sum(d is not None for d in draws)
    assert 160 < failures < 240
    assert {d for d in draws if d is not None} == {Exit(5, "Error", 1.0)}
    job = {"metadata": {"uid": "j", "ownerReferences": [{"kind": "Job", "name": "x", "controller": True}]}}
    assert planned_exit(job, 0, JobFailures(1.0, 42), 2.0) == Exit(42, "Error", 2.0)
    assert planned_exit(job, 0, JobFailures(0.0), 2.0) is None
    # an unreadable annotation is absent (a kubelet cannot refuse the pod)
    assert planned_exit({"metadata": {"annotations": {EXIT_CODE: "x", FAIL_AFTER: "1m"}}}, 0, jobs, 1.0) == \
        Exit(1, "Error", 60.0)


def test_the_statuses_written() -> None:
    running = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 2},
               "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "a", "image": "x"}]},
               "status": {"phase": "Running", "startTime": "T0",
                          "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "T0"},
                                         {"type": "ContainersReady", "status": "True", "lastTransitionTime": "T0"},
                                         {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0"}],
                          "containerStatuses": [{"name": "a", "image": "x", "ready": True, "started": True,
                                                 "restartCount": 4, "state": {"running": {"startedAt": "T1"}}}]}}
    s = crashed(running, Exit(1, "Error", 1.0), "T2", 160.0)
    cs = s["containerStatuses"][0]
    assert cs["state"]["waiting"]["message"] == "back-off 2m40s restarting failed container=a pod=p_ns(u)"
    assert cs["lastState"]["terminated"] == {"exitCode": 1, "reason": "Error", "startedAt": "T1", "finishedAt": "T2"}
    assert cs["restartCount"] == 4 and s["observedGeneration"] == 2
    ok = exited(running, Exit(0, "Completed", 1.0), "T3")
    assert ok["phase"] == "Succeeded" and ok["containerStatuses"][0]["restartCount"] == 4
    assert conditions(ok)["Ready"] == ("False", "PodCompleted")


# A user's stages in the shape of KWOK's chaos and restart stages (kustomize/stage/pod/chaos,
# general/pod-container-restart): the same crash loop, said by the pod's labels and annotations
CRASH_STAGES = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: container-crash}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {crash.example.com/enabled: "true"}
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.phase, operator: In, values: [Running]}
    - {key: '.status.containerStatuses.[].state.running', operator: Exists}
  weight: 10000
  delay:
    durationMilliseconds: 1000
    durationFrom: {expressionFrom: '.metadata.annotations["crash.example.com/delay"]'}
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      {{ $code := or (index (or .metadata.annotations dict) "crash.example.com/exit-code") 1 }}
      conditions:
      - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range $i, $c := .status.containerStatuses }}
      - name: {{ $c.name | Quote }}
        image: {{ $c.image | Quote }}
        ready: false
        started: false
        restartCount: {{ $c.restartCount }}
        lastState:
          terminated:
            exitCode: {{ $code }}
            reason: Error
            startedAt: {{ $c.state.running.startedAt | Quote }}
            finishedAt: {{ $now | Quote }}
        state:
          waiting:
            reason: CrashLoopBackOff
            {{ $m := $root.metadata }}
            {{ $pod := printf "%s_%s(%s)" $m.name $m.namespace $m.uid }}
            message: {{ printf "back-off 10s restarting failed container=%s pod=%s" $c.name $pod | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: container-restart}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: '.status.containerStatuses.[].state.waiting.reason', operator: In, values: [CrashLoopBackOff]}
  delay: {durationMilliseconds: 200}
  next:
    event: {type: Warning, reason: BackOff, message: Back-off restarting failed container}
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .status.containerStatuses }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: {{ add1 .restartCount }}
        lastState: {{ toJson .lastState }}
        state:
          running: {startedAt: {{ $now | Quote }}}
      {{ end }}
"""


async def test_a_users_kwok_stages_say_the_same_crash_loop(client: Client) -> None:
    """Our stage engine runs what KWOK's chaos stages need: label and annotation selectors,
    delays from annotations, ``index``/``printf``/``add1``/``toJson`` over the container
    statuses, an event; the built-in stages beside them (loaded as a file)."""
    from importlib import resources

    from controlplane.nodes.stages import load_stages

    builtin = resources.files("controlplane.nodes").joinpath("default-stages.yaml").read_text()
    stages = load_stages(builtin.replace("__JOB_MILLISECONDS__", "200") + "\n---\n" + CRASH_STAGES)
    async with simulating(client, fast(stages=stages)):
        body = pod("kwok-crash", "sim-node-0")
        body["metadata"].update(labels={"crash.example.com/enabled": "true"},
                                annotations={"crash.example.com/exit-code": "9", "crash.example.com/delay": "300ms"})
        created = await client.create(PODS, body)

        async def restarted_twice() -> dict[str, Any] | None:
            s = await status_of(client, "kwok-crash")
            cs = (s.get("containerStatuses") or [{}])[0]
            return s if cs.get("restartCount", 0) >= 2 else None

        status = await eventually(restarted_twice, timeout=15)
    cs = status["containerStatuses"][0]
    assert status["phase"] == "Running"
    assert cs["lastState"]["terminated"]["exitCode"] == 9
    assert created["metadata"]["uid"]
