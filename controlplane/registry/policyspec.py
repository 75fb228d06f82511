"""What ValidatingAdmissionPolicies and MutatingAdmissionPolicies (and their bindings) share at
their write, as upstream's ``pkg/apis/admissionregistration/validation/validation.go`` and
``v1/defaults.go`` have it: the defaults of a ``matchConstraints`` / ``matchResources``
(``SetDefaults_MatchResources``, ``SetDefaults_Rule``), and the validation of match resources
and their rules, match conditions, variables, a ``paramKind``, a binding's ``policyName`` and
``paramRef``; and ``compiled``, whether a CEL expression compiles with the names its place
declares (webhooks' match conditions use it too)::

    match_resources_causes({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                            "resourceRules": [{"operations": ["*", "CREATE"], ...}]}, "spec.matchConstraints")
    # [{"reason": "FieldValueInvalid", "field": "spec.matchConstraints.resourceRules[0].operations",
    #   "message": 'Invalid value: []admissionregistration.OperationType{"*", "CREATE"}: if '*' is
    #   present, must not specify other operations'}]

The names an expression may use (upstream's ``OptionalVariableDeclarations`` and composition):
``object``, ``oldObject``, ``request`` and ``namespaceObject`` everywhere; ``params`` with a
``paramKind``; ``authorizer`` but in a validation's ``messageExpression``; ``variables`` where
the policy has variables, but never in a match condition (upstream compiles those without
composition).
"""

from __future__ import annotations

import re
from typing import Any

from .causes import Causes, duplicate, forbidden, invalid, not_supported, objects, required, show, too_many
from .dnsnames import DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE, dns1035_problems, path_segment_problems

__all__ = ["BASE_NAMES", "FAILURE_POLICIES", "compiled", "condition_causes", "default_match_resources",
           "policy_spec_causes",
           "expression_causes", "failure_policy_causes", "go_strings", "match_resources_causes",
           "param_kind_causes", "param_ref_causes", "policy_name_causes", "result_problem", "variable_causes"]

Obj = dict[str, Any]
FAILURE_POLICIES = ("Fail", "Ignore")  # supportedFailurePolicies.List(), sorted
_MATCH_POLICIES = ("Equivalent", "Exact")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_MAX_CONDITIONS = 64
_CEL_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
_CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                           "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                           "void", "while"})
# what every admission expression may name (upstream's createEnvForOpts)
BASE_NAMES = frozenset({"object", "oldObject", "request", "namespaceObject"})


def compiled(expression: str, declared: frozenset[str]) -> str | None:
    """Why ``expression`` does not compile with ``declared`` (each dyn) as cel-go's compiler
    says it: a syntax error, a name neither declared nor a function of Kubernetes' CEL
    environments (``undeclared reference to 'x' (in container '')``), or a type error
    among literals; None when it compiles."""
    from .expressions import compile_error

    why = compile_error(expression)
    if why is not None:
        return why
    from .celcheck import DYN, type_errors

    errors = type_errors(expression, dict.fromkeys(declared, DYN), strict=True)
    return "compilation failed: " + "\n".join(errors) if errors else None


def go_strings(type_name: str, values: Any) -> str:
    """A Go string slice as ``field.Invalid`` prints it (``%#v``): ``[]string{"a", "b"}``."""
    return type_name + "{" + ", ".join(show(str(v)) for v in (values if isinstance(values, list) else [])) + "}"


def _go_invalid(field: str, shown: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}: {detail}"}


# -- defaults ----------------------------------------------------------------------------------
def default_match_resources(match: Any) -> None:
    """``SetDefaults_MatchResources`` and ``SetDefaults_Rule`` in place: ``matchPolicy:
    Equivalent``, empty selectors, each rule's ``scope: "*"`` (a null counts as absent, as Go
    decodes it to nil)."""
    if not isinstance(match, dict):
        return
    if match.get("matchPolicy") is None:
        match["matchPolicy"] = "Equivalent"
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            match[key] = {}
    for key in ("resourceRules", "excludeResourceRules"):
        rules = match.get(key)
        for rule in rules if isinstance(rules, list) else ():
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"


# -- validation --------------------------------------------------------------------------------
def failure_policy_causes(value: Any, path: str) -> Causes:
    if value is None:
        return [required(path)]
    return [] if value in FAILURE_POLICIES else [not_supported(path, value, FAILURE_POLICIES)]


def match_resources_causes(match: Obj, path: str) -> Causes:
    """Upstream's ``validateMatchResources``: the match policy, both selectors (strictly, as
    ``ValidateLabelSelector``), and each rule and exclusion (``validateNamedRuleWithOperations``)."""
    from .podvalidation import label_selector_causes

    causes: Causes = []
    policy = match.get("matchPolicy")
    if policy is None:
        causes.append(required(f"{path}.matchPolicy"))
    elif policy not in _MATCH_POLICIES:
        causes.append(not_supported(f"{path}.matchPolicy", policy, _MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        selector = match.get(key)
        if selector is None:
            causes.append(required(f"{path}.{key}"))
        elif isinstance(selector, dict):
            causes += label_selector_causes(selector, f"{path}.{key}")
    for key in ("resourceRules", "excludeResourceRules"):
        rules = match.get(key)
        for at, rule in objects(rules if isinstance(rules, list) else [], f"{path}.{key}", causes):
            causes += _named_rule_causes(rule, at)
    return causes


def _named_rule_causes(rule: Obj, path: str) -> Causes:
    """``validateNamedRuleWithOperations``: each resource name a path segment, once; then the rule."""
    causes: Causes = []
    seen: set[str] = set()
    names = rule.get("resourceNames")
    for i, name in enumerate(names if isinstance(names, list) else ()):
        name = str(name)
        causes += [invalid(f"{path}.resourceNames[{i}]", name, p) for p in path_segment_problems(name)]
        if name in seen:
            causes.append(duplicate(f"{path}.resourceNames[{i}]", name))
        seen.add(name)
    return causes + _rule_causes(rule, path)


def _strings(rule: Obj, key: str) -> list[Any]:
    values = rule.get(key)
    return values if isinstance(values, list) else []


def _rule_causes(rule: Obj, path: str) -> Causes:
    """``validateRuleWithOperations`` and ``validateRule`` (subresources allowed)."""
    causes: Causes = []
    operations = _strings(rule, "operations")
    if not operations:
        causes.append(required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        causes.append(_go_invalid(f"{path}.operations", go_strings("[]admissionregistration.OperationType",
                                                                    operations),
                                  "if '*' is present, must not specify other operations"))
    for i, op in enumerate(operations):
        if op not in _OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{i}]", op, _OPERATIONS))
    for key, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = _strings(rule, key)
        if not values:
            causes.append(required(f"{path}.{key}"))
        if len(values) > 1 and "*" in values:
            causes.append(_go_invalid(f"{path}.{key}", go_strings("[]string", values),
                                      f"if '*' is present, must not specify other {what}"))
    for i, version in enumerate(_strings(rule, "apiVersions")):
        if version == "":
            causes.append(required(f"{path}.apiVersions[{i}]"))
    causes += _resources_causes(_strings(rule, "resources"), f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in _SCOPES:
        causes.append(not_supported(f"{path}.scope", scope, _SCOPES))
    return causes


def _resources_causes(resources: list[Any], path: str) -> Causes:
    """``validateResources``: each resource named; ``x/*`` and ``*/x`` not beside what they
    cover; ``*/*`` alone; ``*`` with no other resource without a subresource (upstream's test
    reads the last such resource only, as here)."""
    causes: Causes = []
    if not resources:
        causes.append(required(path))
    wild_sub: set[str] = set()  # x/*
    wild_res: set[str] = set()  # */x
    double = single = plain = False
    for i, item in enumerate(resources):
        item = str(item)
        if item == "":
            causes.append(required(f"{path}[{i}]"))
            continue
        double = double or item == "*/*"
        single = single or item == "*"
        resource, slash, sub = item.partition("/")
        if not slash:
            plain = item != "*"
            continue
        if resource in wild_sub:
            causes.append(invalid(f"{path}[{i}]", item, f"if '{resource}/*' is present, must not specify {item}"))
        if sub in wild_res:
            causes.append(invalid(f"{path}[{i}]", item, f"if '*/{sub}' is present, must not specify {item}"))
        if sub == "*":
            wild_sub.add(resource)
        if resource == "*":
            wild_res.add(sub)
    if len(resources) > 1 and double:
        causes.append(_go_invalid(path, go_strings("[]string", resources),
                                  "if '*/*' is present, must not specify other resources"))
    if single and plain:
        causes.append(_go_invalid(path, go_strings("[]string", resources),
                                  "if '*' is present, must not specify other resources without subresources"))
    return causes


def result_problem(expression: str, declared: frozenset[str], returns: tuple[str, ...]) -> str | None:
    """Upstream's check of a compiled expression's output type against what its place
    ``returns`` (``must evaluate to bool but got int``), where the type is known here: a
    ``dyn`` result (a field of ``object``, a function this checker does not know) passes."""
    from .celcheck import DYN, formatted, result_type

    got = result_type(expression, dict.fromkeys(declared, DYN))
    if got.kind == "dyn" or formatted(got) in returns:
        return None
    wanted = returns[0] if len(returns) == 1 else "one of [" + " ".join(returns) + "]"
    return f"must evaluate to {wanted} but got {formatted(got)}"


def expression_causes(text: Any, path: str, declared: frozenset[str], missing: str = "",
                      returns: tuple[str, ...] = ()) -> Causes:
    """An expression required (``missing`` the detail) that compiles with ``declared`` and, if
    ``returns`` names them, evaluates to one of those types."""
    if not isinstance(text, str) or not text.strip():
        return [required(path, missing)]
    why = compiled(text, declared)
    if why is None and returns:
        why = result_problem(text, declared, returns)
    return [invalid(path, text, why)] if why is not None else []


def condition_causes(conditions: Any, path: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateMatchConditions``: at most 64, each with an expression that compiles
    (``declared``: without ``variables``) and a qualified name, the names unique."""
    from .podvalidation import label_key_problems

    causes: Causes = []
    if not isinstance(conditions, list):
        return causes
    if len(conditions) > _MAX_CONDITIONS:
        causes.append(too_many(path, len(conditions), _MAX_CONDITIONS))
    names: set[str] = set()
    for at, condition in objects(conditions, path, causes):
        causes += expression_causes(condition.get("expression"), f"{at}.expression", declared, returns=("bool",))
        name = condition.get("name")
        if not name:
            causes.append(required(f"{at}.name"))
            continue
        name = str(name)
        causes += [invalid(f"{at}.name", name, p) for p in label_key_problems(name)]
        if name in names:
            causes.append(duplicate(f"{at}.name", name))
        names.add(name)
    return causes


def variable_causes(variables: Any, path: str, declared: frozenset[str]) -> Causes:
    """Upstream's ``validateVariable`` of each: a name that is a CEL identifier, an expression
    that compiles."""
    causes: Causes = []
    for at, variable in objects(variables if isinstance(variables, list) else [], path, causes):
        name = variable.get("name")
        if not isinstance(name, str) or not name.strip():
            causes.append(required(f"{at}.name", "name is not specified"))
        elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
            causes.append(invalid(f"{at}.name", name, "name is not a valid CEL identifier"))
        causes += expression_causes(variable.get("expression"), f"{at}.expression", declared,
                                    "expression is not specified")
    return causes


def policy_spec_causes(spec: Obj) -> tuple[Causes, frozenset[str], Obj | None]:
    """What either kind of admission policy's spec begins with, in upstream's order: its
    ``failurePolicy``, ``paramKind`` and ``matchConstraints`` (required, with ``resourceRules``,
    which give the type checking its kinds). Also the names its expressions may use (``params``
    with a ``paramKind``) and the constraints when they are an object."""
    causes = failure_policy_causes(spec.get("failurePolicy"), "spec.failurePolicy")
    declared = BASE_NAMES | {"authorizer"}
    kind = spec.get("paramKind")
    if kind is not None:
        declared |= {"params"}
        causes += param_kind_causes(kind, "spec.paramKind")
    constraints = spec.get("matchConstraints")
    if not isinstance(constraints, dict):
        causes.append(required("spec.matchConstraints"))
        return causes, declared, None
    causes += match_resources_causes(constraints, "spec.matchConstraints")
    if not constraints.get("resourceRules"):
        causes.append(required("spec.matchConstraints.resourceRules"))
    return causes, declared, constraints


def param_kind_causes(kind: Any, path: str) -> Causes:
    """Upstream's ``validateParamKind``: an ``apiVersion`` of a DNS subdomain group (if any) and a
    DNS-1035 version, a ``kind`` that is a DNS-1035 label once lower-cased."""
    if not isinstance(kind, dict):
        return []
    causes: Causes = []
    api_version = kind.get("apiVersion")
    if not api_version:
        causes.append(required(f"{path}.apiVersion"))
    else:
        api_version = str(api_version)
        group, version = ("", "") if api_version == "/" else (
            api_version.split("/") if api_version.count("/") == 1 else ("", api_version))
        if api_version.count("/") > 1:
            causes.append(invalid(f"{path}.apiVersion", api_version,
                                  f"unexpected GroupVersion string: {api_version}"))
        else:
            if group:
                problems = (["must be no more than 253 characters"] if len(group) > 253 else []) + \
                    ([SUBDOMAIN_MESSAGE] if not DNS1123_SUBDOMAIN.match(group) else [])
                if problems:
                    causes.append(invalid(f"{path}.apiVersion", group, ",".join(problems)))
            if not version:
                causes.append(invalid(f"{path}.apiVersion", api_version, "version must be specified"))
            elif dns1035_problems(version):
                causes.append(invalid(f"{path}.apiVersion", version, ",".join(dns1035_problems(version))))
    name = kind.get("kind")
    if not name:
        causes.append(required(f"{path}.kind"))
    elif dns1035_problems(str(name).lower()):
        causes.append(invalid(f"{path}.kind", name, "may have mixed case, but should otherwise match: "
                              + ",".join(dns1035_problems(str(name).lower()))))
    return causes


def param_ref_causes(ref: Obj, path: str) -> Causes:
    """Upstream's ``validateParamRef``: a name (a path segment) or a selector, not both; a
    ``parameterNotFoundAction`` (v1 has no default for it)."""
    from .podvalidation import label_selector_causes

    causes: Causes = []
    name, selector = ref.get("name") or "", ref.get("selector")
    exclusive = "name and selector are mutually exclusive"
    if name:
        causes += [invalid(f"{path}.name", name, p) for p in path_segment_problems(str(name))]
        if selector is not None:
            causes.append(forbidden(f"{path}.name", exclusive))
    if selector is not None:
        if isinstance(selector, dict):
            causes += label_selector_causes(selector, f"{path}.selector")
        if name:
            causes.append(forbidden(f"{path}.selector", exclusive))
    if not name and selector is None:
        causes.append(required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        causes.append(required(f"{path}.parameterNotFoundAction"))
    elif action not in ("Deny", "Allow"):
        causes.append(not_supported(f"{path}.parameterNotFoundAction", action, ("Deny", "Allow")))
    return causes


def policy_name_causes(name: Any, path: str) -> Causes:
    """A binding's ``policyName``: required, a DNS subdomain (``NameIsDNSSubdomain``)."""
    if not name:
        return [required(path)]
    name = str(name)
    problems = (["must be no more than 253 characters"] if len(name) > 253 else []) + \
        ([SUBDOMAIN_MESSAGE] if not DNS1123_SUBDOMAIN.match(name) else [])
    return [invalid(path, name, p) for p in problems]
