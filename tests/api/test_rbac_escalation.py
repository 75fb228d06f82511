"""RBAC's escalation check (api/rbacescalation.py), on rules and objects given directly: the
covering cases of upstream's ``policy_comparator_test.go``, its compaction, its message, and
the decisions of its policy-based storages."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controlplane.api.errors import ApiError
from controlplane.api.rbac import Authorizer, User
from controlplane.api.rbacescalation import (
    FULL_AUTHORITY,
    check_write,
    compact,
    compact_string,
    escalation_message,
    go_quote,
    only_gc_fields,
    uncovered,
    url_covered,
)


def rule(verbs: str, groups: list[str] | None = None, resources: list[str] | None = None,
         names: list[str] | None = None, urls: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": verbs.split()}
    for key, value in (("apiGroups", groups), ("resources", resources), ("resourceNames", names),
                       ("nonResourceURLs", urls)):
        if value is not None:
            out[key] = value
    return out


# (owner rules, servant rules, the uncovered parts) as upstream's policy_comparator_test.go
COVERS = {
    "exact match": ([rule("get", ["v1"], ["builds"])], [rule("get", ["v1"], ["builds"])], []),
    "subresource wildcard": ([rule("get", ["v1"], ["*/scale"])], [rule("get", ["v1"], ["foo/scale"])], []),
    "multiple rules covering a single rule": (
        [rule("delete", ["v1"], ["deployments"]), rule("delete", ["v1"], ["builds"]),
         rule("update", ["v1"], ["builds", "deployments"])],
        [rule("delete update", ["v1"], ["builds", "deployments"])], []),
    "multiple API groups covering a single rule": (
        [rule("delete", [g], ["deployments"]) for g in ("group1", "group2")]
        + [rule("delete", [g], ["builds"]) for g in ("group1", "group2")]
        + [rule("update", [g], ["builds", "deployments"]) for g in ("group1", "group2")],
        [rule("delete update", ["group1", "group2"], ["builds", "deployments"])], []),
    "single API groups covering multiple": (
        [rule("delete update", ["group1", "group2"], ["builds", "deployments"])],
        [rule("delete", ["group1"], ["deployments"]), rule("delete", ["group1"], ["builds"]),
         rule("update", ["group1"], ["builds", "deployments"]), rule("delete", ["group2"], ["deployments"]),
         rule("delete", ["group2"], ["builds"]), rule("update", ["group2"], ["builds", "deployments"])], []),
    "multiple rules missing a single verb-resource combination": (
        [rule("delete update", ["v1"], ["builds", "deployments"]), rule("delete", ["v1"], ["pods"])],
        [rule("delete update", ["v1"], ["builds", "deployments", "pods"])],
        [rule("update", ["v1"], ["pods"])]),
    "API group star covering multiple": (
        [rule("get", ["*"], ["roles"])], [rule("get", ["group1", "group2"], ["roles"])], []),
    "enumeration not covering API group star": (
        [rule("get", ["dummy-group"], ["roles"])], [rule("get", ["*"], ["roles"])], [rule("get", ["*"], ["roles"])]),
    "API group star covering star": ([rule("get", ["*"], ["roles"])], [rule("get", ["*"], ["roles"])], []),
    "verb star covering multiple": ([rule("*", ["v1"], ["roles"])], [rule("watch list", ["v1"], ["roles"])], []),
    "enumeration not covering verb star": (
        [rule("get list watch create update delete exec", ["v1"], ["roles"])], [rule("*", ["v1"], ["roles"])],
        [rule("*", ["v1"], ["roles"])]),
    "verb star covering star": ([rule("*", ["v1"], ["roles"])], [rule("*", ["v1"], ["roles"])], []),
    "resource star covering multiple": (
        [rule("get", ["v1"], ["*"])], [rule("get", ["v1"], ["resourcegroup:deployments"])], []),
    "enumeration not covering resource star": (
        [rule("get", ["v1"], ["roles", "resourcegroup:deployments"])], [rule("get", ["v1"], ["*"])],
        [rule("get", ["v1"], ["*"])]),
    "resource star covering star": ([rule("get", ["v1"], ["*"])], [rule("get", ["v1"], ["*"])], []),
    "resource name empty covering multiple": (
        [rule("get", ["v1"], ["pods"], [])], [rule("get", ["v1"], ["pods"], ["foo", "bar"])], []),
    "enumeration not covering resource name empty": (
        [rule("get", ["v1"], ["pods"], ["foo", "bar"])], [rule("get", ["v1"], ["pods"], [])],
        [rule("get", ["v1"], ["pods"])]),
    "non-resource URLs": ([rule("*", urls=["/apis"])], [rule("*", urls=["/apis"])], []),
    "non-resource URLs star": ([rule("*", urls=["*"])], [rule("*", urls=["/apis", "/apis/v1", "/"])], []),
    "non-resource URLs star after a prefix does not cover the prefix": (
        [rule("*", urls=["/apis/*"])], [rule("get", urls=["/apis", "/apis/v1"])], [rule("get", urls=["/apis"])]),
    "non-resource URLs star after a prefix": (
        [rule("*", urls=["/apis/*"])], [rule("get", urls=["/apis/v1/foo", "/apis/v1"])], []),
    "non-resource URLs with other fields": (
        [rule("get", ["v1"], ["builds"], urls=["/apis"])], [rule("get", ["v1"], ["builds"], urls=["/apis"])], []),
    "non-resource URLs with other fields failure": (
        [rule("get", ["v1"], ["builds"])], [rule("get", ["v1"], ["builds"], urls=["/apis"])],
        [rule("get", urls=["/apis"])]),
}


@pytest.mark.parametrize("case", COVERS)
def test_covers_as_upstreams_comparator(case: str) -> None:
    owner, servant, expected = COVERS[case]
    assert uncovered(owner, servant) == expected


@pytest.mark.parametrize(("owner", "url", "covered"), [
    ("*", "", True), ("*", "/", True), ("*", "/api", True), ("/*", "", False), ("/*", "/", True),
    ("/*", "/foo", True), ("/api", "/api", True), ("/apis", "/api", False), ("/api/v1", "/api", False),
    ("/api/v1", "/api/v1", True), ("/api/*", "/api/v1", True), ("/api/*", "/api", False),
    ("/api/*/*", "/api/v1", False), ("/*/v1/*", "/api/v1", False),
])
def test_non_resource_url_covers_as_upstreams(owner: str, url: str, covered: bool) -> None:
    assert url_covered(owner, url) is covered


def test_a_rule_granting_nothing_is_covered_by_nothing() -> None:
    # no verbs, or resources without groups: BreakdownRule makes no parts, so nothing is missing
    assert uncovered([], [rule("", ["v1"], ["pods"]), {"verbs": ["get"], "resources": ["pods"]}]) == []


def test_compact_merges_verbs_by_group_resource_and_name() -> None:
    missing = uncovered([], [rule("get list", [""], ["pods"]), rule("get", [""], ["pods"], ["a", "b"]),
                             rule("get", urls=["/x"]), rule("watch", [""], ["pods"])])
    assert compact(missing) == [
        rule("get", urls=["/x"]),
        rule("get list watch", [""], ["pods"]),
        rule("get", [""], ["pods"], ["a"]),
        rule("get", [""], ["pods"], ["b"])]


def test_compact_string_as_upstreams() -> None:
    assert compact_string(rule("get list", [""], ["pods"])) == \
        '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}'
    assert compact_string(rule("get", ["apps"], ["deployments"], ["web"])) == \
        '{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get"]}'
    assert compact_string(rule("get", urls=["/healthz"])) == '{NonResourceURLs:["/healthz"], Verbs:["get"]}'
    assert go_quote('a"b\\c\n\x01é') == '"a\\"b\\\\c\\n\\x01é"'


def test_the_message_lists_each_missing_rule_once_sorted() -> None:
    alice = User("alice").with_authenticated()
    missing = uncovered([], [rule("list get", [""], ["secrets", "pods"]), rule("get", [""], ["pods"])])
    assert escalation_message(alice, missing) == (
        'user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["pods"], Verbs:["list" "get" "get"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["list" "get"]}')
    assert escalation_message(User("bob", ("a", "b")), missing[:1], ['roles.rbac.authorization.k8s.io "x" not found']) \
        .endswith('; resolution errors: [roles.rbac.authorization.k8s.io "x" not found]')


def test_only_gc_fields() -> None:
    old = {"metadata": {"name": "r", "resourceVersion": "5", "finalizers": ["f"]}, "rules": []}
    assert only_gc_fields({"metadata": {"name": "r", "ownerReferences": [{"uid": "u"}]}, "rules": []}, old)
    assert only_gc_fields({"metadata": {"name": "r", "managedFields": [{"manager": "gc"}]}, "rules": []}, old)
    assert not only_gc_fields({"metadata": {"name": "r"}, "rules": [rule("get", [""], ["pods"])]}, old)
    assert not only_gc_fields({"metadata": {"name": "r", "labels": {"a": "b"}}, "rules": []}, old)
    assert not only_gc_fields(old, None)


# the policy the storage checks consult: alice may read pods in dev and bind the Role "readers" there;
# ops hold every permission
OBJECTS: dict[str, list[dict[str, Any]]] = {
    "roles": [{"metadata": {"name": "alice", "namespace": "dev"}, "rules": [
        rule("get list", [""], ["pods"]), rule("bind", ["rbac.authorization.k8s.io"], ["roles"], ["readers"])]}],
    "clusterroles": [{"metadata": {"name": "all"}, "rules": list(FULL_AUTHORITY)},
                     {"metadata": {"name": "escalator"}, "rules": [
                         rule("escalate", ["rbac.authorization.k8s.io"], ["clusterroles"])]}],
    "rolebindings": [{"metadata": {"name": "alice", "namespace": "dev"}, "roleRef": {"kind": "Role", "name": "alice"},
                      "subjects": [{"kind": "User", "name": "alice"}]},
                     {"metadata": {"name": "gone", "namespace": "dev"}, "roleRef": {"kind": "Role", "name": "gone"},
                      "subjects": [{"kind": "User", "name": "alice"}]}],
    "clusterrolebindings": [{"metadata": {"name": "ops"}, "roleRef": {"kind": "ClusterRole", "name": "all"},
                             "subjects": [{"kind": "Group", "name": "ops"}]},
                            {"metadata": {"name": "esc"}, "roleRef": {"kind": "ClusterRole", "name": "escalator"},
                             "subjects": [{"kind": "User", "name": "esc"}]}],
}
STORED = {("roles", "dev", "readers"): {"rules": [rule("get", [""], ["pods"])]},
          ("roles", "dev", "writers"): {"rules": [rule("create", [""], ["pods"])]},
          ("clusterroles", "", "view"): {"rules": [rule("get", [""], ["pods"])]}}
ALICE = User("alice").with_authenticated()


async def check(user: User, plural: str, namespace: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
                url_name: str = "") -> None:
    async def list_objects(p: str) -> list[bytes]:
        return [orjson.dumps(o) for o in OBJECTS[p]]

    async def role_of(p: str, ns: str, name: str) -> dict[str, Any] | None:
        return STORED.get((p, ns, name))

    authorizer = Authorizer(list_objects, lambda: 1)
    await check_write(authorizer, authorizer, user, plural, namespace, url_name, obj, old, role_of)


def role(*rules: dict[str, Any], name: str = "r", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "rules": list(rules), **extra}


def binding(kind: str, name: str) -> dict[str, Any]:
    return {"metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}}


async def test_a_role_within_the_users_permissions_is_allowed() -> None:
    await check(ALICE, "roles", "dev", role(rule("get", [""], ["pods"])))
    await check(ALICE, "roles", "dev", role(rule("list", [""], ["pods"], ["a"])))


async def test_a_role_beyond_them_is_refused_with_upstreams_message() -> None:
    with pytest.raises(ApiError) as e:
        await check(ALICE, "roles", "dev", role(rule("get delete", [""], ["pods", "secrets"])))
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message == (
        'roles.rbac.authorization.k8s.io "r" is forbidden: user "alice" (groups=["system:authenticated"]) is '
        "attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}'
        '; resolution errors: [roles.rbac.authorization.k8s.io "gone" not found]')
    assert e.value.details == {"name": "r", "group": "rbac.authorization.k8s.io", "kind": "roles"}
    with pytest.raises(ApiError):  # elsewhere alice holds nothing
        await check(ALICE, "roles", "prod", role(rule("get", [""], ["pods"])))


async def test_masters_and_the_escalate_verb_skip_the_check() -> None:
    await check(User("root", ("system:masters",)), "clusterroles", "", role(*FULL_AUTHORITY))
    esc = User("esc").with_authenticated()
    await check(esc, "clusterroles", "", role(*FULL_AUTHORITY, aggregationRule={"clusterRoleSelectors": [{}]}))
    with pytest.raises(ApiError):  # escalate on clusterroles is not on roles
        await check(esc, "roles", "dev", role(rule("get", [""], ["pods"])))


async def test_an_aggregation_rule_needs_every_permission() -> None:
    aggregated = role(aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]})
    with pytest.raises(ApiError) as e:
        await check(ALICE, "clusterroles", "", aggregated)
    assert e.value.message == ('clusterroles.rbac.authorization.k8s.io "r" is forbidden: '
                               "must have cluster-admin privileges to use the aggregationRule")
    with pytest.raises(ApiError):  # taking it away is changing it too
        await check(ALICE, "clusterroles", "", role(), old=aggregated, url_name="r")
    await check(ALICE, "clusterroles", "", role())  # an empty role grants nothing
    await check(User("carol", ("ops",)), "clusterroles", "", aggregated)


async def test_a_gc_update_is_not_checked() -> None:
    old = role(rule("*", ["*"], ["*"]))
    await check(ALICE, "roles", "dev", {**old, "metadata": {"name": "r", "finalizers": []}}, old=old, url_name="r")


async def test_a_binding_needs_bind_or_the_roles_permissions() -> None:
    await check(ALICE, "rolebindings", "dev", binding("Role", "readers"))  # bind, by name
    await check(ALICE, "rolebindings", "dev", binding("ClusterRole", "view"))  # holds get pods in dev
    with pytest.raises(ApiError) as e:
        await check(ALICE, "rolebindings", "dev", binding("Role", "writers"))
    assert e.value.message.startswith('rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "alice"')
    assert '{APIGroups:[""], Resources:["pods"], Verbs:["create"]}' in e.value.message
    with pytest.raises(ApiError):  # cluster-wide alice holds nothing
        await check(ALICE, "clusterrolebindings", "", binding("ClusterRole", "view"))
    with pytest.raises(ApiError) as e:
        await check(ALICE, "rolebindings", "dev", binding("Role", "missing"))
    assert (e.value.code, e.value.message) == (404, 'roles.rbac.authorization.k8s.io "missing" not found')
    await check(ALICE, "rolebindings", "dev", binding("Nonsense", "x"))  # left to validation's 422
