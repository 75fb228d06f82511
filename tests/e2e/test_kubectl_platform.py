"""kubectl commands a platform engineer's sweep against upstream found answered differently,
with the real kubectl against one ``controlplane serve`` over a socket: a CronJob's job
template as ``SetObjectDefaults_CronJob`` defaults it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("platform"))) as s:
        yield s


def test_a_cron_jobs_template_keeps_what_it_says_and_its_job_gets_the_job_defaults(served: Serve) -> None:
    """SetDefaults_Job is the Job's, not the CronJob's: the template's job spec gets no
    completions, parallelism, backoffLimit, ... (its pod spec is defaulted as every pod
    template's), and the Job made from it gets them at its own create."""
    for dry in ("--dry-run=server", None):
        args = ["create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "-o", "json"]
        cron = json.loads(kubectl(served, *args, *([dry] if dry else [])))
        job_spec = cron["spec"]["jobTemplate"]["spec"]
        assert sorted(job_spec) == ["template"]
        pod = job_spec["template"]["spec"]
        assert (pod["restartPolicy"], pod["dnsPolicy"], pod["containers"][0]["imagePullPolicy"]) == \
            ("OnFailure", "ClusterFirst", "Always")
        assert {k: cron["spec"][k] for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit",
                                             "failedJobsHistoryLimit")} == \
            {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
             "failedJobsHistoryLimit": 1}
    stored = json.loads(kubectl(served, "get", "cronjob", "nightly", "-o", "json"))
    assert sorted(stored["spec"]["jobTemplate"]["spec"]) == ["template"]
    job = json.loads(kubectl(served, "create", "job", "now", "--from=cronjob/nightly", "-o", "json"))
    assert {k: job["spec"].get(k) for k in ("completions", "parallelism", "backoffLimit", "completionMode",
                                            "suspend", "podReplacementPolicy", "manualSelector")} == \
        {"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
         "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False}
    # a pod failure policy's condition patterns are defaulted in the template too (their type's defaulter)
    manifest = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "guarded"}, "spec": {
        "schedule": "0 4 * * *", "jobTemplate": {"spec": {
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    guarded = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(manifest)))
    job_spec = guarded["spec"]["jobTemplate"]["spec"]
    assert job_spec["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget",
                                                                              "status": "True"}]
    assert "podReplacementPolicy" not in job_spec
