"""What a pod spec may not say, as upstream's hand-written ``ValidatePodSpec`` says it
(``pkg/apis/core/validation``), wherever a pod spec is written: a Pod's own (its create,
and an update's new spec, as ``ValidatePodUpdate`` validates it too), and the template of
a Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob or ReplicationController,
whose field paths carry the ``spec.template.spec.`` prefix (a StatefulSet's only for its
restart policy and deadline, as upstream: its mounts may name its ``volumeClaimTemplates``).
Specs are checked after their defaults (``podspec``), as upstream validates a decoded,
defaulted body::

    pod_spec_causes(spec, "spec", pod=True)            # [{'field': 'spec.containers[0].image', ...}]
    template_causes("jobs", job["spec"], "spec")       # ... 'spec.template.spec.restartPolicy' ...

The subset checked: containers (present, names unique DNS labels across containers and
init containers, an image, ports, protocols, env var names, volume mounts naming a volume,
pull and termination-message policies, requests within limits, probes and lifecycle hooks,
security contexts, a container's own restart policy and rules, as 1.37's gates
ContainerRestartRules and RestartAllContainersOnContainerExits allow them on containers, init
containers and sidecars alike), volume names, the restart and DNS policies, the node selector and node
name, the pod security context (Windows options and HostProcess rules too), affinity, topology
spread constraints, tolerations, the pod's OS
(``spec.os``: the fields a Windows pod, or a Linux one, may not set), and the restart policy each
workload kind allows its template. Messages
are upstream's words (``field.Required``, ``NotSupported``, ``Duplicate``, ``NotFound``).
Cheap on purpose: every pod create passes here, so plain loops over the dicts, precompiled
patterns and field paths built only for a cause; a field left out costs a dict lookup.
Label keys are checked as 1.37's ``content.IsLabelKey`` words them (``bytes``, not ``characters``).
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from ..quantity import QuantityError, parse_quantity
from . import podannotations
from .causes import duplicate, forbidden, invalid, not_found, not_supported, required, too_many
from .dnsnames import DNS1123_LABEL, DNS1123_SUBDOMAIN
from .ipfields import pod_spec_ip_causes
from .podresources import hugepage_divisible, pod_resources_causes

__all__ = ["dns_label_problems", "ephemeral_container_causes", "host_process_causes", "label_key_problems",
           "label_selector_causes", "label_value_problems", "labels_causes", "not_supported", "os_causes",
           "pod_spec_causes", "port_name_problems", "required", "subdomain_problems", "template_causes",
           "tolerations_causes"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

_LABEL_HINT = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]+\Z")
_PORT_NAME_LETTER = re.compile(r"[a-z]")
# printable ASCII but '=': the relaxed rule (RelaxedEnvironmentVariableValidation, on by default since 1.32)
_ENV_NAME = re.compile(r"[ -<>-~]+\Z")
_ENV_NAME_HINT = "a valid environment variable name must consist only of printable ASCII characters other than '='"
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_MAX_INT32 = 2**31 - 1

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
# a container's own (sorted, as upstream lists its sets), its rules' actions and operators
_CONTAINER_RESTART_POLICIES = ("Always", "Never", "OnFailure")
_RESTART_RULE_ACTIONS = ("Restart", "RestartAllContainers")
_EXIT_CODE_OPERATORS = ("In", "NotIn")
_MAX_RESTART_RULES, _MAX_RULE_EXIT_CODES = 20, 255
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")

# the template restart policies a workload kind allows (ValidatePodTemplateSpecForReplicaSet,
# ValidateStatefulSetSpec, ValidateDaemonSetSpec, ValidatePodTemplateSpecForRC, validateJobSpec)
_TEMPLATE_RESTART = {"deployments": ("Always",), "replicasets": ("Always",), "statefulsets": ("Always",),
                     "daemonsets": ("Always",), "replicationcontrollers": ("Always",),
                     "jobs": ("OnFailure", "Never")}
# the kinds whose template may not say activeDeadlineSeconds, as their validators word it
_NO_DEADLINE = {"deployments": "ReplicaSet", "replicasets": "ReplicaSet", "statefulsets": "StatefulSet",
                "daemonsets": "DaemonSet", "replicationcontrollers": "ReplicationController"}


def dns_label_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (``IsDNS1123Label``); empty when it is."""
    if len(value) <= 63 and DNS1123_LABEL.match(value):
        return []
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not DNS1123_LABEL.match(value):
        problems.append("must not contain dots" if DNS1123_SUBDOMAIN.match(value) else _LABEL_HINT)
    return problems


def port_name_problems(name: str) -> list[str]:
    """Why ``name`` is not an IANA service name (``IsValidPortName``); empty when it is."""
    if len(name) <= 15 and _PORT_NAME_CHARS.match(name) and "--" not in name and name[0] != "-" \
            and name[-1] != "-" and _PORT_NAME_LETTER.search(name):
        return []
    problems = []
    if len(name) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.match(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# -- pod specs --------------------------------------------------------------------------------
def pod_spec_causes(spec: Obj, path: str, pod: bool = False, old: Obj | None = None) -> Causes:
    """The causes of a 422 in the (defaulted) pod spec at ``path``; ``pod``: the spec is a
    Pod's own, not a template's (its images may not have surrounding whitespace); ``old``:
    the stored spec of an update, whose IPs may stay (``ipfields``)."""
    causes: Causes = []
    volumes = _volume_names(spec.get("volumes"), path, causes)
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        causes.append(required(f"{path}.containers"))
        containers = []
    init = spec.get("initContainers")
    grace = spec.get("terminationGracePeriodSeconds")
    pod_level = isinstance(spec.get("resources"), dict)
    # AllowIndivisibleHugePagesValues: an update may keep what the stored spec already had
    indivisible = old is not None and _indivisible_hugepages(old)
    sc = spec.get("securityContext")
    host_users = spec.get("hostUsers") is not False
    names: set[Any] = set()  # unique across containers and init containers
    windows = isinstance(sc, dict) and sc.get("windowsOptions") is not None  # any windowsOptions
    for key, listed in (("containers", containers), ("initContainers", init if isinstance(init, list) else ())):
        for i, c in enumerate(listed):
            if not isinstance(c, dict):
                continue
            at = f"{path}.{key}[{i}]"
            windows = _container(c, at, volumes, pod, host_users, causes, pod_level, indivisible) or windows
            policy, rules = c.get("restartPolicy"), c.get("restartPolicyRules")
            restarts = policy is not None or bool(rules)  # said anything of its own restarts
            if restarts and key == "initContainers":  # validateInitContainers: before the name
                _container_restart(policy, rules, at, causes)
            name = c.get("name")
            if name in names:
                causes.append(duplicate(f"{at}.name", name))
            elif name or key == "containers":
                names.add(name)
            if key == "containers":  # validateContainers: hooks and probes, then the restarts
                _hooks_and_probes(c, at, grace, causes)
                if restarts:
                    _container_restart(policy, rules, at, causes)
            elif policy == "Always":  # a sidecar: hooks and probes as a container's
                _hooks_and_probes(c, at, grace, causes)
            else:
                for field in _HOOKS_AND_PROBES:  # validateInitContainers: not for a plain init container
                    if c.get(field) is not None:
                        causes.append(forbidden(f"{at}.{field}", _INIT_FORBIDDEN))
    if "resources" in spec:  # pod-level resources (PodLevelResources)
        causes += pod_resources_causes(spec, path)
    restart = spec.get("restartPolicy")
    _one_of(f"{path}.restartPolicy", restart, _RESTART_POLICIES, causes)
    dns = spec.get("dnsPolicy")
    _one_of(f"{path}.dnsPolicy", dns, _DNS_POLICIES, causes)
    # the rest of ValidatePodSpec, in its order; each only when the field says something
    node_selector = spec.get("nodeSelector")
    if node_selector and isinstance(node_selector, dict):
        _labels(node_selector, f"{path}.nodeSelector", causes)
    if (sc and isinstance(sc, dict)) or spec.get("shareProcessNamespace"):
        _pod_security_context(sc if isinstance(sc, dict) else {}, spec, f"{path}.securityContext", causes)
    affinity = spec.get("affinity")
    if affinity and isinstance(affinity, dict):
        _affinity(affinity, f"{path}.affinity", causes)
    spread = spec.get("topologySpreadConstraints")
    if spread and isinstance(spread, list):
        _spread_constraints(spread, f"{path}.topologySpreadConstraints", causes)
    if windows:  # validateWindowsHostProcessPod: only a spec with windowsOptions can say hostProcess
        _host_process(spec, path, causes)
    if not host_users:  # validateHostUsers
        _host_namespaces(spec, path, causes)
    account = spec.get("serviceAccountName")  # ValidateServiceAccountName, before the node's
    if account and isinstance(account, str) and not _is_subdomain(account):
        causes.extend(invalid(f"{path}.serviceAccountName", account, m) for m in _subdomain_problems(account))
    node_name = spec.get("nodeName")
    if node_name and isinstance(node_name, str) and not _is_subdomain(node_name):
        causes.extend(invalid(f"{path}.nodeName", node_name, m) for m in _subdomain_problems(node_name))
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and not 1 <= deadline <= _MAX_INT32:
        causes.append(invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {_MAX_INT32}, "
                              "inclusive"))
    for field in ("hostname", "subdomain"):
        label = spec.get(field)
        if label and isinstance(label, str):
            causes.extend(invalid(f"{path}.{field}", label, m) for m in dns_label_problems(label))
    tolerations = spec.get("tolerations")
    if tolerations and isinstance(tolerations, list):
        _tolerations(tolerations, f"{path}.tolerations", causes)
    if spec.get("dnsConfig") or spec.get("hostAliases"):
        causes += pod_spec_ip_causes(spec, path, old)
    group = spec.get("schedulingGroup")
    if group is not None:
        _scheduling_group(group, f"{path}.schedulingGroup", causes)
    pod_os = spec.get("os")  # ValidatePodSpec's last check; a spec without one pays this lookup alone
    if pod_os is not None:
        _os(pod_os, spec, path, causes)
    if sc and type(sc) is dict and sc.get("supplementalGroups") == []:
        del sc["supplementalGroups"]  # (validation.KEPT_EMPTY: seen as sent, stored as protobuf: nil)
    return causes


def drop_kept_empty(spec: Any) -> None:
    """A pod spec that ``pod_spec_causes`` does not check (a StatefulSet's template's) with its
    empty lists that decoding kept for validation (``validation.KEPT_EMPTY``) left out, as
    protobuf stores them."""
    sc = spec.get("securityContext") if type(spec) is dict else None
    if sc and type(sc) is dict and sc.get("supplementalGroups") == []:
        del sc["supplementalGroups"]


_USER_NAMESPACE = "when `pod.Spec.HostUsers` is false"
# validateHostUsers' host namespaces, with its paths (upstream names two by their Go fields)
_HOST_NAMESPACES = (("hostNetwork", "hostNetwork"), ("hostPID", "HostPID"), ("hostIPC", "HostIPC"))


def _host_namespaces(spec: Obj, path: str, causes: Causes) -> None:
    """``validateHostUsers``: a pod in a user namespace (``hostUsers: false``) shares none of the
    host's network, PID and IPC namespaces. (UserNamespacesHostNetworkSupport, alpha and off by
    default since 1.35, would allow the network; the volume types a user namespace allowed,
    UserNamespacesStatelessPodsSupport's limit, are no longer checked upstream.)"""
    for field, at in _HOST_NAMESPACES:
        if spec.get(field) is True:
            causes.append(forbidden(f"{path}.{at}", _USER_NAMESPACE))


def _scheduling_group(group: Any, at: str, causes: Causes) -> None:
    """``PodSchedulingGroup`` (GenericWorkload): a union of one member, ``podGroupName``, a long
    name (the PodGroup need not exist yet; the field is fixed with the rest of the spec)."""
    name = group.get("podGroupName") if isinstance(group, dict) else None
    if name is None:
        causes.append(invalid(at, "", "must specify one of: `podGroupName`"))
    elif isinstance(name, str):
        problems = ["must be no more than 253 bytes"] if len(name) > 253 else []
        if not DNS1123_SUBDOMAIN.match(name):
            problems.append(_SUBDOMAIN_HINT)
        causes.extend(invalid(f"{at}.podGroupName", name, p) for p in problems)


def _volume_names(volumes: Any, path: str, causes: Causes) -> set[str]:
    """The names of the spec's valid volumes (``ValidateVolumes``: a volume with a problem is
    not one a mount may name)."""
    names: set[str] = set()
    if not volumes or not isinstance(volumes, list):
        return names
    for i, v in enumerate(volumes):
        if not isinstance(v, dict):
            continue
        name = v.get("name")
        if isinstance(name, str) and name and name not in names and len(name) <= 63 and DNS1123_LABEL.match(name):
            names.add(name)
            continue
        at = f"{path}.volumes[{i}].name"
        if not name or not isinstance(name, str):
            causes.append(required(at))
            continue
        causes.extend(invalid(at, name, p) for p in dns_label_problems(name))
        if name in names:
            causes.append(duplicate(at, name))
    return names


def _container(c: Obj, at: str, volumes: set[str], pod: bool, host_users: bool, causes: Causes,
               pod_level: bool = False, indivisible: bool = False) -> bool:
    """``validateContainerCommon``: what every container of a spec must say (``pod_level``:
    the spec has pod-level resources; ``indivisible``: hugepages need not be whole pages).
    Whether its security context has ``windowsOptions``."""
    name = c.get("name")
    if not name:
        causes.append(required(f"{at}.name"))
    elif not isinstance(name, str) or len(name) > 63 or not DNS1123_LABEL.match(name):
        causes.extend(invalid(f"{at}.name", name, p) for p in dns_label_problems(str(name)))
    image = c.get("image")
    if not image:
        causes.append(required(f"{at}.image"))
    elif pod and isinstance(image, str) and image != image.strip():
        causes.append(invalid(f"{at}.image", image, "must not have leading or trailing whitespace"))
    policy = c.get("terminationMessagePolicy")
    _one_of(f"{at}.terminationMessagePolicy", policy, _MESSAGE_POLICIES, causes)
    ports = c.get("ports")
    if ports:
        _container_ports(ports, at, causes)
    env = c.get("env")
    if env:
        _env(env, at, causes)
    mounts = c.get("volumeMounts")
    if mounts:
        _mounts(mounts, at, volumes, causes)
    pull = c.get("imagePullPolicy")
    _one_of(f"{at}.imagePullPolicy", pull, _PULL_POLICIES, causes)
    resources = c.get("resources")
    if resources:
        _resources(resources, at, causes, pod_level, indivisible)
    sc = c.get("securityContext")
    if sc and isinstance(sc, dict):
        _container_security_context(sc, f"{at}.securityContext", host_users, causes)
        return sc.get("windowsOptions") is not None
    return False


def _container_restart(policy: Any, rules: Any, at: str, causes: Causes) -> None:
    """``validateContainerRestartPolicy`` (ContainerRestartRules and
    RestartAllContainersOnContainerExits, on since 1.35 and 1.36): a container's own
    restart policy, any of the three, and its rules, which need one. The same for a
    container, an init container and a sidecar (which 1.34 allowed only ``Always`` and no
    rules)."""
    if policy is None:
        causes.append(required(f"{at}.restartPolicy", "must specify restartPolicy when restart rules are used"))
    elif policy not in _CONTAINER_RESTART_POLICIES:
        causes.append(not_supported(f"{at}.restartPolicy", policy, _CONTAINER_RESTART_POLICIES))
    if not isinstance(rules, list):
        return
    if len(rules) > _MAX_RESTART_RULES:
        causes.append(too_many(f"{at}.restartPolicyRules", len(rules), _MAX_RESTART_RULES))
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        rule_at = f"{at}.restartPolicyRules[{i}]"
        action = rule.get("action")
        if action not in _RESTART_RULE_ACTIONS:  # absent is Go's "": unsupported, not required
            causes.append(not_supported(f"{rule_at}.action", action or "", _RESTART_RULE_ACTIONS))
        exit_codes = rule.get("exitCodes")
        if not isinstance(exit_codes, dict):
            causes.append(required(f"{rule_at}.exitCodes", "must be specified"))
            continue
        operator = exit_codes.get("operator")
        if operator not in _EXIT_CODE_OPERATORS:
            causes.append(not_supported(f"{rule_at}.exitCodes.operator", operator or "", _EXIT_CODE_OPERATORS))
        values = exit_codes.get("values")
        if isinstance(values, list) and len(values) > _MAX_RULE_EXIT_CODES:
            causes.append(too_many(f"{rule_at}.exitCodes.values", len(values), _MAX_RULE_EXIT_CODES))


def _one_of(field: str, value: Any, allowed: tuple[str, ...], causes: Causes) -> None:
    """An enum field: ``Required value`` when empty, ``Unsupported value`` when not ``allowed``."""
    if value not in allowed:
        causes.append(required(field) if not value else not_supported(field, value, allowed))


def _container_ports(ports: Any, at: str, causes: Causes) -> None:
    if not isinstance(ports, list):
        return
    names: set[str] = set()
    for i, p in enumerate(ports):
        if not isinstance(p, dict):
            continue
        name = p.get("name")
        if name and isinstance(name, str):
            problems = port_name_problems(name)
            if problems:
                causes.extend(invalid(f"{at}.ports[{i}].name", name, m) for m in problems)
            elif name in names:
                causes.append(duplicate(f"{at}.ports[{i}].name", name))
            else:
                names.add(name)
        port = p.get("containerPort")
        if not port:
            causes.append(required(f"{at}.ports[{i}].containerPort"))
        elif _is_int(port) and not 0 < port < 65536:
            causes.append(invalid(f"{at}.ports[{i}].containerPort", port, _PORT_RANGE))
        host = p.get("hostPort")
        if host and _is_int(host) and not 0 < host < 65536:
            causes.append(invalid(f"{at}.ports[{i}].hostPort", host, _PORT_RANGE))
        protocol = p.get("protocol")
        _one_of(f"{at}.ports[{i}].protocol", protocol, _PROTOCOLS, causes)


def _env(env: Any, at: str, causes: Causes) -> None:
    if not isinstance(env, list):
        return
    for i, e in enumerate(env):
        if not isinstance(e, dict):
            continue
        name = e.get("name")
        if not name:
            causes.append(required(f"{at}.env[{i}].name"))
        elif not isinstance(name, str) or not _ENV_NAME.match(name):
            causes.append(invalid(f"{at}.env[{i}].name", name, _ENV_NAME_HINT))


def _mounts(mounts: Any, at: str, volumes: set[str], causes: Causes) -> None:
    if not isinstance(mounts, list):
        return
    paths: set[Any] = set()
    for i, m in enumerate(mounts):
        if not isinstance(m, dict):
            continue
        name, mount_path = m.get("name"), m.get("mountPath")
        if not name:
            causes.append(required(f"{at}.volumeMounts[{i}].name"))
        if name not in volumes:
            causes.append(not_found(f"{at}.volumeMounts[{i}].name", name if name is not None else ""))
        if not mount_path:
            causes.append(required(f"{at}.volumeMounts[{i}].mountPath"))
        if mount_path in paths:
            causes.append(invalid(f"{at}.volumeMounts[{i}].mountPath", mount_path, "must be unique"))
        paths.add(mount_path)


def _overcommittable(resource: str) -> bool:
    """``IsOvercommitAllowed``: a native resource (no domain, or ``kubernetes.io/``) but hugepages."""
    native = "/" not in resource or resource.startswith("kubernetes.io/")
    return native and not resource.startswith("hugepages-")


# container resource names seen valid (cpu, memory, a cluster's few extended ones: every pod create)
_VALID_RESOURCE_NAMES: set[str] = set()
_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _resource_name(name: str, at: str, kind: str, causes: Causes) -> bool:
    """``validateContainerResourceName`` of a name in the ``kind`` (limits or requests) of
    the container at ``at``: a qualified name; a standard container resource (cpu, memory,
    ephemeral-storage, hugepages-<size>) unless prefixed, an extended one unless native.
    Whether it is an extended resource (its quantities whole)."""
    extended = "/" in name and "kubernetes.io/" not in name
    if name in _VALID_RESOURCE_NAMES:
        return extended
    field = f"{at}.resources.{kind}[{name}]"
    from .quota import is_standard_resource_name  # (quota's imports come back here)

    problems = label_key_problems(name)
    if problems:
        causes.extend(invalid(field, name, p) for p in problems)
        return False
    if "/" not in name:
        if not is_standard_resource_name(name):
            causes.append(invalid(field, name, "must be a standard resource type or fully qualified"))
            return False
        if name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            causes.append(invalid(field, name, "must be a standard resource for containers"))
            return False
    elif extended and (name.startswith("requests.") or label_key_problems("requests." + name)):
        causes.append(invalid(field, name, "doesn't follow extended resource name standard"))
        return False
    _VALID_RESOURCE_NAMES.add(name)
    return extended


def _resource_entry(name: Any, value: Any, at: str, kind: str, causes: Causes, indivisible: bool = False) -> None:
    """One entry of a container's limits or requests: its name, and its quantity as
    ``ValidateResourceQuantityValue`` takes it (not negative, whole for an extended resource)
    and ``validateResourceQuantityHugePageValue`` (a hugepage's a multiple of its page, unless
    ``indivisible``). A quantity that does not parse was the decoding's 400; one of no minus
    sign is not negative, and is not parsed for it (every pod create has a few)."""
    extended = _resource_name(name, at, kind, causes) if type(name) is str else False
    if type(name) is str and name.startswith("hugepages-") and not indivisible \
            and not hugepage_divisible(name, value):
        shown = _quantity(value)
        causes.append(invalid(f"{at}.resources.{kind}[{name}]", shown, f"{shown} is not positive integer multiple "
                              f"of {name}"))
    if type(value) is str and "-" not in value and not extended:
        return
    field = f"{at}.resources.{kind}[{name}]"
    try:
        amount = parse_quantity(value)
    except QuantityError:
        return
    if amount < 0:
        causes.append(invalid(field, _quantity(value), "must be greater than or equal to 0"))
    if extended and amount.denominator != 1:
        causes.append(invalid(field, _quantity(value), "must be an integer"))


def _resources(resources: Any, at: str, causes: Causes, pod_level: bool = False, indivisible: bool = False) -> None:
    """``validateResourceRequirements`` of a container: each name and quantity, a request
    within its limit (an extended resource's equal to it, and limited), hugepages beside cpu
    or memory (unless the pod's own resources say those: PodLevelResources' hugepages)."""
    if not isinstance(resources, dict):
        return
    requests, limits = resources.get("requests"), resources.get("limits")
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    if not requests and not limits:
        return
    plain = _VALID_RESOURCE_NAMES  # (a known name of no domain, a quantity of no minus sign: nothing to check;
    # a hugepage's name has a minus sign)
    for name, quantity in limits.items():
        if name not in plain or "-" in name or "/" in name or type(quantity) is not str or "-" in quantity:
            _resource_entry(name, quantity, at, "limits", causes, indivisible)
    for resource, quantity in requests.items():
        if resource not in plain or "-" in resource or "/" in resource or type(quantity) is not str \
                or "-" in quantity:
            _resource_entry(resource, quantity, at, "requests", causes, indivisible)
        limit = limits.get(resource)
        if limit is None:
            if resource not in _CONTAINER_RESOURCES and not _overcommittable(resource):
                causes.append(required(f"{at}.resources.limits", "Limit must be set for non overcommitable "
                                       "resources"))
            continue
        if limit == quantity:
            continue
        try:
            request_value, limit_value = parse_quantity(quantity), parse_quantity(limit)
        except QuantityError:
            continue  # (the decoding's 400)
        if request_value == limit_value:
            continue
        if not _overcommittable(resource):
            causes.append(invalid(f"{at}.resources.requests", _quantity(quantity),
                                  f"must be equal to {resource} limit of {_quantity(limit)}"))
        elif request_value > limit_value:
            causes.append(invalid(f"{at}.resources.requests", _quantity(quantity),
                                  f"must be less than or equal to {resource} limit of {_quantity(limit)}"))
    if not pod_level and "cpu" not in limits and "memory" not in limits and "cpu" not in requests \
            and "memory" not in requests and any(str(n).startswith("hugepages-") for n in (*limits, *requests)):
        causes.append(forbidden(f"{at}.resources", "HugePages require cpu or memory"))


def _indivisible_hugepages(spec: Obj) -> bool:
    """``usesIndivisibleHugePagesValues``: a container's (an init or ephemeral one's too) or the
    overhead's hugepages not whole pages."""
    for key in ("containers", "initContainers", "ephemeralContainers"):
        listed = spec.get(key)
        for c in listed if isinstance(listed, list) else ():
            resources = c.get("resources") if isinstance(c, dict) else None
            for kind in ("limits", "requests"):
                held = resources.get(kind) if isinstance(resources, dict) else None
                if isinstance(held, dict) and any(type(n) is str and n.startswith("hugepages-")
                                                  and not hugepage_divisible(n, v) for n, v in held.items()):
                    return True
    overhead = spec.get("overhead")
    return isinstance(overhead, dict) and any(type(n) is str and n.startswith("hugepages-")
                                              and not hugepage_divisible(n, v) for n, v in overhead.items())


def _quantity(value: Any) -> str:
    """A quantity as its ``String()`` prints it, near enough: as written."""
    return value if isinstance(value, str) else str(value)


# -- names and labels, as apimachinery words them ------------------------------------------------
_LABEL_KEY_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_KEY_HINT = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                   "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_SUBDOMAIN_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_VALUE_HINT = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                     "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                     "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_VALID_KEYS: set[str] = set()  # label keys seen valid (the default tolerations' keys, on every pod create)


def label_key_problems(key: str) -> list[str]:
    """Why ``key`` is not a label key, a qualified name (``content.IsLabelKey``); empty when it is."""
    parts = key.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return ["a valid label key " + _LABEL_KEY_HINT + " with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                problems.append("prefix part must be no more than 253 characters")  # Go's len: bytes
            if not DNS1123_SUBDOMAIN.match(prefix):
                problems.append("prefix part " + _SUBDOMAIN_HINT)
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _LABEL_KEY_NAME.match(name):
        problems.append("name part " + _LABEL_KEY_HINT)
    return problems


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a label value (``content.IsLabelValue``); empty when it is."""
    problems = ["must be no more than 63 characters"] if len(value.encode()) > 63 else []
    if value and not _LABEL_KEY_NAME.match(value):
        problems.append(_LABEL_VALUE_HINT)
    return problems


def _label_key(key: Any, field: str, causes: Causes) -> None:
    """``ValidateLabelName``: each problem of a label key is a cause."""
    if not isinstance(key, str):
        key = ""
    elif key in _VALID_KEYS:
        return
    problems = label_key_problems(key)
    if problems:
        causes.extend(invalid(field, key, p) for p in problems)
    elif len(_VALID_KEYS) < 4096:
        _VALID_KEYS.add(key)


def _label_values(values: Any, field: str, causes: Causes) -> None:
    for k, v in enumerate(values):
        if isinstance(v, str) and v:
            causes.extend(invalid(f"{field}[{k}]", v, p) for p in label_value_problems(v))


def _labels(labels: Obj, field: str, causes: Causes) -> None:
    """``ValidateLabels``: keys and values, each reported at the map's own path."""
    for key, value in labels.items():
        _label_key(key, field, causes)
        if isinstance(value, str) and value:
            causes.extend(invalid(field, value, p) for p in label_value_problems(value))


def _is_subdomain(value: str) -> bool:
    return len(value) <= 253 and DNS1123_SUBDOMAIN.match(value) is not None


def _subdomain_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (``IsDNS1123Subdomain``, as ``ValidateNodeName``)."""
    problems = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not DNS1123_SUBDOMAIN.match(value):
        problems.append(_SUBDOMAIN_HINT)
    return problems


subdomain_problems = _subdomain_problems


def _label_selector(selector: Obj, field: str, causes: Causes) -> None:
    """``ValidateLabelSelector`` (label values checked, as for a new pod)."""
    match_labels = selector.get("matchLabels")
    if match_labels and isinstance(match_labels, dict):
        _labels(match_labels, f"{field}.matchLabels", causes)
    expressions = selector.get("matchExpressions")
    if not expressions or not isinstance(expressions, list):
        return
    for i, e in enumerate(expressions):
        if not isinstance(e, dict):
            continue
        at, op, values = f"{field}.matchExpressions[{i}]", e.get("operator"), e.get("values") or ()
        if not _set_operator_values(op, values, at, causes):
            causes.append(invalid(f"{at}.operator", op or "", "not a valid selector operator"))
        _label_key(e.get("key") or "", f"{at}.key", causes)
        _label_values(values, f"{at}.values", causes)


# -- tolerations ---------------------------------------------------------------------------------
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # validateTaintEffect's order
_KEYLESS = 'operator must be Exists when `key` is empty, which means "match all values and all keys"'


def _tolerations(tolerations: list[Any], path: str, causes: Causes) -> None:
    """``ValidateTolerations``: a label key (or none, with Exists), Equal's value a label value,
    Exists without a value, a known effect, and ``tolerationSeconds`` only for NoExecute."""
    for i, t in enumerate(tolerations):
        if not isinstance(t, dict):
            continue
        key, op, effect = t.get("key") or "", t.get("operator") or "", t.get("effect") or ""
        if key:
            _label_key(key, f"{path}[{i}].key", causes)
        elif op != "Exists":
            causes.append(invalid(f"{path}[{i}].operator", op, _KEYLESS))
        if effect != "NoExecute" and t.get("tolerationSeconds") is not None:
            causes.append(invalid(f"{path}[{i}].effect", effect,
                                  "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        value = t.get("value") or ""
        if op == "Exists":
            if value:
                causes.append(invalid(f"{path}[{i}].operator", value,
                                      "value must be empty when `operator` is 'Exists'"))
        elif op in ("Equal", ""):  # the value's problems joined, reported on the operator
            problems = label_value_problems(value) if value else None
            if problems:
                causes.append(invalid(f"{path}[{i}].operator", value, ";".join(problems)))
        else:
            causes.append(not_supported(f"{path}[{i}].operator", op, ("Equal", "Exists")))
        if effect and effect not in _EFFECTS:
            causes.append(not_supported(f"{path}[{i}].effect", effect, _EFFECTS))


# -- affinity --------------------------------------------------------------------------------------
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_WEIGHT_RANGE = "must be in the range 1-100"


def _affinity(affinity: Obj, path: str, causes: Causes) -> None:
    """``validateAffinity``: node affinity, pod affinity and pod anti-affinity."""
    node = affinity.get("nodeAffinity")
    if node and isinstance(node, dict):
        _node_affinity(node, f"{path}.nodeAffinity", causes)
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind)
        if terms and isinstance(terms, dict):
            _pod_affinity(terms, f"{path}.{kind}", causes)


def _weight(item: Obj, field: str, causes: Causes) -> None:
    weight = item.get("weight") or 0  # an int32 left out is 0
    if _is_int(weight) and not 0 < weight <= 100:
        causes.append(invalid(field, weight, _WEIGHT_RANGE))


def _node_affinity(node: Obj, path: str, causes: Causes) -> None:
    """``validateNodeAffinity``: at least one required term; preferred weights 1-100 (their
    label values are not checked, as upstream allows them)."""
    selector = node.get(_REQUIRED)
    if isinstance(selector, dict):
        at = f"{path}.{_REQUIRED}.nodeSelectorTerms"
        terms = selector.get("nodeSelectorTerms")
        if not terms or not isinstance(terms, list):
            causes.append(required(at, "must have at least one node selector term"))
        else:
            for i, term in enumerate(terms):
                if isinstance(term, dict):
                    _node_selector_term(term, f"{at}[{i}]", True, causes)
    preferred = node.get(_PREFERRED)
    if preferred and isinstance(preferred, list):
        for i, p in enumerate(preferred):
            if not isinstance(p, dict):
                continue
            at = f"{path}.{_PREFERRED}[{i}]"
            _weight(p, f"{at}.weight", causes)
            term = p.get("preference")
            if isinstance(term, dict):
                _node_selector_term(term, f"{at}.preference", False, causes)


def _set_operator_values(op: Any, values: Any, at: str, causes: Causes) -> bool:
    """The values of an In/NotIn (required) or Exists/DoesNotExist (forbidden) expression, as
    label and node selectors check them alike; False for another operator."""
    if op in ("In", "NotIn"):
        if not values:
            causes.append(required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        return True
    if op in ("Exists", "DoesNotExist"):
        if values:
            causes.append(forbidden(f"{at}.values",
                                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        return True
    return False


def _node_selector_term(term: Obj, path: str, values: bool, causes: Causes) -> None:
    """``ValidateNodeSelectorTerm``: its label expressions and its field expressions."""
    for j, r in enumerate(term.get("matchExpressions") or ()):
        if not isinstance(r, dict):
            continue
        at, op, listed = f"{path}.matchExpressions[{j}]", r.get("operator"), r.get("values") or ()
        if _set_operator_values(op, listed, at, causes):
            pass
        elif op not in ("Gt", "Lt"):
            causes.append(invalid(f"{at}.operator", op or "", "not a valid selector operator"))
        elif len(listed) != 1:
            causes.append(required(f"{at}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        _label_key(r.get("key") or "", f"{at}.key", causes)
        if values:
            _label_values(listed, f"{at}.values", causes)
    for j, r in enumerate(term.get("matchFields") or ()):
        if not isinstance(r, dict):
            continue
        at, op, listed = f"{path}.matchFields[{j}]", r.get("operator"), r.get("values") or ()
        if op in ("In", "NotIn"):
            if len(listed) != 1:
                causes.append(required(f"{at}.values", "must be only one value when `operator` is 'In' or "
                                                       "'NotIn' for node field selector"))
        else:
            causes.append(invalid(f"{at}.operator", op or "", "not a valid selector operator"))
        key = r.get("key") or ""
        if key != "metadata.name":
            causes.append(invalid(f"{at}.key", key, "not a valid field selector key"))
            continue
        for k, v in enumerate(listed):
            if isinstance(v, str) and not _is_subdomain(v):
                causes.extend(invalid(f"{at}.values[{k}]", v, p) for p in _subdomain_problems(v))


def _pod_affinity(affinity: Obj, path: str, causes: Causes) -> None:
    """``validatePodAffinity``, ``validatePodAntiAffinity``: each term; preferred weights 1-100."""
    terms = affinity.get(_REQUIRED)
    if terms and isinstance(terms, list):
        for i, term in enumerate(terms):
            if isinstance(term, dict):
                _pod_affinity_term(term, f"{path}.{_REQUIRED}[{i}]", causes)
    preferred = affinity.get(_PREFERRED)
    if preferred and isinstance(preferred, list):
        for i, p in enumerate(preferred):
            if not isinstance(p, dict):
                continue
            at = f"{path}.{_PREFERRED}[{i}]"
            _weight(p, f"{at}.weight", causes)
            term = p.get("podAffinityTerm")
            _pod_affinity_term(term if isinstance(term, dict) else {}, f"{at}.podAffinityTerm", causes)


def _pod_affinity_term(term: Obj, path: str, causes: Causes) -> None:
    """``validatePodAffinityTerm``: valid selectors and namespaces, label keys, a topology key."""
    selector = term.get("labelSelector")
    if isinstance(selector, dict):
        _label_selector(selector, f"{path}.labelSelector", causes)
    namespace_selector = term.get("namespaceSelector")
    if isinstance(namespace_selector, dict):
        _label_selector(namespace_selector, f"{path}.namespaceSelector", causes)
    for name in term.get("namespaces") or ():
        if isinstance(name, str):  # (upstream's path says "namespace")
            causes.extend(invalid(f"{path}.namespace", name, p) for p in dns_label_problems(name))
    _label_keys(path, term.get("matchLabelKeys"), term.get("mismatchLabelKeys"), selector, causes)
    topology = term.get("topologyKey") or ""
    if not topology:
        causes.append(required(f"{path}.topologyKey", "can not be empty"))
    _label_key(topology, f"{path}.topologyKey", causes)  # (an empty one is reported as a bad name too)


def _label_keys(path: str, match: Any, mismatch: Any, selector: Any, causes: Causes) -> None:
    """``validateMatchLabelKeysAndMismatchLabelKeys``, of a pod (anti-)affinity term and (with
    MatchLabelKeysInPodTopologySpreadSelectorMerge, on since 1.34) of a spread constraint at
    ``path``: valid label keys, only with a selector; a key of ``matchLabelKeys`` the selector
    already requires when the create merged it in again (a second requirement on a key
    that ``matchLabels`` or an earlier expression holds); no key in both lists. Upstream
    reports the duplicate at ``path[i]``, ``i`` the key's index in ``matchLabelKeys``."""
    match_keys = match if isinstance(match, list) else []
    mismatch_keys = mismatch if isinstance(mismatch, list) else []
    for field, keys in (("matchLabelKeys", match_keys), ("mismatchLabelKeys", mismatch_keys)):
        if not keys:
            continue
        if selector is None:
            causes.append(forbidden(f"{path}.{field}", "must not be specified when labelSelector is not set"))
            continue
        for i, key in enumerate(keys):
            _label_key(key, f"{path}.{field}[{i}]", causes)
    if isinstance(selector, dict) and match_keys:
        index = {k: i for i, k in enumerate(match_keys) if isinstance(k, str)}
        labels = selector.get("matchLabels")
        seen = set(labels) if isinstance(labels, dict) else set()
        for e in selector.get("matchExpressions") or ():
            key = e.get("key") if isinstance(e, dict) else None
            if not isinstance(key, str):
                continue
            if key in index and key in seen:
                causes.append(invalid(f"{path}[{index[key]}]", key, "exists in both matchLabelKeys and labelSelector"))
            seen.add(key)
    mismatched = {k for k in mismatch_keys if isinstance(k, str)}
    for i, key in enumerate(match_keys):
        if isinstance(key, str) and key in mismatched:
            causes.append(invalid(f"{path}.matchLabelKeys[{i}]", key,
                                  "exists in both matchLabelKeys and mismatchLabelKeys"))


# -- topology spread constraints -----------------------------------------------------------------
_SCHEDULE_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_INCLUSION_POLICIES = ("Honor", "Ignore")


def _spread_constraints(constraints: list[Any], path: str, causes: Causes) -> None:
    """``validateTopologySpreadConstraints``: a positive skew, a topology key, a known action,
    no repeated {key, action}, ``minDomains`` positive and only with DoNotSchedule, known
    inclusion policies, match label keys with a selector, and a valid selector."""
    for i, c in enumerate(constraints):
        if not isinstance(c, dict):
            continue
        at = f"{path}[{i}]"
        skew = c.get("maxSkew") or 0
        if _is_int(skew) and skew <= 0:
            causes.append(invalid(f"{at}.maxSkew", skew, "must be greater than zero"))
        key, action = c.get("topologyKey") or "", c.get("whenUnsatisfiable") or ""
        if not key:
            causes.append(required(f"{at}.topologyKey", "can not be empty"))
        if action not in _SCHEDULE_ACTIONS:
            causes.append(not_supported(f"{at}.whenUnsatisfiable", action, _SCHEDULE_ACTIONS))
        for later in constraints[i + 1:]:
            if isinstance(later, dict) and (later.get("topologyKey") or "") == key \
                    and (later.get("whenUnsatisfiable") or "") == action:
                causes.append(duplicate(f"{at}.{{topologyKey, whenUnsatisfiable}}", f"{{{key}, {action}}}"))
                break
        domains = c.get("minDomains")
        if _is_int(domains):
            if domains <= 0:
                causes.append(invalid(f"{at}.minDomains", domains, "must be greater than zero"))
            if action != "DoNotSchedule":
                causes.append(invalid(f"{at}.minDomains", domains,
                                      f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"))
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = c.get(field)
            if policy is not None and policy not in _INCLUSION_POLICIES:
                causes.append(not_supported(f"{at}.{field}", policy, _INCLUSION_POLICIES))
        selector = c.get("labelSelector")
        _label_keys(at, c.get("matchLabelKeys"), None, selector, causes)
        if isinstance(selector, dict):
            _label_selector(selector, f"{at}.labelSelector", causes)


# -- security contexts -----------------------------------------------------------------------------
_ID_RANGE = "must be between 0 and 2147483647, inclusive"  # IsValidUserID, IsValidGroupID
_PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_SYSCTL = re.compile(r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?\Z")
_SYSCTL_HINT = (r"must have at most 253 characters and match regex "
                r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")


def _ids(sc: Obj, fields: tuple[str, ...], path: str, causes: Causes) -> None:
    for field in fields:
        value = sc.get(field)
        if _is_int(value) and not 0 <= value <= 2147483647:
            causes.append(invalid(f"{path}.{field}", value, _ID_RANGE))


def _pod_security_context(sc: Obj, spec: Obj, path: str, causes: Causes) -> None:
    """``validatePodSpecSecurityContext``: user and group ids in range, sysctl names, known
    policies and seccomp and AppArmor profiles; a shared process namespace not with hostPID."""
    _ids(sc, ("fsGroup", "runAsUser", "runAsGroup"), path, causes)
    groups = sc.get("supplementalGroups")
    if groups and isinstance(groups, list):
        for g, gid in enumerate(groups):
            if _is_int(gid) and not 0 <= gid <= 2147483647:
                causes.append(invalid(f"{path}.supplementalGroups[{g}]", gid, _ID_RANGE))
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:  # (internally, both are here)
        causes.append(invalid(f"{path}.shareProcessNamespace", True,
                              "ShareProcessNamespace and HostPID cannot both be enabled"))
    sysctls = sc.get("sysctls")
    if sysctls and isinstance(sysctls, list):
        names: set[str] = set()
        for i, s in enumerate(sysctls):
            name = s.get("name") if isinstance(s, dict) else None
            if not name or not isinstance(name, str):
                causes.append(required(f"{path}.sysctls[{i}].name"))
                continue
            if len(name) > 253 or not _SYSCTL.match(name):
                causes.append(invalid(f"{path}.sysctls[{i}].name", name, _SYSCTL_HINT))
            elif name in names:
                causes.append(duplicate(f"{path}.sysctls[{i}].name", name))
            names.add(name)
    policy = sc.get("fsGroupChangePolicy")
    if policy is not None and policy not in ("Always", "OnRootMismatch"):
        causes.append(not_supported(f"{path}.fsGroupChangePolicy", policy, ("Always", "OnRootMismatch")))
    _seccomp(sc.get("seccompProfile"), f"{path}.seccompProfile", causes)
    windows = sc.get("windowsOptions")
    if windows is not None:
        _windows_options(windows, f"{path}.windowsOptions", causes)
    _apparmor(sc.get("appArmorProfile"), f"{path}.appArmorProfile", causes)
    policy = sc.get("supplementalGroupsPolicy")
    if policy is not None and policy not in ("Merge", "Strict"):
        causes.append(not_supported(f"{path}.supplementalGroupsPolicy", policy, ("Merge", "Strict")))


def _container_security_context(sc: Obj, path: str, host_users: bool, causes: Causes) -> None:
    """``ValidateSecurityContext``: ids in range, a known proc mount (Unmasked only in a user
    namespace), seccomp profiles, Windows options and AppArmor profiles."""
    _ids(sc, ("runAsUser", "runAsGroup"), path, causes)
    proc_mount = sc.get("procMount")
    if proc_mount is not None:
        if proc_mount not in ("Default", "Unmasked"):
            causes.append(not_supported(f"{path}.procMount", proc_mount, ("Default", "Unmasked")))
        if host_users and proc_mount == "Unmasked":
            causes.append(invalid(f"{path}.procMount", proc_mount, "`hostUsers` must be false to use `Unmasked`"))
    _seccomp(sc.get("seccompProfile"), f"{path}.seccompProfile", causes)
    windows = sc.get("windowsOptions")
    if windows is not None:
        _windows_options(windows, f"{path}.windowsOptions", causes)
    _apparmor(sc.get("appArmorProfile"), f"{path}.appArmorProfile", causes)


def _host_process(spec: Obj, path: str, causes: Causes) -> None:
    """``validateWindowsHostProcessPod``: a container's ``hostProcess`` the pod's where both say
    one; a pod with a HostProcess container (its own or inherited) has only such containers and
    the host's network (the cluster allows privileged containers here, as ``--allow-privileged``)."""
    sc = spec.get("securityContext")
    options = sc.get("windowsOptions") if isinstance(sc, dict) else None
    pod_value = options.get("hostProcess") if isinstance(options, dict) else None
    count = host_process = 0
    for key in _VISITED:
        listed = spec.get(key)
        for i, c in enumerate(listed if isinstance(listed, list) else ()):
            if not isinstance(c, dict):
                continue
            count += 1
            c_sc = c.get("securityContext")
            c_options = c_sc.get("windowsOptions") if isinstance(c_sc, dict) else None
            value = c_options.get("hostProcess") if isinstance(c_options, dict) else None
            if isinstance(pod_value, bool) and isinstance(value, bool) and pod_value != value:
                causes.append(invalid(f"{path}.{key}[{i}].securityContext.windowsOptions.hostProcess", value,
                                      f"pod hostProcess value must be identical if both are specified, was "
                                      f"{'true' if pod_value else 'false'}"))
            if value is True or (value is None and pod_value is True):
                host_process += 1
    if host_process:
        if host_process != count:
            causes.append(invalid(path, "", "If pod contains any hostProcess containers then all containers must be "
                                            "HostProcess containers"))
        if spec.get("hostNetwork") is not True:
            causes.append(invalid(f"{path}.hostNetwork", False,
                                  "hostNetwork must be true if pod contains any hostProcess containers"))


# validateWindowsSecurityContextOptions' limits and patterns (its lengths are Go's, in bytes)
_MAX_GMSA_SPEC = 64 * 1024
_MAX_DOMAIN, _MAX_USER = 256, 104
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # [[:cntrl:]]
_NETBIOS = re.compile(r'[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}\Z')
_DNS_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_WINDOWS_DOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*\Z")
_USER_CHARS = re.compile(r'["/\\:;|=,+*?<>@\[\]]')
_DOTS_SPACES = re.compile(r"[. ]+\Z")


def _windows_options(options: Any, path: str, causes: Causes) -> None:
    """``validateWindowsSecurityContextOptions``: a GMSA credential spec's name a DNS subdomain,
    the spec itself not empty and under 64 KiB, ``runAsUserName`` a ``DOMAIN\\USER`` (or a
    ``USER``) Windows accepts."""
    if not isinstance(options, dict):
        return
    name = options.get("gmsaCredentialSpecName")
    if isinstance(name, str) and not _is_subdomain(name):
        causes.extend(invalid(f"{path}.gmsaCredentialSpecName", name, m) for m in _subdomain_problems(name))
    spec = options.get("gmsaCredentialSpec")
    if isinstance(spec, str):
        if not spec:
            causes.append(invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec cannot be an empty string"))
        elif len(spec.encode()) > _MAX_GMSA_SPEC:
            causes.append(invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec size must be under 64 KiB"))
    user = options.get("runAsUserName")
    if isinstance(user, str):
        for problem in _run_as_user_name_problems(user):
            causes.append(invalid(f"{path}.runAsUserName", user, problem))


def _run_as_user_name_problems(value: str) -> list[str]:
    if not value:
        return ["runAsUserName cannot be an empty string"]
    if _CONTROL.search(value):
        return ["runAsUserName cannot contain control characters"]
    parts = value.split("\\")
    if len(parts) > 2:
        return ["runAsUserName cannot contain more than one backslash"]
    domain, user = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    problems = []
    if len(domain.encode()) >= _MAX_DOMAIN:
        problems.append(f"runAsUserName's Domain length must be under {_MAX_DOMAIN} characters")
    if len(parts) == 2 and not (_NETBIOS.match(domain) or _WINDOWS_DOMAIN.match(domain)):
        problems.append("runAsUserName's Domain doesn't match the NetBios nor the DNS format")
    if not user:
        problems.append("runAsUserName's User cannot be empty")
    elif len(user.encode()) > _MAX_USER:
        problems.append(f"runAsUserName's User length must not be longer than {_MAX_USER} characters")
    if _DOTS_SPACES.match(user):
        problems.append("runAsUserName's User cannot contain only periods or spaces")
    if _USER_CHARS.search(user):
        problems.append('runAsUserName\'s User cannot contain the following characters: "/\\:;|=,+*?<>@[]')
    return problems


def _seccomp(profile: Any, path: str, causes: Causes) -> None:
    """``validateSeccompProfileField``: a known type; Localhost names its profile."""
    if not isinstance(profile, dict):
        return
    kind = profile.get("type")
    if kind not in _PROFILE_TYPES:
        causes.append(required(f"{path}.type", "type is required when seccompProfile is set") if not kind
                      else not_supported(f"{path}.type", kind, _PROFILE_TYPES))
    elif kind == "Localhost":
        local = profile.get("localhostProfile")
        if local is None:
            causes.append(required(f"{path}.localhostProfile", "must be set when seccomp type is Localhost"))
        elif isinstance(local, str) and (local.startswith("/") or ".." in local):  # validateLocalDescendingPath
            causes.extend(podannotations.local_descending_path(local, f"{path}.localhostProfile"))


def _apparmor(profile: Any, path: str, causes: Causes) -> None:
    """``ValidateAppArmorProfileField``: a known type; Localhost, and only it, names its profile."""
    if not isinstance(profile, dict):
        return
    kind, local = profile.get("type"), profile.get("localhostProfile")
    if kind == "Localhost":
        if local is None or (isinstance(local, str) and local == local.strip() and not local):
            causes.append(required(f"{path}.localhostProfile", "must be set when AppArmor type is Localhost"))
        elif isinstance(local, str) and local != local.strip():
            causes.append(invalid(f"{path}.localhostProfile", local, "must not be padded with whitespace"))
    elif kind in ("RuntimeDefault", "Unconfined"):
        if local is not None:
            causes.append(invalid(f"{path}.localhostProfile", local, "can only be set when AppArmor type is Localhost"))
    elif not kind:
        causes.append(required(f"{path}.type", "type is required when appArmorProfile is set"))
    else:
        causes.append(not_supported(f"{path}.type", kind, _PROFILE_TYPES))


# -- the pod's OS (KEP-2802) -----------------------------------------------------------------------
_OS_NAMES = ("linux", "windows")  # validOS, listed sorted
_NOT_WINDOWS = "cannot be set for a windows pod"
_NOT_LINUX = "windows options cannot be set for a linux pod"
# validateWindows, in its order: the pod security context's fields a Windows pod may not set,
# each with its path below the spec (upstream keeps the host namespaces, hostUsers and
# shareProcessNamespace in its internal PodSecurityContext, at their v1 paths) and whether a
# false or empty value counts (its pointers do when set at all; hostPID, hostIPC and sysctls only
# when true or not empty)
_WINDOWS_POD = (("securityContext", "appArmorProfile", True), ("securityContext", "seLinuxOptions", True),
                ("", "hostUsers", True), ("", "hostPID", False), ("", "hostIPC", False),
                ("securityContext", "seccompProfile", True), ("securityContext", "fsGroup", True),
                ("securityContext", "fsGroupChangePolicy", True), ("securityContext", "sysctls", False),
                ("", "shareProcessNamespace", True), ("securityContext", "runAsUser", True),
                ("securityContext", "runAsGroup", True), ("securityContext", "supplementalGroups", True),
                ("securityContext", "supplementalGroupsPolicy", True),
                ("securityContext", "seLinuxChangePolicy", True))
# ... and a container's security context's, in its order
_WINDOWS_CONTAINER = ("appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities",
                      "readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation", "procMount", "runAsUser",
                      "runAsGroup")
_VISITED = ("initContainers", "containers", "ephemeralContainers")  # VisitContainersWithPath's order


def _os(pod_os: Any, spec: Obj, path: str, causes: Causes) -> None:
    """``validateOS``, then, for a valid name, ``validateLinux`` or ``validateWindows``: a
    Linux pod sets no ``windowsOptions``; a Windows pod none of the Linux-only fields, in
    the pod's security context nor in any container's (init and ephemeral containers too)."""
    name = pod_os.get("name") if isinstance(pod_os, dict) else None
    if not name:
        causes.append(required(f"{path}.os.name", "cannot be empty"))
        return
    if name not in _OS_NAMES:  # (upstream reports it at the PodOS, not its name)
        causes.append(not_supported(f"{path}.os", name, _OS_NAMES))
        return
    sc = spec.get("securityContext")
    sc = sc if isinstance(sc, dict) else {}
    if name == "linux":
        if sc.get("windowsOptions") is not None:
            causes.append(forbidden(f"{path}.securityContext.windowsOptions", _NOT_LINUX))
        for at, c_sc in _container_contexts(spec, path):
            if c_sc.get("windowsOptions") is not None:
                causes.append(forbidden(f"{at}.securityContext.windowsOptions", _NOT_LINUX))
        return
    for where, field, pointer in _WINDOWS_POD:
        value = (sc if where else spec).get(field)
        if value is not None and (pointer or value):
            causes.append(forbidden(f"{path}.{where}.{field}" if where else f"{path}.{field}", _NOT_WINDOWS))
    for at, c_sc in _container_contexts(spec, path):
        for field in _WINDOWS_CONTAINER:
            if c_sc.get(field) is not None:
                causes.append(forbidden(f"{at}.securityContext.{field}", _NOT_WINDOWS))


def ephemeral_container_causes(spec: Obj, added: list[tuple[str, Obj]], path: str = "spec") -> Causes:
    """What ``validateEphemeralContainers`` says with ``validateContainerCommon`` of the
    ephemeral containers an ``ephemeralcontainers`` update adds to the (stored, valid) spec at
    ``path`` (``added``: each with its path): name, image, env, mounts of the pod's volumes,
    resources, and its security context (ids, proc mount, profiles, ``windowsOptions``)."""
    causes: Causes = []
    volumes = _volume_names(spec.get("volumes"), path, causes)
    host_users = spec.get("hostUsers") is not False
    pod_level = isinstance(spec.get("resources"), dict)
    for at, c in added:
        _container(c, at, volumes, True, host_users, causes, pod_level)
    return causes


def host_process_causes(spec: Obj, path: str) -> Causes:
    """``validateWindowsHostProcessPod`` of the whole spec at ``path`` (the ephemeral containers
    too), which only a spec with some ``windowsOptions`` can fail."""
    causes: Causes = []
    sc = spec.get("securityContext")
    if (isinstance(sc, dict) and sc.get("windowsOptions") is not None) or \
            any(c_sc.get("windowsOptions") is not None for _, c_sc in _container_contexts(spec, path)):
        _host_process(spec, path, causes)
    return causes


def os_causes(spec: Obj, path: str) -> Causes:
    """``validateOS`` and its OS's checks of the spec at ``path``, which has an ``os``; for
    the ephemeral containers an ``ephemeralcontainers`` update adds (upstream validates the
    whole new spec again there: what was stored passes)."""
    causes: Causes = []
    _os(spec.get("os"), spec, path, causes)
    return causes


def _container_contexts(spec: Obj, path: str) -> list[tuple[str, Obj]]:
    """Each container's security context, with the container's path, that is an object."""
    found = []
    for key in _VISITED:
        listed = spec.get(key)
        if not isinstance(listed, list):
            continue
        for i, c in enumerate(listed):
            sc = c.get("securityContext") if isinstance(c, dict) else None
            if isinstance(sc, dict):
                found.append((f"{path}.{key}[{i}]", sc))
    return found


# -- probes and lifecycle hooks -------------------------------------------------------------------
_HOOKS_AND_PROBES = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")
_INIT_FORBIDDEN = "may not be set for init containers without restartPolicy=Always"
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_HOOK_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
_PROBE_COUNTS = ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold")
_NONNEGATIVE = "must be greater than or equal to 0"
_HTTP_HEADER = re.compile(r"[-A-Za-z0-9]+\Z")
_HTTP_HEADER_HINT = ("a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', "
                     "regex used for validation is '[-A-Za-z0-9]+')")


def _hooks_and_probes(c: Obj, at: str, grace: Any, causes: Causes) -> None:
    """``validateLifecycle`` and the liveness, readiness and startup probes of a container
    (or a sidecar); ``grace`` the pod's termination grace period, a sleep's bound."""
    lifecycle = c.get("lifecycle")
    if lifecycle and isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                _handler(handler, f"{at}.lifecycle.{hook}", _HOOK_HANDLERS, grace, causes)
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(kind)
        if isinstance(probe, dict):
            _probe(probe, kind, f"{at}.{kind}", grace, causes)


def _probe(probe: Obj, kind: str, at: str, grace: Any, causes: Causes) -> None:
    """``validateProbe``: one handler, counts not negative, a positive grace period; a liveness
    or startup probe succeeds once, a readiness probe has no grace period of its own."""
    _handler(probe, at, _PROBE_HANDLERS, grace, causes)
    for field in _PROBE_COUNTS:
        value = probe.get(field)
        if _is_int(value) and value < 0:
            causes.append(invalid(f"{at}.{field}", value, _NONNEGATIVE))
    period = probe.get("terminationGracePeriodSeconds")
    if _is_int(period) and period <= 0:
        causes.append(invalid(f"{at}.terminationGracePeriodSeconds", period, "must be greater than 0"))
    if kind == "readinessProbe":
        if period is not None:
            causes.append(invalid(f"{at}.terminationGracePeriodSeconds", period, "must not be set for readinessProbes"))
        return
    success = probe.get("successThreshold")
    if _is_int(success) and success not in (0, 1):  # (0 is defaulted to 1)
        causes.append(invalid(f"{at}.successThreshold", success, "must be 1"))


def _handler(handler: Obj, at: str, kinds: tuple[str, ...], grace: Any, causes: Causes) -> None:
    """``validateHandler``: exactly one handler type, itself valid."""
    count = 0
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        if count:
            causes.append(forbidden(f"{at}.{kind}", "may not specify more than 1 handler type"))
            continue
        count += 1
        if not isinstance(action, dict):
            continue
        where = f"{at}.{kind}"
        if kind == "exec":
            if not action.get("command"):
                causes.append(required(f"{where}.command"))
        elif kind == "httpGet":
            if action.get("path") == "":
                causes.append(required(f"{where}.path"))
            _port(action.get("port"), f"{where}.port", causes)
            scheme = action.get("scheme")
            if scheme and scheme not in ("HTTP", "HTTPS"):
                causes.append(not_supported(f"{where}.scheme", scheme, ("HTTP", "HTTPS")))
            for header in action.get("httpHeaders") or ():
                name = header.get("name") if isinstance(header, dict) else None
                name = name if isinstance(name, str) else ""
                if not _HTTP_HEADER.match(name):
                    causes.append(invalid(f"{where}.httpHeaders", name, _HTTP_HEADER_HINT))
        elif kind == "tcpSocket":
            _port(action.get("port"), f"{where}.port", causes)
        elif kind == "grpc":
            _port(action.get("port") or 0, f"{where}.port", causes)
        else:  # sleep (zero allowed: PodLifecycleSleepActionAllowZero)
            seconds = action.get("seconds") or 0
            if _is_int(grace) and _is_int(seconds) and not 0 <= seconds <= grace:
                causes.append(invalid(where, seconds, "must be non-negative and less than "
                                                      f"terminationGracePeriodSeconds ({grace})"))
    if not count:
        causes.append(required(at, "must specify a handler type"))


def _port(port: Any, field: str, causes: Causes) -> None:
    """``ValidatePortNumOrName``: a number in range, or an IANA service name."""
    if isinstance(port, str):
        causes.extend(invalid(field, port, p) for p in port_name_problems(port))
    elif port is None or (_is_int(port) and not 0 < port < 65536):
        causes.append(invalid(field, port or 0, _PORT_RANGE))


# -- workload templates -------------------------------------------------------------------------
def template_causes(plural: str, spec: Obj, path: str, old_spec: Obj | None = None) -> Causes:
    """The pod template of a workload's ``spec`` (at ``path``): present, its labels label keys
    and values, a valid pod spec, and a restart policy the kind allows; ``plural`` a Job's for a CronJob's job template;
    ``old_spec`` the stored workload spec of an update."""
    allowed = _TEMPLATE_RESTART.get(plural)
    if allowed is None:
        return []
    template = spec.get("template")
    if not isinstance(template, dict):
        return [required(f"{path}.template")]
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict):
        return [required(f"{path}.template.spec")]
    at = f"{path}.template.spec"
    meta = template.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None  # ValidatePodTemplateSpec's, a set's too
    causes = labels_causes(labels, f"{path}.template.labels") if isinstance(labels, dict) and labels else []
    # upstream leaves a StatefulSet's pod spec unchecked (ValidatePodTemplateSpecForStatefulSet: its
    # mounts may name volumeClaimTemplates, not volumes); its pods are checked when they are created
    old_pod_spec = ((old_spec or {}).get("template") or {}).get("spec")
    if plural == "statefulsets":
        drop_kept_empty(pod_spec)
    else:
        # ValidatePodTemplateSpec: the pod's own annotation checks, its AppArmor annotations' agreement
        # with its fields after its spec's (at the template's paths: upstream's, spec.template.annotations[...])
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if not isinstance(annotations, dict) or not annotations or not podannotations.concerned(annotations):
            annotations = None
        if annotations is not None:
            causes += podannotations.annotation_causes(annotations, pod_spec, f"{path}.template.annotations")
        causes += pod_spec_causes(pod_spec, at, old=old_pod_spec if isinstance(old_pod_spec, dict) else None)
        if annotations is not None:
            causes += podannotations.create_causes(annotations, pod_spec, at)
        if pod_spec.get("ephemeralContainers"):
            causes.append(forbidden(f"{at}.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    restart = pod_spec.get("restartPolicy")
    if restart not in allowed:  # (an unknown one is pod_spec_causes' too: upstream says both)
        causes.append(not_supported(f"{at}.restartPolicy", restart, allowed))
    owner = _NO_DEADLINE.get(plural)
    if owner is not None and pod_spec.get("activeDeadlineSeconds") is not None:
        causes.append(forbidden(f"{at}.activeDeadlineSeconds", f"activeDeadlineSeconds in {owner} is not Supported"))
    return causes


# -- the same checks for the other types that embed a selector, labels or tolerations ------------
def label_selector_causes(selector: Obj, field: str) -> Causes:
    """``ValidateLabelSelector``: operators, values, label keys and label values."""
    causes: Causes = []
    _label_selector(selector, field, causes)
    return causes


def labels_causes(labels: Obj, field: str) -> Causes:
    """``ValidateLabels``: each key a qualified name, each value a label value."""
    causes: Causes = []
    _labels(labels, field, causes)
    return causes


def tolerations_causes(tolerations: list[Any], field: str) -> Causes:
    """``ValidateTolerations``, as a pod's are checked."""
    causes: Causes = []
    _tolerations(tolerations, field, causes)
    return causes
