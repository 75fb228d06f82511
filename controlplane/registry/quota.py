"""ResourceQuotas and LimitRanges: defaults and validation.

- A quota's ``spec.hard`` values are quantities (one that does not parse is a 400,
  as upstream's decoder answers) and not negative; its ``scopes`` are upstream's.
- A LimitRange item of type ``Container`` gets upstream's defaults: a missing
  ``default`` limit from ``max``, then a missing ``defaultRequest`` from the
  ``default`` limit, then from ``min``. Its type is Container, Pod or
  PersistentVolumeClaim.

Evaluation, shared by the quota admission (``api/quota.py``) and the resource
quota controller (``controllers/quota.py``), as upstream's evaluators: ``usage``
is what one object uses (``count/<resource>.<group>``; for pods ``pods``,
``requests.*``/``limits.*`` and the bare ``cpu``/``memory``, each container counted
at the larger of its spec and the resources its status reports, so that a resize
the kubelet has not carried out counts at its larger side, as upstream, and a pod with
pod-level resources charged its pod-level requests and limits for the resources they
name (``podlevel``, as upstream's PodRequests and PodLimits); for services their
load balancers and node ports; for claims ``requests.storage`` and per class),
``covers`` whether a quota's scopes take it in (Terminating, NotTerminating,
BestEffort and NotBestEffort by the pod's QoS class, PriorityClass), ``unspecified`` the
compute resources a pod must state for a quota to charge it (none for a pod with pod-level
resources, as upstream's podEvaluator.Constraints).
"""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction
from typing import Any

from ..podlevel import pod_level, pod_level_set
from ..quantity import QuantityError, format_quantity, parse_quantity
from .causes import invalid, required, show
from .corevalidation import _integer_resource
from .podspec import qos_class
from .volumes import BadQuantity

__all__ = ["SCOPES", "covers", "pod_counts", "prepare_limit_range", "prepare_resource_quota", "tracked",
           "unspecified", "usage"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}

SCOPES = ("BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass",
          "Terminating", "VolumeAttributesClass")
LIMIT_TYPES = ("Container", "PersistentVolumeClaim", "Pod")


def _quantities(values: Any, field: str) -> Causes:
    causes: Causes = []
    for name, value in (values or {}).items():
        try:
            q = parse_quantity(value)
        except QuantityError as e:
            raise BadQuantity(f"{field}.{name}: {e}") from e
        if q < 0:
            causes.append({"reason": "FieldValueInvalid", "field": f"{field}[{name}]",
                           "message": f'Invalid value: "{value}": must be greater than or equal to 0'})
    return causes


def prepare_resource_quota(rq: Obj, old: Obj | None) -> Causes:
    """``ValidateResourceQuota`` (and on an update ``ValidateResourceQuotaUpdate``) of the spec:
    each ``hard`` name a qualified name, standard unless prefixed and then a quota's standard
    one; each value not negative and whole for a counted or extended resource; the scopes
    upstream's, none of them paired with its opposite, each applying to every standard
    resource named (BestEffort only to ``pods``; the others to pods and their compute
    resources); the scope selector's expressions likewise, with their operators; and the
    scopes unchanged by an update. An update that leaves the spec as it was (the quota
    controller's status writes) is not checked again."""
    spec = _spec(rq)
    if old is not None and spec == _spec(old):
        return []
    given = spec.get("hard")
    hard: Obj = given if isinstance(given, dict) else {}
    causes: Causes = []
    for name in hard:
        causes += _quota_resource_name_causes(str(name), f"spec.hard[{name}]")
    causes += _quantities(hard, "spec.hard")
    for name, value in hard.items():
        if _integer_resource(str(name)) and math.ceil(parse_quantity(value) * 1000) % 1000:  # (MilliValue's ceil)
            causes.append(invalid(f"spec.hard[{name}]", str(value), "must be an integer"))
    standard = sorted(n for n in map(str, hard) if _standard_quota_resource(n))
    scopes = spec.get("scopes")
    shown = _go_scopes(scopes)
    named = [str(s) for s in scopes or () if isinstance(s, str)]
    for scope in named:
        if scope not in SCOPES:
            causes.append(_go_invalid("spec.scopes", shown, "unsupported scope"))
        causes += [_go_invalid("spec.scopes", shown, "unsupported scope applied to resource")
                   for n in standard if not _scope_applies(scope, n)]
    causes += [_go_invalid("spec.scopes", shown, "conflicting scopes")
               for pair in _OPPOSITE_SCOPES if pair <= set(named)]
    selector = spec.get("scopeSelector")
    if isinstance(selector, dict):
        causes += _scope_selector_causes(selector, standard, shown)
    if old is not None and set(named) != {str(s) for s in _spec(old).get("scopes") or ()}:
        causes.append(_go_invalid("spec.scopes", shown, "field is immutable"))
    return causes


_STANDARD_QUOTA_RESOURCES = frozenset((
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
    "services.nodeports", "services.loadbalancers"))
_POD_QUOTA_RESOURCES = frozenset(("pods", "cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                                  "limits.memory"))
_OPPOSITE_SCOPES = ({"BestEffort", "NotBestEffort"}, {"Terminating", "NotTerminating"})
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")


def _standard_quota_resource(name: str) -> bool:
    """``IsStandardQuotaResourceName``: the resources quota tracks by their own names, and hugepages."""
    return name in _STANDARD_QUOTA_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))


def _scope_applies(scope: str, resource: str) -> bool:
    """``IsResourceQuotaScopeValidForResource``: BestEffort counts pods only; the other pod
    scopes pods and their cpu and memory; any other scope anything."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return resource in _POD_QUOTA_RESOURCES
    return True


def _quota_resource_name_causes(name: str, field: str) -> Causes:
    """``ValidateResourceQuotaResourceName``: ``validateResourceName`` (a qualified name, a
    standard resource unless prefixed), then, unprefixed, a resource quota tracks."""
    from .podvalidation import label_key_problems

    problems = label_key_problems(name)
    if problems:
        return [invalid(field, name, p) for p in problems]
    causes: Causes = []
    if "/" not in name and not is_standard_resource_name(name):
        causes.append(invalid(field, name, "must be a standard resource type or fully qualified"))
    if "/" not in name and not _standard_quota_resource(name):
        causes.append(invalid(field, name, "must be a standard resource for quota"))
    return causes


def _go_invalid(field: str, shown: str, detail: str) -> dict[str, str]:
    """``field.Invalid`` of a value ``shown`` already as Go's ``%#v`` prints it."""
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}: {detail}"}


def _go_strings(type_name: str, values: Any) -> str:
    """A Go string slice as ``%#v`` prints it: ``T(nil)`` for none, else ``T{"a", "b"}``."""
    if values is None:
        return f"{type_name}(nil)"
    items = values if isinstance(values, list) else [values]
    return type_name + "{" + ", ".join(show(str(v)) for v in items) + "}"


def _go_scopes(scopes: Any) -> str:
    return _go_strings("[]core.ResourceQuotaScope", scopes)


def _scope_selector_causes(selector: Obj, standard: list[str], shown_scopes: str) -> Causes:
    """``validateScopedResourceSelectorRequirement``: each expression's scope upstream's and
    applying to the standard resources named, ``Exists`` for the scopes that take no values,
    values for ``In``/``NotIn`` and none for ``Exists``/``DoesNotExist``; no opposite scopes
    (that cause shows ``spec.scopes``, as upstream's)."""
    at = "spec.scopeSelector.matchExpressions"
    expressions = [e for e in selector.get("matchExpressions") or () if isinstance(e, dict)]
    whole = "core.ScopeSelector{MatchExpressions:[]core.ScopedResourceSelectorRequirement{" + ", ".join(
        "core.ScopedResourceSelectorRequirement{" + f"ScopeName:{show(str(e.get('scopeName') or ''))}, "
        f"Operator:{show(str(e.get('operator') or ''))}, Values:{_go_strings('[]string', e.get('values'))}" + "}"
        for e in expressions) + "}}"
    causes: Causes = []
    names: set[str] = set()
    for e in expressions:
        scope, operator, values = str(e.get("scopeName") or ""), str(e.get("operator") or ""), e.get("values")
        if scope not in SCOPES:
            causes.append(invalid(f"{at}.scopeName", scope, "unsupported scope"))
        causes += [_go_invalid(at, whole, "unsupported scope applied to resource")
                   for n in standard if not _scope_applies(scope, n)]
        if scope in _EXISTS_ONLY and operator != "Exists":
            causes.append(invalid(f"{at}.operator", operator, "must be 'Exists' when scope is any of "
                                  "ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
                                  "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
                                  "ResourceQuotaScopeCrossNamespacePodAffinity"))
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{at}.values", "must be at least one value when `operator` is 'In' or "
                                                       "'NotIn' for scope selector"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(_go_invalid(f"{at}.values", _go_strings("[]string", values),
                                          "must be no value when `operator` is 'Exist' or 'DoesNotExist' for "
                                          "scope selector"))
        else:
            causes.append(invalid(f"{at}.operator", operator, "not a valid selector operator"))
        names.add(scope)
    causes += [_go_invalid(at, shown_scopes, "conflicting scopes") for pair in _OPPOSITE_SCOPES if pair <= names]
    return causes


def prepare_limit_range(lr: Obj, old: Obj | None) -> Causes:
    """A LimitRange's defaults (a Container item's default from its max, its default request
    from its default or min, as SetDefaults_LimitRangeItem), then ``ValidateLimitRange``'s
    causes: a standard or qualified type, once each; quantities not negative; no defaults
    for a Pod item; a PVC item's min or max storage; and, resource by resource,
    min <= default request <= default <= max, and a limit/request ratio of at least 1 and
    at most max/min."""
    spec = _spec(lr)
    causes: Causes = []
    seen: set[Any] = set()
    for i, item in enumerate(spec.get("limits") or ()):
        if not isinstance(item, dict):
            continue
        at, kind = f"spec.limits[{i}]", item.get("type")
        causes += _limit_type_causes(kind, f"{at}.type")
        if kind in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f"{at}.type",
                           "message": f'Duplicate value: "{kind}"'})
        seen.add(kind)
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            values = item.get(field)
            if isinstance(values, dict) and (kind != "Pod" or field not in ("default", "defaultRequest")):
                for name in values:
                    causes += _limit_resource_name_causes(kind, str(name), f"{at}.{field}[{name}]")
            causes += _quantities(values, f"{at}.{field}")
        if kind == "Container":
            default = item.setdefault("default", {})
            request = item.setdefault("defaultRequest", {})
            for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
                for name, value in (source or {}).items():
                    target.setdefault(name, value)
            for key in ("default", "defaultRequest"):
                if not item[key]:
                    del item[key]
        if kind == "Pod":
            causes += [{"reason": "FieldValueForbidden", "field": f"{at}.{key}",
                        "message": "Forbidden: may not be specified when `type` is 'Pod'"}
                       for key in ("default", "defaultRequest") if item.get(key)]
        if kind == "PersistentVolumeClaim" and "storage" not in (item.get("min") or {}) \
                and "storage" not in (item.get("max") or {}):
            causes.append({"reason": "FieldValueRequired", "field": f"{at}.limits", "message": "Required value: "
                           "either minimum or maximum storage value is required, but neither was provided"})
        causes += _limit_order_causes(item, at)
    return causes


def _limit_type_causes(kind: Any, field: str) -> Causes:
    """``validateLimitRangeTypeName``: a qualified name, and a standard type unless it has a prefix."""
    from .podvalidation import label_key_problems

    text = kind if isinstance(kind, str) else ""
    problems = label_key_problems(text)
    if problems:
        return [{"reason": "FieldValueInvalid", "field": field, "message": f'Invalid value: "{text}": {p}'}
                for p in problems]
    if "/" not in text and text not in LIMIT_TYPES:
        return [{"reason": "FieldValueInvalid", "field": field,
                 "message": f'Invalid value: "{text}": must be a standard limit type or fully qualified'}]
    return []


# helper.standardResources (IsStandardResourceName), and the container ones
_STANDARD_RESOURCES = frozenset((
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers"))
_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))


def is_standard_resource_name(name: str) -> bool:
    """``IsStandardResourceName``: one of upstream's standard resources, or hugepages."""
    return name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))


def _limit_resource_name_causes(kind: Any, name: str, field: str) -> Causes:
    """``validateLimitRangeResourceName``: a qualified name, standard unless prefixed; for a
    Pod or Container item also a container's resource, or an extended one."""
    from .podvalidation import label_key_problems

    def bad(message: str) -> dict[str, str]:
        return {"reason": "FieldValueInvalid", "field": field, "message": f'Invalid value: "{name}": {message}'}

    problems = label_key_problems(name)
    if problems:
        return [bad(p) for p in problems]
    prefixed = "/" in name
    causes: Causes = []
    if not prefixed and name not in _STANDARD_RESOURCES and not name.startswith(("hugepages-", "requests.hugepages-")):
        causes.append(bad("must be a standard resource type or fully qualified"))
        if kind not in ("Pod", "Container"):
            return causes
    if kind not in ("Pod", "Container"):
        return causes
    if not prefixed:
        if name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            causes.append(bad("must be a standard resource for containers"))
    elif "kubernetes.io/" not in name and label_key_problems("requests." + name):
        causes.append(bad("doesn't follow extended resource name standard"))
    return causes


def _limit_order_causes(item: Obj, at: str) -> Causes:
    """The comparisons of ``ValidateLimitRange``, resource by resource, in its order and words."""
    values: dict[str, dict[str, Fraction]] = {}
    for field in ("min", "max", "default", "defaultRequest", "maxLimitRequestRatio"):
        got = item.get(field)
        values[field] = {}
        for name, text in (got.items() if isinstance(got, dict) else ()):
            with contextlib.suppress(QuantityError):  # (a 400 above)
                values[field][name] = parse_quantity(text)
    low, high, default, request, ratio = (values[f] for f in ("min", "max", "default", "defaultRequest",
                                                              "maxLimitRequestRatio"))
    causes: Causes = []

    def bad(field: str, name: str, shown: Fraction, message: str) -> None:
        causes.append({"reason": "FieldValueInvalid", "field": f"{at}.{field}[{name}]",
                       "message": f'Invalid value: "{format_quantity(shown)}": {message}'})

    q = format_quantity
    for name in sorted(set().union(*values.values())):
        lo, hi, d, r, m = (v.get(name) for v in (low, high, default, request, ratio))
        if lo is not None and hi is not None and lo > hi:
            bad("min", name, lo, f"min value {q(lo)} is greater than max value {q(hi)}")
        if r is not None and lo is not None and lo > r:
            bad("defaultRequest", name, r, f"min value {q(lo)} is greater than default request value {q(r)}")
        if r is not None and hi is not None and r > hi:
            bad("defaultRequest", name, r, f"default request value {q(r)} is greater than max value {q(hi)}")
        if r is not None and d is not None and r > d:
            bad("defaultRequest", name, r, f"default request value {q(r)} is greater than default limit value {q(d)}")
        if d is not None and lo is not None and lo > d:
            bad("default", name, lo, f"min value {q(lo)} is greater than default value {q(d)}")
        if d is not None and hi is not None and d > hi:
            bad("default", name, hi, f"default value {q(d)} is greater than max value {q(hi)}")
        if m is not None and m < 1:
            bad("maxLimitRequestRatio", name, m, f"ratio {q(m)} is less than 1")
        if m is not None and lo is not None and hi is not None and lo > 0 and m > hi / lo:
            bad("maxLimitRequestRatio", name, m, f"ratio {q(m)} is greater than max/min = {float(hi / lo):f}")
        if d is not None and r is not None and d != r and not _overcommittable(name):
            bad("defaultRequest", name, r, f"default value {q(d)} must equal to defaultRequest value {q(r)} in {name}")
    return causes


def _overcommittable(name: str) -> bool:
    """``IsOvercommitAllowed``: a native resource but hugepages (extended ones are not)."""
    if name.startswith("hugepages-"):
        return False
    domain, slash, _ = name.partition("/")
    return not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or name.startswith("requests.")


# -- evaluation: what an object uses, which quotas cover it (upstream's quota evaluators) -------
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_MUST_SPECIFY = {"requests.cpu": ("requests", "cpu"), "cpu": ("requests", "cpu"),
                 "requests.memory": ("requests", "memory"), "memory": ("requests", "memory"),
                 "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}
_LEGACY_COUNTS = {("", "pods"), ("", "services"), ("", "secrets"), ("", "configmaps"),
                  ("", "persistentvolumeclaims"), ("", "replicationcontrollers"), ("", "resourcequotas")}
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"


def _q(value: Any) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Fraction(0)


def _resize_infeasible(pod: Obj) -> bool:
    return any(isinstance(c, dict) and c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _container_resources(pod: Obj, container: Obj, kind: str) -> dict[str, Any]:
    """What a container takes of ``kind`` (requests, limits), as upstream's PodRequests with
    the status resources: for a container that reports what it runs with, the larger of
    that (and, for requests, what the kubelet allocated) and its spec, or that alone when
    the pod's resize is Infeasible; else its spec."""
    spec_values = (container.get("resources") or {}).get(kind) or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    status = next((s for s in statuses if isinstance(s, dict) and s.get("name") == container.get("name")), None)
    if status is None or not isinstance(status.get("resources"), dict):
        return dict(spec_values)
    reported = [status["resources"].get(kind) or {}]
    if kind == "requests":
        reported.append(status.get("allocatedResources") or {})
    out: dict[str, Any] = {} if _resize_infeasible(pod) else dict(spec_values)
    for values in reported:
        for name, value in values.items():
            if name not in out or _q(value) > _q(out[name]):
                out[name] = value
    return out


def _pod_resources(pod: Obj, kind: str) -> dict[str, Fraction]:
    """A pod's effective requests or limits: the containers' sum (each the larger of its spec
    and what it runs with, ``_container_resources``), at least each init container's (they
    run one at a time), the pod-level value instead for each resource the pod-level ``kind``
    names, plus the pod's overhead."""
    spec = _spec(pod)
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or ():
        for name, value in _container_resources(pod, c, kind).items():
            total[name] = total.get(name, Fraction(0)) + _q(value)
    for c in spec.get("initContainers") or ():
        for name, value in ((c.get("resources") or {}).get(kind) or {}).items():
            total[name] = max(total.get(name, Fraction(0)), _q(value))
    for name, value in pod_level(spec, kind).items():
        total[name] = _q(value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + _q(value)
    return total


def pod_counts(pod: Obj) -> bool:
    """Whether a pod uses quota: not once it has ended (Succeeded or Failed)."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def usage(group: str, plural: str, obj: Obj) -> dict[str, Fraction]:
    """What one object of ``group``/``plural`` uses, by quota resource name."""
    used: dict[str, Fraction] = {f"count/{plural}" + (f".{group}" if group else ""): Fraction(1)}
    if (group, plural) in _LEGACY_COUNTS:
        used[plural] = Fraction(1)
    spec = _spec(obj)
    if (group, plural) == ("", "pods"):
        for kind in ("requests", "limits"):
            for name, value in _pod_resources(obj, kind).items():
                used[f"{kind}.{name}"] = value
                if kind == "requests" and name in _COMPUTE:
                    used[name] = value
    elif (group, plural) == ("", "services"):
        kind = spec.get("type", "ClusterIP")
        if kind == "LoadBalancer":
            used["services.loadbalancers"] = Fraction(1)
        if kind in ("NodePort", "LoadBalancer"):
            used["services.nodeports"] = Fraction(len(spec.get("ports") or ()))
    elif (group, plural) == ("", "persistentvolumeclaims"):
        size = _q(((spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
        used["requests.storage"] = size
        klass = spec.get("storageClassName")
        if klass:
            used[f"{klass}{STORAGE_CLASS_SUFFIX}requests.storage"] = size
            used[f"{klass}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = Fraction(1)
    return used


def _best_effort(spec: Obj) -> bool:
    """Whether the pod's QoS class is BestEffort (upstream's isBestEffort: GetPodQOS, which
    reads a pod's pod-level resources where it has them)."""
    return qos_class(spec) == "BestEffort"


def _scope_matches(scope: str, operator: str, values: Any, spec: Obj) -> bool:
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(spec)
    if scope == "NotBestEffort":
        return not _best_effort(spec)
    if scope == "PriorityClass":
        name = spec.get("priorityClassName")
        return {"In": name in (values or ()), "NotIn": name not in (values or ()),
                "Exists": bool(name), "DoesNotExist": not name}.get(operator, False)
    return False  # CrossNamespacePodAffinity, VolumeAttributesClass: not evaluated here


def covers(quota: Obj, group: str, plural: str, obj: Obj) -> bool:
    """Whether ``quota`` (in the object's namespace) applies to ``obj``: its scopes (pods only)."""
    spec = quota.get("spec") or {}
    scopes = [(s, "Exists", None) for s in spec.get("scopes") or ()]
    scopes += [(e.get("scopeName", ""), e.get("operator", ""), e.get("values"))
               for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or ()]
    if not scopes:
        return True
    if (group, plural) != ("", "pods"):
        return False
    pod_spec = _spec(obj)
    return all(_scope_matches(s, op, values, pod_spec) for s, op, values in scopes)


def tracked(quota: Obj, used: dict[str, Fraction]) -> dict[str, Fraction]:
    """The part of ``used`` that ``quota`` limits (a BestEffort quota limits only pods)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    out = {name: value for name, value in used.items() if name in hard}
    if "BestEffort" in ((quota.get("spec") or {}).get("scopes") or ()):
        out = {name: value for name, value in out.items() if name in ("pods", "count/pods")}
    return out


def unspecified(quota: Obj, pod: Obj) -> list[str]:
    """The compute resources ``quota`` limits that some container of ``pod`` does not state
    (upstream refuses such a pod: without them its usage cannot be charged)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    if "BestEffort" in ((quota.get("spec") or {}).get("scopes") or ()):
        return []
    spec = pod.get("spec") or {}
    if pod_level_set(spec):
        return []  # its containers need not state them: the pod level does
    missing = []
    for name, (kind, resource) in sorted(_MUST_SPECIFY.items()):
        if name in hard:  # as upstream's podEvaluator.Constraints: init containers too, names sorted
            lacking = sorted({str(c.get("name", "")) for c in [*(spec.get("initContainers") or ()),
                                                               *(spec.get("containers") or ())]
                              if ((c.get("resources") or {}).get(kind) or {}).get(resource) is None})
            if lacking:
                missing.append(f"{name} for: {','.join(lacking)}")
    return missing
