"""The ClusterRoles and bindings of the built-in components that upstream's bootstrap policy
does not hold, written at start with it (``rbacreconcile.py``), so that under
``--authorization-mode RBAC`` every component is allowed what it does (identities.py).

- ``kwok-controller``, bound to the service account ``kube-system/kwok-controller``, as KWOK's
  manifest binds its controller: the node simulator's writes that are not a kubelet's (the
  kubelets are ``system:node:<node>``, authorized by the Node authorizer): the stages'
  finalizers, deletes and events, the failure modes, the Secrets and ConfigMaps its kubelets
  read before they start a pod, the bulk ``LeaseRenewal`` and
  ``NodeStatusReport`` requests (which need ``update`` on the Leases and ``patch`` on
  ``nodes/status`` of the nodes they name), the Stage CRD.
- ``karpenter``, bound to ``kube-system/karpenter``, as Karpenter's chart binds its service
  account: NodePools and NodeClaims, the nodes it launches and drains (evictions), its
  ResourceSlices, its CRDs (this autoscaler installs them itself), what it reads to simulate
  scheduling.
- ``controlplane:podgroup-protection-controller``, bound to ``kube-system/podgroup-protection-controller``:
  the PodGroup protection controller's (the PodGroups' finalizer), which upstream's 1.34
  bootstrap policy has no ``system:controller:`` role for (its feature is newer): named as
  this server's, not as upstream's.

Labelled ``app.kubernetes.io/managed-by: controlplane``, not as the bootstrap policy's.
"""

from __future__ import annotations

from typing import Any

from .rbacpolicy import (
    APPS,
    COORDINATION,
    CORE,
    EVENTS,
    READ,
    RESOURCE,
    STORAGE,
    rule,
    service_account,
)

__all__ = ["COMPONENT_ROLES", "COMPONENT_ROLE_BINDINGS"]

Obj = dict[str, Any]
LABELS = {"app.kubernetes.io/managed-by": "controlplane"}
RBAC_GROUP = "rbac.authorization.k8s.io"
CRDS = ["apiextensions.k8s.io"]
NODES_API = ["nodes.controlplane.dev"]  # this emulator's bulk requests (api/leaserenewals.py, api/nodereports.py)


def _role(name: str, rules: list[Obj]) -> Obj:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name, "labels": LABELS},
            "rules": rules}


def _binding(name: str, account: str) -> Obj:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": LABELS},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [service_account(account)]}


COMPONENT_ROLES: tuple[Obj, ...] = (
    _role("karpenter", [
        rule("*", ["karpenter.sh"], "nodepools nodepools/status nodeclaims nodeclaims/status"),
        rule(f"{READ} create delete patch update", CORE, "nodes"),
        rule("patch update", CORE, "nodes/status"),
        rule(f"{READ} delete", CORE, "pods"),
        rule("create", CORE, "pods/eviction"),
        rule(READ, CORE, "namespaces persistentvolumeclaims persistentvolumes replicationcontrollers services"),
        rule(READ, APPS, "daemonsets deployments replicasets statefulsets"),
        rule(READ, ["policy"], "poddisruptionbudgets"),
        rule(READ, STORAGE, "csinodes storageclasses volumeattachments"),
        rule(f"{READ} create delete patch update", RESOURCE, "resourceslices"),
        rule(READ, RESOURCE, "deviceclasses devicetaintrules resourceclaims resourceclaimtemplates"),
        rule(READ, ["scheduling.k8s.io"], "podgroups priorityclasses workloads"),
        rule(f"{READ} create patch update", CRDS, "customresourcedefinitions"),
        rule("create get update", COORDINATION, "leases"),
        EVENTS,
    ]),
    _role("kwok-controller", [
        rule(f"{READ} create delete patch update", CORE, "nodes"),
        rule("patch update", CORE, "nodes/status"),
        rule(f"{READ} delete patch update", CORE, "pods"),
        rule("patch update", CORE, "pods/status"),
        rule(READ, CORE, "secrets configmaps"),  # what its kubelets need to start a pod (nodes/refs.py)
        rule(f"{READ} create delete patch update", COORDINATION, "leases"),
        rule("create", NODES_API, "leaserenewals nodestatusreports"),
        rule(f"{READ} create delete", STORAGE, "csinodes"),
        rule("create get", CORE, "namespaces"),
        rule(READ, ["kwok.x-k8s.io"], "stages"),
        rule(f"{READ} create patch update", CRDS, "customresourcedefinitions"),
        EVENTS,
    ]),
    _role("controlplane:podgroup-protection-controller", [
        rule("get list patch update watch", ["scheduling.k8s.io"], "podgroups"),
        rule("get list watch", CORE, "pods"),
        EVENTS,
    ]),
)

COMPONENT_ROLE_BINDINGS: tuple[Obj, ...] = (
    _binding("karpenter", "karpenter"),
    _binding("kwok-controller", "kwok-controller"),
    _binding("controlplane:podgroup-protection-controller", "podgroup-protection-controller"),
)
