"""PodDisruptionBudgets and Leases refused with upstream's 422s, in its words:
``ValidatePodDisruptionBudget`` and its status update, ``ValidateLeaseSpec``."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

PDBS = resource_path("policy", "v1", "poddisruptionbudgets", "default")
LEASES = resource_path("coordination.k8s.io", "v1", "leases", "default")
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
