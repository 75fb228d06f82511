"""MutatingAdmissionPolicy (api/mutatingpolicy.py): JSONPatch and ApplyConfiguration mutations
bound to writes change the object before it is validated and stored, follow their match
conditions, variables and failure policy, and are reinvoked as upstream's plugin; their write
is validated as upstream's (registry/mutatingpolicies.py). Over a real socket with a real
webhook server for the order against the mutating webhooks and the reinvocation."""

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
from tests.api.webhook_server import WebhookServer
from tests.test_cli import Serve, running, start_serve

POLICIES = resource_path("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
BINDINGS = resource_path("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings")
CMS = resource_path("", "v1", "configmaps", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
CONFIGMAPS_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": ["configmaps"]}


def policy(name: str, *mutations: dict[str, Any], rule: dict[str, Any] = CONFIGMAPS_RULE,
           **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": [rule]}, "reinvocationPolicy": "Never",
        "mutations": list(mutations), **spec}}


def json_patch(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def apply_configuration(expression: str) -> dict[str, Any]:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


async def bind(client: Client, name: str, policy_name: str, **spec: Any) -> None:
    await client.create(BINDINGS, {"metadata": {"name": name}, "spec": {"policyName": policy_name, **spec}})
    while name not in {b["metadata"]["name"] for b in (await client.list(BINDINGS, resourceVersion="0"))["items"]}:
        await asyncio.sleep(0.01)  # admission reads the watch cache


async def test_json_patch_and_apply_configuration_mutate_in_order(client: Client) -> None:
    await client.create(POLICIES, policy(
        "label", apply_configuration('Object{metadata: Object.metadata{labels: {"team": "a"}}}'),
        json_patch('[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/by"), '
                   'value: object.metadata.labels.team + "-seen"}, '
                   'JSONPatch{op: "add", path: "/data/n", value: string(size(object.data))}]')))
    await bind(client, "label", "label")
    made = await client.create(CMS, {"metadata": {"name": "one"}, "data": {"x": "1"}})
    assert made["metadata"]["labels"] == {"team": "a", "example.com/by": "a-seen"}
    assert made["data"] == {"x": "1", "n": "1"}
    assert made["metadata"]["uid"] and made["metadata"]["creationTimestamp"]  # set aside, then put back
    assert (await client.get(f"{CMS}/one"))["metadata"]["labels"]["team"] == "a"  # as stored
    updated = await client.patch(f"{CMS}/one", {"data": {"y": "2"}})  # an update is mutated too
    assert updated["data"] == {"x": "1", "y": "2", "n": "3"}  # x, y and n itself
    await client.create(DEPLOYMENTS, {"metadata": {"name": "d"}, "spec": {  # not matched: untouched
        "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "containers": [{"name": "c", "image": "i"}]}}}})
    assert "team" not in (await client.get(f"{DEPLOYMENTS}/d"))["metadata"].get("labels", {})


async def test_apply_configuration_merges_lists_by_key_and_defaults_again(client: Client) -> None:
    rule = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}
    await client.create(POLICIES, policy("sidecar", apply_configuration(
        'Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{'
        'containers: [Object.spec.template.spec.containers{name: "sidecar", image: "proxy"}, '
        'Object.spec.template.spec.containers{name: "c", imagePullPolicy: "Never"}]}}}}'), rule=rule))
    await bind(client, "sidecar", "sidecar")
    made = await client.create(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": [{"name": "c", "image": "app"}]}}}})
    containers = made["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"], c["imagePullPolicy"]) for c in containers] == [  # merged by name, in the
        ("sidecar", "proxy", "Always"), ("c", "app", "Never")]  # configuration's order; the sidecar defaulted
    assert containers[0]["terminationMessagePath"] == "/dev/termination-log"


async def test_match_conditions_variables_and_a_failed_test(client: Client) -> None:
    await client.create(POLICIES, policy(
        "conditional", json_patch('[JSONPatch{op: "test", path: "/data/keep", value: "no"}, '
                                  'JSONPatch{op: "add", path: "/data/tested", value: variables.v}]'),
        json_patch('[JSONPatch{op: "add", path: "/data/always", value: variables.v}]'),
        variables=[{"name": "v", "expression": "object.metadata.name + '!'"}],
        matchConditions=[{"name": "wanted", "expression": "object.metadata.name.startsWith('want')"}]))
    await bind(client, "conditional", "conditional")
    made = await client.create(CMS, {"metadata": {"name": "wanted"}, "data": {"keep": "yes"}})
    assert made["data"] == {"keep": "yes", "always": "wanted!"}  # the failed test's patch left out whole
    made = await client.create(CMS, {"metadata": {"name": "wanted2"}, "data": {"keep": "no"}})
    assert made["data"] == {"keep": "no", "tested": "wanted2!", "always": "wanted2!"}
    made = await client.create(CMS, {"metadata": {"name": "other"}, "data": {"keep": "no"}})
    assert made["data"] == {"keep": "no"}  # the match condition is false


async def test_errors_fail_closed_unless_ignored(client: Client) -> None:
    await client.create(POLICIES, policy("broken", json_patch('[JSONPatch{op: "add", path: "/nosuch/x", value: 1}]'),
                                         matchConditions=[{"name": "b", "expression": "object.metadata.name == 'b'"}]))
    await client.create(POLICIES, policy("wrong-type", json_patch(  # (as a whole literal: refused at the write)
        'object.metadata.name == "w" ? [{"op": "add", "path": "/data/x", "value": "1"}] : []'),
                                         matchConditions=[{"name": "w", "expression": "object.metadata.name == 'w'"}]))
    await client.create(POLICIES, policy("atomic", apply_configuration(
        'Object{metadata: Object.metadata{ownerReferences: [Object.metadata.ownerReferences{name: "x"}]}}'),
        matchConditions=[{"name": "a", "expression": "object.metadata.name == 'a'"}]))
    await client.create(POLICIES, policy("mismatch", apply_configuration(
        'Object{metadata: Object.metadata{labels: Object.metadata.wrong{}}}'),
        matchConditions=[{"name": "m", "expression": "object.metadata.name == 'm'"}]))
    await client.create(POLICIES, policy("ignored", json_patch("[JSONPatch{op: 'add', path: '/x/y', value: 1}]"),
                                         failurePolicy="Ignore"))
    for name in ("broken", "wrong-type", "atomic", "mismatch", "ignored"):
        await bind(client, name, name)
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "b"}})
    assert (e.value.code, e.value.reason) == (403, "Invalid")  # upstream's Forbidden with the Invalid reason
    assert e.value.message.startswith("policy 'broken' with binding 'broken' denied request: JSON Patch: ")
    assert e.value.status is not None and e.value.status["details"]["causes"] == [{"message": e.value.message}]
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "w"}})
    assert e.value.message == ("policy 'wrong-type' with binding 'wrong-type' denied request: type mismatch: "
                               "JSONPatchType.expression should evaluate to array of JSONPatch")
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "a"}})
    assert e.value.message == ("policy 'atomic' with binding 'atomic' denied request: error applying patch: invalid "
                               "ApplyConfiguration: may not mutate atomic arrays, maps or structs: "
                               ".metadata.ownerReferences[0]")
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "m"}})
    assert "denied request: type mismatch: expected object initializer type Object.metadata.labels, got " \
           "Object.metadata.wrong" in e.value.message
    assert (await client.create(CMS, {"metadata": {"name": "fine"}}))["metadata"]["name"] == "fine"


async def test_a_failed_mutation_is_an_error_of_its_own_and_the_next_still_runs(client: Client) -> None:
    """Upstream's dispatcher: a mutation that fails is the binding's error and the next mutation
    runs on the object as the failed one found it. Under ``Ignore`` the mutations that applied
    are kept; under ``Fail`` each failed mutation is a cause of its own, the first the message."""
    mutations = (json_patch('[JSONPatch{op: "add", path: "/data/first", value: "1"}]'),
                 json_patch('[JSONPatch{op: "add", path: "/nosuch/x", value: "1"}]'),
                 apply_configuration('Object{data: {"third": string(size(object.data))}}'),
                 json_patch('[JSONPatch{op: "add", path: "/data/fourth", value: string(1 / 0)}]'))
    await client.create(POLICIES, policy("partial", *mutations, failurePolicy="Ignore", matchConditions=[
        {"name": "partial", "expression": "object.metadata.name == 'partial'"}]))
    await client.create(POLICIES, policy("closed", *mutations, matchConditions=[
        {"name": "closed", "expression": "object.metadata.name == 'closed'"}]))
    await bind(client, "partial", "partial")
    await bind(client, "closed", "closed")
    made = await client.create(CMS, {"metadata": {"name": "partial"}, "data": {"x": "1"}})
    assert made["data"] == {"x": "1", "first": "1", "third": "2"}  # the third saw the first's work
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "closed"}, "data": {"x": "1"}})
    first = ("policy 'closed' with binding 'closed' denied request: JSON Patch: add operation does not apply: doc "
             'is missing path: "/nosuch/x": missing value')
    assert (e.value.code, e.value.reason, e.value.message) == (403, "Invalid", first)
    assert e.value.status is not None and e.value.status["details"]["causes"] == [
        {"message": first}, {"message": "policy 'closed' with binding 'closed' denied request: expression "
                                        "'[JSONPatch{op: \"add\", path: \"/data/fourth\", value: string(1 / 0)}]' "
                                        "resulted in error: division by zero"}]


async def test_each_mutation_and_the_match_conditions_have_a_budget(client: Client,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's patchers are each given the runtime budget (10,000,000; 250 here), the match
    conditions theirs (2,500,000; 150 here): a mutation whose variables take it past its budget
    fails with upstream's out of budget error, the next, within its own, applies (``Ignore``);
    conditions past theirs are the binding's error, though one was false."""
    from controlplane.registry import expressions

    monkeypatch.setattr(expressions, "PER_CALL_LIMIT", 100)
    monkeypatch.setattr(expressions, "RUNTIME_BUDGET", 250)
    monkeypatch.setattr(expressions, "MATCH_CONDITIONS_BUDGET", 150)
    nested = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != '' && j != ''))"  # 9 keys: 90
    costly = 'Object{data: {"costly": string(variables.a && variables.b && variables.c)}}'  # 270
    cheap = 'Object{data: {"cheap": string(variables.a && variables.b)}}'  # 180
    await client.create(POLICIES, policy(
        "budgets", apply_configuration(costly), apply_configuration(cheap), failurePolicy="Ignore",
        variables=[{"name": v, "expression": nested} for v in "abc"],
        matchConditions=[{"name": "mine", "expression": "object.metadata.name.startsWith('budget')"}]))
    await client.create(POLICIES, policy(
        "conditions", json_patch("[]"), matchConditions=[
            {"name": "mine", "expression": "object.metadata.name == 'conditions'"},
            {"name": "first", "expression": nested}, {"name": "second", "expression": nested}]))
    await bind(client, "budgets", "budgets")
    await bind(client, "conditions", "conditions")
    labels = {f"l{i}": "x" for i in range(9)}
    with pytest.raises(ApiError) as e:  # "conditions" is out of its budget, though its first condition is false
        await client.create(CMS, {"metadata": {"name": "budget", "labels": labels}})
    assert e.value.message == ("policy 'conditions' with binding 'conditions' denied request: validation failed due "
                               "to running out of cost budget, no further validation rules will be run")
    made = await client.create(CMS, {"metadata": {"name": "budget", "labels": dict(list(labels.items())[:7])}})
    assert made["data"] == {"costly": "true", "cheap": "true"}  # 8 labels: 56 each, within both budgets
    await client.patch(f"{POLICIES}/conditions", {"spec": {"failurePolicy": "Ignore"}})
    for _ in range(500):  # (the watch cache)
        try:
            made = await client.create(CMS, {"metadata": {"name": "budget-ignored", "labels": labels}})
            break
        except ApiError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("failurePolicy Ignore never admitted it")
    assert made["data"] == {"cheap": "true"}  # the costly mutation out of its budget, the next within its own


async def test_if_needed_policies_run_again_after_a_later_one_changed_the_object(client: Client) -> None:
    counting = 'Object{metadata: Object.metadata{annotations: {"labels": string(size(object.metadata.labels))}}}'
    await client.create(POLICIES, policy("a-count", apply_configuration(counting), reinvocationPolicy="IfNeeded"))
    await client.create(POLICIES, policy("b-label", apply_configuration(
        'Object{metadata: Object.metadata{labels: {"added": "yes"}}}')))
    await client.create(POLICIES, policy("c-never", apply_configuration(
        'Object{metadata: Object.metadata{annotations: {"never": string(size(object.metadata.labels))}}}')))
    for name in ("a-count", "b-label", "c-never"):
        await bind(client, name, name)
    made = await client.create(CMS, {"metadata": {"name": "again", "labels": {"x": "1"}}})
    assert made["metadata"]["annotations"] == {"labels": "2", "never": "2"}  # a-count again after b-label


PODS = resource_path("", "v1", "pods", "default")
PODS_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
SIDECAR = apply_configuration('Object{spec: Object.spec{containers: [Object.spec.containers{name: "sidecar", '
                              'image: "proxy"}]}}')


async def limit_range(client: Client, namespace: str = "default") -> None:
    limits = resource_path("", "v1", "limitranges", namespace)
    await client.create(limits, {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "200m"}}]}})
    while not (await client.list(limits, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)


async def test_the_built_in_admission_runs_again_in_the_second_round(client: Client) -> None:
    """Upstream's reinvoker runs the whole mutating chain again: a container a policy added in
    the first round gets its LimitRange defaults in the second (the annotation naming it, as
    upstream's LimitRanger overwrites it), and a priority class a policy changed is refused as
    upstream's Priority plugin refuses it when it runs again."""
    await limit_range(client)
    await client.create(POLICIES, policy("sidecar", SIDECAR, rule=PODS_RULE, matchConditions=[
        {"name": "wanted", "expression": "object.metadata.name == 'sidecar'"}]))
    await client.create(resource_path("scheduling.k8s.io", "v1", "priorityclasses"),
                        {"metadata": {"name": "high"}, "value": 1000})
    await client.create(POLICIES, policy("priority", apply_configuration(
        'Object{spec: Object.spec{priorityClassName: "high"}}'), rule=PODS_RULE, matchConditions=[
        {"name": "wanted", "expression": "object.metadata.name == 'raised'"}]))
    await bind(client, "sidecar", "sidecar")
    await bind(client, "priority", "priority")
    made = await client.create(PODS, {"metadata": {"name": "sidecar"}, "spec": {"containers": [
        {"name": "c", "image": "app"}]}})
    assert [(c["name"], c["resources"]) for c in made["spec"]["containers"]] == [
        ("c", {"requests": {"cpu": "200m"}}), ("sidecar", {"requests": {"cpu": "200m"}})]
    assert made["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu request for container sidecar"
    with pytest.raises(ApiError) as e:  # Priority computed 0 in the first round, 1000 of "high" in the second
        await client.create(PODS, {"metadata": {"name": "raised"}, "spec": {"containers": [
            {"name": "c", "image": "app"}]}})
    assert (e.value.code, e.value.message) == (403, 'pods "raised" is forbidden: the integer value of priority (0) '
                                               "must not be provided in pod spec; priority admission controller "
                                               "computed 1000 from the given PriorityClass name")


async def test_limit_ranges_bound_the_pod_the_policies_made(client: Client) -> None:
    """LimitRanger sets its defaults first among the mutating plugins but checks its bounds in
    validating admission, as upstream's ``Admit`` and ``Validate``: a limit a policy lowers
    within the range's maximum passes, one it raises past it is refused."""
    limits = resource_path("", "v1", "limitranges", "default")
    await client.create(limits, {"metadata": {"name": "bounded"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}}]}})
    while not (await client.list(limits, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)
    for name, cpu in (("capped", "500m"), ("raised", "2")):
        await client.create(POLICIES, policy(name, apply_configuration(
            'Object{spec: Object.spec{containers: [Object.spec.containers{name: "c", resources: '
            f'Object.spec.containers.resources{{limits: {{"cpu": "{cpu}"}}}}}}]}}}}'), rule=PODS_RULE,
            matchConditions=[{"name": "wanted", "expression": f"object.metadata.name == '{name}'"}]))
        await bind(client, name, name)

    def pod(name: str, limit: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "app", "resources": {
            "requests": {"cpu": "100m"}, "limits": {"cpu": limit}}}]}}

    made = await client.create(PODS, pod("capped", "2"))
    assert made["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}}
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("raised", "500m"))
    assert (e.value.code, e.value.message) == (
        403, 'pods "raised" is forbidden: maximum cpu usage per Container is 1, but limit is 2')


async def test_the_second_round_evaluates_every_policys_match_conditions(client: Client) -> None:
    """Upstream's dispatcher evaluates each matching binding's match conditions in the second
    round too, before it asks whether the binding is to be invoked again: "a-checker" (not
    invoked in the first round, its condition false) errs in the second, once "b-marker" added
    its annotation, and refuses the write; "b-marker" is ``Never``, so not applied again."""
    await client.create(POLICIES, policy("a-checker", json_patch("[]"), matchConditions=[{
        "name": "marked", "expression": "has(object.metadata.annotations) && 'marked' in object.metadata.annotations"
                                        " ? object.metadata.labels.missing == 'x' : false"}]))
    await client.create(POLICIES, policy("b-marker", apply_configuration(
        'Object{metadata: Object.metadata{annotations: {"marked": "yes"}}}'), matchConditions=[
        {"name": "wanted", "expression": "object.metadata.name == 'marked'"}]))
    await bind(client, "a-checker", "a-checker")
    await bind(client, "b-marker", "b-marker")
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "marked", "labels": {"x": "1"}}})
    assert e.value.message == ("policy 'a-checker' with binding 'a-checker' denied request: expression 'has(object."
                               "metadata.annotations) && 'marked' in object.metadata.annotations ? object.metadata."
                               "labels.missing == 'x' : false' resulted in error: no such key: missing")
    assert (await client.create(CMS, {"metadata": {"name": "unmarked"}})).get("metadata", {}).get("annotations") \
        is None


async def test_the_policys_write_is_validated_as_upstreams(client: Client) -> None:
    bad = policy("bad", json_patch("[JSONPatch{"), {"patchType": "ApplyConfiguration"}, {"patchType": "Foo"},
                 rule={**CONFIGMAPS_RULE, "operations": ["DELETE"]},
                 variables=[{"name": "1x", "expression": "nosuch(1)"}],
                 matchConditions=[{"name": "c", "expression": "object.x >"}])
    del bad["spec"]["reinvocationPolicy"]
    with pytest.raises(ApiError) as e:
        await client.create(POLICIES, bad)
    assert e.value.code == 422 and e.value.status is not None
    causes = [(c["field"], c["message"].split(":")[0]) for c in e.value.status["details"]["causes"]]
    assert causes == [
        ("spec.matchConstraints.resourceRules.operations", "Unsupported value"),
        ("spec.matchConditions[0].expression", "Invalid value"),
        ("spec.variables[0].name", "Invalid value"),
        ("spec.variables[0].expression", "Invalid value"),
        ("spec.mutations[0].jsonPatch.expression", "Invalid value"),
        ("spec.mutations[1].applyConfiguration", "Required value"),
        ("spec.mutations[2].patchType", "Unsupported value"),
        ("spec.reinvocationPolicy", "Required value")]
    messages = {c["field"]: c["message"] for c in e.value.status["details"]["causes"]}
    assert messages["spec.mutations[1].applyConfiguration"] == \
        "Required value: must be specified when patchType is ApplyConfiguration"
    assert messages["spec.variables[0].expression"].startswith(
        'Invalid value: "nosuch(1)": compilation failed: ERROR: <input>:1:7: undeclared reference to \'nosuch\'')
    with pytest.raises(ApiError) as e:
        await client.create(POLICIES, {"metadata": {"name": "empty"}, "spec": {"reinvocationPolicy": "Never"}})
    assert [c["field"] for c in e.value.status["details"]["causes"]] == [
        "spec.matchConstraints", "spec.mutations"]
    with pytest.raises(ApiError) as e:
        await client.create(BINDINGS, {"metadata": {"name": "b"}, "spec": {"paramRef": {"name": "x"}}})
    assert [(c["field"], c["message"]) for c in e.value.status["details"]["causes"]] == [
        ("spec.policyName", "Required value"), ("spec.paramRef.parameterNotFoundAction", "Required value")]
    made = await client.create(POLICIES, policy("good", json_patch("[]")))
    assert made["spec"]["failurePolicy"] == "Fail" and made["metadata"]["generation"] == 1
    assert made["spec"]["matchConstraints"] == {"matchPolicy": "Equivalent", "namespaceSelector": {},
                                                "objectSelector": {},
                                                "resourceRules": [{**CONFIGMAPS_RULE, "scope": "*"}]}


# -- over a socket, with the mutating webhooks -------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("map-serve"), extra=("--no-scheduler",))) as s:
        yield s


def _wait_listed(http: httpx.Client, path: str, name: str) -> None:
    for _ in range(500):  # admission reads the watch cache
        if name in {o["metadata"]["name"] for o in http.get(path, params={"resourceVersion": "0"}).json()["items"]}:
            return
        time.sleep(0.01)
    raise AssertionError(f"{name} never listed")


def test_policies_run_before_the_webhooks_and_again_after_them(served: Serve, hook: WebhookServer) -> None:
    """The webhook sees what the policy did; the policy (IfNeeded) runs once more because the
    webhook added a label, and sees it."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        selector = {"matchLabels": {"case": "map"}}
        r = http.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", json={
            "metadata": {"name": "after-policies"}, "webhooks": [{
                "name": "mutate.example.com", "clientConfig": {"url": hook.url("/mutate"), "caBundle": hook.ca_bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}],
                "objectSelector": selector, "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "after-policies")
        counting = ('Object{metadata: Object.metadata{annotations: '
                    '{"labels": string(size(object.metadata.labels))}}}')
        assert http.post(POLICIES, json=policy("count", apply_configuration(counting), reinvocationPolicy="IfNeeded",
                                               matchConstraints={"resourceRules": [CONFIGMAPS_RULE],
                                                                 "objectSelector": selector})).status_code == 201
        assert http.post(BINDINGS, json={"metadata": {"name": "count"}, "spec": {"policyName": "count"}}).status_code \
            == 201
        _wait_listed(http, BINDINGS, "count")
        r = http.post(CMS, json={"metadata": {"name": "hooked", "labels": {"case": "map"}}})
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["labels"] == {"case": "map", "mutated": "yes"}
        assert r.json()["metadata"]["annotations"] == {"labels": "2"}  # run again after the webhook's label
        seen = [s for s in hook.seen("/mutate") if s["name"] == "hooked"][-1]
        assert seen["object"]["metadata"]["annotations"] == {"labels": "1"}  # the policy ran first


def test_a_patch_that_does_not_apply_is_refused_in_upstreams_words(served: Serve) -> None:
    """Over the socket: a JSONPatch mutation applied as upstream's json-patch library applies it
    (a replace of a missing key adds it; one under a missing object does not apply), its error in
    the library's words in upstream's Status: 403, reason Invalid, no ``... is forbidden:``
    prefix, the message the one cause, the details naming the object as the request does."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    only = {"resourceRules": [CONFIGMAPS_RULE], "objectSelector": {"matchLabels": {"case": "go-patch"}}}
    patches = ('[JSONPatch{op: "replace", path: "/metadata/annotations/added", value: "yes"}, '
               'JSONPatch{op: "replace", path: "/data/missing", value: "x"}]')
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        r = http.post(POLICIES, json=policy("go-patch", json_patch(patches), matchConstraints=only,
                                            matchConditions=[{"name": "data", "expression": "!has(object.data)"}]))
        assert r.status_code == 201, r.text
        assert http.post(BINDINGS, json={"metadata": {"name": "go-patch"}, "spec": {"policyName": "go-patch"}}) \
            .status_code == 201
        _wait_listed(http, BINDINGS, "go-patch")
        r = http.post(CMS, json={"metadata": {"generateName": "refused-", "labels": {"case": "go-patch"},
                                              "annotations": {"kept": "yes"}}})
        message = ("policy 'go-patch' with binding 'go-patch' denied request: JSON Patch: replace operation does "
                   "not apply: doc is missing path: /data/missing: missing value")
        assert (r.status_code, r.json()) == (403, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Invalid", "details": {"name": "refused-", "kind": "configmaps", "causes": [
                {"message": message}]}, "code": 403})
        # an empty map is no map once decoded: upstream patches the object as Go encodes it,
        # where ``annotations: {}`` (omitempty) is not, so the first replace does not apply
        r = http.post(CMS, json={"metadata": {"generateName": "refused-", "labels": {"case": "go-patch"},
                                              "annotations": {}}})
        assert r.json()["message"] == ("policy 'go-patch' with binding 'go-patch' denied request: JSON Patch: "
                                       "replace operation does not apply: doc is missing path: "
                                       "/metadata/annotations/added: missing value")
        r = http.post(CMS, json={"metadata": {"name": "applied", "labels": {"case": "go-patch"}, "annotations": {}},
                                 "data": {"missing": "a"}})
        assert r.status_code == 201, r.text  # (the match condition leaves it out: nothing refused)
        # upstream's matcher times an evaluation that does not match, labelled as its plugin labels it
        timed = _metric(http, "apiserver_admission_match_condition_evaluation_seconds_count")
        assert [v for labels, v in timed if labels == {"name": "go-patch", "kind": "policy", "type": "validate",
                                                        "operation": "CREATE"}] == [1.0]


def test_a_failed_mutation_leaves_the_others_applied_over_the_socket(served: Serve) -> None:
    """Over the socket, as upstream's dispatcher: under ``Ignore`` a mutation that fails is
    skipped and those before and after it apply; under ``Fail`` the Status has one cause per
    failed mutation."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    mutations = (json_patch('[JSONPatch{op: "add", path: "/metadata/annotations", value: {"first": "1"}}]'),
                 json_patch('[JSONPatch{op: "replace", path: "/data/x/y", value: "1"}]'),
                 json_patch('[JSONPatch{op: "add", path: "/metadata/annotations/last", '
                            'value: string(size(object.metadata.annotations))}]'))
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        for name, failure in (("skip-failed", "Ignore"), ("each-failed", "Fail")):
            only = {"resourceRules": [CONFIGMAPS_RULE], "objectSelector": {"matchLabels": {"case": name}}}
            r = http.post(POLICIES, json=policy(name, *mutations, mutations[1], matchConstraints=only,
                                                failurePolicy=failure))
            assert r.status_code == 201, r.text
            r = http.post(BINDINGS, json={"metadata": {"name": name}, "spec": {"policyName": name}})
            assert r.status_code == 201, r.text
            _wait_listed(http, BINDINGS, name)
        r = http.post(CMS, json={"metadata": {"name": "skipped", "labels": {"case": "skip-failed"}}})
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["annotations"] == {"first": "1", "last": "1"}
        r = http.post(CMS, json={"metadata": {"name": "refused", "labels": {"case": "each-failed"}}})
        message = ("policy 'each-failed' with binding 'each-failed' denied request: JSON Patch: replace operation "
                   "does not apply: doc is missing path: /data/x/y: missing value")
        assert (r.status_code, r.json()["reason"], r.json()["message"]) == (403, "Invalid", message)
        assert r.json()["details"]["causes"] == [{"message": message}, {"message": message}]
        # each mutation in upstream's apiserver_mutating_admission_policy_check_* (the IfNeeded-less
        # policies applied once: no second round counts for them)
        checks = _metric(http, "apiserver_mutating_admission_policy_check_total")
        for name in ("skip-failed", "each-failed"):
            assert {labels["error_type"]: value for labels, value in checks
                    if labels["policy"] == name and labels["policy_binding"] == name} == \
                {"no_error": 2.0, "invalid_error": 2.0}, name
        seconds = _metric(http, "apiserver_mutating_admission_policy_check_duration_seconds_count")
        assert sum(v for labels, v in seconds if labels["policy"] == "each-failed") == 4


def _metric(http: httpx.Client, sample: str) -> list[tuple[dict[str, str], float]]:
    """The server's /metrics samples named ``sample``: (labels, value)."""
    return [(s.labels, s.value) for family in text_string_to_metric_families(http.get("/metrics").text)
            for s in family.samples if s.name == sample]


def _counter(key: str) -> str:
    """An apply configuration counting the policy's runs in an annotation ``key``."""
    return (f'Object{{metadata: Object.metadata{{annotations: {{"{key}": has(object.metadata.annotations) && '
            f'"{key}" in object.metadata.annotations ? string(int(object.metadata.annotations["{key}"]) + 1) '
            f': "1"}}}}}}')


def test_policies_and_webhooks_share_one_second_round(served: Serve, hook: WebhookServer) -> None:
    """Upstream's admission chain run a second time (``admission/reinvocation.go``, the policies'
    and webhooks' dispatchers): a policy that applied a mutation asks for it, and every IfNeeded
    policy invoked runs once more (upstream's ``Dirty`` attributes: even when nothing after it
    changed the object), a Never one not; then an IfNeeded webhook is called again when the
    policies' second round changed the object, though no later webhook did."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        r = http.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", json={
            "metadata": {"name": "rounds"}, "webhooks": [{
                "name": "count.rounds.example.com", "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"url": hook.url("/count"), "caBundle": hook.ca_bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {"case": "rounds"}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "rounds")
        constraints = {"resourceRules": [CONFIGMAPS_RULE], "objectSelector": {"matchExpressions": [
            {"key": "case", "operator": "In", "values": ["rounds", "alone"]}]}}
        seen = ('Object{metadata: Object.metadata{annotations: {"seen": has(object.metadata.annotations) && '
                '"calls" in object.metadata.annotations ? object.metadata.annotations["calls"] : "none"}}}')
        made = (("rounds-if-needed", [apply_configuration(seen), apply_configuration(_counter("runs"))], "IfNeeded"),
                ("rounds-a-never", [apply_configuration(_counter("never-runs"))], "Never"))
        for name, mutations, reinvocation in made:
            assert http.post(POLICIES, json=policy(name, *mutations, reinvocationPolicy=reinvocation,
                                                   matchConstraints=constraints)).status_code == 201
            assert http.post(BINDINGS, json={"metadata": {"name": name}, "spec": {"policyName": name}}).status_code \
                == 201
        _wait_listed(http, BINDINGS, "rounds-if-needed")
        _wait_listed(http, BINDINGS, "rounds-a-never")
        # no webhook, and no policy after the IfNeeded one (the bindings in name order): run again all the same
        r = http.post(CMS, json={"metadata": {"name": "alone", "labels": {"case": "alone"}}})
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["annotations"] == {"seen": "none", "runs": "2", "never-runs": "1"}
        r = http.post(CMS, json={"metadata": {"name": "rounds", "labels": {"case": "rounds"}}})
        assert r.status_code == 201, r.text
        # the policy saw the webhook's first call the second time, and the webhook was called again after it
        assert r.json()["metadata"]["annotations"] == {"seen": "1", "runs": "2", "never-runs": "1", "calls": "2"}
        reviews = [s for s in hook.seen("/count") if s["name"] == "rounds"]
        assert [s["object"]["metadata"]["annotations"].get("seen") for s in reviews] == ["none", "1"]


def test_the_built_in_admission_runs_again_over_the_socket(served: Serve, hook: WebhookServer) -> None:
    """Over the socket, upstream's second round of the whole mutating chain: the sidecar a
    policy added gets the ServiceAccount token mount and its LimitRange defaults from the
    built-in admission run again, and that change has the IfNeeded webhook, which changed
    nothing since, called once more (upstream's ``IsOutputChangedSinceLastWebhookInvocation``)."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    selector = {"matchLabels": {"case": "built-in"}}
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        assert http.post("/api/v1/namespaces", json={"metadata": {"name": "built-in"}}).status_code == 201
        r = http.post("/api/v1/namespaces/built-in/limitranges", json={"metadata": {"name": "defaults"}, "spec": {
            "limits": [{"type": "Container", "defaultRequest": {"cpu": "200m"}}]}})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/api/v1/namespaces/built-in/limitranges", "defaults")
        r = http.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", json={
            "metadata": {"name": "built-in"}, "webhooks": [{
                "name": "count.built-in.example.com", "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"url": hook.url("/count"), "caBundle": hook.ca_bundle},
                "rules": [PODS_RULE], "objectSelector": selector,
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "built-in")
        only = {"resourceRules": [PODS_RULE], "objectSelector": selector}
        r = http.post(POLICIES, json=policy("built-in-sidecar", SIDECAR, matchConstraints=only))
        assert r.status_code == 201, r.text
        r = http.post(BINDINGS, json={"metadata": {"name": "built-in-sidecar"},
                                      "spec": {"policyName": "built-in-sidecar"}})
        assert r.status_code == 201, r.text
        _wait_listed(http, BINDINGS, "built-in-sidecar")
        pod = {"metadata": {"name": "reinvoked", "labels": {"case": "built-in"}},
               "spec": {"containers": [{"name": "c", "image": "app"}]}}
        for _ in range(500):  # (the namespace's default ServiceAccount, made just after it)
            r = http.post("/api/v1/namespaces/built-in/pods", json=pod)
            if r.status_code != 403 or "serviceaccount" not in r.text:
                break
            time.sleep(0.01)
        assert r.status_code == 201, r.text
        made = r.json()
        containers = {c["name"]: c for c in made["spec"]["containers"]}
        assert list(containers) == ["c", "sidecar"]
        assert containers["sidecar"]["resources"] == {"requests": {"cpu": "200m"}}
        mounts = [m["mountPath"] for m in containers["sidecar"]["volumeMounts"]]
        assert mounts == ["/var/run/secrets/kubernetes.io/serviceaccount"]
        assert len([v for v in made["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]) == 1
        assert made["metadata"]["annotations"]["calls"] == "2"
        reviews = [s for s in hook.seen("/count") if s["name"] == "reinvoked"]
        assert [[c["name"] for c in s["object"]["spec"]["containers"]] for s in reviews] == [["c", "sidecar"]] * 2
        assert reviews[0]["object"]["spec"]["containers"][1]["resources"] == {}  # (defaulted in between)
        assert reviews[1]["object"]["spec"]["containers"][1]["resources"] == {"requests": {"cpu": "200m"}}


async def test_match_conditions_see_no_namespace_object(client: Client) -> None:
    """As upstream's matcher, which binds no namespace: ``namespaceObject`` is null in a
    policy's match conditions, the namespace in its mutations."""
    await client.create(POLICIES, policy("namespaced", apply_configuration(
        'Object{data: {"namespace": namespaceObject.metadata.name}}'),
        matchConditions=[{"name": "null", "expression": "namespaceObject == null"}]))
    await bind(client, "namespaced", "namespaced")
    made = await client.create(CMS, {"metadata": {"name": "seen"}})
    assert made["data"] == {"namespace": "default"}


def test_the_second_round_matches_every_webhook(served: Serve, hook: WebhookServer) -> None:
    """Upstream's webhook dispatcher matches every webhook in the second round before it asks
    whether to call it again: a webhook not called in the first round (its condition false)
    is not called in the second, but its condition's error there, on what the IfNeeded
    policy's second run made, refuses the write."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    selector = {"matchLabels": {"case": "second-match"}}
    condition = ("object.metadata.annotations['second-runs'] == '2' ? object.metadata.labels.missing == 'x' : "
                 "false")
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        r = http.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", json={
            "metadata": {"name": "second-match"}, "webhooks": [{
                "name": "second-match.example.com", "clientConfig": {"url": hook.url("/mutate"),
                                                                     "caBundle": hook.ca_bundle},
                "rules": [CONFIGMAPS_RULE], "objectSelector": selector,
                "matchConditions": [{"name": "second", "expression": condition}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "second-match")
        only = {"resourceRules": [CONFIGMAPS_RULE], "objectSelector": selector}
        r = http.post(POLICIES, json=policy("second-runs", apply_configuration(_counter("second-runs")),
                                            reinvocationPolicy="IfNeeded", matchConstraints=only))
        assert r.status_code == 201, r.text
        r = http.post(BINDINGS, json={"metadata": {"name": "second-runs"}, "spec": {"policyName": "second-runs"}})
        assert r.status_code == 201, r.text
        _wait_listed(http, BINDINGS, "second-runs")
        r = http.post(CMS, json={"metadata": {"name": "second-match", "labels": {"case": "second-match"}}})
        assert (r.status_code, r.json()["message"]) == (
            403, f"configmaps \"second-match\" is forbidden: expression '{condition}' resulted in error: no such "
                 "key: missing"), r.text
        assert not [s for s in hook.seen("/mutate") if s["name"] == "second-match"]


def test_a_limit_a_policy_lowered_is_held_to_the_limit_range_over_the_socket(served: Serve) -> None:
    """LimitRanger's bounds in validating admission, after the policies, over a socket."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    selector = {"matchLabels": {"case": "bounded"}}
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        assert http.post("/api/v1/namespaces", json={"metadata": {"name": "bounded"}}).status_code == 201
        r = http.post("/api/v1/namespaces/bounded/limitranges", json={"metadata": {"name": "max"}, "spec": {
            "limits": [{"type": "Container", "max": {"cpu": "1"}}]}})
        assert r.status_code == 201, r.text
        _wait_listed(http, "/api/v1/namespaces/bounded/limitranges", "max")
        lower = apply_configuration('Object{spec: Object.spec{containers: [Object.spec.containers{name: "c", '
                                    'resources: Object.spec.containers.resources{limits: {"cpu": "500m"}}}]}}')
        r = http.post(POLICIES, json=policy("bounded-lower", lower, matchConstraints={
            "resourceRules": [PODS_RULE], "objectSelector": selector}))
        assert r.status_code == 201, r.text
        r = http.post(BINDINGS, json={"metadata": {"name": "bounded-lower"}, "spec": {"policyName": "bounded-lower"}})
        assert r.status_code == 201, r.text
        _wait_listed(http, BINDINGS, "bounded-lower")
        pod: dict[str, Any] = {"metadata": {"name": "lowered", "labels": {"case": "bounded"}}, "spec": {"containers": [
            {"name": "c", "image": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "2"}}}]}}
        for _ in range(500):  # (the namespace's default ServiceAccount, made just after it)
            r = http.post("/api/v1/namespaces/bounded/pods", json=pod)
            if r.status_code != 403 or "serviceaccount" not in r.text:
                break
            time.sleep(0.01)
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m"}
        del pod["metadata"]["labels"]  # without the policy: the range's maximum holds
        r = http.post("/api/v1/namespaces/bounded/pods", json={**pod, "metadata": {"name": "unlowered"}})
        assert r.status_code == 403, r.text
        assert r.json()["message"] == \
            'pods "unlowered" is forbidden: maximum cpu usage per Container is 1, but limit is 2'


def test_a_field_of_the_null_namespace_object_is_no_such_key_over_the_socket(served: Serve) -> None:
    """``namespaceObject`` is null in a policy's match conditions: selecting a field of it is
    cel-go's ``no such key``, the match condition's error refusing the write (failurePolicy Fail)."""
    token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
    selector = {"matchLabels": {"case": "null-namespace"}}
    condition = "namespaceObject.metadata.name == 'default'"
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        r = http.post(POLICIES, json=policy("null-namespace", json_patch("[]"), matchConstraints={
            "resourceRules": [CONFIGMAPS_RULE], "objectSelector": selector},
            matchConditions=[{"name": "namespaced", "expression": condition}]))
        assert r.status_code == 201, r.text
        r = http.post(BINDINGS, json={"metadata": {"name": "null-namespace"},
                                      "spec": {"policyName": "null-namespace"}})
        assert r.status_code == 201, r.text
        _wait_listed(http, BINDINGS, "null-namespace")
        r = http.post("/api/v1/namespaces/default/configmaps",
                      json={"metadata": {"name": "nulled", "labels": {"case": "null-namespace"}}})
        assert r.status_code == 403 and r.json()["reason"] == "Invalid", r.text  # (upstream's addConfigError)
        assert r.json()["message"] == (f"policy 'null-namespace' with binding 'null-namespace' denied request: "
                                       f"expression '{condition}' resulted in error: no such key: metadata")
