"""Equivalent resources, as upstream's ``EquivalentResourceMapper`` finds them for admission's
``matchPolicy: Equivalent`` (webhooks' rules, admission policies' ``matchConstraints``): the
other served versions of the same stored resource (``apps/v1`` and ``extensions/v1beta1``
deployments; a CRD's versions), and an object converted between them, as upstream's
``ConvertVersionedAttributes``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry.conversion import CONVERSIONS, conversion_for
from ..registry.types import ResourceType
from .errors import ApiError

if TYPE_CHECKING:
    from ..registry.types import Registry
    from .rest import KubeApi

__all__ = ["as_version", "converted", "equivalent_types"]

Obj = dict[str, Any]


def equivalent_types(registry: Registry, rtype: ResourceType) -> list[ResourceType]:
    """The other served versions of ``rtype``'s resource: the types stored under its prefix
    (upstream's equivalent resource registry, keyed by storage), in the registry's order of
    versions."""
    places = {(rtype.group, v) for v in registry.groups().get(rtype.group, ())}
    for (group, version, kind), conversion in CONVERSIONS.items():  # stored as another group's
        stored_group, _, stored_version = conversion.stored_api_version.rpartition("/")
        pair = {(group, version), (stored_group, stored_version)}
        if kind == rtype.kind and (rtype.group, rtype.version) in pair:
            places |= pair
    prefix = rtype.prefix()
    return [t for group, version in sorted(places) if (t := registry.get(group, version, rtype.plural)) is not None
            and t is not rtype and t.prefix() == prefix]


async def as_version(kube: KubeApi, obj: Obj | None, source: ResourceType, target: ResourceType) -> Obj | None:
    """``obj`` of version ``source`` as version ``target``: a custom resource whose CRD
    converts by webhook through that webhook (its failure a 500, as upstream's
    ``ConvertVersionedAttributes``), others as ``converted``."""
    conversions = kube.conversions
    if obj is None or source is target or conversions is None or not conversions.applies(source):
        return converted(obj, source, target)
    gvk = f"{obj.get('apiVersion') or source.api_version}, Kind={obj.get('kind') or source.kind}"
    try:
        return (await conversions.convert(source, [obj], target.api_version, gvk))[0]
    except ApiError as e:
        message = e.message
        raise ApiError(500, "InternalError", f"Internal error occurred: {message}",
                       {"causes": [{"message": message}]}) from e


def converted(obj: Obj | None, source: ResourceType, target: ResourceType) -> Obj | None:
    """``obj`` of version ``source`` as version ``target`` of the same stored resource: through
    the stored shape (``registry/conversion.py``), or, for versions stored alike (a custom
    resource's), with its ``apiVersion`` changed."""
    if obj is None or source is target:
        return obj
    conversion = conversion_for(source.group, source.version, source.kind)
    stored = conversion.to_storage(obj) if conversion is not None else obj
    conversion = conversion_for(target.group, target.version, target.kind)
    if conversion is not None:
        return conversion.from_storage(stored)
    return {**stored, "apiVersion": target.api_version, "kind": target.kind}
