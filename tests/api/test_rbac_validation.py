"""Roles, ClusterRoles and their bindings refused with upstream's 422s (``ValidatePolicyRule``,
``ValidateRoleBinding``, ``ValidateClusterRoleBinding``, ``ValidateRoleBindingSubject``, "cannot
change roleRef"), defaulted as v1 defaults them, named as path segments; the server's own
bootstrap policy passes the same checks unchanged."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from controlplane.api.rbac import Authorizer, Request, User
from controlplane.api.rbacreconcile import POLICY
from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.strategies import prepare

GROUP = "rbac.authorization.k8s.io"
ROLES = resource_path(GROUP, "v1", "roles", "default")
CLUSTER_ROLES = resource_path(GROUP, "v1", "clusterroles")
BINDINGS = resource_path(GROUP, "v1", "rolebindings", "default")
CLUSTER_BINDINGS = resource_path(GROUP, "v1", "clusterrolebindings")
PODS_RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}


async def causes_of(c: Client, path: str, body: dict[str, Any], update: bool = False) -> list[tuple[str, str, str]]:
    """The (reason, field, message) of each cause of the 422 a write of ``body`` gets."""
    with pytest.raises(ApiError) as e:
        await (c.update(path, body) if update else c.create(path, body))
    assert (e.value.code, e.value.reason) == (422, "Invalid"), e.value.message
    return [(x["reason"], x["field"], x["message"]) for x in e.value.status["details"]["causes"]]


def binding(name: str, ref: dict[str, Any], *subjects: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "roleRef": ref, "subjects": list(subjects)}


async def test_a_rule_without_verbs_or_resources_is_refused(client: Client) -> None:
    role = {"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []},
                                                 {"verbs": ["get"]}]}
    assert await causes_of(client, ROLES, role) == [
        ("FieldValueRequired", "rules[0].verbs", "Required value: verbs must contain at least one value"),
        ("FieldValueRequired", "rules[1].apiGroups",
         "Required value: resource rules must supply at least one api group"),
        ("FieldValueRequired", "rules[1].resources",
         "Required value: resource rules must supply at least one resource"),
    ]


async def test_non_resource_urls_only_in_cluster_roles_and_alone(client: Client) -> None:
    urls = {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}
    assert await causes_of(client, ROLES, {"metadata": {"name": "r"}, "rules": [urls]}) == [
        ("FieldValueInvalid", "rules[0].nonResourceURLs",
         'Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs')]
    mixed = {"metadata": {"name": "mixed"}, "rules": [{**urls, "resources": ["pods"]}]}
    assert await causes_of(client, CLUSTER_ROLES, mixed) == [
        ("FieldValueInvalid", "rules[0].nonResourceURLs",
         'Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs')]
    made = await client.create(CLUSTER_ROLES, {"metadata": {"name": "system:health-reader"}, "rules": [urls]})
    assert made["metadata"]["name"] == "system:health-reader"  # a path segment, not a DNS subdomain


async def test_an_aggregation_rule_needs_a_valid_selector(client: Client) -> None:
    role = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": []}}
    assert await causes_of(client, CLUSTER_ROLES, role) == [
        ("FieldValueRequired", "aggregationRule.clusterRoleSelectors",
         "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil")]
    role["aggregationRule"] = {"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}
    assert await causes_of(client, CLUSTER_ROLES, role) == [
        ("FieldValueInvalid", "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator",
         'Invalid value: "Near": not a valid selector operator')]


async def test_names_are_path_segments(client: Client) -> None:
    assert await causes_of(client, CLUSTER_ROLES, {"metadata": {"name": "a/b"}, "rules": []}) == [
        ("FieldValueInvalid", "metadata.name", "Invalid value: \"a/b\": may not contain '/'")]
    ref = {"apiGroup": GROUP, "kind": "ClusterRole", "name": ".."}
    assert await causes_of(client, CLUSTER_BINDINGS, binding("b", ref)) == [
        ("FieldValueInvalid", "roleRef.name", "Invalid value: \"..\": may not be '..'")]


async def test_a_binding_names_a_role_of_a_known_kind(client: Client) -> None:
    bogus = {"apiGroup": "example.com", "kind": "Bogus", "name": ""}
    assert await causes_of(client, BINDINGS, binding("b", bogus)) == [
        ("FieldValueNotSupported", "roleRef.apiGroup",
         'Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"'),
        ("FieldValueNotSupported", "roleRef.kind",
         'Unsupported value: "Bogus": supported values: "Role", "ClusterRole"'),
        ("FieldValueRequired", "roleRef.name", "Required value"),
    ]
    role = {"apiGroup": GROUP, "kind": "Role", "name": "r"}
    assert await causes_of(client, CLUSTER_BINDINGS, binding("b", role)) == [
        ("FieldValueNotSupported", "roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"')]


async def test_subjects_are_named_and_of_known_kinds(client: Client) -> None:
    ref = {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"}
    subjects = ({"kind": "Weird", "name": "w"}, {"kind": "User", "name": ""},
                {"kind": "ServiceAccount", "name": "Bad_Name"},
                {"kind": "ServiceAccount", "name": "sa", "apiGroup": GROUP},
                {"kind": "Group", "name": "g", "apiGroup": "example.com"})
    causes = await causes_of(client, CLUSTER_BINDINGS, binding("b", ref, *subjects))
    assert causes == [
        ("FieldValueNotSupported", "subjects[0].kind",
         'Unsupported value: "Weird": supported values: "ServiceAccount", "User", "Group"'),
        ("FieldValueRequired", "subjects[1].name", "Required value"),
        ("FieldValueInvalid", "subjects[2].name",
         'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
         "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
         r"regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ("FieldValueRequired", "subjects[2].namespace", "Required value"),
        ("FieldValueNotSupported", "subjects[3].apiGroup",
         'Unsupported value: "rbac.authorization.k8s.io": supported values: ""'),
        ("FieldValueRequired", "subjects[3].namespace", "Required value"),
        ("FieldValueNotSupported", "subjects[4].apiGroup",
         'Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"'),
    ]
    # a RoleBinding's ServiceAccount subject may leave its namespace to the binding's
    made = await client.create(BINDINGS, binding("sa", ref, {"kind": "ServiceAccount", "name": "default"}))
    assert made["subjects"] == [{"kind": "ServiceAccount", "name": "default"}]


async def test_a_binding_is_defaulted_and_its_role_ref_never_changes(client: Client) -> None:
    made = await client.create(BINDINGS, binding("b", {"kind": "Role", "name": "r"}, {"kind": "User", "name": "u"},
                                                 {"kind": "Group", "name": "g"}))
    assert made["roleRef"] == {"apiGroup": GROUP, "kind": "Role", "name": "r"}
    assert [s["apiGroup"] for s in made["subjects"]] == [GROUP, GROUP]
    made["subjects"] = [{"kind": "User", "name": "someone-else"}]  # the subjects may change
    made = await client.update(f"{BINDINGS}/b", made)
    made["roleRef"] = {"kind": "ClusterRole", "name": "r"}
    assert await causes_of(client, f"{BINDINGS}/b", made, update=True) == [
        ("FieldValueInvalid", "roleRef",
         'Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"r"}: '
         "cannot change roleRef")]


async def test_a_role_bindings_service_account_is_of_its_namespace_when_it_names_none() -> None:
    """As upstream's authorizer (``appliesToUser``): what validation lets a RoleBinding leave out."""
    role_binding = {"metadata": {"name": "b", "namespace": "dev"}, "roleRef": {"kind": "Role", "name": "r"},
                    "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}
    objects = {"roles": [{"metadata": {"name": "r", "namespace": "dev"}, "rules": [PODS_RULE]}], "clusterroles": [],
               "rolebindings": [role_binding], "clusterrolebindings": []}

    async def list_objects(plural: str) -> list[bytes]:
        return [orjson.dumps(o) for o in objects[plural]]

    authorizer = Authorizer(list_objects, lambda: 1)
    get_pod = Request("get", "", "pods", "", "dev", "p")
    assert await authorizer.allowed(User("system:serviceaccount:dev:bot").with_authenticated(), get_pod)
    assert not await authorizer.allowed(User("system:serviceaccount:prod:bot").with_authenticated(), get_pod)


def test_the_bootstrap_policy_is_valid_as_written() -> None:
    """What the server writes at start passes what a PUT of it would pass, unchanged."""
    for plural, obj in POLICY:
        body = copy.deepcopy(obj)
        assert prepare(plural, body, None) == [], obj["metadata"]["name"]
        assert body == obj, obj["metadata"]["name"]
