"""Impersonation headers (api/impersonation.py) as upstream's filter reads them: who is asked
about what, in which order, and whom the request then acts as. Over a socket with kubectl in
tests/api/test_token_request.py."""

from __future__ import annotations

from typing import Any, cast

import pytest

from controlplane.api.errors import ApiError
from controlplane.api.impersonation import extra_key, impersonated
from controlplane.api.rbac import Authorizer, Request, User

ADMIN = User("admin", ("system:masters", "system:authenticated"))


LIST_PODS = Request("list", "", "pods", namespace="default")


class Recording:
    """An authorizer that allows all but what ``refused`` refuses (a resource, or a verb's
    prefix ending in ``:``), and records what it was asked."""

    def __init__(self, *refused: str) -> None:
        self.asked: list[Request] = []
        self.refused = refused

    async def allowed(self, user: User, r: Request) -> bool:
        self.asked.append(r)
        return not any(r.resource == x or (x.endswith(":") and r.verb.startswith(x)) or r.verb == x
                       for x in self.refused)

    def seen(self) -> list[tuple[str, str, str, str, str, str]]:
        return [(r.verb, r.api_group, r.resource, r.subresource, r.namespace, r.name) for r in self.asked]


def scope(*headers: tuple[str, str]) -> dict[str, Any]:
    return {"headers": [(k.lower().encode(), v.encode()) for k, v in headers]}


async def acting(*headers: tuple[str, str], authorizer: Recording | None = None, requester: User = ADMIN,
                 request: Request = LIST_PODS) -> User:
    return await impersonated(scope(*headers), requester, cast(Authorizer, authorizer), request)


AUTHN = "authentication.k8s.io"


async def test_constrained_user_info_is_asked_first_the_request_then_each_thing_named() -> None:
    """ConstrainedImpersonation (KEP-5284, on since 1.36): impersonate-on:user-info:<verb> on
    what the request is, then impersonate:user-info on the user, uid, groups and extras."""
    authz = Recording()
    user = await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", "1234"), ("Impersonate-Group", "devs"),
                        ("Impersonate-Extra-Example.com%2Fteam", "blue"), authorizer=authz)
    assert user.info() == {"username": "bob", "uid": "1234", "groups": ["devs", "system:authenticated"],
                           "extra": {"example.com/team": ["blue"]}}
    verb = "impersonate:user-info"
    assert authz.seen() == [("impersonate-on:user-info:list", "", "pods", "", "default", ""),
                            (verb, AUTHN, "users", "", "", "bob"), (verb, AUTHN, "uids", "", "", "1234"),
                            (verb, AUTHN, "groups", "", "", "devs"),
                            (verb, AUTHN, "userextras", "example.com/team", "", "blue")]


async def test_legacy_impersonate_is_asked_when_the_constrained_mode_refuses_in_its_order() -> None:
    authz = Recording("impersonate-on:")
    user = await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", "1234"), ("Impersonate-Group", "devs"),
                        ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Extra-Scopes", "edit"),
                        ("Impersonate-Extra-Example.com%2Fteam", "blue"), authorizer=authz)
    assert user.info() == {"username": "bob", "uid": "1234", "groups": ["devs", "system:authenticated"],
                           "extra": {"example.com/team": ["blue"], "scopes": ["view", "edit"]}}
    assert authz.seen()[1:] == [  # user, uid, groups, extras: 1.37's legacy order
        ("impersonate", "", "users", "", "", "bob"), ("impersonate", AUTHN, "uids", "", "", "1234"),
        ("impersonate", "", "groups", "", "", "devs"), ("impersonate", AUTHN, "userextras", "scopes", "", "view"),
        ("impersonate", AUTHN, "userextras", "scopes", "", "edit"),
        ("impersonate", AUTHN, "userextras", "example.com/team", "", "blue")]


@pytest.mark.parametrize(("refused", "message"), [
    (("impersonate-on:", "impersonate"),
     'pods is forbidden: User "admin" cannot impersonate-on:user-info:list resource "pods" in API group "" in the '
     'namespace "default"'),
    (("uids",), 'uids.authentication.k8s.io "1234" is forbidden: User "admin" cannot impersonate:user-info resource '
                '"uids" in API group "authentication.k8s.io" at the cluster scope'),
    (("impersonate-on:", "userextras"),
     'pods is forbidden: User "admin" cannot impersonate-on:user-info:list resource "pods" in API group "" in the '
     'namespace "default"'),
])
async def test_a_refusal_is_the_first_modes_403(refused: tuple[str, ...], message: str) -> None:
    """Every mode refused: upstream reports the first failure, the constrained mode's."""
    with pytest.raises(ApiError) as e:
        await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", "1234"),
                     ("Impersonate-Extra-Example.com%2Fteam", "view"), authorizer=Recording(*refused))
    assert e.value.code == 403 and e.value.message == message


async def test_the_constrained_mode_refuses_system_masters_empty_groups_and_bad_extra_keys() -> None:
    for headers, message in [
        ([("Impersonate-Group", "system:masters")], 'groups.authentication.k8s.io "system:masters" is forbidden: User '
         '"admin" cannot impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster '
         'scope: impersonating the system:masters group is not allowed'),
        ([("Impersonate-Group", "")], 'groups.authentication.k8s.io is forbidden: User "admin" cannot '
         'impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster scope: '
         'impersonating the empty string group is not allowed'),
        ([("Impersonate-Extra-Scopes", "view")], 'userextras.authentication.k8s.io is forbidden: User "admin" cannot '
         'impersonate:user-info resource "userextras" in API group "authentication.k8s.io" at the cluster scope: '
         'impersonating an invalid key in extra is not allowed: extra.key: Invalid value: "scopes": must be a '
         'domain-prefixed path (such as "acme.io/foo")'),
    ]:
        with pytest.raises(ApiError) as e:
            await acting(("Impersonate-User", "bob"), *headers, authorizer=Recording("impersonate"))
        assert e.value.message == message
    # the legacy verb still allows them, as upstream's
    assert (await acting(("Impersonate-User", "bob"), ("Impersonate-Group", "system:masters"),
                         authorizer=Recording())).groups == ("system:masters", "system:authenticated")


async def test_many_groups_are_first_asked_as_a_wildcard() -> None:
    authz = Recording()
    groups = [("Impersonate-Group", g) for g in "abcd"]
    await acting(("Impersonate-User", "bob"), *groups, authorizer=authz)
    assert authz.seen()[2:] == [("impersonate:user-info", AUTHN, "groups", "", "", "*")]


async def test_nodes_are_impersonated_as_nodes_by_the_node_modes() -> None:
    authz = Recording()
    node = await acting(("Impersonate-User", "system:node:n1"), authorizer=authz)
    assert node.groups == ("system:nodes", "system:authenticated")
    assert authz.seen() == [("impersonate-on:arbitrary-node:list", "", "pods", "", "default", ""),
                            ("impersonate:arbitrary-node", AUTHN, "nodes", "", "", "n1")]
    # a service account bound to that node: associated-node first, the node named "*"
    agent = User("system:serviceaccount:kube-system:agent", ("system:serviceaccounts",),
                 extra=(("authentication.kubernetes.io/node-name", ("n1",)),))
    bound = Recording("impersonate-on:associated-node:")
    await acting(("Impersonate-User", "system:node:n1"), authorizer=bound, requester=agent)
    assert bound.seen()[0][0] == "impersonate-on:associated-node:list"
    assert bound.seen()[1:] == [("impersonate-on:arbitrary-node:list", "", "pods", "", "default", ""),
                                ("impersonate:arbitrary-node", AUTHN, "nodes", "", "", "n1")]
    allowed = Recording()
    await acting(("Impersonate-User", "system:node:n1"), authorizer=allowed, requester=agent)
    assert allowed.seen()[1] == ("impersonate:associated-node", AUTHN, "nodes", "", "", "*")
    # with a group, no node mode takes it (nor user-info): legacy only, without system:nodes
    legacy = Recording()
    grouped = await acting(("Impersonate-User", "system:node:n1"), ("Impersonate-Group", "devs"), authorizer=legacy)
    assert grouped.groups == ("devs", "system:authenticated") and legacy.seen()[0][0] == "impersonate"


@pytest.mark.parametrize("headers", [
    [("Impersonate-Uid", "1234")], [("Impersonate-Group", "devs")], [("Impersonate-Extra-Scopes", "view")],
    [("Impersonate-User", ""), ("Impersonate-Uid", "1234")],  # an empty user is none
])
async def test_a_uid_groups_or_extras_without_a_user_are_a_400(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(ApiError) as e:
        await acting(*headers, authorizer=Recording())
    assert e.value.code == 400 and e.value.message.endswith("} without impersonating a user name")


async def test_the_400_prints_what_was_asked_as_go_does() -> None:
    with pytest.raises(ApiError) as e:
        await acting(("Impersonate-Group", "a"), ("Impersonate-Group", "b"), ("Impersonate-Extra-K", "v"))
    assert e.value.message == ('requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"a", "b"}, '
                               'Extra:map[string][]string{"k":[]string{"v"}}} without impersonating a user name')


async def test_a_service_accounts_groups_are_added_only_when_none_are_given() -> None:
    authz = Recording()
    account = await acting(("Impersonate-User", "system:serviceaccount:ci:bot"), authorizer=authz)
    assert account.groups == ("system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated")
    assert authz.seen() == [("impersonate-on:serviceaccount:list", "", "pods", "", "default", ""),
                            ("impersonate:serviceaccount", AUTHN, "serviceaccounts", "", "ci", "bot")]
    given = await acting(("Impersonate-User", "system:serviceaccount:ci:bot"), ("Impersonate-Group", "devs"))
    assert given.groups == ("devs", "system:authenticated")
    legacy = Recording("impersonate-on:")
    await acting(("Impersonate-User", "system:serviceaccount:ci:bot"), authorizer=legacy)
    assert legacy.seen()[1] == ("impersonate", "", "serviceaccounts", "", "ci", "bot")
    not_an_account = Recording()  # not a namespace's name: a user of that name
    await acting(("Impersonate-User", "system:serviceaccount:Not_A_Namespace:bot"), authorizer=not_an_account)
    assert not_an_account.seen()[1][2] == "users"


async def test_the_authenticated_and_unauthenticated_groups_as_upstream() -> None:
    assert (await acting(("Impersonate-User", "bob"), ("Impersonate-Group", "system:unauthenticated"))).groups \
        == ("system:unauthenticated",)
    assert (await acting(("Impersonate-User", "bob"), ("Impersonate-Group", "system:authenticated"))).groups \
        == ("system:authenticated",)
    assert (await acting(("Impersonate-User", "system:anonymous"))).groups == ("system:unauthenticated",)
    assert (await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", ""))).uid == ""  # empty: none


def test_an_extras_key_is_lowercased_and_unescaped_as_upstream() -> None:
    assert extra_key("Example.com%2Fteam") == "example.com/team"
    assert extra_key("a%2fb") == "a/b"
    assert extra_key("bad%zzescape%2F") == "bad%zzescape%2f"  # PathUnescape fails: kept (lower-cased)
    assert extra_key("caf%C3%A9") == "café"


async def test_without_an_authorizer_a_requesters_headers_are_decided_once() -> None:
    """AlwaysAllow: whom a requester's headers make it depends on them alone, so the decision is
    kept (the load tests' kubelets send the same two headers with every request); a refusal is not."""
    import controlplane.api.impersonation as module
    module._ALWAYS_ALLOWED.clear()
    node = (("Impersonate-User", "system:node:n1"), ("Impersonate-Group", "system:nodes"))
    first = await acting(*node)
    assert first == User("system:node:n1", ("system:nodes", "system:authenticated"))
    assert await acting(*node) is first and len(module._ALWAYS_ALLOWED) == 1
    assert await acting(*node, requester=User("bob")) == first and len(module._ALWAYS_ALLOWED) == 2  # another's
    for _ in range(2):
        with pytest.raises(ApiError) as e:
            await acting(("Impersonate-Group", "a"))
        assert e.value.code == 400
    assert len(module._ALWAYS_ALLOWED) == 2
    with pytest.raises(ApiError):  # with an authorizer, asked each time
        await acting(*node, authorizer=Recording("groups"))
