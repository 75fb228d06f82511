"""The taint eviction controller's decision (controllers/tainteviction.py), as upstream's
GetMatchingTolerations and getMinTolerationTime make it."""

from __future__ import annotations

from controlplane.controllers.tainteviction import min_toleration_seconds, no_execute_taints

MAINT = {"key": "maint", "value": "yes", "effect": "NoExecute"}
GPU = {"key": "gpu", "effect": "NoExecute"}


def test_an_untolerated_taint_evicts_now() -> None:
    assert min_toleration_seconds([MAINT], []) == 0
    assert min_toleration_seconds([MAINT], [{"key": "maint", "value": "no", "effect": "NoExecute"}]) == 0
    assert min_toleration_seconds([MAINT, GPU], [{"key": "maint", "operator": "Exists"}]) == 0


def test_tolerations_without_a_time_keep_the_pod_and_the_shortest_time_wins() -> None:
    assert min_toleration_seconds([MAINT], [{"operator": "Exists"}]) is None
    assert min_toleration_seconds([MAINT, GPU], [
        {"key": "maint", "operator": "Exists", "tolerationSeconds": 60},
        {"key": "gpu", "operator": "Exists", "tolerationSeconds": 30}]) == 30
    # the first toleration matching a taint is the one used, and one without a time is for ever
    assert min_toleration_seconds([MAINT, GPU], [
        {"key": "maint", "operator": "Exists", "tolerationSeconds": 60},
        {"operator": "Exists"}]) == 60
    assert min_toleration_seconds([MAINT], [{"key": "maint", "operator": "Exists", "tolerationSeconds": -5}]) == 0


def test_only_noexecute_taints_count_the_node_lifecycle_ones_too_on_simulated_nodes() -> None:
    taints = [MAINT, {"key": "x", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    assert no_execute_taints({"spec": {"taints": taints}}) == [MAINT, taints[2]]
    # the simulator no longer evicts for its nodes: the controller does, as for any node
    simulated = {"metadata": {"annotations": {"kwok.x-k8s.io/node": "fake"}}, "spec": {"taints": taints}}
    assert no_execute_taints(simulated) == [MAINT, taints[2]]
