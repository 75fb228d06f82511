"""The RBAC authorizer's rule matching, on objects given directly (no server)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controlplane.api.rbac import ANONYMOUS, Authorizer, Request, User, forbidden, selected_name, verb_of

ROLE = {"metadata": {"name": "r", "namespace": "dev"}, "rules": [
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"], "resourceNames": ["web"]},
    {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]}]}
CLUSTER_ROLE = {"metadata": {"name": "c"}, "rules": [{"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]},
                                                     {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}
OBJECTS = {
    "roles": [ROLE], "clusterroles": [CLUSTER_ROLE],
    "rolebindings": [{"metadata": {"name": "b", "namespace": "dev"}, "roleRef": {"kind": "Role", "name": "r"},
                      "subjects": [{"kind": "ServiceAccount", "namespace": "dev", "name": "bot"}]}],
    "clusterrolebindings": [{"metadata": {"name": "cb"}, "roleRef": {"kind": "ClusterRole", "name": "c"},
                             "subjects": [{"kind": "Group", "name": "ops"}]}],
}
BOT = User("system:serviceaccount:dev:bot").with_authenticated()
OPS = User("carol", ("ops",)).with_authenticated()


async def authorizer() -> Authorizer:
    async def list_objects(plural: str) -> list[bytes]:
        return [orjson.dumps(o) for o in OBJECTS[plural]]

    return Authorizer(list_objects, lambda: 1)


@pytest.mark.parametrize(("user", "request_", "allowed"), [
    (BOT, Request("get", "", "pods", "", "dev", "p"), True),
    (BOT, Request("list", "", "pods", "", "dev"), False),
    (BOT, Request("get", "", "pods", "log", "dev", "p"), True),
    (BOT, Request("get", "", "pods", "exec", "dev", "p"), False),
    (BOT, Request("get", "", "pods", "", "prod", "p"), False),             # the binding is in dev
    (BOT, Request("update", "apps", "deployments", "", "dev", "web"), True),
    (BOT, Request("update", "apps", "deployments", "", "dev", "api"), False),  # resourceNames
    (BOT, Request("list", "apps", "deployments", "", "dev"), False),         # a named rule lists nothing
    (BOT, Request("patch", "batch", "jobs", "status", "dev", "j"), True),   # */status in any group
    (OPS, Request("get", path="/metrics"), True),
    (OPS, Request("get", path="/logs/kubelet"), True),
    (OPS, Request("get", path="/debug"), False),
    (OPS, Request("list", "", "nodes"), True),
    (OPS, Request("get", path="/apis/apps/v1"), False),  # discovery is system:discovery's binding's, not here
    (ANONYMOUS, Request("get", path="/api"), False),
    (User("root", ("system:masters",)), Request("delete", "", "nodes", "", "", "n"), True),
])
async def test_rules(user: User, request_: Request, allowed: bool) -> None:
    assert await (await authorizer()).allowed(user, request_) is allowed


def test_verbs_and_denials_are_worded_as_upstream() -> None:
    assert [verb_of("GET", True, False), verb_of("GET", False, False), verb_of("GET", False, True),
            verb_of("DELETE", False, False), verb_of("PATCH", True, False), verb_of("HEAD", True, False),
            verb_of("GET", True, True)] == ["get", "list", "watch", "deletecollection", "patch", "get", "get"]
    assert [selected_name({"fieldSelector": s}) for s in (
        "metadata.name=a", "x=1,metadata.name==b", "metadata.name!=c", "metadata.namespace=d", "metadata.name=a/b",
        "metadata.name=..", "")] == ["a", "b", "", "", "", "", ""]
    assert selected_name({}) == ""


@pytest.mark.parametrize(("selector", "name"), [
    ("metadata.name=a\\,b", "a,b"),  # fields.ParseSelector's escapes: one term, its value unescaped
    ("metadata.name=a\\=b", "a=b"),
    ("metadata.name=a\\\\b", "a\\b"),
    ("metadata.name=b,metadata.name=a", "a"),  # two terms: the first of the sorted ones
    ("metadata.name=a,metadata.name==b", "b"),  # ("==b" sorts before "=a": "=" is below "a")
    ("metadata.name!=a,metadata.name=b", "b"),
    ("metadata.name=a,", "a"),  # an empty term is skipped
    (" metadata.name=a", ""),  # the field as written: no space trimmed
    ("x=1, metadata.name==b", ""),
    ("metadata.name= a", " a"),
    ("x=1\\,metadata.name=a", ""),  # one term, x's, whose value has an unescaped "="
    ("metadata.name=a,bogus", ""),  # malformed: the request names nothing
    ("metadata.name=a,x=\\y", ""),  # an invalid escape in another term
    ("metadata.name=a\\", ""),
    ("metadata.name=a%2Fb", ""),  # no valid path segment
    ("metadata.name=", ""),
])
def test_the_name_of_a_list_by_field_selector_is_upstreams_parse(selector: str, name: str) -> None:
    """As upstream's RequestInfo: fields.ParseSelector(s).RequiresExactMatch("metadata.name")."""
    assert selected_name({"fieldSelector": selector}) == name


def test_no_name_where_the_list_options_fail_to_decode() -> None:
    """RequestInfo decodes the whole ListOptions; where that fails it takes no name."""
    ok = {"fieldSelector": "metadata.name=a"}
    assert selected_name({**ok, "labelSelector": "app=web", "limit": "5", "timeoutSeconds": "+3"}) == "a"
    assert [selected_name({**ok, key: value}) for key, value in (
        ("labelSelector", "app in (web"), ("limit", "x"), ("timeoutSeconds", "1.5"), ("limit", " 5"))] == [""] * 4
    e = forbidden(BOT, Request("get", "", "pods", "log", "dev", "p"))
    assert e.code == 403 and e.message == ('pods "p" is forbidden: User "system:serviceaccount:dev:bot" cannot get '
                                           'resource "pods/log" in API group "" in the namespace "dev"')
    assert forbidden(OPS, Request("get", path="/debug")).message == 'forbidden: User "carol" cannot get path "/debug"'
    assert forbidden(BOT, Request("list", "apps", "deployments", "", "dev")).message == (
        'deployments.apps is forbidden: User "system:serviceaccount:dev:bot" cannot list resource "deployments" in '
        'API group "apps" in the namespace "dev"')  # qualified by its group, as upstream's NewForbidden


async def _bootstrapped(role: str | None = None, user: User | None = None) -> Authorizer:
    """An authorizer over the bootstrap policy, aggregated, with ``role`` bound to ``user`` in dev."""
    from controlplane.api.rbacpolicy import aggregated_rules
    from controlplane.api.rbacreconcile import POLICY

    objects: dict[str, list[dict[str, Any]]] = {
        plural: [dict(obj) for p, obj in POLICY if p == plural]
        for plural in ("clusterroles", "roles", "clusterrolebindings", "rolebindings")}
    roles = objects["clusterroles"]
    for _ in roles:
        for r in roles:
            r["rules"] = aggregated_rules(r, roles) or r["rules"]
    if role is not None and user is not None:
        objects["rolebindings"].append({"metadata": {"name": "b", "namespace": "dev"},
                                        "roleRef": {"kind": "ClusterRole", "name": role},
                                        "subjects": [{"kind": "User", "name": user.name}]})

    async def list_objects(plural: str) -> list[bytes]:
        return [orjson.dumps(o) for o in objects[plural]]

    return Authorizer(list_objects, lambda: 0)


@pytest.mark.parametrize(("role", "request_", "allowed"), [
    ("edit", Request("patch", "", "pods", "resize", "dev", "p"), False),  # upstream grants it to no default role
    ("admin", Request("update", "", "pods", "resize", "dev", "p"), False),
    ("edit", Request("patch", "", "pods", "", "dev", "p"), True),
    ("edit", Request("create", "", "endpoints", "", "dev"), False),  # not since upstream's 1.22 (CVE-2021-25740)
    ("edit", Request("get", "", "endpoints", "", "dev", "e"), True),
    ("edit", Request("impersonate", "", "serviceaccounts", "", "dev", "bot"), True),
    ("edit", Request("create", "authorization.k8s.io", "localsubjectaccessreviews", "", "dev"), False),
    ("admin", Request("create", "authorization.k8s.io", "localsubjectaccessreviews", "", "dev"), True),
])
async def test_the_default_roles_grant_what_upstreams_do(role: str, request_: Request, allowed: bool) -> None:
    jane = User("jane").with_authenticated()
    assert await (await _bootstrapped(role, jane)).allowed(jane, request_) is allowed


@pytest.mark.parametrize(("user", "request_", "allowed"), [
    (User("jane").with_authenticated(), Request("get", path="/api"), True),  # system:discovery
    (User("jane").with_authenticated(), Request("get", path="/apis/apps/v1"), True),
    (User("jane").with_authenticated(), Request("get", path="/openapi/v3/api/v1"), True),
    (User("jane").with_authenticated(), Request("get", path="/version"), True),
    (User("jane").with_authenticated(), Request("get", path="/healthz"), True),
    (User("jane").with_authenticated(), Request("get", path="/healthz/etcd"), False),  # system:monitoring's
    (User("jane").with_authenticated(), Request("get", path="/metrics"), False),
    (User("jane").with_authenticated(), Request("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
     True),  # system:basic-user
    (User("jane").with_authenticated(), Request("create", "authentication.k8s.io", "selfsubjectreviews"), True),
    (User("jane").with_authenticated(), Request("list", "", "pods", "", "default"), False),
    (ANONYMOUS, Request("get", path="/version"), True),  # system:public-info-viewer
    (ANONYMOUS, Request("get", path="/livez"), True),
    (ANONYMOUS, Request("get", path="/readyz"), True),
    (ANONYMOUS, Request("get", path="/api"), False),  # discovery is for the authenticated only (since 1.14)
    (ANONYMOUS, Request("create", "authorization.k8s.io", "selfsubjectaccessreviews"), False),
    (User("system:kube-scheduler").with_authenticated(), Request("create", "", "pods", "binding", "dev", "p"), True),
    (User("system:kube-scheduler").with_authenticated(),
     Request("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), True),
    (User("system:kube-scheduler").with_authenticated(), Request("delete", "", "nodes", "", "", "n"), False),
    (User("system:serviceaccount:kube-system:deployment-controller").with_authenticated(),
     Request("update", "apps", "replicasets", "", "dev", "rs"), True),
    (User("system:serviceaccount:kube-system:deployment-controller").with_authenticated(),
     Request("delete", "apps", "deployments", "", "dev", "d"), False),
    (User("system:kube-scheduler").with_authenticated(),
     Request("get", "", "configmaps", "", "kube-system", "extension-apiserver-authentication"), True),  # a RoleBinding
    (User("system:kube-scheduler").with_authenticated(),
     Request("get", "", "configmaps", "", "default", "extension-apiserver-authentication"), False),
    (User("kubelet", ("system:nodes",)).with_authenticated(), Request("get", "", "secrets", "", "dev", "s"), False),
])
async def test_the_bootstrap_bindings_grant_what_upstreams_do(user: User, request_: Request, allowed: bool) -> None:
    """What a user without bindings of its own may do, and the system users' grants (the
    ``system:node`` role is bound to nobody: the Node authorizer's business upstream)."""
    assert await (await _bootstrapped()).allowed(user, request_) is allowed


async def test_a_slow_build_of_an_older_generation_never_replaces_a_newer_index() -> None:
    """A request re-indexing at generation 1 is slow in its lists; the binding lands (generation
    2) and another request re-indexes. The first build finishing last must not leave the index
    without the binding while the generation says it is current (a bug seen as a 403 that lasted
    until the next RBAC write)."""
    import asyncio

    generation = 1
    bound = False
    first_listing = asyncio.Event()
    release_first = asyncio.Event()
    held = False

    async def list_objects(plural: str) -> list[bytes]:
        nonlocal held
        objects = dict(OBJECTS, clusterrolebindings=OBJECTS["clusterrolebindings"] + ([{
            "metadata": {"name": "dave"}, "roleRef": {"kind": "ClusterRole", "name": "c"},
            "subjects": [{"kind": "User", "name": "dave"}]}] if bound else []))
        listed = [orjson.dumps(o) for o in objects[plural]]
        if plural == "clusterrolebindings" and not held:  # the first build's: answered late, as it was
            held = True
            first_listing.set()
            await release_first.wait()
        return listed

    authz = Authorizer(list_objects, lambda: generation)
    dave, nodes = User("dave").with_authenticated(), Request("list", "", "nodes")
    first = asyncio.create_task(authz.allowed(dave, nodes))
    await first_listing.wait()
    generation, bound = 2, True
    second = asyncio.create_task(authz.allowed(dave, nodes))
    await asyncio.sleep(0.01)
    release_first.set()
    assert await first is False
    assert await second is True
    assert await authz.allowed(dave, nodes) is True  # and it stays so
