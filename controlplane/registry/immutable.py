"""What a write may not say, as upstream's hand-written validation says it: workloads'
selectors and templates, and what an update may not change (``ValidateDeploymentUpdate``,
``ValidateStatefulSetUpdate``, ``ValidateJobUpdate``, ``ValidatePodUpdate``,
``ValidateServiceUpdate``). Each answers the causes of a 422 Invalid::

    workload_causes("deployments", new, old)   # [{'field': 'spec.selector', ... 'field is immutable'}]

The messages keep upstream's words, which tools match on: Flux and Argo CD recreate an
object whose update failed with ``field is immutable``.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from .causes import duplicate, forbidden, invalid, not_supported, required
from .disruption import selector_matches
from .jobvalidation import job_policy_causes
from .podvalidation import (
    dns_label_problems,
    label_key_problems,
    port_name_problems,
    subdomain_problems,
    template_causes,
)
from .rollingupdate import daemon_set_strategy_causes, deployment_rolling_update_causes
from .statefulsetvalidation import stateful_set_spec_causes
from .validation import Shape, same_once_stored, shape_at, shape_of
from .workloads import default_claim_templates

__all__ = ["pod_update_causes", "selector_causes", "service_causes", "service_update_causes", "workload_causes",
           "workload_spec_causes"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

# apps/v1 and batch/v1 kinds with a LabelSelector over their pod template, and the word
# upstream's "empty selector is invalid for ..." uses (ReplicaSets say "deployment" too)
_SELECTED = {"deployments": "deployment", "replicasets": "deployment", "daemonsets": "daemonset",
             "statefulsets": "statefulset", "jobs": "job"}
# the StatefulSet spec fields an update may change
_STATEFUL_SET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                         "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def _go_map(labels: Any) -> str:
    """A map[string]string as Go's ``%#v`` prints it in a field error (keys sorted)."""
    if not isinstance(labels, dict):
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join(f'"{k}":"{labels[k]}"' for k in sorted(labels)) + "}"


def _immutable(field: str, value: Any) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {_show(value)}: field is immutable"}


def _show(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() if not isinstance(value, str) else f'"{value}"'


def _spec(obj: Obj | None) -> Obj:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_causes(selector: Obj, path: str) -> Causes:
    """A LabelSelector's expressions as ValidateLabelSelector checks them: a known operator,
    values for In and NotIn and none for Exists and DoesNotExist."""
    causes: Causes = []
    for i, e in enumerate(selector.get("matchExpressions") or ()):
        if not isinstance(e, dict):
            continue
        at, op, values = f"{path}.matchExpressions[{i}]", e.get("operator"), e.get("values")
        if op in ("In", "NotIn") and not values:
            causes.append({"reason": "FieldValueRequired", "field": f"{at}.values",
                           "message": "Required value: must be specified when `operator` is 'In' or 'NotIn'"})
        elif op in ("Exists", "DoesNotExist") and values:
            causes.append({"reason": "FieldValueForbidden", "field": f"{at}.values",
                           "message": "Forbidden: may not be specified when `operator` is 'Exists' or "
                                      "'DoesNotExist'"})
        elif op not in _OPERATORS:
            causes.append({"reason": "FieldValueInvalid", "field": f"{at}.operator",
                           "message": f"Invalid value: {_show(op)}: not a valid selector operator"})
    return causes


_NONNEGATIVE = "must be greater than or equal to 0"
_JOB_COUNTS = ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit")
_STRATEGIES = ("Recreate", "RollingUpdate")


def _counts(spec: Obj, fields: tuple[str, ...], path: str) -> Causes:
    """``ValidateNonnegativeField`` over the integer ``fields`` of ``spec`` present."""
    causes = []
    for field in fields:
        value = spec.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            causes.append(invalid(f"{path}.{field}", value, _NONNEGATIVE))
    return causes


def _deployment_strategy(strategy: Any) -> Causes:
    """``ValidateDeploymentStrategy``: a known type, no rolling parameters for Recreate, and
    valid ones for RollingUpdate (``rollingupdate``).
    An unknown type is reported on the whole strategy, printed as Go's ``%#v`` prints it."""
    if not isinstance(strategy, dict):
        return []
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if kind == "Recreate" and rolling is not None:
        return [forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
    if kind == "RollingUpdate":
        return deployment_rolling_update_causes(rolling, "spec.strategy.rollingUpdate")
    if kind in _STRATEGIES:
        return []
    pointer = "(*apps.RollingUpdateDeployment)(nil)" if rolling is None else \
        "(*apps.RollingUpdateDeployment)(0xc000000000)"
    value = f'apps.DeploymentStrategy{{Type:"{kind or ""}", RollingUpdate:{pointer}}}'
    return [{"reason": "FieldValueNotSupported", "field": "spec.strategy",
             "message": f'Unsupported value: {value}: supported values: "Recreate", "RollingUpdate"'}]


_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def _cron_job_causes(spec: Obj) -> Causes:
    """``ValidateCronJobSpec``'s own fields: a known concurrency policy, a starting deadline
    and history limits not negative."""
    policy = spec.get("concurrencyPolicy")
    causes = [] if policy in _CONCURRENCY_POLICIES else [
        required("spec.concurrencyPolicy") if not policy
        else not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY_POLICIES)]
    return causes + _counts(spec, ("startingDeadlineSeconds", "successfulJobsHistoryLimit",
                                   "failedJobsHistoryLimit"), "spec")


def _spec_causes(plural: str, spec: Obj, old_spec: Obj | None) -> Causes:
    """What a workload's spec must say (``ValidateDeploymentSpec``, ``ValidateReplicaSetSpec``,
    ``ValidateStatefulSetSpec``, ``ValidateDaemonSetSpec``, ``ValidateJobSpec``,
    ``ValidateReplicationControllerSpec``, ``ValidateCronJobSpec``): counts not negative,
    a known Deployment strategy, a valid DaemonSet update strategy (``rollingupdate``), a
    StatefulSet's policies (``statefulsetvalidation``), and a valid pod template
    (``podvalidation``). ``old_spec`` is the stored one on an update."""
    if plural == "cronjobs":
        job = (spec.get("jobTemplate") or {}).get("spec")
        if not isinstance(job, dict):
            return _cron_job_causes(spec)
        old_job = ((old_spec or {}).get("jobTemplate") or {}).get("spec")
        return _cron_job_causes(spec) + _counts(job, _JOB_COUNTS, "spec.jobTemplate.spec") + \
            template_causes("jobs", job, "spec.jobTemplate.spec", old_job if isinstance(old_job, dict) else None) + \
            job_policy_causes(job, "spec.jobTemplate.spec")
    if plural == "statefulsets":
        return stateful_set_spec_causes(spec, old_spec) + template_causes(plural, spec, "spec", old_spec)
    causes = _counts(spec, _JOB_COUNTS if plural == "jobs" else ("replicas",), "spec")
    causes += template_causes(plural, spec, "spec", old_spec)
    if plural == "jobs":
        causes += job_policy_causes(spec, "spec")
    if plural == "deployments":
        causes += _deployment_strategy(spec.get("strategy"))
        causes += _counts(spec, ("minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"), "spec")
        deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
        if isinstance(deadline, int) and isinstance(ready, int) and deadline <= ready:
            causes.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    if plural in ("replicasets", "replicationcontrollers"):
        causes += _counts(spec, ("minReadySeconds",), "spec")
    if plural == "daemonsets":
        causes += _counts(spec, ("minReadySeconds",), "spec")
        causes += daemon_set_strategy_causes(spec.get("updateStrategy"), "spec.updateStrategy")
        causes += _counts(spec, ("revisionHistoryLimit",), "spec")
    return causes


def workload_spec_causes(plural: str, obj: Obj, old: Obj | None) -> Causes:
    """A (defaulted) workload's spec must be valid: counts, strategy, pod template. A write
    that keeps the stored spec (a status write) is not checked again."""
    spec = _spec(obj)
    if old is None:
        return _spec_causes(plural, spec, None)
    old_spec = _spec(old)
    return [] if spec is old_spec else _spec_causes(plural, spec, old_spec)


def workload_causes(plural: str, obj: Obj, old: Obj | None) -> Causes:
    """A workload's selector must select its template's labels; an update may not change
    the selector, nor a StatefulSet's other fixed fields, nor a started Job's template."""
    word = _SELECTED.get(plural)
    if word is None:
        return []
    spec, causes = _spec(obj), []
    selector = spec.get("selector")
    if isinstance(selector, dict):
        causes += selector_causes(selector, "spec.selector")
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.selector",
                           "message": f"Invalid value: {_show(selector)}: empty selector is invalid for {word}"})
        elif not selector_matches(selector, labels):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.template.metadata.labels",
                           "message": f"Invalid value: {_go_map(labels)}: `selector` does not match template "
                                      "`labels`"})
    if old is None:
        return causes
    old_spec = _spec(old)
    if spec is old_spec:  # a status or scale write: the spec is the stored one
        return causes
    if spec.get("selector") != old_spec.get("selector"):
        causes.append(_immutable("spec.selector", spec.get("selector")))
    if plural == "statefulsets":
        fixed = {k: v for k, v in spec.items() if k not in _STATEFUL_SET_MUTABLE}
        was = {k: v for k, v in old_spec.items() if k not in _STATEFUL_SET_MUTABLE}
        if fixed != was and "volumeClaimTemplates" in was:
            # A StatefulSet stored before its claim templates were defaulted (volumeMode,
            # phase) is compared as the defaults would have left it: an upgrade must not
            # make its every update "forbidden", as upstream defaults what it reads.
            was["volumeClaimTemplates"] = copy.deepcopy(was["volumeClaimTemplates"])
            default_claim_templates(was["volumeClaimTemplates"])
        # (compared as Go values: a claim template's storage written 1e9 and stored so is 1G)
        if fixed != was and not same_once_stored(fixed, was, shape_at(shape_of("apps", "v1", "StatefulSet"), "spec")):
            causes.append({"reason": "FieldValueForbidden", "field": "spec",
                           "message": "Forbidden: updates to statefulset spec for fields other than 'replicas', "
                                      "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                                      "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"})
    if plural == "jobs":
        causes += _job_update_causes(spec, old_spec, old)
    return causes


def _job_update_causes(spec: Obj, old_spec: Obj, old: Obj) -> Causes:
    """A Job's template is fixed, but for the scheduling directives (labels, annotations, node
    selector and affinity, tolerations, gates) and the containers' resource requests and
    limits of a suspended Job none of whose pods is active, started before or not, as 1.37
    with MutableSchedulingDirectivesForSuspendedJobs and MutablePodResourcesForSuspendedJobs
    on (KEP-5440, beta in 1.36; 1.34 took the directives only before a first start);
    ``completions`` is fixed unless an Indexed Job changes it with ``parallelism``; so are
    its completion mode, failure and success policies, per-index backoff limit and manager."""
    causes = []
    # (compared as Go values: an update's podFailurePolicy rules: [] are the stored null, a
    # quantity 129e6 the 129M a number written for it is stored as)
    spec_shape = shape_at(shape_of("batch", "v1", "Job"), "spec")
    template, was = spec.get("template"), old_spec.get("template")
    if template != was and not same_once_stored(template, was, shape_at(spec_shape, "template")):
        idle = bool(old_spec.get("suspend")) and not (old.get("status") or {}).get("active")
        if not (idle and _same_but_scheduling(template, was, shape_at(spec_shape, "template"))):
            causes.append(_immutable("spec.template", template))
    for field in _JOB_FIXED:
        if spec.get(field) != old_spec.get(field) \
                and not same_once_stored(spec.get(field), old_spec.get(field), shape_at(spec_shape, field)):
            causes.append(_immutable(f"spec.{field}", spec.get(field)))
    completions = spec.get("completions")
    if completions != old_spec.get("completions"):
        elastic = spec.get("completionMode") == "Indexed" and completions == spec.get("parallelism")
        if not elastic:
            causes.append(_immutable("spec.completions", completions))
    return causes


# ValidateJobSpecUpdate's immutable fields besides the selector, template and completions
_JOB_FIXED = ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy")
_SCHEDULING = ("nodeSelector", "tolerations", "schedulingGates")


def _same_but_scheduling(template: Any, was: Any, shape: Shape | None) -> bool:
    """Whether two pod templates differ at most in what a suspended Job may change: its
    scheduling directives (labels, annotations, node selector, tolerations, scheduling gates
    and, of its affinity, only the node affinity: a pod (anti-)affinity stays, as upstream's
    ``validatePodTemplateUpdate``) and its containers' resource requests and limits. The rest
    is compared as Go values (``shape``: a PodTemplateSpec's), as upstream's
    ``ValidateImmutableField`` does with ``Semantic.DeepEqual``: a quantity by its value."""
    if not isinstance(template, dict) or not isinstance(was, dict):
        return False
    a, b = copy.deepcopy(template), copy.deepcopy(was)
    for t in (a, b):
        t.pop("metadata", None)  # labels and annotations
        spec = t.get("spec")
        pod: Obj = spec if isinstance(spec, dict) else {}
        for k in _SCHEDULING:
            pod.pop(k, None)
        affinity = pod.get("affinity")
        if isinstance(affinity, dict):
            affinity.pop("nodeAffinity", None)
        if not affinity:  # (an affinity of a node affinity alone may come or go)
            pod.pop("affinity", None)
        for key in ("containers", "initContainers"):
            for c in pod.get(key) or ():
                resources = c.get("resources") if isinstance(c, dict) else None
                if isinstance(resources, dict):
                    resources.pop("requests", None)
                    resources.pop("limits", None)
    return a == b or same_once_stored(a, b, shape)


# -- pods ------------------------------------------------------------------------------
_POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
    "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def _plain(value: Any) -> Any:
    """``value`` without nulls, empty lists and empty maps: what Go's semantic equality
    takes for absent (an update's body need not repeat the zero values the store holds)."""
    if isinstance(value, dict):
        out = {k: _plain(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def pod_update_causes(new_spec: Obj, old_spec: Obj) -> Causes:
    """What an update of a pod (not through a subresource) may change, as ValidatePodUpdate:
    container images, ``activeDeadlineSeconds``, added tolerations, removed scheduling
    gates (and, while gated, the node selector and affinity); nothing else. ``new_spec``
    is defaulted as the stored one was."""
    if new_spec is old_spec or new_spec == old_spec:
        return []
    causes: Causes = []
    for field in ("containers", "initContainers"):
        if len(new_spec.get(field) or ()) != len(old_spec.get(field) or ()):
            return [{"reason": "FieldValueForbidden", "field": f"spec.{field}",
                     "message": "Forbidden: pod updates may not add or remove containers"}]
    old_tolerations = [{k: v for k, v in t.items() if k != "tolerationSeconds"}
                       for t in old_spec.get("tolerations") or () if isinstance(t, dict)]
    new_tolerations = [{k: v for k, v in t.items() if k != "tolerationSeconds"}
                       for t in new_spec.get("tolerations") or () if isinstance(t, dict)]
    if any(t not in new_tolerations for t in old_tolerations):
        causes.append({"reason": "FieldValueForbidden", "field": "spec.tolerations",
                       "message": "Forbidden: existing toleration can not be modified except its tolerationSeconds"})
    old_gates = {g.get("name") for g in old_spec.get("schedulingGates") or () if isinstance(g, dict)}
    for i, g in enumerate(new_spec.get("schedulingGates") or ()):
        if isinstance(g, dict) and g.get("name") not in old_gates:
            causes.append({"reason": "FieldValueForbidden", "field": f"spec.schedulingGates[{i}].name",
                           "message": "Forbidden: only deletion is allowed, but found new scheduling gate "
                                      f"'{g.get('name')}'"})
    munged = copy.deepcopy(new_spec)
    for field in ("containers", "initContainers"):
        for container, was in zip(munged.get(field) or (), old_spec.get(field) or (), strict=False):
            if isinstance(container, dict) and isinstance(was, dict):
                container["image"] = was.get("image")
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations",
                  *(("nodeSelector", "affinity") if old_spec.get("schedulingGates") else ())):
        if field in old_spec:
            munged[field] = old_spec[field]
        else:
            munged.pop(field, None)
    grace, old_grace = munged.get("terminationGracePeriodSeconds"), old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    plain_new, plain_old = _plain(munged), _plain(old_spec)
    if plain_new != plain_old:
        # (as Semantic.DeepEqual: a quantity by its value, so 129e6 stored and the 129M a number becomes are one)
        shape = shape_at(shape_of("", "v1", "Pod"), "spec")
        changed = sorted(k for k in set(plain_new) | set(plain_old) if plain_new.get(k) != plain_old.get(k)
                         and not same_once_stored(plain_new.get(k), plain_old.get(k), shape_at(shape, k)))
        if changed:
            causes.append({"reason": "FieldValueForbidden", "field": "spec", "message":
                           f"{_POD_UPDATE_FORBIDDEN}\n  changed: " + ", ".join(f"spec.{k}" for k in changed)})
    return causes


# -- services --------------------------------------------------------------------------
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_AFFINITIES = ("ClientIP", "None")
_PORT_RANGE = "must be between 1 and 65535, inclusive"


def service_causes(svc: Obj) -> Causes:
    """What a (defaulted) Service must say, as ``ValidateService`` on create and update:
    ports unless headless or an ExternalName, each with a name when there are several
    (unique DNS labels), a port number, a protocol and a target port; a known type, an
    ExternalName's name, a known session affinity."""
    spec = _spec(svc)
    causes: Causes = []
    kind = spec.get("type")
    ips = spec.get("clusterIPs")
    headless = kind == "ClusterIP" and isinstance(ips, list) and len(ips) == 1 and ips[0] == "None"
    ports = spec.get("ports")
    if not isinstance(ports, list):
        ports = []
    if not ports and not headless and kind != "ExternalName":
        causes.append(required("spec.ports"))
    if kind == "ExternalName":
        name = spec.get("externalName")
        cname = name[:-1] if isinstance(name, str) and name.endswith(".") else name
        if not cname:
            causes.append(required("spec.externalName"))
        else:  # a CNAME: a DNS subdomain, its final dot allowed
            causes += [invalid("spec.externalName", cname, p) for p in subdomain_problems(str(cname))]
    names: set[str] = set()
    several = len(ports) > 1
    for i, p in enumerate(ports):
        if isinstance(p, dict):
            causes += _service_port(p, f"spec.ports[{i}]", several, names)
    affinity = spec.get("sessionAffinity")
    if affinity not in _AFFINITIES:
        causes.append(required("spec.sessionAffinity") if not affinity
                      else not_supported("spec.sessionAffinity", affinity, _AFFINITIES))
    elif affinity == "ClientIP":
        causes += _affinity_timeout(spec.get("sessionAffinityConfig"))
    if kind not in _SERVICE_TYPES:
        causes.append(required("spec.type") if not kind else not_supported("spec.type", kind, _SERVICE_TYPES))
    causes += _traffic_and_family_causes(spec, kind)
    health_check = spec.get("healthCheckNodePort")
    if health_check and not _needs_health_check(spec):
        causes.append(invalid("spec.healthCheckNodePort", health_check, _HEALTH_CHECK_ONLY))
    return causes


_MAX_AFFINITY_SECONDS = 86400  # upstream's MaxClientIPServiceAffinitySeconds
_FAMILIES = ("IPv4", "IPv6")
_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
_TRAFFIC_POLICIES = ("Cluster", "Local")


def _affinity_timeout(config: Any) -> Causes:
    """``validateClientIPAffinityConfig`` (the defaults fill in a missing timeout)."""
    client = config.get("clientIP") if isinstance(config, dict) else None
    timeout = client.get("timeoutSeconds") if isinstance(client, dict) else None
    if isinstance(timeout, int) and not 0 < timeout <= _MAX_AFFINITY_SECONDS:
        return [invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                        f"must be greater than 0 and less than {_MAX_AFFINITY_SECONDS}")]
    return []


def _traffic_and_family_causes(spec: Obj, kind: Any) -> Causes:
    """The enums of ``ValidateService`` the defaults do not make up: IP families and their
    policy, the internal traffic policy, an external one only where traffic comes from
    outside (validateServiceExternalTrafficPolicy)."""
    causes: Causes = []
    families = spec.get("ipFamilies")
    for i, family in enumerate(families if isinstance(families, list) else ()):
        if family not in _FAMILIES:
            causes.append(not_supported(f"spec.ipFamilies[{i}]", family, _FAMILIES))
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in _FAMILY_POLICIES:
        causes.append(not_supported("spec.ipFamilyPolicy", policy, _FAMILY_POLICIES))
    internal = spec.get("internalTrafficPolicy")
    if internal is not None and internal not in _TRAFFIC_POLICIES:
        causes.append(not_supported("spec.internalTrafficPolicy", internal, _TRAFFIC_POLICIES))
    external = spec.get("externalTrafficPolicy")
    if external:
        if kind not in ("NodePort", "LoadBalancer") and not spec.get("externalIPs"):
            causes.append(invalid("spec.externalTrafficPolicy", external,
                                  "may only be set for externally-accessible services"))
        elif external not in _TRAFFIC_POLICIES:
            causes.append(not_supported("spec.externalTrafficPolicy", external, _TRAFFIC_POLICIES))
    return causes


def _service_port(p: Obj, at: str, several: bool, names: set[str]) -> Causes:
    causes: Causes = []
    name = p.get("name")
    if not name:
        if several:
            causes.append(required(f"{at}.name"))
    elif isinstance(name, str):
        causes += [invalid(f"{at}.name", name, m) for m in dns_label_problems(name)]
        if name in names:
            causes.append(duplicate(f"{at}.name", name))
        names.add(name)
    port = p.get("port")
    if isinstance(port, int) and not isinstance(port, bool) and not 0 < port < 65536:
        causes.append(invalid(f"{at}.port", port, _PORT_RANGE))
    elif port is None:
        causes.append(invalid(f"{at}.port", 0, _PORT_RANGE))
    protocol = p.get("protocol")
    if protocol not in _PROTOCOLS:
        causes.append(required(f"{at}.protocol") if not protocol
                      else not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
    target = p.get("targetPort")
    if isinstance(target, int) and not isinstance(target, bool):  # (0 and "" are defaulted to the port)
        if target and not 0 < target < 65536:
            causes.append(invalid(f"{at}.targetPort", target, _PORT_RANGE))
    elif isinstance(target, str) and target:
        causes += [invalid(f"{at}.targetPort", target, m) for m in port_name_problems(target)]
    app_protocol = p.get("appProtocol")
    if isinstance(app_protocol, str) and app_protocol:  # validateAppProtocol: a qualified name
        causes += [invalid(f"{at}.appProtocol", app_protocol, m) for m in label_key_problems(app_protocol)]
    return causes


def service_update_causes(obj: Obj, old: Obj) -> Causes:
    """A Service keeps the cluster IPs it was given: an update that leaves them out keeps
    them (upstream's ``patchAllocatedValues``), one that changes them is refused (unless
    the Service is or becomes an ExternalName, which has none)."""
    spec, old_spec = _spec(obj), _spec(old)
    if spec is old_spec:
        return []
    _keep_node_ports(spec, old_spec)
    moved = _keep_health_check_port(spec, old_spec)
    if moved:
        return moved
    if spec.get("type") == "ExternalName" and old_spec.get("type") != "ExternalName":
        for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy",  # dropTypeDependentFields
                      "internalTrafficPolicy"):
            if spec.get(field) == old_spec.get(field):
                spec.pop(field, None)
    if "ExternalName" in (spec.get("type"), old_spec.get("type")):
        return []
    if spec.get("ipFamilyPolicy") in (None, "") and old_spec.get("ipFamilyPolicy"):
        spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]  # initIPFamilyFields: an update keeps its policy
    old_ips = old_spec.get("clusterIPs") or ([old_spec["clusterIP"]] if old_spec.get("clusterIP") else [])
    if not old_ips:
        return []
    if spec.get("clusterIP") != old_spec.get("clusterIP") and spec.get("clusterIPs") == old_spec.get("clusterIPs"):
        # only the singular field changed (an older client): it is what was meant (NormalizeClusterIPs)
        spec["clusterIPs"] = [spec["clusterIP"]] if spec.get("clusterIP") else []
    if not spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIP"], spec["clusterIPs"] = old_ips[0], list(old_ips)
        for field in ("ipFamilies", "ipFamilyPolicy"):
            if field in old_spec and field not in spec:
                spec[field] = old_spec[field]
        return []
    ips = spec.get("clusterIPs") or [spec.get("clusterIP")]
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    if ips[0] != old_ips[0]:
        return [{"reason": "FieldValueInvalid", "field": "spec.clusterIPs[0]",
                 "message": f"Invalid value: {_show(ips)}: may not change once set"}]
    return []


_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
_HEALTH_CHECK_ONLY = "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"


def _needs_health_check(spec: Obj) -> bool:
    """Upstream's NeedsHealthCheck: a LoadBalancer keeping its clients' source (``Local``)."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _keep_health_check_port(spec: Obj, old_spec: Obj) -> Causes:
    """A Service that needs a health check node port before and after keeps its own: an update
    leaving it out keeps it (``patchAllocatedValues``), one changing it is refused
    (``validateServiceExternalTrafficFieldsUpdate``); one that no longer needs it loses it unless
    the update set another (``dropTypeDependentFields``)."""
    was = old_spec.get("healthCheckNodePort")
    if not was or not _needs_health_check(old_spec):
        return []
    if _needs_health_check(spec):
        if not spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = was
        elif spec["healthCheckNodePort"] != was:
            return [forbidden("spec.healthCheckNodePort", "field is immutable")]
    elif spec.get("healthCheckNodePort") == was:
        spec.pop("healthCheckNodePort", None)
    return []


def _keep_node_ports(spec: Obj, old_spec: Obj) -> None:
    """The node ports an update leaves out are kept, port by port name, unless another port
    of the update took them (``patchAllocatedValues``); a Service that no longer needs them
    loses those it had (``dropTypeDependentFields``)."""
    ports, old_ports = spec.get("ports"), old_spec.get("ports")
    if not isinstance(ports, list) or not isinstance(old_ports, list):
        return
    old_by_name = {p.get("name"): p.get("nodePort") for p in old_ports if isinstance(p, dict)}
    if spec.get("type") in _NODE_PORT_TYPES and old_spec.get("type") in _NODE_PORT_TYPES:
        used = {p.get("nodePort") for p in ports if isinstance(p, dict) and p.get("nodePort")}
        for p in ports:
            if isinstance(p, dict) and not p.get("nodePort"):
                was = old_by_name.get(p.get("name"))
                if was and was not in used:
                    p["nodePort"] = was
    elif spec.get("type") not in _NODE_PORT_TYPES and old_spec.get("type") in _NODE_PORT_TYPES:
        for p in ports:
            if isinstance(p, dict) and p.get("nodePort") and p.get("nodePort") == old_by_name.get(p.get("name")):
                del p["nodePort"]
        if spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
            spec.pop("externalTrafficPolicy", None)
