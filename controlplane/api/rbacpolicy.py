"""The default user-facing ClusterRoles of upstream's bootstrap policy, and ClusterRole aggregation.

``view``, ``edit`` and ``admin`` are aggregated roles, as upstream: each has an
``aggregationRule`` selecting ClusterRoles by a label
(``rbac.authorization.k8s.io/aggregate-to-<role>: "true"``) and its rules are the
union of theirs, kept by the aggregation controller (``controllers/clusterroles.py``).
The rules come from ``system:aggregate-to-view``, ``-edit`` and ``-admin``; ``view``
itself aggregates to ``edit`` and ``edit`` to ``admin``, so each grants what the one
before grants. A custom ClusterRole labelled ``aggregate-to-view: "true"`` (as a CRD's
operator installs) extends all three.

- view: read (get, list, watch) the namespaced workload, service, config and storage
  objects, their status and scale, events and quotas; not secrets, not RBAC.
- edit: what view does, and write (create, update, patch, delete, deletecollection)
  them, secrets included, Endpoints excepted (as upstream's since 1.22); exec, attach and port-forward to pods,
  proxy to pods and services; evict pods; request service account tokens and impersonate service accounts.
- admin: what edit does, Roles and RoleBindings of the namespace, and LocalSubjectAccessReviews.
- all three read the resource metrics (``system:aggregated-metrics-reader``, as
  metrics-server's manifest adds it).
- none of them may resize a pod (``pods/resize``), as upstream's: a resize is granted
  on its own.

The CertificateSigningRequest roles of upstream's bootstrap policy are here too
(``CERTIFICATE_ROLES``): an approver role for each built-in signer (``approve`` on
``signers``), the kubelets' ``nodeclient``/``selfnodeclient`` (which the approving
controller asks about) and ``system:node-bootstrapper`` (to request), and the
certificate controller's role and binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..scheduler.plugins.selectors import match_label_selector

__all__ = ["AGGREGATE_LABEL", "CERTIFICATE_BINDINGS", "CERTIFICATE_ROLES", "DEFAULT_ROLES", "aggregated_rules"]

AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-{}"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]

# API group -> the resources (and subresources) the default roles read and write
_READ: dict[str, list[str]] = {
    "": ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "pods/log",
         "pods/status", "replicationcontrollers", "replicationcontrollers/scale", "replicationcontrollers/status",
         "serviceaccounts", "services", "services/status", "events", "limitranges", "resourcequotas",
         "resourcequotas/status", "namespaces", "namespaces/status", "podtemplates"],
    "apps": ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
             "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
             "statefulsets/scale", "statefulsets/status"],
    "autoscaling": ["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
    "batch": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
    "policy": ["poddisruptionbudgets", "poddisruptionbudgets/status"],
    "networking.k8s.io": ["ingresses", "ingresses/status", "networkpolicies"],
    "discovery.k8s.io": ["endpointslices"],
    "events.k8s.io": ["events"],
    "resource.k8s.io": ["resourceclaims", "resourceclaims/status", "resourceclaimtemplates"],
    "scheduling.k8s.io": ["podgroups", "podgroups/status", "workloads"],
}
_WRITE: dict[str, list[str]] = {
    "": ["configmaps", "persistentvolumeclaims", "pods", "pods/attach", "pods/exec", "pods/portforward",
         "pods/proxy", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts",
         "services", "services/proxy"],  # (not endpoints, since upstream's 1.22: CVE-2021-25740)
    "apps": ["daemonsets", "deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets",
             "statefulsets/scale"],
    "autoscaling": ["horizontalpodautoscalers"],
    "batch": ["cronjobs", "jobs"],
    "policy": ["poddisruptionbudgets"],
    "networking.k8s.io": ["ingresses", "networkpolicies"],
    "discovery.k8s.io": ["endpointslices"],
    "resource.k8s.io": ["resourceclaims", "resourceclaimtemplates"],
    "scheduling.k8s.io": ["podgroups", "workloads"],
}


def _role(name: str, rules: list[dict[str, Any]], labels: Mapping[str, str] | None = None,
          aggregate_from: str | None = None) -> dict[str, Any]:
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
                     "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "rules": rules}
    if aggregate_from is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_LABEL.format(aggregate_from): "true"}}]}
    return role


DEFAULT_ROLES: tuple[dict[str, Any], ...] = (
    _role("admin", [], aggregate_from="admin"),
    _role("edit", [], {AGGREGATE_LABEL.format("admin"): "true"}, aggregate_from="edit"),
    _role("view", [], {AGGREGATE_LABEL.format("edit"): "true"}, aggregate_from="view"),
    _role("system:aggregate-to-view", [{"apiGroups": [g], "resources": r, "verbs": READ} for g, r in _READ.items()],
          {AGGREGATE_LABEL.format("view"): "true"}),
    _role("system:aggregate-to-edit",
          [{"apiGroups": [""], "resources": ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                                               "services/proxy"], "verbs": READ},
           {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
           {"apiGroups": [""], "resources": ["pods/eviction", "serviceaccounts/token"], "verbs": ["create"]},
           *({"apiGroups": [g], "resources": r, "verbs": WRITE} for g, r in _WRITE.items())],
          {AGGREGATE_LABEL.format("edit"): "true"}),
    _role("system:aggregate-to-admin",
          [{"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
           {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"], "verbs": READ + WRITE}],
          {AGGREGATE_LABEL.format("admin"): "true"}),
    # metrics-server installs this one: the resource metrics (api/resourcemetrics.py) for all three
    _role("system:aggregated-metrics-reader",
          [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": READ}],
          {AGGREGATE_LABEL.format(r): "true" for r in ("view", "edit", "admin")}),
)


CERTIFICATES = "certificates.k8s.io"
SIGNER_NAMES = ("kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
                "kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown")
CERTIFICATE_CONTROLLER = "system:controller:certificate-controller"


def _approver(signer: str) -> dict[str, Any]:
    """``system:certificates.k8s.io:<signer>-approver``: may approve the signer's requests
    (api/certificateadmission.py asks), bound to no one by default."""
    return _role(f"system:certificates.k8s.io:{signer.split('/')[1]}-approver", [
        {"apiGroups": [CERTIFICATES], "resources": ["signers"], "resourceNames": [signer], "verbs": ["approve"]}])


# upstream's bootstrap roles for CertificateSigningRequests: who may approve for each built-in
# signer, the kubelets' own requests, and kube-controller-manager's certificate controller (its
# signer and approver; bound to its service account, as upstream; the emulated one runs as admin)
CERTIFICATE_ROLES: tuple[dict[str, Any], ...] = (
    *(_approver(signer) for signer in SIGNER_NAMES),
    *(_role(f"system:certificates.k8s.io:certificatesigningrequests:{kind}", [
        {"apiGroups": [CERTIFICATES], "resources": [f"certificatesigningrequests/{kind}"], "verbs": ["create"]}])
      for kind in ("nodeclient", "selfnodeclient")),
    _role("system:node-bootstrapper", [{"apiGroups": [CERTIFICATES], "resources": ["certificatesigningrequests"],
                                        "verbs": ["create", "get", "list", "watch"]}]),
    _role(CERTIFICATE_CONTROLLER, [
        {"apiGroups": [CERTIFICATES], "resources": ["certificatesigningrequests"],
         "verbs": ["delete", "get", "list", "watch"]},
        {"apiGroups": [CERTIFICATES], "resources": ["certificatesigningrequests/approval",
                                                    "certificatesigningrequests/status"], "verbs": ["update"]},
        {"apiGroups": [CERTIFICATES], "resources": ["signers"],
         "resourceNames": ["kubernetes.io/kube-apiserver-client-kubelet"], "verbs": ["approve"]},
        {"apiGroups": [CERTIFICATES], "resources": ["signers"], "resourceNames": list(SIGNER_NAMES),
         "verbs": ["sign"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}]),
)
CERTIFICATE_BINDINGS: tuple[dict[str, Any], ...] = ({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": CERTIFICATE_CONTROLLER, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                 "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CERTIFICATE_CONTROLLER},
    "subjects": [{"kind": "ServiceAccount", "name": "certificate-controller", "namespace": "kube-system"}]},)


def aggregated_rules(role: Mapping[str, Any], roles: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules an aggregated ClusterRole should hold: those of every other ClusterRole
    one of its selectors matches, in name order, each once. None if it aggregates nothing."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    selectors = [s for s in rule.get("clusterRoleSelectors") or () if isinstance(s, dict)]
    name = (role.get("metadata") or {}).get("name")
    out: list[dict[str, Any]] = []
    for other in sorted(roles, key=lambda r: str((r.get("metadata") or {}).get("name", ""))):
        meta = other.get("metadata") or {}
        if meta.get("name") == name or not any(match_label_selector(s, meta.get("labels") or {}) for s in selectors):
            continue
        for r in other.get("rules") or ():
            if r not in out:
                out.append(dict(r))
    return out
