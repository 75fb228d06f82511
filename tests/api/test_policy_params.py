"""Parameters of admission policies (api/policyparams.py): a policy's ``paramKind`` and its
bindings' ``paramRef`` resolved per request as upstream's ``CollectParams``: by name or by
selector (the policy evaluated once per param), in the binding's namespace or the request's,
``parameterNotFoundAction`` Deny and Allow, a ``paramKind`` not served under the failure
policy; ``params`` in validations, message expressions, match conditions, variables and
mutations. Upstream's messages and Status, as its dispatchers word them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

VAPS = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
VAP_BINDINGS = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
MAPS = resource_path("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
MAP_BINDINGS = resource_path("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings")
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
LIMITS = resource_path("rules.example.com", "v1", "replicalimits", "default")
CMS = resource_path("", "v1", "configmaps", "default")
SECRETS = resource_path("", "v1", "secrets", "default")
DEPLOYMENTS_RULE = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["deployments"]}


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def validating(name: str, param_kind: dict[str, str] | None, validations: list[dict[str, Any]],
               **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        **({"paramKind": param_kind} if param_kind else {}),
        "matchConstraints": {"resourceRules": [DEPLOYMENTS_RULE]}, "validations": validations, **spec}}


async def listed(client: Client, path: str, name: str) -> None:
    while name not in {o["metadata"]["name"] for o in (await client.list(path, resourceVersion="0"))["items"]}:
        await asyncio.sleep(0.01)  # admission reads the watch cache


async def bind(client: Client, path: str, name: str, policy_name: str, **spec: Any) -> None:
    await client.create(path, {"metadata": {"name": name}, "spec": {"policyName": policy_name, **spec}})
    await listed(client, path, name)


async def replica_limit_crd(client: Client) -> None:
    await client.create(CRDS, {"metadata": {"name": "replicalimits.rules.example.com"}, "spec": {
        "group": "rules.example.com", "scope": "Namespaced",
        "names": {"plural": "replicalimits", "singular": "replicalimit", "kind": "ReplicaLimit"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"maxReplicas": {"type": "integer"}}}}}]}})
    for _ in range(500):
        try:
            await client.list(LIMITS)
            return
        except ApiError as e:
            if e.code != 404:
                raise
            await asyncio.sleep(0.01)
    raise AssertionError("replicalimits never served")


async def test_a_crd_param_by_name_limits_replicas(client: Client) -> None:
    """The kubernetes.io page's ``replicalimit`` example: a ReplicaLimit param named by the binding."""
    await replica_limit_crd(client)
    await client.create(LIMITS, {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit",
                                 "metadata": {"name": "limit-test"}, "maxReplicas": 3})
    await client.create(VAPS, validating(
        "replicalimit", {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
        [{"expression": "object.spec.replicas <= params.maxReplicas",
          "messageExpression": "'replicas must be no greater than ' + string(params.maxReplicas)",
          "reason": "Invalid"}]))
    await bind(client, VAP_BINDINGS, "replicalimit", "replicalimit", validationActions=["Deny"],
               paramRef={"name": "limit-test", "namespace": "default", "parameterNotFoundAction": "Deny"})
    await client.create(DEPLOYMENTS, deployment("small", 3))
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("big", 4))
    assert e.value.code == 422 and e.value.message == ('deployments.apps "big" is forbidden: '
                                                       "ValidatingAdmissionPolicy 'replicalimit' with binding "
                                                       "'replicalimit' denied request: replicas must be no greater "
                                                       "than 3")
    await client.patch(f"{LIMITS}/limit-test", {"maxReplicas": 5})
    for _ in range(500):  # the param as the watch cache has it
        try:
            await client.create(DEPLOYMENTS, deployment("big", 4))
            break
        except ApiError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("the raised limit never applied")
    await client.delete(f"{LIMITS}/limit-test")
    denied: ApiError | None = None
    for attempt in range(500):  # none found, Deny: upstream's configuration error, whatever the replicas
        try:
            await client.create(DEPLOYMENTS, deployment(f"one-{attempt}", 1))
        except ApiError as e:
            denied = e
            break
        await asyncio.sleep(0.01)
    assert denied is not None, "a missing param never denied"
    assert denied.code == 422 and denied.message == (
        f'deployments.apps "one-{attempt}" is forbidden: '
        "ValidatingAdmissionPolicy 'replicalimit' with binding 'replicalimit' denied request: failed to "
        "configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")


async def test_a_selector_evaluates_each_param_and_allow_skips_none_found(client: Client) -> None:
    await client.create(VAPS, validating(
        "labelled", {"apiVersion": "v1", "kind": "ConfigMap"},
        [{"expression": "!(params.data.forbidden in object.metadata.labels)",
          "messageExpression": "'label ' + params.data.forbidden + ' is forbidden by ' + params.metadata.name"}],
        variables=[{"name": "key", "expression": "params.data.forbidden"}],
        matchConditions=[{"name": "param-enabled", "expression": "params.data.enabled == 'true'"}]))
    for name, key, enabled in (("a", "x", "true"), ("b", "y", "true"), ("c", "z", "false")):
        await client.create(CMS, {"metadata": {"name": name, "labels": {"rule": "labels"}},
                                  "data": {"forbidden": key, "enabled": enabled}})
    await client.create(CMS, {"metadata": {"name": "other"}, "data": {"forbidden": "w", "enabled": "true"}})
    await bind(client, VAP_BINDINGS, "labelled", "labelled", validationActions=["Deny"],
               paramRef={"selector": {"matchLabels": {"rule": "labels"}}, "parameterNotFoundAction": "Allow"})

    async def refused(labels: dict[str, str]) -> str | None:
        made = deployment("labelled", 1)
        made["metadata"]["labels"] = labels
        try:
            await client.create(DEPLOYMENTS, made)
        except ApiError as e:
            return f"{e.code} {e.message}"
        await client.delete(f"{DEPLOYMENTS}/labelled")
        return None

    prefix = '422 deployments.apps "labelled" is forbidden: ' \
        "ValidatingAdmissionPolicy 'labelled' with binding 'labelled' denied request: "
    assert await refused({"x": "1"}) == prefix + "label x is forbidden by a"
    assert await refused({"y": "1"}) == prefix + "label y is forbidden by b"
    assert await refused({"z": "1", "w": "1"}) is None  # c's match condition is false; other is not selected
    await client.delete(f"{CMS}/a")
    await client.delete(f"{CMS}/b")
    await client.delete(f"{CMS}/c")
    for _ in range(500):  # none selected, Allow: the policy is not evaluated
        if await refused({"x": "1", "y": "1"}) is None:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the deleted params still applied")


async def test_namespaces_of_params_and_a_param_kind_not_served(client: Client) -> None:
    await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": "team"}})
    await client.create(resource_path("", "v1", "configmaps", "team"),
                        {"metadata": {"name": "limits"}, "data": {"max": "2"}})
    await client.create(VAPS, validating(
        "by-namespace", {"apiVersion": "v1", "kind": "ConfigMap"},
        [{"expression": "object.spec.replicas <= int(params.data.max)"}]))
    await bind(client, VAP_BINDINGS, "by-namespace", "by-namespace", validationActions=["Deny"],
               paramRef={"name": "limits", "parameterNotFoundAction": "Deny"})
    team = resource_path("apps", "v1", "deployments", "team")
    await client.create(team, deployment("two", 2))  # the request's namespace holds the param
    with pytest.raises(ApiError) as e:
        await client.create(team, deployment("three", 3))
    assert e.value.message.endswith("denied request: failed expression: object.spec.replicas <= int(params.data.max)")
    with pytest.raises(ApiError) as e:  # default has no 'limits'
        await client.create(DEPLOYMENTS, deployment("two", 2))
    assert e.value.message.endswith("failed to configure binding: no params found for policy binding with `Deny` "
                                    "parameterNotFoundAction")
    await client.delete(f"{VAP_BINDINGS}/by-namespace")

    await client.create(VAPS, validating(
        "unserved", {"apiVersion": "rules.example.com/v1", "kind": "Nothing"}, [{"expression": "true"}]))
    await bind(client, VAP_BINDINGS, "unserved", "unserved", validationActions=["Warn"],
               paramRef={"name": "x", "parameterNotFoundAction": "Allow"})
    with pytest.raises(ApiError) as e:  # Fail: denied, whatever the binding's actions
        await client.create(DEPLOYMENTS, deployment("unserved", 1))
    assert e.value.code == 422 and e.value.message == (
        'deployments.apps "unserved" is forbidden: ValidatingAdmissionPolicy \'unserved\' denied request: '
        "failed to configure policy: failed to find resource "
        "referenced by paramKind: 'rules.example.com/v1, Kind=Nothing'")
    unserved = await client.get(f"{VAPS}/unserved")
    unserved["spec"]["failurePolicy"] = "Ignore"
    await client.update(f"{VAPS}/unserved", unserved)
    for _ in range(500):  # Ignore: skipped
        try:
            await client.create(DEPLOYMENTS, deployment("unserved", 1))
            break
        except ApiError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("Ignore never skipped the policy")


async def test_a_cluster_scoped_request_and_a_namespaced_param_kind(client: Client) -> None:
    await client.create(VAPS, {"metadata": {"name": "ns-names"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["namespaces"]}]},
        "validations": [{"expression": "true"}]}})
    await bind(client, VAP_BINDINGS, "ns-names", "ns-names", validationActions=["Deny"],
               paramRef={"name": "x", "parameterNotFoundAction": "Allow"})
    with pytest.raises(ApiError) as e:
        await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": "refused"}})
    assert e.value.message == ('namespaces "refused" is forbidden: '
                               "ValidatingAdmissionPolicy 'ns-names' with binding 'ns-names' denied request: failed "
                               "to configure binding: cannot use namespaced paramRef in policy binding that matches "
                               "cluster-scoped resources")


async def test_a_mutating_policy_with_params(client: Client) -> None:
    await client.create(CMS, {"metadata": {"name": "defaults", "labels": {"defaults": "yes"}},
                              "data": {"team": "core"}})
    await client.create(CMS, {"metadata": {"name": "more-defaults", "labels": {"defaults": "yes"}},
                              "data": {"owner": "ops"}})
    await client.create(MAPS, {"metadata": {"name": "team"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["secrets"]}]},
        "variables": [{"name": "labels", "expression": "params.data"}],
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
            "expression": "Object{metadata: Object.metadata{labels: variables.labels}}"}}]}})
    await bind(client, MAP_BINDINGS, "team", "team",
               paramRef={"selector": {"matchLabels": {"defaults": "yes"}}, "parameterNotFoundAction": "Deny"})
    made = await client.create(SECRETS, {"metadata": {"name": "s"}, "data": {}})
    assert made["metadata"]["labels"] == {"team": "core", "owner": "ops"}  # once per param

    await client.create(MAPS, {"metadata": {"name": "missing"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["secrets"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}})
    await bind(client, MAP_BINDINGS, "missing", "missing",
               paramRef={"name": "absent", "parameterNotFoundAction": "Deny"})
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "t"}, "data": {}})
    message = ("policy 'missing' with binding 'missing' denied request: failed to configure binding: no params found "
               "for policy binding with `Deny` parameterNotFoundAction")
    assert e.value.code == 403 and e.value.reason == "Forbidden" and e.value.message == message
    assert e.value.status["details"] == {"name": "t", "kind": "secrets", "causes": [{"message": message}]}
    await client.delete(f"{MAP_BINDINGS}/missing")
    await bind(client, MAP_BINDINGS, "allowed", "missing",
               paramRef={"name": "absent", "parameterNotFoundAction": "Allow"})
    made = await client.create(SECRETS, {"metadata": {"name": "t"}, "data": {}})
    assert made["metadata"]["labels"] == {"team": "core", "owner": "ops"}

    await client.create(MAPS, {"metadata": {"name": "unserved"}, "spec": {
        "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "Nothing"},
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["secrets"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}})
    await bind(client, MAP_BINDINGS, "unserved", "unserved", paramRef={"name": "x", "parameterNotFoundAction": "Allow"})
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "u"}, "data": {}})
    assert e.value.code == 403 and e.value.message == (
        "policy \"unserved\" denied request: failed to configure policy: failed to find resource referenced by "
        "paramKind: 'rules.example.com/v1, Kind=Nothing'")


async def test_a_param_is_read_in_the_version_its_kind_names(client: Client) -> None:
    """A custom resource stored as v1 and served as v2 too: a ``paramKind`` of v2 reads it as v2."""
    await client.create(CRDS, {"metadata": {"name": "quotas.rules.example.com"}, "spec": {
        "group": "rules.example.com", "scope": "Cluster",
        "names": {"plural": "quotas", "singular": "quota", "kind": "Quota"},
        "versions": [{"name": name, "served": True, "storage": name == "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"max": {"type": "integer"}}}}} for name in ("v1", "v2")]}})
    v1 = resource_path("rules.example.com", "v1", "quotas")
    for _ in range(500):
        try:
            await client.create(v1, {"apiVersion": "rules.example.com/v1", "kind": "Quota",
                                     "metadata": {"name": "q"}, "max": 2})
            break
        except ApiError as unserved:
            if unserved.code != 404:
                raise
            await asyncio.sleep(0.01)
    await client.create(VAPS, validating(
        "versioned", {"apiVersion": "rules.example.com/v2", "kind": "Quota"},
        [{"expression": "object.spec.replicas <= params.max",
          "messageExpression": "params.apiVersion + ' allows ' + string(params.max)"}]))
    await bind(client, VAP_BINDINGS, "versioned", "versioned", validationActions=["Deny"],
               paramRef={"name": "q", "parameterNotFoundAction": "Deny"})
    with pytest.raises(ApiError) as e:
        await client.create(DEPLOYMENTS, deployment("three", 3))
    assert e.value.message.endswith("denied request: rules.example.com/v2 allows 2")
    await client.patch(f"{VAP_BINDINGS}/versioned", {"spec": {"paramRef": {"namespace": "default"}}})
    refusal = ""
    for attempt in range(500):  # a cluster-scoped kind takes no namespace (once admission sees the change)
        try:
            await client.create(DEPLOYMENTS, deployment(f"one-{attempt}", 1))
        except ApiError as refused:
            refusal = refused.message
            break
        await asyncio.sleep(0.01)
    assert refusal.endswith("failed to configure binding: paramRef.namespace must not be provided for a "
                            "cluster-scoped `paramKind`")
