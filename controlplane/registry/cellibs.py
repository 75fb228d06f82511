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
- quantities and semantic versions: ``quantity``, ``isQuantity``, ``semver``, ``isSemver`` and
  their methods (shared with DRA's selectors);
- ``string()`` of an IP or a CIDR, and of a bool (which the interpreter lacks);
- sets (cel-go's ``ext.Sets``): ``sets.contains``, ``sets.equivalent``, ``sets.intersects``,
  with CEL's equality (``1`` equals ``1.0``, never ``true``);
- ``strings.quote`` (cel-go's ``ext.Strings`` at version 2, what Kubernetes enables);
- format (Kubernetes' format library): ``format.named(name)`` and ``format.dns1123Label()``,
  ``dns1123Subdomain``, ``dns1035Label``, ``qualifiedName``, the three ``...Prefix`` ones,
  ``labelValue``, ``uri``, ``uuid``, ``byte``, ``date``, ``datetime``; ``<format>.validate(s)``
  is ``optional.none()`` for a valid ``s``, else the optional list of apimachinery's messages;
- the optional syntax ``x.?f`` and ``x[?k]`` (rewritten by ``registry/celsyntax.py`` into
  the ``_cp_*`` functions here), none of a null or a scalar as cel-go's presence test;
  ``optional.of``, ``optional.none``, ``hasValue``, ``value``, ``orValue``, ``or`` are the
  interpreter's own; ``has()`` as cel-go's presence test (``_cp_has``: false of a null or a
  scalar), for the second evaluation after the interpreter's own failed (``expressions``);
- the two-variable comprehensions (cel-go's ``ext.TwoVarComprehensions``, Kubernetes' since
  1.32): ``all``, ``exists``, ``existsOne`` with two variables, ``transformList``,
  ``transformMap``, ``transformMapEntry`` (rewritten by ``celsyntax`` onto the one-variable
  macros over ``_cp_entries``).

A URL, an IP, a CIDR or a format is carried as a tagged map (the interpreter converts only
plain values), so two equal values compare equal.

Not provided, as Kubernetes' CEL environment (apiserver's ``environment/base.go``) has them
not either: ``math.*`` (cel-go's ``ext.Math``), ``base64.*`` (``ext.Encoders``), ``cel.bind``
(``ext.Bindings``, in DRA's selectors only). Upstream refuses a rule calling them at its
CRD's write (an undeclared reference, found by its type checker); here the rule fails as it
runs. Missing, though upstream has them: optional entries of list and map literals
(``[?x]``, ``{?k: v}``), the authorizer library.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controlplane.registry.celsyntax import (
    CHAIN_FIELD,
    CHAIN_INDEX,
    ENTRIES,
    HAS,
    MAP_OF,
    MERGED,
    OPTIONAL_FIELD,
    OPTIONAL_INDEX,
)
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


def _string(value: Any) -> str:
    """``string()`` of an IP, a CIDR or a bool (the interpreter converts the other plain
    values itself)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and (_IP in value or _CIDR in value):
        return str(value.get(_IP) or value[_CIDR])
    raise ValueError(f"no such overload: string({value!r})")


# -- sets (cel-go's ext.Sets) ---------------------------------------------------------------
def _cel_equal(a: Any, b: Any) -> bool:
    """CEL's equality of two values: numbers of any kind by value, a bool never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_cel_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _sets_contains(items: list[Any], wanted: list[Any]) -> bool:
    return all(any(_cel_equal(w, x) for x in items) for w in wanted)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(_cel_equal(x, y) for y in b) for x in a)


# -- strings.quote (cel-go's ext.Strings, version 2) -----------------------------------------
_QUOTED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
           "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def _quote(s: str) -> str:
    return '"' + "".join(_QUOTED.get(c, c) for c in s) + '"'


# -- format (Kubernetes' format library) -----------------------------------------------------
_FORMAT = "__format__"


def _mask_trailing_dash(s: str) -> str:
    """What the ``...Prefix`` formats check: a name to which a suffix is yet to be added."""
    return s[:-1] + "a" if len(s) > 1 and s.endswith("-") else s


def _format_problems() -> dict[str, Callable[[str], list[str]]]:
    from .podvalidation import _subdomain_problems, dns_label_problems, label_key_problems, label_value_problems
    from .structural import _format_ok

    def dns1035(s: str) -> list[str]:
        from .crd import _DNS1035_MESSAGE
        from .dnsnames import DNS1035_LABEL

        problems = ["must be no more than 63 characters"] if len(s) > 63 else []
        return problems + ([] if DNS1035_LABEL.match(s) else [_DNS1035_MESSAGE])

    def checked(fmt: str, problem: str) -> Callable[[str], list[str]]:
        return lambda s: [] if _format_ok(fmt, s) else [problem]

    return {
        "dns1123Label": dns_label_problems,
        "dns1123Subdomain": _subdomain_problems,
        "dns1035Label": dns1035,
        "qualifiedName": label_key_problems,
        "dns1123LabelPrefix": lambda s: dns_label_problems(_mask_trailing_dash(s)),
        "dns1123SubdomainPrefix": lambda s: _subdomain_problems(_mask_trailing_dash(s)),
        "dns1035LabelPrefix": lambda s: dns1035(_mask_trailing_dash(s)),
        "labelValue": label_value_problems,
        "uri": lambda s: [] if _parse_url(s) is not None else [f'parse "{s}": invalid URI for request'],
        "uuid": checked("uuid", "does not match the UUID format"),
        "byte": checked("byte", "invalid base64"),
        "date": checked("date", "invalid date"),
        "datetime": checked("date-time", "invalid datetime"),
    }


_FORMAT_NAMES = ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
                 "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date",
                 "datetime")


def _format_named(name: str) -> Any:
    import cel

    return cel.OptionalValue.of({_FORMAT: name}) if name in _FORMAT_NAMES else cel.OptionalValue.none()


def _format_validate(fmt: Any, s: str) -> Any:
    """``<Format>.validate(s)``: none when ``s`` is valid, else the list of its problems."""
    import cel

    if not (isinstance(fmt, dict) and fmt.get(_FORMAT) in _FORMAT_NAMES) or not isinstance(s, str):
        raise ValueError("no such overload: validate")
    problems = _format_problems()[fmt[_FORMAT]](s)
    return cel.OptionalValue.of(problems) if problems else cel.OptionalValue.none()


# -- optional field selection and indexing (``registry/celsyntax.py``) ------------------------
def _optional_value(target: Any) -> tuple[bool, Any]:
    """Whether ``target`` has a value, and the value: an optional's, or ``target`` itself."""
    import cel

    if isinstance(target, cel.OptionalValue):
        return (True, target.value()) if target.has_value() else (False, None)
    return True, target


def _is_optional(target: Any) -> bool:
    import cel

    return isinstance(target, cel.OptionalValue)


def _optional_field(target: Any, name: str) -> Any:
    """``target.?name``: of the field's value, or none where there is no such field, as
    cel-go's presence test (``refQualify``): none of a null or a scalar too (``null.?f``);
    of a list, its error."""
    import cel

    present, value = _optional_value(target)
    if not present:
        return cel.OptionalValue.none()
    if isinstance(value, list):
        raise ValueError(_list_index_error(name))
    if not isinstance(value, dict):
        return cel.OptionalValue.none()
    return cel.OptionalValue.of(value[name]) if name in value else cel.OptionalValue.none()


def _optional_index(target: Any, key: Any) -> Any:
    """``target[?key]``: of the list's item or the map's value, or none where there is none
    (of a null or a scalar too, as ``_optional_field``)."""
    import cel

    present, value = _optional_value(target)
    if not present:
        return cel.OptionalValue.none()
    if isinstance(value, list):
        index = _list_index(key)
        ok = 0 <= index < len(value)
        return cel.OptionalValue.of(value[index]) if ok else cel.OptionalValue.none()
    if not isinstance(value, dict):
        return cel.OptionalValue.none()
    return cel.OptionalValue.of(value[key]) if _hashable(key) and key in value else cel.OptionalValue.none()


def _has(target: Any, name: str) -> bool:
    """``has(target.name)`` as cel-go's presence test (``refQualify``): of a map whether it has
    the key; of a list its error; false of a null or a scalar, which the interpreter's
    ``has()`` refuses (``has(object.spec.x.f)`` where ``x`` is null)."""
    present, value = _optional_value(target)
    if isinstance(value, list):
        raise ValueError(_list_index_error(name))
    return present and isinstance(value, dict) and name in value


def _chain_field(target: Any, name: str) -> Any:
    """``.name`` after an optional step: optional on an optional, the plain selection else;
    on a value that is no map, cel-go's error (its ``refQualify``): of a list
    ``unsupported index type 'string' in list``, of null or a scalar ``no such key: name``."""
    if _is_optional(target):
        return _optional_field(target, name)
    if isinstance(target, list):
        raise ValueError(_list_index_error(name))
    if not isinstance(target, dict):
        raise KeyError(name)
    return target[name]  # KeyError: "no such key", as the interpreter's own


def _chain_index(target: Any, key: Any) -> Any:
    """``[key]`` after an optional step: optional on an optional, the plain index else (its
    errors cel-go's: ``index out of bounds: 4``, ``unsupported index type 'string' in list``,
    ``no such key: k``)."""
    if _is_optional(target):
        return _optional_index(target, key)
    if isinstance(target, list):
        index = _list_index(key)
        if not 0 <= index < len(target):
            raise ValueError(f"index out of bounds: {key}")
        return target[index]
    if not isinstance(target, dict) or not _hashable(key):
        raise KeyError(key)
    return target[key]


def _list_index(key: Any) -> int:
    """A list's index as cel-go's ``IndexOrError`` takes it: an int, or a double without a
    fraction; else its error."""
    if isinstance(key, float) and key.is_integer():
        return int(key)
    if isinstance(key, bool) or not isinstance(key, int):
        if isinstance(key, float):
            raise ValueError(f"unsupported index value {key:g} in list")
        raise ValueError(_list_index_error(key))
    return key


def _list_index_error(key: Any) -> str:
    return f"unsupported index type '{_cel_type_name(key)}' in list"


def _cel_type_name(value: Any) -> str:
    """The name cel-go gives a value's type in its messages."""
    if value is None:
        return "null_type"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "double"), (str, "string"), (bytes, "bytes"),
                       (list, "list(dyn)"), (dict, "map(dyn, dyn)")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _hashable(key: Any) -> bool:
    return not isinstance(key, (list, dict))


# -- two-variable comprehensions (``registry/celsyntax.py``) -------------------------------------
def _entries(target: Any) -> list[list[Any]]:
    """The ``[index, item]`` pairs of a list, the ``[key, value]`` pairs of a map."""
    if isinstance(target, list):
        return [[i, item] for i, item in enumerate(target)]
    if isinstance(target, dict):
        return [[key, value] for key, value in target.items()]
    raise ValueError(f"no such overload: a comprehension over {type(target).__name__}")


def _map_of(pairs: list[list[Any]]) -> dict[Any, Any]:
    return dict(pairs)


def _merged(entries: list[dict[Any, Any]]) -> dict[Any, Any]:
    """``transformMapEntry``'s result: the one-entry maps its body made, merged; a key made
    twice is an error, as cel-go's."""
    out: dict[Any, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("transformMapEntry: the expression must make a map")
        for key, value in entry.items():
            if key in out:
                raise ValueError(f"insert failed: key {key!r} already exists")
            out[key] = value
    return out


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
    "string": _string,
    "sets.contains": _sets_contains,
    "sets.equivalent": lambda a, b: _sets_contains(a, b) and _sets_contains(b, a),
    "sets.intersects": _sets_intersects,
    "strings.quote": _quote,
    # the mutating admission policies' JSONPatch library: a key as a JSON pointer's token
    "jsonpatch.escapeKey": lambda s: s.replace("~", "~0").replace("/", "~1"),
    "format.named": _format_named,
    "validate": _format_validate,
    **{f"format.{name}": (lambda name=name: {_FORMAT: name}) for name in _FORMAT_NAMES},
    OPTIONAL_FIELD: _optional_field,
    OPTIONAL_INDEX: _optional_index,
    CHAIN_FIELD: _chain_field,
    CHAIN_INDEX: _chain_index,
    HAS: _has,
    ENTRIES: _entries,
    MAP_OF: _map_of,
    MERGED: _merged,
}
