"""Webhook configurations (registry/webhooks.py): upstream's v1 defaults and validation."""

from __future__ import annotations

from typing import Any

from controlplane.registry.webhooks import prepare_webhook_configuration


def config(kind: str = "ValidatingWebhookConfiguration", **hook: Any) -> dict[str, Any]:
    w = {"name": "a.b.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "clientConfig": {"service": {"namespace": "ns", "name": "svc"}}, **hook}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "c"},
            "webhooks": [w]}


def fields(causes: list[dict[str, str]]) -> list[str]:
    return [c["field"] for c in causes]


def test_defaults() -> None:
    c = config("MutatingWebhookConfiguration", rules=[{"operations": ["CREATE"]}])
    assert prepare_webhook_configuration(c, None) == []
    w = c["webhooks"][0]
    assert (w["failurePolicy"], w["matchPolicy"], w["timeoutSeconds"], w["reinvocationPolicy"],
            w["namespaceSelector"], w["objectSelector"], w["rules"][0]["scope"],
            w["clientConfig"]["service"]["port"]) == ("Fail", "Equivalent", 10, "Never", {}, {}, "*", 443)
    v = config()
    prepare_webhook_configuration(v, None)
    assert "reinvocationPolicy" not in v["webhooks"][0]
    assert prepare_webhook_configuration({"kind": "ValidatingWebhookConfiguration"}, None) == []  # no webhooks


def test_validation() -> None:
    assert fields(prepare_webhook_configuration(config(name="two.parts"), None)) == ["webhooks[0].name"]
    c = config()
    c["webhooks"].append(dict(c["webhooks"][0]))
    assert fields(prepare_webhook_configuration(c, None)) == ["webhooks[1].name"]  # duplicate
    both = config(clientConfig={"url": "https://x", "service": {"namespace": "n", "name": "s"}})
    assert fields(prepare_webhook_configuration(both, None)) == ["webhooks[0].clientConfig"]
    nameless = config(clientConfig={"service": {"namespace": "n"}})
    assert fields(prepare_webhook_configuration(nameless, None)) == ["webhooks[0].clientConfig.service.name"]
    assert fields(prepare_webhook_configuration(config(sideEffects=None), None)) == ["webhooks[0].sideEffects"]
    assert fields(prepare_webhook_configuration(config(timeoutSeconds=31), None)) == ["webhooks[0].timeoutSeconds"]
    assert fields(prepare_webhook_configuration(config(failurePolicy="Maybe"), None)) == \
        ["webhooks[0].failurePolicy"]
    assert fields(prepare_webhook_configuration(config(admissionReviewVersions=[]), None)) == \
        ["webhooks[0].admissionReviewVersions"]


def test_match_conditions_are_named_once_and_compile() -> None:
    good = {"name": "labelled", "expression": "has(object.metadata.labels)"}
    assert prepare_webhook_configuration(config(matchConditions=[good]), None) == []
    causes = prepare_webhook_configuration(config(matchConditions=[
        good, {"name": "labelled", "expression": "true"}, {"expression": "object.x >"}, {"name": "empty"}]), None)
    assert fields(causes) == ["webhooks[0].matchConditions[1].name", "webhooks[0].matchConditions[2].name",
                              "webhooks[0].matchConditions[2].expression", "webhooks[0].matchConditions[3].expression"]
    assert causes[0]["message"] == 'Duplicate value: "labelled"'
    assert causes[2]["message"].startswith('Invalid value: "object.x >": compilation failed: ')
    many = [{"name": f"c{i}", "expression": "true"} for i in range(65)]
    assert fields(prepare_webhook_configuration(config(matchConditions=many), None)) == ["webhooks[0].matchConditions"]
