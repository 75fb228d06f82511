"""What a write through ``/status`` may change in ``metadata``, type by type.

Upstream, each registry's status strategy (its ``PrepareForUpdate``) copies the stored
spec over the request's, and then decides which of the request's metadata stays: most
keep it all (a label or an annotation changes through ``/status``), some put back the
fields ``metav1.ResetObjectMetaForStatus`` names, a few a handful of their own choosing,
and custom resources and the flow-control types keep the stored metadata whole. Server-set
fields (uid, creationTimestamp, generation, resourceVersion, the deletion's grace period)
are kept by ``rest.BeforeUpdate`` for every type, whatever its strategy (``api/rest.py``,
``_split_status``).

    >>> kept_at_status_write(pods)           # -> ("ownerReferences", "deletionTimestamp"): the stored ones
    >>> kept_at_status_write(nodes)          # -> (): all the request's (labels, annotations...)
    >>> kept_at_status_write(a_custom_type)  # -> None: all the stored metadata but managedFields
"""

from __future__ import annotations

from .types import ResourceType

__all__ = ["RESET_FOR_STATUS", "STATUS_META_KEPT", "WHOLE_META_KEPT", "kept_at_status_write"]

# metav1.ResetObjectMetaForStatus (apimachinery pkg/apis/meta/v1/meta.go): these, and the
# generation and selfLink, from the stored object; managedFields stay the write's
RESET_FOR_STATUS = ("labels", "annotations", "finalizers", "ownerReferences", "deletionTimestamp")

# (group, plural) -> the metadata fields a /status write takes from the stored object,
# beyond the server-set ones; a type not named keeps the request's metadata (its strategy
# sets only the spec: nodes, services, namespaces, replicationcontrollers, PVs, PVCs,
# resourcequotas (pkg/registry/core/*/strategy.go); replicasets, daemonsets, statefulsets
# (pkg/registry/apps/*); jobs, cronjobs (pkg/registry/batch/*); poddisruptionbudgets,
# horizontalpodautoscalers, ingresses; certificatesigningrequests, through /status and
# /approval alike (pkg/registry/certificates/certificates/strategy.go))
STATUS_META_KEPT: dict[tuple[str, str], tuple[str, ...]] = {
    # pkg/registry/core/pod/strategy.go, podStatusStrategy: DeletionTimestamp cleared (and put
    # back by BeforeUpdate), OwnerReferences kept ("old kubelets corrupt them")
    ("", "pods"): ("ownerReferences", "deletionTimestamp"),
    # pkg/registry/apps/deployment/strategy.go, deploymentStatusStrategy: Labels only
    ("apps", "deployments"): ("labels",),
    # apiextensions-apiserver pkg/registry/customresourcedefinition/strategy.go, statusStrategy:
    # labels, annotations, ownerReferences (not finalizers), generation, selfLink
    ("apiextensions.k8s.io", "customresourcedefinitions"): ("labels", "annotations", "ownerReferences"),
    # kube-aggregator pkg/registry/apiservice/strategy.go, the status strategy
    ("apiregistration.k8s.io", "apiservices"): ("labels", "annotations", "finalizers", "ownerReferences"),
    # ResetObjectMetaForStatus: pkg/registry/networking/servicecidr/strategy.go,
    # storage/volumeattachment, certificates/podcertificaterequest, storagemigration/storagemigration,
    # admissionregistration/validatingadmissionpolicy, scheduling/podgroup, resource/resourceclaim,
    # resource/devicetaintrule
    ("networking.k8s.io", "servicecidrs"): RESET_FOR_STATUS,
    ("storage.k8s.io", "volumeattachments"): RESET_FOR_STATUS,
    ("certificates.k8s.io", "podcertificaterequests"): RESET_FOR_STATUS,
    ("storagemigration.k8s.io", "storageversionmigrations"): RESET_FOR_STATUS,
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): RESET_FOR_STATUS,
    ("scheduling.k8s.io", "podgroups"): RESET_FOR_STATUS,
    ("resource.k8s.io", "resourceclaims"): RESET_FOR_STATUS,
    ("resource.k8s.io", "devicetaintrules"): RESET_FOR_STATUS,
}

# the whole stored metadata but managedFields: pkg/registry/flowcontrol/{flowschema,
# prioritylevelconfiguration}/strategy.go (ObjectMeta = old's); custom resources too
# (apiextensions-apiserver pkg/registry/customresource/status_strategy.go: the old object
# but its status)
WHOLE_META_KEPT = frozenset({("flowcontrol.apiserver.k8s.io", "flowschemas"),
                             ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations")})


def kept_at_status_write(rtype: ResourceType) -> tuple[str, ...] | None:
    """The metadata fields a write through ``rtype``'s ``/status`` takes from the stored
    object (beyond the server-set ones), or None: all of them but managedFields."""
    key = (rtype.group, rtype.plural)
    if rtype.custom is not None or key in WHOLE_META_KEPT:
        return None
    return STATUS_META_KEPT.get(key, ())
