"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1)
at their write: defaulted as upstream's ``SetDefaults_ValidatingAdmissionPolicySpec``
(``failurePolicy: Fail``) and ``SetDefaults_MatchResources`` (a ``matchConstraints`` or a
binding's ``matchResources`` gets ``matchPolicy: Equivalent``, ``{}`` selectors and rule
``scope: "*"``; v1 defaults no ``paramRef.parameterNotFoundAction``: it is required), and
validated as upstream's ``validateValidatingAdmissionPolicySpec``, ``validateValidation``,
``validateAuditAnnotation`` and ``validateValidatingAdmissionPolicyBindingSpec``
(``pkg/apis/admissionregistration/validation/validation.go``; the parts both policy kinds
share in ``registry/policyspec.py``), each CEL expression compiled with the names its place
declares::

    prepare_validating_admission_policy({"spec": {"validations": [{"expression": "object.x >"}]}}, None)
    # [..., {"reason": "FieldValueInvalid", "field": "spec.validations[0].expression",
    #   "message": 'Invalid value: "object.x >": compilation failed: ERROR: <input>:1:11: ...'}]

Names the policy's environment does not declare do not compile, as upstream's compile at the
write: ``params`` without a ``paramKind``, ``variables`` in a policy without variables (and in
any match condition), ``authorizer`` in a ``messageExpression``, any name but those and
``object``, ``oldObject``, ``request``, ``namespaceObject``, a function of no Kubernetes CEL
library (``compilation failed: ERROR: <input>:1:25: undeclared reference to 'params' (in
container '')``). Type errors do not refuse the write: as upstream's type checking controller, they are
reported in ``status.typeChecking.expressionWarnings``, written here at the write (with
``observedGeneration``) for each validation's ``expression`` and ``messageExpression``,
checked against each kind the ``matchConstraints`` name without wildcards (at most 10: the
built-in kinds, and the custom resources' the server serves, ``SERVED``), ``object`` and
``oldObject`` typed by its schema (``registry/celcheck.py``), ``params`` by the
``paramKind``'s (a CRD's as published: ``metadata`` ObjectMeta; dyn where the kind is not
served)::

    {"fieldRef": "spec.validations[0].expression",
     "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:13: undefined field 'replicaz'\n | ...\n"}

As upstream's, nothing is checked where no matched kind is known, ``params`` neither. Not
checked: ``request``, ``namespaceObject`` and ``variables`` (dyn); an expression's result
type where it is ``dyn`` here (a field of ``object``, a function this checker does not know):
only a known other type is refused (``must evaluate to bool but got int``); the ``get``
permission on the ``paramKind`` upstream's strategy asks of the writer. A write that leaves
the spec as stored, defaults aside (through ``/status``, of the metadata, an apply that sends a
rule again without its defaulted ``scope``), is validated as upstream's status strategy
validates a status (each expression warning's ``warning`` and ``fieldRef`` given) and keeps its
status; upstream validates the spec of a metadata update again (so a policy stored before this
validation keeps taking label changes here). The policy is evaluated by
``api/admissionpolicy.py``.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson

from .causes import Causes, duplicate, invalid, not_supported, objects, required
from .policyspec import (
    compiled,
    condition_causes,
    default_match_resources,
    expression_causes,
    go_strings,
    match_resources_causes,
    param_ref_causes,
    policy_name_causes,
    policy_spec_causes,
    result_problem,
    variable_causes,
)
from .types import BUILTIN

if TYPE_CHECKING:
    from .types import Registry

__all__ = ["SERVED", "compiled", "prepare_validating_admission_policy", "prepare_validating_admission_policy_binding"]

Obj = dict[str, Any]
_REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")  # supportedValidationPolicyReason.List()
_ACTIONS = ("Audit", "Deny", "Warn")  # validValidationActions.List()
_MAX_AUDIT_ANNOTATIONS = 20
_MAX_VALUE_EXPRESSION = 5 * 1024
_NEWLINE = re.compile(r"[\n\r]+")


def prepare_validating_admission_policy(policy: Obj, old: Obj | None) -> Causes:
    """Default ``policy`` in place; the causes of a 422, in upstream's order. A policy that is
    valid gets its ``status`` (``observedGeneration``, ``typeChecking``)."""
    spec = policy.get("spec")
    if not isinstance(spec, dict):
        spec = policy["spec"] = {}
    _default(spec)
    stored = old.get("spec") if old is not None else None
    if isinstance(stored, dict) and (spec == stored or spec == _default(orjson.loads(orjson.dumps(stored)))):
        # a write through /status, or of the metadata, or of only what the defaults fill in
        # (an apply resending a rule without its scope): the stored spec, its status kept
        return _status_causes(policy.get("status"))
    causes = _spec_causes(spec, (policy.get("metadata") or {}).get("name") or "")
    if not causes:
        status = policy.get("status")
        policy["status"] = {**(status if isinstance(status, dict) else {}),
                            "observedGeneration": (policy.get("metadata") or {}).get("generation", 1),
                            "typeChecking": _type_checking(spec)}
    return causes


def _default(spec: Obj) -> Obj:
    """``SetDefaults_ValidatingAdmissionPolicySpec`` and ``SetDefaults_MatchResources`` in place."""
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    default_match_resources(spec.get("matchConstraints"))
    return spec


def _spec_causes(spec: Obj, name: str) -> Causes:
    causes, declared, _ = policy_spec_causes(spec)
    causes += condition_causes(spec.get("matchConditions"), "spec.matchConditions", declared)
    if spec.get("variables"):
        declared |= {"variables"}  # (upstream compiles with composition only where there are variables)
    causes += variable_causes(spec.get("variables"), "spec.variables", declared)
    validations, annotations = spec.get("validations"), spec.get("auditAnnotations")
    if not validations and not annotations:
        detail = "validations or auditAnnotations must contain at least one item"
        return [*causes, required("spec.validations", detail), required("spec.auditAnnotations", detail)]
    for path, validation in objects(validations if isinstance(validations, list) else [], "spec.validations",
                                    causes):
        causes += _validation_causes(validation, path, declared)
    if isinstance(annotations, list):
        if len(annotations) > _MAX_AUDIT_ANNOTATIONS:
            causes.append(invalid("spec.auditAnnotations", orjson.dumps(annotations).decode(),
                                  f"must not have more than {_MAX_AUDIT_ANNOTATIONS} auditAnnotations"))
        keys: set[str] = set()
        for path, annotation in objects(annotations, "spec.auditAnnotations", causes):
            causes += _audit_annotation_causes(annotation, path, name, declared)
            key = str(annotation.get("key") or "")
            if key in keys:
                causes.append(duplicate(f"{path}.key", key))
            keys.add(key)
    return causes


def _validation_causes(validation: Obj, path: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateValidation``: an expression that compiles; a message expression, if
    any, that compiles without ``authorizer``; a message neither blank nor of several lines; a
    known reason."""
    causes = expression_causes(validation.get("expression"), f"{path}.expression", declared,
                               "expression is not specified", returns=("bool",))
    message_expression = validation.get("messageExpression")
    if isinstance(message_expression, str) and message_expression:
        if not message_expression.strip():
            causes.append(invalid(f"{path}.messageExpression", message_expression, "must be non-empty if specified"))
        else:
            causes += expression_causes(message_expression, f"{path}.messageExpression", declared - {"authorizer"},
                                        returns=("string",))
    message = validation.get("message")
    if isinstance(message, str) and message:
        if not message.strip():
            causes.append(invalid(f"{path}.message", message, "message must be non-empty if specified"))
        elif _NEWLINE.search(message.strip()):
            causes.append(invalid(f"{path}.message", message, "message must not contain line breaks"))
    reason = validation.get("reason")
    if reason is not None and reason not in _REASONS:
        causes.append(not_supported(f"{path}.reason", reason, _REASONS))
    return causes


def _audit_annotation_causes(annotation: Obj, path: str, name: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateAuditAnnotation``: ``<policy>/<key>`` a qualified name; a value
    expression of at most 5 KiB that compiles."""
    from .podvalidation import label_key_problems

    key = str(annotation.get("key") or "")
    if name:
        causes = [invalid(f"{path}.key", f"{name}/{key}", p) for p in label_key_problems(f"{name}/{key}")]
    else:
        causes = [invalid(f"{path}.key", key, "requires metadata.name be non-empty")]
    text = annotation.get("valueExpression")
    trimmed = text.strip() if isinstance(text, str) else ""
    if not trimmed:
        causes.append(required(f"{path}.valueExpression", "valueExpression is not specified"))
    elif len(trimmed.encode()) > _MAX_VALUE_EXPRESSION:
        causes.append(required(f"{path}.valueExpression", f"must not exceed {_MAX_VALUE_EXPRESSION} bytes in length"))
    else:
        why = compiled(trimmed, declared) or result_problem(trimmed, declared, ("string", "null_type"))
        if why is not None:
            causes.append(invalid(f"{path}.valueExpression", text, why))
    return causes


def _status_causes(status: Any) -> Causes:
    """Upstream's ``validateValidatingAdmissionPolicyStatus``, of the type checking's warnings:
    each with a ``warning`` and a ``fieldRef``."""
    causes: Causes = []
    checking = status.get("typeChecking") if isinstance(status, dict) else None
    warnings = checking.get("expressionWarnings") if isinstance(checking, dict) else None
    for path, warning in objects(warnings if isinstance(warnings, list) else [],
                                 "status.typeChecking.expressionWarnings", causes):
        if not warning.get("warning"):
            causes.append(required(f"{path}.warning"))
        if not str(warning.get("fieldRef") or "").strip():
            causes.append(required(f"{path}.fieldRef"))
    return causes


def prepare_validating_admission_policy_binding(binding: Obj, old: Obj | None) -> Causes:
    """Default ``binding`` in place; the causes of a 422, in upstream's order: the policy's
    name, the ``paramRef``, the ``matchResources``, the ``validationActions``."""
    spec = binding.get("spec")
    if not isinstance(spec, dict):
        spec = binding["spec"] = {}
    default_match_resources(spec.get("matchResources"))
    causes = policy_name_causes(spec.get("policyName"), "spec.policyName")
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        causes += param_ref_causes(ref, "spec.paramRef")
    match = spec.get("matchResources")
    if isinstance(match, dict):
        causes += match_resources_causes(match, "spec.matchResources")
    return causes + _actions_causes(spec.get("validationActions"), "spec.validationActions")


def _actions_causes(actions: Any, path: str) -> Causes:
    """Upstream's ``validateValidationActions``: at least one, each known and once, not both
    Deny and Warn."""
    listed = actions if isinstance(actions, list) else []
    causes: Causes = []
    seen: set[str] = set()
    for i, action in enumerate(listed):
        if action not in _ACTIONS:
            causes.append(not_supported(f"{path}[{i}]", action, _ACTIONS))
        if str(action) in seen:
            causes.append(duplicate(f"{path}[{i}]", action))
        seen.add(str(action))
    if {"Deny", "Warn"} <= seen:
        causes.append({"reason": "FieldValueInvalid", "field": path, "message": (
            f"Invalid value: {go_strings('[]admissionregistration.ValidationAction', listed)}: must not contain "
            "both Deny and Warn (repeating the same validation failure information in the API response and "
            "headers serves no purpose)")})
    if not seen:
        causes.append(required(path, "at least one validation action is required"))
    return causes


_MAX_KINDS = 10  # upstream's maxTypesToCheck
_KINDS = {(t.group, t.version, t.plural): t.kind for t in BUILTIN}
# the served types, custom resources' included, of the API server a policy is written to
# (``api/rest.py`` sets it around the write): upstream's type checker resolves the kinds of
# CRDs too (their published schemas); unset, only the built-in kinds are known
SERVED: ContextVar[Registry | None] = ContextVar("controlplane_policy_served_types", default=None)
_OBJECT_META = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}


def _type_checking(spec: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``TypeChecker.Check``: a warning for each validation's expression (and
    message expression) that does not type-check against one of the matched kinds, each
    kind's issues on a line of their own (``<group/version>, Kind=<kind>: <issues>``);
    ``params`` typed by the ``paramKind``'s schema where it is known (dyn where not), and
    not declared without a ``paramKind``."""
    served = SERVED.get()
    kinds = [(gvk, t) for gvk in _matched_kinds(spec, served) if (t := _object_type(*gvk, served)) is not None]
    if not kinds:
        return {}
    from .celcheck import DYN, type_errors

    variables = {"request": DYN, "namespaceObject": DYN, "variables": DYN, "authorizer": DYN}
    param_kind = _param_kind(spec.get("paramKind"))
    if param_kind is not None:
        variables["params"] = _object_type(*param_kind, served) or DYN
    warnings = []
    for i, validation in enumerate(v for v in spec.get("validations") or [] if isinstance(v, dict)):
        for key in ("expression", "messageExpression"):
            text = validation.get(key)
            if not isinstance(text, str) or not text.strip():
                continue
            lines = []
            for (group, version, kind), object_type in kinds:
                errors = type_errors(text, {**variables, "object": object_type, "oldObject": object_type})
                if errors:
                    lines.append(f"{group + '/' if group else ''}{version}, Kind={kind}: {chr(10).join(errors)}\n")
            if lines:
                warnings.append({"fieldRef": f"spec.validations[{i}].{key}", "warning": "\n".join(lines)})
    return {"expressionWarnings": warnings} if warnings else {}


def _param_kind(kind: Any) -> tuple[str, str, str] | None:
    """The group, version and kind of a ``paramKind`` (upstream's ``paramsGVK``), None
    without one."""
    if not isinstance(kind, dict) or not isinstance(kind.get("apiVersion"), str) \
            or not isinstance(kind.get("kind"), str):
        return None
    group, _, version = kind["apiVersion"].rpartition("/")
    return group, version, kind["kind"]


def _matched_kinds(spec: dict[str, Any], served: Registry | None) -> list[tuple[str, str, str]]:
    """The kinds the policy's resource rules name without wildcards (upstream's
    ``typesToCheck``): built-in ones, and with ``served`` the custom resources' too, sorted
    by group, version and kind, at most ten."""
    constraints = spec.get("matchConstraints")
    rules = constraints.get("resourceRules") if isinstance(constraints, dict) else None
    found: set[tuple[str, str, str]] = set()
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
        resources = [r for r in rule.get("resources") or [] if isinstance(r, str) and not set(r) & set("*/")]
        if any(not isinstance(x, str) or "*" in x for x in (*groups, *versions)):
            continue
        count = 0
        for group in sorted(groups):
            for version in sorted(versions):
                for resource in sorted(resources):
                    if served is not None:
                        t = served.get(group, version, resource)
                        kind = t.kind if t is not None else None
                    else:
                        kind = _KINDS.get((group, version, resource))
                    if kind is not None:
                        found.add((group, version, kind))
                        count += 1
                        if count == _MAX_KINDS:
                            return sorted(found)
    return sorted(found)


def _object_type(group: str, version: str, kind: str, served: Registry | None = None) -> Any:
    """The CEL type of a kind's objects, by its schema: a built-in kind's definition, or (of
    ``served``) a custom resource's version schema as apiextensions-apiserver publishes it
    (``metadata`` ObjectMeta); None where neither is known (upstream's schema not found:
    the kind is not checked)."""
    from .celcheck import schema_type
    from .schema import definitions, type_of

    defs = definitions()
    root = defs.for_kind(group, version, kind)
    if root is None and served is not None:
        custom = next((t.custom for t in served.in_group_version(group, version)
                       if t.kind == kind and t.custom is not None), None)
        if custom is None or not isinstance(custom.schema, dict):
            return None
        properties = custom.schema.get("properties")
        root = {**custom.schema, "properties": {
            **(properties if isinstance(properties, dict) else {}),
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _OBJECT_META}}
    if root is None:
        return None

    def structural(node: Any) -> Any:
        """A node of the built-in definitions as a structural schema node: ``$ref`` and a
        lone ``allOf`` followed, a nullable type made plain, int-or-string and quantity
        (``oneOf`` two scalars) dyn, an object with neither properties nor a value schema
        open."""
        if not isinstance(node, dict):
            return node
        node = defs.resolve(node)
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            node = {**defs.resolve(all_of[0]), **{k: v for k, v in node.items() if k != "allOf"}}
        t = type_of(node)
        if t is None and "oneOf" in node:
            return {"x-kubernetes-int-or-string": True}
        if t != node.get("type"):
            node = {**node, "type": t}
        if t == "object" and not node.get("properties") and not isinstance(node.get("additionalProperties"), dict):
            node = {**node, "x-kubernetes-preserve-unknown-fields": True}
        return node

    return schema_type(root, root=True, name=kind, resolve=structural)
