"""The schemas of the built-in types, from a maintained source.

Kubernetes publishes its types as OpenAPI; the ``kubernetes-validate`` package
ships them for each release as JSON Schema definitions (``$defs``), with the
Kubernetes extensions kept: ``x-kubernetes-group-version-kind``,
``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``,
``x-kubernetes-patch-strategy``, ``x-kubernetes-patch-merge-key``,
``x-kubernetes-map-type``. This module loads them once and answers the
questions the API server asks: which definition is the schema of a kind, what
a ``$ref`` points to, how a list or map merges.

JSON Schema spells a nullable type ``["string", "null"]``; ``type_of`` gives
the non-null one. ``Quantity`` and ``IntOrString`` are ``oneOf`` a string and
a number.

The package's definitions come from the release's committed OpenAPI snapshot,
which upstream generates with the ``OpenAPIEnums`` feature gate off
(``hack/update-openapi-spec.sh``), so they lack what a running kube-apiserver
publishes for its ``+enum`` string types: an ``enum`` list and a description
ending in ``Possible enum values:`` with a line per value. ``enums.json`` holds
those (definition -> property -> ``enum``, ``items`` or ``additionalProperties``
for an enum nested in a list or map, and ``description``, the text upstream
appends), and they are added on load. They are documentation for the OpenAPI
documents and ``kubectl explain``: nothing validates built-in objects by them,
as upstream does not (its hand-written validation decides, ``podvalidation``).
"""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "ENUM_VALUES_HEADER",
    "KUBERNETES_VERSION",
    "Definitions",
    "definitions",
    "description_without_enum",
    "patch_merge_key",
    "patch_strategy",
    "type_of",
]

KUBERNETES_VERSION = "1.37.0"
_REF = "#/$defs/"
# kube-openapi's header of the enum part of a description (pkg/generators/enum.go)
ENUM_VALUES_HEADER = "Possible enum values:"

Schema = dict[str, Any]


class Definitions:
    """All definitions of one Kubernetes release, by name (``io.k8s.api.core.v1.Pod``)."""

    def __init__(self, defs: dict[str, Schema]) -> None:
        self.defs = defs
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in defs.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", ()):
                # A kind listed under several names (e.g. DeleteOptions in every
                # group) keeps the first; kinds that are served have one.
                self._by_gvk.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)

    def name_of(self, group: str, version: str, kind: str) -> str | None:
        """The definition name of a served kind, or None if the release has no such kind."""
        return self._by_gvk.get((group, version, kind))

    def for_kind(self, group: str, version: str, kind: str) -> Schema | None:
        name = self.name_of(group, version, kind)
        return self.defs[name] if name else None

    def resolve(self, node: Schema) -> Schema:
        """Follow ``$ref`` (repeatedly) to the schema it names; other nodes are returned as they are."""
        while "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith(_REF):
                raise ValueError(f"unsupported $ref {ref!r}")
            node = self.defs[ref[len(_REF):]]
        return node

    def property(self, node: Schema, name: str) -> Schema | None:
        """The (resolved) schema of property ``name`` of an object schema, or None if it has none.

        For a map (``additionalProperties``), every key has the value schema.
        """
        node = self.resolve(node)
        props = node.get("properties")
        if props is not None and name in props:
            return self.resolve(props[name])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return self.resolve(extra)
        return None

    def items(self, node: Schema) -> Schema | None:
        """The (resolved) schema of the items of an array schema."""
        node = self.resolve(node)
        item = node.get("items")
        return self.resolve(item) if isinstance(item, dict) else None


def type_of(node: Schema) -> str | None:
    """The non-null JSON type of a schema node ("object", "array", "string", ...), or None if untyped."""
    t = node.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if rest else None
    return t if isinstance(t, str) else None


def patch_strategy(node: Schema) -> tuple[str, ...]:
    """The strategic-merge-patch strategies of a field (``merge``, ``retainKeys``), possibly none."""
    raw = node.get("x-kubernetes-patch-strategy")
    return tuple(s for s in raw.split(",") if s) if isinstance(raw, str) else ()


def patch_merge_key(node: Schema) -> str | None:
    key = node.get("x-kubernetes-patch-merge-key")
    return key if isinstance(key, str) else None


def description_without_enum(node: Schema) -> str:
    """A field's description without the enum part the definitions' load added: the Go
    comment alone, as the types' ``SwaggerDoc()`` gives it (table column descriptions)."""
    text = node.get("description", "")
    if not isinstance(text, str):
        return ""
    at = text.find("\n\n" + ENUM_VALUES_HEADER)
    return text[:at].rstrip("\n") if at >= 0 else text


@functools.cache
def definitions() -> Definitions:
    """The definitions of ``KUBERNETES_VERSION``, loaded on first use (about 1.7 MB of JSON)."""
    raw = (_schemas_dir() / f"v{KUBERNETES_VERSION}-local" / "_definitions.json").read_bytes()
    defs = orjson.loads(raw)["$defs"]
    _add_enums(defs)
    _accept_earlier_podgroup_reference(defs)
    _add_resource_metrics(defs)
    _add_lease_renewal(defs)
    _add_node_status_report(defs)
    return Definitions(defs)


def _schemas_dir() -> Path:
    """kubernetes-validate's schema files, found without importing the package: its
    ``__init__`` imports jsonschema (with attrs, referencing and rpds), about 0.15 s of
    every process's start for a validator this project does not use."""
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("kubernetes_validate (its JSON schemas) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


def _add_enums(defs: dict[str, Schema]) -> None:
    """The ``enum`` lists and enum description parts of ``enums.json`` (see the module doc).

    ``enums.json`` was taken from the ``/openapi/v2`` of a 1.36 kube-apiserver run with
    ``OpenAPIEnums`` on (kubernetes-sigs/reference-docs, ``gen-resourcesdocs/api/v1.36/swagger.json``),
    the release nearest ``KUBERNETES_VERSION`` published so, keeping only the properties these
    definitions have. A field whose enum came after 1.36 has none here."""
    table = orjson.loads(importlib.resources.files("controlplane.registry").joinpath("enums.json").read_bytes())
    for name, props in table.items():
        target = defs.get(name, {}).get("properties", {})
        for prop, entry in props.items():
            node = target.get(prop)
            if node is None:
                continue
            if "enum" in entry:
                node["enum"] = entry["enum"]
            for nested in ("items", "additionalProperties"):
                if nested in entry and isinstance(node.get(nested), dict):
                    node[nested]["enum"] = entry[nested]
            if "description" in entry:
                node["description"] = node.get("description", "") + entry["description"]


def _accept_earlier_podgroup_reference(defs: dict[str, Schema]) -> None:
    """A PodGroup may name its Workload template as the pre-1.37 drafts did,
    ``spec.podGroupTemplateRef.workload: {workloadName, podGroupTemplateName}``, beside
    1.37's ``spec.workloadRef: {workloadName, templateName}``: this project's own issue
    and the manifests written from it use that shape, and strict field validation
    would refuse them. The scheduler reads ``workloadRef`` first."""
    spec = defs.get("io.k8s.api.scheduling.v1beta1.PodGroupSpec")
    if spec is None or "podGroupTemplateRef" in spec.get("properties", {}):
        return
    spec["properties"]["podGroupTemplateRef"] = {
        "description": "podGroupTemplateRef names the Workload template this group was made from (the shape of "
                       "the drafts before 1.37; prefer workloadRef).",
        "type": ["object", "null"],
        "properties": {"workload": {
            "type": ["object", "null"],
            "properties": {"workloadName": {"type": "string"}, "podGroupTemplateName": {"type": "string"}},
            "required": ["workloadName", "podGroupTemplateName"]}}}


_METRICS = "io.k8s.metrics.pkg.apis.metrics.v1beta1."


def _add_resource_metrics(defs: dict[str, Schema]) -> None:
    """metrics.k8s.io/v1beta1 (served by metrics-server in a real cluster, so not in the
    release's definitions): NodeMetrics, PodMetrics and their lists, for the OpenAPI documents
    and ``kubectl explain``. Written from k8s.io/metrics' types."""
    meta = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    list_meta = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}
    time = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.Time"}
    duration = {"type": "string", "description": "the span the usage was measured over"}
    usage = {"type": "object", "description": "the memory and CPU usage, by resource name",
             "additionalProperties": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.api.resource.Quantity"}}

    def kind(name: str, description: str, props: dict[str, Any], required: list[str]) -> None:
        defs[_METRICS + name] = {
            "description": description, "type": "object", "required": required,
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, **props},
            "x-kubernetes-group-version-kind": [{"group": "metrics.k8s.io", "version": "v1beta1", "kind": name}]}

    defs[_METRICS + "ContainerMetrics"] = {
        "description": "the resource usage of one container", "type": "object", "required": ["name", "usage"],
        "properties": {"name": {"type": "string", "description": "the container's name"}, "usage": usage}}
    kind("NodeMetrics", "the resource usage of a node", {"metadata": meta, "timestamp": time, "window": duration,
                                                          "usage": usage}, ["timestamp", "window", "usage"])
    kind("PodMetrics", "the resource usage of a pod, by container",
         {"metadata": meta, "timestamp": time, "window": duration,
          "containers": {"type": "array", "items": {"$ref": "#/$defs/" + _METRICS + "ContainerMetrics"}}},
         ["timestamp", "window", "containers"])
    for name in ("NodeMetrics", "PodMetrics"):
        kind(name + "List", f"a list of {name}",
             {"metadata": list_meta, "items": {"type": "array", "items": {"$ref": "#/$defs/" + _METRICS + name}}},
             ["items"])


def _add_node_status_report(defs: dict[str, Schema]) -> None:
    """nodes.controlplane.dev/v1alpha1 NodeStatusReport, this emulator's own (``api/nodereports.py``),
    for the OpenAPI documents and ``kubectl explain``."""
    time_ = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.Time"
    defs["dev.controlplane.nodes.v1alpha1.NodeStatusReport"] = {
        "description": "Reports the status conditions of many Nodes at once, each Node written as its kubelet's "
                       "status update would write it. Answered, never stored.",
        "type": "object", "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
            "spec": {"type": "object", "required": ["nodes", "conditions"], "properties": {
                "nodes": {"type": "array", "items": {"type": "string"},
                          "description": "the names of the Nodes to report, at most 10,000"},
                "conditions": {"type": "array", "description": "the conditions each Node's kubelet reports",
                               "items": {"type": "object", "required": ["type", "status"], "properties": {
                                   "type": {"type": "string"}, "status": {"type": "string"},
                                   "reason": {"type": "string"}, "message": {"type": "string"}}}},
                "heartbeatTime": {"$ref": time_, "description": "each reported condition's lastHeartbeatTime; "
                                                                "the server's clock when unset"}}},
            "status": {"type": "object", "properties": {
                "reported": {"type": "integer", "description": "the Nodes written (or already so)"},
                "notFound": {"type": "array", "items": {"type": "string"}, "description": "the Nodes missing"},
                "conflicts": {"type": "array", "items": {"type": "string"},
                              "description": "the Nodes other writers kept changing: not written"}}}},
        "x-kubernetes-group-version-kind": [{"group": "nodes.controlplane.dev", "version": "v1alpha1",
                                             "kind": "NodeStatusReport"}]}


def _add_lease_renewal(defs: dict[str, Schema]) -> None:
    """nodes.controlplane.dev/v1alpha1 LeaseRenewal, this emulator's own (``api/leaserenewals.py``),
    for the OpenAPI documents and ``kubectl explain``."""
    defs["dev.controlplane.nodes.v1alpha1.LeaseRenewal"] = {
        "description": "Renews many Leases of a namespace at once, each written as its holder's update would write "
                       "it. Answered, never stored.",
        "type": "object", "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
            "spec": {"type": "object", "required": ["leases"], "properties": {
                "leases": {"type": "array", "items": {"type": "string"},
                           "description": "the names of the Leases to renew, at most 10,000"},
                "renewTime": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
                              "description": "the time each Lease's spec.renewTime is set to; the server's clock "
                                             "when unset"}}},
            "status": {"type": "object", "properties": {
                "renewed": {"type": "integer", "description": "the Leases renewed (or already at renewTime)"},
                "notFound": {"type": "array", "items": {"type": "string"}, "description": "the Leases missing"},
                "conflicts": {"type": "array", "items": {"type": "string"},
                              "description": "the Leases other writers kept changing: not renewed"}}}},
        "x-kubernetes-group-version-kind": [{"group": "nodes.controlplane.dev", "version": "v1alpha1",
                                             "kind": "LeaseRenewal"}]}

