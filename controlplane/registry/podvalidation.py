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
pull and termination-message policies, requests within limits), volume names, the restart
and DNS policies, and the restart policy each workload kind allows its template. Messages
are upstream's words (``field.Required``, ``NotSupported``, ``Duplicate``, ``NotFound``).
Cheap on purpose: every pod create passes here, so plain loops over the dicts, precompiled
patterns and field paths built only for a cause.
"""

from __future__ import annotations

import re
from typing import Any

from ..quantity import QuantityError, parse_quantity
from .causes import duplicate, forbidden, invalid, not_found, not_supported, required

__all__ = ["dns_label_problems", "not_supported", "pod_spec_causes", "port_name_problems", "required",
           "template_causes"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_HINT = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]+\Z")
_PORT_NAME_LETTER = re.compile(r"[a-z]")
# printable ASCII but '=': the relaxed rule (RelaxedEnvironmentVariableValidation, on by default since 1.32)
_ENV_NAME = re.compile(r"[ -<>-~]+\Z")
_ENV_NAME_HINT = "a valid environment variable name must consist only of printable ASCII characters other than '='"
_PORT_RANGE = "must be between 1 and 65535, inclusive"

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
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
    if len(value) <= 63 and _DNS1123_LABEL.match(value):
        return []
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _DNS1123_LABEL.match(value):
        problems.append("must not contain dots" if _DNS1123_SUBDOMAIN.match(value) else _LABEL_HINT)
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- pod specs --------------------------------------------------------------------------------
def pod_spec_causes(spec: Obj, path: str, pod: bool = False) -> Causes:
    """The causes of a 422 in the (defaulted) pod spec at ``path``; ``pod``: the spec is a
    Pod's own, not a template's (its images may not have surrounding whitespace)."""
    causes: Causes = []
    volumes = _volume_names(spec.get("volumes"), path, causes)
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        causes.append(required(f"{path}.containers"))
        containers = []
    init = spec.get("initContainers")
    names: set[Any] = set()  # unique across containers and init containers
    for key, listed in (("containers", containers), ("initContainers", init if isinstance(init, list) else ())):
        for i, c in enumerate(listed):
            if not isinstance(c, dict):
                continue
            at = f"{path}.{key}[{i}]"
            _container(c, at, volumes, pod, causes)
            name = c.get("name")
            if name in names:
                causes.append(duplicate(f"{at}.name", name))
            elif name or key == "containers":
                names.add(name)
            policy = c.get("restartPolicy") if key == "initContainers" else None
            if policy is not None and policy != "Always":  # only a sidecar's, on an init container
                causes.append(not_supported(f"{at}.restartPolicy", policy, ("Always",)))
    restart = spec.get("restartPolicy")
    _one_of(f"{path}.restartPolicy", restart, _RESTART_POLICIES, causes)
    dns = spec.get("dnsPolicy")
    _one_of(f"{path}.dnsPolicy", dns, _DNS_POLICIES, causes)
    return causes


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
        if isinstance(name, str) and name and name not in names and len(name) <= 63 and _DNS1123_LABEL.match(name):
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


def _container(c: Obj, at: str, volumes: set[str], pod: bool, causes: Causes) -> None:
    """``validateContainerCommon``: what every container of a spec must say."""
    name = c.get("name")
    if not name:
        causes.append(required(f"{at}.name"))
    elif not isinstance(name, str) or len(name) > 63 or not _DNS1123_LABEL.match(name):
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
        _resources(resources, at, causes)


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


def _resources(resources: Any, at: str, causes: Causes) -> None:
    """A request may not exceed its limit (an extended resource's must equal it)."""
    if not isinstance(resources, dict):
        return
    requests, limits = resources.get("requests"), resources.get("limits")
    if not requests or not limits or not isinstance(requests, dict) or not isinstance(limits, dict):
        return
    for resource, quantity in requests.items():
        limit = limits.get(resource)
        if limit is None or limit == quantity:
            continue
        try:
            request_value, limit_value = parse_quantity(quantity), parse_quantity(limit)
        except QuantityError:
            continue  # a body whose quantities do not parse is another check's
        if request_value == limit_value:
            continue
        if not _overcommittable(resource):
            causes.append(invalid(f"{at}.resources.requests", _quantity(quantity),
                                  f"must be equal to {resource} limit of {_quantity(limit)}"))
        elif request_value > limit_value:
            causes.append(invalid(f"{at}.resources.requests", _quantity(quantity),
                                  f"must be less than or equal to {resource} limit of {_quantity(limit)}"))


def _quantity(value: Any) -> str:
    """A quantity as its ``String()`` prints it, near enough: as written."""
    return value if isinstance(value, str) else str(value)


# -- workload templates -------------------------------------------------------------------------
def template_causes(plural: str, spec: Obj, path: str) -> Causes:
    """The pod template of a workload's ``spec`` (at ``path``): present, a valid pod spec, and
    a restart policy the kind allows; ``plural`` a Job's for a CronJob's job template."""
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
    # upstream leaves a StatefulSet's pod spec unchecked (ValidatePodTemplateSpecForStatefulSet: its
    # mounts may name volumeClaimTemplates, not volumes); its pods are checked when they are created
    causes = [] if plural == "statefulsets" else pod_spec_causes(pod_spec, at)
    restart = pod_spec.get("restartPolicy")
    if restart not in allowed:  # (an unknown one is pod_spec_causes' too: upstream says both)
        causes.append(not_supported(f"{at}.restartPolicy", restart, allowed))
    owner = _NO_DEADLINE.get(plural)
    if owner is not None and pod_spec.get("activeDeadlineSeconds") is not None:
        causes.append(forbidden(f"{at}.activeDeadlineSeconds", f"activeDeadlineSeconds in {owner} is not Supported"))
    return causes
