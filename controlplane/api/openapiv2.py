"""``/openapi/v2``: the Swagger 2.0 document of every served type, as kube-apiserver publishes it.

kubectl still reads it: client-side validation (``kubectl apply -f`` of a ``kind: List``,
which the OpenAPI v3 field-validation check does not cover) and the patch metadata of a
client-side ``kubectl apply`` both come from client-go's ``discovery.OpenAPISchema()``,
which asks for ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
and decodes the body as gnostic's ``openapi_v2.Document``. ``Accept: application/json``
(or none) gets the same document as JSON.

The document is converted from the ``/openapi/v3`` documents (``OpenApiV3``), so custom
resources appear and disappear with theirs:

- ``definitions`` are the union of every group-version's ``components.schemas``, with
  ``#/components/schemas/X`` rewritten to ``#/definitions/X``; an ``allOf`` wrapping a
  single ``$ref`` becomes the ``$ref`` with its siblings (``description``), the form
  upstream publishes; ``oneOf``, ``anyOf`` and ``not`` are dropped (Swagger 2.0 has
  none); a ``nullable`` node loses its type, as apiextensions-apiserver publishes it
  (kubectl would otherwise reject an explicit null), and is not required of its object; a
  node with ``x-kubernetes-preserve-unknown-fields`` loses its properties, items and
  ``type: object``, and a custom resource's root with it is an object and its kind alone
  (apiextensions-apiserver's ``ToStructuralOpenAPIV2`` and ``buildKubeNative``: kubectl's
  validation would refuse any field its schema does not name); IntOrString is
  ``{type: string, format: int-or-string}`` and Quantity ``{type: string}``;
  every ``x-kubernetes-*`` extension is kept (the GVK that kubectl looks kinds up by,
  the patch strategy and merge key of strategic merge patch, list types);
- ``paths`` are the v3 operations in Swagger 2.0 form (``consumes``/``produces``, a
  ``body`` parameter, ``schema`` in each response), with their ``x-kubernetes-action``
  and ``x-kubernetes-group-version-kind``.

The protobuf encoding (gnostic-models ``openapiv2/OpenAPIv2.proto``) is written here:
a message is its fields, each a key (``field_number << 3 | wire_type``, a varint) then
a varint (wire type 0: bool, int64), 8 little-endian bytes (1: double) or a varint
length and that many bytes (2: string, nested message, one element of a repeated
message). A vendor extension is ``NamedAny{name: 1, value: 2 Any{yaml: 2}}`` with the
value as JSON text in ``yaml`` (JSON is YAML; kube-openapi parses it with a YAML parser).

Both bodies are built together, once per change of the v3 documents (compared by their
hashes on each request, which costs a dict look-up per group-version), off the event
loop; each has its ETag (SHA-512 of its bytes), and ``If-None-Match`` gets 304.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import time
from collections.abc import Awaitable, Callable, Iterable
from email.utils import formatdate
from typing import Any

import orjson

from ..registry.schema import KUBERNETES_VERSION
from .openapi import OpenApiV3, gv_path

__all__ = ["PATH", "PROTOBUF", "OpenApiV2", "encode_document", "swagger", "v2_schema"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PATH = "/openapi/v2"
JSON = "application/json"
PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# what client-go's discovery.OpenAPISchema() sends (answered with PROTOBUF, as kube-openapi does)
PROTOBUF_DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_V3_REF = "#/components/schemas/"
_V2_REF = "#/definitions/"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean"})
_DROPPED = frozenset({"oneOf", "anyOf", "not", "nullable", "writeOnly", "deprecated", "externalDocs", "xml"})


# -- OpenAPI v3 to Swagger 2.0 ---------------------------------------------------------
def v2_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema node as a Swagger 2.0 one (see the module doc)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = _V2_REF + value.removeprefix(_V3_REF)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: v2_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = v2_schema(value)
        elif key == "allOf" and isinstance(value, list):
            out[key] = [v2_schema(sub) for sub in value]
        elif key not in _DROPPED:
            out[key] = value
    wrapped = out.get("allOf")
    if isinstance(wrapped, list) and len(wrapped) == 1 and isinstance(wrapped[0], dict) and "$ref" in wrapped[0]:
        del out["allOf"]
        out = {"$ref": wrapped[0]["$ref"], **{k: v for k, v in out.items() if k != "$ref"}}
    preserves = node.get("x-kubernetes-preserve-unknown-fields") is True
    if node.get("nullable") is True:
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    if preserves:
        out.pop("items", None)
        out.pop("properties", None)
        if out.get("type") == "object":
            del out["type"]  # kubectl's validation would take the absent properties as none allowed
    kind = out.get("type")
    if kind is not None and (kind not in _TYPES or (kind == "array" and not isinstance(out.get("items"), dict))):
        del out["type"]  # kube-openapi rejects the whole document over an unknown type or an array without items
    required = out.get("required")
    if isinstance(required, list) and required:
        # a field that may be null need not be given: kubectl would otherwise ask for it
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("nullable") is True:
            del out["required"]
        else:
            props = node.get("properties")
            kept = [f for f in required if not (isinstance(props, dict) and isinstance(props.get(f), dict)
                                                and props[f].get("nullable") is True)]
            if kept != required:
                if kept:
                    out["required"] = kept
                else:
                    del out["required"]
    return out


def _definition(name: str, node: dict[str, Any]) -> dict[str, Any]:
    description = {"description": node["description"]} if "description" in node else {}
    if name == _INT_OR_STRING:
        return {**description, "type": "string", "format": "int-or-string"}
    if name == _QUANTITY:
        return {**description, "type": "string"}
    gvk = node.get("x-kubernetes-group-version-kind")
    if gvk is not None and node.get("x-kubernetes-preserve-unknown-fields") is True:
        # a custom resource whose every field is kept: an object and its kind alone, not even
        # apiVersion, kind and metadata, as apiextensions-apiserver publishes it (any property
        # would make kubectl's validation refuse the fields beside it)
        return {"type": "object", "x-kubernetes-group-version-kind": gvk}
    out: dict[str, Any] = v2_schema(node)
    return out


def _parameter(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if k != "schema"}
    schema = p.get("schema")
    if isinstance(schema, dict):
        out.update(v2_schema(schema))
    return out


def _operation(op: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    body = op.get("requestBody")
    content = body.get("content", {}) if isinstance(body, dict) else {}
    out["consumes"] = list(content) or ["*/*"]
    if "description" in op:
        out["description"] = op["description"]
    if "operationId" in op:
        out["operationId"] = op["operationId"]
    params = [_parameter(p) for p in op.get("parameters", ())]
    if content:
        schema = next(iter(content.values())).get("schema", {})
        params.insert(0, {"in": "body", "name": "body", "required": True, "schema": v2_schema(schema)})
    if params:
        out["parameters"] = params
    produces: dict[str, None] = {}
    responses: dict[str, Any] = {}
    for code, response in op.get("responses", {}).items():
        r: dict[str, Any] = {"description": response.get("description", "")}
        kinds = response.get("content", {})
        produces.update(dict.fromkeys(kinds))
        if kinds:
            r["schema"] = v2_schema(next(iter(kinds.values())).get("schema", {}))
        responses[code] = r
    responses.setdefault("401", {"description": "Unauthorized"})
    if produces:
        out["produces"] = list(produces)
    out["responses"] = responses
    out["schemes"] = ["https"]
    out.update({k: v for k, v in op.items() if k == "tags" or k.startswith("x-")})
    return out


def _path_item(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in item.items():
        if key == "parameters":
            out[key] = [_parameter(p) for p in value]
        elif key in ("get", "put", "post", "delete", "options", "head", "patch"):
            out[key] = _operation(value)
        elif key.startswith("x-"):
            out[key] = value
    return out


def swagger(documents: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The Swagger 2.0 document of the OpenAPI 3.0 documents of the served group-versions."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for doc in documents:
        for path, item in doc.get("paths", {}).items():
            paths[path] = _path_item(item)
        for name, schema in doc.get("components", {}).get("schemas", {}).items():
            if name not in definitions:
                definitions[name] = _definition(name, schema)
    return {"swagger": "2.0",
            "info": {"title": "Kubernetes", "version": f"v{KUBERNETES_VERSION}"},
            "paths": dict(sorted(paths.items())),
            "definitions": dict(sorted(definitions.items())),
            "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication",
                                                    "in": "header", "name": "authorization", "type": "apiKey"}},
            "security": [{"BearerToken": []}]}


# -- protobuf (gnostic-models openapiv2/OpenAPIv2.proto) ------------------------------
def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64: ten bytes of two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len(field: int, data: bytes) -> bytes:
    """A length-delimited field (wire type 2): a string, a message, one element of a repeated one."""
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, value: Any) -> bytes:
    return _len(field, str(value).encode()) if value not in (None, "") else b""


def _strs(field: int, values: Any) -> bytes:
    return b"".join(_len(field, str(v).encode()) for v in values) if isinstance(values, list) else b""


def _bool(field: int, value: Any) -> bytes:
    return _varint(field << 3) + b"\x01" if value is True else b""


def _int(field: int, value: Any) -> bytes:
    return _varint(field << 3) + _varint(int(value)) if isinstance(value, (int, float)) and value else b""


def _double(field: int, value: Any) -> bytes:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return _varint(field << 3 | 1) + struct.pack("<d", value) if ok else b""


def _any(value: Any) -> bytes:
    """gnostic's ``Any``: the value as YAML text (here JSON, with the spaces YAML parsers want)."""
    return _len(2, json.dumps(value, ensure_ascii=False).encode())


def _extensions(field: int, node: dict[str, Any]) -> bytes:
    return b"".join(_len(field, _str(1, k) + _len(2, _any(v))) for k, v in node.items() if k.startswith("x-"))


# (json key, field number, encoder) of the scalar fields of Schema and of the parameter sub-schemas
_SCHEMA_FIELDS: tuple[tuple[str, int, Callable[[int, Any], bytes]], ...] = (
    ("$ref", 1, _str), ("format", 2, _str), ("title", 3, _str), ("description", 4, _str),
    ("multipleOf", 6, _double), ("maximum", 7, _double), ("exclusiveMaximum", 8, _bool),
    ("minimum", 9, _double), ("exclusiveMinimum", 10, _bool), ("maxLength", 11, _int), ("minLength", 12, _int),
    ("pattern", 13, _str), ("maxItems", 14, _int), ("minItems", 15, _int), ("uniqueItems", 16, _bool),
    ("maxProperties", 17, _int), ("minProperties", 18, _int), ("required", 19, _strs),
    ("discriminator", 26, _str), ("readOnly", 27, _bool))
_QUERY_FIELDS: tuple[tuple[str, int, Callable[[int, Any], bytes]], ...] = (
    ("required", 1, _bool), ("in", 2, _str), ("description", 3, _str), ("name", 4, _str),
    ("allowEmptyValue", 5, _bool), ("type", 6, _str), ("format", 7, _str), ("collectionFormat", 9, _str),
    ("maximum", 11, _double), ("minimum", 13, _double), ("pattern", 17, _str), ("uniqueItems", 20, _bool))
# PathParameterSubSchema and HeaderParameterSubSchema: QueryParameterSubSchema without allowEmptyValue
_PATH_FIELDS: tuple[tuple[str, int, Callable[[int, Any], bytes]], ...] = (
    ("required", 1, _bool), ("in", 2, _str), ("description", 3, _str), ("name", 4, _str),
    ("type", 5, _str), ("format", 6, _str), ("collectionFormat", 8, _str),
    ("maximum", 10, _double), ("minimum", 12, _double), ("pattern", 16, _str), ("uniqueItems", 19, _bool))


def _fields(node: dict[str, Any], table: Iterable[tuple[str, int, Callable[[int, Any], bytes]]]) -> bytes:
    return b"".join(encode(number, node[key]) for key, number, encode in table if key in node)


def _schema(node: Any) -> bytes:
    if not isinstance(node, dict):
        return b""
    out = [_fields(node, _SCHEMA_FIELDS)]
    if "default" in node:
        out.append(_len(5, _any(node["default"])))
    if isinstance(node.get("enum"), list):
        out.extend(_len(20, _any(v)) for v in node["enum"])
    extra = node.get("additionalProperties")
    if isinstance(extra, bool):  # AdditionalPropertiesItem, a oneof: false is sent too
        out.append(_len(21, _varint(2 << 3) + (b"\x01" if extra else b"\x00")))
    elif isinstance(extra, dict):
        out.append(_len(21, _len(1, _schema(extra))))
    kind = node.get("type")
    if kind:  # TypeItem
        out.append(_len(22, _strs(1, kind if isinstance(kind, list) else [kind])))
    if isinstance(node.get("items"), dict):  # ItemsItem
        out.append(_len(23, _len(1, _schema(node["items"]))))
    if isinstance(node.get("allOf"), list):
        out.extend(_len(24, _schema(s)) for s in node["allOf"])
    props = node.get("properties")
    if isinstance(props, dict):  # Properties of NamedSchema
        out.append(_len(25, b"".join(_len(1, _str(1, k) + _len(2, _schema(v))) for k, v in props.items())))
    if "example" in node:
        out.append(_len(30, _any(node["example"])))
    out.append(_extensions(31, node))
    return b"".join(out)


def _parameter_pb(p: dict[str, Any]) -> bytes:
    """A ParametersItem: Parameter{body_parameter: 1 | non_body_parameter: 2}."""
    where = p.get("in")
    if where == "body":
        body = (_str(1, p.get("description")) + _str(2, p.get("name")) + _str(3, where)
                + _bool(4, p.get("required")) + _len(5, _schema(p.get("schema"))) + _extensions(6, p))
        return _len(1, _len(1, body))
    if where == "query":
        sub = _len(3, _fields(p, _QUERY_FIELDS) + _extensions(23, p))
    elif where == "path":
        sub = _len(4, _fields(p, _PATH_FIELDS) + _extensions(22, p))
    else:  # header (formData is never served)
        sub = _len(1, _fields(p, _PATH_FIELDS) + _extensions(22, p))
    return _len(1, _len(2, sub))


def _operation_pb(op: dict[str, Any]) -> bytes:
    responses = b"".join(
        _len(1, _str(1, code) + _len(2, _len(1, _str(1, r.get("description"))
                                        + (_len(2, _len(1, _schema(r["schema"]))) if "schema" in r else b""))))
        for code, r in op.get("responses", {}).items())
    return b"".join((_strs(1, op.get("tags")), _str(3, op.get("description")), _str(5, op.get("operationId")),
                     _strs(6, op.get("produces")), _strs(7, op.get("consumes")),
                     b"".join(_len(8, _parameter_pb(p)) for p in op.get("parameters", ())),
                     _len(9, responses), _strs(10, op.get("schemes")), _bool(11, op.get("deprecated")),
                     _extensions(13, op)))


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item_pb(item: dict[str, Any]) -> bytes:
    out = [_len(number, _operation_pb(item[m])) for m, number in _METHODS.items() if m in item]
    out.extend(_len(9, _parameter_pb(p)) for p in item.get("parameters", ()))
    out.append(_extensions(10, item))
    return b"".join(out)


def encode_document(doc: dict[str, Any]) -> bytes:
    """A Swagger 2.0 document (as ``swagger`` makes it) as a protobuf ``openapi.v2.Document``."""
    info = doc.get("info", {})
    paths = b"".join(_len(2, _str(1, p) + _len(2, _path_item_pb(item))) for p, item in doc.get("paths", {}).items())
    definitions = b"".join(_len(1, _str(1, name) + _len(2, _schema(s)))
                           for name, s in doc.get("definitions", {}).items())
    security_definitions = b"".join(  # all apiKey: SecurityDefinitionsItem{api_key_security: 2}
        _len(1, _str(1, name) + _len(2, _len(2, _str(1, s.get("type")) + _str(2, s.get("name"))
                                                + _str(3, s.get("in")) + _str(4, s.get("description")))))
        for name, s in doc.get("securityDefinitions", {}).items())
    security = b"".join(
        _len(12, b"".join(_len(1, _str(1, name) + _len(2, _strs(1, scopes))) for name, scopes in req.items()))
        for req in doc.get("security", ()))
    return b"".join((_str(1, doc.get("swagger")), _len(2, _str(1, info.get("title")) + _str(2, info.get("version"))),
                     _len(8, paths), _len(9, definitions), security, _len(13, security_definitions),
                     _extensions(16, doc)))


# -- HTTP ------------------------------------------------------------------------------
class _Built:
    __slots__ = ("json", "json_etag", "modified", "pb", "pb_etag")

    def __init__(self, doc: dict[str, Any]) -> None:
        self.json = orjson.dumps(doc)
        self.pb = encode_document(doc)
        self.json_etag = _quoted(self.json)
        self.pb_etag = _quoted(self.pb)
        self.modified = formatdate(time.time(), usegmt=True).encode()


def _quoted(body: bytes) -> bytes:
    return b'"' + hashlib.sha512(body).hexdigest().upper().encode() + b'"'


def _build(bodies: list[bytes]) -> _Built:
    return _Built(swagger(orjson.loads(b) for b in bodies))


def _media(accept: str) -> str | None:
    """The representation an Accept header picks: JSON, PROTOBUF, or None (406).
    Clauses are taken by quality, then in order, as kube-openapi's handler does."""
    if not accept.strip():
        return JSON
    clauses: list[tuple[float, int, str]] = []
    for i, part in enumerate(accept.split(",")):
        media, *params = (s.strip() for s in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            clauses.append((-q, i, media.lower()))
    for _, _, media in sorted(clauses):
        if media in (JSON, "application/*", "*/*"):
            return JSON
        if media in (PROTOBUF, PROTOBUF_DEPRECATED):
            return PROTOBUF
    return None


class OpenApiV2:
    """``GET /openapi/v2`` over an ``OpenApiV3``'s documents, rebuilt when one of them changes."""

    def __init__(self, v3: OpenApiV3) -> None:
        self.v3 = v3
        self._key: tuple[str, ...] = ()
        self._built: _Built | None = None
        self._lock = asyncio.Lock()

    def _sources(self) -> tuple[tuple[str, ...], list[bytes]]:
        """The v3 documents' hashes (what the v2 document depends on) and bodies."""
        docs = [self.v3.document(gv_path(g, v)) for g, v in self.v3.group_versions()]
        present = [d for d in docs if d is not None]
        return tuple(d.etag for d in present), [d.body for d in present]

    async def current(self) -> _Built:
        """The document of the current v3 documents, built if they changed since the last."""
        async with self._lock:
            key, bodies = self._sources()
            if self._built is None or key != self._key:
                self._built = await asyncio.to_thread(_build, bodies)  # ~0.2 s: off the event loop
                self._key = key
            return self._built

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD"):
            return await _reply(send, method, 405, [(b"content-type", JSON.encode())], _status(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"))
        headers = dict(scope.get("headers", ()))
        media = _media(headers.get(b"accept", b"").decode("latin-1"))
        if media is None:
            return await _reply(send, method, 406, [(b"content-type", JSON.encode())], _status(
                406, "NotAcceptable", f"only {JSON} and {PROTOBUF} are served for OpenAPI v2"))
        built = await self.current()
        body, etag = (built.json, built.json_etag) if media == JSON else (built.pb, built.pb_etag)
        extra = [(b"etag", etag), (b"last-modified", built.modified), (b"vary", b"Accept")]
        wanted = headers.get(b"if-none-match", b"")
        if wanted and (wanted.strip() == b"*" or etag in (t.strip() for t in wanted.split(b","))):
            return await _reply(send, method, 304, extra, b"")
        await _reply(send, method, 200, [(b"content-type", media.encode()), *extra], body)


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code})


async def _reply(send: Send, method: str, code: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    if code != 304:
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" or code == 304 else body})
