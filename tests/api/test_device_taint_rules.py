"""resource.k8s.io/v1 DeviceTaintRules (registry/devicetaintrules.py): served cluster-scoped
with a status subresource, validated in upstream's words and field paths, the taint's
``timeAdded`` defaulted and moved with its effect, ``metadata.generation`` stepped by spec
changes only, discovered and described in OpenAPI."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.devicetaintrules import selects
from tests.api.test_dra_validation import LABEL_HINT, SUBDOMAIN_HINT

RULES = resource_path("resource.k8s.io", "v1", "devicetaintrules", None)


def rule(name: str, taint: dict[str, Any] | None = None, **selector: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "deviceSelector": selector, "taint": taint or {"key": "example.com/unhealthy", "effect": "NoSchedule"}}}


def causes(e: pytest.ExceptionInfo[ApiError]) -> list[tuple[str, str, str]]:
    assert e.value.code == 422, e.value.status
    return [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


async def test_a_rule_is_stored_with_its_taint_stamped_generation_one_and_an_empty_status(client: Client) -> None:
    sent = rule("gpu-0", driver="gpu.example.com", pool="node-1", device="gpu-0")
    sent["status"] = {"conditions": [{"type": "EvictionInProgress", "status": "True", "reason": "Forged",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    created = await client.create(RULES, sent)
    assert created["kind"] == "DeviceTaintRule" and created["apiVersion"] == "resource.k8s.io/v1"
    assert "namespace" not in created["metadata"] and created["metadata"]["generation"] == 1
    assert created["spec"]["taint"]["timeAdded"].endswith("Z")  # SetDefaults_DeviceTaint
    assert created["status"] == {}  # the status is the controller's (PrepareForCreate)
    assert [r["metadata"]["name"] for r in (await client.list(RULES))["items"]] == ["gpu-0"]


async def test_a_bad_rule_is_refused_with_upstreams_field_paths(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(RULES, rule("bad", {"key": "not a key!", "value": "-x-", "effect": "PreferNoSchedule"},
                                        driver="Not A Driver", pool="a//b", device="GPU_0"))
    assert causes(e) == [
        ("FieldValueInvalid", "spec.deviceSelector.driver", f'Invalid value: "Not A Driver": {SUBDOMAIN_HINT}'),
        ("FieldValueInvalid", "spec.deviceSelector.pool", f'Invalid value: "": {SUBDOMAIN_HINT}'),
        ("FieldValueInvalid", "spec.deviceSelector.device", f'Invalid value: "GPU_0": {LABEL_HINT}'),
        ("FieldValueInvalid", "spec.taint.key",
         "Invalid value: \"not a key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and "
         "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
         "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("FieldValueInvalid", "spec.taint.value",
         "Invalid value: \"-x-\": a valid label must be an empty string or consist of alphanumeric characters, "
         "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
         "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        ("FieldValueNotSupported", "spec.taint.effect",
         'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"')]
    with pytest.raises(ApiError) as e:
        await client.create(RULES, {"metadata": {"name": "empty"}, "spec": {}})
    assert causes(e) == [("FieldValueRequired", "spec.taint", "Required value")]  # (the schema's required field)
    with pytest.raises(ApiError) as e:
        await client.create(RULES, {"metadata": {"name": "empty"}, "spec": {"taint": {"key": ""}}})
    assert causes(e) == [("FieldValueRequired", "spec.taint.effect", "Required value")]
    with pytest.raises(ApiError) as e:
        await client.create(RULES, rule("Bad_Name"))
    assert e.value.code == 422 and causes(e)[0][1] == "metadata.name"
    # the None effect of 1.35+ (a taint that only informs), and a selector-less rule, are fine
    assert (await client.create(RULES, {"metadata": {"name": "none"}, "spec": {"taint": {
        "key": "example.com/health", "value": "degraded", "effect": "None"}}}))["spec"]["taint"]["effect"] == "None"


async def test_a_spec_change_steps_the_generation_and_an_effect_change_moves_time_added(client: Client) -> None:
    created = await client.create(RULES, rule("r", {"key": "k", "effect": "NoSchedule",
                                                    "timeAdded": "2020-01-01T00:00:00Z"}, driver="gpu.example.com"))
    assert created["spec"]["taint"]["timeAdded"] == "2020-01-01T00:00:00Z"  # a client's time is kept
    labelled = copy.deepcopy(created)
    labelled["metadata"]["labels"] = {"team": "ml"}
    labelled = await client.update(f"{RULES}/r", labelled)
    assert labelled["metadata"]["generation"] == 1  # metadata is no new generation
    patched = await client.patch(f"{RULES}/r", {"spec": {"taint": {"effect": "NoExecute"}}})
    assert patched["metadata"]["generation"] == 2
    assert patched["spec"]["taint"]["timeAdded"] > "2020-01-01T00:00:00Z"  # since when NoExecute holds
    moved = await client.patch(f"{RULES}/r", {"spec": {"taint": {"effect": "NoSchedule",
                                                                 "timeAdded": "2021-01-01T00:00:00Z"}}})
    assert moved["spec"]["taint"]["timeAdded"] == "2021-01-01T00:00:00Z"  # the client's own time wins
    with pytest.raises(ApiError) as e:
        await client.patch(f"{RULES}/r", {"spec": {"deviceSelector": {"device": "Bad"}}})
    assert causes(e) == [("FieldValueInvalid", "spec.deviceSelector.device", f'Invalid value: "Bad": {LABEL_HINT}')]


async def test_the_status_is_written_through_its_subresource_only_and_its_conditions_checked(
        client: Client) -> None:
    await client.create(RULES, rule("r"))
    condition = {"type": "EvictionInProgress", "status": "False", "reason": "NotStarted", "message": "",
                 "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    written = await client.patch(f"{RULES}/r/status", {"status": {"conditions": [condition]}})
    assert written["status"]["conditions"] == [condition] and written["metadata"]["generation"] == 1
    ignored = await client.patch(f"{RULES}/r", {"status": {"conditions": []}, "metadata": {"labels": {"a": "b"}}})
    assert ignored["status"]["conditions"] == [condition]  # the main resource leaves the status alone
    many = [{**condition, "type": f"T{i}"} for i in range(9)]
    with pytest.raises(ApiError) as e:
        await client.patch(f"{RULES}/r/status", {"status": {"conditions": many}})
    assert causes(e) == [("FieldValueTooMany", "status.conditions", "Too many: 9: must have at most 8 items")]
    with pytest.raises(ApiError) as e:
        await client.patch(f"{RULES}/r/status", {"status": {"conditions": [{**condition, "status": "Maybe"}]}})
    assert causes(e) == [("FieldValueNotSupported", "status.conditions[0].status",
                          'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"')]


async def test_discovery_and_openapi_describe_the_type(client: Client) -> None:
    resources = (await client.get("/apis/resource.k8s.io/v1"))["resources"]
    found = {r["name"]: r for r in resources}
    assert found["devicetaintrules"]["kind"] == "DeviceTaintRule"
    assert found["devicetaintrules"]["namespaced"] is False
    assert "devicetaintrules/status" in found
    document = await client.get("/openapi/v3/apis/resource.k8s.io/v1")
    assert "/apis/resource.k8s.io/v1/devicetaintrules/{name}/status" in document["paths"]
    assert "io.k8s.api.resource.v1.DeviceTaintRule" in document["components"]["schemas"]


def test_a_selector_selects_the_devices_whose_fields_it_names() -> None:
    def r(selector: dict[str, str] | None) -> dict[str, Any]:
        return {"spec": {"deviceSelector": selector} if selector is not None else {}}

    assert not selects(r(None), "d", "p", "x")  # no selector: no device
    assert selects(r({}), "d", "p", "x")  # the empty one: every device
    assert selects(r({"driver": "d", "device": "x"}), "d", "p", "x")
    assert not selects(r({"driver": "d", "pool": "q"}), "d", "p", "x")
