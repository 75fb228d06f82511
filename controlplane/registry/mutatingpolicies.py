"""MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1)
at their write: defaulted and validated as upstream's ``validateMutatingAdmissionPolicySpec``,
``validateMutation`` and ``validateMutatingAdmissionPolicyBindingSpec``
(``pkg/apis/admissionregistration/validation/validation.go``), the CEL expressions of
``matchConditions``, ``variables`` and each mutation's ``jsonPatch.expression`` or
``applyConfiguration.expression`` compiled as the validating policy's are
(``registry/policyspec.py``, which holds what the two kinds share)::

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

from typing import Any

from .causes import Causes, invalid, not_supported, objects, required
from .policyspec import (
    condition_causes,
    default_match_resources,
    expression_causes,
    match_resources_causes,
    param_ref_causes,
    policy_name_causes,
    policy_spec_causes,
    variable_causes,
)

__all__ = ["prepare_mutating_admission_policy", "prepare_mutating_admission_policy_binding"]

Obj = dict[str, Any]
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")
_MUTABLE_OPERATIONS = ("*", "CONNECT", "CREATE", "UPDATE")  # upstream's supportedMutatingOperations


def prepare_mutating_admission_policy(policy: Obj, old: Obj | None) -> Causes:
    """Default ``policy`` in place; the causes of a 422, in upstream's order."""
    spec = policy.get("spec")
    if not isinstance(spec, dict):
        spec = policy["spec"] = {}
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    default_match_resources(spec.get("matchConstraints"))
    causes, declared, constraints = policy_spec_causes(spec)
    if constraints is not None:
        causes += _mutable_operations_causes(constraints, "spec.matchConstraints.resourceRules.operations")
    causes += condition_causes(spec.get("matchConditions"), "spec.matchConditions", declared)
    if spec.get("variables"):
        declared |= {"variables"}
    causes += variable_causes(spec.get("variables"), "spec.variables", declared)
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
    default_match_resources(spec.get("matchResources"))
    causes: Causes = policy_name_causes(spec.get("policyName"), "spec.policyName")
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        causes += param_ref_causes(ref, "spec.paramRef")
    match = spec.get("matchResources")
    if isinstance(match, dict):
        causes += match_resources_causes(match, "spec.matchResources")
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
        found = expression_causes(text, f"{path}.{section}.expression", declared)
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


def _mutable_operations_causes(match: Obj, path: str) -> Causes:
    """A policy may not mutate a DELETE: each such operation, at upstream's path (no index)."""
    return [not_supported(path, op, _MUTABLE_OPERATIONS)
            for rule in match.get("resourceRules") or () if isinstance(rule, dict)
            for op in rule.get("operations") or () if op not in _MUTABLE_OPERATIONS]
