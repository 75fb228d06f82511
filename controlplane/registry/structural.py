"""Custom resources against their CustomResourceDefinition's ``openAPIV3Schema``:
pruning, defaulting and validation, as apiextensions-apiserver does them
(the structural schema subset, and CEL ``x-kubernetes-validations``, transition rules included).

The order is upstream's: unknown fields are pruned, then defaults are filled
in, then the result is validated::

    pruned = prune(schema, obj)          # ["spec.extra"]: the paths dropped
    apply_defaults(schema, obj)
    causes = validate(schema, obj)       # [] or the causes of a 422 Invalid
    causes = validate(schema, obj, old=stored)   # an update: transition rules (oldSelf) run too, and
                                                 # what it leaves unchanged is not held against it

A cause is a ``metav1.StatusCause``; its message is what kube-apiserver's
``field.Error.ErrorBody()`` says, e.g. for ``spec.replicas: "two"`` against
``type: integer``::

    {"reason": "FieldValueTypeInvalid", "field": "spec.replicas",
     "message": 'Invalid value: "string": spec.replicas in body must be of type integer: "string"'}

``structure_problems`` checks that a schema is structural (what a v1 CRD
requires) and that its defaults are valid.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
import uuid
from contextvars import ContextVar
from datetime import date, datetime
from typing import Any

import orjson

from controlplane.gostrings import quote
from controlplane.registry.celcheck import CelType, schema_type
from controlplane.registry.celcost import cardinality_below
from controlplane.registry.goregexp import compile_go, syntax_error

__all__ = ["apply_defaults", "describe", "prune", "structure_problems", "validate"]

Schema = dict[str, Any]
Cause = dict[str, str]

TYPES = ("array", "boolean", "integer", "number", "object", "string")
# kept at the root of every object, and of embedded resources, whatever the schema says
_OBJECT_FIELDS = ("apiVersion", "kind", "metadata")


# -- values as Go prints them in field errors ------------------------------------------------
def describe(value: Any) -> str:
    """A bad value as ``field.Error`` shows it: strings quoted, numbers bare, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _number(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


# Go decodes a custom resource's number into an int64 where it is one and a float64 otherwise;
# kube-openapi takes a float64 for an integer only up to 2**53 - 1 (swag.IsFloat64AJSONInteger)
_INT64 = 1 << 63
_MAX_JSON_INTEGER = (1 << 53) - 1


def json_type(value: Any) -> str:
    """The OpenAPI type name of a JSON value (what "must be of type X: <this>" shows), as
    upstream's validator sees the value Go decoded: an integer past an int64 is a float64
    there, and a whole float64 is an integer only within 2**53 (1e300 and 2**70 are numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if -_INT64 <= value < _INT64 else "number"
    if isinstance(value, float):
        return "integer" if value.is_integer() and abs(value) <= _MAX_JSON_INTEGER else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _invalid(path: str, value: Any, detail: str, reason: str = "FieldValueInvalid") -> Cause:
    return {"reason": reason, "field": path, "message": f"Invalid value: {describe(value)}: {detail}"}


def _in_body(path: str) -> str:
    return f"{path} in body" if path else "in body"


# -- pruning ---------------------------------------------------------------------------------
def prune(schema: Schema, obj: dict[str, Any]) -> list[str]:
    """Drop the fields of ``obj`` (a whole object: apiVersion, kind, metadata kept)
    that ``schema`` does not declare; returns the dropped paths. Nulls of declared
    fields that are not ``nullable`` are dropped too (not reported: not unknown)."""
    dropped: list[str] = []
    _prune(schema, obj, "", dropped, is_resource=True)
    return dropped


def _prune(schema: Schema, value: Any, path: str, dropped: list[str], is_resource: bool = False) -> None:
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        resource = is_resource or schema.get("x-kubernetes-embedded-resource") is True
        for key in list(value):
            # an object's metadata is ObjectMeta, whatever the schema says of it (controller-gen
            # declares `metadata: {type: object}`); apiVersion and kind are always kept
            if resource and key in _OBJECT_FIELDS and (key == "metadata" or key not in props):
                continue
            known = props.get(key, extra if isinstance(extra, dict) else None)
            if known is not None and value[key] is None and not known.get("nullable"):
                del value[key]  # null of a field that is not nullable: dropped, then defaulted, as upstream
            elif known is not None:
                _prune(known, value[key], _child(path, key), dropped)
            elif extra is True or preserve:
                continue
            else:
                del value[key]
                dropped.append(_child(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(items, item, f"{path}[{i}]", dropped)


# -- defaulting ------------------------------------------------------------------------------
def apply_defaults(schema: Schema, value: Any) -> None:
    """Fill in the ``default`` of every absent property (and of nulls where the
    property is not nullable), depth first, in place."""
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        for key, prop in props.items():
            if "default" in prop and (key not in value or (value[key] is None and not prop.get("nullable"))):
                value[key] = copy.deepcopy(prop["default"])
            if key in value:
                apply_defaults(prop, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in props:
                    apply_defaults(extra, item)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_defaults(items, item)


# -- validation ------------------------------------------------------------------------------
_ABSENT: Any = object()  # no old value at a path: a create, or a value the old object did not have

# errors that mean the object does not have the shape its CEL rules were written for: the rules
# are not run then (apiextensions-apiserver's hasBlockingErr)
_BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
                       "FieldValueTypeInvalid"})
_RULES_NOT_RUN: Cause = {
    "reason": "FieldValueInvalid", "field": "<nil>",
    "message": "Invalid value: null: some validation rules were not checked because the object was invalid; "
               "correct the existing errors to complete validation"}  # a nil value: JSON's null since 1.34


def validate(schema: Schema, value: Any, path: str = "", old: Any = _ABSENT,
             ratcheted: list[Cause] | None = None) -> list[Cause]:
    """The causes ``value`` fails ``schema`` with (empty when it is valid). ``old``, on an
    update, is the stored object: transition rules (those naming ``oldSelf``) run where
    the old object has a value correlated with the new one (same property, map key, or
    ``x-kubernetes-list-type: map`` keys). As upstream, the CEL rules' causes follow the
    schema's, and are not looked for at all when the schema's say the object has the
    wrong shape (a type, required, enum or size error). The failed rules of values the
    update leaves unchanged, ratcheted, are added to ``ratcheted``: upstream sends each
    as a warning (the schema's own ratcheted errors it drops silently)."""
    causes: list[Cause] = []
    rule_causes: list[Cause] = []
    token = _RATCHETED.set(ratcheted)
    try:
        _validate(schema, value, path, causes, old, rule_causes)
    finally:
        _RATCHETED.reset(token)
    if any(c["reason"] in _BLOCKING for c in causes):
        return [*causes, dict(_RULES_NOT_RUN)] if _has_rules(schema) else causes
    return causes + rule_causes


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as Go's DeepEqual of decoded JSON finds them: types
    too (``1`` is not ``1.0`` nor ``true``), the test of ratcheting."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _has_rules(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    return any(_has_rules(s) for s in (schema.get("properties") or {}).values()) \
        or _has_rules(schema.get("items")) or _has_rules(schema.get("additionalProperties"))


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return json_type(value) == "integer"
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def _type_error(path: str, value: Any, expected: str) -> Cause:
    got = json_type(value)
    return {"reason": "FieldValueTypeInvalid", "field": path,
            "message": f"Invalid value: {describe(got)}: {_in_body(path)} must be of type {expected}: "
                       f"{describe(got)}"}


def _validate(schema: Schema, value: Any, path: str, causes: list[Cause], old: Any = _ABSENT,
              rule_causes: list[Cause] | None = None) -> None:
    if rule_causes is None:
        rule_causes = causes
    if old is not _ABSENT and same(value, old):
        causes = []  # ratcheting: the errors of a value an update leaves as it was are not reported
    expected = schema.get("type")
    if value is None:
        if schema.get("nullable") or (not expected and not schema.get("x-kubernetes-int-or-string")):
            return
        causes.append(_type_error(path, value, expected or "integer or string"))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if json_type(value) not in ("integer", "string"):
            causes.append(_type_error(path, value, "integer or string"))
            return
    elif expected and not _type_ok(expected, value):
        causes.append(_type_error(path, value, expected))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(describe(v) if isinstance(v, str) else f'"{describe(v)}"' for v in schema["enum"])
        causes.append({"reason": "FieldValueNotSupported", "field": path,
                       "message": f"Unsupported value: {describe(value)}: supported values: {allowed}"})
    rules = schema.get("x-kubernetes-validations")
    if rules and isinstance(rules, list):  # a value's own rules before its children's, as upstream
        _validate_rules(rules, schema, value, path, rule_causes, old)
    if isinstance(value, str):
        _validate_string(schema, value, path, causes)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(schema, value, path, causes)
    elif isinstance(value, list):
        _validate_array(schema, value, path, causes, old, rule_causes)
    elif isinstance(value, dict):
        _validate_object(schema, value, path, causes, old, rule_causes)
    for sub in schema.get("allOf") or []:
        if isinstance(sub, dict):
            _validate(sub, value, path, causes, old, rule_causes)
    for key in ("anyOf", "oneOf"):
        options = [s for s in schema.get(key) or [] if isinstance(s, dict)]
        if options:
            passing = sum(1 for s in options if not validate(s, value, path))
            if passing == 0 or (key == "oneOf" and passing > 1):
                what = "any" if key == "anyOf" else "only one"
                causes.append(_invalid(path, value, f"{_in_body(path)} must validate {what} of the schemas"))
    if isinstance(schema.get("not"), dict) and not validate(schema["not"], value, path):
        causes.append(_invalid(path, value, f"{_in_body(path)} must not validate the schema (not)"))


_OLD_SELF = re.compile(r"\boldSelf\b")
# where validate() collects the failed rules it ratchets (None: nowhere), for the nested calls
_RATCHETED: ContextVar[list[Cause] | None] = ContextVar("controlplane_ratcheted_rules", default=None)

_MAX_MESSAGE_EXPRESSION_BYTES = 5000  # celconfig.MaxEvaluatedMessageExpressionSizeBytes


def _validate_rules(rules: list[Any], schema: Schema, value: Any, path: str, causes: list[Cause],
                    old: Any = _ABSENT) -> None:
    """CEL ``x-kubernetes-validations``, with ``self`` the value at ``path``. A failed rule
    is its ``messageExpression``'s string, else its ``message``, else ``failed rule: <rule>``,
    on ``path`` (and its ``fieldPath``) with its ``reason``. Transition rules (naming
    ``oldSelf``) run only where there is an old value (``old``), as upstream; those with
    ``optionalOldSelf: true`` run where there is none too, ``oldSelf`` an optional
    (``optional.none()`` on a create, else ``optional.of(old)``).

    Worded as upstream since 1.35: the value of a scalar is shown (``Invalid value: 3: too
    big``), an object's or a list's is not (``Invalid value: too big``); a rule that fails to
    run names its type and the rule (``Invalid value: "object": no such key: x evaluating
    rule: <message>``)."""
    from .expressions import ExpressionError, context_of, evaluate

    context = optional_context = None
    kind = schema.get("type") or ""
    unchanged = old is not _ABSENT and same(value, old)
    for rule in rules:
        text = rule.get("rule") if isinstance(rule, dict) else None
        if not isinstance(text, str):
            continue
        transition = _OLD_SELF.search(text) is not None
        optional_old = transition and rule.get("optionalOldSelf") is True
        if transition and old is _ABSENT and not optional_old:
            continue
        if optional_old:  # oldSelf an optional: of the old value, or none on a create
            optional_context = optional_context or context_of({"self": value, "oldSelf": _optional_of(old)})
        elif context is None:
            context = context_of({"self": value} if old is _ABSENT else {"self": value, "oldSelf": old})
        run_in = optional_context if optional_old else context
        message = str(rule.get("message") or "").strip()
        field = path
        if isinstance(rule.get("fieldPath"), str) and rule["fieldPath"]:  # e.g. .a['b'] under spec: spec.a.b
            relative = normalized_field_path(schema, rule["fieldPath"])
            field = (f"{path}.{relative}" if path else relative) if relative else path
        try:
            ok = evaluate(text, run_in, unescape=True) is True
        except ExpressionError as e:
            causes.append({"reason": "FieldValueInvalid", "field": path, "message":
                           f"Invalid value: {describe(kind)}: {e} evaluating rule: {message or text.strip()}"})
            continue
        if not ok:
            detail = _message_of(rule, run_in) or message or f"failed rule: {text.strip()}"
            failure = _rule_failure(str(rule.get("reason") or ""), field, value, kind, detail)
            if unchanged and not transition:  # ratcheting, but never of a transition rule
                _ratchet(failure)
            else:
                causes.append(failure)


def _ratchet(failure: Cause) -> None:
    collected = _RATCHETED.get()
    if collected is not None:
        collected.append(failure)


def _optional_of(old: Any) -> Any:
    import cel

    return cel.OptionalValue.none() if old is _ABSENT else cel.OptionalValue.of(old)


def _message_of(rule: dict[str, Any], context: Any) -> str | None:
    """A rule's ``messageExpression``, evaluated; None where upstream falls back to its ``message``
    (no expression, an error, not a string, empty, too long, with a line break)."""
    from .expressions import ExpressionError, evaluate

    if not rule.get("messageExpression"):
        return None
    try:
        made = evaluate(str(rule["messageExpression"]), context, unescape=True)
    except ExpressionError:
        return None
    if not isinstance(made, str):
        return None
    made = made.strip()
    if not made or len(made.encode()) > _MAX_MESSAGE_EXPRESSION_BYTES or "\n" in made or "\r" in made:
        return None
    return made


def _rule_failure(reason: str, field: str, value: Any, kind: str, detail: str) -> Cause:
    """The cause of a failed rule, as upstream's fieldErrorForReason words it."""
    shown = "" if kind in ("object", "array") else f"{describe(value)}: "  # field.OmitValueType for composites
    if reason == "FieldValueForbidden":
        return {"reason": reason, "field": field, "message": f"Forbidden: {detail}"}
    if reason == "FieldValueRequired":
        return {"reason": reason, "field": field, "message": f"Required value: {detail}"}
    if reason == "FieldValueDuplicate":  # field.Duplicate takes no detail
        return {"reason": reason, "field": field, "message": f"Duplicate value: {shown[:-2]}" if shown
                else "Duplicate value"}
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}{detail}"}


def _validate_string(schema: Schema, value: str, path: str, causes: list[Cause]) -> None:
    _validate_length_and_pattern(schema, value, path, causes)
    fmt = schema.get("format")
    if isinstance(fmt, str) and not _format_ok(fmt, value):
        causes.append(_invalid(path, value, f"{_in_body(path)} must be of type {fmt}: {describe(value)}"))


def _validate_length_and_pattern(schema: Schema, value: str, path: str, causes: list[Cause]) -> None:
    """kube-openapi's string validator: the first of maxLength, minLength and pattern that
    fails is the only one reported (a string too long is not matched against the pattern)."""
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        causes.append({"reason": "FieldValueTooLong", "field": path,
                       "message": f"Too long: may not be more than {max_length} bytes"})
        return
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        causes.append(_invalid(path, value, f"{_in_body(path)} should be at least {min_length} chars long"))
        return
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        compiled = compile_go(pattern)  # None: the CRD's validation reports a bad pattern
        if compiled is not None and compiled.search(value) is None:
            causes.append(_invalid(path, value, f"{_in_body(path)} should match '{pattern}'"))


def _validate_number(schema: Schema, value: float, path: str, causes: list[Cause]) -> None:
    minimum = schema.get("minimum")
    if isinstance(minimum, (int, float)):
        if schema.get("exclusiveMinimum") and value <= minimum:
            causes.append(_invalid(path, value, f"{_in_body(path)} should be greater than {_number(minimum)}"))
        elif value < minimum:
            causes.append(_invalid(path, value, f"{_in_body(path)} should be greater than or equal to "
                                                f"{_number(minimum)}"))
    maximum = schema.get("maximum")
    if isinstance(maximum, (int, float)):
        if schema.get("exclusiveMaximum") and value >= maximum:
            causes.append(_invalid(path, value, f"{_in_body(path)} should be less than {_number(maximum)}"))
        elif value > maximum:
            causes.append(_invalid(path, value, f"{_in_body(path)} should be less than or equal to "
                                                f"{_number(maximum)}"))
    multiple = schema.get("multipleOf")
    if isinstance(multiple, (int, float)) and multiple > 0 and (value / multiple) % 1:
        causes.append(_invalid(path, value, f"{_in_body(path)} should be a multiple of {_number(multiple)}"))
    fmt = schema.get("format")
    bits = {"int32": 31, "int64": 63}.get(fmt) if isinstance(fmt, str) else None
    if bits is not None and not -(2**bits) <= value < 2**bits:
        causes.append(_invalid(path, value, f"{_in_body(path)} must be of type {fmt}: {describe(value)}"))


def _validate_array(schema: Schema, value: list[Any], path: str, causes: list[Cause], old: Any = _ABSENT,
                    rule_causes: list[Cause] | None = None) -> None:
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        causes.append({"reason": "FieldValueTooMany", "field": path,
                       "message": f"Too many: {len(value)}: must have at most {max_items} items"})
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        causes.append(_invalid(path, value, f"{_in_body(path)} should have at least {min_items} items"))
    items = schema.get("items")
    list_type = schema.get("x-kubernetes-list-type")
    map_keys = schema.get("x-kubernetes-list-map-keys") or []
    if isinstance(items, dict):
        # only the items of a map list are correlated with old ones (by their keys)
        olds: dict[bytes, Any] = {}
        if list_type == "map" and isinstance(old, list):
            for item in old:
                if isinstance(item, dict):
                    olds[orjson.dumps([item.get(k) for k in map_keys])] = item
        for i, item in enumerate(value):
            before = olds.get(orjson.dumps([item.get(k) for k in map_keys]), _ABSENT) \
                if olds and isinstance(item, dict) else _ABSENT
            _validate(items, item, f"{path}[{i}]", causes, before, rule_causes)
    if list_type in ("set", "map"):
        seen: set[bytes] = set()
        for i, item in enumerate(value):
            if list_type == "map" and isinstance(item, dict):
                identity: Any = {k: item.get(k) for k in map_keys}
            else:
                identity = item
            key = orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)
            if key in seen:
                causes.append({"reason": "FieldValueDuplicate", "field": f"{path}[{i}]",
                               "message": f"Duplicate value: {describe(identity)}"})
            seen.add(key)


def _validate_object(schema: Schema, value: dict[str, Any], path: str, causes: list[Cause], old: Any = _ABSENT,
                     rule_causes: list[Cause] | None = None) -> None:
    props: dict[str, Schema] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            causes.append({"reason": "FieldValueRequired", "field": _child(path, name), "message": "Required value"})
    for key in ("maxProperties", "minProperties"):
        limit = schema.get(key)
        if isinstance(limit, int) and (len(value) > limit if key == "maxProperties" else len(value) < limit):
            word = "at most" if key == "maxProperties" else "at least"
            causes.append(_invalid(path, value, f"{_in_body(path)} should have {word} {limit} properties"))
    extra = schema.get("additionalProperties")
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    olds = old if isinstance(old, dict) else {}
    for key, item in value.items():
        if key in props:
            _validate(props[key], item, _child(path, key), causes, olds.get(key, _ABSENT), rule_causes)
        elif isinstance(extra, dict):
            _validate(extra, item, _child(path, key), causes, olds.get(key, _ABSENT), rule_causes)
    if embedded:
        for key in ("apiVersion", "kind"):
            if not value.get(key) and not schema.get("x-kubernetes-preserve-unknown-fields"):
                causes.append({"reason": "FieldValueRequired", "field": _child(path, key),
                               "message": "Required value: must not be empty"})


_HOSTNAME = re.compile(r"(?=.{1,253}\Z)[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}"
                       r"[a-zA-Z0-9])?)*\Z")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+\Z")
_MAC = re.compile(r"([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\Z")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII)


def _format_ok(fmt: str, value: str) -> bool:
    """The string formats kube-openapi checks whose syntax is plain; other formats
    (``duration``, ``uri``, ...) are not checked rather than risk refusing what
    kube-apiserver accepts."""
    try:
        if fmt == "date-time":
            if not _DATE_TIME.match(value):
                return False
            datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        elif fmt == "date":
            date.fromisoformat(value)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "hostname":
            return _HOSTNAME.match(value) is not None
        elif fmt == "email":
            return _EMAIL.match(value) is not None
        elif fmt == "mac":
            return _MAC.match(value) is not None
    except (ValueError, binascii.Error):
        return False
    return True


# -- is the schema structural? ----------------------------------------------------------------
_FORBIDDEN = {"$ref": "$ref", "additionalItems": "additionalItems", "patternProperties": "patternProperties",
              "dependencies": "dependencies", "definitions": "definitions", "id": "id", "$schema": "$schema"}


def structure_problems(schema: Any, path: str, rule_costs: bool = True) -> list[Cause]:
    """Why ``schema`` (a version's ``openAPIV3Schema`` at ``path``) is not a
    structural schema, or holds invalid defaults, or rules that cost too much (empty when it
    is fine). Not ``rule_costs``: a rule over the limit of one is not refused, the schema's
    total still is (upstream's ``suppressPerExpressionCost``, for a schema an update leaves)."""
    causes: list[Cause] = []
    if not isinstance(schema, dict):
        return [{"reason": "FieldValueRequired", "field": path, "message": "Required value: schemas are required"}]
    if schema.get("type") != "object":
        causes.append({"reason": "FieldValueInvalid", "field": f"{path}.type",
                       "message": f"Invalid value: {describe(schema.get('type', ''))}: must be object at the root"})
    cel: list[Cause] = []
    costs = _Costs(rule_costs)
    _structure(schema, path, causes, root=True, cel=cel, costs=costs)
    return causes + cel + costs.total_problems(path)  # upstream's CEL errors follow its schema errors


class _Costs:
    """The estimated costs of a schema's rules (``registry/celcost.py``), as upstream's
    ``TotalCost`` adds them up: their total, and the dearest four of those that make at
    least 1% of the schema's limit, by path."""

    def __init__(self, per_rule: bool = True) -> None:
        self.per_rule = per_rule  # whether one rule over its limit is refused
        self.total = 0
        self.dearest: list[tuple[int, str]] = []

    def observe(self, path: str, cost: int) -> None:
        from .celcost import MAX_UINT64, SCHEMA_LIMIT

        self.total = min(self.total + cost, MAX_UINT64)
        if cost >= SCHEMA_LIMIT // 100:
            self.dearest.append((cost, path))
            self.dearest.sort(key=lambda c: -c[0])  # stable: of equal costs, the first observed first
            del self.dearest[4:]

    def rule_problems(self, rule: dict[str, Any], path: str, schema: Schema, root: bool, self_type: CelType,
                      cardinality: int | None, compiled: set[str]) -> tuple[list[Cause], list[Cause]]:
        """The causes for a rule (and its message expression) whose estimated cost, the rule's
        times how often it may run, is over the limit of one rule; each observed."""
        from .celcheck import DYN
        from .celcost import RULE_LIMIT, cost_message, expression_cost, max_cardinality

        if "rule" not in compiled:
            return [], []
        old_self = DYN if rule.get("optionalOldSelf") is True else self_type
        variables = {"self": self_type, "oldSelf": old_self}
        out: tuple[list[Cause], list[Cause]] = ([], [])
        for key, name, found in (("rule", "estimated rule cost", out[0]),
                                 ("messageExpression", "estimated messageExpression cost", out[1])):
            if key not in compiled:
                continue
            cost = expression_cost(rule[key], variables, schema, root)
            if cost is None:
                continue
            if key == "rule":
                times = cardinality if cardinality is not None else max_cardinality(schema, root)
                cost = _multiplied(cost, times)
            if cost > RULE_LIMIT and self.per_rule:
                found.append({"reason": "FieldValueForbidden", "field": f"{path}.{key}",
                              "message": f"Forbidden: {cost_message(name, cost, RULE_LIMIT)}"})
            self.observe(f"{path}.{key}", cost)
        return out

    def total_problems(self, path: str) -> list[Cause]:
        """Upstream's causes when the schema's total is over its limit: each of the dearest
        rules, then the schema itself."""
        from .celcost import SCHEMA_LIMIT, cost_message

        if self.total <= SCHEMA_LIMIT:
            return []
        out: list[Cause] = [{"reason": "FieldValueForbidden", "field": at, "message": "Forbidden: contributed to "
                             "estimated rule & messageExpression cost total exceeding cost limit for entire "
                             "OpenAPIv3 schema"} for _, at in self.dearest]
        name = "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema"
        out.append({"reason": "FieldValueForbidden", "field": path,
                    "message": f"Forbidden: {cost_message(name, self.total, SCHEMA_LIMIT)}"})
        return out


def _multiplied(cost: int, times: int) -> int:
    """``multiplyWithOverflowGuard``: the product, at most the largest uint64."""
    from .celcost import MAX_UINT64

    return min(cost * times, MAX_UINT64)


_KEYWORD_TYPES: dict[str, tuple[type, ...]] = {
    "type": (str,), "format": (str,), "pattern": (str,), "description": (str,), "title": (str,),
    "properties": (dict,), "items": (dict, list), "additionalProperties": (dict, bool), "not": (dict,),
    "required": (list,), "enum": (list,), "allOf": (list,), "anyOf": (list,), "oneOf": (list,),
    "minimum": (int, float), "maximum": (int, float), "multipleOf": (int, float),
    "minLength": (int,), "maxLength": (int,), "minItems": (int,), "maxItems": (int,),
    "minProperties": (int,), "maxProperties": (int,),
    "exclusiveMinimum": (bool,), "exclusiveMaximum": (bool,), "nullable": (bool,), "uniqueItems": (bool,),
    "x-kubernetes-preserve-unknown-fields": (bool,), "x-kubernetes-int-or-string": (bool,),
    "x-kubernetes-embedded-resource": (bool,), "x-kubernetes-list-type": (str,), "x-kubernetes-list-map-keys": (list,),
    "x-kubernetes-map-type": (str,), "x-kubernetes-validations": (list,),
}
_RULE_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
_FIELD_PATH_STEP = re.compile(r"\.([^.\[\]']+)|\['((?:[^'\\]|\\.)*)'\]")


def _rule_problems(schema: Schema, rule: Any, path: str) -> list[Cause]:
    """What upstream's CRD validation says of one ``x-kubernetes-validations`` entry's fields
    (their CEL is compiled by ``_compile_problems``)."""
    if not isinstance(rule, dict):
        return [_invalid(path, rule, "must be an object")]
    causes: list[Cause] = []
    text, message = rule.get("rule"), rule.get("message")
    if not isinstance(text, str) or not text.strip():
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.rule",
                       "message": "Required value: rule is not specified"})
    if isinstance(message, str) and message and not message.strip():
        causes.append(_invalid(f"{path}.message", message, "must be non-empty if specified"))
    elif isinstance(message, str) and ("\n" in message or "\r" in message):
        causes.append(_invalid(f"{path}.message", message, "must not contain line breaks"))
    elif not message and isinstance(text, str) and ("\n" in text or "\r" in text):
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.message",
                       "message": "Required value: message must be specified if rule contains line breaks"})
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression and not expression.strip():
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.messageExpression",
                       "message": "Required value: messageExpression must be non-empty if specified"})
    reason = rule.get("reason")
    if reason is not None and reason not in _RULE_REASONS:
        allowed = ", ".join(f'"{r}"' for r in _RULE_REASONS)
        causes.append({"reason": "FieldValueNotSupported", "field": f"{path}.reason",
                       "message": f"Unsupported value: {describe(reason)}: supported values: {allowed}"})
    field_path = rule.get("fieldPath")
    if isinstance(field_path, str) and field_path:
        if not field_path.strip():
            causes.append(_invalid(f"{path}.fieldPath", field_path, "must be non-empty if specified"))
        elif "\n" in field_path or "\r" in field_path:
            causes.append(_invalid(f"{path}.fieldPath", field_path, "must not contain line breaks"))
        elif normalized_field_path(schema, field_path) is None:
            causes.append(_invalid(f"{path}.fieldPath", field_path, "must be a valid path"))
    return causes


def _compile_problems(rule: dict[str, Any], path: str, uncorrelatable: str | None,
                      self_type: CelType | None = None, compiled: set[str] | None = None) -> list[Cause]:
    """A ``rule`` or ``messageExpression`` that does not compile, as upstream refuses it: on
    ``<path>.rule`` (``.messageExpression``), the bad value the whole rule as Go's ``%#v``
    prints apiextensions' ValidationRule. Compiling is parsing and, with ``self`` (and
    ``oldSelf``) of ``self_type``, type checking (``registry/celcheck.py``): a rule must be a
    bool, a ``messageExpression`` a string. And a rule reading ``oldSelf`` where no old value
    can be paired with the new (within the list at ``uncorrelatable``), or an
    ``optionalOldSelf`` set on a rule that does not read ``oldSelf``. ``compiled`` gets the
    keys that compiled (a message expression only with its rule), for the cost estimate."""
    from .expressions import compile_error, variables_of

    causes: list[Cause] = []
    typed = _type_problems(rule, self_type) if self_type is not None else {}
    for key, detail in (("rule", ""), ("messageExpression", "messageExpression ")):
        text = rule.get(key)
        why = compile_error(text) if isinstance(text, str) and text.strip() else None
        if why is None:
            why = typed.get(key)
            detail = ""
        if why is not None:
            causes.append({"reason": "FieldValueInvalid", "field": f"{path}.{key}",
                           "message": f"Invalid value: {_go_validation_rule(rule)}: {detail}{why}"})
        elif compiled is not None and isinstance(text, str) and text.strip() and (key == "rule" or "rule" in compiled):
            compiled.add(key)
    text, optional = rule.get("rule"), rule.get("optionalOldSelf")
    if not isinstance(text, str) or not text.strip() or compile_error(text) is not None or "rule" in typed:
        return causes
    if "oldSelf" in variables_of(text):
        if uncorrelatable is not None:
            causes.append(_invalid(f"{path}.rule", text, "oldSelf cannot be used on the uncorrelatable portion of the "
                                                         f"schema within {uncorrelatable}"))
    elif isinstance(optional, bool):
        causes.append(_invalid(f"{path}.optionalOldSelf", optional, "may not be set if oldSelf is not used in rule"))
    return causes


def _self_type(schema: Schema, root: bool) -> CelType:
    """The type of ``self`` in the rules of ``schema``: a resource's root and an embedded
    resource have ``apiVersion``, ``kind`` and ``metadata`` (``SchemaDeclType``)."""
    return schema_type(schema, root or schema.get("x-kubernetes-embedded-resource") is True)


def _type_problems(rule: dict[str, Any], self_type: CelType) -> dict[str, str]:
    """What upstream's ``compileRule`` says of a rule that parses but does not type-check
    (``compilation failed: ERROR: <input>:1:5: undefined field 'x'``), or is not a bool
    (``cel expression must evaluate to a bool``); and of its ``messageExpression``
    (``messageExpression compilation failed: ...``, ``messageExpression must evaluate to a
    string``), checked, as upstream, only when the rule is fine. By key."""
    from .celcheck import check, constant_patterns, optional_of
    from .expressions import compile_error

    old_self = optional_of(self_type) if rule.get("optionalOldSelf") is True else self_type
    variables = {"self": self_type, "oldSelf": old_self}
    out: dict[str, str] = {}
    text = rule.get("rule")
    if not isinstance(text, str) or not text.strip() or compile_error(text) is not None:
        return out
    errors, result = check(text, variables, strict=True)
    if errors:
        out["rule"] = "compilation failed: " + "\n".join(errors)
    elif result.kind not in ("bool", "dyn"):
        out["rule"] = "cel expression must evaluate to a bool"
    else:  # a constant pattern is compiled with the program (cel-go's regex optimization)
        refused = [e for e in map(syntax_error, constant_patterns(text)) if e is not None]
        if refused:
            out["rule"] = "program instantiation failed: " + refused[0]
    message = rule.get("messageExpression")
    if out or not isinstance(message, str) or not message.strip() or compile_error(message) is not None:
        return out
    errors, result = check(message, variables, strict=True)
    if errors:
        out["messageExpression"] = "messageExpression compilation failed: " + "\n".join(errors)
    elif result.kind not in ("string", "dyn", "list"):
        out["messageExpression"] = "messageExpression must evaluate to a string"
    return out


def _go_validation_rule(rule: dict[str, Any]) -> str:
    """``%#v`` of apiextensions.ValidationRule; a set pointer shows an address in Go, a
    placeholder here."""
    def text(key: str) -> str:
        value = rule.get(key)
        return quote(value if isinstance(value, str) else "")

    def pointer(key: str, go_type: str) -> str:
        return f"({go_type})(nil)" if rule.get(key) is None else f"({go_type})(0xc000010000)"

    return (f"apiextensions.ValidationRule{{Rule:{text('rule')}, Message:{text('message')}, "
            f"MessageExpression:{text('messageExpression')}, "
            f"Reason:{pointer('reason', '*apiextensions.FieldValueErrorReason')}, FieldPath:{text('fieldPath')}, "
            f"OptionalOldSelf:{pointer('optionalOldSelf', '*bool')}}}")


def normalized_field_path(schema: Any, field_path: str) -> str | None:
    """A rule's ``fieldPath`` (``.a.b``, ``.a['b.c']``, ``.labels.k``) as upstream's
    cel.ValidFieldPath normalises it (``a.b``, ``a.b.c``, ``labels[k]``: a declared property is a
    child, a key of ``additionalProperties`` a key), or None when it names no declared field."""
    at, node, out = 0, schema, ""
    field_path = field_path.strip()
    while at < len(field_path):
        step = _FIELD_PATH_STEP.match(field_path, at)
        if step is None or not isinstance(node, dict):
            return None
        at = step.end()
        name = step.group(1) if step.group(1) is not None else re.sub(r"\\(.)", r"\1", step.group(2))
        props = node.get("properties")
        if props:
            if name not in props:
                return None
            node, out = props[name], f"{out}.{name}" if out else name
        elif isinstance(node.get("additionalProperties"), dict):
            node, out = node["additionalProperties"], f"{out}[{name}]"
        else:
            return None
    return out or None


_TYPE_NAMES = {str: "a string", dict: "an object", list: "an array", bool: "a boolean", int: "an integer",
               float: "a number"}


def _keyword(schema: Schema, key: str, empty: Any) -> Any:
    """``schema[key]`` if it is of its keyword's JSON type, else ``empty``: for the checks that
    look into another schema than their own (a list's ``items``, which no Go type decodes
    here), where one of another type is ``_keyword_problems``' to report at its own path."""
    value = schema.get(key)
    return empty if value is None or _keyword_problems({key: value}, "") else value


def _keyword_problems(schema: Schema, path: str) -> list[Cause]:
    """Keywords of the wrong JSON type (upstream cannot even decode those)."""
    causes = []
    for key, allowed in _KEYWORD_TYPES.items():
        if key not in schema:
            continue
        value = schema[key]
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if ok and key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
            ok = value >= 0
        if ok and key in ("required", "x-kubernetes-list-map-keys"):
            ok = all(isinstance(v, str) for v in value)
        if ok and key in ("allOf", "anyOf", "oneOf"):
            ok = all(isinstance(v, dict) for v in value)
        if not ok:
            want = " or ".join(_TYPE_NAMES[t] for t in allowed)
            if key in ("required", "x-kubernetes-list-map-keys"):
                want = "an array of strings"
            elif key in ("allOf", "anyOf", "oneOf"):
                want = "an array of schemas"
            elif allowed == (int,):
                want = "a non-negative integer"
            causes.append(_invalid(f"{path}.{key}", value, f"must be {want}"))
    return causes


def _required(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueRequired", "field": field, "message": f"Required value: {detail}"}


def _list_type_problems(schema: Schema, path: str) -> list[Cause]:
    """Upstream's ``xlisttypenotnil``: a list type on an array only, one of the three, a
    set's items atomic, and a map's items objects keyed by scalar properties they have."""
    list_type, t = schema["x-kubernetes-list-type"], schema.get("type")
    causes: list[Cause] = []
    if t != "array":
        causes.append(_required(f"{path}.type", "must be array if x-kubernetes-list-type is specified") if not t
                      else _invalid(f"{path}.type", t, "must be array if x-kubernetes-list-type is specified"))
    items = schema.get("items")
    if t == "array" and list_type == "set" and isinstance(items, dict):  # (requireAtomicSetType)
        inner_list = items.get("x-kubernetes-list-type")
        if items.get("type") == "array" and inner_list is not None and inner_list != "atomic":
            causes.append(_invalid(f"{path}.items.x-kubernetes-list-type", inner_list,
                                   "must be atomic as item of a list with x-kubernetes-list-type=set"))
        elif items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            causes.append(_invalid(f"{path}.items.x-kubernetes-map-type", inner_list,
                                   "must be atomic as item of a list with x-kubernetes-list-type=set"))
    if list_type not in ("atomic", "set", "map"):
        causes.append({"reason": "FieldValueNotSupported", "field": f"{path}.x-kubernetes-list-type",
                       "message": f'Unsupported value: {describe(list_type)}: supported values: "atomic", "set", '
                                  '"map"'})
    if list_type != "map":
        return causes
    keys = _keyword(schema, "x-kubernetes-list-map-keys", [])
    if not keys:
        causes.append(_required(f"{path}.x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type "
                                "is map"))
    if items is None:
        causes.append(_required(f"{path}.items", "must have a schema if x-kubernetes-list-type is map"))
        return causes
    if not isinstance(items, dict):
        causes.append(_invalid(f"{path}.items", items, "must only have a single schema if x-kubernetes-list-type "
                               "is map"))
        return causes
    if items.get("type") != "object":
        causes.append(_invalid(f"{path}.items.type", items.get("type", ""), "must be object if parent array's "
                               "x-kubernetes-list-type is map"))
        return causes
    properties = _keyword(items, "properties", {})
    for i, key in enumerate(keys):
        prop = properties.get(key)
        if prop is None:
            causes.append(_invalid(f"{path}.x-kubernetes-list-map-keys", keys, "entries must all be names of item "
                                   "properties"))
        elif isinstance(prop, dict) and prop.get("type") in ("array", "object"):
            causes.append(_invalid(f"{path}.items.properties[{key}].type", items.get("type"), "must be a scalar "
                                   "type if parent array's x-kubernetes-list-type is map"))
        if key in keys[:i]:
            causes.append(_invalid(f"{path}.x-kubernetes-list-map-keys", keys, "must not contain duplicate entries"))
    return causes


def _extension_problems(schema: Schema, path: str) -> list[Cause]:
    """What upstream's ``validateCustomResourceDefinitionOpenAPISchema`` says of the
    ``x-kubernetes-*`` keywords of one schema, in its order and words: unknown fields kept
    only when said true, list and map types where they apply, a list-map's keys required
    or defaulted (``validateMapListKeysMapSet``, as for every new CRD)."""
    causes: list[Cause] = []
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.append(_invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"))
    if "x-kubernetes-list-type" in schema:
        causes += _list_type_problems(schema, path)
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None:
        t = schema.get("type")
        if t != "object":
            causes.append(_required(f"{path}.type", "must be object if x-kubernetes-map-type is specified") if not t
                          else _invalid(f"{path}.type", t, "must be object if x-kubernetes-map-type is specified"))
        if map_type not in ("atomic", "granular"):
            causes.append({"reason": "FieldValueNotSupported", "field": f"{path}.x-kubernetes-map-type",
                           "message": f'Unsupported value: {describe(map_type)}: supported values: "atomic", '
                                      '"granular"'})
    list_type = schema.get("x-kubernetes-list-type")
    if schema.get("x-kubernetes-list-map-keys"):
        if list_type is None:
            causes.append(_required(f"{path}.x-kubernetes-list-type", "must be map if x-kubernetes-list-map-keys "
                                    "is non-empty"))
        elif list_type != "map":
            causes.append(_invalid(f"{path}.x-kubernetes-list-type", list_type, "must be map if "
                                   "x-kubernetes-list-map-keys is non-empty"))
    items = schema.get("items")
    if list_type in ("set", "map") and isinstance(items, dict):
        if items.get("nullable") is True:
            causes.append({"reason": "FieldValueForbidden", "field": f"{path}.items.nullable",
                           "message": f"Forbidden: cannot be nullable when x-kubernetes-list-type is {list_type}"})
        if list_type == "map":
            required = set(_keyword(items, "required", ()))
            properties = _keyword(items, "properties", {})
            for key in _keyword(schema, "x-kubernetes-list-map-keys", ()):
                prop = properties.get(key)
                if not isinstance(prop, dict):
                    continue
                at = f"{path}.items.properties[{key}]"
                if key not in required and "default" not in prop:
                    causes.append(_required(f"{at}.default", "this property is in x-kubernetes-list-map-keys, so it "
                                            "must have a default or be a required property"))
                if prop.get("nullable") is True:
                    causes.append({"reason": "FieldValueForbidden", "field": f"{at}.nullable", "message": "Forbidden: "
                                   "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"})
    return causes


def _structure(schema: Schema, path: str, causes: list[Cause], root: bool = False, cel: list[Cause] | None = None,
               uncorrelatable: str | None = None, costs: _Costs | None = None, cardinality: int | None = 1) -> None:
    """The causes of ``schema`` at ``path``, and in ``cel`` those of its rules' CEL, looked
    for, as upstream, only where the schema here and below has no other error.
    ``uncorrelatable`` is the path of the nearest list above that is not a
    ``x-kubernetes-list-type: map`` (whose old and new items are not paired). ``costs`` adds
    up the rules' estimated costs, each rule's times ``cardinality``: how often it may run
    (None when a list or map above has no bound)."""
    start = len(causes)
    wrong = _keyword_problems(schema, path)
    if wrong:  # the rest of the checks assume well-typed keywords
        causes.extend(wrong)
        return
    t = schema.get("type")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    for key, name in _FORBIDDEN.items():
        if key in schema:
            causes.append({"reason": "FieldValueForbidden", "field": f"{path}.{name}", "message": "Forbidden: "
                           f"{name} is not supported in a structural schema"})
    if t is None or t == "":
        if not int_or_string and not preserve:
            causes.append({"reason": "FieldValueRequired", "field": f"{path}.type",
                           "message": "Required value: must not be empty for specified "
                                      + ("object fields" if "properties" in schema else "fields")})
    elif t not in TYPES:
        allowed = ", ".join(f'"{x}"' for x in TYPES)
        causes.append({"reason": "FieldValueNotSupported", "field": f"{path}.type",
                       "message": f"Unsupported value: {describe(t)}: supported values: {allowed}"})
    # a type beside x-kubernetes-int-or-string is allowed (upstream's structural invariants say
    # nothing of it) and has no effect: the value may be an integer or a string either way
    if schema.get("uniqueItems") is True:
        causes.append({"reason": "FieldValueForbidden", "field": f"{path}.uniqueItems", "message": "Forbidden: "
                       "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"})
    if "properties" in schema and schema.get("additionalProperties") not in (None, False):
        causes.append({"reason": "FieldValueForbidden", "field": f"{path}.additionalProperties",
                       "message": "Forbidden: additionalProperties and properties are mutual exclusive"})
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        why = syntax_error(pattern)
        if why is not None:
            causes.append(_invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {why}"))
    props = schema.get("properties")
    below = cardinality_below(cardinality, schema)
    if props is not None:
        if not isinstance(props, dict):
            causes.append(_invalid(f"{path}.properties", props, "must be an object of schemas"))
        else:
            for name, prop in props.items():
                sub = f"{path}.properties[{name}]"
                if not isinstance(prop, dict):
                    causes.append(_invalid(sub, prop, "must be a schema object"))
                    continue
                if root and name == "metadata":
                    extra = sorted(set(prop.get("properties") or {}) - {"name", "generateName"})
                    if extra:
                        causes.append({"reason": "FieldValueForbidden", "field": sub, "message": "Forbidden: must "
                                       "not specify anything other than name and generateName, but metadata is "
                                       "implicitly specified"})
                _structure(prop, sub, causes, cel=cel, uncorrelatable=uncorrelatable, costs=costs,
                           cardinality=below)
    extra_schema = schema.get("additionalProperties")
    if isinstance(extra_schema, dict):
        _structure(extra_schema, f"{path}.additionalProperties", causes, cel=cel, uncorrelatable=uncorrelatable,
                   costs=costs, cardinality=below)
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        causes.extend(_rule_problems(schema, rule, f"{path}.x-kubernetes-validations[{i}]"))
    items = schema.get("items")
    if t == "array" and items is None:
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.items",
                       "message": "Required value: must be specified"})
    if items is not None:
        if isinstance(items, dict):
            unpaired = uncorrelatable or (path if schema.get("x-kubernetes-list-type") != "map" else None)
            _structure(items, f"{path}.items", causes, cel=cel, uncorrelatable=unpaired, costs=costs,
                       cardinality=below)
        else:
            causes.append({"reason": "FieldValueForbidden", "field": f"{path}.items",
                           "message": "Forbidden: items must be a schema object and not an array"})
    causes.extend(_extension_problems(schema, path))
    if cel is not None and len(causes) == start:
        self_type = _self_type(schema, root) if schema.get("x-kubernetes-validations") else None
        for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
            if isinstance(rule, dict):
                at, compiled = f"{path}.x-kubernetes-validations[{i}]", set[str]()
                problems = _compile_problems(rule, at, uncorrelatable, self_type, compiled)
                too_dear: tuple[list[Cause], list[Cause]] = ([], [])
                if costs is not None and self_type is not None:
                    resource = root or schema.get("x-kubernetes-embedded-resource") is True
                    too_dear = costs.rule_problems(rule, at, schema, resource, self_type, cardinality, compiled)
                cel.extend(too_dear[0] + problems + too_dear[1])  # upstream's order
    if "default" in schema:
        if root:
            causes.append({"reason": "FieldValueForbidden", "field": f"{path}.default",
                           "message": "Forbidden: must not be set at the root"})
        else:
            value = copy.deepcopy(schema["default"])
            apply_defaults(schema, value)
            causes.extend(validate({k: v for k, v in schema.items() if k != "default"}, value, f"{path}.default"))
