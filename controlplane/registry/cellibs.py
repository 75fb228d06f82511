"""The Kubernetes CEL libraries that CRD rules (``x-kubernetes-validations``) and admission
policies call, as functions for the ``cel`` interpreter (``registry/expressions.py``), which
has CEL's standard functions only.

Real CRDs need them: Gateway API's Gateway checks its infrastructure label keys with
``self.all(key, key.split("/")[0].size() < 253)``. Provided, with upstream's semantics:

- strings (cel-go's ``ext.Strings``): ``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``,
  ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``, ``reverse``;
- lists: ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``;
- regex: the global ``matches(s, re)``, ``find``, ``findAll`` (Go's syntax,
  ``registry/goregexp.py``);
- URLs: ``url``, ``isURL``, ``getScheme``, ``getHost``, ``getHostname``, ``getPort``,
  ``getEscapedPath``, ``getQuery``;
- IPs and CIDRs: ``ip``, ``isIP``, ``family``, ``isUnspecified``, ``isLoopback``,
  ``isLinkLocalMulticast``, ``isLinkLocalUnicast``, ``isGlobalUnicast``, ``cidr``, ``isCIDR``,
  ``containsIP``, ``containsCIDR``, ``prefixLength``, ``masked`` (and ``ip()`` of a CIDR);
- quantities: ``quantity``, ``isQuantity`` and their methods (shared with DRA's selectors).

A URL, an IP or a CIDR is carried as a tagged map (the interpreter converts only plain values),
so two equal values compare equal. Not provided: the namespaced libraries (``sets.*``,
``math.*``, ``base64.*``, ``format.*``, ``strings.quote``), ``string()`` of an IP or CIDR.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controlplane.registry.goregexp import compile_go
from controlplane.scheduler.dra.cel import _FUNCTIONS as _QUANTITY_FUNCTIONS

__all__ = ["FUNCTIONS", "GLOBAL_MATCHES", "with_global_matches"]

_URL, _IP, _CIDR = "__url__", "__ip__", "__cidr__"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


# -- strings -------------------------------------------------------------------------
def _char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise ValueError(f"index out of range: {i}")
    return s[i:i + 1]


def _index_of(target: Any, item: Any, offset: int = 0) -> int:
    if isinstance(target, list):  # the lists library's indexOf
        return next((i for i, x in enumerate(target) if x == item), -1)
    if offset < 0 or offset > len(target):
        raise ValueError(f"index out of range: {offset}")
    return int(target.find(item, offset))


def _last_index_of(target: Any, item: Any, offset: int | None = None) -> int:
    if isinstance(target, list):
        return next((i for i in range(len(target) - 1, -1, -1) if target[i] == item), -1)
    if offset is None:
        return int(target.rfind(item))
    if offset < 0 or offset > len(target):
        raise ValueError(f"index out of range: {offset}")
    return int(target.rfind(item, 0, offset + len(item)))


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n if n >= 0 else -1)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's strings.SplitN: n < 0 all, 0 none, else at most n parts."""
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        return parts if n < 0 or n >= len(parts) else [*parts[:n - 1], "".join(parts[n - 1:])]
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if start < 0 or end > len(s) or start > end:
        raise ValueError(f"index out of range: {start if start < 0 or start > len(s) else end}")
    return s[start:end]


def _join(items: list[Any], sep: str = "") -> str:
    return sep.join(items)


# -- lists -----------------------------------------------------------------------------
def _extreme(items: list[Any], pick: Callable[[list[Any]], Any], name: str) -> Any:
    if not items:
        raise ValueError(f"{name} called on empty list")
    return pick(items)


def _sum(items: list[Any]) -> Any:
    return sum(items[1:], items[0]) if items else 0


# -- regex ------------------------------------------------------------------------------
def _regex(pattern: str) -> Any:
    compiled = compile_go(pattern)
    if compiled is None:
        raise ValueError(f"invalid regular expression: {pattern}")
    return compiled


GLOBAL_MATCHES = "__global_matches"
_MATCHES_CALL = re.compile(r"matches\s*\(")


def _matches(s: str, pattern: str) -> bool:
    """The global ``matches(s, re)``, which the interpreter lacks (it has the method
    ``s.matches(re)``, whose linear-time engine is left to it): Gateway API's safe-upgrades
    policy calls ``matches(annotation, 'v1.[0-3].\\d+')``. ``with_global_matches`` renames
    the calls to this function, which matches with RE2 (``goregexp``), in linear time too."""
    return _regex(pattern).search(s) is not None


def with_global_matches(expression: str) -> str:
    """``expression`` with its global ``matches(`` calls (not methods, not in string literals)
    renamed to ``GLOBAL_MATCHES``."""
    if "matches" not in expression:
        return expression
    out: list[str] = []
    i, quote = 0, ""
    while i < len(expression):
        c = expression[i]
        if quote:
            if c == "\\":
                out.append(expression[i:i + 2])
                i += 2
                continue
            if expression.startswith(quote, i):
                out.append(quote)
                i += len(quote)
                quote = ""
                continue
        elif c in "'\"":
            quote = c * 3 if expression.startswith(c * 3, i) else c
            out.append(quote)
            i += len(quote)
            continue
        elif (call := _MATCHES_CALL.match(expression, i)) and not _after_member_or_name(expression, i):
            out.append(GLOBAL_MATCHES + "(")
            i = call.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _after_member_or_name(expression: str, i: int) -> bool:
    before = expression[:i].rstrip()
    return bool(before) and (before[-1] == "." or before[-1].isalnum() or before[-1] == "_")


def _find(s: str, pattern: str) -> str:
    found = _regex(pattern).search(s)
    return found.group(0) if found else ""


def _find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(s)]
    return found if n < 0 else found[:n]


# -- URLs ------------------------------------------------------------------------------
def _parse_url(s: str) -> dict[str, Any] | None:
    """Go's url.ParseRequestURI, roughly: an absolute URL or an absolute path, no fragment."""
    if not s or "#" in s or any(c.isspace() for c in s):
        return None
    parts = urlsplit(s)
    if not parts.scheme and not s.startswith("/"):
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.netloc.rpartition("@")[2]
    return {_URL: s, "scheme": parts.scheme, "host": host, "hostname": parts.hostname or "",
            "port": "" if port is None else str(port), "path": parts.path, "query": parts.query}


def _url(s: str) -> dict[str, Any]:
    parsed = _parse_url(s)
    if parsed is None:
        raise ValueError(f"URL parse error during conversion from string: {s}")
    return parsed


def _query(u: dict[str, Any]) -> dict[str, list[str]]:
    return parse_qs(u["query"], keep_blank_values=True)


# -- IPs and CIDRs ---------------------------------------------------------------------------
def _parse_ip(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if "%" in s:  # zones are refused, as upstream
        return None
    try:
        address = ipaddress.ip_address(s)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return None  # IPv4-mapped IPv6 addresses are refused, as upstream
    return address


def _ip(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and _CIDR in value:  # cidr(...).ip()
        return {_IP: str(ipaddress.ip_interface(value[_CIDR]).ip)}
    address = _parse_ip(value) if isinstance(value, str) else None
    if address is None:
        raise ValueError(f"IP Address {value!r} parse error during conversion from string")
    return {_IP: str(address)}


def _address(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(value[_IP] if isinstance(value, dict) else _ip(value)[_IP])


def _parse_cidr(s: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    address, slash, prefix = s.partition("/")
    if not slash or not prefix.isdigit() or _parse_ip(address) is None:
        return None
    try:
        return ipaddress.ip_interface(s)
    except ValueError:
        return None


def _cidr(s: str) -> dict[str, Any]:
    parsed = _parse_cidr(s) if isinstance(s, str) else None
    if parsed is None:
        raise ValueError(f"network address parse error during conversion from string: {s!r}")
    return {_CIDR: str(parsed)}


def _network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_interface(value[_CIDR] if isinstance(value, dict) else _cidr(value)[_CIDR]).network


def _contains_ip(cidr: Any, ip: Any) -> bool:
    return _address(ip) in _network(cidr)


def _contains_cidr(cidr: Any, other: Any) -> bool:
    inner, outer = _network(other), _network(cidr)
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def _masked(cidr: Any) -> dict[str, Any]:
    return {_CIDR: str(_network(cidr))}


FUNCTIONS: dict[str, Any] = {
    **_QUANTITY_FUNCTIONS,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: s.translate(_ASCII_LOWER),
    "upperAscii": lambda s: s.translate(_ASCII_UPPER),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: s.strip(),
    "join": _join,
    "reverse": lambda s: s[::-1],
    "isSorted": lambda items: all(a <= b for a, b in itertools.pairwise(items)),
    "sum": _sum,
    "min": lambda items: _extreme(items, min, "min"),
    "max": lambda items: _extreme(items, max, "max"),
    GLOBAL_MATCHES: _matches,
    "find": _find,
    "findAll": _find_all,
    "url": _url,
    "isURL": lambda s: _parse_url(s) is not None,
    "getScheme": lambda u: u["scheme"],
    "getHost": lambda u: u["host"],
    "getHostname": lambda u: u["hostname"],
    "getPort": lambda u: u["port"],
    "getEscapedPath": lambda u: u["path"],
    "getQuery": _query,
    "ip": _ip,
    "isIP": lambda s: _parse_ip(s) is not None,
    "family": lambda v: _address(v).version,
    "isUnspecified": lambda v: _address(v).is_unspecified,
    "isLoopback": lambda v: _address(v).is_loopback,
    "isLinkLocalMulticast": lambda v: _address(v) in ipaddress.ip_network(
        "224.0.0.0/24" if _address(v).version == 4 else "ff02::/16"),
    "isLinkLocalUnicast": lambda v: _address(v).is_link_local and not _address(v).is_multicast,
    "isGlobalUnicast": lambda v: not (_address(v).is_unspecified or _address(v).is_loopback
                                      or _address(v).is_multicast or _address(v).is_link_local
                                      or str(_address(v)) == "255.255.255.255"),
    "cidr": _cidr,
    "isCIDR": lambda s: _parse_cidr(s) is not None,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "prefixLength": lambda v: _network(v).prefixlen,
    "masked": _masked,
}
