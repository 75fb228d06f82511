"""An Indexed Job's interval strings, per-index failure counts and success policy
(controllers/indexedjobs.py), as upstream's indexed_job_utils.go and success_policy.go."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.indexedjobs import (
    COMPLETION_INDEX,
    FAILURE_COUNT,
    IGNORED_FAILURE_COUNT,
    compress_indexes,
    fails_its_index,
    failure_annotations,
    parse_indexes,
    pods_being_replaced,
    success_policy_met,
)


def failed(index: int, code: int = 1, counts: tuple[int, int] = (0, 0), finished: str = "") -> dict[str, Any]:
    annotations = {COMPLETION_INDEX: str(index), FAILURE_COUNT: str(counts[0])}
    if counts[1]:
        annotations[IGNORED_FAILURE_COUNT] = str(counts[1])
    return {"metadata": {"name": f"p{index}-{counts}", "namespace": "default", "annotations": annotations},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "c", "state": {"terminated": {"exitCode": code, "finishedAt": finished}}}]}}


def rule(action: str, code: int) -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"operator": "In", "values": [code]}}


def test_intervals_read_and_write_as_upstreams() -> None:
    assert compress_indexes({0, 1, 2, 5, 7, 8, 10}) == "0-2,5,7,8,10"
    assert compress_indexes(set()) == ""
    assert parse_indexes("0-2,5,7,8", 10) == {0, 1, 2, 5, 7, 8}
    assert parse_indexes("1,x,3-9,12", 6) == {1, 3, 4, 5}  # a bad fragment skipped, cut at completions
    assert parse_indexes("", 3) == set() and parse_indexes(None, 3) == set()


def test_a_failed_pod_fails_its_index_past_the_limit_or_on_a_fail_index_rule() -> None:
    assert not fails_its_index(None, 1, failed(0))  # the first failure of the index, of one allowed
    assert fails_its_index(None, 1, failed(0, counts=(1, 0)))
    assert fails_its_index(None, 0, failed(0))
    policy = {"rules": [rule("FailIndex", 42), rule("Ignore", 3)]}
    assert fails_its_index(policy, 5, failed(0, 42))
    assert not fails_its_index(policy, 0, failed(0, 3, counts=(4, 0)))  # ignored: never fails the index


def test_a_replacement_carries_the_counts_of_the_pod_it_replaces() -> None:
    policy = {"rules": [rule("Ignore", 3)]}
    assert failure_annotations(policy, None) == {FAILURE_COUNT: "0"}
    assert failure_annotations(policy, failed(0, 1, counts=(1, 0))) == {FAILURE_COUNT: "2"}
    assert failure_annotations(policy, failed(0, 3, counts=(1, 0))) == {FAILURE_COUNT: "1", IGNORED_FAILURE_COUNT: "1"}
    first, second = failed(0, counts=(0, 0), finished="2025-01-01T00:00:01Z"), failed(0, counts=(1, 0))
    late = failed(2, finished="2025-01-01T00:00:09Z")
    early = failed(2, finished="2025-01-01T00:00:02Z")
    replaced = pods_being_replaced([second, first, early, late, failed(1), failed(7)], settled={1}, completions=3)
    assert replaced == {0: second, 2: late}  # the most failures, then the last to end; none past completions


def test_a_success_policy_is_met_by_its_first_rule_that_holds() -> None:
    policy = {"rules": [{"succeededIndexes": "0-3"}, {"succeededIndexes": "4-9", "succeededCount": 2},
                        {"succeededCount": 5}]}
    assert success_policy_met(policy, 10, set()) is None
    assert success_policy_met(policy, 10, {0, 1, 2}) is None
    assert success_policy_met(policy, 10, {0, 1, 2, 3}) == "Matched rules at index 0"
    assert success_policy_met(policy, 10, {5, 9}) == "Matched rules at index 1"
    assert success_policy_met(policy, 10, {0, 1, 2, 4, 5}) == "Matched rules at index 1"
    assert success_policy_met(policy, 10, {0, 1, 2, 4}) is None
    assert success_policy_met({"rules": [{"succeededCount": 2}]}, 10, {0, 7}) == "Matched rules at index 0"
    assert success_policy_met(None, 10, {0}) is None
