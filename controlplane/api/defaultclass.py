"""DefaultStorageClass and DefaultIngressClass admission: a new claim or Ingress that names
no class gets the cluster's default one, in the create's answer.

As upstream's plugins (``plugin/pkg/admission/storage/storageclass/setdefault``,
``plugin/pkg/admission/network/defaultingressclass``), on create only: a
PersistentVolumeClaim without ``spec.storageClassName`` (null or left out; ``""`` is a
class, "none") and without the beta ``volume.beta.kubernetes.io/storage-class``
annotation gets the StorageClass annotated ``storageclass.kubernetes.io/is-default-class``
(or its beta form) ``"true"``; an Ingress without ``spec.ingressClassName`` and without the
``kubernetes.io/ingress.class`` annotation gets the IngressClass annotated
``ingressclass.kubernetes.io/is-default-class: "true"``. With several defaults, the newest
(``creationTimestamp``; at the same second the first name), as upstream's
``GetDefaultClass``; with none, nothing is set. A claim created before a default existed
is given one later by the persistent volume controller (upstream's retroactive
assignment, ``controllers/volumes.py``). The classes are memoised per watch-cache
generation, as the other admission plugins' objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry.types import ResourceType
from .namespaced import NamespacedObjects

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["DefaultClassAdmission", "newest_default"]

Obj = dict[str, Any]

STORAGE_DEFAULT = ("storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class")
INGRESS_DEFAULT = ("ingressclass.kubernetes.io/is-default-class",)
BETA_CLAIM_CLASS = "volume.beta.kubernetes.io/storage-class"
INGRESS_CLASS = "kubernetes.io/ingress.class"


def newest_default(classes: list[Obj], annotations: tuple[str, ...]) -> Obj | None:
    """The class one of ``annotations`` marks ``"true"``: the newest of several, the first
    by name among those made in the same second (upstream sorts by creation time, newest
    first, then by name)."""
    marked = [c for c in classes
              if any(((c.get("metadata") or {}).get("annotations") or {}).get(a) == "true" for a in annotations)]
    if not marked:
        return None
    marked.sort(key=lambda c: str(c["metadata"].get("name", "")))
    marked.sort(key=lambda c: str(c["metadata"].get("creationTimestamp", "")), reverse=True)  # (stable)
    return marked[0]


class DefaultClassAdmission:
    def __init__(self, kube: KubeApi, claims: ResourceType | None, storage_classes: ResourceType | None,
                 ingresses: ResourceType | None, ingress_classes: ResourceType | None) -> None:
        self.claims, self.ingresses = claims, ingresses
        self.storage_classes = NamespacedObjects(kube, storage_classes) if storage_classes is not None else None
        self.ingress_classes = NamespacedObjects(kube, ingress_classes) if ingress_classes is not None else None

    async def admit(self, rtype: ResourceType, obj: Obj) -> None:
        """Set the default class of a new claim or Ingress that names none (other types pass)."""
        marked_by: tuple[str, ...]
        if rtype is self.claims and self.storage_classes is not None:
            field, marked_by, classes, annotation = ("storageClassName", STORAGE_DEFAULT, self.storage_classes,
                                                     BETA_CLAIM_CLASS)
        elif rtype is self.ingresses and self.ingress_classes is not None:
            field, marked_by, classes, annotation = ("ingressClassName", INGRESS_DEFAULT, self.ingress_classes,
                                                     INGRESS_CLASS)
        else:
            return
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get(field) is not None:
            return
        if annotation in ((obj.get("metadata") or {}).get("annotations") or {}):
            return
        default = newest_default(await classes.of(""), marked_by)
        if default is not None:
            spec[field] = default["metadata"]["name"]
