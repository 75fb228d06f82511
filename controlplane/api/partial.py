"""Metadata-only answers: ``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``.

client-go's metadata client (metadata informers, the garbage collector, controllers
that only need names, labels and owners) asks for objects as
``PartialObjectMetadata``: a get answers one, a list a ``PartialObjectMetadataList``
(its items ``PartialObjectMetadata`` too), a watch sends them as its events'
objects. All are ``meta.k8s.io/v1`` (or ``v1beta1`` if that is what was asked),
whatever the listed type. A get must ask for ``PartialObjectMetadata`` and a list
for ``PartialObjectMetadataList`` (a watch's events take either): the other is a 406,
as upstream's ``asPartialObjectMetadata``/``asPartialObjectMetadataList``
(k8s.io/apiserver endpoints/handlers/response.go) refuse it.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..registry import ResourceType
from .errors import ApiError

__all__ = ["check_partial_kind", "metadata_version", "partial", "partial_list"]

_KINDS = ("PartialObjectMetadata", "PartialObjectMetadataList")


def metadata_version(accept: str) -> str | None:
    """``meta.k8s.io/v1`` (or ``/v1beta1``) when ``accept`` asks for metadata only, else None."""
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
                  for p in part.split(";")[1:] if "=" in p}
        if params.get("as") in _KINDS and params.get("g") == "meta.k8s.io" \
                and params.get("v", "v1") in ("v1", "v1beta1"):
            return f"meta.k8s.io/{params.get('v', 'v1')}"
    return None


def _go_type(rtype: ResourceType, listing: bool) -> str:
    """The Go type upstream names in its 406 (``%T`` of the object read from its storage):
    the group's internal package (events.k8s.io Events are ``core`` Events there), or
    ``unstructured`` for custom resources."""
    if rtype.custom is not None:
        return "*unstructured.UnstructuredList" if listing else "*unstructured.Unstructured"
    package = "core" if rtype.group in ("", "events.k8s.io") else rtype.group.split(".")[0]
    return f"*{package}.{rtype.kind}{'List' if listing else ''}"


def check_partial_kind(asked: str, rtype: ResourceType, listing: bool) -> None:
    """A 406 unless ``asked`` (``as=``) is ``PartialObjectMetadataList`` for a list and
    ``PartialObjectMetadata`` for one object."""
    if listing and asked != "PartialObjectMetadataList":
        raise ApiError(406, "NotAcceptable", "you requested PartialObjectMetadata, but the requested object is a "
                       f"list ({_go_type(rtype, True)})")
    if not listing and asked != "PartialObjectMetadata":
        raise ApiError(406, "NotAcceptable", "you requested PartialObjectMetadataList, but the requested object is "
                       f"not a list ({_go_type(rtype, False)})")


def partial(raw: bytes, api_version: str) -> dict[str, Any]:
    """The object whose JSON is ``raw`` as a PartialObjectMetadata."""
    meta = orjson.loads(raw).get("metadata") or {}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": meta}


def partial_list(items: list[bytes], list_meta: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": list_meta,
            "items": [partial(raw, api_version) for raw in items]}
