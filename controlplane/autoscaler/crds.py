"""The karpenter.sh/v1 CustomResourceDefinitions: NodePool and NodeClaim.

The autoscaler installs them through the API when it starts (``install``), as
an operator installs its CRDs, so it stays an API client and the resources are
served, validated, defaulted and listed by kubectl like any custom resource.
The schemas are structural and follow Karpenter's v1 types (fields, enums,
defaults: ``consolidationPolicy: WhenEmptyOrUnderutilized``, ``consolidateAfter:
0s``, ``budgets: [{nodes: 10%}]``, ``expireAfter: 720h``) and their CEL rules for
requirements, labels, budgets and the node class reference, with Karpenter's
messages (``label "kubernetes.io/hostname" is restricted``), and its list and map
types (a budget's ``reasons`` is a set: a duplicate is refused; conditions are a map
keyed by ``type``).
"""

from __future__ import annotations

import logging
from typing import Any

from ..client import ApiError, Client
from ..client.crds import CRD_PATH, wait_established

__all__ = ["GROUP", "NODECLAIMS", "NODEPOOLS", "VERSION", "install", "nodeclaim_crd", "nodepool_crd"]

log = logging.getLogger(__name__)

GROUP = "karpenter.sh"
VERSION = "v1"
NODEPOOLS = "nodepools"
NODECLAIMS = "nodeclaims"

Obj = dict[str, Any]

_STRING: Obj = {"type": "string"}
_DURATION: Obj = {"type": "string", "pattern": r"^(([0-9]+(s|m|h))+|Never)$"}
_QUANTITY: Obj = {"x-kubernetes-int-or-string": True,
                  "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
                             r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"}
_RESOURCE_LIST: Obj = {"type": "object", "additionalProperties": _QUANTITY}
# Karpenter's patterns: a qualified name (a label key; also what its CRDs ask of a taint's value) and a label value
_QUALIFIED_NAME = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
                   r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE: Obj = {"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}
_TAINTS: Obj = {"type": "array", "x-kubernetes-list-type": "atomic", "items": {
    "type": "object", "required": ["key", "effect"],
    "properties": {"key": {"type": "string", "minLength": 1, "pattern": _QUALIFIED_NAME},
                   "value": {"type": "string", "pattern": _QUALIFIED_NAME},
                   "timeAdded": {"type": "string", "format": "date-time"},
                   "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}}}}
# Karpenter's well-known labels: its own domain is reserved but for these two (a domain, the key's
# part before its first '/', ending in karpenter.sh)
_KARPENTER_DOMAIN = "[\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"]"


def _restricted_keys(nodepool: bool) -> list[Obj]:
    """The rules on a requirement's key (``self``), as Karpenter's NodePool (``nodepool``) and NodeClaim CRDs."""
    rules = [{"rule": f'self in {_KARPENTER_DOMAIN} || !self.find("^([^/]+)").endsWith("karpenter.sh")',
              "message": 'label domain "karpenter.sh" is restricted'}]
    if nodepool:
        rules.append({"rule": 'self != "karpenter.sh/nodepool"',
                      "message": 'label "karpenter.sh/nodepool" is restricted'})
    rules.append({"rule": 'self != "kubernetes.io/hostname"',
                  "message": 'label "kubernetes.io/hostname" is restricted'})
    return rules


def _requirements(nodepool: bool) -> Obj:
    return {"type": "array", "maxItems": 100, "x-kubernetes-list-type": "atomic", "items": {
        "type": "object", "required": ["key", "operator"],
        "properties": {
            "key": {"type": "string", "maxLength": 316, "pattern": _QUALIFIED_NAME,
                    "x-kubernetes-validations": _restricted_keys(nodepool)},
            "operator": {"type": "string",
                         "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]},
            # Karpenter's CRD puts a label value's pattern and maxLength on this array, where they check
            # nothing: a bad value is its runtime validation's (ValidationSucceeded=False), see validation.py
            "values": {"type": "array", "items": _STRING, "x-kubernetes-list-type": "atomic"},
            "minValues": {"type": "integer", "minimum": 1, "maximum": 50}}},
        "x-kubernetes-validations": [
            {"rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
             "message": "requirements with operator 'In' must have a value defined"},
            {"rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
                     "x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
             "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
            {"rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
             "message": "requirements with 'minValues' must have at least that many values specified in the "
                        "'values' field"}]}


def _not_empty(what: str) -> Obj:
    return {"type": "string",
            "x-kubernetes-validations": [{"rule": "self != ''", "message": f"{what} may not be empty"}]}


_NODE_CLASS_REF: Obj = {"type": "object", "required": ["group", "kind", "name"],
                        "properties": {"group": {**_not_empty("group"), "pattern": r"^[^/]*$"},
                                       "kind": _not_empty("kind"),
                                       "name": _not_empty("name")}}
_CONDITION_TYPE: Obj = {"type": "string", "maxLength": 316,
                        "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"}


def _conditions(required: list[str], reason: Obj) -> Obj:
    """Karpenter's status conditions (operatorpkg's): a list-map keyed by ``type``."""
    return {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"], "items": {
        "type": "object", "required": required,
        "properties": {"type": _CONDITION_TYPE, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                       "reason": {"type": "string", "maxLength": 1024, **reason},
                       "message": {"type": "string", "maxLength": 32768},
                       "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                       "lastTransitionTime": {"type": "string", "format": "date-time"}}}}
_CLAIM_SPEC_COMMON: Obj = {
    "taints": _TAINTS,
    "startupTaints": _TAINTS,
    "requirements": _requirements(nodepool=False),
    "nodeClassRef": _NODE_CLASS_REF,
    "expireAfter": {**_DURATION, "default": "720h"},
    "terminationGracePeriod": {"type": "string", "pattern": r"^([0-9]+(s|m|h))+$"},
}


def _crd(kind: str, plural: str, spec: Obj, status: Obj, columns: list[Obj], scale: Obj | None = None) -> Obj:
    subresources: Obj = {"status": {}}
    if scale is not None:
        subresources["scale"] = scale
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "categories": ["karpenter"]},
            "scope": "Cluster",
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "properties": {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"},
                                   "spec": spec, "status": status}}},
                "subresources": subresources,
                "additionalPrinterColumns": columns,
            }],
        },
    }


def nodepool_crd() -> Obj:
    budget = {"type": "object", "required": ["nodes"], "properties": {
        "nodes": {"type": "string", "pattern": r"^((100|[0-9]{1,2})%|[0-9]+)$", "default": "10%"},
        "schedule": {"type": "string", "pattern": r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|"
                                                  r"((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"},
        "duration": {"type": "string", "pattern": r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"},
        "reasons": {"type": "array", "maxItems": 50, "x-kubernetes-list-type": "set",
                    "items": {"type": "string", "enum": ["Underutilized", "Empty", "Drifted"]}}}}
    spec = {"type": "object", "required": ["template"], "properties": {
        "template": {"type": "object", "required": ["spec"], "properties": {
            "metadata": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": _LABEL_VALUE, "maxProperties": 100,
                           "x-kubernetes-map-type": "atomic",
                           "x-kubernetes-validations": [
                    {**rule, "rule": f"self.all(x, {rule['rule'].replace('self', 'x')})"}
                    for rule in _restricted_keys(nodepool=True)]},
                "annotations": {"type": "object", "additionalProperties": _STRING,
                                "x-kubernetes-map-type": "granular"}}},
            "spec": {"type": "object", "required": ["requirements", "nodeClassRef"],
                     "properties": {**_CLAIM_SPEC_COMMON, "requirements": _requirements(nodepool=True),
                                    "nodeClassRef": {**_NODE_CLASS_REF, "x-kubernetes-validations": [
                                        {"rule": "self.group == oldSelf.group",
                                         "message": "nodeClassRef.group is immutable"},
                                        {"rule": "self.kind == oldSelf.kind",
                                         "message": "nodeClassRef.kind is immutable"}]}}}}},
        "disruption": {"type": "object", "default": {"consolidateAfter": "0s"}, "required": ["consolidateAfter"],
                       "properties": {
                           "consolidateAfter": _DURATION,
                           "consolidationPolicy": {"type": "string", "default": "WhenEmptyOrUnderutilized",
                                                   "enum": ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]},
                           "budgets": {"type": "array", "maxItems": 50, "items": budget,
                                       "x-kubernetes-list-type": "atomic",
                                       "default": [{"nodes": "10%"}], "x-kubernetes-validations": [
                                           {"rule": "self.all(x, has(x.schedule) == has(x.duration))",
                                            "message": "'schedule' must be set with 'duration'"}]}}},
        "limits": _RESOURCE_LIST,
        "weight": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 100},
        "replicas": {"type": "integer", "format": "int64", "minimum": 0}},
        # static NodePools (replicas) as Karpenter's rules allow them
        "x-kubernetes-validations": [
            {"rule": "has(self.replicas) == has(oldSelf.replicas)",
             "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                        "provisioning modes"},
            {"rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
                     "(size(self.limits) == 1 && 'nodes' in self.limits))",
             "message": "only 'limits.nodes' is supported on static NodePools"},
            {"rule": "!has(self.replicas) || !has(self.weight)",
             "message": "'weight' is not supported on static NodePools"}]}
    status = {"type": "object", "properties": {
        "resources": _RESOURCE_LIST, "nodes": {"type": "integer", "format": "int64", "default": 0},
        "conditions": _conditions(["lastTransitionTime", "message", "reason", "status", "type"],
                                  {"minLength": 1, "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"}),
        "nodeClassObservedGeneration": {"type": "integer", "format": "int64"}}}
    columns: list[Obj] = [
        {"name": "NodeClass", "type": "string", "jsonPath": ".spec.template.spec.nodeClassRef.name"},
        {"name": "Nodes", "type": "string", "jsonPath": ".status.nodes"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Weight", "type": "integer", "jsonPath": ".spec.weight", "priority": 1},
        {"name": "CPU", "type": "string", "jsonPath": ".status.resources.cpu", "priority": 1},
        {"name": "Memory", "type": "string", "jsonPath": ".status.resources.memory", "priority": 1},
    ]
    return _crd("NodePool", NODEPOOLS, spec, status, columns,
                scale={"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"})


def nodeclaim_crd() -> Obj:
    spec = {"type": "object", "required": ["requirements", "nodeClassRef"], "properties": {
        **_CLAIM_SPEC_COMMON,
        "resources": {"type": "object", "properties": {"requests": _RESOURCE_LIST}}},
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec is immutable"}]}
    status = {"type": "object", "properties": {
        "nodeName": _STRING, "providerID": _STRING, "imageID": _STRING,
        "capacity": _RESOURCE_LIST, "allocatable": _RESOURCE_LIST,
        "conditions": _conditions(["lastTransitionTime", "status", "type"],
                                  {"pattern": r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$"}),
        "lastPodEventTime": {"type": "string", "format": "date-time"}}}
    columns: list[Obj] = [
        {"name": "Type", "type": "string", "jsonPath": ".metadata.labels.node\\.kubernetes\\.io/instance-type"},
        {"name": "Capacity", "type": "string", "jsonPath": ".metadata.labels.karpenter\\.sh/capacity-type"},
        {"name": "Zone", "type": "string", "jsonPath": ".metadata.labels.topology\\.kubernetes\\.io/zone"},
        {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "ImageID", "type": "string", "jsonPath": ".status.imageID", "priority": 1},
        {"name": "ID", "type": "string", "jsonPath": ".status.providerID", "priority": 1},
        {"name": "NodePool", "type": "string", "jsonPath": ".metadata.labels.karpenter\\.sh/nodepool",
         "priority": 1},
        {"name": "NodeClass", "type": "string", "jsonPath": ".spec.nodeClassRef.name", "priority": 1},
        {"name": "Drifted", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Drifted")].status',
         "priority": 1},
    ]
    return _crd("NodeClaim", NODECLAIMS, spec, status, columns)




async def install(client: Client, timeout: float = 10.0) -> None:
    """Create or update both CRDs, then wait until they are established."""
    for crd in (nodepool_crd(), nodeclaim_crd()):
        name = crd["metadata"]["name"]
        try:
            await client.create(CRD_PATH, crd)
            log.info("installed CRD %s", name)
        except ApiError as e:
            if e.code != 409:
                raise
            current = await client.get(f"{CRD_PATH}/{name}")
            if current.get("spec", {}).get("versions") != crd["spec"]["versions"]:
                crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await client.update(f"{CRD_PATH}/{name}", crd)
                log.info("updated CRD %s", name)
    await wait_established(client, (f"{NODEPOOLS}.{GROUP}", f"{NODECLAIMS}.{GROUP}"), timeout)
