"""Request bodies in Kubernetes' protobuf encoding (``application/vnd.kubernetes.protobuf``), as JSON.

kubectl's generators (``kubectl create namespace|deployment|secret ...``), ``kubectl
drain``'s evictions and Go programs built on client-go's typed clientsets send
built-in objects in protobuf. The server decodes such a body into the JSON it says,
and the request goes on as a JSON one (validation, defaulting, storage): answers
stay JSON, which every client accepts.

The encoding: the bytes ``k8s\\x00``, then a ``runtime.Unknown`` message (the
object's apiVersion and kind, and the object's own message in ``raw``). A message
is decoded by the wire schema of the built-in types (``schema.py``, generated from
k8s.io/api; see ``generate.py``). Decoding follows what Go does (decode into the
type, then encode JSON):

- a plain (non-pointer) Go field is always on the wire, so its zero value
  (``""``, ``0``, ``false``) means unset and is left out, as ``omitempty``;
- a pointer field is on the wire only when set, so its zero value is kept
  (``replicas: 0``);
- unknown fields are skipped, as upstream's generated decoders do;
- Time, MicroTime, Duration, Quantity, IntOrString, RawExtension and FieldsV1
  have their own JSON forms.

Custom resources have no protobuf form (upstream answers 415, and so does
this server), nor do the types of groups not in the schema (apiextensions).
"""

from __future__ import annotations

import base64
import datetime
import struct
from typing import Any

import orjson

__all__ = ["CONTENT_TYPE", "MAGIC", "ProtobufError", "as_json", "decode"]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_MAX_DEPTH = 64  # messages nested in messages; RawExtensions can nest envelopes
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class ProtobufError(ValueError):
    """The body is not a protobuf object this server can decode."""


class UnknownKind(ProtobufError):
    """The envelope names a kind with no protobuf form here."""

    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"no protobuf form is known for {api_version or '(no apiVersion)'}, "
                         f"Kind={kind or '(no kind)'}")
        self.api_version, self.kind = api_version, kind


def as_json(body: bytes, default: tuple[str, str] | None = None) -> bytes:
    return orjson.dumps(decode(body, default=default))


def decode(body: bytes, depth: int = 0, default: tuple[str, str] | None = None) -> dict[str, Any]:
    """The object a protobuf envelope holds, with its apiVersion and kind; ``default``: the
    (apiVersion, kind) of an envelope that leaves them empty, as upstream's decoder takes the
    endpoint's (``copyKindDefaults``)."""
    from .schema import MESSAGES, PACKAGES

    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the protobuf prefix 'k8s\\x00'")
    if len(body) == len(MAGIC):
        raise ProtobufError("empty body")
    api_version, kind, raw = _envelope(_Reader(body, len(MAGIC), len(body), depth))
    if default is not None:
        kind = kind or default[1]
        api_version = api_version or default[0]
    package = PACKAGES.get(api_version)
    message = f"{package}.{kind}" if package else ""
    if message not in MESSAGES:
        message = f"{_META}.{kind}"  # the options kinds (DeleteOptions) are registered in every group version
        if message not in MESSAGES or kind.endswith("List") or not kind.endswith("Options"):
            raise UnknownKind(api_version, kind)
    obj = _Reader(raw, 0, len(raw), depth).message(message)
    if not isinstance(obj, dict):  # a wrapper (ExtraValue's list, a Quantity's string): no kind of the scheme's
        raise UnknownKind(api_version, kind)
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj


def _envelope(reader: _Reader) -> tuple[str, str, bytes]:
    """``runtime.Unknown``: typeMeta (1: apiVersion 1, kind 2), raw (2), contentEncoding (3)."""
    api_version, kind, raw = "", "", b""
    while reader.pos < reader.end:
        tag = reader.varint()
        number, wire = tag >> 3, tag & 7
        if number == 1 and wire == 2:
            type_meta = reader._sub(reader.chunk())
            while type_meta.pos < type_meta.end:
                inner = type_meta.varint()
                if inner >> 3 in (1, 2) and inner & 7 == 2:
                    text = type_meta.scalar("s", 2)
                    api_version, kind = (text, kind) if inner >> 3 == 1 else (api_version, text)
                else:
                    type_meta.skip(inner & 7)
        elif number == 2 and wire == 2:
            start, end = reader.chunk()
            raw = reader.buf[start:end]
        elif number == 3 and wire == 2:
            encoding = reader.scalar("s", 2)
            if encoding:
                raise ProtobufError(f"content encoding {encoding!r} is not supported")
        else:
            reader.skip(wire)
    return api_version, kind, raw


def _go_duration(nanoseconds: int) -> str:
    """As Go's ``time.Duration.String``: ``1h2m3.5s``, ``1.5ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign, n = ("-", -nanoseconds) if nanoseconds < 0 else ("", nanoseconds)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size or unit == "ns":
                return sign + _decimal(n, size) + unit
    hours, rest = divmod(n, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _decimal(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _decimal(n: int, unit: int) -> str:
    whole, fraction = divmod(n, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")


def _timestamp(fields: dict[int, int], micro: bool) -> str | None:
    seconds, nanos = fields.get(1, 0), fields.get(2, 0)
    if seconds == 0 and nanos == 0:
        return None  # Go's zero Time: JSON null, left out
    try:
        moment = _EPOCH + datetime.timedelta(seconds=seconds)
    except OverflowError as e:
        raise ProtobufError(f"timestamp out of range: {seconds}") from e
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{nanos // 1000:06d}Z" if micro else f"{text}Z"


class _Reader:
    """Decodes the messages of one buffer by the schema."""

    __slots__ = ("buf", "depth", "end", "pos")

    def __init__(self, buf: bytes, start: int, end: int, depth: int) -> None:
        self.buf, self.pos, self.end, self.depth = buf, start, end, depth

    # -- the wire ---------------------------------------------------------------
    def varint(self) -> int:
        buf, pos, result, shift = self.buf, self.pos, 0, 0
        while True:
            if pos >= self.end or shift > 63:
                raise ProtobufError("truncated or overlong varint")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return result
            shift += 7

    def signed(self) -> int:
        value = self.varint() & 0xFFFFFFFFFFFFFFFF
        return value - (1 << 64) if value >= 1 << 63 else value

    def chunk(self) -> tuple[int, int]:
        """The bounds of a length-delimited value."""
        length = self.varint()
        start = self.pos
        if length > self.end - start:
            raise ProtobufError("a length-delimited field runs past the end of its message")
        self.pos = start + length
        return start, start + length

    def skip(self, wire: int) -> None:
        if wire == 0:
            self.varint()
        elif wire == 1:
            self.fixed(8)
        elif wire == 2:
            self.chunk()
        elif wire == 5:
            self.fixed(4)
        else:
            raise ProtobufError(f"wire type {wire} is not supported")

    def fixed(self, size: int) -> bytes:
        if self.pos + size > self.end:
            raise ProtobufError("truncated fixed-size field")
        value = self.buf[self.pos:self.pos + size]
        self.pos += size
        return value

    def _sub(self, bounds: tuple[int, int]) -> _Reader:
        if self.depth >= _MAX_DEPTH:
            raise ProtobufError("messages nested too deeply")
        return _Reader(self.buf, bounds[0], bounds[1], self.depth + 1)

    def _numbers(self) -> dict[int, int]:
        """A message of varint fields only (Time, Duration), by field number."""
        fields: dict[int, int] = {}
        while self.pos < self.end:
            key = self.varint()
            if key & 7 == 0:
                fields[key >> 3] = self.signed()
            else:
                self.skip(key & 7)
        return fields

    # -- values -----------------------------------------------------------------
    def scalar(self, kind: str, wire: int) -> Any:
        if kind == "s" or kind == "y":
            if wire != 2:
                raise ProtobufError(f"a {'string' if kind == 's' else 'bytes'} field with wire type {wire}")
            start, end = self.chunk()
            if kind == "y":
                return base64.b64encode(self.buf[start:end]).decode()
            try:
                return self.buf[start:end].decode()
            except UnicodeDecodeError as e:
                raise ProtobufError(f"a string field is not UTF-8: {e}") from e
        if kind == "i" or kind == "b":
            if wire != 0:
                raise ProtobufError(f"an integer field with wire type {wire}")
            value = self.signed()
            return bool(value) if kind == "b" else value
        if kind == "d":
            if wire == 1:
                return struct.unpack("<d", self.fixed(8))[0]
            if wire == 5:
                return struct.unpack("<f", self.fixed(4))[0]
            raise ProtobufError(f"a floating-point field with wire type {wire}")
        raise ProtobufError(f"unknown scalar kind {kind!r}")  # pragma: no cover (the schema is generated)

    def value(self, kind: Any, wire: int) -> Any:
        if isinstance(kind, tuple):
            return self.entry(kind, wire)
        if len(kind) == 1:
            return self.scalar(kind, wire)
        if wire != 2:
            raise ProtobufError(f"a {kind.rsplit('.', 1)[1]} field with wire type {wire}")
        return self._sub(self.chunk()).message(kind)

    def entry(self, kind: tuple[str, Any, Any], wire: int) -> tuple[Any, Any]:
        """One map entry: a message with the key as field 1 and the value as field 2."""
        if wire != 2:
            raise ProtobufError(f"a map entry with wire type {wire}")
        sub = self._sub(self.chunk())
        _, key_kind, value_kind = kind
        key: Any = _ZERO.get(key_kind, "")
        value: Any = _ZERO.get(value_kind) if isinstance(value_kind, str) and len(value_kind) == 1 else None
        while sub.pos < sub.end:
            tag = sub.varint()
            if tag >> 3 == 1:
                key = sub.value(key_kind, tag & 7)
            elif tag >> 3 == 2:
                value = sub.value(value_kind, tag & 7)
            else:
                sub.skip(tag & 7)
        if value is None and not (isinstance(value_kind, str) and len(value_kind) == 1):
            value = _empty(value_kind)
        return key, value

    def message(self, name: str) -> Any:
        special = _SPECIAL.get(name)
        if special is not None:
            return special(self)
        from .schema import LIST_ALIASES, MESSAGES

        fields = _index(name, MESSAGES)
        if name in LIST_ALIASES:
            items: list[Any] = []
            while self.pos < self.end:
                tag = self.varint()
                if tag >> 3 == 1:
                    items.append(self.value(fields[1][1], tag & 7))
                else:
                    self.skip(tag & 7)
            return items
        out: dict[str, Any] = {}
        while self.pos < self.end:
            tag = self.varint()
            field = fields.get(tag >> 3)
            if field is None:
                self.skip(tag & 7)
                continue
            json_name, kind, repeated, pointer = field
            wire = tag & 7
            if json_name == "-":  # not in the JSON form (``json:"-"``)
                self.skip(wire)
                continue
            if isinstance(kind, tuple):
                key, value = self.entry(kind, wire)
                out.setdefault(json_name, {})[key] = value
            elif repeated:
                target = out.setdefault(json_name, [])
                if wire == 2 and kind in ("i", "b"):  # packed
                    sub = self._sub(self.chunk())
                    while sub.pos < sub.end:
                        target.append(sub.scalar(kind, 0))
                else:
                    target.append(self.value(kind, wire))
            else:
                value = self.value(kind, wire)
                if not json_name:  # embedded inline
                    out.update(value)
                elif value is None or (not pointer and len(kind) == 1 and not value):
                    out.pop(json_name, None)  # a zero plain field: unset, as omitempty
                else:
                    out[json_name] = value
        return out


_ZERO: dict[str, Any] = {"s": "", "y": "", "i": 0, "b": False, "d": 0.0}


def _empty(kind: str) -> Any:
    """A map's message value absent from its entry: the type's zero value."""
    reader = _Reader(b"", 0, 0, 0)
    return reader.message(kind)


_INDEXES: dict[str, dict[int, tuple[str, Any, bool, bool]]] = {}


def _index(name: str, messages: dict[str, tuple[tuple[Any, ...], ...]]) -> dict[int, tuple[str, Any, bool, bool]]:
    index = _INDEXES.get(name)
    if index is None:
        fields = messages.get(name)
        if fields is None:  # pragma: no cover (the schema names only messages it holds)
            raise ProtobufError(f"no schema for message {name}")
        index = _INDEXES[name] = {f[0]: (f[1], f[2], f[3], f[4]) for f in fields}
    return index


def _time(reader: _Reader) -> str | None:
    return _timestamp(reader._numbers(), micro=False)


def _micro_time(reader: _Reader) -> str | None:
    return _timestamp(reader._numbers(), micro=True)


def _duration(reader: _Reader) -> str:
    return _go_duration(reader._numbers().get(1, 0))


def _quantity(reader: _Reader) -> str:
    value = "0"
    while reader.pos < reader.end:
        tag = reader.varint()
        if tag >> 3 == 1:
            value = reader.scalar("s", tag & 7)
        else:
            reader.skip(tag & 7)
    return value


def _int_or_string(reader: _Reader) -> int | str:
    kind, number, text = 0, 0, ""
    while reader.pos < reader.end:
        tag = reader.varint()
        if tag >> 3 == 1:
            kind = reader.scalar("i", tag & 7)
        elif tag >> 3 == 2:
            number = reader.scalar("i", tag & 7)
        elif tag >> 3 == 3:
            text = reader.scalar("s", tag & 7)
        else:
            reader.skip(tag & 7)
    return text if kind == 1 else number


def _raw_json(reader: _Reader) -> Any:
    """RawExtension and FieldsV1: JSON bytes in field 1, or a nested protobuf object."""
    raw = b""
    while reader.pos < reader.end:
        tag = reader.varint()
        if tag >> 3 == 1 and tag & 7 == 2:
            start, end = reader.chunk()
            raw = reader.buf[start:end]
        else:
            reader.skip(tag & 7)
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode(raw, reader.depth + 1)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ProtobufError(f"an embedded object is neither JSON nor protobuf: {e}") from e


_SPECIAL = {
    f"{_META}.Time": _time,
    f"{_META}.MicroTime": _micro_time,
    f"{_META}.Duration": _duration,
    f"{_META}.FieldsV1": _raw_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _raw_json,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _quantity,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
}
