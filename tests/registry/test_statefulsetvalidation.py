"""A StatefulSet's own spec rules (registry/statefulsetvalidation.py, rollingupdate.py) and
defaults (workloads.py), through the API: upstream's ValidateStatefulSetSpec and
ValidateStatefulSetUpdate, 422 in upstream's words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.immutable import workload_causes, workload_spec_causes
from controlplane.registry.strategies import prepare

SETS = resource_path("apps", "v1", "statefulsets", "default")
ROLLING = "spec.updateStrategy.rollingUpdate"
PERCENT_HINT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
                "'93%', regex used for validation is '[0-9]+%')")


def statefulset(name: str = "s", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}},
                                  "spec": {"containers": [{"name": "c", "image": "db:1"}]}}, **spec}}


async def causes_of(client: Client, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiError) as e:
        await client.create(SETS, body)
    assert e.value.code == 422 and e.value.reason == "Invalid", e.value
    return [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


def rolling(**params: Any) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": params}


async def test_strategies_defaulted_as_upstream(client: Client) -> None:
    plain = await client.create(SETS, statefulset("plain"))
    assert plain["spec"]["updateStrategy"] == rolling(partition=0, maxUnavailable=1)
    # a RollingUpdate type given without parameters keeps none (SetDefaults_StatefulSet)
    bare = await client.create(SETS, statefulset("bare", updateStrategy={"type": "RollingUpdate"}))
    assert bare["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    some = await client.create(SETS, statefulset("some", updateStrategy=rolling(maxUnavailable="50%")))
    assert some["spec"]["updateStrategy"] == rolling(maxUnavailable="50%", partition=0)
    ondelete = await client.create(SETS, statefulset("ondelete", updateStrategy={"type": "OnDelete"}))
    assert ondelete["spec"]["updateStrategy"] == {"type": "OnDelete"}
    claims = await client.create(SETS, statefulset("claims", volumeClaimTemplates=[
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}]))
    template = claims["spec"]["volumeClaimTemplates"][0]
    assert (template["spec"]["volumeMode"], template["status"]) == ("Filesystem", {"phase": "Pending"})
    assert claims["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}


STRATEGIES: list[tuple[dict[str, Any], list[tuple[str, str, str]]]] = [
    (rolling(partition=-1), [("FieldValueInvalid", f"{ROLLING}.partition",
                              "Invalid value: -1: must be greater than or equal to 0")]),
    (rolling(maxUnavailable=0), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable", "Invalid value: 0: cannot be 0")]),
    (rolling(maxUnavailable="0%"), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                     "Invalid value: 0%: cannot be 0")]),
    (rolling(maxUnavailable=-2), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                   "Invalid value: -2: must be greater than or equal to 0")]),
    (rolling(maxUnavailable="101%"), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                       "Invalid value: 101%: must not be greater than 100%")]),
    # a string without % is no percent, and reads as the number it is (IntValue): not zero
    (rolling(maxUnavailable="3"), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                    f"Invalid value: 3: {PERCENT_HINT}")]),
    (rolling(maxUnavailable=""), [
        ("FieldValueInvalid", f"{ROLLING}.maxUnavailable", f"Invalid value: : {PERCENT_HINT}"),
        ("FieldValueInvalid", f"{ROLLING}.maxUnavailable", "Invalid value: : cannot be 0")]),
    ({"type": "OnDelete", "rollingUpdate": {"partition": 2}}, [
        ("FieldValueInvalid", ROLLING, "Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:2, "
                                       "MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy "
                                       "'RollingUpdate'")]),
    ({"type": "Recreate"}, [
        ("FieldValueInvalid", "spec.updateStrategy", 'Invalid value: apps.StatefulSetUpdateStrategy{Type:"Recreate", '
                                                     "RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: "
                                                     "must be 'RollingUpdate' or 'OnDelete'")]),
]


async def test_update_strategy(client: Client) -> None:
    """Each refused strategy with its causes (one server for them all)."""
    for strategy, causes in STRATEGIES:
        assert await causes_of(client, statefulset(updateStrategy=strategy)) == causes, strategy


async def test_policies_and_counts_in_upstreams_order(client: Client) -> None:
    body = statefulset(podManagementPolicy="Serial", persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep"},
                       replicas=-1, minReadySeconds=-2, revisionHistoryLimit=-3, ordinals={"start": -4})
    assert await causes_of(client, body) == [
        ("FieldValueInvalid", "spec.podManagementPolicy",
         "Invalid value: \"Serial\": must be 'OrderedReady' or 'Parallel'"),
        ("FieldValueNotSupported", "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
         'Unsupported value: "Keep": supported values: "Retain", "Delete"'),
        ("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueInvalid", "spec.minReadySeconds", "Invalid value: -2: must be greater than or equal to 0"),
        ("FieldValueInvalid", "spec.revisionHistoryLimit", "Invalid value: -3: must be greater than or equal to 0"),
        ("FieldValueInvalid", "spec.ordinals.start", "Invalid value: -4: must be greater than or equal to 0")]


async def test_a_name_is_a_dns_label(client: Client) -> None:
    """Its pods' hostnames are made of it (ValidateStatefulSetName: NameIsDNSLabel)."""
    assert await causes_of(client, statefulset("db.v1")) == [
        ("FieldValueInvalid", "metadata.name", 'Invalid value: "db.v1": must not contain dots')]
    assert await causes_of(client, statefulset("DB")) == [
        ("FieldValueInvalid", "metadata.name", 'Invalid value: "DB": a lowercase RFC 1123 label must consist of '
                                               "lower case alphanumeric characters or '-', and must start and end "
                                               "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                                               "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]


async def test_an_update_changes_only_what_upstream_lets_it_and_is_validated(client: Client) -> None:
    created = await client.create(SETS, statefulset(serviceName="db"))
    path = f"{SETS}/s"
    for change in ({"replicas": 3}, {"revisionHistoryLimit": 2}, {"minReadySeconds": 5}, {"ordinals": {"start": 2}},
                   {"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}},
                   {"updateStrategy": rolling(partition=1, maxUnavailable="50%")}):
        await client.patch(path, {"spec": change})
    with pytest.raises(ApiError) as e:
        await client.patch(path, {"spec": {"serviceName": "other"}})
    assert e.value.code == 422 and e.value.status["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "spec",
        "message": "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                   "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                   "'minReadySeconds' are forbidden"}]
    with pytest.raises(ApiError) as e:
        await client.patch(path, {"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0}}}})
    assert [c["message"] for c in e.value.status["details"]["causes"]] == ["Invalid value: 0: cannot be 0"]
    assert created["spec"]["serviceName"] == "db"


def test_a_negative_history_limit_already_stored_is_kept_by_an_update() -> None:
    """Refused since 1.33 (kubernetes#129017), but an object stored before keeps it through
    its updates (one stored as an older server stored it)."""
    created = statefulset(revisionHistoryLimit=1)
    prepare("statefulsets", created, None)
    stored = {**created, "spec": {**created["spec"], "revisionHistoryLimit": -1}}
    assert workload_spec_causes("statefulsets", {**stored, "spec": {**stored["spec"], "replicas": 2}}, stored) == []
    assert [c["field"] for c in workload_spec_causes("statefulsets", stored, created)] == ["spec.revisionHistoryLimit"]


def test_claim_templates_stored_before_their_defaults_do_not_fix_an_update() -> None:
    """A StatefulSet stored by a version that did not default its claim templates (no
    volumeMode, no phase) can still be scaled: the stored templates are compared as
    defaulted, as upstream defaults what it reads; changing them is still forbidden."""
    claim: dict[str, Any] = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                    "resources": {"requests": {"storage": "1Gi"}}}}
    stored = statefulset(volumeClaimTemplates=[copy.deepcopy(claim)])
    prepare("statefulsets", stored, None)
    stored["spec"]["volumeClaimTemplates"] = [copy.deepcopy(claim)]  # as the older version stored it
    scaled = statefulset(volumeClaimTemplates=[copy.deepcopy(claim)], replicas=3)
    prepare("statefulsets", scaled, stored)
    assert workload_causes("statefulsets", scaled, stored) == []
    assert stored["spec"]["volumeClaimTemplates"] == [claim]  # the stored object is not changed
    bigger = statefulset(volumeClaimTemplates=[{**claim, "spec": {**claim["spec"], "accessModes": ["ReadWriteMany"]}}])
    prepare("statefulsets", bigger, stored)
    assert [c["field"] for c in workload_causes("statefulsets", bigger, stored)] == ["spec"]
