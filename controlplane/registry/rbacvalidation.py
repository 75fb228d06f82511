"""rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings and ClusterRoleBindings,
defaulted and validated as upstream's ``pkg/apis/rbac/v1`` defaults and
``pkg/apis/rbac/validation`` check them, in its words.

- Names (the objects' and ``roleRef.name``) need only be URL path segments
  (``ValidateRBACName``): ``system:controller:x`` is one, ``a/b`` is not.
- A rule has verbs; a rule with ``nonResourceURLs`` has no API groups, resources or
  resource names, and is not a namespaced Role's; any other rule has API groups and resources.
- A binding's ``roleRef`` names a Role or ClusterRole of this API group (a ClusterRoleBinding
  a ClusterRole only) and never changes ("cannot change roleRef": a binding is deleted and
  made again). Its ``apiGroup`` defaults to the RBAC group, as a User's or Group's subject's.
- A subject is a named ServiceAccount (a DNS subdomain, of the core group, with a namespace
  in a ClusterRoleBinding), User or Group (both of the RBAC group).

Bad values are printed as 1.34's ``field.Error`` prints them: strings quoted, the
``roleRef`` and lists as JSON (the internal types have no JSON tags: ``{"APIGroup": ...}``)::

    >>> prepare_role({"rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]}, None)[0]["message"]
    'Required value: verbs must contain at least one value'
"""

from __future__ import annotations

from typing import Any

import orjson

from .causes import Causes, cause, invalid, not_supported, required
from .dnsnames import path_segment_problems
from .podvalidation import label_selector_causes, subdomain_problems

__all__ = ["GROUP", "prepare_cluster_role", "prepare_cluster_role_binding", "prepare_role", "prepare_role_binding"]

GROUP = "rbac.authorization.k8s.io"
Obj = dict[str, Any]

_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _invalid_shown(field: str, value: Any, detail: str) -> dict[str, str]:
    """A 422 cause whose bad value is a list or struct, printed as JSON."""
    return cause("FieldValueInvalid", field, f"Invalid value: {orjson.dumps(value).decode()}: {detail}")


def _strings(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- roles ---------------------------------------------------------------------------------------
def _rule_causes(rule: Obj, namespaced: bool, at: str) -> Causes:
    """``ValidatePolicyRule``."""
    causes: Causes = []
    if not _strings(rule.get("verbs")):
        causes.append(required(f"{at}.verbs", "verbs must contain at least one value"))
    urls = _strings(rule.get("nonResourceURLs"))
    if urls:
        if namespaced:
            causes.append(_invalid_shown(f"{at}.nonResourceURLs", urls,
                                         "namespaced rules cannot apply to non-resource URLs"))
        if any(_strings(rule.get(k)) for k in ("apiGroups", "resources", "resourceNames")):
            causes.append(_invalid_shown(f"{at}.nonResourceURLs", urls,
                                         "rules cannot apply to both regular resources and non-resource URLs"))
        return causes
    if not _strings(rule.get("apiGroups")):
        causes.append(required(f"{at}.apiGroups", "resource rules must supply at least one api group"))
    if not _strings(rule.get("resources")):
        causes.append(required(f"{at}.resources", "resource rules must supply at least one resource"))
    return causes


def _rules_causes(role: Obj, namespaced: bool) -> Causes:
    causes: Causes = []
    for i, rule in enumerate(_strings(role.get("rules"))):
        if isinstance(rule, dict):
            causes += _rule_causes(rule, namespaced, f"rules[{i}]")
    return causes


def prepare_role(role: Obj, old: Obj | None) -> Causes:
    """``ValidateRole``: its rules, none of them for non-resource URLs."""
    return _rules_causes(role, namespaced=True)


def prepare_cluster_role(role: Obj, old: Obj | None) -> Causes:
    """``ValidateClusterRole``: its rules, and an aggregation rule's selectors (at least one)."""
    causes = _rules_causes(role, namespaced=False)
    aggregation = role.get("aggregationRule")
    if isinstance(aggregation, dict):
        selectors = _strings(aggregation.get("clusterRoleSelectors"))
        if not selectors:
            causes.append(required("aggregationRule.clusterRoleSelectors",
                                   "at least one clusterRoleSelector required if aggregationRule is non-nil"))
        for i, selector in enumerate(selectors):
            if isinstance(selector, dict):
                causes += label_selector_causes(selector, f"aggregationRule.clusterRoleSelectors[{i}]")
    return causes


# -- bindings ------------------------------------------------------------------------------------
def _default_binding(binding: Obj) -> None:
    """``SetDefaults_RoleBinding``/``ClusterRoleBinding`` and ``SetDefaults_Subject``: the RBAC
    group where ``roleRef`` and a User's or Group's subject name none."""
    ref = binding.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    for subject in _strings(binding.get("subjects")):
        if isinstance(subject, dict) and not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


def _role_ref(binding: Obj) -> Obj:
    ref = binding.get("roleRef")
    return ref if isinstance(ref, dict) else {}


def _role_ref_causes(ref: Obj, kinds: tuple[str, ...]) -> Causes:
    causes: Causes = []
    group, kind, name = ref.get("apiGroup") or "", ref.get("kind") or "", ref.get("name") or ""
    if group != GROUP:
        causes.append(not_supported("roleRef.apiGroup", group, (GROUP,)))
    if kind not in kinds:
        causes.append(not_supported("roleRef.kind", kind, kinds))
    if not name:
        causes.append(required("roleRef.name"))
    else:
        causes += [invalid("roleRef.name", name, p) for p in path_segment_problems(str(name))]
    return causes


def _subject_causes(subject: Obj, namespaced: bool, at: str) -> Causes:
    """``ValidateRoleBindingSubject``."""
    causes: Causes = []
    name, kind, group = subject.get("name") or "", subject.get("kind") or "", subject.get("apiGroup") or ""
    if not name:
        causes.append(required(f"{at}.name"))
    if kind == "ServiceAccount":
        if name:
            causes += [invalid(f"{at}.name", name, p) for p in subdomain_problems(str(name))]
        if group:
            causes.append(not_supported(f"{at}.apiGroup", group, ("",)))
        if not namespaced and not subject.get("namespace"):
            causes.append(required(f"{at}.namespace"))
    elif kind in ("User", "Group"):
        if group != GROUP:
            causes.append(not_supported(f"{at}.apiGroup", group, (GROUP,)))
    else:
        causes.append(not_supported(f"{at}.kind", kind, _SUBJECT_KINDS))
    return causes


def _go_ref(ref: Obj) -> Obj:
    """A roleRef as the internal struct, which JSON prints with Go's field names."""
    return {"APIGroup": ref.get("apiGroup") or "", "Kind": ref.get("kind") or "", "Name": ref.get("name") or ""}


def _binding_causes(binding: Obj, old: Obj | None, namespaced: bool) -> Causes:
    _default_binding(binding)
    ref = _role_ref(binding)
    causes = _role_ref_causes(ref, ("Role", "ClusterRole") if namespaced else ("ClusterRole",))
    for i, subject in enumerate(_strings(binding.get("subjects"))):
        if isinstance(subject, dict):
            causes += _subject_causes(subject, namespaced, f"subjects[{i}]")
    if old is not None:
        was = _go_ref(_role_ref(old))
        was["APIGroup"] = was["APIGroup"] or GROUP  # one stored before it was defaulted here
        if was != _go_ref(ref):
            causes.append(_invalid_shown("roleRef", _go_ref(ref), "cannot change roleRef"))
    return causes


def prepare_role_binding(binding: Obj, old: Obj | None) -> Causes:
    """``ValidateRoleBinding`` (``ValidateRoleBindingUpdate``: the roleRef kept), once defaulted."""
    return _binding_causes(binding, old, namespaced=True)


def prepare_cluster_role_binding(binding: Obj, old: Obj | None) -> Causes:
    """``ValidateClusterRoleBinding``: as a RoleBinding's, but a ClusterRole only, and a
    ServiceAccount subject says its namespace."""
    return _binding_causes(binding, old, namespaced=False)
