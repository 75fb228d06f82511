"""The CEL authorizer library (api/celauthz.py) against a recording authorizer: what each
check asks, for whom, and upstream's errors."""

from __future__ import annotations

import pytest

from controlplane.api.celauthz import AuthorizerLibrary
from controlplane.api.rbac import Request, Rules, User
from controlplane.registry.expressions import ExpressionError


class Recording:
    """Allows ``get`` to anyone and everything to service accounts; records each question."""

    def __init__(self) -> None:
        self.asked: list[tuple[User, Request]] = []

    async def allowed(self, user: User, r: Request) -> bool:
        self.asked.append((user, r))
        return r.verb == "get" or user.name.startswith("system:serviceaccount:")

    async def reason(self, user: User, r: Request) -> str:
        return f"allowed {user.name}"

    async def denial(self, user: User, r: Request) -> str:
        return f"denied {user.name}"

    async def rules_for(self, user: User, namespace: str) -> Rules:
        raise NotImplementedError


ALICE = User("alice", ("devs",))
REQUEST = ("apps", "deployments", "scale", "ns", "web")


async def run(expression: str, authorizer: Recording | None = None) -> object:
    library = AuthorizerLibrary(authorizer, ALICE, REQUEST)
    return await library.evaluate(expression, library.context({"object": {"metadata": {"name": "x"}}}))


async def test_a_resource_check_asks_the_authorizer_about_the_requests_user() -> None:
    authz = Recording()
    assert await run("authorizer.group('').resource('pods').subresource('log').namespace('default')"
                     ".name('p').fieldSelector('spec.nodeName=n').check('get').allowed()", authz) is True
    assert authz.asked == [(ALICE, Request(verb="get", resource="pods", subresource="log", namespace="default",
                                           name="p", field_selector="spec.nodeName=n"))]
    assert await run("authorizer.group('apps').resource('deployments').check('delete').reason()", authz) \
        == "denied alice"


async def test_request_resource_path_and_service_account() -> None:
    authz = Recording()
    assert await run("authorizer.requestResource.check('update').allowed()", authz) is False
    assert authz.asked[-1][1] == Request(verb="update", api_group="apps", resource="deployments",
                                         subresource="scale", namespace="ns", name="web")
    assert await run("authorizer.path('/healthz').check('get').allowed()", authz) is True
    assert authz.asked[-1][1] == Request(verb="get", path="/healthz")
    assert await run("authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('create').allowed()",
                     authz) is True
    assert authz.asked[-1][0] == User("system:serviceaccount:ns:sa", ("system:serviceaccounts",
                                                                       "system:serviceaccounts:ns"))
    assert await run("authorizer.path('/x').check('get').errored() || "
                     "authorizer.path('/x').check('get').error() != ''", authz) is False


async def test_checks_asked_one_after_another_and_each_once() -> None:
    authz = Recording()
    expression = ("authorizer.group('').resource('pods').check('get').allowed() && "
                  "authorizer.group('').resource('pods').check('list').allowed() && "
                  "authorizer.group('').resource('pods').check('get').allowed()")
    assert await run(expression, authz) is False
    assert [r.verb for _, r in authz.asked] == ["get", "list"]


async def test_no_authorizer_allows_everything_without_a_reason() -> None:
    assert await run("authorizer.group('').resource('secrets').check('delete').allowed()") is True
    assert await run("authorizer.group('').resource('secrets').check('delete').reason()") == ""


@pytest.mark.parametrize(("expression", "error"), [
    ("authorizer.path('  ').check('get').allowed()", "path must not be empty"),
    ("authorizer.group('').resource('').check('get').allowed()", "resource must not be empty"),
    ("authorizer.serviceAccount('ns', 'Not_A_Name').path('/x').check('get').allowed()",
     "Invalid service account name"),
    ("authorizer.serviceAccount('Bad', 'sa').path('/x').check('get').allowed()", "Invalid service account namespace"),
    ("authorizer.group('apps').check('get').allowed()", "no such overload"),
    ("authorizer.group('').resource('pods').namespace(1).check('get').allowed()", "no such overload"),
])
async def test_upstreams_errors(expression: str, error: str) -> None:
    with pytest.raises(ExpressionError) as e:
        await run(expression, Recording())
    assert str(e.value) == error
