"""flowcontrol.apiserver.k8s.io/v1 FlowSchemas and PriorityLevelConfigurations: upstream's
defaults, validation and bootstrap configuration.

The objects are stored, served and kept as kube-apiserver keeps them (the
bootstrap objects at start, ``api/rest.py``; the ``Dangling`` condition of each
FlowSchema, ``controllers/flowschemas.py``); every request is classified, queued
or rejected by them (``api/flowcontrol.py``).

- ``MANDATORY`` objects (``exempt``, ``catch-all``) always exist with their
  bootstrap spec: the ensurer puts them back when deleted and restores their
  spec whatever their ``apf.kubernetes.io/autoupdate-spec`` says (but the
  ``exempt`` level's shares and lendable percent, which may be tuned).
- ``SUGGESTED`` objects are created when missing, and their spec restored only
  while that annotation is ``"true"`` (an administrator's edit sets it
  ``"false"`` to keep theirs).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .causes import Causes, cause, forbidden, invalid, not_supported, objects, required, show
from .dnsnames import DNS1123_LABEL, DNS1123_SUBDOMAIN

__all__ = ["AUTOUPDATE", "MANDATORY", "SUGGESTED", "bootstrap_objects", "prepare_flow_schema",
           "prepare_priority_level", "restores"]

Obj = dict[str, Any]

AUTOUPDATE = "apf.kubernetes.io/autoupdate-spec"
MAX_MATCHING_PRECEDENCE = 10000
_DISTINGUISHERS = ("ByNamespace", "ByUser")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch")
_MAX_QUEUES = 10_000_000
_PL_TYPES = ("Exempt", "Limited")
_RESPONSE_TYPES = ("Queue", "Reject")
_MAX_HASH_BITS = 60  # upstream's shuffle-sharding entropy limit (queues and hand size)
_SUBDOMAIN_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_HINT = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


# -- the bootstrap configuration (upstream's apis/flowcontrol/bootstrap, v1) -------------------
_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                  "namespaces": ["*"]}
_ALL_NON_RESOURCES = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def _groups(*names: str) -> list[Obj]:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


def _users(*names: str) -> list[Obj]:
    return [{"kind": "User", "user": {"name": n}} for n in names]


def _kube_system_accounts(*names: str) -> list[Obj]:
    return [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": n}} for n in names]


def _everything(subjects: list[Obj]) -> list[Obj]:
    return [{"subjects": subjects, "resourceRules": [_ALL_RESOURCES], "nonResourceRules": [_ALL_NON_RESOURCES]}]


def _get_create_update(group: str, resources: list[str], namespaces: list[str]) -> Obj:
    return {"verbs": ["get", "create", "update"], "apiGroups": [group], "resources": resources,
            "namespaces": namespaces}


def _schema(name: str, level: str, precedence: int, distinguisher: str, rules: list[Obj]) -> tuple[str, Obj]:
    spec: Obj = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = rules
    return "flowschemas", {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                           "metadata": {"name": name}, "spec": spec}


def _limited(name: str, shares: int, lendable: int, queues: int = 0, hand: int = 0,
             length: int = 0) -> tuple[str, Obj]:
    response: Obj = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}} \
        if queues else {"type": "Reject"}
    return "prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
                                                "limitResponse": response}}}


# (plural, object) pairs, priority levels before the schemas that name them
MANDATORY: tuple[tuple[str, Obj], ...] = (
    ("prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "exempt"},
        "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}),
    _limited("catch-all", 5, 0),
    _schema("exempt", "exempt", 1, "", [{
        "subjects": _groups("system:masters"), "resourceRules": [_ALL_RESOURCES],
        "nonResourceRules": [_ALL_NON_RESOURCES]}]),
    _schema("catch-all", "catch-all", 10000, "ByUser",
            _everything(_groups("system:unauthenticated", "system:authenticated"))),
)

SUGGESTED: tuple[tuple[str, Obj], ...] = (
    _limited("system", 30, 33, 64, 6, 50),
    _limited("node-high", 40, 25, 64, 6, 50),
    _limited("leader-election", 10, 0, 16, 4, 50),
    _limited("workload-high", 40, 50, 128, 6, 50),
    _limited("workload-low", 100, 90, 128, 6, 50),
    _limited("global-default", 20, 50, 128, 6, 50),
    _schema("system-nodes", "system", 500, "ByUser", _everything(_groups("system:nodes"))),
    _schema("system-node-high", "node-high", 400, "ByUser", [{
        "subjects": _groups("system:nodes"),
        "resourceRules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                           "clusterScope": True, "namespaces": ["*"]},
                          {"verbs": ["*"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "namespaces": ["*"]}]}]),
    _schema("probes", "exempt", 2, "", [{
        "subjects": _groups("system:unauthenticated", "system:authenticated"),
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]),
    _schema("system-leader-election", "leader-election", 100, "ByUser", [{
        "subjects": [*_users("system:kube-controller-manager", "system:kube-scheduler"),
                     *_kube_system_accounts("*")],
        "resourceRules": [_get_create_update("", ["endpoints", "configmaps"], ["kube-system"]),
                          _get_create_update("coordination.k8s.io", ["leases"], ["*"])]}]),
    _schema("workload-leader-election", "leader-election", 200, "ByUser", [{
        "subjects": _kube_system_accounts("*"),
        "resourceRules": [_get_create_update("", ["endpoints", "configmaps"], ["*"]),
                          _get_create_update("coordination.k8s.io", ["leases"], ["*"])]}]),
    _schema("endpoint-controller", "workload-high", 150, "ByUser", [{
        "subjects": [*_users("system:kube-controller-manager"),
                     *_kube_system_accounts("endpoint-controller", "endpointslicemirroring-controller")],
        "resourceRules": [_get_create_update("", ["endpoints"], ["*"])]}]),
    _schema("kube-controller-manager", "workload-high", 800, "ByNamespace",
            _everything(_users("system:kube-controller-manager"))),
    _schema("kube-scheduler", "workload-high", 800, "ByNamespace", _everything(_users("system:kube-scheduler"))),
    _schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace",
            _everything(_kube_system_accounts("*"))),
    _schema("service-accounts", "workload-low", 9000, "ByUser", _everything(_groups("system:serviceaccounts"))),
    _schema("global-default", "global-default", 9900, "ByUser",
            _everything(_groups("system:unauthenticated", "system:authenticated"))),
)

MANDATORY_NAMES = frozenset((plural, obj["metadata"]["name"]) for plural, obj in MANDATORY)


def bootstrap_objects() -> list[tuple[str, Obj, bool]]:
    """(plural, object, mandatory) for each bootstrap object, annotated and defaulted as
    stored (a copy: the caller may keep it)."""
    made = []
    for mandatory, table in ((True, MANDATORY), (False, SUGGESTED)):
        for plural, obj in table:
            copy: Obj = {**obj, "metadata": {**obj["metadata"], "annotations": {AUTOUPDATE: "true"}},
                         "spec": _deep_copy(obj["spec"])}
            (prepare_priority_level if plural == "prioritylevelconfigurations" else prepare_flow_schema)(copy, None)
            made.append((plural, copy, mandatory))
    return made


def restores(plural: str, stored: Obj, mandatory: bool) -> bool:
    """Whether the ensurer sets the spec of a stored bootstrap object back to bootstrap's:
    always for a mandatory one but the ``exempt`` level, whose shares and lendable percent
    are the administrator's to tune (upstream since v1); for a suggested one while its
    ``apf.kubernetes.io/autoupdate-spec`` annotation is ``"true"``."""
    meta = _dict(stored, "metadata")
    if mandatory:
        return not (plural == "prioritylevelconfigurations" and meta.get("name") == "exempt"
                    and _dict(stored, "spec").get("type") == "Exempt")
    return (meta.get("annotations") or {}).get(AUTOUPDATE) == "true"


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


# -- FlowSchema ------------------------------------------------------------------------------
def _dict(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _list(obj: Obj, key: str) -> list[Any]:
    value = obj.get(key)
    return value if isinstance(value, list) else []


def _default_flow_schema(spec: Obj) -> None:
    if not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = 1000  # SetDefaults_FlowSchemaSpec


def _wildcard_list(values: Any, field: str, empty: str, what: str, causes: Causes) -> list[Any]:
    """A list that must not be empty (``empty`` says so), and holds ``*`` alone or not at all."""
    items = values if isinstance(values, list) else []
    if not items:
        causes.append(required(field, empty))
    elif "*" in items and len(items) > 1:
        causes.append(_invalid_list(field, items, f"if '*' is present, must not specify other {what}"))
    return items


def _verbs(rule: Obj, path: str, causes: Causes) -> None:
    verbs = _wildcard_list(rule.get("verbs"), f"{path}.verbs", "verbs must contain at least one value", "verbs",
                           causes)
    if "*" not in verbs and any(v not in _VERBS for v in verbs):
        listed = ", ".join(f'"{v}"' for v in _VERBS)
        causes.append(cause("FieldValueNotSupported", f"{path}.verbs",
                            f"Unsupported value: {_go_strings(verbs)}: supported values: {listed}"))


def _non_resource_url(url: Any, field: str) -> Causes:
    """Upstream's ValidateNonResourceURLPath."""
    if not isinstance(url, str) or url == "":
        return [invalid(field, url, "must not be empty")]
    if url == "/":
        return []
    if not url.startswith("/"):
        return [invalid(field, url, "must start with slash")]
    if " " in url:
        return [invalid(field, url, "must not contain white-space")]
    if "//" in url:
        return [invalid(field, url, "must not contain double slash")]
    if url.count("*") > 1 or (url.count("*") == 1 and not url.endswith("/*")):
        return [invalid(field, url, "wildcard can only do suffix matching")]
    return []


def _go_strings(items: list[Any]) -> str:
    """A []string as field.Error prints it: ``[]string{"a", "b"}``."""
    return "[]string{" + ", ".join(show(str(v)) for v in items) + "}"


def _invalid_list(field: str, items: list[Any], detail: str) -> dict[str, str]:
    return cause("FieldValueInvalid", field, f"Invalid value: {_go_strings(items)}: {detail}")


_MEMBERS = {"ServiceAccount": ("serviceAccount", ("user", "group")), "User": ("user", ("serviceAccount", "group")),
            "Group": ("group", ("serviceAccount", "user"))}
_KIND_OF = {"user": "User", "group": "Group", "serviceAccount": "ServiceAccount"}


def _subject_causes(subject: Obj, path: str) -> Causes:
    """Upstream's ValidateFlowSchemaSubject: the member of the subject's kind, and no other."""
    kind = subject.get("kind")
    if kind not in _MEMBERS:
        return [not_supported(f"{path}.kind", kind or "", _SUBJECT_KINDS)]
    member, others = _MEMBERS[kind]
    body = subject.get(member)
    causes: Causes = []
    if not isinstance(body, dict):
        causes.append(required(f"{path}.{member}", f"{member} is required when subject kind is '{kind}'"))
    else:
        name = body.get("name")
        if not name:
            causes.append(required(f"{path}.{member}.name"))
        elif kind == "ServiceAccount" and name != "*" and (not DNS1123_SUBDOMAIN.match(str(name)) or len(name) > 253):
            causes.append(invalid(f"{path}.{member}.name", name, _SUBDOMAIN_HINT))
        if kind == "ServiceAccount":
            namespace = body.get("namespace")
            if not namespace:
                causes.append(required(f"{path}.{member}.namespace", "must specify namespace for service account"))
            elif not DNS1123_LABEL.match(str(namespace)) or len(namespace) > 63:
                causes.append(invalid(f"{path}.{member}.namespace", namespace, _LABEL_HINT))
    for other in others:
        if subject.get(other) is not None:
            causes.append(forbidden(f"{path}.{other}",
                                    f"{other} is forbidden when subject kind is not '{_KIND_OF[other]}'"))
    return causes


def _resource_rule_causes(rule: Obj, path: str) -> Causes:
    causes: Causes = []
    _verbs(rule, path, causes)
    _wildcard_list(rule.get("apiGroups"), f"{path}.apiGroups", "resource rules must supply at least one api group",
                   "api groups", causes)
    _wildcard_list(rule.get("resources"), f"{path}.resources", "resource rules must supply at least one resource",
                   "resources", causes)
    namespaces = rule.get("namespaces") if isinstance(rule.get("namespaces"), list) else []
    if not namespaces:
        if not rule.get("clusterScope"):
            causes.append(required(f"{path}.namespaces",
                                   "resource rules that are not cluster scoped must supply at least one namespace"))
    elif "*" in namespaces:
        if len(namespaces) > 1:
            causes.append(_invalid_list(f"{path}.namespaces", namespaces,
                                        "if '*' is present, must not specify other namespaces"))
    else:
        for i, ns in enumerate(namespaces):
            if not isinstance(ns, str) or not DNS1123_LABEL.match(ns) or len(ns) > 63:
                causes.append(invalid(f"{path}.namespaces[{i}]", ns,
                                      "each member of this list must be '*' or a DNS-1123 label; " + _LABEL_HINT))
    return causes


def _non_resource_rule_causes(rule: Obj, path: str) -> Causes:
    causes: Causes = []
    _verbs(rule, path, causes)
    urls = _wildcard_list(rule.get("nonResourceURLs"), f"{path}.nonResourceURLs",
                          "nonResourceURLs must contain at least one value", "non-resource URLs", causes)
    if "*" not in urls:
        for i, url in enumerate(urls):
            causes.extend(_non_resource_url(url, f"{path}.nonResourceURLs[{i}]"))
    return causes


def _rules_causes(rules: list[Any], causes: Causes) -> None:
    for path, rule in objects(rules, "spec.rules", causes):
        subjects = _list(rule, "subjects")
        if not subjects:
            causes.append(required(f"{path}.subjects", "subjects must contain at least one value"))
        for at, subject in objects(subjects, f"{path}.subjects", causes):
            causes.extend(_subject_causes(subject, at))
        resource_rules, non_resource_rules = _list(rule, "resourceRules"), _list(rule, "nonResourceRules")
        if not resource_rules and not non_resource_rules:
            causes.append(required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
        for at, r in objects(resource_rules, f"{path}.resourceRules", causes):
            causes.extend(_resource_rule_causes(r, at))
        for at, r in objects(non_resource_rules, f"{path}.nonResourceRules", causes):
            causes.extend(_non_resource_rule_causes(r, at))


def prepare_flow_schema(fs: Obj, old: Obj | None) -> Causes:
    """Defaults in place, then the causes of a 422, as upstream's v1 defaulting and
    ValidateFlowSchema."""
    spec = fs.get("spec")
    if not isinstance(spec, dict):
        spec = fs["spec"] = {}
    _default_flow_schema(spec)
    name = _dict(fs, "metadata").get("name") or ""
    causes: Causes = []
    precedence = spec.get("matchingPrecedence")
    if isinstance(precedence, int):
        if precedence <= 0:
            causes.append(invalid("spec.matchingPrecedence", precedence, "must be a positive value"))
        elif precedence > MAX_MATCHING_PRECEDENCE:
            causes.append(invalid("spec.matchingPrecedence", precedence,
                                  f"must not be greater than {MAX_MATCHING_PRECEDENCE}"))
        elif precedence == 1 and name != "exempt":
            causes.append(invalid("spec.matchingPrecedence", precedence,
                                  "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in _DISTINGUISHERS:
        causes.append(not_supported("spec.distinguisherMethod.type", method.get("type") or "", _DISTINGUISHERS))
    level = _dict(spec, "priorityLevelConfiguration").get("name")
    if not level:
        causes.append(required("spec.priorityLevelConfiguration.name", "must reference a priority level"))
    elif not isinstance(level, str) or not DNS1123_SUBDOMAIN.match(level) or len(level) > 253:
        causes.append(invalid("spec.priorityLevelConfiguration.name", level, _SUBDOMAIN_HINT))
    rules = spec.get("rules")
    if isinstance(rules, list):
        _rules_causes(rules, causes)
    if name in ("exempt", "catch-all"):
        causes += _fixed_spec("flowschemas", name, spec)
    return causes


# -- PriorityLevelConfiguration ------------------------------------------------------------
def _default_priority_level(spec: Obj) -> None:
    """Upstream's v1 SetDefaults_*: an exempt level's shares and lendable percent 0; a
    limited level's 30 and 0; queuing 64 queues, hands of 8, 50 requests a queue."""
    if spec.get("type") == "Exempt":
        exempt = spec.get("exempt")
        if exempt is None:
            exempt = spec["exempt"] = {}
        if isinstance(exempt, dict):
            exempt.setdefault("nominalConcurrencyShares", 0)
            exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = 30
        if limited.get("lendablePercent") is None:
            limited["lendablePercent"] = 0
        queuing = _dict(limited, "limitResponse").get("queuing")
        if isinstance(queuing, dict):
            for field, default in (("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)):
                if not queuing.get(field):
                    queuing[field] = default


def _percent(value: Any, field: str) -> Causes:
    if isinstance(value, int) and not 0 <= value <= 100:
        return [invalid(field, value, "must be between 0 and 100, inclusive")]
    return []


def _non_negative(value: Any, field: str, detail: str = "must be a non-negative integer") -> Causes:
    return [invalid(field, value, detail)] if isinstance(value, int) and value < 0 else []


def _queuing_causes(queuing: Obj, path: str) -> Causes:
    """Upstream's ValidatePriorityLevelQueuingConfiguration (shuffle sharding's limits)."""
    causes: Causes = []
    queues, hand, length = queuing.get("queues"), queuing.get("handSize"), queuing.get("queueLengthLimit")
    if isinstance(length, int) and length <= 0:
        causes.append(invalid(f"{path}.queueLengthLimit", length, "must be positive"))
    if isinstance(queues, int) and queues <= 0:
        causes.append(invalid(f"{path}.queues", queues, "must be positive"))
    elif isinstance(queues, int) and queues > _MAX_QUEUES:
        causes.append(invalid(f"{path}.queues", queues, f"must not be greater than {_MAX_QUEUES}"))
    if not isinstance(hand, int) or not isinstance(queues, int):
        return causes
    if hand <= 0:
        causes.append(invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        causes.append(invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif math.ceil(math.log2(queues) * hand) > _MAX_HASH_BITS:
        causes.append(invalid(f"{path}.handSize", hand,
                              f"required entropy bits of deckSize {queues} and handSize {hand} should not be "
                              f"greater than {_MAX_HASH_BITS}"))
    return causes


def _limit_response_causes(response: Any, path: str) -> Causes:
    response = response if isinstance(response, dict) else {}
    kind, queuing = response.get("type") or "", response.get("queuing")
    if kind == "Reject":
        return [forbidden(f"{path}.queuing", "must be nil if limited.limitResponse.type is not Limited")] \
            if queuing is not None else []
    if kind == "Queue":
        if not isinstance(queuing, dict):
            return [required(f"{path}.queuing", "must not be empty if limited.limitResponse.type is Limited")]
        return _queuing_causes(queuing, f"{path}.queuing")
    return [not_supported(f"{path}.type", kind, _RESPONSE_TYPES)]


def _limited_causes(limited: Obj) -> Causes:
    path = "spec.limited"
    causes = _non_negative(limited.get("nominalConcurrencyShares"), f"{path}.nominalConcurrencyShares")
    causes += _limit_response_causes(limited.get("limitResponse"), f"{path}.limitResponse")
    causes += _percent(limited.get("lendablePercent"), f"{path}.lendablePercent")
    causes += _non_negative(limited.get("borrowingLimitPercent"), f"{path}.borrowingLimitPercent",
                            "if specified, must be a non-negative integer")
    return causes


def prepare_priority_level(pl: Obj, old: Obj | None) -> Causes:
    """Defaults in place, then the causes of a 422, as upstream's v1 defaulting and
    ValidatePriorityLevelConfiguration: ``catch-all``'s spec is fixed; ``exempt``'s may
    vary in its shares and lendable percent only."""
    spec = pl.get("spec")
    if not isinstance(spec, dict):
        spec = pl["spec"] = {}
    _default_priority_level(spec)
    name = _dict(pl, "metadata").get("name") or ""
    kind = spec.get("type") or ""
    causes: Causes = []
    if (kind == "Exempt") != (name == "exempt"):
        causes.append(invalid("spec.type", kind, "type must be 'Exempt' if and only if name is 'exempt'"))
    if kind == "Exempt":
        if spec.get("limited") is not None:
            causes.append(forbidden("spec.limited", "must be nil if the type is not Limited"))
        exempt = _dict(spec, "exempt")
        causes += _non_negative(exempt.get("nominalConcurrencyShares"), "spec.exempt.nominalConcurrencyShares")
        causes += _percent(exempt.get("lendablePercent"), "spec.exempt.lendablePercent")
    elif kind == "Limited":
        if spec.get("exempt") is not None:
            causes.append(forbidden("spec.exempt", "must be nil if the type is Limited"))
        limited = spec.get("limited")
        if not isinstance(limited, dict):
            causes.append(required("spec.limited", "must not be empty when type is Limited"))
        else:
            causes += _limited_causes(limited)
    else:
        causes.append(not_supported("spec.type", kind, _PL_TYPES))
    if name == "catch-all":
        causes += _fixed_spec("prioritylevelconfigurations", name, spec)
    return causes


def _fixed_spec(plural: str, name: str, spec: Obj) -> Causes:
    """A mandatory object's spec must be its bootstrap spec (defaulted), as upstream's."""
    fixed = _MANDATORY_SPECS.get((plural, name))
    if fixed is None or spec == fixed:
        return []
    shown = json.dumps(spec, separators=(",", ":"), sort_keys=True)
    return [cause("FieldValueInvalid", "spec", f"Invalid value: {shown}: spec of '{name}' must equal the fixed value")]


def _mandatory_specs() -> dict[tuple[str, str], Obj]:
    specs = {}
    for plural, obj in MANDATORY:
        made: Obj = {**obj, "spec": _deep_copy(obj["spec"])}
        (prepare_priority_level if plural == "prioritylevelconfigurations" else prepare_flow_schema)(made, None)
        specs[(plural, obj["metadata"]["name"])] = made["spec"]
    return specs


_MANDATORY_SPECS: dict[tuple[str, str], Obj] = {}
_MANDATORY_SPECS.update(_mandatory_specs())
