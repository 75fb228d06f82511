"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``): their defaults, their
validation, their status, and the resource types an established one serves.

What apiextensions-apiserver spreads over a strategy and three controllers
(naming, establishing, finalizing) happens here synchronously, at the write, so
that the CRD's custom resources are served as soon as its create returns::

    set_defaults(crd)
    causes = problems(crd, old)                      # [] or the causes of a 422
    set_status(crd, old, others)                     # acceptedNames, conditions, storedVersions
    types = served_types(crd)                        # one ResourceType per served version

A name another CRD of the group has accepted is not accepted again:
``NamesAccepted`` is False and the CRD is not established (not served).
Deleting a CRD marks it ``Terminating`` with the ``CLEANUP_FINALIZER``; the API
deletes its custom resources, then the finalizer, then the CRD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from ..gostrings import quote
from .causes import duplicate, too_many
from .custom import CustomVersion
from .dnsnames import DNS1035_LABEL, DNS1123_SUBDOMAIN
from .selectors import custom_fields_key
from .structural import Cause, describe, structure_problems
from .types import ResourceType
from .versions import priority
from .webhookclient import service_causes, url_causes

__all__ = ["CLEANUP_FINALIZER", "GROUP", "accepted_names_problems", "condition_true", "established", "problems",
           "served_types", "set_defaults", "set_status", "stored_version_problems", "terminate",
           "unrecognized_format_warnings"]

GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"

_DNS1035_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
_SIMPLE_PATH = re.compile(r"(\.[A-Za-z0-9_-]+)+\Z")  # .spec.replicas: fields only, as scale paths must be
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_COLUMN_FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "password")

Obj = dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- defaults ----------------------------------------------------------------------------------
def set_defaults(crd: Obj) -> None:
    """apiextensions/v1 defaulting: singular, listKind, conversion strategy."""
    spec = crd.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    conversion = spec.setdefault("conversion", {"strategy": "None"})
    if isinstance(conversion, dict):
        conversion.setdefault("strategy", "None")
        service = _dict(_dict(_dict(conversion.get("webhook")).get("clientConfig")).get("service"))
        if service:
            service.setdefault("port", 443)


# -- validation --------------------------------------------------------------------------------
# the string formats a 1.37 CRD's schema validates (apiextensions' supportedVersionedFormats, with go-openapi's
# normalization: no dashes), and those of integers and numbers; any other format is taken, with a warning
_STRING_FORMATS = frozenset((
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4", "uuid5",
    "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password", "date", "duration",
    "datetime", "quantity", "k8sshortname", "k8slongname"))
_NUMBER_FORMATS = {"integer": ("int32", "int64"), "number": ("float", "double")}
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def _unrecognized_formats(schema: Any, found: list[str]) -> None:
    """``getUnrecognizedFormatsInSchema``: the formats of ``schema`` and every schema below it
    that its type does not know (``SchemaHas``'s walk: itself, items, allOf, anyOf, oneOf,
    not, properties, additionalProperties)."""
    if not isinstance(schema, dict):
        return
    fmt, kind = schema.get("format"), schema.get("type") or ""
    if isinstance(fmt, str) and fmt:
        if kind in ("", "string"):
            known = fmt.replace("-", "") in _STRING_FORMATS
        else:
            known = fmt in _NUMBER_FORMATS.get(kind, ())
        if not known:
            found.append(fmt)
    items = schema.get("items")
    for sub in items if isinstance(items, list) else [items]:
        _unrecognized_formats(sub, found)
    for key in _SUBSCHEMA_LISTS:
        for sub in _list(schema.get(key)):
            _unrecognized_formats(sub, found)
    _unrecognized_formats(schema.get("not"), found)
    for sub in _dict(schema.get("properties")).values():
        _unrecognized_formats(sub, found)
    _unrecognized_formats(schema.get("additionalProperties"), found)


def _formats_of(crd: Obj | None) -> list[str]:
    found: list[str] = []
    for v in _list(_dict(_dict(crd).get("spec")).get("versions")):
        _unrecognized_formats(_dict(_dict(v).get("schema")).get("openAPIV3Schema"), found)
    return found


def unrecognized_format_warnings(crd: Obj, old: Obj | None) -> list[str]:
    """The strategy's ``WarningsOnCreate``/``WarningsOnUpdate``: ``unrecognized format "x"``
    for each format of the schemas no validator checks (a create's every one, an update's
    only those the stored CRD did not have). Such a format is not refused, and is ignored
    when custom resources are validated."""
    before = set(_formats_of(old)) if old is not None else set()
    return [f"unrecognized format {quote(f)}" for f in _formats_of(crd) if f not in before]


def _required(field: str) -> Cause:
    return {"reason": "FieldValueRequired", "field": field, "message": "Required value"}


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {describe(value)}: {detail}"}


def _dns1035(field: str, value: Any, causes: list[Cause]) -> None:
    if not isinstance(value, str) or not value:
        causes.append(_required(field))
    elif not DNS1035_LABEL.match(value) or len(value) > 63:
        causes.append(_invalid(field, value, _DNS1035_MESSAGE))


def problems(crd: Obj, old: Obj | None = None) -> list[Cause]:
    """What upstream's ValidateCustomResourceDefinition(Update) rejects (the subset
    this server implements), as 422 causes."""
    causes: list[Cause] = []
    meta = _dict(crd.get("metadata"))
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    group, names = spec.get("group"), _dict(spec.get("names"))
    if not isinstance(group, str) or not group:
        causes.append(_required("spec.group"))
    elif not DNS1123_SUBDOMAIN.match(group) or len(group) > 253:
        causes.append(_invalid("spec.group", group, "a lowercase RFC 1123 subdomain must consist of lower case "
                               "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                               "character"))
    elif "." not in group:
        causes.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    elif _protected(group) and APPROVAL_ANNOTATION not in _dict(meta.get("annotations")):
        causes.append({"reason": "FieldValueRequired", "field": f"metadata.annotations[{APPROVAL_ANNOTATION}]",
                       "message": f"Required value: protected groups must have approval annotation "
                                  f"\"{APPROVAL_ANNOTATION}\", see https://github.com/kubernetes/enhancements/"
                                  f"pull/1111"})
    plural = names.get("plural")
    if meta.get("name") != f"{plural}.{group}":
        causes.append(_invalid("metadata.name", meta.get("name", ""), 'must be spec.names.plural+"."+spec.group'))
    causes.extend(_names_problems(names))
    scope = spec.get("scope")
    if scope not in ("Cluster", "Namespaced"):
        causes.append(_required("spec.scope") if not scope else
                      {"reason": "FieldValueNotSupported", "field": "spec.scope",
                       "message": f'Unsupported value: {describe(scope)}: supported values: "Cluster", "Namespaced"'})
    if old is not None:
        causes.extend(_immutable(spec, _dict(old.get("spec")), established(old)))
    if spec.get("preserveUnknownFields") is True:
        causes.append(_invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                               "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
    causes.extend(_conversion_problems(_dict(spec.get("conversion"))))
    old_versions = _list(_dict(old.get("spec")).get("versions")) if old is not None else []
    causes.extend(_versions_problems(spec.get("versions"), old_versions))
    if old is not None and any(w in c["message"] for c in causes for words in _RATCHETED for w in words):
        causes = _ratcheted(causes, _versions_problems(old_versions, old_versions))
    return causes


# the checks upstream skips on an update of a CRD that already failed them (requireAtomicSetType,
# requireMapListKeysMapSetValidation), known by their words
_RATCHETED = (("as item of a list with x-kubernetes-list-type=set",),
              ("so it must have a default or be a required property", "so it cannot be nullable",
               "cannot be nullable when x-kubernetes-list-type is"))


def _ratcheted(causes: list[Cause], old_causes: list[Cause]) -> list[Cause]:
    """``causes`` without those of a ratcheted check the old CRD failed too."""
    for words in _RATCHETED:
        if any(w in c["message"] for c in old_causes for w in words):
            causes = [c for c in causes if not any(w in c["message"] for w in words)]
    return causes


def _conversion_problems(conversion: Obj) -> list[Cause]:
    """Upstream's checks of ``spec.conversion``, reported, as upstream's are, at the
    internal type's paths (``webhookClientConfig``, ``conversionReviewVersions``
    directly under ``spec.conversion``). A Webhook strategy's webhook is called by
    ``api/crdconversion.py``."""
    strategy, webhook = conversion.get("strategy"), conversion.get("webhook")
    if strategy not in ("None", "Webhook"):
        return [{"reason": "FieldValueNotSupported", "field": "spec.conversion.strategy",
                 "message": f'Unsupported value: {describe(strategy)}: supported values: "None", "Webhook"'}]
    webhook = _dict(webhook)
    config, versions = webhook.get("clientConfig"), webhook.get("conversionReviewVersions")
    if strategy == "None":
        return [{"reason": "FieldValueForbidden", "field": f"spec.conversion.{field}",
                 "message": "Forbidden: should not be set when strategy is not set to Webhook"}
                for field, value in (("webhookClientConfig", config), ("conversionReviewVersions", versions))
                if value]
    causes: list[Cause] = []
    field = "spec.conversion.webhookClientConfig"
    if not isinstance(config, dict):
        causes.append({"reason": "FieldValueRequired", "field": field,
                       "message": "Required value: required when strategy is set to Webhook"})
    elif ("url" in config) == ("service" in config):
        causes.append({"reason": "FieldValueRequired", "field": field,
                       "message": "Required value: exactly one of url or service is required"})
    else:
        causes.extend(url_causes(f"{field}.url", config["url"]) if "url" in config
                      else service_causes(f"{field}.service", config["service"]))
    causes.extend(_review_version_problems(versions))
    return causes


def _review_version_problems(versions: Any) -> list[Cause]:
    field = "spec.conversion.conversionReviewVersions"
    if not versions:
        return [_required(field)]
    if not isinstance(versions, list):
        return [_invalid(field, versions, "must be a list")]
    causes, seen = [], set()
    for i, v in enumerate(versions):
        if not isinstance(v, str):
            causes.append(_invalid(f"{field}[{i}]", v, "must be a string"))
            continue
        if v in seen:
            causes.append(_invalid(f"{field}[{i}]", v, "duplicate version"))
            continue
        seen.add(v)
        if not DNS1035_LABEL.match(v) or len(v) > 63:
            causes.append(_invalid(f"{field}[{i}]", v, _DNS1035_MESSAGE))
    if not seen & {"v1", "v1beta1"}:
        causes.append(_invalid(field, versions, "must include at least one of v1, v1beta1"))
    return causes


def _immutable(spec: Obj, old: Obj, was_established: bool) -> list[Cause]:
    """The group and plural make the CRD's name; scope and kind, once established, its storage."""
    fields = [("spec.group", spec.get("group"), old.get("group")),
              ("spec.names.plural", _dict(spec.get("names")).get("plural"), _dict(old.get("names")).get("plural"))]
    if was_established:
        fields += [("spec.scope", spec.get("scope"), old.get("scope")),
                   ("spec.names.kind", _dict(spec.get("names")).get("kind"), _dict(old.get("names")).get("kind"))]
    return [_invalid(field, new, "field is immutable") for field, new, was in fields if new != was]


def stored_version_problems(crd: Obj) -> list[Cause]:
    """Every stored version must still be a version (a migration removes it from
    ``status.storedVersions`` first), and the storage version must be stored."""
    stored = _list(_dict(crd.get("status")).get("storedVersions"))
    if not stored:
        return [_invalid("status.storedVersions", stored, "must have at least one stored version")]
    versions = [v for v in _list(_dict(crd.get("spec")).get("versions")) if isinstance(v, dict)]
    names = {v.get("name") for v in versions}
    causes = [_invalid(f"status.storedVersions[{i}]", v, "must appear in spec.versions")
              for i, v in enumerate(stored) if v not in names]
    for v in versions:
        if v.get("storage") is True and v.get("name") not in stored:
            causes.append(_invalid("status.storedVersions", v.get("name"),
                                   f"must have the storage version {v.get('name')}"))
    return causes


def _protected(group: str) -> bool:
    return any(group == d or group.endswith("." + d) for d in ("k8s.io", "kubernetes.io"))


def _names_problems(names: Obj) -> list[Cause]:
    causes: list[Cause] = []
    _dns1035("spec.names.plural", names.get("plural"), causes)
    if names.get("singular"):
        _dns1035("spec.names.singular", names.get("singular"), causes)
    kind, list_kind = names.get("kind"), names.get("listKind")
    for field, value in (("spec.names.kind", kind), ("spec.names.listKind", list_kind)):
        if not isinstance(value, str) or not value:
            causes.append(_required(field))
        elif not DNS1035_LABEL.match(value.lower()):
            causes.append(_invalid(field, value, "may have mixed case, but should otherwise match: "
                                   "[a-z]([-a-z0-9]*[a-z0-9])?"))
    if kind and kind == list_kind:
        causes.append(_invalid("spec.names.listKind", list_kind, "kind and listKind may not be the same"))
    for i, short in enumerate(_list(names.get("shortNames"))):
        _dns1035(f"spec.names.shortNames[{i}]", short, causes)
    for i, category in enumerate(_list(names.get("categories"))):
        _dns1035(f"spec.names.categories[{i}]", category, causes)
    return causes


def accepted_names_problems(crd: Obj) -> list[Cause]:
    """``ValidateCustomResourceDefinitionStatus``: the accepted names a status write gives
    are names (each one said checked as the spec's are; none required). A plural "BAD!"
    written there was served as the resource's path."""
    names = _dict(_dict(crd.get("status")).get("acceptedNames"))
    causes: list[Cause] = []
    for field in ("plural", "singular"):
        value = names.get(field)
        if value:
            _dns1035(f"status.acceptedNames.{field}", value, causes)
    for field in ("kind", "listKind"):
        value = names.get(field)
        if value and (not isinstance(value, str) or not DNS1035_LABEL.match(value.lower())):
            causes.append(_invalid(f"status.acceptedNames.{field}", value, "may have mixed case, but should "
                                   "otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"))
    for field in ("shortNames", "categories"):
        for i, value in enumerate(_list(names.get(field))):
            _dns1035(f"status.acceptedNames.{field}[{i}]", value, causes)
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(_invalid("status.acceptedNames.listKind", names["listKind"],
                               "kind and listKind may not be the same"))
    return causes


def _shared_path(versions: list[Any], key: str, path: str, top: str) -> str:
    """Where upstream reports a problem in ``versions[i][key]``: at the top-level field ``top``
    when every version has the same value (its conversion to the internal type moves such a
    value there: a one-version CRD's schema errors read ``spec.validation.openAPIV3Schema...``),
    else at the version's ``path``."""
    values = [v.get(key) for v in versions if isinstance(v, dict)]
    return top if all(x == values[0] for x in values) else path


def _versions_problems(versions: Any, old_versions: list[Any] | None = None) -> list[Cause]:
    """The versions' problems; a version whose schema an update leaves as it was is not held
    to the cost limit of one rule (upstream's ``suppressPerExpressionCost``)."""
    unchanged = {v.get("name") for v in old_versions or [] if isinstance(v, dict)
                 for w in (versions if isinstance(versions, list) else []) if isinstance(w, dict)
                 and w.get("name") == v.get("name") and w.get("schema") == v.get("schema")}
    if not isinstance(versions, list) or not versions:
        return [_required("spec.versions")]
    causes: list[Cause] = []
    seen: set[str] = set()
    unique = True
    for i, v in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(v, dict):
            causes.append(_invalid(path, v, "must be an object"))
            continue
        _dns1035(f"{path}.name", v.get("name"), causes)
        unique = unique and v.get("name") not in seen
        seen.add(str(v.get("name")))
        for flag in ("served", "storage"):
            if not isinstance(v.get(flag), bool):
                causes.append(_required(f"{path}.{flag}"))
        schema = _dict(v.get("schema")).get("openAPIV3Schema")
        schema_at = _shared_path(versions, "schema", f"{path}.schema", "spec.validation")
        if schema is None:
            causes.extend(structure_problems(schema, f"{path}.schema.openAPIV3Schema"))
        elif i == 0 or schema_at != "spec.validation":  # a shared schema is checked once
            causes.extend(structure_problems(schema, f"{schema_at}.openAPIV3Schema",
                                             rule_costs=v.get("name") not in unchanged))
        columns = _shared_path(versions, "additionalPrinterColumns", f"{path}.additionalPrinterColumns",
                               "spec.additionalPrinterColumns")
        if i == 0 or columns != "spec.additionalPrinterColumns":
            for j, column in enumerate(_list(v.get("additionalPrinterColumns"))):
                causes.extend(_column_problems(_dict(column), f"{columns}[{j}]"))
        selectable = _shared_path(versions, "selectableFields", f"{path}.selectableFields", "spec.selectableFields")
        if i == 0 or selectable != "spec.selectableFields":
            causes.extend(_selectable_problems(_list(v.get("selectableFields")), schema, selectable))
        subresources = _shared_path(versions, "subresources", f"{path}.subresources", "spec.subresources")
        if i == 0 or subresources != "spec.subresources":
            causes.extend(_scale_problems(_dict(_dict(v.get("subresources")).get("scale")), f"{subresources}.scale"))
    storage = sum(1 for v in versions if isinstance(v, dict) and v.get("storage") is True)
    if not unique:
        causes.append(_invalid("spec.versions", [v.get("name") for v in versions if isinstance(v, dict)],
                               "must contain unique version names"))
    if storage != 1:
        causes.append(_invalid("spec.versions", [v.get("name") for v in versions if isinstance(v, dict)],
                               "must have exactly one version marked as storage version"))
    return causes


MAX_SELECTABLE_FIELDS = 8


def _selectable_problems(fields: list[Any], schema: Any, path: str) -> list[Cause]:
    """A version's ``selectableFields``, as upstream's ValidateCustomResourceSelectableFields:
    each a path to a string, boolean or integer of the schema outside ``metadata``, none
    twice, at most 8."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, selectable in enumerate(fields):
        at = f"{path}[{i}].jsonPath"
        json_path = _dict(selectable).get("jsonPath")
        if not isinstance(json_path, str) or not json_path:
            causes.append(_required(at))
            continue
        found, steps, why = _field_path(json_path, _dict(schema))
        if why is not None:
            causes.append(_invalid(at, json_path, f"is an invalid path: {why}"))
            continue
        if steps[0] == "metadata":
            causes.append(_invalid(at, json_path, "must not point to fields in metadata"))
        if found.get("type") not in ("string", "boolean", "integer"):
            causes.append(_invalid(at, json_path, "must point to a field of type string, boolean or integer. "
                                                  "Enum string fields and strings with formats are allowed."))
        key = ".".join(steps)
        if key in seen:
            causes.append(duplicate(at, json_path))
        seen.add(key)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        causes.append(too_many(path, len(seen), MAX_SELECTABLE_FIELDS))
    return causes


def _field_path(json_path: str, schema: Obj) -> tuple[Obj, list[str], str | None]:
    """Upstream's cel.ValidFieldPath without array notation: ``.a.b`` walked down the
    schema's properties (or a map's values): (the schema found, the steps, the error)."""
    tokens = [t for t in re.split(r"([.\[\]])", json_path) if t]
    steps: list[str] = []
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token == "[":
            return schema, steps, "array notation is not allowed"
        if token != ".":
            return schema, steps, f"expected [ or . but got: {token}"
        if at + 1 == len(tokens):
            return schema, steps, "unexpected end of JSON path"
        name = tokens[at + 1]
        properties, values = schema.get("properties"), schema.get("additionalProperties")
        if isinstance(properties, dict):
            if not isinstance(properties.get(name), dict):
                return schema, steps, "does not refer to a valid field"
            schema = properties[name]
        elif isinstance(values, dict):
            schema = values
        else:
            return schema, steps, "does not refer to a valid field"
        steps.append(name)
        at += 2
    return schema, steps, None


def _scale_problems(scale: Obj, path: str) -> list[Cause]:
    """A scale subresource's paths, as upstream's ValidateCustomResourceDefinitionSubresources."""
    causes: list[Cause] = []
    if not scale:
        return causes
    for key, under in (("specReplicasPath", (".spec.",)), ("statusReplicasPath", (".status.",)),
                       ("labelSelectorPath", (".spec.", ".status."))):
        value = scale.get(key)
        if not value:
            if key != "labelSelectorPath":
                causes.append(_required(f"{path}.{key}"))
        elif not isinstance(value, str) or not value.startswith("."):
            causes.append(_invalid(f"{path}.{key}", value, "must be a simple json path starting with ."))
        elif not _SIMPLE_PATH.match(value) or not value.startswith(under):
            where = "either .spec or .status" if len(under) == 2 else under[0][:-1]
            causes.append(_invalid(f"{path}.{key}", value, f"should be a json path under {where}"))
    return causes


def _column_problems(column: Obj, path: str) -> list[Cause]:
    """A printer column, as upstream's ValidateCustomResourceColumnDefinition words it (its
    internal type names the path ``JSONPath``)."""
    causes: list[Cause] = []
    if not column.get("name"):
        causes.append(_required(f"{path}.name"))
    types = ",".join(sorted(_COLUMN_TYPES))
    if not column.get("type"):
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.type",
                       "message": f"Required value: must be one of {types}"})
    elif column["type"] not in _COLUMN_TYPES:
        causes.append(_invalid(f"{path}.type", column["type"], f"must be one of {types}"))
    if column.get("format") and column["format"] not in _COLUMN_FORMATS:
        formats = ",".join(sorted(_COLUMN_FORMATS))
        causes.append(_invalid(f"{path}.format", column["format"], f"must be one of {formats}"))
    json_path = column.get("jsonPath")
    if not isinstance(json_path, str) or not json_path:
        causes.append(_required(f"{path}.JSONPath"))
    elif not json_path.startswith("."):
        causes.append(_invalid(f"{path}.JSONPath", json_path, "must be a simple json path starting with ."))
    priority = column.get("priority", 0)
    if not isinstance(priority, int) or priority < 0:
        causes.append(_invalid(f"{path}.priority", priority, "must be greater than or equal to 0"))
    return causes


def condition_true(crd: Obj, kind: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
               for c in _list(_dict(crd.get("status")).get("conditions")))


def established(crd: Obj) -> bool:
    return condition_true(crd, "Established")


def _set_condition(status: Obj, kind: str, value: bool | str, reason: str, message: str) -> None:
    """Set condition ``kind`` as upstream's ``SetCRDCondition``: an existing one keeps its
    transition time while its status holds, and its ``observedGeneration`` always
    (CRDObservedGenerationTracking: only a status writer sets one; no controller does)."""
    conditions = [c for c in _list(status.get("conditions")) if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == kind), None)
    text = value if isinstance(value, str) else "True" if value else "False"
    when = old.get("lastTransitionTime") if old is not None and old.get("status") == text else None
    new = {"type": kind, "status": text, "lastTransitionTime": when or _now(), "reason": reason, "message": message}
    if old is not None and old.get("observedGeneration"):
        new["observedGeneration"] = old["observedGeneration"]
    status["conditions"] = [new if c is old else c for c in conditions] if old is not None else [*conditions, new]


def _approval(crd: Obj) -> tuple[str, str, str] | None:
    """The ``KubernetesAPIApprovalPolicyConformant`` condition of a CRD of a protected group
    (``*.k8s.io``, ``*.kubernetes.io``), as upstream's apiapproval controller words it."""
    if not _protected(str(_dict(crd.get("spec")).get("group") or "")):
        return None
    annotation = str(_dict(_dict(crd.get("metadata")).get("annotations")).get(APPROVAL_ANNOTATION) or "")
    why = f"protected groups must have approval annotation {describe(APPROVAL_ANNOTATION)}"
    pr = "see https://github.com/kubernetes/enhancements/pull/1111"
    if not annotation:
        return "False", "MissingAnnotation", f"{why}, {pr}"
    if annotation.startswith("unapproved"):
        return "False", "UnapprovedAnnotation", f"not approved: {describe(annotation)}"
    url = urlsplit(annotation)
    if url.scheme and url.netloc and not any(c.isspace() for c in annotation):
        return "True", "ApprovedAnnotation", f"approved in {annotation}"
    return "False", "InvalidAnnotation", f'{why} with either a URL or a reason starting with "unapproved", {pr}'


def _taken(crd: Obj, others: Iterable[Obj]) -> tuple[set[str], set[str]]:
    """The resource names and the kinds other CRDs of ``crd``'s group have accepted."""
    spec = _dict(crd.get("spec"))
    name = _dict(crd.get("metadata")).get("name")
    resources: set[str] = set()
    kinds: set[str] = set()
    for other in others:
        if _dict(other.get("metadata")).get("name") == name or _dict(other.get("spec")).get("group") != \
                spec.get("group"):
            continue
        taken = _dict(_dict(other.get("status")).get("acceptedNames"))
        resources |= {n for n in (taken.get("plural"), taken.get("singular"), *_list(taken.get("shortNames")))
                      if isinstance(n, str) and n}
        kinds |= {n for n in (taken.get("kind"), taken.get("listKind")) if isinstance(n, str) and n}
    return resources, kinds


def _accept_names(crd: Obj, accepted: Obj, others: Iterable[Obj]) -> tuple[str, str] | None:
    """Accept (into ``accepted``) each requested name no other CRD of the group has
    accepted, as the naming controller does, name by name; (reason, message) of
    the first conflict, if any."""
    names = _dict(_dict(crd.get("spec")).get("names"))
    resources, kinds = _taken(crd, others)
    conflict: tuple[str, str] | None = None
    for what in ("plural", "singular"):
        if names.get(what) in resources:
            conflict = conflict or ("NameConflict", f'"{names[what]}" is already in use')
        elif names.get(what):
            accepted[what] = names[what]
    shorts = [s for s in _list(names.get("shortNames")) if isinstance(s, str)]
    clash = next((s for s in shorts if s in resources), None)
    if clash is not None:
        conflict = conflict or ("NameConflict", f'"{clash}" is already in use')
    elif shorts:
        accepted["shortNames"] = shorts
    else:
        accepted.pop("shortNames", None)
    for what in ("kind", "listKind"):
        if names.get(what) in kinds:
            conflict = conflict or ("KindConflict", f'"{names[what]}" is already in use')
        elif names.get(what):
            accepted[what] = names[what]
    if names.get("categories"):
        accepted["categories"] = list(names["categories"])
    else:
        accepted.pop("categories", None)
    return conflict


def set_status(crd: Obj, old: Obj | None, others: Iterable[Obj]) -> None:
    """What the naming, establishing and API approval controllers would write:
    ``acceptedNames``, ``NamesAccepted`` and ``Established`` (and
    ``KubernetesAPIApprovalPolicyConformant`` for a protected group), and the storage
    version added to ``storedVersions``. Once established, a CRD stays established."""
    status = crd["status"] = dict(_dict(old.get("status")) if old is not None else {})
    spec = _dict(crd.get("spec"))
    # plural and kind are not optional in the API (clients' models require them)
    accepted = {"plural": "", "kind": ""} | dict(_dict(status.get("acceptedNames")))
    conflict = _accept_names(crd, accepted, others)
    status["acceptedNames"] = accepted
    if conflict is None:
        _set_condition(status, "NamesAccepted", True, "NoConflicts", "no conflicts found")
    else:
        _set_condition(status, "NamesAccepted", False, *conflict)
    if conflict is None or established(crd):
        if not condition_true({"status": status}, "Established"):
            _set_condition(status, "Established", True, "InitialNamesAccepted", "the initial names have been accepted")
    else:
        _set_condition(status, "Established", False, "NotAccepted", "not all names are accepted")
    approval = _approval(crd)
    if approval is not None:
        _set_condition(status, "KubernetesAPIApprovalPolicyConformant", *approval)
    stored = [v for v in _list(status.get("storedVersions")) if isinstance(v, str)]
    for v in _list(spec.get("versions")):
        if isinstance(v, dict) and v.get("storage") is True and v.get("name") not in stored:
            stored.append(v["name"])
    status["storedVersions"] = stored


def terminate(crd: Obj) -> None:
    """Mark ``crd`` for deletion: its custom resources go first (the finalizer)."""
    meta = crd.setdefault("metadata", {})
    finalizers = meta.setdefault("finalizers", [])
    if CLEANUP_FINALIZER not in finalizers:
        finalizers.append(CLEANUP_FINALIZER)
    _set_condition(crd.setdefault("status", {}), "Terminating", True, "InstanceDeletionInProgress",
                   "CustomResource deletion is in progress")


# -- what it serves ------------------------------------------------------------------------------
def _deprecation_warning(spec: Obj, version: Obj, kind: str) -> str:
    """The warning every request to a deprecated version gets: its ``deprecationWarning``,
    else upstream's default, naming the preferred version that is not deprecated."""
    if version.get("deprecated") is not True:
        return ""
    if isinstance(version.get("deprecationWarning"), str):
        return str(version["deprecationWarning"])
    group = spec.get("group")
    warning = f"{group}/{version.get('name')} {kind} is deprecated"
    others = sorted((str(v["name"]) for v in _list(spec.get("versions"))
                     if isinstance(v, dict) and isinstance(v.get("name"), str)
                     and v.get("served") is True and v.get("deprecated") is not True), key=priority)
    return f"{warning}; use {group}/{others[0]} {kind}" if others else warning


def served_types(crd: Obj) -> list[ResourceType]:
    """One ResourceType per served version of an established CRD (none otherwise)."""
    if not established(crd):
        return []
    spec = _dict(crd.get("spec"))
    names = _dict(_dict(crd.get("status")).get("acceptedNames"))
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not (isinstance(group, str) and isinstance(plural, str) and isinstance(kind, str)):
        return []
    crd_name = str(_dict(crd.get("metadata")).get("name", ""))
    conversion = _dict(spec.get("conversion"))
    webhook = _dict(conversion.get("webhook")) if conversion.get("strategy") == "Webhook" else None
    storage = next((str(v["name"]) for v in _list(spec.get("versions"))
                    if isinstance(v, dict) and v.get("storage") is True and isinstance(v.get("name"), str)), "")
    namespaced = spec.get("scope") == "Namespaced"
    selectable = {str(v["name"]): _selectable_paths(v) for v in _list(spec.get("versions"))
                  if isinstance(v, dict) and isinstance(v.get("name"), str)}
    fields_key = custom_fields_key(crd_name, namespaced, tuple(sorted({p for ps in selectable.values() for p in ps})))
    types = []
    for v in _list(spec.get("versions")):
        if not isinstance(v, dict) or v.get("served") is not True or not isinstance(v.get("name"), str):
            continue
        subresources = _dict(v.get("subresources"))
        schema = _dict(v.get("schema")).get("openAPIV3Schema")
        scale = _dict(subresources.get("scale"))
        version = CustomVersion(crd_name, schema if isinstance(schema, dict) else None,
                                tuple(c for c in _list(v.get("additionalPrinterColumns")) if isinstance(c, dict)),
                                list_kind=str(names.get("listKind") or kind + "List"),
                                deprecation_warning=_deprecation_warning(spec, v, kind),
                                scale={k: str(p) for k, p in scale.items() if isinstance(p, str)} if scale else None,
                                conversion=webhook, storage_version=storage,
                                selectable_fields=selectable[v["name"]], fields_key=fields_key)
        types.append(ResourceType(
            group, v["name"], kind, plural, namespaced,
            short_names=tuple(_list(names.get("shortNames"))), categories=tuple(_list(names.get("categories"))),
            subresources=tuple(r for r in ("status", "scale") if r in subresources),
            storage_group=group, singular=str(names.get("singular") or kind.lower()), custom=version))
    return types


def _selectable_paths(version: Obj) -> tuple[str, ...]:
    """A version's ``selectableFields``, each its ``jsonPath`` without the leading dot (the
    field's name in a selector, as upstream's prepareSelectableFields names it)."""
    return tuple(dict.fromkeys(str(f["jsonPath"]).removeprefix(".") for f in _list(version.get("selectableFields"))
                               if isinstance(f, dict) and isinstance(f.get("jsonPath"), str) and f["jsonPath"]))
