"""Load shapes as stage tables, and the scenarios' plans built from them."""

from __future__ import annotations

import json

import pytest

from loadtest import scenarios, shapes


def test_users_at_walks_the_table_and_ends() -> None:
    table = (shapes.Stage(10, 5, 1.0, "a"), shapes.Stage(20, 50, 10.0, "b"))
    assert shapes.users_at(table, 0) == (5, 1.0)
    assert shapes.users_at(table, 9.99) == (5, 1.0)
    assert shapes.users_at(table, 10) == (50, 10.0)
    assert shapes.users_at(table, 20) is None
    assert [shapes.phase_at(table, t) for t in (0, 15, 25)] == ["a", "b", "done"]
    assert shapes.total_duration(table) == 20


@pytest.mark.parametrize("name", sorted(shapes.SHAPES))
def test_every_shape_covers_its_duration_and_peaks_at_users(name: str) -> None:
    table = shapes.SHAPES[name](100, 120)
    assert shapes.total_duration(table) == 120
    assert max(s.users for s in table) == 100
    assert all(s.users >= 1 and s.spawn_rate >= 1 for s in table)
    ends = [s.until for s in table]
    assert ends == sorted(ends) and len(set(ends)) == len(ends)


def test_ramp_climbs_in_steps_then_holds_the_peak() -> None:
    table = shapes.ramp(100, 100, steps=4)
    assert [s.users for s in table] == [25, 50, 75, 100, 100]
    assert table[3].until == 75


def test_spike_returns_to_the_base() -> None:
    table = shapes.spike(100, 60)
    assert [s.users for s in table] == [20, 100, 20]
    assert [s.name for s in table] == ["base", "spike", "recovery"]


def test_soak_warms_up_for_a_tenth() -> None:
    table = shapes.soak(10, 600)
    assert table[0].until == 60 and table[-1].users == 10


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_quick_plans_fit_in_a_minute(name: str) -> None:
    plan = scenarios.build(name, quick=True)
    assert plan.duration <= 60
    assert shapes.total_duration(plan.table) <= 60
    # fixed users are started first and held through every stage
    assert all(s.users >= plan.fixed_total for s in plan.table)
    assert set(plan.fixed) | set(plan.weighted) <= set(scenarios.CLASSES)
    env = plan.environment()
    params = json.loads(env["LOADTEST_PARAMS"])
    assert params["_fixed"] == plan.fixed
    assert [tuple(x[:3]) for x in params["_table"]] == [(s.until, s.users, s.spawn_rate) for s in plan.table]


def test_million_is_the_issue_s_cluster() -> None:
    plan = scenarios.build("million")
    assert plan.fixed["KubeletUser"] == 10_000
    assert plan.pods_target == 1_000_000
    assert plan.params["namespaces"] == 1_000
    assert plan.fixed["InformerUser"] == 100 and plan.fixed["OperatorUser"] == 10
    assert plan.until == "quota"
    scaled = scenarios.build("million", scale=0.01)
    assert scaled.fixed["KubeletUser"] == 100 and scaled.pods_target == 10_000


def test_scale_multiplies_million_s_quick_size() -> None:
    # --scale replaced --quick's size: --quick --scale 2 was 20,000 nodes and 40,000 pods, 0.999 was
    # 9,990 nodes, and only 1 (the default) kept the quick run's 20 nodes and 40 pods
    quick = scenarios.build("million", quick=True)
    assert quick.fixed["KubeletUser"] == 20 and quick.pods_target == 40 and quick.params["namespaces"] == 2
    assert quick.description.startswith("20 nodes registered through the API, 40 pods across 2 namespaces")
    doubled = scenarios.build("million", quick=True, scale=2)
    assert doubled.fixed["KubeletUser"] == 40 and doubled.pods_target == 80 and doubled.params["namespaces"] == 4
    near = scenarios.build("million", quick=True, scale=0.999)
    assert near.fixed["KubeletUser"] == 20 and near.pods_target == 40
    small = scenarios.build("million", quick=True, scale=0.01)  # every count at least 1
    assert small.fixed == {"BinderUser": 1, "KubeletUser": 1, "InformerUser": 1, "OperatorUser": 1,
                           "ReplicaSetController": 1}
    assert small.pods_target == 20
    assert scenarios.build("churn", quick=True, scale=2).fixed["KubeletUser"] == 40  # as the others do


def test_the_kubelets_description_counts_the_run_s_kubelets() -> None:
    # the report shows it: a --quick run's 100 kubelets were described as 10,000
    for kwargs, count in (({}, "10,000"), ({"quick": True}, "100"), ({"scale": 0.1}, "1,000")):
        plan = scenarios.build("kubelets", **kwargs)
        assert plan.description.startswith(f"{count} kubelets: ")
        assert f"{plan.fixed['KubeletUser']:,}" == count


def test_overrides_and_unknown_names() -> None:
    plan = scenarios.build("churn", users=7, duration=30, shape="spike")
    assert plan.peak == 7 and plan.duration == 30 and plan.shape == "spike"
    assert max(s.users for s in plan.table) == 7 + plan.fixed_total
    with pytest.raises(KeyError, match="unknown scenario"):
        scenarios.build("nope")
    with pytest.raises(KeyError, match="unknown shape"):
        scenarios.build("churn", shape="zigzag")


def test_pod_rate_paces_only_a_quota_run() -> None:
    plan = scenarios.build("million", scale=0.02, pod_rate=300)
    assert plan.params["pod_rate"] == 300.0 and plan.to_json()["pod_rate"] == 300.0
    assert "pod_rate" not in scenarios.build("million").params  # unpaced by default
    with pytest.raises(KeyError, match="only 'million' does"):
        scenarios.build("churn", pod_rate=10)


def test_a_plan_without_the_binder_says_so() -> None:
    # against a target whose scheduler places the pods (or --binder off), the report's scenario row
    # still read "every client once, small: a binder, ..." of a run that had none
    smoke = scenarios.build("smoke", quick=True)
    assert "a binder, " in smoke.description and smoke.fixed["BinderUser"] == 1 and smoke.binder
    plan = smoke.without_binder()
    assert "binder, " not in plan.description and not plan.binder
    assert plan.description.startswith("every client once, small: 3 kubelets (GPU nodes), ")
    assert plan.description.endswith("; no load-test binder: a scheduler places the pods")
    assert "BinderUser" not in plan.fixed and plan.fixed_total == smoke.fixed_total - 1
    assert [s.users for s in plan.table] == [s.users - 1 for s in smoke.table]
    churn = scenarios.build("churn", quick=True).without_binder()
    assert churn.description.endswith("; no load-test binder: a scheduler places the pods")
    assert churn.without_binder() == churn  # once
