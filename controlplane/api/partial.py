"""Metadata-only answers: ``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``.

client-go's metadata client (metadata informers, the garbage collector, controllers
that only need names, labels and owners) asks for objects as
``PartialObjectMetadata``: a get answers one, a list a ``PartialObjectMetadataList``
(its items ``PartialObjectMetadata`` too), a watch sends them as its events'
objects. All are ``meta.k8s.io/v1`` (or ``v1beta1`` if that is what was asked),
whatever the listed type.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["metadata_version", "partial", "partial_list"]

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


def partial(raw: bytes, api_version: str) -> dict[str, Any]:
    """The object whose JSON is ``raw`` as a PartialObjectMetadata."""
    meta = orjson.loads(raw).get("metadata") or {}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": meta}


def partial_list(items: list[bytes], list_meta: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": list_meta,
            "items": [partial(raw, api_version) for raw in items]}
