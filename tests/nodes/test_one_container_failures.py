"""One container failing on its own (``nodes/podfailure.py``, ``sim.controlplane.dev/fail-container``):
an init container (the pod ``Pending``, ``Init:Error`` and ``Init:CrashLoopBackOff`` in kubectl's
table; ``Failed`` under ``restartPolicy: Never``), one regular container of several (the others run
on) and a sidecar (restarted whatever the pod's policy), as upstream's kubelet reports them
(``getPhase`` in kubelet_pods.go, status/generate.go)."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.api.tables import _pod_summary
from controlplane.client import Client
from controlplane.nodes.podfailure import (
    EXIT_CODE,
    FAIL_AFTER,
    FAIL_CONTAINER,
    FAILURE_PROBABILITY,
    get_phase,
    target_of,
)
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating
from tests.nodes.test_pod_failures import BACKOFF, annotated


def two_inits(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    body = annotated(name, annotations, **spec)
    body["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}, {"name": "migrate", "image": "busybox"}]
    body["spec"]["containers"].append({"name": "d", "image": "busybox"})
    return body


async def full(client: Client, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.get(f"{PODS}/{name}")
    return got


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str | None, str | None]]:
    return {c["type"]: (c["status"], c.get("reason"), c.get("message")) for c in status.get("conditions") or ()}


def by_name(statuses: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in statuses or ()}


async def test_an_init_container_that_fails_fails_a_never_pod(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        await client.create(PODS, two_inits("doomed", {EXIT_CODE: "3", FAIL_CONTAINER: "migrate",
                                                       FAIL_AFTER: "300ms"}, restartPolicy="Never"))
        running = await eventually(lambda: _when(client, "doomed", lambda p: "running" in by_name(
            p["status"].get("initContainerStatuses")).get("migrate", {}).get("state", {})))
        failed = await eventually(lambda: _when(client, "doomed", lambda p: p["status"].get("phase") == "Failed"))
    # while it runs: the pod Pending with its address, the first init container done
    s = running["status"]
    assert s["phase"] == "Pending" and s["podIP"]
    inits, containers = by_name(s["initContainerStatuses"]), by_name(s["containerStatuses"])
    assert inits["setup"]["state"]["terminated"]["reason"] == "Completed" and inits["setup"]["ready"] is True
    assert inits["migrate"]["ready"] is False and inits["migrate"]["started"] is True
    assert {n: c["state"] for n, c in containers.items()} == {n: {"waiting": {"reason": "PodInitializing"}}
                                                             for n in ("c", "d")}
    assert conditions(s)["Initialized"] == ("False", "ContainersNotInitialized",
                                            "containers with incomplete status: [migrate]")
    assert conditions(s)["Ready"] == ("False", "ContainersNotReady", "containers with unready status: [c d]")
    assert conditions(s)["PodReadyToStartContainers"][0] == "True"
    assert _pod_summary(running)[:3] == (0, 2, "Init:1/2")
    # once it exited: Failed (getPhase: an init container failed, restartPolicy Never)
    s = failed["status"]
    t = by_name(s["initContainerStatuses"])["migrate"]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (3, "Error")
    assert all(c["state"] == {"waiting": {"reason": "PodInitializing"}} for c in s["containerStatuses"])
    assert conditions(s)["Ready"][:2] == ("False", "PodFailed")
    assert conditions(s)["ContainersReady"][:2] == ("False", "PodFailed")
    assert conditions(s)["Initialized"][:2] == ("False", "ContainersNotInitialized")
    assert _pod_summary(failed)[:3] == (0, 2, "Init:Error")


async def test_an_init_container_crash_loops_and_the_pod_stays_pending(client: Client) -> None:
    seen: list[dict[str, Any]] = []  # every version of the pod, from a watch

    async def record(rv: str) -> None:
        async for event in client.watch(PODS, resource_version=rv):
            if event.type in ("ADDED", "MODIFIED"):
                seen.append(event.object)

    async with simulating(client, fast(**BACKOFF)):
        watcher = asyncio.create_task(record((await client.list(PODS))["metadata"]["resourceVersion"]))
        try:
            created = await client.create(PODS, two_inits("looping", {EXIT_CODE: "1", FAIL_CONTAINER: "migrate",
                                                                      FAIL_AFTER: "100ms"}))

            def backing_off(restarts: int) -> Any:
                def check(p: dict[str, Any]) -> bool:
                    migrate = by_name(p["status"].get("initContainerStatuses")).get("migrate") or {}
                    return "waiting" in migrate.get("state", {}) and migrate["restartCount"] == restarts
                return lambda: _when(client, "looping", check)

            first = await eventually(backing_off(1))
            await eventually(backing_off(2))
        finally:
            watcher.cancel()
    migrate = by_name(first["status"]["initContainerStatuses"])["migrate"]
    uid = created["metadata"]["uid"]
    assert migrate["state"]["waiting"] == {
        "reason": "CrashLoopBackOff",
        "message": f"back-off 300ms restarting failed container=migrate pod=looping_default({uid})"}
    last = migrate["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (1, "Error")
    versions = [p for p in seen if p["metadata"]["name"] == "looping" and p.get("status", {}).get("phase")]
    assert {p["status"]["phase"] for p in versions} == {"Pending"}  # never Running: its init never completes
    statuses = [_pod_summary(p)[2] for p in versions]
    # kubectl's printer: running (Init:1/2), exited (Init:Error), backing off (Init:CrashLoopBackOff)
    assert "Init:1/2" in statuses and "Init:Error" in statuses and "Init:CrashLoopBackOff" in statuses
    assert statuses.index("Init:Error") < statuses.index("Init:CrashLoopBackOff")
    assert _pod_summary(first)[3][0] == 1  # RESTARTS counts the init container's
    assert all(c["state"] == {"waiting": {"reason": "PodInitializing"}} and c["restartCount"] == 0
               for c in first["status"]["containerStatuses"])


async def test_an_init_container_that_succeeds_lets_the_pod_start(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        await client.create(PODS, two_inits("lucky", {EXIT_CODE: "1", FAIL_CONTAINER: "setup",
                                                      FAILURE_PROBABILITY: "0"}))
        started = await eventually(lambda: _when(client, "lucky", lambda p: p["status"].get("phase") == "Running"))
    s = started["status"]
    assert all(c["state"]["terminated"]["reason"] == "Completed" and c["ready"] for c in s["initContainerStatuses"])
    assert all("running" in c["state"] and c["ready"] and c["started"] for c in s["containerStatuses"])
    assert {t: c[0] for t, c in conditions(s).items()} == dict.fromkeys(
        ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"), "True")
    assert _pod_summary(started)[:3] == (2, 2, "Running")


async def test_one_container_of_two_crash_loops_alone(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        body = pod("half", "sim-node-0")
        body["spec"]["containers"].append({"name": "d", "image": "busybox"})
        body["metadata"]["annotations"] = {EXIT_CODE: "2", FAIL_CONTAINER: "d", FAIL_AFTER: "100ms"}
        await client.create(PODS, body)
        got = await eventually(lambda: _when(client, "half", lambda p: by_name(
            p["status"].get("containerStatuses")).get("d", {}).get("state", {}).get("waiting", {}).get(
            "reason") == "CrashLoopBackOff"))
    s = got["status"]
    c, d = by_name(s["containerStatuses"])["c"], by_name(s["containerStatuses"])["d"]
    assert "running" in c["state"] and c["ready"] is True and c["restartCount"] == 0
    assert d["state"]["waiting"]["reason"] == "CrashLoopBackOff" and d["restartCount"] == 1 and d["ready"] is False
    assert s["phase"] == "Running"
    assert conditions(s)["Ready"] == ("False", "ContainersNotReady", "containers with unready status: [d]")
    assert _pod_summary(got)[:3] == (1, 2, "CrashLoopBackOff")


async def test_one_container_failing_under_never_fails_the_pod_once_the_others_end(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        body = pod("partial", "sim-node-0", restartPolicy="Never")
        body["spec"]["containers"].append({"name": "d", "image": "busybox"})
        body["metadata"]["annotations"] = {EXIT_CODE: "5", FAIL_CONTAINER: "d", FAIL_AFTER: "50ms"}
        await client.create(PODS, body)
        exited = await eventually(lambda: _when(client, "partial", lambda p: "terminated" in by_name(
            p["status"].get("containerStatuses")).get("d", {}).get("state", {})), interval=0.01)
        done = await eventually(lambda: _when(client, "partial", lambda p: p["status"].get("phase") == "Failed"))
    s = exited["status"]
    if s["phase"] == "Running":  # (seen before the others completed, 0.2 s on)
        assert "running" in by_name(s["containerStatuses"])["c"]["state"]
        assert conditions(s)["Ready"] == ("False", "ContainersNotReady", "containers with unready status: [d]")
        assert _pod_summary(exited)[:3] == (1, 2, "Error")
    s = done["status"]
    c, d = by_name(s["containerStatuses"])["c"], by_name(s["containerStatuses"])["d"]
    assert (c["state"]["terminated"]["exitCode"], c["state"]["terminated"]["reason"]) == (0, "Completed")
    assert (d["state"]["terminated"]["exitCode"], d["state"]["terminated"]["reason"]) == (5, "Error")
    assert conditions(s)["Ready"][:2] == ("False", "PodFailed")


async def test_a_failing_sidecar_restarts_whatever_the_pods_policy(client: Client) -> None:
    async with simulating(client, fast(**BACKOFF)):
        body = pod("proxied", "sim-node-0", restartPolicy="Never")
        body["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
        body["metadata"]["annotations"] = {EXIT_CODE: "1", FAIL_CONTAINER: "proxy", FAIL_AFTER: "100ms"}
        await client.create(PODS, body)
        got = await eventually(lambda: _when(client, "proxied", lambda p: by_name(
            p["status"].get("initContainerStatuses")).get("proxy", {}).get("restartCount", 0) >= 2))
    s = got["status"]
    assert s["phase"] == "Running"
    c = by_name(s["containerStatuses"])["c"]
    assert "running" in c["state"] and c["restartCount"] == 0 and c["ready"] is True
    proxy = by_name(s["initContainerStatuses"])["proxy"]
    assert proxy["lastState"]["terminated"]["exitCode"] == 1
    assert conditions(s)["Initialized"][0] == "True"  # a regular container started: initialized before


def test_target_of_names_a_container_or_none() -> None:
    body = two_inits("p", {FAIL_CONTAINER: "migrate"})
    body["spec"]["initContainers"].append({"name": "proxy", "image": "envoy", "restartPolicy": "Always"})
    target = target_of(body)
    assert target is not None and (target.field, target.init, target.sidecar) == ("initContainerStatuses", True, False)
    body["metadata"]["annotations"][FAIL_CONTAINER] = "proxy"
    target = target_of(body)
    assert target is not None and (target.init, target.sidecar) == (False, True)
    body["metadata"]["annotations"][FAIL_CONTAINER] = "d"
    target = target_of(body)
    assert target is not None and (target.field, target.init) == ("containerStatuses", False)
    body["metadata"]["annotations"][FAIL_CONTAINER] = "nope"
    assert target_of(body) is None
    del body["metadata"]["annotations"][FAIL_CONTAINER]
    assert target_of(body) is None


def _s(name: str, state: str, **kw: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"exitCode": kw.pop("code", 0)} if state == "terminated" else {}
    return {"name": name, "state": {state: value}, **kw}


def test_get_phase_as_upstreams() -> None:
    spec: dict[str, Any] = {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]}
    waiting = [_s("a", "waiting"), _s("b", "waiting")]
    failed_exit = {"lastState": {"terminated": {"exitCode": 1}}}
    assert get_phase(spec, [_s("i", "running")], waiting) == "Pending"
    assert get_phase({**spec, "restartPolicy": "Never"}, [_s("i", "terminated", code=1)], waiting) == "Failed"
    assert get_phase(spec, [_s("i", "terminated", code=1)], waiting) == "Pending"  # to be restarted
    assert get_phase(spec, [_s("i", "waiting", **failed_exit)], waiting) == "Pending"
    done = [_s("i", "terminated")]
    assert get_phase(spec, done, [_s("a", "running"), _s("b", "terminated", code=1)]) == "Running"
    assert get_phase(spec, done, [_s("a", "running"), _s("b", "waiting", **failed_exit)]) == "Running"
    never = {**spec, "restartPolicy": "Never"}
    assert get_phase(never, done, [_s("a", "terminated"), _s("b", "terminated", code=1)]) == "Failed"
    assert get_phase(never, done, [_s("a", "terminated"), _s("b", "terminated")]) == "Succeeded"
    assert get_phase({**spec, "restartPolicy": "OnFailure"}, done,
                     [_s("a", "terminated"), _s("b", "terminated", code=1)]) == "Running"
    assert get_phase(spec, done, [_s("a", "terminated"), _s("b", "terminated", code=1)]) == "Running"
    # a sidecar restarting after the containers started keeps the pod Running
    sidecar = {"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]}
    assert get_phase(sidecar, [_s("s", "waiting", **failed_exit)], [_s("a", "running")]) == "Running"
    assert get_phase(sidecar, [_s("s", "running", started=False)], [_s("a", "waiting")]) == "Pending"


async def _when(client: Client, name: str, check: Any) -> dict[str, Any] | None:
    got = await full(client, name)
    got.setdefault("status", {})
    return got if check(got) else None
