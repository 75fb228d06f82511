"""Requirements algebra, quantities, budgets and NodePool parsing: pure and fast."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.autoscaler.budgets import Cron, active, allowed
from controlplane.autoscaler.nodepool import NodePoolView, parse_duration, template_hash
from controlplane.autoscaler.requirements import Requirements, pod_requirement_terms, tolerates
from controlplane.autoscaler.resources import format_quantity, parse_quantity, pod_requests


def reqs(*exprs: tuple[str, str, list[str]]) -> Requirements:
    return Requirements.parse([{"key": k, "operator": op, "values": v} for k, op, v in exprs])


def test_in_and_notin_intersect_to_the_difference() -> None:
    r = reqs(("zone", "In", ["a", "b", "c"])).intersect(reqs(("zone", "NotIn", ["b"])))
    assert r["zone"].values == {"a", "c"} and not r["zone"].complement


def test_disjoint_in_sets_are_incompatible() -> None:
    assert not reqs(("zone", "In", ["a"])).compatible(reqs(("zone", "In", ["b"])))
    assert reqs(("zone", "In", ["a", "b"])).compatible(reqs(("zone", "In", ["b"])))


def test_a_key_the_node_side_lacks_is_compatible_only_for_notin_and_doesnotexist() -> None:
    node = reqs(("zone", "In", ["a"]))
    assert not node.compatible(reqs(("gpu", "In", ["yes"])))
    assert not node.compatible(reqs(("gpu", "Exists", [])))
    assert node.compatible(reqs(("gpu", "NotIn", ["yes"])))
    assert node.compatible(reqs(("gpu", "DoesNotExist", [])))


def test_doesnotexist_against_a_defined_label_is_incompatible() -> None:
    assert not Requirements.from_labels({"gpu": "yes"}).compatible(reqs(("gpu", "DoesNotExist", [])))


def test_gt_and_lt_bound_integer_values() -> None:
    node = Requirements.from_labels({"generation": "5"})
    assert node.compatible(reqs(("generation", "Gt", ["4"])))
    assert not node.compatible(reqs(("generation", "Gt", ["5"])))
    assert node.compatible(reqs(("generation", "Lt", ["6"])))
    both = reqs(("generation", "Gt", ["4"]), ("generation", "Lt", ["5"]))
    assert not both["generation"].any()


def test_unknown_operator_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        reqs(("zone", "Near", ["a"]))


def test_pod_terms_combine_node_selector_with_each_affinity_term() -> None:
    pod = {"spec": {"nodeSelector": {"arch": "arm64"}, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        ]}}}}}
    terms = pod_requirement_terms(pod)
    assert [sorted(t) for t in terms] == [["arch", "zone"], ["arch", "zone"]]
    assert terms[1]["zone"].values == {"b"}


def test_labels_pins_single_values() -> None:
    r = reqs(("zone", "In", ["a"]), ("type", "In", ["x", "y"]), ("os", "Exists", []))
    assert r.labels() == {"zone": "a"}


def test_tolerations() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates([{"key": "nvidia.com/gpu", "operator": "Exists"}], taint)
    assert tolerates([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "value": "false"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([], taint)


def test_quantities() -> None:
    assert parse_quantity("100m") == 100
    assert parse_quantity("1.5") == 1500
    assert parse_quantity("2Gi") == 2 * 2**30 * 1000
    assert parse_quantity("1e3") == 1_000_000
    assert parse_quantity(3) == 3000
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity("lots")
    assert format_quantity("memory", parse_quantity("64Gi")) == "64Gi"
    assert format_quantity("cpu", 250) == "250m"


def test_pod_requests_add_containers_take_init_max_and_count_a_pod() -> None:
    pod = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                       {"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
    }}
    r = pod_requests(pod)
    assert r["cpu"] == 4000 and r["memory"] == parse_quantity("1Gi")
    assert r["nvidia.com/gpu"] == 1000 and r["pods"] == 1000


def test_pod_requests_take_the_pod_level_requests_for_what_they_name() -> None:
    """PodLevelResources: a node for the pod must hold its pod-level 6 cpus, not its
    containers' 1 (which a smaller type would): the simulation asks what the scheduler will."""
    pod = {"spec": {
        "resources": {"requests": {"cpu": "6"}, "limits": {"memory": "8Gi"}},
        "overhead": {"cpu": "100m"},
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }}
    r = pod_requests(pod)
    assert r["cpu"] == 6100 and r["memory"] == parse_quantity("1Gi") and r["pods"] == 1000


# -- budgets ---------------------------------------------------------------------------------------
def test_percent_budgets_round_up() -> None:
    assert allowed([{"nodes": "10%"}], nodes=25, reason="Empty") == 3
    assert allowed([{"nodes": "10%"}], nodes=5, reason="Empty") == 1
    assert allowed([{"nodes": "0"}], nodes=5, reason="Empty") == 0


def test_most_restrictive_budget_for_the_reason_wins() -> None:
    budgets: list[dict[str, object]] = [{"nodes": "50%"}, {"nodes": "1", "reasons": ["Drifted"]}]
    assert allowed(budgets, nodes=10, reason="Drifted") == 1
    assert allowed(budgets, nodes=10, reason="Empty") == 5


def test_scheduled_budget_is_active_only_within_its_duration() -> None:
    budget = {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}
    monday_10 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)   # a Monday
    monday_18 = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    sunday_10 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert active(budget, monday_10)
    assert not active(budget, monday_18)
    assert not active(budget, sunday_10)
    assert allowed([{"nodes": "100%"}, budget], nodes=4, reason="Empty", now=monday_10) == 0
    assert allowed([{"nodes": "100%"}, budget], nodes=4, reason="Empty", now=monday_18) == 4
    # Karpenter's IsActive: the next hit after now - duration is not after now: [09:00, 17:00)
    assert active(budget, datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC))
    assert active(budget, datetime(2026, 11, 30, 16, 59, 59, tzinfo=UTC))
    assert not active(budget, datetime(2026, 11, 30, 17, 0, 0, tzinfo=UTC))
    assert not active(budget, datetime(2026, 11, 30, 17, 0, 30, tzinfo=UTC))
    assert not active(budget, datetime(2026, 11, 30, 8, 59, 59, tzinfo=UTC))


def test_cron_fields() -> None:
    c = Cron("*/15 0-6 1,15 * *")
    assert c.matches(datetime(2026, 1, 15, 3, 45, tzinfo=UTC))
    assert not c.matches(datetime(2026, 1, 15, 3, 46, tzinfo=UTC))
    assert not c.matches(datetime(2026, 1, 16, 3, 45, tzinfo=UTC))
    assert Cron("@hourly").matches(datetime(2026, 1, 1, 5, 0, tzinfo=UTC))
    with pytest.raises(ValueError, match="outside"):
        Cron("61 * * * *")


def test_unreadable_budget_fails_closed() -> None:
    assert allowed([{"nodes": "10%", "schedule": "not a cron", "duration": "1h"}], 10, "Empty") == 0


# -- NodePools ---------------------------------------------------------------------------------------
def nodepool(**template_spec: object) -> dict:
    return {"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "requirements": [], **template_spec}}}}


def test_nodepool_defaults() -> None:
    v = NodePoolView.parse(nodepool())
    assert v.requirements["karpenter.sh/capacity-type"].values == {"on-demand"}
    assert v.requirements["karpenter.sh/nodepool"].values == {"default"}
    assert v.consolidation_policy == "WhenEmptyOrUnderutilized" and v.consolidate_after == 0.0
    assert v.budgets == ({"nodes": "10%"},) and v.limits is None


def test_template_hash_ignores_requirements_but_not_taints() -> None:
    base = template_hash(nodepool())
    assert template_hash(nodepool(requirements=[{"key": "a", "operator": "Exists"}])) == base
    assert template_hash(nodepool(taints=[{"key": "k", "effect": "NoSchedule"}])) != base


def test_durations() -> None:
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("30s") == 30.0
    assert parse_duration("Never") is None
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


# -- drift ---------------------------------------------------------------------------------------------
def test_drift_by_hash_and_by_requirements() -> None:
    from controlplane.autoscaler.disruption import drift_reason
    from controlplane.autoscaler.nodepool import HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION

    pool = NodePoolView.parse(nodepool(requirements=[
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]))

    def claim(hash_: str, version: str = HASH_VERSION, zone: str = "zone-a") -> dict:
        return {"metadata": {"annotations": {HASH_ANNOTATION: hash_, HASH_VERSION_ANNOTATION: version},
                             "labels": {"topology.kubernetes.io/zone": zone,
                                        "karpenter.sh/capacity-type": "on-demand"}}}

    assert drift_reason(claim(pool.hash), pool) is None
    assert drift_reason(claim("other"), pool) == "NodePoolDrifted"
    assert drift_reason(claim("other", version="v2"), pool) is None  # another hash version: re-stamped, not drift
    assert drift_reason(claim(pool.hash, zone="zone-b"), pool) == "RequirementsDrifted"

    # a requirement added since the claim launched, on a label it does not have: drifted (Karpenter's
    # Compatible, "does not have known values"); not for NotIn or DoesNotExist, which need no label
    added = NodePoolView.parse(nodepool(requirements=[
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]},
        {"key": "example.com/team", "operator": "In", "values": ["ml"]}]))
    assert added.hash == pool.hash  # requirements are not in the template hash
    assert drift_reason(claim(pool.hash), added) == "RequirementsDrifted"
    for operator in ("NotIn", "DoesNotExist"):
        loose = NodePoolView.parse(nodepool(requirements=[
            {"key": "example.com/team", "operator": operator, **({"values": ["ml"]} if operator == "NotIn" else {})}]))
        assert drift_reason(claim(loose.hash), loose) is None
    # the claim launched with it (its spec names the key), the label left out: not drift
    with_spec = claim(pool.hash)
    with_spec["spec"] = {"requirements": [{"key": "example.com/team", "operator": "In", "values": ["ml"]}]}
    assert drift_reason(with_spec, added) is None


def test_any_value_is_a_label_value_the_requirement_allows() -> None:
    # Karpenter's Requirement.Any: what a NodeClaim's custom label is set to
    assert reqs(("team", "In", ["z", "x"]))["team"].any_value() == "x"
    assert reqs(("team", "DoesNotExist", []))["team"].any_value() is None
    for _ in range(20):
        gen = reqs(("gen", "Gt", ["2"])).intersect(reqs(("gen", "Lt", ["6"])))["gen"]
        assert gen.any_value() in ("3", "4", "5")
        assert reqs(("any", "Exists", []))["any"].any_value() is not None
        assert reqs(("n", "NotIn", ["0"])).intersect(reqs(("n", "Lt", ["2"])))["n"].any_value() == "1"
    assert reqs(("gen", "Gt", ["2"])).intersect(reqs(("gen", "Lt", ["3"])))["gen"].any_value() is None


def test_requirements_to_api_keep_both_bounds_and_the_excluded_values() -> None:
    r = reqs(("gen", "Gt", ["2"]), ("gen", "Lt", ["9"]), ("gen", "NotIn", ["5"]))
    assert sorted(r.to_api(), key=lambda e: e["operator"]) == [
        {"key": "gen", "operator": "Gt", "values": ["2"]}, {"key": "gen", "operator": "Lt", "values": ["9"]},
        {"key": "gen", "operator": "NotIn", "values": ["5"]}]
    assert Requirements.parse(r.to_api())["gen"] == r["gen"]


def test_a_nodeclaim_copies_only_labels_outside_karpenters_restricted_domains() -> None:
    from controlplane.autoscaler.labels import custom_label

    for key in ("team", "example.com/team", "node-restriction.kubernetes.io/team", "node.kubernetes.io/pool",
                "kops.k8s.io/ig"):
        assert custom_label(key), key
    for key in ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone", "beta.kubernetes.io/arch",
                "kubernetes.io/foo", "example.k8s.io/x", "karpenter.sh/nodepool", "x.karpenter.sh/y"):
        assert not custom_label(key), key


def test_gte_and_lte_are_inclusive_bounds() -> None:
    """Karpenter's Gte and Lte (its CRD's operators): Gt n-1 and Lt n+1 on integer values."""
    r = Requirements.parse([{"key": "cpu", "operator": "Gte", "values": ["4"]},
                            {"key": "cpu", "operator": "Lte", "values": ["8"]}])["cpu"]
    assert [v for v in ("3", "4", "8", "9") if r.allows(v)] == ["4", "8"]


def test_gte_zero_is_written_as_the_crds_take_it() -> None:
    """``Gte 0`` is ``Gt -1`` within, but the NodePool and NodeClaim CRDs refuse a negative value:
    it is written back as ``Gte 0``, and reads the same."""
    r = Requirements.parse([{"key": "gen", "operator": "Gte", "values": ["0"]}])
    assert r.to_api() == [{"key": "gen", "operator": "Gte", "values": ["0"]}]
    assert Requirements.parse(r.to_api()) == r
    assert [v for v in ("-1", "0", "7") if r["gen"].allows(v)] == ["0", "7"]


def test_requirements_are_described_as_karpenters_messages_print_them() -> None:
    reqs = Requirements.parse([
        {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Gt", "values": ["2"], "minValues": 3},
        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["zone-c"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [f"t{i}" for i in range(7)]},
        {"key": "example.com/gpu", "operator": "DoesNotExist"}])
    assert reqs.describe() == (
        "example.com/gpu DoesNotExist, karpenter.kwok.sh/instance-cpu Exists >2 minValues 3, "
        "node.kubernetes.io/instance-type In [t0 t1 t2 t3 t4 and 2 others], topology.kubernetes.io/zone NotIn [zone-c]")
    pod = Requirements.parse([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-c"]}])
    assert reqs.conflict(pod) == ("key topology.kubernetes.io/zone, topology.kubernetes.io/zone In [zone-c] "
                                  "not in topology.kubernetes.io/zone NotIn [zone-c]")
    assert reqs.conflict(Requirements()) is None and not reqs.intersects(pod)
