"""MutatingAdmissionPolicy (admissionregistration.k8s.io/v1): CEL that changes the object
of a write, as upstream's mutating admission policy plugin
(``k8s.io/apiserver/pkg/admission/plugin/policy/mutating``: ``dispatcher.go``,
``patch/json_patch.go``, ``patch/smd.go``).

Where in a write (``api/rest.py``): the last mutating admission before the mutating
webhooks, as upstream's plugin order has it (``pkg/kubeapiserver/options/plugins.go``)::

    built-in mutating admission -> MutatingAdmissionPolicy -> mutating webhooks
    -> (a second round, if a policy applied a mutation or a webhook changed the object)
       built-in mutating admission -> MutatingAdmissionPolicy's IfNeeded policies
       -> the IfNeeded webhooks the changes ask for

A create, an update, a subresource written by a handler of its own (with its own kind) or a
CONNECT (its options) is mutated by every MutatingAdmissionPolicyBinding (in name order) whose
policy exists and matches it, as a validating policy's (``api/admissionpolicy.py``: the policy's
``matchConstraints`` and the binding's ``matchResources``, selectors included). The policy's
``matchConditions`` are evaluated on the object as it came to the policy (a false one wins over
the others' errors); then its ``mutations``, in order, each on the object the one before it made,
with the ``variables`` of that object:

- ``JSONPatch``: the expression makes a list of ``JSONPatch{op, path, from, value}``, applied
  as upstream's json-patch library applies an RFC 6902 patch (``api/gojsonpatch.py``: a
  ``replace`` of a missing key adds it, negative indexes count from the end; its errors in
  its words); a ``test`` that fails leaves the object as it was (upstream's
  ``ErrTestFailed``); ``jsonpatch.escapeKey`` escapes a key for a path.
- ``ApplyConfiguration``: the expression makes an ``Object{...}`` (``Object.spec{...}`` for
  its fields' values), merged into the object with server-side apply's merge
  (``registry/typed.merge``: lists by their keys, maps by key, atomic values replaced), and
  refused when it sets an atomic list, map or struct (upstream's ``validatePatch``: ``may not
  mutate atomic arrays, maps or structs: .spec.x``). An initializer named for another field
  than it sits in (``Object.spec{selector: Object.spec.wrong{}}``) is a type mismatch.

The object a mutation changed is defaulted again (upstream defaults the patched object).
A mutation that fails (an expression that fails or makes the wrong type, a patch that does
not apply, its budget spent) is an error of its own and the next mutation still runs, on the
object as the failed one found it (upstream's dispatcher); the errors fail the request unless
the policy's ``failurePolicy`` is ``Ignore`` (the mutations that applied kept), with upstream's
Status: code 403, reason ``Invalid``, ``policy 'p' with binding 'b' denied request: <error>``,
each a cause. Each mutation has a runtime budget of its own, the match conditions theirs
(``admissionpolicy.conditions_hold``), as upstream's.

Reinvocation, as upstream's (``Reinvocation``; ``api/rest.py`` runs the rounds): a policy
that applied a mutation, changing the object or not (upstream's ``Dirty`` attributes), or a
webhook that changed it, asks for a second round, where every IfNeeded policy invoked in the
first runs once more (after the built-in mutating admission, run again as upstream's reinvoker
runs the whole chain), then the IfNeeded webhooks the changes ask for (``webhooks.HookReinvocation``).

Message constructions are rewritten into maps naming their type (``registry/celsyntax.py``):
the interpreter parses them but cannot evaluate them. Parameters as a validating policy's
(``api/policyparams.py``): applied once per param, ``params`` in every expression; ``authorizer``
(``api/celauthz.py``) in the variables, match conditions and mutations. Not done: the expressions' result types
at the policy's write but for whole literals (``registry/mutatingpolicies.py``; the others are
checked when they run).
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

from ..metrics import MUTATING_POLICY_CHECK_SECONDS, MUTATING_POLICY_CHECKS
from ..registry.celsyntax import STRUCT_TYPE
from ..registry.expressions import OUT_OF_BUDGET, ExpressionError, Meter
from ..registry.shapes import Kind, Shape, custom_shape, shape_for
from ..registry.typed import ShapeError, merge
from ..registry.types import ResourceType
from . import gojsonpatch
from .admissionpolicy import (
    AdmissionPolicies,
    BoundPolicies,
    ConditionsFailed,
    Matching,
    authorized,
    conditions_hold,
    forbidden_details,
    shown_namespace,
    uses_authorizer,
)
from .celauthz import AuthorizerLibrary
from .equivalents import as_version
from .errors import ApiError
from .policyparams import ParamError
from .policyvariables import Variables

if TYPE_CHECKING:
    from .rbac import User

__all__ = ["MutatingPolicies", "Reinvocation"]

Obj = dict[str, Any]
Invocation = tuple[str, str, str]  # (binding, param namespace, param name): upstream's invocation key


class _MutationError(Exception):
    """A mutation, or a policy's match conditions, that fail: the policy's failurePolicy decides."""


class Reinvocation:
    """What one write's first round of policies leaves for the second (upstream's
    ``policyReinvokeContext``, as its dispatcher fills it in): the IfNeeded invocations made
    (their match conditions true), and whether a mutation was applied (upstream's ``Dirty``
    versioned attributes, which mark every IfNeeded invocation made to run again, the round's
    own changes aside)."""

    __slots__ = ("applied", "invoked")

    def __init__(self) -> None:
        self.invoked: list[Invocation] = []  # the IfNeeded invocations made (a binding with a param), in order
        self.applied = False  # a mutation was applied (the object changed or not): the write is admitted again

    def needed(self, changed: bool) -> list[Invocation]:
        """The invocations to make again: every IfNeeded one made, when a mutation was applied or
        the object changed since the policies ran (``changed``: the webhooks, or the built-in
        admission run again, changed it: upstream's ``IsOutputChangedSinceLastPolicyInvocation``);
        else none."""
        return list(self.invoked) if self.applied or changed else []


class MutatingPolicies(BoundPolicies):

    async def mutate(self, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                     obj: Obj | None, old: Obj | None, subresource: str | None, user: User | None,
                     kind: tuple[str, str, str] | None = None, generated_name: bool = False,
                     reinvocation: Reinvocation | None = None, only: list[Invocation] | None = None) -> bool:
        """Apply the matching policies to ``obj`` in place (True: one changed it), once per
        param of each binding (``api/policyparams.py``). ``reinvocation``: where the first
        round notes what a second needs; ``only``: the second round's invocations
        (``Reinvocation.needed``), the others' match conditions evaluated all the same. Errors,
        the configuration's first (a param not found), refuse the write together once every
        policy ran, as upstream's dispatcher."""
        if obj is None or operation == "DELETE":
            return False
        bindings = sorted(await self.bindings.of(""), key=lambda b: b["metadata"]["name"])
        if not bindings:
            return False
        policies = {(p.get("metadata") or {}).get("name"): p for p in await self.policies.of("")}
        work: Obj = obj  # copied (as admission shows it) once a binding matches: until then, read only
        kept: Obj | None = None
        contexts: dict[str, Any] = {}  # the expressions' variables, by the version matched
        library: AuthorizerLibrary | None = None
        meter = Meter()  # the bound on each expression's work, for upstream's per-call cost limit
        changed_any = False
        configuration: list[tuple[str, str]] = []  # the errors to refuse with, (message, reason), in order
        failed: list[tuple[str, str]] = []
        reported: set[str] = set()  # the policies whose paramKind is not served (reported once each)

        def refused(policy: Obj, binding: Obj | None, error: ParamError) -> None:
            pname = str(policy["metadata"]["name"])
            if (policy.get("spec") or {}).get("failurePolicy") == "Ignore":
                return
            if binding is not None:
                configuration.append((f"policy '{pname}' with binding '{binding['metadata']['name']}' denied request: "
                                      f"{error.configured}", ""))
            elif pname not in reported:
                reported.add(pname)
                configuration.append((f'policy "{pname}" denied request: {error.configured}', ""))  # (Go's %q)

        matching = Matching(self, rtype, namespace, name, operation, obj, old, subresource, kind, namespaced_only=True)
        async for binding, policy, matched, params in matching.invocations(bindings, policies, refused):
            bname = binding["metadata"]["name"]
            pspec = policy.get("spec") or {}
            pname = str(policy["metadata"]["name"])
            ignore = pspec.get("failurePolicy") == "Ignore"
            for param in params:  # the policy applied once per param (none: parameterNotFoundAction Allow)
                meta = (param or {}).get("metadata") or {}
                key = (bname, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                # in the second round one not to be invoked again still has its match conditions
                # evaluated, their errors reported (upstream's dispatcher asks ShouldReinvoke after them)
                conditions_only = only is not None and key not in only
                if kept is None:
                    work, kept = _shown(obj, operation, generated_name)
                context = contexts.get(matched.api_version)
                if context is None:
                    context = contexts[matched.api_version] = AdmissionPolicies._context(
                        rtype, namespace, name if not generated_name else "", operation, None,
                        await as_version(self.kube, old, rtype, matched), subresource, user,
                        shown_namespace(await matching.namespace()), kind, matched)
                    meter.install(context)
                    if library is not None:
                        library.install(context)
                if library is None and uses_authorizer(pspec):  # one per request, as upstream's caching one
                    library = AuthorizerLibrary(self.kube.authorizer, user, (
                        rtype.group, rtype.plural, subresource or "", namespace or "", name))
                    for each in contexts.values():
                        library.install(each)
                context.add_variable("params", param)
                before = work
                reinvocable = reinvocation is not None and only is None and \
                    pspec.get("reinvocationPolicy") == "IfNeeded"
                try:
                    if matched is rtype:
                        result = await self._apply(policy, bname, rtype, work, context, library, meter,
                                                   conditions_only)
                        if result is not None:
                            work = result[0]
                    else:  # in the version matched, and back (upstream's versioned attributes)
                        versioned = await as_version(self.kube, work, rtype, matched) or work
                        result = await self._apply(policy, bname, matched, versioned, context, library, meter,
                                                   conditions_only)
                        if result is not None and result[0] != versioned:
                            work = await as_version(self.kube, result[0], matched, rtype) or work
                except _MutationError as e:  # its match conditions erred: not invoked (upstream's)
                    if not ignore:
                        failed.append((f"policy '{pname}' with binding '{bname}' denied request: {e}", "Invalid"))
                    continue
                if result is None or conditions_only:
                    continue  # a match condition said no: not invoked (upstream's)
                _, mutation_errors, applied = result
                if not ignore:  # each failed mutation an error of its own (Ignore: the others' work kept)
                    failed += [(f"policy '{pname}' with binding '{bname}' denied request: {error}", "Invalid")
                               for error in mutation_errors]
                if work != before:
                    changed_any = True
                if reinvocation is not None:
                    reinvocation.applied = reinvocation.applied or applied
                    if reinvocable:  # (invoked, whether its mutations failed or not)
                        reinvocation.invoked.append(key)
        errors = configuration + failed
        if errors:  # upstream's: 403, the first error's message (and reason, else Forbidden), each a cause
            message, reason = errors[0]
            shown = name if not generated_name else str((obj.get("metadata") or {}).get("generateName") or "")
            details = forbidden_details(rtype, shown, obj)  # (a name to generate: its prefix, as upstream's)
            details["causes"] = [{"message": m} for m, _ in errors]
            raise ApiError(403, reason or "Forbidden", message, details)
        if changed_any and kept is not None:
            _restore(work, kept)
            obj.clear()
            obj.update(work)
        return changed_any

    async def _apply(self, policy: Obj, binding: str, rtype: ResourceType, obj: Obj, context: Any,
                     library: AuthorizerLibrary | None, meter: Meter,
                     conditions_only: bool = False) -> tuple[Obj, list[str], bool] | None:
        """``obj`` after ``policy``'s mutations, the errors of those that failed and whether one
        was applied; None when its match conditions say no (their errors raise
        ``_MutationError``). As upstream's dispatcher: each mutation is applied to the object
        the ones before it made, each within a runtime budget of its own; one that fails is an
        error of its own and the next still runs, on the object as the failed one found it.
        ``library``: the request's ``authorizer``, which the variables, match conditions and
        mutations ask, as upstream's. ``conditions_only``: the match conditions, not the mutations.
        Each mutation is counted in upstream's ``apiserver_mutating_admission_policy_check_*``,
        the match conditions in its matcher's metrics (kind ``policy``, type ``validate``, as
        upstream's plugin labels them)."""
        pspec = policy.get("spec") or {}
        declared = pspec.get("variables")
        pname = str(policy["metadata"]["name"])
        context.add_variable("object", obj)
        observed = (pname, "policy", "validate", str(context.variables["request"]["operation"]))
        try:
            if not await conditions_hold(pspec.get("matchConditions") or (), context, library, meter,
                                         Variables(declared, context, meter, library), observed):
                return None  # a false condition: the policy does not apply, whatever errors others had
        except ConditionsFailed as e:
            raise _MutationError(str(e)) from e
        if conditions_only:
            return obj, [], False
        errors: list[str] = []
        applied = False
        shape: Shape | None = None
        for mutation in pspec.get("mutations") or ():
            # each mutation its own evaluation, of the object the one before made (upstream's activation)
            context.add_variable("object", obj)
            variables = Variables(declared, context, meter, library)
            meter.spent = 0  # (upstream's patcher: RuntimeCELCostBudget for each mutation)
            started = time.perf_counter()
            try:
                if mutation.get("patchType") == "JSONPatch":
                    expression = str((mutation.get("jsonPatch") or {}).get("expression", ""))
                    obj = _json_patched(obj, await _evaluated(expression, context, library, meter, variables))
                else:
                    expression = str((mutation.get("applyConfiguration") or {}).get("expression", ""))
                    if shape is None:
                        shape = _shape(rtype)
                    obj = _applied(obj, await _evaluated(expression, context, library, meter, variables), shape)
            except _MutationError as e:
                errors.append(str(e))
                _observe(pname, binding, "out_of_budget" if str(e) == OUT_OF_BUDGET else "invalid_error", started)
                continue
            _observe(pname, binding, "no_error", started)
            applied = True  # (upstream's Dirty versioned attributes, whether the object changed or not)
        return obj, errors, applied


def _observe(policy: str, binding: str, error_type: str, started: float) -> None:
    """One mutation in upstream's metrics (``error_type``: ``no_error``, ``invalid_error``, ``out_of_budget``)."""
    MUTATING_POLICY_CHECKS.labels(policy, binding, error_type).inc()
    MUTATING_POLICY_CHECK_SECONDS.labels(policy, binding, error_type).observe(time.perf_counter() - started)


async def _evaluated(expression: str, context: Any, library: AuthorizerLibrary | None, meter: Meter,
                     variables: Variables) -> Any:
    """``expression``'s value; its error in upstream's words (``expression '...' resulted in error: ...``;
    a variable's it read: ``composited variable "v" fails to evaluate: ...``), or, when it and the
    variables it read took the mutation past its budget (``meter``), upstream's out of budget
    error, whatever the value or error."""
    try:
        value = await authorized(expression, context, library, meter, variables)
    except ExpressionError as e:
        if meter.over_budget():
            raise _MutationError(OUT_OF_BUDGET) from e
        raise _MutationError(f"expression '{expression}' resulted in error: {e}") from e
    if meter.over_budget():
        raise _MutationError(OUT_OF_BUDGET)
    return value


def _json_patched(obj: Obj, result: Any) -> Obj:
    """Upstream's ``jsonPatcher.Patch``: the expression's JSONPatch list (``result``) applied to ``obj``."""
    if not isinstance(result, list):
        raise _MutationError("type mismatch: JSONPatchType.expression should evaluate to array")
    operations = []
    for item in result:
        if not isinstance(item, dict) or item.get(STRUCT_TYPE) != "JSONPatch":
            raise _MutationError("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch")
        operation = {"op": str(item.get("op", "")), "path": str(item.get("path", ""))}
        if item.get("from"):
            operation["from"] = str(item["from"])
        if "value" in item:
            value = item["value"]
            _check_type_names(value)
            operation["value"] = _plain(value)
        operations.append(operation)
    try:
        patched = gojsonpatch.apply(obj, operations)
    except gojsonpatch.PatchError as e:
        if e.test_failed:
            return obj  # a failed test: the patch is not applied
        raise _MutationError(f"JSON Patch: {e}") from e
    if not isinstance(patched, dict):
        raise _MutationError("JSON Patch: the patch did not leave an object")
    return patched


def _applied(obj: Obj, result: Any, shape: Shape) -> Obj:
    """Upstream's ``applyConfigPatcher.Patch``: the expression's ``Object{...}`` (``result``) merged into ``obj``."""
    if not isinstance(result, dict) or result.get(STRUCT_TYPE) != "Object":
        raise _MutationError("unsupported return type from ApplyConfiguration expression: the expression must "
                             "make an Object{...}")
    _check_type_names(result)
    config = _plain(result)
    config["apiVersion"], config["kind"] = obj.get("apiVersion"), obj.get("kind")
    atomics = _atomics(config, shape, "")
    if atomics:
        raise _MutationError("error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps "
                             f"or structs: {', '.join(atomics)}")
    try:
        merged = merge(obj, config, shape)
    except (ShapeError, RecursionError) as e:
        raise _MutationError(f"error applying patch: failed to merge patch: {e}") from e
    return copy.deepcopy(merged) if merged is not obj else obj


def _check_type_names(value: Any, expected: str | None = None) -> None:
    """Upstream's ``CheckTypeNamesMatchFieldPathNames``: each initializer within an
    ``Object`` one is named for its field's path (``Object.spec{selector:
    Object.spec.selector{}}``)."""
    if isinstance(value, list):
        for item in value:
            _check_type_names(item, expected)
        return
    if not isinstance(value, dict) or STRUCT_TYPE not in value:
        return
    name = value[STRUCT_TYPE]
    if expected is not None and name != expected:
        raise _MutationError(f"type mismatch: expected object initializer type {expected}, got {name}")
    if name != "Object" and not name.startswith("Object."):
        if name != "JSONPatch":
            raise _MutationError(f"type mismatch: unknown object initializer type {name}")
        return
    for key, item in value.items():
        if key != STRUCT_TYPE:
            _check_type_names(item, f"{name}.{key}")


def _plain(value: Any) -> Any:
    """``value`` without the type names of its message constructions."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != STRUCT_TYPE}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _shape(rtype: ResourceType) -> Shape:
    custom = rtype.custom
    if custom is not None and custom.schema is not None:
        return custom_shape(custom.schema)
    return shape_for(rtype.group, rtype.version, rtype.kind)


def _atomics(value: Any, shape: Shape | None, path: str) -> list[str]:
    """The paths (``.spec.x``, ``[0]``) in an apply configuration of atomic lists, maps and
    structs (upstream's ``findAtomics``): the configuration would replace them whole."""
    if shape is None:
        return []
    found: list[str] = []
    if isinstance(value, dict):
        if shape.kind is Kind.LEAF:
            return [path]
        for key, item in value.items():
            found += _atomics(item, shape.field(key), f"{path}.{key}")
    elif isinstance(value, list):
        if shape.kind in (Kind.LEAF, Kind.DEDUCED):
            found.append(path)
        if shape.kind is not Kind.LEAF:
            elem = shape.elem if shape.kind is not Kind.DEDUCED else shape
            for i, item in enumerate(value):
                found += _atomics(item, elem, f"{path}[{i}]")
    return found


def _shown(obj: Obj, operation: str, generated_name: bool) -> tuple[Obj, Obj]:
    """A copy of ``obj`` as admission sees it, and the fields set aside: a create's has no
    uid, generation or creationTimestamp, no name when it is to be generated (as the
    webhooks see it, ``api/webhooks.py``)."""
    shown = copy.deepcopy(obj)
    kept: Obj = {}
    if operation == "CREATE" and isinstance(shown.get("metadata"), dict):
        meta = shown["metadata"]
        kept = {k: meta.pop(k) for k in ("uid", "generation") if k in meta}
        kept["creationTimestamp"] = meta.pop("creationTimestamp", None)
        if generated_name:
            kept["name"] = meta.pop("name", None)
    return shown, kept


def _restore(obj: Obj, kept: Obj) -> None:
    """Put back what ``_shown`` set aside (a name the policies gave stays)."""
    if not kept:
        return
    meta = obj.setdefault("metadata", {})
    for key, value in kept.items():
        if key == "name":
            if value is not None and not meta.get("name"):
                meta["name"] = value
        elif key == "creationTimestamp" or key not in meta:
            meta[key] = value
