"""What a served version of a CustomResourceDefinition adds to a ``ResourceType``,
and what its custom resources go through on their way in and out.

In (create, update, patch)::

    pruned, causes = admit(version, obj)   # pruned unknown fields, defaulted, validated
    pruned, causes = admit(version, obj, old)   # an update: transition rules (oldSelf) see ``old``,
                                                # and the values it leaves unchanged are ratcheted
    pruned, causes = admit(version, obj, old, ratcheted)   # ... their failed rules added to ratcheted

Out (every read)::

    present(rtype, obj)    # apiVersion of the version asked for; pruned and defaulted by its schema

All versions of a CRD share one storage (``/registry/<group>/<plural>/``). Under the
``None`` conversion strategy converting between versions only rewrites ``apiVersion``;
under ``Webhook`` (``conversion`` set) the CRD's webhook converts (``api/crdconversion.py``),
and writes are stored in ``storage_version``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .structural import Cause, Schema, apply_defaults, prune, validate

if TYPE_CHECKING:
    from .types import ResourceType

__all__ = ["CustomVersion", "admit", "present"]


@dataclass(frozen=True)
class CustomVersion:
    crd: str                                      # the CRD's name, <plural>.<group>
    schema: Schema | None                         # the version's openAPIV3Schema
    printer_columns: tuple[dict[str, Any], ...]   # additionalPrinterColumns, as the CRD has them
    list_kind: str = ""                           # acceptedNames.listKind
    deprecation_warning: str = ""                 # sent with every request to a deprecated version
    scale: dict[str, str] | None = None           # subresources.scale: specReplicasPath, statusReplicasPath, ...
    conversion: dict[str, Any] | None = None      # spec.conversion.webhook under the Webhook strategy, else None
    storage_version: str = ""                     # the version with storage: true (its name)


def admit(version: CustomVersion, obj: dict[str, Any], old: dict[str, Any] | None = None,
          ratcheted: list[Cause] | None = None) -> tuple[list[str], list[Cause]]:
    """Prune, default and validate ``obj`` in place: (the pruned paths, the causes
    of a 422). ``metadata`` is not the schema's business (only its name is
    checked, by the caller, as for every type). ``old`` is the stored object of an
    update, which the schema's transition rules compare with (as read: pruned and
    defaulted by the schema, as upstream decodes it), and against which the errors of
    unchanged values are ratcheted (upstream's CRDValidationRatcheting, GA in 1.33): the
    failed rules among those are added to ``ratcheted``, for the request's warnings."""
    if version.schema is None:
        return [], []
    pruned = prune(version.schema, obj)
    apply_defaults(version.schema, obj)
    without_meta = {k: v for k, v in version.schema.get("properties", {}).items() if k != "metadata"}
    schema = dict(version.schema, properties=without_meta)
    if old is None:
        return pruned, validate(schema, obj)
    before = copy.deepcopy(old)
    prune(version.schema, before)
    apply_defaults(version.schema, before)
    return pruned, validate(schema, obj, old=before, ratcheted=ratcheted)


def present(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as read through ``rtype``: its apiVersion, pruned and defaulted by its
    schema (kube-apiserver prunes and defaults what it reads from storage too:
    the object may have been written through another version, or a schema since
    changed)."""
    obj["apiVersion"] = rtype.api_version
    if rtype.custom is not None and rtype.custom.schema is not None:
        prune(rtype.custom.schema, obj)
        apply_defaults(rtype.custom.schema, obj)
    return obj
