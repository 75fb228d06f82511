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


def test_match_conditions_are_validated_as_upstreams_validate_match_conditions() -> None:
    """Each condition's expression (required, compiling to a bool), then its name (required, a
    qualified name), then the name's uniqueness; at most 64."""
    good = {"name": "labelled", "expression": "has(object.metadata.labels)"}
    assert prepare_webhook_configuration(config(matchConditions=[good]), None) == []
    causes = prepare_webhook_configuration(config(matchConditions=[
        good, {"name": "labelled", "expression": "true"}, {"expression": "object.x >"}, {"name": "empty"},
        {"name": "not a name!", "expression": "1 + 1"}]), None)
    assert fields(causes) == ["webhooks[0].matchConditions[1].name", "webhooks[0].matchConditions[2].expression",
                              "webhooks[0].matchConditions[2].name", "webhooks[0].matchConditions[3].expression",
                              "webhooks[0].matchConditions[4].expression", "webhooks[0].matchConditions[4].name"]
    assert causes[0]["message"] == 'Duplicate value: "labelled"'
    assert causes[1]["message"].startswith('Invalid value: "object.x >": compilation failed: ')
    assert causes[4]["message"] == 'Invalid value: "1 + 1": must evaluate to bool but got int'
    assert causes[5]["message"].startswith('Invalid value: "not a name!": name part must consist of alphanumeric')
    many = [{"name": f"c{i}", "expression": "true"} for i in range(65)]
    assert fields(prepare_webhook_configuration(config(matchConditions=many), None)) == ["webhooks[0].matchConditions"]


def test_match_conditions_declare_namespace_object_and_authorizer_not_params() -> None:
    """Upstream compiles a webhook's conditions with ``namespaceObject`` and ``authorizer``
    declared, without ``params`` or ``variables``."""
    declared = ["namespaceObject.metadata.name != 'kube-system'",
                "authorizer.group('').resource('pods').namespace('default').check('create').allowed()",
                "authorizer.requestResource.check('delete').allowed()"]
    assert prepare_webhook_configuration(config(matchConditions=[
        {"name": f"c{i}", "expression": e} for i, e in enumerate(declared)]), None) == []
    for name in ("params", "variables"):
        causes = prepare_webhook_configuration(config(matchConditions=[
            {"name": "c", "expression": f"{name}.x == 1"}]), None)
        assert fields(causes) == ["webhooks[0].matchConditions[0].expression"]
        assert f"undeclared reference to '{name}' (in container '')" in causes[0]["message"]


def test_an_update_keeping_the_match_conditions_does_not_validate_them_again() -> None:
    stored = config(matchConditions=[{"name": "c", "expression": "params.x == 1"}])
    assert fields(prepare_webhook_configuration(stored, None)) == ["webhooks[0].matchConditions[0].expression"]
    updated = config(matchConditions=[{"name": "c", "expression": "params.x == 1"}], timeoutSeconds=5)
    assert prepare_webhook_configuration(updated, stored) == []
    changed = config(matchConditions=[{"name": "c", "expression": "params.x == 2"}])
    assert fields(prepare_webhook_configuration(changed, stored)) == ["webhooks[0].matchConditions[0].expression"]
