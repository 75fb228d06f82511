"""scheduling.k8s.io/v1beta1 PodGroups and Workloads as kube-apiserver validates them (1.37's
declarative validation of their types: ``+k8s:unionMember``, ``+k8s:minimum``,
``+k8s:immutable``, ``+k8s:update=NoSet``, ``+k8s:maxItems``...).

The schema checks the types and ``spec.schedulingPolicy``'s presence; what is left is
what a user meets: a policy must be exactly one of ``basic`` and ``gang``, ``minCount``
at least 1, the policy's kind fixed at creation (``gang.minCount`` stays mutable), the
Workload reference, the topology constraints and a Workload's list of templates
immutable.

    >>> prepare_podgroup({"spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}, None)[0]["message"]
    'Invalid value: 0: must be greater than or equal to 1'
"""

from __future__ import annotations

import json
from typing import Any

from .dnsnames import DNS1123_LABEL
from .podvalidation import dns_label_problems, label_key_problems, subdomain_problems

__all__ = ["prepare_podgroup", "prepare_scheduling_workload"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

_MAX_TEMPLATES = 8


def _cause(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


def _invalid(field: str, value: Any, message: str) -> dict[str, str]:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return _cause("FieldValueInvalid", field, f"Invalid value: {shown}: {message}")


def _forbidden(field: str, message: str) -> dict[str, str]:
    return _cause("FieldValueForbidden", field, f"Forbidden: {message}")


def _required(field: str) -> dict[str, str]:
    return _cause("FieldValueRequired", field, "Required value")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _label_key(field: str, key: Any) -> Causes:
    """``+k8s:format=k8s-label-key``: a qualified name, ``[prefix/]name`` (``content.IsLabelKey``)."""
    if not isinstance(key, str) or not key:
        return [_required(field)]
    return [_invalid(field, key, p) for p in label_key_problems(key)]


def _bytes(problems: list[str]) -> list[str]:
    """The ``content`` package's words: a length in bytes, where the legacy checks said characters."""
    return [p.replace(" characters", " bytes") if p.startswith("must be no more than") else p for p in problems]


def _short_name(field: str, value: Any) -> Causes:
    """``+k8s:required`` and ``+k8s:format=k8s-short-name`` (``content.IsDNS1123Label``)."""
    if not isinstance(value, str) or not value:
        return [_required(field)]
    if len(value) > 63 or not DNS1123_LABEL.match(value):
        return [_invalid(field, value, p) for p in _bytes(dns_label_problems(value))]
    return []


def _long_name(field: str, value: Any, required: bool = True) -> Causes:
    """``+k8s:format=k8s-long-name`` (``content.IsDNS1123Subdomain``), required or optional."""
    if not isinstance(value, str) or not value:
        return [_required(field)] if required else []
    return [_invalid(field, value, p) for p in _bytes(subdomain_problems(value))]


def _path_segment_name(field: str, value: Any) -> Causes:
    """``+k8s:required`` and ``+k8s:format=k8s-path-segment-name`` (``content.IsPathSegmentName``)."""
    if not isinstance(value, str) or not value:
        return [_required(field)]
    if value in (".", ".."):
        return [_invalid(field, value, f"may not be '{value}'")]
    return [_invalid(field, value, f"may not contain '{c}'") for c in ("/", "%") if c in value]


def _controller_ref(path: str, ref: Any) -> Causes:
    """A Workload's ``controllerRef`` (``TypedLocalObjectReference``): an optional API group
    (a long name), a kind and a name (path segment names)."""
    ref = _dict(ref)
    return _long_name(f"{path}.apiGroup", ref.get("apiGroup"), required=False) + \
        _path_segment_name(f"{path}.kind", ref.get("kind")) + _path_segment_name(f"{path}.name", ref.get("name"))


_MAX_PRIORITY = 1_000_000_000  # HighestUserDefinablePriority
_MAX_GROUP_CLAIMS = 4
_CLAIM_FIELDS = ("name", "resourceClaimName", "resourceClaimTemplateName")


def _group_claim(at: str, claim: Obj) -> Causes:
    """``PodGroupResourceClaim``: exactly one of a claim and a template (long names), named by a short name."""
    sources = [k for k in _CLAIM_FIELDS[1:] if claim.get(k) is not None]
    union = ", ".join(f"`{k}`" for k in _CLAIM_FIELDS[1:])
    causes: Causes = []
    if not sources:
        causes.append(_invalid(at, "", f"must specify one of: {union}"))
    elif len(sources) > 1:
        causes.append(_invalid(at, "{" + ", ".join(sources) + "}", f"must specify exactly one of: {union}"))
    causes += _short_name(f"{at}.name", claim.get("name"))
    for key in sources:
        causes += _long_name(f"{at}.{key}", claim.get(key))
    return causes


def _group_fields(path: str, spec: Obj) -> Causes:
    """What a PodGroup (and its template) says of its priority class, priority and claims:
    a long name, at most 1,000,000,000, at most 4 claims named uniquely."""
    causes = _long_name(f"{path}.priorityClassName", spec.get("priorityClassName"), required=False)
    priority = spec.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool) and priority > _MAX_PRIORITY:
        causes.append(_invalid(f"{path}.priority", priority, f"must be less than or equal to {_MAX_PRIORITY}"))
    claims = spec.get("resourceClaims")
    if isinstance(claims, list):
        if len(claims) > _MAX_GROUP_CLAIMS:
            return [*causes, _cause("FieldValueTooMany", f"{path}.resourceClaims",
                                    f"Too many: {len(claims)}: must have at most {_MAX_GROUP_CLAIMS} items")]
        seen: set[str] = set()
        for i, claim in enumerate(claims):  # ValSliceUnique, then each item
            name = _dict(claim).get("name")
            if isinstance(name, str) and name in seen:  # (the item as Go's json.Marshal writes it)
                item = {k: _dict(claim)[k] for k in _CLAIM_FIELDS if _dict(claim).get(k) is not None}
                causes.append(_cause("FieldValueDuplicate", f"{path}.resourceClaims[{i}]",
                                     f"Duplicate value: {json.dumps(item, separators=(',', ':'))}"))
            seen.add(name if isinstance(name, str) else "")
        for i, claim in enumerate(claims):
            causes += _group_claim(f"{path}.resourceClaims[{i}]", _dict(claim))
    return causes


def _policy(path: str, policy: Any) -> Causes:
    """PodGroupSchedulingPolicy: a union of ``basic`` and ``gang``; ``gang.minCount`` >= 1."""
    if not isinstance(policy, dict):
        return []  # absent: the schema's Required value
    chosen = [m for m in ("basic", "gang") if policy.get(m) is not None]
    if not chosen:
        return [_invalid(path, "", "must specify one of: `basic`, `gang`")]
    if len(chosen) > 1:
        return [_invalid(path, "{basic, gang}", "must specify exactly one of: `basic`, `gang`")]
    if chosen == ["gang"]:
        count = _dict(policy.get("gang")).get("minCount")
        if count is None:
            return [_required(f"{path}.gang.minCount")]
        if isinstance(count, int) and count < 1:
            return [_invalid(f"{path}.gang.minCount", count, "must be greater than or equal to 1")]
    return []


def _policy_update(path: str, policy: Any, old: Any) -> Causes:
    """The policy's kind is chosen at creation: ``basic`` immutable, ``gang`` neither set nor
    unset (its ``minCount`` may change)."""
    policy, old = _dict(policy), _dict(old)
    causes: Causes = []
    if policy.get("basic") != old.get("basic"):
        causes.append(_forbidden(f"{path}.basic", "field is immutable"))
    if old.get("gang") is None and policy.get("gang") is not None:
        causes.append(_forbidden(f"{path}.gang", "field cannot be set once created"))
    elif old.get("gang") is not None and policy.get("gang") is None:
        causes.append(_forbidden(f"{path}.gang", "field cannot be cleared once set"))
    return causes


def _constraints(path: str, constraints: Any) -> Causes:
    topology = _dict(constraints).get("topology")
    if not isinstance(topology, list):
        return []
    if len(topology) > 1:
        return [_cause("FieldValueTooMany", f"{path}.topology",
                       f"Too many: {len(topology)}: must have at most 1 item")]
    return [c for i, t in enumerate(topology) for c in _label_key(f"{path}.topology[{i}].key", _dict(t).get("key"))]


def prepare_podgroup(pg: Obj, old: Obj | None) -> Causes:
    spec = _dict(pg.get("spec"))
    causes = _policy("spec.schedulingPolicy", spec.get("schedulingPolicy"))
    causes += _constraints("spec.schedulingConstraints", spec.get("schedulingConstraints"))
    ref = spec.get("workloadRef")
    if isinstance(ref, dict):
        causes += _long_name("spec.workloadRef.workloadName", ref.get("workloadName"))
        causes += _short_name("spec.workloadRef.templateName", ref.get("templateName"))
    causes += _group_fields("spec", spec)
    parent = spec.get("parentCompositePodGroupName")
    if parent is not None:
        causes += _long_name("spec.parentCompositePodGroupName", parent)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        causes += _policy_update("spec.schedulingPolicy", spec.get("schedulingPolicy"),
                                 old_spec.get("schedulingPolicy"))
        for name in ("workloadRef", "podGroupTemplateRef", "schedulingConstraints", "disruptionMode",
                     "priorityClassName", "priority", "preemptionPolicy", "resourceClaims",
                     "parentCompositePodGroupName"):
            if spec.get(name) != old_spec.get(name):
                causes.append(_forbidden(f"spec.{name}", "field is immutable"))
    return causes


def prepare_scheduling_workload(wl: Obj, old: Obj | None) -> Causes:
    """A Workload: at most 8 templates, each named (a DNS label, unique) with a valid policy;
    templates neither added nor removed by an update, their constraints immutable."""
    spec = _dict(wl.get("spec"))
    templates = spec.get("podGroupTemplates")
    templates = templates if isinstance(templates, list) else []
    causes: Causes = []
    if spec.get("controllerRef") is not None:
        causes += _controller_ref("spec.controllerRef", spec.get("controllerRef"))
    if not templates and not spec.get("compositePodGroupTemplates"):
        causes.append(_invalid("spec", "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"))
    if len(templates) > _MAX_TEMPLATES:
        causes.append(_cause("FieldValueTooMany", "spec.podGroupTemplates",
                             f"Too many: {len(templates)}: must have at most {_MAX_TEMPLATES} items"))
    seen: set[str] = set()
    for i, t in enumerate(templates):
        path = f"spec.podGroupTemplates[{i}]"
        t = _dict(t)
        name = t.get("name")
        causes += _short_name(f"{path}.name", name)
        if isinstance(name, str) and name in seen:
            causes.append(_cause("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
        seen.add(name if isinstance(name, str) else "")
        if t.get("schedulingPolicy") is None:
            causes.append(_required(f"{path}.schedulingPolicy"))
        causes += _policy(f"{path}.schedulingPolicy", t.get("schedulingPolicy"))
        causes += _constraints(f"{path}.schedulingConstraints", t.get("schedulingConstraints"))
        causes += _group_fields(path, t)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("controllerRef") != old_spec.get("controllerRef"):
            causes.append(_forbidden("spec.controllerRef", "field is immutable"))
        before = {_dict(t).get("name"): _dict(t) for t in old_spec.get("podGroupTemplates") or ()}
        after = {_dict(t).get("name"): _dict(t) for t in templates}
        if set(after) - set(before):
            causes.append(_forbidden("spec.podGroupTemplates", "may not add items"))
        if set(before) - set(after):
            causes.append(_forbidden("spec.podGroupTemplates", "may not remove items"))
        for i, t in enumerate(templates):
            prior = before.get(_dict(t).get("name"))
            if prior is None:
                continue
            path = f"spec.podGroupTemplates[{i}]"
            causes += _policy_update(f"{path}.schedulingPolicy", _dict(t).get("schedulingPolicy"),
                                     prior.get("schedulingPolicy"))
            for name in ("schedulingConstraints", "disruptionMode", "priorityClassName", "priority",
                         "preemptionPolicy", "resourceClaims"):
                if _dict(t).get(name) != prior.get(name):
                    causes.append(_forbidden(f"{path}.{name}", "field is immutable"))
    return causes
