"""PersistentVolumeClaimResize admission: a claim grows only where its class allows it.

As upstream's plugin (``plugin/pkg/admission/storage/persistentvolume/resize``), on an
update of a PersistentVolumeClaim itself (not ``/status``) that raises its
``spec.resources.requests.storage``: the claim must be ``Bound`` (403 ``Only bound
persistent volume claims can be expanded``), and its class (the beta
``volume.beta.kubernetes.io/storage-class`` annotation, else ``storageClassName``), the
same before and after and not ``""``, must exist with ``allowVolumeExpansion: true`` (403
``only dynamically provisioned pvc can be resized and the storageclass that provisions the
pvc must support resize``). Keeping or lowering the size is not its concern. Nothing
expands volumes here: an allowed resize changes the claim's spec only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..quantity import QuantityError, parse_quantity
from ..registry.types import ResourceType
from .errors import ApiError
from .namespaced import NamespacedObjects

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["ClaimResizeAdmission"]

Obj = dict[str, Any]

BETA_CLAIM_CLASS = "volume.beta.kubernetes.io/storage-class"


def _storage(claim: Obj) -> Any:
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    try:
        return parse_quantity(requests.get("storage", 0))
    except (QuantityError, TypeError, ValueError):
        return None  # (validation words what does not parse)


def _class_of(claim: Obj) -> str:
    """Upstream's GetPersistentVolumeClaimClass: the beta annotation first, then the field."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if BETA_CLAIM_CLASS in annotations:
        return str(annotations[BETA_CLAIM_CLASS])
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'persistentvolumeclaims "{name}" is forbidden: {why}',
                    {"name": name, "kind": "persistentvolumeclaims"})


class ClaimResizeAdmission:
    def __init__(self, kube: KubeApi, claims: ResourceType, storage_classes: ResourceType) -> None:
        self.claims = claims
        self.classes = NamespacedObjects(kube, storage_classes)

    async def check(self, name: str, obj: Obj, old: Obj) -> None:
        """Refuse growing the claim ``old`` into ``obj`` where upstream's plugin does."""
        new_size, old_size = _storage(obj), _storage(old)
        if new_size is None or old_size is None or new_size <= old_size:
            return
        if (old.get("status") or {}).get("phase") != "Bound":
            raise _forbidden(name, "Only bound persistent volume claims can be expanded")
        wanted, before = _class_of(obj), _class_of(old)
        if wanted and wanted == before:
            sc = next((c for c in await self.classes.of("") if (c.get("metadata") or {}).get("name") == wanted), None)
            if sc is not None and sc.get("allowVolumeExpansion") is True:
                return
        raise _forbidden(name, "only dynamically provisioned pvc can be resized and the storageclass that "
                               "provisions the pvc must support resize")
