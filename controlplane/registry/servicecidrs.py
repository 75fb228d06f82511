"""networking.k8s.io/v1 ServiceCIDR and IPAddress: the Service IP ranges and the allocated
cluster IPs (KEP-1880, MultiCIDRServiceAllocator, GA in 1.33), validated as upstream's
``pkg/apis/networking/validation`` does.

- A ServiceCIDR holds one or two CIDRs (``spec.cidrs``; two only one of each family),
  in canonical form; they never change, but a single-stack one may gain its second
  family. The default, ``kubernetes``, is the server's ``--service-cluster-ip-range``
  (``default_service_cidr``); the others extend the ranges Services may ask IPs from.
- An IPAddress is named by its address in canonical form; ``spec.parentRef`` (resource
  and name required, immutable) says what holds it. The allocator (``api/allocations.py``)
  writes one per cluster IP; one made by hand reserves its address.

    >>> ip_address_name_problems("10.96.0.010")
    ['must not have leading 0s']
    >>> prepare_service_cidr({"spec": {"cidrs": ["10.0.0.1/24"]}}, None)[0]["message"]
    'Invalid value: "10.0.0.1/24": must not have bits set beyond the prefix length'
"""

from __future__ import annotations

import ipaddress
from typing import Any

import orjson

from .causes import Causes, invalid, required
from .podvalidation import subdomain_problems

__all__ = [
    "DEFAULT_NAME",
    "FINALIZER",
    "FAMILY_LABEL",
    "MANAGED_BY_LABEL",
    "Network",
    "default_service_cidr",
    "ip_address_name_problems",
    "networks",
    "prepare_ip_address",
    "prepare_service_cidr",
]

DEFAULT_NAME = "kubernetes"  # upstream's defaultservicecidr.DefaultServiceCIDRName
FINALIZER = "networking.k8s.io/service-cidr-finalizer"  # upstream's ServiceCIDRProtectionFinalizer
FAMILY_LABEL = "ipaddress.kubernetes.io/ip-family"
MANAGED_BY_LABEL = "ipaddress.kubernetes.io/managed-by"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Obj = dict[str, Any]


def _sloppy_ipv4(text: str) -> bool:
    """Whether Go's ParseIPSloppy would read ``text`` (four decimal parts, leading zeros allowed)."""
    parts = text.split(".")
    return len(parts) == 4 and all(p.isdigit() and p.isascii() and int(p) <= 255 for p in parts)


def _ip_problems(text: str) -> list[str]:
    """apimachinery's IsValidIP details: a valid address, no leading zeros, not IPv4-mapped,
    in canonical form."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        host, _, last = text.rpartition(":")
        if _sloppy_ipv4(text) or (host and _sloppy_ipv4(last) and ":" in text):
            return ["must not have leading 0s"]
        return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return ["must not be an IPv4-mapped IPv6 address"]
        if "%" in text:  # a zone: Go's parsers refuse it
            return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    if str(address) != text:
        return [f'must be in canonical form ("{address}")']
    return []


def ip_address_name_problems(name: str) -> list[str]:
    """Upstream's ValidateIPAddressName: the name is an address in canonical form."""
    return _ip_problems(name)


def _cidr_problems(text: str) -> list[str]:
    """apimachinery's IsValidCIDR details."""
    address, slash, bits = text.partition("/")
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        if slash and bits.isdigit() and (_sloppy_ipv4(address) or (bits.startswith("0") and len(bits) > 1)):
            return ["must not have leading 0s in IP or prefix length"]
        return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
    if not slash:
        return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
    if bits.startswith("0") and len(bits) > 1:
        return ["must not have leading 0s in IP or prefix length"]
    if isinstance(network, ipaddress.IPv6Network) and network.network_address.ipv4_mapped is not None:
        return ["must not have an IPv4-mapped IPv6 address"]
    if ipaddress.ip_address(address) != network.network_address:
        return ["must not have bits set beyond the prefix length"]
    if str(network) != text:
        return [f'must be in canonical form ("{network}")']
    return []


def _family(text: str) -> int:
    """4 or 6 for a CIDR Go's ParseCIDRSloppy reads, 0 for one it does not."""
    try:
        return ipaddress.ip_network(text, strict=False).version
    except ValueError:
        return 0


def _cidrs_causes(cidrs: Any) -> Causes:
    """validateServiceCIDRSpec: one or two valid CIDRs, two of different families."""
    if not isinstance(cidrs, list) or not cidrs:
        return [required("spec.cidrs", "at least one CIDR required")]
    if len(cidrs) > 2:
        # the internal type has no JSON tags: Go's encoder spells the field CIDRs
        shown = "{\"CIDRs\":[" + ",".join(f'"{c}"' for c in cidrs) + "]}"
        return [{"reason": "FieldValueInvalid", "field": "spec.cidrs",
                 "message": f"Invalid value: {shown}: may only hold up to 2 values"}]
    causes: Causes = []
    for i, cidr in enumerate(cidrs):
        text = cidr if isinstance(cidr, str) else ""
        causes += [invalid(f"spec.cidrs[{i}]", text, problem) for problem in _cidr_problems(text)]
    if len(cidrs) == 2 and _family(str(cidrs[0])) == _family(str(cidrs[1])) != 0:
        shown = "[" + ",".join(f'"{c}"' for c in cidrs) + "]"
        causes.append({"reason": "FieldValueInvalid", "field": "spec.cidrs",
                       "message": f"Invalid value: {shown}: may specify no more than one IP for each IP family, "
                                  "i.e 192.168.0.0/24 and 2001:db8::/64"})
    return causes


def _immutable(field: str, value: Any) -> dict[str, str]:
    return invalid(field, value, "field is immutable")


def prepare_service_cidr(obj: Obj, old: Obj | None) -> Causes:
    """ValidateServiceCIDR at create; ValidateServiceCIDRUpdate at an update: the CIDRs
    never change, a single one may gain a second (single- to dual-stack)."""
    spec = obj.get("spec")
    cidrs = spec.get("cidrs") if isinstance(spec, dict) else None
    if old is None:
        return _cidrs_causes(cidrs)
    was = (old.get("spec") or {}).get("cidrs") or []
    now = cidrs if isinstance(cidrs, list) else []
    if len(now) == len(was):
        return [_immutable(f"spec.cidrs[{i}]", now[i]) for i in range(len(was)) if now[i] != was[i]]
    if len(was) == 1 and len(now) == 2:
        causes = [_immutable("spec.cidrs[0]", now[0])] if now[0] != was[0] else []
        return causes + _cidrs_causes(now)
    shown = "[" + ",".join(f'"{c}"' for c in now) + "]" if now else "null"
    return [{"reason": "FieldValueInvalid", "field": "spec.cidrs",
             "message": f"Invalid value: {shown}: field is immutable"}]


def _path_segment_problems(name: str) -> list[str]:
    """apimachinery's IsPathSegmentName."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def _go_parent_ref(ref: Any) -> str:
    """A ParentReference as the field error prints the internal type (JSON, Go's field names)."""
    if not isinstance(ref, dict):
        return "null"
    return orjson.dumps({"Group": ref.get("group") or "", "Resource": ref.get("resource") or "",
                         "Namespace": ref.get("namespace") or "", "Name": ref.get("name") or ""}).decode()


def prepare_ip_address(obj: Obj, old: Obj | None) -> Causes:
    """ValidateIPAddress (the name is checked with the other names: ``ip_address_name_problems``),
    and at an update ValidateIPAddressUpdate too: the parent reference never changes."""
    spec = obj.get("spec")
    ref = spec.get("parentRef") if isinstance(spec, dict) else None
    causes = _parent_ref_causes(ref)
    if old is not None:
        was = (old.get("spec") or {}).get("parentRef")
        if _go_parent_ref(ref) != _go_parent_ref(was):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.parentRef",
                           "message": f"Invalid value: {_go_parent_ref(ref)}: field is immutable"})
    return causes


def _parent_ref_causes(ref: Any) -> Causes:
    """validateIPAddressParentReference: required, with a resource and a name."""
    if not isinstance(ref, dict):
        return [required("spec.parentRef")]
    causes: Causes = []
    group = str(ref.get("group") or "")
    if group:  # required, but the core group (Services') is ""
        causes += [invalid("spec.parentRef.group", group, p) for p in subdomain_problems(group)]
    for key, needed in (("resource", True), ("name", True), ("namespace", False)):
        value = str(ref.get(key) or "")
        if not value:
            if needed:
                causes.append(required(f"spec.parentRef.{key}"))
            continue
        causes += [invalid(f"spec.parentRef.{key}", value, p) for p in _path_segment_problems(value)]
    return causes


def default_service_cidr(cidrs: list[str], now: str) -> Obj:
    """The default ServiceCIDR as upstream's defaultservicecidr controller leaves it once ready
    (kube-controller-manager's servicecidrs controller adds its finalizer)."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": DEFAULT_NAME, "finalizers": [FINALIZER]},
            "spec": {"cidrs": list(cidrs)},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now,
                                       "reason": "", "message": "Kubernetes default Service CIDR is ready"}]}}


def networks(service_cidrs: list[Obj], terminating: bool = True) -> list[Network]:
    """The CIDRs of these ServiceCIDRs, each once; without ``terminating``, of those not
    being deleted only (the ranges a Service may take a new IP from)."""
    found: list[Network] = []
    for sc in service_cidrs:
        if not terminating and (sc.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for cidr in (sc.get("spec") or {}).get("cidrs") or ():
            try:
                network = ipaddress.ip_network(str(cidr))
            except ValueError:
                continue
            if network not in found:
                found.append(network)
    return found
