"""What resource.k8s.io/v1's types share, as upstream's ``pkg/apis/resource/validation`` checks
it: the limits of ``k8s.io/api/resource/v1``, names (driver, pool, device, request and class
names, qualified attribute names, UIDs), references to a claim's requests
(``request`` or ``request/subrequest``), tolerations, opaque configurations, binding
conditions and metav1 conditions, each answering the causes of a 422 in upstream's words.

A list over its limit is that one cause (``bounded``: upstream stops there, against
denial of service); names seen valid are remembered (the scheduler's every status write
names the same few drivers, pools and devices)::

    >>> pool_name("", "spec.pool.name")
    [{'reason': 'FieldValueRequired', 'field': 'spec.pool.name', 'message': 'Required value'}]
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from .causes import Causes, cause, duplicate, invalid, not_supported, required
from .podvalidation import (
    _node_selector_term,
    dns_label_problems,
    label_key_problems,
    label_value_problems,
    subdomain_problems,
)
from .volumes import csi_driver_name_causes

__all__ = ["ALLOCATION_MODES", "BINDING_CONDITIONS_MAX", "CEL_MAX_LENGTH", "CONFIGS_MAX", "CONFIG_SOURCES",
           "CONSTRAINTS_MAX", "DEVICE_CONDITIONS_MAX", "DEVICE_DATA_MAX", "DEVICE_MAX_DOMAIN", "DEVICE_MAX_ID",
           "HARDWARE_ADDRESS_MAX", "IMMUTABLE", "INTERFACE_NAME_MAX", "IPS_MAX", "OPAQUE_PARAMETERS_MAX",
           "POOL_NAME_MAX", "REQUESTS_MAX", "REQUEST_REF", "RESERVED_FOR_MAX", "SELECTORS_MAX", "SUBREQUESTS_MAX",
           "TAINT_EFFECTS", "TOLERATION_OPERATORS", "RequestNames", "as_json", "binding_conditions", "bounded",
           "conditions_causes", "device_class_name", "device_configuration", "driver_name", "fully_qualified_name",
           "immutable", "items", "label", "label_name", "label_value", "mapping", "node_selector", "pool_name",
           "qualified_name", "raw_object", "request_names", "request_ref", "request_refs", "subdomain", "text",
           "toleration_causes", "too_long", "too_many", "uid", "unique"]

Obj = dict[str, Any]

# upstream's limits (k8s.io/api/resource/v1)
REQUESTS_MAX = 32  # DeviceRequestsMaxSize, AllocationResultsMaxSize
SUBREQUESTS_MAX = 8  # FirstAvailableDeviceRequestMaxSize
SELECTORS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIGS_MAX = 32
CEL_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX = 10 * 1024
RESERVED_FOR_MAX = 256
DEVICE_CONDITIONS_MAX = 8
DEVICE_DATA_MAX = 10 * 1024
INTERFACE_NAME_MAX = 256
HARDWARE_ADDRESS_MAX = 128
IPS_MAX = 16
POOL_NAME_MAX = 253
BINDING_CONDITIONS_MAX = 4
ALLOCATION_MODES = ("All", "ExactCount")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # upstream's sorted set
CONFIG_SOURCES = ("FromClaim", "FromClass")
IMMUTABLE = "field is immutable"
REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def as_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def too_long(field: str, limit: int) -> dict[str, str]:
    return cause("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")


def too_many(field: str, n: int, limit: int) -> dict[str, str]:
    return cause("FieldValueTooMany", field, f"Too many: {n}: must have at most {limit} items")


def immutable(field: str, value: Any) -> dict[str, str]:
    return cause("FieldValueInvalid", field, f"Invalid value: {as_json(value)}: {IMMUTABLE}")


_VALID_LABELS: set[str] = set()  # names seen valid: the scheduler's every status write names the same few
_VALID_SUBDOMAINS: set[str] = set()


def _remember(seen: set[str], value: str) -> None:
    if len(seen) < 4096:
        seen.add(value)


def label(value: Any, field: str) -> Causes:
    """``ValidateDNS1123Label`` (request, device and counter names)."""
    value = text(value)
    if value in _VALID_LABELS:
        return []
    problems = dns_label_problems(value)
    if not problems:
        _remember(_VALID_LABELS, value)
    return [invalid(field, value, p) for p in problems]


def subdomain(value: Any, field: str) -> Causes:
    """``ValidateDNS1123Subdomain`` (device class names, pool name parts)."""
    value = text(value)
    if value in _VALID_SUBDOMAINS:
        return []
    problems = subdomain_problems(value)
    if not problems:
        _remember(_VALID_SUBDOMAINS, value)
    return [invalid(field, value, p) for p in problems]


_VALID_DRIVERS: set[str] = set()


def driver_name(value: Any, field: str) -> Causes:
    """``ValidateCSIDriverName``: a driver's name is a CSI driver's."""
    value = text(value)
    if value in _VALID_DRIVERS:
        return []
    causes = csi_driver_name_causes(value, field)
    if not causes:
        _remember(_VALID_DRIVERS, value)
    return causes


def pool_name(value: Any, field: str) -> Causes:
    """``validatePoolName``: required, at most 253 bytes, DNS subdomains joined by ``/``."""
    value = text(value)
    if not value:
        return [required(field)]
    causes = [too_long(field, POOL_NAME_MAX)] if len(value) > POOL_NAME_MAX else []
    for part in value.split("/"):
        causes += subdomain(part, field)
    return causes


def device_class_name(value: Any, field: str) -> Causes:
    return [required(field)] if not text(value) else subdomain(value, field)


def uid(value: Any, field: str) -> Causes:
    """``validateUID`` (a share ID): an RFC 4122 UUID (as Go's ``uuid.Validate`` reads one),
    normalized (hyphens, lower case)."""
    value = text(value)
    try:
        uuid.UUID(value)
    except ValueError:
        problem = "invalid UUID format" if len(value) in (32, 36, 38, 45) else f"invalid UUID length: {len(value)}"
        return [invalid(field, value, f"error validating uid: {problem}")]
    if len(value) != 36 or value != value.lower():
        return [invalid(field, value, "uid must be in RFC 4122 normalized form, "
                                      "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")]
    return []


def label_name(value: Any, field: str) -> Causes:
    """``ValidateLabelName``: a qualified name (a taint's key, a binding condition)."""
    value = text(value)
    return [invalid(field, value, p) for p in label_key_problems(value)]


def label_value(value: Any, field: str) -> Causes:
    value = text(value)
    return [invalid(field, value, p) for p in label_value_problems(value)]


def unique(keys: Iterable[Any], path: str, shown: Callable[[Any], Any] = lambda k: k) -> Causes:
    """``validateSet``'s duplicates: each repeated key at its own index."""
    seen: set[Any] = set()
    causes: Causes = []
    for i, key in enumerate(keys):
        if key in seen:
            causes.append(duplicate(f"{path}[{i}]", shown(key)))
        else:
            seen.add(key)
    return causes


def node_selector(selector: Any, field: str) -> Causes:
    """``ValidateNodeSelector``: at least one term, each term's requirements."""
    terms = items(mapping(selector).get("nodeSelectorTerms"))
    at = f"{field}.nodeSelectorTerms"
    if not terms:
        return [required(at, "must have at least one node selector term")]
    causes: Causes = []
    for i, term in enumerate(terms):
        if isinstance(term, dict):
            _node_selector_term(term, f"{at}[{i}]", True, causes)
    return causes


def raw_object(value: Any, field: str, limit: int, stored: bool = False) -> Causes:
    """``validateRawExtension``: a JSON object, of at most ``limit`` bytes when new."""
    if value is None:
        return [required(field)]
    if not stored and len(orjson.dumps(value)) > limit:
        return [too_long(field, limit)]
    if not isinstance(value, dict):
        return [invalid(field, "<value omitted>", "must be a valid JSON object")]
    return []


def binding_conditions(obj: Obj, field: str) -> Causes:
    """``validateDeviceBindingParameters``: at most 4 of each, label names, no repeats, no
    overlap, and one list only with the other."""
    if "bindingConditions" not in obj and "bindingFailureConditions" not in obj:
        return []
    conditions, failures = items(obj.get("bindingConditions")), items(obj.get("bindingFailureConditions"))
    causes: Causes = []
    for key, listed in (("bindingConditions", conditions), ("bindingFailureConditions", failures)):
        if len(listed) > BINDING_CONDITIONS_MAX:
            causes.append(too_many(f"{field}{key}", len(listed), BINDING_CONDITIONS_MAX))
        else:
            for i, c in enumerate(listed):
                causes += label_name(c, f"{field}{key}[{i}]")
    causes += unique(conditions, f"{field}bindingConditions")
    seen: set[Any] = set()
    for i, c in enumerate(failures):
        if c in seen:
            causes.append(duplicate(f"{field}bindingFailureConditions[{i}]", c))
        seen.add(c)
        if c in conditions:
            causes.append(invalid(f"{field}bindingFailureConditions[{i}]", c,
                                  "bindingFailureConditions must not overlap with bindingConditions"))
    if not conditions and failures:
        causes.append(cause("FieldValueInvalid", f"{field}bindingConditions",
                            "Invalid value: []string(nil): bindingConditions are required to use "
                            "bindingFailureConditions"))
    if not failures and conditions:
        causes.append(cause("FieldValueInvalid", f"{field}bindingFailureConditions",
                            "Invalid value: []string(nil): bindingFailureConditions are required to use "
                            "bindingConditions"))
    return causes


DEVICE_MAX_DOMAIN = 63
DEVICE_MAX_ID = 32
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_IDENTIFIER_HINT = ("a valid C identifier must start with alphabetic character or '_', followed by a string of "
                      "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                      "validation is '[A-Za-z_][A-Za-z0-9_]*')")


def _c_identifier(value: str, field: str) -> Causes:
    causes = [too_long(field, DEVICE_MAX_ID)] if len(value) > DEVICE_MAX_ID else []
    if not _C_IDENTIFIER.match(value):
        causes.append(invalid(field, value, _C_IDENTIFIER_HINT))
    return causes


def qualified_name(name: str, field: str) -> Causes:
    """``validateQualifiedName``: a C identifier, or a driver name's domain, ``/``, and one."""
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier(name, field)
    if len(parts) > 2:
        return [invalid(field, name, "must not contain more than one slash")]
    domain, ident = parts
    causes = driver_name(domain, field) if domain else [invalid(field, "", "the domain must not be empty")]
    return causes + (_c_identifier(ident, field) if ident else [invalid(field, "", "the name must not be empty")])


def fully_qualified_name(name: Any, field: str) -> Causes:
    name = text(name)
    causes = qualified_name(name, field)
    if "/" not in name:
        causes.append(invalid(field, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return causes


def bounded(listed: list[Any], limit: int, path: str,
            each: Callable[[Obj, str], Causes]) -> Causes:
    """``validateSlice``: at most ``limit`` entries (else that alone), each checked."""
    if len(listed) > limit:
        return [too_many(path, len(listed), limit)]
    causes: Causes = []
    for i, item in enumerate(listed):
        causes += each(mapping(item), f"{path}[{i}]")
    return causes


RequestNames = dict[str, frozenset[str] | None]


def request_names(spec: Any) -> RequestNames:
    """``gatherRequestNames``: each request's name, with its subrequests' names."""
    names: RequestNames = {}
    for request in items(mapping(mapping(spec).get("devices")).get("requests")):
        request = mapping(request)
        subs = items(request.get("firstAvailable"))
        names[text(request.get("name"))] = frozenset(text(mapping(s).get("name")) for s in subs) if subs else None
    return names


def _names_request(names: RequestNames, ref: str) -> bool:
    segments = ref.split("/")
    if len(segments) > 2 or segments[0] not in names:
        return False
    subs = names[segments[0]]
    return len(segments) == 1 or (subs is not None and segments[1] in subs)


def request_ref(ref: Any, field: str, names: RequestNames) -> Causes:
    """``validateRequestNameRef``: ``request`` or ``request/subrequest`` of this claim."""
    ref = text(ref)
    segments = ref.split("/")
    if len(segments) > 2:
        return [invalid(field, ref, REQUEST_REF)]
    causes: Causes = []
    for segment in segments:
        causes += label(segment, field)
    if not _names_request(names, ref):
        causes.append(invalid(field, ref, REQUEST_REF))
    return causes


def request_refs(refs: Any, path: str, names: RequestNames) -> Causes:
    listed = items(refs)
    if len(listed) > REQUESTS_MAX:
        return [too_many(path, len(listed), REQUESTS_MAX)]
    causes: Causes = []
    for i, ref in enumerate(listed):
        causes += request_ref(ref, f"{path}[{i}]", names)
    return causes + unique(listed, path)


def toleration_causes(toleration: Any, path: str) -> Causes:
    """``validateDeviceToleration``."""
    toleration = mapping(toleration)
    causes: Causes = []
    if toleration.get("key"):
        causes += label_name(toleration["key"], f"{path}.key")
    operator, value = toleration.get("operator"), text(toleration.get("value"))
    if operator == "Exists":
        if value:
            causes.append(invalid(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        causes += label_value(value, f"{path}.value")
    elif not operator:
        causes.append(required(f"{path}.operator"))
    else:
        causes.append(not_supported(f"{path}.operator", operator, TOLERATION_OPERATORS))
    effect = toleration.get("effect")
    if effect and effect not in TAINT_EFFECTS:
        causes.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return causes


def device_configuration(config: Obj, path: str, stored: bool) -> Causes:
    """``validateDeviceConfiguration``: an opaque config naming its driver, with parameters."""
    opaque = config.get("opaque")
    if not isinstance(opaque, dict):
        return [required(f"{path}.opaque")]
    return (driver_name(opaque.get("driver"), f"{path}.opaque.driver")
            + raw_object(opaque.get("parameters"), f"{path}.opaque.parameters", OPAQUE_PARAMETERS_MAX, stored))


_CONDITION_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?\Z")
_CONDITION_REASON_HINT = ("a condition reason must start with alphabetic character, optionally followed by a string "
                          "of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' "
                          "(e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or "
                          "'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')")


def conditions_causes(conditions: list[Any], path: str) -> Causes:
    """metav1's ``ValidateConditions``: types unique label names, statuses True, False or
    Unknown, a transition time, a reason of the reason syntax."""
    causes: Causes = []
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        c, at = mapping(c), f"{path}[{i}]"
        kind = text(c.get("type"))
        if kind in seen:
            causes.append(duplicate(f"{at}.type", kind))
        seen.add(kind)
        causes += label_name(kind, f"{at}.type")
        if c.get("status") not in ("True", "False", "Unknown"):
            causes.append(not_supported(f"{at}.status", text(c.get("status")), ("False", "True", "Unknown")))
        generation = c.get("observedGeneration")
        if isinstance(generation, int) and generation < 0:
            causes.append(invalid(f"{at}.observedGeneration", generation, "must be greater than or equal to zero"))
        if not c.get("lastTransitionTime"):
            causes.append(required(f"{at}.lastTransitionTime", "must be set"))
        reason = text(c.get("reason"))
        if not reason:
            causes.append(required(f"{at}.reason", "must be set"))
        elif not _CONDITION_REASON.match(reason):
            causes.append(invalid(f"{at}.reason", reason, _CONDITION_REASON_HINT))
        if len(reason) > 1024:
            causes.append(too_long(f"{at}.reason", 1024))
        if len(text(c.get("message"))) > 32768:
            causes.append(too_long(f"{at}.message", 32768))
    return causes
