"""A Job's pod failure policy and replacement policy: defaulted and validated as upstream's
SetDefaults_Job and validateJobSpec (pkg/apis/batch), in upstream's words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.registry.strategies import prepare


def job(restart: str = "Never", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"j": "1"}}, "manualSelector": True,
                     "template": {"metadata": {"labels": {"j": "1"}},
                                  "spec": {"restartPolicy": restart,
                                           "initContainers": [{"name": "setup", "image": "x"}],
                                           "containers": [{"name": "main", "image": "x"}]}},
                     **spec}}


def policy(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"rules": list(rules)}


def causes(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in prepare("jobs", obj, old)]


def test_a_pod_failure_policy_is_defaulted_as_upstream() -> None:
    plain = job()
    assert causes(plain) == []
    assert plain["spec"]["podReplacementPolicy"] == "TerminatingOrFailed"
    with_policy = job(podFailurePolicy=policy({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}))
    assert causes(with_policy) == []
    assert with_policy["spec"]["podReplacementPolicy"] == "Failed"  # only failed pods are replaced
    assert with_policy["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": "True"}]


def test_a_valid_policy_passes() -> None:
    valid = job(podFailurePolicy=policy(
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [1, 42]}},
        {"action": "Count", "onExitCodes": {"containerName": "setup", "operator": "NotIn", "values": [0, 3]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Unknown"}]}))
    assert causes(valid) == []
    indexed = job(completionMode="Indexed", completions=2, backoffLimitPerIndex=1, podFailurePolicy=policy(
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}))
    assert causes(indexed) == []


@pytest.mark.parametrize(("rule", "expected"), [
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 42]}},
     [("spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "Invalid value: 0: must not be 0 for the In operator")]),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42, 1, 42]}},
     [("spec.podFailurePolicy.rules[0].onExitCodes.values[2]", "Duplicate value: 42"),
      ("spec.podFailurePolicy.rules[0].onExitCodes.values", "Invalid value: []int32{42, 1, 42}: must be ordered")]),
    ({"action": "FailJob", "onExitCodes": {"operator": "Is", "values": [1], "containerName": "other"}},
     [("spec.podFailurePolicy.rules[0].onExitCodes.operator",
       'Unsupported value: "Is": supported values: "In", "NotIn"'),
      ("spec.podFailurePolicy.rules[0].onExitCodes.containerName",
       'Invalid value: "other": must be one of the container or initContainer names in the pod template')]),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": []}},
     [("spec.podFailurePolicy.rules[0].onExitCodes.values",
       "Invalid value: []int32(nil): at least one value is required")]),
    ({"action": "Stop", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]},
     [("spec.podFailurePolicy.rules[0].action",
       'Unsupported value: "Stop": supported values: "Count", "FailIndex", "FailJob", "Ignore"'),
      ("spec.podFailurePolicy.rules[0].onPodConditions[0].status",
       'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"')]),
    ({"onPodConditions": [{"type": "DisruptionTarget"}]},
     [("spec.podFailurePolicy.rules[0].action",
       'Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]')]),
    ({"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}},
     [("spec.podFailurePolicy.rules[0].action",
       'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set')]),
    ({"action": "Ignore"},
     [("spec.podFailurePolicy.rules[0]",
       "Invalid value: specifying one of OnExitCodes and OnPodConditions is required")]),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "Ready"}]},
     [("spec.podFailurePolicy.rules[0]",
       "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported")]),
])
def test_an_invalid_rule_is_refused_in_upstreams_words(rule: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert causes(job(podFailurePolicy=policy(rule))) == expected


def test_a_pod_failure_policy_needs_restart_policy_never_and_failed_replacement() -> None:
    rule = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    assert causes(job("OnFailure", podFailurePolicy=policy(rule))) == [
        ("spec.template.spec.restartPolicy",
         'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified')]
    assert causes(job(podFailurePolicy=policy(rule), podReplacementPolicy="TerminatingOrFailed")) == [
        ("spec.podReplacementPolicy", 'Unsupported value: "TerminatingOrFailed": supported values: "Failed"')]
    assert causes(job(podReplacementPolicy="Sometimes")) == [
        ("spec.podReplacementPolicy",
         'Unsupported value: "Sometimes": supported values: "Failed", "TerminatingOrFailed"')]
    too_many = job(podFailurePolicy=policy(*[rule] * 21))
    assert causes(too_many) == [("spec.podFailurePolicy.rules", "Too many: 21: must have at most 20 items")]


def test_per_index_limits_need_an_indexed_job() -> None:
    assert causes(job(backoffLimitPerIndex=1, maxFailedIndexes=1)) == [
        ("spec.backoffLimitPerIndex", "Invalid value: 1: requires indexed completion mode"),
        ("spec.maxFailedIndexes", "Invalid value: 1: requires indexed completion mode")]
    assert causes(job(completionMode="Indexed", completions=2, maxFailedIndexes=1)) == [
        ("spec.backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified")]


def test_the_policies_are_immutable() -> None:
    rule = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    old = job(podFailurePolicy=policy(rule))
    assert causes(old) == []
    new = copy.deepcopy(old)
    new["spec"]["podFailurePolicy"]["rules"][0]["action"] = "Count"
    assert [f for f, _ in causes(new, old)] == ["spec.podFailurePolicy"]
    assert causes(copy.deepcopy(old), old) == []


def test_a_cron_jobs_job_template_is_checked_too() -> None:
    cron: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
                "podFailurePolicy": policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}),
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}}
    assert [(c["field"], c["message"]) for c in prepare("cronjobs", cron, None)] == [
        ("spec.jobTemplate.spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
         "Invalid value: 0: must not be 0 for the In operator")]
    assert "podReplacementPolicy" not in cron["spec"]["jobTemplate"]["spec"]  # SetDefaults_Job is the Job's


def test_per_index_limits_are_bounded_as_upstream() -> None:
    indexed: dict[str, Any] = {"completionMode": "Indexed", "backoffLimitPerIndex": 1}
    assert causes(job(**indexed, completions=2, maxFailedIndexes=3)) == [
        ("spec.maxFailedIndexes", "Invalid value: 3: must be less than or equal to completions")]
    assert causes(job(completionMode="Indexed", parallelism=2)) == [
        ("spec.completions", "Required value: when completion mode is Indexed")]
    assert causes(job(**indexed, completions=200_000, parallelism=20_000)) == [
        ("spec.maxFailedIndexes", "Required value: must be specified when completions is above 100000"),
        ("spec.parallelism", "Invalid value: 20000: must be less than or equal to 10000 when completions are above "
                             "100000 and used with backoff limit per index")]
    assert causes(job(**indexed, completions=200_000, parallelism=10, maxFailedIndexes=10_000)) == []


def test_a_success_policy_is_validated_as_upstream() -> None:
    def success(*rules: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return job(**{"completionMode": "Indexed", "completions": 5, **spec}, successPolicy={"rules": list(rules)})

    assert causes(success({"succeededIndexes": "0,2-4", "succeededCount": 3}, {"succeededCount": 5})) == []
    assert causes(job(completions=5, successPolicy={"rules": [{"succeededCount": 1}]})) == [
        ("spec.successPolicy", 'Invalid value: {"rules":[{"succeededCount":1}]}: requires indexed completion mode')]
    assert causes(success()) == [("spec.successPolicy.rules", "Required value: at least one rules must be specified "
                                                              "when the successPolicy is specified")]
    assert causes(success({})) == [("spec.successPolicy.rules[0]", "Required value: at least one of succeededCount "
                                                                   "or succeededIndexes must be specified")]
    assert causes(success({"succeededCount": 6}, {"succeededIndexes": "1-2", "succeededCount": 3})) == [
        ("spec.successPolicy.rules[0].succeededCount",
         "Invalid value: 6: must be less than or equal to 5 (the number of specified completions)"),
        ("spec.successPolicy.rules[1].succeededCount",
         "Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes "
         "field)")]
    bad = {"1-3-4": 'the fragment "1-3-4" violates the requirement that an index interval can have at most two parts '
                    "separated by '-'",
           "a": 'cannot convert string to integer for index: "a"', "5": 'too large index: "5"',
           "2,1": "non-increasing order, previous: 2, current: 1",
           "3-3": "non-increasing order, previous: 3, current: 3",
           "0-2,2": "non-increasing order, previous: 2, current: 2"}
    for text, problem in bad.items():
        assert causes(success({"succeededIndexes": text})) == [
            ("spec.successPolicy.rules[0].succeededIndexes",
             f'Invalid value: "{text}": error parsing succeededIndexes: {problem}')], text
    too_many = success(*[{"succeededCount": 1}] * 21)
    assert causes(too_many) == [("spec.successPolicy.rules", "Too many: 21: must have at most 20 items")]
