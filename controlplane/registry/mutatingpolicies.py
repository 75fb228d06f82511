"""MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1)
at their write: defaulted and validated as upstream's ``validateMutatingAdmissionPolicySpec``,
``validateMutation`` and ``validateMutatingAdmissionPolicyBindingSpec``
(``pkg/apis/admissionregistration/validation/validation.go``), the CEL expressions of
``matchConditions``, ``variables`` and each mutation's ``jsonPatch.expression`` or
``applyConfiguration.expression`` compiled as the validating policy's are
(``registry/admissionpolicies.compiled``)::

    prepare_mutating_admission_policy({"metadata": {"name": "p"}, "spec": {...,
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{"}}]}}, None)
    # [{"reason": "FieldValueInvalid", "field": "spec.mutations[0].jsonPatch.expression",
    #   "message": 'Invalid value: "[JSONPatch{": compilation failed: ERROR: <input>:1:12: ...'}]

Defaults, as upstream's ``SetDefaults_MutatingAdmissionPolicySpec`` and
``SetDefaults_MatchResources``: ``failurePolicy: Fail``; a ``matchConstraints`` (or a
binding's ``matchResources``) gets ``matchPolicy: Equivalent``, empty namespace and object
selectors, and ``scope: "*"`` on its rules. ``reinvocationPolicy`` has no default: it is
required. A policy may not match DELETE (only ``CREATE``, ``UPDATE``, ``CONNECT`` and ``*``).

An expression's result type (a ``jsonPatch`` expression must make a ``list(JSONPatch)``, an
``applyConfiguration`` one an ``Object``; upstream's ``must evaluate to list(JSONPatch)``) is
checked at the write only where the expression is a literal of another type (``[{"op":
...}]``, a map, a string): the interpreter has no types to infer the others'; the policy
refuses such a result when it runs (``api/mutatingpolicy.py``).
"""

from __future__ import annotations

import re
from typing import Any

from .admissionpolicies import compiled
from .causes import Causes, duplicate, invalid, not_supported, objects, required, too_many
from .dnsnames import DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE

__all__ = ["prepare_mutating_admission_policy", "prepare_mutating_admission_policy_binding"]

Obj = dict[str, Any]
_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_MUTABLE_OPERATIONS = ("*", "CONNECT", "CREATE", "UPDATE")  # upstream's supportedMutatingOperations
_SCOPES = ("*", "Cluster", "Namespaced")
_MAX_CONDITIONS = 64
_CEL_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
_CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                           "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                           "void", "while"})
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")


def _default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    if match.get("namespaceSelector") is None:
        match["namespaceSelector"] = {}
    if match.get("objectSelector") is None:
        match["objectSelector"] = {}
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"


def prepare_mutating_admission_policy(policy: Obj, old: Obj | None) -> Causes:
    """Default ``policy`` in place; the causes of a 422, in upstream's order."""
    spec = policy.get("spec")
    if not isinstance(spec, dict):
        spec = policy["spec"] = {}
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    _default_match_resources(spec.get("matchConstraints"))
    causes: Causes = []
    if spec["failurePolicy"] not in _FAILURE_POLICIES:
        causes.append(not_supported("spec.failurePolicy", spec["failurePolicy"], _FAILURE_POLICIES))
    declared = frozenset({"object", "oldObject", "request", "namespaceObject", "authorizer", "variables"})
    kind = spec.get("paramKind")
    if kind is not None:
        declared |= {"params"}
        causes += _param_kind_causes(kind, "spec.paramKind")
    constraints = spec.get("matchConstraints")
    if not isinstance(constraints, dict):
        causes.append(required("spec.matchConstraints"))
    else:
        causes += _match_resources_causes(constraints, "spec.matchConstraints")
        if not constraints.get("resourceRules"):
            causes.append(required("spec.matchConstraints.resourceRules"))
        causes += _mutable_operations_causes(constraints, "spec.matchConstraints.resourceRules.operations")
    causes += _condition_causes(spec.get("matchConditions"), "spec.matchConditions", declared)
    for path, variable in objects(spec.get("variables") or [], "spec.variables", causes):
        name = variable.get("name")
        if not isinstance(name, str) or not name.strip():
            causes.append(required(f"{path}.name", "name is not specified"))
        elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
            causes.append(invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
        causes += _expression_causes(variable.get("expression"), f"{path}.expression", declared,
                                     "expression is not specified")
    mutations = spec.get("mutations")
    if not mutations:
        causes.append(required("spec.mutations", "mutations must contain at least one item"))
    else:
        for path, mutation in objects(mutations, "spec.mutations", causes):
            causes += _mutation_causes(mutation, path, declared)
    reinvocation = spec.get("reinvocationPolicy")
    if reinvocation is None or reinvocation == "":
        causes.append(required("spec.reinvocationPolicy"))
    elif reinvocation not in _REINVOCATION_POLICIES:
        causes.append(not_supported("spec.reinvocationPolicy", reinvocation, _REINVOCATION_POLICIES))
    return causes


def prepare_mutating_admission_policy_binding(binding: Obj, old: Obj | None) -> Causes:
    """Default ``binding`` in place; the causes of a 422, in upstream's order."""
    spec = binding.get("spec")
    if not isinstance(spec, dict):
        spec = binding["spec"] = {}
    _default_match_resources(spec.get("matchResources"))
    causes: Causes = []
    name = spec.get("policyName")
    if not name:
        causes.append(required("spec.policyName"))
    elif not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        causes.append(invalid("spec.policyName", name, SUBDOMAIN_MESSAGE if len(str(name)) <= 253
                              else "must be no more than 253 characters"))
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        causes += _param_ref_causes(ref, "spec.paramRef")
    match = spec.get("matchResources")
    if isinstance(match, dict):
        causes += _match_resources_causes(match, "spec.matchResources")
        causes += _mutable_operations_causes(match, "spec.matchResources.resourceRules.operations")
    return causes


def _mutation_causes(mutation: Obj, path: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateMutation``: the patch type, and the one of ``jsonPatch`` and
    ``applyConfiguration`` it names, whose expression compiles."""
    causes: Causes = []
    kind = mutation.get("patchType")
    sections = {"JSONPatch": "jsonPatch", "ApplyConfiguration": "applyConfiguration"}
    if not kind:
        causes.append(required(f"{path}.patchType"))
        return causes
    if kind not in sections:
        causes.append(not_supported(f"{path}.patchType", kind, _PATCH_TYPES))
        return causes
    section = sections[kind]
    body = mutation.get(section)
    if not isinstance(body, dict):
        causes.append(required(f"{path}.{section}", f"must be specified when patchType is {kind}"))
    else:
        text = body.get("expression")
        found = _expression_causes(text, f"{path}.{section}.expression", declared)
        if not found and isinstance(text, str) and _wrong_literal(text, kind):
            found = [invalid(f"{path}.{section}.expression", text,
                             "must evaluate to " + ("list(JSONPatch)" if kind == "JSONPatch" else "Object"))]
        causes += found
    other = "applyConfiguration" if section == "jsonPatch" else "jsonPatch"
    if mutation.get(other) is not None:
        causes.append(invalid(f"{path}.{other}", "{" + other + "}", f"must not be specified when patchType is {kind}"))
    return causes


def _wrong_literal(text: str, kind: str) -> bool:
    """Whether ``text`` is, as a whole, a literal that cannot make what ``kind`` asks for: for
    JSONPatch anything but a list, or a list whose first item is a map literal (``[{"op":
    "add"}]``); for ApplyConfiguration any list, map or scalar literal (not an ``Object{...}``)."""
    from .celsyntax import literal_tokens

    tokens = literal_tokens(text)
    if tokens is None:
        return False  # not one literal: its type is not known here
    if tokens[0] not in ("[", "{"):
        return True
    if kind != "JSONPatch" or tokens[0] == "{":
        return True
    return len(tokens) > 1 and tokens[1] == "{"


def _expression_causes(text: Any, path: str, declared: frozenset[str], missing: str = "") -> Causes:
    if not isinstance(text, str) or not text.strip():
        return [required(path, missing)]
    why = compiled(text, declared)
    return [invalid(path, text, why)] if why is not None else []


def _condition_causes(conditions: Any, path: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateMatchConditions``: at most 64, each named (a qualified name, once)
    with an expression that compiles."""
    causes: Causes = []
    if not isinstance(conditions, list):
        return causes
    if len(conditions) > _MAX_CONDITIONS:
        causes.append(too_many(path, len(conditions), _MAX_CONDITIONS))
    names: set[str] = set()
    for at, condition in objects(conditions, path, causes):
        causes += _expression_causes(condition.get("expression"), f"{at}.expression", declared)
        name = condition.get("name")
        if not name:
            causes.append(required(f"{at}.name"))
        elif not isinstance(name, str) or len(name) > 63 or not _QUALIFIED_NAME.match(name):
            causes.append(invalid(f"{at}.name", name, "name part must consist of alphanumeric characters, '-', '_' "
                                  "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
                                  "or 'my.name',  or '123-abc', regex used for validation is "
                                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"))
        elif name in names:
            causes.append(duplicate(f"{at}.name", name))
        else:
            names.add(name)
    return causes


def _match_resources_causes(match: Obj, path: str) -> Causes:
    """Upstream's ``validateMatchResources`` (selectors taken as they are): the match policy
    and each rule's groups, versions, resources, operations and scope."""
    causes: Causes = []
    policy = match.get("matchPolicy")
    if policy not in _MATCH_POLICIES:
        causes.append(not_supported(f"{path}.matchPolicy", policy, _MATCH_POLICIES))
    for key in ("resourceRules", "excludeResourceRules"):
        for at, rule in objects(match.get(key) or [], f"{path}.{key}", causes):
            causes += _rule_causes(rule, at)
    return causes


def _rule_causes(rule: Obj, path: str) -> Causes:
    causes: Causes = []
    operations = rule.get("operations") or []
    if not operations:
        causes.append(required(f"{path}.operations"))
    elif len(operations) > 1 and "*" in operations:
        causes.append(invalid(f"{path}.operations", operations, "if '*' is present, must not specify other operations"))
    for i, op in enumerate(operations):
        if op not in _OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{i}]", op, _OPERATIONS))
    for key, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = rule.get(key) or []
        if not values:
            causes.append(required(f"{path}.{key}"))
        elif len(values) > 1 and "*" in values:
            causes.append(invalid(f"{path}.{key}", values, f"if '*' is present, must not specify other {what}"))
    resources = rule.get("resources") or []
    if not resources:
        causes.append(required(f"{path}.resources"))
    for i, resource in enumerate(resources):
        if resource == "":
            causes.append(required(f"{path}.resources[{i}]"))
    if len(resources) > 1 and "*/*" in resources:
        causes.append(invalid(f"{path}.resources", resources, "if '*/*' is present, must not specify other resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in _SCOPES:
        causes.append(not_supported(f"{path}.scope", scope, _SCOPES))
    return causes


def _mutable_operations_causes(match: Obj, path: str) -> Causes:
    """A policy may not mutate a DELETE: each such operation, at upstream's path (no index)."""
    return [not_supported(path, op, _MUTABLE_OPERATIONS)
            for rule in match.get("resourceRules") or () if isinstance(rule, dict)
            for op in rule.get("operations") or () if op not in _MUTABLE_OPERATIONS]


def _param_kind_causes(kind: Any, path: str) -> Causes:
    if not isinstance(kind, dict):
        return []
    causes: Causes = []
    if not kind.get("apiVersion"):
        causes.append(required(f"{path}.apiVersion"))
    if not kind.get("kind"):
        causes.append(required(f"{path}.kind"))
    return causes


def _param_ref_causes(ref: Obj, path: str) -> Causes:
    """Upstream's ``validateParamRef``."""
    causes: Causes = []
    name, selector = ref.get("name"), ref.get("selector")
    if name and selector is not None:
        causes.append({"reason": "FieldValueForbidden", "field": f"{path}.name",
                       "message": "Forbidden: name and selector are mutually exclusive"})
        causes.append({"reason": "FieldValueForbidden", "field": f"{path}.selector",
                       "message": "Forbidden: name and selector are mutually exclusive"})
    if not name and selector is None:
        causes.append(required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        causes.append(required(f"{path}.parameterNotFoundAction"))
    elif action not in ("Deny", "Allow"):
        causes.append(not_supported(f"{path}.parameterNotFoundAction", action, ("Deny", "Allow")))
    return causes
