"""The ``system:controller:*`` ClusterRoles of upstream's bootstrap policy (its
``controller_policy.go``), and their bindings: what each controller of kube-controller-manager
may do when it runs under its own service account (``--use-service-account-credentials``).

Each role is bound, by a ClusterRoleBinding of the same name, to the service account
``kube-system/<controller>``, the role's name less its ``system:controller:`` prefix. The
rules are those of upstream's golden files for 1.34 (sorted as ``rbacpolicy.rule`` sorts
them), with ``device-taint-eviction-controller`` of 1.37 (DRADeviceTaints and
DRADeviceTaintRules, GA: its rules as upstream's ``controller_policy.go`` writes them); left
out, as alpha (off) in 1.34: the resource claim controller's ``resourceclaims/binding``
(DRADeviceBindingConditions). The roles of controllers whose feature is off by default in
1.34 (``podcertificaterequestcleaner``, the ClusterTrustBundle publisher) are in upstream's
feature-gated golden files only, and not here; the storage version migrator's is here, as its
``controller_policy.go`` writes it, its API GA (on) in 1.37.

The emulated controllers (``controlplane/controllers``) act as these accounts
(``controlplane/identities.py``) and are authorized by these roles under RBAC.
"""

from __future__ import annotations

from typing import Any

from .rbacpolicy import (
    APPS,
    AUTHZ,
    BATCH,
    CERTIFICATES,
    CORE,
    EVENTS,
    READ,
    RESOURCE,
    SIGNER_NAMES,
    STORAGE,
    bootstrap_binding,
    bootstrap_role,
    rule,
    service_account,
)

__all__ = ["CONTROLLER_PREFIX", "CONTROLLER_ROLES", "CONTROLLER_ROLE_BINDINGS"]

Obj = dict[str, Any]
CONTROLLER_PREFIX = "system:controller:"
APPS_EXT = ["apps", "extensions"]
NETWORKING = ["networking.k8s.io"]

# controller (and so service account) name -> its rules, by name
_RULES: dict[str, list[Obj]] = {
    "attachdetach-controller": [
        rule("list watch", CORE, "persistentvolumeclaims persistentvolumes"),
        rule(READ, CORE, "nodes"),
        rule("patch update", CORE, "nodes/status"),
        rule("list watch", CORE, "pods"),
        EVENTS,
        rule("create delete get list watch", STORAGE, "volumeattachments"),
        rule(READ, STORAGE, "csidrivers"),
        rule(READ, STORAGE, "csinodes"),
    ],
    # the signer and approver of CertificateSigningRequests (api/certificateadmission.py asks)
    "certificate-controller": [
        rule("delete get list watch", CERTIFICATES, "certificatesigningrequests"),
        rule("update", CERTIFICATES, "certificatesigningrequests/approval certificatesigningrequests/status"),
        rule("approve", CERTIFICATES, "signers", names="kubernetes.io/kube-apiserver-client-kubelet"),
        rule("sign", CERTIFICATES, "signers", names=" ".join(SIGNER_NAMES)),
        rule("create", AUTHZ, "subjectaccessreviews"),
        EVENTS,
    ],
    "clusterrole-aggregation-controller": [
        rule("escalate get list patch update watch", ["rbac.authorization.k8s.io"], "clusterroles"),
    ],
    "cronjob-controller": [
        rule("get list update watch", BATCH, "cronjobs"),
        rule("create delete get list patch update watch", BATCH, "jobs"),
        rule("update", BATCH, "cronjobs/status"),
        rule("update", BATCH, "cronjobs/finalizers"),
        rule("delete list watch", CORE, "pods"),
        EVENTS,
    ],
    "daemon-set-controller": [
        rule(READ, APPS_EXT, "daemonsets"),
        rule("update", APPS_EXT, "daemonsets/status"),
        rule("update", APPS_EXT, "daemonsets/finalizers"),
        rule("list watch", CORE, "nodes"),
        rule("create delete list patch watch", CORE, "pods"),
        rule("create", CORE, "pods/binding"),
        rule("create delete get list patch update watch", APPS, "controllerrevisions"),
        EVENTS,
    ],
    "deployment-controller": [
        rule("get list update watch", APPS_EXT, "deployments"),
        rule("update", APPS_EXT, "deployments/status"),
        rule("update", APPS_EXT, "deployments/finalizers"),
        rule("create delete get list patch update watch", APPS_EXT, "replicasets"),
        rule("get list update watch", CORE, "pods"),
        EVENTS,
    ],
    "disruption-controller": [
        rule(READ, APPS_EXT, "deployments"),
        rule(READ, APPS_EXT, "replicasets"),
        rule(READ, CORE, "replicationcontrollers"),
        rule(READ, ["policy"], "poddisruptionbudgets"),
        rule(READ, APPS, "statefulsets"),
        rule("update", ["policy"], "poddisruptionbudgets/status"),
        rule("patch update", CORE, "pods/status"),
        rule("get", ["*"], "*/scale"),
        EVENTS,
    ],
    "endpoint-controller": [
        rule(READ, CORE, "pods services"),
        rule("create delete get list update watch", CORE, "endpoints"),
        rule("create", CORE, "endpoints/restricted"),
        EVENTS,
    ],
    "endpointslice-controller": [
        rule(READ, CORE, "nodes pods services"),
        rule("update", CORE, "services/finalizers"),
        rule("create delete get list update watch", ["discovery.k8s.io"], "endpointslices"),
        EVENTS,
    ],
    "endpointslicemirroring-controller": [
        rule(READ, CORE, "endpoints services"),
        rule("update", CORE, "services/finalizers"),
        rule("update", CORE, "endpoints/finalizers"),
        rule("create delete get list update watch", ["discovery.k8s.io"], "endpointslices"),
        EVENTS,
    ],
    "ephemeral-volume-controller": [
        rule(READ, CORE, "pods"),
        rule("update", CORE, "pods/finalizers"),
        rule("create get list watch", CORE, "persistentvolumeclaims"),
        EVENTS,
    ],
    "expand-controller": [
        rule("get list patch update watch", CORE, "persistentvolumes"),
        rule("patch update", CORE, "persistentvolumeclaims/status"),
        rule(READ, CORE, "persistentvolumeclaims"),
        EVENTS,
    ],
    "generic-garbage-collector": [
        rule("delete get list patch update watch", ["*"], "*"),
        EVENTS,
    ],
    "horizontal-pod-autoscaler": [
        rule(READ, ["autoscaling"], "horizontalpodautoscalers"),
        rule("update", ["autoscaling"], "horizontalpodautoscalers/status"),
        rule("get update", ["*"], "*/scale"),
        rule("list watch", CORE, "pods"),
        rule("list watch", ["metrics.k8s.io"], "pods"),
        rule(READ, ["custom.metrics.k8s.io"], "*"),
        rule(READ, ["external.metrics.k8s.io"], "*"),
        EVENTS,
    ],
    "job-controller": [
        rule("get list patch update watch", BATCH, "jobs"),
        rule("update", BATCH, "jobs/status"),
        rule("update", BATCH, "jobs/finalizers"),
        rule("create delete list patch watch", CORE, "pods"),
        EVENTS,
    ],
    "legacy-service-account-token-cleaner": [
        rule("get", CORE, "configmaps", names="kube-apiserver-legacy-service-account-token-tracking"),
        rule("delete patch", CORE, "secrets"),
    ],
    "namespace-controller": [
        rule("delete get list watch", CORE, "namespaces"),
        rule("update", CORE, "namespaces/finalize namespaces/status"),
        rule("delete deletecollection get list watch", ["*"], "*"),
    ],
    "node-controller": [
        rule("delete get list patch update watch", CORE, "nodes"),
        rule("patch update", CORE, "nodes/status"),
        rule("patch update", CORE, "pods/status"),
        rule("delete get list watch", CORE, "pods"),
        EVENTS,
    ],
    "persistent-volume-binder": [
        rule("create delete get list update watch", CORE, "persistentvolumes"),
        rule("update", CORE, "persistentvolumes/status"),
        rule("get list update watch", CORE, "persistentvolumeclaims"),
        rule("update", CORE, "persistentvolumeclaims/status"),
        rule("create delete get list watch", CORE, "pods"),
        rule(READ, STORAGE, "storageclasses"),
        rule("list watch", CORE, "nodes"),
        EVENTS,
        rule("watch", CORE, "events"),
    ],
    "pod-garbage-collector": [
        rule("delete list watch", CORE, "pods"),
        rule(READ, CORE, "nodes"),
        rule("patch", CORE, "pods/status"),
    ],
    "pv-protection-controller": [
        rule("get list update watch", CORE, "persistentvolumes"),
        EVENTS,
    ],
    "pvc-protection-controller": [
        rule("get list update watch", CORE, "persistentvolumeclaims"),
        rule("update", CORE, "persistentvolumeclaims/status"),
        rule(READ, CORE, "pods"),
        EVENTS,
    ],
    "replicaset-controller": [
        rule("get list update watch", APPS_EXT, "replicasets"),
        rule("update", APPS_EXT, "replicasets/status"),
        rule("update", APPS_EXT, "replicasets/finalizers"),
        rule("create delete list patch watch", CORE, "pods"),
        EVENTS,
    ],
    "replication-controller": [
        rule("get list update watch", CORE, "replicationcontrollers"),
        rule("update", CORE, "replicationcontrollers/status"),
        rule("update", CORE, "replicationcontrollers/finalizers"),
        rule("create delete list patch watch", CORE, "pods"),
        EVENTS,
    ],
    "resource-claim-controller": [
        rule(READ, CORE, "pods"),
        rule("update", CORE, "pods/finalizers"),
        rule("create delete get list watch", RESOURCE, "resourceclaims"),
        rule("patch update", RESOURCE, "resourceclaims resourceclaims/status"),
        rule("patch update", CORE, "pods/status"),
        EVENTS,
    ],
    # DRADeviceTaints and DRADeviceTaintRules, GA in 1.37 (controllers/devicetainteviction.py)
    "device-taint-eviction-controller": [
        rule("delete get list watch", CORE, "pods"),
        rule("patch update", CORE, "pods/status"),
        rule(READ, RESOURCE, "resourceclaims"),
        rule(READ, RESOURCE, "resourceslices"),
        rule(READ, RESOURCE, "deviceclasses"),
        rule(READ, RESOURCE, "devicetaintrules"),
        EVENTS,
        rule("patch update", RESOURCE, "devicetaintrules/status"),
    ],
    "resourcequota-controller": [
        rule("list watch", ["*"], "*"),  # to count every type
        rule("update", CORE, "resourcequotas/status"),
        EVENTS,
    ],
    "root-ca-cert-publisher": [
        rule("create update", CORE, "configmaps"),
        EVENTS,
    ],
    "route-controller": [
        rule("list watch", CORE, "nodes"),
        rule("patch", CORE, "nodes/status"),
        EVENTS,
    ],
    "selinux-warning-controller": [
        EVENTS,
        rule(READ, CORE, "persistentvolumes"),
        rule(READ, CORE, "persistentvolumeclaims"),
        rule(READ, CORE, "pods"),
        rule(READ, STORAGE, "csidrivers"),
    ],
    "service-account-controller": [
        rule("create", CORE, "serviceaccounts"),
        EVENTS,
    ],
    "service-cidrs-controller": [
        rule("get list patch update watch", NETWORKING, "servicecidrs"),
        rule("patch update", NETWORKING, "servicecidrs/finalizers"),
        rule("patch update", NETWORKING, "servicecidrs/status"),
        rule(READ, NETWORKING, "ipaddresses"),
        EVENTS,
    ],
    "service-controller": [
        rule(READ, CORE, "services"),
        rule("patch update", CORE, "services/status"),
        rule("list watch", CORE, "nodes"),
        EVENTS,
    ],
    "statefulset-controller": [
        rule("list watch", CORE, "pods"),
        rule(READ, APPS, "statefulsets"),
        rule("update", APPS, "statefulsets/status"),
        rule("update", APPS, "statefulsets/finalizers"),
        rule("create delete get patch update", CORE, "pods"),
        rule("create delete get list patch update watch", APPS, "controllerrevisions"),
        rule("create get list watch", CORE, "persistentvolumeclaims"),
        rule("delete update", CORE, "persistentvolumeclaims"),  # the retention policy's
        rule("update", CORE, "pods/finalizers"),
        EVENTS,
    ],
    "ttl-after-finished-controller": [
        rule("delete get list watch", BATCH, "jobs"),
        EVENTS,
    ],
    "ttl-controller": [
        rule("list patch update watch", CORE, "nodes"),
        EVENTS,
    ],
    "validatingadmissionpolicy-status-controller": [
        rule(READ, ["admissionregistration.k8s.io"], "validatingadmissionpolicies"),
        rule("get patch update", ["admissionregistration.k8s.io"], "validatingadmissionpolicies/status"),
        EVENTS,
    ],
    # StorageVersionMigrator, GA in 1.37 (controllers/storagemigration.py): list for the current
    # resourceVersion, patch (and create: an apply to an object deleted meanwhile) for the rewrite
    "storage-version-migrator-controller": [
        rule("create list patch", ["*"], "*"),
        rule("update", ["storagemigration.k8s.io"], "storageversionmigrations/status"),
    ],
    "volumeattributesclass-protection-controller": [
        rule(READ, CORE, "persistentvolumeclaims"),
        rule(READ, CORE, "persistentvolumes"),
        rule("get list update watch", STORAGE, "volumeattributesclasses"),
        EVENTS,
    ],
}

CONTROLLER_ROLES: tuple[Obj, ...] = tuple(
    bootstrap_role(CONTROLLER_PREFIX + name, rules) for name, rules in sorted(_RULES.items()))
CONTROLLER_ROLE_BINDINGS: tuple[Obj, ...] = tuple(
    bootstrap_binding(CONTROLLER_PREFIX + name, [service_account(name)]) for name in sorted(_RULES))
