"""What a response is written as, from the request's ``Accept`` header, as kube-apiserver
negotiates it (k8s.io/apiserver ``endpoints/handlers/negotiation``).

The header is parsed as goautoneg parses it: clauses split at ``,``, a clause without a
``/`` dropped (``*`` alone is ``*/*``), ``q`` read but never a reason to refuse a clause
(``q=0`` included), and the clauses sorted by its comparison (higher ``q`` first, but a
concrete type before a wildcard whatever their ``q``) with an insertion sort, so equal
clauses keep their order. Media types are compared as written (case-sensitive). The
first clause that names a served type (``application/json``, ``application/yaml``,
``application/vnd.kubernetes.protobuf``, or a wildcard of them, JSON first) with
parameters the endpoint allows wins:

- ``as``/``g``/``v`` ask for a conversion: ``Table`` (JSON or YAML only) and
  ``PartialObjectMetadata``/``PartialObjectMetadataList`` of ``meta.k8s.io`` ``v1`` or
  ``v1beta1`` on a resource, nothing anywhere else (discovery documents, errors);
- ``stream`` must be ``watch``, of a type with a stream form (not YAML);
- ``sv`` must be ``v1`` (the meta group's version), and only on a resource;
- a custom resource's own object has no protobuf form.

No clause that does: 406 NotAcceptable, listing every served type. An empty header is
JSON. The server writes JSON for protobuf (a client asking for protobuf also accepts
JSON), and YAML as the same document with its keys sorted, as upstream's JSON-to-YAML
conversion sorts them. A watch needs a type with a stream form, so YAML there is a 406
that lists the stream types. An error is written as the header negotiates without
conversions (JSON if nothing is left), as upstream's ``ErrorNegotiated``. A pod's log
is text and takes any ``Accept``.
"""

from __future__ import annotations

import contextvars
import functools
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from .errors import ApiError
from .rewriting import Send, rewriting_writer

__all__ = ["AS_JSON", "AS_PROTOBUF", "AS_YAML", "BUILTIN", "CUSTOM", "JSON_OUTPUT", "NOT_ACCEPTABLE",
           "NOT_ACCEPTABLE_STREAM", "OUTPUT", "PLAIN", "UNPARSEABLE", "Output", "body_media_type", "error_format",
           "negotiate", "negotiated_writer"]

AS_JSON, AS_YAML, AS_PROTOBUF = "json", "yaml", "protobuf"
NOT_ACCEPTABLE = ApiError(406, "NotAcceptable", "only the following media types are accepted: application/json, "
                          "application/yaml, application/vnd.kubernetes.protobuf")
NOT_ACCEPTABLE_STREAM = ApiError(406, "NotAcceptable", "only the following media types are accepted: "
                                 "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch")

# What an endpoint lets a client ask for (upstream's EndpointRestrictions).
PLAIN = 0    # DefaultEndpointRestrictions: no conversion (discovery documents, errors)
BUILTIN = 1  # a built-in resource's RequestScope
CUSTOM = 2   # a custom resource's: its StandardSerializers leave out protobuf

_META = "meta.k8s.io"
_META_VERSIONS = ("v1", "v1beta1")
_PARTIAL = ("PartialObjectMetadata", "PartialObjectMetadataList")
# the served media types in upstream's order: type, subtype, format, has a stream form
_SERVED = (("application", "json", AS_JSON, True), ("application", "yaml", AS_YAML, False),
           ("application", "vnd.kubernetes.protobuf", AS_PROTOBUF, True))


@dataclass(frozen=True, slots=True)
class Output:
    """The negotiated answer: its format, and the conversion asked for (``kind`` and its
    ``meta.k8s.io`` version; no kind: the object itself)."""

    format: str
    kind: str = ""
    version: str = ""

    @property
    def table(self) -> bool:
        return self.kind == "Table"

    @property
    def metadata_only(self) -> str | None:
        """``meta.k8s.io/<version>`` for a PartialObjectMetadata(List) answer, else None."""
        return f"{_META}/{self.version}" if self.kind in _PARTIAL else None

    @property
    def yaml(self) -> bool:
        return self.format == AS_YAML


JSON_OUTPUT = Output(AS_JSON)

# This request's negotiated output, set where the endpoint is known (api/rest.py); the
# writer of ``negotiated_writer`` reads it when the answer starts.
OUTPUT: contextvars.ContextVar[Output] = contextvars.ContextVar("output", default=JSON_OUTPUT)


def _clauses(accept: str) -> list[tuple[str, str, float, dict[str, str]]]:
    """The clauses of an Accept header as goautoneg's ParseAccept gives them: (type,
    subtype, q, parameters), sorted."""
    out: list[tuple[str, str, float, dict[str, str]]] = []
    for part in accept.split(","):
        part = part.strip(" ")
        media, *params = part.split(";")
        kind, slash, rest = media.partition("/")
        kind = kind.strip(" ")
        if not slash:
            if kind != "*":
                continue
            sub = "*"
        else:
            if "/" in rest:
                continue
            sub = rest.strip(" ")
        q, found = 1.0, {}
        for param in params:
            key, eq, value = param.partition("=")
            if not eq or "=" in value:
                continue
            key = key.strip(" ")
            if key == "q":  # as Go's ParseFloat: no spaces around the number
                try:
                    q = float(value) if value == value.strip() else 0.0
                except ValueError:
                    q = 0.0
            else:
                found[key] = value.strip(" ")
        out.append((kind, sub, q, found))
    # Go's sort.Sort of a few elements is an insertion sort; its Less is goautoneg's
    for i in range(1, len(out)):
        j = i
        while j > 0 and _less(out[j], out[j - 1]):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


# Go's mime package: a token is any printable ASCII but space and these
_TSPECIALS = frozenset('()<>@,;:\\"/[]?=')
UNPARSEABLE = "(unparseable)"  # a body media type no serializer matches: 415


def _token(text: str) -> tuple[str, str]:
    """The token ``text`` starts with, and the rest (Go's ``consumeToken``)."""
    end = 0
    while end < len(text) and 32 < ord(text[end]) < 127 and text[end] not in _TSPECIALS:
        end += 1
    return text[:end], text[end:]


# Content-Type header -> its media type, for the few headers clients send (a request's read is then
# one dict lookup, where the parse walks the header a character at a time: 5-10 µs); bounded, so
# that a client sending ever new headers only misses the cache
_BODY_MEDIA_TYPES: dict[str, str] = {}
_BODY_MEDIA_TYPES_MAX = 256


def body_media_type(header: str) -> str:
    """A create or update body's ``Content-Type`` as Go's ``mime.ParseMediaType`` reads it for
    upstream's ``NegotiateInputSerializer``: the media type lowercased without its parameters,
    ``""`` for none (JSON), ``UNPARSEABLE`` for what Go does not parse (``;;;``, a parameter
    without a value), which no serializer matches.

    >>> body_media_type("Application/JSON; charset=latin1"), body_media_type("application/json; x")
    ('application/json', '(unparseable)')
    """
    media = _BODY_MEDIA_TYPES.get(header)
    if media is None:
        media = _parse_body_media_type(header)
        if len(_BODY_MEDIA_TYPES) < _BODY_MEDIA_TYPES_MAX:
            _BODY_MEDIA_TYPES[header] = media
    return media


def _parse_body_media_type(header: str) -> str:
    media, _, params = header.partition(";")
    media = media.strip().lower()
    if not media:
        return UNPARSEABLE if header.strip() else ""
    kind, rest = _token(media)
    if rest:
        sub, rest = _token(rest[1:]) if rest[0] == "/" else ("", rest)
        if not kind or not sub or rest:
            return UNPARSEABLE
    seen: set[str] = set()
    while params.strip():
        key, rest = _token(params.lstrip())
        rest = rest.lstrip()
        if not key or not rest.startswith("="):
            return media if not key and rest.strip() == ";" else UNPARSEABLE  # (a trailing ; is no error)
        rest = rest[1:].lstrip()
        if rest.startswith('"'):
            close = rest.find('"', 1)
            if close < 0:
                return UNPARSEABLE
            value, rest = rest[1:close], rest[close + 1:]
        else:
            value, rest = _token(rest)
            if not value:
                return UNPARSEABLE
        rest = rest.lstrip()
        if key.lower() in seen or (rest and not rest.startswith(";")):
            return UNPARSEABLE
        seen.add(key.lower())
        params = rest[1:] if rest else ""
    return media


def _less(a: tuple[str, str, float, dict[str, str]], b: tuple[str, str, float, dict[str, str]]) -> bool:
    return a[2] > b[2] or (a[0] != "*" and b[0] == "*") or (a[1] != "*" and b[1] == "*")


def _accepted(params: dict[str, str], fmt: str, streams: bool, endpoint: int) -> Output | None:
    """The output a clause's parameters ask for of ``fmt``, or None if the endpoint refuses
    them (upstream's acceptMediaTypeOptions with the endpoint's restrictions)."""
    kind = group = version = None
    for key, value in params.items():
        if key == "as":
            kind = value
        elif key == "g":
            group = value
        elif key == "v":
            version = value
        elif (key == "stream" and value and (not streams or value != "watch")) \
                or (key == "sv" and value and (endpoint == PLAIN or value != "v1")):
            return None
    if kind is None and group is None and version is None:
        if endpoint == CUSTOM and fmt == AS_PROTOBUF:
            return None
        return Output(fmt)
    if endpoint == PLAIN or group != _META or version not in _META_VERSIONS:
        return None
    if kind == "Table":
        return Output(fmt, kind, version) if fmt in (AS_JSON, AS_YAML) else None
    if kind in _PARTIAL:
        return Output(fmt, kind, version)
    return None


@functools.lru_cache(maxsize=1024)
def negotiate(accept: str, endpoint: int = PLAIN) -> Output | None:
    """What ``accept`` gets from an ``endpoint`` (PLAIN, BUILTIN, CUSTOM); None: a 406."""
    if not accept:
        return JSON_OUTPUT
    for kind, sub, _q, params in _clauses(accept):
        for served_kind, served_sub, fmt, streams in _SERVED:
            if (kind == served_kind and sub in (served_sub, "*")) or (kind == "*" and sub == "*"):
                found = _accepted(params, fmt, streams, endpoint)
                if found is not None:
                    return found
    return None


def error_format(accept: str) -> str:
    """The format of an error answer: as ``accept`` negotiates without conversions, else JSON."""
    found = negotiate(accept, PLAIN)
    return AS_YAML if found is not None and found.yaml else AS_JSON


def negotiated_writer(send: Send, errors_as_yaml: bool) -> Send:
    """``send``, with a JSON answer written as YAML when it is negotiated so: an error
    (a status of 400 or more) if ``errors_as_yaml``, any other answer if ``OUTPUT`` (read
    when it starts) is YAML. Other answers, and answers that are not JSON, go as they are."""

    def takes(start: dict[str, Any]) -> bool:
        as_yaml = errors_as_yaml if start["status"] >= 400 else OUTPUT.get().yaml
        return as_yaml and any(k == b"content-type" and v == b"application/json" for k, v in start.get("headers") or [])

    def as_yaml_document(start: dict[str, Any], whole: bytes) -> tuple[dict[str, Any], bytes]:
        # libyaml's emitter: PyYAML's own, in Python, takes seconds for a large list
        document = yaml.dump(orjson.loads(whole), Dumper=yaml.CSafeDumper, sort_keys=True,
                             allow_unicode=True, default_flow_style=False).encode()
        headers = [(k, v) for k, v in start.get("headers") or [] if k not in (b"content-type", b"content-length")]
        return {**start, "headers": [(b"content-type", b"application/yaml"),
                                     (b"content-length", str(len(document)).encode()), *headers]}, document

    return rewriting_writer(send, takes, as_yaml_document)
