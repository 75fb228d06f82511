"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) at its write: the CEL
expressions it holds must compile, as upstream's validation requires of its
``validations[i].expression`` and ``.messageExpression``, ``matchConditions[i].expression``,
``variables[i].expression`` and ``auditAnnotations[i].valueExpression``::

    prepare_validating_admission_policy({"spec": {"validations": [{"expression": "object.x >"}]}}, None)
    # [{"reason": "FieldValueInvalid", "field": "spec.validations[0].expression",
    #   "message": 'Invalid value: "object.x >": compilation failed: ERROR: <input>:1:11: ...'}]

Names the policy's environment does not declare do, as upstream's compile at the write:
``params`` without a ``paramKind``, any name but ``object``, ``oldObject``, ``request``,
``namespaceObject``, ``authorizer`` and ``variables``, a function of no Kubernetes CEL
library (``compilation failed: ERROR: <input>:1:25: undeclared reference to 'params' (in
container '')``). Type errors do not refuse the write: as upstream's type checking controller, they are
reported in ``status.typeChecking.expressionWarnings``, written here at the write (with
``observedGeneration``) for each validation's ``expression`` and ``messageExpression``,
checked against each built-in kind the ``matchConstraints`` name without wildcards (at most
10), ``object`` and ``oldObject`` typed by its schema (``registry/celcheck.py``)::

    {"fieldRef": "spec.validations[0].expression",
     "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:13: undefined field 'replicaz'\n | ...\n"}

Not checked: custom resources' kinds, ``params`` (dyn), ``request``, ``namespaceObject`` and
``variables`` (dyn). The policy is evaluated by ``api/admissionpolicy.py``.
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, invalid, objects
from .expressions import compile_error
from .types import BUILTIN

__all__ = ["compiled", "prepare_validating_admission_policy"]

_EXPRESSIONS = (("validations", "expression"), ("validations", "messageExpression"),
                ("matchConditions", "expression"), ("variables", "expression"),
                ("auditAnnotations", "valueExpression"))


def prepare_validating_admission_policy(policy: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """The causes of a 422 for the policy's expressions that do not compile, in upstream's
    order (each list in turn, each item's expression before its message expression); a
    policy that compiles gets its ``status`` (``observedGeneration``, ``typeChecking``)."""
    spec = policy.get("spec")
    causes: Causes = []
    if not isinstance(spec, dict):
        return causes
    for section in dict.fromkeys(section for section, _ in _EXPRESSIONS):
        items = spec.get(section)
        if not isinstance(items, list):
            continue
        declared = _declared(spec)
        for path, item in objects(items, f"spec.{section}", causes):
            for key in (key for s, key in _EXPRESSIONS if s == section):
                text = item.get(key)
                why = compiled(text, declared) if isinstance(text, str) and text.strip() else None
                if why is not None:
                    causes.append(invalid(f"{path}.{key}", text, why))
    if not causes:
        status = policy.get("status")
        policy["status"] = {**(status if isinstance(status, dict) else {}),
                            "observedGeneration": (policy.get("metadata") or {}).get("generation", 1),
                            "typeChecking": _type_checking(spec)}
    return causes


def _declared(spec: dict[str, Any]) -> frozenset[str]:
    """The variables a policy's expressions may name (upstream's ``OptionalVariableDeclarations``
    at its write: ``params`` only with a ``paramKind``, the authorizer always)."""
    names = {"object", "oldObject", "request", "namespaceObject", "authorizer", "variables"}
    if spec.get("paramKind") is not None:
        names.add("params")
    return frozenset(names)


def compiled(expression: str, declared: frozenset[str]) -> str | None:
    """Why ``expression`` does not compile with ``declared`` (each dyn) as cel-go's compiler
    says it: a syntax error, a name neither declared nor a function of Kubernetes' CEL
    environments (``undeclared reference to 'x' (in container '')``), or a type error
    among literals; None when it compiles."""
    why = compile_error(expression)
    if why is not None:
        return why
    from .celcheck import DYN, type_errors

    errors = type_errors(expression, dict.fromkeys(declared, DYN), strict=True)
    return "compilation failed: " + "\n".join(errors) if errors else None


_MAX_KINDS = 10  # upstream's maxTypesToCheck
_KINDS = {(t.group, t.version, t.plural): t.kind for t in BUILTIN}


def _type_checking(spec: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``TypeChecker.Check``: a warning for each validation's expression (and
    message expression) that does not type-check against one of the matched kinds, each
    kind's issues on a line of their own (``<group/version>, Kind=<kind>: <issues>``)."""
    kinds = _matched_kinds(spec)
    if not kinds:
        return {}
    from .celcheck import DYN, type_errors

    types = [(gvk, _object_type(*gvk)) for gvk in kinds]
    warnings = []
    for i, validation in enumerate(v for v in spec.get("validations") or [] if isinstance(v, dict)):
        for key in ("expression", "messageExpression"):
            text = validation.get(key)
            if not isinstance(text, str) or not text.strip():
                continue
            lines = []
            for (group, version, kind), object_type in types:
                variables = {"object": object_type, "oldObject": object_type, "params": DYN, "request": DYN,
                             "namespaceObject": DYN, "variables": DYN, "authorizer": DYN}
                errors = type_errors(text, variables)
                if errors:
                    lines.append(f"{group + '/' if group else ''}{version}, Kind={kind}: {chr(10).join(errors)}\n")
            if lines:
                warnings.append({"fieldRef": f"spec.validations[{i}].{key}", "warning": "\n".join(lines)})
    return {"expressionWarnings": warnings} if warnings else {}


def _matched_kinds(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The built-in kinds the policy's resource rules name without wildcards (upstream's
    ``typesToCheck``), sorted by group, version and kind, at most ten."""
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
                    kind = _KINDS.get((group, version, resource))
                    if kind is not None:
                        found.add((group, version, kind))
                        count += 1
                        if count == _MAX_KINDS:
                            return sorted(found)
    return sorted(found)


def _object_type(group: str, version: str, kind: str) -> Any:
    from .celcheck import DYN, schema_type
    from .schema import definitions, type_of

    defs = definitions()
    root = defs.for_kind(group, version, kind)
    if root is None:
        return DYN

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
