"""KWOK's ``Stage`` as a CustomResourceDefinition: ``stages.kwok.x-k8s.io``, v1alpha1.

With ``--enable-crds Stage`` (``controlplane nodes``, ``controlplane serve``) the
simulator takes its stages from the Stage objects stored in the API server, as
KWOK's controller does with the same flag, and installs this CRD through the API
when it is not there (``install``), so that ``kubectl apply -f stage-fast.yaml``
works as on a KWOK cluster. One already there (KWOK's own, or ours from an
earlier run) is left as it is.

The schema is structural and has the fields, types, enums, minimums and
defaults of KWOK's (``spec.resourceRef`` required, ``apiGroup`` defaulting to
``v1``, ``weight`` to 0, ``next.statusSubresource`` to ``status``; the newer
``steps``, ``patches``, ``jq`` and ``cel`` forms are accepted by the schema as
by KWOK's; the simulator reads the ``jq`` ones and the ``steps`` a ``next`` is made of,
and refuses the others by name), and a
``status`` subresource whose conditions nothing writes, as in KWOK.
"""

from __future__ import annotations

import logging
from typing import Any

from ..client import ApiError, Client, resource_path
from ..client.crds import CRD_PATH, wait_established

__all__ = ["GROUP", "KIND", "PLURAL", "STAGES", "VERSION", "install", "stage_crd"]

log = logging.getLogger(__name__)

GROUP = "kwok.x-k8s.io"
VERSION = "v1alpha1"
KIND = "Stage"
PLURAL = "stages"
STAGES = resource_path(GROUP, VERSION, PLURAL)  # the collection, cluster-scoped

Obj = dict[str, Any]

_STRING: Obj = {"type": "string"}
_BOOL: Obj = {"type": "boolean"}
_MILLISECONDS: Obj = {"type": "integer", "format": "int64", "minimum": 0}


def _object(**properties: Obj) -> Obj:
    return {"type": "object", "properties": properties}


def _expression(**more: Obj) -> Obj:
    """A CEL or JQ expression: ``{expression}`` (``{key, operator, values}`` for a selector's JQ)."""
    return _object(**(more or {"expression": _STRING}))


# a value taken from the object: the old jq string, or the newer jq/CEL forms
_VALUE_FROM = _object(expressionFrom=_STRING, jq=_expression(), cel=_expression())
_IMPERSONATION: Obj = {**_object(username=_STRING), "required": ["username"]}
_FINALIZER_ITEMS: Obj = {"type": "array", "items": _object(value=_STRING)}
_FINALIZERS = _object(add=_FINALIZER_ITEMS, remove=_FINALIZER_ITEMS, empty=_BOOL)
_EVENT = _object(type=_STRING, reason=_STRING, message=_STRING)
_PATCH = _object(subresource=_STRING, root=_STRING, template=_STRING, impersonation=_IMPERSONATION,
                 type={"type": "string", "enum": ["json", "merge", "strategic"]})
_APPLY = _object(subresource=_STRING, template=_STRING, impersonation=_IMPERSONATION,
                 type={"type": "string", "enum": ["apply", "merge", "strategic"]})
_VALUES: Obj = {"type": "array", "items": _STRING}
_CONDITIONS: Obj = {
    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
    "items": {"type": "object", "required": ["lastTransitionTime", "message", "reason", "status", "type"],
              "properties": {
                  "type": {"type": "string", "maxLength": 316},
                  "status": _STRING,
                  "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                             "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                  "message": {"type": "string", "maxLength": 32768},
                  "lastTransitionTime": {"type": "string", "format": "date-time"}}}}


def _spec() -> Obj:
    selector = _object(
        matchLabels={"type": "object", "additionalProperties": _STRING},
        matchAnnotations={"type": "object", "additionalProperties": _STRING},
        matchExpressions={"type": "array", "items": _object(
            key=_STRING, operator=_STRING, values=_VALUES,
            jq=_expression(key=_STRING, operator=_STRING, values=_VALUES), cel=_expression())})
    delay = _object(durationMilliseconds=_MILLISECONDS, durationFrom=_VALUE_FROM,
                    jitterDurationMilliseconds=_MILLISECONDS, jitterDurationFrom=_VALUE_FROM)
    nxt = _object(statusTemplate=_STRING, statusSubresource={"type": "string", "default": "status"},
                  statusPatchAs=_IMPERSONATION, finalizers=_FINALIZERS, delete=_BOOL, event=_EVENT,
                  patches={"type": "array", "items": _PATCH})
    step = _object(event=_EVENT, finalizers=_FINALIZERS, delete=_BOOL, patch=_PATCH, apply=_APPLY)
    return {
        "type": "object", "required": ["resourceRef"],
        "properties": {
            "resourceRef": {**_object(apiGroup={"type": "string", "default": "v1"}, kind=_STRING),
                            "required": ["kind"]},
            "selector": selector,
            "weight": {"type": "integer", "minimum": 0, "default": 0},
            "weightFrom": _VALUE_FROM,
            "delay": delay,
            "next": nxt,
            "steps": {"type": "array", "items": step},
            "immediateNextStage": _BOOL,
        },
    }


def stage_crd() -> Obj:
    """The CustomResourceDefinition of ``stages.kwok.x-k8s.io``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower()},
            "scope": "Cluster",
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "properties": {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"},
                                   "spec": _spec(), "status": _object(conditions=_CONDITIONS)}}},
                "subresources": {"status": {}},
            }],
        },
    }


async def install(client: Client, timeout: float = 10.0) -> bool:
    """Create the Stage CRD unless one is there, then wait until it is established.
    True if this call created it."""
    name = f"{PLURAL}.{GROUP}"
    created = False
    try:
        await client.get(f"{CRD_PATH}/{name}")  # there already: used as it is, no right to create one needed
    except ApiError as e:
        if e.code != 404:
            raise
        try:
            await client.create(CRD_PATH, stage_crd())
            created = True
            log.info("installed CRD %s", name)
        except ApiError as e2:
            if e2.code != 409:  # (409: created meanwhile, by another simulator)
                raise
    await wait_established(client, (name,), timeout)
    return created
