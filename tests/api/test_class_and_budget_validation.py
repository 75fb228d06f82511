"""PodDisruptionBudgets, Leases, RuntimeClasses, PriorityClasses and ServiceAccounts refused with
upstream's 422s, in its words: ``ValidatePodDisruptionBudget`` and its status update,
``ValidateLeaseSpec``, ``ValidateRuntimeClass`` (and its update), ``ValidatePriorityClass`` (and
its update), ``ValidateServiceAccount`` (its metadata only)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

PDBS = resource_path("policy", "v1", "poddisruptionbudgets", "default")
LEASES = resource_path("coordination.k8s.io", "v1", "leases", "default")
RUNTIME_CLASSES = resource_path("node.k8s.io", "v1", "runtimeclasses")
PRIORITY_CLASSES = resource_path("scheduling.k8s.io", "v1", "priorityclasses")
PERCENT_HINT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
                "regex used for validation is '[0-9]+%')")


async def causes_of(c: Client, path: str, body: dict[str, Any], update: bool = False) -> list[tuple[str, str, str]]:
    """The (reason, field, message) of each cause of the 422 a write of ``body`` gets."""
    with pytest.raises(ApiError) as e:
        await (c.update(path, body) if update else c.create(path, body))
    assert (e.value.code, e.value.reason) == (422, "Invalid"), e.value.message
    return [(x["reason"], x["field"], x["message"]) for x in e.value.status["details"]["causes"]]


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


# -- PodDisruptionBudgets ------------------------------------------------------------------------
async def test_a_budgets_bounds_are_counts_or_percents(client: Client) -> None:
    assert await causes_of(client, PDBS, budget("b", minAvailable="abc")) == [
        ("FieldValueInvalid", "spec.minAvailable", f'Invalid value: "abc": {PERCENT_HINT}')]
    assert await causes_of(client, PDBS, budget("b", minAvailable="1e9999")) == [
        ("FieldValueInvalid", "spec.minAvailable", f'Invalid value: "1e9999": {PERCENT_HINT}')]
    assert await causes_of(client, PDBS, budget("b", minAvailable=-1)) == [
        ("FieldValueInvalid", "spec.minAvailable", "Invalid value: -1: must be greater than or equal to 0")]
    assert await causes_of(client, PDBS, budget("b", maxUnavailable="150%")) == [
        ("FieldValueInvalid", "spec.maxUnavailable", 'Invalid value: "150%": must not be greater than 100%')]
    made = await client.create(PDBS, budget("fine", minAvailable="100%"))
    assert made["spec"]["minAvailable"] == "100%"


async def test_a_budget_has_one_bound_a_valid_selector_and_a_known_policy(client: Client) -> None:
    both = budget("b", minAvailable=1, maxUnavailable="10%")
    assert await causes_of(client, PDBS, both) == [
        ("FieldValueInvalid", "spec",
         'Invalid value: {"MinAvailable":1,"Selector":{"matchLabels":{"app":"web"}},"MaxUnavailable":"10%",'
         '"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable cannot be both set')]
    selector = {"matchLabels": {"app": "bad value!"}, "matchExpressions": [{"key": "tier", "operator": "In"}]}
    bad = {"metadata": {"name": "b"}, "spec": {"selector": selector, "unhealthyPodEvictionPolicy": "Bogus"}}
    assert await causes_of(client, PDBS, bad) == [
        ("FieldValueInvalid", "spec.selector.matchLabels",
         'Invalid value: "bad value!": a valid label must be an empty string or consist of alphanumeric characters, '
         "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
         "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        ("FieldValueRequired", "spec.selector.matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ("FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy",
         'Unsupported value: "Bogus": supported values: "AlwaysAllow", "IfHealthyBudget"'),
    ]


async def test_a_budgets_status_counts_are_not_negative(client: Client) -> None:
    made = await client.create(PDBS, budget("b", minAvailable=1))
    status = {"disruptionsAllowed": -1, "currentHealthy": 0, "desiredHealthy": 1, "expectedPods": -2,
              "conditions": [{"type": "DisruptionAllowed", "status": "Maybe", "reason": "no good",
                              "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]}
    body = {**made, "status": status}
    assert await causes_of(client, f"{PDBS}/b/status", body, update=True) == [
        ("FieldValueNotSupported", "status.conditions[0].status",
         'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"'),
        ("FieldValueInvalid", "status.conditions[0].reason",
         "Invalid value: \"no good\": a condition reason must start with alphabetic character, optionally followed "
         "by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. "
         "'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for "
         "validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"),
        ("FieldValueInvalid", "status.disruptionsAllowed", "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueInvalid", "status.expectedPods", "Invalid value: -2: must be greater than or equal to 0"),
    ]
    status.update(disruptionsAllowed=0, expectedPods=1)
    status["conditions"][0].update(status="False", reason="InsufficientPods")  # type: ignore[index]
    written = await client.update(f"{PDBS}/b/status", {**made, "status": status})
    assert written["status"]["expectedPods"] == 1


# -- Leases --------------------------------------------------------------------------------------
async def test_a_leases_duration_and_transitions(client: Client) -> None:
    lease = {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": -3, "leaseTransitions": -1}}
    assert await causes_of(client, LEASES, lease) == [
        ("FieldValueInvalid", "spec.leaseDurationSeconds", "Invalid value: -3: must be greater than 0"),
        ("FieldValueInvalid", "spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0"),
    ]
    made = await client.create(LEASES, {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 40}})
    made["spec"]["leaseDurationSeconds"] = 0  # an update is checked as a create
    assert await causes_of(client, f"{LEASES}/l", made, update=True) == [
        ("FieldValueInvalid", "spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0")]


async def test_a_leases_coordinated_election_fields(client: Client) -> None:
    lease = {"metadata": {"name": "l"}, "spec": {"strategy": "Youngest"}}
    assert await causes_of(client, LEASES, lease) == [  # upstream's path names the field twice
        ("FieldValueNotSupported", "spec.strategy.strategy",
         'Unsupported value: "Youngest": supported values: "OldestEmulationVersion"')]
    lease["spec"] = {"preferredHolder": "me"}
    assert await causes_of(client, LEASES, lease) == [
        ("FieldValueForbidden", "spec.preferredHolder", "Forbidden: may only be specified if `strategy` is defined")]
    lease["spec"] = {"strategy": "example.com/newest", "preferredHolder": "me"}
    assert (await client.create(LEASES, lease))["spec"]["strategy"] == "example.com/newest"


# -- RuntimeClasses ------------------------------------------------------------------------------
async def test_a_runtime_class_handler_is_a_dns_label_that_never_changes(client: Client) -> None:
    hint = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
            "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    assert await causes_of(client, RUNTIME_CLASSES, {"metadata": {"name": "rc"}, "handler": "Not Valid!"}) == [
        ("FieldValueInvalid", "handler", f'Invalid value: "Not Valid!": {hint}')]
    made = await client.create(RUNTIME_CLASSES, {"metadata": {"name": "rc"}, "handler": "runc"})
    made["handler"] = "kata"
    assert await causes_of(client, f"{RUNTIME_CLASSES}/rc", made, update=True) == [
        ("FieldValueInvalid", "handler", 'Invalid value: "kata": field is immutable')]


async def test_a_runtime_class_overhead_and_scheduling(client: Client) -> None:
    rc = {"metadata": {"name": "rc"}, "handler": "runc",
          "overhead": {"podFixed": {"cpu": "-100m", "gpu": "1", "hugepages-2Mi": "2Mi"}},
          "scheduling": {"nodeSelector": {"bad key!": "x"},
                         "tolerations": [{"key": "k", "operator": "Sometimes", "effect": "NoSchedule"}]}}
    assert await causes_of(client, RUNTIME_CLASSES, rc) == [
        ("FieldValueInvalid", "overhead.limits[cpu]", 'Invalid value: "-100m": must be greater than or equal to 0'),
        ("FieldValueInvalid", "overhead.limits[gpu]",
         'Invalid value: "gpu": must be a standard resource for containers'),
        ("FieldValueInvalid", "scheduling.nodeSelector",
         "Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must "
         "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
         "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("FieldValueNotSupported", "scheduling.tolerations[0].operator",
         'Unsupported value: "Sometimes": supported values: "Equal", "Exists"'),
    ]
    rc = {"metadata": {"name": "huge"}, "handler": "runc",
          "overhead": {"podFixed": {"hugepages-2Mi": "2Mi", "example.com/fpga": "500m"}}}
    assert await causes_of(client, RUNTIME_CLASSES, rc) == [
        ("FieldValueInvalid", "overhead.limits[example.com/fpga]", 'Invalid value: "500m": must be an integer'),
        ("FieldValueForbidden", "overhead", "Forbidden: HugePages require cpu or memory")]


# -- PriorityClasses -----------------------------------------------------------------------------
async def test_a_users_priority_is_at_most_a_billion(client: Client) -> None:
    assert await causes_of(client, PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 2000000000}) == [
        ("FieldValueForbidden", "value", "Forbidden: maximum allowed value of a user defined priority is 1000000000")]
    made = await client.create(PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000000000})
    assert made["preemptionPolicy"] == "PreemptLowerPriority"
    bad = {"metadata": {"name": "odd"}, "value": 1, "preemptionPolicy": "Sometimes"}
    assert await causes_of(client, PRIORITY_CLASSES, bad) == [
        ("FieldValueNotSupported", "preemptionPolicy",
         'Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"')]


async def test_system_names_are_the_system_classes_only(client: Client) -> None:
    reserved = "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "
    assert await causes_of(client, PRIORITY_CLASSES, {"metadata": {"name": "system-mine"}, "value": 5}) == [
        ("FieldValueForbidden", "metadata.name", reserved + "system-mine is not a known system priority class")]
    node_critical = {"metadata": {"name": "system-node-critical"}, "value": 5}
    assert await causes_of(client, PRIORITY_CLASSES, node_critical) == [
        ("FieldValueForbidden", "metadata.name",
         reserved + "value of system-node-critical PriorityClass must be 2000001000")]


async def test_a_priority_class_keeps_its_value_and_policy(client: Client) -> None:
    made = await client.create(PRIORITY_CLASSES, {"metadata": {"name": "mid"}, "value": 100})
    made.update(value=200, preemptionPolicy="Never")
    assert await causes_of(client, f"{PRIORITY_CLASSES}/mid", made, update=True) == [
        ("FieldValueForbidden", "value", "Forbidden: may not be changed in an update."),
        ("FieldValueInvalid", "preemptionPolicy", 'Invalid value: "Never": field is immutable'),
    ]
    made.update(value=100, preemptionPolicy="PreemptLowerPriority", description="the middle", globalDefault=True)
    assert (await client.update(f"{PRIORITY_CLASSES}/mid", made))["description"] == "the middle"


# -- ServiceAccounts -----------------------------------------------------------------------------
async def test_a_service_account_is_checked_for_its_metadata_only(client: Client) -> None:
    accounts = resource_path("", "v1", "serviceaccounts", "default")
    causes = await causes_of(client, accounts, {"metadata": {"name": "Bad_Name"}})
    assert [(reason, field) for reason, field, _ in causes] == [("FieldValueInvalid", "metadata.name")]
    made = await client.create(accounts, {"metadata": {"name": "robot"}, "automountServiceAccountToken": False,
                                          "secrets": [{"name": "anything"}]})
    assert made["secrets"] == [{"name": "anything"}]
