"""Ingresses, IngressClasses, NetworkPolicies and EndpointSlices: defaults and validation.

As upstream's strategies:

- an Ingress needs a ``defaultBackend`` or rules; each HTTP path needs a
  ``pathType`` (``Exact`` and ``Prefix`` paths start with ``/``) and a backend
  that is a service with a port name or number, or a resource, not both;
- an IngressClass needs its ``controller``, fixed once created;
- a NetworkPolicy's ports default to TCP, and its ``policyTypes`` to
  ``Ingress`` (plus ``Egress`` when it has egress rules);
- an EndpointSlice needs an ``addressType`` (IPv4, IPv6 or FQDN), fixed once
  created, and addresses of that type; its ports default to TCP and an empty name,
  and are named apart (``prepare_endpoint_slice``).

Their IPs and CIDRs are legacy fields with StrictIPCIDRValidation on (``ipfields``): a
NetworkPolicy's ``ipBlock`` CIDRs and an Ingress's load balancer IPs may keep a value the
stored object had; an EndpointSlice its addresses while its endpoints are unchanged.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any

from .corevalidation import non_special_ip_problems, port_protocol_causes
from .ipfields import (
    BAD_IP,
    cidr_causes,
    ip_value_causes,
    legacy_cidr_problems,
    parsed_ip,
    sloppy_network,
    strict_ip_problems,
)
from .podvalidation import dns_label_problems, labels_causes, subdomain_problems

__all__ = ["ingress_warnings", "load_balancer_ip_causes", "prepare_endpoint_slice", "prepare_ingress",
           "prepare_ingress_class", "prepare_network_policy"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")


def _required(field: str, detail: str = "") -> dict[str, str]:
    return {"reason": "FieldValueRequired", "field": field, "message": "Required value" + detail}


def _invalid(field: str, value: object, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f'Invalid value: "{value}": {message}'}


def _unsupported(field: str, value: object, allowed: tuple[str, ...]) -> dict[str, str]:
    shown = ", ".join(f'"{a}"' for a in allowed)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f'Unsupported value: "{value}": supported values: {shown}'}


def _backend(backend: Any, field: str) -> Causes:
    if not isinstance(backend, dict):
        return [_required(field)]
    service, resource = backend.get("service"), backend.get("resource")
    if service and resource:
        return [_invalid(field, "", "cannot set both resource and service backends")]
    if resource:
        return [] if resource.get("kind") and resource.get("name") else [_required(f"{field}.resource")]
    if not service:
        return [_required(field, ": one of service or resource must be specified")]
    name = service.get("name")
    # (a DNS label, as a Service's name since RelaxedServiceNameValidation, KEP-5311: a digit may lead)
    causes = [_invalid(f"{field}.service.name", name, p) for p in dns_label_problems(str(name))] if name \
        else [_required(f"{field}.service.name")]
    port = service.get("port") or {}
    if bool(port.get("name")) == bool(port.get("number")):
        causes.append(_invalid(f"{field}.service.port", port, "port name or number is required"
                               if not port.get("name") else "cannot set both port name & port number"))
    return causes


def ingress_warnings(ing: Obj) -> list[str]:
    """Upstream's Ingress ``WarningsOnCreate`` (none on update): the class annotation without
    ``spec.ingressClassName`` (which DefaultIngressClass admission leaves unset beside it)."""
    annotations = (ing.get("metadata") or {}).get("annotations") or {}
    if "kubernetes.io/ingress.class" in annotations and _spec(ing).get("ingressClassName") is None:
        return ["annotation \"kubernetes.io/ingress.class\" is deprecated, please use 'spec.ingressClassName' instead"]
    return []


def prepare_ingress(ing: Obj, old: Obj | None) -> Causes:
    spec = _spec(ing)
    causes: Causes = []
    rules = spec.get("rules") or []
    if not rules and not spec.get("defaultBackend"):
        causes.append(_invalid("spec", "", "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend"):
        causes += _backend(spec["defaultBackend"], "spec.defaultBackend")
    for i, rule in enumerate(rules):
        host = (rule or {}).get("host") if isinstance(rule, dict) else None
        if host and isinstance(host, str):
            causes += _host_causes(host, f"spec.rules[{i}].host", ip_refused=True)
        http = (rule or {}).get("http")
        if http is None:
            continue
        paths = http.get("paths") or []
        if not paths:
            causes.append(_required(f"spec.rules[{i}].http.paths"))
        for j, path in enumerate(paths):
            field = f"spec.rules[{i}].http.paths[{j}]"
            kind = path.get("pathType")
            if kind is None:
                causes.append(_required(f"{field}.pathType", ": pathType must be specified"))
            elif kind not in PATH_TYPES:
                causes.append(_unsupported(f"{field}.pathType", kind, PATH_TYPES))
            elif kind != "ImplementationSpecific" and not str(path.get("path", "")).startswith("/"):
                causes.append(_invalid(f"{field}.path", path.get("path", ""), "must be an absolute path"))
            causes += _backend(path.get("backend"), f"{field}.backend")
    for i, tls in enumerate(spec.get("tls") or ()):
        if not isinstance(tls, dict):
            continue
        for j, host in enumerate(tls.get("hosts") or ()):
            causes += _host_causes(str(host), f"spec.tls[{i}].hosts[{j}]", ip_refused=False)
        secret = tls.get("secretName")
        if secret and isinstance(secret, str):
            causes += [_invalid(f"spec.tls[{i}].secretName", secret, p) for p in subdomain_problems(secret)]
    class_name = spec.get("ingressClassName")
    if isinstance(class_name, str):
        causes += [_invalid("spec.ingressClassName", class_name, p) for p in subdomain_problems(class_name)]
    if old is not None:  # (a create's status is dropped; an update's is the stored one, or a status write's)
        causes += load_balancer_ip_causes(ing, old)
    return causes


_WILDCARD_HOST = re.compile(r"\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_WILDCARD_MESSAGE = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which "
                     "must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric "
                     "character (e.g. '*.example.com', regex used for validation is "
                     "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _host_causes(host: str, field: str, ip_refused: bool) -> Causes:
    """An Ingress rule's or TLS entry's host, as ``validateIngressRules`` and ``validateIngressTLS``:
    a rule's not an IP address; one with ``*`` a wildcard subdomain (``IsWildcardDNS1123Subdomain``),
    any other a DNS-1123 subdomain."""
    causes: Causes = []
    if ip_refused and parsed_ip(host) is not None:
        causes.append(_invalid(field, host, "must be a DNS name, not an IP address"))
    if "*" in host:
        problems = ["must be no more than 253 characters"] if len(host) > 253 else []
        if not _WILDCARD_HOST.match(host):
            problems.append(_WILDCARD_MESSAGE)
    else:
        problems = subdomain_problems(host)
    return causes + [_invalid(field, host, p) for p in problems]


def load_balancer_ip_causes(obj: Obj, old: Obj) -> Causes:
    """An Ingress's or a Service's status write: each ``status.loadBalancer.ingress[i].ip``
    a legacy field's (``ValidateLoadBalancerStatus``), the stored ones kept."""
    lb = _dict(_dict(obj.get("status")).get("loadBalancer"))
    old_lb = _dict(_dict(old.get("status")).get("loadBalancer"))
    ingress = lb.get("ingress")
    if not ingress or ingress == old_lb.get("ingress"):
        return []
    kept = {_dict(i).get("ip") for i in _list(old_lb.get("ingress"))}
    return [cause for i, item in enumerate(_list(ingress)) if _dict(item).get("ip")
            for cause in ip_value_causes(_dict(item)["ip"], f"status.loadBalancer.ingress[{i}].ip", kept)]


def prepare_ingress_class(ic: Obj, old: Obj | None) -> Causes:
    spec = _spec(ic)
    causes: Causes = [] if spec.get("controller") else [_required("spec.controller")]
    if old is not None and spec.get("controller") != (old.get("spec") or {}).get("controller"):
        causes.append(_invalid("spec.controller", spec.get("controller", ""), "field is immutable"))
    return causes


def prepare_network_policy(np: Obj, old: Obj | None) -> Causes:
    spec = np.setdefault("spec", {})
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or ():
            for port in (rule or {}).get("ports") or ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])
    causes = [_unsupported(f"spec.policyTypes[{i}]", t, ("Egress", "Ingress"))
              for i, t in enumerate(spec["policyTypes"]) if t not in ("Egress", "Ingress")]
    kept = _ip_block_cidrs(_dict(old.get("spec"))) if old is not None else set()
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(_list(spec.get(direction))):
            for j, peer in enumerate(_list(_dict(rule).get(peers))):
                block = _dict(peer).get("ipBlock")
                if isinstance(block, dict):
                    causes += _ip_block(block, f"spec.{direction}[{i}].{peers}[{j}].ipBlock", kept)
    return causes


def _ip_block(block: Obj, at: str, kept: set[Any]) -> Causes:
    """``ValidateIPBlock``: a CIDR (required), and exceptions that are CIDRs strictly inside it."""
    cidr = block.get("cidr")
    if not cidr:
        return [_required(f"{at}.cidr")]
    cidr = str(cidr)
    causes = [] if cidr in kept else [_invalid(f"{at}.cidr", cidr, p) for p in legacy_cidr_problems(cidr)]
    outer = sloppy_network(cidr)
    if outer is None:
        return causes
    excepts = block.get("except")
    causes += cidr_causes(excepts, f"{at}.except", kept)
    for i, text in enumerate(_list(excepts)):
        inner = sloppy_network(str(text))
        if inner is not None and not _strict_subset(outer, inner):
            causes.append(_invalid(f"{at}.except[{i}]", text, "must be a strict subset of `cidr`"))
    return causes


def _strict_subset(outer: tuple[Address, int], inner: tuple[Address, int]) -> bool:
    """Go's ``cidr.Contains(except.IP)`` and a longer prefix (an IPv4-mapped address is IPv4 to Go)."""
    network = ipaddress.ip_network(f"{outer[0]}/{outer[1]}", strict=False)
    ip = inner[0]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None and network.version == 4:
        ip = ip.ipv4_mapped
    inside = ip.version == network.version and ip in network
    return inside and outer[1] < inner[1]


def _ip_block_cidrs(spec: Obj) -> set[Any]:
    """Every ``ipBlock`` CIDR and exception of a stored NetworkPolicy's spec (those an update may keep)."""
    found: set[Any] = set()
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for rule in _list(spec.get(direction)):
            for peer in _list(_dict(rule).get(peers)):
                block = _dict(_dict(peer).get("ipBlock"))
                found.add(block.get("cidr"))
                found.update(e for e in _list(block.get("except")) if isinstance(e, str))
    return found


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def prepare_endpoint_slice(es: Obj, old: Obj | None) -> Causes:
    """``ValidateEndpointSlice``: an address type (fixed once created; the deprecated ``IP``
    taken only by an update), at most 1,000 endpoints of 1 to 100 addresses each, of that
    type (an IPv4 or IPv6 address clients can reach, or an FQDN), a DNS-label hostname,
    topology labels; at most 100 ports, named by distinct DNS labels, with a protocol. (No
    endpoints or ports read back as null: ``validation.empty_collections``.)"""
    for port in es.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("name", "")
    kind = es.get("addressType")
    causes: Causes = []
    allowed = ADDRESS_TYPES if old is None else ("FQDN", "IP", "IPv4", "IPv6")
    if not kind:
        causes.append(_required("addressType"))
    elif kind not in allowed:
        causes.append(_unsupported("addressType", kind, allowed))
    endpoints = es.get("endpoints") or ()
    if isinstance(endpoints, list) and len(endpoints) > MAX_ENDPOINTS:
        causes.append(too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
    else:  # (an update that keeps the endpoints keeps addresses the strict parse refuses)
        strict = old is None or endpoints != old.get("endpoints")
        for i, endpoint in enumerate(endpoints):
            _slice_endpoint(endpoint if isinstance(endpoint, dict) else {}, kind, f"endpoints[{i}]", strict, causes)
    _slice_ports(es.get("ports") or (), causes)
    if old is not None and kind != old.get("addressType"):
        causes.append(_invalid("addressType", kind, "field is immutable"))
    return causes


MAX_ENDPOINTS, MAX_ADDRESSES, MAX_PORTS, MAX_TOPOLOGY = 1000, 100, 100, 16


def too_many(field: str, count: int, most: int) -> dict[str, str]:
    return {"reason": "FieldValueTooMany", "field": field,
            "message": f"Too many: {count}: must have at most {most} items"}


def _slice_endpoint(endpoint: Obj, kind: Any, at: str, strict: bool, causes: Causes) -> None:
    addresses = endpoint.get("addresses")
    if not addresses:
        causes.append(_required(f"{at}.addresses", ": must contain at least 1 address"))
    elif isinstance(addresses, list) and len(addresses) > MAX_ADDRESSES:
        causes.append(too_many(f"{at}.addresses", len(addresses), MAX_ADDRESSES))
    for j, address in enumerate(addresses if isinstance(addresses, list) else ()):
        address = str(address)
        if not address and kind == "FQDN":
            causes.append(_required(f"{at}.addresses[{j}]"))
            continue
        problems = _slice_address_problems(kind, address, strict)
        if problems:
            causes.extend(_invalid(f"{at}.addresses[{j}]", shown, p) for shown, p in problems)
    topology = endpoint.get("deprecatedTopology")
    if isinstance(topology, dict) and topology:
        path = f"{at}.topology"  # (the internal type's name, as upstream reports it)
        if len(topology) > MAX_TOPOLOGY:
            causes.append(too_many(path, len(topology), MAX_TOPOLOGY))
        causes.extend(labels_causes(topology, path))
    hostname = endpoint.get("hostname")
    if hostname is not None:
        causes.extend(_invalid(f"{at}.hostname", hostname, p) for p in dns_label_problems(str(hostname)))


@functools.lru_cache(maxsize=1 << 16)
def _slice_address_problems(kind: Any, address: str, strict: bool) -> tuple[tuple[str, str], ...]:
    """An address's problems for a slice of ``kind``, each with the value it shows (an FQDN's
    bad label): remembered, as every write of a slice names its addresses again. ``strict``:
    StrictIPCIDRValidation's (no leading zeros, not IPv4-mapped), first."""
    if kind in ("IP", "IPv4", "IPv6"):
        ip = parsed_ip(address)
        if ip is None and kind == "IP":
            return ((address, BAD_IP),)
        stricter = tuple((address, p) for p in strict_ip_problems(address)) if strict and ip is not None else ()
        if kind == "IP":
            return stricter
        # (an IPv4-mapped IPv6 address is IPv4 to Go's To4)
        family = 0 if ip is None else 4 if ip.version == 4 or ip.ipv4_mapped is not None else 6
        wrong = ((address, f"must be a valid {kind} address"),) if family != int(kind[-1]) else ()
        return stricter + wrong + tuple((address, p) for p in non_special_ip_problems(address))
    if kind == "FQDN":
        return _fqdn_problems(address)
    return ()


def _fqdn_problems(name: str) -> tuple[tuple[str, str], ...]:
    """``IsFullyQualifiedDomainName``: a DNS subdomain of two labels or more (a final dot allowed)."""
    name = name.removesuffix(".")
    problems = subdomain_problems(name)
    if problems:
        return ((name, ",".join(problems)),)
    labels = name.split(".")
    if len(labels) < 2:
        return ((name, "should be a domain with at least two segments separated by dots"),)
    for label in labels:
        problems = dns_label_problems(label)
        if problems:
            return ((label, ",".join(problems)),)
    return ()


def _slice_ports(ports: Any, causes: Causes) -> None:
    if not isinstance(ports, list):
        return
    if len(ports) > MAX_PORTS:
        causes.append(too_many("ports", len(ports), MAX_PORTS))
        return
    names: set[str] = set()
    for i, port in enumerate(ports):
        at, port = f"ports[{i}]", port if isinstance(port, dict) else {}
        name = str(port.get("name") or "")
        if name:
            causes.extend(_invalid(f"{at}.name", name, p) for p in dns_label_problems(name))
        if name in names:
            causes.append({"reason": "FieldValueDuplicate", "field": f"{at}.name",
                           "message": f'Duplicate value: "{name}"'})
        names.add(name)
        causes.extend(port_protocol_causes(port, at))
