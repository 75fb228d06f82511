"""ValidatingAdmissionPolicy (api/admissionpolicy.py): CEL validations bound to writes refuse
them (Deny), warn (Warn), follow the failure policy, and match by resource, operation,
namespace labels and match conditions, as upstream's plugin."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controlplane.client import ApiError, Client, resource_path
from tests.test_cli import Serve, running, start_serve

POLICIES = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
BINDINGS = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
CMS = resource_path("", "v1", "configmaps", "default")


def policy(name: str, validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": validations, **spec}}


def deployment(name: str, replicas: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


async def bind(client: Client, name: str, policy_name: str, actions: list[str], **spec: Any) -> None:
    await client.create(BINDINGS, {"metadata": {"name": name}, "spec": {
        "policyName": policy_name, "validationActions": actions, **spec}})
    while name not in {b["metadata"]["name"] for b in (await client.list(BINDINGS, resourceVersion="0"))["items"]}:
        await asyncio.sleep(0.01)  # admission reads the watch cache


async def test_a_deny_binding_refuses_what_fails_its_validation(client: Client) -> None:
    await client.create(POLICIES, policy("max-replicas", [
        {"expression": "object.spec.replicas <= 5", "message": "at most 5 replicas"},
        {"expression": "!has(object.metadata.labels) || !('bad' in object.metadata.labels)"}]))
    await bind(client, "max-replicas", "max-replicas", ["Deny"])
    await client.create(DEPLOYMENTS, deployment("small", 3))
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("big", 10))
    denied = "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: at most 5 replicas"
    assert e.value.code == 422 and e.value.message == f'deployments.apps "big" is forbidden: {denied}'
    assert e.value.status["details"] == {"name": "big", "group": "apps", "kind": "deployments",
                                         "causes": [{"message": denied}]}  # upstream's admission.NewForbidden
    with pytest.raises(ApiError) as e:  # an update too, and the default message names the expression
        await client.patch(f"{DEPLOYMENTS}/small", {"metadata": {"labels": {"bad": "x"}}})
    assert "denied request: failed expression: !has(object.metadata.labels)" in e.value.message
    await client.create(CMS, {"metadata": {"name": "untouched"}, "data": {}})  # other resources: no policy


async def test_warn_failure_policy_and_match_conditions(client: Client) -> None:
    await client.create(POLICIES, policy("warned", [{"expression": "object.spec.replicas <= 1",
                                                      "message": "prefer one replica"}],
                                         matchConditions=[{"name": "labelled",
                                                           "expression": "'team' in object.metadata.labels"}]))
    await client.create(POLICIES, policy("broken", [{"expression": "object.spec.nosuchfield == 1"}],
                                         failurePolicy="Ignore"))
    await bind(client, "warned", "warned", ["Warn"])
    await bind(client, "broken", "broken", ["Deny"])
    app = client._app
    assert app is not None  # the in-process client (tests/api/conftest.py)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        answer = await http.post(DEPLOYMENTS, json=deployment("two", 2, team="a"))
    assert answer.status_code == 201
    warnings = answer.headers.get_list("warning")
    assert any("Validation failed for ValidatingAdmissionPolicy 'warned' with binding 'warned': prefer one replica"
               in w for w in warnings), warnings
    await client.create(DEPLOYMENTS, deployment("unlabelled", 2))  # match condition false: not even a warning


async def test_errors_fail_closed_and_namespace_selectors_narrow(client: Client) -> None:
    await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": "prod", "labels": {
        "env": "prod"}}})
    await client.create(POLICIES, policy("strict", [{"expression": "object.spec.nosuchfield == 1"}],
                                         matchConstraints={
                                             "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                                "operations": ["CREATE"], "resources": ["*"]}],
                                             "namespaceSelector": {"matchLabels": {"env": "prod"}}}))
    await bind(client, "strict", "strict", ["Deny"])
    with pytest.raises(ApiError) as e:  # a run-time error under failurePolicy Fail (the default) refuses
        await client.create(resource_path("", "v1", "configmaps", "prod"), {"metadata": {"name": "x"}})
    assert e.value.code == 422 and ("denied request: expression 'object.spec.nosuchfield == 1' resulted in error: "
                                    "no such key") in e.value.message
    await client.create(CMS, {"metadata": {"name": "elsewhere"}})  # default is not env=prod


async def test_deletes_are_checked_and_message_expressions_build_the_message(client: Client) -> None:
    await client.create(CMS, {"metadata": {"name": "keep", "labels": {"protected": "true"}}, "data": {}})
    await client.create(CMS, {"metadata": {"name": "drop"}, "data": {}})
    await client.create(POLICIES, {"metadata": {"name": "no-delete"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["DELETE"], "resources": ["configmaps"]}]},
        "validations": [{"expression": "object == null && (!has(oldObject.metadata.labels) "
                                       "|| !('protected' in oldObject.metadata.labels))",
                         "messageExpression": "'configmap ' + oldObject.metadata.name + ' is protected'",
                         "reason": "Forbidden"}]}})
    await bind(client, "no-delete", "no-delete", ["Deny"])
    with pytest.raises(ApiError) as e:
        await client.delete(f"{CMS}/keep")
    assert e.value.code == 403 and e.value.message.endswith("denied request: configmap keep is protected")
    await client.delete(f"{CMS}/drop")


async def test_a_policy_whose_expressions_do_not_compile_is_refused_at_its_write(client: Client) -> None:
    bad = policy("bad", [{"expression": "object.spec.replicas <", "messageExpression": "'x' +"},
                         {"expression": "object.?spec.replicas.orValue(0) < 5"}],  # optional syntax compiles
                 matchConditions=[{"name": "m", "expression": "true &&"}],
                 variables=[{"name": "v", "expression": "object.spec)"}])
    with pytest.raises(ApiError) as e:
        await client.create(POLICIES, bad)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    causes = e.value.status["details"]["causes"]
    assert [c["field"] for c in causes] == [  # upstream's order: conditions, variables, validations
        "spec.matchConditions[0].expression", "spec.variables[0].expression",
        "spec.validations[0].expression", "spec.validations[0].messageExpression"]
    assert causes[2]["message"].startswith(
        'Invalid value: "object.spec.replicas <": compilation failed: ERROR: <input>:1:23: Syntax error: ')
    assert causes[2]["message"].endswith("\n | object.spec.replicas <\n | ......................^")
    assert all(c["reason"] == "FieldValueInvalid" for c in causes)


async def test_policies_judge_bindings_evictions_and_scales_by_their_own_kind(client: Client) -> None:
    """The subresources written by handlers of their own are admitted as upstream: a Binding
    (CREATE of pods/binding), an Eviction (CREATE of pods/eviction), a Scale (UPDATE of
    deployments/scale), each the object the policy sees, with its kind in ``request.kind``."""
    rules = [{"apiGroups": ["", "apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["pods/binding", "pods/eviction", "deployments/scale"]}]
    await client.create(POLICIES, {"metadata": {"name": "subresources"}, "spec": {
        "matchConstraints": {"resourceRules": rules},
        "validations": [
            {"expression": "request.kind.kind != 'Binding' || object.target.name != 'forbidden'",
             "message": "not that node"},
            {"expression": "request.kind.kind != 'Scale' || object.spec.replicas <= 4", "message": "at most 4"},
            {"expression": "request.kind.kind != 'Eviction' || request.subResource == 'eviction' && "
                           "!has(object.metadata.labels)", "message": "no labelled evictions"}]}})
    await bind(client, "subresources", "subresources", ["Deny"])
    pods = resource_path("", "v1", "pods", "default")
    for name in ("p1", "p2"):
        await client.create(pods, {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    with pytest.raises(ApiError) as e:
        await client.create(f"{pods}/p1/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                                                   "target": {"kind": "Node", "name": "forbidden"}})
    assert e.value.code == 422 and e.value.message.endswith("denied request: not that node")
    await client.create(f"{pods}/p1/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                                               "target": {"kind": "Node", "name": "allowed"}})
    with pytest.raises(ApiError) as e:
        await client.create(f"{pods}/p2/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                    "metadata": {"name": "p2", "labels": {"x": "y"}}})
    assert e.value.code == 422 and e.value.message.endswith("denied request: no labelled evictions")
    await client.create(f"{pods}/p2/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                "metadata": {"name": "p2"}})
    await client.create(DEPLOYMENTS, deployment("scaled", 1))
    with pytest.raises(ApiError) as e:
        await client.patch(f"{DEPLOYMENTS}/scaled/scale", {"spec": {"replicas": 9}})
    assert e.value.code == 422 and e.value.message.endswith("denied request: at most 4")
    await client.patch(f"{DEPLOYMENTS}/scaled/scale", {"spec": {"replicas": 3}})
    assert (await client.get(f"{DEPLOYMENTS}/scaled"))["spec"]["replicas"] == 3


async def test_policies_judge_token_requests_as_creates_of_serviceaccounts_token(client: Client) -> None:
    """A TokenRequest is admitted as upstream's TokenREST admits it: a CREATE of
    serviceaccounts/token, the TokenRequest (defaulted: 3600 s) the object the policy sees."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
              "resources": ["serviceaccounts/token"]}]
    await client.create(POLICIES, {"metadata": {"name": "short-tokens"}, "spec": {
        "matchConstraints": {"resourceRules": rules},
        "validations": [{"expression": "request.kind.kind == 'TokenRequest' && request.subResource == 'token' && "
                                       "object.metadata.name == 'default' && "
                                       "object.spec.expirationSeconds <= 3600", "message": "an hour at most"}]}})
    await bind(client, "short-tokens", "short-tokens", ["Deny"])
    url = f"{resource_path('', 'v1', 'serviceaccounts', 'default')}/default/token"
    with pytest.raises(ApiError) as e:
        await client.create(url, {"spec": {"expirationSeconds": 7200}})
    assert e.value.code == 422 and e.value.message == 'serviceaccounts "default" is forbidden: ' \
        "ValidatingAdmissionPolicy 'short-tokens' with binding 'short-tokens' denied request: an hour at most"
    issued = await client.create(url, {"spec": {}})
    assert issued["status"]["token"] and issued["spec"]["expirationSeconds"] == 3600


async def test_undeclared_references_are_refused_at_a_policys_write(client: Client) -> None:
    """What upstream's compile declares at the write: object, oldObject, request,
    namespaceObject, authorizer (not in a message expression), params only with a paramKind
    and variables only in a policy that has some (never in a match condition); any other
    name, or a function of no Kubernetes CEL library, is an undeclared reference."""
    bad = policy("undeclared", [{"expression": "object.spec.replicas <= params.max",
                                 "messageExpression": "'too many: ' + string(objekt.spec.replicas)"}],
                 matchConditions=[{"name": "m", "expression": "request.userInfo.username.isBlank()"}],
                 auditAnnotations=[{"key": "k", "valueExpression": "variables.v + authorizer.path"}])
    with pytest.raises(ApiError) as e:
        await client.create(POLICIES, bad)
    causes = e.value.status["details"]["causes"]
    assert [(c["field"], c["message"].split("compilation failed: ")[1].split("\n")[0]) for c in causes] == [
        ("spec.matchConditions[0].expression",
         "ERROR: <input>:1:34: undeclared reference to 'isBlank' (in container '')"),
        ("spec.validations[0].expression",
         "ERROR: <input>:1:25: undeclared reference to 'params' (in container '')"),
        ("spec.validations[0].messageExpression",
         "ERROR: <input>:1:23: undeclared reference to 'objekt' (in container '')"),
        ("spec.auditAnnotations[0].valueExpression",
         "ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')")]
    fine = policy("declared", [{"expression": "object.spec.replicas <= int(params.data.max)"}],
                  paramKind={"apiVersion": "v1", "kind": "ConfigMap"}, variables=[{"name": "v", "expression": "1"}],
                  auditAnnotations=[{"key": "k", "valueExpression": "string(variables.v) + namespaceObject.kind"}])
    await client.create(POLICIES, fine)
    with pytest.raises(ApiError) as e:  # a match condition never sees the variables, a message no authorizer
        await client.create(POLICIES, policy(
            "conditions", [{"expression": "true", "messageExpression": "string(authorizer.path('/x').check('get'))"}],
            variables=[{"name": "v", "expression": "1"}],
            matchConditions=[{"name": "m", "expression": "variables.v == 1"}]))
    assert [(c["field"], c["message"].split("compilation failed: ")[1].split("\n")[0])
            for c in e.value.status["details"]["causes"]] == [
        ("spec.matchConditions[0].expression",
         "ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')"),
        ("spec.validations[0].messageExpression",
         "ERROR: <input>:1:8: undeclared reference to 'authorizer' (in container '')")]


async def test_undeclared_references_are_refused_in_a_webhooks_match_conditions(client: Client) -> None:
    """A webhook's match conditions declare no params or variables; namespaceObject and
    authorizer they do (upstream's webhook environment)."""
    hooks = resource_path("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
    config: dict[str, Any] = {"metadata": {"name": "conditions"}, "webhooks": [{
        "name": "a.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": "https://example.com/hook"},
        "matchConditions": [{"name": "m", "expression": "params.name != 'kube-system'"}]}]}
    with pytest.raises(ApiError) as e:
        await client.create(hooks, config)
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["webhooks[0].matchConditions[0].expression"]
    assert "undeclared reference to 'params' (in container '')" in e.value.message
    config["webhooks"][0]["matchConditions"] = [
        {"name": "m", "expression": "namespaceObject == null || namespaceObject.metadata.name != 'kube-system'"},
        {"name": "a", "expression": "authorizer.requestResource.check('delete').allowed()"}]
    await client.create(hooks, config)


async def test_rules_match_by_scope_and_resource_names(client: Client) -> None:
    """Upstream's rule matcher: a ``Cluster`` rule takes no namespaced request (a ``Namespaced``
    one does), and ``resourceNames`` narrow a rule to those names."""
    def rule(scope: str, **more: Any) -> dict[str, Any]:
        return {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"],
                "scope": scope, **more}

    for name, rules in (("cluster-only", [rule("Cluster")]),
                        ("named", [rule("Namespaced", resourceNames=["locked"])])):
        await client.create(POLICIES, {"metadata": {"name": name}, "spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": "false", "message": f"refused by {name}"}]}})
        await bind(client, name, name, ["Deny"])
    await client.create(CMS, {"metadata": {"name": "free"}})  # neither: not cluster-scoped, not named
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "locked"}})
    assert e.value.message.endswith("denied request: refused by named")


async def test_the_validations_share_a_runtime_cost_budget(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's RuntimeCELCostBudget (10,000,000) and per-call limit (1,000,000), made small
    here (``expressions.Meter``, each comprehension iteration counting 1): the validations of
    one binding spend one budget, and running out of it is the policy's one failure
    (``failurePolicy`` decides), whatever each validation's verdict."""
    from controlplane.registry import expressions

    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 100)
    monkeypatch.setattr(expressions, "RUNTIME_BUDGET", 250)
    nested = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != '' && j != ''))"  # 9 keys: 90
    await client.create(POLICIES, policy("budget", [{"expression": nested}] * 3))
    await bind(client, "budget", "budget", ["Deny"])
    labels = {f"l{i}": "x" for i in range(9)}
    with pytest.raises(ApiError) as e:  # 3 × 90 > 250
        await client.create(DEPLOYMENTS, deployment("spent", 1, **labels))
    assert e.value.code == 422 and e.value.message.endswith(
        "ValidatingAdmissionPolicy 'budget' with binding 'budget' denied request: validation failed due to "
        "running out of cost budget, no further validation rules will be run")
    await client.create(DEPLOYMENTS, deployment("fewer", 1, **dict(list(labels.items())[:7])))  # 3 × 56
    labels["l9"] = "x"
    monkeypatch.setattr(expressions, "RUNTIME_BUDGET", 1000)
    with pytest.raises(ApiError) as e:  # 110 in one: past the per-call limit, its own failure
        await client.create(DEPLOYMENTS, deployment("costly", 1, **labels))
    assert e.value.message.endswith(f"denied request: expression '{nested}' resulted in error: "
                                    "operation cancelled: actual cost limit exceeded")
    await client.patch(f"{POLICIES}/budget", {"spec": {"failurePolicy": "Ignore"}})
    for _ in range(500):  # (the watch cache)
        try:
            await client.create(DEPLOYMENTS, deployment("ignored", 1, **labels))
            break
        except ApiError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("failurePolicy Ignore never admitted it")


async def test_a_variable_is_computed_once_when_read_and_costs_its_readers_budget(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's composition (``api/policyvariables.py``), the limits made small as above: a
    variable the validations read is computed once for them all, its iterations counted against
    their budget once (90 of 250, read three times); one nobody reads is never computed (90
    more); three read once each cost 270, past the budget; and a variable past the per-call limit
    fails the expressions that read it with upstream's words."""
    from controlplane.registry import expressions

    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 100)
    monkeypatch.setattr(expressions, "RUNTIME_BUDGET", 250)
    nested = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != '' && j != ''))"  # 9 keys: 90
    await client.create(POLICIES, policy(
        "shared", [{"expression": "variables.heavy"}] * 3,
        matchConditions=[{"name": "shared", "expression": "'shared' in object.metadata.labels"}],
        variables=[{"name": "heavy", "expression": nested}, {"name": "unread", "expression": nested}]))
    await client.create(POLICIES, policy(
        "distinct", [{"expression": f"variables.{v}"} for v in "abc"],
        matchConditions=[{"name": "distinct", "expression": "'distinct' in object.metadata.labels"}],
        variables=[{"name": v, "expression": nested} for v in "abc"]))
    await bind(client, "shared", "shared", ["Deny"])
    await bind(client, "distinct", "distinct", ["Deny"])
    labels = {f"l{i}": "x" for i in range(8)}
    await client.create(DEPLOYMENTS, deployment("shared", 1, shared="x", **labels))
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("distinct", 1, distinct="x", **labels))
    assert e.value.message.endswith(
        "ValidatingAdmissionPolicy 'distinct' with binding 'distinct' denied request: validation failed due to "
        "running out of cost budget, no further validation rules will be run")
    labels["l8"] = "x"
    with pytest.raises(ApiError) as e:  # 10 keys: 110 in the variable's own evaluation
        await client.create(DEPLOYMENTS, deployment("costly", 1, shared="x", **labels))
    assert e.value.message.endswith(
        "ValidatingAdmissionPolicy 'shared' with binding 'shared' denied request: expression 'variables.heavy' "
        'resulted in error: composited variable "heavy" fails to evaluate: operation cancelled: actual cost limit '
        "exceeded")


async def test_every_message_expression_runs_within_what_the_validations_left(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's validator evaluates the message expression of every validation, a passed one's
    too, within what the validations left of the budget (limits made small as above): three
    passed validations whose message expressions cost 90 each (270 > 250) each fail with
    ``failed messageExpression: ...``; with two (180) the request is admitted, the messages
    never shown."""
    from controlplane.registry import expressions

    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 100)
    monkeypatch.setattr(expressions, "RUNTIME_BUDGET", 250)
    nested = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != '' && j != ''))"  # 9 keys: 90
    passed = {"expression": "true", "messageExpression": f"string({nested})"}
    await client.create(POLICIES, policy("messages", [passed] * 3, matchConditions=[
        {"name": "three", "expression": "'three' in object.metadata.labels"}]))
    await client.create(POLICIES, policy("two-messages", [passed] * 2, matchConditions=[
        {"name": "two", "expression": "'two' in object.metadata.labels"}]))
    await bind(client, "messages", "messages", ["Deny"])
    await bind(client, "two-messages", "two-messages", ["Deny"])
    labels = {f"l{i}": "x" for i in range(8)}
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("three", 1, three="x", **labels))
    assert e.value.code == 422 and e.value.message.endswith(
        "ValidatingAdmissionPolicy 'messages' with binding 'messages' denied request: failed messageExpression: "
        "validation failed due to running out of cost budget, no further validation rules will be run")
    await client.create(DEPLOYMENTS, deployment("two", 1, two="x", **labels))


async def test_match_conditions_have_a_budget_of_their_own(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's matcher evaluates every match condition within RuntimeCELCostBudgetMatchConditions
    (2,500,000; 150 here): past it its error is the policy's failure under ``Fail``, though a
    condition before it was false; under ``Ignore`` the policy does not apply. Each expression
    alone stays under the per-call limit (90 of 100)."""
    from controlplane.registry import expressions

    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 100)
    monkeypatch.setattr(expressions, "MATCH_CONDITIONS_BUDGET", 150)
    nested = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != '' && j != ''))"  # 9 keys: 90
    conditions = [{"name": "mine", "expression": "'budget' in object.metadata.labels"},
                  {"name": "first", "expression": nested}, {"name": "second", "expression": nested}]
    await client.create(POLICIES, policy("conditions", [{"expression": "false", "message": "applied"}],
                                         matchConditions=conditions))
    await bind(client, "conditions", "conditions", ["Deny"])
    labels = {f"l{i}": "x" for i in range(9)}
    with pytest.raises(ApiError) as e:  # the first condition is false: upstream's matcher errs all the same
        await client.create(DEPLOYMENTS, deployment("spent", 1, **labels))
    assert e.value.code == 422 and e.value.message.endswith(
        "ValidatingAdmissionPolicy 'conditions' with binding 'conditions' denied request: validation failed due "
        "to running out of cost budget, no further validation rules will be run")
    with pytest.raises(ApiError) as e:  # 8 keys: 56 each, within it: the validation decides
        await client.create(DEPLOYMENTS, deployment("fewer", 1, budget="x", **dict(list(labels.items())[:7])))
    assert e.value.message.endswith("denied request: applied")
    await client.create(DEPLOYMENTS, deployment("out", 1, **dict(list(labels.items())[:7])))  # (false: not applied)
    await client.patch(f"{POLICIES}/conditions", {"spec": {"failurePolicy": "Ignore"}})
    for _ in range(500):  # (the watch cache)
        try:
            await client.create(DEPLOYMENTS, deployment("ignored", 1, budget="x", **labels))
            break
        except ApiError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("failurePolicy Ignore never admitted it")


async def test_match_conditions_see_no_namespace_object(client: Client) -> None:
    """Upstream's matcher binds no namespace (``matchconditions/matcher.go`` passes nil), so a
    policy's match conditions see ``namespaceObject`` null, where its validations see the
    namespace."""
    await client.create(POLICIES, policy("namespaced", [
        {"expression": "namespaceObject.metadata.name == 'other'", "message": "the namespace was seen"}],
        matchConditions=[{"name": "null", "expression": "namespaceObject == null"}]))
    await bind(client, "namespaced", "namespaced", ["Deny"])
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("seen", 1))
    assert e.value.message.endswith("denied request: the namespace was seen")


async def test_presence_tests_of_null_are_false_and_a_lists_field_fails_as_cel_gos(client: Client) -> None:
    """``oldObject`` of a create and a match condition's ``namespaceObject`` are null: cel-go's
    presence test of a field of null is false, its optional selection none (Kubernetes leaves
    ``EnableErrorOnBadPresenceTest`` off); a field selected of a list is its run-time error."""
    await client.create(POLICIES, policy("null-presence", [
        {"expression": "!has(oldObject.spec)", "message": "has() of null"},
        {"expression": "oldObject.?spec.replicas.orValue(0) == 0 && !oldObject[?'spec'].hasValue()",
         "message": "optional of null"},
        {"expression": "object.spec.replicas < 3", "message": "reached"}],
        matchConditions=[{"name": "null", "expression": "!has(namespaceObject.metadata)"}]))
    await bind(client, "null-presence", "null-presence", ["Deny"])
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("three", 3))
    assert e.value.message.endswith("denied request: reached")
    await client.create(POLICIES, policy("list-field", [
        {"expression": "object.spec.template.spec.containers.name != 'x'"}]))
    await bind(client, "list-field", "list-field", ["Deny"])
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("one", 1))
    assert e.value.message.endswith("denied request: expression 'object.spec.template.spec.containers.name != "
                                    "\'x\'' resulted in error: unsupported index type 'string' in list")


async def test_the_namespace_as_upstream_shows_it(client: Client) -> None:
    """``namespaceObject`` as upstream's dispatchers give it, the typed object of an informer
    (no ``apiVersion`` or ``kind``): to the validations through ``CreateNamespaceObject``,
    which keeps some of its metadata only (no ``managedFields``), to the audit annotations
    as it is."""
    await client.create(POLICIES, policy("namespace-shown", [
        {"expression": "false", "messageExpression":
         "string(has(namespaceObject.kind)) + ' ' + string(has(namespaceObject.metadata.managedFields)) + ' ' "
         "+ string(has(namespaceObject.metadata.labels)) + ' ' + string(has(namespaceObject.spec))"}]))
    await bind(client, "namespace-shown", "namespace-shown", ["Deny"])
    made = await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": "shown"}},
                               fieldManager="test")
    assert made["metadata"]["managedFields"] and made["kind"] == "Namespace"
    with pytest.raises(ApiError) as e:
        await client.create(resource_path("apps", "v1", "deployments", "shown"), deployment("shown", 1))
    assert e.value.message.endswith("denied request: false false true true")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("vap-serve"), extra=("--no-scheduler",))) as s:
        yield s


def test_upstreams_check_metrics_over_the_socket(served: Serve) -> None:
    """``apiserver_validating_admission_policy_check_total`` and ``..._duration_seconds`` as
    upstream's dispatcher observes them: each failed validation (an error under ``Fail`` too,
    a plain false one ``invalid_error`` as well) once per action its binding takes, an error
    ``Ignore`` admits as ``allow``, a passed validation not at all."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                "resources": ["configmaps"]}], "objectSelector": {"matchLabels": {"case": "metrics"}}}
    validations = [{"expression": "true"}, {"expression": "false", "message": "no"},
                   {"expression": "object.data.missing == 'x'"}]
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        for name, failure, actions in (("metrics", "Fail", ["Deny"]), ("metrics-warned", "Fail", ["Warn", "Audit"]),
                                       ("metrics-ignored", "Ignore", ["Warn"])):
            r = http.post(POLICIES, json={"metadata": {"name": name}, "spec": {
                "failurePolicy": failure, "matchConstraints": rules,
                "validations": validations[2:] if failure == "Ignore" else validations}})
            assert r.status_code == 201, r.text
            r = http.post(BINDINGS, json={"metadata": {"name": name}, "spec": {"policyName": name,
                                                                                "validationActions": actions}})
            assert r.status_code == 201, r.text
        for _ in range(500):  # admission reads the watch cache
            listed = http.get(BINDINGS, params={"resourceVersion": "0"}).json()["items"]
            if len(listed) == 3:
                break
            time.sleep(0.01)
        r = http.post("/api/v1/namespaces/default/configmaps", json={
            "metadata": {"name": "measured", "labels": {"case": "metrics"}}, "data": {"k": "v"}})
        assert r.status_code == 422 and r.json()["message"].endswith("denied request: no"), r.text
        text = http.get("/metrics").text
        checks = {(s.labels["policy"], s.labels["policy_binding"], s.labels["error_type"],
                   s.labels["enforcement_action"]): s.value
                  for family in text_string_to_metric_families(text) for s in family.samples
                  if s.name == "apiserver_validating_admission_policy_check_total"}
        assert checks == {("metrics", "metrics", "invalid_error", "deny"): 2.0,
                          ("metrics-warned", "metrics-warned", "invalid_error", "warn"): 2.0,
                          ("metrics-warned", "metrics-warned", "invalid_error", "audit"): 2.0,
                          ("metrics-ignored", "metrics-ignored", "invalid_error", "allow"): 1.0}
        assert "apiserver_validating_admission_policy_check_duration_seconds_bucket{" in text
