"""``/openapi/v3``: the OpenAPI 3.0 documents of the served group-versions, as kube-apiserver publishes them.

``GET /openapi/v3`` is the index kubectl starts from::

    {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=9F2C..."},
               "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=..."}, ...}}

and ``GET /openapi/v3/api/v1`` (``.../apis/<group>/<version>``) one group-version's
document: ``paths`` with an operation per verb of every served resource (each
carrying ``operationId``, ``x-kubernetes-action`` and ``x-kubernetes-group-version-kind``;
the PATCH operations declare ``fieldValidation``, which is how kubectl learns that
the server validates fields itself), and ``components.schemas`` converted from the
built-in definitions (``controlplane.registry.schema``):

- ``#/$defs/X`` becomes ``#/components/schemas/X``; a ``$ref`` with siblings
  (``description``, ``default``) is wrapped in ``allOf``, since OpenAPI 3.0 ignores
  the siblings of a ``$ref``;
- JSON Schema's nullable ``["string", "null"]`` becomes the non-null type;
- ``IntOrString`` and ``Quantity`` are published as upstream does, ``oneOf`` two
  scalar types without a ``type`` of their own (``format: int-or-string`` for the
  former), so that ``kubectl explain`` names them ``<IntOrString>`` and ``<Quantity>``;
- the ``enum`` the definitions' source adds to ``apiVersion`` and ``kind`` is dropped
  (kube-apiserver publishes none); every ``x-kubernetes-*`` extension is kept.

The ``hash`` in each URL is the document's ETag (SHA-512 of its bytes, as upstream):
a request carrying the current hash gets ``Cache-Control: public, immutable`` and a
one-year ``Expires``; a stale hash is redirected (301) to the current URL. Each
document is built on first request and its bytes cached; ``invalidate(group, version)``
drops one (a type added at run time, such as a custom resource, changes its
group-version's document), and ``set_schema`` supplies the schema of a kind the
built-in definitions do not have.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs

import orjson

from ..registry import Registry, ResourceType
from ..registry.schema import KUBERNETES_VERSION, Definitions, Schema, definitions
from .rest import SUPPORTED_QUERY, accepted_patch_types

__all__ = ["OpenApiV3", "convert_schema", "custom_resource_schema"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PREFIX = "/openapi/v3"
_SOURCE_REF = "#/$defs/"
_REF = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_YEAR = 365 * 24 * 3600


# -- schemas ---------------------------------------------------------------------------
def convert_schema(node: Any) -> Any:
    """A JSON Schema node of the definitions as an OpenAPI 3.0 schema node (see the module doc)."""
    if isinstance(node, list):
        return [convert_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(_SOURCE_REF):
            out[key] = _REF + value[len(_SOURCE_REF):]
        elif key == "type" and isinstance(value, list):
            rest = [t for t in value if t != "null"]
            if rest:
                out[key] = rest[0]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: convert_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "oneOf", "anyOf", "allOf"):
            out[key] = convert_schema(value)
        else:
            out[key] = value
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


def _definition(name: str, node: Schema) -> Schema:
    """One named definition, converted, with the upstream forms of the special types."""
    if name == _INT_OR_STRING:
        return {"description": "IntOrString holds an int32 or a string; which one is kept as sent.",
                "format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}
    if name == _QUANTITY:
        return {"description": "Quantity is a fixed-point number, written as a string in the Kubernetes "
                               "quantity format (for example \"100m\", \"1.5Gi\", \"2\").",
                "oneOf": [{"type": "string"}, {"type": "number"}]}
    out: Schema = convert_schema(node)
    props = out.get("properties")
    if "x-kubernetes-group-version-kind" in out and isinstance(props, dict):
        for field in ("apiVersion", "kind"):
            if isinstance(props.get(field), dict):
                props[field] = {k: v for k, v in props[field].items() if k != "enum"}
    return out


def _refs(node: Any, found: set[str]) -> None:
    """Add the definition names ``node`` refers to (``#/$defs/X``) to ``found``."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SOURCE_REF):
            found.add(ref[len(_SOURCE_REF):])
        for value in node.values():
            if isinstance(value, (dict, list)):
                _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _closure(defs: Definitions, roots: Iterable[str]) -> list[str]:
    """The named definitions reachable from ``roots``, sorted."""
    seen: set[str] = set()
    todo = [r for r in roots if r in defs.defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        refs: set[str] = set()
        _refs(defs.defs[name], refs)
        todo.extend(r for r in refs if r not in seen and r in defs.defs)
    return sorted(seen)


# -- paths -----------------------------------------------------------------------------
def _param(name: str, where: str, kind: str, description: str, required: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, "in": where, "description": description,
                         "schema": {"type": kind, "uniqueItems": True}}
    if required:
        p["required"] = True
    return p


_QUERY_PARAMS = {p["name"]: p for p in (
    _param("pretty", "query", "string", "If 'true', then the output is pretty printed."),
    _param("allowWatchBookmarks", "query", "boolean", "Ask for BOOKMARK events in a watch."),
    _param("continue", "query", "string", "The continue token of the previous page of a list."),
    _param("fieldSelector", "query", "string", "Restrict the returned objects by their fields."),
    _param("labelSelector", "query", "string", "Restrict the returned objects by their labels."),
    _param("limit", "query", "integer", "The most objects a list returns; the rest is behind a continue token."),
    _param("resourceVersion", "query", "string", "The resource version a read or watch is served from."),
    _param("resourceVersionMatch", "query", "string", "How resourceVersion applies to a list: Exact or "
                                                      "NotOlderThan."),
    _param("sendInitialEvents", "query", "boolean", "Start a watch with the current state, ended by a "
                                                    "bookmark annotated k8s.io/initial-events-end."),
    _param("timeoutSeconds", "query", "integer", "Limit the duration of a list or watch call."),
    _param("watch", "query", "boolean", "Watch for changes and return them as a stream of events."),
    _param("dryRun", "query", "string", "When present, the modification is not persisted."),
    _param("fieldManager", "query", "string", "The name of the actor making these changes."),
    _param("fieldValidation", "query", "string",
           "How the server responds to unknown and duplicate fields in the request's object: Ignore drops "
           "them, Warn (the default) drops them with a warning for each, Strict fails the request."),
    _param("force", "query", "boolean", "Force an apply request, taking over conflicting fields."),
    _param("gracePeriodSeconds", "query", "integer", "Seconds before the object is deleted; 0 deletes now."),
    _param("orphanDependents", "query", "boolean", "Deprecated: use propagationPolicy."),
    _param("propagationPolicy", "query", "string", "Garbage collection of dependents: Orphan, Background or "
                                                   "Foreground."),
)}
_LIST = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
         "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_PATCH = ("dryRun", "fieldManager", "fieldValidation", "force")
_DELETE = ("gracePeriodSeconds", "orphanDependents", "propagationPolicy", "dryRun")


def _query(names: Iterable[str]) -> list[dict[str, Any]]:
    """The declared query parameters of an operation: those this server accepts."""
    return [_QUERY_PARAMS[n] for n in names if n in SUPPORTED_QUERY]


def _content(ref: str, types: Iterable[str] = ("application/json", "application/yaml")) -> dict[str, Any]:
    return {t: {"schema": {"$ref": _REF + ref}} for t in types}


def _camel(group: str, version: str) -> str:
    """``CoreV1``, ``AppsV1``, ``RbacAuthorizationV1``, ``SchedulingV1beta1``: upstream's operationId infix."""
    name = group.removesuffix(".k8s.io") if group else "core"
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", ".").split(".")) + version.capitalize()


def _tag(group: str, version: str) -> str:
    name = group.removesuffix(".k8s.io") if group else "core"
    parts = name.replace("-", ".").split(".")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) + "_" + version


class _PathBuilder:
    """The path items of one resource type."""

    def __init__(self, t: ResourceType, kind_def: str, list_def: str | None) -> None:
        self.t = t
        self.kind_def = kind_def
        self.list_def = list_def or kind_def
        self.gvk = {"group": t.group, "version": t.version, "kind": t.kind}
        self.gv = _camel(t.group, t.version)
        self.tags = [_tag(t.group, t.version)]

    def _op(self, verb: str, action: str, description: str, params: list[dict[str, Any]],
            responses: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
        op: dict[str, Any] = {"description": description, "operationId": verb, "tags": self.tags}
        if params:
            op["parameters"] = params
        if body is not None:
            op["requestBody"] = {"content": body, "required": True}
        op["responses"] = responses
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = self.gvk
        return op

    def _ok(self, ref: str, *codes: str) -> dict[str, Any]:
        names = {"200": "OK", "201": "Created", "202": "Accepted"}
        return {c: {"description": names[c], "content": _content(ref)} for c in codes}

    def paths(self, prefix: str) -> dict[str, dict[str, Any]]:
        t, kind = self.t, self.t.kind
        ns = "Namespaced" if t.namespaced else ""
        scope = f"{prefix}/namespaces/{{namespace}}" if t.namespaced else prefix
        collection = f"{scope}/{t.plural}"
        item = f"{collection}/{{name}}"
        common = [_QUERY_PARAMS["pretty"]]
        ns_param = [_param("namespace", "path", "string", "object name and auth scope, such as for teams and "
                           "projects", required=True)] if t.namespaced else []
        name_param = [_param("name", "path", "string", f"name of the {kind}", required=True)]
        verbs = set(t.verbs)
        out: dict[str, dict[str, Any]] = {}

        coll: dict[str, Any] = {}
        if "list" in verbs:
            coll["get"] = self._op(f"list{self.gv}{ns}{kind}", "list", f"list or watch objects of kind {kind}",
                                   _query(_LIST), {"200": {"description": "OK", "content": _content(
                                       self.list_def, ("application/json", "application/json;stream=watch",
                                                       "application/yaml"))}})
        if "create" in verbs:
            coll["post"] = self._op(f"create{self.gv}{ns}{kind}", "post", f"create a {kind}", _query(_WRITE),
                                    self._ok(self.kind_def, "200", "201", "202"),
                                    _content(self.kind_def, ("application/json",)))
        if "deletecollection" in verbs:
            coll["delete"] = self._op(f"delete{self.gv}Collection{ns}{kind}", "deletecollection",
                                      f"delete collection of {kind}", _query((*_DELETE, *_LIST)),
                                      self._ok(_META + "Status", "200"),
                                      _content(_META + "DeleteOptions", ("application/json",)))
        if coll:
            out[collection] = {**coll, "parameters": ns_param + common}

        one: dict[str, Any] = {}
        if "get" in verbs:
            one["get"] = self._op(f"read{self.gv}{ns}{kind}", "get", f"read the specified {kind}", [],
                                  self._ok(self.kind_def, "200"))
        if "update" in verbs:
            one["put"] = self._op(f"replace{self.gv}{ns}{kind}", "put", f"replace the specified {kind}",
                                  _query(_WRITE), self._ok(self.kind_def, "200", "201"),
                                  _content(self.kind_def, ("application/json",)))
        if "patch" in verbs:
            one["patch"] = self._op(f"patch{self.gv}{ns}{kind}", "patch", f"partially update the specified {kind}",
                                    _query(_PATCH), self._ok(self.kind_def, "200", "201"),
                                    _content(_META + "Patch", accepted_patch_types(t)))
        if "delete" in verbs:
            one["delete"] = self._op(f"delete{self.gv}{ns}{kind}", "delete", f"delete a {kind}", _query(_DELETE),
                                     self._ok(self.kind_def, "200", "202"),
                                     _content(_META + "DeleteOptions", ("application/json",)))
        if one:
            out[item] = {**one, "parameters": name_param + ns_param + common}

        if "status" in t.subresources:
            out[f"{item}/status"] = {
                "get": self._op(f"read{self.gv}{ns}{kind}Status", "get", f"read status of the specified {kind}",
                                [], self._ok(self.kind_def, "200")),
                "put": self._op(f"replace{self.gv}{ns}{kind}Status", "put",
                                f"replace status of the specified {kind}", _query(_WRITE),
                                self._ok(self.kind_def, "200", "201"), _content(self.kind_def, ("application/json",))),
                "patch": self._op(f"patch{self.gv}{ns}{kind}Status", "patch",
                                  f"partially update status of the specified {kind}", _query(_PATCH),
                                  self._ok(self.kind_def, "200", "201"),
                                  _content(_META + "Patch", accepted_patch_types(t))),
                "parameters": name_param + ns_param + common,
            }
        if t.namespaced and "list" in verbs:
            out[f"{prefix}/{t.plural}"] = {
                "get": self._op(f"list{self.gv}{kind}ForAllNamespaces", "list",
                                f"list or watch objects of kind {kind}", _query(_LIST),
                                {"200": {"description": "OK", "content": _content(self.list_def)}}),
                "parameters": common,
            }
        return out


# -- documents -------------------------------------------------------------------------
def gv_path(group: str, version: str) -> str:
    """The index key of a group-version: ``api/v1``, ``apis/apps/v1``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


class _Document:
    __slots__ = ("body", "etag")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.etag = hashlib.sha512(body).hexdigest().upper()


def custom_resource_schema(t: ResourceType) -> Schema | None:
    """The schema to publish (``set_schema``) for a custom resource: its CRD version's
    ``openAPIV3Schema``, with ``apiVersion`` and ``kind`` strings and ``metadata``
    ObjectMeta, as apiextensions-apiserver publishes it (None without a schema)."""
    if t.custom is None or t.custom.schema is None:
        return None
    schema = copy.deepcopy(t.custom.schema)
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = {"allOf": [{"$ref": _REF + _META + "ObjectMeta"}]}
    return schema


class OpenApiV3:
    """The ``/openapi/v3`` documents of a ``Registry``'s group-versions, built lazily, cached as bytes."""

    def __init__(self, registry: Registry, defs: Definitions | None = None) -> None:
        self.registry = registry
        self._defs = defs
        self._docs: dict[str, _Document] = {}
        self._extra: dict[tuple[str, str, str], Schema] = {}

    @property
    def defs(self) -> Definitions:
        if self._defs is None:
            self._defs = definitions()
        return self._defs

    def group_versions(self) -> list[tuple[str, str]]:
        return sorted((g, v) for g, versions in self.registry.groups().items() for v in versions)

    def set_schema(self, group: str, version: str, kind: str, schema: Schema) -> None:
        """Publish ``schema`` (OpenAPI 3.0, as converted) for a kind without a built-in definition."""
        self._extra[(group, version, kind)] = schema
        self.invalidate(group, version)

    def invalidate(self, group: str, version: str) -> None:
        """Forget the cached document of a group-version (its types or schemas changed)."""
        self._docs.pop(gv_path(group, version), None)

    def index(self) -> bytes:
        paths = {}
        for g, v in self.group_versions():
            key = gv_path(g, v)
            doc = self._document(g, v)
            paths[key] = {"serverRelativeURL": f"{PREFIX}/{key}?hash={doc.etag}"}
        return orjson.dumps({"paths": paths})

    def document(self, path: str) -> _Document | None:
        """The document of ``api/v1`` or ``apis/<group>/<version>``, or None if that is not served."""
        for g, v in self.group_versions():
            if gv_path(g, v) == path:
                return self._document(g, v)
        return None

    def _document(self, group: str, version: str) -> _Document:
        key = gv_path(group, version)
        doc = self._docs.get(key)
        if doc is None:
            doc = self._docs[key] = _Document(orjson.dumps(self.build(group, version)))
        return doc

    def build(self, group: str, version: str) -> dict[str, Any]:
        """The OpenAPI document of one group-version, as a dict."""
        defs = self.defs
        prefix = "/" + ("apis/" + group if group else "api") + "/" + version
        paths: dict[str, Any] = {}
        roots = {_META + n for n in ("DeleteOptions", "Status", "Patch", "WatchEvent")}
        schemas: dict[str, Any] = {}
        for t in sorted(self.registry.in_group_version(group, version), key=lambda t: t.plural):
            kind_def = defs.name_of(t.group, t.version, t.kind)
            list_def = defs.name_of(t.group, t.version, t.list_kind)
            if kind_def is None:
                kind_def, list_def = self._custom(t, schemas)
            else:
                roots.add(kind_def)
                if list_def is not None:
                    roots.add(list_def)
            paths.update(_PathBuilder(t, kind_def, list_def).paths(prefix))
        for name in _closure(defs, roots):
            schemas.setdefault(name, _definition(name, defs.defs[name]))
        return {"openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": f"v{KUBERNETES_VERSION}"},
                "paths": dict(sorted(paths.items())),
                "components": {"schemas": dict(sorted(schemas.items()))}}

    def _custom(self, t: ResourceType, schemas: dict[str, Any]) -> tuple[str, str]:
        """Schemas for a kind without a built-in definition: the one ``set_schema`` gave,
        else an object that keeps every field (the form of a CRD without a schema)."""
        group = ".".join(reversed(t.group.split("."))) if t.group else "core"
        name, list_name = f"{group}.{t.version}.{t.kind}", f"{group}.{t.version}.{t.list_kind}"
        gvk = [{"group": t.group, "version": t.version, "kind": t.kind}]
        schema = self._extra.get((t.group, t.version, t.kind)) or {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        schemas[name] = {**schema, "x-kubernetes-group-version-kind": gvk}
        schemas[list_name] = {
            "type": "object", "required": ["items"],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"allOf": [{"$ref": _REF + _META + "ListMeta"}]},
                           "items": {"type": "array", "items": {"$ref": _REF + name}}},
            "x-kubernetes-group-version-kind": [{**gvk[0], "kind": t.list_kind}]}
        schemas.update({n: _definition(n, self.defs.defs[n])
                        for n in _closure(self.defs, [_META + "ListMeta", _META + "ObjectMeta"])})
        return name, list_name

    # -- HTTP --------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD"):
            return await _reply(send, 405, _status(405, "MethodNotAllowed",
                                                   f"the server does not allow this method ({method})"), method)
        headers = dict(scope.get("headers", ()))
        if not _accepts_json(headers.get(b"accept", b"").decode("latin-1")):
            return await _reply(send, 406, _status(406, "NotAcceptable",
                                                   "only application/json is served for OpenAPI v3"), method)
        path: str = scope["path"].rstrip("/")
        if path == PREFIX:
            body = self.index()
            return await _reply(send, 200, body, method, [(b"etag", _quoted(_sha512(body)))])
        doc = self.document(path[len(PREFIX) + 1:]) if path.startswith(PREFIX + "/") else None
        if doc is None:
            return await _reply(send, 404, _status(404, "NotFound",
                                                   f"the server could not find the requested resource ({path})"),
                                method)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        wanted = query.get("hash", [""])[-1]
        extra = [(b"etag", _quoted(doc.etag))]
        if wanted and wanted != doc.etag:
            location = f"{path}?hash={doc.etag}".encode()
            return await _reply(send, 301, b"", method, [(b"location", location)])
        if wanted:
            extra += [(b"vary", b"Accept"), (b"cache-control", b"public, immutable"),
                      (b"expires", formatdate(time.time() + _YEAR, usegmt=True).encode())]
        if headers.get(b"if-none-match", b"").strip() in (_quoted(doc.etag), doc.etag.encode()):
            return await _reply(send, 304, b"", method, extra, content_type=False)
        await _reply(send, 200, doc.body, method, extra)


def _sha512(body: bytes) -> str:
    return hashlib.sha512(body).hexdigest().upper()


def _quoted(etag: str) -> bytes:
    return b'"' + etag.encode() + b'"'


def _accepts_json(accept: str) -> bool:
    if not accept.strip():
        return True
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("application/json", "application/*", "*/*"):
            return True
    return False


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code})


async def _reply(send: Send, code: int, body: bytes, method: str,
                 extra: list[tuple[bytes, bytes]] | None = None, content_type: bool = True) -> None:
    headers = [(b"content-type", b"application/json")] if content_type else []
    headers += [*(extra or []), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
