"""Simulated container failures end to end (``nodes/podfailure.py``): ``controlplane serve`` with
its scheduler, controllers and one simulated node on the built-in stages, every Job pod without
annotations failing (``--job-failure-rate 1``), driven by the real kubectl over a socket. The
Job controller sees the failures a kubelet would report: ``backoffLimit`` and
``podFailurePolicy`` rules on exit codes and OOM kills do what upstream's do; a Deployment's
crash-looping pod shows ``CrashLoopBackOff`` and its restarts in ``kubectl get pods``."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from controlplane.nodes.podfailure import EXIT_CODE, FAIL_CONTAINER, OOM_KILLED
from tests.e2e.test_kubectl import kubectl, watching
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    # a failed Job pod replaced after 10 ms, a crashed container restarted after 0.3 s doubling to
    # 1.2 s: upstream's 10 s and 10 s to 5 min on a test's time scale
    extra = ("--nodes", "1", "--job-failure-rate", "1", "--job-failure-exit-code", "7",
             "--job-pod-failure-backoff", "10ms", "--crash-loop-backoff", "300ms", "--crash-loop-max-backoff", "1.2s")
    with running(start_serve(tmp_path_factory.mktemp("podfail"), scheduler=True, extra=extra)) as s:
        yield s


def job_yaml(name: str, annotations: dict[str, str], backoff_limit: int, rules: str | None = None,
             restart_policy: str = "Never") -> str:
    policy = f"podFailurePolicy: {{rules: {rules}}}" if rules else ""
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  backoffLimit: {backoff_limit}
  {policy}
  template:
    metadata: {{annotations: {orjson.dumps(annotations).decode()}}}
    spec:
      restartPolicy: {restart_policy}
      terminationGracePeriodSeconds: 0
      containers: [{{name: main, image: busybox}}]
"""


def job(served: Serve, name: str) -> dict[str, Any]:
    got: dict[str, Any] = orjson.loads(kubectl(served, "get", "job", name, "-o", "json"))
    return got


def true_conditions(served: Serve, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in job(served, name).get("status", {}).get("conditions") or () if c["status"] == "True"}


def pods_of(served: Serve, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = orjson.loads(
        kubectl(served, "get", "pods", "-l", f"job-name={name}", "-o", "json"))["items"]
    return items


def test_a_job_whose_pods_fail_ends_at_its_backoff_limit(served: Serve) -> None:
    """No annotation: ``--job-failure-rate 1`` fails every run, with exit code 7."""
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("doomed", {}, backoff_limit=2))
    kubectl(served, "wait", "--for=condition=failed", "job/doomed", "--timeout=60s")
    assert true_conditions(served, "doomed")["Failed"]["reason"] == "BackoffLimitExceeded"
    assert job(served, "doomed")["status"]["failed"] == 3  # backoffLimit + 1
    pods = pods_of(served, "doomed")
    assert len(pods) == 3 and {p["status"]["phase"] for p in pods} == {"Failed"}
    for p in pods:
        t = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (t["exitCode"], t["reason"]) == (7, "Error")
        ready = next(c for c in p["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "PodFailed")
    table = kubectl(served, "get", "pods", "-l", "job-name=doomed", "--no-headers").splitlines()
    assert {line.split()[2] for line in table} == {"Error"}


def test_a_fail_job_rule_on_an_exit_code(served: Serve) -> None:
    rules = "[{action: FailJob, onExitCodes: {containerName: main, operator: In, values: [42]}}]"
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("fatal", {EXIT_CODE: "42"}, 6, rules))
    kubectl(served, "wait", "--for=condition=failed", "job/fatal", "--timeout=60s")
    (pod,) = pods_of(served, "fatal")
    got = true_conditions(served, "fatal")
    assert (got["Failed"]["reason"], got["Failed"]["message"]) == (
        "PodFailurePolicy", f"Container main for pod default/{pod['metadata']['name']} failed with exit code 42 "
                            "matching FailJob rule at index 0")
    assert job(served, "fatal")["status"]["failed"] == 1


def test_an_ignore_rule_on_oom_kills_never_counts_them(served: Serve) -> None:
    """OOMKilled is exit code 137 to a podFailurePolicy (upstream matches exit codes, the
    terminated state's reason is not a rule's)."""
    rules = "[{action: Ignore, onExitCodes: {operator: In, values: [137]}}]"
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("oomy", {OOM_KILLED: "true"}, 0, rules))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        failed = [p for p in pods_of(served, "oomy") if p["status"].get("phase") == "Failed"]
        if len(failed) >= 3:
            break
        time.sleep(0.2)
    else:
        pytest.fail("fewer than three pods OOMKilled in a minute")
    t = failed[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (137, "OOMKilled")
    status = job(served, "oomy")["status"]
    assert not status.get("failed") and "Failed" not in true_conditions(served, "oomy")
    assert status.get("active") == 1  # replaced each time, past a backoffLimit of 0
    kubectl(served, "delete", "job", "oomy", "--cascade=foreground", "--wait=false")


def test_a_count_rule_on_oom_kills_counts_them(served: Serve) -> None:
    rules = "[{action: Count, onExitCodes: {operator: In, values: [137]}}]"
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("counted", {OOM_KILLED: "true"}, 1, rules))
    kubectl(served, "wait", "--for=condition=failed", "job/counted", "--timeout=60s")
    assert true_conditions(served, "counted")["Failed"]["reason"] == "BackoffLimitExceeded"
    assert job(served, "counted")["status"]["failed"] == 2


def test_an_on_failure_job_counts_its_pods_restarts(served: Serve) -> None:
    """restartPolicy OnFailure: the kubelet restarts the failed container in its pod, and the Job
    controller counts the restarts against backoffLimit (upstream's pastBackoffLimitOnFailure)."""
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("restarting", {EXIT_CODE: "4", "sim.controlplane.dev/fail-after":
                                                                      "100ms"}, 2, restart_policy="OnFailure"))
    kubectl(served, "wait", "--for=condition=failed", "job/restarting", "--timeout=60s")
    got = true_conditions(served, "restarting")["Failed"]
    assert (got["reason"], got["message"]) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    status = job(served, "restarting")["status"]
    assert not status.get("active")
    events = kubectl(served, "get", "events", "--field-selector", "reason=BackOff", "-o", "json")
    assert any(e["involvedObject"]["name"].startswith("restarting-") for e in orjson.loads(events)["items"])


DEPLOYMENT = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: crashy}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: crashy}}}}
  template:
    metadata:
      labels: {{app: crashy}}
      annotations: {{"{EXIT_CODE}": "1", "sim.controlplane.dev/fail-after": "200ms"}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{{name: app, image: nginx}}]
"""


def test_a_crash_looping_deployment_pod_in_kubectl_get_pods(served: Serve) -> None:
    # every row kubectl prints as the pod changes: a poll of ``kubectl get`` (a second or more
    # per run on a loaded machine) misses the 200 ms the restarted container runs
    rows: list[list[str]] = []
    with watching(served, "pods", "-l", "app=crashy") as lines:
        kubectl(served, "apply", "-f", "-", stdin=DEPLOYMENT)
        deadline = time.monotonic() + 60
        while True:
            try:
                row = lines.get(timeout=max(deadline - time.monotonic(), 0.01)).split()
            except queue.Empty:
                pytest.fail(f"no CrashLoopBackOff with 2 restarts in a minute: {rows[-5:]}")
            if row[:1] == ["NAME"]:
                assert row == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
                continue
            rows.append(row)
            if row[2] == "CrashLoopBackOff" and int(row[3]) >= 2:
                break
    last = rows[-1]
    # READY 0/1 while backing off; RESTARTS with the last one's age, as kubectl's printer shows it
    assert last[1] == "0/1" and last[4].startswith("(") and last[5] == "ago)"
    assert any(r[2] == "Running" and r[1] == "1/1" and r[3] == "1" for r in rows[:-1] if len(r) > 3)
    # the container is waiting in CrashLoopBackOff most of the time, running 200 ms between: a
    # describe that falls in those asks again
    deadline = time.monotonic() + 30
    while "CrashLoopBackOff" not in (described := kubectl(served, "describe", "pods", "-l", "app=crashy")):
        assert time.monotonic() < deadline, described
    assert "Back-off restarting failed container app in pod" in described
    assert 'Container image "nginx" already present on machine' in described  # its restarts' Pulled
    kubectl(served, "delete", "deployment", "crashy")


def init_pod_yaml(name: str, restart_policy: str) -> str:
    annotations = {EXIT_CODE: "1", FAIL_CONTAINER: "migrate", "sim.controlplane.dev/fail-after": "100ms"}
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {orjson.dumps(annotations).decode()}}}
spec:
  restartPolicy: {restart_policy}
  terminationGracePeriodSeconds: 0
  initContainers: [{{name: migrate, image: busybox}}]
  containers: [{{name: app, image: nginx}}]
"""


def test_an_init_container_crash_looping_in_kubectl_get_pods(served: Serve) -> None:
    """``fail-container`` aimed at an init container: the pod stays Pending, and kubectl's table
    (the server's, printPod's rules) shows ``Init:CrashLoopBackOff`` with the init container's restarts."""
    kubectl(served, "apply", "-f", "-", stdin=init_pod_yaml("initloop", "Always"))
    deadline = time.monotonic() + 60
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        row = kubectl(served, "get", "pod", "initloop", "--no-headers").split()
        rows.append(row)  # NAME READY STATUS RESTARTS AGE
        if row[2] == "Init:CrashLoopBackOff" and int(row[3]) >= 2:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"no Init:CrashLoopBackOff with 2 restarts in a minute: {rows[-5:]}")
    assert rows[-1][1] == "0/1" and rows[-1][4].startswith("(")
    assert {r[2] for r in rows} <= {"Pending", "ContainerCreating", "Init:0/1", "Init:Error", "Init:CrashLoopBackOff"}
    pod = orjson.loads(kubectl(served, "get", "pod", "initloop", "-o", "json"))
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    described = kubectl(served, "describe", "pod", "initloop")
    assert "Back-off restarting failed container migrate in pod" in described
    kubectl(served, "delete", "pod", "initloop")


def test_an_init_container_failing_a_never_pod_in_kubectl_get_pods(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=init_pod_yaml("initfail", "Never"))
    kubectl(served, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/initfail", "--timeout=60s")
    row = kubectl(served, "get", "pod", "initfail", "--no-headers").split()
    assert row[1:4] == ["0/1", "Init:Error", "0"]
    kubectl(served, "delete", "pod", "initfail")
