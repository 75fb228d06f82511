"""All objects of one type, by namespace, for the admission plugins that ask on every
create (ResourceQuota, LimitRanger): listed from the watch cache again only when the
type's cache has moved on (its generation), so a cluster with none of them pays a
dictionary lookup per create."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..registry.types import ResourceType
from .converting import unconverted

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["NamespacedObjects"]

Obj = dict[str, Any]


class NamespacedObjects:
    """All objects of one type, by namespace, listed again only when the type's watch cache
    has moved on (its generation): admission asks on every create."""

    def __init__(self, kube: KubeApi, rtype: ResourceType) -> None:
        self.kube = kube
        self.rtype = rtype
        self._memo: tuple[int | None, dict[str, list[Obj]]] = (None, {})

    def known_empty(self) -> bool:
        """True when none is stored, as last listed, and the cache has not moved on since (O(1))."""
        generation = self.kube.reads.generation(self.rtype)
        return generation is not None and generation == self._memo[0] and not self._memo[1]

    async def of(self, namespace: str) -> list[Obj]:
        generation = self.kube.reads.generation(self.rtype)
        if generation is None or self._memo[0] != generation:
            with unconverted():  # asked within requests for converted types too
                listed = await self.kube._list(self.rtype, None, {"resourceVersion": "0"})
            by_namespace: dict[str, list[Obj]] = {}
            for raw in listed.items:
                obj = orjson.loads(raw)
                by_namespace.setdefault(obj["metadata"].get("namespace", ""), []).append(obj)
            self._memo = (generation, by_namespace)
        return self._memo[1].get(namespace, [])
