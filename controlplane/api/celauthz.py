"""The CEL ``authorizer`` of admission expressions (upstream's authz library,
``apiserver/pkg/cel/library/authz.go``), asking this server's authorizer (``--authorization-mode``)
about the request's user::

    authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()
    authorizer.path('/healthz').check('get').allowed()
    authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').reason()
    authorizer.requestResource.check('delete').allowed()   # the request's own resource, name...

``group``, ``resource``, ``subresource``, ``namespace``, ``name``, ``fieldSelector``,
``labelSelector``, ``path``, ``serviceAccount``, ``check``, and a decision's ``allowed``,
``reason``, ``errored`` and ``error``, with upstream's errors (``path must not be empty``,
``resource must not be empty``, ``Invalid service account name``...). Each value is a tagged
map (the interpreter converts only plain values); a receiver of another type is ``no such
overload``. No authorizer (AlwaysAllow) allows everything, with no reason.

The authorizer answers asynchronously and CEL's functions are called synchronously: an
expression runs, every check it asks without an answer yet is noted (a provisional denial
stands in for it, and the run's value or error is dropped), the noted checks are asked, and the
expression runs again with their answers (``evaluate``), until it asks nothing new. Expressions
are pure, so the last run is the expression's value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..registry.dnsnames import DNS1123_LABEL, DNS1123_SUBDOMAIN
from ..registry.expressions import ExpressionError, Meter, context_of, evaluate
from .rbac import Request, User

if TYPE_CHECKING:
    from .rbac import Authorizes

__all__ = ["AuthorizerLibrary"]

Obj = dict[str, Any]
_TAG = "__authz__"
_MAX_ROUNDS = 64  # an expression asking more distinct checks than this is refused, not run forever


class AuthorizerLibrary:
    """The ``authorizer`` variable and the library's functions for one request's expressions.

    ``user`` is the request's (None: a write of the server's own, allowed everything);
    ``resource`` the request's (group, resource, subresource, namespace, name), which
    ``authorizer.requestResource`` checks."""

    def __init__(self, authorizer: Authorizes | None, user: User | None,
                 resource: tuple[str, str, str, str, str]) -> None:
        self._authorizer = authorizer
        self._user = user
        self._answers: dict[tuple[str, Request], Obj] = {}
        self._pending: dict[tuple[str, Request], None] = {}
        group, plural, subresource, namespace, name = resource
        self.variable: Obj = {_TAG: "Authorizer", "sa": "", "requestResource": _resource_check(
            "", group, plural, subresource=subresource, namespace=namespace, name=name)}
        self.functions: dict[str, Callable[..., Any]] = {
            "path": self._path, "group": self._group, "serviceAccount": self._service_account,
            "resource": self._resource, "subresource": _setter("subresource"), "namespace": _setter("namespace"),
            "name": _setter("name"), "fieldSelector": _setter("fieldSelector"),
            "labelSelector": _setter("labelSelector"), "check": self._check,
            "allowed": _decision("allowed"), "reason": _decision("reason"), "error": _decision("error"),
            "errored": lambda d: _decision("error")(d) != ""}

    def context(self, variables: Obj) -> Any:
        """A ``cel.Context`` of ``variables``, ``authorizer`` and the library."""
        return self.install(context_of(variables))

    def install(self, context: Any) -> Any:
        """``context`` (a ``cel.Context``) with ``authorizer`` and the library's functions added."""
        context.add_variable("authorizer", self.variable)
        for name, function in self.functions.items():
            context.add_function(name, function)
        return context

    def waiting(self) -> bool:
        """Whether a check asked since the last answers waits for its own (its provisional
        denial stands in for it: what was computed with it is not final)."""
        return bool(self._pending)

    async def evaluate(self, expression: str, context: Any, meter: Meter | None = None) -> Any:
        """``expression``'s value in ``context`` (from ``context``), asking the authorizer what
        it checks (``ExpressionError`` as ``expressions.evaluate``); ``meter`` as there, the
        last run's count the one spent."""
        spent = meter.spent if meter is not None else 0
        for _ in range(_MAX_ROUNDS):
            if meter is not None:
                meter.spent = spent
            try:
                value = evaluate(expression, context, meter=meter)
            except ExpressionError:
                if not self._pending:
                    raise
                value = None
            if not self._pending:
                return value
            await self._answer()
        raise ExpressionError("too many authorization checks")

    async def _answer(self) -> None:
        pending, self._pending = list(self._pending), {}
        for key in pending:
            account, request = key
            user = self._user if not account else _service_account_user(account)
            if self._authorizer is None or user is None:
                self._answers[key] = _decided(True, "")
            elif await self._authorizer.allowed(user, request):
                self._answers[key] = _decided(True, await self._authorizer.reason(user, request))
            else:
                self._answers[key] = _decided(False, await self._authorizer.denial(user, request))

    # -- the library's functions ---------------------------------------------------------
    def _path(self, authorizer: Any, path: Any) -> Obj:
        _expect(authorizer, "Authorizer", path)
        if not path.strip():
            raise ValueError("path must not be empty")
        return {_TAG: "PathCheck", "sa": authorizer["sa"], "path": path}

    def _group(self, authorizer: Any, group: Any) -> Obj:
        _expect(authorizer, "Authorizer", group)
        return {_TAG: "GroupCheck", "sa": authorizer["sa"], "group": group}

    def _service_account(self, authorizer: Any, namespace: Any, name: Any) -> Obj:
        _expect(authorizer, "Authorizer", namespace)
        if not isinstance(name, str):
            raise ValueError("no such overload")
        if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            raise ValueError("Invalid service account name")
        if len(namespace) > 63 or not DNS1123_LABEL.match(namespace):
            raise ValueError("Invalid service account namespace")
        return {_TAG: "Authorizer", "sa": f"{namespace}/{name}"}

    def _resource(self, group: Any, resource: Any) -> Obj:
        _expect(group, "GroupCheck", resource)
        if not resource.strip():
            raise ValueError("resource must not be empty")
        return _resource_check(group["sa"], group["group"], resource)

    def _check(self, what: Any, verb: Any) -> Obj:
        if isinstance(what, dict) and what.get(_TAG) == "PathCheck" and isinstance(verb, str):
            request = Request(verb=verb, path=what["path"])
        else:
            _expect(what, "ResourceCheck", verb)
            request = Request(verb=verb, api_group=what["group"], resource=what["resource"],
                              subresource=what["subresource"], namespace=what["namespace"], name=what["name"],
                              field_selector=what["fieldSelector"])
        key = (str(what["sa"]), request)
        answer = self._answers.get(key)
        if answer is None:  # noted; this run's value is not the expression's
            self._pending[key] = None
            return _UNANSWERED
        return answer


def _resource_check(account: str, group: str, resource: str, subresource: str = "", namespace: str = "",
                    name: str = "") -> Obj:
    return {_TAG: "ResourceCheck", "sa": account, "group": group, "resource": resource,
            "subresource": subresource, "namespace": namespace, "name": name, "fieldSelector": "",
            "labelSelector": ""}


def _expect(value: Any, tag: str, argument: Any) -> None:
    """cel-go's ``no such overload`` for a receiver of another type or an argument not a string."""
    if not isinstance(value, dict) or value.get(_TAG) != tag or not isinstance(argument, str):
        raise ValueError("no such overload")


def _setter(key: str) -> Callable[[Any, Any], Obj]:
    def set_(check: Any, value: Any) -> Obj:
        _expect(check, "ResourceCheck", value)
        return {**check, key: value}
    return set_


def _decision(key: str) -> Callable[[Any], Any]:
    def get(decision: Any) -> Any:
        if not isinstance(decision, dict) or decision.get(_TAG) != "Decision":
            raise ValueError("no such overload")
        return decision[key]
    return get


def _decided(allowed: bool, reason: str) -> Obj:
    return {_TAG: "Decision", "allowed": allowed, "reason": reason, "error": ""}


_UNANSWERED = _decided(False, "")


def _service_account_user(account: str) -> User:
    """Upstream's ``ServiceAccountInfo.UserInfo()``: the account's user name and its two groups."""
    namespace, name = account.split("/", 1)
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))
