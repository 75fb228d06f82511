"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): CEL rules that refuse writes.

As upstream's validating admission policy plugin: a write (create, update or delete) or a
CONNECT (exec, attach, portforward, proxy: ``object`` is its options, a ``PodExecOptions``...,
and ``request.kind`` their kind) is checked against every ValidatingAdmissionPolicyBinding whose policy exists and whose
matches take it in: the policy's ``matchConstraints`` and the binding's
``matchResources`` (``resourceRules`` by group, version, resource, subresource and
operation, then ``scope`` and ``resourceNames``, minus ``excludeResourceRules``;
``namespaceSelector``; ``objectSelector``; under ``matchPolicy: Equivalent`` another served
version of the resource a rule names, the objects converted to it: ``api/equivalents.py``).
The policy's ``matchConditions`` must all be true, then each of its ``validations`` is
evaluated with ``object`` (null for a delete), ``oldObject`` (null for a create),
``request``, ``namespaceObject`` and ``variables`` (the policy's ``variables``, computed when read:
``api/policyvariables.py``). A
validation that is false fails the binding's actions: ``Deny`` refuses the write
(422 Invalid, or the validation's ``reason``) with upstream's message
(``ValidatingAdmissionPolicy 'p' with binding 'b' denied request: <message>``),
``Warn`` adds a warning, ``Audit`` notes it in an audited request's audit event
(``validation.policy.admission.k8s.io/validation_failure``, upstream's JSON list of
``{message, policy, binding, expressionIndex, validationActions}``). An audited request
also gets the policy's ``auditAnnotations`` (``<policy>/<key>``: the ``valueExpression``'s
string; null or empty left out). An expression that does
not parse refuses the policy's write (``registry/admissionpolicies.py``); one that fails
at run time follows the policy's ``failurePolicy`` (``Fail``, the default, refuses).

As upstream's dispatcher, every binding, param and validation is evaluated (``_Verdicts``):
each failure takes each of its binding's actions, the first denial is the answer, every
``Warn`` failure a warning, the first ``Audit`` failure the audit annotation. The expressions
are metered (``registry/expressions.Meter``) for upstream's per-call cost limit and runtime
cost budget: comprehension iterations are counted, the only cost the interpreter lets one count;
the match conditions within a budget of their own (``conditions_hold``, upstream's matcher,
which webhooks share). Expressions are compiled once per text, with the CEL interpreter the DRA
selectors use. Each decision is counted in upstream's metrics (``_observe_check``).

A failed validation's message is its ``messageExpression``'s string, else its
``message``, else the expression; every message expression is evaluated, a passed
validation's too, within what the validations left of the budget (``_messages``).

Parameters (``paramKind``, a binding's ``paramRef``) as ``api/policyparams.py`` resolves
them: the policy evaluated once per param, ``params`` in every expression; a configuration
error (none found under ``Deny``, a ``paramKind`` not served) refuses under ``failurePolicy:
Fail``, whatever the binding's actions. A denial is upstream's ``admission.NewForbidden``
Status, its code and reason the validation's (``forbidden_details``).

The validations, variables and match conditions have ``authorizer`` (``api/celauthz.py``: the
request's user asked of the server's authorizer, each check once per request); an audit
annotation naming it fails as it runs, as upstream evaluates those without it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson

from ..metrics import (
    ADMISSION_MATCH_CONDITION_ERRORS,
    ADMISSION_MATCH_CONDITION_SECONDS,
    VALIDATING_POLICY_CHECK_SECONDS,
    VALIDATING_POLICY_CHECKS,
)
from ..registry.celsyntax import VARIABLE
from ..registry.expressions import OUT_OF_BUDGET, ExpressionError, Meter, evaluate
from ..registry.types import ResourceType
from ..selectormatch import match_label_selector
from . import audit
from .celauthz import AuthorizerLibrary
from .equivalents import as_version, equivalent_types
from .errors import ApiError
from .fieldvalidation import add_warning
from .namespaced import NamespacedObjects
from .policyparams import ParamError, PolicyParams
from .policyvariables import Variables, reads, without_authorizer

if TYPE_CHECKING:
    from .rbac import User
    from .rest import KubeApi

__all__ = ["REQUEST_USER", "AdmissionPolicies", "BoundPolicies", "ConditionsFailed", "Matching", "aggregated",
           "conditions_hold"]

Obj = dict[str, Any]
REQUEST_USER: ContextVar[User | None] = ContextVar("controlplane_request_user", default=None)
VALIDATION_FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
_REASONS = {"Invalid": 422, "Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}
_MAX_AUDIT_ANNOTATION_VALUE = 10 * 1024  # upstream's maxAuditAnnotationValueLength: longer values cut
_MAX_MESSAGE = 5 * 1024  # upstream's MaxEvaluatedMessageExpressionSizeBytes


def _rule_matches(rule: Obj, group: str, version: str, resource: str, subresource: str, operation: str,
                  namespace: str | None = None, name: str = "") -> bool:
    """Upstream's ``rules.Matcher`` (operation, group, version, resource and subresource, then the
    ``scope``: ``Namespaced`` takes a request in a namespace, but for a Namespace, ``Cluster``
    one outside any, or a Namespace; ``*`` and a policy stored without one, both) and its
    ``resourceNames`` (none: every name)."""
    def listed(values: Any, value: str) -> bool:
        return isinstance(values, list) and ("*" in values or value in values)

    if not listed(rule.get("operations"), operation) or not listed(rule.get("apiGroups"), group) \
            or not listed(rule.get("apiVersions"), version):
        return False
    full = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources") or []
    if not ("*/*" in resources or full in resources or (not subresource and "*" in resources)
            or (bool(subresource) and f"{resource}/*" in resources)
            or (bool(subresource) and f"*/{subresource}" in resources)):
        return False
    scope = rule.get("scope")
    if scope in ("Namespaced", "Cluster"):
        is_namespace = not group and resource == "namespaces"
        if (scope == "Namespaced") == (is_namespace or not namespace):
            return False
    names = rule.get("resourceNames")
    return not names or name in names


def _named(rules: Any, rtype: ResourceType, subresource: str | None, operation: str, namespace: str | None,
           name: str, equivalents: Callable[[], list[ResourceType]] | None) -> ResourceType | None:
    """The version one of ``rules`` names the request in (upstream's ``matchesResourceRules``):
    its own, else, with ``equivalents``, the first other version of its resource a rule names."""
    if not rules:
        return None
    rules = [r for r in rules if isinstance(r, dict)]
    rest = (subresource or "", operation, namespace, name)
    if any(_rule_matches(r, rtype.group, rtype.version, rtype.plural, *rest) for r in rules):
        return rtype
    if equivalents is None:
        return None
    for rule in rules:
        for other in equivalents():
            if _rule_matches(rule, other.group, other.version, other.plural, *rest):
                return other
    return None


# the metadata upstream's CreateNamespaceObject keeps of the namespace a validating policy's validations see
_VALIDATED_NAMESPACE_METADATA = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                                 "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                                 "annotations", "finalizers")


def shown_namespace(namespace: Obj | None, validated: bool = False) -> Obj | None:
    """The request's namespace as upstream's expressions see it, the typed object its informer
    holds: no ``apiVersion`` or ``kind`` (a mutating policy's expressions, a validating one's
    audit annotations); ``validated``: as upstream's ``CreateNamespaceObject`` makes it for a
    validating policy's validations and message expressions, its spec, status and only some
    of its metadata (no ``managedFields`` or ``ownerReferences``)."""
    if namespace is None:
        return None
    shown = {k: v for k, v in namespace.items() if k not in ("apiVersion", "kind")}
    if validated:
        meta = namespace.get("metadata") or {}
        shown["metadata"] = {k: meta[k] for k in _VALIDATED_NAMESPACE_METADATA if k in meta}
    return shown


def object_selected(selector: Any, *objects: Obj | None) -> bool:
    """Whether an ``objectSelector`` takes one of ``objects`` (the new and the old one), as
    upstream's object matcher: an empty selector takes every request; another takes none
    that has no metadata (a CONNECT's options: an ``*Options`` kind has no labels to judge)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return True
    return any(match_label_selector(selector, (o["metadata"] or {}).get("labels") or {})
               for o in objects if o is not None and "metadata" in o)


class _Verdicts:
    """One request's verdicts across every policy, binding and param (upstream's dispatcher):
    the denials in the order they were reached (the first is the answer), the ``Audit``
    action's failures (upstream keeps the first: its audit annotation is written once) and the
    policies' audit annotations."""

    __slots__ = ("annotations", "denied", "failures")

    def __init__(self, audited: bool) -> None:
        self.denied: list[tuple[int, str, str]] = []  # (code, reason, message)
        self.failures: list[Obj] | None = [] if audited else None
        self.annotations: dict[str, list[str]] = {}  # '<policy>/<key>' -> its distinct values

    def deny(self, message: str, reason: str = "Invalid") -> None:
        code = _REASONS.get(reason, 422)  # upstream's reasonToCode: anything else 422, its reason kept
        self.denied.append((code, reason or "Invalid", message))


def forbidden_details(rtype: ResourceType, name: str, obj: Obj | None) -> Obj:
    """The ``details`` of upstream's ``admission.NewForbidden`` (``extractResourceName``): the
    request's name, else the object's name or ``generateName``, else ``Unknown``
    (``Unknown/errorGettingName`` for an object without metadata); the resource without its
    subresource; an empty group left out, as Go's ``omitempty``."""
    if not name:
        name = "Unknown"
        if obj is not None:
            meta = obj.get("metadata")
            name = (meta.get("name") or meta.get("generateName") or "Unknown") if isinstance(meta, dict) \
                else "Unknown/errorGettingName"
    details: Obj = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    return details


def uses_authorizer(spec: Obj) -> bool:
    """Whether a policy's expressions may ask the ``authorizer`` (its text names it)."""
    return "authorizer" in orjson.dumps(spec).decode()


async def authorized(expression: str, context: Any, library: AuthorizerLibrary | None,
                     meter: Meter | None = None, variables: Variables | None = None) -> Any:
    """``expression``'s value in ``context``; with ``library`` (the request's ``authorizer``,
    installed in ``context``) its checks asked of the server's authorizer, its variables' too;
    ``meter`` (installed in ``context``) bounds its work (``expressions.Meter``), the
    ``variables`` it computed (``api/policyvariables.py``) counted in ``meter.spent``."""
    text = reads(expression)
    try:
        if library is not None and ("authorizer" in text or VARIABLE in text):
            return await library.evaluate(text, context, meter)
        return evaluate(text, context, meter=meter)
    finally:
        if meter is not None and variables is not None:
            meter.spent += variables.take_cost()


class ConditionsFailed(Exception):
    """Match conditions that erred, none false, or that ran out of their budget: the error of
    upstream's matcher, which ``failurePolicy`` decides (``Fail``: the request is refused with
    it; ``Ignore``: the conditions do not match)."""


def aggregated(messages: list[str]) -> str:
    """Several errors as apimachinery's ``utilerrors.NewAggregate`` words them: each message
    once, one alone as it is, more as ``[a, b]``."""
    distinct = list(dict.fromkeys(messages))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


async def conditions_hold(conditions: Any, context: Any, library: AuthorizerLibrary | None, meter: Meter,
                          variables: Variables | None = None,
                          observed: tuple[str, str, str, str] | None = None) -> bool:
    """Upstream's match condition matcher (``plugin/webhook/matchconditions/matcher.go``), as
    admission policies and webhooks alike use it: every condition is evaluated, in order,
    within one runtime budget (``expressions.MATCH_CONDITIONS_BUDGET``, ``meter`` reset for
    it; past it, as each expression's cost is added, the evaluation stops and its error is the
    matcher's, the results before it aside); then, the results in order, a false one leaves
    the request out (False), whatever errors the others had; else errors raise
    ``ConditionsFailed`` (``expression '...' resulted in error: ...``, aggregated); else True.
    A result neither false nor an error matches (upstream checks no type as they run).
    ``namespaceObject`` is null in them: upstream's matcher binds no namespace, a policy's
    conditions as a webhook's (``context``'s put back after). ``observed``: the metrics'
    labels (name, kind, type, operation), as the matcher observes them: each error met
    before a false result, and the time of an evaluation that did not match."""
    if not conditions:
        return True
    namespace_object = context.variables.get("namespaceObject")
    context.add_variable("namespaceObject", None)
    started = time.perf_counter()
    try:
        return await _conditions_hold(conditions, context, library, meter, variables, observed)
    except ConditionsFailed:
        if observed is not None:
            ADMISSION_MATCH_CONDITION_SECONDS.labels(*observed).observe(time.perf_counter() - started)
        raise
    finally:
        context.add_variable("namespaceObject", namespace_object)


async def _conditions_hold(conditions: Any, context: Any, library: AuthorizerLibrary | None, meter: Meter,
                           variables: Variables | None, observed: tuple[str, str, str, str] | None) -> bool:
    meter.spent = 0
    started = time.perf_counter()
    results: list[tuple[Any, str | None]] = []  # (value, error) of each condition, in order
    for condition in conditions:
        expression = str(condition.get("expression", "")) if isinstance(condition, dict) else ""
        try:
            results.append((await authorized(expression, context, library, meter, variables), None))
        except ExpressionError as e:
            results.append((None, f"expression '{expression}' resulted in error: {e}"))
        if meter.over_budget(matching=True):
            raise ConditionsFailed(OUT_OF_BUDGET)
    errors: list[str] = []
    for value, error in results:
        if error is not None:
            errors.append(error)
            if observed is not None:
                ADMISSION_MATCH_CONDITION_ERRORS.labels(*observed).inc()
        elif value is False:
            if observed is not None:
                ADMISSION_MATCH_CONDITION_SECONDS.labels(*observed).observe(time.perf_counter() - started)
            return False
    if errors:
        raise ConditionsFailed(aggregated(errors))
    return True


def _messages(validations: Any, context: Any, meter: Meter, variables: Variables) -> list[str | None] | None:
    """The validations' messages as upstream's validator evaluates them: every
    ``messageExpression`` (a passed validation's too), in order, within what the validations
    left of the budget (``meter``), without ``authorizer``; each a usable string (trimmed; not
    empty, at most 5 KiB, one line) or None (none, an error, another type: the validation's
    ``message`` is used, else ``failed expression: ...``). None when they ran out of the budget
    (upstream's ``failed messageExpression: ...``)."""
    messages: list[str | None] = []
    for validation in validations:
        text = None
        if validation.get("messageExpression"):
            try:
                text = evaluate(reads(str(validation["messageExpression"])), context, meter=meter)
            except ExpressionError:  # (upstream logs it)
                text = None
            finally:
                meter.spent += variables.take_cost()
            if meter.over_budget():
                return None
            if isinstance(text, str):
                text = text.strip()
                if not text or len(text.encode()) > _MAX_MESSAGE or "\n" in text:
                    text = None
            else:
                text = None
        messages.append(text)
    return messages


def _observe_check(policy: str, binding: str, message: str, action: str, elapsed: float) -> None:
    """A decision in upstream's ``apiserver_validating_admission_policy_check_*`` (its
    ``ErrorType``: ``out_of_budget`` for a message that says so, else ``invalid_error``, a
    plain false validation's too; ``action``: ``deny``, ``warn``, ``audit``, or ``allow`` for
    an error ``failurePolicy: Ignore`` admits)."""
    error_type = "out_of_budget" if message.startswith("validation failed due to running out of cost budget") \
        else "invalid_error"
    VALIDATING_POLICY_CHECKS.labels(policy, binding, error_type, action).inc()
    VALIDATING_POLICY_CHECK_SECONDS.labels(policy, binding, error_type, action).observe(elapsed)


def _cel_type(value: Any) -> str:
    """The CEL type name of a value (cel-go's ``Type().String()``)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


class BoundPolicies:
    """A kind of admission policy and its bindings, as the watch caches hold them, and the
    params they name: what the validating and the mutating dispatchers share."""

    def __init__(self, kube: KubeApi, policies: ResourceType, bindings: ResourceType) -> None:
        self.kube = kube
        self.policies = NamespacedObjects(kube, policies)
        self.bindings = NamespacedObjects(kube, bindings)
        self.params = PolicyParams(kube)

    def active(self) -> bool:
        """Whether a write must be dispatched: False only when no binding is stored (O(1))."""
        return not self.bindings.known_empty()

    async def _namespace(self, name: str) -> Obj | None:
        namespaces = self.kube.registry.get("", "v1", "namespaces")
        if namespaces is None:
            return None
        raw = await self.kube.reads.get(namespaces, None, name, "0")
        return orjson.loads(raw) if raw is not None else None


Invoked = tuple[Obj, Obj, ResourceType, list[Any]]  # (binding, policy, the version matched, its params)


class Matching:
    """One request's matching against the bindings of a kind of policy, as both dispatchers
    match (upstream's generic policy dispatcher): each binding whose policy exists, whose
    ``matchConstraints`` take the request in (the version they take it in as), whose policy's
    ``paramKind`` is served, whose ``matchResources`` take it in too, with its params
    (``invocations``); configuration errors (``ParamError``) handed to the caller, which words
    them. The request's namespace is read once, when a selector or a context needs it
    (``namespace``; ``namespaced_only``: only for a namespaced resource)."""

    def __init__(self, owner: BoundPolicies, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                 obj: Obj | None, old: Obj | None, subresource: str | None, kind: tuple[str, str, str] | None,
                 namespaced_only: bool = False) -> None:
        self._owner = owner
        self._request = (rtype, namespace, operation, obj, old, subresource)
        self._name = name
        self._kind = kind
        self._namespaced_only = namespaced_only
        self._found: list[ResourceType] | None = None
        self._read = False
        self.namespace_object: Obj | None = None

    def equivalents(self) -> list[ResourceType]:
        """The request's resource's other served versions (asked once, when a rule does not
        name its own; a subresource of a kind of its own has none)."""
        if self._found is None:
            self._found = equivalent_types(self._owner.kube.registry, self._request[0]) if self._kind is None else []
        return self._found

    async def namespace(self) -> Obj | None:
        """The request's namespace (read once; None outside one or when it does not exist)."""
        rtype, namespace = self._request[0], self._request[1]
        if namespace and not self._read and (rtype.namespaced or not self._namespaced_only):
            self.namespace_object, self._read = await self._owner._namespace(namespace), True
        return self.namespace_object

    async def invocations(self, bindings: list[Obj], policies: dict[Any, Obj],
                          refused: Callable[[Obj, Obj | None, ParamError], None]) -> AsyncIterator[Invoked]:
        """Each of ``bindings`` (in their order) that takes the request in, with its policy,
        the version matched and its params (empty: none found under ``parameterNotFoundAction:
        Allow``); ``refused(policy, binding, error)`` for each configuration error (the
        policy's ``paramKind`` not served: binding None)."""
        rtype, namespace, operation, obj, old, subresource = self._request
        for binding in bindings:
            bspec = binding.get("spec") or {}
            policy = policies.get(bspec.get("policyName"))
            if policy is None:
                continue
            pspec = policy.get("spec") or {}
            if (pspec.get("matchConstraints") or {}).get("namespaceSelector") \
                    or (bspec.get("matchResources") or {}).get("namespaceSelector"):
                await self.namespace()
            # matched on the object as it came (upstream matches before it invokes any policy), in the
            # request's version or, under matchPolicy Equivalent, another the policy names
            matched = AdmissionPolicies._matches(pspec.get("matchConstraints") or {}, rtype, namespace, operation,
                                                 obj, old, subresource, self.namespace_object, self._name,
                                                 self.equivalents)
            if matched is None:
                continue
            param_type = None
            if pspec.get("paramKind"):  # (upstream: a policy's configuration error, before its bindings match)
                try:
                    param_type = self._owner.params.param_type(pspec["paramKind"])
                except ParamError as e:
                    refused(policy, None, e)
                    continue
                if param_type is None:
                    continue  # an apiVersion upstream does not parse: the policy is not applied
            if bspec.get("matchResources") and AdmissionPolicies._matches(
                    bspec["matchResources"], rtype, namespace, operation, obj, old, subresource,
                    self.namespace_object, self._name, self.equivalents) is None:
                continue
            try:
                params = await self._owner.params.collect(param_type, bspec.get("paramRef"), namespace)
            except ParamError as e:
                refused(policy, binding, e)
                continue
            yield binding, policy, matched, params


class AdmissionPolicies(BoundPolicies):
    """The ValidatingAdmissionPolicies' dispatcher (upstream's validating plugin)."""

    async def check(self, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                    obj: Obj | None, old: Obj | None, subresource: str | None, user: User | None,
                    kind: tuple[str, str, str] | None = None) -> None:
        """Refuse (raise) the write if a Deny binding's policy fails it; add warnings for Warn ones.
        ``kind``: a subresource's own (group, version, kind), a Binding's, an Eviction's, a Scale's."""
        bindings = await self.bindings.of("")
        if not bindings:
            return
        policies = {(p.get("metadata") or {}).get("name"): p for p in await self.policies.of("")}
        verdicts = _Verdicts(audit.recording())
        try:
            await self._check(bindings, policies, rtype, namespace, name, operation, obj, old, subresource, user, kind,
                              verdicts)
        finally:
            if verdicts.failures:  # upstream's first: a later one may not overwrite the annotation
                audit.annotate(VALIDATION_FAILURE_ANNOTATION, orjson.dumps(verdicts.failures[:1]).decode())
            for key, values in verdicts.annotations.items():  # several (a binding's params): joined, as upstream's
                audit.annotate(key, ", ".join(values))
        if verdicts.denied:  # upstream's Status: admission.NewForbidden's of the first, its code and reason replaced
            code, reason, message = verdicts.denied[0]
            details = forbidden_details(rtype, name, obj)
            details["causes"] = [{"message": message}]
            raise ApiError(code, reason, f'{ApiError._what(rtype)} "{details["name"]}" is forbidden: {message}',
                           details)

    async def _check(self, bindings: list[Obj], policies: dict[Any, Obj], rtype: ResourceType,
                     namespace: str | None, name: str, operation: str, obj: Obj | None, old: Obj | None,
                     subresource: str | None, user: User | None, kind: tuple[str, str, str] | None,
                     verdicts: _Verdicts) -> None:
        contexts: dict[str, Any] = {}  # the expressions' variables, by the version matched
        library: AuthorizerLibrary | None = None
        meter = Meter()  # the bound on the expressions' work, for upstream's runtime cost limits
        matching = Matching(self, rtype, namespace, name, operation, obj, old, subresource, kind)
        async for binding, policy, matched, params in matching.invocations(
                bindings, policies, lambda p, b, e: self._configuration_error(p, b, e, verdicts)):
            if not params:
                continue  # none found, parameterNotFoundAction Allow: nothing to evaluate
            pspec = policy.get("spec") or {}
            context = contexts.get(matched.api_version)
            if context is None:
                namespace_object = await matching.namespace()
                try:  # the objects in the version matched (upstream's NewVersionedAttributes)
                    shown, shown_old = (await as_version(self.kube, obj, rtype, matched),
                                        await as_version(self.kube, old, rtype, matched))
                except ApiError as e:
                    if pspec.get("failurePolicy") != "Ignore":
                        verdicts.deny(f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' denied request: "
                                      f"failed to configure policy: failed to convert object version: {e.message}")
                    continue
                context = contexts[matched.api_version] = self._context(
                    rtype, namespace, name, operation, shown, shown_old, subresource, user,
                    shown_namespace(namespace_object, validated=True), kind, matched)
                meter.install(context)
                if library is not None:
                    library.install(context)
            if library is None and uses_authorizer(pspec):  # upstream's caching authorizer: one per request
                library = AuthorizerLibrary(self.kube.authorizer, user, (
                    rtype.group, rtype.plural, subresource or "", namespace or "", name))
                for each in contexts.values():
                    library.install(each)
            for param in params:  # the policy evaluated once per param, each with its own verdict
                context.add_variable("params", param)
                await self._validate(policy, binding, context, verdicts, meter, library, matching.namespace_object)

    @staticmethod
    def _configuration_error(policy: Obj, binding: Obj | None, error: ParamError, verdicts: _Verdicts) -> None:
        """Upstream's ``addConfigError``: under ``failurePolicy: Fail`` the request is denied
        (422 Invalid, whatever the binding's actions), under ``Ignore`` the policy is skipped."""
        if (policy.get("spec") or {}).get("failurePolicy") == "Ignore":
            return
        shown = f"ValidatingAdmissionPolicy '{policy['metadata']['name']}'"
        if binding is not None:
            shown += f" with binding '{binding['metadata']['name']}'"
        verdicts.deny(f"{shown} denied request: {error.configured}")

    @staticmethod
    def _matches(constraints: Obj, rtype: ResourceType, namespace: str | None, operation: str, obj: Obj | None,
                 old: Obj | None, subresource: str | None, namespace_object: Obj | None, name: str = "",
                 equivalents: Callable[[], list[ResourceType]] | None = None) -> ResourceType | None:
        """The version ``constraints`` take the request in as (upstream's ``matching.Matcher``):
        the request's own (``rtype``), or, under ``matchPolicy: Equivalent`` (``equivalents``
        given: the other served versions of its resource), the first other version a rule names
        (the rules in order, each against every version); None when they do not take it in.
        Excluded when an exclusion rule names the request's version or, under ``Equivalent``,
        another."""
        selector = constraints.get("namespaceSelector")
        if selector and rtype.namespaced:
            labels = ((namespace_object or {}).get("metadata") or {}).get("labels") or {}
            if not match_label_selector(selector, labels):
                return None
        if not object_selected(constraints.get("objectSelector"), obj, old):
            return None
        others = equivalents if constraints.get("matchPolicy") == "Equivalent" else None
        if _named(constraints.get("excludeResourceRules"), rtype, subresource, operation, namespace, name, others):
            return None
        rules = constraints.get("resourceRules")
        if rules is None:
            return rtype
        return _named(rules, rtype, subresource, operation, namespace, name, others)

    @staticmethod
    def _context(rtype: ResourceType, namespace: str | None, name: str, operation: str, obj: Obj | None,
                 old: Obj | None, subresource: str | None, user: User | None, namespace_object: Obj | None,
                 kind: tuple[str, str, str] | None = None, matched: ResourceType | None = None) -> Any:
        """The expressions' variables, ``request`` as upstream's ``CreateAdmissionRequest``
        fills it in: ``kind`` and ``resource`` the version the policy matched (``matched``;
        ``object`` and ``oldObject`` given in it), ``requestKind`` and ``requestResource`` the
        request's own."""
        from .dryrun import DRY_RUN

        matched = matched or rtype
        group, version, shown = kind or (rtype.group, rtype.version, rtype.kind)
        request_kind = {"group": group, "version": version, "kind": shown}
        request = {
            "kind": request_kind if kind or matched is rtype else
            {"group": matched.group, "version": matched.version, "kind": matched.kind},
            "resource": {"group": matched.group, "version": matched.version, "resource": matched.plural},
            "subResource": subresource or "",
            "requestKind": request_kind,
            "requestResource": {"group": rtype.group, "version": rtype.version, "resource": rtype.plural},
            "requestSubResource": subresource or "",
            "name": name, "namespace": namespace or "",
            "operation": operation, "dryRun": bool(DRY_RUN.get()),
            "userInfo": {"username": user.name if user else "", "groups": list(user.groups) if user else []},
        }
        import cel

        from ..registry.cellibs import FUNCTIONS

        context = cel.Context(functions=FUNCTIONS)  # the Kubernetes CEL libraries, as for CRD rules
        context.add_variable("object", obj)
        context.add_variable("oldObject", old)
        context.add_variable("request", request)
        context.add_variable("namespaceObject", namespace_object)
        context.add_variable("params", None)
        return context

    @staticmethod
    async def _validate(policy: Obj, binding: Obj, context: Any, verdicts: _Verdicts, meter: Meter,
                        library: AuthorizerLibrary | None = None, namespace: Obj | None = None) -> None:
        """Evaluate ``policy`` for ``binding`` (with the ``params`` set in ``context``) as
        upstream's validator, and act on each decision as its dispatcher does: every validation
        is evaluated, and each that fails (false, or an error under ``failurePolicy: Fail``)
        takes each of the binding's actions in turn: ``Deny`` notes a denial, ``Warn`` a warning,
        ``Audit`` a failure for the audit event. The audit annotations are evaluated too (an
        error under ``Fail`` denies, whatever the actions), their values kept for an audited
        request. ``library``: the request's ``authorizer`` (installed in ``context``), which
        the validations, match conditions and variables ask, as upstream's; ``meter`` (installed
        too) bounds each expression's work and the validations' together, as upstream's per-call
        limit and runtime cost budget (``expressions.Meter``)."""
        pspec, bspec = policy.get("spec") or {}, binding.get("spec") or {}
        pname, bname = policy["metadata"]["name"], binding["metadata"]["name"]
        actions = list(bspec.get("validationActions") or ())
        fail_closed = pspec.get("failurePolicy") != "Ignore"
        prefix = f"ValidatingAdmissionPolicy '{pname}' with binding '{bname}'"

        def decide(index: int, message: str, reason: str = "Invalid", elapsed: float = 0.0,
                   denied: bool = True) -> None:
            if not denied:  # an error failurePolicy Ignore admits: counted all the same
                _observe_check(pname, bname, message, "allow", elapsed)
                return
            for action in actions:  # (upstream's order: the binding's)
                if action == "Deny":
                    verdicts.deny(f"{prefix} denied request: {message}", reason)
                elif action == "Audit":
                    if verdicts.failures is not None:
                        verdicts.failures.append({"message": message, "policy": pname, "binding": bname,
                                                  "expressionIndex": index, "validationActions": actions})
                elif action == "Warn":
                    add_warning(f"Validation failed for {prefix}: {message}")
                else:
                    continue
                _observe_check(pname, bname, message, action.lower(), elapsed)

        declared = pspec.get("variables")
        # each of upstream's evaluations computes the variables it reads afresh: the match conditions,
        # the validations, the message expressions, the audit annotations (``api/policyvariables.py``)
        observed = (str(pname), "policy", "validate", str(context.variables["request"]["operation"]))
        try:
            if not await conditions_hold(pspec.get("matchConditions") or (), context, library, meter,
                                         Variables(declared, context, meter, library), observed):
                return  # a false condition: the policy does not apply, whatever errors others had
        except ConditionsFailed as e:
            if fail_closed:
                decide(0, str(e))
            return
        # the validations, then the failed ones' messages, within one budget; the audit annotations
        # within another: running out of one is the policy's one decision, as upstream's validator has it
        validations = pspec.get("validations") or ()
        # (expression, its error, whether it passed, the seconds it took)
        outcomes: list[tuple[str, str | None, bool, float]] = []
        meter.spent = 0
        variables = Variables(declared, context, meter, library)
        for validation in validations:
            expression = str(validation.get("expression", ""))
            started = time.perf_counter()
            try:
                passed, error = await authorized(expression, context, library, meter, variables) is True, None
            except ExpressionError as e:
                passed, error = False, str(e)
            outcomes.append((expression, error, passed, time.perf_counter() - started))
            if meter.over_budget():
                break
        # (index, message, reason, seconds, denied: False for an error failurePolicy Ignore admits)
        decisions: list[tuple[int, str, str, float, bool]] = []
        if meter.over_budget():
            decisions = [(0, OUT_OF_BUDGET, "Invalid", 0.0, fail_closed)]
        else:
            messages = _messages(validations, context, meter,
                                 Variables(declared, context, meter, library, authorizer=False))
            for index, (expression, error, passed, elapsed) in enumerate(outcomes):
                if error is not None:
                    decisions.append((index, f"expression '{expression}' resulted in error: {error}", "Invalid",
                                      elapsed, fail_closed))
                elif messages is None:  # upstream's: each validation but those that erred fails so, passed or not
                    decisions.append((index, f"failed messageExpression: {OUT_OF_BUDGET}", "Invalid", elapsed,
                                      fail_closed))
                elif not passed:
                    validation = validations[index]
                    message = messages[index] or str(validation.get("message") or "").strip() \
                        or f"failed expression: {expression.strip()}"
                    decisions.append((index, message, str(validation.get("reason") or "Invalid"), elapsed, True))
        refusals: list[tuple[str, float]] = []  # the audit annotations' errors (under Fail: denials whatever
        # the actions), with the seconds each took
        published: list[tuple[str, str]] = []
        meter.spent = 0
        variables = Variables(declared, context, meter, library, authorizer=False)
        annotations = pspec.get("auditAnnotations") or ()
        validated_namespace = context.variables.get("namespaceObject")
        if annotations:  # upstream evaluates them with the namespace as it is, not CreateNamespaceObject's
            context.add_variable("namespaceObject", shown_namespace(namespace))
        try:
            for annotation in annotations:
                expression = str(annotation.get("valueExpression", ""))
                started = time.perf_counter()
                try:
                    value = without_authorizer(expression, context, meter, library, variables)
                except ExpressionError as e:
                    refusals.append((f"expression '{expression}' resulted in error: {e}",
                                     time.perf_counter() - started))
                    value = None
                finally:
                    meter.spent += variables.take_cost()
                if meter.over_budget():
                    break
                if value is not None and not isinstance(value, str):
                    refusals.append((f"valueExpression '{expression}' resulted in unsupported return type: "
                                     f"{_cel_type(value)}. Return type must be either string or null.",
                                     time.perf_counter() - started))
                elif value and value.strip():  # (null or "": left out, as upstream)
                    published.append((str(annotation.get("key", "")), value.strip()[:_MAX_AUDIT_ANNOTATION_VALUE]))
        finally:
            context.add_variable("namespaceObject", validated_namespace)
        if meter.over_budget():
            decisions, refusals, published = [(0, OUT_OF_BUDGET, "Invalid", 0.0, fail_closed)], [], []
        for decision in decisions:
            decide(*decision)
        for refusal, elapsed in refusals if fail_closed else ():
            verdicts.deny(f"{prefix} denied request: {refusal}")
            _observe_check(pname, bname, refusal, "deny", elapsed)
        if verdicts.failures is not None:
            for key, value in published:
                values = verdicts.annotations.setdefault(f"{pname}/{key}", [])
                if value not in values:
                    values.append(value)
