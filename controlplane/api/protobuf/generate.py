"""Regenerates ``schema.py``: the wire schema of the built-in types, from checkouts of
k8s.io/api and k8s.io/apimachinery (not vendored; the generator only reads them)::

    python -m controlplane.api.protobuf.generate API_DIR APIMACHINERY_DIR > controlplane/api/protobuf/schema.py

Two sources, because neither says everything:

- each package's ``generated.proto`` gives, per message, the field numbers, the
  wire types and which fields are repeated or maps;
- each package's Go types give the JSON name of a field (its ``json`` tag) and
  whether the Go field is a pointer. A pointer field is on the wire only when
  set, so a zero value there is meaningful (``replicas: 0``); a plain field is
  always on the wire, and its zero value means "not set", as Go's ``omitempty``.

Only the packages the server serves (``PACKAGES``) are kept. The output is data:
field numbers and names, the protocol itself, nothing of upstream's prose.
"""

from __future__ import annotations

import pathlib
import pprint
import re
import sys

# directory under k8s.io/api -> its API group/version ("" for the core group)
PACKAGES = {
    "core/v1": "v1",
    "admissionregistration/v1": "admissionregistration.k8s.io/v1",
    "apps/v1": "apps/v1",
    "authentication/v1": "authentication.k8s.io/v1",
    "authorization/v1": "authorization.k8s.io/v1",
    "autoscaling/v1": "autoscaling/v1",
    "autoscaling/v2": "autoscaling/v2",
    "batch/v1": "batch/v1",
    "certificates/v1": "certificates.k8s.io/v1",
    "coordination/v1": "coordination.k8s.io/v1",
    "discovery/v1": "discovery.k8s.io/v1",
    "events/v1": "events.k8s.io/v1",
    "flowcontrol/v1": "flowcontrol.apiserver.k8s.io/v1",
    "networking/v1": "networking.k8s.io/v1",
    "node/v1": "node.k8s.io/v1",
    "policy/v1": "policy/v1",
    "rbac/v1": "rbac.authorization.k8s.io/v1",
    "resource/v1": "resource.k8s.io/v1",
    "scheduling/v1": "scheduling.k8s.io/v1",
    "scheduling/v1beta1": "scheduling.k8s.io/v1beta1",
    "storage/v1": "storage.k8s.io/v1",
    "storagemigration/v1": "storagemigration.k8s.io/v1",
}
# directory under k8s.io/apimachinery
MACHINERY = ["pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource"]

SCALARS = {"string": "s", "int32": "i", "int64": "i", "bool": "b", "bytes": "y", "double": "d", "float": "d"}
_MESSAGE = re.compile(r"^message (\w+) \{$")
_FIELD = re.compile(r"^\s+(optional|repeated) ([\w.]+) (\w+) = (\d+);")
_MAP = re.compile(r"^\s+map<([\w.]+), ([\w.]+)> (\w+) = (\d+);")
_STRUCT = re.compile(r"^type (\w+) struct \{")
_GO_FIELD = re.compile(r'^\s+(?:(\w+)\s+)?(\S+)\s+`(?=[^`]*protobuf:"[^"]*name=(\w+))(?:[^`]*json:"([^"]*)")?')


def _type(name: str, package: str) -> str:
    if name in SCALARS:
        return SCALARS[name]
    return name[1:] if name.startswith(".") else f"{package}.{name}"


def parse_proto(text: str) -> tuple[str, dict[str, list[tuple[int, str, object, bool]]]]:
    """The package and, per message, ``(number, proto name, type, repeated)``; a map's
    type is ``("map", key type, value type)``."""
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)  # type: ignore[union-attr]
    messages: dict[str, list[tuple[int, str, object, bool]]] = {}
    current: list[tuple[int, str, object, bool]] | None = None
    for line in text.splitlines():
        if (m := _MESSAGE.match(line)) is not None:
            current = messages.setdefault(f"{package}.{m.group(1)}", [])
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := _FIELD.match(line)) is not None:
            current.append((int(m.group(4)), m.group(3), _type(m.group(2), package), m.group(1) == "repeated"))
        elif current is not None and (m := _MAP.match(line)) is not None:
            kind = ("map", _type(m.group(1), package), _type(m.group(2), package))
            current.append((int(m.group(4)), m.group(3), kind, False))
    return package, messages


def parse_go(text: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """Per Go struct, per protobuf field name: (JSON name, is a pointer)."""
    structs: dict[str, dict[str, tuple[str, bool]]] = {}
    current: dict[str, tuple[str, bool]] | None = None
    for line in text.splitlines():
        if (m := _STRUCT.match(line)) is not None:
            current = structs.setdefault(m.group(1), {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := _GO_FIELD.match(line)) is not None:
            go_type, proto_name, json_tag = m.group(2), m.group(3), m.group(4)
            options = (json_tag or "").split(",")
            embedded = m.group(1) is None and not options[0]  # an anonymous struct with no JSON name
            json_name = "" if embedded or "inline" in options[1:] else options[0] or proto_name  # "": inline
            current[proto_name] = (json_name, go_type.startswith("*"))
    return structs


def _embedded(proto_name: str, kind: object) -> tuple[str, bool]:
    """A proto field with no Go field of its name: a struct embedded inline
    (``EphemeralContainerCommon `json:",inline"```), or a field of a type Go
    does not declare as a struct (Time's seconds): kept under its proto name."""
    if isinstance(kind, str) and kind.rsplit(".", 1)[-1] == proto_name[:1].upper() + proto_name[1:]:
        return "", False
    return proto_name, False


def generate(api: pathlib.Path, machinery: pathlib.Path) -> str:
    dirs = [(api / d, PACKAGES[d]) for d in PACKAGES] + [(machinery / d, "") for d in MACHINERY]
    messages: dict[str, tuple[tuple[int, str, object, bool, bool], ...]] = {}
    packages: dict[str, str] = {}
    aliases: list[str] = []
    for directory, group_version in dirs:
        package, protos = parse_proto((directory / "generated.proto").read_text())
        if group_version:
            packages[group_version] = package
        go: dict[str, dict[str, tuple[str, bool]]] = {}
        for source in sorted(directory.glob("*.go")):
            if not source.name.startswith(("zz_", "generated")) and not source.name.endswith("_test.go"):
                for struct_name, go_fields in parse_go(source.read_text()).items():
                    go.setdefault(struct_name, {}).update(go_fields)
        for message, proto_fields in protos.items():
            struct_name = message.rsplit(".", 1)[1]
            shape = [(number, proto_name, repeated) for number, proto_name, _, repeated in proto_fields]
            if struct_name not in go and shape == [(1, "items", True)]:
                aliases.append(message)  # a Go slice type (``type ExtraValue []string``): a JSON list
            names = go.get(struct_name, {})
            rows = []
            for number, proto_name, kind, repeated in proto_fields:
                json_name, pointer = names.get(proto_name) or _embedded(proto_name, kind)
                rows.append((number, json_name, kind, repeated, pointer))
            messages[message] = tuple(rows)
    out = [
        '"""The wire schema of the built-in types: generated by ``generate.py``, do not edit.',
        "",
        "PACKAGES: API group/version -> protobuf package. MESSAGES: message -> fields, each",
        "``(number, JSON name, type, repeated, pointer)``; a type is a scalar code (s string,",
        "i integer, b bool, y bytes, d double), a message name, or (\"map\", key, value); an empty",
        "JSON name is a struct embedded inline. LIST_ALIASES: messages that are a JSON list.\"\"\"",
        "",
        "from typing import Any",
        "",
        f"PACKAGES: dict[str, str] = {pprint.pformat(packages, width=110)}",
        "",
        f"LIST_ALIASES: frozenset[str] = frozenset({pprint.pformat(sorted(aliases), width=110)})",
        "",
        "MESSAGES: dict[str, tuple[tuple[Any, ...], ...]] = {",
        *(f"    {name!r}: {fields!r}," for name, fields in sorted(messages.items())),
        "}",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(generate(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
