"""``fieldValidation`` (KEP-2885) and warnings for one request.

    with request_scope(scope):                 # in the ASGI entry point
        obj = check_object(rtype, obj, body)   # Strict: 400 (a patch: 422); Warn: a warning; Ignore: nothing
        ...
        headers += warning_headers()           # 'Warning: 299 - "unknown field \\"spec.foo\\""'

The directive comes from the ``fieldValidation`` query parameter: ``Strict``,
``Warn`` (kube-apiserver's default when it is absent) or ``Ignore``; any other
value is a 422 against the verb's options kind (``CreateOptions`` for a POST,
``UpdateOptions`` for a PUT, ``PatchOptions`` for a PATCH), as upstream. Unknown fields are
dropped from the object under Warn and Ignore (a Go struct cannot hold them).
Missing required fields are a 422 Invalid whatever the directive.

Warnings are request-scoped, as kube-apiserver's warning recorder: a context
variable set by ``request_scope`` for the task serving the request.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import orjson

from ..gonumbers import format_v
from ..gostrings import quote
from ..registry import ResourceType
from ..registry.validation import (
    Findings,
    convert_numbers,
    converter_error,
    decode_with_duplicates,
    empty_collections,
    fill_zeros,
    go_type_error,
    may_have_duplicates,
    metadata_shape,
    shape_of,
    stored_form,
    zero_nulls,
)
from . import gojson
from .errors import ApiError

__all__ = ["add_warning", "check_merge_patch", "check_object", "field_validation", "fill_zero_values", "invalid_patch",
           "note_webhook_time", "note_yaml_duplicates", "request_scope", "to_stored_form", "unknown_fields",
           "warning_headers", "yaml_unmarshal_errors"]

DIRECTIVES = ("Ignore", "Strict", "Warn")
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
# Most warnings a response carries, as kube-apiserver's recorder limits them
_MAX_WARNINGS = 50


class _Request:
    __slots__ = ("directive", "method", "warnings", "webhook_seconds", "yaml_duplicates")

    def __init__(self, method: str, directive: str | None) -> None:
        self.method = method
        self.directive = directive
        self.warnings: list[str] = []
        self.yaml_duplicates: list[str] = []  # of a YAML body made JSON before check_object saw it
        # time spent calling admission webhooks, which the request SLI leaves out (note_webhook_time)
        self.webhook_seconds = 0.0


_CURRENT: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("controlplane_request", default=None)


class _RequestScope:
    """The context of ``request_scope``: a plain class, not a ``contextlib`` generator,
    whose machinery cost a few microseconds of every request."""

    __slots__ = ("_request", "_token")

    def __init__(self, request: _Request) -> None:
        self._request = request
        self._token: contextvars.Token[_Request | None] | None = None

    def __enter__(self) -> _Request:
        self._token = _CURRENT.set(self._request)
        return self._request

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        _CURRENT.reset(self._token)


def request_scope(scope: dict[str, Any]) -> _RequestScope:
    """Hold an ASGI request's field-validation directive and collect its warnings."""
    qs: bytes = scope.get("query_string", b"")
    directive = None
    if b"fieldValidation" in qs:  # the common request has none: skip parsing the query
        values = parse_qs(qs.decode("latin-1"), keep_blank_values=True).get("fieldValidation")
        directive = values[0] if values else None  # (a repeated parameter's first, as upstream's codec)
    return _RequestScope(_Request(scope.get("method", "GET"), directive))


def note_webhook_time(seconds: float) -> None:
    """Admission webhooks kept the current request waiting ``seconds`` (upstream's mutating and
    validating latency trackers): the request SLI leaves them out (``metrics.RequestMetrics``)."""
    req = _CURRENT.get()
    if req is not None:
        req.webhook_seconds += seconds


def field_validation() -> str:
    """The current request's directive: ``Strict``, ``Warn`` or ``Ignore`` (422 for another)."""
    return _directive()[0]


def note_yaml_duplicates(duplicates: list[str]) -> None:
    """The keys a YAML body gave twice (go-yaml's ``line 4: key "a" already set in map``), for
    ``check_object`` to report with the body's unknown fields: a warning each under Warn, one
    error under Strict, as upstream's YAML decoder, which decodes the body strictly again."""
    req = _CURRENT.get()
    if req is not None:
        req.yaml_duplicates = duplicates


def yaml_unmarshal_errors(duplicates: list[str]) -> str:
    """go-yaml's strict decoding error of a document's duplicate keys."""
    return "yaml: unmarshal errors:\n  " + "\n  ".join(duplicates)


def add_warning(text: str) -> None:
    """Add a warning to the current request's response (no-op outside a request)."""
    req = _CURRENT.get()
    if req is not None and text not in req.warnings and len(req.warnings) < _MAX_WARNINGS:
        req.warnings.append(text)


def warning_headers() -> list[tuple[bytes, bytes]]:
    """``Warning: 299 - "<text>"`` headers (RFC 7234 form, as kube-apiserver sends them)."""
    req = _CURRENT.get()
    if req is None or not req.warnings:
        return []
    return [(b"warning", b'299 - "' + _quote(w).encode() + b'"') for w in req.warnings]


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _directive() -> tuple[str, str]:
    """The request's (directive, method)."""
    req = _CURRENT.get()
    raw, method = (req.directive, req.method) if req is not None else (None, "POST")
    if raw is None or raw == "":
        return "Warn", method
    if raw not in DIRECTIVES:
        kind = _OPTIONS_KIND.get(method, "CreateOptions")
        message = f'Unsupported value: "{raw}": supported values: "", "Ignore", "Strict", "Warn"'
        raise ApiError(422, "Invalid", f'{kind}.meta.k8s.io "" is invalid: fieldValidation: {message}',
                       {"group": "meta.k8s.io", "kind": kind,
                        "causes": [{"reason": "FieldValueNotSupported", "message": message,
                                    "field": "fieldValidation"}]})
    return raw, method


def check_object(rtype: ResourceType, obj: dict[str, Any], body: bytes | None = None,
                 merge_patch: bytes | None = None, added_keys: int = 0,
                 stored: dict[str, Any] | None = None, strategic: Any = None,
                 json_patch: tuple[bytes, list[Any]] | None = None, name: str | None = None) -> dict[str, Any]:
    """Check a request's object: the decoded body of a create or update (``body`` its
    raw JSON, for duplicate keys), or the result of a patch (``merge_patch`` the raw
    merge patch, whose duplicate keys upstream reports; ``json_patch`` a JSON patch, raw and
    decoded, whose operations' unknown and duplicate fields it reports first, each prefixed
    ``json patch``, as upstream's ``applyJSPatch``).
    ``added_keys``: keys the server put into ``obj`` that ``body`` did not have.
    ``stored``: the stored object a patch was applied to; the parts of ``obj`` left as they
    were there are not checked again (a status patch's spec, mostly). ``strategic``: the
    decoded strategic merge patch ``obj`` is the result of, whose value of a wrong type
    upstream reports as its unstructured converter does (below).

    Returns the object to go on with: ``obj`` with unknown fields removed, or, when
    the body had duplicate keys, the body decoded again (the last value of a key wins,
    as in ``obj``). A value of the wrong JSON type where an object or a list belongs
    cannot be decoded whatever the directive; under Strict unknown and duplicate fields
    fail the request. Both are 400 BadRequest for a create or update, and 422 Invalid
    on the field ``patch`` for a patch, as kube-apiserver's patch handler words them.
    A missing required field is 422 Invalid with its causes. ``name``: the URL's name, which
    an update's body must carry (upstream's ``checkName``, a 400 between the decoding and the
    validation: a PUT of ``{}`` lacks its name before its spec)."""
    directive, method = _directive()
    operations = json_patch_problems(*json_patch) if json_patch is not None and directive != "Ignore" else []
    shape = shape_of(rtype.group, rtype.version, rtype.kind)
    if shape is None:  # no schema (custom resources until theirs are registered): everything is kept
        if rtype.custom is not None:
            _check_custom_metadata(rtype, method, obj)
        if operations and directive == "Strict":
            raise _undecodable(rtype, method, obj, "strict decoding error: " + ", ".join(operations))
        for p in operations:
            add_warning(p)
        _check_name(obj, name)
        return obj
    # the keys are counted only to find a body's duplicates (a patch's result has no body)
    count_keys = directive != "Ignore" and body is not None
    found = shape.check(obj, count_keys=count_keys, known=stored if body is None else None)
    if count_keys and body is not None and may_have_duplicates(body, found.keys - added_keys):
        redecoded, duplicates = decode_with_duplicates(body)
        if duplicates and isinstance(redecoded, dict):
            # the fields _parse settled (kind, apiVersion, metadata) are kept from obj
            redecoded.update({k: obj[k] for k in ("kind", "apiVersion") if k in obj})
            redecoded.setdefault("metadata", obj.get("metadata", {}))
            obj = redecoded
            found = shape.check(obj, duplicates=duplicates, count_keys=False)
    # a null is decoded as its Go type's zero value: never stored as a null, which the readers
    # of the object (the controllers, the typed clients) could not take (a custom resource's
    # nulls are its schema's to prune). An item of a list made an empty struct may lack its
    # required fields: walked again, then only (a status's lastProbeTime: null, the usual
    # null, makes none: the walk again cost a pod status merge patch 13 us)
    if found.nulls and rtype.custom is None and zero_nulls(found.nulls):
        again = shape.check(obj, count_keys=False, known=stored if body is None else None)
        found.missing, found.unfilled, found.emptied = again.missing, again.unfilled, again.emptied
    if found.numbers and strategic is not None and rtype.custom is None and convert_numbers(found.numbers):
        # a strategic merge patch's result is decoded by apimachinery's unstructured converter,
        # which takes a whole float for an int (``replicas: 3.0``: Go's decoder, which reads a
        # create's body, does not); what it refuses (3.5) is reported below, as it words it
        found = shape.check(obj, count_keys=False, known=stored)
    if found.mismatched:
        path, given, expected = found.mismatched[0]
        if strategic is not None and rtype.custom is None:
            converted = converter_error(shape, obj, path)
            if converted is not None:
                raise _invalid_patch(go_value(strategic), converted)
        sent = None
        if given.startswith("number ") and found.numbers:
            source = body if body is not None else merge_patch if merge_patch is not None else \
                json_patch[0] if json_patch is not None else None
            if source is not None:
                sent = _sent_float(source, obj, found.numbers, given, body is None and json_patch is not None)
            if sent is not None:
                given = f"number {sent[2]}"
        # a built-in kind's in Go's words; a custom resource's (no Go struct) approximated
        why = (go_type_error(shape, path, given) if rtype.custom is None else None) or \
            f"json: cannot unmarshal {given} into Go struct field {rtype.kind}.{path} of type {expected}"
        raise _undecodable(rtype, method, obj, why, sent)
    if found.malformed:
        raise _not_decoded(rtype, method, obj, strategic, found.malformed[0])
    problems = found.problems
    if directive != "Ignore" and merge_patch is not None:
        problems = _patch_duplicates(merge_patch) + problems
    if operations:
        problems = operations + problems
    req = _CURRENT.get()
    yaml_duplicates = req.yaml_duplicates if req is not None and body is not None and directive != "Ignore" else []
    if problems or yaml_duplicates:
        if directive == "Strict":
            errors = problems + ([yaml_unmarshal_errors(yaml_duplicates)] if yaml_duplicates else [])
            raise _not_decoded(rtype, method, obj, strategic, "strict decoding error: " + ", ".join(errors))
        if directive == "Warn":
            for p in problems + yaml_duplicates:
                add_warning(p)
        if found.problems:
            shape.check(obj, prune=True, count_keys=False)
    if found.unfilled and rtype.custom is None:
        # the fields Go writes back whatever their value (no omitempty): a list item a
        # patch left without its name, ready or restartCount is read back with "", false, 0
        fill_zeros(found.unfilled)
    meta = obj.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") == []:
        # decoded, ``managedFields: []`` is no nil slice but an empty one, which the field
        # manager takes as a reset of them (isResetManagedFields), as it takes ``[{}]``
        meta["managedFields"] = [{}]
    if found.emptied:
        # ``args: []`` stored as protobuf reads back as a nil slice: left out, as Go's JSON
        # encoder leaves it out for admission too; ``rules: []`` is null once stored
        # (``stored_form``), ``[]`` to admission. A custom resource's are its metadata's (no
        # other part of its schema is a Go type): ObjectMeta's ``generateName: ""``, ``labels: {}``,
        # gone as the ObjectMeta it is decoded into is written back (``SetObjectMeta``)
        empty_collections(found.emptied, decoded=True)
    _check_name(obj, name)
    _require(rtype, obj, found)
    return obj


class _FloatText(float):
    """A float of a body decoded again, with its text."""

    __slots__ = ("text",)
    text: str


def _float_text(token: str) -> _FloatText:
    number = _FloatText(token)
    number.text = token
    return number


def _sent_float(source: bytes, obj: dict[str, Any], numbers: list[tuple[Any, Any, Any]], given: str,
                operations: bool = False) -> tuple[Any, Any, str] | None:
    """Where the first float given an integer is in ``obj`` (its dict or list, and key or index)
    and its text as the request wrote it (``1e2``, ``3.00``: what Go's ``strconv.ParseInt``
    refused and its error names), or None where that is not found. ``source``: a create's or
    update's body, or the merge patch ``obj`` was made with (the same keys lead to it), or,
    with ``operations``, the JSON patch (the last ``add`` or ``replace`` whose path leads to
    it). Upstream's json-patch library keeps each value's text (a ``lazyNode``'s raw JSON)
    through both patches. Only on the way to an error."""
    target = next(((c, k) for c, k, shape in numbers if type(c[k]) is float and shape.expect == "integer"), None)
    if target is None or given != f"number {orjson.dumps(target[0][target[1]]).decode()}":
        return None
    steps = _steps_to(obj, target[0])
    if steps is None:
        return None
    steps.append(target[1])
    try:
        node: Any = json.loads(source, parse_float=_float_text)
        if operations:
            node, steps = _operation_value(node, steps)
        for step in steps:
            node = node[step]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return None
    if not isinstance(node, _FloatText) or node != target[0][target[1]]:
        return None
    return target[0], target[1], node.text


def _operation_value(ops: Any, steps: list[Any]) -> tuple[Any, list[Any]]:
    """The value of the last ``add`` or ``replace`` of ``ops`` whose path leads to ``steps``,
    and the steps left below it; KeyError if none."""
    listed: list[Any] = ops if isinstance(ops, list) else []
    for op in reversed(listed):
        if not isinstance(op, dict) or op.get("op") not in ("add", "replace") or not isinstance(op.get("path"), str) \
                or "value" not in op:
            continue
        tokens = [_decode_pointer_token(t) for t in op["path"].split("/")[1:]]
        if len(tokens) <= len(steps) and all(str(s) == t or (t == "-" and type(s) is int)  # ("-": an append)
                                             for s, t in zip(steps, tokens, strict=False)):
            return op["value"], steps[len(tokens):]
    raise KeyError("no operation")


def _decode_pointer_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _steps_to(root: Any, container: Any) -> list[Any] | None:
    """The keys and indexes from ``root`` to ``container`` (found by identity), or None."""
    pending: list[tuple[Any, list[Any]]] = [(root, [])]
    while pending:
        node, steps = pending.pop()
        if node is container:
            return steps
        items = node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        pending.extend((v, [*steps, k]) for k, v in items if type(v) is dict or type(v) is list)
    return None


def _check_name(obj: dict[str, Any], name: str | None) -> None:
    if name is not None:
        meta = obj.get("metadata")
        got = meta.get("name") if isinstance(meta, dict) else None
        if got != name:
            raise ApiError.name_mismatch(got, name)


def _check_custom_metadata(rtype: ResourceType, method: str, obj: dict[str, Any]) -> None:
    """A custom resource's ``metadata`` decoded as upstream decodes it, into ObjectMeta
    whatever the CRD's schema says (apiextensions' objectmeta.GetObjectMeta): a value of
    another type (``labels: {"a": 1}``, ``finalizers: "x"``, ``creationTimestamp: 5``) or a
    Time that does not parse is refused as a built-in kind's is, where it was stored and
    then broke every typed reader of the resource; a null label or annotation is Go's zero
    value, as ObjectMeta writes it back. A field ObjectMeta does not have is unknown, dropped
    and reported under the request's directive, as upstream's ReturnUnknownFieldPaths."""
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return  # (the caller's: "metadata must be an object")
    shape = metadata_shape()
    found = shape.check({"metadata": meta}, prune=True, count_keys=False)
    if found.mismatched:
        path, given, expected = found.mismatched[0]
        why = go_type_error(shape, path, given) or \
            f"json: cannot unmarshal {given} into Go struct field ObjectMeta.{path} of type {expected}"
        raise _undecodable(rtype, method, obj, why)
    if found.malformed:
        raise _undecodable(rtype, method, obj, found.malformed[0])
    if found.nulls:
        zero_nulls(found.nulls)
    if found.emptied:
        empty_collections(found.emptied, decoded=True)
    if found.problems:
        directive, _ = _directive()
        if directive == "Strict":
            raise _undecodable(rtype, method, obj, "strict decoding error: " + ", ".join(found.problems))
        if directive == "Warn":
            for p in found.problems:
                add_warning(p)


def check_decodes(group: str, version: str, kind: str, obj: dict[str, Any]) -> None:
    """The body of a write handled on its own (a Binding) decoded into its Go type: a value
    of another type (``metadata.uid: 5``) or a Time that does not parse is upstream's 400,
    in its decoder's words; so is an unknown field under Strict, which is otherwise dropped
    (with a warning under Warn). Required fields are the handler's to check."""
    shape = shape_of(group, version, kind)
    if shape is None:
        return
    found = shape.check(obj, count_keys=False)
    why = found.malformed[0] if found.malformed and not found.mismatched else None
    if found.mismatched:
        path, given, expected = found.mismatched[0]
        why = go_type_error(shape, path, given) or \
            f"json: cannot unmarshal {given} into Go struct field {kind}.{path} of type {expected}"
    if why is None and found.problems:
        directive, _ = _directive()
        if directive == "Strict":
            why = "strict decoding error: " + ", ".join(found.problems)
        else:
            if directive == "Warn":
                for p in found.problems:
                    add_warning(p)
            shape.check(obj, prune=True, count_keys=False)
    if why is not None:
        raise ApiError.bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {why}')


def decode_patch(content_type: str, body: bytes) -> Any:
    """A PATCH body orjson refused, as upstream's patch handler reads it: what Go's decoder
    accepts where orjson does not (invalid UTF-8, integers past 64 bits) decoded, else a 400 in
    its words. A JSON or merge patch is first decoded strictly under Strict and Warn (``error
    decoding patch: `` and Go's syntax error); under Ignore a JSON patch is the json-patch
    library's syntax error and a merge patch its ``Invalid JSON Patch``; a strategic merge patch
    is Go's syntax error alone. A number past a float64's range is Go's decoding error, under
    Strict and Warn as upstream words it (under Ignore upstream's libraries keep its text and
    the patched object fails to decode, a 422; here the same 400), never an infinity stored
    as null."""
    problem = gojson.syntax_error(body)
    if problem is None:
        try:
            return gojson.loads(body)
        except gojson.NumberOutOfRange as e:
            problem = str(e)
            if content_type == "application/strategic-merge-patch+json" or _directive()[0] == "Ignore":
                raise ApiError.bad_request(problem) from None
            raise ApiError.bad_request(f"error decoding patch: {problem}") from None
    if content_type == "application/strategic-merge-patch+json":
        raise ApiError.bad_request(problem)
    directive, _ = _directive()
    if directive != "Ignore":
        raise ApiError.bad_request(f"error decoding patch: {problem}")
    raise ApiError.bad_request(problem if content_type == "application/json-patch+json" else "Invalid JSON Patch")


def check_merge_patch(rtype: ResourceType, patch: Any) -> None:
    """Refuse a JSON merge patch that is no JSON object where upstream's patch handler does.
    Under Strict and Warn it is first decoded as a map: 400 ``error decoding patch: json: cannot
    unmarshal array into Go value of type map[string]interface {}`` (what the Python client's
    ``patch_namespaced_custom_object`` with a list, sent as a merge patch, gets). A ``null``,
    and under Ignore a string, number or bool, is the merge patch library's 400 ``Invalid JSON
    Patch``; under Ignore an array replaces the object, which then does not decode: 422 against
    ``patch``, worded as for a built-in type (a custom resource's decoder words it otherwise)."""
    if isinstance(patch, dict):
        return
    directive, _ = _directive()
    if directive != "Ignore" and patch is not None:
        raise ApiError.bad_request(f"error decoding patch: json: cannot unmarshal {_json_type(patch)} into Go "
                                   "value of type map[string]interface {}")
    if not isinstance(patch, list):
        raise ApiError.bad_request("Invalid JSON Patch")
    raise _undecodable(rtype, "PATCH", patch, "couldn't get version/kind; json parse error: json: cannot unmarshal "
                       'array into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                       'Kind string "json:\\"kind,omitempty\\"" }')


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, as Go's decoding errors name it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "object" if isinstance(value, dict) else "number"


def fill_zero_values(rtype: ResourceType, obj: dict[str, Any], stored: dict[str, Any] | None) -> None:
    """Give ``obj`` (an object another path than ``check_object`` made: a server-side
    apply's merge) the fields Go always writes, its nulls their Go type's zero value, and
    its empty lists and maps the form upstream stores them in, as ``check_object`` does;
    the parts equal to ``stored``'s are not walked. A required field missing (an item a
    null made an empty struct, one applied as ``{}``) is 422 Invalid, as in a create or
    update: the merge keeps what it was sent, and stored, ``subjects: [null]`` was an
    object its next update refused. Of a custom resource, only the metadata's nulls, empty
    maps and lists and zero scalars (its ObjectMeta's, as ``_check_custom_metadata``; the rest
    is its schema's to prune)."""
    if rtype.custom is not None:
        meta = obj.get("metadata")
        if type(meta) is dict:
            found = metadata_shape().check({"metadata": meta}, count_keys=False)
            if found.nulls:
                zero_nulls(found.nulls)
            if found.emptied:  # (after the nulls: a null label is "", kept)
                empty_collections(found.emptied, decoded=True)
        return
    shape = shape_of(rtype.group, rtype.version, rtype.kind)
    if shape is None:
        return
    found = shape.check(obj, count_keys=False, known=stored)
    if found.nulls and zero_nulls(found.nulls):
        again = shape.check(obj, count_keys=False, known=stored)
        found.missing, found.unfilled, found.emptied = again.missing, again.unfilled, again.emptied
    if found.unfilled:
        fill_zeros(found.unfilled)
    if found.emptied:
        empty_collections(found.emptied, decoded=True)
    _require(rtype, obj, found)


def to_stored_form(rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, changed: bool) -> None:
    """Give a built-in object about to be stored, admitted and validated, the form upstream's
    protobuf storage reads it back in: its empty lists without ``omitempty``, ``[]`` to
    admission, null (``validation.stored_form``; ``changed``: mutating admission changed it).
    ``old``: the stored object it replaces. Custom resources, stored as JSON, keep theirs, but
    for their metadata, which upstream's storage encoding writes back as ObjectMeta (its
    conversion to the storage version coerces it): what a mutation added to it is settled."""
    if rtype.custom is not None:
        meta = obj.get("metadata")
        if changed and type(meta) is dict:
            found = metadata_shape().check({"metadata": meta}, count_keys=False)
            if found.emptied:
                empty_collections(found.emptied)
        return
    shape = shape_of(rtype.group, rtype.version, rtype.kind)
    if shape is not None:
        stored_form(shape, obj, old, changed)


def unknown_fields(rtype: ResourceType, obj: dict[str, Any], paths: list[str]) -> None:
    """Report unknown fields found by another check (a custom resource's pruning by its
    CRD's schema) under the request's directive, as ``check_object`` reports its own:
    Strict fails the request, Warn adds a warning each, Ignore says nothing."""
    directive, method = _directive()
    if not paths or directive == "Ignore":
        return
    problems = [f'unknown field "{p}"' for p in paths]
    if directive == "Strict":
        raise _undecodable(rtype, method, obj, "strict decoding error: " + ", ".join(problems))
    for p in problems:
        add_warning(p)


def _patch_duplicates(patch: bytes) -> list[str]:
    """``duplicate field "a.b"`` for each key a merge patch repeats (the patch is untyped:
    unknown fields are the patched object's to report)."""
    tree = orjson.loads(patch)
    if not may_have_duplicates(patch, _object_keys(tree)):
        return []
    tree, duplicates = decode_with_duplicates(patch)
    return [f'duplicate field "{path}"' for path in _duplicate_paths(tree, duplicates, "")]


_JSON_PATCH_FIELDS = frozenset(("op", "path", "from", "value"))  # upstream's jsonPatchOp


def json_patch_problems(patch: bytes, ops: list[Any]) -> list[str]:
    """What upstream's strict decoding of a JSON patch into its operations finds, in the
    order met: a field an operation repeats (in its ``value`` too, at any depth) or does not
    have, each ``json patch duplicate field "[1].path"``, ``json patch unknown field "[0].foo"``
    (an unknown field's value is skipped, not looked into)."""
    unknown = any(isinstance(op, dict) and not op.keys() <= _JSON_PATCH_FIELDS for op in ops)
    if not unknown and not may_have_duplicates(patch, _object_keys(ops)):
        return []
    tree, duplicates = decode_with_duplicates(patch)
    found = []
    for i, op in enumerate(tree):
        if not isinstance(op, dict):
            continue
        repeated = duplicates.get(id(op), ())
        for k, v in op.items():
            if k in repeated:
                found.append(f'json patch duplicate field "[{i}].{k}"')
            if k not in _JSON_PATCH_FIELDS:
                found.append(f'json patch unknown field "[{i}].{k}"')
            elif k == "value":
                found.extend(f'json patch duplicate field "{p}"'
                             for p in _duplicate_paths(v, duplicates, f"[{i}].value"))
    return found


def _object_keys(value: Any) -> int:
    """The keys of every dict in ``value``, through dicts and lists (a loop, not a
    recursion of generators: every merge patch is counted)."""
    n = 0
    pending = [value]
    while pending:
        v = pending.pop()
        if isinstance(v, dict):
            n += len(v)
            pending.extend(v.values())
        elif isinstance(v, list):
            pending.extend(v)
    return n


def _duplicate_paths(value: Any, duplicates: dict[int, list[str]], path: str) -> Iterator[str]:
    if isinstance(value, dict):
        repeated = duplicates.get(id(value), ())
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in repeated:
                yield sub
            yield from _duplicate_paths(v, duplicates, sub)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _duplicate_paths(v, duplicates, f"{path}[{i}]")


def _undecodable(rtype: ResourceType, method: str, obj: dict[str, Any] | list[Any], why: str,
                 sent: tuple[Any, Any, str] | None = None) -> ApiError:
    """A decoding failure as upstream words it: a create or update is a 400 naming the
    kind; a patch a 422 with the patched object as the invalid value of ``patch`` (with the
    float ``sent`` locates written as the patch wrote it, as upstream's json-patch library
    writes it back)."""
    if method != "PATCH":
        return ApiError.bad_request(f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
                                    f"{rtype.kind}: {why}")
    if sent is None:
        return _invalid_patch(orjson.dumps(obj).decode(), why)
    container, key, text = sent
    number = container[key]
    container[key] = orjson.Fragment(text)
    try:
        return _invalid_patch(orjson.dumps(obj).decode(), why)
    finally:
        container[key] = number


def _not_decoded(rtype: ResourceType, method: str, obj: dict[str, Any], strategic: Any, why: str) -> ApiError:
    """``_undecodable``, but for a strategic merge patch of a built-in type the invalid value
    is the patch's own map as Go's ``%+v`` prints it, not the patched object: upstream's
    ``applyPatchToObject`` reports its converter's errors, the strict ones (``kubectl edit``
    adding an unknown field) too, that way, where a JSON or merge patch reports the patched
    object's JSON."""
    if strategic is not None and rtype.custom is None:
        return _invalid_patch(go_value(strategic), why)
    return _undecodable(rtype, method, obj, why)


def invalid_patch(obj: dict[str, Any], why: str) -> ApiError:
    """Upstream's 422 for a patched object ``obj`` that does not decode, for ``why``."""
    return _invalid_patch(orjson.dumps(obj).decode(), why)


def _invalid_patch(value: str, why: str) -> ApiError:
    """Upstream's 422 for a patch whose result does not decode: ``value`` (the patched
    object's JSON; a strategic merge patch's own map, as Go prints it) is the invalid
    value of the field ``patch``."""
    message = f"Invalid value: {quote(value)}: {why}"
    # NewInvalid of an empty GroupKind and name: the message starts with a space
    return ApiError(422, "Invalid", f' "" is invalid: patch: {message}',
                    {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]})


def go_value(value: Any) -> str:
    """``value`` (decoded JSON) as Go's ``%+v`` prints the map it decodes into: maps with
    their keys sorted, ``map[a:1 b:[x y]]``, strings bare, null ``<nil>``."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_v(value)
    return str(value)


def _require(rtype: ResourceType, obj: dict[str, Any], found: Findings) -> None:
    if not found.missing:
        return
    meta = obj.get("metadata")
    name = (meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""
    raise ApiError.invalid(rtype, str(name), [{"reason": "FieldValueRequired", "message": "Required value",
                                               "field": path} for path in found.missing])
