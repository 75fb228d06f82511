"""A Job's podFailurePolicy, backoffLimitPerIndex and successPolicy end to end:
``controlplane serve`` with its scheduler, one simulated node and the built-in stages plus one
that fails a running pod with the exit code its annotation names (as a KWOK chaos stage would)
and one that makes index 0 of a Job so annotated succeed, driven by kubectl and the official
client over a socket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client

from controlplane.nodes.stages import __file__ as stages_module
from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, running, start_serve

EXIT_CODE = "test.controlplane.dev/exit-code"
# the container ends with the annotation's exit code, as soon as the pod runs
FAIL_STAGE = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-exit-code
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.metadata.annotations["{EXIT_CODE}"]'
      operator: Exists
  weight: 1000
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $root := . }}}}
      phase: Failed
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        imageID: ""
        ready: false
        restartCount: 0
        state:
          terminated:
            exitCode: {{{{ index $root.metadata.annotations "{EXIT_CODE}" }}}}
            reason: Error
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
"""


INDEX_ZERO_SUCCEEDS = "test.controlplane.dev/index-zero-succeeds"
# index 0 of a Job so annotated succeeds as soon as it runs (its other indexes run on)
SUCCEED_STAGE = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-index-zero-succeeds
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.metadata.annotations["{INDEX_ZERO_SUCCEEDS}"]'
      operator: Exists
    - key: '.metadata.annotations["batch.kubernetes.io/job-completion-index"]'
      operator: In
      values: ["0"]
  weight: 1000
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      phase: Succeeded
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        imageID: ""
        ready: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("pfp")
    builtin = (Path(stages_module).parent / "default-stages.yaml").read_text()
    stages = tmp / "stages.yaml"
    # pods without the annotation run until evicted (their pod-complete a minute away)
    stages.write_text(builtin.replace("__JOB_MILLISECONDS__", "60000") + "\n---\n" + FAIL_STAGE + "\n---\n" +
                      SUCCEED_STAGE)
    # (a failed pod replaced after 10 ms, not upstream's 10 s)
    extra = ("--nodes", "1", "--stages", str(stages), "--job-pod-failure-backoff", "10ms")
    with running(start_serve(tmp, scheduler=True, extra=extra)) as s:
        yield s


def job_yaml(name: str, rules: str, exit_code: int | None = None, backoff_limit: int = 6) -> str:
    annotations = f'annotations: {{"{EXIT_CODE}": "{exit_code}"}}' if exit_code is not None else "annotations: {}"
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  backoffLimit: {backoff_limit}
  podFailurePolicy:
    rules: {rules}
  template:
    metadata: {{{annotations}}}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers: [{{name: main, image: busybox}}]
"""


def conditions(served: Serve, name: str) -> dict[str, dict[str, Any]]:
    job = orjson.loads(kubectl(served, "get", "job", name, "-o", "json"))
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or () if c["status"] == "True"}


def test_a_fail_job_rule_on_exit_code_42_fails_the_job_at_once(served: Serve) -> None:
    rules = '[{action: FailJob, onExitCodes: {containerName: main, operator: In, values: [42]}}]'
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("fatal", rules, exit_code=42))
    kubectl(served, "wait", "--for=condition=failed", "job/fatal", "--timeout=60s")
    (pod,) = orjson.loads(kubectl(served, "get", "pods", "-l", "job-name=fatal", "-o", "json"))["items"]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 42
    got = conditions(served, "fatal")
    message = (f"Container main for pod default/{pod['metadata']['name']} failed with exit code 42 matching "
               "FailJob rule at index 0")
    for kind in ("FailureTarget", "Failed"):
        assert (got[kind]["reason"], got[kind]["message"]) == ("PodFailurePolicy", message)
    status = orjson.loads(kubectl(served, "get", "job", "fatal", "-o", "json"))["status"]
    assert status["failed"] == 1  # one pod, not backoffLimit + 1 of them
    assert kubectl(served, "get", "job", "fatal", "--no-headers").split()[1] == "Failed"


def test_an_other_exit_code_runs_to_the_backoff_limit(served: Serve) -> None:
    rules = '[{action: FailJob, onExitCodes: {operator: In, values: [42]}}]'
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("flaky", rules, exit_code=1, backoff_limit=1))
    kubectl(served, "wait", "--for=condition=failed", "job/flaky", "--timeout=60s")
    assert conditions(served, "flaky")["Failed"]["reason"] == "BackoffLimitExceeded"


def _running_pod(core: client.CoreV1Api, job: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = [p for p in core.list_namespaced_pod("default", label_selector=f"job-name={job}").items
                if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]
        if pods:
            return pods[0]
        time.sleep(0.2)
    pytest.fail(f"no running pod of {job}")


def test_an_ignore_rule_on_disruption_target_does_not_count_an_evicted_pod(served: Serve,
                                                                         api: client.ApiClient) -> None:
    ignore = '[{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}]'
    unmatched = '[{action: Ignore, onExitCodes: {operator: In, values: [3]}}]'
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("evicted", ignore, backoff_limit=0))
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("counted", unmatched, backoff_limit=0))
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    evicted = {}
    for name in ("evicted", "counted"):
        pod = _running_pod(core, name)
        core.create_namespaced_pod_eviction(pod.metadata.name, "default", client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace="default")))
        evicted[name] = pod.metadata.name
    # no rule matched: the evicted pod counts, past a backoff limit of 0
    kubectl(served, "wait", "--for=condition=failed", "job/counted", "--timeout=60s")
    assert conditions(served, "counted")["Failed"]["reason"] == "BackoffLimitExceeded"
    # the Ignore rule: replaced, not counted, the Job still running
    replacement = _running_pod(core, "evicted")
    assert replacement.metadata.name != evicted["evicted"]
    job = batch.read_namespaced_job("evicted", "default")
    assert not job.status.failed and not [c for c in job.status.conditions or () if c.status == "True"]


def indexed_job_yaml(name: str, spec: str, annotation: str) -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  completionMode: Indexed
{spec}
  template:
    metadata: {{annotations: {{{annotation}}}}}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers: [{{name: main, image: busybox}}]
"""


def test_each_index_is_retried_to_its_own_backoff_limit(served: Serve) -> None:
    spec = "  completions: 2\n  parallelism: 2\n  backoffLimitPerIndex: 1"
    kubectl(served, "apply", "-f", "-", stdin=indexed_job_yaml("per-index", spec, f'"{EXIT_CODE}": "1"'))
    kubectl(served, "wait", "--for=condition=failed", "job/per-index", "--timeout=60s")
    failed = conditions(served, "per-index")["Failed"]
    assert (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
    status = orjson.loads(kubectl(served, "get", "job", "per-index", "-o", "json"))["status"]
    assert (status["failedIndexes"], status["failed"], status["terminating"]) == ("0,1", 4, 0)
    pods = orjson.loads(kubectl(served, "get", "pods", "-l", "job-name=per-index", "-o", "json"))["items"]
    counts = sorted((p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"],
                     p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"]) for p in pods)
    assert counts == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]  # each index twice, no more


def test_a_fail_index_rule_fails_its_index_at_once(served: Serve) -> None:
    spec = """  completions: 3
  parallelism: 1
  backoffLimitPerIndex: 6
  maxFailedIndexes: 0
  podFailurePolicy:
    rules: [{action: FailIndex, onExitCodes: {operator: In, values: [42]}}]"""
    kubectl(served, "apply", "-f", "-", stdin=indexed_job_yaml("fail-index", spec, f'"{EXIT_CODE}": "42"'))
    kubectl(served, "wait", "--for=condition=failed", "job/fail-index", "--timeout=60s")
    assert conditions(served, "fail-index")["Failed"]["reason"] == "MaxFailedIndexesExceeded"
    status = orjson.loads(kubectl(served, "get", "job", "fail-index", "-o", "json"))["status"]
    assert (status["failedIndexes"], status["failed"]) == ("0", 1)  # not retried, for all its limit of 6


def test_a_success_policy_met_completes_the_job_early(served: Serve, api: client.ApiClient) -> None:
    spec = "  completions: 3\n  parallelism: 3\n  successPolicy:\n    rules: [{succeededIndexes: '0'}]"
    kubectl(served, "apply", "-f", "-", stdin=indexed_job_yaml("early", spec, f'"{INDEX_ZERO_SUCCEEDS}": ""'))
    kubectl(served, "wait", "--for=condition=complete", "job/early", "--timeout=60s")
    job = client.BatchV1Api(api).read_namespaced_job("early", "default")
    got = {c.type: (c.reason, c.message) for c in job.status.conditions if c.status == "True"}
    assert got == {"SuccessCriteriaMet": ("SuccessPolicy", "Matched rules at index 0"),
                   "Complete": ("SuccessPolicy", "Matched rules at index 0")}
    assert (job.status.completed_indexes, job.status.succeeded, job.status.failed, job.status.active) == \
        ("0", 1, None, None)
    pods = client.CoreV1Api(api).list_namespaced_pod("default", label_selector="job-name=early").items
    assert [p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0"]


def test_counts_outlive_the_pods_kubectl_deletes(served: Serve, api: client.ApiClient) -> None:
    """The pods carry the tracking finalizer only until counted: kubectl's delete of the
    finished ones returns (none stays terminating), and the counts stay, in the Job's status
    and in ``kubectl describe``."""
    rules = '[{action: Ignore, onExitCodes: {operator: In, values: [3]}}]'
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("tracked", rules, exit_code=1, backoff_limit=2))
    kubectl(served, "wait", "--for=condition=failed", "job/tracked", "--timeout=60s")
    pods = orjson.loads(kubectl(served, "get", "pods", "-l", "job-name=tracked", "-o", "json"))["items"]
    assert len(pods) == 3 and not any(p["metadata"].get("finalizers") for p in pods)
    kubectl(served, "delete", "pods", "-l", "job-name=tracked", "--timeout=30s")
    assert kubectl(served, "get", "pods", "-l", "job-name=tracked", "-o", "name") == ""
    job = client.BatchV1Api(api).read_namespaced_job("tracked", "default")
    assert (job.status.failed, job.status.succeeded, job.status.active) == (3, None, None)
    assert job.status.uncounted_terminated_pods == client.V1UncountedTerminatedPods()
    described = " ".join(kubectl(served, "describe", "job", "tracked").split())
    assert "Pods Statuses: 0 Active (0 Ready) / 0 Succeeded / 3 Failed" in described


def test_a_running_pod_deleted_is_failed_by_its_kubelet_then_counted_and_let_go(served: Serve,
                                                                                 api: client.ApiClient) -> None:
    """A running pod carries the tracking finalizer; deleted, its kubelet marks it Failed (the
    finalizer keeps it past its grace period), the Job judges and counts it, and it goes."""
    rules = '[{action: Ignore, onExitCodes: {operator: In, values: [3]}}]'
    kubectl(served, "apply", "-f", "-", stdin=job_yaml("deleted", rules, backoff_limit=0))
    pod = _running_pod(client.CoreV1Api(api), "deleted")
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]
    kubectl(served, "delete", "pod", pod.metadata.name, "--timeout=30s")
    kubectl(served, "wait", "--for=condition=failed", "job/deleted", "--timeout=60s")
    assert conditions(served, "deleted")["Failed"]["reason"] == "BackoffLimitExceeded"  # no rule matched
    assert client.BatchV1Api(api).read_namespaced_job("deleted", "default").status.failed == 1
