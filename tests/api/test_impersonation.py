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


class Recording:
    """An authorizer that allows all but ``refused`` and records what it was asked."""

    def __init__(self, refused: tuple[str, ...] = ()) -> None:
        self.asked: list[Request] = []
        self.refused = refused

    async def allowed(self, user: User, r: Request) -> bool:
        self.asked.append(r)
        return r.resource not in self.refused


def scope(*headers: tuple[str, str]) -> dict[str, Any]:
    return {"headers": [(k.lower().encode(), v.encode()) for k, v in headers]}


async def acting(*headers: tuple[str, str], authorizer: Recording | None = None) -> User:
    return await impersonated(scope(*headers), ADMIN, cast(Authorizer, authorizer))


async def test_uid_and_extras_are_carried_and_asked_for_in_upstreams_order() -> None:
    authz = Recording()
    user = await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", "1234"), ("Impersonate-Group", "devs"),
                        ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Extra-Scopes", "edit"),
                        ("Impersonate-Extra-Example.com%2Fteam", "blue"), authorizer=authz)
    assert user.info() == {"username": "bob", "uid": "1234", "groups": ["devs", "system:authenticated"],
                           "extra": {"example.com/team": ["blue"], "scopes": ["view", "edit"]}}
    assert [(r.api_group, r.resource, r.subresource, r.name) for r in authz.asked] == [
        ("", "users", "", "bob"), ("", "groups", "", "devs"),
        ("authentication.k8s.io", "userextras", "scopes", "view"),
        ("authentication.k8s.io", "userextras", "scopes", "edit"),
        ("authentication.k8s.io", "userextras", "example.com/team", "blue"),
        ("authentication.k8s.io", "uids", "", "1234")]
    assert all(r.verb == "impersonate" for r in authz.asked)


@pytest.mark.parametrize(("refused", "message"), [
    ("uids", 'uids.authentication.k8s.io "1234" is forbidden: User "admin" cannot impersonate resource "uids" in '
             'API group "authentication.k8s.io" at the cluster scope'),
    ("userextras", 'userextras.authentication.k8s.io "view" is forbidden: User "admin" cannot impersonate resource '
                   '"userextras/scopes" in API group "authentication.k8s.io" at the cluster scope'),
])
async def test_a_refused_uid_or_extra_is_upstreams_403(refused: str, message: str) -> None:
    with pytest.raises(ApiError) as e:
        await acting(("Impersonate-User", "bob"), ("Impersonate-Uid", "1234"),
                     ("Impersonate-Extra-Scopes", "view"), authorizer=Recording(refused=(refused,)))
    assert e.value.code == 403 and e.value.message == message


@pytest.mark.parametrize("headers", [
    [("Impersonate-Uid", "1234")], [("Impersonate-Group", "devs")], [("Impersonate-Extra-Scopes", "view")],
    [("Impersonate-User", ""), ("Impersonate-Uid", "1234")],  # an empty user is none
])
async def test_a_uid_groups_or_extras_without_a_user_are_a_400(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(ApiError) as e:
        await acting(*headers, authorizer=Recording())
    assert e.value.code == 400 and "without impersonating a user" in e.value.message


async def test_a_service_accounts_groups_are_added_only_when_none_are_given() -> None:
    authz = Recording()
    account = await acting(("Impersonate-User", "system:serviceaccount:ci:bot"), authorizer=authz)
    assert account.groups == ("system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated")
    assert (authz.asked[0].resource, authz.asked[0].namespace, authz.asked[0].name) == ("serviceaccounts", "ci", "bot")
    given = await acting(("Impersonate-User", "system:serviceaccount:ci:bot"), ("Impersonate-Group", "devs"))
    assert given.groups == ("devs", "system:authenticated")
    not_an_account = Recording()  # not a namespace's name: a user of that name
    await acting(("Impersonate-User", "system:serviceaccount:Not_A_Namespace:bot"), authorizer=not_an_account)
    assert not_an_account.asked[0].resource == "users"


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
