"""A Job's pods tracked with the finalizer (controllers/jobtracking.py): which pods count as
failed, how the uncounted lists settle into the counts, and which pods a sync records and
lets go, each rule alone; the Job controller's use of them is in test_jobs.py."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.jobtracking import (
    FINALIZER,
    MAX_UNCOUNTED,
    Uncounted,
    has_finalizer,
    is_failed,
    record_finished,
)


def pod(uid: str, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_a_pod_being_deleted_has_failed_unless_only_failed_pods_are_replaced() -> None:
    assert is_failed(pod("a", "Failed"), failed_only=True) and is_failed(pod("a", "Failed"), failed_only=False)
    assert is_failed(pod("b", deleting=True), failed_only=False)  # TerminatingOrFailed: upstream's isPodFailed
    assert not is_failed(pod("b", deleting=True), failed_only=True)  # Failed: its kubelet decides
    assert not is_failed(pod("c", "Succeeded", deleting=True), failed_only=False)
    assert not is_failed(pod("d"), failed_only=False)
    assert has_finalizer(pod("d")) and not has_finalizer({"metadata": {"finalizers": ["example.com/x"]}})


def test_the_uids_whose_pods_lost_the_finalizer_move_into_the_counts() -> None:
    uncounted = Uncounted.of({"uncountedTerminatedPods": {"succeeded": ["s1", "s2"], "failed": ["f1"]}})
    assert len(uncounted) == 3
    assert uncounted.settle({"s2"}) == (1, 1)  # s1 and f1 were let go: counted
    assert (uncounted.succeeded, uncounted.failed) == (["s2"], [])
    assert uncounted.as_status() == {"succeeded": ["s2"], "failed": None}  # (an empty list removed)
    assert Uncounted.of({}).as_status() == {"succeeded": None, "failed": None}


def _record(pods: list[dict[str, Any]], uncounted: Uncounted, **options: Any) -> list[str]:
    settings: dict[str, Any] = {"failed_only": False, "finishing": False, "failing": False, "delayed": set(),
                                "indexed": False, "counts": lambda p: True, **options}
    return [p["metadata"]["uid"] for p in record_finished(pods, uncounted, **settings)]


def test_finished_pods_are_recorded_once_and_let_go_running_ones_kept() -> None:
    uncounted = Uncounted(failed=["f0"])
    pods = [pod("s", "Succeeded"), pod("f", "Failed"), pod("f0", "Failed"), pod("r"), pod("t", deleting=True)]
    assert _record(pods, uncounted) == ["s", "f", "f0", "t"]  # t: terminating, TerminatingOrFailed
    assert (uncounted.succeeded, uncounted.failed) == (["s"], ["f0", "f", "t"])  # f0 not twice
    assert _record(pods, Uncounted(), failed_only=True) == ["s", "f", "f0"]  # t waits for its kubelet


def test_an_ignored_failure_goes_uncounted_and_an_indexed_success_is_not_listed() -> None:
    uncounted = Uncounted()
    assert _record([pod("f", "Failed"), pod("s", "Succeeded")], uncounted, indexed=True,
                   counts=lambda p: False) == ["f", "s"]
    assert len(uncounted) == 0  # (an Indexed Job's success is in completedIndexes)


def test_a_failed_pod_waiting_for_its_index_keeps_the_finalizer() -> None:
    uncounted = Uncounted()
    assert _record([pod("f", "Failed")], uncounted, delayed={"f"}) == []
    assert len(uncounted) == 0  # counted once let go


def test_once_the_job_fails_every_pod_goes_and_counts_as_failed_and_once_it_succeeds_none() -> None:
    pods = [pod("r"), pod("s", "Succeeded")]
    failing = Uncounted()
    assert _record(pods, failing, finishing=True, failing=True) == ["r", "s"]
    assert (failing.succeeded, failing.failed) == (["s"], ["r"])
    succeeding = Uncounted()
    assert _record(pods, succeeding, finishing=True) == ["r", "s"]
    assert (succeeding.succeeded, succeeding.failed) == (["s"], [])


def test_at_most_max_uncounted_uids_are_listed() -> None:
    pods = [pod(f"p{i}", "Failed") for i in range(MAX_UNCOUNTED + 10)]
    uncounted = Uncounted()
    assert len(_record(pods, uncounted)) == MAX_UNCOUNTED and len(uncounted) == MAX_UNCOUNTED
