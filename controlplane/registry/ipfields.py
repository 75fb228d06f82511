"""The IP and CIDR fields of the built-in kinds as kube-apiserver 1.37 validates them:
StrictIPCIDRValidation on (KEP-4858: alpha in 1.33, beta and on by default in 1.36).

A "legacy" field (one that predates strict parsing: a pod's IPs and DNS nameservers, a
Service's cluster and external IPs, an Endpoints' addresses, a NetworkPolicy's CIDRs, ...)
takes what Go's ``ParseIPSloppy``/``ParseCIDRSloppy`` read, but not an IPv4 address with
leading zeros (``010.1.2.3``: octal to libc, decimal to Go), an IPv4-mapped IPv6 address
(``::ffff:1.2.3.4``), or a CIDR with bits set past its prefix length (``10.0.0.1/24``).
An IPv6 value not in RFC 5952 form stays valid (a warning, where upstream gives one)::

    >>> legacy_ip_problems("010.1.2.3")
    ('must not have leading 0s',)
    >>> legacy_cidr_problems("10.0.0.1/24")
    ('must not have bits set beyond the prefix length',)
    >>> ip_causes(["::ffff:1.2.3.4"], "spec.externalIPs", old=())[0]["message"]
    'Invalid value: "::ffff:1.2.3.4": must not be an IPv4-mapped IPv6 address'

Ratcheting, as upstream's: an update may keep a value the stored object already had
(``old``: the stored field's values, anywhere in its list), so objects written before the
gate stay writable; Endpoints and EndpointSlices keep theirs only while their whole
address lists are unchanged (their validators' ``strict`` argument).

Verdicts are remembered by text (bounded caches): a controller rewrites every address
of an Endpoints, and a kubelet a pod's IPs, on each write.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Collection, Iterable
from typing import Any

import orjson

from .causes import Causes, cause, forbidden, invalid

__all__ = ["BAD_CIDR", "BAD_IP", "cidr_causes", "ip_causes", "ip_value_causes", "legacy_cidr_problems",
           "legacy_ip_problems", "parsed_ip", "pod_spec_ip_causes", "pod_status_ip_causes", "service_ip_causes",
           "sloppy_network", "strict_ip_problems"]

BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
BAD_CIDR = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_REMEMBERED = 1 << 14


def parsed_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address Go's ``ParseIPSloppy`` reads in ``text`` (an IPv4 address's parts may have
    leading zeros, an IPv6 address's trailing IPv4 one's too: ``::ffff:010.1.2.3``), or None."""
    if "%" in text:  # a zone: Go's parsers refuse it
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        head, colon, tail = text.rpartition(":")
        parts = tail.split(".")
        if len(parts) != 4 or not all(p.isascii() and p.isdigit() and int(p) <= 255 for p in parts):
            return None
        v4 = ".".join(str(int(p)) for p in parts)
        if not colon:
            return ipaddress.IPv4Address(v4)
        try:
            return ipaddress.IPv6Address(f"{head}:{v4}")
        except ValueError:
            return None


# an IPv4 address in canonical dotted-quad form (no part with a leading zero): every parse above
# reads it and no strict check refuses it, so it needs none of them (a pod's IP, new with every pod)
_CANONICAL_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                             r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\Z")


@functools.lru_cache(maxsize=_REMEMBERED)
def legacy_ip_problems(text: str) -> tuple[str, ...]:
    """``IsValidIPForLegacyField`` with strict validation: what Go's sloppy parse reads,
    and ``netip.ParseAddr`` too, not IPv4-mapped.

    >>> legacy_ip_problems("10.0.1.7"), legacy_ip_problems("10.0.01.7"), legacy_ip_problems("::ffff:1.2.3.4")
    ((), ('must not have leading 0s',), ('must not be an IPv4-mapped IPv6 address',))
    """
    if _CANONICAL_IPV4.match(text):
        return ()
    if parsed_ip(text) is None:
        return (BAD_IP,)
    return strict_ip_problems(text)


def strict_ip_problems(text: str) -> tuple[str, ...]:
    """The strict checks alone, for an address the sloppy parse reads (``parsed_ip``)."""
    try:  # Python refuses an IPv4 part's leading zeros, as netip.ParseAddr does
        address = ipaddress.ip_address(text)
    except ValueError:
        return ("must not have leading 0s",)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return ("must not be an IPv4-mapped IPv6 address",)
    return ()


def sloppy_network(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    """The address and prefix length Go's ``ParseCIDRSloppy`` reads in ``text`` (leading
    zeros taken, in the address and the length), or None."""
    address, slash, bits = text.partition("/")
    if not slash or not bits.isascii() or not bits.isdigit():
        return None
    ip = parsed_ip(address)
    if ip is None:
        return None
    length = int(bits)
    # (the text's family decides the length's range: ::ffff:1.2.3.0/120 is an IPv6 prefix)
    return (ip, length) if length <= (32 if ":" not in address else 128) else None


@functools.lru_cache(maxsize=_REMEMBERED)
def legacy_cidr_problems(text: str) -> tuple[str, ...]:
    """``IsValidCIDRForLegacyField`` with strict validation: what ``ParseCIDRSloppy`` reads,
    ``netip.ParsePrefix`` too (no leading zeros), not IPv4-mapped, no host bits."""
    if sloppy_network(text) is None:
        return (BAD_CIDR,)
    address, _, bits = text.partition("/")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is None or (len(bits) > 1 and bits[0] == "0"):
        return ("must not have leading 0s in IP or prefix length",)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ("must not have an IPv4-mapped IPv6 address",)
    try:
        ipaddress.ip_network(text, strict=True)
    except ValueError:
        return ("must not have bits set beyond the prefix length",)
    return ()


def _values(items: Any) -> Iterable[tuple[int, Any]]:
    return enumerate(items) if isinstance(items, list) else ()


def ip_causes(values: Any, path: str, old: Collection[Any]) -> Causes:
    """Each address of the list at ``path`` (``path[i]``) a legacy field's, but those of
    ``old`` (the stored object's), which may stay."""
    return [cause for i, text in _values(values) for cause in ip_value_causes(text, f"{path}[{i}]", old)]


def ip_value_causes(text: Any, field: str, old: Collection[Any]) -> Causes:
    """One address at ``field``, as ``ip_causes``."""
    if not isinstance(text, str) or text in old:
        return []
    return [invalid(field, text, p) for p in legacy_ip_problems(text)]


def cidr_causes(values: Any, path: str, old: Collection[Any]) -> Causes:
    """As ``ip_causes``, for CIDRs."""
    return [invalid(f"{path}[{i}]", text, p) for i, text in _values(values)
            if isinstance(text, str) and text not in old for p in legacy_cidr_problems(text)]


# -- the fields, kind by kind (those of networking.k8s.io and discovery.k8s.io: ``networking``) ----
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(values: Any) -> list[str]:
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def service_ip_causes(svc: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """A Service's spec (``ValidateService``): its cluster IPs (a headless ``None`` first),
    its external IPs (then ``ValidateNonSpecialIP``'s, as an endpoint's), and its load
    balancer source ranges, trimmed (their path upstream's Go name, ``LoadBalancerSourceRanges``),
    only for a LoadBalancer."""
    from .corevalidation import non_special_ip_causes

    spec, old_spec = _dict(svc.get("spec")), _dict((old or {}).get("spec"))
    causes: Causes = []
    if spec.get("type") != "ExternalName":
        ips = spec.get("clusterIPs")
        first_none = isinstance(ips, list) and ips[:1] == ["None"]
        causes += [c for c in ip_causes(ips, "spec.clusterIPs", _strings(old_spec.get("clusterIPs")))
                   if not (first_none and c["field"] == "spec.clusterIPs[0]")]
    kept = _strings(old_spec.get("externalIPs"))
    for i, ip in enumerate(_strings(spec.get("externalIPs"))):
        problems = ip_value_causes(ip, f"spec.externalIPs[{i}]", kept)
        causes += problems if problems or ip in kept else non_special_ip_causes(ip, f"spec.externalIPs[{i}]")
    ranges = spec.get("loadBalancerSourceRanges")
    if isinstance(ranges, list) and ranges:
        if spec.get("type") != "LoadBalancer":
            causes.append(forbidden("spec.LoadBalancerSourceRanges", "may only be used when `type` is 'LoadBalancer'"))
        kept = [r.strip() for r in _strings(old_spec.get("loadBalancerSourceRanges"))]
        causes += cidr_causes([r.strip() if isinstance(r, str) else r for r in ranges],
                              "spec.LoadBalancerSourceRanges", kept)
    return causes


def pod_spec_ip_causes(spec: dict[str, Any], path: str, old_spec: dict[str, Any] | None = None) -> Causes:
    """A pod spec's DNS nameservers and host aliases' IPs (``validatePodDNSConfig``,
    ``ValidateHostAliases``), those of ``old_spec`` kept."""
    old_spec = old_spec or {}
    causes: Causes = []
    dns = spec.get("dnsConfig")
    if isinstance(dns, dict) and dns.get("nameservers"):
        old_dns = _dict(old_spec.get("dnsConfig"))
        causes += ip_causes(dns["nameservers"], f"{path}.dnsConfig.nameservers", _strings(old_dns.get("nameservers")))
    aliases = spec.get("hostAliases")
    if isinstance(aliases, list) and aliases:
        kept = [_dict(a).get("ip") for a in old_spec.get("hostAliases") or () if isinstance(a, dict)]
        for i, alias in enumerate(aliases):
            ip = _dict(alias).get("ip")
            causes += ip_value_causes(ip if isinstance(ip, str) else "", f"{path}.hostAliases[{i}].ip", kept)
    return causes


def pod_status_ip_causes(status: dict[str, Any], old_status: dict[str, Any]) -> Causes:
    """A pod's status write (``validatePodIPs``, ``validateHostIPs``): each of its pod and host
    IPs a legacy field's, the stored ones kept; two at most, of different families, none
    twice. Only
    when they changed: a kubelet writes the same ones on every status update."""
    causes: Causes = []
    for field in ("podIPs", "hostIPs"):
        listed = status.get(field)
        if not listed or listed == old_status.get(field) or not isinstance(listed, list):
            continue
        ips = [item.get("ip") if isinstance(item, dict) else None for item in listed]
        ips = [ip if isinstance(ip, str) else "" for ip in ips]
        if len(ips) == 1 and not legacy_ip_problems(ips[0]):
            continue  # (the common case, cheaply: a kubelet's first report of a pod's IP)
        kept = [item.get("ip") for item in old_status.get(field) or () if isinstance(item, dict)]
        problems = ip_causes(ips, f"status.{field}", kept)
        causes += problems
        if len(ips) > 1 and not problems:
            families = {parsed_ip(str(ip)).version for ip in ips}  # type: ignore[union-attr]
            if len(ips) > 2 or len(families) < 2:
                shown = "[" + ",".join(orjson.dumps({"IP": ip}).decode() for ip in ips) + "]"
                causes.append(cause("FieldValueInvalid", f"status.{field}",
                                    f"Invalid value: {shown}: may specify no more than one IP for each IP family"))
            causes += [cause("FieldValueDuplicate", f"status.{field}[{i}]",
                             f"Duplicate value: {orjson.dumps({'IP': ip}).decode()}")
                       for i, ip in enumerate(ips) if ip in ips[:i]]
    return causes
