"""Pod lifecycle as KWOK stages: the defaults, a user's stage file, and the parser's limits."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import random
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from controlplane.client import ApiError, Client
from controlplane.nodes.allocated import pod_allocation
from controlplane.nodes.images import ImageCatalog
from controlplane.nodes.simulator import _quote, _yaml, now_rfc3339_nano
from controlplane.nodes.stages import (
    StageError,
    StageSet,
    default_stages,
    load_stages,
    parse_duration,
    read_stage_files,
)
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating


async def phase(client: Client, name: str) -> str | None:
    try:
        got: str | None = (await client.get(f"{PODS}/{name}")).get("status", {}).get("phase")
        return got
    except ApiError as e:
        if e.code == 404:
            return "(gone)"
        raise


async def test_bound_pod_runs_with_kubelet_status(client: Client) -> None:
    async with simulating(client, fast()) as sim:
        await client.create(PODS, pod("web", "sim-node-0", readinessGates=[{"conditionType": "example.com/gate"}]))
        await eventually(lambda: _is(client, "web", "Running"))
        status = (await client.get(f"{PODS}/web"))["status"]
        node = sim.nodes["sim-node-0"]
        assert status["hostIP"] == node.ip and status["hostIPs"] == [{"ip": node.ip}]
        assert status["podIP"].startswith(node.cidr.rsplit(".", 2)[0]) and status["podIPs"] == [{"ip": status["podIP"]}]
        conds = {c["type"]: c["status"] for c in status["conditions"]}
        assert conds == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                         "ContainersReady": "True", "PodScheduled": "True", "example.com/gate": "True"}
        [cs] = status["containerStatuses"]
        assert cs["name"] == "c" and cs["ready"] is True and "running" in cs["state"]
        assert status["startTime"]
        # a pod on a node nobody simulates is left alone
        await client.create(PODS, pod("elsewhere", "real-node"))
        await client.create(PODS, pod("unbound"))
        await eventually(lambda: _is(client, "web", "Running"))
        assert await phase(client, "elsewhere") == "Pending"
        assert await phase(client, "unbound") == "Pending"


def _first_patch_times_out(monkeypatch: pytest.MonkeyPatch, suffix: str) -> list[str]:
    """The simulated kubelets' first patch of a path ending in ``suffix`` times out (the client's
    timeout on a loaded server, not an ApiError); the list gets that path once it has."""
    from controlplane.nodes.simulator import NodeSimulator

    failed: list[str] = []
    real_kubelet = NodeSimulator._kubelet

    class SlowKubelet:
        def __init__(self, inner: Client) -> None:
            self.inner = inner

        async def patch(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
            if path.endswith(suffix) and not failed:
                failed.append(path)
                raise httpx.ReadTimeout("timed out")
            return await self.inner.patch(path, body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(NodeSimulator, "_kubelet", lambda sim, node: SlowKubelet(real_kubelet(sim, node)))
    return failed


async def test_a_stage_whose_status_write_times_out_is_tried_again(client: Client,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet's status write of a stage times out (the client's timeout on a loaded server, not
    an ApiError): the stage is run again, not lost with the pod left Pending for good."""
    failed = _first_patch_times_out(monkeypatch, "/pods/web/status")
    async with simulating(client, fast()):
        await client.create(PODS, pod("web", "sim-node-0"))
        await eventually(lambda: _is(client, "web", "Running"))
        assert failed


async def test_sidecars_run_beside_the_containers_and_stop_when_they_complete(client: Client) -> None:
    """KEP-753's restartable init containers, as a kubelet reports them: running, started and ready
    while the pod runs (kubectl's READY counts them: 2/2), terminated once its containers complete;
    the other init containers completed."""
    async with simulating(client, fast()):
        inits = [{"name": "init", "image": "busybox"}, {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
        await client.create(PODS, pod("meshed", "sim-node-0", initContainers=inits))
        await client.create(PODS, pod("job", "sim-node-0", restartPolicy="Never", initContainers=inits))
        await eventually(lambda: _is(client, "meshed", "Running"))
        status = (await client.get(f"{PODS}/meshed"))["status"]
        init, proxy = status["initContainerStatuses"]
        assert list(init["state"]) == ["terminated"] and init["state"]["terminated"]["reason"] == "Completed"
        assert list(proxy["state"]) == ["running"] and proxy["started"] is True and proxy["ready"] is True
        await eventually(lambda: _is(client, "job", "Succeeded"))
        init, proxy = (await client.get(f"{PODS}/job"))["status"]["initContainerStatuses"]
        assert init["state"]["terminated"]["reason"] == "Completed" and init["ready"] is True
        assert proxy["state"]["terminated"]["reason"] == "Completed" and proxy["ready"] is False


# busybox pulled in about a second (its size, 4.3 MB, takes 0.1 s): longer than a loaded machine
# takes to write the status of an ephemeral container waiting for it
SLOW_BUSYBOX = ImageCatalog(sizes={**ImageCatalog().sizes, "busybox": (60.0, 1)})


async def test_ephemeral_containers_run_once_added(client: Client) -> None:
    """kubectl debug's containers, as a kubelet reports them: waiting in ContainerCreating while
    the image is pulled, then running, not ready and with no ``started`` (the kubelet's prober
    sets it for the regular and init containers only); their logs read.

    The waiting status lasts as long as the pull, and is not written at all if the pull is done
    before its write is made (as a kubelet's status manager writes only its latest status): with
    busybox's size (a pull of 0.1 s) a loaded machine may never show it. So the image here takes
    about a second to pull, and every version of the pod is read from a watch (a poll could fall
    between the two writes)."""
    versions: list[dict[str, Any]] = []

    async def record(rv: str) -> None:
        async for event in client.watch(PODS, resource_version=rv, field_selector="metadata.name=debugged"):
            if event.type == "MODIFIED":
                versions.append(event.object)

    async with simulating(client, fast(image_catalog=SLOW_BUSYBOX)):
        await client.create(PODS, pod("debugged", "sim-node-0"))
        await eventually(lambda: _is(client, "debugged", "Running"))
        watcher = asyncio.create_task(record((await client.get(f"{PODS}/debugged"))["metadata"]["resourceVersion"]))
        await client.patch(f"{PODS}/debugged/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "busybox:1.36", "targetContainerName": "c"}]}}, "strategic")

        async def reported(state: str, n: int = 1) -> list[dict[str, Any]] | None:
            got: list[dict[str, Any]] = (await client.get(f"{PODS}/debugged"))["status"].get(
                "ephemeralContainerStatuses") or []
            return got if len(got) == n and all(state in s["state"] for s in got) else None

        async def written(state: str) -> list[dict[str, Any]] | None:
            return next((got for v in versions if len(got := v["status"].get("ephemeralContainerStatuses") or [])
                         == 1 and state in got[0]["state"]), None)

        try:
            [creating] = await eventually(lambda: written("waiting"))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        assert creating["state"] == {"waiting": {"reason": "ContainerCreating"}} and creating["imageID"] == ""
        [status] = await eventually(lambda: reported("running"))
        assert status["name"] == "dbg" and status["image"] == "busybox:1.36"
        assert status["imageID"] == "busybox:1.36@sha256:simulated" and status["containerID"].startswith("containerd://")
        assert status["ready"] is False and "started" not in status and status["restartCount"] == 0
        assert status["resources"] == {}
        pod_now = await client.get(f"{PODS}/debugged")
        assert pod_now["status"]["phase"] == "Running" and pod_now["status"]["containerStatuses"][0]["ready"]
        # a second one joins, its image on the node: running at once; the first keeps its status
        # (same container, same start), the list sorted by name as the kubelet's
        await client.patch(f"{PODS}/debugged/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "a-dbg", "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent"}]}},
            "strategic")
        first, second = await eventually(lambda: reported("running", 2))
        assert first["name"] == "a-dbg" and "running" in first["state"] and second == status


async def test_a_late_waiting_status_never_overwrites_a_started_ephemeral_container(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The status write saying an ephemeral container waits for its image, answered only after the
    one saying it runs (two writers at once; a loaded server may finish them in either order):
    the pod ends up reporting it running, never waiting for good. As a kubelet's status manager,
    which never writes a status older than the one it wrote: here each write is made on the
    informer's version of the pod (its resourceVersion the precondition), one that a newer
    version overtook is refused (409), and a running one made again."""
    from controlplane.nodes.simulator import NodeSimulator

    real = NodeSimulator._patch_quietly
    ran = asyncio.Event()
    held: list[str] = []

    def states(body: dict[str, Any]) -> set[str]:
        return {k for s in (body.get("status") or {}).get("ephemeralContainerStatuses") or ()
                for k in s.get("state") or {}}

    async def patch(sim: NodeSimulator, path: str, body: dict[str, Any], patch_type: str = "merge") -> bool:
        if "waiting" in states(body) and not held:
            held.append(path)
            await ran.wait()  # the running status's write answers first
        done = await real(sim, path, body, patch_type)
        if "running" in states(body):
            ran.set()
        return done

    monkeypatch.setattr(NodeSimulator, "_patch_quietly", patch)
    async with simulating(client, fast(image_catalog=SLOW_BUSYBOX)):
        await client.create(PODS, pod("debugged", "sim-node-0"))
        await eventually(lambda: _is(client, "debugged", "Running"))
        await client.patch(f"{PODS}/debugged/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "busybox:1.36", "targetContainerName": "c"}]}}, "strategic")
        await eventually(lambda: asyncio.sleep(0, held and ran.is_set()))

        async def running() -> bool:
            got = (await client.get(f"{PODS}/debugged"))["status"].get("ephemeralContainerStatuses") or []
            return [list(s["state"]) for s in got] == [["running"]]

        await eventually(running)
        await asyncio.sleep(0.3)  # the late waiting write has answered by now
        assert await running()


async def _is(client: Client, name: str, want: str) -> bool:
    return await phase(client, name) == want


async def test_a_pod_deleted_before_it_ran_goes_at_once_whatever_its_grace_period(client: Client) -> None:
    """A kubelet has no container to stop in a pod whose image never came (or is still being
    pulled): it deletes the pod at once; one that ran waits for its grace period."""
    async with simulating(client, fast()):
        stuck = pod("stuck", "sim-node-0", image="nowhere:1")
        stuck["spec"]["containers"][0]["imagePullPolicy"] = "Never"
        await client.create(PODS, stuck)
        await client.create(PODS, pod("ran", "sim-node-0", terminationGracePeriodSeconds=30))

        async def waiting() -> bool:
            statuses = (await client.get(f"{PODS}/stuck")).get("status", {}).get("containerStatuses") or []
            return bool(statuses and statuses[0]["state"].get("waiting", {}).get("reason") == "ErrImageNeverPull")

        await eventually(waiting)
        await eventually(lambda: _is(client, "ran", "Running"))
        await client.delete(f"{PODS}/stuck")
        await client.delete(f"{PODS}/ran")

        async def gone() -> bool:
            try:
                await client.get(f"{PODS}/stuck")
            except ApiError as e:
                return e.code == 404
            return False

        await eventually(gone, timeout=5)
        ran = await client.get(f"{PODS}/ran")
        assert ran["metadata"]["deletionTimestamp"] and ran["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_restart_policy_never_pods_succeed_after_the_job_duration(client: Client) -> None:
    async with simulating(client, fast(job_seconds=0.6)):
        await client.create(PODS, pod("job", "sim-node-1", restartPolicy="Never"))
        await client.create(PODS, pod("svc", "sim-node-1"))
        await eventually(lambda: _is(client, "job", "Running"))
        running_at = time.monotonic()
        await eventually(lambda: _is(client, "job", "Succeeded"))
        assert time.monotonic() - running_at >= 0.45
        status = (await client.get(f"{PODS}/job"))["status"]
        [cs] = status["containerStatuses"]
        assert cs["state"]["terminated"]["reason"] == "Completed" and cs["ready"] is False
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
        assert await phase(client, "svc") == "Running"  # restartPolicy Always keeps running


def _rule(operator: str, *codes: int, action: str = "Restart") -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": operator, "values": list(codes)}}


@pytest.mark.parametrize(("pod_policy", "containers", "completes"), [
    ("Never", [{}], True),
    ("OnFailure", [{}, {}], True),
    ("Always", [{"restartPolicy": "Never"}], False),  # the kubelet keeps it Running when all stop
    ("Never", [{"restartPolicy": "Always"}], False),  # restarted after its exit 0
    ("Never", [{}, {"restartPolicy": "Always"}], False),
    ("Never", [{"restartPolicy": "OnFailure"}], True),
    ("Never", [{"restartPolicy": "Never", "restartPolicyRules": [_rule("In", 42)]}], True),  # the docs' example
    ("Never", [{"restartPolicy": "Never", "restartPolicyRules": [_rule("NotIn", 0)]}], True),  # on failure only
    ("Never", [{"restartPolicy": "Never", "restartPolicyRules": [_rule("NotIn", 42)]}], False),  # 0 matches
    ("Never", [{"restartPolicy": "Never", "restartPolicyRules": [_rule("NotIn")]}], False),  # every code
    ("OnFailure", [{"restartPolicy": "OnFailure", "restartPolicyRules": [_rule("In", 3, 0)]}], False),
    ("Never", [{}, {"restartPolicy": "Never", "restartPolicyRules": [
        _rule("In", 88), _rule("NotIn", 1, action="RestartAllContainers")]}], False),  # restarts them all
])
def test_pod_complete_waits_for_every_container_not_restarted_after_exit_0(
        pod_policy: str, containers: list[dict[str, Any]], completes: bool) -> None:
    """The simulated containers exit 0 at the job duration; one its own restartPolicy or a
    rule of its restarts then (ContainerRestartRules, RestartAllContainersOnContainerExits)
    keeps the pod running, as the kubelet's ContainerShouldRestart of exit code 0 says."""
    pods = StageSet(default_stages(), "Pod")
    body = pod("p", "n", restartPolicy=pod_policy)
    body["spec"]["containers"] = [{"name": f"c{i}", "image": "x", **c} for i, c in enumerate(containers)]
    running = {**body, "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    stage = pods.select(running)
    assert (stage is not None and stage.name == "pod-complete") == completes
    assert stage is None or completes


async def test_a_container_of_its_own_restart_policy_keeps_a_never_pod_running(client: Client) -> None:
    """Its pod's restartPolicy Never would end it at the job duration; its container's Always
    restarts it after its exit 0, so the pod runs on; the documentation's restart-on-exit-codes
    pod, whose rule asks for a restart on 42 only, completes."""
    async with simulating(client, fast(job_seconds=0.2)):
        keeps = pod("keeps", "sim-node-0", restartPolicy="Never")
        keeps["spec"]["containers"][0]["restartPolicy"] = "Always"
        docs = pod("restart-on-exit-codes", "sim-node-0", restartPolicy="Never")
        docs["spec"]["containers"][0].update(restartPolicy="Never", restartPolicyRules=[_rule("In", 42)])
        await client.create(PODS, keeps)
        await client.create(PODS, docs)
        await eventually(lambda: _is(client, "restart-on-exit-codes", "Succeeded"))
        await eventually(lambda: _is(client, "keeps", "Running"))
        await asyncio.sleep(0.3)  # past its job duration
        assert await phase(client, "keeps") == "Running"


async def _late_in_a_second() -> None:
    """Wait until the wall clock is late in its second, where a deletionTimestamp (whole
    seconds) falls furthest before the end of a grace period counted from the delete."""
    while time.time() % 1 < 0.6:
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(("finalizers", "ended"), [([], "(gone)"), (["example.com/keep"], "Failed")],
                         ids=["deleted", "held"])
async def test_deletion_honours_the_grace_period_then_ends_the_pod(
        client: Client, finalizers: list[str], ended: str) -> None:
    """The kubelet counts a pod's grace period from when it sees the deletion: a pod deleted
    with 2 s of grace is not removed (nor, held by a finalizer, marked Failed) before 2 s have
    passed since the DELETE, though its deletionTimestamp, truncated to the second, comes
    earlier. (The time is read after each look that finds it ended: a bound, never timed.)"""
    async with simulating(client, fast()):
        body = pod("slow", "sim-node-0", terminationGracePeriodSeconds=2)
        body["metadata"]["finalizers"] = finalizers
        await client.create(PODS, body)
        await eventually(lambda: _is(client, "slow", "Running"))
        await _late_in_a_second()
        t0 = time.monotonic()
        await client.delete(f"{PODS}/slow")
        got = await client.get(f"{PODS}/slow")
        assert got["metadata"]["deletionTimestamp"] and got["metadata"]["deletionGracePeriodSeconds"] == 2
        await eventually(lambda: _is(client, "slow", ended), timeout=6)
        assert time.monotonic() - t0 >= 2.0
        if finalizers:
            await client.patch(f"{PODS}/slow", {"metadata": {"finalizers": None}})
            await eventually(lambda: _is(client, "slow", "(gone)"))


async def test_a_second_delete_with_a_shorter_grace_period_ends_the_pod_sooner(client: Client) -> None:
    """A pod deleted with 60 s of grace, then again with 1 s: kube-apiserver shortens its
    deletionTimestamp, and the kubelet kills it again with the shorter period, counted from
    then: the pod is gone about 1 s later, not 60."""
    async with simulating(client, fast()):
        await client.create(PODS, pod("patient", "sim-node-0", terminationGracePeriodSeconds=60))
        await eventually(lambda: _is(client, "patient", "Running"))
        await client.delete(f"{PODS}/patient")
        await asyncio.sleep(0.3)  # (its kubelet has seen the first)
        t0 = time.monotonic()
        await client.delete(f"{PODS}/patient", gracePeriodSeconds=1)
        got = await client.get(f"{PODS}/patient")
        assert got["metadata"]["deletionGracePeriodSeconds"] == 1
        await eventually(lambda: _is(client, "patient", "(gone)"), timeout=10)
        assert time.monotonic() - t0 >= 1.0


async def test_finalizers_are_left_to_their_owner(client: Client) -> None:
    async with simulating(client, fast()):
        body = pod("kept", "sim-node-0", terminationGracePeriodSeconds=0)
        body["metadata"]["finalizers"] = ["example.com/keep"]
        await client.create(PODS, body)
        await eventually(lambda: _is(client, "kept", "Running"))
        await client.delete(f"{PODS}/kept")
        got = await client.get(f"{PODS}/kept")
        assert got["metadata"]["deletionTimestamp"]
        # its grace over, the kubelet ends it: Failed (not Ready), for the finalizer's owner to see
        await eventually(lambda: _is(client, "kept", "Failed"))
        status = (await client.get(f"{PODS}/kept"))["status"]
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
        await client.patch(f"{PODS}/kept", {"metadata": {"finalizers": None}})
        await eventually(lambda: _is(client, "kept", "(gone)"))


USER_STAGES = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-hold
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {stage: custom}
    matchAnnotations: {example.com/mode: slow}
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.podIP, operator: DoesNotExist}
    - {key: '.metadata.finalizers.[]', operator: NotIn, values: [example.com/sim]}
  delay:
    durationMilliseconds: 200
    jitterDurationMilliseconds: 400
  next:
    finalizers:
      add:
      - value: example.com/sim
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-start
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.podIP, operator: DoesNotExist}
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      phase: Running
      hostIP: {{ NodeIP }}
      podIP: {{ PodIP }}
      startTime: {{ .metadata.creationTimestamp }}
      message: {{ printf "%s on %s" .metadata.name NodeName | Quote }}
      reason: {{ $now | Quote }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - name: {{ $item.name | Quote }}
        image: {{ $item.image | Quote }}
        ready: true
        restartCount: {{ $index }}
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      conditions:
      - type: Ready
        status: "True"
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-remove
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
"""


async def test_a_user_stage_file_replaces_the_defaults(client: Client) -> None:
    stages = load_stages(USER_STAGES)
    assert [s.name for s in stages] == ["pod-hold", "pod-start", "pod-remove"]
    # no node stages in the file: nodes are not initialised by stages, heartbeats still run
    async with simulating(client, fast(stages=stages, job_seconds=0.1)) as sim:
        body = pod("custom", "sim-node-0", restartPolicy="Never")
        body["metadata"]["labels"] = {"stage": "custom"}
        body["metadata"]["annotations"] = {"example.com/mode": "slow"}
        t0 = time.monotonic()
        await client.create(PODS, body)
        await eventually(lambda: _is(client, "custom", "Running"))
        assert time.monotonic() - t0 >= 0.15  # pod-hold's delay ran first
        got = await client.get(f"{PODS}/custom")
        assert got["metadata"]["finalizers"] == ["example.com/sim"]
        status = got["status"]
        node = sim.nodes["sim-node-0"]
        assert status["hostIP"] == node.ip and status["podIP"].startswith("10.0.")
        assert status["startTime"] == got["metadata"]["creationTimestamp"]
        assert status["message"] == "custom on sim-node-0"
        # KWOK's Now (RFC3339Nano): a Time field (startedAt) stores its second, as kube-apiserver's; a string all of it
        started = status["containerStatuses"][0]["state"]["running"]["startedAt"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started), started
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", status["reason"]), status["reason"]
        assert status["reason"].startswith(started[:19])
        # no pod-complete stage in this file: a Never pod keeps running
        await client.delete(f"{PODS}/custom")
        await eventually(lambda: _is(client, "custom", "(gone)"))  # finalizers emptied, then deleted


NODE_DOWN_STAGES = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-down}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: DoesNotExist}
  next:
    statusTemplate: |
      conditions:
      - {type: Ready, status: "False", reason: NodeDown, lastHeartbeatTime: {{ Now | Quote }}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-run}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .status.phase, operator: NotIn, values: [Running]}
  next:
    event: {type: Normal, reason: Started, message: Started container}
    statusTemplate: |
      phase: Running
"""


async def test_node_stages_own_the_node_status_and_emit_events(client: Client) -> None:
    """A file with node stages owns the node's status, as KWOK's (whose heartbeat is a stage): the
    simulator's own status report, due here within 0.2 s, would set Ready back to True. And a
    stage's ``next.event`` is recorded as KWOK's controller records it."""
    async with simulating(client, fast(count=1, stages=load_stages(NODE_DOWN_STAGES),
                                       status_report_frequency=0.2)) as sim:
        assert not sim.status_reports

        async def down() -> bool:
            conditions = (await client.get(f"{NODES}/sim-node-0")).get("status", {}).get("conditions") or []
            return [(c["type"], c["status"]) for c in conditions] == [("Ready", "False")]

        await eventually(down)
        created = await client.create(PODS, pod("evented", "sim-node-0"))
        await eventually(lambda: _is(client, "evented", "Running"))

        async def event() -> list[dict[str, Any]]:
            items = (await client.list("/api/v1/namespaces/default/events"))["items"]
            return [e for e in items if e["involvedObject"].get("name") == "evented"]

        [got] = await eventually(event)
        assert (got["type"], got["reason"], got["message"]) == ("Normal", "Started", "Started container")
        assert got["involvedObject"]["kind"] == "Pod" and got["involvedObject"]["uid"] == created["metadata"]["uid"]
        assert got["source"]["component"] == "kwok_controller"
        await asyncio.sleep(0.5)  # two report intervals
        assert await down()
    async with simulating(client, fast(count=0, stages=load_stages(USER_STAGES))) as sim:
        assert sim.status_reports  # pod stages only: nothing else reports the node's status


BROKEN_STAGES = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-broken}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {stage: broken}
  next:
    event: {type: Warning, reason: Broken, message: the pod's template fails}
    finalizers:
      add: [{value: example.com/broken}]
    statusTemplate: |
      podIP: {{ index .status.podIPs 0 }}
    delete: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-broken}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  steps:
  - event: {type: Normal, reason: Broken, message: the node's template fails}
  - finalizers:
      add: [{value: example.com/broken}]
  - patch:
      subresource: status
      root: status
      template: |
        phase: {{ index .status.addresses 9 }}
"""


async def test_a_stage_whose_template_fails_still_sends_its_event_and_changes_its_finalizers(
        client: Client) -> None:
    """KWOK runs a stage's ``next`` as steps, in order (its conversion of ``next``, and
    ``lifecycle.doStageSteps``): the event, the finalizers (a JSON patch of the object, apart),
    then the status patch, whose template is rendered only then, then the delete. A template that
    fails stops the stage there: the event is sent and the finalizers changed, the status is left as
    it is and the object is not deleted; the failure is logged, not retried."""
    from controlplane.metrics import STAGE_TRANSITIONS

    def errors(stage: str) -> float:
        return float(STAGE_TRANSITIONS.labels(stage=stage, result="error")._value.get())

    before = errors("pod-broken"), errors("node-broken")
    async with simulating(client, fast(count=1, stages=load_stages(BROKEN_STAGES))):
        body = pod("broken", "sim-node-0")
        body["metadata"]["labels"] = {"stage": "broken"}
        created = await client.create(PODS, body)

        async def events(kind: str, name: str) -> list[dict[str, Any]]:
            items = (await client.list("/api/v1/events"))["items"]
            return [e for e in items if (e["involvedObject"].get("kind"), e["involvedObject"].get("name"),
                                         e["source"].get("component")) == (kind, name, "kwok_controller")]

        [got] = await eventually(lambda: events("Pod", "broken"))
        assert (got["type"], got["reason"], got["message"]) == ("Warning", "Broken", "the pod's template fails")
        assert got["involvedObject"]["uid"] == created["metadata"]["uid"]
        # (a node stage is drawn again by each new version of the Node: its set-up's, the finalizer's)
        node_events = await eventually(lambda: events("Node", "sim-node-0"))
        assert {(e["reason"], e["message"]) for e in node_events} == {("Broken", "the node's template fails")}

        async def finalized(path: str) -> dict[str, Any] | None:
            obj: dict[str, Any] = await client.get(path)
            return obj if obj["metadata"].get("finalizers") == ["example.com/broken"] else None

        await eventually(lambda: finalized(f"{PODS}/broken"))
        node = await eventually(lambda: finalized(f"{NODES}/sim-node-0"))
        assert "phase" not in node["status"]
        await eventually(lambda: asyncio.sleep(0, errors("pod-broken") > before[0] and
                                               errors("node-broken") > before[1]))
        await asyncio.sleep(0.3)  # what came after the failing step would have been done by now
        got_pod = await client.get(f"{PODS}/broken")  # not deleted: the delete comes after the status
        assert "podIP" not in got_pod["status"] and not got_pod["metadata"].get("deletionTimestamp")


async def test_a_stage_tried_again_resumes_at_the_step_that_failed(client: Client,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """KWOK tries a stage whose write failed for the server's sake again from the step that failed
    (its job keeps the step index): the event, sent before the status, is not sent twice."""
    failed = _first_patch_times_out(monkeypatch, "/pods/evented/status")
    only_pods = NODE_DOWN_STAGES.split("---\n", 1)[1]
    async with simulating(client, fast(count=1, stages=load_stages(only_pods))):
        await client.create(PODS, pod("evented", "sim-node-0"))
        await eventually(lambda: _is(client, "evented", "Running"))
        assert failed
        items = (await client.list("/api/v1/namespaces/default/events"))["items"]
        [got] = [e for e in items if e["involvedObject"].get("name") == "evented"]
        assert (got["reason"], got["count"]) == ("Started", 1)


async def test_a_node_stage_whose_status_write_times_out_is_tried_again(client: Client,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """As a pod's: a node stage whose write fails is run again, since no event of the node may come
    to draw it (here the node's status is the stages' alone: no status report changes it, and the
    node stays without a Ready condition)."""
    failed = _first_patch_times_out(monkeypatch, "/nodes/sim-node-0/status")
    # the stage a second after the node's creation, when its set-up writes (each an event that
    # would draw it again) are done
    ref = "  resourceRef: {apiGroup: v1, kind: Node}\n"
    late = NODE_DOWN_STAGES.replace(ref, ref + "  delay: {durationMilliseconds: 1000}\n")
    assert late != NODE_DOWN_STAGES
    async with simulating(client, fast(count=1, stages=load_stages(late))):
        async def down() -> bool:
            conditions = (await client.get(f"{NODES}/sim-node-0")).get("status", {}).get("conditions") or []
            return [(c["type"], c["status"]) for c in conditions] == [("Ready", "False")]

        await eventually(down)
        assert failed


def test_a_finishing_pod_reports_its_generation_on_the_kubelets_conditions_only() -> None:
    """pod-complete and pod-terminate (a held pod deleted: its generation stepped by the
    deletion) stamp the kubelet's conditions and the status, not another writer's."""
    stages = {s.name: s for s in default_stages()}
    running = {**pod("t", "n", restartPolicy="Never"), "metadata": {"name": "t", "generation": 2}}
    running["status"] = stages["pod-ready"].next.render_status(running, _funcs())
    running["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "x",
                                            "observedGeneration": 1})
    for name in ("pod-complete", "pod-terminate"):
        written = stages[name].next.render_status(running, _funcs())
        assert written is not None and written["observedGeneration"] == 2
        gens = {c["type"]: c.get("observedGeneration") for c in written["conditions"]}
        assert gens.pop("DisruptionTarget") is None  # left out: the API server keeps its 1
        assert set(gens.values()) == {2} and len(gens) == 5


def _funcs() -> dict[str, Any]:
    return {"Now": lambda: "2026-11-30T10:00:00Z", "Quote": _quote, "YAML": _yaml, "Version": lambda: "v",
            "NodeIPWith": lambda n: "172.16.0.9", "PodIPWith": lambda *a: "10.0.0.7", "PodAllocation": pod_allocation}


@pytest.mark.parametrize("pod_obj", [
    pod("a", "n"),
    {**pod("b", "n", restartPolicy="Never", hostNetwork=True,
           initContainers=[{"name": "init", "image": "busybox"}], readinessGates=[{"conditionType": "x/y"}]),
     "metadata": {"name": "b", "namespace": "d", "uid": "u", "creationTimestamp": "2026-11-30T09:00:00Z"}},
    pod("c", "n", restartPolicy="Never", initContainers=[
        {"name": "init", "image": "busybox"}, {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]),
    # a running container's resources are reported (KEP-1287), its requests as allocated
    {**pod("d", "n"), "spec": {"nodeName": "n", "containers": [
        {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"},
                                                      "limits": {"memory": "128Mi"}}},
        {"name": "e", "image": "nginx", "resources": {}}]}},
    # pod-level resources, overhead and init containers: the pod's allocation as well
    {**pod("l", "n"), "spec": {"nodeName": "n", "overhead": {"cpu": "50m"},
                               "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
                               "initContainers": [{"name": "i", "image": "busybox",
                                                   "resources": {"requests": {"memory": "2Gi"}}}],
                               "containers": [{"name": "c", "image": "nginx"}]}},
    # a pod of generation 3 (its spec changed twice), gated: the observed generations
    {**pod("g", "n", restartPolicy="Never", readinessGates=[{"conditionType": "x/y"}]),
     "metadata": {"name": "g", "generation": 3}},
])
def test_built_in_stages_render_natively_exactly_as_their_templates(pod_obj: dict[str, Any]) -> None:
    stages = {s.name: s for s in default_stages()}
    for name in ("pod-ready", "pod-complete"):
        stage = stages[name]
        assert stage.next.native is not None
        obj = dict(pod_obj)
        if name == "pod-complete":  # completes a running pod
            obj["status"] = stages["pod-ready"].next.render_status(obj, _funcs())
        templated = dataclasses.replace(stage.next, native=None).render_status(obj, _funcs())
        assert stage.next.render_status(obj, _funcs()) == templated
    ready = stages["pod-ready"].next.render_status(dict(pod_obj), _funcs())
    assert ready is not None
    generation = pod_obj["metadata"].get("generation")
    assert ready.get("observedGeneration") == generation
    assert {c["type"]: c.get("observedGeneration") for c in ready["conditions"]} == {
        **dict.fromkeys(("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"),
                        generation),
        **{g["conditionType"]: None for g in pod_obj["spec"].get("readinessGates") or ()}}
    for c, cs in zip(pod_obj["spec"]["containers"], ready["containerStatuses"], strict=True):
        assert cs["resources"] == (c.get("resources") or {})
        # allocated: the container's requests (written since InPlacePodVerticalScalingAllocatedStatus went, 1.36)
        assert cs.get("allocatedResources") == ((c.get("resources") or {}).get("requests") or None)
    assert ready["resources"] == pod_allocation(pod_obj["spec"])["resources"]


def test_a_running_pod_reports_what_its_kubelet_allocated_at_pod_level() -> None:
    """InPlacePodLevelResourcesVerticalScaling (beta, on since 1.36): every running pod's
    status.resources (cpu and memory as its cgroup holds them) and status.allocatedResources
    (PodRequests), whether or not it has pod-level resources (upstream's
    convertToAPIPodLevelResourcesStatus)."""
    stages = {s.name: s for s in default_stages()}

    def ready(spec: dict[str, Any]) -> dict[str, Any]:
        status = stages["pod-ready"].next.render_status({"metadata": {"name": "p"}, "spec": spec}, _funcs())
        assert status is not None
        return status

    # no pod-level resources: the containers' aggregate; a limit only where every container has one
    two = ready({"nodeName": "n", "containers": [
        {"name": "a", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"},
                                                  "limits": {"cpu": "1", "memory": "128Mi"}}},
        {"name": "b", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "1Gi",
                                                               "ephemeral-storage": "1Gi"},
                                                  "limits": {"memory": "1Gi"}}}]})
    assert two["resources"] == {"requests": {"cpu": "750m", "memory": "1088Mi"}, "limits": {"memory": "1152Mi"}}
    assert two["allocatedResources"] == {"cpu": "750m", "memory": "1088Mi", "ephemeral-storage": "1Gi"}
    # a plain init container above the containers' sum, a sidecar beside them, the overhead on top
    init = ready({"nodeName": "n", "overhead": {"cpu": "100m"}, "containers": [
        {"name": "a", "image": "x", "resources": {"requests": {"cpu": "500m"}}}], "initContainers": [
        {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "2"}}},
        {"name": "log", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}]})
    assert init["resources"] == {"requests": {"cpu": "2100m"}} and init["allocatedResources"] == {"cpu": "2100m"}
    assert [cs.get("allocatedResources") for cs in init["initContainerStatuses"]] == [{"cpu": "2"}, {"cpu": "100m"}]
    # pod-level resources: theirs, the memory request with the overhead, the cpu request the cgroup's
    level = ready({"nodeName": "n", "overhead": {"memory": "16Mi"},
                   "resources": {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                   "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]})
    assert level["resources"] == {"requests": {"cpu": "1", "memory": "272Mi"}, "limits": {"memory": "528Mi"}}
    assert level["allocatedResources"] == {"cpu": "1", "memory": "272Mi"}
    # nothing requested: empty requirements, no allocation; a cpu request within the minimum shares unreported
    bare = ready({"nodeName": "n", "containers": [{"name": "a", "image": "x"}]})
    assert bare["resources"] == {} and "allocatedResources" not in bare
    assert "allocatedResources" not in bare["containerStatuses"][0]
    tiny = ready({"nodeName": "n", "containers": [
        {"name": "a", "image": "x", "resources": {"requests": {"cpu": "2m"}}}]})
    assert tiny["resources"] == {} and tiny["allocatedResources"] == {"cpu": "2m"}


@pytest.mark.parametrize("node_obj", [
    {"metadata": {"name": "n1"}},
    {"metadata": {"name": "n2", "uid": "u2", "creationTimestamp": "2026-11-30T09:00:00Z",
                  "labels": {"kubernetes.io/arch": "arm64"}},
     "status": {"capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110"},
                "addresses": [{"type": "InternalIP", "address": "172.16.0.4"}]}},
    # a node created with its nodeInfo (KWOK's example Node): kept, as KWOK's node-initialize keeps it
    {"metadata": {"name": "n3", "uid": "u3"},
     "status": {"nodeInfo": {"kubeletVersion": "fake", "kubeProxyVersion": "fake", "architecture": "arm64",
                             "operatingSystem": "linux", "containerRuntimeVersion": "", "bootID": ""}}},
])
def test_the_node_stage_renders_natively_exactly_as_its_template(node_obj: dict[str, Any]) -> None:
    stage = {s.name: s for s in default_stages()}["node-initialize"]
    assert stage.next.native is not None
    funcs = {**_funcs(), "NodeIP": lambda: "172.16.0.9", "NodeName": lambda: "n", "NodePort": lambda: 10250,
             "NodeConditions": lambda: [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "message": "kubelet is posting ready status"},
                                        {"type": "DiskPressure", "status": "False", "reason": "NoPressure",
                                         "message": "has: no pressure"}]}
    templated = dataclasses.replace(stage.next, native=None).render_status(node_obj, funcs)
    assert templated is not None and stage.next.render_status(node_obj, funcs) == templated
    given = (node_obj.get("status") or {}).get("nodeInfo")
    if given:
        assert templated["nodeInfo"]["kubeletVersion"] == "fake" and templated["nodeInfo"]["architecture"] == "arm64"
        assert templated["nodeInfo"]["containerRuntimeVersion"] == "controlplane://v"  # empty: the default
    else:
        assert templated["nodeInfo"]["kubeletVersion"] == "v"


def test_stage_selection_and_delays() -> None:
    stages = default_stages(job_seconds=2.5)
    pods = StageSet(stages, "Pod")
    fresh = pod("p", "n")
    assert pods.select(fresh).name == "pod-ready"  # type: ignore[union-attr]
    running = {**fresh, "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    assert pods.select(running) is None  # restartPolicy Always: nothing more to do
    job = {**running, "spec": {**running["spec"], "restartPolicy": "Never"}}
    stage = pods.select(job)
    assert stage is not None and stage.name == "pod-complete" and stage.delay is not None
    assert stage.delay.duration_ms == 2500
    from datetime import UTC, datetime, timedelta
    now = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
    deleting = {**running, "metadata": {**running["metadata"], "deletionTimestamp": "2026-11-30T10:00:30Z"}}
    stage = pods.select(deleting)
    assert stage is not None and stage.name == "pod-delete" and stage.delay is not None
    import random
    assert stage.delay.seconds(deleting, now, random.Random(0)) == 30.0
    assert parse_duration("1m30s", now) == 90.0
    assert parse_duration(1500, now) == 1.5
    assert parse_duration((now - timedelta(seconds=5)).isoformat(), now) == 0.0


def _stage(name: str, weight: int | None = None, weight_from: str | None = None, label: str = "") -> str:
    """A Pod stage matching pods labelled ``label`` (any pod if ""), in KWOK's format."""
    doc: dict[str, Any] = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
                           "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                                    "selector": {"matchLabels": {label: "true"}} if label else {}, "next": {}}}
    if weight is not None:
        doc["spec"]["weight"] = weight
    if weight_from is not None:
        doc["spec"]["weightFrom"] = {"expressionFrom": weight_from}
    return yaml.safe_dump(doc)


def _draws(stages: StageSet, obj: dict[str, Any], n: int = 400) -> collections.Counter[str]:
    return collections.Counter(s.name for s in (stages.select(obj) for _ in range(n)) if s is not None)


def test_weights_and_weight_from_draw_as_kwok_does() -> None:
    weight_from = '.metadata.annotations["example.com/weight"]'
    text = "---\n".join([_stage("a", 1, weight_from), _stage("b", 3), _stage("zero", 0, label="zero")])
    stages = StageSet(load_stages(text), "Pod", random.Random(7))
    plain = pod("p", "n")
    # in proportion to the weights; weight 0 is never drawn beside a positive weight
    counts = _draws(stages, {**plain, "metadata": {"name": "p", "labels": {"zero": "true"}}}, 4000)
    assert set(counts) == {"a", "b"} and 0.2 < counts["a"] / 4000 < 0.3
    # weightFrom overrides the static weight; an absent annotation leaves it (1:3 above)

    def weighing(value: Any) -> dict[str, Any]:
        return {**plain, "metadata": {"name": "p", "annotations": {"example.com/weight": value}}}

    assert _draws(stages, weighing("0")) == {"b": 400}
    assert _draws(stages, weighing("0x1_00"))["a"] > 380  # Go's integer syntax: 256 against 3
    assert _draws(stages, weighing("-5")) == {"b": 400}  # a negative weight counts as 0
    # a string that is no integer: stage "a" has no weight at all, the others are drawn among
    assert _draws(stages, weighing("heavy")) == {"b": 400}
    assert _draws(stages, weighing("")) == {"b": 400}
    # weight 0 all round: an even draw; a single match whatever its weight
    zeros = StageSet(load_stages("---\n".join([_stage("x", 0), _stage("y")])), "Pod", random.Random(7))
    assert set(_draws(zeros, plain)) == {"x", "y"}
    only = StageSet(load_stages(_stage("alone", 0, weight_from)), "Pod")
    assert _draws(only, weighing("none"), 1) == {"alone": 1}
    # nobody has a weight: an even draw among all
    none = StageSet(load_stages("---\n".join([_stage("x", 2, ".metadata.name"), _stage("y", 2, ".metadata.name")])),
                    "Pod", random.Random(7))
    assert set(_draws(none, plain)) == {"x", "y"}
    [numeric] = load_stages(_stage("n", 1, ".spec.priority"))
    assert numeric.weight_for({"spec": {"priority": 12.7}}) == 12 and numeric.weight_for({"spec": {}}) == 1
    texts = ("010", " 1", "1.5", "9" * 20)  # Go's octal; no spaces, fractions, or more than 64 bits
    assert [numeric.weight_for({"spec": {"priority": v}}) for v in texts] == [8, None, None, None]


def test_a_jitter_duration_before_the_duration_is_the_delay() -> None:
    [stage] = load_stages(_stage("d").replace("next: {}", "next: {}\n  delay: {durationMilliseconds: 1000, "
                                               "jitterDurationFrom: {expressionFrom: .metadata.deletionTimestamp}}"))
    assert stage.delay is not None
    from datetime import UTC, datetime
    now = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
    past = {"metadata": {"deletionTimestamp": "2026-11-30T09:59:00Z"}}
    assert stage.delay.seconds(past, now, random.Random(0)) == 0.0  # KWOK: the earlier of the two
    later = stage.delay.seconds({"metadata": {"deletionTimestamp": "2026-11-30T10:00:30Z"}}, now, random.Random(0))
    assert 1.0 <= later <= 30.0


def test_kwok_configuration_beside_the_stages_is_skipped() -> None:
    """A KWOK config file holds its stages beside ``KwokConfiguration`` and the like; KWOK skips
    the kinds it does not use, so does the loader (KWOK's groups only: a Pod is still refused)."""
    text = ("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {cidr: 10.0.0.1/24}\n"
            "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Attach\nmetadata: {name: a}\n"
            "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
            "spec: {resourceRef: {apiGroup: v1, kind: Pod}}\n")
    assert [s.name for s in load_stages(text)] == ["s"]
    with pytest.raises(StageError, match="no stages found"):
        load_stages(text.rsplit("---", 1)[0])


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "'p': a Pod of v1, not a Stage: expected apiVersion"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
     "spec: {resourceRef: {apiGroup: v1, kind: Pod}, next: {patches: []}}\n", r"unsupported field\(s\) patches"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
     "spec: {resourceRef: {apiGroup: apps/v1, kind: Deployment}}\n", "resourceRef"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec: {resourceRef: {kind: Pod}, "
     "selector: {matchExpressions: [{key: .a, operator: Gt}]}}\n", "operator"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec: {resourceRef: {kind: Pod}, "
     "next: {statusTemplate: '{{ template \"x\" }}'}}\n", "not supported"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec: {resourceRef: {kind: Pod}, "
     "weightFrom: {cel: {expression: self.x}}}\n", r"weightFrom: unsupported field\(s\) cel"),
    # a function neither Go, Sprig's common ones nor KWOK's: refused at load, not at each render
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec: {resourceRef: {kind: Pod}, "
     "next: {statusTemplate: 'phase: {{ Nope (htpasswd .x .y) }}'}}\n", r"unsupported function\(s\) Nope, htpasswd"),
])
def test_unsupported_stages_are_rejected_by_name(text: str, message: str) -> None:
    with pytest.raises(StageError, match=message):
        load_stages(text)


def test_a_kustomization_directory_is_read_as_kwoks_config_reads_it(tmp_path: Path) -> None:
    """KWOK's ``--config DIR`` builds DIR as a kustomization: its ``resources`` (files, and
    directories that are kustomizations themselves) in order, e.g. KWOK's own
    ``kustomize/stage/fast`` (``../node/fast``, ``../node/heartbeat-with-lease``, ``../pod/fast``)."""
    for d, names in (("node/fast", ["node-initialize"]), ("pod/fast", ["pod-ready", "pod-delete"])):
        (tmp_path / d).mkdir(parents=True)
        for n in names:
            (tmp_path / d / f"{n}.yaml").write_text(_stage(n))
        (tmp_path / d / "kustomization.yml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
            + "".join(f"- {n}.yaml\n" for n in names))
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "kustomization.yaml").write_text("resources:\n- ../node/fast\n- ../pod/fast\n")
    (tmp_path / "extra.yaml").write_text(_stage("pod-complete"))
    text = read_stage_files([tmp_path / "fast", tmp_path / "extra.yaml"])
    assert [s.name for s in load_stages(text)] == ["node-initialize", "pod-ready", "pod-delete", "pod-complete"]
    # what this reader does not do is refused by name, as a directory that is no kustomization
    (tmp_path / "fast" / "kustomization.yaml").write_text("resources: [../node/fast]\npatches: []\n")
    with pytest.raises(StageError, match=r"kustomization\.yaml: unsupported field\(s\) patches"):
        read_stage_files([tmp_path / "fast"])
    with pytest.raises(StageError, match=r"no kustomization\.yaml"):
        read_stage_files([tmp_path])


def test_the_newer_jq_forms_read_as_the_older_ones() -> None:
    """KWOK v0.7's API (the older forms deprecated for them): a selector's ``jq: {key, operator,
    values}`` and a ``*From``'s ``jq: {expression}``; ``cel`` is refused by name."""
    from datetime import UTC, datetime

    doc: dict[str, Any] = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
                           "spec": {"resourceRef": {"kind": "Pod"},
                                    "selector": {"matchExpressions": [
                                        {"jq": {"key": ".status.phase", "operator": "In", "values": ["Running"]}},
                                        {"jq": {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}}]},
                                    "weight": 1, "weightFrom": {"jq": {"expression": '.metadata.annotations["w"]'}},
                                    "delay": {"durationMilliseconds": 1000,
                                              "durationFrom": {"jq": {"expression": '.metadata.annotations["d"]'}}},
                                    "next": {"delete": True}}}
    (stage,) = load_stages(yaml.safe_dump(doc))
    running = {"metadata": {"annotations": {"w": "7", "d": "30s"}}, "status": {"phase": "Running"}}
    assert stage.selector.matches(running) and not stage.selector.matches({"status": {"phase": "Pending"}})
    assert not stage.selector.matches({**running, "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert stage.weight_for(running) == 7
    assert stage.delay is not None and stage.delay.seconds(running, datetime.now(UTC), random.Random(0)) == 30.0
    doc["spec"]["selector"]["matchExpressions"][0] = {"cel": {"expression": "self.status.phase == 'Running'"}}
    with pytest.raises(StageError, match=r"selector: unsupported field\(s\) cel"):
        load_stages(yaml.safe_dump(doc))


def test_kwok_v08_steps_read_as_next() -> None:
    """KWOK v0.8 deprecates ``next`` for ``steps``; the steps a Pod or Node stage of ``next`` is
    made of read as that ``next``: a status patch (``subresource: status, root: status``, as
    strategic merge), an event, finalizers, a delete. Others (``apply``, another patch) are refused."""
    def stage(steps: list[dict[str, Any]]) -> str:
        return yaml.safe_dump({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
                               "spec": {"resourceRef": {"kind": "Pod"}, "steps": steps}})

    (s,) = load_stages(stage([
        {"event": {"type": "Normal", "reason": "Started", "message": "Started container"}},
        {"finalizers": {"add": [{"value": "example.com/f"}]}},
        {"patch": {"subresource": "status", "root": "status", "type": "strategic",
                   "template": "phase: {{ .spec.nodeName }}"}}]))
    assert s.next.render_status({"spec": {"nodeName": "n1"}}, {}) == {"phase": "n1"}
    assert s.next.event == {"type": "Normal", "reason": "Started", "message": "Started container"}
    assert s.next.finalizers([]) == ["example.com/f"] and not s.next.delete
    (s,) = load_stages(stage([{"delete": True}]))
    assert s.next.delete and s.next.status_template is None
    for steps, message in (
            ([{"apply": {"template": "kind: ConfigMap"}}], r"steps\[0\]: unsupported field\(s\) apply"),
            ([{"patch": {"subresource": "status", "template": "status: {phase: Running}"}}], "root: status"),
            ([{"patch": {"subresource": "status", "root": "status", "type": "json", "template": "[]"}}], "json"),
            ([{"delete": True}, {"delete": True}], "more than one")):
        with pytest.raises(StageError, match=message):
            load_stages(stage(steps))
    both = yaml.safe_load(stage([{"delete": True}]))
    both["spec"]["next"] = {"delete": True}
    with pytest.raises(StageError, match="both next and steps"):
        load_stages(yaml.safe_dump(both))


def test_kwoks_now_quote_and_a_failing_template_as_kwok_has_them() -> None:
    """KWOK's ``Now`` and ``StartTime`` are RFC3339Nano (``time.RFC3339Nano``: the fraction's
    trailing zeros dropped); its ``Quote`` writes nothing (a missing field) as JSON's ``null``,
    quoted; a template that fails (Go's ``index`` out of range) fails the stage (KWOK logs
    it and leaves the object as it is, the stage not retried)."""
    now = now_rfc3339_nano()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z", now), now
    assert [_quote(v) for v in (None, "a", 1, True, {"k": 1})] == ['"null"', '"a"', '"1"', '"true"', '"{\\"k\\":1}"']
    stage = load_stages("""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: s}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  next:
    statusTemplate: |
      reason: {{ .status.reason | Quote }}
      podIP: {{ index .status.podIPs 0 }}
""")[0]
    funcs = _funcs()
    with pytest.raises(StageError, match="the status template failed: error calling index: index out of range: 0"):
        stage.next.render_status({"status": {"podIPs": []}}, funcs)
    assert stage.next.render_status({"status": {"podIPs": ["10.0.0.1"]}}, funcs) == \
        {"reason": "null", "podIP": "10.0.0.1"}
