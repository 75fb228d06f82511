"""Upstream's validation of the core/v1 kinds that had none here: Nodes, Endpoints and
PodTemplates (``pkg/apis/core/validation``: ``ValidateNode``/``ValidateNodeUpdate``,
``ValidateEndpoints``, ``ValidatePodTemplate``), with their field paths and words::

    node_causes(node, None)        # [{'field': 'metadata.taints[0].effect', 'reason': 'FieldValueNotSupported', ...}]
    endpoints_causes(endpoints)    # [{'field': 'subsets[0].addresses[0].ip', ...}]
    pod_template_causes(template)  # [{'field': 'template.spec.containers', ...}]

A bad value that is a struct or a list is shown as JSON, as apimachinery's field errors
show one (its Go field names, the internal type having no JSON tags). Upstream's quirks
are kept, since clients see them: a Node's taints are reported under
``metadata.taints`` (its validator hands the taints the metadata's path), its pod CIDRs
are checked for form only at create (an update checks only that set ones do not change),
and an Endpoints address that is not an IP is reported twice (``IsValidIP`` and
``ValidateNonSpecialIP`` each say so).

An Endpoints address is read as a legacy field (``IsValidIPForLegacyField``) with the
StrictIPCIDRValidation gate on, as 1.36 on (KEP-4858, ``ipfields``): an IPv4 address with
leading zeros (``010.1.2.3``) or an IPv4-mapped IPv6 one (``::ffff:1.2.3.4``) is refused,
unless an update leaves the subsets as they were (one written before keeps them, with
upstream's warning, ``endpoints_warnings``); an IPv6 address not in RFC 5952 form is
accepted, with the canonical one in a warning. A Node's pod CIDRs are legacy fields too.

Cheap where it is hot: a Node's status is written by every kubelet, so an update checks
its capacity and taints only when they changed from the stored version's, and nothing
here parses an object that has not got the field it checks.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from typing import Any

import orjson

from ..quantity import QuantityError, parse_quantity
from .causes import Causes, cause, duplicate, forbidden, invalid, not_supported, required
from .ipfields import BAD_IP, legacy_cidr_problems, parsed_ip, sloppy_network, strict_ip_problems
from .podspec import default_pod_spec
from .podvalidation import (
    dns_label_problems,
    label_key_problems,
    label_value_problems,
    labels_causes,
    pod_spec_causes,
    subdomain_problems,
)
from .volumes import BadQuantity

__all__ = ["ENDPOINTS_CONTROLLER", "ENDPOINTS_MANAGED_BY", "endpoint_ip_problems", "endpoints_causes",
           "endpoints_warnings", "ip_warning", "node_causes", "non_special_ip_causes",
           "non_special_ip_problems", "parsed_ip", "pod_template_causes", "port_protocol_causes",
           "prepare_endpoints", "prepare_node", "prepare_pod_template", "service_warnings"]

Obj = dict[str, Any]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # validateTaintEffect's order
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_CIDR_CHANGE = 'node updates may not change podCIDR except from "" to valid'
_PROVIDER_CHANGE = 'node updates may not change providerID except from "" to valid'
# helper.IsIntegerResourceName: these, and every extended resource
_INTEGER_RESOURCES = frozenset(("pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                                "configmaps", "persistentvolumeclaims", "services.nodeports",
                                "services.loadbalancers"))


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- Nodes ------------------------------------------------------------------------------------------
def prepare_node(node: Obj, old: Obj | None) -> Causes:
    """A Node's write: its pod CIDRs as the v1 conversion leaves them (``podCIDRs`` from
    ``podCIDR`` when only that is given, ``podCIDR`` the first of them), then its causes."""
    spec = node.get("spec")
    if isinstance(spec, dict) and (spec.get("podCIDR") or spec.get("podCIDRs")):
        cidrs = spec.get("podCIDRs")
        if not cidrs and isinstance(spec.get("podCIDR"), str):
            spec["podCIDRs"] = [spec["podCIDR"]]
        elif isinstance(cidrs, list) and cidrs and isinstance(cidrs[0], str):
            spec["podCIDR"] = cidrs[0]
    return node_causes(node, old)


def node_causes(node: Obj, old: Obj | None) -> Causes:
    """``ValidateNode`` (``old`` None: a create) or ``ValidateNodeUpdate``, but the metadata's
    checks, which every kind shares (``strategies.validate_metadata``)."""
    causes: Causes = []
    spec, status = _dict(node.get("spec")), _dict(node.get("status"))
    old_spec = _dict(old.get("spec")) if old is not None else None
    old_status = _dict(old.get("status")) if old is not None else None
    taints = spec.get("taints")
    if taints and (old_spec is None or taints != old_spec.get("taints")):
        _taints(_list(taints), "metadata.taints", causes)  # (upstream's path: the metadata's)
    for part in ("capacity", "allocatable"):
        values = status.get(part)
        if values and (old_status is None or values != old_status.get(part)):
            _node_resources(_dict(values), f"status.{part}", causes)
    if old_spec is None:
        cidrs = spec.get("podCIDRs")
        if cidrs:
            _pod_cidrs(_list(cidrs), causes)
        return causes
    assert old_status is not None
    addresses = status.get("addresses")
    if addresses and addresses != old_status.get("addresses"):
        seen: set[tuple[Any, Any]] = set()
        for i, a in enumerate(_list(addresses)):
            a = _dict(a)
            pair = (a.get("type") or "", a.get("address") or "")
            if pair in seen:
                shown = orjson.dumps({"Type": pair[0], "Address": pair[1]}).decode()
                causes.append({"reason": "FieldValueDuplicate", "field": f"status.addresses[{i}]",
                               "message": f"Duplicate value: {shown}"})
            seen.add(pair)
    old_cidrs = _list(old_spec.get("podCIDRs"))
    if old_cidrs:
        cidrs = _list(spec.get("podCIDRs"))
        if len(cidrs) != len(old_cidrs):
            causes.append(forbidden("spec.podCIDRs", _CIDR_CHANGE))
        else:
            causes.extend(forbidden("spec.podCIDRs", _CIDR_CHANGE) for a, b in zip(old_cidrs, cidrs, strict=True)
                          if a != b)
    old_provider = old_spec.get("providerID")
    if old_provider and old_provider != spec.get("providerID"):
        causes.append(forbidden("spec.providerID", _PROVIDER_CHANGE))
    if (spec.get("externalID") or "") != (old_spec.get("externalID") or ""):
        causes.append(forbidden("spec.externalID", "may not be updated"))
    return causes


def _taints(taints: list[Any], path: str, causes: Causes) -> None:
    """``validateNodeTaints``: a label key, a label value, a known effect, and no two with
    the same key and effect."""
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(taints):
        at = f"{path}[{i}]"
        t = _dict(t)
        key, value, effect = str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "")
        causes.extend(invalid(f"{at}.key", key, p) for p in label_key_problems(key))
        problems = label_value_problems(value)
        if problems:
            causes.append(invalid(f"{at}.value", value, ";".join(problems)))
        if not effect:
            causes.append(required(f"{at}.effect"))
        elif effect not in _EFFECTS:
            causes.append(not_supported(f"{at}.effect", effect, _EFFECTS))
        if (key, effect) in seen:
            shown = orjson.dumps({"Key": key, "Value": value, "Effect": effect, "TimeAdded": t.get("timeAdded")})
            causes.append({"reason": "FieldValueDuplicate", "field": at, "message": f"Duplicate value: "
                           f"{shown.decode()}: taints must be unique by key and effect pair"})
            continue
        seen.add((key, effect))


def _integer_resource(name: str) -> bool:
    """``IsIntegerResourceName``: the counted kinds and every extended resource (a domain
    outside kubernetes.io, not a request's ``requests.`` prefix)."""
    if name in _INTEGER_RESOURCES:
        return True
    domain, slash, _ = name.partition("/")
    return bool(slash) and not name.startswith("requests.") and \
        domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def _node_resources(values: Obj, path: str, causes: Causes) -> None:
    """``ValidateResourceQuantityValue`` of each: not negative, whole where it counts things.
    A value that is no quantity is the decoder's 400, as upstream's (``BadQuantity``)."""
    for name, text in values.items():
        try:
            q = parse_quantity(text)
        except QuantityError as e:
            raise BadQuantity(f"{path}.{name}: {e}") from e
        if q < 0:
            causes.append(invalid(f"{path}.{name}", str(text), "must be greater than or equal to 0"))
        if _integer_resource(name) and math.ceil(q * 1000) % 1000:  # (MilliValue rounds up)
            causes.append(invalid(f"{path}.{name}", str(text), "must be an integer"))


def _pod_cidrs(cidrs: list[Any], causes: Causes) -> None:
    """A create's pod CIDRs: each a CIDR, at most one of each family, none twice."""
    for i, c in enumerate(cidrs):
        causes.extend(invalid(f"spec.podCIDRs[{i}]", c, p) for p in legacy_cidr_problems(str(c)))
    if len(cidrs) < 2:
        return
    families: list[int] = []
    for c in cidrs:
        try:
            families.append(ipaddress.ip_network(str(c), strict=False).version)
        except ValueError:
            families.append(0)
    if len(cidrs) > 2 or sorted(families) != [4, 6]:
        causes.append(cause("FieldValueInvalid", "spec.podCIDRs",
                            f"Invalid value: {orjson.dumps(cidrs).decode()}: may specify no more than one CIDR "
                            f"for each IP family"))
    seen: set[Any] = set()
    for i, c in enumerate(cidrs):
        if c in seen:
            causes.append(duplicate(f"spec.podCIDRs[{i}]", c))
        seen.add(c)


# -- Endpoints --------------------------------------------------------------------------------------
def prepare_endpoints(endpoints: Obj, old: Obj | None) -> Causes:
    """An Endpoints' write: its ports' protocol defaulted (TCP), then its causes; an update
    that keeps the subsets keeps addresses the strict parse refuses. No subsets are none
    (``omitempty``: an empty list is not written back)."""
    if endpoints.get("subsets") == []:
        del endpoints["subsets"]
    for subset in _list(endpoints.get("subsets")):
        for port in _list(_dict(subset).get("ports")):
            if isinstance(port, dict) and not port.get("protocol"):
                port["protocol"] = "TCP"
    return endpoints_causes(endpoints, strict=old is None or endpoints.get("subsets") != old.get("subsets"))


def endpoints_causes(endpoints: Obj, strict: bool = True) -> Causes:
    """``validateEndpointSubsets``: each subset with an address, ready or not; each address
    a usable IP (not unspecified, loopback or link-local; ``strict``: no leading zeros, not
    IPv4-mapped), its hostname a DNS label and its node a node's name; each port valid,
    named when there are several."""
    causes: Causes = []
    for i, subset in enumerate(_list(endpoints.get("subsets"))):
        at, subset = f"subsets[{i}]", _dict(subset)
        ready, not_ready = _list(subset.get("addresses")), _list(subset.get("notReadyAddresses"))
        if not ready and not not_ready:
            causes.append(required(at, "must specify `addresses` or `notReadyAddresses`"))
        for field, addresses in (("addresses", ready), ("notReadyAddresses", not_ready)):
            for j, address in enumerate(addresses):
                _endpoint_address(_dict(address), f"{at}.{field}[{j}]", strict, causes)
        ports = _list(subset.get("ports"))
        for j, port in enumerate(ports):
            _endpoint_port(_dict(port), len(ports) > 1, f"{at}.ports[{j}]", causes)
    return causes


def _endpoint_address(address: Obj, at: str, strict: bool, causes: Causes) -> None:
    ip = str(address.get("ip") or "")
    problems = endpoint_ip_problems(ip, strict)
    if problems:
        causes.extend(invalid(f"{at}.ip", ip, p) for p in problems[0])
    hostname = address.get("hostname")
    if hostname and _label_problems(str(hostname)):
        causes.extend(invalid(f"{at}.hostname", hostname, p) for p in _label_problems(str(hostname)))
    node = address.get("nodeName")
    if node is not None and _subdomain_problems(str(node)):
        causes.extend(invalid(f"{at}.nodeName", node, p) for p in _subdomain_problems(str(node)))
    if problems:
        causes.extend(invalid(f"{at}.ip", ip, p) for p in problems[1])


# the label upstream's endpoints controller puts on the Endpoints it writes (1.33 on), whose
# addresses are then trusted to be canonical: no warnings are looked for
ENDPOINTS_MANAGED_BY = "endpoints.kubernetes.io/managed-by"
ENDPOINTS_CONTROLLER = "endpoint-controller"


def endpoints_warnings(endpoints: Obj) -> list[str]:
    """Upstream's ``endpointsWarnings``: an address in a form the strict validation will refuse,
    or an IPv6 one not canonical, each at its field path; none for the endpoints controller's."""
    labels = _dict(_dict(endpoints.get("metadata")).get("labels"))
    if labels.get(ENDPOINTS_MANAGED_BY) == ENDPOINTS_CONTROLLER:
        return []
    warnings: list[str] = []
    for i, subset in enumerate(_list(endpoints.get("subsets"))):
        for field in ("addresses", "notReadyAddresses"):
            for j, address in enumerate(_list(_dict(subset).get(field))):
                warning = ip_warning(str(_dict(address).get("ip") or ""))
                if warning is not None:
                    warnings.append(f"subsets[{i}].{field}[{j}].ip: {warning}")
    return warnings


def service_warnings(service: Obj) -> list[str]:
    """Upstream's ``GetWarningsForService`` (a Service's create and update, not its status's):
    the deprecated topology hints annotation, cluster, external and load balancer IPs not in
    standard form, external IPs (deprecated), source ranges not in standard form, fields a
    headless or ExternalName Service ignores, and the deprecated ``PreferClose`` traffic
    distribution."""
    spec = _dict(service.get("spec"))
    kind, cluster_ip = spec.get("type") or "ClusterIP", spec.get("clusterIP") or ""
    warnings: list[str] = []
    if "service.kubernetes.io/topology-aware-hints" in _dict(_dict(service.get("metadata")).get("annotations")):
        warnings.append("annotation service.kubernetes.io/topology-aware-hints is deprecated, please use "
                        "service.kubernetes.io/topology-mode instead")
    if cluster_ip and cluster_ip != "None":  # IsServiceIPSet
        for i, ip in enumerate(_list(spec.get("clusterIPs"))):
            warning = ip_warning(str(ip))
            if warning is not None:
                warnings.append(f"spec.clusterIPs[{i}]: {warning}")
    if kind == "ClusterIP" and cluster_ip == "None":
        if spec.get("loadBalancerIP"):
            warnings.append("spec.loadBalancerIP is ignored for headless services")
        if _list(spec.get("externalIPs")):
            warnings.append("spec.externalIPs is ignored for headless services")
        if (spec.get("sessionAffinity") or "None") != "None":
            warnings.append("spec.SessionAffinity is ignored for headless services")
    for i, ip in enumerate(_list(spec.get("externalIPs"))):
        warning = ip_warning(str(ip))
        if warning is not None:
            warnings.append(f"spec.externalIPs[{i}]: {warning}")
    if _list(spec.get("externalIPs")) and not (kind == "ClusterIP" and cluster_ip == "None") and kind != "ExternalName":
        warnings.append("spec.externalIPs is deprecated and may no longer be implemented in some clusters")
    if spec.get("loadBalancerIP"):
        warning = ip_warning(str(spec["loadBalancerIP"]))
        if warning is not None:
            warnings.append(f"spec.loadBalancerIP: {warning}")
    ranges = spec.get("loadBalancerSourceRanges")
    if ranges and isinstance(ranges, list):
        for i, cidr in enumerate(ranges):
            warnings += [f"spec.loadBalancerSourceRanges[{i}]: {w}" for w in cidr_warnings(str(cidr))]
    if kind == "ExternalName" and _list(spec.get("externalIPs")):
        warnings.append('spec.externalIPs is ignored when spec.type is "ExternalName"')
    if kind != "ExternalName" and spec.get("externalName"):
        warnings.append('spec.externalName is ignored when spec.type is not "ExternalName"')
    if spec.get("trafficDistribution") == "PreferClose":
        warnings.append('spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"')
    return warnings


@functools.lru_cache(maxsize=4096)
def ip_warning(text: str) -> str | None:
    """``GetWarningsForIP``'s words (after the field's path) for an address a legacy field
    takes, in 1.34's wording; None for one in standard form, or one refused anyway."""
    sloppy = parsed_ip(text)
    if sloppy is None:
        return None
    try:  # netip.ParseAddr: no leading zeros (a zone, which it takes, the sloppy parse refused)
        strict = ipaddress.ip_address(text)
    except ValueError:
        strict = None
    mapped = sloppy.ipv4_mapped if isinstance(sloppy, ipaddress.IPv6Address) else None
    if strict is None or mapped is not None:
        return (f'non-standard IP address "{text}" will be considered invalid in a future Kubernetes release: '
                f'use "{mapped or sloppy}"')  # (net.IP's String: a mapped address as the IPv4 one)
    if strict.version == 6 and str(strict) != text:
        return f'IPv6 address "{text}" should be in RFC 5952 canonical format ("{strict}")'
    return None


@functools.lru_cache(maxsize=4096)
def cidr_warnings(text: str) -> tuple[str, ...]:
    """``GetWarningsForCIDR``'s words (after the field's path) for a CIDR a legacy field takes:
    bits set beyond the prefix, a form ``netip.ParsePrefix`` refuses (leading zeros) or an
    IPv4-mapped one, else an IPv6 one not in RFC 5952 form; none for text that is no CIDR
    (validation's to refuse: upstream's value there is untrimmed)."""
    parsed = sloppy_network(text)
    if parsed is None:
        return ()
    ip, length = parsed
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    network = ipaddress.ip_network(f"{ip}/{length}", strict=False)
    net_address = network.network_address
    net_mapped = net_address.ipv4_mapped if isinstance(net_address, ipaddress.IPv6Address) else None
    # (net.IPNet's String: a mapped network as the IPv4 one, its length less 96)
    net_text = f"{net_mapped}/{max(length - 96, 0)}" if net_mapped is not None else str(network)
    out = []
    if net_address != ip:
        out.append(f'CIDR value "{text}" is ambiguous in this context (should be "{net_text}" or '
                   f'"{mapped or ip}/{ip.max_prefixlen}"?)')
    address, _, bits = text.partition("/")
    try:  # netip.ParsePrefix: no leading zeros, in the address or the length
        strict = ipaddress.ip_address(address) if bits == str(length) else None
    except ValueError:
        strict = None
    if strict is None or mapped is not None:
        out.append(f'non-standard CIDR value "{text}" will be considered invalid in a future Kubernetes release: '
                   f'use "{net_text}"')
    elif not out and strict.version == 6 and f"{strict}/{length}" != text:
        out.append(f'IPv6 CIDR value "{text}" should be in RFC 5952 canonical format ("{strict}/{length}")')
    return tuple(out)


# An Endpoints or EndpointSlice write names every address of the Service again (a controller
# rewrites them all on any pod's change), and Python's ipaddress takes tens of microseconds
# an address: a valid address's verdict is remembered, as are names'. Bounded, and cleared
# whole when full (a cluster's pod IPs are fewer).
_REMEMBERED = 1 << 16


@functools.lru_cache(maxsize=_REMEMBERED)
def endpoint_ip_problems(text: str, strict: bool = True) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """An Endpoints address's problems, None when it has none: ``IsValidIPForLegacyField``'s
    (Go's sloppy parse, then, ``strict``, netip's), then ``ValidateNonSpecialIP``'s, which
    upstream reports after the hostname's and the node name's."""
    if parsed_ip(text) is None:
        valid: tuple[str, ...] = (BAD_IP,)
    else:
        valid = strict_ip_problems(text) if strict else ()
    special = non_special_ip_problems(text)
    return (valid, special) if valid or special else None


@functools.lru_cache(maxsize=_REMEMBERED)
def _label_problems(value: str) -> tuple[str, ...]:
    return tuple(dns_label_problems(value))


@functools.lru_cache(maxsize=_REMEMBERED)
def _subdomain_problems(value: str) -> tuple[str, ...]:
    return tuple(subdomain_problems(value))


def non_special_ip_causes(text: str, field: str) -> Causes:
    """``ValidateNonSpecialIP``'s causes at ``field``."""
    return [invalid(field, text, p) for p in non_special_ip_problems(text)]


@functools.lru_cache(maxsize=_REMEMBERED)
def non_special_ip_problems(text: str) -> tuple[str, ...]:
    """``ValidateNonSpecialIP``: an address clients could reach, not the unspecified one,
    loopback, or link-local (unicast or multicast)."""
    ip = parsed_ip(text)
    if ip is None:
        return ("must be a valid IP address",)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    ip = mapped or ip
    problems: list[str] = []
    if ip.is_unspecified:
        problems.append(f"may not be unspecified ({text})")
    if ip.is_loopback:
        problems.append("may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if ip in _LINK_LOCAL_UNICAST[ip.version]:
        problems.append("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    if (ip.version == 4 and ip in _LINK_LOCAL_MULTICAST_V4) or \
            (ip.version == 6 and ip.packed[0] == 0xFF and ip.packed[1] & 0x0F == 0x02):
        problems.append("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")
    return tuple(problems)


_LINK_LOCAL_UNICAST = {4: ipaddress.ip_network("169.254.0.0/16"), 6: ipaddress.ip_network("fe80::/10")}
_LINK_LOCAL_MULTICAST_V4 = ipaddress.ip_network("224.0.0.0/24")


def _endpoint_port(port: Obj, named: bool, at: str, causes: Causes) -> None:
    name = port.get("name") or ""
    if named and not name:
        causes.append(required(f"{at}.name"))
    elif name:
        causes.extend(invalid(f"{at}.name", name, p) for p in dns_label_problems(str(name)))
    number = port.get("port")
    if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
        causes.append(invalid(f"{at}.port", number if isinstance(number, int) else 0, _PORT_RANGE))
    causes.extend(port_protocol_causes(port, at))


def port_protocol_causes(port: Obj, at: str) -> Causes:
    """An endpoint port's protocol (given, TCP, UDP or SCTP) and ``appProtocol`` (a qualified
    name), as Endpoints and EndpointSlices check them."""
    causes: Causes = []
    protocol = port.get("protocol") or ""
    if not protocol:
        causes.append(required(f"{at}.protocol"))
    elif protocol not in _PROTOCOLS:
        causes.append(not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
    app = port.get("appProtocol")
    if app is not None:
        causes.extend(invalid(f"{at}.appProtocol", app, p) for p in label_key_problems(str(app)))
    return causes


# -- PodTemplates -----------------------------------------------------------------------------------
def prepare_pod_template(pt: Obj, old: Obj | None) -> Causes:
    """A PodTemplate's write: its pod spec with a pod's defaults (as upstream decodes it),
    then its causes."""
    template = pt.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])
    return pod_template_causes(pt, old)


def pod_template_causes(pt: Obj, old: Obj | None = None) -> Causes:
    """``ValidatePodTemplateSpec`` at ``template``: its labels, a valid pod spec (the stored
    one's IPs kept, ``old``: an update's), and no ephemeral containers."""
    template = _dict(pt.get("template"))
    causes: Causes = []
    labels = _dict(template.get("metadata")).get("labels")
    if isinstance(labels, dict):
        causes.extend(labels_causes(labels, "template.labels"))
    spec = _dict(template.get("spec"))
    old_spec = _dict(_dict((old or {}).get("template")).get("spec"))
    causes.extend(pod_spec_causes(spec, "template.spec", old=old_spec))
    if spec.get("ephemeralContainers"):
        causes.append(forbidden("template.spec.ephemeralContainers",
                                "ephemeral containers not allowed in pod template"))
    return causes
