"""Per-type behaviour of writes: name validation and defaulting at create, and what
every write of a type goes through (``prepare``), as kube-apiserver's strategies,
conversions and defaulting functions do it (the subset this server implements).

    >>> problems = validate_name("pods", "Web_0")        # -> [cause], a 422 Invalid
    >>> default("pods", pod)                               # restartPolicy, dnsPolicy, ... filled in
    >>> problems = prepare("secrets", secret, old)        # stringData merged into data; keys checked
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import random
import re
from collections.abc import Callable, Container, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from ..gostrings import quote
from .admissionpolicies import prepare_validating_admission_policy, prepare_validating_admission_policy_binding
from .apiservices import name_causes as apiservice_name_causes
from .apiservices import prepare_apiservice
from .autoscaling import prepare_horizontal_pod_autoscaler
from .causes import forbidden
from .corevalidation import endpoints_warnings, prepare_endpoints, prepare_node, prepare_pod_template, service_warnings
from .csi import (
    prepare_csi_driver,
    prepare_csi_node,
    prepare_csi_storage_capacity,
    prepare_volume_attachment,
    prepare_volume_attributes_class,
)
from .devicetaintrules import prepare_device_taint_rule
from .disruption import prepare_pod_disruption_budget
from .dnsnames import (
    DNS1123_SUBDOMAIN,
    SUBDOMAIN_MESSAGE,
    dns_label_name_problems,
    path_segment_problems,
)
from .dra import prepare_device_class, prepare_resource_claim, prepare_resource_claim_template
from .flowcontrol import prepare_flow_schema, prepare_priority_level
from .immutable import (
    pod_update_causes,
    service_causes,
    service_update_causes,
    workload_causes,
    workload_spec_causes,
)
from .ipfields import pod_status_ip_causes, service_ip_causes
from .labelkeys import merge_label_keys
from .leases import prepare_lease
from .mutatingpolicies import prepare_mutating_admission_policy, prepare_mutating_admission_policy_binding
from .networking import (
    ingress_warnings,
    load_balancer_ip_causes,
    prepare_endpoint_slice,
    prepare_ingress,
    prepare_ingress_class,
    prepare_network_policy,
)
from .podannotations import (
    DELETION_COST,
    annotation_causes,
    concerned,
    create_causes,
    update_causes,
    valid_deletion_cost,
)
from .podcertificates import prepare_pod_certificate_request
from .podgroups import prepare_podgroup, prepare_scheduling_workload
from .podresources import default_pod_level_resources
from .podspec import default_pod_spec, fill
from .podstatus import status_causes as pod_status_causes
from .podstatus import user_causes as pod_user_causes
from .podvalidation import label_key_problems, labels_causes, pod_spec_causes
from .podwarnings import TEMPLATES, claim_warnings, name_warning, pod_warnings, template_warnings
from .priorityclasses import prepare_priority_class
from .quota import prepare_limit_range, prepare_resource_quota
from .rbacvalidation import (
    prepare_cluster_role,
    prepare_cluster_role_binding,
    prepare_role,
    prepare_role_binding,
)
from .resourceslices import prepare_resource_slice
from .runtimeclasses import prepare_runtime_class
from .servicecidrs import ip_address_name_problems, prepare_ip_address, prepare_service_cidr
from .storagemigration import prepare_storage_version_migration
from .trustbundles import prepare_cluster_trust_bundle
from .volumes import BadQuantity, prepare_claim, prepare_storage_class, prepare_volume
from .webhooks import prepare_webhook_configuration
from .workloads import WORKLOADS, prepare_workload
from .workloadstatus import STATUS_VALIDATED, workload_status_causes

__all__ = ["CREATE_ON_UPDATE", "BadData", "default", "prepare", "valid_names", "validate_metadata", "validate_name",
           "warnings"]


# Names that must be DNS labels (they become host names or DNS names: a StatefulSet's is
# its pods' hostnames' stem; a Service's may start with a digit since RelaxedServiceNameValidation,
# KEP-5311, on in 1.36, where it was a DNS-1035 label); the rest are DNS subdomains, as
# kube-apiserver's ValidateObjectMeta callers choose.
_LABEL_NAMED = {"namespaces", "statefulsets", "services"}


# Names checked by a function of their type's own: its problems, each a cause (RBAC
# objects' need only be path segments, as upstream's ValidateRBACName: ``system:basic-user``)
_OWN_NAMES: dict[str, Callable[[str], list[str]]] = {
    "ipaddresses": ip_address_name_problems, "roles": path_segment_problems, "clusterroles": path_segment_problems,
    "rolebindings": path_segment_problems, "clusterrolebindings": path_segment_problems,
    # a ClusterTrustBundle's name rule depends on its signer: registry/trustbundles.py checks it
    "clustertrustbundles": lambda name: [],
}


def validate_name(plural: str, name: str) -> list[dict[str, str]]:
    """The causes for a 422 Invalid if ``name`` is not a valid name for ``plural``."""
    own = _OWN_NAMES.get(plural)
    if own is not None:
        return [{"reason": "FieldValueInvalid", "field": "metadata.name", "message": f'Invalid value: "{name}": {p}'}
                for p in own(name)]
    if plural == "apiservices":  # a path segment: ``v1.``, the core group's, is no subdomain
        return apiservice_name_causes(name)
    if plural in _LABEL_NAMED:
        problems = dns_label_name_problems(name)
    else:
        problems = ["must be no more than 253 characters"] if len(name) > 253 else []
        if not DNS1123_SUBDOMAIN.match(name):
            problems.append(SUBDOMAIN_MESSAGE)
    return [{"reason": "FieldValueInvalid", "field": "metadata.name", "message": f'Invalid value: "{name}": {p}'}
            for p in problems]


_SUBDOMAIN_LINES = re.compile(r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\n)*\Z")


def valid_names(plural: str, names: list[str]) -> bool:
    """Whether ``validate_name`` finds nothing wrong with any of ``names`` (many names of a
    bulk request in one match, not one each); False says only that one is wrong: ask
    ``validate_name`` which, and why."""
    if plural in _LABEL_NAMED or plural in _OWN_NAMES or plural == "apiservices":
        return not any(validate_name(plural, name) for name in names)
    if not names:
        return True
    lines = "\n".join(names) + "\n"
    # a name holding a newline would pass as two: the lines must be the names
    return (lines.count("\n") == len(names) and max(map(len, names)) <= 253
            and _SUBDOMAIN_LINES.match(lines) is not None)


def _default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        resources = c.get("resources") if isinstance(c, dict) else None
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if limits and isinstance(limits, dict):  # a limit without a request requests the limit (SetDefaults_Pod)
            requests = resources.setdefault("requests", {})  # type: ignore[union-attr]
            if isinstance(requests, dict):
                for name, value in limits.items():
                    requests.setdefault(name, value)
    if "resources" in spec:  # pod-level resources' defaults come after the containers'
        default_pod_level_resources(spec)
    fill(spec, "enableServiceLinks", True)
    # the deprecated serviceAccount mirrors serviceAccountName, as upstream's conversion
    # (``default`` is ServiceAccount admission's, at create: api/serviceaccount.py)
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if sa:
        spec["serviceAccountName"] = spec["serviceAccount"] = sa
    else:
        spec.pop("serviceAccountName", None)
        spec.pop("serviceAccount", None)
    tolerations = spec.setdefault("tolerations", [])
    keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in keys:  # the DefaultTolerationSeconds admission plugin
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})


SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kube-apiserver's --service-cluster-ip-range here
_rng = random.Random()
os.register_at_fork(after_in_child=_rng.seed)  # (a --workers process must not pick what its parent picks)


NODE_PORTS = range(30000, 32768)  # kube-apiserver's default --service-node-port-range


class ServicePicks(Protocol):
    """Where a Service's write takes the cluster IP and node ports it is given (the API's
    allocator, ``api/allocations.py``, which then claims them in the store)."""

    def cluster_ip(self) -> str: ...

    def node_port(self, taken: set[int]) -> int | None: ...


# set by the API around a Service's write; without one, picks are random and unchecked
SERVICE_PICKS: ContextVar[ServicePicks | None] = ContextVar("service_picks", default=None)


def _static_band(size: int, step: int, most: int) -> int:
    """The low part of a range left to requested values, as upstream's ``calculateRangeOffset``
    (KEP-3070, KEP-3668): dynamic allocations take the rest first."""
    return 0 if size <= 16 else min(max(16, size // step), most)


def free_cluster_ip(taken: Container[str]) -> str:
    """A random address of the range not in ``taken``, from above the static band first."""
    size = SERVICE_CIDR.num_addresses
    for low in (_static_band(size - 2, 16, 256) + 1, 1):  # (not the network or broadcast address)
        for _ in range(64):
            ip = str(SERVICE_CIDR[_rng.randrange(low, size - 1)])
            if ip not in taken:
                return ip
    return str(SERVICE_CIDR[_rng.randrange(1, size - 1)])  # (2^20 addresses: never full here)


def free_node_port(taken: Container[int]) -> int | None:
    """A random port of the range not in ``taken``, from above the static band first; None: full."""
    band = NODE_PORTS.start + _static_band(len(NODE_PORTS), 32, 128)
    for low in (band, NODE_PORTS.start):
        free = [p for p in range(low, NODE_PORTS.stop) if p not in taken]
        if free:
            return _rng.choice(free)
    return None  # the range is full


def _default_service(svc: dict[str, Any]) -> None:
    """A Service's defaults and allocations at create: a cluster IP (none for ExternalName;
    a headless ``None`` is kept, in ``clusterIPs`` too), node ports for NodePort and
    LoadBalancer services, and their traffic policies. The picks are ``SERVICE_PICKS``'s."""
    spec = svc.setdefault("spec", {})
    picks = SERVICE_PICKS.get()
    kind = fill(spec, "type", "ClusterIP")
    affinity = fill(spec, "sessionAffinity", "None")
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}  # 3 hours, as upstream
    if kind == "ExternalName":
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            spec.pop(key, None)
    else:
        if spec.get("clusterIP") in (None, ""):
            spec["clusterIP"] = picks.cluster_ip() if picks is not None else free_cluster_ip(())
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        # upstream's initIPFamilyFields: a headless Service without a selector asks for both
        # families unless told otherwise, and gets them even on a single-stack cluster
        open_headless = _open_headless(spec)
        policy = fill(spec, "ipFamilyPolicy", "RequireDualStack" if open_headless else "SingleStack")
        families = spec.get("ipFamilies")
        if not families:
            spec["ipFamilies"] = families = ["IPv4"]
        if open_headless and policy != "SingleStack" and isinstance(families, list) and len(families) == 1 \
                and families[0] in _FAMILY_PAIR:
            families.append(_FAMILY_PAIR[families[0]])
        fill(spec, "internalTrafficPolicy", "Cluster")  # (not for an ExternalName, as upstream)
    external = kind in ("NodePort", "LoadBalancer")
    if external or (kind == "ClusterIP" and spec.get("externalIPs")):
        fill(spec, "externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        fill(spec, "allocateLoadBalancerNodePorts", True)
    taken: set[int] = {n for p in spec.get("ports") or () if isinstance(p, dict)
                       and isinstance(n := p.get("nodePort"), int)}
    for port in spec.get("ports", []) or []:
        if isinstance(port, dict):
            fill(port, "protocol", "TCP")
            fill(port, "targetPort", port.get("port"))
            if external and not port.get("nodePort") and spec.get("allocateLoadBalancerNodePorts", True):
                # random in the range, as upstream's allocator
                node_port = picks.node_port(taken) if picks is not None else free_node_port(taken)
                if node_port is not None:
                    taken.add(node_port)
                    port["nodePort"] = node_port
    if kind == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local" and not spec.get("healthCheckNodePort"):
        # the node port kube-proxy answers load balancers' health checks on (upstream's
        # allocHealthCheckNodePort), from the same range, whatever allocateLoadBalancerNodePorts says
        node_port = picks.node_port(taken) if picks is not None else free_node_port(taken)
        if node_port is not None:
            spec["healthCheckNodePort"] = node_port


_FAMILY_PAIR = {"IPv4": "IPv6", "IPv6": "IPv4"}


def _open_headless(spec: dict[str, Any]) -> bool:
    """A headless Service without a selector: its families are not this cluster's to judge."""
    return spec.get("clusterIP") == "None" and not spec.get("selector")


def service_family_causes(svc: dict[str, Any]) -> Causes:
    """What kube-apiserver's allocator (initIPFamilyFields, before validation) refuses of a
    Service's IP families on this single-stack IPv4 cluster: one family with ``SingleStack``,
    no dual-stack demand, no family but IPv4; a headless Service without a selector may
    name any (family names that are none are validation's, ``service_causes``)."""
    spec = svc.get("spec")
    if not isinstance(spec, dict) or spec.get("type") == "ExternalName" or _open_headless(spec):
        return []
    policy = spec.get("ipFamilyPolicy")
    ips, families = spec.get("clusterIPs"), spec.get("ipFamilies")
    ips, families = ips if isinstance(ips, list) else [], families if isinstance(families, list) else []
    causes: Causes = []
    if policy == "SingleStack":
        for several, what in ((ips, "cluster IPs"), (families, "IP families")):
            if len(several) == 2:
                causes.append(_invalid_go("spec.ipFamilyPolicy", quote(policy),
                                          f"must be 'RequireDualStack' or 'PreferDualStack' when multiple {what} "
                                          "are specified"))
        if causes:
            return causes
    if policy == "RequireDualStack":
        causes.append(_invalid_go("spec.ipFamilyPolicy", quote(policy), "this cluster is not configured for "
                                  "dual-stack services"))
    for i, family in enumerate(families):
        if family == "IPv6":  # (another name is no family: validation's NotSupported)
            causes.append(_invalid_go(f"spec.ipFamilies[{i}]", quote(family), "not configured on this cluster"))
    return causes


ServiceRanges = Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]


def service_allocation_causes(svc: dict[str, Any], old: dict[str, Any] | None,
                              ranges: ServiceRanges = (SERVICE_CIDR,)) -> Causes:
    """What kube-apiserver's allocators refuse in a Service's write before they look at
    what is taken: a cluster IP out of every range (``ranges``: the ServiceCIDRs') or a node
    port out of its range; those it held already are its own. (A taken one is refused as
    it is claimed: ``taken_*_cause``.)"""
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return []
    old_spec = (old or {}).get("spec") or {}
    causes: Causes = []
    ips = spec.get("clusterIPs")
    ips = ips if isinstance(ips, list) else []
    held = old_spec.get("clusterIPs") or ()
    for ip in ips if spec.get("type") != "ExternalName" else ():
        if not isinstance(ip, str) or ip in ("", "None") or ip in held:
            continue
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            continue
        if not any(address in r and address not in (r.network_address, r.broadcast_address) for r in ranges):
            problem = f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
            causes.append(_invalid_go("spec.clusterIPs", _go_strings(ips), f"failed to allocate IP {ip}: {problem}"))
            return causes
    held_ports = {p.get("nodePort") for p in old_spec.get("ports") or () if isinstance(p, dict)}
    for i, port in enumerate(spec.get("ports") or ()):
        node_port = port.get("nodePort") if isinstance(port, dict) else None
        if not isinstance(node_port, int) or isinstance(node_port, bool) or not node_port or node_port in held_ports:
            continue
        if node_port not in NODE_PORTS:
            problem = ("provided port is not in the valid range. The range of valid ports is "
                       f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}")
            causes.append(_invalid_go(f"spec.ports[{i}].nodePort", str(node_port), problem))
    return causes


def health_check_port_causes(svc: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """A requested ``healthCheckNodePort`` out of the node port range, refused in upstream's
    allocator's words (allocHealthCheckNodePort: ``provided port is not in the valid range``);
    asked only when the Service comes to need one (a Local LoadBalancer, not one before), as
    upstream's updateHealthCheckNodePort. Upstream answers it as a 500 (its allocator's error
    through NewInternalError); here it is the 422 of the node ports' same refusal: bad input is
    never a 500 on this server (docs/api-compatibility.md)."""
    spec = svc.get("spec")
    if not isinstance(spec, dict) or not _needs_health_check(spec):
        return []
    port = spec.get("healthCheckNodePort")
    if not isinstance(port, int) or isinstance(port, bool) or not port or port in NODE_PORTS:
        return []
    old_spec = (old or {}).get("spec")
    if isinstance(old_spec, dict) and _needs_health_check(old_spec):
        return []  # kept (an update may not change it: immutable)
    return [_invalid_go("spec.healthCheckNodePort", str(port),
                        f"provided port is not in the valid range. The range of valid ports is "
                        f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}")]


def taken_health_check_port(svc: dict[str, Any], port: int) -> Causes:
    """The allocator's refusal of a requested ``healthCheckNodePort`` another Service holds, when
    no ``nodePort`` of the Service asks for it too (those are refused first); a 422, as above."""
    spec = svc.get("spec") or {}
    if spec.get("healthCheckNodePort") != port or any(
            isinstance(p, dict) and p.get("nodePort") == port for p in spec.get("ports") or ()):
        return []
    return [_invalid_go("spec.healthCheckNodePort", str(port), "provided port is already allocated")]


def _needs_health_check(spec: dict[str, Any]) -> bool:
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def taken_ip_cause(svc: dict[str, Any], ip: str) -> dict[str, str]:
    """The allocator's refusal of a requested cluster IP another Service holds."""
    ips = (svc.get("spec") or {}).get("clusterIPs")
    return _invalid_go("spec.clusterIPs", _go_strings(ips if isinstance(ips, list) else [ip]),
                       f"failed to allocate IP {ip}: provided IP is already allocated")


def taken_port_causes(svc: dict[str, Any], port: int) -> Causes:
    """The allocator's refusal of a requested node port another Service holds (each ``nodePort``
    asking it; a ``healthCheckNodePort`` alone: ``taken_health_check_port``)."""
    spec = svc.get("spec") or {}
    return [_invalid_go(f"spec.ports[{i}].nodePort", str(port), "provided port is already allocated")
            for i, p in enumerate(spec.get("ports") or ()) if isinstance(p, dict) and p.get("nodePort") == port]


def _invalid_go(field: str, shown: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}: {message}"}


def _default_secret(secret: dict[str, Any]) -> None:
    fill(secret, "type", "Opaque")


_DEFAULTERS = {"pods": _default_pod, "services": _default_service, "secrets": _default_secret}


def default(plural: str, obj: dict[str, Any]) -> None:
    """Fill in the defaults kube-apiserver applies at create (in place)."""
    f = _DEFAULTERS.get(plural)
    if f is not None:
        f(obj)


# (group, plural) of the types whose strategy allows an update (PUT) of a missing
# object to create it (upstream's AllowCreateOnUpdate): a kubelet's first Lease
# renewal, an event recorder, the endpoints controller, RBAC reconcilers
CREATE_ON_UPDATE = frozenset({
    ("coordination.k8s.io", "leases"), ("", "events"), ("events.k8s.io", "events"), ("", "endpoints"),
    ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"), ("rbac.authorization.k8s.io", "clusterrolebindings"),
})


# -- every write ------------------------------------------------------------------
class BadData(ValueError):
    """A body the API cannot decode into its type (a 400, as a decoding error upstream)."""


Causes = list[dict[str, str]]

_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")
_MAX_CONFIG_BYTES = 1024 * 1024  # a ConfigMap's or Secret's data, all keys and values
_NAME_LABEL = "kubernetes.io/metadata.name"
# the keys a typed Secret must hold (upstream's ValidateSecret)
_SECRET_KEYS = {"kubernetes.io/tls": ("tls.crt", "tls.key"),
                "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
                "kubernetes.io/dockercfg": (".dockercfg",),
                "kubernetes.io/ssh-auth": ("ssh-privatekey",)}


def _invalid(field: str, value: object, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {value!r}: {message}"
            if not isinstance(value, str) else f'Invalid value: "{value}": {message}'}


def _decoded_size(value: str) -> int:
    """The bytes a base64 value decodes to (upstream counts a Secret's data and a ConfigMap's
    binaryData decoded: they are []byte)."""
    return len(value) * 3 // 4 - (2 if value.endswith("==") else 1 if value.endswith("=") else 0)


def _config_data(obj: dict[str, Any], old: dict[str, Any] | None, binary: tuple[str, ...],
                 encoded: tuple[str, ...] = ("binaryData",), size_field: str = "") -> Causes:
    """Keys, size and immutability of a ConfigMap's or a Secret's data fields. The size is
    upstream's: the values' bytes (keys not counted; the ``encoded`` fields decoded), at most
    1 MiB, reported at ``size_field`` (a ConfigMap's whole object, a Secret's ``data``)."""
    causes: Causes = []
    size = 0
    for field in binary:
        data = obj.get(field)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise BadData(f"{field} must be an object")
        for k, v in data.items():
            if not _CONFIG_KEY.match(k):
                causes.append(_invalid(f"{field}[{k}]", k, "a valid config key must consist of alphanumeric "
                                       "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                                       "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"))
            if isinstance(v, str):
                size += _decoded_size(v) if field in encoded else len(v.encode())
    if size > _MAX_CONFIG_BYTES:
        causes.append({"reason": "FieldValueTooLong", "field": size_field,
                       "message": f"Too long: may not be more than {_MAX_CONFIG_BYTES} bytes"})  # (since 1.32)
    if old is not None and old.get("immutable") is True:
        for field in (*binary, "immutable"):
            if obj.get(field) != old.get(field):
                causes.append({"reason": "FieldValueForbidden", "field": field,
                               "message": "Forbidden: field is immutable when `immutable` is set"})
    return causes


def _prepare_configmap(cm: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    causes = _config_data(cm, old, ("data", "binaryData"))
    for k in set(cm.get("data") or ()) & set(cm.get("binaryData") or ()):
        causes.append(_invalid(f"data[{k}]", k, "duplicate of key present in binaryData"))
    return causes


def _prepare_secret(secret: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """``stringData`` merged into ``data`` (base64, the stringData value winning), as the
    v1 conversion does; ``data`` values must be base64; typed secrets hold their keys. A
    write without ``type`` gets ``Opaque`` (decode-time default, on every write as upstream)."""
    if not secret.get("type"):
        secret["type"] = "Opaque"
    string_data = secret.pop("stringData", None)
    data = secret.get("data")
    if data is not None and not isinstance(data, dict):
        raise BadData("data must be an object")
    for k, v in (data or {}).items():
        if not isinstance(v, str):
            raise BadData(f"Secret in version \"v1\" cannot be handled as a Secret: data[{k}] must be a "
                          "base64 string")
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as e:
            raise BadData(f"Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in "
                          f"data[{k}]") from e
    if string_data:
        if not isinstance(string_data, dict):
            raise BadData("stringData must be an object")
        merged = dict(data or {})
        for k, v in string_data.items():
            merged[k] = base64.b64encode(str(v).encode()).decode()
        secret["data"] = merged
    causes = _config_data(secret, old, ("data",), encoded=("data",), size_field="data")
    causes += _typed_secret_causes(secret)
    if old is not None and old.get("type") not in (None, secret.get("type")):
        causes.append({"reason": "FieldValueInvalid", "field": "type",
                       "message": f'Invalid value: "{secret.get("type")}": field is immutable'})
    return causes


def _typed_secret_causes(secret: dict[str, Any]) -> Causes:
    """``ValidateSecret``'s rules by type: the keys a type must hold (a basic-auth secret one of
    its two), a docker config that is a JSON object, a service account token's account."""
    kind, data = secret.get("type") or "", secret.get("data") or {}
    causes: Causes = []
    if kind == "kubernetes.io/service-account-token":
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        if not annotations.get("kubernetes.io/service-account.name"):
            causes.append({"reason": "FieldValueRequired", "field":
                           "metadata.annotations[kubernetes.io/service-account.name]", "message": "Required value"})
    elif kind == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        causes += [{"reason": "FieldValueRequired", "field": f"data[{k}]", "message": "Required value"}
                   for k in ("username", "password")]
    for key in _SECRET_KEYS.get(kind, ()):
        if key not in data or (kind == "kubernetes.io/ssh-auth" and not data[key]):
            causes.append({"reason": "FieldValueRequired", "field": f"data[{key}]", "message": "Required value"})
        elif kind in ("kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg"):
            problem = _json_object_problem(base64.b64decode(data[key]))
            if problem:
                causes.append(_invalid(f"data[{key}]", "<secret contents redacted>", problem))
    return causes


def _json_object_problem(raw: bytes) -> str | None:
    """Why Go's ``json.Unmarshal`` of ``raw`` into a map fails, in its words for the usual
    cases (its exact offsets and expectations are not reproduced), or None."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        text = raw.decode(errors="replace").strip()
        pos = e.pos if isinstance(e, json.JSONDecodeError) else 0
        if pos >= len(text):
            return "unexpected end of JSON input"
        if isinstance(e, json.JSONDecodeError) and e.msg == "Extra data":
            return f"invalid character {text[pos]!r} after top-level value"
        return f"invalid character {text[pos]!r} looking for beginning of value"
    if not isinstance(value, dict) and value is not None:
        kind = {list: "array", str: "string", bool: "bool"}.get(type(value), "number")
        return f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    return None


def _prepare_namespace(ns: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """Every namespace is labelled with its name (namespaceSelectors rely on it)."""
    meta = ns.setdefault("metadata", {})
    if isinstance(meta, dict) and meta.get("name"):
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels[_NAME_LABEL] = meta["name"]
    return []


_PREPARERS: dict[str, Callable[[dict[str, Any], dict[str, Any] | None], Causes]] = {
    "configmaps": _prepare_configmap, "secrets": _prepare_secret, "namespaces": _prepare_namespace,
}


def _prepare_pod(pod: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """A created pod (an update never comes here): its label keys merged into its
    selectors, as upstream's PrepareForCreate does before validation, then its causes in
    ``ValidatePodCreate``'s order: its annotations', its spec's, its AppArmor annotations'
    agreement with its fields (the AppArmor version skew was applied before: ``api/rest.py``)."""
    merge_label_keys(pod)
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not annotations or not isinstance(annotations, dict) or not concerned(annotations):
        causes = pod_spec_causes(spec, "spec", pod=True)
        annotations = None
    else:
        causes = annotation_causes(annotations, spec) + pod_spec_causes(spec, "spec", pod=True)
    if spec.get("ephemeralContainers"):  # only through the ephemeralcontainers subresource
        causes.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if spec.get("nodeName") and spec.get("schedulingGates"):
        causes.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return causes + create_causes(annotations, spec) if annotations is not None else causes


_PREPARERS["pods"] = _prepare_pod


def _prepare_event(event: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """An Event as Go writes it back: its source (events.k8s.io/v1: ``deprecatedSource``) is
    a struct, which Go writes even when empty: ``{}``, never missing (the Python client reads
    a missing one as None, where code reads ``event.source.component``); its times are
    ``metav1.Time``/``MicroTime`` structs too, whose zero Go writes as ``null`` whatever the
    ``omitempty``; and core/v1's ``reportingComponent`` and ``reportingInstance`` have no
    ``omitempty``: ``""``. So a client reading a dict (kr8s, kopf) finds every one of them,
    as against kube-apiserver (the events.k8s.io/v1 view: ``conversion.EventsV1``)."""
    times: tuple[str, ...]
    strings: tuple[str, ...]
    if event.get("apiVersion") == "events.k8s.io/v1":
        source, times, strings = "deprecatedSource", _EVENT_V1_TIMES, ()
    else:
        source, times, strings = "source", _EVENT_TIMES, _EVENT_STRINGS
    if event.get(source) is None:
        event[source] = {}
    for field in times:
        event.setdefault(field, None)
    for field in strings:
        if event.get(field) is None:
            event[field] = ""
    return []


# the Time and MicroTime fields of a core/v1 Event and of an events.k8s.io/v1 one (whose
# eventTime is required), and core/v1's strings without omitempty
_EVENT_TIMES = ("firstTimestamp", "lastTimestamp", "eventTime")
_EVENT_V1_TIMES = ("deprecatedFirstTimestamp", "deprecatedLastTimestamp")
_EVENT_STRINGS = ("reportingComponent", "reportingInstance")


_PREPARERS["events"] = _prepare_event
_PREPARERS["services"] = lambda svc, old: \
    service_family_causes(svc) or service_causes(svc) + service_ip_causes(svc, old)  # (the allocator's first)
_PREPARERS.update({
    "persistentvolumeclaims": prepare_claim, "persistentvolumes": prepare_volume,
    "storageclasses": prepare_storage_class, "resourcequotas": prepare_resource_quota,
    "limitranges": prepare_limit_range, "horizontalpodautoscalers": prepare_horizontal_pod_autoscaler,
    "ingresses": prepare_ingress, "ingressclasses": prepare_ingress_class,
    "networkpolicies": prepare_network_policy, "endpointslices": prepare_endpoint_slice,
    "mutatingwebhookconfigurations": prepare_webhook_configuration,
    "validatingwebhookconfigurations": prepare_webhook_configuration,
    "validatingadmissionpolicies": prepare_validating_admission_policy,
    "validatingadmissionpolicybindings": prepare_validating_admission_policy_binding,
    "mutatingadmissionpolicies": prepare_mutating_admission_policy,
    "mutatingadmissionpolicybindings": prepare_mutating_admission_policy_binding,
    "podgroups": prepare_podgroup, "workloads": prepare_scheduling_workload,
    "servicecidrs": prepare_service_cidr, "ipaddresses": prepare_ip_address,
})
_PREPARERS.update({
    "csidrivers": prepare_csi_driver, "csinodes": prepare_csi_node,
    "csistoragecapacities": prepare_csi_storage_capacity, "volumeattachments": prepare_volume_attachment,
    "volumeattributesclasses": prepare_volume_attributes_class,
})
_PREPARERS.update({"nodes": prepare_node, "endpoints": prepare_endpoints, "podtemplates": prepare_pod_template})
_PREPARERS.update({"apiservices": prepare_apiservice, "flowschemas": prepare_flow_schema,
                   "prioritylevelconfigurations": prepare_priority_level})
_PREPARERS.update({
    "poddisruptionbudgets": prepare_pod_disruption_budget, "leases": prepare_lease,
    "priorityclasses": prepare_priority_class, "runtimeclasses": prepare_runtime_class,
    "roles": prepare_role, "clusterroles": prepare_cluster_role,
    "rolebindings": prepare_role_binding, "clusterrolebindings": prepare_cluster_role_binding,
})
_PREPARERS.update({  # resource.k8s.io/v1 (registry/dra.py, registry/resourceslices.py, registry/devicetaintrules.py)
    "deviceclasses": prepare_device_class, "resourceclaims": prepare_resource_claim,
    "resourceclaimtemplates": prepare_resource_claim_template, "resourceslices": prepare_resource_slice,
    "devicetaintrules": prepare_device_taint_rule,
})
_PREPARERS["clustertrustbundles"] = prepare_cluster_trust_bundle  # registry/trustbundles.py
_PREPARERS["podcertificaterequests"] = prepare_pod_certificate_request  # registry/podcertificates.py
_PREPARERS["storageversionmigrations"] = prepare_storage_version_migration  # registry/storagemigration.py


def _cron_job_causes(cj: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """A CronJob's schedule and time zone must parse (upstream's validation); a new one's name
    leaves room for the 11 characters its Jobs' names add (at most 52)."""
    from .cron import CronError, parse

    spec = cj.get("spec") or {}
    causes: Causes = []
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule:
        causes.append({"reason": "FieldValueRequired", "field": "spec.schedule", "message": "Required value"})
    elif "TZ=" in schedule or "CRON_TZ=" in schedule:
        causes.append(_invalid("spec.schedule", schedule,
                               "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    else:
        try:
            parse(schedule)
        except CronError as e:
            causes.append(_invalid("spec.schedule", schedule, str(e)))
    zone = spec.get("timeZone")
    if zone is not None:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(str(zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            causes.append(_invalid("spec.timeZone", zone, "unknown time zone " + str(zone)))
    name = (cj.get("metadata") or {}).get("name") or ""
    if old is None and isinstance(name, str) and len(name) > 52:  # ValidateCronJobCreate: room for a Job's suffix
        causes.append(_invalid("metadata.name", name, "must be no more than 52 characters"))
    return causes


def prepare(plural: str, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str = "") -> Causes:
    """What every write (``old`` None: a create) of a built-in type goes through: ``obj``
    normalised in place, and the causes of a 422 Invalid. Raises ``BadData`` (a 400).
    ``subresource``: the write's (``status``: a pod's annotations are checked once)."""
    if plural in WORKLOADS:
        prepare_workload(plural, obj, old)
        causes = workload_spec_causes(plural, obj, old)
        if old is not None and plural in STATUS_VALIDATED and obj.get("status") is not old.get("status"):
            causes += workload_status_causes(plural, obj.get("status"), old.get("status"))  # a status write
        labels = (obj.get("metadata") or {}).get("labels")
        if plural == "jobs" and old is None and isinstance(labels, dict):  # those SetDefaults_Job copied from
            causes = labels_causes(labels, "metadata.labels") + causes  # its template (the job's name, too long)
        return causes + (_cron_job_causes(obj, old) if plural == "cronjobs" else workload_causes(plural, obj, old))
    if old is not None and plural == "pods":
        spec, old_spec = obj.get("spec"), old.get("spec")
        if spec is None and isinstance(old_spec, dict):
            # a spec left out (a PUT without it, a merge patch's null, a JSON patch's remove) is
            # the zero PodSpec Go decodes, validated as any other: not the stored spec kept
            spec = obj["spec"] = {}
        status, old_status = obj.get("status"), old.get("status")
        status_causes: Causes = []
        if isinstance(status, dict) and status is not old_status:  # ValidatePodStatusUpdate
            old_status = old_status if isinstance(old_status, dict) else {}
            status_causes = pod_status_causes(status, old_status, old_spec if isinstance(old_spec, dict) else {}) + \
                pod_status_ip_causes(status, old_status) + \
                pod_user_causes(status, spec if isinstance(spec, dict) else {})
        # ValidatePodSpecificAnnotationUpdates: where the annotations changed, the AppArmor and mirror
        # pod annotations fixed; then, on every update, the new annotations checked as a create's
        # (ValidatePodSpecificAnnotations), unchanged ones too, but for the create-only agreement of
        # the AppArmor and seccomp annotations with the fields (create_causes)
        meta, old_meta = obj.get("metadata"), old.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        old_annotations = old_meta.get("annotations") if isinstance(old_meta, dict) else None
        checked: Causes = []
        fixed: Causes = []
        if annotations != old_annotations and (annotations or old_annotations):
            fixed = update_causes(annotations if isinstance(annotations, dict) else {},
                                  old_annotations if isinstance(old_annotations, dict) else {})
        if annotations and isinstance(annotations, dict) and concerned(annotations):
            # (AllowInvalidPodDeletionCost: a pod stored with an invalid cost may keep it, or another)
            invalid_cost = isinstance(old_annotations, dict) and DELETION_COST in old_annotations and \
                not valid_deletion_cost(old_annotations[DELETION_COST])
            checked = annotation_causes(annotations, spec if isinstance(spec, dict) else {}, invalid_cost=invalid_cost)
        fixed += checked
        if spec is old_spec or not isinstance(spec, dict) or not isinstance(old_spec, dict):
            if subresource == "status":  # ValidatePodStatusUpdate: the annotations once, first
                return fixed + status_causes
            return status_causes + checked + fixed  # (ValidatePodUpdate: twice)
        # an update is defaulted as upstream decodes it, and DefaultTolerationSeconds admits
        # it as it admits a create: what is stored has the defaults a PUT or patch left out
        # (the ServiceAccount admission gave it too)
        if not spec.get("serviceAccountName") and not spec.get("serviceAccount") and old_spec.get("serviceAccountName"):
            spec["serviceAccountName"] = old_spec["serviceAccountName"]
        _default_pod(obj)
        spec = obj["spec"]
        if spec == old_spec:
            return checked + fixed
        return status_causes + checked + pod_spec_causes(spec, "spec", pod=True, old=old_spec) + fixed + \
            pod_update_causes(spec, old_spec)
    if old is not None and plural == "services":
        causes = service_update_causes(obj, old)
        if not causes and obj.get("spec") is not old.get("spec"):
            _default_service(obj)  # what a new type needs: node ports, a cluster IP, traffic policies
            causes = service_family_causes(obj) or service_causes(obj) + service_ip_causes(obj, old)
        return causes + load_balancer_ip_causes(obj, old)
    f = _PREPARERS.get(plural)
    try:
        return f(obj, old) if f is not None else []
    except BadQuantity as e:
        raise BadData(str(e)) from e


# a type's WarningsOnCreate and WarningsOnUpdate, where upstream's strategy has them
_WARNERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {"endpoints": endpoints_warnings,
                                                               "services": service_warnings}


# the workloads whose strategies warn of a name that is no DNS label (pods' own words differ)
_NAMED_FOR_PODS = frozenset({"pods", "deployments", "replicasets", "replicationcontrollers", "jobs", "cronjobs"})


def warnings(plural: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
             subresource: str | None = None) -> list[str]:
    """The warnings a valid write of a built-in type gets (its strategy's ``WarningsOnCreate``,
    ``WarningsOnUpdate``; ``old`` None: a create), once prepared. A pod's are its spec's
    (``GetWarningsForPod``), at its create only; a workload's its template's, on an update
    only when the generation moved, as upstream's strategies; a status (or other subresource's) write
    gets none, a scale's is the workload's own update."""
    if subresource not in (None, "scale"):  # (a scale's write is the main strategy's)
        return []
    f = _WARNERS.get(plural)
    if f is not None:
        return f(obj)
    if plural == "ingresses":
        return ingress_warnings(obj) if old is None else []
    if plural == "persistentvolumeclaims":
        return claim_warnings(obj)
    if plural != "pods" and plural not in TEMPLATES:
        return []
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    out: list[str] = []
    if old is None and plural in _NAMED_FOR_PODS:
        # a name still to be generated is its prefix (cut to 58, as upstream's generator) and
        # five random letters and digits, which upstream names before the warnings are made
        name = str(meta.get("name") or "") or (str(meta.get("generateName") or "")[:58] + "x" * 5)
        out = name_warning(plural, name)
    if plural == "pods":  # (upstream skips a pod's updates: frequent, and seldom a human's)
        return out + pod_warnings(obj.get("spec") or {}, meta) if old is None else []
    if old is not None and meta.get("generation") == (old.get("metadata") or {}).get("generation"):
        return out
    if plural in _JOB_SPECS:
        out = out + _job_spec_warnings(obj, plural)
    return out + template_warnings(plural, obj)


_JOB_SPECS = {"jobs": "spec", "cronjobs": "spec.jobTemplate.spec"}


def _job_spec_warnings(obj: dict[str, Any], plural: str) -> list[str]:
    """``WarningsForJobSpec`` (pkg/api/job) but its template's: an Indexed Job of more than
    10^5 completions and a parallelism above 10^4 (which validation takes without
    ``backoffLimitPerIndex``)."""
    spec: Any = obj.get("spec")
    if plural == "cronjobs" and isinstance(spec, dict):
        template = spec.get("jobTemplate")
        spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict) or spec.get("completionMode") != "Indexed":
        return []
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if (isinstance(completions, int) and completions > 100_000 and isinstance(parallelism, int)
            and parallelism > 10_000):
        return [f"{_JOB_SPECS[plural]}: In Indexed Jobs with a number of completions higher than 10^5 and a "
                "parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big "
                "number of indexes fail"]
    return []


# -- labels and annotations (every object) ------------------------------------------
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_MAX_ANNOTATIONS = 256 * 1024


def _qualified_name(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``prefix/name``), each problem as upstream's
    ``IsQualifiedName`` (since 1.34 ``content.IsLabelKey``) words it; empty when it is one."""
    return label_key_problems(key)


def _owner_reference_causes(owners: list[Any]) -> Causes:
    causes: Causes = []
    controller = ""
    for ref in owners:
        if not isinstance(ref, dict):
            continue
        api_version = str(ref.get("apiVersion") or "")
        version = api_version.rpartition("/")[2]
        for field, value, what in (("apiVersion", api_version, "version"), ("kind", ref.get("kind"), "kind"),
                                   ("name", ref.get("name"), "name"), ("uid", ref.get("uid"), "uid")):
            if not (version if field == "apiVersion" else value):
                causes.append(_invalid(f"metadata.ownerReferences.{field}", str(value or ""),
                                       f"{what} must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            causes.append(_invalid("metadata.ownerReferences", json.dumps(ref, separators=(",", ":")),
                                   "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            name = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                causes.append(_invalid("metadata.ownerReferences", json.dumps(owners, separators=(",", ":")),
                                       'Only one reference can have Controller set to true. Found "true" in '
                                       f"references for {controller} and {name}"))
            else:
                controller = name
    return causes


def _go_strings(values: list[Any]) -> str:
    """A []string as Go's ``%v`` prints it in a field error: ``[]string{"a", "b"}``."""
    return "[]string{" + ", ".join(quote(str(v)) for v in values) + "}"


def validate_metadata(meta: dict[str, Any], old: dict[str, Any] | None = None) -> Causes:
    """The causes for a 422 in an object's labels, annotations, finalizers and owner
    references, as upstream's ValidateLabels, ValidateAnnotations, ValidateFinalizers,
    ValidateOwnerReferences and (``old``: the stored metadata of an update)
    ValidateNoNewFinalizers: qualified-name keys and finalizers, label values of at most 63
    characters of the label syntax, annotations at most 256 KiB in all, owner references
    complete with one controller at most, and no finalizer added once deletion began."""
    causes: Causes = []
    owners = meta.get("ownerReferences")
    if isinstance(owners, list) and owners:
        causes += _owner_reference_causes(owners)
    if old is not None and old.get("deletionTimestamp") and isinstance(meta.get("finalizers"), list):
        kept = set(old.get("finalizers") or ())
        added = [f for f in meta["finalizers"] if f not in kept]
        if added:
            causes.append({"reason": "FieldValueForbidden", "field": "metadata.finalizers",
                           "message": "Forbidden: no new finalizers can be added if the object is being deleted, "
                                      f"found new finalizers {_go_strings(added)}"})
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            causes.extend(_invalid("metadata.labels", k, why) for why in _qualified_name(k))
            if isinstance(v, str):
                if len(v) > 63:
                    causes.append(_invalid("metadata.labels", v, "must be no more than 63 characters"))
                elif not _LABEL_VALUE.match(v):
                    causes.append(_invalid("metadata.labels", v, "a valid label must be an empty string or consist "
                                           "of alphanumeric characters, '-', '_' or '.', and must start and end "
                                           "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                                           "'12345', regex used for validation is "
                                           "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"))
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):  # ValidateFinalizers: qualified names, not both dependents' policies
        for f in finalizers:
            if isinstance(f, str):
                causes.extend(_invalid("metadata.finalizers", f, why) for why in _qualified_name(f))
        if "orphan" in finalizers and "foregroundDeletion" in finalizers:
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.finalizers",
                           "message": f"Invalid value: {_go_strings(finalizers)}: finalizer orphan and "
                                      "foregroundDeletion cannot be both set"})
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and annotations:
        size = 0
        for k, v in annotations.items():
            causes.extend(_invalid("metadata.annotations", k, why) for why in _qualified_name(k.lower()))
            size += len(k.encode()) + (len(v.encode()) if isinstance(v, str) else 0)  # Go's len: bytes
        if size > _MAX_ANNOTATIONS:
            causes.append({"reason": "FieldValueTooLong", "field": "metadata.annotations",
                           "message": f"Too long: may not be more than {_MAX_ANNOTATIONS} bytes"})
    return causes
