"""A Job's pod failure policy judging a failed pod (controllers/podfailurepolicy.py), as
upstream's matchPodFailurePolicy: rules in order, the first match decides."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.podfailurepolicy import Verdict, verdict


def failed(*codes: tuple[str, int | None], init: tuple[tuple[str, int | None], ...] = (),
           conditions: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """A failed pod whose containers ended with ``codes`` (None: not terminated)."""
    def statuses(pairs: tuple[tuple[str, int | None], ...]) -> list[dict[str, Any]]:
        return [{"name": n, "state": {"running": {}} if c is None else {"terminated": {"exitCode": c}}}
                for n, c in pairs]

    return {"metadata": {"namespace": "ns", "name": "p"},
            "status": {"phase": "Failed", "containerStatuses": statuses(codes), "initContainerStatuses": statuses(init),
                       "conditions": [{"type": t, "status": s} for t, s in conditions]}}


def on_codes(action: str, operator: str, *values: int, container: str | None = None) -> dict[str, Any]:
    req: dict[str, Any] = {"operator": operator, "values": list(values)}
    if container is not None:
        req["containerName"] = container
    return {"action": action, "onExitCodes": req}


def on_condition(action: str, kind: str, status: str = "True") -> dict[str, Any]:
    return {"action": action, "onPodConditions": [{"type": kind, "status": status}]}


def test_no_policy_or_no_match_counts_the_failure() -> None:
    assert verdict(None, failed(("c", 1))) == Verdict(None, True, None)
    assert verdict({"rules": [on_codes("Ignore", "In", 2)]}, failed(("c", 1))) == Verdict(None, True, None)


def test_fail_job_says_which_container_and_rule_in_upstreams_words() -> None:
    policy = {"rules": [on_codes("Ignore", "In", 1), on_codes("FailJob", "In", 42)]}
    assert verdict(policy, failed(("a", 0), ("b", 42))) == Verdict(
        "Container b for pod ns/p failed with exit code 42 matching FailJob rule at index 1", True, "FailJob")


def test_the_first_matching_rule_wins() -> None:
    policy = {"rules": [on_condition("Ignore", "DisruptionTarget"), on_codes("FailJob", "NotIn", 0)]}
    disrupted = failed(("c", 137), conditions=(("DisruptionTarget", "True"),))
    assert verdict(policy, disrupted) == Verdict(None, False, "Ignore")
    assert verdict(policy, failed(("c", 137))).action == "FailJob"


def test_exit_code_zero_and_running_containers_never_match() -> None:
    policy = {"rules": [on_codes("FailJob", "NotIn", 1)]}
    assert verdict(policy, failed(("c", 0))).action is None
    assert verdict(policy, failed(("c", None))).action is None
    assert verdict(policy, failed(("c", 2))).action == "FailJob"


def test_container_name_and_init_containers() -> None:
    policy = {"rules": [on_codes("FailJob", "In", 3, container="setup")]}
    assert verdict(policy, failed(("main", 3))).action is None  # another container's code
    judged = verdict(policy, failed(("main", None), init=(("setup", 3),)))
    assert judged.message == "Container setup for pod ns/p failed with exit code 3 matching FailJob rule at index 0"


def test_pod_conditions_match_type_and_status() -> None:
    policy = {"rules": [on_condition("FailJob", "DisruptionTarget", "False"), on_condition("Count", "ConfigIssue")]}
    assert verdict(policy, failed(conditions=(("DisruptionTarget", "True"),))).action is None
    assert verdict(policy, failed(conditions=(("DisruptionTarget", "False"),))).message == \
        "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"
    assert verdict(policy, failed(conditions=(("ConfigIssue", "True"),))) == Verdict(None, True, "Count")


def test_fail_index_counts_the_failure() -> None:
    assert verdict({"rules": [on_codes("FailIndex", "In", 5)]}, failed(("c", 5))) == Verdict(None, True, "FailIndex")
